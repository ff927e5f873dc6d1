//! A flow's attributes as stored: a table of the words flowadm takes
//! (`transport = "tcp"`, `local_port = "22"`), checked as `add-flow -a`
//! checks them when read (a port may also be written as a number).

use std::collections::BTreeMap;

use netadm_model::FlowAttrs;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Serializes the attributes given as a table of words.
pub(crate) fn serialize<S: Serializer>(a: &FlowAttrs, s: S) -> Result<S::Ok, S::Error> {
    let words: BTreeMap<&str, String> = a.pairs().into_iter().collect();
    words.serialize(s)
}

/// A word, or a number written without quotes.
#[derive(Deserialize)]
#[serde(untagged)]
enum Word {
    Text(String),
    Number(u64),
}

/// Deserializes and checks them.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FlowAttrs, D::Error> {
    let words = BTreeMap::<String, Word>::deserialize(d)?;
    let words = words
        .into_iter()
        .map(|(k, w)| match w {
            Word::Text(t) => (k, t),
            Word::Number(n) => (k, n.to_string()),
        })
        .collect();
    FlowAttrs::parse(&words).map_err(serde::de::Error::custom)
}

//! Link properties as stored: typed values ([`LinkProps`]), parsed once
//! where they enter (`links.toml` and its journal, an apply's document)
//! and written in the words an operator types (`mtu = "9000"`,
//! `maxbw = "100"`, `xmit-batch = "off"`), as netadm always wrote them.

use std::collections::BTreeMap;

use netadm_model::{PropName, PropValue};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A link's properties: each value typed by its property's spec.
pub type LinkProps = BTreeMap<PropName, PropValue>;

/// A property value as a file holds it: a string, or (JSON) a number.
#[derive(Deserialize)]
#[serde(untagged)]
enum Word {
    Text(String),
    Number(u64),
}

/// Serializes [`LinkProps`] as a table of words.
pub(crate) fn serialize<S: Serializer>(props: &LinkProps, s: S) -> Result<S::Ok, S::Error> {
    let words: BTreeMap<&PropName, String> =
        props.iter().map(|(k, v)| (k, v.to_string())).collect();
    words.serialize(s)
}

/// Deserializes [`LinkProps`]: each word parsed by its property's spec; a
/// word the spec refuses is an error at that key.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LinkProps, D::Error> {
    let words = BTreeMap::<PropName, Word>::deserialize(d)?;
    words
        .into_iter()
        .map(|(name, w)| {
            let text = match w {
                Word::Text(t) => t,
                Word::Number(n) => n.to_string(),
            };
            let value = name.spec().parse_value(&text).map_err(serde::de::Error::custom)?;
            Ok((name, value))
        })
        .collect()
}

//! Link properties as stored: typed values ([`LinkProps`]), parsed once
//! where they enter (`links.toml` and its journal, an apply's document)
//! and written in the words an operator types (`mtu = "9000"`,
//! `maxbw = "100"`, `xmit-batch = "off"`), as netadm always wrote them.

use std::collections::BTreeMap;

use netadm_model::{PropName, PropValue};
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserializer, Serialize, Serializer};

/// A link's properties: each value typed by its property's spec.
pub type LinkProps = BTreeMap<PropName, PropValue>;

/// Serializes [`LinkProps`] as a table of words.
pub(crate) fn serialize<S: Serializer>(props: &LinkProps, s: S) -> Result<S::Ok, S::Error> {
    let words: BTreeMap<&PropName, String> =
        props.iter().map(|(k, v)| (k, v.to_string())).collect();
    words.serialize(s)
}

/// Deserializes [`LinkProps`]: each word parsed by its property's spec as
/// it is read, so that a word the spec refuses is an error at its own key
/// (and line).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LinkProps, D::Error> {
    d.deserialize_map(Props)
}

struct Props;

impl<'de> Visitor<'de> for Props {
    type Value = LinkProps;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of link properties")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LinkProps, A::Error> {
        let mut out = LinkProps::new();
        while let Some(name) = map.next_key::<PropName>()? {
            let value = map.next_value_seed(Value(name))?;
            if out.insert(name, value).is_some() {
                return Err(de::Error::custom(format!("link property {name} given twice")));
            }
        }
        Ok(out)
    }
}

/// One property's value, parsed by its spec: a string, or (JSON) a
/// number.
struct Value(PropName);

impl<'de> DeserializeSeed<'de> for Value {
    type Value = PropValue;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<PropValue, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Value {
    type Value = PropValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a value of link property {}", self.0)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<PropValue, E> {
        self.0.spec().parse_value(s).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<PropValue, E> {
        self.visit_str(&n.to_string())
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<PropValue, E> {
        self.visit_str(&n.to_string())
    }
}

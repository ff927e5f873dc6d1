//! `serde` support (feature `serde`): every string-like model type is
//! serialized as its `Display` string and deserialized through its `FromStr`,
//! so a config file is validated exactly like a CLI argument and the error
//! message is the `FromStr` error's `Display`.
//!
//! Deserialization asks for a string, but a self-describing format that holds
//! an integer there (TOML's hand-written `vid = 100`) has it parsed from its
//! decimal spelling; for non-numeric types the `FromStr` error then explains
//! what is wrong. Formats that honour the string hint (JSON) require strings.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::ser::{Serialize, Serializer};

use crate::{
    AddrObj, AggrPolicy, FlowName, LacpMode, LacpTimer, LinkClass, LinkName, MacAddr, PropName,
    VlanId,
};

/// Deserializes any `T: FromStr` from a string (or an integer's decimal form).
struct FromStrVisitor<T> {
    expecting: &'static str,
    _marker: PhantomData<fn() -> T>,
}

impl<T> FromStrVisitor<T> {
    fn new(expecting: &'static str) -> Self {
        Self { expecting, _marker: PhantomData }
    }
}

impl<T> Visitor<'_> for FromStrVisitor<T>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
}

macro_rules! display_from_str {
    ($($ty:ty => $expecting:literal,)*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // Any: a JSON number (`"vid": 12`) is taken as its decimal
                // form, as TOML's is.
                deserializer.deserialize_any(FromStrVisitor::new($expecting))
            }
        }
    )*};
}

display_from_str! {
    LinkName => "a link name",
    LinkClass => "a link class (phys, aggr, vnic or etherstub)",
    AddrObj => "an address object name (INTERFACE/TAG)",
    MacAddr => "a MAC address",
    VlanId => "a VLAN ID (1..=4094)",
    AggrPolicy => "an aggregation policy (comma-separated L2, L3, L4)",
    LacpMode => "a LACP mode (off, active or passive)",
    LacpTimer => "a LACP timer (short or long)",
    PropName => "a link property name",
    FlowName => "a flow name",
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fmt::Debug;

    use serde::de::DeserializeOwned;
    use serde::de::value::{Error as ValueError, StrDeserializer, U64Deserializer};

    use super::*;

    /// `value` serializes as its Display string and comes back equal.
    fn round_trip<T>(text: &str)
    where
        T: FromStr + Serialize + DeserializeOwned + PartialEq + Debug + fmt::Display,
        T::Err: Debug,
    {
        let value: T = text.parse().unwrap();
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, serde_json::to_string(&value.to_string()).unwrap());
        assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value, "{json}");
    }

    /// Deserializing `bad` fails with exactly the FromStr error's message.
    fn rejects<T>(bad: &str)
    where
        T: FromStr + DeserializeOwned + Debug,
        T::Err: fmt::Display + Debug,
    {
        let want = bad.parse::<T>().unwrap_err().to_string();
        let got = T::deserialize(StrDeserializer::<ValueError>::new(bad)).unwrap_err();
        assert_eq!(got.to_string(), want);
        let json = serde_json::to_string(bad).unwrap();
        let got = serde_json::from_str::<T>(&json).unwrap_err().to_string();
        assert!(got.starts_with(&want), "{got:?} does not start with {want:?}");
    }

    /// Every type above with a spelling it takes and one it refuses, in one
    /// table for the round-trip and the error tests.
    macro_rules! each_type {
        ($($ty:ty: $good:literal, $bad:literal;)*) => {
            /// [`round_trip`] of each type's good spelling.
            fn round_trip_each() {
                $(round_trip::<$ty>($good);)*
            }

            /// [`rejects`] of each type's bad spelling.
            fn reject_each() {
                $(rejects::<$ty>($bad);)*
            }
        };
    }

    each_type! {
        LinkName: "i40e0", "0abc";
        LinkClass: "aggr", "bridge";
        AddrObj: "net0/v4", "net0";
        MacAddr: "2:8:20:ab:cd:ef", "1:2:3";
        VlanId: "4094", "4095";
        AggrPolicy: "L2,L4", "L5";
        LacpMode: "passive", "on";
        LacpTimer: "long", "medium";
        PropName: "rxrings-effective", "colour";
    }

    #[test]
    fn every_type_round_trips_as_its_display_string() {
        round_trip_each();
        assert_eq!(
            serde_json::to_string(&"L4,l2".parse::<AggrPolicy>().unwrap()).unwrap(),
            r#""L2,L4""#
        );
    }

    #[test]
    fn errors_are_the_from_str_messages() {
        reject_each();
    }

    #[test]
    fn integers_parse_through_their_decimal_form() {
        // A self-describing format that holds an integer (TOML's `vid = 100`)
        // hands it to the visitor as one.
        let int = |v: u64| U64Deserializer::<ValueError>::new(v);
        assert_eq!(VlanId::deserialize(int(100)).unwrap().get(), 100);
        let e = VlanId::deserialize(int(0)).unwrap_err().to_string();
        assert_eq!(e, r#"VLAN ID "0": must be between 1 and 4094"#);
        let e = LinkName::deserialize(int(5)).unwrap_err().to_string();
        assert_eq!(e, r#"link name "5": must start with a letter"#);
        assert!(serde_json::from_str::<LinkName>("true").is_err());
    }

    #[test]
    fn model_types_work_as_map_keys() {
        let mut m = BTreeMap::new();
        m.insert("net0/v4".parse::<AddrObj>().unwrap(), "x".to_owned());
        m.insert("net0/v6".parse::<AddrObj>().unwrap(), "y".to_owned());
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"net0/v4":"x","net0/v6":"y"}"#);
        assert_eq!(serde_json::from_str::<BTreeMap<AddrObj, String>>(&json).unwrap(), m);
        let bad = serde_json::from_str::<BTreeMap<LinkName, u8>>(r#"{"net-0": 1}"#);
        assert!(bad.unwrap_err().to_string().contains("character '-' at position 3"));
    }
}

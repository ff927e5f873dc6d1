//! Datalink names and classes.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use crate::word::{WordFault, check_word};

/// Why a string is not a valid datalink name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkNameError {
    /// The name is the empty string.
    #[error("link name is empty")]
    Empty,
    /// The name is longer than [`LinkName::MAX_LEN`] bytes.
    #[error("link name {name:?}: {len} bytes long, at most {max} allowed")]
    TooLong {
        /// The rejected name.
        name: String,
        /// Its length in bytes.
        len: usize,
        /// The maximum length in bytes.
        max: usize,
    },
    /// The name contains a character other than an ASCII letter, digit or `_`.
    #[error(
        "link name {name:?}: character {ch:?} at position {pos} is not allowed \
         (only ASCII letters, digits and '_')"
    )]
    BadChar {
        /// The rejected name.
        name: String,
        /// The first offending character.
        ch: char,
        /// Its 0-based position (every character before it is ASCII, so this
        /// is both the byte offset and the character index).
        pos: usize,
    },
    /// The name does not start with an ASCII letter.
    #[error("link name {name:?}: must start with a letter")]
    BadStart {
        /// The rejected name.
        name: String,
    },
    /// The name does not end with an ASCII digit (the instance number).
    #[error("link name {name:?}: must end with a digit")]
    BadEnd {
        /// The rejected name.
        name: String,
    },
}

/// A validated datalink name, following dladm's rules.
///
/// ASCII letters, digits and `_` only; starts with a letter; ends with a digit
/// (the instance number); at most [`LinkName::MAX_LEN`] bytes. Examples:
/// `i40e0`, `aggr0`, `net_1`. Rejected: `0net`, `net`, `net-1`, `näme0` and the empty string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkName(String);

impl LinkName {
    /// Maximum length in bytes (illumos `MAXLINKNAMELEN` 32 minus the NUL).
    pub const MAX_LEN: usize = 31;

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Consumes the name, returning the owned string.
    pub fn into_string(self) -> String {
        self.0
    }

    fn check(name: &str) -> Result<(), LinkNameError> {
        let owned = || name.to_owned();
        check_word(name, Self::MAX_LEN).map_err(|f| match f {
            WordFault::Empty => LinkNameError::Empty,
            WordFault::TooLong { len } => {
                LinkNameError::TooLong { name: owned(), len, max: Self::MAX_LEN }
            }
            WordFault::BadChar { pos, ch } => LinkNameError::BadChar { name: owned(), ch, pos },
            WordFault::BadStart => LinkNameError::BadStart { name: owned() },
        })?;
        if !name.as_bytes()[name.len() - 1].is_ascii_digit() {
            return Err(LinkNameError::BadEnd { name: owned() });
        }
        Ok(())
    }
}

impl TryFrom<String> for LinkName {
    type Error = LinkNameError;
    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::check(&name)?;
        Ok(Self(name))
    }
}

impl TryFrom<&str> for LinkName {
    type Error = LinkNameError;
    fn try_from(name: &str) -> Result<Self, Self::Error> {
        Self::check(name)?;
        Ok(Self(name.to_owned()))
    }
}

impl FromStr for LinkName {
    type Err = LinkNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(s)
    }
}

impl fmt::Display for LinkName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl AsRef<str> for LinkName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for LinkName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<LinkName> for String {
    fn from(name: LinkName) -> Self {
        name.0
    }
}

keywords! {
    /// The class of a datalink, as shown in dladm's CLASS column.
    pub enum LinkClass parse "link class" {
        /// A physical port driven by a NIC driver.
        Phys = "phys",
        /// A link aggregation of physical ports.
        Aggr = "aggr",
        /// A virtual NIC over a physical link, an aggregation or an etherstub.
        Vnic = "vnic",
        /// A virtual switch with no port: the VNICs over it reach only each
        /// other (`dladm create-etherstub`).
        Etherstub = "etherstub",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_names() {
        let long31 = format!("a{}1", "b".repeat(29));
        assert_eq!(long31.len(), 31);
        for ok in ["aggr0", "i40e0", "atl1c3", "net_1", "a0", "Z9", "vnic_web_42", long31.as_str()]
        {
            let n: LinkName = ok.parse().unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(n.as_str(), ok);
            assert_eq!(n.to_string(), ok);
            assert_eq!(LinkName::try_from(ok.to_owned()).unwrap(), n);
            assert_eq!(LinkName::try_from(ok).unwrap(), n);
        }
    }

    #[test]
    fn rejects_invalid_names() {
        let long32 = format!("a{}1", "b".repeat(30));
        assert_eq!(long32.len(), 32);
        let s = |x: &str| x.to_owned();
        let cases: Vec<(&str, LinkNameError)> = vec![
            ("", LinkNameError::Empty),
            (&long32, LinkNameError::TooLong { name: long32.clone(), len: 32, max: 31 }),
            ("0net", LinkNameError::BadStart { name: s("0net") }),
            ("_net0", LinkNameError::BadStart { name: s("_net0") }),
            ("0", LinkNameError::BadStart { name: s("0") }),
            ("net", LinkNameError::BadEnd { name: s("net") }),
            ("net0_", LinkNameError::BadEnd { name: s("net0_") }),
            ("net-1", LinkNameError::BadChar { name: s("net-1"), ch: '-', pos: 3 }),
            ("näme0", LinkNameError::BadChar { name: s("näme0"), ch: 'ä', pos: 1 }),
            (" net0", LinkNameError::BadChar { name: s(" net0"), ch: ' ', pos: 0 }),
            ("net0\n", LinkNameError::BadChar { name: s("net0\n"), ch: '\n', pos: 4 }),
            ("net/0", LinkNameError::BadChar { name: s("net/0"), ch: '/', pos: 3 }),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<LinkName>(), Err(want.clone()), "{input:?}");
            assert_eq!(LinkName::try_from(input.to_owned()), Err(want), "{input:?}");
        }
    }

    #[test]
    fn error_messages_name_the_input() {
        let msg = |s: &str| s.parse::<LinkName>().unwrap_err().to_string();
        assert_eq!(msg("0abc"), r#"link name "0abc": must start with a letter"#);
        assert_eq!(msg("net"), r#"link name "net": must end with a digit"#);
        assert_eq!(msg(""), "link name is empty");
        assert!(msg("net-1").contains(r#"character '-' at position 3"#));
        assert!(msg(&"a".repeat(40)).contains("40 bytes long, at most 31"));
    }

    #[test]
    fn round_trip_generated_names() {
        // Deterministic xorshift generator: a property test without proptest.
        const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..5000 {
            let len = 2 + (next() % 30) as usize;
            let mut s = String::new();
            s.push((b'a' + (next() % 26) as u8) as char);
            for _ in 0..len - 2 {
                s.push(ALNUM[(next() % ALNUM.len() as u64) as usize] as char);
            }
            s.push((b'0' + (next() % 10) as u8) as char);
            let n: LinkName = s.parse().unwrap();
            assert_eq!(n.to_string().parse::<LinkName>().unwrap(), n);
        }
    }

    #[test]
    fn ordering_and_borrow() {
        use std::collections::BTreeSet;
        let set: BTreeSet<LinkName> =
            ["net1", "aggr0", "i40e0"].iter().map(|s| s.parse().unwrap()).collect();
        assert!(set.contains("aggr0"));
        let v: Vec<&str> = set.iter().map(LinkName::as_str).collect();
        assert_eq!(v, ["aggr0", "i40e0", "net1"]);
    }

    #[test]
    fn link_class_round_trip() {
        for c in LinkClass::ALL {
            assert_eq!(c.to_string().parse::<LinkClass>().unwrap(), c);
        }
        assert_eq!(LinkClass::Phys.to_string(), "phys");
        assert_eq!(LinkClass::Aggr.to_string(), "aggr");
        assert_eq!(LinkClass::Vnic.to_string(), "vnic");
        assert_eq!(LinkClass::Etherstub.to_string(), "etherstub");
        assert_eq!("VNIC".parse::<LinkClass>().unwrap(), LinkClass::Vnic);
        let e = "bridge".parse::<LinkClass>().unwrap_err();
        assert_eq!(e.input, "bridge");
        assert_eq!(
            e.to_string(),
            r#"link class "bridge": expected one of phys, aggr, vnic, etherstub"#
        );
        assert!("".parse::<LinkClass>().is_err());
    }
}

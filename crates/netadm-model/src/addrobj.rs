//! ipadm address objects (`IF/TAG`).

use std::fmt;
use std::str::FromStr;

use crate::link::{LinkName, LinkNameError};
use crate::word::{WordFault, check_word};

/// Why a string is not a valid address object name.
///
/// Variants about the tag carry the whole input, so the message shows the
/// operator exactly what they typed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrObjError {
    /// There is no `/` separating interface and tag.
    #[error("address object {input:?}: expected INTERFACE/TAG, e.g. \"net0/v4\"")]
    MissingSlash {
        /// The rejected input.
        input: String,
    },
    /// The interface part is not a valid link name (the reason is included
    /// in this error's message rather than exposed as a `source()`).
    #[error("address object {input:?}: bad interface: {reason}")]
    Interface {
        /// The rejected input.
        input: String,
        /// Why the interface part is not a link name.
        reason: LinkNameError,
    },
    /// The tag after `/` is empty.
    #[error("address object {input:?}: tag is empty")]
    EmptyTag {
        /// The rejected input.
        input: String,
    },
    /// The tag is longer than [`AddrObj::MAX_TAG_LEN`] bytes.
    #[error("address object {input:?}: tag is {len} bytes long, at most {max} allowed")]
    TagTooLong {
        /// The rejected input.
        input: String,
        /// The tag's length in bytes.
        len: usize,
        /// The maximum tag length in bytes.
        max: usize,
    },
    /// The tag does not start with an ASCII letter.
    #[error("address object {input:?}: tag must start with a letter")]
    TagBadStart {
        /// The rejected input.
        input: String,
    },
    /// The tag contains a character other than an ASCII letter, digit or `_`.
    #[error(
        "address object {input:?}: tag character {ch:?} at position {pos} is not allowed \
         (only ASCII letters, digits and '_')"
    )]
    TagBadChar {
        /// The rejected input.
        input: String,
        /// The first offending character.
        ch: char,
        /// Its 0-based position within the tag.
        pos: usize,
    },
}

/// A validated ipadm address object name, `INTERFACE/TAG` (e.g. `net0/v4`).
///
/// The interface is a [`LinkName`]; the tag is 1..=[`AddrObj::MAX_TAG_LEN`]
/// bytes of ASCII letters, digits and `_`, starting with a letter. The input
/// is split at the first `/`, so `net0/a/b` is rejected for its tag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrObj {
    interface: LinkName,
    tag: String,
}

impl AddrObj {
    /// Maximum tag length in bytes.
    pub const MAX_TAG_LEN: usize = 32;

    /// Builds an address object from an already valid interface and a tag.
    pub fn new(interface: LinkName, tag: &str) -> Result<Self, AddrObjError> {
        let input = || format!("{interface}/{tag}");
        check_tag(tag, input)?;
        Ok(Self { interface, tag: tag.to_owned() })
    }

    /// The interface (link) part.
    pub fn interface(&self) -> &LinkName {
        &self.interface
    }

    /// The tag part.
    pub fn tag(&self) -> &str {
        &self.tag
    }
}

fn check_tag(tag: &str, input: impl Fn() -> String) -> Result<(), AddrObjError> {
    check_word(tag, AddrObj::MAX_TAG_LEN).map_err(|f| match f {
        WordFault::Empty => AddrObjError::EmptyTag { input: input() },
        WordFault::TooLong { len } => {
            AddrObjError::TagTooLong { input: input(), len, max: AddrObj::MAX_TAG_LEN }
        }
        WordFault::BadChar { pos, ch } => AddrObjError::TagBadChar { input: input(), ch, pos },
        WordFault::BadStart => AddrObjError::TagBadStart { input: input() },
    })
}

impl FromStr for AddrObj {
    type Err = AddrObjError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let input = || s.to_owned();
        let (ifname, tag) =
            s.split_once('/').ok_or_else(|| AddrObjError::MissingSlash { input: input() })?;
        let interface = LinkName::try_from(ifname)
            .map_err(|reason| AddrObjError::Interface { input: input(), reason })?;
        check_tag(tag, input)?;
        Ok(Self { interface, tag: tag.to_owned() })
    }
}

impl TryFrom<&str> for AddrObj {
    type Error = AddrObjError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl TryFrom<String> for AddrObj {
    type Error = AddrObjError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl fmt::Display for AddrObj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.interface, self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid() {
        let tag32 = format!("t{}", "x".repeat(31));
        let max = format!("net0/{tag32}");
        for ok in ["net0/v4", "i40e0/a", "aggr1/v6_ll", "net_1/Addr9", max.as_str()] {
            let a: AddrObj = ok.parse().unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(a.to_string(), ok);
            assert_eq!(a.to_string().parse::<AddrObj>().unwrap(), a);
        }
        let a: AddrObj = "net0/v4".parse().unwrap();
        assert_eq!(a.interface().as_str(), "net0");
        assert_eq!(a.tag(), "v4");
        assert_eq!(AddrObj::new("net0".parse().unwrap(), "v4").unwrap(), a);
    }

    #[test]
    fn rejects_invalid() {
        let s = |x: &str| x.to_owned();
        let tag33 = format!("net0/t{}", "x".repeat(32));
        let cases = vec![
            ("net0", AddrObjError::MissingSlash { input: s("net0") }),
            ("", AddrObjError::MissingSlash { input: s("") }),
            ("/v4", AddrObjError::Interface { input: s("/v4"), reason: LinkNameError::Empty }),
            (
                "0net/v4",
                AddrObjError::Interface {
                    input: s("0net/v4"),
                    reason: LinkNameError::BadStart { name: s("0net") },
                },
            ),
            ("net0/", AddrObjError::EmptyTag { input: s("net0/") }),
            (&tag33, AddrObjError::TagTooLong { input: tag33.clone(), len: 33, max: 32 }),
            ("net0/4v", AddrObjError::TagBadStart { input: s("net0/4v") }),
            ("net0/_v", AddrObjError::TagBadStart { input: s("net0/_v") }),
            ("net0/v-4", AddrObjError::TagBadChar { input: s("net0/v-4"), ch: '-', pos: 1 }),
            ("net0/a/b", AddrObjError::TagBadChar { input: s("net0/a/b"), ch: '/', pos: 1 }),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<AddrObj>(), Err(want), "{input:?}");
        }
        assert_eq!(
            AddrObj::new("net0".parse().unwrap(), ""),
            Err(AddrObjError::EmptyTag { input: s("net0/") })
        );
    }

    #[test]
    fn messages() {
        let msg = |x: &str| x.parse::<AddrObj>().unwrap_err().to_string();
        assert_eq!(
            msg("0net/v4"),
            r#"address object "0net/v4": bad interface: link name "0net": must start with a letter"#
        );
        assert_eq!(msg("net0/4v"), r#"address object "net0/4v": tag must start with a letter"#);
    }
}

//! IEEE 802.1Q VLAN IDs.

use std::fmt;
use std::str::FromStr;

/// Why a string or number is not a valid VLAN ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VlanIdError {
    /// The input is not a plain decimal number.
    #[error("VLAN ID {input:?}: not a decimal number")]
    NotANumber {
        /// The rejected input.
        input: String,
    },
    /// The number is outside 1..=4094 (0 and 4095 are reserved by 802.1Q).
    #[error("VLAN ID {input:?}: must be between {} and {}", VlanId::MIN, VlanId::MAX)]
    OutOfRange {
        /// The rejected input (decimal).
        input: String,
    },
}

/// A usable 802.1Q VLAN ID, 1..=4094.
///
/// 0 is not a `VlanId`: at the CLI level (`create-vnic -v 0`) it means "no
/// VLAN", which [`VlanId::parse_opt`] maps to `None`. 4095 is reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VlanId(u16);

impl VlanId {
    /// Smallest valid VLAN ID.
    pub const MIN: u16 = 1;
    /// Largest valid VLAN ID.
    pub const MAX: u16 = 4094;

    /// The numeric ID.
    pub fn get(self) -> u16 {
        self.0
    }

    /// Parses a CLI VLAN argument where `0` means "untagged" (`Ok(None)`).
    pub fn parse_opt(s: &str) -> Result<Option<VlanId>, VlanIdError> {
        match parse_decimal(s)? {
            0 => Ok(None),
            _ => s.parse().map(Some),
        }
    }
}

/// Strict decimal: digits only, no sign or whitespace. Overflow saturates, so
/// huge inputs are reported as out of range rather than as not-a-number.
fn parse_decimal(s: &str) -> Result<u64, VlanIdError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VlanIdError::NotANumber { input: s.to_owned() });
    }
    Ok(s.parse().unwrap_or(u64::MAX))
}

impl TryFrom<u16> for VlanId {
    type Error = VlanIdError;
    fn try_from(v: u16) -> Result<Self, Self::Error> {
        if (Self::MIN..=Self::MAX).contains(&v) {
            Ok(Self(v))
        } else {
            Err(VlanIdError::OutOfRange { input: v.to_string() })
        }
    }
}

impl FromStr for VlanId {
    type Err = VlanIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let v = parse_decimal(s)?;
        u16::try_from(v)
            .ok()
            .and_then(|v| VlanId::try_from(v).ok())
            .ok_or_else(|| VlanIdError::OutOfRange { input: s.to_owned() })
    }
}

impl From<VlanId> for u16 {
    fn from(v: VlanId) -> Self {
        v.0
    }
}

impl fmt::Display for VlanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries() {
        for ok in [1u16, 2, 100, 4093, 4094] {
            assert_eq!(VlanId::try_from(ok).unwrap().get(), ok);
            let v: VlanId = ok.to_string().parse().unwrap();
            assert_eq!(u16::from(v), ok);
            assert_eq!(v.to_string(), ok.to_string());
        }
        for bad in [0u16, 4095, 4096, u16::MAX] {
            assert_eq!(
                VlanId::try_from(bad),
                Err(VlanIdError::OutOfRange { input: bad.to_string() })
            );
        }
        for bad in ["0", "4095", "65536", "99999999999999999999999"] {
            assert_eq!(bad.parse::<VlanId>(), Err(VlanIdError::OutOfRange { input: bad.into() }));
        }
        for bad in ["", "abc", "-1", "+5", " 5", "5 ", "0x10", "1.0"] {
            assert_eq!(bad.parse::<VlanId>(), Err(VlanIdError::NotANumber { input: bad.into() }));
        }
    }

    #[test]
    fn parse_opt_zero_means_none() {
        assert_eq!(VlanId::parse_opt("0"), Ok(None));
        assert_eq!(VlanId::parse_opt("000"), Ok(None));
        assert_eq!(VlanId::parse_opt("7"), Ok(Some(VlanId(7))));
        assert!(matches!(VlanId::parse_opt("4095"), Err(VlanIdError::OutOfRange { .. })));
        assert!(matches!(VlanId::parse_opt(""), Err(VlanIdError::NotANumber { .. })));
    }

    #[test]
    fn message() {
        assert_eq!(
            "5000".parse::<VlanId>().unwrap_err().to_string(),
            r#"VLAN ID "5000": must be between 1 and 4094"#
        );
    }
}

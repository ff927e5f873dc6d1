//! Ethernet MAC addresses in dladm notation.

use std::fmt;
use std::str::FromStr;

/// Why a string is not a valid MAC address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MacAddrError {
    /// The input is the empty string.
    #[error("MAC address is empty")]
    Empty,
    /// The input does not have exactly six `:`-separated octets.
    #[error("MAC address {input:?}: expected 6 octets separated by ':', found {count}")]
    WrongOctetCount {
        /// The rejected input.
        input: String,
        /// How many `:`-separated fields it has.
        count: usize,
    },
    /// One octet is not 1 or 2 hexadecimal digits.
    #[error("MAC address {input:?}: octet {index} ({octet:?}) must be 1 or 2 hex digits")]
    BadOctet {
        /// The rejected input.
        input: String,
        /// The offending field.
        octet: String,
        /// Its 1-based position (1..=6).
        index: usize,
    },
}

/// A 48-bit Ethernet MAC address.
///
/// Parsed from dladm notation: six `:`-separated octets of 1 or 2 hex digits
/// (either case), e.g. `0:1b:21:a:b:c` or `00:1B:21:0A:0B:0C`. Displayed as
/// dladm does: lowercase, no leading zeros, e.g. `2:8:20:a1:b2:c3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The six octets.
    pub fn octets(self) -> [u8; 6] {
        self.0
    }

    /// True for group addresses (I/G bit, bit 0 of the first octet, set);
    /// this includes broadcast.
    pub fn is_multicast(self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True for individual (unicast) addresses: the I/G bit is clear.
    pub fn is_unicast(self) -> bool {
        !self.is_multicast()
    }

    /// True for locally administered addresses (U/L bit, bit 1 of the first
    /// octet, set), as used for generated VNIC addresses.
    pub fn is_local(self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// True for `ff:ff:ff:ff:ff:ff`.
    pub fn is_broadcast(self) -> bool {
        self == Self::BROADCAST
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(octets: [u8; 6]) -> Self {
        Self(octets)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(mac: MacAddr) -> Self {
        mac.0
    }
}

impl FromStr for MacAddr {
    type Err = MacAddrError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(MacAddrError::Empty);
        }
        let count = s.split(':').count();
        if count != 6 {
            return Err(MacAddrError::WrongOctetCount { input: s.to_owned(), count });
        }
        let mut out = [0u8; 6];
        for (i, (field, slot)) in s.split(':').zip(out.iter_mut()).enumerate() {
            let ok = (1..=2).contains(&field.len()) && field.bytes().all(|b| b.is_ascii_hexdigit());
            // from_str_radix alone would accept a leading '+'.
            match ok.then(|| u8::from_str_radix(field, 16)) {
                Some(Ok(v)) => *slot = v,
                _ => {
                    return Err(MacAddrError::BadOctet {
                        input: s.to_owned(),
                        octet: field.to_owned(),
                        index: i + 1,
                    });
                }
            }
        }
        Ok(Self(out))
    }
}

impl TryFrom<&str> for MacAddr {
    type Error = MacAddrError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        let s = format!("{a:x}:{b:x}:{c:x}:{d:x}:{e:x}:{g:x}");
        f.pad(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dladm_and_padded_forms() {
        let cases = [
            ("0:1b:21:a:b:c", [0x00, 0x1b, 0x21, 0x0a, 0x0b, 0x0c]),
            ("00:1B:21:0A:0b:0C", [0x00, 0x1b, 0x21, 0x0a, 0x0b, 0x0c]),
            ("2:8:20:a1:b2:c3", [0x02, 0x08, 0x20, 0xa1, 0xb2, 0xc3]),
            ("ff:ff:ff:ff:ff:ff", [0xff; 6]),
            ("0:0:0:0:0:0", [0; 6]),
        ];
        for (s, octets) in cases {
            assert_eq!(s.parse::<MacAddr>(), Ok(MacAddr(octets)), "{s}");
        }
    }

    #[test]
    fn displays_like_dladm() {
        let m = MacAddr([0x02, 0x08, 0x20, 0xa1, 0xb2, 0xc3]);
        assert_eq!(m.to_string(), "2:8:20:a1:b2:c3");
        assert_eq!(MacAddr([0; 6]).to_string(), "0:0:0:0:0:0");
        assert_eq!("00:1B:21:0A:0b:0C".parse::<MacAddr>().unwrap().to_string(), "0:1b:21:a:b:c");
    }

    #[test]
    fn rejects_invalid() {
        let s = |x: &str| x.to_owned();
        let cases = [
            ("", MacAddrError::Empty),
            ("0:1:2:3:4", MacAddrError::WrongOctetCount { input: s("0:1:2:3:4"), count: 5 }),
            (
                "0:1:2:3:4:5:6",
                MacAddrError::WrongOctetCount { input: s("0:1:2:3:4:5:6"), count: 7 },
            ),
            (
                "00-1b-21-0a-0b-0c",
                MacAddrError::WrongOctetCount { input: s("00-1b-21-0a-0b-0c"), count: 1 },
            ),
            (
                "0:1:2::4:5",
                MacAddrError::BadOctet { input: s("0:1:2::4:5"), octet: s(""), index: 4 },
            ),
            (
                "0:1:2:3:4:100",
                MacAddrError::BadOctet { input: s("0:1:2:3:4:100"), octet: s("100"), index: 6 },
            ),
            (
                "g:1:2:3:4:5",
                MacAddrError::BadOctet { input: s("g:1:2:3:4:5"), octet: s("g"), index: 1 },
            ),
            (
                "+f:1:2:3:4:5",
                MacAddrError::BadOctet { input: s("+f:1:2:3:4:5"), octet: s("+f"), index: 1 },
            ),
            (
                "0:1:2:3:4: 5",
                MacAddrError::BadOctet { input: s("0:1:2:3:4: 5"), octet: s(" 5"), index: 6 },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<MacAddr>(), Err(want), "{input:?}");
        }
        assert_eq!(
            "0:1:2:3:4:100".parse::<MacAddr>().unwrap_err().to_string(),
            r#"MAC address "0:1:2:3:4:100": octet 6 ("100") must be 1 or 2 hex digits"#
        );
    }

    #[test]
    fn address_bits() {
        let uni: MacAddr = "0:1b:21:a:b:c".parse().unwrap();
        assert!(uni.is_unicast() && !uni.is_multicast() && !uni.is_local());
        let local: MacAddr = "2:8:20:a1:b2:c3".parse().unwrap();
        assert!(local.is_unicast() && local.is_local());
        let mcast: MacAddr = "1:0:5e:0:0:1".parse().unwrap();
        assert!(mcast.is_multicast() && !mcast.is_unicast() && !mcast.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_local());
    }

    #[test]
    fn round_trip_generated() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            let m = MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]);
            assert_eq!(m.to_string().parse::<MacAddr>(), Ok(m));
            let padded = m.0.map(|o| format!("{o:02X}")).join(":");
            assert_eq!(padded.parse::<MacAddr>(), Ok(m));
        }
        // Every single-octet value round-trips in every position.
        for v in 0..=255u8 {
            for pos in 0..6 {
                let mut o = [0u8; 6];
                o[pos] = v;
                let m = MacAddr(o);
                assert_eq!(m.to_string().parse::<MacAddr>(), Ok(m));
            }
        }
    }
}

//! Link protection's values, as dladm spells them: `protection`
//! (`mac-nospoof,ip-nospoof,dhcp-nospoof,restricted`), `allowed-ips` (IP
//! addresses and prefixes) and `allowed-dhcp-cids` (DHCP client
//! identifiers). Each is parsed once here; the datapath and the kernel's
//! rules take the typed values.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The most entries `allowed-ips` and `allowed-dhcp-cids` take (illumos's
/// `MPT_MAXIPADDR` and `MPT_MAXCID`).
pub const MAX_LIST: usize = 32;

/// The words of `protection`, in the order they are shown (and checked).
pub const PROTECTIONS: [&str; 4] = ["mac-nospoof", "ip-nospoof", "dhcp-nospoof", "restricted"];

/// Why a protection value was refused (the property's name is added by
/// the caller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtectError {
    /// A word `protection` does not have.
    #[error("{word:?} is not one of mac-nospoof, ip-nospoof, dhcp-nospoof, restricted")]
    UnknownWord {
        /// The word.
        word: String,
    },
    /// An empty list, or an empty item in one.
    #[error("empty item in the list {list:?}")]
    EmptyItem {
        /// The list as given.
        list: String,
    },
    /// An item given twice.
    #[error("{item:?} given twice")]
    Duplicate {
        /// The item.
        item: String,
    },
    /// More than [`MAX_LIST`] items.
    #[error("{count} items; at most {MAX_LIST}")]
    TooMany {
        /// How many there were.
        count: usize,
    },
    /// Not an IP address or prefix.
    #[error("{item:?} is not an IP address or ADDRESS/PREFIXLEN")]
    NotAnAddress {
        /// The item.
        item: String,
    },
    /// A prefix whose address has bits set past its length.
    #[error("{item:?} has host bits set past /{len}; write {network}/{len}")]
    HostBits {
        /// The item.
        item: String,
        /// Its prefix length.
        len: u8,
        /// The network it lies in.
        network: IpAddr,
    },
    /// Not a client identifier.
    #[error(
        "{item:?} is not a DHCP client identifier (0xHEX, a DUID 1.HWTYPE.TIME.LLADDR, 2.ENTERPRISE.HEX or 3.HWTYPE.LLADDR, or text)"
    )]
    NotAClientId {
        /// The item.
        item: String,
    },
}

/// The set of protections a link has (`protection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Protection(u8);

impl Protection {
    /// `mac-nospoof`: only the link's own source MAC leaves.
    pub const MAC_NOSPOOF: Protection = Protection(1);
    /// `ip-nospoof`: only allowed IP and ARP senders leave.
    pub const IP_NOSPOOF: Protection = Protection(2);
    /// `dhcp-nospoof`: only allowed DHCP client identifiers, no DHCP
    /// server messages.
    pub const DHCP_NOSPOOF: Protection = Protection(4);
    /// `restricted`: only IPv4, IPv6 and ARP leave.
    pub const RESTRICTED: Protection = Protection(8);
    const ALL: [Protection; 4] =
        [Self::MAC_NOSPOOF, Self::IP_NOSPOOF, Self::DHCP_NOSPOOF, Self::RESTRICTED];

    /// Whether every protection of `p` is on.
    pub fn has(self, p: Protection) -> bool {
        self.0 & p.0 == p.0 && p.0 != 0
    }

    /// Whether none is on.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The protections of both.
    pub fn union(self, p: Protection) -> Protection {
        Protection(self.0 | p.0)
    }

    /// The words of the protections that are on, in [`PROTECTIONS`] order.
    pub fn words(self) -> impl Iterator<Item = &'static str> {
        Self::ALL.into_iter().zip(PROTECTIONS).filter(move |(p, _)| self.has(*p)).map(|(_, w)| w)
    }
}

impl FromStr for Protection {
    type Err = ProtectError;
    /// A comma-separated list of [`PROTECTIONS`] words, each once.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = Protection::default();
        for word in items(s)? {
            let i = PROTECTIONS
                .iter()
                .position(|w| *w == word)
                .ok_or_else(|| ProtectError::UnknownWord { word: word.to_owned() })?;
            let p = Self::ALL[i];
            if out.has(p) {
                return Err(ProtectError::Duplicate { item: word.to_owned() });
            }
            out = out.union(p);
        }
        Ok(out)
    }
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.words().collect::<Vec<_>>().join(","))
    }
}

/// The non-empty items of a comma-separated list, at most [`MAX_LIST`].
fn items(s: &str) -> Result<Vec<&str>, ProtectError> {
    let v: Vec<&str> = s.split(',').collect();
    if v.iter().any(|i| i.is_empty()) {
        return Err(ProtectError::EmptyItem { list: s.to_owned() });
    }
    if v.len() > MAX_LIST {
        return Err(ProtectError::TooMany { count: v.len() });
    }
    Ok(v)
}

/// An address or prefix of `allowed-ips`: a sender whose address lies in
/// it may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    /// The network (no bits past `len`).
    pub addr: IpAddr,
    /// The prefix length: 32 or 128 for one address.
    pub len: u8,
}

impl IpPrefix {
    /// Whether `ip` lies in it.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let m = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(n) == u32::from(a) & m
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let m = u128::MAX.checked_shl(128 - u32::from(self.len)).unwrap_or(0);
                u128::from(n) == u128::from(a) & m
            }
            _ => false,
        }
    }
}

impl FromStr for IpPrefix {
    type Err = ProtectError;
    /// `ADDRESS` or `ADDRESS/PREFIXLEN`, with no host bits set.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ProtectError::NotAnAddress { item: s.to_owned() };
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => {
                l.parse::<u8>().ok().filter(|n| *n <= max).ok_or_else(bad)?
            }
            Some(_) => return Err(bad()),
        };
        let network = match addr {
            IpAddr::V4(v) => {
                let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                IpAddr::V4((u32::from(v) & m).into())
            }
            IpAddr::V6(v) => {
                let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                IpAddr::V6((u128::from(v) & m).into())
            }
        };
        if network != addr {
            return Err(ProtectError::HostBits { item: s.to_owned(), len, network });
        }
        Ok(Self { addr, len })
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.len == max {
            f.pad(&self.addr.to_string())
        } else {
            f.pad(&format!("{}/{}", self.addr, self.len))
        }
    }
}

/// A DHCP client identifier of `allowed-dhcp-cids`: DHCPv4's option 61,
/// or a DHCPv6 DUID, as bytes; shown as it was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientId {
    /// The identifier's bytes.
    pub bytes: Vec<u8>,
    text: String,
}

impl ClientId {
    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl FromStr for ClientId {
    type Err = ProtectError;
    /// As illumos writes them: `0x` and hex digits (the bytes), a DUID —
    /// `1.HWTYPE.TIME.LLADDR` (DUID-LLT), `2.ENTERPRISE.HEX` (DUID-EN),
    /// `3.HWTYPE.LLADDR` (DUID-LL), the link-layer address as
    /// `aa:bb:cc:dd:ee:ff` — or anything else as text (its bytes).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ProtectError::NotAClientId { item: s.to_owned() };
        if s.is_empty() || s.contains(',') {
            return Err(bad());
        }
        let hex = |h: &str| -> Option<Vec<u8>> {
            if h.is_empty() || h.len() % 2 != 0 {
                return None;
            }
            (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect()
        };
        let lladdr = |m: &str| -> Option<Vec<u8>> {
            let v: Option<Vec<u8>> = m
                .split(':')
                .map(|b| (b.len() == 2).then(|| u8::from_str_radix(b, 16).ok()).flatten())
                .collect();
            v.filter(|v| !v.is_empty())
        };
        let num = |n: &str| n.parse::<u32>().ok();
        let bytes = if let Some(h) = s.strip_prefix("0x") {
            hex(h).ok_or_else(bad)?
        } else {
            let parts: Vec<&str> = s.split('.').collect();
            match parts[..] {
                ["1", hw, time, ll] => {
                    let (hw, time, ll) = (num(hw), num(time), lladdr(ll));
                    let (Some(hw), Some(time), Some(ll)) = (hw, time, ll) else {
                        return Err(bad());
                    };
                    let hw = u16::try_from(hw).map_err(|_| bad())?;
                    [&[0, 1][..], &hw.to_be_bytes(), &time.to_be_bytes(), &ll].concat()
                }
                ["2", ent, id] => {
                    let (Some(ent), Some(id)) = (num(ent), hex(id)) else { return Err(bad()) };
                    [&[0, 2][..], &ent.to_be_bytes(), &id].concat()
                }
                ["3", hw, ll] => {
                    let (Some(hw), Some(ll)) = (num(hw), lladdr(ll)) else { return Err(bad()) };
                    let hw = u16::try_from(hw).map_err(|_| bad())?;
                    [&[0, 3][..], &hw.to_be_bytes(), &ll].concat()
                }
                // Anything else that starts like a DUID but is not one is
                // a typing error, not text.
                ["1" | "2" | "3", ..] => return Err(bad()),
                _ => s.as_bytes().to_vec(),
            }
        };
        Ok(Self { bytes, text: s.to_owned() })
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.text)
    }
}

/// Parses a comma-separated list of `T`, each once, at most [`MAX_LIST`].
pub fn parse_list<T: FromStr<Err = ProtectError> + PartialEq>(
    s: &str,
) -> Result<Vec<T>, ProtectError> {
    let mut out: Vec<T> = Vec::new();
    for item in items(s)? {
        let v: T = item.parse()?;
        if out.contains(&v) {
            return Err(ProtectError::Duplicate { item: item.to_owned() });
        }
        out.push(v);
    }
    Ok(out)
}

/// A list shown as dladm shows it: comma-separated.
pub fn show_list<T: fmt::Display>(v: &[T]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_words() {
        let p: Protection = "ip-nospoof,mac-nospoof".parse().unwrap();
        assert!(p.has(Protection::MAC_NOSPOOF) && p.has(Protection::IP_NOSPOOF));
        assert!(!p.has(Protection::RESTRICTED));
        assert_eq!(p.to_string(), "mac-nospoof,ip-nospoof");
        let all: Protection = "restricted,dhcp-nospoof,ip-nospoof,mac-nospoof".parse().unwrap();
        assert_eq!(all.to_string(), PROTECTIONS.join(","));
        for bad in ["", "mac-nospoof,", "mac", "mac-nospoof,mac-nospoof", "MAC-NOSPOOF"] {
            assert!(bad.parse::<Protection>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefixes() {
        let p: IpPrefix = "10.0.0.0/24".parse().unwrap();
        assert!(p.contains("10.0.0.77".parse().unwrap()));
        assert!(!p.contains("10.0.1.1".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
        let one: IpPrefix = "2001:db8::5".parse().unwrap();
        assert_eq!((one.len, one.to_string().as_str()), (128, "2001:db8::5"));
        let any: IpPrefix = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains("192.0.2.1".parse().unwrap()));
        assert_eq!(
            "10.0.0.5/24".parse::<IpPrefix>(),
            Err(ProtectError::HostBits {
                item: "10.0.0.5/24".into(),
                len: 24,
                network: "10.0.0.0".parse().unwrap()
            })
        );
        for bad in ["", "10.0.0.1/33", "10.0.0.1/", "x", "10.0.0.1/+8", "fe80::/129"] {
            assert!(bad.parse::<IpPrefix>().is_err(), "{bad:?}");
        }
        let l: Vec<IpPrefix> = parse_list("10.0.0.1,2001:db8::/64").unwrap();
        assert_eq!(show_list(&l), "10.0.0.1,2001:db8::/64");
        assert!(parse_list::<IpPrefix>("10.0.0.1,10.0.0.1").is_err());
        let many = vec!["10.0.0.1"; 33].join(",");
        assert_eq!(parse_list::<IpPrefix>(&many), Err(ProtectError::TooMany { count: 33 }));
    }

    #[test]
    fn client_ids() {
        let c = |s: &str| s.parse::<ClientId>().map(|c| c.bytes);
        assert_eq!(c("0x01020304"), Ok(vec![1, 2, 3, 4]));
        assert_eq!(c("3.1.02:00:00:00:00:01"), Ok(vec![0, 3, 0, 1, 2, 0, 0, 0, 0, 1]));
        assert_eq!(
            c("1.1.16.02:00:00:00:00:01"),
            Ok(vec![0, 1, 0, 1, 0, 0, 0, 16, 2, 0, 0, 0, 0, 1])
        );
        assert_eq!(c("2.9.abcd"), Ok(vec![0, 2, 0, 0, 0, 9, 0xab, 0xcd]));
        assert_eq!(c("tenant-a"), Ok(b"tenant-a".to_vec()));
        assert_eq!("tenant-a".parse::<ClientId>().unwrap().to_string(), "tenant-a");
        for bad in ["", "0x", "0x123", "0xzz", "3.1.zz", "1.1.x.02:00", "3.70000.02:00"] {
            assert!(c(bad).is_err(), "{bad:?}");
        }
    }
}

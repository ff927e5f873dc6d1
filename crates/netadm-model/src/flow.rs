//! Flows, as flowadm(8) has them: the traffic of one link that matches a
//! flow's attributes (transport, local and remote address and port, the
//! DS field), which its properties (`maxbw`, `priority`) then govern.
//! Attributes are seen from the link's side: what it sends goes from its
//! local address and port to the remote ones, what it receives the other
//! way.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::IpPrefix;

keywords! {
    /// A flow's `transport`: the IP protocol its packets carry.
    pub enum Transport parse "transport" {
        /// TCP (6).
        Tcp = "tcp",
        /// UDP (17).
        Udp = "udp",
        /// SCTP (132).
        Sctp = "sctp",
        /// ICMP (1).
        Icmp = "icmp",
        /// ICMPv6 (58).
        Icmpv6 = "icmpv6",
    }
}

impl Transport {
    /// Its IP protocol number.
    pub fn protocol(self) -> u8 {
        match self {
            Self::Tcp => 6,
            Self::Udp => 17,
            Self::Sctp => 132,
            Self::Icmp => 1,
            Self::Icmpv6 => 58,
        }
    }

    /// Whether its packets carry ports.
    pub fn has_ports(self) -> bool {
        matches!(self, Self::Tcp | Self::Udp | Self::Sctp)
    }
}

/// Why a flow's name or attributes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The name breaks flowadm's rules.
    #[error(
        "flow name {name:?}: ASCII letters, digits, '_', '-' and '.' only, a letter first, at most {max} bytes",
        max = FlowName::MAX_LEN
    )]
    BadName {
        /// The name.
        name: String,
    },
    /// An attribute flowadm does not have.
    #[error(
        "unknown flow attribute {attr:?} (transport, local_ip, remote_ip, local_port, remote_port, dsfield)"
    )]
    UnknownAttr {
        /// The attribute.
        attr: String,
    },
    /// An attribute's value is not one it takes.
    #[error("{attr}={value:?}: {why}")]
    BadValue {
        /// The attribute.
        attr: &'static str,
        /// The value.
        value: String,
        /// What it takes.
        why: String,
    },
    /// No attribute at all: the flow would be the whole link.
    #[error("a flow needs at least one attribute (-a ATTR=VALUE)")]
    NoAttrs,
    /// A port without a transport that has ports.
    #[error("{attr} needs transport=tcp, udp or sctp")]
    PortWithoutTransport {
        /// `local_port` or `remote_port`.
        attr: &'static str,
    },
    /// An IPv4 and an IPv6 address, or an address of one family and a
    /// transport of the other.
    #[error("{0}")]
    Families(String),
}

/// A flow's name: ASCII letters, digits, `_`, `-` and `.`, a letter
/// first, at most [`FlowName::MAX_LEN`] bytes (`http-in`, `ef.phb`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowName(String);

impl FlowName {
    /// Maximum length in bytes (illumos `MAXFLOWNAMELEN` 128 minus the
    /// NUL).
    pub const MAX_LEN: usize = 127;

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for FlowName {
    type Err = FlowError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.as_bytes()[0].is_ascii_alphabetic()
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
        if ok { Ok(Self(s.to_owned())) } else { Err(FlowError::BadName { name: s.to_owned() }) }
    }
}

impl fmt::Display for FlowName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::borrow::Borrow<str> for FlowName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// A DS field to match (`dsfield=VALUE[:MASK]`, both hexadecimal as
/// flowadm writes them): the bits of `mask` in the IPv4 TOS or IPv6
/// traffic class byte equal those of `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DsField {
    /// The bits wanted.
    pub value: u8,
    /// Which bits are compared (0xff when not given).
    pub mask: u8,
}

impl FromStr for DsField {
    type Err = FlowError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || FlowError::BadValue {
            attr: "dsfield",
            value: s.to_owned(),
            why: "VALUE[:MASK], each 0x00-0xff, no value bit outside the mask".into(),
        };
        let hex = |h: &str| {
            let d = h.strip_prefix("0x").or_else(|| h.strip_prefix("0X")).unwrap_or(h);
            (!d.is_empty() && d.len() <= 2).then(|| u8::from_str_radix(d, 16).ok()).flatten()
        };
        let (v, m) = match s.split_once(':') {
            Some((v, m)) => (hex(v).ok_or_else(bad)?, hex(m).ok_or_else(bad)?),
            None => (hex(s).ok_or_else(bad)?, 0xff),
        };
        if m == 0 || v & !m != 0 {
            return Err(bad());
        }
        Ok(Self { value: v, mask: m })
    }
}

impl fmt::Display for DsField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.mask == 0xff {
            format!("0x{:02x}", self.value)
        } else {
            format!("0x{:02x}:0x{:02x}", self.value, self.mask)
        };
        f.pad(&s)
    }
}

/// What a flow matches; every attribute given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FlowAttrs {
    /// The IP protocol.
    pub transport: Option<Transport>,
    /// The link's own address (a prefix matches any address in it).
    pub local_ip: Option<IpPrefix>,
    /// The address at the other end.
    pub remote_ip: Option<IpPrefix>,
    /// The link's own port (with a transport that has ports).
    pub local_port: Option<u16>,
    /// The port at the other end.
    pub remote_port: Option<u16>,
    /// The DS field.
    pub dsfield: Option<DsField>,
}

/// The attribute names, in the order flowadm lists them.
pub const FLOW_ATTRS: [&str; 6] =
    ["transport", "local_ip", "remote_ip", "local_port", "remote_port", "dsfield"];

impl FlowAttrs {
    /// Parses `-a` assignments (attribute to value), checking each value
    /// and how they combine.
    pub fn parse(attrs: &BTreeMap<String, String>) -> Result<Self, FlowError> {
        let mut a = FlowAttrs::default();
        for (k, v) in attrs {
            let bad = |attr: &'static str, why: &str| FlowError::BadValue {
                attr,
                value: v.clone(),
                why: why.to_owned(),
            };
            let port = |attr: &'static str| {
                v.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| bad(attr, "a port, 1-65535"))
            };
            let ip =
                |attr: &'static str| v.parse::<IpPrefix>().map_err(|e| bad(attr, &e.to_string()));
            match k.as_str() {
                "transport" => {
                    a.transport = Some(
                        v.parse()
                            .map_err(|_| bad("transport", "one of tcp, udp, sctp, icmp, icmpv6"))?,
                    )
                }
                "local_ip" => a.local_ip = Some(ip("local_ip")?),
                "remote_ip" => a.remote_ip = Some(ip("remote_ip")?),
                "local_port" => a.local_port = Some(port("local_port")?),
                "remote_port" => a.remote_port = Some(port("remote_port")?),
                "dsfield" => a.dsfield = Some(v.parse()?),
                _ => return Err(FlowError::UnknownAttr { attr: k.clone() }),
            }
        }
        a.check()?;
        Ok(a)
    }

    /// How the attributes combine: at least one; ports only with a
    /// transport that has them; the addresses and an ICMP transport of
    /// one family.
    pub fn check(&self) -> Result<(), FlowError> {
        if *self == Self::default() {
            return Err(FlowError::NoAttrs);
        }
        for (attr, p) in [("local_port", self.local_port), ("remote_port", self.remote_port)] {
            if p.is_some() && !self.transport.is_some_and(Transport::has_ports) {
                return Err(FlowError::PortWithoutTransport { attr });
            }
        }
        let v4: Vec<bool> =
            [self.local_ip, self.remote_ip].iter().flatten().map(|p| p.addr.is_ipv4()).collect();
        if v4.len() == 2 && v4[0] != v4[1] {
            return Err(FlowError::Families("local_ip and remote_ip are of two families".into()));
        }
        let icmp = match self.transport {
            Some(Transport::Icmp) => Some(true),
            Some(Transport::Icmpv6) => Some(false),
            _ => None,
        };
        if let (Some(i), Some(a)) = (icmp, v4.first())
            && i != *a
        {
            return Err(FlowError::Families(format!(
                "transport={} with an {} address",
                self.transport.map(Transport::as_str).unwrap_or_default(),
                if *a { "IPv4" } else { "IPv6" }
            )));
        }
        Ok(())
    }

    /// Each attribute given, as `(name, value)`, in [`FLOW_ATTRS`] order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![];
        let mut put = |k, v: Option<String>| {
            if let Some(v) = v {
                out.push((k, v));
            }
        };
        put("transport", self.transport.map(|t| t.to_string()));
        put("local_ip", self.local_ip.map(|p| p.to_string()));
        put("remote_ip", self.remote_ip.map(|p| p.to_string()));
        put("local_port", self.local_port.map(|p| p.to_string()));
        put("remote_port", self.remote_port.map(|p| p.to_string()));
        put("dsfield", self.dsfield.map(|d| d.to_string()));
        out
    }

    /// How many attributes it has: a flow with more is more specific, and
    /// is matched first.
    pub fn specificity(&self) -> usize {
        self.pairs().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> Result<FlowAttrs, FlowError> {
        FlowAttrs::parse(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn attributes_parse_and_combine_as_flowadm_has_them() {
        let a = attrs(&[("transport", "tcp"), ("local_port", "22")]).unwrap();
        assert_eq!(a.transport, Some(Transport::Tcp));
        assert_eq!(a.local_port, Some(22));
        assert_eq!(a.pairs(), [("transport", "tcp".into()), ("local_port", "22".into())]);
        let d = attrs(&[("dsfield", "0x2e:0xfc")]).unwrap_err();
        assert!(matches!(d, FlowError::BadValue { attr: "dsfield", .. }), "{d}");
        let d = attrs(&[("dsfield", "0xb8:0xfc")]).unwrap().dsfield.unwrap();
        assert_eq!((d.value, d.mask, d.to_string()), (0xb8, 0xfc, "0xb8:0xfc".into()));
        assert_eq!(attrs(&[("dsfield", "0x2e")]).unwrap().dsfield.unwrap().mask, 0xff);
        let r = attrs(&[("remote_ip", "192.0.2.0/24")]).unwrap();
        assert_eq!(r.remote_ip.unwrap().to_string(), "192.0.2.0/24");

        for (bad, want) in [
            (&[][..], "at least one attribute"),
            (&[("local_port", "80")], "needs transport"),
            (&[("transport", "icmp"), ("local_port", "80")], "needs transport"),
            (&[("transport", "gre")], "transport=\"gre\""),
            (&[("transport", "udp"), ("remote_port", "0")], "1-65535"),
            (&[("remote_ip", "192.0.2.1/24")], "remote_ip"),
            (&[("local_ip", "192.0.2.1"), ("remote_ip", "2001:db8::1")], "two families"),
            (&[("transport", "icmpv6"), ("remote_ip", "192.0.2.1")], "IPv4"),
            (&[("colour", "red")], "unknown flow attribute \"colour\""),
            (&[("dsfield", "0x100")], "dsfield"),
        ] {
            let e = attrs(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn flow_names_follow_flowadms_rules() {
        for ok in ["http", "ef.phb-flow", "f_1"] {
            assert_eq!(ok.parse::<FlowName>().unwrap().as_str(), ok);
        }
        for bad in ["", "1http", "a b", "-x", &"f".repeat(128)] {
            assert!(bad.parse::<FlowName>().is_err(), "{bad:?}");
        }
    }
}

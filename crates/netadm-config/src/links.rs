//! The persistent link configuration (`links.toml`): what the operator
//! configured, replayed by netadmd at start.

use std::collections::BTreeMap;
use std::net::IpAddr;

use netadm_model::{
    AddrObj, AggrPolicy, FlowAttrs, FlowName, LacpMode, LacpTimer, LinkName, MacAddr, VlanId,
};

use crate::hardware::StubKind;
use crate::props::LinkProps;
use crate::spelling::Spellings;
use serde::{Deserialize, Deserializer, Serialize};

pub use crate::section::Section;

/// The accepted VNIC MAC address modes (`dladm create-vnic -m`).
pub const MAC_MODES: [&str; 4] = ["auto", "factory", "random", "fixed"];

/// Everything the operator configured, as stored in `links.toml`. Every map
/// is ordered by key, so the file is deterministic; empty sections are left
/// out of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkState {
    /// File format version; only [`LinkState::VERSION`] is accepted.
    #[serde(deserialize_with = "de_version")]
    pub version: u32,
    /// Physical links, by device name (e.g. `i40e0`): renames and properties.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub phys: Section<LinkName, PhysConf>,
    /// Aggregations, by link name.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub aggr: Section<LinkName, AggrConf>,
    /// VNICs, by link name.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub vnic: Section<LinkName, VnicConf>,
    /// Etherstubs (`dladm create-etherstub`), by link name.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub etherstub: Section<LinkName, EtherstubConf>,
    /// IP interfaces (`ipadm create-if`), by link name.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub interface: Section<LinkName, IfConf>,
    /// Static IP addresses, by address object (`net0/v4`).
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub address: Section<AddrObj, AddrConf>,
    /// Protocol properties (`ipadm set-prop`), `PROTO.PROP` to value.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub proto: Section<String, String>,
    /// Flows (`flowadm add-flow`), by flow name.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub flow: Section<FlowName, FlowConf>,
}

impl LinkState {
    /// The file format version this crate reads and writes.
    pub const VERSION: u32 = 1;

    /// Checks what the field types alone do not: the version, every VNIC's
    /// MAC mode and every address. Loading already guarantees this; saving
    /// checks it so a file that would not load is never written.
    pub fn validate(&self) -> Result<(), LinkStateError> {
        if self.version != Self::VERSION {
            return Err(LinkStateError::UnsupportedVersion { found: self.version });
        }
        for (vnic, conf) in &self.vnic {
            check_mac_mode(&conf.mac_mode)
                .map_err(|error| LinkStateError::MacMode { vnic: vnic.clone(), error })?;
        }
        for (addrobj, conf) in &self.address {
            conf.check()
                .map_err(|error| LinkStateError::Address { addrobj: addrobj.clone(), error })?;
        }
        Ok(())
    }
}

impl LinkState {
    /// Whether `other` is this configuration or an unchanged clone of it:
    /// every section the same allocation (then they are equal). O(1).
    pub fn shares(&self, other: &Self) -> bool {
        self.version == other.version
            && self.phys.ptr_eq(&other.phys)
            && self.aggr.ptr_eq(&other.aggr)
            && self.vnic.ptr_eq(&other.vnic)
            && self.etherstub.ptr_eq(&other.etherstub)
            && self.interface.ptr_eq(&other.interface)
            && self.address.ptr_eq(&other.address)
            && self.proto.ptr_eq(&other.proto)
            && self.flow.ptr_eq(&other.flow)
    }
}

impl Default for LinkState {
    /// An empty configuration of the current version.
    fn default() -> Self {
        Self {
            version: Self::VERSION,
            phys: Section::new(),
            aggr: Section::new(),
            vnic: Section::new(),
            etherstub: Section::new(),
            interface: Section::new(),
            address: Section::new(),
            proto: Section::new(),
            flow: Section::new(),
        }
    }
}

/// A physical link's persistent settings (`[phys.DEVICE]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhysConf {
    /// The link's name if renamed (`dladm rename-link`); the device name
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<LinkName>,
    /// Persistent link properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "crate::props")]
    pub props: LinkProps,
}

/// An aggregation (`[aggr.NAME]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggrConf {
    /// Member ports (link names), in the order they were added.
    pub ports: Vec<LinkName>,
    /// Outbound load-balancing policy (default `L4`).
    #[serde(default)]
    pub policy: AggrPolicy,
    /// LACP mode (default `off`).
    #[serde(default)]
    pub lacp_mode: LacpMode,
    /// LACP timer (default `short`).
    #[serde(default)]
    pub lacp_timer: LacpTimer,
    /// A fixed MAC address; the first port's otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Persistent link properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "crate::props")]
    pub props: LinkProps,
}

/// A VNIC (`[vnic.NAME]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VnicConf {
    /// The link it is created over (a physical link or an aggregation).
    pub over: LinkName,
    /// Its MAC address (the one in use, whatever the mode).
    pub mac: MacAddr,
    /// How the MAC address was chosen: one of [`MAC_MODES`].
    #[serde(deserialize_with = "de_mac_mode")]
    pub mac_mode: String,
    /// Its VLAN, if tagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vid: Option<VlanId>,
    /// A VLAN link (`create-vlan`) rather than a VNIC: its MAC is its
    /// link's, and its VID is unique over that link.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vlan: bool,
    /// Persistent link properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "crate::props")]
    pub props: LinkProps,
}

impl VnicConf {
    /// A VNIC (a VLAN link with `vlan`) over `over`, with MAC address `mac`
    /// chosen as `mac_mode` and VLAN `vid`, and no properties.
    pub fn new(
        over: LinkName,
        mac: MacAddr,
        mac_mode: &str,
        vid: Option<VlanId>,
        vlan: bool,
    ) -> Self {
        Self { over, mac, mac_mode: mac_mode.to_owned(), vid, vlan, props: BTreeMap::new() }
    }
}

/// A flow (`[flow.NAME]`, flowadm's): the traffic of `link` that matches
/// `attrs`, governed by `props` (`maxbw`, `priority`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConf {
    /// The link it is on.
    pub link: LinkName,
    /// What it matches (`transport = "tcp"`, `local_port = "22"`, ...).
    #[serde(with = "crate::flow_attrs")]
    pub attrs: FlowAttrs,
    /// Its properties, typed as the link properties of the same names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "crate::props")]
    pub props: LinkProps,
}

/// An etherstub (`[etherstub.NAME]`): a virtual switch without a port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtherstubConf {
    /// What it is made of: netadm's own switch (the default, left out of
    /// the file) or a kernel bridge; fixed when it is created.
    #[serde(default, skip_serializing_if = "StubKind::is_netadm")]
    pub kind: StubKind,
    /// Persistent link properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "crate::props")]
    pub props: LinkProps,
}

/// An IP interface (`[interface.LINK]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfConf {
    /// Interface properties (`set-ifprop`) as `PROTO.PROP` (e.g.
    /// `ipv4.forwarding`) to their values, as netadm normalised them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub props: BTreeMap<String, String>,
}

/// An address object (`[address."LINK/TAG"]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawAddrConf")]
pub struct AddrConf {
    /// Address and prefix length, e.g. `192.0.2.1/24` or `2001:db8::1/64`;
    /// empty for a DHCP or addrconf address (the lease or the kernel
    /// gives it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub addr: String,
    /// How the address is obtained (`create-addr -T`); static if absent.
    #[serde(default, rename = "type", skip_serializing_if = "AddrType::is_static")]
    pub kind: AddrType,
    /// Marked down (`down-addr`): kept here, absent from the kernel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub down: bool,
    /// Deprecated (`set-addrprop -p deprecated=on`): not chosen as a
    /// source address (preferred lifetime 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
}

impl AddrConf {
    /// A static address.
    pub fn fixed(addr: impl Into<String>) -> Self {
        Self { addr: addr.into(), kind: AddrType::Static, down: false, deprecated: false }
    }

    /// The static address and prefix, `None` for a dynamic one. Checks
    /// that a static address has a valid `ADDRESS/PREFIXLEN` and that a
    /// dynamic one has none.
    pub fn check(&self) -> Result<Option<(IpAddr, u8)>, AddrError> {
        match self.kind {
            AddrType::Static => parse_addr_prefix(&self.addr).map(Some),
            _ if self.addr.is_empty() => Ok(None),
            kind => Err(AddrError::Dynamic { value: self.addr.clone(), kind }),
        }
    }

    /// The static address and prefix if it is up (in the kernel).
    pub fn active_addr(&self) -> Option<(IpAddr, u8)> {
        self.fixed_addr().filter(|_| !self.down)
    }

    /// The static address and prefix; `None` for a dynamic one (or one
    /// that does not parse, which loading already refused).
    pub fn fixed_addr(&self) -> Option<(IpAddr, u8)> {
        self.check().ok().flatten()
    }
}

/// [`AddrConf`] as read, before [`AddrConf::check`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAddrConf {
    #[serde(default, deserialize_with = "de_addr")]
    addr: String,
    #[serde(default, rename = "type")]
    kind: AddrType,
    #[serde(default)]
    down: bool,
    #[serde(default)]
    deprecated: bool,
}

impl TryFrom<RawAddrConf> for AddrConf {
    type Error = AddrError;
    fn try_from(r: RawAddrConf) -> Result<Self, AddrError> {
        let c = AddrConf { addr: r.addr, kind: r.kind, down: r.down, deprecated: r.deprecated };
        c.check()?;
        Ok(c)
    }
}

/// How an address object gets its address (`ipadm create-addr -T`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AddrType {
    /// `-T static -a ADDR/PREFIX`.
    #[default]
    Static,
    /// `-T dhcp`: leased by netadmd's DHCP client.
    Dhcp,
    /// `-T addrconf`: IPv6 link-local and stateless autoconfiguration
    /// (SLAAC) by the kernel, from router advertisements.
    Addrconf,
}

const ADDR_TYPES: Spellings<AddrType> = Spellings {
    what: "address type",
    expected: "static, dhcp or addrconf",
    words: &[
        (AddrType::Static, "static"),
        (AddrType::Dhcp, "dhcp"),
        (AddrType::Addrconf, "addrconf"),
    ],
};

impl AddrType {
    /// Whether it is [`AddrType::Static`].
    pub fn is_static(&self) -> bool {
        *self == AddrType::Static
    }

    /// ipadm's name for it.
    pub fn as_str(self) -> &'static str {
        ADDR_TYPES.of(self)
    }
}

impl std::str::FromStr for AddrType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ADDR_TYPES.parse(s)
    }
}

/// A VNIC MAC mode that is not one of [`MAC_MODES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MAC mode {value:?}: expected one of auto, factory, random, fixed")]
pub struct MacModeError {
    /// The rejected mode.
    pub value: String,
}

/// Why a string is not `ADDRESS/PREFIXLEN`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// There is no `/PREFIXLEN`.
    #[error("address {value:?}: missing /PREFIXLEN (e.g. 192.0.2.1/24)")]
    MissingPrefix {
        /// The rejected input.
        value: String,
    },
    /// The part before the first `/` is not an IPv4 or IPv6 address.
    #[error(
        "address {value:?}: {:?} is not an IPv4 or IPv6 address",
        value.split('/').next().unwrap_or_default()
    )]
    BadIp {
        /// The rejected input.
        value: String,
    },
    /// The part after the first `/` is not a decimal prefix length.
    #[error(
        "address {value:?}: prefix length {:?} is not a decimal number",
        value.split_once('/').map_or("", |(_, p)| p)
    )]
    BadPrefix {
        /// The rejected input.
        value: String,
    },
    /// A dynamic address object given an address.
    #[error(
        "address {value:?}: a {} address object has no fixed address (only -T static takes -a)",
        kind.as_str()
    )]
    Dynamic {
        /// The rejected input.
        value: String,
        /// Its type.
        kind: AddrType,
    },
    /// The prefix length is too long for the address family.
    #[error("address {value:?}: prefix length {prefix} out of range 0..={max}")]
    PrefixRange {
        /// The rejected input.
        value: String,
        /// The prefix length.
        prefix: u32,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
}

/// Why a [`LinkState`] cannot be saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkStateError {
    /// The version is not [`LinkState::VERSION`].
    #[error(
        "unsupported links.toml version {found}: this netadm reads version {}",
        LinkState::VERSION
    )]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A VNIC's MAC mode is not one of [`MAC_MODES`].
    #[error("vnic {vnic}: {error}")]
    MacMode {
        /// The VNIC.
        vnic: LinkName,
        /// The failure.
        error: MacModeError,
    },
    /// An address is not `ADDRESS/PREFIXLEN`.
    #[error("address object {addrobj}: {error}")]
    Address {
        /// The address object.
        addrobj: AddrObj,
        /// The failure.
        error: AddrError,
    },
}

/// Checks a VNIC MAC mode: exactly one of [`MAC_MODES`] (lowercase).
pub fn check_mac_mode(mode: &str) -> Result<(), MacModeError> {
    if MAC_MODES.contains(&mode) { Ok(()) } else { Err(MacModeError { value: mode.to_owned() }) }
}

/// Parses `ADDRESS/PREFIXLEN` (`192.0.2.1/24`, `2001:db8::1/64`); the prefix
/// length is 0..=32 for IPv4 and 0..=128 for IPv6.
pub fn parse_addr_prefix(value: &str) -> Result<(IpAddr, u8), AddrError> {
    let owned = || value.to_owned();
    let (ip, prefix) =
        value.split_once('/').ok_or_else(|| AddrError::MissingPrefix { value: owned() })?;
    let addr: IpAddr = ip.parse().map_err(|_| AddrError::BadIp { value: owned() })?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddrError::BadPrefix { value: owned() });
    }
    // At most three digits, so this cannot fail.
    let len: u32 = prefix.parse().unwrap_or(u32::MAX);
    let max = if addr.is_ipv4() { 32 } else { 128 };
    match u8::try_from(len) {
        Ok(len) if len <= max => Ok((addr, len)),
        _ => Err(AddrError::PrefixRange { value: owned(), prefix: len, max }),
    }
}

fn de_version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let found = u32::deserialize(d)?;
    if found == LinkState::VERSION {
        Ok(found)
    } else {
        Err(serde::de::Error::custom(LinkStateError::UnsupportedVersion { found }))
    }
}

fn de_mac_mode<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let mode = String::deserialize(d)?;
    check_mac_mode(&mode).map_err(serde::de::Error::custom)?;
    Ok(mode)
}

/// An address, checked where it is written (so an error names its line
/// and column); empty is left to [`AddrConf::check`].
fn de_addr<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let addr = String::deserialize(d)?;
    if !addr.is_empty() {
        parse_addr_prefix(&addr).map_err(serde::de::Error::custom)?;
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let ok = |s: &str| parse_addr_prefix(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("192.0.2.1/24"), ("192.0.2.1".parse().unwrap(), 24));
        assert_eq!(ok("0.0.0.0/0").1, 0);
        assert_eq!(ok("10.0.0.1/32").1, 32);
        assert_eq!(ok("2001:db8::1/64").1, 64);
        assert_eq!(ok("::/128").1, 128);
        let err = |s: &str| parse_addr_prefix(s).unwrap_err();
        assert!(matches!(err("192.0.2.1"), AddrError::MissingPrefix { .. }));
        assert!(matches!(err("192.0.2/24"), AddrError::BadIp { .. }));
        assert!(matches!(err("net0/24"), AddrError::BadIp { .. }));
        assert!(matches!(err("192.0.2.1/"), AddrError::BadPrefix { .. }));
        assert!(matches!(err("192.0.2.1/+4"), AddrError::BadPrefix { .. }));
        assert!(matches!(err("192.0.2.1/24/1"), AddrError::BadPrefix { .. }));
        assert!(matches!(err("192.0.2.1/0024"), AddrError::BadPrefix { .. }));
        assert_eq!(
            err("192.0.2.1/33"),
            AddrError::PrefixRange { value: "192.0.2.1/33".into(), prefix: 33, max: 32 }
        );
        assert!(matches!(err("::1/129"), AddrError::PrefixRange { max: 128, .. }));
        assert!(matches!(err("::1/999"), AddrError::PrefixRange { prefix: 999, .. }));
        assert_eq!(
            err("192.0.2/24").to_string(),
            r#"address "192.0.2/24": "192.0.2" is not an IPv4 or IPv6 address"#
        );
        assert_eq!(
            err("::1/x/1").to_string(),
            r#"address "::1/x/1": prefix length "x/1" is not a decimal number"#
        );
    }

    #[test]
    fn mac_modes() {
        for m in MAC_MODES {
            check_mac_mode(m).unwrap();
        }
        assert_eq!(
            check_mac_mode("Auto").unwrap_err().to_string(),
            r#"MAC mode "Auto": expected one of auto, factory, random, fixed"#
        );
    }

    #[test]
    fn validate_names_the_entry() {
        let mut state = LinkState::default();
        state.validate().unwrap();
        state.version = 2;
        assert_eq!(state.validate(), Err(LinkStateError::UnsupportedVersion { found: 2 }));
        state.version = 1;
        state.address.insert("net0/v4".parse().unwrap(), AddrConf::fixed("1.2.3.4"));
        let e = state.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            r#"address object net0/v4: address "1.2.3.4": missing /PREFIXLEN (e.g. 192.0.2.1/24)"#
        );
        // A DHCP object has no address; given one, it is refused.
        let dhcp = AddrConf { kind: AddrType::Dhcp, ..AddrConf::fixed("") };
        state.address.insert("net0/v4".parse().unwrap(), dhcp.clone());
        state.validate().unwrap();
        let text = toml::to_string(&state).unwrap();
        assert!(text.contains("type = \"dhcp\"") && !text.contains("addr ="), "{text}");
        assert_eq!(toml::from_str::<LinkState>(&text).unwrap(), state);
        let bad = text.replace("type = \"dhcp\"", "type = \"dhcp\"\naddr = \"192.0.2.1/24\"");
        let e = toml::from_str::<LinkState>(&bad).unwrap_err().to_string();
        assert!(e.contains("a dhcp address object has no fixed address"), "{e}");
        state
            .address
            .insert("net0/v4".parse().unwrap(), AddrConf { addr: "192.0.2.1/24".into(), ..dhcp });
        assert!(state.validate().is_err());
    }
}

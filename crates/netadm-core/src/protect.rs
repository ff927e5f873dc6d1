//! Link protection in the core: what a VNIC's `protection`,
//! `allowed-ips` and `allowed-dhcp-cids`, its MAC and its interface's
//! addresses ask for ([`Want`]), checked when they are set, and handed
//! to the emulated datapath's guard (`netadm_datapath::protect`) or to the
//! kernel's rules (`kernel::guard`). Both enforce the same [`Want`].

use std::net::IpAddr;

use netadm_datapath::protect::{Leased, Policy, link_local};
use netadm_model::{LinkName, PropName, PropValue, Protection};

use crate::CoreError;
use crate::view::{Link, View};

/// What one VNIC's protection asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Want {
    /// The protections on (never empty).
    pub flags: Protection,
    /// The VNIC's MAC.
    pub mac: [u8; 6],
    /// The allowed senders (prefixes): `allowed-ips`, or the interface's
    /// static addresses and its link-local address.
    pub allowed: Vec<(IpAddr, u8)>,
    /// Whether `allowed` is the default (no `allowed-ips`): a DHCP lease's
    /// addresses are then allowed too.
    pub default_ips: bool,
    /// `allowed-dhcp-cids`, as bytes; empty: the VNIC's MAC.
    pub cids: Vec<Vec<u8>>,
}

/// The protection VNIC `l` of `v` asks for; `None` without one.
pub(crate) fn want(v: &View<'_>, l: &Link) -> Option<Want> {
    let Link::Vnic(n) = l else { return None };
    let conf = v.st.vnic.get(n)?;
    let flags = match conf.props.get(&PropName::Protection) {
        Some(PropValue::Protection(p)) if !p.is_empty() => *p,
        _ => return None,
    };
    let mac = conf.mac.0;
    let (allowed, default_ips) = match conf.props.get(&PropName::AllowedIps) {
        Some(PropValue::Ips(ips)) => (ips.iter().map(|p| (p.addr, p.len)).collect(), false),
        _ => {
            let mut a: Vec<(IpAddr, u8)> = addresses(v, n)
                .into_iter()
                .map(|ip| (ip, if ip.is_ipv4() { 32 } else { 128 }))
                .collect();
            a.push((IpAddr::V6(link_local(mac)), 128));
            (a, true)
        }
    };
    let cids = match conf.props.get(&PropName::AllowedDhcpCids) {
        Some(PropValue::Cids(c)) => c.iter().map(|c| c.as_bytes().to_vec()).collect(),
        _ => vec![],
    };
    Some(Want { flags, mac, allowed, default_ips, cids })
}

/// The static addresses configured on interface `n` (up ones).
fn addresses(v: &View<'_>, n: &LinkName) -> Vec<IpAddr> {
    v.st.address
        .iter()
        .filter(|(o, _)| o.interface() == n)
        .filter_map(|(_, a)| a.active_addr().map(|(ip, _)| ip))
        .collect()
}

impl Want {
    /// The datapath's policy for it; `leased` holds the interface's DHCP
    /// leases (allowed when `allowed-ips` is not set).
    pub(crate) fn policy(&self, leased: Option<Leased>) -> Policy {
        Policy {
            mac: self.mac,
            mac_nospoof: self.flags.has(Protection::MAC_NOSPOOF),
            ip_nospoof: self.flags.has(Protection::IP_NOSPOOF),
            dhcp_nospoof: self.flags.has(Protection::DHCP_NOSPOOF),
            restricted: self.flags.has(Protection::RESTRICTED),
            allowed: self.allowed.clone(),
            leased: leased.filter(|_| self.default_ips),
            cids: self.cids.clone(),
        }
    }
}

/// Checks a protection property's value on `link` where it is set: what
/// the kernel's rules cannot do over kernel links is refused, naming it.
pub(crate) fn check(
    v: &View<'_>,
    link_name: &str,
    link: &Link,
    prop: PropName,
    val: &PropValue,
) -> Result<(), CoreError> {
    let Link::Vnic(n) = link else { return Ok(()) };
    if !v.on_kernel(link) {
        return Ok(());
    }
    if v.st.vnic.get(n).is_some_and(|c| c.vlan) {
        return Err(CoreError::not_supported(format!(
            "{prop} on {link_name}: a VLAN over kernel links is an 802.1Q device of the zone's own, with no device of netadm's between it and its port to enforce it on; set it on a VNIC over the VLAN"
        )));
    }
    if prop == PropName::AllowedDhcpCids {
        return Err(CoreError::not_supported(format!(
            "allowed-dhcp-cids on {link_name}: over kernel links, DHCP client identifiers are options at varying offsets, which the kernel's rules cannot read; dhcp-nospoof there allows the VNIC's MAC as chaddr"
        )));
    }
    if prop == PropName::Protection {
        let was = v.prop(link, PropName::Protection).is_some();
        let now = matches!(val, PropValue::Protection(p) if !p.is_empty());
        rebuild_free(v, link_name, link, was, now)?;
    }
    Ok(())
}

/// Protection put on or taken off a kernel VNIC over a port changes how
/// its device is built (see `kernel::guard`): refused under an IP
/// interface (dladm: "link busy"), as `zone` is.
pub(crate) fn rebuild_free(
    v: &View<'_>,
    link_name: &str,
    link: &Link,
    was: bool,
    now: bool,
) -> Result<(), CoreError> {
    let over_port = !matches!(v.switch_of(link), Some(Link::Etherstub(_)));
    if was != now
        && over_port
        && v.on_kernel(link)
        && v.st.interface.keys().any(|i| i.as_str() == link_name)
    {
        return Err(CoreError::busy(format!(
            "protection on {link_name}: over a kernel port a protected VNIC's device is built differently, and IP interface {link_name} is on it; delete-if {link_name} first"
        )));
    }
    Ok(())
}

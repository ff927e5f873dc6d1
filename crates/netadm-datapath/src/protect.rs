//! Link protection (dladm's `protection`): what a VNIC's tenant may send.
//! A [`Policy`] judges each frame an interface sends before the virtual
//! switch sees it; a refused frame is dropped and counted by [`Reason`]
//! in the link's [`Guard`].
//!
//! The rules, checked in this order (a frame refused by several counts
//! once, under the first):
//!
//! | protection | a frame is refused when |
//! | --- | --- |
//! | `mac-nospoof` | its source MAC, an ARP sender's hardware address, or an NDP link-layer address option is not the link's MAC |
//! | `restricted` | its ethertype is not IPv4, IPv6 or ARP (a VLAN tag included) |
//! | `ip-nospoof` | an IPv4 or IPv6 source, an ARP sender, or an NDP neighbour advertisement's target is not allowed; or it is VLAN-tagged or malformed IP/ARP (what is behind cannot be vouched for) |
//! | `dhcp-nospoof` | it is a DHCP (v4 or v6) server or relay message; or a client message whose client identifier is not allowed (by default: the link's MAC as chaddr, as option 61 `01:MAC`, or as a DUID-LL/LLT); or it is VLAN-tagged or malformed IP |
//!
//! Allowed senders are the policy's prefixes (`allowed-ips`, or, without
//! it, the interface's addresses and its EUI-64 link-local address) and
//! the addresses a lease holds; the unspecified addresses (`0.0.0.0`,
//! `::`: DHCP discovery, ARP probes, duplicate address detection) are
//! always allowed, as they pose as no one. The classifier reads headers
//! with [`crate::headers`], which flows reuse.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::headers::{
    ETH_ARP, ETH_IPV4, ETH_IPV6, Headers, IPPROTO_ICMPV6, IPPROTO_UDP, Ip, Net, be16,
};

/// Why a frame was dropped: the protection that refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `mac-nospoof`.
    Mac = 0,
    /// `ip-nospoof`.
    Ip = 1,
    /// `dhcp-nospoof`.
    Dhcp = 2,
    /// `restricted`.
    Restricted = 3,
}

impl Reason {
    /// Every reason, in the order counters are shown.
    pub const ALL: [Reason; 4] = [Reason::Mac, Reason::Ip, Reason::Dhcp, Reason::Restricted];

    /// The protection's name, as dladm spells it.
    pub fn as_str(self) -> &'static str {
        ["mac-nospoof", "ip-nospoof", "dhcp-nospoof", "restricted"][self as usize]
    }
}

/// Addresses that come and go while a policy stands (a DHCP lease's),
/// shared with what holds them.
pub type Leased = Arc<Mutex<Vec<(IpAddr, u8)>>>;

/// What one link's tenant may send.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The link's MAC.
    pub mac: [u8; 6],
    /// `mac-nospoof`.
    pub mac_nospoof: bool,
    /// `ip-nospoof`.
    pub ip_nospoof: bool,
    /// `dhcp-nospoof`.
    pub dhcp_nospoof: bool,
    /// `restricted`.
    pub restricted: bool,
    /// The senders `ip-nospoof` lets through: prefixes (address, length).
    pub allowed: Vec<(IpAddr, u8)>,
    /// More allowed senders, read when `allowed` has not got one (a
    /// lease's addresses, as the DHCP client holds them).
    pub leased: Option<Leased>,
    /// The DHCP client identifiers `dhcp-nospoof` lets through; empty: the
    /// link's MAC.
    pub cids: Vec<Vec<u8>>,
}

/// Whether prefix (`net`, `len`) holds `ip`.
pub(crate) fn in_prefix(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len.min(32))).unwrap_or(0);
            u32::from(n) & m == u32::from(a) & m
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0);
            u128::from(n) & m == u128::from(a) & m
        }
        _ => false,
    }
}

/// The EUI-64 link-local address of MAC `mac` (fe80::/64, the MAC with
/// its universal/local bit flipped and ff:fe in the middle), as the
/// kernel makes it by default.
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let m = mac;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 2,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

impl Policy {
    /// Whether any protection is on.
    pub fn any(&self) -> bool {
        self.mac_nospoof || self.ip_nospoof || self.dhcp_nospoof || self.restricted
    }

    /// The first protection that is on, for a frame too short to judge.
    fn first(&self) -> Option<Reason> {
        [
            (self.mac_nospoof, Reason::Mac),
            (self.restricted, Reason::Restricted),
            (self.ip_nospoof, Reason::Ip),
            (self.dhcp_nospoof, Reason::Dhcp),
        ]
        .into_iter()
        .find(|(on, _)| *on)
        .map(|(_, r)| r)
    }

    /// Whether `ip` may send: unspecified, an allowed prefix, or leased.
    pub fn allows(&self, ip: IpAddr) -> bool {
        ip.is_unspecified()
            || self.allowed.iter().any(|(n, l)| in_prefix(*n, *l, ip))
            || self.leased.as_ref().is_some_and(|l| {
                l.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|(a, _)| *a == ip)
            })
    }

    /// Judges a frame the link's tenant sends: `Ok` to let it go, or the
    /// protection that refuses it.
    pub fn check(&self, frame: &[u8]) -> Result<(), Reason> {
        let Some(h) = Headers::parse(frame) else {
            return self.first().map_or(Ok(()), Err);
        };
        if self.mac_nospoof && !self.mac_ok(&h, frame) {
            return Err(Reason::Mac);
        }
        if self.restricted && ![ETH_IPV4, ETH_IPV6, ETH_ARP].contains(&h.ethertype) {
            return Err(Reason::Restricted);
        }
        if self.ip_nospoof && !self.ip_ok(&h.net) {
            return Err(Reason::Ip);
        }
        if self.dhcp_nospoof && !self.dhcp_ok(&h.net) {
            return Err(Reason::Dhcp);
        }
        Ok(())
    }

    fn mac_ok(&self, h: &Headers<'_>, frame: &[u8]) -> bool {
        if h.src != self.mac {
            return false;
        }
        match &h.net {
            // The sender hardware address where ARP has it, whatever the
            // rest says.
            _ if h.ethertype == ETH_ARP => frame.get(22..28) == Some(&self.mac[..]),
            Net::V6(ip) if ip.proto == IPPROTO_ICMPV6 && ip.first => {
                ndp_lladdrs(ip.l4).iter().all(|m| *m == self.mac)
            }
            _ => true,
        }
    }

    fn ip_ok(&self, net: &Net<'_>) -> bool {
        match net {
            Net::V4(ip) => self.allows(ip.src.into()),
            Net::V6(ip) => {
                self.allows(ip.src.into())
                    && (ip.proto != IPPROTO_ICMPV6 || !ip.first || self.nd_target_ok(ip))
            }
            Net::Arp(a) => self.allows(a.spa.into()),
            Net::Tagged | Net::Malformed => false,
            Net::Other => true,
        }
    }

    /// A neighbour advertisement claims its target: it must be allowed.
    fn nd_target_ok(&self, ip: &Ip<'_, Ipv6Addr>) -> bool {
        if ip.l4.first() != Some(&136) {
            return true;
        }
        match ip.l4.get(8..24).and_then(|t| <[u8; 16]>::try_from(t).ok()) {
            Some(t) => self.allows(IpAddr::V6(t.into())),
            None => false,
        }
    }

    fn dhcp_ok(&self, net: &Net<'_>) -> bool {
        // A DHCP message is never fragmented: a first fragment to a
        // server would leave the rest of the message (a client id, say)
        // unread, in fragments that carry no port. Without the first, a
        // server has nothing to put them together with.
        match net {
            Net::V4(ip) if ip.proto == IPPROTO_UDP && ip.first => {
                udp_ok(ip.ports(), ip.fragment, ip.l4, (67, 68), |m| self.dhcp4_ok(m))
            }
            Net::V6(ip) if ip.proto == IPPROTO_UDP && ip.first => {
                udp_ok(ip.ports(), ip.fragment, ip.l4, (547, 546), |m| self.dhcp6_ok(m))
            }
            Net::Tagged | Net::Malformed => false,
            _ => true,
        }
    }

    /// A DHCPv4 message to a server: a request (BOOTREQUEST) whose client
    /// is allowed.
    fn dhcp4_ok(&self, m: &[u8]) -> bool {
        // op, htype, hlen, ..., chaddr at 28, the magic cookie at 236.
        if m.len() < 240 || m[0] != 1 || m[236..240] != [99, 130, 83, 99] {
            return false;
        }
        let chaddr: Option<[u8; 6]> =
            (m[1] == 1 && m[2] == 6).then(|| m[28..34].try_into().expect("6 bytes"));
        // Option overload (52) puts options in the sname and file fields,
        // and a repeated option is joined by the server (RFC 3396): a
        // client id may hide in either, unread here. Neither is a client's
        // business.
        let (Ok(cid), Ok(None), Ok(1)) = (
            dhcp4_option(&m[240..], 61),
            dhcp4_option(&m[240..], 52),
            dhcp4_count(&m[240..], 61).map(|n| n.max(1)),
        ) else {
            return false;
        };
        let with_type = |mac: [u8; 6]| [&[1u8][..], &mac].concat();
        if self.cids.is_empty() {
            return chaddr == Some(self.mac) && cid.is_none_or(|c| c == with_type(self.mac));
        }
        match cid {
            // RFC 4361: 0xff, an IAID, a DUID.
            Some(c) => {
                self.cids.iter().any(|a| a == c)
                    || (c.first() == Some(&0xff)
                        && c.get(5..).is_some_and(|d| self.cids.iter().any(|a| a == d)))
            }
            None => chaddr.is_some_and(|m| self.cids.contains(&with_type(m))),
        }
    }

    /// A DHCPv6 message to a server: a client's, whose DUID is allowed.
    fn dhcp6_ok(&self, m: &[u8]) -> bool {
        // Advertise, reply, reconfigure, relay-forward and relay-reply
        // are a server's or a relay's.
        match m.first() {
            None | Some(2 | 7 | 10 | 12 | 13) => return false,
            Some(_) => {}
        }
        let mut at = 4;
        let mut duid = None;
        while at < m.len() {
            let (Some(code), Some(len)) = (be16(m, at), be16(m, at + 2)) else { return false };
            let Some(v) = m.get(at + 4..at + 4 + usize::from(len)) else { return false };
            if code == 1 {
                duid = Some(v);
                break;
            }
            at += 4 + usize::from(len);
        }
        let Some(d) = duid else { return true };
        if self.cids.is_empty() {
            let mac = &self.mac[..];
            // DUID-LL (3, Ethernet, MAC) or DUID-LLT (1, Ethernet, time, MAC).
            return (d.len() == 10 && d[..4] == [0, 3, 0, 1] && &d[4..] == mac)
                || (d.len() == 14 && d[..4] == [0, 1, 0, 1] && &d[8..] == mac);
        }
        self.cids.iter().any(|a| a == d)
    }
}

/// A UDP datagram (first fragment) with `ports` under dhcp-nospoof, in a
/// family whose servers listen on `server` and clients on `client`:
/// nothing from a server's port or to a client's; to a server, a whole
/// message that `message_ok` accepts.
fn udp_ok(
    ports: Option<(u16, u16)>,
    fragment: bool,
    l4: &[u8],
    (server, client): (u16, u16),
    message_ok: impl Fn(&[u8]) -> bool,
) -> bool {
    match ports {
        Some((s, d)) if s == server || d == client => false,
        Some((_, d)) if d == server => !fragment && message_ok(l4.get(8..).unwrap_or_default()),
        Some(_) => true,
        None => false,
    }
}

/// The link-layer addresses NDP options of an ICMPv6 router or neighbour
/// message `m` name (source and target link-layer address options).
fn ndp_lladdrs(m: &[u8]) -> Vec<[u8; 6]> {
    let start = match m.first() {
        Some(133) => 8,
        Some(134) => 16,
        Some(135 | 136) => 24,
        // A redirect: its target link-layer address option.
        Some(137) => 40,
        _ => return vec![],
    };
    let mut out = vec![];
    let mut at = start;
    while let (Some(&t), Some(&l)) = (m.get(at), m.get(at + 1)) {
        if l == 0 {
            // A zero length is invalid: nothing after it can be read, so
            // it names an address no one has.
            out.push([0xff; 6]);
            break;
        }
        if (t == 1 || t == 2)
            && let Some(a) = m.get(at + 2..at + 8)
        {
            out.push(a.try_into().expect("6 bytes"));
        }
        at += usize::from(l) * 8;
    }
    out
}

/// How many times DHCPv4 option `code` stands among `opts`; `Err` when
/// the options are cut short.
fn dhcp4_count(opts: &[u8], code: u8) -> Result<usize, ()> {
    let (mut at, mut n) = (0, 0);
    while let Some(&c) = opts.get(at) {
        match c {
            0 => at += 1,
            255 => break,
            _ => {
                let l = usize::from(*opts.get(at + 1).ok_or(())?);
                opts.get(at + 2..at + 2 + l).ok_or(())?;
                n += usize::from(c == code);
                at += 2 + l;
            }
        }
    }
    Ok(n)
}

/// DHCPv4 option `code` among `opts` (after the magic cookie): its value,
/// `None` when it is not there; `Err` when the options are cut short.
fn dhcp4_option(opts: &[u8], code: u8) -> Result<Option<&[u8]>, ()> {
    let mut at = 0;
    while let Some(&c) = opts.get(at) {
        match c {
            0 => at += 1,
            255 => return Ok(None),
            _ => {
                let l = usize::from(*opts.get(at + 1).ok_or(())?);
                let v = opts.get(at + 2..at + 2 + l).ok_or(())?;
                if c == code {
                    return Ok(Some(v));
                }
                at += 2 + l;
            }
        }
    }
    Ok(None)
}

/// One link's protection: its policy (changed in place as the link's
/// properties and addresses change) and its books.
#[derive(Debug, Default)]
pub struct Guard {
    policy: RwLock<Option<Arc<Policy>>>,
    drops: [AtomicU64; 4],
    passed: AtomicU64,
    passed_bytes: AtomicU64,
}

/// A guard's books.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuardCounts {
    /// Frames dropped, by [`Reason`] (indexed by `Reason as usize`).
    pub drops: [u64; 4],
    /// Frames a policy let through.
    pub passed: u64,
    /// Their bytes.
    pub passed_bytes: u64,
}

impl Guard {
    /// A guard without a policy: everything passes, nothing is counted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the policy (`None`, or one with no protection on: none).
    pub fn set(&self, p: Option<Policy>) {
        let p = p.filter(Policy::any).map(Arc::new);
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = p;
    }

    /// The policy now: a sender takes it once per burst.
    pub fn current(&self) -> Option<Arc<Policy>> {
        self.policy.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Counts a frame dropped for `r`.
    pub fn dropped(&self, r: Reason) {
        self.drops[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `frames` frames of `bytes` bytes let through.
    pub fn passed(&self, frames: u64, bytes: u64) {
        self.passed.fetch_add(frames, Ordering::Relaxed);
        self.passed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The books.
    pub fn counts(&self) -> GuardCounts {
        GuardCounts {
            drops: std::array::from_fn(|i| self.drops[i].load(Ordering::Relaxed)),
            passed: self.passed.load(Ordering::Relaxed),
            passed_bytes: self.passed_bytes.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests;

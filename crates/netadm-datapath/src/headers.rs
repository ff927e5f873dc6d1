//! What a frame says about itself: its Ethernet, network and transport
//! headers, read once without copying, for the rules that act on a
//! frame's addresses and ports (link protection; flows, which match on
//! the same fields). Every length is checked: a frame too short for what
//! its headers claim is [`Net::Malformed`], never a panic.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Ethertype of IPv4.
pub const ETH_IPV4: u16 = 0x0800;
/// Ethertype of ARP.
pub const ETH_ARP: u16 = 0x0806;
/// Ethertype of IPv6.
pub const ETH_IPV6: u16 = 0x86dd;
/// Ethertypes of a VLAN tag (802.1Q, 802.1ad, the old QinQ one).
pub const ETH_TAGS: [u16; 3] = [0x8100, 0x88a8, 0x9100];

/// IP protocol number of ICMPv6.
pub const IPPROTO_ICMPV6: u8 = 58;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;

/// A frame's headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headers<'a> {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// The outermost ethertype (a VLAN tag's, when the frame is tagged).
    pub ethertype: u16,
    /// What follows the Ethernet header.
    pub net: Net<'a>,
}

/// The network layer of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net<'a> {
    /// IPv4.
    V4(Ip<'a, Ipv4Addr>),
    /// IPv6 (extension headers walked to the transport header).
    V6(Ip<'a, Ipv6Addr>),
    /// ARP for IPv4 over Ethernet.
    Arp(Arp),
    /// A VLAN-tagged frame: not looked into.
    Tagged,
    /// Another ethertype.
    Other,
    /// An IPv4, IPv6 or ARP frame too short for, or inconsistent with,
    /// what its headers say (including an IPv6 header chain too long to
    /// walk); also a frame shorter than an Ethernet header.
    Malformed,
}

/// An IP header and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip<'a, A> {
    /// Source address.
    pub src: A,
    /// Destination address.
    pub dst: A,
    /// The DS field (DSCP and ECN): IPv4's TOS, IPv6's traffic class.
    pub dsfield: u8,
    /// The transport protocol (after IPv6's extension headers).
    pub proto: u8,
    /// Whether this is the first fragment (or not a fragment): only then
    /// does `l4` start with the transport header.
    pub first: bool,
    /// Whether it is a fragment at all (more follow, or an offset; in
    /// IPv6, any fragment header).
    pub fragment: bool,
    /// The bytes after the IP header (and its extension headers), within
    /// the IP packet's own length.
    pub l4: &'a [u8],
}

impl<A> Ip<'_, A> {
    /// Source and destination ports of a TCP, UDP or SCTP first fragment
    /// long enough to have them.
    pub fn ports(&self) -> Option<(u16, u16)> {
        if !self.first || ![IPPROTO_TCP, IPPROTO_UDP, 132].contains(&self.proto) {
            return None;
        }
        Some((be16(self.l4, 0)?, be16(self.l4, 2)?))
    }
}

/// An ARP packet (Ethernet hardware, IPv4 protocol addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// Operation: 1 request, 2 reply.
    pub op: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

/// The big-endian u16 at `at`, if `b` has it.
pub(crate) fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn mac(b: &[u8], at: usize) -> Option<[u8; 6]> {
    b.get(at..at + 6)?.try_into().ok()
}

fn v4(b: &[u8], at: usize) -> Option<Ipv4Addr> {
    let a: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(a.into())
}

fn v6(b: &[u8], at: usize) -> Option<Ipv6Addr> {
    let a: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
    Some(a.into())
}

/// The most IPv6 extension headers walked before a frame is called
/// malformed (a chain longer than this has no business on a VNIC).
const MAX_EXT: usize = 8;

impl<'a> Headers<'a> {
    /// Reads `frame`'s headers; `None` when it is shorter than an
    /// Ethernet header.
    pub fn parse(frame: &'a [u8]) -> Option<Self> {
        let (dst, src, ethertype) = (mac(frame, 0)?, mac(frame, 6)?, be16(frame, 12)?);
        Some(Self { dst, src, ethertype, net: net(ethertype, &frame[14..]) })
    }

    /// [`Headers::parse`], looking past one 802.1Q tag: what a VLAN link
    /// sends carries its link's tag, and its flows match what it holds.
    pub fn parse_past_tag(frame: &'a [u8]) -> Option<Self> {
        let h = Self::parse(frame)?;
        if h.ethertype != ETH_TAGS[0] {
            return Some(h);
        }
        let inner = be16(frame, 16)?;
        Some(Self { ethertype: inner, net: net(inner, frame.get(18..)?), ..h })
    }
}

/// What follows an Ethernet header of type `ethertype`: `p`.
fn net(ethertype: u16, p: &[u8]) -> Net<'_> {
    match ethertype {
        ETH_IPV4 => parse_ipv4(p).map_or(Net::Malformed, Net::V4),
        ETH_IPV6 => parse_ipv6(p).map_or(Net::Malformed, Net::V6),
        ETH_ARP => parse_arp(p).map_or(Net::Malformed, Net::Arp),
        t if ETH_TAGS.contains(&t) => Net::Tagged,
        _ => Net::Other,
    }
}

fn parse_ipv4(p: &[u8]) -> Option<Ip<'_, Ipv4Addr>> {
    let vihl = *p.first()?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    let total = usize::from(be16(p, 2)?);
    if vihl >> 4 != 4 || ihl < 20 || total < ihl || total > p.len() {
        return None;
    }
    let frag = be16(p, 6)?;
    Some(Ip {
        src: v4(p, 12)?,
        dst: v4(p, 16)?,
        dsfield: p[1],
        proto: p[9],
        first: frag & 0x1fff == 0,
        fragment: frag & 0x3fff != 0,
        l4: &p[ihl..total],
    })
}

fn parse_ipv6(p: &[u8]) -> Option<Ip<'_, Ipv6Addr>> {
    if p.first()? >> 4 != 6 {
        return None;
    }
    let payload = usize::from(be16(p, 4)?);
    // (A jumbogram's length 0 leaves its hop-by-hop header outside the
    // body: it is malformed here.)
    if 40 + payload > p.len() {
        return None;
    }
    let dsfield = ((be16(p, 0)? >> 4) & 0xff) as u8;
    let (src, dst) = (v6(p, 8)?, v6(p, 24)?);
    let body = &p[40..40 + payload];
    let (mut next, mut at, mut first, mut fragment) = (p[6], 0usize, true, false);
    for _ in 0..=MAX_EXT {
        match next {
            // Hop-by-hop, routing, destination options: length in 8
            // bytes, not counting the first 8.
            0 | 43 | 60 => {
                let h = body.get(at..at + 2)?;
                next = h[0];
                at += (usize::from(h[1]) + 1) * 8;
            }
            // Fragment: 8 bytes; a later fragment has no transport header.
            44 => {
                let h = body.get(at..at + 8)?;
                next = h[0];
                first = be16(h, 2)? & 0xfff8 == 0;
                fragment = true;
                at += 8;
            }
            // Authentication header: length in 4 bytes, less 2.
            51 => {
                let h = body.get(at..at + 2)?;
                next = h[0];
                at += (usize::from(h[1]) + 2) * 4;
            }
            proto => {
                let l4 = body.get(at..)?;
                return Some(Ip { src, dst, dsfield, proto, first, fragment, l4 });
            }
        }
    }
    None
}

fn parse_arp(p: &[u8]) -> Option<Arp> {
    // Ethernet (1), IPv4, 6 and 4 bytes of address.
    if be16(p, 0)? != 1 || be16(p, 2)? != ETH_IPV4 || p.get(4..6)? != [6, 4] {
        return None;
    }
    Some(Arp { op: be16(p, 6)?, sha: mac(p, 8)?, spa: v4(p, 14)?, tpa: v4(p, 24)? })
}

pub mod build {
    //! Frames built by hand, for tests and benchmarks that send what a
    //! tenant could (the protection classifier's, the hostile-tenant
    //! test's, `netadm-bench protection`'s). The IPv4 header checksum is
    //! filled in (a host drops a header without it); no other is (UDP's
    //! zero means none).

    use std::net::{Ipv4Addr, Ipv6Addr};

    /// An Ethernet header.
    pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
        [&dst[..], &src, &ethertype.to_be_bytes()].concat()
    }

    /// An IPv4 packet of `proto` carrying `l4`.
    pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
        let total = (20 + l4.len()) as u16;
        let mut h = [0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
        h[2..4].copy_from_slice(&total.to_be_bytes());
        let mut p = [&h[..], &src.octets(), &dst.octets(), l4].concat();
        let sum = crate::frame::checksum(&p[..20]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p
    }

    /// An IPv6 packet whose first header after the fixed one is `next`.
    pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, body: &[u8]) -> Vec<u8> {
        let mut h = [0x60, 0, 0, 0, 0, 0, next, 64];
        h[4..6].copy_from_slice(&(body.len() as u16).to_be_bytes());
        [&h[..], &src.octets(), &dst.octets(), body].concat()
    }

    /// A UDP header (no checksum) and `payload`.
    pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let len = (8 + payload.len()) as u16;
        [&sport.to_be_bytes()[..], &dport.to_be_bytes(), &len.to_be_bytes(), &[0, 0], payload]
            .concat()
    }

    /// An ARP packet.
    pub fn arp(op: u16, sha: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
        [&[0, 1, 8, 0, 6, 4][..], &op.to_be_bytes(), &sha, &spa.octets(), &[0; 6], &tpa.octets()]
            .concat()
    }

    /// A DHCPv4 (BOOTP) message: `op` (1 request, 2 reply), `chaddr`,
    /// then `opts` after the magic cookie, and the end option.
    pub fn bootp(op: u8, chaddr: [u8; 6], opts: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; 240];
        (m[0], m[1], m[2]) = (op, 1, 6);
        m[28..34].copy_from_slice(&chaddr);
        m[236..240].copy_from_slice(&[99, 130, 83, 99]);
        [&m[..], opts, &[255]].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn reads_ipv4_udp_and_its_ports() {
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let f = [eth(B, A, ETH_IPV4), ipv4(s, d, IPPROTO_UDP, &udp(1000, 53, b"x"))].concat();
        let h = Headers::parse(&f).unwrap();
        assert_eq!((h.src, h.dst, h.ethertype), (A, B, ETH_IPV4));
        let Net::V4(ip) = h.net else { panic!("{h:?}") };
        assert_eq!((ip.src, ip.dst, ip.proto, ip.first), (s, d, IPPROTO_UDP, true));
        assert_eq!(ip.ports(), Some((1000, 53)));
    }

    #[test]
    fn walks_ipv6_extension_headers() {
        let (s, d) = ("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap());
        // Hop-by-hop (8 bytes), then UDP.
        let body = [&[IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 0][..], &udp(546, 547, b"y")].concat();
        let f = [eth(B, A, ETH_IPV6), ipv6(s, d, 0, &body)].concat();
        let Net::V6(ip) = Headers::parse(&f).unwrap().net else { panic!() };
        assert_eq!((ip.src, ip.proto, ip.ports()), (s, IPPROTO_UDP, Some((546, 547))));
        // A later fragment has no ports.
        let frag = [&[IPPROTO_UDP, 0, 0, 8, 0, 0, 0, 1][..], &[0; 8]].concat();
        let f = [eth(B, A, ETH_IPV6), ipv6(s, d, 44, &frag)].concat();
        let Net::V6(ip) = Headers::parse(&f).unwrap().net else { panic!() };
        assert!(!ip.first && ip.ports().is_none());
    }

    #[test]
    fn short_and_odd_frames() {
        assert_eq!(Headers::parse(&[0; 13]), None);
        let cut = [eth(B, A, ETH_IPV4), vec![0x45, 0, 0, 40]].concat();
        assert_eq!(Headers::parse(&cut).unwrap().net, Net::Malformed);
        let tagged = [eth(B, A, 0x8100), vec![0, 5, 8, 0]].concat();
        assert_eq!(Headers::parse(&tagged).unwrap().net, Net::Tagged);
        let other = eth(B, A, 0x88b5);
        assert_eq!(Headers::parse(&other).unwrap().net, Net::Other);
        let (s, t) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 9));
        let f = [eth(B, A, ETH_ARP), arp(2, A, s, t)].concat();
        let Net::Arp(a) = Headers::parse(&f).unwrap().net else { panic!() };
        assert_eq!((a.op, a.sha, a.spa, a.tpa), (2, A, s, t));
    }
}

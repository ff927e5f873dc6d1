//! The protection classifier against frames built by hand (one per rule)
//! and generated (proptest): no panic, nothing accepted that the rules
//! refuse, and the tenant's own well-formed traffic accepted.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::headers::IPPROTO_TCP;
use crate::headers::build::*;

const ME: [u8; 6] = [2, 0, 0, 0, 0, 1];
const HIM: [u8; 6] = [2, 0, 0, 0, 0, 2];
const BCAST: [u8; 6] = [0xff; 6];

const ME4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const HIM4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ME6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const HIM6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn all() -> Policy {
    Policy {
        mac: ME,
        mac_nospoof: true,
        ip_nospoof: true,
        dhcp_nospoof: true,
        restricted: true,
        allowed: vec![(ME4.into(), 32), (ME6.into(), 128), (link_local(ME).into(), 128)],
        leased: None,
        cids: vec![],
    }
}

fn dhcp4(src_mac: [u8; 6], sport: u16, dport: u16, m: &[u8]) -> Vec<u8> {
    let ip = ipv4(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, IPPROTO_UDP, &udp(sport, dport, m));
    [eth(BCAST, src_mac, ETH_IPV4), ip].concat()
}

#[test]
fn own_traffic_passes() {
    let p = all();
    let udp4 = [eth(HIM, ME, ETH_IPV4), ipv4(ME4, HIM4, IPPROTO_UDP, &udp(1, 2, b"x"))];
    assert_eq!(p.check(&udp4.concat()), Ok(()));
    let udp6 = [eth(HIM, ME, ETH_IPV6), ipv6(ME6, HIM6, IPPROTO_UDP, &udp(1, 2, b"x"))];
    assert_eq!(p.check(&udp6.concat()), Ok(()));
    let arp4 = [eth(BCAST, ME, ETH_ARP), arp(1, ME, ME4, HIM4)].concat();
    assert_eq!(p.check(&arp4), Ok(()));
    // An ARP probe and a DHCP discover send from 0.0.0.0.
    let probe = [eth(BCAST, ME, ETH_ARP), arp(1, ME, Ipv4Addr::UNSPECIFIED, ME4)].concat();
    assert_eq!(p.check(&probe), Ok(()));
    let discover = dhcp4(ME, 68, 67, &bootp(1, ME, &[53, 1, 1, 61, 7, 1, 2, 0, 0, 0, 0, 1]));
    assert_eq!(p.check(&discover), Ok(()));
    // From the link-local address: a router solicitation with our MAC.
    let rs = [&[133, 0, 0, 0, 0, 0, 0, 0, 1, 1][..], &ME].concat();
    let ll = [eth(HIM, ME, ETH_IPV6), ipv6(link_local(ME), HIM6, IPPROTO_ICMPV6, &rs)];
    assert_eq!(p.check(&ll.concat()), Ok(()));
}

#[test]
fn each_rule_refuses_its_forgeries() {
    let p = all();
    let spoofed_mac = [eth(HIM, HIM, ETH_IPV4), ipv4(ME4, HIM4, 6, &[0; 20])].concat();
    assert_eq!(p.check(&spoofed_mac), Err(Reason::Mac));
    let arp_sha = [eth(BCAST, ME, ETH_ARP), arp(2, HIM, ME4, HIM4)].concat();
    assert_eq!(p.check(&arp_sha), Err(Reason::Mac));
    let other = [eth(HIM, ME, 0x88b5), vec![0; 46]].concat();
    assert_eq!(p.check(&other), Err(Reason::Restricted));
    let tagged = [eth(HIM, ME, 0x8100), vec![0, 7, 8, 0], vec![0; 46]].concat();
    assert_eq!(p.check(&tagged), Err(Reason::Restricted));
    let v4 = [eth(HIM, ME, ETH_IPV4), ipv4(HIM4, ME4, 6, &[0; 20])].concat();
    assert_eq!(p.check(&v4), Err(Reason::Ip));
    let v6 = [eth(HIM, ME, ETH_IPV6), ipv6(HIM6, ME6, 6, &[0; 20])].concat();
    assert_eq!(p.check(&v6), Err(Reason::Ip));
    let forged_arp = [eth(BCAST, ME, ETH_ARP), arp(2, ME, HIM4, ME4)].concat();
    assert_eq!(p.check(&forged_arp), Err(Reason::Ip));
    // A neighbour advertisement from our address claiming his.
    let na = [&[136, 0, 0, 0, 0x20, 0, 0, 0][..], &HIM6.octets()].concat();
    let na = [eth(HIM, ME, ETH_IPV6), ipv6(ME6, HIM6, IPPROTO_ICMPV6, &na)].concat();
    assert_eq!(p.check(&na), Err(Reason::Ip));
    let offer = dhcp4(ME, 67, 68, &bootp(2, HIM, &[53, 1, 2]));
    assert_eq!(p.check(&offer), Err(Reason::Dhcp));
    let their_cid = dhcp4(ME, 68, 67, &bootp(1, ME, &[53, 1, 1, 61, 7, 1, 2, 0, 0, 0, 0, 2]));
    assert_eq!(p.check(&their_cid), Err(Reason::Dhcp));
    let their_chaddr = dhcp4(ME, 68, 67, &bootp(1, HIM, &[53, 1, 1]));
    assert_eq!(p.check(&their_chaddr), Err(Reason::Dhcp));
    // Where a client id could hide from the check: a first fragment (the
    // rest of the message in fragments without ports), option overload
    // (options in sname and file), a second option 61 (joined to the
    // first by the server).
    let mut first_fragment = dhcp4(ME, 68, 67, &bootp(1, ME, &[53, 1, 1]));
    first_fragment[20] |= 0x20;
    assert_eq!(p.check(&first_fragment), Err(Reason::Dhcp));
    let overload = dhcp4(ME, 68, 67, &bootp(1, ME, &[53, 1, 1, 52, 1, 1]));
    assert_eq!(p.check(&overload), Err(Reason::Dhcp));
    let cid = |m: [u8; 6]| [&[61, 7, 1][..], &m].concat();
    let twice = [&[53, 1, 1][..], &cid(ME), &cid(HIM)].concat();
    assert_eq!(p.check(&dhcp4(ME, 68, 67, &bootp(1, ME, &twice))), Err(Reason::Dhcp));
    // A redirect whose target link-layer address is another's.
    let rd = [&[137, 0, 0, 0, 0, 0, 0, 0][..], &HIM6.octets(), &HIM6.octets(), &[2, 1], &HIM];
    let rd = [eth(HIM, ME, ETH_IPV6), ipv6(ME6, HIM6, IPPROTO_ICMPV6, &rd.concat())].concat();
    assert_eq!(p.check(&rd), Err(Reason::Mac));
    let adv = [&[2, 0, 0, 1][..], &[0, 1, 0, 10, 0, 3, 0, 1], &ME].concat();
    let adv = ipv6(link_local(ME), HIM6, IPPROTO_UDP, &udp(547, 546, &adv));
    assert_eq!(p.check(&[eth(HIM, ME, ETH_IPV6), adv].concat()), Err(Reason::Dhcp));
    assert_eq!(p.check(&[0; 10]), Err(Reason::Mac));
}

#[test]
fn allowed_lists_and_leases() {
    let leased: Leased = Arc::default();
    let p = Policy {
        allowed: vec![(Ipv4Addr::new(192, 0, 2, 0).into(), 24)],
        leased: Some(leased.clone()),
        cids: vec![b"tenant".to_vec()],
        ..all()
    };
    let from = |ip: Ipv4Addr| [eth(HIM, ME, ETH_IPV4), ipv4(ip, HIM4, 6, &[0; 20])].concat();
    assert_eq!(p.check(&from(Ipv4Addr::new(192, 0, 2, 77))), Ok(()));
    assert_eq!(p.check(&from(ME4)), Err(Reason::Ip));
    leased.lock().unwrap().push((IpAddr::V4(ME4), 24));
    assert_eq!(p.check(&from(ME4)), Ok(()));
    let cid = |c: &[u8]| {
        let opts = [&[53, 1, 3, 61, c.len() as u8][..], c].concat();
        p.check(&dhcp4(ME, 68, 67, &bootp(1, HIM, &opts)))
    };
    assert_eq!(cid(b"tenant"), Ok(()));
    assert_eq!(cid(b"tenant2"), Err(Reason::Dhcp));
    // RFC 4361: 0xff, an IAID, the DUID.
    assert_eq!(cid(&[&[0xff, 0, 0, 0, 1][..], b"tenant"].concat()), Ok(()));
}

#[test]
fn only_what_is_on_is_checked() {
    let p = Policy { mac: ME, mac_nospoof: true, ..Default::default() };
    let v4 = [eth(HIM, ME, ETH_IPV4), ipv4(HIM4, ME4, 6, &[0; 20])].concat();
    assert_eq!(p.check(&v4), Ok(()));
    let other = [eth(HIM, ME, 0x88b5), vec![0; 46]].concat();
    assert_eq!(p.check(&other), Ok(()));
    let guard = Guard::new();
    guard.set(Some(Policy { mac: ME, ..Default::default() }));
    assert!(guard.current().is_none(), "a policy with nothing on is none");
    guard.set(Some(p));
    assert!(guard.current().is_some());
    guard.dropped(Reason::Dhcp);
    guard.passed(2, 100);
    assert_eq!(guard.counts(), GuardCounts { drops: [0, 0, 1, 0], passed: 2, passed_bytes: 100 });
}

// ---- generated frames ----

type Parts = (
    ([u8; 6], [u8; 6], u16, Ipv4Addr, Ipv4Addr),
    (Ipv6Addr, Ipv6Addr, u8, u16, u16, [u8; 6]),
    (Vec<u8>, u8, u8, usize, usize),
);

/// A frame built from parts, each drawn from a small pool that holds the
/// link's own values and others, then possibly cut or scribbled on.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    let macs = prop::sample::select(vec![ME, HIM, BCAST, [0; 6]]);
    let v4s = prop::sample::select(vec![
        ME4,
        HIM4,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::new(192, 0, 2, 9),
        Ipv4Addr::BROADCAST,
    ]);
    let v6s = prop::sample::select(vec![
        ME6,
        HIM6,
        link_local(ME),
        link_local(HIM),
        Ipv6Addr::UNSPECIFIED,
    ]);
    let ports = prop::sample::select(vec![67u16, 68, 546, 547, 53, 1234]);
    let ethertypes =
        prop::sample::select(vec![ETH_IPV4, ETH_IPV6, ETH_ARP, 0x8100, 0x88a8, 0x88b5]);
    let protos = prop::sample::select(vec![IPPROTO_UDP, IPPROTO_TCP, IPPROTO_ICMPV6, 0, 44, 1]);
    (
        (macs.clone(), macs.clone(), ethertypes, v4s.clone(), v4s),
        (v6s.clone(), v6s, protos, ports.clone(), ports, macs),
        (
            prop::collection::vec(any::<u8>(), 0..64),
            0u8..4,
            any::<u8>(),
            any::<usize>(),
            any::<usize>(),
        ),
    )
        .prop_map(
            |(
                (dst, src, et, s4, d4),
                (s6, d6, proto, sp, dp, inner),
                (tail, body, byte, cut, at),
            ): Parts| {
                let l4 = match body {
                    0 => udp(sp, dp, &bootp(byte % 3, inner, &tail)),
                    1 => udp(sp, dp, &tail),
                    2 => {
                        // An NDP message naming an address and a MAC.
                        let t = 133 + byte % 4;
                        [&[t, 0, 0, 0, 0, 0, 0, 0][..], &d6.octets(), &[1 + byte % 2, 1], &inner]
                            .concat()
                    }
                    _ => tail.clone(),
                };
                let net = match et {
                    ETH_IPV4 => ipv4(s4, d4, proto, &l4),
                    ETH_IPV6 => ipv6(s6, d6, proto, &l4),
                    ETH_ARP => arp(u16::from(byte % 3), inner, s4, d4),
                    _ => [&[0, 5][..], &ipv4(s4, d4, proto, &l4)].concat(),
                };
                let mut f = [eth(dst, src, et), net].concat();
                // Now and then: cut it short, or change one byte.
                match byte % 8 {
                    0 => f.truncate(cut % (f.len() + 1)),
                    1 if !f.is_empty() => {
                        let i = at % f.len();
                        f[i] = f[i].wrapping_add(byte | 1);
                    }
                    _ => {}
                }
                f
            },
        )
}

fn policies() -> impl Strategy<Value = Policy> {
    (any::<[bool; 4]>(), any::<bool>()).prop_map(|(on, cids)| Policy {
        mac_nospoof: on[0],
        ip_nospoof: on[1],
        dhcp_nospoof: on[2],
        restricted: on[3],
        cids: if cids { vec![[&[1u8][..], &ME].concat()] } else { vec![] },
        ..all()
    })
}

/// What the rules say of an accepted frame, read at fixed offsets
/// (independently of the classifier's parser).
fn rules_allow(p: &Policy, f: &[u8]) -> Result<(), String> {
    let allowed =
        |ip: IpAddr| ip.is_unspecified() || p.allowed.iter().any(|(n, l)| in_prefix(*n, *l, ip));
    let get = |a: usize, n: usize| f.get(a..a + n);
    if f.len() < 14 {
        return if p.any() { Err("a runt frame".into()) } else { Ok(()) };
    }
    let et = u16::from_be_bytes([f[12], f[13]]);
    let tagged = [0x8100, 0x88a8, 0x9100].contains(&et);
    if p.mac_nospoof && f[6..12] != p.mac {
        return Err("a foreign source MAC".into());
    }
    if p.mac_nospoof && et == ETH_ARP && get(22, 6).is_some_and(|m| m != p.mac) {
        return Err("a foreign ARP sender MAC".into());
    }
    if p.restricted && ![ETH_IPV4, ETH_IPV6, ETH_ARP].contains(&et) {
        return Err(format!("ethertype {et:#06x}"));
    }
    if (p.ip_nospoof || p.dhcp_nospoof) && tagged {
        return Err("a tagged frame".into());
    }
    if p.ip_nospoof {
        let src: Option<IpAddr> = match et {
            ETH_IPV4 => get(26, 4).map(|b| <[u8; 4]>::try_from(b).unwrap().into()),
            ETH_IPV6 => get(22, 16).map(|b| <[u8; 16]>::try_from(b).unwrap().into()),
            ETH_ARP => get(28, 4).map(|b| <[u8; 4]>::try_from(b).unwrap().into()),
            _ => None,
        };
        if [ETH_IPV4, ETH_IPV6, ETH_ARP].contains(&et) {
            match src {
                None => return Err("an IP/ARP frame too short to have a sender".into()),
                Some(ip) if !allowed(ip) => return Err(format!("sender {ip}")),
                _ => {}
            }
        }
        // A neighbour advertisement right after the IPv6 header.
        if et == ETH_IPV6 && f.get(20) == Some(&IPPROTO_ICMPV6) && f.get(54) == Some(&136) {
            let t = get(62, 16).ok_or("a cut advertisement")?;
            let t: IpAddr = <[u8; 16]>::try_from(t).unwrap().into();
            if !allowed(t) {
                return Err(format!("an advertisement for {t}"));
            }
        }
    }
    if p.dhcp_nospoof {
        let ports = |at: usize| {
            get(at, 4).map(|b| (u16::from_be_bytes([b[0], b[1]]), u16::from_be_bytes([b[2], b[3]])))
        };
        // IPv4 without options, not a later fragment.
        if et == ETH_IPV4
            && f[14..].first() == Some(&0x45)
            && f.get(23) == Some(&IPPROTO_UDP)
            && get(20, 2).is_some_and(|b| b[0] & 0x1f == 0 && b[1] == 0)
        {
            match ports(34) {
                Some((67, _) | (_, 68)) => return Err("a DHCP server's message".into()),
                Some((_, 67)) => {
                    if f.get(42) != Some(&1) {
                        return Err("a BOOTREPLY".into());
                    }
                    if p.cids.is_empty() && get(70, 6) != Some(&p.mac[..]) {
                        return Err("another client's chaddr".into());
                    }
                }
                _ => {}
            }
        }
        if et == ETH_IPV6 && f.get(20) == Some(&IPPROTO_UDP) {
            if let Some((547, _) | (_, 546)) = ports(54) {
                return Err("a DHCPv6 server's message".into());
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// No panic, and nothing accepted that the rules refuse.
    #[test]
    fn accepts_nothing_the_rules_refuse(p in policies(), f in frames()) {
        if p.check(&f).is_ok() {
            if let Err(why) = rules_allow(&p, &f) {
                prop_assert!(false, "accepted {why}: {f:02x?}");
            }
        }
    }

    /// The tenant's own well-formed traffic goes, whatever is on.
    #[test]
    fn own_traffic_goes(p in policies(), dst in prop::sample::select(vec![HIM, BCAST]),
                        payload in prop::collection::vec(any::<u8>(), 0..200), v6 in any::<bool>()) {
        let f = if v6 {
            [eth(dst, ME, ETH_IPV6), ipv6(ME6, HIM6, IPPROTO_TCP, &payload)].concat()
        } else {
            [eth(dst, ME, ETH_IPV4), ipv4(ME4, HIM4, IPPROTO_TCP, &payload)].concat()
        };
        prop_assert_eq!(p.check(&f), Ok(()));
    }
}

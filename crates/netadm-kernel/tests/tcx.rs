//! netadm's BPF program on a device's tcx ingress, against the real
//! kernel, in namespaces this test makes: attached, read back, carrying
//! frames to a veth end's peer in another namespace, replaced and taken
//! off. Skips, saying so, when not root — except under CI (`CI=true`),
//! where not being root fails the test.

use std::time::{Duration, Instant};

use std::net::Ipv4Addr;

use netadm_kernel::{KernelError, LinkCounters, Netlink, NewLink, PacketSocket, tcx};

mod common;
use common::{Scratch, pair};

fn counters(nl: &Netlink, dev: &str) -> LinkCounters {
    nl.link_counters().unwrap()[dev]
}

/// Sends `n` frames out of device `from` of namespace `ns`.
fn send(ns: &Scratch, from: u32, n: usize) {
    ns.open()
        .run(|| {
            let s = PacketSocket::open(from, 0x88b5).unwrap();
            for _ in 0..n {
                s.send([0x02, 0, 0, 0, 0, 0x01], b"netadm tcx test").unwrap();
            }
        })
        .unwrap();
}

/// A device's arrivals, heard as they come: a packet socket on it
/// (every EtherType), opened in its namespace before anything is sent.
struct Ear(PacketSocket);

fn ear(ns: &Scratch, dev: &str) -> Ear {
    let index = ns.netlink().link_named(dev).unwrap().index;
    Ear(ns.open().run(|| PacketSocket::open(index, libc::ETH_P_ALL as u16)).unwrap().unwrap())
}

/// Waits until `dev`'s received frames reach `want`, reading the count
/// again at each frame `ear` hears, at most 5 s; its count then.
fn received(ear: &Ear, nl: &Netlink, dev: &str, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 2048];
    loop {
        let got = counters(nl, dev).rx_packets;
        // No stop descriptor: poll(2) passes over a negative one.
        if got >= want || ear.0.recv(&mut buf, deadline, -1).unwrap().is_none() {
            return counters(nl, dev).rx_packets;
        }
    }
}

#[test]
fn a_peer_redirect_hands_what_a_device_receives_to_a_zones_veth_end_and_is_read_back_replaced_and_taken_off()
 {
    let Some((h, z)) = pair("tcx") else { return };
    let (host, zone) = (h.netlink(), z.netlink());
    let up = NewLink { up: true, ..Default::default() };
    // Two guard ends here (`g1`, `g2`), their peers in the zone; frames
    // come in on `in`, sent from its peer `out`.
    host.add_veth("g1", "v1", &up, Some(&z.open())).unwrap();
    host.add_veth("g2", "v2", &up, Some(&z.open())).unwrap();
    host.add_veth("out", "in", &up, None).unwrap();
    z.ip(&["link", "set", "v1", "up"]);
    z.ip(&["link", "set", "v2", "up"]);
    h.ip(&["link", "set", "in", "up"]);
    let ix = |n: &str| host.link_named(n).unwrap().index;
    let (g1, g2, on, out) = (ix("g1"), ix("g2"), ix("in"), ix("out"));
    let ns = h.open();
    let of = || ns.run(|| tcx::redirect_peer_of(on)).unwrap().unwrap();
    assert_eq!(of(), Vec::<u32>::new(), "none of netadm's at first");

    ns.run(|| tcx::redirect_peer(on, g1)).unwrap().unwrap();
    assert_eq!(of(), [g1]);
    ns.run(|| tcx::redirect_peer(on, g1)).unwrap().unwrap();
    assert_eq!(of(), [g1], "put on again: still one");
    let (e1, e2, ein) = (ear(&z, "v1"), ear(&z, "v2"), ear(&h, "in"));
    let (v1, g1_sent) = (counters(&zone, "v1").rx_packets, counters(&host, "g1").tx_packets);
    send(&h, out, 20);
    assert_eq!(received(&e1, &zone, "v1", v1 + 20), v1 + 20, "the zone's end received all 20");
    assert_eq!(counters(&host, "g1").tx_packets, g1_sent, "none went out of the guard end");

    // Replaced: to the other pair's peer, and only there.
    ns.run(|| tcx::redirect_peer(on, g2)).unwrap().unwrap();
    assert_eq!(of(), [g2]);
    let (v1, v2) = (counters(&zone, "v1").rx_packets, counters(&zone, "v2").rx_packets);
    send(&h, out, 10);
    assert_eq!(received(&e2, &zone, "v2", v2 + 10), v2 + 10);
    assert_eq!(counters(&zone, "v1").rx_packets, v1);

    // Taken off: what comes in stays here.
    ns.run(|| tcx::clear_redirect_peer(on)).unwrap().unwrap();
    assert_eq!(of(), Vec::<u32>::new());
    let (came, v2) = (counters(&host, "in").rx_packets, counters(&zone, "v2").rx_packets);
    send(&h, out, 5);
    assert_eq!(received(&ein, &host, "in", came + 5), came + 5, "they arrived");
    assert_eq!(counters(&zone, "v2").rx_packets, v2, "and were not redirected");

    // No such device: nothing to take off.
    ns.run(|| tcx::clear_redirect_peer(999_999)).unwrap().unwrap();
}

/// An IPv4 packet of 40 bytes from `src` carrying `proto`.
fn ipv4(src: [u8; 4], proto: u8) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, proto, 0, 0];
    p.extend(src);
    p.extend([192, 0, 2, 2]);
    p.extend([0u8; 20]);
    p
}

/// Sends `packet` as `ethertype` out of device `from` of namespace `ns`.
fn send_ip(ns: &Scratch, from: u32, ethertype: u16, packet: &[u8]) {
    ns.open()
        .run(|| {
            let s = PacketSocket::open(from, ethertype).unwrap();
            s.send([0x02, 0, 0, 0, 0, 0xfe], packet).unwrap();
        })
        .unwrap();
}

#[test]
fn a_pass_program_sends_on_only_untagged_non_udp_ipv4_from_its_mac_and_prefixes_counted() {
    let Some((h, z)) = pair("tcp") else { return };
    let (host, zone) = (h.netlink(), z.netlink());
    let up = NewLink { up: true, ..Default::default() };
    // The guard end `g` here, its peer `v` in the zone, which sends; what
    // passes goes out of `s`, and the wire `w` receives it.
    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x01];
    host.add_veth("g", "v", &up, Some(&z.open())).unwrap();
    host.add_veth("s", "w", &up, None).unwrap();
    z.ip(&["link", "set", "v", "address", "02:00:00:00:bb:01", "up"]);
    h.ip(&["link", "set", "w", "up"]);
    let ix = |n: &str| host.link_named(n).unwrap().index;
    let (g, s) = (ix("g"), ix("s"));
    let v = zone.link_named("v").unwrap().index;
    let ns = h.open();
    let pass = |v4: Vec<(Ipv4Addr, u8)>, held: Option<&tcx::PassCounts>| {
        let p = tcx::Pass { mac: MAC, v4 };
        ns.run(|| tcx::pass(g, s, &p, held)).unwrap()
    };
    let passed = || ns.run(|| tcx::passed(g)).unwrap().unwrap();
    assert_eq!(passed(), None, "no program, no counts");
    let counts = pass(vec![(ip("192.0.2.10"), 32), (ip("198.51.100.0"), 24)], None).unwrap();
    assert_eq!(ns.run(|| tcx::pass_of(g)).unwrap().unwrap(), [s]);
    assert_eq!(passed(), Some((0, 0)));

    let wire = || counters(&host, "w").rx_packets;
    let ew = ear(&h, "w");
    let good = ipv4([192, 0, 2, 10], 6);
    // Each frame that goes on to nftables (here: to the guard end's own
    // stack), then one that passes on the same path: the wire gets that
    // one alone.
    let goes_on = |ethertype: u16, packet: &[u8], what: &str| {
        let at = wire();
        send_ip(&z, v, ethertype, packet);
        send_ip(&z, v, 0x0800, &good);
        assert_eq!(received(&ew, &host, "w", at + 1), at + 1, "{what}: the frame after it passed");
        assert_eq!(wire(), at + 1, "{what} passed");
    };
    goes_on(0x0800, &ipv4([192, 0, 2, 10], 17), "UDP");
    goes_on(0x0800, &ipv4([192, 0, 2, 99], 6), "a source not allowed");
    goes_on(0x0800, &ipv4([198, 51, 101, 7], 6), "a source outside the /24");
    goes_on(0x86dd, &ipv4([192, 0, 2, 10], 6), "another EtherType");
    let mut tagged = vec![0x00, 0x07, 0x08, 0x00];
    tagged.extend(&good);
    // The kernel takes the tag out of the frame on receive (skb_vlan_untag):
    // the program sees IPv4 and the tag beside it.
    goes_on(0x8100, &tagged, "a VLAN-tagged frame");
    let mut short = good.clone();
    short[0] = 0x44;
    goes_on(0x0800, &short, "a header of 4 words");
    let mut v5 = good.clone();
    v5[0] = 0x50;
    goes_on(0x0800, &v5, "IP version 5");
    goes_on(0x0800, &good[..19], "19 bytes of IPv4 header");
    // What passes: TCP and ICMP from an allowed source.
    let at = wire();
    send_ip(&z, v, 0x0800, &ipv4([198, 51, 100, 7], 1));
    assert_eq!(received(&ew, &host, "w", at + 1), at + 1);
    let n = 9; // the 8 that followed each refused frame, and this one
    assert_eq!(passed(), Some((n, 40 * n)), "frames of 40 bytes from their IPv4 header");
    // From another MAC: on to nftables.
    z.ip(&["link", "set", "v", "address", "02:00:00:00:bb:02"]);
    let at = wire();
    send_ip(&z, v, 0x0800, &good);
    z.ip(&["link", "set", "v", "address", "02:00:00:00:bb:01"]);
    send_ip(&z, v, 0x0800, &good);
    assert_eq!(received(&ew, &host, "w", at + 1), at + 1);
    assert_eq!(wire(), at + 1, "the other MAC's frame did not pass");

    // Replaced, with other prefixes: the old ones no longer pass, and the
    // counts go on.
    pass(vec![(ip("192.0.2.99"), 32)], None).unwrap();
    assert_eq!(ns.run(|| tcx::pass_of(g)).unwrap().unwrap(), [s], "one, replaced");
    let at = wire();
    send_ip(&z, v, 0x0800, &good);
    send_ip(&z, v, 0x0800, &ipv4([192, 0, 2, 99], 6));
    assert_eq!(received(&ew, &host, "w", at + 1), at + 1);
    assert_eq!(wire(), at + 1);
    let n = 11;
    assert_eq!(passed(), Some((n, 40 * n)));

    // Taken off, the counts held; put back with them, they go on.
    ns.run(|| tcx::clear_pass(g)).unwrap().unwrap();
    assert_eq!(ns.run(|| tcx::pass_of(g)).unwrap().unwrap(), Vec::<u32>::new());
    assert_eq!(passed(), None);
    assert_eq!(counts.read().unwrap(), (n, 40 * n), "held, they stay");
    pass(vec![(ip("192.0.2.10"), 32)], Some(&counts)).unwrap();
    let at = wire();
    send_ip(&z, v, 0x0800, &good);
    assert_eq!(received(&ew, &host, "w", at + 1), at + 1);
    assert_eq!(passed(), Some((n + 1, 40 * (n + 1))));

    // Too many prefixes, or none: refused, nothing changed.
    let many = (0..=tcx::MAX_PREFIXES).map(|i| (Ipv4Addr::from(i as u32), 32)).collect();
    assert!(matches!(pass(many, None), Err(KernelError::Invalid { .. })));
    assert!(matches!(pass(vec![], None), Err(KernelError::Invalid { .. })));
    assert_eq!(ns.run(|| tcx::pass_of(g)).unwrap().unwrap(), [s]);
    assert_eq!(passed(), Some((n + 1, 40 * (n + 1))));
    ns.run(|| tcx::clear_pass(g)).unwrap().unwrap();
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

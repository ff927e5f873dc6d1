//! Link protection against a hostile tenant (issue 25), on emulated and
//! on kernel VNICs, in namespaces this test makes: netadmd in `a`; the
//! wire's far side in `b` (192.0.2.2/24); the tenant's zone `z1` with VNIC
//! hv0 (192.0.2.10, 2001:db8::10), protected
//! (`-p zone=Z1,protection=mac-nospoof,ip-nospoof,dhcp-nospoof,restricted`,
//! one `-p` list as dladm reads it); a neighbour's zone `z2` with VNIC nv0
//! (192.0.2.20), unprotected, over the same port. Root in `z1` sends from
//! a raw socket: spoofed source MACs, spoofed IPv4 and IPv6 sources (to
//! the wire and straight to the neighbour), forged ARP (another's address,
//! another's MAC), a DHCP server's offer, another client's DHCP discover,
//! a non-IP ethertype and a VLAN-tagged frame. Raw sockets on the far
//! side and in `z2` watch until a legitimate frame sent after them
//! arrives and, with protection off, every frame that should; so no wait
//! is a guess. (A frame that passed the guard yet came after the
//! legitimate one would still fail the test: the drops are counted
//! exactly.)
//!
//! Protected: none of them reaches the wire or the neighbour, each is
//! counted under its protection in `show-link -s --json` (exactly), the
//! metrics say the same, and the tenant's own pings still go. With
//! protection reset, the same frames reach the wire and the neighbour —
//! the test fails without it. Kernel VNICs also keep their rules while
//! netadmd is killed (frames sent then are dropped and counted when the
//! next netadmd reads the books), and the next netadmd adopts them;
//! taking protection off one over a port under an IP interface
//! (`reset-linkprop`, `apply -f`) is `Busy` and changes nothing.
//! Under `CI=true` missing prerequisites fail.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use netadm_datapath::headers::build::{arp, bootp, eth, ipv4, ipv6, udp};
use netadm_testkit::raw::Raw;
use netadm_testkit::*;
use serde_json::Value;

const HV: [u8; 6] = [0x02, 0, 0, 0, 0xaa, 0x01];
const NV: [u8; 6] = [0x02, 0, 0, 0, 0xaa, 0x02];
const BCAST: [u8; 6] = [0xff; 6];
const ALL: &str = "mac-nospoof,ip-nospoof,dhcp-nospoof,restricted";

fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

const OWN4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const THEIR4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 20);
const GATEWAY4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const THEIR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x20);

/// One hostile frame: what it is, the protection that must drop it, and
/// whether it is for every station (so the wire would carry it) or for
/// the neighbour alone.
struct Hostile {
    what: &'static str,
    reason: &'static str,
    broadcast: bool,
    frame: Vec<u8>,
}

/// A UDP datagram from `src` to `dst` carrying `marker`.
fn udp4(dmac: [u8; 6], smac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, marker: &[u8]) -> Vec<u8> {
    [eth(dmac, smac, 0x0800), ipv4(src, dst, 17, &udp(4000, 4001, marker))].concat()
}

/// The frames root in the tenant's zone sends, each with a marker of its
/// own (`round` tells rounds apart).
fn hostile(round: u32) -> Vec<Hostile> {
    let mk = |i: u32| format!("NETADM-HOSTILE-{round}-{i}").into_bytes();
    let h = |what, reason, broadcast, frame| Hostile { what, reason, broadcast, frame };
    let nv_cid = [&[61u8, 7, 1][..], &NV].concat();
    vec![
        h(
            "a spoofed source MAC",
            "mac-nospoof",
            true,
            udp4(BCAST, NV, OWN4, Ipv4Addr::BROADCAST, &mk(1)),
        ),
        h(
            "a spoofed source MAC, to the neighbour",
            "mac-nospoof",
            false,
            udp4(NV, NV, OWN4, THEIR4, &mk(2)),
        ),
        h(
            "a spoofed IPv4 source",
            "ip-nospoof",
            true,
            udp4(BCAST, HV, THEIR4, Ipv4Addr::BROADCAST, &mk(3)),
        ),
        h(
            "a spoofed IPv4 source, to the neighbour",
            "ip-nospoof",
            false,
            udp4(NV, HV, THEIR4, THEIR4, &mk(4)),
        ),
        h(
            "an IPv4 header shorter than its 20 bytes, the source behind it unvouched",
            "ip-nospoof",
            true,
            {
                let mut f = udp4(BCAST, HV, OWN4, Ipv4Addr::BROADCAST, &mk(12));
                f[14] = 0x44;
                f
            },
        ),
        h(
            "a spoofed IPv6 source",
            "ip-nospoof",
            true,
            [
                eth([0x33, 0x33, 0, 0, 0, 1], HV, 0x86dd),
                ipv6(THEIR6, "ff02::1".parse().unwrap(), 17, &udp(4000, 4001, &mk(5))),
            ]
            .concat(),
        ),
        h(
            "an ARP reply claiming the gateway's address",
            "ip-nospoof",
            true,
            [eth(BCAST, HV, 0x0806), arp(2, HV, GATEWAY4, THEIR4), mk(6)].concat(),
        ),
        h(
            "an ARP reply claiming the neighbour's MAC",
            "mac-nospoof",
            true,
            [eth(BCAST, HV, 0x0806), arp(2, NV, OWN4, THEIR4), mk(7)].concat(),
        ),
        h(
            "a DHCP server's offer",
            "dhcp-nospoof",
            true,
            [
                eth(BCAST, HV, 0x0800),
                ipv4(
                    OWN4,
                    Ipv4Addr::BROADCAST,
                    17,
                    &udp(67, 68, &bootp(2, NV, &[&[53, 1, 2][..], &mk(8)].concat())),
                ),
            ]
            .concat(),
        ),
        h(
            "a DHCP discover as the neighbour's client",
            "dhcp-nospoof",
            true,
            [
                eth(BCAST, HV, 0x0800),
                ipv4(
                    Ipv4Addr::UNSPECIFIED,
                    Ipv4Addr::BROADCAST,
                    17,
                    &udp(
                        68,
                        67,
                        &bootp(1, NV, &[&[53, 1, 1][..], &nv_cid, &[224, 20], &mk(9)].concat()),
                    ),
                ),
            ]
            .concat(),
        ),
        h(
            "a non-IP ethertype",
            "restricted",
            true,
            [eth(BCAST, HV, 0x88b5), mk(10), vec![0; 30]].concat(),
        ),
        h(
            "a VLAN-tagged frame with a spoofed source behind the tag",
            "restricted",
            true,
            [
                eth(BCAST, HV, 0x8100),
                vec![0, 7, 0x08, 0x00],
                ipv4(THEIR4, Ipv4Addr::BROADCAST, 17, &udp(4000, 4001, &mk(11))),
            ]
            .concat(),
        ),
    ]
}

/// The legitimate frame that ends a round: once a watcher has it, it has
/// everything sent before it on that path.
fn sentinel(round: u32) -> (Vec<u8>, Vec<u8>) {
    let m = format!("NETADM-SENTINEL-{round}").into_bytes();
    (udp4(BCAST, HV, OWN4, Ipv4Addr::new(192, 0, 2, 255), &m), m)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The markers of `round` a raw socket on `dev` in `ns` sees until the
/// round's sentinel has come and so has each marker of `expect` (at most
/// 10 s), read on a thread of its own started before the round is sent;
/// and whether the sentinel came.
/// `expect` is needed because the sentinel alone does not close a round
/// on every path: an emulated port sends each flow (5-tuple hash) on a
/// ring of its own, so frames of different flows may pass one another.
fn watch(
    ns: &str,
    dev: &str,
    round: u32,
    expect: Vec<String>,
) -> std::thread::JoinHandle<(bool, Vec<String>)> {
    let raw = Raw::open(ns, dev);
    std::thread::spawn(move || {
        let (_, end) = sentinel(round);
        let prefix = format!("NETADM-HOSTILE-{round}-").into_bytes();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen: Vec<String> = vec![];
        let mut ended = false;
        while Instant::now() < deadline {
            if ended && expect.iter().all(|m| seen.contains(m)) {
                return (true, seen);
            }
            let Some(s) = raw.recv() else { continue };
            if contains(&s.frame, &end) {
                ended = true;
                continue;
            }
            if let Some(at) = s.frame.windows(prefix.len()).position(|w| w == prefix) {
                let tail = &s.frame[at..];
                let len = tail.iter().position(|b| !b.is_ascii_graphic()).unwrap_or(tail.len());
                seen.push(String::from_utf8_lossy(&tail[..len]).into_owned());
            }
        }
        (ended, seen)
    })
}

/// Round `round`'s marker of hostile frame `i` (counted from 0).
fn marker(round: u32, i: usize) -> String {
    format!("NETADM-HOSTILE-{round}-{}", i + 1)
}

/// Sends round `round` from the tenant's zone; what the wire and the
/// neighbour saw of it. `open`: protection is off, so the watchers wait
/// for every frame that should reach them (the broadcasts on the wire,
/// all of them at the neighbour) besides the sentinel.
fn send_round(w: &World, round: u32, open: bool) -> (Vec<String>, Vec<String>) {
    let all = hostile(round);
    let marks = |only_broadcast: bool| -> Vec<String> {
        let want = |h: &Hostile| open && (h.broadcast || !only_broadcast);
        all.iter().enumerate().filter(|(_, h)| want(h)).map(|(i, _)| marker(round, i)).collect()
    };
    let wire = watch(w.b.name(), &w.wire, round, marks(true));
    let near = watch(w.z2.name(), "nv0", round, marks(false));
    let raw = Raw::open(w.z1.name(), "hv0");
    for h in hostile(round) {
        raw.send(&h.frame);
    }
    raw.send(&sentinel(round).0);
    let (wire_done, wire_seen) = wire.join().unwrap();
    let (near_done, near_seen) = near.join().unwrap();
    assert!(wire_done, "the wire never saw round {round}'s sentinel (saw {wire_seen:?})");
    assert!(near_done, "the neighbour never saw round {round}'s sentinel (saw {near_seen:?})");
    (wire_seen, near_seen)
}

/// What `show-link -s --json` says protection dropped on hv0, by reason.
fn drops(bus: &Bus) -> Value {
    let s = json(bus, &["show-link", "-s"]);
    let r = rows(&s, "link", "hv0");
    assert_eq!(r.len(), 1, "no hv0 row in show-link -s: {s}");
    r[0].clone()
}

/// What a round's frames must add to each reason's count.
fn expected(round: u32) -> std::collections::BTreeMap<&'static str, u64> {
    let mut m = std::collections::BTreeMap::new();
    for h in hostile(round) {
        *m.entry(h.reason).or_insert(0) += 1;
    }
    m
}

/// One test's namespaces, bus and netadmd.
struct World {
    daemon: Option<Daemon>,
    bus: Bus,
    hw: std::path::PathBuf,
    /// The far side's device the wire ends on.
    wire: String,
    /// The link the VNICs are over.
    link: &'static str,
    z1: Netns,
    z2: Netns,
    a: Netns,
    b: Netns,
}

impl World {
    fn new(tag: &str, kernel: bool) -> Option<Self> {
        if !netns_prerequisites(&["ping", "nft"]) {
            return None;
        }
        sweep_stale("pt");
        let [a, b, z1, z2] =
            ["a", "b", "y", "z"].map(|s| Netns::unique("pt", &format!("{tag}{s}")).unwrap());
        let bus = Bus::start();
        let dir = bus.subdir("protection");
        let hw = dir.join("hw.toml");
        let (wire, link) = if kernel {
            veth((a.name(), "nic0"), (b.name(), "far0")).unwrap();
            ip(b.name(), &["addr", "add", "192.0.2.2/24", "dev", "far0"]);
            std::fs::write(
                &hw,
                "[[port]]\nname = \"net0\"\nclass = \"kernel\"\ninterface = \"nic0\"\n",
            )
            .unwrap();
            ("far0".to_owned(), "net0")
        } else {
            netadm_far_side(a.name(), b.name()).unwrap();
            fixtures::afpacket(&["va0"]).write(&hw).unwrap();
            ("vb0".to_owned(), "i40e0")
        };
        let mut w = World { daemon: None, bus, hw, wire, link, z1, z2, a, b };
        w.start();
        Some(w)
    }

    fn start(&mut self) {
        let state = self.bus.dir().join("state");
        ip(self.a.name(), &["link", "set", "lo", "up"]);
        let d = Daemon::builder(&self.bus, state)
            .netns(self.a.name())
            .config(&self.hw)
            .args(["--metrics-listen", "127.0.0.1:0"]);
        self.daemon = Some(d.start());
    }

    /// The two VNICs, their interfaces and addresses.
    fn vnics(&self) {
        let bus = &self.bus;
        let z1 = format!("zone={},protection={ALL}", self.z1.name());
        json(bus, &["create-vnic", "-l", self.link, "-m", &mac_str(HV), "-p", &z1, "hv0"]);
        let z2 = format!("zone={}", self.z2.name());
        json(bus, &["create-vnic", "-l", self.link, "-m", &mac_str(NV), "-p", &z2, "nv0"]);
        for (n, v4, v6) in [
            ("hv0", "192.0.2.10/24", "2001:db8::10/64"),
            ("nv0", "192.0.2.20/24", "2001:db8::20/64"),
        ] {
            json(bus, &["create-if", n]);
            json(bus, &["create-addr", "-T", "static", "-a", v4, &format!("{n}/v4")]);
            json(bus, &["create-addr", "-T", "static", "-a", v6, &format!("{n}/v6")]);
        }
        let p = json(bus, &["show-linkprop", "-p", "protection", "hv0"]);
        assert_eq!(p[0]["value"], ALL, "{p}");
    }

    /// The tenant's own traffic: pings to the far side and the neighbour.
    fn own_traffic_flows(&self) {
        for to in ["192.0.2.2", "192.0.2.20"] {
            let out = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    self.z1.name(),
                    "ping",
                    "-c",
                    "2",
                    "-i",
                    "0.2",
                    "-W",
                    "2",
                    to,
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "ping {to} from the protected zone: {out:?}");
        }
    }
}

/// Round `round` with protection on: nothing out, everything counted.
fn protected_round(w: &World, round: u32, before: &Value) -> Value {
    let (wire, near) = send_round(w, round, false);
    assert!(wire.is_empty(), "the wire saw {wire:?}");
    assert!(near.is_empty(), "the neighbour saw {near:?}");
    let after = wait_counts(&w.bus, before, round);
    for (reason, n) in expected(round) {
        let (b, a) = (
            before["drops"][reason].as_u64().unwrap_or(0),
            after["drops"][reason].as_u64().unwrap(),
        );
        assert_eq!(a - b, n, "{reason}: counted {} of this round's {n}: {after}", a - b);
    }
    after
}

/// hv0's books once they hold round `round`'s drops (the kernel's
/// counters are read as they are; the datapath's are by now): at most 5 s.
fn wait_counts(bus: &Bus, before: &Value, round: u32) -> Value {
    let want: u64 = expected(round).values().sum();
    let total = |v: &Value| v["pdrops"].as_u64().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = drops(bus);
        if total(&now) >= total(before) + want || Instant::now() > deadline {
            return now;
        }
        std::thread::yield_now();
    }
}

fn hostile_tenant(tag: &str, kernel: bool) {
    let Some(mut w) = World::new(tag, kernel) else { return };
    w.vnics();
    w.own_traffic_flows();
    if kernel {
        // What the zone receives, netadm's BPF program on the stand-in
        // hands to hv0 in the zone: none of it goes out of the guard end
        // into the veth (nftables' fwd, behind it, would).
        // And what hv0 sends that the rules' first one would pass (IPv4
        // that is not UDP: the echo requests), netadm's BPF program on
        // the guard end sends on and counts, with what the rules pass,
        // in show-link -s.
        let links = ip(w.a.name(), &["-o", "link", "show"]);
        let end = links.split(": ").find(|d| d.starts_with("npg")).expect("the guard end");
        let end = end.split('@').next().unwrap();
        let guard = || link_counts(w.a.name(), end)[2];
        let shown = || drops(&w.bus)["opackets"].as_u64().unwrap();
        let ruled = || {
            let out = run(&["ip", "netns", "exec", w.a.name(), "nft", "-j", "list", "counters"]);
            let v: Value = serde_json::from_str(&out.unwrap()).unwrap();
            let c = v["nftables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["counter"]["name"].as_str().is_some_and(|n| n.ends_with("_pass")));
            c.expect("the rules' pass counter")["counter"]["packets"].as_u64().unwrap()
        };
        // The program's own count, read from its map.
        let by_bpf = || {
            let ns = netadm_kernel::Netns::open(w.a.name()).unwrap();
            let count = ns.run(|| {
                let i = netadm_kernel::index_of(end).expect("the guard end's index");
                netadm_kernel::tcx::passed(i).unwrap().expect("netadm's pass program")
            });
            count.unwrap().0
        };
        // The zone sends on its own too (IPv6's router solicitations,
        // MLD reports, ARP), which the rules pass: each count is read
        // inside the window of show-link -s's, which holds them all.
        let sent = guard();
        let was_shown = shown();
        let (was_ruled, was_bpf) = (ruled(), by_bpf());
        w.own_traffic_flows();
        let (by_bpf, by_rules) = (by_bpf() - was_bpf, ruled() - was_ruled);
        let by_all = shown() - was_shown;
        assert_eq!(guard(), sent, "frames for hv0 went out of the guard end");
        assert!(by_bpf >= 4, "netadm's program passed {by_bpf} of the 4 echo requests");
        assert!(
            by_all >= by_rules + by_bpf,
            "show-link -s counted {by_all} passed; the rules passed {by_rules}, the program {by_bpf}"
        );
    }
    let zero = drops(&w.bus);
    assert_eq!(zero["enforced"], if kernel { "kernel" } else { "datapath" }, "{zero}");
    let after = protected_round(&w, 1, &zero);
    assert!(after["opackets"].as_u64().unwrap() > 0, "nothing let through: {after}");
    // The metrics say the same.
    let m = metrics(&w);
    for (reason, _) in expected(1) {
        let line = format!(
            "netadm_link_protection_drops_total{{link=\"hv0\",reason=\"{reason}\"}} {}",
            after["drops"][reason]
        );
        assert!(m.contains(&line), "no {line:?} in the metrics:\n{m}");
    }

    if kernel {
        // The rules stay while no netadmd runs; the next one adopts them
        // and reads on from the same books.
        w.daemon.take().unwrap().kill9();
        let (wire, near) = send_round(&w, 2, false);
        assert!(wire.is_empty() && near.is_empty(), "with netadmd killed: {wire:?} {near:?}");
        w.start();
        let later = wait_counts(&w.bus, &after, 2);
        for (reason, n) in expected(2) {
            let (b, a) = (
                after["drops"][reason].as_u64().unwrap(),
                later["drops"][reason].as_u64().unwrap(),
            );
            assert_eq!(a - b, n, "{reason} across the restart: {later}");
        }
        assert!(later["opackets"].as_u64() >= after["opackets"].as_u64(), "{after} {later}");
        w.own_traffic_flows();
    }

    if kernel {
        // Over a kernel port, protection off rebuilds the device: not
        // under an IP interface, by a verb or by apply -f.
        let (k, m) = json_err(&w.bus, &["reset-linkprop", "-p", "protection", "hv0"]);
        assert_eq!(k, "Busy", "{m}");
        let mut doc: Value = serde_json::from_str(&text(&w.bus, &["--json", "show-config"]))
            .expect("show-config --json is JSON");
        let props = doc["vnic"]["hv0"]["props"].as_object_mut().expect("hv0's props");
        assert!(props.remove("protection").is_some(), "no protection in show-config: {props:?}");
        let f = w.bus.dir().join("unprotected.json");
        std::fs::write(&f, doc.to_string()).unwrap();
        let (k, m) = json_err(&w.bus, &["apply", "-f", f.to_str().unwrap()]);
        assert_eq!(k, "Busy", "{m}");
        let p = json(&w.bus, &["show-linkprop", "-p", "protection", "hv0"]);
        assert_eq!(p[0]["value"], ALL, "a refused apply changed protection: {p}");
    }
    // Without protection the same frames get out: the test fails without it.
    json(&w.bus, &["delete-if", "hv0"]);
    json(&w.bus, &["reset-linkprop", "-p", "protection", "hv0"]);
    json(&w.bus, &["create-if", "hv0"]);
    json(&w.bus, &["create-addr", "-T", "static", "-a", "192.0.2.10/24", "hv0/v4"]);
    let (wire, near) = send_round(&w, 3, true);
    for (i, h) in hostile(3).iter().enumerate() {
        let m = marker(3, i);
        assert!(near.contains(&m), "unprotected, the neighbour did not see {} ({near:?})", h.what);
        if h.broadcast {
            assert!(wire.contains(&m), "unprotected, the wire did not see {} ({wire:?})", h.what);
        }
    }

    // Rules come back with protection and go with the VNIC.
    json(&w.bus, &["delete-if", "hv0"]);
    json(&w.bus, &["set-linkprop", "-p", &format!("protection={ALL}"), "hv0"]);
    let rules = || run(&["ip", "netns", "exec", w.a.name(), "nft", "list", "ruleset"]).unwrap();
    let devices = || ip(w.a.name(), &["-o", "link", "show"]);
    if kernel {
        assert!(rules().contains("link protection of hv0"), "{}", rules());
        assert!(devices().contains("npg") && devices().contains("npm"), "{}", devices());
    }
    json(&w.bus, &["delete-vnic", "hv0"]);
    assert!(!rules().contains("hv0"), "rules left after delete-vnic:\n{}", rules());
    assert!(!devices().contains("npg") && !devices().contains("npm"), "{}", devices());
    let s = json(&w.bus, &["show-link", "-s"]);
    assert!(rows(&s, "link", "hv0").is_empty(), "{s}");
}

/// A scrape of netadmd's metrics, from inside its namespace.
fn metrics(w: &World) -> String {
    use std::io::{Read, Write};
    let addr = w.daemon.as_ref().expect("netadmd running").metrics_address();
    enter(w.a.name(), || {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        resp
    })
}

/// A protected VNIC over a kernel port is a veth pair whose far end
/// netadm guards: both ends carry the link's MTU, before and after it
/// changes, and a frame of the new size crosses them.
#[test]
fn a_guarded_kernel_vnics_veth_follows_its_links_mtu() {
    let Some(w) = World::new("m", true) else { return };
    w.vnics();
    let mtu_of = |ns: &str, dev: &str| {
        let line = ip(ns, &["-o", "link", "show", "dev", dev]);
        let mtu = line.split_whitespace().skip_while(|f| *f != "mtu").nth(1);
        mtu.and_then(|m| m.parse::<u32>().ok()).unwrap_or_else(|| panic!("no mtu in {line}"))
    };
    let links = ip(w.a.name(), &["-o", "link", "show"]);
    let end = links.split(": ").find(|d| d.starts_with("npg")).expect("the guard end");
    let end = end.split('@').next().unwrap().to_owned();
    let ends = || [mtu_of(w.z1.name(), "hv0"), mtu_of(w.a.name(), &end)];
    assert_eq!(ends(), [1500, 1500], "hv0's zone end and its guard end {end}");
    let ping = |size: &str| {
        let args = ["netns", "exec", w.z1.name(), "ping", "-c", "1", "-W", "2", "-M", "do"];
        std::process::Command::new("ip")
            .args(args)
            .args(["-s", size, "192.0.2.20"])
            .output()
            .unwrap()
    };
    for mtu in [9000, 1500] {
        json(&w.bus, &["set-linkprop", "-p", &format!("mtu={mtu}"), w.link]);
        assert_eq!(ends(), [mtu, mtu], "hv0's zone end and its guard end {end}");
        // The largest unfragmented echo of the MTU, to nv0 on the same link.
        let out = ping(&(mtu - 28).to_string());
        assert!(out.status.success(), "a {mtu}-byte ping from the protected zone: {out:?}");
    }
}

#[test]
fn a_hostile_tenant_on_an_emulated_vnic_reaches_no_one() {
    hostile_tenant("e", false);
}

#[test]
fn a_hostile_tenant_on_a_kernel_vnic_reaches_no_one() {
    hostile_tenant("k", true);
}

/// A protected kernel VNIC whose devices someone deleted, made again by
/// `refresh-if`, is protected again: its rules are hooked on the new
/// guard end, and a hostile round reaches no one.
#[test]
fn refresh_if_makes_a_protected_kernel_vnic_again_protected() {
    let Some(w) = World::new("r", true) else { return };
    w.vnics();
    let before = drops(&w.bus);
    ip(w.z1.name(), &["link", "del", "hv0"]);
    json(&w.bus, &["refresh-if", "hv0"]);
    w.own_traffic_flows();
    protected_round(&w, 1, &before);
}

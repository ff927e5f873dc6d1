//! 802.1Q on a real wire, in network namespaces this test makes: netadmd
//! runs in one, an i40e-class and an atl1c-class port wired by afpacket to
//! veth pairs whose far ends sit in the other. There a raw `AF_PACKET`
//! socket (this machine's kernel has no 8021q module and no bridge VLAN
//! filtering) is the far side: it checks that every frame a VID-tagged
//! VNIC's IP interface sends carries the tag (TPID 0x8100, the VID, PCP 0),
//! answers ARP and ICMP echo with tagged frames — full-MTU ones too — so
//! that ping succeeds, and injects a frame for a VID nobody has, which is
//! dropped and counted. Prerequisites (root, ip, ping) missing: "skipped",
//! except under `CI=true`, where the test fails naming them.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use netadm_testkit::raw::Raw;
use netadm_testkit::*;

/// `frame` (untagged) with an 802.1Q tag for `vid` after its MACs.
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// The Internet checksum of `b`.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 =
        b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const FAR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];

/// The far side's answer to an untagged frame, if it asks for one: an ARP
/// reply from `FAR_MAC`, or an ICMP echo reply.
fn answer(f: &[u8]) -> Option<Vec<u8>> {
    let ethertype = u16::from_be_bytes([f[12], f[13]]);
    let src: [u8; 6] = f[6..12].try_into().unwrap();
    let mut r = Vec::with_capacity(f.len());
    r.extend_from_slice(&src);
    r.extend_from_slice(&FAR_MAC);
    match ethertype {
        // ARP request: who has TPA? -> TPA is at FAR_MAC.
        0x0806 if f.len() >= 42 && f[20..22] == [0, 1] => {
            let (sha, spa, tpa) = (&f[22..28], &f[28..32], &f[38..42]);
            r.extend_from_slice(&f[12..20]);
            r.extend_from_slice(&[0, 2]);
            r.extend_from_slice(&FAR_MAC);
            r.extend_from_slice(tpa);
            r.extend_from_slice(sha);
            r.extend_from_slice(spa);
            Some(r)
        }
        // ICMP echo request -> reply.
        0x0800 if f.len() >= 42 && f[23] == 1 && f[34] == 8 => {
            let ihl = usize::from(f[14] & 0x0f) * 4;
            let mut ip = f[14..].to_vec();
            let (s, d) = (ip[12..16].to_vec(), ip[16..20].to_vec());
            ip[12..16].copy_from_slice(&d);
            ip[16..20].copy_from_slice(&s);
            ip[10..12].copy_from_slice(&[0, 0]);
            let c = csum(&ip[..ihl]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            ip[ihl] = 0;
            ip[ihl + 2..ihl + 4].copy_from_slice(&[0, 0]);
            let c = csum(&ip[ihl..]);
            ip[ihl + 2..ihl + 4].copy_from_slice(&c.to_be_bytes());
            r.extend_from_slice(&f[12..14]);
            r.extend_from_slice(&ip);
            Some(r)
        }
        _ => None,
    }
}

/// What the far side saw while it answered.
#[derive(Default, Debug)]
struct Far {
    /// Frames from the interface's MAC, and how many carried the right tag.
    from_if: usize,
    tagged_right: usize,
    /// The longest of them, untagged (the wire carried it 4 bytes longer).
    longest: usize,
    answered: usize,
    /// A frame from the interface that was not tagged as it should be.
    wrong: Option<String>,
}

/// Answers, tagged with `vid`, what interface `mac` sends tagged with
/// `vid`, until `done` is set.
fn far_side(raw: &Raw, mac: [u8; 6], vid: u16, done: &AtomicBool) -> Far {
    let mut far = Far::default();
    while !done.load(Ordering::Acquire) {
        let Some(s) = raw.recv() else { continue };
        if s.frame.len() < 14 || s.frame[6..12] != mac {
            continue;
        }
        far.from_if += 1;
        if s.tag == Some((0x8100, vid)) {
            far.tagged_right += 1;
        } else if far.wrong.is_none() {
            far.wrong =
                Some(format!("tag {:x?} on {:02x?}", s.tag, &s.frame[..s.frame.len().min(42)]));
            continue;
        }
        far.longest = far.longest.max(s.frame.len());
        if let Some(r) = answer(&s.frame) {
            raw.send(&tagged(&r, vid));
            far.answered += 1;
        }
    }
    far
}

fn mac_of(v: &serde_json::Value) -> [u8; 6] {
    let s = v.as_str().unwrap();
    let b: Vec<u8> = s.split(':').map(|x| u8::from_str_radix(x, 16).unwrap()).collect();
    b.try_into().unwrap()
}

fn idrops(bus: &Bus, link: &str) -> u64 {
    let s = json(bus, &["show-link", "-s"]);
    rows(&s, "link", link)[0]["idrops"].as_u64().unwrap_or_else(|| panic!("{s}"))
}

#[test]
fn vid_tagged_vnics_send_and_receive_8021q_frames_on_a_real_wire_and_unknown_vids_are_dropped() {
    let Some(made) = namespaces(&["ping"], "vl", ["a", "b"]) else { return };
    let (a, b) = (made[0].name().to_owned(), made[1].name().to_owned());
    for i in 0..2 {
        veth((&a, &format!("va{i}")), (&b, &format!("vb{i}"))).unwrap();
    }
    let bus = Bus::start();
    // One port of each class, on afpacket wires to va0 and va1.
    let atl1c = fixtures::Port::atl1c("atl1c0").wire(fixtures::Wire::Afpacket("va1".into()));
    let hw = fixtures::afpacket(&["va0"]).port(atl1c);
    let state = bus.subdir("vlan").join("state");
    let daemon = Daemon::builder(&bus, &state).netns(&a).hardware(&hw).start();

    // VNICs with -v VID, one over each class of port.
    for (i, port, vid) in [(0, "i40e0", 100u16), (1, "atl1c0", 4094)] {
        let vnic = format!("vnic{i}");
        json(&bus, &["create-vnic", "-l", port, "-v", &vid.to_string(), &vnic]);
        let v = json(&bus, &["show-vnic"]);
        assert_eq!(rows(&v, "link", &vnic)[0]["vid"], vid, "{v}");
        crosses(&bus, (&a, &b), i, port, &vnic, vid, 2 + i as u8);
    }
    // A VLAN link (the port's MAC, its own VID) beside the VNIC on i40e0.
    json(&bus, &["create-vlan", "-l", "i40e0", "-v", "200", "vlan200"]);
    crosses(&bus, (&a, &b), 0, "i40e0", "vlan200", 200, 4);
    drop(daemon);
}

/// The kernel's MAC address for interface `dev` in namespace `ns`.
fn kernel_mac(ns: &str, dev: &str) -> [u8; 6] {
    let out =
        run(&["ip", "-n", ns, "-j", "link", "show", "dev", dev]).unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    mac_of(&v[0]["address"])
}

/// Gives `link` (on `port`, wired to veth `i`; VLAN `vid`) an IP interface
/// with 192.0.NET.1/24 and pings 192.0.NET.2 across the wire, small and at
/// the full MTU, the far side answering tagged; then checks that a frame
/// for a VID nobody has is dropped and counted on `port`.
fn crosses(bus: &Bus, (a, b): (&str, &str), i: usize, port: &str, link: &str, vid: u16, net: u8) {
    json(bus, &["create-if", link]);
    let net = format!("192.0.{net}.");
    json(bus, &["create-addr", "-T", "static", "-a", &format!("{net}1/24"), &format!("{link}/v4")]);
    let mac = kernel_mac(a, link);
    let raw = Raw::open(b, &format!("vb{i}"));

    // Ping the far side, once small and once at the full MTU (a 1,500-byte
    // IP packet: 1,518 bytes tagged on the wire), while it answers ARP and
    // echo with tagged frames.
    let done = AtomicBool::new(false);
    let (far, pings) = std::thread::scope(|s| {
        let far = s.spawn(|| far_side(&raw, mac, vid, &done));
        let pings: Vec<_> = [&["-s", "56"][..], &["-s", "1472", "-M", "do"]]
            .iter()
            .map(|size| {
                Command::new("ip")
                    .args(["netns", "exec", a, "ping", "-c", "1", "-W", "5", "-I", link])
                    .args(*size)
                    .arg(format!("{net}2"))
                    .output()
                    .unwrap()
            })
            .collect();
        done.store(true, Ordering::Release);
        (far.join().unwrap(), pings)
    });
    eprintln!("{link} over {port}, VID {vid}: {far:?}");
    for p in &pings {
        let out = String::from_utf8_lossy(&p.stdout);
        eprintln!("  {}", out.lines().find(|l| l.contains("time=")).unwrap_or("(no reply)"));
    }
    assert!(far.wrong.is_none(), "{link}: a frame left without its tag: {far:?}");
    for p in &pings {
        assert!(
            p.status.success(),
            "{link}: ping over VID {vid} failed ({far:?}):\n{}",
            String::from_utf8_lossy(&p.stdout)
        );
    }
    assert!(far.answered >= 3 && far.tagged_right == far.from_if, "{link}: {far:?}");
    assert_eq!(far.longest, 1514, "{link}: the full-MTU echo crossed tagged: {far:?}");
    // The kernel learnt the far side's MAC from a tagged ARP reply.
    let neigh =
        run(&["ip", "-n", a, "neigh", "show", "dev", link]).unwrap_or_else(|e| panic!("{e}"));
    assert!(neigh.contains("02:00:00:00:00:bb"), "{link}: {neigh}");

    // A tagged frame for a VID nobody here has is dropped and counted.
    let before = idrops(bus, port);
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&FAR_MAC);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&FAR_MAC);
    arp.extend_from_slice(&[192, 0, 2, 2, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1]);
    arp.resize(60, 0);
    raw.send(&tagged(&arp, 7));
    let deadline = Instant::now() + Duration::from_secs(10);
    while idrops(bus, port) <= before {
        assert!(Instant::now() < deadline, "{port}: a frame for VID 7 was not counted dropped");
        std::thread::yield_now();
    }
}

/// The VLAN verbs on a real bus: output forms, timings, the VLAN as a
/// link (class vlan, its link's MTU, IP interfaces), typed errors that
/// leave the running and the persistent configuration as they were, `-t`,
/// and persistence across a restart.
#[test]
fn vlan_verbs_show_refuse_bad_input_and_persist() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let d = Daemon::start(&bus, &state, &[]);

    let r = json(&bus, &["create-vlan", "-l", "i40e0", "-v", "5", "vlan5"]);
    assert_eq!(r["op"], "create-vlan", "{r}");
    eprintln!("create-vlan: {} us in the daemon", r["timing"]["total_us"]);
    assert!(r["timing"]["total_us"].is_u64(), "{r}");
    assert!(r["timing"]["phases"].as_array().unwrap().iter().any(|p| p["name"] == "validate"));
    json(&bus, &["create-vlan", "-l", "atl1c0", "-v", "5", "vlanb5"]);
    let v = json(&bus, &["show-vlan"]);
    let row = rows(&v, "link", "vlan5")[0];
    assert_eq!(
        (&row["vid"], &row["over"], &row["flags"]),
        (&5.into(), &"i40e0".into(), &"-----".into())
    );
    assert_eq!(
        text(&bus, &["show-vlan", "-p", "-o", "link,vid,over"]),
        "vlan5:5:i40e0\nvlanb5:5:atl1c0\n"
    );
    let table = text(&bus, &["show-vlan", "vlan5"]);
    let head: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(head, ["LINK", "VID", "OVER", "FLAGS"], "{table}");
    assert!(table.contains("vlan5") && !table.contains("vlanb5"), "{table}");
    assert!(rows(&json(&bus, &["show-vnic"]), "link", "vlan5").is_empty(), "not a VNIC");

    // A link whose MTU is its link's.
    let mtu = |l: &str| {
        let v = json(&bus, &["show-link"]);
        let r = rows(&v, "link", l)[0].clone();
        (r["class"].as_str().unwrap().to_owned(), r["mtu"].as_u64().unwrap())
    };
    assert_eq!(mtu("vlan5"), ("vlan".to_owned(), 1500));
    json(&bus, &["set-linkprop", "-p", "mtu=9000", "i40e0"]);
    assert_eq!(mtu("vlan5"), ("vlan".to_owned(), 9000));

    // Bad input: typed, and nothing changes, running or persistent.
    json(&bus, &["create-vnic", "-l", "i40e0", "vnic0"]);
    json(&bus, &["create-aggr", "-l", "i40e1", "aggr0"]);
    json(&bus, &["create-vlan", "-l", "aggr0", "-v", "7", "vlan7"]);
    json(&bus, &["create-if", "vlanb5"]);
    refused(
        &bus,
        || (json(&bus, &["show-link"]), std::fs::read(state.join("links.toml")).unwrap()),
        &[
            (&["create-vlan", "-l", "i40e0", "-v", "5", "dup0"], "Exists"),
            (&["create-vlan", "-l", "atl1c1", "-v", "9", "vlan5"], "Exists"),
            (&["create-vlan", "-l", "i40e0", "-v", "0", "v0"], "InvalidArgument"),
            (&["create-vlan", "-l", "i40e0", "-v", "4095", "v4095"], "InvalidArgument"),
            (&["create-vlan", "-l", "nosuch0", "-v", "9", "v9"], "NotFound"),
            (&["create-vlan", "-l", "vlan5", "-v", "9", "v9"], "InvalidArgument"),
            (&["create-vlan", "-l", "vnic0", "-v", "9", "v9"], "InvalidArgument"),
            (&["create-vlan", "-l", "i40e1", "-v", "9", "v9"], "Busy"),
            (&["create-vlan", "-l", "i40e0", "-v", "9", "bad name"], "InvalidName"),
            (&["create-vnic", "-l", "vlan5", "v9"], "InvalidArgument"),
            (&["delete-vnic", "vlan5"], "InvalidArgument"),
            (&["delete-vlan", "vnic0"], "InvalidArgument"),
            (&["delete-vlan", "i40e0"], "InvalidArgument"),
            (&["delete-vlan", "nosuch0"], "NotFound"),
            (&["delete-vlan", "vlanb5"], "Busy"),
            (&["delete-aggr", "aggr0"], "Busy"),
        ],
    );
    let (_, msg) = json_err(&bus, &["delete-aggr", "aggr0"]);
    assert!(msg.contains("VLANs over it: vlan7"), "{msg}");

    // -t: running only; a restart brings back what persists.
    json(&bus, &["create-vlan", "-t", "-l", "i40e0", "-v", "6", "vlan6"]);
    json(&bus, &["delete-vlan", "vlan7"]);
    assert_eq!(text(&bus, &["show-vlan", "-p", "-o", "link"]), "vlan5\nvlan6\nvlanb5\n");
    d.stop();
    let _d = Daemon::start(&bus, &state, &[]);
    assert_eq!(
        text(&bus, &["show-vlan", "-p", "-o", "link,vid,over"]),
        "vlan5:5:i40e0\nvlanb5:5:atl1c0\n"
    );
    assert_eq!(mtu("vlan5"), ("vlan".to_owned(), 9000));
}

//! `dlstat` (netadm's verb, and `dlstat` under illumos's name) over
//! emulated links, end to end: netadmd on an i40e-class port wired
//! (AF_PACKET) to a veth in a namespace this test makes, a VNIC with an IP
//! interface pinging the far side through netadm's datapath.
//!
//! - A VNIC's counters are its TAP's, as the kernel counts them (read
//!   with `ip -s` before and after: dlstat's lie between), and they grew
//!   by the pings.
//! - The port's counters (`dlstat show-phys`) saw the answers come in,
//!   never more frames than the far end sent.
//! - `-r`/`-t` columns, `-p -o`, `--json`; `-i 1 -c 2` prints two tables,
//!   the second what that second counted, while a ping runs.
//! - `dlstat show-vnic nosuch0` is NotFound, an unknown subcommand
//!   InvalidArgument.
//!
//! - Over kernel ports: a VNIC moved into a zone is counted by its
//!   macvlan there, and the port by its NIC (a veth in netadmd's
//!   namespace), each read around dlstat's read.
//!
//! Prerequisites (root, ip, ping) missing: "skipped", except under
//! `CI=true`, where the test fails naming them.

use serde_json::Value;

use netadm_testkit::*;

/// dlstat's counters of one link, in the same order.
fn dlstat_counts(row: &Value) -> [u64; 4] {
    ["ipkts", "rbytes", "opkts", "obytes"]
        .map(|k| row[k].as_u64().unwrap_or_else(|| panic!("{row}")))
}

/// A VNIC made with `create-vnic ARGS` (its name last), its IP interface
/// and 192.0.2.1/24, on the far side's network.
fn vnic_with_addr(bus: &Bus, args: &[&str]) {
    let name = args[args.len() - 1];
    json(bus, &[&["create-vnic"][..], args].concat());
    json(bus, &["create-if", name]);
    json(bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", &format!("{name}/v4")]);
}

/// `count` pings from `ns` to the far side (192.0.2.2), `interval` s
/// apart, every one answered.
fn ping(ns: &str, count: u32, interval: &str) {
    let count = count.to_string();
    let args = ["ip", "netns", "exec", ns, "ping", "-n", "-c", &count, "-i", interval];
    run(&[&args[..], &["-W", "5", "192.0.2.2"]].concat()).unwrap_or_else(|e| panic!("{e}"));
}

fn between(lo: [u64; 4], x: [u64; 4], hi: [u64; 4]) -> bool {
    (0..4).all(|i| lo[i] <= x[i] && x[i] <= hi[i])
}

/// netadmd in namespace `a` on hardware whose ports face namespace `b`
/// (as `far_side` wires them), on a bus of its own. Dropped in field
/// order: netadmd, the bus, then the namespaces.
struct World {
    _daemon: Daemon,
    bus: Bus,
    a: Netns,
    b: Netns,
}

impl World {
    /// `None` (skipped) without root or ping, unless under CI.
    fn new(tag: &str, far_side: fn(&str, &str) -> Result<(), Error>, hw: Hardware) -> Option<Self> {
        let [a, b] = namespaces(&["ping"], tag, ["a", "b"])?;
        far_side(a.name(), b.name()).unwrap();
        let bus = Bus::start();
        let state = bus.subdir("state");
        let _daemon = Daemon::builder(&bus, &state).netns(a.name()).hardware(&hw).start();
        Some(World { _daemon, bus, a, b })
    }
}

#[test]
fn dlstat_counts_what_a_vnic_and_its_port_carried() {
    let Some(w) = World::new("dls", netadm_far_side, fixtures::afpacket(&["va0"])) else {
        return;
    };
    let (a, b, bus) = (&w.a, &w.b, &w.bus);
    vnic_with_addr(bus, &["-l", "i40e0", "v0"]);
    // A VNIC with no IP interface has no device: zero, and listed.
    json(bus, &["create-vnic", "-l", "i40e0", "v1"]);

    let pings = 10;
    ping(a.name(), 10, "0.05");

    // The VNIC: what its TAP counted, read around dlstat's read.
    let k0 = link_counts(a.name(), "v0");
    let v = json(bus, &["dlstat", "show-vnic"]);
    let k1 = link_counts(a.name(), "v0");
    let row = rows(&v, "link", "v0")[0].clone();
    assert!(between(k0, dlstat_counts(&row), k1), "v0: dlstat {row}, kernel {k0:?}..{k1:?}");
    assert!(row["opkts"].as_u64().unwrap() >= pings, "v0 sent fewer than the pings: {row}");
    assert!(row["ipkts"].as_u64().unwrap() >= pings, "v0 received fewer than the answers: {row}");
    assert_eq!(dlstat_counts(rows(&v, "link", "v1")[0]), [0; 4], "{v}");
    assert_eq!(v.as_array().unwrap().len(), 2, "show-vnic lists the VNICs only: {v}");

    // The port: it received the answers, no more than the far end sent.
    let far = link_counts(b.name(), "vb0");
    let p = json(bus, &["dlstat", "show-phys", "i40e0"]);
    assert_eq!(p.as_array().unwrap().len(), 1, "{p}");
    let port = dlstat_counts(&p[0]);
    assert!(port[0] >= pings && port[0] <= far[2], "i40e0 received {port:?}, vb0 sent {far:?}");
    assert!(port[2] >= pings, "i40e0 sent {port:?}");
    // dlstat alone: every link, the port and the VNICs among them.
    let all = json(bus, &["dlstat"]);
    for l in ["i40e0", "v0", "v1"] {
        assert_eq!(rows(&all, "link", l).len(), 1, "{l} in {all}");
    }

    // -r and -t: each side with its drops; -p -o.
    let rx = json(bus, &["dlstat", "-r", "v0"]);
    let keys: Vec<&str> = rx[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["idrops", "ipkts", "link", "rbytes"], "{rx}");
    let tx = text(bus, &["dlstat", "show-vnic", "-t", "-p", "-o", "link,opkts", "v0"]);
    let (l, n) = tx.trim_end().split_once(':').unwrap();
    assert_eq!(l, "v0");
    assert!(n.parse::<u64>().unwrap() >= pings, "{tx}");
    let table = text(bus, &["dlstat", "show-vnic", "v0"]);
    assert!(table.starts_with("LINK"), "{table}");
    assert!(table.contains("IPKTS") && table.contains("OBYTES"), "{table}");

    // -i 1 -c 2 under a ping: the first table everything so far, the
    // second what its second counted; together, what the TAP counted.
    let k0 = link_counts(a.name(), "v0");
    let out = std::thread::scope(|s| {
        let pinger = s.spawn(|| ping(a.name(), 30, "0.1"));
        let out =
            netadm(bus, &["dlstat", "show-vnic", "-i", "1", "-c", "2", "-p", "-o", "opkts", "v0"]);
        pinger.join().unwrap();
        out
    });
    let k1 = link_counts(a.name(), "v0");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<u64> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0] >= k0[2] && lines[0] + lines[1] <= k1[2],
        "{lines:?}, TAP sent {k0:?}..{k1:?}"
    );
    assert!(lines[1] >= 1, "the second table counted none of the pings: {lines:?}");
    // With --json, each interval's table is a JSON array on a line of its own.
    let out = netadm(bus, &["--json", "dlstat", "show-vnic", "-i", "1", "-c", "2", "v0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let tables: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(tables.len(), 2, "{text}");
    assert!(tables.iter().all(|t| t[0]["link"] == "v0"), "{text}");

    // Under illumos's name.
    let dir = illumos_links(&bus.subdir("bin"));
    let out = std::process::Command::new(dir.join("dlstat"))
        .args(["--bus", bus.address(), "show-vnic", "-p", "-o", "link"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "v0\nv1\n");

    // Bad input: typed.
    let (k, m) = json_err(bus, &["dlstat", "show-vnic", "nosuch0"]);
    assert_eq!(k, "NotFound", "{m}");
    assert!(m.contains("nosuch0"), "{m}");
    let (k, m) = json_err(bus, &["dlstat", "show-flow", "f0"]);
    assert_eq!(k, "InvalidArgument", "{m}");
    assert!(m.contains("show-flow"), "{m}");
}

#[test]
fn dlstat_counts_a_kernel_vnic_in_its_zone_and_a_kernel_port_by_its_nic() {
    let Some(w) = World::new("dlk", kernel_far_side, fixtures::kernel(&["nic0", "nic1"])) else {
        return;
    };
    let (a, bus) = (&w.a, &w.bus);
    let z = Netns::unique("dlk", "z").unwrap();
    vnic_with_addr(bus, &["-l", "net0", "-p", &format!("zone={}", z.name()), "zv0"]);
    ping(z.name(), 10, "0.05");

    let k0 = link_counts(z.name(), "zv0");
    let v = json(bus, &["dlstat", "show-vnic", "zv0"]);
    let k1 = link_counts(z.name(), "zv0");
    let vnic = dlstat_counts(&v[0]);
    assert!(between(k0, vnic, k1), "zv0: dlstat {vnic:?}, its macvlan {k0:?}..{k1:?}");
    assert!(vnic[2] >= 10 && vnic[0] >= 10, "zv0 did not count the pings: {vnic:?}");

    let n0 = link_counts(a.name(), "nic0");
    let p = json(bus, &["dlstat", "show-phys", "net0"]);
    let n1 = link_counts(a.name(), "nic0");
    let port = dlstat_counts(&p[0]);
    assert!(between(n0, port, n1), "net0: dlstat {port:?}, nic0 {n0:?}..{n1:?}");
    assert!(port[2] >= vnic[2], "net0 sent less than zv0 over it: {port:?} {vnic:?}");

    // A flow on a kernel VNIC counts what its class sent: the pings, ICMP.
    json(bus, &["add-flow", "-l", "zv0", "-a", "transport=icmp", "f0"]);
    ping(z.name(), 3, "0.05");
    let f = json(bus, &["flowstat", "f0"]);
    assert!(f[0]["opkts"].as_u64().unwrap() >= 3, "{f}");
    json(bus, &["remove-flow", "f0"]);
}

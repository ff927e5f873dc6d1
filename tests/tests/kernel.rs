//! The kernel mirror end to end, in network namespaces this test makes:
//! netadmd runs in one, its two i40e-class ports wired by afpacket to veth
//! pairs whose far ends sit, bridged and addressed, in the other. An
//! aggregation with an IP interface and address then carries real kernel
//! traffic (ping, iperf3) both ways through netadm's rings. A test whose
//! prerequisites (root, iproute2, ping, iperf3, ethtool, setpriv) are missing says
//! "skipped" and passes, except under `CI=true`, where it fails naming them.

use std::process::Command;

use netadm_testkit::*;

/// The tests here measure real traffic (and the MTU test, stalls of
/// 100 ms) on a machine that may have two cores: they run one at a time,
/// not beside each other's netadmd and iperf3.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Namespace a (netadmd, its ports wired to va0/va1) and b (vb0/vb1
/// bridged as br0, 192.0.2.2/24); removed on drop.
struct Netns {
    a: String,
    b: String,
    _made: [netadm_testkit::Netns; 2],
}

impl Netns {
    fn new() -> Self {
        // Unique per test: tests in this file run in parallel threads.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let made =
            ["na", "nb"].map(|tag| netadm_testkit::Netns::unique(tag, &format!("x{n}")).unwrap());
        let [a, b] = made.each_ref().map(|n| n.name().to_owned());
        netadm_far_side(&a, &b).unwrap();
        Self { a, b, _made: made }
    }
}

/// netadmd in namespace `a`, its ports wired to va0/va1.
fn daemon_in(ns: &Netns, bus: &Bus) -> Daemon {
    let state = bus.subdir("kernel").join("state");
    Daemon::builder(bus, state).netns(&ns.a).hardware(&fixtures::afpacket(&["va0", "va1"])).start()
}

#[test]
fn ping_crosses_an_aggregation_through_netadms_rings_and_nothing_is_left_behind() {
    let _serial = serial();
    if !netns_prerequisites(&["ping", "ethtool"]) {
        return;
    }
    let ns = Netns::new();
    let bus = Bus::start();
    let daemon = daemon_in(&ns, &bus);

    json(&bus, &["create-aggr", "-P", "L3,L4", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    let r = json(&bus, &["create-if", "aggr0"]);
    assert!(r["timing"]["phases"].as_array().unwrap().iter().any(|p| p["name"] == "kernel"), "{r}");
    json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"]);
    let ifs = json(&bus, &["show-if"]);
    assert_eq!(rows(&ifs, "ifname", "aggr0")[0]["kernel_device"], "aggr0");
    // The kernel has it, as configured.
    let out = Command::new("ip")
        .args(["-n", &ns.a, "-j", "addr", "show", "dev", "aggr0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("192.0.2.1") && text.contains("\"mtu\":1500"), "{text}");

    let ping = Command::new("ip")
        .args(["netns", "exec", &ns.a, "ping", "-c", "3", "-i", "0.2", "-W", "2", "192.0.2.2"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&ping.stdout);
    eprintln!("{out}");
    assert!(ping.status.success(), "ping through netadm failed:\n{out}");

    // An MTU change follows to the kernel device.
    json(&bus, &["set-linkprop", "-p", "mtu=9000", "aggr0"]);
    let out = Command::new("ip")
        .args(["-n", &ns.a, "-j", "link", "show", "dev", "aggr0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"mtu\":9000"));

    // The TAP offers the kernel the offloads the link's properties allow:
    // TSO by default, none of it once tso is off (and back).
    let tso = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.a, "ethtool", "-k", "aggr0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let on = text
            .lines()
            .find(|l| l.starts_with("tcp-segmentation-offload:"))
            .unwrap_or_else(|| panic!("ethtool -k aggr0:\n{text}"))
            .contains(": on");
        (on, text)
    };
    let (on, text) = tso();
    assert!(on, "TSO on by default:\n{text}");
    json(&bus, &["set-linkprop", "-p", "tso=off", "aggr0"]);
    let (on, text) = tso();
    assert!(!on, "tso=off reaches the TAP:\n{text}");
    let ping1 = Command::new("ip")
        .args(["netns", "exec", &ns.a, "ping", "-c", "1", "-W", "2", "192.0.2.2"])
        .output()
        .unwrap();
    assert!(ping1.status.success(), "traffic flows with tso off");
    json(&bus, &["set-linkprop", "-p", "tso=on", "aggr0"]);
    assert!(tso().0, "and back on");

    // Bad input: an address already present is a typed error.
    let (kind, _) =
        json_err(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4b"]);
    assert_eq!(kind, "Exists");

    // A name the kernel rejects (dladm allows 31 bytes, Linux 15): typed,
    // and nothing is left half-made.
    json(&bus, &["create-vnic", "-l", "aggr0", "averyverylongvnic0"]);
    let (kind, msg) = json_err(&bus, &["create-if", "averyverylongvnic0"]);
    assert_eq!(kind, "InvalidName", "{msg}");
    assert!(rows(&json(&bus, &["show-if"]), "ifname", "averyverylongvnic0").is_empty());
    // And a device it did not make is never touched: an interface that
    // already exists under the name is refused.
    json(&bus, &["create-vnic", "-l", "aggr0", "lo0"]);
    sh(&["ip", "-n", &ns.a, "link", "add", "lo0", "type", "bridge"]);
    let (kind, _) = json_err(&bus, &["create-if", "lo0"]);
    assert_eq!(kind, "Exists");
    let out = Command::new("ip").args(["-n", &ns.a, "-d", "link", "show", "lo0"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("bridge"), "left as it was");

    json(&bus, &["delete-if", "aggr0"]);
    let gone = Command::new("ip").args(["-n", &ns.a, "link", "show", "aggr0"]).output().unwrap();
    assert!(!gone.status.success(), "delete-if removes the TAP");
    drop(daemon);
}

/// How long each iperf3 run lasts, seconds; the MTU changes every second.
const TOGGLE_SECONDS: u32 = 10;

/// The bound the issue asks for: no run of 100 ms intervals below 10 % of
/// the run's median longer than one interval.
const STALL_BOUND_MS: f64 = 100.0;

/// iperf3 read in 100 ms intervals (by the receiver) while the
/// aggregation's MTU toggles 1500<->9000 every second, netadm sending and
/// then receiving (`-R`): no reset, and no stall (a run of intervals below
/// 10 % of the run's median) longer than 100 ms either way.
#[test]
fn iperf3_runs_through_mtu_changes_every_second_without_a_reset() {
    let _serial = serial();
    if !netns_prerequisites(&["iperf3", "ethtool", "setpriv"]) {
        return;
    }
    let ns = Netns::new();
    let bus = Bus::start();
    let daemon = daemon_in(&ns, &bus);
    json(&bus, &["create-aggr", "-P", "L3,L4", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    json(&bus, &["create-if", "aggr0"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"]);
    let set_mtu = |m: u32| json(&bus, &["set-linkprop", "-p", &format!("mtu={m}"), "aggr0"]);

    let mut runs = vec![];
    for (dir, extra) in [("netadm sending", &[][..]), ("netadm receiving (-R)", &["-R"][..])] {
        // Each connection opens at 1500, so both ends advertise MSS 1460
        // and the far side (at 9000) never sends more than 1500 bytes.
        set_mtu(1500);
        let server = iperf3::server(&ns.b).unwrap_or_else(|e| panic!("{e}"));
        let mut changes = 0;
        let text = iperf3::client(&ns.a, "192.0.2.2", TOGGLE_SECONDS, extra, &mut |k| {
            set_mtu(if k % 2 == 1 { 9000 } else { 1500 });
            changes += 1;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{dir}: {e}"));
        iperf3::reap_server(server);
        let r = iperf3::parse(&text).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let t = iperf3::toggled(&r, changes, iperf3::FIRST_CHANGE_SECS);
        let rates: Vec<String> =
            iperf3::whole(&r.intervals).iter().map(|i| format!("{:.2}", i.gbps)).collect();
        let summary = format!(
            "{dir}: {} MTU changes, {} intervals, median {:.2} Gbit/s, longest stall {:.0} ms, \
             slowest {:.3} Gbit/s, {} retransmits, receiver waited {:.0} ms past the end\n  \
             Gbit/s per 100 ms: {}",
            t.mtu_changes,
            t.intervals,
            t.median_gbps,
            t.longest_stall_ms,
            t.slowest_gbps,
            t.retransmits,
            t.overrun_ms,
            rates.join(" ")
        );
        eprintln!("{summary}");
        // The measure means something: the run lasted, the MTU changed.
        assert!(t.intervals as u32 >= (TOGGLE_SECONDS - 1) * 10 * 9 / 10, "{summary}");
        assert!(t.mtu_changes >= TOGGLE_SECONDS - 2, "{summary}");
        assert!(t.median_gbps > 0.0, "{summary}");
        runs.push((t.longest_stall_ms, summary));
    }
    let stalled: Vec<&str> =
        runs.iter().filter(|(ms, _)| *ms > STALL_BOUND_MS).map(|(_, s)| s.as_str()).collect();
    assert!(
        stalled.is_empty(),
        "a stall longer than {STALL_BOUND_MS} ms under MTU changes:\n{}",
        stalled.join("\n")
    );

    json(&bus, &["delete-if", "aggr0"]);
    drop(daemon);
    let left = Command::new("ip").args(["-n", &ns.a, "-o", "link"]).output().unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains("aggr0"), "no interface left behind: {left}");
}

//! The kernel mirror end to end, in network namespaces this test makes:
//! netadmd runs in one, its two i40e-class ports wired by afpacket to veth
//! pairs whose far ends sit, bridged and addressed, in the other. An
//! aggregation with an IP interface and address then carries real kernel
//! traffic (ping) both ways through netadm's rings. Skips when not root or
//! when iproute2/ping are missing.

use std::process::Command;
use std::time::{Duration, Instant};

use netadm_e2e::*;

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Two namespaces and their veth pairs; removed on drop.
struct Netns {
    a: String,
    b: String,
}

impl Netns {
    fn new() -> Self {
        // Unique per test: tests in this file run in parallel threads.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let id = format!(
            "{}x{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (a, b) = (format!("na{id}"), format!("nb{id}"));
        sh(&["ip", "netns", "add", &a]);
        sh(&["ip", "netns", "add", &b]);
        let n = Self { a, b };
        for i in 0..2 {
            let (va, vb) = (format!("va{i}"), format!("vb{i}"));
            sh(&[
                "ip", "link", "add", &va, "netns", &n.a, "type", "veth", "peer", "name", &vb,
                "netns", &n.b,
            ]);
            sh(&["ip", "-n", &n.a, "link", "set", &va, "mtu", "9000", "up"]);
            sh(&["ip", "-n", &n.b, "link", "set", &vb, "mtu", "9000", "up"]);
        }
        sh(&["ip", "-n", &n.a, "link", "set", "lo", "up"]);
        sh(&["ip", "-n", &n.b, "link", "add", "br0", "type", "bridge"]);
        for i in 0..2 {
            sh(&["ip", "-n", &n.b, "link", "set", &format!("vb{i}"), "master", "br0"]);
        }
        sh(&["ip", "-n", &n.b, "link", "set", "br0", "mtu", "9000", "up"]);
        // veth hands frames to its peer with the TCP/UDP checksum still to
        // be filled in (offload); netadm's afpacket wire passes frames on
        // as they are, so the peer computes its checksums itself.
        if have("ethtool") {
            for dev in ["vb0", "vb1", "br0"] {
                sh(&["ip", "netns", "exec", &n.b, "ethtool", "-K", dev, "tx", "off"]);
            }
        }
        sh(&["ip", "-n", &n.b, "addr", "add", "192.0.2.2/24", "dev", "br0"]);
        n
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// A child process killed when dropped, so a failing test leaves no
/// daemon behind.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// netadmd in namespace `a`, its ports wired to va0/va1.
fn daemon_in(ns: &Netns, bus: &Bus) -> Reaped {
    let dir = bus.subdir("kernel");
    let hw = dir.join("hw.toml");
    let port = |i: u8| {
        format!(
            "[[port]]\nname = \"i40e{i}\"\nclass = \"i40e\"\nqueue_pairs = 4\nwire = {{ kind = \"afpacket\", interface = \"va{i}\" }}\n"
        )
    };
    std::fs::write(&hw, format!("{}\n{}", port(0), port(1))).unwrap();
    let daemon = Command::new("ip")
        .args(["netns", "exec", &ns.a])
        .arg(bin("netadmd"))
        .args(["--bus", bus.address(), "--kernel-mirror", "on", "--config"])
        .arg(&hw)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !netadm(bus, &["show-link"]).status.success() {
        assert!(Instant::now() < deadline, "netadmd did not come up");
        std::thread::yield_now();
    }
    Reaped(daemon)
}

#[test]
fn ping_crosses_an_aggregation_through_netadms_rings_and_nothing_is_left_behind() {
    if !is_root() || !have("ip") || !have("ping") {
        eprintln!("skipped: needs root, iproute2 and ping (apt-get install iproute2 iputils-ping)");
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

#[test]
fn iperf3_runs_through_mtu_changes_every_second_without_a_reset() {
    if !is_root() || !have("ip") || !have("iperf3") || !have("ethtool") {
        eprintln!(
            "skipped: needs root, iproute2, iperf3 and ethtool (apt-get install iproute2 iperf3 ethtool)"
        );
        return;
    }
    use std::io::{BufRead, BufReader};
    let ns = Netns::new();
    let bus = Bus::start();
    let daemon = daemon_in(&ns, &bus);
    json(&bus, &["create-aggr", "-P", "L3,L4", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    json(&bus, &["create-if", "aggr0"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"]);

    // The server, one test and out; ready once it says it listens.
    let mut server = Command::new("ip")
        .args(["netns", "exec", &ns.b, "iperf3", "-s", "-1", "--forceflush"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut server = Reaped(server);
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.contains("Server listening"))),
        "iperf3 server did not start"
    );
    std::thread::spawn(move || lines.for_each(drop));

    // The client reports every second; each report toggles the MTU.
    let mut client = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.a,
            "iperf3",
            "-c",
            "192.0.2.2",
            "-t",
            "12",
            "-i",
            "1",
            "--forceflush",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(client.stdout.take().unwrap());
    let (mut intervals, mut toggles, mut all) = (Vec::new(), 0, String::new());
    for line in out.lines().map_while(Result::ok) {
        all.push_str(&line);
        all.push('\n');
        // "[  5]   3.00-4.00   sec  52.5 MBytes   440 Mbits/sec    0    ..."
        if line.starts_with("[  5]")
            && line.contains("bits/sec")
            && !line.contains("sender")
            && !line.contains("receiver")
        {
            let rate = line.split_whitespace().collect::<Vec<_>>();
            if let Some(i) = rate.iter().position(|w| w.ends_with("bits/sec")) {
                let v: f64 = rate[i - 1].parse().unwrap_or(0.0);
                let scale = match rate[i] {
                    "Gbits/sec" => 1e3,
                    "Mbits/sec" => 1.0,
                    "Kbits/sec" => 1e-3,
                    _ => 1e-6,
                };
                intervals.push(v * scale);
            }
            let mtu = if toggles % 2 == 0 { "mtu=9000" } else { "mtu=1500" };
            json(&bus, &["set-linkprop", "-p", mtu, "aggr0"]);
            toggles += 1;
        }
    }
    let status = client.wait().unwrap();
    if !status.success() {
        let _ = server.0.kill();
    }
    let _ = server.0.wait();
    eprintln!("{all}");
    assert!(status.success(), "iperf3 failed:\n{all}");
    assert!(!all.to_lowercase().contains("reset"), "{all}");
    assert!(intervals.len() >= 10, "{} intervals:\n{all}", intervals.len());
    let slowest = intervals.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(slowest > 0.0, "an interval without throughput:\n{all}");
    eprintln!("{toggles} MTU changes; slowest 1 s interval {slowest:.1} Mbit/s");

    json(&bus, &["delete-if", "aggr0"]);
    drop(daemon);
    let left = Command::new("ip").args(["-n", &ns.a, "-o", "link"]).output().unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains("aggr0"), "no interface left behind: {left}");
}

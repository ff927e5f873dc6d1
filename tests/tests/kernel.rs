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
        let id = std::process::id();
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

#[test]
fn ping_crosses_an_aggregation_through_netadms_rings_and_nothing_is_left_behind() {
    if !is_root() || !have("ip") || !have("ping") {
        eprintln!("skipped: needs root, iproute2 and ping (apt-get install iproute2 iputils-ping)");
        return;
    }
    let ns = Netns::new();
    let bus = Bus::start();
    let dir = bus.subdir("kernel");
    let hw = dir.join("hw.toml");
    let port = |i: u8| {
        format!(
            "[[port]]\nname = \"i40e{i}\"\nclass = \"i40e\"\nqueue_pairs = 4\nwire = {{ kind = \"afpacket\", interface = \"va{i}\" }}\n"
        )
    };
    std::fs::write(&hw, format!("{}\n{}", port(0), port(1))).unwrap();
    let mut daemon = Command::new("ip")
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
    while !netadm(&bus, &["show-link"]).status.success() {
        assert!(Instant::now() < deadline, "netadmd did not come up");
        std::thread::yield_now();
    }

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

    json(&bus, &["delete-if", "aggr0"]);
    let gone = Command::new("ip").args(["-n", &ns.a, "link", "show", "aggr0"]).output().unwrap();
    assert!(!gone.status.success(), "delete-if removes the TAP");
    let _ = Command::new("kill").arg(daemon.id().to_string()).status();
    let _ = daemon.wait();
}

//! Smoke tests of the guest harness, in a Debian guest under QEMU (root):
//! what this host's kernel cannot do (bonding, 802.1Q, e1000e) done in the
//! guest and checked from its console. Each test makes its own network
//! namespace for the taps and removes it, also on panic. A missing
//! prerequisite says "skipped" and passes, except under `CI=true`, where
//! it fails naming what is missing.

use std::process::Command;
use std::time::Duration;

use netadm_guest::{GuestConfig, Nic, Outcome, Timings};

/// Boot plus script, generous for a loaded two-core CI machine under TCG.
const DEADLINE: Duration = Duration::from_secs(120);

/// The serial guard, or None (the test skips) when the guest cannot run
/// here with the host tools these tests carry into it. Under CI a missing
/// one fails the test. Guests share two cores: one at a time.
fn serial_if_runnable() -> Option<std::sync::MutexGuard<'static, ()>> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let missing =
        netadm_guest::missing_prerequisites(&[("ethtool", "ethtool"), ("ping", "iputils-ping")]);
    if missing.is_empty() {
        return Some(guard);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and missing: {missing:?}");
    eprintln!("skipped: needs {}", missing.join(", "));
    None
}

/// A guest running `script` with iproute2's ip, ethtool and ping, its taps
/// in `ns`.
fn with_tools(script: &str, ns: &Netns) -> GuestConfig {
    GuestConfig::new(script).netns(&ns.0).binary("ip").binary("ethtool").binary("ping")
}

/// A network namespace named after the test and this process, deleted on
/// drop (the taps and bridge in it go with it).
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!("ngst-{tag}-{}", std::process::id());
        sh(&["ip", "netns", "add", &name]);
        let ns = Netns(name);
        sh(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS ARGS...`, which must succeed.
    fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", &self.0];
        v.extend_from_slice(args);
        sh(&v);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn report(what: &str, t: &Timings) {
    let ms = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{} ms", d.as_millis()));
    eprintln!(
        "{what}: cache {} ms, initramfs {} ms ({} KiB); spawn to /init {} (guest uptime {:?} s), \
         to script {}, to exit {}",
        t.cache_ready.as_millis(),
        t.initramfs_built.as_millis(),
        t.initramfs_bytes / 1024,
        ms(t.to_init),
        t.guest_uptime_at_init,
        ms(t.to_ready),
        ms(t.to_exit)
    );
}

/// Boots `prepared`, waits for its script, prints the timings as `what`,
/// and asserts the script succeeded.
fn boot_and_succeed(prepared: netadm_guest::Prepared, what: &str) -> Outcome {
    let out = prepared.boot().unwrap().wait(DEADLINE).unwrap();
    report(what, &out.timings);
    assert_eq!(out.code, 0, "{}", out.transcript());
    out
}

/// The script's lines that start with `prefix`.
fn lines<'a>(out: &'a Outcome, prefix: &str) -> Vec<&'a str> {
    out.script_output().into_iter().filter(|l| l.starts_with(prefix)).collect()
}

/// The line of `out` that starts with `prefix`, or a panic with the
/// transcript.
fn line<'a>(out: &'a Outcome, prefix: &str) -> &'a str {
    out.script_output()
        .into_iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?}\n{}", out.transcript()))
}

#[test]
fn a_scripts_output_and_exit_status_come_back_from_the_guest() {
    let Some(_serial) = serial_if_runnable() else { return };
    let out = GuestConfig::new("echo one; uname -r; echo two >&2; exit 3").run(DEADLINE).unwrap();
    report("bare guest", &out.timings);
    assert_eq!(out.code, 3, "{}", out.transcript());
    let lines = out.script_output();
    assert_eq!(lines.len(), 3, "{}", out.transcript());
    assert_eq!((lines[0], lines[2]), ("one", "two"));
    assert!(lines[1].ends_with("-amd64"), "{}", lines[1]);
    let t = &out.timings;
    assert!(t.to_init.unwrap() <= t.to_ready.unwrap() && t.to_ready <= t.to_exit);
}

#[test]
fn a_guest_that_outlives_its_deadline_is_killed_and_its_output_kept() {
    let Some(_serial) = serial_if_runnable() else { return };
    let mut g = GuestConfig::new("echo before; exec sleep 600").launch().unwrap();
    let l = g.await_line("the script's first line", |l| l == "before", DEADLINE).unwrap();
    assert_eq!(l, "before");
    let started = std::time::Instant::now();
    let e = g.wait(Duration::from_millis(300)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "killed late: {:?}", started.elapsed());
    let text = e.to_string();
    assert!(text.contains("no exit status from the script within 300ms"), "{text}");
    assert!(e.transcript().unwrap().lines.iter().any(|(_, l)| l == "before"), "{text}");
}

#[test]
fn a_module_that_does_not_exist_is_named() {
    let Some(_serial) = serial_if_runnable() else { return };
    let e = GuestConfig::new("true").module("no_such_module").prepare().err().unwrap();
    assert!(e.to_string().contains("module no_such_module is neither"), "{e}");
}

/// The guest's side of the bond test: a bond in 802.3ad mode over eth0
/// and eth1 (iproute2's `ip`), a VLAN over it; untagged pings to the
/// host's bridge, and pings over VLAN 100 to a VLAN device over eth2 in a
/// namespace of the guest's own: they cross the host's bridge (which knows
/// no VLANs: this host has no 8021q) tagged. Four channels on eth1.
const BOND_SCRIPT: &str = r#"
. /netadm-guest/lib.sh
set -e
trap 'rc=$?; [ $rc = 0 ] || { ip -s link; cat /proc/net/bonding/bond0; dmesg | tail -30; }' EXIT
echo "IP $(ip -V)"
ethtool -L eth1 combined 4
echo "CHANNELS $(ethtool -l eth1 | tr -s '\t\n' '  ')"
ip link add bond0 type bond mode 802.3ad miimon 100 lacp_rate fast
ip link set eth0 master bond0
ip link set eth1 master bond0
ip link set bond0 up
ip addr add 192.0.2.2/24 dev bond0
ip link add link bond0 name bond0.100 type vlan id 100
ip link set bond0.100 up
ip addr add 198.51.100.2/24 dev bond0.100
ip netns add far
ip link set eth2 netns far
ip -n far link set eth2 up
ip -n far link add link eth2 name eth2.100 type vlan id 100
ip -n far addr add 198.51.100.1/24 dev eth2.100
ip -n far link set eth2.100 up
grep -E '^(Bonding Mode|Slave Interface)' /proc/net/bonding/bond0
echo "VLAN $(ip -d -o link show bond0.100 | grep -o 'vlan protocol [^ ]* id [0-9]*')"
wait_for 30 ping -c 1 -W 1 192.0.2.1
echo "PING untagged $(ping -c 3 -i 0.2 -W 2 192.0.2.1 | grep -o '[0-9]* received')"
wait_for 30 ping -c 1 -W 1 198.51.100.1
echo "PING vlan100 $(ping -c 3 -i 0.2 -W 2 198.51.100.1 | grep -o '[0-9]* received')"
"#;

#[test]
fn an_8023ad_bond_and_a_vlan_over_it_carry_pings_through_the_host_and_virtio_has_four_channels() {
    let Some(_serial) = serial_if_runnable() else { return };
    let ns = Netns::new("bond");
    let prepared = with_tools(BOND_SCRIPT, &ns)
        .nic(Nic::virtio("gt0"))
        .nic(Nic::virtio("gt1").queues(4))
        .nic(Nic::virtio("gt2"))
        // No bond0 made at load: the script makes its own.
        .module_params("bonding", "max_bonds=0")
        .module("8021q")
        .prepare()
        .unwrap();
    assert_eq!(prepared.taps(), ["gt0", "gt1", "gt2"]);
    let loaded = prepared.modules();
    for m in ["virtio_net", "bonding", "8021q", "garp", "mrp"] {
        assert!(loaded.iter().any(|l| l == m), "{m} not in {loaded:?}");
    }
    // The host side: the three taps in one bridge with an address.
    ns.ip(&["link", "add", "br0", "type", "bridge"]);
    for tap in prepared.taps() {
        ns.ip(&["link", "set", tap, "master", "br0"]);
    }
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "br0"]);
    ns.ip(&["link", "set", "br0", "up"]);
    let out = boot_and_succeed(prepared, "bond guest");
    // The real iproute2, not busybox's applet (which makes balance-rr).
    assert!(line(&out, "IP ").starts_with("IP ip utility, iproute2-"), "{}", out.transcript());
    assert_eq!(line(&out, "Bonding Mode:"), "Bonding Mode: IEEE 802.3ad Dynamic link aggregation");
    assert_eq!(
        lines(&out, "Slave Interface:"),
        ["Slave Interface: eth0", "Slave Interface: eth1"],
        "{}",
        out.transcript()
    );
    assert_eq!(line(&out, "VLAN "), "VLAN vlan protocol 802.1Q id 100");
    assert_eq!(line(&out, "PING untagged"), "PING untagged 3 received");
    assert_eq!(line(&out, "PING vlan100"), "PING vlan100 3 received");
    // ethtool -l: maximum and current channels both 4.
    let ch = line(&out, "CHANNELS ");
    let combined: Vec<&str> =
        ch.split("Combined: ").skip(1).map(|s| s.split(' ').next().unwrap()).collect();
    assert_eq!(combined, ["4", "4"], "{ch}");
}

/// The guest's side of the e1000e test: the driver, a jumbo MTU that
/// carries 8000-byte unfragmented pings, and back to 1500, where they no
/// longer fit. Each MTU change resets e1000e (carrier drops): waited on.
const E1000E_SCRIPT: &str = r#"
. /netadm-guest/lib.sh
set -e
trap 'rc=$?; [ $rc = 0 ] || { ip -s link; ethtool -S eth0; dmesg | tail -30; }' EXIT
echo "DRIVER $(ethtool -i eth0 | grep '^driver:')"
ip addr add 192.0.2.2/24 dev eth0
ip link set eth0 up
wait_for 30 carrier eth0
wait_for 30 ping -c 1 -W 1 192.0.2.1
ip link set eth0 mtu 9000
echo "MTU $(cat /sys/class/net/eth0/mtu)"
wait_for 30 carrier eth0
wait_for 30 ping -c 1 -W 1 -M do -s 8000 192.0.2.1
echo "JUMBO $(ping -c 2 -i 0.2 -W 2 -M do -s 8000 192.0.2.1 | grep -o '[0-9]* received')"
ip link set eth0 mtu 1500
echo "MTU $(cat /sys/class/net/eth0/mtu)"
wait_for 30 carrier eth0
wait_for 30 ping -c 1 -W 1 192.0.2.1
if ping -c 1 -W 1 -M do -s 8000 192.0.2.1 >/dev/null 2>&1; then echo "BIG still fits"; else echo "BIG refused"; fi
"#;

#[test]
fn e1000e_is_the_driver_and_its_mtu_goes_to_9000_and_back() {
    let Some(_serial) = serial_if_runnable() else { return };
    let ns = Netns::new("e1000e");
    let prepared = with_tools(E1000E_SCRIPT, &ns).nic(Nic::e1000e("ge0")).prepare().unwrap();
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "ge0"]);
    ns.ip(&["link", "set", "ge0", "mtu", "9000"]);
    let out = boot_and_succeed(prepared, "e1000e guest");
    assert_eq!(line(&out, "DRIVER "), "DRIVER driver: e1000e");
    assert_eq!(lines(&out, "MTU "), ["MTU 9000", "MTU 1500"], "{}", out.transcript());
    assert_eq!(line(&out, "JUMBO "), "JUMBO 2 received");
    assert_eq!(line(&out, "BIG "), "BIG refused");
}

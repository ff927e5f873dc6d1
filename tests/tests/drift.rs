//! Kernel drift: someone changes, behind netadm's back, a TAP device the
//! kernel mirror made (`ip link set ... mtu`, `ip addr del`, `ip link
//! del`) in the network namespace netadmd runs in (one this test makes);
//! rtnetlink notifications make `show-if`/`show-addr` say so and the
//! daemon log it, other changes go on, and `refresh-if` puts the
//! configured state back. Root and iproute2 (skipped otherwise, failed
//! under `CI=true`).

use std::time::{Duration, Instant};

use netadm_testkit::*;
use serde_json::Value;

/// How long the daemon gets to notice; it is told by the kernel at once,
/// so this only bounds a broken run.
const NOTICE: Duration = Duration::from_secs(10);

fn iface(bus: &Bus) -> Value {
    rows(&json(bus, &["show-if"]), "ifname", "atl1c2")[0].clone()
}

fn addr_state(bus: &Bus) -> Value {
    rows(&json(bus, &["show-addr"]), "addrobj", "atl1c2/v4")[0]["state"].clone()
}

/// Waits until show-if's row for atl1c2 satisfies `want`; returns how long
/// it took and the row.
fn await_if(bus: &Bus, what: &str, want: impl Fn(&Value) -> bool) -> (Duration, Value) {
    let t0 = Instant::now();
    loop {
        let r = iface(bus);
        if want(&r) {
            return (t0.elapsed(), r);
        }
        assert!(t0.elapsed() < NOTICE, "{what}: show-if still says {r}");
    }
}

#[test]
fn changes_behind_netadms_back_are_reported_and_refresh_if_puts_them_back() {
    let Some([ns]) = namespaces(&["setpriv"], "nd", [""]) else { return };
    let name = ns.name().to_owned();
    let bus = Bus::start();
    // The embedded default hardware, the kernel mirror on; its log read.
    let daemon = Daemon::builder(&bus, bus.subdir("state")).netns(&name).start();

    json(&bus, &["create-if", "atl1c2"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "atl1c2/v4"]);
    assert_eq!(iface(&bus)["state"], "ok");
    assert_eq!(iface(&bus)["drift"], "");

    // Someone changes the MTU: drifted, with what differs, and logged.
    ip(&name, &["link", "set", "atl1c2", "mtu", "1400"]);
    let (took, r) = await_if(&bus, "mtu drift", |r| r["state"] == "drifted");
    eprintln!("mtu changed behind its back: show-if said so after {took:?}: {}", r["drift"]);
    assert_eq!(r["drift"], "mtu 1400 (configured 1500)");
    daemon.await_stderr("the drift logged", |l| l.contains("kernel drift: mtu 1400"));
    // Other changes go on meanwhile.
    json(&bus, &["create-if", "atl1c3"]);
    assert_eq!(rows(&json(&bus, &["show-if"]), "ifname", "atl1c3")[0]["state"], "ok");

    // And the address goes: missing in show-addr too.
    ip(&name, &["addr", "del", "192.0.2.1/24", "dev", "atl1c2"]);
    let (took, r) = await_if(&bus, "address drift", |r| {
        r["drift"].as_str().unwrap().contains("address 192.0.2.1/24 missing")
    });
    eprintln!("address deleted: show-if said so after {took:?}: {}", r["drift"]);
    assert_eq!(addr_state(&bus), "missing");

    // refresh-if: as configured again, in the kernel too.
    let r = json(&bus, &["refresh-if", "atl1c2"]);
    assert_eq!(r["op"], "refresh-if", "{r}");
    let r = iface(&bus);
    assert_eq!((r["state"].as_str(), r["drift"].as_str()), (Some("ok"), Some("")), "{r}");
    assert_eq!(addr_state(&bus), "ok");
    let k = ip(&name, &["-o", "addr", "show", "dev", "atl1c2"]);
    assert!(k.contains("192.0.2.1/24"), "{k}");
    assert!(ip(&name, &["-o", "link", "show", "atl1c2"]).contains("mtu 1500"));

    // The operator putting it back by hand clears it as well.
    ip(&name, &["link", "set", "atl1c2", "mtu", "1400"]);
    await_if(&bus, "mtu drift", |r| r["state"] == "drifted");
    ip(&name, &["link", "set", "atl1c2", "mtu", "1500"]);
    await_if(&bus, "back by hand", |r| r["state"] == "ok");

    // The device deleted: missing, its address too; refresh-if makes it.
    ip(&name, &["link", "del", "atl1c2"]);
    let (took, r) = await_if(&bus, "missing device", |r| r["state"] == "missing");
    eprintln!("device deleted: show-if said so after {took:?}: {}", r["drift"]);
    assert_eq!(addr_state(&bus), "missing");
    json(&bus, &["refresh-if", "atl1c2"]);
    assert_eq!(iface(&bus)["state"], "ok");
    assert!(ip(&name, &["-o", "addr", "show", "dev", "atl1c2"]).contains("192.0.2.1/24"));

    // Only an administrator may (the bus here allows all: netadmd decides).
    let nobody = netadm_as(&bus, 65534, &[], &["refresh-if", "atl1c2"]);
    assert!(!nobody.status.success());
    assert!(
        String::from_utf8_lossy(&nobody.stderr).contains("may not change the network"),
        "{nobody:?}"
    );

    // Bad input is typed and changes nothing.
    assert_eq!(json_err(&bus, &["refresh-if", "atl1c1"]).0, "NotFound");
    assert_eq!(json_err(&bus, &["refresh-if", "no-such"]).0, "InvalidName");
    assert_eq!(iface(&bus)["state"], "ok");
}

/// An address someone put on a TAP by hand: `create-addr` of the same
/// address is refused (`Exists`, naming it), and the change is put back
/// without taking the address that was there before with it.
#[test]
fn create_addr_of_an_address_already_in_the_kernel_is_refused_and_leaves_it() {
    let Some([ns]) = namespaces(&[], "nx", [""]) else { return };
    let name = ns.name().to_owned();
    let bus = Bus::start();
    let _daemon = Daemon::builder(&bus, bus.subdir("state")).netns(&name).start();
    json(&bus, &["create-if", "atl1c2"]);
    ip(&name, &["addr", "add", "198.51.100.7/24", "dev", "atl1c2"]);
    let (k, m) =
        json_err(&bus, &["create-addr", "-T", "static", "-a", "198.51.100.7/24", "atl1c2/v4"]);
    assert_eq!(k, "Exists", "{m}");
    assert!(m.contains("198.51.100.7/24"), "{m}");
    let addrs = ip(&name, &["-o", "addr", "show", "dev", "atl1c2"]);
    assert!(addrs.contains("198.51.100.7/24"), "the address was taken away:\n{addrs}");
    assert!(rows(&json(&bus, &["show-addr"]), "addrobj", "atl1c2/v4").is_empty());
}

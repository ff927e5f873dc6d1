//! Zones as network namespaces, end to end in namespaces this test makes:
//! netadmd runs in one (`a`), its i40e-class port wired by afpacket to a
//! veth whose far end is bridged and addressed (192.0.2.2/24) in another
//! (`b`). A VNIC over that port gets `zone` = a third namespace (`z`): its
//! IP interface's TAP is made there, not in netadmd's, the address is added
//! (and deprecated) there, and ping from `z` crosses netadm's rings and the
//! wire to `b` (DHCP in a zone: tests/dhcp.rs). The
//! zone is persisted and replayed by the next netadmd; bad zones are typed
//! errors that change nothing; the zone deleted under netadm is reported
//! by `show-if`, survived by a restart, and `refresh-if` makes the device
//! again once the zone is back. Under `CI=true` missing prerequisites fail.

use std::process::Command;

use netadm_testkit::*;

/// Whether `dev` exists in namespace `ns`.
fn has_link(ns: &str, dev: &str) -> bool {
    Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", dev])
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap()
        .status
        .success()
}

/// Pings the far side from namespace `ns`; panics with ping's output if
/// no reply comes.
fn ping_from(ns: &str) {
    ping(ns, "192.0.2.2");
}

/// Pings `to` from namespace `ns`; panics with ping's output if no reply
/// comes.
fn ping(ns: &str, to: &str) {
    let ping = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-c", "3", "-i", "0.2", "-W", "2", to])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&ping.stdout);
    assert!(ping.status.success(), "ping {to} from zone {ns} failed:\n{out}");
}

/// netadmd in namespace `a`, its port i40e0 wired to va0.
fn daemon_in(a: &str, bus: &Bus, dir: &std::path::Path) -> Daemon {
    let hw = fixtures::afpacket(&["va0"]);
    Daemon::builder(bus, dir.join("state")).netns(a).hardware(&hw).start()
}

/// Whether the kernel has `ip` on `dev` in `ns` deprecated (its preferred
/// lifetime over; with a valid lifetime of for ever the kernel reports
/// both as for ever, and the flag).
fn deprecated(ns: &str, dev: &str, ip: &str) -> Option<bool> {
    let out = run(&["ip", "-n", ns, "-j", "addr", "show", "dev", dev]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["addr_info"].as_array()?.iter().find(|a| a["local"] == ip).map(|a| a["deprecated"] == true)
}

fn zone_of(bus: &Bus, link: &str) -> serde_json::Value {
    json(bus, &["show-linkprop", "-p", "zone", link])[0]["value"].clone()
}

fn show_if(bus: &Bus, name: &str) -> serde_json::Value {
    rows(&json(bus, &["show-if"]), "ifname", name)[0].clone()
}

#[test]
fn a_vnics_ip_interface_lives_in_its_zone_and_pings_from_there() {
    let Some(made) = namespaces(&["ping"], "z", ["a", "b", "z"]) else { return };
    let [a, b, z] = made.each_ref().map(|n| n.name().to_owned());
    netadm_far_side(&a, &b).unwrap();
    let bus = Bus::start();
    let dir = bus.subdir("zones");
    let daemon = daemon_in(&a, &bus, &dir);

    json(&bus, &["create-vnic", "-l", "i40e0", "zvnic0"]);
    json(&bus, &["create-vnic", "-l", "i40e0", "-p", &format!("zone={z}"), "zvnic1"]);
    let none = zone_of(&bus, "zvnic0");
    json(&bus, &["set-linkprop", "-p", &format!("zone={z}"), "zvnic0"]);
    assert_eq!(zone_of(&bus, "zvnic0"), z.as_str());

    json(&bus, &["create-if", "zvnic0"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "zvnic0/v4"]);
    // The TAP is in the zone, not in netadmd's namespace.
    assert!(has_link(&z, "zvnic0"), "no zvnic0 in zone {z}");
    assert!(!has_link(&a, "zvnic0"), "zvnic0 is in netadmd's namespace");
    // Router advertisements are not heeded there either (no SLAAC until an
    // addrconf object asks for it).
    let ra = run(&["ip", "netns", "exec", &z, "sysctl", "-n", "net.ipv6.conf.zvnic0.accept_ra"])
        .unwrap();
    assert_eq!(ra.trim(), "0", "accept_ra in the zone");
    let i = show_if(&bus, "zvnic0");
    assert_eq!(
        (i["state"].as_str(), i["kernel_device"].as_str()),
        (Some("ok"), Some(&*format!("zvnic0@{z}"))),
        "{i}"
    );
    let addrs = json(&bus, &["show-addr"]);
    assert_eq!(rows(&addrs, "addrobj", "zvnic0/v4")[0]["state"], "ok", "{addrs}");
    ping_from(&z);
    // Another address, added and removed there.
    json(&bus, &["create-addr", "-T", "static", "-a", "198.51.100.1/24", "zvnic0/v4b"]);
    let text = run(&["ip", "-n", &z, "addr", "show", "dev", "zvnic0"]).unwrap();
    assert!(text.contains("198.51.100.1/24"), "{text}");
    json(&bus, &["delete-addr", "zvnic0/v4b"]);
    let text = run(&["ip", "-n", &z, "addr", "show", "dev", "zvnic0"]).unwrap();
    assert!(!text.contains("198.51.100.1") && text.contains("192.0.2.1/24"), "{text}");
    // Deprecated there: preferred lifetime 0 in the zone's kernel (over
    // the zone's connection), and back.
    json(&bus, &["set-addrprop", "-p", "deprecated=on", "zvnic0/v4"]);
    assert_eq!(deprecated(&z, "zvnic0", "192.0.2.1"), Some(true));
    let text = run(&["ip", "-n", &z, "addr", "show", "dev", "zvnic0"]).unwrap();
    assert!(text.contains("deprecated"), "{text}");
    assert_eq!(show_if(&bus, "zvnic0")["state"], "ok", "not drift");
    json(&bus, &["set-addrprop", "-p", "deprecated=off", "zvnic0/v4"]);
    assert_eq!(deprecated(&z, "zvnic0", "192.0.2.1"), Some(false));
    // What acts in netadmd's own namespace so far is refused in a zone,
    // with nothing changed.
    let before = json(&bus, &["show-addr"]);
    for args in [
        &["create-addr", "-T", "addrconf", "zvnic0/v6"][..],
        &["set-ifprop", "-p", "forwarding=on", "-m", "ipv4", "zvnic0"][..],
    ] {
        let (k, msg) = json_err(&bus, args);
        assert_eq!(k, "NotSupported", "{args:?}: {msg}");
        assert!(msg.contains(&format!("zone {z}")), "{args:?}: {msg}");
    }
    assert_eq!(json(&bus, &["show-addr"]), before);

    // Bad zones: typed errors naming what was wrong; nothing changes.
    let bad: [(&str, &str, &str); 5] = [
        ("zone=a/b", "zvnic1", "InvalidValue"),
        ("zone=", "zvnic1", "InvalidValue"),
        ("zone=nosuch-zone-netadm", "zvnic1", "NotFound"),
        ("zone=/etc/hostname", "zvnic1", "InvalidValue"),
        ("zone=other", "zvnic0", "Busy"),
    ];
    for (p, link, kind) in bad {
        let before = zone_of(&bus, link);
        let (k, msg) = json_err(&bus, &["set-linkprop", "-p", p, link]);
        assert_eq!(k, kind, "{p} on {link}: {msg}");
        assert!(msg.contains("zone"), "{p}: {msg}");
        assert_eq!(zone_of(&bus, link), before, "{p} changed {link}");
    }
    let (k, msg) = json_err(&bus, &["set-linkprop", "-p", &format!("zone={z}"), "i40e0"]);
    assert_eq!(k, "NotSupported", "{msg}");
    let (k, msg) = json_err(&bus, &["reset-linkprop", "-p", "zone", "zvnic0"]);
    assert_eq!(k, "Busy", "{msg}");
    assert!(has_link(&z, "zvnic0") && !has_link(&a, "zvnic0"));
    json(&bus, &["reset-linkprop", "-p", "zone", "zvnic1"]);
    assert_eq!(zone_of(&bus, "zvnic1"), none);

    // Persisted and replayed: the next netadmd makes it in the zone again.
    drop(daemon);
    wait_for("the TAP to go with netadmd", || !has_link(&z, "zvnic0"));
    let daemon = daemon_in(&a, &bus, &dir);
    assert_eq!(zone_of(&bus, "zvnic0"), z.as_str());
    assert!(has_link(&z, "zvnic0") && !has_link(&a, "zvnic0"));
    ping_from(&z);

    // The zone deleted under netadm: reported, not a crash; and let go
    // of, so the namespace goes with its TAP and address (held, the
    // address went on answering).
    sh(&["ip", "netns", "del", &z]);
    wait_for("the deleted zone's address to stop answering", || {
        let far = Command::new("ip")
            .args(["netns", "exec", &b, "ping", "-c", "1", "-W", "1", "192.0.2.1"])
            .output()
            .unwrap();
        !far.status.success()
    });
    let i = show_if(&bus, "zvnic0");
    assert_eq!(i["state"], "missing", "{i}");
    assert!(i["drift"].as_str().unwrap().contains(&format!("zone {z}")), "{i}");
    let addrs = json(&bus, &["show-addr"]);
    assert_eq!(rows(&addrs, "addrobj", "zvnic0/v4")[0]["state"], "missing", "{addrs}");
    // ...and by a restart, which cannot make it.
    drop(daemon);
    let daemon = daemon_in(&a, &bus, &dir);
    let i = show_if(&bus, "zvnic0");
    assert_eq!(i["state"], "missing", "{i}");
    assert!(i["drift"].as_str().unwrap().contains(&format!("zone {z}")), "{i}");
    // Other changes go on meanwhile.
    json(&bus, &["create-vnic", "-l", "i40e0", "zvnic2"]);
    json(&bus, &["delete-vnic", "zvnic2"]);
    // The zone back (a new namespace of that name): refresh-if makes it.
    sh(&["ip", "netns", "add", &z]);
    json(&bus, &["refresh-if", "zvnic0"]);
    assert_eq!(show_if(&bus, "zvnic0")["state"], "ok");
    assert!(has_link(&z, "zvnic0") && !has_link(&a, "zvnic0"));
    ping_from(&z);

    let doc = show_config(&bus);
    json(&bus, &["delete-if", "zvnic0"]);
    assert!(!has_link(&z, "zvnic0"), "delete-if leaves the TAP in the zone");

    // show-config applied back makes the VNIC with its zone and its IP
    // interface in one operation (the interface the same document adds
    // does not make the zone busy).
    json(&bus, &["delete-vnic", "zvnic0"]);
    let f = dir.join("back.toml");
    std::fs::write(&f, &doc).unwrap();
    let r = json(&bus, &["apply", "-f", f.to_str().unwrap()]);
    assert_eq!(r["changed"], true, "{r}");
    assert!(has_link(&z, "zvnic0") && !has_link(&a, "zvnic0"), "apply did not make it in {z}");
    assert_eq!(show_if(&bus, "zvnic0")["state"], "ok");
    ping_from(&z);
    drop(daemon);
    drop(made);
}

/// Two VNICs over one etherstub, each IP interface in a zone of its own:
/// they reach each other through netadm's virtual switch alone (ARP
/// broadcast flooded to the etherstub's VNICs, unicast delivered to the
/// VNIC that has the MAC), and nothing of it reaches the port's wire.
#[test]
fn two_zones_over_one_etherstub_ping_each_other() {
    let Some(made) = namespaces(&["ping"], "e", ["a", "b", "z1", "z2"]) else { return };
    let [a, b, z1, z2] = made.each_ref().map(|n| n.name().to_owned());
    netadm_far_side(&a, &b).unwrap();
    let bus = Bus::start();
    let dir = bus.subdir("stubzones");
    let daemon = daemon_in(&a, &bus, &dir);
    let wire = || rows(&json(&bus, &["show-link", "-s"]), "link", "i40e0")[0]["opackets"].clone();
    let wire_before = wire();

    json(&bus, &["create-etherstub", "stub0"]);
    for (vnic, zone, addr) in [("s1", &z1, "198.51.100.1/24"), ("s2", &z2, "198.51.100.2/24")] {
        json(&bus, &["create-vnic", "-l", "stub0", "-p", &format!("zone={zone}"), vnic]);
        json(&bus, &["create-if", vnic]);
        json(&bus, &["create-addr", "-T", "static", "-a", addr, &format!("{vnic}/v4")]);
        assert!(has_link(zone, vnic) && !has_link(&a, vnic), "{vnic} is not in zone {zone}");
    }
    ping(&z1, "198.51.100.2");
    ping(&z2, "198.51.100.1");
    for vnic in ["s1", "s2"] {
        let i = show_if(&bus, vnic);
        assert_eq!(i["state"], "ok", "an interface over an etherstub is up: {i}");
    }
    // The port's wire carried none of it.
    assert_eq!(wire(), wire_before, "frames between the zones reached i40e0's wire");

    for vnic in ["s1", "s2"] {
        json(&bus, &["delete-if", vnic]);
        json(&bus, &["delete-vnic", vnic]);
    }
    json(&bus, &["delete-etherstub", "stub0"]);
    drop(daemon);
    drop(made);
}

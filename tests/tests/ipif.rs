//! ipadm's interface and address state verbs on a real kernel:
//! `disable-if`/`enable-if` and `down-addr`/`up-addr`, with netadmd in a
//! network namespace this test makes (kernel mirror on, an i40e-class
//! port on an afpacket wire to a veth there). Each is checked in show-if /
//! show-addr, in the kernel (`ip -j`) and in links.toml; refusals are
//! typed and change nothing; what persists comes back after a restart.
//! Prerequisites (root, ip) missing: "skipped", except under `CI=true`.

use netadm_e2e::*;

#[path = "../../crates/netadm-bench/src/realnet.rs"]
#[allow(dead_code)]
mod realnet;

use realnet::Reaped;

/// The addresses the kernel has on `dev` in `ns` (`None`: no such device).
fn kernel_addrs(ns: &str, dev: &str) -> Option<Vec<String>> {
    let out = realnet::run(&["ip", "-n", ns, "-j", "addr", "show", "dev", dev]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    Some(
        v[0]["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
            .collect(),
    )
}

fn addr_state(bus: &Bus, obj: &str) -> String {
    let v = json(bus, &["show-addr"]);
    rows(&v, "addrobj", obj)[0]["state"].as_str().unwrap().to_owned()
}

fn if_state(bus: &Bus, ifname: &str) -> String {
    let v = json(bus, &["show-if"]);
    rows(&v, "ifname", ifname)[0]["state"].as_str().unwrap().to_owned()
}

#[test]
fn disable_enable_if_and_down_up_addr_act_on_the_kernel_and_keep_the_configuration() {
    if !prerequisites(Some("for network namespaces"), &[("ip", "iproute2")]) {
        return;
    }
    let ns = format!("ipif{}", std::process::id());
    let _ns = realnet::Netns::new(std::slice::from_ref(&ns)).unwrap_or_else(|e| panic!("{e}"));
    for args in [
        &["ip", "-n", &ns, "link", "add", "va0", "type", "veth", "peer", "name", "vb0"][..],
        &["ip", "-n", &ns, "link", "set", "va0", "up"],
        &["ip", "-n", &ns, "link", "set", "vb0", "up"],
    ] {
        realnet::run(args).unwrap_or_else(|e| panic!("{e}"));
    }
    let bus = Bus::start();
    let dir = bus.subdir("ipif");
    let hw = dir.join("hw.toml");
    std::fs::write(
        &hw,
        "[[port]]\nname = \"i40e0\"\nclass = \"i40e\"\nqueue_pairs = 4\nwire = { kind = \"afpacket\", interface = \"va0\" }\n",
    )
    .unwrap();
    let state = dir.join("state");
    let links = || std::fs::read_to_string(state.join("links.toml")).unwrap();
    let daemon = Reaped(netadmd_in_netns(&ns, &bus, &hw, &state));
    let has = |a: &str| kernel_addrs(&ns, "i40e0").is_some_and(|v| v.iter().any(|x| x == a));

    json(&bus, &["create-if", "i40e0"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.5/24", "i40e0/v4"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "2001:db8::5/64", "i40e0/v6"]);
    assert!(has("192.0.2.5/24") && has("2001:db8::5/64"));

    // down-addr: kept (show-addr says down, links.toml says so), gone
    // from the kernel; up-addr: back.
    let r = json(&bus, &["down-addr", "i40e0/v4"]);
    eprintln!("down-addr: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(r["op"], "down-addr");
    assert_eq!(addr_state(&bus, "i40e0/v4"), "down");
    assert!(!has("192.0.2.5/24") && has("2001:db8::5/64"));
    assert!(links().contains("down = true"), "{}", links());
    assert_eq!(if_state(&bus, "i40e0"), "ok", "a down address is not drift");
    let r = json(&bus, &["up-addr", "i40e0/v4"]);
    eprintln!("up-addr: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(addr_state(&bus, "i40e0/v4"), "ok");
    assert!(has("192.0.2.5/24"));
    assert!(!links().contains("down"), "{}", links());
    // -t: the running system only.
    json(&bus, &["down-addr", "-t", "i40e0/v6"]);
    assert!(!has("2001:db8::5/64") && !links().contains("down"));
    json(&bus, &["up-addr", "-t", "i40e0/v6"]);
    assert!(has("2001:db8::5/64"));

    // disable-if: the device and its addresses leave the running system;
    // the configuration keeps them (show-if/show-addr: disabled).
    let before = links();
    let r = json(&bus, &["disable-if", "-t", "i40e0"]);
    eprintln!("disable-if: {} us in the daemon", r["timing"]["total_us"]);
    assert!(kernel_addrs(&ns, "i40e0").is_none(), "the device is gone");
    assert_eq!(if_state(&bus, "i40e0"), "disabled");
    assert_eq!(addr_state(&bus, "i40e0/v4"), "disabled");
    assert_eq!(links(), before, "the persistent configuration is kept");
    // enable-if: back with its addresses.
    let r = json(&bus, &["enable-if", "-t", "i40e0"]);
    eprintln!("enable-if: {} us in the daemon", r["timing"]["total_us"]);
    assert!(has("192.0.2.5/24") && has("2001:db8::5/64"));
    assert_eq!((if_state(&bus, "i40e0"), addr_state(&bus, "i40e0/v6")), ("ok".into(), "ok".into()));

    // Refusals: typed, nothing changed.
    json(&bus, &["create-vnic", "-l", "i40e0", "vnic0"]);
    json(&bus, &["create-if", "-t", "vnic0"]);
    json(&bus, &["create-addr", "-T", "addrconf", "i40e0/auto"]);
    let before = (json(&bus, &["show-addr"]), json(&bus, &["show-if"]), links());
    for (args, kind) in [
        (&["enable-if", "i40e0"][..], "Exists"),
        (&["enable-if", "nosuch0"], "NotFound"),
        (&["disable-if", "vnic0"], "InvalidArgument"),
        (&["disable-if", "nosuch0"], "NotFound"),
        (&["disable-if", "bad name"], "InvalidName"),
        (&["down-addr", "i40e0/nosuch"], "NotFound"),
        (&["down-addr", "i40e0"], "InvalidName"),
        (&["down-addr", "i40e0/auto"], "InvalidArgument"),
        (&["up-addr", "vnic0/v4"], "NotFound"),
    ] {
        let (k, msg) = json_err(&bus, args);
        assert_eq!(k, kind, "{args:?}: {msg}");
    }
    let after = (json(&bus, &["show-addr"]), json(&bus, &["show-if"]), links());
    assert!(before == after, "a refused change changed something");
    json(&bus, &["delete-addr", "i40e0/auto"]);

    // Persisted: a down address stays down (and out of the kernel) after
    // a restart; a disabled interface comes back enabled (disable-if is
    // temporary, as ipadm's).
    json(&bus, &["down-addr", "i40e0/v4"]);
    json(&bus, &["disable-if", "-t", "i40e0"]);
    drop(daemon);
    let daemon = Reaped(netadmd_in_netns(&ns, &bus, &hw, &state));
    assert_eq!(if_state(&bus, "i40e0"), "ok");
    assert_eq!(addr_state(&bus, "i40e0/v4"), "down");
    assert!(!has("192.0.2.5/24") && has("2001:db8::5/64"));
    drop(daemon);
}

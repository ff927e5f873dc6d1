//! The real `netadm` binary against a real `netadmd` on a private bus,
//! through every verb, with the JSON output parsed and checked.

use netadm_testkit::*;
use serde_json::Value;

fn timing_ok(v: &Value, op: &str) {
    assert_eq!(v["op"], op, "{v}");
    let t = &v["timing"];
    assert!(t["total_us"].as_u64().is_some(), "timing.total_us: {v}");
    let phases = t["phases"].as_array().expect("timing.phases");
    assert!(phases.iter().any(|p| p["name"] == "validate"), "{v}");
    assert!(phases.iter().all(|p| p["name"].is_string() && p["us"].is_u64()), "{v}");
}

fn phase(v: &Value, name: &str) -> bool {
    v["timing"]["phases"].as_array().unwrap().iter().any(|p| p["name"] == name)
}

#[test]
fn every_verb_through_the_real_binaries() {
    let bus = Bus::start();
    let d = Daemon::start(&bus, &bus.subdir("state"), &[]);

    let phys = json(&bus, &["show-phys"]);
    assert_eq!(phys.as_array().unwrap().len(), 6, "the embedded default: {phys}");
    assert_eq!(rows(&phys, "link", "i40e0")[0]["device"], "i40e0");

    let r = json(
        &bus,
        &[
            "create-aggr",
            "-P",
            "L2,L3",
            "-L",
            "active",
            "-T",
            "short",
            "-l",
            "i40e0",
            "-l",
            "i40e1",
            "aggr0",
        ],
    );
    timing_ok(&r, "create-aggr");
    assert!(phase(&r, "ring-start") && phase(&r, "persist"), "{r}");
    assert_eq!(r["counts"]["rings_started"], 512);

    let aggr = json(&bus, &["show-aggr"]);
    let a = &rows(&aggr, "link", "aggr0")[0];
    assert_eq!(
        (a["policy"].as_str(), a["lacpactivity"].as_str(), a["lacptimer"].as_str()),
        (Some("L2,L3"), Some("active"), Some("short"))
    );
    let x = json(&bus, &["show-aggr", "-x", "aggr0"]);
    let ports: Vec<&str> = x
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["port"].as_str())
        .filter(|p| !p.is_empty())
        .collect();
    assert!(ports.contains(&"i40e0") && ports.contains(&"i40e1"), "{x}");
    json(&bus, &["show-aggr", "-L"]);

    let link = json(&bus, &["show-link"]);
    let a = &rows(&link, "link", "aggr0")[0];
    assert_eq!((a["class"].as_str(), a["mtu"].as_u64()), (Some("aggr"), Some(1500)));
    assert_eq!(a["over"], serde_json::json!(["i40e0", "i40e1"]));

    let r = json(&bus, &["set-linkprop", "-p", "mtu=9000", "aggr0"]);
    timing_ok(&r, "set-linkprop");
    assert!(phase(&r, "reprogram"), "an MTU change reprograms the rings: {r}");
    let p = json(&bus, &["show-linkprop", "-p", "mtu", "aggr0"]);
    assert_eq!(p[0]["value"], "9000");
    assert_eq!((p[0]["perm"].as_str(), p[0]["default"].as_str()), (Some("rw"), Some("1500")));
    assert_eq!(rows(&json(&bus, &["show-link", "i40e1"]), "link", "i40e1")[0]["mtu"], 9000);
    json(&bus, &["reset-linkprop", "-p", "mtu", "aggr0"]);
    assert_eq!(json(&bus, &["show-linkprop", "-p", "mtu", "aggr0"])[0]["value"], "1500");

    timing_ok(&json(&bus, &["modify-aggr", "-P", "L4", "aggr0"]), "modify-aggr");
    assert_eq!(rows(&json(&bus, &["show-aggr"]), "link", "aggr0")[0]["policy"], "L4");
    let r = json(&bus, &["remove-aggr", "-l", "i40e1", "aggr0"]);
    assert_eq!(r["counts"]["rings_stopped"], 256, "{r}");
    json(&bus, &["add-aggr", "-l", "i40e1", "aggr0"]);

    let r = json(&bus, &["create-vnic", "-l", "aggr0", "-v", "12", "-m", "random", "vnic0"]);
    timing_ok(&r, "create-vnic");
    let v = json(&bus, &["show-vnic"]);
    assert_eq!(
        json(&bus, &["show-vnic", "vnic0"]),
        serde_json::json!([rows(&v, "link", "vnic0")[0]])
    );
    let v0 = &rows(&v, "link", "vnic0")[0];
    assert_eq!(
        (v0["over"].as_str(), v0["vid"].as_u64(), v0["macaddrtype"].as_str()),
        (Some("aggr0"), Some(12), Some("random"))
    );

    timing_ok(&json(&bus, &["create-if", "vnic0"]), "create-if");
    assert_eq!(rows(&json(&bus, &["show-if"]), "ifname", "vnic0")[0]["state"], "ok");
    timing_ok(
        &json(&bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "vnic0/v4"]),
        "create-addr",
    );
    json(&bus, &["create-addr", "-T", "static", "-a", "2001:db8::1/64", "vnic0/v6"]);
    let addrs = json(&bus, &["show-addr"]);
    assert_eq!(rows(&addrs, "addrobj", "vnic0/v4")[0]["addr"], "192.0.2.1/24");
    assert_eq!(rows(&addrs, "addrobj", "vnic0/v6")[0]["type"], "static");
    json(&bus, &["delete-addr", "vnic0/v6"]);
    json(&bus, &["delete-if", "vnic0"]);
    assert!(
        json(&bus, &["show-addr"]).as_array().unwrap().is_empty(),
        "delete-if takes its addresses"
    );
    json(&bus, &["delete-vnic", "vnic0"]);

    timing_ok(&json(&bus, &["rename-link", "atl1c3", "net3"]), "rename-link");
    assert_eq!(rows(&json(&bus, &["show-phys"]), "link", "net3")[0]["device"], "atl1c3");

    let r = json(&bus, &["delete-aggr", "aggr0"]);
    assert_eq!(r["counts"]["rings_stopped"], 512);
    let phys = json(&bus, &["show-phys"]);
    assert!(phys.as_array().unwrap().iter().all(|p| p["rings_started"] == 0), "{phys}");

    // History has every mutation, in order, with timings.
    let h = json(&bus, &["show-history"]);
    let cmds: Vec<&str> =
        h.as_array().unwrap().iter().filter_map(|e| e["command"].as_str()).collect();
    assert!(cmds.first().unwrap().starts_with("create-aggr"), "{cmds:?}");
    assert!(cmds.last().unwrap().starts_with("delete-aggr"), "{cmds:?}");
    drop(d);
}

#[test]
fn output_for_people_and_for_scripts() {
    let bus = Bus::start();
    let _d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    json(&bus, &["create-aggr", "-l", "atl1c0", "-l", "atl1c1", "aggr1"]);

    let out = netadm(&bus, &["show-link", "-p", "-o", "link,class,over", "aggr1"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "aggr1:aggr:atl1c0 atl1c1");

    let out = netadm(&bus, &["show-link"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["LINK", "CLASS", "MTU", "STATE", "BRIDGE", "OVER"]);

    let out = netadm(&bus, &["set-linkprop", "-p", "mtu=4000", "aggr1"]);
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.starts_with("set-linkprop aggr1: ") && line.contains(" ms"),
        "one-line summary: {line}"
    );

    // Parsable output escapes colons when printing several fields.
    let out = netadm(&bus, &["show-history", "-p", "-o", "command,result"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("create-aggr aggr1:"));
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let bus = Bus::start();
    let d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    json(&bus, &["create-aggr", "-l", "i40e0", "aggr0"]);
    json(&bus, &["create-vnic", "-l", "aggr0", "vnic0"]);
    let conf = d.state_dir.join("links.toml");
    let before =
        (std::fs::read(&conf).unwrap(), json(&bus, &["show-link"]), json(&bus, &["show-phys"]));

    let cases: &[(&[&str], &str, &str)] = &[
        (&["create-aggr", "-l", "nosuch0", "aggr1"], "NotFound", "nosuch0"),
        (&["set-linkprop", "-p", "mtu=9000", "nosuch0"], "NotFound", "nosuch0"),
        (&["set-linkprop", "-p", "mtu=9000", "bad name"], "InvalidName", "bad name"),
        (&["reset-linkprop", "-p", "mtu", "bad name"], "InvalidName", "bad name"),
        (&["add-aggr", "-l", "i40e1", "-l", "i40e1", "aggr0"], "InvalidArgument", "twice"),
        (&["create-aggr", "-l", "i40e1", "bad-name"], "InvalidName", "bad-name"),
        (&["create-aggr", "-l", "i40e1", "aggr"], "InvalidName", "digit"),
        (&["create-aggr", "-l", "i40e0", "aggr1"], "Busy", "aggr0"),
        (&["delete-aggr", "aggr0"], "Busy", "vnic0"),
        (&["set-linkprop", "-p", "mtu=65000", "aggr0"], "InvalidValue", "65000"),
        (&["set-linkprop", "-p", "mtu=9000", "i40e0"], "Busy", "aggr0"),
        (&["set-linkprop", "-p", "mtu", "aggr0"], "InvalidArgument", "mtu"),
        (&["set-linkprop", "-p", "speed=10", "aggr0"], "NotSupported", "speed"),
        (&["create-aggr", "-P", "L9", "-l", "i40e1", "aggr1"], "InvalidArgument", "L9"),
        (&["create-vnic", "-l", "aggr0", "-v", "4095", "vnic1"], "InvalidArgument", "4095"),
        (&["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"], "NotFound", "aggr0"),
        (
            &["create-addr", "-T", "static", "-a", "192.0.2.1/99", "aggr0/v4"],
            "InvalidArgument",
            "99",
        ),
        (
            &["create-addr", "-T", "dhcp", "-a", "192.0.2.1/24", "aggr0/v4"],
            "InvalidArgument",
            "static",
        ),
        (&["show-link", "nosuch0"], "NotFound", "nosuch0"),
        (&["show-vnic", "i40e0"], "NotFound", "VNIC i40e0"),
        (&["show-link", "-p"], "InvalidArgument", "-o"),
        (&["show-link", "-o", "colour"], "InvalidArgument", "colour"),
    ];
    for (args, kind, needle) in cases {
        let (k, m) = json_err(&bus, args);
        assert_eq!(&k, kind, "netadm {args:?}: {m}");
        assert!(
            m.to_lowercase().contains(&needle.to_lowercase()),
            "netadm {args:?}: message {m:?} should name {needle:?}"
        );
        // Without --json: a message on stderr, exit 1.
        let out = netadm(&bus, args);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("netadm: "));
    }
    let after =
        (std::fs::read(&conf).unwrap(), json(&bus, &["show-link"]), json(&bus, &["show-phys"]));
    assert!(before == after, "refused requests changed state or config");
}

#[test]
fn a_malformed_command_line_under_json_is_a_typed_json_error() {
    let bus = Bus::start();
    for args in [
        &["--json", "create-aggr", "--bogus", "aggr0"][..],
        &["--json", "create-vnic", "vnic0"],
        &["--json", "set-linkprop", "-p"],
    ] {
        let out = netadm(&bus, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap_or_else(|e| {
            panic!("{args:?}: not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr))
        });
        assert_eq!(v["error"]["kind"], "InvalidArgument", "{v}");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
}

#[test]
fn an_unreachable_daemon_is_a_bus_error() {
    let bus = Bus::start();
    let (kind, msg) = json_err(&bus, &["show-link"]);
    assert_eq!(kind, "Bus", "{msg}");
}

#[test]
fn busctl_introspects_and_calls_the_service() {
    let bus = Bus::start();
    let _d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    let busctl = |args: &[&str]| {
        let out = std::process::Command::new("busctl")
            .arg(format!("--address={}", bus.address()))
            .args(args)
            .output()
            .expect("busctl (systemd) must be installed");
        assert!(out.status.success(), "busctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let intro = busctl(&["introspect", "org.netadm.Netadm1", "/org/netadm/Netadm1"]);
    for m in [".CreateAggr", ".SetLinkProp", ".ShowLink", ".Progress", ".Strategy"] {
        assert!(intro.contains(m), "introspection lacks {m}:\n{intro}");
    }
    let out = busctl(&[
        "call",
        "org.netadm.Netadm1",
        "/org/netadm/Netadm1",
        "org.netadm.Netadm1",
        "CreateAggr",
        "sasssssb",
        "aggr0",
        "1",
        "i40e1",
        "L3",
        "off",
        "short",
        "",
        "true",
    ]);
    assert!(out.starts_with("sta(st)a{st}as \"create-aggr\""), "{out}");
    let mtu = busctl(&[
        "get-property",
        "org.netadm.Netadm1",
        "/org/netadm/Netadm1/links/aggr0",
        "org.netadm.Netadm1.Link",
        "Mtu",
    ]);
    assert_eq!(mtu.trim(), "u 1500");
    // Rows by name: only the links (VNICs) named that exist.
    let call = |method: &str, names: &[&str]| {
        let mut a = vec!["call", "org.netadm.Netadm1", "/org/netadm/Netadm1", "org.netadm.Netadm1"];
        let count = names.len().to_string();
        a.extend([method, "as", &count]);
        a.extend(names);
        busctl(&a)
    };
    let out = call("ShowLinkNamed", &["aggr0", "i40e0"]);
    assert!(out.starts_with("a(") && out.contains(" 2 \"aggr0\" \"aggr\" 1500"), "{out}");
    assert!(out.contains("\"i40e0\" \"phys\""), "{out}");
    // A typed error, as any client sees it.
    let out = std::process::Command::new("busctl")
        .arg(format!("--address={}", bus.address()))
        .args([
            "call",
            "org.netadm.Netadm1",
            "/org/netadm/Netadm1",
            "org.netadm.Netadm1",
            "DeleteAggr",
            "sb",
            "nosuch0",
            "false",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn restart_brings_back_persistent_objects_and_forgets_temporary_ones() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let d = Daemon::start(&bus, &state, &[]);
    json(&bus, &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    json(&bus, &["set-linkprop", "-p", "mtu=9000", "aggr0"]);
    json(&bus, &["create-vnic", "-t", "-l", "aggr0", "vnic9"]);
    json(&bus, &["create-aggr", "-t", "-l", "atl1c0", "aggr1"]);
    json(&bus, &["create-if", "atl1c1"]);
    json(&bus, &["create-addr", "-T", "static", "-a", "198.51.100.7/24", "atl1c1/v4"]);
    assert!(d.stop().success(), "SIGTERM is a clean exit");

    let _d = Daemon::start(&bus, &state, &[]);
    let links = json(&bus, &["show-link"]);
    assert_eq!(rows(&links, "link", "aggr0")[0]["mtu"], 9000);
    assert!(rows(&links, "link", "vnic9").is_empty() && rows(&links, "link", "aggr1").is_empty());
    assert_eq!(
        rows(&json(&bus, &["show-addr"]), "addrobj", "atl1c1/v4")[0]["addr"],
        "198.51.100.7/24"
    );
    let phys = json(&bus, &["show-phys"]);
    assert_eq!(rows(&phys, "link", "i40e0")[0]["rings_started"], 256, "replay started the rings");
    assert_eq!(rows(&phys, "link", "atl1c0")[0]["rings_started"], 0);
}

#[test]
fn kill_9_at_any_moment_never_leaves_a_half_written_config() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    for round in 0..6u32 {
        let d = Daemon::start(&bus, &state, &[]);
        // A stream of persistent mutations in the background ...
        let cli = Cli::new(&bus);
        let writer = std::thread::spawn(move || {
            for i in 0..40 {
                let _ = cli.output(&["create-vnic", "-l", "atl1c2", &format!("vnic{i}")]);
            }
        });
        // ... killed part way through: after a varying number of commands
        // have been answered.
        let wanted = 3 + round as usize * 5;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while json(&bus, &["show-history"]).as_array().unwrap().len() < wanted {
            assert!(std::time::Instant::now() < deadline, "mutations did not progress");
            std::thread::yield_now();
        }
        d.kill9();
        writer.join().unwrap();
        // The state file is whole: the next daemon starts from it.
        let d = Daemon::start(&bus, &state, &[]);
        let vnics = json(&bus, &["show-vnic"]).as_array().unwrap().len();
        assert!(vnics >= wanted, "round {round}: {vnics} VNICs survived, {wanted} were answered");
        // Start the next round from a clean slate.
        for v in json(&bus, &["show-vnic"]).as_array().unwrap() {
            json(&bus, &["delete-vnic", v["link"].as_str().unwrap()]);
        }
        d.stop();
    }
    let leftovers: Vec<_> =
        std::fs::read_dir(&state).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("links.toml")]);
}

#[test]
fn a_corrupt_config_stops_the_daemon_naming_file_and_line() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let f = state.join("links.toml");
    let text = "version = 1\n[aggr.aggr0]\nports = [\"i40e0\"]\nspeed = 3\n";
    std::fs::write(&f, text).unwrap();
    let err = Daemon::start_fails(&bus, &state);
    assert!(err.contains("links.toml") && err.contains(":4:"), "{err}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), text, "left untouched");
}

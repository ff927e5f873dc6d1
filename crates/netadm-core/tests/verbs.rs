//! The core's verbs against the emulated hardware and a real state
//! directory: what each does, and that a refused request changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use netadm_config::{HardwareConfig, Store};
use netadm_core::{Core, CoreError, ErrorKind};
use netadm_rings::Strategy;

mod common;
use common::none;

fn hw() -> HardwareConfig {
    common::hw(16)
}

fn core(dir: &Path) -> Core {
    Core::start(&hw(), Some(Store::open(dir).unwrap()), Strategy::Batched).unwrap()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn rings(c: &Core, device: &str) -> u32 {
    c.hardware().port(device).unwrap().rings_started()
}

/// Everything an operator could observe.
fn observe(c: &Core, dir: &Path) -> (String, Vec<u32>, Option<Vec<u8>>) {
    let running = format!("{:?}", c.running());
    let r = c.hardware().ports().iter().map(|p| p.rings_started()).collect();
    (running, r, std::fs::read(dir.join("links.toml")).ok())
}

/// Runs `f`, which must fail with `kind`, and checks nothing changed.
fn refused(
    c: &Core,
    dir: &Path,
    kind: ErrorKind,
    f: impl FnOnce(&Core) -> Result<netadm_core::Report, CoreError>,
) -> String {
    let before = observe(c, dir);
    let err = f(c).expect_err("must be refused");
    assert_eq!(err.kind, kind, "{}", err.message);
    assert_eq!(observe(c, dir), before, "refused request changed something: {}", err.message);
    err.message
}

#[test]
fn aggregation_lifecycle_drives_the_rings_and_persists() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path());
    let r = c
        .create_aggr("aggr0", &s(&["i40e0", "i40e1"]), "L2,L3", "active", "short", "", false, &none)
        .unwrap();
    assert_eq!(r.counts["rings_started"], 32);
    assert!(r.phases.iter().any(|(n, _)| n == "ring-start"));
    assert!(r.phases.iter().any(|(n, _)| n == "persist"));
    assert_eq!((rings(&c, "i40e0"), rings(&c, "i40e1")), (16, 16));

    let r = c.set_link_prop("aggr0", &props(&[("mtu", "9000")]), false, &none).unwrap();
    assert_eq!((r.counts["rings_stopped"], r.counts["rings_started"]), (32, 32));
    let link = c.show_link().into_iter().find(|l| l.link == "i40e0").unwrap();
    assert_eq!(
        (link.mtu, link.member_of.as_str()),
        (9000, "aggr0"),
        "ports follow the aggregation's MTU"
    );

    c.remove_aggr("aggr0", &s(&["i40e1"]), false, &none).unwrap();
    assert_eq!(rings(&c, "i40e1"), 0, "a removed port stops");
    c.add_aggr("aggr0", &s(&["i40e1"]), false, &none).unwrap();
    assert_eq!(rings(&c, "i40e1"), 16);
    c.modify_aggr("aggr0", "L4", "passive", "long", "2:8:20:1:2:3", false, &none).unwrap();
    let a = &c.show_aggr()[0];
    assert_eq!(
        (a.policy.as_str(), a.lacp_mode.as_str(), a.lacp_timer.as_str(), a.mac.as_str()),
        ("L4", "passive", "long", "2:8:20:1:2:3")
    );

    let saved = std::fs::read_to_string(d.path().join("links.toml")).unwrap();
    assert!(saved.contains("[aggr.aggr0]") && saved.contains("9000"), "{saved}");

    let r = c.delete_aggr("aggr0", false, &none).unwrap();
    assert_eq!(r.counts["rings_stopped"], 32);
    assert_eq!(rings(&c, "i40e0") + rings(&c, "i40e1"), 0);
    assert!(c.hardware().ports().iter().all(|p| p.engine.dma_bytes() == 0));
    assert!(!std::fs::read_to_string(d.path().join("links.toml")).unwrap().contains("aggr0"));
}

#[test]
fn bad_requests_are_typed_and_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path());
    c.create_aggr("aggr0", &s(&["i40e0"]), "", "", "", "", false, &none).unwrap();
    c.create_vnic("vnic0", "aggr0", "auto", 0, &props(&[]), false, &none).unwrap();
    c.create_if("atl1c0", false, &none).unwrap();

    use ErrorKind::*;
    let m = refused(&c, d.path(), NotFound, |c| {
        c.create_aggr("aggr1", &s(&["nope0"]), "", "", "", "", false, &none)
    });
    assert!(m.contains("nope0"), "{m}");
    refused(&c, d.path(), InvalidName, |c| {
        c.create_aggr("1aggr", &s(&["i40e1"]), "", "", "", "", false, &none)
    });
    refused(&c, d.path(), InvalidName, |c| {
        c.create_aggr("aggr", &s(&["i40e1"]), "", "", "", "", false, &none)
    });
    let m = refused(&c, d.path(), Busy, |c| {
        c.create_aggr("aggr1", &s(&["i40e0"]), "", "", "", "", false, &none)
    });
    assert!(m.contains("aggr0"), "names the aggregation: {m}");
    for (aggr, ports, policy, mac, kind) in [
        ("vnic0", &["i40e1"][..], "", "", Exists),
        ("aggr1", &["i40e1"], "L7", "", InvalidArgument),
        ("aggr1", &["i40e1", "i40e1"], "", "", InvalidArgument),
        ("aggr1", &["i40e1", "atl1c1"], "", "", InvalidArgument),
        ("aggr1", &["i40e1"], "", "1:0:0:0:0:1", InvalidArgument),
        ("aggr1", &["atl1c0"], "", "", Busy),
    ] {
        refused(&c, d.path(), kind, |c| {
            c.create_aggr(aggr, &s(ports), policy, "", "", mac, false, &none)
        });
    }
    let m = refused(&c, d.path(), Busy, |c| c.delete_aggr("aggr0", false, &none));
    assert!(m.contains("vnic0"), "names the VNIC: {m}");
    refused(&c, d.path(), InvalidArgument, |c| c.delete_aggr("i40e1", false, &none));
    refused(&c, d.path(), InvalidArgument, |c| {
        c.remove_aggr("aggr0", &s(&["i40e0"]), false, &none)
    });
    refused(&c, d.path(), NotFound, |c| c.remove_aggr("aggr0", &s(&["i40e1"]), false, &none));

    let m = refused(&c, d.path(), InvalidValue, |c| {
        c.set_link_prop("aggr0", &props(&[("mtu", "9711")]), false, &none)
    });
    assert!(m.contains("9711"), "{m}");
    for (link, prop, value, kind) in [
        ("atl1c1", "mtu", "9000", InvalidValue),
        ("aggr0", "mtu", "big", InvalidValue),
        ("i40e0", "mtu", "9000", Busy),
        ("aggr0", "colour", "red", NotFound),
        ("aggr0", "speed", "10", NotSupported),
        ("i40e1", "rx-imt", "10", NotSupported),
        ("atl1c1", "itr", "10", NotSupported),
        ("vnic0", "mtu", "9000", InvalidValue),
    ] {
        refused(&c, d.path(), kind, |c| {
            c.set_link_prop(link, &props(&[(prop, value)]), false, &none)
        });
    }

    for (vnic, over, mac, vid, kind) in [
        ("vnic0", "i40e1", "auto", 0, Exists),
        ("vnic1", "vnic0", "auto", 0, InvalidArgument),
        ("vnic1", "i40e0", "auto", 0, Busy),
        ("vnic1", "i40e1", "auto", 4095, InvalidArgument),
        ("vnic1", "i40e1", "zz", 0, InvalidArgument),
    ] {
        refused(&c, d.path(), kind, |c| {
            c.create_vnic(vnic, over, mac, vid, &props(&[]), false, &none)
        });
    }

    refused(&c, d.path(), Exists, |c| c.create_if("atl1c0", false, &none));
    refused(&c, d.path(), Busy, |c| c.create_if("i40e0", false, &none));
    for (addrobj, ty, addr, kind) in [
        ("atl1c1/v4", "static", "192.0.2.1/24", NotFound),
        ("atl1c0/v4", "static", "192.0.2.1/33", InvalidArgument),
        ("atl1c0/v4", "dhcp", "192.0.2.1/24", InvalidArgument),
        ("atl1c0", "static", "192.0.2.1/24", InvalidName),
    ] {
        refused(&c, d.path(), kind, |c| c.create_addr(addrobj, ty, addr, false, &none));
    }
    c.create_addr("atl1c0/v4", "static", "192.0.2.1/24", false, &none).unwrap();
    refused(&c, d.path(), Exists, |c| {
        c.create_addr("atl1c0/v4b", "static", "192.0.2.1/25", false, &none)
    });
    refused(&c, d.path(), Exists, |c| {
        c.create_addr("atl1c0/v4", "static", "192.0.2.2/24", false, &none)
    });
    refused(&c, d.path(), Busy, |c| c.rename_link("atl1c0", "net0", false, &none));
    refused(&c, d.path(), Exists, |c| c.rename_link("i40e1", "aggr0", false, &none));
    // Every refusal is in the history, with its kind.
    let h = c.history();
    assert!(h.iter().filter(|e| !e.ok).count() >= 30);
    assert!(h.iter().any(|e| e.error.starts_with("Busy: ")));
}

#[test]
fn temporary_changes_do_not_survive_a_restart_and_persistent_ones_do() {
    let d = tempfile::tempdir().unwrap();
    {
        let c = core(d.path());
        c.create_aggr("aggr0", &s(&["i40e0"]), "", "", "", "", false, &none).unwrap();
        c.create_aggr("aggr1", &s(&["i40e1"]), "", "", "", "", true, &none).unwrap();
        c.set_link_prop("aggr0", &props(&[("mtu", "9000")]), true, &none).unwrap();
        c.create_vnic("vnic0", "atl1c0", "random", 42, &props(&[("mtu", "1400")]), false, &none)
            .unwrap();
        c.create_if("vnic0", false, &none).unwrap();
        c.create_addr("vnic0/v6", "static", "2001:db8::1/64", false, &none).unwrap();
        c.create_if("atl1c1", true, &none).unwrap();
        c.rename_link("i40e1", "net1", true, &none).unwrap();
        let r = c.set_link_prop("aggr1", &props(&[("xmit-batch", "off")]), false, &none).unwrap();
        assert!(r.notes.iter().any(|n| n.contains("temporary")), "{:?}", r.notes);
        // A persistent object may not be built on a temporary one.
        let e = c.create_vnic("vnic1", "aggr1", "auto", 0, &props(&[]), false, &none).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound, "{}", e.message);
        assert!(e.message.contains("-t"), "{}", e.message);
    }
    let c = core(d.path());
    let links: Vec<String> = c.show_link().into_iter().map(|l| l.link).collect();
    assert!(links.contains(&"aggr0".to_string()) && links.contains(&"vnic0".to_string()));
    assert!(!links.contains(&"aggr1".to_string()), "temporary aggregation is gone");
    assert!(links.contains(&"i40e1".to_string()), "temporary rename is gone");
    assert_eq!(
        c.show_link().iter().find(|l| l.link == "aggr0").unwrap().mtu,
        1500,
        "temporary MTU is gone"
    );
    assert_eq!(c.show_link().iter().find(|l| l.link == "vnic0").unwrap().mtu, 1400);
    assert_eq!(c.show_vnic()[0].vid, 42);
    assert_eq!(c.show_if().len(), 1);
    assert_eq!(c.show_addr()[0].addr, "2001:db8::1/64");
    assert_eq!(rings(&c, "i40e0"), 16, "the replayed aggregation runs");
    assert_eq!(rings(&c, "i40e1"), 0);
    assert_eq!(rings(&c, "atl1c0"), 1, "the port under the replayed VNIC runs");
}

#[test]
fn a_failed_save_puts_the_hardware_back() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let c = core(&state);
    // Replace the state directory with a file: every save now fails.
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::write(&state, b"not a directory").unwrap();
    let err =
        c.create_aggr("aggr0", &s(&["i40e0", "i40e1"]), "", "", "", "", false, &none).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Persistence, "{}", err.message);
    assert_eq!(
        rings(&c, "i40e0") + rings(&c, "i40e1"),
        0,
        "rings started for the failed create are stopped again"
    );
    assert!(c.show_aggr().is_empty());
    // A temporary change needs no save, so it still works.
    c.create_aggr("aggr0", &s(&["i40e0"]), "", "", "", "", true, &none).unwrap();
}

#[test]
fn a_corrupt_state_file_stops_start_with_file_and_line_and_is_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("links.toml");
    let text = "version = 1\n\n[aggr.aggr0]\nports = [\"i40e0\"]\ncolour = \"red\"\n";
    std::fs::write(&f, text).unwrap();
    let err =
        Core::start(&hw(), Some(Store::open(d.path()).unwrap()), Strategy::Batched).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Persistence);
    assert!(err.message.contains("links.toml") && err.message.contains(":5:"), "{}", err.message);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), text);
    // Valid TOML that does not fit the hardware is refused the same way.
    let text = "version = 1\n\n[aggr.aggr0]\nports = [\"i40e7\"]\n";
    std::fs::write(&f, text).unwrap();
    let err =
        Core::start(&hw(), Some(Store::open(d.path()).unwrap()), Strategy::Batched).unwrap_err();
    assert!(err.message.contains("links.toml") && err.message.contains("i40e7"), "{}", err.message);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), text);
}

#[test]
fn interrupt_moderation_properties_are_kept_reset_and_shown_per_driver_class() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path());
    c.set_link_prop("atl1c0", &props(&[("rx-imt", "10"), ("tx-imt", "200")]), false, &none)
        .unwrap();
    let shown = c.show_link_prop("atl1c0", &s(&["rx-imt", "tx-imt", "mtu"])).unwrap();
    let val = |p: &str| shown.iter().find(|x| x.property == p).unwrap().value.clone();
    assert_eq!(
        (val("rx-imt"), val("tx-imt"), val("mtu")),
        ("10".into(), "200".into(), "1500".into())
    );
    let all = c.show_link_prop("i40e0", &[]).unwrap();
    assert!(all.iter().any(|p| p.property == "itr") && !all.iter().any(|p| p.property == "rx-imt"));
    let mtu = all.iter().find(|p| p.property == "mtu").unwrap();
    assert_eq!(
        (mtu.perm.as_str(), mtu.default.as_str(), mtu.possible.as_str()),
        ("rw", "1500", "68-9710")
    );
    c.reset_link_prop("atl1c0", &[], false, &none).unwrap();
    assert_eq!(c.show_link_prop("atl1c0", &s(&["rx-imt"])).unwrap()[0].value, "adaptive");
}

#[test]
fn rxrings_on_a_port_sets_how_many_rings_run() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path());
    c.create_if("i40e0", false, &none).unwrap();
    assert_eq!(rings(&c, "i40e0"), 16);
    let r = c.set_link_prop("i40e0", &props(&[("rxrings", "4")]), false, &none).unwrap();
    assert_eq!(r.counts["rings_stopped"], 12);
    assert_eq!(rings(&c, "i40e0"), 4);
    let eff = c.show_link_prop("i40e0", &s(&["rxrings-effective", "rxrings-available"])).unwrap();
    assert_eq!((eff[0].value.as_str(), eff[1].value.as_str()), ("4", "12"));
    // An MTU change reprograms only the running rings.
    let r = c.set_link_prop("i40e0", &props(&[("mtu", "9000")]), false, &none).unwrap();
    assert_eq!(r.counts["rings_started"], 4);
    c.set_link_prop("i40e0", &props(&[("rxrings", "8")]), false, &none).unwrap();
    assert_eq!(rings(&c, "i40e0"), 8);
    c.reset_link_prop("i40e0", &s(&["rxrings"]), false, &none).unwrap();
    assert_eq!(rings(&c, "i40e0"), 16);
    let e = c.set_link_prop("i40e0", &props(&[("rxrings", "17")]), false, &none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidValue);
    let e = c.set_link_prop("atl1c0", &props(&[("rxrings", "1")]), false, &none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotSupported);
    c.create_vnic("vnic0", "i40e1", "auto", 0, &props(&[]), false, &none).unwrap();
    // A VNIC's ring group comes out of its port's 16 rings, leaving one.
    let e = c.set_link_prop("vnic0", &props(&[("rxrings", "16")]), false, &none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidValue, "{}", e.message);
    c.set_link_prop("vnic0", &props(&[("rxrings", "4")]), false, &none).unwrap();
    assert_eq!(rings(&c, "i40e1"), 16, "12 primary + 4 for vnic0");
    let eff = c.show_link_prop("vnic0", &s(&["rxrings-effective"])).unwrap();
    assert_eq!(eff[0].value, "4");
}

#[test]
fn interrupt_moderation_is_adaptive_by_default_and_fixed_values_take_it_back() {
    use netadm_rings::moderation::Level;
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path());
    c.create_vnic("vnic0", "i40e0", "auto", 0, &props(&[]), false, &none).unwrap();
    c.create_vnic("vnic1", "atl1c0", "auto", 0, &props(&[]), false, &none).unwrap();
    let engine = |dev: &str| c.hardware().port(dev).unwrap().engine.clone();
    let (i40e, atl1c) = (engine("i40e0"), engine("atl1c0"));
    let rx = netadm_atl1c::hw::RX_VECTOR;
    let tx = netadm_atl1c::hw::TX_VECTOR;
    // Idle ports start with no throttle; atl1c's tx-imt stays fixed.
    assert_eq!(i40e.adaptive_level(0), Some(Level::Latency));
    assert_eq!(atl1c.adaptive_level(rx), Some(Level::Latency));
    assert_eq!(atl1c.adaptive_level(tx), None);
    let shown = |dev: &str, p: &str| c.show_link_prop(dev, &s(&[p])).unwrap()[0].value.clone();
    assert_eq!(shown("i40e0", "itr"), "adaptive");

    c.set_link_prop("i40e0", &props(&[("itr", "20")]), false, &none).unwrap();
    c.set_link_prop("atl1c0", &props(&[("rx-imt", "200")]), false, &none).unwrap();
    assert_eq!(i40e.adaptive_level(0), None, "a fixed itr is the driver's no more");
    assert_eq!(atl1c.adaptive_level(rx), None);
    assert_eq!(shown("i40e0", "itr"), "20");

    c.set_link_prop("i40e0", &props(&[("itr", "adaptive")]), false, &none).unwrap();
    assert!(i40e.adaptive_level(0).is_some());
    refused(&c, d.path(), ErrorKind::InvalidValue, |c| {
        c.set_link_prop("i40e0", &props(&[("itr", "auto")]), false, &none)
    });
}

#[test]
fn a_mac_in_use_on_the_same_ports_is_refused_until_its_vnic_goes() {
    let dir = tempfile::tempdir().unwrap();
    let c = core(dir.path());
    let mac = "2:8:20:1:2:3";
    c.create_vnic("vnic0", "i40e0", mac, 0, &props(&[]), false, &none).unwrap();
    c.create_vnic("vnic1", "i40e0", "random", 0, &props(&[]), true, &none).unwrap();
    let e = c.create_vnic("vnic2", "i40e0", mac, 0, &props(&[]), false, &none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Exists, "{}", e.message);
    assert!(e.message.contains("used by VNIC vnic0"), "{}", e.message);
    // Other ports: the same MAC is fine there.
    c.create_vnic("vnic3", "i40e1", mac, 0, &props(&[]), false, &none).unwrap();
    c.delete_vnic("vnic0", false, &none).unwrap();
    c.create_vnic("vnic2", "i40e0", mac, 0, &props(&[]), false, &none).unwrap();
    // vnic3 still holds it on i40e1.
    let e = c.create_vnic("vnic4", "i40e1", mac, 0, &props(&[]), true, &none).unwrap_err();
    assert!(e.message.contains("used by VNIC vnic3"), "{}", e.message);
    // Factory addresses: the first one free, after one in the middle went.
    for f in ["f0", "f1", "f2"] {
        c.create_vnic(&format!("{f}0"), "atl1c0", "factory", 0, &props(&[]), false, &none).unwrap();
    }
    c.delete_vnic("f10", false, &none).unwrap();
    c.create_vnic("f30", "atl1c0", "factory", 0, &props(&[]), false, &none).unwrap();
    let st = c.running();
    let mac_of = |n: &str| st.vnic.get(n).unwrap().mac;
    let macs: std::collections::BTreeSet<_> = ["f00", "f20", "f30"].map(mac_of).into();
    assert_eq!(macs.len(), 3, "factory addresses are distinct: {macs:?}");
}

#[test]
fn protection_properties_are_typed_persisted_shown_and_refused_when_bad() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path());
    let p = props(&[
        ("protection", "ip-nospoof,mac-nospoof"),
        ("allowed-ips", "192.0.2.0/24,2001:db8::1"),
    ]);
    c.create_vnic("pv0", "i40e0", "", 0, &p, false, &none).unwrap();
    let shown =
        c.show_link_prop("pv0", &s(&["protection", "allowed-ips", "allowed-dhcp-cids"])).unwrap();
    let val = |p: &str| shown.iter().find(|x| x.property == p).unwrap().value.clone();
    assert_eq!(val("protection"), "mac-nospoof,ip-nospoof", "shown in dladm's order");
    assert_eq!(val("allowed-ips"), "192.0.2.0/24,2001:db8::1");
    let toml = std::fs::read_to_string(d.path().join("links.toml")).unwrap();
    assert!(toml.contains(r#"protection = "mac-nospoof,ip-nospoof""#), "{toml}");
    for (prop, bad) in [
        ("protection", "mac-nospoof,spoof"),
        ("protection", "mac-nospoof,mac-nospoof"),
        ("allowed-ips", "192.0.2.1/24"),
        ("allowed-ips", "192.0.2.300"),
        ("allowed-dhcp-cids", "0x123"),
    ] {
        let m = refused(&c, d.path(), ErrorKind::InvalidValue, |c| {
            c.set_link_prop("pv0", &props(&[(prop, bad)]), false, &none)
        });
        assert!(m.contains(prop), "{prop}={bad}: {m}");
    }
    let m = refused(&c, d.path(), ErrorKind::NotSupported, |c| {
        c.set_link_prop("i40e0", &props(&[("protection", "restricted")]), false, &none)
    });
    assert!(m.contains("does not apply to phys"), "{m}");
    drop(c);
    let c = core(d.path());
    assert_eq!(
        c.show_link_prop("pv0", &s(&["protection"])).unwrap()[0].value,
        "mac-nospoof,ip-nospoof"
    );
    c.reset_link_prop("pv0", &s(&["protection"]), false, &none).unwrap();
    assert_eq!(
        c.show_link_prop("pv0", &s(&["protection"])).unwrap()[0].value,
        "--",
        "unset, as dladm shows it"
    );
}

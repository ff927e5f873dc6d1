//! `netadm __complete KIND`, which the shell completions call (the
//! scripts themselves are tested in `cli/src/generate.rs`): the names
//! netadmd has of each kind, one a line, sorted; nothing, and success,
//! for a kind it does not know or when no netadmd answers.

use netadm_testkit::*;

fn names(bus: &Bus, kind: &str) -> String {
    text(bus, &["__complete", kind])
}

#[test]
fn completions_get_the_names_netadmd_has() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let d = Daemon::start(&bus, &state, &[]);
    for args in [
        &["create-vnic", "-l", "i40e0", "vnic0"][..],
        &["create-aggr", "-l", "atl1c0", "-l", "atl1c1", "aggr0"],
        &["create-vlan", "-l", "i40e1", "-v", "5", "vlan5"],
        &["create-etherstub", "stub0"],
        &["create-if", "vnic0"],
        &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "vnic0/v4"],
    ] {
        json(&bus, args);
    }
    assert_eq!(
        names(&bus, "links"),
        "aggr0\natl1c0\natl1c1\natl1c2\natl1c3\ni40e0\ni40e1\nstub0\nvlan5\nvnic0\n"
    );
    assert_eq!(names(&bus, "phys"), "atl1c0\natl1c1\natl1c2\natl1c3\ni40e0\ni40e1\n");
    assert_eq!(names(&bus, "aggrs"), "aggr0\n");
    assert_eq!(names(&bus, "vnics"), "vnic0\n");
    assert_eq!(names(&bus, "vlans"), "vlan5\n");
    assert_eq!(names(&bus, "etherstubs"), "stub0\n");
    assert_eq!(names(&bus, "ifs"), "vnic0\n");
    assert_eq!(names(&bus, "addrobjs"), "vnic0/v4\n");
    assert_eq!(names(&bus, "protos"), "ipv4\nipv6\ntcp\n");
    let props = names(&bus, "props");
    assert!(props.lines().any(|p| p == "mtu") && props.lines().any(|p| p == "maxbw"), "{props}");
    assert_eq!(names(&bus, "nosuchkind"), "");

    // No daemon: nothing, and success (a completion never gets in the way).
    drop(d);
    let out = netadm(&bus, &["__complete", "links"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

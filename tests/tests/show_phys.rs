//! The show verbs issue 26 added, end to end on a real bus:
//! `show-phys -m` (LINK SLOT ADDRESS INUSE CLIENT), `show-phys -L` (LINK
//! DEVICE LOCATION) and `show-ether` (LINK PTYPE STATE AUTO SPEED-DUPLEX
//! PAUSE, `-x` for capable/adv/peeradv), as tables, `-p -o` and `--json`,
//! under netadm's names and dladm's (`--mac`, `--extended`), with typed
//! errors for a name that is no physical link. Emulated ports first (the
//! default hardware: no location, one speed, no autonegotiation, no PAUSE
//! frames); then kernel ports over veth devices in a namespace of the
//! test's own (root): autonegotiation as ethtool says, and no bus address
//! (a veth has none).

use netadm_testkit::*;

#[test]
fn mac_slots_locations_and_ethernet_settings_of_emulated_ports() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let _d = Daemon::start(&bus, &state, &[]);
    json(&bus, &["create-aggr", "-l", "atl1c0", "-l", "atl1c1", "aggr0"]);
    json(&bus, &["create-if", "i40e1"]);
    json(&bus, &["create-vnic", "-l", "i40e0", "-m", "factory", "f0"]);
    json(&bus, &["create-vnic", "-l", "i40e0", "-m", "factory", "f1"]);
    json(&bus, &["create-vnic", "-l", "i40e0", "auto0"]);

    // -m: the primary address of every port, who uses it, and the factory
    // addresses VNICs hold, numbered from 1; an auto MAC holds no slot.
    let m = text(&bus, &["show-phys", "-m", "-p", "-o", "link,slot,inuse,client"]);
    let lines: Vec<&str> = m.lines().collect();
    assert_eq!(
        lines,
        [
            "i40e0:primary:no:--",
            "i40e0:1:yes:f0",
            "i40e0:2:yes:f1",
            "i40e1:primary:yes:i40e1",
            "atl1c0:primary:yes:aggr0",
            "atl1c1:primary:yes:aggr0",
            "atl1c2:primary:no:--",
            "atl1c3:primary:no:--",
        ]
    );
    let v = json(&bus, &["show-phys", "-m", "i40e0"]);
    let f0 = &rows(&v, "client", "f0")[0];
    assert_eq!(f0["inuse"], true, "{v}");
    let vnic = json(&bus, &["show-vnic", "f0"]);
    assert_eq!(f0["address"], vnic[0]["macaddress"], "the slot is the VNIC's address");
    let table = text(&bus, &["show-phys", "-m", "atl1c2"]);
    assert!(table.starts_with("LINK   SLOT    ADDRESS"), "{table}");
    assert!(table.contains("INUSE CLIENT"), "{table}");

    // -L: an emulated port has no location.
    assert_eq!(
        text(&bus, &["show-phys", "-L", "-p", "-o", "link,device,location", "i40e0"]),
        "i40e0:i40e0:--\n"
    );

    // show-ether: the port's one speed, full duplex, no autonegotiation,
    // no PAUSE frames; -x adds what it can run at and advertises.
    assert_eq!(
        text(&bus, &["show-ether", "-p", "-o", "link,ptype,state,auto,speed-duplex,pause"]),
        "i40e0:current:up:no:40G-f:none\ni40e1:current:up:no:40G-f:none\n\
         atl1c0:current:up:no:1G-f:none\natl1c1:current:up:no:1G-f:none\n\
         atl1c2:current:up:no:1G-f:none\natl1c3:current:up:no:1G-f:none\n"
    );
    let x = text(&bus, &["show-ether", "-x", "atl1c0"]);
    assert_eq!(
        x,
        "LINK   PTYPE   STATE AUTO SPEED-DUPLEX PAUSE\n\
         atl1c0 current up    no   1G-f         none\n\
         --     capable --    no   1G-f         none\n\
         --     adv     --    no   --           none\n\
         --     peeradv --    --   --           none\n"
    );
    let j = json(&bus, &["show-ether", "-x", "atl1c0"]);
    assert_eq!(j.as_array().unwrap().len(), 4);
    assert_eq!(j[1]["link"], "atl1c0", "JSON names the link on every line: {j}");
    assert_eq!(j[0]["speed-duplex"], "1G-f");
    json(&bus, &["cut-cable", "atl1c0"]);
    assert_eq!(text(&bus, &["show-ether", "-p", "-o", "state", "atl1c0"]), "down\n");

    // Names that are no physical link.
    for args in
        [&["show-ether", "aggr0"][..], &["show-ether", "nosuch0"], &["show-phys", "-m", "f0"]]
    {
        let (kind, msg) = json_err(&bus, args);
        assert_eq!(kind, "NotFound", "{args:?}: {msg}");
    }
    let both = netadm(&bus, &["show-phys", "-m", "-L"]);
    assert_eq!(both.status.code(), Some(2), "one mode at a time: a usage error");

    // dladm: the same verbs under illumos's names and long options.
    let dir = tempfile::tempdir().unwrap();
    let dladm = Cli::with(illumos_links(dir.path()).join("dladm"), bus.address());
    let dladm = |args: &[&str]| dladm.run(args).unwrap();
    assert_eq!(
        dladm(&["show-ether", "--extended", "--parsable", "--output=ptype", "i40e0"]),
        "current\ncapable\nadv\npeeradv\n"
    );
    assert_eq!(
        dladm(&["show-phys", "--mac", "-p", "-o", "slot,client", "i40e1"]),
        "primary:i40e1\n"
    );
}

/// Kernel ports over veth devices: what ethtool says of autonegotiation,
/// the speed and duplex the kernel reports, and no location (a veth is on
/// no bus).
#[test]
fn kernel_ports_say_what_the_kernel_says() {
    let Some([a, b]) = namespaces(&["ethtool"], "sp", ["a", "b"]) else { return };
    veth((a.name(), "nic0"), (b.name(), "far0")).unwrap();
    for (ns, dev) in [(&a, "nic0"), (&b, "far0")] {
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
    let bus = Bus::start();
    let dir = bus.subdir("kernel");
    let _d = Daemon::builder(&bus, dir.join("state"))
        .netns(a.name())
        .hardware(&fixtures::kernel(&["nic0"]))
        .start();
    assert_eq!(
        text(&bus, &["show-phys", "-L", "-p", "-o", "link,device,location"]),
        "net0:net0:--\n"
    );
    let ethtool = a.exec(&["ethtool", "nic0"]).unwrap();
    let auto = if ethtool.contains("Auto-negotiation: on") { "yes" } else { "no" };
    let e = json(&bus, &["show-ether", "net0"]);
    assert_eq!(e[0]["auto"], auto, "ethtool said:\n{ethtool}\nshow-ether: {e}");
    let speed = ethtool.lines().find_map(|l| l.trim().strip_prefix("Speed: ")).unwrap_or("");
    if speed == "10000Mb/s" {
        assert_eq!(e[0]["speed-duplex"], "10G-f", "{e}");
    }
    // What it cannot say yet is unknown (empty; `--` in tables), not made
    // up.
    let x = json(&bus, &["show-ether", "-x", "net0"]);
    assert_eq!(x[1]["ptype"], "capable");
    assert_eq!(x[1]["speed-duplex"], "", "{x}");
    assert_eq!(x[0]["pause"], "", "{x}");
    assert_eq!(text(&bus, &["show-ether", "-p", "-o", "pause", "net0"]), "--\n");
}

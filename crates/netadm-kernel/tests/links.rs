//! Links against the real kernel, in scratch namespaces: `host` plays the
//! machine (a veth pair `nic0`/`nic0p` is its "NIC"), `zone` a zone.
//! Every read-back is checked against `ip -d link` too.

use netadm_kernel::{
    BondMode, BondSpec, KernelError, LacpRate, LinkKind, MacVlanMode, Netlink, NewLink,
    XmitHashPolicy,
};

mod common;
use common::{Scratch, pair, skip};

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x01];

/// The test's `host` namespace, a connection in it and its NIC's index;
/// `None` when the test is skipped.
fn host(tag: &str) -> Option<(Scratch, Netlink, u32)> {
    if skip() {
        return None;
    }
    let h = Scratch::new(tag);
    let nl = h.netlink();
    let nic0 = nic(&nl);
    Some((h, nl, nic0))
}

/// A "NIC" in `host`: veth `nic0`, up, its peer `nic0p` up beside it.
fn nic(host: &Netlink) -> u32 {
    host.add_veth("nic0", "nic0p", &NewLink { up: true, ..Default::default() }, None).unwrap();
    let peer = host.index("nic0p").unwrap();
    assert!(!host.link_detail(peer).unwrap().up, "a peer is made down");
    host.set_link(peer, Some(true), None).unwrap();
    let nic0 = host.index("nic0").unwrap();
    common::wait_up(host, nic0);
    nic0
}

#[test]
fn macvlans_over_a_nic_are_made_in_bridge_mode_straight_into_a_zone_and_read_back() {
    let Some((h, z)) = pair("mv") else { return };
    let (host, zone, zns) = (h.netlink(), z.netlink(), z.open());
    let nic0 = nic(&host);

    let opts = NewLink { mac: Some(MAC), mtu: Some(1400), group: Some(7), up: true };
    host.add_macvlan("vn0", nic0, &opts, Some(&zns)).unwrap();
    assert!(matches!(host.index("vn0"), Err(KernelError::NotFound { .. })), "made in the zone");
    let l = zone.link_named("vn0").unwrap();
    assert_eq!(l.kind, Some(LinkKind::MacVlan));
    assert_eq!(l.macvlan_mode, Some(MacVlanMode::Bridge));
    assert_eq!((l.mtu, l.group, l.mac, l.up), (1400, 7, Some(MAC), true));
    assert_eq!(l.lower, Some(nic0), "its lower device, in the host");
    assert!(l.link_netnsid.is_some(), "which is in another namespace");
    assert_eq!(zone.link_detail(l.index).unwrap(), l);
    let ip = z.ip(&["-d", "link", "show", "vn0"]);
    assert!(ip.contains("macvlan mode bridge") && ip.contains("mtu 1400"), "{ip}");
    assert!(ip.contains("group 7") && ip.contains("02:00:00:00:0a:01"), "{ip}");

    // Made here, then moved; a name taken in the zone is Exists.
    host.add_macvlan("vn1", nic0, &NewLink::default(), None).unwrap();
    let vn1 = host.link_named("vn1").unwrap();
    assert_eq!((vn1.up, vn1.group, vn1.lower), (false, 0, Some(nic0)));
    assert_ne!(vn1.mac, Some(MAC), "a MAC of the kernel's own");
    host.move_to(vn1.index, &zns).unwrap();
    assert!(zone.link_named("vn1").is_ok() && host.link_named("vn1").is_err());
    host.add_macvlan("vn0", nic0, &NewLink::default(), None).unwrap();
    let again = host.index("vn0").unwrap();
    let e = host.move_to(again, &zns).unwrap_err();
    assert!(matches!(e, KernelError::Exists { .. }), "{e}");
    assert!(host.link_named("vn0").is_ok(), "the refused move left it here");

    // Above the lower device's MTU: refused, with nothing made.
    let big = NewLink { mtu: Some(1600), ..Default::default() };
    let e = host.add_macvlan("vn2", nic0, &big, None).unwrap_err();
    assert!(
        matches!(&e, KernelError::Refused { source, .. } if source.raw_os_error() == Some(libc::EINVAL)),
        "{e}"
    );
    assert!(host.link_named("vn2").is_err());
    // The same name twice.
    let e = host.add_macvlan("vn0", nic0, &NewLink::default(), None).unwrap_err();
    assert!(matches!(e, KernelError::Exists { .. }), "{e}");
    // A lower device that does not exist.
    let e = host.add_macvlan("vn3", 999_999, &NewLink::default(), None).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "{e}");

    // Deleting the lower device deletes its macvlans, in the zone too.
    host.del_link(nic0).unwrap();
    assert!(zone.link_named("vn0").is_err() && zone.link_named("vn1").is_err());
}

#[test]
fn a_veth_pair_takes_one_mtu_and_its_peer_can_start_in_a_zone() {
    let Some((h, z)) = pair("ve") else { return };
    let (host, zone) = (h.netlink(), z.netlink());
    let opts = NewLink { mtu: Some(9000), mac: Some(MAC), ..Default::default() };
    host.add_veth("ve0", "ve0p", &opts, Some(&z.open())).unwrap();
    let (a, b) = (host.link_named("ve0").unwrap(), zone.link_named("ve0p").unwrap());
    assert_eq!((a.kind.clone(), b.kind.clone()), (Some(LinkKind::Veth), Some(LinkKind::Veth)));
    assert_eq!((a.mtu, b.mtu, a.mac, a.up, b.up), (9000, 9000, Some(MAC), false, false));
    assert_eq!((a.lower, b.lower), (Some(b.index), Some(a.index)), "each names its peer");
    assert!(a.max_mtu.is_some_and(|m| m >= 9000) && a.min_mtu.is_some());
    assert!(z.ip(&["link", "show", "ve0p"]).contains("mtu 9000"));
    // A peer name taken: nothing is made.
    host.add_veth("ve1", "ve1p", &NewLink::default(), None).unwrap();
    let e = host.add_veth("ve2", "ve1p", &NewLink::default(), None).unwrap_err();
    assert!(matches!(e, KernelError::Exists { .. }), "{e}");
    assert!(host.link_named("ve2").is_err());
    // Deleting one end deletes the pair.
    host.del_link(a.index).unwrap();
    assert!(zone.link_named("ve0p").is_err());
}

#[test]
fn a_bridge_is_made_down_with_stp_off_and_takes_and_releases_ports() {
    if skip() {
        return;
    }
    let h = Scratch::new("br");
    let host = h.netlink();
    host.add_bridge("es0", &NewLink::default()).unwrap();
    let br = host.link_named("es0").unwrap();
    assert_eq!((br.kind.clone(), br.up, br.stp), (Some(LinkKind::Bridge), false, Some(false)));
    assert!(h.ip(&["-d", "link", "show", "es0"]).contains("stp_state 0"));
    host.add_bridge("es1", &NewLink { up: true, ..Default::default() }).unwrap();
    assert!(host.link_named("es1").unwrap().up, "up when asked");

    host.add_veth("vs0", "vs0b", &NewLink { up: true, ..Default::default() }, None).unwrap();
    let port = host.index("vs0b").unwrap();
    host.set_master(port, Some(br.index)).unwrap();
    assert_eq!(host.link_detail(port).unwrap().master, Some(br.index));
    assert!(h.ip(&["link", "show", "vs0b"]).contains("master es0"));
    host.set_master(port, None).unwrap();
    assert_eq!(host.link_detail(port).unwrap().master, None);
    // A master that does not exist.
    let e = host.set_master(port, Some(999_999)).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. } | KernelError::Refused { .. }), "{e}");
    assert_eq!(host.link_detail(port).unwrap().master, None);

    // The active port is a bond's: on a bridge it is refused up front.
    let e = host.set_active_port(br.index, port).unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    let e = host.set_active_port(999_999, port).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "{e}");
}

#[test]
fn a_group_of_links_is_deleted_in_one_request() {
    let Some((h, host, nic0)) = host("grp") else { return };
    for n in ["g0", "g1", "g2"] {
        host.add_macvlan(n, nic0, &NewLink { group: Some(9), ..Default::default() }, None).unwrap();
    }
    host.add_macvlan("g3", nic0, &NewLink::default(), None).unwrap();
    let g3 = host.index("g3").unwrap();
    host.set_group(g3, 9).unwrap();
    assert_eq!(host.link_detail(g3).unwrap().group, 9);
    host.add_macvlan("keep", nic0, &NewLink { group: Some(8), ..Default::default() }, None)
        .unwrap();

    host.del_group(9).unwrap();
    let names: Vec<String> = host.links().unwrap().into_iter().map(|l| l.name).collect();
    assert!(names.iter().all(|n| !n.starts_with('g')), "{names:?}");
    assert!(names.contains(&"keep".to_string()), "another group stays: {names:?}");
    let e = host.del_group(9).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "an empty group: {e}");
    let before = h.state();
    let e = host.del_group(0).unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    assert_eq!(h.state(), before);
}

#[test]
fn every_link_is_listed_with_its_kind() {
    let Some((h, host, nic0)) = host("dump") else { return };
    host.add_macvlan("vn0", nic0, &NewLink::default(), None).unwrap();
    host.add_bridge("es0", &NewLink::default()).unwrap();
    host.add_ifb("ifb9", &NewLink::default()).unwrap();
    let all = host.links().unwrap();
    let kind = |n: &str| all.iter().find(|l| l.name == n).map(|l| l.kind.clone());
    assert_eq!(kind("lo"), Some(None), "loopback has no kind");
    assert_eq!(kind("nic0"), Some(Some(LinkKind::Veth)));
    assert_eq!(kind("vn0"), Some(Some(LinkKind::MacVlan)));
    assert_eq!(kind("es0"), Some(Some(LinkKind::Bridge)));
    assert_eq!(kind("ifb9"), Some(Some(LinkKind::Ifb)));
    let ip = h.ip(&["-o", "link", "show"]);
    assert_eq!(all.len(), ip.lines().count(), "as many as ip lists:\n{ip}");
}

/// A dump longer than one read of the request socket (150 macvlans, about
/// 200 KiB of answers against a 64 KiB buffer) comes back whole, in order
/// with what `ip` lists, and the socket answers the next request as
/// before.
#[test]
fn a_dump_longer_than_one_read_lists_every_link() {
    let Some((h, host, nic0)) = host("big") else { return };
    let names: Vec<String> = (0..150).map(|i| format!("mv{i}")).collect();
    let many: Vec<(&str, u32, NewLink)> =
        names.iter().map(|n| (n.as_str(), nic0, NewLink::default())).collect();
    host.add_macvlans(&many).unwrap();
    let all = host.links().unwrap();
    let ip = h.ip(&["-o", "link", "show"]);
    assert_eq!(all.len(), ip.lines().count(), "as many as ip lists:\n{ip}");
    for n in &names {
        assert!(all.iter().any(|l| &l.name == n), "{n} is listed");
    }
    assert_eq!(host.link_counters().unwrap().len(), all.len(), "the counters' dump too");
    assert_eq!(host.link_named("mv149").unwrap().kind, Some(LinkKind::MacVlan));
}

/// A bond or VLAN: on this machine's kernel (no `bonding`, no `8021q`)
/// the request is NotSupported naming the module and changes nothing; on
/// one that has them it is made and read back as asked.
#[test]
fn bonds_and_vlans_are_made_or_not_supported_naming_the_module() {
    let Some((h, host, nic0)) = host("bond") else { return };
    let specs = [
        BondSpec {
            mode: BondMode::Lacp,
            xmit_hash_policy: Some(XmitHashPolicy::Layer34),
            lacp_rate: Some(LacpRate::Fast),
            miimon: Some(100),
            min_links: Some(1),
            lacp_active: Some(true),
        },
        BondSpec { miimon: Some(50), ..BondSpec::new(BondMode::ActiveBackup) },
        BondSpec {
            xmit_hash_policy: Some(XmitHashPolicy::Layer23),
            ..BondSpec::new(BondMode::BalanceXor)
        },
    ];
    for spec in specs {
        let before = h.state();
        match host.add_bond("bond0", &spec, &NewLink::default()) {
            Err(KernelError::NotSupported { module, what }) => {
                assert_eq!(module, "bonding", "{what}");
                assert_eq!(h.state(), before, "nothing changed");
                assert!(host.link_named("bond0").is_err());
            }
            Ok(()) => {
                let b = host.link_named("bond0").unwrap();
                let s = b.bond.clone().unwrap();
                assert_eq!(b.kind, Some(LinkKind::Bond));
                assert_eq!(s.mode, Some(spec.mode));
                assert!(spec.miimon.is_none() || s.miimon == spec.miimon);
                assert!(spec.lacp_rate.is_none() || s.lacp_rate == spec.lacp_rate);
                assert!(spec.min_links.is_none() || s.min_links == spec.min_links);
                host.del_link(b.index).unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    let before = h.state();
    match host.add_vlan("nic0.10", nic0, 10, &NewLink::default()) {
        Err(KernelError::NotSupported { module, .. }) => {
            assert_eq!(module, "8021q");
            assert_eq!(h.state(), before, "nothing changed");
            assert!(host.link_named("nic0.10").is_err());
        }
        Ok(()) => {
            let v = host.link_named("nic0.10").unwrap();
            assert_eq!((v.kind, v.vlan_id, v.lower), (Some(LinkKind::Vlan), Some(10), Some(nic0)));
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn bad_requests_are_refused_before_the_kernel_and_change_nothing() {
    let Some((h, host, nic0)) = host("bad") else { return };
    let before = h.state();
    let none = NewLink::default();
    let e = host.add_macvlan("much_too_long_name0", nic0, &none, None).unwrap_err();
    assert!(matches!(e, KernelError::BadName { .. }), "{e}");
    let e = host.add_veth("a b", "ok", &none, None).unwrap_err();
    assert!(matches!(e, KernelError::BadName { .. }), "{e}");
    for vid in [0, 4095] {
        let e = host.add_vlan("v0", nic0, vid, &none).unwrap_err();
        assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    }
    let multicast = NewLink { mac: Some([1, 0, 0x5e, 0, 0, 1]), ..Default::default() };
    let e = host.add_macvlan("vn0", nic0, &multicast, None).unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    let spec =
        BondSpec { lacp_rate: Some(LacpRate::Fast), ..BondSpec::new(BondMode::ActiveBackup) };
    let e = host.add_bond("bond0", &spec, &none).unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    assert_eq!(h.state(), before);
}

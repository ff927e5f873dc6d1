//! VLAN filters: an i40e-class port's hardware table follows the VIDs over
//! it and refuses, as a typed error that changes nothing, a VID more than
//! it holds; an atl1c-class port (filtering in its driver) has no limit.

use netadm_core::ErrorKind;
use netadm_rings::Strategy;

mod common;
use common::none;

fn table(c: &netadm_core::Core, port: &str) -> Vec<u16> {
    c.hardware().port(port).unwrap().nic().vlan_filter().unwrap_or_else(|e| panic!("{port}: {e}"))
}

#[test]
fn the_i40e_vlan_filter_table_follows_the_vids_and_refuses_one_more_than_it_holds() {
    let c = netadm_core::Core::start(&common::hw(4), None, Strategy::Batched).unwrap();
    let max = netadm_nic::vlan::FILTER_ENTRIES;
    c.create_vnic("vnic0", "i40e0", "auto", 4000, &Default::default(), false, &none).unwrap();
    for vid in 1..max {
        c.create_vlan(&format!("vlan{vid}"), "i40e0", vid, false, &none).unwrap();
    }
    let mut want: Vec<u16> = (1..max).collect();
    want.push(4000);
    assert_eq!(table(&c, "i40e0"), want);
    assert!(table(&c, "i40e1").is_empty());

    // One more VID than the table holds: typed, and nothing changes.
    let before = format!("{:?}", c.running());
    let e = c.create_vlan("vlan999", "i40e0", 999, false, &none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{}", e.message);
    assert!(e.message.contains("VLAN filter table holds 256"), "{}", e.message);
    let e = c.create_vnic("vnic1", "i40e0", "auto", 999, &Default::default(), false, &none);
    assert_eq!(e.unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(format!("{:?}", c.running()), before);
    assert_eq!(table(&c, "i40e0"), want);
    // A VID already in the table (a VNIC beside a VLAN) takes no entry.
    c.create_vnic("vnic2", "i40e0", "auto", 5, &Default::default(), false, &none).unwrap();

    // What goes leaves the table; then there is room again.
    c.delete_vlan("vlan1", false, &none).unwrap();
    assert!(!table(&c, "i40e0").contains(&1));
    c.create_vlan("vlan999", "i40e0", 999, false, &none).unwrap();
    assert!(table(&c, "i40e0").contains(&999));

    // The atl1c-class filters in its driver: no table, no such limit.
    for vid in 1..=max + 1 {
        c.create_vlan(&format!("avlan{vid}"), "atl1c0", vid, false, &none).unwrap();
    }
}

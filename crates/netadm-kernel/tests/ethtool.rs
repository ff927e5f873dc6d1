//! ethtool against the real kernel, each request read back with the
//! `ethtool` command too, on a veth "NIC" in a scratch namespace.

use netadm_kernel::{ChannelCounts, Duplex, Ethtool, KernelError, NewLink, Offload, OffloadState};

mod common;
use common::{Scratch, skip};

/// A namespace with veth `nic0`/`nic0p`, and an ethtool handle in it.
fn setup(tag: &str) -> Option<(Ethtool, Scratch)> {
    if skip() {
        return None;
    }
    let h = Scratch::new(tag);
    let nl = h.netlink();
    nl.add_veth("nic0", "nic0p", &NewLink { up: true, ..Default::default() }, None).unwrap();
    let et = Ethtool::open_in(&h.open()).unwrap();
    Some((et, h))
}

/// `ethtool ARGS` inside the namespace.
fn ethtool(h: &Scratch, args: &[&str]) -> String {
    h.exec(&[&["ethtool"][..], args].concat())
}

/// The line of `ethtool -k nic0` for offload `o`.
fn k_line(h: &Scratch, o: Offload) -> String {
    let out = ethtool(h, &["-k", "nic0"]);
    let prefix = format!("{}:", o.name());
    out.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{out}")).to_owned()
}

#[test]
fn channels_are_read_set_within_their_maxima_and_read_back() {
    let Some((et, h)) = setup("ch") else { return };
    let c = et.channels("nic0").unwrap();
    assert!(c.rx.max >= 1 && c.tx.max >= 1, "a veth has rx and tx queues: {c:?}");
    assert_eq!((c.combined.max, c.other.max), (0, 0), "and no combined or other ones");
    let l = ethtool(&h, &["-l", "nic0"]);
    assert!(l.contains(&format!("RX:\t\t{}", c.rx.max)), "{l}");

    let got = et
        .set_channels("nic0", &ChannelCounts { rx: Some(1), tx: Some(1), ..Default::default() })
        .unwrap();
    assert_eq!((got.rx.count, got.tx.count), (1, 1));
    assert_eq!(et.channels("nic0").unwrap(), got);
    let l = ethtool(&h, &["-l", "nic0"]);
    let current = &l[l.find("Current hardware settings").unwrap()..];
    assert!(current.contains("RX:\t\t1") && current.contains("TX:\t\t1"), "{l}");

    // Beyond a maximum, or a kind the device lacks: refused up front.
    for bad in [
        ChannelCounts { combined: Some(1), ..Default::default() },
        ChannelCounts { rx: Some(c.rx.max + 1), ..Default::default() },
    ] {
        let e = et.set_channels("nic0", &bad).unwrap_err();
        assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
        assert_eq!(et.channels("nic0").unwrap(), got, "nothing changed");
    }
    let back = ChannelCounts { rx: Some(c.rx.count), tx: Some(c.tx.count), ..Default::default() };
    assert_eq!(et.set_channels("nic0", &back).unwrap(), c);
    let e = et.channels("nosuch0").unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "{e}");
}

#[test]
fn offloads_are_set_as_whole_groups_and_read_back() {
    let Some((et, h)) = setup("feat") else { return };
    let on = OffloadState { on: true, fixed: false };
    let off = OffloadState { on: false, fixed: false };
    for o in [Offload::Tso, Offload::TxChecksum, Offload::RxChecksum] {
        assert_eq!(et.features("nic0").unwrap().offload(o), Some(on), "{o:?} starts on");
        assert_eq!(et.set_offload("nic0", o, false).unwrap(), off);
        let f = et.features("nic0").unwrap();
        assert!(f.members(o).iter().all(|m| !f.active.contains(*m)), "every member off");
        assert!(k_line(&h, o).ends_with(": off"), "{}", k_line(&h, o));
        assert_eq!(et.set_offload("nic0", o, true).unwrap(), on);
        assert!(k_line(&h, o).ends_with(": on"), "{}", k_line(&h, o));
    }

    // Transmit checksums off takes TSO's checksummed members with it; they
    // cannot come back alone: refused, read back, nothing left changed.
    // (6.18 keeps tx-tcp-accecn-segmentation on, so ethtool still shows
    // the group on.)
    et.set_offload("nic0", Offload::TxChecksum, false).unwrap();
    let before = et.features("nic0").unwrap();
    assert!(!before.active.contains("tx-tcp-segmentation"), "TSO needs transmit checksums");
    let e = et.set_offload("nic0", Offload::Tso, true).unwrap_err();
    match &e {
        KernelError::NotApplied { kept, .. } => {
            assert!(kept.contains("tx-tcp-segmentation off"), "{kept}")
        }
        e => panic!("{e}"),
    }
    assert_eq!(et.features("nic0").unwrap(), before, "wanted put back too");
    et.set_offload("nic0", Offload::TxChecksum, true).unwrap();

    assert_eq!(et.features("nic0").unwrap().offload(Offload::Tso), Some(on), "all back");
    let e = et.set_offload("nosuch0", Offload::Tso, true).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "{e}");
}

#[test]
fn link_modes_and_driver_info_say_what_the_device_is() {
    let Some((et, h)) = setup("lm") else { return };
    let lm = et.link_modes("nic0").unwrap();
    assert_eq!((lm.speed, lm.duplex), (Some(10_000), Some(Duplex::Full)), "{lm:?}");
    let e = ethtool(&h, &["nic0"]);
    assert!(e.contains("Speed: 10000Mb/s") && e.contains("Duplex: Full"), "{e}");

    let d = et.driver_info("nic0").unwrap();
    assert_eq!(d.driver, "veth");
    assert!(ethtool(&h, &["-i", "nic0"]).contains(&format!("version: {}", d.version)));
    let nl = h.netlink();
    let nic0 = nl.index("nic0").unwrap();
    nl.add_macvlan("vn0", nic0, &NewLink::default(), None).unwrap();
    assert_eq!(et.driver_info("vn0").unwrap().driver, "macvlan");
    let e = et.driver_info("nosuch0").unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "{e}");
    let e = et.link_modes("nosuch0").unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "{e}");
}

#[test]
fn a_handle_sees_the_devices_of_its_own_namespace_only() {
    let Some((et, _h)) = setup("ns") else { return };
    let other = Scratch::new("ns2");
    let there = Ethtool::open_in(&other.open()).unwrap();
    assert!(matches!(there.driver_info("nic0"), Err(KernelError::NotFound { .. })));
    assert!(matches!(there.channels("nic0"), Err(KernelError::NotFound { .. })));
    // Loopback has no driver to ask: the kernel's errno, typed.
    let e = there.driver_info("lo").unwrap_err();
    assert!(
        matches!(&e, KernelError::Refused { source, .. } if source.raw_os_error() == Some(libc::EOPNOTSUPP)),
        "{e}"
    );
    assert!(et.driver_info("nic0").is_ok());
}

//! Traffic control against the real kernel, measured with real TCP
//! streams (iperf3). Namespaces: `host` has the "NIC" `nic0` (a veth whose
//! peer `nic0p`, 10.9.0.1, is in `far`); `zone` has macvlan `vn1`
//! (10.9.0.11) over `nic0`. What `vn1` sends leaves through `nic0`'s
//! qdisc, in `host`, where root in the zone cannot reach it.
//!
//! A shaper counts Ethernet frames, iperf3 reports TCP payload: the
//! payload rate is brought to the frame rate as (MTU + 14) / MSS before
//! it is compared with the setting.

use std::time::Duration;

use netadm_kernel::{HtbClass, KernelError, Mode, Netlink, NewLink, QdiscKind, Rate, Tbf, TcId};

mod common;
use common::{Scratch, iperf, skip, wait_up};

const VN1: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x01];
const FAR: &str = "10.9.0.1";
const MTU: f64 = 1500.0;

/// The three namespaces (dropped after the connections into them).
struct Net {
    host: Netlink,
    nic0: u32,
    h: Scratch,
    far: Scratch,
    zone: Scratch,
}

fn net(tag: &str) -> Option<Net> {
    if skip() {
        return None;
    }
    let (h, far, zone) = (
        Scratch::new(&format!("{tag}-h")),
        Scratch::new(&format!("{tag}-f")),
        Scratch::new(&format!("{tag}-z")),
    );
    let host = h.netlink();
    let up = NewLink { up: true, ..Default::default() };
    host.add_veth("nic0", "nic0p", &up, Some(&far.open())).unwrap();
    let nic0 = host.index("nic0").unwrap();
    let f = far.netlink();
    let p = f.index("nic0p").unwrap();
    f.set_link(p, Some(true), None).unwrap();
    f.add_addr(p, FAR.parse().unwrap(), 24).unwrap();
    host.add_macvlan("vn1", nic0, &NewLink { mac: Some(VN1), ..up }, Some(&zone.open())).unwrap();
    let z = zone.netlink();
    let vn1 = z.index("vn1").unwrap();
    z.add_addr(vn1, "10.9.0.11".parse().unwrap(), 24).unwrap();
    wait_up(&host, nic0);
    wait_up(&z, vn1);
    Some(Net { host, nic0, h, far, zone })
}

impl Net {
    /// The frame rate of one TCP stream from the zone to the far side
    /// (`reverse`: the other way), in bit/s.
    fn measure(&self, reverse: bool) -> f64 {
        let (goodput, mss) = iperf(&self.far, &self.zone, FAR, reverse);
        goodput * (MTU + 14.0) / mss
    }
}

/// One stream at a time: the machine has 2 cores, and streams that share
/// them measure the CPU, not the shaper.
static ONE_STREAM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The shaper holds a stream to `set`: never above it by 5 % or more,
/// and within 5 % of it in one of three tries. Other work on a loaded
/// machine can slow a stream below its share (so a slow try is taken
/// again), never speed it past the shaper.
fn shaped(n: &Net, reverse: bool, set: Rate) {
    let _one = ONE_STREAM.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let want = set.0 as f64;
    let mut tries = vec![];
    for _ in 0..3 {
        let got = n.measure(reverse);
        let off = (got - want) / want;
        eprintln!(
            "set {:.1} Mbit/s, measured {:.1} ({:+.1} %)",
            want / 1e6,
            got / 1e6,
            off * 100.0
        );
        assert!(off < 0.05, "{got:.0} bit/s through a shaper set to {want:.0}");
        if off.abs() < 0.05 {
            return;
        }
        tries.push(got);
    }
    panic!("{tries:.0?} bit/s through a shaper set to {want:.0}");
}

#[test]
fn htb_classes_and_a_source_mac_filter_hold_a_vnic_to_its_class() {
    let Some(n) = net("htb") else { return };
    let (host, nic0) = (&n.host, n.nic0);
    let root = TcId::new(1, 0);
    let (vnic, default) = (TcId::new(1, 0x10), TcId::new(1, 0x99));
    host.add_htb(nic0, 1, 0x99).unwrap();
    let fast = HtbClass { prio: 1, ..HtbClass::new(Rate::mbit(100), Rate::mbit(100)) };
    let slow = HtbClass { prio: 7, ..HtbClass::new(Rate::mbit(10), Rate::mbit(10)) };
    host.set_htb_class(nic0, vnic, root, &fast, Mode::Create).unwrap();
    host.set_htb_class(nic0, default, root, &slow, Mode::Create).unwrap();
    host.add_u32_src_mac(nic0, root, 10, VN1, vnic).unwrap();

    let q = host.qdiscs(nic0).unwrap();
    assert_eq!(
        (q[0].handle, q[0].parent, &q[0].kind),
        (root, TcId::ROOT, &QdiscKind::Htb { default: 0x99 })
    );
    let classes = host.classes(nic0).unwrap();
    let c = classes.iter().find(|c| c.id == vnic).expect("class 1:10");
    let read = c.htb.unwrap();
    let top = TcId::ROOT; // a class at the top of its qdisc, as htb reports it
    assert_eq!((c.parent, read.rate, read.ceil, read.prio), (top, fast.rate, fast.ceil, 1));
    assert_eq!(read.burst, Some(16 * 1024), "the default burst");
    let f = host.filters(nic0, root).unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].prio, f[0].src_mac, f[0].class), (10, Some(VN1), Some(vnic)));
    let tc = common::sh(&["tc", "-n", &n.h.name, "class", "show", "dev", "nic0"]);
    assert!(tc.contains("class htb 1:10 root prio 1 rate 100Mbit ceil 100Mbit"), "{tc}");
    let tc = common::sh(&["tc", "-n", &n.h.name, "filter", "show", "dev", "nic0"]);
    assert!(tc.contains("flowid 1:10") && tc.contains("match 02000000/ffffffff at -8"), "{tc}");

    shaped(&n, false, fast.ceil);
    // Without its filter the VNIC falls into the default class.
    host.del_filter(nic0, root, 10).unwrap();
    assert!(host.filters(nic0, root).unwrap().is_empty());
    shaped(&n, false, slow.ceil);

    // Changed in place, read back.
    let wider = HtbClass { ceil: Rate::mbit(200), ..fast };
    host.set_htb_class(nic0, vnic, root, &wider, Mode::Change).unwrap();
    let c = host.classes(nic0).unwrap().into_iter().find(|c| c.id == vnic).unwrap();
    assert_eq!(c.htb.unwrap().ceil, Rate::mbit(200));

    // Refusals: nothing changes.
    let before = n.h.state();
    let e = host.add_htb(nic0, 1, 0x99).unwrap_err();
    assert!(matches!(e, KernelError::Exists { .. }), "{e}");
    let e = host
        .set_htb_class(nic0, TcId::new(5, 0x20), TcId::new(5, 0), &fast, Mode::Create)
        .unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "no such qdisc: {e}");
    let e = host
        .set_htb_class(nic0, TcId::new(1, 0x20), TcId::new(1, 0x5), &fast, Mode::Create)
        .unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "no such parent class: {e}");
    let e = host
        .set_htb_class(nic0, TcId::new(1, 0x20), TcId::new(5, 0), &fast, Mode::Create)
        .unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "a parent in another qdisc: {e}");
    let e = host.set_htb_class(nic0, TcId::new(1, 0x77), root, &fast, Mode::Change).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "no such class: {e}");
    let prio9 = HtbClass { prio: 9, ..fast };
    let e = host.set_htb_class(nic0, TcId::new(1, 0x20), root, &prio9, Mode::Create).unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    let e = host.add_htb(999_999, 1, 1).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. }), "no such device: {e}");
    assert_eq!(n.h.state(), before);

    host.del_class(nic0, vnic).unwrap();
    assert!(host.classes(nic0).unwrap().iter().all(|c| c.id != vnic));
    host.del_qdisc(nic0, TcId::ROOT).unwrap();
    assert!(host.classes(nic0).unwrap().is_empty());
    let q = host.qdiscs(nic0).unwrap();
    assert!(q.iter().all(|q| !matches!(q.kind, QdiscKind::Htb { .. })), "{q:?}");
}

#[test]
fn tbf_holds_a_device_to_its_rate() {
    let Some(n) = net("tbf") else { return };
    let (host, nic0) = (&n.host, n.nic0);
    let t = Tbf { rate: Rate::mbit(50), burst: 32 * 1024, latency: Duration::from_millis(50) };
    let handle = TcId::new(2, 0);
    host.set_tbf(nic0, handle, TcId::ROOT, &t, Mode::Create).unwrap();
    let q = host.qdiscs(nic0).unwrap();
    assert_eq!((q[0].handle, &q[0].kind), (handle, &QdiscKind::Tbf(t)));
    let tc = common::sh(&["tc", "-n", &n.h.name, "qdisc", "show", "dev", "nic0"]);
    assert!(tc.contains("tbf 2: root") && tc.contains("rate 50Mbit burst 32Kb lat 50ms"), "{tc}");
    shaped(&n, false, t.rate);

    let slower = Tbf { rate: Rate::mbit(20), ..t };
    host.set_tbf(nic0, handle, TcId::ROOT, &slower, Mode::Change).unwrap();
    assert_eq!(host.qdiscs(nic0).unwrap()[0].kind, QdiscKind::Tbf(slower));
    let e =
        host.set_tbf(nic0, handle, TcId::ROOT, &Tbf { burst: 0, ..t }, Mode::Create).unwrap_err();
    assert!(matches!(e, KernelError::Invalid { .. }), "{e}");
    host.del_qdisc(nic0, TcId::ROOT).unwrap();
    assert!(host.qdiscs(nic0).unwrap().iter().all(|q| !matches!(q.kind, QdiscKind::Tbf(_))));
    let e = host.del_qdisc(nic0, TcId::ROOT).unwrap_err();
    assert!(matches!(e, KernelError::NotFound { .. } | KernelError::Refused { .. }), "{e}");
}

#[test]
fn ingress_is_shaped_on_an_ifb_it_is_redirected_to() {
    let Some(n) = net("ifb") else { return };
    let (host, nic0) = (&n.host, n.nic0);
    host.add_ifb("ifb0", &NewLink { up: true, ..Default::default() }).unwrap();
    let ifb = host.index("ifb0").unwrap();
    let t = Tbf { rate: Rate::mbit(30), burst: 32 * 1024, latency: Duration::from_millis(50) };
    host.set_tbf(ifb, TcId::new(3, 0), TcId::ROOT, &t, Mode::Create).unwrap();
    host.add_clsact(nic0).unwrap();
    host.add_ingress_redirect(nic0, 1, ifb).unwrap();
    let q = host.qdiscs(nic0).unwrap();
    assert!(q.iter().any(|q| q.kind == QdiscKind::Clsact && q.parent == TcId::CLSACT), "{q:?}");
    let f = host.filters(nic0, TcId::INGRESS).unwrap();
    assert_eq!((f.len(), f[0].redirect), (1, Some(ifb)), "{f:?}");
    let tc = common::sh(&["tc", "-n", &n.h.name, "filter", "show", "dev", "nic0", "ingress"]);
    assert!(tc.contains("mirred (Egress Redirect to device ifb0)"), "{tc}");

    // What the far side sends to the zone comes in through nic0.
    shaped(&n, true, t.rate);

    host.del_filter(nic0, TcId::INGRESS, 1).unwrap();
    assert!(host.filters(nic0, TcId::INGRESS).unwrap().is_empty());
    host.del_qdisc(nic0, TcId::CLSACT).unwrap();
    assert!(host.qdiscs(nic0).unwrap().iter().all(|q| q.kind != QdiscKind::Clsact));
    host.del_link(ifb).unwrap();
}

//! The emulated i40e-class device enforces what the real one demands, so
//! a ring engine that passes against it respects the errata.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::{DmaAccount, DmaRing, Nic, NicError, QueueId};

fn port(ack: Duration) -> I40e {
    I40e::attach(
        "t0",
        &I40eConfig { queue_pairs: 4, ring_size: 64, ack_latency: ack, ..Default::default() },
    )
    .unwrap()
}

fn ring(nic: &I40e) -> Arc<DmaRing> {
    Arc::new(DmaRing::new(64, 1536, nic.dma_account()).unwrap())
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(2)
}

fn enable(nic: &I40e, q: QueueId) {
    nic.set_ring(q, Some(ring(nic))).unwrap();
    nic.request_enable(q).unwrap();
    nic.wait_queues(&[q], true, soon()).unwrap();
}

/// A port whose queues are acknowledged in 10 µs, with queue `q`
/// enabled.
fn enabled(q: QueueId) -> I40e {
    let nic = port(Duration::from_micros(10));
    enable(&nic, q);
    nic
}

/// A port on a loopback wire with `pairs` queue pairs enabled, every RX
/// buffer posted; its TX and RX rings.
fn looped(name: &str, pairs: u16) -> (I40e, Vec<Arc<DmaRing>>, Vec<Arc<DmaRing>>) {
    let cfg = I40eConfig {
        queue_pairs: pairs,
        ring_size: 64,
        wire: netadm_nic::emu::WireMode::Loopback,
        ..Default::default()
    };
    let nic = I40e::attach(name, &cfg).unwrap();
    let (mut tx, mut rx) = (vec![], vec![]);
    for i in 0..pairs {
        let (t, r) = (ring(&nic), ring(&nic));
        // SAFETY: this test is the rings' only driver-side user.
        unsafe { r.driver_post_all() };
        nic.set_ring(QueueId::tx(i), Some(t.clone())).unwrap();
        nic.set_ring(QueueId::rx(i), Some(r.clone())).unwrap();
        // The device takes only the buffers a tail doorbell announced.
        nic.doorbell(QueueId::rx(i));
        nic.request_enable(QueueId::tx(i)).unwrap();
        nic.request_enable(QueueId::rx(i)).unwrap();
        tx.push(t);
        rx.push(r);
    }
    let qs: Vec<QueueId> = (0..pairs).flat_map(|i| [QueueId::tx(i), QueueId::rx(i)]).collect();
    nic.wait_queues(&qs, true, soon()).unwrap();
    (nic, tx, rx)
}

#[test]
fn enables_are_acknowledged_asynchronously() {
    let nic = port(Duration::from_millis(20));
    let q = QueueId::rx(1);
    nic.set_ring(q, Some(ring(&nic))).unwrap();
    nic.request_enable(q).unwrap();
    assert!(!nic.queue_enabled(q), "not before the hardware latency");
    nic.wait_queues(&[q], true, soon()).unwrap();
    assert!(nic.queue_enabled(q));
}

#[test]
fn a_tx_disable_without_the_pre_disable_notice_hangs_the_queue() {
    let q = QueueId::tx(0);
    let nic = enabled(q);
    nic.request_disable(q).unwrap();
    let err = nic.wait_queues(&[q], false, Instant::now() + Duration::from_millis(30)).unwrap_err();
    assert_eq!(err, NicError::Timeout { enable: false, pending: vec![q] });
    assert_eq!(nic.hw_stats().fault_no_pre_disable, 1);
}

#[test]
fn a_tx_disable_after_the_notice_is_acknowledged() {
    let q = QueueId::tx(2);
    let nic = enabled(q);
    nic.tx_pre_disable(2).unwrap();
    let notice_end = Instant::now() + netadm_i40e::hw::TX_PRE_DISABLE;
    // The notice is a mandated interval: wait until it has run.
    while Instant::now() < notice_end {
        std::thread::yield_now();
    }
    nic.request_disable(q).unwrap();
    nic.wait_queues(&[q], false, soon()).unwrap();
    assert_eq!(nic.hw_stats().faults(), 0);
}

#[test]
fn re_enabling_inside_the_50ms_gap_hangs_the_queue() {
    let q = QueueId::rx(3);
    let nic = enabled(q);
    nic.request_disable(q).unwrap();
    nic.wait_queues(&[q], false, soon()).unwrap();
    nic.request_enable(q).unwrap();
    let err = nic.wait_queues(&[q], true, Instant::now() + Duration::from_millis(20)).unwrap_err();
    assert!(matches!(err, NicError::Timeout { enable: true, .. }));
    assert_eq!(nic.hw_stats().fault_reenable_too_soon, 1);
}

#[test]
fn an_enable_cancelled_before_its_ack_starts_no_re_enable_gap() {
    // A driver that requests an enable and cancels it at once (a failed
    // batch driven back) sees the queue disabled straight away: it never
    // came up. The gap runs from a completed disable, so waiting it out
    // from the moment the driver saw the queue disabled is enough; a gap
    // counted from the cancelled enable's late ack would hang the queue.
    let ack = Duration::from_millis(20);
    let nic = port(ack);
    let q = QueueId::rx(1);
    nic.set_ring(q, Some(ring(&nic))).unwrap();
    nic.request_enable(q).unwrap();
    nic.request_disable(q).unwrap();
    nic.wait_queues(&[q], false, soon()).unwrap();
    let gap_end = Instant::now() + netadm_i40e::hw::REENABLE_GAP;
    // The gap is a mandated interval: wait until it has run.
    while Instant::now() < gap_end {
        std::thread::yield_now();
    }
    nic.request_enable(q).unwrap();
    nic.wait_queues(&[q], true, soon()).unwrap();
    assert_eq!(nic.hw_stats().fault_reenable_too_soon, 0);
}

#[test]
fn buffers_change_only_while_the_queue_is_disabled() {
    let q = QueueId::rx(0);
    let nic = enabled(q);
    let bigger = Arc::new(DmaRing::new(64, 9088, nic.dma_account()).unwrap());
    assert_eq!(nic.set_ring(q, Some(bigger)).unwrap_err(), NicError::QueueEnabled { queue: q });
    // Nor can a queue be enabled with no ring to use.
    let bare = QueueId::rx(2);
    nic.request_enable(bare).unwrap();
    assert!(nic.wait_queues(&[bare], true, Instant::now() + Duration::from_millis(20)).is_err());
    assert_eq!(nic.hw_stats().fault_no_ring, 1);
}

#[test]
fn registers_refuse_what_the_port_does_not_have() {
    let nic = port(Duration::from_micros(10));
    assert!(matches!(
        nic.set_ring(QueueId::tx(4), None),
        Err(NicError::NoSuchQueue { count: 4, .. })
    ));
    assert!(matches!(nic.map_vector(QueueId::tx(0), 8), Err(NicError::NoSuchVector { .. })));
    assert!(matches!(nic.set_throttle(0, 0x1000), Err(NicError::OutOfRange { .. })));
    let odd = Arc::new(DmaRing::new(64, 1600, &DmaAccount::new()).unwrap());
    assert!(matches!(nic.set_ring(QueueId::rx(0), Some(odd)), Err(NicError::OutOfRange { .. })));
    assert!(I40e::attach("t1", &I40eConfig { queue_pairs: 385, ..Default::default() }).is_err());
    assert!(I40e::attach("t1", &I40eConfig { vectors: 65, ..Default::default() }).is_err());
}

#[test]
fn mac_filters_and_rss_steer_received_frames() {
    use netadm_nic::emu::MacFilter;
    let (nic, tx, rx) = looped("t2", 8);

    let vnic = [2, 8, 32, 1, 2, 3];
    nic.set_mac_filter(0, Some(MacFilter { mac: vnic, first_queue: 6, queues: 2 })).unwrap();
    // RSS over queues 0..6 only, so the filter's group is the VNIC's alone.
    for i in 0..netadm_i40e::hw::RSS_TABLE_SIZE {
        nic.set_rss_entry(i, i % 6).unwrap();
    }
    // 20 flows to the VNIC's MAC and 20 to another, through TX queue 0.
    let mut sent = 0;
    for flow in 0..20u8 {
        for dst in [vnic, [2, 8, 32, 9, 9, 9]] {
            let mut f = vec![0u8; 64];
            f[..6].copy_from_slice(&dst);
            f[20] = flow; // within what the RSS hash covers for non-IP frames
            // SAFETY: as above.
            assert!(unsafe { tx[0].driver_push(&f) });
            sent += 1;
        }
    }
    nic.doorbell(QueueId::tx(0));

    let deadline = soon();
    let mut got = [0u32; 8];
    while got.iter().sum::<u32>() < sent && Instant::now() < deadline {
        for (i, r) in rx.iter().enumerate() {
            // SAFETY: as above.
            got[i] += unsafe {
                r.driver_reap(u32::MAX, |f| {
                    assert_eq!(f[..6] == vnic, i >= 6, "frame to {:?} on rx{i}", &f[..6]);
                })
            };
        }
        std::thread::yield_now();
    }
    assert_eq!(got.iter().sum::<u32>(), sent, "every frame received: {got:?}");
    assert!(got[6] > 0 && got[7] > 0, "the group's queues share its flows: {got:?}");
    assert!(got[..6].iter().filter(|&&n| n > 0).count() >= 3, "RSS spreads the rest: {got:?}");
    // Filters are checked like any register.
    let bad = MacFilter { mac: vnic, first_queue: 7, queues: 2 };
    assert!(matches!(nic.set_mac_filter(1, Some(bad)), Err(NicError::OutOfRange { .. })));
}

#[test]
fn the_vlan_filter_table_lets_in_only_its_vids_and_holds_256() {
    let (nic, tx, rx) = looped("t3", 1);
    let (t, r) = (&tx[0], &rx[0]);
    nic.set_vlan_filter(100, true).unwrap();
    // Untagged, VID 100 (in the table), VID 7 (not): two arrive.
    let frame = |vid: Option<u16>| {
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(&[2, 8, 32, 1, 2, 3]);
        if let Some(v) = vid {
            f[12..16].copy_from_slice(&[0x81, 0x00, (v >> 8) as u8, v as u8]);
        }
        f
    };
    let dropped = nic.hw_stats().rx_dropped;
    for vid in [None, Some(100), Some(7)] {
        // SAFETY: as above.
        assert!(unsafe { t.driver_push(&frame(vid)) });
    }
    nic.doorbell(QueueId::tx(0));
    let mut got = vec![];
    let deadline = soon();
    while (got.len() < 2 || nic.hw_stats().rx_dropped == dropped) && Instant::now() < deadline {
        // SAFETY: as above.
        unsafe { r.driver_reap(u32::MAX, |f| got.push(netadm_nic::vlan::vid(f))) };
        std::thread::yield_now();
    }
    assert_eq!(got, [None, Some(100)]);
    assert_eq!(nic.hw_stats().rx_dropped, dropped + 1, "VID 7 dropped and counted");

    // The table holds 256 VIDs; one more is refused.
    for vid in 1000..1255 {
        nic.set_vlan_filter(vid, true).unwrap();
    }
    assert_eq!(nic.vlan_filter().len(), 256);
    assert!(matches!(nic.set_vlan_filter(4000, true), Err(NicError::OutOfRange { .. })));
    nic.set_vlan_filter(100, false).unwrap();
    nic.set_vlan_filter(4000, true).unwrap();
}

#[test]
fn filters_and_rss_set_through_the_driver_api_steer_as_the_drivers_methods_do() {
    use netadm_nic::emu::MacFilter;
    let (nic, tx, rx) = looped("t4", 8);
    // Through a wrapper, as the core reaches a port: `dyn Nic` only.
    let nic = netadm_nic::testing::FaultyNic::new(Arc::new(nic), Duration::from_secs(2));
    let api: &dyn Nic = &nic;
    let vnic = [2, 8, 32, 1, 2, 3];
    api.set_mac_filter(0, Some(MacFilter { mac: vnic, first_queue: 6, queues: 1 })).unwrap();
    for i in 0..api.caps().rss_table_size {
        api.set_rss_entry(i, 1).unwrap();
    }
    api.set_vlan_filter(100, true).unwrap();
    assert_eq!(api.vlan_filter(), Ok(vec![100]));
    // To the VNIC: its group's queue; any other unicast: where RSS points;
    // tagged with a VID not in the table: nowhere.
    let frames: [([u8; 6], Option<u16>); 3] =
        [(vnic, None), ([2, 8, 32, 9, 9, 9], Some(100)), ([2, 8, 32, 9, 9, 9], Some(7))];
    for (dst, vid) in frames {
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(&dst);
        if let Some(v) = vid {
            f[12..16].copy_from_slice(&[0x81, 0x00, (v >> 8) as u8, v as u8]);
        }
        // SAFETY: this test is the rings' only driver-side user.
        assert!(unsafe { tx[0].driver_push(&f) });
    }
    api.doorbell(QueueId::tx(0));
    let deadline = soon();
    let mut got = [0u32; 8];
    while got.iter().sum::<u32>() < 2 && Instant::now() < deadline {
        for (i, r) in rx.iter().enumerate() {
            // SAFETY: as above.
            got[i] += unsafe { r.driver_reap(u32::MAX, |_| {}) };
        }
        std::thread::yield_now();
    }
    assert_eq!(got, [0, 1, 0, 0, 0, 0, 1, 0]);
    // The third was dropped by the VLAN filter, not lost in flight.
    while api.hw_stats().rx_dropped == 0 && Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(api.hw_stats().rx_dropped, 1);
}

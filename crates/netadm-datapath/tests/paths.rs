//! Sequenced frames through every path — TX to a sink, a reflector, a cable
//! between two ports — with nothing lost, reordered or duplicated while
//! nothing is reconfigured; a stopped ring neither sends nor receives; the
//! device's and rings' counters match the sink's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_atl1c::{Atl1c, Atl1cConfig};
use netadm_datapath::tx::PortTx;
use netadm_datapath::{Classifier, GenConfig, Generator, Stream, StreamTable};
use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::Nic;
use netadm_nic::emu::{Device, WireMode};
use netadm_rings::{RingEngine, RingError, Strategy};

const BUF: u32 = 1536;

fn engine(nic: Arc<dyn Nic>, streams: &Arc<StreamTable>) -> Arc<RingEngine> {
    let e = Arc::new(RingEngine::new(nic, Strategy::Batched).unwrap());
    e.set_client(Some(Arc::new(Classifier::new(streams.clone()))));
    e.start(&e.all_rings(), BUF).unwrap();
    e
}

/// Waits for `cond` with a deadline, yielding between looks.
/// An i40e-class port `name` on a reflector, with `pairs` queue pairs of
/// `ring_size` descriptors, the streams its classifier feeds and its
/// engine.
fn reflected(
    name: &str,
    pairs: u16,
    ring_size: u32,
) -> (Arc<I40e>, Arc<StreamTable>, Arc<RingEngine>) {
    let cfg = I40eConfig {
        queue_pairs: pairs,
        ring_size,
        wire: WireMode::Reflector,
        ..Default::default()
    };
    let nic = Arc::new(I40e::attach(name, &cfg).unwrap());
    let streams = Arc::new(StreamTable::default());
    let e = engine(nic.clone(), &streams);
    (nic, streams, e)
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

fn traffic(rate: u64, limit: u64) -> GenConfig {
    GenConfig {
        dst: [2, 0, 0, 0, 0, 2],
        src: [2, 0, 0, 0, 0, 1],
        rate_pps: rate,
        size: 128,
        batch: 16,
        limit: Some(limit),
    }
}

fn run(stream: &Arc<Stream>, cfg: GenConfig, tx: PortTx) {
    Generator::start(cfg, stream.clone(), Arc::new(tx)).join();
}

fn rings_rx(e: &RingEngine) -> (u64, u64) {
    e.all_rings()
        .iter()
        .map(|&r| e.info(r).unwrap())
        .fold((0, 0), |a, i| (a.0 + i.rx_frames, a.1 + i.tx_frames))
}

#[test]
fn tx_to_a_sink_sends_every_frame_once() {
    let nic = Arc::new(
        I40e::attach("s0", &I40eConfig { queue_pairs: 4, ring_size: 256, ..Default::default() })
            .unwrap(),
    );
    let streams = Arc::new(StreamTable::default());
    let e = engine(nic.clone(), &streams);
    let s = Arc::new(Stream::new(1, 4));
    run(&s, traffic(0, 50_000), PortTx::fixed(e.clone(), 4));
    wait_for("the device to send all", || nic.hw_stats().tx_frames == 50_000);
    let st = s.stats();
    assert_eq!(st.sent, 50_000);
    assert_eq!(rings_rx(&e).1, 50_000, "ring counters match");
    assert_eq!(nic.hw_stats().tx_bytes, 50_000 * 128);
    assert!(
        nic.hw_stats().doorbells < 50_000 / 4,
        "batched doorbells: {}",
        nic.hw_stats().doorbells
    );
}

#[test]
fn through_a_reflector_nothing_is_lost_reordered_or_duplicated() {
    let (nic, streams, e) = reflected("r0", 8, 512);
    let s = Arc::new(Stream::new(7, 8));
    streams.insert(s.clone());
    run(&s, traffic(200_000, 40_000), PortTx::fixed(e.clone(), 8));
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.stats().received != 40_000 {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for every frame back: {:?}; device {:?}; rings {:?}",
            s.stats(),
            nic.hw_stats(),
            e.all_rings().iter().map(|&r| e.info(r).unwrap()).collect::<Vec<_>>()
        );
        std::thread::yield_now();
    }
    let st = s.stats();
    assert_eq!(
        (st.sent, st.received, st.lost, st.reordered, st.duplicated),
        (40_000, 40_000, 0, 0, 0)
    );
    let (rx, tx) = rings_rx(&e);
    assert_eq!((rx, tx), (40_000, 40_000), "ring counters match the sink");
    let hw = nic.hw_stats();
    assert_eq!((hw.tx_frames, hw.rx_frames, hw.rx_dropped), (40_000, 40_000, 0));
    assert!(st.latency_p50_ns > 0 && st.latency_p99_ns >= st.latency_p50_ns);
    // RSS spread the 8 flows over more than one RX ring.
    let busy = e.all_rings().iter().filter(|&&r| e.info(r).unwrap().rx_frames > 0).count();
    assert!(busy > 1, "{busy} RX rings used");
}

#[test]
fn over_a_cable_nothing_is_lost_reordered_or_duplicated() {
    let cfg = Atl1cConfig { wire: WireMode::Cable, ..Default::default() };
    let a = Arc::new(Atl1c::attach("ca0", &cfg).unwrap());
    let b = Arc::new(Atl1c::attach("ca1", &cfg).unwrap());
    Device::cable(a.device(), b.device()).unwrap();
    assert!(Device::cable(a.device(), b.device()).is_err(), "one cable per port");
    let streams = Arc::new(StreamTable::default());
    let ea = engine(a.clone(), &streams);
    let eb = engine(b.clone(), &streams);
    let s = Arc::new(Stream::new(9, 4));
    streams.insert(s.clone());
    run(&s, traffic(100_000, 20_000), PortTx::fixed(ea.clone(), 1));
    wait_for("every frame across", || s.stats().received == 20_000);
    let st = s.stats();
    assert_eq!((st.lost, st.reordered, st.duplicated), (0, 0, 0));
    assert_eq!(rings_rx(&eb).0, 20_000, "they arrived at the far port");
    assert_eq!(rings_rx(&ea).0, 0, "and only there");
    assert_eq!(b.hw_stats().rx_frames, a.hw_stats().tx_frames);
}

#[test]
fn a_stopped_ring_neither_sends_nor_receives() {
    let (nic, streams, e) = reflected("x0", 4, 256);
    // Steer everything that arrives to RX queue 1, then stop ring 1.
    for i in 0..netadm_i40e::hw::RSS_TABLE_SIZE {
        nic.set_rss_entry(i, 1).unwrap();
    }
    e.stop(&[1]).unwrap();
    let before = nic.hw_stats();
    // It does not send ...
    assert!(matches!(e.transmit(1, &[&[0u8; 64]]), Err(RingError::NotStarted { .. })));
    // ... and what is sent on ring 0 and comes back for it is dropped by
    // the device, never delivered.
    let s = Arc::new(Stream::new(3, 1));
    streams.insert(s.clone());
    run(&s, traffic(0, 1_000), PortTx::fixed(e.clone(), 1));
    wait_for("the device to have handled all", || {
        nic.hw_stats().rx_dropped - before.rx_dropped == 1_000
    });
    let after = nic.hw_stats();
    assert_eq!(after.tx_frames - before.tx_frames, 1_000);
    assert_eq!(after.rx_frames, before.rx_frames);
    assert_eq!(s.stats().received, 0);
    assert_eq!(e.info(1).unwrap().rx_frames, 0);
    // Its queues are disabled in the device itself, not just closed in the
    // driver: nothing could reach the wire through it.
    assert!(
        !nic.queue_enabled(netadm_nic::QueueId::tx(1))
            && !nic.queue_enabled(netadm_nic::QueueId::rx(1))
    );
}

#[test]
fn xmit_batch_off_rings_a_doorbell_per_frame() {
    let nic = Arc::new(Atl1c::attach("xb0", &Atl1cConfig::default()).unwrap());
    let streams = Arc::new(StreamTable::default());
    let e = engine(nic.clone(), &streams);
    let s = Arc::new(Stream::new(4, 1));
    e.set_xmit_batch(false);
    let d0 = nic.hw_stats().doorbells;
    run(&s, traffic(0, 4_000), PortTx::fixed(e.clone(), 1));
    let per_frame_off = (nic.hw_stats().doorbells - d0) as f64 / 4_000.0;
    e.set_xmit_batch(true);
    let d1 = nic.hw_stats().doorbells;
    run(&s, traffic(0, 4_000), PortTx::fixed(e.clone(), 1));
    let per_frame_on = (nic.hw_stats().doorbells - d1) as f64 / 4_000.0;
    assert!(per_frame_off >= 1.0, "off: {per_frame_off} doorbells per frame");
    assert!(per_frame_on <= 1.0 / 8.0, "on: {per_frame_on} doorbells per frame (batches of 16)");
    wait_for("the device to send all", || nic.hw_stats().tx_frames == 8_000);
}

//! What the emulated atl1c-class port's wire and TX completions allow, as
//! the hardware does: no more frames per second than the line rate; TX
//! descriptors back only with the moderated TX interrupt; RX buffers used
//! only once a tail doorbell announced them. (That a saturated wire paces
//! the device without keeping a core busy: `netadm-i40e`'s `idle` tests.)
//!
//! Every check is on counts, never on how fast this machine is: a slow
//! machine sends less, which no assertion here minds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_atl1c::{Atl1c, Atl1cConfig};
use netadm_nic::emu::{WireMode, line_rate_pps};
use netadm_nic::{DmaRing, Nic, QueueId};

struct Port {
    nic: Atl1c,
    tx: Arc<DmaRing>,
    rx: Arc<DmaRing>,
}

/// TX queue 0 and the RX queue, enabled. RX buffers are posted, and
/// announced with a doorbell only if `announce`.
fn port(name: &str, cfg: &Atl1cConfig, announce: bool) -> Port {
    let nic = Atl1c::attach(name, cfg).unwrap();
    let ring = || Arc::new(DmaRing::new(cfg.ring_size, 1536, nic.dma_account()).unwrap());
    let (tx, rx) = (ring(), ring());
    nic.set_ring(QueueId::tx(0), Some(tx.clone())).unwrap();
    nic.set_ring(QueueId::rx(0), Some(rx.clone())).unwrap();
    // SAFETY: this test is the rings' only driver-side user.
    unsafe { rx.driver_post_all() };
    if announce {
        nic.doorbell(QueueId::rx(0));
    }
    let qs = [QueueId::tx(0), QueueId::rx(0)];
    for q in qs {
        // TX causes on the tx-imt vector, RX causes on the rx-imt one.
        nic.map_vector(q, nic.default_vector(q)).unwrap();
        nic.request_enable(q).unwrap();
    }
    nic.wait_queues(&qs, true, Instant::now() + Duration::from_secs(5)).unwrap();
    Port { nic, tx, rx }
}

impl Port {
    /// Reclaims what the device wrote back, fills the TX ring with
    /// `len`-byte frames and rings the doorbell. Returns the frames
    /// reclaimed.
    fn refill(&self, len: usize) -> u32 {
        let f = vec![0x5au8; len];
        // SAFETY: this test is the ring's only driver-side user.
        unsafe {
            let done = self.tx.driver_reclaim();
            let mut queued = 0;
            while self.tx.driver_push(&f) {
                queued += 1;
            }
            if queued > 0 {
                self.nic.doorbell(QueueId::tx(0));
            }
            done
        }
    }
}

/// Waits for `cond`, yielding, up to a generous deadline.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

#[test]
fn a_port_never_sends_faster_than_its_line_rate() {
    // 100 Mb/s: 142 kpps of 64-byte frames, far below what the device
    // moves without a wire, so only the wire can hold it there. tx-imt 0:
    // completions are written back at once and never the limit.
    let cfg = Atl1cConfig { speed_mbps: 100, ..Atl1cConfig::default() };
    let p = port("rate0", &cfg, true);
    p.nic.set_tx_imt(0).unwrap();
    let line = line_rate_pps(100, 64);
    assert!((line - 100e6 / (88.0 * 8.0)).abs() < 1.0, "64 bytes + FCS + 20 of framing");
    // Warm up, then count frames over a measured interval.
    let sent = || p.nic.hw_stats().tx_frames;
    while sent() < 2_000 {
        p.refill(64);
        std::thread::yield_now();
    }
    let (t0, c0) = (Instant::now(), sent());
    while sent() < c0 + 20_000 {
        p.refill(64);
        std::thread::yield_now();
    }
    let c1 = sent();
    let secs = t0.elapsed().as_secs_f64();
    let rate = (c1 - c0) as f64 / secs;
    // A frame counted at the interval's start may have gone up to one
    // pacing lag (100 µs) early: a few frames, within the 1 % allowed.
    assert!(rate <= line * 1.01, "{rate:.0} pps on a wire that carries {line:.0}");
    let hw = p.nic.hw_stats();
    assert_eq!(hw.tx_bytes, hw.tx_frames * 64, "bytes as queued (no FCS)");
}

#[test]
fn tx_descriptors_come_back_only_with_the_tx_interrupt() {
    // tx-imt at its largest, 131 ms: a handful of TX interrupts while the
    // driver keeps the ring as full as it can.
    let cfg = Atl1cConfig { ring_size: 64, ..Atl1cConfig::default() };
    let p = port("txc0", &cfg, true);
    p.nic.set_tx_imt(netadm_atl1c::hw::IMT_MAX).unwrap();
    let irqs = || p.nic.hw_stats().interrupts;
    let mut reclaims = 0;
    while irqs() < 4 {
        if p.refill(64) > 0 {
            // Each batch given back needs a write-back of its own, and
            // the device writes back only as it raises the interrupt
            // (counted before the write-back is visible).
            reclaims += 1;
            let seen = irqs();
            assert!(reclaims <= seen, "{reclaims} batches back after {seen} interrupts");
        }
        std::thread::yield_now();
    }
    let hw = p.nic.hw_stats();
    // The device sends no frame without a descriptor, and the driver gets
    // the 64 back only at an interrupt: at most one ring per interrupt,
    // plus the ring it started with.
    assert!(hw.tx_frames <= 64 * (hw.interrupts + 1), "{hw:?}");
    assert!(reclaims >= 1 && reclaims <= hw.interrupts, "{reclaims} reclaims, {hw:?}");
    assert_eq!(hw.rx_frames, 0, "a sink wire: every interrupt is a TX one");
}

#[test]
fn rx_buffers_are_used_only_once_a_doorbell_announced_them() {
    let cfg = Atl1cConfig { ring_size: 64, wire: WireMode::Loopback, ..Atl1cConfig::default() };
    // Buffers posted in the ring, but the tail never written.
    let p = port("rxdb0", &cfg, false);
    let mut got = vec![];
    let mut scratch = vec![];
    p.refill(60);
    // The frames come back and wait in the port's receive packet buffer.
    wait_for("the first ring sent", || p.nic.hw_stats().tx_frames == 64);
    // SAFETY: this test is the ring's only driver-side user.
    unsafe { p.rx.driver_reap_frames(u32::MAX, &mut scratch, |f, _| got.push(f.to_vec())) };
    assert!(got.is_empty(), "unannounced buffers were used");
    assert_eq!((p.nic.hw_stats().rx_frames, p.nic.hw_stats().rx_dropped), (0, 0));
    // The doorbell announces them: the waiting frames land.
    p.nic.doorbell(QueueId::rx(0));
    wait_for("the frames to land", || p.nic.hw_stats().rx_frames == 64);
    // SAFETY: as above.
    unsafe { p.rx.driver_reap_frames(u32::MAX, &mut scratch, |f, _| got.push(f.to_vec())) };
    assert_eq!(got.len(), 64);
    // Reaped and posted again, but not announced: the device has none,
    // and what comes back waits again.
    // SAFETY: as above.
    unsafe { p.rx.driver_post_all() };
    p.nic.set_tx_imt(0).unwrap();
    wait_for("TX completions", || {
        // SAFETY: as above.
        unsafe { p.tx.driver_reclaim() };
        p.tx.free() == 64
    });
    p.refill(60);
    wait_for("the second ring sent", || p.nic.hw_stats().tx_frames == 128);
    assert_eq!((p.nic.hw_stats().rx_frames, p.nic.hw_stats().rx_dropped), (64, 0));
    p.nic.doorbell(QueueId::rx(0));
    wait_for("the second ring to land", || p.nic.hw_stats().rx_frames == 128);
}

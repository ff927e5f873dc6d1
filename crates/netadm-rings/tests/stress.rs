//! Stops and starts racing live traffic and interrupts.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;

use common::*;
use netadm_nic::emu::WireMode;
use netadm_nic::{Nic, QueueId};
use netadm_rings::{RingClient, RingEngine, RingState, Strategy};

const RINGS: u16 = 16;
const MAGIC: &[u8; 4] = b"NADM";

/// Checks, at every delivery, that the ring is one a completion may reach:
/// running (or still finishing a handler that entered before quiesce) with
/// its hardware queue enabled.
struct Checker {
    engine: OnceLock<Arc<RingEngine>>,
    nic: Arc<dyn Nic>,
    delivered: AtomicU64,
    violations: AtomicU64,
    corrupt: AtomicU64,
}

impl Checker {
    fn check(&self, ring: u16) {
        let Some(e) = self.engine.get() else { return };
        let state = e.state(ring).unwrap();
        let live = matches!(state, RingState::Started | RingState::Quiescing);
        let q_on = self.nic.queue_enabled(QueueId::rx(ring));
        if !live || !q_on {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        // Make handlers slow, so they overlap stops often.
        for _ in 0..2_000 {
            std::hint::spin_loop();
        }
    }
}

impl RingClient for Checker {
    fn rx(&self, ring: u16, frame: &[u8], _off: netadm_nic::Offload) {
        if frame.len() < 64 || &frame[12..16] != MAGIC || frame[16] as u16 >= RINGS {
            self.corrupt.fetch_add(1, Ordering::Relaxed);
        }
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.check(ring);
    }
    fn tx_done(&self, ring: u16, _n: u32) {
        self.check(ring);
    }
}

#[test]
fn stops_racing_live_interrupts_never_deliver_to_a_stopping_or_stopped_ring() {
    let nic = i40e_fast(RINGS, WireMode::Loopback);
    for v in 0..4 {
        nic.set_throttle(v, 0).unwrap(); // an interrupt for every batch
    }
    let checker = Arc::new(Checker {
        engine: OnceLock::new(),
        nic: nic.clone(),
        delivered: AtomicU64::new(0),
        violations: AtomicU64::new(0),
        corrupt: AtomicU64::new(0),
    });
    let engine = Arc::new(RingEngine::new(nic.clone(), Strategy::Batched).unwrap());
    engine.set_client(Some(checker.clone()));
    let _ = checker.engine.set(engine.clone());
    let all = engine.all_rings();
    engine.start(&all, 1536).unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let sender = {
        let (engine, done) = (engine.clone(), done.clone());
        thread::spawn(move || {
            let mut seq = 0u64;
            let mut sent = 0u64;
            while !done.load(Ordering::Relaxed) {
                for ring in 0..RINGS {
                    let frames: Vec<Vec<u8>> = (0..8)
                        .map(|_| {
                            seq += 1;
                            let mut f = vec![0u8; 64];
                            f[12..16].copy_from_slice(MAGIC);
                            f[16] = ring as u8;
                            f[20..28].copy_from_slice(&seq.to_le_bytes());
                            f
                        })
                        .collect();
                    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                    if let Ok(n) = engine.transmit(ring, &refs) {
                        sent += n as u64;
                    }
                }
                thread::yield_now();
            }
            sent
        })
    };

    // Churn: stop and restart overlapping subsets while traffic flows.
    let mut x: u32 = 0x9e37_79b9;
    let mut churns = 0;
    let before = checker.delivered.load(Ordering::Relaxed);
    for _ in 0..150 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let set: Vec<u16> = (0..RINGS).filter(|r| x >> r & 1 == 1).collect();
        engine.stop(&set).unwrap();
        for &r in &set {
            assert_eq!(engine.state(r).unwrap(), RingState::Freed);
        }
        engine.start(&set, 1536).unwrap();
        churns += set.len();
    }
    done.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    engine.stop(&all).unwrap();

    let delivered = checker.delivered.load(Ordering::Relaxed) - before;
    eprintln!("{churns} ring stop/starts, {sent} frames sent, {delivered} delivered during churn");
    assert!(delivered > 1000, "traffic must actually race the churn ({delivered} delivered)");
    assert_eq!(checker.violations.load(Ordering::Relaxed), 0, "completion reached a stopped ring");
    assert_eq!(checker.corrupt.load(Ordering::Relaxed), 0, "a delivered frame was corrupt");
    assert_no_faults(&*nic);
    assert_eq!(engine.dma_bytes(), 0);
}

//! An idle device parks its threads, and a device waiting for its wire
//! sleeps until the wire is free: no busy spin.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::emu::wire_bytes;
use netadm_nic::{DmaRing, Nic, QueueId, buf_size_for_mtu};

/// Scheduler state letters (`R`, `S`, ...) of this process's threads named
/// `name`, from /proc.
fn thread_states(name: &str) -> Vec<char> {
    let mut out = vec![];
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Field 3, after the parenthesised comm.
        if let Some(s) = stat.rsplit(')').next().and_then(|r| r.trim().chars().next()) {
            out.push(s);
        }
    }
    out
}

#[test]
fn idle_device_threads_sleep() {
    let nic =
        I40e::attach("idle0", &I40eConfig { queue_pairs: 8, ring_size: 64, ..Default::default() })
            .unwrap();
    // Some work first: enable every queue and send a few frames.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut qs = vec![];
    for i in 0..8 {
        for q in [QueueId::tx(i), QueueId::rx(i)] {
            nic.set_ring(q, Some(Arc::new(DmaRing::new(64, 1536, nic.dma_account()).unwrap())))
                .unwrap();
            nic.request_enable(q).unwrap();
            qs.push(q);
        }
    }
    nic.wait_queues(&qs, true, deadline).unwrap();

    for name in ["idle0-hw", "idle0-irq"] {
        assert_eq!(thread_states(name).len(), 1, "{name} exists");
        // A spinning thread is always runnable; a parked one sleeps. Sample
        // the state many times and require it to be asleep nearly always.
        let samples: Vec<char> = (0..300)
            .flat_map(|_| {
                std::thread::yield_now();
                thread_states(name)
            })
            .collect();
        let asleep = samples.iter().filter(|&&c| c == 'S').count();
        assert!(
            asleep * 100 >= samples.len() * 95,
            "{name}: {asleep}/{} samples asleep",
            samples.len()
        );
    }
}

#[test]
fn a_device_waiting_for_its_wire_sleeps_and_keeps_to_the_line_rate() {
    // 1 Mb/s and 9000-byte frames: 72 ms each, ~4.6 s for a full ring of
    // 64, of which the samples below take a small part. The engine wakes
    // for each frame's turn and sleeps in between; one that spun to pace
    // its wire would be runnable throughout.
    let cfg = I40eConfig { queue_pairs: 1, ring_size: 64, speed_mbps: 1, ..Default::default() };
    let nic = I40e::attach("slow0", &cfg).unwrap();
    let tx = Arc::new(DmaRing::new(64, buf_size_for_mtu(9000), nic.dma_account()).unwrap());
    nic.set_ring(QueueId::tx(0), Some(tx.clone())).unwrap();
    nic.request_enable(QueueId::tx(0)).unwrap();
    nic.wait_queues(&[QueueId::tx(0)], true, Instant::now() + Duration::from_secs(2)).unwrap();
    let t0 = Instant::now();
    // SAFETY: this test is the ring's only driver-side user.
    while unsafe { tx.driver_push(&[0u8; 9000]) } {}
    nic.doorbell(QueueId::tx(0));
    let samples: Vec<char> = (0..200)
        .flat_map(|_| {
            std::thread::yield_now();
            thread_states("slow0-hw")
        })
        .collect();
    let secs = t0.elapsed().as_secs_f64();
    let sent = nic.hw_stats().tx_frames;
    // One frame goes at once, the rest one wire time apart (plus at most
    // 100 µs of pacing lag).
    let per_frame = (wire_bytes(9000) * 8) as f64 / 1e6;
    let most = 1.0 + (secs + 100e-6) / per_frame;
    assert!((sent as f64) <= most, "{sent} frames in {secs:.3} s; the wire carries {most:.2}");
    if tx.device_owned() > 0 {
        // The wire was the limit throughout: the engine slept through it.
        let asleep = samples.iter().filter(|&&c| c == 'S').count();
        assert!(
            asleep * 100 >= samples.len() * 80,
            "slow0-hw: {asleep}/{} samples asleep while paced",
            samples.len()
        );
    }
}

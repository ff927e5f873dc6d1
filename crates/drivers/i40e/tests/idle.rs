//! An idle device parks its threads: no busy spin.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::{DmaRing, Nic, QueueId};

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

//! The ring lifecycle, proved on the emulated devices.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use netadm_nic::testing::{Faults, FaultyNic};
use netadm_nic::{DmaRing, Nic, NicError, QueueId, buf_size_for_mtu};
use netadm_rings::{RingEngine, RingError, RingState, Strategy, Wait};

const BUF: u32 = 1536;

/// A batched engine over `nic` whose clock records every timed wait.
fn recorded<N: Nic + 'static>(nic: Arc<N>) -> (Arc<N>, Arc<RecordingClock>, RingEngine) {
    let clock = Arc::new(RecordingClock::default());
    let e = RingEngine::with_clock(nic.clone(), Strategy::Batched, clock.clone()).unwrap();
    (nic, clock, e)
}

/// A port with `pairs` queue pairs and shortened errata behind a fault
/// injector (waits give up after 50 ms), and a batched engine over it.
fn faulty(pairs: u16) -> (Arc<netadm_i40e::I40e>, Arc<FaultyNic>, RingEngine) {
    let hw = i40e_fast(pairs, Default::default());
    let nic = Arc::new(FaultyNic::new(hw.clone(), Duration::from_millis(50)));
    let e = RingEngine::new(nic.clone(), Strategy::Batched).unwrap();
    (hw, nic, e)
}

#[test]
fn illegal_transitions_are_refused_with_typed_errors_and_change_nothing() {
    let nic = i40e(4);
    let e = RingEngine::new(nic.clone(), Strategy::Batched).unwrap();
    e.start(&[0, 1], BUF).unwrap();

    // Freeing buffers under a running ring.
    let err = e.free(&[2, 1]).unwrap_err();
    assert_eq!(
        err,
        RingError::IllegalTransition { ring: 1, from: RingState::Started, to: RingState::Freed }
    );
    // Allocating over a running ring.
    let err = e.alloc(&[0], BUF).unwrap_err();
    assert!(matches!(err, RingError::IllegalTransition { ring: 0, from: RingState::Started, .. }));
    // Starting a running ring with other buffers.
    let err = e.start(&[3, 0], 9088).unwrap_err();
    assert_eq!(err, RingError::BufferSizeMismatch { ring: 0, have: BUF, want: 9088 });
    // A ring the port does not have.
    assert_eq!(e.stop(&[4]).unwrap_err(), RingError::NoSuchRing { ring: 4, count: 4 });
    // TX on a ring that is not running.
    assert_eq!(
        e.transmit(2, &[&[0u8; 60]]).unwrap_err(),
        RingError::NotStarted { ring: 2, state: RingState::Unallocated }
    );

    // None of that moved anything.
    let states: Vec<_> = (0..4).map(|r| e.state(r).unwrap()).collect();
    use RingState::*;
    assert_eq!(states, [Started, Started, Unallocated, Unallocated]);
    assert_eq!(e.dma_bytes(), 2 * 2 * DmaRing::bytes_for(64, BUF));
    assert_no_faults(&*nic);
}

#[test]
fn stop_is_idempotent() {
    let nic = i40e(8);
    let e = RingEngine::new(nic.clone(), Strategy::Batched).unwrap();
    let all = e.all_rings();
    assert_eq!(e.stop(&all).unwrap().counts.rings_stopped, 0, "never started");
    e.start(&all, BUF).unwrap();
    let first = e.stop(&all).unwrap();
    assert_eq!(first.counts.rings_stopped, 8);
    let again = e.stop(&all).unwrap();
    assert_eq!(again.counts.rings_stopped, 0);
    assert!(again.phases.iter().all(|p| p.name == "validate"), "{:?}", again.phases);
    assert!(all.iter().all(|&r| e.state(r).unwrap() == RingState::Freed));
    assert_no_faults(&*nic);
}

#[test]
fn dma_exists_only_for_started_rings_sized_from_the_mtu_and_returns_to_zero() {
    let nic = i40e(16);
    let e = RingEngine::new(nic.clone(), Strategy::Batched).unwrap();
    assert_eq!(e.dma_bytes(), 0, "nothing allocated before start");
    let small = buf_size_for_mtu(1500);
    let jumbo = buf_size_for_mtu(9000);
    let rep = e.start(&[0], small).unwrap();
    let one = 2 * DmaRing::bytes_for(64, small);
    assert_eq!(e.dma_bytes(), one);
    assert_eq!(rep.counts.dma_allocated, one);
    e.start(&e.all_rings(), small).unwrap();
    assert_eq!(e.dma_bytes(), 16 * one);
    // An MTU change reallocates at the new size.
    let rep = e.restart(&e.all_rings(), jumbo).unwrap();
    assert_eq!(rep.counts.dma_freed, 16 * one);
    assert_eq!(e.dma_bytes(), 16 * 2 * DmaRing::bytes_for(64, jumbo));
    let rep = e.stop(&e.all_rings()).unwrap();
    assert_eq!(rep.counts.dma_freed, 16 * 2 * DmaRing::bytes_for(64, jumbo));
    assert_eq!(e.dma_bytes(), 0);
    assert_eq!(nic.dma_account().regions(), 0);
    // alloc/free without a start also balance.
    e.alloc(&[1, 2], small).unwrap();
    assert_eq!(e.dma_bytes(), 2 * one);
    e.free(&[1, 2]).unwrap();
    assert_eq!(e.dma_bytes(), 0);
    assert_no_faults(&*nic);
}

#[test]
fn restart_right_after_stop_waits_out_the_remaining_gap_once_and_no_more() {
    let (nic, clock, e) = recorded(i40e(32));
    let all = e.all_rings();
    e.start(&all, BUF).unwrap();
    assert_eq!(clock.take(), [], "a first start has no gap to wait");

    let before_stop = std::time::Instant::now();
    e.stop(&all).unwrap();
    let after_stop = std::time::Instant::now();
    let waits = clock.take();
    assert_eq!(waits.len(), 1, "one pre-disable notice for the whole batch: {waits:?}");
    assert_eq!(waits[0].0, Wait::PreDisableNotice);

    e.start(&all, BUF).unwrap();
    let waits = clock.take();
    assert_eq!(waits.len(), 1, "one gap wait for the whole batch: {waits:?}");
    let (why, deadline) = waits[0];
    assert_eq!(why, Wait::ReenableGap);
    // Measured from the disable inside the stop: 50 ms - elapsed, so the
    // deadline is 50 ms after a moment within the stop, not after the start
    // began.
    let gap = Duration::from_millis(50);
    assert!(deadline - gap >= before_stop, "gap measured from before the stop");
    assert!(deadline - gap <= after_stop, "gap measured from after the stop returned");
    // And the device agrees it was enough.
    assert_no_faults(&*nic);
    assert!(all.iter().all(|&r| e.state(r).unwrap() == RingState::Started));
}

#[test]
fn batched_waits_only_for_mandated_intervals_and_never_pauses_blindly() {
    let (nic, clock, e) = recorded(i40e(64));
    let all = e.all_rings();
    for _ in 0..3 {
        e.start(&all, BUF).unwrap();
        e.restart(&all, 9088).unwrap();
        e.stop(&all).unwrap();
    }
    let waits = clock.take();
    assert!(
        waits.iter().all(|(w, _)| matches!(w, Wait::PreDisableNotice | Wait::ReenableGap)),
        "{waits:?}"
    );
    let notices = waits.iter().filter(|(w, _)| *w == Wait::PreDisableNotice).count();
    assert_eq!(notices, 6, "one notice per stop batch, not per ring");
    assert_no_faults(&*nic);
}

#[test]
fn sequential_and_legacy_pause_per_ring_as_illumos_did() {
    let nic = i40e(3);
    let clock = Arc::new(RecordingClock::default());
    // 10 kHz makes the seed's 50-tick delay 5 ms, to keep the test short.
    let e =
        RingEngine::with_clock(nic.clone(), Strategy::Legacy { tick_hz: 10_000 }, clock.clone())
            .unwrap();
    let all = e.all_rings();
    e.start(&all, BUF).unwrap();
    e.stop(&all).unwrap();
    let waits = clock.take();
    let count = |w: Wait| waits.iter().filter(|(x, _)| *x == w).count();
    assert_eq!(count(Wait::TickDelay), 3, "legacy: one tick delay per ring");
    assert_eq!(count(Wait::PreDisableNotice), 3, "a notice per ring");
    assert!(count(Wait::PollPause) >= 3, "status polled with blind pauses");

    e.set_strategy(Strategy::Sequential);
    e.start(&all, BUF).unwrap();
    e.stop(&all).unwrap();
    let waits = clock.take();
    assert!(waits.iter().all(|(w, _)| *w != Wait::TickDelay));
    assert_no_faults(&*nic);
    assert_eq!(e.dma_bytes(), 0);
}

#[test]
fn atl1c_rings_follow_its_queue_layout() {
    let (_, clock, e) = recorded(atl1c());
    // One TPD ring and one RFD ring, as Linux's atl1c drives the part:
    // one ring pair.
    assert_eq!(e.ring_count(), 1);
    let info = e.info(0).unwrap();
    assert_eq!((info.txq, info.rxq, info.vector), (Some(0), Some(0), 0));
    e.start(&e.all_rings(), BUF).unwrap();
    assert_eq!(e.dma_bytes(), 2 * DmaRing::bytes_for(64, BUF), "1 TX ring and 1 RX ring");
    e.restart(&e.all_rings(), BUF).unwrap();
    e.stop(&e.all_rings()).unwrap();
    assert_eq!(clock.take(), [], "no errata, so no timed waits at all");
    assert_eq!(e.dma_bytes(), 0);
}

#[test]
fn a_start_the_device_never_acknowledges_is_unwound_completely() {
    let (hw, nic, e) = faulty(8);
    e.start(&[0, 1], BUF).unwrap();
    nic.set_faults(Faults {
        swallow_enable: BTreeSet::from([QueueId::tx(5)]),
        ..Faults::default()
    });
    let err = e.start(&e.all_rings(), BUF).unwrap_err();
    assert_eq!(
        err,
        RingError::Nic(NicError::Timeout { enable: true, pending: vec![QueueId::tx(5)] })
    );
    // The rings that were running still run; the others are back at rest
    // with no buffers, and every queue the start enabled is disabled again.
    for r in 0..8u16 {
        let want = if r < 2 { RingState::Started } else { RingState::Freed };
        assert_eq!(e.state(r).unwrap(), want, "ring {r}");
        if r >= 2 {
            assert!(!hw.queue_enabled(QueueId::tx(r)) && !hw.queue_enabled(QueueId::rx(r)));
        }
    }
    assert_eq!(e.dma_bytes(), 2 * 2 * DmaRing::bytes_for(64, BUF));
    // Once the fault is gone the same start succeeds, and the device saw no
    // errata violation through all of it (the unwind honoured the gap too).
    nic.set_faults(Faults::default());
    e.start(&e.all_rings(), BUF).unwrap();
    assert_no_faults(&*hw);
}

#[test]
fn a_ring_the_device_refuses_to_program_leaves_nothing_allocated() {
    let (hw, nic, e) = faulty(4);
    nic.set_faults(Faults { refuse_ring: BTreeSet::from([QueueId::rx(2)]), ..Faults::default() });
    assert!(matches!(e.start(&e.all_rings(), BUF), Err(RingError::Nic(_))));
    assert_eq!(e.dma_bytes(), 0);
    assert!((0..4).all(|r| !e.state(r).unwrap().holds_dma()));
    assert_no_faults(&*hw);
}

#[test]
fn a_stop_the_device_does_not_acknowledge_stops_the_rest_and_can_be_retried() {
    let (hw, nic, e) = faulty(4);
    let all = e.all_rings();
    e.start(&all, BUF).unwrap();
    nic.set_faults(Faults {
        swallow_disable: BTreeSet::from([QueueId::rx(2)]),
        ..Faults::default()
    });
    let err = e.stop(&all).unwrap_err();
    assert_eq!(
        err,
        RingError::Nic(NicError::Timeout { enable: false, pending: vec![QueueId::rx(2)] })
    );
    // The others are stopped and freed; the stuck one waits, buffers held.
    use RingState::*;
    let states: Vec<_> = all.iter().map(|&r| e.state(r).unwrap()).collect();
    assert_eq!(states, [Freed, Freed, Quiescing, Freed]);
    assert_eq!(e.dma_bytes(), 2 * DmaRing::bytes_for(64, BUF));
    // Nothing is delivered to it meanwhile, and TX is refused.
    assert!(matches!(e.transmit(2, &[&[0u8; 60]]), Err(RingError::NotStarted { .. })));
    // Once the device answers, the same stop finishes the job, and the
    // port starts again cleanly.
    nic.set_faults(Faults::default());
    e.stop(&all).unwrap();
    assert!(all.iter().all(|&r| e.state(r).unwrap() == Freed));
    assert_eq!(e.dma_bytes(), 0);
    e.start(&all, BUF).unwrap();
    assert_no_faults(&*hw);
}

#[test]
fn a_sender_a_full_tx_ring_refused_sleeps_until_completions_free_it() {
    // A 10 Mb/s wire takes 1.2 ms a frame: the ring fills long before
    // the device has sent any of it back.
    let cfg = netadm_i40e::I40eConfig {
        queue_pairs: 1,
        ring_size: 64,
        speed_mbps: 10,
        ..Default::default()
    };
    let e = RingEngine::new(i40e_with(cfg), Strategy::Batched).unwrap();
    e.start(&[0], BUF).unwrap();
    let frame = [0u8; 1500];
    let mut queued = 0;
    while e.transmit_offload(0, &frame, netadm_nic::Offload::NONE).unwrap() {
        queued += 1;
    }
    assert!(queued > 0, "the ring took nothing");
    // Refused: the wait ends when the interrupt handler reclaims what the
    // wire has sent, long before its deadline.
    let (t, deadline) = (std::time::Instant::now(), Duration::from_secs(60));
    e.wait_tx_room(0, frame.len(), deadline);
    assert!(t.elapsed() < deadline, "woken by the completions, not by the deadline");
    assert!(e.transmit_offload(0, &frame, netadm_nic::Offload::NONE).unwrap(), "room after it");
    // A ring that is not open has nothing to wait for.
    e.stop(&[0]).unwrap();
    let t = std::time::Instant::now();
    e.wait_tx_room(0, frame.len(), deadline);
    assert!(t.elapsed() < deadline, "a stopped ring does not hold its sender");
}

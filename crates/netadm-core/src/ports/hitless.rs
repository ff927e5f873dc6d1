//! Reprogramming a running port's rings (an MTU change) without losing a
//! frame: make before break.
//!
//! The rings are split into two waves. For each wave: steer every sender
//! and the RSS indirection table away from it (pausing senders only while
//! the rings in flight drain, so no flow is reordered), stop it, give it
//! new buffers, start it (after the 50 ms re-enable gap, waited once for
//! the wave) and carry on; then steer back over every ring. Traffic keeps
//! flowing on the other wave throughout. A port without RSS (atl1c-class)
//! cannot keep receiving while its only RX ring is reprogrammed: it is
//! done with the shortest stop (senders paused, drained, all rings
//! restarted), and what the wire delivered meanwhile is dropped and
//! counted by the device.

use std::time::{Duration, Instant};

use netadm_nic::{NicError, QueueId};
use netadm_rings::{OpReport, RingError};

use super::power::{Hardware, Port};

/// The least time in-flight frames get to drain before a steering flip.
const DRAIN: Duration = Duration::from_secs(1);

/// How long `rings` of `p` get to drain: at least [`DRAIN`], and as long
/// as that many full rings take to leave at the port's line rate (the
/// device's queue acknowledgement deadline less its 250 ms is one ring's
/// drain time at the largest MTU): a slow wire under load, 10 Mb/s, takes
/// 0.6 s for one 512-slot ring of 1,500-byte frames. A deadline, not a
/// wait: a drain ends as soon as the rings are empty.
fn drain_within(p: &Port, rings: usize) -> Duration {
    let one = p.nic_caps().queue_ack_deadline.saturating_sub(Duration::from_millis(250));
    DRAIN.max(one.saturating_mul(u32::try_from(rings).unwrap_or(u32::MAX)))
}

/// Reprograms `rings` (a port's running rings) to `buf`-byte buffers.
pub(crate) fn reprogram(p: &Port, rings: &[u16], buf: u32) -> Result<OpReport, RingError> {
    let rss = p.nic_caps().rss_table_size > 0;
    if rings.len() < 2 || !rss {
        return short_stop(p, rings, buf);
    }
    let started = Instant::now();
    let (w1, w2) = rings.split_at(rings.len() / 2);
    let mut report: Option<OpReport> = None;
    for (name, wave, rest) in [("wave1", w1, w2), ("wave2", w2, w1)] {
        let t0 = Instant::now();
        steer(p, rest)?;
        let steer_time = t0.elapsed();
        match p.engine.restart(wave, buf) {
            Ok(mut r) => {
                r.add_phase("steer", steer_time);
                r.add_phase(name, t0.elapsed());
                report = Some(match report {
                    Some(acc) => acc.then(r),
                    None => r,
                });
            }
            Err(e) => {
                // Put senders and RSS back over whatever runs now.
                let running: Vec<u16> = rings
                    .iter()
                    .copied()
                    .filter(|&r| p.engine.state(r) == Ok(netadm_rings::RingState::Started))
                    .collect();
                let _ = steer(p, &running);
                return Err(e);
            }
        }
    }
    let t0 = Instant::now();
    steer(p, rings)?;
    let mut report = report.expect("two waves ran");
    report.add_phase("steer", t0.elapsed());
    report.total = started.elapsed();
    Ok(report)
}

/// The shortest stop: pause senders, drain, restart every ring, resume.
fn short_stop(p: &Port, rings: &[u16], buf: u32) -> Result<OpReport, RingError> {
    let t0 = Instant::now();
    p.tx_map.pause();
    let res = drain(p, rings).and_then(|()| p.engine.restart(rings, buf));
    p.tx_map.resume();
    let mut r = res?;
    r.add_phase("stop", t0.elapsed());
    r.total = t0.elapsed();
    Ok(r)
}

/// Moves senders and the RSS table onto `set`: pauses this port's
/// senders, waits for their frames to leave, points RSS at `set`, waits
/// for every frame already received on the rings that leave to be
/// delivered (frames from outside — a cable peer — keep arriving until RSS
/// moves), then lets senders go on over `set`.
pub(crate) fn steer(p: &Port, set: &[u16]) -> Result<(), RingError> {
    let running = p.tx_map.rings();
    p.tx_map.pause();
    let res = drain_tx(p, &running)
        .and_then(|()| {
            let nic = p.nic();
            if !set.is_empty() {
                for i in 0..nic.caps().rss_table_size {
                    nic.set_rss_entry(i, set[usize::from(i) % set.len()])?;
                }
            }
            Ok(())
        })
        .and_then(|()| drain_rx(p, &running, Instant::now() + drain_within(p, running.len())))
        .map(|()| p.tx_map.set(set.to_vec()));
    p.tx_map.resume();
    res
}

/// Waits until `rings` hold nothing in flight: every TX frame taken by the
/// device and every received frame delivered by the interrupt handler.
pub(crate) fn drain(p: &Port, rings: &[u16]) -> Result<(), RingError> {
    drain_tx(p, rings)?;
    drain_rx(p, rings, Instant::now() + drain_within(p, rings.len()))
}

fn drain_tx(p: &Port, rings: &[u16]) -> Result<(), RingError> {
    let nic = p.engine.nic();
    let txqs: Vec<u16> = rings.iter().copied().filter(|&r| r < nic.caps().tx_queues).collect();
    let deadline = Instant::now() + drain_within(p, txqs.len());
    nic.wait_tx_drained(&txqs, deadline).map_err(|rings| RingError::TxDrainTimeout { rings })?;
    // On a reflector what was sent comes back through the port's receive
    // packet buffer: nothing is in flight until that is empty too.
    if matches!(p.wire, netadm_config::Wire::Reflector)
        && !p.device_handle().wait_inbox_empty(deadline)
    {
        return Err(RingError::TxDrainTimeout { rings: txqs });
    }
    Ok(())
}

/// [`drain`] over the rings senders use on `p`, and, for a cable, until
/// what it sent has also been delivered at the far end (the peer's
/// receive packet buffer emptied and its RX rings reaped): a flow moved
/// to another member then cannot overtake its own frames.
pub(crate) fn drain_to_peer(hw: &Hardware, p: &Port) -> Result<(), RingError> {
    drain(p, &p.tx_map.rings())?;
    let netadm_config::Wire::Cable { peer } = &p.wire else { return Ok(()) };
    let Some(q) = hw.port(peer.as_str()) else { return Ok(()) };
    let deadline = Instant::now() + drain_within(p, p.tx_map.rings().len());
    if !q.device_handle().wait_inbox_empty(deadline) {
        return Err(RingError::TxDrainTimeout { rings: p.tx_map.rings() });
    }
    drain_rx(q, &q.engine.all_rings(), deadline)
}

fn drain_rx(p: &Port, rings: &[u16], deadline: Instant) -> Result<(), RingError> {
    // Delivery is the interrupt handler's: wait for its effect, yielding.
    while p.engine.rx_backlog(rings) > 0 {
        if Instant::now() > deadline {
            let pending: Vec<QueueId> = rings.iter().map(|&r| QueueId::rx(r)).collect();
            return Err(RingError::Nic(NicError::Timeout { enable: true, pending }));
        }
        std::thread::yield_now();
    }
    Ok(())
}

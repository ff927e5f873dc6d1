//! Driving ports from one plan to another: the rings to stop, to give
//! new buffers (hitlessly, in two waves, where the port has RSS) and to
//! start, ports in parallel; then moderation, doorbell batching and
//! steering.

use netadm_rings::OpReport;

use super::groups::{self, Groups};
use super::hitless;
use super::plan::{Knob, PortPlan};
use super::power::{Hardware, Port};
use crate::CoreError;
use crate::timing::Progress;
use crate::timing::Timing;

#[allow(clippy::too_many_arguments)]
pub(crate) fn drive(
    hw: &Hardware,
    from: &[PortPlan],
    to: &[PortPlan],
    ga: &Groups,
    gb: &Groups,
    t: &mut Timing,
    progress: Progress<'_>,
) -> Result<(), CoreError> {
    use netadm_rings::RingState;
    let ports = hw.ports();
    // VNIC groups that go (or move): their filters and senders leave
    // first, and what they hold in flight is delivered.
    for (name, g) in ga {
        if gb
            .get(name)
            .is_none_or(|n| n.device != g.device || n.base != g.base || n.count != g.count)
            && let Some(p) = hw.port(g.device.as_str())
        {
            groups::unplug(p, g).map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
        }
    }
    // Per port, from what its rings actually are (after a failure that
    // may differ from any plan): the rings to stop, to reprogram (new
    // buffers) and to start.
    let (mut stop, mut restart, mut start) = (vec![], vec![], vec![]);
    let mut shrink = vec![];
    for (i, b) in to.iter().enumerate() {
        let e = &ports[i].engine;
        let new = if b.active { b.rings } else { 0 };
        let mut want: Vec<u16> = (0..new).collect();
        if b.active {
            want.extend(b.groups.iter().flat_map(|&(base, n)| base..base + n));
        }
        let info = |r: u16| e.info(r).ok();
        let gone: Vec<u16> = (0..e.ring_count())
            .filter(|r| !want.contains(r))
            .filter(|&r| {
                info(r).is_some_and(|x| {
                    x.state != RingState::Freed && x.state != RingState::Unallocated
                })
            })
            .collect();
        let stale: Vec<u16> = want
            .iter()
            .copied()
            .filter(|&r| {
                info(r).is_some_and(|x| x.state == RingState::Started && x.buf_size != Some(b.buf))
            })
            .collect();
        let missing: Vec<u16> = want
            .iter()
            .copied()
            .filter(|&r| info(r).is_some_and(|x| x.state != RingState::Started))
            .collect();
        if !gone.is_empty() {
            if new > 0 && gone.iter().any(|r| ports[i].tx_map.rings().contains(r)) {
                shrink.push((i, new));
            }
            stop.push((i, gone));
        }
        if !stale.is_empty() {
            restart.push((i, stale));
        }
        if !missing.is_empty() {
            start.push((i, missing));
        }
    }
    // VNIC groups whose rings get new buffers: traffic aside first.
    for g in gb.values() {
        let stale = restart.iter().any(|(i, set)| {
            ports[*i].device == g.device && set.iter().any(|r| g.rings().contains(r))
        });
        if stale && let Some(p) = hw.port(g.device.as_str()) {
            groups::unplug(p, g).map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
        }
    }
    // Make before break: senders and RSS leave rings before they stop.
    for &(i, new) in &shrink {
        hitless::steer(&ports[i], &(0..new).collect::<Vec<u16>>())
            .map_err(|e| CoreError::hardware(format!("{}: {e}", ports[i].device)))?;
    }
    type Job = fn(&Port, &[u16], u32) -> Result<OpReport, netadm_rings::RingError>;
    type Work = [(usize, Vec<u16>)];
    let waves: [(&str, &Work, Job); 3] = [
        ("ring-stop", &stop, |p, set, _| p.engine.stop(set)),
        ("reprogram", &restart, |p, set, buf| {
            // The primary group's rings in two waves; VNIC groups'
            // rings with their traffic moved aside (groups::restart).
            let primary: Vec<u16> =
                set.iter().copied().filter(|r| p.tx_map.rings().contains(r)).collect();
            let rest: Vec<u16> = set.iter().copied().filter(|r| !primary.contains(r)).collect();
            let mut rep =
                if primary.is_empty() { None } else { Some(hitless::reprogram(p, &primary, buf)?) };
            if !rest.is_empty() {
                let r = groups::restart(p, &rest, buf)?;
                rep = Some(match rep {
                    Some(a) => a.then(r),
                    None => r,
                });
            }
            Ok(rep.expect("something to reprogram"))
        }),
        ("ring-start", &start, |p, set, buf| p.engine.start(set, buf)),
    ];
    let total = (stop.len() + restart.len() + start.len()) as u32;
    // Drops are charged to the ports whose rings change, and the far
    // ends of their cables.
    let touched: Vec<&Port> = ports
        .iter()
        .enumerate()
        .filter(|(i, _)| [&stop, &restart, &start].iter().any(|w| w.iter().any(|(j, _)| j == i)))
        .flat_map(|(_, p)| {
            let peer = match &p.wire {
                netadm_config::Wire::Cable { peer } => hw.port(peer.as_str()),
                _ => None,
            };
            std::iter::once(p).chain(peer)
        })
        .collect();
    let dropped = || -> u64 {
        touched
            .iter()
            .map(|p| {
                let h = p.nic().hw_stats();
                h.rx_dropped + h.wire_dropped
            })
            .sum()
    };
    let dropped_before = dropped();
    let discarded_before = t.counts.get("rx_discarded").copied().unwrap_or(0);
    let mut done = 0;
    for (name, idx, job) in waves {
        if idx.is_empty() {
            continue;
        }
        progress(name, done, total);
        // Ports are independent devices: drive them in parallel.
        let results: Vec<(usize, Result<OpReport, netadm_rings::RingError>)> =
            std::thread::scope(|s| {
                let hs: Vec<_> = idx
                    .iter()
                    .map(|(i, set)| {
                        let (p, buf) = (&ports[*i], to[*i].buf);
                        (
                            *i,
                            s.spawn(move || {
                                // Between ports: the others may be done.
                                #[cfg(feature = "failpoints")]
                                fail::fail_point!("core.execute.port", |_| Err(
                                    netadm_rings::RingError::QuiesceTimeout { rings: set.to_vec() }
                                ));
                                job(p, set, buf)
                            }),
                        )
                    })
                    .collect();
                hs.into_iter()
                    .map(|(i, h)| {
                        // A job that panicked is a bug: re-raised here
                        // and caught by `mutate`, which reports it and
                        // drives the hardware back.
                        (i, h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    })
                    .collect()
            });
        let mut first_err = None;
        for (i, r) in results {
            match r {
                Ok(rep) => t.absorb(name, &rep),
                Err(e) => {
                    first_err
                        .get_or_insert(CoreError::hardware(format!("{}: {e}", ports[i].device)));
                }
            }
        }
        t.phase(name);
        done += idx.len() as u32;
        progress(name, done, total);
        if let Some(e) = first_err {
            return Err(e);
        }
    }
    if total > 0 {
        // What the devices and wires dropped, and the rings discarded,
        // while rings changed.
        let discarded = t.counts.get("rx_discarded").copied().unwrap_or(0) - discarded_before;
        t.count("frames_dropped", dropped() - dropped_before + discarded);
    }
    // VNIC groups: filters on and senders over their rings.
    for g in gb.values() {
        if let Some(p) = hw.port(g.device.as_str())
            && p.rings_started() > 0
        {
            groups::plug(p, g).map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
        }
    }
    // Interrupt moderation, doorbell batching, and senders and RSS over
    // the rings that run now (steered: growing moves flows to new
    // rings, which must not reorder them).
    for (i, (a, b)) in from.iter().zip(to).enumerate() {
        let p = &ports[i];
        if a.moderation != b.moderation || (b.active && !a.active) {
            moderate(p, &b.moderation)?;
        }
        p.engine.set_xmit_batch(b.xmit_batch);
        p.device_handle().write_rx_csum(b.rx_csum);
        let running: Vec<u16> = if b.active { (0..b.rings).collect() } else { vec![] };
        if p.tx_map.rings() != running {
            if running.is_empty() {
                p.tx_map.set(running);
            } else {
                hitless::steer(p, &running)
                    .map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
            }
        }
    }
    Ok(())
}

/// Programs each of the port's interrupt moderation knobs as `knobs`
/// says: an adaptive one is handed to the interrupt handler, which owns
/// the register from then on; a fixed one is taken back from it first,
/// then written (its default where none is set).
fn moderate(p: &Port, knobs: &[Knob]) -> Result<(), CoreError> {
    let err = |e: netadm_nic::NicError| CoreError::hardware(format!("{}: {e}", p.device));
    let nic = p.nic();
    let caps = nic.caps();
    for (k, want) in caps.moderation.iter().zip(knobs) {
        for v in k.vectors.clone() {
            if k.adaptive {
                p.engine.set_adaptive(v, want.adaptive);
            }
            if !want.adaptive {
                nic.set_throttle(v, k.units(want.value, caps.throttle_unit)).map_err(err)?;
            }
        }
    }
    Ok(())
}

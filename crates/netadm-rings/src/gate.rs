//! Per-ring interrupt gate: how a stopping ring is guaranteed never to see
//! another completion.
//!
//! Interrupt handlers [`Gate::enter`] before touching a ring and
//! [`Gate::exit`] after. Quiescing closes the gate — no handler enters after
//! that — and then waits for the handlers already inside to leave. This is
//! illumos i40e's `itrq_intr_quiesce`/`itrq_intr_busy` pair made lock-free
//! on the interrupt path.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

const OPEN: u32 = 1 << 31;

/// Wakes quiescers when the last handler leaves a closed gate.
#[derive(Debug, Default)]
pub(crate) struct GateEvents {
    m: Mutex<()>,
    cv: Condvar,
}

/// One ring's gate: an open bit and a count of handlers inside.
#[derive(Debug, Default)]
pub(crate) struct Gate(AtomicU32);

impl Gate {
    /// Lets handlers in.
    pub(crate) fn open(&self) {
        self.0.fetch_or(OPEN, Ordering::AcqRel);
    }

    /// Enters if open; the caller must [`Gate::exit`] iff this returns true.
    pub(crate) fn enter(&self) -> bool {
        let mut s = self.0.load(Ordering::Acquire);
        loop {
            if s & OPEN == 0 {
                return false;
            }
            match self.0.compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Leaves; wakes a quiescer if this was the last handler of a closed gate.
    pub(crate) fn exit(&self, ev: &GateEvents) {
        if self.0.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _g = ev.m.lock().unwrap();
            ev.cv.notify_all();
        }
    }

    /// Stops handlers entering. Those inside carry on until they exit.
    pub(crate) fn close(&self) {
        self.0.fetch_and(!OPEN, Ordering::AcqRel);
    }

    fn inside(&self) -> u32 {
        self.0.load(Ordering::Acquire) & !OPEN
    }
}

/// Waits until no handler is inside any of `gates` (all closed), or the
/// deadline passes; returns the indices still busy.
pub(crate) fn wait_quiet<'a>(
    gates: impl Iterator<Item = (u16, &'a Gate)> + Clone,
    ev: &GateEvents,
    deadline: Instant,
) -> Result<(), Vec<u16>> {
    let mut g = ev.m.lock().unwrap();
    loop {
        if gates.clone().all(|(_, gate)| gate.inside() == 0) {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(gates.filter(|(_, gate)| gate.inside() != 0).map(|(i, _)| i).collect());
        }
        g = ev.cv.wait_timeout(g, deadline - now).unwrap().0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn closed_gate_refuses_and_waits_for_those_inside() {
        let ev = GateEvents::default();
        let g = Gate::default();
        assert!(!g.enter(), "a new gate is closed");
        g.open();
        assert!(g.enter());
        g.close();
        assert!(!g.enter());
        let soon = Instant::now() + Duration::from_millis(1);
        assert_eq!(wait_quiet([(0, &g)].into_iter(), &ev, soon), Err(vec![0]));
        g.exit(&ev);
        assert_eq!(wait_quiet([(0, &g)].into_iter(), &ev, soon), Ok(()));
    }
}

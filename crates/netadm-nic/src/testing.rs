//! Test helpers for crates that drive a [`Nic`]: a fault-injecting wrapper
//! that works around any device (smoltcp's wrapper-device idea).
//!
//! Enabled by the `test-utils` feature; never part of a release build.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Caps, DmaRing, Nic, NicError, QueueId};

/// Which device operations to sabotage.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// Enable requests for these queues are swallowed: the device never
    /// acknowledges them, as a hung queue would.
    pub swallow_enable: BTreeSet<QueueId>,
    /// Programming a ring into these queues fails.
    pub refuse_ring: BTreeSet<QueueId>,
    /// Disable requests for these queues are swallowed: they stay enabled.
    pub swallow_disable: BTreeSet<QueueId>,
    /// Programming a ring into these queues panics (a driver bug).
    pub panic_ring: BTreeSet<QueueId>,
    /// Each fault strikes once, then the queue behaves again.
    pub once: bool,
}

/// Wraps a [`Nic`] and injects [`Faults`]; everything else passes through.
pub struct FaultyNic {
    inner: Arc<dyn Nic>,
    caps: Caps,
    faults: Mutex<Faults>,
}

impl FaultyNic {
    /// Wraps `inner`; waits for acknowledgements give up after `deadline`
    /// so a swallowed request fails a test quickly.
    pub fn new(inner: Arc<dyn Nic>, deadline: Duration) -> Self {
        let mut caps = inner.caps().clone();
        caps.queue_ack_deadline = deadline;
        Self { inner, caps, faults: Mutex::new(Faults::default()) }
    }

    /// Replaces the faults to inject.
    pub fn set_faults(&self, f: Faults) {
        *self.faults.lock().unwrap() = f;
    }

    /// Whether the fault in the set `pick` selects strikes `q` now: once
    /// faults are taken out of their set as they strike.
    fn strikes(&self, q: QueueId, pick: fn(&mut Faults) -> &mut BTreeSet<QueueId>) -> bool {
        let mut f = self.faults.lock().unwrap();
        let once = f.once;
        let set = pick(&mut f);
        let hit = set.contains(&q);
        if hit && once {
            set.remove(&q);
        }
        hit
    }
}

/// Only what the wrapper changes is written here; every other call goes to
/// the wrapped driver, its own overrides included ([`Nic::below`]).
impl Nic for FaultyNic {
    fn below(&self) -> Option<&dyn Nic> {
        Some(&*self.inner)
    }
    fn caps(&self) -> &Caps {
        &self.caps
    }
    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        if ring.is_some() && self.strikes(q, |f| &mut f.panic_ring) {
            panic!("injected driver panic programming {q}");
        }
        if ring.is_some() && self.faults.lock().unwrap().refuse_ring.contains(&q) {
            return Err(NicError::OutOfRange { register: "injected fault", value: 0, max: 0 });
        }
        self.inner.set_ring(q, ring)
    }
    fn request_enable(&self, q: QueueId) -> Result<(), NicError> {
        if self.strikes(q, |f| &mut f.swallow_enable) {
            return Ok(());
        }
        self.inner.request_enable(q)
    }
    fn request_disable(&self, q: QueueId) -> Result<(), NicError> {
        if self.strikes(q, |f| &mut f.swallow_disable) {
            return Ok(());
        }
        self.inner.request_disable(q)
    }
}

//! Test helpers for crates that drive a [`Nic`]: a fault-injecting wrapper
//! that works around any device (smoltcp's wrapper-device idea).
//!
//! Enabled by the `test-utils` feature; never part of a release build.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{Caps, DmaAccount, DmaRing, HwStats, InterruptHandler, Nic, NicError, QueueId};

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
}

impl Nic for FaultyNic {
    fn caps(&self) -> &Caps {
        &self.caps
    }
    fn dma_account(&self) -> &Arc<DmaAccount> {
        self.inner.dma_account()
    }
    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        if ring.is_some() {
            let mut f = self.faults.lock().unwrap();
            if f.panic_ring.contains(&q) {
                if f.once {
                    f.panic_ring.remove(&q);
                }
                drop(f);
                panic!("injected driver panic programming {q}");
            }
        }
        if ring.is_some() && self.faults.lock().unwrap().refuse_ring.contains(&q) {
            return Err(NicError::OutOfRange { register: "injected fault", value: 0, max: 0 });
        }
        self.inner.set_ring(q, ring)
    }
    fn default_vector(&self, q: QueueId) -> u16 {
        self.inner.default_vector(q)
    }
    fn map_vector(&self, q: QueueId, vector: u16) -> Result<(), NicError> {
        self.inner.map_vector(q, vector)
    }
    fn set_throttle(&self, vector: u16, units: u32) -> Result<(), NicError> {
        self.inner.set_throttle(vector, units)
    }
    fn trigger_interrupt(&self, vector: u16) {
        self.inner.trigger_interrupt(vector);
    }
    fn set_interrupt_handler(&self, handler: Option<InterruptHandler>) {
        self.inner.set_interrupt_handler(handler);
    }
    fn request_enable(&self, q: QueueId) -> Result<(), NicError> {
        let mut f = self.faults.lock().unwrap();
        if f.swallow_enable.contains(&q) {
            if f.once {
                f.swallow_enable.remove(&q);
            }
            return Ok(());
        }
        drop(f);
        self.inner.request_enable(q)
    }
    fn request_disable(&self, q: QueueId) -> Result<(), NicError> {
        let mut f = self.faults.lock().unwrap();
        if f.swallow_disable.contains(&q) {
            if f.once {
                f.swallow_disable.remove(&q);
            }
            return Ok(());
        }
        drop(f);
        self.inner.request_disable(q)
    }
    fn tx_pre_disable(&self, q: u16) -> Result<(), NicError> {
        self.inner.tx_pre_disable(q)
    }
    fn queue_enabled(&self, q: QueueId) -> bool {
        self.inner.queue_enabled(q)
    }
    fn wait_queues(
        &self,
        qs: &[QueueId],
        enabled: bool,
        deadline: Instant,
    ) -> Result<(), NicError> {
        self.inner.wait_queues(qs, enabled, deadline)
    }
    fn wait_tx_drained(&self, qs: &[u16], deadline: Instant) -> Result<(), Vec<u16>> {
        self.inner.wait_tx_drained(qs, deadline)
    }
    fn doorbell(&self, q: QueueId) {
        self.inner.doorbell(q);
    }
    fn hw_stats(&self) -> HwStats {
        self.inner.hw_stats()
    }
}

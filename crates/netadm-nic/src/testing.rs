//! Test helpers for crates that drive a [`Nic`]: a fault-injecting wrapper
//! that works around any device (smoltcp's wrapper-device idea), and test
//! frames.
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

/// An Ethernet + IPv4 + TCP frame from 192.0.2.1 to 192.0.2.2 (TTL 64,
/// no options), TCP port `sport` to `dport`, sequence number `seq`,
/// `flags`, with `payload` bytes of zeros after the headers and every
/// address, identifier and checksum left zero, for the test to fill in.
/// The IPv4 total length saturates at 65535 (a superframe's).
pub fn tcp4_frame(payload: usize, sport: u16, dport: u16, seq: u32, flags: u8) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((40 + payload).min(65535) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[192, 0, 2, 1]);
    f[30..34].copy_from_slice(&[192, 0, 2, 2]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..42].copy_from_slice(&seq.to_be_bytes());
    f[46] = 5 << 4;
    f[47] = flags;
    f
}

//! Fixtures shared by the lifecycle tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netadm_atl1c::{Atl1c, Atl1cConfig};
use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::emu::WireMode;
use netadm_nic::{Errata, Nic};
use netadm_rings::{Clock, SystemClock, Wait};

/// An i40e-class port with `pairs` queue pairs and the real errata.
pub fn i40e(pairs: u16) -> Arc<I40e> {
    i40e_with(I40eConfig { queue_pairs: pairs, ring_size: 64, ..I40eConfig::default() })
}

/// An i40e-class port whose errata are shortened so tests churn quickly;
/// the device still enforces them.
pub fn i40e_fast(pairs: u16, wire: WireMode) -> Arc<I40e> {
    i40e_with(I40eConfig {
        queue_pairs: pairs,
        vectors: 4,
        ring_size: 64,
        wire,
        errata: Errata {
            tx_pre_disable: Some(Duration::from_micros(50)),
            reenable_gap: Some(Duration::from_millis(2)),
        },
        ..I40eConfig::default()
    })
}

/// Builds an i40e-class port.
pub fn i40e_with(cfg: I40eConfig) -> Arc<I40e> {
    Arc::new(I40e::attach("test0", &cfg).expect("valid config"))
}

/// An atl1c-class port.
pub fn atl1c() -> Arc<Atl1c> {
    Arc::new(
        Atl1c::attach("test1", &Atl1cConfig { ring_size: 64, ..Atl1cConfig::default() }).unwrap(),
    )
}

/// The real clock, recording every timed wait the engine makes.
#[derive(Default)]
pub struct RecordingClock {
    waits: Mutex<Vec<(Wait, Instant)>>,
}

impl RecordingClock {
    /// The waits so far, and forgets them.
    pub fn take(&self) -> Vec<(Wait, Instant)> {
        std::mem::take(&mut self.waits.lock().unwrap())
    }
}

impl Clock for RecordingClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep_until(&self, deadline: Instant, why: Wait) {
        self.waits.lock().unwrap().push((why, deadline));
        SystemClock.sleep_until(deadline, why);
    }
}

/// Asserts the device saw no errata violation.
pub fn assert_no_faults(nic: &dyn Nic) {
    let s = nic.hw_stats();
    assert_eq!(s.faults(), 0, "device faults: {s:?}");
}

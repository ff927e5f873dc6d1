//! Userspace driver for an i40e-class NIC port, and the emulated hardware it
//! drives ([`hw`]).
//!
//! The driver half implements [`netadm_nic::Nic`] over the common plumbing
//! ([`EmuNic`]: QENA_REQ/QENA_STAT queue enables, the TX pre-disable
//! notice, queue contexts, tail doorbells, ITR and the vector map) and
//! writes what i40e does differently: queue pairs spread over vectors, the
//! RSS indirection table, MAC filters for ring groups and the VLAN filter
//! table. What its queue context can describe is data
//! ([`hw::RING_LIMITS`]), which the common half checks. It never waits on its own:
//! batching waits is the ring engine's job.

pub mod hw;

use netadm_nic::emu::{Device, MacFilter};
use netadm_nic::{EmuNic, Nic, NicError, QueueId};

pub use hw::{ConfigError, I40eConfig};

/// Default ITR: 50 µs (25 × 2 µs), Linux's I40E_ITR_20K.
pub const DEFAULT_ITR_UNITS: u32 = 25;

/// A driver instance bound to one i40e-class port.
#[derive(Debug)]
pub struct I40e {
    base: EmuNic,
}

impl I40e {
    /// Powers on the port `name` and attaches the driver to it.
    pub fn attach(name: &str, cfg: &I40eConfig) -> Result<Self, ConfigError> {
        Ok(Self { base: hw::power_on(name, cfg)? })
    }
}

/// What i40e does differently from the common plumbing; the rest is
/// [`EmuNic`]'s.
impl Nic for I40e {
    fn below(&self) -> Option<&dyn Nic> {
        Some(&self.base)
    }

    fn default_vector(&self, q: QueueId) -> u16 {
        // A queue pair's TX and RX share a vector; pairs are spread round
        // robin, as the Linux and illumos drivers do.
        q.index % self.caps().vectors
    }

    fn set_rss_entry(&self, index: u16, rxq: u16) -> Result<(), NicError> {
        self.base.hw().write_rss_lut(index, rxq)
    }

    fn set_mac_filter(&self, slot: u16, filter: Option<MacFilter>) -> Result<(), NicError> {
        self.base.hw().write_mac_filter(slot, filter)
    }

    fn set_vlan_filter(&self, vid: u16, on: bool) -> Result<(), NicError> {
        self.base.hw().write_vlan_filter(vid, on)
    }

    fn vlan_filter(&self) -> Result<Vec<u16>, NicError> {
        Ok(self.base.hw().vlan_filter_vids())
    }
}

/// Conveniences for code that holds the concrete driver (its tests, the
/// benchmarks); the core asks everything through [`Nic`].
impl I40e {
    /// The VIDs in the VLAN filter table.
    pub fn vlan_filter(&self) -> Vec<u16> {
        self.base.hw().vlan_filter_vids()
    }

    /// The emulated device itself: for wiring it (cables) and cutting its
    /// carrier, which are not driver operations.
    pub fn device(&self) -> &Device {
        self.base.hw()
    }
}

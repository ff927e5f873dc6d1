//! Userspace driver for an i40e-class NIC port, and the emulated hardware it
//! drives ([`hw`]).
//!
//! The driver half implements [`netadm_nic::Nic`] by programming the
//! device's registers: QENA_REQ/QENA_STAT for queue enables, the TX
//! pre-disable notice, queue contexts, tail doorbells, ITR and the vector
//! map. It never waits on its own: batching waits is the ring engine's job.

pub mod hw;

use std::sync::Arc;
use std::time::Instant;

use netadm_nic::emu::{Device, MacFilter};
use netadm_nic::{Caps, DmaAccount, DmaRing, HwStats, InterruptHandler, Nic, NicError, QueueId};

pub use hw::{ConfigError, I40eConfig};

/// Default ITR: 50 µs (25 × 2 µs), Linux's I40E_ITR_20K.
pub const DEFAULT_ITR_UNITS: u32 = 25;

/// A driver instance bound to one i40e-class port.
#[derive(Debug)]
pub struct I40e {
    hw: Device,
    dma: Arc<DmaAccount>,
}

impl I40e {
    /// Powers on the port `name` and attaches the driver to it.
    pub fn attach(name: &str, cfg: &I40eConfig) -> Result<Self, ConfigError> {
        let hw = hw::power_on(name, cfg)?;
        for v in 0..cfg.vectors {
            hw.write_throttle(v, DEFAULT_ITR_UNITS).expect("default ITR is in range");
        }
        // VLAN filtering is on, as Linux's i40e starts it: tagged frames
        // pass only for the VIDs the driver puts in the table.
        hw.write_vlan_filter_enable(true);
        Ok(Self { hw, dma: DmaAccount::new() })
    }

    /// Programs MAC filter `slot` (a VNIC's ring group), or clears it.
    pub fn set_mac_filter(&self, slot: u16, filter: Option<MacFilter>) -> Result<(), NicError> {
        self.hw.write_mac_filter(slot, filter)
    }

    /// Adds VID `vid` to the device's VLAN filter table, or removes it
    /// (at most `netadm_nic::vlan::FILTER_ENTRIES`).
    pub fn set_vlan_filter(&self, vid: u16, on: bool) -> Result<(), NicError> {
        self.hw.write_vlan_filter(vid, on)
    }

    /// The VIDs in the VLAN filter table.
    pub fn vlan_filter(&self) -> Vec<u16> {
        self.hw.vlan_filter_vids()
    }

    /// Steers RSS indirection table entry `index` to RX queue `rxq`.
    pub fn set_rss_entry(&self, index: u16, rxq: u16) -> Result<(), NicError> {
        self.hw.write_rss_lut(index, rxq)
    }
}

impl I40e {
    /// The emulated device itself: for wiring it (cables) and cutting its
    /// carrier, which are not driver operations.
    pub fn device(&self) -> &Device {
        &self.hw
    }
}

impl Nic for I40e {
    fn caps(&self) -> &Caps {
        self.hw.caps()
    }

    fn dma_account(&self) -> &Arc<DmaAccount> {
        &self.dma
    }

    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        if let Some(r) = &ring {
            let caps = self.hw.caps();
            if r.slots() != caps.ring_size {
                return Err(NicError::OutOfRange {
                    register: "queue context qlen",
                    value: r.slots().into(),
                    max: caps.ring_size.into(),
                });
            }
            if r.buf_size() % 128 != 0 || r.buf_size() > hw::MAX_RX_BUF {
                return Err(NicError::OutOfRange {
                    register: "queue context dbuff (128-byte units)",
                    value: r.buf_size().into(),
                    max: hw::MAX_RX_BUF.into(),
                });
            }
        }
        self.hw.write_ring(q, ring)
    }

    fn default_vector(&self, q: QueueId) -> u16 {
        // A queue pair's TX and RX share a vector; pairs are spread round
        // robin, as the Linux and illumos drivers do.
        q.index % self.hw.caps().vectors
    }

    fn map_vector(&self, q: QueueId, vector: u16) -> Result<(), NicError> {
        self.hw.write_vector_map(q, vector)
    }

    fn set_throttle(&self, vector: u16, units: u32) -> Result<(), NicError> {
        self.hw.write_throttle(vector, units)
    }

    fn trigger_interrupt(&self, vector: u16) {
        self.hw.write_sw_interrupt(vector);
    }

    fn set_interrupt_handler(&self, handler: Option<InterruptHandler>) {
        self.hw.set_interrupt_handler(handler);
    }

    fn request_enable(&self, q: QueueId) -> Result<(), NicError> {
        self.hw.write_enable_request(q, true)
    }

    fn request_disable(&self, q: QueueId) -> Result<(), NicError> {
        self.hw.write_enable_request(q, false)
    }

    fn tx_pre_disable(&self, q: u16) -> Result<(), NicError> {
        self.hw.write_tx_pre_disable(q)
    }

    fn queue_enabled(&self, q: QueueId) -> bool {
        self.hw.read_enable_status(q)
    }

    fn wait_queues(
        &self,
        qs: &[QueueId],
        enabled: bool,
        deadline: Instant,
    ) -> Result<(), NicError> {
        self.hw.wait_queues(qs, enabled, deadline)
    }

    fn wait_tx_drained(&self, qs: &[u16], deadline: Instant) -> Result<(), Vec<u16>> {
        self.hw.wait_tx_drained(qs, deadline)
    }

    fn doorbell(&self, q: QueueId) {
        self.hw.write_tail(q);
    }

    fn hw_stats(&self) -> HwStats {
        self.hw.stats()
    }
}

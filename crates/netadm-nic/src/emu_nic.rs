//! The common plumbing of a driver over an emulated device: the bottom
//! layer every driver crate builds on (see [`Nic`]'s "Layers").

use std::sync::Arc;
use std::time::Instant;

use crate::dma::{DmaAccount, DmaRing};
use crate::emu::{Device, EmuConfig};
use crate::nic::Nic;
use crate::types::{Caps, HwStats, InterruptHandler, NicError, QueueId};

/// A driver's common half over an emulated [`Device`]: every [`Nic`]
/// method as the plain register operation, and the port's DMA account.
/// A driver crate holds one, returns it from [`Nic::below`], and writes
/// only what its class does differently; the optional features (RSS, MAC
/// and VLAN filters) are not here, so a class that does not write them
/// answers [`NicError::Unsupported`].
///
/// It is a bottom layer: it writes every required [`Nic`] method itself,
/// so none reaches a layer below that does not exist.
#[derive(Debug)]
pub struct EmuNic {
    hw: Device,
    dma: Arc<DmaAccount>,
}

impl EmuNic {
    /// Powers on device `name` and brings it to the state a driver's
    /// attach leaves it in: each moderation knob at its default, and VLAN
    /// filtering on where the device has a table (as Linux's i40e starts
    /// it: tagged frames pass only for the VIDs put in it).
    pub fn power_on(cfg: EmuConfig, name: &str) -> Self {
        let hw = Device::new(cfg, name);
        for knob in &hw.caps().moderation {
            for v in knob.vectors.clone() {
                hw.write_throttle(v, knob.default).expect("a knob's default is in range");
            }
        }
        if hw.caps().vlan_filters > 0 {
            hw.write_vlan_filter_enable(true);
        }
        Self { hw, dma: DmaAccount::new() }
    }

    /// The device, for a driver's own register writes.
    pub fn hw(&self) -> &Device {
        &self.hw
    }
}

impl Nic for EmuNic {
    fn caps(&self) -> &Caps {
        self.hw.caps()
    }

    fn dma_account(&self) -> &Arc<DmaAccount> {
        &self.dma
    }

    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        self.hw.write_ring(q, ring)
    }

    fn default_vector(&self, _q: QueueId) -> u16 {
        // The device's reset mapping: every queue on vector 0.
        0
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

    fn wait_queues(&self, qs: &[QueueId], on: bool, until: Instant) -> Result<(), NicError> {
        self.hw.wait_queues(qs, on, until)
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

    fn device(&self) -> Option<&Device> {
        Some(&self.hw)
    }
}

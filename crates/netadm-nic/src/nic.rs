//! The driver API: what the ring engine, the datapath and the core may ask
//! of any NIC driver.
//!
//! Methods mirror register operations: each is cheap and does not wait,
//! except [`Nic::wait_queues`] and [`Nic::wait_tx_drained`], which block on
//! device events up to a deadline. Batching (request many, then wait once)
//! is the caller's business and is what the interface is shaped for.

use std::sync::Arc;
use std::time::Instant;

use crate::dma::{DmaAccount, DmaRing};
use crate::emu::Device;
use crate::types::{Caps, HwStats, InterruptHandler, MacFilter, Moderation, NicError, QueueId};

/// A NIC driver instance bound to one port.
///
/// # Layers: each writes only what differs
///
/// A NIC is built in layers, and every method a layer does not write goes
/// to the layer below it ([`Nic::below`]): an i40e driver is the common
/// plumbing over an emulated device ([`crate::EmuNic`], which also checks
/// rings against the class's queue context limits, given as data) plus
/// what i40e does differently (its vector layout, RSS and filters); a
/// test wrapper (`testing::FaultyNic`, feature `test-utils`) is the driver it wraps
/// plus the faults it injects.
///
/// Why provided methods over one accessor, and not a forwarding macro or
/// a `Deref` to the layer below: the layer below is a `dyn Nic`, so a call
/// a layer passes on reaches the layer below's own overrides (a wrapper
/// around an i40e driver still lays its queues out as i40e does, never as
/// the bare device would); a method added here later is forwarded by every layer at
/// once, where a macro's list or a hand-written forwarder would silently
/// miss it; and each layer's `impl` reads as what the layer adds, nothing
/// else. `Deref` would not do: a layer must be able to override a method
/// of the layer below, and a deref'd call never comes back to the layer.
///
/// The bottom layer (no layer below: [`crate::EmuNic`], or a future NIC
/// that is not emulated) writes every method except the optional features
/// (RSS, MAC and VLAN filters), whose provided methods then answer
/// [`NicError::Unsupported`] naming the class and the feature.
pub trait Nic: Send + Sync {
    /// The layer every method this one does not write goes to; None for a
    /// bottom layer, which writes every required method itself.
    fn below(&self) -> Option<&dyn Nic> {
        None
    }

    /// The device's capabilities.
    fn caps(&self) -> &Caps {
        lower(self).caps()
    }

    /// The DMA account every ring of this port is charged to.
    fn dma_account(&self) -> &Arc<DmaAccount> {
        lower(self).dma_account()
    }

    /// Programs the queue context: the ring the queue uses (its buffer size
    /// included), or none. Only legal while the queue is disabled.
    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        lower(self).set_ring(q, ring)
    }

    /// The vector the device wants queue `q` on: how its interrupt causes
    /// and throttle timers are laid out (i40e: pairs spread over vectors;
    /// atl1c: RX on the rx-imt vector, TX on the tx-imt vector).
    fn default_vector(&self, q: QueueId) -> u16 {
        lower(self).default_vector(q)
    }

    /// Routes the queue's interrupts to MSI-X `vector`.
    fn map_vector(&self, q: QueueId, vector: u16) -> Result<(), NicError> {
        lower(self).map_vector(q, vector)
    }

    /// Sets the interrupt throttle of `vector` in device units
    /// ([`Caps::throttle_unit`]); 0 disables throttling.
    fn set_throttle(&self, vector: u16, units: u32) -> Result<(), NicError> {
        lower(self).set_throttle(vector, units)
    }

    /// Sets moderation knob `knob` (one of [`Caps::moderation`]) to the
    /// property value `value` in the knob's unit (None: its default): the
    /// value in device units ([`Moderation::units`]) into the throttle
    /// register of each of its vectors, through [`Nic::set_throttle`] of
    /// this layer (so it is not passed down whole: every layer's throttle
    /// writes see it). A knob the device lacks is
    /// [`NicError::Unsupported`], naming its property; nothing is written.
    /// It does not touch adaptive moderation: that is the ring engine's
    /// (`RingEngine::set_adaptive` for each vector, before this).
    fn set_moderation(&self, knob: &Moderation, value: Option<u32>) -> Result<(), NicError> {
        let caps = self.caps();
        if !caps.moderation.contains(knob) {
            return Err(NicError::Unsupported { class: caps.class, feature: knob.prop });
        }
        let units = knob.units(value, caps.throttle_unit);
        for v in knob.vectors.clone() {
            self.set_throttle(v, units)?;
        }
        Ok(())
    }

    /// Raises `vector` from software (i40e: PFINT_DYN_CTLN.SWINT_TRIG), so a
    /// handler that stopped at its budget is called again after the other
    /// pending vectors: how polling stays bounded and fair.
    fn trigger_interrupt(&self, vector: u16) {
        lower(self).trigger_interrupt(vector);
    }

    /// Masks or unmasks `vector` (i40e: PFINT_DYN_CTLN.INTENA; atl1c: the
    /// interrupt mask register). A masked vector is not raised: its causes
    /// stay pending, and unmasking raises it (after its throttle) if any
    /// are. A busy poller masks the vectors of the rings it polls, as
    /// Linux's busy-poll ownership of a NAPI keeps its interrupt masked.
    fn mask_interrupt(&self, vector: u16, masked: bool) {
        lower(self).mask_interrupt(vector, masked);
    }

    /// Ends a busy poller's hold on `vector`: unmasks it (and raises it
    /// from software if `raise`), delivering what that raises on the
    /// calling thread, as Linux's busy poll schedules a NAPI left with
    /// work on the polling CPU, rather than waking the interrupt thread.
    fn release_interrupt(&self, vector: u16, raise: bool) {
        lower(self).release_interrupt(vector, raise);
    }

    /// Installs the interrupt handler (one per device; called per vector).
    fn set_interrupt_handler(&self, handler: Option<InterruptHandler>) {
        lower(self).set_interrupt_handler(handler);
    }

    /// Requests the queue be enabled; acknowledged asynchronously.
    fn request_enable(&self, q: QueueId) -> Result<(), NicError> {
        lower(self).request_enable(q)
    }

    /// Requests the queue be disabled; acknowledged asynchronously.
    fn request_disable(&self, q: QueueId) -> Result<(), NicError> {
        lower(self).request_disable(q)
    }

    /// Gives a TX queue the notice some devices need before a disable
    /// ([`crate::Errata::tx_pre_disable`]); a no-op where none is needed.
    fn tx_pre_disable(&self, q: u16) -> Result<(), NicError> {
        lower(self).tx_pre_disable(q)
    }

    /// Reads the queue's enable status as the device last acknowledged it.
    fn queue_enabled(&self, q: QueueId) -> bool {
        lower(self).queue_enabled(q)
    }

    /// Blocks until every queue in `qs` reports `enabled`, or the deadline
    /// passes. Event-driven: the device wakes waiters on each acknowledgement.
    fn wait_queues(
        &self,
        qs: &[QueueId],
        enabled: bool,
        deadline: Instant,
    ) -> Result<(), NicError> {
        lower(self).wait_queues(qs, enabled, deadline)
    }

    /// Blocks until the device has consumed every TX descriptor handed to
    /// `qs`, or the deadline passes; returns the queues still holding frames.
    fn wait_tx_drained(&self, qs: &[u16], deadline: Instant) -> Result<(), Vec<u16>> {
        lower(self).wait_tx_drained(qs, deadline)
    }

    /// Writes the queue's tail doorbell: the device may process slots up to
    /// the ring's tail. Costs what an uncached MMIO write costs.
    fn doorbell(&self, q: QueueId) {
        lower(self).doorbell(q);
    }

    /// The device's own counters.
    fn hw_stats(&self) -> HwStats {
        lower(self).hw_stats()
    }

    /// Steers RSS indirection table entry `index` (below
    /// [`Caps::rss_table_size`]) to RX queue `rxq`.
    fn set_rss_entry(&self, index: u16, rxq: u16) -> Result<(), NicError> {
        match self.below() {
            Some(b) => b.set_rss_entry(index, rxq),
            None => Err(unsupported(self, "RSS")),
        }
    }

    /// Programs MAC filter `slot` (below [`Caps::ring_groups`]: a VNIC's
    /// ring group), or clears it.
    fn set_mac_filter(&self, slot: u16, filter: Option<MacFilter>) -> Result<(), NicError> {
        match self.below() {
            Some(b) => b.set_mac_filter(slot, filter),
            None => Err(unsupported(self, "MAC filter table")),
        }
    }

    /// Adds VID `vid` to the VLAN filter table, or removes it (at most
    /// [`Caps::vlan_filters`] VIDs).
    fn set_vlan_filter(&self, vid: u16, on: bool) -> Result<(), NicError> {
        match self.below() {
            Some(b) => b.set_vlan_filter(vid, on),
            None => Err(unsupported(self, "VLAN filter table")),
        }
    }

    /// The VIDs in the VLAN filter table.
    fn vlan_filter(&self) -> Result<Vec<u16>, NicError> {
        match self.below() {
            Some(b) => b.vlan_filter(),
            None => Err(unsupported(self, "VLAN filter table")),
        }
    }

    /// The emulated device behind the driver, for what is not a driver
    /// operation: its wire (cables, afpacket, carrier), receive checksum
    /// reporting, its receive packet buffer. None for a NIC that is not
    /// emulated.
    fn device(&self) -> Option<&Device> {
        self.below().and_then(|b| b.device())
    }
}

/// The layer below `n`, for a method `n` did not write.
fn lower<N: Nic + ?Sized>(n: &N) -> &dyn Nic {
    n.below().expect("a Nic with no layer below writes every required method")
}

/// The error for an optional feature no layer of `n` has.
fn unsupported<N: Nic + ?Sized>(n: &N, feature: &'static str) -> NicError {
    NicError::Unsupported { class: n.caps().class, feature }
}

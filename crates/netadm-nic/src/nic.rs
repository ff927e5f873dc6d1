//! The driver API: what the ring engine (and later the datapath) may ask of
//! any NIC driver.
//!
//! Methods mirror register operations: each is cheap and does not wait,
//! except [`Nic::wait_queues`] and [`Nic::wait_tx_drained`], which block on
//! device events up to a deadline. Batching (request many, then wait once)
//! is the caller's business and is what the interface is shaped for.

use std::sync::Arc;
use std::time::Instant;

use crate::dma::{DmaAccount, DmaRing};
use crate::types::{Caps, HwStats, InterruptHandler, NicError, QueueId};

/// A NIC driver instance bound to one port.
pub trait Nic: Send + Sync {
    /// The device's capabilities.
    fn caps(&self) -> &Caps;

    /// The DMA account every ring of this port is charged to.
    fn dma_account(&self) -> &Arc<DmaAccount>;

    /// Programs the queue context: the ring the queue uses (its buffer size
    /// included), or none. Only legal while the queue is disabled.
    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError>;

    /// The vector the device wants queue `q` on: how its interrupt causes
    /// and throttle timers are laid out (i40e: pairs spread over vectors;
    /// atl1c: RX on the rx-imt vector, TX on the tx-imt vector).
    fn default_vector(&self, q: QueueId) -> u16;

    /// Routes the queue's interrupts to MSI-X `vector`.
    fn map_vector(&self, q: QueueId, vector: u16) -> Result<(), NicError>;

    /// Sets the interrupt throttle of `vector` in device units
    /// ([`Caps::throttle_unit`]); 0 disables throttling.
    fn set_throttle(&self, vector: u16, units: u32) -> Result<(), NicError>;

    /// Raises `vector` from software (i40e: PFINT_DYN_CTLN.SWINT_TRIG), so a
    /// handler that stopped at its budget is called again after the other
    /// pending vectors: how polling stays bounded and fair.
    fn trigger_interrupt(&self, vector: u16);

    /// Installs the interrupt handler (one per device; called per vector).
    fn set_interrupt_handler(&self, handler: Option<InterruptHandler>);

    /// Requests the queue be enabled; acknowledged asynchronously.
    fn request_enable(&self, q: QueueId) -> Result<(), NicError>;

    /// Requests the queue be disabled; acknowledged asynchronously.
    fn request_disable(&self, q: QueueId) -> Result<(), NicError>;

    /// Gives a TX queue the notice some devices need before a disable
    /// ([`crate::Errata::tx_pre_disable`]); a no-op where none is needed.
    fn tx_pre_disable(&self, q: u16) -> Result<(), NicError>;

    /// Reads the queue's enable status as the device last acknowledged it.
    fn queue_enabled(&self, q: QueueId) -> bool;

    /// Blocks until every queue in `qs` reports `enabled`, or the deadline
    /// passes. Event-driven: the device wakes waiters on each acknowledgement.
    fn wait_queues(&self, qs: &[QueueId], enabled: bool, deadline: Instant)
    -> Result<(), NicError>;

    /// Blocks until the device has consumed every TX descriptor handed to
    /// `qs`, or the deadline passes; returns the queues still holding frames.
    fn wait_tx_drained(&self, qs: &[u16], deadline: Instant) -> Result<(), Vec<u16>>;

    /// Writes the queue's tail doorbell: the device may process slots up to
    /// the ring's tail. Costs what an uncached MMIO write costs.
    fn doorbell(&self, q: QueueId);

    /// The device's own counters.
    fn hw_stats(&self) -> HwStats;
}

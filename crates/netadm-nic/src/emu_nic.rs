//! The common plumbing of a driver over an emulated device: the bottom
//! layer every driver crate builds on (see [`Nic`]'s "Layers").

use std::sync::Arc;
use std::time::Instant;

use crate::dma::{DmaAccount, DmaRing};
use crate::emu::{Device, EmuConfig};
use crate::nic::Nic;
use crate::types::{Caps, HwStats, InterruptHandler, NicError, QueueId};

/// A driver's common half over an emulated [`Device`]: every [`Nic`]
/// method as the plain register operation (a ring checked first against
/// the class's [`RingLimits`]), and the port's DMA account.
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
    ring_limits: RingLimits,
}

impl EmuNic {
    /// Powers on device `name` and brings it to the state a driver's
    /// attach leaves it in: each moderation knob at its default, and VLAN
    /// filtering on where the device has a table (as Linux's i40e starts
    /// it: tagged frames pass only for the VIDs put in it). Rings are
    /// programmed only within `ring_limits`, the class's queue context.
    pub fn power_on(cfg: EmuConfig, ring_limits: RingLimits, name: &str) -> Self {
        let hw = Device::new(cfg, name);
        for knob in &hw.caps().moderation {
            for v in knob.vectors.clone() {
                hw.write_throttle(v, knob.default).expect("a knob's default is in range");
            }
        }
        if hw.caps().vlan_filters > 0 {
            hw.write_vlan_filter_enable(true);
        }
        Self { hw, dma: DmaAccount::new(), ring_limits }
    }

    /// The device, for a driver's own register writes.
    pub fn hw(&self) -> &Device {
        &self.hw
    }
}

/// What a class's queue context can describe of a ring, and what its
/// datasheet calls the fields (the names errors give).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLimits {
    /// The ring-length field: a ring has exactly [`Caps::ring_size`] slots.
    pub qlen: &'static str,
    /// The buffer-size field.
    pub buf: &'static str,
    /// Buffer sizes are whole multiples of this many bytes.
    pub buf_unit: u32,
    /// Largest buffer size.
    pub buf_max: u32,
}

impl RingLimits {
    /// Refuses a ring the queue context cannot describe, naming the field.
    pub fn check(&self, caps: &Caps, r: &DmaRing) -> Result<(), NicError> {
        if r.slots() != caps.ring_size {
            return Err(NicError::OutOfRange {
                register: self.qlen,
                value: r.slots().into(),
                max: caps.ring_size.into(),
            });
        }
        if r.buf_size() % self.buf_unit != 0 || r.buf_size() > self.buf_max {
            return Err(NicError::OutOfRange {
                register: self.buf,
                value: r.buf_size().into(),
                max: self.buf_max.into(),
            });
        }
        Ok(())
    }
}

/// Checks what every emulated port's configuration must have: descriptor
/// rings of a power of two in 64..=4096 slots, and a wire with a speed;
/// `ring` and `speed` are the class's errors for each.
pub fn check_port<E>(
    ring_size: u32,
    speed_mbps: u64,
    ring: impl FnOnce(u32) -> E,
    speed: E,
) -> Result<(), E> {
    if !ring_size.is_power_of_two() || !(64..=4096).contains(&ring_size) {
        return Err(ring(ring_size));
    }
    if speed_mbps == 0 {
        return Err(speed);
    }
    Ok(())
}

// The methods the datapath calls per frame or per interrupt are inline, so
// that a driver's provided method (which reaches this layer through a
// `dyn Nic` the compiler resolves) costs what the register write costs.
impl Nic for EmuNic {
    #[inline]
    fn caps(&self) -> &Caps {
        self.hw.caps()
    }

    fn dma_account(&self) -> &Arc<DmaAccount> {
        &self.dma
    }

    fn set_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        if let Some(r) = &ring {
            self.ring_limits.check(self.caps(), r)?;
        }
        self.hw.write_ring(q, ring)
    }

    fn default_vector(&self, _q: QueueId) -> u16 {
        // The device's reset mapping: every queue on vector 0.
        0
    }

    fn map_vector(&self, q: QueueId, vector: u16) -> Result<(), NicError> {
        self.hw.write_vector_map(q, vector)
    }

    #[inline]
    fn set_throttle(&self, vector: u16, units: u32) -> Result<(), NicError> {
        self.hw.write_throttle(vector, units)
    }

    #[inline]
    fn trigger_interrupt(&self, vector: u16) {
        self.hw.write_sw_interrupt(vector);
    }

    #[inline]
    fn mask_interrupt(&self, vector: u16, masked: bool) {
        self.hw.write_interrupt_mask(vector, masked);
    }

    fn release_interrupt(&self, vector: u16, raise: bool) {
        self.hw.release_interrupt(vector, raise);
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

    #[inline]
    fn queue_enabled(&self, q: QueueId) -> bool {
        self.hw.read_enable_status(q)
    }

    fn wait_queues(&self, qs: &[QueueId], on: bool, until: Instant) -> Result<(), NicError> {
        self.hw.wait_queues(qs, on, until)
    }

    fn wait_tx_drained(&self, qs: &[u16], deadline: Instant) -> Result<(), Vec<u16>> {
        self.hw.wait_tx_drained(qs, deadline)
    }

    #[inline]
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

//! Userspace driver for an atl1c-class NIC port, and the emulated hardware it
//! drives ([`hw`]).
//!
//! The port has no RSS and a single RX queue, so the ring engine can never
//! keep it receiving while it reprograms the RX ring: an MTU change on an
//! atl1c-class port alone is a short stop, not a hitless one.

pub mod hw;

use std::sync::Arc;
use std::time::Instant;

use netadm_nic::emu::Device;
use netadm_nic::{
    Caps, Dir, DmaAccount, DmaRing, HwStats, InterruptHandler, Nic, NicError, QueueId,
};

pub use hw::{Atl1cConfig, ConfigError};

/// Linux atl1c's default RX moderation: 200 × 2 µs.
pub const DEFAULT_RX_IMT: u32 = 200;
/// Linux atl1c's default TX moderation: 1000 × 2 µs.
pub const DEFAULT_TX_IMT: u32 = 1000;

/// A driver instance bound to one atl1c-class port.
#[derive(Debug)]
pub struct Atl1c {
    hw: Device,
    dma: Arc<DmaAccount>,
}

impl Atl1c {
    /// Powers on the port `name` and attaches the driver to it.
    pub fn attach(name: &str, cfg: &Atl1cConfig) -> Result<Self, ConfigError> {
        let hw = hw::power_on(name, cfg)?;
        hw.write_throttle(hw::RX_VECTOR, DEFAULT_RX_IMT).expect("default rx_imt in range");
        hw.write_throttle(hw::TX_VECTOR, DEFAULT_TX_IMT).expect("default tx_imt in range");
        Ok(Self { hw, dma: DmaAccount::new() })
    }

    /// Sets the RX interrupt moderation timer, in 2 µs units.
    pub fn set_rx_imt(&self, units: u32) -> Result<(), NicError> {
        self.hw.write_throttle(hw::RX_VECTOR, units)
    }

    /// Sets the TX interrupt moderation timer, in 2 µs units.
    pub fn set_tx_imt(&self, units: u32) -> Result<(), NicError> {
        self.hw.write_throttle(hw::TX_VECTOR, units)
    }
}

impl Atl1c {
    /// The emulated device itself: for wiring it (cables) and cutting its
    /// carrier, which are not driver operations.
    pub fn device(&self) -> &Device {
        &self.hw
    }
}

impl Nic for Atl1c {
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
                    register: "ring size",
                    value: r.slots().into(),
                    max: caps.ring_size.into(),
                });
            }
            let max = caps.max_mtu + 22;
            if r.buf_size() > max.next_multiple_of(128) {
                return Err(NicError::OutOfRange {
                    register: "RX buffer size",
                    value: r.buf_size().into(),
                    max: max.into(),
                });
            }
        }
        self.hw.write_ring(q, ring)
    }

    fn default_vector(&self, q: QueueId) -> u16 {
        match q.dir {
            Dir::Rx => hw::RX_VECTOR,
            Dir::Tx => hw::TX_VECTOR,
        }
    }

    fn map_vector(&self, q: QueueId, vector: u16) -> Result<(), NicError> {
        // The causes are wired to their timers; only that routing exists.
        let wired = self.default_vector(q);
        if vector != wired {
            return Err(NicError::OutOfRange {
                register: "interrupt cause routing",
                value: vector.into(),
                max: wired.into(),
            });
        }
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
        // No such erratum on this MAC; still reject queues it lacks.
        if q >= hw::TX_QUEUES {
            return Err(NicError::NoSuchQueue { queue: QueueId::tx(q), count: hw::TX_QUEUES });
        }
        Ok(())
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

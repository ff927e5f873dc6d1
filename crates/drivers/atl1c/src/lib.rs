//! Userspace driver for an atl1c-class NIC port, and the emulated hardware it
//! drives ([`hw`]).
//!
//! The port has no RSS and a single RX queue, so the ring engine can never
//! keep it receiving while it reprograms the RX ring: an MTU change on an
//! atl1c-class port alone is a short stop, not a hitless one. It has no
//! ring groups and no VLAN filter either: the driver writes none of them,
//! and [`Nic`] answers `Unsupported` for them.

pub mod hw;

use netadm_nic::emu::Device;
use netadm_nic::{Dir, EmuNic, Nic, NicError, QueueId};

pub use hw::{Atl1cConfig, ConfigError};

/// Linux atl1c's default RX moderation: 200 × 2 µs.
pub const DEFAULT_RX_IMT: u32 = 200;
/// Linux atl1c's default TX moderation: 1000 × 2 µs.
pub const DEFAULT_TX_IMT: u32 = 1000;

/// A driver instance bound to one atl1c-class port.
#[derive(Debug)]
pub struct Atl1c {
    base: EmuNic,
}

impl Atl1c {
    /// Powers on the port `name` and attaches the driver to it.
    pub fn attach(name: &str, cfg: &Atl1cConfig) -> Result<Self, ConfigError> {
        Ok(Self { base: hw::power_on(name, cfg)? })
    }
}

/// What atl1c does differently from the common plumbing; the rest is
/// [`EmuNic`]'s.
impl Nic for Atl1c {
    fn below(&self) -> Option<&dyn Nic> {
        Some(&self.base)
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
        self.base.map_vector(q, vector)
    }

    fn tx_pre_disable(&self, q: u16) -> Result<(), NicError> {
        // No such erratum on this MAC; still reject queues it lacks.
        if q >= hw::TX_QUEUES {
            return Err(NicError::NoSuchQueue { queue: QueueId::tx(q), count: hw::TX_QUEUES });
        }
        Ok(())
    }
}

/// Conveniences for code that holds the concrete driver (its tests, the
/// benchmarks); the core asks everything through [`Nic`].
impl Atl1c {
    /// Sets the RX interrupt moderation timer, in 2 µs units.
    pub fn set_rx_imt(&self, units: u32) -> Result<(), NicError> {
        self.set_throttle(hw::RX_VECTOR, units)
    }

    /// Sets the TX interrupt moderation timer, in 2 µs units.
    pub fn set_tx_imt(&self, units: u32) -> Result<(), NicError> {
        self.set_throttle(hw::TX_VECTOR, units)
    }

    /// The emulated device itself: for wiring it (cables) and cutting its
    /// carrier, which are not driver operations.
    pub fn device(&self) -> &Device {
        self.base.hw()
    }
}

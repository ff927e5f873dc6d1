//! The hardware half: an emulated i40e-class (XL710-like) port.
//!
//! What it models, from the XL710 datasheet and the illumos and Linux
//! drivers: up to 384 queue pairs per port; QENA_REQ/QENA_STAT queue
//! enables acknowledged after ~10 µs; the TX pre-disable notice
//! (GLLAN_TXPRE_QDIS) at least 400 µs (the drivers use 500 µs) before a TX
//! queue is disabled; no re-enable within 50 ms of a disable; receive buffer
//! size in 128-byte units, changeable only while the queue is disabled;
//! MSI-X vectors shared by queue pairs with ITR throttling in 2 µs units;
//! a 512-entry RSS indirection table.

use std::time::Duration;

use netadm_nic::emu::{EmuConfig, WireMode, queue_ack_deadline};
use netadm_nic::{Caps, EmuNic, Errata, Moderation, NicClass, Offloads, RingLimits, check_port};

/// Most queue pairs a port has.
pub const MAX_QUEUE_PAIRS: u16 = 384;
/// Most MSI-X vectors a port's function uses.
pub const MAX_VECTORS: u16 = 64;
/// Entries in the RSS indirection table.
pub const RSS_TABLE_SIZE: u16 = 512;
/// Largest receive buffer the queue context can describe.
pub const MAX_RX_BUF: u32 = 16 * 1024 - 128;
/// The queue context's ring fields: qlen descriptors, and the buffer
/// size in 128-byte units.
pub const RING_LIMITS: RingLimits = RingLimits {
    qlen: "queue context qlen",
    buf: "queue context dbuff (128-byte units)",
    buf_unit: 128,
    buf_max: MAX_RX_BUF,
};
/// The TX pre-disable notice the drivers give.
pub const TX_PRE_DISABLE: Duration = Duration::from_micros(500);
/// Minimum time between a queue's disable and its re-enable.
pub const REENABLE_GAP: Duration = Duration::from_millis(50);
/// ITR registers count in 2 µs units.
pub const ITR_UNIT: Duration = Duration::from_micros(2);
/// Largest ITR interval field value (12 bits).
pub const ITR_MAX: u32 = 0xFFF;
/// Largest MTU.
pub const MAX_MTU: u32 = 9710;
/// Hardware MAC filter slots (perfect match filters), each usable for a
/// VNIC's ring group.
pub const MAC_FILTERS: u16 = 1536;
/// Intel's OUI, the first half of the port's factory MAC.
pub const OUI: [u8; 3] = [0x00, 0x1b, 0x21];
/// Link speed of the part: 40 GbE.
pub const DEFAULT_SPEED_MBPS: u64 = 40_000;

/// How to build an i40e-class port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct I40eConfig {
    /// Queue pairs in use (1..=384).
    pub queue_pairs: u16,
    /// MSI-X vectors in use (1..=64).
    pub vectors: u16,
    /// Descriptors per ring (a power of two, 64..=4096).
    pub ring_size: u32,
    /// Queue enable/disable acknowledgement latency.
    pub ack_latency: Duration,
    /// CPU cost of a doorbell write.
    pub doorbell_cost: Duration,
    /// Where transmitted frames go.
    pub wire: WireMode,
    /// Link speed in Mb/s: the wire serialises every frame at it.
    pub speed_mbps: u64,
    /// The errata the silicon has. Real parts: [`TX_PRE_DISABLE`] and
    /// [`REENABLE_GAP`]; tests may shorten them to churn rings faster.
    pub errata: Errata,
}

impl Default for I40eConfig {
    fn default() -> Self {
        Self {
            queue_pairs: 256,
            vectors: 8,
            ring_size: 512,
            ack_latency: Duration::from_micros(10),
            doorbell_cost: Duration::from_nanos(300),
            wire: WireMode::Sink,
            speed_mbps: DEFAULT_SPEED_MBPS,
            errata: Errata {
                tx_pre_disable: Some(TX_PRE_DISABLE),
                reenable_gap: Some(REENABLE_GAP),
            },
        }
    }
}

/// A configuration the hardware cannot have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Queue pairs out of range.
    #[error("i40e: {0} queue pairs requested; the port has 1..={MAX_QUEUE_PAIRS}")]
    QueuePairs(u16),
    /// Vectors out of range.
    #[error("i40e: {0} MSI-X vectors requested; the port has 1..={MAX_VECTORS}")]
    Vectors(u16),
    /// Ring size unusable.
    #[error("i40e: ring size {0}: must be a power of two in 64..=4096")]
    RingSize(u32),
    /// A wire without a speed.
    #[error("i40e: link speed 0 Mb/s: a wire needs a speed")]
    Speed,
}

impl I40eConfig {
    /// Checks the configuration against the hardware's limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_QUEUE_PAIRS).contains(&self.queue_pairs) {
            return Err(ConfigError::QueuePairs(self.queue_pairs));
        }
        if !(1..=MAX_VECTORS).contains(&self.vectors) {
            return Err(ConfigError::Vectors(self.vectors));
        }
        check_port(self.ring_size, self.speed_mbps, ConfigError::RingSize, ConfigError::Speed)
    }

    /// The capabilities a port so configured has.
    pub fn caps(&self) -> Caps {
        Caps {
            class: NicClass::I40e,
            driver: "i40e",
            oui: OUI,
            tx_queues: self.queue_pairs,
            rx_queues: self.queue_pairs,
            max_queue_pairs: MAX_QUEUE_PAIRS,
            vectors: self.vectors,
            ring_size: self.ring_size,
            rss_table_size: RSS_TABLE_SIZE,
            mac_filters: MAC_FILTERS,
            ring_groups: MAC_FILTERS,
            vlan_filters: netadm_nic::vlan::FILTER_ENTRIES,
            min_mtu: 68,
            max_mtu: MAX_MTU,
            throttle_unit: ITR_UNIT,
            throttle_max: ITR_MAX,
            // `itr`, in µs, on every vector; adaptive (Linux's dynamic ITR)
            // allowed.
            moderation: vec![Moderation {
                prop: "itr",
                unit: Duration::from_micros(1),
                default: crate::DEFAULT_ITR_UNITS,
                vectors: 0..self.vectors,
                adaptive: true,
            }],
            errata: self.errata,
            queue_ack_deadline: queue_ack_deadline(self.ring_size, MAX_MTU, self.speed_mbps),
            offloads: Offloads { tso: true, tx_csum: true, rx_csum: true },
        }
    }
}

/// Powers on an emulated i40e-class port: the device and the common half
/// of its driver.
pub fn power_on(name: &str, cfg: &I40eConfig) -> Result<EmuNic, ConfigError> {
    cfg.validate()?;
    let I40eConfig { ack_latency, doorbell_cost, wire, speed_mbps, .. } = *cfg;
    let emu = EmuConfig { caps: cfg.caps(), ack_latency, doorbell_cost, wire, speed_mbps };
    Ok(EmuNic::power_on(emu, RING_LIMITS, name))
}

//! Types shared by every driver and the ring engine.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// The class of NIC a driver drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NicClass {
    /// Intel i40e-class: many queue pairs, RSS, MAC filters, strict errata.
    I40e,
    /// Atheros atl1c-class: 4 TX queues, 1 RX queue, no RSS.
    Atl1c,
}

impl fmt::Display for NicClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::I40e => "i40e",
            Self::Atl1c => "atl1c",
        })
    }
}

/// Direction of a hardware queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Transmit.
    Tx,
    /// Receive.
    Rx,
}

/// One hardware queue: a direction and an index within that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId {
    /// Transmit or receive.
    pub dir: Dir,
    /// Index among the queues of that direction.
    pub index: u16,
}

impl QueueId {
    /// TX queue `index`.
    pub const fn tx(index: u16) -> Self {
        Self { dir: Dir::Tx, index }
    }
    /// RX queue `index`.
    pub const fn rx(index: u16) -> Self {
        Self { dir: Dir::Rx, index }
    }
}

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.dir {
            Dir::Tx => write!(f, "tx{}", self.index),
            Dir::Rx => write!(f, "rx{}", self.index),
        }
    }
}

/// Intervals the hardware mandates around queue state changes: its errata.
///
/// A driver that ignores them gets what real hardware gives: a hung queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Errata {
    /// A TX queue must be told it will be disabled at least this long
    /// before the disable request (i40e: 500 µs, the "pre-disable" notice).
    pub tx_pre_disable: Option<Duration>,
    /// A queue must not be re-enabled sooner than this after it was
    /// disabled (i40e: 50 ms).
    pub reenable_gap: Option<Duration>,
}

/// What a NIC can do; fixed for the life of a driver instance.
///
/// Everything the layers above need to know of a device is here, as data:
/// they ask the port, never which class it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// Device class.
    pub class: NicClass,
    /// The driver's name as dladm shows it (`i40e`, `atl1c`).
    pub driver: &'static str,
    /// The vendor's OUI: the first three bytes of the port's factory MAC
    /// (Intel 00:1b:21, Atheros 00:13:74).
    pub oui: [u8; 3],
    /// TX queues in use.
    pub tx_queues: u16,
    /// RX queues in use.
    pub rx_queues: u16,
    /// Most queue pairs the device supports (i40e: 384).
    pub max_queue_pairs: u16,
    /// MSI-X vectors in use; rings share them.
    pub vectors: u16,
    /// Descriptors per ring.
    pub ring_size: u32,
    /// Entries in the RSS indirection table (0: no RSS).
    pub rss_table_size: u16,
    /// Hardware MAC filter slots.
    pub mac_filters: u16,
    /// MAC filter slots a VNIC ring group may take ([`crate::Nic::set_mac_filter`];
    /// 0: no ring groups).
    pub ring_groups: u16,
    /// VIDs the VLAN filter table holds ([`crate::Nic::set_vlan_filter`];
    /// 0: no VLAN filter, every tagged frame passes).
    pub vlan_filters: u16,
    /// Smallest MTU the device accepts.
    pub min_mtu: u32,
    /// Largest MTU the device accepts.
    pub max_mtu: u32,
    /// Unit of the interrupt throttle registers.
    pub throttle_unit: Duration,
    /// Largest throttle register value.
    pub throttle_max: u32,
    /// The interrupt moderation knobs the device has, each a link property
    /// over some of its vectors' throttle registers.
    pub moderation: Vec<Moderation>,
    /// The device's errata.
    pub errata: Errata,
    /// Worst-case time the device takes to acknowledge a queue enable or
    /// disable; waits use a deadline derived from it.
    pub queue_ack_deadline: Duration,
    /// Offloads the device has.
    pub offloads: Offloads,
}

/// One interrupt moderation knob: a link property that sets the throttle
/// registers of some of the device's vectors. Described as data, so that
/// whoever applies the property needs nothing else to write the registers
/// the driver would: for a fixed value `v`, `units(Some(v))` into each of
/// [`Self::vectors`] ([`crate::Nic::set_moderation`] does exactly that);
/// unset, [`Self::default`]; `adaptive` (where [`Self::adaptive`] allows
/// it), the ring engine's interrupt handler moves those registers itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moderation {
    /// The link property, as the CLI spells it: `itr`, `rx-imt`, `tx-imt`.
    pub prop: &'static str,
    /// What one step of the property's value stands for (`itr`: 1 µs;
    /// `rx-imt`, `tx-imt`: 2 µs).
    pub unit: Duration,
    /// The register value while the property is unset, in device units
    /// ([`Caps::throttle_unit`]): what the driver writes at attach.
    pub default: u32,
    /// The vectors whose throttle registers the knob sets.
    pub vectors: Range<u16>,
    /// Whether the property may be `adaptive`.
    pub adaptive: bool,
}

impl Moderation {
    /// The register value for the property's fixed value `value` (None:
    /// unset, [`Self::default`]): `value` × [`Self::unit`] in
    /// `throttle_unit`s, rounded up (`itr` 51 µs: 26 × 2 µs).
    pub fn units(&self, value: Option<u32>, throttle_unit: Duration) -> u32 {
        let Some(v) = value else { return self.default };
        let ns = u128::from(v) * self.unit.as_nanos();
        u32::try_from(ns.div_ceil(throttle_unit.as_nanos().max(1))).unwrap_or(u32::MAX)
    }
}

/// A hardware MAC filter: frames to `mac` go to RX queues
/// `first_queue .. first_queue + queues`, spread by the flow hash. This is
/// how a VNIC gets a ring group of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacFilter {
    /// Destination MAC matched.
    pub mac: [u8; 6],
    /// First RX queue of the group.
    pub first_queue: u16,
    /// Queues in the group (at least 1).
    pub queues: u16,
}

/// The offloads a device class has in hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    /// TCP segmentation on transmit (i40e: TSO with a context descriptor).
    pub tso: bool,
    /// L4 checksum insertion on transmit.
    pub tx_csum: bool,
    /// L4 checksum verification on receive, reported in the descriptor.
    pub rx_csum: bool,
}

/// Why a NIC operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NicError {
    /// The queue does not exist on this device.
    #[error("{queue}: no such queue (device has {count})")]
    NoSuchQueue {
        /// The queue named.
        queue: QueueId,
        /// Queues of that direction on the device.
        count: u16,
    },
    /// The queue context can only change while the queue is disabled.
    #[error("{queue}: context can only change while the queue is disabled")]
    QueueEnabled {
        /// The queue named.
        queue: QueueId,
    },
    /// An enable was requested for a queue with no ring programmed.
    #[error("{queue}: no ring programmed")]
    NoRing {
        /// The queue named.
        queue: QueueId,
    },
    /// The MSI-X vector does not exist.
    #[error("vector {vector}: no such vector (device has {count})")]
    NoSuchVector {
        /// The vector named.
        vector: u16,
        /// Vectors on the device.
        count: u16,
    },
    /// A register value is out of the range the hardware accepts.
    #[error("{register}: value {value} out of range 0..={max}")]
    OutOfRange {
        /// The register written.
        register: &'static str,
        /// The value written.
        value: u64,
        /// Its largest legal value.
        max: u64,
    },
    /// The device does not have this feature.
    #[error("{class}-class device has no {feature}")]
    Unsupported {
        /// Device class.
        class: NicClass,
        /// Missing feature.
        feature: &'static str,
    },
    /// Queues did not reach the requested state by the deadline.
    #[error("{} queue(s) did not {} in time: {}", pending.len(), if *enable { "enable" } else { "disable" }, fmt_queues(pending))]
    Timeout {
        /// Whether an enable was awaited.
        enable: bool,
        /// Queues still in the old state.
        pending: Vec<QueueId>,
    },
    /// DMA memory could not be had.
    #[error(transparent)]
    Dma(#[from] crate::dma::DmaError),
}

fn fmt_queues(q: &[QueueId]) -> String {
    let mut s: Vec<String> = q.iter().take(8).map(ToString::to_string).collect();
    if q.len() > 8 {
        s.push(format!("and {} more", q.len() - 8));
    }
    s.join(", ")
}

/// Called on the interrupt thread with the vector that fired.
pub type InterruptHandler = Arc<dyn Fn(u16) + Send + Sync>;

/// Counters a device keeps about itself, including the errata it saw
/// violated. A correct driver leaves every fault counter at zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HwStats {
    /// Frames the device transmitted to its wire.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Bytes of received frames.
    pub rx_bytes: u64,
    /// Frames the wire lost: no carrier, no cable, or the far end's
    /// wire buffer full.
    pub wire_dropped: u64,
    /// Frames the device placed in RX rings.
    pub rx_frames: u64,
    /// Frames that arrived for a disabled queue, with no free buffer, or
    /// larger than the MTU the RX buffers were sized for.
    pub rx_dropped: u64,
    /// Of `rx_dropped`: frames larger than the RX buffers' MTU (for a
    /// superframe: segments larger than it).
    pub rx_oversize: u64,
    /// Received frames whose L4 checksum the device found wrong (passed
    /// on unmarked; the stack drops them).
    pub rx_csum_bad: u64,
    /// Segments the device cut superframes into (TSO).
    pub tx_tso_segments: u64,
    /// Frames whose offload request the device could not carry out
    /// (not TCP, offsets outside the frame, TSO on a device without it):
    /// dropped.
    pub tx_malformed: u64,
    /// Doorbell writes.
    pub doorbells: u64,
    /// Interrupts raised.
    pub interrupts: u64,
    /// TX disables requested without the pre-disable notice in time.
    pub fault_no_pre_disable: u64,
    /// Enables requested within the re-enable gap.
    pub fault_reenable_too_soon: u64,
    /// Enables requested without a ring programmed.
    pub fault_no_ring: u64,
}

impl HwStats {
    /// Total errata violations.
    pub fn faults(&self) -> u64 {
        self.fault_no_pre_disable + self.fault_reenable_too_soon + self.fault_no_ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_value_becomes_register_units_rounded_up() {
        let knob = |us: u64| Moderation {
            prop: "k",
            unit: Duration::from_micros(us),
            default: 9,
            vectors: 0..1,
            adaptive: false,
        };
        let two = Duration::from_micros(2);
        // itr: µs into 2 µs units, as `div_ceil(2)`.
        for v in [0, 1, 2, 51, 8160] {
            assert_eq!(knob(1).units(Some(v), two), v.div_ceil(2), "itr {v}");
        }
        // rx-imt, tx-imt: already in 2 µs units.
        assert_eq!(knob(2).units(Some(77), two), 77);
        assert_eq!(knob(2).units(None, two), 9, "unset: the default");
        assert_eq!(knob(4).units(Some(u32::MAX), two), u32::MAX, "saturates");
    }
}

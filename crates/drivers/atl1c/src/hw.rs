//! The hardware half: an emulated atl1c-class (AR8151-like) port.
//!
//! One TX queue (TPD ring) and one RX queue (RFD ring), as Linux's atl1c
//! drives the 1 GbE parts (its four-queue mode is for other chips), no RSS,
//! no MAC filter table beyond the station address. One interrupt line with
//! two moderation timers, modelled as two vectors: vector 0 carries RX
//! causes and is throttled by the RX interrupt moderation timer (rx_imt),
//! vector 1 carries TX causes and is throttled by tx_imt. Both timers count
//! in 2 µs units. The MAC enables its queues without errata, a few µs after
//! the request.

use std::time::Duration;

use netadm_nic::emu::{EmuConfig, WireMode, queue_ack_deadline};
use netadm_nic::{Caps, EmuNic, Errata, Moderation, NicClass, Offloads, RingLimits, check_port};

/// TX queues: one, sharing the one TX moderation timer. (With more, the
/// timer's one interrupt would write back a ring's worth of completions
/// for each, and flows spread over them would escape tx-imt's bound.)
pub const TX_QUEUES: u16 = 1;
/// RX queues.
pub const RX_QUEUES: u16 = 1;
/// The RX-cause vector, throttled by rx_imt.
pub const RX_VECTOR: u16 = 0;
/// The TX-cause vector, throttled by tx_imt.
pub const TX_VECTOR: u16 = 1;
/// Moderation timers count in 2 µs units.
pub const IMT_UNIT: Duration = Duration::from_micros(2);
/// Largest moderation timer value (16 bits).
pub const IMT_MAX: u32 = 0xFFFF;
/// Largest MTU: the MAC takes frames up to 6 KiB.
pub const MAX_MTU: u32 = 6 * 1024 - 22;
/// The ring registers: the ring size, and an RX buffer as large as the
/// largest frame (MTU and 22 bytes of headers, VLAN tag and FCS), in any
/// byte count.
pub const RING_LIMITS: RingLimits =
    RingLimits { qlen: "ring size", buf: "RX buffer size", buf_unit: 1, buf_max: MAX_MTU + 22 };
/// Atheros's OUI, the first half of the port's factory MAC.
pub const OUI: [u8; 3] = [0x00, 0x13, 0x74];
/// Link speed of the part: 1 GbE.
pub const DEFAULT_SPEED_MBPS: u64 = 1_000;

/// How to build an atl1c-class port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Atl1cConfig {
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
}

impl Default for Atl1cConfig {
    fn default() -> Self {
        Self {
            ring_size: 1024,
            ack_latency: Duration::from_micros(5),
            doorbell_cost: Duration::from_nanos(300),
            wire: WireMode::Sink,
            speed_mbps: DEFAULT_SPEED_MBPS,
        }
    }
}

/// A configuration the hardware cannot have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Ring size unusable.
    #[error("atl1c: ring size {0}: must be a power of two in 64..=4096")]
    RingSize(u32),
    /// A wire without a speed.
    #[error("atl1c: link speed 0 Mb/s: a wire needs a speed")]
    Speed,
}

impl Atl1cConfig {
    /// Checks the configuration against the hardware's limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_port(self.ring_size, self.speed_mbps, ConfigError::RingSize, ConfigError::Speed)
    }

    /// The capabilities a port so configured has.
    pub fn caps(&self) -> Caps {
        Caps {
            class: NicClass::Atl1c,
            driver: "atl1c",
            oui: OUI,
            tx_queues: TX_QUEUES,
            rx_queues: RX_QUEUES,
            max_queue_pairs: TX_QUEUES,
            vectors: 2,
            ring_size: self.ring_size,
            rss_table_size: 0,
            // The station address only: no ring groups, no VLAN filter.
            mac_filters: 1,
            ring_groups: 0,
            vlan_filters: 0,
            min_mtu: 68,
            max_mtu: MAX_MTU,
            throttle_unit: IMT_UNIT,
            throttle_max: IMT_MAX,
            // One timer per vector, in 2 µs units; only the RX one may be
            // adaptive.
            moderation: vec![
                Moderation {
                    prop: "rx-imt",
                    unit: IMT_UNIT,
                    default: crate::DEFAULT_RX_IMT,
                    vectors: RX_VECTOR..RX_VECTOR + 1,
                    adaptive: true,
                },
                Moderation {
                    prop: "tx-imt",
                    unit: IMT_UNIT,
                    default: crate::DEFAULT_TX_IMT,
                    vectors: TX_VECTOR..TX_VECTOR + 1,
                    adaptive: false,
                },
            ],
            errata: Errata::default(),
            queue_ack_deadline: queue_ack_deadline(self.ring_size, MAX_MTU, self.speed_mbps),
            offloads: Offloads { tso: false, tx_csum: true, rx_csum: true },
        }
    }
}

/// Powers on an emulated atl1c-class port: the device and the common half
/// of its driver.
pub fn power_on(name: &str, cfg: &Atl1cConfig) -> Result<EmuNic, ConfigError> {
    cfg.validate()?;
    let Atl1cConfig { ack_latency, doorbell_cost, wire, speed_mbps, .. } = *cfg;
    let emu = EmuConfig { caps: cfg.caps(), ack_latency, doorbell_cost, wire, speed_mbps };
    Ok(EmuNic::power_on(emu, RING_LIMITS, name))
}

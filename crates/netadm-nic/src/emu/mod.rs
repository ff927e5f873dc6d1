//! The emulated-hardware core both device classes are built on.
//!
//! A [`Device`] is the hardware half of a driver crate: registers the driver
//! writes and reads, and an engine thread that does what silicon would. It
//! is honest about what real hardware costs and forbids:
//!
//! - Queue enable/disable requests are acknowledged asynchronously after
//!   [`EmuConfig::ack_latency`], many queues in parallel.
//! - Errata are enforced ([`crate::Errata`]): a TX disable without the
//!   pre-disable notice, or an enable inside the re-enable gap, hangs the
//!   queue and counts a fault, as the real device would misbehave.
//! - A ring can only be (re)programmed while its queue is disabled.
//! - A doorbell write costs the writing CPU [`EmuConfig::doorbell_cost`]
//!   (an uncached MMIO write) and wakes the engine if it is parked.
//! - Interrupts are raised per MSI-X vector, throttled per vector, and
//!   delivered on a separate interrupt thread, concurrently with the engine.
//! - The device learns of new descriptors only from a tail doorbell: it
//!   latches the tail the driver published when the doorbell is written,
//!   for TX and RX queues alike, and goes no further.
//! - TX completions are written back (the ring's `done` index) when the
//!   queue's vector raises its moderated interrupt, so a slow moderation
//!   timer leaves the driver without free descriptors, as on hardware.
//! - Every frame occupies the wire for its bytes at the port's speed
//!   ([`EmuConfig::speed_mbps`]): the engine sends nothing before the wire
//!   is free.
//!
//! The engine thread parks when idle; doorbells and control writes wake it.
//!
//! The module's files: [`device`] holds the registers and the state the
//! device's threads share; [`engine`] is the device thread (descriptors,
//! offloads, steering, interrupts and their moderation); [`wire`] is what
//! a frame costs on the wire and where it goes (sink, loopback,
//! reflector, cable); [`afpacket`] is the wire to a host interface.

mod afpacket;
mod device;
mod engine;
mod wire;

/// The MAC filter lives beside the driver API, which programs it; the
/// device keeps its path here.
pub use crate::types::MacFilter;
pub use device::Device;
pub use engine::flow_hash;
pub use wire::{
    MIN_FRAME, WIRE_OVERHEAD, WireMode, line_rate_pps, queue_ack_deadline, ring_drain_time,
    superframe_wire_bytes, wire_bytes,
};

use std::time::Duration;

use crate::types::Caps;

/// How to build an emulated device.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    /// What the device is and can do.
    pub caps: Caps,
    /// Time from a queue enable/disable request to its acknowledgement.
    pub ack_latency: Duration,
    /// CPU cost of one doorbell (uncached MMIO) write.
    pub doorbell_cost: Duration,
    /// Where transmitted frames go.
    pub wire: WireMode,
    /// Link speed in Mb/s: every frame occupies the wire for its bytes
    /// ([`wire_bytes`]) at this rate. At least 1.
    pub speed_mbps: u64,
}

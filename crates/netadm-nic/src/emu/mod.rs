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
//! - A vector can be masked (i40e INTENA, atl1c's mask register): its
//!   causes stay pending and are raised when it is unmasked.
//!
//! The engine thread parks when idle; control writes wake it. A TX
//! doorbell written while it sleeps is acted on by the writing thread,
//! which runs the engine's pass under the engine's lock, as an emulator
//! runs a trapped MMIO write on the vCPU that made it: the wake-up of an
//! emulator thread is not part of the hardware, and the pass is the same
//! code (the wire's pace, completions written back with the moderated
//! interrupt, the interrupt raised on the interrupt thread).
//!
//! The module's files, each using only those listed before it: `wire`,
//! the kinds of wire and what a frame costs on one; `afpacket`, the
//! system calls of the wire to a host interface; `shared`, the state the
//! device's threads share (registers, counters, the wire's ends);
//! `engine`, the device thread (descriptors, offloads, steering, the
//! wires' far side, interrupts and their moderation); `device`, the
//! register interface the driver writes, which powers the engine on.

mod afpacket;
mod device;
mod engine;
mod shared;
mod wire;

/// The MAC filter lives beside the driver API, which programs it; the
/// device keeps its path here.
pub use crate::types::MacFilter;
pub use device::Device;
pub use engine::flow_hash;
pub use shared::EmuConfig;
pub use wire::{
    MIN_FRAME, WIRE_OVERHEAD, WireMode, line_rate_pps, queue_ack_deadline, ring_drain_time,
    superframe_wire_bytes, wire_bytes,
};

//! The wires a port sends on: what a frame costs there (its bytes and
//! framing at the port's speed), where it goes (a sink, back to the port
//! through loopback or the reflector, over a cable to another port), and
//! the port's receive packet buffer (its inbox), where frames off the
//! wire wait for RX buffers.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::device::{Device, Peer};
use super::engine::{Delivery, ENGINE_BUDGET, Engine};
use crate::offload::Offload;
use crate::types::NicError;

/// Where frames the device transmits go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WireMode {
    /// Frames leave and are counted; nothing comes back.
    #[default]
    Sink,
    /// MAC loopback: every transmitted frame is received again by this
    /// device, steered by RSS where the device has it.
    Loopback,
    /// The far end echoes every frame back with source and destination MAC
    /// swapped (testpmd's macswap): a switch stand-in for load tests.
    Reflector,
    /// A cable to another emulated port ([`Device::cable`]); until it is
    /// connected, frames are lost as on an unplugged port.
    Cable,
    /// A host interface through an `AF_PACKET` socket
    /// ([`Device::attach_afpacket`]): what the port sends leaves on it,
    /// what arrives on it the port receives.
    Afpacket,
}

/// Frames a wire holds in flight towards a port before it drops them.
pub(super) const WIRE_SLOTS: u32 = 4096;

/// Bytes a frame occupies on the wire besides those in its buffer: the
/// FCS the MAC appends (4), the preamble and start delimiter (8) and the
/// inter-frame gap (12).
pub const WIRE_OVERHEAD: u64 = 4 + 8 + 12;

/// Shortest frame the MAC sends, before its FCS: shorter ones are padded.
pub const MIN_FRAME: u64 = 60;

/// Bytes a frame of `len` bytes (as the driver queued it, without FCS)
/// occupies on the wire: padding to the 60-byte minimum, FCS, preamble and
/// inter-frame gap. A 64-byte frame (with FCS) takes 84, which at 1 Gb/s
/// is 1.488 Mpps; netadm's 64-byte test frames have no FCS yet and take 88.
pub fn wire_bytes(len: usize) -> u64 {
    (len as u64).max(MIN_FRAME) + WIRE_OVERHEAD
}

/// Bytes a TCP superframe of `len` bytes with `hdr` bytes of headers,
/// cut into segments of `gso_size` payload bytes, occupies on the wire:
/// every segment with its own headers and framing.
pub fn superframe_wire_bytes(len: usize, hdr: usize, gso_size: usize) -> u64 {
    let payload = len.saturating_sub(hdr);
    if gso_size == 0 || payload == 0 {
        return wire_bytes(len);
    }
    let full = payload / gso_size;
    let rest = payload % gso_size;
    full as u64 * wire_bytes(hdr + gso_size) + if rest > 0 { wire_bytes(hdr + rest) } else { 0 }
}

/// How long a full TX ring of `slots` frames of the largest size `mtu`
/// allows takes to leave on a wire of `speed_mbps`: what a TX queue's
/// disable may have to wait for, since it drains first.
pub fn ring_drain_time(slots: u32, mtu: u32, speed_mbps: u64) -> Duration {
    let bits = u64::from(slots) * wire_bytes(mtu as usize + 14) * 8;
    Duration::from_nanos((bits * 1000).div_ceil(speed_mbps.max(1)))
}

/// The longest a device with rings of `slots` descriptors, frames up to
/// `mtu` and a wire of `speed_mbps` takes to acknowledge a queue enable
/// or disable, as drivers wait for it ([`crate::Caps::queue_ack_deadline`]):
/// the datasheets allow well under 100 µs; this leaves room for a loaded
/// host scheduling the device thread late (250 ms), and for a TX queue to
/// drain a full ring of the largest frames before its disable is
/// acknowledged.
pub fn queue_ack_deadline(slots: u32, mtu: u32, speed_mbps: u64) -> Duration {
    Duration::from_millis(250) + ring_drain_time(slots, mtu, speed_mbps)
}

/// Most frames of `len` bytes per second a wire of `speed_mbps` carries.
pub fn line_rate_pps(speed_mbps: u64, len: usize) -> f64 {
    speed_mbps as f64 * 1e6 / (wire_bytes(len) * 8) as f64
}

impl Device {
    /// Waits, event-driven, until the port's receive packet buffer (its
    /// inbox) holds nothing: every frame that came back or arrived has
    /// been placed in an RX ring. For a loopback or reflector port after
    /// [`Self::wait_tx_drained`], nothing it sent is still on its way.
    pub fn wait_inbox_empty(&self, deadline: Instant) -> bool {
        self.sh.drain_waiters.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.sh.wake_engine();
        let inbox = &self.sh.inbox;
        let ok = self.sh.events.wait_until(deadline, || inbox.device_owned() == 0);
        self.sh.drain_waiters.fetch_sub(1, Ordering::AcqRel);
        ok
    }

    /// Connects two ports with a cable: what either transmits, the other
    /// receives. Both must have been built with [`WireMode::Cable`]; each
    /// port has one cable, connected once.
    pub fn cable(a: &Device, b: &Device) -> Result<(), NicError> {
        // One lock for every cabling: the checks and both ends' setting are
        // one step, so no inbox ever gets two producers.
        static CABLING: Mutex<()> = Mutex::new(());
        let _g = CABLING.lock().unwrap();
        for d in [a, b] {
            if d.sh.cfg.wire != WireMode::Cable
                || d.sh.peer.get().is_some()
                || Arc::ptr_eq(&a.sh, &b.sh)
            {
                return Err(NicError::Unsupported {
                    class: d.sh.cfg.caps.class,
                    feature: "free cable port",
                });
            }
        }
        let end = |d: &Device| Peer {
            inbox: Arc::clone(&d.sh.inbox),
            engine: Arc::clone(&d.sh.engine_wake),
        };
        let _ = a.sh.peer.set(end(b));
        let _ = b.sh.peer.set(end(a));
        Ok(())
    }

    /// Plugs or cuts the port's wire: without carrier nothing is sent or
    /// received (frames are dropped and counted).
    pub fn set_carrier(&self, up: bool) {
        self.sh.carrier.store(up, Ordering::Release);
    }

    /// Whether the wire has carrier.
    pub fn carrier(&self) -> bool {
        self.sh.carrier.load(Ordering::Acquire)
    }
}

impl Engine {
    /// Puts one complete frame on a wire that is not afpacket.
    pub(super) fn wire_out(&mut self, frame: &mut [u8]) {
        self.occupy(wire_bytes(frame.len()));
        match self.sh.cfg.wire {
            WireMode::Sink | WireMode::Afpacket => {}
            WireMode::Loopback => self.reflect(frame),
            WireMode::Reflector => {
                let (dst, src) = frame.split_at_mut(6);
                if src.len() >= 6 {
                    dst.swap_with_slice(&mut src[..6]);
                }
                self.reflect(frame);
            }
            WireMode::Cable => match self.sh.peer.get() {
                // SAFETY: this engine thread is the only driver-side user
                // of its peer's inbox.
                Some(p) => unsafe {
                    if p.inbox.free() < p.inbox.slots_for(frame.len()) {
                        p.inbox.driver_reclaim();
                    }
                    if p.inbox.driver_push_frame(frame, Offload::NONE) {
                        self.peer_pushed = true;
                    } else {
                        self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                },
                None => {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }

    /// Whether a loopback or reflector port's receive packet buffer has
    /// room for what the next frame sent brings back (a superframe's
    /// segments included); other wires always have. Without room the port
    /// stops sending — flow control, as a PAUSE from the link partner
    /// does — until the driver takes what arrived: a frame that comes back
    /// is never dropped for want of room, however long the host is slow.
    pub(super) fn reflect_room(&self) -> bool {
        /// Segments of the largest superframe at a small MSS.
        const ROOM: u32 = 128;
        if !matches!(self.sh.cfg.wire, WireMode::Loopback | WireMode::Reflector) {
            return true;
        }
        let inbox = &self.sh.inbox;
        if inbox.free() < ROOM {
            // SAFETY: as in `reflect`: this thread is the inbox's only
            // producer.
            unsafe { inbox.driver_reclaim() };
        }
        inbox.free() >= ROOM
    }

    /// A frame coming back to this port (loopback, reflector): straight
    /// into its RX ring while that has buffers and nothing waits before
    /// it; otherwise into the port's receive packet buffer, in order
    /// behind what already waits there, as any frame off a wire, so it
    /// waits for RX buffers rather than being dropped while the host is
    /// slow. What waits is moved on first, as buffers allow: one transmit
    /// pass can send far more than the buffer holds. Flow control
    /// ([`Self::reflect_room`]) keeps the buffer from overflowing; if it
    /// does all the same (a superframe of more segments than the room
    /// kept), the wire drops and counts.
    fn reflect(&mut self, frame: &[u8]) {
        if self.sh.inbox.device_owned() > 0 {
            self.receive_wire();
        }
        if self.sh.inbox.device_owned() == 0
            && self.deliver(frame, Offload::NONE) != Delivery::NoBuffer
        {
            return;
        }
        let inbox = &self.sh.inbox;
        // SAFETY: a loopback or reflector port has no cable and no
        // afpacket socket: this engine thread is its inbox's only
        // producer (and, in `receive_wire`, its only consumer).
        let pushed = unsafe {
            if inbox.free() < inbox.slots_for(frame.len()) {
                inbox.driver_reclaim();
            }
            inbox.driver_push_frame(frame, Offload::NONE)
        };
        if !pushed {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Receives what arrived over the wire. A frame whose RX ring has too
    /// few buffers posted waits in the inbox — the device's receive
    /// packet buffer, with flow control towards the link partner — until
    /// the driver posts more (its RX doorbell wakes the engine); when the
    /// inbox is full, the wire drops and counts.
    pub(super) fn receive_wire(&mut self) -> bool {
        let inbox = Arc::clone(&self.sh.inbox);
        if inbox.device_owned() == 0 {
            return false;
        }
        let carrier = self.sh.carrier.load(Ordering::Acquire);
        let mut scratch = std::mem::take(&mut self.wire_scratch);
        // SAFETY: this engine thread is the inbox's only device-side user.
        let n = unsafe {
            inbox.device_take(ENGINE_BUDGET, &mut scratch, |f, off| {
                if carrier {
                    self.deliver(f, off) != Delivery::NoBuffer
                } else {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    true
                }
            })
        };
        self.wire_scratch = scratch;
        if n > 0 {
            // As in `transmit`: a drain waiter may be watching the inbox.
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.sh.drain_waiters.load(Ordering::SeqCst) > 0 {
                self.sh.events.notify();
            }
        }
        n > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_take_their_bytes_and_framing_on_the_wire() {
        // Padded to 60, plus FCS, preamble and gap.
        assert_eq!(wire_bytes(14), 84);
        assert_eq!(wire_bytes(60), 84);
        assert_eq!(wire_bytes(64), 88);
        assert_eq!(wire_bytes(1514), 1538);
        // 1 GbE: 1.488 Mpps of minimum frames; 64 bytes before FCS: 1.420.
        assert!((line_rate_pps(1_000, 60) - 1_488_095.2).abs() < 1.0);
        assert!((line_rate_pps(1_000, 64) - 1_420_454.5).abs() < 1.0);
    }

    #[test]
    fn a_superframe_takes_the_wire_time_of_its_segments() {
        // 54 bytes of headers and 20000 of payload in 1448-byte segments:
        // 13 full ones and one of 1176, each with its headers again.
        let len = 54 + 20_000;
        let want = 13 * wire_bytes(54 + 1448) + wire_bytes(54 + 1176);
        assert_eq!(superframe_wire_bytes(len, 54, 1448), want);
        assert!(want > wire_bytes(len), "headers repeated per segment");
        // Exact multiples have no short last segment.
        assert_eq!(superframe_wire_bytes(54 + 2 * 1448, 54, 1448), 2 * wire_bytes(54 + 1448));
        // Not really cut: one frame.
        assert_eq!(superframe_wire_bytes(100, 54, 0), wire_bytes(100));
    }

    #[test]
    fn a_full_ring_drains_in_its_wire_time() {
        // 1024 frames of 1538 wire bytes at 1 Gb/s: 12.6 ms.
        assert_eq!(ring_drain_time(1024, 1500, 1_000), Duration::from_nanos(1024 * 1538 * 8));
        assert_eq!(ring_drain_time(64, 1500, 10), Duration::from_nanos(64 * 1538 * 8 * 100));
    }
}

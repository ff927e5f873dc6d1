//! The wires a port sends on: which kind it has (a sink, loopback, the
//! reflector, a cable to another port, a host interface), what a frame
//! costs there (its bytes and framing at the port's speed), and how long
//! a full ring takes to drain through it. (What the engine does with a
//! frame on each kind of wire is the engine's: `Engine::wire_out`.)

use std::time::Duration;

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
    /// A cable to another emulated port (`Device::cable`); until it is
    /// connected, frames are lost as on an unplugged port.
    Cable,
    /// A host interface through an `AF_PACKET` socket
    /// (`Device::attach_afpacket`): what the port sends leaves on it,
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

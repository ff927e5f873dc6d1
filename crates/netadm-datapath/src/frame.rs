//! netadm's test frames: IPv4/UDP frames that carry a stream id, a flow
//! id, a per-flow sequence number and the time they were built.
//!
//! ```text
//!  0  dst MAC (6)  6  src MAC (6)  12  ethertype 0x0800
//! 14  IPv4 header (20): proto UDP, src 198.18.F.F (F: flow), dst 198.19.0.1
//! 34  UDP header (8): src port 1024 + flow, dst port 20033 ("NA")
//! 42  stream (2)  44  flow (2)  46  sequence (4)  50  sent at (4)
//! 54  padding to the frame size
//! ```
//!
//! Real IPv4/UDP so that RSS and aggregation hashing (L2, L3, L4) see
//! flows as they would see any traffic: addresses and ports differ per
//! flow; the sequence number is payload. 198.18.0.0/15 is the benchmarking
//! range (RFC 2544). "Sent at" is in 16 ns ticks and wraps after 68 s;
//! latencies are taken modulo that.

use std::sync::OnceLock;
use std::time::Instant;

/// UDP destination port of test frames.
pub const PORT: u16 = 20033;
/// Smallest test frame: the headers and the test fields.
pub const HEADER: usize = 54;

/// Nanoseconds on a monotonic clock shared by every thread of the process.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The "sent at" field for now.
pub fn stamp() -> u32 {
    (now_ns() >> 4) as u32
}

/// Nanoseconds since a "sent at" stamp.
pub fn latency_ns(sent: u32) -> u64 {
    u64::from(stamp().wrapping_sub(sent)) << 4
}

/// What a test frame says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestHeader {
    /// Stream id.
    pub stream: u16,
    /// Flow id within the stream.
    pub flow: u16,
    /// Sequence number within the flow.
    pub seq: u32,
    /// When it was built, [`stamp`].
    pub sent: u32,
}

/// Writes a test frame of `len` bytes into `buf[..len]`.
pub fn write(buf: &mut [u8], len: usize, dst: [u8; 6], src: [u8; 6], h: TestHeader) {
    let len = len.max(HEADER);
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[14..34];
    ip.copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 0, 198, 19, 0, 1]);
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[14..16].copy_from_slice(&h.flow.to_be_bytes());
    let sum = checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut buf[34..42];
    udp[0..2].copy_from_slice(&1024u16.wrapping_add(h.flow).to_be_bytes());
    udp[2..4].copy_from_slice(&PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]); // no UDP checksum (legal in IPv4)
    buf[42..44].copy_from_slice(&h.stream.to_le_bytes());
    buf[44..46].copy_from_slice(&h.flow.to_le_bytes());
    buf[46..50].copy_from_slice(&h.seq.to_le_bytes());
    buf[50..54].copy_from_slice(&h.sent.to_le_bytes());
}

/// Reads a test frame's fields; `None` for any other frame.
pub fn parse(f: &[u8]) -> Option<TestHeader> {
    if f.len() < HEADER
        || f[12..14] != [0x08, 0x00]
        || f[23] != 17
        || f[36..38] != PORT.to_be_bytes()
    {
        return None;
    }
    let u16_at = |i: usize| u16::from_le_bytes([f[i], f[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(f[i..i + 4].try_into().unwrap());
    Some(TestHeader { stream: u16_at(42), flow: u16_at(44), seq: u32_at(46), sent: u32_at(50) })
}

/// The IPv4 header checksum.
pub(crate) fn checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_other_frames() {
        let mut b = [0u8; 64];
        let h = TestHeader { stream: 7, flow: 300, seq: 1 << 30, sent: 99 };
        write(&mut b, 64, [1; 6], [2; 6], h);
        assert_eq!(parse(&b), Some(h));
        assert_eq!(checksum(&b[14..34]), 0, "a valid IPv4 header sums to zero");
        assert_eq!(&b[26..30], &[198, 18, 1, 44], "the flow is in the source address");
        assert_eq!(parse(&b[..53]), None);
        b[36] = 0;
        assert_eq!(parse(&b), None);
    }
}

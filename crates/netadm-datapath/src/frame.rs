//! netadm's test frames: Ethernet frames that carry a stream id, a flow id,
//! a per-flow sequence number and the time they were built.
//!
//! ```text
//!  0  dst MAC (6)       6  src MAC (6)      12  ethertype 0x88b5 (2)
//! 14  magic "NADM" (4) 18  stream id (4)    22  flow id (4)
//! 26  sequence (8)     34  sent at, ns (8)  42  padding to the frame size
//! ```
//!
//! 0x88b5 is IEEE's ethertype for local experiments. The emulated RSS hashes
//! the first 26 bytes of such frames, so a flow stays on one queue.

use std::sync::OnceLock;
use std::time::Instant;

/// Ethertype of test frames (IEEE local experimental).
pub const ETHERTYPE: u16 = 0x88b5;
/// Smallest test frame: the header.
pub const HEADER: usize = 42;
const MAGIC: &[u8; 4] = b"NADM";

/// Nanoseconds on a monotonic clock shared by every thread of the process.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// What a test frame says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestHeader {
    /// Stream id.
    pub stream: u32,
    /// Flow id within the stream.
    pub flow: u32,
    /// Sequence number within the flow.
    pub seq: u64,
    /// When it was built, [`now_ns`].
    pub sent_ns: u64,
}

/// Writes a test frame header into `buf` (which must hold [`HEADER`]).
pub fn write(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], h: TestHeader) {
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    buf[14..18].copy_from_slice(MAGIC);
    buf[18..22].copy_from_slice(&h.stream.to_le_bytes());
    buf[22..26].copy_from_slice(&h.flow.to_le_bytes());
    buf[26..34].copy_from_slice(&h.seq.to_le_bytes());
    buf[34..42].copy_from_slice(&h.sent_ns.to_le_bytes());
}

/// Reads a test frame's header; `None` for any other frame.
pub fn parse(f: &[u8]) -> Option<TestHeader> {
    if f.len() < HEADER || f[12..14] != ETHERTYPE.to_be_bytes() || &f[14..18] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(f[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_le_bytes(f[i..i + 8].try_into().unwrap());
    Some(TestHeader { stream: u32_at(18), flow: u32_at(22), seq: u64_at(26), sent_ns: u64_at(34) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_other_frames() {
        let mut b = [0u8; 64];
        let h = TestHeader { stream: 7, flow: 3, seq: 1 << 40, sent_ns: 99 };
        write(&mut b, [1; 6], [2; 6], h);
        assert_eq!(parse(&b), Some(h));
        assert_eq!(parse(&b[..41]), None);
        b[12] = 0x08;
        assert_eq!(parse(&b), None);
    }
}

//! IEEE 802.1Q tags on Ethernet frames: inserting one after the source
//! MAC, reading and removing it, and keeping a frame's offload context
//! (checksum start, header length) pointing at the same bytes.

use crate::Offload;

/// The 802.1Q tag protocol identifier.
pub const TPID: u16 = 0x8100;

/// Bytes a tag adds to a frame.
pub const TAG_LEN: usize = 4;

/// The VLAN ID of a tagged frame (PCP and DEI ignored), or `None` for an
/// untagged one.
pub fn vid(frame: &[u8]) -> Option<u16> {
    if frame.get(12..14)? != TPID.to_be_bytes() {
        return None;
    }
    let tci = u16::from_be_bytes(frame.get(14..16)?.try_into().ok()?);
    Some(tci & 0x0fff)
}

/// `frame` with a tag for `vid` (PCP 0) after its MACs, into `out`, and
/// the offload context moved with the bytes it points at.
pub fn push(frame: &[u8], off: Offload, vid: u16, out: &mut Vec<u8>) -> Offload {
    push_tci(frame, off, vid & 0x0fff, out)
}

/// As [`push`], with a whole tag control word (a tag read back from a
/// socket's metadata).
pub fn push_tci(frame: &[u8], mut off: Offload, tci: u16, out: &mut Vec<u8>) -> Offload {
    out.clear();
    if frame.len() < 12 {
        out.extend_from_slice(frame);
        return off;
    }
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&TPID.to_be_bytes());
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&frame[12..]);
    if off.needs_csum() {
        off.csum_start += TAG_LEN as u16;
    }
    if off.hdr_len > 0 {
        off.hdr_len += TAG_LEN as u16;
    }
    off
}

/// A tagged frame's VLAN ID, the frame without its tag (into `out`) and the
/// offload context moved with it; `None` for an untagged frame.
pub fn pop(frame: &[u8], mut off: Offload, out: &mut Vec<u8>) -> Option<(u16, Offload)> {
    let vid = vid(frame)?;
    out.clear();
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&frame[12 + TAG_LEN..]);
    if off.needs_csum() {
        off.csum_start = off.csum_start.saturating_sub(TAG_LEN as u16);
    }
    off.hdr_len = off.hdr_len.saturating_sub(TAG_LEN as u16);
    Some((vid, off))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_then_pop_is_the_frame_and_its_offload() {
        let frame: Vec<u8> = (0..60u8).collect();
        let mut off = Offload::NONE;
        off.flags = crate::offload::F_NEEDS_CSUM;
        off.csum_start = 34;
        off.csum_offset = 16;
        let mut tagged = Vec::new();
        let t = push(&frame, off, 100, &mut tagged);
        assert_eq!(tagged.len(), 64);
        assert_eq!(&tagged[12..16], &[0x81, 0x00, 0x00, 100]);
        assert_eq!(t.csum_start, 38);
        assert_eq!(vid(&tagged), Some(100));
        assert_eq!(vid(&frame), None);
        let mut back = Vec::new();
        let (v, o) = pop(&tagged, t, &mut back).unwrap();
        assert_eq!((v, &back, o), (100, &frame, off));
        assert!(pop(&frame, off, &mut back).is_none());
    }

    #[test]
    fn the_vid_ignores_priority_bits() {
        let mut f = vec![0u8; 60];
        f[12..16].copy_from_slice(&[0x81, 0x00, 0xe0 | 0x0f, 0xfe]);
        assert_eq!(vid(&f), Some(4094));
    }
}

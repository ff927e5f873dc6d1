//! IEEE 802.1Q tags on Ethernet frames: inserting one after the source
//! MAC, reading and removing it, and keeping a frame's offload context
//! (checksum start, header length) pointing at the same bytes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{NicError, Offload};

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

/// Entries in the i40e-class device's VLAN filter table: the VIDs it lets
/// in when filtering is on.
pub const FILTER_ENTRIES: u16 = 256;

/// A device's VLAN filter table: off (every tagged frame passes to the
/// driver), or on, passing tagged frames only for the VIDs in it. One bit
/// per VID, read lock-free by the device's engine thread.
#[derive(Debug)]
pub struct FilterTable {
    on: AtomicBool,
    bits: [AtomicU64; 64],
    /// VIDs in the table; written under this lock.
    len: std::sync::Mutex<u16>,
}

impl Default for FilterTable {
    fn default() -> Self {
        Self {
            on: AtomicBool::new(false),
            bits: std::array::from_fn(|_| AtomicU64::new(0)),
            len: std::sync::Mutex::new(0),
        }
    }
}

impl FilterTable {
    /// Turns filtering on or off.
    pub fn enable(&self, on: bool) {
        self.on.store(on, Ordering::Release);
    }

    /// Whether a frame tagged `vid` is let in.
    pub fn passes(&self, vid: u16) -> bool {
        !self.on.load(Ordering::Acquire) || self.contains(vid)
    }

    fn contains(&self, vid: u16) -> bool {
        self.bits[usize::from(vid >> 6) & 63].load(Ordering::Acquire) & (1 << (vid & 63)) != 0
    }

    /// Adds or removes `vid` (1-4094); adding one more than
    /// [`FILTER_ENTRIES`] is refused, the table left as it was.
    pub fn write(&self, vid: u16, on: bool) -> Result<(), NicError> {
        if !(1..=4094).contains(&vid) {
            return Err(NicError::OutOfRange {
                register: "VLAN filter VID",
                value: vid.into(),
                max: 4094,
            });
        }
        let mut len = self.len.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.contains(vid) == on {
            return Ok(());
        }
        if on && *len >= FILTER_ENTRIES {
            return Err(NicError::OutOfRange {
                register: "VLAN filter table entries",
                value: u64::from(*len) + 1,
                max: FILTER_ENTRIES.into(),
            });
        }
        let word = &self.bits[usize::from(vid >> 6)];
        if on {
            word.fetch_or(1 << (vid & 63), Ordering::Release);
            *len += 1;
        } else {
            word.fetch_and(!(1 << (vid & 63)), Ordering::Release);
            *len -= 1;
        }
        Ok(())
    }

    /// The VIDs in the table.
    pub fn vids(&self) -> Vec<u16> {
        (1..=4094).filter(|&v| self.contains(v)).collect()
    }
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
    fn the_filter_table_holds_its_entries_and_refuses_one_more() {
        let t = FilterTable::default();
        assert!(t.passes(7), "off: everything passes");
        t.enable(true);
        assert!(!t.passes(7));
        for vid in 1..=FILTER_ENTRIES {
            t.write(vid, true).unwrap();
        }
        t.write(1, true).unwrap();
        assert!(matches!(t.write(4000, true), Err(NicError::OutOfRange { .. })));
        assert!(!t.passes(4000) && t.passes(7));
        t.write(7, false).unwrap();
        t.write(4000, true).unwrap();
        assert!(t.passes(4000) && !t.passes(7));
        assert_eq!(t.vids().len(), usize::from(FILTER_ENTRIES));
        assert!(t.write(4095, true).is_err() && t.write(0, true).is_err());
    }

    #[test]
    fn the_vid_ignores_priority_bits() {
        let mut f = vec![0u8; 60];
        f[12..16].copy_from_slice(&[0x81, 0x00, 0xe0 | 0x0f, 0xfe]);
        assert_eq!(vid(&f), Some(4094));
    }
}

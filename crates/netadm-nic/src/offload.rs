//! Offload metadata a descriptor carries, and the work the device does
//! for it: TCP segmentation (TSO) and checksum insertion on transmit,
//! checksum verification on receive.
//!
//! [`Offload`] is laid out as Linux's `struct virtio_net_hdr`, which is
//! what a TAP device with `IFF_VNET_HDR` and an `AF_PACKET` socket with
//! `PACKET_VNET_HDR` exchange: so a frame's offload state passes from the
//! kernel through the rings to the wire (or the other way) unchanged, as
//! the i40e context and data descriptors carry MSS, header lengths and
//! checksum offsets.

/// `flags`: the L4 checksum is partial; the device completes it
/// (`csum_start`, `csum_offset`).
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the device verified the L4 checksum on receive.
pub const F_DATA_VALID: u8 = 2;
/// `gso_type`: not a superframe.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4 superframe.
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: TCP over IPv6 superframe.
pub const GSO_TCPV6: u8 = 4;
/// `gso_type` bit: ECN (CWR on the first segment only).
pub const GSO_ECN: u8 = 0x80;

/// Bytes of the virtio-net header on the wire format (`virtio_net_hdr`).
pub const VNET_HDR_LEN: usize = 10;

/// What a frame asks of, or reports from, the device's offloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offload {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*`.
    pub gso_type: u8,
    /// Bytes of headers (Ethernet + IP + TCP) of a superframe.
    pub hdr_len: u16,
    /// Payload bytes per segment of a superframe.
    pub gso_size: u16,
    /// Where the partial checksum's coverage starts.
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum field is.
    pub csum_offset: u16,
}

impl Offload {
    /// No offload: a complete frame.
    pub const NONE: Self =
        Self { flags: 0, gso_type: 0, hdr_len: 0, gso_size: 0, csum_start: 0, csum_offset: 0 };

    /// Whether the frame is a superframe to segment.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }

    /// Whether the L4 checksum is left to the device.
    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }

    /// The virtio-net header (native byte order, as TAP and AF_PACKET use
    /// on a little-endian host without TUNSETVNETBE).
    pub fn to_vnet(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// Parses a virtio-net header.
    pub fn from_vnet(b: &[u8; VNET_HDR_LEN]) -> Self {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }
}

/// One's-complement sum of `data` folded into `acc` (RFC 1071).
fn sum(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
        if acc > 0xffff_0000 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Completes a partial checksum: the one's-complement sum from
/// `csum_start` to the end, with the pseudo-header sum the stack left in
/// the field, stored at `csum_start + csum_offset`. False when the
/// offsets fall outside the frame.
pub fn complete_csum(frame: &mut [u8], csum_start: usize, csum_offset: usize) -> bool {
    let at = csum_start + csum_offset;
    if csum_start >= frame.len() || at + 2 > frame.len() {
        return false;
    }
    let c = !fold(sum(0, &frame[csum_start..]));
    // A computed 0 is sent as 0xffff for UDP; TCP accepts either.
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// The L3/L4 layout of an Ethernet frame carrying TCP or UDP over IPv4 or
/// IPv6 (no IPv6 extension headers, no VLAN tag).
#[derive(Debug, Clone, Copy)]
struct Layout {
    l3: usize,
    v6: bool,
    l4: usize,
    proto: u8,
}

fn layout(f: &[u8]) -> Option<Layout> {
    let l3 = 14;
    match f.get(12..14)? {
        [0x08, 0x00] => {
            let ihl = usize::from(f.get(l3)? & 0x0f) * 4;
            if ihl < 20 || f.len() < l3 + ihl {
                return None;
            }
            // Fragments carry no complete L4 header to check.
            let frag = u16::from_be_bytes([f[l3 + 6], f[l3 + 7]]) & 0x3fff;
            (frag == 0).then_some(Layout { l3, v6: false, l4: l3 + ihl, proto: f[l3 + 9] })
        }
        [0x86, 0xdd] => {
            (f.len() >= l3 + 40).then(|| Layout { l3, v6: true, l4: l3 + 40, proto: f[l3 + 6] })
        }
        _ => None,
    }
}

fn pseudo(f: &[u8], lay: &Layout, l4_len: usize) -> u32 {
    let acc = if lay.v6 {
        sum(0, &f[lay.l3 + 8..lay.l3 + 40])
    } else {
        sum(0, &f[lay.l3 + 12..lay.l3 + 20])
    };
    acc + u32::from(lay.proto) + l4_len as u32
}

/// Bytes of a TCP or UDP frame's headers (Ethernet, IP, L4), read from
/// the frame itself: what each segment of a superframe repeats.
pub fn header_len(f: &[u8]) -> Option<usize> {
    let lay = layout(f)?;
    match lay.proto {
        6 => Some(lay.l4 + usize::from(f.get(lay.l4 + 12)? >> 4) * 4),
        17 => Some(lay.l4 + 8),
        _ => None,
    }
}

/// Verifies the TCP or UDP checksum of a complete frame: `Some(true)` if
/// it is right, `Some(false)` if wrong, `None` if the frame is not TCP or
/// UDP over IP (nothing to verify).
pub fn verify_l4(f: &[u8]) -> Option<bool> {
    let lay = layout(f)?;
    if lay.proto != 6 && lay.proto != 17 {
        return None;
    }
    let end = if lay.v6 {
        lay.l4 + usize::from(u16::from_be_bytes([f[lay.l3 + 4], f[lay.l3 + 5]]))
    } else {
        lay.l3 + usize::from(u16::from_be_bytes([f[lay.l3 + 2], f[lay.l3 + 3]]))
    };
    if end > f.len() || end < lay.l4 + 8 {
        return Some(false);
    }
    if lay.proto == 17 && !lay.v6 && f[lay.l4 + 6..lay.l4 + 8] == [0, 0] {
        return Some(true); // UDP over IPv4 without a checksum
    }
    let l4 = &f[lay.l4..end];
    Some(fold(sum(pseudo(f, &lay, l4.len()), l4)) == 0xffff)
}

/// Why a superframe could not be segmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsoError {
    /// Not TCP over IPv4/IPv6, or headers cut short.
    NotTcp,
    /// `gso_size` is zero.
    NoMss,
}

/// Segments a TCP superframe into frames of at most `gso_size` payload
/// bytes each, as the hardware does: headers copied, IPv4 total length,
/// identification and header checksum, IPv6 payload length, TCP sequence
/// number and flags (FIN and PSH on the last segment only, CWR on the
/// first only) and the TCP checksum computed for each. `emit` gets every
/// segment in order, in `scratch`.
pub fn segment_tcp(
    frame: &[u8],
    off: &Offload,
    scratch: &mut Vec<u8>,
    mut emit: impl FnMut(&mut [u8]),
) -> Result<usize, TsoError> {
    let lay = layout(frame).filter(|l| l.proto == 6).ok_or(TsoError::NotTcp)?;
    let doff = usize::from(frame.get(lay.l4 + 12).ok_or(TsoError::NotTcp)? >> 4) * 4;
    let hdr = lay.l4 + doff;
    if doff < 20 || hdr > frame.len() {
        return Err(TsoError::NotTcp);
    }
    let mss = usize::from(off.gso_size);
    if mss == 0 {
        return Err(TsoError::NoMss);
    }
    let payload = &frame[hdr..];
    let seq0 = u32::from_be_bytes(frame[lay.l4 + 4..lay.l4 + 8].try_into().unwrap());
    let id0 = u16::from_be_bytes([frame[lay.l3 + 4], frame[lay.l3 + 5]]);
    let flags0 = frame[lay.l4 + 13];
    let chunks = payload.len().div_ceil(mss).max(1);
    for i in 0..chunks {
        let body = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        scratch.clear();
        scratch.extend_from_slice(&frame[..hdr]);
        scratch.extend_from_slice(body);
        let s = &mut scratch[..];
        let l4_len = doff + body.len();
        if lay.v6 {
            s[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        } else {
            let tot = (lay.l4 - lay.l3 + l4_len) as u16;
            s[lay.l3 + 2..lay.l3 + 4].copy_from_slice(&tot.to_be_bytes());
            s[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            s[lay.l3 + 10..lay.l3 + 12].copy_from_slice(&[0, 0]);
            let c = !fold(sum(0, &s[lay.l3..lay.l4]));
            s[lay.l3 + 10..lay.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let seq = seq0.wrapping_add((i * mss) as u32);
        s[lay.l4 + 4..lay.l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut fl = flags0;
        if i + 1 < chunks {
            fl &= !(0x01 | 0x08); // FIN, PSH: last segment only
        }
        if i > 0 {
            fl &= !0x80; // CWR: first segment only
        }
        s[lay.l4 + 13] = fl;
        s[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&[0, 0]);
        let c = !fold(sum(pseudo(s, &lay, l4_len), &s[lay.l4..]));
        s[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&c.to_be_bytes());
        emit(s);
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame with `payload` bytes and a correct
    /// checksum.
    fn tcp4(payload: usize, flags: u8) -> Vec<u8> {
        let mut f = crate::testing::tcp4_frame(payload, 5201, 40000, 1000, flags);
        f[18..20].copy_from_slice(&0x1234u16.to_be_bytes());
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let c = !fold(sum(0, &f[14..34]));
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let lay = layout(&f).unwrap();
        let c = !fold(sum(pseudo(&f, &lay, 20 + payload), &f[34..]));
        f[50..52].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn vnet_header_round_trips() {
        let o = Offload {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        assert_eq!(Offload::from_vnet(&o.to_vnet()), o);
        assert!(o.is_gso() && o.needs_csum());
        assert!(!Offload::NONE.is_gso());
    }

    #[test]
    fn checksums_verify_and_a_flipped_byte_fails() {
        let mut f = tcp4(100, 0x18);
        assert_eq!(verify_l4(&f), Some(true));
        f[60] ^= 1;
        assert_eq!(verify_l4(&f), Some(false));
        assert_eq!(verify_l4(&[0u8; 60]), None, "not IP");
    }

    #[test]
    fn a_partial_checksum_is_completed() {
        let good = tcp4(333, 0x18);
        let mut f = good.clone();
        // What the stack leaves: the pseudo-header sum, not inverted.
        let lay = layout(&f).unwrap();
        let p = fold(pseudo(&f, &lay, 20 + 333));
        f[50..52].copy_from_slice(&p.to_be_bytes());
        assert!(complete_csum(&mut f, 34, 16));
        assert_eq!(f, good);
        assert!(!complete_csum(&mut f, 34, 4000));
    }

    #[test]
    fn tso_cuts_a_superframe_into_valid_segments() {
        let big = tcp4(4000, 0x19); // FIN|PSH|ACK
        let off = Offload { gso_type: GSO_TCPV4, gso_size: 1448, ..Offload::NONE };
        let mut segs = vec![];
        let n = segment_tcp(&big, &off, &mut Vec::new(), |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(n, 3);
        assert_eq!(header_len(&big), Some(54));
        let mut payload = vec![];
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(verify_l4(s), Some(true), "segment {i}");
            assert_eq!(fold(sum(0, &s[14..34])), 0xffff, "IPv4 header checksum {i}");
            let seq = u32::from_be_bytes(s[38..42].try_into().unwrap());
            assert_eq!(seq, 1000 + 1448 * i as u32);
            let last = i == 2;
            assert_eq!(s[47] & 0x09 != 0, last, "FIN/PSH on the last only");
            assert!(s.len() <= 14 + 40 + 1448);
            payload.extend_from_slice(&s[54..]);
        }
        assert_eq!(payload, big[54..]);
        assert_eq!(segment_tcp(&[0u8; 60], &off, &mut Vec::new(), |_| {}), Err(TsoError::NotTcp));
    }
}

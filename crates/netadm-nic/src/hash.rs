//! The hash the emulated RSS and the datapath's aggregation policies
//! share: FNV-1a over the bytes that identify a flow, then MurmurHash3's
//! finaliser, since queues and members are picked by the low bits, where
//! FNV is weak (changes that flip two low bits cancel). Inline: both run
//! per frame, from other crates and modules.

/// FNV-1a's offset basis: where a hash starts.
pub const FNV_SEED: u32 = 0x811c_9dc5;

/// FNV-1a of `bytes`, continuing from `h`.
#[inline]
pub fn fnv1a(h: u32, bytes: &[u8]) -> u32 {
    bytes.iter().fold(h, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// MurmurHash3's finaliser: spreads every input bit over the low bits.
#[inline]
pub fn fmix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

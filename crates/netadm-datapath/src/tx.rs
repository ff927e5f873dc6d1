//! Transmit paths over ring engines, and the per-port ring map that lets
//! the ring lifecycle steer senders away from rings it is about to stop.

use std::sync::{Arc, RwLock};

use netadm_rings::RingEngine;

use crate::generator::Tx;

#[derive(Debug, Clone, Default)]
struct MapState {
    rings: Vec<u16>,
    paused: bool,
}

/// Which of a port's rings senders may use, and whether they may send at
/// all. Senders hold the map's read lock for the length of one send, so
/// [`TxMap::pause`] returns only once no send is in progress: after it,
/// nothing new enters any ring until [`TxMap::resume`].
#[derive(Debug, Default)]
pub struct TxMap {
    state: RwLock<MapState>,
}

impl TxMap {
    /// A map allowing `rings`.
    pub fn new(rings: Vec<u16>) -> Self {
        Self { state: RwLock::new(MapState { rings, paused: false }) }
    }

    /// Stops new sends and waits out those in progress.
    pub fn pause(&self) {
        self.state.write().unwrap().paused = true;
    }

    /// Lets senders send again.
    pub fn resume(&self) {
        self.state.write().unwrap().paused = false;
    }

    /// Sets the rings senders may use.
    pub fn set(&self, rings: Vec<u16>) {
        self.state.write().unwrap().rings = rings;
    }

    /// The rings senders may use.
    pub fn rings(&self) -> Vec<u16> {
        self.state.read().unwrap().rings.clone()
    }
}

/// Sends over one port: flow `f` on the map's ring `f % len`, so each flow
/// keeps its order while the map holds still.
pub struct PortTx {
    engine: Arc<RingEngine>,
    map: Arc<TxMap>,
}

impl PortTx {
    /// A transmit path over `engine`, using the rings `map` allows.
    pub fn new(engine: Arc<RingEngine>, map: Arc<TxMap>) -> Self {
        Self { engine, map }
    }

    /// A transmit path over `engine`'s rings `0..rings` (a fixed map).
    pub fn fixed(engine: Arc<RingEngine>, rings: u16) -> Self {
        Self::new(engine, Arc::new(TxMap::new((0..rings.max(1)).collect())))
    }
}

impl Tx for PortTx {
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize {
        let st = self.map.state.read().unwrap();
        if st.paused || st.rings.is_empty() {
            return 0;
        }
        let ring = st.rings[flow as usize % st.rings.len()];
        self.engine.transmit(ring, frames).unwrap_or(0)
    }
}

/// Sends over several ports (an aggregation's members): `pick` chooses
/// the member for a flow's frames, then that member's rings as [`PortTx`].
pub struct MultiTx {
    members: Vec<PortTx>,
    pick: Pick,
}

/// Chooses a member for (flow, first frame, members).
pub type Pick = Box<dyn Fn(u32, &[u8], usize) -> usize + Send + Sync>;

impl MultiTx {
    /// A transmit path over `members`, flow `f` on member `f % members`.
    pub fn new(members: Vec<PortTx>) -> Self {
        Self::with_hash(members, Box::new(|flow, _, n| flow as usize % n))
    }

    /// A transmit path over `members`, the member for a flow chosen by
    /// `pick(flow, first_frame, members)`.
    pub fn with_hash(members: Vec<PortTx>, pick: Pick) -> Self {
        Self { members, pick }
    }
}

impl Tx for MultiTx {
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize {
        let (Some(first), n) = (frames.first(), self.members.len()) else { return 0 };
        if n == 0 {
            return 0;
        }
        let m = &self.members[(self.pick)(flow, first, n) % n];
        m.send(flow, frames)
    }
}

/// Which headers an aggregation's transmit hash covers (dladm's `-P`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HashLayers {
    /// MAC addresses.
    pub l2: bool,
    /// IP addresses.
    pub l3: bool,
    /// TCP/UDP ports.
    pub l4: bool,
}

/// The transmit hash of `frame` over `layers`: FNV-1a over the chosen
/// headers (IPv4 and IPv6; non-IP frames hash their MACs whatever the
/// policy, so they still go somewhere stable).
pub fn policy_hash(layers: HashLayers, f: &[u8]) -> u32 {
    fn fnv(h: u32, b: &[u8]) -> u32 {
        b.iter().fold(h, |h, &x| (h ^ u32::from(x)).wrapping_mul(0x0100_0193))
    }
    let get = |r: std::ops::Range<usize>| f.get(r).unwrap_or(&[]);
    let mut h = 0x811c_9dc5;
    let (addrs, proto, l4) = match f.get(12..14) {
        Some([0x08, 0x00]) => {
            let ihl = usize::from(f.get(14).map_or(5, |b| b & 0x0f)) * 4;
            (26..34, f.get(23).copied(), 14 + ihl..14 + ihl + 4)
        }
        Some([0x86, 0xdd]) => (22..54, f.get(20).copied(), 54..58),
        _ => return fmix(fnv(h, get(0..12))),
    };
    if layers.l2 {
        h = fnv(h, get(0..12));
    }
    if layers.l3 {
        h = fnv(h, get(addrs));
    }
    if layers.l4 && matches!(proto, Some(6 | 17)) {
        h = fnv(h, get(l4));
    }
    fmix(h)
}

/// MurmurHash3's finaliser: FNV's low bits are weak (changes that flip two
/// low bits cancel), and members are picked by the low bits.
fn fmix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{TestHeader, write};

    fn frame(flow: u16, seq: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        write(
            &mut b,
            64,
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            TestHeader { stream: 1, flow, seq, sent: 0 },
        );
        b
    }

    #[test]
    fn policy_hashing_spreads_flows_and_keeps_each_on_one_member() {
        for layers in [
            HashLayers { l3: true, ..Default::default() },
            HashLayers { l4: true, ..Default::default() },
            HashLayers { l2: true, l3: true, l4: true },
        ] {
            let mut per_member = [0u32; 2];
            for flow in 0..64 {
                let m = policy_hash(layers, &frame(flow, 0)) % 2;
                per_member[m as usize] += 1;
                for seq in [1, 1000, 77_777] {
                    assert_eq!(
                        policy_hash(layers, &frame(flow, seq)) % 2,
                        m,
                        "{layers:?}: flow {flow} moved"
                    );
                }
            }
            assert!(per_member.iter().all(|&n| n >= 16), "{layers:?}: {per_member:?}");
        }
        // L2 alone sees one MAC pair: one member for everything.
        let l2 = HashLayers { l2: true, ..Default::default() };
        let first = policy_hash(l2, &frame(0, 0));
        assert!((0..64).all(|f| policy_hash(l2, &frame(f, 9)) == first));
    }
}

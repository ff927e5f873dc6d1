//! Transmit paths over ring engines, and the per-port ring map that lets
//! the ring lifecycle steer senders away from rings it is about to stop.

use std::sync::{Arc, RwLock};

use netadm_rings::RingEngine;

use crate::generator::Tx;

#[derive(Debug, Clone, Default)]
struct MapState {
    rings: Vec<u16>,
    /// Holders of a pause: senders may send while there are none.
    paused: u32,
}

/// Which of a port's rings senders may use, and whether they may send at
/// all. Senders hold the map's read lock for the length of one send, so
/// [`TxMap::pause`] returns only once no send is in progress: after it,
/// nothing new enters any ring until [`TxMap::resume`]. Pauses nest: two
/// holders (an MTU change and a carrier change, say) each pause and
/// resume, and senders go on only when both have resumed.
#[derive(Debug, Default)]
pub struct TxMap {
    state: RwLock<MapState>,
}

impl TxMap {
    /// A map allowing `rings`.
    pub fn new(rings: Vec<u16>) -> Self {
        Self { state: RwLock::new(MapState { rings, paused: 0 }) }
    }

    /// Stops new sends and waits out those in progress.
    pub fn pause(&self) {
        self.state.write().unwrap().paused += 1;
    }

    /// Ends one [`TxMap::pause`]: senders send again once every pause has
    /// ended.
    pub fn resume(&self) {
        let mut st = self.state.write().unwrap();
        st.paused = st.paused.saturating_sub(1);
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
        if st.paused > 0 || st.rings.is_empty() {
            return 0;
        }
        let ring = st.rings[flow as usize % st.rings.len()];
        self.engine.transmit(ring, frames).unwrap_or(0)
    }

    fn send_offload(&self, flow: u32, frame: &[u8], off: netadm_nic::Offload) -> bool {
        let st = self.map.state.read().unwrap();
        if st.paused > 0 || st.rings.is_empty() {
            return false;
        }
        let ring = st.rings[flow as usize % st.rings.len()];
        self.engine.transmit_offload(ring, frame, off).unwrap_or(false)
    }

    fn wait_room(&self, flow: u32, frame: &[u8], within: std::time::Duration) {
        let ring = {
            let st = self.map.state.read().unwrap();
            if st.paused > 0 || st.rings.is_empty() {
                // Paused: the pause ends with no completion to wake us.
                drop(st);
                std::thread::yield_now();
                return;
            }
            st.rings[flow as usize % st.rings.len()]
        };
        self.engine.wait_tx_room(ring, frame.len(), within);
    }

    fn busy_poll(&self) -> Option<u32> {
        let rings = self.map.rings();
        self.engine.busy_poll(&rings)
    }

    fn busy_poll_hold(&self) -> Vec<netadm_rings::PollHold> {
        // Under the map's read lock: taking a hold delivers nothing, so
        // nothing can send on this path meanwhile.
        let st = self.map.state.read().unwrap();
        self.engine.busy_poll_hold(&st.rings).into_iter().collect()
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

    fn send_offload(&self, flow: u32, frame: &[u8], off: netadm_nic::Offload) -> bool {
        let n = self.members.len();
        n > 0 && self.members[(self.pick)(flow, frame, n) % n].send_offload(flow, frame, off)
    }

    fn wait_room(&self, flow: u32, frame: &[u8], within: std::time::Duration) {
        match self.members.len() {
            0 => std::thread::yield_now(),
            n => self.members[(self.pick)(flow, frame, n) % n].wait_room(flow, frame, within),
        }
    }

    fn busy_poll(&self) -> Option<u32> {
        self.members.iter().map(Tx::busy_poll).sum()
    }

    fn busy_poll_hold(&self) -> Vec<netadm_rings::PollHold> {
        self.members.iter().flat_map(Tx::busy_poll_hold).collect()
    }
}

/// One member of an aggregation as its transmit path sees it.
pub struct Member {
    /// The member's port name.
    pub name: String,
    /// Its transmit path.
    pub tx: Arc<dyn Tx>,
    /// Whether it may carry traffic now (carrier, and later LACP
    /// distributing); read on every send.
    pub usable: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// Hash buckets: a flow's hash picks a bucket, a bucket names a member.
const BUCKETS: usize = 256;

struct AggrState {
    members: Vec<Member>,
    buckets: Vec<u8>,
    layers: HashLayers,
    /// Per member, whether flows are placed on it: its usability as last
    /// adopted ([`AggrTx::adopt_usable`], [`AggrTx::set_members`]), which
    /// is where the frames of its flows are in flight.
    placed: Vec<bool>,
}

/// An aggregation's transmit path: flows hashed by policy into buckets,
/// buckets assigned to members. Membership changes move only the buckets
/// they must (flows on other members stay put); a member that is not
/// usable (carrier down, LACP not distributing) has its flows spread over
/// the others until it is back, without moving anyone else's.
///
/// Flows never move on their own: a flow goes where the last adopted
/// placement puts it. When a member becomes usable, its flows stay where
/// they are until the owner, with senders paused and what they sent
/// delivered, calls [`AggrTx::adopt_usable`]; when one becomes unusable,
/// the flows placed on it are held (sends refused, as a full ring would)
/// until then. So a flow changes member only with nothing of it in flight,
/// and no frame overtakes an earlier one of its flow.
pub struct AggrTx {
    state: RwLock<AggrState>,
}

impl AggrTx {
    /// An aggregation path over `members`, hashing `layers`.
    pub fn new(layers: HashLayers, members: Vec<Member>) -> Self {
        let t = Self {
            state: RwLock::new(AggrState {
                members: vec![],
                buckets: vec![0; BUCKETS],
                layers,
                placed: vec![],
            }),
        };
        t.set_members(members);
        t
    }

    /// Changes the hash policy (`modify-aggr -P`).
    pub fn set_layers(&self, layers: HashLayers) {
        self.state.write().unwrap().layers = layers;
    }

    /// The member names, in order.
    pub fn member_names(&self) -> Vec<String> {
        self.state.read().unwrap().members.iter().map(|m| m.name.clone()).collect()
    }

    /// Whether some member's usability differs from the placement flows
    /// follow: [`AggrTx::adopt_usable`] is due, with senders drained.
    pub fn placement_stale(&self) -> bool {
        let st = self.state.read().unwrap();
        st.members.iter().zip(&st.placed).any(|(m, &p)| (m.usable)() != p)
    }

    /// Places flows by each member's usability now, moving the flows of
    /// members that became usable or unusable since the last placement.
    /// The caller has paused the members' senders and waited for what
    /// they sent to arrive. Returns the members that changed, with their
    /// new usability.
    pub fn adopt_usable(&self) -> Vec<(String, bool)> {
        let mut st = self.state.write().unwrap();
        let now: Vec<bool> = st.members.iter().map(|m| (m.usable)()).collect();
        let changed = st
            .members
            .iter()
            .zip(st.placed.iter().zip(&now))
            .filter(|(_, (was, is))| was != is)
            .map(|(m, (_, &is))| (m.name.clone(), is))
            .collect();
        st.placed = now;
        changed
    }

    /// Replaces the members. Buckets of members that stay keep their
    /// member; a new member takes an even share from the others. Flows
    /// are placed by every member's usability now: the caller has paused
    /// and drained the senders, as for [`AggrTx::adopt_usable`].
    pub fn set_members(&self, members: Vec<Member>) {
        let mut st = self.state.write().unwrap();
        let old: Vec<String> = st.members.iter().map(|m| m.name.clone()).collect();
        st.placed = members.iter().map(|m| (m.usable)()).collect();
        let n = members.len();
        if n == 0 {
            st.members = members;
            return;
        }
        // Map each bucket to the new index of its old member, if it stays.
        let mut buckets: Vec<Option<usize>> = st
            .buckets
            .iter()
            .map(|&b| {
                old.get(b as usize).and_then(|name| members.iter().position(|m| &m.name == name))
            })
            .collect();
        // Every member gets BUCKETS / n (+1) buckets: take the excess from
        // the fullest, give orphans and the excess to the emptiest.
        let target = |i: usize| BUCKETS / n + usize::from(i < BUCKETS % n);
        let mut count = vec![0usize; n];
        for b in buckets.iter().flatten() {
            count[*b] += 1;
        }
        for slot in buckets.iter_mut() {
            if let Some(m) = *slot
                && count[m] > target(m)
            {
                count[m] -= 1;
                *slot = None;
            }
        }
        for slot in buckets.iter_mut().filter(|s| s.is_none()) {
            let m = (0..n).find(|&m| count[m] < target(m)).unwrap_or(0);
            count[m] += 1;
            *slot = Some(m);
        }
        st.buckets = buckets.into_iter().map(|b| b.unwrap_or(0) as u8).collect();
        st.members = members;
    }

    /// The member a frame goes to, by name (for tests and diagnostics).
    pub fn member_for(&self, frame: &[u8]) -> Option<String> {
        let st = self.state.read().unwrap();
        Self::pick(&st, frame).map(|i| st.members[i].name.clone())
    }

    /// The member a frame's flow is placed on, if it can carry it now;
    /// `None` holds the frame (nobody placed, or its member has become
    /// unusable and its flows wait to be moved with nothing in flight).
    fn pick(st: &AggrState, frame: &[u8]) -> Option<usize> {
        if st.members.is_empty() {
            return None;
        }
        let h = policy_hash(st.layers, frame) as usize;
        let mut m = st.buckets[h % BUCKETS] as usize;
        if !st.placed[m] {
            // Its member was not usable: its flows are spread over the
            // members that were.
            let up = st.placed.iter().filter(|&&p| p).count();
            if up == 0 {
                return None;
            }
            m = (0..st.members.len()).filter(|&i| st.placed[i]).nth((h / BUCKETS) % up)?;
        }
        (st.members[m].usable)().then_some(m)
    }
}

impl Tx for AggrTx {
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize {
        let st = self.state.read().unwrap();
        let Some(first) = frames.first() else { return 0 };
        match Self::pick(&st, first) {
            Some(m) => st.members[m].tx.send(flow, frames),
            None => 0,
        }
    }

    fn send_offload(&self, flow: u32, frame: &[u8], off: netadm_nic::Offload) -> bool {
        let st = self.state.read().unwrap();
        Self::pick(&st, frame).is_some_and(|m| st.members[m].tx.send_offload(flow, frame, off))
    }

    fn wait_room(&self, flow: u32, frame: &[u8], within: std::time::Duration) {
        // Not under the state lock: a member change must not wait for it.
        let member = {
            let st = self.state.read().unwrap();
            Self::pick(&st, frame).map(|m| Arc::clone(&st.members[m].tx))
        };
        match member {
            Some(m) => m.wait_room(flow, frame, within),
            None => std::thread::yield_now(),
        }
    }

    fn busy_poll(&self) -> Option<u32> {
        // Not under the state lock: what the poll delivers may lead to a
        // send on this path (a read lock taken twice waits behind a
        // writer that came in between).
        let members: Vec<Arc<dyn Tx>> =
            self.state.read().unwrap().members.iter().map(|m| Arc::clone(&m.tx)).collect();
        members.iter().map(|m| m.busy_poll()).sum()
    }

    fn busy_poll_hold(&self) -> Vec<netadm_rings::PollHold> {
        // Under the state lock, unlike `busy_poll`: a hold delivers nothing.
        self.state.read().unwrap().members.iter().flat_map(|m| m.tx.busy_poll_hold()).collect()
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
    use netadm_nic::hash::{FNV_SEED, fmix, fnv1a as fnv};
    let get = |r: std::ops::Range<usize>| f.get(r).unwrap_or(&[]);
    let mut h = FNV_SEED;
    // What a VLAN link sends carries its tag: the headers are 4 bytes on.
    let t = if f.get(12..14) == Some(&[0x81, 0x00]) { 4 } else { 0 };
    let (addrs, proto, l4) = match f.get(12 + t..14 + t) {
        Some([0x08, 0x00]) => {
            let ihl = usize::from(f.get(14 + t).map_or(5, |b| b & 0x0f)) * 4;
            // A fragment has no ports, or not in all its pieces: the
            // datagram's pieces go by the addresses, together.
            let whole = f.get(20 + t..22 + t).is_some_and(|b| b[0] & 0x3f == 0 && b[1] == 0);
            let proto = f.get(23 + t).copied().filter(|_| whole);
            (26 + t..34 + t, proto, 14 + t + ihl..14 + t + ihl + 4)
        }
        Some([0x86, 0xdd]) => (22 + t..54 + t, f.get(20 + t).copied(), 54 + t..58 + t),
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
        // The pieces of one fragmented datagram go together (only the
        // first has ports); a VLAN's tag does not hide the 5-tuple.
        let l4 = HashLayers { l3: true, l4: true, ..Default::default() };
        let mut first = frame(7, 0);
        first[20] = 0x20;
        // A later piece: an offset, and payload where the ports were.
        let mut later = frame(7, 0);
        later[20..22].copy_from_slice(&[0, 185]);
        later[34..38].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(policy_hash(l4, &first), policy_hash(l4, &later), "fragments split");
        let tag = |f: &[u8]| [&f[..12], &[0x81, 0, 0, 5], &f[12..]].concat();
        let tagged: std::collections::BTreeSet<u32> =
            (0..64).map(|flow| policy_hash(l4, &tag(&frame(flow, 0))) % 4).collect();
        assert_eq!(tagged.len(), 4, "tagged flows on one member: {tagged:?}");
        // (see also aggregation_buckets_move_only_what_they_must)
        // L2 alone sees one MAC pair: one member for everything.
        let l2 = HashLayers { l2: true, ..Default::default() };
        let first = policy_hash(l2, &frame(0, 0));
        assert!((0..64).all(|f| policy_hash(l2, &frame(f, 9)) == first));
    }
}

#[cfg(test)]
mod aggr_tests {
    use super::*;
    use crate::frame::{TestHeader, write};
    use std::sync::atomic::{AtomicBool, Ordering};

    fn frame(flow: u16) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let h = TestHeader { stream: 1, flow, seq: 0, sent: 0 };
        write(&mut b, 64, [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], h);
        b
    }

    struct Nowhere;
    impl Tx for Nowhere {
        fn send(&self, _: u32, frames: &[&[u8]]) -> usize {
            frames.len()
        }
        fn send_offload(&self, _: u32, _: &[u8], _: netadm_nic::Offload) -> bool {
            true
        }
    }

    fn member(name: &str, up: &Arc<AtomicBool>) -> Member {
        let up = up.clone();
        Member {
            name: name.into(),
            tx: Arc::new(Nowhere),
            usable: Arc::new(move || up.load(Ordering::Relaxed)),
        }
    }

    fn placement(a: &AggrTx) -> Vec<String> {
        (0..512).map(|f| a.member_for(&frame(f)).unwrap_or_default()).collect()
    }

    #[test]
    fn aggregation_buckets_move_only_what_they_must() {
        let l4 = HashLayers { l4: true, ..Default::default() };
        let (a_up, b_up, c_up) = (
            Arc::new(AtomicBool::new(true)),
            Arc::new(AtomicBool::new(true)),
            Arc::new(AtomicBool::new(true)),
        );
        let a = AggrTx::new(l4, vec![member("a", &a_up), member("b", &b_up)]);
        let two = placement(&a);
        let on = |p: &[String], m: &str| p.iter().filter(|x| *x == m).count();
        assert!(
            on(&two, "a") > 150 && on(&two, "b") > 150,
            "spread: {} / {}",
            on(&two, "a"),
            on(&two, "b")
        );

        // A third member takes a share; nobody else's flows move.
        a.set_members(vec![member("a", &a_up), member("b", &b_up), member("c", &c_up)]);
        let three = placement(&a);
        assert!(on(&three, "c") > 100);
        for (before, after) in two.iter().zip(&three) {
            assert!(after == before || after == "c", "a flow moved from {before} to {after}");
        }

        // b's carrier drops: b's flows are held (nothing else moves) until
        // the placement is adopted, then only b's flows move.
        b_up.store(false, Ordering::Relaxed);
        assert!(a.placement_stale());
        let held = placement(&a);
        for (before, after) in three.iter().zip(&held) {
            if before == "b" {
                assert_eq!(after, "", "held until drained and moved");
            } else {
                assert_eq!(after, before, "a flow on a live member moved");
            }
        }
        assert_eq!(a.adopt_usable(), vec![("b".to_string(), false)]);
        assert!(!a.placement_stale());
        let down = placement(&a);
        for (before, after) in three.iter().zip(&down) {
            if before == "b" {
                assert!(after == "a" || after == "c", "{after}");
            } else {
                assert_eq!(after, before, "a flow on a live member moved");
            }
        }
        // Back: its flows stay on the others until adopted, then return.
        b_up.store(true, Ordering::Relaxed);
        assert!(a.placement_stale());
        assert_eq!(placement(&a), down, "nothing moves before the drain");
        assert_eq!(a.adopt_usable(), vec![("b".to_string(), true)]);
        assert_eq!(placement(&a), three);

        // Removing a member moves its flows only.
        a.set_members(vec![member("a", &a_up), member("c", &c_up)]);
        let removed = placement(&a);
        for (before, after) in three.iter().zip(&removed) {
            if before != "b" {
                assert_eq!(after, before);
            }
        }
        // Nobody usable: nothing is sent, before or after adopting it.
        a_up.store(false, Ordering::Relaxed);
        c_up.store(false, Ordering::Relaxed);
        assert_eq!(a.send(0, &[&frame(1)]), 0);
        a.adopt_usable();
        assert_eq!(a.send(0, &[&frame(1)]), 0);
    }
}

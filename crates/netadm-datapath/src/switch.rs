//! The virtual switch between the IP interfaces over one link, as the
//! illumos MAC layer switches between the clients of a MAC: a frame one
//! interface sends to another interface's MAC on the same link (same
//! VLAN) is delivered to it directly and never reaches the wire;
//! broadcast and multicast go to every other interface of the link's VLAN
//! and, for a link with ports, to the wire as well. Nothing is learnt:
//! every local MAC is configured. An etherstub is a switch with no wire.

use std::sync::atomic::{AtomicU64, Ordering};

use netadm_nic::Offload;

use crate::endpoint::{Endpoint, Endpoints};

/// What is left to do with a frame after [`VSwitch::forward`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    /// It was for a local interface and has been delivered: not for the wire.
    Delivered,
    /// It goes to the wire (unicast to no local interface, or broadcast
    /// and multicast, already flooded to the local interfaces).
    Wire,
}

/// One link's switch: its interfaces by (VLAN, MAC).
#[derive(Default)]
pub struct VSwitch {
    endpoints: Endpoints,
    delivered: AtomicU64,
    flooded: AtomicU64,
    dropped: AtomicU64,
}

impl std::fmt::Debug for VSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VSwitch").field("counts", &self.counts()).finish_non_exhaustive()
    }
}

/// A switch's books.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchCounts {
    /// Unicast frames delivered from one local interface to another.
    pub delivered: u64,
    /// Broadcast and multicast frames flooded to the local interfaces.
    pub flooded: u64,
    /// Frames for no local interface on a switch without a wire.
    pub dropped: u64,
}

impl VSwitch {
    /// An empty switch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or, with `None`, removes) the interface of MAC `mac` on VLAN
    /// `vid` (0: untagged).
    pub fn set_endpoint(&self, vid: u16, mac: [u8; 6], h: Option<Endpoint>) {
        self.endpoints.set(vid, mac, h);
    }

    /// Whether no interface is on the switch.
    pub fn is_empty(&self) -> bool {
        self.endpoints.read().is_empty()
    }

    /// Switches `frame` (untagged) that the interface of MAC `from` on VLAN
    /// `vid` sent: delivers it to the local interface it is for, or floods
    /// it (broadcast, multicast) to every other one of that VLAN, and says
    /// whether it must still go to the wire.
    pub fn forward(&self, vid: u16, from: [u8; 6], frame: &[u8], off: Offload) -> Forward {
        let Some(dst) = frame.get(..6) else { return Forward::Wire };
        let all = self.endpoints.read();
        let Some(e) = all.get(&vid) else { return Forward::Wire };
        if dst[0] & 1 == 1 {
            let mut any = false;
            for (_, h) in e.iter().filter(|(m, _)| **m != from) {
                h(frame, off);
                any = true;
            }
            if any {
                self.flooded.fetch_add(1, Ordering::Relaxed);
            }
            return Forward::Wire;
        }
        let dst: [u8; 6] = dst.try_into().expect("6 bytes");
        match e.get(&dst) {
            Some(h) if dst != from => {
                h(frame, off);
                self.delivered.fetch_add(1, Ordering::Relaxed);
                Forward::Delivered
            }
            _ => Forward::Wire,
        }
    }

    /// Counts a frame that had nowhere to go (no wire).
    pub fn drop_frame(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The switch's books.
    pub fn counts(&self) -> SwitchCounts {
        SwitchCounts {
            delivered: self.delivered.load(Ordering::Relaxed),
            flooded: self.flooded.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn sink() -> (Endpoint, Arc<Mutex<Vec<Vec<u8>>>>) {
        let got = Arc::new(Mutex::new(vec![]));
        let g = got.clone();
        (Arc::new(move |f: &[u8], _| g.lock().unwrap().push(f.to_vec())), got)
    }

    #[test]
    fn unicast_is_delivered_locally_and_broadcast_flooded_to_the_others() {
        let s = VSwitch::new();
        let (a, b, c) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]);
        let (ha, ga) = sink();
        let (hb, gb) = sink();
        let (hc, gc) = sink();
        s.set_endpoint(0, a, Some(ha));
        s.set_endpoint(0, b, Some(hb));
        s.set_endpoint(7, c, Some(hc));
        let frame = |dst: [u8; 6], src: [u8; 6]| [&dst[..], &src[..], &[0x08, 0, 1, 2]].concat();
        // a -> b: local, not for the wire.
        assert_eq!(s.forward(0, a, &frame(b, a), Offload::NONE), Forward::Delivered);
        assert_eq!(gb.lock().unwrap().len(), 1);
        // a -> elsewhere: the wire.
        assert_eq!(s.forward(0, a, &frame([2, 9, 9, 9, 9, 9], a), Offload::NONE), Forward::Wire);
        // Broadcast from a: b (not a itself, not VLAN 7's c), and the wire.
        assert_eq!(s.forward(0, a, &frame([0xff; 6], a), Offload::NONE), Forward::Wire);
        assert_eq!((ga.lock().unwrap().len(), gb.lock().unwrap().len()), (0, 2));
        assert!(gc.lock().unwrap().is_empty());
        // c's MAC on another VLAN is not reachable from VLAN 0.
        assert_eq!(s.forward(0, a, &frame(c, a), Offload::NONE), Forward::Wire);
        assert_eq!(s.counts(), SwitchCounts { delivered: 1, flooded: 1, dropped: 0 });
        s.set_endpoint(0, b, None);
        assert_eq!(s.forward(0, a, &frame(b, a), Offload::NONE), Forward::Wire);
    }
}

//! Receive-side classification: which client a frame a port received
//! belongs to.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use netadm_rings::RingClient;

/// Where a classified frame goes; also a switch's interfaces.
pub use crate::endpoint::Endpoint;
use crate::endpoint::Endpoints;
use crate::frame::parse;
use crate::stream::Stream;

/// The traffic streams running, by id: any port's classifier hands them
/// their frames, wherever they arrive (back from a reflector, over a
/// cable at the far port).
#[derive(Debug, Default)]
pub struct StreamTable {
    streams: RwLock<HashMap<u16, Arc<Stream>>>,
}

impl StreamTable {
    /// Registers a stream.
    pub fn insert(&self, s: Arc<Stream>) {
        self.streams.write().unwrap().insert(s.id(), s);
    }

    /// Unregisters a stream.
    pub fn remove(&self, id: u16) -> Option<Arc<Stream>> {
        self.streams.write().unwrap().remove(&id)
    }

    /// A registered stream.
    pub fn get(&self, id: u16) -> Option<Arc<Stream>> {
        self.streams.read().unwrap().get(&id).cloned()
    }
}

/// One port's receive classifier, installed as its ring engine's client.
pub struct Classifier {
    streams: Arc<StreamTable>,
    unclaimed: AtomicU64,
    /// Where Slow Protocols frames (LACPDUs) go.
    slow: RwLock<Option<SlowHandler>>,
    /// Clients by VLAN (0: untagged) and destination MAC (IP interfaces'
    /// TAP devices); broadcast and multicast frames go to all of a VLAN's.
    /// Tagged frames reach them with the tag taken off.
    endpoints: Endpoints,
    /// Tagged frames for a VLAN no endpoint is on (dropped).
    vlan_dropped: AtomicU64,
}

/// Receives the Slow Protocols frames (LACPDUs) a port gets.
pub type SlowHandler = Arc<dyn Fn(&[u8]) + Send + Sync>;

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier").field("unclaimed", &self.unclaimed()).finish_non_exhaustive()
    }
}

impl Classifier {
    /// A classifier delivering test frames to `streams`.
    pub fn new(streams: Arc<StreamTable>) -> Self {
        Self {
            streams,
            unclaimed: AtomicU64::new(0),
            slow: RwLock::new(None),
            endpoints: Endpoints::default(),
            vlan_dropped: AtomicU64::new(0),
        }
    }

    /// Delivers frames for `mac` (and broadcast and multicast) to `h`, or
    /// stops delivering them.
    pub fn set_endpoint(&self, mac: [u8; 6], h: Option<Endpoint>) {
        self.set_vlan_endpoint(0, mac, h);
    }

    /// As [`Classifier::set_endpoint`], for the frames tagged with VLAN
    /// `vid` (0: untagged frames), which `h` receives untagged.
    pub fn set_vlan_endpoint(&self, vid: u16, mac: [u8; 6], h: Option<Endpoint>) {
        self.endpoints.set(vid, mac, h);
    }

    /// Tagged frames for a VLAN no endpoint is on: dropped, as a NIC's
    /// VLAN filter drops them.
    pub fn vlan_dropped(&self) -> u64 {
        self.vlan_dropped.load(Ordering::Relaxed)
    }

    /// Sends Slow Protocols frames (ethertype 0x8809) to `h`.
    pub fn set_slow_handler(&self, h: Option<SlowHandler>) {
        *self.slow.write().unwrap() = h;
    }

    /// Frames no client claimed (dropped).
    pub fn unclaimed(&self) -> u64 {
        self.unclaimed.load(Ordering::Relaxed)
    }
}

impl RingClient for Classifier {
    fn rx(&self, _ring: u16, frame: &[u8], off: netadm_nic::Offload) {
        if frame.get(12..14) == Some(&crate::lacp::ETHERTYPE.to_be_bytes())
            && let Some(h) = self.slow.read().unwrap().as_ref()
        {
            h(frame);
            return;
        }
        if let Some(h) = parse(frame)
            && let Some(s) = self.streams.get(h.stream)
        {
            s.receive(&h, frame.len());
            return;
        }
        if netadm_nic::vlan::vid(frame).is_some() {
            UNTAGGED.with_borrow_mut(|buf| {
                let (vid, off) = netadm_nic::vlan::pop(frame, off, buf).expect("tagged");
                self.deliver(vid, buf, off);
            });
        } else {
            self.deliver(0, frame, off);
        }
    }
}

thread_local! {
    /// Where a tagged frame is copied without its tag, per receiving thread.
    static UNTAGGED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Classifier {
    /// Hands a frame (untagged, of VLAN `vid`, 0 for none) to the endpoints
    /// on that VLAN its destination names, or counts it dropped.
    fn deliver(&self, vid: u16, frame: &[u8], off: netadm_nic::Offload) {
        let all = self.endpoints.read();
        let Some(e) = all.get(&vid) else {
            if vid != 0 {
                self.vlan_dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                self.unclaimed.fetch_add(1, Ordering::Relaxed);
            }
            return;
        };
        if let Some(dst) = frame.get(..6) {
            if dst[0] & 1 == 1 {
                e.values().for_each(|h| h(frame, off));
                return;
            } else if let Some(h) = e.get(<&[u8; 6]>::try_from(dst).unwrap()) {
                h(frame, off);
                return;
            }
        }
        self.unclaimed.fetch_add(1, Ordering::Relaxed);
    }
}

/// An L2 forwarder: every frame a port receives is sent back out of
/// `out`, staged per poll and transmitted as one batch.
pub struct Forwarder {
    out: Arc<dyn crate::Tx>,
    staged: std::sync::Mutex<(Vec<u8>, Vec<usize>)>,
    forwarded: AtomicU64,
    dropped: AtomicU64,
}

impl Forwarder {
    /// A forwarder sending over `out`.
    pub fn new(out: Arc<dyn crate::Tx>) -> Self {
        Self {
            out,
            staged: std::sync::Mutex::new((
                Vec::with_capacity(256 * 2048),
                Vec::with_capacity(256),
            )),
            forwarded: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Frames forwarded and frames the output refused.
    pub fn counts(&self) -> (u64, u64) {
        (self.forwarded.load(Ordering::Relaxed), self.dropped.load(Ordering::Relaxed))
    }
}

impl RingClient for Forwarder {
    fn rx(&self, _ring: u16, frame: &[u8], _off: netadm_nic::Offload) {
        let mut st = self.staged.lock().unwrap();
        st.0.extend_from_slice(frame);
        st.1.push(frame.len());
    }

    fn rx_done(&self, ring: u16) {
        let mut st = self.staged.lock().unwrap();
        let (data, lens) = &mut *st;
        let mut off = 0;
        let frames: Vec<&[u8]> = lens
            .iter()
            .map(|&l| {
                let f = &data[off..off + l];
                off += l;
                f
            })
            .collect();
        let sent = self.out.send(u32::from(ring), &frames);
        self.forwarded.fetch_add(sent as u64, Ordering::Relaxed);
        self.dropped.fetch_add((frames.len() - sent) as u64, Ordering::Relaxed);
        drop(frames);
        data.clear();
        lens.clear();
    }
}

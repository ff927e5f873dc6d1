//! Bandwidth limits and priorities on the transmit path: a token bucket
//! per link (`maxbw`), and, between the links sending through one port
//! (or aggregation), priorities (`priority`): when the port is
//! saturated, a lower priority gets what the higher ones leave of the
//! line rate, so a high-priority link keeps its rate while a low-priority
//! one floods the same port.
//!
//! Priorities work by rate, not by ring occupancy: each window (20 ms)
//! the port measures what each priority sent (in wire bytes: frame, FCS,
//! preamble and gap), and the next window a priority may send at most the
//! line rate less what the higher ones sent (the larger of the last two
//! windows, plus 5 % of it and 2 % of the line to grow into). A priority
//! alone on its port is not limited. And when the port cannot take a
//! higher priority's frames (its rings are full: the device, not the line
//! rate, is the limit), the lower ones yield for 20 ms. The device still
//! sends no faster than its line rate; this decides whose frames it gets.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use netadm_nic::Offload;

use crate::flow::{Flow, Flows};
use crate::generator::Tx;

/// A token bucket in bytes, filled at a rate in bits per second (0: no
/// limit). A frame is taken while the bucket is not in debt, and may put it
/// in debt (a superframe larger than the bucket still goes, and the next
/// frames wait for it): over time exactly the rate passes.
#[derive(Debug)]
pub struct Bucket {
    rate: AtomicU64,
    state: Mutex<(f64, Instant)>,
}

impl Default for Bucket {
    fn default() -> Self {
        Self::new(0)
    }
}

impl Bucket {
    /// A full bucket of `rate` b/s (0: no limit).
    pub fn new(rate: u64) -> Self {
        Self { rate: AtomicU64::new(rate), state: Mutex::new((0.0, Instant::now())) }
    }

    /// Sets the rate (0: no limit).
    pub fn set_rate(&self, rate: u64) {
        self.rate.store(rate, Ordering::Relaxed);
    }

    /// The rate, b/s (0: no limit).
    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }

    /// Takes `bytes` unless the bucket is in debt.
    pub fn take(&self, bytes: u64) -> bool {
        let rate = self.rate();
        if rate == 0 {
            return true;
        }
        let mut st = self.state.lock().unwrap();
        let now = Instant::now();
        let per_sec = rate as f64 / 8.0;
        // 50 ms of the rate, at least two full frames: bursts stay short,
        // and a sender kept off the CPU that long (a loaded machine) does
        // not lose its share.
        let depth = (per_sec * 0.050).max(3_100.0);
        st.0 = (st.0 + now.duration_since(st.1).as_secs_f64() * per_sec).min(depth);
        st.1 = now;
        if st.0 < 0.0 {
            return false;
        }
        st.0 -= bytes as f64;
        true
    }

    /// How long until the bucket is out of debt, if it is in debt.
    pub fn wait(&self) -> Option<Duration> {
        let rate = self.rate();
        if rate == 0 {
            return None;
        }
        let st = self.state.lock().unwrap();
        let debt = -(st.0 + st.1.elapsed().as_secs_f64() * rate as f64 / 8.0);
        (debt > 0.0).then(|| Duration::from_secs_f64(debt * 8.0 / rate as f64))
    }

    /// Returns `bytes` taken for a frame the link did not send after all.
    pub fn give_back(&self, bytes: u64) {
        if self.rate() != 0 {
            self.state.lock().unwrap().0 += bytes as f64;
        }
    }
}

/// The number of priorities: low, medium, high.
pub const PRIORITIES: usize = 3;

/// One link's limit and priority, and its flows, shared by everything
/// sending from it and changed in place when its configuration changes.
#[derive(Debug)]
pub struct LinkQos {
    /// `maxbw`, over the bytes of the frames it sends.
    pub bucket: Bucket,
    priority: AtomicU8,
    /// Its flows, the most specific first; `any` says whether there are
    /// any (a link without is not looked into).
    flows: RwLock<Flows>,
    any: AtomicBool,
}

impl Default for LinkQos {
    fn default() -> Self {
        Self {
            bucket: Bucket::default(),
            priority: AtomicU8::new(PRIORITIES as u8 - 1),
            flows: RwLock::new(Arc::from(Vec::new())),
            any: AtomicBool::new(false),
        }
    }
}

impl LinkQos {
    /// Sets `maxbw` (0: none) and the priority (0 low .. 2 high).
    pub fn set(&self, maxbw: u64, priority: usize) {
        self.bucket.set_rate(maxbw);
        self.priority.store(priority.min(PRIORITIES - 1) as u8, Ordering::Relaxed);
    }

    /// The priority, 0 low .. 2 high.
    pub fn priority(&self) -> usize {
        usize::from(self.priority.load(Ordering::Relaxed))
    }

    /// Sets its flows, the most specific first.
    pub fn set_flows(&self, flows: Vec<Arc<Flow>>) {
        let any = !flows.is_empty();
        *self.flows.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::from(flows);
        self.any.store(any, Ordering::Release);
    }

    /// The flow the frame `frame` belongs to, sent by the link
    /// (`outbound`) or received by it.
    pub fn flow_of(&self, frame: &[u8], outbound: bool) -> Option<Arc<Flow>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let flows = self.flows.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        crate::flow::flow_of(&flows, frame, outbound)
    }
}

/// How long lower priorities yield after a higher one's frames found the
/// port's rings full.
const HOLD: Duration = Duration::from_millis(20);

/// How long a port measures its priorities' rates before it sets their
/// limits again.
const WINDOW: Duration = Duration::from_millis(20);

/// The priorities of the links sending through one port or aggregation.
#[derive(Debug, Default)]
pub struct PortQos {
    line: AtomicU64,
    /// Wire bytes each priority sent, and its limit.
    sent: [AtomicU64; PRIORITIES],
    limit: [Bucket; PRIORITIES],
    /// Until when (ns since `epoch`) each priority is held back by the
    /// port: frames it had leave to send that the rings refused.
    pressed: [AtomicU64; PRIORITIES],
    epoch: std::sync::OnceLock<Instant>,
    /// Window start, bytes at its start, rates of the last window.
    window: Mutex<Option<Window>>,
}

/// A measuring window: its start, each priority's bytes sent by then, and
/// each one's rate in the window before.
type Window = (Instant, [u64; PRIORITIES], [f64; PRIORITIES]);

/// The bytes a frame of `len` bytes (no FCS) occupies the wire for: FCS,
/// preamble and gap included, at least the minimum frame; a superframe
/// as the segments the device cuts it into.
pub fn wire_bytes(len: usize, off: Offload) -> u64 {
    let one = |l: usize| l.max(60) as u64 + 24;
    if off.is_gso() && off.gso_size > 0 && len > usize::from(off.hdr_len) {
        let (hdr, mss) = (usize::from(off.hdr_len), usize::from(off.gso_size));
        let segs = (len - hdr).div_ceil(mss);
        one(hdr + mss) * (segs as u64 - 1) + one(len - (segs - 1) * mss)
    } else {
        one(len)
    }
}

impl PortQos {
    /// Sets the line rate, b/s.
    pub fn set_line(&self, bps: u64) {
        self.line.store(bps, Ordering::Relaxed);
    }

    fn now_ns(&self) -> u64 {
        self.epoch.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    /// Says that the port refused frames of priority `prio` (its rings are
    /// full: the port is saturated): lower priorities wait [`HOLD`].
    pub fn pressed(&self, prio: usize) {
        self.pressed[prio].store(self.now_ns() + HOLD.as_nanos() as u64, Ordering::Relaxed);
    }

    /// How long priority `prio` still yields to a higher one the port
    /// refused.
    fn yielding(&self, prio: usize) -> Option<Duration> {
        let now = self.now_ns();
        let until =
            (prio + 1..PRIORITIES).map(|q| self.pressed[q].load(Ordering::Relaxed)).max()?;
        (until > now).then(|| Duration::from_nanos(until - now))
    }

    /// Takes `wire` bytes for a frame of priority `prio`, or refuses it
    /// while higher priorities leave it no room: by rate, and while a
    /// higher priority's frames find the rings full.
    pub fn admit(&self, prio: usize, wire: u64) -> bool {
        self.tick();
        if self.yielding(prio).is_some() || !self.limit[prio].take(wire) {
            return false;
        }
        self.sent[prio].fetch_add(wire, Ordering::Relaxed);
        true
    }

    /// Returns what [`PortQos::admit`] took for a frame not sent after all.
    pub fn give_back(&self, prio: usize, wire: u64) {
        self.limit[prio].give_back(wire);
        self.sent[prio].fetch_sub(wire, Ordering::Relaxed);
    }

    /// How long until priority `prio` may send again, if it is over its
    /// limit.
    pub fn wait(&self, prio: usize) -> Option<Duration> {
        match (self.yielding(prio), self.limit[prio].wait()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The limit of each priority now, b/s (0: none).
    pub fn limits(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.limit[p].rate())
    }

    fn tick(&self) {
        let Ok(mut w) = self.window.try_lock() else { return };
        let now = Instant::now();
        let sent: [u64; PRIORITIES] = std::array::from_fn(|p| self.sent[p].load(Ordering::Relaxed));
        let Some((start, at, last)) = w.as_mut() else {
            *w = Some((now, sent, [0.0; PRIORITIES]));
            return;
        };
        let el = now.duration_since(*start);
        if el < WINDOW {
            return;
        }
        let rate: [f64; PRIORITIES] =
            // (Saturating: a frame given back after the window's start
            // was counted there, and may leave less than it saw.)
            std::array::from_fn(|p| sent[p].saturating_sub(at[p]) as f64 * 8.0 / el.as_secs_f64());
        let line = self.line.load(Ordering::Relaxed) as f64;
        // Highest first: what the priorities above this one take.
        let mut above = 0.0;
        for p in (0..PRIORITIES).rev() {
            let limit = if above == 0.0 || line == 0.0 {
                0
            } else {
                (line - above * 1.05 - line * 0.02).max(line / 100.0) as u64
            };
            self.limit[p].set_rate(limit);
            above += rate[p].max(last[p]);
        }
        *w = Some((now, sent, rate));
    }
}

/// A link's transmit path with its limit and, through its port, its
/// priority.
pub struct ShapedTx {
    inner: Arc<dyn Tx>,
    link: Arc<LinkQos>,
    port: Option<Arc<PortQos>>,
    /// The priority of the last frame sent or refused when it was a
    /// flow's, whose share of the port [`Tx::retry_in`] waits for;
    /// [`OWN`] when it was the link's own (its priority as it is now).
    refused: AtomicUsize,
}

impl ShapedTx {
    /// `inner`, limited by `link` and, with `port`, by its priority there.
    pub fn new(inner: Arc<dyn Tx>, link: Arc<LinkQos>, port: Option<Arc<PortQos>>) -> Self {
        Self { inner, link, port, refused: AtomicUsize::new(OWN) }
    }

    fn take(&self, prio: usize, len: usize, off: Offload) -> bool {
        if !self.link.bucket.take(len as u64) {
            return false;
        }
        if let Some(p) = &self.port
            && !p.admit(prio, wire_bytes(len, off))
        {
            self.link.bucket.give_back(len as u64);
            return false;
        }
        true
    }

    fn give_back(&self, prio: usize, len: usize, off: Offload) {
        self.link.bucket.give_back(len as u64);
        if let Some(p) = &self.port {
            p.give_back(prio, wire_bytes(len, off));
        }
    }
}

/// [`ShapedTx`]'s `refused` when the last frame was the link's own.
const OWN: usize = usize::MAX;

impl Tx for ShapedTx {
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize {
        let prio = self.link.priority();
        self.refused.store(OWN, Ordering::Relaxed);
        let k = frames.iter().take_while(|f| self.take(prio, f.len(), Offload::NONE)).count();
        if k == 0 {
            return 0;
        }
        let sent = self.inner.send(flow, &frames[..k]).min(k);
        for f in &frames[sent..k] {
            self.give_back(prio, f.len(), Offload::NONE);
        }
        if sent < k
            && let Some(p) = &self.port
        {
            p.pressed(prio);
        }
        sent
    }

    fn send_offload(&self, flow: u32, frame: &[u8], off: Offload) -> bool {
        let Some(f) = self.link.flow_of(frame, true) else {
            let prio = self.link.priority();
            self.refused.store(OWN, Ordering::Relaxed);
            if !self.take(prio, frame.len(), off) {
                return false;
            }
            let sent = self.inner.send_offload(flow, frame, off);
            if !sent {
                self.give_back(prio, frame.len(), off);
                if let Some(p) = &self.port {
                    p.pressed(prio);
                }
            }
            return sent;
        };
        // A flow's frame: policed by the flow's maxbw and its priority's
        // share of the port (dropped: taken, not sent), held back by the
        // link's maxbw and a full ring.
        let prio = f.qos.priority();
        self.refused.store(prio, Ordering::Relaxed);
        let (len, wire) = (frame.len() as u64, wire_bytes(frame.len(), off));
        if !f.qos.bucket.take(len) {
            f.dropped();
            return true;
        }
        if !self.link.bucket.take(len) {
            f.qos.bucket.give_back(len);
            return false;
        }
        if let Some(p) = &self.port
            && !p.admit(prio, wire)
        {
            f.qos.bucket.give_back(len);
            self.link.bucket.give_back(len);
            f.dropped();
            return true;
        }
        if !self.inner.send_offload(flow, frame, off) {
            self.give_back(prio, frame.len(), off);
            f.qos.bucket.give_back(len);
            if let Some(p) = &self.port {
                p.pressed(prio);
            }
            return false;
        }
        f.count(frame.len(), true);
        true
    }

    fn retry_in(&self) -> Option<Duration> {
        let prio = match self.refused.load(Ordering::Relaxed) {
            OWN => self.link.priority(),
            flow => flow,
        };
        let port = self.port.as_ref().and_then(|p| p.wait(prio));
        [self.link.bucket.wait(), port].into_iter().flatten().max()
    }

    fn wait_room(&self, flow: u32, frame: &[u8], within: Duration) {
        self.inner.wait_room(flow, frame, within);
    }

    fn busy_poll(&self) -> Option<u32> {
        self.inner.busy_poll()
    }

    fn busy_poll_hold(&self) -> Vec<netadm_rings::PollHold> {
        self.inner.busy_poll_hold()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_passes_no_more_than_its_rate() {
        let b = Bucket::new(80_000_000); // 10 MB/s
        let t0 = Instant::now();
        let mut bytes = 0u64;
        while t0.elapsed() < Duration::from_millis(100) {
            if b.take(1_000) {
                bytes += 1_000;
            }
        }
        // The rate over the time, plus one bucket (50 ms) and one frame.
        let most = 10e6 * t0.elapsed().as_secs_f64() + 500_000.0 + 1_000.0;
        assert!(bytes > 0 && bytes as f64 <= most, "{bytes} bytes, at most {most}");
        assert!(Bucket::new(0).take(u64::MAX), "no limit");
    }

    #[test]
    fn wire_bytes_count_overheads_and_segments() {
        assert_eq!(wire_bytes(1514, Offload::NONE), 1538);
        assert_eq!(wire_bytes(42, Offload::NONE), 84);
        let tso = Offload { gso_type: 1, hdr_len: 54, gso_size: 1448, ..Offload::NONE };
        // 54 + 3 x 1448: three full segments.
        assert_eq!(wire_bytes(54 + 3 * 1448, tso), 3 * 1526);
    }

    #[test]
    fn a_lower_priority_gets_what_the_higher_ones_leave() {
        let p = PortQos::default();
        p.set_line(100_000_000);
        assert_eq!(p.limits(), [0; PRIORITIES], "alone, nobody is limited");
        // High sends 60 Mb/s (catching up with the clock) until a few
        // windows have passed; then low may have what is left.
        let t0 = Instant::now();
        let mut sent = 0u64;
        while t0.elapsed() < 3 * WINDOW || p.limits()[0] == 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "no limit was set");
            let due = (60e6 / 8.0 * t0.elapsed().as_secs_f64()) as u64;
            if due > sent && p.admit(2, due - sent) {
                sent = due;
            }
            std::thread::yield_now();
        }
        let [low, medium, high] = p.limits();
        assert_eq!(high, 0, "the highest priority is never limited");
        // What high took is off low's share (35 Mb/s on a quiet machine; a
        // loaded one measures high in lumps).
        assert!(medium > 0 && (1_000_000..=60_000_000).contains(&low), "{low}");
    }
}

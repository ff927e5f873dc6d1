//! A traffic stream's books: what was sent, what arrived, and what that
//! says about loss, reordering, duplication and latency.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::frame::{TestHeader, latency_ns};

/// How far back a flow remembers which sequence numbers it has seen.
const WINDOW: u64 = 4096;

/// One flow's receive state: the highest sequence seen and a bitmap of the
/// last [`WINDOW`] sequence numbers.
#[derive(Debug, Clone)]
struct FlowRx {
    next: u64,
    seen: Vec<u64>,
}

impl FlowRx {
    fn new() -> Self {
        Self { next: 0, seen: vec![0; (WINDOW / 64) as usize] }
    }

    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = (seq % WINDOW) as usize;
        (&mut self.seen[i / 64], 1 << (i % 64))
    }

    /// Records `seq`; returns (duplicate, late).
    fn record(&mut self, seq: u64) -> (bool, bool) {
        if seq >= self.next {
            // Forget what falls out of the window as it slides forward.
            let from = self.next.max(seq.saturating_sub(WINDOW - 1));
            for s in from..seq {
                let (w, b) = self.bit(s);
                *w &= !b;
            }
            let (w, b) = self.bit(seq);
            *w |= b;
            self.next = seq + 1;
            return (false, false);
        }
        if self.next - seq > WINDOW {
            return (false, true); // too old to tell: late
        }
        let (w, b) = self.bit(seq);
        if *w & b != 0 {
            return (true, false);
        }
        *w |= b;
        (false, true)
    }
}

/// Latency histogram: HdrHistogram with 2 significant digits (values
/// within 1 % of the truth), growing to the largest value seen.
type Histogram = hdrhistogram::Histogram<u64>;

fn histogram() -> Histogram {
    Histogram::new(2).expect("2 significant digits is a valid precision")
}

#[derive(Debug)]
struct Rx {
    flows: Vec<FlowRx>,
    received: u64,
    bytes: u64,
    reordered: u64,
    duplicated: u64,
    foreign: u64,
    latency: Histogram,
}

/// A snapshot of a stream's books.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamStats {
    /// Frames the link accepted for sending. The generator discards
    /// nothing: a frame the link does not take is held and handed over
    /// again, so every frame it built is sent (or still held).
    pub sent: u64,
    /// Distinct frames received.
    pub received: u64,
    /// Sent but not (yet) received: `sent - received`.
    pub lost: u64,
    /// Received after a later frame of the same flow.
    pub reordered: u64,
    /// Received more than once.
    pub duplicated: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames with this stream's id but a flow it does not have.
    pub foreign: u64,
    /// Mean latency, ns.
    pub latency_avg_ns: u64,
    /// Median latency, ns.
    pub latency_p50_ns: u64,
    /// 99th percentile latency, ns.
    pub latency_p99_ns: u64,
    /// Largest latency, ns.
    pub latency_max_ns: u64,
    /// The longest sender pause, ns: the longest time the generator held
    /// frames the link would not take (from the first refusal until all
    /// were handed over), including a pause still going on.
    pub pause_max_ns: u64,
    /// All sender pauses together, ns (including one still going on).
    pub paused_ns: u64,
}

/// One traffic stream: its generator writes `sent`, its sink (on whichever
/// port's interrupt thread receives it) the rest.
#[derive(Debug)]
pub struct Stream {
    id: u16,
    flows: u32,
    sent: AtomicU64,
    /// What `sent` must reach for [`Stream::wait_sent`]'s waiter to be
    /// woken (`u64::MAX`: nobody waits), and that waiter.
    want: AtomicU64,
    waiter: Mutex<Option<std::thread::Thread>>,
    epoch: Instant,
    /// When the current sender pause began, ns after `epoch` plus one; 0
    /// while the generator holds nothing.
    held_since: AtomicU64,
    pause_max: AtomicU64,
    paused: AtomicU64,
    rx: Mutex<Rx>,
}

impl Stream {
    /// A stream of `flows` flows.
    pub fn new(id: u16, flows: u16) -> Self {
        let flows = u32::from(flows.max(1));
        Self {
            id,
            flows,
            sent: AtomicU64::new(0),
            want: AtomicU64::new(u64::MAX),
            waiter: Mutex::new(None),
            epoch: Instant::now(),
            held_since: AtomicU64::new(0),
            pause_max: AtomicU64::new(0),
            paused: AtomicU64::new(0),
            rx: Mutex::new(Rx {
                flows: (0..flows).map(|_| FlowRx::new()).collect(),
                received: 0,
                bytes: 0,
                reordered: 0,
                duplicated: 0,
                foreign: 0,
                latency: histogram(),
            }),
        }
    }

    /// The stream's id, carried in its frames.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Flows in the stream.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// The generator: `n` frames were accepted for sending.
    pub fn sent(&self, n: u64) {
        // SeqCst with `wait_sent`'s store of `want`: one of the two sees
        // the other's write, so no wake-up is lost.
        let now = self.sent.fetch_add(n, Ordering::SeqCst) + n;
        if now >= self.want.load(Ordering::SeqCst)
            && let Some(t) = self.waiter.lock().unwrap().as_ref()
        {
            t.unpark();
        }
    }

    /// Waits until `n` frames were sent in all, for at most `within`,
    /// woken by the generator's batch that gets there; whether they were.
    /// One waiter at a time.
    pub fn wait_sent(&self, n: u64, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        *self.waiter.lock().unwrap() = Some(std::thread::current());
        self.want.store(n, Ordering::SeqCst);
        let reached = loop {
            if self.sent.load(Ordering::SeqCst) >= n {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            std::thread::park_timeout(left);
        };
        self.want.store(u64::MAX, Ordering::SeqCst);
        *self.waiter.lock().unwrap() = None;
        reached
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    /// The generator: the link refused frames it holds; a sender pause
    /// begins (if one is not already going on).
    pub fn held(&self) {
        if self.held_since.load(Ordering::Relaxed) == 0 {
            self.held_since.store(self.now(), Ordering::Relaxed);
        }
    }

    /// The generator: everything it held was handed over (or it stopped);
    /// the sender pause going on, if any, ends and is booked.
    pub fn handed_over(&self) {
        let since = self.held_since.swap(0, Ordering::Relaxed);
        if since != 0 {
            let d = self.now().saturating_sub(since);
            self.pause_max.fetch_max(d, Ordering::Relaxed);
            self.paused.fetch_add(d, Ordering::Relaxed);
        }
    }

    /// The sink: a frame of this stream arrived.
    pub fn receive(&self, h: &TestHeader, len: usize) {
        let latency = latency_ns(h.sent);
        let mut rx = self.rx.lock().unwrap();
        let Some(flow) = rx.flows.get_mut(h.flow as usize) else {
            rx.foreign += 1;
            return;
        };
        let (dup, late) = flow.record(u64::from(h.seq));
        if dup {
            rx.duplicated += 1;
            return;
        }
        rx.received += 1;
        rx.bytes += len as u64;
        if late {
            rx.reordered += 1;
        }
        // It grows to any value (auto-resize): recording cannot fail.
        let _ = rx.latency.record(latency);
    }

    /// The books now. The receive lock is held only to copy them: the
    /// percentiles are read from the copy, so a reader polling the books
    /// (a test's wait, `show-traffic` in a loop) never holds up the
    /// interrupt thread recording arrivals, however wide the histogram
    /// has grown (reading it walks every bucket).
    pub fn stats(&self) -> StreamStats {
        let sent = self.sent.load(Ordering::Relaxed);
        let since = self.held_since.load(Ordering::Relaxed);
        let ongoing = if since == 0 { 0 } else { self.now().saturating_sub(since) };
        let (received, bytes, reordered, duplicated, foreign, l) = {
            let rx = self.rx.lock().unwrap();
            (rx.received, rx.bytes, rx.reordered, rx.duplicated, rx.foreign, rx.latency.clone())
        };
        StreamStats {
            sent,
            received,
            lost: sent.saturating_sub(received),
            reordered,
            duplicated,
            rx_bytes: bytes,
            foreign,
            latency_avg_ns: l.mean() as u64,
            latency_p50_ns: l.value_at_quantile(0.50),
            latency_p99_ns: l.value_at_quantile(0.99),
            latency_max_ns: l.max(),
            pause_max_ns: self.pause_max.load(Ordering::Relaxed).max(ongoing),
            paused_ns: self.paused.load(Ordering::Relaxed) + ongoing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(flow: u16, seq: u32) -> TestHeader {
        TestHeader { stream: 1, flow, seq, sent: crate::frame::stamp() }
    }

    #[test]
    fn a_waiter_for_frames_sent_returns_when_they_are_or_at_its_deadline() {
        let s = std::sync::Arc::new(Stream::new(1, 1));
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || s.wait_sent(10, Duration::from_secs(60)))
        };
        s.sent(4);
        s.sent(6);
        assert!(waiter.join().unwrap(), "10 frames were sent");
        assert!(s.wait_sent(10, Duration::ZERO), "already sent");
        assert!(!s.wait_sent(11, Duration::from_millis(1)), "never sent");
        assert_eq!(s.want.load(Ordering::SeqCst), u64::MAX, "no waiter left behind");
    }

    #[test]
    fn in_order_frames_are_clean() {
        let s = Stream::new(1, 2);
        s.sent(6);
        for seq in 0..3 {
            s.receive(&h(0, seq), 64);
            s.receive(&h(1, seq), 64);
        }
        let st = s.stats();
        assert_eq!((st.received, st.lost, st.reordered, st.duplicated), (6, 0, 0, 0));
    }

    #[test]
    fn gaps_late_frames_and_duplicates_are_told_apart() {
        let s = Stream::new(1, 1);
        s.sent(5);
        for seq in [0, 1, 3, 4] {
            s.receive(&h(0, seq), 64);
        }
        assert_eq!(s.stats().lost, 1, "seq 2 missing");
        s.receive(&h(0, 2), 64);
        s.receive(&h(0, 3), 64);
        let st = s.stats();
        assert_eq!((st.received, st.lost, st.reordered, st.duplicated), (5, 0, 1, 1));
        s.receive(&h(5, 0), 64);
        assert_eq!(s.stats().foreign, 1);
    }

    #[test]
    fn the_window_forgets_only_what_slid_out() {
        let mut f = FlowRx::new();
        assert_eq!(f.record(0), (false, false));
        assert_eq!(f.record(WINDOW + 10), (false, false));
        assert_eq!(f.record(WINDOW + 10), (true, false));
        assert_eq!(f.record(20), (false, true), "within the window: late, not a duplicate");
        assert_eq!(f.record(0), (false, true), "out of the window: late");
    }

    #[test]
    fn a_sender_pause_is_booked_while_it_lasts_and_when_it_ends() {
        let s = Stream::new(1, 1);
        assert_eq!((s.stats().pause_max_ns, s.stats().paused_ns), (0, 0));
        s.held();
        let t0 = Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let going = s.stats().pause_max_ns;
        assert!(going >= 2_000_000, "an ongoing pause counts: {going}");
        s.held(); // still the same pause
        s.handed_over();
        let st = s.stats();
        assert!(st.pause_max_ns >= going && st.paused_ns == st.pause_max_ns, "{st:?}");
        s.handed_over(); // nothing held: nothing booked
        assert_eq!(s.stats().paused_ns, st.paused_ns);
        s.held();
        s.handed_over();
        let after = s.stats();
        assert_eq!(after.pause_max_ns, st.pause_max_ns, "a shorter pause leaves the longest");
        assert!(after.paused_ns >= st.paused_ns);
    }

    #[test]
    fn percentiles_are_close() {
        let mut hg = histogram();
        for v in 1..=10_000u64 {
            hg.record(v * 1000).unwrap();
        }
        let p50 = hg.value_at_quantile(0.5) as f64;
        let p99 = hg.value_at_quantile(0.99) as f64;
        assert!((p50 - 5e6).abs() / 5e6 < 0.01, "{p50}");
        assert!((p99 - 9.9e6).abs() / 9.9e6 < 0.01, "{p99}");
        assert!((hg.max() as f64 - 1e7).abs() / 1e7 < 0.01, "{}", hg.max());
        assert!((hg.mean() - 5.0005e6).abs() / 5e6 < 0.01, "{}", hg.mean());
    }
}

//! The traffic generator: a thread that builds sequenced test frames in a
//! reused buffer and hands them to a link's transmit path, paced to a rate.
//!
//! It behaves like a qdisc in front of a blocking sender: a frame the link
//! does not take (ring full, senders paused during an MTU change, link not
//! running) is kept, with its sequence number and its timestamp, and handed
//! over again until a ring takes it. Nothing the generator builds is
//! discarded, so nothing is left out of "lost"; a pause shows as latency on
//! the frames held across it, and as the stream's *sender pause* (the time
//! from the first refusal until everything held was handed over), whose
//! longest and total are in the stream's books.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::frame::{HEADER, TestHeader, stamp, write};
use crate::stream::Stream;

/// A link's transmit path as the generator sees it.
pub trait Tx: Send + Sync {
    /// Sends `frames`, all of flow `flow` (so they keep their order on one
    /// ring). Returns how many were accepted; 0 when the link is not
    /// running.
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize;

    /// Sends one frame with its offload context (a superframe the device
    /// segments, or a frame whose checksum it fills in). Returns whether
    /// it was accepted.
    fn send_offload(&self, flow: u32, frame: &[u8], off: netadm_nic::Offload) -> bool;

    /// After a refusal: how long until sending can succeed, when the path
    /// knows (a bandwidth limit in debt); `None` when it does not (a full
    /// ring empties as the device moves on).
    fn retry_in(&self) -> Option<Duration> {
        None
    }

    /// After a refusal [`Tx::retry_in`] has no time for: waits until the
    /// ring `frame` of flow `flow` goes to has room for it (the device's
    /// TX completions reclaimed), at most `within`; returns at once when
    /// the refusal was not a full ring (senders paused while a steering
    /// flip drains, the link down). The default only yields.
    fn wait_room(&self, _flow: u32, _frame: &[u8], _within: Duration) {
        std::thread::yield_now();
    }

    /// Busy-polls the receive side of the rings this path sends on
    /// ([`netadm_rings::RingEngine::busy_poll`]): delivers what has
    /// arrived there now, on the calling thread. Returns the frames
    /// delivered, or None when the path may not be busy-polled now
    /// (traffic on some ring of it is not light, or it has no rings).
    fn busy_poll(&self) -> Option<u32> {
        None
    }

    /// Busy-poll ownership of the rings this path sends on
    /// ([`netadm_rings::RingEngine::busy_poll_hold`]): their interrupts
    /// held masked while the holds live. Empty when the path may not be
    /// busy-polled now.
    fn busy_poll_hold(&self) -> Vec<netadm_rings::PollHold> {
        Vec::new()
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Destination MAC of every frame.
    pub dst: [u8; 6],
    /// Source MAC of every frame.
    pub src: [u8; 6],
    /// Frames per second; 0 for as fast as the link takes them.
    pub rate_pps: u64,
    /// Frame size in bytes (at least the test header, 42).
    pub size: usize,
    /// Frames per batch handed to the link.
    pub batch: usize,
    /// Stop after this many frames were accepted.
    pub limit: Option<u64>,
}

/// A running generator; stops when dropped or [`Generator::stop`]ped.
pub struct Generator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Generator {
    /// Starts generating `stream`'s flows over `tx`.
    pub fn start(cfg: GenConfig, stream: Arc<Stream>, tx: Arc<dyn Tx>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("netadm-gen{}", stream.id()))
            .spawn(move || run(&cfg, &stream, &*tx, &flag))
            .expect("spawn generator");
        Self { stop, thread: Some(thread) }
    }

    /// Stops and waits for the thread to finish its batch.
    pub fn stop(mut self) {
        #[cfg(feature = "failpoints")]
        fail::fail_point!("generator.stop");
        self.halt();
    }

    /// Waits until the generator has sent its `limit`.
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // Wakes a generator waiting for its next batch's due time.
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(cfg: &GenConfig, stream: &Stream, tx: &dyn Tx, stop: &AtomicBool) {
    let size = cfg.size.max(HEADER);
    let batch = cfg.batch.max(1);
    let flows = stream.flows();
    let mut buf = vec![0u8; size * batch];
    let mut seqs = vec![0u32; flows as usize];
    let mut flow = 0u32;
    let mut total = 0u64;
    // The batch being handed over: frames `held..n` of `buf` are built
    // (sequence numbers and timestamps fixed) and not yet taken.
    let (mut held, mut n) = (0usize, 0usize);
    // Pacing: each batch is due at `due`; a generator that fell behind
    // (a pause) does not burst to catch up more than one batch.
    let per_batch =
        Duration::from_nanos((1_000_000_000 * batch as u64).checked_div(cfg.rate_pps).unwrap_or(0));
    let mut due = Instant::now();
    while !stop.load(Ordering::Acquire) {
        if held == n {
            n = match cfg.limit {
                Some(l) if total >= l => break,
                Some(l) => batch.min((l - total) as usize),
                None => batch,
            };
            held = 0;
            if !per_batch.is_zero() {
                wait_until(due, stop);
                due = (due + per_batch).max(Instant::now() - per_batch);
            }
            let now = stamp();
            let first = seqs[flow as usize];
            for (i, f) in buf.chunks_mut(size).take(n).enumerate() {
                let seq = first.wrapping_add(i as u32);
                let h = TestHeader { stream: stream.id(), flow: flow as u16, seq, sent: now };
                write(f, size, cfg.dst, cfg.src, h);
            }
        }
        let frames: Vec<&[u8]> = buf.chunks(size).take(n).skip(held).collect();
        let sent = tx.send(flow, &frames).min(frames.len());
        held += sent;
        seqs[flow as usize] = seqs[flow as usize].wrapping_add(sent as u32);
        total += sent as u64;
        stream.sent(sent as u64);
        if held == n {
            stream.handed_over();
            flow = (flow + 1) % flows;
        } else {
            // Ring full, senders paused or link down: keep the frames and
            // let the device (or the pause) move on; a bandwidth limit says
            // when it will take more.
            stream.held();
            match tx.retry_in() {
                Some(d) => wait_until(Instant::now() + d, stop),
                None => std::thread::yield_now(),
            }
        }
    }
    // Stopped with frames held: they were never sent, so they are not in
    // the books; the pause they were in ends here.
    stream.handed_over();
}

/// Waits until a batch's due time (the rate), or until told to stop
/// (`Generator::halt` unparks the thread): parked while the deadline is
/// far, yielding for the last stretch, which parking would overshoot.
fn wait_until(due: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= due || stop.load(Ordering::Acquire) {
            return;
        }
        let left = due - now;
        if left > Duration::from_micros(200) {
            std::thread::park_timeout(left - Duration::from_micros(100));
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::frame::parse;

    /// A link that refuses everything while `closed`, then takes what it
    /// is given, recording each frame's header.
    #[derive(Default)]
    struct Gate {
        closed: AtomicBool,
        refusals: std::sync::atomic::AtomicU64,
        taken: Mutex<Vec<TestHeader>>,
    }

    impl Tx for Gate {
        fn send(&self, _: u32, frames: &[&[u8]]) -> usize {
            if self.closed.load(Ordering::Acquire) {
                self.refusals.fetch_add(1, Ordering::Relaxed);
                return 0;
            }
            // Take at most half a batch: partial acceptance keeps the rest.
            let n = frames.len().div_ceil(2);
            let mut t = self.taken.lock().unwrap();
            t.extend(frames[..n].iter().map(|f| parse(f).expect("a test frame")));
            n
        }

        fn send_offload(&self, flow: u32, frame: &[u8], _: netadm_nic::Offload) -> bool {
            self.send(flow, &[frame]) == 1
        }
    }

    #[test]
    fn frames_the_link_refuses_are_held_and_sent_later_in_order_and_the_pause_is_booked() {
        let gate = Arc::new(Gate::default());
        gate.closed.store(true, Ordering::Release);
        let stream = Arc::new(Stream::new(7, 2));
        let cfg = GenConfig {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            rate_pps: 0,
            size: 64,
            batch: 8,
            limit: Some(1_024),
        };
        let g = Generator::start(cfg, stream.clone(), gate.clone());
        let t0 = Instant::now();
        // Wait (with a deadline) until the generator has been held a while
        // (the ongoing pause shows in the books), then open the link.
        while gate.refusals.load(Ordering::Relaxed) < 100 || stream.stats().pause_max_ns < 5_000_000
        {
            assert!(t0.elapsed() < Duration::from_secs(10), "the generator was never held");
            std::thread::yield_now();
        }
        assert_eq!(stream.stats().sent, 0);
        gate.closed.store(false, Ordering::Release);
        g.join();
        let st = stream.stats();
        assert_eq!(st.sent, 1_024, "every frame built was sent: none discarded");
        assert!(st.pause_max_ns >= 5_000_000 && st.paused_ns >= st.pause_max_ns, "{st:?}");
        let taken = gate.taken.lock().unwrap();
        assert_eq!(taken.len(), 1_024);
        for flow in 0..2 {
            let seqs: Vec<u32> = taken.iter().filter(|h| h.flow == flow).map(|h| h.seq).collect();
            assert_eq!(seqs, (0..512).collect::<Vec<_>>(), "flow {flow}: in order, no gap");
        }
        // The first batch was built before the pause and kept its stamp:
        // its latency carries the pause.
        let first = taken[0].sent;
        assert!(taken[..4].iter().all(|h| h.sent == first));
        assert!(crate::frame::latency_ns(first) >= 5_000_000);
    }
}

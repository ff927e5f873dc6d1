//! The traffic generator: a thread that builds sequenced test frames in a
//! reused buffer and hands them to a link's transmit path, paced to a rate.

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
    // Pacing: each batch is due at `due`; a generator that fell behind
    // does not burst to catch up more than one batch.
    let per_batch =
        Duration::from_nanos((1_000_000_000 * batch as u64).checked_div(cfg.rate_pps).unwrap_or(0));
    let mut due = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let n = match cfg.limit {
            Some(l) if total >= l => break,
            Some(l) => batch.min((l - total) as usize),
            None => batch,
        };
        if !per_batch.is_zero() {
            wait_until(due, stop);
            due = (due + per_batch).max(Instant::now() - per_batch);
        }
        let now = stamp();
        for (i, f) in buf.chunks_mut(size).take(n).enumerate() {
            let seq = seqs[flow as usize].wrapping_add(i as u32);
            let h = TestHeader { stream: stream.id(), flow: flow as u16, seq, sent: now };
            write(f, size, cfg.dst, cfg.src, h);
        }
        let frames: Vec<&[u8]> = buf.chunks(size).take(n).collect();
        let sent = tx.send(flow, &frames);
        seqs[flow as usize] = seqs[flow as usize].wrapping_add(sent as u32);
        total += sent as u64;
        stream.sent(sent as u64);
        stream.refused((n - sent) as u64);
        if sent == n {
            flow = (flow + 1) % flows;
        } else {
            // Ring full or link down: let the device catch up.
            std::thread::yield_now();
        }
    }
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

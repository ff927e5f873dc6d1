//! The ring lifecycle engine.
//!
//! One engine drives the rings of one port through any [`Nic`]. Lifecycle
//! operations take a set of rings and are serialised (one at a time); the
//! datapath ([`RingEngine::transmit`], interrupt handling) runs concurrently
//! with them and is fenced by per-ring TX locks and interrupt gates.
//!
//! The batched strategy requests every queue change of a batch, then waits
//! once for all acknowledgements (event-driven, with a deadline). Intervals
//! the hardware mandates are waited once per batch, measured from when they
//! began. The `legacy` and `sequential` strategies reproduce illumos before
//! and after its fix for bugs 12957/12958, for comparison.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use netadm_nic::{DmaRing, Nic, NicError, Offload, QueueId};

use crate::clock::{Clock, SystemClock, Wait, ticks, usec_to_ticks};
use crate::gate::{Gate, GateEvents, wait_quiet};
use crate::report::{Counts, OpReport};
use crate::state::RingState;
use crate::strategy::Strategy;

/// Why a lifecycle or datapath operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The ring does not exist on this port.
    #[error("ring {ring}: no such ring (port has {count})")]
    NoSuchRing {
        /// The ring named.
        ring: u16,
        /// Rings on the port.
        count: u16,
    },
    /// The transition is not in the table.
    #[error("ring {ring}: illegal transition {from} -> {to}")]
    IllegalTransition {
        /// The ring.
        ring: u16,
        /// Its state.
        from: RingState,
        /// The state asked for.
        to: RingState,
    },
    /// The ring is started with different buffers than asked for.
    #[error("ring {ring}: started with {have}-byte buffers, {want} asked; stop it first")]
    BufferSizeMismatch {
        /// The ring.
        ring: u16,
        /// Its buffer size.
        have: u32,
        /// The buffer size asked for.
        want: u32,
    },
    /// TX on a ring that is not started.
    #[error("ring {ring}: not started ({state})")]
    NotStarted {
        /// The ring.
        ring: u16,
        /// Its state.
        state: RingState,
    },
    /// In-flight TX did not drain by the deadline.
    #[error("rings {rings:?}: in-flight TX did not drain")]
    TxDrainTimeout {
        /// Rings still holding frames.
        rings: Vec<u16>,
    },
    /// Interrupt handlers did not leave by the deadline.
    #[error("rings {rings:?}: interrupt handlers did not finish")]
    QuiesceTimeout {
        /// Rings with handlers inside.
        rings: Vec<u16>,
    },
    /// The device refused or did not acknowledge.
    #[error("device: {0}")]
    Nic(#[from] NicError),
}

/// Receives what a ring's interrupt delivers.
pub trait RingClient: Send + Sync {
    /// A frame arrived on `ring`, with what the device reports of it
    /// (checksum verified, or a superframe and its segment size).
    fn rx(&self, ring: u16, frame: &[u8], off: Offload);
    /// `n` frames sent on `ring` were completed by the device.
    fn tx_done(&self, _ring: u16, _n: u32) {}
    /// A poll of `ring` delivered its batch: a client that stages frames
    /// (a forwarder) flushes them here, one batch at a time.
    fn rx_done(&self, _ring: u16) {}
}

/// Per-ring counters.
#[derive(Debug, Default)]
struct RingCounters {
    tx_bytes: AtomicU64,
    rx_bytes: AtomicU64,
    tx_frames: AtomicU64,
    tx_refused: AtomicU64,
    tx_completed: AtomicU64,
    rx_frames: AtomicU64,
    rx_discarded: AtomicU64,
}

/// A snapshot of one ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingInfo {
    /// Ring index.
    pub ring: u16,
    /// Lifecycle state.
    pub state: RingState,
    /// TX queue, if the ring has one.
    pub txq: Option<u16>,
    /// RX queue, if the ring has one.
    pub rxq: Option<u16>,
    /// MSI-X vector.
    pub vector: u16,
    /// Buffer size, while buffers are held.
    pub buf_size: Option<u32>,
    /// Frames handed to the device.
    pub tx_frames: u64,
    /// Frames refused (ring full or not started).
    pub tx_refused: u64,
    /// Frames delivered to the client.
    pub rx_frames: u64,
    /// Frames received but discarded because the ring was stopping.
    pub rx_discarded: u64,
    /// Bytes handed to the device.
    pub tx_bytes: u64,
    /// Bytes delivered to the client.
    pub rx_bytes: u64,
}

#[derive(Default)]
struct TxSide {
    ring: Option<Arc<DmaRing>>,
    open: bool,
}

struct Ring {
    id: u16,
    txq: Option<u16>,
    rxq: Option<u16>,
    vector: u16,
    state: Mutex<RingState>,
    gate: Gate,
    tx: Mutex<TxSide>,
    rx: Mutex<Option<Arc<DmaRing>>>,
    /// When the device acknowledged the last disable.
    stopped_at: Mutex<Option<Instant>>,
    /// Size of the buffers it holds (0: none), for readers that must not
    /// take the TX or RX lock: a stats poller calling [`RingEngine::info`]
    /// in a loop took every ring's TX lock, and the interrupt handler,
    /// blocking on them ~40,000 times in one pass, reposted RX buffers
    /// only after 0.3-0.5 s (a reflector port's senders held as long).
    buf: AtomicU32,
    counters: RingCounters,
    /// Senders waiting for its TX ring to have room.
    room: Room,
}

/// Where senders a full TX ring refused wait for it to have room, as a
/// Linux driver stops a full queue and its TX clean wakes it: each
/// reclaim of completions wakes them, so a refused sender sleeps until
/// the device's moderated TX interrupt instead of spinning on the CPU
/// the device and the far side need.
#[derive(Default)]
struct Room {
    waiters: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Room {
    /// Wakes the waiters, if any: after completions were reclaimed, or
    /// the ring closed.
    fn wake(&self) {
        // SeqCst, against `wait`'s count and check: either the waiter's
        // check sees the reclaim, or this sees the waiter.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.cv.notify_all();
        }
    }

    /// Waits until `has_room`, at most `within`. It is asked after the
    /// waiter is counted (so a wake between the two is not lost) and again
    /// at each wake (a reclaim too small for the frame, or a spurious one,
    /// waits on). Whether it waited at all.
    fn wait(&self, within: Duration, has_room: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + within;
        let mut g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut waited = false;
        while !has_room() {
            waited = true;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = self.cv.wait_timeout(g, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        drop(g);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        waited
    }
}

impl Ring {
    fn state(&self) -> RingState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, to: RingState) -> Result<(), RingError> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !s.can_become(to) {
            return Err(RingError::IllegalTransition { ring: self.id, from: *s, to });
        }
        *s = to;
        Ok(())
    }

    fn queues(&self) -> impl Iterator<Item = QueueId> + '_ {
        self.txq.map(QueueId::tx).into_iter().chain(self.rxq.map(QueueId::rx))
    }

    fn buf_size(&self) -> Option<u32> {
        Some(self.buf.load(Ordering::Acquire)).filter(|&b| b != 0)
    }
}

/// State the interrupt handler shares with the engine.
struct Shared {
    rings: Vec<Ring>,
    by_vector: Vec<Vec<u16>>,
    client: RwLock<Option<Arc<dyn RingClient>>>,
    gate_events: GateEvents,
    nic: Arc<dyn Nic>,
    /// Adaptive interrupt moderation, per vector.
    adaptive: Vec<crate::moderation::Adaptive>,
    /// Busy pollers holding each vector masked ([`PollHold`]).
    holds: Vec<AtomicU32>,
    /// The handler left a held vector's RX side to its poller.
    deferred: Vec<std::sync::atomic::AtomicBool>,
}

/// Most RX frames one poll delivers before looking at the next ring.
const RX_BUDGET: u32 = 256;

thread_local! {
    /// Where the interrupt handler gathers a frame that spans several RX
    /// buffers: the driver's receive memory, one per handler thread.
    static RX_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Shared {
    fn interrupt(&self, vector: u16) {
        let Some(rings) = self.by_vector.get(vector as usize) else { return };
        let client = self.client.read().unwrap().clone();
        let (mut more, mut frames, mut bytes) = (false, 0u64, 0u64);
        for &r in rings {
            let ring = &self.rings[r as usize];
            if !ring.gate.enter() {
                continue; // stopping or stopped: nothing is delivered
            }
            let (m, f, b) = self.poll(ring, client.as_deref());
            (more, frames, bytes) = (more | m, frames + f, bytes + b);
            ring.gate.exit(&self.gate_events);
        }
        if let Some(a) = self.adaptive.get(vector as usize) {
            a.sample(frames, bytes, Instant::now(), |l| self.write_level(vector, l));
        }
        if more {
            // Budget spent with frames left: come back after the other
            // vectors, and let a quiesce in between see the gate empty.
            self.nic.trigger_interrupt(vector);
        }
    }

    /// Writes the throttle register for an adaptive level.
    fn write_level(&self, vector: u16, level: crate::moderation::Level) {
        let unit = self.nic.caps().throttle_unit.as_nanos().max(1);
        let units = (level.interval().as_nanos() / unit) as u32;
        let _ = self.nic.set_throttle(vector, units);
    }

    /// Reclaims TX completions and delivers up to one budget of RX frames.
    /// Returns whether RX frames remain, and the frames and bytes this
    /// poll handled (completed and received), for adaptive moderation.
    fn poll(&self, ring: &Ring, client: Option<&dyn RingClient>) -> (bool, u64, u64) {
        let done = {
            let tx = ring.tx.lock().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: the TX lock makes this the ring's one driver-side user.
            tx.ring.as_ref().map_or(0, |r| unsafe { r.driver_reclaim() })
        };
        if done > 0 {
            ring.counters.tx_completed.fetch_add(done.into(), Ordering::Relaxed);
            ring.room.wake();
            if let Some(c) = client {
                c.tx_done(ring.id, done);
            }
        }
        let rx = ring.rx.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(r) = rx.as_ref() else { return (false, done.into(), 0) };
        if self.rx_held(ring) {
            // A busy poller owns it: its frames are the poller's.
            return (false, done.into(), 0);
        }
        let (n, bytes) = self.reap_rx(ring, r, client);
        (r.completed() > 0, u64::from(done) + u64::from(n), bytes)
    }

    /// Whether a busy poller holds `ring`'s vector ([`PollHold`]), so that
    /// the handler leaves its RX side to the poller. A handler that leaves
    /// it says so first (`deferred`): the last hold to end then raises the
    /// vector again, so nothing left behind waits for the next interrupt.
    fn rx_held(&self, ring: &Ring) -> bool {
        let v = ring.vector as usize;
        let (Some(holds), Some(deferred)) = (self.holds.get(v), self.deferred.get(v)) else {
            return false;
        };
        // SeqCst, against PollHold's drop: it ends the hold, then takes
        // `deferred`; one of the two sees the other.
        deferred.store(true, Ordering::SeqCst);
        if holds.load(Ordering::SeqCst) > 0 {
            return true;
        }
        deferred.store(false, Ordering::SeqCst);
        false
    }

    /// Delivers up to one budget of RX frames from `r`, `ring`'s RX ring,
    /// whose lock the caller holds, and posts the buffers back: the
    /// frames delivered and their bytes.
    fn reap_rx(&self, ring: &Ring, r: &DmaRing, client: Option<&dyn RingClient>) -> (u32, u64) {
        let mut bytes = 0u64;
        // SAFETY: the caller holds the RX lock: the ring's one driver-side
        // user.
        let n = RX_SCRATCH.with_borrow_mut(|scratch| unsafe {
            r.driver_reap_frames(RX_BUDGET, scratch, |f, off| {
                bytes += f.len() as u64;
                if let Some(c) = client {
                    c.rx(ring.id, f, off);
                }
            })
        });
        if n > 0 {
            if let Some(c) = client {
                c.rx_done(ring.id);
            }
            ring.counters.rx_frames.fetch_add(n.into(), Ordering::Relaxed);
            ring.counters.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
            // SAFETY: still under the RX lock.
            unsafe { r.driver_post_all() };
            if let Some(q) = ring.rxq {
                self.nic.doorbell(QueueId::rx(q));
            }
        }
        (n, bytes)
    }

    /// One busy poll of `ring`'s RX side (see [`RingEngine::busy_poll`]):
    /// frames delivered and their bytes.
    fn busy_poll_rx(&self, ring: &Ring, client: Option<&dyn RingClient>) -> (u32, u64) {
        let Ok(rx) = ring.rx.try_lock() else {
            return (0, 0); // its interrupt handler is delivering
        };
        match rx.as_ref().filter(|r| r.completed() > 0) {
            Some(r) => self.reap_rx(ring, r, client),
            None => (0, 0),
        }
    }
}

/// Vectors a busy poller holds masked ([`RingEngine::busy_poll_hold`]),
/// their RX sides the poller's to deliver: the device raises nothing on
/// them, and a handler that runs all the same (a software trigger, an
/// interrupt raised before the hold) reclaims TX but leaves RX to the
/// poller. Dropping it unmasks each vector no other hold keeps masked;
/// the device raises what is pending, and a vector whose RX a handler
/// left is raised again.
pub struct PollHold {
    sh: Arc<Shared>,
    /// The vectors held, one bit each.
    vectors: u64,
}

/// The set bits of `mask`, lowest first.
fn bits(mut mask: u64) -> impl Iterator<Item = u16> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let b = mask.trailing_zeros() as u16;
            mask &= mask - 1;
            b
        })
    })
}

impl fmt::Debug for PollHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollHold").field("vectors", &format_args!("{:#x}", self.vectors)).finish()
    }
}

impl Drop for PollHold {
    fn drop(&mut self) {
        for v in bits(self.vectors) {
            let i = v as usize;
            if self.sh.holds[i].fetch_sub(1, Ordering::SeqCst) == 1 {
                // A handler (a software-raised or already pending
                // interrupt) left frames to this hold: raised again. What
                // the unmask raises is delivered on this thread.
                let raise = self.sh.deferred[i].swap(false, Ordering::SeqCst);
                self.sh.nic.release_interrupt(v, raise);
            }
        }
    }
}

/// Drives the rings of one port.
pub struct RingEngine {
    sh: Arc<Shared>,
    xmit_batch: std::sync::atomic::AtomicBool,
    strategy: Mutex<Strategy>,
    clock: Arc<dyn Clock>,
    op: Mutex<()>,
}

impl fmt::Debug for RingEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingEngine")
            .field("rings", &self.sh.rings.len())
            .field("strategy", &*self.strategy.lock().unwrap_or_else(PoisonError::into_inner))
            .finish_non_exhaustive()
    }
}

impl RingEngine {
    /// Takes over `nic`'s queues with the real clock.
    pub fn new(nic: Arc<dyn Nic>, strategy: Strategy) -> Result<Self, RingError> {
        Self::with_clock(nic, strategy, Arc::new(SystemClock))
    }

    /// Takes over `nic`'s queues: one ring per queue pair (TX queue `i`
    /// with RX queue `i` where both exist), vectors as the device wants
    /// them, and installs the interrupt handler.
    pub fn with_clock(
        nic: Arc<dyn Nic>,
        strategy: Strategy,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, RingError> {
        let caps = nic.caps().clone();
        let n = caps.tx_queues.max(caps.rx_queues);
        let mut rings = Vec::with_capacity(n as usize);
        let mut by_vector = vec![Vec::new(); caps.vectors as usize];
        for i in 0..n {
            let txq = (i < caps.tx_queues).then_some(i);
            let rxq = (i < caps.rx_queues).then_some(i);
            let mut vector = None;
            // The ring's vector is its RX queue's where it has one.
            for q in rxq.map(QueueId::rx).into_iter().chain(txq.map(QueueId::tx)) {
                let v = nic.default_vector(q);
                nic.map_vector(q, v)?;
                if !by_vector[v as usize].contains(&i) {
                    by_vector[v as usize].push(i);
                }
                vector.get_or_insert(v);
            }
            rings.push(Ring {
                id: i,
                txq,
                rxq,
                vector: vector.unwrap_or(0),
                state: Mutex::new(RingState::Unallocated),
                gate: Gate::default(),
                tx: Mutex::new(TxSide::default()),
                rx: Mutex::new(None),
                stopped_at: Mutex::new(None),
                buf: AtomicU32::new(0),
                counters: RingCounters::default(),
                room: Room::default(),
            });
        }
        let sh = Arc::new(Shared {
            rings,
            by_vector,
            client: RwLock::new(None),
            gate_events: GateEvents::default(),
            nic: Arc::clone(&nic),
            adaptive: (0..caps.vectors).map(|_| Default::default()).collect(),
            holds: (0..caps.vectors).map(|_| AtomicU32::new(0)).collect(),
            deferred: (0..caps.vectors).map(|_| Default::default()).collect(),
        });
        let weak = Arc::downgrade(&sh);
        nic.set_interrupt_handler(Some(Arc::new(move |v| {
            if let Some(sh) = weak.upgrade() {
                sh.interrupt(v);
            }
        })));
        Ok(Self {
            sh,
            xmit_batch: std::sync::atomic::AtomicBool::new(true),
            strategy: Mutex::new(strategy),
            clock,
            op: Mutex::new(()),
        })
    }

    /// The driver.
    pub fn nic(&self) -> &Arc<dyn Nic> {
        &self.sh.nic
    }

    /// Number of rings.
    pub fn ring_count(&self) -> u16 {
        self.sh.rings.len() as u16
    }

    /// All ring indices.
    pub fn all_rings(&self) -> Vec<u16> {
        (0..self.ring_count()).collect()
    }

    /// The current strategy.
    pub fn strategy(&self) -> Strategy {
        *self.strategy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the strategy for later operations.
    pub fn set_strategy(&self, s: Strategy) {
        *self.strategy.lock().unwrap_or_else(PoisonError::into_inner) = s;
    }

    /// Installs the receiver of RX frames and TX completions.
    pub fn set_client(&self, c: Option<Arc<dyn RingClient>>) {
        *self.sh.client.write().unwrap() = c;
    }

    /// A ring's state.
    pub fn state(&self, ring: u16) -> Result<RingState, RingError> {
        Ok(self.ring(ring)?.state())
    }

    /// A snapshot of one ring.
    pub fn info(&self, ring: u16) -> Result<RingInfo, RingError> {
        let r = self.ring(ring)?;
        let c = &r.counters;
        Ok(RingInfo {
            ring,
            state: r.state(),
            txq: r.txq,
            rxq: r.rxq,
            vector: r.vector,
            buf_size: r.buf_size(),
            tx_frames: c.tx_frames.load(Ordering::Relaxed),
            tx_refused: c.tx_refused.load(Ordering::Relaxed),
            rx_frames: c.rx_frames.load(Ordering::Relaxed),
            rx_discarded: c.rx_discarded.load(Ordering::Relaxed),
            tx_bytes: c.tx_bytes.load(Ordering::Relaxed),
            rx_bytes: c.rx_bytes.load(Ordering::Relaxed),
        })
    }

    /// Frames the device has placed in `rings`' RX rings that the interrupt
    /// handler has not delivered yet.
    pub fn rx_backlog(&self, rings: &[u16]) -> u64 {
        // Only running rings count: a ring whose gate is closed is never
        // polled; its frames are discarded (and counted) when it stops.
        rings
            .iter()
            .filter_map(|&r| self.sh.rings.get(r as usize))
            .filter(|r| r.state() == RingState::Started)
            .map(|r| {
                r.rx.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    .map_or(0, |d| u64::from(d.completed()))
            })
            .sum()
    }

    /// DMA bytes the port's rings hold now.
    pub fn dma_bytes(&self) -> u64 {
        self.sh.nic.dma_account().bytes()
    }

    fn ring(&self, ring: u16) -> Result<&Ring, RingError> {
        self.sh
            .rings
            .get(ring as usize)
            .ok_or(RingError::NoSuchRing { ring, count: self.ring_count() })
    }

    fn resolve(&self, set: &[u16]) -> Result<Vec<&Ring>, RingError> {
        let set: BTreeSet<u16> = set.iter().copied().collect();
        set.into_iter().map(|r| self.ring(r)).collect()
    }

    // ---- datapath --------------------------------------------------------

    /// Queues `frames` on `ring`'s TX queue. With `xmit-batch` on (the
    /// default) the doorbell is written once for the batch, as Linux's
    /// `xmit_more` lets a driver do; off, once per frame. Either way it is
    /// flushed before the ring is found full and on every early return, so
    /// no queued frame waits for a doorbell that never comes. Returns how
    /// many were queued: the rest did not fit (too few free descriptors; a
    /// frame longer than a buffer takes several, as on the hardware) and
    /// were refused.
    pub fn transmit(&self, ring: u16, frames: &[&[u8]]) -> Result<usize, RingError> {
        self.transmit_with(ring, frames.iter().map(|f| (*f, Offload::NONE)), frames.len())
    }

    /// Queues one frame with its offload context (a TSO superframe, or a
    /// frame whose L4 checksum the device fills in) on `ring`: as many
    /// descriptors as it needs, one doorbell. Returns whether it was
    /// queued (false: the ring lacks the descriptors).
    pub fn transmit_offload(
        &self,
        ring: u16,
        frame: &[u8],
        off: Offload,
    ) -> Result<bool, RingError> {
        Ok(self.transmit_with(ring, std::iter::once((frame, off)), 1)? == 1)
    }

    /// After `ring` refused a frame of `len` bytes: waits until its TX
    /// ring has the descriptors for it (the device's completions were
    /// reclaimed, by the interrupt handler or another sender), the ring
    /// closes, or `within` passes. When the ring has room or is not open
    /// (nothing to wait for: the caller sees why when it sends again), it
    /// only yields, so that a caller retrying at once does not spin.
    pub fn wait_tx_room(&self, ring: u16, len: usize, within: Duration) {
        let Ok(r) = self.ring(ring) else { return std::thread::yield_now() };
        let waited = r.room.wait(within, || {
            let tx = r.tx.lock().unwrap_or_else(PoisonError::into_inner);
            match (tx.ring.as_ref(), tx.open) {
                (Some(dma), true) => dma.free() >= dma.slots_for(len),
                _ => true,
            }
        });
        if !waited {
            std::thread::yield_now();
        }
    }

    fn transmit_with<'a>(
        &self,
        ring: u16,
        frames: impl Iterator<Item = (&'a [u8], Offload)>,
        count: usize,
    ) -> Result<usize, RingError> {
        let r = self.ring(ring)?;
        let tx = r.tx.lock().unwrap_or_else(PoisonError::into_inner);
        let (Some(dma), true, Some(q)) = (tx.ring.as_ref(), tx.open, r.txq) else {
            drop(tx);
            return Err(RingError::NotStarted { ring, state: r.state() });
        };
        let batch = self.xmit_batch.load(Ordering::Relaxed);
        let (mut sent, mut bytes, mut unrung, mut cleaned) = (0usize, 0u64, 0usize, 0u32);
        for (f, off) in frames {
            if dma.free() < dma.slots_for(f.len()) {
                if unrung > 0 {
                    self.sh.nic.doorbell(QueueId::tx(q));
                    unrung = 0;
                }
                // TX clean on xmit: reclaim what the device has written
                // back before giving up. It writes completions back only
                // with the queue's moderated TX interrupt, so this takes
                // no more than the interrupt handler would.
                // SAFETY: the TX lock makes this the one driver-side user.
                let n = unsafe { dma.driver_reclaim() };
                r.counters.tx_completed.fetch_add(n.into(), Ordering::Relaxed);
                cleaned += n;
            }
            // SAFETY: as above.
            if !unsafe { dma.driver_push_frame(f, off) } {
                break;
            }
            sent += 1;
            bytes += f.len() as u64;
            if batch {
                unrung += 1;
            } else {
                self.sh.nic.doorbell(QueueId::tx(q));
            }
        }
        // The batch's doorbell is written while the TX lock is held: a
        // pauser that takes the lock (to drain a ring before it stops or
        // its flows move) must find every frame pushed also announced to
        // the device. Written after the lock was let go (tried for the
        // interrupt handler's sake), a drain could pass between push and
        // doorbell: hitless tests then lost frames and held senders 0.4 s.
        if unrung > 0 {
            self.sh.nic.doorbell(QueueId::tx(q));
        }
        r.counters.tx_frames.fetch_add(sent as u64, Ordering::Relaxed);
        r.counters.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
        r.counters.tx_refused.fetch_add((count - sent) as u64, Ordering::Relaxed);
        drop(tx);
        if cleaned > 0 {
            // Room this sender did not fill is another waiting sender's.
            r.room.wake();
        }
        // Completions cleaned here are the client's as much as those the
        // handler reclaims; told after the lock, as the handler tells its.
        if cleaned > 0
            && let Some(c) = self.sh.client.read().unwrap().clone()
        {
            c.tx_done(ring, cleaned);
        }
        Ok(sent)
    }

    /// NAPI-style busy polling, as Linux's `busy_poll`: delivers to the
    /// client, on the calling thread, what the RX sides of `rings` hold
    /// now, without waiting for their interrupt (which the device still
    /// raises; its handler then finds less to do). A sender calls it while
    /// it waits for an answer, so a reply is delivered as soon as the
    /// device has placed it, not after an interrupt thread has been woken.
    ///
    /// Only while every one of `rings` has its vector's adaptive moderation
    /// saying traffic is light ([`crate::moderation::Level::Latency`]):
    /// under load the interrupt's batches are cheaper (and one busy ring
    /// among idle ones must not keep a sender polling the idle ones), and
    /// a fixed throttle an operator set is respected. What it delivers is counted in the vector's
    /// moderation window, as an interrupt's frames are, so rising traffic
    /// still raises the level (and ends busy polling). A ring stopping
    /// (gate closed) or being delivered by its handler (RX lock held) is
    /// skipped. Returns the frames delivered, or None when `rings` may not
    /// be busy-polled now, so the caller stops waiting.
    pub fn busy_poll(&self, rings: &[u16]) -> Option<u32> {
        let sh = &self.sh;
        let light = |id: u16| {
            let v = sh.rings.get(id as usize).map(|r| r.vector as usize);
            v.and_then(|v| sh.adaptive.get(v)).is_some_and(|a| a.is_light())
        };
        if rings.is_empty() || !rings.iter().all(|&id| light(id)) {
            return None;
        }
        let mut client = None;
        let mut total = 0;
        for &id in rings {
            let ring = &sh.rings[id as usize];
            let a = &sh.adaptive[ring.vector as usize];
            if !ring.gate.enter() {
                continue; // stopping or stopped: nothing is delivered
            }
            let c = client.get_or_insert_with(|| sh.client.read().unwrap().clone());
            let (n, bytes) = sh.busy_poll_rx(ring, c.as_deref());
            ring.gate.exit(&sh.gate_events);
            total += n;
            if n > 0 {
                a.sample(n.into(), bytes, Instant::now(), |l| sh.write_level(ring.vector, l));
            }
        }
        Some(total)
    }

    /// Busy-poll ownership of `rings`, as Linux's `SO_PREFER_BUSY_POLL`
    /// gives a busy poller its NAPI: while the returned hold lives, the
    /// rings' vectors are masked, so what arrives waits for the poller
    /// ([`Self::busy_poll`]) instead of waking the interrupt thread, and
    /// the device raises whatever is still pending when the last hold
    /// on a vector ends. Taken only where [`Self::busy_poll`] would poll
    /// (every ring's traffic light); None otherwise. A sender takes it
    /// before it sends, so that the answer the device places while the
    /// send is still in progress is the poller's too.
    pub fn busy_poll_hold(&self, rings: &[u16]) -> Option<PollHold> {
        let sh = &self.sh;
        // Vectors are fewer than 64 (the device's interrupt bitmaps).
        let mut vectors = 0u64;
        for &id in rings {
            let v = sh.rings.get(id as usize)?.vector;
            if v >= 64 || !sh.adaptive.get(v as usize)?.is_light() {
                return None;
            }
            vectors |= 1 << v;
        }
        if vectors == 0 {
            return None;
        }
        for v in bits(vectors) {
            if sh.holds[v as usize].fetch_add(1, Ordering::SeqCst) == 0 {
                sh.nic.mask_interrupt(v, true);
            }
        }
        Some(PollHold { sh: Arc::clone(sh), vectors })
    }

    /// Turns adaptive interrupt moderation on `vector` on (its throttle
    /// starts at none and follows the traffic) or off (the caller writes
    /// a fixed throttle after).
    pub fn set_adaptive(&self, vector: u16, on: bool) {
        if let Some(a) = self.sh.adaptive.get(vector as usize) {
            a.set(on, |l| self.sh.write_level(vector, l));
        }
    }

    /// The adaptive level of `vector`, if adaptive moderation is on.
    pub fn adaptive_level(&self, vector: u16) -> Option<crate::moderation::Level> {
        self.sh.adaptive.get(vector as usize).filter(|a| a.is_on()).map(|a| a.level())
    }

    /// Sets `xmit-batch`: one doorbell per batch (on) or per frame (off).
    pub fn set_xmit_batch(&self, on: bool) {
        self.xmit_batch.store(on, Ordering::Relaxed);
    }

    /// Whether `xmit-batch` is on.
    pub fn xmit_batch(&self) -> bool {
        self.xmit_batch.load(Ordering::Relaxed)
    }

    // ---- lifecycle -------------------------------------------------------

    /// Allocates DMA buffers of `buf_size` bytes for rings that have none.
    pub fn alloc(&self, set: &[u16], buf_size: u32) -> Result<OpReport, RingError> {
        let _op = self.op.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rep = OpReport::new("alloc", self.strategy(), &*self.clock);
        let rings = self.resolve(set)?;
        for r in &rings {
            let s = r.state();
            if !s.can_become(RingState::Allocated) {
                return Err(RingError::IllegalTransition {
                    ring: r.id,
                    from: s,
                    to: RingState::Allocated,
                });
            }
        }
        let res = self.alloc_rings(&rings, buf_size, &mut rep.counts);
        rep.phase("alloc", &*self.clock);
        res.map(|()| rep.finish(&*self.clock))
    }

    /// Frees the buffers of rings that are allocated or stopped.
    pub fn free(&self, set: &[u16]) -> Result<OpReport, RingError> {
        let _op = self.op.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rep = OpReport::new("free", self.strategy(), &*self.clock);
        let rings = self.resolve(set)?;
        for r in &rings {
            let s = r.state();
            if !matches!(s, RingState::Unallocated | RingState::Freed)
                && !s.can_become(RingState::Freed)
            {
                return Err(RingError::IllegalTransition {
                    ring: r.id,
                    from: s,
                    to: RingState::Freed,
                });
            }
        }
        for r in rings.iter().filter(|r| r.state().holds_dma()) {
            self.free_ring(r, &mut rep.counts)?;
        }
        rep.phase("free", &*self.clock);
        Ok(rep.finish(&*self.clock))
    }

    /// Starts `set` with buffers of `buf_size` bytes: allocates where
    /// needed, programs the queues, waits out any re-enable gap, enables
    /// and waits for the device. Rings already started with that buffer
    /// size are left alone. On failure, rings this call touched are put
    /// back as they were and the first error is returned.
    pub fn start(&self, set: &[u16], buf_size: u32) -> Result<OpReport, RingError> {
        let _op = self.op.lock().unwrap_or_else(PoisonError::into_inner);
        // Rings a failed stop left half way (quiescing, say after a queue
        // did not disable in time) are stopped first, as a retried stop
        // would; starting them from there is not a transition.
        let half: Vec<u16> = set
            .iter()
            .copied()
            .filter(|&r| {
                self.info(r)
                    .is_ok_and(|i| matches!(i.state, RingState::Quiescing | RingState::Starting))
            })
            .collect();
        if half.is_empty() {
            return self.start_locked(set, buf_size, "start");
        }
        let stop = self.stop_locked(&half, "stop+start")?;
        Ok(stop.then(self.start_locked(set, buf_size, "start")?))
    }

    /// Stops `set`: closes TX, drains it, quiesces interrupts, disables the
    /// queues and frees their buffers. Idempotent: rings already stopped,
    /// freed or never allocated are left alone.
    pub fn stop(&self, set: &[u16]) -> Result<OpReport, RingError> {
        let _op = self.op.lock().unwrap_or_else(PoisonError::into_inner);
        self.stop_locked(set, "stop")
    }

    /// Stops then starts `set` with `buf_size` buffers: what an MTU change
    /// without traffic to keep needs. The report covers both halves.
    pub fn restart(&self, set: &[u16], buf_size: u32) -> Result<OpReport, RingError> {
        let _op = self.op.lock().unwrap_or_else(PoisonError::into_inner);
        let stop = self.stop_locked(set, "stop+start")?;
        let start = self.start_locked(set, buf_size, "start")?;
        Ok(stop.then(start))
    }

    fn start_locked(
        &self,
        set: &[u16],
        buf_size: u32,
        name: &'static str,
    ) -> Result<OpReport, RingError> {
        let strategy = self.strategy();
        let clock = &*self.clock;
        let mut rep = OpReport::new(name, strategy, clock);
        let mut todo = Vec::new();
        for r in self.resolve(set)? {
            match r.state() {
                RingState::Started => match r.buf_size() {
                    Some(have) if have != buf_size => {
                        return Err(RingError::BufferSizeMismatch {
                            ring: r.id,
                            have,
                            want: buf_size,
                        });
                    }
                    _ => {}
                },
                s @ (RingState::Unallocated
                | RingState::Freed
                | RingState::Allocated
                | RingState::Stopped) => {
                    todo.push((r, s));
                }
                s => {
                    return Err(RingError::IllegalTransition {
                        ring: r.id,
                        from: s,
                        to: RingState::Starting,
                    });
                }
            }
        }
        rep.phase("validate", clock);
        let res = match strategy {
            Strategy::Batched => self.start_batched(&todo, buf_size, &mut rep),
            Strategy::Sequential | Strategy::Legacy { .. } => {
                todo.iter().try_for_each(|&(r, _)| self.start_one_sequential(r, buf_size, &mut rep))
            }
        };
        if let Err(e) = res {
            self.unwind_start(&todo, &mut rep);
            return Err(e);
        }
        Ok(rep.finish(clock))
    }

    fn alloc_rings(
        &self,
        rings: &[&Ring],
        buf_size: u32,
        counts: &mut Counts,
    ) -> Result<(), RingError> {
        let acct = self.sh.nic.dma_account();
        let slots = self.sh.nic.caps().ring_size;
        for r in rings {
            let before = acct.bytes();
            let txr = r.txq.map(|_| DmaRing::new(slots, buf_size, acct).map(Arc::new)).transpose();
            let rxr = r.rxq.map(|_| DmaRing::new(slots, buf_size, acct).map(Arc::new)).transpose();
            let (txr, rxr) = (txr.map_err(NicError::from)?, rxr.map_err(NicError::from)?);
            r.set(RingState::Allocated)?;
            counts.dma_allocated += acct.bytes() - before;
            let held = txr.as_ref().or(rxr.as_ref()).map_or(0, |d| d.buf_size());
            r.buf.store(held, Ordering::Release);
            r.tx.lock().unwrap_or_else(PoisonError::into_inner).ring = txr;
            *r.rx.lock().unwrap_or_else(PoisonError::into_inner) = rxr;
        }
        Ok(())
    }

    /// Frees the buffers of a ring the device no longer uses.
    fn free_ring(&self, r: &Ring, counts: &mut Counts) -> Result<(), RingError> {
        let s = r.state();
        if !s.can_become(RingState::Freed) {
            return Err(RingError::IllegalTransition { ring: r.id, from: s, to: RingState::Freed });
        }
        // The device lets go of the rings first (it refuses while a queue
        // is enabled); only then are they the driver's to drop.
        for q in r.queues() {
            self.sh.nic.set_ring(q, None)?;
        }
        r.set(RingState::Freed)?;
        r.buf.store(0, Ordering::Release);
        let txr = r.tx.lock().unwrap_or_else(PoisonError::into_inner).ring.take();
        let rxr = r.rx.lock().unwrap_or_else(PoisonError::into_inner).take();
        for d in txr.iter().chain(rxr.iter()) {
            counts.dma_freed += d.bytes();
        }
        Ok(())
    }

    /// Allocates (or reallocates to `buf_size`) and programs the queues.
    fn program(&self, r: &Ring, buf_size: u32, counts: &mut Counts) -> Result<(), RingError> {
        if r.state().holds_dma() && r.buf_size() != Some(buf_size) {
            self.free_ring(r, counts)?;
        }
        if !r.state().holds_dma() {
            self.alloc_rings(&[r], buf_size, counts)?;
        }
        let nic = &self.sh.nic;
        let tx = r.tx.lock().unwrap_or_else(PoisonError::into_inner).ring.clone();
        if let (Some(q), Some(d)) = (r.txq, tx) {
            nic.set_ring(QueueId::tx(q), Some(d))?;
        }
        let rx = r.rx.lock().unwrap_or_else(PoisonError::into_inner);
        if let (Some(q), Some(d)) = (r.rxq, rx.as_ref()) {
            nic.set_ring(QueueId::rx(q), Some(Arc::clone(d)))?;
            // SAFETY: the RX lock makes this the one driver-side user.
            unsafe { d.driver_post_all() };
            nic.doorbell(QueueId::rx(q));
        }
        Ok(())
    }

    /// Opens a ring whose queues the device reports enabled, and polls it
    /// once (a software interrupt, as a driver schedules its NAPI after
    /// enabling it): what the device placed in its RX ring between the
    /// enable and the gate opening raised an interrupt its handler had
    /// to skip, and a full RX ring raises no more, so without the poll
    /// those frames — and whatever waits behind them in the receive
    /// packet buffer, holding back the wire — would wait for ever.
    fn open(&self, r: &Ring, counts: &mut Counts) -> Result<(), RingError> {
        r.set(RingState::Started)?;
        r.tx.lock().unwrap_or_else(PoisonError::into_inner).open = true;
        r.gate.open();
        if r.rxq.is_some() {
            self.sh.nic.trigger_interrupt(r.vector);
        }
        counts.rings_started += 1;
        Ok(())
    }

    /// The instant before which the ring must not be re-enabled.
    fn gap_deadline(&self, r: &Ring) -> Option<Instant> {
        let gap = self.sh.nic.caps().errata.reenable_gap?;
        r.stopped_at.lock().unwrap_or_else(PoisonError::into_inner).map(|t| t + gap)
    }

    fn start_batched(
        &self,
        todo: &[(&Ring, RingState)],
        buf_size: u32,
        rep: &mut OpReport,
    ) -> Result<(), RingError> {
        let clock = &*self.clock;
        let nic = &self.sh.nic;
        for (r, _) in todo {
            self.program(r, buf_size, &mut rep.counts)?;
        }
        rep.phase("program", clock);
        // One wait for the latest gap of the batch, measured from each
        // ring's own disable: 50 ms − elapsed, never more.
        if let Some(deadline) = todo.iter().filter_map(|(r, _)| self.gap_deadline(r)).max()
            && deadline > clock.now()
        {
            clock.sleep_until(deadline, Wait::ReenableGap);
            rep.phase("reenable-gap", clock);
        }
        let mut qs = Vec::new();
        for (r, _) in todo {
            r.set(RingState::Starting)?;
            for q in r.queues() {
                nic.request_enable(q)?;
                qs.push(q);
            }
        }
        nic.wait_queues(&qs, true, clock.now() + nic.caps().queue_ack_deadline)?;
        rep.phase("enable", clock);
        for (r, _) in todo {
            #[cfg(feature = "failpoints")]
            fail::fail_point!("rings.start.batch", |_| Err(RingError::QuiesceTimeout {
                rings: vec![r.id]
            }));
            self.open(r, &mut rep.counts)?;
        }
        Ok(())
    }

    fn start_one_sequential(
        &self,
        r: &Ring,
        buf_size: u32,
        rep: &mut OpReport,
    ) -> Result<(), RingError> {
        let clock = &*self.clock;
        let nic = &self.sh.nic;
        self.program(r, buf_size, &mut rep.counts)?;
        rep.phase("program", clock);
        // illumos waits `elapsed` here (its own bug, which can leave the
        // queue hung); the comparison strategies wait the true remainder so
        // they measure the algorithm, not a hung device.
        if let Some(deadline) = self.gap_deadline(r)
            && deadline > clock.now()
        {
            clock.sleep_until(deadline, Wait::ReenableGap);
            rep.phase("reenable-gap", clock);
        }
        r.set(RingState::Starting)?;
        for q in r.rxq.map(QueueId::rx).into_iter().chain(r.txq.map(QueueId::tx)) {
            nic.request_enable(q)?;
            self.poll_status(q, true)?;
        }
        rep.phase("enable", clock);
        self.open(r, &mut rep.counts)
    }

    /// illumos's loop: read the status, and if it is not there yet, pause
    /// 10 ms; at most 10 tries.
    fn poll_status(&self, q: QueueId, enabled: bool) -> Result<(), RingError> {
        const NTRIES: u32 = 10;
        const PAUSE: Duration = Duration::from_millis(10);
        for _ in 0..NTRIES {
            if self.sh.nic.queue_enabled(q) == enabled {
                return Ok(());
            }
            self.clock.sleep_until(self.clock.now() + PAUSE, Wait::PollPause);
        }
        Err(NicError::Timeout { enable: enabled, pending: vec![q] }.into())
    }

    /// Puts rings a failed start touched back to rest: rings it asked to
    /// enable are stopped the normal way (pre-disable notice, disable, wait
    /// for the device, free); buffers it allocated for rings that had none
    /// are freed. Keeps going past failures — a ring that still cannot be
    /// stopped stays `quiescing`, and a later stop retries it — because the
    /// caller returns the error that made it unwind.
    fn unwind_start(&self, todo: &[(&Ring, RingState)], rep: &mut OpReport) {
        let starting: Vec<&Ring> =
            todo.iter().map(|(r, _)| *r).filter(|r| r.state() == RingState::Starting).collect();
        if !starting.is_empty() {
            let _ = self.stop_batched(&starting, rep);
        }
        for (r, before) in todo {
            if r.state() == RingState::Allocated && !before.holds_dma() {
                let _ = self.free_ring(r, &mut rep.counts);
            }
        }
        rep.phase("unwind", &*self.clock);
    }

    fn stop_locked(&self, set: &[u16], name: &'static str) -> Result<OpReport, RingError> {
        let strategy = self.strategy();
        let clock = &*self.clock;
        let mut rep = OpReport::new(name, strategy, clock);
        let rings = self.resolve(set)?;
        // Validate the whole set before touching anything.
        let (mut todo, mut idle) = (Vec::new(), Vec::new());
        for r in rings {
            match r.state() {
                // Running, or left half way by an operation that failed:
                // all are stopped the same way, which is also how a failed
                // stop is retried.
                RingState::Started | RingState::Starting | RingState::Quiescing => todo.push(r),
                RingState::Allocated | RingState::Stopped => idle.push(r),
                // Idempotent: nothing running, nothing to stop.
                RingState::Unallocated | RingState::Freed => {}
            }
        }
        rep.phase("validate", clock);
        for r in idle {
            self.free_ring(r, &mut rep.counts)?;
        }
        match strategy {
            Strategy::Batched => self.stop_batched(&todo, &mut rep)?,
            Strategy::Sequential => {
                for r in &todo {
                    self.stop_one_sequential(r, &mut rep)?;
                }
            }
            Strategy::Legacy { tick_hz } => {
                for r in &todo {
                    self.stop_one_sequential(r, &mut rep)?;
                    // The seed: `delay(50 * drv_usectohz(1000))`, meant as
                    // 50 ms, is 50 ticks: 500 ms at 100 Hz. Once per ring.
                    let d = ticks(50 * usec_to_ticks(1000, tick_hz), tick_hz);
                    clock.sleep_until(clock.now() + d, Wait::TickDelay);
                    rep.phase("tick-delay", clock);
                }
            }
        }
        Ok(rep.finish(clock))
    }

    /// Closes TX, waits for in-flight TX to leave, then closes the
    /// interrupt gate and waits for handlers to finish. The gate stays
    /// open while TX drains: what the wire brings back meanwhile (a
    /// loopback or reflector, whose flow control holds TX until the
    /// driver takes it) is still received, so the drain cannot wait on
    /// itself. If either wait fails, the stop is called off: rings that
    /// were running are reopened (nothing was disabled yet) and the error
    /// returned.
    fn quiesce(&self, rings: &[&Ring]) -> Result<(), RingError> {
        let nic = &self.sh.nic;
        let mut was_running = Vec::new();
        for r in rings {
            // Taking the TX lock waits out a transmit in progress.
            r.tx.lock().unwrap_or_else(PoisonError::into_inner).open = false;
            // A sender waiting for room finds the ring closed now.
            r.room.wake();
            let s = r.state();
            if s != RingState::Quiescing {
                r.set(RingState::Quiescing)?;
            }
            was_running.push(s == RingState::Started);
        }
        let deadline = self.clock.now() + nic.caps().queue_ack_deadline;
        let txqs: Vec<u16> = rings.iter().filter_map(|r| r.txq).collect();
        let res = nic
            .wait_tx_drained(&txqs, deadline)
            .map_err(|rings| RingError::TxDrainTimeout { rings })
            .and_then(|()| {
                for r in rings {
                    r.gate.close();
                }
                wait_quiet(rings.iter().map(|r| (r.id, &r.gate)), &self.sh.gate_events, deadline)
                    .map_err(|rings| RingError::QuiesceTimeout { rings })
            });
        if res.is_err() {
            for (r, running) in rings.iter().zip(was_running) {
                if running {
                    r.set(RingState::Started)?;
                    r.tx.lock().unwrap_or_else(PoisonError::into_inner).open = true;
                    r.gate.open();
                }
            }
        }
        res
    }

    /// Reclaims what the stopped device left in the rings and frees them.
    fn reclaim(&self, r: &Ring, counts: &mut Counts) -> Result<(), RingError> {
        // (Counted, not told to the client: nothing reaches a client
        // from a stopped ring.)
        if let Some(d) = r.tx.lock().unwrap_or_else(PoisonError::into_inner).ring.as_ref() {
            // SAFETY: under the TX lock.
            let n = unsafe { d.driver_reclaim() };
            r.counters.tx_completed.fetch_add(n.into(), Ordering::Relaxed);
        }
        if let Some(d) = r.rx.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            // Received after the gate closed: never delivered, counted.
            // SAFETY: under the RX lock.
            let n = unsafe { d.driver_reclaim() };
            r.counters.rx_discarded.fetch_add(n.into(), Ordering::Relaxed);
            counts.rx_discarded += u64::from(n);
        }
        counts.rings_stopped += 1;
        self.free_ring(r, counts)
    }

    fn stop_batched(&self, rings: &[&Ring], rep: &mut OpReport) -> Result<(), RingError> {
        if rings.is_empty() {
            return Ok(());
        }
        let clock = &*self.clock;
        let nic = &self.sh.nic;
        self.quiesce(rings)?;
        rep.phase("quiesce", clock);
        if let Some(notice) = nic.caps().errata.tx_pre_disable {
            for r in rings {
                if let Some(q) = r.txq {
                    nic.tx_pre_disable(q)?;
                }
            }
            // One notice for the whole batch, timed from the last write.
            clock.sleep_until(clock.now() + notice, Wait::PreDisableNotice);
            rep.phase("pre-disable", clock);
        }
        let mut qs = Vec::new();
        for r in rings {
            #[cfg(feature = "failpoints")]
            fail::fail_point!("rings.stop.batch", |_| Err(RingError::Nic(NicError::Timeout {
                enable: false,
                pending: r.queues().collect()
            })));
            for q in r.queues() {
                nic.request_disable(q)?;
                qs.push(q);
            }
        }
        let acked = nic.wait_queues(&qs, false, clock.now() + nic.caps().queue_ack_deadline);
        let now = clock.now();
        // Rings the device disabled are stopped and freed even if others
        // did not answer; those stay quiescing for a later stop to retry.
        let mut done = Vec::new();
        for r in rings {
            if r.queues().all(|q| !nic.queue_enabled(q)) {
                *r.stopped_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(now);
                r.set(RingState::Stopped)?;
                done.push(*r);
            }
        }
        rep.phase("disable", clock);
        for r in done {
            self.reclaim(r, &mut rep.counts)?;
        }
        rep.phase("free", clock);
        acked.map_err(RingError::from)
    }

    fn stop_one_sequential(&self, r: &Ring, rep: &mut OpReport) -> Result<(), RingError> {
        let clock = &*self.clock;
        let nic = &self.sh.nic;
        self.quiesce(&[r])?;
        if let Some(q) = r.rxq {
            nic.request_disable(QueueId::rx(q))?;
        }
        if let Some(q) = r.txq {
            if let Some(notice) = nic.caps().errata.tx_pre_disable {
                nic.tx_pre_disable(q)?;
                // drv_usecwait(500), per ring.
                clock.sleep_until(clock.now() + notice, Wait::PreDisableNotice);
            }
            nic.request_disable(QueueId::tx(q))?;
        }
        for q in r.rxq.map(QueueId::rx).into_iter().chain(r.txq.map(QueueId::tx)) {
            self.poll_status(q, false)?;
        }
        *r.stopped_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(clock.now());
        r.set(RingState::Stopped)?;
        rep.phase("disable", clock);
        self.reclaim(r, &mut rep.counts)?;
        rep.phase("free", clock);
        Ok(())
    }
}

impl Drop for RingEngine {
    fn drop(&mut self) {
        self.sh.nic.set_interrupt_handler(None);
        let all = self.all_rings();
        if let Err(e) = self.stop(&all) {
            eprintln!("ring engine: stopping rings at teardown: {e}");
        }
    }
}

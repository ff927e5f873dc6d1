//! The device's engine: the thread that does what silicon would. It
//! acknowledges queue enables and disables (enforcing the errata), moves
//! what TX doorbells announce onto the wire with the offloads each
//! descriptor asks for, steers what arrives to an RX queue (VLAN filter,
//! MAC filters, RSS over [`flow_hash`]) and places it in that queue's
//! ring, and raises each vector's interrupt no more often than its
//! throttle allows; and the interrupt thread that calls the driver's
//! handler. It also runs the wires' far side: what a reflector echoes and
//! loopback returns, what a cable carries to the peer's receive packet
//! buffer (its inbox) and what waits there for RX buffers, and what an
//! afpacket socket brings (its system calls are [`super::afpacket`]'s).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::afpacket::{self, DIRECT_MIN, PACKET_BATCH, PACKET_SLOT};
use super::shared::{Ctl, Shared};
use super::wire::{WireMode, superframe_wire_bytes, wire_bytes};
use crate::dma::DmaRing;
use crate::offload::{self, Offload, VNET_HDR_LEN};

/// How long a device thread keeps looking for work (yielding the CPU
/// between looks) after its last piece of work before it parks: like
/// NAPI's busy polling, it saves the wake-up on a busy link and costs
/// nothing on an idle one.
const LINGER: Duration = Duration::from_micros(50);

/// When the wire has been the limit for longer than [`LINGER`], the
/// engine sleeps until it has been free this long and then sends the
/// frames whose turn came meanwhile: one wake-up per quantum rather than
/// per frame. (A short burst — a batch the wire takes a few µs to carry —
/// is waited out lingering, as after any work, so it leaves at the wire's
/// pace without a sleep in the middle.)
const PACE_QUANTUM: Duration = Duration::from_micros(20);

/// How far behind the wire's own timeline the engine may fall (a late
/// wake-up, a descheduled thread) and still send the waiting frames at
/// the times the wire would have: beyond it the lag is forgotten, so no
/// burst above line rate ever exceeds this much wire time.
const MAX_LAG: Duration = Duration::from_micros(100);

/// How often the afpacket socket's drop count is read while it has no
/// backlog.
const STATS_EVERY: Duration = Duration::from_millis(100);

/// Most frames the engine moves per queue before looking at other work.
const ENGINE_BUDGET: u32 = 256;

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Ack { q: usize, on: bool },
    Fire { vector: u16 },
}

/// The engine thread: passes while there is work, lingering (yielding)
/// for [`LINGER`] after the last, then asleep until a doorbell, a control
/// write, a frame on the afpacket socket or its next timer. The engine's
/// state is behind `core`'s lock, which a doorbell written while this
/// thread sleeps takes to run a pass itself ([`super::Device::write_tail`]).
pub(super) fn engine_thread(sh: &Arc<Shared>, core: &std::sync::Mutex<Engine>) {
    crate::wake::short_slices();
    // Timers of a few µs must not be rounded up by the default 50 µs
    // timer slack: the ack latency is part of the hardware model.
    // SAFETY: PR_SET_TIMERSLACK only affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let mut last_work = Instant::now();
    while !sh.shutdown.load(Ordering::Acquire) {
        let mut e = core.lock().unwrap();
        e.asleep_until = None;
        let busy = e.pass();
        let now = Instant::now();
        if busy {
            last_work = now;
            continue;
        }
        // A short wait for the wire lingers like any other pause after
        // work; once the wire has been the limit for longer, waiting
        // for it is a timed sleep: the frames cannot go before their
        // time anyway, and a saturated wire must not keep a core busy.
        let linger = match (e.wire_wake, e.paced_since) {
            (Some(_), Some(since)) => now - since < LINGER,
            _ => now - last_work < LINGER,
        };
        if linger {
            drop(e);
            thread::yield_now();
            continue;
        }
        let next = e.next_deadline();
        // An afpacket wire wakes the engine when a frame arrives,
        // unless frames already wait for RX buffers (then the RX
        // doorbell does, and the socket holds the rest).
        let wire = (sh.inbox.device_owned() == 0).then(|| e.watch_wire(true)).flatten();
        e.asleep_until = Some(next);
        drop(e);
        let readable = match next {
            Some(t) => {
                let now = Instant::now();
                t > now && sh.engine_wake.park(wire, Some(t - now))
            }
            None => sh.engine_wake.park(wire, None),
        };
        if readable && let Some(ep) = wire {
            // The one-shot fired: taken, it is disarmed until the next
            // sleep arms it again.
            afpacket::reap(ep);
            core.lock().unwrap().wire_armed = false;
        }
    }
}

pub(super) fn irq_thread(sh: &Shared) {
    crate::wake::short_slices();
    let mut last_work = Instant::now();
    loop {
        let bits = sh.irq_pending.swap(0, Ordering::AcqRel);
        if bits == 0 {
            if sh.shutdown.load(Ordering::Acquire) {
                return;
            }
            if last_work.elapsed() < LINGER {
                thread::yield_now();
            } else {
                thread::park();
            }
            continue;
        }
        last_work = Instant::now();
        let handler = sh.handler();
        if let Some(h) = handler {
            let mut b = bits;
            while b != 0 {
                let v = b.trailing_zeros() as u16;
                b &= b - 1;
                h(v);
            }
        }
    }
}

/// What became of a frame the device received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// In its RX ring.
    Delivered,
    /// Dropped and counted (queue disabled, larger than the MTU).
    Dropped,
    /// Its RX ring has too few buffers posted.
    NoBuffer,
}

pub(super) struct Engine {
    pub(super) sh: Arc<Shared>,
    timers: BinaryHeap<Reverse<(Instant, Timer)>>,
    cause: Vec<bool>,
    last_fire: Vec<Option<Instant>>,
    fire_scheduled: Vec<bool>,
    /// Rings of enabled queues, by queue slot: set when the device
    /// acknowledges an enable, cleared when it acknowledges a disable. The
    /// datapath looks here, not at the registers' locks.
    live: Vec<Option<Arc<DmaRing>>>,
    /// The engine's copy of the MAC filters, keyed by MAC, and the
    /// generation it was built from.
    filters: HashMap<[u8; 6], (u16, u16)>,
    filters_gen: u64,
    /// The device's own memory for gathering chained TX frames, cutting
    /// segments, and gathering what the wire delivered.
    scratch: Vec<u8>,
    seg: Vec<u8>,
    wire_scratch: Vec<u8>,
    /// Where frames read off an afpacket wire land first: PACKET_BATCH
    /// slots of PACKET_SLOT bytes.
    packet_buf: Vec<u8>,
    /// The queue (index into `live`) the last large frame off the
    /// afpacket wire went to: the next read lands in its posted buffers.
    rx_direct: Option<usize>,
    /// The queue the last delivered frame went to.
    last_rx_q: usize,
    /// Frames went into the cable peer's inbox since it was last woken.
    peer_pushed: bool,
    /// TX queues with completions not yet written back, per vector, and
    /// whether each queue is listed.
    wb_by_vector: Vec<Vec<usize>>,
    wb_listed: Vec<bool>,
    /// The instant the wire is free for the next frame, on the wire's own
    /// timeline, and the picoseconds below a nanosecond it carries over.
    wire_free: Instant,
    wire_frac_ps: u64,
    /// Link speed, Mb/s.
    speed_mbps: u64,
    /// TX frames were waiting at the end of the last pass.
    tx_backlog: bool,
    /// When the wire is the limit: when to look again.
    wire_wake: Option<Instant>,
    /// Since when the wire has been the limit without a break.
    paced_since: Option<Instant>,
    /// The next TX queue to serve first (round robin while paced).
    tx_cursor: usize,
    /// The doorbell bits taken in a pass, and the queues in serving order.
    pending: Vec<u64>,
    order: Vec<usize>,
    /// While the engine thread sleeps: until when (inner None: until
    /// woken); None while it runs.
    asleep_until: Option<Option<Instant>>,
    /// The engine thread's one-shot watch on the afpacket socket is armed.
    wire_armed: bool,
    /// When the afpacket socket's drop count was last read.
    packet_stats_at: Option<Instant>,
}

impl Engine {
    pub(super) fn new(sh: Arc<Shared>) -> Self {
        let nv = sh.cfg.caps.vectors as usize;
        Self {
            timers: BinaryHeap::new(),
            cause: vec![false; nv],
            last_fire: vec![None; nv],
            fire_scheduled: vec![false; nv],
            live: vec![None; sh.regs.len()],
            filters: HashMap::new(),
            filters_gen: 0,
            scratch: Vec::new(),
            seg: Vec::new(),
            wire_scratch: Vec::new(),
            packet_buf: Vec::new(),
            rx_direct: None,
            last_rx_q: 0,
            peer_pushed: false,
            wb_by_vector: vec![Vec::new(); nv],
            wb_listed: vec![false; sh.regs.len()],
            wire_free: Instant::now(),
            wire_frac_ps: 0,
            speed_mbps: sh.cfg.speed_mbps.max(1),
            tx_backlog: false,
            wire_wake: None,
            paced_since: None,
            tx_cursor: 0,
            pending: vec![0; sh.doorbell_pending.len()],
            order: Vec::new(),
            asleep_until: None,
            wire_armed: false,
            packet_stats_at: None,
            sh,
        }
    }

    /// One pass over everything the device does: control writes, timers,
    /// TX, what waits in the receive packet buffer, the afpacket socket,
    /// then interrupts. Whether it did anything.
    pub(super) fn pass(&mut self) -> bool {
        let mut busy = self.control();
        busy |= self.timers_due();
        busy |= self.transmit();
        busy |= self.receive_wire();
        busy |= self.receive_packet();
        self.raise_interrupts();
        busy
    }

    /// A pass for a TX doorbell written while the engine thread sleeps,
    /// run by the writing thread: the engine thread's watch on the
    /// afpacket socket is off meanwhile, so the answers this pass reads
    /// itself (a far side that echoes inside the send) do not wake it.
    pub(super) fn pass_for_doorbell(&mut self) -> bool {
        let armed = self.wire_armed;
        if armed {
            self.watch_wire(false);
        }
        let busy = self.pass();
        if armed {
            self.watch_wire(true);
        }
        busy
    }

    /// Arms or disarms the engine thread's watch on the afpacket socket
    /// (if the port has one): the epoll to sleep on, when armed.
    fn watch_wire(&mut self, on: bool) -> Option<std::os::fd::RawFd> {
        let sock = self.sh.packet.get()?.as_raw_fd();
        let ep = self.sh.packet_watch.get()?.as_raw_fd();
        if on != self.wire_armed {
            afpacket::watch(ep, sock, on);
            self.wire_armed = on;
        }
        Some(ep)
    }

    /// The next instant the engine must look again by itself (a timer, or
    /// the wire free for waiting frames).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        match (self.timers.peek().map(|Reverse((t, _))| *t), self.wire_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// After a pass run on another thread (a doorbell written while the
    /// engine thread slept): whether the sleeping engine thread must be
    /// woken, because the pass left work (more TX frames than one budget
    /// with the wire free, frames in the receive packet buffer) or a
    /// deadline sooner than the one it sleeps to. (Frames left on the
    /// afpacket socket wake it through its watch, armed again.)
    pub(super) fn needs_engine_thread(&self) -> bool {
        if (self.tx_backlog && self.wire_wake.is_none()) || self.sh.inbox.device_owned() > 0 {
            return true;
        }
        match (self.next_deadline(), self.asleep_until) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(t), Some(until)) => until.is_none_or(|u| t < u),
        }
    }

    fn control(&mut self) -> bool {
        let ctl = std::mem::take(&mut *self.sh.ctl.lock().unwrap());
        if ctl.is_empty() {
            return false;
        }
        let now = Instant::now();
        let now_ns = self.sh.now_ns();
        let errata = self.sh.cfg.caps.errata;
        let due = now + self.sh.cfg.ack_latency;
        for c in ctl {
            match c {
                Ctl::Enable(q) => {
                    let r = &self.sh.regs[q];
                    if !r.req.load(Ordering::Acquire) {
                        continue; // superseded by a disable
                    }
                    let disabled = r.disabled_ns.load(Ordering::Acquire);
                    if let Some(gap) = errata.reenable_gap
                        && disabled != 0
                        && now_ns.saturating_sub(disabled) < gap.as_nanos() as u64
                    {
                        // The queue hangs in "requested, never enabled".
                        self.sh.counters.fault_reenable_too_soon.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if r.ring.lock().unwrap().is_none() {
                        self.sh.counters.fault_no_ring.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    self.timers.push(Reverse((due, Timer::Ack { q, on: true })));
                }
                Ctl::Disable(q) => {
                    let r = &self.sh.regs[q];
                    if r.req.load(Ordering::Acquire) {
                        continue; // superseded by an enable
                    }
                    if let Some(notice) = errata.tx_pre_disable
                        && q < self.sh.tx_queues()
                        && r.stat.load(Ordering::Acquire)
                    {
                        let pre = r.pre_disable_ns.load(Ordering::Acquire);
                        if pre == 0 || now_ns.saturating_sub(pre) < notice.as_nanos() as u64 {
                            // The TX queue hangs enabled.
                            self.sh.counters.fault_no_pre_disable.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                    self.timers.push(Reverse((due, Timer::Ack { q, on: false })));
                }
            }
        }
        true
    }

    fn timers_due(&mut self) -> bool {
        let now = Instant::now();
        let mut acked = false;
        let mut any = false;
        while let Some(Reverse((t, _))) = self.timers.peek() {
            if *t > now {
                break;
            }
            let Reverse((_, timer)) = self.timers.pop().expect("peeked");
            any = true;
            match timer {
                Timer::Ack { q, on } => {
                    let r = &self.sh.regs[q];
                    if r.req.load(Ordering::Acquire) != on {
                        continue;
                    }
                    if !on {
                        // The re-enable gap runs from a completed disable;
                        // an enable cancelled before its ack never brought
                        // the queue up, so there was nothing to take down.
                        if r.stat.load(Ordering::Acquire) {
                            r.disabled_ns.store(self.sh.now_ns(), Ordering::Release);
                        }
                        r.pre_disable_ns.store(0, Ordering::Release);
                        // A queue being disabled writes back what it sent.
                        if let Some(d) = &self.live[q] {
                            d.device_write_back();
                        }
                        if self.wb_listed[q] {
                            self.wb_listed[q] = false;
                            for l in &mut self.wb_by_vector {
                                l.retain(|&x| x != q);
                            }
                        }
                    }
                    // Contexts only change while disabled, so the ring read
                    // now is the one the queue runs with until its disable
                    // is acknowledged, here, on this thread.
                    self.live[q] = if on { r.ring.lock().unwrap().clone() } else { None };
                    r.stat.store(on, Ordering::Release);
                    acked = true;
                }
                Timer::Fire { vector } => {
                    self.fire_scheduled[vector as usize] = false;
                }
            }
        }
        if acked {
            self.sh.events.notify();
        }
        any
    }

    /// Moves what the driver queued (and announced with a doorbell) on TX
    /// rings onto the wire, doing the offloads each frame's descriptor
    /// asks for, no faster than the wire serialises them. Completions are
    /// written back when the queue's vector fires ([`Self::raise_interrupts`]).
    fn transmit(&mut self) -> bool {
        let now = Instant::now();
        // Cleared before the doorbell bits are read: a doorbell that sees
        // it set has its bit read at the next pass, which the wire's
        // deadline brings (both sides SeqCst).
        self.sh.tx_paced.store(false, Ordering::SeqCst);
        self.wire_wake = None;
        if self.wire_free < now {
            // The wire went idle, or the engine is late for frames that
            // were waiting: those keep the slots the wire had for them, up
            // to MAX_LAG back; an idle wire starts afresh now.
            let floor = if self.tx_backlog { now.checked_sub(MAX_LAG).unwrap_or(now) } else { now };
            if self.wire_free < floor {
                self.wire_free = floor;
                self.wire_frac_ps = 0;
            }
        }
        let tx = self.sh.tx_queues();
        let mut pending = std::mem::take(&mut self.pending);
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for (w, p) in pending.iter_mut().enumerate() {
            *p = self.sh.doorbell_pending[w].swap(0, Ordering::SeqCst);
        }
        // Serving order: from the cursor round, so that when the wire is
        // the limit every queue gets its turn.
        let start = if self.tx_cursor < tx { self.tx_cursor } else { 0 };
        for from_cursor in [true, false] {
            for (w, &word) in pending.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let q = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if q < tx && (q >= start) == from_cursor {
                        order.push(q);
                    }
                }
            }
        }
        let mut moved = false;
        let mut blocked = None;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut seg = std::mem::take(&mut self.seg);
        for (i, &q) in order.iter().enumerate() {
            if self.wire_free > now {
                blocked = Some(i);
                break;
            }
            let Some(ring) = self.live[q].clone() else { continue };
            let limit = self.sh.tails[q].load(Ordering::Acquire);
            if !self.reflect_room() {
                // Paused by the link partner (802.3x): what would come back
                // has nowhere to wait until the driver takes what arrived
                // (its RX doorbell wakes the engine).
                self.sh.doorbell_pending[q / 64].fetch_or(1 << (q % 64), Ordering::SeqCst);
                continue;
            }
            let mut bytes = 0u64;
            // SAFETY: this engine thread is the only device-side user
            // of every ring programmed into this device; `limit` is what
            // the driver's doorbell announced.
            let n = unsafe {
                ring.device_take_upto(limit, ENGINE_BUDGET, &mut scratch, |frame, off| {
                    bytes += frame.len() as u64;
                    self.send_offloaded(frame, off, &mut seg);
                    self.wire_free <= now && self.reflect_room()
                })
            };
            if ring.device_owned_upto(limit) > 0 {
                // More than one budget's worth, or the wire is busy: come
                // back to it.
                self.sh.doorbell_pending[q / 64].fetch_or(1 << (q % 64), Ordering::SeqCst);
                self.tx_cursor = q + 1;
            }
            if n == 0 {
                continue;
            }
            moved = true;
            self.sh.counters.tx_frames.fetch_add(n.into(), Ordering::Relaxed);
            self.sh.counters.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
            let v = self.sh.regs[q].vector.load(Ordering::Acquire) as usize;
            self.cause[v] = true;
            if !self.wb_listed[q] {
                self.wb_listed[q] = true;
                self.wb_by_vector[v].push(q);
            }
        }
        if let Some(i) = blocked {
            // The wire is busy: the queues not served keep their bits, and
            // are served first when it is free.
            for &q in &order[i..] {
                self.sh.doorbell_pending[q / 64].fetch_or(1 << (q % 64), Ordering::SeqCst);
            }
            self.tx_cursor = order[i];
            self.wire_wake = Some(self.wire_free + PACE_QUANTUM);
            self.paced_since.get_or_insert(now);
            self.sh.tx_paced.store(true, Ordering::SeqCst);
        }
        self.tx_backlog = self.sh.doorbell_pending.iter().any(|w| w.load(Ordering::Relaxed) != 0);
        if !self.tx_backlog {
            self.paced_since = None;
        }
        self.scratch = scratch;
        self.seg = seg;
        self.pending = pending;
        self.order = order;
        if self.peer_pushed {
            self.peer_pushed = false;
            if let Some(p) = self.sh.peer.get() {
                p.engine.unpark();
            }
        }
        // Store-load ordering against `wait_tx_drained` (which increments
        // `drain_waiters`, then reads `head`): without a full fence each
        // side could miss the other's write and the waiter sleep to its
        // deadline.
        std::sync::atomic::fence(Ordering::SeqCst);
        if moved && self.sh.drain_waiters.load(Ordering::SeqCst) > 0 {
            self.sh.events.notify();
        }
        moved
    }

    /// The wire carries `bytes` more (framing included): it is busy that
    /// much longer at the port's speed.
    fn occupy(&mut self, bytes: u64) {
        let ps = (bytes * 8 * 1_000_000).div_ceil(self.speed_mbps) + self.wire_frac_ps;
        self.wire_free += Duration::from_nanos(ps / 1000);
        self.wire_frac_ps = ps % 1000;
    }

    /// One frame from a TX ring: an afpacket wire takes it as it is, with
    /// its offload context in a virtio-net header (as a veth or a virtio
    /// NIC hands the kernel a superframe); every other wire carries only
    /// frames the MTU allows, so the device cuts superframes into
    /// segments (TSO) and fills in partial checksums first.
    fn send_offloaded(&mut self, frame: &mut [u8], off: Offload, seg: &mut Vec<u8>) {
        if !self.sh.carrier.load(Ordering::Acquire) {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let caps = self.sh.cfg.caps.offloads;
        let refused = (off.is_gso() && !caps.tso) || (off.needs_csum() && !caps.tx_csum);
        if refused {
            self.sh.counters.tx_malformed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.sh.cfg.wire == WireMode::Afpacket {
            // Whole, but on the wire as the segments it stands for.
            let bytes = if off.is_gso() {
                let hdr = offload::header_len(frame).unwrap_or(usize::from(off.hdr_len));
                superframe_wire_bytes(frame.len(), hdr, off.gso_size.into())
            } else {
                wire_bytes(frame.len())
            };
            self.occupy(bytes);
            self.afpacket_send(frame, off);
            return;
        }
        if off.is_gso() {
            match offload::segment_tcp(frame, &off, seg, |s| self.wire_out(s)) {
                Ok(n) => {
                    self.sh.counters.tx_tso_segments.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(_) => {
                    self.sh.counters.tx_malformed.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        if off.needs_csum()
            && !offload::complete_csum(frame, off.csum_start.into(), off.csum_offset.into())
        {
            self.sh.counters.tx_malformed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.wire_out(frame);
    }

    /// Rebuilds the engine's filter lookup if the driver changed filters.
    fn refresh_filters(&mut self) {
        let g = self.sh.filters_gen.load(Ordering::Acquire);
        if g != self.filters_gen {
            let t = self.sh.filters.lock().unwrap();
            self.filters = t.values().map(|f| (f.mac, (f.first_queue, f.queues))).collect();
            self.filters_gen = g;
        }
    }

    /// The RX queue a frame lands on: its destination MAC's filter group,
    /// else RSS over the port (queue 0 on a device without RSS).
    fn rx_queue_for(&self, frame: &[u8]) -> u16 {
        let hash = flow_hash(frame);
        if let Some(dst) = frame.get(..6)
            && let Some(&(first, n)) = self.filters.get(<&[u8; 6]>::try_from(dst).unwrap())
        {
            return first + (hash % u32::from(n)) as u16;
        }
        let lut = &self.sh.rss_lut;
        if lut.is_empty() {
            0
        } else {
            lut[(hash % lut.len() as u32) as usize].load(Ordering::Acquire)
        }
    }

    /// Places a frame off the wire into the RX ring it is steered to, or
    /// drops and counts it (queue disabled, too few free buffers, or a
    /// frame — or a superframe's segments — larger than the MTU the
    /// buffers were sized for: never a crash). A superframe from an
    /// afpacket wire (the kernel's GRO, as a virtio NIC's guest TSO
    /// hands it) spans several buffers; a complete TCP/UDP frame has its
    /// checksum verified and reported when RX checksumming is on.
    fn deliver(&mut self, frame: &[u8], off: Offload) -> Delivery {
        self.deliver_at(frame, off, None)
    }

    /// As [`Self::deliver`], for a frame that may already lie in the
    /// posted buffers of queue `at` (see [`Self::receive_direct`]): if it
    /// is steered there, the device only describes it.
    fn deliver_at(&mut self, frame: &[u8], mut off: Offload, at: Option<usize>) -> Delivery {
        if let Some(vid) = crate::vlan::vid(frame)
            && !self.sh.vlan_filter.passes(vid)
        {
            self.sh.counters.rx_dropped.fetch_add(1, Ordering::Relaxed);
            return Delivery::Dropped;
        }
        self.refresh_filters();
        let q = self.sh.tx_queues() + self.rx_queue_for(frame) as usize;
        let Some(ring) = self.live[q].as_ref() else {
            self.sh.counters.rx_dropped.fetch_add(1, Ordering::Relaxed);
            return Delivery::Dropped;
        };
        let unit = if off.is_gso() {
            // The kernel's hdr_len may cover more than the headers.
            offload::header_len(frame).unwrap_or(frame.len()) + usize::from(off.gso_size)
        } else {
            frame.len()
        };
        // A frame the whole ring could never hold (a superframe longer
        // than all its buffers) would wait for room for ever, and every
        // frame behind it with it.
        if unit > ring.buf_size() as usize || ring.slots_for(frame.len()) > ring.slots() {
            self.sh.counters.rx_oversize.fetch_add(1, Ordering::Relaxed);
            self.sh.counters.rx_dropped.fetch_add(1, Ordering::Relaxed);
            return Delivery::Dropped;
        }
        if !off.needs_csum() && !off.is_gso() && self.sh.rx_csum.load(Ordering::Relaxed) {
            match offload::verify_l4(frame) {
                Some(true) => off.flags |= offload::F_DATA_VALID,
                Some(false) => {
                    self.sh.counters.rx_csum_bad.fetch_add(1, Ordering::Relaxed);
                }
                None => {}
            }
        }
        // Only buffers the driver announced with a tail doorbell.
        let limit = self.sh.tails[q].load(Ordering::Acquire);
        // SAFETY: this engine thread is the only device-side user; `limit`
        // is a tail the driver published.
        // SAFETY: as above; a frame `at` this queue is the bytes at the
        // start of its posted run.
        let placed = unsafe {
            if at == Some(q) {
                ring.device_commit_upto(limit, frame.len(), off)
            } else {
                ring.device_fill_upto(limit, frame, off)
            }
        };
        if placed {
            self.last_rx_q = q;
            self.sh.counters.rx_frames.fetch_add(1, Ordering::Relaxed);
            self.sh.counters.rx_bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
            self.cause[self.sh.regs[q].vector.load(Ordering::Acquire) as usize] = true;
            Delivery::Delivered
        } else {
            Delivery::NoBuffer
        }
    }

    fn raise_interrupts(&mut self) {
        let now = Instant::now();
        let unit = self.sh.cfg.caps.throttle_unit;
        for v in 0..self.cause.len() {
            if !self.cause[v] {
                continue;
            }
            let bit = 1u64 << v;
            if self.sh.irq_masked.load(Ordering::SeqCst) & bit != 0 {
                // Held until unmasked; the unmask wakes the engine if
                // it sees the bit. Re-read after setting it: an unmask in
                // between may have missed it.
                self.sh.irq_held.fetch_or(bit, Ordering::SeqCst);
                if self.sh.irq_masked.load(Ordering::SeqCst) & bit != 0 {
                    continue;
                }
                self.sh.irq_held.fetch_and(!bit, Ordering::SeqCst);
            }
            let interval = unit * self.sh.throttle[v].load(Ordering::Acquire);
            match self.last_fire[v] {
                Some(last) if now < last + interval => {
                    if !self.fire_scheduled[v] {
                        self.fire_scheduled[v] = true;
                        self.timers
                            .push(Reverse((last + interval, Timer::Fire { vector: v as u16 })));
                    }
                }
                _ => {
                    self.cause[v] = false;
                    self.last_fire[v] = Some(now);
                    self.sh.counters.interrupts.fetch_add(1, Ordering::Relaxed);
                    // The TX completions of the vector's queues are written
                    // back with its interrupt, before the handler can run
                    // (and after it is counted: whoever sees the write-back
                    // sees the count).
                    let mut wb = std::mem::take(&mut self.wb_by_vector[v]);
                    for &q in &wb {
                        self.wb_listed[q] = false;
                        if let Some(d) = &self.live[q] {
                            d.device_write_back();
                        }
                    }
                    wb.clear();
                    self.wb_by_vector[v] = wb;
                    // SeqCst against a release delivering on its own
                    // thread, which clears `irq_here` and then takes what
                    // is pending: one of the two sees the other.
                    self.sh.irq_pending.fetch_or(1 << v, Ordering::SeqCst);
                    if self.sh.irq_here.load(Ordering::SeqCst) & bit == 0
                        && let Some(t) = self.sh.irq_thread.get()
                    {
                        t.unpark();
                    }
                }
            }
        }
    }

    /// Puts one complete frame on a wire that is not afpacket.
    fn wire_out(&mut self, frame: &mut [u8]) {
        self.occupy(wire_bytes(frame.len()));
        match self.sh.cfg.wire {
            WireMode::Sink | WireMode::Afpacket => {}
            WireMode::Loopback => self.reflect(frame),
            WireMode::Reflector => {
                let (dst, src) = frame.split_at_mut(6);
                if src.len() >= 6 {
                    dst.swap_with_slice(&mut src[..6]);
                }
                self.reflect(frame);
            }
            WireMode::Cable => match self.sh.peer.get() {
                // SAFETY: this engine thread is the only driver-side user
                // of its peer's inbox.
                Some(p) => unsafe {
                    if p.inbox.free() < p.inbox.slots_for(frame.len()) {
                        p.inbox.driver_reclaim();
                    }
                    if p.inbox.driver_push_frame(frame, Offload::NONE) {
                        self.peer_pushed = true;
                    } else {
                        self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                },
                None => {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }

    /// Whether a loopback or reflector port's receive packet buffer has
    /// room for what the next frame sent brings back (a superframe's
    /// segments included); other wires always have. Without room the port
    /// stops sending — flow control, as a PAUSE from the link partner
    /// does — until the driver takes what arrived: a frame that comes back
    /// is never dropped for want of room, however long the host is slow.
    fn reflect_room(&self) -> bool {
        /// Segments of the largest superframe at a small MSS.
        const ROOM: u32 = 128;
        if !matches!(self.sh.cfg.wire, WireMode::Loopback | WireMode::Reflector) {
            return true;
        }
        let inbox = &self.sh.inbox;
        if inbox.free() < ROOM {
            // SAFETY: as in `reflect`: this thread is the inbox's only
            // producer.
            unsafe { inbox.driver_reclaim() };
        }
        inbox.free() >= ROOM
    }

    /// A frame coming back to this port (loopback, reflector): straight
    /// into its RX ring while that has buffers and nothing waits before
    /// it; otherwise into the port's receive packet buffer, in order
    /// behind what already waits there, as any frame off a wire, so it
    /// waits for RX buffers rather than being dropped while the host is
    /// slow. What waits is moved on first, as buffers allow: one transmit
    /// pass can send far more than the buffer holds. Flow control
    /// ([`Self::reflect_room`]) keeps the buffer from overflowing; if it
    /// does all the same (a superframe of more segments than the room
    /// kept), the wire drops and counts.
    fn reflect(&mut self, frame: &[u8]) {
        if self.sh.inbox.device_owned() > 0 {
            self.receive_wire();
        }
        if self.sh.inbox.device_owned() == 0
            && self.deliver(frame, Offload::NONE) != Delivery::NoBuffer
        {
            return;
        }
        let inbox = &self.sh.inbox;
        // SAFETY: a loopback or reflector port has no cable and no
        // afpacket socket: this engine thread is its inbox's only
        // producer (and, in `receive_wire`, its only consumer).
        let pushed = unsafe {
            if inbox.free() < inbox.slots_for(frame.len()) {
                inbox.driver_reclaim();
            }
            inbox.driver_push_frame(frame, Offload::NONE)
        };
        if !pushed {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Receives what arrived over the wire. A frame whose RX ring has too
    /// few buffers posted waits in the inbox — the device's receive
    /// packet buffer, with flow control towards the link partner — until
    /// the driver posts more (its RX doorbell wakes the engine); when the
    /// inbox is full, the wire drops and counts.
    fn receive_wire(&mut self) -> bool {
        let inbox = Arc::clone(&self.sh.inbox);
        if inbox.device_owned() == 0 {
            return false;
        }
        let carrier = self.sh.carrier.load(Ordering::Acquire);
        let mut scratch = std::mem::take(&mut self.wire_scratch);
        // SAFETY: this engine thread is the inbox's only device-side user.
        let n = unsafe {
            inbox.device_take(ENGINE_BUDGET, &mut scratch, |f, off| {
                if carrier {
                    self.deliver(f, off) != Delivery::NoBuffer
                } else {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    true
                }
            })
        };
        self.wire_scratch = scratch;
        if n > 0 {
            // As in `transmit`: a drain waiter may be watching the inbox.
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.sh.drain_waiters.load(Ordering::SeqCst) > 0 {
                self.sh.events.notify();
            }
        }
        n > 0
    }

    /// Sends a frame with its virtio-net header on the afpacket socket.
    fn afpacket_send(&self, frame: &[u8], off: Offload) {
        let sent =
            self.sh.packet.get().is_some_and(|fd| afpacket::send(fd.as_raw_fd(), frame, off));
        if !sent {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads what arrived on an afpacket wire, up to a budget, a batch per
    /// system call (`recvmmsg`): each frame
    /// goes straight into its RX ring, or, when that has too few buffers
    /// posted or frames already wait, into the receive packet buffer
    /// behind them. While anything waits there the socket is left alone:
    /// its own buffer holds what comes (and what overflows it, the kernel
    /// counts, and so do we).
    fn receive_packet(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(sock) = self.sh.packet.get().map(AsRawFd::as_raw_fd) else { return false };
        let inbox = Arc::clone(&self.sh.inbox);
        let mut bufs = std::mem::take(&mut self.packet_buf);
        bufs.resize(PACKET_BATCH * PACKET_SLOT, 0);
        let mut n = 0;
        let mut backlog = false;
        while n < ENGINE_BUDGET && inbox.device_owned() == 0 {
            match self.receive_direct(sock) {
                Some(true) => {
                    n += 1;
                    continue;
                }
                Some(false) => break, // the socket is empty
                None => {}
            }
            let (reads, got) = afpacket::recv_batch(sock, &mut bufs);
            if got == 0 {
                break;
            }
            for (i, m) in reads.iter().take(got).enumerate() {
                n += 1;
                let len = m.len.min(PACKET_SLOT);
                if len <= VNET_HDR_LEN {
                    continue;
                }
                if !self.sh.carrier.load(Ordering::Acquire) {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if m.truncated {
                    self.oversize_off_the_wire();
                    continue;
                }
                let slot = &bufs[i * PACKET_SLOT..i * PACKET_SLOT + len];
                let mut off =
                    Offload::from_vnet(slot[..VNET_HDR_LEN].try_into().expect("10 bytes"));
                let mut frame = &slot[VNET_HDR_LEN..];
                // A tag the kernel took off goes back where the wire had it.
                let mut tagged = Vec::new();
                if let Some((tci, tpid)) = m.vlan
                    && tpid == crate::vlan::TPID
                {
                    off = crate::vlan::push_tci(frame, off, tci, &mut tagged);
                    frame = &tagged;
                }
                self.take_packet(frame, off, None);
            }
            if got < PACKET_BATCH {
                break; // the socket is empty
            }
            backlog = true;
        }
        // Frames the socket dropped because it was full: lost on the way
        // in, so counted (reading the statistics resets them). Only a
        // socket with a backlog overflows, and a full batch says there is
        // one; otherwise they are read every STATS_EVERY, not on every
        // lone frame (a system call on a ping's path).
        let due = self.packet_stats_at.is_none_or(|t| t.elapsed() >= STATS_EVERY);
        if n > 0 && (backlog || due) {
            let lost = afpacket::packet_drops(sock);
            self.sh.counters.wire_dropped.fetch_add(lost, Ordering::Relaxed);
            self.packet_stats_at = Some(Instant::now());
        }
        self.packet_buf = bufs;
        n > 0
    }

    /// A frame off an afpacket wire larger than the device reads (a
    /// superframe beyond 64 KiB, as BIG TCP makes): the socket cut it
    /// short, so it is dropped whole and counted, never delivered cut.
    fn oversize_off_the_wire(&mut self) {
        self.sh.counters.rx_oversize.fetch_add(1, Ordering::Relaxed);
        self.sh.counters.rx_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// One frame off an afpacket wire: straight into its RX ring, unless
    /// frames already wait in the receive packet buffer (then behind
    /// them). `at` is the queue in whose posted buffers it already lies.
    fn take_packet(&mut self, frame: &[u8], off: Offload, at: Option<usize>) {
        let inbox = Arc::clone(&self.sh.inbox);
        if inbox.device_owned() == 0 && self.deliver_at(frame, off, at) != Delivery::NoBuffer {
            self.rx_direct = (frame.len() >= DIRECT_MIN).then_some(self.last_rx_q);
            return;
        }
        self.rx_direct = None;
        // SAFETY: an afpacket port has no cable: this engine thread is its
        // inbox's only producer (and, in `receive_wire`, its only
        // consumer).
        let pushed = unsafe {
            if inbox.free() < inbox.slots_for(frame.len()) {
                inbox.driver_reclaim();
            }
            inbox.driver_push_frame(frame, off)
        };
        if !pushed {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// While large frames (GSO superframes) come off the afpacket wire,
    /// reads the next one straight into the posted RX buffers of the
    /// queue the last one went to — the device writing into the buffers
    /// the driver posted, one copy less than through the batch buffer.
    /// Should the frame belong to another queue (its headers decide:
    /// filters, RSS), it is copied there from these buffers, which stay
    /// the device's. None when not reading this way (no large frame
    /// last, or too few consecutive buffers posted for the largest
    /// frame); else whether a frame was read.
    fn receive_direct(&mut self, sock: std::os::fd::RawFd) -> Option<bool> {
        let q = self.rx_direct?;
        let ring = self.live.get(q)?.as_ref()?;
        let limit = self.sh.tails[q].load(Ordering::Acquire);
        // SAFETY: this engine thread is the only device-side user; `limit`
        // is a tail the driver published.
        let (ptr, room) = unsafe { ring.device_posted_run(limit) };
        if room < PACKET_SLOT - VNET_HDR_LEN {
            return None;
        }
        // No more than a batch slot takes: a frame is dropped, or not, the
        // same whichever way it is read.
        let room = room.min(PACKET_SLOT - VNET_HDR_LEN);
        let mut hdr = [0u8; VNET_HDR_LEN];
        // SAFETY: `ptr` is `room` bytes of posted buffers the device owns,
        // in one piece; nothing else touches them until the head moves.
        let Some(m) = (unsafe { afpacket::recv_into(sock, &mut hdr, ptr, room) }) else {
            return Some(false);
        };
        let len = m.len.min(VNET_HDR_LEN + room);
        if len <= VNET_HDR_LEN {
            return Some(true);
        }
        if !self.sh.carrier.load(Ordering::Acquire) {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
            return Some(true);
        }
        if m.truncated {
            // Not committed: the buffers stay posted for the next frame.
            self.oversize_off_the_wire();
            return Some(true);
        }
        let mut off = Offload::from_vnet(&hdr);
        // SAFETY: the kernel wrote these bytes into the device's buffers,
        // which nothing else touches until the head moves past them.
        let frame = unsafe { std::slice::from_raw_parts(ptr, len - VNET_HDR_LEN) };
        if let Some((tci, tpid)) = m.vlan
            && tpid == crate::vlan::TPID
        {
            // The tag goes back where the wire had it: no longer in place.
            let mut tagged = Vec::new();
            off = crate::vlan::push_tci(frame, off, tci, &mut tagged);
            self.take_packet(&tagged, off, None);
        } else {
            self.take_packet(frame, off, Some(q));
        }
        Some(true)
    }
}

/// The flow hash the emulated RSS uses: FNV-1a over what identifies a flow.
/// IPv4 and IPv6: the addresses and, for TCP and UDP, the ports (as real
/// RSS hashes them). Other frames: the Ethernet header and the first 12
/// payload bytes, which for netadm's test frames are the stream and flow
/// ids — never the sequence number, so a flow stays on one queue.
pub fn flow_hash(frame: &[u8]) -> u32 {
    use crate::hash::{FNV_SEED, fmix, fnv1a};
    let get = |r: std::ops::Range<usize>| frame.get(r).unwrap_or(&[]);
    let h = match frame.get(12..14) {
        Some([0x08, 0x00]) => {
            let ihl = usize::from(frame.get(14).map_or(5, |b| b & 0x0f)) * 4;
            // A fragment's ports are not in all its pieces: a datagram's
            // pieces go by the addresses, together.
            let whole = frame.get(20..22).is_some_and(|b| b[0] & 0x3f == 0 && b[1] == 0);
            let l4 = whole && matches!(frame.get(23), Some(6 | 17));
            let h = fnv1a(FNV_SEED, get(26..34));
            if l4 { fnv1a(h, get(14 + ihl..14 + ihl + 4)) } else { h }
        }
        Some([0x86, 0xdd]) => {
            let l4 = matches!(frame.get(20), Some(6 | 17));
            let h = fnv1a(FNV_SEED, get(22..54));
            if l4 { fnv1a(h, get(54..58)) } else { h }
        }
        _ => fnv1a(FNV_SEED, get(0..26)),
    };
    fmix(h)
}

//! The emulated-hardware core both device classes are built on.
//!
//! A [`Device`] is the hardware half of a driver crate: registers the driver
//! writes and reads, and an engine thread that does what silicon would. It
//! is honest about what real hardware costs and forbids:
//!
//! - Queue enable/disable requests are acknowledged asynchronously after
//!   [`EmuConfig::ack_latency`], many queues in parallel.
//! - Errata are enforced ([`crate::Errata`]): a TX disable without the
//!   pre-disable notice, or an enable inside the re-enable gap, hangs the
//!   queue and counts a fault, as the real device would misbehave.
//! - A ring can only be (re)programmed while its queue is disabled.
//! - A doorbell write costs the writing CPU [`EmuConfig::doorbell_cost`]
//!   (an uncached MMIO write) and wakes the engine if it is parked.
//! - Interrupts are raised per MSI-X vector, throttled per vector, and
//!   delivered on a separate interrupt thread, concurrently with the engine.
//! - The device learns of new descriptors only from a tail doorbell: it
//!   latches the tail the driver published when the doorbell is written,
//!   for TX and RX queues alike, and goes no further.
//! - TX completions are written back (the ring's `done` index) when the
//!   queue's vector raises its moderated interrupt, so a slow moderation
//!   timer leaves the driver without free descriptors, as on hardware.
//! - Every frame occupies the wire for its bytes at the port's speed
//!   ([`EmuConfig::speed_mbps`]): the engine sends nothing before the wire
//!   is free.
//!
//! The engine thread parks when idle; doorbells and control writes wake it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::dma::DmaRing;
use crate::offload::{self, Offload, VNET_HDR_LEN};
use crate::types::{Caps, Dir, HwStats, InterruptHandler, NicError, QueueId};
use crate::wake::Parker;

/// Where frames the device transmits go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WireMode {
    /// Frames leave and are counted; nothing comes back.
    #[default]
    Sink,
    /// MAC loopback: every transmitted frame is received again by this
    /// device, steered by RSS where the device has it.
    Loopback,
    /// The far end echoes every frame back with source and destination MAC
    /// swapped (testpmd's macswap): a switch stand-in for load tests.
    Reflector,
    /// A cable to another emulated port ([`Device::cable`]); until it is
    /// connected, frames are lost as on an unplugged port.
    Cable,
    /// A host interface through an `AF_PACKET` socket
    /// ([`Device::attach_afpacket`]): what the port sends leaves on it,
    /// what arrives on it the port receives.
    Afpacket,
}

/// How long a device thread keeps looking for work (yielding the CPU
/// between looks) after its last piece of work before it parks: like
/// NAPI's busy polling, it saves the wake-up on a busy link and costs
/// nothing on an idle one.
const LINGER: Duration = Duration::from_micros(50);

/// Frames one `recvmmsg(2)` reads off an afpacket wire at most, and the
/// room for each: a virtio-net header and the largest superframe.
const PACKET_BATCH: usize = 8;
const PACKET_SLOT: usize = VNET_HDR_LEN + 65536 + 1024;
/// A frame off an afpacket wire at least this long (a GSO superframe)
/// makes the next read go straight into the posted buffers of the RX
/// queue it went to; a shorter one returns reads to the batch.
const DIRECT_MIN: usize = 16 * 1024;

/// Frames a wire holds in flight towards a port before it drops them.
const WIRE_SLOTS: u32 = 4096;

/// Bytes a frame occupies on the wire besides those in its buffer: the
/// FCS the MAC appends (4), the preamble and start delimiter (8) and the
/// inter-frame gap (12).
pub const WIRE_OVERHEAD: u64 = 4 + 8 + 12;

/// Shortest frame the MAC sends, before its FCS: shorter ones are padded.
pub const MIN_FRAME: u64 = 60;

/// Bytes a frame of `len` bytes (as the driver queued it, without FCS)
/// occupies on the wire: padding to the 60-byte minimum, FCS, preamble and
/// inter-frame gap. A 64-byte frame (with FCS) takes 84, which at 1 Gb/s
/// is 1.488 Mpps; netadm's 64-byte test frames have no FCS yet and take 88.
pub fn wire_bytes(len: usize) -> u64 {
    (len as u64).max(MIN_FRAME) + WIRE_OVERHEAD
}

/// Bytes a TCP superframe of `len` bytes with `hdr` bytes of headers,
/// cut into segments of `gso_size` payload bytes, occupies on the wire:
/// every segment with its own headers and framing.
pub fn superframe_wire_bytes(len: usize, hdr: usize, gso_size: usize) -> u64 {
    let payload = len.saturating_sub(hdr);
    if gso_size == 0 || payload == 0 {
        return wire_bytes(len);
    }
    let full = payload / gso_size;
    let rest = payload % gso_size;
    full as u64 * wire_bytes(hdr + gso_size) + if rest > 0 { wire_bytes(hdr + rest) } else { 0 }
}

/// How long a full TX ring of `slots` frames of the largest size `mtu`
/// allows takes to leave on a wire of `speed_mbps`: what a TX queue's
/// disable may have to wait for, since it drains first.
pub fn ring_drain_time(slots: u32, mtu: u32, speed_mbps: u64) -> Duration {
    let bits = u64::from(slots) * wire_bytes(mtu as usize + 14) * 8;
    Duration::from_nanos((bits * 1000).div_ceil(speed_mbps.max(1)))
}

/// Most frames of `len` bytes per second a wire of `speed_mbps` carries.
pub fn line_rate_pps(speed_mbps: u64, len: usize) -> f64 {
    speed_mbps as f64 * 1e6 / (wire_bytes(len) * 8) as f64
}

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

/// How to build an emulated device.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    /// What the device is and can do.
    pub caps: Caps,
    /// Time from a queue enable/disable request to its acknowledgement.
    pub ack_latency: Duration,
    /// CPU cost of one doorbell (uncached MMIO) write.
    pub doorbell_cost: Duration,
    /// Where transmitted frames go.
    pub wire: WireMode,
    /// Link speed in Mb/s: every frame occupies the wire for its bytes
    /// ([`wire_bytes`]) at this rate. At least 1.
    pub speed_mbps: u64,
}

/// A hardware MAC filter: frames to `mac` go to RX queues
/// `first_queue .. first_queue + queues`, spread by the flow hash. This is
/// how a VNIC gets a ring group of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacFilter {
    /// Destination MAC matched.
    pub mac: [u8; 6],
    /// First RX queue of the group.
    pub first_queue: u16,
    /// Queues in the group (at least 1).
    pub queues: u16,
}

/// Most frames the engine moves per queue before looking at other work.
const ENGINE_BUDGET: u32 = 256;

struct QueueRegs {
    /// QENA_REQ: what the driver asked for.
    req: AtomicBool,
    /// QENA_STAT: what the device has acknowledged.
    stat: AtomicBool,
    /// Nanoseconds since epoch of the TX pre-disable notice; 0 = none.
    pre_disable_ns: AtomicU64,
    /// Nanoseconds since epoch of the last acknowledged disable; 0 = never.
    disabled_ns: AtomicU64,
    /// MSI-X vector the queue's interrupt causes go to.
    vector: AtomicU16,
    /// Queue context: the programmed ring.
    ring: Mutex<Option<Arc<DmaRing>>>,
}

#[derive(Default)]
struct Counters {
    tx_bytes: AtomicU64,
    rx_bytes: AtomicU64,
    wire_dropped: AtomicU64,
    tx_frames: AtomicU64,
    rx_frames: AtomicU64,
    rx_dropped: AtomicU64,
    rx_oversize: AtomicU64,
    rx_csum_bad: AtomicU64,
    tx_tso_segments: AtomicU64,
    tx_malformed: AtomicU64,
    doorbells: AtomicU64,
    interrupts: AtomicU64,
    fault_no_pre_disable: AtomicU64,
    fault_reenable_too_soon: AtomicU64,
    fault_no_ring: AtomicU64,
}

/// A generation counter with a condition variable: the device bumps it on
/// every acknowledgement; waiters re-check their predicate under its lock,
/// so no wake-up is lost.
#[derive(Default)]
struct Events {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Events {
    fn notify(&self) {
        *self.generation.lock().unwrap() += 1;
        self.cv.notify_all();
    }

    fn wait_until(&self, deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
        let mut g = self.generation.lock().unwrap();
        loop {
            if done() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self.cv.wait_timeout(g, deadline - now).unwrap().0;
        }
    }
}

enum Ctl {
    Enable(usize),
    Disable(usize),
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Ack { q: usize, on: bool },
    Fire { vector: u16 },
}

struct Shared {
    cfg: EmuConfig,
    epoch: Instant,
    regs: Box<[QueueRegs]>,
    ctl: Mutex<Vec<Ctl>>,
    doorbell_pending: Box<[AtomicU64]>,
    /// Tail registers, by queue slot: the tail each queue's last doorbell
    /// announced. The device uses descriptors up to here, never beyond.
    tails: Box<[AtomicU32]>,
    /// The engine is waiting for the wire: TX doorbells need not wake it
    /// (it looks at them when the wire is free).
    tx_paced: AtomicBool,
    throttle: Box<[AtomicU32]>,
    rss_lut: Box<[AtomicU16]>,
    filters: Mutex<BTreeMap<u16, MacFilter>>,
    /// The VLAN filter table (i40e-class; off on others).
    vlan_filter: crate::vlan::FilterTable,
    /// Bumped on every filter write; the engine rebuilds its lookup table.
    filters_gen: AtomicU64,
    events: Events,
    drain_waiters: AtomicUsize,
    irq_pending: AtomicU64,
    irq_handler: RwLock<Option<InterruptHandler>>,
    /// Wakes the engine thread (doorbells, control writes, a cable peer).
    engine_wake: Arc<Parker>,
    irq_thread: OnceLock<Thread>,
    shutdown: AtomicBool,
    counters: Counters,
    /// Frames arriving over a cable: the peer's engine is the only
    /// producer (driver side), this device's engine the only consumer.
    inbox: Arc<DmaRing>,
    /// Where this port's cable leads, once connected.
    peer: OnceLock<Peer>,
    /// Link carrier: a cut wire neither sends nor receives.
    carrier: AtomicBool,
    /// The AF_PACKET socket of an afpacket wire, once attached: the
    /// engine thread sends on it and reads it.
    packet: OnceLock<std::os::fd::OwnedFd>,
    /// RX checksum reporting enabled (where the device has it).
    rx_csum: AtomicBool,
}

/// The far end of a cable.
struct Peer {
    inbox: Arc<DmaRing>,
    engine: Arc<Parker>,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        // +1 so that 0 can mean "never".
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    fn wake_engine(&self) {
        self.engine_wake.unpark();
    }

    fn tx_queues(&self) -> usize {
        self.cfg.caps.tx_queues as usize
    }
}

/// An emulated NIC: registers plus an engine thread and an interrupt thread.
pub struct Device {
    sh: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("class", &self.sh.cfg.caps.class).finish_non_exhaustive()
    }
}

impl Device {
    /// Powers on a device: starts its engine and interrupt threads.
    pub fn new(cfg: EmuConfig, name: &str) -> Self {
        let caps = &cfg.caps;
        let nq = caps.tx_queues as usize + caps.rx_queues as usize;
        let sh = Arc::new(Shared {
            epoch: Instant::now(),
            regs: (0..nq)
                .map(|_| QueueRegs {
                    req: AtomicBool::new(false),
                    stat: AtomicBool::new(false),
                    pre_disable_ns: AtomicU64::new(0),
                    disabled_ns: AtomicU64::new(0),
                    vector: AtomicU16::new(0),
                    ring: Mutex::new(None),
                })
                .collect(),
            ctl: Mutex::new(Vec::new()),
            doorbell_pending: (0..caps.tx_queues.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            tails: (0..nq).map(|_| AtomicU32::new(0)).collect(),
            tx_paced: AtomicBool::new(false),
            throttle: (0..caps.vectors).map(|_| AtomicU32::new(0)).collect(),
            rss_lut: (0..caps.rss_table_size)
                .map(|i| AtomicU16::new(i % caps.rx_queues.max(1)))
                .collect(),
            filters: Mutex::new(BTreeMap::new()),
            vlan_filter: crate::vlan::FilterTable::default(),
            filters_gen: AtomicU64::new(0),
            events: Events::default(),
            drain_waiters: AtomicUsize::new(0),
            irq_pending: AtomicU64::new(0),
            irq_handler: RwLock::new(None),
            engine_wake: Arc::new(Parker::new().expect("an eventfd for the device engine")),
            irq_thread: OnceLock::new(),
            shutdown: AtomicBool::new(false),
            counters: Counters::default(),
            inbox: Arc::new(
                DmaRing::new(
                    WIRE_SLOTS,
                    crate::dma::buf_size_for_mtu(caps.max_mtu),
                    &crate::DmaAccount::new(),
                )
                .expect("wire buffer"),
            ),
            peer: OnceLock::new(),
            carrier: AtomicBool::new(true),
            packet: OnceLock::new(),
            rx_csum: AtomicBool::new(caps.offloads.rx_csum),
            cfg,
        });
        let engine = {
            let sh = Arc::clone(&sh);
            thread::Builder::new()
                .name(format!("{name}-hw"))
                .spawn(move || Engine::new(sh).run())
                .expect("spawn device engine thread")
        };
        let irq = {
            let sh = Arc::clone(&sh);
            thread::Builder::new()
                .name(format!("{name}-irq"))
                .spawn(move || irq_thread(&sh))
                .expect("spawn device interrupt thread")
        };
        let _ = sh.irq_thread.set(irq.thread().clone());
        Self { sh, threads: vec![engine, irq] }
    }

    /// The device's capabilities.
    pub fn caps(&self) -> &Caps {
        &self.sh.cfg.caps
    }

    /// The link speed the wire serialises at, in Mb/s.
    pub fn speed_mbps(&self) -> u64 {
        self.sh.cfg.speed_mbps
    }

    fn slot(&self, q: QueueId) -> Result<usize, NicError> {
        let caps = &self.sh.cfg.caps;
        let count = match q.dir {
            Dir::Tx => caps.tx_queues,
            Dir::Rx => caps.rx_queues,
        };
        if q.index >= count {
            return Err(NicError::NoSuchQueue { queue: q, count });
        }
        Ok(match q.dir {
            Dir::Tx => q.index as usize,
            Dir::Rx => caps.tx_queues as usize + q.index as usize,
        })
    }

    fn push_ctl(&self, c: Ctl) {
        self.sh.ctl.lock().unwrap().push(c);
        self.sh.wake_engine();
    }

    /// Writes the queue context (its ring). Refused while the queue is
    /// requested or reported enabled.
    pub fn write_ring(&self, q: QueueId, ring: Option<Arc<DmaRing>>) -> Result<(), NicError> {
        let s = self.slot(q)?;
        let r = &self.sh.regs[s];
        if r.req.load(Ordering::Acquire) || r.stat.load(Ordering::Acquire) {
            return Err(NicError::QueueEnabled { queue: q });
        }
        // The device reads the context from here; it holds no copy of its
        // own while the queue is disabled, so clearing it releases the ring.
        let mut ctx = r.ring.lock().unwrap();
        // A new context resets the tail register to the ring's head:
        // nothing is the device's until a doorbell says so.
        self.sh.tails[s].store(ring.as_ref().map_or(0, |d| d.head()), Ordering::Release);
        *ctx = ring;
        Ok(())
    }

    /// Writes QENA_REQ.
    pub fn write_enable_request(&self, q: QueueId, on: bool) -> Result<(), NicError> {
        let s = self.slot(q)?;
        self.sh.regs[s].req.store(on, Ordering::Release);
        self.push_ctl(if on { Ctl::Enable(s) } else { Ctl::Disable(s) });
        Ok(())
    }

    /// Reads QENA_STAT.
    pub fn read_enable_status(&self, q: QueueId) -> bool {
        self.slot(q).is_ok_and(|s| self.sh.regs[s].stat.load(Ordering::Acquire))
    }

    /// Writes the TX pre-disable notice register for TX queue `q`.
    pub fn write_tx_pre_disable(&self, q: u16) -> Result<(), NicError> {
        let s = self.slot(QueueId::tx(q))?;
        self.sh.regs[s].pre_disable_ns.store(self.sh.now_ns(), Ordering::Release);
        Ok(())
    }

    /// Writes the queue's interrupt vector map entry.
    pub fn write_vector_map(&self, q: QueueId, vector: u16) -> Result<(), NicError> {
        let s = self.slot(q)?;
        let count = self.sh.cfg.caps.vectors;
        if vector >= count {
            return Err(NicError::NoSuchVector { vector, count });
        }
        self.sh.regs[s].vector.store(vector, Ordering::Release);
        Ok(())
    }

    /// Writes a vector's interrupt throttle register, in device units.
    pub fn write_throttle(&self, vector: u16, units: u32) -> Result<(), NicError> {
        let caps = &self.sh.cfg.caps;
        let t = self
            .sh
            .throttle
            .get(vector as usize)
            .ok_or(NicError::NoSuchVector { vector, count: caps.vectors })?;
        if units > caps.throttle_max {
            return Err(NicError::OutOfRange {
                register: "interrupt throttle",
                value: units.into(),
                max: caps.throttle_max.into(),
            });
        }
        t.store(units, Ordering::Release);
        Ok(())
    }

    /// Writes RSS indirection table entry `index` to steer to RX queue `rxq`.
    pub fn write_rss_lut(&self, index: u16, rxq: u16) -> Result<(), NicError> {
        let caps = &self.sh.cfg.caps;
        if caps.rss_table_size == 0 {
            return Err(NicError::Unsupported { class: caps.class, feature: "RSS" });
        }
        self.slot(QueueId::rx(rxq))?;
        let e = self.sh.rss_lut.get(index as usize).ok_or(NicError::OutOfRange {
            register: "RSS table index",
            value: index.into(),
            max: u64::from(caps.rss_table_size) - 1,
        })?;
        e.store(rxq, Ordering::Release);
        Ok(())
    }

    /// Writes MAC filter slot `slot`: steer frames to `filter.mac` to its
    /// queue group, or clear the slot. Frames no filter matches are steered
    /// by RSS over the whole port.
    pub fn write_mac_filter(&self, slot: u16, filter: Option<MacFilter>) -> Result<(), NicError> {
        let caps = &self.sh.cfg.caps;
        if slot >= caps.mac_filters {
            return Err(NicError::OutOfRange {
                register: "MAC filter slot",
                value: slot.into(),
                max: u64::from(caps.mac_filters) - 1,
            });
        }
        if let Some(f) = &filter {
            let end = u32::from(f.first_queue) + u32::from(f.queues);
            if f.queues == 0 || end > u32::from(caps.rx_queues) {
                return Err(NicError::OutOfRange {
                    register: "MAC filter queue group end",
                    value: end.into(),
                    max: caps.rx_queues.into(),
                });
            }
        }
        let mut t = self.sh.filters.lock().unwrap();
        match filter {
            Some(f) => t.insert(slot, f),
            None => t.remove(&slot),
        };
        self.sh.filters_gen.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Turns VLAN filtering on or off: on, a tagged frame whose VID is not
    /// in the table is dropped (counted in `rx_dropped`).
    pub fn write_vlan_filter_enable(&self, on: bool) {
        self.sh.vlan_filter.enable(on);
    }

    /// Adds VID `vid` to the VLAN filter table, or removes it; the table
    /// holds [`crate::vlan::FILTER_ENTRIES`].
    pub fn write_vlan_filter(&self, vid: u16, on: bool) -> Result<(), NicError> {
        self.sh.vlan_filter.write(vid, on)
    }

    /// The VIDs in the VLAN filter table.
    pub fn vlan_filter_vids(&self) -> Vec<u16> {
        self.sh.vlan_filter.vids()
    }

    /// Writes the tail doorbell of queue `q` with the tail the driver has
    /// published on the queue's ring (the value a real tail write
    /// carries). TX: the device may send up to it; RX: buffers up to it
    /// are posted. Descriptors published after it stay the driver's as far
    /// as the device knows, until the next doorbell.
    pub fn write_tail(&self, q: QueueId) {
        spin_for(self.sh.cfg.doorbell_cost);
        self.sh.counters.doorbells.fetch_add(1, Ordering::Relaxed);
        let Ok(s) = self.slot(q) else { return };
        if let Some(r) = self.sh.regs[s].ring.lock().unwrap().as_ref() {
            self.sh.tails[s].store(r.tail(), Ordering::Release);
        }
        if q.dir == Dir::Tx {
            let i = q.index as usize;
            // SeqCst against the engine's `tx_paced` (see `transmit`).
            self.sh.doorbell_pending[i / 64].fetch_or(1 << (i % 64), Ordering::SeqCst);
            if !self.sh.tx_paced.load(Ordering::SeqCst) {
                self.sh.wake_engine();
            }
        } else if self.sh.inbox.device_owned() > 0 {
            // Buffers posted: frames waiting in the packet buffer may go.
            self.sh.wake_engine();
        }
    }

    /// Software interrupt trigger: raises `vector` now, unthrottled.
    pub fn write_sw_interrupt(&self, vector: u16) {
        if vector < self.sh.cfg.caps.vectors {
            self.sh.irq_pending.fetch_or(1 << vector, Ordering::AcqRel);
            if let Some(t) = self.sh.irq_thread.get() {
                t.unpark();
            }
        }
    }

    /// Turns receive checksum reporting on or off (ignored on a device
    /// without it).
    pub fn write_rx_csum(&self, on: bool) {
        self.sh.rx_csum.store(on && self.sh.cfg.caps.offloads.rx_csum, Ordering::Release);
    }

    /// Whether receive checksum reporting is on.
    pub fn rx_csum(&self) -> bool {
        self.sh.rx_csum.load(Ordering::Acquire)
    }

    /// Installs the interrupt handler.
    pub fn set_interrupt_handler(&self, h: Option<InterruptHandler>) {
        *self.sh.irq_handler.write().unwrap() = h;
    }

    /// Waits, event-driven, until every queue in `qs` reports `enabled`.
    pub fn wait_queues(
        &self,
        qs: &[QueueId],
        enabled: bool,
        deadline: Instant,
    ) -> Result<(), NicError> {
        let slots: Vec<usize> = qs.iter().map(|&q| self.slot(q)).collect::<Result<_, _>>()?;
        let regs = &self.sh.regs;
        let done = || slots.iter().all(|&s| regs[s].stat.load(Ordering::Acquire) == enabled);
        if self.sh.events.wait_until(deadline, done) {
            return Ok(());
        }
        let pending = qs
            .iter()
            .zip(&slots)
            .filter(|(_, s)| regs[**s].stat.load(Ordering::Acquire) != enabled)
            .map(|(q, _)| *q)
            .collect();
        Err(NicError::Timeout { enable: enabled, pending })
    }

    /// Waits, event-driven, until the device has consumed every frame
    /// handed to TX queues `qs`.
    pub fn wait_tx_drained(&self, qs: &[u16], deadline: Instant) -> Result<(), Vec<u16>> {
        let regs = &self.sh.regs;
        let tx = self.sh.tx_queues();
        let busy = |q: u16| {
            let i = q as usize;
            i < tx && regs[i].ring.lock().unwrap().as_ref().is_some_and(|r| r.device_owned() > 0)
        };
        self.sh.drain_waiters.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        // Make sure the engine looks at every queue at least once more.
        self.sh.wake_engine();
        let ok = self.sh.events.wait_until(deadline, || !qs.iter().any(|&q| busy(q)));
        self.sh.drain_waiters.fetch_sub(1, Ordering::AcqRel);
        if ok { Ok(()) } else { Err(qs.iter().copied().filter(|&q| busy(q)).collect()) }
    }

    /// Waits, event-driven, until the port's receive packet buffer (its
    /// inbox) holds nothing: every frame that came back or arrived has
    /// been placed in an RX ring. For a loopback or reflector port after
    /// [`Self::wait_tx_drained`], nothing it sent is still on its way.
    pub fn wait_inbox_empty(&self, deadline: Instant) -> bool {
        self.sh.drain_waiters.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.sh.wake_engine();
        let inbox = &self.sh.inbox;
        let ok = self.sh.events.wait_until(deadline, || inbox.device_owned() == 0);
        self.sh.drain_waiters.fetch_sub(1, Ordering::AcqRel);
        ok
    }

    /// Connects two ports with a cable: what either transmits, the other
    /// receives. Both must have been built with [`WireMode::Cable`]; each
    /// port has one cable, connected once.
    pub fn cable(a: &Device, b: &Device) -> Result<(), NicError> {
        // One lock for every cabling: the checks and both ends' setting are
        // one step, so no inbox ever gets two producers.
        static CABLING: Mutex<()> = Mutex::new(());
        let _g = CABLING.lock().unwrap();
        for d in [a, b] {
            if d.sh.cfg.wire != WireMode::Cable
                || d.sh.peer.get().is_some()
                || Arc::ptr_eq(&a.sh, &b.sh)
            {
                return Err(NicError::Unsupported {
                    class: d.sh.cfg.caps.class,
                    feature: "free cable port",
                });
            }
        }
        let end = |d: &Device| Peer {
            inbox: Arc::clone(&d.sh.inbox),
            engine: Arc::clone(&d.sh.engine_wake),
        };
        let _ = a.sh.peer.set(end(b));
        let _ = b.sh.peer.set(end(a));
        Ok(())
    }

    /// Wires the port to host interface `ifname` (in the calling thread's
    /// network namespace) through an `AF_PACKET` socket: promiscuous, not
    /// seeing its own transmissions. The engine thread reads it as it reads
    /// any wire: what arrives goes into an RX ring, or waits in the port's
    /// receive packet buffer (the inbox) when the ring has too few buffers
    /// posted; while frames wait there, the socket is not read, so its own
    /// buffer holds the rest (flow control, as towards a link partner).
    pub fn attach_afpacket(&self, ifname: &str) -> std::io::Result<()> {
        use std::os::fd::{FromRawFd, OwnedFd};
        if self.sh.cfg.wire != WireMode::Afpacket || self.sh.packet.get().is_some() {
            return Err(std::io::Error::other("not a free afpacket port"));
        }
        let c = std::ffi::CString::new(ifname).map_err(std::io::Error::other)?;
        // SAFETY: c is a valid C string.
        let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if index == 0 {
            return Err(std::io::Error::other(format!("no interface {ifname}")));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2); checked.
        let fd = unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(proto))
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll zeroed then filled; sizes are the struct's.
        let rc = unsafe {
            let mut sa: libc::sockaddr_ll = std::mem::zeroed();
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_protocol = proto;
            sa.sll_ifindex = index as i32;
            libc::bind(
                fd,
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Not seeing our own transmissions.
        setsockopt_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        // Every frame either way carries a virtio-net header: superframes
        // and partial checksums pass as they do between a veth's ends.
        setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
        // The kernel takes an 802.1Q tag off a frame as it arrives and
        // keeps it beside the frame: have it told (auxdata) so the tag is
        // put back, as the wire carried it.
        setsockopt_int(fd, libc::SOL_PACKET, PACKET_AUXDATA, 1)?;
        // Room for a burst of superframes while the reader is off the CPU
        // (the default, ~200 KiB, holds three); what overflows anyway is
        // read back from PACKET_STATISTICS and counted as wire drops.
        // FORCE needs CAP_NET_ADMIN; the plain option (capped by rmem_max)
        // is the fallback.
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20)
            .or_else(|_| setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 16 << 20))?;
        // SAFETY: packet_mreq for PACKET_MR_PROMISC on the interface.
        let rc = unsafe {
            let mut mr: libc::packet_mreq = std::mem::zeroed();
            mr.mr_ifindex = index as i32;
            mr.mr_type = libc::PACKET_MR_PROMISC as u16;
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mr as *const libc::packet_mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as u32,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let _ = self.sh.packet.set(sock);
        // The engine reads the socket itself: wake it for what arrived
        // while it slept (none, on a fresh socket; cheap either way).
        self.sh.wake_engine();
        Ok(())
    }

    /// Plugs or cuts the port's wire: without carrier nothing is sent or
    /// received (frames are dropped and counted).
    pub fn set_carrier(&self, up: bool) {
        self.sh.carrier.store(up, Ordering::Release);
    }

    /// Whether the wire has carrier.
    pub fn carrier(&self) -> bool {
        self.sh.carrier.load(Ordering::Acquire)
    }

    /// A snapshot of the device's counters.
    pub fn stats(&self) -> HwStats {
        let c = &self.sh.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        HwStats {
            tx_frames: l(&c.tx_frames),
            tx_bytes: l(&c.tx_bytes),
            rx_bytes: l(&c.rx_bytes),
            wire_dropped: l(&c.wire_dropped),
            rx_frames: l(&c.rx_frames),
            rx_dropped: l(&c.rx_dropped),
            rx_oversize: l(&c.rx_oversize),
            rx_csum_bad: l(&c.rx_csum_bad),
            tx_tso_segments: l(&c.tx_tso_segments),
            tx_malformed: l(&c.tx_malformed),
            doorbells: l(&c.doorbells),
            interrupts: l(&c.interrupts),
            fault_no_pre_disable: l(&c.fault_no_pre_disable),
            fault_reenable_too_soon: l(&c.fault_reenable_too_soon),
            fault_no_ring: l(&c.fault_no_ring),
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.sh.shutdown.store(true, Ordering::Release);
        self.sh.wake_engine();
        if let Some(t) = self.sh.irq_thread.get() {
            t.unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// `PACKET_IGNORE_OUTGOING` from linux/if_packet.h (Linux 4.20), which
/// this libc does not export at its top level.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// `PACKET_AUXDATA` from linux/if_packet.h: a `tpacket_auxdata` control
/// message with each frame read.
const PACKET_AUXDATA: libc::c_int = 8;

/// `TP_STATUS_VLAN_VALID` from linux/if_packet.h: the frame came with a
/// VLAN tag, which the kernel took off (`tp_vlan_tci`).
const TP_STATUS_VLAN_VALID: u32 = 0x10;

/// `TP_STATUS_VLAN_TPID_VALID`: `tp_vlan_tpid` is set.
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;

/// `struct tpacket_auxdata` from linux/if_packet.h.
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// Room for one auxdata control message, aligned for `cmsghdr`.
type AuxBuf = [u64; 8];

/// The VLAN tag control word (and TPID) the kernel took off a frame read
/// from a packet socket, from its auxdata control message.
fn auxdata_vlan(m: &libc::msghdr) -> Option<(u16, u16)> {
    // SAFETY: walking the control messages recvmmsg filled in, within
    // msg_controllen; the data read is copied out unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                let a: TpacketAuxdata =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<TpacketAuxdata>());
                if a.tp_status & TP_STATUS_VLAN_VALID == 0 {
                    return None;
                }
                let tpid = if a.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    a.tp_vlan_tpid
                } else {
                    crate::vlan::TPID
                };
                return Some((a.tp_vlan_tci, tpid));
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

/// setsockopt with an int value, its result checked.
fn setsockopt_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: setsockopt reading one c_int from a valid pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// Frames an `AF_PACKET` socket dropped since the last call
/// (PACKET_STATISTICS, which resets on read).
fn packet_drops(sock: std::os::fd::RawFd) -> u64 {
    let mut st = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: getsockopt into a tpacket_stats of the length given.
    let rc = unsafe {
        libc::getsockopt(
            sock,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if rc < 0 { 0 } else { u64::from(st.tp_drops) }
}

/// Busy-waits for `d`: the CPU time an uncached MMIO write stalls a core.
/// This is a cost model, not a delay: it is what the write costs.
fn spin_for(d: Duration) {
    if d.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn irq_thread(sh: &Shared) {
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
        let handler = sh.irq_handler.read().unwrap().clone();
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

struct Engine {
    sh: Arc<Shared>,
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
}

impl Engine {
    fn new(sh: Arc<Shared>) -> Self {
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
            sh,
        }
    }

    fn run(mut self) {
        crate::wake::short_slices();
        // Timers of a few µs must not be rounded up by the default 50 µs
        // timer slack: the ack latency is part of the hardware model.
        // SAFETY: PR_SET_TIMERSLACK only affects the calling thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
        let mut last_work = Instant::now();
        while !self.sh.shutdown.load(Ordering::Acquire) {
            let mut busy = self.control();
            busy |= self.timers_due();
            busy |= self.transmit();
            busy |= self.receive_wire();
            busy |= self.receive_packet();
            self.raise_interrupts();
            let now = Instant::now();
            if busy {
                last_work = now;
                continue;
            }
            // A short wait for the wire lingers like any other pause after
            // work; once the wire has been the limit for longer, waiting
            // for it is a timed sleep: the frames cannot go before their
            // time anyway, and a saturated wire must not keep a core busy.
            let linger = match (self.wire_wake, self.paced_since) {
                (Some(_), Some(since)) => now - since < LINGER,
                _ => now - last_work < LINGER,
            };
            if linger {
                thread::yield_now();
                continue;
            }
            let next = match (self.timers.peek().map(|Reverse((t, _))| *t), self.wire_wake) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // An afpacket wire wakes the engine when a frame arrives,
            // unless frames already wait for RX buffers (then the RX
            // doorbell does, and the socket holds the rest).
            let wire = self.sh.packet.get().filter(|_| self.sh.inbox.device_owned() == 0);
            let wire = wire.map(std::os::fd::AsRawFd::as_raw_fd);
            match next {
                Some(t) => {
                    let now = Instant::now();
                    if t > now {
                        self.sh.engine_wake.park(wire, Some(t - now));
                    }
                }
                None => self.sh.engine_wake.park(wire, None),
            }
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

    /// Sends a frame with its virtio-net header on the afpacket socket.
    fn afpacket_send(&self, frame: &[u8], off: Offload) {
        let Some(fd) = self.sh.packet.get() else {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let hdr = off.to_vnet();
        let mut iov = [
            libc::iovec { iov_base: hdr.as_ptr() as *mut _, iov_len: hdr.len() },
            libc::iovec { iov_base: frame.as_ptr() as *mut _, iov_len: frame.len() },
        ];
        // SAFETY: a zeroed msghdr pointing at two valid iovecs that
        // outlive the call; our own socket.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = 2;
            libc::sendmsg(std::os::fd::AsRawFd::as_raw_fd(fd), &msg, libc::MSG_DONTWAIT)
        };
        if n < 0 {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
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
        while n < ENGINE_BUDGET && inbox.device_owned() == 0 {
            match self.receive_direct(sock) {
                Some(true) => {
                    n += 1;
                    continue;
                }
                Some(false) => break, // the socket is empty
                None => {}
            }
            let base = bufs.as_mut_ptr();
            let mut iov: [libc::iovec; PACKET_BATCH] = std::array::from_fn(|i| libc::iovec {
                // SAFETY: within `bufs`, which holds PACKET_BATCH slots.
                iov_base: unsafe { base.add(i * PACKET_SLOT) }.cast(),
                iov_len: PACKET_SLOT,
            });
            // SAFETY: mmsghdr is plain data; all-zero is a valid value.
            let mut msgs: [libc::mmsghdr; PACKET_BATCH] = unsafe { std::mem::zeroed() };
            let mut aux = [AuxBuf::default(); PACKET_BATCH];
            for ((m, v), a) in msgs.iter_mut().zip(iov.iter_mut()).zip(aux.iter_mut()) {
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
                m.msg_hdr.msg_control = a.as_mut_ptr().cast();
                m.msg_hdr.msg_controllen = std::mem::size_of::<AuxBuf>();
            }
            // SAFETY: PACKET_BATCH headers, each with one iovec into a
            // distinct slot of `bufs`, all outliving the call.
            let got = unsafe {
                libc::recvmmsg(
                    sock,
                    msgs.as_mut_ptr(),
                    PACKET_BATCH as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if got <= 0 {
                break;
            }
            for (i, m) in msgs.iter().take(got as usize).enumerate() {
                n += 1;
                let len = (m.msg_len as usize).min(PACKET_SLOT);
                if len <= VNET_HDR_LEN {
                    continue;
                }
                if !self.sh.carrier.load(Ordering::Acquire) {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                    self.oversize_off_the_wire();
                    continue;
                }
                let slot = &bufs[i * PACKET_SLOT..i * PACKET_SLOT + len];
                let mut off =
                    Offload::from_vnet(slot[..VNET_HDR_LEN].try_into().expect("10 bytes"));
                let mut frame = &slot[VNET_HDR_LEN..];
                // A tag the kernel took off goes back where the wire had it.
                let mut tagged = Vec::new();
                if let Some((tci, tpid)) = auxdata_vlan(&m.msg_hdr)
                    && tpid == crate::vlan::TPID
                {
                    off = crate::vlan::push_tci(frame, off, tci, &mut tagged);
                    frame = &tagged;
                }
                self.take_packet(frame, off, None);
            }
            if (got as usize) < PACKET_BATCH {
                break; // the socket is empty
            }
        }
        if n > 0 {
            // Frames the socket dropped because it was full: lost on the
            // way in, so counted. (Reading the statistics resets them.)
            self.sh.counters.wire_dropped.fetch_add(packet_drops(sock), Ordering::Relaxed);
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
        let mut iov = [
            libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: VNET_HDR_LEN },
            libc::iovec { iov_base: ptr.cast(), iov_len: room },
        ];
        let mut aux = AuxBuf::default();
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iov = iov.as_mut_ptr();
        m.msg_iovlen = 2;
        m.msg_control = aux.as_mut_ptr().cast();
        m.msg_controllen = std::mem::size_of::<AuxBuf>();
        // SAFETY: the header's iovecs point at `hdr` and at posted buffers
        // the device owns (`room` bytes of one piece), all outliving the
        // call.
        let got = unsafe { libc::recvmsg(sock, &mut m, libc::MSG_DONTWAIT) };
        if got <= 0 {
            return Some(false);
        }
        let len = (got as usize).min(VNET_HDR_LEN + room);
        if len <= VNET_HDR_LEN {
            return Some(true);
        }
        if !self.sh.carrier.load(Ordering::Acquire) {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
            return Some(true);
        }
        if m.msg_flags & libc::MSG_TRUNC != 0 {
            // Not committed: the buffers stay posted for the next frame.
            self.oversize_off_the_wire();
            return Some(true);
        }
        let mut off = Offload::from_vnet(&hdr);
        // SAFETY: the kernel wrote these bytes into the device's buffers,
        // which nothing else touches until the head moves past them.
        let frame = unsafe { std::slice::from_raw_parts(ptr, len - VNET_HDR_LEN) };
        if let Some((tci, tpid)) = auxdata_vlan(&m)
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
        if unit > ring.buf_size() as usize {
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
                    self.sh.irq_pending.fetch_or(1 << v, Ordering::AcqRel);
                    if let Some(t) = self.sh.irq_thread.get() {
                        t.unpark();
                    }
                }
            }
        }
    }
}

/// The flow hash the emulated RSS uses: FNV-1a over what identifies a flow.
/// IPv4 and IPv6: the addresses and, for TCP and UDP, the ports (as real
/// RSS hashes them). Other frames: the Ethernet header and the first 12
/// payload bytes, which for netadm's test frames are the stream and flow
/// ids — never the sequence number, so a flow stays on one queue.
pub fn flow_hash(frame: &[u8]) -> u32 {
    fn fnv(h: u32, bytes: &[u8]) -> u32 {
        bytes.iter().fold(h, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
    }
    const SEED: u32 = 0x811c_9dc5;
    let get = |r: std::ops::Range<usize>| frame.get(r).unwrap_or(&[]);
    let h = match frame.get(12..14) {
        Some([0x08, 0x00]) => {
            let ihl = usize::from(frame.get(14).map_or(5, |b| b & 0x0f)) * 4;
            let l4 = matches!(frame.get(23), Some(6 | 17));
            let h = fnv(SEED, get(26..34));
            if l4 { fnv(h, get(14 + ihl..14 + ihl + 4)) } else { h }
        }
        Some([0x86, 0xdd]) => {
            let l4 = matches!(frame.get(20), Some(6 | 17));
            let h = fnv(SEED, get(22..54));
            if l4 { fnv(h, get(54..58)) } else { h }
        }
        _ => fnv(SEED, get(0..26)),
    };
    // MurmurHash3's finaliser: queues are picked by the low bits, where
    // FNV is weak.
    let mut h = h;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_take_their_bytes_and_framing_on_the_wire() {
        // Padded to 60, plus FCS, preamble and gap.
        assert_eq!(wire_bytes(14), 84);
        assert_eq!(wire_bytes(60), 84);
        assert_eq!(wire_bytes(64), 88);
        assert_eq!(wire_bytes(1514), 1538);
        // 1 GbE: 1.488 Mpps of minimum frames; 64 bytes before FCS: 1.420.
        assert!((line_rate_pps(1_000, 60) - 1_488_095.2).abs() < 1.0);
        assert!((line_rate_pps(1_000, 64) - 1_420_454.5).abs() < 1.0);
    }

    #[test]
    fn a_superframe_takes_the_wire_time_of_its_segments() {
        // 54 bytes of headers and 20000 of payload in 1448-byte segments:
        // 13 full ones and one of 1176, each with its headers again.
        let len = 54 + 20_000;
        let want = 13 * wire_bytes(54 + 1448) + wire_bytes(54 + 1176);
        assert_eq!(superframe_wire_bytes(len, 54, 1448), want);
        assert!(want > wire_bytes(len), "headers repeated per segment");
        // Exact multiples have no short last segment.
        assert_eq!(superframe_wire_bytes(54 + 2 * 1448, 54, 1448), 2 * wire_bytes(54 + 1448));
        // Not really cut: one frame.
        assert_eq!(superframe_wire_bytes(100, 54, 0), wire_bytes(100));
    }

    #[test]
    fn a_full_ring_drains_in_its_wire_time() {
        // 1024 frames of 1538 wire bytes at 1 Gb/s: 12.6 ms.
        assert_eq!(ring_drain_time(1024, 1500, 1_000), Duration::from_nanos(1024 * 1538 * 8));
        assert_eq!(ring_drain_time(64, 1500, 10), Duration::from_nanos(64 * 1538 * 8 * 100));
    }
}

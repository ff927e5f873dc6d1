//! The device half the driver sees: registers (queue enables and their
//! acknowledgements, queue contexts, tail doorbells, the vector map and
//! throttles, RSS, MAC and VLAN filters, carrier) and the state they share
//! with the device's engine and interrupt threads.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use super::engine::{Engine, irq_thread};
use super::wire::WIRE_SLOTS;
use super::{EmuConfig, MacFilter};
use crate::dma::DmaRing;
use crate::types::{Caps, Dir, HwStats, InterruptHandler, NicError, QueueId};
use crate::wake::Parker;

pub(super) struct QueueRegs {
    /// QENA_REQ: what the driver asked for.
    pub(super) req: AtomicBool,
    /// QENA_STAT: what the device has acknowledged.
    pub(super) stat: AtomicBool,
    /// Nanoseconds since epoch of the TX pre-disable notice; 0 = none.
    pub(super) pre_disable_ns: AtomicU64,
    /// Nanoseconds since epoch of the last acknowledged disable; 0 = never.
    pub(super) disabled_ns: AtomicU64,
    /// MSI-X vector the queue's interrupt causes go to.
    pub(super) vector: AtomicU16,
    /// Queue context: the programmed ring.
    pub(super) ring: Mutex<Option<Arc<DmaRing>>>,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) tx_bytes: AtomicU64,
    pub(super) rx_bytes: AtomicU64,
    pub(super) wire_dropped: AtomicU64,
    pub(super) tx_frames: AtomicU64,
    pub(super) rx_frames: AtomicU64,
    pub(super) rx_dropped: AtomicU64,
    pub(super) rx_oversize: AtomicU64,
    pub(super) rx_csum_bad: AtomicU64,
    pub(super) tx_tso_segments: AtomicU64,
    pub(super) tx_malformed: AtomicU64,
    pub(super) doorbells: AtomicU64,
    pub(super) interrupts: AtomicU64,
    pub(super) fault_no_pre_disable: AtomicU64,
    pub(super) fault_reenable_too_soon: AtomicU64,
    pub(super) fault_no_ring: AtomicU64,
}

/// A generation counter with a condition variable: the device bumps it on
/// every acknowledgement; waiters re-check their predicate under its lock,
/// so no wake-up is lost.
#[derive(Default)]
pub(super) struct Events {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Events {
    pub(super) fn notify(&self) {
        *self.generation.lock().unwrap() += 1;
        self.cv.notify_all();
    }

    pub(super) fn wait_until(&self, deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
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

pub(super) enum Ctl {
    Enable(usize),
    Disable(usize),
}

pub(super) struct Shared {
    pub(super) cfg: EmuConfig,
    epoch: Instant,
    pub(super) regs: Box<[QueueRegs]>,
    pub(super) ctl: Mutex<Vec<Ctl>>,
    pub(super) doorbell_pending: Box<[AtomicU64]>,
    /// Tail registers, by queue slot: the tail each queue's last doorbell
    /// announced. The device uses descriptors up to here, never beyond.
    pub(super) tails: Box<[AtomicU32]>,
    /// The engine is waiting for the wire: TX doorbells need not wake it
    /// (it looks at them when the wire is free).
    pub(super) tx_paced: AtomicBool,
    pub(super) throttle: Box<[AtomicU32]>,
    pub(super) rss_lut: Box<[AtomicU16]>,
    pub(super) filters: Mutex<BTreeMap<u16, MacFilter>>,
    /// The VLAN filter table (i40e-class; off on others).
    pub(super) vlan_filter: crate::vlan::FilterTable,
    /// Bumped on every filter write; the engine rebuilds its lookup table.
    pub(super) filters_gen: AtomicU64,
    pub(super) events: Events,
    pub(super) drain_waiters: AtomicUsize,
    pub(super) irq_pending: AtomicU64,
    pub(super) irq_handler: RwLock<Option<InterruptHandler>>,
    /// Wakes the engine thread (doorbells, control writes, a cable peer).
    pub(super) engine_wake: Arc<Parker>,
    pub(super) irq_thread: OnceLock<Thread>,
    pub(super) shutdown: AtomicBool,
    pub(super) counters: Counters,
    /// Frames arriving over a cable: the peer's engine is the only
    /// producer (driver side), this device's engine the only consumer.
    pub(super) inbox: Arc<DmaRing>,
    /// Where this port's cable leads, once connected.
    pub(super) peer: OnceLock<Peer>,
    /// Link carrier: a cut wire neither sends nor receives.
    pub(super) carrier: AtomicBool,
    /// The AF_PACKET socket of an afpacket wire, once attached: the
    /// engine thread sends on it and reads it.
    pub(super) packet: OnceLock<std::os::fd::OwnedFd>,
    /// RX checksum reporting enabled (where the device has it).
    pub(super) rx_csum: AtomicBool,
}

/// The far end of a cable.
pub(super) struct Peer {
    pub(super) inbox: Arc<DmaRing>,
    pub(super) engine: Arc<Parker>,
}

impl Shared {
    pub(super) fn now_ns(&self) -> u64 {
        // +1 so that 0 can mean "never".
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    pub(super) fn wake_engine(&self) {
        self.engine_wake.unpark();
    }

    pub(super) fn tx_queues(&self) -> usize {
        self.cfg.caps.tx_queues as usize
    }
}

/// An emulated NIC: registers plus an engine thread and an interrupt thread.
pub struct Device {
    pub(super) sh: Arc<Shared>,
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

    /// Reads a vector's interrupt throttle register, in device units.
    pub fn read_throttle(&self, vector: u16) -> Option<u32> {
        self.sh.throttle.get(vector as usize).map(|t| t.load(Ordering::Acquire))
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

//! The device as the driver sees it: its registers (queue enables and
//! their acknowledgements, queue contexts, tail doorbells, the vector map
//! and throttles, RSS, MAC and VLAN filters, receive checksums), the waits
//! on its events, its wire's plugs (a cable, an afpacket socket, carrier),
//! and power: on starts its engine and interrupt threads, drop stops them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::engine::{Engine, engine_thread, irq_thread};
use super::shared::{Ctl, EmuConfig, Peer, Shared};
use super::wire::WireMode;
use crate::dma::DmaRing;
use crate::types::{Caps, Dir, HwStats, InterruptHandler, MacFilter, NicError, QueueId};

/// The most descriptors a TX doorbell may carry for the writing thread to
/// run the device's pass itself (a ping, a TCP ACK, a request with its
/// header split off); more is a batch, which the engine thread moves.
const INLINE_DOORBELL: u32 = 8;

/// An emulated NIC: registers plus an engine thread and an interrupt thread.
pub struct Device {
    pub(super) sh: Arc<Shared>,
    /// The engine's state: its thread's, and a doorbell writer's while
    /// that thread sleeps.
    core: Arc<Mutex<Engine>>,
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
        let sh = Arc::new(Shared::new(cfg));
        let core = Arc::new(Mutex::new(Engine::new(Arc::clone(&sh))));
        let engine = {
            let (sh, core) = (Arc::clone(&sh), Arc::clone(&core));
            thread::Builder::new()
                .name(format!("{name}-hw"))
                .spawn(move || engine_thread(&sh, &core))
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
        Self { sh, core, threads: vec![engine, irq] }
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
        // Descriptors the device has yet to process on this queue.
        let mut waiting = 0;
        if let Some(r) = self.sh.regs[s].ring.lock().unwrap().as_ref() {
            let tail = r.tail();
            self.sh.tails[s].store(tail, Ordering::Release);
            // (Indices wrap: their difference is what the device owns.)
            waiting = tail.wrapping_sub(r.head());
        }
        if q.dir == Dir::Tx {
            let i = q.index as usize;
            // SeqCst against the engine's `tx_paced` (see `transmit`).
            self.sh.doorbell_pending[i / 64].fetch_or(1 << (i % 64), Ordering::SeqCst);
            if !self.sh.tx_paced.load(Ordering::SeqCst) {
                self.kick(waiting);
            }
        } else if self.sh.inbox.device_owned() > 0 {
            // Buffers posted: frames waiting in the packet buffer may go.
            self.sh.wake_engine();
        }
    }

    /// Has the device act on a TX doorbell for `waiting` descriptors:
    /// while the engine thread sleeps and the doorbell carries a lone
    /// request (at most [`INLINE_DOORBELL`] descriptors), the writing
    /// thread runs the engine's pass itself, under the engine's lock (as
    /// an emulator handles a trapped MMIO write on the vCPU that wrote
    /// it): a request's answer then waits for no thread's wake-up.
    /// Otherwise (a batch, a stream, or the engine busy) the engine
    /// thread is woken as for any write and does the device's work on
    /// its own CPU, as hardware does it beside the driver's.
    fn kick(&self, waiting: u32) {
        if waiting <= INLINE_DOORBELL
            && self.sh.engine_wake.is_parked()
            && let Ok(mut e) = self.core.try_lock()
        {
            e.pass_for_doorbell();
            if e.needs_engine_thread() {
                self.sh.wake_engine();
            }
            return;
        }
        self.sh.wake_engine();
    }

    /// Writes a vector's interrupt mask bit: a masked vector's causes stay
    /// pending; unmasking raises it if any are (after its throttle).
    pub fn write_interrupt_mask(&self, vector: u16, masked: bool) {
        if vector >= self.sh.cfg.caps.vectors || vector >= 64 {
            return;
        }
        let bit = 1u64 << vector;
        if masked {
            self.sh.irq_masked.fetch_or(bit, Ordering::SeqCst);
        } else {
            self.sh.irq_masked.fetch_and(!bit, Ordering::SeqCst);
            // SeqCst against the engine, which sets `irq_held` and then
            // reads the mask again.
            // A held interrupt is raised by a pass with nothing to move.
            if self.sh.irq_held.fetch_and(!bit, Ordering::SeqCst) & bit != 0 {
                self.kick(0);
            }
        }
    }

    /// Unmasks `vector` (and raises it from software if `raise`), and
    /// runs the interrupt handler on the calling thread for what that
    /// raises, rather than waking the interrupt thread: as Linux's busy
    /// poll, ending with work left, schedules its NAPI on the polling CPU.
    /// Raised interrupts are the device's as ever (its throttle, its TX
    /// write-backs at the interrupt); only where they are delivered
    /// differs. A busy poller releases its hold this way: the interrupt
    /// thread, woken just after the poller handed the kernel an answer,
    /// would otherwise run first on the CPU the answer's reader was woken
    /// on, and make it wait.
    pub fn release_interrupt(&self, vector: u16, raise: bool) {
        if vector >= self.sh.cfg.caps.vectors || vector >= 64 {
            return;
        }
        let bit = 1u64 << vector;
        self.sh.irq_here.fetch_or(bit, Ordering::SeqCst);
        self.write_interrupt_mask(vector, false);
        if raise {
            self.sh.irq_pending.fetch_or(bit, Ordering::SeqCst);
        }
        self.sh.irq_here.fetch_and(!bit, Ordering::SeqCst);
        // Raised from here on, it wakes the interrupt thread; raised
        // before, it is pending now, and this thread's to deliver.
        if self.sh.irq_pending.fetch_and(!bit, Ordering::SeqCst) & bit != 0 {
            if let Some(h) = self.sh.handler() {
                h(vector);
            }
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

    /// Plugs or cuts the port's wire: without carrier nothing is sent or
    /// received (frames are dropped and counted).
    pub fn set_carrier(&self, up: bool) {
        self.sh.carrier.store(up, Ordering::Release);
    }

    /// Whether the wire has carrier.
    pub fn carrier(&self) -> bool {
        self.sh.carrier.load(Ordering::Acquire)
    }

    /// Wires the port to host interface `ifname` (in the calling thread's
    /// network namespace) through an `AF_PACKET` socket: promiscuous, not
    /// seeing its own transmissions. The engine thread reads it as it reads
    /// any wire: what arrives goes into an RX ring, or waits in the port's
    /// receive packet buffer (the inbox) when the ring has too few buffers
    /// posted; while frames wait there, the socket is not read, so its own
    /// buffer holds the rest (flow control, as towards a link partner).
    pub fn attach_afpacket(&self, ifname: &str) -> std::io::Result<()> {
        if self.sh.cfg.wire != WireMode::Afpacket || self.sh.packet.get().is_some() {
            return Err(std::io::Error::other("not a free afpacket port"));
        }
        let sock = super::afpacket::open(ifname)?;
        let watch = super::afpacket::watcher(std::os::fd::AsRawFd::as_raw_fd(&sock))?;
        let _ = self.sh.packet_watch.set(watch);
        let _ = self.sh.packet.set(sock);
        // The engine reads the socket itself: wake it for what arrived
        // while it slept (none, on a fresh socket; cheap either way).
        self.sh.wake_engine();
        Ok(())
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

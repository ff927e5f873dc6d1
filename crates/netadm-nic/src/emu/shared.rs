//! What the device's threads share: the register file the driver writes
//! (queue enables, contexts, tails, throttles, RSS, filters), the control
//! writes waiting for the engine, the events waiters sleep on, the
//! counters, and the wire's ends (the receive packet buffer, a cable's far
//! end, an afpacket socket, carrier). `device` writes it for the
//! driver; `engine` acts on it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::wire::{WIRE_SLOTS, WireMode};
use crate::dma::DmaRing;
use crate::types::{Caps, InterruptHandler, MacFilter};
use crate::wake::Parker;

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
    /// ([`super::wire_bytes`]) at this rate. At least 1.
    pub speed_mbps: u64,
}

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
    /// Vectors the driver masked: not raised while their bit is set.
    pub(super) irq_masked: AtomicU64,
    /// Masked vectors with causes pending: raised when unmasked.
    pub(super) irq_held: AtomicU64,
    /// Vectors being released by a driver thread that delivers, itself,
    /// what the release raises ([`super::Device::release_interrupt`]):
    /// raised meanwhile, they do not wake the interrupt thread.
    pub(super) irq_here: AtomicU64,
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
    /// The engine thread's one-shot watch on that socket (an epoll).
    pub(super) packet_watch: OnceLock<std::os::fd::OwnedFd>,
    /// RX checksum reporting enabled (where the device has it).
    pub(super) rx_csum: AtomicBool,
}

/// The far end of a cable.
pub(super) struct Peer {
    pub(super) inbox: Arc<DmaRing>,
    pub(super) engine: Arc<Parker>,
}

impl Shared {
    /// The interrupt handler as installed now (none before the driver
    /// installs one).
    pub(super) fn handler(&self) -> Option<InterruptHandler> {
        self.irq_handler.read().unwrap().clone()
    }

    /// A device's state at power-on: every queue disabled with no ring,
    /// every vector unthrottled, RSS spread over the RX queues, no filters,
    /// carrier up.
    pub(super) fn new(cfg: EmuConfig) -> Self {
        let caps = &cfg.caps;
        let nq = caps.tx_queues as usize + caps.rx_queues as usize;
        Self {
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
            irq_masked: AtomicU64::new(0),
            irq_held: AtomicU64::new(0),
            irq_here: AtomicU64::new(0),
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
            packet_watch: OnceLock::new(),
            rx_csum: AtomicBool::new(caps.offloads.rx_csum),
            cfg,
        }
    }

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

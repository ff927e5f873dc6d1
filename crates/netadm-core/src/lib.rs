//! netadmd's logic: the single owner of link state.
//!
//! A [`Core`] holds the hardware (ports, drivers, ring engines), the running
//! configuration and the persistent one. Every mutating verb runs the same
//! pipeline, one at a time:
//!
//! 1. **validate** — parse and check the request against the running
//!    configuration; build the next configuration (and the next persistent
//!    one unless temporary). Nothing has changed yet.
//! 2. **plan** — derive, for every port, whether its rings must run and with
//!    which buffer size, before and after.
//! 3. **execute** — stop, reprogram and start rings where the plans differ,
//!    ports in parallel. If any step fails, every port is driven back to its
//!    old plan and the error is returned.
//! 4. **persist** — record the persistent configuration's change durably
//!    (appended to the journal, or the whole file replaced atomically; see
//!    `netadm_config::Store::append`); if that fails, the hardware is put
//!    back too.
//! 5. **commit** — swap in the new running configuration.
//!
//! Reads take the running configuration's lock only to clone it, so they
//! never wait behind a long mutation.

mod addrprop;
mod apply;
mod delta;
mod dhcp;
mod drift;
mod error;
mod groups;
mod hitless;
pub mod hw;
mod ifprop;
mod lacp;
mod links;
mod mirror;
mod ops;
mod proto;
mod qos;
mod report;
mod rows;
mod traffic;
mod view;
mod vlan;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use netadm_config::{HardwareConfig, LinkState, Store};
use netadm_model::{PropName, PropValue};
use netadm_nic::buf_size_for_mtu;
use netadm_rings::{OpReport, Strategy};

pub use error::{CoreError, ErrorKind};
/// The failpoint registry, for the fault-injection tests.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub use fail;
pub use hw::{Driver, Hardware, NicWrap, Port};
pub use links::{DEFAULT_MTU, Link, View};
pub use report::{ApplyReport, HistoryEntry, PlanStep, Report};
pub use rows::*;

/// Reports progress of a long operation: (phase, done, total).
pub type Progress<'a> = &'a (dyn Fn(&str, u32, u32) + Sync);

/// Most history entries kept.
const HISTORY: usize = 200;

/// What a port's rings should be doing under a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PortPlan {
    /// Rings run.
    active: bool,
    /// Buffer size they run with.
    buf: u32,
    /// How many rings the primary group runs (rings `0..rings`).
    rings: u16,
    /// VNIC ring groups on the port: (first ring, rings).
    groups: Vec<(u16, u16)>,
    /// i40e itr, atl1c rx-imt, atl1c tx-imt, as configured: `None` where
    /// the class has no such register or it is adaptive, `Some(value)`
    /// when fixed (itr in µs, the IMTs in 2 µs units).
    throttle: [Option<u32>; 3],
    /// Which of those three are adaptive.
    adaptive: [bool; 3],
    /// xmit-batch: the port's own, or its aggregation's.
    xmit_batch: bool,
    /// rx-csum: the port's own, or its aggregation's.
    rx_csum: bool,
}

/// The state owner.
pub struct Core {
    /// Shared with the LACP thread, which moves flows when a member
    /// becomes usable or unusable.
    hw: Arc<Hardware>,
    store: Option<Store>,
    running: RwLock<Arc<LinkState>>,
    persisted: Mutex<Arc<LinkState>>,
    mutation: Mutex<()>,
    /// Set by [`Core::quiesce`]: mutations arriving after it are refused.
    stopping: std::sync::atomic::AtomicBool,
    history: Mutex<VecDeque<HistoryEntry>>,
    seq: Mutex<u64>,
    traffic: traffic::Traffic,
    /// The kernel mirror (TAP devices), when this netadmd has one.
    mirror: Option<mirror::Mirror>,
    /// VNIC ring groups, as the running configuration has them.
    groups: Mutex<groups::Groups>,
    /// The last configuration the ports were driven to and their plans
    /// under it (with `groups`): a change plans again only the ports it
    /// touches ([`delta::ports_touched`]).
    planned: Mutex<Option<(LinkState, Vec<PortPlan>)>>,
    /// VNICs by MAC address (create-vnic refuses a MAC in use on the same
    /// ports), kept by the difference.
    macs: Mutex<delta::MacIndex>,
    /// LACP on the ports of aggregations that run it.
    lacp: lacp::Lacp,
    /// Each aggregation's transmit path, kept in step with its members
    /// (shared with the LACP thread, as `hw`).
    aggr_tx: Arc<traffic::AggrTxs>,
    /// `maxbw` and `priority` of the links senders use.
    qos: qos::Qos,
    /// The armed commit-confirmed checkpoint (`apply --confirm-timeout`),
    /// also on disk beside `links.toml`; the condition variable wakes
    /// [`Core::wait_checkpoint_due`] when it is armed or disarmed.
    checkpoint: Mutex<Option<apply::Checkpoint>>,
    checkpoint_cv: std::sync::Condvar,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("hw", &self.hw).finish_non_exhaustive()
    }
}

/// Timing of one mutation as it runs.
pub(crate) struct Timing {
    pub(crate) started: Instant,
    mark: Instant,
    phases: Vec<(String, u64)>,
    counts: BTreeMap<String, u64>,
    notes: Vec<String>,
}

impl Timing {
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        Self { started: now, mark: now, phases: vec![], counts: BTreeMap::new(), notes: vec![] }
    }

    /// Closes the phase that ran since the last mark.
    pub(crate) fn phase(&mut self, name: &str) {
        let now = Instant::now();
        let us = (now - self.mark).as_micros() as u64;
        self.mark = now;
        match self.phases.iter_mut().find(|(n, _)| n == name) {
            Some((_, t)) => *t += us,
            None => self.phases.push((name.to_owned(), us)),
        }
    }

    fn count(&mut self, name: &str, n: u64) {
        *self.counts.entry(name.to_owned()).or_default() += n;
    }

    /// Folds a ring engine's report in: its counts, and its phases nested
    /// under `parent` (the slowest port's figure when ports ran in
    /// parallel).
    fn absorb(&mut self, parent: &str, rep: &OpReport) {
        let c = &rep.counts;
        self.count("rings_started", c.rings_started.into());
        self.count("rings_stopped", c.rings_stopped.into());
        self.count("dma_allocated", c.dma_allocated);
        self.count("dma_freed", c.dma_freed);
        self.count("rx_discarded", c.rx_discarded);
        for p in &rep.phases {
            let name = format!("{parent}/{}", p.name);
            let us = p.elapsed.as_micros() as u64;
            match self.phases.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t = (*t).max(us),
                None => self.phases.push((name, us)),
            }
        }
    }

    /// Adds an operator-facing note.
    pub(crate) fn note(&mut self, s: impl Into<String>) {
        self.notes.push(s.into());
    }

    pub(crate) fn finish(self, op: &str) -> Report {
        Report {
            op: op.to_owned(),
            total_us: self.started.elapsed().as_micros() as u64,
            phases: self.phases,
            counts: self.counts,
            notes: self.notes,
        }
    }
}

/// What a verb asks of the pipeline.
pub(crate) struct Change {
    /// The next running configuration.
    pub running: LinkState,
    /// The next persistent configuration, when it changes and differs
    /// from `running`.
    pub persisted: Option<LinkState>,
    /// The persistent configuration was the running one and changes as it
    /// does: `running` is also the next persistent configuration (one
    /// `apply`, and one copy, for both).
    pub same: bool,
}

impl Core {
    /// Powers on the hardware, loads the persistent configuration from
    /// `store` (if any) and brings the hardware to it.
    pub fn start(
        cfg: &HardwareConfig,
        store: Option<Store>,
        strategy: Strategy,
    ) -> Result<Self, CoreError> {
        Self::start_with(cfg, store, strategy, None, false)
    }

    /// [`Core::start`], with each port's driver wrapped by `wrap` first
    /// (fault injection in tests).
    pub fn start_with(
        cfg: &HardwareConfig,
        store: Option<Store>,
        strategy: Strategy,
        wrap: Option<&hw::NicWrap>,
        kernel_mirror: bool,
    ) -> Result<Self, CoreError> {
        let hw = Arc::new(Hardware::power_on(cfg, strategy, wrap)?);
        let persisted = match &store {
            Some(s) => s.load().map_err(|e| CoreError::persistence(e.to_string()))?,
            None => LinkState::default(),
        };
        let core = Self {
            hw,
            store,
            running: RwLock::new(Arc::new(LinkState::default())),
            persisted: Mutex::new(Arc::new(LinkState::default())),
            mutation: Mutex::new(()),
            stopping: std::sync::atomic::AtomicBool::new(false),
            history: Mutex::new(VecDeque::new()),
            seq: Mutex::new(0),
            traffic: traffic::Traffic::default(),
            aggr_tx: Arc::default(),
            qos: qos::Qos::default(),
            groups: Mutex::new(BTreeMap::new()),
            planned: Mutex::new(None),
            macs: Mutex::new(delta::MacIndex::default()),
            mirror: if kernel_mirror { Some(mirror::Mirror::open()?) } else { None },
            lacp: lacp::Lacp::start(),
            checkpoint: Mutex::new(None),
            checkpoint_cv: std::sync::Condvar::new(),
        };
        for p in core.hw.ports() {
            p.classifier.set_slow_handler(Some(core.lacp.receiver(p.device.as_str())));
        }
        // A member LACP lets distribute, or stops, has its flows moved,
        // drained first, on a thread of their own: a drain never holds up
        // the LACP thread's rounds. It ends when the LACP thread's hook (the
        // sender) goes with the core; weak: the core owns both.
        let (kick, kicked) = std::sync::mpsc::channel::<()>();
        let (hw, txs) = (Arc::downgrade(&core.hw), Arc::downgrade(&core.aggr_tx));
        std::thread::Builder::new()
            .name("netadm-resettle".into())
            .spawn(move || {
                while kicked.recv().is_ok() {
                    while kicked.try_recv().is_ok() {}
                    let (Some(hw), Some(txs)) = (hw.upgrade(), txs.upgrade()) else { return };
                    traffic::resettle(&hw, &txs);
                }
            })
            .map_err(|e| CoreError::internal(format!("cannot start the resettle thread: {e}")))?;
        core.lacp.on_change(Box::new(move || {
            let _ = kick.send(());
        }));
        // Replay: the persistent configuration must still make sense on this
        // hardware, then it becomes the running one.
        ops::check_state(&View { hw: &core.hw, st: &persisted }).map_err(|e| {
            let path =
                core.store.as_ref().map(|s| s.path().display().to_string()).unwrap_or_default();
            CoreError::persistence(format!("{path}: {e}"))
        })?;
        let mut t = Timing::new();
        core.execute(&LinkState::default(), &persisted, &mut t, &|_, _, _| {})?;
        // One allocation for both while they are the same: a verb then
        // applies its change once (see ops::change).
        let shared = Arc::new(persisted.clone());
        *core.running.write().unwrap() = shared.clone();
        *core.persisted.lock().unwrap() = shared;
        core.sync_datapath();
        core.sync_kernel(&LinkState::default(), &persisted, &mut t)?;
        // A checkpoint armed by the last netadmd is honoured: it rolls back
        // at its deadline (at once if that has passed) unless confirmed.
        if let Some(s) = &core.store
            && let Some((deadline_ms, state)) =
                s.load_checkpoint().map_err(|e| CoreError::persistence(e.to_string()))?
        {
            *core.checkpoint.lock().unwrap() = Some(apply::Checkpoint {
                deadline: UNIX_EPOCH + Duration::from_millis(deadline_ms),
                state: Arc::new(state),
            });
        }
        // A journal left by the last netadmd (killed, or stopped before it
        // could compact) is folded into links.toml now.
        if let Some(s) = &core.store
            && s.journal_pending()
        {
            s.save(&persisted).map_err(|e| CoreError::persistence(e.to_string()))?;
        }
        Ok(core)
    }

    /// The hardware.
    pub fn hardware(&self) -> &Hardware {
        &self.hw
    }

    /// A snapshot of the running configuration.
    pub fn running(&self) -> Arc<LinkState> {
        self.running.read().unwrap().clone()
    }

    /// A snapshot of the persistent configuration.
    pub fn persisted(&self) -> LinkState {
        LinkState::clone(&self.persisted.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A shared snapshot of the persistent configuration.
    pub(crate) fn persisted_arc(&self) -> Arc<LinkState> {
        self.persisted.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The ring lifecycle strategy of the first port (all share it).
    pub fn strategy(&self) -> Strategy {
        self.hw.ports().first().map(|p| p.engine.strategy()).unwrap_or_default()
    }

    /// Recent mutations, oldest first.
    pub fn history(&self) -> Vec<HistoryEntry> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }

    /// Waits for the mutation in progress, if any, to finish (it persists
    /// before it returns) and keeps new ones out: for a clean shutdown.
    /// The journal of changes is folded into `links.toml` first, so a
    /// stopped netadmd leaves that one file. A mutation that arrives later
    /// gets a typed `Busy` error at once (it used to wait for a lock never
    /// released, so the daemon never exited).
    pub fn quiesce(&self) {
        {
            let _m = self.mutation.lock().unwrap_or_else(PoisonError::into_inner);
            if self.stopping.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            if let Some(s) = &self.store
                && s.journal_pending()
            {
                // Best effort: should this fail, the journal still holds
                // every change and the next start replays it.
                let _ = s.save(&self.persisted_arc());
            }
        }
        // The checkpoint's waiter stops waiting (the checkpoint stays on
        // disk for the next netadmd). Taken after the mutation lock is let
        // go: apply and rollback hold the checkpoint's lock while they wait
        // for the mutation lock, so holding both here would deadlock.
        drop(self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner));
        self.checkpoint_cv.notify_all();
    }

    /// Takes the mutation lock, unless the daemon is stopping. A lock a
    /// panic once poisoned is taken all the same: the panic was caught
    /// and the hardware driven back ([`Core::mutate`]).
    pub(crate) fn lock_mutation(&self) -> Result<std::sync::MutexGuard<'_, ()>, CoreError> {
        let g = self.mutation.lock().unwrap_or_else(PoisonError::into_inner);
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(CoreError::busy("netadmd is stopping: no further changes are accepted"));
        }
        Ok(g)
    }

    /// Changes the ring lifecycle strategy (runtime only).
    pub fn set_strategy(&self, s: &str) -> Result<Report, CoreError> {
        let strategy: Strategy = s.parse().map_err(|e: netadm_rings::StrategyParseError| {
            CoreError::invalid_argument(e.to_string())
        })?;
        let _m = self.lock_mutation()?;
        let t = Timing::new();
        self.hw.set_strategy(strategy);
        let r = t.finish("set-strategy");
        self.record(&format!("set-strategy {s}"), Ok(&r), r.total_us);
        Ok(r)
    }

    /// Runs one mutation through the pipeline. `f` validates and builds the
    /// change from the running and persistent configurations.
    pub(crate) fn mutate(
        &self,
        op: &str,
        subject: &str,
        progress: Progress<'_>,
        f: impl FnOnce(&View<'_>, &LinkState, &mut Timing) -> Result<Change, CoreError>,
    ) -> Result<Report, CoreError> {
        self.mutate_with(op, subject, progress, false, f)
    }

    /// [`Core::mutate`]; with `verify`, the rings are also read back from
    /// the hardware after they changed ([`Core::verify_rings`]), before
    /// anything persists: a mismatch is a failure like any other, and
    /// everything is put back.
    pub(crate) fn mutate_with(
        &self,
        op: &str,
        subject: &str,
        progress: Progress<'_>,
        verify: bool,
        f: impl FnOnce(&View<'_>, &LinkState, &mut Timing) -> Result<Change, CoreError>,
    ) -> Result<Report, CoreError> {
        let _m = self.lock_mutation()?;
        let mut t = Timing::new();
        let cur = self.running();
        // The next configuration, once validated: what a panic after it
        // may have half applied.
        let next = Mutex::new(None);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.mutate_locked(&mut t, progress, &next, verify, f)
        }))
        .unwrap_or_else(|p| {
            // A bug: report it, and put the hardware back as the running
            // configuration (unchanged: commit is the last step) says.
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let next = next.into_inner().unwrap_or_else(PoisonError::into_inner);
            let restored = match next {
                // Rings and kernel, from the next configuration back.
                Some(next) => self.put_back(&next, &cur).and(self.restore_hardware(&cur)),
                None => self.restore_hardware(&cur),
            };
            // The panic may have come after links.toml or the journal took
            // the change: the file is written again from the persistent
            // configuration, unchanged like the running one.
            // (Should saving panic again, that is reported, not raised.)
            let saved = match &self.store {
                Some(s) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    s.save(&self.persisted_arc()).map_err(|e| e.to_string())
                }))
                .unwrap_or_else(|_| Err("it panicked too".into())),
                None => Ok(()),
            };
            Err(CoreError::internal(format!(
                "{op} {subject} failed: {what}; {}{}",
                match restored {
                    Ok(()) => "the hardware was put back".to_string(),
                    Err(e) => format!("putting the hardware back failed: {}", e.message),
                },
                saved
                    .err()
                    .map(|e| format!("; rewriting the configuration failed: {e}"))
                    .unwrap_or_default()
            )))
        });
        // In step with whatever configuration runs now, new or old.
        self.sync_datapath();
        let total = t.started.elapsed().as_micros() as u64;
        let res = res.map(|()| t.finish(op));
        self.record(&format!("{op} {subject}"), res.as_ref(), total);
        res
    }

    fn mutate_locked(
        &self,
        t: &mut Timing,
        progress: Progress<'_>,
        next: &Mutex<Option<Arc<LinkState>>>,
        verify: bool,
        f: impl FnOnce(&View<'_>, &LinkState, &mut Timing) -> Result<Change, CoreError>,
    ) -> Result<(), CoreError> {
        let cur = self.running();
        let persisted = self.persisted_arc();
        let change = f(&View { hw: &self.hw, st: &cur }, &persisted, t)?;
        let running = Arc::new(change.running);
        *next.lock().unwrap_or_else(PoisonError::into_inner) = Some(running.clone());
        let (vf, vt) = (View { hw: &self.hw, st: &cur }, View { hw: &self.hw, st: &running });
        let checked = delta::check_change(&vf, &vt);
        // Debug builds (the tests) hold the check of the change to the
        // check of everything.
        #[cfg(debug_assertions)]
        if let (Ok(()), Err(e)) = (&checked, ops::check_state(&vt)) {
            panic!("the check of the change missed a broken invariant: {e}");
        }
        checked
            .map_err(|e| CoreError::internal(format!("change would break an invariant: {e}")))?;
        t.phase("validate");
        #[cfg(feature = "failpoints")]
        fail::fail_point!("core.validated", |_| Err(CoreError::internal(
            "failpoint core.validated"
        )));
        self.presync_datapath(&running);
        // MTUs put back as they were if anything below fails.
        let undo_mtus = || {
            let _ = self.sync_kernel(&running, &cur, &mut Timing::new());
        };
        let shrunk = match self.shrink_kernel_mtus(&cur, &running) {
            Ok(s) => s,
            Err(e) => {
                undo_mtus();
                return Err(e);
            }
        };
        if let Err(e) = self.execute(&cur, &running, t, progress) {
            if shrunk {
                undo_mtus();
            }
            return Err(e);
        }
        if let Err(e) = self.sync_kernel(&cur, &running, t) {
            let _ = self.put_back(&running, &cur);
            return Err(e);
        }
        // (The kernel step reads back what it changed itself.)
        if verify {
            if let Err(e) = self.verify_rings() {
                let _ = self.put_back(&running, &cur);
                return Err(e);
            }
            t.phase("verify");
        }
        let persists = change.same || change.persisted.is_some();
        if let Some(p) = if change.same { Some(&*running) } else { change.persisted.as_ref() }
            && let Some(store) = &self.store
            && let Err(e) = store.append(&persisted, p)
        {
            if let Err(u) = self.put_back(&running, &cur) {
                return Err(CoreError::persistence(format!(
                    "{e}; and putting the hardware back failed: {u}"
                )));
            }
            return Err(CoreError::persistence(format!("cannot save configuration: {e}")));
        }
        if persists {
            t.phase("persist");
        }
        *self.running.write().unwrap() = running.clone();
        if change.same {
            *self.persisted.lock().unwrap_or_else(PoisonError::into_inner) = running;
        } else if let Some(p) = change.persisted {
            *self.persisted.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(p);
        }
        Ok(())
    }

    /// Puts the rings and the kernel back from `next` to `cur` after a
    /// later step failed: kernel MTUs that must come down first, then the
    /// rings, then the kernel's devices and addresses (a TAP needs its
    /// link's rings running, so it cannot come back before them).
    fn put_back(&self, next: &LinkState, cur: &LinkState) -> Result<(), CoreError> {
        let mut undo = Timing::new();
        let _ = self.shrink_kernel_mtus(next, cur);
        let rings = self.execute(next, cur, &mut undo, &|_, _, _| {});
        let kernel = self.sync_kernel(next, cur, &mut undo);
        rings.and(kernel)
    }

    pub(crate) fn record(&self, command: &str, res: Result<&Report, &CoreError>, total_us: u64) {
        let seq = {
            let mut s = self.seq.lock().unwrap_or_else(PoisonError::into_inner);
            *s += 1;
            *s
        };
        let time_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis()
                as u64;
        let entry = HistoryEntry {
            seq,
            time_ms,
            command: command.to_owned(),
            ok: res.is_ok(),
            total_us,
            error: res
                .err()
                .map(|e| format!("{}: {}", e.kind.as_str(), e.message))
                .unwrap_or_default(),
        };
        let mut h = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        if h.len() == HISTORY {
            h.pop_front();
        }
        h.push_back(entry);
    }

    /// Every port's plan under `st`.
    fn plans(&self, st: &LinkState, groups: &groups::Groups) -> Vec<PortPlan> {
        let v = View { hw: &self.hw, st };
        let in_use = v.ports_in_use();
        self.hw
            .ports()
            .iter()
            .map(|p| self.plan(&v, p, in_use.contains(&p.device), groups))
            .collect()
    }

    /// The plans under `from` and `to`: from the plans cached for `from`
    /// (the configuration the ports were last driven to), with only the
    /// ports the change touches planned again; every port otherwise.
    fn plans_of_change(
        &self,
        from: &LinkState,
        to: &LinkState,
        ga: &groups::Groups,
        gb: &groups::Groups,
    ) -> (Vec<PortPlan>, Vec<PortPlan>) {
        let cached = self.planned.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some((_, a)) = cached.filter(|(st, _)| st.shares(from)) else {
            return (self.plans(from, ga), self.plans(to, gb));
        };
        let (vf, vt) = (View { hw: &self.hw, st: from }, View { hw: &self.hw, st: to });
        let mut touched = delta::ports_touched(&vf, &vt);
        // Ports whose VNIC groups come, go or move.
        for (name, g) in ga.iter().chain(gb) {
            let same = |x: Option<&groups::Group>| {
                x.is_some_and(|x| (&x.device, x.base, x.count) == (&g.device, g.base, g.count))
            };
            if !same(ga.get(name)) || !same(gb.get(name)) {
                touched.insert(g.device.clone());
            }
        }
        let b = self
            .hw
            .ports()
            .iter()
            .zip(&a)
            .map(|(p, was)| {
                if touched.contains(&p.device) {
                    self.plan(&vt, p, vt.port_in_use(&p.device), gb)
                } else {
                    was.clone()
                }
            })
            .collect();
        (a, b)
    }

    /// Port `p`'s plan under `v`.
    fn plan(&self, v: &View<'_>, p: &Port, in_use: bool, groups: &groups::Groups) -> PortPlan {
        {
            {
                let link = Link::Phys(p.device.clone());
                let uint =
                    |n: PropName| v.prop(&link, n).and_then(|x| x.as_uint()).map(|x| x as u32);
                let adaptive = |n: PropName| v.prop(&link, n) == Some(PropValue::Adaptive);
                let (throttle, adaptive) = match p.driver {
                    Driver::I40e(_) => {
                        ([uint(PropName::Itr), None, None], [adaptive(PropName::Itr), false, false])
                    }
                    Driver::Atl1c(_) => (
                        [None, uint(PropName::RxImt), uint(PropName::TxImt)],
                        [false, adaptive(PropName::RxImt), false],
                    ),
                };
                // rxrings/txrings on a port: how many ring pairs run (0 or
                // unset: all of them).
                let all = p.engine.ring_count();
                let want = [PropName::RxRings, PropName::TxRings]
                    .into_iter()
                    .filter_map(|n| {
                        v.props(&link).and_then(|m| m.get(&n)).and_then(|x| x.parse::<u16>().ok())
                    })
                    .max()
                    .filter(|&n| n > 0)
                    .map_or(all, |n| n.min(all));
                let mine: Vec<(u16, u16)> = groups
                    .values()
                    .filter(|g| g.device == p.device)
                    .map(|g| (g.base, g.count))
                    .collect();
                // The primary group keeps the rings below the VNICs' groups.
                let want = mine.iter().map(|g| g.0).min().map_or(want, |lo| want.min(lo));
                let name = v.phys_name(&p.device);
                let flag = |n: PropName| {
                    let of = |l: &Link| v.prop(l, n).and_then(|x| x.as_bool());
                    v.aggr_of(&name)
                        .and_then(|a| of(&Link::Aggr(a.clone())))
                        .or_else(|| of(&link))
                        .unwrap_or(true)
                };
                let xmit_batch = flag(PropName::XmitBatch);
                let rx_csum = flag(PropName::RxCsum);
                PortPlan {
                    active: in_use,
                    buf: buf_size_for_mtu(v.mtu(&link)),
                    rings: want,
                    groups: mine,
                    throttle,
                    adaptive,
                    xmit_batch,
                    rx_csum,
                }
            }
        }
    }

    /// Drives every port from its plan under `from` to its plan under `to`.
    /// On failure, drives them back to `from` and returns the error.
    fn execute(
        &self,
        from: &LinkState,
        to: &LinkState,
        t: &mut Timing,
        progress: Progress<'_>,
    ) -> Result<(), CoreError> {
        let ga = self.groups.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // Only VNICs with rxrings or txrings get a group (groups::wanted).
        // While none has one, and the change adds or changes no VNIC that
        // asks for one, there is nothing to assign, and no need to look at
        // every VNIC's properties by name.
        let (vf, vt) = (View { hw: &self.hw, st: from }, View { hw: &self.hw, st: to });
        let gb = if !ga.is_empty() || delta::group_asked(&vf, &vt) {
            self.assign_groups(to)?
        } else {
            groups::Groups::new()
        };
        let (a, b) = self.plans_of_change(from, to, &ga, &gb);
        match self.drive(&a, &b, &ga, &gb, t, progress) {
            Ok(()) => {
                *self.groups.lock().unwrap_or_else(PoisonError::into_inner) = gb;
                *self.planned.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((to.clone(), b));
                Ok(())
            }
            Err(e) => {
                // Put back what was done: every port to its old plan.
                let mut undo = Timing::new();
                let now = self.actual_plans(&b);
                if let Err(u) = self.drive(&now, &a, &gb, &ga, &mut undo, &|_, _, _| {}) {
                    return Err(CoreError::hardware(format!(
                        "{}; and putting it back failed: {u}",
                        e.message
                    )));
                }
                Err(e)
            }
        }
    }

    /// Drives every port from what it actually is to the plan of `st`
    /// (after an operation died part way).
    fn restore_hardware(&self, st: &LinkState) -> Result<(), CoreError> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let want = self.plans(st, &groups);
        let now = self.actual_plans(&want);
        self.drive(&now, &want, &groups, &groups, &mut Timing::new(), &|_, _, _| {})?;
        *self.planned.lock().unwrap_or_else(PoisonError::into_inner) = Some((st.clone(), want));
        Ok(())
    }

    /// What each port is doing now (after a partial failure).
    fn actual_plans(&self, wanted: &[PortPlan]) -> Vec<PortPlan> {
        self.hw
            .ports()
            .iter()
            .zip(wanted)
            .map(|(p, w)| {
                let started = p.rings_started() as u16;
                let buf = (0..p.engine.ring_count())
                    .find_map(|r| p.engine.info(r).ok().and_then(|i| i.buf_size))
                    .unwrap_or(w.buf);
                PortPlan {
                    active: started > 0,
                    buf,
                    rings: started.max(1),
                    groups: w.groups.clone(),
                    throttle: w.throttle,
                    adaptive: w.adaptive,
                    xmit_batch: p.engine.xmit_batch(),
                    rx_csum: p.device_handle().rx_csum(),
                }
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn drive(
        &self,
        from: &[PortPlan],
        to: &[PortPlan],
        ga: &groups::Groups,
        gb: &groups::Groups,
        t: &mut Timing,
        progress: Progress<'_>,
    ) -> Result<(), CoreError> {
        use netadm_rings::RingState;
        let ports = self.hw.ports();
        // VNIC groups that go (or move): their filters and senders leave
        // first, and what they hold in flight is delivered.
        for (name, g) in ga {
            if gb
                .get(name)
                .is_none_or(|n| n.device != g.device || n.base != g.base || n.count != g.count)
                && let Some(p) = self.hw.port(g.device.as_str())
            {
                groups::unplug(p, g)
                    .map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
            }
        }
        // Per port, from what its rings actually are (after a failure that
        // may differ from any plan): the rings to stop, to reprogram (new
        // buffers) and to start.
        let (mut stop, mut restart, mut start) = (vec![], vec![], vec![]);
        let mut shrink = vec![];
        for (i, b) in to.iter().enumerate() {
            let e = &ports[i].engine;
            let new = if b.active { b.rings } else { 0 };
            let mut want: Vec<u16> = (0..new).collect();
            if b.active {
                want.extend(b.groups.iter().flat_map(|&(base, n)| base..base + n));
            }
            let info = |r: u16| e.info(r).ok();
            let gone: Vec<u16> = (0..e.ring_count())
                .filter(|r| !want.contains(r))
                .filter(|&r| {
                    info(r).is_some_and(|x| {
                        x.state != RingState::Freed && x.state != RingState::Unallocated
                    })
                })
                .collect();
            let stale: Vec<u16> = want
                .iter()
                .copied()
                .filter(|&r| {
                    info(r)
                        .is_some_and(|x| x.state == RingState::Started && x.buf_size != Some(b.buf))
                })
                .collect();
            let missing: Vec<u16> = want
                .iter()
                .copied()
                .filter(|&r| info(r).is_some_and(|x| x.state != RingState::Started))
                .collect();
            if !gone.is_empty() {
                if new > 0 && gone.iter().any(|r| ports[i].tx_map.rings().contains(r)) {
                    shrink.push((i, new));
                }
                stop.push((i, gone));
            }
            if !stale.is_empty() {
                restart.push((i, stale));
            }
            if !missing.is_empty() {
                start.push((i, missing));
            }
        }
        // VNIC groups whose rings get new buffers: traffic aside first.
        for g in gb.values() {
            let stale = restart.iter().any(|(i, set)| {
                ports[*i].device == g.device && set.iter().any(|r| g.rings().contains(r))
            });
            if stale && let Some(p) = self.hw.port(g.device.as_str()) {
                groups::unplug(p, g)
                    .map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
            }
        }
        // Make before break: senders and RSS leave rings before they stop.
        for &(i, new) in &shrink {
            hitless::steer(&ports[i], &(0..new).collect::<Vec<u16>>())
                .map_err(|e| CoreError::hardware(format!("{}: {e}", ports[i].device)))?;
        }
        type Job = fn(&Port, &[u16], u32) -> Result<OpReport, netadm_rings::RingError>;
        type Work = [(usize, Vec<u16>)];
        let waves: [(&str, &Work, Job); 3] = [
            ("ring-stop", &stop, |p, set, _| p.engine.stop(set)),
            ("reprogram", &restart, |p, set, buf| {
                // The primary group's rings in two waves; VNIC groups'
                // rings with their traffic moved aside (groups::restart).
                let primary: Vec<u16> =
                    set.iter().copied().filter(|r| p.tx_map.rings().contains(r)).collect();
                let rest: Vec<u16> = set.iter().copied().filter(|r| !primary.contains(r)).collect();
                let mut rep = if primary.is_empty() {
                    None
                } else {
                    Some(hitless::reprogram(p, &primary, buf)?)
                };
                if !rest.is_empty() {
                    let r = groups::restart(p, &rest, buf)?;
                    rep = Some(match rep {
                        Some(a) => a.then(r),
                        None => r,
                    });
                }
                Ok(rep.expect("something to reprogram"))
            }),
            ("ring-start", &start, |p, set, buf| p.engine.start(set, buf)),
        ];
        let total = (stop.len() + restart.len() + start.len()) as u32;
        // Drops are charged to the ports whose rings change, and the far
        // ends of their cables.
        let touched: Vec<&Port> = ports
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                [&stop, &restart, &start].iter().any(|w| w.iter().any(|(j, _)| j == i))
            })
            .flat_map(|(_, p)| {
                let peer = match &p.wire {
                    netadm_config::Wire::Cable { peer } => self.hw.port(peer.as_str()),
                    _ => None,
                };
                std::iter::once(p).chain(peer)
            })
            .collect();
        let dropped = || -> u64 {
            touched
                .iter()
                .map(|p| {
                    let h = netadm_nic::Nic::hw_stats(&*p.driver.nic());
                    h.rx_dropped + h.wire_dropped
                })
                .sum()
        };
        let dropped_before = dropped();
        let discarded_before = t.counts.get("rx_discarded").copied().unwrap_or(0);
        let mut done = 0;
        for (name, idx, job) in waves {
            if idx.is_empty() {
                continue;
            }
            progress(name, done, total);
            // Ports are independent devices: drive them in parallel.
            let results: Vec<(usize, Result<OpReport, netadm_rings::RingError>)> =
                std::thread::scope(|s| {
                    let hs: Vec<_> = idx
                        .iter()
                        .map(|(i, set)| {
                            let (p, buf) = (&ports[*i], to[*i].buf);
                            (
                                *i,
                                s.spawn(move || {
                                    // Between ports: the others may be done.
                                    #[cfg(feature = "failpoints")]
                                    fail::fail_point!("core.execute.port", |_| Err(
                                        netadm_rings::RingError::QuiesceTimeout {
                                            rings: set.to_vec()
                                        }
                                    ));
                                    job(p, set, buf)
                                }),
                            )
                        })
                        .collect();
                    hs.into_iter()
                        .map(|(i, h)| {
                            // A job that panicked is a bug: re-raised here
                            // and caught by `mutate`, which reports it and
                            // drives the hardware back.
                            (i, h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                        })
                        .collect()
                });
            let mut first_err = None;
            for (i, r) in results {
                match r {
                    Ok(rep) => t.absorb(name, &rep),
                    Err(e) => {
                        first_err.get_or_insert(CoreError::hardware(format!(
                            "{}: {e}",
                            ports[i].device
                        )));
                    }
                }
            }
            t.phase(name);
            done += idx.len() as u32;
            progress(name, done, total);
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        if total > 0 {
            // What the devices and wires dropped, and the rings discarded,
            // while rings changed.
            let discarded = t.counts.get("rx_discarded").copied().unwrap_or(0) - discarded_before;
            t.count("frames_dropped", dropped() - dropped_before + discarded);
        }
        // VNIC groups: filters on and senders over their rings.
        for g in gb.values() {
            if let Some(p) = self.hw.port(g.device.as_str())
                && p.rings_started() > 0
            {
                groups::plug(p, g)
                    .map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
            }
        }
        // Interrupt moderation, doorbell batching, and senders and RSS over
        // the rings that run now (steered: growing moves flows to new
        // rings, which must not reorder them).
        for (i, (a, b)) in from.iter().zip(to).enumerate() {
            let p = &ports[i];
            if a.throttle != b.throttle || a.adaptive != b.adaptive || (b.active && !a.active) {
                apply_throttle(p, &b.throttle, &b.adaptive)?;
            }
            p.engine.set_xmit_batch(b.xmit_batch);
            p.device_handle().write_rx_csum(b.rx_csum);
            let running: Vec<u16> = if b.active { (0..b.rings).collect() } else { vec![] };
            if p.tx_map.rings() != running {
                if running.is_empty() {
                    p.tx_map.set(running);
                } else {
                    hitless::steer(p, &running)
                        .map_err(|e| CoreError::hardware(format!("{}: {e}", p.device)))?;
                }
            }
        }
        Ok(())
    }
}

fn apply_throttle(p: &Port, th: &[Option<u32>; 3], adaptive: &[bool; 3]) -> Result<(), CoreError> {
    let err = |e: netadm_nic::NicError| CoreError::hardware(format!("{}: {e}", p.device));
    match &p.driver {
        Driver::I40e(d) => {
            let units = th[0].map_or(netadm_i40e::DEFAULT_ITR_UNITS, |us| us.div_ceil(2));
            for v in 0..netadm_nic::Nic::caps(&**d).vectors {
                // Adaptive: the interrupt handler owns the register from
                // here; fixed: it lets go of it before the write.
                p.engine.set_adaptive(v, adaptive[0]);
                if !adaptive[0] {
                    netadm_nic::Nic::set_throttle(&**d, v, units).map_err(err)?;
                }
            }
        }
        Driver::Atl1c(d) => {
            p.engine.set_adaptive(netadm_atl1c::hw::RX_VECTOR, adaptive[1]);
            if !adaptive[1] {
                d.set_rx_imt(th[1].unwrap_or(netadm_atl1c::DEFAULT_RX_IMT)).map_err(err)?;
            }
            d.set_tx_imt(th[2].unwrap_or(netadm_atl1c::DEFAULT_TX_IMT)).map_err(err)?;
        }
    }
    Ok(())
}

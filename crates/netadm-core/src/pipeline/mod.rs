//! The mutation pipeline: every verb that changes the network runs
//! through [`Pipeline::mutate`], one at a time, under one lock:
//!
//! 1. **validate** — the verb parses its arguments and builds the next
//!    configuration from the running one (and the persistent one, unless
//!    temporary: [`Cx::change`]); the invariants are checked where the
//!    change can break them ([`crate::view::check::check_change`]).
//! 2. **plan and execute** — the [`Backend`] makes the difference real:
//!    what must shrink first, the ports (rings, ports in parallel), then
//!    what sits on them (kernel devices, addresses), each read back.
//! 3. **persist** — the persistent configuration's change is recorded
//!    durably (`netadm_config::Store::append`).
//! 4. **commit** — the new running configuration is swapped in.
//!
//! A failure at any step drives the backend back from the next
//! configuration to the running one, and the error is returned; a panic
//! (a bug) is caught, reported as `Internal`, and put back the same way.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use netadm_config::{LinkState, Store};
use netadm_model::{AddrObj, LinkName};

use crate::ports::power::Hardware;
use crate::timing::{Progress, Timing};
use crate::view::View;
use crate::view::delta::MacIndex;
use crate::{CoreError, HistoryEntry, Report};

/// Most history entries kept.
const HISTORY: usize = 200;

/// What makes a configuration real below the configuration itself: the
/// machine's ports and everything built over them. The pipeline calls
/// these in this order for every change, each working from the
/// difference of two configurations; putting a change back is driving
/// from the next configuration to the one before.
pub(crate) trait Backend {
    /// The machine's ports, which every [`View`] resolves names against.
    fn hardware(&self) -> &Hardware;
    /// Before anything changes: what must get out of the way of the
    /// change (best effort; the configuration after it is `next`).
    fn prepare(&self, next: &View<'_>);
    /// Before the ports change: what must shrink first (kernel MTUs that
    /// go down). Whether it changed anything.
    fn shrink(&self, from: &View<'_>, to: &View<'_>) -> Result<bool, CoreError>;
    /// Puts back what [`Backend::shrink`] lowered for the change from
    /// `from` to `to` (best effort: a step after it failed).
    fn unshrink(&self, from: &View<'_>, to: &View<'_>);
    /// Drives the ports from `from` to `to`; on failure puts them back to
    /// `from` and returns the error.
    fn drive(
        &self,
        from: &View<'_>,
        to: &View<'_>,
        t: &mut Timing,
        progress: Progress<'_>,
    ) -> Result<(), CoreError>;
    /// What sits on the ports (kernel devices, addresses, MTUs that grow),
    /// from `from` to `to`, read back.
    fn kernel(&self, from: &View<'_>, to: &View<'_>, t: &mut Timing) -> Result<(), CoreError>;
    /// Reads the ports back and compares them with what they were last
    /// driven to.
    fn verify(&self) -> Result<(), CoreError>;
    /// After an operation died part way: every port from what it actually
    /// is to what `st` plans.
    fn restore(&self, st: &View<'_>) -> Result<(), CoreError>;
    /// After every mutation, done or not: what runs (senders, LACP,
    /// filters) follows the running configuration `running`.
    fn settle(&self, running: &View<'_>);
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

/// An operation the pipeline runs: how the history and the errors name
/// it, and how its change is made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op<'a> {
    /// The verb (`create-vnic`, `apply`).
    pub name: &'a str,
    /// What it acts on: a verb's first argument (a link, IP interface,
    /// address object or protocol).
    pub subject: &'a str,
    /// Whether it changes the running configuration only (`-t`).
    pub temporary: bool,
    /// Whether the ports are read back after they changed
    /// ([`Backend::verify`]).
    pub verify: bool,
}

impl<'a> Op<'a> {
    /// Verb `name` on `subject`, persistent unless `temporary`.
    pub fn verb(name: &'a str, subject: &'a str, temporary: bool) -> Self {
        Self { name, subject, temporary, verify: false }
    }

    /// Operation `name` on `subject` (apply, rollback): persistent, its
    /// ports read back.
    pub fn read_back(name: &'a str, subject: &'a str) -> Self {
        Self { name, subject, temporary: false, verify: true }
    }
}

/// What a verb sees while it validates: the running configuration (as a
/// view), the persistent one, and the operation's timing.
pub(crate) struct Cx<'a> {
    /// The running configuration.
    pub v: View<'a>,
    /// The persistent configuration.
    pub persisted: &'a LinkState,
    /// The operation's timing (for notes).
    pub t: &'a mut Timing,
    /// VNICs by MAC address.
    pub macs: &'a Mutex<MacIndex>,
    /// What the verb acts on ([`Op::subject`]).
    pub subject: &'a str,
    /// Whether the change is to the running configuration only.
    pub temporary: bool,
}

impl Cx<'_> {
    /// Builds the change: `apply` on the running configuration, and on the
    /// persistent one unless temporary. A subject that exists only in the
    /// running configuration (it was created with `-t`) is changed there
    /// only, and the result says so; any other failure against the
    /// persistent configuration is an error (e.g. a persistent VNIC over a
    /// temporary aggregation).
    pub fn change(
        &mut self,
        apply: impl Fn(&View<'_>) -> Result<LinkState, CoreError>,
    ) -> Result<Change, CoreError> {
        let (v, subject) = (&self.v, self.subject);
        let running = apply(v)?;
        if self.temporary {
            return Ok(Change { running, persisted: None, same: false });
        }
        // Nothing temporary anywhere: the running configuration is the
        // persistent one (one allocation), and `apply` gives the same result.
        if std::ptr::eq(v.st, self.persisted) {
            return Ok(Change { running, persisted: None, same: true });
        }
        let pv = View { hw: v.hw, st: self.persisted };
        if exists(v, subject) && !exists(&pv, subject) {
            self.t.note(format!("{subject} is temporary: the change was not persisted"));
            return Ok(Change { running, persisted: None, same: false });
        }
        match apply(&pv) {
            Ok(p) => Ok(Change { running, persisted: Some(p), same: false }),
            Err(e) => Err(CoreError {
                message: format!(
                    "{}; in the persistent configuration (use -t for a temporary change)",
                    e.message
                ),
                ..e
            }),
        }
    }

    /// [`Cx::change`] where `edit` changes a copy of each configuration
    /// (a cheap one: its sections share their entries), checking what it
    /// needs against the view of the original.
    pub fn edit(
        &mut self,
        edit: impl Fn(&View<'_>, &mut LinkState) -> Result<(), CoreError>,
    ) -> Result<Change, CoreError> {
        self.change(|v| {
            let mut st = v.st.clone();
            edit(v, &mut st)?;
            Ok(st)
        })
    }
}

/// Whether `subject` (a link, IP interface or address object name) exists
/// in a configuration.
fn exists(v: &View<'_>, subject: &str) -> bool {
    v.resolve(subject).is_some()
        || subject.parse::<LinkName>().is_ok_and(|n| v.st.interface.contains_key(&n))
        || subject.parse::<AddrObj>().is_ok_and(|a| v.st.address.contains_key(&a))
}

/// The configurations, the lock every change takes, and the history.
pub(crate) struct Pipeline {
    store: Option<Store>,
    running: RwLock<Arc<LinkState>>,
    persisted: Mutex<Arc<LinkState>>,
    mutation: Mutex<()>,
    /// Set by [`Pipeline::quiesce`]: mutations arriving after it are
    /// refused.
    stopping: AtomicBool,
    history: Mutex<VecDeque<HistoryEntry>>,
    seq: Mutex<u64>,
    /// VNICs by MAC address (create-vnic refuses a MAC in use on the same
    /// ports), kept by the difference.
    macs: Mutex<MacIndex>,
}

impl Pipeline {
    /// A pipeline over `store`, with nothing running yet.
    pub(crate) fn new(store: Option<Store>) -> Self {
        Self {
            store,
            running: RwLock::new(Arc::new(LinkState::default())),
            persisted: Mutex::new(Arc::new(LinkState::default())),
            mutation: Mutex::new(()),
            stopping: AtomicBool::new(false),
            history: Mutex::new(VecDeque::new()),
            seq: Mutex::new(0),
            macs: Mutex::new(MacIndex::default()),
        }
    }

    /// Where the configuration persists, if anywhere.
    pub(crate) fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The persistent configuration as the store has it (empty without
    /// one).
    pub(crate) fn load(&self) -> Result<LinkState, CoreError> {
        match &self.store {
            Some(s) => s.load().map_err(|e| CoreError::persistence(e.to_string())),
            None => Ok(LinkState::default()),
        }
    }

    /// At start: the persistent configuration `persisted` must still make
    /// sense on this hardware; the backend is brought to it from nothing,
    /// and it becomes the running one. A journal left by the last netadmd
    /// (killed, or stopped before it could compact) is folded into
    /// `links.toml`.
    pub(crate) fn replay(&self, b: &impl Backend, persisted: LinkState) -> Result<(), CoreError> {
        let hw = b.hardware();
        crate::view::check::check_state(&View { hw, st: &persisted }).map_err(|e| {
            let path =
                self.store.as_ref().map(|s| s.path().display().to_string()).unwrap_or_default();
            CoreError::persistence(format!("{path}: {e}"))
        })?;
        let (empty, mut t) = (LinkState::default(), Timing::new());
        let (ve, vp) = (View { hw, st: &empty }, View { hw, st: &persisted });
        b.drive(&ve, &vp, &mut t, &|_, _, _| {})?;
        // One allocation for both while they are the same: a verb then
        // applies its change once ([`Cx::change`]).
        let shared = Arc::new(persisted.clone());
        *self.running.write().unwrap() = shared.clone();
        *self.persisted.lock().unwrap_or_else(PoisonError::into_inner) = shared;
        b.settle(&vp);
        b.kernel(&ve, &vp, &mut t)?;
        if let Some(s) = &self.store
            && s.journal_pending()
        {
            s.save(&persisted).map_err(|e| CoreError::persistence(e.to_string()))?;
        }
        Ok(())
    }

    /// A snapshot of the running configuration.
    pub(crate) fn running(&self) -> Arc<LinkState> {
        self.running.read().unwrap().clone()
    }

    /// A shared snapshot of the persistent configuration.
    pub(crate) fn persisted(&self) -> Arc<LinkState> {
        self.persisted.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Recent mutations, oldest first.
    pub(crate) fn history(&self) -> Vec<HistoryEntry> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }

    /// Whether [`Pipeline::quiesce`] has run.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Waits for the mutation in progress, if any, to finish (it persists
    /// before it returns) and keeps new ones out: for a clean shutdown.
    /// The journal of changes is folded into `links.toml` first, so a
    /// stopped netadmd leaves that one file. A mutation that arrives later
    /// gets a typed `Busy` error at once. Whether this call stopped it
    /// (false: it was stopped already).
    pub(crate) fn quiesce(&self) -> bool {
        let _m = self.mutation.lock().unwrap_or_else(PoisonError::into_inner);
        if self.stopping.swap(true, Ordering::SeqCst) {
            return false;
        }
        if let Some(s) = &self.store
            && s.journal_pending()
        {
            // Best effort: should this fail, the journal still holds
            // every change and the next start replays it.
            let _ = s.save(&self.persisted());
        }
        true
    }

    /// Takes the mutation lock, unless the daemon is stopping. A lock a
    /// panic once poisoned is taken all the same: the panic was caught
    /// and the hardware driven back ([`Pipeline::mutate`]).
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, ()>, CoreError> {
        let g = self.mutation.lock().unwrap_or_else(PoisonError::into_inner);
        if self.stopping() {
            return Err(CoreError::busy("netadmd is stopping: no further changes are accepted"));
        }
        Ok(g)
    }

    /// Runs `f`, an operation outside the configuration (traffic, carrier,
    /// a device made anew), timed and recorded in the history as
    /// `op subject`.
    pub(crate) fn timed(
        &self,
        op: &str,
        subject: &str,
        f: impl FnOnce(&mut Timing) -> Result<(), CoreError>,
    ) -> Result<Report, CoreError> {
        let mut t = Timing::new();
        let res = f(&mut t);
        let total = t.started.elapsed().as_micros() as u64;
        let res = res.map(|()| t.finish(op));
        self.record(&format!("{op} {subject}"), res.as_ref(), total);
        res
    }

    /// Runs one mutation `op` through the pipeline. `f` validates and builds
    /// the change; with [`Op::verify`], the ports are also read back after they
    /// changed ([`Backend::verify`]), before anything persists: a mismatch
    /// is a failure like any other, and everything is put back.
    pub(crate) fn mutate(
        &self,
        b: &impl Backend,
        op: Op<'_>,
        progress: Progress<'_>,
        f: impl FnOnce(&mut Cx<'_>) -> Result<Change, CoreError>,
    ) -> Result<Report, CoreError> {
        let Op { name: op_name, subject, .. } = op;
        let _m = self.lock()?;
        let mut t = Timing::new();
        let cur = self.running();
        // The next configuration, once validated: what a panic after it
        // may have half applied.
        let next = Mutex::new(None);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.mutate_locked(b, &mut t, progress, &next, op, f)
        }))
        .unwrap_or_else(|p| Err(self.caught(b, op_name, subject, &*p, &cur, next)));
        // In step with whatever configuration runs now, new or old.
        b.settle(&View { hw: b.hardware(), st: &self.running() });
        let total = t.started.elapsed().as_micros() as u64;
        let res = res.map(|()| t.finish(op_name));
        self.record(&format!("{op_name} {subject}"), res.as_ref(), total);
        res
    }

    /// A panic in an operation (a bug): reported, and the backend put back
    /// as the running configuration (unchanged: commit is the last step)
    /// says.
    fn caught(
        &self,
        b: &impl Backend,
        op: &str,
        subject: &str,
        p: &(dyn std::any::Any + Send),
        cur: &LinkState,
        next: Mutex<Option<Arc<LinkState>>>,
    ) -> CoreError {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        let next = next.into_inner().unwrap_or_else(PoisonError::into_inner);
        let vc = View { hw: b.hardware(), st: cur };
        let restored = match next {
            // Rings and kernel, from the next configuration back.
            Some(next) => {
                put_back(b, &View { hw: b.hardware(), st: &next }, &vc).and(b.restore(&vc))
            }
            None => b.restore(&vc),
        };
        // The panic may have come after links.toml or the journal took
        // the change: the file is written again from the persistent
        // configuration, unchanged like the running one.
        // (Should saving panic again, that is reported, not raised.)
        let saved = match &self.store {
            Some(s) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                s.save(&self.persisted()).map_err(|e| e.to_string())
            }))
            .unwrap_or_else(|_| Err("it panicked too".into())),
            None => Ok(()),
        };
        CoreError::internal(format!(
            "{op} {subject} failed: {what}; {}{}",
            match restored {
                Ok(()) => "the hardware was put back".to_string(),
                Err(e) => format!("putting the hardware back failed: {}", e.message),
            },
            saved
                .err()
                .map(|e| format!("; rewriting the configuration failed: {e}"))
                .unwrap_or_default()
        ))
    }

    fn mutate_locked(
        &self,
        b: &impl Backend,
        t: &mut Timing,
        progress: Progress<'_>,
        next: &Mutex<Option<Arc<LinkState>>>,
        op: Op<'_>,
        f: impl FnOnce(&mut Cx<'_>) -> Result<Change, CoreError>,
    ) -> Result<(), CoreError> {
        let hw = b.hardware();
        let cur = self.running();
        let persisted = self.persisted();
        let change = f(&mut Cx {
            v: View { hw, st: &cur },
            persisted: &persisted,
            t,
            macs: &self.macs,
            subject: op.subject,
            temporary: op.temporary,
        })?;
        let running = Arc::new(change.running);
        *next.lock().unwrap_or_else(PoisonError::into_inner) = Some(running.clone());
        let (vf, vt) = (View { hw, st: &cur }, View { hw, st: &running });
        let checked = crate::view::check::check_change(&vf, &vt);
        // Debug builds (the tests) hold the check of the change to the
        // check of everything.
        #[cfg(debug_assertions)]
        if let (Ok(()), Err(e)) = (&checked, crate::view::check::check_state(&vt)) {
            panic!("the check of the change missed a broken invariant: {e}");
        }
        // A refusal of the check is the verb's, of its own kind (an 802.1Q
        // name clash, a port in two aggregations): the same as a verb's
        // own check would give.
        checked?;
        // The persistent configuration, where it goes its own way (a
        // temporary object in the running one), keeps them too: it is what
        // the next netadmd starts from, and refuses to start with less.
        if let Some(p) = &change.persisted {
            crate::view::check::check_change(&View { hw, st: &persisted }, &View { hw, st: p })?;
        }
        t.phase("validate");
        #[cfg(feature = "failpoints")]
        fail::fail_point!("core.validated", |_| Err(CoreError::internal(
            "failpoint core.validated"
        )));
        let target = if change.same { Some(&*running) } else { change.persisted.as_ref() };
        let persists = target.is_some();
        std::thread::scope(|scope| {
            // The file written whole, if the change is, and fsync'd on a
            // thread of its own while the hardware and the kernel change
            // (the disk's wait is hidden behind theirs); renamed over
            // links.toml once they have, removed if they fail
            // ([`netadm_config::Store::stage`]). A journal's record is
            // appended after them.
            let staged = match (target, &self.store) {
                (Some(p), Some(store)) if store.writes_whole() => {
                    let persisted = &*persisted;
                    Some(scope.spawn(move || store.stage(persisted, p)))
                }
                _ => None,
            };
            let changed = change_backend(b, t, progress, (&vf, &vt), op.verify);
            // Joined before anything else: a panic in it is this thread's.
            let staged = staged.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            changed?;
            if let (Some(p), Some(store)) = (target, &self.store) {
                let done = staged.unwrap_or(Ok(None)).and_then(|s| store.commit(s, &persisted, p));
                if let Err(e) = done {
                    if let Err(u) = put_back(b, &vt, &vf) {
                        return Err(CoreError::persistence(format!(
                            "{e}; and putting the hardware back failed: {u}"
                        )));
                    }
                    return Err(CoreError::persistence(format!("cannot save configuration: {e}")));
                }
            }
            Ok(())
        })?;
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

    /// Records a finished operation in the history.
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
}

/// Drives the backend from `vf` to `vt` (the configuration before and
/// after a change): what shrinks first, the rings, then the kernel, read
/// back (the ports too with `verify`). What it did is put back if a step
/// fails.
fn change_backend(
    b: &impl Backend,
    t: &mut Timing,
    progress: Progress<'_>,
    (vf, vt): (&View<'_>, &View<'_>),
    verify: bool,
) -> Result<(), CoreError> {
    b.prepare(vt);
    // What shrank is put back as it was if anything below fails.
    let unshrink = || b.unshrink(vf, vt);
    let shrunk = b.shrink(vf, vt).inspect_err(|_| unshrink())?;
    if let Err(e) = b.drive(vf, vt, t, progress) {
        if shrunk {
            unshrink();
        }
        return Err(e);
    }
    // (The kernel step reads back what it changed itself.)
    let after = b.kernel(vf, vt, t).and_then(|()| {
        if verify {
            b.verify()?;
            t.phase("verify");
        }
        Ok(())
    });
    if let Err(e) = after {
        return Err(match put_back(b, vt, vf) {
            Ok(()) => e,
            Err(u) => e.not_put_back(&u),
        });
    }
    Ok(())
}

/// Puts the backend back from `next` to `cur` after a later step failed:
/// what must shrink first, then the ports, then what sits on them (a TAP
/// needs its link's rings running, so it cannot come back before them).
fn put_back(b: &impl Backend, next: &View<'_>, cur: &View<'_>) -> Result<(), CoreError> {
    let mut undo = Timing::new();
    let _ = b.shrink(next, cur);
    let rings = b.drive(next, cur, &mut undo, &|_, _, _| {});
    let kernel = b.kernel(next, cur, &mut undo);
    rings.and(kernel)
}

//! Desired state: `show-config` and `apply` (a whole configuration as one
//! operation through the pipeline), and commit-confirmed checkpoints.
//!
//! `apply` validates the document against the hardware (every entry it
//! adds or changes, each error naming its line and key: [`check`]), plans
//! it (the configuration entries, each port's ring work, the kernel's
//! changes, one save: [`plan`]), and runs it as one mutation: one plan,
//! ports in parallel, the kernel, one save — then reads the rings back
//! from the hardware before it persists. A failure anywhere drives
//! everything back and names the step.

pub(crate) mod check;
pub(crate) mod plan;

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use netadm_config::{DocErrorKind, Document, LinkState};

use crate::machine::Machine;
use crate::pipeline::{Change, Op, Pipeline};
use crate::timing::{Progress, Timing};
use crate::view::View;
use crate::{ApplyReport, CoreError, ErrorKind, PlanStep, Report};

/// An armed commit-confirmed checkpoint.
#[derive(Debug, Clone)]
pub(crate) struct Checkpoint {
    /// When it rolls back unless confirmed.
    pub deadline: SystemTime,
    /// What it rolls back to.
    pub state: Arc<LinkState>,
    /// It has been rolled back, but its file could not be removed: what
    /// is left to do is removing it (a netadmd started with it would roll
    /// back again, undoing what came since).
    pub rolled_back: bool,
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as u64
}

/// The commit-confirmed checkpoint: armed by `apply --confirm-timeout`,
/// also on disk beside `links.toml`; the condition variable wakes
/// [`Desired::wait_due`] when it is armed or disarmed.
#[derive(Default)]
pub(crate) struct Desired {
    checkpoint: Mutex<Option<Checkpoint>>,
    cv: Condvar,
}

impl Desired {
    /// A checkpoint armed by the last netadmd is honoured: it rolls back
    /// at its deadline (at once if that has passed) unless confirmed.
    pub(crate) fn load(p: &Pipeline) -> Result<Self, CoreError> {
        let d = Self::default();
        if let Some(s) = p.store()
            && let Some((deadline_ms, state)) =
                s.load_checkpoint().map_err(|e| CoreError::persistence(e.to_string()))?
        {
            *d.checkpoint.lock().unwrap() = Some(Checkpoint {
                deadline: UNIX_EPOCH + Duration::from_millis(deadline_ms),
                state: Arc::new(state),
                rolled_back: false,
            });
        }
        Ok(d)
    }

    /// Wakes [`Desired::wait_due`] (netadmd is stopping). Taken after the
    /// mutation lock is let go: apply and rollback hold the checkpoint's
    /// lock while they wait for the mutation lock, so holding both would
    /// deadlock.
    pub(crate) fn wake(&self) {
        drop(self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner));
        self.cv.notify_all();
    }

    /// The persistent configuration (the running one with `running`) as a
    /// document in the `links.toml` schema: TOML, or JSON.
    pub(crate) fn show_config(
        p: &Pipeline,
        running: bool,
        json: bool,
    ) -> Result<String, CoreError> {
        let st = if running { p.running() } else { p.persisted() };
        if json {
            netadm_config::to_json(&st).map_err(CoreError::internal)
        } else {
            netadm_config::to_toml(&st).map_err(CoreError::internal)
        }
    }

    /// `apply`: makes the configuration `text` (a document in the
    /// `links.toml` schema, TOML or JSON) the running and persistent one,
    /// as one operation; with `dry_run` only plans it. With
    /// `confirm_timeout_s` > 0 it arms a checkpoint: unless
    /// [`Core::confirm`] comes within that many seconds, the configuration
    /// before is put back ([`Core::rollback_due`]), also after a restart.
    pub(crate) fn apply(
        &self,
        p: &Pipeline,
        m: &Machine,
        text: &str,
        dry_run: bool,
        confirm_timeout_s: u32,
        progress: Progress<'_>,
    ) -> Result<ApplyReport, CoreError> {
        let doc = Document::parse(text).map_err(|e| match e.kind {
            DocErrorKind::Value => CoreError::invalid_value(e.to_string()),
            DocErrorKind::Schema => CoreError::invalid_argument(e.to_string()),
        })?;
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        if dry_run {
            let _m = p.lock()?;
            let cur = p.running();
            let persisted = p.persisted();
            check::document(&doc, &View { hw: m.hw(), st: &cur }, m.mirror.is_some())?;
            let steps = plan::steps(m, &cur, &persisted, &doc.state)?;
            return Ok(ApplyReport {
                changed: !steps.is_empty(),
                dry_run: true,
                steps,
                confirm_deadline_ms: 0,
                result: Report { op: "apply".into(), ..Default::default() },
            });
        }
        if confirm_timeout_s > 0
            && let Some(c) = &*cp
        {
            return Err(CoreError::busy(format!(
                "a checkpoint is armed (it rolls back in {} s): confirm or rollback first",
                c.deadline.duration_since(SystemTime::now()).unwrap_or_default().as_secs()
            )));
        }
        let unchanged = {
            let (cur, persisted) = (p.running(), p.persisted());
            *cur == doc.state && *persisted == doc.state
        };
        if unchanged {
            return Ok(ApplyReport {
                changed: false,
                dry_run: false,
                steps: vec![],
                confirm_deadline_ms: 0,
                result: Report { op: "apply".into(), ..Default::default() },
            });
        }
        // The checkpoint is on disk before anything changes: a netadmd that
        // dies part way rolls back when it starts again. It is taken under
        // the mutation lock, from the persistent configuration this apply
        // starts from: a verb committing just before is kept by a rollback.
        let mut armed: Option<Checkpoint> = None;
        let timeout = Duration::from_secs(confirm_timeout_s.into());
        let (mut steps, mut validated) = (vec![], false);
        let res = p.mutate(m, Op::read_back("apply", "document"), progress, |cx| {
            let persisted = cx.persisted;
            check::document(&doc, &cx.v, m.mirror.is_some())?;
            steps = plan::steps(m, cx.v.st, persisted, &doc.state)?;
            if confirm_timeout_s > 0 {
                let c = Checkpoint {
                    deadline: SystemTime::now() + timeout,
                    state: Arc::new(persisted.clone()),
                    rolled_back: false,
                };
                // Armed before it is saved: a save that put the file in
                // place and then failed (its directory's fsync) has it
                // removed by the failure's path below.
                armed = Some(c.clone());
                if let Some(s) = p.store() {
                    s.save_checkpoint(ms(c.deadline), &c.state).map_err(|e| {
                        CoreError::persistence(format!("cannot arm the checkpoint: {e}"))
                    })?;
                }
            }
            // What fails from here is a step of the plan.
            validated = true;
            // Running and persistent become the document: one state, one
            // allocation, as after a restart.
            Ok(Change { running: doc.state.clone(), persisted: None, same: true })
        });
        let result = match res {
            Ok(r) => r,
            Err(e) => {
                let e = if validated { name_step(&steps, e) } else { e };
                // Everything was put back; so must the checkpoint file be,
                // or the next netadmd would roll back what came after.
                let Some(c) = armed else { return Err(e) };
                let Some(Err(why)) = p.store().map(|s| s.clear_checkpoint()) else {
                    return Err(e);
                };
                // It could not be removed: armed it stays, here too, so
                // that `confirm` (which removes it) or its deadline ends it.
                *cp = Some(c);
                self.cv.notify_all();
                return Err(CoreError {
                    kind: e.kind,
                    message: format!(
                        "{}; the checkpoint file could not be removed ({why}), so the checkpoint \
                         stays armed: `netadm confirm` disarms it",
                        e.message
                    ),
                });
            }
        };
        // The window to confirm in starts now that the apply is done, not
        // when it was validated (its kernel work may take longer than the
        // window). Should the file not take the later deadline, the one
        // it has stands, here too: earlier, never later, than promised.
        if let Some(c) = &mut armed {
            let later = SystemTime::now() + timeout;
            let kept = p.store().map_or(Ok(()), |s| s.save_checkpoint(ms(later), &c.state));
            match kept {
                Ok(()) => c.deadline = later,
                Err(e) => tracing::warn!(
                    "the checkpoint keeps the deadline it was armed with ({e}): {} s early",
                    later.duration_since(c.deadline).unwrap_or_default().as_secs()
                ),
            }
        }
        let confirm_deadline_ms = armed.as_ref().map_or(0, |c| ms(c.deadline));
        if armed.is_some() {
            *cp = armed;
            self.cv.notify_all();
        }
        Ok(ApplyReport { changed: true, dry_run: false, steps, confirm_deadline_ms, result })
    }

    /// `confirm`: keeps what the last `apply --confirm-timeout` made and
    /// disarms its checkpoint.
    pub(crate) fn confirm(&self, p: &Pipeline) -> Result<Report, CoreError> {
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        let t = Timing::new();
        if cp.is_none() {
            return Err(CoreError::not_found("no checkpoint is armed"));
        }
        if let Some(s) = p.store() {
            s.clear_checkpoint().map_err(|e| CoreError::persistence(e.to_string()))?;
        }
        *cp = None;
        self.cv.notify_all();
        let r = t.finish("confirm");
        p.record("confirm", Ok(&r), r.total_us);
        Ok(r)
    }

    /// `rollback`: puts back the configuration the armed checkpoint holds,
    /// now, through the pipeline, and disarms it.
    pub(crate) fn rollback(
        &self,
        p: &Pipeline,
        m: &Machine,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        self.rollback_armed(p, m, &mut cp, progress)
    }

    /// Rolls back the checkpoint in `cp`, whose lock the caller holds from
    /// deciding to until done (a confirm or a new apply cannot come in
    /// between), and disarms it.
    fn rollback_armed(
        &self,
        p: &Pipeline,
        m: &Machine,
        cp: &mut Option<Checkpoint>,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        let Some(c) = cp.as_mut() else {
            return Err(CoreError::not_found("no checkpoint is armed"));
        };
        let retry = c.rolled_back;
        let mut r = if retry {
            Timing::new().finish("rollback")
        } else {
            let state = LinkState::clone(&c.state);
            let r = p.mutate(m, Op::read_back("rollback", "checkpoint"), progress, |_| {
                Ok(Change { running: state, persisted: None, same: true })
            })?;
            c.rolled_back = true;
            r
        };
        // Rolled back: a file that cannot be removed leaves it armed for
        // that alone (confirm, or its retry), never to roll back again.
        if let Some(Err(e)) = p.store().map(|s| s.clear_checkpoint()) {
            if retry {
                return Err(CoreError::persistence(format!(
                    "the checkpoint was rolled back, but its file could not be removed: {e}"
                )));
            }
            r.notes.push(format!(
                "the checkpoint file could not be removed ({e}): tried again in 10 s, or `netadm confirm` removes it"
            ));
            return Ok(r);
        }
        *cp = None;
        self.cv.notify_all();
        Ok(r)
    }

    /// When the armed checkpoint rolls back (ms since the Unix epoch).
    pub(crate) fn deadline_ms(&self) -> Option<u64> {
        self.checkpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|c| ms(c.deadline))
    }

    /// Blocks until an armed checkpoint is due (true) or netadmd is
    /// stopping (false): woken by every arm, confirm and rollback, and by
    /// the deadline.
    pub(crate) fn wait_due(&self, p: &Pipeline) -> bool {
        let mut g = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if p.stopping() {
                return false;
            }
            g = match &*g {
                None => self.cv.wait(g).unwrap_or_else(PoisonError::into_inner),
                Some(c) => match c.deadline.duration_since(SystemTime::now()) {
                    Err(_) => return true,
                    Ok(left) if left.is_zero() => return true,
                    Ok(left) => {
                        self.cv.wait_timeout(g, left).unwrap_or_else(PoisonError::into_inner).0
                    }
                },
            };
        }
    }

    /// Rolls back the armed checkpoint if it is due (no confirm came in
    /// time). `Ok(None)` if nothing was due. Should the rollback fail, the
    /// checkpoint stays armed and is tried again 10 s later.
    pub(crate) fn rollback_due(
        &self,
        p: &Pipeline,
        m: &Machine,
    ) -> Result<Option<Report>, CoreError> {
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cp {
            Some(c) if c.deadline <= SystemTime::now() => {}
            _ => return Ok(None),
        }
        let r = self.rollback_armed(p, m, &mut cp, &|_, _, _| {});
        if r.is_err()
            && let Some(c) = &mut *cp
        {
            c.deadline = SystemTime::now() + Duration::from_secs(10);
        }
        r.map(Some)
    }
}

/// Names the step a failure of the operation came from: the port or
/// interface its message begins with, or the save.
fn name_step(steps: &[PlanStep], e: CoreError) -> CoreError {
    let head = e.message.split(':').next().unwrap_or_default().trim();
    let found = steps.iter().enumerate().find(|(_, s)| {
        (e.kind == ErrorKind::Persistence && s.kind == "persist")
            || (s.kind != "config" && s.object.split(' ').nth(1) == Some(head))
    });
    let found = found.or_else(|| {
        // A kernel error names the device in the message, not always first.
        steps.iter().enumerate().find(|(_, s)| {
            s.kind == "kernel" && s.object.split(' ').nth(1).is_some_and(|o| e.message.contains(o))
        })
    });
    let which = match found {
        Some((i, s)) => {
            format!("step {} of {} ({} {}: {})", i + 1, steps.len(), s.kind, s.object, s.action)
        }
        None => "the operation".to_owned(),
    };
    // Only what was put back is said to be.
    let back = if e.left_changed() { "" } else { "; everything was put back as it was" };
    CoreError { kind: e.kind, message: format!("{which} failed: {}{back}", e.message) }
}

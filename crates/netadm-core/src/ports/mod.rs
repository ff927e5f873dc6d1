//! The ports wing: the machine's ports ([`Hardware`]) and what drives
//! their rings from one configuration to another. A change plans every
//! port it touches ([`plan`]: whether its rings run, with which buffers,
//! moderation and ring groups), then drives the ports whose plans differ
//! ([`drive`]: stop, reprogram, start, ports in parallel), and puts them
//! back if anything fails.

pub(crate) mod drive;
pub(crate) mod groups;
pub(crate) mod hitless;
pub(crate) mod phys;
pub(crate) mod plan;
pub(crate) mod power;
pub(crate) mod vlan;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use netadm_config::LinkState;
use netadm_nic::QueueId;
use netadm_rings::RingState;

use crate::timing::Progress;
use crate::timing::Timing;
use crate::view::View;
use crate::{CoreError, PlanStep};

use groups::Groups;
pub use phys::{EtherModes, PhysPort, PortCaps, PortCounters, PortStatus, SpeedDuplex};
use plan::PortPlan;
pub use power::{Hardware, NicWrap, Port};

use crate::view::delta;

/// The ports and the state of driving them.
pub(crate) struct Ports {
    /// Shared with the LACP thread, which moves flows when a member
    /// becomes usable or unusable.
    pub(crate) hw: Arc<Hardware>,
    /// VNIC ring groups, as the running configuration has them.
    pub(crate) groups: Mutex<Groups>,
    /// The last configuration the ports were driven to and their plans
    /// under it (with `groups`): a change plans again only the ports it
    /// touches ([`crate::view::delta::ports_touched`]).
    planned: Mutex<Option<(LinkState, Vec<PortPlan>)>>,
}

/// The rings a plan runs.
fn rings_of(p: &PortPlan) -> BTreeSet<u16> {
    if !p.active {
        return BTreeSet::new();
    }
    (0..p.rings).chain(p.groups.iter().flat_map(|&(b, n)| b..b + n)).collect()
}

impl Ports {
    /// The ports of `hw`, nothing planned yet.
    pub(crate) fn new(hw: Arc<Hardware>) -> Self {
        Self { hw, groups: Mutex::new(Groups::new()), planned: Mutex::new(None) }
    }

    /// VNIC `name`'s ring group, if it has one.
    pub(crate) fn group_of(&self, name: &netadm_model::LinkName) -> Option<groups::Group> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// Drives every port from its plan under `from` to its plan under `to`.
    /// On failure, drives them back to `from` and returns the error.
    pub(crate) fn execute(
        &self,
        from: &LinkState,
        to: &LinkState,
        t: &mut Timing,
        progress: Progress<'_>,
    ) -> Result<(), CoreError> {
        let (ga, gb, a, b) = self.change_plans(from, to)?;
        match drive::drive(&self.hw, &a, &b, &ga, &gb, t, progress) {
            Ok(()) => {
                *self.groups.lock().unwrap_or_else(PoisonError::into_inner) = gb;
                *self.planned.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((to.clone(), b));
                Ok(())
            }
            Err(e) => {
                // Put back what was done: every port to its old plan.
                let mut undo = Timing::new();
                let now = plan::actual(&self.hw, &b);
                if let Err(u) = drive::drive(&self.hw, &now, &a, &gb, &ga, &mut undo, &|_, _, _| {})
                {
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
    pub(crate) fn restore(&self, st: &LinkState) -> Result<(), CoreError> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let want = plan::plans(&self.hw, st, &groups);
        let now = plan::actual(&self.hw, &want);
        drive::drive(&self.hw, &now, &want, &groups, &groups, &mut Timing::new(), &|_, _, _| {})?;
        *self.planned.lock().unwrap_or_else(PoisonError::into_inner) = Some((st.clone(), want));
        Ok(())
    }

    /// The ring groups and the port plans before and after a change from
    /// `from` to `to`: `(before, after, plans before, plans after)`.
    #[allow(clippy::type_complexity)]
    fn change_plans(
        &self,
        from: &LinkState,
        to: &LinkState,
    ) -> Result<(Groups, Groups, Vec<PortPlan>, Vec<PortPlan>), CoreError> {
        let ga = self.groups.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // Only VNICs with rxrings or txrings get a group (groups::wanted).
        // While none has one, and the change adds or changes no VNIC that
        // asks for one, there is nothing to assign, and no need to look at
        // every VNIC's properties by name.
        let (vf, vt) = (View { hw: &self.hw, st: from }, View { hw: &self.hw, st: to });
        let gb = if !ga.is_empty() || delta::group_asked(&vf, &vt) {
            groups::assign(&self.hw, &ga, to)?
        } else {
            Groups::new()
        };
        let (a, b) = self.plans_of_change(from, to, &ga, &gb);
        Ok((ga, gb, a, b))
    }

    /// The plans under `from` and `to`: from the plans cached for `from`
    /// (the configuration the ports were last driven to), with only the
    /// ports the change touches planned again; every port otherwise.
    pub(crate) fn plans_of_change(
        &self,
        from: &LinkState,
        to: &LinkState,
        ga: &Groups,
        gb: &Groups,
    ) -> (Vec<PortPlan>, Vec<PortPlan>) {
        let cached = self.planned.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some((_, a)) = cached.filter(|(st, _)| st.shares(from)) else {
            return (plan::plans(&self.hw, from, ga), plan::plans(&self.hw, to, gb));
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
                    plan::plan(&vt, p, vt.port_in_use(&p.device), gb)
                } else {
                    was.clone()
                }
            })
            .collect();
        (a, b)
    }

    /// Programs every port's VLAN filter table with the VIDs `v` puts over
    /// it; with `add_only`, only adds (before a change runs).
    pub(crate) fn sync_vlan_filters(&self, v: &View<'_>, add_only: bool) {
        vlan::sync_filters(v, add_only);
    }

    /// What driving the ports from `cur` to `next` would do, port by
    /// port: rings stopped, restarted with new buffers and started, and
    /// registers set (an apply's plan).
    pub(crate) fn plan_steps(
        &self,
        cur: &LinkState,
        next: &LinkState,
    ) -> Result<Vec<PlanStep>, CoreError> {
        let mut steps = vec![];
        // Rings: each port from its plan now to its plan under `next`.
        let (_, _, a, b) = self.change_plans(cur, next)?;
        for ((p, a), b) in self.hw.ports().iter().zip(&a).zip(&b) {
            let (ra, rb) = (rings_of(a), rings_of(b));
            let stopped = ra.difference(&rb).count() as u32;
            let started = rb.difference(&ra).count() as u32;
            let restarted = if a.buf != b.buf { ra.intersection(&rb).count() as u32 } else { 0 };
            let regs = a.moderation != b.moderation
                || a.xmit_batch != b.xmit_batch
                || a.rx_csum != b.rx_csum;
            if stopped + started + restarted == 0 && !regs {
                continue;
            }
            let mut what = vec![];
            if stopped > 0 {
                what.push(format!("stop {stopped} rings"));
            }
            if restarted > 0 {
                what.push(format!("restart {restarted} rings with {}-byte buffers", b.buf));
            }
            if started > 0 {
                what.push(format!("start {started} rings ({}-byte buffers)", b.buf));
            }
            if regs {
                what.push("set moderation/offload registers".into());
            }
            steps.push(PlanStep {
                kind: "rings".into(),
                object: format!("port {}", p.device),
                action: what.join(", "),
                rings_stopped: stopped,
                rings_started: started,
                rings_restarted: restarted,
                kernel_changes: 0,
            });
        }
        Ok(steps)
    }

    /// Reads every port's rings back from the hardware and compares them
    /// with the plans the ports were just driven to: each ring that should
    /// run is started with the planned buffers and its queues enabled in
    /// the device; no other ring runs.
    pub(crate) fn verify(&self) -> Result<(), CoreError> {
        let planned = self.planned.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some((_, plans)) = planned else { return Ok(()) };
        for (p, plan) in self.hw.ports().iter().zip(&plans) {
            let want = rings_of(plan);
            let nic = p.engine.nic();
            let caps = nic.caps().clone();
            for r in 0..p.engine.ring_count() {
                let Ok(info) = p.engine.info(r) else { continue };
                let runs = info.state == RingState::Started;
                let enabled = (r < caps.tx_queues && nic.queue_enabled(QueueId::tx(r)))
                    || (r < caps.rx_queues && nic.queue_enabled(QueueId::rx(r)));
                let bad = if want.contains(&r) {
                    !runs || info.buf_size != Some(plan.buf) || !enabled
                } else {
                    runs || enabled
                };
                if bad {
                    return Err(CoreError::hardware(format!(
                        "{}: read back, ring {r} is {:?} (queues {}, buffers {:?}); planned {}",
                        p.device,
                        info.state,
                        if enabled { "enabled" } else { "disabled" },
                        info.buf_size,
                        if want.contains(&r) {
                            format!("started with {}-byte buffers", plan.buf)
                        } else {
                            "stopped".into()
                        }
                    )));
                }
            }
        }
        Ok(())
    }
}

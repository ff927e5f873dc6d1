//! Desired state: `show-config` and `apply` (a whole configuration as one
//! operation through the pipeline), and commit-confirmed checkpoints.
//!
//! `apply` validates the document against the hardware (every entry it
//! adds or changes, each error naming its line and key), plans it (the
//! configuration entries, each port's ring work, the kernel's changes,
//! one save), and runs it as one mutation: one plan, ports in parallel,
//! the kernel, one save — then reads the rings back from the hardware
//! before it persists. A failure anywhere drives everything back and
//! names the step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{ApplyReport, PlanStep, Report};
use netadm_config::{Document, LinkState};
use netadm_model::{LinkName, PropName};
use netadm_nic::QueueId;
use netadm_rings::RingState;

use crate::links::{Link, View};
use crate::{Change, Core, CoreError, ErrorKind, PortPlan, Progress, Timing, groups, ops};

/// An armed commit-confirmed checkpoint.
#[derive(Debug, Clone)]
pub(crate) struct Checkpoint {
    /// When it rolls back unless confirmed.
    pub deadline: SystemTime,
    /// What it rolls back to.
    pub state: Arc<LinkState>,
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as u64
}

/// A document error as a typed error: the kind of what was wrong, the
/// message naming line and key.
fn doc_err(doc: &Document, path: &[&str], e: CoreError) -> CoreError {
    CoreError { kind: e.kind, message: doc.error(path, e.message).to_string() }
}

fn step(kind: &str, object: String, action: String) -> PlanStep {
    PlanStep { kind: kind.into(), object, action, ..Default::default() }
}

/// The rings a plan runs.
fn rings_of(p: &PortPlan) -> BTreeSet<u16> {
    if !p.active {
        return BTreeSet::new();
    }
    (0..p.rings).chain(p.groups.iter().flat_map(|&(b, n)| b..b + n)).collect()
}

impl Core {
    /// The persistent configuration (the running one with `running`) as a
    /// document in the `links.toml` schema: TOML, or JSON.
    pub fn show_config(&self, running: bool, json: bool) -> Result<String, CoreError> {
        let st = if running { self.running() } else { self.persisted_arc() };
        if json {
            netadm_config::to_json(&st).map_err(CoreError::internal)
        } else {
            netadm_config::to_toml(&st).map_err(CoreError::internal)
        }
    }

    /// Checks a document's entries that differ from the running
    /// configuration, each error naming the line and key it comes from.
    fn check_document(&self, doc: &Document, cur: &View<'_>) -> Result<(), CoreError> {
        let d = &doc.state;
        let v = View { hw: cur.hw, st: d };
        let e = |path: &[&str], err: CoreError| doc_err(doc, path, err);
        let props = |sec: &str,
                     key: &str,
                     name: &str,
                     link: &Link,
                     was: Option<&BTreeMap<PropName, String>>,
                     now: &BTreeMap<PropName, String>|
         -> Result<(), CoreError> {
            for (p, val) in now {
                if was.and_then(|w| w.get(p)) == Some(val) {
                    continue;
                }
                let pn = p.to_string();
                // A zone changes only under no IP interface: the one the
                // device has now, not one the document adds with it.
                let at = if *p == PropName::Zone { cur } else { &v };
                ops::check_prop(at, name, link, *p, val)
                    .map_err(|err| e(&[sec, key, "props", &pn], err))?;
            }
            Ok(())
        };
        // An IP interface that stays keeps its device, made for the MAC,
        // VLAN and link under it: those change only without one.
        for (n, a, b) in cur.st.vnic.diff(&d.vnic) {
            if let (Some(a), Some(b)) = (a, b)
                && (a.over != b.over || a.mac != b.mac || a.vid != b.vid)
                && cur.st.interface.contains_key(n)
                && d.interface.contains_key(n)
            {
                let key = if a.over != b.over {
                    "over"
                } else if a.mac != b.mac {
                    "mac"
                } else {
                    "vid"
                };
                return Err(e(
                    &["vnic", n.as_str(), key],
                    CoreError::busy(format!(
                        "VNIC {n} has an IP interface; its link, MAC or VLAN changes only without one (delete-if {n} first, or leave the interface out of this document)"
                    )),
                ));
            }
        }
        // What VNICs are over first: the checks below follow VNICs to
        // their ports.
        for (n, _, b) in cur.st.vnic.diff(&d.vnic) {
            let Some(conf) = b else { continue };
            let k = n.as_str();
            self.kernel_name(n).map_err(|err| e(&["vnic", k], err))?;
            if &conf.over == n {
                return Err(e(
                    &["vnic", k, "over"],
                    CoreError::invalid_argument(format!("VNIC {n} is over itself")),
                ));
            }
            let Some(link) = v.resolve(conf.over.as_str()) else {
                return Err(e(
                    &["vnic", k, "over"],
                    CoreError::not_found(format!("link {} does not exist", conf.over)),
                ));
            };
            ops::check_over(&v, conf.over.as_str(), &link, conf.vlan)
                .map_err(|err| e(&["vnic", k, "over"], err))?;
        }
        for (dev, _, b) in cur.st.phys.diff(&d.phys) {
            let Some(conf) = b else { continue };
            let k = dev.as_str();
            if v.hw.port(k).is_none() {
                return Err(e(
                    &["phys", k],
                    CoreError::not_found(format!("the hardware has no port {dev}")),
                ));
            }
            if let Some(n) = &conf.name {
                self.kernel_name(n).map_err(|err| e(&["phys", k, "name"], err))?;
            }
            let name = v.phys_name(dev);
            let was = cur.st.phys.get(dev).map(|c| &c.props);
            props("phys", k, name.as_str(), &Link::Phys(dev.clone()), was, &conf.props)?;
        }
        for (a, _, b) in cur.st.aggr.diff(&d.aggr) {
            let Some(conf) = b else { continue };
            let k = a.as_str();
            self.kernel_name(a).map_err(|err| e(&["aggr", k], err))?;
            for p in &conf.ports {
                if !matches!(v.resolve(p.as_str()), Some(Link::Phys(_))) {
                    return Err(e(
                        &["aggr", k, "ports"],
                        CoreError::not_found(format!("{p} is no physical link")),
                    ));
                }
                if d.aggr.iter().any(|(o, c)| o != a && c.ports.contains(p)) {
                    return Err(e(
                        &["aggr", k, "ports"],
                        CoreError::busy(format!("port {p} is in two aggregations")),
                    ));
                }
            }
            if let Some(m) = conf.mac
                && m.is_multicast()
            {
                return Err(e(
                    &["aggr", k, "mac"],
                    CoreError::invalid_argument(format!("{m} is not a unicast MAC address")),
                ));
            }
            let was = cur.st.aggr.get(a).map(|c| &c.props);
            props("aggr", k, k, &Link::Aggr(a.clone()), was, &conf.props)?;
        }
        // As create-vnic: one MAC per set of ports.
        type MacKey = (netadm_model::MacAddr, Vec<LinkName>);
        let mut macs: BTreeMap<MacKey, Vec<&LinkName>> = BTreeMap::new();
        for (n, c) in d.vnic.iter() {
            if c.vlan {
                continue;
            }
            let under = v.resolve(c.over.as_str()).map(|l| v.ports_under(&l)).unwrap_or_default();
            macs.entry((c.mac, under)).or_default().push(n);
        }
        for (n, _, b) in cur.st.vnic.diff(&d.vnic) {
            let Some(conf) = b else { continue };
            let k = n.as_str();
            if let Some(a) = v.aggr_of(&conf.over) {
                return Err(e(
                    &["vnic", k, "over"],
                    CoreError::busy(format!("{} is a port of {a}", conf.over)),
                ));
            }
            if !conf.vlan {
                if conf.mac.is_multicast() {
                    return Err(e(
                        &["vnic", k, "mac"],
                        CoreError::invalid_argument(format!(
                            "{} is not a unicast MAC address",
                            conf.mac
                        )),
                    ));
                }
                let under =
                    v.resolve(conf.over.as_str()).map(|l| v.ports_under(&l)).unwrap_or_default();
                let key = (conf.mac, under);
                if let Some(o) = macs.get(&key).and_then(|h| h.iter().find(|o| **o != n)) {
                    return Err(e(
                        &["vnic", k, "mac"],
                        CoreError::exists(format!(
                            "MAC address {} is already used by VNIC {o}",
                            conf.mac
                        )),
                    ));
                }
            }
            let was = cur.st.vnic.get(n).map(|c| &c.props);
            props("vnic", k, k, &Link::Vnic(n.clone()), was, &conf.props)?;
        }
        for (i, _, b) in cur.st.interface.diff(&d.interface) {
            if b.is_none() {
                continue;
            }
            let k = i.as_str();
            if v.resolve(k).is_none() {
                return Err(e(
                    &["interface", k],
                    CoreError::not_found(format!("IP interface {i}: no such link")),
                ));
            }
            if let Some(a) = v.aggr_of(i) {
                return Err(e(&["interface", k], CoreError::busy(format!("{i} is a port of {a}"))));
            }
            self.kernel_name(i).map_err(|err| e(&["interface", k], err))?;
            let Some(l) = v.resolve(k) else { continue };
            if matches!(l, Link::Etherstub(_)) {
                return Err(e(
                    &["interface", k],
                    CoreError::invalid_argument(format!(
                        "{i} is an etherstub; an IP interface goes on a VNIC over it"
                    )),
                ));
            }
            // Its properties, as set-ifprop checks them.
            let conf = b.expect("checked above");
            let zone = crate::mirror::zone_of(&v, &l);
            let link_mtu = v.mtu(&l);
            for (pk, val) in &conf.props {
                let checked = match (pk.split_once('.'), &zone) {
                    (_, Some(z)) => Err(CoreError::not_supported(format!(
                        "interface properties of {i}: its IP interface is in zone {z}, where netadm does not set them yet"
                    ))),
                    (Some((proto, name)), None) => {
                        crate::ifprop::Def::find(proto, name).and_then(|d| d.check(val, link_mtu))
                    }
                    (None, None) => Err(CoreError::invalid_argument(format!(
                        "interface property {pk:?}: expected PROTO.PROPERTY, e.g. ipv4.forwarding"
                    ))),
                };
                checked.map_err(|err| e(&["interface", k, "props", pk], err))?;
            }
        }
        // Addresses as create-addr and set-addrprop check them: one address
        // per IP, one DHCP and one addrconf object per interface, nothing
        // netadm does only in its own namespace on an interface in a zone.
        for (a, _, b) in cur.st.address.diff(&d.address) {
            let Some(conf) = b else { continue };
            let k = a.to_string();
            let zone =
                v.resolve(a.interface().as_str()).and_then(|l| crate::mirror::zone_of(&v, &l));
            if let Some(z) = zone
                && conf.kind == netadm_config::AddrType::Addrconf
            {
                return Err(e(
                    &["address", &k],
                    CoreError::not_supported(format!(
                        "{a}: its IP interface is in zone {z}, where netadm has no addrconf addresses yet"
                    )),
                ));
            }
            let clash = d.address.iter().find(|(o, c)| {
                *o != a
                    && match conf.kind {
                        netadm_config::AddrType::Static => {
                            conf.fixed_addr().is_some()
                                && c.fixed_addr().map(|x| x.0) == conf.fixed_addr().map(|x| x.0)
                        }
                        kind => o.interface() == a.interface() && c.kind == kind,
                    }
            });
            if let Some((o, _)) = clash {
                return Err(e(
                    &["address", &k],
                    CoreError::exists(format!("{a} clashes with address object {o}")),
                ));
            }
        }
        // Protocol properties, as set-prop checks them.
        for (pk, _, b) in cur.st.proto.diff(&d.proto) {
            let Some(val) = b else { continue };
            let checked = match pk.split_once('.') {
                Some((proto, name)) => {
                    crate::proto::Def::find(proto, name).and_then(|d| d.check(val))
                }
                None => Err(CoreError::invalid_argument(format!(
                    "protocol property {pk:?}: expected PROTO.PROPERTY, e.g. ipv4.ttl"
                ))),
            };
            checked.map_err(|err| e(&["proto", pk], err))?;
        }
        for (a, _, b) in cur.st.address.diff(&d.address) {
            if b.is_some() && !d.interface.contains_key(a.interface()) {
                let k = a.to_string();
                return Err(e(
                    &["address", &k],
                    CoreError::not_found(format!("no IP interface {}", a.interface())),
                ));
            }
        }
        // Everything else the configuration must keep (names used twice
        // across sections, VNICs over aggregation ports, ...).
        ops::check_state(&v)?;
        crate::vlan::check_room(&v)?;
        Ok(())
    }

    /// A link name as the kernel would take it for a device, when this
    /// netadmd makes kernel devices.
    fn kernel_name(&self, n: &LinkName) -> Result<(), CoreError> {
        if self.mirror.is_none() {
            return Ok(());
        }
        netadm_kernel::check_ifname(n.as_str())
            .map_err(|err| CoreError::invalid_name(format!("the kernel refuses the name: {err}")))
    }

    /// The plan of going from `cur` to `next` (and the persistent
    /// configuration from `persisted` to `next`): the configuration
    /// entries, each port's rings, the kernel's changes, the save.
    fn plan_apply(
        &self,
        cur: &LinkState,
        persisted: &LinkState,
        next: &LinkState,
    ) -> Result<Vec<PlanStep>, CoreError> {
        let mut steps = vec![];
        let (vf, vt) = (View { hw: &self.hw, st: cur }, View { hw: &self.hw, st: next });
        // Entries, removals first (what depends on a link goes before it),
        // then additions and changes (a link before what goes over it).
        fn section<K: Ord + Clone + std::fmt::Display, V: PartialEq + Clone>(
            what: &str,
            a: &netadm_config::Section<K, V>,
            b: &netadm_config::Section<K, V>,
            gone: &mut Vec<PlanStep>,
            come: &mut Vec<PlanStep>,
        ) {
            for (k, was, now) in a.diff(b) {
                let object = format!("{what} {k}");
                match (was, now) {
                    (Some(_), None) => gone.push(step("config", object, "delete".into())),
                    (None, Some(_)) => come.push(step("config", object, "create".into())),
                    _ => come.push(step("config", object, "modify".into())),
                }
            }
        }
        let (mut gone, mut come) = (vec![], vec![]);
        section("address", &cur.address, &next.address, &mut gone, &mut come);
        section("interface", &cur.interface, &next.interface, &mut gone, &mut come);
        section("vnic", &cur.vnic, &next.vnic, &mut gone, &mut come);
        section("etherstub", &cur.etherstub, &next.etherstub, &mut gone, &mut come);
        section("aggr", &cur.aggr, &next.aggr, &mut gone, &mut come);
        section("phys", &cur.phys, &next.phys, &mut gone, &mut come);
        section("protocol property", &cur.proto, &next.proto, &mut gone, &mut come);
        come.reverse();
        steps.extend(gone);
        steps.extend(come);
        // Rings: each port from its plan now to its plan under `next`.
        let ga = self.groups.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let gb = if !ga.is_empty() || crate::delta::group_asked(&vf, &vt) {
            self.assign_groups(next)?
        } else {
            groups::Groups::new()
        };
        let (a, b) = self.plans_of_change(cur, next, &ga, &gb);
        for ((p, a), b) in self.hw.ports().iter().zip(&a).zip(&b) {
            let (ra, rb) = (rings_of(a), rings_of(b));
            let stopped = ra.difference(&rb).count() as u32;
            let started = rb.difference(&ra).count() as u32;
            let restarted = if a.buf != b.buf { ra.intersection(&rb).count() as u32 } else { 0 };
            let regs = a.throttle != b.throttle
                || a.adaptive != b.adaptive
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
        // The kernel: addresses and devices that go, devices that come,
        // MTUs that follow their link, addresses that come.
        if self.mirror.is_some() {
            let k = |object: String, action: String| PlanStep {
                kernel_changes: 1,
                ..step("kernel", object, action)
            };
            // A DHCP or addrconf object has no address of its own.
            let addr = |a: &netadm_config::AddrConf| match a.kind {
                netadm_config::AddrType::Static => a.addr.clone(),
                kind => format!("the {} address", kind.as_str()),
            };
            for (o, was, now) in cur.address.diff(&next.address) {
                if let (Some(a), None) = (was, now) {
                    steps.push(k(format!("address {o}"), format!("remove {}", addr(a))));
                }
            }
            for (i, was, now) in cur.interface.diff(&next.interface) {
                if was.is_some() && now.is_none() {
                    steps.push(k(format!("interface {i}"), "remove the TAP device".into()));
                }
            }
            for (i, was, now) in cur.interface.diff(&next.interface) {
                if was.is_none() && now.is_some() {
                    let mtu = vt.resolve(i.as_str()).map_or(0, |l| vt.mtu(&l));
                    steps.push(k(
                        format!("interface {i}"),
                        format!("make a TAP device, mtu {mtu}, up"),
                    ));
                }
            }
            for i in next.interface.keys() {
                if !cur.interface.contains_key(i) {
                    continue;
                }
                let (Some(lf), Some(lt)) = (vf.resolve(i.as_str()), vt.resolve(i.as_str())) else {
                    continue;
                };
                if vf.mtu(&lf) != vt.mtu(&lt) {
                    steps.push(k(
                        format!("interface {i}"),
                        format!("set mtu {} (was {})", vt.mtu(&lt), vf.mtu(&lf)),
                    ));
                }
            }
            for (o, was, now) in cur.address.diff(&next.address) {
                if let (None, Some(a)) = (was, now) {
                    steps.push(k(format!("address {o}"), format!("add {}", addr(a))));
                }
            }
        }
        let entries = netadm_config::diff(persisted, next).len();
        if entries > 0 {
            steps.push(step(
                "persist",
                "links.toml".into(),
                format!("one save ({entries} entries change)"),
            ));
        }
        Ok(steps)
    }

    /// Reads every port's rings back from the hardware and compares them
    /// with the plans the ports were just driven to: each ring that should
    /// run is started with the planned buffers and its queues enabled in
    /// the device; no other ring runs.
    pub(crate) fn verify_rings(&self) -> Result<(), CoreError> {
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

    /// `apply`: makes the configuration `text` (a document in the
    /// `links.toml` schema, TOML or JSON) the running and persistent one,
    /// as one operation; with `dry_run` only plans it. With
    /// `confirm_timeout_s` > 0 it arms a checkpoint: unless
    /// [`Core::confirm`] comes within that many seconds, the configuration
    /// before is put back ([`Core::rollback_due`]), also after a restart.
    pub fn apply(
        &self,
        text: &str,
        dry_run: bool,
        confirm_timeout_s: u32,
        progress: Progress<'_>,
    ) -> Result<ApplyReport, CoreError> {
        let doc = Document::parse(text).map_err(|e| CoreError::invalid_argument(e.to_string()))?;
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        if dry_run {
            let _m = self.lock_mutation()?;
            let cur = self.running();
            let persisted = self.persisted_arc();
            self.check_document(&doc, &View { hw: &self.hw, st: &cur })?;
            let steps = self.plan_apply(&cur, &persisted, &doc.state)?;
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
            let (cur, persisted) = (self.running(), self.persisted_arc());
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
        let (mut steps, mut validated) = (vec![], false);
        let res = self.mutate_with("apply", "document", progress, true, |v, persisted, _t| {
            self.check_document(&doc, v)?;
            steps = self.plan_apply(v.st, persisted, &doc.state)?;
            validated = true;
            if confirm_timeout_s > 0 {
                let c = Checkpoint {
                    deadline: SystemTime::now() + Duration::from_secs(confirm_timeout_s.into()),
                    state: Arc::new(persisted.clone()),
                };
                if let Some(s) = &self.store {
                    s.save_checkpoint(ms(c.deadline), &c.state).map_err(|e| {
                        CoreError::persistence(format!("cannot arm the checkpoint: {e}"))
                    })?;
                }
                armed = Some(c);
            }
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
                let Some(Err(why)) = self.store.as_ref().map(|s| s.clear_checkpoint()) else {
                    return Err(e);
                };
                // It could not be removed: armed it stays, here too, so
                // that `confirm` (which removes it) or its deadline ends it.
                *cp = Some(c);
                self.checkpoint_cv.notify_all();
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
        let confirm_deadline_ms = armed.as_ref().map_or(0, |c| ms(c.deadline));
        if armed.is_some() {
            *cp = armed;
            self.checkpoint_cv.notify_all();
        }
        Ok(ApplyReport { changed: true, dry_run: false, steps, confirm_deadline_ms, result })
    }

    /// `confirm`: keeps what the last `apply --confirm-timeout` made and
    /// disarms its checkpoint.
    pub fn confirm(&self) -> Result<Report, CoreError> {
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        let t = Timing::new();
        if cp.is_none() {
            return Err(CoreError::not_found("no checkpoint is armed"));
        }
        if let Some(s) = &self.store {
            s.clear_checkpoint().map_err(|e| CoreError::persistence(e.to_string()))?;
        }
        *cp = None;
        self.checkpoint_cv.notify_all();
        let r = t.finish("confirm");
        self.record("confirm", Ok(&r), r.total_us);
        Ok(r)
    }

    /// `rollback`: puts back the configuration the armed checkpoint holds,
    /// now, through the pipeline, and disarms it.
    pub fn rollback(&self, progress: Progress<'_>) -> Result<Report, CoreError> {
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        self.rollback_armed(&mut cp, progress)
    }

    /// Rolls back the checkpoint in `cp`, whose lock the caller holds from
    /// deciding to until done (a confirm or a new apply cannot come in
    /// between), and disarms it.
    fn rollback_armed(
        &self,
        cp: &mut Option<Checkpoint>,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        let Some(c) = cp.clone() else {
            return Err(CoreError::not_found("no checkpoint is armed"));
        };
        let r = self.mutate_with("rollback", "checkpoint", progress, true, |_, _, _| {
            Ok(Change { running: LinkState::clone(&c.state), persisted: None, same: true })
        })?;
        if let Some(s) = &self.store {
            s.clear_checkpoint().map_err(|e| CoreError::persistence(e.to_string()))?;
        }
        *cp = None;
        self.checkpoint_cv.notify_all();
        Ok(r)
    }

    /// When the armed checkpoint rolls back (ms since the Unix epoch).
    pub fn checkpoint_deadline_ms(&self) -> Option<u64> {
        self.checkpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|c| ms(c.deadline))
    }

    /// Blocks until an armed checkpoint is due (true) or netadmd is
    /// stopping (false): woken by every arm, confirm and rollback, and by
    /// the deadline.
    pub fn wait_checkpoint_due(&self) -> bool {
        let mut g = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return false;
            }
            g = match &*g {
                None => self.checkpoint_cv.wait(g).unwrap_or_else(PoisonError::into_inner),
                Some(c) => match c.deadline.duration_since(SystemTime::now()) {
                    Err(_) => return true,
                    Ok(left) if left.is_zero() => return true,
                    Ok(left) => {
                        self.checkpoint_cv
                            .wait_timeout(g, left)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                },
            };
        }
    }

    /// Rolls back the armed checkpoint if it is due (no confirm came in
    /// time). `Ok(None)` if nothing was due. Should the rollback fail, the
    /// checkpoint stays armed and is tried again 10 s later.
    pub fn rollback_due(&self) -> Result<Option<Report>, CoreError> {
        let mut cp = self.checkpoint.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cp {
            Some(c) if c.deadline <= SystemTime::now() => {}
            _ => return Ok(None),
        }
        let r = self.rollback_armed(&mut cp, &|_, _, _| {});
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
    CoreError {
        kind: e.kind,
        message: format!("{which} failed: {}; everything was put back as it was", e.message),
    }
}

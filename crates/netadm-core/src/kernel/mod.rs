//! The kernel wing: the host's own network devices as netadm's links.
//! A kernel port (`class = "kernel"`) is a device the kernel's driver
//! owns; what is built over kernel ports is made of kernel devices —
//! a bond per aggregation, a bridge per kernel etherstub, an 802.1Q
//! device per VLAN, a macvlan in bridge mode per VNIC over a port, a veth
//! pair per VNIC over a kernel etherstub — named as their links, managed
//! over rtnetlink and ethtool netlink on one long-lived connection (and
//! one per zone a VNIC lives in).
//!
//! A change is the difference of the devices two configurations ask for
//! ([`devices`]): MTUs that come down first, deepest first
//! ([`Kernel::shrink`]); then devices that go (in one group delete per
//! namespace), devices that come (lowest first), properties, and MTUs that
//! go up, lowest first ([`Kernel::drive`]); every device the change
//! touched is read back. Making a device that is there already adopts it
//! when it is of the right kind, so a restarted netadmd takes up what the
//! last one made without a blip; one of the wrong kind is refused, by
//! name. Nothing here is undone when netadmd stops: the network outlives
//! the daemon.

mod bond;
pub(crate) mod defaults;
pub(crate) mod devices;
pub(crate) mod guard;
mod inbound;
pub(crate) mod port;
pub(crate) mod shaper;

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use netadm_config::{HardwareConfig, PortClass};
use netadm_datapath::flow::FlowCounts;
use netadm_kernel::{
    ChannelCounts, Class, Ethtool, Events, KernelError, LinkDetail, LinkKind, Netlink, Netns,
    NewLink, Offload, Rate, TcId, Touched,
};
use netadm_model::{FlowName, LinkName, PropName, PropValue};

use crate::ports::PhysPort;
use crate::timing::Timing;
use crate::view::{Link, View};
use crate::{CoreError, PlanStep};
use devices::{Dev, Key, What, Zone};
use port::KernelPort;

/// The link group netadm puts devices in to delete many in one request
/// (the kernel waits one RCU grace period per request, ~17 ms here).
const DELETE_GROUP: u32 = 0x6e61_6474;
/// A change that makes more new macvlans than this in netadmd's
/// namespace makes them together, and reads its devices back in one dump.
const MANY: usize = 8;

/// A zone's connection.
struct ZoneConn {
    ns: Netns,
    nl: Netlink,
}

/// The kernel ports and the connections that manage them.
pub(crate) struct Kernel {
    nl: Arc<Netlink>,
    /// Ethtool, for the ports' channels and offloads.
    eth: Arc<Ethtool>,
    ports: Vec<Arc<KernelPort>>,
    /// Each kernel port's device, by its device (port) name.
    ifnames: BTreeMap<LinkName, String>,
    zones: Mutex<BTreeMap<String, Arc<ZoneConn>>>,
    /// True until the configuration netadmd started with is in place: a
    /// device of the wrong kind under a configured name is then reported
    /// and left, not an error that stops the daemon.
    adopting: AtomicBool,
    /// Devices a configuration names that could not be made or adopted,
    /// and why (reported by the reads).
    trouble: Mutex<BTreeMap<Key, String>>,
    /// While a change is driven forward: the devices it made (what its
    /// undo may delete; a device it finds under a name it adds is not
    /// netadm's, and is refused).
    made: Mutex<Option<BTreeSet<Key>>>,
    /// The kernel's link notifications, for ports' devices that come and
    /// go; woken by `stop`.
    events: Events,
    stop: OwnedFd,
    /// The kernel VNICs' link protection rules.
    rules: guard::Rules,
    /// What the last change did that its verb's report should say (a
    /// bond's MTU changed member by member, its settings in place),
    /// handed to the verb's timing by [`Kernel::drive`].
    notes: Mutex<Vec<String>>,
    /// Each kernel flow's class, and the device it is on: where flowstat
    /// reads what it sent.
    flows: Mutex<BTreeMap<FlowName, (String, TcId)>>,
    /// The ports' channels and offloads as they were before netadm set
    /// them (and, through the mirror, the sysctls of the devices it puts
    /// IP interfaces on).
    defaults: Arc<defaults::Defaults>,
}

/// A kernel error as a core error, kind for kind.
pub(crate) fn kerr(e: KernelError) -> CoreError {
    match e {
        KernelError::Exists { what } => CoreError::exists(format!("{what} (in the kernel)")),
        KernelError::NotFound { what } => CoreError::not_found(format!("{what} (in the kernel)")),
        KernelError::BadName { name, reason } => {
            CoreError::invalid_name(format!("{name}: the kernel {reason}"))
        }
        e @ (KernelError::NotSupported { .. } | KernelError::NotApplied { .. }) => {
            CoreError::not_supported(e.to_string())
        }
        e @ (KernelError::BadZone { .. } | KernelError::Invalid { .. }) => {
            CoreError::invalid_value(e.to_string())
        }
        e => CoreError::hardware(e.to_string()),
    }
}

impl Kernel {
    /// The kernel ports of `cfg`, each read now; `None` when it has none.
    /// What netadm changed of them is remembered in state directory
    /// `state` (none: in memory).
    pub(crate) fn open(
        cfg: &HardwareConfig,
        state: Option<&std::path::Path>,
    ) -> Result<Option<Self>, CoreError> {
        let want: Vec<_> = cfg.ports.iter().filter(|p| p.class == PortClass::Kernel).collect();
        if want.is_empty() {
            return Ok(None);
        }
        let nl = Arc::new(Netlink::open().map_err(kerr)?);
        let eth = Arc::new(Ethtool::open().map_err(kerr)?);
        let mut ports = vec![];
        let mut ifnames = BTreeMap::new();
        for p in want {
            let ifname = p.interface.clone().expect("a kernel port names its device (checked)");
            ifnames.insert(p.name.clone(), ifname.clone());
            let port = KernelPort::open(p.name.clone(), ifname, nl.clone(), eth.clone());
            if port.index().is_none() {
                tracing::warn!(port = %p.name, interface = %port.interface(), "kernel port: its device is missing; its links are made when it appears");
            }
            ports.push(Arc::new(port));
        }
        Ok(Some(Self {
            nl,
            eth,
            ports,
            ifnames,
            zones: Mutex::default(),
            adopting: AtomicBool::new(true),
            trouble: Mutex::default(),
            made: Mutex::default(),
            events: Events::open().map_err(kerr)?,
            stop: netadm_kernel::eventfd().map_err(kerr)?,
            rules: guard::Rules::default(),
            flows: Mutex::default(),
            notes: Mutex::default(),
            defaults: Arc::new(defaults::Defaults::load(state)?),
        }))
    }

    /// Waits until a port's device comes, goes or is made anew (another
    /// interface index), and returns those ports; `None` once netadmd
    /// stops ([`Kernel::stop`]) or the notifications end.
    pub(crate) fn wait_ports(&self) -> Option<Vec<LinkName>> {
        loop {
            let touched = match self.events.wait(self.stop.as_raw_fd()) {
                Ok(Some(Touched::Zones)) => {
                    // A zone's name went: its connection, which would keep
                    // the namespace (and the devices in it) alive, goes.
                    let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
                    zones.retain(|_, c| c.ns.present());
                    continue;
                }
                Ok(Some(t)) => t,
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!(
                        "kernel notifications: {e}; kernel ports are no longer watched"
                    );
                    return None;
                }
            };
            let mut changed = vec![];
            for p in &self.ports {
                let before = p.index();
                // A missing device comes back under an index not known yet.
                let heard = match (&touched, before) {
                    (Touched::Indices(ix), Some(i)) => ix.contains(&i),
                    _ => true,
                };
                if heard && p.refresh_presence() != before {
                    changed.push(p.device().clone());
                }
            }
            if !changed.is_empty() {
                return Some(changed);
            }
        }
    }

    /// Keeps `s` for the report of the verb that runs ([`Kernel::drive`]
    /// hands it over).
    fn note(&self, s: String) {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner).push(s);
    }

    /// Ends [`Kernel::wait_ports`].
    pub(crate) fn stop(&self) {
        netadm_kernel::wake(&self.stop);
    }

    /// Brings every kernel device configuration `v` asks for into place
    /// again, as at start — adopting what is there, making what is
    /// missing, reporting what cannot be made — after ports' devices came
    /// or went. Undoes nothing: what stands stays.
    pub(crate) fn readopt(&self, v: &View<'_>, t: &mut Timing) -> Result<(), CoreError> {
        let empty = netadm_config::LinkState::default();
        let vf = View { hw: v.hw, st: &empty };
        let (a, b) = self.touched(&vf, v);
        let lowers = shaper::touched(&a, &b);
        self.adopting.store(true, Ordering::SeqCst);
        let res = self
            .apply(&a, &b)
            .and_then(|()| self.verify(&b))
            .and_then(|()| self.protect(&vf, v))
            .and_then(|()| self.shape(v, &lowers))
            .and_then(|()| self.hook(&b))
            .and_then(|()| self.open_ends(&b));
        self.adopting.store(false, Ordering::SeqCst);
        t.phase("kernel-links");
        res
    }

    /// `refresh-if` of a kernel link: its devices put back as `v` says —
    /// made again if they are gone, their MTU, MAC and state set — and
    /// read back; a VNIC's protection made anew on them, before what it
    /// sends can pass.
    pub(crate) fn put_back(&self, v: &View<'_>, l: &Link, t: &mut Timing) -> Result<(), CoreError> {
        let devs = wanted(v, &self.ifnames, |x| x == l);
        for (k, d) in &devs {
            self.ensure(k, d, Some(d))?;
        }
        let vnic = match l {
            Link::Vnic(n) => BTreeSet::from([n.clone()]),
            _ => BTreeSet::new(),
        };
        let res = self
            .verify(&devs)
            .and_then(|()| self.protect_vnics(v, v, vnic))
            .and_then(|()| self.open_ends(&devs));
        t.phase("kernel-links");
        res
    }

    /// Brings up the host ends of `b`'s veth pairs (a VNIC's over an
    /// etherstub, a guarded VNIC's over a port), which are made down:
    /// last, once the rules and shapers what the VNIC sends passes
    /// through stand, so that no frame of a protected VNIC's passes
    /// before its rules do. (Adopted ones are brought up too: a netadmd
    /// stopped between making one and this left it down.)
    fn open_ends(&self, b: &BTreeMap<Key, Dev>) -> Result<(), CoreError> {
        let ends: Vec<&str> = b
            .values()
            .filter_map(|d| match &d.what {
                What::Veth { peer, .. } | What::Guarded { peer } => Some(peer.as_str()),
                _ => None,
            })
            .collect();
        // Their state: one dump when they are many, a look-up each else.
        let found: Vec<LinkDetail> = if ends.len() > MANY {
            let all = self.nl.links().map_err(kerr)?;
            all.into_iter().filter(|l| ends.contains(&l.name.as_str())).collect()
        } else {
            let mut found = vec![];
            for e in ends {
                match self.nl.link_named(e) {
                    Ok(l) => found.push(l),
                    // Gone with its pair (an undo deleted it).
                    Err(KernelError::NotFound { .. }) => {}
                    Err(err) => return Err(kerr(err)),
                }
            }
            found
        };
        for l in found.iter().filter(|l| !l.up) {
            self.nl.set_link(l.index, Some(true), None).map_err(kerr)?;
        }
        Ok(())
    }

    /// The interface index of device `k` now, if it is there.
    pub(crate) fn index_of(&self, k: &Key) -> Option<u32> {
        self.find(k).ok().flatten().map(|l| l.index)
    }

    /// Its ports, as the machine's other ports.
    pub(crate) fn phys(&self) -> Vec<Arc<dyn PhysPort>> {
        self.ports.iter().map(|p| p.clone() as Arc<dyn PhysPort>).collect()
    }

    /// Whether link `l` of `v` is the kernel's.
    pub(crate) fn owns(&self, v: &View<'_>, l: &Link) -> bool {
        devices::owns(v, &self.ifnames, l)
    }

    /// The kernel device that is link `l` of `v` and the zone it lives
    /// in, when the kernel owns the link.
    pub(crate) fn device_of(&self, v: &View<'_>, l: &Link) -> Option<(Zone, String)> {
        self.owns(v, l).then(|| devices::device_of(v, &self.ifnames, l))
    }

    /// The configuration netadmd started with is in place: from now on a
    /// device that cannot be made is an error of the verb that asks.
    pub(crate) fn started(&self) {
        self.adopting.store(false, Ordering::SeqCst);
    }

    /// Why a device configuration `v` names is not as configured, if it is
    /// not (its port's device is missing, or one of another kind has its
    /// name).
    pub(crate) fn trouble(&self, v: &View<'_>, l: &Link) -> Option<String> {
        let key = self.device_of(v, l)?;
        self.trouble.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned()
    }

    /// A connection to where a device lives.
    fn conn(&self, zone: &Zone) -> Result<Conn<'_>, CoreError> {
        let Some(z) = zone else { return Ok(Conn::Host(&self.nl)) };
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = zones.get(z)
            && c.ns.present()
        {
            return Ok(Conn::Zone(c.clone()));
        }
        let ns = Netns::open(z).map_err(kerr)?;
        let nl = Netlink::open_in(&ns).map_err(kerr)?;
        let c = Arc::new(ZoneConn { ns, nl });
        zones.insert(z.clone(), c.clone());
        Ok(Conn::Zone(c))
    }

    /// The devices the change from `vf` to `vt` touches, as each
    /// configuration has them: every device of a link whose entry changed,
    /// and of the links over a port, aggregation or etherstub that did (a
    /// VNIC's MTU follows its link's).
    fn touched(&self, vf: &View<'_>, vt: &View<'_>) -> (BTreeMap<Key, Dev>, BTreeMap<Key, Dev>) {
        if vf.st.shares(vt.st) {
            return (BTreeMap::new(), BTreeMap::new());
        }
        let (from, to) = (vf.st, vt.st);
        let mut links: BTreeSet<Link> = BTreeSet::new();
        let mut under: BTreeSet<LinkName> = BTreeSet::new();
        for (d, _, _) in from.phys.diff(&to.phys) {
            links.insert(Link::Phys(d.clone()));
            under.insert(vf.phys_name(d));
            under.insert(vt.phys_name(d));
        }
        for (a, x, y) in from.aggr.diff(&to.aggr) {
            links.insert(Link::Aggr(a.clone()));
            for c in x.into_iter().chain(y) {
                for p in &c.ports {
                    for v in [vf, vt] {
                        if let Some(d) = v.device_of(p) {
                            links.insert(Link::Phys(d));
                        }
                    }
                }
            }
            under.insert(a.clone());
        }
        for (e, _, _) in from.etherstub.diff(&to.etherstub) {
            links.insert(Link::Etherstub(e.clone()));
            under.insert(e.clone());
        }
        for (n, _, _) in from.vnic.diff(&to.vnic) {
            links.insert(Link::Vnic(n.clone()));
        }
        // A flow is its link's: the link's shaper changes.
        for (_, x, y) in from.flow.diff(&to.flow) {
            for (c, v) in [(x, vf), (y, vt)] {
                links.extend(c.and_then(|c| v.resolve(c.link.as_str())));
            }
        }
        for u in &under {
            for v in [vf, vt] {
                links.extend(v.vnics_over(u).into_iter().map(|n| Link::Vnic(n.clone())));
            }
        }
        // A port something comes over comes up with it.
        let over: Vec<Link> = links.iter().cloned().collect();
        for l in &over {
            for v in [vf, vt] {
                links.extend(v.ports_under(l).into_iter().map(Link::Phys));
            }
        }
        // VNICs that tag with one VID over one link share its 802.1Q
        // device: all of them, so that it stays while one does.
        let tags: BTreeSet<(LinkName, u16)> = [vf, vt]
            .iter()
            .flat_map(|v| {
                links.iter().filter_map(|l| match l {
                    Link::Vnic(n) => {
                        v.st.vnic.get(n).and_then(|c| Some((c.over.clone(), c.vid?.into())))
                    }
                    _ => None,
                })
            })
            .collect();
        if !tags.is_empty() {
            for v in [vf, vt] {
                for (n, c) in &v.st.vnic {
                    if c.vid.is_some_and(|vid| tags.contains(&(c.over.clone(), vid.into()))) {
                        links.insert(Link::Vnic(n.clone()));
                    }
                }
            }
        }
        let pick = |v: &View<'_>| wanted(v, &self.ifnames, |l| links.contains(l));
        (pick(vf), pick(vt))
    }

    /// Before the ports change: MTUs that come down, deepest device first
    /// (a VNIC before its port). Whether it changed anything.
    pub(crate) fn shrink(&self, vf: &View<'_>, vt: &View<'_>) -> Result<bool, CoreError> {
        let (a, b) = self.touched(vf, vt);
        let mut down: Vec<(&Key, &Dev)> = b
            .iter()
            .filter(|(k, d)| a.get(*k).is_some_and(|o| o.same_device(d) && d.mtu < o.mtu))
            .collect();
        down.sort_by_key(|(_, d)| std::cmp::Reverse(d.layer));
        for (k, d) in &down {
            // A bond's members change with it, one at a time.
            if d.what == What::Port && d.master.is_some() {
                continue;
            }
            if let Some(l) = self.find_ours(k, d)? {
                if matches!(d.what, What::Bond(_)) {
                    self.bond_mtu(&l, d.mtu, &d.link)?;
                } else {
                    self.conn(&k.0)?.nl().set_link(l.index, None, Some(d.mtu)).map_err(kerr)?;
                }
            }
        }
        Ok(!down.is_empty())
    }

    /// Puts back what [`Kernel::shrink`] lowered for the change from `vf`
    /// to `vt` (when a later step of the change failed, or the shrink
    /// itself part way): each device's MTU as `vf` has it, the lowest
    /// layers first, as MTUs go up. A device already there is left alone.
    pub(crate) fn unshrink(&self, vf: &View<'_>, vt: &View<'_>) -> Result<(), CoreError> {
        let (a, b) = self.touched(vf, vt);
        let mut up: Vec<(&Key, &Dev)> = a
            .iter()
            .filter(|(k, o)| b.get(*k).is_some_and(|d| o.same_device(d) && d.mtu < o.mtu))
            .collect();
        up.sort_by_key(|(_, o)| o.layer);
        for (k, o) in up {
            if o.what == What::Port && o.master.is_some() {
                continue;
            }
            let Some(l) = self.find_ours(k, o)? else { continue };
            let differs = match o.what {
                What::Bond(_) => self.bond_out_of_step(&l, o.mtu)?,
                _ => l.mtu != o.mtu,
            };
            if differs {
                if matches!(o.what, What::Bond(_)) {
                    self.bond_mtu(&l, o.mtu, &o.link)?;
                } else {
                    self.conn(&k.0)?.nl().set_link(l.index, None, Some(o.mtu)).map_err(kerr)?;
                }
            }
        }
        Ok(())
    }

    /// Brings the kernel from `vf` to `vt`: devices that go, devices that
    /// come, properties, MTUs that go up; then reads back every device it
    /// touched. On failure, drives it back to `vf` and returns the error.
    pub(crate) fn drive(
        &self,
        vf: &View<'_>,
        vt: &View<'_>,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        let (a, b) = self.touched(vf, vt);
        if a == b {
            self.hand_notes(t);
            // Addresses may still change what a protected VNIC may send.
            return self.protect(vf, vt);
        }
        let lowers = shaper::touched(&a, &b);
        *self.made.lock().unwrap_or_else(PoisonError::into_inner) = Some(BTreeSet::new());
        let res = self
            .unhook(&a, &b)
            .and_then(|()| self.apply(&a, &b))
            .and_then(|()| self.verify(&b))
            .and_then(|()| {
                #[cfg(feature = "failpoints")]
                crate::failpoint_hold("core.kernel.protect");
                self.protect(vf, vt)
            })
            .and_then(|()| self.shape(vt, &lowers))
            .and_then(|()| self.hook(&b))
            .and_then(|()| self.open_ends(&b));
        let made = self.made.lock().unwrap_or_else(PoisonError::into_inner).take();
        t.phase("kernel-links");
        self.hand_notes(t);
        if res.is_ok() {
            // A device refused under a name that went is no longer the
            // configuration's concern.
            let mut refused = self.trouble.lock().unwrap_or_else(PoisonError::into_inner);
            refused.retain(|k, _| b.contains_key(k) || !a.contains_key(k));
        }
        if let Err(e) = res {
            // What was done is undone: from what the kernel has now to
            // what `vf` asks (making is adopting, deleting a device that
            // is not there is nothing). Of the devices `vt` adds, only
            // those this change made go: one it found is someone else's.
            let made = made.unwrap_or_default();
            let b: BTreeMap<Key, Dev> =
                b.into_iter().filter(|(k, _)| a.contains_key(k) || made.contains(k)).collect();
            if let Err(u) = self
                .unhook(&b, &a)
                .and_then(|()| self.apply(&b, &a))
                .and_then(|()| self.protect(vt, vf))
                .and_then(|()| self.shape(vf, &lowers))
                .and_then(|()| self.hook(&a))
                .and_then(|()| self.open_ends(&a))
            {
                return Err(CoreError::hardware(format!(
                    "{}; and putting the kernel back failed: {}",
                    e.message, u.message
                )));
            }
            return Err(e);
        }
        Ok(())
    }

    /// The notes kept since the last change, into the verb's timing.
    fn hand_notes(&self, t: &mut Timing) {
        for n in std::mem::take(&mut *self.notes.lock().unwrap_or_else(PoisonError::into_inner)) {
            t.note(n);
        }
    }

    /// Brings the shapers on devices `lowers` to what `v` asks for
    /// (`maxbw`, `priority`).
    fn shape(&self, v: &View<'_>, lowers: &BTreeSet<String>) -> Result<(), CoreError> {
        if lowers.is_empty() {
            return Ok(());
        }
        let all = wanted(v, &self.ifnames, |_| true);
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        let before: Vec<FlowName> = flows.keys().cloned().collect();
        for (dev, shares) in shaper::shares(&all, lowers) {
            let of = all.iter().find(|(k, _)| k.0.is_none() && k.1 == dev).map(|(_, d)| d);
            let link = of.map_or(dev.as_str(), |d| d.link.as_str());
            let line = of.map(|d| self.line(v, &d.of));
            let done = shaper::shape(&self.nl, &dev, link, line, &shares)?;
            for n in done.notes {
                self.note(n);
            }
            // What its flows receive is counted where they are shaped
            // (nft is asked only where there are or were flows).
            let had = flows.values().any(|(d, _)| *d == dev);
            if had || !done.flows.is_empty() {
                let inbound: Vec<([u8; 6], &shaper::FlowShare)> =
                    done.flows.iter().map(|(f, mac, _)| (*mac, f)).collect();
                inbound::count(&dev, &inbound)?;
            }
            flows.retain(|_, (d, _)| *d != dev);
            flows.extend(done.flows.into_iter().map(|(f, _, c)| (f.name, (dev.clone(), c))));
        }
        // The counters of flows no longer anywhere go.
        if before.iter().any(|f| !flows.contains_key(f)) {
            inbound::forget(&flows.keys().collect())?;
        }
        Ok(())
    }

    /// What each kernel flow has sent, by its class's counters (frames,
    /// bytes, frames dropped over its limits), and received, by its
    /// nftables rules' counters (frames and bytes let through, frames
    /// dropped over its `maxbw`).
    pub(crate) fn flow_counts(&self) -> BTreeMap<FlowName, FlowCounts> {
        let flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let mut by_dev: BTreeMap<&str, Vec<Class>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        if flows.is_empty() {
            return out;
        }
        let received = inbound::counted(flows.keys());
        for (f, (dev, id)) in &flows {
            if !by_dev.contains_key(dev.as_str()) {
                let read = self.nl.link_named(dev).and_then(|l| self.nl.classes(l.index));
                by_dev.insert(dev, read.unwrap_or_default());
            }
            let sent = by_dev[dev.as_str()].iter().find(|c| c.id == *id).map(|c| c.sent);
            let sent = sent.unwrap_or_default();
            let c = FlowCounts {
                opackets: sent.packets,
                obytes: sent.bytes,
                odrops: sent.drops,
                ..received.get(f).copied().unwrap_or_default()
            };
            out.insert(f.clone(), c);
        }
        out
    }

    /// Before ifbs go: the bridge ends that redirect to them stop (a
    /// redirect to a device that is gone drops every frame).
    fn unhook(&self, a: &BTreeMap<Key, Dev>, b: &BTreeMap<Key, Dev>) -> Result<(), CoreError> {
        for (k, d) in a {
            if let What::Ifb { from } = &d.what
                && b.get(k).is_none_or(|n| !n.same_device(d))
            {
                shaper::unhook(&self.nl, from)?;
            }
        }
        Ok(())
    }

    /// Each ifb of `b`: at its VNIC's `maxbw`, and its bridge end
    /// redirecting to it.
    fn hook(&self, b: &BTreeMap<Key, Dev>) -> Result<(), CoreError> {
        for (k, d) in b {
            if let What::Ifb { from } = &d.what
                && let Some(PropValue::Bandwidth(bw)) = d.props.get(&PropName::Maxbw)
            {
                shaper::hook(&self.nl, from, &k.1, &d.link, Rate(*bw), d.mtu)?;
            }
        }
        Ok(())
    }

    /// The line rate of link `l`: its ports' speeds, summed (0 when the
    /// kernel knows none).
    fn line(&self, v: &View<'_>, l: &Link) -> Rate {
        let mbit: u64 = v
            .ports_under(l)
            .iter()
            .filter_map(|d| self.ports.iter().find(|p| p.device() == d))
            .map(|p| p.status().speed)
            .sum();
        Rate::mbit(mbit)
    }

    /// What `drive` would do (an apply's plan), one step per device.
    pub(crate) fn plan_steps(&self, vf: &View<'_>, vt: &View<'_>) -> Vec<PlanStep> {
        let (a, b) = self.touched(vf, vt);
        let step = |k: &Key, action: String| PlanStep {
            kind: "kernel".into(),
            object: format!("device {}", k.1),
            action,
            kernel_changes: 1,
            ..Default::default()
        };
        let mut out = vec![];
        for (k, d) in &a {
            if d.what != What::Port && b.get(k).is_none_or(|n| !n.same_device(d)) {
                out.push(step(k, "delete".into()));
            }
        }
        let mut come: Vec<(&Key, &Dev)> = b.iter().collect();
        come.sort_by_key(|(_, d)| d.layer);
        for (k, d) in come {
            match a.get(k).filter(|o| o.same_device(d)) {
                None if d.what != What::Port => out.push(step(k, format!("make {}", describe(d)))),
                Some(o) if o != d => out.push(step(k, format!("set {}", changes(o, d)))),
                _ => {}
            }
        }
        out
    }

    /// The device `k`, if it exists.
    fn find(&self, k: &Key) -> Result<Option<LinkDetail>, CoreError> {
        match self.conn(&k.0)?.nl().link_named(&k.1) {
            Ok(l) => Ok(Some(l)),
            // A name the kernel cannot hold names no device.
            Err(KernelError::NotFound { .. } | KernelError::BadName { .. }) => Ok(None),
            Err(e) => Err(kerr(e)),
        }
    }

    /// Device `k`, when it is the one `d` describes: not one refused when
    /// netadmd started (someone else's under a configured name, left
    /// alone), and of `d`'s kind. What netadm deletes, re-sizes or builds
    /// on is only ever such a device.
    fn find_ours(&self, k: &Key, d: &Dev) -> Result<Option<LinkDetail>, CoreError> {
        if self.troubled(k) {
            return Ok(None);
        }
        Ok(self.find(k)?.filter(|l| kind_matches(l, d)))
    }

    /// Whether existing device `l` hangs where `d` says: a macvlan (in
    /// bridge mode) or VLAN over its lower device, a veth end paired with
    /// its peer (each in netadmd's namespace). `None` where the kernel
    /// does not say, or the device it should hang on is not there.
    fn hangs_as(&self, l: &LinkDetail, d: &Dev) -> Option<bool> {
        let on = match &d.what {
            What::Macvlan { lower } | What::GuardMac { lower } => {
                if l.macvlan_mode.is_some_and(|m| m != netadm_kernel::MacVlanMode::Bridge) {
                    return Some(false);
                }
                lower
            }
            What::Vlan { lower, .. } => lower,
            What::Veth { peer, .. } | What::Guarded { peer } => peer,
            _ => return Some(true),
        };
        let want = self.nl.link_named(on).ok()?.index;
        Some(l.lower? == want)
    }

    /// What netadm changed of the kernel's devices, as they were before.
    pub(crate) fn defaults(&self) -> Arc<defaults::Defaults> {
        self.defaults.clone()
    }

    /// Whether device `k` was refused (reported, left alone).
    fn troubled(&self, k: &Key) -> bool {
        self.trouble.lock().unwrap_or_else(PoisonError::into_inner).contains_key(k)
    }

    /// Makes the kernel's devices go from `a` to `b`.
    fn apply(&self, a: &BTreeMap<Key, Dev>, b: &BTreeMap<Key, Dev>) -> Result<(), CoreError> {
        // Devices that go, or come back as something else: in one group
        // delete per namespace.
        let mut gone: BTreeMap<Zone, Vec<u32>> = BTreeMap::new();
        for (k, d) in a {
            if d.what == What::Port || b.get(k).is_some_and(|n| n.same_device(d)) {
                continue;
            }
            // Only netadm's: a device refused at start under the name is
            // someone else's, and stays.
            if let Some(l) = self.find_ours(k, d)? {
                gone.entry(k.0.clone()).or_default().push(l.index);
            }
        }
        for (zone, ixs) in &gone {
            let c = self.conn(zone)?;
            let grouped = ixs.iter().try_for_each(|&i| c.nl().set_group(i, DELETE_GROUP));
            let deleted = grouped.and_then(|()| match c.nl().del_group(DELETE_GROUP) {
                Ok(()) | Err(KernelError::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            });
            if let Err(e) = deleted {
                // None may stay in the group: the next delete there would
                // take it too.
                for &i in ixs {
                    let _ = c.nl().set_group(i, 0);
                }
                return Err(kerr(e));
            }
        }
        // Ports that leave their bond.
        for (k, d) in b {
            if d.what == What::Port
                && d.master.is_none()
                && a.get(k).is_some_and(|o| o.master.is_some())
                && let Some(l) = self.find(k)?
                && l.master.is_some()
            {
                self.nl.set_master(l.index, None).map_err(kerr)?;
            }
        }
        // Devices that come, lowest first, and what changed in place; then
        // ports into their bonds (made by now), which come up in them.
        let mut come: Vec<(&Key, &Dev)> = b.iter().collect();
        come.sort_by_key(|(_, d)| d.layer);
        let together = self.together(&come)?;
        for layer in come.chunk_by(|x, y| x.1.layer == y.1.layer) {
            self.make_together(layer, &together)?;
            for (k, d) in layer.iter().filter(|(k, _)| !together.contains_key(*k)) {
                self.ensure(k, d, a.get(k).filter(|o| o.same_device(d)))?;
            }
        }
        for (k, d) in &come {
            let Some(m) = &d.master else { continue };
            // Not into a device refused at start under the bond's name.
            if self.troubled(&(None, m.clone())) {
                continue;
            }
            let (Some(l), Ok(bond)) = (self.find(k)?, self.nl.link_named(m)) else { continue };
            if l.master != Some(bond.index) {
                // A port joins its bond down, and comes up in it.
                self.nl.set_link(l.index, Some(false), None).map_err(kerr)?;
                self.nl
                    .set_master(l.index, Some(bond.index))
                    .map_err(|e| named(&d.link, kerr(e)))?;
                self.nl.set_link(l.index, Some(true), None).map_err(kerr)?;
            }
        }
        Ok(())
    }

    /// Of the devices that come, the new macvlans in netadmd's namespace
    /// over devices that are there, each with its lower device's index,
    /// when there are more than [`MANY`] (one dump says which are there):
    /// [`Kernel::make_together`] makes them, and [`Kernel::verify`] reads
    /// them back. Every other device, and all of them when they are few,
    /// go through [`Kernel::ensure`] one by one.
    fn together(&self, come: &[(&Key, &Dev)]) -> Result<BTreeMap<Key, u32>, CoreError> {
        let new = |(k, d): &&(&Key, &Dev)| k.0.is_none() && matches!(d.what, What::Macvlan { .. });
        if come.iter().filter(new).count() <= MANY {
            return Ok(BTreeMap::new());
        }
        let there: BTreeMap<String, u32> =
            self.nl.links().map_err(kerr)?.into_iter().map(|l| (l.name, l.index)).collect();
        Ok(come
            .iter()
            .filter(new)
            .filter(|(k, _)| !there.contains_key(&k.1))
            .filter_map(|(k, d)| Some(((*k).clone(), *there.get(d.lower()?)?)))
            .collect())
    }

    /// Makes the devices of `layer` that `together` names, their requests
    /// sent together, each as [`Kernel::make`] makes one.
    fn make_together(
        &self,
        layer: &[(&Key, &Dev)],
        together: &BTreeMap<Key, u32>,
    ) -> Result<(), CoreError> {
        let mine: Vec<(&Key, &Dev, u32)> =
            layer.iter().filter_map(|(k, d)| Some((*k, *d, *together.get(*k)?))).collect();
        if mine.is_empty() {
            return Ok(());
        }
        if let Some(made) = self.made.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            made.extend(mine.iter().map(|(k, ..)| (*k).clone()));
        }
        let reqs: Vec<(&str, u32, NewLink)> = mine
            .iter()
            .map(|(k, d, lower)| {
                (
                    k.1.as_str(),
                    *lower,
                    NewLink { mac: d.mac, mtu: Some(d.mtu), group: None, up: true },
                )
            })
            .collect();
        self.nl.add_macvlans(&reqs).map_err(kerr)?;
        let mut trouble = self.trouble.lock().unwrap_or_else(PoisonError::into_inner);
        for (k, ..) in &mine {
            trouble.remove(*k);
        }
        Ok(())
    }

    /// Makes device `k` as `d` says (it was `was`, if it is the same
    /// device): makes it if it is not there, adopts it if it is, and sets
    /// what differs.
    fn ensure(&self, k: &Key, d: &Dev, was: Option<&Dev>) -> Result<(), CoreError> {
        // A device refused at start is someone else's: left alone, and
        // refused, until netadmd starts again (or its name goes).
        if self.troubled(k) && !self.adopting.load(Ordering::SeqCst) {
            return Ok(());
        }
        let c = self.conn(&k.0)?;
        let nl = c.nl();
        let existing = self.find(k)?;
        let forward = self.made.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        let l = match existing {
            // A change that adds this device finds one there: not netadm's
            // (at start and after a port came back, what is there is
            // adopted instead).
            Some(_)
                if forward
                    && was.is_none()
                    && d.what != What::Port
                    && !self.adopting.load(Ordering::SeqCst) =>
            {
                return Err(CoreError::exists(format!(
                    "{}: the kernel has a device of that name that netadm did not make; netadm leaves it alone",
                    k.1
                )));
            }
            Some(l) => {
                // Adopted only when it is what the configuration
                // describes: of its kind, and (at start, when anything may
                // stand under a configured name) over its lower device,
                // paired with its peer, a macvlan in bridge mode.
                let hung = |l: &LinkDetail| {
                    !self.adopting.load(Ordering::SeqCst) || self.hangs_as(l, d).unwrap_or(true)
                };
                if !kind_matches(&l, d) || !hung(&l) {
                    let why = format!(
                        "{}: the kernel has a device of that name that is not {}",
                        k.1,
                        describe(d)
                    );
                    return self.refuse(k, why);
                }
                l
            }
            None if d.what == What::Port => {
                let why = format!("{}: the device is missing", k.1);
                return self.refuse_missing(k, why);
            }
            None => {
                let lower = match d.lower() {
                    // Not over a device refused at start under the lower's
                    // name (someone else's).
                    Some(low) if self.troubled(&(None, low.to_owned())) => {
                        let why = format!("{}: its lower device {low} is not netadm's", k.1);
                        return self.refuse_missing(k, why);
                    }
                    Some(low) => match self.find(&(None, low.to_owned()))? {
                        Some(l) => Some(l.index),
                        None => {
                            let why = format!("{}: its lower device {low} is missing", k.1);
                            return self.refuse_missing(k, why);
                        }
                    },
                    None => None,
                };
                self.make(k, d, lower)?;
                if k.0.is_none() && matches!(d.what, What::Macvlan { .. } | What::Bridge) {
                    // Made whole by its one request (MAC, MTU, up): nothing
                    // to set in place, and `verify` reads it back.
                    self.trouble.lock().unwrap_or_else(PoisonError::into_inner).remove(k);
                    return Ok(());
                }
                self.find(k)?.ok_or_else(|| {
                    CoreError::hardware(format!("{}: made, but the kernel does not have it", k.1))
                })?
            }
        };
        self.trouble.lock().unwrap_or_else(PoisonError::into_inner).remove(k);
        // In place: what differs from what the kernel has.
        if let What::Bond(spec) = &d.what {
            self.settle_bond(&l, spec, &d.link)?;
        }
        // A bond whose MTU this step changes (or puts back, after a failure
        // part way through its members), or adopted: its members are
        // looked at too, not only the bond's own MTU.
        let bond_members = matches!(d.what, What::Bond(_))
            && (was.is_none_or(|w| w.mtu != d.mtu) || self.adopting.load(Ordering::SeqCst));
        let differs = if bond_members { self.bond_out_of_step(&l, d.mtu)? } else { l.mtu != d.mtu };
        if differs && !(d.what == What::Port && d.master.is_some()) {
            if matches!(d.what, What::Bond(_)) {
                // Its members one at a time, then the bond.
                self.bond_mtu(&l, d.mtu, &d.link)?;
            } else {
                nl.set_link(l.index, None, Some(d.mtu)).map_err(kerr)?;
            }
        }
        if let Some(mac) = d.mac
            && l.mac != Some(mac)
        {
            nl.set_mac(l.index, mac).map_err(kerr)?;
        }
        if d.what == What::Port {
            self.port_props(&k.1, d, was)?;
        }
        // A veth pair's two ends carry one MTU (the larger end's frames
        // are dropped by the other): a switched VNIC's and a guarded one's.
        if let What::Veth { peer, .. } | What::Guarded { peer } = &d.what
            && let Some(end) = self.find(&(None, peer.clone()))?
            && end.mtu != d.mtu
        {
            self.nl.set_link(end.index, None, Some(d.mtu)).map_err(kerr)?;
        }
        if !l.up {
            nl.set_link(l.index, Some(true), None).map_err(kerr)?;
        }
        Ok(())
    }

    /// Refuses device `k`: at start it is reported and left (netadmd keeps
    /// running); later, an error of the verb that asked.
    fn refuse(&self, k: &Key, why: String) -> Result<(), CoreError> {
        if self.adopting.load(Ordering::SeqCst) {
            tracing::warn!(device = %k.1, zone = ?k.0, "kernel device not as configured: {why}");
            self.trouble.lock().unwrap_or_else(PoisonError::into_inner).insert(k.clone(), why);
            return Ok(());
        }
        Err(CoreError::exists(why))
    }

    /// [`Kernel::refuse`], for a device that is missing (a NotFound
    /// error of a verb).
    fn refuse_missing(&self, k: &Key, why: String) -> Result<(), CoreError> {
        self.refuse(k, why).map_err(|e| CoreError::not_found(e.message))
    }

    /// Makes device `k`; `lower_index` is the index of its lower device
    /// ([`Dev::lower`]), read by the caller.
    fn make(&self, k: &Key, d: &Dev, lower_index: Option<u32>) -> Result<(), CoreError> {
        if let Some(made) = self.made.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            made.insert(k.clone());
        }
        let opts = NewLink { mac: d.mac, mtu: Some(d.mtu), group: None, up: true };
        let zone = match &k.0 {
            Some(z) => Some(Netns::open(z).map_err(kerr)?),
            None => None,
        };
        let lower = |name: &str| {
            lower_index
                .ok_or_else(|| CoreError::not_found(format!("{}: no lower device {name}", k.1)))
        };
        match &d.what {
            What::Port => Ok(()),
            What::Bond(spec) => {
                self.nl
                    .add_bond(&k.1, spec, &NewLink { up: false, ..opts })
                    .map_err(|e| named(&d.link, kerr(e)))?;
                // Its clsact, for steering its frames while a member's MTU
                // changes (`bond`), put there while it is down: the
                // kernel deactivates a device that is up to put a qdisc
                // on it, and what the device sends meanwhile is dropped.
                // A kernel without sch_ingress steers nothing.
                if let Ok(b) = self.nl.link_named(&k.1) {
                    let _ = self.nl.add_clsact(b.index);
                }
                Ok(())
            }
            What::Bridge => self.nl.add_bridge(&k.1, &opts).map_err(kerr),
            What::Ifb { .. } => self.nl.add_ifb(&k.1, &opts).map_err(kerr),
            What::Vlan { lower: l, vid } => {
                self.nl
                    .add_vlan(&k.1, lower(l)?, *vid, &opts)
                    .map_err(|e| named(&d.link, kerr(e)))?;
                if d.layer == devices::VNIC_TAG_LAYER {
                    // The 802.1Q device VNICs tagging with one VID share
                    // is plumbing with no address: it must not answer ARP
                    // for its VNICs' addresses with its own MAC (the
                    // kernel answers for any local address by default).
                    use netadm_kernel::sysctl::{Family, set};
                    set(Family::V4, &k.1, "arp_ignore", "1").map_err(kerr)?;
                }
                if let Some(z) = &zone {
                    let i = self.nl.link_named(&k.1).map_err(kerr)?.index;
                    if let Err(e) = self.nl.move_to(i, z) {
                        // Not left behind here, where nothing looks for it
                        // (and every retry would find its name taken).
                        let _ = self.nl.del_link(i);
                        return Err(kerr(e));
                    }
                }
                Ok(())
            }
            What::Macvlan { lower: l } => {
                self.nl.add_macvlan(&k.1, lower(l)?, &opts, zone.as_ref()).map_err(kerr)
            }
            What::Guarded { peer } => guard::make_veth(&self.nl, k, peer, zone.as_ref(), &opts),
            What::GuardMac { lower: l } => guard::make_stand_in(&self.nl, &k.1, lower(l)?, &opts),
            What::Veth { peer, bridge } => {
                let b = lower(bridge)?;
                // The bridge's end is made here, down until what the VNIC
                // sends through it is governed ([`Kernel::open_ends`]); the
                // VNIC's end where the VNIC lives, with the VNIC's MAC,
                // then brought up there.
                let host = NewLink { mac: None, up: false, ..opts.clone() };
                self.nl.add_veth(peer, &k.1, &host, zone.as_ref()).map_err(kerr)?;
                let end = self.nl.link_named(peer).map_err(kerr)?.index;
                self.nl.set_master(end, Some(b)).map_err(kerr)
            }
        }
    }

    /// A port's channels and offloads, as its properties say. A setting
    /// netadm sets is remembered as the kernel had it first; unset, it
    /// goes back to that ([`defaults`]), or stays as the kernel has it
    /// when netadm never set it.
    fn port_props(&self, ifname: &str, d: &Dev, was: Option<&Dev>) -> Result<(), CoreError> {
        let eth = &self.eth;
        let rings = |dev: Option<&Dev>| {
            [PropName::RxRings, PropName::TxRings]
                .iter()
                .filter_map(|p| dev?.props.get(p).and_then(PropValue::as_uint))
                .max()
                .filter(|n| *n > 0)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        const CHANNELS: [&str; 3] = ["combined", "rx", "tx"];
        let want = match rings(Some(d)) {
            Some(n) => {
                self.defaults.remember(ifname, &CHANNELS, || {
                    let ch = eth.channels(ifname).map_err(kerr)?;
                    let counts = [ch.combined.count, ch.rx.count, ch.tx.count];
                    Ok(CHANNELS.iter().map(|k| k.to_string()).zip(counts.map(u64::from)).collect())
                })?;
                (rings(was) != Some(n)).then_some([n; 3])
            }
            None => {
                let back = CHANNELS.map(|k| self.defaults.recall(ifname, k));
                back.iter()
                    .all(Option::is_some)
                    .then(|| back.map(|c| u32::try_from(c.unwrap_or(0)).unwrap_or(u32::MAX)))
            }
        };
        if let Some([combined, rx, tx]) = want {
            let ch = eth.channels(ifname).map_err(kerr)?;
            let want = if ch.combined.max > 0 {
                ChannelCounts { combined: Some(combined), ..Default::default() }
            } else {
                ChannelCounts { rx: Some(rx), tx: Some(tx), ..Default::default() }
            };
            eth.set_channels(ifname, &want).map_err(|e| named(&d.link, kerr(e)))?;
        }
        if rings(Some(d)).is_none() {
            self.defaults.forget(ifname, &CHANNELS)?;
        }
        // Offloads, which depend on each other (TSO needs transmit
        // checksums: the kernel turns it off with them). All three are
        // remembered as the kernel had them when netadm first set any,
        // before it changes one, and forgotten when none is set any more.
        let offloads = [
            (PropName::Tso, Offload::Tso),
            (PropName::TxCsum, Offload::TxChecksum),
            (PropName::RxCsum, Offload::RxChecksum),
        ];
        let keys = offloads.map(|(p, _)| p.as_str());
        let any_set = offloads.iter().any(|(p, _)| d.props.contains_key(p));
        if any_set {
            self.defaults.remember(ifname, &keys, || {
                let f = eth.features(ifname).map_err(kerr)?;
                Ok(offloads
                    .iter()
                    .filter_map(|(p, o)| {
                        Some((p.as_str().to_owned(), u64::from(f.offload(*o)?.on)))
                    })
                    .collect())
            })?;
        }
        let old = |p: PropName| was.and_then(|w| w.props.get(&p));
        let changed = offloads.iter().any(|(p, _)| old(*p) != d.props.get(p));
        // What is set and changed; and, when anything changed, what is
        // unset, back to what the kernel had (a reset, or a dependency
        // that kept it from going back before).
        let mut changes: Vec<(Offload, bool, bool)> = offloads
            .into_iter()
            .filter_map(|(p, o)| match d.props.get(&p) {
                Some(v) if old(p) != Some(v) => Some((o, v.as_bool()?, true)),
                Some(_) => None,
                None if changed => Some((o, self.defaults.recall(ifname, p.as_str())? == 1, false)),
                None => None,
            })
            .collect();
        // What comes on, checksums first; what goes off, TSO first.
        changes.sort_by_key(|(o, on, _)| (*on, (*o == Offload::Tso) == *on));
        for (o, on, asked) in changes {
            match eth.set_offload(ifname, o, on) {
                Ok(_) => {}
                Err(e) if asked => return Err(named(&d.link, kerr(e))),
                // Back to the kernel's own value: as far as the set ones
                // let it (it goes back when they are unset too).
                Err(e) => self.note(format!("{}: {o:?} stays as it is for now: {e}", d.link)),
            }
        }
        if any_set { Ok(()) } else { self.defaults.forget(ifname, &keys) }
    }

    /// Reads back every device of `b`: there, of its kind, at its MTU, up.
    fn verify(&self, b: &BTreeMap<Key, Dev>) -> Result<(), CoreError> {
        let trouble = self.trouble.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // Many devices in netadmd's namespace: read back in one dump.
        let dump: Option<BTreeMap<String, LinkDetail>> =
            if b.keys().filter(|k| k.0.is_none()).count() > MANY {
                let all = self.nl.links().map_err(kerr)?;
                Some(all.into_iter().map(|l| (l.name.clone(), l)).collect())
            } else {
                None
            };
        for (k, d) in b {
            if trouble.contains_key(k) {
                continue;
            }
            let read = match (&k.0, &dump) {
                (None, Some(all)) => all.get(&k.1).cloned(),
                _ => self.find(k)?,
            };
            let Some(l) = read else {
                return Err(CoreError::hardware(format!(
                    "{}: read back, the kernel has no device {}",
                    d.link, k.1
                )));
            };
            if let What::Bond(spec) = &d.what
                && let Some(have) = &l.bond
                && !have.differs(spec).is_empty()
            {
                return Err(CoreError::hardware(format!(
                    "{}: read back, bond {} is {have:?}; expected {spec:?}",
                    d.link, k.1
                )));
            }
            let mtu_ok = l.mtu == d.mtu || (d.what == What::Port && d.master.is_some());
            if !kind_matches(&l, d) || !mtu_ok || !l.up {
                return Err(CoreError::hardware(format!(
                    "{}: read back, device {} is {:?} mtu {} {}; expected {} mtu {} up",
                    d.link,
                    k.1,
                    l.kind,
                    l.mtu,
                    if l.up { "up" } else { "down" },
                    describe(d),
                    d.mtu
                )));
            }
        }
        Ok(())
    }
}

/// A connection: netadmd's own, or a zone's.
enum Conn<'a> {
    Host(&'a Netlink),
    Zone(Arc<ZoneConn>),
}

impl Conn<'_> {
    fn nl(&self) -> &Netlink {
        match self {
            Conn::Host(nl) => nl,
            Conn::Zone(z) => &z.nl,
        }
    }
}

/// Whether the kernel's device `l` is what `d` asks for.
fn kind_matches(l: &LinkDetail, d: &Dev) -> bool {
    match &d.what {
        What::Port => true,
        What::Bond(_) => l.kind == Some(LinkKind::Bond),
        What::Bridge => l.kind == Some(LinkKind::Bridge),
        What::Vlan { vid, .. } => l.kind == Some(LinkKind::Vlan) && l.vlan_id == Some(*vid),
        What::Macvlan { .. } | What::GuardMac { .. } => l.kind == Some(LinkKind::MacVlan),
        What::Guarded { .. } => l.kind == Some(LinkKind::Veth),
        What::Veth { .. } => l.kind == Some(LinkKind::Veth),
        What::Ifb { .. } => l.kind == Some(LinkKind::Ifb),
    }
}

/// A device's kind in words.
fn describe(d: &Dev) -> String {
    match &d.what {
        What::Port => "a port".into(),
        What::Bond(s) => format!("a bond ({:?})", s.mode),
        What::Bridge => "a bridge".into(),
        What::Vlan { lower, vid } => format!("VLAN {vid} over {lower}"),
        What::Macvlan { lower } => format!("a macvlan over {lower}"),
        What::Guarded { peer } => format!("a veth guarded by netadm's rules on {peer}"),
        What::GuardMac { lower } => {
            format!("a macvlan over {lower} standing in for a guarded VNIC")
        }
        What::Veth { bridge, .. } => format!("a veth into {bridge}"),
        What::Ifb { from } => format!("an ifb shaping what {from} receives"),
    }
}

/// What differs between `a` and `b`, in words.
fn changes(a: &Dev, b: &Dev) -> String {
    let mut v = vec![];
    if a.mtu != b.mtu {
        v.push(format!("mtu {} (was {})", b.mtu, a.mtu));
    }
    if a.mac != b.mac {
        v.push("its MAC".into());
    }
    if a.master != b.master {
        v.push(match &b.master {
            Some(m) => format!("into {m}"),
            None => "out of its bond".into(),
        });
    }
    if a.props != b.props {
        v.push("its channels, offloads or bandwidth".into());
    }
    v.join(", ")
}

/// `e`, naming link `link` when it does not.
fn named(link: &LinkName, e: CoreError) -> CoreError {
    if e.message.contains(link.as_str()) {
        return e;
    }
    CoreError { message: format!("{link}: {}", e.message), ..e }
}

/// The devices a configuration asks for (as [`devices::devices`] says),
/// each protected VNIC over a port built so that rules can guard it
/// ([`guard::guarded`]).
fn wanted(
    v: &View<'_>,
    ports: &BTreeMap<LinkName, String>,
    want: impl Fn(&Link) -> bool,
) -> BTreeMap<Key, Dev> {
    let mut out = devices::devices(v, ports, want);
    guard::guarded(v, &mut out);
    out
}

//! The kernel mirror: every IP interface is a TAP device in the daemon's
//! network namespace — or, for a VNIC with a `zone`, in that network
//! namespace — configured over rtnetlink (the daemon's one connection, or
//! the zone's) and read back after every change. Frames the kernel sends
//! on the TAP cross the virtual switch of the link it is on
//! (`netadm_datapath::switch`: to another interface over the same port,
//! aggregation or etherstub directly) and otherwise go out through the
//! link's transmit path; frames the link's ports receive for the TAP's MAC
//! (and broadcast/multicast) are written to the TAP.

pub(crate) mod addrprop;
pub(crate) mod dhcp;
pub(crate) mod drift;
pub(crate) mod iface;
pub(crate) mod ifprop;
pub(crate) mod proto;
pub(crate) mod tap;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use netadm_config::AddrType;
use netadm_datapath::VSwitch;
use netadm_datapath::protect::{Guard, GuardCounts};
use netadm_kernel::{KernelError, Netlink, Netns, PacketSocket, Tap, sysctl};
use netadm_model::{AddrObj, LinkName, PropName};

use crate::CoreError;
use crate::timing::Timing;
use crate::view::View;
use drift::Watcher;
pub(crate) use iface::link_local;
use iface::{Drift, MirrorIf, Zone};
use tap::{Out, reader, writer};

/// The TAP devices and the rtnetlink handle.
pub(crate) struct Mirror {
    /// Stopped first: it holds the other two.
    _watch: Watcher,
    nl: Arc<Netlink>,
    ifs: Arc<Mutex<BTreeMap<LinkName, MirrorIf>>>,
    /// The virtual switch of each link interfaces are on (a port, an
    /// aggregation or an etherstub), made with its first interface.
    switches: Mutex<HashMap<crate::Link, Arc<VSwitch>>>,
    /// The zones opened so far, by name as configured (the watcher lets
    /// go of those whose name goes).
    zones: drift::Zones,
    /// Each VNIC's link protection and its books, kept while the VNIC is
    /// (across its interface's deletion and making anew).
    guards: Mutex<BTreeMap<LinkName, Arc<Guard>>>,
    /// The sysctls of kernel devices it put IP interfaces on, as they
    /// were: put back when the interface goes ([`ATTACHED_SYSCTLS`]).
    defaults: Option<Arc<crate::kernel::defaults::Defaults>>,
}

/// The sysctls the mirror writes on a kernel device it puts an IP
/// interface on (SLAAC off, interface properties), by family and key:
/// what they were is remembered, and put back when the interface goes.
/// (Not the IPv6 MTU: the kernel sets it anew whenever the link's MTU
/// changes, so what it was goes stale.)
const ATTACHED_SYSCTLS: [(sysctl::Family, &str); 4] = [
    (sysctl::Family::V6, "accept_ra"),
    (sysctl::Family::V6, "autoconf"),
    (sysctl::Family::V4, "forwarding"),
    (sysctl::Family::V6, "forwarding"),
];

/// The keys of [`ATTACHED_SYSCTLS`] in the defaults.
fn attached_sysctl_keys() -> Vec<String> {
    ATTACHED_SYSCTLS.iter().map(|(f, k)| sysctl_key(*f, k)).collect()
}

/// Forgets what the sysctls of the device at `at` (its defaults key)
/// were: they were put back, or the device is gone.
fn forget_attached_sysctls(d: &crate::kernel::defaults::Defaults, at: &str) {
    let keys = attached_sysctl_keys();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    if let Err(e) = d.forget(at, &keys) {
        tracing::warn!(device = at, "{e}");
    }
}

/// A sysctl's key in the defaults: `ipv4/forwarding`.
fn sysctl_key(f: sysctl::Family, key: &str) -> String {
    let proto = match f {
        sysctl::Family::V4 => "ipv4",
        sysctl::Family::V6 => "ipv6",
    };
    format!("{proto}/{key}")
}

/// Device `dev`'s name in the defaults: `ZONE/dev` in a zone.
fn device_key(zone: Option<&str>, dev: &str) -> String {
    zone.map_or_else(|| dev.to_owned(), |z| format!("{z}/{dev}"))
}

/// The zone link `l`'s IP interface lives in: a VNIC's `zone` property.
/// Whatever the VNIC is over (a port, an aggregation, anything later).
pub(crate) fn zone_of(v: &View<'_>, l: &crate::Link) -> Option<String> {
    match l {
        crate::Link::Vnic(_) => {
            v.prop(l, PropName::Zone).and_then(|z| z.as_text().map(str::to_owned))
        }
        _ => None,
    }
}

/// `zone` may not change under an IP interface (dladm: "link busy").
pub(crate) fn zone_unused(v: &View<'_>, link: &str) -> Result<(), CoreError> {
    if v.st.interface.keys().any(|n| n.as_str() == link) {
        return Err(CoreError::busy(format!(
            "zone on {link}: IP interface {link} exists; delete-if {link} first"
        )));
    }
    Ok(())
}

/// Checks `zone=VALUE` on link `link`: no IP interface on it, and a zone
/// that names a network namespace netadmd can enter. Changes nothing.
pub(crate) fn check_zone(v: &View<'_>, link: &str, zone: &str) -> Result<(), CoreError> {
    zone_unused(v, link)?;
    Netns::open(zone).map(drop).map_err(kerr)
}

fn kerr(e: KernelError) -> CoreError {
    match e {
        KernelError::Exists { what } => CoreError::exists(format!("{what} (in the kernel)")),
        KernelError::NotFound { what } => CoreError::not_found(format!("{what} (in the kernel)")),
        KernelError::BadName { name, reason } => {
            CoreError::invalid_name(format!("{name}: the kernel {reason}"))
        }
        e @ KernelError::BadZone { .. } => CoreError::invalid_value(e.to_string()),
        e => CoreError::hardware(e.to_string()),
    }
}

impl Mirror {
    /// The mirror; `defaults` keeps what the sysctls of the kernel
    /// devices it puts IP interfaces on were (none without kernel ports).
    pub(crate) fn open(
        hw: Arc<crate::Hardware>,
        defaults: Option<Arc<crate::kernel::defaults::Defaults>>,
    ) -> Result<Self, CoreError> {
        // One rtnetlink connection for the changes and read-backs, another
        // for the notifications the drift watcher hears: a burst of
        // notifications (a hundred devices deleted at once) overruns a
        // socket, and on a shared one the replies to requests were lost
        // with them (each such request then waited out its 5 s).
        let nl = Netlink::open().map_err(kerr)?;
        let events = netadm_kernel::Events::open().map_err(kerr)?;
        let nl = Arc::new(nl);
        let ifs = Arc::new(Mutex::new(BTreeMap::new()));
        let zones = drift::Zones::default();
        let watch =
            Watcher::start(events, ifs.clone(), zones.clone(), nl.clone(), hw, defaults.clone())?;
        Ok(Self {
            _watch: watch,
            nl,
            ifs,
            switches: Mutex::default(),
            zones,
            guards: Mutex::default(),
            defaults,
        })
    }

    /// Link `n`'s guard, made on first use.
    fn guard(&self, n: &LinkName) -> Arc<Guard> {
        let mut g = self.guards.lock().unwrap_or_else(PoisonError::into_inner);
        g.entry(n.clone()).or_default().clone()
    }

    /// The books of every guarded link's protection (links whose
    /// interface had a policy once).
    pub(crate) fn guard_counts(&self) -> Vec<(LinkName, bool, GuardCounts)> {
        let g = self.guards.lock().unwrap_or_else(PoisonError::into_inner);
        g.iter()
            .map(|(n, g)| (n.clone(), g.current().is_some(), g.counts()))
            .filter(|(_, on, c)| *on || c.passed > 0 || c.drops.iter().any(|d| *d > 0))
            .collect()
    }

    /// The kernel's counters of the devices named as `links`, each in its
    /// zone (`None`: netadmd's own namespace): a VNIC's or VLAN's device
    /// (its interface's TAP over emulated links; its macvlan, veth end or
    /// 802.1Q device over kernel ones). One dump a namespace; a link whose
    /// device is not there (no IP interface over emulated links, a zone
    /// that is gone) has none.
    pub(crate) fn device_counters(
        &self,
        links: &[(LinkName, Option<String>)],
    ) -> BTreeMap<LinkName, netadm_kernel::LinkCounters> {
        let mut by_zone: BTreeMap<Option<&str>, Vec<&LinkName>> = BTreeMap::new();
        for (n, z) in links {
            by_zone.entry(z.as_deref()).or_default().push(n);
        }
        let mut out = BTreeMap::new();
        for (z, names) in by_zone {
            let dump = match z {
                None => self.nl.link_counters(),
                Some(z) => self.zone(z).and_then(|z| z.nl.link_counters()),
            };
            let Ok(mut dump) = dump else { continue };
            for n in names {
                if let Some(c) = dump.remove(n.as_str()) {
                    out.insert(n.clone(), c);
                }
            }
        }
        out
    }

    /// Zone `z`, opened (again, if its name no longer names the namespace
    /// opened before).
    fn zone(&self, z: &str) -> Result<Arc<Zone>, KernelError> {
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(zone) = zones.get(z)
            && zone.ns.present()
        {
            return Ok(zone.clone());
        }
        let ns = Netns::open(z)?;
        let nl = Arc::new(Netlink::open_in(&ns)?);
        let zone = Arc::new(Zone { ns, nl });
        zones.insert(z.to_owned(), zone.clone());
        Ok(zone)
    }

    /// How interface `name`'s device differs from what was set, if it does.
    /// One in a zone is looked at now (the daemon hears only its own
    /// namespace's notifications): its zone may have been deleted.
    pub(crate) fn drift(&self, name: &LinkName) -> Option<Drift> {
        let mut ifs = self.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        let i = ifs.get_mut(name)?;
        if i.zone.is_some() {
            let now = drift::evaluate(name, i);
            drift::note(name, i, now);
        }
        i.drift.clone()
    }

    /// Lets go of interface `name`'s device (`refresh-if`): the caller
    /// drops it (stopping its DHCP clients and reader), not under the
    /// interfaces' lock.
    /// The interface index of interface `name`'s device, as last made or
    /// found (`None`: unknown, or missing).
    pub(crate) fn index_of(&self, name: &LinkName) -> Option<u32> {
        let ifs = self.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        ifs.get(name).map(|i| i.index).filter(|i| *i != 0)
    }

    pub(crate) fn forget(&self, name: &LinkName) -> Option<MirrorIf> {
        let mut ifs = self.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        ifs.remove(name)
    }

    /// The switch of link `l`, made on first use; switches no interface is
    /// on any more are let go.
    fn switch(&self, l: crate::Link) -> Arc<VSwitch> {
        let mut m = self.switches.lock().unwrap_or_else(PoisonError::into_inner);
        m.retain(|k, s| *k == l || !s.is_empty() || Arc::strong_count(s) > 1);
        m.entry(l).or_default().clone()
    }

    /// What address object `obj`'s DHCP client holds, if it has one.
    pub(crate) fn dhcp_status(&self, obj: &AddrObj) -> Option<dhcp::Status> {
        let ifs = self.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        ifs.get(obj.interface()).and_then(|i| i.dhcp.get(obj)).map(|c| c.status())
    }

    /// Waits until address object `obj`'s DHCP client holds a lease, or
    /// `deadline`; whether it does. The interfaces' lock is held only to
    /// find the client, not while waiting.
    pub(crate) fn wait_lease(&self, obj: &AddrObj, deadline: std::time::Instant) -> bool {
        let watch = {
            let ifs = self.ifs.lock().unwrap_or_else(PoisonError::into_inner);
            ifs.get(obj.interface()).and_then(|i| i.dhcp.get(obj)).map(|c| c.watch())
        };
        watch.is_some_and(|w| w.wait_bound(deadline))
    }

    /// The IPv6 addresses the kernel has on interface `name` that netadm
    /// did not set (link-local and SLAAC ones), link-local first.
    pub(crate) fn addrconf_addrs(&self, name: &LinkName) -> Vec<(IpAddr, u8)> {
        let ifs = self.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(i) = ifs.get(name) else { return vec![] };
        let mut v: Vec<(IpAddr, u8)> =
            i.nl.addrs(i.index)
                .unwrap_or_default()
                .into_iter()
                .filter(|a| a.0.is_ipv6() && !i.want_addrs.contains(a))
                .collect();
        v.sort_by_key(|a| !link_local(&a.0));
        v
    }

    /// The kernel device of an interface, if one was made.
    pub(crate) fn device(&self, name: &LinkName) -> Option<String> {
        self.ifs.lock().unwrap_or_else(PoisonError::into_inner).get(name).and_then(|i| {
            let tap = match &i.tap {
                Some(t) => t.name(),
                None if i.attached => i.dev.as_str(),
                None => return None,
            };
            Some(match &i.zone {
                Some(z) => format!("{tap}@{z}"),
                None => tap.to_owned(),
            })
        })
    }
}

/// The offloads an interface's TAP offers the kernel: (tx-csum, tso), as
/// the link's properties (a VNIC: those of the link it is over) allow and
/// every port under it can do.
fn offloads(v: &View<'_>, l: &crate::Link) -> (bool, bool) {
    use crate::Link;
    use netadm_model::PropName;
    let own = match l {
        Link::Vnic(n) => v.st.vnic.get(n).and_then(|x| v.resolve(x.over.as_str())),
        l => Some(l.clone()),
    };
    let prop = |n: PropName| {
        own.as_ref().and_then(|o| v.prop(o, n)).and_then(|x| x.as_bool()).unwrap_or(true)
    };
    let ports: Vec<netadm_nic::Offloads> = v
        .ports_under(l)
        .iter()
        .filter_map(|d| v.hw.port(d.as_str()))
        .map(|p| p.engine.nic().caps().offloads)
        .collect();
    let csum = prop(PropName::TxCsum) && ports.iter().all(|o| o.tx_csum);
    // The device segments untagged superframes only.
    let tso = csum && prop(PropName::Tso) && ports.iter().all(|o| o.tso) && vid_of(v, l) == 0;
    (csum, tso)
}

/// The VLAN an interface on link `l` is tagged with on the wire, 0 for
/// none: a VNIC's `-v VID`.
fn vid_of(v: &View<'_>, l: &crate::Link) -> u16 {
    match l {
        crate::Link::Vnic(n) => v.st.vnic.get(n).and_then(|x| x.vid).map_or(0, u16::from),
        _ => 0,
    }
}

/// Turns IPv6 stateless autoconfiguration on interface `n` on (router
/// advertisements heeded, SLAAC addresses made) or off (and the addresses
/// it made removed: the kernel keeps them otherwise).
impl Mirror {
    /// The sysctls of kernel device `i` (an interface that goes) put back
    /// as they were before netadm put an IP interface on it, and
    /// forgotten. A device or zone that went meanwhile has nothing to put
    /// back.
    fn put_back_sysctls(&self, i: &MirrorIf) {
        let Some(d) = &self.defaults else { return };
        let at = device_key(i.zone.as_deref(), &i.dev);
        let back: Vec<(sysctl::Family, &str, u64)> = ATTACHED_SYSCTLS
            .iter()
            .filter_map(|(f, k)| Some((*f, *k, d.recall(&at, &sysctl_key(*f, k))?)))
            .collect();
        let write = || {
            for (f, k, v) in &back {
                match sysctl::set(*f, &i.dev, k, &v.to_string()) {
                    Ok(()) | Err(KernelError::NotFound { .. }) => {}
                    Err(e) => tracing::warn!(device = %i.dev, "cannot put {k} back to {v}: {e}"),
                }
            }
        };
        match &i.ns {
            None => write(),
            Some(z) => {
                let _ = z.ns.run(write);
            }
        }
        forget_attached_sysctls(d, &at);
    }
}

/// Turns the kernel's router advertisements and SLAAC off on a device just
/// made (without IPv6 there is nothing to turn off).
fn slaac_off(dev: &str) {
    for key in ["accept_ra", "autoconf"] {
        match sysctl::set(sysctl::Family::V6, dev, key, "0") {
            Ok(()) | Err(KernelError::NotFound { .. }) => {}
            // A read-only /proc/sys (some containers): the interface
            // works, router advertisements may add addresses (drift will
            // say so).
            Err(e) => tracing::warn!(interface = %dev, "cannot turn off SLAAC: {e}"),
        }
    }
}

fn addrconf(nl: &Netlink, i: &mut MirrorIf, on: bool) -> Result<(), CoreError> {
    let v = if on { "1" } else { "0" };
    for key in ["accept_ra", "autoconf"] {
        sysctl::set(sysctl::Family::V6, &i.dev, key, v).map_err(kerr)?;
    }
    i.addrconf = on;
    if !on {
        // What SLAAC made goes: addresses with a lifetime, not a DHCP
        // client's; never one an administrator added (a kernel port's
        // device may carry the host's own).
        let leased = i.leased.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for (ip, p) in nl.dynamic_addrs(i.index).map_err(kerr)? {
            if ip.is_ipv6()
                && !link_local(&ip)
                && !i.want_addrs.contains(&(ip, p))
                && !leased.contains(&(ip, p))
            {
                match nl.del_addr(i.index, ip, p) {
                    Ok(()) | Err(KernelError::NotFound { .. }) => {}
                    Err(e) => return Err(kerr(e)),
                }
            }
        }
    }
    Ok(())
}

/// The MTU interface `n` on link `l` runs with: its link's, or its IPv4
/// MTU property when that is lower.
fn ifmtu(v: &View<'_>, n: &LinkName, l: &crate::Link) -> u32 {
    crate::mirror::ifprop::if_mtu(v.st.interface.get(n), v.mtu(l))
}

/// The interfaces a change from `vf` to `vt` can touch: those it adds,
/// removes or gives addresses, those on a VNIC it changes, and, when it
/// changes a port or an aggregation (the MTU, offloads and ports of the
/// VNICs over it follow), every mirrored one. A change to VNICs costs a
/// lookup per VNIC it changed, not one per interface.
fn touched<T>(vf: &View<'_>, vt: &View<'_>, ifs: &BTreeMap<LinkName, T>) -> Vec<LinkName> {
    let (from, to) = (vf.st, vt.st);
    let wide = from.phys.diff(&to.phys).next().is_some()
        || from.aggr.diff(&to.aggr).next().is_some()
        || from.etherstub.diff(&to.etherstub).next().is_some();
    let mut out: std::collections::BTreeSet<LinkName> = std::collections::BTreeSet::new();
    if wide {
        out.extend(ifs.keys().cloned());
    }
    out.extend(from.vnic.diff(&to.vnic).map(|(n, _, _)| n.clone()));
    out.extend(from.interface.diff(&to.interface).map(|(n, _, _)| n.clone()));
    out.extend(from.address.diff(&to.address).map(|(a, _, _)| a.interface().clone()));
    out.into_iter().filter(|n| ifs.contains_key(n) || to.interface.contains_key(n)).collect()
}

/// A link's transmit path and source MAC, for the TAP readers of the
/// interfaces on it (`None` while none of its ports runs).
pub(crate) trait LinkTx {
    /// Link `l`'s transmit path under `v`, and the MAC it sends from.
    fn link_tx(
        &self,
        v: &View<'_>,
        l: &crate::Link,
    ) -> Option<(Arc<dyn netadm_datapath::Tx>, [u8; 6])>;

    /// The kernel device that is link `l` under `v` and the zone it lives
    /// in, when the kernel owns the link: its IP interface is that device
    /// (no TAP).
    fn kernel_device(&self, v: &View<'_>, l: &crate::Link) -> Option<(Option<String>, String)>;

    /// Why link `l`'s kernel device is not as configured (missing, or a
    /// device of another kind under its name), if it is not: its IP
    /// interface is then not put on it.
    fn kernel_trouble(&self, _v: &View<'_>, _l: &crate::Link) -> Option<String> {
        None
    }

    /// Link `l`'s `maxbw` and `priority` under `v`, for what it sends
    /// through a virtual switch with no port (an etherstub's).
    fn link_qos(&self, v: &View<'_>, l: &crate::Link) -> Arc<netadm_datapath::qos::LinkQos>;
}

impl Mirror {
    /// Interface `n` on kernel link `l`, whose device `dev` lives in
    /// `zone` (`Err`: why the device is not as configured): its IP goes
    /// on that device (no TAP, no reader: the kernel carries its frames). A device that is not there (its port's is
    /// missing, its zone gone) is, with `tolerate` (at start, or an
    /// interface the change does not add), reported missing; otherwise an
    /// error.
    fn attach(
        &self,
        n: &LinkName,
        l: &crate::Link,
        vt: &View<'_>,
        zone: Option<String>,
        dev: Result<String, String>,
        tolerate: bool,
    ) -> Result<MirrorIf, CoreError> {
        let (dev, trouble) = match dev {
            Ok(d) => (d, None),
            Err(why) => (n.to_string(), Some(why)),
        };
        let found = (|| {
            if let Some(why) = trouble {
                return Err(KernelError::NotFound { what: why });
            }
            let ns = zone.as_deref().map(|z| self.zone(z)).transpose()?;
            let nl = ns.as_ref().map_or_else(|| self.nl.clone(), |z| z.nl.clone());
            let index = nl.index(&dev)?;
            let mac = nl.link(index)?.mac;
            // What the sysctls netadm writes were, before it writes them
            // (/proc/sys/net is the namespace of the thread reading it).
            if let Some(d) = &self.defaults {
                let read = || {
                    ATTACHED_SYSCTLS
                        .iter()
                        .filter_map(|(f, k)| {
                            let v = sysctl::get(*f, &dev, k).ok()?.trim().parse::<u64>().ok()?;
                            Some((sysctl_key(*f, k), v))
                        })
                        .collect::<BTreeMap<String, u64>>()
                };
                let keys = attached_sysctl_keys();
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let now = match &ns {
                    None => read(),
                    Some(z) => z.ns.run(read)?,
                };
                let at = device_key(zone.as_deref(), &dev);
                d.remember(&at, &keys, || Ok(now)).map_err(|e| KernelError::Io {
                    op: format!("keep what {dev}'s sysctls were"),
                    source: std::io::Error::other(e.message),
                })?;
            }
            match &ns {
                None => slaac_off(&dev),
                Some(z) => z.ns.run(|| slaac_off(&dev))?,
            }
            nl.set_link(index, Some(true), None)?;
            Ok::<_, KernelError>((ns, nl, index, mac))
        })();
        let stop = netadm_kernel::eventfd().map_err(kerr)?;
        let (ns, nl, index, mac, drift) = match found {
            Ok((ns, nl, index, mac)) => (ns, nl, index, mac, None),
            Err(e) if tolerate => {
                let why = format!("device {dev}: {e}; it is configured when it is back");
                tracing::warn!(interface = %n, "IP interface not configured: {why}");
                let drift = Drift { missing: true, diffs: vec![why], absent: vec![] };
                (None, self.nl.clone(), 0, [0; 6], Some(drift))
            }
            Err(e) => return Err(kerr(e)),
        };
        Ok(MirrorIf {
            attached: index != 0,
            dev,
            switch: Arc::default(),
            dhcp: BTreeMap::new(),
            leased: Default::default(),
            addrconf: false,
            tap: None,
            nl,
            zone,
            ns,
            index,
            mac,
            vid: vid_of(vt, l),
            want_mtu: ifmtu(vt, n, l),
            want_addrs: vec![],
            found: Default::default(),
            drift,
            offload: (false, false),
            stop,
            reader: None,
        })
    }

    /// Before the rings change: an interface whose MTU shrinks gets it in
    /// the kernel first, so the stack stops making frames the new MTU does
    /// not allow while the rings still carry the old size; the frames it
    /// had already queued leave through rings that take them (a frame
    /// spans as many descriptors as it needs). Growing waits for the
    /// rings ([`Mirror::sync`]). Returns whether it changed anything.
    pub(crate) fn shrink(&self, vf: &View<'_>, vt: &View<'_>) -> Result<bool, CoreError> {
        let m = self;
        let mut ifs = m.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = false;
        for n in touched(vf, vt, &*ifs) {
            // A kernel link's own device: the kernel wing changes its MTU
            // (a bond's one member at a time), not the interface.
            let Some(i) = ifs.get_mut(&n).filter(|i| i.present() && !i.attached) else { continue };
            let (Some(lf), Some(lt)) = (vf.resolve(n.as_str()), vt.resolve(n.as_str())) else {
                continue;
            };
            if ifmtu(vt, &n, &lt) < ifmtu(vf, &n, &lf) {
                changed = true;
                i.nl.set_link(i.index, None, Some(ifmtu(vt, &n, &lt))).map_err(kerr)?;
                i.want_mtu = ifmtu(vt, &n, &lt);
            }
        }
        Ok(changed)
    }

    /// Brings the kernel from `from` to `to`: removes TAPs and addresses
    /// that go, makes those that come (MAC = the link's, MTU = the link's,
    /// up), follows MTU changes, then reads everything back.
    pub(crate) fn sync(
        &self,
        txs: &dyn LinkTx,
        vf: &View<'_>,
        vt: &View<'_>,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        let m = self;
        let (from, to) = (vf.st, vt.st);
        let (vf, vt) = (*vf, *vt);
        let addr = |a: &netadm_config::AddrConf| {
            a.check().map_err(|e| CoreError::invalid_argument(e.to_string()))
        };
        // DHCP clients and interfaces that go are stopped once the
        // interfaces' lock is let go (declared before the guard, dropped
        // after it, on every return): a client's release waits for its
        // thread, an interface's drop for its reader and its clients';
        // show-if, show-addr and the kernel-events watcher do not wait
        // for them.
        let mut gone: (Vec<dhcp::Client>, Vec<MirrorIf>) = Default::default();
        let mut ifs = m.ifs.lock().unwrap_or_else(PoisonError::into_inner);
        // What the change touches: what it removes or adds, and the
        // interfaces whose link it can have changed (not every interface).
        let mut touched = touched(&vf, &vt, &*ifs);
        // Interfaces on which the change adds or changes an address.
        let adds_on: Vec<&LinkName> = from
            .address
            .diff(&to.address)
            .filter(|(_, _, b)| b.is_some())
            .map(|(o, _, _)| o.interface())
            .collect();
        // Addresses that go, then interfaces that go.
        // (A static address marked down goes from the kernel too.)
        for (obj, a, b) in from.address.diff(&to.address) {
            let (Some(a), Some(i)) = (a, ifs.get_mut(obj.interface()).filter(|i| i.present()))
            else {
                continue;
            };
            // Gone, or of another type now (apply may change it in place).
            if b.is_none_or(|b| b.kind != a.kind) && addr(a)?.is_none() {
                // A DHCP address: given back, and removed, by its client.
                if let Some(c) = i.dhcp.remove(obj) {
                    c.release_when_dropped();
                    if b.is_some() || adds_on.contains(&obj.interface()) {
                        // Of another type now, or another address comes on
                        // its interface: released here, before the adds
                        // below, one of which may be the leased address
                        // itself (`apply` making it static).
                        drop(c);
                    } else {
                        gone.0.push(c);
                    }
                }
                if a.kind == AddrType::Addrconf {
                    let nl = i.nl.clone();
                    addrconf(&nl, i, false)?;
                }
                continue;
            }
            let (was, now) = (a.active_addr(), b.and_then(|b| b.active_addr()));
            if let Some((ip, p)) = was
                && was != now
                // Putting back a change whose add found it there already:
                // it was not this change's to remove.
                && !i.found.remove(&(ip, p))
            {
                match i.nl.del_addr(i.index, ip, p) {
                    // Gone already (putting back a change that failed
                    // before it was added): as wanted.
                    Err(KernelError::NotFound { .. }) => {}
                    r => r.map_err(kerr)?,
                }
            }
        }
        // A VNIC that goes takes its protection's books with it.
        for (n, _, b) in from.vnic.diff(&to.vnic) {
            if b.is_none() {
                m.guards.lock().unwrap_or_else(PoisonError::into_inner).remove(n);
            }
        }
        for (n, _, b) in from.interface.diff(&to.interface) {
            if b.is_none()
                && let Some(i) = ifs.remove(n)
            {
                if i.attached {
                    m.put_back_sysctls(&i);
                }
                for p in vt.hw.ports() {
                    p.classifier.set_vlan_endpoint(i.vid, i.mac, None);
                }
                gone.1.push(i);
            }
        }
        // Interfaces that come: those the change adds, and any the kernel
        // does not have yet (after a change that failed part way).
        let mut come: Vec<&LinkName> = from
            .interface
            .diff(&to.interface)
            .filter(|(n, a, _)| a.is_none() && !ifs.contains_key(*n))
            .map(|(n, _, _)| n)
            .collect();
        if ifs.len() + come.len() != to.interface.len() {
            come = to.interface.keys().filter(|n| !ifs.contains_key(*n)).collect();
            for n in &come {
                if !touched.contains(n) {
                    touched.push((*n).clone());
                }
            }
        }
        let made: Vec<LinkName> = come.iter().map(|n| (*n).clone()).collect();
        // At start (nothing before), or for an interface the change does
        // not add, a zone that is gone does not stop the daemon or the
        // change: the interface is reported missing (`show-if`).
        let replay = from.vnic.is_empty() && from.interface.is_empty();
        for n in come {
            let l = vt.require(n.as_str())?;
            if let Some((zone, dev)) = txs.kernel_device(&vt, &l) {
                let tolerate = replay || from.interface.contains_key(n);
                let dev = txs.kernel_trouble(&vt, &l).map_or(Ok(dev), Err);
                let i = m.attach(n, &l, &vt, zone, dev, tolerate)?;
                ifs.insert(n.clone(), i);
                continue;
            }
            let sw =
                vt.switch_of(&l).ok_or_else(|| CoreError::internal(format!("{n}: no link")))?;
            let (tx, local, mac) = match (&sw, &l) {
                // Over an etherstub: the switch alone, no wire; its
                // maxbw and priority act on what it sends through it.
                (crate::Link::Etherstub(_), crate::Link::Vnic(v)) => {
                    (None, Some(txs.link_qos(&vt, &l)), vt.st.vnic[v].mac.0)
                }
                _ => {
                    let (tx, mac) = txs.link_tx(&vt, &l).ok_or_else(|| {
                        CoreError::internal(format!("{n}: its link has no running rings"))
                    })?;
                    (Some(tx), None, mac)
                }
            };
            let switch = m.switch(sw);
            let (zone, vid) = (zone_of(&vt, &l), vid_of(&vt, &l));
            let stop = netadm_kernel::eventfd().map_err(kerr)?;
            let (tap, nl, ns, index, offload, reader, drift) =
                match zone.as_deref().map(|z| m.zone(z)).transpose() {
                    Err(e) if replay || from.interface.contains_key(n) => {
                        let z = zone.clone().unwrap_or_default();
                        let why = format!("zone {z}: {e}; refresh-if {n} once it is back");
                        tracing::warn!(interface = %n, "kernel device not made: {why}");
                        let drift = Drift { missing: true, diffs: vec![why], absent: vec![] };
                        (None, m.nl.clone(), None, 0, (false, false), None, Some(drift))
                    }
                    Err(e) => return Err(kerr(e)),
                    Ok(ns) => {
                        let nl = ns.as_ref().map_or_else(|| m.nl.clone(), |z| z.nl.clone());
                        let tap = Arc::new(match &ns {
                            None => Tap::create(n.as_str()).map_err(kerr)?,
                            Some(z) => {
                                z.ns.run(|| Tap::create(n.as_str())).map_err(kerr)?.map_err(kerr)?
                            }
                        });
                        let offload = offloads(&vt, &l);
                        tap.set_offload(offload.0, offload.1).map_err(kerr)?;
                        let index = nl.index(n.as_str()).map_err(kerr)?;
                        // No router advertisements heeded, no SLAAC, until
                        // an addrconf address object asks for them (before
                        // the device comes up: it solicits routers then).
                        // (/proc/sys/net is the namespace of the thread
                        // that opens it: a zone's is written from there.)
                        match &ns {
                            None => slaac_off(n.as_str()),
                            Some(z) => z.ns.run(|| slaac_off(n.as_str())).map_err(kerr)?,
                        }
                        #[cfg(feature = "failpoints")]
                        fail::fail_point!("core.kernel.tap", |_| Err(CoreError::hardware(
                            "failpoint core.kernel.tap"
                        )));
                        nl.set_mac(index, mac).map_err(kerr)?;
                        nl.set_link(index, Some(true), Some(ifmtu(&vt, n, &l))).map_err(kerr)?;
                        let efd = std::os::fd::AsRawFd::as_raw_fd(&stop);
                        // Protected from its first frame on.
                        let guard = m.guard(n);
                        guard.set(crate::protect::want(&vt, &l).map(|w| w.policy(None)));
                        let r = {
                            let out = Out { switch: switch.clone(), tx, local, mac, vid, guard };
                            let tap = tap.clone();
                            std::thread::Builder::new()
                                .name(format!("tap-{n}"))
                                .spawn(move || reader(tap, efd, out))
                                .map_err(|e| CoreError::hardware(e.to_string()))?
                        };
                        (Some(tap), nl, ns, index, offload, Some(r), None)
                    }
                };
            let (want_mtu, want_addrs) = (ifmtu(&vt, n, &l), vec![]);
            let i = MirrorIf {
                attached: false,
                dev: n.to_string(),
                switch,
                dhcp: BTreeMap::new(),
                leased: Default::default(),
                addrconf: false,
                tap,
                nl,
                zone,
                ns,
                index,
                mac,
                vid,
                want_mtu,
                want_addrs,
                found: Default::default(),
                drift,
                offload,
                stop,
                reader,
            };
            ifs.insert(n.clone(), i);
        }
        // Every interface the change touches: receive on the ports under its
        // link, MTU as the link's, addresses as configured.
        for n in &touched {
            let Some(i) = ifs.get_mut(n) else { continue };
            let Some(l) = vt.resolve(n.as_str()) else { continue };
            if !i.present() {
                continue;
            }
            if let Some(itap) = i.tap.clone() {
                // Its protection, as the link's properties and addresses
                // say now (before the addresses that come are added).
                let want = crate::protect::want(&vt, &l);
                m.guard(n).set(want.map(|w| w.policy(Some(i.leased.clone()))));
                let offload = offloads(&vt, &l);
                if offload != i.offload {
                    itap.set_offload(offload.0, offload.1).map_err(kerr)?;
                    i.offload = offload;
                }
                // What it receives is counted by its link's flows.
                let qos = txs.link_qos(&vt, &l);
                i.switch.set_endpoint(i.vid, i.mac, Some(writer(&itap, qos.clone())));
                let under = vt.ports_under(&l);
                for p in vt.hw.ports() {
                    if under.contains(&p.device) {
                        let w = writer(&itap, qos.clone());
                        p.classifier.set_vlan_endpoint(i.vid, i.mac, Some(w));
                    } else {
                        p.classifier.set_vlan_endpoint(i.vid, i.mac, None);
                    }
                }
            }
            let mtu = ifmtu(&vt, n, &l);
            let mtu_changed = vf.resolve(n.as_str()).is_none_or(|lf| ifmtu(&vf, n, &lf) != mtu);
            if mtu_changed {
                #[cfg(feature = "failpoints")]
                fail::fail_point!("core.kernel.mtu", |_| Err(CoreError::hardware(
                    "failpoint core.kernel.mtu"
                )));
                if !i.attached {
                    i.nl.set_link(i.index, None, Some(mtu)).map_err(kerr)?;
                }
            }
            // Its properties (after the MTU, which resets the IPv6 one): a
            // device just made has the kernel's defaults.
            if let Some(c) = vt.st.interface.get(n) {
                let before = if made.contains(n) { None } else { vf.st.interface.get(n) };
                crate::mirror::ifprop::apply(&i.dev, before, c, vt.mtu(&l), mtu_changed)?;
            }
        }
        for (obj, a, b) in from.address.diff(&to.address) {
            let (Some(b), Some(i)) = (b, ifs.get_mut(obj.interface()).filter(|i| i.present()))
            else {
                continue;
            };
            if a.is_none_or(|a| a.kind != b.kind) && addr(b)?.is_none() {
                if b.kind == AddrType::Dhcp && !i.dhcp.contains_key(obj) {
                    // Its packet socket is made in the interface's
                    // namespace (a zone's, from a thread inside it); the
                    // lease goes in over the interface's connection.
                    let open = || PacketSocket::open_udp4(i.index, 68);
                    let sock = match &i.ns {
                        None => open(),
                        Some(z) => z.ns.run(open).map_err(kerr)?,
                    }
                    .map_err(|e| {
                        CoreError::hardware(format!("DHCP on {}: {e}", obj.interface()))
                    })?;
                    let c = dhcp::Client::start(
                        obj.interface().as_str(),
                        sock,
                        i.nl.clone(),
                        i.index,
                        i.mac,
                        i.leased.clone(),
                    )?;
                    i.dhcp.insert(obj.clone(), c);
                }
                if b.kind == AddrType::Addrconf {
                    let nl = i.nl.clone();
                    addrconf(&nl, i, true)?;
                }
                continue;
            }
            let (was, now) = (a.and_then(|a| a.active_addr()), b.active_addr());
            let Some((ip, p)) = now else { continue };
            if was != now {
                #[cfg(feature = "failpoints")]
                fail::fail_point!("core.kernel.addr", |_| Err(CoreError::hardware(
                    "failpoint core.kernel.addr"
                )));
                match i.nl.add_addr(i.index, ip, p) {
                    // A kernel link's device keeps its addresses when
                    // netadmd stops: the one it had is taken up.
                    Err(KernelError::Exists { .. }) if i.attached => {}
                    Err(KernelError::Exists { .. }) => {
                        // Someone else's (a DHCP lease, a hand's): the
                        // undo of this change leaves it. (Not one the
                        // mirror set itself: a change put back after it
                        // died before removing it finds that one there.)
                        if !i.want_addrs.contains(&(ip, p)) {
                            i.found.insert((ip, p));
                        }
                        return Err(CoreError::exists(format!(
                            "{ip}/{p} is already present in the kernel on {}",
                            i.dev
                        )));
                    }
                    r => {
                        r.map_err(kerr)?;
                        i.found.remove(&(ip, p));
                    }
                }
            }
            // Deprecated: preferred for 0 s, valid for ever (a fresh
            // address is not deprecated).
            let deprecated_before = was == now && a.is_some_and(|a| a.deprecated);
            if b.deprecated != deprecated_before {
                let preferred = if b.deprecated { 0 } else { u32::MAX };
                i.nl.set_address_lifetimes(i.index, ip, p, u32::MAX, preferred).map_err(kerr)?;
            }
        }
        // Protocol properties: the namespace's, set or back to default.
        for (k, _, b) in from.proto.diff(&to.proto) {
            if let Some(d) = crate::mirror::proto::by_key(k) {
                d.apply(&b.cloned().unwrap_or_else(|| d.default()))?;
            }
        }
        // Read back and verify what the change touched.
        for n in &touched {
            let Some(i) = ifs.get_mut(n) else { continue };
            let Some(l) = vt.resolve(n.as_str()) else { continue };
            let want: Vec<(IpAddr, u8)> = to
                .address
                .iter()
                .filter(|(o, _)| o.interface() == n)
                .filter_map(|(_, a)| a.active_addr())
                .collect();
            (i.want_mtu, i.want_addrs) = (ifmtu(&vt, n, &l), want.clone());
            if i.drift.is_some() {
                // A device someone else changed is reported as drifted
                // (show-if), not held against this change; which may have
                // made it as configured again without the kernel saying
                // so (an MTU set to what it already was).
                let now = drift::evaluate(n, i);
                drift::note(n, i, now);
                continue;
            }
            let k = i.nl.link(i.index).map_err(kerr)?;
            let have = i.nl.addrs(i.index).map_err(kerr)?;
            if !k.up || k.mtu != ifmtu(&vt, n, &l) || want.iter().any(|w| !have.contains(w)) {
                return Err(CoreError::hardware(format!(
                    "{n}: the kernel reports up={} mtu={} addresses {have:?}; expected up, mtu {}, {want:?}",
                    k.up,
                    k.mtu,
                    ifmtu(&vt, n, &l)
                )));
            }
        }
        // What went is let go here, out of the interfaces' lock: a TAP
        // leaves the kernel as it drops (its reader joined, the kernel
        // unregistering the device: most of a delete-if), which is this
        // step's time, not the next one's.
        drop(ifs);
        drop(gone);
        t.phase("kernel");
        Ok(())
    }
}

/// What bringing the kernel from `vf` to `vt` would do (an apply's
/// plan): addresses and devices that go, devices that come, MTUs that
/// follow their link, addresses that come.
pub(crate) fn plan_steps(vf: &View<'_>, vt: &View<'_>) -> Vec<crate::PlanStep> {
    let (cur, next) = (vf.st, vt.st);
    let mut steps = vec![];
    // The kernel: addresses and devices that go, devices that come,
    // MTUs that follow their link, addresses that come.
    {
        let k = |object: String, action: String| crate::PlanStep {
            kernel_changes: 1,
            kind: "kernel".into(),
            object,
            action,
            ..Default::default()
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
                steps
                    .push(k(format!("interface {i}"), format!("make a TAP device, mtu {mtu}, up")));
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
    steps
}

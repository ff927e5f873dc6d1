//! Kernel drift: someone changed a TAP device netadm made, behind its back
//! (`ip link set aggr0 mtu 1400`, `ip addr del ...`, `ip link del aggr0`).
//!
//! A watcher thread listens to rtnetlink's link and address notifications
//! (no polling) and, for each mirrored interface a batch of them touched,
//! reads the device back and compares it with what the mirror last set:
//! up, MTU, MAC, name and addresses (IPv6 link-local ones, which the
//! kernel adds itself, aside). `show-if` and `show-addr` report the
//! difference and the daemon logs it; netadm does not undo it on its own —
//! the operator may mean it, or be in the middle of something — and
//! `refresh-if` puts the configured state back by making the device anew.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use netadm_kernel::{Events, KernelError, Netlink, Touched};
use netadm_model::LinkName;

use super::iface::{Drift, MirrorIf, Zone, link_local};
use crate::CoreError;
use crate::timing::Timing;
use crate::view::View;

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Reads interface `n`'s device back and compares it with what the mirror
/// set; `None` when it is as set.
pub(crate) fn evaluate(_n: &LinkName, i: &MirrorIf) -> Option<Drift> {
    if let Some(z) = &i.ns
        && !z.ns.present()
    {
        let why = format!("zone {}: its network namespace was deleted", z.ns.zone());
        return Some(Drift { missing: true, diffs: vec![why], absent: vec![] });
    }
    if i.index == 0 {
        // Never made (its zone was gone): it stays as it was noted.
        return i.drift.clone();
    }
    let nl = &i.nl;
    let k = match nl.link(i.index) {
        Ok(k) => k,
        Err(KernelError::NotFound { .. }) => {
            return Some(Drift { missing: true, ..Drift::default() });
        }
        Err(e) => {
            return Some(Drift {
                diffs: vec![format!("cannot read it back: {e}")],
                ..Drift::default()
            });
        }
    };
    let mut d = Drift::default();
    if k.name != i.dev {
        d.diffs.push(format!("renamed {}", k.name));
    }
    if !k.up {
        d.diffs.push("down (configured up)".into());
    }
    if k.mtu != i.want_mtu {
        d.diffs.push(format!("mtu {} (configured {})", k.mtu, i.want_mtu));
    }
    if k.mac != i.mac {
        d.diffs.push(format!("mac {} (configured {})", fmt_mac(k.mac), fmt_mac(i.mac)));
    }
    let have = match nl.addrs(i.index) {
        Ok(a) => a,
        Err(e) => {
            d.diffs.push(format!("cannot read its addresses: {e}"));
            return Some(d);
        }
    };
    for w in i.want_addrs.iter().filter(|w| !have.contains(w)) {
        d.diffs.push(format!("address {}/{} missing", w.0, w.1));
        d.absent.push(*w);
    }
    // Leases the interface's DHCP clients hold are theirs, not drift.
    let leased = i.leased.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    for h in have
        .iter()
        .filter(|h| !i.want_addrs.contains(h) && !link_local(&h.0) && !leased.contains(h))
        // SLAAC's addresses, on an interface with addrconf.
        .filter(|h| !(i.addrconf && h.0.is_ipv6()))
    {
        d.diffs.push(format!("address {}/{} not configured", h.0, h.1));
    }
    (!d.diffs.is_empty()).then_some(d)
}

/// Notes `now` as interface `n`'s drift, logging a change.
pub(crate) fn note(n: &LinkName, i: &mut MirrorIf, now: Option<Drift>) {
    if now == i.drift {
        return;
    }
    match &now {
        Some(d) => {
            tracing::warn!(interface = %n, state = d.state(), "kernel drift: {}", d.describe())
        }
        None => tracing::info!(interface = %n, "the kernel device is as configured again"),
    }
    i.drift = now;
}

type Ifs = Arc<Mutex<BTreeMap<LinkName, MirrorIf>>>;

/// The zones the mirror has opened, by name as configured.
pub(crate) type Zones = Arc<Mutex<BTreeMap<String, Arc<Zone>>>>;

/// The thread that hears the kernel's notifications; stopped on drop.
pub(crate) struct Watcher {
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching the interfaces in `ifs` for what `events` hears;
    /// when a zone's name goes, `zones` (the mirror's opened zones) and
    /// the interfaces in it let go of the namespace.
    pub(crate) fn start(
        events: Events,
        ifs: Ifs,
        zones: Zones,
        own: Arc<Netlink>,
        hw: Arc<crate::Hardware>,
        defaults: Option<Arc<crate::kernel::defaults::Defaults>>,
    ) -> Result<Self, CoreError> {
        if !events.hears_zones() {
            tracing::warn!(
                "{}: not watched: a deleted zone is let go of only once it is next looked at",
                netadm_kernel::NETNS_DIR
            );
        }
        let stop = netadm_kernel::eventfd().map_err(|e| CoreError::hardware(e.to_string()))?;
        let raw = stop.as_raw_fd();
        let thread = std::thread::Builder::new()
            .name("kernel-events".into())
            .spawn(move || watch(&events, raw, &ifs, &zones, &own, &hw, defaults.as_deref()))
            .map_err(|e| CoreError::hardware(e.to_string()))?;
        Ok(Self { stop, thread: Some(thread) })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        netadm_kernel::wake(&self.stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(
    events: &Events,
    stop: std::os::fd::RawFd,
    ifs: &Ifs,
    zones: &Zones,
    own: &Arc<Netlink>,
    hw: &crate::Hardware,
    defaults: Option<&crate::kernel::defaults::Defaults>,
) {
    loop {
        let touched = match events.wait(stop) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                tracing::error!("kernel notifications: {e}; drift is no longer watched");
                return;
            }
        };
        if touched == Touched::Zones {
            let_go_of_deleted_zones(ifs, zones, own, hw, defaults);
            continue;
        }
        // Under the mirror's lock: a change the daemon makes is seen
        // whole, with what it set, never half way.
        let mut ifs = ifs.lock().unwrap_or_else(PoisonError::into_inner);
        for (n, i) in ifs.iter_mut() {
            if let Touched::Indices(ix) = &touched
                && !ix.contains(&i.index)
            {
                continue;
            }
            let now = evaluate(n, i);
            note(n, i, now);
        }
    }
}

/// What an interface whose zone went gives up: dropped, its reader
/// joined, after the interfaces' lock (a DHCP client's thread may want
/// it before it ends).
struct LetGo {
    _dhcp: BTreeMap<netadm_model::AddrObj, super::dhcp::Client>,
    reader: Option<JoinHandle<()>>,
    _tap: Option<Arc<netadm_kernel::Tap>>,
    _zone: Option<Arc<Zone>>,
}

impl Drop for LetGo {
    fn drop(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// A zone whose name went (`ip netns del`) is no one's any more, but a
/// namespace lives on, devices and addresses and all, while anything
/// holds it: a VNIC's address would go on answering on the wire. So the
/// mirror lets go of it: the zones it opened, and each interface in one,
/// noted missing and given up (its zone's connection, DHCP clients,
/// reader and TAP) as an interface whose zone was gone when it was made;
/// `refresh-if` makes it once the zone is back.
fn let_go_of_deleted_zones(
    ifs: &Ifs,
    zones: &Zones,
    own: &Arc<Netlink>,
    hw: &crate::Hardware,
    defaults: Option<&crate::kernel::defaults::Defaults>,
) {
    let gone: Vec<Arc<Zone>> = {
        let mut z = zones.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, gone) = std::mem::take(&mut *z).into_iter().partition(|(_, z)| z.ns.present());
        *z = kept;
        gone.into_values().collect()
    };
    let (mut let_go, mut forget) = (vec![], vec![]);
    {
        let mut ifs = ifs.lock().unwrap_or_else(PoisonError::into_inner);
        for (n, i) in ifs.iter_mut() {
            if i.ns.as_ref().is_none_or(|z| z.ns.present()) {
                continue;
            }
            note(n, i, evaluate(n, i));
            // Everything that writes into its TAP (which holds the zone)
            // lets go of it: its switch, and the ports' classifiers.
            i.switch.set_endpoint(i.vid, i.mac, None);
            for p in hw.ports() {
                p.classifier.set_vlan_endpoint(i.vid, i.mac, None);
            }
            netadm_kernel::wake(&i.stop);
            let_go.push(LetGo {
                _dhcp: std::mem::take(&mut i.dhcp),
                reader: i.reader.take(),
                _tap: i.tap.take(),
                _zone: i.ns.take(),
            });
            // What its device's sysctls were is moot: the device went with
            // the zone.
            if i.attached {
                forget.push(super::device_key(i.zone.as_deref(), &i.dev));
            }
            i.nl = own.clone();
            (i.index, i.attached) = (0, false);
            tracing::info!(interface = %n, "its zone was deleted: netadm let go of it");
        }
    }
    drop((let_go, gone));
    if let Some(d) = defaults {
        for at in forget {
            super::forget_attached_sysctls(d, &at);
        }
    }
}

impl super::Mirror {
    /// `refresh-if`: puts interface `name`'s kernel device back as
    /// configured — a new TAP device with the link's MAC and MTU, up, with
    /// the configured addresses — whatever was done to the old one. `v` is
    /// the running configuration, held still by the caller.
    pub(crate) fn refresh(
        &self,
        txs: &dyn super::LinkTx,
        v: &View<'_>,
        n: &LinkName,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        let st = v.st;
        t.phase("validate");
        // Closing the old device's TAP removes it, if it still exists:
        // its reader stops with it, and the ports stop writing to it.
        if let Some(old) = self.forget(n) {
            for p in v.hw.ports() {
                p.classifier.set_vlan_endpoint(old.vid, old.mac, None);
            }
        }
        let mut without = st.clone();
        without.interface.remove(n);
        without.address.retain(|o, _| o.interface() != n);
        let wv = View { hw: v.hw, st: &without };
        let res = self.sync(txs, &wv, v, t);
        if res.is_err() {
            // Not made (its zone is gone, say): still reported, as
            // missing, rather than forgotten.
            let _ = self.sync(txs, v, v, t);
        }
        tracing::info!(interface = %n, ok = res.is_ok(), "refresh-if: the kernel device was made anew");
        res
    }
}

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
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::Report;
use netadm_kernel::{Events, KernelError, Touched};
use netadm_model::LinkName;

use crate::mirror::MirrorIf;
use crate::{Core, CoreError, Timing};

/// How a mirrored interface's kernel device differs from what netadm set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Drift {
    /// The device is gone.
    pub(crate) missing: bool,
    /// What differs, one phrase each.
    pub(crate) diffs: Vec<String>,
    /// Configured addresses the device lacks.
    pub(crate) absent: Vec<(IpAddr, u8)>,
}

impl Drift {
    /// `missing` or `drifted`.
    pub(crate) fn state(&self) -> &'static str {
        if self.missing { "missing" } else { "drifted" }
    }

    /// What differs, for show-if and the log.
    pub(crate) fn describe(&self) -> String {
        if self.missing && self.diffs.is_empty() {
            "the kernel device is gone".into()
        } else {
            self.diffs.join("; ")
        }
    }
}

/// An eventfd, to wake a thread blocked in poll(2).
pub(crate) fn eventfd() -> Result<OwnedFd, CoreError> {
    let flags = nix::sys::eventfd::EfdFlags::EFD_CLOEXEC;
    nix::sys::eventfd::EventFd::from_flags(flags)
        .map(OwnedFd::from)
        .map_err(|e| CoreError::hardware(format!("eventfd: {e}")))
}

/// Wakes whatever polls `fd`.
pub(crate) fn wake(fd: &OwnedFd) {
    let _ = nix::unistd::write(fd, &1u64.to_ne_bytes());
}

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Reads interface `n`'s device back and compares it with what the mirror
/// set; `None` when it is as set.
pub(crate) fn evaluate(n: &LinkName, i: &MirrorIf) -> Option<Drift> {
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
    if k.name != n.as_str() {
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
    let link_local = crate::mirror::link_local;
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

/// The thread that hears the kernel's notifications; stopped on drop.
pub(crate) struct Watcher {
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching the interfaces in `ifs` for what `events` hears.
    pub(crate) fn start(events: Events, ifs: Ifs) -> Result<Self, CoreError> {
        let stop = eventfd()?;
        let raw = stop.as_raw_fd();
        let thread = std::thread::Builder::new()
            .name("kernel-events".into())
            .spawn(move || watch(&events, raw, &ifs))
            .map_err(|e| CoreError::hardware(e.to_string()))?;
        Ok(Self { stop, thread: Some(thread) })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        wake(&self.stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(events: &Events, stop: std::os::fd::RawFd, ifs: &Ifs) {
    loop {
        let touched = match events.wait(stop) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                tracing::error!("kernel notifications: {e}; drift is no longer watched");
                return;
            }
        };
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

impl Core {
    /// `refresh-if`: puts interface `name`'s kernel device back as
    /// configured — a new TAP device with the link's MAC and MTU, up, with
    /// the configured addresses — whatever was done to the old one.
    pub fn refresh_if(&self, name: &str) -> Result<Report, CoreError> {
        let mut t = Timing::new();
        let res = (|| {
            let n: LinkName = name.parse()?;
            let _m = self.lock_mutation()?;
            let st = self.running();
            if !st.interface.contains_key(&n) {
                return Err(CoreError::not_found(format!("IP interface {name} does not exist")));
            }
            let Some(m) = &self.mirror else {
                return Err(CoreError::not_supported(
                    "this netadmd runs without a kernel mirror: there is no device to refresh",
                ));
            };
            t.phase("validate");
            // Closing the old device's TAP removes it, if it still exists:
            // its reader stops with it, and the ports stop writing to it.
            if let Some(old) = m.forget(&n) {
                for p in self.hardware().ports() {
                    p.classifier.set_vlan_endpoint(old.vid, old.mac, None);
                }
            }
            let mut without = (*st).clone();
            without.interface.remove(&n);
            without.address.retain(|o, _| o.interface() != &n);
            let res = self.sync_kernel(&without, &st, &mut t);
            if res.is_err() {
                // Not made (its zone is gone, say): still reported, as
                // missing, rather than forgotten.
                let _ = self.sync_kernel(&st, &st, &mut t);
            }
            tracing::info!(interface = %n, ok = res.is_ok(), "refresh-if: the kernel device was made anew");
            res
        })();
        let total = t.started.elapsed().as_micros() as u64;
        let res = res.map(|()| t.finish("refresh-if"));
        self.record(&format!("refresh-if {name}"), res.as_ref(), total);
        res
    }
}

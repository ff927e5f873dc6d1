//! `maxbw` and `priority` over kernel links: a shaper netadm owns on the
//! device a link's frames leave through, in netadmd's namespace — a
//! port's or bond's device, or the 802.1Q device VNICs tag through — so
//! root in a zone, which has only the VNIC, cannot remove it.
//!
//! The shaper is an htb qdisc, handle `6e61:` ("na"), at the root of that
//! device:
//!
//! ```text
//! 6e61:      htb, default 6e61:ffff
//! └ 6e61:1   the line: rate = ceil = the port's speed (100 Gbit/s when
//!   │        the kernel does not know it)
//!   ├ 6e61:ffff  everything unclassified: floor .. line, priority high
//!   └ 6e61:N     one link, by its source MAC (a u32 filter, pref N):
//!                maxbw → rate = ceil = maxbw; else floor .. line;
//!                priority high 0, medium 1, low 2
//! ```
//!
//! A class's floor (1 % of the line, at least 1 Mbit/s) is what it is
//! guaranteed; the rest of the line goes to who asks, high priority
//! first. htb takes a class's new priority only when its queue is empty
//! (under a steady flood, never): a link whose priority changes has its
//! class's queue replaced by an empty one, losing what was queued. A
//! VNIC over a port and the port's own IP traffic are told apart
//! by source MAC, as frames leave; what arrives is not shaped (the
//! sender's shaper limits it). A device with no link asking for either
//! property has no shaper: the kernel's default qdisc.
//!
//! A VNIC over a kernel etherstub has a bridge port of its own (its veth
//! pair's bridge end) and no shared line: what it sends — what its bridge
//! end receives — is redirected (clsact, u32, mirred) to an ifb of its
//! own, `nsq…`, whose tbf holds it to its `maxbw` before the bridge sees
//! it. `priority` does not apply there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use netadm_kernel::{HtbClass, Mode, Netlink, QdiscKind, Rate, Tbf, TcId};
use netadm_model::{LinkName, PRIORITIES, PropName, PropValue};

use super::devices::{Dev, Key, What};
use super::kerr;
use crate::CoreError;

/// The handle's major of netadm's shaper: a root qdisc with another is
/// not netadm's.
const MAJOR: u16 = 0x6e61;
/// The line's class.
const LINE: TcId = TcId::new(MAJOR, 1);
/// Unclassified traffic's class.
const DEFAULT: u16 = 0xffff;
/// The first class of a link.
const FIRST: u16 = 2;
/// The line rate of a device whose speed the kernel does not know.
const UNKNOWN_LINE: Rate = Rate(100_000_000_000);

/// One link's share of a device's shaper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Share {
    /// The link.
    pub link: LinkName,
    /// The source MAC of its frames; `None`: the device's own.
    pub mac: Option<[u8; 6]>,
    /// Its `maxbw`, b/s (0: none).
    pub maxbw: u64,
    /// htb's priority: 0 (high) .. 2 (low).
    pub prio: u32,
}

/// Whether `d` asks for shaping.
fn shaped(d: &Dev) -> bool {
    d.props.contains_key(&PropName::Maxbw) || d.props.contains_key(&PropName::Priority)
}

/// The device in netadmd's namespace that `d`'s frames are shaped on, if
/// `d` asks for shaping there.
fn lower_of<'a>(k: &'a Key, d: &'a Dev) -> Option<&'a str> {
    if !shaped(d) {
        return None;
    }
    match &d.what {
        What::Macvlan { lower } | What::GuardMac { lower } => Some(lower),
        What::Port | What::Bond(_) if k.0.is_none() => Some(&k.1),
        _ => None,
    }
}

/// The devices whose shapers a change from `a` to `b` touches.
pub(crate) fn touched<'a>(
    a: &'a BTreeMap<Key, Dev>,
    b: &'a BTreeMap<Key, Dev>,
) -> BTreeSet<String> {
    a.iter().chain(b).filter_map(|(k, d)| lower_of(k, d).map(str::to_owned)).collect()
}

/// The shares on each of `lowers` that devices `all` (a whole
/// configuration's) ask for.
pub(crate) fn shares(
    all: &BTreeMap<Key, Dev>,
    lowers: &BTreeSet<String>,
) -> BTreeMap<String, Vec<Share>> {
    let mut out: BTreeMap<String, Vec<Share>> =
        lowers.iter().map(|l| (l.clone(), vec![])).collect();
    for (k, d) in all {
        let Some(lower) = lower_of(k, d) else { continue };
        let Some(list) = out.get_mut(lower) else { continue };
        let maxbw = match d.props.get(&PropName::Maxbw) {
            Some(PropValue::Bandwidth(b)) => *b,
            _ => 0,
        };
        let rank = d
            .props
            .get(&PropName::Priority)
            .and_then(|p| PRIORITIES.iter().position(|x| Some(*x) == p.as_text()))
            .unwrap_or(PRIORITIES.len() - 1);
        let own = matches!(d.what, What::Port | What::Bond(_));
        list.push(Share {
            link: d.link.clone(),
            mac: if own { None } else { d.mac },
            maxbw,
            prio: u32::try_from(PRIORITIES.len() - 1 - rank).unwrap_or(0),
        });
    }
    out
}

/// A class's guaranteed floor on a line of `line`.
fn floor(line: Rate) -> Rate {
    Rate((line.0 / 100).max(1_000_000))
}

/// The class share `s` gets on a line of `line`.
fn class_of(s: &Share, line: Rate) -> HtbClass {
    let (rate, ceil) =
        if s.maxbw > 0 { (Rate(s.maxbw), Rate(s.maxbw)) } else { (floor(line), line) };
    HtbClass { prio: s.prio, ..HtbClass::new(rate, ceil) }
}

/// Whether the kernel's class `have` is `want` (rates and priority: the
/// kernel picks bursts).
fn same(have: Option<&HtbClass>, want: &HtbClass) -> bool {
    have.is_some_and(|h| h.rate == want.rate && h.ceil == want.ceil && h.prio == want.prio)
}

/// Brings the shaper of device `dev` (in netadmd's namespace; `link` is
/// the link it is, for errors) to `shares` on a line of `line`, and reads
/// it back. No shares: netadm's shaper goes, if it is there. Its notes for
/// the operator: the frames a priority change dropped.
pub(crate) fn shape(
    nl: &Netlink,
    dev: &str,
    link: &str,
    line: Option<Rate>,
    shares: &[Share],
) -> Result<Vec<String>, CoreError> {
    let l = match nl.link_named(dev) {
        Ok(l) => l,
        // Gone (a bond deleted, a port's device missing): nothing to
        // shape; what is over it is missing too.
        Err(netadm_kernel::KernelError::NotFound { .. }) => return Ok(vec![]),
        Err(e) => return Err(kerr(e)),
    };
    let ix = l.index;
    let root = nl.qdiscs(ix).map_err(kerr)?.into_iter().find(|q| q.parent == TcId::ROOT);
    let ours = root.as_ref().is_some_and(|q| q.handle.major == MAJOR);
    if shares.is_empty() {
        if ours {
            nl.del_qdisc(ix, TcId::ROOT).map_err(kerr)?;
        }
        return Ok(vec![]);
    }
    match &root {
        Some(q) if !ours && q.handle.major != 0 => {
            return Err(CoreError::exists(format!(
                "{link}: device {dev} has a root qdisc netadm did not put there ({:?}, handle {}); \
                 maxbw and priority need it: remove it (tc qdisc del dev {dev} root) or leave them unset",
                q.kind, q.handle
            )));
        }
        Some(_) if ours => {}
        _ => nl.add_htb(ix, MAJOR, DEFAULT).map_err(kerr)?,
    }
    let line = line.filter(|r| r.0 > 0).unwrap_or(UNKNOWN_LINE);
    let parent = TcId::new(MAJOR, 0);
    let have: BTreeMap<TcId, (Option<HtbClass>, u32)> =
        nl.classes(ix).map_err(kerr)?.into_iter().map(|c| (c.id, (c.htb, c.queued))).collect();
    // The frames queued in a class whose queue was emptied.
    let set = |id: TcId, under: TcId, c: &HtbClass| -> Result<Option<u32>, CoreError> {
        let (mode, reprio) = match have.get(&id) {
            Some((h, _)) if same(h.as_ref(), c) => return Ok(None),
            Some((h, _)) => (Mode::Change, h.as_ref().is_some_and(|h| h.prio != c.prio)),
            None => (Mode::Create, false),
        };
        nl.set_htb_class(ix, id, under, c, mode).map_err(kerr)?;
        // htb moves a class to its new priority only once its queue is
        // empty: under a flood, never. What it holds is dropped instead.
        if reprio && id.minor != DEFAULT && id != LINE {
            nl.empty_class(ix, id).map_err(kerr)?;
            return Ok(Some(have.get(&id).map_or(0, |h| h.1)));
        }
        Ok(None)
    };
    let top = HtbClass::new(line, line);
    set(LINE, parent, &top)?;
    let rest = HtbClass::new(floor(line), line);
    set(TcId::new(MAJOR, DEFAULT), LINE, &rest)?;
    // Each share's class: the one its MAC's filter sends to, or a new one.
    let filters = nl.filters(ix, parent).map_err(kerr)?;
    let mut by_mac: BTreeMap<[u8; 6], TcId> =
        filters.iter().filter_map(|f| Some((f.src_mac?, f.class?))).collect();
    let mut taken: BTreeSet<u16> = have.keys().map(|c| c.minor).collect();
    let mut want: Vec<([u8; 6], TcId, HtbClass, &LinkName)> = vec![];
    for s in shares {
        let mac = s.mac.or(l.mac).unwrap_or_default();
        let id = match by_mac.get(&mac) {
            Some(id) => *id,
            None => {
                let minor = (FIRST..DEFAULT).find(|m| !taken.contains(m)).ok_or_else(|| {
                    CoreError::busy(format!("{dev}: no class left for {}", s.link))
                })?;
                taken.insert(minor);
                TcId::new(MAJOR, minor)
            }
        };
        want.push((mac, id, class_of(s, line), &s.link));
    }
    // Links that no longer ask go first (their MACs may be reused).
    for f in &filters {
        let (Some(mac), Some(id)) = (f.src_mac, f.class) else { continue };
        if !want.iter().any(|(m, i, _, _)| *m == mac && *i == id) {
            nl.del_filter(ix, parent, f.prio).map_err(kerr)?;
            by_mac.remove(&mac);
            if !want.iter().any(|(_, i, _, _)| *i == id) {
                nl.del_class(ix, id).map_err(kerr)?;
            }
        }
    }
    let mut notes = vec![];
    for (mac, id, c, l) in &want {
        if let Some(n) = set(*id, LINE, c)?.filter(|n| *n > 0) {
            notes.push(format!(
                "{l}: its new priority took effect at once: the {n} frames queued for it on {dev} were dropped"
            ));
        }
        if !by_mac.contains_key(mac) {
            nl.add_u32_src_mac(ix, parent, id.minor, *mac, *id).map_err(kerr)?;
        }
    }
    // Read back: every share's class, at its rates, with its filter.
    let classes: BTreeMap<TcId, Option<HtbClass>> =
        nl.classes(ix).map_err(kerr)?.into_iter().map(|c| (c.id, c.htb)).collect();
    let filters = nl.filters(ix, parent).map_err(kerr)?;
    for (mac, id, c, link) in &want {
        let filtered = filters.iter().any(|f| f.src_mac == Some(*mac) && f.class == Some(*id));
        if !filtered || !same(classes.get(id).and_then(Option::as_ref), c) {
            return Err(CoreError::hardware(format!(
                "{link}: read back, device {dev} has no class {id} at rate {} ceil {} for its frames",
                c.rate.0, c.ceil.0
            )));
        }
    }
    Ok(notes)
}

/// Stops bridge end `from` redirecting what it receives (to its ifb).
pub(crate) fn unhook(nl: &Netlink, from: &str) -> Result<(), CoreError> {
    let Ok(l) = nl.link_named(from) else { return Ok(()) };
    let qs = nl.qdiscs(l.index).map_err(kerr)?;
    if qs.iter().any(|q| q.kind == QdiscKind::Clsact) {
        nl.del_qdisc(l.index, TcId::CLSACT).map_err(kerr)?;
    }
    Ok(())
}

/// What a VNIC over an etherstub sends, at `maxbw` `rate`: its bridge end
/// `from` redirects what it receives to ifb `ifb`, whose tbf holds it to
/// the rate; read back. Both are in netadmd's namespace.
pub(crate) fn hook(
    nl: &Netlink,
    from: &str,
    ifb: &str,
    link: &LinkName,
    rate: Rate,
    mtu: u32,
) -> Result<(), CoreError> {
    let (Ok(end), Ok(dev)) = (nl.link_named(from), nl.link_named(ifb)) else {
        return Ok(());
    };
    // A bucket of 10 ms at the rate, and never less than a GSO frame.
    let burst = (rate.bytes() / 100).max(64 * 1024 + u64::from(mtu));
    let want = Tbf {
        rate,
        burst: u32::try_from(burst).unwrap_or(u32::MAX),
        latency: Duration::from_millis(50),
    };
    let handle = TcId::new(MAJOR, 0);
    let root = nl.qdiscs(dev.index).map_err(kerr)?.into_iter().find(|q| q.parent == TcId::ROOT);
    match root.map(|q| q.kind) {
        Some(QdiscKind::Tbf(t)) if t.rate == rate => {}
        Some(QdiscKind::Tbf(_)) => {
            nl.set_tbf(dev.index, handle, TcId::ROOT, &want, Mode::Change).map_err(kerr)?;
        }
        _ => nl.set_tbf(dev.index, handle, TcId::ROOT, &want, Mode::Create).map_err(kerr)?,
    }
    if !nl.qdiscs(end.index).map_err(kerr)?.iter().any(|q| q.kind == QdiscKind::Clsact) {
        nl.add_clsact(end.index).map_err(kerr)?;
    }
    let redirects = || -> Result<bool, CoreError> {
        let fs = nl.filters(end.index, TcId::INGRESS).map_err(kerr)?;
        Ok(fs.iter().any(|f| f.redirect == Some(dev.index)))
    };
    if !redirects()? {
        nl.add_ingress_redirect(end.index, 1, dev.index).map_err(kerr)?;
    }
    let qs = nl.qdiscs(dev.index).map_err(kerr)?;
    let shaped = qs.iter().any(|q| matches!(q.kind, QdiscKind::Tbf(t) if t.rate == rate));
    if !shaped || !redirects()? {
        return Err(CoreError::hardware(format!(
            "{link}: read back, {from} does not send what it receives through {ifb} at {} b/s",
            rate.0
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(maxbw: u64, prio: u32) -> Share {
        Share { link: "v0".parse().unwrap(), mac: None, maxbw, prio }
    }

    #[test]
    fn a_limit_is_its_rate_and_ceiling_and_the_rest_borrow_the_line() {
        let line = Rate::mbit(10_000);
        let c = class_of(&share(100_000_000, 1), line);
        assert_eq!((c.rate, c.ceil, c.prio), (Rate::mbit(100), Rate::mbit(100), 1));
        let c = class_of(&share(0, 2), line);
        assert_eq!((c.rate, c.ceil, c.prio), (Rate::mbit(100), line, 2));
        assert_eq!(floor(Rate::mbit(10)), Rate::mbit(1));
    }
}

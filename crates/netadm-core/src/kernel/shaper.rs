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
//!     │          maxbw → rate = ceil = maxbw; else floor .. line;
//!     │          priority high 0, medium 1, low 2
//!     ├ 6e61:F   one of its flows (filters on 6e61:N, one per IP family,
//!     │          in the order flows match): its maxbw and priority
//!     └ 6e61:R   the rest of the link's frames (a last filter that
//!                matches all): the link's priority
//! ```
//!
//! A link with flows is an inner class: htb classifies its frames again
//! with the filters on it. A flow's filter matches the link's source MAC
//! and EtherType and the IP header's fields at their fixed offsets: ports
//! only in an IPv4 packet with no options that is not a later fragment,
//! or an IPv6 packet whose next header is the transport (no extension
//! headers). What it sends is counted by its class; what it receives is
//! not shaped here (as a link's is not) but counted, and dropped over its
//! `maxbw`, by nftables rules on the same device (`kernel::inbound`).
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

use netadm_kernel::{Class, HtbClass, Mode, Netlink, QdiscKind, Rate, Tbf, TcId, U32Key};
use netadm_model::{FlowAttrs, FlowName, IpPrefix, LinkName, PRIORITIES, PropName, Transport};

use super::devices::{Dev, Key, What};
use super::kerr;
use crate::CoreError;
use crate::datapath::qos::limits;

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

/// The priority of the last filter on a link with flows: the rest of its
/// frames.
const REST_PREF: u16 = 0xffff;

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
    /// Its flows, in the order they match.
    pub flows: Vec<FlowShare>,
}

/// One flow of a link, as its shaper takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlowShare {
    /// The flow.
    pub name: FlowName,
    /// What it matches.
    pub attrs: FlowAttrs,
    /// Its `maxbw`, b/s (0: none).
    pub maxbw: u64,
    /// htb's priority: 0 (high) .. 2 (low).
    pub prio: u32,
}

/// htb's priority (0 first) of netadm's rank `rank` (0 low .. 2 high).
pub(crate) fn htb_prio(rank: usize) -> u32 {
    u32::try_from(PRIORITIES.len() - 1 - rank.min(PRIORITIES.len() - 1)).unwrap_or(0)
}

/// Whether `d` asks for shaping.
fn shaped(d: &Dev) -> bool {
    d.props.contains_key(&PropName::Maxbw)
        || d.props.contains_key(&PropName::Priority)
        || !d.flows.is_empty()
}

/// Whether a flow matching `a` can be IPv4, and IPv6: its addresses'
/// family, and ICMP's.
pub(crate) fn families(a: &FlowAttrs) -> (bool, bool) {
    let addrs = [a.local_ip, a.remote_ip];
    let family = |v4: bool| addrs.iter().flatten().all(|p| p.addr.is_ipv4() == v4);
    (
        family(true) && a.transport != Some(Transport::Icmpv6),
        family(false) && a.transport != Some(Transport::Icmp),
    )
}

/// The u32 selectors that pick out, of the frames sent from `mac`, those
/// of a flow matching `a` (as seen from the sender: local is the source):
/// one for each IP family the flow can match, each a list of keys at
/// increasing offsets.
pub(crate) fn selectors(mac: [u8; 6], a: &FlowAttrs) -> Vec<Vec<U32Key>> {
    let (v4, v6) = families(a);
    let ports = a.local_port.is_some() || a.remote_port.is_some();
    let mut out = vec![];
    for (ok, ethertype) in [(v4, 0x0800u16), (v6, 0x86dd)] {
        if !ok {
            continue;
        }
        let mut k: BTreeMap<i32, (u32, u32)> = BTreeMap::new();
        let mut put = |off: i32, mask: u32, val: u32| {
            let e = k.entry(off).or_default();
            (e.0, e.1) = (e.0 | mask, e.1 | (val & mask));
        };
        let [m0, m1, m2, m3, m4, m5] = mac;
        let et = ethertype.to_be_bytes();
        put(-8, u32::MAX, u32::from_be_bytes([m0, m1, m2, m3]));
        put(-4, u32::MAX, u32::from_be_bytes([m4, m5, et[0], et[1]]));
        let v6 = ethertype == 0x86dd;
        if let Some(d) = a.dsfield {
            let shift = if v6 { 20 } else { 16 };
            put(0, u32::from(d.mask) << shift, u32::from(d.value) << shift);
        }
        if let Some(t) = a.transport {
            match v6 {
                true => put(4, 0xff00, u32::from(t.protocol()) << 8),
                false => put(8, 0x00ff_0000, u32::from(t.protocol()) << 16),
            }
        }
        let (src, dst, l4) = if v6 { (8, 24, 40) } else { (12, 16, 20) };
        for (at, p) in [(src, a.local_ip), (dst, a.remote_ip)] {
            if let Some(p) = p {
                for (i, (mask, val)) in prefix_words(p).into_iter().enumerate() {
                    put(at + 4 * i as i32, mask, val);
                }
            }
        }
        if ports {
            if !v6 {
                // No options (the ports are at 20), not a later fragment.
                put(0, 0x0f00_0000, 0x0500_0000);
                put(4, 0x1fff, 0);
            }
            if let Some(p) = a.local_port {
                put(l4, 0xffff_0000, u32::from(p) << 16);
            }
            if let Some(p) = a.remote_port {
                put(l4, 0xffff, u32::from(p));
            }
        }
        out.push(
            k.into_iter()
                .filter(|(_, (mask, _))| *mask != 0)
                .map(|(off, (mask, val))| U32Key { off, mask, val })
                .collect(),
        );
    }
    out
}

/// Prefix `p` as 32-bit words of (mask, value), network order; words its
/// length does not reach have mask 0.
fn prefix_words(p: IpPrefix) -> Vec<(u32, u32)> {
    let bytes: Vec<u8> = match p.addr {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    };
    bytes
        .chunks(4)
        .enumerate()
        .map(|(i, w)| {
            let bits = u32::from(p.len).saturating_sub(32 * i as u32).min(32);
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
            (mask, u32::from_be_bytes([w[0], w[1], w[2], w[3]]) & mask)
        })
        .collect()
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
        let (maxbw, rank) = limits(Some(&d.props), PRIORITIES.len() - 1);
        let own = matches!(d.what, What::Port | What::Bond(_));
        list.push(Share {
            link: d.link.clone(),
            mac: if own { None } else { d.mac },
            maxbw,
            prio: htb_prio(rank),
            flows: d.flows.clone(),
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

/// What [`shape`] did: its notes for the operator (the frames a priority
/// change dropped), and the class each flow's frames leave by.
#[derive(Debug, Default)]
pub(crate) struct Shaped {
    /// Notes for the verb's report.
    pub notes: Vec<String>,
    /// Each flow, the MAC its link's frames carry, and its class on the
    /// device.
    pub flows: Vec<(FlowShare, [u8; 6], TcId)>,
}

/// The class under a link's that its flows' frames, or the rest of its
/// frames, go to.
type Sub = (Option<FlowName>, TcId, HtbClass);

/// What a link with flows asks for under its class: a class for each
/// flow, then the rest's, and the filters on the link's class that send
/// to them (priority, keys, class), in the order they are tried.
struct Planned {
    subs: Vec<Sub>,
    filters: Vec<(u16, Vec<U32Key>, TcId)>,
}

/// The one key of a filter that matches every frame.
const ALL: U32Key = U32Key { off: 0, mask: 0, val: 0 };

/// Brings the shaper of device `dev` (in netadmd's namespace; `link` is
/// the link it is, for errors) to `shares` on a line of `line`, and reads
/// it back. No shares: netadm's shaper goes, if it is there.
pub(crate) fn shape(
    nl: &Netlink,
    dev: &str,
    link: &str,
    line: Option<Rate>,
    shares: &[Share],
) -> Result<Shaped, CoreError> {
    let l = match nl.link_named(dev) {
        Ok(l) => l,
        // Gone (a bond deleted, a port's device missing): nothing to
        // shape; what is over it is missing too.
        Err(netadm_kernel::KernelError::NotFound { .. }) => return Ok(Shaped::default()),
        Err(e) => return Err(kerr(e)),
    };
    let ix = l.index;
    let root = nl.qdiscs(ix).map_err(kerr)?.into_iter().find(|q| q.parent == TcId::ROOT);
    let ours = root.as_ref().is_some_and(|q| q.handle.major == MAJOR);
    if shares.is_empty() {
        if ours {
            nl.del_qdisc(ix, TcId::ROOT).map_err(kerr)?;
        }
        return Ok(Shaped::default());
    }
    match &root {
        Some(q) if !ours && q.handle.major != 0 => {
            return Err(CoreError::exists(format!(
                "{link}: device {dev} has a root qdisc netadm did not put there ({:?}, handle {}); \
                 maxbw, priority and flows need it: remove it (tc qdisc del dev {dev} root) or leave them unset",
                q.kind, q.handle
            )));
        }
        Some(_) if ours => {}
        _ => nl.add_htb(ix, MAJOR, DEFAULT).map_err(kerr)?,
    }
    let line = line.filter(|r| r.0 > 0).unwrap_or(UNKNOWN_LINE);
    let parent = TcId::new(MAJOR, 0);
    let classes = nl.classes(ix).map_err(kerr)?;
    let have: BTreeMap<TcId, (Option<HtbClass>, u32)> =
        classes.iter().map(|c| (c.id, (c.htb, c.queued))).collect();
    // Sets class `id` under `under`; a leaf whose priority changed has
    // its queue emptied: the frames it held, for a note.
    let set = |id: TcId, under: TcId, c: &HtbClass, leaf: bool| -> Result<u32, CoreError> {
        let (mode, reprio) = match have.get(&id) {
            Some((h, _)) if same(h.as_ref(), c) => return Ok(0),
            Some((h, _)) => (Mode::Change, h.as_ref().is_some_and(|h| h.prio != c.prio)),
            None => (Mode::Create, false),
        };
        nl.set_htb_class(ix, id, under, c, mode).map_err(kerr)?;
        // htb moves a class to its new priority only once its queue is
        // empty: under a flood, never. What it holds is dropped instead.
        if reprio && leaf {
            nl.empty_class(ix, id).map_err(kerr)?;
            return Ok(have.get(&id).map_or(0, |h| h.1));
        }
        Ok(0)
    };
    set(LINE, parent, &HtbClass::new(line, line), false)?;
    set(TcId::new(MAJOR, DEFAULT), LINE, &HtbClass::new(floor(line), line), false)?;
    // Each share's class: the one its MAC's filter sends to, or a new one.
    let filters = nl.filters(ix, parent).map_err(kerr)?;
    let mut by_mac: BTreeMap<[u8; 6], TcId> =
        filters.iter().filter_map(|f| Some((f.src_mac?, f.class?))).collect();
    let mut taken: BTreeSet<u16> = have.keys().map(|c| c.minor).collect();
    let mut fresh = |what: &LinkName| -> Result<TcId, CoreError> {
        let minor = (FIRST..DEFAULT)
            .find(|m| !taken.contains(m))
            .ok_or_else(|| CoreError::busy(format!("{dev}: no class left for {what}")))?;
        taken.insert(minor);
        Ok(TcId::new(MAJOR, minor))
    };
    let mut want: Vec<([u8; 6], TcId, HtbClass, &Share)> = vec![];
    for s in shares {
        let mac = s.mac.or(l.mac).unwrap_or_default();
        let id = match by_mac.get(&mac) {
            Some(id) => *id,
            None => fresh(&s.link)?,
        };
        want.push((mac, id, class_of(s, line), s));
    }
    // Links that no longer ask go first (their MACs may be reused), with
    // their flows' classes.
    for f in &filters {
        let (Some(mac), Some(id)) = (f.src_mac, f.class) else { continue };
        if !want.iter().any(|(m, i, ..)| *m == mac && *i == id) {
            nl.del_filter(ix, parent, f.prio).map_err(kerr)?;
            by_mac.remove(&mac);
            if !want.iter().any(|(_, i, ..)| *i == id) {
                under(nl, ix, id, &classes, None)?;
                nl.del_class(ix, id).map_err(kerr)?;
            }
        }
    }
    let mut out = Shaped::default();
    let mut planned = vec![];
    for (mac, id, c, s) in &want {
        let n = set(*id, LINE, c, s.flows.is_empty())?;
        if n > 0 {
            out.notes.push(format!(
                "{}: its new priority took effect at once: the {n} frames queued for it on {dev} were dropped",
                s.link
            ));
        }
        if !by_mac.contains_key(mac) {
            nl.add_u32_src_mac(ix, parent, id.minor, *mac, *id).map_err(kerr)?;
        }
        let p = if s.flows.is_empty() {
            None
        } else {
            Some(plan(nl, ix, *id, *mac, s, c, line, &mut fresh)?)
        };
        under(nl, ix, *id, &classes, p.as_ref())?;
        let Some(p) = p else { continue };
        for (flow, sub, c) in &p.subs {
            let n = set(*sub, *id, c, true)?;
            if n > 0 {
                let what = flow.as_ref().map_or(String::new(), |f| format!(" flow {f}:"));
                out.notes.push(format!(
                    "{}:{what} its new priority took effect at once: the {n} frames queued for it on {dev} were dropped",
                    s.link
                ));
            }
        }
        let there = nl.filters(ix, *id).map_err(kerr)?;
        for (pref, keys, sub) in &p.filters {
            if !there.iter().any(|f| f.prio == *pref && f.keys == *keys && f.class == Some(*sub)) {
                nl.add_u32_match(ix, *id, *pref, keys, *sub).map_err(kerr)?;
            }
        }
        for (f, (_, sub, _)) in s.flows.iter().zip(&p.subs) {
            out.flows.push((f.clone(), *mac, *sub));
        }
        planned.push((*id, s, p));
    }
    // Read back: every share's class, at its rates, with its filter; each
    // flow's and the rest's class under it, with theirs.
    let classes: BTreeMap<TcId, (TcId, Option<HtbClass>)> =
        nl.classes(ix).map_err(kerr)?.into_iter().map(|c| (c.id, (c.parent, c.htb))).collect();
    let is = |id: &TcId, under: TcId, c: &HtbClass| {
        classes.get(id).is_some_and(|(p, h)| *p == under && same(h.as_ref(), c))
    };
    let filters = nl.filters(ix, parent).map_err(kerr)?;
    for (mac, id, c, s) in &want {
        let filtered = filters.iter().any(|f| f.src_mac == Some(*mac) && f.class == Some(*id));
        if !filtered || !is(id, LINE, c) {
            return Err(CoreError::hardware(format!(
                "{}: read back, device {dev} has no class {id} at rate {} ceil {} for its frames",
                s.link, c.rate.0, c.ceil.0
            )));
        }
    }
    for (id, s, p) in &planned {
        let there = nl.filters(ix, *id).map_err(kerr)?;
        for (flow, sub, c) in &p.subs {
            let sent = p.filters.iter().filter(|f| f.2 == *sub).all(|(pref, keys, _)| {
                there.iter().any(|f| f.prio == *pref && f.keys == *keys && f.class == Some(*sub))
            });
            if !sent || !is(sub, *id, c) {
                let what =
                    flow.as_ref().map_or("the rest of its frames".into(), |f| format!("flow {f}"));
                return Err(CoreError::hardware(format!(
                    "{}: read back, device {dev} has no class {sub} under {id} for {what}, with its filters",
                    s.link
                )));
            }
        }
    }
    Ok(out)
}

/// The classes and filters under link class `id` (share `s`, whose class
/// is `link`, frames from `mac`) that its flows ask for: each flow's class
/// kept where a filter on `id` already sends its frames to it.
#[allow(clippy::too_many_arguments)]
fn plan(
    nl: &Netlink,
    ix: u32,
    id: TcId,
    mac: [u8; 6],
    s: &Share,
    link: &HtbClass,
    line: Rate,
    fresh: &mut dyn FnMut(&LinkName) -> Result<TcId, CoreError>,
) -> Result<Planned, CoreError> {
    let there = nl.filters(ix, id).map_err(kerr)?;
    let mut used = BTreeSet::new();
    let mut kept = |keys: &[Vec<U32Key>]| {
        let c = there.iter().find(|f| keys.contains(&f.keys)).and_then(|f| f.class);
        c.filter(|c| used.insert(*c))
    };
    let mut p = Planned { subs: vec![], filters: vec![] };
    let mut pref = 1u16;
    let floor = floor(line).min(link.ceil);
    for f in &s.flows {
        let sels = selectors(mac, &f.attrs);
        let sub = match kept(&sels) {
            Some(c) => c,
            None => fresh(&s.link)?,
        };
        let (rate, ceil) =
            if f.maxbw > 0 { (Rate(f.maxbw), Rate(f.maxbw)) } else { (floor, link.ceil) };
        p.subs.push((
            Some(f.name.clone()),
            sub,
            HtbClass { prio: f.prio, ..HtbClass::new(rate, ceil) },
        ));
        for keys in sels {
            p.filters.push((pref, keys, sub));
            pref += 1;
        }
    }
    let all = vec![ALL];
    let rest = match kept(std::slice::from_ref(&all)) {
        Some(c) => c,
        None => fresh(&s.link)?,
    };
    p.subs.push((None, rest, HtbClass { prio: s.prio, ..HtbClass::new(floor, link.ceil) }));
    p.filters.push((REST_PREF, all, rest));
    Ok(p)
}

/// Clears what is under link class `id` that `keep` does not ask for:
/// its filters, then its classes (`classes`: as they were read). A link
/// with no flows left is a leaf again.
fn under(
    nl: &Netlink,
    ix: u32,
    id: TcId,
    classes: &[Class],
    keep: Option<&Planned>,
) -> Result<(), CoreError> {
    let children: Vec<TcId> = classes.iter().filter(|c| c.parent == id).map(|c| c.id).collect();
    if children.is_empty() {
        return Ok(());
    }
    let mut gone = BTreeSet::new();
    for f in nl.filters(ix, id).map_err(kerr)? {
        let wanted = keep.is_some_and(|p| {
            p.filters
                .iter()
                .any(|(pref, keys, c)| *pref == f.prio && *keys == f.keys && f.class == Some(*c))
        });
        if !wanted && gone.insert(f.prio) {
            nl.del_filter(ix, id, f.prio).map_err(kerr)?;
        }
    }
    for c in children {
        if !keep.is_some_and(|p| p.subs.iter().any(|s| s.1 == c)) {
            nl.del_class(ix, c).map_err(kerr)?;
        }
    }
    Ok(())
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
        Share { link: "v0".parse().unwrap(), mac: None, maxbw, prio, flows: vec![] }
    }

    fn attrs(pairs: &[(&str, &str)]) -> FlowAttrs {
        FlowAttrs::parse(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
            .unwrap()
    }

    fn key(off: i32, mask: u32, val: u32) -> U32Key {
        U32Key { off, mask, val }
    }

    #[test]
    fn a_flows_selectors_match_its_source_mac_and_each_ip_family_it_can_match() {
        let mac = [0x02, 0x08, 0x20, 0x01, 0x02, 0x03];
        let head = |et: u32| [key(-8, u32::MAX, 0x0208_2001), key(-4, u32::MAX, 0x0203_0000 | et)];
        // UDP to port 5001: both families; IPv4 without options and not a
        // later fragment, for the port to be at its offset.
        let s = selectors(mac, &attrs(&[("transport", "udp"), ("remote_port", "5001")]));
        assert_eq!(s.len(), 2);
        let mut v4 = head(0x0800).to_vec();
        v4.extend([
            key(0, 0x0f00_0000, 0x0500_0000),
            key(4, 0x1fff, 0),
            key(8, 0x00ff_0000, 17 << 16),
            key(20, 0xffff, 5001),
        ]);
        assert_eq!(s[0], v4);
        let mut v6 = head(0x86dd).to_vec();
        v6.extend([key(4, 0xff00, 17 << 8), key(40, 0xffff, 5001)]);
        assert_eq!(s[1], v6);
        // An IPv4 prefix: IPv4 only, the destination's word.
        let s = selectors(
            mac,
            &attrs(&[("remote_ip", "192.0.2.0/24"), ("local_port", "22"), ("transport", "tcp")]),
        );
        assert_eq!(s.len(), 1);
        assert!(s[0].contains(&key(16, 0xffff_ff00, 0xc000_0200)), "{:?}", s[0]);
        assert!(s[0].contains(&key(20, 0xffff_0000, 22 << 16)), "{:?}", s[0]);
        // An IPv6 prefix of 33 bits: two words of the source; the DS field
        // is the traffic class, 4 bits into the header.
        let s = selectors(mac, &attrs(&[("local_ip", "2001:db8::/33"), ("dsfield", "0xb8:0xfc")]));
        assert_eq!(s.len(), 1);
        let mut v6 = head(0x86dd).to_vec();
        v6.extend([
            key(0, 0xfc << 20, 0xb8 << 20),
            key(8, u32::MAX, 0x2001_0db8),
            key(12, 0x8000_0000, 0),
        ]);
        assert_eq!(s[0], v6);
        // ICMP is IPv4's, ICMPv6 IPv6's.
        assert_eq!(selectors(mac, &attrs(&[("transport", "icmp")])).len(), 1);
        let s = selectors(mac, &attrs(&[("transport", "icmpv6")]));
        assert!(s.len() == 1 && s[0][1].val & 0xffff == 0x86dd);
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

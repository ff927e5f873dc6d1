//! Link protection on kernel VNICs: nftables rules netadm owns, in
//! netadmd's network namespace, on a device of netadm's that every frame
//! the VNIC sends crosses and that root in the VNIC's zone cannot reach.
//!
//! Where:
//!
//! - A VNIC over a kernel etherstub is a veth pair already: its bridge
//!   end (`nsw…`) is netadmd's, and its ingress sees exactly what the VNIC
//!   sends. The rules hook there.
//! - A VNIC over a kernel port is a macvlan in bridge mode, which hands
//!   unicast for a sibling macvlan on the same lower straight to it: the
//!   lower's egress never sees it, and frames on the lower's egress say
//!   who sent them only by the very source MAC a tenant forges. So a
//!   *protected* VNIC over a port is built otherwise: the VNIC is the zone
//!   end of a veth pair whose other end (`npg…`) is netadmd's, and a
//!   macvlan in bridge mode over the lower (`npm…`, the VNIC's MAC, IPv6
//!   off, no address) stands in for it among its siblings. The rules on
//!   `npg…`'s ingress judge what the VNIC sends and `fwd` what passes to
//!   `npm…`, whose ingress `fwd`s what the macvlan receives back to
//!   `npg…`. Siblings, the port's own stack and the wire see the macvlan,
//!   as they would the VNIC's; shaping (`maxbw`, `priority`) classifies
//!   its frames on the lower as before. Protection put on or taken off
//!   rebuilds the device, so it is refused under an IP interface
//!   (`protect::rebuild_free`). Either host end (`npg…`, a bridge end
//!   `nsw…`) is made down and comes up last, once the rules stand
//!   ([`Kernel::open_ends`]): a VNIC's first frame meets them. Two BPF programs of netadm's stand in
//!   front of the rules there (see [`Kernel::fast_paths`]): what the
//!   rules' first one passes goes from `npg…` to `npm…` past them, and
//!   what `npm…` receives goes straight into the VNIC in its zone.
//!
//! One table, `netdev netadm`; per VNIC (by `id`, `v` and an FNV hash of
//! its name): a base chain on the host end's ingress, one on the
//! stand-in's (over a port), sets of allowed senders (`ID_v4`, `ID_v6`,
//! and `ID_t6`, the same IPv6 prefixes as integers for a neighbour
//! advertisement's target) and named counters per reason and for what
//! passes. A change is one `nft -f` transaction per VNIC touched: the
//! chains flushed and filled, the sets flushed and filled, the counters
//! kept — atomic, so a restarted netadmd re-applies what stands without a
//! blip and the books go on. A VNIC that goes takes its chains, sets and
//! counters with it; netadmd stopping leaves them (the network outlives
//! the daemon). Every chain is read back (`nft -j`): its hook, its device
//! and its number of rules.
//!
//! Why the `nft` binary rather than netlink: nftables' netlink interface
//! is a bytecode of expressions (payload offsets, registers, set lookups)
//! that would be hand-encoded here, with nothing maintained to check it
//! against; `nft` compiles the rules, applies a file as one transaction,
//! and prints the ruleset back as JSON. The package recommends it
//! (`nftables`: links over netadm's own ports do not need it); without
//! it, protection and flows on a kernel VNIC are refused (NotSupported).
//!
//! What the kernel's rules do not do that the datapath does: a DHCPv4
//! client identifier (option 61) and a DHCPv6 DUID sit at varying
//! offsets, so `dhcp-nospoof` checks the client's chaddr (the VNIC's MAC)
//! and refuses servers, and `allowed-dhcp-cids` is refused over kernel
//! links; an NDP message's link-layer option is checked when it is the
//! first option; and a DHCP lease's address is not among the default
//! allowed senders (the datapath's is read from the client as it holds
//! it): give such a VNIC `allowed-ips`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use netadm_datapath::protect::GuardCounts;
use netadm_kernel::{KernelError, Netlink, Netns, NewLink, sysctl, tcx};
use netadm_model::{LinkName, Protection};

use super::devices::{Dev, Key, What, bridge_end, fnv};
use super::{Kernel, kerr};
use crate::CoreError;
use crate::protect::{Want, want};
use crate::view::{Link, View};

/// The table netadm's rules live in.
pub(super) const TABLE: &str = "netdev netadm";

/// The host end of protected VNIC `vnic`'s veth pair (over a port).
pub(crate) fn guard_end(vnic: &LinkName) -> String {
    format!("npg{:08x}", fnv(vnic))
}

/// The macvlan that stands in for protected VNIC `vnic` over a port.
pub(crate) fn stand_in(vnic: &LinkName) -> String {
    format!("npm{:08x}", fnv(vnic))
}

/// The id of VNIC `vnic`'s rules (chains, sets, counters).
fn id(vnic: &LinkName) -> String {
    format!("v{:08x}", fnv(vnic))
}

/// The devices of `out` (a configuration's, as [`super::devices`] made
/// them) with each protected VNIC over a port built as this module says:
/// the zone's end of a veth pair, and a stand-in macvlan.
pub(crate) fn guarded(v: &View<'_>, out: &mut BTreeMap<Key, Dev>) {
    let mut more = vec![];
    for d in out.values_mut() {
        let (Link::Vnic(n), What::Macvlan { lower }) = (&d.of, &d.what) else { continue };
        if want(v, &d.of).is_none() {
            continue;
        }
        let lower = lower.clone();
        more.push((
            (None, stand_in(n)),
            Dev { what: What::GuardMac { lower }, layer: d.layer, ..d.clone() },
        ));
        d.what = What::Guarded { peer: guard_end(n) };
    }
    out.extend(more);
}

/// Makes the zone end `k` of a guarded VNIC's veth pair, and its host
/// end `peer` here with IPv6 off, down: it comes up once its rules stand
/// ([`Kernel::open_ends`]).
pub(crate) fn make_veth(
    nl: &Netlink,
    k: &Key,
    peer: &str,
    zone: Option<&Netns>,
    opts: &NewLink,
) -> Result<(), CoreError> {
    let host = NewLink { mac: None, up: false, ..opts.clone() };
    nl.add_veth(peer, &k.1, &host, zone).map_err(kerr)?;
    quiet(peer)
}

/// Makes stand-in macvlan `name` over `lower` (an index), IPv6 off
/// before it comes up, so it sends nothing of its own.
pub(crate) fn make_stand_in(
    nl: &Netlink,
    name: &str,
    lower: u32,
    opts: &NewLink,
) -> Result<(), CoreError> {
    nl.add_macvlan(name, lower, &NewLink { up: false, ..opts.clone() }, None).map_err(kerr)?;
    quiet(name)?;
    let i = nl.link_named(name).map_err(kerr)?.index;
    nl.set_link(i, Some(true), None).map_err(kerr)
}

/// IPv6 off on host device `dev`: no link-local address, no router or
/// neighbour solicitations with the VNIC's MAC from netadmd's namespace.
fn quiet(dev: &str) -> Result<(), CoreError> {
    sysctl::set(sysctl::Family::V6, dev, "disable_ipv6", "1").or_else(|e| match e {
        // No IPv6 in this kernel: nothing to turn off.
        KernelError::NotFound { .. } => Ok(()),
        e => Err(kerr(e)),
    })
}

/// One VNIC's rules as a configuration asks for them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    /// The device its frames come in on, in netadmd's namespace.
    host: String,
    /// Where what passes goes (the stand-in over a port); `None`: on
    /// into the bridge.
    fwd: Option<String>,
    want: Want,
}

/// The rules VNIC `n` of `v` asks for: a protected VNIC the kernel owns.
fn spec(k: &Kernel, v: &View<'_>, n: &LinkName) -> Option<Spec> {
    let l = Link::Vnic(n.clone());
    let want = want(v, &l)?;
    if !k.owns(v, &l) || v.st.vnic.get(n).is_some_and(|c| c.vlan) {
        return None;
    }
    Some(match v.switch_of(&l) {
        Some(Link::Etherstub(_)) => Spec { host: bridge_end(n), fwd: None, want },
        _ => Spec { host: guard_end(n), fwd: Some(stand_in(n)), want },
    })
}

/// The kernel VNICs' rules netadm has made: each VNIC's id, by name.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    made: Mutex<BTreeMap<LinkName, String>>,
    /// The counters of each VNIC's pass program (see
    /// [`Kernel::fast_paths`]), held while the VNIC is protected: what
    /// they counted goes on when the program is replaced, taken off or
    /// made anew with its device.
    passing: Mutex<BTreeMap<LinkName, tcx::PassCounts>>,
}

/// A MAC as nft writes it, and as a 48-bit integer.
fn mac_text(m: [u8; 6]) -> (String, String) {
    let colons = m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    let hex = format!("0x{}", m.iter().map(|b| format!("{b:02x}")).collect::<String>());
    (colons, hex)
}

/// The nft file that makes VNIC `n`'s rules as `s` says; and how many
/// rules each of its chains then holds.
fn render(n: &LinkName, s: &Spec) -> (String, Vec<(String, Option<String>, usize)>) {
    let x = id(n);
    let w = &s.want;
    let (mac, mac_hex) = mac_text(w.mac);
    let mut f = String::new();
    for c in ["mac", "ip", "dhcp", "restricted", "pass"] {
        f += &format!("add counter {TABLE} {x}_{c}\n");
    }
    let v4: Vec<String> = w
        .allowed
        .iter()
        .filter(|(a, _)| a.is_ipv4())
        .map(|(a, l)| format!("{a}/{l}"))
        .chain(["0.0.0.0/32".to_owned()])
        .collect();
    let v6: Vec<(IpAddr, u8)> = w
        .allowed
        .iter()
        .filter(|(a, _)| a.is_ipv6())
        .copied()
        .chain([("::".parse().expect("::"), 128)])
        .collect();
    let v6_text: Vec<String> = v6.iter().map(|(a, l)| format!("{a}/{l}")).collect();
    // The same prefixes as ranges of 128-bit integers, for a raw payload.
    let t6: Vec<String> = v6
        .iter()
        .map(|(a, l)| {
            let IpAddr::V6(a) = a else { unreachable!("IPv6 only") };
            let lo = u128::from(*a);
            let hi = lo | u128::MAX.checked_shr(u32::from(*l)).unwrap_or(0);
            if lo == hi { format!("0x{lo:032x}") } else { format!("0x{lo:032x}-0x{hi:032x}") }
        })
        .collect();
    for (set, ty, elems) in [
        ("v4", "type ipv4_addr", &v4),
        ("v6", "type ipv6_addr", &v6_text),
        ("t6", "typeof @th,64,128", &t6),
    ] {
        f += &format!("add set {TABLE} {x}_{set} {{ {ty}; flags interval; }}\n");
        f += &format!("flush set {TABLE} {x}_{set}\n");
        f += &format!("add element {TABLE} {x}_{set} {{ {} }}\n", elems.join(", "));
    }
    // A frame meets the MAC check, then one dispatch on its EtherType to
    // the rules of its kind (IPv4, IPv6, ARP: a chain each), or the rest
    // for any other; every path ends by passing it on. Within each, the
    // protections' rules stand in the order they are listed (mac-nospoof,
    // restricted, ip-nospoof, dhcp-nospoof): the first that matches
    // drops the frame into its protection's counter. (A frame is matched
    // against its own kind's rules only: a dozen, not all thirty.)
    let flags = w.flags;
    let on = |p: Protection| flags.has(p);
    let drop = |c: &str, m: &str| format!("{m} counter name {x}_{c} drop");
    let pass = match &s.fwd {
        Some(to) => format!("counter name {x}_pass fwd to \"{to}\""),
        None => format!("counter name {x}_pass accept"),
    };
    let (mut v4r, mut v6r, mut arp) = (vec![], vec![], vec![]);
    // First, what every combination of protections passes, in one rule:
    // IPv4 that is not UDP, from the VNIC's MAC and an allowed sender
    // (the bulk of a TCP stream). nftables' cost is per rule and jump:
    // such a frame met 6 rules and 2 jumps, and this one rule saves about
    // a quarter of what the rules cost it (105-130 ns of 400 per frame,
    // measured). Everything else goes on to the rules below, which
    // count what they drop under its reason. nft checks the rule's
    // EtherType (IPv4) in the link header with the source MAC, where a
    // VLAN tag stays visible: a tagged frame is not this rule's.
    let mut base = vec![format!(
        "ether saddr {mac} @nh,0,8 0x45-0x4f ip saddr @{x}_v4 meta l4proto != udp {pass}"
    )];
    let tags = "ether type { 0x8100, 0x88a8, 0x9100 }";
    if on(Protection::MAC_NOSPOOF) {
        base.push(drop("mac", &format!("ether saddr != {mac}")));
        arp.push(drop("mac", &format!("arp saddr ether != {mac}")));
        // An NDP message's first link-layer address option.
        v6r.push(drop(
            "mac",
            &format!(
                "icmpv6 type {{ nd-neighbor-solicit, nd-neighbor-advert }} @th,192,8 {{ 1, 2 }} @th,208,48 != {mac_hex}"
            ),
        ));
        v6r.push(drop(
            "mac",
            &format!("icmpv6 type nd-router-solicit @th,64,8 1 @th,80,48 != {mac_hex}"),
        ));
        // A redirect's target link-layer address option (after its 40
        // bytes of header, target and destination).
        v6r.push(drop(
            "mac",
            &format!("icmpv6 type nd-redirect @th,320,8 2 @th,336,48 != {mac_hex}"),
        ));
    }
    base.push(format!("ether type vmap {{ ip : goto {x}_4, ip6 : goto {x}_6, arp : goto {x}_a }}"));
    if on(Protection::RESTRICTED) {
        base.push(drop("restricted", "ether type != { ip, ip6, arp }"));
    }
    if on(Protection::IP_NOSPOOF) {
        base.push(drop("ip", tags));
        v4r.extend([
            // Version 4 and a header of 5 words or more: its first byte.
            drop("ip", "@nh,0,8 != 0x45-0x4f"),
            drop("ip", &format!("ip saddr != @{x}_v4")),
        ]);
        v6r.extend([
            drop("ip", "ip6 version != 6"),
            drop("ip", &format!("ip6 saddr != @{x}_v6")),
            drop("ip", &format!("icmpv6 type nd-neighbor-advert @th,64,128 != @{x}_t6")),
        ]);
        arp.push(drop("ip", &format!("arp saddr ip != @{x}_v4")));
    }
    // DHCP's rules are UDP's, the last of their kind: in a chain of their
    // own that only UDP goes to.
    let (mut v4u, mut v6u) = (vec![], vec![]);
    if on(Protection::DHCP_NOSPOOF) {
        base.push(drop("dhcp", tags));
        v4u.extend([
            drop("dhcp", "udp sport 67"),
            drop("dhcp", "udp dport 68"),
            // A request (op 1) from the VNIC's own chaddr.
            drop("dhcp", "udp dport 67 @th,64,8 != 1"),
            drop("dhcp", &format!("udp dport 67 @th,288,48 != {mac_hex}")),
        ]);
        v6u.extend([
            drop("dhcp", "udp sport 547"),
            drop("dhcp", "udp dport 546"),
            drop("dhcp", "udp dport 547 @th,64,8 { 2, 7, 10, 12, 13 }"),
        ]);
        v4r.push(format!("meta l4proto udp goto {x}_4u"));
        v6r.push(format!("meta l4proto udp goto {x}_6u"));
    }
    let mut shape = vec![];
    // The kinds' chains first: the dispatch names them (UDP's first of
    // all: theirs name them).
    for (kind, mut rules) in [("4u", v4u), ("6u", v6u), ("4", v4r), ("6", v6r), ("a", arp)] {
        let chain = format!("{x}_{kind}");
        rules.push(pass.clone());
        f += &format!("add chain {TABLE} {chain}\nflush chain {TABLE} {chain}\n");
        for r in &rules {
            f += &format!("add rule {TABLE} {chain} {r}\n");
        }
        shape.push((chain, None, rules.len()));
    }
    base.push(pass);
    let mut hooked = vec![(x.clone(), s.host.clone(), base)];
    if let Some(to) = &s.fwd {
        hooked.push((format!("{x}_rx"), to.clone(), vec![format!("fwd to \"{}\"", s.host)]));
    }
    for (chain, dev, rules) in hooked {
        f += &format!(
            "add chain {TABLE} {chain} {{ type filter hook ingress device \"{dev}\" priority -500; policy accept; comment \"netadm link protection of {n}\"; }}\n"
        );
        f += &format!("flush chain {TABLE} {chain}\n");
        for r in &rules {
            f += &format!("add rule {TABLE} {chain} {r}\n");
        }
        shape.push((chain, Some(dev), rules.len()));
    }
    (f, shape)
}

/// What every file starts with: the table (made if missing), so that
/// what follows may delete in it.
pub(super) fn head() -> String {
    format!("add table {TABLE}\n")
}

/// Runs `nft` on `input` (a file on stdin, or `args` alone); its stdout.
pub(super) fn nft(args: &[&str], input: Option<&str>) -> Result<String, CoreError> {
    let mut c = Command::new("nft");
    c.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CoreError::not_supported(
                "link protection and flows on kernel links need nftables' nft, which is not installed",
            )
        } else {
            CoreError::hardware(format!("nft: {e}"))
        }
    })?;
    let mut stdin = child.stdin.take().expect("piped");
    if let Some(i) = input {
        stdin.write_all(i.as_bytes()).map_err(|e| CoreError::hardware(format!("nft: {e}")))?;
    }
    drop(stdin);
    let out = child.wait_with_output().map_err(|e| CoreError::hardware(format!("nft: {e}")))?;
    if !out.status.success() {
        return Err(CoreError::hardware(format!(
            "nft {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// netadm's table as nft prints it (`nft -j`): its objects; none when the
/// table is not there.
pub(super) fn table() -> Result<Vec<serde_json::Value>, CoreError> {
    let out = match nft(&["-j", "list", "table", TABLE], None) {
        Ok(o) => o,
        Err(e) if e.message.contains("No such file") => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let v: serde_json::Value = serde_json::from_str(&out)
        .map_err(|e| CoreError::hardware(format!("nft -j list table {TABLE}: {e}")))?;
    Ok(v["nftables"].as_array().cloned().unwrap_or_default())
}

/// The nft lines that delete `chains`: all flushed first, since one may
/// jump to another, and a chain a rule names cannot go.
fn drop_chains(chains: Vec<&str>) -> String {
    let flush = chains.iter().map(|c| format!("flush chain {TABLE} {c}\n"));
    let delete = chains.iter().map(|c| format!("delete chain {TABLE} {c}\n"));
    flush.chain(delete).collect()
}

/// The names of the objects of kind `kind` (`chain`, `set`, `counter`)
/// in `objs` whose name starts with `prefix`.
pub(super) fn named<'a>(objs: &'a [serde_json::Value], kind: &str, prefix: &str) -> Vec<&'a str> {
    objs.iter()
        .filter_map(|o| o[kind]["name"].as_str())
        .filter(|n| n == &prefix || n.starts_with(&format!("{prefix}_")))
        .collect()
}

impl Kernel {
    /// Brings the rules of the kernel VNICs the change from `vf` to `vt`
    /// touches to what `vt` asks: made or rewritten (one transaction
    /// each), removed for those no longer protected or gone; then read
    /// back.
    pub(crate) fn protect(&self, vf: &View<'_>, vt: &View<'_>) -> Result<(), CoreError> {
        let (from, to) = (vf.st, vt.st);
        let mut names: BTreeSet<LinkName> = BTreeSet::new();
        names.extend(from.vnic.diff(&to.vnic).map(|(n, _, _)| n.clone()));
        names.extend(from.address.diff(&to.address).map(|(a, _, _)| a.interface().clone()));
        if from.phys.diff(&to.phys).next().is_some()
            || from.aggr.diff(&to.aggr).next().is_some()
            || from.etherstub.diff(&to.etherstub).next().is_some()
        {
            // What a VNIC is over decides where its rules go.
            names.extend(to.vnic.keys().cloned());
            names.extend(from.vnic.keys().cloned());
        }
        self.protect_vnics(vf, vt, names)
    }

    /// Brings the rules of VNICs `names` from what `vf` asks to what `vt`
    /// does; those `vt` protects are made anew, whatever `vf` asked (their
    /// devices may have been made again: `refresh-if`).
    pub(crate) fn protect_vnics(
        &self,
        vf: &View<'_>,
        vt: &View<'_>,
        names: BTreeSet<LinkName>,
    ) -> Result<(), CoreError> {
        let mut made = self.rules.made.lock().unwrap_or_else(PoisonError::into_inner);
        let mut objs: Option<Vec<serde_json::Value>> = None;
        for n in names {
            let (was, now) = (spec(self, vf, &n), spec(self, vt, &n));
            match now {
                Some(s) => {
                    // The programs first: a change that narrows what
                    // may pass narrows theirs before the rules'.
                    self.fast_paths(vt, &n, &s)?;
                    let (file, shape) = render(&n, &s);
                    // Its chains are made anew, in the same transaction:
                    // a base chain's device may have been made again (a
                    // zone moved, the build changed), and a base chain
                    // cannot move. Sets and counters stay.
                    let objs = objs.get_or_insert(table()?);
                    let old = drop_chains(named(objs, "chain", &id(&n)));
                    nft(&["-f", "-"], Some(&format!("{}{old}{}", head(), file)))?;
                    *objs = table()?;
                    verify(objs, &shape)?;
                    made.insert(n.clone(), id(&n));
                }
                None => {
                    self.rules.passing.lock().unwrap_or_else(PoisonError::into_inner).remove(&n);
                    if was.is_none() && !made.contains_key(&n) {
                        continue;
                    }
                    let objs = objs.get_or_insert(table()?);
                    let x = id(&n);
                    let mut file = String::new();
                    file += &drop_chains(named(objs, "chain", &x));
                    for s in named(objs, "set", &x) {
                        file += &format!("delete set {TABLE} {s}\n");
                    }
                    for c in named(objs, "counter", &x) {
                        file += &format!("delete counter {TABLE} {c}\n");
                    }
                    if !file.is_empty() {
                        nft(&["-f", "-"], Some(&file))?;
                    }
                    made.remove(&n);
                    *objs = table()?;
                }
            }
        }
        Ok(())
    }

    /// The BPF programs in front of the rules of VNIC `n` over a port (as
    /// `s` says; see `tcx`), which nftables' rules never see the frames
    /// of:
    ///
    /// - on the guard end, what the rules' first one passes (IPv4 that is
    ///   not UDP, from the VNIC's MAC and an allowed sender: the bulk of
    ///   a TCP stream) sent out of the stand-in and counted with what the
    ///   rules pass;
    /// - on the stand-in, everything it receives handed to the guard
    ///   end's peer, the VNIC itself, in the zone's receive path, where
    ///   the rules' `fwd` would send it out of the guard end, into the
    ///   veth and through a second receive queue. A VNIC in netadmd's own
    ///   namespace has no peer across one (`bpf_redirect_peer` would drop
    ///   its frames): they take the `fwd`.
    ///
    /// What they save: 64-byte TCP frames from a zone cost the machine
    /// 1,408 ns each through a plain macvlan, 2,250 through the rules,
    /// 1,918 through the programs (ARCHITECTURE.md). The rules stay
    /// behind them and carry what comes while a program is replaced, and
    /// everything where one cannot be had (no tcx before Linux 6.6, more
    /// than `tcx::MAX_PREFIXES` allowed senders), where netadmd says so.
    /// Put on before the rules change, and replaced by taking the old off
    /// first, the pass program never passes what the new rules refuse;
    /// where it cannot be replaced it is taken off, and where it cannot
    /// be taken off the change fails.
    fn fast_paths(&self, v: &View<'_>, n: &LinkName, s: &Spec) -> Result<(), CoreError> {
        let Some(standin) = &s.fwd else { return Ok(()) };
        let (on, end) = (
            self.nl.link_named(standin).map_err(kerr)?.index,
            self.nl.link_named(&s.host).map_err(kerr)?.index,
        );
        let v4: Vec<(Ipv4Addr, u8)> = s
            .want
            .allowed
            .iter()
            .filter_map(|(a, l)| match a {
                IpAddr::V4(a) => Some((*a, *l)),
                IpAddr::V6(_) => None,
            })
            .chain([(Ipv4Addr::UNSPECIFIED, 32)])
            .collect();
        let mut held = self.rules.passing.lock().unwrap_or_else(PoisonError::into_inner);
        let pass = if v4.len() > tcx::MAX_PREFIXES {
            // More senders than the program compares: the rules alone,
            // the counts kept for when it comes back.
            let found = if held.contains_key(n) { Ok(None) } else { tcx::pass_counts(end) };
            found.and_then(|c| {
                held.extend(c.map(|c| (n.clone(), c)));
                tcx::clear_pass(end)
            })
        } else {
            let p = tcx::Pass { mac: s.want.mac, v4 };
            tcx::pass(end, on, &p, held.get(n)).map(|c| drop(held.insert(n.clone(), c)))
        };
        if let Err(e) = pass {
            tracing::warn!(vnic = %n, "what the VNIC sends meets nftables' rules alone: {e}");
            // Never a program left passing what the rules may now refuse.
            tcx::clear_pass(end).map_err(kerr)?;
        }
        // In a namespace other than netadmd's, by identity: a zone may
        // name netadmd's own.
        let foreign = match self.device_of(v, &Link::Vnic(n.clone())) {
            Some((Some(z), _)) => Netns::open(&z).is_ok_and(|ns| !ns.is_current()),
            _ => false,
        };
        let peer = if foreign { tcx::redirect_peer(on, end) } else { tcx::clear_redirect_peer(on) };
        if let Err(e) = peer {
            tracing::warn!(vnic = %n, "what the VNIC receives takes nftables' fwd: {e}");
            tcx::clear_redirect_peer(on).map_err(kerr)?;
        }
        Ok(())
    }

    /// The books of every protected kernel VNIC: what its rules counted.
    pub(crate) fn guard_counts(&self, _v: &View<'_>) -> Vec<(LinkName, GuardCounts)> {
        let made = self.rules.made.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if made.is_empty() {
            return vec![];
        }
        let Ok(objs) = table() else { return vec![] };
        let counter = |name: String| -> (u64, u64) {
            objs.iter()
                .find(|o| o["counter"]["name"].as_str() == Some(&name))
                .map(|o| {
                    let c = &o["counter"];
                    (c["packets"].as_u64().unwrap_or(0), c["bytes"].as_u64().unwrap_or(0))
                })
                .unwrap_or_default()
        };
        made.into_iter()
            .map(|(n, x)| {
                let drops =
                    ["mac", "ip", "dhcp", "restricted"].map(|c| counter(format!("{x}_{c}")).0);
                let (mut passed, mut passed_bytes) = counter(format!("{x}_pass"));
                // What the BPF program in front of the rules passed.
                let held = self.rules.passing.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some((f, b)) = held.get(&n).and_then(|c| c.read().ok()) {
                    passed += f;
                    passed_bytes += b;
                }
                (n, GuardCounts { drops, passed, passed_bytes })
            })
            .collect()
    }
}

/// Reads back each chain of `shape` (name, device, rules): there, with
/// that many rules, and hooked on ingress of that device — or, with no
/// device, a regular chain that others jump to.
pub(super) fn verify(
    objs: &[serde_json::Value],
    shape: &[(String, Option<String>, usize)],
) -> Result<(), CoreError> {
    for (chain, dev, rules) in shape {
        let c = objs.iter().find(|o| o["chain"]["name"].as_str() == Some(chain));
        // nft's JSON names a netdev chain's device in later versions
        // only; its text always does.
        let hooked = c.is_some_and(|c| {
            let c = &c["chain"];
            match dev {
                None => c["hook"].is_null(),
                Some(dev) => {
                    c["hook"] == "ingress"
                        && (c["dev"] == dev.as_str()
                            || nft(&["list", "chain", TABLE, chain], None).is_ok_and(|t| {
                                t.contains(&format!("hook ingress device \"{dev}\""))
                            }))
                }
            }
        });
        let n = objs.iter().filter(|o| o["rule"]["chain"].as_str() == Some(chain)).count();
        if !hooked || n != *rules {
            let place = match dev {
                Some(d) => format!("on {d}'s ingress"),
                None => "a regular chain".into(),
            };
            return Err(CoreError::hardware(format!(
                "read back, chain {chain} of table {TABLE} is {}; expected it {place} with {rules} rules",
                match c {
                    None => "missing".to_owned(),
                    Some(_) if !hooked => "hooked elsewhere".to_owned(),
                    Some(_) => format!("holding {n} rules"),
                }
            )));
        }
    }
    Ok(())
}

//! The invariants every configuration keeps: checked whole at start
//! ([`check_state`]) and, for each change, where the change can break them
//! ([`check_change`]): the entries it adds or changes, and what refers to
//! the names it removes or renames. Debug builds hold the two to the same
//! verdict on every change (`Pipeline::mutate`).

use std::collections::{BTreeMap, BTreeSet};

use netadm_config::{FlowConf, VnicConf};
use netadm_model::{AddrObj, FlowName, LinkName, PropName};

use crate::CoreError;
use crate::view::{Link, View};

/// Invariants every configuration must keep; checked before any change is
/// executed and on the persistent configuration at start.
pub(crate) fn check_state(v: &View<'_>) -> Result<(), CoreError> {
    // Names are unique within each map; a clash is across them: a port's
    // name or an aggregation's taken again further on.
    let mut seen = BTreeSet::new();
    for p in v.hw.phys() {
        let n = v.phys_name(p.device());
        if !seen.insert(n.clone())
            || v.st.aggr.contains_key(n.as_str())
            || v.st.vnic.contains_key(n.as_str())
            || v.st.etherstub.contains_key(n.as_str())
        {
            return Err(CoreError::exists(format!("link name {n} is used twice")));
        }
    }
    for n in v.st.aggr.keys().chain(v.st.etherstub.keys()) {
        if v.st.vnic.contains_key(n.as_str()) {
            return Err(CoreError::exists(format!("link name {n} is used twice")));
        }
    }
    for n in v.st.etherstub.keys() {
        if v.st.aggr.contains_key(n.as_str()) {
            return Err(CoreError::exists(format!("link name {n} is used twice")));
        }
    }
    for d in v.st.phys.keys() {
        if v.hw.find(d.as_str()).is_none() {
            return Err(CoreError::not_found(format!(
                "port {d} is configured but the hardware has no such port"
            )));
        }
    }
    // The links VNICs sit over, each resolved once: there are few of them
    // and many VNICs.
    let mut overs: BTreeMap<&LinkName, Option<Link>> = BTreeMap::new();
    for conf in v.st.vnic.values() {
        overs.entry(&conf.over).or_insert_with(|| v.resolve(conf.over.as_str()));
    }
    let mut members = BTreeSet::new();
    for (a, conf) in &v.st.aggr {
        if conf.ports.is_empty() {
            return Err(CoreError::invalid_argument(format!("aggregation {a} has no ports")));
        }
        check_members(v, a.as_str(), &conf.ports)?;
        for p in &conf.ports {
            if !matches!(v.resolve(p.as_str()), Some(Link::Phys(_))) {
                return Err(CoreError::not_found(format!(
                    "aggregation {a}: port {p} is not a physical link"
                )));
            }
            if !members.insert(p.clone()) {
                return Err(CoreError::busy(format!("port {p} is in two aggregations")));
            }
            if overs.contains_key(p) || v.st.interface.contains_key(p) {
                return Err(CoreError::busy(format!(
                    "port {p} of {a} has a VNIC or IP interface over it"
                )));
            }
        }
    }
    for (n, conf) in &v.st.vnic {
        match overs.get(&conf.over).and_then(Option::as_ref) {
            None => {
                return Err(CoreError::not_found(format!(
                    "VNIC {n}: link {} does not exist",
                    conf.over
                )));
            }
            Some(Link::Vnic(_)) => {
                return Err(CoreError::invalid_argument(format!("VNIC {n} is over another VNIC")));
            }
            Some(_) if members.contains(&conf.over) => {
                return Err(CoreError::busy(format!(
                    "VNIC {n} is over aggregation port {}",
                    conf.over
                )));
            }
            Some(_) => {}
        }
    }
    for i in v.st.interface.keys() {
        if v.resolve(i.as_str()).is_none() {
            return Err(CoreError::not_found(format!("IP interface {i}: no such link")));
        }
        if members.contains(i) {
            return Err(CoreError::busy(format!("IP interface {i} is on an aggregation port")));
        }
    }
    for a in v.st.address.keys() {
        if !v.st.interface.contains_key(a.interface()) {
            return Err(CoreError::not_found(format!(
                "address {a}: no IP interface {}",
                a.interface()
            )));
        }
    }
    for (f, conf) in &v.st.flow {
        check_flow(v, f, conf)?;
    }
    check_tag_devices(v)
}

/// Flow `f`: on a link that exists and sends through netadm's datapath
/// or a kernel shaper (a physical link, an aggregation, a VNIC or VLAN,
/// not an aggregation's port; over kernel ports not a VLAN nor a VNIC
/// over an etherstub), its attributes no other flow of the link's, and a
/// priority only where a port is shared (not over an etherstub).
pub(crate) fn check_flow(v: &View<'_>, f: &FlowName, conf: &FlowConf) -> Result<(), CoreError> {
    let link = &conf.link;
    let Some(l) = v.resolve(link.as_str()) else {
        return Err(CoreError::not_found(format!("flow {f}: link {link} does not exist")));
    };
    if matches!(l, Link::Etherstub(_)) {
        return Err(CoreError::invalid_argument(format!(
            "flow {f}: {link} is an etherstub, which sends nothing of its own; put the flow on a VNIC over it"
        )));
    }
    if let Some(a) = v.aggr_of(link) {
        return Err(CoreError::busy(format!(
            "flow {f}: {link} is a port of {a}; put the flow on {a}"
        )));
    }
    // Over kernel ports a flow is a class of the shaper its link's frames
    // leave through, picked by their source MAC.
    if v.on_kernel(&l) {
        if let Some(Link::Etherstub(e)) = v.switch_of(&l) {
            return Err(CoreError::not_supported(format!(
                "flow {f}: {link} is over kernel etherstub {e}, where it has a bridge port of its own and no shaper that tells its traffic apart (its maxbw is one rate for all it sends)"
            )));
        }
        if let Link::Vnic(n) = &l
            && v.st.vnic.get(n).is_some_and(|c| c.vlan)
        {
            return Err(CoreError::not_supported(format!(
                "flow {f}: a VLAN over kernel ports sends with its port's MAC, so the kernel cannot tell its flows apart from the port's; put the flow on a VNIC over {link}"
            )));
        }
    }
    if conf.props.contains_key(&PropName::Priority)
        && matches!(v.switch_of(&l), Some(Link::Etherstub(_)))
    {
        return Err(CoreError::not_supported(format!(
            "flow {f}: priority over an etherstub: there is no port to share, and {link}'s priority is its datapath thread's CPU share, one for the link"
        )));
    }
    let same = v.st.flow.iter().find(|(g, c)| *g != f && c.link == *link && c.attrs == conf.attrs);
    if let Some((g, _)) = same {
        return Err(CoreError::exists(format!(
            "flow {f}: flow {g} on {link} has the same attributes"
        )));
    }
    Ok(())
}

/// The invariants of `ops::check_state`, checked where the change from
/// `vf` to `vt` can break them: the entries it adds or changes, and what
/// refers to the names it removes or renames. `vf` must satisfy them.
pub(crate) fn check_change(vf: &View<'_>, vt: &View<'_>) -> Result<(), CoreError> {
    let (from, to) = (vf.st, vt.st);
    // Names that went (or moved): nothing may still refer to them.
    let mut gone: BTreeSet<LinkName> = BTreeSet::new();
    for (d, _, b) in from.phys.diff(&to.phys) {
        if b.is_some() && vt.hw.find(d.as_str()).is_none() {
            return Err(CoreError::not_found(format!(
                "port {d} is configured but the hardware has no such port"
            )));
        }
        let (was, now) = (vf.phys_name(d), vt.phys_name(d));
        if was != now {
            let twice = vt.hw.phys().filter(|p| vt.phys_name(p.device()) == now).count() > 1;
            if twice || to.aggr.contains_key(&now) || to.vnic.contains_key(&now) {
                return Err(CoreError::exists(format!("link name {now} is used twice")));
            }
            gone.insert(was);
            // What named the port by its new name before is checked too.
            gone.insert(now);
        }
    }
    for (n, a, b) in from.aggr.diff(&to.aggr) {
        match b {
            Some(conf) => {
                let before = a.map(|c| c.ports.as_slice()).unwrap_or_default();
                check_aggr(vt, n, &conf.ports, before)?;
            }
            None => {
                gone.insert(n.clone());
            }
        }
    }
    for (n, _, b) in from.vnic.diff(&to.vnic) {
        match b {
            Some(conf) => check_vnic(vt, n, conf)?,
            None => {
                gone.insert(n.clone());
            }
        }
    }
    for (n, _, b) in from.etherstub.diff(&to.etherstub) {
        match b {
            Some(_) => {
                if to.aggr.contains_key(n)
                    || to.vnic.contains_key(n)
                    || vt.hw.phys().any(|p| &vt.phys_name(p.device()) == n)
                {
                    return Err(CoreError::exists(format!("link name {n} is used twice")));
                }
            }
            None => {
                gone.insert(n.clone());
            }
        }
    }
    for (i, _, b) in from.interface.diff(&to.interface) {
        match b {
            Some(_) => check_interface(vt, i)?,
            None => {
                // Its addresses go with it.
                let obj = |a: &AddrObj| a.interface() == i;
                if let Some(a) = to.address.keys().find(|a| obj(a)) {
                    return Err(CoreError::not_found(format!(
                        "address {a}: no IP interface {}",
                        a.interface()
                    )));
                }
            }
        }
    }
    for (a, _, b) in from.address.diff(&to.address) {
        if b.is_some() && !to.interface.contains_key(a.interface()) {
            return Err(CoreError::not_found(format!(
                "address {a}: no IP interface {}",
                a.interface()
            )));
        }
    }
    for (f, _, b) in from.flow.diff(&to.flow) {
        if let Some(conf) = b {
            check_flow(vt, f, conf)?;
        }
    }
    for name in &gone {
        check_users(vf, vt, name)?;
    }
    // What a VNIC tags over is named from its link's device: a VNIC or a
    // link name that changed may have made two such names one.
    if !gone.is_empty() || from.vnic.diff(&to.vnic).next().is_some() {
        check_tag_devices(vt)?;
    }
    Ok(())
}

/// Everything that refers to link `name` in `vt`, checked again: VNICs
/// over it, aggregations with it as a port, the IP interface on it.
/// A VNIC has no VNIC over it (an invariant), so a deleted VNIC costs a
/// lookup; a port or an aggregation is looked for among the VNICs.
fn check_users(vf: &View<'_>, vt: &View<'_>, name: &LinkName) -> Result<(), CoreError> {
    let to = vt.st;
    let flows: Vec<&str> =
        to.flow.iter().filter(|(_, c)| &c.link == name).map(|(f, _)| f.as_str()).collect();
    if !flows.is_empty() && vt.resolve(name.as_str()).is_none() {
        return Err(CoreError::busy(format!(
            "{name} has flows: {}; remove-flow them first",
            flows.join(", ")
        )));
    }
    for (f, c) in to.flow.iter().filter(|(_, c)| &c.link == name) {
        check_flow(vt, f, c)?;
    }
    if to.interface.contains_key(name) {
        check_interface(vt, name)?;
    }
    for (a, c) in &to.aggr {
        if c.ports.contains(name) {
            check_aggr(vt, a, &c.ports, &[])?;
        }
    }
    if !matches!(vf.resolve(name.as_str()), Some(Link::Vnic(_))) {
        for (n, c) in &to.vnic {
            if &c.over == name {
                check_vnic(vt, n, c)?;
            }
        }
    }
    Ok(())
}

/// Aggregation `a` with `ports` (of which `before` were already its ports,
/// checked then).
fn check_aggr(
    vt: &View<'_>,
    a: &LinkName,
    ports: &[LinkName],
    before: &[LinkName],
) -> Result<(), CoreError> {
    let to = vt.st;
    if to.vnic.contains_key(a)
        || to.etherstub.contains_key(a)
        || vt.hw.phys().any(|p| &vt.phys_name(p.device()) == a)
    {
        return Err(CoreError::exists(format!("link name {a} is used twice")));
    }
    if ports.is_empty() {
        return Err(CoreError::invalid_argument(format!("aggregation {a} has no ports")));
    }
    check_members(vt, a.as_str(), ports)?;
    for p in ports {
        if !matches!(vt.resolve(p.as_str()), Some(Link::Phys(_))) {
            return Err(CoreError::not_found(format!(
                "aggregation {a}: port {p} is not a physical link"
            )));
        }
        if to.aggr.values().filter(|c| c.ports.contains(p)).count() > 1
            || ports.iter().filter(|x| *x == p).count() > 1
        {
            return Err(CoreError::busy(format!("port {p} is in two aggregations")));
        }
        if before.contains(p) {
            continue;
        }
        if to.interface.contains_key(p) || to.vnic.values().any(|c| &c.over == p) {
            return Err(CoreError::busy(format!(
                "port {p} of {a} has a VNIC or IP interface over it"
            )));
        }
        if let Some((f, _)) = to.flow.iter().find(|(_, c)| &c.link == p) {
            return Err(CoreError::busy(format!("port {p} of {a} has flow {f} on it")));
        }
    }
    Ok(())
}

fn check_vnic(vt: &View<'_>, n: &LinkName, conf: &VnicConf) -> Result<(), CoreError> {
    if vt.st.aggr.contains_key(n)
        || vt.st.etherstub.contains_key(n)
        || vt.hw.phys().any(|p| &vt.phys_name(p.device()) == n)
    {
        return Err(CoreError::exists(format!("link name {n} is used twice")));
    }
    match vt.resolve(conf.over.as_str()) {
        None => Err(CoreError::not_found(format!("VNIC {n}: link {} does not exist", conf.over))),
        Some(Link::Vnic(_)) => {
            Err(CoreError::invalid_argument(format!("VNIC {n} is over another VNIC")))
        }
        Some(_) if vt.aggr_of(&conf.over).is_some() => {
            Err(CoreError::busy(format!("VNIC {n} is over aggregation port {}", conf.over)))
        }
        Some(_) => Ok(()),
    }
}

/// Over kernel links a VNIC with a VID goes over its link's 802.1Q device,
/// which every VNIC over that link with that VID shares, named as `ip`
/// names it, within the kernel's 15 bytes: two links whose device names
/// agree as far as the cut would share one, and one's VNICs would leave
/// by the other. Refused, naming both. One pass over the VNICs.
fn check_tag_devices(v: &View<'_>) -> Result<(), CoreError> {
    // The device each link VNICs tag over goes over, if a kernel link:
    // there are few such links and many VNICs.
    let mut lowers: BTreeMap<&LinkName, Option<String>> = BTreeMap::new();
    let mut seen: BTreeMap<String, (String, &LinkName)> = BTreeMap::new();
    for (n, c) in &v.st.vnic {
        let Some(vid) = c.vid.filter(|_| !c.vlan) else { continue };
        let lower = lowers.entry(&c.over).or_insert_with(|| {
            let over = v.resolve(c.over.as_str())?;
            (!matches!(over, Link::Etherstub(_)) && v.on_kernel(&over))
                .then(|| crate::view::tag_lower(v, &over))
        });
        let Some(lower) = lower.clone() else { continue };
        let name = crate::view::tagged(&lower, vid.into());
        match seen.get(&name) {
            Some((other, m)) if *other != lower => {
                let keep = crate::view::tagged_keeps(vid.into());
                return Err(CoreError::invalid_argument(format!(
                    "VNIC {n}: its 802.1Q device over {lower} would be {name}, which VNIC {m}'s over {other} is (the kernel keeps 15 bytes of a name): give one of the two links a device name that differs within its first {keep} characters"
                )));
            }
            Some(_) => {}
            None => {
                seen.insert(name, (lower, n));
            }
        }
    }
    Ok(())
}

fn check_interface(vt: &View<'_>, i: &LinkName) -> Result<(), CoreError> {
    if vt.resolve(i.as_str()).is_none() {
        return Err(CoreError::not_found(format!("IP interface {i}: no such link")));
    }
    if vt.aggr_of(i).is_some() {
        return Err(CoreError::busy(format!("IP interface {i} is on an aggregation port")));
    }
    Ok(())
}
/// Whether `ports` (links) can be the ports of aggregation `a`: driven
/// by one backend (all kernel ports, or all netadm's own), and, where
/// netadm drives them, of one class.
pub(crate) fn check_members(v: &View<'_>, a: &str, ports: &[LinkName]) -> Result<(), CoreError> {
    let caps: Vec<(&LinkName, std::sync::Arc<crate::ports::PortCaps>)> = ports
        .iter()
        .filter_map(|p| Some((p, v.hw.find(v.device_of(p)?.as_str())?.caps())))
        .collect();
    let kind = |c: &crate::ports::PortCaps| {
        if c.backend == "kernel" { "a kernel port" } else { "one of netadm's own ports" }
    };
    if let Some(((p, c), (q, d))) =
        caps.iter().zip(caps.iter().skip(1)).find(|((_, c), (_, d))| c.backend != d.backend)
    {
        return Err(CoreError::invalid_argument(format!(
            "aggregation {a}: {p} is {} and {q} is {}; an aggregation's ports are all kernel ports or all netadm's own",
            kind(c),
            kind(d)
        )));
    }
    let classes: BTreeSet<&str> = caps.iter().map(|(_, c)| c.aggregates_with.as_str()).collect();
    if classes.len() > 1 {
        return Err(CoreError::invalid_argument(format!(
            "ports of one aggregation must be of one class; got {}",
            classes.into_iter().collect::<Vec<_>>().join(" and ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::Hardware;
    use netadm_config::{AddrConf, AggrConf, IfConf, LinkState, PhysConf};
    use netadm_model::MacAddr;

    fn n(s: &str) -> LinkName {
        s.parse().unwrap()
    }

    fn aggr(ports: &[&str]) -> AggrConf {
        AggrConf {
            ports: ports.iter().map(|p| n(p)).collect(),
            policy: Default::default(),
            lacp_mode: Default::default(),
            lacp_timer: Default::default(),
            mac: None,
            props: Default::default(),
        }
    }

    fn vnic(over: &str, last: u8) -> VnicConf {
        VnicConf {
            over: n(over),
            mac: MacAddr([2, 8, 0x20, 0, 0, last]),
            mac_mode: "random".into(),
            vid: None,
            vlan: false,
            props: Default::default(),
        }
    }

    /// Every change below, from a valid configuration, is refused by the
    /// check of the change exactly when the check of everything refuses
    /// its result, with the same kind of error.
    #[test]
    fn the_check_of_a_change_agrees_with_the_check_of_everything() {
        let text = "[[port]]\nname = \"i40e0\"\nclass = \"i40e\"\nqueue_pairs = 2\nwire = { kind = \"sink\" }\n\
                    [[port]]\nname = \"i40e1\"\nclass = \"i40e\"\nqueue_pairs = 2\nwire = { kind = \"sink\" }\n\
                    [[port]]\nname = \"atl1c0\"\nclass = \"atl1c\"\nwire = { kind = \"sink\" }\n\
                    [[port]]\nname = \"atl1c1\"\nclass = \"atl1c\"\nwire = { kind = \"sink\" }\n";
        let cfg =
            netadm_config::HardwareConfig::parse(text, std::path::Path::new("hw.toml")).unwrap();
        let hw = Hardware::power_on(&cfg, netadm_rings::Strategy::Batched, None).unwrap();
        let mut base = LinkState::default();
        base.aggr.insert(n("aggr0"), aggr(&["i40e0", "i40e1"]));
        base.vnic.insert(n("vnic0"), vnic("aggr0", 0));
        base.vnic.insert(n("vnic1"), vnic("atl1c0", 1));
        base.interface.insert(n("vnic1"), IfConf::default());
        base.address.insert("vnic1/v4".parse().unwrap(), AddrConf::fixed("192.0.2.1/24"));
        let full = |st: &LinkState| check_state(&View { hw: &hw, st });
        full(&base).unwrap();
        let check = |what: &str, edit: &dyn Fn(&mut LinkState)| {
            let mut next = base.clone();
            edit(&mut next);
            let whole = full(&next).map_err(|e| e.kind);
            let (vf, vt) = (View { hw: &hw, st: &base }, View { hw: &hw, st: &next });
            let change = check_change(&vf, &vt).map_err(|e| e.kind);
            assert_eq!(change, whole, "{what}");
        };
        // A VNIC added: (what, its name, what it is over).
        for (what, name, over) in [
            ("a VNIC over an aggregation (valid)", "vnic2", "aggr0"),
            ("a VNIC over nothing", "vnic2", "nosuch0"),
            ("a VNIC over a VNIC", "vnic2", "vnic0"),
            ("a VNIC named as a port", "atl1c1", "atl1c0"),
            ("a VNIC named as an aggregation", "aggr0", "atl1c0"),
            ("a VNIC over an aggregation's port", "vnic2", "i40e0"),
        ] {
            check(what, &|s| {
                s.vnic.insert(n(name), vnic(over, 2));
            });
        }
        type Edit = fn(&mut LinkState);
        let cases: &[(&str, Edit)] = &[
            ("an aggregation removed under a VNIC", |s| {
                s.aggr.remove("aggr0");
            }),
            ("an aggregation renamed under a VNIC", |s| {
                let a = s.aggr.remove("aggr0").unwrap();
                s.aggr.insert(n("aggr1"), a);
            }),
            ("a port in two aggregations", |s| {
                s.aggr.insert(n("aggr1"), aggr(&["i40e0"]));
            }),
            ("an aggregation over a port with a VNIC", |s| {
                s.aggr.insert(n("aggr1"), aggr(&["atl1c0"]));
            }),
            ("an aggregation of nothing", |s| {
                s.aggr.insert(n("aggr1"), aggr(&[]));
            }),
            ("an aggregation of a VNIC", |s| {
                s.aggr.insert(n("aggr1"), aggr(&["vnic0"]));
            }),
            ("a port joining", |s| {
                s.aggr.insert(n("aggr0"), aggr(&["i40e0", "i40e1", "atl1c1"]));
            }),
            ("a VNIC deleted under its interface", |s| {
                s.vnic.remove("vnic1");
            }),
            ("a VNIC deleted", |s| {
                s.vnic.remove("vnic0");
            }),
            ("an interface deleted under its address", |s| {
                s.interface.remove("vnic1");
            }),
            ("an address on no interface", |s| {
                s.address.insert("vnic0/v4".parse().unwrap(), AddrConf::fixed("192.0.2.2/24"));
            }),
            ("an interface on an aggregation's port", |s| {
                s.interface.insert(n("i40e1"), IfConf::default());
            }),
            ("an interface on nothing", |s| {
                s.interface.insert(n("nosuch0"), IfConf::default());
            }),
            ("a port renamed as a VNIC", |s| {
                s.phys.insert(
                    n("atl1c1"),
                    PhysConf { name: Some(n("vnic0")), props: Default::default() },
                );
            }),
            ("a port renamed under its VNIC", |s| {
                s.phys.insert(
                    n("atl1c0"),
                    PhysConf { name: Some(n("net0")), props: Default::default() },
                );
            }),
            ("a free port renamed", |s| {
                s.phys.insert(
                    n("atl1c1"),
                    PhysConf { name: Some(n("net1")), props: Default::default() },
                );
            }),
            ("a port that is not there", |s| {
                s.phys.insert(n("i40e9"), PhysConf::default());
            }),
        ];
        for (what, edit) in cases {
            check(what, edit);
        }
    }
}

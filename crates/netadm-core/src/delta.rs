//! What a change touches, found from the configurations before and after
//! it. Both share every node the change did not copy, so their difference
//! ([`netadm_config::Section::diff`]) costs what the change changed; the
//! checks and the planning below start from it instead of walking every
//! link.

use std::collections::{BTreeMap, BTreeSet};

use netadm_config::{Section, VnicConf};
use netadm_model::{AddrObj, LinkName, MacAddr, PropName};

use crate::CoreError;
use crate::links::{Link, View};

/// The port devices whose plan may differ between the two configurations:
/// every port a changed entry runs on, before or after.
pub(crate) fn ports_touched(vf: &View<'_>, vt: &View<'_>) -> BTreeSet<LinkName> {
    let (from, to) = (vf.st, vt.st);
    let mut out = BTreeSet::new();
    let mut under = |v: &View<'_>, l: Option<Link>| {
        if let Some(l) = l {
            out.extend(v.ports_under(&l));
        }
    };
    for (d, _, _) in from.phys.diff(&to.phys) {
        under(vf, Some(Link::Phys(d.clone())));
    }
    for (n, a, b) in from.aggr.diff(&to.aggr) {
        under(vf, a.map(|_| Link::Aggr(n.clone())));
        under(vt, b.map(|_| Link::Aggr(n.clone())));
    }
    for (n, a, b) in from.vnic.diff(&to.vnic) {
        under(vf, a.map(|_| Link::Vnic(n.clone())));
        under(vt, b.map(|_| Link::Vnic(n.clone())));
    }
    for (n, _, _) in from.interface.diff(&to.interface) {
        under(vf, vf.resolve(n.as_str()));
        under(vt, vt.resolve(n.as_str()));
    }
    out
}

/// VNICs by MAC address, for one VNIC section, brought to the section it
/// is asked about by their difference: the first question walks every
/// VNIC, each after a change only what changed.
#[derive(Default)]
pub(crate) struct MacIndex {
    of: Section<LinkName, VnicConf>,
    by_mac: BTreeMap<MacAddr, BTreeSet<LinkName>>,
}

impl MacIndex {
    /// The VNICs of `vnics` with MAC `mac`, in name order.
    pub(crate) fn holders(
        &mut self,
        vnics: &Section<LinkName, VnicConf>,
        mac: MacAddr,
    ) -> Vec<LinkName> {
        if !self.of.ptr_eq(vnics) {
            for (n, a, b) in self.of.diff(vnics) {
                if let Some(a) = a
                    && let Some(set) = self.by_mac.get_mut(&a.mac)
                {
                    set.remove(n);
                    if set.is_empty() {
                        self.by_mac.remove(&a.mac);
                    }
                }
                if let Some(b) = b {
                    self.by_mac.entry(b.mac).or_default().insert(n.clone());
                }
            }
            self.of = vnics.clone();
        }
        self.by_mac.get(&mac).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }
}

/// Whether a VNIC asks for a ring group of its own.
pub(crate) fn asks_group(c: &VnicConf) -> bool {
    c.props.contains_key(&PropName::RxRings) || c.props.contains_key(&PropName::TxRings)
}

/// Whether a VNIC the change adds or changes asks for a ring group.
pub(crate) fn group_asked(vf: &View<'_>, vt: &View<'_>) -> bool {
    vf.st.vnic.diff(&vt.st.vnic).any(|(_, _, b)| b.is_some_and(asks_group))
}

/// The invariants of `ops::check_state`, checked where the change from
/// `vf` to `vt` can break them: the entries it adds or changes, and what
/// refers to the names it removes or renames. `vf` must satisfy them.
pub(crate) fn check_change(vf: &View<'_>, vt: &View<'_>) -> Result<(), CoreError> {
    let (from, to) = (vf.st, vt.st);
    // Names that went (or moved): nothing may still refer to them.
    let mut gone: BTreeSet<LinkName> = BTreeSet::new();
    for (d, _, b) in from.phys.diff(&to.phys) {
        if b.is_some() && vt.hw.port(d.as_str()).is_none() {
            return Err(CoreError::not_found(format!(
                "port {d} is configured but the hardware has no such port"
            )));
        }
        let (was, now) = (vf.phys_name(d), vt.phys_name(d));
        if was != now {
            let twice = vt.hw.ports().iter().filter(|p| vt.phys_name(&p.device) == now).count() > 1;
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
                    || vt.hw.ports().iter().any(|p| &vt.phys_name(&p.device) == n)
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
    for name in &gone {
        check_users(vf, vt, name)?;
    }
    Ok(())
}

/// Everything that refers to link `name` in `vt`, checked again: VNICs
/// over it, aggregations with it as a port, the IP interface on it.
/// A VNIC has no VNIC over it (an invariant), so a deleted VNIC costs a
/// lookup; a port or an aggregation is looked for among the VNICs.
fn check_users(vf: &View<'_>, vt: &View<'_>, name: &LinkName) -> Result<(), CoreError> {
    let to = vt.st;
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
        || vt.hw.ports().iter().any(|p| &vt.phys_name(&p.device) == a)
    {
        return Err(CoreError::exists(format!("link name {a} is used twice")));
    }
    if ports.is_empty() {
        return Err(CoreError::invalid_argument(format!("aggregation {a} has no ports")));
    }
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
    }
    Ok(())
}

fn check_vnic(vt: &View<'_>, n: &LinkName, conf: &VnicConf) -> Result<(), CoreError> {
    if vt.st.aggr.contains_key(n)
        || vt.st.etherstub.contains_key(n)
        || vt.hw.ports().iter().any(|p| &vt.phys_name(&p.device) == n)
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

fn check_interface(vt: &View<'_>, i: &LinkName) -> Result<(), CoreError> {
    if vt.resolve(i.as_str()).is_none() {
        return Err(CoreError::not_found(format!("IP interface {i}: no such link")));
    }
    if vt.aggr_of(i).is_some() {
        return Err(CoreError::busy(format!("IP interface {i} is on an aggregation port")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Hardware;
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
        base.interface.insert(n("vnic1"), IfConf {});
        base.address.insert("vnic1/v4".parse().unwrap(), AddrConf { addr: "192.0.2.1/24".into() });
        let full = |st: &LinkState| crate::ops::check_state(&View { hw: &hw, st });
        full(&base).unwrap();
        type Edit = fn(&mut LinkState);
        let cases: &[(&str, Edit)] = &[
            ("a VNIC over an aggregation (valid)", |s| {
                s.vnic.insert(n("vnic2"), vnic("aggr0", 2));
            }),
            ("a VNIC over nothing", |s| {
                s.vnic.insert(n("vnic2"), vnic("nosuch0", 2));
            }),
            ("a VNIC over a VNIC", |s| {
                s.vnic.insert(n("vnic2"), vnic("vnic0", 2));
            }),
            ("a VNIC named as a port", |s| {
                s.vnic.insert(n("atl1c1"), vnic("atl1c0", 2));
            }),
            ("a VNIC named as an aggregation", |s| {
                s.vnic.insert(n("aggr0"), vnic("atl1c0", 2));
            }),
            ("a VNIC over an aggregation's port", |s| {
                s.vnic.insert(n("vnic2"), vnic("i40e0", 2));
            }),
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
                s.address
                    .insert("vnic0/v4".parse().unwrap(), AddrConf { addr: "192.0.2.2/24".into() });
            }),
            ("an interface on an aggregation's port", |s| {
                s.interface.insert(n("i40e1"), IfConf {});
            }),
            ("an interface on nothing", |s| {
                s.interface.insert(n("nosuch0"), IfConf {});
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
            let mut next = base.clone();
            edit(&mut next);
            let whole = full(&next).map_err(|e| e.kind);
            let (vf, vt) = (View { hw: &hw, st: &base }, View { hw: &hw, st: &next });
            let change = check_change(&vf, &vt).map_err(|e| e.kind);
            assert_eq!(change, whole, "{what}");
        }
    }
}

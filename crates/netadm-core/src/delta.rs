//! What a change touches, found from the configurations before and after
//! it. Both share every node the change did not copy, so their difference
//! ([`netadm_config::Section::diff`]) costs what the change changed; the
//! checks and the planning below start from it instead of walking every
//! link.

use std::collections::BTreeSet;

use netadm_config::VnicConf;
use netadm_model::{AddrObj, LinkName, PropName};

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
    if to.vnic.contains_key(a) || vt.hw.ports().iter().any(|p| &vt.phys_name(&p.device) == a) {
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
    if vt.st.aggr.contains_key(n) || vt.hw.ports().iter().any(|p| &vt.phys_name(&p.device) == n) {
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

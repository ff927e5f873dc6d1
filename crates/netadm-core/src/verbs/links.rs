//! The verbs of links and aggregations: create-aggr, modify-aggr,
//! add-aggr, remove-aggr, delete-aggr, rename-link.

use std::collections::BTreeMap;

use netadm_config::AggrConf;
use netadm_model::{AggrPolicy, LacpMode, LacpTimer, LinkName, MacAddr};

use super::{arg, name, no_dependents, port_free, require_aggr, unicast};
use crate::CoreError;
use crate::pipeline::{Change, Cx};
use crate::view::check::check_members;
use crate::view::{Link, View};

/// `create-aggr`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_aggr(
    cx: &mut Cx<'_>,
    aggr: &str,
    ports: &[String],
    policy: &str,
    lacp_mode: &str,
    lacp_timer: &str,
    mac: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    if ports.is_empty() {
        return Err(CoreError::invalid_argument(
            "an aggregation needs at least one port (-l PORT)",
        ));
    }
    let ports: Vec<LinkName> = ports.iter().map(|p| name(p)).collect::<Result<_, _>>()?;
    if let Some(d) = ports.iter().enumerate().find(|(i, p)| ports[..*i].contains(p)) {
        return Err(CoreError::invalid_argument(format!("port {} given twice", d.1)));
    }
    let policy =
        if policy.is_empty() { AggrPolicy::default() } else { arg("policy (-P)", policy)? };
    let lacp_mode =
        if lacp_mode.is_empty() { LacpMode::default() } else { arg("LACP mode (-L)", lacp_mode)? };
    let lacp_timer = if lacp_timer.is_empty() {
        LacpTimer::default()
    } else {
        arg("LACP timer (-T)", lacp_timer)?
    };
    let mac = if mac.is_empty() { None } else { Some(unicast(arg("MAC address (-u)", mac)?)?) };
    cx.change(temporary, aggr, |v| {
        if v.taken(aggr) {
            return Err(CoreError::exists(format!("link {aggr} already exists")));
        }
        for p in &ports {
            port_free(v, p)?;
        }
        check_members(v, aggr, &ports)?;
        let mut st = v.st.clone();
        let conf = AggrConf {
            ports: ports.clone(),
            policy,
            lacp_mode,
            lacp_timer,
            mac,
            props: BTreeMap::new(),
        };
        st.aggr.insert(n.clone(), conf);
        Ok(st)
    })
}

/// `modify-aggr`: empty arguments leave settings as they are.
pub(crate) fn modify_aggr(
    cx: &mut Cx<'_>,
    aggr: &str,
    policy: &str,
    lacp_mode: &str,
    lacp_timer: &str,
    mac: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let policy: Option<AggrPolicy> =
        (!policy.is_empty()).then(|| arg("policy (-P)", policy)).transpose()?;
    let mode: Option<LacpMode> =
        (!lacp_mode.is_empty()).then(|| arg("LACP mode (-L)", lacp_mode)).transpose()?;
    let timer: Option<LacpTimer> =
        (!lacp_timer.is_empty()).then(|| arg("LACP timer (-T)", lacp_timer)).transpose()?;
    let mac: Option<MacAddr> =
        (!mac.is_empty()).then(|| arg("MAC address (-u)", mac).and_then(unicast)).transpose()?;
    if policy.is_none() && mode.is_none() && timer.is_none() && mac.is_none() {
        return Err(CoreError::invalid_argument("nothing to modify: give -P, -L, -T or -u"));
    }
    cx.change(temporary, aggr, |v| {
        require_aggr(v, aggr)?;
        let mut st = v.st.clone();
        let a = st.aggr.get_mut(&n).expect("checked");
        if let Some(p) = policy {
            a.policy = p;
        }
        if let Some(m) = mode {
            a.lacp_mode = m;
        }
        if let Some(x) = timer {
            a.lacp_timer = x;
        }
        if let Some(m) = mac {
            a.mac = Some(m);
        }
        Ok(st)
    })
}

/// `add-aggr`.
pub(crate) fn add_aggr(
    cx: &mut Cx<'_>,
    aggr: &str,
    ports: &[String],
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let ports: Vec<LinkName> = ports.iter().map(|p| name(p)).collect::<Result<_, _>>()?;
    if ports.is_empty() {
        return Err(CoreError::invalid_argument("no port to add (-l PORT)"));
    }
    cx.change(temporary, aggr, |v| {
        require_aggr(v, aggr)?;
        let mut st = v.st.clone();
        let existing = st.aggr[&n].ports.clone();
        for p in &ports {
            port_free(v, p)?;
        }
        let mut all = existing.clone();
        all.extend(ports.iter().cloned());
        check_members(v, aggr, &all).map_err(|e| match existing.first() {
            // A class of its own: said as before.
            Some(_) if e.message.starts_with("ports of one aggregation") => {
                CoreError::invalid_argument(format!(
                    "{} is not of the same class as {aggr}'s ports",
                    ports.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ))
            }
            _ => e,
        })?;
        st.aggr.get_mut(&n).expect("checked").ports.extend(ports.iter().cloned());
        crate::ports::vlan::check_room(&View { hw: v.hw, st: &st })?;
        Ok(st)
    })
}

/// `remove-aggr`.
pub(crate) fn remove_aggr(
    cx: &mut Cx<'_>,
    aggr: &str,
    ports: &[String],
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let ports: Vec<LinkName> = ports.iter().map(|p| name(p)).collect::<Result<_, _>>()?;
    if ports.is_empty() {
        return Err(CoreError::invalid_argument("no port to remove (-l PORT)"));
    }
    cx.change(temporary, aggr, |v| {
        require_aggr(v, aggr)?;
        let mut st = v.st.clone();
        let a = st.aggr.get_mut(&n).expect("checked");
        for p in &ports {
            if !a.ports.contains(p) {
                return Err(CoreError::not_found(format!("{p} is not a port of {aggr}")));
            }
        }
        a.ports.retain(|p| !ports.contains(p));
        if a.ports.is_empty() {
            return Err(CoreError::invalid_argument(format!(
                "{aggr} would have no ports left; delete-aggr {aggr} instead"
            )));
        }
        Ok(st)
    })
}

/// `delete-aggr`.
pub(crate) fn delete_aggr(
    cx: &mut Cx<'_>,
    aggr: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    cx.change(temporary, aggr, |v| {
        require_aggr(v, aggr)?;
        no_dependents(v, &n)?;
        let mut st = v.st.clone();
        st.aggr.remove(&n);
        Ok(st)
    })
}

/// `rename-link`.
pub(crate) fn rename_link(
    cx: &mut Cx<'_>,
    old: &str,
    new: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let (o, n) = (name(old)?, name(new)?);
    cx.change(temporary, old, |v| {
        let link = v.require(old)?;
        if v.taken(new) {
            return Err(CoreError::exists(format!("link {new} already exists")));
        }
        if v.st.interface.contains_key(&o) {
            return Err(CoreError::busy(format!(
                "{old} has an IP interface; delete-if {old} first"
            )));
        }
        let mut st = v.st.clone();
        match &link {
            Link::Phys(d) => {
                let e = st.phys.get_or_default(d.clone());
                e.name = (&n != d).then(|| n.clone());
            }
            Link::Aggr(_) => {
                let a = st.aggr.remove(&o).expect("resolved");
                st.aggr.insert(n.clone(), a);
            }
            Link::Vnic(_) => {
                let x = st.vnic.remove(&o).expect("resolved");
                st.vnic.insert(n.clone(), x);
            }
            Link::Etherstub(_) => {
                let x = st.etherstub.remove(&o).expect("resolved");
                st.etherstub.insert(n.clone(), x);
            }
        }
        // Only the entries that name the old link are changed (and
        // copied): the others stay shared with the configuration
        // before.
        let members: Vec<LinkName> =
            st.aggr.iter().filter(|(_, a)| a.ports.contains(&o)).map(|(k, _)| k.clone()).collect();
        for k in members {
            for p in &mut st.aggr.get_mut(&k).expect("listed").ports {
                if *p == o {
                    *p = n.clone();
                }
            }
        }
        let over: Vec<LinkName> =
            st.vnic.iter().filter(|(_, x)| x.over == o).map(|(k, _)| k.clone()).collect();
        for k in over {
            st.vnic.get_mut(&k).expect("listed").over = n.clone();
        }
        Ok(st)
    })
}

//! The verbs of links and aggregations: create-aggr, modify-aggr,
//! add-aggr, remove-aggr, delete-aggr, rename-link.

use std::collections::BTreeMap;

use netadm_config::AggrConf;
use netadm_model::{AggrPolicy, LacpMode, LacpTimer, LinkName, MacAddr};

use super::{arg, name, no_dependents, no_interface, not_taken, port_free, require_aggr, unicast};
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
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let ports = port_names(ports, "an aggregation needs at least one port (-l PORT)")?;
    let s = Settings::parse(policy, lacp_mode, lacp_timer, mac)?;
    cx.edit(|v, st| {
        not_taken(v, aggr)?;
        for p in &ports {
            port_free(v, p)?;
        }
        check_members(v, aggr, &ports)?;
        let conf = AggrConf {
            ports: ports.clone(),
            policy: s.policy.unwrap_or_default(),
            lacp_mode: s.mode.unwrap_or_default(),
            lacp_timer: s.timer.unwrap_or_default(),
            mac: s.mac,
            props: BTreeMap::new(),
        };
        st.aggr.insert(n.clone(), conf);
        Ok(())
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
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let s = Settings::parse(policy, lacp_mode, lacp_timer, mac)?;
    if s == Settings::default() {
        return Err(CoreError::invalid_argument("nothing to modify: give -P, -L, -T or -u"));
    }
    cx.edit(|v, st| {
        require_aggr(v, aggr)?;
        let a = st.aggr.get_mut(&n).expect("checked");
        a.policy = s.policy.unwrap_or(a.policy);
        a.lacp_mode = s.mode.unwrap_or(a.lacp_mode);
        a.lacp_timer = s.timer.unwrap_or(a.lacp_timer);
        a.mac = s.mac.or(a.mac);
        Ok(())
    })
}

/// An aggregation's settings as given (`-P`, `-L`, `-T`, `-u`; each
/// `None` when not).
#[derive(Debug, Default, PartialEq, Eq)]
struct Settings {
    policy: Option<AggrPolicy>,
    mode: Option<LacpMode>,
    timer: Option<LacpTimer>,
    mac: Option<MacAddr>,
}

impl Settings {
    /// Parses each setting that is not empty.
    fn parse(policy: &str, mode: &str, timer: &str, mac: &str) -> Result<Self, CoreError> {
        fn given<T>(
            s: &str,
            parse: impl FnOnce(&str) -> Result<T, CoreError>,
        ) -> Result<Option<T>, CoreError> {
            (!s.is_empty()).then(|| parse(s)).transpose()
        }
        Ok(Self {
            policy: given(policy, |s| arg("policy (-P)", s))?,
            mode: given(mode, |s| arg("LACP mode (-L)", s))?,
            timer: given(timer, |s| arg("LACP timer (-T)", s))?,
            mac: given(mac, |s| arg("MAC address (-u)", s).and_then(unicast))?,
        })
    }
}

/// Parses the port names of `-l`: at least one (`none` says so), none
/// twice.
fn port_names(ports: &[String], none: &'static str) -> Result<Vec<LinkName>, CoreError> {
    let ports: Vec<LinkName> = ports.iter().map(|p| name(p)).collect::<Result<_, _>>()?;
    if ports.is_empty() {
        return Err(CoreError::invalid_argument(none));
    }
    if let Some(d) = ports.iter().enumerate().find(|(i, p)| ports[..*i].contains(p)) {
        return Err(CoreError::invalid_argument(format!("port {} given twice", d.1)));
    }
    Ok(ports)
}

/// `add-aggr`.
pub(crate) fn add_aggr(cx: &mut Cx<'_>, aggr: &str, ports: &[String]) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let ports = port_names(ports, "no port to add (-l PORT)")?;
    cx.edit(|v, st| {
        require_aggr(v, aggr)?;
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
        crate::ports::vlan::check_room(&View { hw: v.hw, st })
    })
}

/// `remove-aggr`.
pub(crate) fn remove_aggr(
    cx: &mut Cx<'_>,
    aggr: &str,
    ports: &[String],
) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    let ports = port_names(ports, "no port to remove (-l PORT)")?;
    cx.edit(|v, st| {
        require_aggr(v, aggr)?;
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
        Ok(())
    })
}

/// `delete-aggr`.
pub(crate) fn delete_aggr(cx: &mut Cx<'_>, aggr: &str) -> Result<Change, CoreError> {
    let n = name(aggr)?;
    cx.edit(|v, st| {
        require_aggr(v, aggr)?;
        no_dependents(v, &n)?;
        st.aggr.remove(&n);
        Ok(())
    })
}

/// `rename-link`.
pub(crate) fn rename_link(cx: &mut Cx<'_>, old: &str, new: &str) -> Result<Change, CoreError> {
    let (o, n) = (name(old)?, name(new)?);
    cx.edit(|v, st| {
        let link = v.require(old)?;
        not_taken(v, new)?;
        no_interface(v, &o)?;
        // A link that is a kernel device of its name: the new name must
        // be one the kernel takes, known before its devices (and those
        // over it) are torn down to be made anew under it.
        if !matches!(link, Link::Phys(_)) && v.on_kernel(&link) {
            netadm_kernel::check_ifname(new).map_err(|e| {
                CoreError::invalid_name(format!(
                    "{new}: the kernel refuses it as a device name: {e}"
                ))
            })?;
        }
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
        let flows: Vec<_> =
            st.flow.iter().filter(|(_, f)| f.link == o).map(|(k, _)| k.clone()).collect();
        for k in flows {
            st.flow.get_mut(&k).expect("listed").link = n.clone();
        }
        Ok(())
    })
}

//! The verbs of link properties: set-linkprop, reset-linkprop, and the
//! check every property assignment passes (also create-vnic's and
//! apply's).

use std::collections::BTreeMap;

use netadm_config::{LinkProps, LinkState};
use netadm_model::{PropName, PropValue};

use super::{name, to_set};
use crate::CoreError;
use crate::pipeline::{Change, Cx};
use crate::view::{Link, View};

/// `set-linkprop`.
pub(crate) fn set_link_prop(
    cx: &mut Cx<'_>,
    link: &str,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    let props = prop_names(to_set(props)?)?;
    super::name(link)?;
    cx.edit(|v, st| {
        let l = v.require(link)?;
        for (p, val) in &props {
            let view = View { hw: v.hw, st };
            let parsed = check_prop(&view, link, &l, *p, val)?;
            props_mut(st, &l).insert(*p, parsed);
        }
        Ok(())
    })
}

/// The property names of assignments `props`, parsed.
pub(crate) fn prop_names(
    props: &BTreeMap<String, String>,
) -> Result<Vec<(PropName, String)>, CoreError> {
    props.iter().map(|(k, val)| Ok((k.parse::<PropName>()?, val.clone()))).collect()
}

/// `reset-linkprop`: every settable property when `names` is empty.
pub(crate) fn reset_link_prop(
    cx: &mut Cx<'_>,
    link: &str,
    names: &[String],
) -> Result<Change, CoreError> {
    let names: Vec<PropName> =
        names.iter().map(|n| n.parse::<PropName>()).collect::<Result<_, _>>()?;
    super::name(link)?;
    cx.change(|v| {
        let l = v.require(link)?;
        for p in &names {
            p.spec().check_class(l.class())?;
            if p.spec().perm == netadm_model::Perm::ReadOnly {
                return Err(CoreError::not_supported(format!("{p} is read-only")));
            }
        }
        if (names.is_empty() || names.contains(&PropName::Zone))
            && v.props(&l).is_some_and(|p| p.contains_key(&PropName::Zone))
        {
            crate::mirror::zone_unused(v, link)?;
        }
        if (names.is_empty() || names.contains(&PropName::Protection))
            && v.prop(&l, PropName::Protection).is_some()
        {
            crate::protect::rebuild_free(v, link, &l, true, false)?;
        }
        let mut st = v.st.clone();
        let mut next = st.clone();
        let props = props_mut(&mut next, &l);
        if names.is_empty() {
            props.clear();
        } else {
            props.retain(|k, _| !names.contains(k));
        }
        // The default must be acceptable too (an MTU default of
        // 1500 under a VNIC with mtu 9000, say).
        if names.is_empty() || names.contains(&PropName::Mtu) {
            let view = View { hw: v.hw, st: &next };
            let default = view.mtu(&l);
            let mut probe = st.clone();
            props_mut(&mut probe, &l).remove(&PropName::Mtu);
            if !matches!(l, Link::Phys(_)) || v.aggr_of(&name(link)?).is_none() {
                check_value(
                    &View { hw: v.hw, st: &probe },
                    link,
                    &l,
                    PropName::Mtu,
                    &PropValue::Uint(default.into()),
                )?;
            }
        }
        st = next;
        Ok(st)
    })
}

/// Parses and validates one property assignment on `link`, as an
/// operator typed it: the value typed by its property's spec, then
/// [`check_value`].
pub(crate) fn check_prop(
    v: &View<'_>,
    link_name: &str,
    link: &Link,
    prop: PropName,
    value: &str,
) -> Result<PropValue, CoreError> {
    let spec = prop.spec();
    spec.check_class(link.class())?;
    let val = spec.parse_value(value)?;
    check_value(v, link_name, link, prop, &val)?;
    Ok(val)
}

/// Validates a typed value of property `prop` on `link` against the link
/// and what is under and over it (the hardware's ranges and features).
pub(crate) fn check_value(
    v: &View<'_>,
    link_name: &str,
    link: &Link,
    prop: PropName,
    val: &PropValue,
) -> Result<(), CoreError> {
    prop.spec().check_class(link.class())?;
    // What a physical link's hardware can do decides its own properties.
    let caps = match link {
        Link::Phys(d) => v.hw.find(d.as_str()).map(|p| p.caps()),
        _ => None,
    };
    // An interrupt timer is a property of the ports whose NIC has it.
    let knob = || -> Result<(), CoreError> {
        let Some(c) = &caps else {
            return Err(CoreError::not_supported(format!(
                "{prop} applies to physical links; {link_name} is not one"
            )));
        };
        if c.has_knob(prop.as_str()) {
            return Ok(());
        }
        let has = &c.moderation;
        Err(CoreError::not_supported(format!(
            "{prop} applies to physical links whose NIC has that interrupt timer; {link_name} ({}-class) has {}",
            c.driver,
            if has.is_empty() { "none".to_owned() } else { has.join(", ") }
        )))
    };
    match prop {
        PropName::Zone => crate::mirror::check_zone(v, link_name, &val.to_string())?,
        PropName::Protection | PropName::AllowedIps | PropName::AllowedDhcpCids => {
            crate::protect::check(v, link_name, link, prop, val)?
        }
        PropName::RxImt | PropName::TxImt | PropName::Itr => knob()?,
        PropName::Maxbw | PropName::Priority => {
            // Over netadm's own etherstub both act on what the VNIC sends
            // through its switch (the TAP reader enforces them); over a
            // kernel etherstub maxbw is the VNIC's own shaper.
            if let Some(Link::Etherstub(e)) = v.switch_of(link)
                && v.on_kernel(link)
                && prop == PropName::Priority
            {
                return Err(CoreError::not_supported(format!(
                    "priority on {link_name}: over kernel etherstub {e} each VNIC has a bridge port of its own, with no line shared to rank them on; maxbw applies"
                )));
            }
            // Over kernel ports, frames are told apart by source MAC; an
            // 802.1Q device sends with its port's.
            if let Link::Vnic(n) = link
                && v.on_kernel(link)
                && v.st.vnic.get(n).is_some_and(|c| c.vlan)
            {
                return Err(CoreError::not_supported(format!(
                    "{prop} on {link_name}: a VLAN over kernel ports sends with its port's MAC, so the kernel cannot shape it apart; set it on a VNIC over the VLAN"
                )));
            }
        }
        PropName::Tso => {
            let without: Vec<String> = v
                .ports_under(link)
                .iter()
                .filter_map(|d| v.hw.find(d.as_str()))
                .filter(|p| !p.caps().offloads.tso)
                .map(|p| p.device().to_string())
                .collect();
            if val.as_bool() == Some(true) && !without.is_empty() {
                return Err(CoreError::not_supported(format!(
                    "tso on {link_name}: {} cannot segment TCP (no TSO in hardware)",
                    without.join(", ")
                )));
            }
        }
        PropName::RxRings | PropName::TxRings => {
            if let Some(c) = caps.filter(|c| !c.channels) {
                return Err(CoreError::not_supported(format!(
                    "{link_name} has no ring groups ({}-class)",
                    c.driver
                )));
            }
            if let Link::Aggr(_) = link {
                return Err(CoreError::not_supported(format!(
                    "{prop} on {link_name}: set it on the ports or VNICs"
                )));
            }
            // A VNIC's group must fit its port: checked when groups are
            // assigned (ports::groups::assign), before anything changes.
            let max = v
                .ports_under(link)
                .iter()
                .filter_map(|d| v.hw.find(d.as_str()))
                .map(|p| p.caps().rings)
                .min()
                .unwrap_or(0);
            if val.as_uint().unwrap_or(0) > u64::from(max) {
                return Err(CoreError::invalid_value(format!(
                    "{prop} {val} on {link_name}: at most {max} rings"
                )));
            }
        }
        PropName::Mtu => {
            if let Link::Phys(_) = link
                && let Some(a) = v.aggr_of(&name(link_name)?)
            {
                return Err(CoreError::busy(format!(
                    "{link_name} is a port of {a}: set mtu on {a}"
                )));
            }
            let mtu = val.as_uint().unwrap_or(0) as u32;
            let (lo, hi) = v.mtu_range(link);
            if mtu < lo || mtu > hi {
                return Err(CoreError::invalid_value(format!(
                    "mtu {mtu} on {link_name}: the hardware accepts {lo}-{hi}"
                )));
            }
            if let Link::Vnic(n) = link
                && let Some(over) = v.st.vnic.get(n).and_then(|c| v.resolve(c.over.as_str()))
            {
                let limit = v.mtu(&over);
                if mtu > limit {
                    return Err(CoreError::invalid_value(format!(
                        "mtu {mtu} on {link_name}: above its link's mtu {limit}"
                    )));
                }
            }
            // Lowering a link's MTU below a VNIC's explicit one would break it
            // (nothing is over a VNIC: no need to look).
            let lname = name(link_name)?;
            let over = if let Link::Vnic(_) = link { vec![] } else { v.vnics_over(&lname) };
            for vn in over {
                let vl = Link::Vnic(vn.clone());
                if v.props(&vl).is_some_and(|p| p.contains_key(&PropName::Mtu)) && v.mtu(&vl) > mtu
                {
                    return Err(CoreError::invalid_value(format!(
                        "mtu {mtu} on {link_name}: VNIC {vn} over it has mtu {}",
                        v.mtu(&vl)
                    )));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn props_mut<'a>(st: &'a mut LinkState, link: &Link) -> &'a mut LinkProps {
    match link {
        Link::Phys(d) => &mut st.phys.get_or_default(d.clone()).props,
        Link::Aggr(n) => &mut st.aggr.get_mut(n).expect("resolved").props,
        Link::Vnic(n) => &mut st.vnic.get_mut(n).expect("resolved").props,
        Link::Etherstub(n) => &mut st.etherstub.get_mut(n).expect("resolved").props,
    }
}

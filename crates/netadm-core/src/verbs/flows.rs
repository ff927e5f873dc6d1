//! Flows, as flowadm(8) has them: `add-flow`, `remove-flow`,
//! `set-flowprop`, `reset-flowprop`. A flow is an entry of the
//! configuration (`[flow.NAME]`); what its link may carry it is checked
//! with the other invariants ([`crate::view::check`]), and the datapath
//! follows the running configuration (`datapath::qos`).

use std::collections::BTreeMap;

use netadm_config::{FlowConf, LinkProps};
use netadm_model::{FlowAttrs, FlowName, PropName, PropValue};

use super::{name, to_reset, to_set};
use crate::CoreError;
use crate::pipeline::{Change, Cx};
use crate::view::check::check_flow;

/// The properties a flow has: flowadm's.
pub(crate) const FLOW_PROPS: [PropName; 2] = [PropName::Maxbw, PropName::Priority];

/// Parses flow name `s`.
pub(crate) fn flow_name(s: &str) -> Result<FlowName, CoreError> {
    s.parse().map_err(|e: netadm_model::FlowError| CoreError::invalid_name(e.to_string()))
}

/// A flow property's name: one of [`FLOW_PROPS`].
pub(crate) fn flow_prop(s: &str) -> Result<PropName, CoreError> {
    s.parse::<PropName>().ok().filter(|p| FLOW_PROPS.contains(p)).ok_or_else(|| {
        CoreError::invalid_argument(format!("flow property {s:?}: a flow has maxbw and priority"))
    })
}

/// Parses flow property assignments, each value as the link property
/// of its name takes it.
pub(crate) fn flow_props(props: &BTreeMap<String, String>) -> Result<LinkProps, CoreError> {
    props
        .iter()
        .map(|(k, v)| {
            let p = flow_prop(k)?;
            let value: PropValue = p.spec().parse_value(v)?;
            Ok((p, value))
        })
        .collect()
}

/// `add-flow -l LINK -a ATTR=VALUE,... [-p PROP=VALUE,...] FLOW`.
pub(crate) fn add_flow(
    cx: &mut Cx<'_>,
    flow: &str,
    link: &str,
    attrs: &BTreeMap<String, String>,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    let n = flow_name(flow)?;
    let l = name(link)?;
    let attrs = FlowAttrs::parse(attrs).map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    let props = flow_props(props)?;
    cx.edit(|v, st| {
        if v.st.flow.contains_key(&n) {
            return Err(CoreError::exists(format!("flow {n} already exists")));
        }
        let conf = FlowConf { link: l.clone(), attrs: attrs.clone(), props: props.clone() };
        check_flow(v, &n, &conf)?;
        st.flow.insert(n.clone(), conf);
        Ok(())
    })
}

/// `remove-flow FLOW`, or `remove-flow -l LINK`: every flow on the link.
pub(crate) fn remove_flow(cx: &mut Cx<'_>, flow: &str, link: &str) -> Result<Change, CoreError> {
    if flow.is_empty() == link.is_empty() {
        return Err(CoreError::invalid_argument("remove-flow takes a flow, or -l LINK"));
    }
    let n = if flow.is_empty() { None } else { Some(flow_name(flow)?) };
    if !link.is_empty() {
        name(link)?;
    }
    cx.edit(|v, st| {
        match &n {
            Some(n) => {
                if st.flow.remove(n).is_none() {
                    return Err(CoreError::not_found(format!("flow {n} does not exist")));
                }
            }
            None => {
                v.require(link)?;
                let on: Vec<FlowName> =
                    v.st.flow
                        .iter()
                        .filter(|(_, c)| c.link.as_str() == link)
                        .map(|(k, _)| k.clone())
                        .collect();
                if on.is_empty() {
                    return Err(CoreError::not_found(format!("link {link} has no flows")));
                }
                for k in on {
                    st.flow.remove(&k);
                }
            }
        }
        Ok(())
    })
}

/// `set-flowprop -p PROP=VALUE,... FLOW`.
pub(crate) fn set_flow_prop(
    cx: &mut Cx<'_>,
    flow: &str,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    let n = flow_name(flow)?;
    let props = flow_props(to_set(props)?)?;
    cx.edit(|v, st| {
        let mut conf = v.st.flow.get(&n).ok_or_else(|| missing(&n))?.clone();
        conf.props.extend(props.clone());
        check_flow(v, &n, &conf)?;
        st.flow.insert(n.clone(), conf);
        Ok(())
    })
}

/// `reset-flowprop [-p PROP,...] FLOW`: every property when none is named.
pub(crate) fn reset_flow_prop(
    cx: &mut Cx<'_>,
    flow: &str,
    names: &[String],
) -> Result<Change, CoreError> {
    let n = flow_name(flow)?;
    let names: Vec<PropName> = match names {
        [] => FLOW_PROPS.to_vec(),
        names => to_reset(names)?.iter().map(|p| flow_prop(p)).collect::<Result<_, _>>()?,
    };
    cx.edit(|_, st| {
        let f = st.flow.get_mut(&n).ok_or_else(|| missing(&n))?;
        f.props.retain(|p, _| !names.contains(p));
        Ok(())
    })
}

fn missing(n: &FlowName) -> CoreError {
    CoreError::not_found(format!("flow {n} does not exist"))
}

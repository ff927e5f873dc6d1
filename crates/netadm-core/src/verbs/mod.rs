//! The mutating verbs, grouped by what they act on. Each parses its
//! arguments (the core's edge: names, MACs, policies, property values
//! become typed here), then builds the next configuration with a function
//! from a [`View`] of the running configuration, and unless temporary of
//! the persistent one, to a new `LinkState` ([`Cx::change`]). Nothing
//! changes until the pipeline has the result.

pub(crate) mod flows;
pub(crate) mod ip;
pub(crate) mod links;
pub(crate) mod props;
pub(crate) mod vnics;

use std::collections::BTreeMap;

use netadm_model::{AddrObj, LinkClass, LinkName, MacAddr};

use crate::CoreError;
use crate::view::{Link, View};

fn name(s: &str) -> Result<LinkName, CoreError> {
    Ok(s.parse::<LinkName>()?)
}

/// Parses address object name `s` (`IF/TAG`).
fn addr_obj(s: &str) -> Result<AddrObj, CoreError> {
    s.parse().map_err(|e: netadm_model::AddrObjError| CoreError::invalid_name(e.to_string()))
}

fn arg<T: std::str::FromStr>(what: &str, s: &str) -> Result<T, CoreError>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(|e: T::Err| CoreError::invalid_argument(format!("{what}: {e}")))
}

/// Checks that a port link can join an aggregation or carry a new consumer.
fn port_free(v: &View<'_>, port: &LinkName) -> Result<LinkName, CoreError> {
    let Link::Phys(device) = v.require(port.as_str())? else {
        let class = v.require(port.as_str())?.class();
        return Err(CoreError::invalid_argument(format!(
            "{port} is a link of class {class}; aggregation ports must be physical links"
        )));
    };
    if let Some(a) = v.aggr_of(port) {
        return Err(CoreError::busy(format!("{port} is already a port of {a}")));
    }
    let vnics = v.vnics_over(port);
    if !vnics.is_empty() {
        let names: Vec<&str> = vnics.iter().map(|n| n.as_str()).collect();
        return Err(CoreError::busy(format!("{port} has VNICs over it: {}", names.join(", "))));
    }
    no_interface(v, port)?;
    no_flows(v, port)?;
    Ok(device)
}

fn unicast(m: MacAddr) -> Result<MacAddr, CoreError> {
    if !m.is_unicast() {
        return Err(CoreError::invalid_argument(format!(
            "{m} is a multicast address; a link needs a unicast one"
        )));
    }
    Ok(m)
}

/// Resolves `link`, which must be of class `class` (`what` names one: "an
/// aggregation").
fn require_class(
    v: &View<'_>,
    link: &str,
    class: LinkClass,
    what: &str,
) -> Result<Link, CoreError> {
    let l = v.require(link)?;
    if l.class() != class {
        return Err(CoreError::invalid_argument(format!(
            "{link} is a link of class {}, not {what}",
            l.class()
        )));
    }
    Ok(l)
}

fn require_aggr(v: &View<'_>, aggr: &str) -> Result<(), CoreError> {
    require_class(v, aggr, LinkClass::Aggr, "an aggregation").map(drop)
}

fn no_dependents(v: &View<'_>, link: &LinkName) -> Result<(), CoreError> {
    let vnics = v.vnics_over(link);
    for (what, vlan) in [("VLANs", true), ("VNICs", false)] {
        let names: Vec<&str> =
            vnics.iter().filter(|n| v.st.vnic[**n].vlan == vlan).map(|n| n.as_str()).collect();
        if !names.is_empty() {
            return Err(CoreError::busy(format!(
                "{link} has {what} over it: {}; delete them first",
                names.join(", ")
            )));
        }
    }
    no_flows(v, link)?;
    no_interface(v, link)
}

/// Refuses while flows are on link `link` (dladm: "link busy").
fn no_flows(v: &View<'_>, link: &LinkName) -> Result<(), CoreError> {
    let flows: Vec<&str> =
        v.st.flow.iter().filter(|(_, c)| &c.link == link).map(|(f, _)| f.as_str()).collect();
    if !flows.is_empty() {
        return Err(CoreError::busy(format!(
            "{link} has flows: {}; remove-flow -l {link} first",
            flows.join(", ")
        )));
    }
    Ok(())
}

/// Refuses while link `link` carries an IP interface.
fn no_interface(v: &View<'_>, link: &LinkName) -> Result<(), CoreError> {
    if v.st.interface.contains_key(link) {
        return Err(CoreError::busy(format!("{link} has an IP interface; delete-if {link} first")));
    }
    Ok(())
}

/// Refuses name `link` for a new link when a link has it already.
fn not_taken(v: &View<'_>, link: &str) -> Result<(), CoreError> {
    if v.taken(link) {
        return Err(CoreError::exists(format!("link {link} already exists")));
    }
    Ok(())
}

/// A set verb's property assignments (`-p prop=value`): at least one.
fn to_set(props: &BTreeMap<String, String>) -> Result<&BTreeMap<String, String>, CoreError> {
    if props.is_empty() {
        return Err(CoreError::invalid_argument("no property to set (-p prop=value)"));
    }
    Ok(props)
}

/// A reset verb's property names (`-p prop`): at least one.
fn to_reset(names: &[String]) -> Result<&[String], CoreError> {
    if names.is_empty() {
        return Err(CoreError::invalid_argument("no property to reset (-p prop)"));
    }
    Ok(names)
}

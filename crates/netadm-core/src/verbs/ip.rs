//! The verbs of IP interfaces and addresses (ipadm's): create-if,
//! delete-if, enable-if, disable-if, create-addr, delete-addr, up-addr,
//! down-addr, and the interface, address and protocol properties.

use std::collections::BTreeMap;

use netadm_config::{AddrConf, AddrType, IfConf, LinkState};
use netadm_model::{AddrObj, LinkName};

use super::{addr_obj, name, to_reset, to_set};
use crate::CoreError;
use crate::pipeline::{Change, Cx};
use crate::view::{Link, View};

/// `create-if`.
pub(crate) fn create_if(cx: &mut Cx<'_>, ifname: &str) -> Result<Change, CoreError> {
    let n = name(ifname)?;
    cx.edit(|v, st| {
        if let Link::Etherstub(_) = v.require(ifname)? {
            return Err(CoreError::invalid_argument(format!(
                "{ifname} is an etherstub; IP interfaces go on the VNICs over it"
            )));
        }
        if let Some(a) = v.aggr_of(&n) {
            return Err(CoreError::busy(format!(
                "{ifname} is a port of {a}; create the interface on {a}"
            )));
        }
        if v.st.interface.contains_key(&n) {
            return Err(CoreError::exists(format!("IP interface {ifname} already exists")));
        }
        st.interface.insert(n.clone(), IfConf::default());
        Ok(())
    })
}

/// `delete-if`: the interface and its addresses.
pub(crate) fn delete_if(cx: &mut Cx<'_>, ifname: &str) -> Result<Change, CoreError> {
    let n = name(ifname)?;
    cx.edit(|v, st| {
        if !v.st.interface.contains_key(&n) {
            return Err(CoreError::not_found(format!("IP interface {ifname} does not exist")));
        }
        remove_if(st, &n);
        Ok(())
    })
}

/// `create-addr -T static -a ADDR/PREFIX IF/TAG`.
pub(crate) fn create_addr(
    cx: &mut Cx<'_>,
    addrobj: &str,
    kind: &str,
    addr: &str,
) -> Result<Change, CoreError> {
    let obj = addr_obj(addrobj)?;
    let kind: AddrType = kind.parse().map_err(CoreError::invalid_argument)?;
    let conf = AddrConf { kind, ..AddrConf::fixed(addr) };
    let fixed = conf.check().map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    cx.edit(|v, st| {
        if !v.st.interface.contains_key(obj.interface()) {
            return Err(CoreError::not_found(format!(
                "IP interface {} does not exist; create-if {} first",
                obj.interface(),
                obj.interface()
            )));
        }
        if v.st.address.contains_key(&obj) {
            return Err(CoreError::exists(format!("address object {obj} already exists")));
        }
        if let Some((ip, _)) = fixed {
            not_assigned(v, ip)?;
        }
        if kind == AddrType::Addrconf {
            not_in_zone(v, obj.interface(), &format!("-T {}", kind.as_str()))?;
        }
        if kind != AddrType::Static
            && let Some((other, _)) =
                v.st.address
                    .iter()
                    .find(|(o, c)| o.interface() == obj.interface() && c.kind == kind)
        {
            return Err(CoreError::exists(format!(
                "{} already has a {} address object ({other})",
                obj.interface(),
                kind.as_str()
            )));
        }
        st.address.insert(obj.clone(), conf.clone());
        Ok(())
    })
}

/// `delete-addr`.
pub(crate) fn delete_addr(cx: &mut Cx<'_>, addrobj: &str) -> Result<Change, CoreError> {
    addr_prop(cx, addrobj, |st, obj| {
        st.address.remove(obj);
        Ok(())
    })
}

/// `set-ifprop -m PROTO -p PROP=VALUE,... IF`.
pub(crate) fn set_if_prop(
    cx: &mut Cx<'_>,
    ifname: &str,
    proto: &str,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    let n = name(ifname)?;
    let defs: Vec<(&crate::mirror::ifprop::Def, &String)> = to_set(props)?
        .iter()
        .map(|(k, val)| Ok((crate::mirror::ifprop::Def::find(proto, k)?, val)))
        .collect::<Result<_, CoreError>>()?;
    cx.edit(|v, st| {
        let link_mtu = if_link_mtu(v, &n, ifname)?;
        not_in_zone(v, &n, "set-ifprop")?;
        let conf = st.interface.get_mut(&n).expect("checked");
        for (d, val) in &defs {
            if d.key() == "ipv4.mtu" && v.resolve(ifname).is_some_and(|l| v.on_kernel(&l)) {
                return Err(CoreError::not_supported(format!(
                    "ipv4 mtu on {ifname}: the interface is the link's own kernel device, whose MTU is the link's: set-linkprop -p mtu={val} {ifname}"
                )));
            }
            let val = d.check(val, link_mtu)?;
            conf.props.insert(d.key(), val);
        }
        let v4 = crate::mirror::ifprop::if_mtu(Some(conf), link_mtu);
        if let Some(m) = conf.props.get("ipv6.mtu").and_then(|m| m.parse::<u32>().ok())
            && m > v4
        {
            return Err(CoreError::invalid_value(format!(
                "ipv6 mtu {m} is above the interface's MTU {v4} (ipv4 mtu)"
            )));
        }
        Ok(())
    })
}

/// `reset-ifprop -m PROTO -p PROP,... IF`.
pub(crate) fn reset_if_prop(
    cx: &mut Cx<'_>,
    ifname: &str,
    proto: &str,
    names: &[String],
) -> Result<Change, CoreError> {
    let n = name(ifname)?;
    let keys = reset_keys(names, |k| crate::mirror::ifprop::Def::find(proto, k).map(|d| d.key()))?;
    cx.edit(|v, st| {
        if_link_mtu(v, &n, ifname)?;
        let conf = st.interface.get_mut(&n).expect("checked");
        conf.props.retain(|k, _| !keys.contains(k));
        Ok(())
    })
}

/// `set-prop -p PROP=VALUE,... PROTO`: protocol properties of the
/// network namespace netadmd runs in.
pub(crate) fn set_prop(
    cx: &mut Cx<'_>,
    proto: &str,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    let set: Vec<(String, String)> = to_set(props)?
        .iter()
        .map(|(k, val)| {
            let d = crate::mirror::proto::Def::find(proto, k)?;
            Ok((d.key(), d.check(val)?))
        })
        .collect::<Result<_, CoreError>>()?;
    cx.edit(|_, st| {
        for (k, val) in &set {
            st.proto.insert(k.clone(), val.clone());
        }
        Ok(())
    })
}

/// `reset-prop -p PROP,... PROTO`: back to the kernel's defaults.
pub(crate) fn reset_prop(
    cx: &mut Cx<'_>,
    proto: &str,
    names: &[String],
) -> Result<Change, CoreError> {
    let keys = reset_keys(names, |k| crate::mirror::proto::Def::find(proto, k).map(|d| d.key()))?;
    cx.edit(|_, st| {
        st.proto.retain(|k, _| !keys.contains(k));
        Ok(())
    })
}

/// The stored keys of the properties a reset verb names (at least one),
/// each found by `key`.
fn reset_keys(
    names: &[String],
    key: impl Fn(&str) -> Result<String, CoreError>,
) -> Result<Vec<String>, CoreError> {
    to_reset(names)?.iter().map(|k| key(k)).collect()
}

/// `set-addrprop -p PROP=VALUE,... IF/TAG` (prefixlen, deprecated).
pub(crate) fn set_addr_prop(
    cx: &mut Cx<'_>,
    addrobj: &str,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    addr_conf(cx, addrobj, |a| {
        to_set(props)?.iter().try_for_each(|(k, val)| crate::mirror::addrprop::set(a, k, val))
    })
}

/// `reset-addrprop -p PROP,... IF/TAG`.
pub(crate) fn reset_addr_prop(
    cx: &mut Cx<'_>,
    addrobj: &str,
    names: &[String],
) -> Result<Change, CoreError> {
    addr_conf(cx, addrobj, |a| {
        to_reset(names)?.iter().try_for_each(|k| crate::mirror::addrprop::reset(a, k))
    })
}

/// A change `f` to address object `addrobj`'s entry; a new prefix
/// must not make its address clash with another's.
fn addr_conf(
    cx: &mut Cx<'_>,
    addrobj: &str,
    f: impl Fn(&mut AddrConf) -> Result<(), CoreError>,
) -> Result<Change, CoreError> {
    addr_prop(cx, addrobj, |st, obj| f(st.address.get_mut(obj).expect("looked up")))
}

/// A change `f` to a configuration where address object `addrobj`
/// exists.
fn addr_prop(
    cx: &mut Cx<'_>,
    addrobj: &str,
    f: impl Fn(&mut LinkState, &AddrObj) -> Result<(), CoreError>,
) -> Result<Change, CoreError> {
    let obj = addr_obj(addrobj)?;
    cx.edit(|v, st| {
        if !v.st.address.contains_key(&obj) {
            return Err(CoreError::not_found(format!("address object {obj} does not exist")));
        }
        f(st, &obj)
    })
}

/// `enable-if`: brings interface `ifname` back into the running
/// system from its persistent configuration, with its addresses
/// (ipadm's; it changes the running system only).
pub(crate) fn enable_if(cx: &mut Cx<'_>, ifname: &str) -> Result<Change, CoreError> {
    let n = name(ifname)?;
    let Some(conf) = cx.persisted.interface.get(&n) else {
        return Err(CoreError::not_found(format!(
            "IP interface {ifname} has no persistent configuration to enable"
        )));
    };
    cx.edit(|v, st| {
        if v.st.interface.contains_key(&n) {
            return Err(CoreError::exists(format!("IP interface {ifname} is already enabled")));
        }
        v.require(ifname)?;
        if let Some(a) = v.aggr_of(&n) {
            return Err(CoreError::busy(format!(
                "{ifname} is a port of {a}; it cannot carry an IP interface"
            )));
        }
        st.interface.insert(n.clone(), conf.clone());
        for (o, a) in cx.persisted.address.iter().filter(|(o, _)| o.interface() == &n) {
            if let Some((ip, _)) = a.fixed_addr() {
                not_assigned(v, ip)?;
            }
            if a.kind == AddrType::Addrconf {
                not_in_zone(v, &n, &format!("enable-if with {o}"))?;
            }
            st.address.insert(o.clone(), a.clone());
        }
        if !conf.props.is_empty() {
            not_in_zone(v, &n, "enable-if with interface properties")?;
        }
        Ok(())
    })
}

/// `disable-if`: removes interface `ifname` and its addresses from the
/// running system, keeping its persistent configuration (ipadm's).
pub(crate) fn disable_if(cx: &mut Cx<'_>, ifname: &str) -> Result<Change, CoreError> {
    let v = cx.v;
    let n = name(ifname)?;
    if !cx.persisted.interface.contains_key(&n) && !v.st.interface.contains_key(&n) {
        return Err(CoreError::not_found(format!("IP interface {ifname} does not exist")));
    }
    if !cx.persisted.interface.contains_key(&n) {
        return Err(CoreError::invalid_argument(format!(
            "IP interface {ifname} is not persistent: nothing would enable it again \
             (delete-if -t removes it)"
        )));
    }
    cx.edit(|v, st| {
        if !v.st.interface.contains_key(&n) {
            return Err(CoreError::not_found(format!("IP interface {ifname} is not enabled")));
        }
        remove_if(st, &n);
        Ok(())
    })
}

/// Removes interface `n` and its addresses from `st`.
fn remove_if(st: &mut LinkState, n: &LinkName) {
    st.interface.remove(n);
    st.address.retain(|a, _| a.interface() != n);
}

/// The MTU of the link under IP interface `n`, which must exist.
fn if_link_mtu(v: &View<'_>, n: &LinkName, ifname: &str) -> Result<u32, CoreError> {
    if !v.st.interface.contains_key(n) {
        return Err(CoreError::not_found(format!("IP interface {ifname} does not exist")));
    }
    Ok(v.mtu(&v.require(ifname)?))
}

/// Refuses `what` on interface `ifname` when its device lives in a zone:
/// addrconf and the interface properties under `/proc/sys/net` act in
/// netadmd's own network namespace so far.
fn not_in_zone(v: &View<'_>, ifname: &LinkName, what: &str) -> Result<(), CoreError> {
    match v.resolve(ifname.as_str()).and_then(|l| crate::mirror::zone_of(v, &l)) {
        Some(z) => Err(CoreError::not_supported(format!(
            "{what} on {ifname}: its IP interface is in zone {z}, where netadm does not do that yet"
        ))),
        None => Ok(()),
    }
}

/// `up-addr` (`up` true) / `down-addr`: a static address marked up (in
/// the kernel) or down (kept in the configuration, removed from the
/// kernel).
pub(crate) fn set_addr_up(cx: &mut Cx<'_>, addrobj: &str, up: bool) -> Result<Change, CoreError> {
    addr_prop(cx, addrobj, |st, obj| {
        let a = st.address.get_mut(obj).expect("looked up");
        if a.kind != AddrType::Static {
            return Err(CoreError::invalid_argument(format!(
                "address object {obj} is {}: only static addresses are marked up or down",
                a.kind.as_str()
            )));
        }
        a.down = !up;
        Ok(())
    })
}

/// `ip` is no address object's yet (whatever its prefix length): one
/// address, one interface.
fn not_assigned(v: &crate::view::View<'_>, ip: std::net::IpAddr) -> Result<(), CoreError> {
    match v.st.address.iter().find(|(_, c)| c.fixed_addr().is_some_and(|(x, _)| x == ip)) {
        Some((other, _)) => Err(CoreError::exists(format!("{ip} is already assigned ({other})"))),
        None => Ok(()),
    }
}

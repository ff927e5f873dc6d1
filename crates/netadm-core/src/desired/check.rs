//! An apply's document checked before anything changes: every entry it
//! adds or changes, as the verbs check them, each error naming the line
//! and key it comes from.

use std::collections::BTreeMap;

use netadm_config::{Document, LinkProps};
use netadm_model::{LinkName, PropName};

use crate::CoreError;
use crate::ports::vlan::check_room;
use crate::verbs::props::check_value;
use crate::verbs::vnics::check_over;
use crate::view::check::check_state;
use crate::view::{Link, View};

/// A document error as a typed error: the kind of what was wrong, the
/// message naming line and key.
fn doc_err(doc: &Document, path: &[&str], e: CoreError) -> CoreError {
    CoreError { kind: e.kind, message: doc.error(path, e.message).to_string() }
}

/// Checks a document's entries that differ from the running
/// configuration, each error naming the line and key it comes from.
pub(crate) fn document(doc: &Document, cur: &View<'_>, kernel: bool) -> Result<(), CoreError> {
    let d = &doc.state;
    let v = View { hw: cur.hw, st: d };
    let e = |path: &[&str], err: CoreError| doc_err(doc, path, err);
    let props = |sec: &str,
                 key: &str,
                 name: &str,
                 link: &Link,
                 was: Option<&LinkProps>,
                 now: &LinkProps|
     -> Result<(), CoreError> {
        for (p, val) in now {
            if was.and_then(|w| w.get(p)) == Some(val) {
                continue;
            }
            let pn = p.to_string();
            // A zone changes only under no IP interface: the one the
            // device has now, not one the document adds with it.
            let at = if *p == PropName::Zone { cur } else { &v };
            check_value(at, name, link, *p, val)
                .map_err(|err| e(&[sec, key, "props", &pn], err))?;
            // So does protection put on a kernel VNIC over a port.
            if *p == PropName::Protection {
                let was = was.is_some_and(|w| w.contains_key(p));
                crate::protect::rebuild_free(cur, name, link, was, true)
                    .map_err(|err| e(&[sec, key, "props", &pn], err))?;
            }
        }
        Ok(())
    };
    // Protection taken off a kernel VNIC over a port rebuilds it too.
    for (n, a, b) in cur.st.vnic.diff(&d.vnic) {
        if let (Some(a), Some(b)) = (a, b)
            && a.props.contains_key(&PropName::Protection)
            && !b.props.contains_key(&PropName::Protection)
        {
            crate::protect::rebuild_free(cur, n.as_str(), &Link::Vnic(n.clone()), true, false)
                .map_err(|err| e(&["vnic", n.as_str(), "props"], err))?;
        }
    }
    // An IP interface that stays keeps its device, made for the MAC,
    // VLAN and link under it: those change only without one.
    for (n, a, b) in cur.st.vnic.diff(&d.vnic) {
        if let (Some(a), Some(b)) = (a, b)
            && (a.over != b.over || a.mac != b.mac || a.vid != b.vid)
            && cur.st.interface.contains_key(n)
            && d.interface.contains_key(n)
        {
            let key = if a.over != b.over {
                "over"
            } else if a.mac != b.mac {
                "mac"
            } else {
                "vid"
            };
            return Err(e(
                &["vnic", n.as_str(), key],
                CoreError::busy(format!(
                    "VNIC {n} has an IP interface; its link, MAC or VLAN changes only without one (delete-if {n} first, or leave the interface out of this document)"
                )),
            ));
        }
    }
    // What VNICs are over first: the checks below follow VNICs to
    // their ports.
    for (n, _, b) in cur.st.vnic.diff(&d.vnic) {
        let Some(conf) = b else { continue };
        let k = n.as_str();
        kernel_name(kernel, n).map_err(|err| e(&["vnic", k], err))?;
        if &conf.over == n {
            return Err(e(
                &["vnic", k, "over"],
                CoreError::invalid_argument(format!("VNIC {n} is over itself")),
            ));
        }
        let Some(link) = v.resolve(conf.over.as_str()) else {
            return Err(e(
                &["vnic", k, "over"],
                CoreError::not_found(format!("link {} does not exist", conf.over)),
            ));
        };
        check_over(&v, conf.over.as_str(), &link, conf.vlan)
            .map_err(|err| e(&["vnic", k, "over"], err))?;
    }
    for (dev, _, b) in cur.st.phys.diff(&d.phys) {
        let Some(conf) = b else { continue };
        let k = dev.as_str();
        if v.hw.find(k).is_none() {
            return Err(e(
                &["phys", k],
                CoreError::not_found(format!("the hardware has no port {dev}")),
            ));
        }
        if let Some(n) = &conf.name {
            kernel_name(kernel, n).map_err(|err| e(&["phys", k, "name"], err))?;
        }
        let name = v.phys_name(dev);
        let was = cur.st.phys.get(dev).map(|c| &c.props);
        props("phys", k, name.as_str(), &Link::Phys(dev.clone()), was, &conf.props)?;
    }
    for (a, _, b) in cur.st.aggr.diff(&d.aggr) {
        let Some(conf) = b else { continue };
        let k = a.as_str();
        kernel_name(kernel, a).map_err(|err| e(&["aggr", k], err))?;
        for p in &conf.ports {
            if !matches!(v.resolve(p.as_str()), Some(Link::Phys(_))) {
                return Err(e(
                    &["aggr", k, "ports"],
                    CoreError::not_found(format!("{p} is no physical link")),
                ));
            }
            if d.aggr.iter().any(|(o, c)| o != a && c.ports.contains(p)) {
                return Err(e(
                    &["aggr", k, "ports"],
                    CoreError::busy(format!("port {p} is in two aggregations")),
                ));
            }
        }
        if let Some(m) = conf.mac
            && m.is_multicast()
        {
            return Err(e(
                &["aggr", k, "mac"],
                CoreError::invalid_argument(format!("{m} is not a unicast MAC address")),
            ));
        }
        let was = cur.st.aggr.get(a).map(|c| &c.props);
        props("aggr", k, k, &Link::Aggr(a.clone()), was, &conf.props)?;
    }
    // As create-vnic: one MAC per set of ports.
    type MacKey = (netadm_model::MacAddr, Vec<LinkName>);
    let mut macs: BTreeMap<MacKey, Vec<&LinkName>> = BTreeMap::new();
    for (n, c) in d.vnic.iter() {
        if c.vlan {
            continue;
        }
        let under = v.resolve(c.over.as_str()).map(|l| v.ports_under(&l)).unwrap_or_default();
        macs.entry((c.mac, under)).or_default().push(n);
    }
    for (n, _, b) in cur.st.vnic.diff(&d.vnic) {
        let Some(conf) = b else { continue };
        let k = n.as_str();
        if let Some(a) = v.aggr_of(&conf.over) {
            return Err(e(
                &["vnic", k, "over"],
                CoreError::busy(format!("{} is a port of {a}", conf.over)),
            ));
        }
        if !conf.vlan {
            if conf.mac.is_multicast() {
                return Err(e(
                    &["vnic", k, "mac"],
                    CoreError::invalid_argument(format!(
                        "{} is not a unicast MAC address",
                        conf.mac
                    )),
                ));
            }
            let under =
                v.resolve(conf.over.as_str()).map(|l| v.ports_under(&l)).unwrap_or_default();
            let key = (conf.mac, under);
            if let Some(o) = macs.get(&key).and_then(|h| h.iter().find(|o| **o != n)) {
                return Err(e(
                    &["vnic", k, "mac"],
                    CoreError::exists(format!(
                        "MAC address {} is already used by VNIC {o}",
                        conf.mac
                    )),
                ));
            }
        }
        let was = cur.st.vnic.get(n).map(|c| &c.props);
        props("vnic", k, k, &Link::Vnic(n.clone()), was, &conf.props)?;
    }
    for (i, _, b) in cur.st.interface.diff(&d.interface) {
        if b.is_none() {
            continue;
        }
        let k = i.as_str();
        if v.resolve(k).is_none() {
            return Err(e(
                &["interface", k],
                CoreError::not_found(format!("IP interface {i}: no such link")),
            ));
        }
        if let Some(a) = v.aggr_of(i) {
            return Err(e(&["interface", k], CoreError::busy(format!("{i} is a port of {a}"))));
        }
        kernel_name(kernel, i).map_err(|err| e(&["interface", k], err))?;
        let Some(l) = v.resolve(k) else { continue };
        if matches!(l, Link::Etherstub(_)) {
            return Err(e(
                &["interface", k],
                CoreError::invalid_argument(format!(
                    "{i} is an etherstub; an IP interface goes on a VNIC over it"
                )),
            ));
        }
        // Its properties, as set-ifprop checks them.
        let conf = b.expect("checked above");
        let zone = crate::mirror::zone_of(&v, &l);
        let link_mtu = v.mtu(&l);
        for (pk, val) in &conf.props {
            let checked = match (pk.split_once('.'), &zone) {
                (_, Some(z)) => Err(CoreError::not_supported(format!(
                    "interface properties of {i}: its IP interface is in zone {z}, where netadm does not set them yet"
                ))),
                (Some((proto, name)), None) => crate::mirror::ifprop::Def::find(proto, name)
                    .and_then(|d| d.check(val, link_mtu)),
                (None, None) => Err(CoreError::invalid_argument(format!(
                    "interface property {pk:?}: expected PROTO.PROPERTY, e.g. ipv4.forwarding"
                ))),
            };
            checked.map_err(|err| e(&["interface", k, "props", pk], err))?;
        }
    }
    // Addresses as create-addr and set-addrprop check them: one address
    // per IP, one DHCP and one addrconf object per interface, nothing
    // netadm does only in its own namespace on an interface in a zone.
    for (a, _, b) in cur.st.address.diff(&d.address) {
        let Some(conf) = b else { continue };
        let k = a.to_string();
        let zone = v.resolve(a.interface().as_str()).and_then(|l| crate::mirror::zone_of(&v, &l));
        if let Some(z) = zone
            && conf.kind == netadm_config::AddrType::Addrconf
        {
            return Err(e(
                &["address", &k],
                CoreError::not_supported(format!(
                    "{a}: its IP interface is in zone {z}, where netadm has no addrconf addresses yet"
                )),
            ));
        }
        let clash = d.address.iter().find(|(o, c)| {
            *o != a
                && match conf.kind {
                    netadm_config::AddrType::Static => {
                        conf.fixed_addr().is_some()
                            && c.fixed_addr().map(|x| x.0) == conf.fixed_addr().map(|x| x.0)
                    }
                    kind => o.interface() == a.interface() && c.kind == kind,
                }
        });
        if let Some((o, _)) = clash {
            return Err(e(
                &["address", &k],
                CoreError::exists(format!("{a} clashes with address object {o}")),
            ));
        }
    }
    // Protocol properties, as set-prop checks them.
    for (pk, _, b) in cur.st.proto.diff(&d.proto) {
        let Some(val) = b else { continue };
        let checked = match pk.split_once('.') {
            Some((proto, name)) => {
                crate::mirror::proto::Def::find(proto, name).and_then(|d| d.check(val))
            }
            None => Err(CoreError::invalid_argument(format!(
                "protocol property {pk:?}: expected PROTO.PROPERTY, e.g. ipv4.ttl"
            ))),
        };
        checked.map_err(|err| e(&["proto", pk], err))?;
    }
    for (a, _, b) in cur.st.address.diff(&d.address) {
        if b.is_some() && !d.interface.contains_key(a.interface()) {
            let k = a.to_string();
            return Err(e(
                &["address", &k],
                CoreError::not_found(format!("no IP interface {}", a.interface())),
            ));
        }
    }
    // Everything else the configuration must keep (names used twice
    // across sections, VNICs over aggregation ports, ...).
    check_state(&v)?;
    check_room(&v)?;
    Ok(())
}

/// A link name as the kernel would take it for a device, when this
/// netadmd makes kernel devices (`kernel`).
fn kernel_name(kernel: bool, n: &LinkName) -> Result<(), CoreError> {
    if !kernel {
        return Ok(());
    }
    netadm_kernel::check_ifname(n.as_str())
        .map_err(|err| CoreError::invalid_name(format!("the kernel refuses the name: {err}")))
}

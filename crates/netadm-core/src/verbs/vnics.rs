//! The verbs of VNICs, VLANs and etherstubs: create-vnic, delete-vnic,
//! create-vlan, delete-vlan, create-etherstub, delete-etherstub.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};

use netadm_config::{EtherstubConf, VnicConf};
use netadm_model::{LinkClass, LinkName, MacAddr, VlanId};

use super::props::{check_prop, prop_names};
use super::{arg, name, no_dependents, no_interface, not_taken, require_class, unicast};
use crate::CoreError;
use crate::pipeline::{Change, Cx};
use crate::view::{Link, View};

/// `create-vnic`. `mac`: `auto`, `factory`, `random` or an address.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_vnic(
    cx: &mut Cx<'_>,
    vnic: &str,
    over: &str,
    mac: &str,
    vid: u16,
    props: &BTreeMap<String, String>,
) -> Result<Change, CoreError> {
    let v = cx.v;
    let n = name(vnic)?;
    let over_n = name(over)?;
    let vid = VlanId::parse_opt(&vid.to_string())
        .map_err(|e| CoreError::invalid_argument(format!("VLAN id (-v): {e}")))?;
    let (mode, fixed) = match mac {
        "" | "auto" => ("auto", None),
        "random" => ("random", None),
        "factory" => ("factory", None),
        m => ("fixed", Some(unicast(arg("MAC address (-m)", m)?)?)),
    };
    let props = prop_names(props)?;
    let address = match (mode, fixed) {
        (_, Some(m)) => m,
        ("factory", _) => {
            let Some(Link::Phys(d)) = v.resolve(over) else {
                return Err(CoreError::invalid_argument(format!(
                    "{over} has no factory MAC addresses (not a physical link)"
                )));
            };
            let port = v.hw.find(d.as_str()).expect("resolved");
            if !port.caps().factory_macs {
                return Err(CoreError::not_supported(format!(
                    "{over} has no factory MAC addresses to give a VNIC: a VNIC over it is a macvlan of its device; use -m auto, random or an address"
                )));
            }
            let base = port.mac().0;
            let nth = |i: u8| {
                MacAddr([
                    base[0],
                    base[1],
                    base[2],
                    base[3],
                    base[4] | 0x80,
                    base[5].wrapping_add(i),
                ])
            };
            // The first of the port's factory addresses no VNIC
            // holds (by index: a lookup per address tried).
            let mut macs = cx.macs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (0..=u8::MAX).map(nth).find(|m| macs.holders(&v.st.vnic, *m).is_empty()).ok_or_else(
                || CoreError::busy(format!("{over}: every factory MAC address is in use")),
            )?
        }
        _ => random_mac(vnic),
    };
    let macs_index = cx.macs;
    cx.edit(|v, st| {
        let link = new_over(v, vnic, over, &over_n, false)?;
        // The VNICs with this MAC, by index, not by walking them all.
        let holders = macs_index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .holders(&v.st.vnic, address);
        // (The ports under the link each sits over: this compared
        // the ports "under" a VNIC named as that link, none, so it
        // never refused anything.)
        // Etherstubs have no ports: each is a segment of its own, told
        // apart by the switch itself.
        let segment = |l: &Link| match v.ports_under(l) {
            u if u.is_empty() => Err(v.switch_of(l).unwrap_or_else(|| l.clone())),
            u => Ok(u),
        };
        let here = segment(&link);
        if let Some(other) = holders
            .iter()
            .find(|o| v.resolve(v.st.vnic[*o].over.as_str()).is_some_and(|l| segment(&l) == here))
        {
            return Err(CoreError::exists(format!(
                "MAC address {address} is already used by VNIC {other}"
            )));
        }
        let conf = VnicConf::new(over_n.clone(), address, mode, vid, false);
        st.vnic.insert(n.clone(), conf);
        let view = View { hw: v.hw, st };
        let vl = Link::Vnic(n.clone());
        let mut checked = BTreeMap::new();
        for (p, val) in &props {
            let typed = check_prop(&view, vnic, &vl, *p, val)?;
            if checked.insert(*p, typed).is_some() {
                return Err(CoreError::invalid_argument(format!("property {p} given twice")));
            }
        }
        st.vnic.get_mut(&n).expect("inserted").props = checked;
        crate::ports::vlan::check_room(&View { hw: v.hw, st })
    })
}

/// `delete-vnic`.
pub(crate) fn delete_vnic(cx: &mut Cx<'_>, vnic: &str) -> Result<Change, CoreError> {
    delete_vnic_link(cx, vnic, false)
}

/// `create-vlan`: VLAN `vid` (1-4094) over physical link or aggregation
/// `over`, as a link of its own named `vlan`, with its link's MAC
/// address; at most one VLAN per VID over a link.
pub(crate) fn create_vlan(
    cx: &mut Cx<'_>,
    vlan: &str,
    over: &str,
    vid: u16,
) -> Result<Change, CoreError> {
    let n = name(vlan)?;
    let over_n = name(over)?;
    let vid = VlanId::try_from(vid)
        .map_err(|e| CoreError::invalid_argument(format!("VLAN id (-v): {e}")))?;
    cx.edit(|v, st| {
        let link = new_over(v, vlan, over, &over_n, true)?;
        let mac = match &link {
            Link::Etherstub(_) | Link::Vnic(_) => unreachable!("refused by check_over"),
            Link::Aggr(a) => v.st.aggr[a].mac.map_or_else(
                || {
                    let first = v.ports_under(&link).into_iter().next();
                    first.and_then(|d| v.hw.find(d.as_str())).map(|p| p.mac())
                },
                Some,
            ),
            Link::Phys(d) => v.hw.find(d.as_str()).map(|p| p.mac()),
        };
        let mac = mac.ok_or_else(|| CoreError::internal(format!("{over}: no MAC")))?;
        if let Some((other, _)) =
            v.st.vnic.iter().find(|(_, c)| c.vlan && c.over == over_n && c.vid == Some(vid))
        {
            return Err(CoreError::exists(format!(
                "VLAN {vid} over {over} already exists: {other}"
            )));
        }
        st.vnic.insert(n.clone(), VnicConf::new(over_n.clone(), mac, "fixed", Some(vid), true));
        crate::ports::vlan::check_room(&View { hw: v.hw, st })
    })
}

/// `delete-vlan`.
pub(crate) fn delete_vlan(cx: &mut Cx<'_>, vlan: &str) -> Result<Change, CoreError> {
    delete_vnic_link(cx, vlan, true)
}

/// Checks new link `link` (a VNIC, `vlan` false, or a VLAN) and what it
/// goes over, `over`: no other link has its name, and [`check_over`];
/// not a port of an aggregation (it goes over the aggregation).
fn new_over(
    v: &View<'_>,
    link: &str,
    over: &str,
    over_n: &LinkName,
    vlan: bool,
) -> Result<Link, CoreError> {
    not_taken(v, link)?;
    let l = v.require(over)?;
    check_over(v, over, &l, vlan)?;
    if let Some(a) = v.aggr_of(over_n) {
        let what = if vlan { "VLAN" } else { "VNIC" };
        return Err(CoreError::busy(format!(
            "{over} is a port of {a}; create the {what} over {a}"
        )));
    }
    Ok(l)
}

/// Deletes VNIC (`vlan` false) or VLAN `link`; the other kind is refused
/// with the verb that deletes it.
fn delete_vnic_link(cx: &mut Cx<'_>, link: &str, vlan: bool) -> Result<Change, CoreError> {
    let n = name(link)?;
    let (what, other, verb) =
        if vlan { ("VLAN", "VNIC", "delete-vnic") } else { ("VNIC", "VLAN", "delete-vlan") };
    cx.edit(|v, st| {
        require_class(v, link, LinkClass::Vnic, &format!("a {what}"))?;
        if v.st.vnic[&n].vlan != vlan {
            return Err(CoreError::invalid_argument(format!(
                "{link} is a {other}, not a {what}; use {verb}"
            )));
        }
        no_interface(v, &n)?;
        super::no_flows(v, &n)?;
        st.vnic.remove(&n);
        Ok(())
    })
}

/// `create-etherstub`: a virtual switch with no port; the VNICs
/// created over it reach only each other.
pub(crate) fn create_etherstub(cx: &mut Cx<'_>, stub: &str) -> Result<Change, CoreError> {
    let n = name(stub)?;
    cx.edit(|v, st| {
        not_taken(v, stub)?;
        let conf = EtherstubConf { kind: v.hw.etherstub_kind(), ..EtherstubConf::default() };
        st.etherstub.insert(n.clone(), conf);
        Ok(())
    })
}

/// `delete-etherstub`: refused while VNICs are over it.
pub(crate) fn delete_etherstub(cx: &mut Cx<'_>, stub: &str) -> Result<Change, CoreError> {
    let n = name(stub)?;
    cx.edit(|v, st| {
        require_class(v, stub, LinkClass::Etherstub, "an etherstub")?;
        no_dependents(v, &n)?;
        st.etherstub.remove(&n);
        Ok(())
    })
}

/// What a VNIC (`vlan` false) or a VLAN link (`vlan` true) may go over, as
/// create-vnic, create-vlan and apply check it: not a VNIC or a VLAN, and
/// for a VLAN not an etherstub either (a switch has no wire to tag on).
pub(crate) fn check_over(
    v: &View<'_>,
    over: &str,
    link: &Link,
    vlan: bool,
) -> Result<(), CoreError> {
    let what = match link {
        Link::Vnic(o) if v.st.vnic[o].vlan => "a VLAN",
        Link::Vnic(_) => "a VNIC",
        Link::Etherstub(_) if vlan => "an etherstub",
        _ => return Ok(()),
    };
    let goes = if vlan {
        "VLANs go over a physical link or an aggregation"
    } else {
        "VNICs go over a physical link, an aggregation or an etherstub"
    };
    Err(CoreError::invalid_argument(format!("{over} is {what}; {goes}")))
}

fn random_mac(seed: &str) -> MacAddr {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(seed.as_bytes());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let x = h.finish().to_le_bytes();
    // dladm's prefix for random VNIC addresses: locally administered.
    MacAddr([0x02, 0x08, 0x20, x[0], x[1], x[2]])
}

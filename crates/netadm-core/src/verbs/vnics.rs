//! The verbs of VNICs, VLANs and etherstubs: create-vnic, delete-vnic,
//! create-vlan, delete-vlan, create-etherstub, delete-etherstub.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};

use netadm_config::{EtherstubConf, VnicConf};
use netadm_model::{MacAddr, PropName, VlanId};

use super::props::check_prop;
use super::{arg, name, no_dependents, unicast};
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
    temporary: bool,
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
    let props: Vec<(PropName, String)> = props
        .iter()
        .map(|(k, val)| Ok((k.parse::<PropName>()?, val.clone())))
        .collect::<Result<_, CoreError>>()?;
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
    cx.change(temporary, vnic, |v| {
        if v.taken(vnic) {
            return Err(CoreError::exists(format!("link {vnic} already exists")));
        }
        let link = v.require(over)?;
        check_over(v, over, &link, false)?;
        if let Some(a) = v.aggr_of(&over_n) {
            return Err(CoreError::busy(format!(
                "{over} is a port of {a}; create the VNIC over {a}"
            )));
        }
        // The VNICs with this MAC, by index, not by walking them all.
        let holders = macs_index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .holders(&v.st.vnic, address);
        // (The ports under the link each sits over: this compared
        // the ports "under" a VNIC named as that link, none, so it
        // never refused anything.)
        let under = v.ports_under(&link);
        if let Some(other) = holders.iter().find(|o| {
            v.resolve(v.st.vnic[*o].over.as_str()).is_some_and(|l| v.ports_under(&l) == under)
        }) {
            return Err(CoreError::exists(format!(
                "MAC address {address} is already used by VNIC {other}"
            )));
        }
        let mut st = v.st.clone();
        st.vnic.insert(
            n.clone(),
            VnicConf {
                over: over_n.clone(),
                mac: address,
                mac_mode: mode.to_owned(),
                vid,
                vlan: false,
                props: BTreeMap::new(),
            },
        );
        let view = View { hw: v.hw, st: &st };
        let vl = Link::Vnic(n.clone());
        let mut checked = BTreeMap::new();
        for (p, val) in &props {
            let typed = check_prop(&view, vnic, &vl, *p, val)?;
            if checked.insert(*p, typed).is_some() {
                return Err(CoreError::invalid_argument(format!("property {p} given twice")));
            }
        }
        st.vnic.get_mut(&n).expect("inserted").props = checked;
        crate::ports::vlan::check_room(&View { hw: v.hw, st: &st })?;
        Ok(st)
    })
}

/// `delete-vnic`.
pub(crate) fn delete_vnic(
    cx: &mut Cx<'_>,
    vnic: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(vnic)?;
    cx.change(temporary, vnic, |v| {
        match v.require(vnic)? {
            Link::Vnic(_) if v.st.vnic[&n].vlan => {
                return Err(CoreError::invalid_argument(format!(
                    "{vnic} is a VLAN, not a VNIC; use delete-vlan"
                )));
            }
            Link::Vnic(_) => {}
            l => {
                return Err(CoreError::invalid_argument(format!(
                    "{vnic} is a link of class {}, not a VNIC",
                    l.class()
                )));
            }
        }
        if v.st.interface.contains_key(&n) {
            return Err(CoreError::busy(format!(
                "{vnic} has an IP interface; delete-if {vnic} first"
            )));
        }
        let mut st = v.st.clone();
        st.vnic.remove(&n);
        Ok(st)
    })
}

/// `create-vlan`: VLAN `vid` (1-4094) over physical link or aggregation
/// `over`, as a link of its own named `vlan`, with its link's MAC
/// address; at most one VLAN per VID over a link.
pub(crate) fn create_vlan(
    cx: &mut Cx<'_>,
    vlan: &str,
    over: &str,
    vid: u16,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(vlan)?;
    let over_n = name(over)?;
    let vid = VlanId::try_from(vid)
        .map_err(|e| CoreError::invalid_argument(format!("VLAN id (-v): {e}")))?;
    cx.change(temporary, vlan, |v| {
        if v.taken(vlan) {
            return Err(CoreError::exists(format!("link {vlan} already exists")));
        }
        let link = v.require(over)?;
        check_over(v, over, &link, true)?;
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
        if let Some(a) = v.aggr_of(&over_n) {
            return Err(CoreError::busy(format!(
                "{over} is a port of {a}; create the VLAN over {a}"
            )));
        }
        if let Some((other, _)) =
            v.st.vnic.iter().find(|(_, c)| c.vlan && c.over == over_n && c.vid == Some(vid))
        {
            return Err(CoreError::exists(format!(
                "VLAN {vid} over {over} already exists: {other}"
            )));
        }
        let mut st = v.st.clone();
        st.vnic.insert(
            n.clone(),
            VnicConf {
                over: over_n.clone(),
                mac,
                mac_mode: "fixed".to_owned(),
                vid: Some(vid),
                vlan: true,
                props: BTreeMap::new(),
            },
        );
        crate::ports::vlan::check_room(&View { hw: v.hw, st: &st })?;
        Ok(st)
    })
}

/// `delete-vlan`.
pub(crate) fn delete_vlan(
    cx: &mut Cx<'_>,
    vlan: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(vlan)?;
    cx.change(temporary, vlan, |v| {
        match v.require(vlan)? {
            Link::Vnic(_) if v.st.vnic[&n].vlan => {}
            Link::Vnic(_) => {
                return Err(CoreError::invalid_argument(format!(
                    "{vlan} is a VNIC, not a VLAN; use delete-vnic"
                )));
            }
            l => {
                return Err(CoreError::invalid_argument(format!(
                    "{vlan} is a link of class {}, not a VLAN",
                    l.class()
                )));
            }
        }
        if v.st.interface.contains_key(&n) {
            return Err(CoreError::busy(format!(
                "{vlan} has an IP interface; delete-if {vlan} first"
            )));
        }
        let mut st = v.st.clone();
        st.vnic.remove(&n);
        Ok(st)
    })
}

/// `create-etherstub`: a virtual switch with no port; the VNICs
/// created over it reach only each other.
pub(crate) fn create_etherstub(
    cx: &mut Cx<'_>,
    stub: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(stub)?;
    cx.change(temporary, stub, |v| {
        if v.taken(stub) {
            return Err(CoreError::exists(format!("link {stub} already exists")));
        }
        let mut st = v.st.clone();
        st.etherstub.insert(
            n.clone(),
            EtherstubConf { kind: v.hw.etherstub_kind(), ..EtherstubConf::default() },
        );
        Ok(st)
    })
}

/// `delete-etherstub`: refused while VNICs are over it.
pub(crate) fn delete_etherstub(
    cx: &mut Cx<'_>,
    stub: &str,
    temporary: bool,
) -> Result<Change, CoreError> {
    let n = name(stub)?;
    cx.change(temporary, stub, |v| {
        match v.require(stub)? {
            Link::Etherstub(_) => {}
            l => {
                return Err(CoreError::invalid_argument(format!(
                    "{stub} is a link of class {}, not an etherstub",
                    l.class()
                )));
            }
        }
        no_dependents(v, &n)?;
        let mut st = v.st.clone();
        st.etherstub.remove(&n);
        Ok(st)
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

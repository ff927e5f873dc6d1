//! The mutating verbs. Each parses its arguments, then builds the next
//! configuration with one `apply` function run against the running
//! configuration and, unless temporary, against the persistent one.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};

use netadm_config::{AddrConf, AddrType, AggrConf, EtherstubConf, IfConf, LinkState, VnicConf};

/// How long `create-addr -T dhcp` waits for a lease before answering.
const DHCP_WAIT: std::time::Duration = std::time::Duration::from_secs(15);
use crate::Report;
use netadm_model::{
    AddrObj, AggrPolicy, LacpMode, LacpTimer, LinkName, MacAddr, PropName, PropValue, VlanId,
};
use netadm_nic::NicClass;

use crate::links::{Link, View};
use crate::{Change, Core, CoreError, Progress, Timing};

fn name(s: &str) -> Result<LinkName, CoreError> {
    Ok(s.parse::<LinkName>()?)
}

fn arg<T: std::str::FromStr>(what: &str, s: &str) -> Result<T, CoreError>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(|e: T::Err| CoreError::invalid_argument(format!("{what}: {e}")))
}

/// Whether `subject` (a link, IP interface or address object name) exists
/// in a configuration.
fn exists(v: &View<'_>, subject: &str) -> bool {
    v.resolve(subject).is_some()
        || subject.parse::<LinkName>().is_ok_and(|n| v.st.interface.contains_key(&n))
        || subject.parse::<AddrObj>().is_ok_and(|a| v.st.address.contains_key(&a))
}

/// Builds the change: `apply` on the running configuration, and on the
/// persistent one unless `temporary`. An object that exists only in the
/// running configuration (it was created with `-t`) is changed there only,
/// and the result says so; any other failure against the persistent
/// configuration is an error (e.g. a persistent VNIC over a temporary
/// aggregation).
fn change(
    v: &View<'_>,
    persisted: &LinkState,
    temporary: bool,
    t: &mut Timing,
    subject: &str,
    apply: impl Fn(&View<'_>) -> Result<LinkState, CoreError>,
) -> Result<Change, CoreError> {
    let running = apply(v)?;
    if temporary {
        return Ok(Change { running, persisted: None, same: false });
    }
    // Nothing temporary anywhere: the running configuration is the
    // persistent one (one allocation), and `apply` gives the same result.
    if std::ptr::eq(v.st, persisted) {
        return Ok(Change { running, persisted: None, same: true });
    }
    let pv = View { hw: v.hw, st: persisted };
    if exists(v, subject) && !exists(&pv, subject) {
        t.note(format!("{subject} is temporary: the change was not persisted"));
        return Ok(Change { running, persisted: None, same: false });
    }
    match apply(&pv) {
        Ok(p) => Ok(Change { running, persisted: Some(p), same: false }),
        Err(e) => Err(CoreError {
            message: format!(
                "{}; in the persistent configuration (use -t for a temporary change)",
                e.message
            ),
            ..e
        }),
    }
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
    if v.st.interface.contains_key(port) {
        return Err(CoreError::busy(format!("{port} has an IP interface; delete-if {port} first")));
    }
    Ok(device)
}

fn class_of(v: &View<'_>, device: &LinkName) -> NicClass {
    v.hw.port(device.as_str()).map_or(NicClass::I40e, |p| p.class())
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

/// Invariants every configuration must keep; checked before any change is
/// executed and on the persistent configuration at start.
pub(crate) fn check_state(v: &View<'_>) -> Result<(), CoreError> {
    // Names are unique within each map; a clash is across them: a port's
    // name or an aggregation's taken again further on.
    let mut seen = BTreeSet::new();
    for p in v.hw.ports() {
        let n = v.phys_name(&p.device);
        if !seen.insert(n.clone())
            || v.st.aggr.contains_key(n.as_str())
            || v.st.vnic.contains_key(n.as_str())
            || v.st.etherstub.contains_key(n.as_str())
        {
            return Err(CoreError::exists(format!("link name {n} is used twice")));
        }
    }
    for n in v.st.aggr.keys().chain(v.st.etherstub.keys()) {
        if v.st.vnic.contains_key(n.as_str()) {
            return Err(CoreError::exists(format!("link name {n} is used twice")));
        }
    }
    for n in v.st.etherstub.keys() {
        if v.st.aggr.contains_key(n.as_str()) {
            return Err(CoreError::exists(format!("link name {n} is used twice")));
        }
    }
    for d in v.st.phys.keys() {
        if v.hw.port(d.as_str()).is_none() {
            return Err(CoreError::not_found(format!(
                "port {d} is configured but the hardware has no such port"
            )));
        }
    }
    // The links VNICs sit over, each resolved once: there are few of them
    // and many VNICs.
    let mut overs: BTreeMap<&LinkName, Option<Link>> = BTreeMap::new();
    for conf in v.st.vnic.values() {
        overs.entry(&conf.over).or_insert_with(|| v.resolve(conf.over.as_str()));
    }
    let mut members = BTreeSet::new();
    for (a, conf) in &v.st.aggr {
        if conf.ports.is_empty() {
            return Err(CoreError::invalid_argument(format!("aggregation {a} has no ports")));
        }
        for p in &conf.ports {
            if !matches!(v.resolve(p.as_str()), Some(Link::Phys(_))) {
                return Err(CoreError::not_found(format!(
                    "aggregation {a}: port {p} is not a physical link"
                )));
            }
            if !members.insert(p.clone()) {
                return Err(CoreError::busy(format!("port {p} is in two aggregations")));
            }
            if overs.contains_key(p) || v.st.interface.contains_key(p) {
                return Err(CoreError::busy(format!(
                    "port {p} of {a} has a VNIC or IP interface over it"
                )));
            }
        }
    }
    for (n, conf) in &v.st.vnic {
        match overs.get(&conf.over).and_then(Option::as_ref) {
            None => {
                return Err(CoreError::not_found(format!(
                    "VNIC {n}: link {} does not exist",
                    conf.over
                )));
            }
            Some(Link::Vnic(_)) => {
                return Err(CoreError::invalid_argument(format!("VNIC {n} is over another VNIC")));
            }
            Some(_) if members.contains(&conf.over) => {
                return Err(CoreError::busy(format!(
                    "VNIC {n} is over aggregation port {}",
                    conf.over
                )));
            }
            Some(_) => {}
        }
    }
    for i in v.st.interface.keys() {
        if v.resolve(i.as_str()).is_none() {
            return Err(CoreError::not_found(format!("IP interface {i}: no such link")));
        }
        if members.contains(i) {
            return Err(CoreError::busy(format!("IP interface {i} is on an aggregation port")));
        }
    }
    for a in v.st.address.keys() {
        if !v.st.interface.contains_key(a.interface()) {
            return Err(CoreError::not_found(format!(
                "address {a}: no IP interface {}",
                a.interface()
            )));
        }
    }
    Ok(())
}

/// The MTU range a link accepts: its ports' common range.
fn mtu_range(v: &View<'_>, link: &Link) -> (u32, u32) {
    let ports = v.ports_under(link);
    let mut range = (68, u32::MAX);
    for d in ports {
        if let Some(p) = v.hw.port(d.as_str()) {
            let (lo, hi) = p.mtu_range();
            range = (range.0.max(lo), range.1.min(hi));
        }
    }
    range
}

/// Validates one property assignment on `link`.
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
    let driver = match link {
        Link::Phys(d) => Some(class_of(v, d)),
        _ => None,
    };
    let needs = |class: NicClass| -> Result<(), CoreError> {
        if driver != Some(class) {
            return Err(CoreError::not_supported(format!(
                "{prop} applies to {class}-class physical links; {link_name} is not one"
            )));
        }
        Ok(())
    };
    match prop {
        PropName::Zone => crate::mirror::check_zone(v, link_name, value)?,
        PropName::RxImt | PropName::TxImt => needs(NicClass::Atl1c)?,
        PropName::Itr => needs(NicClass::I40e)?,
        PropName::Maxbw | PropName::Priority => {
            if let Some(Link::Etherstub(e)) = v.switch_of(link) {
                return Err(CoreError::not_supported(format!(
                    "{prop} acts on what a link sends through a port; {link_name} is over etherstub {e}, which has none"
                )));
            }
        }
        PropName::Tso => {
            let without: Vec<String> = v
                .ports_under(link)
                .iter()
                .filter_map(|d| v.hw.port(d.as_str()))
                .filter(|p| !p.engine.nic().caps().offloads.tso)
                .map(|p| p.device.to_string())
                .collect();
            if val.as_bool() == Some(true) && !without.is_empty() {
                return Err(CoreError::not_supported(format!(
                    "tso on {link_name}: {} cannot segment TCP (no TSO in hardware)",
                    without.join(", ")
                )));
            }
        }
        PropName::RxRings | PropName::TxRings => {
            if let Some(NicClass::Atl1c) = driver {
                return Err(CoreError::not_supported(format!(
                    "{link_name} has no ring groups (atl1c-class)"
                )));
            }
            if let Link::Aggr(_) = link {
                return Err(CoreError::not_supported(format!(
                    "{prop} on {link_name}: set it on the ports or VNICs"
                )));
            }
            // A VNIC's group must fit its port: checked when groups are
            // assigned (Core::assign_groups), before anything changes.
            let max = v
                .ports_under(link)
                .iter()
                .filter_map(|d| v.hw.port(d.as_str()))
                .map(|p| p.engine.ring_count())
                .min()
                .unwrap_or(0);
            if val.as_uint().unwrap_or(0) > u64::from(max) {
                return Err(CoreError::invalid_value(format!(
                    "{prop} {value} on {link_name}: at most {max} rings"
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
            let (lo, hi) = mtu_range(v, link);
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
    Ok(val)
}

fn props_mut<'a>(st: &'a mut LinkState, link: &Link) -> &'a mut BTreeMap<PropName, String> {
    match link {
        Link::Phys(d) => &mut st.phys.get_or_default(d.clone()).props,
        Link::Aggr(n) => &mut st.aggr.get_mut(n).expect("resolved").props,
        Link::Vnic(n) => &mut st.vnic.get_mut(n).expect("resolved").props,
        Link::Etherstub(n) => &mut st.etherstub.get_mut(n).expect("resolved").props,
    }
}

impl Core {
    /// `create-aggr`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_aggr(
        &self,
        aggr: &str,
        ports: &[String],
        policy: &str,
        lacp_mode: &str,
        lacp_timer: &str,
        mac: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("create-aggr", aggr, progress, |v, persisted, t| {
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
            let lacp_mode = if lacp_mode.is_empty() {
                LacpMode::default()
            } else {
                arg("LACP mode (-L)", lacp_mode)?
            };
            let lacp_timer = if lacp_timer.is_empty() {
                LacpTimer::default()
            } else {
                arg("LACP timer (-T)", lacp_timer)?
            };
            let mac =
                if mac.is_empty() { None } else { Some(unicast(arg("MAC address (-u)", mac)?)?) };
            change(v, persisted, temporary, t, aggr, |v| {
                if v.taken(aggr) {
                    return Err(CoreError::exists(format!("link {aggr} already exists")));
                }
                let mut classes = BTreeSet::new();
                for p in &ports {
                    let d = port_free(v, p)?;
                    classes.insert(class_of(v, &d).to_string());
                }
                if classes.len() > 1 {
                    return Err(CoreError::invalid_argument(format!(
                        "ports of one aggregation must be of one class; got {}",
                        classes.into_iter().collect::<Vec<_>>().join(" and ")
                    )));
                }
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
        })
    }

    /// `modify-aggr`: empty arguments leave settings as they are.
    #[allow(clippy::too_many_arguments)]
    pub fn modify_aggr(
        &self,
        aggr: &str,
        policy: &str,
        lacp_mode: &str,
        lacp_timer: &str,
        mac: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("modify-aggr", aggr, progress, |v, persisted, t| {
            let n = name(aggr)?;
            let policy: Option<AggrPolicy> =
                (!policy.is_empty()).then(|| arg("policy (-P)", policy)).transpose()?;
            let mode: Option<LacpMode> =
                (!lacp_mode.is_empty()).then(|| arg("LACP mode (-L)", lacp_mode)).transpose()?;
            let timer: Option<LacpTimer> =
                (!lacp_timer.is_empty()).then(|| arg("LACP timer (-T)", lacp_timer)).transpose()?;
            let mac: Option<MacAddr> = (!mac.is_empty())
                .then(|| arg("MAC address (-u)", mac).and_then(unicast))
                .transpose()?;
            if policy.is_none() && mode.is_none() && timer.is_none() && mac.is_none() {
                return Err(CoreError::invalid_argument(
                    "nothing to modify: give -P, -L, -T or -u",
                ));
            }
            change(v, persisted, temporary, t, aggr, |v| {
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
        })
    }

    /// `add-aggr`.
    pub fn add_aggr(
        &self,
        aggr: &str,
        ports: &[String],
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("add-aggr", aggr, progress, |v, persisted, t| {
            let n = name(aggr)?;
            let ports: Vec<LinkName> = ports.iter().map(|p| name(p)).collect::<Result<_, _>>()?;
            if ports.is_empty() {
                return Err(CoreError::invalid_argument("no port to add (-l PORT)"));
            }
            change(v, persisted, temporary, t, aggr, |v| {
                require_aggr(v, aggr)?;
                let mut st = v.st.clone();
                let existing = st.aggr[&n].ports.clone();
                let class = existing.first().and_then(|p| v.device_of(p)).map(|d| class_of(v, &d));
                for p in &ports {
                    let d = port_free(v, p)?;
                    if class.is_some_and(|c| c != class_of(v, &d)) {
                        return Err(CoreError::invalid_argument(format!(
                            "{p} is not of the same class as {aggr}'s ports"
                        )));
                    }
                }
                st.aggr.get_mut(&n).expect("checked").ports.extend(ports.iter().cloned());
                crate::vlan::check_room(&View { hw: v.hw, st: &st })?;
                Ok(st)
            })
        })
    }

    /// `remove-aggr`.
    pub fn remove_aggr(
        &self,
        aggr: &str,
        ports: &[String],
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("remove-aggr", aggr, progress, |v, persisted, t| {
            let n = name(aggr)?;
            let ports: Vec<LinkName> = ports.iter().map(|p| name(p)).collect::<Result<_, _>>()?;
            if ports.is_empty() {
                return Err(CoreError::invalid_argument("no port to remove (-l PORT)"));
            }
            change(v, persisted, temporary, t, aggr, |v| {
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
        })
    }

    /// `delete-aggr`.
    pub fn delete_aggr(
        &self,
        aggr: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("delete-aggr", aggr, progress, |v, persisted, t| {
            let n = name(aggr)?;
            change(v, persisted, temporary, t, aggr, |v| {
                require_aggr(v, aggr)?;
                no_dependents(v, &n)?;
                let mut st = v.st.clone();
                st.aggr.remove(&n);
                Ok(st)
            })
        })
    }

    /// `create-vnic`. `mac`: `auto`, `factory`, `random` or an address.
    #[allow(clippy::too_many_arguments)]
    pub fn create_vnic(
        &self,
        vnic: &str,
        over: &str,
        mac: &str,
        vid: u16,
        props: &BTreeMap<String, String>,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("create-vnic", vnic, progress, |v, persisted, t| {
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
                    let base = v.hw.port(d.as_str()).expect("resolved").mac.0;
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
                    let mut macs =
                        self.macs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    (0..=u8::MAX)
                        .map(nth)
                        .find(|m| macs.holders(&v.st.vnic, *m).is_empty())
                        .ok_or_else(|| {
                            CoreError::busy(format!("{over}: every factory MAC address is in use"))
                        })?
                }
                _ => random_mac(vnic),
            };
            change(v, persisted, temporary, t, vnic, |v| {
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
                let holders = self
                    .macs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .holders(&v.st.vnic, address);
                // (The ports under the link each sits over: this compared
                // the ports "under" a VNIC named as that link, none, so it
                // never refused anything.)
                let under = v.ports_under(&link);
                if let Some(other) = holders.iter().find(|o| {
                    v.resolve(v.st.vnic[*o].over.as_str())
                        .is_some_and(|l| v.ports_under(&l) == under)
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
                    check_prop(&view, vnic, &vl, *p, val)?;
                    if checked.insert(*p, val.clone()).is_some() {
                        return Err(CoreError::invalid_argument(format!(
                            "property {p} given twice"
                        )));
                    }
                }
                st.vnic.get_mut(&n).expect("inserted").props = checked;
                crate::vlan::check_room(&View { hw: v.hw, st: &st })?;
                Ok(st)
            })
        })
    }

    /// `delete-vnic`.
    pub fn delete_vnic(
        &self,
        vnic: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("delete-vnic", vnic, progress, |v, persisted, t| {
            let n = name(vnic)?;
            change(v, persisted, temporary, t, vnic, |v| {
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
        })
    }

    /// `create-vlan`: VLAN `vid` (1-4094) over physical link or aggregation
    /// `over`, as a link of its own named `vlan`, with its link's MAC
    /// address; at most one VLAN per VID over a link.
    pub fn create_vlan(
        &self,
        vlan: &str,
        over: &str,
        vid: u16,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("create-vlan", vlan, progress, |v, persisted, t| {
            let n = name(vlan)?;
            let over_n = name(over)?;
            let vid = VlanId::try_from(vid)
                .map_err(|e| CoreError::invalid_argument(format!("VLAN id (-v): {e}")))?;
            change(v, persisted, temporary, t, vlan, |v| {
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
                            first.and_then(|d| v.hw.port(d.as_str())).map(|p| p.mac)
                        },
                        Some,
                    ),
                    Link::Phys(d) => v.hw.port(d.as_str()).map(|p| p.mac),
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
                crate::vlan::check_room(&View { hw: v.hw, st: &st })?;
                Ok(st)
            })
        })
    }

    /// `delete-vlan`.
    pub fn delete_vlan(
        &self,
        vlan: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("delete-vlan", vlan, progress, |v, persisted, t| {
            let n = name(vlan)?;
            change(v, persisted, temporary, t, vlan, |v| {
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
        })
    }

    /// `create-etherstub`: a virtual switch with no port; the VNICs
    /// created over it reach only each other.
    pub fn create_etherstub(
        &self,
        stub: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("create-etherstub", stub, progress, |v, persisted, t| {
            let n = name(stub)?;
            change(v, persisted, temporary, t, stub, |v| {
                if v.taken(stub) {
                    return Err(CoreError::exists(format!("link {stub} already exists")));
                }
                let mut st = v.st.clone();
                st.etherstub.insert(n.clone(), EtherstubConf::default());
                Ok(st)
            })
        })
    }

    /// `delete-etherstub`: refused while VNICs are over it.
    pub fn delete_etherstub(
        &self,
        stub: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("delete-etherstub", stub, progress, |v, persisted, t| {
            let n = name(stub)?;
            change(v, persisted, temporary, t, stub, |v| {
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
        })
    }

    /// `set-linkprop`.
    pub fn set_link_prop(
        &self,
        link: &str,
        props: &BTreeMap<String, String>,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("set-linkprop", link, progress, |v, persisted, t| {
            if props.is_empty() {
                return Err(CoreError::invalid_argument("no property to set (-p prop=value)"));
            }
            let props: Vec<(PropName, String)> = props
                .iter()
                .map(|(k, val)| Ok((k.parse::<PropName>()?, val.clone())))
                .collect::<Result<_, CoreError>>()?;
            change(v, persisted, temporary, t, link, |v| {
                let l = v.require(link)?;
                let mut st = v.st.clone();
                for (p, val) in &props {
                    let view = View { hw: v.hw, st: &st };
                    let parsed = check_prop(&view, link, &l, *p, val)?;
                    props_mut(&mut st, &l).insert(*p, parsed.to_string());
                }
                Ok(st)
            })
        })
    }

    /// `reset-linkprop`: every settable property when `names` is empty.
    pub fn reset_link_prop(
        &self,
        link: &str,
        names: &[String],
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("reset-linkprop", link, progress, |v, persisted, t| {
            let names: Vec<PropName> =
                names.iter().map(|n| n.parse::<PropName>()).collect::<Result<_, _>>()?;
            change(v, persisted, temporary, t, link, |v| {
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
                        check_prop(
                            &View { hw: v.hw, st: &probe },
                            link,
                            &l,
                            PropName::Mtu,
                            &default.to_string(),
                        )?;
                    }
                }
                st = next;
                Ok(st)
            })
        })
    }

    /// `create-if`.
    pub fn create_if(
        &self,
        ifname: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("create-if", ifname, progress, |v, persisted, t| {
            let n = name(ifname)?;
            let res = change(v, persisted, temporary, t, ifname, |v| {
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
                let mut st = v.st.clone();
                st.interface.insert(n.clone(), IfConf::default());
                Ok(st)
            })?;
            Ok(res)
        })
    }

    /// `delete-if`: the interface and its addresses.
    pub fn delete_if(
        &self,
        ifname: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("delete-if", ifname, progress, |v, persisted, t| {
            let n = name(ifname)?;
            change(v, persisted, temporary, t, ifname, |v| {
                if !v.st.interface.contains_key(&n) {
                    return Err(CoreError::not_found(format!(
                        "IP interface {ifname} does not exist"
                    )));
                }
                let mut st = v.st.clone();
                st.interface.remove(&n);
                st.address.retain(|a, _| a.interface() != &n);
                Ok(st)
            })
        })
    }

    /// `create-addr -T static -a ADDR/PREFIX IF/TAG`.
    pub fn create_addr(
        &self,
        addrobj: &str,
        kind: &str,
        addr: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("create-addr", addrobj, progress, |v, persisted, t| {
            let obj: AddrObj = addrobj
                .parse()
                .map_err(|e: netadm_model::AddrObjError| CoreError::invalid_name(e.to_string()))?;
            let kind: AddrType = kind.parse().map_err(CoreError::invalid_argument)?;
            let conf = AddrConf { kind, ..AddrConf::fixed(addr) };
            let fixed = conf.check().map_err(|e| CoreError::invalid_argument(e.to_string()))?;
            change(v, persisted, temporary, t, addrobj, |v| {
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
                if let Some((ip, _)) = fixed
                    && let Some((other, _)) =
                        v.st.address
                            .iter()
                            .find(|(_, c)| c.fixed_addr().is_some_and(|(x, _)| x == ip))
                {
                    return Err(CoreError::exists(format!("{ip} is already assigned ({other})")));
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
                let mut st = v.st.clone();
                st.address.insert(obj.clone(), conf.clone());
                Ok(st)
            })
        })
        .map(|mut r| {
            // As ipadm does, wait for the lease (at most DHCP_WAIT; after
            // the change, outside the mutation lock), timed as a phase of
            // its own; the client goes on trying after that.
            if kind == "dhcp"
                && let (Some(m), Ok(obj)) = (&self.mirror, addrobj.parse::<AddrObj>())
            {
                let start = std::time::Instant::now();
                let bound = m.wait_lease(&obj, start + DHCP_WAIT);
                let us = start.elapsed().as_micros() as u64;
                r.phases.push(("lease".into(), us));
                r.total_us += us;
                if !bound {
                    r.notes.push(format!(
                        "{addrobj}: no DHCP lease within {} s; the client keeps trying",
                        DHCP_WAIT.as_secs()
                    ));
                }
            }
            r
        })
    }

    /// `delete-addr`.
    pub fn delete_addr(
        &self,
        addrobj: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("delete-addr", addrobj, progress, |v, persisted, t| {
            let obj: AddrObj = addrobj
                .parse()
                .map_err(|e: netadm_model::AddrObjError| CoreError::invalid_name(e.to_string()))?;
            change(v, persisted, temporary, t, addrobj, |v| {
                if !v.st.address.contains_key(&obj) {
                    return Err(CoreError::not_found(format!(
                        "address object {obj} does not exist"
                    )));
                }
                let mut st = v.st.clone();
                st.address.remove(&obj);
                Ok(st)
            })
        })
    }

    /// `set-ifprop -m PROTO -p PROP=VALUE,... IF`.
    pub fn set_if_prop(
        &self,
        ifname: &str,
        proto: &str,
        props: &BTreeMap<String, String>,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("set-ifprop", ifname, progress, |v, persisted, t| {
            let n = name(ifname)?;
            if props.is_empty() {
                return Err(CoreError::invalid_argument("no property to set (-p prop=value)"));
            }
            let defs: Vec<(&crate::ifprop::Def, &String)> = props
                .iter()
                .map(|(k, val)| Ok((crate::ifprop::Def::find(proto, k)?, val)))
                .collect::<Result<_, CoreError>>()?;
            change(v, persisted, temporary, t, ifname, |v| {
                let link_mtu = if_link_mtu(v, &n, ifname)?;
                not_in_zone(v, &n, "set-ifprop")?;
                let mut st = v.st.clone();
                let conf = st.interface.get_mut(&n).expect("checked");
                for (d, val) in &defs {
                    let val = d.check(val, link_mtu)?;
                    conf.props.insert(d.key(), val);
                }
                let v4 = crate::ifprop::if_mtu(Some(conf), link_mtu);
                if let Some(m) = conf.props.get("ipv6.mtu").and_then(|m| m.parse::<u32>().ok())
                    && m > v4
                {
                    return Err(CoreError::invalid_value(format!(
                        "ipv6 mtu {m} is above the interface's MTU {v4} (ipv4 mtu)"
                    )));
                }
                Ok(st)
            })
        })
    }

    /// `reset-ifprop -m PROTO -p PROP,... IF`.
    pub fn reset_if_prop(
        &self,
        ifname: &str,
        proto: &str,
        names: &[String],
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("reset-ifprop", ifname, progress, |v, persisted, t| {
            let n = name(ifname)?;
            if names.is_empty() {
                return Err(CoreError::invalid_argument("no property to reset (-p prop)"));
            }
            let keys: Vec<String> = names
                .iter()
                .map(|k| crate::ifprop::Def::find(proto, k).map(|d| d.key()))
                .collect::<Result<_, CoreError>>()?;
            change(v, persisted, temporary, t, ifname, |v| {
                if_link_mtu(v, &n, ifname)?;
                let mut st = v.st.clone();
                let conf = st.interface.get_mut(&n).expect("checked");
                conf.props.retain(|k, _| !keys.contains(k));
                Ok(st)
            })
        })
    }

    /// `set-prop -p PROP=VALUE,... PROTO`: protocol properties of the
    /// network namespace netadmd runs in.
    pub fn set_prop(
        &self,
        proto: &str,
        props: &BTreeMap<String, String>,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("set-prop", proto, progress, |v, persisted, t| {
            if props.is_empty() {
                return Err(CoreError::invalid_argument("no property to set (-p prop=value)"));
            }
            let set: Vec<(String, String)> = props
                .iter()
                .map(|(k, val)| {
                    let d = crate::proto::Def::find(proto, k)?;
                    Ok((d.key(), d.check(val)?))
                })
                .collect::<Result<_, CoreError>>()?;
            change(v, persisted, temporary, t, proto, |v| {
                let mut st = v.st.clone();
                for (k, val) in &set {
                    st.proto.insert(k.clone(), val.clone());
                }
                Ok(st)
            })
        })
    }

    /// `reset-prop -p PROP,... PROTO`: back to the kernel's defaults.
    pub fn reset_prop(
        &self,
        proto: &str,
        names: &[String],
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("reset-prop", proto, progress, |v, persisted, t| {
            if names.is_empty() {
                return Err(CoreError::invalid_argument("no property to reset (-p prop)"));
            }
            let keys: Vec<String> = names
                .iter()
                .map(|k| crate::proto::Def::find(proto, k).map(|d| d.key()))
                .collect::<Result<_, CoreError>>()?;
            change(v, persisted, temporary, t, proto, |v| {
                let mut st = v.st.clone();
                st.proto.retain(|k, _| !keys.contains(k));
                Ok(st)
            })
        })
    }

    /// `set-addrprop -p PROP=VALUE,... IF/TAG` (prefixlen, deprecated).
    pub fn set_addr_prop(
        &self,
        addrobj: &str,
        props: &BTreeMap<String, String>,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.addr_prop("set-addrprop", addrobj, temporary, progress, |a| {
            if props.is_empty() {
                return Err(CoreError::invalid_argument("no property to set (-p prop=value)"));
            }
            props.iter().try_for_each(|(k, val)| crate::addrprop::set(a, k, val))
        })
    }

    /// `reset-addrprop -p PROP,... IF/TAG`.
    pub fn reset_addr_prop(
        &self,
        addrobj: &str,
        names: &[String],
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.addr_prop("reset-addrprop", addrobj, temporary, progress, |a| {
            if names.is_empty() {
                return Err(CoreError::invalid_argument("no property to reset (-p prop)"));
            }
            names.iter().try_for_each(|k| crate::addrprop::reset(a, k))
        })
    }

    /// A change `f` to address object `addrobj`'s entry; a new prefix
    /// must not make its address clash with another's.
    fn addr_prop(
        &self,
        op: &str,
        addrobj: &str,
        temporary: bool,
        progress: Progress<'_>,
        f: impl Fn(&mut AddrConf) -> Result<(), CoreError>,
    ) -> Result<Report, CoreError> {
        self.mutate(op, addrobj, progress, |v, persisted, t| {
            let obj: AddrObj = addrobj
                .parse()
                .map_err(|e: netadm_model::AddrObjError| CoreError::invalid_name(e.to_string()))?;
            change(v, persisted, temporary, t, addrobj, |v| {
                let mut st = v.st.clone();
                let Some(a) = st.address.get_mut(&obj) else {
                    return Err(CoreError::not_found(format!(
                        "address object {obj} does not exist"
                    )));
                };
                f(a)?;
                Ok(st)
            })
        })
    }

    /// `enable-if`: brings interface `ifname` back into the running
    /// system from its persistent configuration, with its addresses
    /// (ipadm's; it changes the running system only).
    pub fn enable_if(&self, ifname: &str, progress: Progress<'_>) -> Result<Report, CoreError> {
        self.mutate("enable-if", ifname, progress, |v, persisted, t| {
            let n = name(ifname)?;
            let Some(conf) = persisted.interface.get(&n) else {
                return Err(CoreError::not_found(format!(
                    "IP interface {ifname} has no persistent configuration to enable"
                )));
            };
            change(v, persisted, true, t, ifname, |v| {
                if v.st.interface.contains_key(&n) {
                    return Err(CoreError::exists(format!(
                        "IP interface {ifname} is already enabled"
                    )));
                }
                v.require(ifname)?;
                if let Some(a) = v.aggr_of(&n) {
                    return Err(CoreError::busy(format!(
                        "{ifname} is a port of {a}; it cannot carry an IP interface"
                    )));
                }
                let mut st = v.st.clone();
                st.interface.insert(n.clone(), conf.clone());
                for (o, a) in persisted.address.iter().filter(|(o, _)| o.interface() == &n) {
                    if let Some(ip) = a.fixed_addr()
                        && let Some((other, _)) =
                            v.st.address.iter().find(|(_, c)| c.fixed_addr() == Some(ip))
                    {
                        return Err(CoreError::exists(format!(
                            "{} is already assigned ({other})",
                            ip.0
                        )));
                    }
                    if a.kind == AddrType::Addrconf {
                        not_in_zone(v, &n, &format!("enable-if with {o}"))?;
                    }
                    st.address.insert(o.clone(), a.clone());
                }
                if !conf.props.is_empty() {
                    not_in_zone(v, &n, "enable-if with interface properties")?;
                }
                Ok(st)
            })
        })
    }

    /// `disable-if`: removes interface `ifname` and its addresses from the
    /// running system, keeping its persistent configuration (ipadm's).
    pub fn disable_if(&self, ifname: &str, progress: Progress<'_>) -> Result<Report, CoreError> {
        self.mutate("disable-if", ifname, progress, |v, persisted, t| {
            let n = name(ifname)?;
            if !persisted.interface.contains_key(&n) && !v.st.interface.contains_key(&n) {
                return Err(CoreError::not_found(format!("IP interface {ifname} does not exist")));
            }
            if !persisted.interface.contains_key(&n) {
                return Err(CoreError::invalid_argument(format!(
                    "IP interface {ifname} is not persistent: nothing would enable it again \
                     (delete-if -t removes it)"
                )));
            }
            change(v, persisted, true, t, ifname, |v| {
                if !v.st.interface.contains_key(&n) {
                    return Err(CoreError::not_found(format!(
                        "IP interface {ifname} is not enabled"
                    )));
                }
                let mut st = v.st.clone();
                st.interface.remove(&n);
                st.address.retain(|a, _| a.interface() != &n);
                Ok(st)
            })
        })
    }

    /// `up-addr` (`up` true) / `down-addr`: a static address marked up
    /// (in the kernel) or down (kept in the configuration, removed from
    /// the kernel).
    pub fn set_addr_up(
        &self,
        addrobj: &str,
        up: bool,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        let op = if up { "up-addr" } else { "down-addr" };
        self.mutate(op, addrobj, progress, |v, persisted, t| {
            let obj: AddrObj = addrobj
                .parse()
                .map_err(|e: netadm_model::AddrObjError| CoreError::invalid_name(e.to_string()))?;
            change(v, persisted, temporary, t, addrobj, |v| {
                let Some(a) = v.st.address.get(&obj) else {
                    return Err(CoreError::not_found(format!(
                        "address object {obj} does not exist"
                    )));
                };
                if a.kind != AddrType::Static {
                    return Err(CoreError::invalid_argument(format!(
                        "address object {obj} is {}: only static addresses are marked up or down",
                        a.kind.as_str()
                    )));
                }
                let mut st = v.st.clone();
                st.address.get_mut(&obj).expect("looked up").down = !up;
                Ok(st)
            })
        })
    }

    /// `rename-link`.
    pub fn rename_link(
        &self,
        old: &str,
        new: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        self.mutate("rename-link", old, progress, |v, persisted, t| {
            let (o, n) = (name(old)?, name(new)?);
            change(v, persisted, temporary, t, old, |v| {
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
                let members: Vec<LinkName> = st
                    .aggr
                    .iter()
                    .filter(|(_, a)| a.ports.contains(&o))
                    .map(|(k, _)| k.clone())
                    .collect();
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
        })
    }
}

/// The MTU of the link under IP interface `n`, which must exist.
fn if_link_mtu(v: &View<'_>, n: &LinkName, ifname: &str) -> Result<u32, CoreError> {
    if !v.st.interface.contains_key(n) {
        return Err(CoreError::not_found(format!("IP interface {ifname} does not exist")));
    }
    Ok(v.mtu(&v.require(ifname)?))
}

fn unicast(m: MacAddr) -> Result<MacAddr, CoreError> {
    if !m.is_unicast() {
        return Err(CoreError::invalid_argument(format!(
            "{m} is a multicast address; a link needs a unicast one"
        )));
    }
    Ok(m)
}

fn require_aggr(v: &View<'_>, aggr: &str) -> Result<(), CoreError> {
    match v.require(aggr)? {
        Link::Aggr(_) => Ok(()),
        l => Err(CoreError::invalid_argument(format!(
            "{aggr} is a link of class {}, not an aggregation",
            l.class()
        ))),
    }
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
    if v.st.interface.contains_key(link) {
        return Err(CoreError::busy(format!("{link} has an IP interface; delete-if {link} first")));
    }
    Ok(())
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

//! The read-only verbs (`show-*`). Each works on a snapshot of the running
//! configuration and never waits for a mutation.

mod flows;
mod phys;

use crate::{
    AddrPropRow, AddrRow, AggrPortRow, AggrRow, EtherstubRow, IfPropRow, IfRow, LinkRow, PhysRow,
    PropRow, ProtoPropRow, VlanRow, VnicRow,
};
use netadm_model::{
    AddrObj, DEFAULT_PRIORITY, LinkClass, LinkName, Perm, PropName, PropSpec, PropValue,
};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use netadm_config::{Entry, LinkState, VnicConf, diff};

use crate::CoreError;
use crate::machine::Machine;
use crate::view::{Link, View};

/// The `show-link` row of `link`, named `name`, under the running (`v`) and
/// persistent (`pv`) configurations. `over_mtu` gives the MTU of a link
/// VNICs sit over, when the caller has it (a VNIC without an MTU of its
/// own runs with it).
fn link_info(
    v: &View<'_>,
    pv: &View<'_>,
    name: &LinkName,
    link: &Link,
    vnic: Option<&VnicConf>,
    over_mtu: &mut dyn FnMut(&LinkName) -> Option<u32>,
    m: &Machine,
) -> LinkRow {
    // A VNIC's entry, looked up once (or given by a caller walking them).
    let vnic = match (link, vnic) {
        (Link::Vnic(n), None) => v.st.vnic.get(n),
        (_, c) => c,
    };
    let over = match (link, vnic) {
        (Link::Aggr(n), _) => v.st.aggr[n].ports.iter().map(ToString::to_string).collect(),
        (_, Some(c)) => vec![c.over.to_string()],
        _ => vec![],
    };
    let persistent = match link {
        Link::Phys(_) => true,
        // Nothing temporary: the running configuration is the persistent one.
        _ if v.st.shares(pv.st) => true,
        _ => pv.resolve(name.as_str()).is_some_and(|l| l.class() == link.class()),
    };
    let (mtu, member_of) = match vnic {
        Some(c) => {
            let mtu = match c.props.get(&PropName::Mtu) {
                Some(m) => m.as_uint(),
                None => over_mtu(&c.over).map(u64::from),
            };
            let mtu = mtu.map(|m| m as u32);
            // A VNIC is never an aggregation's member.
            (mtu.unwrap_or_else(|| v.mtu(link)), String::new())
        }
        _ => (v.mtu(link), v.aggr_of(name).map(ToString::to_string).unwrap_or_default()),
    };
    LinkRow {
        link: name.to_string(),
        class: match link {
            Link::Vnic(n) if v.st.vnic[n].vlan => "vlan".to_owned(),
            l => l.class().to_string(),
        },
        mtu,
        // A kernel link whose device is not as configured (its port's is
        // missing, another of its name is of another kind) is down.
        state: match m.kernel.as_ref().and_then(|k| k.trouble(v, link)) {
            Some(_) => "down",
            None => "up",
        }
        .into(),
        over,
        member_of,
        persistent,
    }
}

/// What a read sees: snapshots of the running and persistent
/// configurations (taken once, never waiting for a mutation) and the
/// machine.
pub(crate) struct Reads<'a> {
    /// The machine.
    pub m: &'a Machine,
    /// The running configuration.
    pub running: Arc<LinkState>,
    /// The persistent configuration.
    pub persisted: Arc<LinkState>,
}

impl Reads<'_> {
    fn view_of<'b>(&'b self, st: &'b LinkState) -> View<'b> {
        View { hw: self.m.hw(), st }
    }

    /// The view of the running configuration.
    fn running_view(&self) -> View<'_> {
        self.view_of(&self.running)
    }

    /// Traffic counters of every physical link and aggregation: what
    /// their ports counted. Ports and aggregations only: VNICs have no
    /// counters of their own here, and listing them would make this cost
    /// every VNIC.
    pub(crate) fn show_stats(&self) -> Vec<crate::StatsRow> {
        let v = self.view_of(&self.running);
        let ports = v.hw.phys().map(|p| (v.phys_name(p.device()), Link::Phys(p.device().clone())));
        ports
            .chain(v.st.aggr.keys().map(|n| (n.clone(), Link::Aggr(n.clone()))))
            .map(|(name, l)| {
                let mut s = crate::PortCounters::default();
                for p in v.ports_under(&l).iter().filter_map(|d| v.hw.find(d.as_str())) {
                    s += p.counters();
                }
                crate::StatsRow {
                    link: name.to_string(),
                    ipackets: s.ipackets,
                    rbytes: s.rbytes,
                    opackets: s.opackets,
                    obytes: s.obytes,
                    idrops: s.idrops,
                    odrops: s.odrops,
                }
            })
            .collect()
    }

    /// Traffic counters of every link but etherstubs (`dlstat`): a
    /// physical link's and an aggregation's are their ports' (as
    /// [`Reads::show_stats`]); a VNIC's or VLAN's are its kernel device's,
    /// in its zone, in the link's own sense (what the zone's stack sent is
    /// what the VNIC sent), zero while it has none.
    pub(crate) fn show_link_stats(&self) -> Vec<crate::StatsRow> {
        let v = self.running_view();
        let vnics: Vec<(LinkName, Option<String>)> =
            v.st.vnic
                .keys()
                .map(|n| (n.clone(), crate::mirror::zone_of(&v, &Link::Vnic(n.clone()))))
                .collect();
        let devices = match &self.m.mirror {
            Some(m) => m.device_counters(&vnics),
            None => BTreeMap::new(),
        };
        let mut rows = self.show_stats();
        rows.extend(vnics.iter().map(|(n, _)| {
            let c = devices.get(n).copied().unwrap_or_default();
            crate::StatsRow {
                link: n.to_string(),
                ipackets: c.rx_packets,
                rbytes: c.rx_bytes,
                opackets: c.tx_packets,
                obytes: c.tx_bytes,
                idrops: c.rx_dropped,
                odrops: c.tx_dropped,
            }
        }));
        rows
    }

    /// What link protection counted on each VNIC it guards or guarded:
    /// the datapath's guards for emulated VNICs, the kernel's counters
    /// for kernel ones.
    pub(crate) fn show_protect_stats(&self) -> Vec<crate::ProtectRow> {
        let v = self.view_of(&self.running);
        let words = |n: &LinkName| match v.prop(&Link::Vnic(n.clone()), PropName::Protection) {
            Some(p) => p.to_string(),
            None => String::new(),
        };
        let row = |n: &LinkName, enforced: &str, c: netadm_datapath::protect::GuardCounts| {
            crate::ProtectRow {
                link: n.to_string(),
                protection: words(n),
                enforced: enforced.into(),
                mac_nospoof: c.drops[0],
                ip_nospoof: c.drops[1],
                dhcp_nospoof: c.drops[2],
                restricted: c.drops[3],
                opackets: c.passed,
                obytes: c.passed_bytes,
            }
        };
        let mut out = vec![];
        if let Some(m) = &self.m.mirror {
            out.extend(m.guard_counts().into_iter().map(|(n, _, c)| row(&n, "datapath", c)));
        }
        if let Some(k) = &self.m.kernel {
            out.extend(k.guard_counts(&v).into_iter().map(|(n, c)| row(&n, "kernel", c)));
        }
        out.sort_by(|a, b| a.link.cmp(&b.link));
        out
    }

    /// `show-phys`.
    pub(crate) fn show_phys(&self) -> Vec<PhysRow> {
        let v = self.running_view();
        self.m
            .hw()
            .phys()
            .map(|p| {
                let s = p.status();
                PhysRow {
                    link: v.phys_name(p.device()).to_string(),
                    media: "Ethernet".into(),
                    state: match s.carrier {
                        Some(true) => "up",
                        Some(false) => "down",
                        None => "unknown",
                    }
                    .into(),
                    speed: s.speed,
                    duplex: s.duplex.into(),
                    device: p.interface(),
                    driver: p.caps().driver.clone(),
                    rings: p.caps().rings.into(),
                    rings_started: s.rings_started,
                    dma_bytes: s.dma_bytes,
                }
            })
            .collect()
    }

    /// `show-link`.
    pub(crate) fn show_link(&self) -> Vec<LinkRow> {
        let st = self.running.clone();
        let persisted = self.persisted.clone();
        let v = self.view_of(&st);
        let pv = self.view_of(&persisted);
        // The MTU of each link VNICs sit over, worked out once: there are
        // few of them and many VNICs.
        let mut mtus: BTreeMap<LinkName, Option<u32>> = BTreeMap::new();
        let mut over_mtu = |o: &LinkName| {
            if let Some(m) = mtus.get(o) {
                return *m;
            }
            let m = v.resolve(o.as_str()).map(|l| v.mtu(&l));
            mtus.insert(o.clone(), m);
            m
        };
        let ports = self.m.hw().phys();
        let ports = ports.map(|p| (v.phys_name(p.device()), Link::Phys(p.device().clone())));
        let aggrs = st.aggr.keys().map(|n| (n.clone(), Link::Aggr(n.clone())));
        let mut out: Vec<LinkRow> = ports
            .chain(aggrs)
            .map(|(name, link)| link_info(&v, &pv, &name, &link, None, &mut over_mtu, self.m))
            .collect();
        out.extend(st.vnic.iter().map(|(n, c)| {
            link_info(&v, &pv, n, &Link::Vnic(n.clone()), Some(c), &mut over_mtu, self.m)
        }));
        out
    }

    /// `show-link` rows of the links among `names` that exist, each at the
    /// cost of its own lookups.
    pub(crate) fn show_links_named(&self, names: &BTreeSet<String>) -> Vec<LinkRow> {
        let st = self.running.clone();
        let persisted = self.persisted.clone();
        let v = self.view_of(&st);
        let pv = self.view_of(&persisted);
        names
            .iter()
            .filter_map(|n| {
                let link = v.resolve(n)?;
                Some(link_info(&v, &pv, &n.parse().ok()?, &link, None, &mut |_| None, self.m))
            })
            .collect()
    }

    /// The links whose `show-link` row may differ between two snapshots of
    /// the running and persistent configurations (before and after a
    /// change): every port, every aggregation and VNIC whose entry changed
    /// in either, and the VNICs over a port or aggregation that changed
    /// (their MTU follows it). What is no longer there is among them.
    pub(crate) fn links_changed(
        &self,
        running: (&LinkState, &LinkState),
        persisted: (&LinkState, &LinkState),
    ) -> BTreeSet<String> {
        let hw = self.m.hw();
        let mut out = BTreeSet::new();
        for st in [running.0, running.1] {
            let v = self.view_of(st);
            out.extend(hw.phys().map(|p| v.phys_name(p.device()).to_string()));
        }
        let after = self.view_of(running.1);
        // A configuration that did not change is the same allocation.
        let changes = |(a, b): (&LinkState, &LinkState)| {
            if std::ptr::eq(a, b) { vec![] } else { diff(a, b) }
        };
        // When the persistent configuration is the running one, before and
        // after, its changes are the same.
        let both = std::ptr::eq(running.0, persisted.0) && std::ptr::eq(running.1, persisted.1);
        let persisted = if both { (persisted.0, persisted.0) } else { persisted };
        for e in changes(running).into_iter().chain(changes(persisted)) {
            let under: Option<LinkName> = match &e {
                Entry::Phys(d, _) => Some(after.phys_name(d)),
                Entry::Aggr(n, _) => {
                    out.insert(n.to_string());
                    Some(n.clone())
                }
                Entry::Vnic(n, _) => {
                    out.insert(n.to_string());
                    None
                }
                Entry::Etherstub(n, _) => {
                    out.insert(n.to_string());
                    Some(n.clone())
                }
                Entry::Interface(..) | Entry::Address(..) | Entry::Proto(..) | Entry::Flow(..) => {
                    None
                }
            };
            if let Some(l) = under {
                out.extend(after.vnics_over(&l).into_iter().map(ToString::to_string));
            }
        }
        out
    }

    /// `show-aggr`.
    pub(crate) fn show_aggr(&self) -> Vec<AggrRow> {
        let v = self.running_view();
        v.st.aggr
            .iter()
            .map(|(n, a)| {
                let ports: Vec<AggrPortRow> = a
                    .ports
                    .iter()
                    .map(|p| {
                        let port = v.device_of(p).and_then(|d| self.m.hw().find(d.as_str()));
                        let status = port.map(|p| p.status());
                        let lacp = port.and_then(|p| {
                            self.m
                                .datapath
                                .lacp_state(p.device().as_str())
                                .or_else(|| p.lacp_state())
                        });
                        // Attached: running, with carrier, and (with LACP)
                        // distributing; else standby.
                        let attached = status
                            .as_ref()
                            .is_some_and(|s| s.rings_started > 0 && s.carrier == Some(true))
                            && lacp.is_none_or(|s| {
                                s & netadm_datapath::lacp::state::DISTRIBUTING != 0
                            });
                        AggrPortRow {
                            port: p.to_string(),
                            state: if attached { "attached" } else { "standby" }.into(),
                            speed: status.map_or(0, |s| s.speed),
                            lacp: lacp.unwrap_or(0),
                        }
                    })
                    .collect();
                let first_mac = a
                    .ports
                    .first()
                    .and_then(|p| v.device_of(p))
                    .and_then(|d| self.m.hw().find(d.as_str()))
                    .map(|p| p.mac());
                AggrRow {
                    link: n.to_string(),
                    policy: a.policy.to_string(),
                    addr_policy: if a.mac.is_some() { "fixed" } else { "auto" }.into(),
                    mac: a.mac.or(first_mac).map(|m| m.to_string()).unwrap_or_default(),
                    lacp_mode: a.lacp_mode.to_string(),
                    lacp_timer: a.lacp_timer.to_string(),
                    ports,
                }
            })
            .collect()
    }

    /// `show-vnic`.
    pub(crate) fn show_vnic(&self) -> Vec<VnicRow> {
        let v = self.running_view();
        v.st.vnic.iter().filter(|(_, c)| !c.vlan).map(|(n, c)| self.vnic_info(&v, n, c)).collect()
    }

    /// `show-vnic` rows of the VNICs among `names` that exist, each at the
    /// cost of its own lookup.
    pub(crate) fn show_vnics_named(&self, names: &BTreeSet<String>) -> Vec<VnicRow> {
        let v = self.running_view();
        names
            .iter()
            .filter_map(|n| v.st.vnic.get_key_value(n.as_str()))
            .filter(|(_, c)| !c.vlan)
            .map(|(n, c)| self.vnic_info(&v, n, c))
            .collect()
    }

    fn vnic_info(&self, v: &View<'_>, n: &LinkName, c: &netadm_config::VnicConf) -> VnicRow {
        let speed = v
            .ports_under(&Link::Vnic(n.clone()))
            .iter()
            .filter_map(|d| self.m.hw().find(d.as_str()))
            .map(|p| p.status().speed)
            .sum();
        VnicRow {
            link: n.to_string(),
            over: c.over.to_string(),
            speed,
            macaddress: c.mac.to_string(),
            macaddrtype: c.mac_mode.clone(),
            vid: c.vid.map_or(0, u16::from),
        }
    }

    /// `show-vlan`.
    pub(crate) fn show_vlan(&self) -> Vec<VlanRow> {
        self.running
            .clone()
            .vnic
            .iter()
            .filter(|(_, c)| c.vlan)
            .map(|(n, c)| VlanRow {
                link: n.to_string(),
                vid: c.vid.map_or(0, u16::from),
                over: c.over.to_string(),
                flags: "-----".to_owned(),
            })
            .collect()
    }

    /// `show-etherstub`.
    pub(crate) fn show_etherstub(&self) -> Vec<EtherstubRow> {
        let st = self.running.clone();
        st.etherstub
            .iter()
            .map(|(n, c)| {
                let kernel = c.kind == netadm_config::StubKind::Kernel;
                EtherstubRow {
                    link: n.to_string(),
                    kind: if kernel { "kernel" } else { "netadm" }.to_owned(),
                    device: if kernel { n.to_string() } else { String::new() },
                }
            })
            .collect()
    }

    /// `show-linkprop`: properties of `link` (every link when empty),
    /// limited to `names` when given.
    pub(crate) fn show_link_prop(
        &self,
        link: &str,
        names: &[String],
    ) -> Result<Vec<PropRow>, CoreError> {
        let v = self.running_view();
        let names: Vec<PropName> =
            names.iter().map(|n| n.parse::<PropName>()).collect::<Result<_, _>>()?;
        let links: Vec<(LinkName, Link)> = if link.is_empty() {
            v.links()
        } else {
            let l = v.require(link)?;
            vec![(link.parse()?, l)]
        };
        let mut out = vec![];
        for (name, l) in links {
            for spec in PropSpec::all() {
                if !names.is_empty() && !names.contains(&spec.name) {
                    continue;
                }
                if !spec.applies_to(l.class()) || !self.applicable(&l, spec.name) {
                    if names.contains(&spec.name) && !link.is_empty() {
                        return Err(CoreError::not_supported(format!(
                            "{} does not apply to {name}",
                            spec.name
                        )));
                    }
                    continue;
                }
                let mut value = self.prop_value(&v, &l, spec.name);
                let mut default = spec.default.as_ref().map_or("--".into(), ToString::to_string);
                if spec.name == PropName::Priority {
                    // A text default has no constant value in the table.
                    value = value.or(Some(PropValue::Text(DEFAULT_PRIORITY.to_owned())));
                    default = DEFAULT_PRIORITY.to_owned();
                }
                out.push(PropRow {
                    link: name.to_string(),
                    property: spec.name.to_string(),
                    perm: spec.perm.to_string(),
                    value: value.map_or("--".into(), |x| x.to_string()),
                    default,
                    possible: if spec.perm == Perm::ReadOnly {
                        "--".into()
                    } else {
                        self.possible(&l, spec)
                    },
                });
            }
        }
        Ok(out)
    }

    fn applicable(&self, l: &Link, p: PropName) -> bool {
        // What a physical link's hardware has decides its own properties.
        let caps = match l {
            Link::Phys(d) => self.m.hw().find(d.as_str()).map(|p| p.caps()),
            _ => None,
        };
        match p {
            PropName::RxImt | PropName::TxImt | PropName::Itr => {
                caps.is_some_and(|c| c.has_knob(p.as_str()))
            }
            PropName::Tso => caps.is_some_and(|c| c.offloads.tso) || l.class() == LinkClass::Aggr,
            PropName::RxRings
            | PropName::TxRings
            | PropName::RxRingsEffective
            | PropName::TxRingsEffective
            | PropName::RxRingsAvailable
            | PropName::TxRingsAvailable => {
                caps.is_none_or(|c| c.channels) && l.class() != LinkClass::Aggr
            }
            _ => true,
        }
    }

    fn possible(&self, l: &Link, spec: &PropSpec) -> String {
        if spec.name == PropName::Mtu {
            let (lo, hi) = self.running_view().mtu_range(l);
            return format!("{lo}-{hi}");
        }
        spec.possible()
    }

    fn prop_value(&self, v: &View<'_>, l: &Link, p: PropName) -> Option<PropValue> {
        let ports: Vec<_> =
            v.ports_under(l).iter().filter_map(|d| self.m.hw().find(d.as_str())).collect();
        let rings_started =
            || ports.iter().map(|p| u64::from(p.status().rings_started)).sum::<u64>();
        let rings_total = || ports.iter().map(|p| u64::from(p.caps().rings)).sum::<u64>();
        match p {
            PropName::Mtu => Some(PropValue::Uint(v.mtu(l).into())),
            PropName::State => Some(PropValue::Text("up".into())),
            PropName::Speed => Some(PropValue::Uint(ports.iter().map(|p| p.status().speed).sum())),
            PropName::Duplex => Some(PropValue::Text("full".into())),
            PropName::RxRingsEffective | PropName::TxRingsEffective => match l {
                // A VNIC: its own group's rings, else none dedicated.
                Link::Vnic(n) => Some(PropValue::Uint(
                    self.m.ports.group_of(n).map_or(0, |g| u64::from(g.count)),
                )),
                _ => Some(PropValue::Uint(rings_started())),
            },
            PropName::RxRingsAvailable | PropName::TxRingsAvailable => {
                Some(PropValue::Uint(rings_total() - rings_started().min(rings_total())))
            }
            _ => v.prop(l, p),
        }
    }

    /// `show-if`.
    pub(crate) fn show_if(&self) -> Vec<IfRow> {
        let st = self.running.clone();
        let persisted = self.persisted.clone();
        let v = self.view_of(&st);
        let mut rows: Vec<IfRow> = st
            .interface
            .keys()
            .map(|n| {
                // Up: over an etherstub (a switch with no port, always
                // there), or some port under its link has running rings.
                let up = v.resolve(n.as_str()).is_some_and(|l| {
                    matches!(v.switch_of(&l), Some(Link::Etherstub(_)))
                        || v.ports_under(&l).iter().any(|d| {
                            self.m
                                .hw()
                                .find(d.as_str())
                                .is_some_and(|p| p.status().rings_started > 0)
                        })
                });
                let drift = self.m.mirror.as_ref().and_then(|m| m.drift(n));
                IfRow {
                    ifname: n.to_string(),
                    class: "ip".into(),
                    state: match &drift {
                        Some(d) => d.state(),
                        None if up => "ok",
                        None => "down",
                    }
                    .into(),
                    drift: drift.map(|d| d.describe()).unwrap_or_default(),
                    current: "bm--------46".into(),
                    persistent: if persisted.interface.contains_key(n) { "-46" } else { "--" }
                        .into(),
                    kernel_device: self
                        .m
                        .mirror
                        .as_ref()
                        .and_then(|m| m.device(n))
                        .unwrap_or_default(),
                }
            })
            .collect();
        // Persistent interfaces the running system does not have:
        // disabled (disable-if).
        rows.extend(persisted.interface.keys().filter(|n| !st.interface.contains_key(*n)).map(
            |n| IfRow {
                ifname: n.to_string(),
                class: "ip".into(),
                state: "disabled".into(),
                current: "----------46".into(),
                persistent: "-46".into(),
                kernel_device: String::new(),
                drift: String::new(),
            },
        ));
        rows.sort_by(|a, b| a.ifname.cmp(&b.ifname));
        rows
    }

    /// `show-ifprop`: the properties of interface `ifname` (every
    /// interface when empty) of protocol `proto` (both when empty),
    /// limited to `names` when given.
    pub(crate) fn show_if_prop(
        &self,
        ifname: &str,
        proto: &str,
        names: &[String],
    ) -> Result<Vec<IfPropRow>, CoreError> {
        use crate::mirror::ifprop::{DEFS, Def};
        let st = self.running.clone();
        let persisted = self.persisted.clone();
        let v = self.view_of(&st);
        for n in names {
            if proto.is_empty() {
                if !DEFS.iter().any(|d| d.name == n) {
                    Def::find("ipv4", n)?;
                }
            } else {
                Def::find(proto, n)?;
            }
        }
        if !proto.is_empty() && !crate::mirror::ifprop::PROTOS.contains(&proto) {
            Def::find(proto, "")?;
        }
        let ifs: Vec<LinkName> = if ifname.is_empty() {
            st.interface.keys().cloned().collect()
        } else {
            let n: LinkName = ifname.parse()?;
            if !st.interface.contains_key(&n) {
                return Err(CoreError::not_found(format!("IP interface {ifname} does not exist")));
            }
            vec![n]
        };
        let mut out = vec![];
        for n in ifs {
            let (Some(conf), Some(l)) = (st.interface.get(&n), v.resolve(n.as_str())) else {
                continue;
            };
            let link_mtu = v.mtu(&l);
            let dev = self.m.mirror.as_ref().and_then(|m| m.device(&n));
            let dev_mtu = crate::mirror::ifprop::if_mtu(Some(conf), link_mtu);
            for d in DEFS {
                if (!proto.is_empty() && d.proto != proto)
                    || (!names.is_empty() && !names.iter().any(|x| x == d.name))
                {
                    continue;
                }
                let configured = d.value(conf, link_mtu);
                out.push(IfPropRow {
                    ifname: n.to_string(),
                    property: d.name.into(),
                    proto: d.proto.into(),
                    perm: "rw".into(),
                    current: dev
                        .as_deref()
                        .and_then(|dev| d.current(dev, dev_mtu))
                        .unwrap_or(configured),
                    persistent: persisted
                        .interface
                        .get(&n)
                        .and_then(|c| c.props.get(&d.key()))
                        .cloned()
                        .unwrap_or_default(),
                    default: d.default(link_mtu),
                    possible: d.possible(link_mtu),
                });
            }
        }
        Ok(out)
    }

    /// `show-prop`: protocol properties of `proto` (every protocol when
    /// empty), limited to `names` when given.
    pub(crate) fn show_prop(
        &self,
        proto: &str,
        names: &[String],
    ) -> Result<Vec<ProtoPropRow>, CoreError> {
        use crate::mirror::proto::{DEFS, Def};
        if !proto.is_empty() && !DEFS.iter().any(|d| d.proto == proto) {
            Def::find(proto, "")?;
        }
        for n in names {
            if !DEFS.iter().any(|d| d.name == n && (proto.is_empty() || d.proto == proto)) {
                return Err(CoreError::invalid_argument(format!("no protocol property {n:?}")));
            }
        }
        let st = self.running.clone();
        let persisted = self.persisted.clone();
        Ok(DEFS
            .iter()
            .filter(|d| proto.is_empty() || d.proto == proto)
            .filter(|d| names.is_empty() || names.iter().any(|n| n == d.name))
            .map(|d| {
                let configured = st.proto.get(&d.key()).cloned().unwrap_or_else(|| d.default());
                ProtoPropRow {
                    proto: d.proto.into(),
                    property: d.name.into(),
                    perm: "rw".into(),
                    // The kernel's, when netadm runs it; else as configured.
                    current: if self.m.mirror.is_some() {
                        d.current().unwrap_or(configured)
                    } else {
                        configured
                    },
                    persistent: persisted.proto.get(&d.key()).cloned().unwrap_or_default(),
                    default: d.default(),
                    possible: d.possible(),
                }
            })
            .collect())
    }

    /// `show-addrprop`: the properties of static address object
    /// `addrobj` (every one when empty), limited to `names` when given.
    pub(crate) fn show_addr_prop(
        &self,
        addrobj: &str,
        names: &[String],
    ) -> Result<Vec<AddrPropRow>, CoreError> {
        for n in names {
            crate::mirror::addrprop::check_name(n)?;
        }
        let st = self.running.clone();
        let persisted = self.persisted.clone();
        let objs: Vec<AddrObj> = if addrobj.is_empty() {
            st.address
                .iter()
                .filter(|(_, a)| a.fixed_addr().is_some())
                .map(|(o, _)| o.clone())
                .collect()
        } else {
            let o: AddrObj = addrobj
                .parse()
                .map_err(|e: netadm_model::AddrObjError| CoreError::invalid_name(e.to_string()))?;
            if !st.address.contains_key(&o) {
                return Err(CoreError::not_found(format!("address object {o} does not exist")));
            }
            vec![o]
        };
        let mut out = vec![];
        for o in objs {
            let a = &st.address[&o];
            for n in crate::mirror::addrprop::NAMES {
                if !names.is_empty() && !names.iter().any(|x| x == n) {
                    continue;
                }
                let (perm, current, default, possible) = crate::mirror::addrprop::row(a, n);
                // Persistent: what differs from the default in the
                // persistent configuration.
                let persistent = persisted
                    .address
                    .get(&o)
                    .map(|p| crate::mirror::addrprop::row(p, n))
                    .filter(|(perm, v, d, _)| perm == "rw" && v != d)
                    .map(|(_, v, _, _)| v)
                    .unwrap_or_default();
                out.push(AddrPropRow {
                    addrobj: o.to_string(),
                    property: (*n).into(),
                    perm,
                    current,
                    persistent,
                    default,
                    possible,
                });
            }
        }
        Ok(out)
    }

    /// `show-addr`.
    pub(crate) fn show_addr(&self) -> Vec<AddrRow> {
        let st = self.running.clone();
        let mut drift = BTreeMap::new();
        let mut out = vec![];
        for (o, a) in st.address.iter() {
            if a.kind == netadm_config::AddrType::Addrconf {
                // The link-local address under the object's name, each
                // SLAAC one as `IF/?` (as illumos's ipadm lists them).
                let addrs = self
                    .m
                    .mirror
                    .as_ref()
                    .map(|m| m.addrconf_addrs(o.interface()))
                    .unwrap_or_default();
                let ll = addrs.first().filter(|a| crate::mirror::link_local(&a.0));
                out.push(AddrRow {
                    addrobj: o.to_string(),
                    r#type: "addrconf".into(),
                    state: match (&self.m.mirror, ll) {
                        (None, _) => "inaccessible",
                        (Some(_), None) => "tentative",
                        (Some(_), Some(_)) => "ok",
                    }
                    .into(),
                    addr: ll.map(|(ip, p)| format!("{ip}/{p}")).unwrap_or_default(),
                    ..AddrRow::default()
                });
                out.extend(addrs.iter().filter(|a| !crate::mirror::link_local(&a.0)).map(
                    |(ip, p)| AddrRow {
                        addrobj: format!("{}/?", o.interface()),
                        r#type: "addrconf".into(),
                        state: "ok".into(),
                        addr: format!("{ip}/{p}"),
                        ..AddrRow::default()
                    },
                ));
                continue;
            }
            out.push({
                // Missing from the kernel: its device is gone, or it is.
                let d = drift
                    .entry(o.interface())
                    .or_insert_with(|| self.m.mirror.as_ref().and_then(|m| m.drift(o.interface())));
                let missing = d.as_ref().is_some_and(|d| {
                    d.missing || a.fixed_addr().is_some_and(|x| d.absent.contains(&x))
                });
                let (state, addr) = if a.kind == netadm_config::AddrType::Dhcp {
                    // Its lease, if its client holds one.
                    match self.m.mirror.as_ref().and_then(|m| m.dhcp_status(o)) {
                        Some(s) => match s.addr {
                            Some((ip, p)) => ("ok", format!("{ip}/{p}")),
                            None => ("searching", String::new()),
                        },
                        None => ("inaccessible", String::new()),
                    }
                } else if a.down {
                    ("down", a.addr.clone())
                } else {
                    (if missing { "missing" } else { "ok" }, a.addr.clone())
                };
                AddrRow {
                    addrobj: o.to_string(),
                    r#type: a.kind.as_str().into(),
                    state: state.into(),
                    addr,
                    ..AddrRow::default()
                }
            });
        }
        // The addresses of disabled interfaces, as their configuration has
        // them.
        let persisted = self.persisted.clone();
        for (o, a) in persisted.address.iter() {
            if !st.interface.contains_key(o.interface())
                && persisted.interface.contains_key(o.interface())
            {
                out.push(AddrRow {
                    addrobj: o.to_string(),
                    r#type: a.kind.as_str().into(),
                    state: "disabled".into(),
                    addr: a.addr.clone(),
                    ..AddrRow::default()
                });
            }
        }
        // ipadm's CURRENT and PERSISTENT flags.
        let flag = |on: bool, c: char| if on { c } else { '-' };
        for r in &mut out {
            let obj = r.addrobj.parse::<AddrObj>().ok();
            let run = obj.as_ref().and_then(|o| st.address.get(o));
            let per = obj.as_ref().and_then(|o| persisted.address.get(o));
            let temporary = run.is_some() && per.is_none();
            let deprecated = run.is_some_and(|a| a.deprecated);
            r.current = format!(
                "{}--{}{}",
                flag(r.state == "ok", 'U'),
                flag(temporary, 't'),
                flag(deprecated, 'd')
            );
            r.persistent = per
                .map(|a| format!("{}-{}", flag(!a.down, 'U'), flag(a.deprecated, 'd')))
                .unwrap_or_default();
        }
        out
    }
}

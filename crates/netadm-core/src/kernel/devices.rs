//! What a configuration asks of the kernel: one [`Dev`] for every kernel
//! device the links over kernel ports make or use — the ports themselves,
//! a bond per aggregation, a bridge per kernel etherstub, an 802.1Q device
//! per VLAN (and per VID that VNICs over a kernel link tag with), a
//! macvlan in bridge mode per VNIC over a port, a veth pair per VNIC over
//! a kernel etherstub. Two configurations' devices, compared, are the
//! change the kernel gets.

use std::collections::BTreeMap;

use netadm_config::StubKind;
use netadm_kernel::{BondMode, BondSpec, LacpRate, XmitHashPolicy};
use netadm_model::{AggrLayer, LacpMode, LacpTimer, LinkName, PropName, PropValue};

use super::shaper::{FlowShare, htb_prio};
use crate::datapath::qos::{FLOW_PRIORITY, flows_on, limits};
use crate::view::{Link, View};

/// Where a device lives: a zone (network namespace) by name, or netadmd's
/// own (`None`).
pub(crate) type Zone = Option<String>;

/// A device, by where it lives and its name.
pub(crate) type Key = (Zone, String);

/// What kind of device it is and what it is made over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum What {
    /// A kernel port's own device: netadm neither makes nor deletes it.
    Port,
    /// A bond (an aggregation).
    Bond(BondSpec),
    /// A bridge with no uplink (an etherstub).
    Bridge,
    /// An 802.1Q device over `lower`.
    Vlan {
        /// The device it tags on.
        lower: String,
        /// The VLAN id.
        vid: u16,
    },
    /// A macvlan in bridge mode over `lower` (a VNIC over a port,
    /// aggregation or VLAN).
    Macvlan {
        /// Its lower device (in netadmd's namespace).
        lower: String,
    },
    /// The VNIC end of a veth pair whose other end, `peer`, is a port of
    /// bridge `bridge` (a VNIC over an etherstub).
    Veth {
        /// The bridge's end (in netadmd's namespace).
        peer: String,
        /// The bridge it is enslaved to.
        bridge: String,
    },
    /// A protected VNIC over a port: the zone's end of a veth pair whose
    /// host end `peer` netadm's rules join to the VNIC's stand-in
    /// (`kernel::guard`).
    Guarded {
        /// The host's end (in netadmd's namespace).
        peer: String,
    },
    /// The macvlan in bridge mode over `lower` that stands in for a
    /// protected VNIC among its siblings (`kernel::guard`).
    GuardMac {
        /// Its lower device (in netadmd's namespace).
        lower: String,
    },
    /// An ifb that what a VNIC over an etherstub sends is redirected
    /// through, from its bridge's end, to be shaped (its `maxbw`).
    Ifb {
        /// The bridge's end of the VNIC's veth pair.
        from: String,
    },
}

/// One kernel device as a configuration wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dev {
    /// The link it is, by name (for errors and plans).
    pub link: LinkName,
    /// The link it is.
    pub of: Link,
    /// Its kind.
    pub what: What,
    /// Its MTU.
    pub mtu: u32,
    /// Its MAC address, where netadm chooses it.
    pub mac: Option<[u8; 6]>,
    /// The bond a port is a member of.
    pub master: Option<String>,
    /// What is made first: ports 0, bonds and bridges 1, VLANs 2, the
    /// VLANs VNICs tag with 3, VNICs 4. Deeper goes first when MTUs come
    /// down, last when they go up.
    pub layer: u8,
    /// A port's or a VNIC's link properties the kernel carries (channels,
    /// offloads, bandwidth).
    pub props: BTreeMap<PropName, PropValue>,
    /// The flows of the link it is, in the order they match (a port's,
    /// an aggregation's, a VNIC's over either).
    pub flows: Vec<FlowShare>,
}

impl Dev {
    /// The device it is made over, in netadmd's namespace (a bridge for
    /// a veth).
    pub(crate) fn lower(&self) -> Option<&str> {
        match &self.what {
            What::Vlan { lower, .. } | What::Macvlan { lower } | What::GuardMac { lower } => {
                Some(lower)
            }
            What::Veth { bridge, .. } => Some(bridge),
            What::Port | What::Bond(_) | What::Bridge | What::Ifb { .. } | What::Guarded { .. } => {
                None
            }
        }
    }

    /// Whether `other` is the same device (it can be changed in place
    /// into `self`), rather than one that must be made anew.
    pub(crate) fn same_device(&self, other: &Dev) -> bool {
        match (&self.what, &other.what) {
            (What::Bond(_), What::Bond(_)) => true,
            (a, b) => a == b,
        }
    }
}

/// The layer of the 802.1Q device VNICs with one VID over one link share.
pub(crate) const VNIC_TAG_LAYER: u8 = 3;

/// The properties a port or VNIC hands the kernel.
const KERNEL_PROPS: [PropName; 7] = [
    PropName::RxRings,
    PropName::TxRings,
    PropName::Tso,
    PropName::TxCsum,
    PropName::RxCsum,
    PropName::Maxbw,
    PropName::Priority,
];

/// The bond an aggregation is.
pub(crate) fn bond_spec(a: &netadm_config::AggrConf) -> BondSpec {
    let p = a.policy;
    let hash = if p.contains(AggrLayer::L4) {
        XmitHashPolicy::Layer34
    } else if p.contains(AggrLayer::L3) {
        XmitHashPolicy::Layer23
    } else {
        XmitHashPolicy::Layer2
    };
    let (mode, rate) = match a.lacp_mode {
        LacpMode::Off => (BondMode::BalanceXor, None),
        LacpMode::Active | LacpMode::Passive => (
            BondMode::Lacp,
            Some(match a.lacp_timer {
                LacpTimer::Short => LacpRate::Fast,
                LacpTimer::Long => LacpRate::Slow,
            }),
        ),
    };
    BondSpec {
        mode,
        xmit_hash_policy: Some(hash),
        lacp_rate: rate,
        miimon: Some(100),
        min_links: None,
        // Passive LACP answers an active partner and never starts.
        lacp_active: (mode == BondMode::Lacp).then_some(a.lacp_mode == LacpMode::Active),
    }
}

/// The devices configuration `v` asks of the kernel, given the device
/// name of each kernel port (`ports`: device -> interface) — only the
/// links over those ports and over kernel etherstubs; the rest is
/// netadm's own.
///
/// Only the devices of the links `want` accepts (and a VNIC's 802.1Q
/// device, which is its too) are made: a change asks for those it
/// touches.
pub(crate) fn devices(
    v: &View<'_>,
    ports: &BTreeMap<LinkName, String>,
    want: impl Fn(&Link) -> bool,
) -> BTreeMap<Key, Dev> {
    let mut out = BTreeMap::new();
    let props = |l: &Link| -> BTreeMap<PropName, PropValue> {
        let Some(all) = v.props(l) else { return BTreeMap::new() };
        all.iter().filter(|(k, _)| KERNEL_PROPS.contains(k)).map(|(k, v)| (*k, v.clone())).collect()
    };
    let flows = |l: &Link| -> Vec<FlowShare> {
        flows_on(v, l)
            .into_iter()
            .map(|(name, c)| {
                let (maxbw, rank) = limits(Some(&c.props), FLOW_PRIORITY);
                FlowShare {
                    name: name.clone(),
                    attrs: c.attrs.clone(),
                    maxbw,
                    prio: htb_prio(rank),
                }
            })
            .collect()
    };
    for (d, ifname) in ports {
        let link = Link::Phys(d.clone());
        if !want(&link) {
            continue;
        }
        let name = v.phys_name(d);
        out.insert(
            (None, ifname.clone()),
            Dev {
                link: name.clone(),
                of: link.clone(),
                what: What::Port,
                mtu: v.mtu(&link),
                mac: None,
                master: v.aggr_of(&name).map(ToString::to_string),
                layer: 0,
                props: props(&link),
                flows: flows(&link),
            },
        );
    }
    for (a, conf) in &v.st.aggr {
        let link = Link::Aggr(a.clone());
        if !want(&link) || !owns(v, ports, &link) {
            continue;
        }
        out.insert(
            (None, a.to_string()),
            Dev {
                link: a.clone(),
                of: link.clone(),
                what: What::Bond(bond_spec(conf)),
                mtu: v.mtu(&link),
                mac: conf.mac.map(|m| m.0),
                master: None,
                layer: 1,
                props: props(&link),
                flows: flows(&link),
            },
        );
    }
    for (e, conf) in &v.st.etherstub {
        if conf.kind != StubKind::Kernel || !want(&Link::Etherstub(e.clone())) {
            continue;
        }
        out.insert(
            (None, e.to_string()),
            Dev {
                link: e.clone(),
                of: Link::Etherstub(e.clone()),
                what: What::Bridge,
                mtu: v.mtu(&Link::Etherstub(e.clone())),
                mac: None,
                master: None,
                layer: 1,
                props: BTreeMap::new(),
                flows: vec![],
            },
        );
    }
    for (n, conf) in &v.st.vnic {
        let link = Link::Vnic(n.clone());
        if !want(&link) {
            continue;
        }
        let Some(over) = v.resolve(conf.over.as_str()) else { continue };
        if !owns(v, ports, &over) {
            continue;
        }
        let lower = device_name(v, ports, &over);
        let zone = zone_of(v, &link);
        let mtu = v.mtu(&link);
        if conf.vlan {
            let vid = conf.vid.map_or(0, u16::from);
            out.insert(
                (zone, n.to_string()),
                Dev {
                    link: n.clone(),
                    of: link.clone(),
                    what: What::Vlan { lower, vid },
                    mtu,
                    mac: None,
                    master: None,
                    layer: 2,
                    props: BTreeMap::new(),
                    flows: vec![],
                },
            );
            continue;
        }
        let what = match &over {
            Link::Etherstub(e) => {
                // What it sends is shaped on an ifb of its own, in
                // netadmd's namespace.
                let maxbw = v.prop(&link, PropName::Maxbw);
                if let Some(bw) = maxbw.filter(|_| want(&link)) {
                    out.insert(
                        (None, shaper_end(n)),
                        Dev {
                            link: n.clone(),
                            of: link.clone(),
                            what: What::Ifb { from: bridge_end(n) },
                            mtu,
                            mac: None,
                            master: None,
                            layer: 5,
                            props: BTreeMap::from([(PropName::Maxbw, bw)]),
                            flows: vec![],
                        },
                    );
                }
                What::Veth { peer: bridge_end(n), bridge: e.to_string() }
            }
            _ => {
                // A VNIC with a VID goes over its link's 802.1Q device for
                // that VID, shared by every VNIC tagging with it.
                let lower = match conf.vid {
                    Some(vid) => {
                        let name = crate::view::tagged(&lower, vid.into());
                        out.entry((None, name.clone())).or_insert(Dev {
                            link: conf.over.clone(),
                            of: over.clone(),
                            what: What::Vlan { lower: lower.clone(), vid: vid.into() },
                            mtu: v.mtu(&over),
                            mac: None,
                            master: None,
                            layer: VNIC_TAG_LAYER,
                            props: BTreeMap::new(),
                            flows: vec![],
                        });
                        name
                    }
                    None => lower,
                };
                What::Macvlan { lower }
            }
        };
        out.insert(
            (zone, n.to_string()),
            Dev {
                link: n.clone(),
                props: props(&link),
                flows: match what {
                    What::Macvlan { .. } => flows(&link),
                    _ => vec![],
                },
                of: link,
                what,
                mtu,
                mac: Some(conf.mac.0),
                master: None,
                layer: 4,
            },
        );
    }
    out
}

/// Whether link `l` is the kernel's: over kernel ports only (an
/// aggregation's members are all of one kind: `check`), or a kernel
/// etherstub, or a VNIC over either.
pub(crate) fn owns(v: &View<'_>, ports: &BTreeMap<LinkName, String>, l: &Link) -> bool {
    match l {
        Link::Etherstub(e) => v.st.etherstub.get(e).is_some_and(|c| c.kind == StubKind::Kernel),
        Link::Vnic(n) => {
            v.st.vnic
                .get(n)
                .and_then(|c| v.resolve(c.over.as_str()))
                .is_some_and(|o| owns(v, ports, &o))
        }
        l => {
            let under = v.ports_under(l);
            !under.is_empty() && under.iter().all(|d| ports.contains_key(d))
        }
    }
}

/// The kernel device that is link `l` (owned by the kernel), and where it
/// lives.
pub(crate) fn device_of(
    v: &View<'_>,
    ports: &BTreeMap<LinkName, String>,
    l: &Link,
) -> (Zone, String) {
    (zone_of(v, l), device_name(v, ports, l))
}

fn device_name(v: &View<'_>, ports: &BTreeMap<LinkName, String>, l: &Link) -> String {
    match l {
        Link::Phys(d) => ports.get(d).cloned().unwrap_or_else(|| d.to_string()),
        l => v.name_of(l).to_string(),
    }
}

/// A VNIC's zone.
fn zone_of(v: &View<'_>, l: &Link) -> Zone {
    match l {
        Link::Vnic(_) => v.prop(l, PropName::Zone).and_then(|z| z.as_text().map(str::to_owned)),
        _ => None,
    }
}

/// The bridge's end of VNIC `vnic`'s veth pair: a name of its own, from
/// the VNIC's (FNV-1a), so it is found again after a restart.
pub(crate) fn bridge_end(vnic: &LinkName) -> String {
    format!("nsw{:08x}", fnv(vnic))
}

/// The ifb VNIC `vnic` over an etherstub is shaped on, named as
/// [`bridge_end`] is.
pub(crate) fn shaper_end(vnic: &LinkName) -> String {
    format!("nsq{:08x}", fnv(vnic))
}

pub(crate) fn fnv(n: &LinkName) -> u32 {
    fnv_str(n.as_str())
}

/// FNV-1a of `s`: short, stable names for what netadm makes from names
/// it is given.
pub(crate) fn fnv_str(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

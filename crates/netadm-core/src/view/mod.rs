//! Questions about a configuration: what a name refers to, what is built
//! over what, and the MTU each link and port ends up with.

pub(crate) mod check;
pub(crate) mod delta;

use netadm_config::{LinkProps, LinkState};
use netadm_model::{LinkClass, LinkName, PropName, PropValue};

use crate::CoreError;
use crate::ports::power::Hardware;

/// What a link name refers to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Link {
    /// A port, by device name.
    Phys(LinkName),
    /// An aggregation.
    Aggr(LinkName),
    /// A VNIC.
    Vnic(LinkName),
    /// An etherstub: a virtual switch with no port.
    Etherstub(LinkName),
}

impl Link {
    /// The link's class.
    pub fn class(&self) -> LinkClass {
        match self {
            Self::Phys(_) => LinkClass::Phys,
            Self::Aggr(_) => LinkClass::Aggr,
            Self::Vnic(_) => LinkClass::Vnic,
            Self::Etherstub(_) => LinkClass::Etherstub,
        }
    }
}

/// Default MTU of every link.
pub const DEFAULT_MTU: u32 = 1500;

/// The largest MTU netadm's own switch and TAPs carry (the emulated
/// NICs' largest frame).
pub const NETADM_MAX_MTU: u32 = 9710;

/// A view of one configuration against the hardware.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The hardware.
    pub hw: &'a Hardware,
    /// The configuration.
    pub st: &'a LinkState,
}

impl<'a> View<'a> {
    /// The link name of port `device` (it may have been renamed).
    pub fn phys_name(&self, device: &LinkName) -> LinkName {
        self.st.phys.get(device).and_then(|p| p.name.clone()).unwrap_or_else(|| device.clone())
    }

    /// The name of link `l` (a port's may have been renamed).
    pub fn name_of(&self, l: &Link) -> LinkName {
        match l {
            Link::Phys(d) => self.phys_name(d),
            Link::Aggr(n) | Link::Vnic(n) | Link::Etherstub(n) => n.clone(),
        }
    }

    /// Every link name in use, with what it is.
    pub fn links(&self) -> Vec<(LinkName, Link)> {
        let mut v: Vec<(LinkName, Link)> = self
            .hw
            .phys()
            .map(|p| (self.phys_name(p.device()), Link::Phys(p.device().clone())))
            .collect();
        v.extend(self.st.aggr.keys().map(|n| (n.clone(), Link::Aggr(n.clone()))));
        v.extend(self.st.vnic.keys().map(|n| (n.clone(), Link::Vnic(n.clone()))));
        v.extend(self.st.etherstub.keys().map(|n| (n.clone(), Link::Etherstub(n.clone()))));
        v
    }

    /// What `name` refers to: a port first, then an aggregation, then a
    /// VNIC, then an etherstub (the order of [`View::links`]). A lookup in each map, not a
    /// walk over every link: everything that resolves names (validation,
    /// plans, MTUs, reads) calls this once per link it looks at.
    pub fn resolve(&self, name: &str) -> Option<Link> {
        let phys_name = |d: &'a LinkName| {
            self.st.phys.get(d).and_then(|p| p.name.as_ref()).unwrap_or(d).as_str()
        };
        if let Some(p) = self.hw.phys().find(|p| phys_name(p.device()) == name) {
            return Some(Link::Phys(p.device().clone()));
        }
        if let Some((n, _)) = self.st.aggr.get_key_value(name) {
            return Some(Link::Aggr(n.clone()));
        }
        if let Some((n, _)) = self.st.vnic.get_key_value(name) {
            return Some(Link::Vnic(n.clone()));
        }
        self.st.etherstub.get_key_value(name).map(|(n, _)| Link::Etherstub(n.clone()))
    }

    /// What `name` refers to, or a NotFound error naming it.
    pub fn require(&self, name: &str) -> Result<Link, CoreError> {
        self.resolve(name)
            .ok_or_else(|| CoreError::not_found(format!("link {name} does not exist")))
    }

    /// Whether a name is taken by any link.
    pub fn taken(&self, name: &str) -> bool {
        self.resolve(name).is_some()
    }

    /// The aggregation a port link is a member of.
    pub fn aggr_of(&self, link: &LinkName) -> Option<&'a LinkName> {
        self.st.aggr.iter().find(|(_, a)| a.ports.contains(link)).map(|(n, _)| n)
    }

    /// The link whose virtual switch a link's frames cross: a VNIC's
    /// link (a port, aggregation or etherstub), any other link itself.
    pub fn switch_of(&self, link: &Link) -> Option<Link> {
        match link {
            Link::Vnic(n) => self.resolve(self.st.vnic.get(n)?.over.as_str()),
            l => Some(l.clone()),
        }
    }

    /// VNICs directly over `link`.
    pub fn vnics_over(&self, link: &LinkName) -> Vec<&'a LinkName> {
        self.st.vnic.iter().filter(|(_, v)| &v.over == link).map(|(n, _)| n).collect()
    }

    /// The port device behind a phys link name.
    pub fn device_of(&self, link: &LinkName) -> Option<LinkName> {
        match self.resolve(link.as_str())? {
            Link::Phys(d) => Some(d),
            _ => None,
        }
    }

    /// Stored property values of a link.
    pub fn props(&self, link: &Link) -> Option<&'a LinkProps> {
        match link {
            Link::Phys(d) => self.st.phys.get(d).map(|p| &p.props),
            Link::Aggr(n) => self.st.aggr.get(n).map(|a| &a.props),
            Link::Vnic(n) => self.st.vnic.get(n).map(|v| &v.props),
            Link::Etherstub(n) => self.st.etherstub.get(n).map(|e| &e.props),
        }
    }

    /// A property's value: stored, else its default.
    pub fn prop(&self, link: &Link, name: PropName) -> Option<PropValue> {
        match self.props(link).and_then(|p| p.get(&name)) {
            Some(v) => Some(v.clone()),
            None => name.spec().default.clone(),
        }
    }

    fn prop_uint(&self, link: &Link, name: PropName) -> Option<u64> {
        self.props(link).and_then(|p| p.get(&name)).and_then(PropValue::as_uint)
    }

    /// The MTU a link runs with. A port in an aggregation runs with the
    /// aggregation's; a VNIC's defaults to its link's.
    pub fn mtu(&self, link: &Link) -> u32 {
        match link {
            Link::Phys(d) => {
                let name = self.phys_name(d);
                if let Some(a) = self.aggr_of(&name) {
                    return self.mtu(&Link::Aggr(a.clone()));
                }
                self.prop_uint(link, PropName::Mtu).map_or(DEFAULT_MTU, |v| v as u32)
            }
            Link::Aggr(_) | Link::Etherstub(_) => {
                self.prop_uint(link, PropName::Mtu).map_or(DEFAULT_MTU, |v| v as u32)
            }
            Link::Vnic(n) => self.prop_uint(link, PropName::Mtu).map_or_else(
                || {
                    self.st
                        .vnic
                        .get(n)
                        .and_then(|v| self.resolve(v.over.as_str()))
                        .map_or(DEFAULT_MTU, |o| self.mtu(&o))
                },
                |v| v as u32,
            ),
        }
    }

    /// The ports a link ultimately runs on (none for an etherstub and the
    /// VNICs over it).
    pub fn ports_under(&self, link: &Link) -> Vec<LinkName> {
        match link {
            Link::Etherstub(_) => vec![],
            Link::Phys(d) => vec![d.clone()],
            Link::Aggr(n) => self
                .st
                .aggr
                .get(n)
                .map(|a| a.ports.iter().filter_map(|p| self.device_of(p)).collect())
                .unwrap_or_default(),
            Link::Vnic(n) => self
                .st
                .vnic
                .get(n)
                .and_then(|v| self.resolve(v.over.as_str()))
                .map(|o| self.ports_under(&o))
                .unwrap_or_default(),
        }
    }

    /// The MTUs link `l` accepts: its ports' common range; a link with no
    /// port (an etherstub, a VNIC over one) what its switch carries — a
    /// kernel bridge the kernel's 65535, netadm's own
    /// [`NETADM_MAX_MTU`].
    pub fn mtu_range(&self, l: &Link) -> (u32, u32) {
        let ports = self.ports_under(l);
        if ports.is_empty() {
            let hi = if self.on_kernel(l) { 65535 } else { NETADM_MAX_MTU };
            return (68, hi);
        }
        ports.iter().filter_map(|d| self.hw.find(d.as_str())).fold((68, u32::MAX), |r, p| {
            let c = p.caps();
            (r.0.max(c.min_mtu), r.1.min(c.max_mtu))
        })
    }

    /// Whether link `l` is made of kernel devices: over kernel ports, or
    /// a kernel etherstub, or a VNIC over either.
    pub fn on_kernel(&self, l: &Link) -> bool {
        let stub = |e: &LinkName| {
            self.st.etherstub.get(e).is_some_and(|c| c.kind == netadm_config::StubKind::Kernel)
        };
        match l {
            Link::Etherstub(e) => stub(e),
            l => match self.switch_of(l) {
                Some(Link::Etherstub(e)) => stub(&e),
                _ => {
                    let under = self.ports_under(l);
                    !under.is_empty()
                        && under.iter().all(|d| {
                            self.hw.find(d.as_str()).is_some_and(|p| p.caps().backend == "kernel")
                        })
                }
            },
        }
    }

    /// Every port device something uses (see [`View::port_in_use`]), in
    /// one pass: each distinct link VNICs sit over is resolved once, not
    /// once per VNIC.
    pub fn ports_in_use(&self) -> std::collections::BTreeSet<LinkName> {
        let mut over: std::collections::BTreeSet<&LinkName> = std::collections::BTreeSet::new();
        for v in self.st.vnic.values() {
            over.insert(&v.over);
        }
        let mut used = std::collections::BTreeSet::new();
        let links = over
            .into_iter()
            .filter_map(|o| self.resolve(o.as_str()))
            .chain(self.st.aggr.keys().map(|n| Link::Aggr(n.clone())))
            .chain(self.st.interface.keys().filter_map(|n| self.resolve(n.as_str())));
        for l in links {
            used.extend(self.ports_under(&l));
        }
        used
    }

    /// Whether anything uses port `device`: an aggregation it belongs to, or
    /// a VNIC or IP interface over it (directly or through its
    /// aggregation). A used port's rings run. What [`View::ports_in_use`]
    /// says of one port, at the cost of lookups and, for a port that is in
    /// no aggregation and has no IP interface, a walk over the VNICs that
    /// stops at the first one over it.
    pub fn port_in_use(&self, device: &LinkName) -> bool {
        let name = self.phys_name(device);
        self.aggr_of(&name).is_some()
            || self.st.interface.contains_key(&name)
            || self.st.vnic.values().any(|v| v.over == name)
    }
}

/// The device VNICs with a VID over kernel link `over` tag on (their
/// 802.1Q device, [`tagged`], goes over it): a port's is its interface
/// (`eth0`), anything else's its link name.
pub(crate) fn tag_lower(v: &View<'_>, over: &Link) -> String {
    match over {
        Link::Phys(d) => v.hw.find(d.as_str()).map_or_else(|| d.to_string(), |p| p.interface()),
        l => v.name_of(l).to_string(),
    }
}

/// The 802.1Q device VNICs over `lower` with VID `vid` share: `LOWER.VID`
/// as `ip` names them (the kernel's 15 bytes at most: a longer one is cut
/// and keeps its VID).
pub(crate) fn tagged(lower: &str, vid: u16) -> String {
    let head: String = lower.chars().take(tagged_keeps(vid)).collect();
    format!("{head}.{vid}")
}

/// How many characters of its lower's name [`tagged`] keeps for `vid`.
pub(crate) fn tagged_keeps(vid: u16) -> usize {
    netadm_kernel::IFNAME_MAX - format!(".{vid}").len()
}

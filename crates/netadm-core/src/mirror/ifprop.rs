//! ipadm's interface properties (`set-ifprop -m PROTO -p PROP=VALUE IF`)
//! and how each reaches the kernel: per-protocol settings of the
//! interface's TAP under `/proc/sys/net/{ipv4,ipv6}/conf/TAP/` (netadmd's
//! network namespace), and the IPv4 MTU as the device's own MTU (Linux
//! has no IPv4 MTU apart from it; an interface's MTU is at most its
//! link's, as on illumos).

use netadm_config::IfConf;
use netadm_kernel::sysctl::{self, Family};

use crate::CoreError;

/// One property: protocol, name, and how its values look.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Def {
    pub(crate) proto: &'static str,
    pub(crate) name: &'static str,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `on`/`off`, a 1/0 sysctl.
    OnOff(&'static str),
    /// An MTU from `min` up to the link's.
    Mtu(u32),
}

/// Every interface property netadm has, in ipadm's order.
pub(crate) const DEFS: &[Def] = &[
    Def { proto: "ipv4", name: "forwarding", kind: Kind::OnOff("forwarding") },
    Def { proto: "ipv4", name: "mtu", kind: Kind::Mtu(68) },
    Def { proto: "ipv6", name: "forwarding", kind: Kind::OnOff("forwarding") },
    Def { proto: "ipv6", name: "mtu", kind: Kind::Mtu(1280) },
];

/// The protocols `-m` takes.
pub(crate) const PROTOS: &[&str] = &["ipv4", "ipv6"];

impl Def {
    /// Looks `proto`/`name` up: `InvalidArgument` naming what exists.
    pub(crate) fn find(proto: &str, name: &str) -> Result<&'static Def, CoreError> {
        if !PROTOS.contains(&proto) {
            return Err(CoreError::invalid_argument(format!(
                "protocol {proto:?}: expected one of {}",
                PROTOS.join(", ")
            )));
        }
        super::proto::named(DEFS, |d| (d.proto, d.name), proto, name, "interface property")
    }

    /// `PROTO.PROP`, the key in [`IfConf::props`].
    pub(crate) fn key(&self) -> String {
        format!("{}.{}", self.proto, self.name)
    }

    fn family(&self) -> Family {
        if self.proto == "ipv4" { Family::V4 } else { Family::V6 }
    }

    /// The default value, for an interface over a link of MTU `link_mtu`.
    pub(crate) fn default(&self, link_mtu: u32) -> String {
        match self.kind {
            Kind::OnOff(_) => "off".into(),
            Kind::Mtu(_) => link_mtu.to_string(),
        }
    }

    /// The possible values.
    pub(crate) fn possible(&self, link_mtu: u32) -> String {
        match self.kind {
            Kind::OnOff(_) => "on,off".into(),
            Kind::Mtu(min) => format!("{min}-{link_mtu}"),
        }
    }

    /// Checks `value` (`InvalidValue` naming the range) and normalises it.
    pub(crate) fn check(&self, value: &str, link_mtu: u32) -> Result<String, CoreError> {
        let bad = || {
            CoreError::invalid_value(format!(
                "{} {}: {value:?} is not one of {}",
                self.proto,
                self.name,
                self.possible(link_mtu)
            ))
        };
        match self.kind {
            Kind::OnOff(_) => match value {
                "on" | "off" => Ok(value.to_owned()),
                _ => Err(bad()),
            },
            Kind::Mtu(min) => match value.parse::<u32>() {
                Ok(m) if (min..=link_mtu).contains(&m) => Ok(m.to_string()),
                _ => Err(bad()),
            },
        }
    }

    /// The value an interface's configuration gives it.
    pub(crate) fn value(&self, conf: &IfConf, link_mtu: u32) -> String {
        conf.props.get(&self.key()).cloned().unwrap_or_else(|| self.default(link_mtu))
    }

    /// What the kernel has for it on device `dev` (`mtu`: the device's
    /// MTU, read by the caller, for ipv4).
    pub(crate) fn current(&self, dev: &str, dev_mtu: u32) -> Option<String> {
        match (self.kind, self.family()) {
            (Kind::Mtu(_), Family::V4) => Some(dev_mtu.to_string()),
            (Kind::Mtu(_), Family::V6) => sysctl::get(Family::V6, dev, "mtu").ok(),
            (Kind::OnOff(key), f) => sysctl::get(f, dev, key)
                .ok()
                .map(|v| if v == "0" { "off" } else { "on" }.to_owned()),
        }
    }
}

/// The IPv4 MTU `conf` asks for, at most the link's.
pub(crate) fn if_mtu(conf: Option<&IfConf>, link_mtu: u32) -> u32 {
    conf.and_then(|c| c.props.get("ipv4.mtu"))
        .and_then(|m| m.parse::<u32>().ok())
        .map_or(link_mtu, |m| m.min(link_mtu))
}

/// Writes to device `dev` the sysctl properties that differ between
/// `from` (what the device has: `None` for one just made, at the kernel's
/// defaults) and `to`: those set, and those reset (written back to their
/// defaults). Properties never set are not written (a kernel without
/// `/proc/sys/net` runs interfaces that set none). The IPv4 MTU is the
/// device's, set with it; the IPv6 one is written again when the device's
/// MTU changed (`mtu_changed`), which resets it.
pub(crate) fn apply(
    dev: &str,
    from: Option<&IfConf>,
    to: &IfConf,
    link_mtu: u32,
    mtu_changed: bool,
) -> Result<(), CoreError> {
    let dev_mtu = if_mtu(Some(to), link_mtu);
    for d in DEFS {
        let (old, new) = (from.and_then(|c| c.props.get(&d.key())), to.props.get(&d.key()));
        let v6_mtu = matches!(d.kind, Kind::Mtu(_)) && d.family() == Family::V6;
        if old == new && !(v6_mtu && mtu_changed && new.is_some()) {
            continue;
        }
        let v = d.value(to, link_mtu);
        let (key, v) = match d.kind {
            Kind::OnOff(key) => (key, if v == "on" { "1" } else { "0" }.to_owned()),
            Kind::Mtu(_) if v6_mtu => {
                ("mtu", v.parse::<u32>().map_or(dev_mtu, |m| m.min(dev_mtu)).to_string())
            }
            Kind::Mtu(_) => continue,
        };
        sysctl::set(d.family(), dev, key, &v)
            .map_err(|e| CoreError::hardware(format!("{dev}: {} {}: {e}", d.proto, d.name)))?;
    }
    Ok(())
}

//! ipadm's protocol properties (`set-prop -p PROP=VALUE PROTO`): settings
//! of netadmd's whole network namespace under `/proc/sys/net/`, applied
//! with the kernel mirror (which runs in that namespace); without it they
//! are only kept.

use netadm_kernel::sysctl;

use crate::CoreError;

/// One property: protocol, name, its sysctl and its values (ipadm's
/// spelling, the kernel's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Def {
    pub(crate) proto: &'static str,
    pub(crate) name: &'static str,
    key: &'static str,
    kind: Kind,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Named values and what the kernel calls them; the first is the
    /// kernel's default.
    Named(&'static [(&'static str, &'static str)]),
    /// A number in `min..=max`, and the kernel's default.
    Range(u32, u32, u32),
}

const ON_OFF: &[(&str, &str)] = &[("off", "0"), ("on", "1")];

/// Every protocol property netadm has.
pub(crate) const DEFS: &[Def] = &[
    Def { proto: "ipv4", name: "forwarding", key: "ipv4/ip_forward", kind: Kind::Named(ON_OFF) },
    Def { proto: "ipv4", name: "ttl", key: "ipv4/ip_default_ttl", kind: Kind::Range(1, 255, 64) },
    Def {
        proto: "ipv6",
        name: "forwarding",
        key: "ipv6/conf/all/forwarding",
        kind: Kind::Named(ON_OFF),
    },
    Def {
        proto: "tcp",
        name: "ecn",
        key: "ipv4/tcp_ecn",
        kind: Kind::Named(&[("passive", "2"), ("never", "0"), ("active", "1")]),
    },
];

/// The entry of `defs` for property `name` of `proto` (`id` gives an
/// entry's protocol and name), or `InvalidArgument` naming the `what`s
/// (`property`, `interface property`) `proto` has. Shared by the protocol
/// and the interface property tables, which look up the same way.
pub(super) fn named<D>(
    defs: &'static [D],
    id: impl Fn(&D) -> (&'static str, &'static str),
    proto: &str,
    name: &str,
    what: &str,
) -> Result<&'static D, CoreError> {
    defs.iter().find(|d| id(d) == (proto, name)).ok_or_else(|| {
        let names: Vec<&str> =
            defs.iter().map(&id).filter(|(p, _)| *p == proto).map(|(_, n)| n).collect();
        CoreError::invalid_argument(format!(
            "{proto} has no {what} {name:?} (it has {})",
            names.join(", ")
        ))
    })
}

impl Def {
    /// Looks `proto`/`name` up: `InvalidArgument` naming what exists.
    pub(crate) fn find(proto: &str, name: &str) -> Result<&'static Def, CoreError> {
        if !DEFS.iter().any(|d| d.proto == proto) {
            let mut protos: Vec<&str> = DEFS.iter().map(|d| d.proto).collect();
            protos.dedup();
            return Err(CoreError::invalid_argument(format!(
                "protocol {proto:?}: netadm has properties of {}",
                protos.join(", ")
            )));
        }
        named(DEFS, |d| (d.proto, d.name), proto, name, "property")
    }

    /// `PROTO.PROP`, the key in the `proto` section.
    pub(crate) fn key(&self) -> String {
        format!("{}.{}", self.proto, self.name)
    }

    /// The kernel's default, in ipadm's spelling.
    pub(crate) fn default(&self) -> String {
        match self.kind {
            Kind::Named(v) => v[0].0.into(),
            Kind::Range(_, _, d) => d.to_string(),
        }
    }

    /// The possible values.
    pub(crate) fn possible(&self) -> String {
        match self.kind {
            Kind::Named(v) => v.iter().map(|x| x.0).collect::<Vec<_>>().join(","),
            Kind::Range(a, b, _) => format!("{a}-{b}"),
        }
    }

    /// Checks and normalises `value` (`InvalidValue` naming the range).
    pub(crate) fn check(&self, value: &str) -> Result<String, CoreError> {
        let ok = match self.kind {
            Kind::Named(v) => v.iter().any(|x| x.0 == value).then(|| value.to_owned()),
            Kind::Range(a, b, _) => {
                value.parse::<u32>().ok().filter(|n| (a..=b).contains(n)).map(|n| n.to_string())
            }
        };
        ok.ok_or_else(|| {
            CoreError::invalid_value(format!(
                "{} {}: {value:?} is not one of {}",
                self.proto,
                self.name,
                self.possible()
            ))
        })
    }

    /// What the kernel has, in ipadm's spelling.
    pub(crate) fn current(&self) -> Option<String> {
        let k = sysctl::get_net(self.key).ok()?;
        Some(match self.kind {
            Kind::Named(v) => v.iter().find(|x| x.1 == k).map_or(k, |x| x.0.to_owned()),
            Kind::Range(..) => k,
        })
    }

    /// Writes `value` (ipadm's spelling, checked) to the kernel.
    pub(crate) fn apply(&self, value: &str) -> Result<(), CoreError> {
        let k = match self.kind {
            Kind::Named(v) => v.iter().find(|x| x.0 == value).map_or(value, |x| x.1),
            Kind::Range(..) => value,
        };
        sysctl::set_net(self.key, k)
            .map_err(|e| CoreError::hardware(format!("{} {}: {e}", self.proto, self.name)))
    }
}

/// The definition behind a `proto` section key.
pub(crate) fn by_key(key: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.key() == key)
}

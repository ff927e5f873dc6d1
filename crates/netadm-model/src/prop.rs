//! Link properties (`dladm show-linkprop` / `set-linkprop`): names, the
//! static table of their types, defaults and permissions, and value parsing.
//!
//! Applicability is checked per [`LinkClass`] here. Some phys properties only
//! exist on one NIC family (`rx-imt`/`tx-imt` on atl1c-class, `itr` on
//! i40e-class); rejecting those per driver is the daemon's job, since the
//! model does not know which driver owns a link.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use crate::link::LinkClass;
use crate::protect::{ClientId, IpPrefix, ProtectError, Protection, parse_list, show_list};

keywords! {
    /// A link property name. The string forms are exactly dladm-style:
    /// `mtu`, `rxrings`, `txrings-effective`, `xmit-batch`, `rx-imt`, ...
    /// Declared in the order `show-linkprop` lists them.
    pub enum PropName {
        /// `mtu`: maximum transmission unit.
        Mtu = "mtu",
        /// `rxrings`: requested dedicated RX rings.
        RxRings = "rxrings",
        /// `txrings`: requested dedicated TX rings.
        TxRings = "txrings",
        /// `rxrings-effective`: RX rings in use.
        RxRingsEffective = "rxrings-effective",
        /// `txrings-effective`: TX rings in use.
        TxRingsEffective = "txrings-effective",
        /// `rxrings-available`: RX rings still available.
        RxRingsAvailable = "rxrings-available",
        /// `txrings-available`: TX rings still available.
        TxRingsAvailable = "txrings-available",
        /// `xmit-batch`: batched TX doorbells.
        XmitBatch = "xmit-batch",
        /// `rx-imt`: RX interrupt moderation timer (atl1c-class).
        RxImt = "rx-imt",
        /// `tx-imt`: TX interrupt moderation timer (atl1c-class).
        TxImt = "tx-imt",
        /// `itr`: interrupt throttle rate per vector (i40e-class).
        Itr = "itr",
        /// `state`: operational link state.
        State = "state",
        /// `speed`: link speed.
        Speed = "speed",
        /// `duplex`: link duplex.
        Duplex = "duplex",
        /// `tso`: TCP segmentation offload (i40e-class).
        Tso = "tso",
        /// `tx-csum`: transmit L4 checksum offload.
        TxCsum = "tx-csum",
        /// `rx-csum`: receive L4 checksum verification by the NIC.
        RxCsum = "rx-csum",
        /// `maxbw`: the most a link may send, in bits per second.
        Maxbw = "maxbw",
        /// `priority`: a link's share of its port when the port is saturated.
        Priority = "priority",
        /// `zone`: the network namespace a VNIC's IP interface lives in.
        Zone = "zone",
        /// `protection`: what a VNIC's tenant may not forge (dladm's link
        /// protection).
        Protection = "protection",
        /// `allowed-ips`: the IP senders `ip-nospoof` lets through.
        AllowedIps = "allowed-ips",
        /// `allowed-dhcp-cids`: the DHCP client identifiers `dhcp-nospoof`
        /// lets through.
        AllowedDhcpCids = "allowed-dhcp-cids",
    }
}

impl PropName {
    /// The property's static specification.
    pub fn spec(self) -> &'static PropSpec {
        &SPECS[self as usize]
    }
}

impl FromStr for PropName {
    type Err = PropError;
    /// Exact, case-sensitive match on the property name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| PropError::UnknownProp { name: s.to_owned() })
    }
}

/// The static specification of `name` (same as [`PropName::spec`]).
pub fn spec(name: PropName) -> &'static PropSpec {
    name.spec()
}

/// The type of a property's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropType {
    /// An unsigned integer in `min..=max`, in `unit` (may be "").
    Uint {
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
        /// Unit for display, e.g. "bytes", "us", "2us", "Mb/s".
        unit: &'static str,
    },
    /// A boolean, written and shown "on" / "off".
    Bool,
    /// One of a fixed set of words (stored as [`PropValue::Text`]).
    Enum(&'static [&'static str]),
    /// Free text.
    Text,
    /// A bandwidth as dladm writes it: an integer or decimal with a scale
    /// suffix, `K`, `M` or `G` (Kb/s, Mb/s, Gb/s; Mb/s without one), e.g.
    /// `100M`, `1G`, `1.5`; at least `min` and at most `max` bits per
    /// second. Stored as [`PropValue::Bandwidth`].
    Bandwidth {
        /// Smallest accepted value, b/s.
        min: u64,
        /// Largest accepted value, b/s.
        max: u64,
    },
    /// An interrupt moderation interval: `adaptive` (the driver picks it
    /// from the traffic, as Linux's net_dim does) or a fixed unsigned
    /// integer in `0..=max`, in `unit`.
    Moderation {
        /// Largest fixed value.
        max: u64,
        /// Unit for display.
        unit: &'static str,
    },
    /// A set of link protections (`mac-nospoof,ip-nospoof,...`), stored
    /// as [`PropValue::Protection`].
    Protection,
    /// A list of IP addresses and prefixes, stored as [`PropValue::Ips`].
    IpList,
    /// A list of DHCP client identifiers, stored as [`PropValue::Cids`].
    CidList,
}

/// The values of `priority`, lowest first.
pub const PRIORITIES: [&str; 3] = ["low", "medium", "high"];

/// A link's `priority` when none is set (dladm's default).
pub const DEFAULT_PRIORITY: &str = "high";

/// The word for adaptive interrupt moderation.
pub const ADAPTIVE: &str = "adaptive";

const BOOL_CHOICES: &[&str] = &["on", "off"];

impl PropType {
    /// The accepted values in dladm's POSSIBLE-column style:
    /// "68-9710", "on,off", "up,down,unknown", or "--" for free text.
    pub fn possible(&self) -> String {
        match self {
            PropType::Uint { min, max, .. } => format!("{min}-{max}"),
            PropType::Moderation { max, .. } => format!("{ADAPTIVE},0-{max}"),
            PropType::Bool => BOOL_CHOICES.join(","),
            PropType::Protection => crate::protect::PROTECTIONS.join(","),
            PropType::IpList | PropType::CidList => "--".to_owned(),
            PropType::Enum(choices) => choices.join(","),
            PropType::Text | PropType::Bandwidth { .. } => "--".to_owned(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            PropType::Uint { .. } => "an unsigned integer",
            PropType::Moderation { .. } => "adaptive or an unsigned integer",
            PropType::Bool => "on/off",
            PropType::Enum(_) | PropType::Text => "text",
            PropType::Bandwidth { .. } => "a bandwidth",
            PropType::Protection => "a list of protections",
            PropType::IpList => "a list of IP addresses",
            PropType::CidList => "a list of DHCP client identifiers",
        }
    }
}

/// A property value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PropValue {
    /// An unsigned integer (for [`PropType::Uint`]).
    Uint(u64),
    /// A boolean (for [`PropType::Bool`]), shown "on" / "off".
    Bool(bool),
    /// Text (for [`PropType::Enum`] and [`PropType::Text`]).
    Text(String),
    /// Adaptive interrupt moderation (for [`PropType::Moderation`]),
    /// shown "adaptive".
    Adaptive,
    /// A bandwidth in bits per second (for [`PropType::Bandwidth`]), shown
    /// in Mb/s as dladm shows `maxbw`: `100`, `1000`, `1.5`.
    Bandwidth(u64),
    /// Link protections (for [`PropType::Protection`]), shown
    /// comma-separated.
    Protection(Protection),
    /// IP addresses and prefixes (for [`PropType::IpList`]), shown
    /// comma-separated.
    Ips(Vec<IpPrefix>),
    /// DHCP client identifiers (for [`PropType::CidList`]), shown
    /// comma-separated as written.
    Cids(Vec<ClientId>),
}

impl PropValue {
    /// The integer, if this is a `Uint`.
    pub fn as_uint(&self) -> Option<u64> {
        match self {
            PropValue::Uint(v) => Some(*v),
            _ => None,
        }
    }

    /// The boolean, if this is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            PropValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The text, if this is a `Text`.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            PropValue::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for PropValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropValue::Uint(v) => fmt::Display::fmt(v, f),
            PropValue::Bool(true) => f.pad("on"),
            PropValue::Bool(false) => f.pad("off"),
            PropValue::Text(s) => f.pad(s),
            PropValue::Adaptive => f.pad(ADAPTIVE),
            PropValue::Bandwidth(bps) => {
                let (m, frac) = (bps / 1_000_000, bps % 1_000_000);
                if frac == 0 {
                    f.pad(&m.to_string())
                } else {
                    let frac = format!("{frac:06}");
                    f.pad(&format!("{m}.{}", frac.trim_end_matches('0')))
                }
            }
            PropValue::Protection(p) => fmt::Display::fmt(p, f),
            PropValue::Ips(v) => f.pad(&show_list(v)),
            PropValue::Cids(v) => f.pad(&show_list(v)),
        }
    }
}

/// Whether a property can be set, shown as dladm's PERM column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Perm {
    /// Settable: shown "rw".
    ReadWrite,
    /// Reported only: shown "r-".
    ReadOnly,
}

impl Perm {
    /// "rw" or "r-".
    pub fn as_str(self) -> &'static str {
        match self {
            Perm::ReadWrite => "rw",
            Perm::ReadOnly => "r-",
        }
    }
}

impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why a property name, value or assignment list was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropError {
    /// No property has this name.
    #[error("unknown link property {name:?}")]
    UnknownProp {
        /// The rejected name.
        name: String,
    },
    /// The property is read-only and cannot be set.
    #[error("link property \"{prop}\" is read-only")]
    ReadOnly {
        /// The property.
        prop: PropName,
    },
    /// A numeric value is outside the property's range.
    #[error("link property \"{prop}\": value {value:?} is out of range {min}-{max}")]
    OutOfRange {
        /// The property.
        prop: PropName,
        /// The rejected value, as given.
        value: String,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// A numeric property was given something that is not a decimal number.
    #[error("link property \"{prop}\": value {value:?} is not a decimal number")]
    NotANumber {
        /// The property.
        prop: PropName,
        /// The rejected value.
        value: String,
    },
    /// A bandwidth property was given something that is not one.
    #[error(
        "link property \"{prop}\": value {value:?} is not a bandwidth (a number with K, M or G, e.g. 100M or 1G; Mb/s without one)"
    )]
    NotABandwidth {
        /// The property.
        prop: PropName,
        /// The rejected value.
        value: String,
    },
    /// A boolean or enumerated property was given a word it does not accept.
    #[error("link property \"{prop}\": value {value:?} is not one of {}", choices.join(", "))]
    BadChoice {
        /// The property.
        prop: PropName,
        /// The rejected value.
        value: String,
        /// The accepted values.
        choices: &'static [&'static str],
    },
    /// The property does not exist on links of this class.
    #[error("link property \"{prop}\" does not apply to {class} links")]
    NotApplicable {
        /// The property.
        prop: PropName,
        /// The class of the link it was used on.
        class: LinkClass,
    },
    /// A typed value has the wrong type for the property.
    #[error("link property \"{prop}\": value {value:?} has the wrong type, expected {expected}")]
    WrongType {
        /// The property.
        prop: PropName,
        /// The rejected value.
        value: PropValue,
        /// What the property takes, e.g. "an unsigned integer".
        expected: &'static str,
    },
    /// An item of a `-p` assignment list has no `=`.
    #[error("property assignment {item:?}: expected NAME=VALUE")]
    MissingEquals {
        /// The rejected item.
        item: String,
    },
    /// A property appears twice in one `-p` list.
    #[error("link property \"{prop}\" given more than once")]
    Duplicate {
        /// The repeated property.
        prop: PropName,
    },
    /// The `-p` list is empty.
    #[error("empty property list")]
    Empty,
    /// A list property's value was refused.
    #[error("link property \"{prop}\": {error}")]
    BadList {
        /// The property.
        prop: PropName,
        /// What was wrong with it.
        error: ProtectError,
    },
}

/// The static specification of one link property: one row of the table
/// returned by [`PropSpec::all`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PropSpec {
    /// The property.
    pub name: PropName,
    /// Its value type, with range or choices.
    pub ty: PropType,
    /// Its default; `None` when it has no static default (read-only values,
    /// and `rxrings`/`txrings`, which the driver chooses at runtime).
    pub default: Option<PropValue>,
    /// Whether it can be set.
    pub perm: Perm,
    /// The link classes it applies to.
    pub classes: &'static [LinkClass],
    /// One-line description for help output.
    pub description: &'static str,
}

const ALL_CLASSES: &[LinkClass] = &LinkClass::ALL;
const PHYS: &[LinkClass] = &[LinkClass::Phys];
const VNIC: &[LinkClass] = &[LinkClass::Vnic];
const PHYS_VNIC: &[LinkClass] = &[LinkClass::Phys, LinkClass::Vnic];
const PHYS_AGGR: &[LinkClass] = &[LinkClass::Phys, LinkClass::Aggr];
const PHYS_AGGR_VNIC: &[LinkClass] = &[LinkClass::Phys, LinkClass::Aggr, LinkClass::Vnic];
const RINGS: PropType = PropType::Uint { min: 0, max: 384, unit: "" };

/// Builds the property table: one entry of [`SPECS`] a property.
macro_rules! specs {
    ($($name:ident $perm:ident $classes:expr, $ty:expr, $default:expr, $desc:literal;)*) => {
        [$(PropSpec {
            name: PropName::$name,
            ty: {
                #[allow(unused_imports)]
                use PropType::*;
                $ty
            },
            default: $default,
            perm: specs!(@$perm),
            classes: $classes,
            description: $desc,
        },)*]
    };
    (@rw) => { Perm::ReadWrite };
    (@ro) => { Perm::ReadOnly };
}

/// The property table, indexed by `PropName as usize`. Each entry: the
/// name, `rw` or `ro`, the link classes it applies to, its value type
/// (a [`PropType`]), its default, and its one-line description.
static SPECS: [PropSpec; 23] = specs![
    // The widest any link takes (a kernel device's 65535); each
    // link's own range is its ports' (`View::mtu_range`).
    Mtu rw ALL_CLASSES, Uint { min: 68, max: 65535, unit: "bytes" }, Some(PropValue::Uint(1500)),
        "maximum transmission unit (IP payload bytes per frame)";
    RxRings rw PHYS_VNIC, RINGS, None,
        "dedicated RX rings; 0 = none, share the default group (dladm \"sw\")";
    TxRings rw PHYS_VNIC, RINGS, None,
        "dedicated TX rings; 0 = none, share the default group (dladm \"sw\")";
    RxRingsEffective ro PHYS_VNIC, RINGS, None,
        "RX rings the link is using now";
    TxRingsEffective ro PHYS_VNIC, RINGS, None,
        "TX rings the link is using now";
    RxRingsAvailable ro PHYS_VNIC, RINGS, None,
        "RX rings that can still be given to links";
    TxRingsAvailable ro PHYS_VNIC, RINGS, None,
        "TX rings that can still be given to links";
    XmitBatch rw PHYS_AGGR, Bool, Some(PropValue::Bool(true)),
        "batch TX doorbell writes (one MMIO write per burst, not per frame)";
    // Adaptive; Linux atl1c's fixed default (hw->rx_imt = 200) is the
    // seed's "before", still settable.
    RxImt rw PHYS, Moderation { max: 65535, unit: "2us" }, Some(PropValue::Adaptive),
        "RX interrupt moderation: adaptive, or a fixed timer in 2 us units (atl1c-class NICs only)";
    TxImt rw PHYS, Uint { min: 0, max: 65535, unit: "2us" }, Some(PropValue::Uint(1000)),
        "TX interrupt moderation timer in 2 us units (atl1c-class NICs only)";
    Itr rw PHYS, Moderation { max: 8160, unit: "us" }, Some(PropValue::Adaptive),
        "interrupt throttle per vector: adaptive, or a fixed interval in us (i40e-class NICs only)";
    State ro ALL_CLASSES, Enum(&["up", "down", "unknown"]), None,
        "operational link state";
    Speed ro ALL_CLASSES, Uint { min: 0, max: u64::MAX, unit: "Mb/s" }, None,
        "link speed in Mb/s";
    Duplex ro ALL_CLASSES, Enum(&["full", "half", "unknown"]), None,
        "link duplex";
    Tso rw PHYS_AGGR, Bool, Some(PropValue::Bool(true)),
        "TCP segmentation offload: the kernel hands over 64 KiB superframes, the NIC cuts them (needs tx-csum; i40e-class)";
    TxCsum rw PHYS_AGGR, Bool, Some(PropValue::Bool(true)),
        "transmit checksum offload: the NIC fills in TCP/UDP checksums";
    RxCsum rw PHYS_AGGR, Bool, Some(PropValue::Bool(true)),
        "receive checksum offload: the NIC verifies TCP/UDP checksums and says so";
    // dladm's lower bound (1.2 Mb/s) up to 400 Gb/s.
    Maxbw rw PHYS_AGGR_VNIC, Bandwidth { min: 1_200_000, max: 400_000_000_000 }, None,
        "the most the link sends, in Mb/s (e.g. 100M, 1G); none when unset";
    // `high` (`DEFAULT_PRIORITY`: text has no constant PropValue).
    Priority rw PHYS_AGGR_VNIC, Enum(&PRIORITIES), None,
        "the link's claim on its port when the port is saturated: a higher priority keeps its rate (over an etherstub: its datapath thread's share of the CPU)";
    Zone rw VNIC, Text, None,
        "the zone (network namespace: a name under /run/netns, or a path) its IP interface lives in; none: netadmd's own";
    Protection rw VNIC, Protection, None,
        "what the VNIC may not forge: mac-nospoof (source MAC), ip-nospoof (IP/ARP senders), dhcp-nospoof (DHCP client ids, no DHCP server), restricted (only IPv4, IPv6, ARP)";
    AllowedIps rw VNIC, IpList, None,
        "the IP senders ip-nospoof lets through (addresses or prefixes); unset: the interface's addresses, DHCP leases and link-local address";
    AllowedDhcpCids rw VNIC, CidList, None,
        "the DHCP client ids dhcp-nospoof lets through (0xHEX, a DUID, or text); unset: the VNIC's MAC";
];

impl PropSpec {
    /// Every property's specification, in [`PropName::ALL`] order.
    pub fn all() -> &'static [PropSpec] {
        &SPECS
    }

    /// Whether the property exists on links of `class`.
    pub fn applies_to(&self, class: LinkClass) -> bool {
        self.classes.contains(&class)
    }

    /// `Err(NotApplicable)` unless the property exists on links of `class`.
    pub fn check_class(&self, class: LinkClass) -> Result<(), PropError> {
        if self.applies_to(class) {
            Ok(())
        } else {
            Err(PropError::NotApplicable { prop: self.name, class })
        }
    }

    /// The POSSIBLE column: "--" for read-only properties, else
    /// [`PropType::possible`].
    pub fn possible(&self) -> String {
        match self.perm {
            Perm::ReadOnly => "--".to_owned(),
            Perm::ReadWrite => self.ty.possible(),
        }
    }

    /// Parses a value an operator wants to set. Rejects read-only properties;
    /// integers are plain decimal (no sign, unit or whitespace); booleans are
    /// "on"/"off"; enumerated words must match exactly.
    pub fn parse_value(&self, s: &str) -> Result<PropValue, PropError> {
        if self.perm == Perm::ReadOnly {
            return Err(PropError::ReadOnly { prop: self.name });
        }
        let prop = self.name;
        match self.ty {
            PropType::Uint { min, max, .. } => {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(PropError::NotANumber { prop, value: s.to_owned() });
                }
                match s.parse::<u64>() {
                    Ok(v) if (min..=max).contains(&v) => Ok(PropValue::Uint(v)),
                    _ => Err(PropError::OutOfRange { prop, value: s.to_owned(), min, max }),
                }
            }
            PropType::Bool => match s {
                "on" => Ok(PropValue::Bool(true)),
                "off" => Ok(PropValue::Bool(false)),
                _ => Err(PropError::BadChoice { prop, value: s.to_owned(), choices: BOOL_CHOICES }),
            },
            PropType::Enum(choices) => {
                if choices.contains(&s) {
                    Ok(PropValue::Text(s.to_owned()))
                } else {
                    Err(PropError::BadChoice { prop, value: s.to_owned(), choices })
                }
            }
            PropType::Text => Ok(PropValue::Text(s.to_owned())),
            PropType::Bandwidth { min, max } => match parse_bandwidth(s) {
                Some(v) if (min..=max).contains(&v) => Ok(PropValue::Bandwidth(v)),
                Some(_) => Err(PropError::OutOfRange { prop, value: s.to_owned(), min, max }),
                None => Err(PropError::NotABandwidth { prop, value: s.to_owned() }),
            },
            PropType::Protection => s
                .parse()
                .map(PropValue::Protection)
                .map_err(|error| PropError::BadList { prop, error }),
            PropType::IpList => parse_list(s)
                .map(PropValue::Ips)
                .map_err(|error| PropError::BadList { prop, error }),
            PropType::CidList => parse_list(s)
                .map(PropValue::Cids)
                .map_err(|error| PropError::BadList { prop, error }),
            PropType::Moderation { max, .. } => {
                if s == ADAPTIVE {
                    return Ok(PropValue::Adaptive);
                }
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(PropError::NotANumber { prop, value: s.to_owned() });
                }
                match s.parse::<u64>() {
                    Ok(v) if v <= max => Ok(PropValue::Uint(v)),
                    _ => Err(PropError::OutOfRange { prop, value: s.to_owned(), min: 0, max }),
                }
            }
        }
    }

    /// Parses a value to set on a link of `class`: [`Self::check_class`]
    /// then [`Self::parse_value`].
    pub fn parse_value_for(&self, class: LinkClass, s: &str) -> Result<PropValue, PropError> {
        self.check_class(class)?;
        self.parse_value(s)
    }

    /// Checks an already typed value (e.g. from D-Bus, or reported by a
    /// driver) against the type, range and choices. Ignores the permission.
    pub fn check_value(&self, v: &PropValue) -> Result<(), PropError> {
        let prop = self.name;
        match (&self.ty, v) {
            (PropType::Uint { min, max, .. }, PropValue::Uint(n)) => {
                if (*min..=*max).contains(n) {
                    Ok(())
                } else {
                    Err(PropError::OutOfRange { prop, value: n.to_string(), min: *min, max: *max })
                }
            }
            (PropType::Bool, PropValue::Bool(_))
            | (PropType::Protection, PropValue::Protection(_))
            | (PropType::Text, PropValue::Text(_))
            | (PropType::Moderation { .. }, PropValue::Adaptive) => Ok(()),
            (PropType::Moderation { max, .. }, PropValue::Uint(n)) => {
                if n <= max {
                    Ok(())
                } else {
                    Err(PropError::OutOfRange { prop, value: n.to_string(), min: 0, max: *max })
                }
            }
            (PropType::Bandwidth { min, max }, PropValue::Bandwidth(n)) => {
                if (*min..=*max).contains(n) {
                    Ok(())
                } else {
                    Err(PropError::OutOfRange { prop, value: n.to_string(), min: *min, max: *max })
                }
            }
            (PropType::Enum(choices), PropValue::Text(s)) => {
                if choices.contains(&s.as_str()) {
                    Ok(())
                } else {
                    Err(PropError::BadChoice { prop, value: s.clone(), choices })
                }
            }
            (PropType::IpList, PropValue::Ips(l)) if l.len() > crate::protect::MAX_LIST => {
                Err(PropError::BadList { prop, error: ProtectError::TooMany { count: l.len() } })
            }
            (PropType::CidList, PropValue::Cids(l)) if l.len() > crate::protect::MAX_LIST => {
                Err(PropError::BadList { prop, error: ProtectError::TooMany { count: l.len() } })
            }
            (PropType::IpList, PropValue::Ips(_)) | (PropType::CidList, PropValue::Cids(_)) => {
                Ok(())
            }
            (ty, _) => Err(PropError::WrongType { prop, value: v.clone(), expected: ty.kind() }),
        }
    }
}

/// Bits per second of a bandwidth as dladm writes it (see
/// [`PropType::Bandwidth`]): digits, an optional `.` and up to six
/// decimals, an optional `K`, `M` or `G` (either case).
pub fn parse_bandwidth(s: &str) -> Option<u64> {
    let (num, scale) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1_000u64),
        b'm' | b'M' => (&s[..s.len() - 1], 1_000_000),
        b'g' | b'G' => (&s[..s.len() - 1], 1_000_000_000),
        _ => (s, 1_000_000),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || frac.len() > 6 || num.ends_with('.') {
        return None;
    }
    let whole = int.parse::<u64>().ok()?.checked_mul(scale)?;
    let frac_v = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * scale / 10u64.pow(frac.len() as u32)
    };
    whole.checked_add(frac_v)
}

/// Parses a `-p` assignment list such as `mtu=9000,xmit-batch=off`.
///
/// Items are separated by `,` and split at the first `=`, as dladm reads
/// them: an item without `=` is one more value of the property before it
/// (`protection=mac-nospoof,ip-nospoof`). No whitespace is trimmed.
/// Rejects an empty list, a first item without `=`, unknown or repeated
/// properties, read-only properties and invalid values. Does not check
/// link class (see [`PropSpec::check_class`]). Order is preserved.
pub fn parse_assignments(s: &str) -> Result<Vec<(PropName, PropValue)>, PropError> {
    if s.is_empty() {
        return Err(PropError::Empty);
    }
    let mut seen = HashSet::new();
    split_assignments(s)?
        .into_iter()
        .map(|(name, value)| {
            let prop: PropName = name.parse()?;
            if !seen.insert(prop) {
                return Err(PropError::Duplicate { prop });
            }
            Ok((prop, prop.spec().parse_value(&value)?))
        })
        .collect()
}

/// Splits a `-p` list into (name, value) as dladm does: at each item with
/// an `=`; an item without one continues the value before it.
pub fn split_assignments(s: &str) -> Result<Vec<(&str, String)>, PropError> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for item in s.split(',') {
        match (item.split_once('='), out.last_mut()) {
            (Some((name, value)), _) => out.push((name, value.to_owned())),
            (None, Some((_, value))) if !item.is_empty() => {
                value.push(',');
                value.push_str(item);
            }
            (None, _) => return Err(PropError::MissingEquals { item: item.to_owned() }),
        }
    }
    Ok(out)
}

/// Parses a `-p` name list such as `mtu,itr` (for `show-linkprop` and
/// `reset-linkprop`). Rejects an empty list, unknown and repeated names.
pub fn parse_prop_names(s: &str) -> Result<Vec<PropName>, PropError> {
    if s.is_empty() {
        return Err(PropError::Empty);
    }
    let mut seen = HashSet::new();
    s.split(',')
        .map(|name| {
            let prop: PropName = name.parse()?;
            if !seen.insert(prop) {
                return Err(PropError::Duplicate { prop });
            }
            Ok(prop)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use PropName::*;

    fn s(x: &str) -> String {
        x.to_owned()
    }

    #[test]
    fn names_round_trip_and_table_is_indexed_by_name() {
        assert_eq!(PropSpec::all().len(), PropName::ALL.len());
        for (i, p) in PropName::ALL.into_iter().enumerate() {
            assert_eq!(p as usize, i);
            assert_eq!(p.spec().name, p, "SPECS out of order at {p}");
            assert_eq!(spec(p), p.spec());
            assert_eq!(p.to_string().parse::<PropName>(), Ok(p));
        }
        let shown: Vec<String> = PropName::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "mtu",
                "rxrings",
                "txrings",
                "rxrings-effective",
                "txrings-effective",
                "rxrings-available",
                "txrings-available",
                "xmit-batch",
                "rx-imt",
                "tx-imt",
                "itr",
                "state",
                "speed",
                "duplex",
                "tso",
                "tx-csum",
                "rx-csum",
                "maxbw",
                "priority",
                "zone",
                "protection",
                "allowed-ips",
                "allowed-dhcp-cids"
            ]
        );
        for bad in ["", "MTU", "mtu ", "xmit_batch", "rings"] {
            assert_eq!(bad.parse::<PropName>(), Err(PropError::UnknownProp { name: s(bad) }));
        }
    }

    #[test]
    fn defaults_are_valid_and_only_on_writable_props() {
        for sp in PropSpec::all() {
            if let Some(d) = &sp.default {
                assert_eq!(sp.perm, Perm::ReadWrite, "{}", sp.name);
                sp.check_value(d).unwrap();
                assert_eq!(sp.parse_value(&d.to_string()).as_ref(), Ok(d));
            }
            assert!(!sp.classes.is_empty());
            assert!(!sp.description.is_empty());
        }
    }

    #[test]
    fn table_contents() {
        let t = |p: PropName| p.spec();
        assert_eq!(t(Mtu).default, Some(PropValue::Uint(1500)));
        assert_eq!(t(Mtu).possible(), "68-65535");
        assert_eq!(t(XmitBatch).default, Some(PropValue::Bool(true)));
        assert_eq!(t(XmitBatch).possible(), "on,off");
        assert_eq!(t(RxImt).default, Some(PropValue::Adaptive));
        assert_eq!(t(TxImt).default, Some(PropValue::Uint(1000)));
        assert_eq!(t(Itr).default, Some(PropValue::Adaptive));
        assert_eq!(t(Itr).possible(), "adaptive,0-8160");
        assert_eq!(PropValue::Adaptive.to_string(), "adaptive");
        assert_eq!(t(RxRings).default, None);
        assert_eq!(t(Speed).possible(), "--");
        assert_eq!(t(State).ty.possible(), "up,down,unknown");
        for p in [
            RxRingsEffective,
            TxRingsEffective,
            RxRingsAvailable,
            TxRingsAvailable,
            State,
            Speed,
            Duplex,
        ] {
            assert_eq!(t(p).perm, Perm::ReadOnly, "{p}");
            assert_eq!(t(p).perm.to_string(), "r-");
        }
        assert_eq!(t(Mtu).perm.to_string(), "rw");
        use LinkClass::*;
        let applies = |p: PropName| -> Vec<LinkClass> {
            LinkClass::ALL.into_iter().filter(|&c| t(p).applies_to(c)).collect()
        };
        assert_eq!(applies(Mtu), [Phys, Aggr, Vnic, Etherstub]);
        assert_eq!(applies(RxRings), [Phys, Vnic]);
        assert_eq!(applies(XmitBatch), [Phys, Aggr]);
        assert_eq!(applies(Itr), [Phys]);
        assert_eq!(applies(RxImt), [Phys]);
        assert_eq!(applies(Speed), [Phys, Aggr, Vnic, Etherstub]);
    }

    #[test]
    fn parse_value_accepts() {
        let cases: &[(PropName, &str, PropValue)] = &[
            (Mtu, "68", PropValue::Uint(68)),
            (Mtu, "65535", PropValue::Uint(65535)),
            (Mtu, "09000", PropValue::Uint(9000)),
            (RxRings, "0", PropValue::Uint(0)),
            (TxRings, "384", PropValue::Uint(384)),
            (XmitBatch, "on", PropValue::Bool(true)),
            (XmitBatch, "off", PropValue::Bool(false)),
            (RxImt, "0", PropValue::Uint(0)),
            (TxImt, "65535", PropValue::Uint(65535)),
            (Itr, "8160", PropValue::Uint(8160)),
            (Itr, "adaptive", PropValue::Adaptive),
            (RxImt, "adaptive", PropValue::Adaptive),
        ];
        for (p, input, want) in cases {
            assert_eq!(p.spec().parse_value(input).as_ref(), Ok(want), "{p}={input}");
        }
    }

    #[test]
    fn bandwidths_as_dladm_writes_them() {
        for (input, bps) in [
            ("100M", 100_000_000),
            ("1G", 1_000_000_000),
            ("1g", 1_000_000_000),
            ("1500K", 1_500_000),
            ("100", 100_000_000),
            ("1.5", 1_500_000),
            ("2.5G", 2_500_000_000),
        ] {
            assert_eq!(Maxbw.spec().parse_value(input), Ok(PropValue::Bandwidth(bps)), "{input}");
        }
        assert_eq!(PropValue::Bandwidth(100_000_000).to_string(), "100");
        assert_eq!(PropValue::Bandwidth(1_500_000).to_string(), "1.5");
        for bad in ["", "M", "1.M", "-5M", "1T", "1.2.3", "1.0000001", "10 M"] {
            assert_eq!(
                Maxbw.spec().parse_value(bad),
                Err(PropError::NotABandwidth { prop: Maxbw, value: s(bad) }),
                "{bad}"
            );
        }
        let range = |v: &str| PropError::OutOfRange {
            prop: Maxbw,
            value: s(v),
            min: 1_200_000,
            max: 400_000_000_000,
        };
        assert_eq!(Maxbw.spec().parse_value("1M"), Err(range("1M")));
        assert_eq!(Maxbw.spec().parse_value("401G"), Err(range("401G")));
        assert_eq!(Priority.spec().parse_value("low"), Ok(PropValue::Text(s("low"))));
        assert!(matches!(Priority.spec().parse_value("urgent"), Err(PropError::BadChoice { .. })));
        assert!(Maxbw.spec().check_class(LinkClass::Etherstub).is_err());
    }

    #[test]
    fn parse_value_rejects() {
        let range =
            |prop, value: &str, min, max| PropError::OutOfRange { prop, value: s(value), min, max };
        let nan = |prop, value: &str| PropError::NotANumber { prop, value: s(value) };
        let cases: Vec<(PropName, &str, PropError)> = vec![
            (Mtu, "67", range(Mtu, "67", 68, 65535)),
            (Mtu, "65536", range(Mtu, "65536", 68, 65535)),
            (Mtu, "0", range(Mtu, "0", 68, 65535)),
            (Mtu, "99999999999999999999999", range(Mtu, "99999999999999999999999", 68, 65535)),
            (RxRings, "385", range(RxRings, "385", 0, 384)),
            (TxImt, "65536", range(TxImt, "65536", 0, 65535)),
            (Itr, "8161", range(Itr, "8161", 0, 8160)),
            (Itr, "Adaptive", nan(Itr, "Adaptive")),
            (TxImt, "adaptive", nan(TxImt, "adaptive")),
            (Mtu, "", nan(Mtu, "")),
            (Mtu, "9k", nan(Mtu, "9k")),
            (Mtu, "-1", nan(Mtu, "-1")),
            (Mtu, "+1500", nan(Mtu, "+1500")),
            (Mtu, " 1500", nan(Mtu, " 1500")),
            (RxRings, "sw", nan(RxRings, "sw")),
            (
                XmitBatch,
                "true",
                PropError::BadChoice { prop: XmitBatch, value: s("true"), choices: &["on", "off"] },
            ),
            (
                XmitBatch,
                "ON",
                PropError::BadChoice { prop: XmitBatch, value: s("ON"), choices: &["on", "off"] },
            ),
            (Speed, "1000", PropError::ReadOnly { prop: Speed }),
            (State, "up", PropError::ReadOnly { prop: State }),
            (RxRingsEffective, "1", PropError::ReadOnly { prop: RxRingsEffective }),
        ];
        for (p, input, want) in cases {
            assert_eq!(p.spec().parse_value(input), Err(want), "{p}={input:?}");
        }
    }

    #[test]
    fn protection_values() {
        let v = Protection.spec().parse_value_for(LinkClass::Vnic, "ip-nospoof,mac-nospoof");
        assert_eq!(v.as_ref().map(ToString::to_string).as_deref(), Ok("mac-nospoof,ip-nospoof"));
        assert!(matches!(
            Protection.spec().parse_value("spoof"),
            Err(PropError::BadList { prop: Protection, .. })
        ));
        assert_eq!(
            Protection.spec().check_class(LinkClass::Phys),
            Err(PropError::NotApplicable { prop: Protection, class: LinkClass::Phys })
        );
        let ips = AllowedIps.spec().parse_value("10.0.0.2,2001:db8::/64").unwrap();
        assert_eq!(ips.to_string(), "10.0.0.2,2001:db8::/64");
        assert_eq!(AllowedIps.spec().parse_value(&ips.to_string()), Ok(ips.clone()));
        assert_eq!(AllowedIps.spec().check_value(&ips), Ok(()));
        let cids = AllowedDhcpCids.spec().parse_value("0x0102,tenant").unwrap();
        assert_eq!(cids.to_string(), "0x0102,tenant");
        assert_eq!(t(Protection).possible(), "mac-nospoof,ip-nospoof,dhcp-nospoof,restricted");
        assert_eq!(
            m(AllowedIps.spec().parse_value("10.0.0.1/8").unwrap_err()),
            r#"link property "allowed-ips": "10.0.0.1/8" has host bits set past /8; write 10.0.0.0/8"#
        );
    }

    fn t(p: PropName) -> &'static PropSpec {
        p.spec()
    }

    fn m(e: PropError) -> String {
        e.to_string()
    }

    #[test]
    fn class_checks() {
        assert_eq!(
            Itr.spec().parse_value_for(LinkClass::Aggr, "50"),
            Err(PropError::NotApplicable { prop: Itr, class: LinkClass::Aggr })
        );
        assert_eq!(
            XmitBatch.spec().check_class(LinkClass::Vnic),
            Err(PropError::NotApplicable { prop: XmitBatch, class: LinkClass::Vnic })
        );
        assert_eq!(Mtu.spec().parse_value_for(LinkClass::Vnic, "9000"), Ok(PropValue::Uint(9000)));
    }

    #[test]
    fn check_value_typed() {
        assert_eq!(Speed.spec().check_value(&PropValue::Uint(10_000)), Ok(()));
        assert_eq!(State.spec().check_value(&PropValue::Text(s("up"))), Ok(()));
        assert_eq!(
            Duplex.spec().check_value(&PropValue::Text(s("quarter"))),
            Err(PropError::BadChoice {
                prop: Duplex,
                value: s("quarter"),
                choices: &["full", "half", "unknown"],
            })
        );
        assert_eq!(
            Mtu.spec().check_value(&PropValue::Uint(70_000)),
            Err(PropError::OutOfRange { prop: Mtu, value: s("70000"), min: 68, max: 65535 })
        );
        assert_eq!(
            Mtu.spec().check_value(&PropValue::Bool(true)),
            Err(PropError::WrongType {
                prop: Mtu,
                value: PropValue::Bool(true),
                expected: "an unsigned integer"
            })
        );
    }

    #[test]
    fn value_display() {
        assert_eq!(PropValue::Uint(9000).to_string(), "9000");
        assert_eq!(PropValue::Bool(true).to_string(), "on");
        assert_eq!(PropValue::Bool(false).to_string(), "off");
        assert_eq!(PropValue::Text(s("up")).to_string(), "up");
        assert_eq!(PropValue::Uint(7).as_uint(), Some(7));
        assert_eq!(PropValue::Bool(true).as_bool(), Some(true));
        assert_eq!(PropValue::Text(s("x")).as_text(), Some("x"));
        assert_eq!(PropValue::Uint(7).as_text(), None);
    }

    #[test]
    fn assignments() {
        assert_eq!(
            parse_assignments("mtu=9000,xmit-batch=off"),
            Ok(vec![(Mtu, PropValue::Uint(9000)), (XmitBatch, PropValue::Bool(false))])
        );
        assert_eq!(parse_assignments("itr=0"), Ok(vec![(Itr, PropValue::Uint(0))]));
        let both = parse_assignments("protection=mac-nospoof,ip-nospoof,mtu=1500").unwrap();
        assert_eq!(both[0].1.to_string(), "mac-nospoof,ip-nospoof");
        assert_eq!(both[1], (Mtu, PropValue::Uint(1500)));
        let cases = [
            ("", PropError::Empty),
            ("mtu", PropError::MissingEquals { item: s("mtu") }),
            ("mtu=9000,", PropError::MissingEquals { item: s("") }),
            ("mtu=9000,1500", PropError::NotANumber { prop: Mtu, value: s("9000,1500") }),
            ("mtu=9000,mtu=1500", PropError::Duplicate { prop: Mtu }),
            ("speed=1000", PropError::ReadOnly { prop: Speed }),
            ("foo=1", PropError::UnknownProp { name: s("foo") }),
            ("=1", PropError::UnknownProp { name: s("") }),
            ("mtu=1=2", PropError::NotANumber { prop: Mtu, value: s("1=2") }),
            ("mtu =9000", PropError::UnknownProp { name: s("mtu ") }),
        ];
        for (input, want) in cases {
            assert_eq!(parse_assignments(input), Err(want), "{input:?}");
        }
    }

    #[test]
    fn name_lists() {
        assert_eq!(parse_prop_names("mtu,itr"), Ok(vec![Mtu, Itr]));
        assert_eq!(parse_prop_names("speed"), Ok(vec![Speed]));
        assert_eq!(parse_prop_names(""), Err(PropError::Empty));
        assert_eq!(parse_prop_names("mtu,mtu"), Err(PropError::Duplicate { prop: Mtu }));
        assert_eq!(parse_prop_names("mtu,"), Err(PropError::UnknownProp { name: s("") }));
    }

    #[test]
    fn messages() {
        let m = |e: PropError| e.to_string();
        assert_eq!(
            m(Mtu.spec().parse_value("20").unwrap_err()),
            r#"link property "mtu": value "20" is out of range 68-65535"#
        );
        assert_eq!(
            m(XmitBatch.spec().parse_value("yes").unwrap_err()),
            r#"link property "xmit-batch": value "yes" is not one of on, off"#
        );
        assert_eq!(
            m(Speed.spec().parse_value("1").unwrap_err()),
            r#"link property "speed" is read-only"#
        );
        assert_eq!(
            m(Itr.spec().check_class(LinkClass::Vnic).unwrap_err()),
            r#"link property "itr" does not apply to vnic links"#
        );
        assert_eq!(m("bogus".parse::<PropName>().unwrap_err()), r#"unknown link property "bogus""#);
        assert_eq!(
            m(parse_assignments("mtu").unwrap_err()),
            r#"property assignment "mtu": expected NAME=VALUE"#
        );
    }
}

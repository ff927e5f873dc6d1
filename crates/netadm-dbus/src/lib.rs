//! The D-Bus contract between `netadmd` and its clients.
//!
//! This crate depends on nothing from the daemon: it holds the bus and
//! object names, the typed structures that cross the bus, the typed errors
//! (`org.netadm.Netadm1.Error.*`), the manager interface declared once
//! ([`interface!`], see [`mod@interface`]) and the client proxy made from
//! it. The daemon implements the interface from the same declaration;
//! `netadm` and any other client use [`NetadmProxy`].
//!
//! Arguments are typed D-Bus values. Link property values travel as strings
//! in `a{ss}` because dladm's properties are heterogeneous and their parser
//! (with its range and choice errors) lives in the daemon's model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zbus::zvariant::{OwnedObjectPath, Type};

pub mod interface;

/// Well-known bus name.
pub const BUS_NAME: &str = "org.netadm.Netadm1";
/// Root object path.
pub const ROOT_PATH: &str = "/org/netadm/Netadm1";
/// Manager interface at [`ROOT_PATH`].
pub const INTERFACE: &str = "org.netadm.Netadm1";
/// Interface of per-link objects under [`LINKS_PATH`].
pub const LINK_INTERFACE: &str = "org.netadm.Netadm1.Link";
/// Parent path of per-link objects.
pub const LINKS_PATH: &str = "/org/netadm/Netadm1/links";
/// Prefix of every error name.
pub const ERROR_PREFIX: &str = "org.netadm.Netadm1.Error";

/// The object path of link `name` (link names are `[A-Za-z0-9_]`, valid
/// path elements as they are).
pub fn link_path(name: &str) -> OwnedObjectPath {
    OwnedObjectPath::try_from(format!("{LINKS_PATH}/{name}")).expect("link names are path-safe")
}

/// Errors the daemon answers with. The D-Bus error name is
/// `org.netadm.Netadm1.Error.<Variant>`; the message names what was wrong.
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.netadm.Netadm1.Error")]
pub enum Error {
    /// A transport or protocol error.
    #[zbus(error)]
    ZBus(zbus::Error),
    /// No such link, interface, address or property.
    NotFound(String),
    /// The object already exists.
    Exists(String),
    /// A name breaks the naming rules.
    InvalidName(String),
    /// An argument is malformed or inconsistent.
    InvalidArgument(String),
    /// A property value is out of range or not one of the choices.
    InvalidValue(String),
    /// The property is read-only or does not apply to this link.
    NotSupported(String),
    /// The object is in use (a port in an aggregation, a link with VNICs
    /// or an IP interface over it).
    Busy(String),
    /// The caller may not change the network.
    AccessDenied(String),
    /// The hardware refused or did not answer; nothing was changed.
    Hardware(String),
    /// The configuration could not be persisted; nothing was changed.
    Persistence(String),
    /// A bug: the daemon's state is not what it expected.
    Internal(String),
}

impl Error {
    /// The short kind: the last component of the D-Bus error name.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ZBus(_) => "Bus",
            Self::NotFound(_) => "NotFound",
            Self::Exists(_) => "Exists",
            Self::InvalidName(_) => "InvalidName",
            Self::InvalidArgument(_) => "InvalidArgument",
            Self::InvalidValue(_) => "InvalidValue",
            Self::NotSupported(_) => "NotSupported",
            Self::Busy(_) => "Busy",
            Self::AccessDenied(_) => "AccessDenied",
            Self::Hardware(_) => "Hardware",
            Self::Persistence(_) => "Persistence",
            Self::Internal(_) => "Internal",
        }
    }

    /// The message, without the kind.
    pub fn message(&self) -> String {
        match self {
            Self::ZBus(e) => e.to_string(),
            Self::NotFound(m)
            | Self::Exists(m)
            | Self::InvalidName(m)
            | Self::InvalidArgument(m)
            | Self::InvalidValue(m)
            | Self::NotSupported(m)
            | Self::Busy(m)
            | Self::AccessDenied(m)
            | Self::Hardware(m)
            | Self::Persistence(m)
            | Self::Internal(m) => m.clone(),
        }
    }

    /// Recovers the typed error from what a client received.
    pub fn from_zbus(e: zbus::Error) -> Self {
        if let zbus::Error::MethodError(name, msg, _) = &e
            && let Some(kind) =
                name.as_str().strip_prefix(ERROR_PREFIX).and_then(|k| k.strip_prefix('.'))
        {
            let m = msg.clone().unwrap_or_default();
            return match kind {
                "NotFound" => Self::NotFound(m),
                "Exists" => Self::Exists(m),
                "InvalidName" => Self::InvalidName(m),
                "InvalidArgument" => Self::InvalidArgument(m),
                "InvalidValue" => Self::InvalidValue(m),
                "NotSupported" => Self::NotSupported(m),
                "Busy" => Self::Busy(m),
                "AccessDenied" => Self::AccessDenied(m),
                "Hardware" => Self::Hardware(m),
                "Persistence" => Self::Persistence(m),
                _ => Self::Internal(m),
            };
        }
        Self::ZBus(e)
    }
}

/// What a mutating call did and where its time went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct OpResult {
    /// The operation, e.g. `create-aggr`.
    pub op: String,
    /// Wall time in the daemon, µs.
    pub total_us: u64,
    /// Phases in order: (name, µs).
    pub phases: Vec<(String, u64)>,
    /// Counts: rings_started, rings_stopped, dma_allocated, dma_freed, ...
    pub counts: BTreeMap<String, u64>,
    /// Notes for the operator (e.g. "no kernel device was made").
    pub notes: Vec<String>,
}

/// A physical link (`show-phys`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PhysInfo {
    /// Link name.
    pub link: String,
    /// Media, e.g. `Ethernet`.
    pub media: String,
    /// `up`, `down` or `unknown`.
    pub state: String,
    /// Speed in Mb/s.
    pub speed: u64,
    /// `full`, `half` or `unknown`.
    pub duplex: String,
    /// Device (driver instance) name, e.g. `i40e0`.
    pub device: String,
    /// Driver class, `i40e` or `atl1c`.
    pub driver: String,
    /// Rings the port has.
    pub rings: u32,
    /// Rings running now.
    pub rings_started: u32,
    /// DMA bytes its rings hold.
    pub dma_bytes: u64,
}

/// A factory MAC address slot of a physical link (`show-phys -m`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PhysMacInfo {
    /// Link name.
    pub link: String,
    /// `primary` (the port's own address), or the number of a factory
    /// address a VNIC holds (`create-vnic -m factory`), from 1.
    pub slot: String,
    /// The MAC address.
    pub address: String,
    /// Whether a MAC client uses it.
    pub inuse: bool,
    /// The client using it (the link, its aggregation or a VNIC), empty
    /// when none.
    pub client: String,
}

/// Where a physical link's device is (`show-phys -L`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PhysLocInfo {
    /// Link name.
    pub link: String,
    /// Device name.
    pub device: String,
    /// Its location: a kernel port's bus address (`0000:03:00.0`); empty
    /// where none means anything (an emulated port, a virtual device).
    pub location: String,
}

/// One line of `show-ether`: what a physical link runs at (`current`),
/// can run at (`capable`), advertises (`adv`) and its peer advertises
/// (`peeradv`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct EtherInfo {
    /// Link name.
    pub link: String,
    /// `current`, `capable`, `adv` or `peeradv`.
    pub ptype: String,
    /// `up`, `down` or `unknown` (`current` only; empty otherwise).
    pub state: String,
    /// Autonegotiation: `yes`, `no`, or empty where unknown.
    pub auto: String,
    /// Speeds and duplexes, dladm's way: `40G-f`, `1G-fh,100M-fh`; empty
    /// where unknown.
    pub speed_duplex: String,
    /// Flow control: `bi`, `tx`, `rx` or `none`; empty where unknown.
    pub pause: String,
}

/// A datalink (`show-link`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct LinkInfo {
    /// Link name.
    pub link: String,
    /// `phys`, `aggr`, `vnic`, `vlan` or `etherstub`.
    pub class: String,
    /// MTU.
    pub mtu: u32,
    /// `up`, `down` or `unknown`.
    pub state: String,
    /// Links this one is built over (aggregation ports, a VNIC's link).
    pub over: Vec<String>,
    /// The aggregation this link is a port of, or empty.
    pub member_of: String,
    /// Whether it is in the persistent configuration.
    pub persistent: bool,
}

/// One port of an aggregation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct AggrPortInfo {
    /// Port link name.
    pub port: String,
    /// Port state: `attached` while its rings run, else `standby`.
    pub state: String,
    /// Port speed, Mb/s.
    pub speed: u64,
    /// LACP actor state bits (802.1AX: 0x01 active, 0x02 short timeout,
    /// 0x04 aggregatable, 0x08 sync, 0x10 collecting, 0x20 distributing,
    /// 0x40 defaulted, 0x80 expired); 0 when LACP is off.
    pub lacp: u8,
}

/// An aggregation (`show-aggr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct AggrInfo {
    /// Link name.
    pub link: String,
    /// Hash policy, e.g. `L2,L3`.
    pub policy: String,
    /// Whether the MAC address was fixed with `-u`.
    pub addr_policy: String,
    /// The aggregation's MAC address.
    pub mac: String,
    /// `off`, `active` or `passive`.
    pub lacp_mode: String,
    /// `short` or `long`.
    pub lacp_timer: String,
    /// Ports.
    pub ports: Vec<AggrPortInfo>,
}

/// A VNIC (`show-vnic`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct VnicInfo {
    /// Link name.
    pub link: String,
    /// The link it is over.
    pub over: String,
    /// Speed, Mb/s (of the link below).
    pub speed: u64,
    /// MAC address.
    pub macaddress: String,
    /// How the MAC was chosen: `auto`, `factory`, `random` or `fixed`.
    pub macaddrtype: String,
    /// VLAN id, 0 for none.
    pub vid: u16,
}

/// A VLAN link (`show-vlan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct VlanInfo {
    /// Link name.
    pub link: String,
    /// VLAN id, 1-4094.
    pub vid: u16,
    /// The link it is over.
    pub over: String,
    /// dladm's flags: `f` forced, `i` implicit; `-` where unset.
    pub flags: String,
}

/// An etherstub (`show-etherstub`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct EtherstubInfo {
    /// Link name.
    pub link: String,
    /// `netadm` (netadm's own virtual switch) or `kernel` (a Linux bridge).
    pub kind: String,
    /// The kernel bridge it is, or empty for netadm's own switch.
    pub device: String,
}

/// An etherstub as `ShowEtherstub` first published it (`a(s)`): its link
/// name — an [`EtherstubInfo`] without `kind` and `device`, which
/// `ShowEtherstubEx` adds.
pub type EtherstubInfoV1 = (String,);

impl EtherstubInfo {
    /// Its row as `ShowEtherstub` first published it.
    pub fn v1(self) -> EtherstubInfoV1 {
        (self.link,)
    }
}

/// One link property (`show-linkprop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PropInfo {
    /// Link name.
    pub link: String,
    /// Property name.
    pub property: String,
    /// `rw` or `r-`.
    pub perm: String,
    /// Current value (`--` when none).
    pub value: String,
    /// Default value (`--` when none).
    pub default: String,
    /// Possible values, e.g. `68-9710` or `on,off`.
    pub possible: String,
}

/// One IP interface property (`show-ifprop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct IfPropInfo {
    /// Interface name.
    pub ifname: String,
    /// Property name, e.g. `mtu`.
    pub property: String,
    /// Protocol: `ipv4` or `ipv6`.
    pub proto: String,
    /// `rw`.
    pub perm: String,
    /// The value the kernel has (the configured one without a kernel
    /// mirror).
    pub current: String,
    /// The persistent value, empty when none is set.
    pub persistent: String,
    /// The default value.
    pub default: String,
    /// Possible values, e.g. `68-9000` or `on,off`.
    pub possible: String,
}

/// One address property (`show-addrprop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct AddrPropInfo {
    /// Address object, `IF/TAG`.
    pub addrobj: String,
    /// Property name, e.g. `prefixlen`.
    pub property: String,
    /// `rw` or `r-`.
    pub perm: String,
    /// Its value.
    pub current: String,
    /// The persistent value when it differs from the default, else empty.
    pub persistent: String,
    /// The default value.
    pub default: String,
    /// Possible values.
    pub possible: String,
}

/// One protocol property (`show-prop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct ProtoPropInfo {
    /// Protocol: `ipv4`, `ipv6`, `tcp`.
    pub proto: String,
    /// Property name, e.g. `ttl`.
    pub property: String,
    /// `rw`.
    pub perm: String,
    /// The value the kernel has in netadmd's network namespace (the
    /// configured one without a kernel mirror).
    pub current: String,
    /// The persistent value, empty when none is set.
    pub persistent: String,
    /// The kernel's default.
    pub default: String,
    /// Possible values.
    pub possible: String,
}

/// An IP interface (`show-if`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct IfInfo {
    /// Interface name (same as its link).
    pub ifname: String,
    /// `ip`.
    pub class: String,
    /// `ok` while its link's rings run, else `down`.
    pub state: String,
    /// Flags in effect, ipadm style (e.g. `bm--------46`).
    pub current: String,
    /// Whether it is in the persistent configuration (`-46` / `--`).
    pub persistent: String,
    /// The kernel device mirroring it, or empty when none was made.
    pub kernel_device: String,
    /// How the kernel device differs from the configuration, when someone
    /// changed it behind netadm's back (state `drifted` or `missing`);
    /// empty when it does not. `RefreshIf` puts it back.
    pub drift: String,
}

/// An IP interface as `ShowIf` first published it (`a(ssssss)`): ifname,
/// class, state, current, persistent, kernel_device — an [`IfInfo`]
/// without `drift`, which `ShowIfEx` adds.
pub type IfInfoV1 = (String, String, String, String, String, String);

impl IfInfo {
    /// Its row as `ShowIf` first published it.
    pub fn v1(self) -> IfInfoV1 {
        (self.ifname, self.class, self.state, self.current, self.persistent, self.kernel_device)
    }
}

/// An address object (`show-addr`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct AddrInfo {
    /// `if/tag`.
    pub addrobj: String,
    /// `static`.
    pub r#type: String,
    /// `ok`, or `inaccessible` when its interface is down.
    pub state: String,
    /// `192.0.2.1/24`.
    pub addr: String,
    /// ipadm's CURRENT flags: `U` up, `u` unnumbered, `p` private, `t`
    /// temporary, `d` deprecated (`-` where not), e.g. `U----`.
    pub current: String,
    /// ipadm's PERSISTENT flags: `U` up, `p` private, `d` deprecated;
    /// empty when the object is not persistent.
    pub persistent: String,
}

/// An address object as `ShowAddr` first published it (`a(ssss)`):
/// addrobj, type, state, addr — an [`AddrInfo`] without ipadm's `current`
/// and `persistent` flags, which `ShowAddrEx` adds.
pub type AddrInfoV1 = (String, String, String, String);

impl AddrInfo {
    /// Its row as `ShowAddr` first published it.
    pub fn v1(self) -> AddrInfoV1 {
        (self.addrobj, self.r#type, self.state, self.addr)
    }
}

/// A traffic stream on a link (`show-traffic`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Type)]
pub struct TrafficInfo {
    /// The link it is sent from.
    pub link: String,
    /// Whether the generator is still sending.
    pub running: bool,
    /// Target rate, frames per second (0: as fast as the link takes).
    pub rate: u64,
    /// Frame size, bytes.
    pub size: u32,
    /// Flows.
    pub flows: u32,
    /// Frames the link accepted. The generator discards nothing: a frame
    /// the link does not take (ring full, senders paused, link down) is held
    /// and handed over later, so nothing it built is left out of `lost`.
    pub sent: u64,
    /// Distinct frames received back (reflector) or at the far end (cable).
    pub received: u64,
    /// Sent and not received (includes frames still in flight while running).
    pub lost: u64,
    /// Received after a later frame of their flow.
    pub reordered: u64,
    /// Received more than once.
    pub duplicated: u64,
    /// Mean latency, µs.
    pub latency_avg_us: f64,
    /// 99th percentile latency, µs.
    pub latency_p99_us: f64,
    /// Largest latency, µs (a frame held across a sender pause carries it).
    pub latency_max_us: f64,
    /// The longest sender pause, µs: the longest time the generator held
    /// frames the link would not take, including one still going on.
    pub pause_max_us: f64,
    /// All sender pauses together, µs.
    pub paused_us: f64,
}

/// Traffic counters of a link (`show-link -s`, `show-phys -s`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct LinkStats {
    /// Link name.
    pub link: String,
    /// Frames received.
    pub ipackets: u64,
    /// Bytes received.
    pub rbytes: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Frames dropped on receive (no buffer, ring stopped).
    pub idrops: u64,
    /// Frames the wire lost on send (no carrier, far end full).
    pub odrops: u64,
}

/// What link protection dropped on a VNIC, by reason, and what it let
/// through (`show-link -s`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct ProtectStats {
    /// The VNIC.
    pub link: String,
    /// Its protections now, comma-separated (empty: none any more).
    pub protection: String,
    /// Where they are enforced: `datapath` (an emulated VNIC) or
    /// `kernel` (rules netadm owns in the kernel).
    pub enforced: String,
    /// Frames dropped by mac-nospoof.
    pub mac_nospoof: u64,
    /// Frames dropped by ip-nospoof.
    pub ip_nospoof: u64,
    /// Frames dropped by dhcp-nospoof.
    pub dhcp_nospoof: u64,
    /// Frames dropped by restricted.
    pub restricted: u64,
    /// Frames the protection let through.
    pub opackets: u64,
    /// Their bytes.
    pub obytes: u64,
}

/// A recent mutating command and its timing (`show-history`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct HistoryEntry {
    /// Sequence number since the daemon started.
    pub seq: u64,
    /// Unix time in milliseconds when it started.
    pub time_ms: u64,
    /// The operation and its main argument, e.g. `create-aggr aggr0`.
    pub command: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Wall time, µs.
    pub total_us: u64,
    /// Error kind and message, empty on success.
    pub error: String,
}

/// One step of an apply's plan (`netadm apply`), in the order the
/// operation does them, with what it costs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PlanStep {
    /// `config` (an entry of the configuration), `rings` (a port's rings),
    /// `kernel` (a device or address in the kernel) or `persist`.
    pub kind: String,
    /// What it is about: `vnic v1`, `port i40e0`, `interface v1`, ...
    pub object: String,
    /// What happens, in words.
    pub action: String,
    /// Rings stopped.
    pub rings_stopped: u32,
    /// Rings started.
    pub rings_started: u32,
    /// Rings restarted with new buffers.
    pub rings_restarted: u32,
    /// Kernel changes (a TAP made or removed, an address, an MTU).
    pub kernel_changes: u32,
}

/// What `Apply` did, or with `dry_run` would do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct ApplyResult {
    /// Whether anything changed (would change): false when the document
    /// is the configuration already.
    pub changed: bool,
    /// Nothing was changed: the plan only.
    pub dry_run: bool,
    /// The plan, in order.
    pub steps: Vec<PlanStep>,
    /// When an armed checkpoint rolls back unless confirmed (ms since the
    /// Unix epoch); 0 if none was armed.
    pub confirm_deadline_ms: u64,
    /// The operation's timing, as every verb's.
    pub result: OpResult,
}

pub use proxies::{LinkProxy, NetadmProxy};

/// Wire type `as`: link (or port) names.
pub type Links = Vec<String>;
/// Wire type `as`: property names.
pub type PropNames = Vec<String>;
/// Wire type `a{ss}`: property assignments, name to value.
pub type Props = BTreeMap<String, String>;

/// How a client passes an argument of [`interface!`] wire type `$t`:
/// strings and lists borrowed, the rest by value.
macro_rules! client_arg {
    (String) => {
        &str
    };
    (Links) => {
        &[&str]
    };
    (PropNames) => {
        &[&str]
    };
    ($t:ty) => {
        $t
    };
}

/// The manager interface's proxy, from its declaration in [`interface!`].
macro_rules! netadm_proxy {
    (methods { $($(#[$doc:meta])* $class:ident $name:ident ($($arg:ident: $ty:tt),*)
        -> $ret:ty = $verb:literal;)* }
     properties { $($(#[$pdoc:meta])* $prop:ident: $pty:ty;)* }
     signals { $($(#[$sdoc:meta])* $sig:ident ($($sarg:ident: $sty:ty),*);)* }) => {
        /// The manager interface, as clients see it.
        #[zbus::proxy(
            interface = "org.netadm.Netadm1",
            default_service = "org.netadm.Netadm1",
            default_path = "/org/netadm/Netadm1",
            gen_blocking = false
        )]
        pub trait Netadm {
            $(
                $(#[$doc])*
                #[allow(clippy::too_many_arguments)]
                fn $name(&self, $($arg: client_arg!($ty)),*) -> zbus::Result<$ret>;
            )*
            $(
                $(#[$pdoc])*
                #[zbus(property)]
                fn $prop(&self) -> zbus::Result<$pty>;
            )*
            $(
                $(#[$sdoc])*
                #[zbus(signal)]
                fn $sig(&self, $($sarg: $sty),*) -> zbus::Result<()>;
            )*
        }
    };
}

/// Client proxies (generated code carries no docs of its own).
#[allow(missing_docs)]
mod proxies {
    use super::*;

    crate::interface!(netadm_proxy);

    /// A link object, as clients see it.
    #[zbus::proxy(
        interface = "org.netadm.Netadm1.Link",
        default_service = "org.netadm.Netadm1",
        gen_blocking = false
    )]
    pub trait Link {
        /// Link name.
        #[zbus(property)]
        fn name(&self) -> zbus::Result<String>;
        /// `phys`, `aggr` or `vnic`.
        #[zbus(property)]
        fn class(&self) -> zbus::Result<String>;
        /// MTU.
        #[zbus(property)]
        fn mtu(&self) -> zbus::Result<u32>;
        /// `up`, `down` or `unknown`.
        #[zbus(property)]
        fn state(&self) -> zbus::Result<String>;
        /// Links it is over.
        #[zbus(property)]
        fn over(&self) -> zbus::Result<Vec<String>>;
    }
}

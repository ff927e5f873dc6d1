//! The D-Bus contract between `netadmd` and its clients.
//!
//! This crate depends on nothing from the daemon: it holds the bus and
//! object names, the typed structures that cross the bus, the typed errors
//! (`org.netadm.Netadm1.Error.*`) and the client proxy. The daemon
//! implements the interface; `netadm` and any other client use [`NetadmProxy`].
//!
//! Arguments are typed D-Bus values. Link property values travel as strings
//! in `a{ss}` because dladm's properties are heterogeneous and their parser
//! (with its range and choice errors) lives in the daemon's model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zbus::zvariant::{OwnedObjectPath, Type};

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

/// An address object (`show-addr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct AddrInfo {
    /// `if/tag`.
    pub addrobj: String,
    /// `static`.
    pub r#type: String,
    /// `ok`, or `inaccessible` when its interface is down.
    pub state: String,
    /// `192.0.2.1/24`.
    pub addr: String,
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

pub use proxies::{LinkProxy, NetadmProxy};

/// Client proxies (generated code carries no docs of its own).
#[allow(missing_docs)]
mod proxies {
    use super::*;

    /// The manager interface, as clients see it.
    #[zbus::proxy(
        interface = "org.netadm.Netadm1",
        default_service = "org.netadm.Netadm1",
        default_path = "/org/netadm/Netadm1",
        gen_blocking = false
    )]
    pub trait Netadm {
        /// Physical links.
        fn show_phys(&self) -> zbus::Result<Vec<PhysInfo>>;
        /// All datalinks.
        fn show_link(&self) -> zbus::Result<Vec<LinkInfo>>;
        /// The datalinks named, each at the cost of its own lookup, not of
        /// listing every link; `NotFound` names the first that is no link.
        fn show_link_named(&self, names: &[&str]) -> zbus::Result<Vec<LinkInfo>>;
        /// Renames a link.
        fn rename_link(&self, old: &str, new: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Creates an aggregation; `mac` empty means the first port's.
        #[allow(clippy::too_many_arguments)]
        fn create_aggr(
            &self,
            name: &str,
            ports: &[&str],
            policy: &str,
            lacp_mode: &str,
            lacp_timer: &str,
            mac: &str,
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Changes an aggregation's policy, LACP mode/timer or MAC; an empty
        /// argument leaves that setting as it is.
        fn modify_aggr(
            &self,
            name: &str,
            policy: &str,
            lacp_mode: &str,
            lacp_timer: &str,
            mac: &str,
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Adds ports to an aggregation.
        fn add_aggr(&self, name: &str, ports: &[&str], temporary: bool) -> zbus::Result<OpResult>;
        /// Removes ports from an aggregation.
        fn remove_aggr(
            &self,
            name: &str,
            ports: &[&str],
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Deletes an aggregation.
        fn delete_aggr(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Aggregations.
        fn show_aggr(&self) -> zbus::Result<Vec<AggrInfo>>;
        /// Creates a VNIC. `mac`: `auto`, `factory`, `random` or a MAC address;
        /// `vid` 0 for none; `props` are link properties to set.
        fn create_vnic(
            &self,
            name: &str,
            over: &str,
            mac: &str,
            vid: u16,
            props: BTreeMap<String, String>,
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Deletes a VNIC.
        fn delete_vnic(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// VNICs.
        fn show_vnic(&self) -> zbus::Result<Vec<VnicInfo>>;
        /// The VNICs named, each at the cost of its own lookup; `NotFound`
        /// names the first that is no VNIC.
        fn show_vnic_named(&self, names: &[&str]) -> zbus::Result<Vec<VnicInfo>>;
        /// Creates VLAN `vid` (1-4094) over `over` as link `name`.
        fn create_vlan(
            &self,
            name: &str,
            over: &str,
            vid: u16,
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Deletes a VLAN link.
        fn delete_vlan(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// VLAN links.
        fn show_vlan(&self) -> zbus::Result<Vec<VlanInfo>>;
        /// Creates etherstub `name`.
        fn create_etherstub(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Deletes an etherstub (refused while VNICs are over it).
        fn delete_etherstub(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Etherstubs.
        fn show_etherstub(&self) -> zbus::Result<Vec<EtherstubInfo>>;
        /// Sets link properties.
        fn set_link_prop(
            &self,
            link: &str,
            props: BTreeMap<String, String>,
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Resets link properties to their defaults (all settable ones when
        /// `names` is empty).
        fn reset_link_prop(
            &self,
            link: &str,
            names: &[&str],
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Link properties of `link` (every link when empty), limited to
        /// `names` when not empty.
        fn show_link_prop(&self, link: &str, names: &[&str]) -> zbus::Result<Vec<PropInfo>>;
        /// Creates an IP interface over a link.
        fn create_if(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Deletes an IP interface and its addresses.
        fn delete_if(&self, name: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Makes an IP interface's kernel device anew as configured (MAC,
        /// MTU, up, addresses), whatever was done to it.
        fn refresh_if(&self, name: &str) -> zbus::Result<OpResult>;
        /// IP interfaces.
        fn show_if(&self) -> zbus::Result<Vec<IfInfo>>;
        /// Creates an address object; `kind` is `static`, `addr` is
        /// `ADDRESS/PREFIX`.
        fn create_addr(
            &self,
            addrobj: &str,
            kind: &str,
            addr: &str,
            temporary: bool,
        ) -> zbus::Result<OpResult>;
        /// Deletes an address object.
        fn delete_addr(&self, addrobj: &str, temporary: bool) -> zbus::Result<OpResult>;
        /// Address objects.
        fn show_addr(&self) -> zbus::Result<Vec<AddrInfo>>;
        /// Recent mutating commands and their timings, oldest first.
        fn show_history(&self) -> zbus::Result<Vec<HistoryEntry>>;
        /// Starts a traffic generator on `link`: `rate` frames per second (0:
        /// as fast as it takes them) of `size` bytes over `flows` flows.
        fn start_traffic(
            &self,
            link: &str,
            rate: u64,
            size: u32,
            flows: u32,
        ) -> zbus::Result<OpResult>;
        /// Stops the traffic generator on `link`; its books stay readable.
        fn stop_traffic(&self, link: &str) -> zbus::Result<OpResult>;
        /// Cuts (`up` false) or plugs back in (`up` true) a port's wire; for a
        /// cable, both ends lose or regain carrier.
        fn set_carrier(&self, link: &str, up: bool) -> zbus::Result<OpResult>;
        /// Traffic streams and their books.
        fn show_traffic(&self) -> zbus::Result<Vec<TrafficInfo>>;
        /// Traffic counters of every physical link and aggregation.
        fn show_stats(&self) -> zbus::Result<Vec<LinkStats>>;
        /// Selects the ring lifecycle strategy: `batched`, `sequential`,
        /// `legacy` or `legacy@HZ` (for comparisons such as `netadm demo`).
        fn set_strategy(&self, strategy: &str) -> zbus::Result<OpResult>;

        /// The ring lifecycle strategy in use.
        #[zbus(property)]
        fn strategy(&self) -> zbus::Result<String>;
        /// The daemon's version.
        #[zbus(property)]
        fn version(&self) -> zbus::Result<String>;

        /// Progress of a long operation started by bus client `caller`:
        /// `done` of `total` units in `phase`.
        #[zbus(signal)]
        fn progress(
            &self,
            caller: &str,
            op: &str,
            phase: &str,
            done: u32,
            total: u32,
        ) -> zbus::Result<()>;
    }

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

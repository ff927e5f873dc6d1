//! The hardware configuration: the emulated machine's ports and wires.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use netadm_model::LinkName;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::location::{Location, Snippet, decode};

/// The shipped hardware configuration (`config/netadm.toml`), compiled in:
/// two i40e-class ports wired to reflectors and four atl1c-class ports cabled
/// in pairs (atl1c0–atl1c2, atl1c1–atl1c3).
pub const EMBEDDED_DEFAULT: &str = include_str!("../../../config/netadm.toml");

/// Most queue pairs an i40e-class port has.
pub const I40E_MAX_QUEUE_PAIRS: u16 = 384;
/// Queue pairs of an i40e-class port that does not set `queue_pairs`.
pub const I40E_DEFAULT_QUEUE_PAIRS: u16 = 256;
/// Most interrupt vectors an i40e-class port has.
pub const I40E_MAX_VECTORS: u16 = 64;
/// Interrupt vectors of an i40e-class port that does not set `vectors`.
pub const I40E_DEFAULT_VECTORS: u16 = 8;
/// Smallest allowed `ring_size` (descriptors per ring).
pub const RING_SIZE_MIN: u32 = 64;
/// Largest allowed `ring_size` (descriptors per ring).
pub const RING_SIZE_MAX: u32 = 4096;
/// Slowest allowed `speed`, Mb/s (10BASE-T).
pub const SPEED_MIN: u64 = 10;
/// Fastest allowed `speed`, Mb/s (400 GbE).
pub const SPEED_MAX: u64 = 400_000;
/// Link speed of an i40e-class port that does not set `speed`, Mb/s.
pub const I40E_DEFAULT_SPEED: u64 = 40_000;
/// Link speed of an atl1c-class port that does not set `speed`, Mb/s.
pub const ATL1C_DEFAULT_SPEED: u64 = 1_000;

/// The machine: its physical ports, in file order — emulated ones netadm
/// drives itself, and kernel ones (`class = "kernel"`), the host's own
/// network devices, which the kernel's drivers drive and netadm manages
/// over rtnetlink and ethtool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareConfig {
    /// What a new etherstub is made of unless its verb says: a kernel
    /// bridge or netadm's own virtual switch. Default: `kernel` where
    /// every port is a kernel port, `netadm` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etherstub: Option<StubKind>,
    /// The ports (`[[port]]` tables). A valid configuration has at least one.
    #[serde(rename = "port", default)]
    pub ports: Vec<PortConfig>,
}

/// What an etherstub is made of.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StubKind {
    /// netadm's own virtual switch: its VNICs' frames cross netadm's
    /// datapath.
    #[default]
    Netadm,
    /// A kernel bridge with no uplink; a VNIC over it is a veth pair.
    Kernel,
}

impl StubKind {
    /// The spelling used in files: "netadm" or "kernel".
    pub fn as_str(self) -> &'static str {
        match self {
            StubKind::Netadm => "netadm",
            StubKind::Kernel => "kernel",
        }
    }

    /// Whether this is the default kind ([`StubKind::Netadm`]), which files
    /// leave out.
    pub fn is_netadm(&self) -> bool {
        *self == StubKind::Netadm
    }
}

impl fmt::Display for StubKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for StubKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "netadm" => Ok(StubKind::Netadm),
            "kernel" => Ok(StubKind::Kernel),
            _ => Err(format!("etherstub kind {s:?}: expected kernel or netadm")),
        }
    }
}

/// The NIC class of a physical port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortClass {
    /// i40e-class: up to 384 queue pairs, up to 64 vectors, RSS.
    I40e,
    /// atl1c-class: fixed 4 TX + 1 RX queues, 2 vectors, no RSS.
    Atl1c,
    /// A host network device the kernel's driver owns (a NIC, or a veth in
    /// tests), named by `interface`.
    Kernel,
}

impl PortClass {
    /// The spelling used in the file: "i40e" or "atl1c".
    pub fn as_str(self) -> &'static str {
        match self {
            PortClass::I40e => "i40e",
            PortClass::Atl1c => "atl1c",
            PortClass::Kernel => "kernel",
        }
    }
}

impl fmt::Display for PortClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One physical port (a `[[port]]` table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// The device's link name, e.g. `i40e0`; unique within the file.
    pub name: LinkName,
    /// The NIC class.
    pub class: PortClass,
    /// i40e only: queue pairs, 1..=384 (default 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_pairs: Option<u16>,
    /// i40e only: interrupt vectors, 1..=64 (default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<u16>,
    /// Descriptors per ring: a power of two in 64..=4096; the driver's
    /// default if unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_size: Option<u32>,
    /// Link speed in Mb/s, 10..=400000: the rate its wire serialises
    /// frames at. Default per class: i40e 40000, atl1c 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<u64>,
    /// What the port's wire is connected to (emulated ports; a kernel
    /// port's wire is the real one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<Wire>,
    /// A kernel port's network device (`eth0`). netadm touches no device
    /// a port does not name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

impl PortConfig {
    /// Queue pairs in effect: the configured or default count for an
    /// i40e-class port, `None` for atl1c-class (fixed 4 TX + 1 RX queues).
    pub fn queue_pairs_or_default(&self) -> Option<u16> {
        match self.class {
            PortClass::I40e => Some(self.queue_pairs.unwrap_or(I40E_DEFAULT_QUEUE_PAIRS)),
            PortClass::Atl1c | PortClass::Kernel => None,
        }
    }

    /// Link speed in effect, Mb/s: the configured one or the class's.
    pub fn speed_or_default(&self) -> u64 {
        self.speed.unwrap_or(match self.class {
            PortClass::I40e => I40E_DEFAULT_SPEED,
            PortClass::Atl1c => ATL1C_DEFAULT_SPEED,
            PortClass::Kernel => 0,
        })
    }

    /// Interrupt vectors in effect: the configured or default count for an
    /// i40e-class port, `None` for atl1c-class (fixed RX and TX vectors).
    pub fn vectors_or_default(&self) -> Option<u16> {
        match self.class {
            PortClass::I40e => Some(self.vectors.unwrap_or(I40E_DEFAULT_VECTORS)),
            PortClass::Atl1c | PortClass::Kernel => None,
        }
    }
}

/// What a port's wire is connected to. In the file, an inline table tagged by
/// `kind`: `{ kind = "sink" }`, `{ kind = "reflector" }`,
/// `{ kind = "cable", peer = "atl1c2" }`, `{ kind = "afpacket", interface = "veth0" }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Wire {
    /// Transmitted frames are dropped; nothing is ever received.
    Sink,
    /// A switch stand-in: every transmitted frame is received back.
    Reflector,
    /// A cable to another port of this machine, whose wire must be a cable
    /// back to this one.
    Cable {
        /// The port at the other end.
        peer: LinkName,
    },
    /// A host network interface, through an `AF_PACKET` socket.
    Afpacket {
        /// The host interface name: 1..=15 bytes, no '/', ':' or
        /// whitespace, not "." or "..".
        interface: String,
    },
}

impl Wire {
    /// The `kind` spelling: "sink", "reflector", "cable" or "afpacket".
    pub fn kind(&self) -> &'static str {
        self.repr_kind().as_str()
    }

    fn repr_kind(&self) -> WireKind {
        match self {
            Wire::Sink => WireKind::Sink,
            Wire::Reflector => WireKind::Reflector,
            Wire::Cable { .. } => WireKind::Cable,
            Wire::Afpacket { .. } => WireKind::Afpacket,
        }
    }
}

impl fmt::Display for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wire::Sink | Wire::Reflector => f.write_str(self.kind()),
            Wire::Cable { peer } => write!(f, "cable to {peer}"),
            Wire::Afpacket { interface } => write!(f, "afpacket on {interface:?}"),
        }
    }
}

/// The on-disk shape of a [`Wire`]: one flat table, so that a field that
/// does not belong to the kind (a `peer` on a reflector) is an error rather
/// than silently ignored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRepr {
    kind: WireKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peer: Option<LinkName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interface: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WireKind {
    Sink,
    Reflector,
    Cable,
    Afpacket,
}

impl WireKind {
    fn as_str(self) -> &'static str {
        match self {
            WireKind::Sink => "sink",
            WireKind::Reflector => "reflector",
            WireKind::Cable => "cable",
            WireKind::Afpacket => "afpacket",
        }
    }
}

impl Serialize for Wire {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (peer, interface) = match self {
            Wire::Sink | Wire::Reflector => (None, None),
            Wire::Cable { peer } => (Some(peer.clone()), None),
            Wire::Afpacket { interface } => (None, Some(interface.clone())),
        };
        WireRepr { kind: self.repr_kind(), peer, interface }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Wire {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let WireRepr { kind, peer, interface } = WireRepr::deserialize(deserializer)?;
        let k = kind.as_str();
        let unexpected =
            |field: &str| D::Error::custom(format!("wire kind {k:?} takes no `{field}`"));
        let missing = |field: &str| D::Error::custom(format!("wire kind {k:?} needs `{field}`"));
        match kind {
            WireKind::Sink | WireKind::Reflector if peer.is_some() => Err(unexpected("peer")),
            WireKind::Sink | WireKind::Reflector | WireKind::Cable if interface.is_some() => {
                Err(unexpected("interface"))
            }
            WireKind::Afpacket if peer.is_some() => Err(unexpected("peer")),
            WireKind::Sink => Ok(Wire::Sink),
            WireKind::Reflector => Ok(Wire::Reflector),
            WireKind::Cable => Ok(Wire::Cable { peer: peer.ok_or_else(|| missing("peer"))? }),
            WireKind::Afpacket => {
                Ok(Wire::Afpacket { interface: interface.ok_or_else(|| missing("interface"))? })
            }
        }
    }
}

/// Why a parsed hardware configuration is not usable. Each variant names the
/// port(s) concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HardwareError {
    /// The file has no `[[port]]` table.
    #[error("no ports: at least one [[port]] table is required")]
    NoPorts,
    /// Two ports have the same name.
    #[error("port {name}: defined more than once")]
    DuplicateName {
        /// The repeated name.
        name: LinkName,
    },
    /// An i40e-class port's `queue_pairs` is outside 1..=384.
    #[error("port {port}: queue_pairs {value} out of range 1..={}", I40E_MAX_QUEUE_PAIRS)]
    QueuePairs {
        /// The port.
        port: LinkName,
        /// The rejected value.
        value: u16,
    },
    /// An i40e-class port's `vectors` is outside 1..=64.
    #[error("port {port}: vectors {value} out of range 1..={}", I40E_MAX_VECTORS)]
    Vectors {
        /// The port.
        port: LinkName,
        /// The rejected value.
        value: u16,
    },
    /// An atl1c-class port sets `queue_pairs` or `vectors`.
    #[error(
        "port {port}: atl1c-class ports have fixed 4 TX + 1 RX queues (and fixed \
         vectors); remove `{field}`"
    )]
    Atl1cFixedQueues {
        /// The port.
        port: LinkName,
        /// The field that must not be set: "queue_pairs" or "vectors".
        field: &'static str,
    },
    /// `ring_size` is not a power of two in 64..=4096.
    #[error(
        "port {port}: ring_size {value} must be a power of two between {} and {}",
        RING_SIZE_MIN,
        RING_SIZE_MAX
    )]
    RingSize {
        /// The port.
        port: LinkName,
        /// The rejected value.
        value: u32,
    },
    /// `speed` is outside 10..=400000 Mb/s.
    #[error(
        "port {port}: speed {value} Mb/s out of range {}..={} (Mb/s: 1000 is 1 GbE)",
        SPEED_MIN,
        SPEED_MAX
    )]
    Speed {
        /// The port.
        port: LinkName,
        /// The rejected value.
        value: u64,
    },
    /// A cable's peer is not a port in the file.
    #[error("port {port}: cable peer {peer} is not a port in this configuration")]
    CablePeerMissing {
        /// The port whose wire is the cable.
        port: LinkName,
        /// The named peer.
        peer: LinkName,
    },
    /// A cable names its own port as the peer.
    #[error("port {port}: cable peer is the port itself")]
    CableToSelf {
        /// The port.
        port: LinkName,
    },
    /// A cable's peer is not cabled back to this port.
    #[error(
        "port {port}: cabled to {peer}, but {peer}'s wire is {peer_wire}, not a cable to {port}"
    )]
    CableNotMutual {
        /// The port whose wire is the cable.
        port: LinkName,
        /// The peer it names.
        peer: LinkName,
        /// The peer's wire, described (e.g. "cable to atl1c3", "reflector").
        peer_wire: String,
    },
    /// A cable's two ends run at different speeds (a real link would come
    /// up at one: say which).
    #[error(
        "port {port}: cabled to {peer}, but runs at {speed} Mb/s and {peer} at {peer_speed} \
         Mb/s; a cable's ends need the same `speed`"
    )]
    CableSpeedMismatch {
        /// The port whose wire is the cable.
        port: LinkName,
        /// Its speed, Mb/s.
        speed: u64,
        /// The peer.
        peer: LinkName,
        /// The peer's speed, Mb/s.
        peer_speed: u64,
    },
    /// An emulated port has no `wire`.
    #[error("port {port}: a {class}-class port needs a `wire`")]
    WireMissing {
        /// The port.
        port: LinkName,
        /// Its class.
        class: PortClass,
    },
    /// A field that does not belong to the port's class.
    #[error("port {port}: {why}; remove `{field}`")]
    Field {
        /// The port.
        port: LinkName,
        /// The field that must not be set.
        field: &'static str,
        /// Why.
        why: &'static str,
    },
    /// A kernel port names no device, or one the kernel cannot have.
    #[error("port {port}: kernel port interface {interface:?}: {reason}")]
    KernelInterface {
        /// The port.
        port: LinkName,
        /// The interface as given.
        interface: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Two kernel ports name one device.
    #[error("port {port}: interface {interface} is already port {other}'s")]
    InterfaceTwice {
        /// The port.
        port: LinkName,
        /// The interface.
        interface: String,
        /// The port that has it first.
        other: LinkName,
    },
    /// An afpacket wire's host interface name is not a valid Linux name.
    #[error("port {port}: afpacket interface {interface:?}: {reason}")]
    AfpacketInterface {
        /// The port.
        port: LinkName,
        /// The rejected interface name.
        interface: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Why a hardware configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, has an unknown field, or a value of the
    /// wrong type or with an invalid name.
    #[error(
        "{}:{line}:{column}: {message}{}",
        path.display(),
        Snippet { line: *line, column: *column, source_line }
    )]
    Parse {
        /// The file (or the origin given to [`HardwareConfig::parse`]).
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What is wrong.
        message: String,
        /// The text of the offending line.
        source_line: String,
    },
    /// The file parsed but describes an unusable machine.
    #[error("{}: {error}", path.display())]
    Invalid {
        /// The file (or origin).
        path: PathBuf,
        /// The validation failure.
        error: HardwareError,
    },
}

impl HardwareConfig {
    /// Parses and validates a hardware configuration. `origin` names the text
    /// in errors (a file path, or e.g. `<embedded>`).
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let config: HardwareConfig = toml::from_str(text).map_err(|err| {
            let Location { line, column, source_line } = Location::of_toml(text, &err);
            ConfigError::Parse {
                path: origin.to_owned(),
                line,
                column,
                message: err.message().to_owned(),
                source_line,
            }
        })?;
        config
            .validate()
            .map_err(|error| ConfigError::Invalid { path: origin.to_owned(), error })?;
        Ok(config)
    }

    /// Reads, parses and validates the hardware configuration at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let bytes = std::fs::read(path)
            .map_err(|source| ConfigError::Io { path: path.to_owned(), source })?;
        let text =
            decode(bytes).map_err(|Location { line, column, source_line }| ConfigError::Parse {
                path: path.to_owned(),
                line,
                column,
                message: "file is not valid UTF-8".to_owned(),
                source_line,
            })?;
        Self::parse(&text, path)
    }

    /// The shipped configuration ([`EMBEDDED_DEFAULT`]).
    ///
    /// # Panics
    ///
    /// Only if the shipped file is broken, which this crate's tests rule out.
    pub fn embedded_default() -> Self {
        Self::parse(EMBEDDED_DEFAULT, Path::new("<embedded config/netadm.toml>")).unwrap_or_else(
            |e| panic!("the embedded default hardware configuration is broken: {e}"),
        )
    }

    /// The port named `name`, if any.
    pub fn port(&self, name: &str) -> Option<&PortConfig> {
        self.ports.iter().find(|p| p.name.as_str() == name)
    }

    /// Checks everything the types alone do not: at least one port, unique
    /// names, per-class queue and vector limits, ring sizes, speeds, afpacket
    /// interface names, and that every cable is mutual, its ends at one
    /// speed. Ports are checked in file order; the first failure is
    /// returned.
    pub fn validate(&self) -> Result<(), HardwareError> {
        if self.ports.is_empty() {
            return Err(HardwareError::NoPorts);
        }
        let mut names = BTreeSet::new();
        for port in &self.ports {
            if !names.insert(&port.name) {
                return Err(HardwareError::DuplicateName { name: port.name.clone() });
            }
        }
        for port in &self.ports {
            self.validate_port(port)?;
        }
        Ok(())
    }

    fn validate_port(&self, port: &PortConfig) -> Result<(), HardwareError> {
        let name = || port.name.clone();
        match port.class {
            PortClass::I40e => {
                if let Some(value) =
                    port.queue_pairs.filter(|v| !(1..=I40E_MAX_QUEUE_PAIRS).contains(v))
                {
                    return Err(HardwareError::QueuePairs { port: name(), value });
                }
                if let Some(value) = port.vectors.filter(|v| !(1..=I40E_MAX_VECTORS).contains(v)) {
                    return Err(HardwareError::Vectors { port: name(), value });
                }
            }
            PortClass::Atl1c => {
                if port.queue_pairs.is_some() {
                    return Err(HardwareError::Atl1cFixedQueues {
                        port: name(),
                        field: "queue_pairs",
                    });
                }
                if port.vectors.is_some() {
                    return Err(HardwareError::Atl1cFixedQueues { port: name(), field: "vectors" });
                }
            }
            PortClass::Kernel => return self.validate_kernel_port(port),
        }
        if port.interface.is_some() {
            return Err(HardwareError::Field {
                port: name(),
                field: "interface",
                why: "an emulated port's host interface is its wire's (kind = \"afpacket\")",
            });
        }
        if let Some(value) = port.ring_size
            && !(value.is_power_of_two() && (RING_SIZE_MIN..=RING_SIZE_MAX).contains(&value))
        {
            return Err(HardwareError::RingSize { port: name(), value });
        }
        if let Some(value) = port.speed.filter(|v| !(SPEED_MIN..=SPEED_MAX).contains(v)) {
            return Err(HardwareError::Speed { port: name(), value });
        }
        let Some(wire) = &port.wire else {
            return Err(HardwareError::WireMissing { port: name(), class: port.class });
        };
        match wire {
            Wire::Sink | Wire::Reflector => {}
            Wire::Cable { peer } => {
                if *peer == port.name {
                    return Err(HardwareError::CableToSelf { port: name() });
                }
                let other = self.port(peer.as_str()).ok_or_else(|| {
                    HardwareError::CablePeerMissing { port: name(), peer: peer.clone() }
                })?;
                if !matches!(&other.wire, Some(Wire::Cable { peer: back }) if *back == port.name) {
                    return Err(HardwareError::CableNotMutual {
                        port: name(),
                        peer: peer.clone(),
                        peer_wire: other.wire.as_ref().map_or("none".into(), ToString::to_string),
                    });
                }
                let (speed, peer_speed) = (port.speed_or_default(), other.speed_or_default());
                if speed != peer_speed {
                    return Err(HardwareError::CableSpeedMismatch {
                        port: name(),
                        speed,
                        peer: peer.clone(),
                        peer_speed,
                    });
                }
            }
            Wire::Afpacket { interface } => {
                if let Err(reason) = check_ifname(interface) {
                    return Err(HardwareError::AfpacketInterface {
                        port: name(),
                        interface: interface.clone(),
                        reason,
                    });
                }
            }
        }
        Ok(())
    }
}

impl HardwareConfig {
    /// A kernel port: its device named (a valid, unshared interface name),
    /// and nothing an emulated device has.
    fn validate_kernel_port(&self, port: &PortConfig) -> Result<(), HardwareError> {
        let name = || port.name.clone();
        let why = "a kernel port is the kernel's device, which its driver sizes";
        for (set, field) in [
            (port.queue_pairs.is_some(), "queue_pairs"),
            (port.vectors.is_some(), "vectors"),
            (port.ring_size.is_some(), "ring_size"),
            (port.speed.is_some(), "speed"),
        ] {
            if set {
                return Err(HardwareError::Field { port: name(), field, why });
            }
        }
        if port.wire.is_some() {
            return Err(HardwareError::Field {
                port: name(),
                field: "wire",
                why: "a kernel port's wire is the device's own",
            });
        }
        let Some(interface) = &port.interface else {
            return Err(HardwareError::KernelInterface {
                port: name(),
                interface: String::new(),
                reason: "missing: name the device, e.g. interface = \"eth0\"",
            });
        };
        check_ifname(interface).map_err(|reason| HardwareError::KernelInterface {
            port: name(),
            interface: interface.clone(),
            reason,
        })?;
        if let Some(other) = self
            .ports
            .iter()
            .take_while(|p| p.name != port.name)
            .find(|p| p.interface.as_ref() == Some(interface))
        {
            return Err(HardwareError::InterfaceTwice {
                port: name(),
                interface: interface.clone(),
                other: other.name.clone(),
            });
        }
        Ok(())
    }

    /// What a new etherstub is made of: as configured, else a kernel
    /// bridge where every port is a kernel port, else netadm's switch.
    pub fn etherstub_default(&self) -> StubKind {
        self.etherstub.unwrap_or(
            if !self.ports.is_empty() && self.ports.iter().all(|p| p.class == PortClass::Kernel) {
                StubKind::Kernel
            } else {
                StubKind::Netadm
            },
        )
    }
}

/// Linux's `dev_valid_name`: 1..=15 bytes (IFNAMSIZ 16 minus the NUL), no
/// '/', ':' or whitespace, not "." or "..".
fn check_ifname(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > 15 {
        return Err("longer than 15 bytes");
    }
    if name == "." || name == ".." {
        return Err("\".\" and \"..\" are not interface names");
    }
    if name.contains('/') {
        return Err("contains '/'");
    }
    if name.contains(':') {
        return Err("contains ':' (the kernel rejects it)");
    }
    if name.chars().any(char::is_whitespace) {
        return Err("contains whitespace");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let config = HardwareConfig::embedded_default();
        let names: Vec<&str> = config.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["i40e0", "i40e1", "atl1c0", "atl1c1", "atl1c2", "atl1c3"]);
    }

    #[test]
    fn interface_names() {
        for ok in ["eth0", "veth-a", "a", "x".repeat(15).as_str(), "br.100", "..."] {
            assert_eq!(check_ifname(ok), Ok(()), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a:1", "a b", "a\tb", &"x".repeat(16)] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
    }
}

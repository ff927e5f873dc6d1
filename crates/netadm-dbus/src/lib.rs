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
/// The system bus's netadmd's private socket: the same interface peer to
/// peer, with no bus between (mode 0600: root's). `netadm` run as root
/// connects to it first, and takes the system bus when it cannot.
pub const PRIVATE_SOCKET: &str = "/run/netadm/private";
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

/// Makes each answer of [`netadm_model::answers!`] a type the bus
/// carries, by its bus name.
macro_rules! bus_answers {
    ([$(#[$doc:meta])*] $core:ident => $bus:ident [$($derive:ident),*] [$([$(#[$fdoc:meta])*] $field:ident: $ty:ty,)*]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, $($derive,)* Serialize, Deserialize, Type)]
        pub struct $bus {
            $( $(#[$fdoc])* pub $field: $ty, )*
        }
    };
}

// The core's names of answers that other answers hold.
type AggrPortRow = AggrPortInfo;
type Report = OpResult;

netadm_model::answers!(bus_answers);

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

/// A flow's counters as `ShowFlowStats` first published them
/// (`a(ssttttt)`): flow, link, ipackets, rbytes, opackets, obytes, odrops
/// — a [`FlowStats`] without `idrops`, which `ShowFlowStatsEx` adds.
pub type FlowStatsV1 = (String, String, u64, u64, u64, u64, u64);

impl FlowStats {
    /// Its row as `ShowFlowStats` first published it.
    pub fn v1(self) -> FlowStatsV1 {
        (self.flow, self.link, self.ipackets, self.rbytes, self.opackets, self.obytes, self.odrops)
    }
}

pub use proxies::{LinkProxy, NetadmProxy, Progress};

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

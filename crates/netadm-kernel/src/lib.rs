//! The kernel side of netadm: TAP devices that mirror IP interfaces, and
//! one long-lived rtnetlink handle that configures and reads them back.
//!
//! The `rtnetlink` crate speaks `NETLINK_ROUTE`: links are brought up and
//! given an MTU with `RTM_NEWLINK`, read with `RTM_GETLINK`; addresses are
//! added (with lifetimes, `IFA_CACHEINFO`, for DHCP leases and deprecated
//! addresses), removed and listed with `RTM_NEWADDR`, `RTM_DELADDR` and an
//! `RTM_GETADDR` dump. Every request asks for an acknowledgement, so a
//! refusal comes back as the kernel's own errno, typed. Its connections
//! run on the daemon's tokio runtime (see `rt`); this crate's interface
//! stays synchronous, with every wait bounded.

mod errors;
mod ethtool;
mod events;
mod links;
mod netlink;
mod netns;
mod packet;
mod rt;
pub mod sysctl;
mod tap;
mod tc;
mod wake;

pub use errors::module_of_kind;
pub use ethtool::{
    Channel, ChannelCounts, Channels, DriverInfo, Duplex, Ethtool, Features, LinkModes, Offload,
    OffloadState,
};
pub use events::{Events, Touched};
pub use links::{
    BondMode, BondSpec, BondState, LacpRate, LinkDetail, LinkKind, MacVlanMode, NewLink, OperState,
    XmitHashPolicy,
};
pub use netlink::{KernelLink, Netlink};
pub use netns::{NETNS_DIR, Netns};
pub use packet::PacketSocket;
pub use tap::Tap;
pub use tc::{Class, HtbClass, Mode, Qdisc, QdiscKind, Rate, Tbf, TcId, U32Filter};
pub use wake::{eventfd, wake};

/// Why a kernel operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The object already exists (EEXIST).
    #[error("{what} already exists")]
    Exists {
        /// What.
        what: String,
    },
    /// No such device or address (ENODEV, EADDRNOTAVAIL, ESRCH).
    #[error("{what} does not exist")]
    NotFound {
        /// What.
        what: String,
    },
    /// The kernel refused the request.
    #[error("{op}: the kernel refused it: {source}{}", because(message))]
    Refused {
        /// What was asked.
        op: String,
        /// The kernel's errno.
        source: std::io::Error,
        /// The kernel's own words (its extended acknowledgement), when it
        /// gave any.
        message: Option<String>,
    },
    /// This kernel has no such kind of device, qdisc, classifier or
    /// action: EOPNOTSUPP ("Unknown device type") on a link created with
    /// a kind, ENOENT ("... kind is unknown", "... not found") on traffic
    /// control. Nothing was changed.
    #[error("{what}: not supported by this kernel (it has no {module})")]
    NotSupported {
        /// What was asked for.
        what: String,
        /// The module that provides it (`bonding`, `8021q`, `sch_htb`, ...).
        module: String,
    },
    /// The kernel took the request but kept the device otherwise (read
    /// back): a feature that is fixed, or that needs another which is off.
    /// What the request changed was put back.
    #[error("{what}: the kernel kept {kept}")]
    NotApplied {
        /// What was asked.
        what: String,
        /// What stayed as it was, and why where known.
        kept: String,
    },
    /// A request this crate will not send, as given: the reason names
    /// what is wrong. Nothing was changed.
    #[error("{what}: {reason}")]
    Invalid {
        /// What was asked.
        what: String,
        /// Why it cannot be.
        reason: String,
    },
    /// A zone (network namespace) that cannot be used.
    #[error("zone {zone:?}: {reason}")]
    BadZone {
        /// The zone as given.
        zone: String,
        /// Why.
        reason: String,
    },
    /// A name the kernel cannot take (too long, or characters it rejects).
    #[error("interface name {name:?}: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
}

fn because(message: &Option<String>) -> String {
    message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default()
}

/// Checks a name as the kernel's `dev_valid_name` does.
pub fn check_ifname(name: &str) -> Result<(), KernelError> {
    let bad = |reason| Err(KernelError::BadName { name: name.to_owned(), reason });
    if name.is_empty() || name.len() > 15 {
        return bad("must be 1 to 15 bytes");
    }
    if name == "." || name == ".." {
        return bad("is reserved");
    }
    if name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0) {
        return bad("may not contain '/', ':' or whitespace");
    }
    Ok(())
}

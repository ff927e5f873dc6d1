//! The kernel side of netadm: TAP devices that mirror IP interfaces;
//! kernel links (macvlans, veth pairs, bridges, VLANs, bonds, ifbs) for
//! kernel ports; traffic control; ethtool; all through one long-lived
//! rtnetlink handle ([`Netlink`]) and one ethtool handle ([`Ethtool`])
//! per network namespace.
//!
//! The `rtnetlink` crate speaks `NETLINK_ROUTE`: links are made with its
//! builders and `RTM_NEWLINK`, changed, moved between namespaces, deleted
//! one by one or by group, and read back (`RTM_GETLINK`, one or a dump);
//! addresses are added (with lifetimes, `IFA_CACHEINFO`, for DHCP leases
//! and deprecated addresses), removed and listed. Every request asks for
//! an acknowledgement, so a refusal comes back as the kernel's own errno,
//! typed ([`KernelError`]), with the kernel's own words where it gives
//! them (extended acks are on for every socket). The connections run on
//! the daemon's tokio runtime (see `rt`); this crate's interface stays
//! synchronous, with every wait bounded (5 s).
//!
//! # Errors
//!
//! | the kernel says | [`KernelError`] |
//! |---|---|
//! | EEXIST | `Exists` |
//! | ENODEV, EADDRNOTAVAIL, ESRCH; ENOENT from tc for an object | `NotFound` |
//! | EOPNOTSUPP "Unknown device type" creating a link of a kind | `NotSupported { module }`: bond `bonding`, vlan `8021q`, else the kind |
//! | ENOENT "Specified qdisc kind is unknown" / "TC classifier not found" / "Failed to load TC action module" | `NotSupported { module }`: `sch_KIND`, `cls_KIND`, `act_KIND` |
//! | any other errno | `Refused { source, message }` (`message`: the extended ack) |
//! | a read-back that differs from what was set (ethtool features) | `NotApplied` |
//! | nothing: bad input caught before a request (VLAN id, MAC, tc values, group 0, channel maxima) | `Invalid`, `BadName`, `BadZone` |
//!
//! # What is hand-written, and why
//!
//! Each part is small and tested against this machine's kernel; the
//! figures are lines of code without comments and tests.
//!
//! - **The extended ack** (`errors::extack`, 13 lines): netlink-packet-core
//!   0.9 keeps the error's echoed request and its attributes unparsed
//!   ("FIXME"); the kernel's message (`NLMSGERR_ATTR_MSG`) is read after
//!   the echoed request.
//! - **Traffic control** (`tc`, ~520 lines, of which ~150 are the byte
//!   layouts): netlink-packet-route 0.34 has no htb or tbf, and rtnetlink
//!   0.24 cannot create a class or a qdisc of another kind than ingress
//!   (no `message_mut()` on its qdisc request). The kernel's
//!   `tc_ratespec`, `tc_htb_glob`, `tc_htb_opt` and `tc_tbf_qopt` are laid
//!   out here, sent as `TcMessage`s, and parsed
//!   back out of the opaque `TCA_OPTIONS` the crate returns for kinds it
//!   does not know. Filters use rtnetlink's own u32 builder.
//! - **ethtool** (`ethtool`, ~500 lines): the ethtool generic-netlink
//!   family's channels get/set, features get/set and link modes get, on
//!   netlink-packet-generic's header. The
//!   `ethtool` crate 0.3 (the newest) was not taken: it serves channels
//!   and link modes only; it cannot express `FEATURES_SET` (a closed
//!   command enum) nor driver info; its bitset parser drops bit 0; and it
//!   brings netlink-proto 0.13 beside rtnetlink's 0.14 and thiserror 1
//!   beside 2. Offloads are ethtool's legacy groups (`tso` is every
//!   `tx-tcp*-segmentation`), matched by name as ethtool matches them and
//!   set whole: one bit alone leaves the group on.
//! - **The request socket** (`netlink::Requests`, ~130 lines): a blocking
//!   netlink socket, rtnetlink's or generic netlink's, on which a request
//!   is sent and its answer read in the caller's thread (sequence numbers,
//!   multipart answers, acknowledgements, a receive deadline).
//!   netlink-proto, which `rtnetlink`'s `Handle` sends through, answers on
//!   a task of the tokio runtime: two thread wake-ups a request, 55-85 µs
//!   here against the 10 µs of the request itself. The messages are the
//!   crates' own (link builders' and `message_mut()`'s).
//! - **BPF programs** (`tcx`, ~440 lines): the two netadm attaches, a
//!   redirect to a veth end's peer (4 instructions) and a classifier that
//!   sends on and counts what a guard's first rule passes (42 plus 3 per
//!   prefix), written out with a small assembler (labels, resolved
//!   jumps), and the bpf(2) commands that load, attach, list, identify,
//!   detach them and read their map. A BPF crate (aya, libbpf-rs) would
//!   bring an ELF loader and a compiler toolchain for BPF (clang, which
//!   this build does not need) for two programs this size.
//! - **Driver info** (`Ethtool::driver_info`, ~45 lines): the ethtool
//!   netlink family has no driver-info message, so `SIOCETHTOOL`
//!   `ETHTOOL_GDRVINFO` on a datagram socket opened in the handle's
//!   namespace.
//!
//! Taken as the crates have them: every link builder (`LinkMacVlan`,
//! `LinkVeth`, `LinkMessageBuilder::<LinkBridge>`, `LinkVlan`, `LinkBond`,
//! `LinkIfb`), masters, groups, namespace moves, the group delete
//! (`DelLink` with `IFLA_GROUP`), u32 filters and mirred (the filter
//! builder, which keeps its message, sends through `rtnetlink`'s `Handle`).

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
pub mod tcx;
mod wake;

pub use errors::module_of_kind;
pub use ethtool::{
    Channel, ChannelCounts, Channels, DriverInfo, Duplex, Ethtool, Features, LinkModes, Offload,
    OffloadState,
};
pub use events::{Events, Touched};
pub use links::{
    BondChange, BondMode, BondPort, BondSpec, BondState, LacpRate, LinkCounters, LinkDetail,
    LinkKind, MacVlanMode, NewLink, OperState, XmitHashPolicy, lacp,
};
pub use netlink::{KernelLink, Netlink};
pub use netns::{NETNS_DIR, Netns};
pub use packet::PacketSocket;
pub use tap::Tap;
pub use tc::{
    Class, ClassCounts, HtbClass, Mode, Qdisc, QdiscKind, Rate, Tbf, TcId, U32Filter, U32Key,
};
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

/// The index of interface `name` in this thread's network namespace, or
/// `None` when there is none (or the name is not one the kernel takes).
/// An ioctl that reads the device table under RCU: unlike a netlink
/// request for the link, it never waits for the RTNL lock, which whoever
/// is making devices holds.
pub fn index_of(name: &str) -> Option<u32> {
    check_ifname(name).ok()?;
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: c is a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// The most bytes a network device's name has (IFNAMSIZ less its NUL).
pub const IFNAME_MAX: usize = 15;

/// Checks a name as the kernel's `dev_valid_name` does.
pub fn check_ifname(name: &str) -> Result<(), KernelError> {
    let bad = |reason| Err(KernelError::BadName { name: name.to_owned(), reason });
    if name.is_empty() || name.len() > IFNAME_MAX {
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

//! One mirrored IP interface: its kernel device (a TAP), the connection
//! and zone it is configured in, what netadm last set on it, how it
//! drifted from that, and its DHCP clients.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use netadm_datapath::VSwitch;
use netadm_kernel::{Netlink, Netns, Tap};
use netadm_model::AddrObj;

use super::dhcp;

/// A mirrored interface: what the mirror keeps of each IP interface.
pub(crate) struct MirrorIf {
    /// Its DHCP clients, by address object (stopped before the TAP goes).
    pub(crate) dhcp: BTreeMap<AddrObj, dhcp::Client>,
    /// The addresses they hold.
    pub(crate) leased: dhcp::Leased,
    /// Whether it has an addrconf address object: the kernel's SLAAC
    /// addresses are then its own, not drift.
    pub(crate) addrconf: bool,
    /// The TAP netadm made for it over one of netadm's links; `None` over
    /// a kernel link (its device is the link's own: `attached`), or when
    /// the device could not be made, its zone being gone (the interface is
    /// reported missing until `refresh-if` makes it).
    pub(crate) tap: Option<Arc<Tap>>,
    /// Its device is a kernel link's own (a kernel port, a macvlan, ...):
    /// netadm configures its IP, not the device.
    pub(crate) attached: bool,
    /// Its kernel device's name: its TAP's (the link's name), or the
    /// kernel link's device (`eth0` under link `net0`).
    pub(crate) dev: String,
    /// The connection its device is configured over: the daemon's, or its
    /// zone's.
    pub(crate) nl: Arc<Netlink>,
    /// Its zone, if it lives in one: as configured, and as opened.
    pub(crate) zone: Option<String>,
    pub(crate) ns: Option<Arc<Zone>>,
    pub(crate) index: u32,
    pub(crate) mac: [u8; 6],
    /// The VLAN its frames are tagged with on the wire (0: untagged).
    pub(crate) vid: u16,
    /// What the mirror last set, for drift to be measured against.
    pub(crate) want_mtu: u32,
    pub(crate) want_addrs: Vec<(IpAddr, u8)>,
    /// Addresses a change went to add and found there already (a DHCP
    /// lease, an administrator's): its undo does not remove them.
    pub(crate) found: std::collections::BTreeSet<(IpAddr, u8)>,
    /// How the device differs from that, as last heard (`crate::drift`).
    pub(crate) drift: Option<Drift>,
    /// The offloads the TAP lets the kernel leave to netadm: (tx-csum, tso).
    pub(crate) offload: (bool, bool),
    /// The virtual switch it is on (its link's).
    pub(crate) switch: Arc<VSwitch>,
    pub(crate) stop: std::os::fd::OwnedFd,
    pub(crate) reader: Option<JoinHandle<()>>,
}

impl MirrorIf {
    /// Whether it has a device to configure.
    pub(crate) fn present(&self) -> bool {
        self.tap.is_some() || self.attached
    }
}

impl Drop for MirrorIf {
    fn drop(&mut self) {
        self.switch.set_endpoint(self.vid, self.mac, None);
        netadm_kernel::wake(&self.stop);
        if let Some(t) = self.reader.take() {
            let _ = t.join();
        }
    }
}

/// A zone: a network namespace and the rtnetlink connection opened in it
/// (on the same runtime as the daemon's own).
pub(crate) struct Zone {
    pub(crate) ns: Netns,
    pub(crate) nl: Arc<Netlink>,
}

/// How a mirrored interface's kernel device differs from what netadm set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Drift {
    /// The device is gone.
    pub(crate) missing: bool,
    /// What differs, one phrase each.
    pub(crate) diffs: Vec<String>,
    /// Configured addresses the device lacks.
    pub(crate) absent: Vec<(IpAddr, u8)>,
}

impl Drift {
    /// `missing` or `drifted`.
    pub(crate) fn state(&self) -> &'static str {
        if self.missing { "missing" } else { "drifted" }
    }

    /// What differs, for show-if and the log.
    pub(crate) fn describe(&self) -> String {
        if self.missing && self.diffs.is_empty() {
            "the kernel device is gone".into()
        } else {
            self.diffs.join("; ")
        }
    }
}

/// Whether `ip` is an IPv6 link-local address (fe80::/10).
pub(crate) fn link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80)
}

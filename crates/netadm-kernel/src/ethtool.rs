//! ethtool: channels, offload features and link modes over the kernel's
//! ethtool generic-netlink family, and driver information over the
//! `SIOCETHTOOL` ioctl. Synchronous, every request bounded, in the
//! network namespace the handle was opened in.
//!
//! Written here rather than taken from the `ethtool` crate (0.3, the
//! newest): it would serve two requests of the five (channels, link
//! modes), not features set (its command enum is closed) nor driver info,
//! its feature parser drops bit 0, and it brings a second netlink-proto
//! (0.13 beside rtnetlink's 0.14) and thiserror 1 beside 2. The messages
//! are small: a header naming the device, u32 attributes, and ethtool's
//! bitsets (lists of named bits). The generic-netlink header is
//! netlink-packet-generic's; the connection is rtnetlink's netlink-proto.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, OwnedFd};

use netlink_packet_generic::constants::{
    CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME, CTRL_CMD_GETFAMILY, GENL_ID_CTRL,
};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use rtnetlink::packet_core::{
    DecodeError, Emitable, NLA_F_NESTED, NLA_TYPE_MASK, NLM_F_ACK, ParseableParametrized,
};
use rtnetlink::sys::protocols::NETLINK_GENERIC;

use crate::netlink::Requests;
use crate::{KernelError, Netns, check_ifname, errors};

/// One kind of channel: how many the device uses, and how many it has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channel {
    /// In use.
    pub count: u32,
    /// The most it takes (0: the device has none of this kind).
    pub max: u32,
}

/// A device's channels (queues and their interrupts), `ethtool -l`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channels {
    /// Receive only.
    pub rx: Channel,
    /// Transmit only.
    pub tx: Channel,
    /// Neither (link interrupts and the like).
    pub other: Channel,
    /// Receive and transmit.
    pub combined: Channel,
}

/// Channel counts to set, `ethtool -L`: `None` leaves one as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelCounts {
    /// Receive only.
    pub rx: Option<u32>,
    /// Transmit only.
    pub tx: Option<u32>,
    /// Other.
    pub other: Option<u32>,
    /// Combined.
    pub combined: Option<u32>,
}

/// An offload as ethtool names it (`ethtool -K DEV tso off`): a group of
/// the kernel's features, matched by name as ethtool matches them, so a
/// kernel's new member (6.18's tx-tcp-accecn-segmentation) is in it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Offload {
    /// `tso` (tcp-segmentation-offload): `tx-tcp*-segmentation`.
    Tso,
    /// `tx` (tx-checksumming): `tx-checksum-*`.
    TxChecksum,
    /// `rx` (rx-checksumming): `rx-checksum`.
    RxChecksum,
}

impl Offload {
    /// ethtool's long name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tso => "tcp-segmentation-offload",
            Self::TxChecksum => "tx-checksumming",
            Self::RxChecksum => "rx-checksumming",
        }
    }

    /// Whether kernel feature `feature` belongs to it (ethtool's patterns).
    pub fn has(self, feature: &str) -> bool {
        let (head, tail) = match self {
            Self::Tso => ("tx-tcp", "-segmentation"),
            Self::TxChecksum => ("tx-checksum-", ""),
            Self::RxChecksum => return feature == "rx-checksum",
        };
        feature.len() >= head.len() + tail.len()
            && feature.starts_with(head)
            && feature.ends_with(tail)
    }
}

/// An offload's state: on when any of its features is active (as ethtool
/// shows it), fixed when none of them can be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadState {
    /// On.
    pub on: bool,
    /// Fixed (`[fixed]`).
    pub fixed: bool,
}

/// A device's features, by the kernel's names (`ethtool -k`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// Those that can be changed.
    pub changeable: BTreeSet<String>,
    /// Those asked for.
    pub wanted: BTreeSet<String>,
    /// Those on.
    pub active: BTreeSet<String>,
    /// Those that never change (`[fixed]`).
    pub fixed: BTreeSet<String>,
}

impl Features {
    /// The features of `o` the device has (in any of the sets).
    pub fn members(&self, o: Offload) -> BTreeSet<&str> {
        [&self.changeable, &self.wanted, &self.active, &self.fixed]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .filter(|f| o.has(f))
            .collect()
    }

    /// `o`'s state; `None` if the device has none of its features.
    pub fn offload(&self, o: Offload) -> Option<OffloadState> {
        let m = self.members(o);
        if m.is_empty() {
            return None;
        }
        let on = m.iter().any(|f| self.active.contains(*f));
        let fixed = m.iter().all(|f| self.fixed.contains(*f) || !self.changeable.contains(*f));
        Some(OffloadState { on, fixed })
    }
}

/// Duplex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplex {
    /// Half.
    Half,
    /// Full.
    Full,
}

/// What the link runs at (`ethtool DEV`): unknown (`None`) without
/// carrier or on a device that does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkModes {
    /// Speed, Mb/s.
    pub speed: Option<u32>,
    /// Duplex.
    pub duplex: Option<Duplex>,
    /// Autonegotiation on.
    pub autoneg: Option<bool>,
}

/// What the driver says of itself (`ethtool -i`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver (`i40e`, `veth`, `macvlan`).
    pub driver: String,
    /// Its version.
    pub version: String,
    /// The firmware's version.
    pub firmware: String,
    /// Where the device is (`0000:03:00.0`), empty for a virtual one.
    pub bus: String,
}

// The ethtool family (linux/ethtool_netlink.h). Requests and replies
// are numbered apart; these replies happen to share their request's.
const ETHTOOL_VERSION: u8 = 1;
const MSG_LINKMODES_GET: u8 = 4;
const MSG_FEATURES_GET: u8 = 11;
const MSG_FEATURES_SET: u8 = 12;
const MSG_CHANNELS_GET: u8 = 17;
const MSG_CHANNELS_SET: u8 = 18;
/// Every request's and reply's attribute 1: the header.
const A_HEADER: u16 = 1;
const A_HEADER_DEV_NAME: u16 = 2;
const A_HEADER_FLAGS: u16 = 3;
const FLAG_COMPACT_BITSETS: u32 = 1;
/// No reply to a set but the acknowledgement: it is read back instead.
const FLAG_OMIT_REPLY: u32 = 2;
const A_LINKMODES_AUTONEG: u16 = 2;
const A_LINKMODES_SPEED: u16 = 5;
const A_LINKMODES_DUPLEX: u16 = 6;
const A_FEATURES_HW: u16 = 2;
const A_FEATURES_WANTED: u16 = 3;
const A_FEATURES_ACTIVE: u16 = 4;
const A_FEATURES_NOCHANGE: u16 = 5;
const A_BITSET_NOMASK: u16 = 1;
const A_BITSET_BITS: u16 = 3;
const A_BITSET_BITS_BIT: u16 = 1;
const A_BITSET_BIT_NAME: u16 = 2;
const A_BITSET_BIT_VALUE: u16 = 3;
/// Channels: rx, tx, other, combined maxima (2..5), then counts (6..9).
const A_CHANNELS_RX_MAX: u16 = 2;
const A_CHANNELS_RX_COUNT: u16 = 6;
const ETHTOOL_GDRVINFO: u32 = 3;

/// A generic-netlink message of a family resolved at run time, its
/// attributes raw.
#[derive(Debug, Clone)]
struct Genl {
    family: u16,
    cmd: u8,
    version: u8,
    attrs: Vec<u8>,
}

impl GenlFamily for Genl {
    fn family_name() -> &'static str {
        "ethtool"
    }
    fn family_id(&self) -> u16 {
        self.family
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        self.version
    }
}

impl Emitable for Genl {
    fn buffer_len(&self) -> usize {
        self.attrs.len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        buffer.copy_from_slice(&self.attrs);
    }
}

impl ParseableParametrized<[u8], GenlHeader> for Genl {
    fn parse_with_param(buf: &[u8], h: GenlHeader) -> Result<Self, DecodeError> {
        Ok(Self { family: 0, cmd: h.cmd, version: h.version, attrs: buf.to_vec() })
    }
}

/// An attribute: header, value, padding to 4 bytes.
fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = 4 + value.len();
    let mut b = Vec::with_capacity(len.next_multiple_of(4));
    b.extend(u16::try_from(len).expect("small attributes").to_ne_bytes());
    b.extend(kind.to_ne_bytes());
    b.extend(value);
    b.resize(len.next_multiple_of(4), 0);
    b
}

fn nest(kind: u16, inner: &[u8]) -> Vec<u8> {
    attr(kind | NLA_F_NESTED, inner)
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// A request's header: the device by name, and flags.
fn header(dev: &str, flags: u32) -> Vec<u8> {
    let mut h = attr(A_HEADER_DEV_NAME, &cstr(dev));
    if flags != 0 {
        h.extend(attr(A_HEADER_FLAGS, &flags.to_ne_bytes()));
    }
    nest(A_HEADER, &h)
}

/// The attributes in `buf`, by type (the nested and byte-order flags
/// cleared); a truncated one ends the list.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes(buf.get(0..2)?.try_into().ok()?));
        let kind = u16::from_ne_bytes(buf.get(2..4)?.try_into().ok()?) & NLA_TYPE_MASK;
        let value = buf.get(4..len).filter(|_| len >= 4)?;
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((kind, value))
    })
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

/// The bits set in an ethtool bitset, by name: a list without a mask
/// (every listed bit set) or with one (those with a value flag).
fn bitset(buf: &[u8]) -> BTreeSet<String> {
    let nomask = attrs(buf).any(|(k, _)| k == A_BITSET_NOMASK);
    let mut set = BTreeSet::new();
    for (_, bits) in attrs(buf).filter(|(k, _)| *k == A_BITSET_BITS) {
        for (_, bit) in attrs(bits).filter(|(k, _)| *k == A_BITSET_BITS_BIT) {
            let mut name = None;
            let mut on = nomask;
            for (k, v) in attrs(bit) {
                match k {
                    A_BITSET_BIT_NAME => {
                        name = Some(String::from_utf8_lossy(v).trim_end_matches('\0').to_owned());
                    }
                    A_BITSET_BIT_VALUE => on = true,
                    _ => {}
                }
            }
            if let (Some(n), true) = (name, on) {
                set.insert(n);
            }
        }
    }
    set
}

/// A `FEATURES_SET` body: the wanted bits by name, each on or off, the
/// rest untouched (a bitset with no `NOMASK`: listed bits are the mask).
fn features_set(dev: &str, bits: &[(&str, bool)]) -> Vec<u8> {
    let mut list = vec![];
    for (name, on) in bits {
        let mut bit = attr(A_BITSET_BIT_NAME, &cstr(name));
        if *on {
            bit.extend(attr(A_BITSET_BIT_VALUE, &[]));
        }
        list.extend(nest(A_BITSET_BITS_BIT, &bit));
    }
    let mut body = header(dev, FLAG_OMIT_REPLY);
    body.extend(nest(A_FEATURES_WANTED, &nest(A_BITSET_BITS, &list)));
    body
}

fn parse_channels(buf: &[u8]) -> Channels {
    let mut got = [0u32; 8];
    for (k, v) in attrs(buf) {
        if let Some(i) = k.checked_sub(A_CHANNELS_RX_MAX).filter(|i| *i < 8) {
            got[usize::from(i)] = u32_of(v).unwrap_or(0);
        }
    }
    let c = |i: usize| Channel { count: got[i + 4], max: got[i] };
    Channels { rx: c(0), tx: c(1), other: c(2), combined: c(3) }
}

fn parse_link_modes(buf: &[u8]) -> LinkModes {
    let mut l = LinkModes::default();
    for (k, v) in attrs(buf) {
        match (k, v.first()) {
            (A_LINKMODES_SPEED, _) => l.speed = u32_of(v).filter(|s| *s != u32::MAX),
            (A_LINKMODES_DUPLEX, Some(0)) => l.duplex = Some(Duplex::Half),
            (A_LINKMODES_DUPLEX, Some(1)) => l.duplex = Some(Duplex::Full),
            (A_LINKMODES_AUTONEG, Some(a)) => l.autoneg = Some(*a != 0),
            _ => {}
        }
    }
    l
}

fn parse_features(buf: &[u8]) -> Features {
    let mut f = Features::default();
    for (k, v) in attrs(buf) {
        let set = match k {
            A_FEATURES_HW => &mut f.changeable,
            A_FEATURES_WANTED => &mut f.wanted,
            A_FEATURES_ACTIVE => &mut f.active,
            A_FEATURES_NOCHANGE => &mut f.fixed,
            _ => continue,
        };
        *set = bitset(v);
    }
    f
}

/// An ethtool handle: a generic-netlink socket (requests answered in the
/// caller's thread), the ethtool family resolved, and a socket for ioctls,
/// all in one network namespace.
#[derive(Debug)]
pub struct Ethtool {
    req: Requests,
    family: u16,
    /// An AF_INET datagram socket, for `SIOCETHTOOL`.
    ioctl: OwnedFd,
}

impl Ethtool {
    /// Opens one in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        let req = Requests::open(NETLINK_GENERIC)?;
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(KernelError::Io {
                op: "open an ioctl socket".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: a descriptor just made, owned by nothing else.
        let ioctl = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
        let mut e = Self { req, family: GENL_ID_CTRL, ioctl };
        e.family = e.resolve()?;
        Ok(e)
    }

    /// Opens one inside zone `ns`.
    pub fn open_in(ns: &Netns) -> Result<Self, KernelError> {
        ns.run(Self::open)?
    }

    /// The ethtool family's id (`CTRL_CMD_GETFAMILY`).
    fn resolve(&self) -> Result<u16, KernelError> {
        let op = "find the ethtool netlink family";
        let msg = Genl {
            family: GENL_ID_CTRL,
            cmd: CTRL_CMD_GETFAMILY,
            version: 2,
            attrs: attr(CTRL_ATTR_FAMILY_NAME, &cstr("ethtool")),
        };
        let replies = self.request(op, msg).map_err(|e| match e {
            KernelError::Refused { source, .. } if source.raw_os_error() == Some(libc::ENOENT) => {
                KernelError::NotSupported {
                    what: "ethtool over netlink".into(),
                    module: "ethtool netlink (CONFIG_ETHTOOL_NETLINK)".into(),
                }
            }
            e => e,
        })?;
        replies
            .iter()
            .flat_map(|r| attrs(r))
            .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, v)| Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?)))
            .ok_or_else(|| KernelError::Io {
                op: op.into(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "no family id"),
            })
    }

    /// Sends one request, acknowledged; the attributes of each reply.
    fn request(&self, op: &str, msg: Genl) -> Result<Vec<Vec<u8>>, KernelError> {
        let got = self.req.call(op, GenlMessage::from_payload(msg), NLM_F_ACK)?;
        Ok(got.into_iter().map(|g| g.payload.attrs).collect())
    }

    fn get(&self, op: &str, dev: &str, cmd: u8, flags: u32) -> Result<Vec<u8>, KernelError> {
        check_ifname(dev)?;
        let msg =
            Genl { family: self.family, cmd, version: ETHTOOL_VERSION, attrs: header(dev, flags) };
        let mut replies = self.request(op, msg).map_err(|e| not_found(e, dev))?;
        replies.pop().ok_or_else(|| KernelError::Io {
            op: op.into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "no reply"),
        })
    }

    fn set(&self, op: &str, dev: &str, cmd: u8, attrs: Vec<u8>) -> Result<(), KernelError> {
        let msg = Genl { family: self.family, cmd, version: ETHTOOL_VERSION, attrs };
        self.request(op, msg).map(drop).map_err(|e| not_found(e, dev))
    }

    /// Device `dev`'s channels.
    pub fn channels(&self, dev: &str) -> Result<Channels, KernelError> {
        let r = self.get(&format!("read the channels of {dev}"), dev, MSG_CHANNELS_GET, 0)?;
        Ok(parse_channels(&r))
    }

    /// Sets `dev`'s channel counts, checked against its maxima first, and
    /// reads them back.
    pub fn set_channels(&self, dev: &str, want: &ChannelCounts) -> Result<Channels, KernelError> {
        let op = format!("set the channels of {dev}");
        let now = self.channels(dev)?;
        let asked = [
            ("rx", want.rx, now.rx),
            ("tx", want.tx, now.tx),
            ("other", want.other, now.other),
            ("combined", want.combined, now.combined),
        ];
        let mut body = header(dev, 0);
        for (i, (name, n, have)) in (0u16..).zip(asked) {
            let Some(n) = n else { continue };
            if n > have.max {
                return Err(KernelError::Invalid {
                    what: format!("{op}: {name} {n}"),
                    reason: format!("{dev} has at most {} {name} channels", have.max),
                });
            }
            body.extend(attr(A_CHANNELS_RX_COUNT + i, &n.to_ne_bytes()));
        }
        self.set(&op, dev, MSG_CHANNELS_SET, body)?;
        self.channels(dev)
    }

    /// Device `dev`'s features.
    pub fn features(&self, dev: &str) -> Result<Features, KernelError> {
        let r = self.get(&format!("read the features of {dev}"), dev, MSG_FEATURES_GET, 0)?;
        Ok(parse_features(&r))
    }

    /// Turns offload `o` on or off on `dev`: every feature of its group
    /// (ethtool's legacy names are groups; one bit alone leaves the group
    /// on), then reads back. On is taken when every member that can
    /// change is on (members fixed off stay off: the device lacks them);
    /// off when every member is off. What the kernel kept otherwise (a
    /// member fixed on, or one that needs another that is off: TSO needs
    /// transmit checksums) is [`KernelError::NotApplied`], naming each,
    /// with the group's wanted bits put back as they were.
    pub fn set_offload(
        &self,
        dev: &str,
        o: Offload,
        on: bool,
    ) -> Result<OffloadState, KernelError> {
        let op = format!("turn {} {} on {dev}", o.name(), if on { "on" } else { "off" });
        let before = self.features(dev)?;
        let members: Vec<&str> = before.members(o).into_iter().collect();
        if members.is_empty() {
            return Err(KernelError::Invalid {
                what: op,
                reason: format!("{dev} has no {} features", o.name()),
            });
        }
        let bits: Vec<(&str, bool)> = members.iter().map(|m| (*m, on)).collect();
        self.set(&op, dev, MSG_FEATURES_SET, features_set(dev, &bits))?;
        let after = self.features(dev)?;
        // Taken when every member that can change did, and, asked off,
        // none stays on (a fixed one that is on keeps the group on).
        let kept: Vec<String> = members
            .iter()
            .filter_map(|m| {
                let fixed = after.fixed.contains(*m) || !after.changeable.contains(*m);
                let active = after.active.contains(*m);
                let missed = if on { !fixed && !active } else { active };
                missed.then(|| {
                    let now = if active { "on" } else { "off" };
                    format!("{m} {now}{}", if fixed { " [fixed]" } else { "" })
                })
            })
            .collect();
        if kept.is_empty() {
            return Ok(after.offload(o).expect("the same device, the same features"));
        }
        let back: Vec<(&str, bool)> =
            members.iter().map(|m| (*m, before.wanted.contains(*m))).collect();
        let _ = self.set(&op, dev, MSG_FEATURES_SET, features_set(dev, &back));
        Err(KernelError::NotApplied { what: op, kept: kept.join(", ") })
    }

    /// Device `dev`'s speed, duplex and autonegotiation.
    pub fn link_modes(&self, dev: &str) -> Result<LinkModes, KernelError> {
        let op = format!("read the link modes of {dev}");
        let r = self.get(&op, dev, MSG_LINKMODES_GET, FLAG_COMPACT_BITSETS)?;
        Ok(parse_link_modes(&r))
    }

    /// What `dev`'s driver says of itself (`ETHTOOL_GDRVINFO`).
    pub fn driver_info(&self, dev: &str) -> Result<DriverInfo, KernelError> {
        check_ifname(dev)?;
        /// `struct ethtool_drvinfo` (linux/ethtool.h), 196 bytes.
        #[repr(C)]
        struct DrvInfo {
            cmd: u32,
            driver: [u8; 32],
            version: [u8; 32],
            fw_version: [u8; 32],
            bus_info: [u8; 32],
            erom_version: [u8; 32],
            reserved2: [u8; 12],
            counts: [u32; 5],
        }
        let mut info = DrvInfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            counts: [0; 5],
        };
        // SAFETY: an all-zero ifreq is a valid one.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(dev.bytes()) {
            *d = s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = (&raw mut info).cast();
        // SAFETY: SIOCETHTOOL reads the name and writes the 196 bytes
        // `ifr_data` points to, which `info` is and outlives the call.
        let rc = unsafe { libc::ioctl(self.ioctl.as_raw_fd(), libc::SIOCETHTOOL, &raw mut ifr) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            let op = format!("read the driver of {dev}");
            return Err(not_found(errors::errno(e.raw_os_error().unwrap_or(0), &op, None), dev));
        }
        let s = |b: &[u8]| {
            let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        Ok(DriverInfo {
            driver: s(&info.driver),
            version: s(&info.version),
            firmware: s(&info.fw_version),
            bus: s(&info.bus_info),
        })
    }
}

/// A missing device is named as such.
fn not_found(e: KernelError, dev: &str) -> KernelError {
    match e {
        KernelError::NotFound { .. } => KernelError::NotFound { what: format!("interface {dev}") },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_groups_match_as_ethtool_matches_them() {
        for f in [
            "tx-tcp-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation",
            "tx-tcp-accecn-segmentation",
        ] {
            assert!(Offload::Tso.has(f), "{f}");
        }
        assert!(!Offload::Tso.has("tx-udp-segmentation") && !Offload::Tso.has("tx-tcp"));
        assert!(
            Offload::TxChecksum.has("tx-checksum-ip-generic")
                && !Offload::TxChecksum.has("tx-scatter-gather")
        );
        assert!(
            Offload::RxChecksum.has("rx-checksum") && !Offload::RxChecksum.has("rx-checksum-x")
        );

        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let f = Features {
            changeable: set(&["tx-tcp-segmentation", "tx-tcp6-segmentation"]),
            active: set(&["tx-tcp6-segmentation"]),
            fixed: set(&["tx-tcp-mangleid-segmentation"]),
            ..Default::default()
        };
        assert_eq!(
            f.offload(Offload::Tso),
            Some(OffloadState { on: true, fixed: false }),
            "any member on"
        );
        assert_eq!(f.offload(Offload::RxChecksum), None);
    }

    #[test]
    fn a_features_set_lists_each_bit_by_name_and_a_bitset_reads_back() {
        let body = features_set("nic0", &[("tx-tcp-segmentation", false), ("rx-checksum", true)]);
        let top: Vec<u16> = attrs(&body).map(|(k, _)| k).collect();
        assert_eq!(top, [A_HEADER, A_FEATURES_WANTED]);
        let (_, wanted) = attrs(&body).nth(1).unwrap();
        assert!(!attrs(wanted).any(|(k, _)| k == A_BITSET_NOMASK), "listed bits are the mask");
        // With a mask, only bits with a value flag are set.
        assert_eq!(bitset(wanted), ["rx-checksum".to_string()].into());
        // Without one, every listed bit is.
        let nomask = [attr(A_BITSET_NOMASK, &[]), wanted.to_vec()].concat();
        assert_eq!(bitset(&nomask).len(), 2);
    }

    #[test]
    fn channels_and_link_modes_are_read_from_their_attributes() {
        let mut b = vec![];
        for (k, v) in [(2u16, 4u32), (3, 4), (6, 2), (7, 3)] {
            b.extend(attr(k, &v.to_ne_bytes()));
        }
        let c = parse_channels(&b);
        assert_eq!(
            (c.rx, c.tx, c.combined),
            (Channel { count: 2, max: 4 }, Channel { count: 3, max: 4 }, Channel::default())
        );
        let mut b = attr(A_LINKMODES_SPEED, &10_000u32.to_ne_bytes());
        b.extend(attr(A_LINKMODES_DUPLEX, &[1]));
        assert_eq!(
            parse_link_modes(&b),
            LinkModes { speed: Some(10_000), duplex: Some(Duplex::Full), autoneg: None }
        );
        let unknown =
            [attr(A_LINKMODES_SPEED, &u32::MAX.to_ne_bytes()), attr(A_LINKMODES_DUPLEX, &[0xff])]
                .concat();
        assert_eq!(parse_link_modes(&unknown), LinkModes::default());
    }
}

//! rtnetlink notifications: a socket subscribed to the link and address
//! multicast groups, so the daemon hears about changes someone
//! else makes to its devices (`ip link set ... mtu`, `ip addr del`,
//! `ip link del`) instead of polling for them; and an inotify watch on
//! the directory `ip netns` names namespaces in, so it hears a zone's
//! name go (`ip netns del`) and can let go of the namespace, which lives
//! on, devices, addresses and all, while anything holds it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use crate::{KernelError, NETNS_DIR};

/// What a batch of notifications touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// These interface indices (links or their addresses) changed.
    Indices(Vec<u32>),
    /// Notifications were lost (the socket overran): anything may have.
    All,
    /// A namespace's name under [`NETNS_DIR`] went: a zone may be gone.
    Zones,
}

/// The groups heard: links and their IPv4 and IPv6 addresses
/// (`RTNLGRP_LINK`, `RTNLGRP_IPV4_IFADDR`, `RTNLGRP_IPV6_IFADDR`).
const GROUPS: [u32; 3] = [1, 5, 9];

/// The largest read: one notification is a few KiB (a link's with its
/// statistics and IPv6 settings), and only its header is looked at.
const READ_BUF: usize = 32 * 1024;

/// A subscription to link and address notifications, on a socket of its
/// own. Only each message's header is read (its type and the interface
/// index that follows it): a host whose containers make and remove
/// devices all day sends a notification for each, and parsing every
/// attribute of every one cost netadmd about 100 µs a device.
pub struct Events {
    sock: Socket,
    /// What each read goes into, kept between waits.
    buf: Mutex<Vec<u8>>,
    /// The watch on [`NETNS_DIR`]; `None` where inotify is not to be had
    /// (a zone's deletion is then seen when it is next looked at).
    zones: Option<NetnsWatch>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// Subscribes in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        let io = |source| KernelError::Io { op: "subscribe to rtnetlink".into(), source };
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(io)?;
        sock.bind(&SocketAddr::new(0, 0)).map_err(io)?;
        for g in GROUPS {
            sock.add_membership(g).map_err(io)?;
        }
        sock.set_non_blocking(true).map_err(io)?;
        let zones = NetnsWatch::open(Path::new(NETNS_DIR)).ok();
        Ok(Self { sock, buf: Mutex::new(vec![0; READ_BUF]), zones })
    }

    /// Whether a zone's name going under [`NETNS_DIR`] is heard
    /// ([`Touched::Zones`]); not where inotify could not be had.
    pub fn hears_zones(&self) -> bool {
        self.zones.is_some()
    }

    /// Waits for notifications, or for `stop` to become readable (then
    /// `None`); returns what everything queued so far touched.
    pub fn wait(&self, stop: RawFd) -> Result<Option<Touched>, KernelError> {
        let op = "wait for notifications";
        let io = |source| KernelError::Io { op: op.into(), source };
        let mut fds = [
            libc::pollfd { fd: self.sock.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
            // (-1, with no watch: poll passes it over.)
            libc::pollfd {
                fd: self.zones.as_ref().map_or(-1, |z| z.fd.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: three valid pollfds, the count given; no deadline:
            // `stop` ends the wait.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(io(e));
                }
                continue;
            }
            if fds[1].revents != 0 {
                return Ok(None);
            }
            if fds[2].revents != 0
                && let Some(z) = &self.zones
            {
                match z.gone() {
                    Ok(false) => {}
                    Ok(true) => return Ok(Some(Touched::Zones)),
                    // The watch could not be renewed (no inotify watch
                    // left, say): taken as a name gone, so each zone is
                    // looked at now; rtnetlink goes on being heard, where
                    // returning the error would end both.
                    Err(_) => return Ok(Some(Touched::Zones)),
                }
            }
            if fds[0].revents != 0 {
                break;
            }
        }
        let mut touched = Some(vec![]);
        let mut buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match self.sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT) {
                // MSG_TRUNC is not asked for: a longer one is cut to the
                // buffer, whose start is all that is read.
                Ok(len) => indices(&buf[..len.min(READ_BUF)], &mut touched),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // ENOBUFS: the socket overran, and notifications were lost.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => touched = None,
                Err(e) => return Err(io(e)),
            }
        }
        Ok(Some(match touched {
            Some(mut t) => {
                t.sort_unstable();
                t.dedup();
                Touched::Indices(t)
            }
            None => Touched::All,
        }))
    }
}

/// An inotify watch on a directory of namespace names (`dir`), and on
/// its parent until `dir` is made (`ip netns add` makes it on first use).
struct NetnsWatch {
    fd: OwnedFd,
    dir: CString,
    parent: CString,
    /// The parent's watch, while `dir` is not there; and `dir`'s.
    wds: Mutex<(Option<i32>, Option<i32>)>,
}

impl NetnsWatch {
    fn open(dir: &Path) -> std::io::Result<Self> {
        // SAFETY: inotify_init1 takes flags only; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_encoded_bytes())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        };
        let parent = c(dir.parent().unwrap_or(Path::new("/")))?;
        let w = Self { fd, dir: c(dir)?, parent, wds: Mutex::new((None, None)) };
        match w.add(&w.dir, DIR_EVENTS) {
            Ok(wd) => w.wds.lock().unwrap_or_else(PoisonError::into_inner).1 = Some(wd),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => w.await_dir()?,
            Err(e) => return Err(e),
        }
        Ok(w)
    }

    /// Watches the parent for the directory to be made (again), and
    /// adopts it if it is there already: its creation may have gone
    /// unheard.
    fn await_dir(&self) -> std::io::Result<()> {
        {
            let mut wds = self.wds.lock().unwrap_or_else(PoisonError::into_inner);
            if wds.0.is_none() {
                let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_ONLYDIR;
                wds.0 = Some(self.add(&self.parent, mask)?);
            }
        }
        self.adopt_dir()
    }

    /// The directory itself went (removed, moved away, unmounted): with
    /// it every name in it. Its watch is dropped and its parent watched
    /// until it is back.
    fn lost_dir(&self) -> std::io::Result<()> {
        if let Some(wd) = self.wds.lock().unwrap_or_else(PoisonError::into_inner).1.take() {
            // SAFETY: our descriptor and a watch it returned (one the
            // kernel removed already is refused, harmlessly).
            unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
        }
        self.await_dir()
    }

    fn add(&self, path: &CString, mask: u32) -> std::io::Result<i32> {
        // SAFETY: our inotify descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), mask) };
        if wd < 0 { Err(std::io::Error::last_os_error()) } else { Ok(wd) }
    }

    /// Watches the directory itself once it is there (and the parent no
    /// longer).
    fn adopt_dir(&self) -> std::io::Result<()> {
        let mut wds = self.wds.lock().unwrap_or_else(PoisonError::into_inner);
        if wds.1.is_some() {
            return Ok(());
        }
        match self.add(&self.dir, DIR_EVENTS) {
            Ok(wd) => {
                wds.1 = Some(wd);
                if let Some(p) = wds.0.take() {
                    // SAFETY: our descriptor and a watch it returned.
                    unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), p) };
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Reads every event queued: whether a name in the directory went.
    fn gone(&self) -> std::io::Result<bool> {
        let mut gone = false;
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reads into `buf`, of the length given.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock => return Ok(gone),
                    std::io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            let dir_wd = self.wds.lock().unwrap_or_else(PoisonError::into_inner).1;
            let heard = netns_events(&buf[..n as usize], &self.dir, dir_wd);
            gone |= heard.went || heard.lost || heard.overflow;
            if heard.lost {
                self.lost_dir()?;
            } else if heard.overflow {
                // The directory's own events may be among those lost: its
                // watch is asked for again (the same one if it stands).
                self.wds.lock().unwrap_or_else(PoisonError::into_inner).1 = None;
                self.await_dir()?;
            } else if heard.made {
                self.adopt_dir()?;
            }
        }
    }
}

/// What the directory's own watch asks for: a name in it going, and it
/// going itself (the kernel adds `IN_IGNORED` and `IN_UNMOUNT`).
const DIR_EVENTS: u32 =
    libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;

/// What a read of inotify events said.
#[derive(Debug, Default, PartialEq, Eq)]
struct Heard {
    /// The directory was made in the parent watched.
    made: bool,
    /// A name went from it.
    went: bool,
    /// The directory itself went (removed, moved, unmounted), and every
    /// name with it.
    lost: bool,
    /// The queue overflowed: events were lost, and any name may have
    /// gone.
    overflow: bool,
}

/// Of the inotify events in `buf`: what happened to directory `dir` (by
/// its last component) and the names in it, `dir_wd` being its watch.
/// (Only `dir` and its parent are watched.)
fn netns_events(buf: &[u8], dir: &CString, dir_wd: Option<i32>) -> Heard {
    const HDR: usize = 16;
    let last = dir.as_bytes().rsplit(|b| *b == b'/').next().unwrap_or_default();
    let mut h = Heard::default();
    let mut at = 0;
    while at + HDR <= buf.len() {
        let word = |o: usize| u32::from_ne_bytes(buf[at + o..at + o + 4].try_into().expect("4"));
        let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
        let name = buf.get(at + HDR..at + HDR + len).unwrap_or_default();
        let name = name.split(|b| *b == 0).next().unwrap_or_default();
        if mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 && name == last {
            h.made = true;
        }
        h.went |= mask & (libc::IN_DELETE | libc::IN_MOVED_FROM) != 0;
        h.overflow |= mask & libc::IN_Q_OVERFLOW != 0;
        let self_gone =
            libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT;
        if mask & self_gone != 0 && Some(wd) == dir_wd {
            h.lost = true;
        }
        at += HDR + len;
    }
    h
}

/// Adds to `touched` the interfaces the netlink messages in `datagram`
/// are about: a link's (`RTM_NEWLINK`, `RTM_DELLINK`) or an address's
/// (`RTM_NEWADDR`, `RTM_DELADDR`), whose index stands at the same place
/// after the 16-byte `nlmsghdr` (`ifinfomsg`'s `ifi_index`, `ifaddrmsg`'s
/// `ifa_index`); an overrun makes it `None` (anything may have changed).
fn indices(datagram: &[u8], touched: &mut Option<Vec<u32>>) {
    const HDR: usize = 16;
    const NLMSG_OVERRUN: u16 = 4;
    let word = |at: usize| u32::from_ne_bytes(datagram[at..at + 4].try_into().expect("4 bytes"));
    let mut at = 0;
    while at + HDR <= datagram.len() {
        let len = word(at) as usize;
        let kind = u16::from_ne_bytes([datagram[at + 4], datagram[at + 5]]);
        if len < HDR {
            break;
        }
        match kind {
            libc::RTM_NEWLINK | libc::RTM_DELLINK | libc::RTM_NEWADDR | libc::RTM_DELADDR
                if len >= HDR + 8 && at + HDR + 8 <= datagram.len() =>
            {
                if let Some(t) = touched {
                    t.push(word(at + HDR + 4));
                }
            }
            NLMSG_OVERRUN => *touched = None,
            _ => {}
        }
        at += (len + 3) & !3;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
    use rtnetlink::packet_route::RouteNetlinkMessage;
    use rtnetlink::packet_route::address::AddressMessage;
    use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};

    /// `m` as the kernel sends it.
    fn wire(m: NetlinkMessage<RouteNetlinkMessage>) -> Vec<u8> {
        let mut m = m;
        m.finalize();
        let mut b = vec![0; m.buffer_len()];
        m.serialize(&mut b);
        b
    }

    #[test]
    fn a_name_going_from_the_netns_directory_is_heard_also_when_it_is_made_later() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("netns");
        let w = NetnsWatch::open(&dir).unwrap();
        assert!(!w.gone().unwrap(), "nothing happened yet");
        // Made after the watch: the parent's watch hears it.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("z1"), "").unwrap();
        assert!(!w.gone().unwrap(), "a name made is not one gone");
        std::fs::write(dir.join("z2"), "").unwrap();
        std::fs::remove_file(dir.join("z1")).unwrap();
        assert!(w.gone().unwrap(), "z1 went");
        assert!(!w.gone().unwrap(), "read once");
        std::fs::rename(dir.join("z2"), tmp.path().join("z2")).unwrap();
        assert!(w.gone().unwrap(), "z2 was moved away");
        // The directory itself goes, and comes back: heard as gone, and
        // watched again.
        std::fs::write(dir.join("z3"), "").unwrap();
        std::fs::remove_file(dir.join("z3")).unwrap();
        assert!(w.gone().unwrap(), "z3 went");
        std::fs::remove_dir(&dir).unwrap();
        assert!(w.gone().unwrap(), "the directory went");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("z4"), "").unwrap();
        assert!(!w.gone().unwrap(), "made again, nothing gone");
        std::fs::remove_file(dir.join("z4")).unwrap();
        assert!(w.gone().unwrap(), "z4 went from the directory made again");
        // Moved away, with a name in it: gone too, and watched again when
        // one is made in its place.
        std::fs::write(dir.join("z5"), "").unwrap();
        std::fs::rename(&dir, tmp.path().join("old")).unwrap();
        assert!(w.gone().unwrap(), "the directory was moved away");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("z6"), "").unwrap();
        assert!(!w.gone().unwrap());
        std::fs::remove_file(dir.join("z6")).unwrap();
        assert!(w.gone().unwrap(), "z6 went");
    }

    #[test]
    fn link_and_address_messages_name_their_interface_and_overrun_names_all() {
        let mut l = LinkMessage::default();
        l.header.index = 7;
        // An attribute of odd length: the next message starts aligned.
        l.attributes.push(LinkAttribute::IfName("abc".into()));
        let mut a = AddressMessage::default();
        a.header.index = 9;
        let inner = |m| NetlinkMessage::from(m);
        let mut two = wire(inner(RouteNetlinkMessage::DelLink(l.clone())));
        two.extend(wire(inner(RouteNetlinkMessage::NewAddress(a))));
        let mut t = Some(vec![]);
        indices(&two, &mut t);
        assert_eq!(t, Some(vec![7, 9]));
        // A route's (another group's message) names nothing.
        let mut t = Some(vec![]);
        indices(&wire(inner(RouteNetlinkMessage::NewRoute(Default::default()))), &mut t);
        assert_eq!(t, Some(vec![]));
        // Cut short, or with a length below its header's: nothing read
        // past the end.
        let whole = wire(inner(RouteNetlinkMessage::NewLink(l)));
        for cut in [0, 10, 16, 23] {
            let mut t = Some(vec![]);
            indices(&whole[..cut], &mut t);
            assert_eq!(t, Some(vec![]), "cut at {cut}");
        }
        let mut bad = whole.clone();
        bad[..4].copy_from_slice(&3u32.to_ne_bytes());
        let mut t = Some(vec![]);
        indices(&bad, &mut t);
        assert_eq!(t, Some(vec![]));
        let overrun = NetlinkMessage::<RouteNetlinkMessage>::new(
            Default::default(),
            NetlinkPayload::Overrun(vec![0; 4]),
        );
        let mut t = Some(vec![]);
        indices(&wire(overrun), &mut t);
        assert_eq!(t, None);
    }
}

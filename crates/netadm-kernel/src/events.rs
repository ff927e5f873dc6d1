//! rtnetlink notifications: a socket subscribed to the link and address
//! multicast groups, so the daemon hears about changes someone
//! else makes to its devices (`ip link set ... mtu`, `ip addr del`,
//! `ip link del`) instead of polling for them.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Mutex, PoisonError};

use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use crate::KernelError;

/// What a batch of notifications touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// These interface indices (links or their addresses) changed.
    Indices(Vec<u32>),
    /// Notifications were lost (the socket overran): anything may have.
    All,
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
        Ok(Self { sock, buf: Mutex::new(vec![0; READ_BUF]) })
    }

    /// Waits for notifications, or for `stop` to become readable (then
    /// `None`); returns what everything queued so far touched.
    pub fn wait(&self, stop: RawFd) -> Result<Option<Touched>, KernelError> {
        let op = "wait for notifications";
        let io = |source| KernelError::Io { op: op.into(), source };
        let mut fds = [
            libc::pollfd { fd: self.sock.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
        ];
        loop {
            // SAFETY: two valid pollfds, the count given; no deadline:
            // `stop` ends the wait.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n >= 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io(e));
            }
        }
        if fds[1].revents != 0 {
            return Ok(None);
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

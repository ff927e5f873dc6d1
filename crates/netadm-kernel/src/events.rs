//! rtnetlink notifications: a `NETLINK_ROUTE` socket subscribed to the
//! link and address multicast groups, so the daemon hears about changes
//! someone else makes to its devices (`ip link set ... mtu`, `ip addr del`,
//! `ip link del`) instead of polling for them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::KernelError;
use crate::netlink::{RTM_DELADDR, RTM_NEWADDR, RTM_NEWLINK};

const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;
const RTM_DELLINK: u16 = 17;

/// What a batch of notifications touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// These interface indices (links or their addresses) changed.
    Indices(Vec<u32>),
    /// Notifications were lost (the socket overran): anything may have.
    All,
}

/// A socket receiving link and address notifications.
#[derive(Debug)]
pub struct Events {
    fd: OwnedFd,
}

impl Events {
    /// Subscribes in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        let io =
            |op: &str| KernelError::Io { op: op.into(), source: std::io::Error::last_os_error() };
        // SAFETY: plain socket(2); the result is checked.
        let fd = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
        };
        if fd < 0 {
            return Err(io("open rtnetlink notifications"));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: zeroed sockaddr_nl is valid; the groups are set below.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        // SAFETY: sa is valid for its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if rc < 0 {
            return Err(io("subscribe to link and address notifications"));
        }
        Ok(Self { fd })
    }

    /// Waits for notifications, or for `stop` to become readable (then
    /// `None`); returns what everything queued so far touched.
    pub fn wait(&self, stop: RawFd) -> Result<Option<Touched>, KernelError> {
        let mut fds = [
            libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
        ];
        loop {
            // SAFETY: fds is a valid array of two pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(KernelError::Io { op: "wait for notifications".into(), source: e });
            }
            break;
        }
        if fds[1].revents != 0 {
            return Ok(None);
        }
        let mut touched = vec![];
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::ENOBUFS) => return Ok(Some(Touched::All)),
                    Some(libc::EINTR) => continue,
                    _ => {
                        return Err(KernelError::Io { op: "read notifications".into(), source: e });
                    }
                }
            }
            touched.extend(indices(&buf[..n as usize]));
        }
        touched.sort_unstable();
        touched.dedup();
        Ok(Some(Touched::Indices(touched)))
    }
}

/// The interface indices of the link and address messages in one
/// datagram; every length is checked, anything else skipped.
fn indices(mut b: &[u8]) -> Vec<u32> {
    let mut out = vec![];
    while b.len() >= 16 {
        let len = u32::from_ne_bytes(b[0..4].try_into().expect("4 bytes")) as usize;
        let ty = u16::from_ne_bytes([b[4], b[5]]);
        if len < 16 || len > b.len() {
            break;
        }
        // ifinfomsg and ifaddrmsg both hold the index at bytes 4..8.
        if matches!(ty, RTM_NEWLINK | RTM_DELLINK | RTM_NEWADDR | RTM_DELADDR)
            && let Some(i) = b.get(20..24)
        {
            out.push(u32::from_ne_bytes(i.try_into().expect("4 bytes")));
        }
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ty: u16, index: u32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&32u32.to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&[0; 4]);
        m.extend_from_slice(&index.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m
    }

    #[test]
    fn indices_of_link_and_address_messages_with_lengths_checked() {
        let mut d = msg(RTM_NEWLINK, 7);
        d.extend(msg(RTM_DELADDR, 9));
        d.extend(msg(3, 11)); // NLMSG_DONE: not a change
        assert_eq!(indices(&d), vec![7, 9]);
        for cut in [0, 15, 20, 31] {
            assert!(indices(&msg(RTM_NEWLINK, 7)[..cut]).is_empty());
        }
        let mut lying = msg(RTM_NEWLINK, 7);
        lying[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(indices(&lying).is_empty());
    }
}

//! What dynamic addresses need of the kernel: an address installed with
//! lifetimes (a DHCP lease: valid for the lease, renewed in place), and a
//! packet socket on an interface (a DHCP client speaks before it has an
//! address, so it builds its own IPv4 and UDP headers).
//!
//! Kept apart from `netlink.rs` on purpose: its own small `NETLINK_ROUTE`
//! socket, so this module does not depend on how that one is built.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::KernelError;

const RTM_NEWADDR: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_CACHEINFO: u16 = 6;

fn io(op: &str) -> KernelError {
    KernelError::Io { op: op.into(), source: std::io::Error::last_os_error() }
}

fn socket(domain: i32, ty: i32, proto: i32, op: &str) -> Result<OwnedFd, KernelError> {
    // SAFETY: plain socket(2); the result is checked.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io(op));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Addresses with lifetimes, over a socket of their own.
#[derive(Debug)]
pub struct Lifetimes {
    fd: OwnedFd,
}

impl Lifetimes {
    /// Opens the socket in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        let fd = socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE, "open rtnetlink")?;
        let tv = libc::timeval { tv_sec: 5, tv_usec: 0 };
        // SAFETY: setsockopt reading a timeval of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io("bound rtnetlink waits"));
        }
        Ok(Self { fd })
    }

    /// Installs `ip/prefix` on interface `index`, valid for `valid` and
    /// preferred for `preferred` seconds (the kernel removes it when
    /// `valid` runs out); an address already there gets these lifetimes.
    pub fn set(
        &self,
        index: u32,
        ip: IpAddr,
        prefix: u8,
        valid: u32,
        preferred: u32,
    ) -> Result<(), KernelError> {
        let op = format!("install {ip}/{prefix} for {valid} s");
        let (family, bytes) = match ip {
            IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
            IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
        };
        // struct ifaddrmsg, then the attributes.
        let mut body = vec![family, prefix, 0, 0];
        body.extend_from_slice(&index.to_ne_bytes());
        let mut cache = Vec::with_capacity(16);
        for v in [preferred, valid, 0, 0] {
            cache.extend_from_slice(&v.to_ne_bytes());
        }
        for (ty, data) in
            [(IFA_LOCAL, &bytes[..]), (IFA_ADDRESS, &bytes[..]), (IFA_CACHEINFO, &cache[..])]
        {
            if ty == IFA_LOCAL && family != libc::AF_INET as u8 {
                continue;
            }
            body.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&ty.to_ne_bytes());
            body.extend_from_slice(data);
            body.resize((body.len() + 3) & !3, 0);
        }
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        let mut msg = Vec::with_capacity(16 + body.len());
        msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        msg.extend_from_slice(&RTM_NEWADDR.to_ne_bytes());
        msg.extend_from_slice(&flags.to_ne_bytes());
        msg.extend_from_slice(&1u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&body);
        // SAFETY: the kernel as destination (zeroed sockaddr_nl); msg is
        // valid for its length.
        let n = unsafe {
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if n < 0 {
            return Err(io(&op));
        }
        let mut buf = [0u8; 1024];
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 20 {
            return Err(io(&op));
        }
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        let code = i32::from_ne_bytes(buf[16..20].try_into().expect("4 bytes"));
        match (ty, code) {
            (NLMSG_ERROR, 0) => Ok(()),
            (NLMSG_ERROR, c) if c.wrapping_neg() == libc::ENODEV => {
                Err(KernelError::NotFound { what: format!("interface {index}") })
            }
            (NLMSG_ERROR, c) => Err(KernelError::Refused {
                op,
                source: std::io::Error::from_raw_os_error(c.wrapping_neg()),
            }),
            _ => Err(KernelError::Io {
                op,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not an ack"),
            }),
        }
    }
}

/// An `AF_PACKET` datagram socket on one interface for one ethertype: the
/// kernel adds and strips the Ethernet header.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    index: u32,
    ethertype: u16,
}

impl PacketSocket {
    /// Opens it on interface `index` for `ethertype` (e.g. 0x0800).
    pub fn open(index: u32, ethertype: u16) -> Result<Self, KernelError> {
        let proto = i32::from(ethertype.to_be());
        let fd = socket(libc::AF_PACKET, libc::SOCK_DGRAM, proto, "open a packet socket")?;
        // SAFETY: a zeroed sockaddr_ll filled in; valid for its size.
        let rc = unsafe {
            let mut sa: libc::sockaddr_ll = std::mem::zeroed();
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_protocol = ethertype.to_be();
            sa.sll_ifindex = index as i32;
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io(&format!("bind a packet socket to interface {index}")));
        }
        Ok(Self { fd, index, ethertype })
    }

    /// Sends `payload` to `mac` (ff:ff:ff:ff:ff:ff to broadcast).
    pub fn send(&self, mac: [u8; 6], payload: &[u8]) -> Result<(), KernelError> {
        // SAFETY: as in `open`; payload is valid for its length.
        let n = unsafe {
            let mut sa: libc::sockaddr_ll = std::mem::zeroed();
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_protocol = self.ethertype.to_be();
            sa.sll_ifindex = self.index as i32;
            sa.sll_halen = 6;
            sa.sll_addr[..6].copy_from_slice(&mac);
            libc::sendto(
                self.fd.as_raw_fd(),
                payload.as_ptr().cast(),
                payload.len(),
                0,
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if n < 0 {
            return Err(io("send on a packet socket"));
        }
        Ok(())
    }

    /// The next packet into `buf`: its length and sender's MAC. `None`
    /// at `deadline`, or when `stop` becomes readable.
    pub fn recv(
        &self,
        buf: &mut [u8],
        deadline: Instant,
        stop: RawFd,
    ) -> Result<Option<(usize, [u8; 6])>, KernelError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut fds = [
                libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
            ];
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: two valid pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(io("poll a packet socket"));
            }
            if fds[1].revents != 0 {
                return Ok(None);
            }
            if fds[0].revents == 0 {
                continue;
            }
            // SAFETY: buf and sa valid for their sizes.
            let (n, sa) = unsafe {
                let mut sa: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                let n = libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut sa as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                );
                (n, sa)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    continue;
                }
                return Err(KernelError::Io { op: "read a packet socket".into(), source: e });
            }
            // Our own transmissions come back as PACKET_OUTGOING.
            if sa.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&sa.sll_addr[..6]);
            return Ok(Some((n as usize, mac)));
        }
    }
}

//! A packet socket on an interface, for what speaks before the interface
//! has an address: netadmd's DHCP client builds its own IPv4 and UDP
//! headers. A socket belongs to the network namespace it was made in:
//! for an interface in a zone, open it on a thread inside the zone
//! ([`crate::Netns::run`]); it is used from any thread after that. (The
//! lease itself is installed over the interface's rtnetlink connection:
//! [`crate::Netlink::set_address_lifetimes`].)

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::KernelError;

fn io(op: &str) -> KernelError {
    KernelError::Io { op: op.into(), source: std::io::Error::last_os_error() }
}

/// Binds packet socket `fd` to interface `index` for `protocol` (network
/// order).
fn bind(fd: &OwnedFd, index: u32, protocol: u16) -> Result<(), KernelError> {
    netadm_nic::packet_socket::bind(fd.as_raw_fd(), index, protocol).map_err(|source| {
        KernelError::Io { op: format!("bind a packet socket to interface {index}"), source }
    })
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
        bind(&fd, index, ethertype.to_be())?;
        Ok(Self { fd, index, ethertype })
    }

    /// Opens one on interface `index` that sees every frame of
    /// `ethertype` the interface receives, also those a master takes for
    /// itself before protocol handlers see them (a bond's port: the bond
    /// consumes LACPDUs, so a socket of [`PacketSocket::open`] never gets
    /// them). It taps every frame (`ETH_P_ALL`) through a filter that
    /// keeps `ethertype` only, attached before the socket is bound so that
    /// no other frame is ever queued.
    pub fn open_tap(index: u32, ethertype: u16) -> Result<Self, KernelError> {
        let fd = socket(libc::AF_PACKET, libc::SOCK_DGRAM, 0, "open a packet socket")?;
        // ldh [protocol] (the ancillary load: host order); keep it whole
        // if it is `ethertype`, else drop it.
        let mut code = [
            libc::sock_filter { code: 0x28, jt: 0, jf: 0, k: 0xffff_f000 },
            libc::sock_filter { code: 0x15, jt: 0, jf: 1, k: u32::from(ethertype) },
            libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0xffff },
            libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0 },
        ];
        let prog = libc::sock_fprog { len: code.len() as u16, filter: code.as_mut_ptr() };
        // SAFETY: a valid program for its stated length, copied by the
        // kernel during the call.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&prog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as u32,
            )
        };
        if rc < 0 {
            return Err(io("attach a filter to a packet socket"));
        }
        let all = (libc::ETH_P_ALL as u16).to_be();
        bind(&fd, index, all)?;
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

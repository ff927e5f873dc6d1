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

/// One classic BPF instruction.
fn filter(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Attaches classic BPF program `code` to socket `fd`.
fn attach(fd: &OwnedFd, code: &mut [libc::sock_filter]) -> Result<(), KernelError> {
    let prog = libc::sock_fprog { len: code.len() as u16, filter: code.as_mut_ptr() };
    // SAFETY: a valid program for its stated length, copied by the kernel
    // during the call.
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
    Ok(())
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
        // ldh [protocol] (the ancillary load: host order); keep it whole
        // if it is `ethertype`, else drop it.
        let mut code = [
            filter(0x28, 0, 0, 0xffff_f000),
            filter(0x15, 0, 1, u32::from(ethertype)),
            filter(0x06, 0, 0, 0xffff),
            filter(0x06, 0, 0, 0),
        ];
        Self::open_filtered(index, libc::ETH_P_ALL as u16, ethertype, &mut code)
    }

    /// A socket on interface `index` for `bound` (an ethertype, or
    /// `ETH_P_ALL`), sending as `ethertype`, whose queue only what `code`
    /// keeps reaches: the filter is attached before the socket is bound,
    /// so no other frame is ever queued.
    fn open_filtered(
        index: u32,
        bound: u16,
        ethertype: u16,
        code: &mut [libc::sock_filter],
    ) -> Result<Self, KernelError> {
        let fd = socket(libc::AF_PACKET, libc::SOCK_DGRAM, 0, "open a packet socket")?;
        attach(&fd, code)?;
        bind(&fd, index, bound.to_be())?;
        Ok(Self { fd, index, ethertype })
    }

    /// Opens one on interface `index` for IPv4 that is given only UDP to
    /// port `port` (a DHCP client's 68), unfragmented: a filter attached
    /// before it is bound keeps the rest of the interface's traffic out
    /// of its queue, which a busy interface fills (its answers dropped
    /// behind the rest), and out of its reader's wake-ups.
    pub fn open_udp4(index: u32, port: u16) -> Result<Self, KernelError> {
        // A datagram socket's filter sees the frame from its IPv4 header.
        let mut code = [
            // ldb [9]: the protocol; UDP or drop.
            filter(0x30, 0, 0, 9),
            filter(0x15, 0, 6, u32::from(libc::IPPROTO_UDP as u8)),
            // ldh [6]: any fragment (more to come, or an offset) dropped.
            filter(0x28, 0, 0, 6),
            filter(0x45, 4, 0, 0x3fff),
            // ldxb 4*([0]&0xf): the header's length; ldh [x+2]: the
            // destination port.
            filter(0xb1, 0, 0, 0),
            filter(0x48, 0, 0, 2),
            filter(0x15, 0, 1, u32::from(port)),
            filter(0x06, 0, 0, 0xffff_ffff),
            filter(0x06, 0, 0, 0),
        ];
        Self::open_filtered(index, 0x0800, 0x0800, &mut code)
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

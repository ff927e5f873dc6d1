//! One long-lived `NETLINK_ROUTE` socket and the few requests netadm makes.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use crate::KernelError;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_DUMP: u16 = 0x300;
pub(crate) const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_NEWADDR: u16 = 20;
pub(crate) const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFF_UP: u32 = 1;

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelLink {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// MTU.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// MAC address.
    pub mac: [u8; 6],
}

/// The rtnetlink handle: one socket for the daemon's life; requests are
/// serialised (each waits for its acknowledgement).
#[derive(Debug)]
pub struct Netlink {
    fd: OwnedFd,
    seq: Mutex<u32>,
}

fn align(n: usize) -> usize {
    (n + 3) & !3
}

fn attr(buf: &mut Vec<u8>, ty: u16, data: &[u8]) {
    let len = 4 + data.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(data);
    buf.resize(align(buf.len()), 0);
}

/// Iterates the attributes in `b`: (type, data).
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let ty = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff;
        if len < 4 || len > b.len() {
            return None;
        }
        let data = &b[4..len];
        b = &b[align(len).min(b.len())..];
        Some((ty, data))
    })
}

/// Takes the messages of one datagram that answer request `seq`: their
/// payloads go to `out`; returns whether the answer is complete (the
/// acknowledgement or the end of a dump). Every length is checked: a
/// message cut short ends the datagram, an error without its code is
/// malformed.
fn take_replies(
    mut b: &[u8],
    seq: u32,
    op: &str,
    out: &mut Vec<Vec<u8>>,
) -> Result<bool, KernelError> {
    while b.len() >= 16 {
        let len = u32::from_ne_bytes(b[0..4].try_into().expect("4 bytes")) as usize;
        let mty = u16::from_ne_bytes([b[4], b[5]]);
        let mseq = u32::from_ne_bytes(b[8..12].try_into().expect("4 bytes"));
        if len < 16 || len > b.len() {
            break;
        }
        let payload = &b[16..len];
        b = &b[align(len).min(b.len())..];
        if mseq != seq {
            continue; // a late reply to an earlier request
        }
        match mty {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let Some(code) = payload.get(0..4) else {
                    return Err(malformed(op, "an error message without its code"));
                };
                let code = i32::from_ne_bytes(code.try_into().expect("4 bytes"));
                if code == 0 {
                    return Ok(true);
                }
                return Err(errno(code.wrapping_neg(), op));
            }
            _ => out.push(payload.to_vec()),
        }
    }
    Ok(false)
}

/// How long a request waits for the kernel's answer.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A reply the kernel should never send.
fn malformed(op: &str, what: &str) -> KernelError {
    KernelError::Io {
        op: op.into(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("malformed reply: {what}"),
        ),
    }
}

fn ip_bytes(ip: IpAddr) -> (u8, Vec<u8>) {
    match ip {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    }
}

impl Netlink {
    /// Opens the socket in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        // SAFETY: plain socket(2); the result is checked.
        let fd = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
        };
        if fd < 0 {
            return Err(KernelError::Io {
                op: "open rtnetlink".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Every wait for the kernel's answer is bounded: a request is
        // made under the mutation lock, which must never be held forever.
        let tv = libc::timeval { tv_sec: REPLY_TIMEOUT.as_secs() as libc::time_t, tv_usec: 0 };
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
            return Err(KernelError::Io {
                op: "bound rtnetlink waits".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Self { fd, seq: Mutex::new(0) })
    }

    /// Sends one request and collects its replies until the kernel's
    /// acknowledgement (or the end of a dump).
    fn request(
        &self,
        ty: u16,
        flags: u16,
        body: &[u8],
        op: &str,
    ) -> Result<Vec<Vec<u8>>, KernelError> {
        let mut seq = self.seq.lock().unwrap();
        *seq = seq.wrapping_add(1);
        let mut msg = Vec::with_capacity(16 + body.len());
        msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        msg.extend_from_slice(&ty.to_ne_bytes());
        msg.extend_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(body);
        // SAFETY: sockaddr_nl zeroed is the kernel as destination.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: msg and sa are valid for the lengths given.
        let n = unsafe {
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
            return Err(KernelError::Io { op: op.into(), source: std::io::Error::last_os_error() });
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: buf is valid for its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                let source = if e.kind() == std::io::ErrorKind::WouldBlock {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the kernel did not answer within {REPLY_TIMEOUT:?}"),
                    )
                } else {
                    e
                };
                return Err(KernelError::Io { op: op.into(), source });
            }
            if take_replies(&buf[..n as usize], *seq, op, &mut out)? {
                return Ok(out);
            }
        }
    }

    /// The index of interface `name`.
    pub fn index(&self, name: &str) -> Result<u32, KernelError> {
        let c = std::ffi::CString::new(name)
            .map_err(|_| KernelError::BadName { name: name.into(), reason: "contains NUL" })?;
        // SAFETY: c is a valid C string.
        let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if i == 0 {
            return Err(KernelError::NotFound { what: format!("interface {name}") });
        }
        Ok(i)
    }

    /// Reads a link back.
    pub fn link(&self, index: u32) -> Result<KernelLink, KernelError> {
        let mut body = vec![0u8; 16];
        body[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
        let replies = self.request(RTM_GETLINK, 0, &body, &format!("read link {index}"))?;
        let r = replies
            .first()
            .ok_or_else(|| KernelError::NotFound { what: format!("link {index}") })?;
        if r.len() < 16 {
            return Err(malformed(&format!("read link {index}"), "a link message cut short"));
        }
        let flags = u32::from_ne_bytes(r[8..12].try_into().expect("4 bytes"));
        let mut l =
            KernelLink { index, name: String::new(), mtu: 0, up: flags & IFF_UP != 0, mac: [0; 6] };
        for (ty, d) in attrs(&r[16..]) {
            match ty {
                IFLA_IFNAME => {
                    l.name =
                        String::from_utf8_lossy(d.split(|&b| b == 0).next().unwrap_or(&[])).into()
                }
                IFLA_MTU if d.len() >= 4 => l.mtu = u32::from_ne_bytes(d[..4].try_into().unwrap()),
                IFLA_ADDRESS if d.len() == 6 => l.mac.copy_from_slice(d),
                _ => {}
            }
        }
        Ok(l)
    }

    /// Sets a link up or down and/or its MTU.
    pub fn set_link(
        &self,
        index: u32,
        up: Option<bool>,
        mtu: Option<u32>,
    ) -> Result<(), KernelError> {
        let mut body = vec![0u8; 16];
        body[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
        if let Some(up) = up {
            body[8..12].copy_from_slice(&(if up { IFF_UP } else { 0 }).to_ne_bytes());
            body[12..16].copy_from_slice(&IFF_UP.to_ne_bytes());
        }
        if let Some(m) = mtu {
            attr(&mut body, IFLA_MTU, &m.to_ne_bytes());
        }
        self.request(RTM_NEWLINK, 0, &body, &format!("configure link {index}")).map(drop)
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&self, index: u32, mac: [u8; 6]) -> Result<(), KernelError> {
        let mut body = vec![0u8; 16];
        body[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
        attr(&mut body, IFLA_ADDRESS, &mac);
        self.request(RTM_NEWLINK, 0, &body, &format!("set the MAC of link {index}")).map(drop)
    }

    fn addr_body(index: u32, ip: IpAddr, prefix: u8) -> Vec<u8> {
        let (family, bytes) = ip_bytes(ip);
        let mut body = vec![family, prefix, 0, 0];
        body.extend_from_slice(&index.to_ne_bytes());
        if family == libc::AF_INET as u8 {
            attr(&mut body, IFA_LOCAL, &bytes);
        }
        attr(&mut body, IFA_ADDRESS, &bytes);
        body
    }

    /// Adds an address; one already present is [`KernelError::Exists`].
    pub fn add_addr(&self, index: u32, ip: IpAddr, prefix: u8) -> Result<(), KernelError> {
        let body = Self::addr_body(index, ip, prefix);
        self.request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &body, &format!("add {ip}/{prefix}"))
            .map(drop)
            .map_err(|e| match e {
                KernelError::Exists { .. } => KernelError::Exists { what: format!("address {ip}") },
                e => e,
            })
    }

    /// Removes an address.
    pub fn del_addr(&self, index: u32, ip: IpAddr, prefix: u8) -> Result<(), KernelError> {
        let body = Self::addr_body(index, ip, prefix);
        self.request(RTM_DELADDR, 0, &body, &format!("remove {ip}/{prefix}")).map(drop)
    }

    /// The addresses on a link.
    pub fn addrs(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, KernelError> {
        let body = vec![0u8; 8];
        let replies = self.request(RTM_GETADDR, NLM_F_DUMP, &body, "list addresses")?;
        let mut out = Vec::new();
        for r in replies {
            if r.len() < 8 || u32::from_ne_bytes(r[4..8].try_into().unwrap()) != index {
                continue;
            }
            let (family, prefix) = (r[0], r[1]);
            for (ty, d) in attrs(&r[8..]) {
                let want = if family == libc::AF_INET as u8 { IFA_LOCAL } else { IFA_ADDRESS };
                if ty != want {
                    continue;
                }
                let ip = match d.len() {
                    4 => IpAddr::from(<[u8; 4]>::try_from(d).unwrap()),
                    16 => IpAddr::from(<[u8; 16]>::try_from(d).unwrap()),
                    _ => continue,
                };
                out.push((ip, prefix));
            }
        }
        Ok(out)
    }
}

fn errno(code: i32, op: &str) -> KernelError {
    let source = std::io::Error::from_raw_os_error(code);
    match code {
        libc::EEXIST => KernelError::Exists { what: op.into() },
        libc::ENODEV | libc::EADDRNOTAVAIL | libc::ESRCH => {
            KernelError::NotFound { what: op.into() }
        }
        _ => KernelError::Refused { op: op.into(), source },
    }
}

#[cfg(test)]
mod hostile;

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ty: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(payload);
        m.resize(align(m.len()), 0);
        m
    }

    #[test]
    fn replies_are_parsed_with_every_length_checked() {
        let mut out = vec![];
        // Data for us, a late reply to another request, then the ack.
        let mut d = msg(16, 7, b"link");
        d.extend(msg(16, 6, b"stale"));
        d.extend(msg(NLMSG_ERROR, 7, &0i32.to_ne_bytes()));
        assert!(take_replies(&d, 7, "t", &mut out).unwrap());
        assert_eq!(out, vec![b"link".to_vec()]);
        // An error code is typed.
        let e =
            take_replies(&msg(NLMSG_ERROR, 1, &(-libc::EEXIST).to_ne_bytes()), 1, "t", &mut out);
        assert!(matches!(e, Err(KernelError::Exists { .. })), "{e:?}");
        // Hostile or truncated datagrams: never a panic.
        let short_error = msg(NLMSG_ERROR, 1, &[1, 2]);
        assert!(matches!(
            take_replies(&short_error, 1, "t", &mut out),
            Err(KernelError::Io { .. })
        ));
        for cut in [0, 3, 15, 17] {
            let d = msg(16, 1, b"abcdef");
            assert!(!take_replies(&d[..cut.min(d.len())], 1, "t", &mut out).unwrap());
        }
        let mut lying = msg(16, 1, b"x");
        lying[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(!take_replies(&lying, 1, "t", &mut out).unwrap());
        assert!(attrs(&[8, 0, 1, 0]).next().is_none(), "an attribute longer than its buffer");
    }
}

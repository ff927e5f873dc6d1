//! A raw `AF_PACKET` socket on one interface: what the far side of a wire
//! sees (tags included, which the kernel takes off and reports beside the
//! frame) and what it sends; also the `kernel` benchmark's floor
//! forwarder's socket.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::Error;

/// A frame as the far side's wire carried it: the kernel takes a tag off
/// as a frame arrives and reports it beside the frame (auxdata).
#[derive(Debug)]
pub struct Seen {
    /// (TPID, TCI) of its tag, if it had one.
    pub tag: Option<(u16, u16)>,
    /// The frame without its tag.
    pub frame: Vec<u8>,
}

/// A raw packet socket bound to one interface.
#[derive(Debug)]
pub struct Raw(OwnedFd);

fn os(call: String) -> Error {
    Error::Os { call, source: std::io::Error::last_os_error() }
}

impl Raw {
    /// Binds one to interface `dev` of this thread's network namespace:
    /// every frame, not its own transmissions. (In a namespace of a
    /// test's: [`crate::Netns::enter`]; the socket stays there.)
    pub fn bind(dev: &str) -> Result<Self, Error> {
        let name = std::ffi::CString::new(dev).map_err(|e| Error::Os {
            call: format!("interface name {dev:?}"),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
        })?;
        // SAFETY: if_nametoindex reads a NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(os(format!("no interface {dev}")));
        }
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2); checked.
        let fd = unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, all.into())
        };
        if fd < 0 {
            return Err(os("socket(AF_PACKET)".into()));
        }
        // SAFETY: a fresh descriptor we own.
        let raw = Raw(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: an all-zero sockaddr_ll is valid.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        (sa.sll_family, sa.sll_protocol, sa.sll_ifindex) =
            (libc::AF_PACKET as u16, all, index as i32);
        let len = std::mem::size_of_val(&sa) as u32;
        // SAFETY: bind(2) with a sockaddr_ll of the length given.
        if unsafe { libc::bind(fd, (&raw const sa).cast(), len) } < 0 {
            return Err(os(format!("bind to {dev}")));
        }
        raw.set(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1)?;
        Ok(raw)
    }

    /// Binds one (see [`Raw::bind`]) in namespace `ns` on `dev` that also
    /// reports each frame's VLAN tag and returns from a read within
    /// 100 ms, so that a loop can watch its deadline; panics on failure.
    pub fn open(ns: &str, dev: &str) -> Self {
        let raw = crate::enter(ns, || {
            let raw = Raw::bind(dev)?;
            raw.set(libc::SOL_PACKET, libc::PACKET_AUXDATA, &1)?;
            let tv = libc::timeval { tv_sec: 0, tv_usec: 100_000 };
            raw.set(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
            Ok::<_, Error>(raw)
        });
        raw.unwrap_or_else(|e| panic!("{dev} in {ns}: {e}"))
    }

    /// Receives every frame on the wire, whatever its destination MAC.
    pub fn promiscuous(&self) -> Result<(), Error> {
        // SAFETY: an all-zero packet_mreq is valid.
        let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mr.mr_ifindex = self.index()?;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        self.set(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)
    }

    /// Carries offloads as netadm's afpacket wire does: every frame read
    /// or sent starts with a virtio-net header (superframes and partial
    /// checksums pass as between a veth's ends), and the receive buffer
    /// holds a burst of superframes (16 MiB; the default holds three).
    pub fn like_a_wire(&self) -> Result<(), Error> {
        self.set(libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1)?;
        let room: libc::c_int = 16 << 20;
        self.set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &room)
    }

    /// Reads and sends return at once when they would wait.
    pub fn nonblocking(&self) -> Result<(), Error> {
        let fd = self.0.as_raw_fd();
        // SAFETY: fcntl(2) on a descriptor we own.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if ok { Ok(()) } else { Err(os("fcntl(O_NONBLOCK)".into())) }
    }

    /// The interface index it is bound to.
    fn index(&self) -> Result<i32, Error> {
        // SAFETY: an all-zero sockaddr_ll is valid; getsockname fills it
        // within the length given.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&sa) as u32;
        // SAFETY: as above.
        let rc = unsafe { libc::getsockname(self.0.as_raw_fd(), (&raw mut sa).cast(), &mut len) };
        if rc < 0 {
            return Err(os("getsockname".into()));
        }
        Ok(sa.sll_ifindex)
    }

    /// setsockopt(2) of `value`.
    fn set<T>(&self, level: libc::c_int, opt: libc::c_int, value: &T) -> Result<(), Error> {
        let len = std::mem::size_of::<T>() as u32;
        // SAFETY: `value` is valid for its size, which is what is passed.
        let rc = unsafe {
            libc::setsockopt(self.0.as_raw_fd(), level, opt, (value as *const T).cast(), len)
        };
        if rc < 0 { Err(os(format!("setsockopt({level}, {opt})"))) } else { Ok(()) }
    }

    /// The next frame, or `None` after 100 ms without one.
    pub fn recv(&self) -> Option<Seen> {
        let mut buf = vec![0u8; 65536];
        let mut ctl = [0u64; 16];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: msghdr zeroed then pointed at live buffers; the control
        // messages are walked within what the kernel filled in.
        unsafe {
            let mut m: libc::msghdr = std::mem::zeroed();
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
            m.msg_control = ctl.as_mut_ptr().cast();
            m.msg_controllen = std::mem::size_of_val(&ctl);
            let n = libc::recvmsg(self.0.as_raw_fd(), &mut m, 0);
            if n < 0 {
                return None;
            }
            buf.truncate(n as usize);
            let mut tag = None;
            let mut c = libc::CMSG_FIRSTHDR(&m);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                    let a: libc::tpacket_auxdata =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if a.tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
                        let tpid = if a.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                            a.tp_vlan_tpid
                        } else {
                            0x8100
                        };
                        tag = Some((tpid, a.tp_vlan_tci));
                    }
                }
                c = libc::CMSG_NXTHDR(&m, c);
            }
            Some(Seen { tag, frame: buf })
        }
    }

    /// Sends `frame` as it is.
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: a bound packet socket and a live buffer.
        let n = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(n, frame.len() as isize, "{}", std::io::Error::last_os_error());
    }
}

impl AsRawFd for Raw {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

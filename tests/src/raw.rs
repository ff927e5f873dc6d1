//! A raw `AF_PACKET` socket on an interface in a network namespace a test
//! made: what a far side of a wire sees (tags included, which the kernel
//! takes off and reports beside the frame) and what it sends.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const ETH_P_ALL: u16 = 0x0003;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_VLAN_VALID: u32 = 0x10;
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;

/// `struct tpacket_auxdata` from linux/if_packet.h.
#[repr(C)]
#[derive(Clone, Copy)]
struct Auxdata {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// A frame as the far side's wire carried it: the kernel takes a tag off
/// as a frame arrives and reports it beside the frame (auxdata).
pub struct Seen {
    /// (TPID, TCI) of its tag, if it had one.
    pub tag: Option<(u16, u16)>,
    /// The frame without its tag.
    pub frame: Vec<u8>,
}

/// A raw socket on a veth end in another namespace.
pub struct Raw(OwnedFd);

impl Raw {
    /// Opens it in namespace `ns` (from a thread that enters `ns`; the
    /// socket stays there) on interface `dev`.
    pub fn open(ns: &str, dev: &str) -> Self {
        let (ns, dev) = (ns.to_owned(), dev.to_owned());
        std::thread::spawn(move || {
            let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            // SAFETY: setns on a namespace fd we hold; it changes only
            // this thread's network namespace, and the thread ends here.
            assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
            let name = std::ffi::CString::new(dev.clone()).unwrap();
            // SAFETY: a NUL-terminated name.
            let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
            assert!(index > 0, "{dev} in {ns}");
            // SAFETY: plain socket calls on a descriptor we own, with
            // structures sized as the kernel expects.
            unsafe {
                let fd =
                    libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(ETH_P_ALL.to_be()));
                assert!(fd >= 0, "{}", std::io::Error::last_os_error());
                let sock = OwnedFd::from_raw_fd(fd);
                let mut sa: libc::sockaddr_ll = std::mem::zeroed();
                sa.sll_family = libc::AF_PACKET as u16;
                sa.sll_protocol = ETH_P_ALL.to_be();
                sa.sll_ifindex = index as i32;
                let rc = libc::bind(
                    fd,
                    (&sa as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                );
                assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                let one: libc::c_int = 1;
                for (level, opt) in
                    [(libc::SOL_PACKET, PACKET_AUXDATA), (libc::SOL_PACKET, PACKET_IGNORE_OUTGOING)]
                {
                    let rc = libc::setsockopt(
                        fd,
                        level,
                        opt,
                        (&one as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as u32,
                    );
                    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                }
                // Reads return within 100 ms, so a loop can watch its
                // deadline.
                let tv = libc::timeval { tv_sec: 0, tv_usec: 100_000 };
                let rc = libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&tv as *const libc::timeval).cast(),
                    std::mem::size_of::<libc::timeval>() as u32,
                );
                assert_eq!(rc, 0);
                Raw(sock)
            }
        })
        .join()
        .unwrap()
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
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    let a: Auxdata = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if a.status & TP_STATUS_VLAN_VALID != 0 {
                        let tpid = if a.status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            a.vlan_tpid
                        } else {
                            0x8100
                        };
                        tag = Some((tpid, a.vlan_tci));
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

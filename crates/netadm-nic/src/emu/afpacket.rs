//! The afpacket wire's socket: a port wired to a host interface through an
//! `AF_PACKET` socket, which the engine thread itself writes (a
//! virtio-net header with each frame, so superframes and partial
//! checksums pass whole) and reads (`recvmmsg` in batches, or straight
//! into posted RX buffers while superframes come). Here are the system
//! calls; where the frames go is the engine's.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::offload::{Offload, VNET_HDR_LEN};

/// Frames one `recvmmsg(2)` reads off an afpacket wire at most, and the
/// room for each: a virtio-net header and the largest superframe.
pub(super) const PACKET_BATCH: usize = 8;
pub(super) const PACKET_SLOT: usize = VNET_HDR_LEN + 65536 + 1024;

/// A frame off an afpacket wire at least this long (a GSO superframe)
/// makes the next read go straight into the posted buffers of the RX
/// queue it went to; a shorter one returns reads to the batch.
pub(super) const DIRECT_MIN: usize = 16 * 1024;

/// Opens the socket of a port wired to host interface `ifname` (in the
/// calling thread's network namespace): bound to it, promiscuous, not
/// seeing its own transmissions, a virtio-net header with every frame
/// either way, VLAN tags reported, room for bursts of superframes.
pub(super) fn open(ifname: &str) -> std::io::Result<OwnedFd> {
    let c = std::ffi::CString::new(ifname).map_err(std::io::Error::other)?;
    // SAFETY: c is a valid C string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(std::io::Error::other(format!("no interface {ifname}")));
    }
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket(2); checked.
    let fd = unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(proto))
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    crate::packet_socket::bind(fd, index, proto)?;
    // Not seeing our own transmissions.
    setsockopt_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    // Every frame either way carries a virtio-net header: superframes
    // and partial checksums pass as they do between a veth's ends.
    setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
    // The kernel takes an 802.1Q tag off a frame as it arrives and
    // keeps it beside the frame: have it told (auxdata) so the tag is
    // put back, as the wire carried it.
    setsockopt_int(fd, libc::SOL_PACKET, PACKET_AUXDATA, 1)?;
    // Room for a burst of superframes while the reader is off the CPU
    // (the default, ~200 KiB, holds three); what overflows anyway is
    // read back from PACKET_STATISTICS and counted as wire drops.
    // FORCE needs CAP_NET_ADMIN; the plain option (capped by rmem_max)
    // is the fallback.
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20)
        .or_else(|_| setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 16 << 20))?;
    // SAFETY: packet_mreq for PACKET_MR_PROMISC on the interface.
    let rc = unsafe {
        let mut mr: libc::packet_mreq = std::mem::zeroed();
        mr.mr_ifindex = index as i32;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            (&mr as *const libc::packet_mreq).cast(),
            std::mem::size_of::<libc::packet_mreq>() as u32,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(sock)
}

/// Sends `frame` with its virtio-net header, without blocking; false if
/// the socket did not take it.
pub(super) fn send(sock: RawFd, frame: &[u8], off: Offload) -> bool {
    let hdr = off.to_vnet();
    let mut iov = [
        libc::iovec { iov_base: hdr.as_ptr() as *mut _, iov_len: hdr.len() },
        libc::iovec { iov_base: frame.as_ptr() as *mut _, iov_len: frame.len() },
    ];
    // SAFETY: a zeroed msghdr pointing at two valid iovecs that
    // outlive the call; our own socket.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = 2;
        libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT)
    };
    n >= 0
}

/// What one read off the socket brought.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Read {
    /// Bytes read, virtio-net header included.
    pub(super) len: usize,
    /// The socket cut the frame short: it was larger than the room.
    pub(super) truncated: bool,
    /// The VLAN tag control word and TPID the kernel took off the frame.
    pub(super) vlan: Option<(u16, u16)>,
}

/// Reads up to [`PACKET_BATCH`] frames without blocking (`recvmmsg`), the
/// `i`th into `bufs[i * PACKET_SLOT..]`; how many, and what each was.
pub(super) fn recv_batch(sock: RawFd, bufs: &mut [u8]) -> ([Read; PACKET_BATCH], usize) {
    assert!(bufs.len() >= PACKET_BATCH * PACKET_SLOT, "room for a batch");
    let base = bufs.as_mut_ptr();
    let mut iov: [libc::iovec; PACKET_BATCH] = std::array::from_fn(|i| libc::iovec {
        // SAFETY: within `bufs`, which holds PACKET_BATCH slots.
        iov_base: unsafe { base.add(i * PACKET_SLOT) }.cast(),
        iov_len: PACKET_SLOT,
    });
    // SAFETY: mmsghdr is plain data; all-zero is a valid value.
    let mut msgs: [libc::mmsghdr; PACKET_BATCH] = unsafe { std::mem::zeroed() };
    let mut aux = [AuxBuf::default(); PACKET_BATCH];
    for ((m, v), a) in msgs.iter_mut().zip(iov.iter_mut()).zip(aux.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = a.as_mut_ptr().cast();
        m.msg_hdr.msg_controllen = std::mem::size_of::<AuxBuf>();
    }
    // SAFETY: PACKET_BATCH headers, each with one iovec into a
    // distinct slot of `bufs`, all outliving the call.
    let got = unsafe {
        libc::recvmmsg(
            sock,
            msgs.as_mut_ptr(),
            PACKET_BATCH as u32,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    let mut reads = [Read::default(); PACKET_BATCH];
    let got = usize::try_from(got).unwrap_or(0);
    for (r, m) in reads.iter_mut().zip(&msgs).take(got) {
        *r = Read {
            len: m.msg_len as usize,
            truncated: m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            vlan: auxdata_vlan(&m.msg_hdr),
        };
    }
    (reads, got)
}

/// Reads one frame without blocking (`recvmsg`): its virtio-net header
/// into `hdr`, the frame into the `room` bytes at `buf`. None when nothing
/// was read.
///
/// # Safety
///
/// `buf` is valid for writes of `room` bytes, and nothing else reads or
/// writes them during the call.
pub(super) unsafe fn recv_into(
    sock: RawFd,
    hdr: &mut [u8; VNET_HDR_LEN],
    buf: *mut u8,
    room: usize,
) -> Option<Read> {
    let mut iov = [
        libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: VNET_HDR_LEN },
        libc::iovec { iov_base: buf.cast(), iov_len: room },
    ];
    let mut aux = AuxBuf::default();
    // SAFETY: msghdr is plain data; all-zero is a valid value.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = 2;
    m.msg_control = aux.as_mut_ptr().cast();
    m.msg_controllen = std::mem::size_of::<AuxBuf>();
    // SAFETY: the header's iovecs point at `hdr` and at the caller's
    // `room` bytes, all outliving the call.
    let got = unsafe { libc::recvmsg(sock, &mut m, libc::MSG_DONTWAIT) };
    let len = usize::try_from(got).ok().filter(|&n| n > 0)?;
    Some(Read { len, truncated: m.msg_flags & libc::MSG_TRUNC != 0, vlan: auxdata_vlan(&m) })
}

/// `PACKET_IGNORE_OUTGOING` from linux/if_packet.h (Linux 4.20), which
/// this libc does not export at its top level.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// `PACKET_AUXDATA` from linux/if_packet.h: a `tpacket_auxdata` control
/// message with each frame read.
const PACKET_AUXDATA: libc::c_int = 8;

/// `TP_STATUS_VLAN_VALID` from linux/if_packet.h: the frame came with a
/// VLAN tag, which the kernel took off (`tp_vlan_tci`).
const TP_STATUS_VLAN_VALID: u32 = 0x10;

/// `TP_STATUS_VLAN_TPID_VALID`: `tp_vlan_tpid` is set.
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;

/// `struct tpacket_auxdata` from linux/if_packet.h.
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// Room for one auxdata control message, aligned for `cmsghdr`.
type AuxBuf = [u64; 8];

/// The VLAN tag control word (and TPID) the kernel took off a frame read
/// from a packet socket, from its auxdata control message.
fn auxdata_vlan(m: &libc::msghdr) -> Option<(u16, u16)> {
    // SAFETY: walking the control messages recvmmsg filled in, within
    // msg_controllen; the data read is copied out unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                let a: TpacketAuxdata =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<TpacketAuxdata>());
                if a.tp_status & TP_STATUS_VLAN_VALID == 0 {
                    return None;
                }
                let tpid = if a.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    a.tp_vlan_tpid
                } else {
                    crate::vlan::TPID
                };
                return Some((a.tp_vlan_tci, tpid));
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

/// setsockopt with an int value, its result checked.
fn setsockopt_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: setsockopt reading one c_int from a valid pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// Frames an `AF_PACKET` socket dropped since the last call
/// (PACKET_STATISTICS, which resets on read).
pub(super) fn packet_drops(sock: std::os::fd::RawFd) -> u64 {
    let mut st = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: getsockopt into a tpacket_stats of the length given.
    let rc = unsafe {
        libc::getsockopt(
            sock,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if rc < 0 { 0 } else { u64::from(st.tp_drops) }
}

/// An epoll instance watching `sock` for frames, one arrival at a time
/// (`EPOLLONESHOT`), disarmed to begin with: what the engine thread
/// sleeps on, so that a pass another thread runs ([`watch`] off around
/// it) does not wake the engine with the answers it reads itself.
pub(super) fn watcher(sock: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: epoll_create1(2); checked.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ev = libc::epoll_event { events: libc::EPOLLONESHOT as u32, u64: 0 };
    // SAFETY: a valid epoll_event; both descriptors ours.
    if unsafe { libc::epoll_ctl(fd, libc::EPOLL_CTL_ADD, sock, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ep)
}

/// Arms (the next frame on `sock` makes `ep` readable, once) or disarms
/// the watch. Arming while frames wait makes `ep` readable at once.
pub(super) fn watch(ep: RawFd, sock: RawFd, on: bool) {
    let events = libc::EPOLLONESHOT as u32 | if on { libc::EPOLLIN as u32 } else { 0 };
    let mut ev = libc::epoll_event { events, u64: 0 };
    // SAFETY: a valid epoll_event; both descriptors ours.
    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, sock, &mut ev) };
}

/// Takes what made `ep` readable (which disarms the one-shot watch).
pub(super) fn reap(ep: RawFd) {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: room for one event; no wait.
    unsafe { libc::epoll_wait(ep, &mut ev, 1, 0) };
}

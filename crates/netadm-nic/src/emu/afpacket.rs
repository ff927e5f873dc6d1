//! The afpacket wire: a port wired to a host interface through an
//! `AF_PACKET` socket, which the engine thread itself writes (a
//! virtio-net header with each frame, so superframes and partial
//! checksums pass whole) and reads (`recvmmsg` in batches, or straight
//! into posted RX buffers while superframes come).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::device::Device;
use super::engine::{Delivery, ENGINE_BUDGET, Engine};
use super::wire::WireMode;
use crate::offload::{Offload, VNET_HDR_LEN};

/// Frames one `recvmmsg(2)` reads off an afpacket wire at most, and the
/// room for each: a virtio-net header and the largest superframe.
pub(super) const PACKET_BATCH: usize = 8;

pub(super) const PACKET_SLOT: usize = VNET_HDR_LEN + 65536 + 1024;

/// A frame off an afpacket wire at least this long (a GSO superframe)
/// makes the next read go straight into the posted buffers of the RX
/// queue it went to; a shorter one returns reads to the batch.
const DIRECT_MIN: usize = 16 * 1024;

impl Device {
    /// Wires the port to host interface `ifname` (in the calling thread's
    /// network namespace) through an `AF_PACKET` socket: promiscuous, not
    /// seeing its own transmissions. The engine thread reads it as it reads
    /// any wire: what arrives goes into an RX ring, or waits in the port's
    /// receive packet buffer (the inbox) when the ring has too few buffers
    /// posted; while frames wait there, the socket is not read, so its own
    /// buffer holds the rest (flow control, as towards a link partner).
    pub fn attach_afpacket(&self, ifname: &str) -> std::io::Result<()> {
        use std::os::fd::{FromRawFd, OwnedFd};
        if self.sh.cfg.wire != WireMode::Afpacket || self.sh.packet.get().is_some() {
            return Err(std::io::Error::other("not a free afpacket port"));
        }
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
        // SAFETY: sockaddr_ll zeroed then filled; sizes are the struct's.
        let rc = unsafe {
            let mut sa: libc::sockaddr_ll = std::mem::zeroed();
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_protocol = proto;
            sa.sll_ifindex = index as i32;
            libc::bind(
                fd,
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
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
        let _ = self.sh.packet.set(sock);
        // The engine reads the socket itself: wake it for what arrived
        // while it slept (none, on a fresh socket; cheap either way).
        self.sh.wake_engine();
        Ok(())
    }
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
fn packet_drops(sock: std::os::fd::RawFd) -> u64 {
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

impl Engine {
    /// Sends a frame with its virtio-net header on the afpacket socket.
    pub(super) fn afpacket_send(&self, frame: &[u8], off: Offload) {
        let Some(fd) = self.sh.packet.get() else {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
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
            libc::sendmsg(std::os::fd::AsRawFd::as_raw_fd(fd), &msg, libc::MSG_DONTWAIT)
        };
        if n < 0 {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads what arrived on an afpacket wire, up to a budget, a batch per
    /// system call (`recvmmsg`): each frame
    /// goes straight into its RX ring, or, when that has too few buffers
    /// posted or frames already wait, into the receive packet buffer
    /// behind them. While anything waits there the socket is left alone:
    /// its own buffer holds what comes (and what overflows it, the kernel
    /// counts, and so do we).
    pub(super) fn receive_packet(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(sock) = self.sh.packet.get().map(AsRawFd::as_raw_fd) else { return false };
        let inbox = Arc::clone(&self.sh.inbox);
        let mut bufs = std::mem::take(&mut self.packet_buf);
        bufs.resize(PACKET_BATCH * PACKET_SLOT, 0);
        let mut n = 0;
        while n < ENGINE_BUDGET && inbox.device_owned() == 0 {
            match self.receive_direct(sock) {
                Some(true) => {
                    n += 1;
                    continue;
                }
                Some(false) => break, // the socket is empty
                None => {}
            }
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
            if got <= 0 {
                break;
            }
            for (i, m) in msgs.iter().take(got as usize).enumerate() {
                n += 1;
                let len = (m.msg_len as usize).min(PACKET_SLOT);
                if len <= VNET_HDR_LEN {
                    continue;
                }
                if !self.sh.carrier.load(Ordering::Acquire) {
                    self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                    self.oversize_off_the_wire();
                    continue;
                }
                let slot = &bufs[i * PACKET_SLOT..i * PACKET_SLOT + len];
                let mut off =
                    Offload::from_vnet(slot[..VNET_HDR_LEN].try_into().expect("10 bytes"));
                let mut frame = &slot[VNET_HDR_LEN..];
                // A tag the kernel took off goes back where the wire had it.
                let mut tagged = Vec::new();
                if let Some((tci, tpid)) = auxdata_vlan(&m.msg_hdr)
                    && tpid == crate::vlan::TPID
                {
                    off = crate::vlan::push_tci(frame, off, tci, &mut tagged);
                    frame = &tagged;
                }
                self.take_packet(frame, off, None);
            }
            if (got as usize) < PACKET_BATCH {
                break; // the socket is empty
            }
        }
        if n > 0 {
            // Frames the socket dropped because it was full: lost on the
            // way in, so counted. (Reading the statistics resets them.)
            self.sh.counters.wire_dropped.fetch_add(packet_drops(sock), Ordering::Relaxed);
        }
        self.packet_buf = bufs;
        n > 0
    }

    /// A frame off an afpacket wire larger than the device reads (a
    /// superframe beyond 64 KiB, as BIG TCP makes): the socket cut it
    /// short, so it is dropped whole and counted, never delivered cut.
    fn oversize_off_the_wire(&mut self) {
        self.sh.counters.rx_oversize.fetch_add(1, Ordering::Relaxed);
        self.sh.counters.rx_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// One frame off an afpacket wire: straight into its RX ring, unless
    /// frames already wait in the receive packet buffer (then behind
    /// them). `at` is the queue in whose posted buffers it already lies.
    fn take_packet(&mut self, frame: &[u8], off: Offload, at: Option<usize>) {
        let inbox = Arc::clone(&self.sh.inbox);
        if inbox.device_owned() == 0 && self.deliver_at(frame, off, at) != Delivery::NoBuffer {
            self.rx_direct = (frame.len() >= DIRECT_MIN).then_some(self.last_rx_q);
            return;
        }
        self.rx_direct = None;
        // SAFETY: an afpacket port has no cable: this engine thread is its
        // inbox's only producer (and, in `receive_wire`, its only
        // consumer).
        let pushed = unsafe {
            if inbox.free() < inbox.slots_for(frame.len()) {
                inbox.driver_reclaim();
            }
            inbox.driver_push_frame(frame, off)
        };
        if !pushed {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// While large frames (GSO superframes) come off the afpacket wire,
    /// reads the next one straight into the posted RX buffers of the
    /// queue the last one went to — the device writing into the buffers
    /// the driver posted, one copy less than through the batch buffer.
    /// Should the frame belong to another queue (its headers decide:
    /// filters, RSS), it is copied there from these buffers, which stay
    /// the device's. None when not reading this way (no large frame
    /// last, or too few consecutive buffers posted for the largest
    /// frame); else whether a frame was read.
    fn receive_direct(&mut self, sock: std::os::fd::RawFd) -> Option<bool> {
        let q = self.rx_direct?;
        let ring = self.live.get(q)?.as_ref()?;
        let limit = self.sh.tails[q].load(Ordering::Acquire);
        // SAFETY: this engine thread is the only device-side user; `limit`
        // is a tail the driver published.
        let (ptr, room) = unsafe { ring.device_posted_run(limit) };
        if room < PACKET_SLOT - VNET_HDR_LEN {
            return None;
        }
        // No more than a batch slot takes: a frame is dropped, or not, the
        // same whichever way it is read.
        let room = room.min(PACKET_SLOT - VNET_HDR_LEN);
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut iov = [
            libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: VNET_HDR_LEN },
            libc::iovec { iov_base: ptr.cast(), iov_len: room },
        ];
        let mut aux = AuxBuf::default();
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iov = iov.as_mut_ptr();
        m.msg_iovlen = 2;
        m.msg_control = aux.as_mut_ptr().cast();
        m.msg_controllen = std::mem::size_of::<AuxBuf>();
        // SAFETY: the header's iovecs point at `hdr` and at posted buffers
        // the device owns (`room` bytes of one piece), all outliving the
        // call.
        let got = unsafe { libc::recvmsg(sock, &mut m, libc::MSG_DONTWAIT) };
        if got <= 0 {
            return Some(false);
        }
        let len = (got as usize).min(VNET_HDR_LEN + room);
        if len <= VNET_HDR_LEN {
            return Some(true);
        }
        if !self.sh.carrier.load(Ordering::Acquire) {
            self.sh.counters.wire_dropped.fetch_add(1, Ordering::Relaxed);
            return Some(true);
        }
        if m.msg_flags & libc::MSG_TRUNC != 0 {
            // Not committed: the buffers stay posted for the next frame.
            self.oversize_off_the_wire();
            return Some(true);
        }
        let mut off = Offload::from_vnet(&hdr);
        // SAFETY: the kernel wrote these bytes into the device's buffers,
        // which nothing else touches until the head moves past them.
        let frame = unsafe { std::slice::from_raw_parts(ptr, len - VNET_HDR_LEN) };
        if let Some((tci, tpid)) = auxdata_vlan(&m)
            && tpid == crate::vlan::TPID
        {
            // The tag goes back where the wire had it: no longer in place.
            let mut tagged = Vec::new();
            off = crate::vlan::push_tci(frame, off, tci, &mut tagged);
            self.take_packet(&tagged, off, None);
        } else {
            self.take_packet(frame, off, Some(q));
        }
        Some(true)
    }
}

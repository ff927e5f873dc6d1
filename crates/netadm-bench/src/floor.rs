//! The floor of the `kernel` benchmark's round trip: the smallest
//! userspace datapath with the kernel crossings netadm's has.
//!
//! One thread moves frames between a TAP device (the IP interface, as
//! netadm's kernel mirror makes) and an `AF_PACKET` socket on a veth whose
//! peer is bridged on the far side (as an afpacket wire): it sleeps in
//! `poll(2)` on both, and when woken moves what each holds to the other,
//! one `read`/`send` and one `recv`/`write` per frame. No rings, no
//! emulated device, no second thread: a ping through it costs the same
//! kernel work as one through netadm (TAP read and write, the veth, the
//! far side's bridge) and exactly one wake-up, the least a datapath that
//! sleeps while idle can have. netadm's own share of a round trip is what
//! it takes beyond this.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use netadm_testkit::raw::Raw;

/// The floor's far side: veth `ve0` in `e`, its peer `vf0` bridged in `f`
/// (`br0`, `addr`/24), as netadm's far side is (one link instead of two).
pub fn far_side(e: &str, f: &str, addr: &str) -> Result<(), String> {
    Ok(netadm_testkit::bridged_far_side(e, f, &[("ve0", "vf0")], addr)?)
}

fn last_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// A TAP device `name`, non-blocking, as netadm's kernel mirror makes
/// one: no packet information, a virtio-net header on every frame, and
/// the kernel allowed to hand over partial checksums and TCP superframes
/// (`TUNSETOFFLOAD`), so TCP through the floor moves what it moves
/// through netadm.
fn tap(name: &str) -> Result<OwnedFd, String> {
    // SAFETY: open(2) of a constant path; checked.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(last_err("open /dev/net/tun"));
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid; the name is copied in below.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags =
        (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes the ifreq we pass.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) } < 0 {
        return Err(last_err(&format!("TUNSETIFF {name}")));
    }
    let offloads = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
    // SAFETY: TUNSETOFFLOAD takes its flags as the argument; our fd.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, offloads as libc::c_ulong) } < 0 {
        return Err(last_err(&format!("TUNSETOFFLOAD {name}")));
    }
    Ok(fd)
}

/// A non-blocking `AF_PACKET` socket on `ifname`: every frame, promiscuous,
/// not its own transmissions, with virtio-net headers and room for bursts
/// as netadm's afpacket wire has. The TAP's header and the socket's are
/// the same 10 bytes, so a frame passes from one to the other as read.
fn packet(ifname: &str) -> Result<Raw, String> {
    let raw = Raw::bind(ifname)?;
    raw.like_a_wire()?;
    raw.promiscuous()?;
    raw.nonblocking()?;
    Ok(raw)
}

/// `netadm-bench floor-forwarder TAP IFACE` (run by `kernel` in the
/// floor's namespace): makes the TAP, binds the socket, prints `ready`,
/// and forwards until killed.
pub fn forwarder(args: &[String]) -> Result<(), String> {
    let [tap_name, ifname] = args else {
        return Err("floor-forwarder TAP IFACE".into());
    };
    let (t, p) = (tap(tap_name)?, packet(ifname)?);
    println!("ready");
    // A virtio-net header and the largest superframe, with room to spare.
    let mut buf = vec![0u8; 1 << 17];
    let mut fds = [
        libc::pollfd { fd: t.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: p.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    loop {
        // SAFETY: two valid pollfds, no timeout.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0
            && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            return Err(last_err("poll"));
        }
        loop {
            let mut moved = false;
            // SAFETY: reads into and writes from `buf`, within its length.
            unsafe {
                let n = libc::read(t.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len());
                if n > 0 {
                    libc::send(p.as_raw_fd(), buf.as_ptr().cast(), n as usize, 0);
                    moved = true;
                }
                let n = libc::recv(p.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0);
                if n > 0 {
                    libc::write(t.as_raw_fd(), buf.as_ptr().cast(), n as usize);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }
}

//! TAP devices: an Ethernet interface in the kernel whose frames a process
//! reads and writes through a file descriptor.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use netadm_nic::offload::{Offload, VNET_HDR_LEN};

use crate::{KernelError, check_ifname};

/// A TAP device, alive while this handle is (not made persistent: closing
/// it removes the interface, so nothing is left behind).
#[derive(Debug)]
pub struct Tap {
    file: File,
    name: String,
}

impl Tap {
    /// Creates TAP `name` in this thread's network namespace: no packet
    /// information header, a virtio-net header before every frame (so
    /// superframes and partial checksums can pass, once
    /// [`Tap::set_offload`] allows them), non-blocking reads.
    pub fn create(name: &str) -> Result<Self, KernelError> {
        check_ifname(name)?;
        // Someone else's interface of that name (of any kind) stays theirs.
        if crate::index_of(name).is_some() {
            return Err(KernelError::Exists { what: format!("interface {name}") });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .map_err(|source| KernelError::Io { op: "open /dev/net/tun".into(), source })?;
        // struct ifreq: 16 bytes of name, then the flags (short), padded.
        let mut ifr = [0u8; 40];
        ifr[..name.len()].copy_from_slice(name.as_bytes());
        // IFF_TUN_EXCL: never attach to a TAP that already exists (someone
        // else's): netadm only touches devices it creates.
        let flags =
            (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_TUN_EXCL) as u16;
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `ifr`
        // covers (40 bytes is its size on Linux); the fd is open.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, ifr.as_mut_ptr()) };
        if rc < 0 {
            let source = std::io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::EEXIST) => {
                    KernelError::Exists { what: format!("interface {name}") }
                }
                Some(libc::EINVAL) => {
                    KernelError::BadName { name: name.into(), reason: "rejected by the kernel" }
                }
                _ => {
                    KernelError::Refused { op: format!("create TAP {name}"), source, message: None }
                }
            });
        }
        Ok(Self { file, name: name.to_owned() })
    }

    /// The file descriptor (for poll).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }

    /// Its interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which offloads the kernel may leave to netadm: partial checksums
    /// (`csum`) and, with them, TCP superframes (`tso`). Off, the kernel
    /// hands over complete frames no longer than the MTU.
    pub fn set_offload(&self, csum: bool, tso: bool) -> Result<(), KernelError> {
        let mut f: libc::c_uint = 0;
        if csum {
            f |= libc::TUN_F_CSUM;
            if tso {
                f |= libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
            }
        }
        // SAFETY: TUNSETOFFLOAD takes its flags as the argument; our fd.
        let rc =
            unsafe { libc::ioctl(self.file.as_raw_fd(), libc::TUNSETOFFLOAD, f as libc::c_ulong) };
        if rc < 0 {
            return Err(KernelError::Refused {
                op: format!("set offloads on {}", self.name),
                source: std::io::Error::last_os_error(),
                message: None,
            });
        }
        Ok(())
    }

    /// Reads one frame the kernel sent, with its offload context: `buf`
    /// must hold a virtio-net header and the largest superframe (64 KiB).
    /// `Ok(None)` when nothing is queued (the fd does not block).
    pub fn read_frame<'a>(
        &self,
        buf: &'a mut [u8],
    ) -> std::io::Result<Option<(Offload, &'a [u8])>> {
        match (&self.file).read(buf) {
            Ok(n) if n > VNET_HDR_LEN => {
                let off = Offload::from_vnet(buf[..VNET_HDR_LEN].try_into().expect("10 bytes"));
                Ok(Some((off, &buf[VNET_HDR_LEN..n])))
            }
            Ok(_) => Ok(Some((Offload::NONE, &[]))),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Hands one frame to the kernel, as if it had arrived on the wire,
    /// with what the device reported of it (checksum verified, or a
    /// superframe the stack takes whole, as from GRO).
    pub fn write_frame(&self, frame: &[u8], off: Offload) -> std::io::Result<usize> {
        let hdr = off.to_vnet();
        let iov = [
            libc::iovec { iov_base: hdr.as_ptr() as *mut _, iov_len: hdr.len() },
            libc::iovec { iov_base: frame.as_ptr() as *mut _, iov_len: frame.len() },
        ];
        // SAFETY: two valid iovecs that outlive the call; our fd.
        let n = unsafe { libc::writev(self.file.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
    }
}

//! TAP devices: an Ethernet interface in the kernel whose frames a process
//! reads and writes through a file descriptor.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;

use crate::{KernelError, check_ifname};

/// A TAP device, alive while this handle is (not made persistent: closing
/// it removes the interface, so nothing is left behind).
#[derive(Debug)]
pub struct Tap {
    file: File,
    name: String,
}

impl Tap {
    /// Creates TAP `name` (no packet information header) in this thread's
    /// network namespace.
    pub fn create(name: &str) -> Result<Self, KernelError> {
        check_ifname(name)?;
        // Someone else's interface of that name (of any kind) stays theirs.
        let c = std::ffi::CString::new(name).expect("checked: no NUL");
        // SAFETY: c is a valid C string.
        if unsafe { libc::if_nametoindex(c.as_ptr()) } != 0 {
            return Err(KernelError::Exists { what: format!("interface {name}") });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .map_err(|source| KernelError::Io { op: "open /dev/net/tun".into(), source })?;
        // struct ifreq: 16 bytes of name, then the flags (short), padded.
        let mut ifr = [0u8; 40];
        ifr[..name.len()].copy_from_slice(name.as_bytes());
        // IFF_TUN_EXCL: never attach to a TAP that already exists (someone
        // else's): netadm only touches devices it creates.
        let flags = (libc::IFF_TAP | libc::IFF_NO_PI) as u16 | 0x8000;
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
                _ => KernelError::Refused { op: format!("create TAP {name}"), source },
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

    /// Reads one frame the kernel sent (blocks until there is one).
    pub fn read_frame(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&self.file).read(buf)
    }

    /// Hands one frame to the kernel, as if it had arrived on the wire.
    pub fn write_frame(&self, frame: &[u8]) -> std::io::Result<usize> {
        (&self.file).write(frame)
    }
}

//! Waking a thread blocked in poll(2): an eventfd it polls beside what it
//! waits for, written once to stop it (TAP readers, DHCP clients, the
//! kernel-events watcher).

use std::os::fd::OwnedFd;

use crate::KernelError;

/// A new eventfd (close-on-exec).
pub fn eventfd() -> Result<OwnedFd, KernelError> {
    let flags = nix::sys::eventfd::EfdFlags::EFD_CLOEXEC;
    nix::sys::eventfd::EventFd::from_flags(flags)
        .map(OwnedFd::from)
        .map_err(|e| KernelError::Io { op: "eventfd".into(), source: e.into() })
}

/// Wakes whatever polls `fd`.
pub fn wake(fd: &OwnedFd) {
    let _ = nix::unistd::write(fd, &1u64.to_ne_bytes());
}

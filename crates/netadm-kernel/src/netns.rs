//! Network namespaces as zones: a name under `/run/netns` (as `ip netns`
//! makes them) or a path to a namespace file. netadm enters one only on a
//! short-lived thread of its own, to make a TAP device or open an
//! rtnetlink connection there; both stay in that namespace.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::KernelError;

/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// An open network namespace.
#[derive(Debug)]
pub struct Netns {
    zone: String,
    path: PathBuf,
    file: File,
    /// Its identity (device, inode of the nsfs file), to tell whether the
    /// path still names it.
    id: (u64, u64),
}

fn bad(zone: &str, reason: impl Into<String>) -> KernelError {
    KernelError::BadZone { zone: zone.into(), reason: reason.into() }
}

impl Netns {
    /// The file a zone names: `/run/netns/NAME` for a name, the path
    /// itself for an absolute path. Checks the syntax only.
    pub fn path_of(zone: &str) -> Result<PathBuf, KernelError> {
        if zone.starts_with('/') {
            if zone.contains('\0') {
                return Err(bad(zone, "a path may not contain NUL"));
            }
            return Ok(PathBuf::from(zone));
        }
        if zone.is_empty() || zone.len() > 255 {
            return Err(bad(zone, "a zone name is 1 to 255 bytes (or an absolute path)"));
        }
        if zone == "." || zone == ".." {
            return Err(bad(zone, "is reserved"));
        }
        if zone.bytes().any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace()) {
            return Err(bad(zone, "a zone name may not contain '/', NUL or whitespace"));
        }
        Ok(Path::new(NETNS_DIR).join(zone))
    }

    /// Opens zone `zone` and checks it is a network namespace this process
    /// can enter (entering one needs CAP_SYS_ADMIN).
    pub fn open(zone: &str) -> Result<Self, KernelError> {
        let path = Self::path_of(zone)?;
        let file = File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                KernelError::NotFound { what: format!("zone {zone} ({})", path.display()) }
            }
            _ => bad(zone, format!("{}: {e}", path.display())),
        })?;
        let meta = file
            .metadata()
            .map_err(|e| KernelError::Io { op: format!("stat {zone}"), source: e })?;
        let ns = Self { zone: zone.into(), path, file, id: (meta.dev(), meta.ino()) };
        // setns(2) says whether it is a network namespace (EINVAL if not).
        ns.run(|| ()).map_err(|e| match e {
            KernelError::Refused { source, .. } if source.raw_os_error() == Some(libc::EINVAL) => {
                bad(zone, format!("{} is not a network namespace", ns.path.display()))
            }
            e => e,
        })?;
        Ok(ns)
    }

    /// The zone as it was given.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// Whether its path still names this namespace (`ip netns del`
    /// unmounts it: the namespace lives on while netadm holds it, but it
    /// is no one's zone any more).
    pub fn present(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }

    /// Whether it is the calling thread's own namespace.
    pub fn is_current(&self) -> bool {
        std::fs::metadata("/proc/thread-self/ns/net").is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }

    /// Runs `f` on a thread of its own inside the namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, KernelError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                // setns(2) moves only this thread, which ends when `f` returns.
                nix::sched::setns(&self.file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(
                    |e| KernelError::Refused {
                        op: format!("enter zone {}", self.zone),
                        source: e.into(),
                        message: None,
                    },
                )?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl std::os::fd::AsFd for Netns {
    /// The namespace file, for `IFLA_NET_NS_FD` (creating or moving a
    /// device into the zone).
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_names_and_paths_are_checked() {
        assert_eq!(Netns::path_of("nsA").unwrap(), Path::new("/run/netns/nsA"));
        assert_eq!(Netns::path_of("/proc/1/ns/net").unwrap(), Path::new("/proc/1/ns/net"));
        for z in ["", ".", "..", "a/b", "a b", "a\0", &"x".repeat(256)] {
            assert!(matches!(Netns::path_of(z), Err(KernelError::BadZone { .. })), "{z:?}");
        }
    }
}

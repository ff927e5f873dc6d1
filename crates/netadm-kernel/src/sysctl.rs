//! Per-interface protocol settings under `/proc/sys/net/{ipv4,ipv6}/conf/IF/`
//! (the calling thread's network namespace's): what ipadm's interface
//! properties and addrconf map to.

use crate::{KernelError, check_ifname};

/// The protocol families with per-interface settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `/proc/sys/net/ipv4/conf/IF/`.
    V4,
    /// `/proc/sys/net/ipv6/conf/IF/`.
    V6,
}

fn path(family: Family, ifname: &str, key: &str) -> Result<String, KernelError> {
    check_ifname(ifname)?;
    if key.is_empty()
        || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit())
    {
        return Err(KernelError::BadName { name: key.into(), reason: "is no sysctl key" });
    }
    let f = match family {
        Family::V4 => "ipv4",
        Family::V6 => "ipv6",
    };
    Ok(format!("/proc/sys/net/{f}/conf/{ifname}/{key}"))
}

/// Reads a setting of interface `ifname`.
pub fn get(family: Family, ifname: &str, key: &str) -> Result<String, KernelError> {
    let p = path(family, ifname, key)?;
    std::fs::read_to_string(&p).map(|s| s.trim().to_owned()).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            KernelError::NotFound { what: p }
        } else {
            KernelError::Io { op: format!("read {p}"), source }
        }
    })
}

/// Writes a setting of interface `ifname`; the kernel's refusal (EINVAL)
/// is [`KernelError::Refused`].
pub fn set(family: Family, ifname: &str, key: &str, value: &str) -> Result<(), KernelError> {
    let p = path(family, ifname, key)?;
    std::fs::write(&p, value).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => KernelError::NotFound { what: p },
        _ => KernelError::Refused { op: format!("write {value:?} to {p}"), source },
    })
}

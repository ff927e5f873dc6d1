//! Protocol settings under `/proc/sys/net/` (the calling thread's network
//! namespace's): per interface (`{ipv4,ipv6}/conf/IF/`), what ipadm's
//! interface properties and addrconf map to, and for the whole namespace,
//! what ipadm's protocol properties map to.

use crate::{KernelError, check_ifname};

/// The protocol families with per-interface settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `/proc/sys/net/ipv4/conf/IF/`.
    V4,
    /// `/proc/sys/net/ipv6/conf/IF/`.
    V6,
}

fn check_key(key: &str) -> Result<(), KernelError> {
    let ok = |b: u8| b.is_ascii_lowercase() || b == b'_' || b == b'/' || b.is_ascii_digit();
    if key.is_empty() || key.starts_with('/') || key.contains("..") || !key.bytes().all(ok) {
        return Err(KernelError::BadName { name: key.into(), reason: "is no sysctl key" });
    }
    Ok(())
}

fn path(family: Family, ifname: &str, key: &str) -> Result<String, KernelError> {
    check_ifname(ifname)?;
    check_key(key)?;
    let f = match family {
        Family::V4 => "ipv4",
        Family::V6 => "ipv6",
    };
    Ok(format!("/proc/sys/net/{f}/conf/{ifname}/{key}"))
}

/// Reads a setting of interface `ifname`.
pub fn get(family: Family, ifname: &str, key: &str) -> Result<String, KernelError> {
    read(path(family, ifname, key)?)
}

/// Writes a setting of interface `ifname`; the kernel's refusal (EINVAL)
/// is [`KernelError::Refused`].
pub fn set(family: Family, ifname: &str, key: &str, value: &str) -> Result<(), KernelError> {
    write(path(family, ifname, key)?, value)
}

/// Reads a setting of the whole network namespace: `key` under
/// `/proc/sys/net/` (e.g. `ipv4/ip_default_ttl`).
pub fn get_net(key: &str) -> Result<String, KernelError> {
    check_key(key)?;
    read(format!("/proc/sys/net/{key}"))
}

/// Writes a setting of the whole network namespace (see [`get_net`]).
pub fn set_net(key: &str, value: &str) -> Result<(), KernelError> {
    check_key(key)?;
    write(format!("/proc/sys/net/{key}"), value)
}

fn read(p: String) -> Result<String, KernelError> {
    std::fs::read_to_string(&p).map(|s| s.trim().to_owned()).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            KernelError::NotFound { what: p }
        } else {
            KernelError::Io { op: format!("read {p}"), source }
        }
    })
}

fn write(p: String, value: &str) -> Result<(), KernelError> {
    std::fs::write(&p, value).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => KernelError::NotFound { what: p },
        _ => KernelError::Refused { op: format!("write {value:?} to {p}"), source, message: None },
    })
}

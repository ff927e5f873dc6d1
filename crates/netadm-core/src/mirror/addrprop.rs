//! ipadm's address properties (`set-addrprop -p PROP=VALUE IF/TAG`) of a
//! static address: `prefixlen` (the address is put back in the kernel
//! with the new prefix) and `deprecated` (its preferred lifetime 0, so
//! the kernel does not choose it as a source address); `broadcast` is
//! read-only.

use std::net::IpAddr;

use netadm_config::AddrConf;

use crate::CoreError;

/// The properties, in ipadm's order.
pub(crate) const NAMES: &[&str] = &["broadcast", "deprecated", "prefixlen"];

/// ipadm's default prefix length: IPv4's by address class (as illumos
/// derives a netmask), 64 for IPv6.
pub(crate) fn default_prefix(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(a) => match a.octets()[0] {
            0..=127 => 8,
            128..=191 => 16,
            192..=223 => 24,
            _ => 32,
        },
        IpAddr::V6(_) => 64,
    }
}

/// Checks that `name` is an address property: `InvalidArgument` naming
/// them otherwise.
pub(crate) fn check_name(name: &str) -> Result<(), CoreError> {
    if NAMES.contains(&name) {
        return Ok(());
    }
    Err(CoreError::invalid_argument(format!(
        "no address property {name:?} (there are {})",
        NAMES.join(", ")
    )))
}

/// One property of `a`: (perm, value, default, possible).
pub(crate) fn row(a: &AddrConf, name: &str) -> (String, String, String, String) {
    let Some((ip, prefix)) = a.fixed_addr() else {
        return ("r-".into(), String::new(), String::new(), String::new());
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    match name {
        "broadcast" => {
            let b = match ip {
                IpAddr::V4(v) if prefix < 31 => {
                    let host = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
                    std::net::Ipv4Addr::from(u32::from(v) | host).to_string()
                }
                _ => String::new(),
            };
            ("r-".into(), b, String::new(), String::new())
        }
        "deprecated" => (
            "rw".into(),
            if a.deprecated { "on" } else { "off" }.into(),
            "off".into(),
            "on,off".into(),
        ),
        _ => ("rw".into(), prefix.to_string(), default_prefix(ip).to_string(), format!("1-{max}")),
    }
}

/// Sets `name` to `value` on `a` (a static address): `InvalidValue` for
/// a value out of range, `NotSupported` for a read-only property.
pub(crate) fn set(a: &mut AddrConf, name: &str, value: &str) -> Result<(), CoreError> {
    let (ip, _) = a.fixed_addr().ok_or_else(|| {
        CoreError::invalid_argument(format!(
            "a {} address has no address properties",
            a.kind.as_str()
        ))
    })?;
    let max: u8 = if ip.is_ipv4() { 32 } else { 128 };
    match name {
        "deprecated" => {
            a.deprecated = match value {
                "on" => true,
                "off" => false,
                _ => {
                    return Err(CoreError::invalid_value(format!(
                        "deprecated: {value:?} is not on or off"
                    )));
                }
            }
        }
        "prefixlen" => match value.parse::<u8>() {
            Ok(p) if (1..=max).contains(&p) => a.addr = format!("{ip}/{p}"),
            _ => {
                return Err(CoreError::invalid_value(format!(
                    "prefixlen: {value:?} is not in 1-{max}"
                )));
            }
        },
        other => {
            check_name(other)?;
            return Err(CoreError::not_supported(format!("{other} is read-only")));
        }
    }
    Ok(())
}

/// Resets `name` on `a` to its default.
pub(crate) fn reset(a: &mut AddrConf, name: &str) -> Result<(), CoreError> {
    let (ip, _) = a.fixed_addr().ok_or_else(|| {
        CoreError::invalid_argument(format!(
            "a {} address has no address properties",
            a.kind.as_str()
        ))
    })?;
    match name {
        "deprecated" => set(a, name, "off"),
        "prefixlen" => set(a, name, &default_prefix(ip).to_string()),
        other => set(a, other, ""),
    }
}

//! The kernel's refusals, typed: its errno, the text of its extended
//! acknowledgement (`NETLINK_EXT_ACK`, which every socket of this crate
//! turns on), and, for a kind of device or of traffic control the kernel
//! does not have, the module that would provide it.

use rtnetlink::packet_core::{ErrorMessage, NlasIterator};

use crate::KernelError;

/// `NLMSGERR_ATTR_MSG`: the kernel's message, a NUL-terminated string.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// The kernel's message in an error, when it gave one.
///
/// An error carries the request it answers, whole (no socket of this
/// crate sets `NETLINK_CAP_ACK`), then, with extended acks on, the
/// `NLMSGERR_ATTR_*` attributes. netlink-packet-core 0.9 keeps all of it
/// unparsed in `ErrorMessage::header`.
pub(crate) fn extack(e: &ErrorMessage) -> Option<String> {
    let echoed = e.header.get(0..4)?;
    let len = u32::from_ne_bytes(echoed.try_into().ok()?) as usize;
    // A capped echo (only the 16-byte header) if the length says more
    // than there is.
    let skip = if len <= e.header.len() { len } else { 16 };
    NlasIterator::new(e.header.get(skip..)?).map_while(Result::ok).find_map(|nla| {
        (nla.kind() == NLMSGERR_ATTR_MSG).then(|| {
            let text = String::from_utf8_lossy(nla.value());
            text.trim_end_matches('\0').to_owned()
        })
    })
}

/// A netlink error as a [`KernelError`] (EEXIST, ENODEV, ... typed; the
/// rest [`KernelError::Refused`] with the kernel's message).
pub(crate) fn netlink(e: &ErrorMessage, op: &str) -> KernelError {
    errno(e.raw_code().abs(), op, extack(e))
}

/// The rtnetlink crate's error, typed by the kernel's errno.
pub(crate) fn typed(e: rtnetlink::Error, op: &str) -> KernelError {
    match e {
        rtnetlink::Error::NetlinkError(m) if m.raw_code() != 0 => netlink(&m, op),
        e => KernelError::Io {
            op: op.into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        },
    }
}

/// An errno as a [`KernelError`].
pub(crate) fn errno(code: i32, op: &str, message: Option<String>) -> KernelError {
    let source = std::io::Error::from_raw_os_error(code);
    match code {
        libc::EEXIST => KernelError::Exists { what: op.into() },
        libc::ENODEV | libc::EADDRNOTAVAIL | libc::ESRCH => {
            KernelError::NotFound { what: op.into() }
        }
        _ => KernelError::Refused { op: op.into(), source, message },
    }
}

/// The module that provides link kind `kind` (`IFLA_INFO_KIND`), as
/// `modprobe` would be asked for it (`rtnl-link-KIND` aliases).
pub fn module_of_kind(kind: &str) -> &str {
    match kind {
        "bond" => "bonding",
        "vlan" => "8021q",
        "team" => "team",
        _ => kind,
    }
}

/// EOPNOTSUPP on an `RTM_NEWLINK` carrying `IFLA_INFO_KIND` `kind`: the
/// kernel has no such kind ("Unknown device type"; it answers at once
/// when it cannot load the module). Anything else stays as it was.
pub(crate) fn link_kind_missing(e: KernelError, kind: &str, what: &str) -> KernelError {
    match e {
        KernelError::Refused { source, message, .. }
            if source.raw_os_error() == Some(libc::EOPNOTSUPP)
                && message.as_deref().is_none_or(|m| m.contains("Unknown device type")) =>
        {
            KernelError::NotSupported { what: what.into(), module: module_of_kind(kind).into() }
        }
        e => e,
    }
}

/// ENOENT on a traffic-control request: a qdisc, classifier or action
/// kind the kernel does not have (by the kernel's message, naming
/// `sch_KIND`, `cls_KIND` or `act_KIND`), or an object that does not
/// exist (the parent, the class or the filter asked for).
pub(crate) fn tc(e: KernelError, kind: &str, what: &str) -> KernelError {
    let KernelError::Refused { source, message, op } = e else { return e };
    if source.raw_os_error() != Some(libc::ENOENT) {
        return KernelError::Refused { source, message, op };
    }
    let text = message.as_deref().unwrap_or("");
    let prefix = if text.contains("qdisc kind is unknown") {
        "sch_"
    } else if text.contains("classifier not found") {
        "cls_"
    } else if text.contains("action module") {
        "act_"
    } else {
        let what = if text.is_empty() { op } else { format!("{op} (the kernel: {text})") };
        return KernelError::NotFound { what };
    };
    KernelError::NotSupported { what: what.into(), module: format!("{prefix}{kind}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_core::{DefaultNla, Emitable};

    /// An error message as the kernel sends it: the request echoed whole,
    /// then the attributes.
    fn error(code: i32, request_len: usize, text: Option<&str>) -> ErrorMessage {
        let mut m = ErrorMessage::default();
        m.code = std::num::NonZeroI32::new(-code);
        let mut echoed = vec![0u8; request_len];
        echoed[0..4].copy_from_slice(&(request_len as u32).to_ne_bytes());
        m.header = echoed;
        if let Some(t) = text {
            let mut v = t.as_bytes().to_vec();
            v.push(0);
            let nla = DefaultNla::new(NLMSGERR_ATTR_MSG, v);
            let mut b = vec![0; nla.buffer_len()];
            nla.emit(&mut b);
            m.header.extend(b);
        }
        m
    }

    #[test]
    fn errnos_are_typed_and_carry_the_kernels_message() {
        let err = |code, text| netlink(&error(code, 40, text), "t");
        assert!(matches!(err(libc::EEXIST, None), KernelError::Exists { .. }));
        assert!(matches!(err(libc::ENODEV, None), KernelError::NotFound { .. }));
        assert!(matches!(err(libc::EADDRNOTAVAIL, None), KernelError::NotFound { .. }));
        match err(libc::EINVAL, Some("Invalid MTU")) {
            KernelError::Refused { message, source, .. } => {
                assert_eq!(message.as_deref(), Some("Invalid MTU"));
                assert_eq!(source.raw_os_error(), Some(libc::EINVAL));
            }
            e => panic!("{e:?}"),
        }
        assert!(matches!(err(libc::EINVAL, None), KernelError::Refused { message: None, .. }));
        assert!(matches!(typed(rtnetlink::Error::RequestFailed, "t"), KernelError::Io { .. }));
        // A capped echo: the 16-byte header only, its length saying more.
        let mut capped = error(libc::EINVAL, 16, Some("capped"));
        capped.header[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(extack(&capped).as_deref(), Some("capped"));
        assert_eq!(extack(&ErrorMessage::default()), None);
    }

    #[test]
    fn a_missing_kind_names_its_module() {
        let refused = |code, text: Option<&str>| errno(code, "op", text.map(Into::into));
        let e = link_kind_missing(
            refused(libc::EOPNOTSUPP, Some("Unknown device type")),
            "bond",
            "bond b0",
        );
        assert!(
            matches!(&e, KernelError::NotSupported { module, .. } if module == "bonding"),
            "{e:?}"
        );
        let e = link_kind_missing(refused(libc::EOPNOTSUPP, None), "vlan", "vlan v0");
        assert!(matches!(&e, KernelError::NotSupported { module, .. } if module == "8021q"));
        // EOPNOTSUPP for another reason, and other errnos, stay refusals.
        let e = link_kind_missing(refused(libc::EOPNOTSUPP, Some("other")), "bond", "b");
        assert!(matches!(e, KernelError::Refused { .. }));
        let e = link_kind_missing(refused(libc::EINVAL, None), "bond", "b");
        assert!(matches!(e, KernelError::Refused { .. }));

        for (text, module) in [
            ("Specified qdisc kind is unknown", "sch_x"),
            ("TC classifier not found", "cls_x"),
            ("Failed to load TC action module", "act_x"),
        ] {
            let e = tc(refused(libc::ENOENT, Some(text)), "x", "what");
            assert!(
                matches!(&e, KernelError::NotSupported { module: m, .. } if m == module),
                "{e:?}"
            );
        }
        let e = tc(refused(libc::ENOENT, Some("Cannot find specified qdisc")), "htb", "w");
        assert!(matches!(e, KernelError::NotFound { .. }), "{e:?}");
        assert!(matches!(tc(refused(libc::EINVAL, None), "htb", "w"), KernelError::Refused { .. }));
    }
}

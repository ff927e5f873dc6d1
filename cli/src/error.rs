//! The CLI's one error type: a kind (the daemon's D-Bus error kind, `Bus`
//! for transport trouble, `InvalidArgument` for what the CLI itself
//! rejects) and a message.

use std::fmt;

/// An error to report and exit 1 with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// `NotFound`, `InvalidArgument`, `Bus`, ...
    pub kind: String,
    /// What went wrong, for an operator.
    pub message: String,
}

impl CliError {
    /// An error of `kind`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind: kind.into(), message: message.into() }
    }

    /// Something the CLI rejected before asking the daemon.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new("InvalidArgument", message)
    }

    /// A show-verb filter that matched nothing.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new("NotFound", message)
    }

    /// What a call to the daemon on `bus` answered with. Daemon errors keep
    /// their kind; the bus's own refusals become `Bus` (or `AccessDenied`)
    /// with a message naming the bus.
    pub fn from_call(e: zbus::Error, bus: &str) -> Self {
        if let zbus::Error::MethodError(name, msg, _) = &e {
            let msg = msg.clone().unwrap_or_default();
            match name.as_str() {
                "org.freedesktop.DBus.Error.ServiceUnknown"
                | "org.freedesktop.DBus.Error.NameHasNoOwner" => {
                    return Self::new(
                        "Bus",
                        format!(
                            "netadmd is not running on the {bus} bus \
                             ({} has no owner)",
                            netadm_dbus::BUS_NAME
                        ),
                    );
                }
                "org.freedesktop.DBus.Error.AccessDenied" => {
                    return Self::new("AccessDenied", format!("{bus} bus: {msg}"));
                }
                _ => {}
            }
        }
        let e = netadm_dbus::Error::from_zbus(e);
        match e {
            netadm_dbus::Error::ZBus(inner) => Self::new("Bus", format!("{bus} bus: {inner}")),
            e => Self::new(e.kind(), e.message()),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The JSON form printed on stderr under `--json`.
pub fn to_json(e: &CliError) -> serde_json::Value {
    serde_json::json!({ "error": { "kind": e.kind, "message": e.message } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_errors_keep_their_kind() {
        let name = zbus::names::OwnedErrorName::try_from("org.netadm.Netadm1.Error.NotFound")
            .expect("valid name");
        let msg = zbus::message::Message::method_call("/", "M").unwrap().build(&()).unwrap();
        let e = zbus::Error::MethodError(name, Some("link x0 does not exist".into()), msg);
        let c = CliError::from_call(e, "system");
        assert_eq!(c, CliError::new("NotFound", "link x0 does not exist"));
    }

    #[test]
    fn missing_daemon_names_the_bus() {
        let name =
            zbus::names::OwnedErrorName::try_from("org.freedesktop.DBus.Error.ServiceUnknown")
                .expect("valid name");
        let msg = zbus::message::Message::method_call("/", "M").unwrap().build(&()).unwrap();
        let e = zbus::Error::MethodError(name, None, msg);
        let c = CliError::from_call(e, "session");
        assert_eq!(c.kind, "Bus");
        assert!(c.message.contains("session bus"), "{}", c.message);
    }

    #[test]
    fn json_shape() {
        let v = to_json(&CliError::invalid_argument("bad"));
        assert_eq!(v, serde_json::json!({"error": {"kind": "InvalidArgument", "message": "bad"}}));
    }
}

//! Caller authorization: anyone may look, only an administrator may change
//! the network.
//!
//! The caller is the *sender of the message*, whose credentials the bus
//! reports through `GetConnectionCredentials` — not the socket peer, which
//! on a bus is the bus daemon itself, and never this process.

use netadm_dbus::Error;
use zbus::Connection;
use zbus::message::Header;
use zbus::names::BusName;

/// Decides who may call mutating methods: uid 0 and members of one group.
#[derive(Debug, Clone)]
pub struct Authorizer {
    group: String,
    gid: Option<u32>,
}

impl Authorizer {
    /// Authorizes root and members of `group` (looked up in /etc/group; a
    /// group that does not exist authorizes nobody but root).
    pub fn new(group: &str) -> Self {
        let gid = std::fs::read_to_string("/etc/group").ok().and_then(|t| gid_of(&t, group));
        Self { group: group.to_owned(), gid }
    }

    /// Checks the sender of `hdr`; `AccessDenied` names why not.
    pub async fn check(&self, conn: &Connection, hdr: &Header<'_>, op: &str) -> Result<(), Error> {
        let sender = hdr
            .sender()
            .ok_or_else(|| Error::AccessDenied(format!("{op}: the message has no sender")))?;
        let dbus = zbus::fdo::DBusProxy::new(conn)
            .await
            .map_err(|e| Error::Internal(format!("cannot ask the bus who called: {e}")))?;
        let creds =
            dbus.get_connection_credentials(BusName::Unique(sender.to_owned())).await.map_err(
                |e| Error::AccessDenied(format!("{op}: the bus did not say who {sender} is: {e}")),
            )?;
        let uid = creds
            .unix_user_id()
            .ok_or_else(|| Error::AccessDenied(format!("{op}: {sender} has no Unix user id")))?;
        let groups = creds.unix_group_ids().cloned().unwrap_or_default();
        if allowed(uid, &groups, self.gid) {
            return Ok(());
        }
        Err(Error::AccessDenied(format!(
            "{op}: uid {uid} may not change the network (only root and group {} may)",
            self.group
        )))
    }
}

/// The decision itself.
fn allowed(uid: u32, groups: &[u32], admin_gid: Option<u32>) -> bool {
    uid == 0 || admin_gid.is_some_and(|g| groups.contains(&g))
}

/// The gid of `group` in /etc/group's format.
fn gid_of(etc_group: &str, group: &str) -> Option<u32> {
    etc_group.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == group).then_some(())?;
        f.next()?;
        f.next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_the_admin_group_only() {
        assert!(allowed(0, &[], None));
        assert!(allowed(1000, &[10, 4242], Some(4242)));
        assert!(!allowed(1000, &[10], Some(4242)));
        assert!(!allowed(65534, &[65534], None));
    }

    #[test]
    fn group_lookup() {
        let t = "root:x:0:\nnetadmx:x:7:\nnetadm:x:4242:alice,bob\n";
        assert_eq!(gid_of(t, "netadm"), Some(4242));
        assert_eq!(gid_of(t, "root"), Some(0));
        assert_eq!(gid_of(t, "nogroup"), None);
    }
}

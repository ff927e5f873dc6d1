//! Caller authorization: anyone may look, only an administrator may change
//! the network.
//!
//! On the bus the caller is the *sender of the message*, whose credentials
//! the bus reports through `GetConnectionCredentials` — not the socket
//! peer, which on a bus is the bus daemon itself. On the private socket
//! (peer to peer, no bus) the caller is the socket's peer: its uid is the
//! kernel's (`SO_PEERCRED`), its groups those the user database gives
//! that uid (the bus reports the process's own). The socket is root's
//! alone (mode 0600), so only an administrator who opens it to others
//! meets the difference.

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
    /// Authorizes root and members of `group` (looked up through NSS, so
    /// groups from LDAP or SSSD count as well as /etc/group's; a group
    /// that does not exist authorizes nobody but root).
    pub fn new(group: &str) -> Self {
        Self { group: group.to_owned(), gid: gid_of(group) }
    }

    /// Checks the caller of `hdr`, which came on `conn` (on the private
    /// socket, from uid `peer_uid`); `AccessDenied` names why not.
    pub async fn check(
        &self,
        conn: &Connection,
        peer_uid: Option<u32>,
        hdr: &Header<'_>,
        op: &str,
    ) -> Result<(), Error> {
        if !conn.is_bus() {
            // Root needs no group looked up (the user database read).
            if peer_uid == Some(0) {
                return Ok(());
            }
            let creds = conn.peer_creds().await.map_err(|e| {
                Error::AccessDenied(format!("{op}: the socket did not say who called: {e}"))
            })?;
            let uid = creds.unix_user_id().ok_or_else(|| {
                Error::AccessDenied(format!("{op}: the caller has no Unix user id"))
            })?;
            return self.decide(
                uid,
                creds.unix_group_ids().map(Vec::as_slice).unwrap_or_default(),
                op,
            );
        }
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
        self.decide(uid, creds.unix_group_ids().map(Vec::as_slice).unwrap_or_default(), op)
    }

    /// Whether uid `uid` in `groups` may do `op`.
    fn decide(&self, uid: u32, groups: &[u32], op: &str) -> Result<(), Error> {
        if allowed(uid, groups, self.gid) {
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

/// The gid of `group`, from the system's group database (getgrnam_r:
/// files, LDAP, SSSD — whatever nsswitch.conf says), through nix.
fn gid_of(group: &str) -> Option<u32> {
    nix::unistd::Group::from_name(group).ok().flatten().map(|g| g.gid.as_raw())
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
    fn group_lookup_goes_through_the_system_database() {
        assert_eq!(gid_of("root"), Some(0));
        assert_eq!(gid_of("no-such-group-netadm-test"), None);
        assert_eq!(gid_of("bad\0name"), None);
    }
}

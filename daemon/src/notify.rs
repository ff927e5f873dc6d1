//! sd_notify(3) through the `sd-notify` crate (a datagram to
//! `$NOTIFY_SOCKET`, abstract or not; no libsystemd).

pub use sd_notify::NotifyState;

/// Tells the service manager `state`, if there is one. Failures are
/// logged and otherwise ignored: notification is advisory.
pub fn notify(state: NotifyState<'_>) {
    if let Err(e) = sd_notify::notify(std::slice::from_ref(&state)) {
        tracing::warn!("sd_notify {state}: {e}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sends_to_the_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // SAFETY: test-local environment change; no other thread of this
        // test binary reads NOTIFY_SOCKET.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &path) };
        super::notify(super::NotifyState::Ready);
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
    }
}

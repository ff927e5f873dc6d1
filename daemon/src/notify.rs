//! sd_notify(3) without libsystemd: a datagram to `$NOTIFY_SOCKET`.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (e.g. `READY=1`) to the service manager, if there is one.
/// Failures are logged and otherwise ignored: notification is advisory.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let res = UnixDatagram::unbound().and_then(|sock| {
        let bytes = path.as_encoded_bytes();
        if let Some(name) = bytes.strip_prefix(b"@") {
            // An abstract socket.
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)
        } else {
            sock.send_to(state.as_bytes(), &path)
        }
    });
    if let Err(e) = res {
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
        super::notify("READY=1");
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}

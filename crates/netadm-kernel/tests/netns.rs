//! The kernel mirror against the real kernel, in a network namespace of
//! the test's own (a thread that unshares one), so nothing touches the
//! host's interfaces. Skips, saying so, when not root — except under CI
//! (`CI=true`), where not being root fails the test.

use std::net::IpAddr;

use netadm_kernel::{KernelError, Netlink, Tap};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `f` on a thread in a fresh network namespace.
fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNET) only changes this thread's
        // namespace; the thread ends with the test body.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn a_tap_is_created_configured_read_back_and_gone_when_dropped() {
    if !root() {
        let why = "creating TAP devices and network namespaces needs root";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and not root: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    in_netns(|| {
        let nl = Netlink::open().unwrap();
        let tap = Tap::create("natest0").unwrap();
        let i = nl.index("natest0").unwrap();
        nl.set_link(i, Some(true), Some(9000)).unwrap();
        let l = nl.link(i).unwrap();
        assert_eq!((l.name.as_str(), l.mtu, l.up), ("natest0", 9000, true));
        assert_ne!(l.mac, [0; 6]);

        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        nl.add_addr(i, v4, 24).unwrap();
        nl.add_addr(i, v6, 64).unwrap();
        let addrs = nl.addrs(i).unwrap();
        assert!(addrs.contains(&(v4, 24)) && addrs.contains(&(v6, 64)), "{addrs:?}");
        assert!(matches!(nl.add_addr(i, v4, 24), Err(KernelError::Exists { .. })));
        nl.del_addr(i, v4, 24).unwrap();
        assert!(!nl.addrs(i).unwrap().contains(&(v4, 24)));
        assert!(matches!(nl.del_addr(i, v4, 24), Err(KernelError::NotFound { .. })));

        // The same name twice is refused; a name the kernel cannot take too.
        assert!(matches!(Tap::create("natest0"), Err(KernelError::Exists { .. })));
        assert!(matches!(Tap::create("much_too_long_name0"), Err(KernelError::BadName { .. })));
        assert!(
            matches!(nl.set_link(i, None, Some(10)), Err(KernelError::Refused { .. })),
            "MTU below IPv4's minimum"
        );

        drop(tap);
        assert!(
            matches!(nl.index("natest0"), Err(KernelError::NotFound { .. })),
            "closing it removes it"
        );
    });
}

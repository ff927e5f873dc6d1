//! What several of the core's integration tests share: the emulated
//! machine they run on, and a network namespace of their own.

#![allow(dead_code)]

use std::path::Path;

use netadm_config::HardwareConfig;

/// Two i40e-class ports on reflectors with `queue_pairs` queue pairs each,
/// and two atl1c-class ports cabled to each other.
pub fn hw(queue_pairs: u16) -> HardwareConfig {
    let text = netadm_testkit::fixtures::reflectors_and_cable(queue_pairs).to_toml();
    HardwareConfig::parse(&text, Path::new("test.toml")).unwrap()
}

/// A progress callback that ignores progress.
pub fn none(_: &str, _: u32, _: u32) {}

/// Whether this process is root (TAP devices, network namespaces).
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Fails under CI (`CI=true`) when not root, else says the test is
/// skipped; true when the test can run.
pub fn root_or_skip(why: &str) -> bool {
    if root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and not root: {why}");
    eprintln!("skipped: {why}");
    false
}

/// Runs `f` on a thread in a fresh network namespace (the threads it
/// starts inherit it); the namespace goes with its last device.
pub fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNET) only changes this thread's
        // namespace (and that of the threads it starts).
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

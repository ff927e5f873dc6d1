//! Network namespaces and scratch directories a run makes, named by its
//! pid, removed on drop, and swept when a killed run left them.

use std::fmt;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Error, run};

/// A network namespace (`ip netns add`), loopback up, deleted on drop with
/// every device in it (a veth pair goes when either end's namespace goes)
/// and every process still in it killed first. Declare the guards of
/// processes started in it after it, so that they go first.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Makes namespace `name` with its loopback up. The name should hold
    /// this process's pid, as [`Netns::unique`]'s does, so that parallel
    /// runs never meet and [`sweep_stale`] can tell a stale one.
    pub fn new(name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        run(&["ip", "netns", "add", &name])?;
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Makes namespace `{tag}{pid}{suffix}`.
    pub fn unique(tag: &str, suffix: &str) -> Result<Self, Error> {
        Self::new(format!("{tag}{}{suffix}", std::process::id()))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME ARGS`; its stdout.
    pub fn ip(&self, args: &[&str]) -> Result<String, Error> {
        let full: Vec<&str> =
            ["ip", "-n", &self.name].into_iter().chain(args.iter().copied()).collect();
        run(&full)
    }

    /// Runs `ARGS` inside it (`ip netns exec`); its stdout.
    pub fn exec(&self, args: &[&str]) -> Result<String, Error> {
        run(&[&["ip", "netns", "exec", &self.name][..], args].concat())
    }

    /// Runs `f` on a thread of its own inside the namespace (see
    /// [`enter`]); its result.
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        enter(&self.name, f)
    }
}

/// Runs `f` on a thread of its own inside network namespace `ns` (a name
/// under /run/netns): threads it starts are there too, and what it opens
/// (a socket) stays there when used from elsewhere. Its result; its panic
/// goes on in the caller.
pub fn enter<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on a namespace descriptor we hold; it changes
            // only this thread's network namespace, and the thread ends
            // with the scope.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

impl fmt::Display for Netns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl AsRef<str> for Netns {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        kill_inside(&self.name);
        let _ =
            Command::new("ip").args(["netns", "del", &self.name]).stderr(Stdio::null()).status();
    }
}

/// Runs `ip -n NS ARGS` for a test: its stdout; panics if it fails.
pub fn ip(ns: &str, args: &[&str]) -> String {
    run(&[&["ip", "-n", ns][..], args].concat()).unwrap_or_else(|e| panic!("{e}"))
}

/// What device `dev` in `ns` received and sent, as the kernel counts it
/// (`ip -s link`): [rx packets, rx bytes, tx packets, tx bytes].
pub fn link_counts(ns: &str, dev: &str) -> [u64; 4] {
    let out = ip(ns, &["-s", "-j", "link", "show", "dev", dev]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let s = &v[0]["stats64"];
    let n = |side: &str, what: &str| s[side][what].as_u64().unwrap_or_else(|| panic!("{v}"));
    [n("rx", "packets"), n("rx", "bytes"), n("tx", "packets"), n("tx", "bytes")]
}

/// Kills (SIGKILL) every process in namespace `name`.
fn kill_inside(name: &str) {
    for p in run(&["ip", "netns", "pids", name]).unwrap_or_default().split_whitespace() {
        if let Ok(pid) = p.parse::<libc::pid_t>() {
            // SAFETY: kill(2) has no memory preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// A veth pair: `a.1` in namespace `a.0`, its peer `b.1` in `b.0` (the
/// same namespace or another), both up.
pub fn veth(a: (&str, &str), b: (&str, &str)) -> Result<(), Error> {
    let ((na, da), (nb, db)) = (a, b);
    run(&["ip", "link", "add", da, "netns", na, "type", "veth", "peer", "name", db, "netns", nb])?;
    run(&["ip", "-n", na, "link", "set", da, "up"])?;
    run(&["ip", "-n", nb, "link", "set", db, "up"])?;
    Ok(())
}

/// Veth pairs (near end in `a`, far end in `b`) whose far ends are
/// bridged in `b` as br0 with `addr`/24, everything at MTU 9000, offloads
/// as the kernel sets them.
pub fn bridged_far_side(a: &str, b: &str, pairs: &[(&str, &str)], addr: &str) -> Result<(), Error> {
    for (va, vb) in pairs {
        veth((a, va), (b, vb))?;
        run(&["ip", "-n", a, "link", "set", va, "mtu", "9000"])?;
        run(&["ip", "-n", b, "link", "set", vb, "mtu", "9000"])?;
    }
    run(&["ip", "-n", b, "link", "add", "br0", "type", "bridge"])?;
    for (_, vb) in pairs {
        run(&["ip", "-n", b, "link", "set", vb, "master", "br0"])?;
    }
    run(&["ip", "-n", b, "link", "set", "br0", "mtu", "9000", "up"])?;
    run(&["ip", "-n", b, "addr", "add", &format!("{addr}/24"), "dev", "br0"])?;
    Ok(())
}

/// The far side of netadm's kernel topology: veth pairs va0/va1 (in `a`,
/// for netadmd's afpacket wires, [`crate::fixtures::afpacket`]) to
/// vb0/vb1 (in `b`), bridged as br0 with 192.0.2.2/24 at MTU 9000: `b`
/// hands netadm's afpacket wires superframes and partial checksums, which
/// travel with their virtio-net header.
pub fn netadm_far_side(a: &str, b: &str) -> Result<(), Error> {
    bridged_far_side(a, b, &[("va0", "vb0"), ("va1", "vb1")], "192.0.2.2")
}

/// A veth "NIC" for a kernel port: `nic` in namespace `a` (what the
/// port's `interface` names), its peer `far` in `b`, both up, the far end
/// at MTU 9000 (so that what netadm sets on the near end is what limits)
/// with `addr` (`ADDR/PREFIX`) when given.
pub fn veth_nic(a: &str, nic: &str, b: &str, far: &str, addr: Option<&str>) -> Result<(), Error> {
    veth((a, nic), (b, far))?;
    run(&["ip", "-n", b, "link", "set", far, "mtu", "9000"])?;
    if let Some(addr) = addr {
        run(&["ip", "-n", b, "addr", "add", addr, "dev", far])?;
    }
    Ok(())
}

/// The far side of two kernel ports ([`crate::fixtures::kernel`]`(&["nic0",
/// "nic1"])`): veth "NICs" nic0 and nic1 in `a` (netadmd's namespace), their
/// peers far0 (192.0.2.2/24) and far1 (198.51.100.2/24) in `b`, each a
/// network of its own, as two NICs cabled to two switches would be.
pub fn kernel_far_side(a: &str, b: &str) -> Result<(), Error> {
    veth_nic(a, "nic0", b, "far0", Some("192.0.2.2/24"))?;
    veth_nic(a, "nic1", b, "far1", Some("198.51.100.2/24"))
}

/// A directory `{prefix}{pid}` in the temporary directory, removed with
/// what is in it on drop (and by [`sweep_stale`] when a killed run left
/// it).
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Makes it (an existing one is reused).
    pub fn new(prefix: &str) -> Result<Self, Error> {
        let path = std::env::temp_dir().join(format!("{prefix}{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| Error::Io {
            action: "make",
            path: path.clone(),
            source,
        })?;
        Ok(Self { path })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The pid in a name `{prefix}{pid}{rest}`, if the name has that form.
fn pid_of<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = name.strip_prefix(prefix)?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (digits > 0).then(|| &rest[..digits])
}

/// Removes what an earlier run ended by a signal left behind (a signal
/// runs no destructor; its processes died with it): network namespaces
/// and temporary directories named `{prefix}{pid}...` whose process is
/// gone, killing whatever still runs in such a namespace. A live run's
/// are never touched. Returns what it removed, with the pid that made it.
pub fn sweep_stale(prefix: &str) -> Vec<(String, String)> {
    let gone = |pid: &str| !Path::new(&format!("/proc/{pid}")).exists();
    let mut removed = vec![];
    for name in run(&["ip", "netns", "list"]).unwrap_or_default().lines() {
        let Some(name) = name.split_whitespace().next() else { continue };
        match pid_of(name, prefix) {
            Some(pid) if gone(pid) => {
                kill_inside(name);
                if run(&["ip", "netns", "del", name]).is_ok() {
                    removed.push((name.to_owned(), pid.to_owned()));
                }
            }
            _ => {}
        }
    }
    let tmp = std::env::temp_dir();
    for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        match pid_of(&name, prefix) {
            Some(pid) if gone(pid) && std::fs::remove_dir_all(e.path()).is_ok() => {
                removed.push((e.path().display().to_string(), pid.to_owned()));
            }
            _ => {}
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tell_their_pid() {
        assert_eq!(pid_of("nbk123a", "nbk"), Some("123"));
        assert_eq!(pid_of("netadm-bus-42-Xy", "netadm-bus-"), Some("42"));
        assert_eq!(pid_of("nbkx1", "nbk"), None);
        assert_eq!(pid_of("other7", "nbk"), None);
    }

    #[test]
    fn a_scratch_directory_goes_on_drop_and_a_stale_one_by_sweeping() {
        let s = Scratch::new("netadm-testkit-unit-").unwrap();
        let path = s.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        drop(s);
        assert!(!path.exists());
        // A directory of a pid that is not running (pid_max is below this).
        let stale = std::env::temp_dir().join("netadm-testkit-unit-4999999x");
        std::fs::create_dir_all(stale.join("d")).unwrap();
        let mine = Scratch::new("netadm-testkit-unit-").unwrap();
        let removed = sweep_stale("netadm-testkit-unit-");
        assert!(!stale.exists(), "{removed:?}");
        assert!(mine.path().exists(), "a live run's directory was swept");
        assert!(removed.iter().any(|(_, pid)| pid == "4999999"), "{removed:?}");
    }
}

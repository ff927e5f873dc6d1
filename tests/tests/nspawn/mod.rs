//! A Debian bookworm root booted under `systemd-nspawn` with systemd as
//! PID 1, for the tests of netadm as shipped (`systemd.rs`: installed by
//! `systemd/install.sh`; `package.rs`: by apt from the Debian package).
//! The root is built once by debootstrap and cached
//! (`tests/scripts/bookworm-root.sh`); the container boots an overlay of it
//! inside a private mount namespace (`unshare --mount`), so the cache is
//! never written and every mount goes away with the container, which is
//! halted (or killed) whatever way the test ends.

// Each test that includes this module uses part of it.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use netadm_testkit::*;

/// Boot, start of netadmd, restart: each gets this long.
pub const BOOT: Duration = Duration::from_secs(120);
pub const RESTART: Duration = Duration::from_secs(30);
const HALT: Duration = Duration::from_secs(30);
/// Any one command run in the container (systemctl and apt wait for their
/// jobs).
const EXEC: Duration = Duration::from_secs(180);

/// Root, and the tools to build and boot the root. Missing: skipped with a
/// message, or a failure under CI (`.ci/run` installs them).
pub fn prerequisites(more: &[(&str, &str)]) -> bool {
    let tools = [
        ("debootstrap", "debootstrap"),
        ("systemd-nspawn", "systemd-container"),
        ("systemctl", "systemd"),
        ("nsenter", "util-linux"),
        ("unshare", "util-linux"),
        ("flock", "util-linux"),
        ("ip", "iproute2"),
    ];
    let all: Vec<(&str, &str)> = tools.iter().chain(more).copied().collect();
    netadm_testkit::prerequisites(Some("to debootstrap and boot a container"), &all)
}

/// What goes into the root before it boots.
pub enum Setup<'a> {
    /// netadm by `systemd/install.sh` (the binaries of this build), its
    /// unit enabled.
    InstallScript,
    /// These files copied into `/var/tmp/pkgs` (Debian packages, for apt
    /// to install once it runs).
    Files(&'a [PathBuf]),
}

/// A booted container; halted and removed on drop.
pub struct Container {
    nspawn: Child,
    /// The host's pid of the container's PID 1 (systemd).
    pid1: u32,
    dir: tempfile::TempDir,
    /// /run/systemd/nspawn, when this container had to create it.
    made_run_dir: Option<PathBuf>,
}

impl Container {
    /// Builds (once) the cached root, puts `setup` into an overlay of it
    /// and boots it.
    pub fn boot(setup: Setup<'_>) -> Self {
        let root = Command::new("sh")
            .arg(repo_root().join("tests/scripts/bookworm-root.sh"))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(root.status.success(), "cannot build the bookworm root");
        let lower = String::from_utf8(root.stdout).unwrap().trim().to_owned();
        let dir = tempfile::tempdir().unwrap();
        for d in ["upper", "work", "root"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let run_dir = Path::new("/run/systemd/nspawn");
        let made_run_dir = (!run_dir.exists()).then(|| run_dir.to_path_buf());
        // The recipe: overlay of the root, the setup (install.sh and the
        // unit enabled, or files copied in), a tmpfs on
        // /run/systemd/nspawn, then nspawn -b. `exec` makes the child's
        // pid nspawn's.
        let (install, files) = match setup {
            Setup::InstallScript => (
                r#"DESTDIR="$T/root" sh systemd/install.sh
systemctl --root="$T/root" enable netadmd.service"#,
                String::new(),
            ),
            Setup::Files(f) => {
                let paths: Vec<String> = f.iter().map(|p| p.display().to_string()).collect();
                (
                    r#"mkdir -p "$T/root/var/tmp/pkgs"
cp $FILES "$T/root/var/tmp/pkgs/""#,
                    paths.join(" "),
                )
            }
        };
        let script = format!(
            r#"set -eu
mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$T/upper,workdir=$T/work" "$T/root"
{install}
mkdir -p /run/systemd/nspawn
mount -t tmpfs tmpfs /run/systemd/nspawn
exec systemd-nspawn -D "$T/root" --register=no --keep-unit --private-network \
  --bind=/dev/net/tun --console=pipe -b
"#
        );
        let log = File::create(dir.path().join("boot.log")).unwrap();
        let nspawn = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("FILES", files)
            .env("LOWER", &lower)
            .env("T", dir.path())
            .env("BINDIR", bin_dir())
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut c = Self { nspawn, pid1: 0, dir, made_run_dir };
        c.pid1 = c.await_pid1();
        c.await_booted();
        c
    }

    /// The child of nspawn that is PID 1 in its own pid namespace.
    fn await_pid1(&mut self) -> u32 {
        let deadline = Instant::now() + BOOT;
        let nspawn = self.nspawn.id();
        loop {
            if let Some(st) = self.nspawn.try_wait().unwrap() {
                panic!("systemd-nspawn exited ({st}) before booting:\n{}", self.log());
            }
            let tasks = std::fs::read_dir(format!("/proc/{nspawn}/task")).into_iter().flatten();
            for t in tasks.flatten() {
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                for c in children.split_whitespace() {
                    let status =
                        std::fs::read_to_string(format!("/proc/{c}/status")).unwrap_or_default();
                    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap_or("");
                    if nspid.split_whitespace().last() == Some("1")
                        && nspid.split_whitespace().count() > 2
                    {
                        return c.parse().unwrap();
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no container PID 1 within {BOOT:?}:\n{}",
                self.log()
            );
            std::thread::yield_now();
        }
    }

    /// Waits until systemd has finished starting up (`is-system-running
    /// --wait`), retrying while its manager does not answer yet.
    fn await_booted(&mut self) {
        let deadline = Instant::now() + BOOT;
        loop {
            let out = self.exec(&["systemctl", "is-system-running", "--wait"]);
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if state == "running" || state == "degraded" {
                eprintln!("container booted: {state}");
                return;
            }
            if let Some(st) = self.nspawn.try_wait().unwrap() {
                panic!("systemd-nspawn exited ({st}) while booting:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "not booted within {BOOT:?} ({state}):\n{}",
                self.log()
            );
            std::thread::yield_now();
        }
    }

    /// Runs a command of the container's, in all its namespaces, for at
    /// most [`EXEC`].
    pub fn exec(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .args([&EXEC.as_secs().to_string(), "nsenter", "-t", &self.pid1.to_string(), "-a"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `args` in the container, which must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(
            out.status.success(),
            "{args:?} in the container failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a host command in the container's network namespace only.
    pub fn net(&self, args: &[&str]) -> String {
        let out = Command::new("timeout")
            .args([&EXEC.as_secs().to_string(), "nsenter", "-t", &self.pid1.to_string(), "-n"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `systemctl show -p PROP netadmd`'s value.
    pub fn unit(&self, prop: &str) -> String {
        self.ok(&["systemctl", "show", "--value", "-p", prop, "netadmd.service"]).trim().to_owned()
    }

    /// A sysfs attribute of network device `dev`, in the container.
    pub fn sysfs(&self, dev: &str, attr: &str) -> String {
        self.ok(&["cat", &format!("/sys/class/net/{dev}/{attr}")]).trim().to_owned()
    }

    /// nspawn's own output (the boot log).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("boot.log")).unwrap_or_default()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() && self.pid1 != 0 {
            let j = self.exec(&["journalctl", "-b", "--no-pager", "-n", "80"]);
            eprintln!("the container's journal:\n{}", String::from_utf8_lossy(&j.stdout));
        }
        // SIGTERM: nspawn asks the container's systemd to halt.
        let _ = Command::new("kill").arg("-TERM").arg(self.nspawn.id().to_string()).status();
        let deadline = Instant::now() + HALT;
        while self.nspawn.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                eprintln!("the container did not halt within {HALT:?}: killing it");
                if self.pid1 != 0 {
                    // Killing a pid namespace's init kills all of it.
                    let _ = Command::new("kill").arg("-KILL").arg(self.pid1.to_string()).status();
                }
                let _ = self.nspawn.kill();
                let _ = self.nspawn.wait();
                break;
            }
            std::thread::yield_now();
        }
        if let Some(d) = &self.made_run_dir {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Waits until the unit's properties satisfy `want`.
pub fn await_unit(c: &Container, what: &str, want: impl Fn(&Container) -> bool) {
    let deadline = Instant::now() + RESTART;
    while !want(c) {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {RESTART:?}; unit: {}",
            c.ok(&["systemctl", "status", "--no-pager", "netadmd.service"])
        );
        std::thread::yield_now();
    }
}

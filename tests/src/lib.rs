//! Test harness for end-to-end tests: a private `dbus-daemon`, a real
//! `netadmd` on it, and the real `netadm` binary.
//!
//! The binaries come from the workspace's target directory, built by
//! `cargo test --workspace`. Every wait is for an event (a line a process
//! prints, a process exiting) with a deadline.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

pub mod raw;

/// How long a process gets to say it is ready.
const READY: Duration = Duration::from_secs(20);

/// The directory holding the workspace's binaries.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>
    exe.parent().and_then(Path::parent).expect("target dir").to_path_buf()
}

/// Path of workspace binary `name`, which must have been built.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(p.exists(), "{} not built: run `cargo test --workspace`", p.display());
    p
}

/// Reads lines of `r` on a thread; the receiver gets each line.
fn lines(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line satisfying `want`, or panics after [`READY`].
fn await_line(rx: &mpsc::Receiver<String>, what: &str, want: impl Fn(&str) -> bool) -> String {
    await_lines(rx, what, want).pop().unwrap()
}

/// Waits for a line satisfying `want`, or panics after [`READY`]; returns
/// every line up to it, it last.
fn await_lines(
    rx: &mpsc::Receiver<String>,
    what: &str,
    want: impl Fn(&str) -> bool,
) -> Vec<String> {
    let deadline = std::time::Instant::now() + READY;
    let mut seen = vec![];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let done = want(&l);
                seen.push(l);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("{what} did not get ready; it printed: {seen:#?}"),
        }
    }
}

/// A private message bus in a temporary directory.
pub struct Bus {
    child: Child,
    address: String,
    dir: tempfile::TempDir,
}

/// A system bus's default policy (from dbus's system.conf): everyone may
/// connect; nobody may own names or call methods unless a policy file
/// punches a hole.
const SYSTEM_DEFAULT: &str = r#"
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
  </policy>"#;

/// Allows everything: for tests that are not about bus policy.
const ALLOW_ALL: &str = r#"
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>"#;

impl Bus {
    /// Starts a bus allowing everything (policy is not what most tests are
    /// about; netadmd's own authorization still applies).
    pub fn start() -> Self {
        Self::start_with(ALLOW_ALL)
    }

    /// Starts a bus with a system bus's default policy plus the policy file
    /// `include`, as an installed system would have.
    pub fn start_system_like(include: &Path) -> Self {
        Self::start_with(&format!("{SYSTEM_DEFAULT}\n  <include>{}</include>", include.display()))
    }

    fn start_with(policy: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Unprivileged test callers must reach the socket.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let sock = dir.path().join("bus");
        let conf = dir.path().join("bus.conf");
        std::fs::write(
            &conf,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  {policy}
</busconfig>"#,
                sock.display()
            ),
        )
        .unwrap();
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            // It complains it cannot raise its fd limit; that is all it says.
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon must be installed (apt-get install dbus-daemon)");
        let rx = lines(child.stdout.take().unwrap());
        let address = await_line(&rx, "dbus-daemon", |l| l.starts_with("unix:"));
        Self { child, address, dir }
    }

    /// The bus address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// A fresh directory inside the bus's temporary directory.
    pub fn subdir(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `netadmd`.
pub struct Daemon {
    child: Child,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// What it printed to stderr until it served.
    pub startup: Vec<String>,
    stderr: mpsc::Receiver<String>,
}

impl Daemon {
    /// Starts `netadmd` on `bus` with `state_dir` and waits until it serves.
    pub fn start(bus: &Bus, state_dir: &Path, extra: &[&str]) -> Self {
        Self::start_env(bus, state_dir, extra, &[])
    }

    /// [`Daemon::start`] with environment variables set (e.g. `FAILPOINTS`).
    pub fn start_env(bus: &Bus, state_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(bin("netadmd"))
            .envs(env.iter().copied())
            .args(["--bus", bus.address(), "--state-dir"])
            .arg(state_dir)
            // Tests run in the host's network namespace unless they made
            // one: no TAP devices there.
            .args(["--kernel-mirror", "off"])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = lines(child.stderr.take().unwrap());
        let startup = await_lines(&stderr, "netadmd", |l| l.contains("serving org.netadm.Netadm1"));
        Self { child, state_dir: state_dir.to_path_buf(), startup, stderr }
    }

    /// Runs `netadmd` expecting it to refuse to start; returns its stderr.
    pub fn start_fails(bus: &Bus, state_dir: &Path) -> String {
        let out = Command::new(bin("netadmd"))
            .args(["--bus", bus.address(), "--kernel-mirror", "off", "--state-dir"])
            .arg(state_dir)
            .output()
            .unwrap();
        assert!(!out.status.success(), "netadmd started but should not have");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// SIGTERM, then waits for it to exit.
    pub fn stop(mut self) -> ExitStatus {
        // SAFETY-free: kill(1) is the portable way without a libc dependency.
        Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        self.child.wait().unwrap()
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for it to exit by itself (at most `within`); its status, or
    /// `None` if it is still running then.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        // Its stderr closes when it exits: that is the event.
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Timeout) => return None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Some(self.child.wait().unwrap());
                }
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it printed to stderr so far.
    pub fn stderr_so_far(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts netadmd in network namespace `ns` on `bus` with the kernel
/// mirror on, hardware `hw` and its state in `state`; waits until it
/// answers (20 s at most). The caller kills and reaps it.
pub fn netadmd_in_netns(ns: &str, bus: &Bus, hw: &Path, state: &Path) -> Child {
    let daemon = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin("netadmd"))
        .args(["--bus", bus.address(), "--kernel-mirror", "on", "--config"])
        .arg(hw)
        .arg("--state-dir")
        .arg(state)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + READY;
    while !netadm(bus, &["show-link"]).status.success() {
        assert!(std::time::Instant::now() < deadline, "netadmd did not come up");
        std::thread::yield_now();
    }
    daemon
}

/// Runs `netadm` against `bus`.
pub fn netadm(bus: &Bus, args: &[&str]) -> Output {
    Command::new(bin("netadm")).env("NETADM_BUS", bus.address()).args(args).output().unwrap()
}

/// Runs `netadm` against `bus` as uid/gid `id` with the supplementary
/// groups `groups` (via setpriv(1)).
pub fn netadm_as(bus: &Bus, id: u32, groups: &[u32], args: &[&str]) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={id}")).arg(format!("--regid={id}"));
    if groups.is_empty() {
        cmd.arg("--clear-groups");
    } else {
        let g: Vec<String> = groups.iter().map(ToString::to_string).collect();
        cmd.arg(format!("--groups={}", g.join(",")));
    }
    cmd.arg(bin("netadm")).env("NETADM_BUS", bus.address()).args(args).output().unwrap()
}

/// Whether this process may switch users (the authorization tests need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Whether a test's prerequisites are here: root (when `root_for` says
/// what for) and each `(tool, Debian package)` on PATH. If not, it prints
/// "skipped: needs ..." and returns false, unless under CI (`CI=true`),
/// where a missing prerequisite fails the test: `.ci/run` installs the
/// packages and runs as root.
pub fn prerequisites(root_for: Option<&str>, tools: &[(&str, &str)]) -> bool {
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    let mut missing = vec![];
    if let Some(why) = root_for.filter(|_| !is_root()) {
        missing.push(format!("root, {why}"));
    }
    for (tool, package) in tools {
        if !on_path(tool) {
            missing.push(format!("{tool} (apt-get install {package})"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let what = missing.join(", ");
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and missing: {what}");
    eprintln!("skipped: needs {what}");
    false
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs `netadm ARGS` (no --json), which must succeed; returns its stdout.
pub fn text(bus: &Bus, args: &[&str]) -> String {
    let out = netadm(bus, args);
    assert!(out.status.success(), "netadm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `netadm --json ARGS`, which must succeed; returns its JSON.
pub fn json(bus: &Bus, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = netadm(bus, &a);
    assert!(
        out.status.success(),
        "netadm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("netadm {args:?}: not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
    })
}

/// Runs `netadm --json ARGS`, which must fail; returns (kind, message).
pub fn json_err(bus: &Bus, args: &[&str]) -> (String, String) {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = netadm(bus, &a);
    assert!(!out.status.success(), "netadm {args:?} succeeded but should have failed");
    assert_eq!(out.status.code(), Some(1), "netadm {args:?}: exit status");
    let v: Value = serde_json::from_slice(&out.stderr).unwrap_or_else(|e| {
        panic!("netadm {args:?}: stderr not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr))
    });
    let e = &v["error"];
    (e["kind"].as_str().unwrap().to_owned(), e["message"].as_str().unwrap().to_owned())
}

/// Waits until `cond` holds, for at most 30 s.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// The rows of a `show-*` JSON array whose `key` equals `value`.
pub fn rows<'a>(v: &'a Value, key: &str, value: &str) -> Vec<&'a Value> {
    v.as_array().expect("array").iter().filter(|r| r[key] == value).collect()
}

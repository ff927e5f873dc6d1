//! The `netadm` binary (also as `dladm` and `ipadm`) against a bus, its
//! JSON output parsed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Bus, Error, bin};

/// `netadm` (or a link to it) pointed at one bus (`NETADM_BUS`), and at
/// a netadmd's private socket first (`NETADM_PRIVATE`) when told.
#[derive(Debug, Clone)]
pub struct Cli {
    program: PathBuf,
    bus: String,
    /// The private socket, or none: the bus alone (`NETADM_PRIVATE` set
    /// empty, so that the caller's environment never steers a test).
    private: Option<PathBuf>,
}

impl Cli {
    /// The workspace's `netadm` against `bus`.
    pub fn new(bus: &Bus) -> Self {
        Self::with(bin("netadm"), bus.address())
    }

    /// `program` (a `netadm` binary or a link to it) against the bus at
    /// `address`.
    pub fn with(program: impl Into<PathBuf>, address: impl Into<String>) -> Self {
        Self { program: program.into(), bus: address.into(), private: None }
    }

    /// The same `netadm`, connecting to the private socket at `path` first
    /// (root's way to a netadmd that serves one), the bus when it cannot.
    pub fn private(mut self, path: impl Into<PathBuf>) -> Self {
        self.private = Some(path.into());
        self
    }

    /// The command `netadm ARGS` (stdin closed), to be run by the caller.
    /// A plain command: its spawn costs what a user's does, so that its
    /// wall time is what a user waits for.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.program);
        c.env("NETADM_BUS", &self.bus)
            .env("NETADM_PRIVATE", self.private.as_deref().unwrap_or("".as_ref()))
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// Runs `netadm ARGS` to its end, whatever its exit status.
    pub fn output(&self, args: &[&str]) -> Result<Output, Error> {
        self.command(args)
            .output()
            .map_err(|source| Error::Spawn { program: self.program.display().to_string(), source })
    }

    /// Runs `netadm ARGS`, which must succeed: its stdout and how long the
    /// process took, spawn to exit.
    pub fn run_timed(&self, args: &[&str]) -> Result<(String, Duration), Error> {
        let t0 = Instant::now();
        let out = self.output(args)?;
        let took = t0.elapsed();
        if !out.status.success() {
            return Err(Error::Failed {
                command: format!("netadm {}", args.join(" ")),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok((String::from_utf8_lossy(&out.stdout).into_owned(), took))
    }

    /// Runs `netadm ARGS`, which must succeed; its stdout.
    pub fn run(&self, args: &[&str]) -> Result<String, Error> {
        self.run_timed(args).map(|(out, _)| out)
    }

    /// Runs `netadm --json ARGS`, which must succeed: its JSON and how
    /// long the process took.
    pub fn json_timed(&self, args: &[&str]) -> Result<(Value, Duration), Error> {
        let full: Vec<&str> = std::iter::once("--json").chain(args.iter().copied()).collect();
        let (out, took) = self.run_timed(&full)?;
        let v = serde_json::from_str(&out).map_err(|e| Error::Output {
            command: format!("netadm {}", full.join(" ")),
            message: format!("not JSON ({e}): {out}"),
        })?;
        Ok((v, took))
    }
}

/// Runs `netadm` against `bus`.
pub fn netadm(bus: &Bus, args: &[&str]) -> Output {
    Cli::new(bus).output(args).unwrap_or_else(|e| panic!("{e}"))
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
    cmd.arg(bin("netadm"))
        .env("NETADM_BUS", bus.address())
        .env("NETADM_PRIVATE", "")
        .args(args)
        .output()
        .unwrap()
}

/// Runs `netadm ARGS` (no --json), which must succeed; returns its stdout.
pub fn text(bus: &Bus, args: &[&str]) -> String {
    let out = netadm(bus, args);
    assert!(out.status.success(), "netadm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `netadm show-config` (the persistent configuration as TOML), which must
/// succeed.
pub fn show_config(bus: &Bus) -> String {
    text(bus, &["show-config"])
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

/// Bad input: each command in `cases` is refused with its error kind
/// (`InvalidArgument`, `NotFound`, ...), and `state` (what the commands
/// could have changed: show output, links.toml, the kernel) reads the same
/// after all of them as before.
pub fn refused<T: PartialEq>(bus: &Bus, state: impl Fn() -> T, cases: &[(&[&str], &str)]) {
    let before = state();
    for (args, kind) in cases {
        let (k, msg) = json_err(bus, args);
        assert_eq!(k, *kind, "{args:?}: {msg}");
    }
    assert!(state() == before, "a refused change changed something");
}

/// The rows of a `show-*` JSON array whose `key` equals `value`.
pub fn rows<'a>(v: &'a Value, key: &str, value: &str) -> Vec<&'a Value> {
    v.as_array().expect("array").iter().filter(|r| r[key] == value).collect()
}

/// Makes `dladm`, `ipadm`, `dlstat`, `flowadm` and `flowstat` in `dir`,
/// symbolic links to the workspace's `netadm` (as `systemd/install.sh`
/// installs them); returns `dir`.
pub fn illumos_links(dir: &Path) -> PathBuf {
    for name in ["dladm", "ipadm", "dlstat", "flowadm", "flowstat"] {
        std::os::unix::fs::symlink(bin("netadm"), dir.join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()));
    }
    dir.to_path_buf()
}

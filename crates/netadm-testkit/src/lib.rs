//! One harness for everything that starts netadm's processes: the
//! end-to-end tests (`tests/`), the benchmarks that drive the real daemon
//! (`netadm-bench`) and `netadm demo`.
//!
//! - [`Bus`]: a private `dbus-daemon` in a directory of its own, allowing
//!   everything or with a system bus's default policy plus a policy file;
//! - [`Daemon`]: `netadmd` on it ([`DaemonBuilder`]: arguments, state
//!   directory, hardware, kernel mirror, a network namespace), ready when
//!   it prints that it serves, stopped by SIGTERM or SIGKILL, restarted on
//!   the same state;
//! - [`Cli`] and the functions over a [`Bus`] ([`netadm`], [`json`],
//!   [`json_err`], ...): the `netadm` binary, also as `dladm`/`ipadm`
//!   ([`illumos_links`]), its JSON output parsed;
//! - [`fixtures`]: the hardware configurations the tests and benchmarks
//!   run on, named and written as TOML;
//! - [`Netns`]: network namespaces named by this process's pid, removed on
//!   drop (also on panic), veth pairs into them ([`kernel_far_side`]: veth
//!   "NICs" for kernel ports), commands and closures run inside, and
//!   [`sweep_stale`] for what a killed earlier run left;
//! - [`raw`]: a raw packet socket, the far side of a wire; [`iperf3`]:
//!   iperf3 driven in namespaces and its intervals read;
//! - [`guest`]: a Linux test guest under QEMU (`netadm-guest`), with
//!   netadmd and netadm inside it on the guest's NICs as kernel ports;
//! - [`bin`], [`bin_dir`]: the workspace's binaries.
//!
//! Every wait is for an event (a line a process prints, a process
//! exiting, a state reached) with a deadline, never a fixed sleep. Every
//! process the kit starts is killed if the thread that started it dies
//! (`PR_SET_PDEATHSIG`), so a run ended by a signal, which runs no
//! destructor, leaves no process behind.
//!
//! It depends on nothing of netadm's own: it starts processes and reads
//! what they print.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

mod bus;
mod cli;
mod daemon;
pub mod fixtures;
pub mod guest;
pub mod iperf3;
mod netns;
mod process;
pub mod raw;

pub use bus::{Bus, Policy};
pub use cli::{
    Cli, illumos_links, json, json_err, netadm, netadm_as, refused, rows, show_config, text,
};
pub use daemon::{Daemon, DaemonBuilder, SERVING};
pub use fixtures::Hardware;
pub use netns::{
    Netns, Scratch, bridged_far_side, enter, ip, kernel_far_side, link_counts, netadm_far_side,
    sweep_stale, veth, veth_nic,
};
pub use process::{Lines, Reaped, Stop, command, dhcp_server, in_netns, run, sh, words};

/// What went wrong starting, waiting for or running a process. Its
/// `Debug` is its message, so that a test's `unwrap()` says it plainly.
pub enum Error {
    /// A program could not be started at all.
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command ran and failed.
    Failed {
        /// The command line.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// What it printed to stderr.
        stderr: String,
    },
    /// A process did not print the line awaited within its deadline.
    NotReady {
        /// The process.
        what: String,
        /// The deadline.
        within: Duration,
        /// What it printed meanwhile.
        seen: Vec<String>,
    },
    /// A process ended before printing the line awaited.
    Exited {
        /// The process.
        what: String,
        /// What it printed.
        seen: Vec<String>,
    },
    /// A state waited for was not reached within its deadline.
    Timeout {
        /// The state.
        what: String,
    },
    /// A file or directory could not be made, written or read.
    Io {
        /// What was being done.
        action: &'static str,
        /// To what.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A system call failed.
    Os {
        /// The call and what it was for.
        call: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command's output was not what it should be (not JSON, a field
    /// missing).
    Output {
        /// The command line.
        command: String,
        /// What was wrong.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Spawn { program, source } => write!(f, "cannot run {program}: {source}"),
            Error::Failed { command, status, stderr } => {
                write!(f, "`{command}` failed ({status}): {}", stderr.trim())
            }
            Error::NotReady { what, within, seen } => {
                write!(f, "{what} was not ready within {within:?}; it printed: {seen:#?}")
            }
            Error::Exited { what, seen } => write!(f, "{what} exited; it printed: {seen:#?}"),
            Error::Timeout { what } => write!(f, "timed out waiting for {what}"),
            Error::Io { action, path, source } => {
                write!(f, "cannot {action} {}: {source}", path.display())
            }
            Error::Os { call, source } => write!(f, "{call}: {source}"),
            Error::Output { command, message } => write!(f, "{command}: {message}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Spawn { source, .. } | Error::Io { source, .. } | Error::Os { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}

/// The benchmarks and the demo report errors as text.
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

/// The directory holding the workspace's binaries: the one this program
/// runs from, or for a test executable (`target/PROFILE/deps/TEST`) the
/// one above it.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the path of this executable");
    let dir = exe.parent().expect("this executable's directory");
    match dir.file_name() {
        Some(d) if d == "deps" => dir.parent().unwrap_or(dir).to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// Where workspace binary `name` is, built or not.
pub fn bin_path(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// The path of workspace binary `name`, which must have been built
/// (panics, saying how to build it, when it was not).
pub fn bin(name: &str) -> PathBuf {
    let p = bin_path(name);
    assert!(p.exists(), "{} not built: run `cargo test --workspace`", p.display());
    p
}

/// The dynamic loader the ELF program at `path` asks for (its
/// `PT_INTERP`), or `None` for a static one: whether starting it costs the
/// loader's work (mapping and relocating its shared libraries).
pub fn interpreter(path: &Path) -> std::io::Result<Option<String>> {
    let elf = std::fs::read(path)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a 64-bit ELF file");
    let at = |o: usize, n: usize| elf.get(o..o + n).ok_or_else(bad);
    let word = |o: usize| -> std::io::Result<u64> {
        Ok(u64::from_le_bytes(at(o, 8)?.try_into().expect("8 bytes")))
    };
    let half = |o: usize| -> std::io::Result<usize> {
        Ok(u16::from_le_bytes(at(o, 2)?.try_into().expect("2 bytes")).into())
    };
    if at(0, 5)? != b"\x7fELF\x02" {
        return Err(bad());
    }
    let (phoff, phentsize, phnum) = (word(0x20)? as usize, half(0x36)?, half(0x38)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        // PT_INTERP: the loader's path, NUL-terminated, at p_offset.
        if u32::from_le_bytes(at(ph, 4)?.try_into().expect("4 bytes")) == 3 {
            let (off, size) = (word(ph + 8)? as usize, word(ph + 32)? as usize);
            let name = at(off, size)?.split(|b| *b == 0).next().unwrap_or_default();
            return Ok(Some(String::from_utf8_lossy(name).into_owned()));
        }
    }
    Ok(None)
}

/// The repository's root directory (as this crate was built from it).
pub fn repo_root() -> PathBuf {
    let kit = Path::new(env!("CARGO_MANIFEST_DIR"));
    kit.parent().and_then(Path::parent).expect("crates/netadm-testkit in a checkout").to_path_buf()
}

/// Whether this process runs with effective uid 0 (namespaces, TAP
/// devices, switching users).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `tool` is an executable file in a directory of `PATH`.
pub fn have(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| {
        std::fs::metadata(d.join(tool))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether a test's prerequisites are here: root (when `root_for` says
/// what for) and each `(tool, Debian package)` on PATH. If not, it prints
/// "skipped: needs ..." and returns false, unless under CI (`CI=true`),
/// where a missing prerequisite fails the test: `.ci/run` installs the
/// packages and runs as root.
pub fn prerequisites(root_for: Option<&str>, tools: &[(&str, &str)]) -> bool {
    let mut missing = vec![];
    if let Some(why) = root_for.filter(|_| !is_root()) {
        missing.push(format!("root, {why}"));
    }
    for (tool, package) in tools {
        if !have(tool) {
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

/// The Debian package of each tool a test may need (`.ci/run` installs
/// them).
const PACKAGES: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("tc", "iproute2"),
    ("ping", "iputils-ping"),
    ("iperf3", "iperf3"),
    ("ethtool", "ethtool"),
    ("setpriv", "util-linux"),
    ("sysctl", "procps"),
    ("dnsmasq", "dnsmasq-base"),
    ("ansible-playbook", "ansible"),
    ("nft", "nftables"),
];

/// [`prerequisites`] of a test that makes network namespaces: root, `ip`
/// and each tool of `tools` (named as on PATH; each must be one of the
/// kit's known tools, whose Debian package it names).
pub fn netns_prerequisites(tools: &[&str]) -> bool {
    let package = |tool: &str| {
        let known = PACKAGES.iter().find(|(t, _)| *t == tool);
        known.unwrap_or_else(|| panic!("netns_prerequisites: no package known for {tool}")).1
    };
    let all: Vec<(&str, &str)> =
        std::iter::once("ip").chain(tools.iter().copied()).map(|t| (t, package(t))).collect();
    prerequisites(Some("to make network namespaces"), &all)
}

/// A test's namespaces, `{tag}{pid}{suffix}` for each suffix, loopback
/// up, once `tools` are there ([`netns_prerequisites`]); none when the
/// test is skipped.
pub fn namespaces<const N: usize>(
    tools: &[&str],
    tag: &str,
    suffixes: [&str; N],
) -> Option<[Netns; N]> {
    netns_prerequisites(tools).then(|| suffixes.map(|s| Netns::unique(tag, s).unwrap()))
}

/// Waits (yielding) until `cond` holds, for at most `within`.
pub fn try_wait_for(
    what: &str,
    within: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<(), Error> {
    let deadline = Instant::now() + within;
    while !cond() {
        if Instant::now() > deadline {
            return Err(Error::Timeout { what: what.to_owned() });
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// Asserts that a flow limited to `maxbw` Mb/s was measured within 5 %
/// of it (`got`), while traffic in no flow, offered at `offered` Mb/s,
/// passed (`other`, at least 90 % of it); prints both first, for the
/// record (`what` names the flow).
pub fn assert_flow_limit(what: &str, got: f64, maxbw: f64, other: f64, offered: f64) {
    let err = (got - maxbw) / maxbw;
    eprintln!(
        "{what} (maxbw {maxbw}M): {got:.3} Mb/s ({:+.1} %); no flow's: {other:.2} Mb/s of {offered}",
        err * 100.0
    );
    assert!(err.abs() <= 0.05, "{what} sent {got:.3} Mb/s, maxbw {maxbw} ({err:+.3})");
    assert!(
        other >= 0.9 * offered,
        "traffic in no flow was held back: {other:.2} Mb/s of {offered}"
    );
}

/// Waits until `cond` holds, for at most 30 s; panics after that.
pub fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    try_wait_for(what, Duration::from_secs(30), cond).unwrap_or_else(|e| panic!("{e}"));
}

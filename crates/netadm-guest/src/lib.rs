//! A Linux test guest under QEMU, for what this host's kernel cannot run:
//! bonding, 802.1Q, a real NIC driver (e1000e).
//!
//! It boots Debian's kernel (fetched with `apt-get download`, unpacked
//! with `dpkg -x` into a cache, never installed) with an initramfs built
//! here: busybox, the modules a test asks for with their dependencies,
//! host binaries with their shared libraries, and an `/init` that loads
//! the modules, names the NICs and runs the test's shell script. Each NIC
//! is a tap in a network namespace the caller made. The guest's serial
//! console comes back line by line; the script's exit status comes back
//! as a marker line; QEMU is killed at a deadline.
//!
//! ```no_run
//! use std::time::Duration;
//! use netadm_guest::{GuestConfig, Nic};
//!
//! let out = GuestConfig::new("ip -br link; ethtool -i eth0")
//!     .netns("mytest-ns")
//!     .nic(Nic::e1000e("tap0"))
//!     .binary("ip")
//!     .binary("ethtool")
//!     .run(Duration::from_secs(60))?;
//! assert_eq!(out.code, 0, "{}", out.transcript());
//! # Ok::<(), netadm_guest::Error>(())
//! ```

mod cache;
mod cpio;
mod guest;
mod initramfs;
mod modules;
mod nic;
mod qemu;
mod running;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use cache::{BUSYBOX_PACKAGE, KERNEL_METAPACKAGE, Kernel, cache_dir};
pub use guest::{GuestConfig, missing_prerequisites};
pub use nic::{Nic, NicModel};
pub use qemu::Accel;
pub use running::{Guest, Outcome, Prepared, Timings};

/// Why a guest could not be prepared, booted or waited for. Errors after
/// boot carry everything the guest printed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A host command the harness runs failed (or is missing).
    Tool {
        /// The command.
        tool: String,
        /// Its arguments, status and stderr.
        why: String,
    },
    /// apt could not say or fetch what a package is.
    Apt {
        /// The package.
        package: String,
        /// What went wrong.
        why: String,
    },
    /// The unpacked kernel cannot be booted.
    Kernel(String),
    /// A module asked for is not in the kernel, or its dependencies are not.
    Module {
        /// The module.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A host binary asked for cannot be carried into the guest.
    Binary {
        /// The program as asked for.
        program: String,
        /// Why not.
        why: String,
    },
    /// The configuration is wrong; nothing was made.
    BadConfig(String),
    /// QEMU could not be started.
    Spawn(String),
    /// The guest's /init failed before the test's script ran.
    Setup {
        /// What /init reported.
        what: String,
        /// The guest's output.
        transcript: Transcript,
    },
    /// A deadline passed; the guest was killed.
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline.
        within: Duration,
        /// The guest's output up to then.
        transcript: Transcript,
    },
    /// QEMU ended before the script reported its exit status.
    Ended {
        /// QEMU's exit status.
        status: String,
        /// The guest's output.
        transcript: Transcript,
    },
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_owned(), source }
    }

    /// The guest's output, when the error came after boot.
    pub fn transcript(&self) -> Option<&Transcript> {
        match self {
            Error::Setup { transcript, .. }
            | Error::Timeout { transcript, .. }
            | Error::Ended { transcript, .. } => Some(transcript),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Tool { tool, why } => write!(f, "{tool}: {why}"),
            Error::Apt { package, why } => write!(f, "package {package} {why}"),
            Error::Kernel(why) => write!(f, "guest kernel: {why}"),
            Error::Module { name, why } => write!(f, "module {name} {why}"),
            Error::Binary { program, why } => write!(f, "binary {program}: {why}"),
            Error::BadConfig(why) => write!(f, "guest configuration: {why}"),
            Error::Spawn(why) => write!(f, "starting QEMU: {why}"),
            Error::Setup { what, transcript } => {
                write!(f, "guest /init failed: {what}\n{transcript}")
            }
            Error::Timeout { what, within, transcript } => {
                write!(f, "guest: no {what} within {within:?}; QEMU killed\n{transcript}")
            }
            Error::Ended { status, transcript } => {
                write!(
                    f,
                    "guest ended ({status}) before its script reported an exit status\n{transcript}"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a guest printed: its serial console, line by line, each with the
/// host time since QEMU was spawned, and QEMU's own stderr.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// Serial console lines (`\r` removed) and when each arrived.
    pub lines: Vec<(Duration, String)>,
    /// QEMU's stderr lines.
    pub qemu_stderr: Vec<String>,
}

impl fmt::Display for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "--- guest console ({} lines)", self.lines.len())?;
        for (at, l) in &self.lines {
            writeln!(f, "{:7.3} {l}", at.as_secs_f64())?;
        }
        if !self.qemu_stderr.is_empty() {
            writeln!(f, "--- QEMU stderr")?;
            for l in &self.qemu_stderr {
                writeln!(f, "{l}")?;
            }
        }
        write!(f, "---")
    }
}

//! `netadmd` on a [`Bus`]: started with a deadline on the line it prints
//! when it serves, stopped, killed, restarted on the same state.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::Hardware;
use crate::{Bus, Error, Lines, bin, in_netns};

/// What netadmd prints (to stderr) once it serves on the bus.
pub const SERVING: &str = "serving org.netadm.Netadm1";

/// How long netadmd gets to serve, unless told otherwise.
const READY: Duration = Duration::from_secs(20);

/// The hardware a daemon is told to use (`--config`).
#[derive(Debug, Clone)]
enum Config {
    /// A file that exists.
    File(PathBuf),
    /// A fixture, written beside the state directory when it starts.
    Fixture(Hardware),
}

/// How to start a `netadmd`; [`Daemon::builder`] makes one. By default:
/// the workspace's `netadmd`, the embedded default hardware, in this
/// network namespace with the kernel mirror off (no devices on the host).
#[derive(Debug, Clone)]
pub struct DaemonBuilder {
    program: Option<PathBuf>,
    bus: String,
    state: PathBuf,
    config: Option<Config>,
    kernel_mirror: Option<bool>,
    netns: Option<String>,
    private: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    ready_within: Duration,
}

impl DaemonBuilder {
    /// Runs `program` instead of the workspace's `netadmd`.
    pub fn program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = Some(program.into());
        self
    }

    /// Hardware from the file `path` (`--config`).
    pub fn config(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = Some(Config::File(path.into()));
        self
    }

    /// Hardware `hw`, written to `STATE.hw.toml` (beside the state
    /// directory, not in it) when the daemon starts.
    pub fn hardware(mut self, hw: &Hardware) -> Self {
        self.config = Some(Config::Fixture(hw.clone()));
        self
    }

    /// Runs it in network namespace `ns` (`ip netns exec`); the kernel
    /// mirror is then on unless [`DaemonBuilder::kernel_mirror`] says
    /// otherwise.
    pub fn netns(mut self, ns: impl Into<String>) -> Self {
        self.netns = Some(ns.into());
        self
    }

    /// `--kernel-mirror on` or `off`; by default on in a namespace of the
    /// caller's ([`DaemonBuilder::netns`]), off otherwise.
    pub fn kernel_mirror(mut self, on: bool) -> Self {
        self.kernel_mirror = Some(on);
        self
    }

    /// Serves on the private socket `path` too (`--private-socket`); by
    /// default it serves none (`--private-socket none`), as another bus's
    /// netadmd does, and never takes the system's.
    pub fn private_socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.private = Some(path.into());
        self
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More arguments.
    pub fn args<A: Into<OsString>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable (`FAILPOINTS`, `RUST_LOG`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long it gets to say it serves (20 s unless set).
    pub fn ready_within(mut self, within: Duration) -> Self {
        self.ready_within = within;
        self
    }

    /// The command line, with the fixture (if any) written.
    fn command(&self) -> Result<std::process::Command, Error> {
        let program = self.program.clone().unwrap_or_else(|| bin("netadmd"));
        let mut cmd = in_netns(self.netns.as_deref(), program);
        let mirror = self.kernel_mirror.unwrap_or(self.netns.is_some());
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .arg("--bus")
            .arg(&self.bus)
            .arg("--state-dir")
            .arg(&self.state)
            .args(["--kernel-mirror", if mirror { "on" } else { "off" }])
            .arg("--private-socket")
            .arg(self.private.as_deref().unwrap_or("none".as_ref()));
        match &self.config {
            Some(Config::File(path)) => {
                cmd.arg("--config").arg(path);
            }
            Some(Config::Fixture(hw)) => {
                // STATE.hw.toml beside STATE (a trailing `/` or not).
                let name = self.state.file_name().unwrap_or("state".as_ref()).to_string_lossy();
                let path = self.state.with_file_name(format!("{name}.hw.toml"));
                cmd.arg("--config").arg(hw.write(&path)?);
            }
            None => {}
        }
        cmd.args(&self.args);
        Ok(cmd)
    }

    /// Starts it and waits until it serves (or exits, or the deadline
    /// passes: an error with what it printed).
    pub fn try_start(&self) -> Result<Daemon, Error> {
        let t0 = Instant::now();
        let mut child = self
            .command()?
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn { program: "netadmd".into(), source })?;
        let stderr = Lines::read(child.stderr.take().expect("piped"));
        let mut d = Daemon {
            child,
            state_dir: self.state.clone(),
            startup: vec![],
            started_in: Duration::ZERO,
            stderr,
            builder: self.clone(),
        };
        d.startup = d.stderr.await_line("netadmd", self.ready_within, |l| l.contains(SERVING))?;
        d.started_in = t0.elapsed();
        Ok(d)
    }

    /// [`DaemonBuilder::try_start`] for a test: panics if it does not serve.
    pub fn start(&self) -> Daemon {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs it expecting it to refuse to start; returns its stderr (panics
    /// if it exits successfully).
    pub fn start_fails(&self) -> String {
        let out = self.command().and_then(|mut c| {
            c.output().map_err(|source| Error::Spawn { program: "netadmd".into(), source })
        });
        let out = out.unwrap_or_else(|e| panic!("{e}"));
        assert!(!out.status.success(), "netadmd started but should not have");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// A running `netadmd`, killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// What it printed to stderr until it served, the serving line last.
    pub startup: Vec<String>,
    started_in: Duration,
    stderr: Lines,
    builder: DaemonBuilder,
}

impl Daemon {
    /// The address its metrics are served on (`--metrics-listen`), as it
    /// logged it when it started; panics if it logged none.
    pub fn metrics_address(&self) -> String {
        self.startup
            .iter()
            .find_map(|l| l.split("http://").nth(1))
            .and_then(|a| a.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("no metrics address logged: {:#?}", self.startup))
            .to_owned()
    }

    /// How to start netadmd on `bus` with its state in `state`.
    pub fn builder(bus: &Bus, state: impl Into<PathBuf>) -> DaemonBuilder {
        DaemonBuilder {
            program: None,
            bus: bus.address().to_owned(),
            state: state.into(),
            config: None,
            kernel_mirror: None,
            netns: None,
            private: None,
            args: vec![],
            env: vec![],
            ready_within: READY,
        }
    }

    /// Starts `netadmd` on `bus` with `state_dir` and the arguments
    /// `extra` (kernel mirror off) and waits until it serves.
    pub fn start(bus: &Bus, state_dir: &Path, extra: &[&str]) -> Self {
        Self::builder(bus, state_dir).args(extra).start()
    }

    /// [`Daemon::start`] with environment variables set (`FAILPOINTS`).
    pub fn start_env(bus: &Bus, state_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let b = env.iter().fold(Self::builder(bus, state_dir), |b, (k, v)| b.env(k, v));
        b.args(extra).start()
    }

    /// Runs `netadmd` (kernel mirror off) expecting it to refuse to
    /// start; returns its stderr.
    pub fn start_fails(bus: &Bus, state_dir: &Path) -> String {
        Self::builder(bus, state_dir).start_fails()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How long it took from spawn to its serving line.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// What it printed to stderr since it served that nobody took yet.
    pub fn stderr_so_far(&self) -> Vec<String> {
        self.stderr.so_far()
    }

    /// Waits up to 30 s for a line on its stderr satisfying `want`; the
    /// line. Panics (with what it printed) if none comes.
    pub fn await_stderr(&self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let seen = self.stderr.await_line(what, Duration::from_secs(30), want);
        seen.unwrap_or_else(|e| panic!("{e}")).pop().expect("the line awaited")
    }

    /// SIGTERM, then waits for it to exit; its status.
    pub fn try_stop(mut self) -> Result<ExitStatus, Error> {
        let pid = self.child.id();
        // SAFETY: kill(2) on the pid of a child we have not reaped: it
        // cannot name another process.
        if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } != 0 {
            let source = std::io::Error::last_os_error();
            return Err(Error::Spawn { program: format!("kill -TERM {pid}"), source });
        }
        self.child.wait().map_err(|source| Error::Spawn { program: "netadmd".into(), source })
    }

    /// [`Daemon::try_stop`] for a test (panics if it cannot signal it).
    pub fn stop(self) -> ExitStatus {
        self.try_stop().unwrap_or_else(|e| panic!("{e}"))
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(self) {
        drop(self);
    }

    /// Stops it (SIGTERM; a clean exit or a panic) and starts it again as
    /// it was started, on the same state.
    pub fn restart(self) -> Self {
        let builder = self.builder.clone();
        let status = self.stop();
        assert!(status.success(), "netadmd stopped with {status}");
        builder.start()
    }

    /// Waits for it to exit by itself (at most `within`); its status, or
    /// `None` if it is still running then.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        // Its stderr closes when it exits: that is the event.
        self.stderr.await_end(within).then(|| self.child.wait().expect("wait for netadmd"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

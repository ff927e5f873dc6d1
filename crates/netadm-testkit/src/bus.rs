//! A private message bus: `dbus-daemon` on a socket in a temporary
//! directory of its own.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::{Error, Lines, Reaped, command};

/// How long `dbus-daemon` gets to print its address.
const READY: Duration = Duration::from_secs(20);

/// The bus configuration: `SOCKET` and `POLICY` are filled in.
const CONFIG: &str = include_str!("policy/bus.xml");
/// Allows everything: for what is not about bus policy.
const ALLOW_ALL: &str = include_str!("policy/allow-all.xml");
/// A system bus's default policy (from dbus's system.conf): everyone may
/// connect; nobody may own names or call methods unless a policy file
/// punches a hole.
const SYSTEM_DEFAULT: &str = include_str!("policy/system-default.xml");

/// Who may do what on a [`Bus`].
#[derive(Debug, Clone, Copy)]
pub enum Policy<'a> {
    /// Everything is allowed (netadmd's own authorization still applies).
    AllowAll,
    /// A system bus's default policy plus the policy file given, as an
    /// installed system has it (`systemd/org.netadm.Netadm1.conf`).
    SystemLike(&'a Path),
}

/// A private `dbus-daemon`, killed with its directory on drop.
#[derive(Debug)]
pub struct Bus {
    address: String,
    // Dropped in this order: the daemon, then its directory.
    _daemon: Reaped,
    dir: tempfile::TempDir,
}

impl Bus {
    /// Starts a bus allowing everything; panics if it cannot.
    pub fn start() -> Self {
        Self::try_start(Policy::AllowAll).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a bus with a system bus's default policy plus the policy
    /// file `include`; panics if it cannot.
    pub fn start_system_like(include: &Path) -> Self {
        Self::try_start(Policy::SystemLike(include)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a bus with `policy` in a fresh temporary directory named
    /// `netadm-bus-PID-...` (see [`crate::sweep_stale`]) and waits for it
    /// to print its address.
    pub fn try_start(policy: Policy) -> Result<Self, Error> {
        let prefix = format!("netadm-bus-{}-", std::process::id());
        let tmp = std::env::temp_dir();
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { action, path, source }
        };
        let dir = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir()
            .map_err(io("make a directory in", &tmp))?;
        // Unprivileged callers (tests switch uids) must reach the socket.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(io("open up", dir.path()))?;
        let policy = match policy {
            Policy::AllowAll => ALLOW_ALL.to_owned(),
            Policy::SystemLike(include) => {
                format!("{SYSTEM_DEFAULT}  <include>{}</include>\n", include.display())
            }
        };
        let socket = dir.path().join("bus");
        let conf = dir.path().join("bus.conf");
        let text =
            CONFIG.replace("SOCKET", &socket.display().to_string()).replace("POLICY\n", &policy);
        std::fs::write(&conf, text).map_err(io("write", &conf))?;
        let mut child = command("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            // It complains it cannot raise its fd limit; that is all it says.
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| Error::Spawn {
                program: "dbus-daemon (apt-get install dbus-daemon)".into(),
                source,
            })?;
        let out = Lines::read(child.stdout.take().expect("piped"));
        let daemon = Reaped(child);
        let seen = out.await_line("dbus-daemon", READY, |l| l.starts_with("unix:"))?;
        let address = seen.last().expect("the line awaited").trim().to_owned();
        Ok(Self { address, _daemon: daemon, dir })
    }

    /// The bus address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The bus's temporary directory (removed with it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A directory `name` inside the bus's temporary directory, made if
    /// it is not there.
    pub fn subdir(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        p
    }
}

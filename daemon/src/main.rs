//! `netadmd`: the netadm daemon.
//!
//! Thin: parses its options, powers on the hardware through `netadm-core`,
//! replays the persistent configuration and serves `org.netadm.Netadm1`.
//! Mutations run on the blocking pool, one at a time (the core serialises
//! them); reads answer from a snapshot and never wait behind them.

mod auth;
#[cfg(feature = "gen")]
mod man;
mod metrics;
mod notify;
mod peer;
mod service;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use netadm_config::{HardwareConfig, Store};
use netadm_core::Core;
use netadm_rings::Strategy;

/// netadm's daemon.
///
/// netadmd owns the machine's ports (emulated NICs it drives itself, and
/// kernel ports the kernel's drivers drive), their aggregations, VNICs,
/// VLANs and etherstubs, and the IP interfaces over them, which it mirrors
/// into the kernel as devices. It replays the persistent configuration at
/// start, then serves org.netadm.Netadm1 on D-Bus, where netadm(8),
/// dladm(8) and ipadm(8) ask it for every change and every show.
#[derive(Debug, Parser)]
#[command(name = "netadmd", version, about)]
struct Args {
    /// Hardware configuration (TOML); the embedded default when omitted.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Directory of the persistent link configuration.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/netadm")]
    state_dir: PathBuf,
    /// Bus to serve on: `system`, `session` or a D-Bus address.
    #[arg(long, value_name = "BUS", default_value = "system")]
    bus: String,
    /// Also serve org.netadm.Netadm1 peer to peer, with no bus between, on
    /// the Unix socket PATH (mode 0600: root's), where netadm(8) run as
    /// root connects first; `none` for no such socket [default:
    /// /run/netadm/private with --bus system, else none].
    #[arg(long, value_name = "PATH")]
    private_socket: Option<PathBuf>,
    /// Ring lifecycle strategy: batched, sequential, legacy or legacy@HZ.
    #[arg(long, default_value = "batched")]
    strategy: Strategy,
    /// Mirror IP interfaces into the kernel as TAP devices (needs
    /// CAP_NET_ADMIN and /dev/net/tun); `off` for an unprivileged run.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    kernel_mirror: String,
    /// Group whose members may change the network (besides root).
    #[arg(long, value_name = "GROUP", default_value = "netadm")]
    admin_group: String,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; port 0 picks one and logs it). Off by default.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Writes netadmd.8 into DIR and exits (the package build's).
    #[cfg(feature = "gen")]
    #[arg(long, hide = true, value_name = "DIR", requires = "man_date")]
    generate_man: Option<PathBuf>,
    /// The page's date, YYYY-MM-DD.
    #[cfg(feature = "gen")]
    #[arg(long, hide = true, value_name = "DATE")]
    man_date: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    #[cfg(feature = "gen")]
    if let Some(dir) = &args.generate_man {
        let date = args.man_date.as_deref().unwrap_or_default();
        return match man::write(dir, date) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("netadmd: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Tests only: failpoints named in the FAILPOINTS variable.
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    logging();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("netadmd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to the journal, with levels and fields, when stderr is the
/// journal's stream (systemd sets `JOURNAL_STREAM` to its device:inode);
/// else as text on stderr.
fn logging() {
    use tracing_subscriber::prelude::*;
    let filter = || {
        let f = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // zbus opens a span at level info for each message it reads,
        // writes or dispatches, its arguments formatted: quiet unless
        // RUST_LOG asks for zbus by name.
        match std::env::var("RUST_LOG") {
            Ok(v) if v.contains("zbus") => f,
            _ => f.add_directive("zbus=warn".parse().expect("a valid directive")),
        }
    };
    if stderr_is_journal()
        && let Ok(journal) = tracing_journald::layer()
    {
        tracing_subscriber::registry().with(filter()).with(journal).init();
        return;
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// Whether stderr is the stream `JOURNAL_STREAM` names (not one a child
/// of the unit's inherited and redirected).
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let Some((dev, ino)) = v.to_str().and_then(|v| v.split_once(':')) else { return false };
    std::fs::metadata("/proc/self/fd/2")
        .is_ok_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}

fn run(args: Args) -> Result<(), String> {
    let hw = match &args.config {
        Some(p) => HardwareConfig::load(p).map_err(|e| e.to_string())?,
        None => HardwareConfig::embedded_default(),
    };
    // Held until the process ends: before the store is opened, which
    // tidies the directory and replays its journal.
    let _owner = own_state_dir(&args.state_dir)?;
    let store = Store::open(&args.state_dir).map_err(|e| e.to_string())?;
    let mirror = args.kernel_mirror == "on";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    // Entered while the core starts: its rtnetlink connection runs on
    // this runtime, beside the bus connection.
    let core = {
        let _rt = rt.enter();
        Arc::new(
            Core::start_with(&hw, Some(store), args.strategy, None, mirror)
                .map_err(|e| e.to_string())?,
        )
    };
    let auth = auth::Authorizer::new(&args.admin_group);
    rt.block_on(async {
        if let Some(addr) = &args.metrics_listen {
            let bound = metrics::start(addr, core.clone()).await?;
            tracing::info!("metrics: Prometheus text format on http://{bound}/metrics");
        }
        service::serve(core, &args.bus, private_socket(&args).as_deref(), auth).await
    })
}

/// Claims state directory `dir` (made, mode 0700, if missing) for this
/// process with an exclusive `flock` on it, held while the returned file
/// is open: a second netadmd on the same directory stops here, before it
/// removes the first one's staged save or folds the journal the first one
/// is still appending to into `links.toml`.
fn own_state_dir(dir: &std::path::Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::io::AsRawFd;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: cannot create the state directory: {e}", dir.display()))?;
    let f = std::fs::File::open(dir)
        .map_err(|e| format!("{}: cannot open the state directory: {e}", dir.display()))?;
    // SAFETY: flock on a descriptor we own; it does not outlive `f`.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
            format!(
                "{}: the state directory is in use by another netadmd; stop it first",
                dir.display()
            )
        } else {
            format!("{}: cannot lock the state directory: {e}", dir.display())
        });
    }
    Ok(f)
}

/// The private socket's path, if netadmd serves one: as `--private-socket`
/// says, else the system bus's netadmd's.
fn private_socket(args: &Args) -> Option<PathBuf> {
    match &args.private_socket {
        Some(p) if p.as_os_str() == "none" || p.as_os_str().is_empty() => None,
        Some(p) => Some(p.clone()),
        None => (args.bus == "system").then(|| PathBuf::from(netadm_dbus::PRIVATE_SOCKET)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_second_netadmd_on_a_state_directory_in_use_stops_before_touching_it() {
        let dir = std::env::temp_dir().join(format!("netadmd-owner-{}", std::process::id()));
        let first = super::own_state_dir(&dir).expect("a fresh directory is claimed");
        let e = super::own_state_dir(&dir).expect_err("a second claim while the first holds");
        assert!(e.contains("in use by another netadmd"), "{e}");
        drop(first);
        let again = super::own_state_dir(&dir).expect("claimed again once let go");
        drop(again);
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn the_private_socket_is_the_system_netadmds_unless_told() {
        use clap::Parser;
        let of = |argv: &[&str]| {
            super::private_socket(&super::Args::parse_from(
                std::iter::once("netadmd").chain(argv.iter().copied()),
            ))
        };
        assert_eq!(of(&[]), Some(netadm_dbus::PRIVATE_SOCKET.into()));
        assert_eq!(of(&["--bus", "unix:path=/x"]), None, "another bus's netadmd has none");
        assert_eq!(of(&["--bus", "unix:path=/x", "--private-socket", "/y"]), Some("/y".into()));
        assert_eq!(of(&["--private-socket", "none"]), None);
    }

    #[test]
    fn the_journal_is_used_only_when_stderr_is_its_stream() {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata("/proc/self/fd/2").unwrap();
        // SAFETY: test-local environment change; no other test of this
        // binary reads JOURNAL_STREAM.
        unsafe { std::env::set_var("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino())) };
        assert!(super::stderr_is_journal());
        // SAFETY: as above.
        unsafe { std::env::set_var("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino() + 1)) };
        assert!(!super::stderr_is_journal(), "a stream stderr is not");
        // SAFETY: as above.
        unsafe { std::env::remove_var("JOURNAL_STREAM") };
        assert!(!super::stderr_is_journal());
    }
}

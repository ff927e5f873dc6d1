//! What the benchmarks that drive the real daemon share: its binaries,
//! a private bus, and waiting for a child's line with a deadline.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::realnet::{self, Reaped};

/// Sends each line of `r` to the receiver, on a thread, to its end.
pub fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `within` for a line of `rx` containing `want`; then drains
/// the rest on a thread so the writer never blocks on a full pipe.
pub fn await_line(
    rx: mpsc::Receiver<String>,
    what: &str,
    want: &str,
    within: Duration,
) -> Result<String, String> {
    let deadline = Instant::now() + within;
    let mut seen = vec![];
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) if l.contains(want) => {
                std::thread::spawn(move || rx.into_iter().for_each(drop));
                return Ok(l);
            }
            Ok(l) => seen.push(l),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!("{what} was not ready within {within:?}: {}", seen.join("\n")));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("{what} exited: {}", seen.join("\n")));
            }
        }
    }
}

/// The binaries `netadmd` and `netadm` beside this one; `bench` names the
/// benchmark asking, for the error.
pub fn binaries(bench: &str) -> Result<(PathBuf, PathBuf), String> {
    let me = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    let dir = me.parent().ok_or("netadm-bench has no directory")?;
    let find = |name: &str| {
        let p = dir.join(name);
        p.is_file().then(|| p.clone()).ok_or_else(|| {
            format!(
                "{bench}: {name} not found at {} (it must sit beside netadm-bench); \
                 build it with `cargo build --release --workspace`",
                p.display()
            )
        })
    };
    Ok((find("netadmd")?, find("netadm")?))
}

/// A private bus in `dir` allowing everything, dying with this process;
/// its process and address.
pub fn private_bus(dir: &Path) -> Result<(Reaped, String), String> {
    let conf = dir.join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path={}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>"#,
            dir.join("bus").display()
        ),
    )
    .map_err(|e| format!("{}: {e}", conf.display()))?;
    let mut child = realnet::dies_with_us(None, "dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run dbus-daemon ({e}); apt-get install dbus-daemon"))?;
    let out = lines(child.stdout.take().expect("piped"));
    let bus = Reaped(child);
    let addr = await_line(out, "dbus-daemon", "unix:", Duration::from_secs(20))?;
    Ok((bus, addr.trim().to_owned()))
}

//! Processes: started so that they die with the thread that started them,
//! killed and reaped on drop, their output read line by line with
//! deadlines.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::Error;

/// A command for `program` that is killed (SIGKILL) when the thread that
/// spawns it dies: a run ended by a signal, which runs no destructor,
/// leaves no process behind. The setting survives `exec`, so it holds for
/// what `ip netns exec` runs too. For processes that outlive a call (a
/// bus, a daemon, a server); it costs a fork where a plain command is
/// spawned the quicker way, so what is waited for and timed (the CLI)
/// does not use it.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(program);
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl(2), which is async-signal-safe, allocating nothing.
    unsafe {
        c.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

/// [`command`] for `program` in network namespace `ns` (`ip netns exec`,
/// which execs it in place: the child's pid is the program's), or here
/// for `None`.
pub fn in_netns(ns: Option<&str>, program: impl AsRef<OsStr>) -> Command {
    match ns {
        Some(ns) => {
            let mut c = command("ip");
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => command(program),
    }
}

/// Runs `args[0]` with the rest as arguments to its end; its stdout, or
/// an error naming the command and what it printed to stderr. (Waited
/// for, it needs no [`command`]: it is spawned the quick way.)
pub fn run(args: &[&str]) -> Result<String, Error> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|source| Error::Spawn { program: args[0].to_owned(), source })?;
    if !out.status.success() {
        return Err(Error::Failed {
            command: args.join(" "),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`run`] for a test: panics with the error.
pub fn sh(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

/// The argument vector of the command line `line`, split at white space
/// (no quoting): how a test writes the arguments an options parser gets.
pub fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// A flag that tells a test's senders to stop, raised on drop: they stop
/// when the test ends, also on a failed assertion.
#[derive(Debug, Default)]
pub struct Stop(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Stop {
    /// Sends UDP datagrams of 1400 bytes from namespace `ns` to
    /// `to`:`port` until this flag is raised, from `sockets` sockets (one
    /// flow each), each at `mbps` Mb/s of Ethernet frames (the datagram
    /// and its UDP, IPv4 and Ethernet headers), or as fast as it can at
    /// `f64::INFINITY`. A pacing sender that falls behind catches up.
    pub fn udp(&self, ns: &str, to: &str, port: u16, sockets: usize, mbps: f64) {
        for _ in 0..sockets {
            let (ns, to, stop) = (ns.to_owned(), to.to_owned(), self.0.clone());
            std::thread::spawn(move || {
                crate::enter(&ns, || {
                    let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
                    let data = [0u8; 1400];
                    pace(&stop, (1400 + 8 + 20 + 14) * 8, mbps, || {
                        let _ = s.send_to(&data, (to.as_str(), port));
                    });
                })
            });
        }
    }

    /// Hands `frame` to `send` (a write to a TAP: a frame arriving from
    /// the wire) until this flag is raised, at `mbps` Mb/s of its bytes,
    /// paced as [`Stop::udp`].
    pub fn frames(&self, frame: Vec<u8>, mbps: f64, mut send: impl FnMut(&[u8]) + Send + 'static) {
        let stop = self.0.clone();
        std::thread::spawn(move || pace(&stop, frame.len() * 8, mbps, || send(&frame)));
    }
}

/// Calls `send`, one frame of `frame_bits` each, at `mbps` Mb/s until
/// `stop` is raised; falling behind, it catches up.
fn pace(
    stop: &std::sync::atomic::AtomicBool,
    frame_bits: usize,
    mbps: f64,
    mut send: impl FnMut(),
) {
    let (t0, mut sent) = (std::time::Instant::now(), 0u64);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let due = t0.elapsed().as_secs_f64() * mbps * 1e6 / frame_bits as f64;
        if (sent as f64) < due {
            send();
            sent += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// A child process killed and reaped on drop.
#[derive(Debug)]
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines a child writes to one of its streams, read on a thread of
/// their own to the stream's end, so that the child never blocks on a
/// full pipe, read or not.
#[derive(Debug)]
pub struct Lines {
    rx: mpsc::Receiver<String>,
}

impl Lines {
    /// Starts reading `stream`.
    pub fn read(stream: impl Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                // Nobody listening any more: keep draining.
                let _ = tx.send(line);
            }
        });
        Self { rx }
    }

    /// Waits up to `within` for a line satisfying `want`; returns every
    /// line up to it, it last. `what` names the process in the error.
    pub fn await_line(
        &self,
        what: &str,
        within: Duration,
        want: impl Fn(&str) -> bool,
    ) -> Result<Vec<String>, Error> {
        let deadline = Instant::now() + within;
        let mut seen = vec![];
        loop {
            match self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) => {
                    let done = want(&l);
                    seen.push(l);
                    if done {
                        return Ok(seen);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(Error::NotReady { what: what.to_owned(), within, seen });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::Exited { what: what.to_owned(), seen });
                }
            }
        }
    }

    /// Waits up to `within` for the stream to end (the child closed it,
    /// which it does by exiting); true if it did.
    pub fn await_end(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            match self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
            }
        }
    }

    /// The lines read so far that nobody has taken yet.
    pub fn so_far(&self) -> Vec<String> {
        self.rx.try_iter().collect()
    }
}

/// Debian's dnsmasq as a DHCP server (no DNS) in namespace `ns` on
/// `interface` only, its leases in `leases`, with `args` (ranges,
/// options), started (its "started" line seen within 20 s): the server
/// (killed and reaped on drop) and its log lines.
pub fn dhcp_server(
    ns: &str,
    interface: &str,
    leases: &std::path::Path,
    args: &[&str],
) -> Result<(Reaped, Lines), Error> {
    let mut server = in_netns(Some(ns), "dnsmasq")
        .args(["--no-daemon", "--conf-file=/dev/null", "--port=0", "--no-resolv", "--no-hosts"])
        .args(["--user=root", "--bind-interfaces", "--log-dhcp", "--log-facility=-"])
        .arg(format!("--interface={interface}"))
        .args(args)
        .arg(format!("--dhcp-leasefile={}", leases.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn { program: "dnsmasq".into(), source })?;
    let log = Lines::read(server.stderr.take().expect("piped"));
    let server = Reaped(server);
    log.await_line("dnsmasq", Duration::from_secs(20), |l| l.contains("]: started"))?;
    Ok((server, log))
}

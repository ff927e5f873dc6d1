//! A guest booted: QEMU spawned, its console read line by line, the
//! script's exit status awaited with a deadline.

use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::initramfs::{EXIT_MARK, INIT_MARK, READY_MARK, SETUP_FAILED_MARK};
use crate::nic::Taps;
use crate::qemu::Accel;
use crate::{Error, Transcript, cache};

/// Where the time went, host wall clock.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// Kernel and busybox cache ready (a fetch on first use; apt-cache
    /// look-ups after), and the KVM probe when one ran.
    pub cache_ready: Duration,
    /// The initramfs built.
    pub initramfs_built: Duration,
    /// Its size in bytes (uncompressed newc cpio).
    pub initramfs_bytes: u64,
    /// QEMU spawned to /init's first line.
    pub to_init: Option<Duration>,
    /// The guest's own uptime at /init's first line, seconds.
    pub guest_uptime_at_init: Option<f64>,
    /// QEMU spawned to the script starting (modules loaded, NICs named).
    pub to_ready: Option<Duration>,
    /// QEMU spawned to the script's exit status.
    pub to_exit: Option<Duration>,
}

/// A guest ready to boot: initramfs built, taps up in the namespace.
pub struct Prepared {
    pub(crate) args: Vec<String>,
    pub(crate) taps: Taps,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kernel: cache::Kernel,
    pub(crate) accel: Accel,
    pub(crate) timings: Timings,
    pub(crate) modules: Vec<String>,
}

impl Prepared {
    /// The taps, in NIC order, for the caller to configure before boot.
    pub fn taps(&self) -> &[String] {
        &self.taps.names
    }

    /// The kernel it boots.
    pub fn kernel(&self) -> &cache::Kernel {
        &self.kernel
    }

    /// [`Accel::Tcg`] or [`Accel::Kvm`], as resolved.
    pub fn accel(&self) -> Accel {
        self.accel
    }

    /// The modules /init loads, in order (dependencies first).
    pub fn modules(&self) -> &[String] {
        &self.modules
    }

    /// Timings so far (cache, initramfs).
    pub fn timings(&self) -> &Timings {
        &self.timings
    }

    /// The QEMU command line (after `ip netns exec NS` when there is one).
    pub fn command(&self) -> &[String] {
        &self.args
    }

    /// Spawns QEMU. It gets SIGKILL if the thread that spawned it ends
    /// (PR_SET_PDEATHSIG), so a test that dies leaves no guest behind.
    pub fn boot(self) -> Result<Guest, Error> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&self.args[0]);
        cmd.args(&self.args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let spawned = Instant::now();
        let mut child =
            cmd.spawn().map_err(|e| Error::Spawn(format!("{}: {e}", self.args.join(" "))))?;
        let shared =
            Arc::new(Shared { state: Mutex::new(State::default()), changed: Condvar::new() });
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let pid = child.id();
        let s = shared.clone();
        let console = std::thread::spawn(move || {
            read_lines(stdout, |l| s.console_line(l, spawned.elapsed()));
            s.update(|st| st.console_closed = true);
        });
        let s = shared.clone();
        let errors = std::thread::spawn(move || {
            read_lines(stderr, |l| s.update(|st| st.transcript.qemu_stderr.push(l)))
        });
        let s = shared.clone();
        let waiter = std::thread::spawn(move || {
            let status = child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
            s.update(|st| st.exited = Some(status));
        });
        Ok(Guest {
            shared,
            pid,
            spawned,
            threads: vec![console, errors, waiter],
            cursor: 0,
            timings: self.timings,
            _taps: self.taps,
            _dir: self.dir,
        })
    }
}

/// Calls `each` with every line of `r` (`\r` removed, invalid UTF-8
/// replaced) until EOF.
fn read_lines(r: impl std::io::Read, mut each: impl FnMut(String)) {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(r);
    let mut buf = vec![];
    while matches!(r.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
        let line = String::from_utf8_lossy(&buf).replace('\r', "");
        each(line.trim_end_matches('\n').to_owned());
        buf.clear();
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    transcript: Transcript,
    init: Option<(Duration, Option<f64>)>,
    ready: Option<Duration>,
    exit: Option<(i32, Duration)>,
    setup_failed: Option<String>,
    /// QEMU's exit status, once it has exited and been reaped.
    exited: Option<String>,
    /// The console reached EOF: every line is in.
    console_closed: bool,
}

/// The text after `mark` in `line`, if it holds it (a kernel message may
/// have cut in before it).
fn after<'a>(line: &'a str, mark: &str) -> Option<&'a str> {
    line.find(mark).map(|i| line[i + mark.len()..].trim())
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.lock().unwrap());
        self.changed.notify_all();
    }

    fn console_line(&self, line: String, at: Duration) {
        self.update(|st| {
            if st.init.is_none()
                && let Some(up) = after(&line, INIT_MARK)
            {
                st.init = Some((at, up.parse().ok()));
            } else if let Some(_up) = after(&line, READY_MARK) {
                st.ready.get_or_insert(at);
            } else if let Some(code) = after(&line, EXIT_MARK).and_then(|c| c.parse().ok()) {
                st.exit.get_or_insert((code, at));
            } else if let Some(what) = after(&line, SETUP_FAILED_MARK) {
                st.setup_failed.get_or_insert_with(|| what.to_owned());
            }
            st.transcript.lines.push((at, line));
        });
    }
}

/// A running guest. Dropping it kills QEMU and deletes its taps.
pub struct Guest {
    shared: Arc<Shared>,
    pid: u32,
    spawned: Instant,
    threads: Vec<std::thread::JoinHandle<()>>,
    cursor: usize,
    timings: Timings,
    _taps: Taps,
    _dir: tempfile::TempDir,
}

/// How a guest's script ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The script's exit status.
    pub code: i32,
    /// Where the time went.
    pub timings: Timings,
    transcript: Transcript,
}

impl Outcome {
    /// Everything the guest printed (and QEMU's stderr).
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// The script's own output: the console lines between the ready and
    /// exit markers.
    pub fn script_output(&self) -> Vec<&str> {
        let lines = &self.transcript.lines;
        let start = lines.iter().position(|(_, l)| l.contains(READY_MARK)).map_or(0, |i| i + 1);
        let end = lines.iter().rposition(|(_, l)| l.contains(EXIT_MARK)).unwrap_or(lines.len());
        lines[start..end.max(start)].iter().map(|(_, l)| l.as_str()).collect()
    }
}

impl Guest {
    /// The next console line (after those already awaited) for which
    /// `want` holds, waiting up to `within`; `what` names it in the error.
    /// At the deadline QEMU is killed; that and the guest ending first are
    /// errors carrying everything printed.
    pub fn await_line(
        &mut self,
        what: &str,
        want: impl Fn(&str) -> bool,
        within: Duration,
    ) -> Result<String, Error> {
        let deadline = Instant::now() + within;
        let mut st = self.shared.state.lock().unwrap();
        loop {
            while self.cursor < st.transcript.lines.len() {
                let line = &st.transcript.lines[self.cursor].1;
                self.cursor += 1;
                if want(line) {
                    return Ok(line.clone());
                }
            }
            if st.console_closed {
                let status = st.exited.clone().unwrap_or_else(|| "console closed".into());
                return Err(Error::Ended { status, transcript: st.transcript.clone() });
            }
            let now = Instant::now();
            if now >= deadline {
                drop(st);
                self.kill();
                return Err(Error::Timeout {
                    what: what.into(),
                    within,
                    transcript: self.transcript(),
                });
            }
            st = self.shared.changed.wait_timeout(st, deadline - now).unwrap().0;
        }
    }

    /// Everything printed so far.
    pub fn transcript(&self) -> Transcript {
        self.shared.state.lock().unwrap().transcript.clone()
    }

    /// Host time since QEMU was spawned.
    pub fn elapsed(&self) -> Duration {
        self.spawned.elapsed()
    }

    /// Waits up to `within` for the script's exit status and QEMU's exit
    /// (/init powers off after the script). A setup failure in /init, QEMU
    /// ending without a status, or the deadline is an error with the
    /// transcript; QEMU is killed at the deadline.
    pub fn wait(mut self, within: Duration) -> Result<Outcome, Error> {
        let deadline = Instant::now() + within;
        let mut st = self.shared.state.lock().unwrap();
        while st.exited.is_none() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self.shared.changed.wait_timeout(st, deadline - now).unwrap().0;
        }
        let exited = st.exited.is_some();
        drop(st);
        if !exited {
            self.kill();
        }
        // QEMU is gone: the readers reach EOF and every line is in.
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let st = self.shared.state.lock().unwrap();
        let transcript = st.transcript.clone();
        if let Some(what) = &st.setup_failed {
            return Err(Error::Setup { what: what.clone(), transcript });
        }
        let mut timings = self.timings.clone();
        timings.to_init = st.init.map(|(at, _)| at);
        timings.guest_uptime_at_init = st.init.and_then(|(_, up)| up);
        timings.to_ready = st.ready;
        timings.to_exit = st.exit.map(|(_, at)| at);
        match (st.exit, exited) {
            // Powered off after the script, or still powering off at the
            // deadline (killed now): the status is in either way.
            (Some((code, _)), _) => Ok(Outcome { code, timings, transcript }),
            (None, true) => {
                Err(Error::Ended { status: st.exited.clone().unwrap_or_default(), transcript })
            }
            (None, false) => Err(Error::Timeout {
                what: "exit status from the script".into(),
                within,
                transcript,
            }),
        }
    }

    /// SIGKILL to QEMU unless it has been reaped (its pid could then be
    /// another process's).
    fn kill(&self) {
        let st = self.shared.state.lock().unwrap();
        if st.exited.is_none() {
            // SAFETY: kill(2) on QEMU's pid, which the waiter thread has
            // not reaped (checked under the lock it records exits under).
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        self.kill();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_after_a_kernel_message_cut_in() {
        assert_eq!(after("[ 1.2] bond0: x NETADM-GUEST-EXIT 3", EXIT_MARK), Some("3"));
        assert_eq!(after("no marker", EXIT_MARK), None);
    }
}

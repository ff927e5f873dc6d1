//! netadmd as shipped, under a real systemd: a minimal Debian bookworm
//! root (debootstrap, cached; `tests/scripts/bookworm-root.sh`) with netadm
//! installed by `systemd/install.sh`, booted by `systemd-nspawn` with systemd
//! as PID 1, its own network namespace and the host's `/dev/net/tun`.
//!
//! The container boots an overlay of the cached root inside a private mount
//! namespace (`unshare --mount`), so the cache is never written and every
//! mount goes away with the container; the container is halted (or killed)
//! whatever way the test ends.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use netadm_testkit::*;

/// Boot, start of netadmd, restart: each gets this long.
const BOOT: Duration = Duration::from_secs(120);
const RESTART: Duration = Duration::from_secs(30);
const HALT: Duration = Duration::from_secs(30);
/// Any one command run in the container (systemctl waits for its jobs).
const EXEC: Duration = Duration::from_secs(120);

/// Root, and the tools to build and boot the root. Missing: skipped with a
/// message, or a failure under CI (`.ci/run` installs them).
fn prerequisites() -> bool {
    netadm_testkit::prerequisites(
        Some("to debootstrap and boot a container"),
        &[
            ("debootstrap", "debootstrap"),
            ("systemd-nspawn", "systemd-container"),
            ("systemctl", "systemd"),
            ("nsenter", "util-linux"),
            ("unshare", "util-linux"),
            ("flock", "util-linux"),
            ("ip", "iproute2"),
        ],
    )
}

/// A booted container; halted and removed on drop.
struct Container {
    nspawn: Child,
    /// The host's pid of the container's PID 1 (systemd).
    pid1: u32,
    dir: tempfile::TempDir,
    /// /run/systemd/nspawn, when this container had to create it.
    made_run_dir: Option<PathBuf>,
}

impl Container {
    /// Builds (once) the cached root, installs netadm into an overlay of it,
    /// enables the unit and boots it.
    fn boot() -> Self {
        let root = Command::new("sh")
            .arg(repo_root().join("tests/scripts/bookworm-root.sh"))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(root.status.success(), "cannot build the bookworm root");
        let lower = String::from_utf8(root.stdout).unwrap().trim().to_owned();
        let dir = tempfile::tempdir().unwrap();
        for d in ["upper", "work", "root"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let run_dir = Path::new("/run/systemd/nspawn");
        let made_run_dir = (!run_dir.exists()).then(|| run_dir.to_path_buf());
        // The recipe: overlay of the root, install.sh, enable the unit, a
        // tmpfs on /run/systemd/nspawn, then nspawn -b. `exec` makes the
        // child's pid nspawn's.
        let script = r#"set -eu
mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$T/upper,workdir=$T/work" "$T/root"
DESTDIR="$T/root" sh systemd/install.sh
systemctl --root="$T/root" enable netadmd.service
mkdir -p /run/systemd/nspawn
mount -t tmpfs tmpfs /run/systemd/nspawn
exec systemd-nspawn -D "$T/root" --register=no --keep-unit --private-network \
  --bind=/dev/net/tun --console=pipe -b
"#;
        let log = File::create(dir.path().join("boot.log")).unwrap();
        let nspawn = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", script])
            .env("LOWER", &lower)
            .env("T", dir.path())
            .env("BINDIR", bin_dir())
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut c = Self { nspawn, pid1: 0, dir, made_run_dir };
        c.pid1 = c.await_pid1();
        c.await_booted();
        c
    }

    /// The child of nspawn that is PID 1 in its own pid namespace.
    fn await_pid1(&mut self) -> u32 {
        let deadline = Instant::now() + BOOT;
        let nspawn = self.nspawn.id();
        loop {
            if let Some(st) = self.nspawn.try_wait().unwrap() {
                panic!("systemd-nspawn exited ({st}) before booting:\n{}", self.log());
            }
            let tasks = std::fs::read_dir(format!("/proc/{nspawn}/task")).into_iter().flatten();
            for t in tasks.flatten() {
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                for c in children.split_whitespace() {
                    let status =
                        std::fs::read_to_string(format!("/proc/{c}/status")).unwrap_or_default();
                    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap_or("");
                    if nspid.split_whitespace().last() == Some("1")
                        && nspid.split_whitespace().count() > 2
                    {
                        return c.parse().unwrap();
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no container PID 1 within {BOOT:?}:\n{}",
                self.log()
            );
            std::thread::yield_now();
        }
    }

    /// Waits until systemd has finished starting up (`is-system-running
    /// --wait`), retrying while its manager does not answer yet.
    fn await_booted(&mut self) {
        let deadline = Instant::now() + BOOT;
        loop {
            let out = self.exec(&["systemctl", "is-system-running", "--wait"]);
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if state == "running" || state == "degraded" {
                eprintln!("container booted: {state}");
                return;
            }
            if let Some(st) = self.nspawn.try_wait().unwrap() {
                panic!("systemd-nspawn exited ({st}) while booting:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "not booted within {BOOT:?} ({state}):\n{}",
                self.log()
            );
            std::thread::yield_now();
        }
    }

    /// Runs a command of the container's, in all its namespaces, for at
    /// most [`EXEC`].
    fn exec(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .args([&EXEC.as_secs().to_string(), "nsenter", "-t", &self.pid1.to_string(), "-a"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `args` in the container, which must succeed; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(
            out.status.success(),
            "{args:?} in the container failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a host command in the container's network namespace only.
    fn net(&self, args: &[&str]) -> String {
        let out = Command::new("timeout")
            .args([&EXEC.as_secs().to_string(), "nsenter", "-t", &self.pid1.to_string(), "-n"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `systemctl show -p PROP netadmd`'s value.
    fn unit(&self, prop: &str) -> String {
        self.ok(&["systemctl", "show", "--value", "-p", prop, "netadmd.service"]).trim().to_owned()
    }

    /// A sysfs attribute of network device `dev`, in the container.
    fn sysfs(&self, dev: &str, attr: &str) -> String {
        self.ok(&["cat", &format!("/sys/class/net/{dev}/{attr}")]).trim().to_owned()
    }

    /// nspawn's own output (the boot log).
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("boot.log")).unwrap_or_default()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() && self.pid1 != 0 {
            let j = self.exec(&["journalctl", "-b", "--no-pager", "-n", "80"]);
            eprintln!("the container's journal:\n{}", String::from_utf8_lossy(&j.stdout));
        }
        // SIGTERM: nspawn asks the container's systemd to halt.
        let _ = Command::new("kill").arg("-TERM").arg(self.nspawn.id().to_string()).status();
        let deadline = Instant::now() + HALT;
        while self.nspawn.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                eprintln!("the container did not halt within {HALT:?}: killing it");
                if self.pid1 != 0 {
                    // Killing a pid namespace's init kills all of it.
                    let _ = Command::new("kill").arg("-KILL").arg(self.pid1.to_string()).status();
                }
                let _ = self.nspawn.kill();
                let _ = self.nspawn.wait();
                break;
            }
            std::thread::yield_now();
        }
        if let Some(d) = &self.made_run_dir {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Waits until the unit's properties satisfy `want`.
fn await_unit(c: &Container, what: &str, want: impl Fn(&Container) -> bool) {
    let deadline = Instant::now() + RESTART;
    while !want(c) {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {RESTART:?}; unit: {}",
            c.ok(&["systemctl", "status", "--no-pager", "netadmd.service"])
        );
        std::thread::yield_now();
    }
}

#[test]
fn netadmd_runs_under_a_real_systemd() {
    if !prerequisites() {
        return;
    }
    let started = Instant::now();
    let c = Container::boot();
    eprintln!("booted in {:.1} s", started.elapsed().as_secs_f64());

    // Started by boot (enabled, active, not restarted), before anything
    // called it (so not by bus activation).
    assert_eq!(c.ok(&["systemctl", "is-enabled", "netadmd.service"]).trim(), "enabled");
    assert_eq!(c.unit("ActiveState"), "active");
    assert_eq!(c.unit("SubState"), "running");
    assert_eq!(c.unit("NRestarts"), "0");

    // netadm on the real system bus, as root: an IP interface as a TAP
    // device in the container's namespace, with its MTU and address.
    eprint!("{}", c.ok(&["netadm", "create-if", "atl1c2"]));
    eprint!("{}", c.ok(&["netadm", "set-linkprop", "-p", "mtu=1400", "atl1c2"]));
    eprint!(
        "{}",
        c.ok(&["netadm", "create-addr", "-T", "static", "-a", "192.0.2.1/24", "atl1c2/v4"])
    );
    let show = c.ok(&["netadm", "--json", "show-if"]);
    let ifs: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(rows(&ifs, "ifname", "atl1c2").len(), 1, "show-if: {show}");
    assert_eq!(c.sysfs("atl1c2", "mtu"), "1400");
    let index = c.sysfs("atl1c2", "ifindex");
    assert!(c.net(&["ip", "-4", "-o", "addr", "show", "dev", "atl1c2"]).contains("192.0.2.1/24"));
    // install.sh's dladm and ipadm (links to netadm in /usr/sbin).
    let mtu =
        c.ok(&["/usr/sbin/dladm", "show-linkprop", "-c", "-o", "value", "-p", "mtu", "atl1c2"]);
    assert_eq!(mtu.trim_end(), "1400");
    let addr = c.ok(&["/usr/sbin/ipadm", "show-addr", "-p", "-o", "addr", "atl1c2/v4"]);
    assert_eq!(addr.trim_end(), "192.0.2.1/24");

    // uid 65534 may look but not change the network.
    let nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "netadm"];
    let refused = c.exec(&[&nobody[..], &["create-if", "atl1c3"]].concat());
    assert!(!refused.status.success(), "uid 65534 could create an interface");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("uid=65534") || why.contains("AccessDenied"), "refused how? {why}");
    assert!(c.exec(&["test", "-e", "/sys/class/net/atl1c3"]).status.code() == Some(1));
    assert!(
        c.exec(&[&nobody[..], &["show-if"]].concat()).status.success(),
        "uid 65534 cannot read"
    );

    // kill -9: systemd restarts it, and it replays the configuration into
    // a new TAP device.
    let pid = c.unit("MainPID");
    c.ok(&["kill", "-9", &pid]);
    await_unit(&c, "restart after kill -9", |c| {
        c.unit("NRestarts") == "1" && c.unit("ActiveState") == "active" && c.unit("MainPID") != pid
    });
    eprintln!("restarted: pid {pid} -> {}", c.unit("MainPID"));
    let show = c.ok(&["netadm", "--json", "show-addr"]);
    let addrs: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(rows(&addrs, "addrobj", "atl1c2/v4").len(), 1, "show-addr after restart: {show}");
    assert_eq!(c.sysfs("atl1c2", "mtu"), "1400", "MTU after the replay");
    assert_ne!(c.sysfs("atl1c2", "ifindex"), index, "the TAP was not made anew");
    assert!(c.net(&["ip", "-4", "-o", "addr", "show", "dev", "atl1c2"]).contains("192.0.2.1/24"));

    // Metrics with the README's drop-in: the hardened unit lets netadmd
    // listen on localhost, and a scrape (bash's /dev/tcp: the root has no
    // HTTP client) returns its figures.
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let dropin = readme
        .split("```ini\n")
        .nth(1)
        .and_then(|r| r.split("```").next())
        .expect("README.md: the metrics drop-in (```ini)");
    let dir = "/etc/systemd/system/netadmd.service.d";
    c.ok(&["mkdir", "-p", dir]);
    c.ok(&["sh", "-c", &format!("cat > {dir}/metrics.conf <<'EOF'\n{dropin}EOF\n")]);
    c.ok(&["systemctl", "daemon-reload"]);
    c.ok(&["systemctl", "restart", "netadmd.service"]);
    let port = dropin.split("--metrics-listen 127.0.0.1:").nth(1).unwrap();
    let port = port.split_whitespace().next().unwrap();
    let scrape = c.ok(&[
        "bash",
        "-c",
        &format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port}; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
        ),
    ]);
    assert!(scrape.starts_with("HTTP/1.0 200"), "scrape: {scrape}");
    assert!(scrape.contains("netadm_port_rings{port=\"atl1c2\",state=\"started\"} 4"), "{scrape}");

    // systemctl stop: SIGTERM, a clean exit.
    c.ok(&["systemctl", "stop", "netadmd.service"]);
    assert_eq!(c.unit("ActiveState"), "inactive");
    assert_eq!(c.unit("Result"), "success");

    // The journal has its logs: three starts and the stops.
    let journal = c.ok(&["journalctl", "-u", "netadmd.service", "-o", "cat", "--no-pager"]);
    eprintln!("journal of netadmd.service:\n{journal}");
    assert_eq!(journal.matches("serving org.netadm.Netadm1 on the system bus").count(), 3);
    assert!(journal.contains("metrics: Prometheus text format on http://127.0.0.1:"));
    assert!(journal.contains("stopping"), "no stop in the journal");
    drop(c);
    eprintln!("whole test in {:.1} s", started.elapsed().as_secs_f64());
}

//! netadmd as shipped, under a real systemd: a minimal Debian bookworm
//! root (debootstrap, cached; `tests/scripts/bookworm-root.sh`) with netadm
//! installed by `systemd/install.sh`, booted by `systemd-nspawn` with systemd
//! as PID 1, its own network namespace and the host's `/dev/net/tun`.
//!
//! The container boots an overlay of the cached root inside a private mount
//! namespace (`unshare --mount`), so the cache is never written and every
//! mount goes away with the container; the container is halted (or killed)
//! whatever way the test ends.

use std::time::Instant;

use netadm_testkit::*;

mod nspawn;
use nspawn::{Container, Setup, await_unit};

#[test]
fn netadmd_runs_under_a_real_systemd() {
    if !nspawn::prerequisites(&[]) {
        return;
    }
    let started = Instant::now();
    let c = Container::boot(Setup::InstallScript);
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
    assert!(scrape.contains("netadm_port_rings{port=\"atl1c2\",state=\"started\"} 1"), "{scrape}");

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

//! `netadm demo`: the seed's sequence, side by side.
//!
//! Starts a private `dbus-daemon` and `netadmd` in a temporary directory,
//! runs the table of illumos bug 12957 (aggregation: create-aggr, create-if,
//! create-addr, set-linkprop mtu=9000, delete-aggr; VNIC: create-vnic,
//! create-if, create-addr; i40e: create-if, create-addr, delete-if), each
//! group on freshly started hardware as the seed measured it, under each
//! ring lifecycle strategy, and prints the seed's table with netadm's
//! figures beside `sequential` (illumos after its fix) and `legacy` (the
//! seed bug), measured on the same emulated hardware.
//! The comparison strategies run on fewer rings and are scaled to 256, as
//! the output says; netadm runs on the embedded default, 256 rings a port.
//!
//! What is timed is what a user runs: the `netadm` binary, as a process,
//! from spawn to exit (its wall time), with persistent commands (no `-t`:
//! `links.toml` is written); the daemon's own total and phases, from the
//! command's JSON, stand beside it. Run as root, netadmd runs with the kernel
//! mirror on (TAP devices, addresses) in a network namespace of the demo's
//! own, deleted afterwards whatever happens; otherwise the mirror is off, the
//! output says so, and the rows whose kernel work was skipped get no
//! speed-up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use netadm_dbus::NetadmProxy;
use netadm_testkit::{Bus, Cli, Daemon, Netns, Policy, Scratch, fixtures};
use serde_json::{Value, json};

// Options of `netadm demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Rings per port for the `sequential` run (scaled to 256).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub sequential_rings: u16,
    /// Rings per port for the `legacy` run (scaled to 256).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub legacy_rings: u16,
    /// The kernel mirror: `auto` is on when run as root (netadmd then runs
    /// in a network namespace the demo creates and deletes), off otherwise.
    #[arg(long, value_enum, default_value_t = Mirror::Auto)]
    pub kernel_mirror: Mirror,
}

/// `--kernel-mirror` of `netadm demo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mirror {
    /// On when root, off otherwise.
    Auto,
    /// On (needs root and `ip` from iproute2).
    On,
    /// Off: no kernel devices; create-if, create-addr and delete-if then
    /// do no kernel work and get no speed-up in the table.
    Off,
}

/// Rings per i40e-class port in the embedded default.
const FULL: u16 = 256;

/// The seed's table: group, command, and illumos's before/after figures in
/// seconds from the bug report (after its fix for 12957 and 12958).
const SEED: [(&str, &str, f64, f64); 11] = [
    ("aggregation", "create-aggr (2 ports)", 37.0, 1.2),
    ("aggregation", "create-if aggr0", 0.01, 3.4),
    ("aggregation", "create-addr aggr0/v4", 5.0, 1.6),
    ("aggregation", "set-linkprop mtu=9000 aggr0", 600.0, 5.2),
    ("aggregation", "delete-aggr", 20.0, 0.6),
    ("vnic", "create-vnic", 16.0, 1.0),
    ("vnic", "create-if vnic0", 0.1, 0.1),
    ("vnic", "create-addr vnic0/v4", 0.5, 0.5),
    ("i40e", "create-if i40e0", 20.0, 2.3),
    ("i40e", "create-addr i40e0/v4", 0.5, 1.0),
    ("i40e", "delete-if i40e0", 10.3, 0.6),
];

/// The `netadm` command line of each row of [`SEED`]: persistent (no `-t`).
const CLI: [&[&str]; 11] = [
    &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"],
    &["create-if", "aggr0"],
    &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"],
    &["set-linkprop", "-p", "mtu=9000", "aggr0"],
    &["delete-aggr", "aggr0"],
    &["create-vnic", "-l", "i40e0", "vnic0"],
    &["create-if", "vnic0"],
    &["create-addr", "-T", "static", "-a", "192.0.2.2/24", "vnic0/v4"],
    &["create-if", "i40e0"],
    &["create-addr", "-T", "static", "-a", "192.0.2.3/24", "i40e0/v4"],
    &["delete-if", "i40e0"],
];

/// Whether a row's work is kernel work (a TAP device, an address): with
/// the mirror off it is skipped, and the row gets no speed-up.
fn kernel_work(cmd: &[&str]) -> bool {
    matches!(cmd.first(), Some(&("create-if" | "create-addr" | "delete-if")))
}

/// `netadmd` next to this binary; under `cargo run`, built if missing.
fn netadmd() -> Result<PathBuf, String> {
    let path = netadm_testkit::bin_path("netadmd");
    let dir = path.parent().ok_or("no directory for netadm")?;
    if path.exists() {
        return Ok(path);
    }
    if let Ok(cargo) = std::env::var("CARGO") {
        let release = dir.ends_with("release");
        eprintln!("netadm demo: building netadmd ...");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "netadmd"]);
        if release {
            cmd.arg("--release");
        }
        let st = cmd.status().map_err(|e| e.to_string())?;
        if st.success() && path.exists() {
            return Ok(path);
        }
    }
    Err(format!(
        "netadmd not found at {}; build it with `cargo build --release --workspace`",
        path.display()
    ))
}

/// One command as a user runs it: the `netadm` process's wall time, and
/// the daemon's total and phases beside it.
#[derive(Debug, Clone)]
struct Took {
    /// `netadm` spawned to exited: what the user waits for.
    wall_us: u64,
    /// The daemon's total for the operation (inside `wall_us`).
    daemon_us: u64,
    /// How much of it was the re-enable gap the hardware mandates after a
    /// recent stop of the same rings.
    gap_us: u64,
    /// Time in the ring phases (ring-stop, reprogram, ring-start): the
    /// part that grows with the number of rings.
    ring_us: u64,
    /// The daemon's phases, as the command's JSON gives them.
    phases: Value,
}

/// Where the demo runs things.
struct Env<'a> {
    netadmd: &'a Path,
    netadm: &'a Cli,
    bus: &'a Bus,
    dir: &'a Path,
    /// The network namespace netadmd runs in, with the kernel mirror on.
    netns: Option<&'a str>,
    /// Not root: the group netadmd authorizes (this process's own).
    admin_group: Option<&'a str>,
}

/// Runs `netadm --json ARGS` as a user would and times it, spawn to exit.
async fn cli(env: &Env<'_>, args: &[&str]) -> Result<Took, String> {
    let mut cmd = env.netadm.command(&[&["--json"][..], args].concat());
    let shown = format!("netadm {}", args.join(" "));
    let (out, wall) = tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let out = cmd.output();
        (out, t0.elapsed())
    })
    .await
    .map_err(|e| format!("{shown}: {e}"))?;
    let out = out.map_err(|e| format!("{shown}: cannot run netadm: {e}"))?;
    if !out.status.success() {
        return Err(format!("{shown} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{shown}: unreadable JSON ({e})"))?;
    let timing = &v["timing"];
    let phases: Vec<(&str, u64)> = timing["phases"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| Some((p["name"].as_str()?, p["us"].as_u64()?))).collect())
        .unwrap_or_default();
    let gap_us =
        phases.iter().filter(|(n, _)| n.ends_with("/reenable-gap")).map(|(_, us)| *us).max();
    let ring_us = phases
        .iter()
        .filter(|(n, _)| matches!(*n, "ring-stop" | "reprogram" | "ring-start"))
        .map(|(_, us)| *us)
        .sum();
    Ok(Took {
        wall_us: wall.as_micros() as u64,
        daemon_us: timing["total_us"].as_u64().ok_or_else(|| format!("{shown}: no total_us"))?,
        gap_us: gap_us.unwrap_or(0),
        ring_us,
        phases: timing["phases"].clone(),
    })
}

/// Starts `netadmd` for one group of the seed's table, on fresh hardware
/// as the seed measured each group, and connects to it.
async fn daemon(
    env: &Env<'_>,
    strategy: &str,
    rings: u16,
    group: &str,
) -> Result<(Daemon, zbus::Connection), String> {
    let state = env.dir.join(format!("state-{strategy}-{group}"));
    // In the namespace, the kernel mirror is on; otherwise off: the demo
    // must not create devices on the host.
    let mut b = Daemon::builder(env.bus, state)
        .program(env.netadmd)
        .args(["--strategy", strategy])
        .ready_within(Duration::from_secs(30));
    if let Some(ns) = env.netns {
        b = b.netns(ns);
    }
    if let Some(g) = env.admin_group {
        b = b.args(["--admin-group", g]);
    }
    if rings != FULL {
        b = b.hardware(&fixtures::two_i40e_reflectors(rings));
    }
    let daemon = b.try_start()?;
    let conn = zbus::connection::Builder::address(env.bus.address())
        .map_err(|e| e.to_string())?
        .build()
        .await
        .map_err(|e| e.to_string())?;
    Ok((daemon, conn))
}

/// Runs the seed's table under `strategy`: each group on a freshly started
/// daemon. Returns one [`Took`] per row of [`SEED`].
/// Waits until the aggregation's traffic books satisfy `cond`; returns
/// them (an error after 30 s).
async fn wait_traffic(
    p: &NetadmProxy<'_>,
    cond: impl Fn(&netadm_dbus::TrafficInfo) -> bool,
) -> Result<netadm_dbus::TrafficInfo, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let t = p.show_traffic().await.map_err(|e| e.to_string())?.into_iter().next();
        if let Some(t) = t.filter(|t| cond(t)) {
            return Ok(t);
        }
        if std::time::Instant::now() > deadline {
            return Err("traffic did not flow".into());
        }
        tokio::task::yield_now().await;
    }
}

async fn run_one(
    env: &Env<'_>,
    strategy: &str,
    rings: u16,
    books: &mut Vec<netadm_dbus::TrafficInfo>,
) -> Result<Vec<Took>, String> {
    let e = |e: zbus::Error| netadm_dbus::Error::from_zbus(e).message();
    let mut us = vec![];

    let (_d, conn) = daemon(env, strategy, rings, "aggregation").await?;
    let p = NetadmProxy::new(&conn).await.map_err(|e| e.to_string())?;
    for cmd in &CLI[0..3] {
        us.push(cli(env, cmd).await?);
    }
    // The seed's test: the MTU change with traffic running across the
    // aggregation (reflector wires), every frame sequenced.
    p.start_traffic("aggr0", 100_000, 128, 32).await.map_err(e)?;
    wait_traffic(&p, |t| t.received > 1_000).await?;
    us.push(cli(env, CLI[3]).await?);
    p.stop_traffic("aggr0").await.map_err(e)?;
    // Whatever never arrives is lost; the books say how many.
    let t = match wait_traffic(&p, |t| t.received == t.sent).await {
        Ok(t) => t,
        Err(_) => wait_traffic(&p, |_| true).await?,
    };
    books.push(t);
    // netadm refuses to delete an aggregation with an interface on it.
    cli(env, &["delete-if", "aggr0"]).await?;
    us.push(cli(env, CLI[4]).await?);
    drop((p, conn, _d));

    let (_d, conn) = daemon(env, strategy, rings, "vnic").await?;
    for cmd in &CLI[5..8] {
        us.push(cli(env, cmd).await?);
    }
    drop((conn, _d));

    let (_d, conn) = daemon(env, strategy, rings, "i40e").await?;
    for cmd in &CLI[8..11] {
        us.push(cli(env, cmd).await?);
    }
    drop((conn, _d));
    Ok(us)
}

fn fmt_s(s: f64) -> String {
    if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else if s >= 1.0 {
        format!("{s:.1} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} us", s * 1e6)
    }
}

/// Runs the demo. Interrupted (Ctrl-C), it stops what it started: the
/// daemons, the bus, the network namespace and the temporary directory.
pub async fn run(args: &DemoArgs, as_json: bool) -> Result<(), String> {
    // Removed when dropped, after everything in it has stopped.
    let dir = Scratch::new("netadm-demo-")?;
    tokio::select! {
        r = run_in(dir.path(), args, as_json) => r,
        _ = tokio::signal::ctrl_c() => Err("interrupted; everything it started is stopped".into()),
    }
}

/// This process's effective gid (`Gid:` of /proc/self/status).
fn effective_gid() -> Option<u32> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("Gid:"))?;
    l.split_whitespace().nth(2)?.parse().ok()
}

/// The name of this process's effective group, which the demo's netadmd
/// takes as its admin group when not run as root, so that the demo's own
/// `netadm` commands may change its (emulated) network.
fn own_group() -> Result<String, String> {
    let gid = effective_gid().ok_or("cannot read this process's gid")?;
    let groups = std::fs::read_to_string("/etc/group").map_err(|e| format!("/etc/group: {e}"))?;
    groups
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            (f.nth(1)?.parse::<u32>().ok()? == gid).then(|| name.to_owned())
        })
        .ok_or_else(|| format!("gid {gid} has no name in /etc/group"))
}

/// A network namespace of the demo's own; deleted when dropped, so on
/// every way out (an error, a panic, Ctrl-C) after the daemons in it
/// (dropped before it) are gone.
fn netns() -> Result<Netns, String> {
    Netns::new(format!("netadm-demo-{}", std::process::id())).map_err(|e| match e {
        netadm_testkit::Error::Spawn { source, .. } => format!(
            "the kernel mirror needs `ip` (apt-get install iproute2), or run with \
             --kernel-mirror off: {source}"
        ),
        e => e.to_string(),
    })
}

/// A multiplier as it is: `128`, or `85.333` when the division is not
/// exact.
fn multiplier(k: f64) -> String {
    if k.fract() == 0.0 { format!("{k:.0}") } else { format!("{k:.3}") }
}

async fn run_in(dir: &Path, args: &DemoArgs, as_json: bool) -> Result<(), String> {
    let netadmd = netadmd()?;
    let netadm = std::env::current_exe().map_err(|e| format!("where is netadm: {e}"))?;
    let root = netadm_testkit::is_root();
    let mirror = match args.kernel_mirror {
        Mirror::Off => false,
        Mirror::Auto => root,
        Mirror::On if root => true,
        Mirror::On => return Err("--kernel-mirror on needs root (a network namespace)".into()),
    };
    // Dropped last: after the bus and the daemons.
    let netns = if mirror { Some(netns()?) } else { None };
    let bus = Bus::try_start(Policy::AllowAll)?;
    let netadm = Cli::with(netadm, bus.address());
    let group = if root { None } else { Some(own_group()?) };
    let env = Env {
        netadmd: &netadmd,
        netadm: &netadm,
        bus: &bus,
        dir,
        netns: netns.as_ref().map(Netns::name),
        admin_group: group.as_deref(),
    };
    let runs =
        [("batched", FULL), ("sequential", args.sequential_rings), ("legacy", args.legacy_rings)];
    let mut measured = vec![];
    let mut books = vec![];
    for (strategy, rings) in runs {
        if !as_json {
            eprintln!(
                "netadm demo: running the seed sequence with {strategy} on {rings} rings per port ..."
            );
        }
        measured.push(run_one(&env, strategy, rings, &mut books).await?);
    }
    // Per-ring strategies scale with the ring count: estimate 256. Only
    // the ring phases are multiplied; the rest (the CLI, validation,
    // persistence, the kernel) is as measured.
    let multipliers: Vec<f64> =
        runs.iter().map(|(_, rings)| f64::from(FULL) / f64::from(*rings)).collect();
    let scaled: Vec<Vec<f64>> = measured
        .iter()
        .zip(&multipliers)
        .map(|(us, k)| {
            us.iter()
                .map(|u| {
                    (u.wall_us.saturating_sub(u.ring_us)) as f64 / 1e6 + u.ring_us as f64 / 1e6 * k
                })
                .collect()
        })
        .collect();
    // A speed-up only where both sides did the same kind of work.
    let vs_after = |i: usize| -> Option<f64> {
        let ours = measured[0][i].wall_us as f64 / 1e6;
        (mirror || !kernel_work(CLI[i])).then(|| SEED[i].3 / ours.max(1e-6))
    };
    if as_json {
        let est = |run: usize, i: usize| {
            json!({
                "s": scaled[run][i],
                "scaled": runs[run].1 != FULL,
                "measured_rings": runs[run].1,
                "multiplier": multipliers[run],
                "measured_cli_wall_us": measured[run][i].wall_us,
            })
        };
        let rows: Vec<_> = SEED
            .iter()
            .enumerate()
            .map(|(i, (group, cmd, before, after))| {
                json!({
                    "group": group,
                    "command": cmd,
                    "cli": format!("netadm {}", CLI[i].join(" ")),
                    "kernel_work": kernel_work(CLI[i]),
                    "illumos_before_s": before,
                    "illumos_after_s": after,
                    "legacy": est(2, i),
                    "sequential": est(1, i),
                    "netadm_cli_wall_us": measured[0][i].wall_us,
                    "netadm_daemon_us": measured[0][i].daemon_us,
                    "netadm_reenable_gap_us": measured[0][i].gap_us,
                    "netadm_daemon_phases": measured[0][i].phases,
                    "scaled": false,
                    "after_over_netadm": vs_after(i),
                })
            })
            .collect();
        let load = |t: &netadm_dbus::TrafficInfo| {
            json!({
                "frames_sent": t.sent, "frames_lost": t.lost, "reordered": t.reordered,
                "duplicated": t.duplicated, "sender_pause_max_us": t.pause_max_us,
                "latency_max_us": t.latency_max_us,
            })
        };
        let out = json!({
            "timed": "the netadm process's wall time, spawn to exit, persistent commands",
            "kernel_mirror": mirror,
            "netns": env.netns,
            "mtu_under_load": {
                "batched": load(&books[0]), "sequential": load(&books[1]), "legacy": load(&books[2]),
            },
            "rings_per_port": FULL,
            "legacy_measured_rings": args.legacy_rings,
            "sequential_measured_rings": args.sequential_rings,
            "rows": rows,
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "\nThe seed's table (illumos bug 12957) on two emulated i40e-class ports, {FULL} rings each"
    );
    println!(
        "Timed: the `netadm` command as a user runs it (process wall time), persistent (no -t)."
    );
    match env.netns {
        Some(ns) => println!(
            "Kernel mirror: on (netadmd in network namespace {ns}): create-if makes a TAP \
             device, create-addr adds the address, both read back.\n"
        ),
        None => println!(
            "Kernel mirror: OFF ({}): create-if, create-addr and delete-if make no kernel \
             device and add no address, so they get no speed-up (n/a). Run as root for the \
             full comparison.\n",
            if root { "--kernel-mirror off" } else { "not root" }
        ),
    }
    let h = [
        "COMMAND",
        "ILLUMOS BEFORE",
        "ILLUMOS AFTER",
        "LEGACY*",
        "SEQUENTIAL*",
        "NETADM",
        "OF IT DAEMON",
        "OF IT 50MS GAP**",
        "vs AFTER",
    ];
    println!(
        "{:<28} {:>14} {:>13} {:>10} {:>11} {:>9} {:>12} {:>16} {:>8}",
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]
    );
    let mut last = "";
    for (i, (group, cmd, before, after)) in SEED.iter().enumerate() {
        if *group != last {
            println!("{group}:");
            last = group;
        }
        let m = &measured[0][i];
        let gap = m.gap_us as f64 / 1e6;
        println!(
            "  {:<26} {:>14} {:>13} {:>10} {:>11} {:>9} {:>12} {:>16} {:>8}",
            cmd,
            fmt_s(*before),
            fmt_s(*after),
            fmt_s(scaled[2][i]),
            fmt_s(scaled[1][i]),
            fmt_s(m.wall_us as f64 / 1e6),
            fmt_s(m.daemon_us as f64 / 1e6),
            if gap > 0.0 { fmt_s(gap) } else { "-".into() },
            vs_after(i).map_or("n/a".into(), |x| format!("{x:.0}x"))
        );
    }
    let line = |t: &netadm_dbus::TrafficInfo| {
        format!(
            "{} lost of {} sent, {} reordered, {} duplicated, longest sender pause {}",
            t.lost,
            t.sent,
            t.reordered,
            t.duplicated,
            fmt_s(t.pause_max_us / 1e6)
        )
    };
    println!(
        "\nset-linkprop mtu ran with 100 kpps of sequenced traffic across the aggregation \
         (the generator discards nothing: frames it cannot hand over are held, and the \
         longest hold is the sender pause):\n  netadm:     {}\n  sequential: {}\n  legacy:     {}",
        line(&books[0]),
        line(&books[1]),
        line(&books[2])
    );
    println!(
        "\nNETADM is the netadm process's wall time; OF IT DAEMON the daemon's own total inside it \
         (the rest: process start, bus connection, reply).\n\
         * measured on this machine's emulated hardware the same way and scaled to {FULL} rings a port: \
         legacy ran on {} rings per port, sequential on {}; their ring phases cost per ring and are \
         multiplied by {FULL}/{} = {} and {FULL}/{} = {}, the rest is as measured. NETADM ran on all {FULL}, \
         unscaled.\n  ILLUMOS columns are the bug report's figures on real i40e hardware.\n\
         ** the i40e erratum: a queue may not be re-enabled within 50 ms of its disable. An MTU change \
         restarts its rings in two waves so that traffic keeps flowing on the other half; each wave waits \
         out the gap once.",
        args.legacy_rings,
        args.sequential_rings,
        args.legacy_rings,
        multiplier(multipliers[2]),
        args.sequential_rings,
        multiplier(multipliers[1]),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipliers_are_exact_not_integer_divisions() {
        assert_eq!(multiplier(f64::from(FULL) / 2.0), "128");
        assert_eq!(multiplier(f64::from(FULL) / 3.0), "85.333");
        assert_eq!(multiplier(f64::from(FULL) / 256.0), "1");
    }

    #[test]
    fn every_row_has_its_command_and_only_kernel_rows_need_the_mirror() {
        assert_eq!(SEED.len(), CLI.len());
        for ((_, cmd, _, _), cli) in SEED.iter().zip(CLI) {
            assert!(cmd.starts_with(cli[0]), "{cmd} vs {cli:?}");
            assert!(!cli.contains(&"-t"), "persistent: {cli:?}");
        }
        let kernel: Vec<&str> =
            SEED.iter().zip(CLI).filter(|(_, c)| kernel_work(c)).map(|(s, _)| s.1).collect();
        assert_eq!(kernel.len(), 7, "{kernel:?}");
    }
}

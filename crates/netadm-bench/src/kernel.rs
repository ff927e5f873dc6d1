//! `kernel`: real kernel traffic through netadm beside a plain veth pair,
//! in one run, in network namespaces this benchmark makes and removes.
//!
//! - netadm: namespace A runs a private dbus-daemon's `netadmd
//!   --kernel-mirror on` whose two i40e-class ports (4 queue pairs) are
//!   afpacket-wired to veths va0/va1; their peers vb0/vb1 are bridged in B
//!   (br0, 192.0.2.2/24). Through the CLI: an L3,L4 aggregation aggr0 of
//!   both ports, an IP interface on it (a TAP in A) and 192.0.2.1/24.
//! - veth: vc0 (C, 198.51.100.1/24) paired with vd0 (D, 198.51.100.2/24).
//!
//! Measured for each: iperf3 TCP throughput A->B / C->D; ping RTT (average
//! and p99); iperf3 in 100 ms intervals while the sending side's MTU
//! toggles 1500<->9000 every second, both directions: median interval,
//! longest stall, slowest interval, retransmits, MTU changes made.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use netadm_testkit::iperf3::{self, Toggled};
use netadm_testkit::{
    Bus, Cli, Daemon, Lines, Netns, Policy, Reaped, Scratch, fixtures, in_netns, run as cmd,
    sweep_stale,
};
use serde_json::{Value, json};

use crate::{binaries, floor};

opts!("kernel" { seconds: u32 = 5, toggle_seconds: u32 = 10, pings: u32 = 200 });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if o.seconds == 0 || o.toggle_seconds < 3 || o.pings < 10 {
            return Err("kernel: need --seconds >= 1, --toggle-seconds >= 3, --pings >= 10".into());
        }
        Ok(o)
    }
}

/// Ping: one every 10 ms. Root may go faster (2 ms or below), but then
/// the CPUs never idle and a veth round trip drops from ~30 us to a few:
/// that would measure a hot CPU, not the path a lightly used link has.
const PING_INTERVAL: &str = "0.01";
/// Namespace names: this prefix, our pid, a letter.
const NS_PREFIX: &str = "nbk";
/// The temporary directory's name: this prefix and our pid.
const TEMP_PREFIX: &str = "netadm-bench-kernel-";
/// How long a process gets to say it is ready, and the path to carry a ping.
const READY: Duration = Duration::from_secs(20);

/// Removes what an earlier run ended by a signal left behind (a signal runs
/// no destructor; its processes died with it): namespaces and temporary
/// directories named by its pid, whose process is gone. Should anything
/// still run in such a namespace, it is killed first.
fn remove_stale() {
    for (name, pid) in sweep_stale(NS_PREFIX).into_iter().chain(sweep_stale(TEMP_PREFIX)) {
        eprintln!("kernel: removing {name}, left by an interrupted run (pid {pid})");
    }
}

/// Starts netadmd in namespace `a` (ports wired to va0/va1) and builds
/// aggr0 with 192.0.2.1/24 through the CLI.
fn start_netadm(
    a: &str,
    dir: &Path,
    bus: &Bus,
    netadmd: &Path,
    cli: &Cli,
) -> Result<Daemon, String> {
    let daemon = Daemon::builder(bus, dir.join("state"))
        .program(netadmd)
        .netns(a)
        .hardware(&fixtures::afpacket(&["va0", "va1"]))
        .try_start()?;
    cli.run(&["create-aggr", "-P", "L3,L4", "-l", "i40e0", "-l", "i40e1", "aggr0"])?;
    cli.run(&["create-if", "aggr0"])?;
    cli.run(&["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"])?;
    Ok(daemon)
}

/// The floor's far address (`br0` in F); its TAP `tp0` in E is .1.
const FLOOR_FAR: &str = "203.0.113.2";

/// Starts the floor's forwarder in `e` (this program, `floor-forwarder`)
/// and gives its TAP the address.
fn start_floor(e: &str) -> Result<Reaped, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let mut child = in_netns(Some(e), me)
        .args(["floor-forwarder", "tp0", "ve0"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the floor forwarder: {e}"))?;
    let out = Lines::read(child.stdout.take().expect("piped"));
    let fwd = Reaped(child);
    out.await_line("the floor forwarder", READY, |l| l.contains("ready"))?;
    cmd(&["ip", "-n", e, "addr", "add", "203.0.113.1/24", "dev", "tp0"])?;
    cmd(&["ip", "-n", e, "link", "set", "tp0", "mtu", "1500", "up"])?;
    Ok(fwd)
}

/// vc0 in `c` (198.51.100.1/24) paired with vd0 in `d` (.2), MTU 1500.
fn veth_pair(c: &str, d: &str) -> Result<(), String> {
    netadm_testkit::veth((c, "vc0"), (d, "vd0"))?;
    cmd(&["ip", "-n", c, "addr", "add", "198.51.100.1/24", "dev", "vc0"])?;
    cmd(&["ip", "-n", d, "addr", "add", "198.51.100.2/24", "dev", "vd0"])?;
    cmd(&["ip", "-n", c, "link", "set", "vc0", "mtu", "1500"])?;
    cmd(&["ip", "-n", d, "link", "set", "vd0", "mtu", "1500"])?;
    Ok(())
}

/// Waits until a ping from `ns` to `addr` is answered (ARP resolved, the
/// path up), each try bounded by ping's own 1 s deadline.
fn await_path(ns: &str, addr: &str) -> Result<(), String> {
    let deadline = Instant::now() + READY;
    loop {
        match cmd(&["ip", "netns", "exec", ns, "ping", "-n", "-c", "1", "-W", "1", addr]) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("no ping answer from {addr} in {ns} within {READY:?}: {e}"));
            }
            Err(_) => {}
        }
    }
}

/// Per-packet round-trip times, ms, from `ping -n` output.
fn ping_times(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.contains("bytes from"))
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Nearest-rank percentile `p` (0..=100) of `xs`; 0 for none.
fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

#[derive(Debug, Clone, Copy)]
struct Rtt {
    avg_ms: f64,
    /// Robust to the few round trips a loaded machine delays by
    /// milliseconds (a woken thread waiting for a CPU), which the average
    /// is not.
    median_ms: f64,
    p99_ms: f64,
    min_ms: f64,
    max_ms: f64,
    lost: u32,
}

/// CPU time, in ns, all threads of process `pid` have run so far
/// (`/proc/PID/task/*/schedstat`); None if it cannot be read.
fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = 0;
    for t in tasks.flatten() {
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        sum += stat.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    }
    Some(sum)
}

fn ping(ns: &str, addr: &str, count: u32) -> Result<Rtt, String> {
    let c = count.to_string();
    let deadline = (count / 100 + 10).to_string();
    let out = cmd(&[
        "ip",
        "netns",
        "exec",
        ns,
        "ping",
        "-n",
        "-c",
        &c,
        "-i",
        PING_INTERVAL,
        "-w",
        &deadline,
        addr,
    ])?;
    let t = ping_times(&out);
    if t.is_empty() {
        return Err(format!("ping {addr} in {ns}: no replies: {out}"));
    }
    Ok(Rtt {
        avg_ms: t.iter().sum::<f64>() / t.len() as f64,
        median_ms: iperf3::median(&t),
        p99_ms: percentile(&t, 99.0),
        min_ms: t.iter().copied().fold(f64::INFINITY, f64::min),
        max_ms: t.iter().copied().fold(0.0, f64::max),
        lost: count.saturating_sub(t.len() as u32),
    })
}

/// One side of the comparison: where the client runs, the server's
/// namespace and address, and how its sending side's MTU is set.
struct Side<'a> {
    client_ns: &'a str,
    server_ns: &'a str,
    addr: &'static str,
    set_mtu: Box<dyn Fn(u32) -> Result<(), String> + 'a>,
}

/// An iperf3 test from `s.client_ns` to its server; `tick` as
/// [`iperf3::client`].
fn iperf3(
    s: &Side,
    seconds: u32,
    extra: &[&str],
    tick: &mut dyn FnMut(u32) -> Result<(), String>,
) -> Result<iperf3::Report, String> {
    let server = iperf3::server(s.server_ns)?;
    let text = iperf3::client(s.client_ns, s.addr, seconds, extra, tick)?;
    iperf3::reap_server(server);
    iperf3::parse(&text)
}

/// iperf3 for `seconds` while the sending side's MTU toggles 1500<->9000
/// every second, starting from 1500 (so the connection's MSS is 1460 both
/// ways); the MTU is 1500 again afterwards.
fn toggle(s: &Side, seconds: u32, reverse: bool) -> Result<Toggled, String> {
    (s.set_mtu)(1500)?;
    let mut changes = 0;
    let extra: &[&str] = if reverse { &["-R"] } else { &[] };
    let r = iperf3(s, seconds, extra, &mut |k| {
        (s.set_mtu)(if k % 2 == 1 { 9000 } else { 1500 })?;
        changes += 1;
        Ok(())
    })?;
    (s.set_mtu)(1500)?;
    Ok(iperf3::toggled(&r, changes, iperf3::FIRST_CHANGE_SECS))
}

struct Figures {
    gbps: f64,
    retransmits: u64,
    /// The far side sending (-R): the receive path.
    rev_gbps: f64,
    rev_retransmits: u64,
    /// netadm only: the same with tso and tx-csum off (the old path).
    no_offload_gbps: Option<f64>,
    rtt: Rtt,
    /// netadm only: netadmd's CPU time during the pings, as a share of
    /// one CPU over their wall time (what its threads' polling costs).
    ping_cpu_pct: Option<f64>,
    fwd: Toggled,
    rev: Toggled,
}

pub fn run(o: Opts) -> Result<(), String> {
    crate::root_with(
        "kernel",
        "network namespaces, veth pairs and netadmd's TAP device",
        &[
            ("ip", "iproute2"),
            ("ping", "iputils-ping"),
            ("iperf3", "iperf3"),
            ("ethtool", "ethtool"),
            ("dbus-daemon", "dbus-daemon"),
            ("setpriv", "util-linux"),
        ],
    )?;
    let load_start = crate::datapath::load_avg();
    let (netadmd, cli) = binaries("kernel")?;
    remove_stale();
    let say = |m: &str| {
        if !o.json {
            eprintln!("{m}");
        }
    };
    let pid = std::process::id();
    let names: Vec<String> =
        ["a", "b", "c", "d", "e", "f"].iter().map(|l| format!("{NS_PREFIX}{pid}{l}")).collect();
    say(&format!("namespaces {} ...", names.join(" ")));
    // Guards drop in reverse order: processes, then the directory, then
    // the namespaces (with every device in them).
    let ns = names.iter().map(Netns::new).collect::<Result<Vec<_>, _>>()?;
    let [a, b, c, d, e, f] = [0, 1, 2, 3, 4, 5].map(|i| ns[i].name());
    netadm_testkit::netadm_far_side(a, b)?;
    veth_pair(c, d)?;
    floor::far_side(e, f, FLOOR_FAR)?;
    let dir = Scratch::new(TEMP_PREFIX)?;
    let bus = Bus::try_start(Policy::AllowAll)?;
    let n = Cli::with(cli, bus.address());
    say("netadmd, aggr0, aggr0/v4 ...");
    let daemon = start_netadm(a, dir.path(), &bus, &netadmd, &n)?;
    say("floor: one-thread TAP <-> AF_PACKET forwarder ...");
    let _floor = start_floor(e)?;
    await_path(a, "192.0.2.2")?;
    await_path(c, "198.51.100.2")?;
    await_path(e, FLOOR_FAR)?;

    let sides = [
        Side {
            client_ns: a,
            server_ns: b,
            addr: "192.0.2.2",
            set_mtu: Box::new(|m| {
                let mtu = format!("mtu={m}");
                n.run(&["set-linkprop", "-p", &mtu, "aggr0"]).map(drop).map_err(String::from)
            }),
        },
        Side {
            client_ns: c,
            server_ns: d,
            addr: "198.51.100.2",
            set_mtu: Box::new(move |m| {
                let mtu = m.to_string();
                cmd(&["ip", "-n", c, "link", "set", "vc0", "mtu", &mtu])
                    .map(drop)
                    .map_err(String::from)
            }),
        },
    ];
    let names = ["netadm", "veth"];
    let mut thr = vec![];
    let mut thr_rev = vec![];
    for (s, name) in sides.iter().zip(names) {
        say(&format!("{name}: iperf3 {} s ...", o.seconds));
        let r = iperf3(s, o.seconds, &[], &mut |_| Ok(()))?;
        thr.push((r.received_gbps, r.retransmits));
        say(&format!("{name}: iperf3 {} s reversed ...", o.seconds));
        let r = iperf3(s, o.seconds, &["-R"], &mut |_| Ok(()))?;
        thr_rev.push((r.received_gbps, r.retransmits));
    }
    say(&format!("netadm: iperf3 {} s with tso and tx-csum off ...", o.seconds));
    n.run(&["set-linkprop", "-p", "tso=off,tx-csum=off", "aggr0"])?;
    let no_offload = iperf3(&sides[0], o.seconds, &[], &mut |_| Ok(()))?.received_gbps;
    n.run(&["reset-linkprop", "-p", "tso,tx-csum", "aggr0"])?;
    let mut rtt = vec![];
    let mut ping_cpu_pct = None;
    for (s, name) in sides.iter().zip(names) {
        say(&format!("{name}: {} pings ...", o.pings));
        let (cpu, wall) = (cpu_ns(daemon.pid()), Instant::now());
        rtt.push(ping(s.client_ns, s.addr, o.pings)?);
        if name == "netadm" {
            let used = cpu_ns(daemon.pid()).zip(cpu).map(|(b, a)| b.saturating_sub(a));
            ping_cpu_pct = used.map(|u| u as f64 / wall.elapsed().as_nanos() as f64 * 100.0);
        }
    }
    say(&format!("floor: {} pings ...", o.pings));
    let floor_rtt = ping(e, FLOOR_FAR, o.pings)?;
    // The veth's far side now matches netadm's: 9000, so only the toggling
    // side's MTU limits what is sent towards the far side.
    cmd(&["ip", "-n", d, "link", "set", "vd0", "mtu", "9000"])?;
    let mut fwd = vec![];
    let mut rev = vec![];
    for (reverse, out) in [(false, &mut fwd), (true, &mut rev)] {
        for (s, name) in sides.iter().zip(names) {
            say(&format!(
                "{name}: iperf3 {} s{}, MTU toggled every second ...",
                o.toggle_seconds,
                if reverse { " reversed" } else { "" }
            ));
            out.push(toggle(s, o.toggle_seconds, reverse)?);
        }
    }
    let fig = |i: usize| Figures {
        gbps: thr[i].0,
        retransmits: thr[i].1,
        rev_gbps: thr_rev[i].0,
        rev_retransmits: thr_rev[i].1,
        no_offload_gbps: (i == 0).then_some(no_offload),
        rtt: rtt[i],
        ping_cpu_pct: if i == 0 { ping_cpu_pct } else { None },
        fwd: fwd[i],
        rev: rev[i],
    };
    report(&o, &fig(0), &fig(1), &floor_rtt, [load_start, crate::datapath::load_avg()]);
    Ok(())
}

const NOTES: [&str; 5] = [
    "netadm: A: netadmd --kernel-mirror on, aggr0 = i40e0+i40e1 (4 queue pairs each, L3,L4), afpacket-wired to veths va0/va1 bridged in B (br0 192.0.2.2); veth: vc0 (C) - vd0 (D); offloads as the kernel sets them on both",
    "MTU: aggr0 and vc0 are 1500 except while toggled 1500<->9000 every second; B's br0/vb0/vb1 are 9000 throughout; D's vd0 is 1500 for throughput and ping, 9000 for the toggles",
    "each toggled connection opens at MTU 1500, so each side advertises MSS 1460 to the other: forward, the toggling side sends up to its current MTU; reversed, the far side sends 1500-byte frames whatever the MTU, so the toggle exercises netadm's receive rings being reprogrammed under load",
    "floor: the least a datapath through a TAP and an AF_PACKET socket can cost, on the same kind of topology (E: TAP tp0 203.0.113.1, one thread in E moving frames between it and a socket on veth ve0, whose peer is bridged in F, br0 203.0.113.2): it sleeps in poll(2) and is woken once per ping, as netadm's TAP reader is; netadm adds its rings and its device's pass (which a doorbell runs on the TAP reader's thread while the device's thread sleeps)",
    "intervals are 100 ms as the receiver counts them (iperf3 server forward, client reversed), measured from the first MTU change at 1 s (before it, TCP slow start); a stall is a run of consecutive intervals below 10 % of the median interval of the test's duration (or empty), counting intervals a receiver still waits past the end; retransmits are the sender's",
];

/// `load`: the 1-minute load average as the run started and as it
/// ended, printed with the figures (a loaded machine moves them).
fn report(o: &Opts, n: &Figures, v: &Figures, floor: &Rtt, load: [Option<f64>; 2]) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ratio = |a: f64, b: f64| if b > 0.0 { Some(a / b) } else { None };
    if o.json {
        let rtt = |r: &Rtt| json!({"avg": r.avg_ms, "median": r.median_ms, "p99": r.p99_ms, "min": r.min_ms, "max": r.max_ms, "lost": r.lost, "count": o.pings});
        let tog = |t: &Toggled| {
            json!({
                "median_gbps": t.median_gbps, "longest_stall_ms": t.longest_stall_ms,
                "slowest_interval_gbps": t.slowest_gbps, "retransmits": t.retransmits,
                "mtu_changes": t.mtu_changes, "intervals": t.intervals,
                "receiver_overrun_ms": t.overrun_ms,
            })
        };
        let out: Value = json!({
            "benchmark": "kernel",
            "seconds": o.seconds,
            "toggle_seconds": o.toggle_seconds,
            "ping_interval_s": PING_INTERVAL.parse::<f64>().unwrap_or(0.0),
            "throughput_gbps": {"netadm": n.gbps, "veth": v.gbps, "ratio": ratio(n.gbps, v.gbps)},
            "throughput_retransmits": {"netadm": n.retransmits, "veth": v.retransmits},
            "throughput_reverse_gbps": {"netadm": n.rev_gbps, "veth": v.rev_gbps, "ratio": ratio(n.rev_gbps, v.rev_gbps)},
            "throughput_reverse_retransmits": {"netadm": n.rev_retransmits, "veth": v.rev_retransmits},
            "throughput_gbps_offloads_off": {"netadm": n.no_offload_gbps},
            "rtt_ms": {
                "netadm": rtt(&n.rtt), "veth": rtt(&v.rtt), "floor": rtt(floor),
                "avg_ratio": ratio(n.rtt.avg_ms, v.rtt.avg_ms),
                "median_ratio": ratio(n.rtt.median_ms, v.rtt.median_ms),
                "floor_median_ratio": ratio(floor.median_ms, v.rtt.median_ms),
                "netadm_over_floor_median_ms": n.rtt.median_ms - floor.median_ms,
            },
            "ping_netadmd_cpu_pct": n.ping_cpu_pct,
            "mtu_toggle": {"direction": "client (A/C) sends", "netadm": tog(&n.fwd), "veth": tog(&v.fwd)},
            "mtu_toggle_reverse": {"direction": "server (B/D) sends, -R", "netadm": tog(&n.rev), "veth": tog(&v.rev)},
            "load_avg": {"start": load[0], "end": load[1], "cpus": cpus},
            "notes": NOTES,
        });
        println!("{out}");
        return;
    }
    let l = |l: Option<f64>| l.map_or("?".to_owned(), |l| format!("{l:.2}"));
    println!(
        "Real kernel traffic: through netadm (A->B) beside a plain veth pair (C->D), one run \
         (load average {} at the start, {} at the end, {cpus} CPUs)\n",
        l(load[0]),
        l(load[1])
    );
    println!("{:<58} {:>10} {:>10} {:>12}", "MEASURE", "NETADM", "VETH", "NETADM/VETH");
    let row = |what: &str, a: f64, b: f64, prec: usize| {
        let r = ratio(a, b).map_or("-".to_string(), |r| format!("{r:.2}"));
        println!("{what:<58} {a:>10.prec$} {b:>10.prec$} {r:>12}");
    };
    row(&format!("iperf3 TCP throughput, {} s (Gbit/s)", o.seconds), n.gbps, v.gbps, 2);
    row("  retransmits in it (count)", n.retransmits as f64, v.retransmits as f64, 0);
    if let Some(g) = n.no_offload_gbps {
        println!(
            "{:<58} {g:>10.2} {:>10} {:>12}",
            "  netadm with tso and tx-csum off (Gbit/s)", "-", "-"
        );
    }
    row(
        &format!("iperf3 TCP throughput reversed (-R, B/D send), {} s (Gbit/s)", o.seconds),
        n.rev_gbps,
        v.rev_gbps,
        2,
    );
    row("  retransmits in it (count)", n.rev_retransmits as f64, v.rev_retransmits as f64, 0);
    row(
        &format!("ping RTT average, {} pings {PING_INTERVAL} s apart (ms)", o.pings),
        n.rtt.avg_ms,
        v.rtt.avg_ms,
        3,
    );
    row("ping RTT median (ms)", n.rtt.median_ms, v.rtt.median_ms, 3);
    row("ping RTT p99 (ms)", n.rtt.p99_ms, v.rtt.p99_ms, 3);
    row("ping lost (count)", n.rtt.lost.into(), v.rtt.lost.into(), 0);
    if let Some(c) = n.ping_cpu_pct {
        println!(
            "{:<58} {c:>10.1} {:>10} {:>12}",
            "  netadmd CPU during the pings (% of one CPU)", "-", "-"
        );
    }
    let fl = |what: &str, r: &Rtt| {
        let x = ratio(r.median_ms, v.rtt.median_ms).map_or("-".into(), |x| format!("{x:.2}"));
        println!("{what:<58} {:>10.3} {:>10.3} {:>10.3} {x:>12}", r.median_ms, r.avg_ms, r.p99_ms);
    };
    println!(
        "{:<58} {:>10} {:>10} {:>10} {:>12}",
        "  ping RTT against its floor (ms)", "MEDIAN", "AVG", "P99", "MEDIAN/VETH"
    );
    fl("    veth", &v.rtt);
    fl("    floor: one thread, TAP <-> AF_PACKET, woken once", floor);
    fl("    netadm", &n.rtt);
    println!(
        "{:<58} {:>10.3}",
        "    netadm beyond the floor (median, ms)",
        n.rtt.median_ms - floor.median_ms
    );
    for (title, a, b) in [
        ("MTU toggled every second, A/C sending", &n.fwd, &v.fwd),
        ("MTU toggled every second, B/D sending (-R)", &n.rev, &v.rev),
    ] {
        println!("{title}, {} s in 100 ms intervals:", o.toggle_seconds);
        row("  median interval (Gbit/s)", a.median_gbps, b.median_gbps, 2);
        row(
            "  longest stall, intervals < 10 % of median (ms)",
            a.longest_stall_ms,
            b.longest_stall_ms,
            0,
        );
        row("  slowest interval (Gbit/s)", a.slowest_gbps, b.slowest_gbps, 3);
        row("  retransmits (count)", a.retransmits as f64, b.retransmits as f64, 0);
        row("  MTU changes made (count)", a.mtu_changes.into(), b.mtu_changes.into(), 0);
        row("  receiver still waiting past the test's end (ms)", a.overrun_ms, b.overrun_ms, 0);
    }
    println!();
    for note in NOTES {
        println!("- {note}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netadm_testkit::words;

    #[test]
    fn ping_lines_give_their_times() {
        let out = "PING 192.0.2.2 (192.0.2.2) 56(84) bytes of data.\n\
                   64 bytes from 192.0.2.2: icmp_seq=1 ttl=64 time=0.264 ms\n\
                   64 bytes from 192.0.2.2: icmp_seq=2 ttl=64 time=1.05 ms\n\
                   \n--- 192.0.2.2 ping statistics ---\n\
                   2 packets transmitted, 2 received, 0% packet loss, time 2ms\n\
                   rtt min/avg/max/mdev = 0.264/0.657/1.050/0.393 ms\n";
        assert_eq!(ping_times(out), vec![0.264, 1.05]);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let xs: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile(&xs, 99.0), 198.0);
        assert_eq!(percentile(&xs, 100.0), 200.0);
        assert_eq!(percentile(&[5.0], 99.0), 5.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }

    #[test]
    fn options() {
        let o = Opts::parse(&words("--json --seconds 2 --toggle-seconds 4 --pings 20")).unwrap();
        assert!(o.json && o.seconds == 2 && o.toggle_seconds == 4 && o.pings == 20);
        assert!(Opts::parse(&words("--toggle-seconds 1")).is_err());
        assert!(Opts::parse(&words("--bogus")).is_err());
    }
}

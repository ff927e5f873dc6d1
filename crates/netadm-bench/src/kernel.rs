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
//! Measured for each: ping RTT (median, average, p99) in interleaved
//! rounds beside the floor's (see [`crate::floor`]), first, while the
//! machine is as quiet as the run finds it; iperf3 TCP throughput A->B /
//! C->D; iperf3 in 100 ms intervals while the sending side's MTU
//! toggles 1500<->9000 every second, both directions: median interval,
//! longest stall, slowest interval, retransmits, MTU changes made.
//! `--seconds 0` measures the round trip alone.

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

opts!("kernel" { seconds: u32 = 5, toggle_seconds: u32 = 10, pings: u32 = 200, rounds: u32 = 5 });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if o.toggle_seconds < 3 || o.rounds == 0 || o.pings / 10 < o.rounds {
            return Err(
                "kernel: need --toggle-seconds >= 3, --rounds >= 1, --pings >= 10 per round".into(),
            );
        }
        Ok(o)
    }

    /// `--seconds 0`: the round trip alone, no iperf3.
    fn throughput(&self) -> bool {
        self.seconds > 0
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
    let (mut sum, mut read) = (0, 0);
    for t in tasks.flatten() {
        // A thread that ended meanwhile is passed over; none read (no
        // schedstat in this kernel) is no figure, not 0.
        let Ok(stat) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
        sum += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        read += 1;
    }
    (read > 0).then_some(sum)
}

/// The round-trip times, ms, of `count` pings from `ns` to `addr`.
fn ping(ns: &str, addr: &str, count: u32) -> Result<Vec<f64>, String> {
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
    Ok(t)
}

impl Rtt {
    /// Of every round's times together (`sent` pings), the median being
    /// the median of the rounds' medians.
    fn of_rounds(rounds: &[Vec<f64>], sent: u32) -> Self {
        let t: Vec<f64> = rounds.concat();
        let medians: Vec<f64> = rounds.iter().map(|r| iperf3::median(r)).collect();
        Rtt {
            avg_ms: t.iter().sum::<f64>() / t.len().max(1) as f64,
            median_ms: iperf3::median(&medians),
            p99_ms: percentile(&t, 99.0),
            min_ms: t.iter().copied().fold(f64::INFINITY, f64::min),
            max_ms: t.iter().copied().fold(0.0, f64::max),
            lost: sent.saturating_sub(t.len() as u32),
        }
    }
}

/// The three paths' round trips, measured in interleaved rounds.
struct Pings {
    /// netadm, veth, floor.
    rtt: [Rtt; 3],
    /// Each round's medians (ms): netadm, veth, floor.
    rounds: Vec<[f64; 3]>,
    /// netadmd's CPU time during its pings, as a share of one CPU over
    /// their wall time (what its threads' polling costs).
    netadm_cpu_pct: Option<f64>,
    /// The 1-minute load average before and after the rounds.
    load: [Option<f64>; 2],
    /// Why the rounds were disturbed, if they were.
    disturbed: Option<String>,
}

impl Pings {
    fn over_floor_ms(&self) -> f64 {
        self.rtt[0].median_ms - self.rtt[2].median_ms
    }

    fn floor_ratio(&self) -> f64 {
        self.rtt[0].median_ms / self.rtt[2].median_ms
    }
}

/// `o.rounds` rounds of `o.pings / o.rounds` pings on each of `paths`
/// (namespace, address: netadm, veth, floor) in turn, the first path of
/// each round rotated, so that whatever comes and goes on the machine
/// falls on all three alike and shows as rounds that disagree.
fn ping_rounds(o: &Opts, paths: [(&str, &str); 3], netadmd: u32) -> Result<Pings, String> {
    let per = o.pings / o.rounds;
    let load_before = crate::datapath::load_avg();
    let mut times: [Vec<Vec<f64>>; 3] = Default::default();
    let (mut cpu, mut wall) = (Some(0u64), Duration::ZERO);
    for r in 0..o.rounds as usize {
        for k in 0..3 {
            let i = (r + k) % 3;
            let (ns, addr) = paths[i];
            let (before, t0) = (cpu_ns(netadmd), Instant::now());
            times[i].push(ping(ns, addr, per)?);
            if i == 0 {
                wall += t0.elapsed();
                let used = cpu_ns(netadmd).zip(before).map(|(b, a)| b.saturating_sub(a));
                cpu = cpu.zip(used).map(|(c, u)| c + u);
            }
        }
    }
    let load = [load_before, crate::datapath::load_avg()];
    let rounds: Vec<[f64; 3]> =
        (0..o.rounds as usize).map(|r| [0, 1, 2].map(|i| iperf3::median(&times[i][r]))).collect();
    let ratios: Vec<f64> = rounds.iter().map(|m| m[0] / m[2]).collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(Pings {
        rtt: [0, 1, 2].map(|i| Rtt::of_rounds(&times[i], per * o.rounds)),
        disturbed: crate::datapath::disturbed(&ratios, load, cpus),
        rounds,
        netadm_cpu_pct: cpu.map(|c| c as f64 / wall.as_nanos().max(1) as f64 * 100.0),
        load,
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

/// One side's throughput: iperf3 both ways, and under MTU toggles.
struct Figures {
    gbps: f64,
    retransmits: u64,
    /// The far side sending (-R): the receive path.
    rev_gbps: f64,
    rev_retransmits: u64,
    /// netadm only: the same with tso and tx-csum off (the old path).
    no_offload_gbps: Option<f64>,
    /// netadm only: netadmd's CPU during the plain runs, forward and
    /// reversed (% of one CPU).
    cpu_pct: [Option<f64>; 2],
    fwd: Toggled,
    rev: Toggled,
}

/// TCP through the floor's forwarder, both ways: the most a datapath
/// that reads each frame from the TAP and sends it to the socket (and the
/// reverse) gets, with the offloads netadm's has.
struct FloorTcp {
    gbps: f64,
    retransmits: u64,
    rev_gbps: f64,
    rev_retransmits: u64,
    /// The forwarder's CPU, forward and reversed (% of one CPU).
    cpu_pct: [Option<f64>; 2],
}

/// Runs `f`, and with it the CPU time process `pid` used meanwhile, as a
/// share of one CPU over the wall time (None without a pid, or when
/// /proc could not be read).
fn with_cpu<T>(
    pid: Option<u32>,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<(T, Option<f64>), String> {
    let (before, t0) = (pid.and_then(cpu_ns), Instant::now());
    let out = f()?;
    let used = pid.and_then(cpu_ns).zip(before).map(|(b, a)| b.saturating_sub(a));
    Ok((out, used.map(|u| u as f64 / t0.elapsed().as_nanos().max(1) as f64 * 100.0)))
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
    let floor_fwd = start_floor(e)?;
    let floor_pid = floor_fwd.0.id();
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
    say(&format!("ping: {} rounds of {} pings on each path ...", o.rounds, o.pings / o.rounds));
    let paths = [(a, sides[0].addr), (c, sides[1].addr), (e, FLOOR_FAR)];
    let pings = ping_rounds(&o, paths, daemon.pid())?;
    let figs = if o.throughput() {
        let floor_side = Side {
            client_ns: e,
            server_ns: f,
            addr: FLOOR_FAR,
            set_mtu: Box::new(|_| Err("the floor's MTU is not toggled".into())),
        };
        let pids = [daemon.pid(), floor_pid];
        Some(throughput(&o, &sides, &floor_side, pids, &n, d, &say)?)
    } else {
        None
    };
    report(&o, &pings, figs.as_ref(), [load_start, crate::datapath::load_avg()]);
    Ok(())
}

/// iperf3 on both sides and through the floor: forward, reversed, netadm
/// without offloads, then under MTU toggles both ways (not the floor's).
fn throughput(
    o: &Opts,
    sides: &[Side; 2],
    floor_side: &Side,
    // netadmd's, the floor forwarder's.
    pids: [u32; 2],
    n: &Cli,
    d: &str,
    say: &dyn Fn(&str),
) -> Result<([Figures; 2], FloorTcp), String> {
    let names = ["netadm", "veth"];
    let mut thr = vec![];
    let mut thr_rev = vec![];
    let mut cpu = [None; 2];
    for ((s, name), pid) in sides.iter().zip(names).zip([Some(pids[0]), None]) {
        say(&format!("{name}: iperf3 {} s ...", o.seconds));
        let (r, c) = with_cpu(pid, || iperf3(s, o.seconds, &[], &mut |_| Ok(())))?;
        thr.push((r.received_gbps, r.retransmits));
        say(&format!("{name}: iperf3 {} s reversed ...", o.seconds));
        let (r, c_rev) = with_cpu(pid, || iperf3(s, o.seconds, &["-R"], &mut |_| Ok(())))?;
        thr_rev.push((r.received_gbps, r.retransmits));
        if pid.is_some() {
            cpu = [c, c_rev];
        }
    }
    say(&format!("floor: iperf3 {} s, then reversed ...", o.seconds));
    let fp = Some(pids[1]);
    let (fl, c) = with_cpu(fp, || iperf3(floor_side, o.seconds, &[], &mut |_| Ok(())))?;
    let (fl_rev, c_rev) = with_cpu(fp, || iperf3(floor_side, o.seconds, &["-R"], &mut |_| Ok(())))?;
    let floor = FloorTcp {
        gbps: fl.received_gbps,
        retransmits: fl.retransmits,
        rev_gbps: fl_rev.received_gbps,
        rev_retransmits: fl_rev.retransmits,
        cpu_pct: [c, c_rev],
    };
    say(&format!("netadm: iperf3 {} s with tso and tx-csum off ...", o.seconds));
    n.run(&["set-linkprop", "-p", "tso=off,tx-csum=off", "aggr0"])?;
    let no_offload = iperf3(&sides[0], o.seconds, &[], &mut |_| Ok(()))?.received_gbps;
    n.run(&["reset-linkprop", "-p", "tso,tx-csum", "aggr0"])?;
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
    let figs = [0, 1].map(|i| Figures {
        gbps: thr[i].0,
        retransmits: thr[i].1,
        rev_gbps: thr_rev[i].0,
        rev_retransmits: thr_rev[i].1,
        no_offload_gbps: (i == 0).then_some(no_offload),
        cpu_pct: if i == 0 { cpu } else { [None; 2] },
        fwd: fwd[i],
        rev: rev[i],
    });
    Ok((figs, floor))
}

const NOTES: [&str; 7] = [
    "ping: first, before any iperf3 loads the machine; in rounds, each path pinged in turn with the first path rotated each round; a path's median is the median of its rounds' medians; the run is flagged DISTURBED when the load average reached the CPUs there are before or after the rounds, or the rounds' netadm/floor ratios disagree by more than 2x (a target missed on an undisturbed run is a real miss)",
    "netadm: A: netadmd --kernel-mirror on, aggr0 = i40e0+i40e1 (4 queue pairs each, L3,L4), afpacket-wired to veths va0/va1 bridged in B (br0 192.0.2.2); veth: vc0 (C) - vd0 (D); offloads as the kernel sets them on both",
    "MTU: aggr0 and vc0 are 1500 except while toggled 1500<->9000 every second; B's br0/vb0/vb1 are 9000 throughout; D's vd0 is 1500 for throughput and ping, 9000 for the toggles",
    "each toggled connection opens at MTU 1500, so each side advertises MSS 1460 to the other: forward, the toggling side sends up to its current MTU; reversed, the far side sends 1500-byte frames whatever the MTU, so the toggle exercises netadm's receive rings being reprogrammed under load",
    "floor: the least a datapath through a TAP and an AF_PACKET socket can cost, on the same kind of topology (E: TAP tp0 203.0.113.1, one thread in E moving frames between it and a socket on veth ve0, whose peer is bridged in F, br0 203.0.113.2): it sleeps in poll(2) and is woken once per ping, as netadm's TAP reader is; netadm adds its rings and its device's pass (which a doorbell runs on the TAP reader's thread while the device's thread sleeps); its TAP and socket carry virtio-net headers with the offloads netadm's have (partial checksums, TCP superframes), so its TCP moves one frame with one read and one send (one recv and one write reversed), the copies any such datapath makes, where netadm also copies each frame into and out of its rings",
    "CPU: the run time of every thread of the process (netadmd, the floor forwarder; /proc/PID/task/*/schedstat) over the wall time of each plain iperf3 run, iperf3's start and end included, as a share of one CPU; the two carry different throughputs, so compare CPU per Gbit/s as well",
    "intervals are 100 ms as the receiver counts them (iperf3 server forward, client reversed), measured from the first MTU change at 1 s (before it, TCP slow start); a stall is a run of consecutive intervals below 10 % of the median interval of the test's duration (or empty), counting intervals a receiver still waits past the end; retransmits are the sender's",
];

/// What issue 24 aims at: netadm's round-trip median at most this many
/// times the floor's, and at most this far beyond it (ms).
const FLOOR_RATIO_TARGET: f64 = 2.0;
const FLOOR_PLUS_TARGET_MS: f64 = 0.030;

/// What issue 24 aims at: TCP through netadm at least this share of the
/// veth's, each way.
const TCP_RATIO_TARGET: f64 = 0.60;

fn tcp_met(netadm: f64, veth: f64) -> bool {
    veth > 0.0 && netadm / veth >= TCP_RATIO_TARGET
}

const FLOOR_TCP_ROW: &str = "    floor: one thread, TAP <-> AF_PACKET, netadm's offloads";

/// The verdict on TCP against the veth, each way (Gbit/s forward and
/// reversed): the ratio and whether it reaches the target.
fn tcp_verdict(n: [f64; 2], v: [f64; 2]) -> String {
    let one = |a: f64, b: f64| {
        let r = if b > 0.0 { a / b } else { 0.0 };
        let met = if tcp_met(a, b) { "met" } else { "MISSED" };
        format!("{r:.3} (>= {TCP_RATIO_TARGET:.2}: {met})")
    };
    format!("forward {}, reversed {}", one(n[0], v[0]), one(n[1], v[1]))
}

/// The verdict on the round trip against its floor: each target met or
/// missed, and whether the rounds were disturbed (a miss on a disturbed
/// run says nothing; one on an undisturbed run is real).
fn verdict(p: &Pings) -> String {
    let yes = |b: bool| if b { "met" } else { "MISSED" };
    format!(
        "{:.2}x the floor (<= {FLOOR_RATIO_TARGET}x: {}), {:+.0} us beyond it (<= +{:.0} us: {}); \
         {}",
        p.floor_ratio(),
        yes(p.floor_ratio() <= FLOOR_RATIO_TARGET),
        p.over_floor_ms() * 1000.0,
        FLOOR_PLUS_TARGET_MS * 1000.0,
        yes(p.over_floor_ms() <= FLOOR_PLUS_TARGET_MS),
        p.disturbed.as_ref().map_or("undisturbed".to_owned(), |why| format!("DISTURBED: {why}"))
    )
}

/// `load`: the 1-minute load average as the run started and as it
/// ended, printed with the figures (a loaded machine moves them).
fn report(o: &Opts, p: &Pings, figs: Option<&([Figures; 2], FloorTcp)>, load: [Option<f64>; 2]) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ratio = |a: f64, b: f64| if b > 0.0 { Some(a / b) } else { None };
    let [n_rtt, v_rtt, floor] = &p.rtt;
    let per = o.pings / o.rounds;
    if o.json {
        let rtt = |r: &Rtt| json!({"avg": r.avg_ms, "median": r.median_ms, "p99": r.p99_ms, "min": r.min_ms, "max": r.max_ms, "lost": r.lost, "count": per * o.rounds});
        let tog = |t: &Toggled| {
            json!({
                "median_gbps": t.median_gbps, "longest_stall_ms": t.longest_stall_ms,
                "slowest_interval_gbps": t.slowest_gbps, "retransmits": t.retransmits,
                "mtu_changes": t.mtu_changes, "intervals": t.intervals,
                "receiver_overrun_ms": t.overrun_ms,
            })
        };
        let rounds: Vec<Value> = p
            .rounds
            .iter()
            .map(|m| json!({"netadm": m[0], "veth": m[1], "floor": m[2], "floor_ratio": m[0] / m[2]}))
            .collect();
        let mut out: Value = json!({
            "benchmark": "kernel",
            "seconds": o.seconds,
            "toggle_seconds": o.toggle_seconds,
            "ping_interval_s": PING_INTERVAL.parse::<f64>().unwrap_or(0.0),
            "rtt_ms": {
                "netadm": rtt(n_rtt), "veth": rtt(v_rtt), "floor": rtt(floor),
                "avg_ratio": ratio(n_rtt.avg_ms, v_rtt.avg_ms),
                "median_ratio": ratio(n_rtt.median_ms, v_rtt.median_ms),
                "floor_median_ratio": ratio(floor.median_ms, v_rtt.median_ms),
                "netadm_over_floor_median_ms": p.over_floor_ms(),
                "netadm_floor_median_ratio": p.floor_ratio(),
                "rounds": rounds,
                "load_avg": {"before": p.load[0], "after": p.load[1]},
                "disturbed": p.disturbed,
                "targets": {
                    "floor_ratio_max": FLOOR_RATIO_TARGET,
                    "over_floor_max_ms": FLOOR_PLUS_TARGET_MS,
                    "met": p.floor_ratio() <= FLOOR_RATIO_TARGET && p.over_floor_ms() <= FLOOR_PLUS_TARGET_MS,
                },
            },
            "ping_netadmd_cpu_pct": p.netadm_cpu_pct,
            "load_avg": {"start": load[0], "end": load[1], "cpus": cpus},
            "notes": NOTES,
        });
        if let Some(([n, v], fl)) = figs {
            out["throughput_gbps"] =
                json!({"netadm": n.gbps, "veth": v.gbps, "ratio": ratio(n.gbps, v.gbps)});
            out["throughput_retransmits"] = json!({"netadm": n.retransmits, "veth": v.retransmits});
            out["throughput_reverse_gbps"] = json!({"netadm": n.rev_gbps, "veth": v.rev_gbps, "ratio": ratio(n.rev_gbps, v.rev_gbps)});
            out["throughput_reverse_retransmits"] =
                json!({"netadm": n.rev_retransmits, "veth": v.rev_retransmits});
            out["throughput_gbps_offloads_off"] = json!({"netadm": n.no_offload_gbps});
            out["throughput_floor_gbps"] = json!({
                "forward": fl.gbps, "reverse": fl.rev_gbps,
                "retransmits": fl.retransmits, "reverse_retransmits": fl.rev_retransmits,
                "floor_veth_ratio": ratio(fl.gbps, v.gbps),
                "reverse_floor_veth_ratio": ratio(fl.rev_gbps, v.rev_gbps),
                "netadm_floor_ratio": ratio(n.gbps, fl.gbps),
                "reverse_netadm_floor_ratio": ratio(n.rev_gbps, fl.rev_gbps),
                "floor_cpu_pct": fl.cpu_pct[0], "reverse_floor_cpu_pct": fl.cpu_pct[1],
                "netadmd_cpu_pct": n.cpu_pct[0], "reverse_netadmd_cpu_pct": n.cpu_pct[1],
            });
            out["throughput_target"] = json!({
                "veth_ratio_min": TCP_RATIO_TARGET,
                "met": tcp_met(n.gbps, v.gbps) && tcp_met(n.rev_gbps, v.rev_gbps),
            });
            out["mtu_toggle"] = json!({"direction": "client (A/C) sends", "netadm": tog(&n.fwd), "veth": tog(&v.fwd)});
            out["mtu_toggle_reverse"] = json!({"direction": "server (B/D) sends, -R", "netadm": tog(&n.rev), "veth": tog(&v.rev)});
        }
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
    if let Some(([n, v], fl)) = figs {
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
        println!(
            "{:<58} {:>10} {:>10} {:>12}",
            "  TCP against its floor (Gbit/s)", "FORWARD", "REVERSED", "RETRANSMITS"
        );
        let tr = |what: &str, a: f64, b: f64, rt: String| {
            println!("{what:<58} {a:>10.2} {b:>10.2} {rt:>12}");
        };
        let both = |a: u64, b: u64| format!("{a} / {b}");
        tr("    veth", v.gbps, v.rev_gbps, both(v.retransmits, v.rev_retransmits));
        tr(FLOOR_TCP_ROW, fl.gbps, fl.rev_gbps, both(fl.retransmits, fl.rev_retransmits));
        tr("    netadm", n.gbps, n.rev_gbps, both(n.retransmits, n.rev_retransmits));
        let r = |a: f64, b: f64| ratio(a, b).unwrap_or(0.0);
        tr("    floor / veth", r(fl.gbps, v.gbps), r(fl.rev_gbps, v.rev_gbps), String::new());
        tr("    netadm / floor", r(n.gbps, fl.gbps), r(n.rev_gbps, fl.rev_gbps), String::new());
        let pct = |c: Option<f64>| c.map_or("-".to_owned(), |c| format!("{c:.0}"));
        for (what, c) in [
            ("    floor forwarder's CPU (% of one CPU)", fl.cpu_pct),
            ("    netadmd's CPU (% of one CPU)", n.cpu_pct),
        ] {
            println!("{what:<58} {:>10} {:>10}", pct(c[0]), pct(c[1]));
        }
        println!(
            "  netadm against the veth: {}",
            tcp_verdict([n.gbps, n.rev_gbps], [v.gbps, v.rev_gbps])
        );
    }
    row(
        &format!(
            "ping RTT average, {} rounds of {per} pings {PING_INTERVAL} s apart (ms)",
            o.rounds
        ),
        n_rtt.avg_ms,
        v_rtt.avg_ms,
        3,
    );
    row("ping RTT median (median of the rounds', ms)", n_rtt.median_ms, v_rtt.median_ms, 3);
    row("ping RTT p99 (ms)", n_rtt.p99_ms, v_rtt.p99_ms, 3);
    row("ping lost (count)", n_rtt.lost.into(), v_rtt.lost.into(), 0);
    if let Some(c) = p.netadm_cpu_pct {
        println!(
            "{:<58} {c:>10.1} {:>10} {:>12}",
            "  netadmd CPU during its pings (% of one CPU)", "-", "-"
        );
    }
    let fl = |what: &str, r: &Rtt| {
        let x = ratio(r.median_ms, v_rtt.median_ms).map_or("-".into(), |x| format!("{x:.2}"));
        println!("{what:<58} {:>10.3} {:>10.3} {:>10.3} {x:>12}", r.median_ms, r.avg_ms, r.p99_ms);
    };
    println!(
        "{:<58} {:>10} {:>10} {:>10} {:>12}",
        "  ping RTT against its floor (ms)", "MEDIAN", "AVG", "P99", "MEDIAN/VETH"
    );
    fl("    veth", v_rtt);
    fl("    floor: one thread, TAP <-> AF_PACKET, woken once", floor);
    fl("    netadm", n_rtt);
    println!("{:<58} {:>10.3}", "    netadm beyond the floor (median, ms)", p.over_floor_ms());
    println!(
        "  each round's medians (ms), load average {} before the rounds and {} after:",
        l(p.load[0]),
        l(p.load[1])
    );
    println!(
        "    {:<8} {:>10} {:>10} {:>10} {:>14}",
        "ROUND", "NETADM", "VETH", "FLOOR", "NETADM/FLOOR"
    );
    for (r, m) in p.rounds.iter().enumerate() {
        println!(
            "    {:<8} {:>10.3} {:>10.3} {:>10.3} {:>14.2}",
            r + 1,
            m[0],
            m[1],
            m[2],
            m[0] / m[2]
        );
    }
    println!("  netadm against the floor: {}", verdict(p));
    if let Some(([n, v], _)) = figs {
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

    fn pings(medians: [f64; 3], load: f64, disturbed: Option<&str>) -> Pings {
        let rtt = medians.map(|m| Rtt::of_rounds(&[vec![m]], 1));
        Pings {
            rtt,
            rounds: vec![medians],
            netadm_cpu_pct: None,
            load: [Some(load), Some(load)],
            disturbed: disturbed.map(str::to_owned),
        }
    }

    #[test]
    fn the_verdict_names_each_target_and_a_disturbance() {
        let met = verdict(&pings([0.150, 0.060, 0.130], 0.5, None));
        assert_eq!(
            met,
            "1.15x the floor (<= 2x: met), +20 us beyond it (<= +30 us: met); undisturbed"
        );
        let missed =
            verdict(&pings([0.250, 0.060, 0.180], 2.5, Some("load average 2.50 on 2 CPUs")));
        assert!(
            missed.contains("1.39x the floor (<= 2x: met), +70 us beyond it (<= +30 us: MISSED)")
        );
        assert!(missed.ends_with("DISTURBED: load average 2.50 on 2 CPUs"), "{missed}");
    }

    #[test]
    fn the_tcp_verdict_shows_what_it_judged() {
        assert_eq!(
            tcp_verdict([9.6, 6.0], [16.0, 10.0]),
            "forward 0.600 (>= 0.60: met), reversed 0.600 (>= 0.60: met)"
        );
        // Just under the target: not rounded up to a met 0.60.
        assert_eq!(
            tcp_verdict([9.57, 0.0], [16.0, 0.0]),
            "forward 0.598 (>= 0.60: MISSED), reversed 0.000 (>= 0.60: MISSED)"
        );
    }

    #[test]
    fn a_paths_median_is_the_median_of_its_rounds() {
        let r =
            Rtt::of_rounds(&[vec![1.0, 2.0, 9.0], vec![3.0, 4.0, 5.0], vec![0.5, 0.6, 0.7]], 10);
        assert_eq!(r.median_ms, 2.0);
        assert_eq!((r.min_ms, r.max_ms, r.lost), (0.5, 9.0, 1));
    }

    #[test]
    fn options() {
        let o = Opts::parse(&words("--json --seconds 2 --toggle-seconds 4 --pings 20 --rounds 2"))
            .unwrap();
        assert!(o.json && o.seconds == 2 && o.toggle_seconds == 4 && o.pings == 20);
        assert!(o.throughput() && !Opts::parse(&words("--seconds 0")).unwrap().throughput());
        assert!(Opts::parse(&words("--toggle-seconds 1")).is_err());
        assert!(Opts::parse(&words("--pings 40 --rounds 5")).is_err(), "8 pings a round");
        assert!(Opts::parse(&words("--rounds 0")).is_err());
        assert!(Opts::parse(&words("--bogus")).is_err());
    }
}

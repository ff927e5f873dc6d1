//! `protection`: what link protection costs, measured beside no
//! protection in the same run.
//!
//! - **classifier**: the protection classifier (`Policy::check`, every
//!   protection on) over frames a tenant sends — a 1514-byte TCP/IPv4
//!   frame, a 1514-byte TCP/IPv6 frame, a 64 KiB TSO superframe, an ARP
//!   request, a DHCP discover — in ns per frame, the best of 5 runs of
//!   `--frames` each (in-process, no root).
//! - **emulated** (root): netadmd in namespace A, its i40e-class port
//!   afpacket-wired to a veth bridged in B (192.0.2.2/24); two VNICs over
//!   it, each in a zone of its own — pv0 (192.0.2.10) with every
//!   protection on, uv0 (192.0.2.20) and a control cv0 (192.0.2.30) with
//!   none. iperf3 TCP from each zone
//!   to B, `--rounds` rounds of `--seconds` s, the three interleaved (the
//!   order rotating each round) so that the machine's load falls on all
//!   alike. The control measured against uv0 the same way says how large
//!   a difference the noise alone makes. The cost is 1 − the median of each round's
//!   protected/unprotected ratio (the pair ran back to back, under the
//!   same load). What the protected VNIC's guard let through during its
//!   runs (`show-link -s`: frames and bytes) gives the classifier's share
//!   of one CPU at that rate: its slowest ns per frame above times the
//!   frames per second — the cost that does not drown in the noise.
//! - **kernel** (root, with `--kernel`): the same over a kernel port (a
//!   veth NIC): pv0 the guarded veth and stand-in macvlan with nftables'
//!   rules and netadm's BPF programs in front of them, uv0 a plain
//!   macvlan.
//!
//! Beside each rate, the machine's busy CPU time per GB received (from
//! /proc/stat: user, system and interrupts on every CPU; idle and what the
//! hypervisor took are not in it): a round that the hypervisor slowed
//! moves it far less than its rate, so the cost in CPU is printed too,
//! with how much CPU the hypervisor took during the runs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use netadm_datapath::headers::build::{arp, bootp, eth, ipv4, ipv6, udp};
use netadm_datapath::protect::{Policy, link_local};
use netadm_testkit::iperf3;
use netadm_testkit::{
    Bus, Cli, Daemon, Netns, Policy as BusPolicy, Scratch, fixtures, sweep_stale,
};
use serde_json::{Value, json};

use crate::binaries;

opts!("protection" { frames: u64 = 2_000_000, rounds: u32 = 5, seconds: u32 = 3, kernel: bool = false });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        // `--kernel` is a switch: read as `--kernel true`.
        let args: Vec<String> = args
            .iter()
            .flat_map(|a| {
                if a == "--kernel" { vec![a.clone(), "true".into()] } else { vec![a.clone()] }
            })
            .collect();
        let o = Self::read(&args)?;
        if o.frames == 0 || o.rounds == 0 || o.seconds == 0 {
            return Err("protection: need --frames, --rounds and --seconds >= 1".into());
        }
        Ok(o)
    }
}

const PV: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x01];
const UV: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x02];
const CV: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x03];
const GW: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0xfe];
const NS_PREFIX: &str = "nbp";
const TEMP_PREFIX: &str = "netadm-bench-protection-";

/// ns per frame of the classifier over `frame`, best of 5 runs.
fn classify_ns(p: &Policy, frame: &[u8], n: u64) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                assert!(std::hint::black_box(p).check(std::hint::black_box(frame)).is_ok());
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// The classifier's cost on each kind of frame.
fn classifier(frames: u64) -> Vec<(&'static str, f64)> {
    let (me4, gw4): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        ("192.0.2.10".parse().unwrap(), "192.0.2.2".parse().unwrap());
    let (me6, gw6): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
        ("2001:db8::10".parse().unwrap(), "2001:db8::2".parse().unwrap());
    let p = Policy {
        mac: PV,
        mac_nospoof: true,
        ip_nospoof: true,
        dhcp_nospoof: true,
        restricted: true,
        allowed: vec![
            (std::net::IpAddr::V4(me4), 32),
            (me6.into(), 128),
            (link_local(PV).into(), 128),
        ],
        leased: None,
        cids: vec![],
    };
    let tcp = |len: usize| [&[0u8; 20][..], &vec![0; len]].concat();
    let cases: [(&str, Vec<u8>); 5] = [
        ("tcp/ipv4 1514 B", [eth(GW, PV, 0x0800), ipv4(me4, gw4, 6, &tcp(1460))].concat()),
        ("tcp/ipv6 1514 B", [eth(GW, PV, 0x86dd), ipv6(me6, gw6, 6, &tcp(1440))].concat()),
        (
            "tcp/ipv4 64 KiB superframe",
            [eth(GW, PV, 0x0800), ipv4(me4, gw4, 6, &tcp(65_000))].concat(),
        ),
        ("arp request", [eth([0xff; 6], PV, 0x0806), arp(1, PV, me4, gw4)].concat()),
        (
            "dhcp discover",
            [
                eth([0xff; 6], PV, 0x0800),
                ipv4(
                    std::net::Ipv4Addr::UNSPECIFIED,
                    std::net::Ipv4Addr::BROADCAST,
                    17,
                    &udp(68, 67, &bootp(1, PV, &[53, 1, 1])),
                ),
            ]
            .concat(),
        ),
    ];
    cases.into_iter().map(|(what, f)| (what, classify_ns(&p, &f, frames))).collect()
}

/// One side's iperf3 results, Gbit/s per round.
#[derive(Debug, Default)]
struct Side {
    gbps: Vec<f64>,
    /// Frames and bytes its guard let through during its runs, and the
    /// seconds they took (the protected side).
    frames: u64,
    bytes: u64,
    secs: f64,
    /// The machine's busy CPU time per GB received, ms, per round.
    cpu_ms_per_gb: Vec<f64>,
    /// CPU time the hypervisor took during its runs, s.
    steal_s: f64,
}

/// The machine's CPU time so far, in seconds: busy (user, nice, system,
/// irq, softirq) and stolen by the hypervisor; idle and iowait are
/// neither. From /proc/stat's first line.
fn cpu_seconds() -> Result<(f64, f64), String> {
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let f: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0);
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(((at(0) + at(1) + at(2) + at(5) + at(6)) / hz, at(7) / hz))
}

/// The emulated or kernel world: namespaces, bus, netadmd, two VNICs.
struct World {
    cli: Cli,
    _daemon: Daemon,
    _bus: Bus,
    _dir: Scratch,
    ns: Vec<Netns>,
}

impl World {
    fn b(&self) -> &str {
        self.ns[1].name()
    }
    fn zone(&self, i: usize) -> &str {
        self.ns[2 + i].name()
    }
}

fn setup(kernel: bool, netadmd: &Path, cli: &Path) -> Result<World, String> {
    let pid = std::process::id();
    let tag = if kernel { "k" } else { "e" };
    let names: Vec<String> =
        ["a", "b", "p", "u", "c"].iter().map(|l| format!("{NS_PREFIX}{pid}{tag}{l}")).collect();
    let ns = names.iter().map(Netns::new).collect::<Result<Vec<_>, _>>()?;
    let (a, b) = (ns[0].name(), ns[1].name());
    let dir = Scratch::new(TEMP_PREFIX)?;
    let hw: PathBuf = dir.path().join(format!("{tag}.hw.toml"));
    let link = if kernel {
        netadm_testkit::veth((a, "nic0"), (b, "far0"))?;
        netadm_testkit::run(&["ip", "-n", b, "addr", "add", "192.0.2.2/24", "dev", "far0"])?;
        std::fs::write(
            &hw,
            "[[port]]\nname = \"net0\"\nclass = \"kernel\"\ninterface = \"nic0\"\n",
        )
        .map_err(|e| e.to_string())?;
        "net0"
    } else {
        netadm_testkit::netadm_far_side(a, b)?;
        fixtures::afpacket(&["va0"]).write(&hw)?;
        "i40e0"
    };
    let bus = Bus::try_start(BusPolicy::AllowAll)?;
    let daemon = Daemon::builder(&bus, dir.path().join("state"))
        .program(netadmd)
        .netns(a)
        .config(&hw)
        .try_start()?;
    let n = Cli::with(cli, bus.address());
    let mac = |m: [u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    for (i, (v, m, addr, prot)) in [
        ("pv0", PV, "192.0.2.10/24", ",protection=mac-nospoof,ip-nospoof,dhcp-nospoof,restricted"),
        ("uv0", UV, "192.0.2.20/24", ""),
        ("cv0", CV, "192.0.2.30/24", ""),
    ]
    .into_iter()
    .enumerate()
    {
        let p = format!("zone={}{prot}", ns[2 + i].name());
        n.run(&["create-vnic", "-l", link, "-m", &mac(m), "-p", &p, v])?;
        n.run(&["create-if", v])?;
        n.run(&["create-addr", "-T", "static", "-a", addr, &format!("{v}/v4")])?;
    }
    Ok(World { cli: n, _daemon: daemon, _bus: bus, _dir: dir, ns })
}

/// iperf3 TCP from zone `i` to B for `seconds` onto `side`: Gbit/s
/// received, and the machine's CPU time per GB received.
fn iperf(w: &World, i: usize, seconds: u32, side: &mut Side) -> Result<(), String> {
    let (busy, steal) = cpu_seconds()?;
    let server = iperf3::server(w.b())?;
    let text = iperf3::client(w.zone(i), "192.0.2.2", seconds, &[], &mut |_| Ok(()))?;
    iperf3::reap_server(server);
    let (busy_after, steal_after) = cpu_seconds()?;
    let r = iperf3::parse(&text)?;
    let gb = r.received_gbps * r.duration / 8.0;
    side.gbps.push(r.received_gbps);
    side.cpu_ms_per_gb.push(if gb > 0.0 { (busy_after - busy) * 1e3 / gb } else { 0.0 });
    side.steal_s += steal_after - steal;
    Ok(())
}

/// What pv0's guard let through so far: (frames, bytes).
fn passed(w: &World) -> Result<(u64, u64), String> {
    let v = w.cli.json_timed(&["show-link", "-s"]).map_err(|e| format!("{e:?}"))?.0;
    let row = v.as_array().and_then(|r| r.iter().find(|r| r["link"] == "pv0")).cloned();
    let row = row.ok_or_else(|| format!("protection: no pv0 in show-link -s: {v}"))?;
    Ok((row["opackets"].as_u64().unwrap_or(0), row["obytes"].as_u64().unwrap_or(0)))
}

/// `rounds` interleaved rounds through the protected and the unprotected
/// VNIC.
fn end_to_end(o: &Opts, kernel: bool, netadmd: &Path, cli: &Path) -> Result<[Side; 3], String> {
    let w = setup(kernel, netadmd, cli)?;
    // The first pings make ARP and the path warm, and prove it works.
    for i in 0..3 {
        netadm_testkit::run(&[
            "ip",
            "netns",
            "exec",
            w.zone(i),
            "ping",
            "-c",
            "2",
            "-W",
            "2",
            "192.0.2.2",
        ])?;
    }
    let mut sides = [Side::default(), Side::default(), Side::default()];
    for r in 0..o.rounds {
        // Each VNIC first, second and third in turn.
        let order = [[0, 1, 2], [1, 2, 0], [2, 0, 1]][r as usize % 3];
        for i in order {
            let before = if i == 0 { Some(passed(&w)?) } else { None };
            let t = Instant::now();
            iperf(&w, i, o.seconds, &mut sides[i])?;
            if let Some(before) = before {
                let after = passed(&w)?;
                sides[0].frames += after.0 - before.0;
                sides[0].bytes += after.1 - before.1;
                sides[0].secs += t.elapsed().as_secs_f64();
            }
        }
    }
    Ok(sides)
}

pub fn run(o: Opts) -> Result<(), String> {
    for (name, pid) in sweep_stale(NS_PREFIX).into_iter().chain(sweep_stale(TEMP_PREFIX)) {
        eprintln!("protection: removing {name}, left by an interrupted run (pid {pid})");
    }
    let cls = classifier(o.frames);
    let root = netadm_testkit::is_root();
    let mut paths: Vec<(&str, [Side; 3])> = vec![];
    if root {
        let (netadmd, cli) = binaries("protection")?;
        paths.push(("emulated", end_to_end(&o, false, &netadmd, &cli)?));
        if o.kernel {
            paths.push(("kernel", end_to_end(&o, true, &netadmd, &cli)?));
        }
    }
    let med = |s: &Side| iperf3::median(&s.gbps);
    let ratios_of = |a: &Side, b: &Side| -> Vec<f64> {
        a.gbps.iter().zip(&b.gbps).map(|(x, y)| x / y).collect()
    };
    let ratios = |s: &[Side; 3]| ratios_of(&s[0], &s[1]);
    let cost = |s: &[Side; 3]| 100.0 * (1.0 - iperf3::median(&ratios(s)));
    // The same measure between two unprotected VNICs: what the noise alone
    // makes of it.
    let noise = |s: &[Side; 3]| 100.0 * (1.0 - iperf3::median(&ratios_of(&s[2], &s[1])));
    // The same by the machine's CPU time per GB received, which a slower
    // round (the hypervisor taking the CPU) moves much less than its rate.
    let cpu_ratios_of = |a: &Side, b: &Side| -> Vec<f64> {
        a.cpu_ms_per_gb.iter().zip(&b.cpu_ms_per_gb).map(|(x, y)| x / y).collect()
    };
    let cpu_cost = |s: &[Side; 3]| 100.0 * (iperf3::median(&cpu_ratios_of(&s[0], &s[1])) - 1.0);
    let cpu_noise = |s: &[Side; 3]| 100.0 * (iperf3::median(&cpu_ratios_of(&s[2], &s[1])) - 1.0);
    let steal = |s: &[Side; 3]| s.iter().map(|x| x.steal_s).sum::<f64>();
    let slowest = cls.iter().map(|(_, ns)| *ns).fold(0.0, f64::max);
    // The classifier's share of one CPU at the rate pv0's guard passed.
    let fps = |s: &[Side; 3]| if s[0].secs > 0.0 { s[0].frames as f64 / s[0].secs } else { 0.0 };
    let cpu = |s: &[Side; 3]| 100.0 * fps(s) * slowest / 1e9;
    if o.json {
        let v = json!({
            "classifier_ns_per_frame": cls.iter().map(|(k, ns)| (k.to_string(), json!(ns))).collect::<serde_json::Map<String, Value>>(),
            "paths": paths.iter().map(|(k, s)| (k.to_string(), json!({
                "protected_gbps": s[0].gbps, "unprotected_gbps": s[1].gbps,
                "protected_median_gbps": med(&s[0]), "unprotected_median_gbps": med(&s[1]),
                "control_gbps": s[2].gbps, "control_median_gbps": med(&s[2]),
                "round_ratios": ratios(s),
                "control_difference_percent": noise(s),
                "cost_percent": cost(s),
                "protected_cpu_ms_per_gb": s[0].cpu_ms_per_gb, "unprotected_cpu_ms_per_gb": s[1].cpu_ms_per_gb,
                "control_cpu_ms_per_gb": s[2].cpu_ms_per_gb,
                "cpu_cost_percent": cpu_cost(s),
                "control_cpu_difference_percent": cpu_noise(s),
                "steal_seconds": steal(s),
                "guard_frames_per_second": fps(s),
                "guard_bytes_per_frame": if s[0].frames > 0 { s[0].bytes as f64 / s[0].frames as f64 } else { 0.0 },
                "classifier_cpu_percent": if *k == "emulated" { json!(cpu(s)) } else { Value::Null },
            }))).collect::<serde_json::Map<String, Value>>(),
            "rounds": o.rounds, "seconds": o.seconds,
        });
        println!("{v}");
        return Ok(());
    }
    println!("protection classifier, every protection on, best of 5 x {} frames:", o.frames);
    for (what, ns) in &cls {
        println!("  {what:<28} {ns:>7.1} ns/frame");
    }
    if !root {
        println!("end to end: skipped (needs root to make namespaces)");
    }
    for (k, s) in &paths {
        println!(
            "{k}: iperf3 TCP zone -> far side, {} interleaved rounds of {} s (Gbit/s received)",
            o.rounds, o.seconds
        );
        let list =
            |s: &Side| s.gbps.iter().map(|g| format!("{g:.2}")).collect::<Vec<_>>().join(" ");
        println!(
            "  protected   pv0 (every protection): median {:>6.2}   [{}]",
            med(&s[0]),
            list(&s[0])
        );
        println!(
            "  unprotected uv0 (none):             median {:>6.2}   [{}]",
            med(&s[1]),
            list(&s[1])
        );
        println!(
            "  control     cv0 (none):             median {:>6.2}   [{}]",
            med(&s[2]),
            list(&s[2])
        );
        let r = ratios(s).iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ");
        println!(
            "  cost of protection: {:.1} % (1 - the median of each round's protected/unprotected \
             ratio [{r}]; below 0: the noise)",
            cost(s)
        );
        println!(
            "  the same between control and unprotected (neither protected): {:.1} %: a cost \
             smaller than this cannot be told from the noise here",
            noise(s)
        );
        let per_gb = |s: &Side| iperf3::median(&s.cpu_ms_per_gb);
        println!(
            "  CPU per GB received (the machine's busy time, both ends and the path, ms): \
             protected {:.0}, unprotected {:.0}, control {:.0}",
            per_gb(&s[0]),
            per_gb(&s[1]),
            per_gb(&s[2])
        );
        println!(
            "  cost of protection in CPU: {:+.1} % (the median of each round's protected/unprotected \
             ratio); control against unprotected: {:+.1} %",
            cpu_cost(s),
            cpu_noise(s)
        );
        // The CPU time the runs had: their wall time on every CPU.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let runs: f64 = s.iter().map(|x| x.gbps.len() as f64).sum::<f64>() * o.seconds as f64;
        let st = steal(s);
        println!(
            "  the hypervisor took {st:.1} s of the {:.0} CPU-seconds of the runs{}",
            runs * cpus,
            if st > 0.02 * runs * cpus {
                ": a disturbed run; its throughput figures say little, its CPU figures more"
            } else {
                ""
            }
        );
        if *k == "emulated" && s[0].frames > 0 {
            println!(
                "  guard: {:.0} frames/s of {:.0} B passed during pv0's runs; at the slowest \
                 {slowest:.0} ns/frame above, the classifier took {:.3} % of one CPU",
                fps(s),
                s[0].bytes as f64 / s[0].frames as f64,
                cpu(s)
            );
        } else {
            println!(
                "  guard: {:.0} frames/s passed netadm's BPF program and nftables' rules behind \
                 it during pv0's runs (their cost is in the throughput above)",
                fps(s)
            );
        }
    }
    Ok(())
}

//! `netadm-bench scale`: what each verb costs as the number of links grows.
//!
//! For every n in `--sizes`, a private `dbus-daemon` and a `netadmd`
//! (kernel mirror off, the embedded hardware) run on a state directory
//! holding n persistent VNICs: half over `aggr0` (i40e0+i40e1, mtu 9000),
//! half over the port `atl1c2`, every fourth with an mtu of its own. That
//! state is written through `netadm_config::Store` — the daemon's own store,
//! so the file is exactly what netadmd writes — rather than built by n
//! calls, which before the fix cost a quarter of an hour at n = 1000.
//! netadmd then starts on it, and every figure below is taken through the
//! real `netadm` binary:
//!
//! - create-vnic and delete-vnic (persistent, over aggr0): `--samples` of
//!   each, median and p99 of the daemon's `total_us` and of the CLI wall;
//! - set-linkprop (mtu of one VNIC, alternating), the same figures;
//! - show-link of every link and of one, CLI wall;
//! - start-up: netadmd stopped (SIGTERM) and started again on what it
//!   persisted, from spawn to its "serving" line (it is on the bus then);
//! - RSS of netadmd (VmRSS) after the operations;
//!
//! and, between the largest two n, the growth exponent of each figure: the
//! log-log slope `ln(b/a) / ln(n_b/n_a)` (0: flat, 1: linear, 2: n²).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use netadm_config::{AggrConf, LinkState, Store, VnicConf};
use netadm_model::{LinkName, MacAddr, PropName, PropValue};
use netadm_testkit::{Bus, Cli, Daemon, DaemonBuilder, Policy, Scratch};
use serde_json::{Value, json};

use crate::binaries;

/// Options of `netadm-bench scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct Opts {
    /// Print one JSON object instead of tables.
    pub json: bool,
    /// The numbers of links to measure at.
    pub sizes: Vec<usize>,
    /// Operations timed per verb and size.
    pub samples: usize,
}

impl Opts {
    /// Parses `[--json] [--sizes N,N,...] [--samples N]`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut o = Self { json: false, sizes: vec![10, 100, 1_000, 10_000], samples: 20 };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--json" => o.json = true,
                "--sizes" => {
                    let v: String = crate::value("--sizes", it.next())?;
                    o.sizes = v
                        .split(',')
                        .map(|s| s.trim().parse::<usize>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| format!("--sizes: expected N,N,... got {v:?}"))?;
                    if o.sizes.is_empty() || o.sizes.contains(&0) {
                        return Err("--sizes: every size must be at least 1".into());
                    }
                }
                "--samples" => {
                    o.samples = crate::value("--samples", it.next())?;
                    if o.samples == 0 {
                        return Err("--samples must be at least 1".into());
                    }
                }
                other => return Err(format!("scale: unknown option {other:?}")),
            }
        }
        o.sizes.sort_unstable();
        o.sizes.dedup();
        Ok(o)
    }
}

/// How long a process gets to say it is ready.
const READY: Duration = Duration::from_secs(120);

/// Median and 99th percentile (nearest rank), in µs.
#[derive(Debug, Clone, Copy, Default)]
struct Dist {
    median: f64,
    p99: f64,
}

fn dist(mut xs: Vec<f64>) -> Dist {
    if xs.is_empty() {
        return Dist::default();
    }
    xs.sort_by(f64::total_cmp);
    let rank = |p: f64| xs[((p * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1];
    Dist { median: rank(0.5), p99: rank(0.99) }
}

/// A verb's figures: daemon total and CLI wall.
#[derive(Debug, Clone, Copy, Default)]
struct Verb {
    daemon: Dist,
    wall: Dist,
}

/// Everything measured at one n.
#[derive(Debug, Clone, Default)]
struct Figures {
    n: usize,
    file_bytes: u64,
    create: Verb,
    delete: Verb,
    setprop: Verb,
    show_all: Dist,
    show_one: Dist,
    startup_us: f64,
    rss_kib: f64,
}

/// The state of size n: aggr0 (mtu 9000) and n VNICs, half over aggr0 and
/// half over atl1c2, every fourth with mtu 1400.
fn seed(n: usize) -> Result<LinkState, String> {
    let name = |s: &str| s.parse::<LinkName>().map_err(|e| format!("{s}: {e}"));
    let mut st = LinkState::default();
    st.aggr.insert(
        name("aggr0")?,
        AggrConf {
            ports: vec![name("i40e0")?, name("i40e1")?],
            policy: Default::default(),
            lacp_mode: Default::default(),
            lacp_timer: Default::default(),
            mac: None,
            props: [(PropName::Mtu, PropValue::Uint(9000))].into(),
        },
    );
    for i in 0..n {
        let b = (i as u32).to_be_bytes();
        let mut props = BTreeMap::new();
        if i % 4 == 3 {
            props.insert(PropName::Mtu, PropValue::Uint(1400));
        }
        st.vnic.insert(
            name(&format!("vnic{i}"))?,
            VnicConf {
                over: name(if i % 2 == 0 { "aggr0" } else { "atl1c2" })?,
                mac: MacAddr([0x02, 0x08, 0x21, b[1], b[2], b[3]]),
                mac_mode: "random".into(),
                vid: None,
                vlan: false,
                props,
            },
        );
    }
    Ok(st)
}

/// How the benchmarks start netadmd: `netadmd` (the one beside this
/// program), on `bus`, its state in `state`, its own info logs only; in
/// network namespace `ns` with the kernel mirror on when one is given.
pub(crate) fn netadmd(netadmd: &Path, bus: &Bus, state: &Path, ns: Option<&str>) -> DaemonBuilder {
    let b = Daemon::builder(bus, state).program(netadmd).env("RUST_LOG", "warn,netadmd=info");
    let b = b.ready_within(READY);
    match ns {
        Some(ns) => b.netns(ns),
        None => b,
    }
}

/// VmRSS of process `pid`, in KiB.
fn rss_kib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0.0)
}

/// SIGTERM, and waits for a clean exit.
pub(crate) fn stop(d: Daemon) -> Result<(), String> {
    let status = d.try_stop()?;
    if !status.success() {
        return Err(format!("netadmd stopped with {status}"));
    }
    Ok(())
}

/// Runs the CLI; returns its stdout and wall time (µs).
pub(crate) fn cli(netadm: &Cli, args: &[&str]) -> Result<(String, f64), String> {
    let (out, wall) = netadm.run_timed(args)?;
    Ok((out, wall.as_micros() as f64))
}

/// A mutation through the CLI: (daemon total_us, CLI wall µs).
pub(crate) fn mutation(netadm: &Cli, args: &[&str]) -> Result<(f64, f64), String> {
    let (v, wall) = netadm.json_timed(args)?;
    let total = v["timing"]["total_us"]
        .as_f64()
        .ok_or_else(|| format!("netadm output has no timing.total_us: {v}"))?;
    Ok((total, wall.as_micros() as f64))
}

/// Times `samples` runs of a mutation, `args(i)` giving the i-th.
fn sample(
    netadm: &Cli,
    samples: usize,
    args: impl Fn(usize) -> Vec<String>,
) -> Result<Verb, String> {
    let (mut d, mut w) = (vec![], vec![]);
    for i in 0..samples {
        let a = args(i);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (total, wall) = mutation(netadm, &a)?;
        d.push(total);
        w.push(wall);
    }
    Ok(Verb { daemon: dist(d), wall: dist(w) })
}

fn measure(o: &Opts, n: usize, dir: &Path, bus: &Bus) -> Result<Figures, String> {
    let (netadmd_path, netadm) = binaries("scale")?;
    let netadm = Cli::with(netadm, bus.address());
    let state = dir.join(format!("state-{n}"));
    let store = Store::open(&state).map_err(|e| e.to_string())?;
    store.save(&seed(n)?).map_err(|e| e.to_string())?;
    let daemon = netadmd(&netadmd_path, bus, &state, None);
    let d = daemon.try_start()?;
    let create = sample(&netadm, o.samples, |i| {
        ["create-vnic", "-l", "aggr0", &format!("bench{i}")].map(String::from).to_vec()
    })?;
    let delete = sample(&netadm, o.samples, |i| {
        ["delete-vnic", &format!("bench{i}")].map(String::from).to_vec()
    })?;
    let setprop = sample(&netadm, o.samples, |i| {
        let mtu = if i % 2 == 0 { "mtu=1300" } else { "mtu=1400" };
        ["set-linkprop", "-p", mtu, "vnic3"].map(String::from).to_vec()
    })?;
    let walls = |args: &[&str]| -> Result<Dist, String> {
        let mut w = vec![];
        for _ in 0..o.samples {
            w.push(cli(&netadm, args)?.1);
        }
        Ok(dist(w))
    };
    let show_all = walls(&["show-link"])?;
    let last = format!("vnic{}", n - 1);
    let show_one = walls(&["show-link", &last])?;
    let rss_kib = rss_kib(d.pid());
    stop(d)?;
    let file_bytes = std::fs::metadata(store.path()).map(|m| m.len()).unwrap_or(0);
    let d = daemon.try_start()?;
    let startup_us = d.startup_time().as_micros() as f64;
    // It answers: the links are all there.
    let (out, _) = cli(&netadm, &["show-link", "-p", "-o", "link"])?;
    let links = out.lines().count();
    if links < n {
        return Err(format!("after restart {links} links, expected at least {n}"));
    }
    stop(d)?;
    let _ = std::fs::remove_dir_all(&state);
    Ok(Figures { n, file_bytes, create, delete, setprop, show_all, show_one, startup_us, rss_kib })
}

/// Runs the benchmark.
pub fn run(o: Opts) -> Result<(), String> {
    let dir = Scratch::new("netadm-bench-scale-")?;
    let bus = Bus::try_start(Policy::AllowAll)?;
    let mut all = vec![];
    for &n in &o.sizes {
        if !o.json {
            eprintln!("scale: n = {n} ...");
        }
        all.push(measure(&o, n, dir.path(), &bus)?);
    }
    report(&o, &all);
    Ok(())
}

/// The figures of one row, by name, µs (RSS in KiB, file in bytes).
fn named(f: &Figures) -> Vec<(&'static str, f64)> {
    vec![
        ("create-vnic daemon median", f.create.daemon.median),
        ("create-vnic daemon p99", f.create.daemon.p99),
        ("create-vnic CLI median", f.create.wall.median),
        ("create-vnic CLI p99", f.create.wall.p99),
        ("delete-vnic daemon median", f.delete.daemon.median),
        ("delete-vnic daemon p99", f.delete.daemon.p99),
        ("delete-vnic CLI median", f.delete.wall.median),
        ("delete-vnic CLI p99", f.delete.wall.p99),
        ("set-linkprop daemon median", f.setprop.daemon.median),
        ("set-linkprop daemon p99", f.setprop.daemon.p99),
        ("set-linkprop CLI median", f.setprop.wall.median),
        ("show-link all CLI median", f.show_all.median),
        ("show-link all CLI p99", f.show_all.p99),
        ("show-link one CLI median", f.show_one.median),
        ("show-link one CLI p99", f.show_one.p99),
        ("start-up", f.startup_us),
        ("RSS KiB", f.rss_kib),
        ("links.toml bytes", f.file_bytes as f64),
    ]
}

/// ln(b/a) / ln(nb/na).
pub(crate) fn slope(na: usize, a: f64, nb: usize, b: f64) -> Option<f64> {
    (a > 0.0 && b > 0.0 && nb > na).then(|| (b / a).ln() / (nb as f64 / na as f64).ln())
}

fn report(o: &Opts, all: &[Figures]) {
    let growth: Vec<(&str, Option<f64>)> = match all {
        [.., a, b] => named(a)
            .into_iter()
            .zip(named(b))
            .map(|((k, x), (_, y))| (k, slope(a.n, x, b.n, y)))
            .collect(),
        _ => vec![],
    };
    if o.json {
        let rows: Vec<Value> = all
            .iter()
            .map(|f| {
                let mut m = serde_json::Map::new();
                m.insert("n".into(), json!(f.n));
                for (k, v) in named(f) {
                    m.insert(k.replace(' ', "_"), json!(v));
                }
                Value::Object(m)
            })
            .collect();
        let g: serde_json::Map<String, Value> =
            growth.iter().map(|(k, v)| (k.replace(' ', "_"), json!(v))).collect();
        let v = json!({ "samples": o.samples, "sizes": rows, "growth_exponent": g });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return;
    }
    let ms = |us: f64| format!("{:.2}", us / 1000.0);
    println!(
        "netadm-bench scale: n persistent VNICs (half over aggr0, half over atl1c2), {} samples per verb; times in ms",
        o.samples
    );
    print!("{:<28}", "n");
    for f in all {
        print!("{:>12}", f.n);
    }
    println!("{:>10}", "growth");
    let rows: Vec<Vec<(&str, f64)>> = all.iter().map(named).collect();
    for (i, (k, _)) in named(&all[0]).iter().enumerate() {
        print!("{k:<28}");
        for r in &rows {
            let v = r[i].1;
            let cell =
                if k.ends_with("KiB") || k.ends_with("bytes") { format!("{v:.0}") } else { ms(v) };
            print!("{cell:>12}");
        }
        match growth.get(i).and_then(|g| g.1) {
            Some(s) => println!("{s:>10.2}"),
            None => println!("{:>10}", "-"),
        }
    }
    if let [.., a, b] = all {
        println!(
            "growth: log-log slope between n = {} and n = {} (0 flat, 1 linear, 2 n²)",
            a.n, b.n
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netadm_testkit::words;

    #[test]
    fn options() {
        let o = Opts::parse(&words("--json --sizes 100,10 --samples 5")).unwrap();
        assert_eq!(o, Opts { json: true, sizes: vec![10, 100], samples: 5 });
        assert_eq!(Opts::parse(&[]).unwrap().sizes, vec![10, 100, 1_000, 10_000]);
        for bad in ["--sizes 0", "--sizes x", "--samples 0", "--bogus"] {
            assert!(Opts::parse(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn percentiles_and_slopes() {
        let d = dist((1..=100).map(f64::from).collect());
        assert_eq!((d.median, d.p99), (50.0, 99.0));
        assert_eq!(slope(10, 1.0, 100, 100.0), Some(2.0));
        assert_eq!(slope(10, 5.0, 100, 5.0), Some(0.0));
        assert_eq!(slope(10, 0.0, 100, 5.0), None);
    }

    #[test]
    fn seeded_states_save() {
        let st = seed(8).unwrap();
        assert_eq!(st.vnic.len(), 8);
        st.validate().unwrap();
    }
}

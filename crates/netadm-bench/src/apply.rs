//! `netadm-bench apply`: one desired-state document against the same
//! changes as separate CLI commands, side by side in one run.
//!
//! The changes: 2 aggregations (aggr0 over i40e0+i40e1, aggr1 over
//! atl1c0+atl1c1), 50 VNICs with fixed MACs and an mtu property (25 over
//! each aggregation) and 10 IP interfaces with one static address each —
//! 72 verbs. Each round starts two netadmd on empty state directories on one
//! private bus, both persisting every change to their own `links.toml`:
//! with the kernel mirror off on both (no TAPs on either side), or with
//! `--kernel` (root) each in a network namespace of its own with the mirror
//! on, so both sides make the same 10 TAP devices and 10 addresses:
//!
//! - **separate commands**: the 72 verbs as 72 `netadm` processes, one
//!   after the other, as a provisioning script would run them; the figure
//!   is the wall time of all of them (process start, bus connection, the
//!   daemon's work, a save per verb), with the daemon's own `total_us`
//!   summed beside it;
//! - **one document**: the first daemon's `show-config` (so the end state
//!   is the same to the byte) applied to the second with one `netadm apply
//!   -f`: the wall time of that one process (parse, validate, plan, rings
//!   of 4 ports in parallel, one save) and its `total_us`.
//!
//! Afterwards the second daemon's `show-config` must equal the first's and
//! applying it again must change nothing, or the run fails.

use std::path::Path;
use std::time::Instant;

use netadm_testkit::{Bus, Cli, Netns, Policy, Scratch};
use serde_json::{Value, json};

use crate::binaries;
use crate::scale::{cli, mutation, netadmd, stop};

/// Options of `netadm-bench apply`.
#[derive(Debug, Clone, PartialEq)]
pub struct Opts {
    /// Print one JSON object instead of a table.
    pub json: bool,
    /// Rounds (each on fresh daemons); medians are reported.
    pub rounds: usize,
    /// Each netadmd in a network namespace with the kernel mirror on.
    pub kernel: bool,
}

impl Opts {
    /// Parses `[--json] [--rounds N] [--kernel]`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut o = Self { json: false, rounds: 3, kernel: false };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--json" => o.json = true,
                "--kernel" => o.kernel = true,
                "--rounds" => {
                    o.rounds = crate::value("--rounds", it.next())?;
                    if o.rounds == 0 {
                        return Err("--rounds must be at least 1".into());
                    }
                }
                other => return Err(format!("apply: unknown option {other:?}")),
            }
        }
        Ok(o)
    }
}

/// The 72 verbs, as `netadm` arguments.
pub fn verbs() -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = vec![
        ["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"].map(String::from).to_vec(),
        ["create-aggr", "-l", "atl1c0", "-l", "atl1c1", "aggr1"].map(String::from).to_vec(),
    ];
    for i in 0..50 {
        let over = if i % 2 == 0 { "aggr0" } else { "aggr1" };
        v.push(vec![
            "create-vnic".into(),
            "-l".into(),
            over.into(),
            "-m".into(),
            format!("2:8:20:0:1:{i:x}"),
            "-p".into(),
            format!("mtu={}", 1400 + i),
            format!("vnic{i}"),
        ]);
    }
    for i in 0..10 {
        v.push(vec!["create-if".into(), format!("vnic{i}")]);
        v.push(vec![
            "create-addr".into(),
            "-T".into(),
            "static".into(),
            "-a".into(),
            format!("10.0.{i}.1/24"),
            format!("vnic{i}/v4"),
        ]);
    }
    v
}

/// One round's figures, µs.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    separate_wall: f64,
    separate_daemon: f64,
    apply_wall: f64,
    apply_daemon: f64,
}

fn round(o: &Opts, dir: &Path, bus: &Bus, k: usize) -> Result<Round, String> {
    let (netadmd_path, netadm) = binaries("apply")?;
    let netadm = Cli::with(netadm, bus.address());
    let (sa, sb) = (dir.join(format!("a{k}")), dir.join(format!("b{k}")));
    let mut r = Round::default();
    let names = [0, 1].map(|i| format!("nb{}x{k}x{i}", std::process::id()));
    let _ns = if o.kernel { Some([Netns::new(&names[0])?, Netns::new(&names[1])?]) } else { None };
    let ns = |i: usize| o.kernel.then(|| names[i].as_str());
    // Separate commands.
    let a = netadmd(&netadmd_path, bus, &sa, ns(0)).try_start()?;
    let t = Instant::now();
    for v in verbs() {
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        r.separate_daemon += mutation(&netadm, &v)?.0;
    }
    r.separate_wall = t.elapsed().as_micros() as f64;
    let (doc, _) = cli(&netadm, &["show-config"])?;
    stop(a)?;
    let file = dir.join(format!("doc{k}.toml"));
    std::fs::write(&file, &doc).map_err(|e| format!("{}: {e}", file.display()))?;
    // One document, on a second daemon.
    let b = netadmd(&netadmd_path, bus, &sb, ns(1)).try_start()?;
    let f = file.to_str().ok_or("temporary path is not UTF-8")?;
    let t = Instant::now();
    let (out, _) = cli(&netadm, &["--json", "apply", "-f", f])?;
    r.apply_wall = t.elapsed().as_micros() as f64;
    let v: Value = serde_json::from_str(&out).map_err(|e| format!("apply output: {e}: {out}"))?;
    r.apply_daemon = v["result"]["timing"]["total_us"].as_f64().unwrap_or(0.0);
    // The same end state, and it sticks.
    let (after, _) = cli(&netadm, &["show-config"])?;
    if after != doc {
        return Err(format!("apply made a different configuration:\n{after}\nnot\n{doc}"));
    }
    let (again, _) = cli(&netadm, &["--json", "apply", "-f", f])?;
    if !again.contains("\"changed\": false") {
        return Err(format!("applying it again changed something: {again}"));
    }
    stop(b)?;
    let persisted = |s: &Path| std::fs::read_to_string(s.join("links.toml")).unwrap_or_default();
    if persisted(&sa) != persisted(&sb) {
        return Err("the two links.toml differ".into());
    }
    Ok(r)
}

/// The median of `xs` (the upper of the middle two for an even count).
pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Runs the benchmark.
pub fn run(o: Opts) -> Result<(), String> {
    let dir = Scratch::new("netadm-bench-apply-")?;
    let bus = Bus::try_start(Policy::AllowAll)?;
    let mut rounds = vec![];
    for k in 0..o.rounds {
        if !o.json {
            eprintln!("apply: round {} of {} ...", k + 1, o.rounds);
        }
        rounds.push(round(&o, dir.path(), &bus, k)?);
    }
    let m = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    let (sw, sd, aw, ad) = (
        m(|r| r.separate_wall),
        m(|r| r.separate_daemon),
        m(|r| r.apply_wall),
        m(|r| r.apply_daemon),
    );
    let n = verbs().len();
    if o.json {
        let v = json!({
            "verbs": n,
            "rounds": o.rounds,
            "kernel_mirror": o.kernel,
            "separate": { "wall_us": sw, "daemon_us": sd },
            "apply": { "wall_us": aw, "daemon_us": ad },
            "ratio_wall": sw / aw,
            "ratio_daemon": sd / ad,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    let ms = |us: f64| format!("{:.1}", us / 1000.0);
    println!(
        "netadm-bench apply: 2 aggregations, 50 VNICs with mtu, 10 IP interfaces with addresses \
         ({n} verbs); median of {} rounds; kernel mirror {} on both sides, both persist",
        o.rounds,
        if o.kernel { "on (10 TAPs, 10 addresses)" } else { "off" }
    );
    println!("{:<44}{:>12}{:>14}", "", "wall ms", "in daemon ms");
    println!(
        "{:<44}{:>12}{:>14}",
        format!("{n} netadm commands, one after the other"),
        ms(sw),
        ms(sd)
    );
    println!("{:<44}{:>12}{:>14}", "one netadm apply -f of the same document", ms(aw), ms(ad));
    println!("{:<44}{:>11.1}x{:>13.1}x", "ratio (commands / apply)", sw / aw, sd / ad);
    println!(
        "wall: from the first process's start to the last one's exit (process start, bus \
         connection, daemon work, a save per verb vs one); in daemon: the operations' own total_us"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netadm_testkit::words;

    #[test]
    fn options_and_verbs() {
        assert_eq!(
            Opts::parse(&words("--json --rounds 5")).unwrap(),
            Opts { json: true, rounds: 5, kernel: false }
        );
        assert!(Opts::parse(&words("--kernel")).unwrap().kernel);
        assert!(Opts::parse(&words("--rounds 0")).is_err());
        let v = verbs();
        assert_eq!(v.len(), 72);
        assert_eq!(v.iter().filter(|v| v[0] == "create-vnic").count(), 50);
        assert_eq!(v.iter().filter(|v| v[0] == "create-addr").count(), 10);
    }
}

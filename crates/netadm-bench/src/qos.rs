//! `qos`: `maxbw` and `priority` under the traffic generator, side by
//! side in one run, on an i40e-class port whose emulated wire runs at
//! `--speed` Mb/s (a reflector: every frame comes back and is counted):
//! each limit against what a flooding VNIC actually sends, and a
//! high-priority VNIC's rate beside a low-priority flood, with the flood
//! at low priority and, for comparison, at the same (high) priority.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use netadm_config::HardwareConfig;
use netadm_core::{Core, CoreError};
use netadm_rings::Strategy;
use netadm_testkit::fixtures;
use serde_json::json;

opts!("qos" { speed: u64 = 1000, seconds: f64 = 4.0 });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if !(10..=400_000).contains(&o.speed) || o.seconds <= 0.0 {
            return Err("qos: need 10 <= --speed <= 400000 (Mb/s) and --seconds > 0".into());
        }
        Ok(o)
    }
}

const FRAME: u64 = 1514;

fn e(e: CoreError) -> String {
    e.to_string()
}

/// The frames/s `link`'s stream received over `secs`, after a warm-up.
fn received_pps(c: &Core, links: &[&str], secs: f64) -> Vec<f64> {
    let rx = |l: &str| c.show_traffic().into_iter().find(|t| t.link == l).map_or(0, |t| t.received);
    // Warm-up: a second of traffic before the window.
    let warm = Instant::now() + Duration::from_secs(1);
    while Instant::now() < warm {
        std::thread::park_timeout(warm - Instant::now());
    }
    let (t0, r0): (Instant, Vec<u64>) = (Instant::now(), links.iter().map(|l| rx(l)).collect());
    let end = t0 + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        std::thread::park_timeout(end - Instant::now());
    }
    let el = t0.elapsed().as_secs_f64();
    links.iter().zip(r0).map(|(l, r)| (rx(l) - r) as f64 / el).collect()
}

fn core(speed: u64) -> Result<Core, String> {
    let speed = u32::try_from(speed).map_err(|_| format!("--speed {speed}: out of range"))?;
    let hw = fixtures::i40e_reflector(speed).to_toml();
    let hw = HardwareConfig::parse(&hw, Path::new("bench")).map_err(|e| e.to_string())?;
    Core::start(&hw, None, Strategy::Batched).map_err(|e| e.to_string())
}

fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

pub fn run(o: Opts) -> Result<(), String> {
    let none = |_: &str, _: u32, _: u32| {};
    let mbps = |pps: f64| pps * (FRAME * 8) as f64 / 1e6;
    let line_pps = o.speed as f64 * 1e6 / ((FRAME + 24) * 8) as f64;
    let offered = (line_pps * 2.0) as u64;

    // maxbw: a VNIC flooding at twice the line rate under each limit.
    let mut limits = vec![];
    for frac in [0.1, 0.3, 0.6] {
        let c = core(o.speed)?;
        let limit = (o.speed as f64 * frac).round() as u64;
        let maxbw = format!("{limit}M");
        c.create_vnic("v0", "i40e0", "", 0, &props(&[("maxbw", &maxbw)]), true, &none)
            .map_err(e)?;
        c.start_traffic("v0", offered, FRAME as u32, 1).map_err(e)?;
        let got = mbps(received_pps(&c, &["v0"], o.seconds)[0]);
        c.stop_traffic("v0").map_err(e)?;
        limits.push((limit, got));
    }

    // Priority: hi wants 80 % of the wire in one flow; lo floods at twice
    // the line rate over four flows; lo low, then lo high (no priority).
    let mut prio = vec![];
    for lo_prio in ["low", "high"] {
        let c = core(o.speed)?;
        c.create_vnic("hi0", "i40e0", "", 0, &BTreeMap::new(), true, &none).map_err(e)?;
        c.create_vnic("lo0", "i40e0", "", 0, &props(&[("priority", lo_prio)]), true, &none)
            .map_err(e)?;
        let want = line_pps * 0.8;
        c.start_traffic("hi0", want as u64, FRAME as u32, 1).map_err(e)?;
        c.start_traffic("lo0", offered, FRAME as u32, 4).map_err(e)?;
        let r = received_pps(&c, &["hi0", "lo0"], o.seconds);
        c.stop_traffic("lo0").map_err(e)?;
        c.stop_traffic("hi0").map_err(e)?;
        prio.push((lo_prio, want, r[0], r[1]));
    }

    if o.json {
        let out = json!({
            "benchmark": "qos",
            "port": format!("i40e-class, {} Mb/s reflector wire, {FRAME}-byte frames", o.speed),
            "maxbw": limits.iter().map(|(l, g)| json!({
                "limit_mbps": l, "measured_mbps": g, "error": (g - *l as f64) / *l as f64,
            })).collect::<Vec<_>>(),
            "priority": prio.iter().map(|(p, w, h, l)| json!({
                "lo_priority": p, "hi_wants_pps": w, "hi_pps": h, "lo_pps": l, "line_pps": line_pps,
                "hi_share_of_want": h / w,
            })).collect::<Vec<_>>(),
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "maxbw and priority on an i40e-class port, {} Mb/s wire ({line_pps:.0} frames/s of {FRAME} bytes), {} s windows\n",
        o.speed, o.seconds
    );
    println!("{:<8} {:>12} {:>14} {:>8}", "MAXBW", "LIMIT", "MEASURED", "ERROR");
    for (l, g) in &limits {
        let err = (g - *l as f64) / *l as f64 * 100.0;
        println!("{:<8} {:>7} Mb/s {:>9.2} Mb/s {:>+7.2}%", "", l, g, err);
    }
    println!(
        "\n{:<26} {:>10} {:>10} {:>8} {:>10} {:>10}",
        "PRIORITY (hi: 1 flow)", "HI WANTS", "HI GETS", "OF WANT", "LO GETS", "WIRE"
    );
    for (p, w, h, l) in &prio {
        let what = if *p == "low" { "lo flooding at low" } else { "lo flooding at high too" };
        println!(
            "{what:<26} {w:>10.0} {h:>10.0} {:>7.1}% {l:>10.0} {:>10.0}",
            h / w * 100.0,
            h + l
        );
    }
    println!(
        "\nframes/s received back from the reflector; WIRE is HI + LO, at most {line_pps:.0} (the line rate)."
    );
    Ok(())
}

//! `rings`: start, stop and stop+start of every ring of an i40e-class port
//! under each lifecycle strategy, and the DMA the rings hold.
//!
//! Strategies are compared as totals for the same ring count: `sequential`
//! against `batched` on `--rings`, `legacy` (slow: ~0.5 s a ring at 100 Hz)
//! against `batched` measured again on `--legacy-rings`. A per-ring ratio
//! would not be like for like: `batched` waits once per batch, so its cost
//! per ring falls as rings are added and the ratio grows with `--rings`.

use std::sync::Arc;
use std::time::Duration;

use netadm_i40e::{I40e, I40eConfig};
use netadm_nic::{Nic, buf_size_for_mtu};
use netadm_rings::{OpReport, RingEngine, Strategy};
use serde_json::{Value, json};

opts!("rings" { rings: u16 = 256, legacy_rings: u16 = 4, tick_hz: u32 = 100 });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if !(1..=384).contains(&o.rings) || o.legacy_rings == 0 || o.legacy_rings > o.rings {
            return Err("rings: need 1 <= --legacy-rings <= --rings <= 384".into());
        }
        if o.tick_hz == 0 {
            return Err("rings: --tick-hz must be positive".into());
        }
        Ok(o)
    }
}

struct Row {
    strategy: Strategy,
    op: &'static str,
    rings: u16,
    total: Duration,
}

impl Row {
    fn per_ring(&self) -> Duration {
        self.total / u32::from(self.rings)
    }
}

fn port(rings: u16) -> Result<Arc<I40e>, String> {
    let cfg = I40eConfig { queue_pairs: rings, ..I40eConfig::default() };
    I40e::attach("bench0", &cfg).map(Arc::new).map_err(|e| e.to_string())
}

fn measure(strategy: Strategy, rings: u16, buf: u32) -> Result<Vec<Row>, String> {
    let nic = port(rings)?;
    let engine = RingEngine::new(nic.clone(), strategy).map_err(|e| e.to_string())?;
    let set = engine.all_rings();
    let e = |r: Result<OpReport, netadm_rings::RingError>| r.map_err(|e| e.to_string());
    let row = |op, rep: OpReport| Row { strategy, op, rings, total: rep.total };
    let start = e(engine.start(&set, buf))?;
    let stop = e(engine.stop(&set))?;
    e(engine.start(&set, buf))?;
    let restart = e(engine.restart(&set, buf))?;
    e(engine.stop(&set))?;
    let faults = nic.hw_stats().faults();
    if faults != 0 {
        return Err(format!("{strategy}: the device saw {faults} errata violation(s)"));
    }
    Ok(vec![row("start", start), row("stop", stop), row("stop+start", restart)])
}

fn dma(buf: u32) -> Result<(u64, u64), String> {
    let nic = port(256)?;
    let engine = RingEngine::new(nic, Strategy::Batched).map_err(|e| e.to_string())?;
    engine.start(&[0], buf).map_err(|e| e.to_string())?;
    let one = engine.dma_bytes();
    engine.start(&engine.all_rings(), buf).map_err(|e| e.to_string())?;
    let all = engine.dma_bytes();
    engine.stop(&engine.all_rings()).map_err(|e| e.to_string())?;
    if engine.dma_bytes() != 0 {
        return Err(format!("{} DMA bytes left after stopping every ring", engine.dma_bytes()));
    }
    Ok((one, all))
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn run(o: Opts) -> Result<(), String> {
    let buf = buf_size_for_mtu(1500);
    let legacy = Strategy::Legacy { tick_hz: o.tick_hz };
    let mut rows = Vec::new();
    let mut runs = vec![
        (Strategy::Batched, o.rings),
        (Strategy::Sequential, o.rings),
        (legacy, o.legacy_rings),
    ];
    if o.legacy_rings != o.rings {
        // legacy's yardstick: batched on as many rings.
        runs.push((Strategy::Batched, o.legacy_rings));
    }
    for (s, n) in runs {
        if !o.json {
            eprintln!("measuring {s} on {n} rings ...");
        }
        rows.extend(measure(s, n, buf)?);
    }
    let (one, all) = dma(buf)?;
    let find = |s: &str, op: &str, n: u16| {
        rows.iter().find(|r| r.strategy.name() == s && r.op == op && r.rings == n)
    };
    // Totals over the same rings: `other`'s time over batched's.
    let ratio = |op: &str, other: &str, n: u16| -> Option<f64> {
        let b = find("batched", op, n)?;
        let x = find(other, op, n)?;
        Some(us(x.total) / us(b.total))
    };
    if o.json {
        let results: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "strategy": r.strategy.name(),
                    "tick_hz": match r.strategy { Strategy::Legacy { tick_hz } => Some(tick_hz), _ => None },
                    "op": r.op,
                    "rings": r.rings,
                    "total_us": us(r.total).round(),
                    "per_ring_us": (us(r.per_ring()) * 10.0).round() / 10.0,
                })
            })
            .collect();
        let ratios: Vec<Value> = ["start", "stop", "stop+start"]
            .iter()
            .map(|op| {
                json!({
                    "op": op,
                    "sequential_over_batched_total": ratio(op, "sequential", o.rings),
                    "sequential_rings": o.rings,
                    "legacy_over_batched_total": ratio(op, "legacy", o.legacy_rings),
                    "legacy_rings": o.legacy_rings,
                })
            })
            .collect();
        let out = json!({
            "benchmark": "rings",
            "nic": "i40e",
            "mtu": 1500,
            "buf_size": buf,
            "results": results,
            "ratios": ratios,
            "dma": { "one_ring_bytes": one, "all_rings_bytes": all, "rings": 256 },
        });
        println!("{out}");
        return Ok(());
    }
    println!("ring lifecycle on an emulated i40e-class port, MTU 1500 ({buf}-byte buffers)");
    println!(
        "legacy runs on {} rings at {} Hz and is compared with batched on as many rings\n",
        o.legacy_rings, o.tick_hz
    );
    println!("{:<16} {:<11} {:>6} {:>14} {:>13}", "STRATEGY", "OP", "RINGS", "TOTAL", "PER-RING");
    for r in &rows {
        println!(
            "{:<16} {:<11} {:>6} {:>14} {:>13}",
            r.strategy.to_string(),
            r.op,
            r.rings,
            fmt_d(r.total),
            fmt_d(r.per_ring())
        );
    }
    println!();
    println!("total time over batched's for the same rings:");
    for op in ["start", "stop", "stop+start"] {
        let f = |x: Option<f64>| {
            x.map_or(
                "-".into(),
                |x| if x >= 10.0 { format!("{x:.0}x") } else { format!("{x:.1}x") },
            )
        };
        println!(
            "{op:<11} sequential/batched on {} rings {:>8}   legacy/batched on {} rings {:>8}",
            o.rings,
            f(ratio(op, "sequential", o.rings)),
            o.legacy_rings,
            f(ratio(op, "legacy", o.legacy_rings))
        );
    }
    println!("\nDMA held: 1 ring started {}, 256 rings started {}", fmt_b(one), fmt_b(all));
    Ok(())
}

fn fmt_d(d: Duration) -> String {
    let u = us(d);
    if u >= 1e6 {
        format!("{:.2} s", u / 1e6)
    } else if u >= 1e3 {
        format!("{:.2} ms", u / 1e3)
    } else {
        format!("{u:.1} us")
    }
}

fn fmt_b(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

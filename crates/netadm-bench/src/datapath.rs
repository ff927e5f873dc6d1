//! `datapath`: 64-byte frames through the emulated rings, measured side by
//! side in one run: one atl1c-class TX path with xmit-batch off and on (on
//! a port fast enough that the doorbell, not the wire or TX completions,
//! is the limit), the same TX path on a 1 GbE port at tx-imt 1000 and 200
//! (TX descriptors come back only with the moderated TX interrupt), L2
//! forwarding between two cabled ports, latency at rx-imt 200 and 10 (in
//! interleaved rounds: the median ratio, with the load average, flagged
//! when the run was disturbed, never printed bare), and a bare SPSC ring
//! of the same size as the floor (the best of several runs after a
//! warm-up; the TX path's share of it is never printed above 100 %: a
//! floor slower than the path it bounds was disturbed, and the output
//! says so).

use std::sync::Arc;
use std::time::{Duration, Instant};

use netadm_atl1c::{Atl1c, Atl1cConfig};
use netadm_datapath::classify::Forwarder;
use netadm_datapath::tx::PortTx;
use netadm_datapath::{Classifier, GenConfig, Generator, Stream, StreamTable};
use netadm_nic::emu::{Device, WireMode, line_rate_pps};
use netadm_nic::{DmaAccount, DmaRing, Nic};
use netadm_rings::{RingEngine, Strategy};
use serde_json::json;

opts!("datapath" { frames: u64 = 2_000_000 });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if o.frames < 10_000 {
            return Err("datapath: --frames must be at least 10000".into());
        }
        Ok(o)
    }
}

const SIZE: usize = 64;
/// Offered load for the forwarding measurement, pps.
const FORWARD_OFFER: u64 = 2_000_000;
/// atl1c's default ring size.
const RING: u32 = 1024;
/// The xmit-batch port's speed: 100 GbE, 142 Mpps of 64-byte frames,
/// beyond what any doorbell pattern here reaches — as the seed's figures
/// came from a 10/25G NIC, not from a 1 GbE atl1c.
const FAST_MBPS: u64 = 100_000;
/// The xmit-batch port's tx-imt: 20 µs, so TX completions (a ring every
/// 20 µs, 51 Mpps) do not limit it either.
const FAST_TX_IMT: u32 = 10;
/// atl1c's own speed.
const GBE_MBPS: u64 = netadm_atl1c::hw::DEFAULT_SPEED_MBPS;

fn port(name: &str, wire: WireMode) -> Result<(Arc<Atl1c>, Arc<RingEngine>), String> {
    port_at(name, wire, GBE_MBPS)
}

fn port_at(
    name: &str,
    wire: WireMode,
    speed_mbps: u64,
) -> Result<(Arc<Atl1c>, Arc<RingEngine>), String> {
    let nic = Arc::new(
        Atl1c::attach(
            name,
            &Atl1cConfig { ring_size: RING, wire, speed_mbps, ..Default::default() },
        )
        .map_err(|e| e.to_string())?,
    );
    let e = Arc::new(RingEngine::new(nic.clone(), Strategy::Batched).map_err(|e| e.to_string())?);
    e.start(&e.all_rings(), 1536).map_err(|e| e.to_string())?;
    Ok((nic, e))
}

fn cfg(rate: u64, limit: u64) -> GenConfig {
    GenConfig {
        dst: [2, 8, 32, 0, 0, 2],
        src: [2, 8, 32, 0, 0, 1],
        rate_pps: rate,
        size: SIZE,
        batch: 32,
        limit: Some(limit),
    }
}

/// Waits for `cond`, yielding, up to a deadline.
fn wait_for(what: &str, cond: impl FnMut() -> bool) -> Result<(), String> {
    Ok(netadm_testkit::try_wait_for(what, Duration::from_secs(120), cond)?)
}

/// Frames per second through one TX path (one ring) to a sink wire of
/// `speed_mbps` at tx-imt `tx_imt`, and doorbells per frame.
fn tx_path(
    name: &str,
    batch: bool,
    speed_mbps: u64,
    tx_imt: u32,
    frames: u64,
) -> Result<(f64, f64), String> {
    let (nic, e) = port_at(name, WireMode::Sink, speed_mbps)?;
    nic.set_tx_imt(tx_imt).map_err(|e| e.to_string())?;
    e.set_xmit_batch(batch);
    let s = Arc::new(Stream::new(1, 1));
    let d0 = nic.hw_stats().doorbells;
    let t0 = Instant::now();
    Generator::start(cfg(0, frames), s, Arc::new(PortTx::fixed(e.clone(), 1))).join();
    wait_for("the device to send every frame", || nic.hw_stats().tx_frames >= frames)?;
    let secs = t0.elapsed().as_secs_f64();
    let doorbells = (nic.hw_stats().doorbells - d0) as f64 / frames as f64;
    Ok((frames as f64 / secs, doorbells))
}

/// L2 forwarding: port A sends to B over a cable, B forwards every frame
/// back out of itself to A, where the sink counts it.
fn forwarding(frames: u64) -> Result<(f64, u64), String> {
    let (a, ea) = port("fwd0", WireMode::Cable)?;
    let (b, eb) = port("fwd1", WireMode::Cable)?;
    Device::cable(a.device(), b.device()).map_err(|e| e.to_string())?;
    let streams = Arc::new(StreamTable::default());
    ea.set_client(Some(Arc::new(Classifier::new(streams.clone()))));
    let fwd = Arc::new(Forwarder::new(Arc::new(PortTx::fixed(eb.clone(), 1))));
    eb.set_client(Some(fwd.clone()));
    let s = Arc::new(Stream::new(2, 4));
    streams.insert(s.clone());
    let t0 = Instant::now();
    // Offered at FORWARD_OFFER pps, more than a forwarder on this machine
    // keeps up with: what arrives back is the forwarding rate.
    Generator::start(cfg(FORWARD_OFFER, frames), s.clone(), Arc::new(PortTx::fixed(ea.clone(), 1)))
        .join();
    // Every frame ends somewhere: received, or dropped and counted.
    let accounted = || {
        let (ha, hb) = (a.hw_stats(), b.hw_stats());
        let lost_on_the_way =
            ha.rx_dropped + hb.rx_dropped + ha.wire_dropped + hb.wire_dropped + fwd.counts().1;
        s.stats().received + lost_on_the_way >= frames
    };
    wait_for("every forwarded frame to be accounted for", accounted)?;
    let secs = t0.elapsed().as_secs_f64();
    let st = s.stats();
    Ok((st.received as f64 / secs, st.lost))
}

/// Average and p99 latency in µs through a reflector at rx-imt `imt`.
fn latency(imt: u32, frames: u64) -> Result<(f64, f64), String> {
    let (nic, e) = port(&format!("lat{imt}"), WireMode::Reflector)?;
    nic.set_rx_imt(imt).map_err(|e| e.to_string())?;
    let streams = Arc::new(StreamTable::default());
    e.set_client(Some(Arc::new(Classifier::new(streams.clone()))));
    let s = Arc::new(Stream::new(3, 1));
    streams.insert(s.clone());
    // 50 kpps: a frame every 20 µs, more often than either timer fires.
    Generator::start(
        GenConfig { batch: 1, ..cfg(50_000, frames) },
        s.clone(),
        Arc::new(PortTx::fixed(e.clone(), 1)),
    )
    .join();
    wait_for("every frame back", || s.stats().received >= frames)?;
    let st = s.stats();
    Ok((st.latency_avg_ns as f64 / 1e3, st.latency_p99_ns as f64 / 1e3))
}

/// Interleaved rounds of the rx-imt latency pair (200, then 10, each
/// round); the ratio reported is their median.
const LATENCY_ROUNDS: usize = 3;

/// Below this the rx-imt 10 vs 200 latency ratio does not hold: the
/// model gives 17-20x on a quiet machine.
const LATENCY_RATIO_HOLDS: f64 = 5.0;

/// The 1-minute load average (/proc/loadavg), if it can be read.
pub(crate) fn load_avg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Why a latency ratio was measured on a disturbed machine, or None: the
/// load average before or after reached the CPUs there are (other work
/// competed for them), or the interleaved rounds disagree by more than
/// 2x (something came and went during the run). A ratio that misses
/// [`LATENCY_RATIO_HOLDS`] on an undisturbed run is a real miss, shown as
/// such, never excused.
pub(crate) fn disturbed(rounds: &[f64], load: [Option<f64>; 2], cpus: usize) -> Option<String> {
    let mut why = Vec::new();
    let loads: Vec<f64> = load.iter().flatten().copied().collect();
    if loads.len() < 2 {
        why.push("load average unknown".to_owned());
    } else if let Some(l) = loads.iter().copied().find(|&l| l >= cpus as f64) {
        why.push(format!("load average {l:.2} on {cpus} CPUs"));
    }
    let (lo, hi) = rounds.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    if rounds.is_empty() || lo <= 0.0 || hi / lo > 2.0 {
        why.push(format!("rounds disagree ({lo:.1}x to {hi:.1}x)"));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Runs of the bare ring measured after the warm-up; the best is the floor.
const FLOOR_RUNS: usize = 5;

/// The floor: 64-byte frames through a bare SPSC ring of the same size
/// between two threads, no device, no doorbell. One warm-up run (threads,
/// pages, caches, CPU frequency), then the best of [`FLOOR_RUNS`]: a floor
/// is what the machine can do, and a run disturbed by another process
/// only ever measures less. Returns (best, every measured run).
fn bare_ring(frames: u64) -> (f64, Vec<f64>) {
    let _warm_up = bare_ring_once(frames / 4);
    let runs: Vec<f64> = (0..FLOOR_RUNS).map(|_| bare_ring_once(frames)).collect();
    (runs.iter().copied().fold(0.0, f64::max), runs)
}

fn bare_ring_once(frames: u64) -> f64 {
    let ring = Arc::new(DmaRing::new(RING, 1536, &DmaAccount::new()).expect("ring"));
    let consumer = {
        let ring = ring.clone();
        std::thread::spawn(move || {
            let mut got = 0;
            while got < frames {
                // SAFETY: this thread is the ring's only device-side user.
                let n = unsafe { ring.device_process(256, |_, _| {}) };
                if n == 0 {
                    // Nothing posted: let the producer run (on a machine
                    // with fewer free cores than threads, spinning here
                    // would starve it and measure the scheduler).
                    std::thread::yield_now();
                }
                got += u64::from(n);
            }
        })
    };
    let frame = [0u8; SIZE];
    let t0 = Instant::now();
    let mut sent = 0;
    while sent < frames {
        // SAFETY: this thread is the ring's only driver-side user.
        unsafe {
            if ring.free() == 0 && ring.driver_reap(u32::MAX, |_| {}) == 0 {
                // Full: let the consumer run, as above.
                std::thread::yield_now();
            }
            if ring.driver_push(&frame) {
                sent += 1;
            }
        }
    }
    consumer.join().expect("consumer");
    frames as f64 / t0.elapsed().as_secs_f64()
}

/// The TX path's rate as a share of the floor's, or `None` when the TX
/// path measured faster than the floor: the floor runs were disturbed
/// (a share above 100 % means nothing).
fn share_of_floor(tx: f64, floor: f64) -> Option<f64> {
    (floor > 0.0 && tx <= floor).then(|| tx / floor)
}

pub fn run(o: Opts) -> Result<(), String> {
    let n = o.frames;
    let say = |m: &str| {
        if !o.json {
            eprintln!("{m}");
        }
    };
    say("TX path, xmit-batch off ...");
    let (off_pps, off_db) = tx_path("txoff0", false, FAST_MBPS, FAST_TX_IMT, n / 4)?;
    say("TX path, xmit-batch on ...");
    let (on_pps, on_db) = tx_path("txon0", true, FAST_MBPS, FAST_TX_IMT, n)?;
    say("TX path on 1 GbE at tx-imt 1000 and 200 ...");
    let gbe_line = line_rate_pps(GBE_MBPS, SIZE);
    let imt_n = n / 4;
    let (imt1000_pps, _) = tx_path("imt1000", true, GBE_MBPS, netadm_atl1c::DEFAULT_TX_IMT, imt_n)?;
    let (imt200_pps, _) = tx_path("imt200", true, GBE_MBPS, 200, imt_n)?;
    let fast_line = line_rate_pps(FAST_MBPS, SIZE);
    // Most TX completions can return: one ring per moderation interval.
    let fast_completions = f64::from(RING) / (2e-6 * f64::from(FAST_TX_IMT));
    say("L2 forwarding between two cabled ports ...");
    let (fwd_pps, fwd_lost) = forwarding(n / 2)?;
    say("latency at rx-imt 200 and 10, interleaved rounds ...");
    let lat_n = 20_000;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_before = load_avg();
    let mut lat = Vec::with_capacity(LATENCY_ROUNDS);
    for _ in 0..LATENCY_ROUNDS {
        lat.push((latency(200, lat_n)?, latency(10, lat_n)?));
    }
    let load = [load_before, load_avg()];
    let rounds: Vec<f64> = lat.iter().map(|((a200, _), (a10, _))| a200 / a10).collect();
    let ratio = median(&rounds);
    let disturbance = disturbed(&rounds, load, cpus);
    // The figures shown: those of the round whose ratio is the median.
    let mid = rounds.iter().position(|&r| r == ratio).unwrap_or(0);
    let ((l200_avg, l200_p99), (l10_avg, l10_p99)) = lat[mid];
    say("bare SPSC ring: a warm-up, then the best of 5 runs ...");
    let (bare, bare_runs) = bare_ring(n);
    let share = share_of_floor(on_pps, bare);
    if o.json {
        let out = json!({
            "benchmark": "datapath",
            "frame_bytes": SIZE,
            "ring_slots": RING,
            "xmit_batch_port": {
                "class": "atl1c",
                "speed_mbps": FAST_MBPS,
                "line_rate_pps": fast_line.round(),
                "tx_imt": FAST_TX_IMT,
                "tx_completion_limit_pps": fast_completions.round(),
            },
            "xmit_batch_off_pps": off_pps.round(),
            "xmit_batch_on_pps": on_pps.round(),
            "xmit_batch_ratio": on_pps / off_pps,
            "doorbells_per_frame": { "off": off_db, "on": on_db },
            "tx_imt": {
                "speed_mbps": GBE_MBPS,
                "line_rate_pps": gbe_line.round(),
                "frames": imt_n,
                "tx_imt_1000": { "pps": imt1000_pps.round(), "of_line_rate": imt1000_pps / gbe_line },
                "tx_imt_200": { "pps": imt200_pps.round(), "of_line_rate": imt200_pps / gbe_line },
            },
            "forward_pps": fwd_pps.round(),
            "forward_speed_mbps": GBE_MBPS,
            "forward_lost": fwd_lost,
            "forward_offered_pps": FORWARD_OFFER,
            "latency_us": {
                "rx_imt_200": { "avg": l200_avg, "p99": l200_p99 },
                "rx_imt_10": { "avg": l10_avg, "p99": l10_p99 },
            },
            "latency_ratio": ratio,
            "latency_ratio_rounds": rounds,
            "latency_ratio_holds": ratio >= LATENCY_RATIO_HOLDS,
            "latency_load_avg": { "before": load[0], "after": load[1], "cpus": cpus },
            "latency_disturbed": disturbance,
            "bare_ring_pps": bare.round(),
            "bare_ring_runs_pps": bare_runs.iter().map(|r| r.round()).collect::<Vec<_>>(),
            "tx_ns_per_frame": 1e9 / on_pps,
            "bare_ns_per_frame": 1e9 / bare,
            "tx_over_bare": share,
            "floor_disturbed": share.is_none(),
        });
        println!("{out}");
        return Ok(());
    }
    let mpps = |p: f64| format!("{:.2} Mpps", p / 1e6);
    println!("64-byte frames through emulated atl1c-class rings ({RING} slots), one run\n");
    println!(
        "xmit-batch rows: a {} Gb/s port (line rate {}), tx-imt {FAST_TX_IMT} ({} us, TX completions \
         up to {}): the doorbell is the limit",
        FAST_MBPS / 1000,
        mpps(fast_line),
        2 * FAST_TX_IMT,
        mpps(fast_completions)
    );
    println!("{:<44} {:>12} {:>10} {:>14}", "PATH", "RATE", "NS/FRAME", "DOORBELLS/FR");
    println!(
        "{:<44} {:>12} {:>10.0} {:>14.3}",
        "TX, xmit-batch off",
        mpps(off_pps),
        1e9 / off_pps,
        off_db
    );
    println!(
        "{:<44} {:>12} {:>10.0} {:>14.3}",
        "TX, xmit-batch on",
        mpps(on_pps),
        1e9 / on_pps,
        on_db
    );
    println!(
        "{:<44} {:>12} {:>10.0} {:>14}",
        "L2 forward (1 GbE, tx-imt 1000): A -> B -> A",
        mpps(fwd_pps),
        1e9 / fwd_pps,
        ""
    );
    println!(
        "{:<44} {:>12} {:>10.0} {:>14}",
        format!("bare SPSC ring (floor, best of {FLOOR_RUNS})"),
        mpps(bare),
        1e9 / bare,
        ""
    );
    println!();
    let vs_floor = match share {
        Some(x) => format!("TX path vs bare ring: {:.0}% of the floor's rate", 100.0 * x),
        None => format!(
            "TX path vs bare ring: no share: the floor runs were disturbed (best {} below the TX path's {})",
            mpps(bare),
            mpps(on_pps)
        ),
    };
    println!("xmit-batch on/off: {:.2}x   {vs_floor}", on_pps / off_pps);
    println!(
        "forwarding: offered {} at {}, {fwd_lost} lost (full rings: the offer exceeds the 1 GbE \
         wire's {} and the forwarder's one ring at tx-imt 1000)",
        n / 2,
        mpps(FORWARD_OFFER as f64),
        mpps(gbe_line)
    );
    println!();
    println!(
        "TX on a 1 GbE port (line rate {} of 64-byte frames), xmit-batch on, {imt_n} frames each:",
        mpps(gbe_line)
    );
    println!("{:<44} {:>12} {:>10}", "TX COMPLETION MODERATION", "RATE", "LINE RATE");
    for (what, pps) in
        [("tx-imt 1000 (2 ms, atl1c's default)", imt1000_pps), ("tx-imt 200 (400 us)", imt200_pps)]
    {
        println!("{:<44} {:>12} {:>9.0}%", what, mpps(pps), 100.0 * pps / gbe_line);
    }
    println!(
        "tx-imt 1000: the {RING}-descriptor ring comes back once per 2 ms, at most {} ({:.0}% of line rate)",
        mpps(f64::from(RING) / 2e-3),
        100.0 * f64::from(RING) / 2e-3 / gbe_line
    );
    println!();
    println!("{:<22} {:>10} {:>10}", "LATENCY (reflector)", "AVG", "P99");
    println!("{:<22} {:>8.1}us {:>8.1}us", "rx-imt 200 (400 us)", l200_avg, l200_p99);
    println!("{:<22} {:>8.1}us {:>8.1}us", "rx-imt 10 (20 us)", l10_avg, l10_p99);
    let rounds_s: Vec<String> = rounds.iter().map(|r| format!("{r:.1}x")).collect();
    let load_s = |l: Option<f64>| l.map_or("?".to_owned(), |l| format!("{l:.2}"));
    println!(
        "rx-imt 10 lowers average latency {ratio:.1}x: median of {LATENCY_ROUNDS} interleaved \
         rounds ({}), load average {} -> {} on {cpus} CPUs",
        rounds_s.join(", "),
        load_s(load[0]),
        load_s(load[1])
    );
    match (&disturbance, ratio >= LATENCY_RATIO_HOLDS) {
        (Some(why), _) => println!(
            "  DISTURBED run ({why}): the ratio is not the model's; rerun on a quiet machine"
        ),
        (None, true) => println!("  holds (>= {LATENCY_RATIO_HOLDS}x), undisturbed"),
        (None, false) => println!(
            "  DOES NOT HOLD (< {LATENCY_RATIO_HOLDS}x) on an undisturbed run: a real regression"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{disturbed, median, share_of_floor};

    #[test]
    fn a_latency_ratio_says_when_its_run_was_disturbed() {
        let quiet = [Some(0.4), Some(0.6)];
        assert_eq!(disturbed(&[18.0, 19.0, 17.5], quiet, 2), None);
        // A miss on a quiet machine is not excused.
        assert_eq!(disturbed(&[0.7, 0.8, 0.75], quiet, 2), None);
        let loaded = disturbed(&[18.0, 19.0, 17.5], [Some(0.4), Some(3.1)], 2).unwrap();
        assert!(loaded.contains("load average 3.10 on 2 CPUs"), "{loaded}");
        let spread = disturbed(&[0.7, 18.0, 19.0], quiet, 2).unwrap();
        assert!(spread.contains("rounds disagree (0.7x to 19.0x)"), "{spread}");
        assert!(disturbed(&[18.0], [None, Some(0.1)], 2).unwrap().contains("unknown"));
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn a_share_of_the_floor_is_never_above_one() {
        assert_eq!(share_of_floor(5.0, 10.0), Some(0.5));
        assert_eq!(share_of_floor(10.0, 10.0), Some(1.0));
        assert_eq!(share_of_floor(16e6, 0.13e6), None, "a disturbed floor gives no share");
        assert_eq!(share_of_floor(1.0, 0.0), None);
    }
}

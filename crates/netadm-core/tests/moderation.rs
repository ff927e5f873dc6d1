//! TX completion moderation binds the daemon's traffic generator as it
//! binds the datapath bench: completions come back only at the moderated
//! interrupt, whoever sends.
//!
//! A test binary of its own: cargo runs test binaries one after another,
//! so the generator does not share the two CPUs with the other verbs'
//! tests, which once held a debug build's generator below the offer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use netadm_config::HardwareConfig;
use netadm_core::Core;
use netadm_rings::Strategy;
use netadm_testkit::fixtures::{Hardware, Port, Wire};

mod common;
use common::none;

fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Frames per second `start-traffic` sends from `link` when offered
/// `offer` pps (64-byte frames, one flow) with tx-imt `imt`: the frames
/// sent over the time `frames` more take, measured after the first
/// ring's worth (which leaves before any completion is needed).
fn traffic_rate(c: &Core, link: &str, imt: u32, offer: u64, frames: u64) -> f64 {
    c.set_link_prop(link, &props(&[("tx-imt", &imt.to_string())]), false, &none).unwrap();
    c.start_traffic(link, offer, 64, 1).unwrap();
    let sent = || c.show_traffic().iter().find(|t| t.link == link).map_or(0, |t| t.sent);
    // Woken by the generator, neither spun on nor polled: the generator
    // and the device need the CPUs.
    let wait_sent = |n: u64| {
        let sent = c.wait_traffic_sent(link, n, Duration::from_secs(60)).unwrap();
        assert!(sent, "{link}: {n} frames not sent in 60 s");
    };
    wait_sent(1024);
    let (s0, t0) = (sent(), Instant::now());
    wait_sent(s0 + frames);
    let pps = (sent() - s0) as f64 / t0.elapsed().as_secs_f64();
    c.stop_traffic(link).unwrap();
    pps
}

#[test]
fn tx_completion_moderation_bounds_start_traffic() {
    // atl1c0 at 100 Mb/s (142 kpps of 64-byte frames) with rings of 64
    // descriptors, so that the bound is far below what a debug build
    // sends: the TX ring's completions come back once per tx-imt interval,
    // 64 frames every 2 ms (32 kpps) at tx-imt 1000, every 400 us
    // (160 kpps, beyond the wire) at 200. Offered 80 kpps — paced —
    // tx-imt 1000 sends its bound and 200 the offer, 2.5x as much. Without
    // the bound (completions reclaimed before the moderated interrupt
    // writes them back) both would send the offer. (The port has one TX
    // ring, so flows cannot spread over rings that would each get a ring's
    // worth back at the one interrupt.)
    let port = Port::atl1c("atl1c0").wire(Wire::Sink).speed(100).ring_size(64);
    let text = Hardware::default().port(port).to_toml();
    let hw = HardwareConfig::parse(&text, Path::new("moderated.toml")).unwrap();
    let c = Core::start(&hw, None, Strategy::Batched).unwrap();
    c.create_vnic("vnic0", "atl1c0", "auto", 0, &props(&[]), false, &none).unwrap();
    const OFFER: u64 = 80_000;
    // A ratio that misses says something only when tx-imt 200 sent about
    // the offer: a generator held below the bound by a loaded machine
    // sends the same at both settings, and the miss would then blame the
    // moderation for the machine. Such a round is measured again, and
    // named if none reaches the offer.
    const RATIO: f64 = 1.6;
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let slow = traffic_rate(&c, "atl1c0", 1000, OFFER, 8_000);
        let fast = traffic_rate(&c, "atl1c0", 200, OFFER, 16_000);
        eprintln!("start-traffic from atl1c0: {slow:.0} pps at tx-imt 1000, {fast:.0} at 200");
        rounds.push((slow, fast));
        if fast / slow >= RATIO || fast >= 0.8 * OFFER as f64 {
            break;
        }
    }
    let &(slow, fast) = rounds.iter().max_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0))).unwrap();
    assert!(
        fast / slow >= RATIO || fast >= 0.8 * OFFER as f64,
        "the generator sent at most {fast:.0} pps of the {OFFER} offered at tx-imt 200 in {} \
         rounds, only {:.2}x tx-imt 1000's {slow:.0}: this machine is too loaded to measure \
         the moderation's bound",
        rounds.len(),
        fast / slow
    );
    assert!(
        fast / slow >= RATIO,
        "tx-imt 200 sent {fast:.0} pps, only {:.2}x tx-imt 1000's {slow:.0}: TX completions \
         are not bound by the moderated interrupt",
        fast / slow
    );
}

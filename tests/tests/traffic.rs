//! Traffic through the daemon: the generator on an aggregation over
//! reflector ports and across cabled ports, its books and the link
//! counters, and an idle daemon that sleeps.

use netadm_testkit::*;
use serde_json::Value;

fn traffic(bus: &Bus, link: &str) -> Value {
    rows(&json(bus, &["show-traffic"]), "link", link)[0].clone()
}

#[test]
fn sequenced_traffic_through_reflectors_and_cables_arrives_whole() {
    let bus = Bus::start();
    let d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    json(&bus, &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    json(&bus, &["create-aggr", "-l", "atl1c0", "-l", "atl1c1", "aggr1"]);
    json(&bus, &["create-aggr", "-l", "atl1c2", "-l", "atl1c3", "aggr2"]);

    for (link, far) in [("aggr0", "aggr0"), ("aggr1", "aggr2")] {
        let r = json(
            &bus,
            &["start-traffic", "-l", link, "--rate", "50000", "--flows", "8", "--size", "128"],
        );
        assert_eq!(r["op"], "start-traffic");
        wait_for("20000 frames received", || {
            traffic(&bus, link)["received"].as_u64().unwrap() >= 20_000
        });
        json(&bus, &["stop-traffic", "-l", link]);
        // What was in flight arrives; then the books must balance.
        wait_for("in-flight frames", || {
            let t = traffic(&bus, link);
            t["received"] == t["sent"]
        });
        let t = traffic(&bus, link);
        assert_eq!(t["state"], "stopped");
        assert_eq!(
            (t["lost"].as_u64(), t["reordered"].as_u64(), t["duplicated"].as_u64()),
            (Some(0), Some(0), Some(0)),
            "{t}"
        );
        assert!(t["avg_us"].as_f64().unwrap() > 0.0);
        // Nothing reconfigured: the sender was never held for long (the
        // generator holds, never discards, what a full ring refuses).
        let pause = t["pause_max_us"].as_f64().unwrap();
        assert!(pause < 1e6, "longest sender pause {pause} us: {t}");
        assert!(t["max_us"].as_f64().unwrap() >= t["p99_us"].as_f64().unwrap(), "{t}");
        // The link counters agree with the sink.
        let stats = json(&bus, &["show-link", "-s"]);
        let sent = t["sent"].as_u64().unwrap();
        assert_eq!(rows(&stats, "link", link)[0]["opackets"].as_u64(), Some(sent), "{stats}");
        assert_eq!(rows(&stats, "link", far)[0]["ipackets"].as_u64(), Some(sent), "{stats}");
        assert_eq!(rows(&stats, "link", far)[0]["rbytes"].as_u64(), Some(sent * 128));
    }

    // Bad requests are typed.
    json(&bus, &["start-traffic", "-l", "aggr0", "--rate", "1000"]);
    assert_eq!(json_err(&bus, &["start-traffic", "-l", "aggr0"]).0, "Exists");
    json(&bus, &["stop-traffic", "-l", "aggr0"]);
    assert_eq!(json_err(&bus, &["stop-traffic", "-l", "aggr0"]).0, "NotFound");
    assert_eq!(
        json_err(&bus, &["start-traffic", "-l", "aggr0", "--size", "20000"]).0,
        "InvalidValue"
    );
    assert_eq!(json_err(&bus, &["start-traffic", "-l", "aggr0", "--flows", "0"]).0, "InvalidValue");
    let (kind, msg) = json_err(&bus, &["start-traffic", "-l", "nosuch0"]);
    assert_eq!(kind, "NotFound", "{msg}");

    // With no traffic the daemon idles: every thread asleep.
    let pid = d.pid();
    let mut samples = 0;
    let mut asleep = 0;
    for _ in 0..200 {
        for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            if let Some(state) = stat.rsplit(')').next().and_then(|r| r.trim().chars().next()) {
                samples += 1;
                asleep += usize::from(state == 'S');
            }
        }
        std::thread::yield_now();
    }
    assert!(asleep * 100 >= samples * 97, "idle netadmd: {asleep}/{samples} thread samples asleep");
}

#[test]
fn traffic_needs_running_rings() {
    let bus = Bus::start();
    let _d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    let (kind, msg) = json_err(&bus, &["start-traffic", "-l", "i40e0"]);
    assert_eq!(kind, "Busy", "{msg}");
    assert!(msg.contains("create-if"), "{msg}");
}

//! MTU changes on an i40e-class aggregation while sequenced traffic flows:
//! nothing lost, reordered or duplicated, senders paused only briefly, and
//! a failure in the middle puts the old MTU back everywhere.
//!
//! The generator discards nothing (a frame the link does not take is held
//! and handed over later), so "lost" covers every frame it built; what a
//! pause costs shows as the stream's longest sender pause, which each test
//! that claims "hitless" bounds.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netadm_config::HardwareConfig;
use netadm_core::{Core, ErrorKind, NicWrap};
use netadm_nic::testing::{Faults, FaultyNic};
use netadm_nic::{Nic, QueueId};
use netadm_rings::Strategy;

fn hw() -> HardwareConfig {
    let text = netadm_testkit::fixtures::two_i40e_reflectors(64).to_toml();
    HardwareConfig::parse(&text, Path::new("test.toml")).unwrap()
}

fn none(_: &str, _: u32, _: u32) {}

/// These tests measure real-time behaviour (pauses, order, loss) on a
/// machine that may have two cores: they run one at a time, not beside
/// each other's traffic generators.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn mtu(v: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("mtu".to_string(), v.to_string())])
}

fn traffic(c: &Core) -> netadm_core::TrafficRow {
    c.show_traffic().into_iter().next().unwrap()
}

/// The longest any change may hold senders: generous, for a loaded
/// two-core machine (a hitless change's pause is a drain of what is in
/// flight: well under 20 ms measured; a VNIC group's, its whole change).
const PAUSE_BOUND_US: f64 = 1_000_000.0;

/// Scheduling slack on a loaded machine: a generator or device thread not
/// run for this long can hold senders (a ring full for a moment) with no
/// change going on (measured: up to 7 ms with both cores busy).
const SLACK_US: f64 = 50_000.0;

/// Senders were never held longer than [`PAUSE_BOUND_US`], nor longer than
/// `bound_us`, `what` the test claims.
fn assert_pause_below(t: &netadm_core::TrafficRow, bound_us: f64, what: &str) {
    assert!(
        t.pause_max_us < PAUSE_BOUND_US && t.pause_max_us < bound_us,
        "senders held {:.0} us; {what}: under {:.0} us: {t:?}",
        t.pause_max_us,
        bound_us.min(PAUSE_BOUND_US)
    );
}

/// Waits (yielding) until in-flight frames have arrived or a deadline
/// passes; the books are then asserted, so loss shows as numbers.
fn settle(c: &Core) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let t = traffic(c);
        if t.received == t.sent {
            return;
        }
        std::thread::yield_now();
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// A core on [`hw`] with [`aggregation_under_traffic`].
fn started_under_traffic() -> Core {
    let c = Core::start(&hw(), None, Strategy::Batched).unwrap();
    aggregation_under_traffic(&c);
    c
}

/// Aggregation aggr0 of i40e0 and i40e1, with traffic flowing over it.
fn aggregation_under_traffic(c: &Core) {
    c.create_aggr("aggr0", &["i40e0".into(), "i40e1".into()], "L3,L4", "", "", "", true, &none)
        .unwrap();
    c.start_traffic("aggr0", 100_000, 128, 32).unwrap();
    wait_for("traffic to flow", || traffic(c).received > 5_000);
}

/// Stops the traffic, lets what is in flight arrive, and checks that
/// nothing was lost, reordered or duplicated and that both members carried
/// flows. Returns the books.
fn finish_and_check(c: &Core) -> netadm_core::TrafficRow {
    let before = traffic(c).received;
    wait_for("traffic to keep flowing", || traffic(c).received > before + 5_000);
    c.stop_traffic("aggr0").unwrap();
    settle(c);
    let t = traffic(c);
    assert_eq!((t.lost, t.reordered, t.duplicated), (0, 0, 0), "{t:?}");
    assert!(t.sent > 10_000, "{t:?}");
    // Both members carried flows.
    let stats = c.show_stats();
    for port in ["i40e0", "i40e1"] {
        let s = stats.iter().find(|s| s.link == port).unwrap();
        assert!(s.opackets > 1_000, "{port} carried {} frames", s.opackets);
    }
    t
}

#[test]
fn twenty_mtu_changes_under_sequenced_traffic_lose_nothing_and_pause_senders_briefly() {
    let _serial = serial();
    let c = started_under_traffic();
    let mut longest = 0;
    for i in 0..20 {
        let v = if i % 2 == 0 { "9000" } else { "1500" };
        let sent = traffic(&c).sent;
        let r = c.set_link_prop("aggr0", &mtu(v), true, &none).unwrap();
        assert_eq!(r.counts["frames_dropped"], 0, "change {i}: {r:?}");
        longest = longest.max(r.total_us);
        assert!(traffic(&c).sent > sent, "change {i}: nothing sent during it");
        let waves: Vec<&str> =
            r.phases.iter().map(|(n, _)| n.as_str()).filter(|n| n.contains("wave")).collect();
        assert!(
            waves.contains(&"reprogram/wave1") && waves.contains(&"reprogram/wave2"),
            "{:?}",
            r.phases
        );
        let want = if i % 2 == 0 { 9088 } else { 1536 };
        for p in c.hardware().ports() {
            for ring in p.engine.all_rings() {
                assert_eq!(
                    p.engine.info(ring).unwrap().buf_size,
                    Some(want),
                    "{} ring {ring}",
                    p.device
                );
            }
        }
    }
    let t = finish_and_check(&c);
    // Each change waits two 50 ms re-enable gaps with senders on the
    // other wave: they were held for less than half of it.
    assert_pause_below(&t, longest as f64 * 0.5, "less than half the longest change");
    for p in c.hardware().ports() {
        assert_eq!(p.nic().hw_stats().faults(), 0);
    }
}

#[test]
fn a_failure_in_the_first_wave_leaves_the_old_mtu_working() {
    let _serial = serial();
    failure_leaves_old_mtu(QueueId::tx(10));
}

#[test]
fn a_failure_in_the_middle_of_an_mtu_change_leaves_the_old_mtu_working() {
    let _serial = serial();
    failure_leaves_old_mtu(QueueId::tx(40));
}

/// A core whose i40e1 is wrapped in a fault injector, and the injector.
fn core_with_faulty_i40e1() -> (Core, Arc<FaultyNic>) {
    let faulty: Arc<Mutex<Option<Arc<FaultyNic>>>> = Arc::default();
    let keep = faulty.clone();
    let wrap: NicWrap = Box::new(move |name, nic| {
        if name != "i40e1" {
            return nic;
        }
        let f = Arc::new(FaultyNic::new(nic, Duration::from_millis(100)));
        *keep.lock().unwrap() = Some(f.clone());
        f as Arc<dyn Nic>
    });
    let c = Core::start_with(&hw(), None, Strategy::Batched, Some(&wrap), false).unwrap();
    let f = faulty.lock().unwrap().clone().unwrap();
    (c, f)
}

fn failure_leaves_old_mtu(q: QueueId) {
    let (c, f) = core_with_faulty_i40e1();
    aggregation_under_traffic(&c);
    // The second wave's start on i40e1 never gets an enable acknowledged.
    f.set_faults(Faults { swallow_enable: [q].into(), once: true, ..Faults::default() });
    let e = c.set_link_prop("aggr0", &mtu("9000"), true, &none).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Hardware, "{}", e.message);
    // The old MTU everywhere: configuration, every ring's buffers, every
    // ring running; and the traffic still flows, whole.
    assert_eq!(c.show_link().iter().find(|l| l.link == "aggr0").unwrap().mtu, 1500);
    for p in c.hardware().ports() {
        assert_eq!(p.rings_started(), 64, "{}", p.device);
        for ring in p.engine.all_rings() {
            assert_eq!(
                p.engine.info(ring).unwrap().buf_size,
                Some(1536),
                "{} ring {ring}",
                p.device
            );
        }
    }
    // The unwinding held senders no longer than a change does.
    let t = finish_and_check(&c);
    assert_pause_below(&t, PAUSE_BOUND_US, "the unwinding held them briefly");
}

/// Four atl1c-class ports cabled atl1c0–atl1c2, atl1c1–atl1c3.
fn cabled() -> HardwareConfig {
    let text = netadm_testkit::fixtures::cabled_atl1c().to_toml();
    HardwareConfig::parse(&text, Path::new("cabled.toml")).unwrap()
}

/// Frames are conserved: each one sent is received, or dropped and counted
/// by a wire (odrops: a cut cable) or a port (idrops). Waits until every
/// sent frame is accounted for, then checks that what the sink missed is
/// no more than what was counted dropped, and returns the books.
fn settle_cabled(c: &Core) -> netadm_core::TrafficRow {
    let drops = || -> u64 {
        c.show_stats()
            .iter()
            .filter(|s| s.link.starts_with("atl1c"))
            .map(|s| s.idrops + s.odrops)
            .sum()
    };
    wait_for("every frame received or counted dropped", || {
        let t = traffic(c);
        t.received + drops() >= t.sent
    });
    let t = traffic(c);
    assert!(t.lost <= drops(), "{} lost but only {} counted dropped: {t:?}", t.lost, drops());
    t
}

fn opackets(c: &Core, port: &str) -> u64 {
    c.show_stats().into_iter().find(|s| s.link == port).unwrap().opackets
}

#[test]
fn a_cut_cable_moves_its_flows_to_the_other_member_and_back() {
    let _serial = serial();
    let hw = cabled();
    let c = Core::start(&hw, None, Strategy::Batched).unwrap();
    c.create_aggr("aggr1", &["atl1c0".into(), "atl1c1".into()], "L4", "", "", "", true, &none)
        .unwrap();
    c.create_aggr("aggr2", &["atl1c2".into(), "atl1c3".into()], "L4", "", "", "", true, &none)
        .unwrap();
    c.start_traffic("aggr1", 50_000, 128, 32).unwrap();
    wait_for("traffic over both members", || {
        opackets(&c, "atl1c0") > 1_000 && opackets(&c, "atl1c1") > 1_000
    });

    c.set_carrier("atl1c0", false).unwrap();
    assert_eq!(
        c.show_phys().iter().find(|p| p.link == "atl1c2").unwrap().state,
        "down",
        "both ends"
    );
    let (a0, a1) = (opackets(&c, "atl1c0"), opackets(&c, "atl1c1"));
    let r0 = traffic(&c).received;
    wait_for("its flows to move to atl1c1", || opackets(&c, "atl1c1") > a1 + 10_000);
    wait_for("and to arrive", || traffic(&c).received > r0 + 5_000);
    assert!(
        opackets(&c, "atl1c0") - a0 < 64,
        "the cut member stops carrying (at most a batch in flight)"
    );

    c.set_carrier("atl1c0", true).unwrap();
    let a0 = opackets(&c, "atl1c0");
    wait_for("atl1c0 to carry again", || opackets(&c, "atl1c0") > a0 + 1_000);
    c.stop_traffic("aggr1").unwrap();
    let t = settle_cabled(&c);
    // Frames on the wire at the cut are lost (counted); nothing is
    // reordered or duplicated, including on the flows that moved.
    assert_eq!((t.reordered, t.duplicated), (0, 0), "{t:?}");
    assert!(t.lost < 1_000, "only what was on the wire at the cut: {t:?}");
}

#[test]
fn adding_and_removing_members_under_traffic_loses_nothing_and_pauses_senders_briefly() {
    let _serial = serial();
    let c = Core::start(&hw(), None, Strategy::Batched).unwrap();
    c.create_aggr("aggr0", &["i40e0".into()], "L3,L4", "", "", "", true, &none).unwrap();
    c.start_traffic("aggr0", 100_000, 128, 32).unwrap();
    wait_for("traffic", || traffic(&c).received > 5_000);
    let add = c.add_aggr("aggr0", &["i40e1".into()], true, &none).unwrap();
    wait_for("the new member to carry flows", || opackets(&c, "i40e1") > 2_000);
    let before = opackets(&c, "i40e0");
    wait_for("the old member to keep its flows", || opackets(&c, "i40e0") > before + 2_000);
    let remove = c.remove_aggr("aggr0", &["i40e0".into()], true, &none).unwrap();
    let r = traffic(&c).received;
    wait_for("traffic over the remaining member", || traffic(&c).received > r + 5_000);
    c.stop_traffic("aggr0").unwrap();
    settle(&c);
    let t = traffic(&c);
    assert_eq!((t.lost, t.reordered, t.duplicated), (0, 0, 0), "{t:?}");
    let longest = add.total_us.max(remove.total_us) as f64;
    assert_pause_below(&t, longest + SLACK_US, "no longer than the longest change");
}

fn lacp_bits(c: &Core, aggr: &str) -> Vec<u8> {
    c.show_aggr()
        .into_iter()
        .find(|a| a.link == aggr)
        .unwrap()
        .ports
        .iter()
        .map(|p| p.lacp)
        .collect()
}

const DIST: u8 = 0x20;

#[test]
fn lacp_negotiates_between_cabled_aggregations_and_recovers_from_a_cut_cable() {
    let _serial = serial();
    let hw = cabled();
    let c = Core::start(&hw, None, Strategy::Batched).unwrap();
    c.create_aggr(
        "aggr1",
        &["atl1c0".into(), "atl1c1".into()],
        "L4",
        "active",
        "short",
        "",
        true,
        &none,
    )
    .unwrap();
    c.start_traffic("aggr1", 50_000, 128, 16).unwrap();
    // Alone, nobody answers: no member distributes, nothing is sent.
    // The generator holds its first batch: a sender pause that lasts.
    wait_for("the sender to be held", || traffic(&c).pause_max_us > 100_000.0);
    assert_eq!(traffic(&c).sent, 0);
    assert!(
        lacp_bits(&c, "aggr1").iter().all(|b| b & DIST == 0 && b & 0x40 != 0),
        "defaulted, not distributing"
    );

    // A passive partner answers: both ends distribute and traffic flows.
    c.create_aggr(
        "aggr2",
        &["atl1c2".into(), "atl1c3".into()],
        "L4",
        "passive",
        "short",
        "",
        true,
        &none,
    )
    .unwrap();
    wait_for("LACP to negotiate", || {
        lacp_bits(&c, "aggr1").iter().chain(lacp_bits(&c, "aggr2").iter()).all(|b| b & DIST != 0)
    });
    let x = c.show_aggr().into_iter().find(|a| a.link == "aggr1").unwrap();
    assert!(
        x.ports.iter().all(|p| p.state == "attached" && p.lacp & 0x08 != 0 && p.lacp & 0x40 == 0),
        "{x:?}"
    );
    wait_for("traffic over both members", || {
        opackets(&c, "atl1c0") > 500 && opackets(&c, "atl1c1") > 500
    });

    // Cut one cable: that member stops distributing at both ends; flows move.
    c.set_carrier("atl1c1", false).unwrap();
    wait_for("atl1c1 out", || {
        lacp_bits(&c, "aggr1")[1] & DIST == 0 && lacp_bits(&c, "aggr2")[1] & DIST == 0
    });
    assert_eq!(
        c.show_aggr().into_iter().find(|a| a.link == "aggr1").unwrap().ports[1].state,
        "standby"
    );
    let r = traffic(&c).received;
    wait_for("traffic over atl1c0 alone", || traffic(&c).received > r + 5_000);

    // Plug it back: LACP negotiates again and it carries flows again.
    c.set_carrier("atl1c1", true).unwrap();
    wait_for("atl1c1 back", || lacp_bits(&c, "aggr1").iter().all(|b| b & DIST != 0));
    let a1 = opackets(&c, "atl1c1");
    wait_for("atl1c1 carrying again", || opackets(&c, "atl1c1") > a1 + 500);
    c.stop_traffic("aggr1").unwrap();
    let t = settle_cabled(&c);
    assert_eq!((t.reordered, t.duplicated), (0, 0), "{t:?}");
}

/// [`cabled`] with the atl1c0–atl1c2 cable at 20 Mb/s: 16.4 kpps of
/// 128-byte frames, so a member that takes over the other's flows falls
/// behind and has a backlog in flight when the other comes back: its TX
/// ring of 128 frames, 7.8 ms of wire time (ten times that and more
/// under a CPU hog, where the device thread is woken late and the wire
/// idles meanwhile).
fn slow_cabled() -> HardwareConfig {
    let hw =
        ["atl1c0", "atl1c2"].iter().fold(netadm_testkit::fixtures::cabled_atl1c(), |hw, port| {
            hw.edit(port, |p| p.speed(20).ring_size(128))
        });
    HardwareConfig::parse(&hw.to_toml(), Path::new("slow.toml")).unwrap()
}

/// Cuts atl1c1 so that its flows pile up behind the slow atl1c0, plugs it
/// back, and checks that the flows returning to it were drained from
/// atl1c0 first: nothing reordered, and senders held no longer than the
/// backlog took to leave.
fn plugging_back_behind_a_backlog(lacp: bool) {
    let c = Core::start(&slow_cabled(), None, Strategy::Batched).unwrap();
    let (m1, m2) = if lacp { ("active", "passive") } else { ("", "") };
    let ports = |a: &str, b: &str| [a.to_string(), b.to_string()];
    c.create_aggr("aggr1", &ports("atl1c0", "atl1c1"), "L4", m1, "short", "", true, &none).unwrap();
    c.create_aggr("aggr2", &ports("atl1c2", "atl1c3"), "L4", m2, "short", "", true, &none).unwrap();
    let distributing = |i: usize| lacp_bits(&c, "aggr1")[i] & DIST != 0;
    if lacp {
        wait_for("LACP to negotiate", || distributing(0) && distributing(1));
    }
    // 24 kpps: 12 per member at first, within atl1c0's 16.4.
    c.start_traffic("aggr1", 24_000, 128, 16).unwrap();
    wait_for("traffic over both members", || {
        opackets(&c, "atl1c0") > 500 && opackets(&c, "atl1c1") > 500
    });
    c.set_carrier("atl1c1", false).unwrap();
    if lacp {
        wait_for("atl1c1 out", || !distributing(1));
    }
    // All 24 kpps on atl1c0 now: its rings fill.
    let a0 = opackets(&c, "atl1c0");
    wait_for("a backlog on atl1c0", || {
        let e = &c.hardware().port("atl1c0").unwrap().engine;
        opackets(&c, "atl1c0") > a0 + 2_000
            && e.all_rings().iter().any(|&r| e.info(r).unwrap().tx_refused > 0)
    });
    let plug = c.set_carrier("atl1c1", true).unwrap();
    eprintln!("plug-cable atl1c1: {:?}", plug.notes);
    if lacp {
        wait_for("atl1c1 back", || distributing(1));
    }
    let a1 = opackets(&c, "atl1c1");
    wait_for("atl1c1 carrying again", || opackets(&c, "atl1c1") > a1 + 1_000);
    c.stop_traffic("aggr1").unwrap();
    let t = settle_cabled(&c);
    assert_eq!((t.reordered, t.duplicated), (0, 0), "{t:?}");
    // Without LACP, plug-cable moved the flows itself, and says so.
    assert!(
        lacp || plug.notes.iter().any(|n| n.contains("flows moved back to atl1c1")),
        "the move is reported: {plug:?}"
    );
    // The longest hold is the drain of atl1c0's backlog (31 ms of wire
    // time; measured up to 1.5 s with 1024 frames queued under a CPU hog,
    // hence the small rings).
    assert_pause_below(&t, PAUSE_BOUND_US, "no longer than the backlog took to leave");
}

#[test]
fn a_cable_plugged_back_behind_a_backlog_reorders_nothing() {
    let _serial = serial();
    plugging_back_behind_a_backlog(false);
}

#[test]
fn with_lacp_a_member_distributing_again_behind_a_backlog_reorders_nothing() {
    let _serial = serial();
    plugging_back_behind_a_backlog(true);
}

#[test]
fn changing_rxrings_under_traffic_loses_nothing_and_pauses_senders_briefly() {
    let _serial = serial();
    let c = started_under_traffic();
    let mut longest = 0;
    for n in ["8", "64", "16"] {
        let p = BTreeMap::from([("rxrings".to_string(), n.to_string())]);
        for port in ["i40e0", "i40e1"] {
            let r = c.set_link_prop(port, &p, true, &none).unwrap();
            longest = longest.max(r.total_us);
            assert_eq!(
                r.counts.get("frames_dropped").copied().unwrap_or(0),
                0,
                "{port} rxrings {n}: {r:?}"
            );
            assert_eq!(c.hardware().port(port).unwrap().rings_started(), n.parse::<u32>().unwrap());
        }
        let before = traffic(&c).received;
        wait_for("traffic over the new rings", || traffic(&c).received > before + 3_000);
    }
    let t = finish_and_check(&c);
    assert_pause_below(&t, longest as f64 + SLACK_US, "no longer than the longest change");
}

fn stream(c: &Core, link: &str) -> netadm_core::TrafficRow {
    c.show_traffic().into_iter().find(|t| t.link == link).unwrap()
}

/// [`settle`] for one link's stream among several.
fn settle_link(c: &Core, link: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let t = stream(c, link);
        if t.received == t.sent {
            return;
        }
        std::thread::yield_now();
    }
}

fn rx_on(c: &Core, port: &str, rings: std::ops::Range<u16>) -> u64 {
    let e = &c.hardware().port(port).unwrap().engine;
    rings.map(|r| e.info(r).unwrap().rx_frames).sum()
}

#[test]
fn vnic_ring_groups_keep_their_traffic_apart_and_are_never_disturbed() {
    let _serial = serial();
    let c = Core::start(&hw(), None, Strategy::Batched).unwrap();
    c.create_if("i40e0", true, &none).unwrap();
    let four = BTreeMap::from([("rxrings".to_string(), "4".to_string())]);
    c.create_vnic("vnic0", "i40e0", "auto", 0, &four, true, &none).unwrap();
    assert_eq!(c.hardware().port("i40e0").unwrap().rings_started(), 64, "60 primary + 4 for vnic0");
    c.start_traffic("i40e0", 50_000, 128, 16).unwrap();
    c.start_traffic("vnic0", 50_000, 128, 16).unwrap();
    wait_for("both flowing", || {
        stream(&c, "i40e0").received > 2_000 && stream(&c, "vnic0").received > 2_000
    });

    // Another VNIC comes and goes: vnic0 keeps its rings, nobody loses a frame.
    let two = BTreeMap::from([("rxrings".to_string(), "2".to_string())]);
    let calm = stream(&c, "vnic0").pause_max_us;
    c.create_vnic("vnic1", "i40e0", "auto", 0, &two, true, &none).unwrap();
    let before = stream(&c, "vnic0").received;
    wait_for("vnic0 carrying on", || stream(&c, "vnic0").received > before + 2_000);
    c.delete_vnic("vnic1", true, &none).unwrap();
    let before = stream(&c, "i40e0").received;
    wait_for("i40e0 carrying on", || stream(&c, "i40e0").received > before + 2_000);

    c.stop_traffic("vnic0").unwrap();
    c.stop_traffic("i40e0").unwrap();
    settle_link(&c, "i40e0");
    settle_link(&c, "vnic0");
    let (a, b) = (stream(&c, "i40e0"), stream(&c, "vnic0"));
    for t in [&a, &b] {
        assert_eq!((t.lost, t.reordered, t.duplicated), (0, 0, 0), "{t:?}");
    }
    // Not disturbed: vnic1 coming and going never held vnic0's senders
    // (measured: 0 us; the bound allows a ring full for a moment).
    assert_pause_below(&b, calm + SLACK_US, "vnic1 coming and going did not hold vnic0's");
    // The MAC filter put vnic0's frames on its own rings, and only there.
    assert_eq!(rx_on(&c, "i40e0", 60..64), b.received, "vnic0's traffic arrives only on its group");
    assert_eq!(
        rx_on(&c, "i40e0", 0..60),
        a.received,
        "and the primary group's only on the primary rings"
    );

    // An MTU change under traffic reprograms the group too, losing nothing.
    c.start_traffic("vnic0", 50_000, 128, 16).unwrap();
    wait_for("vnic0 flowing", || stream(&c, "vnic0").received > 1_000);
    let r = c.set_link_prop("i40e0", &mtu("9000"), true, &none).unwrap();
    assert_eq!(r.counts["frames_dropped"], 0, "{r:?}");
    let mtu_change_us = r.total_us;
    let e = &c.hardware().port("i40e0").unwrap().engine;
    assert!((0..64).all(|r| e.info(r).unwrap().buf_size == Some(9088)));
    let before = stream(&c, "vnic0").received;
    wait_for("vnic0 after the change", || stream(&c, "vnic0").received > before + 1_000);
    c.stop_traffic("vnic0").unwrap();
    settle_link(&c, "vnic0");
    let t = stream(&c, "vnic0");
    assert_eq!((t.lost, t.reordered, t.duplicated), (0, 0, 0), "{t:?}");
    // A ring group is restarted whole, not in waves: its senders are held
    // while it restarts (measured: ~150 ms of a ~155 ms change), never
    // longer than the change itself, and nothing is lost.
    assert_pause_below(&t, mtu_change_us as f64 + SLACK_US, "no longer than the change");
}

#[test]
fn a_panic_in_a_ring_job_is_an_internal_error_and_the_daemon_serves_on() {
    let _serial = serial();
    let (c, f) = core_with_faulty_i40e1();
    f.set_faults(Faults { panic_ring: [QueueId::rx(3)].into(), once: true, ..Faults::default() });
    let e = c
        .create_aggr("aggr0", &["i40e0".into(), "i40e1".into()], "L3,L4", "", "", "", true, &none)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Internal, "{}", e.message);
    assert!(e.message.contains("injected driver panic"), "{}", e.message);
    assert!(e.message.contains("put back"), "{}", e.message);
    // Nothing changed, no ring left running, and the next change works.
    assert!(c.show_link().iter().all(|l| l.link != "aggr0"));
    assert!(c.hardware().ports().iter().all(|p| p.rings_started() == 0));
    c.create_aggr("aggr0", &["i40e0".into(), "i40e1".into()], "L3,L4", "", "", "", true, &none)
        .unwrap();
    assert!(c.hardware().ports().iter().all(|p| p.rings_started() == 64));
}

#[test]
fn a_change_arriving_while_the_daemon_stops_is_refused_at_once() {
    let _serial = serial();
    let c = Arc::new(Core::start(&hw(), None, Strategy::Batched).unwrap());
    c.quiesce();
    let (tx, rx) = std::sync::mpsc::channel();
    let c2 = c.clone();
    std::thread::spawn(move || {
        let _ = tx.send(c2.create_vnic("vnic0", "i40e0", "auto", 0, &BTreeMap::new(), true, &none));
    });
    let r = rx.recv_timeout(Duration::from_secs(10)).expect("answered, not blocked forever");
    let e = r.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Busy, "{}", e.message);
    assert!(c.show_link().iter().all(|l| l.link != "vnic0"));
}

#[test]
fn start_traffic_racing_create_and_delete_gets_typed_errors_never_a_panic() {
    let _serial = serial();
    let c = Arc::new(Core::start(&hw(), None, Strategy::Batched).unwrap());
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    const ROUNDS: u32 = 15;
    let rounds = Arc::new(AtomicU32::new(0));
    // Start attempts made so far. Each round keeps the aggregation up
    // until two more attempts have returned: the second of them began
    // after the create, so the race is met in every round, not left to
    // the scheduler (on a busy machine 41 attempts once all missed it).
    let tries = Arc::new(AtomicU32::new(0));
    let churn = {
        let (c, rounds, tries) = (c.clone(), rounds.clone(), tries.clone());
        std::thread::spawn(move || {
            let ports = ["i40e0".to_string(), "i40e1".to_string()];
            for _ in 0..ROUNDS {
                c.create_aggr("aggr0", &ports, "L3,L4", "", "", "", true, &none).unwrap();
                let seen = tries.load(Relaxed);
                let deadline = Instant::now() + Duration::from_secs(10);
                while tries.load(Relaxed) < seen + 2 && Instant::now() < deadline {
                    std::thread::yield_now();
                }
                c.delete_aggr("aggr0", true, &none).unwrap();
                rounds.fetch_add(1, Relaxed);
            }
        })
    };
    let mut started = 0;
    while rounds.load(Relaxed) < ROUNDS && !churn.is_finished() {
        match c.start_traffic("aggr0", 1000, 128, 2) {
            Ok(_) => {
                started += 1;
                let _ = c.stop_traffic("aggr0");
            }
            Err(e) => assert!(
                matches!(e.kind, ErrorKind::NotFound | ErrorKind::Busy),
                "{:?}: {}",
                e.kind,
                e.message
            ),
        }
        tries.fetch_add(1, Relaxed);
    }
    churn.join().expect("the churning thread did not panic");
    let tries = tries.load(Relaxed);
    eprintln!("{ROUNDS} create/delete rounds; {tries} start-traffic, {started} started");
    assert!(started > 0, "some starts found the aggregation up");
}

#[test]
fn a_deleted_link_takes_its_traffic_books_and_stream_with_it() {
    let _serial = serial();
    let c = Core::start(&hw(), None, Strategy::Batched).unwrap();
    for round in 0..3 {
        c.create_vnic("vnic0", "i40e0", "auto", 0, &BTreeMap::new(), true, &none).unwrap();
        c.start_traffic("vnic0", 1000, 128, 4).unwrap();
        let listed = c.show_traffic();
        assert_eq!(listed.len(), 1, "round {round}: {listed:?}");
        c.delete_vnic("vnic0", true, &none).unwrap();
        assert!(c.show_traffic().is_empty(), "round {round}: books of a deleted link stay");
    }
    // Streams are gone from every port's classifier too: ids 1..=3 were
    // used, none is registered now.
    assert!((1..=3).all(|id| c.hardware().streams().get(id).is_none()));
}

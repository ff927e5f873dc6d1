//! Every mutating verb through every failpoint of the mutation pipeline,
//! as an error and as a panic (the process-abort mode is the daemon's
//! test, `daemon/tests/failpoints.rs`): the caller gets a typed error, and
//! afterwards what is on disk, the running and persistent configurations,
//! every ring and the kernel devices are as before the verb or as after it
//! (a run without the failpoint), never a mix. Then the verb runs again
//! without the failpoint and must reach the state after it: the core serves
//! on.
//!
//! Built only with `--features failpoints`. Each case runs on a thread in
//! a network namespace of its own (the kernel mirror is on), so nothing is
//! made in the host's. Needs root; skips saying so, except under CI.

use std::collections::BTreeMap;
use std::path::Path;

use netadm_config::Store;
use netadm_core::Report;
use netadm_core::{Core, CoreError, ErrorKind, fail};
use netadm_rings::Strategy;

mod common;
use common::{in_netns, none, root_or_skip};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

type Op = fn(&Core) -> Result<Report, CoreError>;

fn aggr(c: &Core, ports: &[&str]) -> Result<Report, CoreError> {
    c.create_aggr("aggr0", &s(ports), "L2,L3", "off", "", "", false, &none)
}
fn aggr_if(c: &Core) -> Result<Report, CoreError> {
    aggr(c, &["i40e0", "i40e1"])?;
    c.create_if("aggr0", false, &none)
}
fn aggr_if_addr(c: &Core) -> Result<Report, CoreError> {
    aggr_if(c)?;
    c.create_addr("aggr0/v4", "static", "192.0.2.1/24", false, &none)
}
fn vnic(c: &Core) -> Result<Report, CoreError> {
    c.create_vnic("vnic0", "i40e0", "02:00:00:00:00:01", 0, &props(&[]), false, &none)
}
fn nothing(_: &Core) -> Result<Report, CoreError> {
    Ok(Report::default())
}

/// The document `apply` makes the configuration: what [`aggr_if_addr`]
/// makes, as show-config writes it (made once, before any failpoint is
/// armed, by a core of its own).
static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn apply_doc(_: &Core) -> Result<Report, CoreError> {
    if DOC.get().is_none() {
        let other = Core::start_with(&common::hw(4), None, Strategy::Batched, None, false)?;
        aggr_if_addr(&other)?;
        let _ = DOC.set(other.show_config(false, false)?);
    }
    Ok(Report::default())
}

/// `apply` (its configuration file written ahead, while the rings and the
/// kernel change).
fn apply(c: &Core) -> Result<Report, CoreError> {
    c.apply(DOC.get().expect("made by the setup"), false, 0, &none).map(|r| r.result)
}

/// Every verb that goes through the pipeline: its name, the state it
/// starts from, and the verb. Each is set up so it changes rings, the
/// kernel, or both, where it can.
const VERBS: &[(&str, Op, Op)] = &[
    ("create-aggr", nothing, |c| aggr(c, &["i40e0", "i40e1"])),
    (
        "modify-aggr",
        |c| aggr(c, &["i40e0", "i40e1"]),
        |c| c.modify_aggr("aggr0", "L4", "", "", "", false, &none),
    ),
    ("add-aggr", |c| aggr(c, &["i40e0"]), |c| c.add_aggr("aggr0", &s(&["i40e1"]), false, &none)),
    (
        "remove-aggr",
        |c| aggr(c, &["i40e0", "i40e1"]),
        |c| c.remove_aggr("aggr0", &s(&["i40e1"]), false, &none),
    ),
    ("delete-aggr", |c| aggr(c, &["i40e0", "i40e1"]), |c| c.delete_aggr("aggr0", false, &none)),
    ("create-vnic", nothing, vnic),
    ("delete-vnic", vnic, |c| c.delete_vnic("vnic0", false, &none)),
    ("set-linkprop", aggr_if_addr, |c| {
        c.set_link_prop("aggr0", &props(&[("mtu", "9000")]), false, &none)
    }),
    (
        "reset-linkprop",
        |c| {
            aggr_if_addr(c)?;
            c.set_link_prop("aggr0", &props(&[("mtu", "9000")]), false, &none)
        },
        |c| c.reset_link_prop("aggr0", &s(&["mtu"]), false, &none),
    ),
    ("create-if", nothing, |c| c.create_if("i40e0", false, &none)),
    ("delete-if", |c| c.create_if("i40e0", false, &none), |c| c.delete_if("i40e0", false, &none)),
    ("create-addr", aggr_if, |c| c.create_addr("aggr0/v4", "static", "192.0.2.1/24", false, &none)),
    ("delete-addr", aggr_if_addr, |c| c.delete_addr("aggr0/v4", false, &none)),
    ("rename-link", vnic, |c| c.rename_link("vnic0", "vnic1", false, &none)),
    ("apply", apply_doc, apply),
];

/// Every failpoint, with how it is armed (`X` is the mode: `return` or
/// `panic`). Each fires once (one fault; putting things back must not meet
/// it again); the ones between ports and inside a ring batch let the first
/// pass through, so the failure falls after some work was done.
const FAILPOINTS: &[(&str, &str)] = &[
    ("core.validated", "1*X"),
    ("core.execute.port", "1*off->1*X"),
    ("rings.start.batch", "1*off->1*X"),
    ("rings.stop.batch", "1*off->1*X"),
    ("core.kernel.tap", "1*X"),
    ("core.kernel.mtu", "1*X"),
    ("core.kernel.addr", "1*X"),
    ("store.save.written", "1*X"),
    ("store.save.fsynced", "1*X"),
    ("store.save.renamed", "1*X"),
    ("store.journal.written", "1*X"),
];

/// Everything an operator could observe, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    running: String,
    persisted: String,
    /// What a restart would load (links.toml and the journal).
    on_disk: String,
    /// Per port, per ring: state and buffer size.
    rings: Vec<String>,
    /// The namespace's devices: name, MTU, MAC, flags, addresses.
    kernel: Vec<String>,
}

fn kernel_devices() -> Vec<String> {
    let out = std::process::Command::new("ip").args(["-j", "addr", "show"]).output().unwrap();
    assert!(out.status.success(), "ip addr: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut devs: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let mut addrs: Vec<String> = d["addr_info"]
                .as_array()
                .into_iter()
                .flatten()
                // The kernel's own link-local addresses come and go with
                // IPv6 DAD timing: not netadm's.
                .filter(|a| a["scope"] != "link")
                .map(|a| format!("{}/{}", a["local"], a["prefixlen"]))
                .collect();
            addrs.sort();
            let mut flags: Vec<String> = d["flags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .filter(|f| *f != "LOWER_UP" && *f != "NO-CARRIER")
                .map(str::to_owned)
                .collect();
            flags.sort();
            format!("{} mtu {} mac {} {flags:?} {addrs:?}", d["ifname"], d["mtu"], d["address"])
        })
        .collect();
    devs.sort();
    devs
}

fn observe(c: &Core, dir: &Path) -> Observed {
    let rings = c
        .hardware()
        .ports()
        .iter()
        .map(|p| {
            let e = &p.engine;
            let r: Vec<String> = (0..e.ring_count())
                .map(|r| {
                    let i = e.info(r).unwrap();
                    // Freed and never allocated hold the same: nothing.
                    let state = match i.state {
                        netadm_rings::RingState::Freed => netadm_rings::RingState::Unallocated,
                        s => s,
                    };
                    format!("{state:?}/{:?}", i.buf_size)
                })
                .collect();
            format!("{}: {} {r:?}", p.device, p.rings_started())
        })
        .collect();
    Observed {
        running: format!("{:?}", c.running()),
        persisted: format!("{:?}", c.persisted()),
        on_disk: format!("{:?}", Store::open(dir).unwrap().load().unwrap()),
        rings,
        kernel: kernel_devices(),
    }
}

/// Where `now` differs from `before` and from `after`.
fn differences(before: &Observed, now: &Observed, after: &Observed) -> String {
    let parts = |o: &Observed| {
        [
            ("running", o.running.clone()),
            ("persisted", o.persisted.clone()),
            ("on disk", o.on_disk.clone()),
            ("rings", format!("{:?}", o.rings)),
            ("kernel", format!("{:?}", o.kernel)),
        ]
    };
    let (b, n, a) = (parts(before), parts(now), parts(after));
    let mut out = String::new();
    for i in 0..b.len() {
        if n[i].1 != b[i].1 || n[i].1 != a[i].1 {
            out += &format!(
                "  {}: now {}\n    before {}\n    after {}\n",
                n[i].0, n[i].1, b[i].1, a[i].1
            );
        }
    }
    out
}

fn start(dir: &Path, journal: bool) -> Core {
    let hw = common::hw(4);
    let mut store = Store::open(dir).unwrap();
    if journal {
        store = store.journal_from(0);
    }
    Core::start_with(&hw, Some(store), Strategy::Batched, None, true).unwrap()
}

/// The verb's state before and after, without failpoints.
fn reference(verb: usize, journal: bool) -> (Observed, Observed) {
    in_netns(move || {
        let d = tempfile::tempdir().unwrap();
        let c = start(d.path(), journal);
        let (name, setup, op) = VERBS[verb];
        setup(&c).unwrap_or_else(|e| panic!("{name}: setup: {e}"));
        let before = observe(&c, d.path());
        op(&c).unwrap_or_else(|e| panic!("{name}: {e}"));
        (before, observe(&c, d.path()))
    })
}

/// What one case did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The failpoint was not on the verb's way: it succeeded.
    NotHit,
    /// Refused, state as before.
    Before,
    /// Refused (or, for a step past the point of no return, succeeded),
    /// state as after.
    After,
}

fn case(verb: usize, fp: usize, mode: &'static str, want: (Observed, Observed)) -> Outcome {
    let (before, after) = want;
    let (vname, setup, op) = VERBS[verb];
    let (fname, how) = FAILPOINTS[fp];
    in_netns(move || {
        let d = tempfile::tempdir().unwrap();
        let c = start(d.path(), fname.starts_with("store.journal"));
        setup(&c).unwrap();
        assert_eq!(observe(&c, d.path()), before, "{vname}: setup is not deterministic");
        fail::cfg(fname, &how.replace('X', mode)).unwrap();
        let res = op(&c);
        fail::remove(fname);
        let now = observe(&c, d.path());
        let what = format!("{vname} through {fname} ({mode})");
        let out = match &res {
            Ok(_) => Outcome::NotHit,
            Err(e) => {
                let typed = match mode {
                    "panic" => e.kind == ErrorKind::Internal,
                    _ => matches!(
                        e.kind,
                        ErrorKind::Hardware | ErrorKind::Persistence | ErrorKind::Internal
                    ),
                };
                assert!(typed, "{what}: untyped error {:?}: {}", e.kind, e.message);
                if now == before { Outcome::Before } else { Outcome::After }
            }
        };
        match out {
            Outcome::NotHit | Outcome::After => assert!(
                now == after,
                "{what}: {res:?}: neither the state before nor after the verb:\n{}",
                differences(&before, &now, &after)
            ),
            Outcome::Before => {}
        }
        if out == Outcome::Before {
            // It serves on: the same verb, no failpoint, gets there.
            op(&c).unwrap_or_else(|e| panic!("{what}: the retry failed: {e}"));
            assert_eq!(observe(&c, d.path()), after, "{what}: the retry's state");
        }
        // And a restart loads what the disk says is the state now.
        drop(c);
        let c = start(d.path(), false);
        assert_eq!(format!("{:?}", c.running()), after.running, "{what}: after a restart");
        out
    })
}

#[test]
fn every_verb_through_every_failpoint_leaves_the_state_before_or_after() {
    if !root_or_skip("the kernel mirror (TAP devices, network namespaces) needs root") {
        return;
    }
    let _scenario = fail::FailScenario::setup();
    let only = std::env::var("FAILPOINT_VERB").ok();
    let mut hits: BTreeMap<&str, u32> = FAILPOINTS.iter().map(|(f, _)| (*f, 0)).collect();
    let (mut cases, mut before, mut after) = (0, 0, 0);
    let mut failed = vec![];
    for (v, (vname, _, _)) in VERBS.iter().enumerate() {
        if only.as_deref().is_some_and(|o| o != *vname) {
            continue;
        }
        let plain = reference(v, false);
        let journaled = reference(v, true);
        for (f, (fname, _)) in FAILPOINTS.iter().enumerate() {
            for mode in ["return", "panic"] {
                let want = if fname.starts_with("store.journal") { &journaled } else { &plain };
                let want = want.clone();
                cases += 1;
                let res = std::panic::catch_unwind(move || case(v, f, mode, want));
                // Disarmed even when the case failed half way.
                fail::remove(fname);
                let out = match res {
                    Ok(o) => o,
                    Err(p) => {
                        let m = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        failed.push(format!("{vname} / {fname} / {mode}: {m}"));
                        continue;
                    }
                };
                match out {
                    Outcome::NotHit => {}
                    Outcome::Before => before += 1,
                    Outcome::After => after += 1,
                }
                if out != Outcome::NotHit {
                    *hits.get_mut(fname).unwrap() += 1;
                }
            }
        }
    }
    println!(
        "failpoints: {} failpoints x {} verbs x 2 modes = {cases} cases; {} hit the failpoint \
         ({before} left the state before, {after} after); per failpoint: {hits:?}",
        FAILPOINTS.len(),
        VERBS.len(),
        before + after
    );
    assert!(failed.is_empty(), "{} cases of {cases} failed:\n{}", failed.len(), failed.join("\n"));
    if only.is_none() {
        for (f, n) in &hits {
            assert!(*n > 0, "failpoint {f} was on no verb's way");
        }
    }
}

/// Point 6 of issue 12: stop-traffic used to join the generator's thread
/// while holding the traffic table, which show-traffic takes too, so a
/// show waited for a generator to end (on an async worker of the daemon).
/// Here the stop is held inside the generator's stop until show-traffic
/// has answered; with the join back under the lock, show-traffic never
/// answers and the test fails at its deadline.
#[test]
fn show_traffic_answers_while_a_generator_is_being_stopped() {
    use std::sync::mpsc;
    use std::time::Duration;
    let _scenario = fail::FailScenario::setup();
    let c = Core::start(&common::hw(4), None, Strategy::Batched).unwrap();
    c.create_vnic("vnic0", "i40e0", "02:00:00:00:00:01", 0, &props(&[]), true, &none).unwrap();
    c.start_traffic("i40e0", 1000, 64, 1).unwrap();
    let (entered, inside) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let (entered, released) = (std::sync::Mutex::new(entered), std::sync::Mutex::new(released));
    fail::cfg_callback("generator.stop", move || {
        entered.lock().unwrap().send(()).unwrap();
        let _ = released.lock().unwrap().recv();
    })
    .unwrap();
    let c = &c;
    std::thread::scope(|s| {
        let stopper = s.spawn(move || c.stop_traffic("i40e0"));
        inside.recv_timeout(Duration::from_secs(20)).expect("stop-traffic reached the generator");
        let (tx, rx) = mpsc::channel();
        s.spawn(move || tx.send(c.show_traffic()).unwrap());
        let shown = rx.recv_timeout(Duration::from_secs(10));
        release.send(()).unwrap();
        fail::remove("generator.stop");
        let shown = shown.expect("show-traffic waited for a generator being stopped");
        assert_eq!(shown.len(), 1);
        stopper.join().unwrap().expect("stop-traffic");
    });
}

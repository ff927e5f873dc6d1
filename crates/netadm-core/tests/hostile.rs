//! Hostile input from every outside source, generated (proptest, bounded
//! case counts so CI stays fast): the hardware TOML, links.toml and its
//! journal, the arguments of every D-Bus method (through the core's entry
//! points, which the daemon calls with them unchanged), LACPDUs, and every
//! frame the datapath parses from a wire with its offload header. No
//! panic, typed errors, and a refused request changes nothing. (Netlink
//! replies: `netadm-kernel`'s `hostile` unit tests.)

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use netadm_config::{HardwareConfig, Store};
use netadm_core::{Core, ErrorKind};
use netadm_datapath::lacp;
use netadm_nic::Offload;
use netadm_nic::offload;
use netadm_rings::{RingClient, Strategy as Rings};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

mod common;
use common::none;

/// A hardware configuration to mangle.
const HW_TEXT: &str = r#"
[[port]]
name = "i40e0"
class = "i40e"
queue_pairs = 4
wire = { kind = "reflector" }
speed = 40000
[[port]]
name = "atl1c0"
class = "atl1c"
wire = { kind = "sink" }
"#;

/// Cases per target.
const CASES: u32 = 512;

const LINKS: &str = r#"version = 1

[aggr.aggr0]
ports = ["i40e0", "i40e1"]
policy = "L2,L3"

[vnic.vnic0]
over = "aggr0"
mac = "2:8:20:1:2:3"
mac_mode = "fixed"
vid = 7

[interface.aggr0]

[address."aggr0/v4"]
addr = "192.0.2.1/24"
"#;

fn runner() -> TestRunner {
    TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() })
}

/// A valid text cut, spliced, with lines dropped, duplicated or bytes
/// replaced: near misses, which reach deeper than random bytes.
fn mangled(valid: &'static str) -> impl Strategy<Value = String> {
    let lines: Vec<&'static str> = valid.lines().collect();
    let n = lines.len();
    (
        proptest::collection::vec((0..n, 0..4u8, ".{0,12}"), 0..4),
        proptest::collection::vec((0..valid.len(), any::<u8>()), 0..3),
    )
        .prop_map(move |(edits, bytes)| {
            let mut ls: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            for (i, op, junk) in edits {
                let i = i % ls.len().max(1);
                match op {
                    0 if !ls.is_empty() => {
                        ls.remove(i);
                    }
                    1 => ls.insert(i, ls.get(i).cloned().unwrap_or_default()),
                    2 => {
                        if let Some(l) = ls.get_mut(i) {
                            let keep = l.chars().count().saturating_sub(junk.chars().count());
                            *l = l.chars().take(keep).collect::<String>() + &junk;
                        }
                    }
                    _ => ls.insert(i, junk),
                }
            }
            let mut b = ls.join("\n").into_bytes();
            for (at, v) in bytes {
                if !b.is_empty() {
                    let at = at % b.len();
                    b[at] = v;
                }
            }
            String::from_utf8_lossy(&b).into_owned()
        })
}

fn text(valid: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![mangled(valid), ".{0,200}", "[\\[\\]a-z0-9_=\".{}, \n-]{0,300}"]
}

#[test]
fn the_hardware_toml_parser_refuses_hostile_input_with_a_located_error() {
    HardwareConfig::parse(HW_TEXT, Path::new("hw.toml")).expect("the text mangled is valid");
    let ok = Cell::new(0);
    runner()
        .run(&text(HW_TEXT), |t| {
            match HardwareConfig::parse(&t, Path::new("hw.toml")) {
                Ok(_) => ok.set(ok.get() + 1),
                // Every error names the file (and line and column).
                Err(e) => prop_assert!(e.to_string().contains("hw.toml"), "{e}"),
            }
            Ok(())
        })
        .unwrap();
    println!("hostile: hardware TOML: {CASES} inputs, {} accepted", ok.get());
}

#[test]
fn links_toml_and_its_journal_refuse_hostile_input_and_are_left_alone() {
    let ok = Cell::new(0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("links.toml"), LINKS).unwrap();
    Store::open(dir.path()).unwrap().load().expect("the text mangled is valid");
    runner()
        .run(&(text(LINKS), ".{0,120}", any::<bool>()), |(t, j, journal)| {
            let p = dir.path().join("links.toml");
            std::fs::write(&p, &t).unwrap();
            let jp = dir.path().join("links.journal");
            let _ = std::fs::remove_file(&jp);
            if journal {
                // A journal that names this very file, then junk.
                let s = Store::open(dir.path()).unwrap().journal_from(0);
                if let Ok(st) = s.load() {
                    let mut next = st.clone();
                    next.interface.clear();
                    let _ = s.append(&st, &next);
                    let mut b = std::fs::read(&jp).unwrap_or_default();
                    b.extend_from_slice(j.as_bytes());
                    std::fs::write(&jp, b).unwrap();
                }
            }
            let before = (std::fs::read(&p).unwrap(), std::fs::read(&jp).ok());
            match Store::open(dir.path()).unwrap().load() {
                Ok(_) => ok.set(ok.get() + 1),
                Err(e) => {
                    let m = e.to_string();
                    prop_assert!(m.contains("links.toml") || m.contains("links.journal"), "{m}");
                }
            }
            // Loading never rewrites what it read.
            prop_assert_eq!((std::fs::read(&p).unwrap(), std::fs::read(&jp).ok()), before);
            Ok(())
        })
        .unwrap();
    println!("hostile: links.toml (+ journal): {CASES} inputs, {} loaded", ok.get());
}

/// A string an attacker might pass as any D-Bus string argument.
fn arg() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        // Names and values that exist or parse, so calls get past the
        // first check and reach the verbs' own.
        6 => "(aggr0|vnic0|vnic9|i40e0|i40e1|atl1c0|aggr0/v4|vnic0/x|mtu|9000|L2|active|auto|static)",
        1 => "[a-z0-9_./:=,-]{0,24}",
        1 => ".{0,40}",
        1 => "[a-z]{1,3}[0-9]{1,12}",
    ]
}

/// D-Bus methods that take arguments: every mutating one, ShowLinkprop,
/// ShowLinkNamed and ShowVnicNamed.
const METHODS: u8 = 21;

/// Every D-Bus method that takes arguments, by index, with generated ones.
fn call(
    c: &Core,
    verb: u8,
    a: &[String],
    n: u16,
    flag: bool,
) -> Result<(), netadm_core::CoreError> {
    let list: Vec<String> = a[1].split(',').map(str::to_owned).collect();
    let props: BTreeMap<String, String> =
        [(a[2].clone(), a[3].clone()), (a[4].clone(), a[1].clone())].into_iter().collect();
    let p = &none;
    match verb % METHODS {
        0 => c.create_aggr(&a[0], &list, &a[2], &a[3], &a[4], &a[5], flag, p),
        1 => c.modify_aggr(&a[0], &a[2], &a[3], &a[4], &a[5], flag, p),
        2 => c.add_aggr(&a[0], &list, flag, p),
        3 => c.remove_aggr(&a[0], &list, flag, p),
        4 => c.delete_aggr(&a[0], flag, p),
        5 => c.create_vnic(&a[0], &a[1], &a[2], n, &props, flag, p),
        6 => c.delete_vnic(&a[0], flag, p),
        7 => c.set_link_prop(&a[0], &props, flag, p),
        8 => c.reset_link_prop(&a[0], &list, flag, p),
        9 => c.create_if(&a[0], flag, p),
        10 => c.delete_if(&a[0], flag, p),
        11 => c.create_addr(&a[0], &a[1], &a[2], flag, p),
        12 => c.delete_addr(&a[0], flag, p),
        13 => c.rename_link(&a[0], &a[1], flag, p),
        14 => c.set_strategy(&a[0]),
        15 => c.start_traffic(&a[0], u64::from(n), u32::from(n), u32::from(n)),
        16 => c.stop_traffic(&a[0]),
        17 => c.set_carrier(&a[0], flag),
        // Names that are no link (or no VNIC) are left out: never an error.
        19 => {
            let rows = c.show_links_named(&list.into_iter().collect());
            assert!(rows.len() <= a[1].split(',').count());
            return Ok(());
        }
        20 => {
            let rows = c.show_vnics_named(&list.into_iter().collect());
            assert!(rows.len() <= a[1].split(',').count());
            return Ok(());
        }
        _ => return c.show_link_prop(&a[0], &list).map(drop),
    }
    .map(drop)
}

#[test]
fn every_dbus_method_refuses_hostile_arguments_with_a_typed_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("links.toml"), LINKS).unwrap();
    let c = Core::start(&common::hw(4), Some(Store::open(dir.path()).unwrap()), Rings::Batched)
        .unwrap();
    let observe = |c: &Core| {
        let rings: Vec<u32> = c.hardware().ports().iter().map(|p| p.rings_started()).collect();
        (format!("{:?}", c.running()), format!("{:?}", c.persisted()), rings)
    };
    let (ok, refused) = (Cell::new(0), Cell::new(0));
    let kinds: RefCell<BTreeMap<&str, u32>> = RefCell::new(BTreeMap::new());
    runner()
        .run(
            &(any::<u8>(), proptest::collection::vec(arg(), 6), any::<u16>(), any::<bool>()),
            |(verb, a, n, flag)| {
                let before = observe(&c);
                match call(&c, verb, &a, n, flag) {
                    Ok(()) => ok.set(ok.get() + 1),
                    Err(e) => {
                        refused.set(refused.get() + 1);
                        *kinds.borrow_mut().entry(e.kind.as_str()).or_default() += 1;
                        prop_assert!(
                            e.kind != ErrorKind::Internal,
                            "verb {} {a:?}: Internal: {}",
                            verb % METHODS,
                            e.message
                        );
                        prop_assert!(!e.message.is_empty());
                        prop_assert_eq!(observe(&c), before, "refused, but changed: {}", e.message);
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    // Whatever was accepted, the configuration still loads as it runs.
    let loaded = Store::open(dir.path()).unwrap().load().unwrap();
    assert_eq!(format!("{loaded:?}"), format!("{:?}", c.persisted()));
    println!(
        "hostile: D-Bus arguments: {CASES} calls over {METHODS} methods, {} accepted, {} refused \
         ({:?})",
        ok.get(),
        refused.get(),
        kinds.borrow()
    );
}

/// A frame from the wire: random bytes, or a plausible frame (LACP or
/// IPv4/IPv6 TCP/UDP, a test frame) with bytes changed and cut.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let base = prop_oneof![
        Just(
            lacp::encode([2, 0, 0, 0, 0, 1], &lacp::Info::default(), &lacp::Info::default())
                .to_vec()
        ),
        Just(tcp4()),
        Just(tcp6()),
    ];
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        (base, proptest::collection::vec((any::<u16>(), any::<u8>()), 0..6), any::<u16>())
            .prop_map(|(mut f, edits, cut)| {
                for (at, v) in edits {
                    let at = usize::from(at) % f.len();
                    f[at] = v;
                }
                f.truncate(usize::from(cut) % (f.len() + 1));
                f
            }),
    ]
}

/// An IPv4 TCP frame of 1000 payload bytes.
fn tcp4() -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 20 + 1000];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + 20 + 1000) as u16).to_be_bytes());
    f[23] = 6;
    f[46] = 0x50;
    f
}

/// An IPv6 TCP frame of 1000 payload bytes.
fn tcp6() -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 20 + 1000];
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    f[14] = 0x60;
    f[18..20].copy_from_slice(&((20 + 1000) as u16).to_be_bytes());
    f[20] = 6;
    f[66] = 0x50;
    f
}

#[test]
fn frames_and_lacpdus_from_a_wire_never_panic_the_parsers() {
    let streams = Arc::new(netadm_datapath::StreamTable::default());
    let classifier = netadm_datapath::Classifier::new(streams);
    let pdus = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = pdus.clone();
    classifier.set_slow_handler(Some(Arc::new(move |f: &[u8]| {
        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // What the LACP machine does with it: decode, and feed a partner.
        let _ = lacp::decode(f);
    })));
    let sm = RefCell::new(lacp::Port::new(
        [2, 0, 0, 0, 0, 9],
        1,
        1,
        lacp::Mode { active: true, short: true },
        std::time::Instant::now(),
    ));
    let scratch = RefCell::new(Vec::new());
    let (decoded, segmented) = (Cell::new(0), Cell::new(0));
    runner()
        .run(&(frame(), any::<[u8; offload::VNET_HDR_LEN]>()), |(f, hdr)| {
            let off = Offload::from_vnet(&hdr);
            if lacp::decode(&f).is_some() {
                decoded.set(decoded.get() + 1);
            }
            sm.borrow_mut().receive(&f, std::time::Instant::now());
            let _ = netadm_datapath::frame::parse(&f);
            classifier.rx(0, &f, off);
            let _ = offload::header_len(&f);
            let _ = offload::verify_l4(&f);
            let mut g = f.clone();
            let _ = offload::complete_csum(
                &mut g,
                usize::from(off.csum_start),
                usize::from(off.csum_offset),
            );
            let mut total = 0usize;
            if offload::segment_tcp(&f, &off, &mut scratch.borrow_mut(), |s| total += s.len())
                .is_ok()
            {
                segmented.set(segmented.get() + 1);
                // Segments carry no more than the frame's payload plus
                // repeated headers: bounded, whatever the header says.
                prop_assert!(total <= f.len() * 64 + 64 * 1024, "{total} bytes from {}", f.len());
            }
            Ok(())
        })
        .unwrap();
    // Unclaimed frames are counted, not kept.
    assert!(classifier.unclaimed() <= u64::from(CASES));
    println!(
        "hostile: wire frames: {CASES} frames with random offload headers; {} decoded as \
         LACPDUs, {} reached the LACP handler, {} segmented",
        decoded.get(),
        pdus.load(std::sync::atomic::Ordering::Relaxed),
        segmented.get()
    );
}

//! The persistent link configuration store: round trips, positioned parse
//! errors that leave the file alone, and atomic replacement.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use netadm_config::{
    AddrConf, AggrConf, IfConf, JOURNAL_FILE, LINKS_FILE, LinkState, LinkStateError, PhysConf,
    Store, StoreError, VnicConf,
};
use netadm_model::{AggrPolicy, LacpMode, LacpTimer, PropName};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("netadm-config-{}-{name}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    v.sort();
    v
}

fn props(pairs: &[(&str, &str)]) -> netadm_config::LinkProps {
    pairs
        .iter()
        .map(|(k, v)| {
            let n: PropName = k.parse().unwrap();
            (n, n.spec().parse_value(v).unwrap())
        })
        .collect()
}

/// A state with every section and every optional field filled.
fn full_state() -> LinkState {
    let mut s = LinkState::default();
    s.phys.insert(
        "i40e0".parse().unwrap(),
        PhysConf {
            name: Some("net0".parse().unwrap()),
            props: props(&[("mtu", "9000"), ("rxrings", "64")]),
        },
    );
    s.phys
        .insert("i40e1".parse().unwrap(), PhysConf { name: None, props: props(&[("itr", "20")]) });
    s.phys.insert("atl1c2".parse().unwrap(), PhysConf::default());
    s.aggr.insert(
        "aggr0".parse().unwrap(),
        AggrConf {
            ports: vec!["atl1c0".parse().unwrap(), "atl1c1".parse().unwrap()],
            policy: "L2,L3".parse().unwrap(),
            lacp_mode: LacpMode::Active,
            lacp_timer: LacpTimer::Long,
            mac: Some("2:8:20:0:0:1".parse().unwrap()),
            props: props(&[("mtu", "1500")]),
        },
    );
    s.aggr.insert(
        "aggr1".parse().unwrap(),
        AggrConf {
            ports: vec!["atl1c2".parse().unwrap()],
            policy: AggrPolicy::default(),
            lacp_mode: LacpMode::default(),
            lacp_timer: LacpTimer::default(),
            mac: None,
            props: BTreeMap::new(),
        },
    );
    let vnic0 = VnicConf::new(
        "aggr0".parse().unwrap(),
        "2:8:20:12:34:56".parse().unwrap(),
        "random",
        Some("100".parse().unwrap()),
        false,
    );
    s.vnic.insert("vnic0".parse().unwrap(), VnicConf { props: props(&[("mtu", "1400")]), ..vnic0 });
    let vnic1 = VnicConf::new(
        "net0".parse().unwrap(),
        "0:1b:21:0:0:2".parse().unwrap(),
        "factory",
        None,
        false,
    );
    s.vnic.insert("vnic1".parse().unwrap(), vnic1);
    s.interface.insert("net0".parse().unwrap(), IfConf::default());
    s.interface.insert("vnic0".parse().unwrap(), IfConf::default());
    s.address.insert("net0/v4".parse().unwrap(), AddrConf::fixed("192.0.2.1/24"));
    s.address.insert("net0/v6".parse().unwrap(), AddrConf::fixed("2001:db8::1/64"));
    s.address.insert("vnic0/a".parse().unwrap(), AddrConf::fixed("198.51.100.7/32"));
    s
}

/// A store in a new directory named after `name`, with [`full_state`]
/// saved; journaling every change if `journal`.
fn saved(name: &str, journal: bool) -> (TempDir, Store, LinkState) {
    let tmp = TempDir::new(name);
    let mut store = Store::open(&tmp.0).unwrap();
    if journal {
        store = store.journal_from(0);
    }
    let base = full_state();
    store.save(&base).unwrap();
    (tmp, store, base)
}

/// [`saved`], journaling every change.
fn journaled(name: &str) -> (TempDir, Store, LinkState) {
    saved(name, true)
}

/// Writes `text` as links.toml, loads it, and returns the parse error's
/// (line, column, message) after checking the file is untouched.
fn load_error(text: &str) -> (usize, usize, String) {
    let tmp = TempDir::new("bad");
    let store = Store::open(&tmp.0).unwrap();
    fs::write(store.path(), text).unwrap();
    let err = store.load().unwrap_err();
    assert_eq!(fs::read(store.path()).unwrap(), text.as_bytes(), "file modified by a failed load");
    assert_eq!(entries(&tmp.0), [LINKS_FILE]);
    let shown = err.to_string();
    match err {
        StoreError::Parse { path, line, column, message, source_line } => {
            assert_eq!(path, store.path());
            assert_eq!(source_line, text.lines().nth(line - 1).unwrap_or(""));
            let head = format!("{}:{line}:{column}: {message}", store.path().display());
            assert!(shown.starts_with(&head), "{shown}");
            assert!(shown.contains(&source_line), "{shown}");
            (line, column, message)
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn missing_file_is_an_empty_version_1_state() {
    let tmp = TempDir::new("missing");
    let store = Store::open(&tmp.0.join("nested/state")).unwrap();
    assert_eq!(store.path(), tmp.0.join("nested/state").join(LINKS_FILE));
    let state = store.load().unwrap();
    assert_eq!(state, LinkState::default());
    assert_eq!(state.version, 1);
    assert!(!store.path().exists(), "load must not create the file");
    let mode = fs::metadata(store.dir()).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn save_load_round_trip_with_every_section() {
    let tmp = TempDir::new("round");
    let store = Store::open(&tmp.0).unwrap();
    let state = full_state();
    store.save(&state).unwrap();
    assert_eq!(store.load().unwrap(), state);
    let text = fs::read_to_string(store.path()).unwrap();
    assert!(text.starts_with("# netadm persistent link configuration; written by netadmd\n"));
    for needle in [
        "version = 1",
        "[phys.i40e0]",
        "name = \"net0\"",
        "[phys.i40e0.props]",
        "mtu = \"9000\"",
        "[aggr.aggr0]",
        "policy = \"L2,L3\"",
        "lacp_mode = \"active\"",
        "lacp_timer = \"long\"",
        "[vnic.vnic0]",
        "mac_mode = \"random\"",
        "vid = \"100\"",
        "[interface.net0]",
        "[address.\"net0/v4\"]",
        "addr = \"192.0.2.1/24\"",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    // Deterministic: saving the loaded state again writes identical bytes.
    store.save(&store.load().unwrap()).unwrap();
    assert_eq!(fs::read_to_string(store.path()).unwrap(), text);
    assert_eq!(entries(&tmp.0), [LINKS_FILE]);
    assert_eq!(fs::metadata(store.path()).unwrap().mode() & 0o777, 0o600);
}

#[test]
fn empty_sections_are_omitted() {
    let tmp = TempDir::new("empty");
    let store = Store::open(&tmp.0).unwrap();
    store.save(&LinkState::default()).unwrap();
    let text = fs::read_to_string(store.path()).unwrap();
    let body: Vec<&str> = text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert_eq!(body, ["version = 1"]);
    assert_eq!(store.load().unwrap(), LinkState::default());
}

#[test]
fn hand_written_file_with_defaults_and_integer_vid() {
    let text = r#"
version = 1
[aggr.aggr0]
ports = ["atl1c0"]
[vnic.vnic0]
over = "aggr0"
mac = "02:08:20:AA:bb:01"
mac_mode = "fixed"
vid = 42
"#;
    let tmp = TempDir::new("hand");
    let store = Store::open(&tmp.0).unwrap();
    fs::write(store.path(), text).unwrap();
    let s = store.load().unwrap();
    let aggr = &s.aggr["aggr0"];
    assert_eq!(
        (aggr.policy, aggr.lacp_mode, aggr.lacp_timer, aggr.mac),
        (AggrPolicy::default(), LacpMode::Off, LacpTimer::Short, None)
    );
    let vnic = &s.vnic["vnic0"];
    assert_eq!(vnic.vid.unwrap().get(), 42);
    assert_eq!(vnic.mac.to_string(), "2:8:20:aa:bb:1");
}

#[test]
fn unknown_fields_report_their_line() {
    let (line, column, msg) =
        load_error("version = 1\n\n[phys.i40e0]\nname = \"net0\"\nmtu = \"9000\"\n");
    assert_eq!((line, column), (5, 1));
    assert!(msg.contains("unknown field `mtu`"), "{msg}");
    let (line, _, msg) = load_error("version = 1\n[bridge.br0]\n");
    assert_eq!(line, 2);
    assert!(msg.contains("unknown field `bridge`"), "{msg}");
    let (line, _, msg) = load_error("version = 1\n[interface.net0]\nmtu = 1\n");
    assert_eq!(line, 3);
    assert!(msg.contains("unknown field `mtu`"), "{msg}");
    let (line, _, msg) = load_error("version = 1\n[phys.i40e0.props]\ncolour = \"red\"\n");
    assert_eq!(line, 3);
    assert_eq!(msg, r#"unknown link property "colour""#);
}

#[test]
fn bad_values_report_their_line() {
    let vnic = |field: &str, value: &str| {
        let mut text = String::from("version = 1\n[vnic.vnic0]\n");
        for (f, v) in [
            ("over", "\"net0\""),
            ("mac", "\"2:0:0:0:0:1\""),
            ("mac_mode", "\"auto\""),
            ("vid", "\"7\""),
        ] {
            text += &format!("{f} = {}\n", if f == field { value } else { v });
        }
        text
    };
    let cases: [(String, usize, usize, &str); 9] = [
        (
            "version = 1\n[phys.0bad]\n".into(),
            2,
            7,
            r#"link name "0bad": must start with a letter"#,
        ),
        (
            "version = 1\n[phys.i40e0]\nname = \"net\"\n".into(),
            3,
            8,
            r#"link name "net": must end with a digit"#,
        ),
        (vnic("over", "\"net-0\""), 3, 8, r#"link name "net-0": character '-'"#),
        (vnic("mac", "\"2:0:0:0:0\""), 4, 7, "MAC address"),
        (
            vnic("mac_mode", "\"manual\""),
            5,
            12,
            r#"MAC mode "manual": expected one of auto, factory, random, fixed"#,
        ),
        (vnic("vid", "4095"), 6, 7, r#"VLAN ID "4095": must be between 1 and 4094"#),
        (
            "version = 1\n[address.\"net0/v4\"]\naddr = \"192.0.2.1/33\"\n".into(),
            3,
            8,
            r#"address "192.0.2.1/33": prefix length 33 out of range 0..=32"#,
        ),
        ("version = 1\n[address.\"net0\"]\naddr = \"::1/128\"\n".into(), 2, 10, "net0"),
        (
            "version = 1\n[aggr.aggr0]\nports = [\"atl1c0\"]\nlacp_mode = \"on\"\n".into(),
            4,
            13,
            r#"LACP mode "on": expected one of off, active, passive"#,
        ),
    ];
    for (text, want_line, want_column, want_msg) in cases {
        let (line, column, msg) = load_error(&text);
        assert_eq!((line, column), (want_line, want_column), "{text}\n{msg}");
        assert!(msg.contains(want_msg), "{msg:?} lacks {want_msg:?}");
    }
}

#[test]
fn other_versions_are_rejected() {
    let (line, column, msg) = load_error("# future\nversion = 2\n");
    assert_eq!((line, column), (2, 11));
    assert_eq!(msg, "unsupported links.toml version 2: this netadm reads version 1");
    let (_, _, msg) = load_error("[phys.i40e0]\n");
    assert!(msg.contains("missing field `version`"), "{msg}");
    let (line, _, _) = load_error("version = \"1\"\n");
    assert_eq!(line, 1);
}

#[test]
fn corrupt_toml_names_file_and_line_and_leaves_it_alone() {
    let (line, _, _) = load_error("version = 1\n[phys.i40e0]\nname = \"net0\n");
    assert_eq!(line, 3);
    let (line, column, _) = load_error("version = 1\n\n[phys.i40e0\n");
    assert_eq!((line, column), (3, 12));
    let (line, _, msg) = load_error("version = 1\nversion = 1\n");
    assert_eq!(line, 2);
    assert!(msg.contains("duplicate"), "{msg}");

    let tmp = TempDir::new("utf8");
    let store = Store::open(&tmp.0).unwrap();
    let bytes = b"version = 1\n# caf\xe9\n".to_vec();
    fs::write(store.path(), &bytes).unwrap();
    match store.load() {
        Err(StoreError::Parse { line: 2, column: 6, message, .. }) => {
            assert_eq!(message, "file is not valid UTF-8");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fs::read(store.path()).unwrap(), bytes);
}

#[test]
fn save_refuses_invalid_state_and_writes_nothing() {
    let tmp = TempDir::new("refuse");
    let store = Store::open(&tmp.0).unwrap();
    let mut state = full_state();
    state.vnic.get_mut("vnic0").unwrap().mac_mode = "Auto".into();
    match store.save(&state) {
        Err(StoreError::Invalid { error: LinkStateError::MacMode { vnic, .. }, .. }) => {
            assert_eq!(vnic.as_str(), "vnic0");
        }
        other => panic!("{other:?}"),
    }
    let mut state = full_state();
    state.version = 3;
    assert!(matches!(
        store.save(&state),
        Err(StoreError::Invalid { error: LinkStateError::UnsupportedVersion { found: 3 }, .. })
    ));
    let mut state = full_state();
    state.address.get_mut(&"net0/v6".parse().unwrap()).unwrap().addr = "2001:db8::1".into();
    assert!(matches!(
        store.save(&state),
        Err(StoreError::Invalid { error: LinkStateError::Address { .. }, .. })
    ));
    assert!(entries(&tmp.0).is_empty());
}

#[test]
fn save_is_atomic() {
    let tmp = TempDir::new("atomic");
    fs::create_dir_all(&tmp.0).unwrap();
    // Leftovers of a crash mid-save, and an unrelated file that must stay.
    fs::write(tmp.0.join(".links.toml.tmp.123.0"), "version = 1\n[half").unwrap();
    fs::write(tmp.0.join(".links.toml.tmp"), "").unwrap();
    fs::write(tmp.0.join("other.toml"), "keep").unwrap();
    // A pre-existing links.toml much longer than what will replace it.
    let old = format!("version = 1\n{}", "# padding padding padding\n".repeat(500));
    fs::write(tmp.0.join(LINKS_FILE), &old).unwrap();
    let old_inode = fs::metadata(tmp.0.join(LINKS_FILE)).unwrap().ino();

    let store = Store::open(&tmp.0).unwrap();
    assert_eq!(entries(&tmp.0), [LINKS_FILE, "other.toml"], "stale temp files not removed");
    assert_eq!(store.load().unwrap(), LinkState::default());

    let mut state = LinkState::default();
    state.interface.insert("net0".parse().unwrap(), IfConf::default());
    store.save(&state).unwrap();
    assert_eq!(entries(&tmp.0), [LINKS_FILE, "other.toml"], "temp file left behind");
    let text = fs::read_to_string(store.path()).unwrap();
    assert!(!text.contains("padding"), "old contents survived:\n{text}");
    assert_eq!(
        text,
        "# netadm persistent link configuration; written by netadmd\n\nversion = 1\n\n[interface.net0]\n"
    );
    // Replaced by rename, not rewritten in place.
    assert_ne!(fs::metadata(store.path()).unwrap().ino(), old_inode);
    assert_eq!(store.load().unwrap(), state);

    // Many saves leave exactly one file, holding the last state.
    for i in 0..20 {
        let mut s = state.clone();
        s.address.insert("net0/v4".parse().unwrap(), AddrConf::fixed(format!("192.0.2.{i}/24")));
        store.save(&s).unwrap();
        assert_eq!(store.load().unwrap(), s);
    }
    assert_eq!(entries(&tmp.0), [LINKS_FILE, "other.toml"]);
}

/// A change staged ahead (written whole beside links.toml, fsync'd) leaves
/// links.toml as it was until it is committed; dropped, its file is gone;
/// a change that goes to the journal, or none, stages nothing.
#[test]
fn a_staged_change_is_only_the_file_once_committed() {
    let (tmp, store, old) = saved("stage", false);
    let before = fs::read_to_string(store.path()).unwrap();
    let mut new = old.clone();
    new.interface.insert("net9".parse().unwrap(), IfConf::default());

    let staged = store.stage(&old, &new).unwrap().expect("a small file is written whole");
    assert_eq!(entries(&tmp.0).len(), 2, "the staged file beside links.toml");
    assert_eq!(fs::read_to_string(store.path()).unwrap(), before, "links.toml untouched");
    assert_eq!(store.load().unwrap(), old);
    drop(staged);
    assert_eq!(entries(&tmp.0), [LINKS_FILE], "a dropped stage leaves nothing");
    assert_eq!(store.load().unwrap(), old);

    let staged = store.stage(&old, &new).unwrap();
    // Held open, its inode cannot be reused by a file written anew.
    let held = fs::File::open(staged.as_ref().expect("staged").path()).unwrap();
    store.commit(staged, &old, &new).unwrap();
    assert_eq!(entries(&tmp.0), [LINKS_FILE]);
    let ino = held.metadata().unwrap().ino();
    assert_eq!(fs::metadata(store.path()).unwrap().ino(), ino, "the staged file, renamed");
    assert_eq!(store.load().unwrap(), new);
    assert!(store.stage(&new, &new).unwrap().is_none(), "no change, nothing staged");

    let (_j, journal, base) = journaled("stage-journal");
    assert!(journal.stage(&base, &new).unwrap().is_none(), "a journaled change stages nothing");
    journal.commit(None, &base, &new).unwrap();
    assert_eq!(journal.load().unwrap(), new, "committed to the journal");
}

#[test]
fn io_errors_name_the_path() {
    let tmp = TempDir::new("io");
    fs::create_dir_all(&tmp.0).unwrap();
    let file = tmp.0.join("not-a-dir");
    fs::write(&file, "").unwrap();
    match Store::open(&file) {
        Err(e @ StoreError::Io { .. }) => assert!(e.to_string().contains("not-a-dir"), "{e}"),
        other => panic!("{other:?}"),
    }
    // links.toml is a directory: load fails with an I/O error, not "missing".
    let store = Store::open(&tmp.0.join("state")).unwrap();
    fs::create_dir(store.path()).unwrap();
    assert!(matches!(store.load(), Err(StoreError::Io { action: "read", .. })));
}

#[test]
fn appended_changes_replay_and_a_torn_last_record_is_dropped() {
    let (tmp, store, base) = journaled("journal");
    let mut next = base.clone();
    next.vnic.remove("vnic1");
    next.interface.insert("vnic2".parse().unwrap(), IfConf::default());
    let mut v = next.vnic["vnic0"].clone();
    v.props.clear();
    next.vnic.insert("vnic2".parse().unwrap(), v);
    store.append(&base, &next).unwrap();
    assert_eq!(entries(&tmp.0), [JOURNAL_FILE, LINKS_FILE]);
    // A fresh process sees links.toml plus the journal.
    assert_eq!(Store::open(&tmp.0).unwrap().journal_from(0).load().unwrap(), next);
    // A record cut short by a crash was never acknowledged: dropped.
    let whole = fs::read(store.journal_path()).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(b"0123456789abcdef {\"vnic\":[\"vnic9\",nu");
    fs::write(store.journal_path(), &torn).unwrap();
    assert_eq!(Store::open(&tmp.0).unwrap().journal_from(0).load().unwrap(), next);
    // Damage before the last line is an error naming the journal's line.
    let mut bad = whole.clone();
    bad.extend_from_slice(b"0000000000000000 {}\n");
    bad.extend_from_slice(&whole[whole.iter().position(|&b| b == b'\n').unwrap() + 1..]);
    fs::write(store.journal_path(), &bad).unwrap();
    match Store::open(&tmp.0).unwrap().journal_from(0).load() {
        Err(StoreError::Parse { path, line, .. }) => {
            assert_eq!(path, store.journal_path());
            assert_eq!(line, 2 + whole.iter().filter(|&&b| b == b'\n').count() - 1);
        }
        other => panic!("{other:?}"),
    }
    fs::write(store.journal_path(), &whole).unwrap();
    // Writing the whole state folds the journal in and removes it.
    let s = Store::open(&tmp.0).unwrap().journal_from(0);
    let loaded = s.load().unwrap();
    s.save(&loaded).unwrap();
    assert_eq!(entries(&tmp.0), [LINKS_FILE]);
    assert_eq!(s.load().unwrap(), next);
}

#[test]
fn a_change_cut_short_replays_none_of_its_entries_and_older_journals_still_load() {
    let (tmp, store, base) = journaled("whole");
    // Two entries: an interface added, a VNIC removed.
    let mut next = base.clone();
    next.interface.insert("vnic9".parse().unwrap(), IfConf::default());
    next.vnic.remove("vnic1");
    store.append(&base, &next).unwrap();
    let whole = fs::read(store.journal_path()).unwrap();
    let lines: Vec<&[u8]> = whole.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 2, "the header and one record for the change");
    let load = || Store::open(&tmp.0).unwrap().journal_from(0).load().unwrap();
    assert_eq!(load(), next);
    // A crash while the record was written, both entries in it but not
    // its end: the change was never acknowledged, and none of it is there.
    fs::write(store.journal_path(), &whole[..whole.len() - 2]).unwrap();
    assert_eq!(load(), base, "part of a change replayed");
    // The same change as earlier versions journaled it, an entry a line.
    let fnv = |b: &[u8]| {
        b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
            (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
        })
    };
    let mut older = lines[0].to_vec();
    let changes = netadm_config::diff(&base, &next);
    assert_eq!(changes.len(), 2, "{changes:?}");
    for e in &changes {
        let json = serde_json::to_string(e).unwrap();
        older.extend_from_slice(format!("{:016x} {json}\n", fnv(json.as_bytes())).as_bytes());
    }
    fs::write(store.journal_path(), &older).unwrap();
    assert_eq!(load(), next, "a journal of one entry a line");
}

#[test]
fn a_journal_naming_another_links_toml_is_ignored() {
    let (tmp, store, base) = journaled("stale");
    let mut next = base.clone();
    next.vnic.remove("vnic1");
    store.append(&base, &next).unwrap();
    let journal = fs::read(store.journal_path()).unwrap();
    // Compacted, then a crash before the journal was removed.
    store.save(&next).unwrap();
    fs::write(store.journal_path(), &journal).unwrap();
    let mut later = next.clone();
    later.vnic.insert("vnic1".parse().unwrap(), base.vnic["vnic1"].clone());
    later.interface.insert("vnic1".parse().unwrap(), IfConf::default());
    store.save(&later).unwrap();
    fs::write(store.journal_path(), &journal).unwrap();
    assert_eq!(
        Store::open(&tmp.0).unwrap().journal_from(0).load().unwrap(),
        later,
        "old journal re-applied"
    );
}

#[test]
fn append_refuses_an_entry_that_would_not_load() {
    let (tmp, store, base) = journaled("append-refuse");
    let mut next = base.clone();
    next.vnic.get_mut("vnic0").unwrap().mac_mode = "Auto".into();
    assert!(matches!(
        store.append(&base, &next),
        Err(StoreError::Invalid { error: LinkStateError::MacMode { .. }, .. })
    ));
    assert_eq!(entries(&tmp.0), [LINKS_FILE]);
    assert_eq!(store.load().unwrap(), base);
}

#[test]
fn diff_names_each_changed_entry_and_applying_it_gives_the_new_state() {
    let old = full_state();
    let mut new = old.clone();
    let moved = new.vnic.remove("vnic0").unwrap();
    new.vnic.insert("vnic5".parse().unwrap(), moved);
    new.aggr.get_mut("aggr1").unwrap().ports.push("atl1c3".parse().unwrap());
    new.phys.remove("atl1c2");
    let changes = netadm_config::diff(&old, &new);
    assert_eq!(changes.len(), 4, "{changes:?}");
    let mut replayed = old.clone();
    for e in changes {
        e.apply(&mut replayed);
    }
    assert_eq!(replayed, new);
    assert!(netadm_config::diff(&new, &new).is_empty());
}

/// A links.toml written by the release before link properties were stored
/// typed (commit 636fb1c, every section and every kind of property
/// value) still loads, its values typed, and is written back as it was.
/// The one difference: create-vnic kept a property's value as the operator
/// typed it (`maxbw = "100M"`), set-linkprop as normalised (`"100"`); both
/// now write the normalised form, which show-linkprop shows.
#[test]
fn a_links_toml_from_the_release_before_typed_properties_loads_and_is_written_back_as_it_was() {
    use netadm_model::PropValue;
    let old = include_str!("fixtures/links-636fb1c.toml");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("links.toml"), old).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let st = store.load().unwrap();
    let vnic0 = &st.vnic[&"vnic0".parse::<netadm_model::LinkName>().unwrap()];
    assert_eq!(vnic0.props[&PropName::Maxbw], PropValue::Bandwidth(100_000_000));
    assert_eq!(vnic0.props[&PropName::Mtu], PropValue::Uint(1400));
    let atl1c0 = &st.phys[&"atl1c0".parse::<netadm_model::LinkName>().unwrap()];
    assert_eq!(atl1c0.props[&PropName::RxImt], PropValue::Adaptive);
    assert_eq!(atl1c0.props[&PropName::XmitBatch], PropValue::Bool(false));
    store.save(&st).unwrap();
    let written = std::fs::read_to_string(dir.path().join("links.toml")).unwrap();
    assert_eq!(written, old.replace("maxbw = \"100M\"", "maxbw = \"100\""));
}

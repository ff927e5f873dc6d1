//! The process-abort mode of the failpoint test: a real netadmd whose
//! `FAILPOINTS` variable aborts it at one step of a save (after the
//! temporary file is written, after its fsync, after the rename; or after
//! a journal record is written, before its fsync), driven through every
//! mutating verb. The daemon must die there; restarted, it must show the
//! state before the verb or after it (a run without the failpoint), never
//! a mix. (The error and panic modes, with rings and kernel devices
//! compared too, are `crates/netadm-core/tests/failpoints.rs`.)
//!
//! Built only with `--features failpoints`, against binaries built with
//! `--features netadmd/failpoints` (.ci/run builds both).

use std::path::Path;
use std::time::Duration;

use netadm_testkit::*;

const AGGR: &[&str] = &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"];
const IF: &[&str] = &["create-if", "aggr0"];
const ADDR: &[&str] = &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"];
const VNIC: &[&str] = &["create-vnic", "-l", "i40e0", "-m", "02:00:00:00:00:01", "vnic0"];
const MTU: &[&str] = &["set-linkprop", "-p", "mtu=9000", "aggr0"];

/// Every mutating verb: its name, the commands that set up the state it
/// starts from, and its command.
/// A command line.
type Cmd = &'static [&'static str];

const VERBS: &[(&str, &[Cmd], Cmd)] = &[
    ("create-aggr", &[], AGGR),
    ("modify-aggr", &[AGGR], &["modify-aggr", "-P", "L2", "aggr0"]),
    (
        "add-aggr",
        &[&["create-aggr", "-l", "i40e0", "aggr0"]],
        &["add-aggr", "-l", "i40e1", "aggr0"],
    ),
    ("remove-aggr", &[AGGR], &["remove-aggr", "-l", "i40e1", "aggr0"]),
    ("delete-aggr", &[AGGR], &["delete-aggr", "aggr0"]),
    ("create-vnic", &[], VNIC),
    ("delete-vnic", &[VNIC], &["delete-vnic", "vnic0"]),
    ("set-linkprop", &[AGGR, IF, ADDR], MTU),
    ("reset-linkprop", &[AGGR, IF, ADDR, MTU], &["reset-linkprop", "-p", "mtu", "aggr0"]),
    ("create-if", &[], &["create-if", "i40e0"]),
    ("delete-if", &[&["create-if", "i40e0"]], &["delete-if", "i40e0"]),
    ("create-addr", &[AGGR, IF], ADDR),
    ("delete-addr", &[AGGR, IF, ADDR], &["delete-addr", "aggr0/v4"]),
    ("rename-link", &[VNIC], &["rename-link", "vnic0", "vnic1"]),
];

/// The steps of a save a crash can fall between, and whether they are on
/// the journal's way (links.toml past 64 KiB) or the whole file's.
const STEPS: &[(&str, bool)] = &[
    ("store.save.written", false),
    ("store.save.fsynced", false),
    ("store.save.renamed", false),
    ("store.journal.written", true),
];

/// links.toml past the journal threshold: VNICs on atl1c0, which no verb
/// here touches.
fn big_config() -> String {
    let mut t = String::from("version = 1\n");
    for i in 0..1200 {
        t += &format!(
            "\n[vnic.pad{i}]\nover = \"atl1c0\"\nmac = \"2:8:21:0:{:x}:{:x}\"\nmac_mode = \"fixed\"\n",
            i / 256,
            i % 256
        );
    }
    t
}

/// What an operator sees through every show verb.
fn state(bus: &Bus) -> String {
    ["show-link", "show-aggr", "show-vnic", "show-if", "show-addr", "show-phys"]
        .iter()
        .map(|v| json(bus, &[v]).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fresh state directory (big or not) with the verb's setup done; the
/// daemon serving it.
fn set_up(bus: &Bus, dir: &Path, big: bool, setup: &[&[&str]], env: &[(&str, &str)]) -> Daemon {
    std::fs::create_dir_all(dir).unwrap();
    if big {
        let text = big_config();
        assert!(
            text.len() as u64 > 64 * 1024,
            "{} bytes: not past the journal threshold",
            text.len()
        );
        std::fs::write(dir.join("links.toml"), text).unwrap();
    }
    let d = Daemon::start(bus, dir, &[]);
    for cmd in setup {
        json(bus, cmd);
    }
    if env.is_empty() {
        return d;
    }
    // Armed only for the verb: a clean stop, and a start with them.
    assert!(d.stop().success());
    Daemon::start_env(bus, dir, &[], env)
}

#[test]
fn a_crash_at_every_step_of_a_save_leaves_the_state_before_or_after_every_verb() {
    let bus = Bus::start();
    let (mut cases, mut before_n, mut after_n) = (0, 0, 0);
    for (vname, setup, cmd) in VERBS {
        for big in [false, true] {
            // Before and after, without failpoints.
            let dir = bus.subdir(&format!("ref-{vname}-{big}"));
            let d = set_up(&bus, &dir, big, setup, &[]);
            let before = state(&bus);
            json(&bus, cmd);
            let after = state(&bus);
            d.stop();

            for (step, journal) in STEPS.iter().filter(|(_, j)| *j == big) {
                let what = format!("{vname} crashing at {step}");
                let dir = bus.subdir(&format!("{vname}-{step}"));
                let fp = format!("{step}=return(abort)");
                let mut d = set_up(&bus, &dir, *journal, setup, &[("FAILPOINTS", &fp)]);
                assert_eq!(state(&bus), before, "{what}: setup is not deterministic");
                let out = netadm(&bus, cmd);
                assert!(
                    !out.status.success(),
                    "{what}: the verb succeeded (a verb that changes nothing saves nothing)"
                );
                let status = d.wait_exit(Duration::from_secs(20));
                assert!(
                    status.is_some_and(|s| !s.success()),
                    "{what}: netadmd did not die ({status:?}); was it built with \
                     --features netadmd/failpoints?"
                );
                let d = Daemon::start(&bus, &dir, &[]);
                let now = state(&bus);
                cases += 1;
                if now == before {
                    before_n += 1;
                } else {
                    assert_eq!(now, after, "{what}: after a restart, neither before nor after");
                    after_n += 1;
                }
                d.stop();
            }
        }
    }
    println!(
        "failpoints (abort): {} steps x {} verbs = {cases} crashes; after a restart {before_n} \
         showed the state before the verb, {after_n} after",
        STEPS.len(),
        VERBS.len()
    );
    assert_eq!(cases, STEPS.len() * VERBS.len());
}

/// Issue 12, point 6: reads run on the blocking pool, never on the async
/// workers (two of them). With a failpoint holding every read until the
/// test releases it (a named pipe), eight concurrent show-link calls are
/// all inside their reads at once — on the async workers at most two
/// could be, and no third would enter before the release — and the
/// daemon still answers a property read meanwhile.
#[test]
fn shows_held_in_their_reads_all_run_at_once_and_the_daemon_still_answers() {
    const SHOWS: usize = 8;
    let bus = Bus::start();
    let dir = bus.subdir("reads");
    let fifo = dir.join("release");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let hold = format!("daemon.read=return({})", fifo.display());
    let d = Daemon::start_env(&bus, &dir, &[], &[("FAILPOINTS", &hold)]);
    let mut shows: Vec<std::process::Child> = (0..SHOWS)
        .map(|_| {
            Cli::new(&bus)
                .command(&["show-link"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Every show inside its read: an event the daemon prints. Had reads
    // run on the async workers, the third could not enter before the
    // release, which comes only after this.
    let mut held = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while held < SHOWS {
        held += d.stderr_so_far().iter().filter(|l| l.contains("failpoint daemon.read")).count();
        assert!(
            std::time::Instant::now() < deadline,
            "only {held} of {SHOWS} show-link calls entered their read: reads are not running \
             beside each other"
        );
        std::thread::yield_now();
    }
    let version = std::process::Command::new("busctl")
        .arg(format!("--address={}", bus.address()))
        .args(["get-property", "org.netadm.Netadm1", "/org/netadm/Netadm1"])
        .args(["org.netadm.Netadm1", "Version"])
        .output()
        .unwrap();
    assert!(version.status.success(), "{}", String::from_utf8_lossy(&version.stderr));
    let done: Vec<_> = shows.iter_mut().filter_map(|c| c.try_wait().unwrap()).collect();
    assert!(done.is_empty(), "a held show-link finished before the release: {done:?}");
    // Release: a writer opening and closing the pipe gives every read that
    // has it open EOF. A read that printed but has not opened it yet is
    // released by a later round, until every show has answered.
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut left = shows;
    while !left.is_empty() {
        // Non-blocking: with no reader at the other end this fails; fine.
        let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
        left.retain_mut(|c| match c.try_wait().unwrap() {
            Some(st) => {
                assert!(st.success(), "every held show-link answers in the end");
                false
            }
            None => true,
        });
        assert!(
            std::time::Instant::now() < deadline,
            "{} show-link calls never answered",
            left.len()
        );
        std::thread::yield_now();
    }
}

/// A protected kernel VNIC's host end (the guard end of one over a
/// kernel port, the bridge end of one over a kernel etherstub) stays down
/// until its rules stand: held at the step before they are made, each
/// create-vnic has made the VNIC's end up in its zone and the host end
/// down, so nothing it sends goes anywhere; released, the verb ends with
/// the host end up and the rules hooked on it. (Up at make, as before,
/// a tenant's forged frames passed until the rules came.)
#[test]
fn a_protected_kernel_vnics_host_end_stays_down_until_its_rules_stand() {
    if !netns_prerequisites(&["nft"]) {
        return;
    }
    sweep_stale("fh");
    let [a, b, z] = ["a", "b", "z"].map(|s| Netns::unique("fh", s).unwrap());
    veth((a.name(), "nic0"), (b.name(), "far0")).unwrap();
    let bus = Bus::start();
    let dir = bus.subdir("held");
    let hw = dir.join("hw.toml");
    fixtures::kernel(&["nic0"]).write(&hw).unwrap();
    let fifo = dir.join("release");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let hold = format!("core.kernel.protect=return({})", fifo.display());
    let d = Daemon::builder(&bus, dir.join("state"))
        .netns(a.name())
        .config(&hw)
        .env("FAILPOINTS", &hold)
        .start();
    let holds =
        || d.stderr_so_far().iter().filter(|l| l.contains("failpoint core.kernel.protect")).count();
    // Runs `args`, which comes to the held step once: `look` there, then
    // released, it must succeed.
    let held = |args: &[&str], look: &dyn Fn()| {
        let before = holds();
        let mut verb = Cli::new(&bus)
            .command(&[&["--json"], args].concat())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while holds() == before {
            if let Some(st) = verb.try_wait().unwrap() {
                panic!("{args:?} ended ({st}) without coming to the held step");
            }
            assert!(std::time::Instant::now() < deadline, "{args:?} never came to the held step");
            std::thread::yield_now();
        }
        look();
        // Released by a writer opening and closing the pipe (the reader
        // may not have opened it yet: again until the verb ends).
        use std::os::unix::fs::OpenOptionsExt;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let st = loop {
            let _ =
                std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
            if let Some(st) = verb.try_wait().unwrap() {
                break st;
            }
            assert!(std::time::Instant::now() < deadline, "{args:?} never ended once released");
            std::thread::yield_now();
        };
        let out = verb.wait_with_output().unwrap();
        assert!(st.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    // Whether device `dev` of namespace `ns` is up (administratively).
    let up = |ns: &str, dev: &str| {
        let line = ip(ns, &["-o", "link", "show", "dev", dev]);
        let flags = line.split('<').nth(1).and_then(|f| f.split('>').next()).unwrap_or("");
        flags.split(',').any(|f| f == "UP")
    };
    let end = |prefix: &str| {
        let links = ip(a.name(), &["-o", "link", "show"]);
        let e = links.split(": ").find(|d| d.starts_with(prefix));
        e.unwrap_or_else(|| panic!("no {prefix}... device in {links}"))
            .split('@')
            .next()
            .unwrap()
            .to_owned()
    };
    let protect = format!("zone={},protection=mac-nospoof,ip-nospoof", z.name());
    held(&["create-etherstub", "stub0"], &|| {});
    for (over, vnic, prefix) in [("net0", "pv0", "npg"), ("stub0", "sv0", "nsw")] {
        held(&["create-vnic", "-l", over, "-p", &protect, vnic], &|| {
            assert!(up(z.name(), vnic), "{vnic} is not up in its zone while held");
            let host = end(prefix);
            assert!(!up(a.name(), &host), "{vnic}'s host end {host} is up before its rules");
        });
        let host = end(prefix);
        assert!(up(a.name(), &host), "{vnic}'s host end {host} is not up after the verb");
        let rules =
            run(&["ip", "netns", "exec", a.name(), "nft", "list", "table", "netdev", "netadm"]);
        let rules = rules.unwrap();
        assert!(rules.contains(&format!("device \"{host}\"")), "no rules on {host}:\n{rules}");
    }
}

//! The harness itself, without netadm: a bus starts with either policy,
//! a daemon stand-in (a script that says it serves) is started, awaited,
//! stopped, restarted and killed, lines are awaited with deadlines, and
//! namespaces are made, entered, wired and removed (also on panic).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use netadm_testkit::*;

/// A `netadmd` stand-in: says it serves on the bus it was given (with
/// the arguments it got), then waits for a signal.
fn stand_in(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("fake-netadmd");
    std::fs::write(&p, format!("#!/bin/sh\necho \"{SERVING} $*\" >&2\nexec sleep infinity\n"))
        .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn a_bus_starts_with_either_policy_and_goes_with_its_directory() {
    if !prerequisites(None, &[("dbus-daemon", "dbus-daemon")]) {
        return;
    }
    let bus = Bus::start();
    assert!(bus.address().starts_with("unix:path="), "{}", bus.address());
    let dir = bus.dir().to_path_buf();
    assert!(dir.join("bus").exists(), "no socket in {}", dir.display());
    assert!(bus.subdir("x/y").is_dir());
    drop(bus);
    assert!(!dir.exists(), "the bus's directory is left");
    let policy = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(policy.path(), "<busconfig/>\n").unwrap();
    let bus = Bus::start_system_like(policy.path());
    let conf = std::fs::read_to_string(bus.dir().join("bus.conf")).unwrap();
    assert!(conf.contains("<deny own=\"*\"/>"), "{conf}");
    assert!(conf.contains(&format!("<include>{}</include>", policy.path().display())), "{conf}");
}

#[test]
fn a_daemon_is_awaited_stopped_restarted_and_killed() {
    if !prerequisites(None, &[("dbus-daemon", "dbus-daemon")]) {
        return;
    }
    let bus = Bus::start();
    let state = bus.subdir("state");
    let b = Daemon::builder(&bus, &state)
        .program(stand_in(bus.dir()))
        .hardware(&fixtures::two_i40e_reflectors(4))
        .arg("--strategy")
        .arg("legacy");
    let d = b.start();
    let said = d.startup.last().unwrap();
    assert!(said.contains(&format!("--bus {}", bus.address())), "{said}");
    assert!(said.contains("--kernel-mirror off") && said.contains("--strategy legacy"), "{said}");
    let hw = bus.dir().join("state.hw.toml");
    assert!(said.contains(&format!("--config {}", hw.display())), "{said}");
    assert!(std::fs::read_to_string(&hw).unwrap().contains("name = \"i40e1\""));
    assert_eq!(d.state_dir, state);
    let pid = d.pid();
    // SIGTERM ends the stand-in by the signal: not a clean exit.
    let mut d = b.start();
    assert_ne!(d.pid(), pid);
    assert_eq!(d.wait_exit(Duration::from_millis(50)), None, "it runs until told");
    let st = d.stop();
    assert!(!st.success(), "{st:?}");
    // A clean exit on SIGTERM restarts (one process: nothing outlives a
    // kill -9 of it).
    let clean = bus.dir().join("clean-netadmd");
    let script = format!(
        "#!/usr/bin/env python3\nimport signal, sys\n\
         signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n\
         print('{SERVING}', file=sys.stderr, flush=True)\nwhile True: signal.pause()\n"
    );
    std::fs::write(&clean, script).unwrap();
    std::fs::set_permissions(&clean, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = b.clone().program(&clean).start();
    let before = d.pid();
    let d = d.restart();
    assert_ne!(d.pid(), before, "restarted");
    d.kill9();
    // One that never says it serves: an error naming it, within the deadline.
    let mute = Daemon::builder(&bus, &state).program("true").ready_within(Duration::from_secs(5));
    assert!(matches!(mute.try_start(), Err(Error::Exited { .. })));
    assert!(Daemon::builder(&bus, &state).program("false").start_fails().is_empty());
}

#[test]
fn lines_are_awaited_with_a_deadline() {
    let mut c = command("sh")
        .args(["-c", "echo one; echo two; exec cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = Lines::read(c.stdout.take().unwrap());
    let seen = out.await_line("sh", Duration::from_secs(20), |l| l == "two").unwrap();
    assert_eq!(seen, ["one", "two"]);
    let e = out.await_line("sh", Duration::from_millis(50), |_| true).unwrap_err();
    assert!(matches!(e, Error::NotReady { .. }), "{e}");
    let _c = Reaped(c);
    drop(_c);
    assert!(out.await_end(Duration::from_secs(20)), "the stream ends with the process");
    assert!(matches!(run(&["false"]), Err(Error::Failed { .. })));
    assert!(matches!(run(&["/no/such/program"]), Err(Error::Spawn { .. })));
    assert_eq!(run(&["echo", "x"]).unwrap(), "x\n");
}

#[test]
fn namespaces_are_made_wired_entered_and_removed_also_on_panic() {
    if !prerequisites(Some("to make network namespaces"), &[("ip", "iproute2")]) {
        return;
    }
    let (a, b) = (Netns::unique("tka", "").unwrap(), Netns::unique("tkb", "x").unwrap());
    assert_eq!(b.name(), format!("tkb{}x", std::process::id()));
    veth((a.name(), "ta0"), (b.name(), "tb0")).unwrap();
    assert!(a.ip(&["-o", "link", "show", "ta0"]).unwrap().contains("UP"));
    assert!(b.exec(&["cat", "/sys/class/net/tb0/ifindex"]).is_ok(), "ip netns exec sees tb0");
    // A closure inside sees the namespace's devices, not the host's; a
    // socket opened there stays there.
    let sock = b.enter(|| raw::Raw::bind("tb0"));
    assert!(sock.is_ok(), "tb0 not seen inside {b}: {sock:?}");
    assert!(raw::Raw::bind("tb0").is_err(), "tb0 seen outside {b}");
    assert!(run(&["ip", "link", "show", "tb0"]).is_err(), "tb0 is in the host's namespace");
    let names = [a.name().to_owned(), b.name().to_owned()];
    let r = std::panic::catch_unwind(move || {
        let _keep = (a, b);
        panic!("a test failing");
    });
    assert!(r.is_err());
    let list = run(&["ip", "netns", "list"]).unwrap();
    for n in names {
        assert!(!list.lines().any(|l| l.split_whitespace().next() == Some(&n)), "{n}: {list}");
    }
    // A stale one (a pid that cannot run) is swept; a live one is not.
    let live = Netns::unique("tks", "").unwrap();
    run(&["ip", "netns", "add", "tks4999999"]).unwrap();
    let swept = sweep_stale("tks");
    assert_eq!(swept, [("tks4999999".to_owned(), "4999999".to_owned())]);
    assert!(run(&["ip", "netns", "list"]).unwrap().contains(live.name()));
}

#[test]
fn a_programs_dynamic_loader_is_read_from_its_elf_headers() {
    // /bin/sh is a dynamic program; Debian's ldconfig is static-pie.
    let sh = interpreter(Path::new("/bin/sh")).unwrap();
    assert!(sh.as_deref().is_some_and(|l| l.contains("ld-linux")), "{sh:?}");
    if Path::new("/sbin/ldconfig").exists() {
        assert_eq!(interpreter(Path::new("/sbin/ldconfig")).unwrap(), None);
    }
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text");
    std::fs::write(&text, "#!/bin/sh\n").unwrap();
    assert!(interpreter(&text).is_err(), "a script is no ELF program");
}

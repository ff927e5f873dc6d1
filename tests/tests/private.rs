//! netadmd's private socket: org.netadm.Netadm1 peer to peer, with no bus
//! between, root's alone; the bus beside it serves the same daemon.
//!
//! The proof that a call went over the socket and not the bus is that it
//! is answered while no bus daemon runs at all.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use netadm_testkit::*;
use serde_json::Value;

const NOBODY: u32 = 65534;

fn prerequisites() -> bool {
    netadm_testkit::prerequisites(
        Some("to switch to an unprivileged uid"),
        &[("setpriv", "util-linux"), ("busctl", "systemd")],
    )
}

/// `netadm --json ARGS` through `cli`, which must succeed.
fn ok(cli: &Cli, args: &[&str]) -> Value {
    cli.json_timed(args).unwrap_or_else(|e| panic!("{e}")).0
}

/// `netadm --json ARGS` as uid `NOBODY` (no groups), the private socket
/// `socket` tried first.
fn as_nobody(bus: &str, socket: &std::path::Path, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}"), "--clear-groups"])
        .arg(bin("netadm"))
        .env("NETADM_BUS", bus)
        .env("NETADM_PRIVATE", socket)
        .arg("--json")
        .args(args)
        .output()
        .unwrap()
}

/// A bus, and a netadmd on it serving the private socket `DIR/private`,
/// in a scratch directory DIR named after `name`.
fn served(name: &str) -> (Scratch, std::path::PathBuf, Bus, Daemon) {
    let dir = Scratch::new(name).unwrap();
    let socket = dir.path().join("private");
    let bus = Bus::start();
    let daemon = Daemon::builder(&bus, dir.path().join("state")).private_socket(&socket).start();
    (dir, socket, bus, daemon)
}

fn vnics(cli: &Cli) -> Vec<String> {
    ok(cli, &["show-vnic"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["link"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn root_changes_the_network_over_the_private_socket_with_no_bus_running() {
    if !prerequisites() {
        return;
    }
    let (_dir, socket, bus, daemon) = served("netadm-private");
    let address = bus.address().to_owned();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket is its owner's alone");
    let on_bus = Cli::new(&bus);
    let private = Cli::new(&bus).private(&socket);

    // A change over the socket is the daemon's: the bus's clients see it,
    // link objects included.
    let r = ok(&private, &["create-vnic", "-l", "i40e0", "vnic0"]);
    assert_eq!(r["op"], "create-vnic");
    assert_eq!(vnics(&on_bus), ["vnic0"]);
    let tree = Command::new("busctl")
        .arg(format!("--address={address}"))
        .args(["tree", "--list", "org.netadm.Netadm1"])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&tree.stdout).into_owned();
    assert!(tree.contains("/org/netadm/Netadm1/links/vnic0"), "{tree}");

    // No bus at all: the bus's clients cannot reach netadmd, the socket's
    // still change and read everything.
    drop(bus);
    let out = on_bus.output(&["--json", "show-vnic"]).unwrap();
    assert!(!out.status.success(), "reached netadmd with no bus");
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "Bus", "{err}");
    ok(&private, &["create-vnic", "-l", "i40e1", "vnic1"]);
    ok(&private, &["set-linkprop", "-p", "mtu=9000", "i40e1"]);
    assert_eq!(vnics(&private), ["vnic0", "vnic1"]);
    ok(&private, &["delete-vnic", "vnic0"]);
    // Bad input is refused as on the bus, with its kind, changing nothing.
    let out = private.output(&["--json", "create-vnic", "-l", "i40e9", "vnic2"]).unwrap();
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "NotFound", "{err}");
    assert_eq!(vnics(&private), ["vnic1"]);
    let config = private.run(&["show-config"]).unwrap();
    assert!(config.contains("vnic1") && !config.contains("vnic0"), "persisted: {config}");

    // A caller who may open the socket but not change the network (here
    // made possible by opening the socket to everyone) is told why by the
    // daemon, from the socket's own credentials; reading is anyone's.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = as_nobody(&address, &socket, &["show-vnic"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = as_nobody(&address, &socket, &["delete-vnic", "vnic1"]);
    assert!(!out.status.success(), "uid {NOBODY} changed the network");
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "AccessDenied", "{err}");
    let m = err["error"]["message"].as_str().unwrap();
    assert!(m.contains(&format!("uid {NOBODY} may not change the network")), "{m}");
    assert_eq!(vnics(&private), ["vnic1"]);

    // Stopping netadmd takes its socket away.
    daemon.stop();
    assert!(!socket.exists(), "the socket outlived netadmd");
}

#[test]
fn a_user_who_may_not_open_the_socket_takes_the_bus() {
    if !prerequisites() {
        return;
    }
    let (dir, socket, bus, _daemon) = served("netadm-private-bus");
    // uid NOBODY cannot open the 0600 socket: the bus answers (its policy
    // here allows all, and the daemon refuses the change), as it would
    // with no socket.
    let out = as_nobody(bus.address(), &socket, &["show-link"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = as_nobody(bus.address(), &socket, &["create-vnic", "-l", "i40e0", "vnic0"]);
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "AccessDenied", "{err}");
    // A socket path with nothing behind it: the bus, silently.
    let none = dir.path().join("none");
    let r = Cli::new(&bus).private(&none).json_timed(&["create-vnic", "-l", "i40e0", "vnic0"]);
    assert_eq!(r.unwrap().0["op"], "create-vnic");
}

#[test]
fn a_second_netadmd_on_the_same_state_directory_stops_before_touching_it() {
    let dir = Scratch::new("netadm-state-two").unwrap();
    let state = dir.path().join("state");
    let bus = Bus::start();
    let _first = Daemon::builder(&bus, state.clone()).start();
    // A save the first has staged and not yet renamed, as a change leaves
    // one while it runs: what a store opened again would remove.
    let staged = state.join(".links.toml.tmp.first");
    std::fs::write(&staged, "staged").unwrap();
    let other = Bus::start();
    let said = match Daemon::builder(&other, state.clone()).try_start() {
        Ok(_) => panic!("a second netadmd serves from the first one's state directory"),
        Err(e) => e.to_string(),
    };
    assert!(said.contains("in use by another netadmd"), "{said}");
    assert!(staged.exists(), "the second netadmd removed the first one's staged save");
    let r = Cli::new(&bus).json_timed(&["show-link"]);
    assert!(r.is_ok(), "the first netadmd still answers: {r:?}");
}

#[test]
fn a_second_netadmd_on_the_bus_leaves_the_first_ones_socket_alone() {
    let dir = Scratch::new("netadm-private-two").unwrap();
    let socket = dir.path().join("private");
    let bus = Bus::start();
    let _first = Daemon::builder(&bus, dir.path().join("one")).private_socket(&socket).start();
    // Awaited with a deadline: a netadmd queued for the name would serve
    // (and fail this), not hang it.
    let second = Daemon::builder(&bus, dir.path().join("two")).private_socket(&socket).try_start();
    let said = match second {
        Ok(_) => panic!("a second netadmd serves beside the first"),
        Err(e) => e.to_string(),
    };
    assert!(said.contains("org.netadm.Netadm1"), "{said}");
    let r = Cli::new(&bus).private(&socket).json_timed(&["show-link"]);
    assert!(r.is_ok(), "the first netadmd's socket still answers: {r:?}");
}

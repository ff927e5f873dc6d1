//! Who may do what: the shipped bus policy and netadmd's own check, with
//! real callers of different uids (setpriv) on a private bus.

use netadm_testkit::*;

/// Every verb that changes the network, with arguments under which root
/// can run them in this order after `setup`.
const MUTATING: &[&[&str]] = &[
    &["create-aggr", "-l", "atl1c1", "aggr9"],
    &["modify-aggr", "-P", "L2", "aggr0"],
    &["add-aggr", "-l", "i40e1", "aggr0"],
    &["remove-aggr", "-l", "i40e1", "aggr0"],
    &["set-linkprop", "-p", "mtu=9000", "aggr0"],
    &["reset-linkprop", "-p", "mtu", "aggr0"],
    &["create-vnic", "-l", "i40e1", "vnic9"],
    &["delete-vnic", "vnic0"],
    &["delete-aggr", "aggr0"],
    &["create-if", "atl1c3"],
    &["create-addr", "-T", "static", "-a", "192.0.2.9/24", "atl1c2/v9"],
    &["delete-addr", "atl1c2/v4"],
    &["delete-if", "atl1c2"],
    &["rename-link", "atl1c0", "net0"],
    &["set-strategy", "sequential"],
];

const NOBODY: u32 = 65534;

/// Whether what these tests need is here: root (to switch to other uids
/// with `setpriv`), `setpriv` (util-linux) and `busctl` (systemd). If not,
/// the test says what is missing and passes, unless under CI (`CI=true`),
/// where a missing prerequisite fails it: `.ci/run` installs them and runs
/// as root.
fn prerequisites() -> bool {
    netadm_testkit::prerequisites(
        Some("to switch to an unprivileged uid"),
        &[("setpriv", "util-linux"), ("busctl", "systemd")],
    )
}

fn setup(bus: &Bus) {
    json(bus, &["create-aggr", "-l", "i40e0", "aggr0"]);
    json(bus, &["create-vnic", "-l", "aggr0", "vnic0"]);
    json(bus, &["create-if", "atl1c2"]);
    json(bus, &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "atl1c2/v4"]);
}

fn assert_reads_work(bus: &Bus, id: u32, groups: &[u32]) {
    for args in [
        &["show-link"][..],
        &["show-phys"],
        &["show-aggr"],
        &["show-linkprop", "aggr0"],
        &["show-history"],
        &["show-vnic"],
        &["show-if"],
        &["show-addr"],
        &["show-traffic"],
        &["show-link", "-s"],
    ] {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = netadm_as(bus, id, groups, &a);
        assert!(
            out.status.success(),
            "uid {id} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn assert_all_mutations_refused(bus: &Bus, id: u32, groups: &[u32], daemon_says: bool) {
    let before = json(bus, &["show-link"]);
    for args in MUTATING {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = netadm_as(bus, id, groups, &a);
        assert!(!out.status.success(), "uid {id} was allowed to {args:?}");
        let err: serde_json::Value = serde_json::from_slice(&out.stderr)
            .unwrap_or_else(|_| panic!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(err["error"]["kind"], "AccessDenied", "{args:?}: {err}");
        let m = err["error"]["message"].as_str().unwrap();
        if daemon_says {
            assert!(m.contains(&format!("uid {id}")), "the daemon names the caller: {m}");
        } else {
            assert!(
                !m.contains("may not change the network"),
                "the bus, not the daemon, refuses: {m}"
            );
        }
    }
    assert_eq!(json(bus, &["show-link"]), before, "a refused call changed something");
}

#[test]
fn with_the_shipped_policy_anyone_may_look_and_only_root_may_change() {
    if !prerequisites() {
        return;
    }
    let policy = repo_root().join("systemd/org.netadm.Netadm1.conf");
    let bus = Bus::start_system_like(&policy);
    let _d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    setup(&bus);

    assert_reads_work(&bus, NOBODY, &[]);
    // Introspection and properties, through a client nobody here wrote.
    let busctl = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "busctl",
            ])
            .arg(format!("--address={}", bus.address()))
            .args(args)
            .output()
            .unwrap()
    };
    let intro = busctl(&["introspect", "org.netadm.Netadm1", "/org/netadm/Netadm1"]);
    assert!(
        intro.status.success() && String::from_utf8_lossy(&intro.stdout).contains(".CreateAggr")
    );
    // Every Show* method the daemon has is one the policy lets anyone
    // call, so the README's "anyone may run the show verbs" cannot drift.
    let text = String::from_utf8_lossy(&intro.stdout).into_owned();
    let shows: std::collections::BTreeSet<String> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(".Show"))
        .map(|m| format!("Show{m}"))
        .collect();
    let conf = std::fs::read_to_string(&policy).unwrap();
    let allowed: std::collections::BTreeSet<String> = conf
        .split("send_member=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|m| m.starts_with("Show"))
        .map(str::to_owned)
        .collect();
    assert!(shows.len() >= 10, "{shows:?}");
    assert_eq!(shows, allowed, "Show* methods vs the policy's allows");
    let prop = busctl(&[
        "get-property",
        "org.netadm.Netadm1",
        "/org/netadm/Netadm1/links/aggr0",
        "org.netadm.Netadm1.Link",
        "Mtu",
    ]);
    assert_eq!(String::from_utf8_lossy(&prop.stdout).trim(), "u 1500");

    // The bus itself refuses the unprivileged caller's mutations.
    assert_all_mutations_refused(&bus, NOBODY, &[], false);

    // Root may.
    for args in MUTATING {
        json(&bus, args);
    }
}

#[test]
fn with_an_allow_all_bus_the_daemon_still_refuses_unprivileged_callers() {
    if !prerequisites() {
        return;
    }
    let bus = Bus::start();
    let _d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    setup(&bus);
    assert_reads_work(&bus, NOBODY, &[]);
    assert_all_mutations_refused(&bus, NOBODY, &[], true);
}

#[test]
fn members_of_the_admin_group_may_change_the_network() {
    if !prerequisites() {
        return;
    }
    let bus = Bus::start();
    // "nogroup" (gid 65534) stands in for "netadm", which tests must not
    // create on the host.
    let _d = Daemon::start(&bus, &bus.subdir("state"), &["--admin-group", "nogroup"]);
    setup(&bus);
    // uid 1000 without the group: refused; with it: allowed.
    let out = netadm_as(&bus, 1000, &[1000], &["--json", "create-if", "atl1c3"]);
    assert!(!out.status.success());
    let out = netadm_as(&bus, 1000, &[1000, 65534], &["--json", "create-if", "atl1c3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(rows(&json(&bus, &["show-if"]), "ifname", "atl1c3").len(), 1);
}

//! `netadm demo` end to end: it times the `netadm` process (the daemon's
//! total inside it), marks scaled figures with their exact multipliers,
//! gives no speed-up for kernel work it skipped, and, run as root with the
//! kernel mirror on, leaves no network namespace or device behind.

use std::process::Command;

use netadm_testkit::*;
use serde_json::Value;

fn netns() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip (iproute2)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_demo_times_the_cli_marks_scaled_figures_and_leaves_nothing_behind() {
    let root = is_root();
    let out = Command::new(bin("netadm"))
        .args(["--json", "demo", "--sequential-rings", "24", "--legacy-rings", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();

    // Root runs the kernel mirror (in a namespace of its own); others not.
    assert_eq!(v["kernel_mirror"], root, "{v}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 11);
    for r in rows {
        assert!(!r["cli"].as_str().unwrap().contains(" -t"), "persistent: {r}");
        let (wall, daemon) = (r["netadm_cli_wall_us"].as_u64(), r["netadm_daemon_us"].as_u64());
        assert!(wall >= daemon && daemon > Some(0), "the CLI's wall time holds the daemon's: {r}");
        assert_eq!(r["scaled"], false);
        assert!(r["netadm_daemon_phases"].as_array().is_some_and(|p| !p.is_empty()), "{r}");
        // Exact multipliers: 256/24 is not 10.
        for (k, rings) in [("sequential", 24.0), ("legacy", 2.0)] {
            assert_eq!(r[k]["scaled"], true, "{r}");
            assert_eq!(r[k]["multiplier"].as_f64(), Some(256.0 / rings), "{r}");
        }
        let skipped = !root && r["kernel_work"] == true;
        assert_eq!(r["after_over_netadm"].is_null(), skipped, "no speed-up for skipped work: {r}");
    }
    let mtu = &v["mtu_under_load"]["batched"];
    assert_eq!(mtu["frames_lost"], 0, "{v}");
    assert!(mtu["sender_pause_max_us"].as_f64().unwrap() < 1e6, "{v}");

    if root {
        let ns = v["netns"].as_str().unwrap();
        assert!(ns.starts_with("netadm-demo-"), "{ns}");
        assert!(!netns().contains(&ns.to_owned()), "{ns} left behind");
        // Its interfaces were never in this namespace.
        for dev in ["aggr0", "vnic0", "i40e0"] {
            let st = Command::new("ip").args(["link", "show", dev]).output().unwrap().status;
            assert!(!st.success(), "{dev} exists in the test's namespace");
        }
    }
}

//! A configuration past the journal threshold (links.toml over 64 KiB):
//! changes go to links.journal, survive kill -9, are folded into
//! links.toml at start and at a clean stop, and the link objects on the
//! bus follow each change without being rebuilt wholesale.

use netadm_testkit::*;

/// links.toml with aggr0 (i40e0+i40e1) and `n` VNICs over it.
fn big_config(n: usize) -> String {
    let mut t = String::from(
        "# netadm persistent link configuration; written by netadmd\n\nversion = 1\n\n\
         [aggr.aggr0]\nports = [\"i40e0\", \"i40e1\"]\n",
    );
    for i in 0..n {
        t += &format!(
            "\n[vnic.vnic{i}]\nover = \"aggr0\"\nmac = \"2:8:21:0:{:x}:{:x}\"\nmac_mode = \"random\"\n",
            i / 256,
            i % 256
        );
    }
    t
}

fn mtu_of(bus: &Bus, link: &str) -> String {
    let out = std::process::Command::new("busctl")
        .arg(format!("--address={}", bus.address()))
        .args(["get-property", "org.netadm.Netadm1"])
        .arg(format!("/org/netadm/Netadm1/links/{link}"))
        .args(["org.netadm.Netadm1.Link", "Mtu"])
        .output()
        .expect("busctl (systemd) must be installed");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_large_config_journals_changes_that_survive_kill_9_and_compact_on_stop() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    std::fs::create_dir_all(&state).unwrap();
    let text = big_config(900);
    assert!(text.len() > 64 * 1024);
    std::fs::write(state.join("links.toml"), &text).unwrap();

    let d = Daemon::start(&bus, &state, &[]);
    json(&bus, &["create-vnic", "-l", "aggr0", "extra1"]);
    json(&bus, &["delete-vnic", "vnic7"]);
    json(&bus, &["set-linkprop", "-p", "mtu=9000", "aggr0"]);
    assert_eq!(files(&state), ["links.journal", "links.toml"]);
    assert_eq!(std::fs::read_to_string(state.join("links.toml")).unwrap(), text, "not rewritten");
    // The objects of the links the changes touched follow them.
    assert_eq!(mtu_of(&bus, "vnic5"), "u 9000", "a VNIC's MTU follows its aggregation's");
    assert_eq!(mtu_of(&bus, "extra1"), "u 9000");
    assert_eq!(mtu_of(&bus, "vnic7"), "", "a deleted VNIC's object is gone");
    d.kill9();

    // Replayed after kill -9, then folded into links.toml at start.
    let d = Daemon::start(&bus, &state, &[]);
    let links = json(&bus, &["show-link"]);
    assert_eq!(rows(&links, "link", "extra1").len(), 1);
    assert!(rows(&links, "link", "vnic7").is_empty());
    assert_eq!(rows(&links, "link", "aggr0")[0]["mtu"], 9000);
    assert_eq!(files(&state), ["links.toml"]);
    let toml = std::fs::read_to_string(state.join("links.toml")).unwrap();
    assert!(toml.contains("[vnic.extra1]") && !toml.contains("[vnic.vnic7]"), "compacted");

    // A clean stop folds the journal in too.
    json(&bus, &["create-vnic", "-l", "aggr0", "extra2"]);
    assert_eq!(files(&state), ["links.journal", "links.toml"]);
    assert!(d.stop().success());
    assert_eq!(files(&state), ["links.toml"]);
    assert!(std::fs::read_to_string(state.join("links.toml")).unwrap().contains("[vnic.extra2]"));
}

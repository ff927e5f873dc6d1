//! Ansible drives netadm across hosts: real `ansible-playbook` with the
//! in-repo collection (`ansible/netadm`) against two inventory hosts, each a
//! netadmd in a network namespace of its own (kernel mirror on) on a private
//! bus of its own (`ansible_connection=local`, the bus address a host
//! variable the module is given). It applies (changed on both), runs again
//! (changed=0), runs in check mode with another document (the plan as the
//! diff, nothing changes), and applies a document that fails on one host
//! only (a kernel device there already has a name the document wants): that
//! host is rolled back whole, the other takes the change. Root, iproute2
//! and ansible-playbook (skipped otherwise, failed under `CI=true`).

use std::path::Path;
use std::process::Command;

use netadm_testkit::*;

/// The play: documents one, two and three applied to every host.
const PLAYBOOK: &str = include_str!("data/site.yml");

struct Run {
    recap: Vec<String>,
    out: String,
}

fn playbook(dir: &Path, doc: &str, extra: &[&str]) -> Run {
    let out = Command::new("ansible-playbook")
        .env("ANSIBLE_COLLECTIONS_PATH", dir.join("collections"))
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", dir.join("tmp"))
        .env("ANSIBLE_REMOTE_TEMP", dir.join("tmp"))
        .arg("-i")
        .arg(dir.join("inventory.ini"))
        .args(["-e", &format!("doc={doc}")])
        .args(extra)
        .arg(dir.join("site.yml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let recap: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("PLAY RECAP"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    eprintln!("ansible-playbook doc={doc} {extra:?}:");
    for l in &recap {
        eprintln!("  {l}");
    }
    assert!(!recap.is_empty(), "no PLAY RECAP:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    Run { recap, out: text }
}

fn host<'a>(r: &'a Run, h: &str) -> &'a str {
    r.recap.iter().find(|l| l.starts_with(&format!("{h} "))).map(String::as_str).unwrap_or("")
}

#[test]
fn ansible_applies_to_two_hosts_idempotently_checks_and_rolls_back_the_one_that_fails() {
    let Some(made) = namespaces(&["ansible-playbook"], "a", ["a", "b"]) else { return };
    let names = made.each_ref().map(|n| n.name().to_owned());
    let (bus_a, bus_b) = (Bus::start(), Bus::start());
    // Each host: the embedded default hardware, the kernel mirror on.
    let _a = Daemon::builder(&bus_a, bus_a.subdir("state")).netns(&names[0]).start();
    let _b = Daemon::builder(&bus_b, bus_b.subdir("state")).netns(&names[1]).start();

    // The collection where Ansible looks for it, the inventory, the play.
    let dir = bus_a.subdir("ansible");
    let coll = dir.join("collections/ansible_collections/netadm");
    std::fs::create_dir_all(&coll).unwrap();
    std::os::unix::fs::symlink(repo_root().join("ansible/netadm"), coll.join("netadm")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let python =
        if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    let netadm_bin = bin("netadm");
    let inventory = format!(
        "hostA ansible_connection=local ansible_python_interpreter={python} netadm_bus={} netadm_bin={}\n\
         hostB ansible_connection=local ansible_python_interpreter={python} netadm_bus={} netadm_bin={}\n",
        bus_a.address(),
        netadm_bin.display(),
        bus_b.address(),
        netadm_bin.display()
    );
    std::fs::write(dir.join("inventory.ini"), inventory).unwrap();
    std::fs::write(dir.join("site.yml"), PLAYBOOK).unwrap();

    // Apply: changed on both, made in the kernel too.
    let r = playbook(&dir, "one", &[]);
    for h in ["hostA", "hostB"] {
        assert!(host(&r, h).contains("changed=1") && host(&r, h).contains("failed=0"), "{}", r.out);
    }
    for ns in &names {
        assert!(ip(ns, &["-o", "addr", "show", "web0"]).contains("192.0.2.10/24"));
    }
    let one = show_config(&bus_a);
    assert!(one.contains("[vnic.app0]"), "{one}");
    assert_eq!(show_config(&bus_b), one);

    // Again: nothing to do.
    let r = playbook(&dir, "one", &[]);
    for h in ["hostA", "hostB"] {
        assert!(host(&r, h).contains("changed=0") && host(&r, h).contains("failed=0"), "{}", r.out);
    }

    // Check mode with another document: would change, the plan is the
    // diff, nothing changes.
    let r = playbook(&dir, "two", &["--check", "--diff"]);
    for h in ["hostA", "hostB"] {
        assert!(host(&r, h).contains("changed=1"), "{}", r.out);
    }
    assert!(r.out.contains("config  vnic app0  delete"), "{}", r.out);
    assert!(r.out.contains("rings restarted"), "{}", r.out);
    assert_eq!(show_config(&bus_a), one);
    assert_eq!(show_config(&bus_b), one);

    // A document that fails on host B only: B is rolled back whole (no
    // new VNIC, no new TAP, its rings as before), A takes it.
    ip(&names[1], &["link", "add", "blk0", "type", "veth", "peer", "name", "blk1"]);
    let r = playbook(&dir, "three", &[]);
    assert!(
        host(&r, "hostA").contains("changed=1") && host(&r, "hostA").contains("failed=0"),
        "{}",
        r.out
    );
    assert!(host(&r, "hostB").contains("failed=1"), "{}", r.out);
    assert!(r.out.contains("kernel interface blk0"), "{}", r.out);
    assert!(show_config(&bus_a).contains("[vnic.new0]"));
    assert!(ip(&names[0], &["-o", "addr", "show", "new0"]).contains("198.51.100.1/24"));
    assert_eq!(show_config(&bus_b), one);
    assert!(ip(&names[1], &["-o", "link", "show"]).lines().all(|l| !l.contains("new0")));
    let i40e1 = rows(&json(&bus_b, &["show-phys"]), "link", "i40e1")[0].clone();
    assert_eq!(i40e1["rings_started"], 0, "{i40e1}");

    // confirm_timeout arms the checkpoint (host A goes back to "one"); a
    // later run's confirm task keeps it.
    let checkpoint = bus_a.subdir("state").join("links.checkpoint.toml");
    let r = playbook(&dir, "one", &["-e", "ct=600"]);
    assert!(host(&r, "hostA").contains("changed=1"), "{}", r.out);
    assert!(checkpoint.exists(), "no checkpoint armed on host A");
    let r = playbook(&dir, "one", &["-e", "confirm=true"]);
    assert!(
        host(&r, "hostA").contains("changed=1") && host(&r, "hostA").contains("ok=2"),
        "{}",
        r.out
    );
    assert!(!checkpoint.exists(), "the confirm did not disarm the checkpoint");
    assert_eq!(show_config(&bus_a), one);
}

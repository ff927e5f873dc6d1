//! The Ansible collection `netadm.netadm` (`ansible/netadm`) as a user
//! gets it: `ansible-galaxy collection build` makes its tarball,
//! `ansible-galaxy collection install` puts it in a collections path of
//! this test's own, and `ansible-doc netadm.netadm.netadm_config` shows the
//! module's documentation, options and return values (read as text and as
//! `--json`). Missing ansible: "skipped", or a failure under `CI=true`.

use netadm_testkit::*;

#[test]
fn the_collection_builds_installs_and_documents_its_module() {
    if !prerequisites(None, &[("ansible-galaxy", "ansible"), ("ansible-doc", "ansible")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("built");
    let galaxy = std::fs::read_to_string(repo_root().join("ansible/netadm/galaxy.yml")).unwrap();
    let version = galaxy
        .lines()
        .find_map(|l| l.strip_prefix("version: "))
        .expect("galaxy.yml: version")
        .trim();
    let source = repo_root().join("ansible/netadm");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    run(&["ansible-galaxy", "collection", "build", "--output-path", &s(&built), &s(&source)])
        .unwrap();
    let tarball = built.join(format!("netadm-netadm-{version}.tar.gz"));
    assert!(tarball.is_file(), "no {}", tarball.display());
    // Installed into a collections path of this test's own, and read from
    // there only.
    let path = s(&dir.path().join("collections"));
    let env = format!("ANSIBLE_COLLECTIONS_PATH={path}");
    run(&["env", &env, "ansible-galaxy", "collection", "install", "-p", &path, &s(&tarball)])
        .unwrap();
    let doc = |args: &[&str]| {
        let mut cmd = vec!["env", &env, "ANSIBLE_NOCOLOR=1", "ansible-doc"];
        cmd.extend_from_slice(args);
        cmd.push("netadm.netadm.netadm_config");
        run(&cmd).unwrap()
    };

    let text = doc(&[]);
    for want in [
        "netadm apply",
        "OPTIONS",
        "confirm_timeout",
        "choices: [present, confirmed, rolled_back]",
        "EXAMPLES",
        "RETURN VALUES",
        "plan",
        "confirm_deadline_ms",
    ] {
        assert!(text.contains(want), "ansible-doc: no {want:?} in:\n{text}");
    }

    let json: serde_json::Value = serde_json::from_str(&doc(&["--json"])).unwrap();
    let m = &json["netadm.netadm.netadm_config"];
    assert_eq!(m["doc"]["module"], "netadm_config", "{json}");
    let options = m["doc"]["options"].as_object().expect("options");
    for o in ["config", "state", "confirm_timeout", "bus", "netadm"] {
        assert!(options.contains_key(o), "option {o}: {json}");
    }
    let ret = m["return"].as_object().expect("return values");
    for r in ["changed", "plan", "confirm_deadline_ms", "result", "error_kind"] {
        assert!(ret.contains_key(r), "return value {r}: {json}");
        assert!(ret[r]["description"].is_string(), "{r} has no description");
    }
    assert_eq!(ret["plan"]["type"], "list");
}

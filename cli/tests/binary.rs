//! The built `netadm` binary answers for itself. (Also: having an
//! integration test makes `cargo test --workspace` build the binary, which
//! the end-to-end tests in `tests/` run.)

use std::process::Command;

#[test]
fn help_lists_the_verbs_and_version_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_netadm")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for verb in ["create-aggr", "set-linkprop", "show-link", "create-if", "start-traffic", "demo"] {
        assert!(text.contains(verb), "--help lacks {verb}:\n{text}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_netadm")).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("netadm "));
}

#[test]
fn a_usage_error_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_netadm")).arg("no-such-verb").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

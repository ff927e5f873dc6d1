//! The built `netadmd` binary answers for itself and refuses bad options.
//! (Also: having an integration test makes `cargo test --workspace` build
//! the binary, which the end-to-end tests in `tests/` run.)

use std::process::Command;

#[test]
fn help_names_its_options() {
    let out = Command::new(env!("CARGO_BIN_EXE_netadmd")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for opt in
        ["--config", "--state-dir", "--bus", "--strategy", "--kernel-mirror", "--admin-group"]
    {
        assert!(text.contains(opt), "--help lacks {opt}:\n{text}");
    }
}

#[test]
fn a_bad_strategy_is_refused_before_anything_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_netadmd"))
        .args(["--strategy", "fastest"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fastest"));
}

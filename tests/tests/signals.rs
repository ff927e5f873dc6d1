//! SIGTERM in the middle of a long operation: the operation finishes and
//! persists, the daemon exits cleanly, and the next one starts from it.

use std::time::{Duration, Instant};

use netadm_testkit::*;

#[test]
fn sigterm_during_a_long_operation_leaves_config_and_state_consistent() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    // `sequential` makes create-aggr take seconds: ~20 ms per ring.
    let d = Daemon::start(&bus, &state, &["--strategy", "sequential"]);
    let cli = Cli::new(&bus);
    let client = std::thread::spawn(move || {
        cli.output(&["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"]).unwrap()
    });
    // Wait until the operation is under way: rings have started to come up.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let phys = json(&bus, &["show-phys"]);
        let started: u64 =
            phys.as_array().unwrap().iter().map(|p| p["rings_started"].as_u64().unwrap()).sum();
        if started > 0 {
            assert!(started < 512, "the operation must still be running when SIGTERM arrives");
            break;
        }
        assert!(Instant::now() < deadline, "create-aggr never started its rings");
        std::thread::yield_now();
    }
    let status = d.stop();
    assert!(status.success(), "netadmd exits cleanly on SIGTERM: {status:?}");
    let _ = client.join().unwrap();

    // The operation completed and was persisted before the daemon left.
    let saved = std::fs::read_to_string(state.join("links.toml")).unwrap();
    assert!(saved.contains("[aggr.aggr0]"), "{saved}");
    let _d = Daemon::start(&bus, &state, &[]);
    let phys = json(&bus, &["show-phys"]);
    assert_eq!(rows(&phys, "link", "i40e0")[0]["rings_started"], 256);
    assert_eq!(rows(&phys, "link", "i40e1")[0]["rings_started"], 256);
    assert_eq!(rows(&json(&bus, &["show-aggr"]), "link", "aggr0").len(), 1);
}

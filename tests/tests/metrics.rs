//! `netadmd --metrics-listen`: a scrape after real work, checked by
//! Prometheus's own parser and linter (`promtool check metrics`), and its
//! figures against what the D-Bus API reports for the same things.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use netadm_testkit::*;

/// `GET path` over HTTP/1.0: (status line, headers and body).
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_owned(), body.to_owned())
}

/// The samples of an exposition: `name{labels}` to value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap_or_else(|e| panic!("{l}: {e}")))
        })
        .collect()
}

#[test]
fn a_scrape_parses_and_agrees_with_the_daemon() {
    if !prerequisites(None, &[("promtool", "prometheus")]) {
        return;
    }
    let bus = Bus::start();
    let d = Daemon::start(&bus, &bus.subdir("state"), &["--metrics-listen", "127.0.0.1:0"]);
    let addr = d.metrics_address();

    // Work to count: a verb that succeeds, one that fails, traffic.
    json(&bus, &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    assert_eq!(json_err(&bus, &["create-if", "nosuch0"]).0, "NotFound");
    json(&bus, &["create-if", "atl1c2"]);
    json(&bus, &["start-traffic", "-l", "aggr0", "--rate", "50000", "--flows", "8"]);
    let traffic = || rows(&json(&bus, &["show-traffic"]), "link", "aggr0")[0].clone();
    wait_for("20000 frames", || traffic()["received"].as_u64().unwrap() >= 20_000);
    json(&bus, &["stop-traffic", "-l", "aggr0"]);
    wait_for("the frames in flight", || {
        let t = traffic();
        t["received"] == t["sent"]
    });

    let (head, body) = get(&addr, "/metrics");
    assert!(head.starts_with("HTTP/1.0 200"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");

    // Prometheus's parser and linter accept it.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // Its figures are the daemon's.
    let m = samples(&body);
    let at = |k: &str| *m.get(k).unwrap_or_else(|| panic!("no sample {k} in:\n{body}"));
    assert_eq!(at(r#"netadm_operations_total{op="create-aggr",result="ok"}"#), 1.0);
    assert_eq!(at(r#"netadm_operations_total{op="create-if",result="NotFound"}"#), 1.0);
    assert_eq!(at(r#"netadm_operations_total{op="start-traffic",result="ok"}"#), 1.0);
    let h = "netadm_operation_duration_seconds";
    assert_eq!(at(&format!(r#"{h}_count{{op="create-aggr"}}"#)), 1.0);
    assert_eq!(at(&format!(r#"{h}_bucket{{op="create-aggr",le="+Inf"}}"#)), 1.0);
    let took = at(&format!(r#"{h}_sum{{op="create-aggr"}}"#));
    let daemon_us =
        rows(&json(&bus, &["show-history"]), "command", "create-aggr aggr0")[0]["total_us"]
            .as_f64()
            .unwrap();
    assert!(took >= daemon_us / 1e6, "histogram {took} s < the daemon's own {daemon_us} us");

    let t = traffic();
    let sent = t["sent"].as_f64().unwrap();
    assert!(sent >= 20_000.0);
    assert_eq!(at(r#"netadm_traffic_sent_frames_total{link="aggr0"}"#), sent);
    assert_eq!(at(r#"netadm_traffic_received_frames_total{link="aggr0"}"#), sent);
    assert_eq!(at(r#"netadm_traffic_running{link="aggr0"}"#), 0.0);
    let stats = json(&bus, &["show-link", "-s"]);
    for (dir, field) in [("transmit", "opackets"), ("receive", "ipackets"), ("transmit", "obytes")]
    {
        let unit = if field.ends_with("bytes") { "bytes" } else { "packets" };
        let want = rows(&stats, "link", "aggr0")[0][field].as_f64().unwrap();
        assert_eq!(at(&format!(r#"netadm_link_{dir}_{unit}_total{{link="aggr0"}}"#)), want);
    }
    assert_eq!(at(r#"netadm_link_transmit_packets_total{link="aggr0"}"#), sent);
    for p in json(&bus, &["show-phys"]).as_array().unwrap() {
        let port = p["link"].as_str().unwrap();
        let started = p["rings_started"].as_f64().unwrap();
        let stopped = p["rings"].as_f64().unwrap() - started;
        assert_eq!(at(&format!(r#"netadm_port_rings{{port="{port}",state="started"}}"#)), started);
        assert_eq!(at(&format!(r#"netadm_port_rings{{port="{port}",state="stopped"}}"#)), stopped);
    }
    assert_eq!(at(r#"netadm_port_rings{port="i40e0",state="started"}"#), 256.0);
    assert_eq!(at(r#"netadm_interface_drifted{ifname="atl1c2"}"#), 0.0);

    // Only /metrics, only GET.
    assert!(get(&addr, "/").0.starts_with("HTTP/1.0 404"));
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(s, "POST /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.0 405"), "{resp}");
}

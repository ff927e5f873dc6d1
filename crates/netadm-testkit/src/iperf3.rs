//! iperf3 driven in network namespaces, its JSON read, and the stall
//! measure (the longest run of 100 ms intervals below a tenth of the
//! median) the kernel test asserts on and `netadm-bench kernel` reports.
//!
//! Every wait is for an event or a state, with a deadline.

use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Reaped, in_netns};

/// How long iperf3's server gets to listen, and a client beyond its `-t`.
const IPERF3_GRACE: Duration = Duration::from_secs(30);

/// Whether process `pid` (in whatever namespace it runs) has a TCP socket
/// listening on `port`, from its own /proc view of the network.
fn listens(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X} ");
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
            // "sl local_address rem_address st ...": state 0A is LISTEN.
            t.lines().skip(1).any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && format!("{} ", w[1]).ends_with(&want) && w[3] == "0A"
            })
        })
    })
}

/// Starts `iperf3 -s -1 -J -i 0.1` in namespace `ns` (one test, JSON,
/// 100 ms receiver intervals for the client's `--get-server-output`) and
/// waits until it listens.
pub fn server(ns: &str) -> Result<Reaped, String> {
    let child = in_netns(Some(ns), "iperf3")
        .args(["-s", "-1", "-J", "-i", "0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run iperf3 in {ns}: {e}"))?;
    let mut server = Reaped(child);
    let pid = server.0.id();
    let deadline = Instant::now() + IPERF3_GRACE;
    // ip and setpriv exec iperf3 in place: same pid, the namespace's view.
    let is_iperf3 =
        || std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "iperf3");
    while !(is_iperf3() && listens(pid, 5201)) {
        if let Ok(Some(st)) = server.0.try_wait() {
            return Err(format!("iperf3 server in {ns} exited before listening ({st})"));
        }
        if Instant::now() > deadline {
            return Err(format!("iperf3 server in {ns} did not listen within {IPERF3_GRACE:?}"));
        }
        std::thread::yield_now();
    }
    Ok(server)
}

/// Waits for a one-test iperf3 server to finish, killing it after a
/// deadline (it can outlive a client that failed to connect).
pub fn reap_server(mut server: Reaped) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !matches!(server.0.try_wait(), Ok(None)) {
            return;
        }
        std::thread::yield_now();
    }
    // Dropping kills it.
}

/// Runs an iperf3 client in namespace `ns` against the server at `addr`
/// (see [`server`]) for `seconds`, 100 ms intervals, JSON with the
/// server's output, plus `extra` arguments (`-R`). While it runs, calls
/// `tick(k)` at k whole seconds after it started, for k = 1, 2, ... below
/// `seconds`, until it exits. Returns its JSON text.
pub fn client(
    ns: &str,
    addr: &str,
    seconds: u32,
    extra: &[&str],
    tick: &mut dyn FnMut(u32) -> Result<(), String>,
) -> Result<String, String> {
    let secs = seconds.to_string();
    let mut child = in_netns(Some(ns), "iperf3")
        .args(["-c", addr, "-t", &secs, "-i", "0.1", "-J"])
        .args(["--get-server-output", "--connect-timeout", "5000"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run iperf3 in {ns}: {e}"))?;
    let start = Instant::now();
    let mut stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        let _ = tx.send(s);
    });
    let mut client = Reaped(child);
    let deadline = start + Duration::from_secs(seconds.into()) + IPERF3_GRACE;
    let mut k = 1;
    let text = loop {
        let next = if k < seconds { start + Duration::from_secs(k.into()) } else { deadline };
        match rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(text) => break text,
            Err(mpsc::RecvTimeoutError::Timeout) if k < seconds => {
                tick(k)?;
                k += 1;
            }
            Err(_) => {
                return Err(format!(
                    "iperf3 -c {addr} in {ns} did not finish within {seconds} s + {IPERF3_GRACE:?}"
                ));
            }
        }
    };
    let status = client.0.wait().map_err(|e| e.to_string())?;
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        if let Some(e) = v["error"].as_str() {
            return Err(format!("iperf3 -c {addr} in {ns}: {e}"));
        }
    }
    if !status.success() {
        return Err(format!("iperf3 -c {addr} in {ns} failed ({status}): {text}"));
    }
    Ok(text)
}

/// One iperf3 reporting interval as the receiver saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// When it started, seconds into the test.
    pub start: f64,
    /// Its length, seconds.
    pub secs: f64,
    /// Its rate, Gbit/s.
    pub gbps: f64,
}

/// What one iperf3 test measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The receiver's intervals: the server's (`--get-server-output`) for a
    /// client that sends, the client's own under `-R`.
    pub intervals: Vec<Interval>,
    /// Whether the server sent (`-R`).
    pub reverse: bool,
    /// The test's length (`-t`), seconds. A receiver whose data is stuck
    /// on the way keeps counting (empty) intervals past it.
    pub duration: f64,
    /// Rate received over the whole test, Gbit/s.
    pub received_gbps: f64,
    /// TCP retransmits counted by the sender.
    pub retransmits: u64,
}

/// One entry of an iperf3 JSON report's `intervals`, from its `sum`;
/// `None` when a figure is missing.
pub fn interval(i: &Value) -> Option<Interval> {
    let s = &i["sum"];
    Some(Interval {
        start: s["start"].as_f64()?,
        secs: s["seconds"].as_f64()?,
        gbps: s["bits_per_second"].as_f64()? / 1e9,
    })
}

fn intervals(v: &Value) -> Result<Vec<Interval>, String> {
    let list = v.as_array().ok_or("no intervals")?;
    list.iter()
        .map(|i| {
            interval(i).ok_or_else(|| {
                format!("interval without start/seconds/bits_per_second: {}", i["sum"])
            })
        })
        .collect()
}

/// Parses an iperf3 client's `-J --get-server-output` output.
pub fn parse(text: &str) -> Result<Report, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("iperf3 output is not JSON ({e})"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(format!("iperf3: {e}"));
    }
    let reverse = v["start"]["test_start"]["reverse"].as_i64() == Some(1);
    let duration = v["start"]["test_start"]["duration"]
        .as_f64()
        .ok_or("iperf3: no start.test_start.duration")?;
    let receiver = if reverse { &v["intervals"] } else { &v["server_output_json"]["intervals"] };
    let intervals = intervals(receiver).map_err(|e| format!("iperf3 receiver intervals: {e}"))?;
    let end = &v["end"];
    let received_gbps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or("iperf3: no end.sum_received.bits_per_second")?
        / 1e9;
    let retransmits =
        end["sum_sent"]["retransmits"].as_u64().ok_or("iperf3: no end.sum_sent.retransmits")?;
    Ok(Report { intervals, reverse, duration, received_gbps, retransmits })
}

/// The median of `xs` (the mean of the middle two for an even count); 0
/// for none.
pub fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The nominal interval length the stall measure reads, seconds.
pub const INTERVAL_SECS: f64 = 0.1;

/// The intervals that count: iperf3 ends a test with a fragment of an
/// interval (often a few ms, few bytes); anything shorter than half the
/// nominal length is left out.
pub fn whole(iv: &[Interval]) -> Vec<Interval> {
    iv.iter().copied().filter(|i| i.secs >= INTERVAL_SECS / 2.0).collect()
}

/// The median rate of the intervals that start within the test's first
/// `duration` seconds, Gbit/s: those past it are a receiver waiting for
/// data stuck on the way, which may stall but does not set the median.
pub fn median_gbps(iv: &[Interval], duration: f64) -> f64 {
    median(&iv.iter().filter(|i| i.start < duration).map(|i| i.gbps).collect::<Vec<_>>())
}

/// The longest stall: the longest run of consecutive intervals whose rate
/// is below 10 % of the median interval rate ([`median_gbps`] of a test
/// of `duration` s), or zero (a run dead for half its time has a median of
/// 0), as the sum of their lengths in ms; 0 when no interval is that slow.
pub fn longest_stall_ms(iv: &[Interval], duration: f64) -> f64 {
    let floor = median_gbps(iv, duration) / 10.0;
    let (mut longest, mut run) = (0.0f64, 0.0);
    for i in iv {
        run = if i.gbps < floor || i.gbps <= 0.0 { run + i.secs * 1e3 } else { 0.0 };
        longest = longest.max(run);
    }
    longest
}

/// One iperf3 run under MTU toggles, summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Toggled {
    /// Median interval rate, Gbit/s.
    pub median_gbps: f64,
    /// See [`longest_stall_ms`].
    pub longest_stall_ms: f64,
    /// The slowest interval's rate, Gbit/s.
    pub slowest_gbps: f64,
    /// TCP retransmits counted by the sender.
    pub retransmits: u64,
    /// MTU changes made while it ran.
    pub mtu_changes: u32,
    /// Intervals counted.
    pub intervals: usize,
    /// How long the receiver kept counting past the test's length
    /// (waiting for data stuck on the way): the whole intervals that start
    /// at or after it, ms.
    pub overrun_ms: f64,
}

/// When the first MTU change is made, seconds into a toggled run (see
/// [`client`]'s ticks): the intervals before it are the
/// connection's slow start, which says nothing about the changes and is
/// not measured.
pub const FIRST_CHANGE_SECS: f64 = 1.0;

/// Summarises `r`'s whole intervals that start at `from` seconds or
/// later ([`FIRST_CHANGE_SECS`] for a toggled run); `mtu_changes` as
/// made.
pub fn toggled(r: &Report, mtu_changes: u32, from: f64) -> Toggled {
    let iv: Vec<Interval> =
        whole(&r.intervals).into_iter().filter(|i| i.start >= from - INTERVAL_SECS / 2.0).collect();
    Toggled {
        median_gbps: median_gbps(&iv, r.duration),
        longest_stall_ms: longest_stall_ms(&iv, r.duration),
        slowest_gbps: iv.iter().map(|i| i.gbps).reduce(f64::min).unwrap_or(0.0),
        retransmits: r.retransmits,
        mtu_changes,
        intervals: iv.len(),
        overrun_ms: iv
            .iter()
            .filter(|i| i.start >= r.duration)
            .fold(0.0, |ms, i| ms + i.secs * 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 ms intervals back to back at these rates.
    fn iv(rates: &[f64]) -> Vec<Interval> {
        let at = |n: usize| n as f64 / 10.0;
        rates
            .iter()
            .enumerate()
            .map(|(n, &gbps)| Interval { start: at(n), secs: 0.1, gbps })
            .collect()
    }

    fn run(intervals: Vec<Interval>, duration: f64) -> Report {
        Report { intervals, reverse: false, duration, received_gbps: 1.0, retransmits: 7 }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn no_stall_when_every_interval_is_near_the_median() {
        assert_eq!(longest_stall_ms(&iv(&[2.0, 2.1, 1.9, 2.0, 0.5]), 9.0), 0.0);
    }

    #[test]
    fn the_longest_run_below_a_tenth_of_the_median_counts() {
        // Median 2.0, floor 0.2: one run of 2 (0.1, 0.0), one of 3.
        let r = [2.0, 0.1, 0.0, 2.0, 2.0, 0.0, 0.19, 0.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        let ms = longest_stall_ms(&iv(&r), 9.0);
        assert!((ms - 300.0).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn a_run_dead_most_of_the_time_is_one_long_stall() {
        let ms = longest_stall_ms(&iv(&[3.0, 0.0, 0.0, 0.0, 0.0, 3.0]), 9.0);
        assert!((ms - 400.0).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn exactly_a_tenth_of_the_median_is_not_a_stall() {
        assert_eq!(longest_stall_ms(&iv(&[2.0, 0.2, 2.0, 2.0]), 9.0), 0.0);
    }

    #[test]
    fn a_stall_at_the_end_counts_and_uses_interval_lengths() {
        let mut v = iv(&[2.0, 2.0, 2.0, 0.0]);
        v.push(Interval { start: 0.4, secs: 0.06, gbps: 0.0 });
        let ms = longest_stall_ms(&v, 9.0);
        assert!((ms - 160.0).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn slow_start_before_the_first_change_is_not_measured() {
        // A slow first 100 ms, then steady: no stall from the first
        // change at 1 s on, though measured from 0 it is one.
        let mut rates = vec![0.1];
        rates.extend([3.0; 29]);
        let r = run(iv(&rates), 3.0);
        assert!(toggled(&r, 2, 0.0).longest_stall_ms > 0.0);
        let t = toggled(&r, 2, FIRST_CHANGE_SECS);
        assert_eq!((t.longest_stall_ms, t.intervals), (0.0, 20));
    }

    #[test]
    fn the_trailing_fragment_is_left_out() {
        let mut v = iv(&[2.0, 2.0]);
        v.push(Interval { start: 0.2, secs: 0.003, gbps: 0.0 });
        assert_eq!(whole(&v).len(), 2);
        let t = toggled(&run(v, 0.2), 3, 0.0);
        assert_eq!((t.longest_stall_ms, t.overrun_ms), (0.0, 0.0));
        assert_eq!((t.slowest_gbps, t.retransmits, t.mtu_changes, t.intervals), (2.0, 7, 3, 2));
    }

    #[test]
    fn a_receiver_waiting_past_the_end_stalls_but_does_not_set_the_median() {
        // A 0.5 s test whose data got stuck at its end: the receiver counts
        // eight empty intervals past 0.5 s. Over all intervals the median
        // would be 0 and the stall nothing; the test's own median is 2.
        let v = iv(&[2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(median_gbps(&v, 0.5), 2.0);
        let t = toggled(&run(v, 0.5), 4, 0.0);
        assert!((t.longest_stall_ms - 900.0).abs() < 1e-6, "{t:?}");
        assert!((t.overrun_ms - 800.0).abs() < 1e-6, "{t:?}");
        assert_eq!(t.median_gbps, 2.0);
    }

    /// An abridged `iperf3 -c -J --get-server-output` output.
    fn client_json(reverse: u8) -> String {
        let sum = |start: f64, s: f64, bps: f64| {
            format!(
                r#"{{"sum": {{"start": {start}, "end": {}, "seconds": {s}, "bytes": 1, "bits_per_second": {bps}}}}}"#,
                start + s
            )
        };
        format!(
            r#"{{"start": {{"test_start": {{"protocol": "TCP", "duration": 10, "reverse": {reverse}}}}},
               "intervals": [{}, {}],
               "end": {{"sum_sent": {{"bits_per_second": 3e9, "retransmits": 42}},
                        "sum_received": {{"bits_per_second": 2.5e9}}}},
               "server_output_json": {{"intervals": [{}, {}, {}]}}}}"#,
            sum(0.0, 0.1, 1e9),
            sum(0.1, 0.1, 2e9),
            sum(0.0, 0.1, 4e9),
            sum(0.1, 0.1, 0.0),
            sum(0.2, 0.002, 5e8)
        )
    }

    #[test]
    fn a_sending_client_reads_the_servers_intervals() {
        let r = parse(&client_json(0)).unwrap();
        assert!(!r.reverse);
        assert_eq!(r.intervals.len(), 3);
        assert_eq!(r.intervals[0], Interval { start: 0.0, secs: 0.1, gbps: 4.0 });
        assert_eq!(r.intervals[2].secs, 0.002);
        assert_eq!((r.duration, r.received_gbps, r.retransmits), (10.0, 2.5, 42));
    }

    #[test]
    fn a_reverse_client_reads_its_own_intervals() {
        let r = parse(&client_json(1)).unwrap();
        assert!(r.reverse);
        let want =
            [(0.0, 1.0), (0.1, 2.0)].map(|(start, gbps)| Interval { start, secs: 0.1, gbps });
        assert_eq!(r.intervals, want);
    }

    #[test]
    fn iperf3_errors_and_missing_fields_are_errors() {
        let e = parse(
            r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}"#,
        );
        assert!(e.unwrap_err().contains("Connection refused"));
        assert!(parse("not json").is_err());
        let no_server = r#"{"start": {"test_start": {"reverse": 0, "duration": 1}}, "intervals": [], "end": {}}"#;
        assert!(parse(no_server).unwrap_err().contains("intervals"));
        let no_duration = client_json(0).replace(r#""duration": 10, "#, "");
        assert!(parse(&no_duration).unwrap_err().contains("duration"));
    }
}

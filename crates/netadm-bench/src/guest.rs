//! `guest`: the seed's test on a real NIC driver. In a Linux guest under
//! QEMU, an aggregation of two e1000e ports (a driver that resets on an
//! MTU change, as the seed's i40e does) carries TCP to the host while its
//! MTU toggles 1500<->9000, two ways in the same guest:
//!
//! - **baseline**: `ip link set aggr0 mtu` — the bond sets both members
//!   at once, both reset;
//! - **netadm**: `netadm set-linkprop -p mtu=` from the netadmd inside the
//!   guest, which changes one member at a time and the bond last.
//!
//! Each in two modes, a guest each: **lacp** (`create-aggr -L active`: an
//! 802.3ad bond; its partner netadm's own emulated aggregation on the
//! host, afpacket-wired to the taps) and **static** (`-L off`: a
//! balance-xor bond; on the host a bridge over the taps, which follows the
//! guest's MAC to whichever port it sends on).
//!
//! Measured for each: iperf3 in 100 ms intervals as the host receives
//! them (the longest stall: the longest run of intervals below 10 % of the
//! median), TCP retransmits (the guest's TcpRetransSegs over the run),
//! the median interval, and frames lost: pings every 10 ms beside the
//! TCP stream, each one lost being a request or a reply that never
//! arrived. Boot time is the guest's (host wall time from spawning QEMU
//! to its script starting).

use std::io::BufRead;
use std::process::Stdio;
use std::time::Duration;

use netadm_testkit::guest::{self, Nic, Outcome};
use netadm_testkit::iperf3::{Interval, interval, longest_stall_ms, median_gbps, whole};
use netadm_testkit::{Bus, Cli, Daemon, Netns, fixtures, in_netns, sweep_stale};
use serde_json::{Value, json};

use crate::binaries;

opts!("guest" { changes: u32 = 4, period: u32 = 12, modes: String = "static,lacp".to_owned() });

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if o.changes == 0 || o.period < 8 {
            return Err("guest: need --changes >= 1 and --period >= 8 (seconds)".into());
        }
        if o.modes.split(',').any(|m| m != "static" && m != "lacp") {
            return Err(format!("guest: --modes {:?}: static, lacp or both", o.modes));
        }
        Ok(o)
    }
}

/// Namespace names: this prefix, our pid, the mode.
const NS_PREFIX: &str = "nbg";
/// The whole guest: boot, LACP, two runs.
const DEADLINE: Duration = Duration::from_secs(900);

/// The guest's script. `@LACP@` (off or active), `@CHANGES@`, `@PERIOD@`
/// and `@SECONDS@` are filled in.
const SCRIPT: &str = r#"
. /netadm-guest/netadm.sh
set -e
trap 'rc=$?; [ $rc = 0 ] || { cat /proc/net/bonding/* ; ip -s link; tail -50 /tmp/netadmd.log; dmesg | tail -30; }' EXIT
ms() { awk '{printf "%d\n", $1 * 1000}' /proc/uptime; }
# until_ms T: until the guest's clock reads T ms (the run's schedule).
until_ms() { while [ "$(ms)" -lt "$1" ]; do /bin/busybox sleep 0.02; done; }
retrans() { awk '/^Tcp:/ {n++} n == 2 && /^Tcp:/ {print $13; exit}' /proc/net/snmp; }
netadm_start
echo "DRIVER $(ethtool -i eth0 | grep '^driver:' | cut -d' ' -f2)"
echo "KERNEL $(uname -r)"
aggr_up @LACP@
echo "BOND $(grep -E '^Bonding Mode' /proc/net/bonding/aggr0)"
for way in baseline netadm; do
    mtu=1500
    echo "RUN $way"
    r0=$(retrans)
    start=$(ms)
    ping -i 0.01 -c $((@SECONDS@ * 100)) -W 1 192.0.2.1 >/tmp/ping.$way 2>&1 &
    PING=$!
    /usr/bin/iperf3 -c 192.0.2.1 -t @SECONDS@ -i 0.1 --connect-timeout 5000 >/tmp/iperf.$way 2>&1 &
    IPERF=$!
    k=0
    while [ $k -lt @CHANGES@ ]; do
        until_ms $((start + 1000 + k * @PERIOD@ * 1000))
        if [ $mtu = 1500 ]; then mtu=9000; else mtu=1500; fi
        t0=$(ms)
        if [ $way = baseline ]; then
            ip link set aggr0 mtu $mtu
        else
            netadm set-linkprop -p mtu=$mtu aggr0 2>&1 | grep '^note: ' | sed "s/^note: /NOTE $way /"
        fi
        echo "CHANGE $way $k mtu $mtu at $((t0 - start)) ms took $(($(ms) - t0)) ms"
        k=$((k + 1))
    done
    wait $IPERF || { echo "iperf3 failed:"; cat /tmp/iperf.$way; exit 1; }
    wait $PING || true
    echo "RESULT $way retransmits $(($(retrans) - r0)) pings $(grep -o '[0-9]* packets transmitted, [0-9]* received' /tmp/ping.$way)"
    # Back at 1500, and both members carrying, for the next way.
    [ "$(cat /sys/class/net/aggr0/mtu)" = 1500 ] || ip link set aggr0 mtu 1500
    wait_for 90 carrying
done
"#;

/// One way's figures.
#[derive(Debug, Clone)]
struct Way {
    longest_stall_ms: f64,
    median_gbps: f64,
    retransmits: u64,
    sent: u64,
    lost: u64,
    changes: u32,
    notes: Vec<String>,
}

impl Way {
    fn json(&self) -> Value {
        json!({
            "longest_stall_ms": self.longest_stall_ms,
            "median_gbps": self.median_gbps,
            "retransmits": self.retransmits,
            "pings_sent": self.sent,
            "lost": self.lost,
            "mtu_changes": self.changes,
            "notes": self.notes,
        })
    }
}

/// One mode's guest.
#[derive(Debug, Clone)]
struct Mode {
    name: &'static str,
    bond: String,
    driver: String,
    kernel: String,
    boot_s: f64,
    accel: String,
    baseline: Way,
    netadm: Way,
}

/// The receiver's 100 ms intervals of one iperf3 server test (its JSON).
fn server_intervals(v: &Value) -> Result<(Vec<Interval>, f64), String> {
    let duration = v["start"]["test_start"]["duration"]
        .as_f64()
        .ok_or("iperf3 server: no start.test_start.duration")?;
    let list = v["intervals"].as_array().ok_or("iperf3 server: no intervals")?;
    let iv = list
        .iter()
        .map(|i| {
            interval(i)
                .ok_or_else(|| format!("iperf3 server interval without its figures: {}", i["sum"]))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((iv, duration))
}

/// The figures of way `way` from its server test `v` and the guest's lines.
fn way(out: &Outcome, way: &str, v: &Value) -> Result<Way, String> {
    let (iv, duration) = server_intervals(v)?;
    // From the first change on (the slow start before it says nothing).
    let iv: Vec<Interval> = whole(&iv).into_iter().filter(|i| i.start >= 0.95).collect();
    let text = out.script_output();
    let result = text
        .iter()
        .find_map(|l| l.strip_prefix(&format!("RESULT {way} ")))
        .ok_or_else(|| format!("the guest gave no RESULT for {way}"))?;
    let n: Vec<u64> =
        result.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok()).collect();
    let [retransmits, sent, received] = n[..] else {
        return Err(format!("RESULT {way}: {result:?}"));
    };
    let prefix = format!("NOTE {way} ");
    Ok(Way {
        longest_stall_ms: longest_stall_ms(&iv, duration),
        median_gbps: median_gbps(&iv, duration),
        retransmits,
        sent,
        lost: sent.saturating_sub(received),
        changes: text.iter().filter(|l| l.starts_with(&format!("CHANGE {way} "))).count() as u32,
        notes: text.iter().filter_map(|l| l.strip_prefix(&prefix)).map(str::to_owned).collect(),
    })
}

/// Runs one mode's guest: its namespace, host side, the guest, the
/// figures.
fn run_mode(o: &Opts, name: &'static str) -> Result<Mode, String> {
    let (netadmd, netadm) = binaries("guest")?;
    let bins = netadmd.parent().expect("a binary's directory").to_path_buf();
    let ns = Netns::unique(NS_PREFIX, name).map_err(|e| e.to_string())?;
    let seconds = 1 + o.changes * o.period + 2;
    let script = SCRIPT
        .replace("@LACP@", if name == "lacp" { "active" } else { "off" })
        .replace("@CHANGES@", &o.changes.to_string())
        .replace("@PERIOD@", &o.period.to_string())
        .replace("@SECONDS@", &seconds.to_string());
    let cfg = guest::for_links(&script, ns.name(), 1024)
        .binary("iperf3")
        .nic(Nic::e1000e("ge0"))
        .nic(Nic::e1000e("ge1"));
    let prepared = guest::with_netadm(cfg, &bins, &[("net0", "eth0"), ("net1", "eth1")])
        .prepare()
        .map_err(|e| e.to_string())?;
    let ip = |args: &[&str]| ns.ip(args).map_err(|e| e.to_string());
    for t in prepared.taps() {
        ip(&["link", "set", t, "mtu", "9000"])?;
    }
    // The host side, at MTU 9000 whatever the guest's: netadm (bus and
    // daemon kept until the end) or a bridge.
    let _host: Option<(Daemon, Bus)> = if name == "lacp" {
        let taps: Vec<&str> = prepared.taps().iter().map(String::as_str).collect();
        guest::afpacket_taps(ns.name(), &taps).map_err(|e| format!("arp_ignore: {e}"))?;
        let bus = Bus::try_start(netadm_testkit::Policy::AllowAll).map_err(|e| e.to_string())?;
        let daemon = Daemon::builder(&bus, bus.subdir("host").join("state"))
            .program(&netadmd)
            .netns(ns.name())
            .hardware(&fixtures::afpacket(&["ge0", "ge1"]))
            .try_start()
            .map_err(|e| e.to_string())?;
        let cli = Cli::with(&netadm, bus.address());
        let aggr = ["create-aggr", "-L", "active", "-T", "short", "-P", "L3,L4"];
        for args in [
            &[&aggr[..], &["-l", "i40e0", "-l", "i40e1", "aggr0"]].concat()[..],
            &["set-linkprop", "-p", "mtu=9000", "aggr0"],
            &["create-if", "aggr0"],
            &["create-addr", "-T", "static", "-a", "192.0.2.1/24", "aggr0/v4"],
        ] {
            cli.run(args).map_err(|e| e.to_string())?;
        }
        Some((daemon, bus))
    } else {
        ip(&["link", "add", "br0", "type", "bridge"])?;
        for t in prepared.taps() {
            ip(&["link", "set", t, "master", "br0"])?;
        }
        ip(&["link", "set", "br0", "mtu", "9000", "up"])?;
        ip(&["addr", "add", "192.0.2.1/24", "dev", "br0"])?;
        None
    };
    // One iperf3 server for both runs; each test's JSON as it ends.
    let mut server = netadm_testkit::Reaped(
        in_netns(Some(ns.name()), "iperf3")
            .args(["-s", "-J", "-i", "0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3 server: {e}"))?,
    );
    let stdout = server.0.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
            // Each test's JSON object ends with a "}" alone on its line.
            if line == "}" {
                let _ = tx.send(std::mem::take(&mut text));
            }
        }
    });
    let accel = format!("{:?}", prepared.accel());
    let kernel = prepared.kernel().release.clone();
    let g = prepared.boot().map_err(|e| e.to_string())?;
    let out = g.wait(DEADLINE).map_err(|e| e.to_string())?;
    if out.code != 0 {
        return Err(format!("guest ({name}) failed:\n{}", out.transcript()));
    }
    let mut tests = vec![];
    while let Ok(t) = rx.recv_timeout(Duration::from_secs(5)) {
        tests.push(
            serde_json::from_str::<Value>(&t).map_err(|e| format!("iperf3 server JSON: {e}"))?,
        );
        if tests.len() == 2 {
            break;
        }
    }
    drop(server);
    let [b, n] = &tests[..] else {
        return Err(format!("iperf3 server: {} tests reported, not 2", tests.len()));
    };
    let said = |prefix: &str| {
        out.script_output()
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or("?")
            .trim()
            .to_owned()
    };
    Ok(Mode {
        name,
        bond: said("BOND "),
        driver: said("DRIVER "),
        kernel: said("KERNEL ").replace('?', &kernel),
        boot_s: out.timings.to_ready.map_or(0.0, |d| d.as_secs_f64()),
        accel,
        baseline: way(&out, "baseline", b)?,
        netadm: way(&out, "netadm", n)?,
    })
}

pub fn run(o: Opts) -> Result<(), String> {
    for (name, pid) in sweep_stale(NS_PREFIX) {
        eprintln!("guest: removing {name}, left by an interrupted run (pid {pid})");
    }
    let mut tools = vec![("ethtool", "ethtool"), ("ping", "iputils-ping"), ("iperf3", "iperf3")];
    tools.extend_from_slice(guest::TOOLS);
    let missing = guest::missing_prerequisites(&tools);
    if !missing.is_empty() {
        return Err(format!("guest: needs {}", missing.join(", ")));
    }
    let mut modes = vec![];
    for m in o.modes.split(',') {
        modes.push(run_mode(&o, if m == "lacp" { "lacp" } else { "static" })?);
    }
    let find = |n: &str| modes.iter().find(|m| m.name == n);
    if o.json {
        let mode_json = |m: &Mode| {
            json!({
                "bond": m.bond, "boot_s": m.boot_s,
                "baseline": m.baseline.json(), "netadm": m.netadm.json(),
            })
        };
        let first = &modes[0];
        let mut v = json!({
            "bench": "guest",
            "driver": first.driver,
            "kernel": first.kernel,
            "accel": first.accel,
            "boot_s": first.boot_s,
            "changes": o.changes,
            "period_s": o.period,
        });
        if let Some(s) = find("static") {
            v["static"] = mode_json(s);
            v["baseline"] = s.baseline.json();
            v["netadm"] = s.netadm.json();
        }
        if let Some(l) = find("lacp") {
            v["lacp"] = mode_json(l);
        }
        println!("{v}");
        return Ok(());
    }
    let first = &modes[0];
    println!(
        "guest: driver {}, kernel {}, {} ; {} MTU changes 1500<->9000, one every {} s",
        first.driver, first.kernel, first.accel, o.changes, o.period
    );
    println!(
        "{:<8} {:<9} {:>10} {:>8} {:>11} {:>6} {:>6}",
        "MODE", "WAY", "STALL MS", "RETRANS", "MEDIAN GB/S", "LOST", "PINGS"
    );
    for m in &modes {
        for (w, f) in [("baseline", &m.baseline), ("netadm", &m.netadm)] {
            println!(
                "{:<8} {:<9} {:>10.0} {:>8} {:>11.2} {:>6} {:>6}",
                m.name, w, f.longest_stall_ms, f.retransmits, f.median_gbps, f.lost, f.sent
            );
        }
    }
    for m in &modes {
        println!("{}: {} (boot {:.2} s)", m.name, m.bond, m.boot_s);
        for n in &m.netadm.notes {
            println!("  netadm: {n}");
        }
    }
    println!(
        "baseline: ip link set aggr0 mtu (both members at once); netadm: set-linkprop -p mtu \
         (one member at a time, the bond last). STALL: the longest run of 100 ms intervals below \
         10 % of the median; LOST: pings (every 10 ms, beside the TCP stream) never answered"
    );
    Ok(())
}

//! What the kernel tests share: the root check, and scratch network
//! namespaces named after the test process (`nk<pid>-<tag>`), removed
//! when their guard drops — on a panic too — with every device in them.

#![allow(dead_code)] // each test file uses a part

use std::process::Command;
use std::time::{Duration, Instant};

use netadm_kernel::{Netlink, Netns, OperState};

/// Whether to skip, not being root. Under CI (`CI=true`) not being root
/// fails the test instead: there the kernel paths must run.
pub fn skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return false;
    }
    let why = "creating devices and network namespaces needs root";
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and not root: {why}");
    eprintln!("skipped: {why}");
    true
}

/// Two scratch namespaces, `<tag>-h` (the host's side) and `<tag>-z` (a
/// zone's); none when the test is skipped ([`skip`]).
pub fn pair(tag: &str) -> Option<(Scratch, Scratch)> {
    (!skip()).then(|| (Scratch::new(&format!("{tag}-h")), Scratch::new(&format!("{tag}-z"))))
}

/// A scratch namespace (under /run/netns, as `ip netns add` makes it),
/// loopback up; deleted on drop. Open handles into it (a [`Netlink`], a
/// [`Netns`]) keep it alive until they go too, so declare them after it.
pub struct Scratch {
    /// Its name.
    pub name: String,
}

impl Scratch {
    /// Makes namespace `nk<pid>-<tag>`.
    pub fn new(tag: &str) -> Self {
        let name = format!("nk{}-{tag}", std::process::id());
        // One left by a killed earlier run of this pid is stale.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        sh(&["ip", "netns", "add", &name]);
        let ns = Scratch { name };
        // No IPv6: its link-local addresses and their DAD would change
        // `state()` behind a test's back.
        let off = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"];
        ns.exec(&[&["sysctl", "-qw"][..], &off].concat());
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The namespace, opened.
    pub fn open(&self) -> Netns {
        Netns::open(&self.name).expect("open the scratch namespace")
    }

    /// A connection inside it.
    pub fn netlink(&self) -> Netlink {
        Netlink::open_in(&self.open()).expect("rtnetlink in the scratch namespace")
    }

    /// `ip -n NAME ARGS`: its output (panics on failure).
    pub fn ip(&self, args: &[&str]) -> String {
        sh(&[&["ip", "-n", &self.name][..], args].concat())
    }

    /// `ip netns exec NAME ARGS`: its output (panics on failure).
    pub fn exec(&self, args: &[&str]) -> String {
        sh(&[&["ip", "netns", "exec", &self.name][..], args].concat())
    }

    /// Everything `ip -d link` and `ip addr` say about the namespace, and
    /// the qdiscs, to compare before and after a refused request.
    pub fn state(&self) -> String {
        let mut s = self.ip(&["-d", "link", "show"]);
        s += &self.ip(&["addr", "show"]);
        s += &sh(&["tc", "-n", &self.name, "qdisc", "show"]);
        s
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// Waits until link `index` is operationally up (the kernel's link watch
/// turns carrier into operstate a moment after the device comes up), at
/// most 5 s.
pub fn wait_up(nl: &Netlink, index: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while nl.link_detail(index).unwrap().operstate != OperState::Up {
        assert!(Instant::now() < deadline, "link {index} did not come up");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The iperf3 server of one test: killed on drop if it has not ended.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One TCP stream measured by iperf3 from `client` to a one-off server
/// at `addr` in `server` (`reverse`: the server sends), 4 s with the
/// first (slow start) left out: the receiver's goodput in bit/s and the
/// segment size (MSS), from `iperf3 -J`.
pub fn iperf(server: &Scratch, client: &Scratch, addr: &str, reverse: bool) -> (f64, f64) {
    use std::io::BufRead;
    let mut s = Command::new("ip")
        .args(["netns", "exec", &server.name, "iperf3", "-s", "-1", "--forceflush", "-B", addr])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("iperf3");
    let out = s.stdout.take().unwrap();
    let _server = Server(s);
    // It says when it listens; its output is read to the end (a closed
    // pipe would kill it with SIGPIPE when it prints its results).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if l.contains("Server listening") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("the iperf3 server did not start");
    let mut args = vec!["iperf3", "-c", addr, "-t", "4", "-O", "1", "-J"];
    if reverse {
        args.push("-R");
    }
    let json = client.exec(&args);
    let v: serde_json::Value = serde_json::from_str(&json).expect("iperf3 -J");
    let goodput = v["end"]["sum_received"]["bits_per_second"].as_f64().expect(&json);
    let mss = v["start"]["tcp_mss_default"].as_f64().expect(&json);
    (goodput, mss)
}

/// Runs a command; its standard output (panics, with its error output,
/// when it fails).
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().expect(args[0]);
    assert!(out.status.success(), "{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

//! The kernel's floor for `netadm-bench kernel-links`, through this
//! crate's API beside `ip -batch`: 50 macvlans (bridge mode, group 7) over
//! a veth "NIC", 10 of them up with an IPv4 address, created one by one
//! over one connection; then deleted one by one, or as one group.
//!
//! Root; everything in a scratch namespace it removes. Run:
//! `cargo run --release -p netadm-kernel --example links_floor [RUNS]`.

use std::time::{Duration, Instant};

use netadm_kernel::{Netlink, NewLink};

#[path = "../tests/common/mod.rs"]
mod common;
use common::Scratch;

const N: u32 = 50;
const WITH_ADDR: u32 = 10;
const GROUP: u32 = 7;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The 50 macvlans and 10 addresses, one request after another.
fn create(nl: &Netlink, nic0: u32) {
    for i in 0..N {
        let opts = NewLink { group: Some(GROUP), up: i < WITH_ADDR, ..Default::default() };
        nl.add_macvlan(&format!("vn{i}"), nic0, &opts, None).unwrap();
    }
    for i in 0..WITH_ADDR {
        let l = nl.link_named(&format!("vn{i}")).unwrap();
        nl.add_addr(l.index, format!("10.1.0.{}", i + 1).parse().unwrap(), 24).unwrap();
    }
}

/// The same work as one `ip -batch` (the process start included).
fn ip_batch(ns: &Scratch, lines: &str) -> Duration {
    use std::io::Write;
    let t = Instant::now();
    let mut c = std::process::Command::new("ip")
        .args(["-n", &ns.name, "-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success());
    t.elapsed()
}

fn stats(name: &str, v: &mut [f64]) {
    v.sort_by(f64::total_cmp);
    println!("{name:<44} {:>8.1} {:>8.1}", v[0], v[v.len() / 2]);
}

fn main() {
    let runs: usize = std::env::args().nth(1).map_or(5, |a| a.parse().expect("RUNS"));
    let h = Scratch::new("floor");
    let nl = h.netlink();
    nl.add_veth("nic0", "nic0p", &NewLink { up: true, ..Default::default() }, None).unwrap();
    let peer = nl.index("nic0p").unwrap();
    nl.set_link(peer, Some(true), None).unwrap();
    let nic0 = nl.index("nic0").unwrap();

    let mut add = String::new();
    let mut del = String::new();
    for i in 0..N {
        add += &format!("link add vn{i} link nic0 group {GROUP} type macvlan mode bridge\n");
        del += &format!("link del vn{i}\n");
    }
    for i in 0..WITH_ADDR {
        add += &format!("addr add 10.1.0.{}/24 dev vn{i}\nlink set vn{i} up\n", i + 1);
    }

    let names = [
        "create: netadm-kernel, one connection",
        "create: ip -batch",
        "delete one by one: netadm-kernel",
        "delete one by one: ip -batch",
        "delete group: netadm-kernel",
        "delete group: ip link del group",
        "(ip -V, a process start)",
    ];
    let mut t: Vec<Vec<f64>> = vec![vec![]; names.len()];
    for _ in 0..runs {
        let s = Instant::now();
        create(&nl, nic0);
        t[0].push(ms(s.elapsed()));
        // By index, as a caller that read them back holds them.
        let ix: Vec<u32> = (0..N).map(|i| nl.index(&format!("vn{i}")).unwrap()).collect();
        let s = Instant::now();
        for i in ix {
            nl.del_link(i).unwrap();
        }
        t[2].push(ms(s.elapsed()));

        t[1].push(ms(ip_batch(&h, &add)));
        t[3].push(ms(ip_batch(&h, &del)));

        create(&nl, nic0);
        let s = Instant::now();
        nl.del_group(GROUP).unwrap();
        t[4].push(ms(s.elapsed()));

        t[1].push(ms(ip_batch(&h, &add)));
        t[5].push(ms(ip_batch(&h, &format!("link del group {GROUP}\n"))));
        let s = Instant::now();
        common::sh(&["ip", "-V"]);
        t[6].push(ms(s.elapsed()));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("{runs} runs; load average {}", load.split(' ').take(3).collect::<Vec<_>>().join(" "));
    println!("{:<44} {:>8} {:>8}", "ms", "min", "median");
    for (n, v) in names.iter().zip(&mut t) {
        stats(n, v);
    }
}

//! Load: 50 concurrent clients, each on its own bus connection, mix
//! mutations and shows for a bounded time against one netadmd whose
//! aggregation carries generator traffic. No deadlock (every call answers
//! within the method timeout and every client ends by its deadline), every
//! mutation is done or refused with a typed error that names a cause
//! (NotFound, Exists, Busy), and the final configuration equals a serial
//! replay of the successful mutations on a fresh daemon. The show calls'
//! latency is printed (p50, p99, max), never asserted.
//!
//! `NETADM_LOAD_SECONDS` sets the duration (default 5; the figure
//! is 60).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use netadm_dbus::{Error, NetadmProxy};
use netadm_testkit::*;

const CLIENTS: usize = 50;
/// VNIC names each client works on (its own: mutations of two clients
/// commute, so a replay client by client is a serial order).
const NAMES: usize = 3;

/// One mutation a client made.
#[derive(Debug, Clone)]
enum Op {
    CreateVnic(String, String),
    DeleteVnic(String),
    CreateIf(String),
    DeleteIf(String),
    CreateAddr(String, String),
    DeleteAddr(String),
    Mtu(u32),
}

async fn apply(p: &NetadmProxy<'_>, op: &Op) -> Result<(), Error> {
    let r = match op {
        Op::CreateVnic(n, mac) => p.create_vnic(n, "aggr0", mac, 0, BTreeMap::new(), false).await,
        Op::DeleteVnic(n) => p.delete_vnic(n, false).await,
        Op::CreateIf(n) => p.create_if(n, false).await,
        Op::DeleteIf(n) => p.delete_if(n, false).await,
        Op::CreateAddr(o, a) => p.create_addr(o, "static", a, false).await,
        Op::DeleteAddr(o) => p.delete_addr(o, false).await,
        Op::Mtu(m) => {
            let props = BTreeMap::from([("mtu".to_owned(), m.to_string())]);
            p.set_link_prop("aggr0", props, false).await
        }
    };
    r.map(drop).map_err(Error::from_zbus)
}

/// The show methods the clients call, by index.
const SHOWS: [&str; 9] = [
    "ShowLink",
    "ShowAggr",
    "ShowVnic",
    "ShowIf",
    "ShowAddr",
    "ShowTraffic",
    "ShowStats",
    "ShowHistory",
    "ShowPhys",
];

async fn show(p: &NetadmProxy<'_>, which: usize) -> Result<(), Error> {
    let r = match which {
        0 => p.show_link().await.map(drop),
        1 => p.show_aggr().await.map(drop),
        2 => p.show_vnic().await.map(drop),
        3 => p.show_if().await.map(drop),
        4 => p.show_addr().await.map(drop),
        5 => p.show_traffic().await.map(drop),
        6 => p.show_stats().await.map(drop),
        7 => p.show_history().await.map(drop),
        _ => p.show_phys().await.map(drop),
    };
    r.map_err(Error::from_zbus)
}

/// What the configuration is, as the show verbs report it.
async fn state(p: &NetadmProxy<'_>) -> String {
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        p.show_link().await.unwrap(),
        p.show_vnic().await.unwrap(),
        p.show_if().await.unwrap(),
        p.show_addr().await.unwrap()
    )
}

async fn connect(bus: &str) -> NetadmProxy<'static> {
    let conn = zbus::connection::Builder::address(bus)
        .unwrap()
        // A call that never answers is a deadlock: it fails the test.
        .method_timeout(Duration::from_secs(30))
        .build()
        .await
        .unwrap();
    NetadmProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .unwrap()
}

/// What one client did.
#[derive(Default)]
struct Report {
    done: Vec<Op>,
    refused: BTreeMap<&'static str, u32>,
    /// Per show method (index into SHOWS), each call's latency in µs.
    show_us: [Vec<u64>; 9],
}

async fn client(bus: String, i: usize, until: Instant) -> Result<Report, String> {
    let p = connect(&bus).await;
    let mut r = Report::default();
    // xorshift, seeded per client: no two clients alike.
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut mtu = 1500;
    while Instant::now() < until {
        let roll = next();
        if roll % 4 != 0 {
            let which = (next() % SHOWS.len() as u64) as usize;
            let t = Instant::now();
            show(&p, which).await.map_err(|e| format!("client {i}: show: {e:?}"))?;
            r.show_us[which].push(t.elapsed().as_micros() as u64);
            continue;
        }
        let j = (next() % NAMES as u64) as usize;
        let n = format!("c{i}v{j}");
        let op = match next() % if i == 0 { 7 } else { 6 } {
            0 => Op::CreateVnic(n, format!("02:01:00:{i:02x}:00:{j:02x}")),
            1 => Op::DeleteVnic(n),
            2 => Op::CreateIf(n),
            3 => Op::DeleteIf(n),
            4 => Op::CreateAddr(format!("{n}/a"), format!("10.{i}.{j}.1/24")),
            5 => Op::DeleteAddr(format!("{n}/a")),
            // One client changes the aggregation's MTU (under traffic):
            // its order against the others' VNICs does not matter.
            _ => {
                mtu = if mtu == 1500 { 9000 } else { 1500 };
                Op::Mtu(mtu)
            }
        };
        match apply(&p, &op).await {
            Ok(()) => r.done.push(op),
            Err(e) => match e.kind() {
                // What a state that does not allow the verb gets.
                k @ ("NotFound" | "Exists" | "Busy") => *r.refused.entry(k).or_default() += 1,
                _ => return Err(format!("client {i}: {op:?}: {} {}", e.kind(), e.message())),
            },
        }
    }
    Ok(r)
}

fn pct(v: &[u64], p: f64) -> f64 {
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)] as f64 / 1000.0
}

#[test]
fn fifty_clients_mixing_changes_and_shows_under_traffic_end_in_a_serial_state() {
    let seconds: u64 =
        std::env::var("NETADM_LOAD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let bus = Bus::start();
    let addr = bus.address().to_owned();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build();
    let rt = rt.unwrap();

    let d = Daemon::start(&bus, &bus.subdir("state"), &[]);
    json(&bus, &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    json(&bus, &["start-traffic", "-l", "aggr0", "--rate", "50000", "--flows", "8"]);

    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let reports: Vec<Report> = rt.block_on(async {
        let hs: Vec<_> =
            (0..CLIENTS).map(|i| tokio::spawn(client(addr.clone(), i, until))).collect();
        let mut out = vec![];
        for h in hs {
            out.push(h.await.unwrap().unwrap_or_else(|e| panic!("{e}")));
        }
        out
    });
    let took = started.elapsed();
    // Every client ended: no call was left without an answer.
    assert!(took < Duration::from_secs(seconds + 60), "clients ran {took:?}: a call hung");
    let traffic = json(&bus, &["show-traffic"]);
    let p = rt.block_on(connect(&addr));
    let after = rt.block_on(state(&p));
    drop(p);
    assert!(d.stop().success());

    // The successful mutations, client by client, on a fresh daemon.
    let d = Daemon::start(&bus, &bus.subdir("replay"), &[]);
    json(&bus, &["create-aggr", "-l", "i40e0", "-l", "i40e1", "aggr0"]);
    let p = rt.block_on(connect(&addr));
    let replay = rt.block_on(async {
        for r in &reports {
            for op in &r.done {
                apply(&p, op).await.unwrap_or_else(|e| panic!("replay {op:?}: {e:?}"));
            }
        }
        state(&p).await
    });
    drop(p);
    d.stop();
    assert_eq!(after, replay, "the state after the load is not the serial replay's");

    let per = |w: usize| {
        let mut v: Vec<u64> = reports.iter().flat_map(|r| r.show_us[w].iter().copied()).collect();
        v.sort_unstable();
        v
    };
    let mut show_us: Vec<u64> = (0..SHOWS.len()).flat_map(per).collect();
    show_us.sort_unstable();
    let by_method: Vec<String> = (0..SHOWS.len())
        .map(|w| {
            let v = per(w);
            if v.is_empty() {
                return format!("{} -", SHOWS[w]);
            }
            format!("{} {:.1}", SHOWS[w], pct(&v, 0.99))
        })
        .collect();
    let done: usize = reports.iter().map(|r| r.done.len()).sum();
    let mut refused: BTreeMap<&str, u32> = BTreeMap::new();
    for r in &reports {
        for (k, n) in &r.refused {
            *refused.entry(k).or_default() += n;
        }
    }
    let t = &traffic[0];
    println!(
        "load: {CLIENTS} clients, {seconds} s: {} show calls, p50 {:.1} ms, p99 {:.1} ms, max \
         {:.1} ms; {done} mutations done, refused {refused:?}; traffic on aggr0 meanwhile: sent \
         {}, lost {}; p99 by method (ms): {}",
        show_us.len(),
        pct(&show_us, 0.50),
        pct(&show_us, 0.99),
        pct(&show_us, 1.0),
        t["sent"],
        t["lost"],
        by_method.join(", ")
    );
    assert!(!show_us.is_empty() && done > 0, "the clients did nothing");
}

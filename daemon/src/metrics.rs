//! Prometheus metrics (`--metrics-listen ADDR`, off by default): a tiny
//! HTTP/1.0 responder on the daemon's runtime that answers `GET /metrics`
//! with the text exposition format (version 0.0.4), built at each scrape
//! from the same snapshots the `Show*` methods read, plus the counts and
//! durations of the mutating verbs recorded as they finish.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use netadm_core::Core;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Upper bounds (seconds) of the verb duration histogram's buckets: from a
/// read-back's 1 ms to the seconds a `sequential` ring restart takes.
const BUCKETS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// A request larger than this, or slower than [`REQUEST_TIMEOUT`], is
/// dropped: nothing a scraper sends needs more.
const MAX_REQUEST: usize = 8192;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes answered at once; a connection beyond them is closed as it is
/// accepted, so idle connections cannot take the daemon's descriptors.
const MAX_CONNECTIONS: usize = 32;

/// One verb's books.
#[derive(Default)]
struct Verb {
    /// Calls by result: `ok` or the error kind.
    results: BTreeMap<&'static str, u64>,
    /// Cumulative bucket counts, the sum of durations and the count.
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

static VERBS: Mutex<BTreeMap<&'static str, Verb>> = Mutex::new(BTreeMap::new());

/// Records one finished call of verb `op` (`result` is `ok` or the error
/// kind) that took `took`.
pub fn observe(op: &'static str, result: &'static str, took: Duration) {
    let secs = took.as_secs_f64();
    let mut verbs = VERBS.lock().unwrap_or_else(|p| p.into_inner());
    let v = verbs.entry(op).or_default();
    *v.results.entry(result).or_default() += 1;
    for (b, le) in v.buckets.iter_mut().zip(BUCKETS) {
        if secs <= le {
            *b += 1;
        }
    }
    v.sum += secs;
    v.count += 1;
}

/// Binds `addr` and serves scrapes on the current runtime; returns the
/// address bound (port 0 picks one). An accept that fails (out of file
/// descriptors) would fail again at once: the listener then stops, as the
/// private socket's does, rather than spin.
pub async fn start(addr: &str, core: Arc<Core>) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics-listen {addr}: cannot listen: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((conn, _)) => {
                    // Over the limit, the connection is dropped: closed.
                    if let Ok(slot) = slots.clone().try_acquire_owned() {
                        let core = core.clone();
                        tokio::spawn(async move {
                            answer(conn, core).await;
                            drop(slot);
                        });
                    }
                }
                Err(e) => {
                    tracing::error!("metrics: accept: {e}; no longer served");
                    return;
                }
            }
        }
    });
    Ok(bound)
}

/// Reads one request and answers it; the connection closes after.
async fn answer(mut conn: TcpStream, core: Arc<Core>) {
    let mut req = Vec::with_capacity(512);
    let head = tokio::time::timeout(REQUEST_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < MAX_REQUEST {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    if head != Ok(true) {
        return;
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, ctype, body) = match (method, path) {
        (b"GET", b"/metrics") => match tokio::task::spawn_blocking(move || render(&core)).await {
            Ok(text) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", text),
            Err(e) => ("500 Internal Server Error", "text/plain", format!("{e}\n")),
        },
        (b"GET", _) => ("404 Not Found", "text/plain", "only /metrics is served\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET is served\n".into()),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes()).await;
    let _ = conn.write_all(body.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// Writes metric families: `# HELP`, `# TYPE`, then samples.
struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                let _ = write!(self.0, "{sep}{k}=\"{v}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A family with one sample per row of `rows`.
    fn each<T>(
        &mut self,
        rows: &[T],
        name: &str,
        kind: &str,
        help: &str,
        sample: impl Fn(&T) -> (Vec<(&str, &str)>, f64),
    ) {
        if rows.is_empty() {
            return;
        }
        self.family(name, kind, help);
        for r in rows {
            let (labels, v) = sample(r);
            self.sample(name, &labels, v);
        }
    }
}

/// The whole exposition.
pub fn render(core: &Core) -> String {
    let mut o = Out(String::with_capacity(16 * 1024));
    o.family("netadm_build_info", "gauge", "netadmd's version.");
    o.sample("netadm_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1);

    let stats = core.show_stats();
    for (name, help, get) in [
        (
            "receive_packets",
            "Frames received.",
            (|s| s.ipackets) as fn(&netadm_core::StatsRow) -> u64,
        ),
        ("receive_bytes", "Bytes received.", |s| s.rbytes),
        ("receive_drops", "Frames dropped on receive (no buffer, ring stopped).", |s| s.idrops),
        ("transmit_packets", "Frames sent.", |s| s.opackets),
        ("transmit_bytes", "Bytes sent.", |s| s.obytes),
        ("transmit_drops", "Frames the wire lost on send (no carrier, far end full).", |s| {
            s.odrops
        }),
    ] {
        let metric = format!("netadm_link_{name}_total");
        o.each(&stats, &metric, "counter", help, |s| (vec![("link", &s.link)], get(s) as f64));
    }

    let prot = core.show_protect_stats();
    if !prot.is_empty() {
        let name = "netadm_link_protection_drops_total";
        o.family(name, "counter", "Frames link protection dropped on a VNIC, by reason.");
        for p in &prot {
            for (reason, n) in [
                ("mac-nospoof", p.mac_nospoof),
                ("ip-nospoof", p.ip_nospoof),
                ("dhcp-nospoof", p.dhcp_nospoof),
                ("restricted", p.restricted),
            ] {
                o.sample(name, &[("link", &p.link), ("reason", reason)], n);
            }
        }
        let passed = "netadm_link_protection_passed_packets_total";
        o.each(&prot, passed, "counter", "Frames link protection let through.", |p| {
            (vec![("link", &p.link)], p.opackets as f64)
        });
    }

    let links = core.show_link();
    o.each(&links, "netadm_link_mtu_bytes", "gauge", "MTU of each datalink.", |l| {
        (vec![("link", &l.link), ("class", &l.class)], f64::from(l.mtu))
    });
    o.each(&links, "netadm_link_up", "gauge", "1 when the datalink's state is up.", |l| {
        (vec![("link", &l.link)], f64::from(u8::from(l.state == "up")))
    });

    let ifs = core.show_if();
    let drift = "1 when someone changed or deleted the IP interface's kernel device (show-if: \
                 drifted or missing).";
    o.each(&ifs, "netadm_interface_drifted", "gauge", drift, |i| {
        (vec![("ifname", &i.ifname)], f64::from(u8::from(!i.drift.is_empty())))
    });

    let phys = core.show_phys();
    if !phys.is_empty() {
        o.family("netadm_port_rings", "gauge", "Descriptor rings of each port, by state.");
        for p in &phys {
            let started = f64::from(p.rings_started);
            let stopped = f64::from(p.rings.saturating_sub(p.rings_started));
            o.sample("netadm_port_rings", &[("port", &p.link), ("state", "started")], started);
            o.sample("netadm_port_rings", &[("port", &p.link), ("state", "stopped")], stopped);
        }
    }
    o.each(&phys, "netadm_port_dma_bytes", "gauge", "DMA memory the port's rings hold.", |p| {
        (vec![("port", &p.link)], p.dma_bytes as f64)
    });

    {
        let verbs = VERBS.lock().unwrap_or_else(|p| p.into_inner());
        if !verbs.is_empty() {
            o.family("netadm_operations_total", "counter", "Mutating calls, by verb and result.");
            for (op, v) in verbs.iter() {
                for (result, n) in &v.results {
                    o.sample("netadm_operations_total", &[("op", op), ("result", result)], n);
                }
            }
            let h = "netadm_operation_duration_seconds";
            o.family(h, "histogram", "Time the daemon took for each mutating call, by verb.");
            for (op, v) in verbs.iter() {
                for (le, n) in BUCKETS.iter().zip(v.buckets) {
                    o.sample(&format!("{h}_bucket"), &[("op", op), ("le", &le.to_string())], n);
                }
                o.sample(&format!("{h}_bucket"), &[("op", op), ("le", "+Inf")], v.count);
                o.sample(&format!("{h}_sum"), &[("op", op)], v.sum);
                o.sample(&format!("{h}_count"), &[("op", op)], v.count);
            }
        }
    }

    let traffic = core.show_traffic();
    type Book = (&'static str, &'static str, &'static str, fn(&netadm_core::TrafficRow) -> f64);
    let books: [Book; 10] = [
        ("netadm_traffic_running", "gauge", "1 while the generator sends.", |t| {
            f64::from(u8::from(t.running))
        }),
        ("netadm_traffic_sent_frames_total", "counter", "Frames the link accepted.", |t| {
            t.sent as f64
        }),
        ("netadm_traffic_received_frames_total", "counter", "Distinct frames received.", |t| {
            t.received as f64
        }),
        (
            "netadm_traffic_lost_frames",
            "gauge",
            "Sent and not received (includes in flight).",
            |t| t.lost as f64,
        ),
        (
            "netadm_traffic_reordered_frames_total",
            "counter",
            "Received after a later frame.",
            |t| t.reordered as f64,
        ),
        ("netadm_traffic_duplicated_frames_total", "counter", "Received more than once.", |t| {
            t.duplicated as f64
        }),
        ("netadm_traffic_latency_avg_seconds", "gauge", "Mean latency.", |t| {
            t.latency_avg_us / 1e6
        }),
        ("netadm_traffic_latency_p99_seconds", "gauge", "99th percentile latency.", |t| {
            t.latency_p99_us / 1e6
        }),
        ("netadm_traffic_latency_max_seconds", "gauge", "Largest latency.", |t| {
            t.latency_max_us / 1e6
        }),
        ("netadm_traffic_pause_max_seconds", "gauge", "Longest sender pause.", |t| {
            t.pause_max_us / 1e6
        }),
    ];
    for (name, kind, help, get) in books {
        o.each(&traffic, name, kind, &format!("Traffic generator: {help}"), |t| {
            (vec![("link", &t.link)], get(t))
        });
    }
    o.0
}

//! `kernel-links`: netadm managing the host's own NICs (kernel ports)
//! against the kernel's own cost, side by side in one run, in network
//! namespaces this benchmark makes and removes (and sweeps, when a killed
//! run left them).
//!
//! The work: `--vnics` VNICs (macvlans in bridge mode, half over each of
//! two veth "NICs" nic0/nic1, fixed MACs) with an IP interface and a
//! static address on the first `--addrs`, created, then deleted. Each
//! round does it three ways, each in a namespace of its own with its own
//! two NICs (their peers in one far-side namespace):
//!
//! - **`ip -batch`**, the floor, what the kernel itself costs: one `ip
//!   -batch` making every device, bringing it up and adding the
//!   addresses; one deleting the devices one by one (`link del`, as `ip`
//!   and NetworkManager do); and, as the floor of a batched deletion, the
//!   same devices made in a link group and deleted with one `ip link del
//!   group`. For the per-command comparison, the parts alone too: the
//!   devices, the addresses added, the addresses deleted, the devices
//!   deleted, each one batch;
//! - **netadm commands**, persistent: `create-vnic` for each VNIC,
//!   `create-if` and `create-addr` for each address (the verbs are
//!   separate: 70 for 50 VNICs and 10 addresses), then `delete-addr`,
//!   `delete-if` and `delete-vnic`; the wall time of each `netadm` process
//!   and the daemon's own `total_us`; each verb's commands alternately
//!   over netadmd's private socket (as root's `netadm` reaches it) and
//!   over the bus (as anyone else's does), interleaved so that both ways
//!   see the same machine;
//! - **one `netadm apply`**, persistent, of the commands' daemon's
//!   `show-config` (the same end state to the byte), then one `apply` of
//!   an empty document removing it all.
//!
//! Everything else `netadm` does here goes root's way, over the private
//! socket. Every way is read back: the namespace holds the VNICs and addresses
//! after the creation and none after the deletion, or the run fails.
//!
//! Then the scale: for each n of `--sizes`, a netadmd holding n VNICs
//! (made by one apply, timed) measures each verb `--samples` times
//! (create-vnic, create-if, create-addr, set-linkprop mtu, delete-addr,
//! delete-if, delete-vnic: daemon `total_us` and wall, medians), and one
//! apply removing all n is timed; the growth exponent between the
//! smallest and largest n says whether a verb stays flat.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use netadm_testkit::{Bus, Cli, Daemon, Netns, Policy, Scratch, fixtures, run as cmd, sweep_stale};
use serde_json::{Value, json};

use crate::apply::median;
use crate::binaries;
use crate::scale::{mutation, netadmd, slope, stop};

/// The sizes of the scale part, `N,N,...`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes(pub Vec<usize>);

impl std::str::FromStr for Sizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut v: Vec<usize> = s
            .split(',')
            .map(|x| x.trim().parse::<usize>().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        v.sort_unstable();
        v.dedup();
        Ok(Sizes(v))
    }
}

opts!("kernel-links" {
    vnics: usize = 50,
    addrs: usize = 10,
    rounds: usize = 3,
    sizes: Sizes = Sizes(vec![10, 100, 1_000]),
    samples: usize = 10,
});

impl Opts {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let o = Self::read(args)?;
        if o.vnics == 0 || o.vnics > 60_000 || o.addrs > o.vnics || o.addrs > 250 {
            return Err(
                "kernel-links: need 1 <= --vnics <= 60000 and --addrs <= min(--vnics, 250)".into(),
            );
        }
        if o.rounds == 0 || o.samples == 0 || o.samples > 250 {
            return Err("kernel-links: need --rounds >= 1 and 1 <= --samples <= 250".into());
        }
        if o.sizes.0.is_empty() || o.sizes.0.contains(&0) || o.sizes.0.iter().any(|n| *n > 60_000) {
            return Err("kernel-links: --sizes: each size 1..=60000".into());
        }
        Ok(o)
    }
}

/// Namespace names: this prefix, our pid, what it is for.
const NS_PREFIX: &str = "nbl";
/// The temporary directory's name: this prefix and our pid.
const TEMP_PREFIX: &str = "netadm-bench-kernel-links-";
/// The link group the `ip` floor deletes in one request.
const GROUP: &str = "77";

/// VNIC `i`'s name.
fn vnic(i: usize) -> String {
    format!("kv{i}")
}

/// VNIC `i`'s MAC, as netadm writes it.
fn mac(i: usize) -> String {
    format!("2:8:20:{:x}:{:x}:{:x}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
}

/// The NIC (device) and port (link) VNIC `i` is over: half over each.
fn nic(i: usize) -> (&'static str, &'static str) {
    if i % 2 == 0 { ("nic0", "net0") } else { ("nic1", "net1") }
}

/// The address of the `i`-th IP interface (`i` < 256), a /24 of its own
/// in 10.`net`.0.0/16.
fn addr(i: usize, net: u8) -> String {
    format!("10.{net}.{i}.1/24")
}

/// `ip -n NS -batch FILE` of `lines`; its wall time, µs.
fn ip_batch(ns: &str, dir: &Path, lines: &str) -> Result<f64, String> {
    let file = dir.join(format!("{ns}.batch"));
    std::fs::write(&file, lines).map_err(|e| format!("{}: {e}", file.display()))?;
    let f = file.to_str().ok_or("temporary path is not UTF-8")?;
    let t = Instant::now();
    cmd(&["ip", "-n", ns, "-batch", f])?;
    Ok(t.elapsed().as_micros() as f64)
}

/// How many macvlans and IPv4 addresses on them namespace `ns` has.
fn count(ns: &str) -> Result<(usize, usize), String> {
    let out = cmd(&["ip", "-n", ns, "-d", "-j", "addr", "show", "type", "macvlan"])?;
    let v: Value = serde_json::from_str(&out).map_err(|e| format!("ip -j addr: {e}"))?;
    let links = v.as_array().map_or(&[][..], Vec::as_slice);
    let addrs = links
        .iter()
        .flat_map(|l| l["addr_info"].as_array().into_iter().flatten())
        .filter(|a| a["family"] == "inet")
        .count();
    Ok((links.len(), addrs))
}

/// Fails unless `ns` holds `links` macvlans with `addrs` addresses.
fn expect(ns: &str, what: &str, links: usize, addrs: usize) -> Result<(), String> {
    let got = count(ns)?;
    if got != (links, addrs) {
        return Err(format!(
            "{what}: {ns} has {} macvlans with {} addresses, expected {links} with {addrs}",
            got.0, got.1
        ));
    }
    Ok(())
}

/// A host: namespace `name` with veth "NICs" nic0/nic1, their peers
/// `{tag}0`/`{tag}1` in the far side `far`.
fn host(name: String, far: &str, tag: &str) -> Result<Netns, String> {
    let ns = Netns::new(name)?;
    for i in 0..2 {
        netadm_testkit::veth_nic(ns.name(), &format!("nic{i}"), far, &format!("{tag}{i}"), None)?;
    }
    Ok(ns)
}

/// What the kernel costs, µs: `ip -batch` as one, and by part.
#[derive(Debug, Clone, Copy, Default)]
struct Floor {
    /// One batch: every device made and up, the addresses added.
    create: f64,
    /// One batch deleting every device (`link del` each).
    delete: f64,
    /// One `ip link del group` of them all.
    group_delete: f64,
    /// The parts alone: devices made and up; addresses added; addresses
    /// deleted; devices deleted.
    links: f64,
    addr_add: f64,
    addr_del: f64,
    link_del: f64,
}

/// The batch lines making VNICs 0..n (in `group` if given) and adding
/// the first `addrs` addresses.
fn make_lines(n: usize, addrs: usize, group: Option<&str>) -> (String, String) {
    let mut links = String::new();
    for i in 0..n {
        let g = group.map(|g| format!(" group {g}")).unwrap_or_default();
        let _ = writeln!(
            links,
            "link add {} link {} address {}{g} type macvlan mode bridge\nlink set {} up",
            vnic(i),
            nic(i).0,
            mac(i),
            vnic(i)
        );
    }
    let mut a = String::new();
    for i in 0..addrs {
        let _ = writeln!(a, "addr add {} dev {}", addr(i, 0), vnic(i));
    }
    (links, a)
}

fn floor(o: &Opts, ns: &str, dir: &Path) -> Result<Floor, String> {
    let (n, k) = (o.vnics, o.addrs);
    let mut f = Floor::default();
    let (links, addrs) = make_lines(n, k, None);
    f.create = ip_batch(ns, dir, &format!("{links}{addrs}"))?;
    expect(ns, "ip -batch", n, k)?;
    let dels: String = (0..n).map(|i| format!("link del {}\n", vnic(i))).collect();
    f.delete = ip_batch(ns, dir, &dels)?;
    expect(ns, "ip -batch link del", 0, 0)?;
    let (glinks, gaddrs) = make_lines(n, k, Some(GROUP));
    ip_batch(ns, dir, &format!("{glinks}{gaddrs}"))?;
    let t = Instant::now();
    cmd(&["ip", "-n", ns, "link", "del", "group", GROUP])?;
    f.group_delete = t.elapsed().as_micros() as f64;
    expect(ns, "ip link del group", 0, 0)?;
    f.links = ip_batch(ns, dir, &links)?;
    f.addr_add = ip_batch(ns, dir, &addrs)?;
    let adels: String =
        (0..k).map(|i| format!("addr del {} dev {}\n", addr(i, 0), vnic(i))).collect();
    f.addr_del = if k > 0 { ip_batch(ns, dir, &adels)? } else { 0.0 };
    f.link_del = ip_batch(ns, dir, &dels)?;
    expect(ns, "ip -batch parts", 0, 0)?;
    Ok(f)
}

/// The verbs of the work, as `netadm` arguments: creation, deletion.
fn verbs(n: usize, addrs: usize) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let mut make = vec![];
    for i in 0..n {
        make.push(s(&["create-vnic", "-l", nic(i).1, "-m", &mac(i), &vnic(i)]));
    }
    let mut gone = vec![];
    for i in 0..addrs {
        let obj = format!("{}/v4", vnic(i));
        make.push(s(&["create-if", &vnic(i)]));
        make.push(s(&["create-addr", "-T", "static", "-a", &addr(i, 0), &obj]));
        gone.push(s(&["delete-addr", &obj]));
        gone.push(s(&["delete-if", &vnic(i)]));
    }
    gone.extend((0..n).map(|i| s(&["delete-vnic", &vnic(i)])));
    (make, gone)
}

/// A verb's name: its first argument.
fn verb_of(args: &[String]) -> &str {
    args.first().map_or("", String::as_str)
}

/// Per verb, each command's (daemon, wall), µs.
type PerVerb = std::collections::BTreeMap<String, Vec<(f64, f64)>>;

/// The commands' figures: totals (µs) and, per verb, each command's
/// (daemon, wall).
#[derive(Debug, Clone, Default)]
struct Commands {
    create_wall: f64,
    create_daemon: f64,
    delete_wall: f64,
    delete_daemon: f64,
    per_verb: PerVerb,
    /// The same, of the commands that went over the bus.
    per_verb_bus: PerVerb,
    /// The wall time of reads (`show-link net0`), µs: what a `netadm`
    /// process costs that changes nothing (start, the socket, the reply);
    /// over the private socket, then over the bus.
    reads: Vec<f64>,
    reads_bus: Vec<f64>,
}

/// Runs `list` as separate `netadm` processes, each verb's alternately
/// over the private socket (`cli`, first) and over the bus (`bus`),
/// adding to `c`; (daemon, wall) totals.
fn commands(
    cli: &Cli,
    bus: &Cli,
    list: &[Vec<String>],
    c: &mut Commands,
) -> Result<(f64, f64), String> {
    let (mut d, mut w) = (0.0, 0.0);
    for args in list {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let verb = verb_of(args).to_owned();
        let done = c.per_verb.get(&verb).map_or(0, Vec::len)
            + c.per_verb_bus.get(&verb).map_or(0, Vec::len);
        let (way, cli) =
            if done % 2 == 0 { (&mut c.per_verb, cli) } else { (&mut c.per_verb_bus, bus) };
        let (daemon, wall) = mutation(cli, &a)?;
        way.entry(verb).or_default().push((daemon, wall));
        d += daemon;
        w += wall;
    }
    Ok((d, w))
}

/// `netadm --json apply -f FILE`: (daemon total_us, wall µs, changed).
fn apply(cli: &Cli, file: &Path) -> Result<(f64, f64, bool), String> {
    let f = file.to_str().ok_or("temporary path is not UTF-8")?;
    let (v, wall) = cli.json_timed(&["apply", "-f", f])?;
    let daemon = v["result"]["timing"]["total_us"].as_f64().unwrap_or(0.0);
    Ok((daemon, wall.as_micros() as f64, v["changed"] == true))
}

/// One apply's figures, µs.
#[derive(Debug, Clone, Copy, Default)]
struct Applied {
    create_wall: f64,
    create_daemon: f64,
    delete_wall: f64,
    delete_daemon: f64,
}

/// One round's figures.
#[derive(Debug, Clone, Default)]
struct Round {
    floor: Floor,
    cmds: Commands,
    apply: Applied,
}

/// Everything a round needs beyond its options.
struct Env<'a> {
    netadmd: &'a Path,
    cli: &'a Cli,
    bus: &'a Bus,
    dir: &'a Path,
    far: &'a str,
    say: &'a dyn Fn(&str),
}

/// netadmd in `ns` on kernel ports net0/net1 (nic0/nic1), state in
/// `state`, serving a private socket beside it; and `netadm` as root
/// runs it, over that socket.
fn daemon(env: &Env<'_>, ns: &str, state: &Path) -> Result<(Daemon, Cli), String> {
    let hw = fixtures::kernel(&["nic0", "nic1"]);
    let socket = state.with_extension("private");
    let d = netadmd(env.netadmd, env.bus, state, Some(ns))
        .hardware(&hw)
        .private_socket(&socket)
        .try_start()?;
    Ok((d, env.cli.clone().private(socket)))
}

/// Says how long one way took (not under `--json`).
fn progress(env: &Env<'_>, way: &str, create_us: f64, delete_us: f64) {
    (env.say)(&format!(
        "  {way}: create {:.1} ms, delete {:.1} ms",
        create_us / 1e3,
        delete_us / 1e3
    ));
}

/// Writes the empty document (no links) in `dir`; its path.
fn empty_doc(dir: &Path) -> Result<std::path::PathBuf, String> {
    let empty = dir.join("empty.toml");
    std::fs::write(&empty, "version = 1\n").map_err(|e| format!("{}: {e}", empty.display()))?;
    Ok(empty)
}

fn round(o: &Opts, env: &Env<'_>, k: usize) -> Result<Round, String> {
    let pid = std::process::id();
    let (n, addrs) = (o.vnics, o.addrs);
    let mut r = Round::default();
    // The floor.
    let ns = host(format!("{NS_PREFIX}{pid}r{k}ip"), env.far, &format!("i{k}x"))?;
    r.floor = floor(o, ns.name(), env.dir)?;
    drop(ns);
    progress(env, "ip -batch", r.floor.create, r.floor.delete);
    // The commands.
    let ns = host(format!("{NS_PREFIX}{pid}r{k}cmd"), env.far, &format!("c{k}x"))?;
    let (d, cli) = daemon(env, ns.name(), &env.dir.join(format!("cmd{k}")))?;
    let (make, gone) = verbs(n, addrs);
    (r.cmds.create_daemon, r.cmds.create_wall) = commands(&cli, env.cli, &make, &mut r.cmds)?;
    expect(ns.name(), "netadm commands", n, addrs)?;
    let (doc, _) = cli.run_timed(&["show-config"])?;
    let read = |cli: &Cli| -> Result<f64, String> {
        Ok(cli.run_timed(&["--json", "show-link", "net0"])?.1.as_micros() as f64)
    };
    for _ in 0..10 {
        r.cmds.reads.push(read(&cli)?);
        r.cmds.reads_bus.push(read(env.cli)?);
    }
    (r.cmds.delete_daemon, r.cmds.delete_wall) = commands(&cli, env.cli, &gone, &mut r.cmds)?;
    expect(ns.name(), "netadm delete commands", 0, 0)?;
    stop(d)?;
    drop(ns);
    progress(env, "commands", r.cmds.create_wall, r.cmds.delete_wall);
    // One apply, of the same document, and one of none.
    let ns = host(format!("{NS_PREFIX}{pid}r{k}ap"), env.far, &format!("a{k}x"))?;
    let (d, cli) = daemon(env, ns.name(), &env.dir.join(format!("apply{k}")))?;
    let file = env.dir.join(format!("doc{k}.toml"));
    std::fs::write(&file, &doc).map_err(|e| format!("{}: {e}", file.display()))?;
    let (daemon_us, wall, _) = apply(&cli, &file)?;
    (r.apply.create_daemon, r.apply.create_wall) = (daemon_us, wall);
    expect(ns.name(), "one apply", n, addrs)?;
    let (after, _) = cli.run_timed(&["show-config"])?;
    if after != doc {
        return Err(format!("apply made a different configuration:\n{after}\nnot\n{doc}"));
    }
    if apply(&cli, &file)?.2 {
        return Err("applying the document again changed something".into());
    }
    let (daemon_us, wall, _) = apply(&cli, &empty_doc(env.dir)?)?;
    (r.apply.delete_daemon, r.apply.delete_wall) = (daemon_us, wall);
    expect(ns.name(), "one apply removing them", 0, 0)?;
    stop(d)?;
    progress(env, "apply", r.apply.create_wall, r.apply.delete_wall);
    Ok(r)
}

/// A verb's medians at one size, µs.
#[derive(Debug, Clone, Copy, Default)]
struct VerbAt {
    daemon: f64,
    wall: f64,
}

/// The verbs the scale part times, in order.
const SCALE_VERBS: [&str; 7] = [
    "create-vnic",
    "create-if",
    "create-addr",
    "set-linkprop",
    "delete-addr",
    "delete-if",
    "delete-vnic",
];

/// Everything measured at one size.
#[derive(Debug, Clone, Default)]
struct Scale {
    n: usize,
    apply_create: Applied,
    verbs: Vec<VerbAt>,
    /// The kernel's own cost at n, µs: one `ip -batch` making the n
    /// VNICs and their addresses, one `ip link del group` removing them.
    floor_create: f64,
    floor_delete: f64,
}

/// The document of `n` VNICs with `addrs` addresses.
fn doc_of(n: usize, addrs: usize) -> String {
    let mut s = String::from("version = 1\n");
    for i in 0..n {
        let _ = write!(
            s,
            "\n[vnic.{}]\nover = \"{}\"\nmac = \"{}\"\nmac_mode = \"fixed\"\n",
            vnic(i),
            nic(i).1,
            mac(i)
        );
    }
    for i in 0..addrs {
        let _ = write!(s, "\n[interface.{}]\n", vnic(i));
    }
    for i in 0..addrs {
        let _ = write!(s, "\n[address.\"{}/v4\"]\naddr = \"{}\"\n", vnic(i), addr(i, 0));
    }
    s
}

fn scale_at(o: &Opts, env: &Env<'_>, n: usize) -> Result<Scale, String> {
    let pid = std::process::id();
    let addrs = o.addrs.min(n);
    let ns = host(format!("{NS_PREFIX}{pid}s{n}"), env.far, &format!("s{n}x"))?;
    let (d, cli) = daemon(env, ns.name(), &env.dir.join(format!("scale{n}")))?;
    let file = env.dir.join(format!("scale{n}.toml"));
    std::fs::write(&file, doc_of(n, addrs)).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut s = Scale { n, ..Default::default() };
    (s.apply_create.create_daemon, s.apply_create.create_wall, _) = apply(&cli, &file)?;
    expect(ns.name(), &format!("apply of {n}"), n, addrs)?;
    // Each verb `samples` times, on VNICs of their own (bench{i}).
    let mut per: Vec<Vec<(f64, f64)>> = vec![vec![]; SCALE_VERBS.len()];
    let mut time = |slot: usize, args: &[&str]| -> Result<(), String> {
        per[slot].push(mutation(&cli, args)?);
        Ok(())
    };
    let name = |i: usize| format!("bench{i}");
    for i in 0..o.samples {
        let m = mac(0x0f_0000 + i);
        time(0, &["create-vnic", "-l", nic(i).1, "-m", &m, &name(i)])?;
        time(1, &["create-if", &name(i)])?;
        time(2, &["create-addr", "-T", "static", "-a", &addr(i, 1), &format!("{}/v4", name(i))])?;
        let mtu = if i % 2 == 0 { "mtu=1400" } else { "mtu=1500" };
        time(3, &["set-linkprop", "-p", mtu, &vnic(0)])?;
    }
    for i in 0..o.samples {
        time(4, &["delete-addr", &format!("{}/v4", name(i))])?;
        time(5, &["delete-if", &name(i)])?;
        time(6, &["delete-vnic", &name(i)])?;
    }
    s.verbs = per
        .into_iter()
        .map(|xs| VerbAt {
            daemon: median(xs.iter().map(|x| x.0).collect()),
            wall: median(xs.iter().map(|x| x.1).collect()),
        })
        .collect();
    (s.apply_create.delete_daemon, s.apply_create.delete_wall, _) =
        apply(&cli, &empty_doc(env.dir)?)?;
    expect(ns.name(), &format!("apply removing {n}"), 0, 0)?;
    stop(d)?;
    // The floor at n, in the same namespace (empty again).
    let (links, addrs_lines) = make_lines(n, addrs, Some(GROUP));
    s.floor_create = ip_batch(ns.name(), env.dir, &format!("{links}{addrs_lines}"))?;
    expect(ns.name(), &format!("ip -batch of {n}"), n, addrs)?;
    let t = Instant::now();
    cmd(&["ip", "-n", ns.name(), "link", "del", "group", GROUP])?;
    s.floor_delete = t.elapsed().as_micros() as f64;
    expect(ns.name(), &format!("ip link del group of {n}"), 0, 0)?;
    Ok(s)
}

/// The load average (1, 5, 15 min) now.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs the benchmark.
pub fn run(o: Opts) -> Result<(), String> {
    crate::root_with(
        "kernel-links",
        "network namespaces, veth pairs and macvlans",
        &[("ip", "iproute2"), ("dbus-daemon", "dbus-daemon")],
    )?;
    let (netadmd_path, netadm) = binaries("kernel-links")?;
    let say = |m: &str| {
        if !o.json {
            eprintln!("{m}");
        }
    };
    for (name, pid) in sweep_stale(NS_PREFIX).into_iter().chain(sweep_stale(TEMP_PREFIX)) {
        say(&format!("kernel-links: removing {name}, left by an interrupted run (pid {pid})"));
    }
    let load_before = load();
    // A dynamic netadm's every start runs the loader: the package ships
    // a static one (packaging/build-deb), which this says it measured.
    let linked = match netadm_testkit::interpreter(&netadm) {
        Ok(None) => "static".to_owned(),
        Ok(Some(_)) => "dynamically linked (the package's is static: packaging/build-deb)".into(),
        Err(e) => format!("unknown ({e})"),
    };
    // Guards drop in reverse order: the bus, the directory, the far side.
    let far = Netns::new(format!("{NS_PREFIX}{}far", std::process::id()))?;
    let dir = Scratch::new(TEMP_PREFIX)?;
    let bus = Bus::try_start(Policy::AllowAll)?;
    let cli = Cli::with(netadm, bus.address());
    let env = Env {
        netadmd: &netadmd_path,
        cli: &cli,
        bus: &bus,
        dir: dir.path(),
        far: far.name(),
        say: &say,
    };
    let mut rounds = vec![];
    for k in 0..o.rounds {
        say(&format!("kernel-links: round {} of {} ...", k + 1, o.rounds));
        rounds.push(round(&o, &env, k)?);
    }
    let mut scale = vec![];
    for &n in &o.sizes.0 {
        say(&format!("kernel-links: scale, n = {n} ..."));
        scale.push(scale_at(&o, &env, n)?);
    }
    report(&o, &rounds, &scale, &linked, &load_before, &load());
    Ok(())
}

/// The medians over the rounds of every figure.
struct Medians {
    floor: Floor,
    cmds: (f64, f64, f64, f64),
    apply: Applied,
    /// Per verb: (median daemon, median wall) over every command of it in
    /// every round that went over the private socket, and the median wall
    /// of those that went over the bus.
    per_verb: Vec<(String, f64, f64, f64)>,
    /// The median wall of a read, µs: over the private socket, over the
    /// bus.
    read: (f64, f64),
}

fn medians(rounds: &[Round]) -> Medians {
    let m = |f: &dyn Fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    let floor = Floor {
        create: m(&|r| r.floor.create),
        delete: m(&|r| r.floor.delete),
        group_delete: m(&|r| r.floor.group_delete),
        links: m(&|r| r.floor.links),
        addr_add: m(&|r| r.floor.addr_add),
        addr_del: m(&|r| r.floor.addr_del),
        link_del: m(&|r| r.floor.link_del),
    };
    let cmds = (
        m(&|r| r.cmds.create_wall),
        m(&|r| r.cmds.create_daemon),
        m(&|r| r.cmds.delete_wall),
        m(&|r| r.cmds.delete_daemon),
    );
    let apply = Applied {
        create_wall: m(&|r| r.apply.create_wall),
        create_daemon: m(&|r| r.apply.create_daemon),
        delete_wall: m(&|r| r.apply.delete_wall),
        delete_daemon: m(&|r| r.apply.delete_daemon),
    };
    let mut per_verb = vec![];
    for verb in
        ["create-vnic", "create-if", "create-addr", "delete-addr", "delete-if", "delete-vnic"]
    {
        let all = |way: fn(&Commands) -> &PerVerb| {
            rounds
                .iter()
                .flat_map(|r| way(&r.cmds).get(verb).cloned().unwrap_or_default())
                .collect::<Vec<(f64, f64)>>()
        };
        let (private, bus) = (all(|c| &c.per_verb), all(|c| &c.per_verb_bus));
        if !private.is_empty() {
            let d = median(private.iter().map(|x| x.0).collect());
            let w = median(private.iter().map(|x| x.1).collect());
            let wb = median(bus.iter().map(|x| x.1).collect());
            per_verb.push((verb.to_owned(), d, w, wb));
        }
    }
    let read = (
        median(rounds.iter().flat_map(|r| r.cmds.reads.iter().copied()).collect()),
        median(rounds.iter().flat_map(|r| r.cmds.reads_bus.iter().copied()).collect()),
    );
    Medians { floor, cmds, apply, per_verb, read }
}

/// What the kernel costs for one device of `verb`, from the floor's
/// parts, µs; `None` for a verb with no kernel work of its own to set
/// against (create-if and delete-if act on a device that is there).
fn kernel_cost(f: &Floor, verb: &str, n: usize, addrs: usize) -> Option<f64> {
    let per = |us: f64, k: usize| (k > 0).then(|| us / k as f64);
    match verb {
        "create-vnic" => per(f.links, n),
        "create-addr" => per(f.addr_add, addrs),
        "delete-addr" => per(f.addr_del, addrs),
        "delete-vnic" => per(f.link_del, n),
        _ => None,
    }
}

fn report(
    o: &Opts,
    rounds: &[Round],
    scale: &[Scale],
    linked: &str,
    load_before: &str,
    load_after: &str,
) {
    let m = medians(rounds);
    let (n, addrs) = (o.vnics, o.addrs);
    let ncmd = verbs(n, addrs).0.len();
    let per = |us: f64| us / n as f64;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let growth = |i: usize| match scale {
        [a, .., b] => slope(a.n, a.verbs[i].daemon, b.n, b.verbs[i].daemon),
        _ => None,
    };
    let cost_rows: Vec<(String, f64, f64, f64, Option<f64>)> = m
        .per_verb
        .iter()
        .map(|(v, d, w, wb)| (v.clone(), *d, *w, *wb, kernel_cost(&m.floor, v, n, addrs)))
        .collect();
    if o.json {
        let way = |cw: f64, cd: Option<f64>, dw: f64, dd: Option<f64>| {
            json!({"create_us": cw, "create_daemon_us": cd, "create_per_device_us": per(cw),
                   "delete_us": dw, "delete_daemon_us": dd, "delete_per_device_us": per(dw)})
        };
        let mut commands = way(m.cmds.0, Some(m.cmds.1), m.cmds.2, Some(m.cmds.3));
        commands["count"] = json!(ncmd);
        let v = json!({
            "vnics": n,
            "addresses": addrs,
            "rounds": o.rounds,
            "netadm_linked": linked,
            "load_before": load_before,
            "load_after": load_after,
            "ip_batch": way(m.floor.create, None, m.floor.delete, None),
            "ip_link_del_group_us": m.floor.group_delete,
            "ip_batch_parts_us": {"links": m.floor.links, "addr_add": m.floor.addr_add,
                                  "addr_del": m.floor.addr_del, "link_del": m.floor.link_del},
            "commands": commands,
            "apply": way(m.apply.create_wall, Some(m.apply.create_daemon), m.apply.delete_wall, Some(m.apply.delete_daemon)),
            "ratios": {
                "apply_vs_ip_batch_create": ratio(m.apply.create_wall, m.floor.create),
                "commands_vs_ip_batch_create": ratio(m.cmds.0, m.floor.create),
                "commands_vs_apply_create": ratio(m.cmds.0, m.apply.create_wall),
                "apply_vs_ip_batch_delete": ratio(m.apply.delete_wall, m.floor.delete),
                "apply_vs_ip_group_delete": ratio(m.apply.delete_wall, m.floor.group_delete),
            },
            "read_wall_us": m.read.0,
            "read_wall_bus_us": m.read.1,
            "per_command": cost_rows.iter().map(|(v, d, w, wb, k)| json!({
                "verb": v, "daemon_us": d, "wall_us": w, "wall_bus_us": wb, "kernel_us": k,
                "above_kernel_us": k.map(|k| w - k),
                "above_kernel_bus_us": k.map(|k| wb - k),
            })).collect::<Vec<_>>(),
            "scale": scale.iter().map(|s| json!({
                "n": s.n,
                "apply_create_us": s.apply_create.create_wall,
                "apply_create_daemon_us": s.apply_create.create_daemon,
                "apply_remove_us": s.apply_create.delete_wall,
                "apply_remove_daemon_us": s.apply_create.delete_daemon,
                "ip_batch_create_us": s.floor_create,
                "ip_link_del_group_us": s.floor_delete,
                "verbs": SCALE_VERBS.iter().zip(&s.verbs).map(|(v, x)| json!({
                    "verb": v, "daemon_us": x.daemon, "wall_us": x.wall,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "growth_exponent_daemon": SCALE_VERBS.iter().enumerate()
                .map(|(i, v)| (v.to_string(), json!(growth(i)))).collect::<serde_json::Map<_, _>>(),
            "samples": o.samples,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return;
    }
    let ms = |us: f64| format!("{:.1}", us / 1e3);
    let ms2 = |us: f64| format!("{:.2}", us / 1e3);
    println!(
        "netadm-bench kernel-links: {n} VNICs (macvlans in bridge mode over two veth NICs) with \
         {addrs} IP interfaces and addresses, created then deleted; median of {} rounds; \
         load {load_before} before, {load_after} after; netadm {linked}",
        o.rounds
    );
    println!(
        "{:<40}{:>11}{:>13}{:>11}{:>13}",
        "", "create ms", "per device", "delete ms", "per device"
    );
    let row = |label: &str, c: f64, d: f64| {
        println!("{label:<40}{:>11}{:>13}{:>11}{:>13}", ms(c), ms2(per(c)), ms(d), ms2(per(d)));
    };
    row("ip -batch (the floor)", m.floor.create, m.floor.delete);
    println!(
        "{:<40}{:>11}{:>13}{:>11}{:>13}",
        "ip link del group (a batched delete)",
        "--",
        "--",
        ms(m.floor.group_delete),
        ms2(per(m.floor.group_delete))
    );
    row(&format!("{ncmd} netadm commands, persistent"), m.cmds.0, m.cmds.2);
    println!(
        "{:<40}{:>11}{:>13}{:>11}{:>13}",
        "  of it in the daemon (total_us)",
        ms(m.cmds.1),
        ms2(per(m.cmds.1)),
        ms(m.cmds.3),
        ms2(per(m.cmds.3))
    );
    row("one netadm apply, persistent", m.apply.create_wall, m.apply.delete_wall);
    println!(
        "{:<40}{:>11}{:>13}{:>11}{:>13}",
        "  of it in the daemon (total_us)",
        ms(m.apply.create_daemon),
        ms2(per(m.apply.create_daemon)),
        ms(m.apply.delete_daemon),
        ms2(per(m.apply.delete_daemon))
    );
    let x = |v: f64| format!("{v:.1}x");
    println!(
        "ratios: apply / ip -batch, create {} (target <= 2x); commands / ip -batch, create {}; \
         commands / apply, create {}",
        x(ratio(m.apply.create_wall, m.floor.create)),
        x(ratio(m.cmds.0, m.floor.create)),
        x(ratio(m.cmds.0, m.apply.create_wall))
    );
    println!(
        "        apply removing them all {} ms (target <= 100 ms): {} of ip -batch's one-by-one \
         delete, {} of one ip link del group",
        ms(m.apply.delete_wall),
        x(ratio(m.apply.delete_wall, m.floor.delete)),
        x(ratio(m.apply.delete_wall, m.floor.group_delete))
    );
    println!(
        "per command (medians over every command of the verb, each verb's commands alternately \
         over the private socket, as root's netadm goes, and over the bus; target: wall - \
         kernel <= 5 ms):"
    );
    println!(
        "{:<16}{:>11}{:>11}{:>11}{:>16}{:>16}{:>16}",
        "verb",
        "wall ms",
        "daemon ms",
        "bus wall",
        "kernel ms/dev",
        "wall - kernel",
        "bus - kernel"
    );
    for (v, d, w, wb, k) in &cost_rows {
        let (kc, above, above_bus) = match k {
            Some(k) => (ms2(*k), ms2(w - k), ms2(wb - k)),
            None => ("--".into(), "--".into(), "--".into()),
        };
        println!(
            "{v:<16}{:>11}{:>11}{:>11}{kc:>16}{above:>16}{above_bus:>16}",
            ms2(*w),
            ms2(*d),
            ms2(*wb)
        );
    }
    println!(
        "kernel ms/dev: the ip -batch of that part alone over its devices (create-if and \
         delete-if act on a device that is there: nothing to set against); wall, daemon: \
         over the private socket (the daemon's time is its own either way); a read \
         (netadm show-link net0), which changes nothing, takes {} ms of wall over the private \
         socket, {} ms over the bus: the process, the socket and the reply",
        ms2(m.read.0),
        ms2(m.read.1)
    );
    if scale.is_empty() {
        return;
    }
    println!(
        "scale: per verb at n VNICs over the two NICs, median of {} samples, daemon total_us / \
         wall, ms; growth: the log-log slope of the daemon time from the smallest n to the \
         largest (0 flat, 1 linear)",
        o.samples
    );
    print!("{:<22}", "n");
    for s in scale {
        print!("{:>18}", s.n);
    }
    println!("{:>14}", "growth");
    for (i, v) in SCALE_VERBS.iter().enumerate() {
        print!("{v:<22}");
        for s in scale {
            print!("{:>18}", format!("{} / {}", ms2(s.verbs[i].daemon), ms2(s.verbs[i].wall)));
        }
        match growth(i) {
            Some(g) => println!("{g:>14.2}"),
            None => println!("{:>14}", "-"),
        }
    }
    // (label, daemon time if any, wall), µs.
    type Row = fn(&Scale) -> (Option<f64>, f64);
    let rows: [(&str, Row); 4] = [
        ("apply making n", |s| (Some(s.apply_create.create_daemon), s.apply_create.create_wall)),
        ("apply removing n", |s| (Some(s.apply_create.delete_daemon), s.apply_create.delete_wall)),
        ("ip -batch making n", |s| (None, s.floor_create)),
        ("ip link del group, n", |s| (None, s.floor_delete)),
    ];
    for (label, f) in rows {
        print!("{label:<22}");
        for s in scale {
            let (d, w) = f(s);
            print!("{:>18}", format!("{} / {}", d.map_or("--".into(), ms), ms(w)));
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netadm_testkit::words;

    #[test]
    fn options() {
        let o =
            Opts::parse(&words("--json --vnics 8 --addrs 2 --sizes 100,10 --samples 3")).unwrap();
        assert!(o.json);
        assert_eq!((o.vnics, o.addrs, o.samples, o.rounds), (8, 2, 3, 3));
        assert_eq!(o.sizes, Sizes(vec![10, 100]));
        for bad in ["--addrs 60", "--sizes 0", "--sizes x", "--rounds 0"] {
            assert!(Opts::parse(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_work_as_verbs_and_as_a_document() {
        let (make, gone) = verbs(50, 10);
        assert_eq!((make.len(), gone.len()), (70, 70));
        assert_eq!(make[0], ["create-vnic", "-l", "net0", "-m", "2:8:20:0:0:0", "kv0"]);
        assert_eq!(make.iter().filter(|v| v[0] == "create-addr").count(), 10);
        assert_eq!(gone.last().unwrap(), &["delete-vnic", "kv49"]);
        let doc = doc_of(2, 1);
        assert!(doc.contains("[vnic.kv1]\nover = \"net1\"\nmac = \"2:8:20:0:0:1\""), "{doc}");
        assert!(doc.contains("[address.\"kv0/v4\"]\naddr = \"10.0.0.1/24\""), "{doc}");
        let (links, addrs) = make_lines(2, 1, Some("7"));
        assert!(links.starts_with("link add kv0 link nic0 address 2:8:20:0:0:0 group 7 type macvlan mode bridge\nlink set kv0 up\n"), "{links}");
        assert_eq!(addrs, "addr add 10.0.0.1/24 dev kv0\n");
        assert_eq!(addr(3, 1), "10.1.3.1/24");
    }
}

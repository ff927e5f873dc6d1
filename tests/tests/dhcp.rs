//! `create-addr -T dhcp` against a real DHCP server (and `-T addrconf`
//! against dnsmasq as an IPv6 router, at the end): Debian's dnsmasq in a
//! network namespace this test makes, on the far side of a veth whose
//! near end is an i40e-class port's afpacket wire; netadmd runs in the
//! near namespace with the kernel mirror on. The lease is checked in
//! show-addr, in the kernel (with its lifetime) and in dnsmasq's lease
//! file; renewal at T1 (dnsmasq is told T1 = 4 s: its shortest lease is 2
//! minutes, but it passes the T1 it is given) is seen as the lease file's
//! expiry moving on; delete-addr's DHCPRELEASE as the lease leaving the
//! file. Prerequisites (root, ip, ping, dnsmasq) missing: "skipped",
//! except under `CI=true`, where the test fails naming them.

use netadm_testkit::*;

/// dnsmasq's lease for `ip`: (expiry as seconds since the epoch, MAC).
fn lease(file: &std::path::Path, ip: &str) -> Option<(u64, String)> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() >= 3 && w[2] == ip).then(|| (w[0].parse().unwrap(), w[1].to_owned()))
    })
}

/// The kernel's view of `ip` on `dev` in `ns`: its prefix length and
/// valid lifetime (seconds; `None` for forever).
fn kernel_addr(ns: &str, dev: &str, ip: &str) -> Option<(u64, Option<u64>)> {
    let out = run(&["ip", "-n", ns, "-j", "addr", "show", "dev", dev]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["addr_info"].as_array()?.iter().find(|a| a["local"] == ip).map(|a| {
        (
            a["prefixlen"].as_u64().unwrap(),
            a["valid_life_time"].as_u64().filter(|&t| t < u64::from(u32::MAX)),
        )
    })
}

/// dnsmasq's arguments: DHCP only (no DNS), its shortest lease (2
/// minutes) from 192.0.2.100-150, with T1 = 4 s and T2 = 8 s.
const SHORT_T1: &[&str] = &[
    "--dhcp-authoritative",
    "--dhcp-range=192.0.2.100,192.0.2.150,255.255.255.0,2m",
    "--dhcp-option=option:T1,4",
    "--dhcp-option=option:T2,8",
];

/// Pings the DHCP server (192.0.2.1) from namespace `ns` over i40e0.
fn ping_server(ns: &str) {
    let ping = ["ping", "-c", "1", "-W", "5", "-I", "i40e0", "192.0.2.1"];
    run(&[&["ip", "netns", "exec", ns][..], &ping].concat()).unwrap_or_else(|e| panic!("{e}"));
}

fn dhcp_row(bus: &Bus) -> serde_json::Value {
    rows(&json(bus, &["show-addr"]), "addrobj", "i40e0/dh")[0].clone()
}

/// The far side: namespaces `a` (netadmd's, an i40e-class port on an
/// afpacket wire to va0) and `b` (vb0, with `far_addr`, where dnsmasq
/// runs with `server_args`), a bus, and dnsmasq's log lines.
struct Far {
    a: String,
    b: String,
    bus: Bus,
    dir: std::path::PathBuf,
    daemon: DaemonBuilder,
    log: Lines,
    // Dropped in this order: dnsmasq, then the namespaces.
    _server: Reaped,
    _ns: [Netns; 2],
}

/// dnsmasq in namespace `b` with `server_args` (its lease file in `dir`),
/// started, and its log lines.
fn serve(b: &str, dir: &std::path::Path, server_args: &[&str]) -> (Reaped, Lines) {
    dhcp_server(b, "vb0", &dir.join("dnsmasq.leases"), server_args).unwrap()
}

impl Far {
    /// The far side, or `None` (the test skipped) without root, ip, ping
    /// or dnsmasq.
    fn new(tag: &str, far_addr: &str, server_args: &[&str]) -> Option<Self> {
        let ns = namespaces(&["ping", "dnsmasq"], tag, ["a", "b"])?;
        let [a, b] = ns.each_ref().map(|n| n.name().to_owned());
        veth((&a, "va0"), (&b, "vb0")).unwrap();
        ip(&b, &["addr", "add", far_addr, "dev", "vb0", "nodad"]);
        let bus = Bus::start();
        let dir = bus.subdir("far");
        let (server, log) = serve(&b, &dir, server_args);
        let hw = fixtures::afpacket(&["va0"]);
        let daemon = Daemon::builder(&bus, dir.join("state")).netns(&a).hardware(&hw);
        Some(Far { a, b, bus, dir, daemon, log, _server: server, _ns: ns })
    }

    /// Restarts dnsmasq with `server_args`, its leases forgotten.
    fn restart_server(&mut self, server_args: &[&str]) {
        let _ = self._server.0.kill();
        self._server.0.wait().unwrap();
        let _ = std::fs::remove_file(self.dir.join("dnsmasq.leases"));
        (self._server, self.log) = serve(&self.b, &self.dir, server_args);
    }

    fn netadmd(&self) -> Daemon {
        self.daemon.start()
    }
}

#[test]
fn a_dhcp_address_is_leased_renewed_at_t1_persisted_and_released_on_delete() {
    let Some(far) = Far::new("dh", "192.0.2.1/24", SHORT_T1) else { return };
    let (a, bus, dir, rx) = (&far.a, &far.bus, &far.dir, &far.log);
    let leases = dir.join("dnsmasq.leases");
    let daemon = far.netadmd();
    let state = dir.join("state");

    json(bus, &["create-if", "i40e0"]);
    let r = json(bus, &["create-addr", "-T", "dhcp", "i40e0/dh"]);
    eprintln!("create-addr -T dhcp: {} us in the daemon; {r}", r["timing"]["total_us"]);
    assert_eq!(r["notes"].as_array().map(Vec::len), Some(0), "a lease within the wait: {r}");
    let phases: Vec<&str> = r["timing"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases.last(), Some(&"lease"), "the wait for the lease is timed: {r}");
    let row = dhcp_row(bus);
    assert_eq!((&row["type"], &row["state"]), (&"dhcp".into(), &"ok".into()), "{row}");
    let (ip, prefix) = row["addr"].as_str().unwrap().split_once('/').unwrap();
    let last: u8 = ip.strip_prefix("192.0.2.").unwrap().parse().unwrap();
    assert!((100..=150).contains(&last) && prefix == "24", "from the server's range: {row}");
    // In the kernel with the lease's lifetime, and usable.
    let (p, valid) = kernel_addr(a, "i40e0", ip).expect("in the kernel");
    assert!(p == 24 && valid.is_some_and(|v| v <= 120), "lifetime of a 2-minute lease: {valid:?}");
    ping_server(a);
    // dnsmasq holds it for this interface's MAC.
    let mac = run(&["ip", "-n", a, "-j", "link", "show", "dev", "i40e0"]).unwrap();
    let mac: serde_json::Value = serde_json::from_str(&mac).unwrap();
    let (expiry, holder) = lease(&leases, ip).expect("dnsmasq's lease file holds it");
    assert_eq!(holder, mac[0]["address"].as_str().unwrap());
    // Not drift: the lease is netadm's own.
    let ifs = json(bus, &["show-if"]);
    assert_eq!(rows(&ifs, "ifname", "i40e0")[0]["state"], "ok", "{ifs}");

    // Renewed at T1: dnsmasq extends the lease (its expiry moves on).
    wait_for("a renewal at T1", || lease(&leases, ip).is_some_and(|(e, _)| e > expiry));
    assert_eq!(dhcp_row(bus)["addr"], row["addr"], "the same address after renewal");

    // Typed errors, nothing changed.
    refused(
        bus,
        || (json(bus, &["show-addr"]), std::fs::read(state.join("links.toml")).unwrap()),
        &[
            (&["create-addr", "-T", "dhcp", "i40e0/dh2"], "Exists"),
            (&["create-addr", "-T", "dhcp", "i40e0/dh"], "Exists"),
            (&["create-addr", "-T", "dhcp", "-a", "192.0.2.9/24", "i40e0/x"], "InvalidArgument"),
            (&["create-addr", "-T", "bootp", "i40e0/x"], "InvalidArgument"),
            (&["create-addr", "-T", "dhcp", "i40e1/x"], "NotFound"),
            (&["create-addr", "-T", "static", "i40e0/x"], "InvalidArgument"),
        ],
    );

    // Persisted: a new netadmd asks for the lease again at start.
    drop(daemon);
    let daemon = far.netadmd();
    wait_for("the lease after a restart", || dhcp_row(bus)["state"] == "ok");
    let ip = dhcp_row(bus)["addr"].as_str().unwrap().split_once('/').unwrap().0.to_owned();
    assert!(kernel_addr(a, "i40e0", &ip).is_some());

    // Released on delete: gone from the kernel and from dnsmasq's leases.
    json(bus, &["delete-addr", "i40e0/dh"]);
    assert!(kernel_addr(a, "i40e0", &ip).is_none(), "removed from the kernel");
    wait_for("dnsmasq to drop the released lease", || lease(&leases, &ip).is_none());
    let seen: Vec<String> = rx.so_far();
    assert!(seen.iter().any(|l| l.contains("DHCPRELEASE")), "{seen:#?}");
    drop(daemon);
}

/// A VNIC whose IP interface is in a zone (a network namespace of its
/// own, `z`) leases there: the DHCP client's packet socket is made in the
/// zone and the lease is installed over the zone's rtnetlink connection,
/// so the address is on the device in `z` with the lease's lifetime, and
/// dnsmasq's side reaches it. delete-addr gives it back.
#[test]
fn a_vnic_in_a_zone_leases_there_and_releases_on_delete() {
    let Some(far) = Far::new(
        "dz",
        "192.0.2.1/24",
        // No ping check before an offer: it would leave the far side's
        // neighbour entry for the address failed, and the ping from
        // there below would wait out the kernel's retry.
        &[
            "--dhcp-authoritative",
            "--no-ping",
            "--dhcp-range=192.0.2.100,192.0.2.150,255.255.255.0,2m",
        ],
    ) else {
        return;
    };
    let (a, b, bus, rx) = (&far.a, &far.b, &far.bus, &far.log);
    let leases = far.dir.join("dnsmasq.leases");
    let z = format!("dzz{}", std::process::id());
    let zone = Netns::new(&z).unwrap();
    let daemon = far.netadmd();

    // The zone numbers its devices otherwise than netadmd's namespace
    // does (a veth pair first, zv0 after it): a packet socket made in the
    // wrong namespace would find no device of zv0's index there, instead
    // of the veth under the port (index 2 in both), which would carry the
    // exchange around netadm's datapath unnoticed.
    let veth = ["ip", "-n", &z, "link", "add", "zx0", "type", "veth", "peer", "name", "zx1"];
    run(&veth).unwrap_or_else(|e| panic!("{e}"));
    json(bus, &["create-vnic", "-l", "i40e0", "-p", &format!("zone={z}"), "zv0"]);
    json(bus, &["create-if", "zv0"]);
    let r = json(bus, &["create-addr", "-T", "dhcp", "zv0/dh"]);
    eprintln!("create-addr -T dhcp in a zone: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(r["notes"].as_array().map(Vec::len), Some(0), "a lease within the wait: {r}");
    let row = rows(&json(bus, &["show-addr"]), "addrobj", "zv0/dh")[0].clone();
    assert_eq!((&row["type"], &row["state"]), (&"dhcp".into(), &"ok".into()), "{row}");
    let (ip, prefix) = row["addr"].as_str().unwrap().split_once('/').unwrap();
    assert!(ip.starts_with("192.0.2.") && prefix == "24", "from the server's range: {row}");
    // On the device in the zone, with the lease's lifetime; nothing of it
    // in netadmd's namespace.
    let (p, valid) = kernel_addr(&z, "zv0", ip).expect("in the zone's kernel");
    assert!(p == 24 && valid.is_some_and(|v| v <= 120), "lifetime of a 2-minute lease: {valid:?}");
    let text = run(&["ip", "-n", &z, "addr", "show", "dev", "zv0"]).unwrap();
    assert!(text.contains(&format!("{ip}/24")), "{text}");
    let here = run(&["ip", "-n", a, "addr"]).unwrap();
    assert!(!here.contains(ip), "the lease is in netadmd's namespace:\n{here}");
    // Usable: the server's side reaches it.
    run(&["ip", "netns", "exec", b, "ping", "-c", "1", "-W", "5", ip])
        .unwrap_or_else(|e| panic!("{e}"));
    // dnsmasq holds it for the VNIC's MAC; not drift.
    let mac = run(&["ip", "-n", &z, "-j", "link", "show", "dev", "zv0"]).unwrap();
    let mac: serde_json::Value = serde_json::from_str(&mac).unwrap();
    let (_, holder) = lease(&leases, ip).expect("dnsmasq's lease file holds it");
    assert_eq!(holder, mac[0]["address"].as_str().unwrap());
    let ifs = json(bus, &["show-if"]);
    assert_eq!(rows(&ifs, "ifname", "zv0")[0]["state"], "ok", "{ifs}");

    // Persisted: a new netadmd makes the device in the zone again and
    // leases there at start.
    drop(daemon);
    let daemon = far.netadmd();
    let row = || rows(&json(bus, &["show-addr"]), "addrobj", "zv0/dh")[0].clone();
    wait_for("the lease in the zone after a restart", || row()["state"] == "ok");
    let addr = row()["addr"].as_str().unwrap().to_owned();
    let ip = addr.split_once('/').unwrap().0;
    assert!(kernel_addr(&z, "zv0", ip).is_some_and(|(_, v)| v.is_some()), "{addr}");

    // Released on delete: gone from the zone and from dnsmasq's leases.
    json(bus, &["delete-addr", "zv0/dh"]);
    assert!(kernel_addr(&z, "zv0", ip).is_none(), "removed from the zone's kernel");
    wait_for("dnsmasq to drop the released lease", || lease(&leases, ip).is_none());
    let seen: Vec<String> = rx.so_far();
    assert!(seen.iter().any(|l| l.contains("DHCPRELEASE")), "{seen:#?}");
    json(bus, &["delete-if", "zv0"]);
    json(bus, &["delete-vnic", "zv0"]);
    drop(daemon);
    drop(zone);
}

/// `/proc/sys/net/ipv6/conf/DEV/KEY` as namespace `ns` has it.
fn sysctl6(ns: &str, dev: &str, key: &str) -> String {
    let p = format!("/proc/sys/net/ipv6/conf/{dev}/{key}");
    run(&["ip", "netns", "exec", ns, "cat", &p]).unwrap().trim().to_owned()
}

/// The IPv6 addresses the kernel has on `dev` in `ns`, as ADDR/PREFIX.
fn kernel_v6(ns: &str, dev: &str) -> Vec<String> {
    let out = run(&["ip", "-n", ns, "-j", "-6", "addr", "show", "dev", dev]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["addr_info"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| format!("{}/{}", x["local"].as_str().unwrap(), x["prefixlen"]))
                .collect()
        })
        .unwrap_or_default()
}

/// show-addr's addrconf rows: (addrobj, state, addr).
fn addrconf_rows(bus: &Bus) -> Vec<(String, String, String)> {
    let v = json(bus, &["show-addr"]);
    rows(&v, "type", "addrconf")
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_owned();
            (s("addrobj"), s("state"), s("addr"))
        })
        .collect()
}

#[test]
fn addrconf_gives_a_link_local_and_a_slaac_address_from_router_advertisements() {
    // dnsmasq as an IPv6 router: advertisements for 2001:db8:1::/64
    // (SLAAC only) every 4 s.
    let Some(far) = Far::new(
        "ac",
        "2001:db8:1::1/64",
        &["--enable-ra", "--dhcp-range=::,constructor:vb0,ra-only", "--ra-param=vb0,4"],
    ) else {
        return;
    };
    let (a, bus) = (&far.a, &far.bus);
    let daemon = far.netadmd();
    json(bus, &["create-if", "i40e0"]);
    // Without an addrconf object: advertisements are not heeded.
    assert_eq!(sysctl6(a, "i40e0", "accept_ra"), "0");
    assert_eq!(sysctl6(a, "i40e0", "autoconf"), "0");

    let r = json(bus, &["create-addr", "-T", "addrconf", "i40e0/v6"]);
    eprintln!("create-addr -T addrconf: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(sysctl6(a, "i40e0", "accept_ra"), "1");
    assert_eq!(sysctl6(a, "i40e0", "autoconf"), "1");
    let slaac = |rows: &[(String, String, String)]| {
        rows.iter().find(|r| r.0 == "i40e0/?" && r.2.starts_with("2001:db8:1:")).cloned()
    };
    wait_for("a SLAAC address from the advertisements", || slaac(&addrconf_rows(bus)).is_some());
    let rows = addrconf_rows(bus);
    let (_, state, addr) = slaac(&rows).unwrap();
    assert!(state == "ok" && addr.ends_with("/64"), "{rows:?}");
    let ll = rows.iter().find(|r| r.0 == "i40e0/v6").expect("the object's own row");
    assert!(ll.1 == "ok" && ll.2.starts_with("fe80::"), "link-local under i40e0/v6: {rows:?}");
    assert!(kernel_v6(a, "i40e0").contains(&addr), "in the kernel: {:?}", kernel_v6(a, "i40e0"));
    // The kernel's own addresses are not drift.
    let ifs = json(bus, &["show-if"]);
    assert_eq!(rows_of(&ifs, "i40e0")["state"], "ok", "{ifs}");
    // It works: the router answers from the SLAAC address.
    wait_for("ping6 over the SLAAC address", || {
        run(&[
            "ip",
            "netns",
            "exec",
            a,
            "ping",
            "-6",
            "-c",
            "1",
            "-W",
            "1",
            "-I",
            "i40e0",
            "2001:db8:1::1",
        ])
        .is_ok()
    });

    // Typed errors, nothing changed.
    let (k, msg) = json_err(bus, &["create-addr", "-T", "addrconf", "i40e0/v6b"]);
    assert_eq!(k, "Exists", "{msg}");
    let (k, msg) =
        json_err(bus, &["create-addr", "-T", "addrconf", "-a", "2001:db8::5/64", "i40e0/x"]);
    assert_eq!(k, "InvalidArgument", "{msg}");

    // Persisted: after a restart the kernel makes it again.
    drop(daemon);
    let daemon = far.netadmd();
    wait_for("SLAAC after a restart", || slaac(&addrconf_rows(bus)).is_some());

    // Deleted: advertisements no longer heeded, the SLAAC address gone.
    json(bus, &["delete-addr", "i40e0/v6"]);
    assert_eq!(sysctl6(a, "i40e0", "autoconf"), "0");
    let left = kernel_v6(a, "i40e0");
    assert!(!left.iter().any(|x| x.starts_with("2001:db8:1:")), "{left:?}");
    assert!(addrconf_rows(bus).is_empty());
    drop(daemon);
}

fn rows_of<'a>(v: &'a serde_json::Value, ifname: &str) -> &'a serde_json::Value {
    rows(v, "ifname", ifname)[0]
}

#[test]
fn an_ack_with_an_unusable_subnet_mask_is_not_installed() {
    // dnsmasq hands out a subnet mask with a hole in it.
    let Some(far) = Far::new(
        "dm",
        "192.0.2.1/24",
        &[
            "--dhcp-range=192.0.2.100,192.0.2.150,255.255.255.0,2m",
            "--dhcp-option=option:netmask,255.0.255.0",
        ],
    ) else {
        return;
    };
    let (a, bus, rx) = (&far.a, &far.bus, &far.log);
    let daemon = far.netadmd();
    json(bus, &["create-if", "i40e0"]);
    let r = json(bus, &["create-addr", "-T", "dhcp", "i40e0/dh"]);
    let seen: Vec<String> = rx.so_far();
    assert!(seen.iter().any(|l| l.contains("DHCPACK")), "dnsmasq acked: {seen:#?}");
    assert!(
        seen.iter().any(|l| l.contains("netmask") && l.contains("255.0.255.0")),
        "with the broken mask: {seen:#?}"
    );
    assert_eq!(r["notes"].as_array().map(Vec::len), Some(1), "no lease within the wait: {r}");
    let row = dhcp_row(bus);
    assert!(row["state"] != "ok", "{row}");
    let out = run(&["ip", "-n", a, "-j", "-4", "addr", "show", "dev", "i40e0"]).unwrap();
    assert!(!out.contains("192.0.2."), "nothing in the kernel: {out}");
    drop(daemon);
}

#[test]
fn a_lease_of_an_address_the_interface_has_statically_is_declined() {
    // dnsmasq has one address to give (and gives it though it answers a
    // ping): the one the interface already has as a static address.
    let Some(far) = Far::new(
        "dd",
        "192.0.2.1/24",
        &["--no-ping", "--dhcp-range=192.0.2.100,192.0.2.100,255.255.255.0,2m"],
    ) else {
        return;
    };
    let (a, bus, rx) = (&far.a, &far.bus, &far.log);
    let daemon = far.netadmd();
    json(bus, &["create-if", "i40e0"]);
    json(bus, &["create-addr", "-T", "static", "-a", "192.0.2.100/24", "i40e0/v4"]);
    let r = json(bus, &["create-addr", "-T", "dhcp", "i40e0/dh"]);
    // Acked, then declined by the client (RFC 2131 4.4.1).
    let seen = rx
        .await_line("dnsmasq", std::time::Duration::from_secs(30), |l| l.contains("DHCPDECLINE"))
        .unwrap_or_else(|e| panic!("no DHCPDECLINE: {e}"));
    assert!(seen.iter().any(|l| l.contains("DHCPACK")), "dnsmasq acked first: {seen:#?}");
    assert_eq!(r["notes"].as_array().map(Vec::len), Some(1), "no lease within the wait: {r}");
    assert!(dhcp_row(bus)["state"] != "ok", "{}", dhcp_row(bus));
    // The static address is as it was: no lifetime, its object ok, and
    // deleting the DHCP object leaves it.
    assert_eq!(kernel_addr(a, "i40e0", "192.0.2.100"), Some((24, None)), "still static");
    let v4 = rows(&json(bus, &["show-addr"]), "addrobj", "i40e0/v4")[0].clone();
    assert_eq!(v4["state"], "ok", "{v4}");
    json(bus, &["delete-addr", "i40e0/dh"]);
    assert_eq!(kernel_addr(a, "i40e0", "192.0.2.100"), Some((24, None)), "kept");
    drop(daemon);
}

#[test]
fn apply_makes_a_dhcp_address_static_at_the_address_it_leased() {
    static_at_the_lease("ds", "i40e0/dh");
}

#[test]
fn apply_trades_a_dhcp_address_for_another_static_one_at_its_address() {
    static_at_the_lease("dt", "i40e0/v4");
}

/// Leases an address for `i40e0/dh`, then applies a configuration with
/// `obj` (the same object or another) static at that address.
fn static_at_the_lease(tag: &str, obj: &str) {
    let Some(far) = Far::new(tag, "192.0.2.1/24", SHORT_T1) else { return };
    let (a, bus, rx) = (&far.a, &far.bus, &far.log);
    let daemon = far.netadmd();
    json(bus, &["create-if", "i40e0"]);
    json(bus, &["create-addr", "-T", "dhcp", "i40e0/dh"]);
    let leased = dhcp_row(bus)["addr"].as_str().unwrap().to_owned();
    let (ip, _) = leased.split_once('/').unwrap();
    // `obj`, static, at the address the lease holds.
    let cfg = show_config(bus);
    assert!(cfg.contains("type = \"dhcp\""), "{cfg}");
    let doc = far.dir.join("static.toml");
    let cfg = cfg.replace("type = \"dhcp\"", &format!("addr = \"{leased}\""));
    std::fs::write(&doc, cfg.replace("\"i40e0/dh\"", &format!("\"{obj}\""))).unwrap();
    json(bus, &["apply", "-f", doc.to_str().unwrap()]);
    let row = rows(&json(bus, &["show-addr"]), "addrobj", obj)[0].clone();
    assert_eq!(
        (&row["type"], &row["state"], &row["addr"]),
        (&"static".into(), &"ok".into(), &leased.clone().into()),
        "{row}"
    );
    // Given back first, then added for good: no lifetime, and the server
    // was told.
    assert_eq!(kernel_addr(a, "i40e0", ip), Some((24, None)), "static in the kernel");
    rx.await_line("dnsmasq", std::time::Duration::from_secs(30), |l| l.contains("DHCPRELEASE"))
        .unwrap_or_else(|e| panic!("no DHCPRELEASE: {e}"));
    ping_server(a);
    drop(daemon);
}

#[test]
fn a_nak_on_renewal_drops_the_address_and_a_new_lease_is_taken() {
    let range = |r: &str| format!("--dhcp-range={r},255.255.255.0,2m");
    let args = |r: &str| {
        let mut v = vec!["--dhcp-authoritative".to_owned(), range(r)];
        v.extend(["--dhcp-option=option:T1,4", "--dhcp-option=option:T2,8"].map(str::to_owned));
        v
    };
    let first = args("192.0.2.100,192.0.2.150");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let Some(mut far) = Far::new("dn", "192.0.2.1/24", &first) else { return };
    let daemon = far.netadmd();
    json(&far.bus, &["create-if", "i40e0"]);
    json(&far.bus, &["create-addr", "-T", "dhcp", "i40e0/dh"]);
    let row = dhcp_row(&far.bus);
    let old = row["addr"].as_str().unwrap().split_once('/').unwrap().0.to_owned();
    assert!(old.starts_with("192.0.2.1"), "from the first range: {row}");

    // The server, restarted authoritative for another range, knows the
    // lease no more: it NAKs the renewal at T1.
    let second = args("192.0.2.200,192.0.2.250");
    far.restart_server(&second.iter().map(String::as_str).collect::<Vec<_>>());
    let (a, bus) = (&far.a, &far.bus);
    let new_addr = || {
        let row = dhcp_row(bus);
        let ip = row["addr"].as_str()?.split_once('/')?.0.to_owned();
        ip.strip_prefix("192.0.2.2").is_some_and(|_| row["state"] == "ok").then_some(ip)
    };
    wait_for("a lease from the new range", || new_addr().is_some());
    let ip = new_addr().unwrap();
    assert!(kernel_addr(a, "i40e0", &old).is_none(), "the revoked {old} left the kernel");
    assert!(kernel_addr(a, "i40e0", &ip).is_some(), "{ip} in the kernel");
    let seen: Vec<String> = far.log.so_far();
    let naks = seen.iter().filter(|l| l.contains("DHCPNAK")).count();
    assert!((1..=2).contains(&naks), "one NAK, not a REQUEST/NAK storm: {seen:#?}");
    ping_server(a);
    drop(daemon);
}

#[test]
fn a_dhcp_lease_is_still_renewed_after_the_device_goes_down_and_up() {
    let Some(far) = Far::new("dd", "192.0.2.1/24", SHORT_T1) else { return };
    let (a, bus) = (&far.a, &far.bus);
    let leases = far.dir.join("dnsmasq.leases");
    let daemon = far.netadmd();
    json(bus, &["create-if", "i40e0"]);
    json(bus, &["create-addr", "-T", "dhcp", "i40e0/dh"]);
    let row = dhcp_row(bus);
    let ip = row["addr"].as_str().unwrap().split_once('/').unwrap().0.to_owned();
    // Down and up: the client's packet socket fails a read with ENETDOWN
    // (the error waits on the socket until it is read).
    run(&["ip", "-n", a, "link", "set", "i40e0", "down"]).unwrap();
    run(&["ip", "-n", a, "link", "set", "i40e0", "up"]).unwrap();
    let (expiry, _) = lease(&leases, &ip).expect("dnsmasq's lease");
    // Renewed at T1 still: dnsmasq extends the lease.
    wait_for("a renewal after down and up", || {
        lease(&leases, &ip).is_some_and(|(e, _)| e > expiry)
    });
    let after = dhcp_row(bus);
    assert!(after["addr"] == row["addr"] && after["state"] == "ok", "{after}");
    assert!(kernel_addr(a, "i40e0", &ip).is_some(), "{ip} in the kernel");
    ping_server(a);

    // Deleted behind netadm's back: the client ends, and the lease is
    // no longer shown as held; refresh-if makes the device and a client
    // anew, which leases again.
    run(&["ip", "-n", a, "link", "del", "i40e0"]).unwrap();
    wait_for("the lease to be let go with the device", || dhcp_row(bus)["state"] != "ok");
    assert_eq!(dhcp_row(bus)["addr"], "", "{}", dhcp_row(bus));
    json(bus, &["refresh-if", "i40e0"]);
    wait_for("a lease on the new device", || dhcp_row(bus)["state"] == "ok");
    ping_server(a);
    drop(daemon);
}

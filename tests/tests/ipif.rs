//! ipadm's interface and address state verbs on a real kernel:
//! `disable-if`/`enable-if` and `down-addr`/`up-addr`, with netadmd in a
//! network namespace this test makes (kernel mirror on, an i40e-class
//! port on an afpacket wire to a veth there). Each is checked in show-if /
//! show-addr, in the kernel (`ip -j`) and in links.toml; refusals are
//! typed and change nothing; what persists comes back after a restart.
//! Prerequisites (root, ip) missing: "skipped", except under `CI=true`.

use netadm_testkit::*;

/// The addresses the kernel has on `dev` in `ns` (`None`: no such device).
fn kernel_addrs(ns: &str, dev: &str) -> Option<Vec<String>> {
    let out = run(&["ip", "-n", ns, "-j", "addr", "show", "dev", dev]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    Some(
        v[0]["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
            .collect(),
    )
}

fn addr_state(bus: &Bus, obj: &str) -> String {
    let v = json(bus, &["show-addr"]);
    rows(&v, "addrobj", obj)[0]["state"].as_str().unwrap().to_owned()
}

fn if_state(bus: &Bus, ifname: &str) -> String {
    let v = json(bus, &["show-if"]);
    rows(&v, "ifname", ifname)[0]["state"].as_str().unwrap().to_owned()
}

/// A namespace with a veth pair (va0 for netadmd's afpacket wire), a bus,
/// and how netadmd starts there (i40e0 on va0, the kernel mirror on).
struct Setup {
    ns: String,
    bus: Bus,
    daemon: DaemonBuilder,
    state: std::path::PathBuf,
    _ns: Netns,
}

impl Setup {
    /// The set-up, or `None` (the test skipped) without root and ip.
    fn new(tag: &str) -> Option<Self> {
        let [made] = namespaces(&[], tag, [""])?;
        let ns = made.name().to_owned();
        veth((&ns, "va0"), (&ns, "vb0")).unwrap();
        let bus = Bus::start();
        let state = bus.subdir("ipif").join("state");
        let daemon =
            Daemon::builder(&bus, &state).netns(&ns).hardware(&fixtures::afpacket(&["va0"]));
        Some(Setup { ns, bus, daemon, state, _ns: made })
    }

    fn netadmd(&self) -> Daemon {
        self.daemon.start()
    }

    fn links(&self) -> String {
        std::fs::read_to_string(self.state.join("links.toml")).unwrap()
    }
}

#[test]
fn disable_enable_if_and_down_up_addr_act_on_the_kernel_and_keep_the_configuration() {
    let Some(s) = Setup::new("ipif") else { return };
    let (ns, bus, daemon) = (&s.ns, &s.bus, s.netadmd());
    let links = || s.links();
    let has = |a: &str| kernel_addrs(ns, "i40e0").is_some_and(|v| v.iter().any(|x| x == a));

    json(bus, &["create-if", "i40e0"]);
    json(bus, &["create-addr", "-T", "static", "-a", "192.0.2.5/24", "i40e0/v4"]);
    json(bus, &["create-addr", "-T", "static", "-a", "2001:db8::5/64", "i40e0/v6"]);
    assert!(has("192.0.2.5/24") && has("2001:db8::5/64"));

    // down-addr: kept (show-addr says down, links.toml says so), gone
    // from the kernel; up-addr: back.
    let r = json(bus, &["down-addr", "i40e0/v4"]);
    eprintln!("down-addr: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(r["op"], "down-addr");
    assert_eq!(addr_state(bus, "i40e0/v4"), "down");
    assert!(!has("192.0.2.5/24") && has("2001:db8::5/64"));
    assert!(links().contains("down = true"), "{}", links());
    assert_eq!(if_state(bus, "i40e0"), "ok", "a down address is not drift");
    let r = json(bus, &["up-addr", "i40e0/v4"]);
    eprintln!("up-addr: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(addr_state(bus, "i40e0/v4"), "ok");
    assert!(has("192.0.2.5/24"));
    assert!(!links().contains("down"), "{}", links());
    // ipadm's CURRENT/PERSISTENT flags, as a script reads them.
    let flags = |obj: &str| {
        let out = netadm(bus, &["show-addr", "-p", "-o", "state,current,persistent", obj]);
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    };
    assert_eq!(flags("i40e0/v4"), "ok:U----:U--");
    json(bus, &["down-addr", "i40e0/v4"]);
    assert_eq!(flags("i40e0/v4"), "down:-----:---");
    json(bus, &["up-addr", "i40e0/v4"]);
    json(bus, &["create-addr", "-t", "-T", "static", "-a", "192.0.2.7/24", "i40e0/tmp"]);
    assert_eq!(flags("i40e0/tmp"), "ok:U--t-:--");
    json(bus, &["delete-addr", "-t", "i40e0/tmp"]);
    // -t: the running system only.
    json(bus, &["down-addr", "-t", "i40e0/v6"]);
    assert!(!has("2001:db8::5/64") && !links().contains("down"));
    json(bus, &["up-addr", "-t", "i40e0/v6"]);
    assert!(has("2001:db8::5/64"));

    // disable-if: the device and its addresses leave the running system;
    // the configuration keeps them (show-if/show-addr: disabled).
    let before = links();
    let r = json(bus, &["disable-if", "-t", "i40e0"]);
    eprintln!("disable-if: {} us in the daemon", r["timing"]["total_us"]);
    assert!(kernel_addrs(ns, "i40e0").is_none(), "the device is gone");
    assert_eq!(if_state(bus, "i40e0"), "disabled");
    assert_eq!(addr_state(bus, "i40e0/v4"), "disabled");
    assert_eq!(links(), before, "the persistent configuration is kept");
    // Its address taken meanwhile by another interface, under another
    // prefix length: enable-if refuses (one address, one interface).
    json(bus, &["create-vnic", "-t", "-l", "i40e0", "dup0"]);
    json(bus, &["create-if", "-t", "dup0"]);
    json(bus, &["create-addr", "-t", "-T", "static", "-a", "192.0.2.5/25", "dup0/v4"]);
    let (k, m) = json_err(bus, &["enable-if", "-t", "i40e0"]);
    assert_eq!(k, "Exists", "{m}");
    assert_eq!(if_state(bus, "i40e0"), "disabled");
    json(bus, &["delete-if", "-t", "dup0"]);
    json(bus, &["delete-vnic", "-t", "dup0"]);
    // enable-if: back with its addresses.
    let r = json(bus, &["enable-if", "-t", "i40e0"]);
    eprintln!("enable-if: {} us in the daemon", r["timing"]["total_us"]);
    assert!(has("192.0.2.5/24") && has("2001:db8::5/64"));
    assert_eq!((if_state(bus, "i40e0"), addr_state(bus, "i40e0/v6")), ("ok".into(), "ok".into()));

    // Refusals: typed, nothing changed.
    json(bus, &["create-vnic", "-l", "i40e0", "vnic0"]);
    json(bus, &["create-if", "-t", "vnic0"]);
    json(bus, &["create-addr", "-T", "addrconf", "i40e0/auto"]);
    refused(
        bus,
        || (json(bus, &["show-addr"]), json(bus, &["show-if"]), links()),
        &[
            (&["enable-if", "i40e0"], "Exists"),
            (&["enable-if", "nosuch0"], "NotFound"),
            (&["disable-if", "vnic0"], "InvalidArgument"),
            (&["disable-if", "nosuch0"], "NotFound"),
            (&["disable-if", "bad name"], "InvalidName"),
            (&["down-addr", "i40e0/nosuch"], "NotFound"),
            (&["down-addr", "i40e0"], "InvalidName"),
            (&["down-addr", "i40e0/auto"], "InvalidArgument"),
            (&["up-addr", "vnic0/v4"], "NotFound"),
        ],
    );
    json(bus, &["delete-addr", "i40e0/auto"]);

    // Persisted: a down address stays down (and out of the kernel) after
    // a restart; a disabled interface comes back enabled (disable-if is
    // temporary, as ipadm's).
    json(bus, &["down-addr", "i40e0/v4"]);
    json(bus, &["disable-if", "-t", "i40e0"]);
    drop(daemon);
    let daemon = s.netadmd();
    assert_eq!(if_state(bus, "i40e0"), "ok");
    assert_eq!(addr_state(bus, "i40e0/v4"), "down");
    assert!(!has("192.0.2.5/24") && has("2001:db8::5/64"));
    drop(daemon);
}

/// `/proc/sys/net/FAMILY/conf/DEV/KEY` in namespace `ns`.
fn sysctl(ns: &str, family: &str, dev: &str, key: &str) -> String {
    let p = format!("/proc/sys/net/{family}/conf/{dev}/{key}");
    run(&["ip", "netns", "exec", ns, "cat", &p]).unwrap().trim().to_owned()
}

fn dev_mtu(ns: &str, dev: &str) -> u64 {
    let out = run(&["ip", "-n", ns, "-j", "link", "show", "dev", dev]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["mtu"].as_u64().unwrap()
}

/// `netadm show-ifprop -c -o FIELDS -p PROP -m PROTO i40e0`.
fn ifprop(bus: &Bus, fields: &str, prop: &str, proto: &str) -> String {
    let out = netadm(bus, &["show-ifprop", "-c", "-o", fields, "-p", prop, "-m", proto, "i40e0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

#[test]
fn interface_properties_reach_the_kernel_persist_and_refuse_bad_values() {
    let Some(s) = Setup::new("ifp") else { return };
    let (ns, bus, daemon) = (&s.ns, &s.bus, s.netadmd());
    json(bus, &["create-if", "i40e0"]);
    assert_eq!(ifprop(bus, "current,default", "forwarding", "ipv4"), "off:off");
    assert_eq!(ifprop(bus, "current,default,possible", "mtu", "ipv4"), "1500:1500:68-1500");
    let table = String::from_utf8(netadm(bus, &["show-ifprop", "i40e0"]).stdout).unwrap();
    let head: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        ["IFNAME", "PROPERTY", "PROTO", "PERM", "CURRENT", "PERSISTENT", "DEFAULT", "POSSIBLE"]
    );
    assert_eq!(table.lines().count(), 5, "{table}");

    // Each property in the kernel.
    let r = json(bus, &["set-ifprop", "-p", "forwarding=on", "-m", "ipv4", "i40e0"]);
    eprintln!("set-ifprop: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(sysctl(ns, "ipv4", "i40e0", "forwarding"), "1");
    assert_eq!(ifprop(bus, "current,persistent", "forwarding", "ipv4"), "on:on");
    json(bus, &["set-ifprop", "-p", "forwarding=on", "-m", "ipv6", "i40e0"]);
    assert_eq!(sysctl(ns, "ipv6", "i40e0", "forwarding"), "1");
    json(bus, &["set-ifprop", "-p", "mtu=1400", "-m", "ipv4", "i40e0"]);
    assert_eq!(dev_mtu(ns, "i40e0"), 1400);
    json(bus, &["set-ifprop", "-p", "mtu=1300", "-m", "ipv6", "i40e0"]);
    assert_eq!(sysctl(ns, "ipv6", "i40e0", "mtu"), "1300");
    assert_eq!(ifprop(bus, "current,default", "mtu", "ipv6"), "1300:1500");
    let ifs = json(bus, &["show-if"]);
    assert_eq!(rows(&ifs, "ifname", "i40e0")[0]["state"], "ok", "not drift: {ifs}");
    // -t: running only.
    let before = s.links();
    json(bus, &["reset-ifprop", "-t", "-p", "forwarding", "-m", "ipv6", "i40e0"]);
    assert_eq!(sysctl(ns, "ipv6", "i40e0", "forwarding"), "0");
    assert_eq!(s.links(), before);
    json(bus, &["set-ifprop", "-t", "-p", "forwarding=on", "-m", "ipv6", "i40e0"]);

    // Refusals: typed, nothing changed (kernel, show-ifprop, links.toml).
    let snapshot = || {
        (
            json(bus, &["show-ifprop"]),
            s.links(),
            dev_mtu(ns, "i40e0"),
            sysctl(ns, "ipv6", "i40e0", "mtu"),
        )
    };
    refused(
        bus,
        snapshot,
        &[
            (&["set-ifprop", "-p", "mtu=1501", "-m", "ipv4", "i40e0"], "InvalidValue"),
            (&["set-ifprop", "-p", "mtu=67", "-m", "ipv4", "i40e0"], "InvalidValue"),
            (&["set-ifprop", "-p", "mtu=1279", "-m", "ipv6", "i40e0"], "InvalidValue"),
            (&["set-ifprop", "-p", "mtu=1450", "-m", "ipv6", "i40e0"], "InvalidValue"),
            (&["set-ifprop", "-p", "forwarding=maybe", "-m", "ipv4", "i40e0"], "InvalidValue"),
            (
                &["set-ifprop", "-p", "forwarding=off,mtu=99999", "-m", "ipv4", "i40e0"],
                "InvalidValue",
            ),
            (&["set-ifprop", "-p", "colour=red", "-m", "ipv4", "i40e0"], "InvalidArgument"),
            (&["set-ifprop", "-p", "mtu=1400", "-m", "ipx", "i40e0"], "InvalidArgument"),
            (&["set-ifprop", "-p", "mtu=1400", "-m", "ipv4", "i40e1"], "NotFound"),
            (&["reset-ifprop", "-p", "colour", "-m", "ipv4", "i40e0"], "InvalidArgument"),
            (&["show-ifprop", "-p", "colour", "i40e0"], "InvalidArgument"),
            (&["show-ifprop", "nosuch0"], "NotFound"),
        ],
    );

    // Persisted and applied again by a new netadmd; -t ones are gone.
    drop(daemon);
    let daemon = s.netadmd();
    assert_eq!(sysctl(ns, "ipv4", "i40e0", "forwarding"), "1");
    assert_eq!(sysctl(ns, "ipv6", "i40e0", "forwarding"), "1");
    assert_eq!(dev_mtu(ns, "i40e0"), 1400);
    assert_eq!(sysctl(ns, "ipv6", "i40e0", "mtu"), "1300");

    // Reset: the defaults again, in the kernel too.
    json(bus, &["reset-ifprop", "-p", "mtu,forwarding", "-m", "ipv4", "i40e0"]);
    assert_eq!(dev_mtu(ns, "i40e0"), 1500);
    assert_eq!(sysctl(ns, "ipv4", "i40e0", "forwarding"), "0");
    assert_eq!(sysctl(ns, "ipv6", "i40e0", "mtu"), "1300", "the IPv6 MTU is its own");
    assert_eq!(ifprop(bus, "current,persistent", "mtu", "ipv4"), "1500:--");
    drop(daemon);
}

/// `/proc/sys/net/KEY` in namespace `ns`.
fn net_sysctl(ns: &str, key: &str) -> String {
    let p = format!("/proc/sys/net/{key}");
    run(&["ip", "netns", "exec", ns, "cat", &p]).unwrap().trim().to_owned()
}

#[test]
fn protocol_properties_are_the_namespaces_and_persist() {
    let Some(s) = Setup::new("prop") else { return };
    let host_ttl = std::fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl").unwrap();
    let (ns, bus, daemon) = (&s.ns, &s.bus, s.netadmd());
    let prop = |proto: &str, p: &str| {
        let out =
            netadm(bus, &["show-prop", "-c", "-o", "current,persistent,default", "-p", p, proto]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    };
    assert_eq!(prop("ipv4", "ttl"), "64:--:64");
    assert_eq!(prop("tcp", "ecn"), "passive:--:passive");
    let table = String::from_utf8(netadm(bus, &["show-prop"]).stdout).unwrap();
    assert_eq!(table.lines().count(), 5, "{table}");

    let r = json(bus, &["set-prop", "-p", "ttl=100,forwarding=on", "ipv4"]);
    eprintln!("set-prop: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(net_sysctl(ns, "ipv4/ip_default_ttl"), "100");
    assert_eq!(net_sysctl(ns, "ipv4/ip_forward"), "1");
    json(bus, &["set-prop", "-p", "forwarding=on", "ipv6"]);
    assert_eq!(net_sysctl(ns, "ipv6/conf/all/forwarding"), "1");
    json(bus, &["set-prop", "-t", "-p", "ecn=active", "tcp"]);
    assert_eq!(net_sysctl(ns, "ipv4/tcp_ecn"), "1");
    assert_eq!(prop("tcp", "ecn"), "active:--:passive");
    assert_eq!(prop("ipv4", "ttl"), "100:100:64");

    refused(
        bus,
        || (json(bus, &["show-prop"]), s.links()),
        &[
            (&["set-prop", "-p", "ttl=0", "ipv4"], "InvalidValue"),
            (&["set-prop", "-p", "ttl=256", "ipv4"], "InvalidValue"),
            (&["set-prop", "-p", "ecn=sometimes", "tcp"], "InvalidValue"),
            (&["set-prop", "-p", "colour=red", "ipv4"], "InvalidArgument"),
            (&["set-prop", "-p", "ttl=9", "sctp"], "InvalidArgument"),
            (&["reset-prop", "-p", "colour", "ipv4"], "InvalidArgument"),
            (&["show-prop", "-p", "colour", "ipv4"], "InvalidArgument"),
        ],
    );
    assert_eq!(net_sysctl(ns, "ipv4/ip_default_ttl"), "100");

    // A new netadmd in a fresh namespace state applies what persisted.
    drop(daemon);
    let ttl = "echo 64 > /proc/sys/net/ipv4/ip_default_ttl";
    run(&["ip", "netns", "exec", ns, "sh", "-c", ttl]).unwrap();
    let daemon = s.netadmd();
    assert_eq!(net_sysctl(ns, "ipv4/ip_default_ttl"), "100");
    json(bus, &["reset-prop", "-p", "ttl,forwarding", "ipv4"]);
    assert_eq!(net_sysctl(ns, "ipv4/ip_default_ttl"), "64");
    assert_eq!(net_sysctl(ns, "ipv4/ip_forward"), "0");
    assert_eq!(prop("ipv4", "ttl"), "64:--:64");
    drop(daemon);
    // The host's namespace was never touched.
    assert_eq!(std::fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl").unwrap(), host_ttl);
}

/// The kernel's record of `ip` on `dev` in `ns`: (prefix, deprecated).
fn kernel_addr(ns: &str, dev: &str, ip: &str) -> Option<(u64, bool)> {
    let out = run(&["ip", "-n", ns, "-j", "addr", "show", "dev", dev]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["addr_info"]
        .as_array()?
        .iter()
        .find(|a| a["local"] == ip)
        .map(|a| (a["prefixlen"].as_u64().unwrap(), a["deprecated"] == true))
}

#[test]
fn address_properties_change_the_kernels_address_and_persist() {
    let Some(s) = Setup::new("adp") else { return };
    let (ns, bus, daemon) = (&s.ns, &s.bus, s.netadmd());
    json(bus, &["create-if", "i40e0"]);
    json(bus, &["create-addr", "-T", "static", "-a", "192.0.2.5/24", "i40e0/v4"]);
    json(bus, &["create-addr", "-T", "static", "-a", "2001:db8::5/64", "i40e0/v6"]);
    let prop = |obj: &str, p: &str| {
        let args = ["show-addrprop", "-c", "-o", "current,persistent,default", "-p", p, obj];
        let out = netadm(bus, &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    };
    assert_eq!(prop("i40e0/v4", "prefixlen"), "24:--:24");
    assert_eq!(prop("i40e0/v4", "broadcast"), "192.0.2.255:--:--");
    assert_eq!(prop("i40e0/v6", "deprecated"), "off:--:off");

    let r = json(bus, &["set-addrprop", "-p", "prefixlen=16", "i40e0/v4"]);
    eprintln!("set-addrprop prefixlen: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(kernel_addr(ns, "i40e0", "192.0.2.5"), Some((16, false)));
    assert_eq!(prop("i40e0/v4", "prefixlen"), "16:16:24");
    let r = json(bus, &["set-addrprop", "-p", "deprecated=on", "i40e0/v6"]);
    eprintln!("set-addrprop deprecated: {} us in the daemon", r["timing"]["total_us"]);
    assert_eq!(kernel_addr(ns, "i40e0", "2001:db8::5"), Some((64, true)));
    json(bus, &["set-addrprop", "-t", "-p", "deprecated=on", "i40e0/v4"]);
    assert_eq!(kernel_addr(ns, "i40e0", "192.0.2.5"), Some((16, true)));
    assert_eq!(prop("i40e0/v4", "deprecated"), "on:--:off");
    let ifs = json(bus, &["show-if"]);
    assert_eq!(rows(&ifs, "ifname", "i40e0")[0]["state"], "ok", "not drift: {ifs}");

    refused(
        bus,
        || (json(bus, &["show-addrprop"]), s.links()),
        &[
            (&["set-addrprop", "-p", "prefixlen=33", "i40e0/v4"], "InvalidValue"),
            (&["set-addrprop", "-p", "prefixlen=0", "i40e0/v6"], "InvalidValue"),
            (&["set-addrprop", "-p", "deprecated=maybe", "i40e0/v4"], "InvalidValue"),
            (&["set-addrprop", "-p", "broadcast=192.0.2.1", "i40e0/v4"], "NotSupported"),
            (&["set-addrprop", "-p", "colour=red", "i40e0/v4"], "InvalidArgument"),
            (&["set-addrprop", "-p", "prefixlen=8", "i40e0/nosuch"], "NotFound"),
            (&["reset-addrprop", "-p", "colour", "i40e0/v4"], "InvalidArgument"),
            (&["show-addrprop", "-p", "colour", "i40e0/v4"], "InvalidArgument"),
            (&["show-addrprop", "i40e0/nosuch"], "NotFound"),
        ],
    );

    // Persisted: a new netadmd makes the addresses so again.
    drop(daemon);
    let daemon = s.netadmd();
    assert_eq!(kernel_addr(ns, "i40e0", "192.0.2.5"), Some((16, false)));
    assert_eq!(kernel_addr(ns, "i40e0", "2001:db8::5"), Some((64, true)));
    json(bus, &["reset-addrprop", "-p", "prefixlen", "i40e0/v4"]);
    json(bus, &["reset-addrprop", "-p", "deprecated", "i40e0/v6"]);
    assert_eq!(kernel_addr(ns, "i40e0", "192.0.2.5"), Some((24, false)));
    assert_eq!(kernel_addr(ns, "i40e0", "2001:db8::5"), Some((64, false)));
    drop(daemon);
}

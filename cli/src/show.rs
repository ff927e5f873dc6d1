//! The show verbs' tables, built from what the daemon answered: one
//! description per type of row (its columns in their default order and
//! how one row fills them), and the few tables of `show-aggr` that join
//! several answers. Pure: the bus calls are in `dispatch.rs` and `main.rs`,
//! the printing in [`crate::render`].

use netadm_dbus::{
    AddrInfo, AddrPropInfo, AggrInfo, AggrPortInfo, EtherInfo, EtherstubInfo, FlowInfo,
    FlowPropInfo, FlowStats, HistoryEntry, IfInfo, IfPropInfo, LinkInfo, LinkStats, PhysInfo,
    PhysLocInfo, PhysMacInfo, PropInfo, ProtectStats, ProtoPropInfo, TrafficInfo, VlanInfo,
    VnicInfo,
};

use serde_json::Value;

use crate::error::CliError;
use crate::render::{Cell, Row, Table};

/// What the daemon answers a show verb with, as the verb prints it.
pub trait Rows: Sized {
    /// Column names, uppercase, in their default order.
    const COLUMNS: &'static [&'static str];
    /// What one is called in `<what> <name> does not exist`, when a show
    /// verb picks one by name.
    const WHAT: &'static str = "";
    /// Its name, for picking it.
    fn name(&self) -> &str {
        ""
    }
    /// Its row: a cell for each of [`Rows::COLUMNS`], and JSON-only extras.
    fn row(&self) -> Row;
}

/// The table of `v`.
pub fn table<T: Rows>(v: &[T]) -> Table {
    Table { columns: T::COLUMNS, rows: v.iter().map(T::row).collect() }
}

/// Keeps the one item named `name` (all of them when `None`); a name that
/// matches nothing is a `NotFound` error, `<what> <name> does not exist`.
pub fn pick<T>(
    items: Vec<T>,
    name: Option<&str>,
    key: impl Fn(&T) -> &str,
    what: &str,
) -> Result<Vec<T>, CliError> {
    let Some(name) = name else {
        return Ok(items);
    };
    let found: Vec<T> = items.into_iter().filter(|i| key(i) == name).collect();
    if found.is_empty() {
        return Err(CliError::not_found(format!("{what} {name} does not exist")));
    }
    Ok(found)
}

/// [`pick`] by the row type's own name and noun.
pub fn pick_rows<T: Rows>(items: Vec<T>, name: Option<&str>) -> Result<Vec<T>, CliError> {
    pick(items, name, T::name, T::WHAT)
}

/// One [`Rows`] description per entry:
///
/// ```text
/// Type as x [, "what" name_field] { COLUMN: cell, ... } [extra { key: value, ... }];
/// ```
///
/// `x` is the row's item in the cells (`Cell`s) and extras (JSON values);
/// the column's name is its header (a string where it is no identifier:
/// `"SPEED-DUPLEX"`).
macro_rules! rows {
    ($(
        $(#[$m:meta])*
        $t:ty as $x:ident $(, $what:literal $key:ident)? {
            $($col:tt: $cell:expr),+ $(,)?
        } $(extra { $($k:ident: $v:expr),+ $(,)? })?;
    )*) => {$(
        $(#[$m])*
        impl Rows for $t {
            const COLUMNS: &'static [&'static str] = &[$(column!($col)),+];
            $(
                const WHAT: &'static str = $what;
                fn name(&self) -> &str {
                    &self.$key
                }
            )?
            fn row(&self) -> Row {
                let $x = self;
                Row::new()$(.cell(column!($col), $cell))+$($(.extra(stringify!($k), $v))+)?
            }
        }
    )*};
}

/// A column's name in [`rows!`]: an identifier's spelling, or the string.
macro_rules! column {
    ($c:ident) => {
        stringify!($c)
    };
    ($c:literal) => {
        $c
    };
}

rows! {
    /// `show-phys`.
    PhysInfo as p, "physical link" link {
        LINK: Cell::text(&p.link), MEDIA: Cell::text(&p.media), STATE: Cell::text(&p.state),
        SPEED: Cell::num(p.speed), DUPLEX: Cell::text(&p.duplex), DEVICE: Cell::text(&p.device),
    } extra {
        driver: p.driver.as_str(), rings: p.rings, rings_started: p.rings_started,
        dma_bytes: p.dma_bytes,
    };

    /// `show-phys -m`.
    PhysMacInfo as p, "physical link" link {
        LINK: Cell::text(&p.link), SLOT: Cell::text(&p.slot), ADDRESS: Cell::text(&p.address),
        INUSE: Cell::text(if p.inuse { "yes" } else { "no" }).json_as(p.inuse),
        CLIENT: Cell::text_or_dash(&p.client),
    };

    /// `show-phys -L`.
    PhysLocInfo as p, "physical link" link {
        LINK: Cell::text(&p.link), DEVICE: Cell::text(&p.device),
        LOCATION: Cell::text_or_dash(&p.location),
    };

    /// `show-ether` (`-x`: the lines after a link's `current` one show
    /// LINK as `--` in the table, as dladm's do; parsable output and JSON
    /// name the link).
    EtherInfo as e, "physical link" link {
        LINK: if e.ptype == "current" { Cell::text(&e.link) } else { Cell::text(&e.link).table_as("--") },
        PTYPE: Cell::text(&e.ptype), STATE: Cell::text_or_dash(&e.state),
        AUTO: Cell::text_or_dash(&e.auto), "SPEED-DUPLEX": Cell::text_or_dash(&e.speed_duplex),
        PAUSE: Cell::text_or_dash(&e.pause),
    };

    /// `show-link` (no bridges in netadm: BRIDGE is `--`).
    LinkInfo as l, "link" link {
        LINK: Cell::text(&l.link), CLASS: Cell::text(&l.class), MTU: Cell::num(l.mtu),
        STATE: Cell::text(&l.state), BRIDGE: Cell::text("--"), OVER: Cell::list(&l.over),
    } extra { member_of: l.member_of.as_str(), persistent: l.persistent };

    /// `show-aggr` (dladm's FLAGS, forced, 802.3ad marker, ...: none apply).
    AggrInfo as a, "aggregation" link {
        LINK: Cell::text(&a.link), POLICY: Cell::text(&a.policy),
        ADDRPOLICY: Cell::text(&a.addr_policy), LACPACTIVITY: Cell::text(&a.lacp_mode),
        LACPTIMER: Cell::text(&a.lacp_timer), FLAGS: Cell::text("----"),
    } extra {
        address: a.mac.as_str(),
        ports: a.ports.iter().map(|p| p.port.clone()).collect::<Vec<_>>(),
    };

    /// `show-vnic`.
    VnicInfo as n, "VNIC" link {
        LINK: Cell::text(&n.link), OVER: Cell::text(&n.over), SPEED: Cell::num(n.speed),
        MACADDRESS: Cell::text(&n.macaddress), MACADDRTYPE: Cell::text(&n.macaddrtype),
        VID: Cell::num(n.vid),
    };

    /// `show-vlan` (dladm's LINK VID OVER FLAGS).
    VlanInfo as n, "VLAN" link {
        LINK: Cell::text(&n.link), VID: Cell::num(n.vid), OVER: Cell::text(&n.over),
        FLAGS: Cell::text(&n.flags),
    };

    /// `show-etherstub`: dladm's LINK, and the kind of switch it is
    /// (`netadm`'s own or a `kernel` bridge; JSON adds the bridge device).
    EtherstubInfo as n, "etherstub" link {
        LINK: Cell::text(&n.link), KIND: Cell::text(&n.kind),
    } extra { device: n.device.as_str() };

    /// `show-linkprop`. Values stay strings in JSON: properties are
    /// heterogeneous and `--` means "none".
    PropInfo as p {
        LINK: Cell::text(&p.link), PROPERTY: Cell::text(&p.property), PERM: Cell::text(&p.perm),
        VALUE: Cell::text_or_dash(&p.value), DEFAULT: Cell::text_or_dash(&p.default),
        POSSIBLE: Cell::text_or_dash(&p.possible),
    };

    /// `show-ifprop`.
    IfPropInfo as p {
        IFNAME: Cell::text(&p.ifname), PROPERTY: Cell::text(&p.property),
        PROTO: Cell::text(&p.proto), PERM: Cell::text(&p.perm),
        CURRENT: Cell::text_or_dash(&p.current), PERSISTENT: Cell::text_or_dash(&p.persistent),
        DEFAULT: Cell::text_or_dash(&p.default), POSSIBLE: Cell::text_or_dash(&p.possible),
    };

    /// `show-addrprop`.
    AddrPropInfo as p {
        ADDROBJ: Cell::text(&p.addrobj), PROPERTY: Cell::text(&p.property),
        PERM: Cell::text(&p.perm), CURRENT: Cell::text_or_dash(&p.current),
        PERSISTENT: Cell::text_or_dash(&p.persistent), DEFAULT: Cell::text_or_dash(&p.default),
        POSSIBLE: Cell::text_or_dash(&p.possible),
    };

    /// `show-prop`.
    ProtoPropInfo as p {
        PROTO: Cell::text(&p.proto), PROPERTY: Cell::text(&p.property), PERM: Cell::text(&p.perm),
        CURRENT: Cell::text_or_dash(&p.current), PERSISTENT: Cell::text_or_dash(&p.persistent),
        DEFAULT: Cell::text_or_dash(&p.default), POSSIBLE: Cell::text_or_dash(&p.possible),
    };

    /// `show-if`.
    IfInfo as i, "IP interface" ifname {
        IFNAME: Cell::text(&i.ifname), CLASS: Cell::text(&i.class), STATE: Cell::text(&i.state),
        CURRENT: Cell::text_or_dash(&i.current), PERSISTENT: Cell::text_or_dash(&i.persistent),
    } extra { kernel_device: i.kernel_device.as_str(), drift: i.drift.as_str() };

    /// `show-addr`.
    AddrInfo as a, "address object" addrobj {
        ADDROBJ: Cell::text(&a.addrobj), TYPE: Cell::text(&a.r#type),
        STATE: Cell::text(&a.state), CURRENT: Cell::text(&a.current),
        PERSISTENT: Cell::text_or_dash(&a.persistent), ADDR: Cell::text(&a.addr),
    };

    /// `show-history`. TOTAL is milliseconds: one decimal with the unit in
    /// the table, three decimals (exact µs) in parsable output, a number in
    /// JSON (plus `total_us` and `time_ms`).
    HistoryEntry as h {
        SEQ: Cell::num(h.seq), TIME: Cell::text(clock(h.time_ms)),
        COMMAND: Cell::text(&h.command), RESULT: Cell::text(if h.ok { "ok" } else { "failed" }),
        TOTAL: total(h.total_us), ERROR: Cell::text_or_dash(&h.error),
    } extra { time_ms: h.time_ms, total_us: h.total_us, ok: h.ok };

    /// `show-link -s` / `show-phys -s`: traffic counters.
    LinkStats as s, "link" link {
        LINK: Cell::text(&s.link), IPACKETS: Cell::num(s.ipackets), RBYTES: Cell::num(s.rbytes),
        IDROPS: Cell::num(s.idrops), OPACKETS: Cell::num(s.opackets),
        OBYTES: Cell::num(s.obytes), ODROPS: Cell::num(s.odrops),
    };

    /// What link protection counted on a VNIC (joined into `show-link -s`
    /// by [`link_stats`]).
    ProtectStats as p, "protected link" link {
        LINK: Cell::text(&p.link), PROTECTION: Cell::text_or_dash(&p.protection),
        MAC: Cell::num(p.mac_nospoof), IP: Cell::num(p.ip_nospoof), DHCP: Cell::num(p.dhcp_nospoof),
        RESTRICTED: Cell::num(p.restricted), OPACKETS: Cell::num(p.opackets),
        OBYTES: Cell::num(p.obytes),
    } extra { enforced: p.enforced.as_str() };

    /// `show-flow`: flowadm's columns; IPADDR is `LCL:` the link's
    /// address or prefix and `RMT:` the far end's. JSON has each attribute
    /// under its own name too.
    FlowInfo as f, "flow" flow {
        FLOW: Cell::text(&f.flow), LINK: Cell::text(&f.link), IPADDR: Cell::text_or_dash(ipaddr(f)),
        PROTO: Cell::text_or_dash(&f.transport), LPORT: Cell::text_or_dash(&f.local_port),
        RPORT: Cell::text_or_dash(&f.remote_port), DSFLD: Cell::text_or_dash(&f.dsfield),
    } extra {
        transport: f.transport.as_str(), local_ip: f.local_ip.as_str(),
        remote_ip: f.remote_ip.as_str(), local_port: f.local_port.as_str(),
        remote_port: f.remote_port.as_str(), dsfield: f.dsfield.as_str(),
    };

    /// What each flow carried (`flowstat` prints these through `dlstat.rs`).
    FlowStats as s, "flow" flow {
        FLOW: Cell::text(&s.flow), IPKTS: Cell::num(s.ipackets), RBYTES: Cell::num(s.rbytes),
        IDROPS: Cell::num(s.idrops), OPKTS: Cell::num(s.opackets), OBYTES: Cell::num(s.obytes),
        ODROPS: Cell::num(s.odrops),
    } extra { link: s.link.as_str() };

    /// `show-flowprop`.
    FlowPropInfo as p {
        FLOW: Cell::text(&p.flow), PROPERTY: Cell::text(&p.property),
        VALUE: Cell::text_or_dash(&p.value), DEFAULT: Cell::text_or_dash(&p.default),
        POSSIBLE: Cell::text_or_dash(&p.possible),
    };

    /// `show-traffic`.
    TrafficInfo as t, "traffic on link" link {
        LINK: Cell::text(&t.link), STATE: Cell::text(if t.running { "running" } else { "stopped" }),
        RATE: Cell::num(t.rate), SIZE: Cell::num(t.size), FLOWS: Cell::num(t.flows),
        SENT: Cell::num(t.sent), RECEIVED: Cell::num(t.received), LOST: Cell::num(t.lost),
        REORDERED: Cell::num(t.reordered), DUPLICATED: Cell::num(t.duplicated),
        AVG_US: us(t.latency_avg_us), P99_US: us(t.latency_p99_us), MAX_US: us(t.latency_max_us),
        PAUSE_MAX_US: us(t.pause_max_us),
    } extra { paused_us: t.paused_us };
}

/// Microseconds with one decimal; a number in JSON.
fn us(x: f64) -> Cell {
    Cell::text(format!("{x:.1}")).json_as(x)
}

/// `show-history`'s TOTAL of `total_us`.
fn total(total_us: u64) -> Cell {
    let ms = total_us as f64 / 1000.0;
    Cell::text(format!("{ms:.3}")).table_as(format!("{ms:.1} ms")).json_as(ms)
}

/// `HH:MM:SS.mmm` (UTC) of a Unix time in milliseconds.
pub fn clock(time_ms: u64) -> String {
    let day_ms = time_ms % 86_400_000;
    let (h, m) = (day_ms / 3_600_000, day_ms / 60_000 % 60);
    let (s, ms) = (day_ms / 1000 % 60, day_ms % 1000);
    format!("{h:02}:{m:02}:{s:02}.{ms:03}")
}

/// `show-aggr`.
pub fn aggr(v: &[AggrInfo]) -> Table {
    table(v)
}

/// `show-history`.
#[cfg(test)]
pub fn history(v: &[HistoryEntry]) -> Table {
    table(v)
}

/// `show-aggr -L`'s columns.
pub const LACP_COLUMNS: &[&str] =
    &["LINK", "PORT", "AGGREGATABLE", "SYNC", "COLL", "DIST", "DEFAULTED", "EXPIRED"];

/// `show-aggr -x`'s columns.
pub const EXTENDED_COLUMNS: &[&str] =
    &["LINK", "PORT", "SPEED", "DUPLEX", "STATE", "ADDRESS", "PORTSTATE"];

/// `show-aggr -s`'s columns.
pub const STATS_COLUMNS: &[&str] = &["LINK", "PORT", "IPACKETS", "RBYTES", "OPACKETS", "OBYTES"];

/// `show-aggr -L`: LACP state per port, from the port's LACP actor bits
/// (all "no" when LACP is off).
pub fn aggr_lacp(v: &[AggrInfo]) -> Table {
    let yn = |b: bool| Cell::text(if b { "yes" } else { "no" });
    let rows = v.iter().flat_map(|a| {
        a.ports.iter().map(move |p| {
            let bit = |b: u8| yn(p.lacp & b != 0);
            Row::new()
                .cell("LINK", Cell::text(&a.link))
                .cell("PORT", Cell::text(&p.port))
                .cells([("AGGREGATABLE", bit(0x04)), ("SYNC", bit(0x08)), ("COLL", bit(0x10))])
                .cells([("DIST", bit(0x20)), ("DEFAULTED", bit(0x40)), ("EXPIRED", bit(0x80))])
        })
    });
    Table { columns: LACP_COLUMNS, rows: rows.collect() }
}

/// The tables of `show-aggr -x` and `-s`: for each aggregation its own line
/// (PORT `--`; for people and parsable output, not JSON), then one line per
/// port, whose LINK is blank in the table (parsable output and JSON name
/// the aggregation). `aggr` and `port` fill in the other columns.
fn per_port(
    v: &[AggrInfo],
    columns: &'static [&'static str],
    aggr: impl Fn(&AggrInfo, Row) -> Row,
    port: impl Fn(&AggrInfo, &AggrPortInfo, Row) -> Row,
) -> Table {
    let mut rows = Vec::new();
    for a in v {
        let own = Row::new().cell("LINK", Cell::text(&a.link)).cell("PORT", Cell::text("--"));
        rows.push(aggr(a, own).not_json());
        for p in &a.ports {
            let line = Row::new().cell("LINK", Cell::text(&a.link).table_as(""));
            rows.push(port(a, p, line.cell("PORT", Cell::text(&p.port))));
        }
    }
    Table { columns, rows }
}

/// `show-aggr -x`: the aggregation's speed (of its attached ports), duplex
/// (theirs when they agree), state and address, then each port's.
pub fn aggr_extended(v: &[AggrInfo], links: &[LinkInfo], phys: &[PhysInfo]) -> Table {
    let phys_of = |port: &str| phys.iter().find(|p| p.link == port);
    let aggr = |a: &AggrInfo, row: Row| {
        let attached: Vec<_> = a.ports.iter().filter(|p| p.state == "attached").collect();
        let speed: u64 = attached.iter().map(|p| p.speed).sum();
        let duplexes: Vec<&str> = attached
            .iter()
            .map(|p| phys_of(&p.port).map_or("unknown", |ph| ph.duplex.as_str()))
            .collect();
        let duplex = match duplexes.first() {
            Some(d) if duplexes.iter().all(|x| x == d) => *d,
            _ => "unknown",
        };
        let state = links.iter().find(|l| l.link == a.link).map_or("unknown", |l| &l.state);
        row.cell("SPEED", Cell::num(speed))
            .cell("DUPLEX", Cell::text(duplex))
            .cell("STATE", Cell::text(state))
            .cell("ADDRESS", Cell::text_or_dash(&a.mac))
            .cell("PORTSTATE", Cell::text("--"))
    };
    let port = |_: &AggrInfo, p: &AggrPortInfo, row: Row| {
        let ph = phys_of(&p.port);
        row.cell("SPEED", Cell::num(p.speed))
            .cell("DUPLEX", Cell::text(ph.map_or("unknown", |ph| &ph.duplex)))
            .cell("STATE", Cell::text(ph.map_or("unknown", |ph| &ph.state)))
            // The contract carries no per-port MAC address yet.
            .cell("ADDRESS", Cell::text_or_dash(""))
            .cell("PORTSTATE", Cell::text(&p.state))
    };
    per_port(v, EXTENDED_COLUMNS, aggr, port)
}

/// show-flow's IPADDR: `LCL:ADDR` and `RMT:ADDR` where given.
fn ipaddr(f: &FlowInfo) -> String {
    let sides = [("LCL", &f.local_ip), ("RMT", &f.remote_ip)];
    let given: Vec<String> =
        sides.iter().filter(|(_, a)| !a.is_empty()).map(|(s, a)| format!("{s}:{a}")).collect();
    given.join(",")
}

/// The columns of `show-link -s`: [`LinkStats`]'s, and PDROPS, what link
/// protection dropped.
pub const LINK_STATS_COLUMNS: &[&str] =
    &["LINK", "IPACKETS", "RBYTES", "IDROPS", "OPACKETS", "OBYTES", "ODROPS", "PDROPS"];

/// `show-link -s`: the ports' and aggregations' counters, then a row per
/// VNIC link protection guards: what it let through (OPACKETS, OBYTES),
/// what it dropped (PDROPS; in JSON, `drops` by reason), and `--` for
/// what is not counted per VNIC.
pub fn link_stats(stats: &[LinkStats], prot: &[ProtectStats]) -> Table {
    let none = || Cell::text("--").json_as(Value::Null);
    let mut rows: Vec<Row> = stats
        .iter()
        .map(|s| {
            Row::new()
                .cell("LINK", Cell::text(&s.link))
                .cell("IPACKETS", Cell::num(s.ipackets))
                .cell("RBYTES", Cell::num(s.rbytes))
                .cell("IDROPS", Cell::num(s.idrops))
                .cell("OPACKETS", Cell::num(s.opackets))
                .cell("OBYTES", Cell::num(s.obytes))
                .cell("ODROPS", Cell::num(s.odrops))
                .cell("PDROPS", none())
        })
        .collect();
    rows.extend(prot.iter().map(|p| {
        let drops = p.mac_nospoof + p.ip_nospoof + p.dhcp_nospoof + p.restricted;
        let by_reason = serde_json::json!({
            "mac-nospoof": p.mac_nospoof,
            "ip-nospoof": p.ip_nospoof,
            "dhcp-nospoof": p.dhcp_nospoof,
            "restricted": p.restricted,
        });
        Row::new()
            .cell("LINK", Cell::text(&p.link))
            .cell("IPACKETS", none())
            .cell("RBYTES", none())
            .cell("IDROPS", none())
            .cell("OPACKETS", Cell::num(p.opackets))
            .cell("OBYTES", Cell::num(p.obytes))
            .cell("ODROPS", none())
            .cell("PDROPS", Cell::num(drops))
            .extra("protection", p.protection.as_str())
            .extra("enforced", p.enforced.as_str())
            .extra("drops", by_reason)
    }));
    Table { columns: LINK_STATS_COLUMNS, rows }
}

/// `show-aggr -s`: traffic counters of the aggregation, then of each port.
pub fn aggr_stats(v: &[AggrInfo], stats: &[LinkStats]) -> Table {
    let counters = |row: Row, link: &str| {
        let s = stats.iter().find(|s| s.link == link);
        let n = |f: fn(&LinkStats) -> u64| Cell::num(s.map_or(0, f));
        row.cell("IPACKETS", n(|s| s.ipackets))
            .cell("RBYTES", n(|s| s.rbytes))
            .cell("OPACKETS", n(|s| s.opackets))
            .cell("OBYTES", n(|s| s.obytes))
    };
    per_port(v, STATS_COLUMNS, |a, row| counters(row, &a.link), |_, p, row| counters(row, &p.port))
}

#[cfg(test)]
mod tests {
    use netadm_dbus::AggrPortInfo;
    use serde_json::{Value, json};

    use super::*;
    use crate::render::{Format, render};

    fn aggr0() -> AggrInfo {
        AggrInfo {
            link: "aggr0".into(),
            policy: "L4".into(),
            addr_policy: "auto".into(),
            mac: "2:8:20:0:0:1".into(),
            lacp_mode: "off".into(),
            lacp_timer: "short".into(),
            ports: ["i40e0", "i40e1"]
                .map(|p| AggrPortInfo {
                    port: p.into(),
                    state: "attached".into(),
                    speed: 40000,
                    lacp: 0,
                })
                .to_vec(),
        }
    }

    fn phys(name: &str) -> PhysInfo {
        PhysInfo {
            link: name.into(),
            media: "Ethernet".into(),
            state: "up".into(),
            speed: 40000,
            duplex: "full".into(),
            device: name.into(),
            driver: "i40e".into(),
            rings: 256,
            rings_started: 256,
            dma_bytes: 1,
        }
    }

    #[test]
    fn pick_filters_or_reports_not_found() {
        let v = vec![aggr0()];
        assert_eq!(pick(v.clone(), None, |a| &a.link, "aggregation").unwrap().len(), 1);
        assert_eq!(pick(v.clone(), Some("aggr0"), |a| &a.link, "aggregation").unwrap().len(), 1);
        let e = pick(v, Some("aggr9"), |a| &a.link, "aggregation").unwrap_err();
        assert_eq!(e, CliError::not_found("aggregation aggr9 does not exist"));
    }

    #[test]
    fn extended_aggr_lines() {
        let link = LinkInfo {
            link: "aggr0".into(),
            class: "aggr".into(),
            mtu: 1500,
            state: "up".into(),
            over: vec![],
            member_of: String::new(),
            persistent: true,
        };
        let t = aggr_extended(&[aggr0()], &[link], &[phys("i40e0"), phys("i40e1")]);
        let s = render(&t, &Format::default()).unwrap();
        assert_eq!(
            s,
            "LINK  PORT  SPEED DUPLEX STATE ADDRESS      PORTSTATE\n\
             aggr0 --    80000 full   up    2:8:20:0:0:1 --\n      \
             i40e0 40000 full   up    --           attached\n      \
             i40e1 40000 full   up    --           attached\n"
        );
        let json = Format { json: true, ..Format::default() };
        let v: Value = serde_json::from_str(&render(&t, &json).unwrap()).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[0]["link"], "aggr0");
        assert_eq!(v[0]["portstate"], "attached");
        assert_eq!(v[0]["speed"], 40000);
        let p = Format { parsable: true, fields: Some("link,port".into()), ..Format::default() };
        assert_eq!(render(&t, &p).unwrap(), "aggr0:--\naggr0:i40e0\naggr0:i40e1\n");
    }

    #[test]
    fn lacp_columns_show_the_actor_state_bits() {
        let mut a = aggr0();
        let p = Format {
            parsable: true,
            fields: Some("port,aggregatable,sync,dist,defaulted".into()),
            ..Format::default()
        };
        // LACP off: no bits.
        assert_eq!(
            render(&aggr_lacp(&[a.clone()]), &p).unwrap(),
            "i40e0:no:no:no:no\ni40e1:no:no:no:no\n"
        );
        // Negotiated on i40e0 (aggregatable, sync, collecting,
        // distributing); defaulted on i40e1.
        a.ports[0].lacp = 0x04 | 0x08 | 0x10 | 0x20;
        a.ports[1].lacp = 0x04 | 0x40;
        assert_eq!(
            render(&aggr_lacp(&[a]), &p).unwrap(),
            "i40e0:yes:yes:yes:no\ni40e1:yes:no:no:yes\n"
        );
    }

    #[test]
    fn aggr_json_has_ports() {
        let json = Format { json: true, ..Format::default() };
        let v: Value = serde_json::from_str(&render(&aggr(&[aggr0()]), &json).unwrap()).unwrap();
        assert_eq!(v[0]["ports"], json!(["i40e0", "i40e1"]));
        assert_eq!(v[0]["lacpactivity"], "off");
    }

    #[test]
    fn history_times() {
        assert_eq!(clock(0), "00:00:00.000");
        assert_eq!(clock(86_400_000 + 13 * 3_600_000 + 5 * 60_000 + 7_089), "13:05:07.089");
        let h = HistoryEntry {
            seq: 3,
            time_ms: 1_000,
            command: "create-aggr aggr0".into(),
            ok: false,
            total_us: 10_042,
            error: "Busy: i40e0 is a port of aggr1".into(),
        };
        let t = history(&[h]);
        let p =
            Format { parsable: true, fields: Some("seq,total,error".into()), ..Format::default() };
        assert_eq!(render(&t, &p).unwrap(), "3:10.042:Busy\\: i40e0 is a port of aggr1\n");
        let s = render(&t, &Format { fields: Some("total,result".into()), ..Format::default() });
        assert_eq!(s.unwrap(), "TOTAL   RESULT\n10.0 ms failed\n");
        let json = Format { json: true, ..Format::default() };
        let v: Value = serde_json::from_str(&render(&t, &json).unwrap()).unwrap();
        assert_eq!(v[0]["total"], 10.042);
        assert_eq!(v[0]["total_us"], 10_042);
        assert_eq!(v[0]["seq"], 3);
    }
}

//! The show verbs' tables, built from what the daemon answered. Pure: the
//! bus calls are in `main.rs`, the printing in [`crate::render`].

use netadm_dbus::{
    AddrInfo, AddrPropInfo, AggrInfo, HistoryEntry, IfInfo, IfPropInfo, LinkInfo, PhysInfo,
    PropInfo, ProtoPropInfo, VnicInfo,
};

use crate::error::CliError;
use crate::render::{Cell, Row, Table};

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

/// `show-phys`.
pub fn phys(v: &[PhysInfo]) -> Table {
    Table {
        columns: &["LINK", "MEDIA", "STATE", "SPEED", "DUPLEX", "DEVICE"],
        rows: v
            .iter()
            .map(|p| {
                Row::new()
                    .cell("LINK", Cell::text(&p.link))
                    .cell("MEDIA", Cell::text(&p.media))
                    .cell("STATE", Cell::text(&p.state))
                    .cell("SPEED", Cell::num(p.speed))
                    .cell("DUPLEX", Cell::text(&p.duplex))
                    .cell("DEVICE", Cell::text(&p.device))
                    .extra("driver", p.driver.as_str())
                    .extra("rings", p.rings)
                    .extra("rings_started", p.rings_started)
                    .extra("dma_bytes", p.dma_bytes)
            })
            .collect(),
    }
}

/// `show-link`.
pub fn link(v: &[LinkInfo]) -> Table {
    Table {
        columns: &["LINK", "CLASS", "MTU", "STATE", "BRIDGE", "OVER"],
        rows: v
            .iter()
            .map(|l| {
                Row::new()
                    .cell("LINK", Cell::text(&l.link))
                    .cell("CLASS", Cell::text(&l.class))
                    .cell("MTU", Cell::num(l.mtu))
                    .cell("STATE", Cell::text(&l.state))
                    // No bridges in netadm.
                    .cell("BRIDGE", Cell::text("--"))
                    .cell("OVER", Cell::list(&l.over))
                    .extra("member_of", l.member_of.as_str())
                    .extra("persistent", l.persistent)
            })
            .collect(),
    }
}

/// `show-aggr`.
pub fn aggr(v: &[AggrInfo]) -> Table {
    Table {
        columns: &["LINK", "POLICY", "ADDRPOLICY", "LACPACTIVITY", "LACPTIMER", "FLAGS"],
        rows: v
            .iter()
            .map(|a| {
                let ports: Vec<String> = a.ports.iter().map(|p| p.port.clone()).collect();
                Row::new()
                    .cell("LINK", Cell::text(&a.link))
                    .cell("POLICY", Cell::text(&a.policy))
                    .cell("ADDRPOLICY", Cell::text(&a.addr_policy))
                    .cell("LACPACTIVITY", Cell::text(&a.lacp_mode))
                    .cell("LACPTIMER", Cell::text(&a.lacp_timer))
                    // dladm's FLAGS (forced, 802.3ad marker, ...): none apply.
                    .cell("FLAGS", Cell::text("----"))
                    .extra("address", a.mac.as_str())
                    .extra("ports", ports)
            })
            .collect(),
    }
}

/// `show-aggr -L`: LACP state per port.
///
/// netadm runs no LACP yet, so nothing here is negotiated: every port can
/// aggregate, none is in sync, collecting or distributing with a partner,
/// and with LACP on the partner information is the default one (no LACPDU
/// was ever received). Nothing expires. The LACP issue replaces this with
/// the daemon's real per-port state.
pub fn aggr_lacp(v: &[AggrInfo]) -> Table {
    let yn = |b: bool| Cell::text(if b { "yes" } else { "no" });
    Table {
        columns: &["LINK", "PORT", "AGGREGATABLE", "SYNC", "COLL", "DIST", "DEFAULTED", "EXPIRED"],
        rows: v
            .iter()
            .flat_map(|a| {
                a.ports.iter().map(move |p| {
                    // The negotiated state, from the port's LACP actor
                    // bits (all "no" when LACP is off).
                    let bit = |b: u8| yn(p.lacp & b != 0);
                    Row::new()
                        .cell("LINK", Cell::text(&a.link))
                        .cell("PORT", Cell::text(&p.port))
                        .cell("AGGREGATABLE", bit(0x04))
                        .cell("SYNC", bit(0x08))
                        .cell("COLL", bit(0x10))
                        .cell("DIST", bit(0x20))
                        .cell("DEFAULTED", bit(0x40))
                        .cell("EXPIRED", bit(0x80))
                })
            })
            .collect(),
    }
}

/// `show-aggr -x`: the aggregation's own line, then one per port, as dladm
/// prints them. Port lines leave LINK blank in the table; parsable output
/// and JSON (which has only the port lines) name the aggregation.
pub fn aggr_extended(v: &[AggrInfo], links: &[LinkInfo], phys: &[PhysInfo]) -> Table {
    let phys_of = |port: &str| phys.iter().find(|p| p.link == port);
    let mut rows = Vec::new();
    for a in v {
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
        rows.push(
            Row::new()
                .cell("LINK", Cell::text(&a.link))
                .cell("PORT", Cell::text("--"))
                .cell("SPEED", Cell::num(speed))
                .cell("DUPLEX", Cell::text(duplex))
                .cell("STATE", Cell::text(state))
                .cell("ADDRESS", Cell::text_or_dash(&a.mac))
                .cell("PORTSTATE", Cell::text("--"))
                .not_json(),
        );
        for p in &a.ports {
            let ph = phys_of(&p.port);
            rows.push(
                Row::new()
                    .cell("LINK", Cell::text(&a.link).table_as(""))
                    .cell("PORT", Cell::text(&p.port))
                    .cell("SPEED", Cell::num(p.speed))
                    .cell("DUPLEX", Cell::text(ph.map_or("unknown", |ph| &ph.duplex)))
                    .cell("STATE", Cell::text(ph.map_or("unknown", |ph| &ph.state)))
                    // The contract carries no per-port MAC address yet.
                    .cell("ADDRESS", Cell::text_or_dash(""))
                    .cell("PORTSTATE", Cell::text(&p.state)),
            );
        }
    }
    Table { columns: &["LINK", "PORT", "SPEED", "DUPLEX", "STATE", "ADDRESS", "PORTSTATE"], rows }
}

/// `show-aggr -s`: traffic counters, the aggregation's line then one per
/// port (JSON: the port lines only).
///
/// All zero: there is no datapath counting frames through an aggregation
/// yet. The datapath issue adds the counters to the D-Bus contract and fills
/// these in.
pub fn aggr_stats(v: &[AggrInfo], stats: &[netadm_dbus::LinkStats]) -> Table {
    let counters = |row: Row, link: &str| {
        let s = stats.iter().find(|s| s.link == link);
        let n = |f: fn(&netadm_dbus::LinkStats) -> u64| Cell::num(s.map_or(0, f));
        row.cell("IPACKETS", n(|s| s.ipackets))
            .cell("RBYTES", n(|s| s.rbytes))
            .cell("OPACKETS", n(|s| s.opackets))
            .cell("OBYTES", n(|s| s.obytes))
    };
    let mut rows = Vec::new();
    for a in v {
        rows.push(
            counters(
                Row::new().cell("LINK", Cell::text(&a.link)).cell("PORT", Cell::text("--")),
                &a.link,
            )
            .not_json(),
        );
        for p in &a.ports {
            rows.push(counters(
                Row::new()
                    .cell("LINK", Cell::text(&a.link).table_as(""))
                    .cell("PORT", Cell::text(&p.port)),
                &p.port,
            ));
        }
    }
    Table { columns: &["LINK", "PORT", "IPACKETS", "RBYTES", "OPACKETS", "OBYTES"], rows }
}

/// `show-vnic`.
pub fn vnic(v: &[VnicInfo]) -> Table {
    Table {
        columns: &["LINK", "OVER", "SPEED", "MACADDRESS", "MACADDRTYPE", "VID"],
        rows: v
            .iter()
            .map(|n| {
                Row::new()
                    .cell("LINK", Cell::text(&n.link))
                    .cell("OVER", Cell::text(&n.over))
                    .cell("SPEED", Cell::num(n.speed))
                    .cell("MACADDRESS", Cell::text(&n.macaddress))
                    .cell("MACADDRTYPE", Cell::text(&n.macaddrtype))
                    .cell("VID", Cell::num(n.vid))
            })
            .collect(),
    }
}

/// `show-linkprop`. Values stay strings in JSON: properties are
/// heterogeneous and `--` means "none".
pub fn linkprop(v: &[PropInfo]) -> Table {
    Table {
        columns: &["LINK", "PROPERTY", "PERM", "VALUE", "DEFAULT", "POSSIBLE"],
        rows: v
            .iter()
            .map(|p| {
                Row::new()
                    .cell("LINK", Cell::text(&p.link))
                    .cell("PROPERTY", Cell::text(&p.property))
                    .cell("PERM", Cell::text(&p.perm))
                    .cell("VALUE", Cell::text_or_dash(&p.value))
                    .cell("DEFAULT", Cell::text_or_dash(&p.default))
                    .cell("POSSIBLE", Cell::text_or_dash(&p.possible))
            })
            .collect(),
    }
}

/// `show-ifprop`.
pub fn ifprop(v: &[IfPropInfo]) -> Table {
    Table {
        columns: &[
            "IFNAME",
            "PROPERTY",
            "PROTO",
            "PERM",
            "CURRENT",
            "PERSISTENT",
            "DEFAULT",
            "POSSIBLE",
        ],
        rows: v
            .iter()
            .map(|p| {
                Row::new()
                    .cell("IFNAME", Cell::text(&p.ifname))
                    .cell("PROPERTY", Cell::text(&p.property))
                    .cell("PROTO", Cell::text(&p.proto))
                    .cells(prop_cells([
                        &p.perm,
                        &p.current,
                        &p.persistent,
                        &p.default,
                        &p.possible,
                    ]))
            })
            .collect(),
    }
}

/// The PERM CURRENT PERSISTENT DEFAULT POSSIBLE cells of a property row
/// (`show-ifprop`, `show-addrprop`, `show-prop`).
fn prop_cells(v: [&str; 5]) -> [(&'static str, Cell); 5] {
    [
        ("PERM", Cell::text(v[0])),
        ("CURRENT", Cell::text_or_dash(v[1])),
        ("PERSISTENT", Cell::text_or_dash(v[2])),
        ("DEFAULT", Cell::text_or_dash(v[3])),
        ("POSSIBLE", Cell::text_or_dash(v[4])),
    ]
}

/// `show-addrprop`.
pub fn addrprop(v: &[AddrPropInfo]) -> Table {
    Table {
        columns: &["ADDROBJ", "PROPERTY", "PERM", "CURRENT", "PERSISTENT", "DEFAULT", "POSSIBLE"],
        rows: v
            .iter()
            .map(|p| {
                Row::new()
                    .cell("ADDROBJ", Cell::text(&p.addrobj))
                    .cell("PROPERTY", Cell::text(&p.property))
                    .cells(prop_cells([
                        &p.perm,
                        &p.current,
                        &p.persistent,
                        &p.default,
                        &p.possible,
                    ]))
            })
            .collect(),
    }
}

/// `show-prop`.
pub fn protoprop(v: &[ProtoPropInfo]) -> Table {
    Table {
        columns: &["PROTO", "PROPERTY", "PERM", "CURRENT", "PERSISTENT", "DEFAULT", "POSSIBLE"],
        rows: v
            .iter()
            .map(|p| {
                Row::new()
                    .cell("PROTO", Cell::text(&p.proto))
                    .cell("PROPERTY", Cell::text(&p.property))
                    .cells(prop_cells([
                        &p.perm,
                        &p.current,
                        &p.persistent,
                        &p.default,
                        &p.possible,
                    ]))
            })
            .collect(),
    }
}

/// `show-if`.
pub fn iface(v: &[IfInfo]) -> Table {
    Table {
        columns: &["IFNAME", "CLASS", "STATE", "CURRENT", "PERSISTENT"],
        rows: v
            .iter()
            .map(|i| {
                Row::new()
                    .cell("IFNAME", Cell::text(&i.ifname))
                    .cell("CLASS", Cell::text(&i.class))
                    .cell("STATE", Cell::text(&i.state))
                    .cell("CURRENT", Cell::text_or_dash(&i.current))
                    .cell("PERSISTENT", Cell::text_or_dash(&i.persistent))
                    .extra("kernel_device", i.kernel_device.as_str())
                    .extra("drift", i.drift.as_str())
            })
            .collect(),
    }
}

/// `show-addr`.
pub fn addr(v: &[AddrInfo]) -> Table {
    Table {
        columns: &["ADDROBJ", "TYPE", "STATE", "CURRENT", "PERSISTENT", "ADDR"],
        rows: v
            .iter()
            .map(|a| {
                Row::new()
                    .cell("ADDROBJ", Cell::text(&a.addrobj))
                    .cell("TYPE", Cell::text(&a.r#type))
                    .cell("STATE", Cell::text(&a.state))
                    .cell("CURRENT", Cell::text(&a.current))
                    .cell("PERSISTENT", Cell::text_or_dash(&a.persistent))
                    .cell("ADDR", Cell::text(&a.addr))
            })
            .collect(),
    }
}

/// `HH:MM:SS.mmm` (UTC) of a Unix time in milliseconds.
pub fn clock(time_ms: u64) -> String {
    let day_ms = time_ms % 86_400_000;
    let (h, m) = (day_ms / 3_600_000, day_ms / 60_000 % 60);
    let (s, ms) = (day_ms / 1000 % 60, day_ms % 1000);
    format!("{h:02}:{m:02}:{s:02}.{ms:03}")
}

/// `show-history`. TOTAL is milliseconds: one decimal with the unit in the
/// table, three decimals (exact µs) in parsable output, a number in JSON
/// (plus `total_us` and `time_ms`).
pub fn history(v: &[HistoryEntry]) -> Table {
    Table {
        columns: &["SEQ", "TIME", "COMMAND", "RESULT", "TOTAL", "ERROR"],
        rows: v
            .iter()
            .map(|h| {
                let total_ms = h.total_us as f64 / 1000.0;
                Row::new()
                    .cell("SEQ", Cell::num(h.seq))
                    .cell("TIME", Cell::text(clock(h.time_ms)))
                    .cell("COMMAND", Cell::text(&h.command))
                    .cell("RESULT", Cell::text(if h.ok { "ok" } else { "failed" }))
                    .cell(
                        "TOTAL",
                        Cell::text(format!("{total_ms:.3}"))
                            .table_as(format!("{total_ms:.1} ms"))
                            .json_as(total_ms),
                    )
                    .cell("ERROR", Cell::text_or_dash(&h.error))
                    .extra("time_ms", h.time_ms)
                    .extra("total_us", h.total_us)
                    .extra("ok", h.ok)
            })
            .collect(),
    }
}

/// `show-link -s` / `show-phys -s`: traffic counters.
pub fn stats(v: &[netadm_dbus::LinkStats]) -> Table {
    Table {
        columns: &["LINK", "IPACKETS", "RBYTES", "IDROPS", "OPACKETS", "OBYTES", "ODROPS"],
        rows: v
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
            })
            .collect(),
    }
}

/// `show-traffic`.
pub fn traffic(v: &[netadm_dbus::TrafficInfo]) -> Table {
    let us = |x: f64| Cell::text(format!("{x:.1}")).json_as(x);
    Table {
        columns: &[
            "LINK",
            "STATE",
            "RATE",
            "SIZE",
            "FLOWS",
            "SENT",
            "RECEIVED",
            "LOST",
            "REORDERED",
            "DUPLICATED",
            "AVG_US",
            "P99_US",
            "MAX_US",
            "PAUSE_MAX_US",
        ],
        rows: v
            .iter()
            .map(|t| {
                Row::new()
                    .cell("LINK", Cell::text(&t.link))
                    .cell("STATE", Cell::text(if t.running { "running" } else { "stopped" }))
                    .cell("RATE", Cell::num(t.rate))
                    .cell("SIZE", Cell::num(t.size))
                    .cell("FLOWS", Cell::num(t.flows))
                    .cell("SENT", Cell::num(t.sent))
                    .cell("RECEIVED", Cell::num(t.received))
                    .cell("LOST", Cell::num(t.lost))
                    .cell("REORDERED", Cell::num(t.reordered))
                    .cell("DUPLICATED", Cell::num(t.duplicated))
                    .cell("AVG_US", us(t.latency_avg_us))
                    .cell("P99_US", us(t.latency_p99_us))
                    .cell("MAX_US", us(t.latency_max_us))
                    .cell("PAUSE_MAX_US", us(t.pause_max_us))
                    .extra("paused_us", t.paused_us)
            })
            .collect(),
    }
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

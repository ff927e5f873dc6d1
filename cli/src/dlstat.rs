//! `dlstat`: traffic counters per link, as illumos dlstat(8) prints them
//! (`dlstat [show-link|show-phys|show-aggr|show-vnic] [-r|-t] [-i
//! INTERVAL] [LINK]`). Pure: what to ask for and how one answer (or two,
//! an interval apart) becomes a table; the bus calls are in `main.rs`.

use netadm_dbus::{AggrInfo, FlowStats, LinkStats};

use crate::error::CliError;
use crate::render::{Cell, Row, Table};

/// What dlstat shows: its subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    /// `show-link` (and `dlstat` alone): every link but etherstubs.
    Link,
    /// `show-phys`: physical links.
    Phys,
    /// `show-aggr`: each aggregation's ports.
    Aggr,
    /// `show-vnic`: VNICs.
    Vnic,
    /// flowstat's: flows.
    Flow,
}

impl Object {
    /// The subcommand and the link from dlstat's operands: `[SUBCOMMAND]
    /// [LINK]`, where a first operand that is no subcommand is the link.
    pub fn parse(
        first: Option<String>,
        second: Option<String>,
    ) -> Result<(Self, Option<String>), CliError> {
        let of = |w: &str| match w {
            "show-link" => Some(Self::Link),
            "show-phys" => Some(Self::Phys),
            "show-aggr" => Some(Self::Aggr),
            "show-vnic" => Some(Self::Vnic),
            _ => None,
        };
        match (first, second) {
            (None, _) => Ok((Self::Link, None)),
            (Some(f), second) => match of(&f) {
                Some(o) => Ok((o, second)),
                None if second.is_none() => Ok((Self::Link, Some(f))),
                None => Err(CliError::invalid_argument(format!(
                    "dlstat: unknown subcommand {f:?} (show-link, show-phys, show-aggr or show-vnic)"
                ))),
            },
        }
    }

    /// What a link of this kind is called in "... does not exist".
    pub fn what(self) -> &'static str {
        match self {
            Self::Link => "link",
            Self::Phys => "physical link",
            Self::Aggr => "aggregation",
            Self::Vnic => "VNIC",
            Self::Flow => "flow",
        }
    }
}

/// The side `-r` (`rx`) or `-t` (`tx`) asks for.
pub fn side(rx: bool, tx: bool) -> Side {
    match (rx, tx) {
        (true, _) => Side::Rx,
        (_, true) => Side::Tx,
        _ => Side::Both,
    }
}

/// Flows' counters as a link's, by flow name (its drops: what its limits
/// policed).
pub fn flow_counts(flows: &[FlowStats]) -> Vec<LinkStats> {
    flows
        .iter()
        .map(|f| LinkStats {
            link: f.flow.clone(),
            ipackets: f.ipackets,
            rbytes: f.rbytes,
            opackets: f.opackets,
            obytes: f.obytes,
            idrops: f.idrops,
            odrops: f.odrops,
        })
        .collect()
}

/// Which side dlstat shows: both (its default), receive (`-r`) or
/// transmit (`-t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// IPKTS RBYTES OPKTS OBYTES.
    Both,
    /// `-r`: IPKTS RBYTES IDROPS.
    Rx,
    /// `-t`: OPKTS OBYTES ODROPS.
    Tx,
}

/// The columns of `object`'s table on `side`, dlstat's names.
pub fn columns(object: Object, side: Side) -> &'static [&'static str] {
    if object == Object::Flow {
        return match side {
            Side::Both => &["FLOW", "IPKTS", "RBYTES", "OPKTS", "OBYTES"],
            Side::Rx => &["FLOW", "IPKTS", "RBYTES", "IDROPS"],
            Side::Tx => &["FLOW", "OPKTS", "OBYTES", "ODROPS"],
        };
    }
    match (object == Object::Aggr, side) {
        (false, Side::Both) => &["LINK", "IPKTS", "RBYTES", "OPKTS", "OBYTES"],
        (false, Side::Rx) => &["LINK", "IPKTS", "RBYTES", "IDROPS"],
        (false, Side::Tx) => &["LINK", "OPKTS", "OBYTES", "ODROPS"],
        (true, Side::Both) => &["LINK", "PORT", "IPKTS", "RBYTES", "OPKTS", "OBYTES"],
        (true, Side::Rx) => &["LINK", "PORT", "IPKTS", "RBYTES", "IDROPS"],
        (true, Side::Tx) => &["LINK", "PORT", "OPKTS", "OBYTES", "ODROPS"],
    }
}

/// A link's counters since `before` (all of them without it). A counter
/// lower than before (its link made anew) counts from zero.
fn since(now: &LinkStats, before: Option<&LinkStats>) -> LinkStats {
    let Some(b) = before else { return now.clone() };
    let d = |n: u64, b: u64| if n >= b { n - b } else { n };
    LinkStats {
        link: now.link.clone(),
        ipackets: d(now.ipackets, b.ipackets),
        rbytes: d(now.rbytes, b.rbytes),
        opackets: d(now.opackets, b.opackets),
        obytes: d(now.obytes, b.obytes),
        idrops: d(now.idrops, b.idrops),
        odrops: d(now.odrops, b.odrops),
    }
}

/// Every counter a row can show; `columns` picks among them.
fn counters(row: Row, s: &LinkStats) -> Row {
    row.cell("IPKTS", Cell::num(s.ipackets))
        .cell("RBYTES", Cell::num(s.rbytes))
        .cell("IDROPS", Cell::num(s.idrops))
        .cell("OPKTS", Cell::num(s.opackets))
        .cell("OBYTES", Cell::num(s.obytes))
        .cell("ODROPS", Cell::num(s.odrops))
}

/// The table of the links in `links` (in their order), from the counters
/// `now` less those of `before` (the previous interval's, with `-i`).
/// `aggrs` gives `show-aggr`'s rows: each port of each aggregation.
pub fn table(
    object: Object,
    side: Side,
    links: &[String],
    aggrs: &[AggrInfo],
    now: &[LinkStats],
    before: Option<&[LinkStats]>,
) -> Table {
    let find = |v: &[LinkStats], l: &str| v.iter().find(|s| s.link == l).cloned();
    let of = |l: &str| {
        let n =
            find(now, l).unwrap_or_else(|| LinkStats { link: l.to_owned(), ..Default::default() });
        since(&n, before.and_then(|b| find(b, l)).as_ref())
    };
    let rows = match object {
        Object::Aggr => aggrs
            .iter()
            .flat_map(|a| {
                a.ports.iter().map(|p| {
                    let row = Row::new()
                        .cell("LINK", Cell::text(&a.link))
                        .cell("PORT", Cell::text(&p.port));
                    counters(row, &of(&p.port))
                })
            })
            .collect(),
        _ => {
            let key = if object == Object::Flow { "FLOW" } else { "LINK" };
            links.iter().map(|l| counters(Row::new().cell(key, Cell::text(l)), &of(l))).collect()
        }
    };
    Table { columns: columns(object, side), rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{Format, render};

    fn stats(link: &str, n: u64) -> LinkStats {
        LinkStats {
            link: link.into(),
            ipackets: n,
            rbytes: n * 100,
            opackets: 2 * n,
            obytes: n * 200,
            idrops: 0,
            odrops: 1,
        }
    }

    #[test]
    fn operands_are_a_subcommand_then_a_link_or_a_link_alone() {
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(Object::parse(None, None).unwrap(), (Object::Link, None));
        assert_eq!(Object::parse(s("net0"), None).unwrap(), (Object::Link, s("net0")));
        assert_eq!(Object::parse(s("show-aggr"), s("aggr0")).unwrap(), (Object::Aggr, s("aggr0")));
        assert_eq!(Object::parse(s("show-vnic"), None).unwrap(), (Object::Vnic, None));
        let e = Object::parse(s("show-flow"), s("f0")).unwrap_err();
        assert!(e.to_string().contains("show-flow"), "{e}");
    }

    #[test]
    fn an_interval_shows_what_each_link_counted_in_it() {
        let before = [stats("net0", 10), stats("v0", 5)];
        let now = [stats("net0", 15), stats("v0", 2)];
        let links = ["net0".to_owned(), "v0".to_owned(), "v9".to_owned()];
        let t = table(Object::Link, Side::Both, &links, &[], &now, Some(&before));
        let fmt = Format { parsable: true, parsable_flag: "-p", ..Format::default() };
        let fmt = Format { fields: Some("link,ipkts,rbytes,opkts,obytes".into()), ..fmt };
        // net0: 5 frames more; v0 made anew (its counters went back):
        // from zero; v9: no counters yet.
        assert_eq!(render(&t, &fmt).unwrap(), "net0:5:500:10:1000\nv0:2:200:4:400\nv9:0:0:0:0\n");
        let rx = table(Object::Link, Side::Rx, &links[..1], &[], &now, None);
        let fmt = Format { fields: Some("all".into()), ..fmt };
        assert_eq!(render(&rx, &fmt).unwrap(), "net0:15:1500:0\n");
    }
}

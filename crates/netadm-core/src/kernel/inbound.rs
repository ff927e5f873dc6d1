//! What a kernel flow receives, counted and limited: nftables rules
//! netadm owns on the ingress of the device its link's frames leave by
//! (where its shaper is, in netadmd's namespace), which every frame for
//! the link crosses before the kernel hands it to a macvlan in a zone. No
//! tc action that counts or polices is in this kernel, and u32 counts
//! hits only when built to.
//!
//! In the table link protection uses (`netdev netadm`): per device, a
//! base chain `flin_HASH` on its ingress, with rules for each flow and IP
//! family the flow can match, in the order flows match — the link's MAC
//! as destination, the flow's attributes seen from the far side (its
//! remote address and port are the source). A flow with a `maxbw` (full
//! duplex, as flowadm's) first has a rule that drops what comes over it
//! (`limit rate over`), counting it into `flow_HASH_drops`; then one that
//! counts what passes into the flow's named counter `flow_HASH` and
//! accepts, so a frame counts once. nftables counts a frame's bytes from
//! its IP header there: the limit lets through the Ethernet header's 14
//! bytes a frame more than `maxbw` (0.9 % at 1,514-byte frames); and its
//! bucket holds a second of the rate (see [`limit`]). A change
//! makes the chain anew and keeps the counters, in one transaction; a
//! flow that goes takes its counters.

use std::collections::{BTreeMap, BTreeSet};

use netadm_datapath::flow::FlowCounts;
use netadm_model::{FlowAttrs, FlowName};

use super::devices::fnv_str;
use super::guard::{TABLE, head, named, nft, table, verify};
use super::shaper::{FlowShare, families};
use crate::CoreError;

/// The chain on device `dev`'s ingress.
fn chain(dev: &str) -> String {
    format!("flin_{:08x}", fnv_str(dev))
}

/// Flow `f`'s counter.
pub(crate) fn counter(f: &FlowName) -> String {
    format!("flow_{:08x}", fnv_str(f.as_str()))
}

/// The counter of what flow `f`'s `maxbw` dropped.
fn drops(f: &FlowName) -> String {
    counter(f) + "_drops"
}

/// The policing of what a flow of `maxbw` b/s receives: over the rate,
/// dropped into counter `drops`. nftables sizes a byte limit's bucket at
/// one unit of the rate plus its burst (net/netfilter/nft_limit.c), and
/// its smallest unit is the second: the bucket holds a second of the
/// rate (at least 150,000 bytes at dladm's lowest maxbw, so what GRO
/// hands the ingress hook always fits). A flow idle for a second may so
/// receive a second's worth at once; over time, its maxbw.
fn limit(maxbw: u64, drops: &str) -> String {
    format!("limit rate over {} bytes/second counter name \"{drops}\" drop", maxbw / 8)
}

/// The rules that count what flow `a` receives at `mac`, one for each IP
/// family it can match; each ends with `tail`.
fn rules(mac: [u8; 6], a: &FlowAttrs, tail: &str) -> Vec<String> {
    let (v4, v6) = families(a);
    let m = mac.map(|b| format!("{b:02x}")).join(":");
    let mut out = vec![];
    for (ok, ip) in [(v4, "ip"), (v6, "ip6")] {
        if !ok {
            continue;
        }
        let mut r = format!("ether daddr {m} meta protocol {ip}");
        if let Some(p) = a.remote_ip {
            r += &format!(" {ip} saddr {p}");
        }
        if let Some(p) = a.local_ip {
            r += &format!(" {ip} daddr {p}");
        }
        if let Some(d) = a.dsfield {
            // The DS field: IPv4's second byte, IPv6's 8 bits from bit 4.
            let at = if ip == "ip" { 8 } else { 4 };
            r += &format!(" @nh,{at},8 & 0x{:02x} == 0x{:02x}", d.mask, d.value);
        }
        if let Some(t) = a.transport {
            r += &format!(" meta l4proto {}", t.protocol());
        }
        if let Some(p) = a.remote_port {
            r += &format!(" th sport {p}");
        }
        if let Some(p) = a.local_port {
            r += &format!(" th dport {p}");
        }
        out.push(format!("{r} {tail}"));
    }
    out
}

/// Brings the counting rules on device `dev`'s ingress to `flows` (each
/// with the MAC its link receives at), and reads them back. None: the
/// chain goes.
pub(crate) fn count(dev: &str, flows: &[([u8; 6], &FlowShare)]) -> Result<(), CoreError> {
    let c = chain(dev);
    let objs = table()?;
    let there = !named(&objs, "chain", &c).is_empty();
    if flows.is_empty() {
        if there {
            nft(&["-f", "-"], Some(&format!("delete chain {TABLE} {c}\n")))?;
        }
        return Ok(());
    }
    // Made anew: the device may have been made again since, and a base
    // chain cannot move.
    let mut f = head();
    if there {
        f += &format!("delete chain {TABLE} {c}\n");
    }
    f += &format!(
        "add chain {TABLE} {c} {{ type filter hook ingress device \"{dev}\" priority 0; policy accept; comment \"netadm flows received on {dev}\"; }}\n"
    );
    let mut n = 0;
    for (mac, flow) in flows {
        let name = counter(&flow.name);
        f += &format!("add counter {TABLE} {name}\n");
        let mut tails = vec![];
        if flow.maxbw > 0 {
            let d = drops(&flow.name);
            f += &format!("add counter {TABLE} {d}\n");
            tails.push(limit(flow.maxbw, &d));
        }
        tails.push(format!("counter name \"{name}\" accept"));
        for tail in &tails {
            for r in rules(*mac, &flow.attrs, tail) {
                f += &format!("add rule {TABLE} {c} {r}\n");
                n += 1;
            }
        }
    }
    nft(&["-f", "-"], Some(&f))?;
    verify(&table()?, &[(c, Some(dev.to_owned()), n)])
}

/// Deletes the counters of flows not in `keep`.
pub(crate) fn forget(keep: &BTreeSet<&FlowName>) -> Result<(), CoreError> {
    let objs = table()?;
    let wanted: BTreeSet<String> = keep.iter().flat_map(|f| [counter(f), drops(f)]).collect();
    let file: String = named(&objs, "counter", "flow")
        .into_iter()
        .filter(|n| !wanted.contains(*n))
        .map(|n| format!("delete counter {TABLE} {n}\n"))
        .collect();
    if !file.is_empty() {
        nft(&["-f", "-"], Some(&file))?;
    }
    Ok(())
}

/// The Ethernet header, which a frame has lost by the time ingress rules
/// count its bytes (the kernel counts from the network header there).
const ETH_HLEN: u64 = 14;

/// What each flow of `flows` received, by flow: the frames and bytes (of
/// whole frames, as a class counts what it sends) its counter let through,
/// and the frames its `maxbw` dropped (the receive side of its counts).
pub(crate) fn counted<'a>(
    flows: impl Iterator<Item = &'a FlowName>,
) -> BTreeMap<FlowName, FlowCounts> {
    let Ok(objs) = table() else { return BTreeMap::new() };
    let read = |name: &str| {
        let c = &objs.iter().find(|o| o["counter"]["name"].as_str() == Some(name))?["counter"];
        Some((c["packets"].as_u64()?, c["bytes"].as_u64()?))
    };
    flows
        .filter_map(|f| {
            let (ipackets, bytes) = read(&counter(f))?;
            let c = FlowCounts {
                ipackets,
                rbytes: bytes + ETH_HLEN * ipackets,
                idrops: read(&drops(f)).map_or(0, |(p, _)| p),
                ..FlowCounts::default()
            };
            Some((f.clone(), c))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_is_counted_from_the_far_side_once_for_each_family() {
        let a = FlowAttrs::parse(
            &[("transport", "udp"), ("remote_port", "5001"), ("local_ip", "192.0.2.1")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap();
        let r = rules([2, 0, 0, 0, 0, 1], &a, "counter");
        assert_eq!(
            r,
            [
                "ether daddr 02:00:00:00:00:01 meta protocol ip ip daddr 192.0.2.1 meta l4proto 17 th sport 5001 counter"
            ]
        );
        let a = FlowAttrs::parse(&[("dsfield".into(), "0xb8:0xfc".into())].into()).unwrap();
        let r = rules([2, 0, 0, 0, 0, 1], &a, "x");
        assert_eq!(r.len(), 2);
        assert!(
            r[0].contains("@nh,8,8 & 0xfc == 0xb8") && r[1].contains("@nh,4,8 & 0xfc == 0xb8"),
            "{r:?}"
        );
    }
}

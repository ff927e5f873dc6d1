//! `netadm __complete KIND`: the names netadmd has of one kind, one a
//! line, for the shell completions (`generate.rs` writes the scripts that call
//! it). A completion must never get in the way: when netadmd cannot be
//! asked within [`DEADLINE`] (no bus, no daemon, a refusal) it prints
//! nothing and succeeds.

use std::collections::BTreeSet;
use std::time::Duration;

use netadm_dbus::NetadmProxy;

/// How long a completion may wait for netadmd.
const DEADLINE: Duration = Duration::from_secs(2);

/// The kinds of name the completions ask for, and what each is.
pub const KINDS: &[(&str, &str)] = &[
    ("links", "every datalink"),
    ("phys", "physical links"),
    ("aggrs", "aggregations"),
    ("vnics", "VNICs"),
    ("vlans", "VLAN links"),
    ("etherstubs", "etherstubs"),
    ("ifs", "IP interfaces"),
    ("addrobjs", "address objects"),
    ("protos", "protocols with properties"),
    ("props", "link property names"),
];

/// The names of `kind`, one a line (with a final newline), or nothing.
pub async fn names(bus: &str, kind: &str) -> String {
    if !KINDS.iter().any(|(k, _)| *k == kind) {
        return String::new();
    }
    if kind == "protos" {
        return "ipv4\nipv6\ntcp\n".to_owned();
    }
    let ask = async {
        let (_conn, p) = crate::proxy(bus).await.ok()?;
        list(&p, kind).await.ok()
    };
    let names = tokio::time::timeout(DEADLINE, ask).await.ok().flatten().unwrap_or_default();
    names.into_iter().map(|n| n + "\n").collect()
}

/// Asks netadmd for the names of `kind` (none for a kind it does not
/// know), sorted and once each.
async fn list(p: &NetadmProxy<'_>, kind: &str) -> zbus::Result<BTreeSet<String>> {
    Ok(match kind {
        // ShowLink of every link leaves etherstubs out (ShowLinkNamed
        // has them): they are links too.
        "links" => {
            let links = p.show_link().await?.into_iter().map(|l| l.link);
            links.chain(p.show_etherstub_ex().await?.into_iter().map(|e| e.link)).collect()
        }
        "phys" => p.show_phys().await?.into_iter().map(|l| l.link).collect(),
        "aggrs" => p.show_aggr().await?.into_iter().map(|l| l.link).collect(),
        "vnics" => p.show_vnic().await?.into_iter().map(|l| l.link).collect(),
        "vlans" => p.show_vlan().await?.into_iter().map(|l| l.link).collect(),
        "etherstubs" => p.show_etherstub_ex().await?.into_iter().map(|l| l.link).collect(),
        "ifs" => p.show_if_ex().await?.into_iter().map(|i| i.ifname).collect(),
        // SLAAC addresses are listed as IF/?: no object to name.
        "addrobjs" => p
            .show_addr_ex()
            .await?
            .into_iter()
            .map(|a| a.addrobj)
            .filter(|a| !a.ends_with("/?"))
            .collect(),
        "props" => p.show_link_prop("", &[]).await?.into_iter().map(|r| r.property).collect(),
        _ => BTreeSet::new(),
    })
}

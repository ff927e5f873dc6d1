//! `netadm`: the dladm/ipadm-style command line of netadm.
//!
//! Parses a verb and its options, calls `netadmd` over D-Bus
//! (`org.netadm.Netadm1`) and prints a table, `-p -o` parsable lines or,
//! with `--json`, JSON. Errors go to stderr as `netadm: <message>` (or
//! `{"error": {"kind", "message"}}` under `--json`) with exit status 1;
//! usage errors exit 2.

mod demo;
mod error;
mod etherstub;
mod illumos;
mod opresult;
mod progress;
mod render;
mod show;
mod vlan;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use netadm_dbus::{NetadmProxy, OpResult};
use zbus::Connection;
use zbus::proxy::CacheProperties;

use crate::error::CliError;
use crate::render::{Format, Table};

/// netadm: administer datalinks and IP interfaces through netadmd.
#[derive(Debug, Parser)]
#[command(name = "netadm", version, about)]
struct Cli {
    /// Bus to reach netadmd on: `system`, `session` or a D-Bus address
    /// [default: $NETADM_BUS, else system].
    #[arg(long, global = true, value_name = "BUS")]
    bus: Option<String>,
    /// Print JSON instead of tables (errors too, on stderr).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    verb: Verb,
}

/// `-p` and `-o` of the show verbs.
#[derive(Debug, Args)]
struct ShowOpts {
    /// Parsable output: fields separated by `:` (requires -o).
    #[arg(short = 'p')]
    parsable: bool,
    /// Fields to print, comma-separated (case-insensitive), or `all`.
    #[arg(short = 'o', value_name = "FIELD,...")]
    fields: Option<String>,
}

impl ShowOpts {
    fn format(&self, json: bool) -> Format {
        Format { json, parsable: self.parsable, parsable_flag: "-p", fields: self.fields.clone() }
    }
}

/// Aggregation settings shared by create-aggr and modify-aggr.
#[derive(Debug, Args)]
struct AggrOpts {
    /// Temporary: do not persist the change.
    #[arg(short = 't')]
    temporary: bool,
    /// Load-balancing policy: L2, L3, L4 or a combination such as L2,L3.
    #[arg(short = 'P', value_name = "POLICY")]
    policy: Option<String>,
    /// LACP mode: off, active or passive.
    #[arg(short = 'L', value_name = "MODE")]
    lacp_mode: Option<String>,
    /// LACP timer: short or long.
    #[arg(short = 'T', value_name = "TIMER")]
    lacp_timer: Option<String>,
    /// Fixed unicast MAC address (default: the first port's).
    #[arg(short = 'u', value_name = "MAC")]
    mac: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Show physical links.
    ShowPhys {
        /// Show traffic counters.
        #[arg(short = 's')]
        stats: bool,
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this link.
        link: Option<String>,
    },
    /// Show datalinks.
    ShowLink {
        /// Show traffic counters.
        #[arg(short = 's')]
        stats: bool,
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this link.
        link: Option<String>,
    },
    /// Rename a datalink.
    RenameLink {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Current name.
        old: String,
        /// New name.
        new: String,
    },
    /// Create a link aggregation.
    CreateAggr {
        #[command(flatten)]
        opts: AggrOpts,
        /// A port (repeat for each).
        #[arg(short = 'l', value_name = "PORT", required = true)]
        ports: Vec<String>,
        /// Aggregation name.
        aggr: String,
    },
    /// Change an aggregation's policy, LACP settings or MAC address.
    ModifyAggr {
        #[command(flatten)]
        opts: AggrOpts,
        /// Aggregation name.
        aggr: String,
    },
    /// Add ports to an aggregation.
    AddAggr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// A port (repeat for each).
        #[arg(short = 'l', value_name = "PORT", required = true)]
        ports: Vec<String>,
        /// Aggregation name.
        aggr: String,
    },
    /// Remove ports from an aggregation.
    RemoveAggr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// A port (repeat for each).
        #[arg(short = 'l', value_name = "PORT", required = true)]
        ports: Vec<String>,
        /// Aggregation name.
        aggr: String,
    },
    /// Delete an aggregation.
    DeleteAggr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Aggregation name.
        aggr: String,
    },
    /// Show aggregations.
    ShowAggr {
        /// LACP state of each port.
        #[arg(short = 'L', group = "mode")]
        lacp: bool,
        /// Extended: the aggregation and each port's speed, state and address.
        #[arg(short = 'x', group = "mode")]
        extended: bool,
        /// Traffic statistics per port.
        #[arg(short = 's', group = "mode")]
        stats: bool,
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this aggregation.
        aggr: Option<String>,
    },
    /// Create a VNIC.
    CreateVnic {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// The link to create it over.
        #[arg(short = 'l', value_name = "LINK")]
        link: String,
        /// MAC address: auto, factory, random or an address.
        #[arg(short = 'm', value_name = "MAC", default_value = "auto")]
        mac: String,
        /// VLAN id (0 for none).
        #[arg(short = 'v', value_name = "VID", default_value_t = 0)]
        vid: u16,
        /// Link properties to set, PROP=VAL,... (may repeat).
        #[arg(short = 'p', value_name = "PROP=VAL,...")]
        props: Vec<String>,
        /// VNIC name.
        vnic: String,
    },
    /// Delete a VNIC.
    DeleteVnic {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// VNIC name.
        vnic: String,
    },
    /// Show VNICs.
    ShowVnic {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this VNIC.
        vnic: Option<String>,
    },
    /// Create a VLAN link: frames it sends leave tagged with its VID.
    CreateVlan {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// The link to create it over (a physical link or an aggregation).
        #[arg(short = 'l', value_name = "LINK")]
        link: String,
        /// VLAN id, 1-4094.
        #[arg(short = 'v', value_name = "VID")]
        vid: u16,
        /// VLAN link name.
        vlan: String,
    },
    /// Delete a VLAN link.
    DeleteVlan {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// VLAN link name.
        vlan: String,
    },
    /// Show VLAN links.
    ShowVlan {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this VLAN link.
        vlan: Option<String>,
    },
    /// Create an etherstub: a virtual switch with no port, for VNICs
    /// that reach only each other.
    CreateEtherstub {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Etherstub name.
        etherstub: String,
    },
    /// Delete an etherstub (no VNIC may be over it).
    DeleteEtherstub {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Etherstub name.
        etherstub: String,
    },
    /// Show etherstubs.
    ShowEtherstub {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this etherstub.
        etherstub: Option<String>,
    },
    /// Set link properties.
    SetLinkprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP=VAL,... (may repeat).
        #[arg(short = 'p', value_name = "PROP=VAL,...", required = true)]
        props: Vec<String>,
        /// The link.
        link: String,
    },
    /// Reset link properties to their defaults (every settable one without -p).
    ResetLinkprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP,... (may repeat).
        #[arg(short = 'p', value_name = "PROP,...")]
        props: Vec<String>,
        /// The link.
        link: String,
    },
    /// Show link properties.
    ShowLinkprop {
        /// Parsable output: fields separated by `:` (requires -o).
        #[arg(short = 'c')]
        parsable: bool,
        /// Fields to print, comma-separated (case-insensitive), or `all`.
        #[arg(short = 'o', value_name = "FIELD,...")]
        fields: Option<String>,
        /// Only these properties, PROP,... (may repeat).
        #[arg(short = 'p', value_name = "PROP,...")]
        props: Vec<String>,
        /// Only this link.
        link: Option<String>,
    },
    /// Create an IP interface over a link.
    CreateIf {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Interface name (the link's).
        ifname: String,
    },
    /// Delete an IP interface and its addresses.
    DeleteIf {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Interface name.
        ifname: String,
    },
    /// Put an IP interface's kernel device back as configured (after
    /// someone changed or deleted it: show-if says `drifted` or `missing`).
    RefreshIf {
        /// Interface name.
        ifname: String,
    },
    /// Show IP interfaces.
    ShowIf {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this interface.
        ifname: Option<String>,
    },
    /// Create an address object.
    CreateAddr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Address type: static.
        #[arg(short = 'T', value_name = "TYPE")]
        kind: String,
        /// ADDRESS/PREFIX.
        #[arg(short = 'a', value_name = "ADDR/PREFIX")]
        addr: String,
        /// Address object, IF/TAG.
        addrobj: String,
    },
    /// Delete an address object.
    DeleteAddr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Address object, IF/TAG.
        addrobj: String,
    },
    /// Show address objects.
    ShowAddr {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this address object.
        addrobj: Option<String>,
    },
    /// Show recent mutating commands and their timings.
    ShowHistory {
        #[command(flatten)]
        show: ShowOpts,
    },
    /// Select the ring lifecycle strategy: batched, sequential, legacy or
    /// legacy@HZ (for comparisons).
    SetStrategy {
        /// The strategy.
        strategy: String,
    },
    /// Start a traffic generator on a link: sequenced, timestamped frames
    /// whose loss, reordering, duplication and latency show-traffic reports.
    StartTraffic {
        /// The link to send from.
        #[arg(short = 'l', value_name = "LINK")]
        link: String,
        /// Frames per second (0: as fast as the link takes them).
        #[arg(long, default_value_t = 100_000)]
        rate: u64,
        /// Frame size in bytes.
        #[arg(long, default_value_t = 64)]
        size: u32,
        /// Number of flows.
        #[arg(long, default_value_t = 1)]
        flows: u32,
    },
    /// Cut a port's wire (both ends of a cable lose carrier): its
    /// aggregation moves its flows to the other members.
    CutCable {
        /// The port.
        port: String,
    },
    /// Plug a port's wire back in.
    PlugCable {
        /// The port.
        port: String,
    },
    /// Stop the traffic generator on a link (its counters stay).
    StopTraffic {
        /// The link.
        #[arg(short = 'l', value_name = "LINK")]
        link: String,
    },
    /// Show traffic generators and what their frames went through.
    ShowTraffic {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this link.
        link: Option<String>,
    },
    /// Start a private dbus-daemon and netadmd and run the seed's sequence
    /// under each ring lifecycle strategy, side by side.
    Demo(demo::DemoArgs),
}

/// A connection to netadmd and how to print.
struct Ctx {
    conn: Connection,
    proxy: NetadmProxy<'static>,
    /// The bus as the user named it, for messages.
    bus: String,
    json: bool,
    /// Whether mutating calls may show a progress bar.
    progress: bool,
    /// The verb, for the progress bar until the daemon names the operation.
    verb: String,
}

impl Ctx {
    async fn connect(bus: String, json: bool, verb: String) -> Result<Self, CliError> {
        let builder = match bus.as_str() {
            "system" => zbus::connection::Builder::system(),
            "session" => zbus::connection::Builder::session(),
            addr => zbus::connection::Builder::address(addr),
        }
        .map_err(|e| CliError::new("Bus", format!("bus {bus}: {e}")))?;
        let conn = builder
            .build()
            .await
            .map_err(|e| CliError::new("Bus", format!("cannot connect to the {bus} bus: {e}")))?;
        let proxy = NetadmProxy::builder(&conn)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(|e| CliError::from_call(e, &bus))?;
        let progress = !json && std::io::stderr().is_terminal();
        Ok(Self { conn, proxy, bus, json, progress, verb })
    }

    fn err(&self, e: zbus::Error) -> CliError {
        CliError::from_call(e, &self.bus)
    }

    /// Runs a mutating call (with a progress bar when slow and on a
    /// terminal) and formats its result for `object`, labelled `label` for
    /// people.
    async fn mutate<F, Fut>(&self, object: &str, label: &str, call: F) -> Result<String, CliError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = zbus::Result<OpResult>>,
    {
        let res = if self.progress {
            progress::run(&self.conn, &self.proxy, &self.verb, call).await
        } else {
            call().await
        };
        let r = res.map_err(|e| self.err(e))?;
        Ok(if self.json {
            let mut s = serde_json::to_string_pretty(&opresult::to_json(object, &r))
                .expect("JSON values print");
            s.push('\n');
            s
        } else {
            opresult::summary(label, &r)
        })
    }
}

/// Splits `-p` assignment lists (`PROP=VAL,...`, possibly several) into a
/// map. Only the syntax is checked here; names and values are the daemon's
/// to judge, so their errors keep the daemon's kinds.
fn assignments(lists: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for item in lists.iter().flat_map(|l| l.split(',')) {
        let (name, value) = item.split_once('=').ok_or_else(|| {
            CliError::invalid_argument(format!("property assignment {item:?}: expected NAME=VALUE"))
        })?;
        if name.is_empty() {
            return Err(CliError::invalid_argument(format!(
                "property assignment {item:?}: empty property name"
            )));
        }
        if out.insert(name.to_owned(), value.to_owned()).is_some() {
            return Err(CliError::invalid_argument(format!(
                "link property {name:?} given more than once"
            )));
        }
    }
    Ok(out)
}

/// Splits `-p` name lists (`PROP,...`, possibly several).
fn prop_names(lists: &[String]) -> Result<Vec<String>, CliError> {
    let mut out: Vec<String> = Vec::new();
    for name in lists.iter().flat_map(|l| l.split(',')) {
        if name.is_empty() {
            return Err(CliError::invalid_argument("empty property name in -p list"));
        }
        if out.iter().any(|n| n == name) {
            return Err(CliError::invalid_argument(format!(
                "link property {name:?} given more than once"
            )));
        }
        out.push(name.to_owned());
    }
    Ok(out)
}

/// Borrows a list of strings as the proxy wants it.
fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

async fn run(verb: Verb, ctx: &Ctx) -> Result<String, CliError> {
    let json = ctx.json;
    let p = &ctx.proxy;
    let err = |e| ctx.err(e);
    // Refuses a bad -o (or -p without -o) before asking the daemon.
    let check = |cols: &'static [&'static str], fmt: &Format| -> Result<(), CliError> {
        render::render(&Table { columns: cols, rows: vec![] }, fmt).map(drop)
    };
    match verb {
        Verb::ShowPhys { stats: true, show, link } | Verb::ShowLink { stats: true, show, link } => {
            let fmt = show.format(json);
            check(show::stats(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_stats().await.map_err(err)?,
                link.as_deref(),
                |x| &x.link,
                "link",
            )?;
            render::render(&show::stats(&v), &fmt)
        }
        Verb::ShowTraffic { show, link } => {
            let fmt = show.format(json);
            check(show::traffic(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_traffic().await.map_err(err)?,
                link.as_deref(),
                |x| &x.link,
                "traffic on link",
            )?;
            render::render(&show::traffic(&v), &fmt)
        }
        Verb::StartTraffic { link, rate, size, flows } => {
            ctx.mutate(&link, &link, || p.start_traffic(&link, rate, size, flows)).await
        }
        Verb::StopTraffic { link } => ctx.mutate(&link, &link, || p.stop_traffic(&link)).await,
        Verb::CutCable { port } => ctx.mutate(&port, &port, || p.set_carrier(&port, false)).await,
        Verb::PlugCable { port } => ctx.mutate(&port, &port, || p.set_carrier(&port, true)).await,
        Verb::ShowPhys { show, link, .. } => {
            let fmt = show.format(json);
            check(show::phys(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_phys().await.map_err(err)?,
                link.as_deref(),
                |x| &x.link,
                "physical link",
            )?;
            render::render(&show::phys(&v), &fmt)
        }
        Verb::ShowLink { show, link, .. } => {
            let fmt = show.format(json);
            check(show::link(&[]).columns, &fmt)?;
            // One link: asked for by name, not picked out of every link.
            let all = match link.as_deref() {
                Some(l) => p.show_link_named(&[l]).await,
                None => p.show_link().await,
            };
            let v = show::pick(all.map_err(err)?, link.as_deref(), |x| &x.link, "link")?;
            render::render(&show::link(&v), &fmt)
        }
        Verb::ShowAggr { lacp, extended, stats, show, aggr } => {
            let fmt = show.format(json);
            let cols = if lacp {
                show::aggr_lacp(&[]).columns
            } else if extended {
                show::aggr_extended(&[], &[], &[]).columns
            } else if stats {
                show::aggr_stats(&[], &[]).columns
            } else {
                show::aggr(&[]).columns
            };
            check(cols, &fmt)?;
            let v = show::pick(
                p.show_aggr().await.map_err(err)?,
                aggr.as_deref(),
                |x| &x.link,
                "aggregation",
            )?;
            let table = if lacp {
                show::aggr_lacp(&v)
            } else if extended {
                let links = p.show_link().await.map_err(err)?;
                let phys = p.show_phys().await.map_err(err)?;
                show::aggr_extended(&v, &links, &phys)
            } else if stats {
                show::aggr_stats(&v, &p.show_stats().await.map_err(err)?)
            } else {
                show::aggr(&v)
            };
            render::render(&table, &fmt)
        }
        Verb::ShowVnic { show, vnic } => {
            let fmt = show.format(json);
            check(show::vnic(&[]).columns, &fmt)?;
            let all = match vnic.as_deref() {
                Some(l) => p.show_vnic_named(&[l]).await,
                None => p.show_vnic().await,
            };
            let v = show::pick(all.map_err(err)?, vnic.as_deref(), |x| &x.link, "VNIC")?;
            render::render(&show::vnic(&v), &fmt)
        }
        Verb::ShowVlan { show, vlan } => {
            let fmt = show.format(json);
            check(vlan::table(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_vlan().await.map_err(err)?,
                vlan.as_deref(),
                |x| &x.link,
                "VLAN",
            )?;
            render::render(&vlan::table(&v), &fmt)
        }
        Verb::ShowEtherstub { show, etherstub } => {
            let fmt = show.format(json);
            check(etherstub::table(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_etherstub().await.map_err(err)?,
                etherstub.as_deref(),
                |x| &x.link,
                "etherstub",
            )?;
            render::render(&etherstub::table(&v), &fmt)
        }
        Verb::ShowLinkprop { parsable, fields, props, link } => {
            let fmt = Format { json, parsable, parsable_flag: "-c", fields };
            check(show::linkprop(&[]).columns, &fmt)?;
            let names = prop_names(&props)?;
            let v = p
                .show_link_prop(link.as_deref().unwrap_or(""), &refs(&names))
                .await
                .map_err(err)?;
            render::render(&show::linkprop(&v), &fmt)
        }
        Verb::ShowIf { show, ifname } => {
            let fmt = show.format(json);
            check(show::iface(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_if().await.map_err(err)?,
                ifname.as_deref(),
                |x| &x.ifname,
                "IP interface",
            )?;
            render::render(&show::iface(&v), &fmt)
        }
        Verb::ShowAddr { show, addrobj } => {
            let fmt = show.format(json);
            check(show::addr(&[]).columns, &fmt)?;
            let v = show::pick(
                p.show_addr().await.map_err(err)?,
                addrobj.as_deref(),
                |x| &x.addrobj,
                "address object",
            )?;
            render::render(&show::addr(&v), &fmt)
        }
        Verb::ShowHistory { show } => {
            let fmt = show.format(json);
            check(show::history(&[]).columns, &fmt)?;
            let v = p.show_history().await.map_err(err)?;
            render::render(&show::history(&v), &fmt)
        }

        Verb::RenameLink { temporary, old, new } => {
            ctx.mutate(&old, &format!("{old} -> {new}"), || p.rename_link(&old, &new, temporary))
                .await
        }
        Verb::CreateAggr { opts, ports, aggr } => {
            let ports = refs(&ports);
            ctx.mutate(&aggr, &aggr, || {
                p.create_aggr(
                    &aggr,
                    &ports,
                    opts.policy.as_deref().unwrap_or(""),
                    opts.lacp_mode.as_deref().unwrap_or(""),
                    opts.lacp_timer.as_deref().unwrap_or(""),
                    opts.mac.as_deref().unwrap_or(""),
                    opts.temporary,
                )
            })
            .await
        }
        Verb::ModifyAggr { opts, aggr } => {
            if opts.policy.is_none()
                && opts.lacp_mode.is_none()
                && opts.lacp_timer.is_none()
                && opts.mac.is_none()
            {
                return Err(CliError::invalid_argument(
                    "modify-aggr: nothing to change (give -P, -L, -T or -u)",
                ));
            }
            ctx.mutate(&aggr, &aggr, || {
                p.modify_aggr(
                    &aggr,
                    opts.policy.as_deref().unwrap_or(""),
                    opts.lacp_mode.as_deref().unwrap_or(""),
                    opts.lacp_timer.as_deref().unwrap_or(""),
                    opts.mac.as_deref().unwrap_or(""),
                    opts.temporary,
                )
            })
            .await
        }
        Verb::AddAggr { temporary, ports, aggr } => {
            let ports = refs(&ports);
            ctx.mutate(&aggr, &aggr, || p.add_aggr(&aggr, &ports, temporary)).await
        }
        Verb::RemoveAggr { temporary, ports, aggr } => {
            let ports = refs(&ports);
            ctx.mutate(&aggr, &aggr, || p.remove_aggr(&aggr, &ports, temporary)).await
        }
        Verb::DeleteAggr { temporary, aggr } => {
            ctx.mutate(&aggr, &aggr, || p.delete_aggr(&aggr, temporary)).await
        }
        Verb::CreateVnic { temporary, link, mac, vid, props, vnic } => {
            let props = assignments(&props)?;
            ctx.mutate(&vnic, &vnic, || p.create_vnic(&vnic, &link, &mac, vid, props, temporary))
                .await
        }
        Verb::DeleteVnic { temporary, vnic } => {
            ctx.mutate(&vnic, &vnic, || p.delete_vnic(&vnic, temporary)).await
        }
        Verb::CreateVlan { temporary, link, vid, vlan } => {
            ctx.mutate(&vlan, &vlan, || p.create_vlan(&vlan, &link, vid, temporary)).await
        }
        Verb::DeleteVlan { temporary, vlan } => {
            ctx.mutate(&vlan, &vlan, || p.delete_vlan(&vlan, temporary)).await
        }
        Verb::CreateEtherstub { temporary, etherstub } => {
            ctx.mutate(&etherstub, &etherstub, || p.create_etherstub(&etherstub, temporary)).await
        }
        Verb::DeleteEtherstub { temporary, etherstub } => {
            ctx.mutate(&etherstub, &etherstub, || p.delete_etherstub(&etherstub, temporary)).await
        }
        Verb::SetLinkprop { temporary, props, link } => {
            let props = assignments(&props)?;
            ctx.mutate(&link, &link, || p.set_link_prop(&link, props, temporary)).await
        }
        Verb::ResetLinkprop { temporary, props, link } => {
            let names = prop_names(&props)?;
            let names = refs(&names);
            ctx.mutate(&link, &link, || p.reset_link_prop(&link, &names, temporary)).await
        }
        Verb::CreateIf { temporary, ifname } => {
            ctx.mutate(&ifname, &ifname, || p.create_if(&ifname, temporary)).await
        }
        Verb::DeleteIf { temporary, ifname } => {
            ctx.mutate(&ifname, &ifname, || p.delete_if(&ifname, temporary)).await
        }
        Verb::RefreshIf { ifname } => ctx.mutate(&ifname, &ifname, || p.refresh_if(&ifname)).await,
        Verb::CreateAddr { temporary, kind, addr, addrobj } => {
            ctx.mutate(&addrobj, &addrobj, || p.create_addr(&addrobj, &kind, &addr, temporary))
                .await
        }
        Verb::DeleteAddr { temporary, addrobj } => {
            ctx.mutate(&addrobj, &addrobj, || p.delete_addr(&addrobj, temporary)).await
        }
        Verb::SetStrategy { strategy } => {
            ctx.mutate(&strategy, &strategy, || p.set_strategy(&strategy)).await
        }
        Verb::Demo(_) => unreachable!("demo runs without a daemon connection"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let who = illumos::Personality::from_argv0(args.first().map(String::as_str));
    let wants_json = args.iter().any(|a| a == "--json");
    let args = match who.translate(args) {
        Ok(a) => a,
        Err(e) => return fail(who, wants_json, &e),
    };
    let command = who.command(Cli::command());
    let matches = match command.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if wants_json && !matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) {
                // A script asked for JSON: a malformed command line is an
                // error like any other, typed, on stderr, exit 2 as clap's
                // (1 as dladm/ipadm, as illumos's).
                let msg = e.kind().to_string();
                let detail = e.to_string();
                let first = detail.lines().next().unwrap_or(&msg).trim_start_matches("error: ");
                let err = CliError::new("InvalidArgument", first.to_owned());
                eprintln!("{}", error::to_json(&err));
                return ExitCode::from(who.usage_status());
            }
            if who.is_illumos() && e.use_stderr() {
                let _ = e.print();
                return ExitCode::from(who.usage_status());
            }
            e.exit()
        }
    };
    let verb = matches.subcommand_name().unwrap_or_default().to_owned();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let json = cli.json;
    let bus = cli
        .bus
        .or_else(|| std::env::var("NETADM_BUS").ok().filter(|b| !b.is_empty()))
        .unwrap_or_else(|| "system".to_owned());
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("Internal", format!("cannot start the runtime: {e}")))
        .and_then(|rt| {
            rt.block_on(async {
                if let Verb::Demo(args) = &cli.verb {
                    return demo::run(args, json)
                        .await
                        .map(|()| String::new())
                        .map_err(|e| CliError::new("Demo", e));
                }
                let prints = who.prints(&verb, json);
                let ctx = Ctx::connect(bus, json, verb).await?;
                let out = match run(cli.verb, &ctx).await {
                    Err(e) => match who.delete_temporary(&args, &e) {
                        Some(with_t) => {
                            let m = command.try_get_matches_from(with_t).map_err(|_| e)?;
                            let cli = Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit());
                            run(cli.verb, &ctx).await?
                        }
                        None => return Err(e),
                    },
                    out => out?,
                };
                Ok(if prints { out } else { String::new() })
            })
        });
    match result {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`netadm show-link | head -1`) is not an error.
            let _ = stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush());
            ExitCode::SUCCESS
        }
        Err(e) => fail(who, json, &e),
    }
}

/// Reports `e` on stderr (`<command>: <message>`, or JSON) and exits 1.
fn fail(who: illumos::Personality, json: bool, e: &CliError) -> ExitCode {
    if json {
        eprintln!("{}", error::to_json(e));
    } else {
        eprintln!("{}: {e}", who.name());
    }
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_verb() {
        let a = Cli::try_parse_from(["netadm", "--json", "--bus", "session", "show-link"]).unwrap();
        let b = Cli::try_parse_from(["netadm", "show-link", "--bus", "session", "--json"]).unwrap();
        assert!(a.json && b.json);
        assert_eq!(a.bus.as_deref(), Some("session"));
        assert_eq!(b.bus.as_deref(), Some("session"));
    }

    #[test]
    fn dladm_short_options() {
        let c = Cli::try_parse_from([
            "netadm",
            "create-aggr",
            "-t",
            "-P",
            "L2,L3",
            "-L",
            "active",
            "-T",
            "long",
            "-u",
            "2:8:20:1:2:3",
            "-l",
            "i40e0",
            "-l",
            "i40e1",
            "aggr0",
        ])
        .unwrap();
        let Verb::CreateAggr { opts, ports, aggr } = c.verb else { panic!() };
        assert!(opts.temporary);
        assert_eq!(opts.policy.as_deref(), Some("L2,L3"));
        assert_eq!(ports, ["i40e0", "i40e1"]);
        assert_eq!(aggr, "aggr0");
        assert!(Cli::try_parse_from(["netadm", "create-aggr", "aggr0"]).is_err());
        assert!(Cli::try_parse_from(["netadm", "show-aggr", "-L", "-x"]).is_err());
        let c = Cli::try_parse_from([
            "netadm",
            "show-linkprop",
            "-c",
            "-o",
            "value",
            "-p",
            "mtu",
            "net0",
        ])
        .unwrap();
        assert!(matches!(c.verb, Verb::ShowLinkprop { parsable: true, .. }));
    }

    #[test]
    fn assignment_syntax() {
        let m = assignments(&["mtu=9000,xmit-batch=off".into(), "itr=5".into()]).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m["mtu"], "9000");
        let e = assignments(&["mtu".into()]).unwrap_err();
        assert_eq!(e.kind, "InvalidArgument");
        assert!(e.message.contains("\"mtu\""), "{}", e.message);
        assert_eq!(assignments(&["mtu=1,mtu=2".into()]).unwrap_err().kind, "InvalidArgument");
        assert_eq!(assignments(&["=1".into()]).unwrap_err().kind, "InvalidArgument");
        assert_eq!(prop_names(&["mtu,itr".into()]).unwrap(), ["mtu", "itr"]);
        assert_eq!(prop_names(&["mtu,".into()]).unwrap_err().kind, "InvalidArgument");
    }
}

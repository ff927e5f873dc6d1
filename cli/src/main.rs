//! `netadm`: the dladm/ipadm-style command line of netadm.
//!
//! Parses a verb and its options, calls `netadmd` over D-Bus
//! (`org.netadm.Netadm1`) and prints a table, `-p -o` parsable lines or,
//! with `--json`, JSON. Errors go to stderr as `netadm: <message>` (or
//! `{"error": {"kind", "message"}}` under `--json`) with exit status 1;
//! usage errors exit 2.

mod apply;
mod complete;
mod demo;
mod dispatch;
mod dlstat;
mod error;
#[cfg(feature = "gen")]
mod generate;
mod illumos;
mod opresult;
mod progress;
mod render;
mod show;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Arg, ArgMatches, Args, Command, CommandFactory, FromArgMatches, Parser, Subcommand};
use netadm_dbus::{NetadmProxy, OpResult};
use zbus::Connection;
use zbus::proxy::CacheProperties;

use crate::error::CliError;
use crate::render::{Format, Table};
use crate::show::Rows;

/// netadm: administer datalinks and IP interfaces through netadmd.
#[derive(Debug, Parser)]
// The crate's description is the Debian package's summary; this is the
// command's.
#[command(
    name = "netadm",
    version,
    about = "netadm's command line: dladm/ipadm-style verbs over D-Bus to netadmd"
)]
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

// `-p` and `-o` of the show verbs.
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
        Format {
            json,
            parsable: self.parsable,
            parsable_flag: "-p",
            fields: self.fields.clone(),
            lines: false,
        }
    }
}

// `-c`, `-o` and `-p PROP` of the show verbs of properties
// (`show-linkprop`, `show-ifprop`, `show-prop`), as dladm and ipadm have
// them.
#[derive(Debug, Args)]
struct PropShowOpts {
    /// Parsable output: fields separated by `:` (requires -o).
    #[arg(short = 'c')]
    parsable: bool,
    /// Fields to print, comma-separated (case-insensitive), or `all`.
    #[arg(short = 'o', value_name = "FIELD,...")]
    fields: Option<String>,
    /// Only these properties, PROP,... (may repeat).
    #[arg(short = 'p', value_name = "PROP,...", id = "names")]
    props: Vec<String>,
}

// Aggregation settings shared by create-aggr and modify-aggr.
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

// The arguments of `add-aggr` and `remove-aggr`.
#[derive(Debug, Args)]
struct AggrPorts {
    /// Temporary: do not persist the change.
    #[arg(short = 't')]
    temporary: bool,
    /// A port (repeat for each).
    #[arg(short = 'l', value_name = "PORT", required = true)]
    ports: Vec<String>,
    /// Aggregation name.
    #[arg(id = "name", value_name = "AGGR")]
    aggr: String,
}

// The arguments of `delete-addr`, `up-addr` and `down-addr`.
#[derive(Debug, Args)]
struct AddrObj {
    /// Temporary: do not persist the change.
    #[arg(short = 't')]
    temporary: bool,
    /// Address object, IF/TAG.
    addrobj: String,
}

// The arguments of `create-etherstub` and `delete-etherstub`.
#[derive(Debug, Args)]
struct Etherstub {
    /// Temporary: do not persist the change.
    #[arg(short = 't')]
    temporary: bool,
    /// Etherstub name.
    #[arg(id = "name", value_name = "ETHERSTUB")]
    etherstub: String,
}

// The arguments of `enable-if` and `disable-if`.
#[derive(Debug, Args)]
struct IpadmIf {
    /// Temporary (ipadm's -t; the only way it acts).
    #[arg(short = 't')]
    temporary: bool,
    /// Interface name.
    #[arg(id = "name", value_name = "IFNAME")]
    ifname: String,
}

// The arguments of `show-phys`: its modes, as dladm's.
#[derive(Debug, Args)]
struct PhysShow {
    /// Show traffic counters.
    #[arg(short = 's', group = "mode")]
    stats: bool,
    /// Show factory MAC address slots: LINK SLOT ADDRESS INUSE CLIENT.
    #[arg(short = 'm', group = "mode")]
    mac: bool,
    /// Show where each device is: LINK DEVICE LOCATION (a kernel port's
    /// bus address; `--` for emulated ports, which have none).
    #[arg(short = 'L', group = "mode")]
    location: bool,
    #[command(flatten)]
    show: ShowOpts,
    /// Show only this link.
    #[arg(id = "name", value_name = "LINK")]
    link: Option<String>,
}

/// One read of `dlstat` or `flowstat`: the names shown, show-aggr's
/// aggregations, and the counters.
type StatRead = (Vec<String>, Vec<netadm_dbus::AggrInfo>, Vec<netadm_dbus::LinkStats>);

// The options of `dlstat` and `flowstat`.
#[derive(Debug, Args)]
struct StatOpts {
    /// Receive side only: IPKTS RBYTES (and drops).
    #[arg(short = 'r', conflicts_with = "tx")]
    rx: bool,
    /// Transmit side only: OPKTS OBYTES (and drops).
    #[arg(short = 't')]
    tx: bool,
    /// Repeat every INTERVAL seconds, showing what each interval counted
    /// (the first table: everything so far).
    #[arg(short = 'i', value_name = "INTERVAL", value_parser = clap::value_parser!(u64).range(1..))]
    interval: Option<u64>,
    /// With -i: stop after COUNT tables (default: until interrupted).
    #[arg(short = 'c', value_name = "COUNT", requires = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    #[command(flatten)]
    show: ShowOpts,
}

impl StatOpts {
    /// The side asked for, and the output format.
    fn parts(&self, json: bool) -> (dlstat::Side, Format) {
        (dlstat::side(self.rx, self.tx), self.show.format(json))
    }
}

// The arguments of `show-link`.
#[derive(Debug, Args)]
struct LinkShow {
    /// Show traffic counters.
    #[arg(short = 's')]
    stats: bool,
    #[command(flatten)]
    show: ShowOpts,
    /// Show only this link.
    #[arg(id = "name", value_name = "LINK")]
    link: Option<String>,
}

/// The verbs, in the order `--help` lists them. Each option's clap id is
/// the name of the bus argument it gives (`#[arg(id = "...")]` where the
/// field is named otherwise, its value name kept), and a show verb's name
/// to pick is `name`: `dispatch.rs` reads them by those names.
///
/// Each verb's options are made only when it is the verb typed (`defer`):
/// making all of them took about half a millisecond of every command. The
/// `Args` structs a verb takes are documented with plain comments: a doc
/// comment of theirs would, made later, replace the verb's help.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    /// Show physical links.
    ShowPhys(PhysShow),
    /// Show physical links' Ethernet settings: LINK PTYPE STATE AUTO
    /// SPEED-DUPLEX PAUSE.
    ShowEther {
        /// Extended: also what each can run at (`capable`), advertises
        /// (`adv`) and its peer advertises (`peeradv`).
        #[arg(short = 'x')]
        extended: bool,
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this link.
        #[arg(value_name = "LINK")]
        link: Option<String>,
    },
    /// Show datalinks.
    ShowLink(LinkShow),
    /// Add a flow (flowadm add-flow): the traffic of a link that matches
    /// its attributes, limited by its own maxbw and sent at its own
    /// priority.
    AddFlow {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// The link it is on.
        #[arg(short = 'l', value_name = "LINK")]
        link: String,
        /// What it matches, ATTR=VALUE,... (may repeat): transport,
        /// local_ip, remote_ip, local_port, remote_port, dsfield.
        #[arg(short = 'a', value_name = "ATTR=VALUE,...", required = true)]
        attrs: Vec<String>,
        /// Flow properties, PROP=VALUE,... (may repeat): maxbw, priority.
        #[arg(short = 'p', value_name = "PROP=VALUE,...")]
        props: Vec<String>,
        /// Flow name.
        #[arg(id = "name", value_name = "FLOW")]
        flow: String,
    },
    /// Remove a flow, or every flow on a link (-l LINK).
    RemoveFlow {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Every flow on this link.
        #[arg(
            short = 'l',
            value_name = "LINK",
            conflicts_with = "name",
            required_unless_present = "name"
        )]
        link: Option<String>,
        /// Flow name.
        #[arg(id = "name", value_name = "FLOW")]
        flow: Option<String>,
    },
    /// Show flows: FLOW LINK IPADDR PROTO LPORT RPORT DSFLD.
    ShowFlow {
        #[command(flatten)]
        show: ShowOpts,
        /// Only the flows on this link.
        #[arg(short = 'l', value_name = "LINK")]
        link: Option<String>,
        /// Show only this flow.
        #[arg(id = "name", value_name = "FLOW")]
        flow: Option<String>,
    },
    /// Set flow properties (maxbw, priority).
    SetFlowprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP=VALUE,... (may repeat).
        #[arg(short = 'p', value_name = "PROP=VALUE,...", required = true)]
        props: Vec<String>,
        /// Flow name.
        #[arg(id = "name", value_name = "FLOW")]
        flow: String,
    },
    /// Reset flow properties to their defaults (all without -p).
    ResetFlowprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP,... (may repeat).
        #[arg(short = 'p', value_name = "PROP,...", id = "names")]
        props: Vec<String>,
        /// Flow name.
        #[arg(id = "name", value_name = "FLOW")]
        flow: String,
    },
    /// Show flow properties: FLOW PROPERTY VALUE DEFAULT POSSIBLE.
    ShowFlowprop {
        #[command(flatten)]
        show: PropShowOpts,
        /// Only the flows on this link.
        #[arg(short = 'l', value_name = "LINK")]
        link: Option<String>,
        /// Show only this flow.
        #[arg(id = "name", value_name = "FLOW")]
        flow: Option<String>,
    },
    /// Show what each flow carried, as flowstat(8): FLOW IPKTS RBYTES
    /// OPKTS OBYTES; -r adds IDROPS, -t ODROPS (what its limits dropped).
    Flowstat {
        #[command(flatten)]
        stat: StatOpts,
        /// Only the flows on this link.
        #[arg(short = 'l', value_name = "LINK")]
        link: Option<String>,
        /// Show only this flow.
        #[arg(id = "name", value_name = "FLOW")]
        flow: Option<String>,
    },
    /// Show traffic counters per link, as dlstat(8):
    /// `dlstat [show-link|show-phys|show-aggr|show-vnic] [LINK]`.
    Dlstat {
        #[command(flatten)]
        stat: StatOpts,
        /// show-link (the default), show-phys, show-aggr or show-vnic; or
        /// the link.
        #[arg(value_name = "SUBCOMMAND")]
        what: Option<String>,
        /// Show only this link (of show-aggr: this aggregation).
        #[arg(id = "name", value_name = "LINK")]
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
        #[arg(id = "name", value_name = "AGGR")]
        aggr: String,
    },
    /// Change an aggregation's policy, LACP settings or MAC address.
    ModifyAggr {
        #[command(flatten)]
        opts: AggrOpts,
        /// Aggregation name.
        #[arg(id = "name", value_name = "AGGR")]
        aggr: String,
    },
    /// Add ports to an aggregation.
    AddAggr(AggrPorts),
    /// Remove ports from an aggregation.
    RemoveAggr(AggrPorts),
    /// Delete an aggregation.
    DeleteAggr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Aggregation name.
        #[arg(id = "name", value_name = "AGGR")]
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
        #[arg(id = "name", value_name = "AGGR")]
        aggr: Option<String>,
    },
    /// Create a VNIC.
    CreateVnic {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// The link to create it over.
        #[arg(short = 'l', value_name = "LINK", id = "over")]
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
        #[arg(id = "name", value_name = "VNIC")]
        vnic: String,
    },
    /// Delete a VNIC.
    DeleteVnic {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// VNIC name.
        #[arg(id = "name", value_name = "VNIC")]
        vnic: String,
    },
    /// Show VNICs.
    ShowVnic {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this VNIC.
        #[arg(id = "name", value_name = "VNIC")]
        vnic: Option<String>,
    },
    /// Create a VLAN link: frames it sends leave tagged with its VID.
    CreateVlan {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// The link to create it over (a physical link or an aggregation).
        #[arg(short = 'l', value_name = "LINK", id = "over")]
        link: String,
        /// VLAN id, 1-4094.
        #[arg(short = 'v', value_name = "VID")]
        vid: u16,
        /// VLAN link name.
        #[arg(id = "name", value_name = "VLAN")]
        vlan: String,
    },
    /// Delete a VLAN link.
    DeleteVlan {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// VLAN link name.
        #[arg(id = "name", value_name = "VLAN")]
        vlan: String,
    },
    /// Show VLAN links.
    ShowVlan {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this VLAN link.
        #[arg(id = "name", value_name = "VLAN")]
        vlan: Option<String>,
    },
    /// Create an etherstub: a virtual switch with no port, for VNICs
    /// that reach only each other.
    CreateEtherstub(Etherstub),
    /// Delete an etherstub (no VNIC may be over it).
    DeleteEtherstub(Etherstub),
    /// Show etherstubs.
    ShowEtherstub {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this etherstub.
        #[arg(id = "name", value_name = "ETHERSTUB")]
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
        #[arg(short = 'p', value_name = "PROP,...", id = "names")]
        props: Vec<String>,
        /// The link.
        link: String,
    },
    /// Show link properties.
    ShowLinkprop {
        #[command(flatten)]
        show: PropShowOpts,
        /// Only this link.
        link: Option<String>,
    },
    /// Create an IP interface over a link.
    CreateIf {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Interface name (the link's).
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: String,
    },
    /// Delete an IP interface and its addresses.
    DeleteIf {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Interface name.
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: String,
    },
    /// Put an IP interface's kernel device back as configured (after
    /// someone changed or deleted it: show-if says `drifted` or `missing`).
    RefreshIf {
        /// Interface name.
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: String,
    },
    /// Bring a disabled IP interface back, with its addresses, from its
    /// persistent configuration (running system only).
    EnableIf(IpadmIf),
    /// Remove a persistent IP interface and its addresses from the
    /// running system, keeping its persistent configuration.
    DisableIf(IpadmIf),
    /// Set IP interface properties of a protocol.
    SetIfprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP=VAL,... (may repeat).
        #[arg(short = 'p', value_name = "PROP=VAL,...", required = true)]
        props: Vec<String>,
        /// Protocol: ipv4 or ipv6.
        #[arg(short = 'm', value_name = "PROTO", required = true)]
        proto: String,
        /// The interface.
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: String,
    },
    /// Reset IP interface properties of a protocol to their defaults.
    ResetIfprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP,... (may repeat).
        #[arg(short = 'p', value_name = "PROP,...", required = true, id = "names")]
        props: Vec<String>,
        /// Protocol: ipv4 or ipv6.
        #[arg(short = 'm', value_name = "PROTO", required = true)]
        proto: String,
        /// The interface.
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: String,
    },
    /// Show IP interface properties.
    ShowIfprop {
        #[command(flatten)]
        show: PropShowOpts,
        /// Only this protocol: ipv4 or ipv6.
        #[arg(short = 'm', value_name = "PROTO")]
        proto: Option<String>,
        /// Only this interface.
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: Option<String>,
    },
    /// Set address properties of a static address (prefixlen, deprecated).
    SetAddrprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP=VAL,... (may repeat).
        #[arg(short = 'p', value_name = "PROP=VAL,...", required = true)]
        props: Vec<String>,
        /// Address object, IF/TAG.
        addrobj: String,
    },
    /// Reset address properties to their defaults.
    ResetAddrprop {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP,... (may repeat).
        #[arg(short = 'p', value_name = "PROP,...", required = true, id = "names")]
        props: Vec<String>,
        /// Address object, IF/TAG.
        addrobj: String,
    },
    /// Show address properties.
    ShowAddrprop {
        #[command(flatten)]
        show: PropShowOpts,
        /// Only this address object.
        addrobj: Option<String>,
    },
    /// Set protocol properties (of netadmd's network namespace).
    SetProp {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP=VAL,... (may repeat).
        #[arg(short = 'p', value_name = "PROP=VAL,...", required = true)]
        props: Vec<String>,
        /// Protocol: ipv4, ipv6 or tcp.
        proto: String,
    },
    /// Reset protocol properties to the kernel's defaults.
    ResetProp {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// PROP,... (may repeat).
        #[arg(short = 'p', value_name = "PROP,...", required = true, id = "names")]
        props: Vec<String>,
        /// Protocol: ipv4, ipv6 or tcp.
        proto: String,
    },
    /// Show protocol properties.
    ShowProp {
        #[command(flatten)]
        show: PropShowOpts,
        /// Only this protocol.
        proto: Option<String>,
    },
    /// Show IP interfaces.
    ShowIf {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this interface.
        #[arg(id = "name", value_name = "IFNAME")]
        ifname: Option<String>,
    },
    /// Create an address object.
    CreateAddr {
        /// Temporary: do not persist the change.
        #[arg(short = 't')]
        temporary: bool,
        /// Address type: static (with -a), dhcp (leased by netadmd's
        /// DHCP client; waits up to 15 s for the lease) or addrconf (IPv6
        /// link-local and SLAAC).
        #[arg(short = 'T', value_name = "TYPE")]
        kind: String,
        /// ADDRESS/PREFIX (static only).
        #[arg(short = 'a', value_name = "ADDR/PREFIX", default_value = "")]
        addr: String,
        /// Address object, IF/TAG.
        addrobj: String,
    },
    /// Delete an address object.
    DeleteAddr(AddrObj),
    /// Mark a static address up (back in the kernel).
    UpAddr(AddrObj),
    /// Mark a static address down (kept in the configuration, removed
    /// from the kernel).
    DownAddr(AddrObj),
    /// Show address objects.
    ShowAddr {
        #[command(flatten)]
        show: ShowOpts,
        /// Show only this address object.
        #[arg(id = "name", value_name = "ADDROBJ")]
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
        #[arg(id = "name", value_name = "LINK")]
        link: Option<String>,
    },
    /// Show the persistent configuration (with -t, the running one) as one
    /// document in the links.toml schema: what `apply -f` takes.
    ShowConfig {
        /// The running configuration (temporary changes included).
        #[arg(short = 't')]
        temporary: bool,
    },
    /// Make a configuration document (TOML or JSON, the links.toml schema)
    /// the running and persistent configuration, as one operation.
    Apply {
        /// The document; `-` for standard input.
        #[arg(short = 'f', value_name = "FILE")]
        file: String,
        /// Print the plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Arm a checkpoint: roll back after SECONDS unless `netadm
        /// confirm` comes first (0: none).
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        confirm_timeout: u32,
    },
    /// Keep what the last `apply --confirm-timeout` made.
    Confirm,
    /// Roll back to the armed checkpoint now.
    Rollback,
    /// Start a private dbus-daemon and netadmd and run the seed's sequence
    /// under each ring lifecycle strategy, side by side.
    Demo(demo::DemoArgs),
    /// The names netadmd has of a kind, one a line, for the shell
    /// completions (quietly nothing when it cannot be asked).
    #[command(name = "__complete", hide = true)]
    Complete {
        /// links, phys, aggrs, vnics, vlans, etherstubs, ifs, addrobjs,
        /// protos or props.
        kind: String,
    },
    /// Writes the man pages and shell completions into DIR (the package
    /// build's; built with feature `gen` only).
    #[cfg(feature = "gen")]
    #[command(name = "__generate", hide = true)]
    Generate {
        /// The pages' date, YYYY-MM-DD.
        #[arg(long)]
        date: String,
        /// Where: DIR/man, DIR/completions/{bash,zsh,fish}.
        dir: std::path::PathBuf,
    },
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

/// The socket of bus `bus` (`system`, `session` or an address) when its
/// address is one plain `unix:path=PATH` (no escapes; a `guid=`, which
/// dbus-daemon prints, is let go), as a bus's is; `None` for any other,
/// which zbus reads itself.
fn socket_path(bus: &str) -> Option<String> {
    let var = |v: &str| std::env::var(v).ok().filter(|a| !a.is_empty());
    let addr = match bus {
        "system" => var("DBUS_SYSTEM_BUS_ADDRESS")
            .unwrap_or_else(|| "unix:path=/var/run/dbus/system_bus_socket".into()),
        "session" => var("DBUS_SESSION_BUS_ADDRESS")?,
        a => a.to_owned(),
    };
    let mut path = None;
    for kv in addr.strip_prefix("unix:")?.split(',') {
        match kv.split_once('=')? {
            ("path", p) if path.is_none() && !p.is_empty() && !p.contains(['%', ';']) => {
                path = Some(p.to_owned());
            }
            ("guid", _) => {}
            _ => return None,
        }
    }
    path
}

/// The private socket netadm tries before the bus `bus`:
/// `$NETADM_PRIVATE` (empty: none), else the system bus's netadmd's when
/// `bus` is `system` (another bus's netadmd serves none of its own
/// unless told, and `$NETADM_PRIVATE` then names it).
fn private_socket(bus: &str) -> Option<PathBuf> {
    match std::env::var_os("NETADM_PRIVATE") {
        Some(p) if p.is_empty() => None,
        Some(p) => Some(p.into()),
        None => (bus == "system").then(|| PathBuf::from(netadm_dbus::PRIVATE_SOCKET)),
    }
}

/// A connection to netadmd peer to peer on its private socket `path`, or
/// `None` when that cannot be had (no socket, no netadmd on it, not
/// root's to open): the bus is then asked.
async fn private(path: &Path) -> Option<Connection> {
    let s = std::os::unix::net::UnixStream::connect(path).ok()?;
    s.set_nonblocking(true).ok()?;
    let s = tokio::net::UnixStream::from_std(s).ok()?;
    zbus::connection::Builder::unix_stream(s).p2p().build().await.ok()
}

/// A connection to netadmd, on its private socket if it can be had (see
/// [`private_socket`]), else on the bus named `bus` (`system`, `session`
/// or an address), and netadmd's proxy on it.
async fn proxy(bus: &str) -> Result<(Connection, NetadmProxy<'static>), CliError> {
    let conn = match private_socket(bus) {
        Some(path) => private(&path).await,
        None => None,
    };
    let conn = match conn {
        Some(conn) => conn,
        None => on_bus(bus).await?,
    };
    let proxy = NetadmProxy::builder(&conn)
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .map_err(|e| CliError::from_call(e, bus))?;
    Ok((conn, proxy))
}

/// A connection to the bus named `bus`.
async fn on_bus(bus: &str) -> Result<Connection, CliError> {
    let unreachable = |e: &dyn std::fmt::Display| {
        CliError::new("Bus", format!("cannot connect to the {bus} bus: {e}"))
    };
    let builder = match socket_path(bus) {
        // A bus socket is connected here: zbus would connect on a thread
        // of its own (tokio's blocking pool), which costs more than the
        // connect(2) to a local socket it waits for.
        Some(path) => {
            let s = std::os::unix::net::UnixStream::connect(&path)
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .and_then(tokio::net::UnixStream::from_std)
                .map_err(|e| unreachable(&format_args!("{path}: {e}")))?;
            Ok(zbus::connection::Builder::unix_stream(s))
        }
        None => match bus {
            "system" => zbus::connection::Builder::system(),
            "session" => zbus::connection::Builder::session(),
            addr => zbus::connection::Builder::address(addr),
        },
    }
    .map_err(|e| CliError::new("Bus", format!("bus {bus}: {e}")))?;
    builder.build().await.map_err(|e| unreachable(&e))
}

impl Ctx {
    async fn connect(bus: String, json: bool, verb: String) -> Result<Self, CliError> {
        let (conn, proxy) = proxy(&bus).await?;
        let progress = !json && std::io::stderr().is_terminal();
        Ok(Self { conn, proxy, bus, json, progress, verb })
    }

    fn err(&self, e: zbus::Error) -> CliError {
        CliError::from_call(e, &self.bus)
    }

    /// How a show verb prints, from its matches `m` (its `-p`/`-c`, its
    /// `-o`) and its definition `cmd` (which of them asks for parsable
    /// output).
    fn format(&self, m: &ArgMatches, cmd: &Command) -> Format {
        let short = cmd.get_arguments().find(|a| a.get_id() == "parsable").and_then(Arg::get_short);
        Format {
            json: self.json,
            parsable: m.get_flag("parsable"),
            parsable_flag: if short == Some('c') { "-c" } else { "-p" },
            fields: m.get_one::<String>("fields").cloned(),
            lines: false,
        }
    }

    /// The one show path: refuses a bad `-o` (or `-p` without `-o`) before
    /// asking the daemon, then fetches `rows` and prints them as `fmt` says.
    async fn show<T: Rows>(
        &self,
        fmt: Format,
        rows: impl Future<Output = Result<Vec<T>, CliError>>,
    ) -> Result<String, CliError> {
        self.table(fmt, T::COLUMNS, async { Ok(show::table(&rows.await?)) }).await
    }

    /// The rows of `name` from `named` (a lookup of its own) when one is
    /// given, else every row from `all`.
    async fn by_name<T: Rows>(
        &self,
        name: Option<&str>,
        named: impl Future<Output = zbus::Result<Vec<T>>>,
        all: impl Future<Output = zbus::Result<Vec<T>>>,
    ) -> Result<Vec<T>, CliError> {
        let rows = if name.is_some() { named.await } else { all.await };
        show::pick_rows(rows.map_err(|e| self.err(e))?, name)
    }

    /// [`Ctx::show`] for a table built otherwise, of `columns`.
    async fn table(
        &self,
        fmt: Format,
        columns: &'static [&'static str],
        table: impl Future<Output = Result<Table, CliError>>,
    ) -> Result<String, CliError> {
        render::render(&Table { columns, rows: vec![] }, &fmt)?;
        render::render(&table.await?, &fmt)
    }

    /// `dlstat` and `flowstat`: the counters of `object` (the one named
    /// `name`; of flows, those on link `on` only when given), as `stat`
    /// says to print them.
    async fn stat(
        &self,
        stat: &StatOpts,
        object: dlstat::Object,
        name: Option<String>,
        on: Option<String>,
    ) -> Result<String, CliError> {
        use dlstat::Object;
        let (side, fmt) = stat.parts(self.json);
        render::render(&Table { columns: dlstat::columns(object, side), rows: vec![] }, &fmt)?;
        let (p, err) = (&self.proxy, |e| self.err(e));
        // What it shows (by name), the aggregations of show-aggr, and the
        // counters: a physical link's or an aggregation port's from the
        // ports, a VNIC's from its device, a flow's from the datapath.
        let fetch = async || -> Result<StatRead, CliError> {
            let (names, aggrs, stats): (Vec<String>, _, _) = match object {
                Object::Link => {
                    let s = p.show_link_stats().await.map_err(err)?;
                    (s.iter().map(|s| s.link.clone()).collect(), vec![], s)
                }
                Object::Phys => {
                    let phys = p.show_phys().await.map_err(err)?;
                    let s = p.show_stats().await.map_err(err)?;
                    (phys.into_iter().map(|p| p.link).collect(), vec![], s)
                }
                Object::Vnic => {
                    let vnics = p.show_vnic().await.map_err(err)?;
                    let s = p.show_link_stats().await.map_err(err)?;
                    (vnics.into_iter().map(|v| v.link).collect(), vec![], s)
                }
                Object::Aggr => {
                    let a = p.show_aggr().await.map_err(err)?;
                    let a = show::pick(a, name.as_deref(), |a| a.link.as_str(), object.what())?;
                    return Ok((vec![], a, p.show_stats().await.map_err(err)?));
                }
                Object::Flow => {
                    let mut f = p.show_flow_stats_ex().await.map_err(err)?;
                    f.retain(|f| on.as_ref().is_none_or(|l| &f.link == l));
                    (f.iter().map(|f| f.flow.clone()).collect(), vec![], dlstat::flow_counts(&f))
                }
            };
            let names = show::pick(names, name.as_deref(), |n| n.as_str(), object.what())?;
            Ok((names, aggrs, stats))
        };
        let table = |(names, aggrs, now): &StatRead, before: Option<&StatRead>| {
            dlstat::table(object, side, names, aggrs, now, before.map(|b| &b.2[..]))
        };
        every(&fmt, stat.interval, stat.count, fetch, table).await
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
    for list in lists {
        // As dladm reads `-p`: an item without `=` is one more value of
        // the property before it (`protection=mac-nospoof,ip-nospoof`).
        // The model's splitter; its one error, an item with no `=` and
        // nothing before it to continue, is worded as the CLI's was.
        let items = netadm_model::split_assignments(list)
            .map_err(|e| CliError::invalid_argument(e.to_string()))?;
        for (name, value) in items {
            if name.is_empty() {
                return Err(CliError::invalid_argument(format!(
                    "property assignment \"={value}\": empty property name"
                )));
            }
            if out.insert(name.to_owned(), value).is_some() {
                return Err(CliError::invalid_argument(format!(
                    "link property {name:?} given more than once"
                )));
            }
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

/// Prints the table `table` makes of what `fetch` reads: once, or with
/// `interval` at every INTERVAL seconds' tick of a schedule started with
/// the first read (`count` tables, or until interrupted: SIGINT ends it
/// at once, not at the next tick), each of what the interval counted
/// (`table` is given the read before). The ticks are deadlines on the
/// clock, not a delay after each read: a slow read does not push the
/// next one back.
async fn every<T, Fut>(
    fmt: &Format,
    interval: Option<u64>,
    count: Option<u64>,
    fetch: impl Fn() -> Fut,
    table: impl Fn(&T, Option<&T>) -> Table,
) -> Result<String, CliError>
where
    Fut: Future<Output = Result<T, CliError>>,
{
    // With --json, each interval's table is one line of its own (JSON
    // Lines), so that a reader can take each as it comes.
    let fmt = &Format { lines: interval.is_some(), ..fmt.clone() };
    let show = |t: &Table| render::render(t, fmt);
    let start = tokio::time::Instant::now();
    let mut before = fetch().await?;
    let first = show(&table(&before, None))?;
    let Some(secs) = interval else { return Ok(first) };
    let period = std::time::Duration::from_secs(secs);
    let first_tick = start.checked_add(period).ok_or_else(|| {
        CliError::invalid_argument(format!("interval {secs}: too long for this clock"))
    })?;
    let mut ticks = tokio::time::interval_at(first_tick, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut out = std::io::stdout();
    // Whoever reads the tables has gone (`| head`): so does this.
    let mut shown_ok =
        |text: &str| out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_ok();
    if !shown_ok(&first) {
        return Ok(String::new());
    }
    let mut shown = 1;
    while count.is_none_or(|c| shown < c) {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        let now = fetch().await?;
        if !shown_ok(&show(&table(&now, Some(&before)))?) {
            break;
        }
        before = now;
        shown += 1;
    }
    Ok(String::new())
}

/// Runs `verb` (parsed from `matches`, defined by `command`): the verbs
/// whose command line differs from their bus method's shape are written
/// out here; every other comes from the interface's declaration
/// ([`dispatch`]).
async fn run(
    verb: Verb,
    matches: &ArgMatches,
    command: &Command,
    ctx: &Ctx,
) -> Result<String, CliError> {
    let json = ctx.json;
    let p = &ctx.proxy;
    let err = |e| ctx.err(e);
    match verb {
        Verb::ShowLink(LinkShow { stats: true, show, link }) => {
            let table = async {
                let stats = p.show_stats().await.map_err(err)?;
                let prot = p.show_protect_stats().await.map_err(err)?;
                let t = show::link_stats(&stats, &prot);
                match link.as_deref() {
                    None => Ok(t),
                    Some(l) => {
                        let rows = show::pick(
                            t.rows,
                            Some(l),
                            |r| r.text_of("LINK").unwrap_or(""),
                            "link",
                        )?;
                        Ok(render::Table { rows, ..t })
                    }
                }
            };
            ctx.table(show.format(json), show::LINK_STATS_COLUMNS, table).await
        }
        Verb::Dlstat { stat, what, link } => {
            let (object, link) = dlstat::Object::parse(what, link)?;
            ctx.stat(&stat, object, link, None).await
        }
        Verb::Flowstat { stat, link, flow } => {
            ctx.stat(&stat, dlstat::Object::Flow, flow, link).await
        }
        Verb::ShowPhys(PhysShow { stats: true, show, link, .. }) => {
            let rows =
                async { show::pick_rows(p.show_stats().await.map_err(err)?, link.as_deref()) };
            ctx.show(show.format(json), rows).await
        }
        Verb::ShowPhys(PhysShow { mac: true, show, link, .. }) => {
            let rows =
                async { show::pick_rows(p.show_phys_mac().await.map_err(err)?, link.as_deref()) };
            ctx.show(show.format(json), rows).await
        }
        Verb::ShowPhys(PhysShow { location: true, show, link, .. }) => {
            let rows =
                async { show::pick_rows(p.show_phys_loc().await.map_err(err)?, link.as_deref()) };
            ctx.show(show.format(json), rows).await
        }
        // One link or VNIC: asked for by name, not picked out of every one.
        Verb::ShowLink(LinkShow { show, link, .. }) => {
            let names: Vec<&str> = link.iter().map(String::as_str).collect();
            let rows = ctx.by_name(link.as_deref(), p.show_link_named(&names), p.show_link());
            ctx.show(show.format(json), rows).await
        }
        Verb::ShowVnic { show, vnic } => {
            let names: Vec<&str> = vnic.iter().map(String::as_str).collect();
            let rows = ctx.by_name(vnic.as_deref(), p.show_vnic_named(&names), p.show_vnic());
            ctx.show(show.format(json), rows).await
        }
        Verb::ShowAggr { lacp, extended, stats, show, aggr } => {
            let columns = match (lacp, extended, stats) {
                (true, _, _) => show::LACP_COLUMNS,
                (_, true, _) => show::EXTENDED_COLUMNS,
                (_, _, true) => show::STATS_COLUMNS,
                _ => <netadm_dbus::AggrInfo as show::Rows>::COLUMNS,
            };
            let table = async {
                let v = show::pick_rows(p.show_aggr().await.map_err(err)?, aggr.as_deref())?;
                Ok(if lacp {
                    show::aggr_lacp(&v)
                } else if extended {
                    let links = p.show_link().await.map_err(err)?;
                    let phys = p.show_phys().await.map_err(err)?;
                    show::aggr_extended(&v, &links, &phys)
                } else if stats {
                    show::aggr_stats(&v, &p.show_stats().await.map_err(err)?)
                } else {
                    show::aggr(&v)
                })
            };
            ctx.table(show.format(json), columns, table).await
        }
        Verb::ModifyAggr { opts, .. }
            if opts.policy.is_none()
                && opts.lacp_mode.is_none()
                && opts.lacp_timer.is_none()
                && opts.mac.is_none() =>
        {
            Err(CliError::invalid_argument(
                "modify-aggr: nothing to change (give -P, -L, -T or -u)",
            ))
        }
        Verb::CutCable { port } => ctx.mutate(&port, &port, || p.set_carrier(&port, false)).await,
        Verb::PlugCable { port } => ctx.mutate(&port, &port, || p.set_carrier(&port, true)).await,
        Verb::ShowConfig { temporary } => {
            p.show_config(temporary, if json { "json" } else { "toml" }).await.map_err(err)
        }
        Verb::Apply { file, dry_run, confirm_timeout } => {
            let doc = apply::read_document(&file)?;
            let r = p.apply(&doc, dry_run, confirm_timeout).await.map_err(|e| {
                let mut e = err(e);
                e.message = format!("{}: {}", apply::name(&file), e.message);
                e
            })?;
            Ok(if json {
                let mut s =
                    serde_json::to_string_pretty(&apply::to_json(&r)).expect("JSON values print");
                s.push('\n');
                s
            } else {
                apply::summary(&r)
            })
        }
        Verb::Demo(_) | Verb::Complete { .. } => unreachable!("run without a daemon connection"),
        #[cfg(feature = "gen")]
        Verb::Generate { .. } => unreachable!("run without a daemon connection"),
        _ => {
            let (name, m) = matches.subcommand().expect("a verb was parsed");
            let cmd = command.find_subcommand(name).expect("the verb parsed is defined");
            dispatch::dispatch(ctx, name, m, cmd).await.unwrap_or_else(|| {
                Err(CliError::new("Internal", format!("{name}: neither written out nor declared")))
            })
        }
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
    let mut command = who.command(Cli::command());
    // Parsed in place: the whole tree is not copied for one command line.
    let matches = match command.try_get_matches_from_mut(&args) {
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
                match &cli.verb {
                    Verb::Demo(args) => {
                        return demo::run(args, json)
                            .await
                            .map(|()| String::new())
                            .map_err(|e| CliError::new("Demo", e));
                    }
                    Verb::Complete { kind } => return Ok(complete::names(&bus, kind).await),
                    #[cfg(feature = "gen")]
                    Verb::Generate { dir, date } => {
                        return generate::generate(dir, date)
                            .map(|()| String::new())
                            .map_err(|e| CliError::new("Internal", e));
                    }
                    _ => {}
                }
                let prints = who.prints(&verb, json);
                let ctx = Ctx::connect(bus, json, verb).await?;
                let out = match run(cli.verb, &matches, &command, &ctx).await {
                    Err(e) => match who.delete_temporary(&args, &e) {
                        Some(with_t) => {
                            let m = command.clone().try_get_matches_from(with_t).map_err(|_| e)?;
                            let cli = Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit());
                            run(cli.verb, &m, &command, &ctx).await?
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
    fn a_plain_unix_socket_is_connected_here_and_any_other_address_by_zbus() {
        let p = |a: &str| socket_path(a);
        assert_eq!(p("unix:path=/run/b").as_deref(), Some("/run/b"));
        // dbus-daemon --print-address adds the server's guid.
        assert_eq!(p("unix:path=/tmp/x/bus,guid=0123abcd").as_deref(), Some("/tmp/x/bus"));
        for other in [
            "unix:abstract=/tmp/x",
            "unix:path=/tmp/a%2cb",
            "unix:path=/a,path=/b",
            "unix:path=",
            "unix:path=/a;unix:path=/b",
            "tcp:host=localhost,port=1",
            "unix:path=/a,noise=1",
        ] {
            assert_eq!(p(other), None, "{other}");
        }
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
        assert!(matches!(
            c.verb,
            Verb::ShowLinkprop { show: PropShowOpts { parsable: true, .. }, .. }
        ));
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
        // dladm's lists: values of one property go on after a comma.
        let m =
            assignments(
                &["protection=mac-nospoof,ip-nospoof,allowed-ips=10.0.0.2,10.0.0.3".into()],
            )
            .unwrap();
        assert_eq!(m["protection"], "mac-nospoof,ip-nospoof");
        assert_eq!(m["allowed-ips"], "10.0.0.2,10.0.0.3");
        assert_eq!(assignments(&["mtu=1,,2".into()]).unwrap_err().kind, "InvalidArgument");
        assert_eq!(prop_names(&["mtu,itr".into()]).unwrap(), ["mtu", "itr"]);
        assert_eq!(prop_names(&["mtu,".into()]).unwrap_err().kind, "InvalidArgument");
    }
}

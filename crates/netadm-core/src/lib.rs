//! netadmd's logic: the single owner of link state.
//!
//! A [`Core`] composes the wings, each a type with its own state:
//!
//! - the **pipeline** (`pipeline`): the running and persistent
//!   configurations, the one lock every change takes, the history; every
//!   mutating verb runs through it — validate → plan and execute → read
//!   back → persist → commit — and is put back whole if any step fails;
//! - the **verbs** (`verbs`): functions from a view of a configuration and
//!   the verb's arguments to the next configuration, grouped by object;
//! - the **machine** (`machine`): the pipeline's backend — the ports and
//!   their rings (`ports`), the datapath over them (`datapath`), the kernel
//!   mirror of IP interfaces (`mirror`);
//! - **desired state** (`desired`): show-config, apply, commit-confirmed
//!   checkpoints;
//! - the **reads** (`show`): the `show-*` rows, from snapshots that never
//!   wait for a mutation.
//!
//! `Core` itself holds no logic of theirs: each method below hands its
//! arguments to the wing that does the work. docs/ARCHITECTURE.md opens
//! with the map of every verb's path through these files.

mod datapath;
mod desired;
mod error;
mod kernel;
mod machine;
mod mirror;
mod pipeline;
mod ports;
mod protect;
mod report;
mod show;
mod timing;
mod verbs;
mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use netadm_config::{HardwareConfig, LinkState, Store};
use netadm_model::LinkName;
use netadm_rings::Strategy;

use desired::Desired;
use kernel::Kernel;
use machine::Machine;
use pipeline::{Op, Pipeline};
use show::Reads;
use verbs::{flows, ip, links, props, vnics};

pub use error::{CoreError, ErrorKind};
/// The failpoint registry, for the fault-injection tests.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub use fail;

/// Test-only: `NAME=return(FIFO)` holds the caller at failpoint `NAME`
/// until the test opens the named pipe FIFO for writing and closes it (an
/// event, not a delay), saying so on stderr, so that a test can look at
/// the system between two steps.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub fn failpoint_hold(name: &str) {
    if let Some(fifo) = fail::eval(name, |a| a).flatten() {
        eprintln!("failpoint {name}: holding until {fifo} is released");
        let _ = std::fs::read(&fifo);
    }
}
pub use ports::{
    EtherModes, Hardware, NicWrap, PhysPort, Port, PortCaps, PortCounters, PortStatus, SpeedDuplex,
};
pub use report::*;
pub use timing::Progress;
pub use view::{DEFAULT_MTU, Link, View};

/// The mutating verbs that are one call of the pipeline each: the verb's
/// name, its subject (first argument) and other arguments, and the
/// function of `verbs` that builds its change from them. Each takes
/// `temporary` (`-t`: the running configuration only) after its
/// arguments, but for those marked `running`, which change the running
/// configuration only.
macro_rules! verbs {
    ($($(#[doc = $doc:literal])* $op:literal => fn $name:ident(
        $subject:ident: $sty:ty $(, $arg:ident: $ty:ty)* $(,)?
    ) $($running:ident)? = $f:path;)*) => {$(
        verbs!(@fn [$(#[doc = $doc])*] [$($running)?] $op, $name(
            $subject: $sty $(, $arg: $ty)*
        ) = $f);
    )*};
    (@fn [$($doc:tt)*] [] $op:literal, $name:ident(
        $subject:ident: $sty:ty $(, $arg:ident: $ty:ty)*
    ) = $f:path) => {
        $($doc)*
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            &self,
            $subject: $sty,
            $($arg: $ty,)*
            temporary: bool,
            progress: Progress<'_>,
        ) -> Result<Report, CoreError> {
            let op = Op::verb($op, $subject, temporary);
            self.pipeline.mutate(&self.machine, op, progress, |cx| $f(cx, $subject $(, $arg)*))
        }
    };
    (@fn [$($doc:tt)*] [running] $op:literal, $name:ident(
        $subject:ident: $sty:ty $(, $arg:ident: $ty:ty)*
    ) = $f:path) => {
        $($doc)*
        pub fn $name(
            &self,
            $subject: $sty,
            $($arg: $ty,)*
            progress: Progress<'_>,
        ) -> Result<Report, CoreError> {
            let op = Op::verb($op, $subject, true);
            self.pipeline.mutate(&self.machine, op, progress, |cx| $f(cx, $subject $(, $arg)*))
        }
    };
}

/// The reads that are one call of [`Reads`] each, to its method of the
/// same name.
macro_rules! reads {
    ($($(#[doc = $doc:literal])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(
        $(#[doc = $doc])*
        pub fn $name(&self, $($arg: $ty),*) -> $ret {
            self.reads().$name($($arg),*)
        }
    )*};
}

/// The state owner.
pub struct Core {
    pipeline: Pipeline,
    machine: Machine,
    desired: Desired,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("hw", self.machine.hw()).finish_non_exhaustive()
    }
}

impl Core {
    /// Powers on the hardware, loads the persistent configuration from
    /// `store` (if any) and brings the hardware to it.
    pub fn start(
        cfg: &HardwareConfig,
        store: Option<Store>,
        strategy: Strategy,
    ) -> Result<Self, CoreError> {
        Self::start_with(cfg, store, strategy, None, false)
    }

    /// [`Core::start`], with each port's driver wrapped by `wrap` first
    /// (fault injection in tests), and the kernel mirror on or off.
    pub fn start_with(
        cfg: &HardwareConfig,
        store: Option<Store>,
        strategy: Strategy,
        wrap: Option<&NicWrap>,
        kernel_mirror: bool,
    ) -> Result<Self, CoreError> {
        let kernel = Kernel::open(cfg, store.as_ref().map(Store::dir))?;
        let others = kernel.as_ref().map_or(vec![], Kernel::phys);
        let hw = Arc::new(Hardware::power_on(cfg, strategy, wrap)?.with(others));
        let pipeline = Pipeline::new(store);
        let persisted = pipeline.load()?;
        let machine = Machine::start(hw, kernel_mirror, kernel)?;
        pipeline.replay(&machine, persisted)?;
        machine.started();
        let desired = Desired::load(&pipeline)?;
        Ok(Self { pipeline, machine, desired })
    }

    /// The hardware.
    pub fn hardware(&self) -> &Hardware {
        self.machine.hw()
    }

    /// A snapshot of the running configuration.
    pub fn running(&self) -> Arc<LinkState> {
        self.pipeline.running()
    }

    /// A snapshot of the persistent configuration.
    pub fn persisted(&self) -> LinkState {
        LinkState::clone(&self.pipeline.persisted())
    }

    /// A shared snapshot of the persistent configuration.
    pub fn persisted_snapshot(&self) -> Arc<LinkState> {
        self.pipeline.persisted()
    }

    /// The ring lifecycle strategy of the first port (all share it).
    pub fn strategy(&self) -> Strategy {
        self.hardware().ports().first().map(|p| p.engine.strategy()).unwrap_or_default()
    }

    /// Recent mutations, oldest first.
    pub fn history(&self) -> Vec<HistoryEntry> {
        self.pipeline.history()
    }

    /// Waits for the mutation in progress, if any, to finish (it persists
    /// before it returns) and keeps new ones out: for a clean shutdown.
    /// The journal of changes is folded into `links.toml` first, so a
    /// stopped netadmd leaves that one file. A mutation that arrives later
    /// gets a typed `Busy` error at once.
    pub fn quiesce(&self) {
        if let Some(k) = &self.machine.kernel {
            k.stop();
        }
        if self.pipeline.quiesce() {
            self.desired.wake();
        }
    }

    /// Changes the ring lifecycle strategy (runtime only).
    pub fn set_strategy(&self, s: &str) -> Result<Report, CoreError> {
        let strategy: Strategy = s.parse().map_err(|e: netadm_rings::StrategyParseError| {
            CoreError::invalid_argument(e.to_string())
        })?;
        let _m = self.pipeline.lock()?;
        self.pipeline.timed("set-strategy", s, |_| {
            self.hardware().set_strategy(strategy);
            Ok(())
        })
    }

    verbs! {
        /// `create-aggr`.
        "create-aggr" => fn create_aggr(
            aggr: &str, ports: &[String], policy: &str, lacp_mode: &str, lacp_timer: &str,
            mac: &str,
        ) = links::create_aggr;
        /// `modify-aggr`: empty arguments leave settings as they are.
        "modify-aggr" => fn modify_aggr(
            aggr: &str, policy: &str, lacp_mode: &str, lacp_timer: &str, mac: &str,
        ) = links::modify_aggr;
        /// `add-aggr`.
        "add-aggr" => fn add_aggr(aggr: &str, ports: &[String]) = links::add_aggr;
        /// `remove-aggr`.
        "remove-aggr" => fn remove_aggr(aggr: &str, ports: &[String]) = links::remove_aggr;
        /// `delete-aggr`.
        "delete-aggr" => fn delete_aggr(aggr: &str) = links::delete_aggr;
        /// `rename-link`.
        "rename-link" => fn rename_link(old: &str, new: &str) = links::rename_link;
        /// `create-vnic`. `mac`: `auto`, `factory`, `random` or an address.
        "create-vnic" => fn create_vnic(
            vnic: &str, over: &str, mac: &str, vid: u16, props: &BTreeMap<String, String>,
        ) = vnics::create_vnic;
        /// `delete-vnic`.
        "delete-vnic" => fn delete_vnic(vnic: &str) = vnics::delete_vnic;
        /// `create-vlan`: VLAN `vid` (1-4094) over physical link or
        /// aggregation `over`, as a link of its own named `vlan`, with its
        /// link's MAC address; at most one VLAN per VID over a link.
        "create-vlan" => fn create_vlan(vlan: &str, over: &str, vid: u16) = vnics::create_vlan;
        /// `delete-vlan`.
        "delete-vlan" => fn delete_vlan(vlan: &str) = vnics::delete_vlan;
        /// `create-etherstub`: a virtual switch with no port; the VNICs
        /// created over it reach only each other.
        "create-etherstub" => fn create_etherstub(stub: &str) = vnics::create_etherstub;
        /// `delete-etherstub`: refused while VNICs are over it.
        "delete-etherstub" => fn delete_etherstub(stub: &str) = vnics::delete_etherstub;
        /// `set-linkprop`.
        "set-linkprop" => fn set_link_prop(
            link: &str, props: &BTreeMap<String, String>,
        ) = props::set_link_prop;
        /// `reset-linkprop`: every settable property when `names` is empty.
        "reset-linkprop" => fn reset_link_prop(
            link: &str, names: &[String],
        ) = props::reset_link_prop;
        /// `create-if`.
        "create-if" => fn create_if(ifname: &str) = ip::create_if;
        /// `delete-if`: the interface and its addresses.
        "delete-if" => fn delete_if(ifname: &str) = ip::delete_if;
        /// `enable-if`: brings interface `ifname` back into the running
        /// system from its persistent configuration, with its addresses
        /// (ipadm's; it changes the running system only).
        "enable-if" => fn enable_if(ifname: &str) running = ip::enable_if;
        /// `disable-if`: removes interface `ifname` and its addresses from
        /// the running system, keeping its persistent configuration.
        "disable-if" => fn disable_if(ifname: &str) running = ip::disable_if;
        /// `delete-addr`.
        "delete-addr" => fn delete_addr(addrobj: &str) = ip::delete_addr;
        /// `set-ifprop -m PROTO -p PROP=VALUE,... IF`.
        "set-ifprop" => fn set_if_prop(
            ifname: &str, proto: &str, props: &BTreeMap<String, String>,
        ) = ip::set_if_prop;
        /// `reset-ifprop -m PROTO -p PROP,... IF`.
        "reset-ifprop" => fn reset_if_prop(
            ifname: &str, proto: &str, names: &[String],
        ) = ip::reset_if_prop;
        /// `set-prop -p PROP=VALUE,... PROTO`: protocol properties of the
        /// network namespace netadmd runs in.
        "set-prop" => fn set_prop(proto: &str, props: &BTreeMap<String, String>) = ip::set_prop;
        /// `reset-prop -p PROP,... PROTO`: back to the kernel's defaults.
        "reset-prop" => fn reset_prop(proto: &str, names: &[String]) = ip::reset_prop;
        /// `set-addrprop -p PROP=VALUE,... IF/TAG` (prefixlen, deprecated).
        "set-addrprop" => fn set_addr_prop(
            addrobj: &str, props: &BTreeMap<String, String>,
        ) = ip::set_addr_prop;
        /// `reset-addrprop -p PROP,... IF/TAG`.
        "reset-addrprop" => fn reset_addr_prop(
            addrobj: &str, names: &[String],
        ) = ip::reset_addr_prop;
        /// `add-flow -l LINK -a ATTR=VALUE,... [-p PROP=VALUE,...] FLOW`.
        "add-flow" => fn add_flow(
            flow: &str, link: &str, attrs: &BTreeMap<String, String>,
            props: &BTreeMap<String, String>,
        ) = flows::add_flow;
        /// `remove-flow FLOW`, or `remove-flow -l LINK` (its every flow).
        "remove-flow" => fn remove_flow(flow: &str, link: &str) = flows::remove_flow;
        /// `set-flowprop -p PROP=VALUE,... FLOW`.
        "set-flowprop" => fn set_flow_prop(
            flow: &str, props: &BTreeMap<String, String>,
        ) = flows::set_flow_prop;
        /// `reset-flowprop [-p PROP,...] FLOW`: every property without `-p`.
        "reset-flowprop" => fn reset_flow_prop(
            flow: &str, names: &[String],
        ) = flows::reset_flow_prop;
    }

    /// `create-addr -T static -a ADDR/PREFIX IF/TAG` (or `-T dhcp`, `-T
    /// addrconf`). As ipadm does, a DHCP address waits for its lease,
    /// after the change and outside the mutation lock.
    pub fn create_addr(
        &self,
        addrobj: &str,
        kind: &str,
        addr: &str,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        let r = self.pipeline.mutate(
            &self.machine,
            Op::verb("create-addr", addrobj, temporary),
            progress,
            |cx| ip::create_addr(cx, addrobj, kind, addr),
        )?;
        Ok(self.machine.await_lease(r, addrobj, kind))
    }

    /// `up-addr` (`up` true) / `down-addr`: a static address marked up
    /// (in the kernel) or down (kept in the configuration, removed from
    /// the kernel).
    pub fn set_addr_up(
        &self,
        addrobj: &str,
        up: bool,
        temporary: bool,
        progress: Progress<'_>,
    ) -> Result<Report, CoreError> {
        let op = if up { "up-addr" } else { "down-addr" };
        self.pipeline.mutate(&self.machine, Op::verb(op, addrobj, temporary), progress, |cx| {
            ip::set_addr_up(cx, addrobj, up)
        })
    }

    /// `refresh-if`: puts interface `name`'s kernel device back as
    /// configured — a new TAP device with the link's MAC and MTU, up, with
    /// the configured addresses — whatever was done to the old one.
    pub fn refresh_if(&self, name: &str) -> Result<Report, CoreError> {
        self.pipeline.timed("refresh-if", name, |t| {
            let n: LinkName = name.parse()?;
            let _m = self.pipeline.lock()?;
            let st = self.running();
            self.machine.refresh_if(&View { hw: self.hardware(), st: &st }, &n, t)
        })
    }

    /// Waits until kernel ports' devices come, go or are made anew (then
    /// true: call [`Core::resync_kernel`]); false when netadmd stops or
    /// has no kernel ports.
    pub fn wait_kernel_ports(&self) -> bool {
        self.machine.kernel.as_ref().and_then(|k| k.wait_ports()).is_some()
    }

    /// After kernel ports' devices came or went: what the running
    /// configuration builds over them made, adopted or reported as at
    /// start, and the IP interfaces on devices made anew configured.
    pub fn resync_kernel(&self) -> Result<Report, CoreError> {
        self.pipeline.timed("resync-kernel", "ports", |t| {
            let _m = self.pipeline.lock()?;
            let st = self.running();
            self.machine.resync_kernel(&View { hw: self.hardware(), st: &st }, t)
        })
    }

    /// `start-traffic`: a generator on `link`, replacing a stopped one.
    /// Serialised with mutations: the link and its rings stay as they are
    /// read until the generator runs.
    pub fn start_traffic(
        &self,
        link: &str,
        rate: u64,
        size: u32,
        flows: u32,
    ) -> Result<Report, CoreError> {
        self.pipeline.timed("start-traffic", link, |t| {
            let _m = self.pipeline.lock()?;
            let st = self.running();
            let v = View { hw: self.hardware(), st: &st };
            let offer = datapath::traffic::Offer { rate, size, flows };
            self.machine.datapath.start_traffic(&self.machine.ports, &v, link, offer, t)
        })
    }

    /// `stop-traffic`: stops the generator on `link`; its books stay.
    pub fn stop_traffic(&self, link: &str) -> Result<Report, CoreError> {
        self.pipeline.timed("stop-traffic", link, |t| self.machine.datapath.stop_traffic(link, t))
    }

    /// `cut-cable` / `plug-cable`: drops or restores the carrier of a
    /// port's wire (both ends of a cable). Not persisted: it is the
    /// machine's state, not configuration.
    pub fn set_carrier(&self, link: &str, up: bool) -> Result<Report, CoreError> {
        let op = if up { "plug-cable" } else { "cut-cable" };
        self.pipeline.timed(op, link, |t| {
            let st = self.running();
            let v = View { hw: self.hardware(), st: &st };
            self.machine.datapath.set_carrier(&v, link, up, t)
        })
    }

    /// `show-traffic`.
    pub fn show_traffic(&self) -> Vec<TrafficRow> {
        self.machine.datapath.show_traffic()
    }

    /// Waits until the traffic started from `link` has sent `n` frames in
    /// all (show-traffic's SENT), woken by the generator, for at most
    /// `within`: whether it has. `NotFound` when no traffic was started
    /// from `link`.
    pub fn wait_traffic_sent(
        &self,
        link: &str,
        n: u64,
        within: std::time::Duration,
    ) -> Result<bool, CoreError> {
        self.machine
            .datapath
            .wait_traffic_sent(link, n, within)
            .ok_or_else(|| CoreError::not_found(format!("no traffic from {link}")))
    }

    /// What reads see now.
    fn reads(&self) -> Reads<'_> {
        Reads {
            m: &self.machine,
            running: self.pipeline.running(),
            persisted: self.pipeline.persisted(),
        }
    }

    reads! {
        /// Traffic counters of every physical link and aggregation.
        fn show_stats() -> Vec<StatsRow>;
        /// Traffic counters of every link but etherstubs (`dlstat`).
        fn show_link_stats() -> Vec<StatsRow>;
        /// `show-flow`: flow `flow` (every one when empty), on `link`
        /// only when given.
        fn show_flow(flow: &str, link: &str) -> Result<Vec<FlowRow>, CoreError>;
        /// `show-flowprop`: the properties of flow `flow` (every flow's
        /// when empty, on `link` only when given), limited to `names`.
        fn show_flow_prop(
            flow: &str, link: &str, names: &[String],
        ) -> Result<Vec<FlowPropRow>, CoreError>;
        /// `flowstat`: what each flow carried.
        fn show_flow_stats() -> Vec<FlowStatsRow>;
        /// What link protection dropped and let through on each protected
        /// VNIC (and each that was protected since netadmd started).
        fn show_protect_stats() -> Vec<ProtectRow>;
        /// `show-phys`.
        fn show_phys() -> Vec<PhysRow>;
        /// `show-phys -m`: factory MAC address slots and who uses them.
        fn show_phys_mac() -> Vec<PhysMacRow>;
        /// `show-phys -L`: where each physical link's device is.
        fn show_phys_loc() -> Vec<PhysLocRow>;
        /// `show-ether`: physical link `link`'s (every one's when empty)
        /// Ethernet settings; with `extended`, also what it can run at and
        /// advertises.
        fn show_ether(link: &str, extended: bool) -> Result<Vec<EtherRow>, CoreError>;
        /// `show-link`.
        fn show_link() -> Vec<LinkRow>;
        /// `show-link` rows of the links among `names` that exist, each at
        /// the cost of its own lookups.
        fn show_links_named(names: &BTreeSet<String>) -> Vec<LinkRow>;
        /// The links whose `show-link` row may differ between two snapshots
        /// of the running and persistent configurations (before and after
        /// a change); what is no longer there is among them.
        fn links_changed(
            running: (&LinkState, &LinkState),
            persisted: (&LinkState, &LinkState)
        ) -> BTreeSet<String>;
        /// `show-aggr`.
        fn show_aggr() -> Vec<AggrRow>;
        /// `show-vnic`.
        fn show_vnic() -> Vec<VnicRow>;
        /// `show-vnic` rows of the VNICs among `names` that exist.
        fn show_vnics_named(names: &BTreeSet<String>) -> Vec<VnicRow>;
        /// `show-vlan`.
        fn show_vlan() -> Vec<VlanRow>;
        /// `show-etherstub`.
        fn show_etherstub() -> Vec<EtherstubRow>;
        /// `show-linkprop`: properties of `link` (every link when empty),
        /// limited to `names` when given.
        fn show_link_prop(link: &str, names: &[String]) -> Result<Vec<PropRow>, CoreError>;
        /// `show-if`.
        fn show_if() -> Vec<IfRow>;
        /// `show-ifprop`: the properties of interface `ifname` (every
        /// interface when empty) of protocol `proto` (both when empty),
        /// limited to `names` when given.
        fn show_if_prop(
            ifname: &str, proto: &str, names: &[String]
        ) -> Result<Vec<IfPropRow>, CoreError>;
        /// `show-prop`: protocol properties of `proto` (every protocol when
        /// empty), limited to `names` when given.
        fn show_prop(proto: &str, names: &[String]) -> Result<Vec<ProtoPropRow>, CoreError>;
        /// `show-addrprop`: the properties of static address object
        /// `addrobj` (every one when empty), limited to `names` when given.
        fn show_addr_prop(addrobj: &str, names: &[String]) -> Result<Vec<AddrPropRow>, CoreError>;
        /// `show-addr`.
        fn show_addr() -> Vec<AddrRow>;
    }

    /// The persistent configuration (the running one with `running`) as a
    /// document in the `links.toml` schema: TOML, or JSON.
    pub fn show_config(&self, running: bool, json: bool) -> Result<String, CoreError> {
        Desired::show_config(&self.pipeline, running, json)
    }

    /// `apply`: makes the configuration `text` (a document in the
    /// `links.toml` schema, TOML or JSON) the running and persistent one,
    /// as one operation; with `dry_run` only plans it. With
    /// `confirm_timeout_s` > 0 it arms a checkpoint: unless
    /// [`Core::confirm`] comes within that many seconds, the configuration
    /// before is put back ([`Core::rollback_due`]), also after a restart.
    pub fn apply(
        &self,
        text: &str,
        dry_run: bool,
        confirm_timeout_s: u32,
        progress: Progress<'_>,
    ) -> Result<ApplyReport, CoreError> {
        self.desired.apply(
            &self.pipeline,
            &self.machine,
            text,
            dry_run,
            confirm_timeout_s,
            progress,
        )
    }

    /// `confirm`: keeps what the last `apply --confirm-timeout` made and
    /// disarms its checkpoint.
    pub fn confirm(&self) -> Result<Report, CoreError> {
        self.desired.confirm(&self.pipeline)
    }

    /// `rollback`: puts back the configuration the armed checkpoint holds,
    /// now, through the pipeline, and disarms it.
    pub fn rollback(&self, progress: Progress<'_>) -> Result<Report, CoreError> {
        self.desired.rollback(&self.pipeline, &self.machine, progress)
    }

    /// When the armed checkpoint rolls back (ms since the Unix epoch).
    pub fn checkpoint_deadline_ms(&self) -> Option<u64> {
        self.desired.deadline_ms()
    }

    /// Blocks until an armed checkpoint is due (true) or netadmd is
    /// stopping (false): woken by every arm, confirm and rollback, and by
    /// the deadline.
    pub fn wait_checkpoint_due(&self) -> bool {
        self.desired.wait_due(&self.pipeline)
    }

    /// Rolls back the armed checkpoint if it is due (no confirm came in
    /// time). `Ok(None)` if nothing was due. Should the rollback fail, the
    /// checkpoint stays armed and is tried again 10 s later.
    pub fn rollback_due(&self) -> Result<Option<Report>, CoreError> {
        self.desired.rollback_due(&self.pipeline, &self.machine)
    }
}

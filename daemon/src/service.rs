//! The `org.netadm.Netadm1` service: the manager object, per-link objects
//! and progress signals.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use netadm_core::{Core, CoreError};

use crate::wire::ToWire;

use crate::auth::Authorizer;
use netadm_dbus::{
    AddrInfo, AddrPropInfo, AggrInfo, ApplyResult, BUS_NAME, Error, EtherstubInfo, HistoryEntry,
    IfInfo, IfPropInfo, LinkInfo, LinkStats, OpResult, PhysInfo, PropInfo, ProtoPropInfo,
    ROOT_PATH, TrafficInfo, VlanInfo, VnicInfo, link_path,
};
use tokio::sync::{Mutex, mpsc};
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::{Connection, interface};

/// The manager object at [`ROOT_PATH`].
struct Manager {
    core: Arc<Core>,
    auth: Authorizer,
    /// Link objects currently served, by name.
    links: Arc<Mutex<BTreeMap<String, LinkInfo>>>,
}

impl Manager {
    /// Runs a read on the blocking pool: reads take std locks, and nothing
    /// that can block may run on one of the runtime's async workers.
    async fn read<T: ToWire + Send + 'static>(
        &self,
        f: impl FnOnce(&Core) -> T + Send + 'static,
    ) -> Result<T::Wire, Error> {
        let core = self.core.clone();
        tokio::task::spawn_blocking(move || {
            // Test-only: `daemon.read=return(FIFO)` holds every read until
            // the test opens the named pipe FIFO for writing and closes it
            // (an event, not a delay), saying so, to show reads never
            // occupy the async workers.
            #[cfg(feature = "failpoints")]
            if let Some(fifo) = fail::eval("daemon.read", |a| a).flatten() {
                eprintln!("failpoint daemon.read: holding a read until {fifo} is released");
                let _ = std::fs::read(&fifo);
            }
            f(&core).wire()
        })
        .await
        .map_err(|e| Error::Internal(format!("a read failed: {e}")))
    }

    /// Runs a mutation on the blocking pool, forwarding its progress as
    /// signals to everyone (clients filter on `caller`), then refreshes the
    /// link objects.
    async fn mutate<T: ToWire + Send + 'static>(
        &self,
        hdr: &Header<'_>,
        emitter: &SignalEmitter<'_>,
        op: &'static str,
        f: impl FnOnce(&Core, netadm_core::Progress<'_>) -> Result<T, CoreError> + Send + 'static,
    ) -> Result<T::Wire, Error> {
        self.auth.check(emitter.connection(), hdr, op).await.inspect_err(|e| {
            tracing::warn!(op, caller = ?hdr.sender(), "refused: {}", e.message());
        })?;
        let caller = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        let started = std::time::Instant::now();
        let before = (self.core.running(), self.core.persisted_snapshot());
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, u32, u32)>();
        let core = self.core.clone();
        let job = tokio::task::spawn_blocking(move || {
            let progress = move |phase: &str, done: u32, total: u32| {
                let _ = tx.send((phase.to_owned(), done, total));
            };
            f(&core, &progress)
        });
        while let Some((phase, done, total)) = rx.recv().await {
            let _ = Manager::progress(emitter, &caller, op, &phase, done, total).await;
        }
        let res = job.await.map_err(|e| Error::Internal(format!("{op} panicked: {e}")))?;
        match &res {
            Ok(_) => {
                tracing::info!(op, caller, total_us = started.elapsed().as_micros() as u64, "done")
            }
            Err(e) => tracing::info!(op, caller, kind = e.kind.as_str(), "failed: {}", e.message),
        }
        let result = res.as_ref().map_or_else(|e| e.kind.as_str(), |_| "ok");
        crate::metrics::observe(op, result, started.elapsed());
        let res = res.wire()?;
        // Only the link objects the change can have touched.
        let after = (self.core.running(), self.core.persisted_snapshot());
        let changed = self.core.links_changed((&before.0, &after.0), (&before.1, &after.1));
        sync_links(&self.core, emitter.connection(), &self.links, Some(changed)).await;
        Ok(res)
    }
}

#[interface(name = "org.netadm.Netadm1")]
impl Manager {
    async fn show_phys(&self) -> Result<Vec<PhysInfo>, Error> {
        self.read(|c| c.show_phys()).await
    }

    async fn show_link(&self) -> Result<Vec<LinkInfo>, Error> {
        self.read(|c| c.show_link()).await
    }

    async fn show_link_named(&self, names: Vec<String>) -> Result<Vec<LinkInfo>, Error> {
        let names: BTreeSet<String> = names.into_iter().collect();
        let rows = self.read(move |c| (c.show_links_named(&names), names)).await?;
        every_named(rows, |l| &l.link, "link")
    }

    async fn rename_link(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        old: String,
        new: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "rename-link", move |c, p| c.rename_link(&old, &new, temporary, p))
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn create_aggr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        ports: Vec<String>,
        policy: String,
        lacp_mode: String,
        lacp_timer: String,
        mac: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "create-aggr", move |c, p| {
            c.create_aggr(&name, &ports, &policy, &lacp_mode, &lacp_timer, &mac, temporary, p)
        })
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn modify_aggr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        policy: String,
        lacp_mode: String,
        lacp_timer: String,
        mac: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "modify-aggr", move |c, p| {
            c.modify_aggr(&name, &policy, &lacp_mode, &lacp_timer, &mac, temporary, p)
        })
        .await
    }

    async fn add_aggr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        ports: Vec<String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "add-aggr", move |c, p| c.add_aggr(&name, &ports, temporary, p))
            .await
    }

    async fn remove_aggr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        ports: Vec<String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "remove-aggr", move |c, p| {
            c.remove_aggr(&name, &ports, temporary, p)
        })
        .await
    }

    async fn delete_aggr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "delete-aggr", move |c, p| c.delete_aggr(&name, temporary, p)).await
    }

    async fn show_aggr(&self) -> Result<Vec<AggrInfo>, Error> {
        self.read(|c| c.show_aggr()).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn create_vnic(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        over: String,
        mac: String,
        vid: u16,
        props: BTreeMap<String, String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "create-vnic", move |c, p| {
            c.create_vnic(&name, &over, &mac, vid, &props, temporary, p)
        })
        .await
    }

    async fn delete_vnic(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "delete-vnic", move |c, p| c.delete_vnic(&name, temporary, p)).await
    }

    async fn show_vnic(&self) -> Result<Vec<VnicInfo>, Error> {
        self.read(|c| c.show_vnic()).await
    }

    async fn show_vnic_named(&self, names: Vec<String>) -> Result<Vec<VnicInfo>, Error> {
        let names: BTreeSet<String> = names.into_iter().collect();
        let rows = self.read(move |c| (c.show_vnics_named(&names), names)).await?;
        every_named(rows, |l| &l.link, "VNIC")
    }

    async fn create_vlan(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        over: String,
        vid: u16,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "create-vlan", move |c, p| {
            c.create_vlan(&name, &over, vid, temporary, p)
        })
        .await
    }

    async fn delete_vlan(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "delete-vlan", move |c, p| c.delete_vlan(&name, temporary, p)).await
    }

    async fn show_vlan(&self) -> Result<Vec<VlanInfo>, Error> {
        self.read(|c| c.show_vlan()).await
    }

    async fn create_etherstub(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "create-etherstub", move |c, p| {
            c.create_etherstub(&name, temporary, p)
        })
        .await
    }

    async fn delete_etherstub(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "delete-etherstub", move |c, p| {
            c.delete_etherstub(&name, temporary, p)
        })
        .await
    }

    async fn show_etherstub(&self) -> Result<Vec<EtherstubInfo>, Error> {
        self.read(|c| c.show_etherstub()).await
    }

    async fn set_link_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        link: String,
        props: BTreeMap<String, String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "set-linkprop", move |c, p| {
            c.set_link_prop(&link, &props, temporary, p)
        })
        .await
    }

    async fn reset_link_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        link: String,
        names: Vec<String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "reset-linkprop", move |c, p| {
            c.reset_link_prop(&link, &names, temporary, p)
        })
        .await
    }

    async fn show_link_prop(
        &self,
        link: String,
        names: Vec<String>,
    ) -> Result<Vec<PropInfo>, Error> {
        self.read(move |c| c.show_link_prop(&link, &names)).await?
    }

    async fn create_if(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "create-if", move |c, p| c.create_if(&name, temporary, p)).await
    }

    async fn delete_if(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "delete-if", move |c, p| c.delete_if(&name, temporary, p)).await
    }

    async fn refresh_if(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "refresh-if", move |c, _| c.refresh_if(&name)).await
    }

    async fn set_if_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        proto: String,
        props: BTreeMap<String, String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "set-ifprop", move |c, p| {
            c.set_if_prop(&name, &proto, &props, temporary, p)
        })
        .await
    }

    async fn reset_if_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
        proto: String,
        names: Vec<String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "reset-ifprop", move |c, p| {
            c.reset_if_prop(&name, &proto, &names, temporary, p)
        })
        .await
    }

    async fn show_if_prop(
        &self,
        name: String,
        proto: String,
        names: Vec<String>,
    ) -> Result<Vec<IfPropInfo>, Error> {
        self.read(move |c| c.show_if_prop(&name, &proto, &names)).await?
    }

    async fn set_addr_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        addrobj: String,
        props: BTreeMap<String, String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "set-addrprop", move |c, p| {
            c.set_addr_prop(&addrobj, &props, temporary, p)
        })
        .await
    }

    async fn reset_addr_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        addrobj: String,
        names: Vec<String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "reset-addrprop", move |c, p| {
            c.reset_addr_prop(&addrobj, &names, temporary, p)
        })
        .await
    }

    async fn show_addr_prop(
        &self,
        addrobj: String,
        names: Vec<String>,
    ) -> Result<Vec<AddrPropInfo>, Error> {
        self.read(move |c| c.show_addr_prop(&addrobj, &names)).await?
    }

    async fn set_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        proto: String,
        props: BTreeMap<String, String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "set-prop", move |c, p| c.set_prop(&proto, &props, temporary, p))
            .await
    }

    async fn reset_prop(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        proto: String,
        names: Vec<String>,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "reset-prop", move |c, p| c.reset_prop(&proto, &names, temporary, p))
            .await
    }

    async fn show_prop(
        &self,
        proto: String,
        names: Vec<String>,
    ) -> Result<Vec<ProtoPropInfo>, Error> {
        self.read(move |c| c.show_prop(&proto, &names)).await?
    }

    async fn enable_if(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "enable-if", move |c, p| c.enable_if(&name, p)).await
    }

    async fn disable_if(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        name: String,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "disable-if", move |c, p| c.disable_if(&name, p)).await
    }

    async fn show_if(&self) -> Result<Vec<IfInfo>, Error> {
        self.read(|c| c.show_if()).await
    }

    async fn create_addr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        addrobj: String,
        kind: String,
        addr: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "create-addr", move |c, p| {
            c.create_addr(&addrobj, &kind, &addr, temporary, p)
        })
        .await
    }

    async fn delete_addr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        addrobj: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "delete-addr", move |c, p| c.delete_addr(&addrobj, temporary, p))
            .await
    }

    async fn up_addr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        addrobj: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "up-addr", move |c, p| c.set_addr_up(&addrobj, true, temporary, p))
            .await
    }

    async fn down_addr(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        addrobj: String,
        temporary: bool,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "down-addr", move |c, p| {
            c.set_addr_up(&addrobj, false, temporary, p)
        })
        .await
    }

    async fn show_addr(&self) -> Result<Vec<AddrInfo>, Error> {
        self.read(|c| c.show_addr()).await
    }

    async fn start_traffic(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        link: String,
        rate: u64,
        size: u32,
        flows: u32,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "start-traffic", move |c, _| {
            c.start_traffic(&link, rate, size, flows)
        })
        .await
    }

    async fn stop_traffic(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        link: String,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "stop-traffic", move |c, _| c.stop_traffic(&link)).await
    }

    async fn set_carrier(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        link: String,
        up: bool,
    ) -> Result<OpResult, Error> {
        let op = if up { "plug-cable" } else { "cut-cable" };
        self.mutate(&hdr, &em, op, move |c, _| c.set_carrier(&link, up)).await
    }

    async fn show_traffic(&self) -> Result<Vec<TrafficInfo>, Error> {
        self.read(|c| c.show_traffic()).await
    }

    async fn show_stats(&self) -> Result<Vec<LinkStats>, Error> {
        self.read(|c| c.show_stats()).await
    }

    async fn show_config(&self, running: bool, format: String) -> Result<String, Error> {
        let json = match format.as_str() {
            "" | "toml" => false,
            "json" => true,
            f => {
                return Err(Error::InvalidArgument(format!("format {f:?}: expected toml or json")));
            }
        };
        self.read(move |c| c.show_config(running, json)).await?
    }

    async fn apply(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
        document: String,
        dry_run: bool,
        confirm_timeout_s: u32,
    ) -> Result<ApplyResult, Error> {
        let r = self
            .mutate(&hdr, &em, "apply", move |c, p| {
                c.apply(&document, dry_run, confirm_timeout_s, p)
            })
            .await?;
        if r.confirm_deadline_ms > 0 {
            tracing::warn!(
                "checkpoint armed: rolls back at {} ms unless confirmed",
                r.confirm_deadline_ms
            );
        }
        Ok(r)
    }

    async fn confirm(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "confirm", |c, _| c.confirm()).await
    }

    async fn rollback(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] em: SignalEmitter<'_>,
    ) -> Result<OpResult, Error> {
        self.mutate(&hdr, &em, "rollback", |c, p| c.rollback(p)).await
    }

    async fn show_history(&self) -> Result<Vec<HistoryEntry>, Error> {
        self.read(|c| c.history()).await
    }

    async fn set_strategy(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &Connection,
        strategy: String,
    ) -> Result<OpResult, Error> {
        self.auth.check(conn, &hdr, "set-strategy").await?;
        let core = self.core.clone();
        tokio::task::spawn_blocking(move || core.set_strategy(&strategy))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
            .wire()
    }

    #[zbus(property)]
    async fn strategy(&self) -> String {
        self.core.strategy().to_string()
    }

    #[zbus(property)]
    async fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_owned()
    }

    #[zbus(signal)]
    async fn progress(
        emitter: &SignalEmitter<'_>,
        caller: &str,
        op: &str,
        phase: &str,
        done: u32,
        total: u32,
    ) -> zbus::Result<()>;
}

/// The rows of a by-name read, or NotFound naming the first name that has
/// none (`what` it is not).
fn every_named<T>(
    (rows, names): (Vec<T>, BTreeSet<String>),
    key: impl Fn(&T) -> &String,
    what: &str,
) -> Result<Vec<T>, Error> {
    if rows.len() < names.len() {
        let found: BTreeSet<&String> = rows.iter().map(key).collect();
        if let Some(n) = names.iter().find(|n| !found.contains(n)) {
            return Err(Error::NotFound(format!("{what} {n} does not exist")));
        }
    }
    Ok(rows)
}

/// A link object.
struct LinkObject {
    info: LinkInfo,
}

#[interface(name = "org.netadm.Netadm1.Link")]
impl LinkObject {
    #[zbus(property)]
    async fn name(&self) -> String {
        self.info.link.clone()
    }
    #[zbus(property)]
    async fn class(&self) -> String {
        self.info.class.clone()
    }
    #[zbus(property)]
    async fn mtu(&self) -> u32 {
        self.info.mtu
    }
    #[zbus(property)]
    async fn state(&self) -> String {
        self.info.state.clone()
    }
    #[zbus(property)]
    async fn over(&self) -> Vec<String> {
        self.info.over.clone()
    }
}

/// Makes the served link objects match the running configuration: every
/// one (`changed` None), or those named in `changed`, which must include
/// every link whose object may differ (`Core::links_changed`), so a verb
/// costs what it changes rather than a row per link.
async fn sync_links(
    core: &Core,
    conn: &Connection,
    served: &Mutex<BTreeMap<String, LinkInfo>>,
    changed: Option<BTreeSet<String>>,
) {
    let mut served = served.lock().await;
    let server = conn.object_server();
    let now: BTreeMap<String, LinkInfo> = match &changed {
        None => core.show_link(),
        Some(names) => core.show_links_named(names),
    }
    .wire()
    .into_iter()
    .map(|l| (l.link.clone(), l))
    .collect();
    let gone: Vec<String> = match &changed {
        None => served.keys().filter(|n| !now.contains_key(*n)).cloned().collect(),
        Some(names) => names.iter().filter(|n| !now.contains_key(*n)).cloned().collect(),
    };
    for name in gone {
        if served.remove(&name).is_some() {
            let _ = server.remove::<LinkObject, _>(link_path(&name)).await;
        }
    }
    for (name, info) in now {
        if served.get(&name) != Some(&info) {
            if served.contains_key(&name) {
                let _ = server.remove::<LinkObject, _>(link_path(&name)).await;
            }
            let _ = server.at(link_path(&name), LinkObject { info: info.clone() }).await;
            served.insert(name, info);
        }
    }
}

/// Rolls back an armed checkpoint that no `Confirm` came for, whoever
/// armed it and whether or not its client still runs (also one armed by
/// the netadmd before a restart: at once if its deadline has passed).
async fn watch_checkpoint(
    core: Arc<Core>,
    conn: Connection,
    links: Arc<Mutex<BTreeMap<String, LinkInfo>>>,
) {
    loop {
        let c = core.clone();
        match tokio::task::spawn_blocking(move || c.wait_checkpoint_due()).await {
            Ok(true) => {}
            _ => return,
        }
        let c = core.clone();
        let started = std::time::Instant::now();
        let res = tokio::task::spawn_blocking(move || c.rollback_due()).await;
        match res {
            Ok(Ok(Some(_))) => {
                tracing::warn!("no confirm came in time: the checkpoint was rolled back");
                crate::metrics::observe("rollback", "ok", started.elapsed());
                sync_links(&core, &conn, &links, None).await;
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::error!(
                    kind = e.kind.as_str(),
                    "rolling back the checkpoint failed: {}",
                    e.message
                );
            }
            Err(e) => tracing::error!("rolling back the checkpoint panicked: {e}"),
        }
    }
}

/// Serves until SIGTERM or SIGINT, then lets the mutation in progress
/// finish before returning.
pub async fn serve(core: Arc<Core>, bus: &str, auth: Authorizer) -> Result<(), String> {
    // Handlers first: a SIGTERM that comes as soon as READY=1 is out (a
    // quick `systemctl stop`, a test) must stop cleanly, not kill.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let links = Arc::new(Mutex::new(BTreeMap::new()));
    let manager = Manager { core: core.clone(), auth, links: links.clone() };
    let builder = match bus {
        "system" => zbus::connection::Builder::system(),
        "session" => zbus::connection::Builder::session(),
        addr => zbus::connection::Builder::address(addr),
    }
    .map_err(|e| format!("bus {bus}: {e}"))?;
    let conn = builder
        .serve_at(ROOT_PATH, manager)
        .map_err(|e| e.to_string())?
        .name(BUS_NAME)
        .map_err(|e| e.to_string())?
        .build()
        .await
        .map_err(|e| format!("cannot serve {BUS_NAME} on the {bus} bus: {e}"))?;
    sync_links(&core, &conn, &links, None).await;
    tokio::spawn(watch_checkpoint(core.clone(), conn.clone(), links.clone()));
    tracing::info!("serving {BUS_NAME} on the {bus} bus");
    crate::notify::notify(crate::notify::NotifyState::Ready);

    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("stopping: waiting for the mutation in progress");
    crate::notify::notify(crate::notify::NotifyState::Stopping);
    // Wait for a mutation in progress: it persists before it returns.
    tokio::task::spawn_blocking(move || core.quiesce()).await.map_err(|e| e.to_string())?;
    drop(conn);
    Ok(())
}

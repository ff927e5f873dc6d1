//! The `org.netadm.Netadm1` service: the manager object, per-link objects
//! and progress signals, on the bus and, peer to peer, on netadmd's
//! private socket.
//!
//! The private socket is the bus's interface without the bus: root's
//! `netadm` connects to it straight (as `systemctl` does to systemd's
//! `/run/systemd/private`), so a command costs no `Hello`, no bus
//! daemon's hop each way and no `GetConnectionCredentials` round trip
//! (the caller is the socket's peer). The same [`Manager`] answers on it,
//! authorized the same way; the link objects stay on the bus.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use netadm_core::{Core, CoreError};

use crate::auth::Authorizer;
use crate::wire::{Answer, Lend, ToWire};
use netadm_dbus::{
    AddrInfo, AddrInfoV1, AddrPropInfo, AggrInfo, ApplyResult, BUS_NAME, Error, EtherInfo,
    EtherstubInfo, EtherstubInfoV1, FlowInfo, FlowPropInfo, FlowStats, FlowStatsV1, HistoryEntry,
    IfInfo, IfInfoV1, IfPropInfo, LinkInfo, LinkStats, Links, OpResult, PhysInfo, PhysLocInfo,
    PhysMacInfo, PropInfo, PropNames, Props, ProtectStats, ProtoPropInfo, ROOT_PATH, TrafficInfo,
    VlanInfo, VnicInfo, link_path,
};
use tokio::sync::{Mutex, mpsc};
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::{Connection, interface};

/// Link objects currently served, by name.
type Served = Mutex<BTreeMap<String, LinkInfo>>;

/// The manager object at [`ROOT_PATH`], on the bus and on each
/// connection to the private socket.
#[derive(Clone)]
struct Manager {
    core: Arc<Core>,
    auth: Authorizer,
    /// Link objects currently served, by name.
    links: Arc<Served>,
    /// Where the link objects are served: the bus connection for a
    /// private socket's manager; none for the bus's own, whose calls come
    /// on the bus (and whose connection holds it).
    bus: Option<Connection>,
    /// The private socket's peer's uid, from the socket itself when it
    /// was accepted; none on the bus.
    peer_uid: Option<u32>,
}

impl Manager {
    /// Runs a read on the blocking pool (reads take std locks, and nothing
    /// that can block may run on one of the runtime's async workers) and
    /// answers with its rows, or with the error a fallible read gave.
    async fn read<T>(
        &self,
        f: impl FnOnce(&Core) -> T + Send + 'static,
    ) -> Result<<T::Wire as Answer>::Ok, Error>
    where
        T: ToWire + Send + 'static,
        T::Wire: Answer,
    {
        let core = self.core.clone();
        tokio::task::spawn_blocking(move || {
            // Test-only: `daemon.read=return(FIFO)` holds every read until
            // the test opens the named pipe FIFO for writing and closes it
            // (an event, not a delay), saying so, to show reads never
            // occupy the async workers.
            #[cfg(feature = "failpoints")]
            netadm_core::failpoint_hold("daemon.read");
            f(&core).wire()
        })
        .await
        .map_err(|e| Error::Internal(format!("a read failed: {e}")))?
        .answer()
    }

    /// Runs a mutation on the blocking pool, forwarding its progress as
    /// signals on the connection the call came on (on the bus to everyone:
    /// clients filter on `caller`), then refreshes the link objects.
    async fn mutate<T: ToWire + Send + 'static>(
        &self,
        hdr: &Header<'_>,
        emitter: &SignalEmitter<'_>,
        op: &'static str,
        f: impl FnOnce(&Core, netadm_core::Progress<'_>) -> Result<T, CoreError> + Send + 'static,
    ) -> Result<T::Wire, Error> {
        self.auth.check(emitter.connection(), self.peer_uid, hdr, op).await.inspect_err(|e| {
            tracing::warn!(op, caller = ?hdr.sender(), peer_uid = ?self.peer_uid, "refused: {}", e.message());
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
        let bus = self.bus.as_ref().unwrap_or(emitter.connection());
        sync_links(&self.core, bus, &self.links, Some(changed)).await;
        Ok(res)
    }
}

impl Manager {
    /// A by-name read: the rows of `names`, each looked up on its own, or
    /// `NotFound` naming the first name that has none (`what` it is not).
    async fn named<T, F, K>(
        &self,
        names: Vec<String>,
        what: &'static str,
        f: F,
        key: K,
    ) -> Result<Vec<T::Wire>, Error>
    where
        T: ToWire + Send + 'static,
        F: FnOnce(&Core, &BTreeSet<String>) -> Vec<T> + Send + 'static,
        K: Fn(&T) -> &String + Send + 'static,
    {
        let names: BTreeSet<String> = names.into_iter().collect();
        self.read(move |c| {
            let rows = f(c, &names);
            if rows.len() < names.len() {
                let found: BTreeSet<&String> = rows.iter().map(&key).collect();
                if let Some(n) = names.iter().find(|n| !found.contains(n)) {
                    return Err(Error::NotFound(format!("{what} {n} does not exist")));
                }
            }
            Ok(rows)
        })
        .await
    }

    /// Runs a call that changes the daemon but is no operation of the
    /// pipeline (`set-strategy`): authorized as a mutation, run on the
    /// blocking pool, with no progress, metrics or link objects to update.
    async fn direct<T: ToWire + Send + 'static>(
        &self,
        hdr: &Header<'_>,
        emitter: &SignalEmitter<'_>,
        op: &'static str,
        f: impl FnOnce(&Core) -> Result<T, CoreError> + Send + 'static,
    ) -> Result<T::Wire, Error> {
        self.auth.check(emitter.connection(), self.peer_uid, hdr, op).await?;
        let core = self.core.clone();
        tokio::task::spawn_blocking(move || f(&core))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
            .wire()
    }
}

/// `ShowConfig`'s `format`: whether it asks for JSON (`json`) rather than
/// TOML (`toml` or empty).
fn config_format(format: &str) -> Result<bool, Error> {
    match format {
        "" | "toml" => Ok(false),
        "json" => Ok(true),
        f => Err(Error::InvalidArgument(format!("format {f:?}: expected toml or json"))),
    }
}

/// The body of each bus method. The rule: a `read` method `m(a, ..)`
/// answers with the core's `m(a, ..)`, a `mutate` method `m(a, ..)` runs the
/// core's `m(a, .., progress)` as the operation named by its verb. The
/// methods below are the exceptions, where the core's function differs in
/// name or shape, or the method does more than call it.
macro_rules! call {
    // By-name reads: `NotFound` names the first name that has no row.
    ($s:tt, $h:ident, $e:ident, read show_link_named($n:ident) $v:literal) => {
        $s.named($n, "link", |c, n| c.show_links_named(n), |l| &l.link).await
    };
    ($s:tt, $h:ident, $e:ident, read show_vnic_named($n:ident) $v:literal) => {
        $s.named($n, "VNIC", |c, n| c.show_vnics_named(n), |l| &l.link).await
    };
    // The first published shapes: the rows of their `Ex` methods without
    // the fields added since.
    ($s:tt, $h:ident, $e:ident, read show_if() $v:literal) => {
        $s.read(|c| c.show_if()).await.map(|v| v.into_iter().map(IfInfo::v1).collect())
    };
    ($s:tt, $h:ident, $e:ident, read show_if_ex() $v:literal) => {
        $s.read(|c| c.show_if()).await
    };
    ($s:tt, $h:ident, $e:ident, read show_addr() $v:literal) => {
        $s.read(|c| c.show_addr()).await.map(|v| v.into_iter().map(AddrInfo::v1).collect())
    };
    ($s:tt, $h:ident, $e:ident, read show_addr_ex() $v:literal) => {
        $s.read(|c| c.show_addr()).await
    };
    ($s:tt, $h:ident, $e:ident, read show_etherstub() $v:literal) => {
        $s.read(|c| c.show_etherstub()).await.map(|v| v.into_iter().map(EtherstubInfo::v1).collect())
    };
    ($s:tt, $h:ident, $e:ident, read show_etherstub_ex() $v:literal) => {
        $s.read(|c| c.show_etherstub()).await
    };
    ($s:tt, $h:ident, $e:ident, read show_flow_stats() $v:literal) => {
        $s.read(|c| c.show_flow_stats()).await.map(|v| v.into_iter().map(FlowStats::v1).collect())
    };
    ($s:tt, $h:ident, $e:ident, read show_flow_stats_ex() $v:literal) => {
        $s.read(|c| c.show_flow_stats()).await
    };
    ($s:tt, $h:ident, $e:ident, read show_history() $v:literal) => {
        $s.read(|c| c.history()).await
    };
    // The format is checked before anything is read.
    ($s:tt, $h:ident, $e:ident, read show_config($running:ident, $format:ident) $v:literal) => {{
        let json = config_format(&$format)?;
        $s.read(move |c| c.show_config($running, json)).await
    }};
    // Core functions that report no progress.
    ($s:tt, $h:ident, $e:ident, mutate refresh_if($n:ident) $v:literal) => {
        $s.mutate(&$h, &$e, $v, move |c, _| c.refresh_if(&$n)).await
    };
    ($s:tt, $h:ident, $e:ident, mutate start_traffic($l:ident, $r:ident, $z:ident, $f:ident) $v:literal) => {
        $s.mutate(&$h, &$e, $v, move |c, _| c.start_traffic(&$l, $r, $z, $f)).await
    };
    ($s:tt, $h:ident, $e:ident, mutate stop_traffic($l:ident) $v:literal) => {
        $s.mutate(&$h, &$e, $v, move |c, _| c.stop_traffic(&$l)).await
    };
    ($s:tt, $h:ident, $e:ident, mutate confirm() $v:literal) => {
        $s.mutate(&$h, &$e, $v, |c, _| c.confirm()).await
    };
    // One method, two operations: `cut-cable` and `plug-cable`.
    ($s:tt, $h:ident, $e:ident, mutate set_carrier($l:ident, $up:ident) $v:literal) => {{
        let op = if $up { "plug-cable" } else { "cut-cable" };
        $s.mutate(&$h, &$e, op, move |c, _| c.set_carrier(&$l, $up)).await
    }};
    // One core function, two methods.
    ($s:tt, $h:ident, $e:ident, mutate up_addr($a:ident, $t:ident) $v:literal) => {
        $s.mutate(&$h, &$e, $v, move |c, p| c.set_addr_up(&$a, true, $t, p)).await
    };
    ($s:tt, $h:ident, $e:ident, mutate down_addr($a:ident, $t:ident) $v:literal) => {
        $s.mutate(&$h, &$e, $v, move |c, p| c.set_addr_up(&$a, false, $t, p)).await
    };
    // An armed checkpoint is logged.
    ($s:tt, $h:ident, $e:ident, mutate apply($d:ident, $dry:ident, $t:ident) $v:literal) => {{
        let r = $s.mutate(&$h, &$e, $v, move |c, p| c.apply(&$d, $dry, $t, p)).await?;
        if r.confirm_deadline_ms > 0 {
            tracing::warn!(
                "checkpoint armed: rolls back at {} ms unless confirmed",
                r.confirm_deadline_ms
            );
        }
        Ok(r)
    }};
    // Not an operation of the pipeline.
    ($s:tt, $h:ident, $e:ident, mutate set_strategy($st:ident) $v:literal) => {
        $s.direct(&$h, &$e, $v, move |c| c.set_strategy(&$st)).await
    };
    ($s:tt, property strategy) => {
        $s.core.strategy().to_string()
    };
    ($s:tt, property version) => {
        env!("CARGO_PKG_VERSION").to_owned()
    };
    // The rule.
    ($s:tt, $h:ident, $e:ident, read $m:ident($($a:ident),*) $v:literal) => {
        $s.read(move |c| c.$m($(Lend::lend(&$a)),*)).await
    };
    ($s:tt, $h:ident, $e:ident, mutate $m:ident($($a:ident),*) $v:literal) => {
        $s.mutate(&$h, &$e, $v, move |c, p| c.$m($(Lend::lend(&$a),)* p)).await
    };
}

/// The manager's `#[zbus::interface]`, from the interface's declaration
/// (`netadm_dbus::interface!`): every method is its class's skeleton
/// ([`Manager::read`], [`Manager::mutate`]) around its core function (the
/// rule and the exceptions of [`call!`]). Every method takes the message
/// header and a signal emitter; zbus leaves both out of the introspection,
/// which stays what `docs/dbus/org.netadm.Netadm1.xml` says (so do the doc
/// comments, which zbus would print into it).
macro_rules! manager_interface {
    (methods { $($(#[$doc:meta])* $class:ident $name:ident ($($arg:ident: $ty:tt),*)
        -> $ret:ty = $verb:literal;)* }
     properties { $($(#[$pdoc:meta])* $prop:ident: $pty:ty;)* }
     signals { $($(#[$sdoc:meta])* $sig:ident ($($sarg:ident: $sty:ty),*);)* }) => {
        #[interface(name = "org.netadm.Netadm1")]
        impl Manager {
            $(
                #[allow(clippy::too_many_arguments, unused_variables)]
                async fn $name(
                    &self,
                    #[zbus(header)] hdr: Header<'_>,
                    #[zbus(signal_emitter)] em: SignalEmitter<'_>,
                    $($arg: $ty),*
                ) -> Result<$ret, Error> {
                    call!(self, hdr, em, $class $name($($arg),*) $verb)
                }
            )*
            $(
                #[zbus(property)]
                async fn $prop(&self) -> $pty {
                    call!(self, property $prop)
                }
            )*
            $(
                #[zbus(signal)]
                async fn $sig(emitter: &SignalEmitter<'_>, $($sarg: $sty),*) -> zbus::Result<()>;
            )*
        }
    };
}

netadm_dbus::interface!(manager_interface);

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
    served: &Served,
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

/// A watcher's loop: waits with `wait` on the blocking pool until it says
/// there is work (false: the core is going away, and so does the watcher),
/// then does `work` there and hands its outcome, and when it started, to
/// `report`.
async fn watch<T: Send + 'static, F: Future<Output = ()>>(
    core: &Arc<Core>,
    wait: fn(&Core) -> bool,
    work: fn(&Core) -> T,
    mut report: impl FnMut(Result<T, tokio::task::JoinError>, std::time::Instant) -> F,
) {
    loop {
        let c = core.clone();
        match tokio::task::spawn_blocking(move || wait(&c)).await {
            Ok(true) => {}
            _ => return,
        }
        let c = core.clone();
        let started = std::time::Instant::now();
        report(tokio::task::spawn_blocking(move || work(&c)).await, started).await;
    }
}

/// Rolls back an armed checkpoint that no `Confirm` came for, whoever
/// armed it and whether or not its client still runs (also one armed by
/// the netadmd before a restart: at once if its deadline has passed).
async fn watch_checkpoint(core: Arc<Core>, conn: Connection, links: Arc<Served>) {
    let (core, conn, links) = (&core, &conn, &links);
    watch(core, Core::wait_checkpoint_due, Core::rollback_due, |res, started| async move {
        match res {
            Ok(Ok(Some(_))) => {
                tracing::warn!("no confirm came in time: the checkpoint was rolled back");
                crate::metrics::observe("rollback", "ok", started.elapsed());
                sync_links(core, conn, links, None).await;
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
    })
    .await
}

/// Puts what is built over kernel ports back in place whenever their
/// devices come, go or are made anew (a NIC hot-plugged, a veth made
/// again), as at start.
async fn watch_kernel_ports(core: Arc<Core>, conn: Connection, links: Arc<Served>) {
    let (core, conn, links) = (&core, &conn, &links);
    watch(core, Core::wait_kernel_ports, Core::resync_kernel, |res, _| async move {
        match res {
            Ok(Ok(r)) => {
                tracing::info!(
                    ms = r.total_us / 1000,
                    "kernel ports came or went: their links are in place again"
                );
                sync_links(core, conn, links, None).await;
            }
            Ok(Err(e)) => tracing::warn!(
                kind = e.kind.as_str(),
                "kernel ports came or went; putting their links back: {}",
                e.message
            ),
            Err(e) => tracing::error!("putting kernel ports' links back panicked: {e}"),
        }
    })
    .await
}

/// Serves until SIGTERM or SIGINT, on the bus and on the private socket
/// at `private` if any, then lets the mutation in progress finish before
/// returning.
pub async fn serve(
    core: Arc<Core>,
    bus: &str,
    private: Option<&Path>,
    auth: Authorizer,
) -> Result<(), String> {
    // Handlers first: a SIGTERM that comes as soon as READY=1 is out (a
    // quick `systemctl stop`, a test) must stop cleanly, not kill.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let builder = match bus {
        "system" => zbus::connection::Builder::system(),
        "session" => zbus::connection::Builder::session(),
        addr => zbus::connection::Builder::address(addr),
    }
    .map_err(|e| format!("bus {bus}: {e}"))?;
    let conn =
        builder.build().await.map_err(|e| format!("cannot connect to the {bus} bus: {e}"))?;
    let links = Arc::new(Mutex::new(BTreeMap::new()));
    let manager =
        Manager { core: core.clone(), auth, links: links.clone(), bus: None, peer_uid: None };
    // The objects first, the name after: whoever sees the name can call.
    conn.object_server()
        .at(ROOT_PATH, manager.clone())
        .await
        .map_err(|e| format!("cannot serve {ROOT_PATH}: {e}"))?;
    sync_links(&core, &conn, &links, None).await;
    // Not queued behind another netadmd: owned now, or netadmd stops.
    conn.request_name_with_flags(BUS_NAME, zbus::fdo::RequestNameFlags::DoNotQueue.into())
        .await
        .map_err(|e| format!("cannot serve {BUS_NAME} on the {bus} bus: {e}"))?;
    // Bound only once the name is ours: a second netadmd stops at the
    // name and never takes the first one's socket.
    let private = match private {
        Some(path) => {
            let listener = bind_private(path)?;
            tokio::spawn(serve_private(listener, Manager { bus: Some(conn.clone()), ..manager }));
            tracing::info!("serving {BUS_NAME} peer to peer on {}", path.display());
            Some(Private(path.to_owned()))
        }
        None => None,
    };
    tokio::spawn(watch_checkpoint(core.clone(), conn.clone(), links.clone()));
    tokio::spawn(watch_kernel_ports(core.clone(), conn.clone(), links.clone()));
    tracing::info!("serving {BUS_NAME} on the {bus} bus");
    crate::notify::notify(crate::notify::NotifyState::Ready);

    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("stopping: waiting for the mutation in progress");
    crate::notify::notify(crate::notify::NotifyState::Stopping);
    drop(private);
    // Wait for a mutation in progress: it persists before it returns.
    tokio::task::spawn_blocking(move || core.quiesce()).await.map_err(|e| e.to_string())?;
    drop(conn);
    Ok(())
}

/// The private socket's path, removed when netadmd stops serving on it
/// (a client then finds no socket and takes the bus).
struct Private(PathBuf);

impl Drop for Private {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Binds the private socket at `path`, mode 0600: only root (or
/// netadmd's own user) may connect. A socket left there by a netadmd that
/// died is replaced; anything else there is refused.
fn bind_private(path: &Path) -> Result<tokio::net::UnixListener, String> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
    let what = |e: &dyn std::fmt::Display| format!("private socket {}: {e}", path.display());
    // Its directory is systemd's RuntimeDirectory under the unit; made
    // here for a netadmd started by hand.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| what(&e))?;
    match std::fs::symlink_metadata(path) {
        // A dead netadmd's: the rename below replaces it.
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => return Err(what(&"something that is not a socket is there")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(what(&e)),
    }
    // Bound in a directory of its own that only netadmd can enter, so no
    // other user can connect before the socket is closed to them, then
    // renamed into place: the socket at `path` is open to root only from
    // the moment it is there (and the process's umask is left alone).
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| what(&e))?;
    }
    std::fs::DirBuilder::new().mode(0o700).create(&tmp).map_err(|e| what(&e))?;
    let at = tmp.join(&name);
    let bound = std::os::unix::net::UnixListener::bind(&at).and_then(|l| {
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&at, path)?;
        Ok(l)
    });
    let _ = std::fs::remove_dir_all(&tmp);
    let listener = bound.map_err(|e| what(&e))?;
    listener.set_nonblocking(true).map_err(|e| what(&e))?;
    tokio::net::UnixListener::from_std(listener).map_err(|e| what(&e))
}

/// Serves `manager` to each client of the private socket on a peer-to-peer
/// connection of its own, as long as the client keeps it. An accept that
/// fails (out of file descriptors) would fail again at once: netadmd then
/// stops listening rather than spin, and clients, refused, take the bus.
async fn serve_private(listener: tokio::net::UnixListener, manager: Manager) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::error!(
                    "private socket: accept: {e}; no longer served, clients take the bus"
                );
                return;
            }
        };
        let peer = crate::peer::PeerStream::new(stream);
        let manager = Manager { peer_uid: peer.uid(), ..manager.clone() };
        tokio::spawn(async move {
            let conn = async {
                zbus::connection::Builder::socket(peer)
                    .server(zbus::Guid::generate())?
                    .p2p()
                    .serve_at(ROOT_PATH, manager)?
                    .build()
                    .await
            };
            match conn.await {
                Ok(conn) => conn.closed().await,
                Err(e) => tracing::warn!("private socket: a client's handshake failed: {e}"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    use std::os::unix::net::{UnixListener, UnixStream};

    use super::bind_private;

    #[tokio::test]
    async fn the_private_socket_replaces_a_dead_ones_and_is_root_only_with_nothing_left_beside_it()
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("private");
        std::fs::create_dir(dir.path().join("run")).unwrap();
        // A socket a netadmd that died left behind: there, nobody listening.
        drop(UnixListener::bind(&path).unwrap());
        assert!(UnixStream::connect(&path).is_err());

        let listener = bind_private(&path).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let _client = UnixStream::connect(&path).expect("the new socket takes connections");
        listener.accept().await.expect("and its listener hears them");
        let left: Vec<_> = std::fs::read_dir(dir.path().join("run"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["private"], "the directory it was bound in is gone");
    }

    #[tokio::test]
    async fn something_that_is_not_a_socket_at_the_path_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private");
        std::fs::write(&path, "an operator's file").unwrap();
        let e = bind_private(&path).unwrap_err();
        assert!(e.contains("not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "an operator's file");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

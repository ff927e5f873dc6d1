//! The datapath wing: what sends and receives over the ports once the
//! rings run — each aggregation's transmit path and its members, LACP on
//! the ports of aggregations that run it, `maxbw` and `priority`, and the
//! traffic generators — kept in step with the running configuration
//! after every change ([`Datapath::sync`]).

pub(crate) mod lacp;
pub(crate) mod qos;
pub(crate) mod traffic;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use netadm_datapath::Tx;
use netadm_datapath::tx::{AggrTx, HashLayers, Member, PortTx};
use netadm_model::{AggrLayer, LinkName};

use crate::ports::{Hardware, Ports};
use crate::timing::Timing;
use crate::view::{Link, View};
use crate::{CoreError, TrafficRow};

/// Each aggregation's transmit path, by name.
pub(crate) type AggrTxs = Mutex<BTreeMap<LinkName, Arc<AggrTx>>>;

/// The senders and what they send over.
pub(crate) struct Datapath {
    /// Shared with the LACP thread.
    hw: Arc<Hardware>,
    traffic: traffic::Traffic,
    /// LACP on the ports of aggregations that run it.
    lacp: lacp::Lacp,
    /// Each aggregation's transmit path, kept in step with its members
    /// (shared with the LACP thread, as `hw`).
    aggr_tx: Arc<AggrTxs>,
    /// `maxbw` and `priority` of the links senders use.
    qos: qos::Qos,
}

impl Datapath {
    /// The datapath over `hw`: LACP hears every port's slow frames, and a
    /// member LACP lets distribute, or stops, has its flows moved.
    pub(crate) fn start(hw: Arc<Hardware>) -> Result<Self, CoreError> {
        let dp = Self {
            hw,
            traffic: traffic::Traffic::default(),
            lacp: lacp::Lacp::start(),
            aggr_tx: Arc::default(),
            qos: qos::Qos::default(),
        };
        for p in dp.hw.ports() {
            p.classifier.set_slow_handler(Some(dp.lacp.receiver(p.device.as_str())));
        }
        // A member LACP lets distribute, or stops, has its flows moved,
        // drained first, on a thread of their own: a drain never holds up
        // the LACP thread's rounds. It ends when the LACP thread's hook (the
        // sender) goes with the core; weak: the core owns both.
        let (kick, kicked) = std::sync::mpsc::channel::<()>();
        let (hw, txs) = (Arc::downgrade(&dp.hw), Arc::downgrade(&dp.aggr_tx));
        std::thread::Builder::new()
            .name("netadm-resettle".into())
            .spawn(move || {
                while kicked.recv().is_ok() {
                    while kicked.try_recv().is_ok() {}
                    let (Some(hw), Some(txs)) = (hw.upgrade(), txs.upgrade()) else { return };
                    resettle(&hw, &txs);
                }
            })
            .map_err(|e| CoreError::internal(format!("cannot start the resettle thread: {e}")))?;
        dp.lacp.on_change(Box::new(move || {
            let _ = kick.send(());
        }));
        Ok(dp)
    }

    /// The LACP actor state of port `device`, while LACP runs on it.
    pub(crate) fn lacp_state(&self, device: &str) -> Option<u8> {
        self.lacp.actor_state(device)
    }

    fn layers(policy: netadm_model::AggrPolicy) -> HashLayers {
        HashLayers {
            l2: policy.contains(AggrLayer::L2),
            l3: policy.contains(AggrLayer::L3),
            l4: policy.contains(AggrLayer::L4),
        }
    }

    fn members(&self, v: &View<'_>, aggr: &LinkName) -> Vec<Member> {
        let lacp_on =
            v.st.aggr.get(aggr).is_some_and(|a| a.lacp_mode != netadm_model::LacpMode::Off);
        v.ports_under(&Link::Aggr(aggr.clone()))
            .iter()
            .filter_map(|d| self.hw.port(d.as_str()))
            .map(|p| {
                let engine = p.engine.clone();
                let carrier = carrier_of(p);
                let distributing = self.lacp.flag(p.device.as_str());
                Member {
                    name: p.device.to_string(),
                    tx: Arc::new(PortTx::new(engine, p.tx_map.clone())),
                    // A member without carrier carries nothing; with LACP,
                    // only once it is distributing.
                    usable: Arc::new(move || {
                        carrier()
                            && (!lacp_on || distributing.load(std::sync::atomic::Ordering::Acquire))
                    }),
                }
            })
            .collect()
    }

    /// Runs LACP on exactly the ports of aggregations whose mode is not off.
    fn configure_lacp(&self, v: &View<'_>) {
        use netadm_model::{LacpMode, LacpTimer};
        let mut cfgs = Vec::new();
        for (name, a) in &v.st.aggr {
            if a.lacp_mode == LacpMode::Off {
                continue;
            }
            let ports: Vec<_> = v
                .ports_under(&Link::Aggr(name.clone()))
                .iter()
                .filter_map(|d| self.hw.port(d.as_str()))
                .collect();
            let system =
                a.mac.map(|m| m.0).or_else(|| ports.first().map(|p| p.mac.0)).unwrap_or_default();
            // The key names the aggregation within the system.
            let key = name
                .as_str()
                .bytes()
                .fold(0u16, |h, b| h.wrapping_mul(31).wrapping_add(u16::from(b)))
                | 1;
            for (i, p) in ports.iter().enumerate() {
                cfgs.push(lacp::PortCfg {
                    device: p.device.to_string(),
                    system,
                    key,
                    number: i as u16 + 1,
                    mode: netadm_datapath::lacp::Mode {
                        active: a.lacp_mode == LacpMode::Active,
                        short: a.lacp_timer == LacpTimer::Short,
                    },
                    mac: p.mac.0,
                    engine: p.engine.clone(),
                    carrier: carrier_of(p),
                });
            }
        }
        self.lacp.configure(cfgs);
    }

    /// A link's transmit path and source MAC: an aggregation's hashed path,
    /// a VNIC's own ring group, or its port's primary rings. `None` when
    /// none of its ports runs.
    pub(crate) fn link_tx(
        &self,
        ports: &Ports,
        v: &View<'_>,
        l: &Link,
    ) -> Option<(Arc<dyn Tx>, [u8; 6])> {
        let running: Vec<_> = v
            .ports_under(l)
            .into_iter()
            .filter_map(|d| self.hw.port(d.as_str()))
            .filter(|p| p.rings_started() > 0)
            .collect();
        let first = running.first()?;
        let mac = match l {
            Link::Vnic(n) => v.st.vnic[n].mac.0,
            Link::Aggr(n) => v.st.aggr[n].mac.map_or(first.mac.0, |m| m.0),
            Link::Phys(_) | Link::Etherstub(_) => first.mac.0,
        };
        let group = match l {
            Link::Vnic(n) => ports.group_of(n),
            _ => None,
        };
        let tx: Arc<dyn Tx> = match (l, group) {
            (Link::Aggr(n), _) => self.aggr_tx(v, n),
            // A VNIC with a ring group sends over its own rings.
            (Link::Vnic(_), Some(g)) => Arc::new(PortTx::new(first.engine.clone(), g.tx.clone())),
            _ => Arc::new(PortTx::new(first.engine.clone(), first.tx_map.clone())),
        };
        Some((self.qos.shaped(v, l, tx), mac))
    }

    /// Link `l`'s `maxbw` and `priority` as the datapath enforces them.
    pub(crate) fn link_qos(&self, v: &View<'_>, l: &Link) -> Arc<netadm_datapath::qos::LinkQos> {
        self.qos.link(v, l)
    }

    /// What each flow carried on the datapath, by name.
    pub(crate) fn flow_counts(
        &self,
    ) -> std::collections::BTreeMap<netadm_model::FlowName, netadm_datapath::flow::FlowCounts> {
        self.qos.flow_counts()
    }

    /// The aggregation's transmit path, created on first use.
    pub(crate) fn aggr_tx(&self, v: &View<'_>, aggr: &LinkName) -> Arc<AggrTx> {
        let mut m = self.aggr_tx.lock().unwrap();
        m.entry(aggr.clone())
            .or_insert_with(|| {
                Arc::new(AggrTx::new(Self::layers(v.st.aggr[aggr].policy), self.members(v, aggr)))
            })
            .clone()
    }

    /// Brings the datapath in step with the running configuration after a
    /// change: aggregation members (added ones join) and policies, and
    /// generators on links that no longer exist stopped.
    pub(crate) fn sync(&self, v: &View<'_>) {
        let st = v.st;
        self.configure_lacp(v);
        self.qos.sync(v);
        self.regroup(v, |_, _| true);
        self.aggr_tx.lock().unwrap().retain(|name, _| st.aggr.contains_key(name));
        self.traffic.forget_gone(v);
    }

    /// Before a change executes: members an aggregation is about to lose
    /// stop carrying its flows first, so nothing is in flight on a port
    /// when its rings stop (break after make).
    pub(crate) fn presync(&self, next: &View<'_>) {
        self.regroup(next, |name, tx| tx.member_names().contains(&name.to_owned()));
    }

    /// `start-traffic` on `link` of `v`, the running configuration (held
    /// still by the caller).
    pub(crate) fn start_traffic(
        &self,
        ports: &Ports,
        v: &View<'_>,
        link: &str,
        offer: traffic::Offer,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        self.traffic.start(v, |l| self.link_tx(ports, v, l), link, offer, t)
    }

    /// `stop-traffic` on `link`.
    pub(crate) fn stop_traffic(&self, link: &str, t: &mut Timing) -> Result<(), CoreError> {
        self.traffic.stop(link, t)
    }

    /// `show-traffic`.
    pub(crate) fn show_traffic(&self) -> Vec<TrafficRow> {
        self.traffic.rows()
    }

    /// See [`crate::Core::wait_traffic_sent`].
    pub(crate) fn wait_traffic_sent(
        &self,
        link: &str,
        n: u64,
        within: std::time::Duration,
    ) -> Option<bool> {
        self.traffic.wait_sent(link, n, within)
    }

    /// `cut-cable` / `plug-cable`: drops or restores the carrier of a port's
    /// wire (both ends of a cable). Not persisted: it is the machine's
    /// state, not configuration.
    pub(crate) fn set_carrier(
        &self,
        v: &View<'_>,
        link: &str,
        up: bool,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        {
            let Link::Phys(d) = v.require(link)? else {
                return Err(CoreError::invalid_argument(format!(
                    "{link} is not a physical link: it has no wire"
                )));
            };
            let Some(p) = self.hw.port(d.as_str()) else {
                return Err(CoreError::not_supported(format!(
                    "{link} is a kernel port: its carrier is its cable's, not netadm's to cut"
                )));
            };
            p.device_handle().set_carrier(up);
            if let netadm_config::Wire::Cable { peer } = &p.wire
                && let Some(q) = self.hw.port(peer.as_str())
            {
                q.device_handle().set_carrier(up);
                t.note(format!("the cable to {peer} is {}", if up { "plugged in" } else { "cut" }));
            }
            t.phase("carrier");
            // The flows move now, the carrier's member drained first (with
            // LACP a member comes back once it distributes again: the
            // LACP thread, kicked below, moves its flows then).
            for note in resettle(&self.hw, &self.aggr_tx) {
                t.note(note);
            }
            t.phase("resettle");
            self.lacp.kick();
            Ok(())
        }
    }

    /// Sets each aggregation's members to those `v` gives it that `keep`
    /// accepts; senders on the ports involved are paused and drained while
    /// the buckets move, so no flow is reordered.
    fn regroup(&self, v: &View<'_>, keep: impl Fn(&str, &AggrTx) -> bool) {
        let m = self.aggr_tx.lock().unwrap();
        for (name, tx) in m.iter() {
            let members: Vec<Member> = match v.st.aggr.get(name) {
                Some(a) => {
                    tx.set_layers(Self::layers(a.policy));
                    self.members(v, name).into_iter().filter(|x| keep(&x.name, tx)).collect()
                }
                None => vec![],
            };
            let mut ports: Vec<String> = members.iter().map(|x| x.name.clone()).collect();
            let was = tx.member_names();
            if ports == was {
                continue;
            }
            ports.extend(was);
            held_and_drained(&self.hw, &ports, || tx.set_members(members));
        }
    }
}

/// Longest a move waits for its ports to drain while they still send
/// what was queued before it (a drain deadline is 1 s).
const MOVE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Moves the flows of every aggregation whose members' usability (carrier,
/// LACP distributing) is not what its flows are placed by: senders on its
/// members are paused and what they sent is delivered first, so no frame
/// overtakes an earlier one of its flow. Until then a member that came
/// back carries nothing new and one that went away holds its flows.
/// Returns what moved, with how long senders were held.
pub(crate) fn resettle(hw: &Hardware, aggr_tx: &AggrTxs) -> Vec<String> {
    let m = aggr_tx.lock().unwrap();
    let mut notes = Vec::new();
    for (name, tx) in m.iter() {
        if !tx.placement_stale() {
            continue;
        }
        let t0 = Instant::now();
        let moved = held_and_drained(hw, &tx.member_names(), || tx.adopt_usable());
        let held = t0.elapsed().as_micros();
        for (member, usable) in moved {
            let to = if usable { "back to" } else { "away from" };
            notes.push(format!("{name}: flows moved {to} {member}; senders held {held} us"));
        }
    }
    notes
}

/// Runs `f` with the senders on the ports named `ports` paused and what
/// they sent delivered (a cable's far end included), then lets them go
/// on. A drain that times out while its port is still sending (a slow
/// wire, a device thread kept off the CPU) is waited again, until
/// [`MOVE_DEADLINE`]; one that makes no progress is let be, and the move
/// goes ahead.
fn held_and_drained<T>(hw: &Hardware, ports: &[String], f: impl FnOnce() -> T) -> T {
    let ports: Vec<_> =
        hw.ports().iter().filter(|p| ports.iter().any(|n| p.device.as_str() == n)).collect();
    for p in &ports {
        p.tx_map.pause();
    }
    let deadline = Instant::now() + MOVE_DEADLINE;
    for p in &ports {
        let sent = || netadm_nic::Nic::hw_stats(&**p.engine.nic()).tx_frames;
        let mut before = sent();
        while crate::ports::hitless::drain_to_peer(hw, p).is_err()
            && sent() != before
            && Instant::now() < deadline
        {
            before = sent();
        }
    }
    let r = f();
    for p in &ports {
        p.tx_map.resume();
    }
    r
}

/// Reads a port's carrier.
fn carrier_of(p: &crate::ports::Port) -> Arc<dyn Fn() -> bool + Send + Sync> {
    let nic = p.nic().clone();
    Arc::new(move || nic.device().is_some_and(|d| d.carrier()))
}

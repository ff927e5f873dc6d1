//! Traffic generators on links, and per-link counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::{Report, StatsRow, TrafficRow};
use netadm_datapath::frame::HEADER;
use netadm_datapath::tx::{AggrTx, HashLayers, Member, PortTx};
use netadm_datapath::{GenConfig, Generator, Stream, Tx};
use netadm_model::AggrLayer;
use netadm_model::LinkName;

use crate::hw::Hardware;
use crate::links::{Link, View};
use crate::{Core, CoreError, Timing};

/// Each aggregation's transmit path, by name.
pub(crate) type AggrTxs = Mutex<BTreeMap<LinkName, Arc<AggrTx>>>;

/// Most flows a stream may have.
const MAX_FLOWS: u32 = 4096;

struct Entry {
    stream: Arc<Stream>,
    generator: Option<Generator>,
    rate: u64,
    size: u32,
}

/// The generators, by the link they send from.
#[derive(Default)]
pub(crate) struct Traffic {
    entries: Mutex<BTreeMap<LinkName, Entry>>,
    next_id: AtomicU16,
}

impl Core {
    /// `start-traffic`: a generator on `link`, replacing a stopped one.
    pub fn start_traffic(
        &self,
        link: &str,
        rate: u64,
        size: u32,
        flows: u32,
    ) -> Result<Report, CoreError> {
        let mut t = Timing::new();
        let res = self.start_traffic_inner(link, rate, size, flows, &mut t);
        let total = t.started.elapsed().as_micros() as u64;
        let res = res.map(|()| t.finish("start-traffic"));
        self.record(&format!("start-traffic {link}"), res.as_ref(), total);
        res
    }

    fn start_traffic_inner(
        &self,
        link: &str,
        rate: u64,
        size: u32,
        flows: u32,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        let name: LinkName = link.parse()?;
        // Serialised with mutations: the link and its rings stay as they
        // are read here until the generator runs (a concurrent delete
        // would otherwise pull the rings from under it).
        let _m = self.lock_mutation()?;
        let st = self.running();
        let v = View { hw: self.hardware(), st: &st };
        let l = v.require(link)?;
        let mtu = v.mtu(&l);
        let max = mtu + 14;
        // 60: the smallest Ethernet frame without FCS (and > the header).
        const MIN: u32 = 60;
        const _: () = assert!(HEADER as u32 <= MIN);
        if !(MIN..=max).contains(&size) {
            return Err(CoreError::invalid_value(format!(
                "frame size {size}: {link} carries {MIN}..={max} bytes (mtu {mtu})"
            )));
        }
        if flows == 0 || flows > MAX_FLOWS {
            return Err(CoreError::invalid_value(format!("flows {flows}: 1..={MAX_FLOWS}")));
        }
        if rate > 100_000_000 {
            return Err(CoreError::invalid_value(format!("rate {rate} pps: at most 100000000")));
        }
        let ports: Vec<_> = v
            .ports_under(&l)
            .into_iter()
            .filter_map(|d| self.hardware().port(d.as_str()))
            .collect();
        let running: Vec<_> = ports.iter().filter(|p| p.rings_started() > 0).collect();
        if running.is_empty() {
            return Err(CoreError::busy(format!(
                "{link} has no running rings; plumb it first (create-if, create-vnic or create-aggr)"
            )));
        }
        let (tx, src) = self
            .link_tx(&v, &l)
            .ok_or_else(|| CoreError::busy(format!("{link}: its rings stopped meanwhile")))?;
        let mut entries = self.traffic.entries.lock().unwrap();
        if entries.get(&name).is_some_and(|e| e.generator.is_some()) {
            return Err(CoreError::exists(format!(
                "traffic is already running on {link}; stop-traffic -l {link} first"
            )));
        }
        if let Some(old) = entries.remove(&name) {
            self.hardware().streams().remove(old.stream.id());
        }
        // The next id no stream has (ids are 16 bits on the wire and wrap).
        let streams = self.hardware().streams();
        let id = (0..=u16::MAX)
            .map(|_| self.traffic.next_id.fetch_add(1, Ordering::Relaxed).wrapping_add(1))
            .find(|&id| id != 0 && streams.get(id).is_none())
            .ok_or_else(|| CoreError::busy("every traffic stream id is in use"))?;
        let stream = Arc::new(Stream::new(id, flows as u16));
        self.hardware().streams().insert(stream.clone());
        let cfg = GenConfig {
            // A locally administered address nobody has: the reflector
            // swaps it back, a cable delivers it to the far port.
            dst: [0x02, 0x08, 0x20, 0xff, 0xff, 0xfe],
            src,
            rate_pps: rate,
            size: size as usize,
            batch: 32,
            limit: None,
        };
        let generator = Generator::start(cfg, stream.clone(), tx);
        entries.insert(name, Entry { stream, generator: Some(generator), rate, size });
        t.phase("start");
        t.note(format!(
            "stream {id}: {flows} flow(s) of {size}-byte frames at {}",
            if rate == 0 { "line rate".to_owned() } else { format!("{rate} pps") }
        ));
        Ok(())
    }

    /// `stop-traffic`: stops the generator on `link`; its books stay.
    pub fn stop_traffic(&self, link: &str) -> Result<Report, CoreError> {
        let mut t = Timing::new();
        let res = (|| {
            let name: LinkName = link.parse()?;
            // Taken out under the lock, stopped (joined) outside it, so
            // show-traffic never waits for a generator thread to end.
            let g = self
                .traffic
                .entries
                .lock()
                .unwrap()
                .get_mut(&name)
                .and_then(|e| e.generator.take())
                .ok_or_else(|| CoreError::not_found(format!("no traffic is running on {link}")))?;
            g.stop();
            t.phase("stop");
            Ok(())
        })();
        let total = t.started.elapsed().as_micros() as u64;
        let res = res.map(|()| t.finish("stop-traffic"));
        self.record(&format!("stop-traffic {link}"), res.as_ref(), total);
        res
    }

    /// `show-traffic`.
    pub fn show_traffic(&self) -> Vec<TrafficRow> {
        let entries = self.traffic.entries.lock().unwrap();
        entries
            .iter()
            .map(|(link, e)| {
                let s = e.stream.stats();
                TrafficRow {
                    link: link.to_string(),
                    running: e.generator.is_some(),
                    rate: e.rate,
                    size: e.size,
                    flows: e.stream.flows(),
                    sent: s.sent,
                    received: s.received,
                    lost: s.lost,
                    reordered: s.reordered,
                    duplicated: s.duplicated,
                    latency_avg_us: s.latency_avg_ns as f64 / 1e3,
                    latency_p99_us: s.latency_p99_ns as f64 / 1e3,
                    latency_max_us: s.latency_max_ns as f64 / 1e3,
                    pause_max_us: s.pause_max_ns as f64 / 1e3,
                    paused_us: s.paused_ns as f64 / 1e3,
                }
            })
            .collect()
    }

    /// Traffic counters of every physical link and aggregation.
    pub fn show_stats(&self) -> Vec<StatsRow> {
        let st = self.running();
        let v = View { hw: self.hardware(), st: &st };
        // Ports and aggregations only: VNICs have no counters of their own
        // here, and listing them would make this cost every VNIC.
        let ports = self.hardware().ports().iter();
        let ports = ports.map(|p| (v.phys_name(&p.device), Link::Phys(p.device.clone())));
        ports
            .chain(st.aggr.keys().map(|n| (n.clone(), Link::Aggr(n.clone()))))
            .map(|(name, l)| {
                let mut s = StatsRow {
                    link: name.to_string(),
                    ipackets: 0,
                    rbytes: 0,
                    opackets: 0,
                    obytes: 0,
                    idrops: 0,
                    odrops: 0,
                };
                for d in v.ports_under(&l) {
                    let Some(p) = self.hardware().port(d.as_str()) else { continue };
                    for r in p.engine.all_rings() {
                        if let Ok(i) = p.engine.info(r) {
                            s.ipackets += i.rx_frames;
                            s.rbytes += i.rx_bytes;
                            s.opackets += i.tx_frames;
                            s.obytes += i.tx_bytes;
                        }
                    }
                    let hw = netadm_nic::Nic::hw_stats(&*p.driver.nic());
                    // Tagged frames for a VLAN nothing here is on, too.
                    s.idrops += hw.rx_dropped + p.classifier.vlan_dropped();
                    s.odrops += hw.wire_dropped;
                }
                s
            })
            .collect()
    }
}

impl Core {
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
            .filter_map(|d| self.hardware().port(d.as_str()))
            .map(|p| {
                let engine = p.engine.clone();
                let carrier = carrier_of(&p.driver);
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
                .filter_map(|d| self.hardware().port(d.as_str()))
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
                cfgs.push(crate::lacp::PortCfg {
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
                    carrier: carrier_of(&p.driver),
                });
            }
        }
        self.lacp.configure(cfgs);
    }

    /// A link's transmit path and source MAC: an aggregation's hashed path,
    /// a VNIC's own ring group, or its port's primary rings. `None` when
    /// none of its ports runs.
    pub(crate) fn link_tx(&self, v: &View<'_>, l: &Link) -> Option<(Arc<dyn Tx>, [u8; 6])> {
        let running: Vec<_> = v
            .ports_under(l)
            .into_iter()
            .filter_map(|d| self.hardware().port(d.as_str()))
            .filter(|p| p.rings_started() > 0)
            .collect();
        let first = running.first()?;
        let mac = match l {
            Link::Vnic(n) => v.st.vnic[n].mac.0,
            Link::Aggr(n) => v.st.aggr[n].mac.map_or(first.mac.0, |m| m.0),
            Link::Phys(_) | Link::Etherstub(_) => first.mac.0,
        };
        let group = match l {
            Link::Vnic(n) => self.groups.lock().unwrap().get(n).cloned(),
            _ => None,
        };
        let tx: Arc<dyn Tx> = match (l, group) {
            (Link::Aggr(n), _) => self.aggr_tx(v, n),
            // A VNIC with a ring group sends over its own rings.
            (Link::Vnic(_), Some(g)) => Arc::new(PortTx::new(first.engine.clone(), g.tx.clone())),
            _ => Arc::new(PortTx::new(first.engine.clone(), first.tx_map.clone())),
        };
        Some((self.shaped(v, l, tx), mac))
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
    pub(crate) fn sync_datapath(&self) {
        let st = self.running();
        let v = View { hw: self.hardware(), st: &st };
        self.configure_lacp(&v);
        self.sync_qos(&v);
        self.sync_vlan_filters(&v, false);
        self.regroup(&v, |_, _| true);
        self.aggr_tx.lock().unwrap().retain(|name, _| st.aggr.contains_key(name));
        let mut entries = self.traffic.entries.lock().unwrap();
        // Links that are gone take their generator, books and stream with
        // them: nothing grows with links that no longer exist.
        let gone: Vec<LinkName> =
            entries.keys().filter(|l| v.resolve(l.as_str()).is_none()).cloned().collect();
        for link in gone {
            if let Some(mut e) = entries.remove(&link) {
                if let Some(g) = e.generator.take() {
                    g.stop();
                }
                self.hardware().streams().remove(e.stream.id());
            }
        }
    }

    /// Before a change executes: members an aggregation is about to lose
    /// stop carrying its flows first, so nothing is in flight on a port
    /// when its rings stop (break after make).
    pub(crate) fn presync_datapath(&self, next: &netadm_config::LinkState) {
        let v = View { hw: self.hardware(), st: next };
        self.sync_vlan_filters(&v, true);
        self.regroup(&v, |name, tx| tx.member_names().contains(&name.to_owned()));
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
            held_and_drained(self.hardware(), &ports, || tx.set_members(members));
        }
    }

    /// `cut-cable` / `plug-cable`: drops or restores the carrier of a port's
    /// wire (both ends of a cable). Not persisted: it is the machine's
    /// state, not configuration.
    pub fn set_carrier(&self, link: &str, up: bool) -> Result<Report, CoreError> {
        let mut t = Timing::new();
        let res = (|| {
            let st = self.running();
            let v = View { hw: self.hardware(), st: &st };
            let Link::Phys(d) = v.require(link)? else {
                return Err(CoreError::invalid_argument(format!(
                    "{link} is not a physical link: it has no wire"
                )));
            };
            let p = self.hardware().port(d.as_str()).expect("resolved");
            p.device_handle().set_carrier(up);
            if let netadm_config::Wire::Cable { peer } = &p.wire
                && let Some(q) = self.hardware().port(peer.as_str())
            {
                q.device_handle().set_carrier(up);
                t.note(format!("the cable to {peer} is {}", if up { "plugged in" } else { "cut" }));
            }
            t.phase("carrier");
            // The flows move now, the carrier's member drained first (with
            // LACP a member comes back once it distributes again: the
            // LACP thread, kicked below, moves its flows then).
            for note in resettle(self.hardware(), &self.aggr_tx) {
                t.note(note);
            }
            t.phase("resettle");
            self.lacp.kick();
            Ok(())
        })();
        let total = t.started.elapsed().as_micros() as u64;
        let op = if up { "plug-cable" } else { "cut-cable" };
        let res = res.map(|()| t.finish(op));
        self.record(&format!("{op} {link}"), res.as_ref(), total);
        res
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
        while crate::hitless::drain_to_peer(hw, p).is_err()
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
fn carrier_of(d: &crate::Driver) -> Arc<dyn Fn() -> bool + Send + Sync> {
    let d = d.clone();
    Arc::new(move || match &d {
        crate::Driver::I40e(x) => x.device().carrier(),
        crate::Driver::Atl1c(x) => x.device().carrier(),
    })
}

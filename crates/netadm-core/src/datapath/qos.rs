//! `maxbw` and `priority` on the datapath: each link's limit and priority
//! (`netadm_datapath::qos::LinkQos`), its flows' (`Flow`), and each
//! port's or aggregation's priorities (`PortQos`), shared by every sender
//! on them (TAP readers, generators) and changed in place when the
//! configuration changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use netadm_config::{FlowConf, LinkProps};
use netadm_datapath::Tx;
use netadm_datapath::flow::{Flow, FlowCounts, FlowMatch};
use netadm_datapath::qos::{LinkQos, PortQos, ShapedTx};
use netadm_model::{FlowAttrs, FlowName, PRIORITIES, PropName, PropValue};

use crate::view::{Link, View};

#[derive(Default)]
pub(crate) struct Qos {
    links: Mutex<HashMap<Link, Arc<LinkQos>>>,
    ports: Mutex<HashMap<Link, Arc<PortQos>>>,
    /// Every flow by name, kept while it is configured (with what it
    /// counted) and made anew when its attributes change.
    flows: Mutex<BTreeMap<FlowName, Arc<Flow>>>,
}

/// `maxbw` (b/s, 0: none) and priority (0 low .. 2 high, `default` when
/// unset) in properties `props`.
pub(crate) fn limits(props: Option<&LinkProps>, default: usize) -> (u64, usize) {
    let maxbw = match props.and_then(|p| p.get(&PropName::Maxbw)) {
        Some(PropValue::Bandwidth(b)) => *b,
        _ => 0,
    };
    let prio = props
        .and_then(|p| p.get(&PropName::Priority))
        .and_then(|p| PRIORITIES.iter().position(|x| Some(*x) == p.as_text()))
        .unwrap_or(default);
    (maxbw, prio)
}

/// A link's `maxbw` (b/s, 0: none) and priority (0 low .. 2 high).
pub(crate) fn settings(v: &View<'_>, l: &Link) -> (u64, usize) {
    let props: LinkProps = [PropName::Maxbw, PropName::Priority]
        .into_iter()
        .filter_map(|p| v.prop(l, p).map(|x| (p, x)))
        .collect();
    limits(Some(&props), PRIORITIES.len() - 1)
}

/// A flow's priority when none is set: flowadm's, `medium`.
pub(crate) const FLOW_PRIORITY: usize = 1;

/// Link `l`'s flows under `v`, in the order a frame is matched against
/// them: the most specific first, then by name.
pub(crate) fn flows_on<'a>(v: &View<'a>, l: &Link) -> Vec<(&'a FlowName, &'a FlowConf)> {
    let st = v.st;
    let mut mine: Vec<_> =
        st.flow.iter().filter(|(_, c)| v.resolve(c.link.as_str()).as_ref() == Some(l)).collect();
    in_match_order(&mut mine);
    mine
}

/// One link's flows put in the order a frame is matched against them.
fn in_match_order(flows: &mut [(&FlowName, &FlowConf)]) {
    flows.sort_by_key(|(n, c)| (std::cmp::Reverse(c.attrs.specificity()), (*n).clone()));
}

/// What a flow's attributes match, as the datapath matches it.
fn matcher(a: &FlowAttrs) -> FlowMatch {
    let net = |p: Option<netadm_model::IpPrefix>| p.map(|p| (p.addr, p.len));
    FlowMatch {
        proto: a.transport.map(|t| t.protocol()),
        local: net(a.local_ip),
        remote: net(a.remote_ip),
        local_port: a.local_port,
        remote_port: a.remote_port,
        dsfield: a.dsfield.map(|d| (d.value, d.mask)),
    }
}

impl Qos {
    /// Link `l`'s limit and priority, kept in step with the running
    /// configuration ([`Qos::sync`]): what a VNIC over an etherstub sends
    /// through its virtual switch waits on it (`mirror::tap`).
    pub(crate) fn link(&self, v: &View<'_>, l: &Link) -> Arc<LinkQos> {
        let link = {
            let mut m = self.links.lock().unwrap();
            m.entry(l.clone()).or_default().clone()
        };
        let (maxbw, prio) = settings(v, l);
        link.set(maxbw, prio);
        link.set_flows(self.flows_of(v, l));
        link
    }

    /// Link `l`'s flows under `v`, kept or made, each limited as its
    /// properties say, in the order they match.
    fn flows_of(&self, v: &View<'_>, l: &Link) -> Vec<Arc<Flow>> {
        self.made(flows_on(v, l))
    }

    /// The flows of configuration entries `mine` (one link's, in the
    /// order they match), kept or made.
    fn made(&self, mine: Vec<(&FlowName, &FlowConf)>) -> Vec<Arc<Flow>> {
        if mine.is_empty() {
            return vec![];
        }
        let mut flows = self.flows.lock().unwrap();
        mine.into_iter()
            .map(|(n, c)| {
                let m = matcher(&c.attrs);
                let f = flows
                    .entry(n.clone())
                    .or_insert_with(|| Arc::new(Flow::new(n.as_str(), m.clone())));
                if f.matcher != m {
                    *f = Arc::new(Flow::new(n.as_str(), m));
                }
                let (maxbw, prio) = limits(Some(&c.props), FLOW_PRIORITY);
                f.set(maxbw, prio);
                f.clone()
            })
            .collect()
    }

    /// What each flow carried on the datapath, by name.
    pub(crate) fn flow_counts(&self) -> BTreeMap<FlowName, FlowCounts> {
        let flows = self.flows.lock().unwrap();
        flows.iter().map(|(n, f)| (n.clone(), f.counts())).collect()
    }

    /// `tx`, `l`'s transmit path, limited by its `maxbw` and given its
    /// priority on the port or aggregation under it.
    pub(crate) fn shaped(&self, v: &View<'_>, l: &Link, tx: Arc<dyn Tx>) -> Arc<dyn Tx> {
        let link = self.link(v, l);
        let port = v.switch_of(l).map(|p| {
            let q = self.ports.lock().unwrap().entry(p.clone()).or_default().clone();
            q.set_line(line_rate(v, &p));
            q
        });
        Arc::new(ShapedTx::new(tx, link, port))
    }

    /// Brings every link's limit and priority, and every port's line rate,
    /// to the running configuration; forgets links that are gone.
    pub(crate) fn sync(&self, v: &View<'_>) {
        let alive = |l: &Link| v.resolve(v.name_of(l).as_str()).as_ref() == Some(l);
        self.flows.lock().unwrap().retain(|n, _| v.st.flow.contains_key(n));
        // Each flow's link resolved once, not once for every link.
        let mut by_link: HashMap<Link, Vec<(&FlowName, &FlowConf)>> = HashMap::new();
        for (n, c) in &v.st.flow {
            if let Some(l) = v.resolve(c.link.as_str()) {
                by_link.entry(l).or_default().push((n, c));
            }
        }
        let mut links = self.links.lock().unwrap();
        links.retain(|l, _| alive(l));
        for (l, q) in links.iter() {
            let (maxbw, prio) = settings(v, l);
            q.set(maxbw, prio);
            let mut mine = by_link.remove(l).unwrap_or_default();
            in_match_order(&mut mine);
            q.set_flows(self.made(mine));
        }
        drop(links);
        let mut ports = self.ports.lock().unwrap();
        ports.retain(|l, _| alive(l));
        for (l, q) in ports.iter() {
            q.set_line(line_rate(v, l));
        }
    }
}

/// The line rate under link `l`, b/s: its ports' speeds together.
fn line_rate(v: &View<'_>, l: &Link) -> u64 {
    v.ports_under(l).iter().filter_map(|d| v.hw.port(d.as_str())).map(|p| p.speed * 1_000_000).sum()
}

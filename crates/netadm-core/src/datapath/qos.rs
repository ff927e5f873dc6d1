//! `maxbw` and `priority` on the datapath: each link's limit and priority
//! (`netadm_datapath::qos::LinkQos`) and each port's or aggregation's
//! priorities (`PortQos`), shared by every sender on them (TAP readers,
//! generators) and changed in place when the configuration changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use netadm_datapath::Tx;
use netadm_datapath::qos::{LinkQos, PortQos, ShapedTx};
use netadm_model::{PRIORITIES, PropName, PropValue};

use crate::view::{Link, View};

#[derive(Default)]
pub(crate) struct Qos {
    links: Mutex<HashMap<Link, Arc<LinkQos>>>,
    ports: Mutex<HashMap<Link, Arc<PortQos>>>,
}

/// A link's `maxbw` (b/s, 0: none) and priority (0 low .. 2 high).
pub(crate) fn settings(v: &View<'_>, l: &Link) -> (u64, usize) {
    let maxbw = match v.prop(l, PropName::Maxbw) {
        Some(PropValue::Bandwidth(b)) => b,
        _ => 0,
    };
    let prio = v
        .prop(l, PropName::Priority)
        .and_then(|p| PRIORITIES.iter().position(|x| Some(*x) == p.as_text()))
        .unwrap_or(PRIORITIES.len() - 1);
    (maxbw, prio)
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
        link
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
        let mut links = self.links.lock().unwrap();
        links.retain(|l, _| alive(l));
        for (l, q) in links.iter() {
            let (maxbw, prio) = settings(v, l);
            q.set(maxbw, prio);
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

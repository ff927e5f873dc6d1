//! VNIC ring groups on i40e-class ports: a VNIC with `rxrings` (or
//! `txrings`) set gets that many ring pairs of its own, taken from the top
//! of its port's queue pairs, and a hardware MAC filter that steers frames
//! for its MAC to them; its traffic leaves through them. The port's primary
//! group keeps the rings below. A group keeps its rings for as long as the
//! VNIC keeps its size, so creating or deleting another VNIC never moves it.

use std::collections::BTreeMap;
use std::sync::Arc;

use netadm_config::LinkState;
use netadm_datapath::tx::TxMap;
use netadm_model::{LinkName, PropName};

use super::power::Hardware;
use crate::CoreError;
use crate::view::{Link, View};

/// One VNIC's ring group.
#[derive(Clone)]
pub(crate) struct Group {
    /// The port (device) it is on.
    pub device: LinkName,
    /// First ring.
    pub base: u16,
    /// Rings.
    pub count: u16,
    /// MAC filter slot.
    pub slot: u16,
    /// The VNIC's MAC.
    pub mac: [u8; 6],
    /// The rings the VNIC's senders use (empty while it is not running).
    pub tx: Arc<TxMap>,
}

impl Group {
    /// Its rings.
    pub fn rings(&self) -> std::ops::Range<u16> {
        self.base..self.base + self.count
    }
}

/// Ring groups by VNIC.
pub(crate) type Groups = BTreeMap<LinkName, Group>;

/// How many dedicated rings a VNIC asks for (0: none).
pub(crate) fn wanted(v: &View<'_>, vnic: &LinkName) -> u16 {
    rings_asked(v, &Link::Vnic(vnic.clone())).unwrap_or(0)
}

/// The larger of `link`'s `rxrings` and `txrings`, when either is set.
pub(crate) fn rings_asked(v: &View<'_>, link: &Link) -> Option<u16> {
    [PropName::RxRings, PropName::TxRings]
        .into_iter()
        .filter_map(|n| {
            v.props(link)
                .and_then(|m| m.get(&n))
                .and_then(|x| x.as_uint())
                .and_then(|x| u16::try_from(x).ok())
        })
        .max()
}

/// The ring groups `st` calls for: groups that stay keep their rings,
/// new ones are placed first-fit from the top of their port, always
/// leaving the primary group at least one ring.
pub(crate) fn assign(hw: &Hardware, cur: &Groups, st: &LinkState) -> Result<Groups, CoreError> {
    let v = View { hw, st };
    let mut next = Groups::new();
    let mut todo = vec![];
    for (name, conf) in &st.vnic {
        let k = wanted(&v, name);
        if k == 0 {
            continue;
        }
        let Some(Link::Phys(device)) = v.resolve(conf.over.as_str()) else {
            return Err(CoreError::not_supported(format!(
                "rxrings on {name}: a dedicated ring group needs a VNIC directly over a physical port"
            )));
        };
        if hw.port(device.as_str()).is_none_or(|p| p.nic_caps().ring_groups == 0) {
            return Err(CoreError::not_supported(format!(
                "rxrings on {name}: {} has no ring groups",
                conf.over
            )));
        }
        match cur.get(name) {
            Some(g) if g.device == device && g.count == k => {
                next.insert(name.clone(), Group { mac: conf.mac.0, ..g.clone() });
            }
            _ => todo.push((name.clone(), device, k, conf.mac.0)),
        }
    }
    for (name, device, k, mac) in todo {
        let port = hw.port(device.as_str()).expect("resolved");
        let total = port.engine.ring_count();
        let used: Vec<(u16, u16)> = next
            .values()
            .filter(|g| g.device == device)
            .map(|g| (g.base, g.base + g.count))
            .collect();
        let free = |b: u16| used.iter().all(|&(lo, hi)| b + k <= lo || b >= hi);
        let base = (1..=total.saturating_sub(k)).rev().find(|&b| free(b)).ok_or_else(|| {
            CoreError::invalid_value(format!(
                "rxrings {k} on {name}: {device} has no {k} free rings (it has {total}; the primary group keeps at least one)"
            ))
        })?;
        let slots: Vec<u16> =
            next.values().filter(|g| g.device == device).map(|g| g.slot).collect();
        let slot = (0..).find(|s| !slots.contains(s)).expect("a free slot");
        next.insert(
            name,
            Group { device, base, count: k, slot, mac, tx: Arc::new(TxMap::default()) },
        );
    }
    Ok(next)
}

/// Takes a group's traffic off its rings: its senders stop, what its
/// rings hold in flight is delivered, the MAC filter goes (frames for the
/// VNIC fall to the primary group), and what arrived on its rings
/// meanwhile is delivered too. Senders stop before the filter goes: a
/// frame sent after it would land on a primary ring, whose handler may
/// deliver it before an earlier frame of its flow still waiting on the
/// group's rings.
pub(crate) fn unplug(p: &super::power::Port, g: &Group) -> Result<(), netadm_rings::RingError> {
    g.tx.pause();
    let rings: Vec<u16> = g.rings().collect();
    let res = super::hitless::drain(p, &rings)
        .and_then(|()| {
            if p.nic_caps().ring_groups > 0 {
                p.nic().set_mac_filter(g.slot, None)?;
            }
            Ok(())
        })
        .and_then(|()| super::hitless::drain(p, &rings));
    g.tx.set(vec![]);
    g.tx.resume();
    res
}

/// Puts a group's traffic on its rings: filter and senders.
pub(crate) fn plug(p: &super::power::Port, g: &Group) -> Result<(), netadm_rings::RingError> {
    if p.nic_caps().ring_groups > 0 {
        let f = netadm_nic::MacFilter { mac: g.mac, first_queue: g.base, queues: g.count };
        p.nic().set_mac_filter(g.slot, Some(f))?;
    }
    let rings: Vec<u16> = g.rings().collect();
    if g.tx.rings() != rings {
        g.tx.set(rings);
    }
    Ok(())
}

/// Gives VNIC-group rings new buffers. Their groups were unplugged first
/// (drive): filters off, so inbound frames for the VNICs go to the primary
/// group meanwhile; senders waiting; nothing in flight. drive plugs them
/// back afterwards.
pub(crate) fn restart(
    p: &super::power::Port,
    rings: &[u16],
    buf: u32,
) -> Result<netadm_rings::OpReport, netadm_rings::RingError> {
    let t0 = std::time::Instant::now();
    let mut r = p.engine.restart(rings, buf)?;
    r.add_phase("groups", t0.elapsed());
    r.total = t0.elapsed();
    Ok(r)
}

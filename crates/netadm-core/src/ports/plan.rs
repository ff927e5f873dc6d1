//! What each port's rings should be doing under a configuration: a
//! port's [`PortPlan`], derived from the links over it.

use netadm_config::LinkState;
use netadm_model::{PropName, PropValue};
use netadm_nic::buf_size_for_mtu;

use super::groups::Groups;
use super::power::{Hardware, Port};
use crate::view::{Link, View};

/// What a port's rings should be doing under a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortPlan {
    /// Rings run.
    pub(crate) active: bool,
    /// Buffer size they run with.
    pub(crate) buf: u32,
    /// How many rings the primary group runs (rings `0..rings`).
    pub(crate) rings: u16,
    /// VNIC ring groups on the port: (first ring, rings).
    pub(crate) groups: Vec<(u16, u16)>,
    /// Each of the port's interrupt moderation knobs
    /// (`Caps::moderation`, in its order), as configured.
    pub(crate) moderation: Vec<Knob>,
    /// xmit-batch: the port's own, or its aggregation's.
    pub(crate) xmit_batch: bool,
    /// rx-csum: the port's own, or its aggregation's.
    pub(crate) rx_csum: bool,
}

/// One interrupt moderation knob as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Knob {
    /// A fixed value in the property's unit; `None`: the knob's default,
    /// or adaptive.
    pub(crate) value: Option<u32>,
    /// Adaptive: the interrupt handler picks the value from the traffic.
    pub(crate) adaptive: bool,
}

/// Every port's plan under `st`.
pub(crate) fn plans(hw: &Hardware, st: &LinkState, groups: &Groups) -> Vec<PortPlan> {
    let v = View { hw, st };
    let in_use = v.ports_in_use();
    hw.ports().iter().map(|p| plan(&v, p, in_use.contains(&p.device), groups)).collect()
}

/// Port `p`'s plan under `v`.
pub(crate) fn plan(v: &View<'_>, p: &Port, in_use: bool, groups: &Groups) -> PortPlan {
    let link = Link::Phys(p.device.clone());
    let moderation = p
        .nic_caps()
        .moderation
        .iter()
        .map(|k| {
            let value = k.prop.parse::<PropName>().ok().and_then(|n| v.prop(&link, n));
            Knob {
                value: value.as_ref().and_then(PropValue::as_uint).map(|x| x as u32),
                adaptive: k.adaptive && value == Some(PropValue::Adaptive),
            }
        })
        .collect();
    // rxrings/txrings on a port: how many ring pairs run (0 or
    // unset: all of them).
    let all = p.engine.ring_count();
    let want = super::groups::rings_asked(v, &link).filter(|&n| n > 0).map_or(all, |n| n.min(all));
    let mine: Vec<(u16, u16)> =
        groups.values().filter(|g| g.device == p.device).map(|g| (g.base, g.count)).collect();
    // The primary group keeps the rings below the VNICs' groups.
    let want = mine.iter().map(|g| g.0).min().map_or(want, |lo| want.min(lo));
    let name = v.phys_name(&p.device);
    let flag = |n: PropName| {
        let of = |l: &Link| v.prop(l, n).and_then(|x| x.as_bool());
        v.aggr_of(&name)
            .and_then(|a| of(&Link::Aggr(a.clone())))
            .or_else(|| of(&link))
            .unwrap_or(true)
    };
    let xmit_batch = flag(PropName::XmitBatch);
    let rx_csum = flag(PropName::RxCsum);
    PortPlan {
        active: in_use,
        buf: buf_size_for_mtu(v.mtu(&link)),
        rings: want,
        groups: mine,
        moderation,
        xmit_batch,
        rx_csum,
    }
}

/// What each port is doing now (after a partial failure).
pub(crate) fn actual(hw: &Hardware, wanted: &[PortPlan]) -> Vec<PortPlan> {
    hw.ports()
        .iter()
        .zip(wanted)
        .map(|(p, w)| {
            let started = p.rings_started() as u16;
            let buf = (0..p.engine.ring_count())
                .find_map(|r| p.engine.info(r).ok().and_then(|i| i.buf_size))
                .unwrap_or(w.buf);
            PortPlan {
                active: started > 0,
                buf,
                rings: started.max(1),
                groups: w.groups.clone(),
                moderation: w.moderation.clone(),
                xmit_batch: p.engine.xmit_batch(),
                rx_csum: p.device_handle().rx_csum(),
            }
        })
        .collect()
}

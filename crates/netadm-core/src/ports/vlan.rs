//! VLAN filters in hardware: each i40e-class port's VLAN filter table
//! holds the VIDs of the VNICs (`-v VID`) and VLAN links over it, and the
//! device drops tagged frames for any other VID. atl1c-class ports have no
//! such table: their driver's classifier drops them
//! (`netadm_datapath::Classifier::vlan_dropped`).

use std::collections::{BTreeMap, BTreeSet};

use netadm_model::LinkName;

use super::power::Driver;
use crate::CoreError;
use crate::view::{Link, View};

/// The VIDs each port (by device name) carries in a configuration.
fn wanted(v: &View<'_>) -> BTreeMap<LinkName, BTreeSet<u16>> {
    let mut out: BTreeMap<LinkName, BTreeSet<u16>> = BTreeMap::new();
    for (n, c) in &v.st.vnic {
        let Some(vid) = c.vid else { continue };
        for d in v.ports_under(&Link::Vnic(n.clone())) {
            out.entry(d).or_default().insert(vid.into());
        }
    }
    out
}

/// Refuses a configuration in which an i40e-class port would carry more
/// VIDs than its VLAN filter table holds.
pub(crate) fn check_room(v: &View<'_>) -> Result<(), CoreError> {
    let max = usize::from(netadm_nic::vlan::FILTER_ENTRIES);
    for (d, vids) in wanted(v) {
        let hw = v.hw.port(d.as_str()).is_some_and(|p| matches!(p.driver, Driver::I40e(_)));
        if hw && vids.len() > max {
            return Err(CoreError::invalid_argument(format!(
                "{}'s VLAN filter table holds {max} VIDs; this would need {}",
                v.phys_name(&d),
                vids.len()
            )));
        }
    }
    Ok(())
}

/// Programs every i40e-class port's VLAN filter table with the VIDs
/// `v` puts over it; with `add_only`, only adds (before a change runs,
/// so its VLANs' frames are let in from the start; what goes is taken
/// out once the change is done or undone).
pub(crate) fn sync_filters(v: &View<'_>, add_only: bool) {
    let want = wanted(v);
    let none = BTreeSet::new();
    for p in v.hw.ports() {
        let Driver::I40e(d) = &p.driver else { continue };
        let want = want.get(&p.device).unwrap_or(&none);
        let have: BTreeSet<u16> = d.vlan_filter().into_iter().collect();
        let gone = if add_only { vec![] } else { have.difference(want).copied().collect() };
        for vid in gone {
            let _ = d.set_vlan_filter(vid, false);
        }
        for &vid in want.difference(&have) {
            if let Err(e) = d.set_vlan_filter(vid, true) {
                tracing::warn!(port = %p.device, vid, "VLAN filter: {e}");
            }
        }
    }
}

//! VLAN filters in hardware: a port whose device has a VLAN filter table
//! (`Caps::vlan_filters`) holds the VIDs of the VNICs (`-v VID`) and VLAN
//! links over it, and the device drops tagged frames for any other VID. A
//! port without one leaves that to its classifier
//! (`netadm_datapath::Classifier::vlan_dropped`).

use std::collections::{BTreeMap, BTreeSet};

use netadm_model::LinkName;

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

/// Refuses a configuration in which a port with a VLAN filter table
/// would carry more VIDs than the table holds.
pub(crate) fn check_room(v: &View<'_>) -> Result<(), CoreError> {
    for (d, vids) in wanted(v) {
        let max = v.hw.find(d.as_str()).map_or(0, |p| usize::from(p.caps().vlan_filters));
        if max > 0 && vids.len() > max {
            return Err(CoreError::invalid_argument(format!(
                "{}'s VLAN filter table holds {max} VIDs; this would need {}",
                v.phys_name(&d),
                vids.len()
            )));
        }
    }
    Ok(())
}

/// Programs every VLAN filter table (ports that have one) with the VIDs
/// `v` puts over it; with `add_only`, only adds (before a change runs,
/// so its VLANs' frames are let in from the start; what goes is taken
/// out once the change is done or undone).
pub(crate) fn sync_filters(v: &View<'_>, add_only: bool) {
    let want = wanted(v);
    let none = BTreeSet::new();
    for p in v.hw.ports() {
        let d = p.nic();
        if d.caps().vlan_filters == 0 {
            continue;
        }
        let want = want.get(&p.device).unwrap_or(&none);
        let have: BTreeSet<u16> = d.vlan_filter().unwrap_or_default().into_iter().collect();
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

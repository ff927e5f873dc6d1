//! What a change touches, found from the configurations before and after
//! it. Both share every node the change did not copy, so their difference
//! ([`netadm_config::Section::diff`]) costs what the change changed; the
//! checks and the planning below start from it instead of walking every
//! link.

use std::collections::{BTreeMap, BTreeSet};

use netadm_config::{Section, VnicConf};
use netadm_model::{LinkName, MacAddr, PropName};

use crate::view::{Link, View};

/// The port devices whose plan may differ between the two configurations:
/// every port a changed entry runs on, before or after.
pub(crate) fn ports_touched(vf: &View<'_>, vt: &View<'_>) -> BTreeSet<LinkName> {
    let (from, to) = (vf.st, vt.st);
    let mut out = BTreeSet::new();
    let mut under = |v: &View<'_>, l: Option<Link>| {
        if let Some(l) = l {
            out.extend(v.ports_under(&l));
        }
    };
    for (d, _, _) in from.phys.diff(&to.phys) {
        under(vf, Some(Link::Phys(d.clone())));
    }
    for (n, a, b) in from.aggr.diff(&to.aggr) {
        under(vf, a.map(|_| Link::Aggr(n.clone())));
        under(vt, b.map(|_| Link::Aggr(n.clone())));
    }
    for (n, a, b) in from.vnic.diff(&to.vnic) {
        under(vf, a.map(|_| Link::Vnic(n.clone())));
        under(vt, b.map(|_| Link::Vnic(n.clone())));
    }
    for (n, _, _) in from.interface.diff(&to.interface) {
        under(vf, vf.resolve(n.as_str()));
        under(vt, vt.resolve(n.as_str()));
    }
    out
}

/// VNICs by MAC address, for one VNIC section, brought to the section it
/// is asked about by their difference: the first question walks every
/// VNIC, each after a change only what changed.
#[derive(Default)]
pub(crate) struct MacIndex {
    of: Section<LinkName, VnicConf>,
    by_mac: BTreeMap<MacAddr, BTreeSet<LinkName>>,
}

impl MacIndex {
    /// The VNICs of `vnics` with MAC `mac`, in name order.
    pub(crate) fn holders(
        &mut self,
        vnics: &Section<LinkName, VnicConf>,
        mac: MacAddr,
    ) -> Vec<LinkName> {
        if !self.of.ptr_eq(vnics) {
            for (n, a, b) in self.of.diff(vnics) {
                if let Some(a) = a
                    && let Some(set) = self.by_mac.get_mut(&a.mac)
                {
                    set.remove(n);
                    if set.is_empty() {
                        self.by_mac.remove(&a.mac);
                    }
                }
                if let Some(b) = b {
                    self.by_mac.entry(b.mac).or_default().insert(n.clone());
                }
            }
            self.of = vnics.clone();
        }
        self.by_mac.get(&mac).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }
}

/// Whether a VNIC asks for a ring group of its own.
pub(crate) fn asks_group(c: &VnicConf) -> bool {
    c.props.contains_key(&PropName::RxRings) || c.props.contains_key(&PropName::TxRings)
}

/// Whether a VNIC the change adds or changes asks for a ring group.
pub(crate) fn group_asked(vf: &View<'_>, vt: &View<'_>) -> bool {
    vf.st.vnic.diff(&vt.st.vnic).any(|(_, _, b)| b.is_some_and(asks_group))
}

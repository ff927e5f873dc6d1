//! Link protection on kernel VNICs (placeholder, filled in below).

use netadm_datapath::protect::GuardCounts;
use netadm_model::LinkName;

use super::Kernel;
use crate::view::View;

impl Kernel {
    /// The books of every protected kernel VNIC: what its rules counted.
    pub(crate) fn guard_counts(&self, _v: &View<'_>) -> Vec<(LinkName, GuardCounts)> {
        vec![]
    }
}

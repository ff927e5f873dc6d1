//! Transmit paths over ring engines.

use std::sync::Arc;

use netadm_rings::RingEngine;

use crate::generator::Tx;

/// Sends over one port's first `rings` rings, a flow per ring (flow
/// `f` on ring `f % rings`), so each flow keeps its order.
pub struct PortTx {
    engine: Arc<RingEngine>,
    rings: u16,
}

impl PortTx {
    /// A transmit path over `engine`'s rings `0..rings`.
    pub fn new(engine: Arc<RingEngine>, rings: u16) -> Self {
        Self { engine, rings: rings.max(1) }
    }
}

impl Tx for PortTx {
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize {
        let ring = (flow % u32::from(self.rings)) as u16;
        self.engine.transmit(ring, frames).unwrap_or(0)
    }
}

/// Sends over several ports (an aggregation's members): flow `f` on member
/// `f % members`, then on that member's rings as [`PortTx`] does.
pub struct MultiTx {
    members: Vec<PortTx>,
}

impl MultiTx {
    /// A transmit path over `members`.
    pub fn new(members: Vec<PortTx>) -> Self {
        Self { members }
    }
}

impl Tx for MultiTx {
    fn send(&self, flow: u32, frames: &[&[u8]]) -> usize {
        if self.members.is_empty() {
            return 0;
        }
        let m = &self.members[flow as usize % self.members.len()];
        m.send(flow / self.members.len() as u32, frames)
    }
}

//! Where a verb's time goes, and how it tells its progress: phases in the order they ran, counts (rings,
//! DMA, frames dropped) and notes for the operator, folded into the
//! verb's [`Report`].

use std::collections::BTreeMap;
use std::time::Instant;

use netadm_rings::OpReport;

use crate::Report;

/// Reports progress of a long operation: (phase, done, total).
pub type Progress<'a> = &'a (dyn Fn(&str, u32, u32) + Sync);

/// Timing of one mutation as it runs.
pub(crate) struct Timing {
    pub(crate) started: Instant,
    mark: Instant,
    pub(crate) phases: Vec<(String, u64)>,
    pub(crate) counts: BTreeMap<String, u64>,
    notes: Vec<String>,
}

impl Timing {
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        Self { started: now, mark: now, phases: vec![], counts: BTreeMap::new(), notes: vec![] }
    }

    /// Closes the phase that ran since the last mark.
    pub(crate) fn phase(&mut self, name: &str) {
        let now = Instant::now();
        let us = (now - self.mark).as_micros() as u64;
        self.mark = now;
        match self.phases.iter_mut().find(|(n, _)| n == name) {
            Some((_, t)) => *t += us,
            None => self.phases.push((name.to_owned(), us)),
        }
    }

    pub(crate) fn count(&mut self, name: &str, n: u64) {
        *self.counts.entry(name.to_owned()).or_default() += n;
    }

    /// Folds a ring engine's report in: its counts, and its phases nested
    /// under `parent` (the slowest port's figure when ports ran in
    /// parallel).
    pub(crate) fn absorb(&mut self, parent: &str, rep: &OpReport) {
        let c = &rep.counts;
        self.count("rings_started", c.rings_started.into());
        self.count("rings_stopped", c.rings_stopped.into());
        self.count("dma_allocated", c.dma_allocated);
        self.count("dma_freed", c.dma_freed);
        self.count("rx_discarded", c.rx_discarded);
        for p in &rep.phases {
            let name = format!("{parent}/{}", p.name);
            let us = p.elapsed.as_micros() as u64;
            match self.phases.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t = (*t).max(us),
                None => self.phases.push((name, us)),
            }
        }
    }

    /// Adds an operator-facing note.
    pub(crate) fn note(&mut self, s: impl Into<String>) {
        self.notes.push(s.into());
    }

    pub(crate) fn finish(self, op: &str) -> Report {
        Report {
            op: op.to_owned(),
            total_us: self.started.elapsed().as_micros() as u64,
            phases: self.phases,
            counts: self.counts,
            notes: self.notes,
        }
    }
}

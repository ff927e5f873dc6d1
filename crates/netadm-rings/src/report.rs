//! What a lifecycle operation reports: where its time went and what it did.

use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::strategy::Strategy;

/// What an operation changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Rings that reached `started`.
    pub rings_started: u32,
    /// Rings that went from `started` to `freed`.
    pub rings_stopped: u32,
    /// DMA bytes allocated.
    pub dma_allocated: u64,
    /// DMA bytes freed.
    pub dma_freed: u64,
    /// Frames received but not delivered because their ring was stopping.
    pub rx_discarded: u64,
}

/// One named phase and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    /// Phase name (`validate`, `quiesce`, `pre-disable`, `disable`, `free`,
    /// `program`, `reenable-gap`, `enable`, `tick-delay`, `unwind`).
    pub name: &'static str,
    /// Time spent in it.
    pub elapsed: Duration,
}

/// Timing and counts of one lifecycle operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpReport {
    /// Operation name.
    pub op: &'static str,
    /// Strategy used.
    pub strategy: Strategy,
    /// Total wall time.
    pub total: Duration,
    /// Phases in order; a phase that ran once per ring appears summed.
    pub phases: Vec<Phase>,
    /// What changed.
    pub counts: Counts,
    started: Instant,
    mark: Instant,
}

impl OpReport {
    pub(crate) fn new(op: &'static str, strategy: Strategy, clock: &dyn Clock) -> Self {
        let now = clock.now();
        Self {
            op,
            strategy,
            total: Duration::ZERO,
            phases: Vec::new(),
            counts: Counts::default(),
            started: now,
            mark: now,
        }
    }

    /// Closes the phase that ran since the last mark.
    pub(crate) fn phase(&mut self, name: &'static str, clock: &dyn Clock) {
        let now = clock.now();
        let d = now - self.mark;
        self.mark = now;
        match self.phases.iter_mut().find(|p| p.name == name) {
            Some(p) => p.elapsed += d,
            None => self.phases.push(Phase { name, elapsed: d }),
        }
    }

    pub(crate) fn finish(mut self, clock: &dyn Clock) -> Self {
        self.total = clock.now() - self.started;
        self
    }

    /// Adds time to a named phase (a caller's own step, e.g. a steering
    /// flip between ring operations, or a wave enclosing others). The total
    /// is the caller's to set: phases may nest.
    pub fn add_phase(&mut self, name: &'static str, elapsed: Duration) {
        match self.phases.iter_mut().find(|p| p.name == name) {
            Some(p) => p.elapsed += elapsed,
            None => self.phases.push(Phase { name, elapsed }),
        }
    }

    /// Appends `next`'s phases and counts to this report.
    pub fn then(mut self, next: OpReport) -> Self {
        for p in next.phases {
            match self.phases.iter_mut().find(|q| q.name == p.name) {
                Some(q) => q.elapsed += p.elapsed,
                None => self.phases.push(p),
            }
        }
        let (a, b) = (&mut self.counts, next.counts);
        a.rings_started += b.rings_started;
        a.rings_stopped += b.rings_stopped;
        a.dma_allocated += b.dma_allocated;
        a.dma_freed += b.dma_freed;
        a.rx_discarded += b.rx_discarded;
        self.total += next.total;
        self
    }

    /// Time spent in the named phase.
    pub fn phase_time(&self, name: &str) -> Duration {
        self.phases.iter().filter(|p| p.name == name).map(|p| p.elapsed).sum()
    }
}

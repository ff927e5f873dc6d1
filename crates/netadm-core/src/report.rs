//! What the core answers: a verb's report (its phases, counts and notes),
//! the history of recent verbs, an apply's plan, and the rows of the
//! `show-*` verbs. These are the core's own types; netadmd converts them
//! to the D-Bus contract (`netadm-dbus`) at its boundary, in one place.

use std::collections::BTreeMap;

/// What a mutating verb did and where its time went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The operation, e.g. `create-aggr`.
    pub op: String,
    /// Wall time in the daemon, µs.
    pub total_us: u64,
    /// Phases in order: (name, µs).
    pub phases: Vec<(String, u64)>,
    /// Counts: rings_started, rings_stopped, dma_allocated, dma_freed, ...
    pub counts: BTreeMap<String, u64>,
    /// Notes for the operator (e.g. "no kernel device was made").
    pub notes: Vec<String>,
}

/// A recent mutating command and its timing (`show-history`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Sequence number since the daemon started.
    pub seq: u64,
    /// Unix time in milliseconds when it started.
    pub time_ms: u64,
    /// The operation and its main argument, e.g. `create-aggr aggr0`.
    pub command: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Wall time, µs.
    pub total_us: u64,
    /// Error kind and message, empty on success.
    pub error: String,
}

/// One step of an apply's plan, in the order the operation does them,
/// with what it costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanStep {
    /// `config` (an entry of the configuration), `rings` (a port's rings),
    /// `kernel` (a device or address in the kernel) or `persist`.
    pub kind: String,
    /// What it is about: `vnic v1`, `port i40e0`, `interface v1`, ...
    pub object: String,
    /// What happens, in words.
    pub action: String,
    /// Rings stopped.
    pub rings_stopped: u32,
    /// Rings started.
    pub rings_started: u32,
    /// Rings restarted with new buffers.
    pub rings_restarted: u32,
    /// Kernel changes (a device made or removed, an address, an MTU).
    pub kernel_changes: u32,
}

/// What `apply` did, or with `dry_run` would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Whether anything changed (would change): false when the document
    /// is the configuration already.
    pub changed: bool,
    /// Nothing was changed: the plan only.
    pub dry_run: bool,
    /// The plan, in order.
    pub steps: Vec<PlanStep>,
    /// When an armed checkpoint rolls back unless confirmed (ms since the
    /// Unix epoch); 0 if none was armed.
    pub confirm_deadline_ms: u64,
    /// The operation's timing, as every verb's.
    pub result: Report,
}

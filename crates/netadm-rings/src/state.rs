//! Ring states and the transition table, checked on every change.

use std::fmt;

/// Where a ring is in its life.
///
/// ```text
///  Unallocated ──alloc──▶ Allocated ──enable──▶ Starting ──ack──▶ Started
///        ▲                 │     ▲                 │                 │
///        │               free    │            ack timeout         quiesce
///        │                 ▼     │                 ▼                 ▼
///        └─────────────── Freed ─┘◀──free── Stopped ◀──ack── Quiescing
///                                             │  ▲
///                                             └──┘ (restart: Stopped → Starting)
/// ```
///
/// - `Allocated`: DMA buffers exist, sized from the MTU; queues disabled.
/// - `Starting`: enable requested, waiting for the device.
/// - `Started`: queues enabled, interrupts delivered, TX accepted.
/// - `Quiescing`: no new TX, in-flight TX draining, interrupt handlers
///   finishing, then disable requested.
/// - `Stopped`: the device acknowledged the disable; buffers still held.
/// - `Freed`: buffers returned; may be allocated again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingState {
    /// Never allocated.
    Unallocated,
    /// Buffers allocated; queues disabled.
    Allocated,
    /// Enable requested; waiting for the device.
    Starting,
    /// Running.
    Started,
    /// Stopping: TX closed, draining, interrupts quiescing.
    Quiescing,
    /// Disabled by the device; buffers still held.
    Stopped,
    /// Buffers freed.
    Freed,
}

use RingState::*;

/// Every legal transition. Anything else is a bug in the caller and is
/// refused with [`crate::RingError::IllegalTransition`].
pub const TRANSITIONS: &[(RingState, RingState)] = &[
    (Unallocated, Allocated),
    (Freed, Allocated),
    (Allocated, Starting),
    (Allocated, Freed),
    (Starting, Started),
    // An enable the device never acknowledged is rolled back.
    (Starting, Stopped),
    // ... or stopped like a running ring: its queues may be half enabled.
    (Starting, Quiescing),
    (Started, Quiescing),
    (Quiescing, Stopped),
    // A stop whose TX or interrupt handlers did not drain is called off
    // before anything was disabled: the ring keeps running.
    (Quiescing, Started),
    (Stopped, Starting),
    (Stopped, Freed),
];

impl RingState {
    /// Whether `self → to` is in [`TRANSITIONS`].
    pub fn can_become(self, to: RingState) -> bool {
        TRANSITIONS.contains(&(self, to))
    }

    /// Whether the ring holds DMA buffers in this state.
    pub fn holds_dma(self) -> bool {
        matches!(self, Allocated | Starting | Started | Quiescing | Stopped)
    }

    /// Lower-case name, as shown to operators.
    pub fn as_str(self) -> &'static str {
        match self {
            Unallocated => "unallocated",
            Allocated => "allocated",
            Starting => "starting",
            Started => "started",
            Quiescing => "quiescing",
            Stopped => "stopped",
            Freed => "freed",
        }
    }
}

impl fmt::Display for RingState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [RingState; 7] =
        [Unallocated, Allocated, Starting, Started, Quiescing, Stopped, Freed];

    #[test]
    fn table_has_no_self_loops_and_no_way_back_to_unallocated() {
        for &(a, b) in TRANSITIONS {
            assert_ne!(a, b);
            assert_ne!(b, Unallocated);
        }
    }

    #[test]
    fn started_is_only_left_through_quiescing() {
        // (Quiescing -> Started exists only to call off a stop.)
        for to in ALL {
            assert_eq!(Started.can_become(to), to == Quiescing, "started -> {to}");
        }
    }

    #[test]
    fn buffers_are_freed_only_from_rings_the_device_no_longer_uses() {
        for from in ALL {
            if from.can_become(Freed) {
                assert!(matches!(from, Allocated | Stopped), "{from} -> freed");
            }
        }
    }
}

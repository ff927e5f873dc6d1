//! Time, and the only places the engine may wait on it.
//!
//! Every timed wait names why it waits ([`Wait`]), so tests can prove that
//! the batched strategy only waits for intervals the hardware mandates, once
//! per batch, and never pauses blindly.

use std::time::{Duration, Instant};

/// Why the engine waits for time to pass rather than for an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wait {
    /// The TX pre-disable notice the device requires before a disable.
    PreDisableNotice,
    /// The minimum gap between a queue's disable and its re-enable.
    ReenableGap,
    /// `legacy` only: the seed's fixed per-ring delay in clock ticks.
    TickDelay,
    /// `sequential` only: a blind pause between status polls.
    PollPause,
}

/// A monotonic clock the engine reads and waits on.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Instant;
    /// Returns once `deadline` has passed.
    fn sleep_until(&self, deadline: Instant, why: Wait);
}

/// The real monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant, _why: Wait) {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            std::thread::sleep(deadline - now);
        }
    }
}

/// illumos `drv_usectohz`: microseconds to clock ticks, rounded up.
pub fn usec_to_ticks(usec: u64, hz: u32) -> u64 {
    (usec * u64::from(hz)).div_ceil(1_000_000)
}

/// Length of `ticks` clock ticks at `hz`.
pub fn ticks(ticks: u64, hz: u32) -> Duration {
    Duration::from_nanos(ticks * 1_000_000_000 / u64::from(hz))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_delay_is_500ms_at_100hz_and_50ms_at_1000hz() {
        // delay(50 * drv_usectohz(1000)): "50 ms" that is 50 ticks.
        assert_eq!(ticks(50 * usec_to_ticks(1000, 100), 100), Duration::from_millis(500));
        assert_eq!(ticks(50 * usec_to_ticks(1000, 1000), 1000), Duration::from_millis(50));
    }
}

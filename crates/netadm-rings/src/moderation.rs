//! Adaptive interrupt moderation, in the spirit of Linux's net_dim: the
//! driver measures what each vector's interrupts deliver and picks the
//! vector's throttle from it — none while traffic is light (a lone frame,
//! a ping, is handled at once), a short interval for moderate rates, a
//! long one for bulk traffic (fewer interrupts, larger batches).
//!
//! The measurement is a window per vector: frames and bytes delivered
//! (received, and transmitted frames completed) by its interrupts. A
//! window closes at the first interrupt at least [`WINDOW`] after it
//! opened; its rates choose the level, and the throttle register is
//! written only when the level changes (it is an MMIO write). An
//! interrupt after an idle stretch closes a window with a low rate, so
//! moderation falls back to none as soon as traffic goes quiet.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Shortest measurement window.
pub const WINDOW: Duration = Duration::from_millis(1);

/// A moderation level: the interval between a vector's interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// No throttle: every interrupt at once.
    Latency,
    /// A short interval.
    Moderate,
    /// A long interval.
    Bulk,
}

impl Level {
    /// The interval this level throttles to.
    pub fn interval(self) -> Duration {
        match self {
            Level::Latency => Duration::ZERO,
            Level::Moderate => Duration::from_micros(10),
            Level::Bulk => Duration::from_micros(50),
        }
    }

    /// The level for a window's rates: frames/s and bytes/s.
    pub fn for_rates(fps: f64, bps: f64) -> Level {
        if fps >= 150_000.0 || bps >= 400e6 {
            Level::Bulk
        } else if fps >= 15_000.0 || bps >= 40e6 {
            Level::Moderate
        } else {
            Level::Latency
        }
    }
}

#[derive(Debug)]
struct Window {
    opened: Instant,
    frames: u64,
    bytes: u64,
    level: Level,
}

/// One vector's adaptive state.
#[derive(Debug)]
pub(crate) struct Adaptive {
    on: std::sync::atomic::AtomicBool,
    /// On and at [`Level::Latency`]: what a busy poller asks on every
    /// send, without the window's lock (written under it).
    light: std::sync::atomic::AtomicBool,
    w: Mutex<Window>,
}

impl Default for Adaptive {
    fn default() -> Self {
        Self {
            on: std::sync::atomic::AtomicBool::new(false),
            light: std::sync::atomic::AtomicBool::new(false),
            w: Mutex::new(Window {
                opened: Instant::now(),
                frames: 0,
                bytes: 0,
                level: Level::Latency,
            }),
        }
    }
}

impl Adaptive {
    /// Turns adaptive moderation on (starting at [`Level::Latency`], which
    /// `write` puts in the register) or off.
    pub(crate) fn set(&self, on: bool, write: impl FnOnce(Level)) {
        let mut w = self.w.lock().unwrap();
        *w = Window { opened: Instant::now(), frames: 0, bytes: 0, level: Level::Latency };
        self.on.store(on, std::sync::atomic::Ordering::Release);
        self.light.store(on, std::sync::atomic::Ordering::Release);
        if on {
            write(Level::Latency);
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether it is on and at [`Level::Latency`] (traffic light).
    pub(crate) fn is_light(&self) -> bool {
        self.light.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The level now.
    pub(crate) fn level(&self) -> Level {
        self.w.lock().unwrap().level
    }

    /// Counts what one interrupt delivered; when a window closes with a
    /// different level, calls `write` with it (under this vector's lock,
    /// so once [`Adaptive::set`] turned it off nothing more is written)
    /// and returns it.
    pub(crate) fn sample(
        &self,
        frames: u64,
        bytes: u64,
        now: Instant,
        write: impl FnOnce(Level),
    ) -> Option<Level> {
        let mut w = self.w.lock().unwrap();
        if !self.is_on() {
            return None;
        }
        w.frames += frames;
        w.bytes += bytes;
        let dt = now.saturating_duration_since(w.opened);
        if dt < WINDOW {
            return None;
        }
        let s = dt.as_secs_f64();
        let level = Level::for_rates(w.frames as f64 / s, w.bytes as f64 / s);
        w.opened = now;
        w.frames = 0;
        w.bytes = 0;
        if level == std::mem::replace(&mut w.level, level) {
            return None;
        }
        self.light.store(level == Level::Latency, std::sync::atomic::Ordering::Release);
        write(level);
        Some(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_rates() {
        assert_eq!(Level::for_rates(100.0, 100e3), Level::Latency, "a ping");
        assert_eq!(Level::for_rates(50_000.0, 10e6), Level::Moderate);
        assert_eq!(Level::for_rates(30_000.0, 2e9), Level::Bulk, "superframes");
        assert_eq!(Level::for_rates(1e6, 64e6), Level::Bulk, "small frames");
    }

    #[test]
    fn a_window_closes_after_its_length_and_idle_falls_back_to_latency() {
        let a = Adaptive::default();
        let written = std::cell::RefCell::new(vec![]);
        let w = |l| written.borrow_mut().push(l);
        let t0 = Instant::now();
        assert_eq!(a.sample(1000, 1_500_000, t0 + WINDOW, w), None, "off: nothing");
        a.set(true, w);
        let t0 = Instant::now();
        // 2 MB in 1 ms: bulk.
        assert_eq!(a.sample(500, 1_000_000, t0 + Duration::from_micros(500), w), None);
        assert_eq!(a.sample(500, 1_000_000, t0 + WINDOW, w), Some(Level::Bulk));
        assert_eq!(a.level(), Level::Bulk);
        // Then one frame 100 ms later: quiet, back to latency at once.
        let t1 = t0 + WINDOW + Duration::from_millis(100);
        assert_eq!(a.sample(1, 98, t1, w), Some(Level::Latency));
        assert_eq!(a.sample(1, 98, t1 + Duration::from_millis(10), w), None, "unchanged");
        assert_eq!(*written.borrow(), [Level::Latency, Level::Bulk, Level::Latency]);
        a.set(false, w);
        assert_eq!(a.sample(1000, 9e9 as u64, t1 + Duration::from_secs(1), w), None);
        assert_eq!(written.borrow().len(), 3, "off: no register writes");
    }
}

//! How lifecycle operations wait for the hardware: netadm's batched
//! strategy and illumos's before and after its fix, for comparison. Both
//! the engine and its reports name them.

use std::fmt;
use std::str::FromStr;

/// How lifecycle operations wait for the hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// The seed's bug: a fixed `delay(50 * drv_usectohz(1000))` per ring
    /// on teardown, in clock ticks of a `tick_hz` clock (illumos default
    /// 100 Hz, where it is 500 ms, not 50).
    Legacy {
        /// Clock tick rate.
        tick_hz: u32,
    },
    /// illumos after the fix: one ring at a time; pre-disable and a blind
    /// 500 µs wait per ring; status polled up to 10 times with 10 ms pauses.
    Sequential,
    /// netadm's: every request of a batch first, then one event-driven wait.
    #[default]
    Batched,
}

impl Strategy {
    /// The seed's configuration: legacy at 100 Hz.
    pub const LEGACY_100HZ: Strategy = Strategy::Legacy { tick_hz: 100 };

    /// Short name: `legacy`, `sequential`, `batched`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Legacy { .. } => "legacy",
            Self::Sequential => "sequential",
            Self::Batched => "batched",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Legacy { tick_hz } => write!(f, "legacy@{tick_hz}Hz"),
            s => f.write_str(s.name()),
        }
    }
}

/// An unknown strategy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strategy {0:?}: expected batched, sequential, legacy or legacy@HZ")]
pub struct StrategyParseError(pub String);

impl FromStr for Strategy {
    type Err = StrategyParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "batched" => Ok(Self::Batched),
            "sequential" => Ok(Self::Sequential),
            "legacy" => Ok(Self::LEGACY_100HZ),
            _ => s
                .strip_prefix("legacy@")
                .map(|hz| hz.trim_end_matches("Hz").trim_end_matches("hz"))
                .and_then(|hz| hz.parse().ok())
                .filter(|&hz: &u32| (1..=100_000).contains(&hz))
                .map(|tick_hz| Self::Legacy { tick_hz })
                .ok_or_else(|| StrategyParseError(s.to_owned())),
        }
    }
}

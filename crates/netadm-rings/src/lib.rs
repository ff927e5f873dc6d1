//! The ring lifecycle engine: allocates, starts, quiesces, stops,
//! reconfigures and frees a NIC port's rings, in batches, safely while
//! interrupts and traffic are live.
//!
//! netadm exists because of illumos bug 12957: a 50 ms delay written in
//! clock ticks ran once per ring, so administering a 256-ring i40e port took
//! from 16 s to 10 minutes. Here every wait is either an event with a
//! deadline or an interval the hardware mandates, waited once per batch.
//! See [`Strategy`] for the seed's algorithms, kept for comparison.

mod clock;
mod engine;
mod gate;
pub mod moderation;
mod report;
mod state;
mod strategy;

pub use clock::{Clock, SystemClock, Wait, ticks, usec_to_ticks};
pub use engine::{PollHold, RingClient, RingEngine, RingError, RingInfo};
pub use report::{Counts, OpReport, Phase};
pub use state::{RingState, TRANSITIONS};
pub use strategy::{Strategy, StrategyParseError};

//! netadm's datapath clients: what sends and receives frames through the
//! rings of [`netadm_rings`].
//!
//! - [`frame`]: sequenced, timestamped test frames;
//! - [`stream`]: a stream's books (sent, received, lost, reordered,
//!   duplicated, latency percentiles);
//! - [`generator`]: the traffic generator thread and the [`generator::Tx`] path it
//!   sends over;
//! - [`classify`]: the per-port receive classifier;
//! - [`qos`]: bandwidth limits (`maxbw`) and priorities on the transmit path;
//! - [`headers`]: a frame's Ethernet, IP and transport headers, read in place;
//! - [`protect`]: link protection (`protection`): what a tenant may send;
//! - [`switch`]: the virtual switch between the interfaces over a link;
//! - [`tx`]: transmit paths over a port's rings.

pub mod classify;
mod endpoint;
pub mod flow;
pub mod frame;
pub mod generator;
pub mod headers;
pub mod lacp;
pub mod protect;
pub mod qos;
pub mod stream;
pub mod switch;
pub mod tx;

pub use classify::{Classifier, StreamTable};
pub use generator::{GenConfig, Generator, Tx};
pub use stream::{Stream, StreamStats};
pub use switch::{Forward, VSwitch};

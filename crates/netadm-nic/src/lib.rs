//! The driver API shared by netadm's NIC drivers, the DMA memory they
//! allocate rings in, and the emulated-hardware core their hardware halves
//! are built on.
//!
//! Layering: the ring engine (`netadm-rings`) talks to any driver through
//! [`Nic`]; each driver crate (`netadm-i40e`, `netadm-atl1c`) implements
//! [`Nic`] by programming its device's registers; the device itself is an
//! [`emu::Device`] configured for that class. A vfio-backed device could
//! later implement the same register operations.

pub mod dma;
pub mod emu;
mod emu_nic;
pub mod hash;
mod nic;
pub mod offload;
pub mod packet_socket;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
mod types;
pub mod vlan;
pub mod wake;

pub use dma::{DmaAccount, DmaError, DmaRing, buf_size_for_mtu};
pub use emu_nic::{EmuNic, RingLimits, check_port};
pub use nic::Nic;
pub use offload::Offload;
pub use types::{
    Caps, Dir, Errata, HwStats, InterruptHandler, MacFilter, Moderation, NicClass, NicError,
    Offloads, QueueId,
};

//! The seam every kind of port is asked through: what a port can do
//! ([`PortCaps`]), what it is doing ([`PortStatus`]) and what it counted
//! ([`PortCounters`]). The verbs, the invariant checks and the reads know
//! a port only as a [`PhysPort`]: a new kind of port is one more
//! implementation of it (and a backend that drives it), never another arm
//! wherever ports are looked at.

use std::sync::Arc;

use netadm_model::{LinkName, MacAddr};
use netadm_nic::Offloads;

/// What a port can do, whatever drives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCaps {
    /// Its driver, as show-phys names it (`i40e`, `atl1c`, `virtio_net`).
    pub driver: String,
    /// The smallest MTU it accepts.
    pub min_mtu: u32,
    /// The largest MTU it accepts.
    pub max_mtu: u32,
    /// Ring pairs (channels) it has.
    pub rings: u16,
    /// Whether a VNIC directly over it can have ring groups of its own
    /// (`rxrings` on the VNIC), and whether its own `rxrings`/`txrings`
    /// apply.
    pub ring_groups: bool,
    /// Whether its own `rxrings`/`txrings` set how many ring pairs
    /// (channels) it runs.
    pub channels: bool,
    /// Entries of its VLAN filter table (0: it has none).
    pub vlan_filters: u16,
    /// Its interrupt moderation knobs, by property name (`itr`, `rx-imt`,
    /// `tx-imt`).
    pub moderation: Vec<&'static str>,
    /// The offloads it has.
    pub offloads: Offloads,
    /// Who drives it: `netadm` (an emulated device, its rings netadm's)
    /// or `kernel` (the kernel's driver). An aggregation's ports are all
    /// driven by one.
    pub backend: &'static str,
    /// Whether it has factory MAC addresses of its own to give VNICs
    /// (`create-vnic -m factory`).
    pub factory_macs: bool,
    /// What an aggregation's ports must share besides their backend:
    /// netadm aggregates ports of one class (its driver's name); the
    /// kernel bonds any of its ports (`kernel`).
    pub aggregates_with: String,
}

impl PortCaps {
    /// Whether it has interrupt moderation knob `prop`.
    pub fn has_knob(&self, prop: &str) -> bool {
        self.moderation.contains(&prop)
    }
}

/// What a port is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortStatus {
    /// Carrier: `Some(true)` up, `Some(false)` down, `None` unknown (a
    /// device that is missing).
    pub carrier: Option<bool>,
    /// Speed, Mb/s (0: unknown).
    pub speed: u64,
    /// `full`, `half` or `unknown`.
    pub duplex: &'static str,
    /// Ring pairs running now.
    pub rings_started: u32,
    /// DMA bytes its rings hold.
    pub dma_bytes: u64,
}

/// What a port counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames received.
    pub ipackets: u64,
    /// Bytes received.
    pub rbytes: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Frames dropped on receive.
    pub idrops: u64,
    /// Frames lost on send.
    pub odrops: u64,
}

impl std::ops::AddAssign for PortCounters {
    fn add_assign(&mut self, o: Self) {
        self.ipackets += o.ipackets;
        self.rbytes += o.rbytes;
        self.opackets += o.opackets;
        self.obytes += o.obytes;
        self.idrops += o.idrops;
        self.odrops += o.odrops;
    }
}

/// One speed and duplex of a port (`show-ether`'s SPEED-DUPLEX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeedDuplex {
    /// Mb/s.
    pub speed: u64,
    /// `full`, `half` or `unknown`.
    pub duplex: &'static str,
}

/// A port's Ethernet settings, as `show-ether` reports them; `None`
/// wherever the port cannot say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtherModes {
    /// Whether it autonegotiates now.
    pub autoneg: Option<bool>,
    /// Whether it can autonegotiate.
    pub autoneg_capable: Option<bool>,
    /// Flow control in effect: `bi`, `tx`, `rx` or `none`.
    pub pause: Option<&'static str>,
    /// The speeds and duplexes it can run at.
    pub capable: Option<Vec<SpeedDuplex>>,
    /// The ones it advertises.
    pub advertised: Option<Vec<SpeedDuplex>>,
    /// The ones its link partner advertises.
    pub peer: Option<Vec<SpeedDuplex>>,
}

/// A physical port of the machine, as everything above the backends sees
/// it.
pub trait PhysPort: Send + Sync {
    /// Its device name, fixed (`i40e0`, or a kernel port's configured
    /// name); its link name may differ (`rename-link`).
    fn device(&self) -> &LinkName;
    /// Its factory MAC address.
    fn mac(&self) -> MacAddr;
    /// The device show-phys names: the port itself, or the kernel device
    /// a kernel port is (`eth0`).
    fn interface(&self) -> String {
        self.device().to_string()
    }
    /// What it can do (a kernel port's can change: its device can come
    /// and go).
    fn caps(&self) -> Arc<PortCaps>;
    /// What it is doing now.
    fn status(&self) -> PortStatus;
    /// What it counted.
    fn counters(&self) -> PortCounters;
    /// Its Ethernet settings beyond [`PortStatus`] (autonegotiation, flow
    /// control, the modes it can run at); unknown unless the port says.
    fn ether(&self) -> EtherModes {
        EtherModes::default()
    }
    /// Where its device is (a bus address), where that means anything.
    fn location(&self) -> Option<String> {
        None
    }
    /// Its LACP actor state bits, when something other than netadm's own
    /// datapath runs LACP on it (a kernel port in an 802.3ad bond).
    fn lacp_state(&self) -> Option<u8> {
        None
    }
}

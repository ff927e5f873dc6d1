//! The machine's ports: drivers attached to emulated devices, each with its
//! ring engine, built from the hardware configuration.

use std::sync::Arc;

use netadm_atl1c::{Atl1c, Atl1cConfig};
use netadm_config::{HardwareConfig, PortClass, PortConfig, StubKind, Wire};
use netadm_datapath::tx::TxMap;
use netadm_datapath::{Classifier, StreamTable};
use netadm_i40e::{I40e, I40eConfig};
use netadm_model::{LinkName, MacAddr};
use netadm_nic::emu::{Device, WireMode};
use netadm_nic::{Caps, Nic};
use netadm_rings::{RingEngine, Strategy};

use super::phys::{EtherModes, PhysPort, PortCaps, PortCounters, PortStatus, SpeedDuplex};
use crate::CoreError;

/// One physical port.
pub struct Port {
    /// Device (driver instance) name, fixed: e.g. `i40e0`.
    pub device: LinkName,
    /// Its rings, over its driver: `engine.nic()` (wrapped by the tests'
    /// fault injection, which forwards every operation) is what the core
    /// asks everything of.
    pub engine: Arc<RingEngine>,
    /// Its receive classifier (the ring engine's client).
    pub classifier: Arc<Classifier>,
    /// What its wire is, as configured.
    pub wire: Wire,
    /// The rings senders may use, steered by the ring lifecycle.
    pub tx_map: Arc<TxMap>,
    /// Factory MAC address.
    pub mac: MacAddr,
    /// Link speed in Mb/s: what the device's wire serialises at (from the
    /// hardware configuration, read back from the device).
    pub speed: u64,
    /// What it can do, as every kind of port says it (from its driver's
    /// caps).
    caps: Arc<PortCaps>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port").field("device", &self.device).finish_non_exhaustive()
    }
}

impl Port {
    /// The port's driver, as the ring engine drives it.
    pub fn nic(&self) -> &Arc<dyn Nic> {
        self.engine.nic()
    }

    /// What its driver says the device can do.
    pub fn nic_caps(&self) -> &Caps {
        self.nic().caps()
    }

    /// The emulated device behind the driver: its wire (carrier, cables,
    /// afpacket) and what it holds in flight.
    pub fn device_handle(&self) -> &Device {
        self.nic().device().expect("every port netadm drives itself is an emulated device")
    }

    /// Rings running now.
    pub fn rings_started(&self) -> u32 {
        (0..self.engine.ring_count())
            .filter(|&r| self.engine.state(r) == Ok(netadm_rings::RingState::Started))
            .count() as u32
    }
}

/// What an emulated port can do, from its driver's caps.
fn port_caps(c: &Caps, rings: u16) -> PortCaps {
    PortCaps {
        driver: c.driver.to_owned(),
        min_mtu: c.min_mtu,
        max_mtu: c.max_mtu,
        rings,
        ring_groups: c.ring_groups > 0,
        channels: c.ring_groups > 0,
        vlan_filters: c.vlan_filters,
        moderation: c.moderation.iter().map(|k| k.prop).collect(),
        offloads: c.offloads,
        backend: "netadm",
        factory_macs: true,
        aggregates_with: c.driver.to_owned(),
    }
}

impl PhysPort for Port {
    fn device(&self) -> &LinkName {
        &self.device
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn caps(&self) -> Arc<PortCaps> {
        self.caps.clone()
    }

    fn status(&self) -> PortStatus {
        PortStatus {
            carrier: Some(self.device_handle().carrier()),
            speed: self.speed,
            duplex: "full",
            rings_started: self.rings_started(),
            dma_bytes: self.engine.dma_bytes(),
        }
    }

    fn counters(&self) -> PortCounters {
        let mut s = PortCounters::default();
        for r in self.engine.all_rings() {
            if let Ok(i) = self.engine.info(r) {
                s.ipackets += i.rx_frames;
                s.rbytes += i.rx_bytes;
                s.opackets += i.tx_frames;
                s.obytes += i.tx_bytes;
            }
        }
        let hw = self.nic().hw_stats();
        // Tagged frames for a VLAN nothing here is on, too.
        s.idrops = hw.rx_dropped + self.classifier.vlan_dropped();
        s.odrops = hw.wire_dropped;
        s
    }

    /// An emulated port runs at the one speed its configuration gives,
    /// full duplex, without autonegotiation or PAUSE frames (its wire
    /// serialises at that speed and never pushes back with them).
    fn ether(&self) -> EtherModes {
        EtherModes {
            autoneg: Some(false),
            autoneg_capable: Some(false),
            pause: Some("none"),
            capable: Some(vec![SpeedDuplex { speed: self.speed, duplex: "full" }]),
            advertised: None,
            peer: None,
        }
    }
}

/// Attaches a driver to a port of the hardware configuration (its name,
/// its settings, its wire, its speed in Mb/s).
type Attach = fn(
    &str,
    &PortConfig,
    WireMode,
    u64,
) -> Result<Arc<dyn Nic>, Box<dyn std::error::Error + Send + Sync>>;

/// The drivers netadm has, by the class the hardware configuration names
/// a port with, each with how it is attached: the one place a class is
/// named. Everything else the core asks of the driver itself ([`Caps`]).
const DRIVERS: [(PortClass, Attach); 2] = [
    (PortClass::I40e, |name, p, wire, speed| {
        let mut c = I40eConfig { wire, speed_mbps: speed, ..I40eConfig::default() };
        c.queue_pairs = p.queue_pairs.unwrap_or(c.queue_pairs);
        c.vectors = p.vectors.unwrap_or(c.vectors);
        c.ring_size = p.ring_size.unwrap_or(c.ring_size);
        Ok(Arc::new(I40e::attach(name, &c)?))
    }),
    (PortClass::Atl1c, |name, p, wire, speed| {
        let mut c = Atl1cConfig { wire, speed_mbps: speed, ..Atl1cConfig::default() };
        c.ring_size = p.ring_size.unwrap_or(c.ring_size);
        Ok(Arc::new(Atl1c::attach(name, &c)?))
    }),
];

/// Wraps a port's driver before its ring engine takes it over: for tests
/// that inject faults (`netadm_nic::testing::FaultyNic`). Gets the port's
/// device name.
pub type NicWrap = Box<dyn Fn(&str, Arc<dyn Nic>) -> Arc<dyn Nic>>;

/// Every port of the machine: the ones netadm drives itself, in
/// configuration order, then the others (kernel ports), each as the
/// backend that drives it made it.
pub struct Hardware {
    ports: Vec<Port>,
    others: Vec<Arc<dyn PhysPort>>,
    streams: Arc<StreamTable>,
    /// What a new etherstub is made of.
    etherstub: StubKind,
}

impl std::fmt::Debug for Hardware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.phys().map(|p| p.device())).finish()
    }
}

impl Hardware {
    /// Powers on every configured emulated port and attaches its driver
    /// (the machine's other ports join with [`Hardware::with`]).
    pub fn power_on(
        cfg: &HardwareConfig,
        strategy: Strategy,
        wrap: Option<&NicWrap>,
    ) -> Result<Self, CoreError> {
        let streams = Arc::new(StreamTable::default());
        let mut ports = Vec::with_capacity(cfg.ports.len());
        for (i, p) in cfg.ports.iter().enumerate() {
            if let Some(wire) = &p.wire {
                ports.push(Self::attach(i, p, wire, strategy, &streams, wrap)?);
            }
        }
        // Host interfaces for afpacket wires.
        for p in &ports {
            if let Wire::Afpacket { interface } = &p.wire {
                p.device_handle().attach_afpacket(interface).map_err(|e| {
                    CoreError::hardware(format!("{}: afpacket wire to {interface}: {e}", p.device))
                })?;
            }
        }
        // Plug in the cables (the configuration checked they are mutual).
        for (i, p) in ports.iter().enumerate() {
            if let Wire::Cable { peer } = &p.wire
                && let Some(j) = ports.iter().position(|q| &q.device == peer)
                && i < j
            {
                Device::cable(p.device_handle(), ports[j].device_handle()).map_err(|e| {
                    CoreError::hardware(format!("cable {}-{}: {e}", p.device, peer))
                })?;
            }
        }
        Ok(Self { ports, others: vec![], streams, etherstub: cfg.etherstub_default() })
    }

    /// The machine with its other ports (kernel ports) too, as the backend
    /// that drives them made them.
    pub fn with(mut self, others: Vec<Arc<dyn PhysPort>>) -> Self {
        self.others = others;
        self
    }

    /// What a new etherstub is made of (a kernel bridge, or netadm's own
    /// switch), as the hardware configuration says.
    pub fn etherstub_kind(&self) -> StubKind {
        self.etherstub
    }

    /// The traffic streams every port's classifier feeds.
    pub fn streams(&self) -> &Arc<StreamTable> {
        &self.streams
    }

    fn attach(
        index: usize,
        p: &PortConfig,
        wire_cfg: &Wire,
        strategy: Strategy,
        streams: &Arc<StreamTable>,
        wrap: Option<&NicWrap>,
    ) -> Result<Port, CoreError> {
        let wire = match wire_cfg {
            Wire::Sink => WireMode::Sink,
            Wire::Afpacket { .. } => WireMode::Afpacket,
            Wire::Reflector => WireMode::Reflector,
            Wire::Cable { .. } => WireMode::Cable,
        };
        let name = p.name.as_str();
        let hw_err = |e: &dyn std::fmt::Display| CoreError::hardware(format!("{name}: {e}"));
        let speed = p.speed_or_default();
        let attach = DRIVERS
            .iter()
            .find(|(class, _)| *class == p.class)
            .map(|(_, attach)| attach)
            .ok_or_else(|| {
                CoreError::hardware(format!("{name}: no driver for class {}", p.class))
            })?;
        let driver = attach(name, p, wire, speed).map_err(|e| hw_err(&*e))?;
        let nic = match wrap {
            Some(w) => w(name, driver),
            None => driver,
        };
        let engine = Arc::new(RingEngine::new(nic, strategy).map_err(|e| hw_err(&e))?);
        let classifier = Arc::new(Classifier::new(streams.clone()));
        engine.set_client(Some(classifier.clone()));
        // What show-phys says is what the wire enforces.
        let speed = engine.nic().device().map_or(speed, |d| d.speed_mbps());
        let (i, oui) = (index as u32, engine.nic().caps().oui);
        let caps = Arc::new(port_caps(engine.nic().caps(), engine.ring_count()));
        let mac = MacAddr([oui[0], oui[1], oui[2], (i >> 16) as u8, (i >> 8) as u8, i as u8 + 1]);
        Ok(Port {
            device: p.name.clone(),
            engine,
            classifier,
            wire: wire_cfg.clone(),
            tx_map: Arc::new(TxMap::default()),
            mac,
            speed,
            caps,
        })
    }

    /// Every physical port of the machine, whatever drives it, in
    /// configuration order: what names resolve against.
    pub fn phys(&self) -> impl Iterator<Item = &dyn PhysPort> + '_ {
        self.ports.iter().map(|p| p as &dyn PhysPort).chain(self.others.iter().map(|p| &**p))
    }

    /// The physical port with device name `device`, whatever drives it.
    pub fn find(&self, device: &str) -> Option<&dyn PhysPort> {
        self.phys().find(|p| p.device().as_str() == device)
    }

    /// The ports netadm drives itself (emulated devices, their rings).
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// The port netadm drives itself with device name `device`.
    pub fn port(&self, device: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.device.as_str() == device)
    }

    /// Changes every port's ring lifecycle strategy.
    pub fn set_strategy(&self, s: Strategy) {
        for p in &self.ports {
            p.engine.set_strategy(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_speed_is_the_configured_one_the_device_enforces() {
        let text = "[[port]]\nname = \"i40e0\"\nclass = \"i40e\"\nqueue_pairs = 1\nwire = { kind = \"sink\" }\n\
                    [[port]]\nname = \"atl1c0\"\nclass = \"atl1c\"\nspeed = 100\nwire = { kind = \"sink\" }\n";
        let cfg = HardwareConfig::parse(text, std::path::Path::new("hw.toml")).unwrap();
        let hw = Hardware::power_on(&cfg, Strategy::Batched, None).unwrap();
        let i40e = hw.port("i40e0").unwrap();
        let atl1c = hw.port("atl1c0").unwrap();
        assert_eq!(
            (i40e.speed, i40e.device_handle().speed_mbps()),
            (40_000, 40_000),
            "class default"
        );
        assert_eq!((atl1c.speed, atl1c.device_handle().speed_mbps()), (100, 100), "configured");
    }
}

//! A kernel port: a host network device the kernel's driver owns (a NIC,
//! or a veth in tests), named by the hardware configuration. netadm reads
//! what the kernel knows of it (carrier, speed, duplex, driver, MTU range,
//! channels, offloads) and never touches a device no port names.

use std::sync::{Arc, RwLock};

use netadm_kernel::{Ethtool, KernelError, Netlink, Offload};
use netadm_model::{LinkName, MacAddr};
use netadm_nic::Offloads;

use crate::ports::{EtherModes, PhysPort, PortCaps, PortCounters, PortStatus};

/// What the kernel said of the device when it was last read.
#[derive(Debug, Clone)]
struct Seen {
    index: u32,
    mac: [u8; 6],
}

/// One kernel port.
pub(crate) struct KernelPort {
    device: LinkName,
    interface: String,
    nl: Arc<Netlink>,
    eth: Arc<Ethtool>,
    /// `None`: the device is missing (not there at start, or gone since).
    seen: RwLock<Option<Seen>>,
    caps: RwLock<Arc<PortCaps>>,
}

impl std::fmt::Debug for KernelPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelPort")
            .field("device", &self.device)
            .field("interface", &self.interface)
            .finish()
    }
}

/// What a port whose device is missing can be said to do: nothing yet.
fn missing_caps() -> PortCaps {
    PortCaps {
        driver: "--".into(),
        min_mtu: 68,
        max_mtu: 65535,
        rings: 0,
        ring_groups: false,
        channels: false,
        vlan_filters: 0,
        moderation: vec![],
        offloads: Offloads::default(),
        backend: "kernel",
        factory_macs: false,
        aggregates_with: "kernel".into(),
    }
}

impl KernelPort {
    /// Kernel port `device` over network device `interface`, read now.
    pub(crate) fn open(
        device: LinkName,
        interface: String,
        nl: Arc<Netlink>,
        eth: Arc<Ethtool>,
    ) -> Self {
        let p = Self {
            device,
            interface,
            nl,
            eth,
            seen: RwLock::new(None),
            caps: RwLock::new(Arc::new(missing_caps())),
        };
        p.refresh();
        p
    }

    /// Its network device's name.
    pub(crate) fn interface(&self) -> &str {
        &self.interface
    }

    /// Its device's interface index; `None` while it is missing.
    pub(crate) fn index(&self) -> Option<u32> {
        self.seen.read().unwrap().as_ref().map(|s| s.index)
    }

    /// Reads the device again (at start, and when the kernel says it came
    /// or went); whether it is there.
    pub(crate) fn refresh(&self) -> bool {
        match self.read() {
            Ok((seen, caps)) => {
                *self.seen.write().unwrap() = Some(seen);
                *self.caps.write().unwrap() = Arc::new(caps);
                true
            }
            Err(e) => {
                if !matches!(e, KernelError::NotFound { .. }) {
                    tracing::warn!(port = %self.device, interface = %self.interface, "cannot read the device: {e}");
                }
                *self.seen.write().unwrap() = None;
                *self.caps.write().unwrap() = Arc::new(missing_caps());
                false
            }
        }
    }

    /// Whether the device is still the one read (by its index), reading
    /// it all again ([`KernelPort::refresh`]) only when it is not: the
    /// kernel tells of a port's device on every change over it (each
    /// macvlan made on it), and its driver, channel maximum and offloads
    /// do not change with those. Looked up without the RTNL lock
    /// ([`netadm_kernel::index_of`]), which whoever makes those macvlans
    /// holds. The device's index now.
    pub(crate) fn refresh_presence(&self) -> Option<u32> {
        let known = self.index();
        if known.is_some() && netadm_kernel::index_of(&self.interface) == known {
            return known;
        }
        self.refresh();
        self.index()
    }

    fn read(&self) -> Result<(Seen, PortCaps), KernelError> {
        let l = self.nl.link_named(&self.interface)?;
        let dev = self.interface.as_str();
        let driver = self.eth.driver_info(dev).map(|d| d.driver).unwrap_or_default();
        let ch = self.eth.channels(dev).ok();
        let rings = ch.map_or(1, |c| c.combined.max.max(c.rx.max).max(1));
        let feats = self.eth.features(dev).ok();
        let has = |o: Offload| {
            feats.as_ref().and_then(|f| f.offload(o)).is_some_and(|s| s.on || !s.fixed)
        };
        let caps = PortCaps {
            driver: if driver.is_empty() { "--".into() } else { driver },
            min_mtu: l.min_mtu.unwrap_or(68),
            max_mtu: l.max_mtu.unwrap_or(65535),
            rings: u16::try_from(rings).unwrap_or(u16::MAX),
            ring_groups: false,
            channels: rings > 1,
            vlan_filters: 0,
            moderation: vec![],
            offloads: Offloads {
                tso: has(Offload::Tso),
                tx_csum: has(Offload::TxChecksum),
                rx_csum: has(Offload::RxChecksum),
            },
            backend: "kernel",
            factory_macs: false,
            aggregates_with: "kernel".into(),
        };
        let mac = l.perm_mac.or(l.mac).unwrap_or_default();
        Ok((Seen { index: l.index, mac }, caps))
    }

    /// A counter of the device from sysfs (`statistics/NAME`).
    fn stat(&self, name: &str) -> u64 {
        std::fs::read_to_string(format!("/sys/class/net/{}/statistics/{name}", self.interface))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl PhysPort for KernelPort {
    fn device(&self) -> &LinkName {
        &self.device
    }

    fn interface(&self) -> String {
        self.interface.clone()
    }

    fn mac(&self) -> MacAddr {
        MacAddr(self.seen.read().unwrap().as_ref().map_or([0; 6], |s| s.mac))
    }

    fn caps(&self) -> Arc<PortCaps> {
        self.caps.read().unwrap().clone()
    }

    fn status(&self) -> PortStatus {
        let Some(index) = self.index() else {
            return PortStatus {
                carrier: None,
                speed: 0,
                duplex: "unknown",
                rings_started: 0,
                dma_bytes: 0,
            };
        };
        let carrier = self.nl.link_detail(index).ok().and_then(|l| l.carrier.filter(|_| l.up));
        let modes = self.eth.link_modes(&self.interface).unwrap_or_default();
        let channels = self.eth.channels(&self.interface).ok();
        PortStatus {
            carrier: Some(carrier.unwrap_or(false)),
            speed: modes.speed.map_or(0, u64::from),
            duplex: match modes.duplex {
                Some(netadm_kernel::Duplex::Full) => "full",
                Some(netadm_kernel::Duplex::Half) => "half",
                None => "unknown",
            },
            rings_started: channels.map_or(1, |c| c.combined.count.max(c.rx.count).max(1)),
            dma_bytes: 0,
        }
    }

    fn lacp_state(&self) -> Option<u8> {
        let l = self.nl.link_detail(self.index()?).ok()?;
        l.bond_port?.actor_state
    }

    fn counters(&self) -> PortCounters {
        if self.index().is_none() {
            return PortCounters::default();
        }
        PortCounters {
            ipackets: self.stat("rx_packets"),
            rbytes: self.stat("rx_bytes"),
            opackets: self.stat("tx_packets"),
            obytes: self.stat("tx_bytes"),
            idrops: self.stat("rx_dropped"),
            odrops: self.stat("tx_dropped"),
        }
    }

    /// Autonegotiation as ethtool reads it; the modes it can run at,
    /// advertises and hears, and flow control, are not read yet (unknown).
    fn ether(&self) -> EtherModes {
        let modes = self.index().and_then(|_| self.eth.link_modes(&self.interface).ok());
        EtherModes { autoneg: modes.and_then(|m| m.autoneg), ..EtherModes::default() }
    }

    /// Its bus address as ethtool's driver info gives it (`0000:03:00.0`);
    /// none for a virtual device (a veth has none) or a missing one.
    fn location(&self) -> Option<String> {
        self.index()?;
        let bus = self.eth.driver_info(&self.interface).ok()?.bus;
        Some(bus).filter(|b| !b.is_empty() && b != "N/A")
    }
}

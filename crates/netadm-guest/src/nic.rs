//! A guest's NICs: what a test asks for, what prepare checked, and the
//! taps behind them.

use std::process::{Command, Stdio};

use crate::{Error, cache};

/// The emulated NIC model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicModel {
    /// virtio-net-pci: multi-queue when asked ([`Nic::queues`]).
    VirtioNet,
    /// Intel 82574L (e1000e), the driver that resets its rings on an MTU
    /// change. In the full Debian kernel, not the cloud one.
    E1000e,
}

/// One guest NIC and the tap behind it.
#[derive(Debug, Clone)]
pub struct Nic {
    pub(crate) model: NicModel,
    pub(crate) queues: u16,
    pub(crate) tap: String,
    pub(crate) name: Option<String>,
    pub(crate) mac: Option<[u8; 6]>,
}

impl Nic {
    /// A virtio-net NIC, one queue pair, on tap `tap`.
    pub fn virtio(tap: &str) -> Self {
        Nic { model: NicModel::VirtioNet, queues: 1, tap: tap.into(), name: None, mac: None }
    }

    /// An e1000e NIC on tap `tap`.
    pub fn e1000e(tap: &str) -> Self {
        Nic { model: NicModel::E1000e, queues: 1, tap: tap.into(), name: None, mac: None }
    }

    /// Queue pairs of a virtio-net NIC, 1 to 16. Above 1 the tap is made
    /// `multi_queue` and QEMU opens it `queues=N` (vhost off). e1000e has
    /// one queue: more is refused at prepare.
    pub fn queues(mut self, n: u16) -> Self {
        self.queues = n;
        self
    }

    /// Its name in the guest (default `eth<index>`, in the order added).
    pub fn named(mut self, guest_name: &str) -> Self {
        self.name = Some(guest_name.into());
        self
    }

    /// Its MAC (default `52:54:00:PP:GG:II`: pid, guest and NIC index).
    pub fn mac(mut self, mac: [u8; 6]) -> Self {
        self.mac = Some(mac);
        self
    }
}

/// A NIC as prepare checked it: every default filled in.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) model: NicModel,
    pub(crate) queues: u16,
    pub(crate) tap: String,
    pub(crate) name: String,
    pub(crate) mac: [u8; 6],
}

pub(crate) fn mac_text(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// Taps made for a guest, deleted on drop.
pub(crate) struct Taps {
    netns: Option<String>,
    pub(crate) names: Vec<String>,
}

impl Taps {
    pub(crate) fn create(netns: Option<&str>, nics: &[Checked]) -> Result<Taps, Error> {
        let mut taps = Taps { netns: netns.map(str::to_owned), names: vec![] };
        let Some(ns) = netns else { return Ok(taps) };
        for n in nics {
            let mut add = vec!["-n", ns, "tuntap", "add", "name", &n.tap, "mode", "tap"];
            if n.queues > 1 {
                // QEMU opens one queue per fd; the tap must allow several.
                add.push("multi_queue");
            }
            cache::run("ip", &add, None)?;
            taps.names.push(n.tap.clone());
            cache::run("ip", &["-n", ns, "link", "set", &n.tap, "up"], None)?;
        }
        Ok(taps)
    }
}

impl Drop for Taps {
    fn drop(&mut self) {
        if let Some(ns) = &self.netns {
            for t in &self.names {
                let _ = Command::new("ip")
                    .args(["-n", ns, "link", "del", t])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

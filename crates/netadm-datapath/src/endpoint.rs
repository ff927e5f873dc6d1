//! Endpoints: what receives the frames for one MAC on one VLAN, and the
//! table of them that both a port's classifier (its clients: IP
//! interfaces' TAP devices) and a virtual switch (its interfaces) look
//! frames up in.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Receives the frames for an endpoint's MAC, with what the device
/// reported of each (checksum verified, superframe).
pub type Endpoint = Arc<dyn Fn(&[u8], netadm_nic::Offload) + Send + Sync>;

/// Endpoints by VLAN (0: untagged) and MAC: a switch's interfaces, or the
/// clients a port's classifier delivers to.
#[derive(Default)]
pub(crate) struct Endpoints(RwLock<HashMap<u16, HashMap<[u8; 6], Endpoint>>>);

impl Endpoints {
    /// Adds (or, with `None`, removes) the endpoint of `mac` on VLAN `vid`.
    pub(crate) fn set(&self, vid: u16, mac: [u8; 6], h: Option<Endpoint>) {
        let mut e = self.0.write().unwrap();
        match h {
            Some(h) => {
                e.entry(vid).or_default().insert(mac, h);
            }
            None => {
                if let Some(m) = e.get_mut(&vid) {
                    m.remove(&mac);
                    if m.is_empty() {
                        e.remove(&vid);
                    }
                }
            }
        }
    }

    /// The table, for reading.
    pub(crate) fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<u16, HashMap<[u8; 6], Endpoint>>> {
        self.0.read().unwrap()
    }
}

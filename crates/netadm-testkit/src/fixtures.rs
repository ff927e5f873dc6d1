//! Hardware configurations (`netadmd --config`, `HardwareConfig::parse`)
//! that tests and benchmarks run on, named for what they are, instead of
//! TOML repeated inline. [`Hardware`] writes any of them as the TOML
//! `config/netadm.toml` documents.
//!
//! The set, and who runs on it:
//! - [`two_i40e_reflectors`]: two i40e-class ports on reflectors (the
//!   seed's aggregation; `netadm demo` on fewer rings, `netadm-bench mtu`,
//!   the core's hitless MTU tests);
//! - [`i40e_reflector`]: one i40e-class port on a reflector wire of a
//!   given speed (maxbw and priority: the qos test and `netadm-bench qos`);
//! - [`afpacket`]: i40e-class ports on afpacket wires to host interfaces
//!   (every test and benchmark with real kernel traffic);
//! - [`cabled_atl1c`]: four atl1c-class ports cabled in pairs, as the
//!   embedded default has them (cut cables, LACP);
//! - [`reflectors_and_cable`]: two i40e-class reflectors and one atl1c
//!   cable (the core's verb, VLAN and failpoint tests);
//! - [`kernel`]: kernel ports over host network devices (veth "NICs" in
//!   the kernel-links test and `netadm-bench kernel-links`).
//!
//! Without `--config`, netadmd runs on the embedded default
//! (`config/netadm.toml`): two 256-ring i40e-class reflectors and the four
//! cabled atl1c-class ports.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::Error;

/// A port's device class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The i40e-class multi-queue port.
    I40e,
    /// The atl1c-class small port.
    Atl1c,
    /// A host network device the kernel's driver owns (`class =
    /// "kernel"`); its wire is [`Wire::Device`].
    Kernel,
}

/// What a port's wire connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire {
    /// Frames vanish.
    Sink,
    /// Frames come back.
    Reflector,
    /// To another port, which must cable back.
    Cable(String),
    /// A host network interface (AF_PACKET).
    Afpacket(String),
    /// A kernel port's own network device (`interface = "IF"`): the
    /// kernel's driver owns the wire.
    Device(String),
}

/// One `[[port]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Its link name.
    pub name: String,
    /// Its class.
    pub class: Class,
    /// Its wire.
    pub wire: Wire,
    /// The numeric settings given (`queue_pairs`, `vectors`, `ring_size`,
    /// `speed` in Mb/s), by the name the file gives them; one left out
    /// takes netadmd's default.
    settings: BTreeMap<&'static str, u32>,
}

impl Port {
    /// An i40e-class port `name` on a reflector, netadmd's defaults
    /// otherwise.
    pub fn i40e(name: &str) -> Self {
        Self::new(name, Class::I40e)
    }

    /// An atl1c-class port `name` on a reflector.
    pub fn atl1c(name: &str) -> Self {
        Self::new(name, Class::Atl1c)
    }

    /// A kernel port `name` over host network device `interface`.
    pub fn kernel(name: &str, interface: &str) -> Self {
        Self::new(name, Class::Kernel).wire(Wire::Device(interface.to_owned()))
    }

    fn new(name: &str, class: Class) -> Self {
        Self { name: name.to_owned(), class, wire: Wire::Reflector, settings: BTreeMap::new() }
    }

    fn set(mut self, key: &'static str, value: u32) -> Self {
        self.settings.insert(key, value);
        self
    }

    /// With `n` queue pairs (i40e only).
    pub fn queue_pairs(self, n: u16) -> Self {
        self.set("queue_pairs", n.into())
    }

    /// With `n` interrupt vectors (i40e only).
    pub fn vectors(self, n: u16) -> Self {
        self.set("vectors", n.into())
    }

    /// With `n` descriptors per ring.
    pub fn ring_size(self, n: u16) -> Self {
        self.set("ring_size", n.into())
    }

    /// At `mbps` Mb/s.
    pub fn speed(self, mbps: u32) -> Self {
        self.set("speed", mbps)
    }

    /// On `wire`.
    pub fn wire(mut self, wire: Wire) -> Self {
        self.wire = wire;
        self
    }
}

/// A hardware configuration: ports in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hardware {
    /// What a new etherstub is made of (`etherstub = "kernel"` or
    /// `"netadm"`); netadmd's default when `None`.
    pub etherstub: Option<String>,
    /// Its ports.
    pub ports: Vec<Port>,
}

impl Hardware {
    /// With new etherstubs made as `kind` says (`"kernel"`: a bridge;
    /// `"netadm"`: netadm's own switch).
    pub fn etherstub(mut self, kind: &str) -> Self {
        self.etherstub = Some(kind.to_owned());
        self
    }

    /// With `port` added last.
    pub fn port(mut self, port: Port) -> Self {
        self.ports.push(port);
        self
    }

    /// With port `name` changed by `f` (panics if there is none: a
    /// fixture's names are the caller's own).
    pub fn edit(mut self, name: &str, f: impl FnOnce(Port) -> Port) -> Self {
        let i = self.ports.iter().position(|p| p.name == name);
        let i = i.unwrap_or_else(|| panic!("no port {name}"));
        self.ports[i] = f(self.ports[i].clone());
        self
    }

    /// As TOML, the format `config/netadm.toml` documents.
    pub fn to_toml(&self) -> String {
        self.to_string()
    }

    /// Writes it (as TOML) to `path`; returns the path.
    pub fn write(&self, path: &Path) -> Result<PathBuf, Error> {
        std::fs::write(path, self.to_toml()).map_err(|source| Error::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(path.to_path_buf())
    }

    /// Writes it to `hw.toml` in `dir`; returns that path.
    pub fn write_in(&self, dir: &Path) -> Result<PathBuf, Error> {
        self.write(&dir.join("hw.toml"))
    }
}

impl fmt::Display for Hardware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(kind) = &self.etherstub {
            writeln!(f, "etherstub = \"{kind}\"\n")?;
        }
        for (i, p) in self.ports.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let class = match p.class {
                Class::I40e => "i40e",
                Class::Atl1c => "atl1c",
                Class::Kernel => "kernel",
            };
            writeln!(f, "[[port]]\nname = \"{}\"\nclass = \"{class}\"", p.name)?;
            for (key, value) in &p.settings {
                writeln!(f, "{key} = {value}")?;
            }
            match &p.wire {
                Wire::Sink => writeln!(f, "wire = {{ kind = \"sink\" }}")?,
                Wire::Reflector => writeln!(f, "wire = {{ kind = \"reflector\" }}")?,
                Wire::Cable(peer) => {
                    writeln!(f, "wire = {{ kind = \"cable\", peer = \"{peer}\" }}")?
                }
                Wire::Afpacket(dev) => {
                    writeln!(f, "wire = {{ kind = \"afpacket\", interface = \"{dev}\" }}")?
                }
                Wire::Device(dev) => writeln!(f, "interface = \"{dev}\"")?,
            }
        }
        Ok(())
    }
}

/// i40e0 and i40e1, `queue_pairs` queue pairs each, on reflectors (every
/// frame comes back): the seed's aggregation on as many rings as a run
/// can afford.
pub fn two_i40e_reflectors(queue_pairs: u16) -> Hardware {
    Hardware::default()
        .port(Port::i40e("i40e0").queue_pairs(queue_pairs))
        .port(Port::i40e("i40e1").queue_pairs(queue_pairs))
}

/// i40e0 alone, 4 queue pairs, on a reflector wire of `mbps` Mb/s: slow
/// enough for a limit or a flood to be measured against it.
pub fn i40e_reflector(mbps: u32) -> Hardware {
    Hardware::default().port(Port::i40e("i40e0").queue_pairs(4).speed(mbps))
}

/// i40e0, i40e1, ..., 4 queue pairs each, the n-th on an afpacket wire to
/// host interface `interfaces[n]` (a veth end in netadmd's namespace).
pub fn afpacket(interfaces: &[&str]) -> Hardware {
    interfaces.iter().enumerate().fold(Hardware::default(), |hw, (i, dev)| {
        let port = Port::i40e(&format!("i40e{i}")).queue_pairs(4);
        hw.port(port.wire(Wire::Afpacket((*dev).to_owned())))
    })
}

/// atl1c0..atl1c3 cabled atl1c0–atl1c2 and atl1c1–atl1c3, as in the
/// embedded default: an aggregation of atl1c0+atl1c1 faces one of
/// atl1c2+atl1c3.
pub fn cabled_atl1c() -> Hardware {
    let cable = |a: &str, b: &str| Port::atl1c(a).wire(Wire::Cable(b.to_owned()));
    Hardware::default()
        .port(cable("atl1c0", "atl1c2"))
        .port(cable("atl1c1", "atl1c3"))
        .port(cable("atl1c2", "atl1c0"))
        .port(cable("atl1c3", "atl1c1"))
}

/// [`two_i40e_reflectors`] and atl1c0 cabled to atl1c1: both classes, both
/// kinds of emulated wire, few rings.
pub fn reflectors_and_cable(queue_pairs: u16) -> Hardware {
    let cable = |a: &str, b: &str| Port::atl1c(a).wire(Wire::Cable(b.to_owned()));
    two_i40e_reflectors(queue_pairs).port(cable("atl1c0", "atl1c1")).port(cable("atl1c1", "atl1c0"))
}

/// Kernel ports net0, net1, ..., the n-th over host network device
/// `interfaces[n]` (a veth "NIC" in netadmd's namespace:
/// [`crate::kernel_far_side`]). Every port is a kernel port, so new
/// etherstubs are kernel bridges.
pub fn kernel(interfaces: &[&str]) -> Hardware {
    interfaces
        .iter()
        .enumerate()
        .fold(Hardware::default(), |hw, (i, dev)| hw.port(Port::kernel(&format!("net{i}"), dev)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_as_the_hardware_file_documents_it() {
        let hw = afpacket(&["va0"]).port(Port::atl1c("atl1c0").speed(10));
        let hw = hw.edit("atl1c0", |p| p.ring_size(128));
        assert_eq!(
            hw.to_toml(),
            "[[port]]\nname = \"i40e0\"\nclass = \"i40e\"\nqueue_pairs = 4\n\
             wire = { kind = \"afpacket\", interface = \"va0\" }\n\n\
             [[port]]\nname = \"atl1c0\"\nclass = \"atl1c\"\nring_size = 128\nspeed = 10\n\
             wire = { kind = \"reflector\" }\n"
        );
        let cabled = cabled_atl1c().to_toml();
        assert!(cabled.contains("name = \"atl1c3\"\nclass = \"atl1c\"\nwire = { kind = \"cable\", peer = \"atl1c1\" }\n"), "{cabled}");
        assert_eq!(reflectors_and_cable(16).ports.len(), 4);
    }

    #[test]
    fn kernel_ports_name_their_device() {
        let hw = kernel(&["nic0", "nic1"]).etherstub("kernel").port(Port::i40e("i40e0"));
        assert_eq!(
            hw.to_toml(),
            "etherstub = \"kernel\"\n\n\
             [[port]]\nname = \"net0\"\nclass = \"kernel\"\ninterface = \"nic0\"\n\n\
             [[port]]\nname = \"net1\"\nclass = \"kernel\"\ninterface = \"nic1\"\n\n\
             [[port]]\nname = \"i40e0\"\nclass = \"i40e\"\nwire = { kind = \"reflector\" }\n"
        );
    }

    #[test]
    fn written_where_asked() {
        let dir = tempfile::tempdir().unwrap();
        let p = i40e_reflector(10).write_in(dir.path()).unwrap();
        assert_eq!(p, dir.path().join("hw.toml"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("speed = 10\nwire = { kind = \"reflector\" }"), "{text}");
        let missing = dir.path().join("no/such/dir/hw.toml");
        assert!(matches!(i40e_reflector(10).write(&missing), Err(Error::Io { .. })));
    }
}

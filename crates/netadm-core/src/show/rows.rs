//! The rows of the read-only verbs (`show-*`), as the core answers them.

/// A physical link (`show-phys`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysRow {
    /// Link name.
    pub link: String,
    /// Media, e.g. `Ethernet`.
    pub media: String,
    /// `up`, `down` or `unknown`.
    pub state: String,
    /// Speed in Mb/s.
    pub speed: u64,
    /// `full`, `half` or `unknown`.
    pub duplex: String,
    /// Device (driver instance) name, e.g. `i40e0`.
    pub device: String,
    /// Driver class, `i40e` or `atl1c`.
    pub driver: String,
    /// Rings the port has.
    pub rings: u32,
    /// Rings running now.
    pub rings_started: u32,
    /// DMA bytes its rings hold.
    pub dma_bytes: u64,
}

/// A factory MAC address slot of a physical link (`show-phys -m`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysMacRow {
    /// Link name.
    pub link: String,
    /// `primary`, or the number of a factory address a VNIC holds.
    pub slot: String,
    /// The address.
    pub address: String,
    /// Whether a MAC client uses it.
    pub inuse: bool,
    /// Who uses it (the link, its aggregation or a VNIC); empty if none.
    pub client: String,
}

/// Where a physical link's device is (`show-phys -L`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysLocRow {
    /// Link name.
    pub link: String,
    /// Device name.
    pub device: String,
    /// A bus address; empty where none means anything.
    pub location: String,
}

/// One line of `show-ether`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtherRow {
    /// Link name.
    pub link: String,
    /// `current`, `capable`, `adv` or `peeradv`.
    pub ptype: String,
    /// `up`, `down`, `unknown` (`current`), else empty.
    pub state: String,
    /// `yes`, `no` or empty (unknown).
    pub auto: String,
    /// dladm's speeds and duplexes (`40G-f`, `1G-fh,100M-fh`), or empty.
    pub speed_duplex: String,
    /// `bi`, `tx`, `rx`, `none` or empty (unknown).
    pub pause: String,
}

/// A datalink (`show-link`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRow {
    /// Link name.
    pub link: String,
    /// `phys`, `aggr`, `vnic`, `vlan` or `etherstub`.
    pub class: String,
    /// MTU.
    pub mtu: u32,
    /// `up`, `down` or `unknown`.
    pub state: String,
    /// Links this one is built over (aggregation ports, a VNIC's link).
    pub over: Vec<String>,
    /// The aggregation this link is a port of, or empty.
    pub member_of: String,
    /// Whether it is in the persistent configuration.
    pub persistent: bool,
}

/// One port of an aggregation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggrPortRow {
    /// Port link name.
    pub port: String,
    /// Port state: `attached` while its rings run, else `standby`.
    pub state: String,
    /// Port speed, Mb/s.
    pub speed: u64,
    /// LACP actor state bits (802.1AX: 0x01 active, 0x02 short timeout,
    /// 0x04 aggregatable, 0x08 sync, 0x10 collecting, 0x20 distributing,
    /// 0x40 defaulted, 0x80 expired); 0 when LACP is off.
    pub lacp: u8,
}

/// An aggregation (`show-aggr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggrRow {
    /// Link name.
    pub link: String,
    /// Hash policy, e.g. `L2,L3`.
    pub policy: String,
    /// Whether the MAC address was fixed with `-u`.
    pub addr_policy: String,
    /// The aggregation's MAC address.
    pub mac: String,
    /// `off`, `active` or `passive`.
    pub lacp_mode: String,
    /// `short` or `long`.
    pub lacp_timer: String,
    /// Ports.
    pub ports: Vec<AggrPortRow>,
}

/// A VNIC (`show-vnic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VnicRow {
    /// Link name.
    pub link: String,
    /// The link it is over.
    pub over: String,
    /// Speed, Mb/s (of the link below).
    pub speed: u64,
    /// MAC address.
    pub macaddress: String,
    /// How the MAC was chosen: `auto`, `factory`, `random` or `fixed`.
    pub macaddrtype: String,
    /// VLAN id, 0 for none.
    pub vid: u16,
}

/// A VLAN link (`show-vlan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanRow {
    /// Link name.
    pub link: String,
    /// VLAN id, 1-4094.
    pub vid: u16,
    /// The link it is over.
    pub over: String,
    /// dladm's flags: `f` forced, `i` implicit; `-` where unset.
    pub flags: String,
}

/// An etherstub (`show-etherstub`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtherstubRow {
    /// Link name.
    pub link: String,
    /// `netadm` (netadm's own virtual switch) or `kernel` (a Linux bridge).
    pub kind: String,
    /// The kernel bridge it is, or empty for netadm's own switch.
    pub device: String,
}

/// One link property (`show-linkprop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropRow {
    /// Link name.
    pub link: String,
    /// Property name.
    pub property: String,
    /// `rw` or `r-`.
    pub perm: String,
    /// Current value (`--` when none).
    pub value: String,
    /// Default value (`--` when none).
    pub default: String,
    /// Possible values, e.g. `68-9710` or `on,off`.
    pub possible: String,
}

/// One IP interface property (`show-ifprop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfPropRow {
    /// Interface name.
    pub ifname: String,
    /// Property name, e.g. `mtu`.
    pub property: String,
    /// Protocol: `ipv4` or `ipv6`.
    pub proto: String,
    /// `rw`.
    pub perm: String,
    /// The value the kernel has (the configured one without a kernel
    /// mirror).
    pub current: String,
    /// The persistent value, empty when none is set.
    pub persistent: String,
    /// The default value.
    pub default: String,
    /// Possible values, e.g. `68-9000` or `on,off`.
    pub possible: String,
}

/// One address property (`show-addrprop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrPropRow {
    /// Address object, `IF/TAG`.
    pub addrobj: String,
    /// Property name, e.g. `prefixlen`.
    pub property: String,
    /// `rw` or `r-`.
    pub perm: String,
    /// Its value.
    pub current: String,
    /// The persistent value when it differs from the default, else empty.
    pub persistent: String,
    /// The default value.
    pub default: String,
    /// Possible values.
    pub possible: String,
}

/// One protocol property (`show-prop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoPropRow {
    /// Protocol: `ipv4`, `ipv6`, `tcp`.
    pub proto: String,
    /// Property name, e.g. `ttl`.
    pub property: String,
    /// `rw`.
    pub perm: String,
    /// The value the kernel has in netadmd's network namespace (the
    /// configured one without a kernel mirror).
    pub current: String,
    /// The persistent value, empty when none is set.
    pub persistent: String,
    /// The kernel's default.
    pub default: String,
    /// Possible values.
    pub possible: String,
}

/// An IP interface (`show-if`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfRow {
    /// Interface name (same as its link).
    pub ifname: String,
    /// `ip`.
    pub class: String,
    /// `ok` while its link's rings run, else `down`.
    pub state: String,
    /// Flags in effect, ipadm style (e.g. `bm--------46`).
    pub current: String,
    /// Whether it is in the persistent configuration (`-46` / `--`).
    pub persistent: String,
    /// The kernel device mirroring it, or empty when none was made.
    pub kernel_device: String,
    /// How the kernel device differs from the configuration, when someone
    /// changed it behind netadm's back (state `drifted` or `missing`);
    /// empty when it does not. `RefreshIf` puts it back.
    pub drift: String,
}

/// An address object (`show-addr`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddrRow {
    /// `if/tag`.
    pub addrobj: String,
    /// `static`.
    pub r#type: String,
    /// `ok`, or `inaccessible` when its interface is down.
    pub state: String,
    /// `192.0.2.1/24`.
    pub addr: String,
    /// ipadm's CURRENT flags: `U` up, `u` unnumbered, `p` private, `t`
    /// temporary, `d` deprecated (`-` where not), e.g. `U----`.
    pub current: String,
    /// ipadm's PERSISTENT flags: `U` up, `p` private, `d` deprecated;
    /// empty when the object is not persistent.
    pub persistent: String,
}

/// A traffic stream on a link (`show-traffic`).
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficRow {
    /// The link it is sent from.
    pub link: String,
    /// Whether the generator is still sending.
    pub running: bool,
    /// Target rate, frames per second (0: as fast as the link takes).
    pub rate: u64,
    /// Frame size, bytes.
    pub size: u32,
    /// Flows.
    pub flows: u32,
    /// Frames the link accepted. The generator discards nothing: a frame
    /// the link does not take (ring full, senders paused, link down) is held
    /// and handed over later, so nothing it built is left out of `lost`.
    pub sent: u64,
    /// Distinct frames received back (reflector) or at the far end (cable).
    pub received: u64,
    /// Sent and not received (includes frames still in flight while running).
    pub lost: u64,
    /// Received after a later frame of their flow.
    pub reordered: u64,
    /// Received more than once.
    pub duplicated: u64,
    /// Mean latency, µs.
    pub latency_avg_us: f64,
    /// 99th percentile latency, µs.
    pub latency_p99_us: f64,
    /// Largest latency, µs (a frame held across a sender pause carries it).
    pub latency_max_us: f64,
    /// The longest sender pause, µs: the longest time the generator held
    /// frames the link would not take, including one still going on.
    pub pause_max_us: f64,
    /// All sender pauses together, µs.
    pub paused_us: f64,
}

/// Traffic counters of a link (`show-link -s`, `show-phys -s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsRow {
    /// Link name.
    pub link: String,
    /// Frames received.
    pub ipackets: u64,
    /// Bytes received.
    pub rbytes: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Frames dropped on receive (no buffer, ring stopped).
    pub idrops: u64,
    /// Frames the wire lost on send (no carrier, far end full).
    pub odrops: u64,
}

/// What link protection dropped on a VNIC, by reason, and what it let
/// through (`show-link -s`): a row for every VNIC that has protection
/// or had it since netadmd started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectRow {
    /// Link name.
    pub link: String,
    /// Its protections now (`mac-nospoof,ip-nospoof`; empty: none).
    pub protection: String,
    /// Where they are enforced: `datapath` (an emulated VNIC) or `kernel`.
    pub enforced: String,
    /// Frames dropped by mac-nospoof.
    pub mac_nospoof: u64,
    /// Frames dropped by ip-nospoof.
    pub ip_nospoof: u64,
    /// Frames dropped by dhcp-nospoof.
    pub dhcp_nospoof: u64,
    /// Frames dropped by restricted.
    pub restricted: u64,
    /// Frames the protection let through.
    pub opackets: u64,
    /// Their bytes.
    pub obytes: u64,
}

//! Kernel links made, changed and read over the one rtnetlink connection,
//! with the `rtnetlink` crate's builders: macvlans (VNICs over a kernel
//! port), veth pairs and bridges (etherstubs), 802.1Q VLANs and bonds
//! (aggregations), ifb devices (ingress shaping); masters, groups, zone
//! moves, deletes one by one and by group; a read-back of everything
//! netadm decides on.
//!
//! Two traps of the crate, avoided here: `LinkBridge::new` makes the
//! bridge up (it is built from `LinkMessageBuilder::<LinkBridge>::new`,
//! which does not), and `link().set()` (`RTM_SETLINK`) ignores
//! `IFLA_LINKINFO`, so a bond's active port goes through `link().change()`
//! (`RTM_NEWLINK` without `NLM_F_CREATE`).

use std::os::fd::{AsFd, AsRawFd};

use rtnetlink::packet_route::link::{
    BondAdInfo, BondPortState, BridgeStpState, InfoBond, InfoBondPort, InfoData, InfoKind,
    InfoMacVlan, InfoPortData, InfoVeth, InfoVlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
    MiiStatus, State,
};
use rtnetlink::packet_route::link::{
    BondLacpRate, BondMode as NlBondMode, BondXmitHashPolicy, MacVlanMode as NlMacVlanMode,
};
use rtnetlink::{
    LinkBond, LinkIfb, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth, LinkVlan,
};

use rtnetlink::packet_route::RouteNetlinkMessage;

use crate::{KernelError, Netlink, Netns, check_ifname, errors};

/// What kind of device a link is (`IFLA_INFO_KIND`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// A macvlan (a VNIC over a kernel port).
    MacVlan,
    /// One end of a veth pair.
    Veth,
    /// A bridge (an etherstub).
    Bridge,
    /// An 802.1Q VLAN.
    Vlan,
    /// A bond (an aggregation).
    Bond,
    /// An ifb (where ingress traffic is shaped).
    Ifb,
    /// A TUN/TAP device.
    Tun,
    /// Another kind, by the kernel's name for it.
    Other(String),
}

impl LinkKind {
    fn of(k: &InfoKind) -> Self {
        match k {
            InfoKind::MacVlan => Self::MacVlan,
            InfoKind::Veth => Self::Veth,
            InfoKind::Bridge => Self::Bridge,
            InfoKind::Vlan => Self::Vlan,
            InfoKind::Bond => Self::Bond,
            InfoKind::Ifb => Self::Ifb,
            InfoKind::Tun => Self::Tun,
            k => Self::Other(k.to_string()),
        }
    }
}

/// A macvlan's mode (`IFLA_MACVLAN_MODE`). netadm makes `Bridge` ones, so
/// VNICs over one port reach each other as illumos's do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacVlanMode {
    /// `private`: no traffic between macvlans of one lower device.
    Private,
    /// `vepa`: through the external switch.
    Vepa,
    /// `bridge`: macvlans of one lower device reach each other directly.
    Bridge,
    /// `passthru`: the one macvlan takes the lower device over.
    Passthru,
    /// `source`: by source MAC.
    Source,
    /// A mode this crate does not know.
    Other(u32),
}

impl From<&NlMacVlanMode> for MacVlanMode {
    fn from(m: &NlMacVlanMode) -> Self {
        match m {
            NlMacVlanMode::Private => Self::Private,
            NlMacVlanMode::Vepa => Self::Vepa,
            NlMacVlanMode::Bridge => Self::Bridge,
            NlMacVlanMode::Passthrough => Self::Passthru,
            NlMacVlanMode::Source => Self::Source,
            NlMacVlanMode::Other(n) => Self::Other(*n),
            _ => Self::Other(u32::MAX),
        }
    }
}

/// RFC 2863 operational state (`IFLA_OPERSTATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OperState {
    /// The driver does not say.
    #[default]
    Unknown,
    /// A component is missing.
    NotPresent,
    /// Down.
    Down,
    /// Down because a device below it is.
    LowerLayerDown,
    /// In a test mode.
    Testing,
    /// Waiting for an external event.
    Dormant,
    /// Up: it passes packets.
    Up,
    /// A state this crate does not know.
    Other(u8),
}

impl From<&State> for OperState {
    fn from(s: &State) -> Self {
        match s {
            State::Unknown => Self::Unknown,
            State::NotPresent => Self::NotPresent,
            State::Down => Self::Down,
            State::LowerLayerDown => Self::LowerLayerDown,
            State::Testing => Self::Testing,
            State::Dormant => Self::Dormant,
            State::Up => Self::Up,
            State::Other(n) => Self::Other(*n),
            _ => Self::Other(u8::MAX),
        }
    }
}

/// A bond's mode (`IFLA_BOND_MODE`, as `ip link ... type bond mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BondMode {
    /// `balance-rr`.
    BalanceRr,
    /// `active-backup`: one port carries traffic, the others stand by.
    ActiveBackup,
    /// `balance-xor`: ports chosen by the transmit hash.
    BalanceXor,
    /// `broadcast`.
    Broadcast,
    /// `802.3ad`: LACP.
    Lacp,
    /// `balance-tlb`.
    BalanceTlb,
    /// `balance-alb`.
    BalanceAlb,
    /// A mode this crate does not know.
    Other(u8),
}

impl BondMode {
    fn netlink(self) -> NlBondMode {
        match self {
            Self::BalanceRr => NlBondMode::BalanceRr,
            Self::ActiveBackup => NlBondMode::ActiveBackup,
            Self::BalanceXor => NlBondMode::BalanceXor,
            Self::Broadcast => NlBondMode::Broadcast,
            Self::Lacp => NlBondMode::Ieee8023Ad,
            Self::BalanceTlb => NlBondMode::BalanceTlb,
            Self::BalanceAlb => NlBondMode::BalanceAlb,
            Self::Other(n) => NlBondMode::Other(n),
        }
    }

    fn of(m: &NlBondMode) -> Self {
        [
            Self::BalanceRr,
            Self::ActiveBackup,
            Self::BalanceXor,
            Self::Broadcast,
            Self::Lacp,
            Self::BalanceTlb,
            Self::BalanceAlb,
        ]
        .into_iter()
        .find(|b| b.netlink() == *m)
        .unwrap_or(Self::Other(u8::from(*m)))
    }

    /// Whether the bond has one active port (its `active_slave` may be
    /// set): active-backup, balance-tlb, balance-alb (the kernel's
    /// `BOND_OPT_ACTIVE_SLAVE` refuses the others with EACCES).
    pub fn has_active_port(self) -> bool {
        matches!(self, Self::ActiveBackup | Self::BalanceTlb | Self::BalanceAlb)
    }
}

/// How a bond picks a port for a packet (`IFLA_BOND_XMIT_HASH_POLICY`);
/// balance-xor, 802.3ad and balance-tlb use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XmitHashPolicy {
    /// `layer2`: MAC addresses.
    Layer2,
    /// `layer2+3`: MAC and IP addresses.
    Layer23,
    /// `layer3+4`: IP addresses and ports.
    Layer34,
    /// `encap2+3`.
    Encap23,
    /// `encap3+4`.
    Encap34,
    /// `vlan+srcmac`.
    VlanSrcMac,
    /// A policy this crate does not know.
    Other(u8),
}

impl XmitHashPolicy {
    fn netlink(self) -> BondXmitHashPolicy {
        match self {
            Self::Layer2 => BondXmitHashPolicy::Layer2,
            Self::Layer23 => BondXmitHashPolicy::Layer23,
            Self::Layer34 => BondXmitHashPolicy::Layer34,
            Self::Encap23 => BondXmitHashPolicy::Encap23,
            Self::Encap34 => BondXmitHashPolicy::Encap34,
            Self::VlanSrcMac => BondXmitHashPolicy::VlanSrcMac,
            Self::Other(n) => BondXmitHashPolicy::Other(n),
        }
    }

    fn of(p: &BondXmitHashPolicy) -> Self {
        [Self::Layer2, Self::Layer23, Self::Layer34, Self::Encap23, Self::Encap34, Self::VlanSrcMac]
            .into_iter()
            .find(|x| x.netlink() == *p)
            .unwrap_or(Self::Other(u8::from(*p)))
    }
}

/// How often an 802.3ad partner is asked to send LACPDUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LacpRate {
    /// Every 30 s.
    Slow,
    /// Every second.
    Fast,
}

/// A bond to create (`ip link add NAME type bond mode ... xmit_hash_policy
/// ... lacp_rate ... miimon ... min_links ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BondSpec {
    /// Its mode.
    pub mode: BondMode,
    /// The transmit hash (the kernel's default: layer2).
    pub xmit_hash_policy: Option<XmitHashPolicy>,
    /// 802.3ad only (the kernel refuses it in other modes).
    pub lacp_rate: Option<LacpRate>,
    /// The MII link check interval, in ms (0: off).
    pub miimon: Option<u32>,
    /// Ports that must be up for the bond to have carrier.
    pub min_links: Option<u32>,
    /// 802.3ad only: whether it sends LACPDUs on its own (`lacp_active
    /// on`, the kernel's default) or only answers a partner that does
    /// (`off`: passive). Kernel 5.14 and later.
    pub lacp_active: Option<bool>,
}

impl BondSpec {
    /// A bond of mode `mode` with the kernel's defaults.
    pub fn new(mode: BondMode) -> Self {
        Self {
            mode,
            xmit_hash_policy: None,
            lacp_rate: None,
            miimon: None,
            min_links: None,
            lacp_active: None,
        }
    }
}

/// What of a bond's settings differs from what a [`BondSpec`] asks, in
/// the three ways the kernel lets them change ([`BondState::differs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BondChange {
    /// Settings the kernel changes on a bond that is up with ports
    /// (`xmit_hash_policy`, `miimon`, `min_links`): only those that differ.
    pub live: Option<BondSpec>,
    /// Settings the kernel changes only while the bond is down
    /// (`lacp_rate`, `lacp_active`): ports stay in it.
    pub down: bool,
    /// The mode, which the kernel changes only on a bond that is down and
    /// has no ports.
    pub mode: bool,
}

impl BondChange {
    /// Whether nothing differs.
    pub fn is_empty(&self) -> bool {
        self.live.is_none() && !self.down && !self.mode
    }
}

/// A bond as the kernel reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BondState {
    /// Its mode.
    pub mode: Option<BondMode>,
    /// Its active port (interface index), in modes that have one.
    pub active_port: Option<u32>,
    /// The transmit hash.
    pub xmit_hash_policy: Option<XmitHashPolicy>,
    /// 802.3ad: the LACP rate.
    pub lacp_rate: Option<LacpRate>,
    /// The MII check interval (ms).
    pub miimon: Option<u32>,
    /// Its min_links.
    pub min_links: Option<u32>,
    /// 802.3ad: whether it is active (`lacp_active`; kernel 5.14 on).
    pub lacp_active: Option<bool>,
    /// 802.3ad: the active aggregator's id.
    pub aggregator: Option<u16>,
    /// 802.3ad: the system priority it sends as the actor.
    pub actor_system_priority: Option<u16>,
    /// 802.3ad: the system id it sends (all zeros: the bond's MAC).
    pub actor_system: Option<[u8; 6]>,
}

impl BondState {
    /// What must change for the bond to be as `want` asks; a setting
    /// `want` leaves out is the kernel's business and never differs.
    pub fn differs(&self, want: &BondSpec) -> BondChange {
        let mut live = BondSpec::new(want.mode);
        let mut any_live = false;
        if want.xmit_hash_policy.is_some() && want.xmit_hash_policy != self.xmit_hash_policy {
            live.xmit_hash_policy = want.xmit_hash_policy;
            any_live = true;
        }
        if want.miimon.is_some() && want.miimon != self.miimon {
            live.miimon = want.miimon;
            any_live = true;
        }
        if want.min_links.is_some() && want.min_links != self.min_links {
            live.min_links = want.min_links;
            any_live = true;
        }
        let mode = self.mode != Some(want.mode);
        let lacp = want.mode == BondMode::Lacp;
        let down = lacp
            && ((want.lacp_rate.is_some() && want.lacp_rate != self.lacp_rate)
                || (want.lacp_active.is_some()
                    && self.lacp_active.is_some()
                    && want.lacp_active != self.lacp_active));
        BondChange { live: any_live.then_some(live), down, mode }
    }
}

/// A bond's port as the kernel reports it (`IFLA_INFO_SLAVE_DATA`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BondPort {
    /// The bond's link monitor has it up.
    pub mii_up: bool,
    /// Active (not a backup): the one carrying traffic in active-backup.
    pub active: bool,
    /// 802.3ad: the aggregator it is in.
    pub aggregator: Option<u16>,
    /// 802.3ad: its state as the actor (LACP state bits, [`lacp`]).
    pub actor_state: Option<u8>,
    /// 802.3ad: its partner's state as last heard.
    pub partner_state: Option<u8>,
    /// Its own MAC (the bond gives it the bond's while it is a port).
    pub perm_mac: Option<[u8; 6]>,
}

/// LACP state bits (IEEE 802.1AX), as [`BondPort`] reports them.
pub mod lacp {
    /// Synchronization: in sync with its partner.
    pub const SYNC: u8 = 0x08;
    /// Collecting.
    pub const COLLECTING: u8 = 0x10;
    /// Distributing.
    pub const DISTRIBUTING: u8 = 0x20;
    /// Defaulted: no partner heard.
    pub const DEFAULTED: u8 = 0x40;
}

/// Options any new link may be given when it is made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewLink {
    /// Its MAC address (a unicast one); the kernel picks a random one
    /// without it.
    pub mac: Option<[u8; 6]>,
    /// Its MTU; the kernel's default without it (a macvlan or VLAN: its
    /// lower device's, which it may not exceed).
    pub mtu: Option<u32>,
    /// Its link group (`IFLA_GROUP`), so a set of links can be deleted in
    /// one request ([`Netlink::del_group`]).
    pub group: Option<u32>,
    /// Made up; down without it.
    pub up: bool,
}

impl NewLink {
    fn apply<T>(
        &self,
        name: &str,
        mut b: LinkMessageBuilder<T>,
    ) -> Result<LinkMessageBuilder<T>, KernelError> {
        if let Some(mac) = self.mac {
            check_mac(name, mac)?;
            b = b.address(mac.to_vec());
        }
        if let Some(m) = self.mtu {
            b = b.mtu(m);
        }
        if let Some(g) = self.group {
            b = b.link_group(g);
        }
        Ok(if self.up { b.up() } else { b })
    }
}

/// A link as the kernel reports it: what netadm decides on when it adopts
/// what exists, and reads back after a change. (Its `Default` is a link
/// the kernel would never report, for tests of what reads one.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkDetail {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Its kind; `None` for a device with no `IFLA_INFO_KIND` (a NIC's
    /// driver, loopback).
    pub kind: Option<LinkKind>,
    /// The master it is enslaved to (a bridge or bond), by index.
    pub master: Option<u32>,
    /// `IFLA_LINK`: a macvlan's or VLAN's lower device, a veth's peer (by
    /// index; in the namespace [`LinkDetail::link_netnsid`] names, when
    /// that is given).
    pub lower: Option<u32>,
    /// `IFLA_LINK_NETNSID`: the namespace the lower device or peer is in,
    /// when it is another one (an id local to this namespace).
    pub link_netnsid: Option<i32>,
    /// Its link group (0: the default).
    pub group: u32,
    /// MTU.
    pub mtu: u32,
    /// The smallest MTU it takes.
    pub min_mtu: Option<u32>,
    /// The largest MTU it takes.
    pub max_mtu: Option<u32>,
    /// Its MAC address (an Ethernet one).
    pub mac: Option<[u8; 6]>,
    /// The factory MAC (`IFLA_PERM_ADDRESS`), on devices that have one.
    pub perm_mac: Option<[u8; 6]>,
    /// Administratively up.
    pub up: bool,
    /// Carrier (link detected).
    pub carrier: Option<bool>,
    /// Operational state.
    pub operstate: OperState,
    /// A macvlan's mode.
    pub macvlan_mode: Option<MacVlanMode>,
    /// A VLAN's id.
    pub vlan_id: Option<u16>,
    /// A bond's settings.
    pub bond: Option<BondState>,
    /// A bond port's state, when it is one.
    pub bond_port: Option<BondPort>,
    /// A bridge's STP state (true: on).
    pub stp: Option<bool>,
    /// The device's bus and its address there (`pci`, `0000:03:00.0`),
    /// for a NIC on a bus.
    pub parent: Option<(String, String)>,
}

fn mac6(a: &[u8]) -> Option<[u8; 6]> {
    a.try_into().ok()
}

impl LinkDetail {
    /// Reads a link message.
    pub(crate) fn parse(m: &LinkMessage) -> Self {
        let mut l = LinkDetail {
            index: m.header.index,
            name: String::new(),
            kind: None,
            master: None,
            lower: None,
            link_netnsid: None,
            group: 0,
            mtu: 0,
            min_mtu: None,
            max_mtu: None,
            mac: None,
            perm_mac: None,
            up: m.header.flags.contains(LinkFlags::Up),
            carrier: None,
            operstate: OperState::Unknown,
            macvlan_mode: None,
            vlan_id: None,
            bond: None,
            bond_port: None,
            stp: None,
            parent: None,
        };
        let (mut bus, mut dev) = (None, None);
        for a in &m.attributes {
            match a {
                LinkAttribute::IfName(n) => l.name = n.clone(),
                LinkAttribute::Mtu(v) => l.mtu = *v,
                LinkAttribute::MinMtu(v) => l.min_mtu = Some(*v),
                LinkAttribute::MaxMtu(v) => l.max_mtu = Some(*v),
                LinkAttribute::Address(a) => l.mac = mac6(a),
                LinkAttribute::PermAddress(a) => l.perm_mac = mac6(a),
                LinkAttribute::Group(g) => l.group = *g,
                LinkAttribute::Link(i) => l.lower = Some(*i),
                LinkAttribute::LinkNetNsId(n) => l.link_netnsid = Some(*n),
                LinkAttribute::Controller(i) => l.master = Some(*i),
                LinkAttribute::Carrier(c) => l.carrier = Some(*c != 0),
                LinkAttribute::OperState(s) => l.operstate = s.into(),
                LinkAttribute::ParentDevBusName(b) => bus = Some(b.clone()),
                LinkAttribute::ParentDevName(d) => dev = Some(d.clone()),
                LinkAttribute::LinkInfo(infos) => l.info(infos),
                _ => {}
            }
        }
        l.parent = bus.zip(dev);
        l
    }

    fn info(&mut self, infos: &[LinkInfo]) {
        for i in infos {
            match i {
                LinkInfo::Kind(k) => self.kind = Some(LinkKind::of(k)),
                LinkInfo::Data(InfoData::MacVlan(d)) => {
                    self.macvlan_mode = d.iter().find_map(|x| match x {
                        InfoMacVlan::Mode(m) => Some(m.into()),
                        _ => None,
                    });
                }
                LinkInfo::Data(InfoData::Vlan(d)) => {
                    self.vlan_id = d.iter().find_map(|x| match x {
                        InfoVlan::Id(id) => Some(*id),
                        _ => None,
                    });
                }
                LinkInfo::Data(InfoData::Bond(d)) => self.bond = Some(bond_state(d)),
                LinkInfo::PortData(InfoPortData::BondPort(d)) => {
                    self.bond_port = Some(bond_port(d));
                }
                LinkInfo::Data(InfoData::Bridge(d)) => {
                    self.stp = d.iter().find_map(|x| match x {
                        rtnetlink::packet_route::link::InfoBridge::StpState(s) => {
                            Some(*s != BridgeStpState::Disabled)
                        }
                        _ => None,
                    });
                }
                _ => {}
            }
        }
    }
}

fn bond_state(d: &[InfoBond]) -> BondState {
    let mut b = BondState::default();
    for x in d {
        match x {
            InfoBond::Mode(m) => b.mode = Some(BondMode::of(m)),
            InfoBond::ActivePort(i) => b.active_port = Some(*i),
            InfoBond::XmitHashPolicy(p) => b.xmit_hash_policy = Some(XmitHashPolicy::of(p)),
            InfoBond::AdLacpRate(BondLacpRate::Fast) => b.lacp_rate = Some(LacpRate::Fast),
            InfoBond::AdLacpRate(BondLacpRate::Slow) => b.lacp_rate = Some(LacpRate::Slow),
            InfoBond::MiiMon(v) => b.miimon = Some(*v),
            InfoBond::MinLinks(v) => b.min_links = Some(*v),
            InfoBond::AdLacpActive(v) => b.lacp_active = Some(*v),
            InfoBond::AdActorSysPrio(v) => b.actor_system_priority = Some(*v),
            InfoBond::AdActorSystem(v) => b.actor_system = Some(*v),
            InfoBond::AdInfo(info) => {
                b.aggregator = info.iter().find_map(|i| match i {
                    BondAdInfo::Aggregator(a) => Some(*a),
                    _ => None,
                });
            }
            _ => {}
        }
    }
    b
}

fn bond_port(d: &[InfoBondPort]) -> BondPort {
    let mut p = BondPort::default();
    for x in d {
        match x {
            InfoBondPort::MiiStatus(s) => p.mii_up = *s == MiiStatus::Up,
            InfoBondPort::BondPortState(s) => p.active = *s == BondPortState::Active,
            InfoBondPort::AdAggregatorId(a) => p.aggregator = Some(*a),
            InfoBondPort::AdActorOperPortState(s) => p.actor_state = Some(s.bits()),
            InfoBondPort::AdPartnerOperPortState(s) => p.partner_state = Some(s.bits()),
            InfoBondPort::PermHwaddr(m) => p.perm_mac = mac6(m),
            _ => {}
        }
    }
    p
}

/// A MAC a device can take: unicast, not all zeros (the kernel answers
/// EADDRNOTAVAIL, which would read as "not found").
fn check_mac(name: &str, mac: [u8; 6]) -> Result<(), KernelError> {
    let bad = |reason: &str| {
        let mac = mac.map(|b| format!("{b:02x}")).join(":");
        Err(KernelError::Invalid { what: format!("MAC {mac} for {name}"), reason: reason.into() })
    };
    if mac[0] & 1 != 0 {
        return bad("a multicast address cannot be a device's");
    }
    if mac == [0; 6] {
        return bad("all zeros is not an address");
    }
    Ok(())
}

/// The bond message: mode first (the kernel applies it first anyway, and
/// refuses it once the bond has ports or is up).
fn bond_message(name: &str, spec: &BondSpec) -> Result<LinkMessageBuilder<LinkBond>, KernelError> {
    for (given, what) in
        [(spec.lacp_rate.is_some(), "lacp_rate"), (spec.lacp_active.is_some(), "lacp_active")]
    {
        if given && spec.mode != BondMode::Lacp {
            return Err(KernelError::Invalid {
                what: format!("bond {name}: {what}"),
                reason: "applies to mode 802.3ad only".into(),
            });
        }
    }
    Ok(bond_settings(LinkBond::new(name).mode(spec.mode.netlink()), spec))
}

/// A change of bond `index`'s settings: `spec`'s (`mode` only when
/// `with_mode`), as `ip link set BOND type bond ...` sends them.
fn bond_change_message(index: u32, spec: &BondSpec, with_mode: bool) -> LinkMessage {
    let mut b = LinkMessageBuilder::<LinkBond>::new_with_info_kind(InfoKind::Bond).index(index);
    if with_mode {
        b = b.mode(spec.mode.netlink());
    }
    bond_settings(b, spec).build()
}

/// `spec`'s settings but its mode, after what bond message `b` has: those
/// a new bond is made with and those a change sends, in the same order.
fn bond_settings(
    mut b: LinkMessageBuilder<LinkBond>,
    spec: &BondSpec,
) -> LinkMessageBuilder<LinkBond> {
    if let Some(p) = spec.xmit_hash_policy {
        b = b.xmit_hash_policy(p.netlink());
    }
    if let Some(r) = spec.lacp_rate {
        b = b.ad_lacp_rate(match r {
            LacpRate::Slow => BondLacpRate::Slow,
            LacpRate::Fast => BondLacpRate::Fast,
        });
    }
    if let Some(m) = spec.miimon {
        b = b.miimon(m);
    }
    if let Some(m) = spec.min_links {
        b = b.min_links(m);
    }
    if let Some(a) = spec.lacp_active {
        b = b.ad_lacp_active(a);
    }
    b
}

/// `ip link set BOND type bond active_slave PORT`: the bond's kind and
/// `IFLA_BOND_ACTIVE_SLAVE` (the crate's `ActivePort`), by index.
fn active_port_message(bond: u32, port: u32) -> LinkMessage {
    LinkMessageBuilder::<LinkBond>::new_with_info_kind(InfoKind::Bond)
        .index(bond)
        .active_port(port)
        .build()
}

impl Netlink {
    /// Sends `RTM_NEWLINK` with `NLM_F_CREATE | NLM_F_EXCL` for a device of
    /// kind `kind`; `names` says which device(s) a name clash is about.
    fn create(&self, kind: &str, names: &str, msg: LinkMessage) -> Result<(), KernelError> {
        let what = format!("{kind} {names}");
        self.new_link(&format!("create {what}"), msg).map_err(|e| match e {
            KernelError::Exists { .. } => {
                KernelError::Exists { what: format!("interface {names}") }
            }
            e => errors::link_kind_missing(e, kind, &what),
        })
    }

    /// Creates macvlans in bridge mode, each `(name, lower, options)` as
    /// [`Netlink::add_macvlan`] makes one here, in turn (a request costs
    /// its two system calls, answered in this thread). The first that
    /// fails is the error: those before it are made, those after it not.
    pub fn add_macvlans(&self, many: &[(&str, u32, NewLink)]) -> Result<(), KernelError> {
        for (name, lower, opts) in many {
            self.add_macvlan(name, *lower, opts, None)?;
        }
        Ok(())
    }

    /// Creates macvlan `name` in bridge mode over `lower` (an index in
    /// this connection's namespace); with `zone`, straight inside that
    /// namespace (one request; its lower device stays here).
    pub fn add_macvlan(
        &self,
        name: &str,
        lower: u32,
        opts: &NewLink,
        zone: Option<&Netns>,
    ) -> Result<(), KernelError> {
        check_ifname(name)?;
        let mut b = opts.apply(name, LinkMacVlan::new(name, lower, NlMacVlanMode::Bridge))?;
        if let Some(z) = zone {
            b = b.setns_by_fd(z.as_fd().as_raw_fd());
        }
        self.create("macvlan", name, b.build())
    }

    /// Creates veth pair `name` / `peer`, both with `opts`' MTU (a pair of
    /// two MTUs drops what the larger end sends); the MAC, group and up
    /// state are `name`'s only. The peer is made down, wherever it is: the
    /// kernel refuses to open it before the pair is joined (ENOTCONN), so
    /// it is brought up afterwards where it lives. With `peer_zone`, the
    /// peer is made inside that namespace.
    pub fn add_veth(
        &self,
        name: &str,
        peer: &str,
        opts: &NewLink,
        peer_zone: Option<&Netns>,
    ) -> Result<(), KernelError> {
        check_ifname(name)?;
        check_ifname(peer)?;
        let mut p = LinkUnspec::new_with_name(peer);
        if let Some(m) = opts.mtu {
            p = p.mtu(m);
        }
        if let Some(z) = peer_zone {
            p = p.setns_by_fd(z.as_fd().as_raw_fd());
        }
        let b = opts
            .apply(name, LinkVeth::new(name, peer))?
            .set_info_data(InfoData::Veth(InfoVeth::Peer(p.build())));
        self.create("veth", &format!("{name} or {peer}"), b.build())
    }

    /// Creates bridge `name` with STP off, down unless `opts.up`.
    pub fn add_bridge(&self, name: &str, opts: &NewLink) -> Result<(), KernelError> {
        check_ifname(name)?;
        let b = LinkMessageBuilder::<rtnetlink::LinkBridge>::new(name)
            .stp_state(BridgeStpState::Disabled);
        self.create("bridge", name, opts.apply(name, b)?.build())
    }

    /// Creates 802.1Q VLAN `name` with id `vid` (1 to 4094) over `parent`.
    /// A kernel without `8021q` gives [`KernelError::NotSupported`].
    pub fn add_vlan(
        &self,
        name: &str,
        parent: u32,
        vid: u16,
        opts: &NewLink,
    ) -> Result<(), KernelError> {
        check_ifname(name)?;
        if !(1..=4094).contains(&vid) {
            return Err(KernelError::Invalid {
                what: format!("VLAN {name}: id {vid}"),
                reason: "a VLAN id is 1 to 4094".into(),
            });
        }
        let b = opts.apply(name, LinkVlan::new(name, parent, vid))?;
        self.create("vlan", name, b.build())
    }

    /// Creates bond `name`. A kernel without `bonding` gives
    /// [`KernelError::NotSupported`].
    pub fn add_bond(&self, name: &str, spec: &BondSpec, opts: &NewLink) -> Result<(), KernelError> {
        check_ifname(name)?;
        let b = opts.apply(name, bond_message(name, spec)?)?;
        self.create("bond", name, b.build())
    }

    /// Creates ifb device `name` (ingress traffic redirected to it leaves
    /// through its qdisc, where it can be shaped).
    pub fn add_ifb(&self, name: &str, opts: &NewLink) -> Result<(), KernelError> {
        check_ifname(name)?;
        self.create("ifb", name, opts.apply(name, LinkIfb::new(name))?.build())
    }

    fn set(&self, op: &str, msg: LinkMessage) -> Result<(), KernelError> {
        self.set_link_msg(op, msg)
    }

    /// Enslaves link `port` to bridge or bond `master`, or (`None`)
    /// releases it from the one it has.
    pub fn set_master(&self, port: u32, master: Option<u32>) -> Result<(), KernelError> {
        let b = LinkUnspec::new_with_index(port);
        let (b, op) = match master {
            Some(m) => (b.controller(m), format!("enslave link {port} to {m}")),
            None => (b.nocontroller(), format!("release link {port} from its master")),
        };
        self.set(&op, b.build())
    }

    /// Makes `port` bond `bond`'s active port (active-backup, balance-tlb,
    /// balance-alb). A link that is not a bond is [`KernelError::Invalid`].
    pub fn set_active_port(&self, bond: u32, port: u32) -> Result<(), KernelError> {
        let op = format!("make link {port} the active port of {bond}");
        let l = self.link_detail(bond)?;
        if l.kind != Some(LinkKind::Bond) {
            return Err(KernelError::Invalid {
                what: op,
                reason: format!("{} is not a bond", l.name),
            });
        }
        // RTM_NEWLINK without NLM_F_CREATE: RTM_SETLINK ignores IFLA_LINKINFO.
        self.change_link(&op, active_port_message(bond, port))
    }

    /// Changes bond `index`'s settings to `spec`'s, in place (what `spec`
    /// leaves out stays): its mode too when `with_mode`. The kernel
    /// refuses a mode change while the bond is up or has ports, and an
    /// LACP rate or activity change while it is up
    /// ([`KernelError::Refused`]); [`BondState::differs`] says which is
    /// which.
    pub fn set_bond(
        &self,
        index: u32,
        spec: &BondSpec,
        with_mode: bool,
    ) -> Result<(), KernelError> {
        let op = format!("change bond {index}'s settings");
        self.change_link(&op, bond_change_message(index, spec, with_mode))
    }

    /// Puts link `index` in link group `group`.
    pub fn set_group(&self, index: u32, group: u32) -> Result<(), KernelError> {
        let m = LinkUnspec::new_with_index(index).link_group(group).build();
        self.set(&format!("put link {index} in group {group}"), m)
    }

    /// Moves link `index` into namespace `zone` (a name taken there is
    /// [`KernelError::Exists`]).
    pub fn move_to(&self, index: u32, zone: &Netns) -> Result<(), KernelError> {
        let m = LinkUnspec::new_with_index(index).setns_by_fd(zone.as_fd().as_raw_fd()).build();
        self.set(&format!("move link {index} to zone {}", zone.zone()), m)
    }

    /// Deletes link `index` (a veth takes its peer with it; a lower device
    /// its macvlans and VLANs, in zones too). Each delete waits for the
    /// kernel's RCU grace period (~17 ms here): many go faster as a group.
    pub fn del_link(&self, index: u32) -> Result<(), KernelError> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        self.ack(&format!("delete link {index}"), RouteNetlinkMessage::DelLink(m), 0)
    }

    /// Deletes every link of group `group` in one request, all or nothing
    /// (one grace period for all). An empty group is
    /// [`KernelError::NotFound`]; group 0, every device's default, is
    /// [`KernelError::Invalid`].
    pub fn del_group(&self, group: u32) -> Result<(), KernelError> {
        let op = format!("delete link group {group}");
        if group == 0 {
            return Err(KernelError::Invalid {
                what: op,
                reason: "group 0 is every device's default group".into(),
            });
        }
        // RTM_DELLINK with index 0 and IFLA_GROUP: the kernel's group delete.
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::Group(group));
        self.ack(&op, RouteNetlinkMessage::DelLink(m), 0).map_err(|e| match e {
            KernelError::NotFound { .. } => {
                KernelError::NotFound { what: format!("link group {group}") }
            }
            e => e,
        })
    }

    /// Reads link `index` back.
    pub fn link_detail(&self, index: u32) -> Result<LinkDetail, KernelError> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        Ok(LinkDetail::parse(&self.get_link(&format!("read link {index}"), m)?))
    }

    /// Reads link `name` back.
    pub fn link_named(&self, name: &str) -> Result<LinkDetail, KernelError> {
        check_ifname(name)?;
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.into()));
        Ok(LinkDetail::parse(&self.get_link(&format!("interface {name}"), m)?))
    }

    /// Every link in the connection's namespace (one dump), for adopting
    /// what exists at start.
    pub fn links(&self) -> Result<Vec<LinkDetail>, KernelError> {
        Ok(self.dump_links("list links")?.iter().map(LinkDetail::parse).collect())
    }

    /// Every link's traffic counters in the connection's namespace, by
    /// name (one dump; the kernel's `IFLA_STATS64`, as `ip -s link`).
    pub fn link_counters(
        &self,
    ) -> Result<std::collections::BTreeMap<String, LinkCounters>, KernelError> {
        Ok(self.dump_links("list links")?.iter().filter_map(LinkCounters::parse).collect())
    }
}

/// A link's traffic counters as the kernel keeps them (`ip -s link`), in
/// the device's own sense: `rx` is what it received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped on receive.
    pub rx_dropped: u64,
    /// Frames dropped on send.
    pub tx_dropped: u64,
}

impl LinkCounters {
    /// The name and counters a link message carries (none without both).
    fn parse(m: &LinkMessage) -> Option<(String, Self)> {
        let name = m.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(n) => Some(n.clone()),
            _ => None,
        })?;
        let s = m.attributes.iter().find_map(|a| match a {
            LinkAttribute::Stats64(s) => Some(s),
            _ => None,
        })?;
        let c = LinkCounters {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            rx_dropped: s.rx_dropped,
            tx_dropped: s.tx_dropped,
        };
        Some((name, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(m: &LinkMessage) -> Vec<LinkInfo> {
        crate::netlink::first_attr(&m.attributes, |a| match a {
            LinkAttribute::LinkInfo(i) => Some(i),
            _ => None,
        })
    }

    #[test]
    fn a_bond_message_carries_what_iproute2_sends_and_reads_back() {
        let spec = BondSpec {
            mode: BondMode::Lacp,
            xmit_hash_policy: Some(XmitHashPolicy::Layer34),
            lacp_rate: Some(LacpRate::Fast),
            miimon: Some(100),
            min_links: Some(1),
            lacp_active: Some(false),
        };
        let m = bond_message("b0", &spec).unwrap().build();
        let infos = data(&m);
        assert_eq!(infos[0], LinkInfo::Kind(InfoKind::Bond));
        let LinkInfo::Data(InfoData::Bond(d)) = &infos[1] else { panic!("{infos:?}") };
        assert_eq!(d[0], InfoBond::Mode(NlBondMode::Ieee8023Ad), "mode first");
        // The message read back as the kernel would report it.
        let mut read = m.clone();
        read.attributes.push(LinkAttribute::IfName("b0".into()));
        let l = LinkDetail::parse(&read);
        assert_eq!(l.kind, Some(LinkKind::Bond));
        let b = l.bond.unwrap();
        assert_eq!(
            (b.mode, b.xmit_hash_policy, b.lacp_rate, b.miimon, b.min_links),
            (
                Some(BondMode::Lacp),
                Some(XmitHashPolicy::Layer34),
                Some(LacpRate::Fast),
                Some(100),
                Some(1)
            )
        );
        // Passive LACP reaches the kernel as lacp_active off.
        assert_eq!(b.lacp_active, Some(false));
        for mode in [BondMode::ActiveBackup, BondMode::BalanceXor] {
            assert_eq!(BondMode::of(&mode.netlink()), mode);
            let bad = BondSpec { mode, lacp_rate: Some(LacpRate::Slow), ..BondSpec::new(mode) };
            assert!(matches!(bond_message("b0", &bad), Err(KernelError::Invalid { .. })));
            let bad = BondSpec { lacp_active: Some(true), ..BondSpec::new(mode) };
            assert!(matches!(bond_message("b0", &bad), Err(KernelError::Invalid { .. })));
        }
        assert!(BondMode::ActiveBackup.has_active_port() && !BondMode::Lacp.has_active_port());

        // The active port: the bond by index, its kind, the port's index.
        let m = active_port_message(5, 9);
        assert_eq!(m.header.index, 5);
        assert_eq!(
            data(&m),
            [
                LinkInfo::Kind(InfoKind::Bond),
                LinkInfo::Data(InfoData::Bond(vec![InfoBond::ActivePort(9)]))
            ]
        );
        let mut read = m.clone();
        read.attributes.push(LinkAttribute::IfName("b0".into()));
        assert_eq!(LinkDetail::parse(&read).bond.unwrap().active_port, Some(9));
    }

    #[test]
    fn a_bond_spec_change_is_sorted_by_what_the_kernel_needs_for_it() {
        let have = BondState {
            mode: Some(BondMode::Lacp),
            xmit_hash_policy: Some(XmitHashPolicy::Layer2),
            lacp_rate: Some(LacpRate::Slow),
            miimon: Some(100),
            min_links: Some(0),
            lacp_active: Some(true),
            ..BondState::default()
        };
        let same = BondSpec {
            mode: BondMode::Lacp,
            xmit_hash_policy: Some(XmitHashPolicy::Layer2),
            lacp_rate: Some(LacpRate::Slow),
            miimon: Some(100),
            min_links: None,
            lacp_active: Some(true),
        };
        assert!(have.differs(&same).is_empty());
        let hash = BondSpec { xmit_hash_policy: Some(XmitHashPolicy::Layer34), ..same.clone() };
        let c = have.differs(&hash);
        assert_eq!((c.down, c.mode), (false, false));
        let live = c.live.unwrap();
        assert_eq!((live.xmit_hash_policy, live.miimon), (Some(XmitHashPolicy::Layer34), None));
        let rate = BondSpec { lacp_rate: Some(LacpRate::Fast), ..same.clone() };
        assert_eq!(have.differs(&rate), BondChange { live: None, down: true, mode: false });
        let passive = BondSpec { lacp_active: Some(false), ..same.clone() };
        assert!(have.differs(&passive).down);
        let xor =
            BondSpec { mode: BondMode::BalanceXor, lacp_rate: None, lacp_active: None, ..same };
        assert_eq!(have.differs(&xor), BondChange { live: None, down: false, mode: true });

        // The change names the bond by index, mode only when asked.
        let m = bond_change_message(4, &hash, false);
        assert_eq!(m.header.index, 4);
        let infos = data(&m);
        let LinkInfo::Data(InfoData::Bond(d)) = &infos[1] else { panic!("{infos:?}") };
        assert!(!d.iter().any(|x| matches!(x, InfoBond::Mode(_))), "{d:?}");
        assert!(d.contains(&InfoBond::XmitHashPolicy(BondXmitHashPolicy::Layer34)), "{d:?}");
        let m = bond_change_message(4, &hash, true);
        let LinkInfo::Data(InfoData::Bond(d)) = &data(&m)[1] else { panic!() };
        assert_eq!(d[0], InfoBond::Mode(NlBondMode::Ieee8023Ad));
    }

    #[test]
    fn a_bond_ports_state_is_read_from_its_port_data() {
        use rtnetlink::packet_route::link::{InfoPortKind, LacpState};
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName("eth0".into()));
        m.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::PortKind(InfoPortKind::Bond),
            LinkInfo::PortData(InfoPortData::BondPort(vec![
                InfoBondPort::MiiStatus(MiiStatus::Up),
                InfoBondPort::BondPortState(BondPortState::Backup),
                InfoBondPort::AdAggregatorId(2),
                InfoBondPort::AdActorOperPortState(LacpState::from_bits_retain(0x3d)),
                InfoBondPort::AdPartnerOperPortState(LacpState::from_bits_retain(0x0d)),
            ])),
        ]));
        let p = LinkDetail::parse(&m).bond_port.unwrap();
        assert!(p.mii_up && !p.active);
        assert_eq!(
            (p.aggregator, p.actor_state, p.partner_state),
            (Some(2), Some(0x3d), Some(0x0d))
        );
        assert!(p.actor_state.unwrap() & lacp::DISTRIBUTING != 0);
        assert!(p.partner_state.unwrap() & lacp::DISTRIBUTING == 0);
    }

    #[test]
    fn a_vlan_message_names_parent_and_id() {
        let m = LinkVlan::new("v10", 7, 10).build();
        assert!(m.attributes.contains(&LinkAttribute::Link(7)));
        let mut read = m.clone();
        read.attributes.push(LinkAttribute::IfName("v10".into()));
        let l = LinkDetail::parse(&read);
        assert_eq!((l.kind, l.vlan_id, l.lower), (Some(LinkKind::Vlan), Some(10), Some(7)));
    }

    #[test]
    fn bad_macs_are_refused_before_the_kernel_sees_them() {
        assert!(check_mac("x", [2, 0, 0, 0, 0, 1]).is_ok());
        assert!(matches!(check_mac("x", [1, 0, 0, 0, 0, 1]), Err(KernelError::Invalid { .. })));
        assert!(matches!(check_mac("x", [0; 6]), Err(KernelError::Invalid { .. })));
    }
}

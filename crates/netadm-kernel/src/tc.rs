//! Traffic control over the rtnetlink connection: an htb root with
//! classes (rate, ceil, prio) and u32 filters that send a source MAC to a
//! class, for `maxbw` and `priority` between the VNICs of a kernel port;
//! tbf for a single rate; clsact with a mirred redirect to an ifb, for
//! shaping what comes in. Created, changed, deleted and read back.
//!
//! netlink-packet-route 0.34 has no htb or tbf type, and rtnetlink 0.24
//! cannot create a class nor a qdisc of another kind than ingress, so
//! qdiscs and classes are `TcMessage`s written here, their options the
//! kernel's structs laid out by hand (`tc_ratespec`, `tc_htb_glob`,
//! `tc_htb_opt`, `tc_tbf_qopt`), and sent with `Handle::request`. Filters
//! use rtnetlink's u32 builder. Reading back, the crate hands unknown
//! kinds' `TCA_OPTIONS` over as one opaque attribute, parsed here.
//!
//! Rates carry `linklayer = TC_LINKLAYER_ETHERNET`, so the kernel computes
//! transmit times itself and needs no 1 KiB rate table per rate (iproute2
//! still sends them, for kernels before 3.8).

use std::time::Duration;

use rtnetlink::packet_core::{
    DefaultNla, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, Nla, NlasIterator,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::tc::{
    TcAction, TcActionAttribute, TcActionMirrorOption, TcActionOption, TcAttribute,
    TcFilterU32Option, TcHandle, TcMessage, TcOption, TcStats2, TcU32Key, TcU32Selector,
    TcU32SelectorFlags,
};

use crate::netlink::first_attr;
use crate::{KernelError, Netlink, errors};

/// A rate, in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    /// `n` Mbit/s.
    pub const fn mbit(n: u64) -> Self {
        Self(n * 1_000_000)
    }

    /// In bytes per second, as the kernel counts.
    pub const fn bytes(self) -> u64 {
        self.0 / 8
    }
}

/// A qdisc or class handle, `major:minor` (tc writes both in hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcId {
    /// The qdisc's number.
    pub major: u16,
    /// The class within it (0 for the qdisc itself).
    pub minor: u16,
}

impl TcId {
    /// The root of a device's egress (`root`).
    pub const ROOT: Self = Self { major: 0xffff, minor: 0xffff };
    /// Where clsact (and ingress) attach (`ffff:fff1`).
    pub const CLSACT: Self = Self { major: 0xffff, minor: 0xfff1 };
    /// clsact's ingress hook, where ingress filters go (`ffff:fff2`).
    pub const INGRESS: Self = Self { major: 0xffff, minor: 0xfff2 };
    /// clsact's egress hook (`ffff:fff3`): its filters see what a device
    /// sends before its root qdisc does.
    pub const EGRESS: Self = Self { major: 0xffff, minor: 0xfff3 };

    /// `major:minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        Self { major, minor }
    }

    fn netlink(self) -> TcHandle {
        TcHandle { major: self.major, minor: self.minor }
    }

    fn of(h: TcHandle) -> Self {
        Self { major: h.major, minor: h.minor }
    }
}

impl std::fmt::Display for TcId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::ROOT => f.write_str("root"),
            Self { major, minor } => write!(f, "{major:x}:{minor:x}"),
        }
    }
}

/// An htb class: what it is guaranteed, what it may borrow up to, and
/// its priority when borrowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtbClass {
    /// Guaranteed rate.
    pub rate: Rate,
    /// The most it may send, borrowing from its parent (at least `rate`).
    pub ceil: Rate,
    /// 0 (first) to 7: who borrows spare bandwidth first.
    pub prio: u32,
    /// Bytes it may send at once above `rate` (default: 1 ms at `rate`,
    /// at least 16 KiB).
    pub burst: Option<u32>,
    /// The same above `ceil`.
    pub cburst: Option<u32>,
}

impl HtbClass {
    /// A class of `rate` that may borrow up to `ceil`.
    pub fn new(rate: Rate, ceil: Rate) -> Self {
        Self { rate, ceil, prio: 0, burst: None, cburst: None }
    }
}

/// A token bucket: `rate`, with bursts of `burst` bytes, and packets
/// queued at most `latency` before they are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// The rate.
    pub rate: Rate,
    /// The bucket, in bytes (at least the MTU; a larger burst is more
    /// accurate at high rates).
    pub burst: u32,
    /// How long a packet may wait.
    pub latency: Duration,
}

/// A qdisc, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    /// Its handle.
    pub handle: TcId,
    /// Where it is attached.
    pub parent: TcId,
    /// Its kind and options.
    pub kind: QdiscKind,
}

/// A qdisc's kind, with the options this crate reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QdiscKind {
    /// htb, with its default class (the minor of unclassified traffic's).
    Htb {
        /// The default class's minor number.
        default: u16,
    },
    /// tbf.
    Tbf(Tbf),
    /// clsact.
    Clsact,
    /// Another kind (`noqueue`, `pfifo_fast`, `mq`, ...).
    Other(String),
}

/// A class, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// Its id.
    pub id: TcId,
    /// Its parent class; [`TcId::ROOT`] for a class at the top of its
    /// qdisc (as htb reports it, and `tc` shows "root").
    pub parent: TcId,
    /// An htb class's parameters (`None` for other kinds).
    pub htb: Option<HtbClass>,
    /// Frames queued in it now (its queue's length, as the kernel's
    /// statistics say; 0 where they say nothing).
    pub queued: u32,
    /// What it has sent since it was made: frames, bytes, and frames it
    /// dropped (its queue full).
    pub sent: ClassCounts,
}

/// What a class has sent since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// Frames sent.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames dropped.
    pub drops: u64,
}

/// One 32-bit key of a u32 selector: the word at `off` bytes from the
/// network header (negative: into the Ethernet header), under `mask`,
/// equals `val` (both as the word reads in network byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct U32Key {
    /// Offset from the network header, a multiple of 4.
    pub off: i32,
    /// The bits compared.
    pub mask: u32,
    /// Their wanted value.
    pub val: u32,
}

/// A u32 filter as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct U32Filter {
    /// Its priority (`pref`): filters are tried in this order; netadm
    /// gives each its own, to delete it alone.
    pub prio: u16,
    /// The kernel's handle for it (`800::800`, ...).
    pub handle: u32,
    /// The class it sends matching packets to.
    pub class: Option<TcId>,
    /// The source MAC it matches, when it is a [`Netlink::add_u32_src_mac`]
    /// filter.
    pub src_mac: Option<[u8; 6]>,
    /// The device a mirred action redirects matching packets to.
    pub redirect: Option<u32>,
    /// Its selector's keys, as the kernel holds them.
    pub keys: Vec<U32Key>,
}

// Attribute numbers (linux/pkt_sched.h).
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_BURST: u16 = 6;
/// `TCA_OPTIONS`, as the crate keeps it for kinds it does not know.
const TCA_OPTIONS: u16 = 2;
const TC_LINKLAYER_ETHERNET: u8 = 1;
const TC_HTB_PROTOVER: u32 = 3;
/// `ETH_P_ALL`, in network byte order as rtnetlink's `protocol()` wants.
const ETH_P_ALL: u16 = 0x0003u16.to_be();
/// A psched tick is 64 ns (`PSCHED_SHIFT` 6, a constant of the kernel's
/// since 3.x: `/proc/net/psched` says `000003e8 00000040`).
const TICK_NS: u64 = 64;

/// `struct tc_ratespec` (12 bytes) for `bytes` per second; the 32-bit
/// field holds `~0` when the rate needs its 64-bit attribute.
fn ratespec(bytes: u64) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[1] = TC_LINKLAYER_ETHERNET;
    b[8..12].copy_from_slice(&u32::try_from(bytes).unwrap_or(u32::MAX).to_ne_bytes());
    b
}

/// The time to send `len` bytes at `bytes` per second, in psched ticks.
fn ticks(len: u32, bytes: u64) -> u32 {
    let t =
        (u128::from(len) * 1_000_000_000).div_ceil(u128::from(bytes.max(1)) * u128::from(TICK_NS));
    u32::try_from(t).unwrap_or(u32::MAX)
}

/// What `t` ticks at `bytes` per second let through, in bytes.
fn ticks_to_len(t: u32, bytes: u64) -> u32 {
    let l = (u128::from(t) * u128::from(TICK_NS) * u128::from(bytes)) / 1_000_000_000;
    u32::try_from(l).unwrap_or(u32::MAX)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_of(b: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

fn nla(kind: u16, value: Vec<u8>) -> TcOption {
    TcOption::Other(DefaultNla::new(kind, value))
}

/// A rate's 64-bit attribute, when the 32-bit field cannot hold it.
fn rate64(kind: u16, bytes: u64) -> Option<TcOption> {
    (bytes > u64::from(u32::MAX)).then(|| nla(kind, bytes.to_ne_bytes().to_vec()))
}

/// A rate read back: the 64-bit attribute if there is one.
fn rate_of(spec: &[u8], r64: Option<u64>) -> Rate {
    Rate(r64.unwrap_or_else(|| u64::from(u32_at(spec, 8).unwrap_or(0))) * 8)
}

fn default_burst(rate: Rate) -> u32 {
    u32::try_from(rate.bytes() / 1000).unwrap_or(u32::MAX).max(16 * 1024)
}

/// `TCA_HTB_INIT`: `struct tc_htb_glob` (version, rate2quantum, defcls,
/// debug, direct_pkts).
fn htb_init(default: u16) -> Vec<TcOption> {
    let glob: Vec<u8> = [TC_HTB_PROTOVER, 10, u32::from(default), 0, 0]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    vec![nla(TCA_HTB_INIT, glob)]
}

/// `TCA_HTB_PARMS`: `struct tc_htb_opt` (rate, ceil, buffer, cbuffer,
/// quantum, level, prio), and the 64-bit rates past 34 Gbit/s.
fn htb_class(c: &HtbClass) -> Vec<TcOption> {
    let (rate, ceil) = (c.rate.bytes(), c.ceil.bytes());
    let burst = c.burst.unwrap_or_else(|| default_burst(c.rate));
    let cburst = c.cburst.unwrap_or_else(|| default_burst(c.ceil));
    // The bytes a class sends per round: the kernel would take rate / 10
    // and complain outside 1000..200000; say it, within those bounds.
    let quantum = u32::try_from(rate / 10).unwrap_or(u32::MAX).clamp(1000, 200_000);
    let mut opt = Vec::with_capacity(44);
    opt.extend(ratespec(rate));
    opt.extend(ratespec(ceil));
    for v in [ticks(burst, rate), ticks(cburst, ceil), quantum, 0, c.prio] {
        opt.extend(v.to_ne_bytes());
    }
    let mut o = vec![nla(TCA_HTB_PARMS, opt)];
    o.extend(rate64(TCA_HTB_RATE64, rate));
    o.extend(rate64(TCA_HTB_CEIL64, ceil));
    o
}

/// `TCA_TBF_PARMS`: `struct tc_tbf_qopt` (rate, peakrate, limit, buffer,
/// mtu), `TCA_TBF_BURST`, and the 64-bit rate. The queue holds `latency`
/// at the rate plus the bucket, as tc computes it.
fn tbf(t: &Tbf) -> Vec<TcOption> {
    let rate = t.rate.bytes();
    let queued = u128::from(rate) * t.latency.as_nanos() / 1_000_000_000;
    let limit = u32::try_from(queued + u128::from(t.burst)).unwrap_or(u32::MAX);
    let mut opt = Vec::with_capacity(36);
    opt.extend(ratespec(rate));
    opt.extend([0u8; 12]);
    for v in [limit, ticks(t.burst, rate), 0] {
        opt.extend(v.to_ne_bytes());
    }
    let mut o = vec![nla(TCA_TBF_PARMS, opt), nla(TCA_TBF_BURST, t.burst.to_ne_bytes().to_vec())];
    o.extend(rate64(TCA_TBF_RATE64, rate));
    o
}

/// The nested attributes of an unknown kind's `TCA_OPTIONS`, by type.
fn options(m: &TcMessage) -> Vec<(u16, Vec<u8>)> {
    let mut out = vec![];
    for a in &m.attributes {
        let TcAttribute::Options(opts) = a else { continue };
        for o in opts {
            if let TcOption::Other(n) = o
                && n.kind() == TCA_OPTIONS
            {
                let mut v = vec![0; n.value_len()];
                n.emit_value(&mut v);
                for x in NlasIterator::new(&v[..]).map_while(Result::ok) {
                    out.push((x.kind(), x.value().to_vec()));
                }
            }
        }
    }
    out
}

fn kind(m: &TcMessage) -> String {
    first_attr(&m.attributes, |a| match a {
        TcAttribute::Kind(k) => Some(k),
        _ => None,
    })
}

fn parse_htb_class(opts: &[(u16, Vec<u8>)]) -> Option<HtbClass> {
    let get = |k| opts.iter().find(|(t, _)| *t == k).map(|(_, v)| v.as_slice());
    let p = get(TCA_HTB_PARMS)?;
    let rate = rate_of(p.get(0..12)?, get(TCA_HTB_RATE64).and_then(u64_of));
    let ceil = rate_of(p.get(12..24)?, get(TCA_HTB_CEIL64).and_then(u64_of));
    Some(HtbClass {
        rate,
        ceil,
        prio: u32_at(p, 40)?,
        burst: Some(ticks_to_len(u32_at(p, 24)?, rate.bytes())),
        cburst: Some(ticks_to_len(u32_at(p, 28)?, ceil.bytes())),
    })
}

fn parse_tbf(opts: &[(u16, Vec<u8>)]) -> Option<Tbf> {
    let get = |k| opts.iter().find(|(t, _)| *t == k).map(|(_, v)| v.as_slice());
    let p = get(TCA_TBF_PARMS)?;
    let rate = rate_of(p.get(0..12)?, get(TCA_TBF_RATE64).and_then(u64_of));
    let burst = ticks_to_len(u32_at(p, 28)?, rate.bytes());
    let queued = u64::from(u32_at(p, 24)?.saturating_sub(burst));
    let latency = Duration::from_nanos(queued * 1_000_000_000 / rate.bytes().max(1));
    Some(Tbf { rate, burst, latency })
}

fn parse_qdisc(m: &TcMessage) -> Qdisc {
    let k = kind(m);
    let opts = options(m);
    let kind = match k.as_str() {
        "htb" => {
            let glob = opts.iter().find(|(t, _)| *t == TCA_HTB_INIT).map(|(_, v)| v.as_slice());
            let default = glob.and_then(|g| u32_at(g, 8)).unwrap_or(0);
            QdiscKind::Htb { default: u16::try_from(default).unwrap_or(u16::MAX) }
        }
        "tbf" => parse_tbf(&opts).map_or(QdiscKind::Other(k), QdiscKind::Tbf),
        "clsact" => QdiscKind::Clsact,
        _ => QdiscKind::Other(k),
    };
    Qdisc { handle: TcId::of(m.header.handle), parent: TcId::of(m.header.parent), kind }
}

/// The source MAC a selector matches, if it is the two keys
/// [`Netlink::add_u32_src_mac`] writes.
fn src_mac_of(keys: &[U32Key]) -> Option<[u8; 6]> {
    let [a, b] = keys else { return None };
    if (a.off, a.mask, b.off, b.mask) != (-8, u32::MAX, -4, 0xffff_0000) {
        return None;
    }
    let (hi, lo) = (a.val.to_be_bytes(), b.val.to_be_bytes());
    Some([hi[0], hi[1], hi[2], hi[3], lo[0], lo[1]])
}

/// The two u32 keys that match source MAC `mac` at egress: offsets are
/// from the network header, which the Ethernet source ends 2 bytes (the
/// EtherType) before (`tc ... u32 match ether src MAC`).
fn src_mac_keys(mac: [u8; 6]) -> Vec<U32Key> {
    vec![
        U32Key {
            off: -8,
            mask: u32::MAX,
            val: u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]),
        },
        U32Key { off: -4, mask: 0xffff_0000, val: u32::from_be_bytes([mac[4], mac[5], 0, 0]) },
    ]
}

fn parse_filter(m: &TcMessage) -> Option<U32Filter> {
    let mut f = U32Filter {
        prio: (m.header.info >> 16) as u16,
        handle: m.header.handle.into(),
        class: None,
        src_mac: None,
        redirect: None,
        keys: vec![],
    };
    let mut selector = false;
    for a in &m.attributes {
        let TcAttribute::Options(opts) = a else { continue };
        for o in opts {
            match o {
                TcOption::U32(TcFilterU32Option::ClassId(c)) => f.class = Some(TcId::of(*c)),
                TcOption::U32(TcFilterU32Option::Selector(s)) => {
                    selector = true;
                    f.keys = s
                        .keys
                        .iter()
                        .map(|k| U32Key { off: k.off, mask: k.mask, val: k.val })
                        .collect();
                    f.src_mac = src_mac_of(&f.keys);
                }
                TcOption::U32(TcFilterU32Option::Action(acts)) => f.redirect = redirect_of(acts),
                _ => {}
            }
        }
    }
    // The u32 hash tables the kernel lists beside the filters have no
    // selector.
    selector.then_some(f)
}

fn redirect_of(acts: &[TcAction]) -> Option<u32> {
    acts.iter().flat_map(|a| &a.attributes).find_map(|a| match a {
        TcActionAttribute::Options(o) => o.iter().find_map(|o| match o {
            TcActionOption::Mirror(TcActionMirrorOption::Parms(p)) => Some(p.ifindex),
            _ => None,
        }),
        _ => None,
    })
}

/// The TcMessage for device `ifindex`, `handle` under `parent`.
fn message(ifindex: u32, handle: TcId, parent: TcId) -> Result<TcMessage, KernelError> {
    let index = i32::try_from(ifindex)
        .map_err(|_| KernelError::NotFound { what: format!("interface {ifindex}") })?;
    let mut m = TcMessage::with_index(index);
    (m.header.handle, m.header.parent) = (handle.netlink(), parent.netlink());
    Ok(m)
}

fn with(mut m: TcMessage, kind: &str, opts: Vec<TcOption>) -> TcMessage {
    m.attributes.push(TcAttribute::Kind(kind.into()));
    if !opts.is_empty() {
        m.attributes.push(TcAttribute::Options(opts));
    }
    m
}

/// The queue length in `m`'s statistics (0 when it has none).
fn queued(m: &TcMessage) -> u32 {
    m.attributes
        .iter()
        .find_map(|a| match a {
            TcAttribute::Stats2(v) => v.iter().find_map(|s| match s {
                TcStats2::Queue(q) => Some(q.qlen),
                _ => None,
            }),
            TcAttribute::Stats(s) => Some(s.qlen),
            _ => None,
        })
        .unwrap_or(0)
}

/// `TCA_STATS_PKT64`: the packet count past 32 bits.
const TCA_STATS_PKT64: u16 = 8;

/// What `m`'s statistics say it sent and dropped.
fn sent(m: &TcMessage) -> ClassCounts {
    let mut c = ClassCounts::default();
    for a in &m.attributes {
        let TcAttribute::Stats2(v) = a else { continue };
        for s in v {
            match s {
                TcStats2::Basic(b) => {
                    c.bytes = b.bytes;
                    c.packets = c.packets.max(u64::from(b.packets));
                }
                TcStats2::Queue(q) => c.drops = u64::from(q.drops),
                TcStats2::Other(n) if n.kind() == TCA_STATS_PKT64 => {
                    let mut v = vec![0; n.value_len()];
                    n.emit_value(&mut v);
                    c.packets = u64_of(&v).unwrap_or(c.packets);
                }
                _ => {}
            }
        }
    }
    c
}

fn check_class(what: &str, c: &HtbClass) -> Result<(), KernelError> {
    let bad = |reason: &str| Err(KernelError::Invalid { what: what.into(), reason: reason.into() });
    if c.rate.bytes() == 0 {
        return bad("a rate of at least 8 bit/s");
    }
    if c.ceil < c.rate {
        return bad("ceil below rate");
    }
    if c.prio > 7 {
        return bad("htb priorities are 0 to 7");
    }
    Ok(())
}

/// Whether a traffic-control request creates (`NLM_F_CREATE |
/// NLM_F_EXCL`: one that exists is [`KernelError::Exists`]) or changes
/// what exists (one that does not is [`KernelError::NotFound`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Make it.
    Create,
    /// Change it in place.
    Change,
}

impl Mode {
    fn flags(self) -> u16 {
        match self {
            Self::Create => NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            Self::Change => NLM_F_ACK,
        }
    }
}

impl Netlink {
    /// Sends one tc request; ENOENT is typed by [`errors::tc`], naming
    /// `kind`'s module when the kernel lacks it.
    fn tc(
        &self,
        op: &str,
        kind: &str,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, KernelError> {
        self.request(op, msg, flags).map_err(|e| errors::tc(e, kind, op))
    }

    /// Adds qdisc `kind` with `opts` (the kinds this crate writes, and,
    /// for its tests, one the kernel may lack).
    pub(crate) fn add_qdisc(
        &self,
        ifindex: u32,
        handle: TcId,
        parent: TcId,
        kind: &str,
        opts: Vec<TcOption>,
        mode: Mode,
    ) -> Result<(), KernelError> {
        let op = format!("{} qdisc {kind} {handle} at {parent} of link {ifindex}", verb(mode));
        let m = with(message(ifindex, handle, parent)?, kind, opts);
        self.tc(&op, kind, RouteNetlinkMessage::NewQueueDiscipline(m), mode.flags()).map(drop)
    }

    /// Puts an htb qdisc, handle `major:`, at the root of link `ifindex`;
    /// unclassified traffic goes to class `major:default` (make it the
    /// restrictive one: traffic whose source MAC a zone changed lands
    /// there).
    pub fn add_htb(&self, ifindex: u32, major: u16, default: u16) -> Result<(), KernelError> {
        self.add_qdisc(
            ifindex,
            TcId::new(major, 0),
            TcId::ROOT,
            "htb",
            htb_init(default),
            Mode::Create,
        )
    }

    /// Adds or changes htb class `id` under `parent` (the htb qdisc, or
    /// a class of it that exists).
    pub fn set_htb_class(
        &self,
        ifindex: u32,
        id: TcId,
        parent: TcId,
        c: &HtbClass,
        mode: Mode,
    ) -> Result<(), KernelError> {
        let op = format!("{} htb class {id} (parent {parent}) of link {ifindex}", verb(mode));
        check_class(&op, c)?;
        if id.major != parent.major || id.minor == 0 {
            let reason = "a class is major:minor (minor above 0) under its own qdisc's major";
            return Err(KernelError::Invalid { what: op, reason: reason.into() });
        }
        // htb takes a parent class that does not exist for none, and makes
        // the class a top one: look first.
        if parent.minor != 0 && !self.classes(ifindex)?.iter().any(|c| c.id == parent) {
            return Err(KernelError::NotFound { what: format!("{op}: class {parent}") });
        }
        let m = with(message(ifindex, id, parent)?, "htb", htb_class(c));
        self.tc(&op, "htb", RouteNetlinkMessage::NewTrafficClass(m), mode.flags()).map(drop)
    }

    /// Gives htb class `class` a new, empty queue (a pfifo of the
    /// device's queue length, as htb makes its classes'), dropping what
    /// the old one held. htb takes a class's new priority only when the
    /// class has nothing queued: a change sets it without moving a
    /// backlogged class between its priorities' lists, so under a steady
    /// flood it would keep its old priority for as long as the flood lasts.
    pub fn empty_class(&self, ifindex: u32, class: TcId) -> Result<(), KernelError> {
        let leaf = self.qdiscs(ifindex)?.into_iter().find(|q| q.parent == class);
        match leaf {
            // A queue put there before: deleted, htb grafts a new one.
            Some(q) if q.handle.major != 0 => self.del_qdisc(ifindex, class),
            // htb's own (handle 0, which cannot be deleted): replaced.
            _ => {
                let op = format!("give class {class} of link {ifindex} an empty queue");
                let m = with(message(ifindex, TcId::new(0, 0), class)?, "pfifo", vec![]);
                let flags = NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
                self.tc(&op, "pfifo", RouteNetlinkMessage::NewQueueDiscipline(m), flags).map(drop)
            }
        }
    }

    /// Deletes class `id` (it must have no children nor filters pointing
    /// at it: EBUSY otherwise).
    pub fn del_class(&self, ifindex: u32, id: TcId) -> Result<(), KernelError> {
        let op = format!("delete class {id} of link {ifindex}");
        let m = message(ifindex, id, TcId::new(0, 0))?;
        self.tc(&op, "", RouteNetlinkMessage::DelTrafficClass(m), NLM_F_ACK).map(drop)
    }

    /// Puts (or changes) tbf qdisc `handle` at `parent` ([`TcId::ROOT`]
    /// or a class).
    pub fn set_tbf(
        &self,
        ifindex: u32,
        handle: TcId,
        parent: TcId,
        t: &Tbf,
        mode: Mode,
    ) -> Result<(), KernelError> {
        if t.rate.bytes() == 0 || t.burst == 0 {
            return Err(KernelError::Invalid {
                what: format!("tbf on link {ifindex}"),
                reason: "rate and burst must be above zero".into(),
            });
        }
        self.add_qdisc(ifindex, handle, parent, "tbf", tbf(t), mode)
    }

    /// Puts a clsact qdisc on link `ifindex`: hooks for ingress (and
    /// egress) filters, such as [`Netlink::add_ingress_redirect`].
    pub fn add_clsact(&self, ifindex: u32) -> Result<(), KernelError> {
        self.add_qdisc(ifindex, TcId::new(0xffff, 0), TcId::CLSACT, "clsact", vec![], Mode::Create)
    }

    /// Deletes the qdisc at `parent` ([`TcId::ROOT`], [`TcId::CLSACT`] or
    /// a class) with its classes and filters; the device goes back to its
    /// default qdisc.
    pub fn del_qdisc(&self, ifindex: u32, parent: TcId) -> Result<(), KernelError> {
        let op = format!("delete the qdisc at {parent} of link {ifindex}");
        let handle = if parent == TcId::CLSACT { TcId::new(0xffff, 0) } else { TcId::new(0, 0) };
        let m = message(ifindex, handle, parent)?;
        self.tc(&op, "", RouteNetlinkMessage::DelQueueDiscipline(m), NLM_F_ACK).map(drop)
    }

    fn u32_filter(
        &self,
        op: &str,
        ifindex: u32,
        parent: TcId,
        prio: u16,
        build: impl FnOnce(
            rtnetlink::TrafficFilterNewRequest,
        ) -> Result<rtnetlink::TrafficFilterNewRequest, rtnetlink::Error>,
    ) -> Result<(), KernelError> {
        if prio == 0 {
            return Err(KernelError::Invalid {
                what: op.into(),
                reason: "priority 0 is the kernel's to pick".into(),
            });
        }
        let index = message(ifindex, TcId::ROOT, TcId::ROOT)?.header.index;
        // priority() overwrites the protocol half of tcm_info: call it first.
        let req = self
            .handle()
            .traffic_filter(index)
            .add()
            .parent(parent.netlink().into())
            .priority(prio)
            .protocol(ETH_P_ALL);
        let req = build(req).map_err(|e| errors::typed(e, op))?;
        self.wait(op, req.execute()).map_err(|e| errors::tc(e, "u32", op))
    }

    /// Adds a u32 filter at `parent` (an htb qdisc), priority `prio`
    /// (1 to 65535, one per filter), sending frames from source MAC `mac`
    /// to class `class`. This kernel has no flower or matchall; u32
    /// matches the Ethernet header at negative offsets.
    pub fn add_u32_src_mac(
        &self,
        ifindex: u32,
        parent: TcId,
        prio: u16,
        mac: [u8; 6],
        class: TcId,
    ) -> Result<(), KernelError> {
        self.add_u32_match(ifindex, parent, prio, &src_mac_keys(mac), class)
    }

    /// Adds a u32 filter at `parent` (an htb qdisc, or one of its classes:
    /// its frames are then classified among its children), priority
    /// `prio`, sending the frames that match every one of `keys` to class
    /// `class`. No keys, or a key of mask 0: every frame.
    pub fn add_u32_match(
        &self,
        ifindex: u32,
        parent: TcId,
        prio: u16,
        keys: &[U32Key],
        class: TcId,
    ) -> Result<(), KernelError> {
        let op = format!("add u32 filter {prio} at {parent} to {class} on link {ifindex}");
        if keys.len() > 128 || keys.iter().any(|k| k.off % 4 != 0) {
            let reason = "at most 128 keys, each at an offset a multiple of 4";
            return Err(KernelError::Invalid { what: op, reason: reason.into() });
        }
        let mut sel = TcU32Selector::default();
        sel.flags = TcU32SelectorFlags::Terminal;
        sel.keys = keys
            .iter()
            .map(|k| {
                let mut t = TcU32Key::default();
                (t.mask, t.val, t.off) = (k.mask, k.val & k.mask, k.off);
                t
            })
            .collect();
        if sel.keys.is_empty() {
            sel.keys.push(TcU32Key::default());
        }
        sel.nkeys = sel.keys.len() as u8;
        let opts = [TcFilterU32Option::ClassId(class.netlink()), TcFilterU32Option::Selector(sel)];
        self.u32_filter(&op, ifindex, parent, prio, |r| r.u32(&opts))
    }

    /// Adds a u32 filter at clsact's ingress hook of `ifindex` (see
    /// [`Netlink::add_clsact`]) that redirects every frame to the egress
    /// of device `to` (an ifb, whose qdisc then shapes it): mirred egress
    /// redirect, the one tc action this kernel has.
    pub fn add_ingress_redirect(
        &self,
        ifindex: u32,
        prio: u16,
        to: u32,
    ) -> Result<(), KernelError> {
        let op = format!("redirect the ingress of link {ifindex} to link {to}");
        self.u32_filter(&op, ifindex, TcId::INGRESS, prio, |r| r.redirect(to))
    }

    /// Adds a u32 filter at clsact's egress hook of `ifindex` that sends
    /// every frame `ifindex` transmits out of device `to` instead (mirred
    /// egress redirect): a bond's traffic kept off one member while it
    /// resets. Deleted with [`Netlink::del_filter`] at [`TcId::EGRESS`].
    pub fn add_egress_redirect(&self, ifindex: u32, prio: u16, to: u32) -> Result<(), KernelError> {
        let op = format!("redirect what link {ifindex} sends to link {to}");
        self.u32_filter(&op, ifindex, TcId::EGRESS, prio, |r| r.redirect(to))
    }

    /// Deletes the filters of priority `prio` at `parent`.
    pub fn del_filter(&self, ifindex: u32, parent: TcId, prio: u16) -> Result<(), KernelError> {
        let op = format!("delete filter {prio} at {parent} of link {ifindex}");
        let mut m = message(ifindex, TcId::new(0, 0), parent)?;
        m.header.info = (u32::from(prio) << 16) | u32::from(ETH_P_ALL);
        self.tc(&op, "", RouteNetlinkMessage::DelTrafficFilter(m), NLM_F_ACK).map(drop)
    }

    fn dump(&self, op: &str, msg: RouteNetlinkMessage) -> Result<Vec<TcMessage>, KernelError> {
        let all = self.tc(op, "", msg, NLM_F_DUMP)?;
        Ok(all
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewQueueDiscipline(m)
                | RouteNetlinkMessage::NewTrafficClass(m)
                | RouteNetlinkMessage::NewTrafficFilter(m) => Some(m),
                _ => None,
            })
            .collect())
    }

    /// The qdiscs of link `ifindex`.
    pub fn qdiscs(&self, ifindex: u32) -> Result<Vec<Qdisc>, KernelError> {
        let m = message(ifindex, TcId::new(0, 0), TcId::new(0, 0))?;
        let all = self.dump("list qdiscs", RouteNetlinkMessage::GetQueueDiscipline(m))?;
        Ok(all.iter().filter(|m| m.header.index as u32 == ifindex).map(parse_qdisc).collect())
    }

    /// The classes of link `ifindex`.
    pub fn classes(&self, ifindex: u32) -> Result<Vec<Class>, KernelError> {
        let m = message(ifindex, TcId::new(0, 0), TcId::new(0, 0))?;
        let all = self.dump(
            &format!("list classes of link {ifindex}"),
            RouteNetlinkMessage::GetTrafficClass(m),
        )?;
        Ok(all
            .iter()
            .filter(|m| m.header.index as u32 == ifindex)
            .map(|m| Class {
                id: TcId::of(m.header.handle),
                parent: TcId::of(m.header.parent),
                htb: (kind(m) == "htb").then(|| parse_htb_class(&options(m))).flatten(),
                queued: queued(m),
                sent: sent(m),
            })
            .collect())
    }

    /// The u32 filters at `parent` of link `ifindex`.
    pub fn filters(&self, ifindex: u32, parent: TcId) -> Result<Vec<U32Filter>, KernelError> {
        let m = message(ifindex, TcId::new(0, 0), parent)?;
        let all = self.dump(
            &format!("list filters at {parent} of link {ifindex}"),
            RouteNetlinkMessage::GetTrafficFilter(m),
        )?;
        Ok(all.iter().filter(|m| kind(m) == "u32").filter_map(parse_filter).collect())
    }
}

fn verb(mode: Mode) -> &'static str {
    match mode {
        Mode::Create => "add",
        Mode::Change => "change",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(opts: &[TcOption]) -> Vec<(u16, Vec<u8>)> {
        opts.iter()
            .map(|o| match o {
                TcOption::Other(n) => {
                    let mut v = vec![0; n.value_len()];
                    n.emit_value(&mut v);
                    (n.kind(), v)
                }
                o => panic!("{o:?}"),
            })
            .collect()
    }

    #[test]
    fn the_kernels_structs_are_laid_out_as_it_reads_them() {
        let r = ratespec(12_500_000);
        assert_eq!(r[1], TC_LINKLAYER_ETHERNET);
        assert_eq!(u32_at(&r, 8), Some(12_500_000));
        assert_eq!(u32_at(&ratespec(1 << 40), 8), Some(u32::MAX), "past 32 bits: ~0");

        let init = raw(&htb_init(0x99));
        assert_eq!(init[0].0, TCA_HTB_INIT);
        assert_eq!(init[0].1.len(), 20);
        assert_eq!((u32_at(&init[0].1, 0), u32_at(&init[0].1, 8)), (Some(3), Some(0x99)));

        let c = HtbClass {
            prio: 3,
            burst: Some(20_000),
            cburst: Some(40_000),
            ..HtbClass::new(Rate::mbit(100), Rate::mbit(200))
        };
        let o = raw(&htb_class(&c));
        assert_eq!((o.len(), o[0].0, o[0].1.len()), (1, TCA_HTB_PARMS, 44));
        assert_eq!(u32_at(&o[0].1, 20), Some(25_000_000), "ceil in bytes/s");
        // 20000 bytes at 12.5 MB/s: 1.6 ms, 25000 ticks of 64 ns.
        assert_eq!(u32_at(&o[0].1, 24), Some(25_000));
        assert_eq!(u32_at(&o[0].1, 40), Some(3));
        assert_eq!(parse_htb_class(&o), Some(c), "read back as written");

        let fast = HtbClass::new(Rate(80_000_000_000), Rate(80_000_000_000));
        let o = raw(&htb_class(&fast));
        assert_eq!(
            o.iter().map(|x| x.0).collect::<Vec<_>>(),
            [TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64]
        );
        assert_eq!(parse_htb_class(&o).unwrap().rate, fast.rate);

        let t = Tbf { rate: Rate::mbit(50), burst: 32 * 1024, latency: Duration::from_millis(50) };
        let o = raw(&tbf(&t));
        assert_eq!((o[0].0, o[0].1.len(), o[1].0), (TCA_TBF_PARMS, 36, TCA_TBF_BURST));
        // limit: 50 ms at 6.25 MB/s plus the bucket.
        assert_eq!(u32_at(&o[0].1, 24), Some(312_500 + 32 * 1024));
        assert_eq!(parse_tbf(&o), Some(t));
    }

    #[test]
    fn a_source_mac_is_two_u32_keys_and_reads_back() {
        let mac = [0x02, 0, 0, 0, 0x0a, 0x02];
        let keys = src_mac_keys(mac);
        assert_eq!(
            (keys[0].val, keys[0].off, keys[1].val, keys[1].mask),
            (0x0200_0000, -8, 0x0a02_0000, 0xffff_0000)
        );
        assert_eq!(src_mac_of(&keys), Some(mac));
        assert_eq!(src_mac_of(&keys[..1]), None);
        assert_eq!(TcId::new(1, 0x10).to_string(), "1:10");
        assert_eq!(TcId::ROOT.to_string(), "root");
    }

    #[test]
    fn classes_the_kernel_would_take_wrongly_are_refused() {
        let ok = HtbClass::new(Rate::mbit(10), Rate::mbit(10));
        assert!(check_class("c", &ok).is_ok());
        for bad in [
            HtbClass { prio: 8, ..ok },
            HtbClass::new(Rate::mbit(10), Rate::mbit(5)),
            HtbClass::new(Rate(7), Rate(7)),
        ] {
            assert!(matches!(check_class("c", &bad), Err(KernelError::Invalid { .. })), "{bad:?}");
        }
    }
}

/// Kinds this kernel lacks, asked of the kernel itself (in a namespace
/// of the test's own): the refusal names the module.
#[cfg(test)]
mod kernel {
    use super::*;

    #[test]
    fn a_qdisc_or_classifier_the_kernel_lacks_is_not_supported_naming_its_module() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and not root");
            return eprintln!("skipped: needs root");
        }
        std::thread::spawn(|| {
            // SAFETY: moves only this thread, which ends with the test.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            let nl = Netlink::open().unwrap();
            let lo = nl.index("lo").unwrap();
            let e = nl.add_qdisc(lo, TcId::new(1, 0), TcId::ROOT, "netem", vec![], Mode::Create);
            assert!(
                matches!(&e, Err(KernelError::NotSupported { module, .. }) if module == "sch_netem"),
                "{e:?}"
            );
            nl.add_htb(lo, 1, 1).unwrap();
            let mut m = message(lo, TcId::new(0, 0), TcId::new(1, 0)).unwrap();
            m.header.info = (1 << 16) | u32::from(ETH_P_ALL);
            let m = with(m, "flower", vec![]);
            let flags = Mode::Create.flags();
            let e = nl.tc("add flower", "flower", RouteNetlinkMessage::NewTrafficFilter(m), flags);
            assert!(
                matches!(&e, Err(KernelError::NotSupported { module, .. }) if module == "cls_flower"),
                "{e:?}"
            );
            // ENOENT for what does not exist is NotFound, not a module.
            let e = nl.del_class(lo, TcId::new(1, 0x77));
            assert!(matches!(e, Err(KernelError::NotFound { .. })), "{e:?}");
        })
        .join()
        .unwrap();
    }
}

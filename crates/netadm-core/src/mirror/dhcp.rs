//! netadmd's DHCP client (`create-addr -T dhcp`, RFC 2131): one thread
//! per address object, speaking on the IP interface's TAP through a packet
//! socket (before it has an address, so it builds the IPv4 and UDP headers
//! itself). The frames it sends go out through the link's transmit path
//! like any the kernel sends on the TAP, and the server's answers come
//! back through the link's classifier: netadm's datapath carries them.
//!
//! DISCOVER → OFFER → REQUEST → ACK; the lease is installed as the
//! address with its lifetime (the kernel drops it if it is not renewed);
//! at T1 a unicast REQUEST renews it, at T2 a broadcast one rebinds it, at
//! its end the client starts over. Deleting the address object sends a
//! DHCPRELEASE and removes the address. Every wait is for a packet or a
//! deadline (poll), never a fixed sleep.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netadm_kernel::{KernelError, Netlink, PacketSocket};

use crate::CoreError;

const DISCOVER: u8 = 1;
const OFFER: u8 = 2;
const REQUEST: u8 = 3;
const DECLINE: u8 = 4;
const ACK: u8 = 5;
const NAK: u8 = 6;
const RELEASE: u8 = 7;
const COOKIE: [u8; 4] = [99, 130, 83, 99];
const BROADCAST: [u8; 6] = [0xff; 6];

/// What `show-addr` shows of a client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// The lease held, if any: address and prefix length.
    pub(crate) addr: Option<(Ipv4Addr, u8)>,
    /// How many times the lease was renewed (or rebound).
    pub(crate) renewals: u32,
}

/// A lease as the server granted it.
#[derive(Debug, Clone, Copy)]
struct Lease {
    ip: Ipv4Addr,
    prefix: u8,
    server: Ipv4Addr,
    server_mac: [u8; 6],
    secs: u32,
    t1: u32,
    t2: u32,
    at: Instant,
}

impl Lease {
    fn when(&self, secs: u32) -> Instant {
        self.at + Duration::from_secs(u64::from(secs))
    }
}

/// The lease an ACK `r` from MAC `from` grants (`old`: the lease it
/// renews, whose values stand in for options the ACK leaves out), checked
/// before it goes near the kernel: a unicast address that is neither its
/// subnet's network nor its broadcast address, a contiguous subnet mask
/// (prefix 1..=32), a lease of at least a second (the kernel refuses a
/// valid lifetime of 0), a server to renew with. T1 and T2 that are not
/// 0 < T1 < T2 < lease are the RFC 2131 defaults instead (0.5 and 0.875
/// of the lease).
fn lease_of(r: &Reply, from: [u8; 6], old: Option<&Lease>, at: Instant) -> Result<Lease, String> {
    let ip = r.yiaddr;
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback() {
        return Err(format!("address {ip} is not a unicast address"));
    }
    let prefix = match r.mask {
        None => old.map_or(32, |l| l.prefix),
        Some(m) => {
            let bits = u32::from(m);
            if bits.leading_ones() == 0 || bits.count_ones() != bits.leading_ones() {
                return Err(format!("subnet mask {m} is not a contiguous one of 1 to 32 bits"));
            }
            bits.leading_ones() as u8
        }
    };
    let hostmask = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
    let host = u32::from(ip) & hostmask;
    if prefix <= 30 && (host == 0 || host == hostmask) {
        return Err(format!("address {ip} is its /{prefix} subnet's network or broadcast address"));
    }
    let secs = r.secs.or(old.map(|l| l.secs)).unwrap_or(3600);
    if secs == 0 {
        return Err("lease time 0".to_owned());
    }
    let server =
        r.server.or(old.map(|l| l.server)).ok_or_else(|| "no server identifier".to_owned())?;
    let defaults = (secs / 2, (u64::from(secs) * 7 / 8) as u32);
    let (t1, t2) = match (r.t1.unwrap_or(defaults.0), r.t2.unwrap_or(defaults.1)) {
        (t1, t2) if 0 < t1 && t1 < t2 && t2 < secs => (t1, t2),
        _ => defaults,
    };
    Ok(Lease { ip, prefix, server, server_mac: from, secs, t1, t2, at })
}

/// What a server answered a REQUEST.
enum Answer {
    /// An ACK: the lease it grants.
    Lease(Lease),
    /// A NAK: the address is not (or no longer) ours.
    Nak,
    /// Nothing by the deadline (or the client stopped).
    Timeout,
}

/// What reply `r` (from MAC `from`) answers to a REQUEST (`old`: the lease
/// it renews): `None` if it is no answer (an OFFER, say), an error if it
/// is an ACK that cannot be used ([`lease_of`]).
fn answer(
    r: &Reply,
    from: [u8; 6],
    old: Option<&Lease>,
    at: Instant,
) -> Option<Result<Answer, String>> {
    match r.kind {
        ACK => Some(lease_of(r, from, old, at).map(Answer::Lease)),
        NAK => Some(Ok(Answer::Nak)),
        _ => None,
    }
}

type Shared = Arc<(Mutex<Status>, Condvar)>;

/// A running client; dropping it stops it and leaves the lease (as a
/// daemon that exits does), unless [`Client::release_when_dropped`] was
/// called: then it gives the lease back.
pub(crate) struct Client {
    stop: OwnedFd,
    release: Arc<AtomicBool>,
    status: Shared,
    thread: Option<JoinHandle<()>>,
}

/// The addresses of an interface its DHCP clients hold (the drift watcher
/// leaves them alone): each added before it is in the kernel, removed
/// after it is gone from it.
pub(crate) type Leased = Arc<Mutex<Vec<(IpAddr, u8)>>>;

impl Client {
    /// Starts a client on interface `index` (MAC `mac`) for `name`,
    /// speaking through `sock` (an IPv4 packet socket on it) and
    /// installing its lease over `nl` (the connection in the interface's
    /// network namespace: the daemon's, or its zone's).
    pub(crate) fn start(
        name: &str,
        sock: PacketSocket,
        nl: Arc<Netlink>,
        index: u32,
        mac: [u8; 6],
        leased: Leased,
    ) -> Result<Self, CoreError> {
        let stop = netadm_kernel::eventfd().map_err(|e| CoreError::hardware(e.to_string()))?;
        let release = Arc::new(AtomicBool::new(false));
        let status: Shared = Arc::default();
        let run = Run {
            sock,
            nl,
            index,
            mac,
            stop: stop.as_raw_fd(),
            stopping: Arc::new(AtomicBool::new(false)),
            release: release.clone(),
            status: status.clone(),
            leased,
            name: name.to_owned(),
            faults: Cell::new(0),
            gone: Cell::new(false),
            declined: Cell::new(false),
        };
        let thread = std::thread::Builder::new()
            .name(format!("dhcp-{name}"))
            .spawn(move || run.run())
            .map_err(|e| CoreError::hardware(e.to_string()))?;
        Ok(Self { stop, release, status, thread: Some(thread) })
    }

    /// What it holds now.
    pub(crate) fn status(&self) -> Status {
        self.status.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// A handle to wait on its status with.
    pub(crate) fn watch(&self) -> Watch {
        Watch(self.status.clone())
    }

    /// Has it give the lease back (DHCPRELEASE) and remove the address
    /// when it is stopped (dropped): which waits for its thread, so the
    /// caller drops it once it holds no lock others wait on.
    pub(crate) fn release_when_dropped(&self) {
        self.release.store(true, Ordering::Release);
    }
}

/// A client's status, to wait on.
pub(crate) struct Watch(Shared);

impl Watch {
    /// Waits until it holds a lease, or `deadline`; whether it does.
    pub(crate) fn wait_bound(&self, deadline: Instant) -> bool {
        let (m, cv) = &*self.0;
        let mut s = m.lock().unwrap_or_else(PoisonError::into_inner);
        while s.addr.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = cv.wait_timeout(s, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        netadm_kernel::wake(&self.stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Run {
    sock: PacketSocket,
    nl: Arc<Netlink>,
    index: u32,
    mac: [u8; 6],
    stop: std::os::fd::RawFd,
    stopping: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
    status: Shared,
    leased: Leased,
    name: String,
    /// Socket errors in a row (the wait before retrying grows with them).
    faults: Cell<u32>,
    /// The device is gone: the client ends, forgetting its lease.
    gone: Cell<bool>,
    /// The last lease was declined: the next attempt waits 10 s at least.
    declined: Cell<bool>,
}

/// What came on the socket by a deadline.
enum Recv {
    Got(usize, [u8; 6]),
    Timeout,
    Stop,
}

/// How long to wait before reading again after `faults` socket errors in
/// a row: 250 ms, doubling to 16 s.
fn fault_wait(faults: u32) -> Duration {
    Duration::from_millis(250) * (1 << faults.min(6))
}

/// A DHCP message received: its type and options, and the fields used.
#[derive(Clone)]
struct Reply {
    kind: u8,
    yiaddr: Ipv4Addr,
    server: Option<Ipv4Addr>,
    mask: Option<Ipv4Addr>,
    secs: Option<u32>,
    t1: Option<u32>,
    t2: Option<u32>,
}

fn random_xid() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom into a 4-byte buffer.
    unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    u32::from_ne_bytes(b)
}

/// An IPv4 packet carrying UDP from port 68 to port 67 (UDP checksum 0:
/// none, which IPv4 allows).
fn udp_packet(src: Ipv4Addr, dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
    let len = 20 + 8 + payload.len();
    let mut p = Vec::with_capacity(len);
    p.extend_from_slice(&[0x45, 0x10]);
    p.extend_from_slice(&(len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    // The header checksum (its field still 0).
    netadm_nic::offload::complete_csum(&mut p[..20], 0, 10);
    p.extend_from_slice(&68u16.to_be_bytes());
    p.extend_from_slice(&67u16.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

/// A client message: `kind`, transaction `xid`, `ciaddr`, and options.
fn message(kind: u8, xid: u32, mac: [u8; 6], ciaddr: Ipv4Addr, opts: &[(u8, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; 236];
    m[..4].copy_from_slice(&[1, 1, 6, 0]);
    m[4..8].copy_from_slice(&xid.to_be_bytes());
    // A message the server answers (DISCOVER, REQUEST): the broadcast
    // flag while we have no address (the answer to ff:ff:ff:ff:ff:ff
    // reaches us without one), and the options we want. RFC 2131 table
    // 5: neither in a DECLINE or a RELEASE, which are not answered.
    let answered = !matches!(kind, DECLINE | RELEASE);
    if answered && ciaddr.is_unspecified() {
        m[10] = 0x80;
    }
    m[12..16].copy_from_slice(&ciaddr.octets());
    m[28..34].copy_from_slice(&mac);
    m.extend_from_slice(&COOKIE);
    m.extend_from_slice(&[53, 1, kind]);
    let mut id = vec![1];
    id.extend_from_slice(&mac);
    m.extend_from_slice(&[61, 7]);
    m.extend_from_slice(&id);
    for (code, v) in opts {
        m.push(*code);
        m.push(v.len() as u8);
        m.extend_from_slice(v);
    }
    // Ask for subnet mask, lease time, T1, T2.
    if answered {
        m.extend_from_slice(&[55, 4, 1, 51, 58, 59]);
    }
    m.push(255);
    m
}

/// Parses an IPv4/UDP packet to port 68 carrying a BOOTREPLY for `xid`
/// and `mac`; anything else is `None`. The socket sees every IPv4 packet
/// on the link, whoever sent it: every length and bound is checked (the
/// header length against 20 and the total length, the total length
/// against what arrived, the UDP length against the total length), so a
/// malformed one is ignored, never indexed past.
fn parse(p: &[u8], xid: u32, mac: [u8; 6]) -> Option<Reply> {
    let vihl = *p.first()?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 || p.len() < ihl {
        return None;
    }
    // Up to the IP total length (what follows is link padding).
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let p = p.get(..total).filter(|p| p.len() >= ihl)?;
    // UDP, not a fragment (more-fragments flag or an offset).
    if p[9] != 17 || u16::from_be_bytes([p[6], p[7]]) & 0x3fff != 0 {
        return None;
    }
    let udp = p.get(ihl..ihl + 8)?;
    if u16::from_be_bytes([udp[2], udp[3]]) != 68 {
        return None;
    }
    let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if ulen < 8 {
        return None;
    }
    let m = p.get(ihl + 8..ihl + ulen)?;
    if m.len() < 240 || m[0] != 2 || m[4..8] != xid.to_be_bytes() || m[28..34] != mac {
        return None;
    }
    if m[236..240] != COOKIE {
        return None;
    }
    let ip = |b: &[u8]| <[u8; 4]>::try_from(b).ok().map(Ipv4Addr::from);
    let u32_of = |b: &[u8]| <[u8; 4]>::try_from(b).ok().map(u32::from_be_bytes);
    let mut r = Reply {
        kind: 0,
        yiaddr: ip(&m[16..20])?,
        server: None,
        mask: None,
        secs: None,
        t1: None,
        t2: None,
    };
    let mut o = &m[240..];
    while let [code, rest @ ..] = o {
        match code {
            0 => {
                o = rest;
                continue;
            }
            255 => break,
            _ => {}
        }
        let (&len, rest) = rest.split_first()?;
        let v = rest.get(..usize::from(len))?;
        match code {
            53 => r.kind = *v.first()?,
            54 => r.server = ip(v),
            1 => r.mask = ip(v),
            51 => r.secs = u32_of(v),
            58 => r.t1 = u32_of(v),
            59 => r.t2 = u32_of(v),
            _ => {}
        }
        o = &rest[usize::from(len)..];
    }
    (r.kind != 0).then_some(r)
}

enum Wait {
    Got(Reply, [u8; 6]),
    Timeout,
    Stop,
}

impl Run {
    fn stopped(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The next packet on the socket, until `deadline`. A socket error
    /// is waited out (on the stop descriptor) and the read retried: the
    /// device going down, say, fails one read with ENETDOWN, and once it
    /// is up again the socket receives again. Only a device that is gone
    /// (deleted behind netadm's back: `refresh-if` starts a new client)
    /// ends the client.
    fn recv(&self, buf: &mut [u8], deadline: Instant) -> Recv {
        loop {
            match self.sock.recv(buf, deadline, self.stop) {
                Ok(Some((n, from))) => {
                    self.faults.set(0);
                    return Recv::Got(n, from);
                }
                Ok(None) if Instant::now() >= deadline => return Recv::Timeout,
                Ok(None) => {
                    self.stopping.store(true, Ordering::Release);
                    return Recv::Stop;
                }
                Err(e) if matches!(self.nl.link(self.index), Err(KernelError::NotFound { .. })) => {
                    tracing::warn!(interface = %self.name, "DHCP: {e}; the device is gone");
                    self.gone.set(true);
                    self.stopping.store(true, Ordering::Release);
                    return Recv::Stop;
                }
                Err(e) => {
                    let wait = fault_wait(self.faults.get());
                    self.faults.set(self.faults.get().saturating_add(1));
                    tracing::warn!(interface = %self.name, "DHCP: {e}; reading again in {wait:?}");
                    self.pause((Instant::now() + wait).min(deadline));
                    if self.stopped() {
                        return Recv::Stop;
                    }
                }
            }
        }
    }

    /// Waits for a reply to `xid` until `deadline`.
    fn wait(&self, xid: u32, deadline: Instant) -> Wait {
        let mut buf = vec![0u8; 2048];
        loop {
            match self.recv(&mut buf, deadline) {
                Recv::Got(n, from) => {
                    if let Some(r) = parse(&buf[..n], xid, self.mac) {
                        return Wait::Got(r, from);
                    }
                }
                Recv::Timeout => return Wait::Timeout,
                Recv::Stop => return Wait::Stop,
            }
        }
    }

    /// Waits until `until`, or until the client is stopped.
    fn pause(&self, until: Instant) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stopped() {
                return;
            }
            let mut fd = libc::pollfd { fd: self.stop, events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut fd, 1, ms) } > 0 {
                self.stopping.store(true, Ordering::Release);
            }
        }
    }

    fn send(&self, to: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, msg: &[u8]) {
        if let Err(e) = self.sock.send(to, &udp_packet(src, dst, msg)) {
            tracing::warn!(interface = %self.name, "DHCP: {e}");
        }
    }

    fn run(self) {
        let mut lease: Option<Lease> = None;
        // Between attempts: 1 s, doubling to 16 s.
        let mut backoff = Duration::from_secs(1);
        while !self.stopped() {
            lease = match lease {
                None => {
                    let started = Instant::now();
                    let got = self.obtain(backoff).and_then(|l| self.install(l, false));
                    if got.is_some() {
                        backoff = Duration::from_secs(1);
                    } else {
                        // An attempt takes `backoff` at least: a server
                        // that answers at once with what cannot be used (a
                        // NAK, a lease the kernel refuses) is not asked
                        // again at round-trip speed.
                        // After a decline, 10 s at least (RFC 2131 3.1).
                        let wait = if self.declined.take() {
                            backoff.max(Duration::from_secs(10))
                        } else {
                            backoff
                        };
                        self.pause(started + wait);
                        backoff = (backoff * 2).min(Duration::from_secs(16));
                    }
                    got
                }
                Some(l) => self.keep(l),
            };
        }
        if let Some(l) = lease {
            if self.release.load(Ordering::Acquire) {
                let msg =
                    message(RELEASE, random_xid(), self.mac, l.ip, &[(54, &l.server.octets())]);
                self.send(l.server_mac, l.ip, l.server, &msg);
                match self.nl.del_addr(self.index, IpAddr::V4(l.ip), l.prefix) {
                    Ok(()) | Err(KernelError::NotFound { .. }) => {}
                    Err(e) => tracing::warn!(interface = %self.name, "DHCP release: {e}"),
                }
                self.forget(&l);
                tracing::info!(interface = %self.name, address = %l.ip, "DHCP lease released");
            } else if self.gone.get() {
                // Gone with the device: not shown as held any more.
                self.forget(&l);
            }
        }
    }

    /// DISCOVER, OFFER, REQUEST, ACK: a lease, or `None` if none came
    /// within `patience` (or the client stopped).
    fn obtain(&self, patience: Duration) -> Option<Lease> {
        let xid = random_xid();
        let zero = Ipv4Addr::UNSPECIFIED;
        self.send(
            BROADCAST,
            zero,
            Ipv4Addr::BROADCAST,
            &message(DISCOVER, xid, self.mac, zero, &[]),
        );
        let deadline = Instant::now() + patience;
        let (offer, _) = loop {
            match self.wait(xid, deadline) {
                Wait::Got(r, from) if r.kind == OFFER && r.server.is_some() => break (r, from),
                Wait::Got(..) => continue,
                _ => return None,
            }
        };
        let server = offer.server?;
        let opts: [(u8, &[u8]); 2] = [(50, &offer.yiaddr.octets()), (54, &server.octets())];
        let req = message(REQUEST, xid, self.mac, zero, &opts);
        self.send(BROADCAST, zero, Ipv4Addr::BROADCAST, &req);
        match self.ack(xid, deadline, None) {
            Answer::Lease(l) => Some(l),
            Answer::Nak | Answer::Timeout => None,
        }
    }

    /// Waits for the answer to REQUEST `xid` until `deadline`: an ACK
    /// (one that is not usable is logged and ignored), a NAK, or nothing
    /// (also when the client stops).
    fn ack(&self, xid: u32, deadline: Instant, old: Option<&Lease>) -> Answer {
        loop {
            let Wait::Got(r, from) = self.wait(xid, deadline) else { return Answer::Timeout };
            match answer(&r, from, old, Instant::now()) {
                Some(Ok(a)) => return a,
                Some(Err(e)) => tracing::warn!(interface = %self.name, "DHCP: ACK ignored: {e}"),
                None => {}
            }
        }
    }

    /// Installs `l` as the address with its lifetime; the lease, or
    /// `None` if the kernel refused it.
    fn install(&self, l: Lease, renewed: bool) -> Option<Lease> {
        let a = (IpAddr::V4(l.ip), l.prefix);
        if self.held_statically(l.ip) {
            self.decline(&l);
            return None;
        }
        {
            let mut leased = self.leased.lock().unwrap_or_else(PoisonError::into_inner);
            if !leased.contains(&a) {
                leased.push(a);
            }
        }
        // Never u32::MAX (an infinite lease): the kernel would mark the
        // address permanent, and the next netadmd's client would take it
        // for a static one and decline its own lease.
        let life = l.secs.min(u32::MAX - 1);
        if let Err(e) = self.nl.set_address_lifetimes(self.index, a.0, a.1, life, life) {
            tracing::warn!(interface = %self.name, "DHCP: {e}");
            self.forget(&l);
            return None;
        }
        let (m, cv) = &*self.status;
        let mut s = m.lock().unwrap_or_else(PoisonError::into_inner);
        s.addr = Some((l.ip, l.prefix));
        s.renewals += u32::from(renewed);
        cv.notify_all();
        tracing::info!(interface = %self.name, address = %l.ip, lease_s = l.secs, renewed, "DHCP lease");
        Some(l)
    }

    /// Whether the interface has `ip` as an address without a lifetime,
    /// which no lease of this client's is: one an administrator added
    /// (a static address object, `ip addr add`). Installed, the lease's
    /// lifetime would take it over and its end delete it.
    fn held_statically(&self, ip: Ipv4Addr) -> bool {
        if self.leased.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|a| a.0 == ip) {
            return false;
        }
        match self.nl.permanent_addrs(self.index) {
            Ok(addrs) => addrs.iter().any(|a| a.0 == IpAddr::V4(ip)),
            Err(e) => {
                tracing::warn!(interface = %self.name, "DHCP: {e}");
                false
            }
        }
    }

    /// Declines `l` (RFC 2131 4.4.1: the address is in use here): the
    /// server marks it and offers another at the next DISCOVER.
    fn decline(&self, l: &Lease) {
        tracing::warn!(
            interface = %self.name, address = %l.ip,
            "DHCP: lease declined: the interface already has this address, and not from a lease"
        );
        self.declined.set(true);
        let zero = Ipv4Addr::UNSPECIFIED;
        let opts: [(u8, &[u8]); 2] = [(50, &l.ip.octets()), (54, &l.server.octets())];
        self.send(
            BROADCAST,
            zero,
            Ipv4Addr::BROADCAST,
            &message(DECLINE, random_xid(), self.mac, zero, &opts),
        );
    }

    fn forget(&self, l: &Lease) {
        let a = (IpAddr::V4(l.ip), l.prefix);
        self.leased.lock().unwrap_or_else(PoisonError::into_inner).retain(|x| *x != a);
        self.status.0.lock().unwrap_or_else(PoisonError::into_inner).addr = None;
    }

    /// Holds `l`: renews it at T1 (unicast), rebinds at T2 (broadcast);
    /// the renewed lease, the same one when stopped, or `None` when it
    /// ran out.
    fn keep(&self, l: Lease) -> Option<Lease> {
        let mut buf = vec![0u8; 2048];
        // Bound: nothing to do until T1 but drain what arrives.
        while Instant::now() < l.when(l.t1) {
            if let Recv::Stop = self.recv(&mut buf, l.when(l.t1)) {
                return Some(l);
            }
        }
        while Instant::now() < l.when(l.secs) {
            let rebinding = Instant::now() >= l.when(l.t2);
            let xid = random_xid();
            let req = message(REQUEST, xid, self.mac, l.ip, &[]);
            if rebinding {
                self.send(BROADCAST, l.ip, Ipv4Addr::BROADCAST, &req);
            } else {
                self.send(l.server_mac, l.ip, l.server, &req);
            }
            // Half the time to the next stage, at least a second (RFC
            // 2131 4.4.5: half the remaining time, down to 60 s; shorter
            // here since leases may be short).
            let next = if rebinding { l.when(l.secs) } else { l.when(l.t2) };
            let wait =
                (next.saturating_duration_since(Instant::now()) / 2).max(Duration::from_secs(1));
            let deadline = (Instant::now() + wait).min(l.when(l.secs));
            match self.ack(xid, deadline, Some(&l)) {
                _ if self.stopped() => return Some(l),
                Answer::Lease(n) => {
                    // Another address, or the same with another mask (a
                    // different address to the kernel): the old one goes.
                    if (n.ip, n.prefix) != (l.ip, l.prefix) {
                        self.drop_lease(&l);
                    }
                    return self.install(n, true);
                }
                // The server revokes it (RFC 2131 4.4.5): the address
                // goes now, and the client starts over with a DISCOVER.
                Answer::Nak => {
                    tracing::warn!(interface = %self.name, address = %l.ip, "DHCP: NAK on renewal");
                    self.drop_lease(&l);
                    return None;
                }
                Answer::Timeout => {}
            }
        }
        // Expired: the kernel has removed it already.
        self.drop_lease(&l);
        None
    }

    fn drop_lease(&self, l: &Lease) {
        let _ = self.nl.del_addr(self.index, IpAddr::V4(l.ip), l.prefix);
        self.forget(l);
        tracing::warn!(interface = %self.name, address = %l.ip, "DHCP lease lost");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// An ACK for transaction 7 and `MAC` (192.0.2.100, server 192.0.2.1,
    /// /24, 120 s, T1 5 s) with `opts` after those, as an IPv4 packet.
    fn ack_packet(opts: &[u8]) -> Vec<u8> {
        let mut m = message(ACK, 7, MAC, Ipv4Addr::UNSPECIFIED, &[]);
        m[0] = 2;
        m[16..20].copy_from_slice(&[192, 0, 2, 100]);
        // Replace the options: ACK, server, mask, lease, T1.
        m.truncate(240);
        m.extend_from_slice(&[53, 1, ACK, 54, 4, 192, 0, 2, 1, 1, 4, 255, 255, 255, 0]);
        m.extend_from_slice(&[51, 4, 0, 0, 0, 120, 58, 4, 0, 0, 0, 5]);
        m.extend_from_slice(opts);
        let mut p = udp_packet(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::BROADCAST, &m);
        p[22..24].copy_from_slice(&68u16.to_be_bytes());
        p
    }

    #[test]
    fn a_reply_is_parsed_and_foreign_ones_ignored() {
        let p = ack_packet(&[255]);
        let r = parse(&p, 7, MAC).expect("parsed");
        assert_eq!(
            (r.kind, r.yiaddr, r.secs, r.t1),
            (ACK, Ipv4Addr::new(192, 0, 2, 100), Some(120), Some(5))
        );
        assert_eq!(r.mask.map(|m| u32::from(m).leading_ones()), Some(24));
        assert!(parse(&p, 8, MAC).is_none(), "another transaction");
        assert!(parse(&p, 7, [2, 0, 0, 0, 0, 2]).is_none(), "another client");
        // Link padding after the IP total length is not read.
        let mut padded = p.clone();
        padded.extend_from_slice(&[0xee; 16]);
        assert!(parse(&padded, 7, MAC).is_some(), "padded");
    }

    /// Whatever arrives on the socket, malformed as it may be: `None`,
    /// never a panic.
    #[test]
    fn malformed_packets_are_ignored_without_panicking() {
        let good = ack_packet(&[255]);
        let bad = |p: &[u8], what: &str| {
            let r = std::panic::catch_unwind(|| parse(p, 7, MAC).is_none());
            assert!(
                matches!(r, Ok(true)),
                "{what}: {}",
                if r.is_err() { "panicked" } else { "parsed" }
            );
        };
        // Truncated anywhere (the IP total length says more).
        for cut in 0..good.len() {
            bad(&good[..cut], &format!("truncated to {cut}"));
        }
        // IHL 0 (a 0-byte header), with 8 and 9 bytes: UDP at offset 0.
        for n in [8, 9, 12, 28] {
            let mut p = vec![0u8; n];
            p[0] = 0x40;
            p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            bad(&p, &format!("IHL 0, {n} bytes"));
        }
        for ihl in 0..5u8 {
            let mut p = good.clone();
            p[0] = 0x40 | ihl;
            bad(&p, &format!("IHL {ihl}"));
        }
        // IHL beyond the packet, and beyond the total length.
        let mut p = good[..30].to_vec();
        p[0] = 0x4f;
        p[2..4].copy_from_slice(&30u16.to_be_bytes());
        bad(&p, "IHL 60 in 30 bytes");
        let mut p = good.clone();
        p[2..4].copy_from_slice(&40u16.to_be_bytes());
        p[0] = 0x4f;
        bad(&p, "IHL 60, total length 40");
        // Not IPv4.
        let mut p = good.clone();
        p[0] = 0x65;
        bad(&p, "version 6");
        // Total length: past the end, or shorter than the headers.
        for total in [good.len() + 1, 65535, 0, 19, 27] {
            let mut p = good.clone();
            p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            bad(&p, &format!("total length {total}"));
        }
        // A fragment.
        let mut p = good.clone();
        p[6] = 0x20;
        bad(&p, "more fragments");
        // UDP length: shorter than its header, past the end, too short
        // for a BOOTP message.
        for ulen in [0, 7, good.len() - 20 + 1, 65535, 8, 100] {
            let mut p = good.clone();
            p[24..26].copy_from_slice(&(ulen as u16).to_be_bytes());
            bad(&p, &format!("UDP length {ulen}"));
        }
        // Options running past the end: a length beyond it, a code with
        // no length byte.
        bad(&ack_packet(&[51, 200, 0, 0]), "option length past the end");
        bad(&ack_packet(&[51]), "option code without length");
        // Zero-length options: the message type's, and others (which are
        // then simply absent).
        let mut p = ack_packet(&[]);
        let at = 20 + 8 + 240;
        p[at..at + 3].copy_from_slice(&[53, 0, 0]);
        bad(&p, "zero-length message type");
        let r = parse(&ack_packet(&[54, 0, 51, 0, 58, 0, 1, 0, 255]), 7, MAC).expect("parsed");
        assert_eq!(
            (r.server, r.secs, r.t1, r.mask),
            (None, None, None, None),
            "zero-length options"
        );
    }

    fn ack_reply(
        ip: [u8; 4],
        mask: Option<[u8; 4]>,
        secs: u32,
        t: (Option<u32>, Option<u32>),
    ) -> Reply {
        Reply {
            kind: ACK,
            yiaddr: Ipv4Addr::from(ip),
            server: Some(Ipv4Addr::new(192, 0, 2, 1)),
            mask: mask.map(Ipv4Addr::from),
            secs: Some(secs),
            t1: t.0,
            t2: t.1,
        }
    }

    #[test]
    fn an_ack_is_validated_before_it_is_installed() {
        let at = Instant::now();
        let check = |r: &Reply| lease_of(r, [2, 0, 0, 0, 0, 9], None, at);
        let fine = ack_reply([192, 0, 2, 100], Some([255, 255, 255, 0]), 120, (Some(4), Some(8)));
        let l = check(&fine).expect("a good lease");
        assert_eq!((l.ip, l.prefix, l.secs, l.t1, l.t2), (fine.yiaddr, 24, 120, 4, 8));
        // Refused: not unicast, the subnet's own addresses, a mask with a
        // hole or of 0 bits, a lease of 0, no server.
        for (ip, mask, secs) in [
            ([0, 0, 0, 0], Some([255, 255, 255, 0]), 120),
            ([255, 255, 255, 255], None, 120),
            ([224, 0, 0, 1], Some([255, 255, 255, 0]), 120),
            ([239, 1, 2, 3], None, 120),
            ([127, 0, 0, 5], Some([255, 0, 0, 0]), 120),
            ([192, 0, 2, 0], Some([255, 255, 255, 0]), 120),
            ([192, 0, 2, 255], Some([255, 255, 255, 0]), 120),
            ([192, 0, 2, 100], Some([255, 0, 255, 0]), 120),
            ([192, 0, 2, 100], Some([255, 255, 255, 1]), 120),
            ([192, 0, 2, 100], Some([0, 0, 0, 0]), 120),
            ([192, 0, 2, 100], Some([255, 255, 255, 0]), 0),
        ] {
            let r = ack_reply(ip, mask, secs, (None, None));
            assert!(check(&r).is_err(), "{ip:?} {mask:?} {secs} s accepted");
        }
        let mut r = fine.clone();
        r.server = None;
        assert!(check(&r).is_err(), "no server");
        // A renewal keeps the server (and prefix) it had.
        let old = check(&fine).unwrap();
        let mut r = fine.clone();
        (r.server, r.mask) = (None, None);
        let l = lease_of(&r, [2, 0, 0, 0, 0, 9], Some(&old), at).expect("renewal");
        assert_eq!((l.server, l.prefix), (old.server, 24));
        // Edge masks: /32 and /31 (no network or broadcast address).
        assert!(check(&ack_reply([192, 0, 2, 0], Some([255; 4]), 60, (None, None))).is_ok());
        let r = ack_reply([192, 0, 2, 0], Some([255, 255, 255, 254]), 60, (None, None));
        assert!(check(&r).is_ok());
        // A lease of 1 s is enough; T1 and T2 out of order, or not within
        // the lease: the defaults (0.5 and 0.875 of it).
        assert!(check(&ack_reply([192, 0, 2, 100], None, 1, (None, None))).is_ok());
        for t in [
            (Some(0), Some(8)),
            (Some(8), Some(4)),
            (Some(8), Some(8)),
            (Some(4), Some(120)),
            (Some(200), None),
            (None, Some(30)),
            (Some(u32::MAX), Some(u32::MAX)),
        ] {
            let l = check(&ack_reply([192, 0, 2, 100], None, 120, t)).unwrap();
            assert_eq!((l.t1, l.t2), (60, 105), "{t:?}");
        }
        // An infinite lease: the defaults without overflowing.
        let l = check(&ack_reply([192, 0, 2, 100], None, u32::MAX, (None, None))).unwrap();
        assert!(l.t1 < l.t2 && l.t2 < l.secs, "{l:?}");
    }

    #[test]
    fn a_nak_is_told_apart_from_an_ack_and_from_no_answer() {
        let at = Instant::now();
        let fine = ack_reply([192, 0, 2, 100], Some([255, 255, 255, 0]), 120, (None, None));
        let old = lease_of(&fine, [2, 0, 0, 0, 0, 9], None, at).unwrap();
        let kind = |k: u8| {
            let mut r = fine.clone();
            r.kind = k;
            answer(&r, [2, 0, 0, 0, 0, 9], Some(&old), at)
        };
        assert!(matches!(kind(ACK), Some(Ok(Answer::Lease(l))) if l.ip == old.ip));
        assert!(matches!(kind(NAK), Some(Ok(Answer::Nak))));
        assert!(kind(OFFER).is_none(), "an OFFER answers no REQUEST");
        let mut bad = fine.clone();
        bad.secs = Some(0);
        assert!(matches!(answer(&bad, [2, 0, 0, 0, 0, 9], None, at), Some(Err(_))));
        // A NAK as the server sends it (no address, no lease options).
        let mut m = message(NAK, 7, MAC, Ipv4Addr::UNSPECIFIED, &[]);
        m[0] = 2;
        m.truncate(240);
        m.extend_from_slice(&[53, 1, NAK, 54, 4, 192, 0, 2, 1, 255]);
        let mut p = udp_packet(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::BROADCAST, &m);
        p[22..24].copy_from_slice(&68u16.to_be_bytes());
        let r = parse(&p, 7, MAC).expect("parsed");
        assert!(matches!(answer(&r, [2, 0, 0, 0, 0, 9], Some(&old), at), Some(Ok(Answer::Nak))));
    }
}

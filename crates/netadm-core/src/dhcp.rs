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

type Shared = Arc<(Mutex<Status>, Condvar)>;

/// A running client; dropping it stops it and leaves the lease (as a
/// daemon that exits does); [`Client::release`] gives the lease back.
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
        let stop = crate::drift::eventfd()?;
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

    /// Stops it, giving the lease back (DHCPRELEASE) and removing the
    /// address.
    pub(crate) fn release(self) {
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
        crate::drift::wake(&self.stop);
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
}

/// A DHCP message received: its type and options, and the fields used.
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
    // Broadcast flag while we have no address: the server answers to
    // ff:ff:ff:ff:ff:ff, which reaches us without one.
    if ciaddr.is_unspecified() {
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
    m.extend_from_slice(&[55, 4, 1, 51, 58, 59, 255]);
    m
}

/// Parses an IPv4/UDP packet to port 68 carrying a BOOTREPLY for `xid`
/// and `mac`; anything else is `None`.
fn parse(p: &[u8], xid: u32, mac: [u8; 6]) -> Option<Reply> {
    let ihl = usize::from(*p.first()? & 0x0f) * 4;
    if p.len() < ihl + 8 || p[9] != 17 || u16::from_be_bytes([p[ihl + 2], p[ihl + 3]]) != 68 {
        return None;
    }
    let m = &p[ihl + 8..];
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

    /// Waits for a reply to `xid` until `deadline`.
    fn wait(&self, xid: u32, deadline: Instant) -> Wait {
        let mut buf = vec![0u8; 2048];
        loop {
            match self.sock.recv(&mut buf, deadline, self.stop) {
                Ok(Some((n, from))) => {
                    if let Some(r) = parse(&buf[..n], xid, self.mac) {
                        return Wait::Got(r, from);
                    }
                }
                Ok(None) if Instant::now() >= deadline => return Wait::Timeout,
                Ok(None) => {
                    self.stopping.store(true, Ordering::Release);
                    return Wait::Stop;
                }
                Err(e) => {
                    // The device is gone: nothing more to do here.
                    tracing::warn!(interface = %self.name, "DHCP: {e}");
                    self.stopping.store(true, Ordering::Release);
                    return Wait::Stop;
                }
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
                    let got = self.obtain(backoff);
                    backoff = if got.is_some() {
                        Duration::from_secs(1)
                    } else {
                        (backoff * 2).min(Duration::from_secs(16))
                    };
                    got.and_then(|l| self.install(l, false))
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
        self.ack(xid, deadline, None)
    }

    /// Waits for the ACK (a lease) or NAK (`None`) to `xid`.
    fn ack(&self, xid: u32, deadline: Instant, old: Option<&Lease>) -> Option<Lease> {
        loop {
            match self.wait(xid, deadline) {
                Wait::Got(r, from) if r.kind == ACK => {
                    let secs = r.secs.or(old.map(|l| l.secs)).unwrap_or(3600);
                    let prefix = r.mask.map_or(old.map_or(32, |l| l.prefix), |m| {
                        u32::from(m).leading_ones() as u8
                    });
                    return Some(Lease {
                        ip: r.yiaddr,
                        prefix,
                        server: r.server.or(old.map(|l| l.server))?,
                        server_mac: from,
                        secs,
                        t1: r.t1.unwrap_or(secs / 2),
                        t2: r.t2.unwrap_or(secs / 8 * 7),
                        at: Instant::now(),
                    });
                }
                Wait::Got(r, _) if r.kind == NAK => return None,
                Wait::Got(..) => continue,
                _ => return None,
            }
        }
    }

    /// Installs `l` as the address with its lifetime; the lease, or
    /// `None` if the kernel refused it.
    fn install(&self, l: Lease, renewed: bool) -> Option<Lease> {
        let a = (IpAddr::V4(l.ip), l.prefix);
        {
            let mut leased = self.leased.lock().unwrap_or_else(PoisonError::into_inner);
            if !leased.contains(&a) {
                leased.push(a);
            }
        }
        if let Err(e) = self.nl.set_address_lifetimes(self.index, a.0, a.1, l.secs, l.secs) {
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
            match self.sock.recv(&mut buf, l.when(l.t1), self.stop) {
                Ok(None) if Instant::now() < l.when(l.t1) => {
                    self.stopping.store(true, Ordering::Release);
                    return Some(l);
                }
                Err(e) => {
                    // The device is gone (deleted behind netadm's back):
                    // nothing to renew on; refresh-if starts a new client.
                    tracing::warn!(interface = %self.name, "DHCP: {e}");
                    self.stopping.store(true, Ordering::Release);
                    return Some(l);
                }
                _ => {}
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
            let got = self.ack(xid, deadline, Some(&l));
            if self.stopped() {
                return Some(l);
            }
            if let Some(n) = got {
                if n.ip != l.ip {
                    self.drop_lease(&l);
                }
                return self.install(n, true);
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

    #[test]
    fn a_reply_is_parsed_and_foreign_ones_ignored() {
        let mac = [2, 0, 0, 0, 0, 1];
        let mut m = message(ACK, 7, mac, Ipv4Addr::UNSPECIFIED, &[]);
        m[0] = 2;
        m[16..20].copy_from_slice(&[192, 0, 2, 100]);
        // Replace the options: ACK, server, mask, lease, T1.
        m.truncate(240);
        m.extend_from_slice(&[53, 1, ACK, 54, 4, 192, 0, 2, 1, 1, 4, 255, 255, 255, 0]);
        m.extend_from_slice(&[51, 4, 0, 0, 0, 120, 58, 4, 0, 0, 0, 5, 255]);
        let mut p = udp_packet(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::BROADCAST, &m);
        p[22..24].copy_from_slice(&68u16.to_be_bytes());
        let r = parse(&p, 7, mac).expect("parsed");
        assert_eq!(
            (r.kind, r.yiaddr, r.secs, r.t1),
            (ACK, Ipv4Addr::new(192, 0, 2, 100), Some(120), Some(5))
        );
        assert_eq!(r.mask.map(|m| u32::from(m).leading_ones()), Some(24));
        assert!(parse(&p, 8, mac).is_none(), "another transaction");
        assert!(parse(&p, 7, [2, 0, 0, 0, 0, 2]).is_none(), "another client");
        for cut in [0, 20, 27, 200, 250] {
            let _ = parse(&p[..cut], 7, mac);
        }
    }
}

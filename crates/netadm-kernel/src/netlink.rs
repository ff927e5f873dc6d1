//! The rtnetlink requests netadm makes, behind a synchronous interface:
//! answered in the caller's thread on a blocking socket of their own
//! ([`Requests`]), with the `rtnetlink` crate's messages and builders; and
//! one long-lived `rtnetlink` connection on the tokio runtime, for the few
//! requests built by a builder that does not hand its message back.
//! Notifications have a socket of their own ([`crate::Events`]).

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, PoisonError};

use rtnetlink::LinkUnspec;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_MULTIPART, NLM_F_REPLACE, NLM_F_REQUEST,
    NetlinkDeserializable, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::address::{
    AddressAttribute, AddressHeaderFlags, AddressMessage, CacheInfo,
};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::sys::{AsyncSocket, Socket, SocketAddr, protocols::NETLINK_ROUTE};
use tokio::runtime::Handle;

use crate::{KernelError, errors, rt};

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelLink {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// MTU.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// MAC address.
    pub mac: [u8; 6],
}

/// How long a request waits for the kernel's answer: requests are made
/// under the mutation lock, which must never be held forever.
pub(crate) const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// rtnetlink in the network namespace it was opened in, for the daemon's
/// life: each call waits for the kernel's acknowledgement or answer.
#[derive(Debug)]
pub struct Netlink {
    /// The connection on the runtime (requests made by a builder of the
    /// `rtnetlink` crate only).
    h: rtnetlink::Handle,
    rt: Handle,
    /// Requests, answered in the caller's thread.
    req: Requests,
}

/// A blocking netlink socket for requests, one caller at a time: a
/// request is sent and its answer read in the thread that asks, with no
/// hop through the runtime (two thread wake-ups, about 50 µs a request
/// here, 5 times the kernel's own cost for a link lookup). rtnetlink's
/// ([`Netlink`]) and generic netlink's ([`crate::Ethtool`]).
pub(crate) struct Requests(Mutex<Conversation>);

/// The socket, the last sequence number and the buffer answers are read
/// into: one request and its answer at a time.
struct Conversation {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Requests")
    }
}

/// The largest answer read at once: the kernel fills a dump's reads up to
/// the reader's buffer, and one link's message is a few KiB.
const ANSWER_BUF: usize = 64 * 1024;

impl Requests {
    /// A socket of netlink `protocol` in this thread's network namespace,
    /// with extended acknowledgements (and, for rtnetlink, dump requests
    /// checked strictly), answering within [`REPLY_TIMEOUT`].
    pub(crate) fn open(protocol: isize) -> Result<Self, KernelError> {
        let io = |source| KernelError::Io { op: "open netlink".into(), source };
        let mut sock = Socket::new(protocol).map_err(io)?;
        sock.bind_auto().map_err(io)?;
        sock.connect(&SocketAddr::new(0, 0)).map_err(io)?;
        sock.set_ext_ack(true).map_err(io)?;
        if protocol == NETLINK_ROUTE {
            // Dumps filtered by the kernel where the request names what
            // it wants (one interface's addresses, not every one's).
            sock.set_netlink_get_strict_chk(true).map_err(io)?;
        }
        let tv = libc::timeval { tv_sec: REPLY_TIMEOUT.as_secs() as libc::time_t, tv_usec: 0 };
        // SAFETY: a valid timeval of the size given, on our own socket.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const tv).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(Self(Mutex::new(Conversation { sock, seq: 0, buf: vec![0; ANSWER_BUF] })))
    }

    /// Sends `msg` with `NLM_F_REQUEST | flags` and reads the answer: the
    /// messages before the acknowledgement or the end of the dump (a
    /// request with neither, its one answer). A refusal is typed.
    pub(crate) fn call<T>(&self, op: &str, msg: T, flags: u16) -> Result<Vec<T>, KernelError>
    where
        T: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug,
        NetlinkPayload<T>: From<T>,
    {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).call(op, msg, flags)
    }
}

impl Conversation {
    /// [`Requests::call`], the lock held.
    fn call<T>(&mut self, op: &str, msg: T, flags: u16) -> Result<Vec<T>, KernelError>
    where
        T: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug,
        NetlinkPayload<T>: From<T>,
    {
        let io = |source| KernelError::Io { op: op.into(), source };
        self.seq = self.seq.wrapping_add(1).max(1);
        let mut req = NetlinkMessage::from(msg);
        req.header.flags = NLM_F_REQUEST | flags;
        req.header.sequence_number = self.seq;
        req.finalize();
        let mut out = vec![0; req.buffer_len()];
        req.serialize(&mut out);
        self.sock.send(&out, 0).map_err(io)?;
        let one = flags & (NLM_F_ACK | NLM_F_DUMP) == 0;
        let mut got = vec![];
        loop {
            let n = self.read().map_err(io)?;
            let mut at = 0;
            while at + 16 <= n {
                let bytes = &self.buf[at..n];
                let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
                if len < 16 || len > bytes.len() {
                    return Err(io(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("an answer of {len} bytes in a read of {}", bytes.len()),
                    )));
                }
                at += (len + 3) & !3;
                let m = NetlinkMessage::<T>::deserialize(&bytes[..len]).map_err(|e| {
                    io(std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
                })?;
                // What answers an earlier request that timed out.
                if m.header.sequence_number != self.seq {
                    continue;
                }
                let multi = m.header.flags & NLM_F_MULTIPART != 0;
                match m.payload {
                    NetlinkPayload::InnerMessage(x) => {
                        got.push(x);
                        if one && !multi {
                            return Ok(got);
                        }
                    }
                    NetlinkPayload::Error(e) if e.code.is_some() => {
                        return Err(errors::netlink(&e, op));
                    }
                    NetlinkPayload::Error(_) => return Ok(got),
                    NetlinkPayload::Done(d) if d.code != 0 => {
                        return Err(errors::errno(d.code.abs(), op, None));
                    }
                    NetlinkPayload::Done(_) => return Ok(got),
                    _ => {}
                }
            }
        }
    }

    /// One read into the buffer; its length.
    fn read(&mut self) -> std::io::Result<usize> {
        loop {
            // SAFETY: our buffer, its length; MSG_TRUNC makes the kernel
            // say how long a datagram was that did not fit.
            let n = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_TRUNC,
                )
            };
            if n >= 0 {
                let n = n as usize;
                if n > self.buf.len() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("an answer of {n} bytes, larger than {ANSWER_BUF}"),
                    ));
                }
                return Ok(n);
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the kernel did not answer within {REPLY_TIMEOUT:?}"),
                    ));
                }
                _ => return Err(e),
            }
        }
    }
}

impl Netlink {
    /// Opens the connection in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        Self::connect()
    }

    /// Opens the connection inside zone `ns`, on the runtime this thread
    /// would use.
    pub fn open_in(ns: &crate::Netns) -> Result<Self, KernelError> {
        let rt = rt::handle()?;
        ns.run(|| {
            let _in = rt.enter();
            Self::open()
        })?
    }

    fn connect() -> Result<Self, KernelError> {
        let rt = rt::handle()?;
        let io = |source| KernelError::Io { op: "open rtnetlink".into(), source };
        // The socket is made here, in this thread's namespace, and
        // registered with the runtime's reactor; the connection's task
        // only reads and writes it.
        let _in = rt.enter();
        let (mut conn, h, _) = rtnetlink::new_connection().map_err(io)?;
        // The kernel's own words with every refusal ("Unknown device
        // type", "Invalid VLAN id", ...): see `errors::extack`.
        conn.socket_mut().socket_mut().set_ext_ack(true).map_err(io)?;
        rt.spawn(conn);
        let req = Requests::open(NETLINK_ROUTE)?;
        Ok(Self { h, rt, req })
    }

    pub(crate) fn wait<T: Send + 'static>(
        &self,
        op: &str,
        fut: impl Future<Output = Result<T, rtnetlink::Error>> + Send + 'static,
    ) -> Result<T, KernelError> {
        rt::wait(&self.rt, op, REPLY_TIMEOUT, fut)?.map_err(|e| errors::typed(e, op))
    }

    /// The rtnetlink handle, for requests built elsewhere in this crate.
    pub(crate) fn handle(&self) -> &rtnetlink::Handle {
        &self.h
    }

    /// Sends one request (`NLM_F_REQUEST` and `flags`) and returns what
    /// the kernel answered before its acknowledgement or the end of the
    /// dump: for requests the `rtnetlink` crate has no builder for
    /// (traffic control) or whose answer it does not hand back.
    pub(crate) fn request(
        &self,
        op: &str,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, KernelError> {
        self.req.call(op, msg, flags)
    }

    /// Sends `msg` with `NLM_F_ACK | flags` and waits for the
    /// acknowledgement.
    pub(crate) fn ack(
        &self,
        op: &str,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<(), KernelError> {
        self.request(op, msg, NLM_F_ACK | flags).map(drop)
    }

    /// The link the kernel answers a `RTM_GETLINK` of `m` with (by index
    /// or by name); none is `NotFound` named `op`.
    pub(crate) fn get_link(&self, op: &str, m: LinkMessage) -> Result<LinkMessage, KernelError> {
        let not_found = || KernelError::NotFound { what: op.into() };
        match self.request(op, RouteNetlinkMessage::GetLink(m), 0) {
            Ok(got) => new_links(got).next().ok_or_else(not_found),
            Err(KernelError::NotFound { .. }) => Err(not_found()),
            Err(e) => Err(e),
        }
    }

    /// Every link the kernel has in the connection's namespace (one dump).
    pub(crate) fn dump_links(&self, op: &str) -> Result<Vec<LinkMessage>, KernelError> {
        let got =
            self.request(op, RouteNetlinkMessage::GetLink(LinkMessage::default()), NLM_F_DUMP)?;
        Ok(new_links(got).collect())
    }

    /// `RTM_NEWLINK` creating a device: `NLM_F_CREATE | NLM_F_EXCL`.
    pub(crate) fn new_link(&self, op: &str, m: LinkMessage) -> Result<(), KernelError> {
        self.ack(op, RouteNetlinkMessage::NewLink(m), NLM_F_CREATE | NLM_F_EXCL)
    }

    /// `RTM_NEWLINK` changing a device in place (`ip link set`; what
    /// `RTM_SETLINK` ignores, such as `IFLA_LINKINFO`, included).
    pub(crate) fn change_link(&self, op: &str, m: LinkMessage) -> Result<(), KernelError> {
        self.ack(op, RouteNetlinkMessage::NewLink(m), 0)
    }

    /// `RTM_SETLINK`.
    pub(crate) fn set_link_msg(&self, op: &str, m: LinkMessage) -> Result<(), KernelError> {
        self.ack(op, RouteNetlinkMessage::SetLink(m), NLM_F_CREATE | NLM_F_EXCL)
    }

    /// The index of interface `name` (in the connection's namespace).
    pub fn index(&self, name: &str) -> Result<u32, KernelError> {
        if name.contains('\0') {
            return Err(KernelError::BadName { name: name.into(), reason: "contains NUL" });
        }
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.into()));
        Ok(self.get_link(&format!("interface {name}"), m)?.header.index)
    }

    /// Reads a link back.
    pub fn link(&self, index: u32) -> Result<KernelLink, KernelError> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        Ok(kernel_link(&self.get_link(&format!("read link {index}"), m)?))
    }

    /// Sets a link up or down and/or its MTU.
    pub fn set_link(
        &self,
        index: u32,
        up: Option<bool>,
        mtu: Option<u32>,
    ) -> Result<(), KernelError> {
        let mut b = LinkUnspec::new_with_index(index);
        match up {
            Some(true) => b = b.up(),
            Some(false) => b = b.down(),
            None => {}
        }
        if let Some(m) = mtu {
            b = b.mtu(m);
        }
        self.set_link_msg(&format!("configure link {index}"), b.build())
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&self, index: u32, mac: [u8; 6]) -> Result<(), KernelError> {
        let m = LinkUnspec::new_with_index(index).address(mac.to_vec()).build();
        self.set_link_msg(&format!("set the MAC of link {index}"), m)
    }

    /// Adds an address; one already present is [`KernelError::Exists`].
    pub fn add_addr(&self, index: u32, ip: IpAddr, prefix: u8) -> Result<(), KernelError> {
        let m = std::mem::take(self.h.address().add(index, ip, prefix).message_mut());
        let flags = NLM_F_CREATE | NLM_F_EXCL;
        self.ack(&format!("add {ip}/{prefix}"), RouteNetlinkMessage::NewAddress(m), flags).map_err(
            |e| match e {
                KernelError::Exists { .. } => KernelError::Exists { what: format!("address {ip}") },
                e => e,
            },
        )
    }

    /// Installs `ip/prefix` on interface `index`, valid for `valid` and
    /// preferred for `preferred` seconds (`u32::MAX`: for ever; the kernel
    /// removes it when `valid` runs out, and marks it deprecated when
    /// `preferred` does); an address already there gets these lifetimes.
    /// A DHCP lease (installed, then renewed in place) and a deprecated
    /// address (preferred 0).
    pub fn set_address_lifetimes(
        &self,
        index: u32,
        ip: IpAddr,
        prefix: u8,
        valid: u32,
        preferred: u32,
    ) -> Result<(), KernelError> {
        let mut m = std::mem::take(self.h.address().add(index, ip, prefix).message_mut());
        let mut cache = CacheInfo::default();
        (cache.ifa_valid, cache.ifa_preferred) = (valid, preferred);
        m.attributes.push(AddressAttribute::CacheInfo(cache));
        let op = format!("install {ip}/{prefix} for {valid} s");
        let flags = NLM_F_CREATE | NLM_F_REPLACE;
        self.ack(&op, RouteNetlinkMessage::NewAddress(m), flags).map_err(|e| match e {
            KernelError::NotFound { .. } => {
                KernelError::NotFound { what: format!("interface {index}") }
            }
            e => e,
        })
    }

    /// Removes an address.
    pub fn del_addr(&self, index: u32, ip: IpAddr, prefix: u8) -> Result<(), KernelError> {
        let mut m = AddressMessage::default();
        m.header.index = index;
        m.header.prefix_len = prefix;
        m.header.family = if ip.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
        if ip.is_ipv4() {
            m.attributes.push(AddressAttribute::Local(ip));
        }
        m.attributes.push(AddressAttribute::Address(ip));
        self.ack(&format!("remove {ip}/{prefix}"), RouteNetlinkMessage::DelAddress(m), 0)
    }

    /// The addresses on a link: a dump the kernel filters by interface
    /// (the socket checks dump requests strictly), read again here in
    /// case a kernel does not.
    pub fn addrs(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, KernelError> {
        self.addrs_where(index, |_| true)
    }

    /// Interface `index`'s addresses that have a lifetime (no
    /// `IFA_F_PERMANENT`): what SLAAC, DHCP and privacy extensions put
    /// there, not what an administrator added.
    pub fn dynamic_addrs(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, KernelError> {
        self.addrs_where(index, |a| !a.header.flags.contains(AddressHeaderFlags::Permanent))
    }

    /// Interface `index`'s addresses without a lifetime
    /// (`IFA_F_PERMANENT`): what an administrator (or a static address
    /// object) put there.
    pub fn permanent_addrs(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, KernelError> {
        self.addrs_where(index, |a| a.header.flags.contains(AddressHeaderFlags::Permanent))
    }

    fn addrs_where(
        &self,
        index: u32,
        keep: impl Fn(&AddressMessage) -> bool,
    ) -> Result<Vec<(IpAddr, u8)>, KernelError> {
        let mut m = AddressMessage::default();
        m.header.index = index;
        let all = self.request("list addresses", RouteNetlinkMessage::GetAddress(m), NLM_F_DUMP)?;
        Ok(all
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) if a.header.index == index && keep(a) => {
                    addr_of(a)
                }
                _ => None,
            })
            .collect())
    }
}

/// The value of the first of `attrs` that `pick` takes (a message's
/// attribute of one kind), cloned; the value's default without one.
pub(crate) fn first_attr<A, T: Clone + Default>(attrs: &[A], pick: impl Fn(&A) -> Option<&T>) -> T {
    attrs.iter().find_map(pick).cloned().unwrap_or_default()
}

/// The links among the kernel's answers (`RTM_NEWLINK`).
fn new_links(got: Vec<RouteNetlinkMessage>) -> impl Iterator<Item = LinkMessage> {
    got.into_iter().filter_map(|m| match m {
        RouteNetlinkMessage::NewLink(l) => Some(l),
        _ => None,
    })
}

/// A link message as a [`KernelLink`].
fn kernel_link(m: &LinkMessage) -> KernelLink {
    let mut l = KernelLink {
        index: m.header.index,
        name: String::new(),
        mtu: 0,
        up: m.header.flags.contains(LinkFlags::Up),
        mac: [0; 6],
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n.clone(),
            LinkAttribute::Mtu(m) => l.mtu = *m,
            LinkAttribute::Address(a) if a.len() == 6 => l.mac.copy_from_slice(a),
            _ => {}
        }
    }
    l
}

/// The address an address message carries (IPv4: its local address).
fn addr_of(m: &AddressMessage) -> Option<(IpAddr, u8)> {
    let v4 = m.header.family == AddressFamily::Inet;
    m.attributes.iter().find_map(|a| match a {
        AddressAttribute::Local(ip) if v4 => Some((*ip, m.header.prefix_len)),
        AddressAttribute::Address(ip) if !v4 => Some((*ip, m.header.prefix_len)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_as_links_and_addresses() {
        let mut m = LinkMessage::default();
        m.header.index = 7;
        m.header.flags = LinkFlags::Up;
        m.attributes.push(LinkAttribute::IfName("x0".into()));
        m.attributes.push(LinkAttribute::Mtu(1400));
        m.attributes.push(LinkAttribute::Address(vec![2, 0, 0, 0, 0, 1]));
        let l = kernel_link(&m);
        assert_eq!(
            (l.index, l.name.as_str(), l.mtu, l.up, l.mac),
            (7, "x0", 1400, true, [2, 0, 0, 0, 0, 1])
        );
        // A MAC of another length (not Ethernet) is not taken.
        m.attributes.push(LinkAttribute::Address(vec![1, 2, 3]));
        assert_eq!(kernel_link(&m).mac, [2, 0, 0, 0, 0, 1]);

        let mut a = AddressMessage::default();
        a.header.family = AddressFamily::Inet;
        a.header.prefix_len = 24;
        let peer: IpAddr = "192.0.2.9".parse().unwrap();
        let local: IpAddr = "192.0.2.1".parse().unwrap();
        a.attributes.push(AddressAttribute::Address(peer));
        a.attributes.push(AddressAttribute::Local(local));
        assert_eq!(addr_of(&a), Some((local, 24)), "IPv4: the local address");
        a.header.family = AddressFamily::Inet6;
        assert_eq!(addr_of(&a), Some((peer, 24)));
        assert_eq!(addr_of(&AddressMessage::default()), None);
    }
}

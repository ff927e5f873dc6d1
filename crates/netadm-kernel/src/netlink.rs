//! One long-lived rtnetlink connection (the `rtnetlink` crate) and the few
//! requests netadm makes, behind a synchronous interface.

use std::net::IpAddr;

use futures_util::{StreamExt, TryStreamExt};
use rtnetlink::packet_core::{NLM_F_REQUEST, NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage, CacheInfo};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::sys::AsyncSocket;
use rtnetlink::{LinkUnspec, MulticastGroup};
use tokio::runtime::Handle;

use crate::events::Events;
use crate::events::Rx as Notifications;
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

/// The rtnetlink handle: one connection for the daemon's life (in the
/// network namespace it was opened in), driven on the tokio runtime;
/// each call waits for the kernel's acknowledgement or answer.
#[derive(Debug)]
pub struct Netlink {
    h: rtnetlink::Handle,
    rt: Handle,
}

/// The groups the drift watcher hears: links and their addresses.
const GROUPS: [MulticastGroup; 3] =
    [MulticastGroup::Link, MulticastGroup::Ipv4Ifaddr, MulticastGroup::Ipv6Ifaddr];

impl Netlink {
    /// Opens the connection in this thread's network namespace.
    pub fn open() -> Result<Self, KernelError> {
        Self::connect(&[]).map(|(nl, _)| nl)
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

    /// Opens the connection subscribed to link and address notifications,
    /// which the returned [`Events`] hears: one socket for requests and
    /// notifications.
    pub fn open_with_events() -> Result<(Self, Events), KernelError> {
        let (nl, rx) = Self::connect(&GROUPS)?;
        let ev = Events::from_receiver(rx, nl.rt.clone());
        Ok((nl, ev))
    }

    /// A connection of its own for notifications only.
    pub(crate) fn subscribe() -> Result<(Notifications, Handle), KernelError> {
        Self::connect(&GROUPS).map(|(nl, rx)| (rx, nl.rt))
    }

    fn connect(groups: &[MulticastGroup]) -> Result<(Self, Notifications), KernelError> {
        let rt = rt::handle()?;
        let io = |source| KernelError::Io { op: "open rtnetlink".into(), source };
        // The socket is made here, in this thread's namespace, and
        // registered with the runtime's reactor; the connection's task
        // only reads and writes it.
        let _in = rt.enter();
        let (mut conn, h, rx) = if groups.is_empty() {
            rtnetlink::new_connection().map_err(io)?
        } else {
            rtnetlink::new_multicast_connection(groups).map_err(io)?
        };
        // The kernel's own words with every refusal ("Unknown device
        // type", "Invalid VLAN id", ...): see `errors::extack`.
        conn.socket_mut().socket_mut().set_ext_ack(true).map_err(io)?;
        rt.spawn(conn);
        Ok((Self { h, rt }, Box::pin(rx)))
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
        let mut req = NetlinkMessage::from(msg);
        req.header.flags = NLM_F_REQUEST | flags;
        let mut h = self.h.clone();
        self.wait(op, async move {
            let mut answers = h.request(req)?;
            let mut got = vec![];
            while let Some(m) = answers.next().await {
                match m.payload {
                    NetlinkPayload::InnerMessage(m) => got.push(m),
                    NetlinkPayload::Error(e) if e.code.is_some() => {
                        return Err(rtnetlink::Error::NetlinkError(e));
                    }
                    _ => {}
                }
            }
            Ok(got)
        })
    }

    /// The index of interface `name` (in the connection's namespace).
    pub fn index(&self, name: &str) -> Result<u32, KernelError> {
        if name.contains('\0') {
            return Err(KernelError::BadName { name: name.into(), reason: "contains NUL" });
        }
        let req = self.h.link().get().match_name(name).execute();
        let op = format!("interface {name}");
        match self.wait(&op, async move { std::pin::pin!(req).try_next().await }) {
            Ok(Some(m)) => Ok(m.header.index),
            Ok(None) => Err(KernelError::NotFound { what: op }),
            Err(KernelError::NotFound { .. }) => Err(KernelError::NotFound { what: op }),
            Err(e) => Err(e),
        }
    }

    /// Reads a link back.
    pub fn link(&self, index: u32) -> Result<KernelLink, KernelError> {
        let req = self.h.link().get().match_index(index).execute();
        let op = format!("read link {index}");
        let m = self.wait(&op, async move { std::pin::pin!(req).try_next().await })?;
        let m = m.ok_or_else(|| KernelError::NotFound { what: format!("link {index}") })?;
        Ok(kernel_link(&m))
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
        let req = self.h.link().set(b.build()).execute();
        self.wait(&format!("configure link {index}"), req)
    }

    /// Sets a link's MAC address.
    pub fn set_mac(&self, index: u32, mac: [u8; 6]) -> Result<(), KernelError> {
        let m = LinkUnspec::new_with_index(index).address(mac.to_vec()).build();
        let req = self.h.link().set(m).execute();
        self.wait(&format!("set the MAC of link {index}"), req)
    }

    /// Adds an address; one already present is [`KernelError::Exists`].
    pub fn add_addr(&self, index: u32, ip: IpAddr, prefix: u8) -> Result<(), KernelError> {
        let req = self.h.address().add(index, ip, prefix).execute();
        self.wait(&format!("add {ip}/{prefix}"), req).map_err(|e| match e {
            KernelError::Exists { .. } => KernelError::Exists { what: format!("address {ip}") },
            e => e,
        })
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
        let mut req = self.h.address().add(index, ip, prefix).replace();
        let mut cache = CacheInfo::default();
        (cache.ifa_valid, cache.ifa_preferred) = (valid, preferred);
        req.message_mut().attributes.push(AddressAttribute::CacheInfo(cache));
        let op = format!("install {ip}/{prefix} for {valid} s");
        self.wait(&op, req.execute()).map_err(|e| match e {
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
        let req = self.h.address().del(m).execute();
        self.wait(&format!("remove {ip}/{prefix}"), req)
    }

    /// The addresses on a link.
    pub fn addrs(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, KernelError> {
        let req = self.h.address().get().set_link_index_filter(index).execute();
        let all = self.wait("list addresses", async move { req.try_collect::<Vec<_>>().await })?;
        Ok(all.iter().filter(|m| m.header.index == index).filter_map(addr_of).collect())
    }
}

/// The value of the first of `attrs` that `pick` takes (a message's
/// attribute of one kind), cloned; the value's default without one.
pub(crate) fn first_attr<A, T: Clone + Default>(attrs: &[A], pick: impl Fn(&A) -> Option<&T>) -> T {
    attrs.iter().find_map(pick).cloned().unwrap_or_default()
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

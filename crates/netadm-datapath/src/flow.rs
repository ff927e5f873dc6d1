//! Flows on the datapath: a link's frames that match a flow's attributes
//! (flowadm's: transport, local and remote address and port, DS field)
//! are limited by the flow's own `maxbw` before the link's, and go to the
//! port at the flow's priority; each flow counts what it carried.
//!
//! A flow is policed, not queued: a frame over its `maxbw`, or over what
//! its priority may have of a saturated port, is dropped and counted, so
//! that the link's other frames, read from the same queue, are never held
//! behind it. (A link's own `maxbw` and a full ring still hold the
//! sender back, as before.) Its `maxbw` is full duplex, as flowadm's:
//! what it receives is policed to the same rate by a bucket of its own,
//! before the link's IP interface is handed the frame.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::headers::{Headers, Ip, Net};
use crate::protect::in_prefix;
use crate::qos::{Bucket, LinkQos};

/// What a flow matches, seen from its link: `local` is the link's side
/// (a sent frame's source, a received one's destination).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowMatch {
    /// IP protocol.
    pub proto: Option<u8>,
    /// The link's address: network and prefix length.
    pub local: Option<(IpAddr, u8)>,
    /// The far end's address.
    pub remote: Option<(IpAddr, u8)>,
    /// The link's port.
    pub local_port: Option<u16>,
    /// The far end's port.
    pub remote_port: Option<u16>,
    /// DS field value and mask.
    pub dsfield: Option<(u8, u8)>,
}

impl FlowMatch {
    /// Whether the IP packet `ip` matches, sent by the link (`outbound`)
    /// or received by it.
    fn ip<A: Copy + Into<IpAddr>>(&self, ip: &Ip<'_, A>, outbound: bool) -> bool {
        let (src, dst) = (ip.src.into(), ip.dst.into());
        let (local, remote) = if outbound { (src, dst) } else { (dst, src) };
        let ports = ip.ports().map(|(s, d)| if outbound { (s, d) } else { (d, s) });
        self.proto.is_none_or(|p| p == ip.proto)
            && self.local.is_none_or(|(n, len)| in_prefix(n, len, local))
            && self.remote.is_none_or(|(n, len)| in_prefix(n, len, remote))
            && self.local_port.is_none_or(|p| ports.is_some_and(|(l, _)| l == p))
            && self.remote_port.is_none_or(|p| ports.is_some_and(|(_, r)| r == p))
            && self.dsfield.is_none_or(|(v, m)| ip.dsfield & m == v)
    }

    /// Whether the frame whose headers are `h` matches (only IP packets
    /// can).
    pub fn matches(&self, h: &Headers<'_>, outbound: bool) -> bool {
        match &h.net {
            Net::V4(ip) => self.ip(ip, outbound),
            Net::V6(ip) => self.ip(ip, outbound),
            _ => false,
        }
    }
}

/// One flow: its matcher, its limits and priority, and what it carried.
#[derive(Debug)]
pub struct Flow {
    /// The flow's name.
    pub name: String,
    /// What it matches.
    pub matcher: FlowMatch,
    /// Its `maxbw` (on what it sends) and `priority`, set with
    /// [`Flow::set`], which limits what it receives too.
    pub qos: LinkQos,
    /// Its `maxbw` on what it receives.
    inbound: Bucket,
    counts: [AtomicU64; 6],
}

/// What a flow carried: frames and bytes received, frames and bytes sent,
/// and what its limits dropped each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounts {
    /// Frames received.
    pub ipackets: u64,
    /// Their bytes.
    pub rbytes: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Their bytes.
    pub obytes: u64,
    /// Frames dropped on send: over its `maxbw`, or its priority's share
    /// of a saturated port.
    pub odrops: u64,
    /// Frames dropped on receive, over its `maxbw` (not in `ipackets`).
    pub idrops: u64,
}

impl Flow {
    /// A flow named `name` matching `matcher`, with no limit yet.
    pub fn new(name: &str, matcher: FlowMatch) -> Self {
        Self {
            name: name.to_owned(),
            matcher,
            qos: LinkQos::default(),
            inbound: Bucket::default(),
            counts: Default::default(),
        }
    }

    /// Sets its `maxbw` (b/s, both ways; 0: none) and priority.
    pub fn set(&self, maxbw: u64, priority: usize) {
        self.qos.set(maxbw, priority);
        self.inbound.set_rate(maxbw);
    }

    /// A frame of `len` bytes for the link: counted and let through, or,
    /// over its `maxbw`, counted as dropped (false).
    pub fn receive(&self, len: usize) -> bool {
        if self.inbound.take(len as u64) {
            self.count(len, false);
            true
        } else {
            self.counts[5].fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// Counts a frame of `len` bytes sent (`outbound`) or received.
    pub fn count(&self, len: usize, outbound: bool) {
        let at = if outbound { 2 } else { 0 };
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        self.counts[at + 1].fetch_add(len as u64, Ordering::Relaxed);
    }

    /// Counts a frame it dropped on send.
    pub fn dropped(&self) {
        self.counts[4].fetch_add(1, Ordering::Relaxed);
    }

    /// What it carried so far.
    pub fn counts(&self) -> FlowCounts {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        FlowCounts {
            ipackets: c(0),
            rbytes: c(1),
            opackets: c(2),
            obytes: c(3),
            odrops: c(4),
            idrops: c(5),
        }
    }
}

/// The flows of one link, the most specific first: a frame belongs to the
/// first that matches.
pub type Flows = Arc<[Arc<Flow>]>;

/// The flow of `flows` that the frame `frame` belongs to, sent by the
/// link (`outbound`) or received by it.
pub fn flow_of(flows: &[Arc<Flow>], frame: &[u8], outbound: bool) -> Option<Arc<Flow>> {
    if flows.is_empty() {
        return None;
    }
    let h = Headers::parse_past_tag(frame)?;
    flows.iter().find(|f| f.matcher.matches(&h, outbound)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame from 192.0.2.1:`sport` to
    /// 198.51.100.7:`dport` with TOS `tos`.
    fn udp4(sport: u16, dport: u16, tos: u8) -> Vec<u8> {
        use crate::headers::build::{eth, ipv4, udp};
        let ip = ipv4([192, 0, 2, 1].into(), [198, 51, 100, 7].into(), 17, &udp(sport, dport, &[]));
        let mut f = [eth([0; 6], [0; 6], 0x0800), ip].concat();
        // (The header checksum no longer holds: the matcher reads none.)
        f[15] = tos;
        f
    }

    #[test]
    fn a_frame_belongs_to_the_first_flow_that_matches_it_from_the_links_side() {
        let flow = |n: &str, m: FlowMatch| Arc::new(Flow::new(n, m));
        let dns =
            flow("dns", FlowMatch { proto: Some(17), remote_port: Some(53), ..Default::default() });
        let net = flow(
            "net",
            FlowMatch { remote: Some(("198.51.100.0".parse().unwrap(), 24)), ..Default::default() },
        );
        let ef = flow("ef", FlowMatch { dsfield: Some((0xb8, 0xfc)), ..Default::default() });
        let flows: Vec<Arc<Flow>> = vec![dns, net, ef];
        let name = |f: &[u8], out| flow_of(&flows, f, out).map(|f| f.name.clone());
        assert_eq!(name(&udp4(4000, 53, 0), true).as_deref(), Some("dns"));
        assert_eq!(name(&udp4(4000, 80, 0), true).as_deref(), Some("net"));
        // Received: the far end's port is the source.
        let mut answer = udp4(53, 4000, 0);
        answer[26..30].copy_from_slice(&[198, 51, 100, 7]);
        answer[30..34].copy_from_slice(&[192, 0, 2, 1]);
        assert_eq!(name(&answer, false).as_deref(), Some("dns"));
        assert_eq!(name(&answer, true).as_deref(), None, "sent, it is from 198.51.100.7:53");
        let ef_only = &flows[2..];
        assert!(flow_of(ef_only, &udp4(1, 2, 0xb9), true).is_some(), "ECN bits are masked");
        assert!(flow_of(ef_only, &udp4(1, 2, 0x28), true).is_none());
        assert!(flow_of(&flows, &[0u8; 10], true).is_none(), "too short for Ethernet");
        // What a VLAN link sends carries its tag: matched by what it holds.
        let plain = udp4(4000, 53, 0);
        let tagged = [&plain[..12], &[0x81, 0, 0, 5], &plain[12..]].concat();
        assert_eq!(name(&tagged, true).as_deref(), Some("dns"));
    }

    #[test]
    fn what_a_flow_receives_over_its_maxbw_is_dropped_and_counted_apart() {
        let f = Flow::new("in", FlowMatch::default());
        // No maxbw: everything passes.
        assert!((0..50).all(|_| f.receive(1000)));
        // 8 kb/s, 1,000 bytes a second: the first frame puts the bucket a
        // second in debt, and what comes at once after it is dropped.
        f.set(8_000, 1);
        let passed = (0..50).filter(|_| f.receive(1000)).count();
        assert_eq!(passed, 1);
        let c = f.counts();
        assert_eq!((c.ipackets, c.rbytes, c.idrops), (51, 51_000, 49));
        assert_eq!((c.opackets, c.odrops), (0, 0), "what it sends is counted apart");
    }
}

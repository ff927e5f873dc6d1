//! Bonds after they are made: their settings changed in place where the
//! kernel allows it, and their MTU changed one member at a time.
//!
//! **Settings** (`modify-aggr`, and a bond adopted at start): the kernel
//! changes the transmit hash, `miimon` and `min_links` on a bond that is
//! up; the LACP rate and activity only while it is down (its ports stay
//! in it); the mode only while it is down and has no ports (they are
//! released and join again). The bond keeps its index either way, so the
//! VLANs and macvlans over it stay.
//!
//! **The MTU.** A bond's own MTU change sets every member's at once, and a
//! NIC that resets its rings on an MTU change (e1000e, the seed's i40e)
//! drops carrier for seconds: both members at once, so traffic stops
//! (measured in a guest: 3.1–3.3 s of TCP stall per change). The kernel
//! takes a member MTU that differs from the bond's, and a bond MTU change
//! leaves members already at that value alone. So each member in turn is
//! taken out of use, changed, brought back and waited for — its carrier,
//! the bond's link monitor marking it up, and in 802.3ad its partner and
//! itself distributing again — with a deadline, never a fixed sleep; the
//! bond's own MTU comes last, both ways. Taking a member out of use:
//! - active-backup (and tlb/alb): backups first; the active member last,
//!   after another is made active;
//! - 802.3ad: the partner first stops distributing to it — an LACPDU on
//!   the member saying it is out of sync (what the bonding driver itself
//!   sends when a port leaves), and the partner's answer awaited — then the
//!   member goes down, which takes it out of the bond's own distribution
//!   at once;
//! - balance-xor and the rest: the member goes down.
//!
//! Before a member goes down, what the bond sends is steered to another
//! member (a tc filter on the bond's clsact egress hook redirecting every
//! frame there), and back once the member carries again: the bond itself
//! drops the member from its hashing only after the driver has closed it
//! (measured under QEMU: about 50 ms of frames sent into a closing
//! e1000e, lost). The clsact is put on the bond when it is made, while
//! it is down, and stays: putting it on (or taking it off) a bond that is
//! up deactivates the bond for an RCU grace period, dropping what it
//! sends meanwhile (under QEMU, one or two pings of one every 10 ms, at
//! every member's turn).
//!
//! A member that does not come back in time ends the one-at-a-time
//! change: the bond's MTU then changes the rest at once, and the verb's
//! notes say so.

use std::time::{Duration, Instant};

use netadm_datapath::lacp;
use netadm_kernel::{BondMode, BondSpec, LinkDetail, PacketSocket, lacp as bits};
use netadm_model::LinkName;

use super::{Kernel, kerr};
use crate::CoreError;

/// How long a member gets to come back after its MTU changed: e1000e
/// under QEMU takes 2–3 s to carrier, LACP up to 3 s more to distribute.
const BACK_WITHIN: Duration = Duration::from_secs(30);
/// How long an 802.3ad partner gets to answer that it stopped
/// distributing to a member (it answers at once; a partner that does not
/// speak LACP never does).
const PARTNER_WITHIN: Duration = Duration::from_secs(2);
/// How long the bond gets to make another member active.
const ACTIVE_WITHIN: Duration = Duration::from_secs(5);
/// The priority of the steering filter on a bond's clsact egress hook
/// (netadm's own: nothing else puts filters there).
const STEER_PRIO: u16 = 0xfe00;

/// Between two reads of a member's state while waiting: the kernel sends
/// no notification when a bond's LACP state changes, so it is read.
const POLL: Duration = Duration::from_millis(5);

/// The bond's mode in words, as `ip` spells it.
fn mode_name(m: Option<BondMode>) -> &'static str {
    match m {
        Some(BondMode::ActiveBackup) => "active-backup",
        Some(BondMode::Lacp) => "802.3ad",
        Some(BondMode::BalanceXor) => "balance-xor",
        Some(BondMode::BalanceRr) => "balance-rr",
        Some(BondMode::Broadcast) => "broadcast",
        Some(BondMode::BalanceTlb) => "balance-tlb",
        Some(BondMode::BalanceAlb) => "balance-alb",
        _ => "an unknown mode",
    }
}

/// Whether member `m` carries the bond's traffic now, as far as the
/// kernel says: up, carrier, the link monitor has it up, and it is
/// enabled (in active-backup it may be the backup); in 802.3ad also
/// distributing, and its partner too (unless it has none: defaulted).
fn carrying(m: &LinkDetail, mode: Option<BondMode>) -> bool {
    let Some(p) = &m.bond_port else { return false };
    let base = m.up && m.carrier == Some(true) && p.mii_up;
    match mode {
        Some(BondMode::Lacp) => {
            let us = p.actor_state.unwrap_or(0);
            let them = p.partner_state.unwrap_or(0);
            base && p.active
                && (us & bits::DEFAULTED != 0
                    || (us & bits::DISTRIBUTING != 0 && them & bits::DISTRIBUTING != 0))
        }
        Some(m) if m.has_active_port() => base,
        _ => base && p.active,
    }
}

/// Actor and partner information of bond port `port` as the bonding
/// driver shows it in `/proc/net/bonding/BOND` ("details actor lacp pdu",
/// "details partner lacp pdu"); netlink has no port number.
fn lacp_details(text: &str, port: &str) -> Option<(lacp::Info, lacp::Info)> {
    let block = text.split("Slave Interface: ").find(|b| b.lines().next() == Some(port))?;
    let section = |head: &str| -> Option<lacp::Info> {
        let body = block.split(head).nth(1)?;
        let mut i = lacp::Info::default();
        for l in body.lines().skip(1) {
            let Some((k, v)) = l.trim().split_once(": ") else { break };
            let n = || v.trim().parse::<u16>().ok();
            match k {
                "system priority" => i.system_priority = n()?,
                "system mac address" => {
                    let b: Vec<u8> =
                        v.split(':').filter_map(|x| u8::from_str_radix(x, 16).ok()).collect();
                    i.system = b.try_into().ok()?;
                }
                "port key" | "oper key" => i.key = n()?,
                "port priority" => i.port_priority = n()?,
                "port number" => i.port = n()?,
                "port state" => i.state = u8::try_from(n()?).ok()?,
                _ => break,
            }
        }
        Some(i)
    };
    Some((section("details actor lacp pdu:")?, section("details partner lacp pdu:")?))
}

impl Kernel {
    /// The ports of bond `index`, in the kernel's order.
    /// Whether bond `l` or any of its members is not at `mtu` (a change
    /// that failed part way through the members leaves the bond as it
    /// was and some members changed).
    pub(super) fn bond_out_of_step(&self, l: &LinkDetail, mtu: u32) -> Result<bool, CoreError> {
        Ok(l.mtu != mtu || self.members(l.index)?.iter().any(|m| m.mtu != mtu))
    }

    fn members(&self, index: u32) -> Result<Vec<LinkDetail>, CoreError> {
        let all = self.nl.links().map_err(kerr)?;
        Ok(all.into_iter().filter(|l| l.master == Some(index)).collect())
    }

    /// Device `index` read again until `want` holds, up to `within`; the
    /// last reading and whether it held.
    fn await_state(
        &self,
        index: u32,
        within: Duration,
        want: impl Fn(&LinkDetail) -> bool,
    ) -> Result<(LinkDetail, bool), CoreError> {
        let deadline = Instant::now() + within;
        loop {
            let l = self.nl.link_detail(index).map_err(kerr)?;
            if want(&l) {
                return Ok((l, true));
            }
            if Instant::now() >= deadline {
                return Ok((l, false));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Brings bond `l` to `spec` in place, where it differs; a note says
    /// what changed.
    pub(super) fn settle_bond(
        &self,
        l: &LinkDetail,
        spec: &BondSpec,
        link: &LinkName,
    ) -> Result<(), CoreError> {
        let Some(have) = &l.bond else { return Ok(()) };
        let change = have.differs(spec);
        if change.is_empty() {
            return Ok(());
        }
        let nl = &self.nl;
        let how = if change.mode {
            // Down and without ports; they join again as new members do.
            for m in self.members(l.index)? {
                nl.set_master(m.index, None).map_err(kerr)?;
            }
            nl.set_link(l.index, Some(false), None).map_err(kerr)?;
            nl.set_bond(l.index, spec, true).map_err(kerr)?;
            nl.set_link(l.index, Some(true), None).map_err(kerr)?;
            format!(
                "mode {} -> {} (the bond down and its members out meanwhile)",
                mode_name(have.mode),
                mode_name(Some(spec.mode))
            )
        } else if change.down {
            nl.set_link(l.index, Some(false), None).map_err(kerr)?;
            nl.set_bond(l.index, spec, false).map_err(kerr)?;
            nl.set_link(l.index, Some(true), None).map_err(kerr)?;
            "LACP rate or activity (the bond down for it, its members kept)".into()
        } else {
            let live = change.live.as_ref().expect("a change that is not empty");
            nl.set_bond(l.index, live, false).map_err(kerr)?;
            "transmit hash, link monitor or min_links (live)".into()
        };
        self.note(format!("{link}: bond {} changed in place: {how}", l.name));
        Ok(())
    }

    /// Changes bond `l`'s MTU to `mtu`, one member at a time (the module
    /// documentation says how), the bond's own last; the verb's notes say
    /// which mode and order ran and how long each member took.
    pub(super) fn bond_mtu(
        &self,
        l: &LinkDetail,
        mtu: u32,
        link: &LinkName,
    ) -> Result<(), CoreError> {
        let started = Instant::now();
        let mode = l.bond.as_ref().and_then(|b| b.mode);
        let mut members = self.members(l.index)?;
        // Active-backup: the backups first, the active member last.
        members.sort_by_key(|m| m.bond_port.as_ref().is_some_and(|p| p.active));
        let mut steps: Vec<String> = vec![];
        let mut at_once = false;
        for m in members.iter().filter(|m| m.mtu != mtu) {
            let t0 = Instant::now();
            let mut others = vec![];
            for o in members.iter().filter(|o| o.index != m.index) {
                let now = self.nl.link_detail(o.index).map_err(kerr)?;
                if carrying(&now, mode) {
                    others.push(now);
                }
            }
            if others.is_empty() {
                // Nothing else carries: there is nothing to hand over to.
                self.nl.set_link(m.index, None, Some(mtu)).map_err(kerr)?;
                steps.push(format!("{} alone (nothing else carrying), changed as it was", m.name));
                continue;
            }
            // The bond's own frames go out of `others[0]` meanwhile.
            let steered = match mode {
                Some(md) if md.has_active_port() => None,
                _ => Some(self.steer(l.index, &others[0])?),
            };
            let handed = (|| -> Result<(bool, String), CoreError> {
                let mut what = String::new();
                let down = match mode {
                    Some(md) if md.has_active_port() => {
                        if m.bond_port.as_ref().is_some_and(|p| p.active) {
                            let next = &others[0];
                            self.nl.set_active_port(l.index, next.index).map_err(kerr)?;
                            let (_, ok) = self.await_state(next.index, ACTIVE_WITHIN, |n| {
                                n.bond_port.as_ref().is_some_and(|p| p.active)
                            })?;
                            what = if ok {
                                format!(", {} made active first", next.name)
                            } else {
                                format!(", {} not active within {ACTIVE_WITHIN:?}", next.name)
                            };
                        }
                        false
                    }
                    Some(BondMode::Lacp) => {
                        what = format!(", {}", self.stop_distributing(&l.name, m)?);
                        true
                    }
                    _ => true,
                };
                if down {
                    self.nl.set_link(m.index, Some(false), None).map_err(kerr)?;
                }
                let changed = self.nl.set_link(m.index, None, Some(mtu)).map_err(kerr);
                // A member taken down comes back up whether or not its
                // MTU changed.
                if down {
                    let up = self.nl.set_link(m.index, Some(true), None).map_err(kerr);
                    changed.and(up)?;
                } else {
                    changed?;
                }
                let (_, back) = self.await_state(m.index, BACK_WITHIN, |n| carrying(n, mode))?;
                Ok((back, what))
            })();
            // The bond's frames go back to the bond's own choice whatever
            // happened: left steered, they would all leave by one member.
            let unsteered = steered.map(|s| self.unsteer(l.index, s)).transpose();
            let (back, mut what) = handed?;
            if let Some(u) = unsteered? {
                what.push_str(&u);
            }
            let took = t0.elapsed();
            if !back {
                steps.push(format!(
                    "{} not carrying again within {BACK_WITHIN:?}{what}; the rest changed at once",
                    m.name
                ));
                at_once = true;
                break;
            }
            steps.push(format!("{} {:.2} s{what}", m.name, took.as_secs_f64()));
        }
        self.nl.set_link(l.index, None, Some(mtu)).map_err(kerr)?;
        self.note(format!(
            "{link}: MTU {} -> {mtu} {} ({}): {}; then the bond; {:.2} s",
            l.mtu,
            if at_once { "partly one member at a time" } else { "one member at a time" },
            mode_name(mode),
            if steps.is_empty() { "members already there".into() } else { steps.join(", ") },
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// Steers what bond `bond` sends to member `to` (see the module
    /// documentation): a filter on the bond's clsact, which netadm puts
    /// there when it makes the bond, and here only if it is missing (a
    /// bond made otherwise) — and then leaves, since putting a qdisc on a
    /// device that is up drops what it sends meanwhile (the kernel
    /// deactivates it for an RCU grace period: under QEMU a frame or two
    /// each time). Whether it steered; a kernel without the tc modules
    /// (sch_ingress, cls_u32, act_mirred) steers nothing, and the change
    /// goes on without.
    fn steer(&self, bond: u32, to: &LinkDetail) -> Result<Steered, CoreError> {
        match self.nl.add_clsact(bond) {
            Ok(()) | Err(netadm_kernel::KernelError::Exists { .. }) => {}
            Err(e) => return Ok(Steered::Not(e.to_string())),
        }
        match self.nl.add_egress_redirect(bond, STEER_PRIO, to.index) {
            Ok(()) => Ok(Steered::To(to.name.clone())),
            Err(e) => Ok(Steered::Not(e.to_string())),
        }
    }

    /// Ends [`Kernel::steer`]'s steering (its filter goes, the clsact
    /// stays); what it did, in words.
    fn unsteer(&self, bond: u32, s: Steered) -> Result<String, CoreError> {
        match s {
            Steered::Not(why) => Ok(format!(", the bond's frames not steered ({why})")),
            Steered::To(name) => {
                self.nl.del_filter(bond, netadm_kernel::TcId::EGRESS, STEER_PRIO).map_err(kerr)?;
                Ok(format!(", the bond's frames steered to {name} meanwhile"))
            }
        }
    }

    /// 802.3ad: asks bond `bond`'s partner to stop distributing to member
    /// `m` — an LACPDU on `m` with the bond's own actor information but
    /// out of sync, not collecting, not distributing — and awaits its
    /// answer saying it did. What happened, in words.
    fn stop_distributing(&self, bond: &str, m: &LinkDetail) -> Result<String, CoreError> {
        let path = format!("/proc/net/bonding/{bond}");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| CoreError::hardware(format!("{path}: {e}")))?;
        let Some((mut actor, partner)) = lacp_details(&text, &m.name) else {
            return Ok(format!("no LACP details for it in {path}"));
        };
        if actor.state & bits::DEFAULTED != 0 {
            return Ok("no LACP partner to tell".into());
        }
        actor.state &= !(bits::SYNC | bits::COLLECTING | bits::DISTRIBUTING);
        let sock = PacketSocket::open_tap(m.index, lacp::ETHERTYPE).map_err(kerr)?;
        let src = m.mac.unwrap_or(actor.system);
        let pdu = lacp::encode(src, &actor, &partner);
        let sent = Instant::now();
        sock.send(lacp::SLOW_PROTOCOLS_MAC, &pdu[14..]).map_err(kerr)?;
        let never = netadm_kernel::eventfd().map_err(kerr)?;
        let deadline = sent + PARTNER_WITHIN;
        let mut buf = [0u8; 256];
        use std::os::fd::AsRawFd;
        while let Some((n, from)) =
            sock.recv(&mut buf, deadline, never.as_raw_fd()).map_err(kerr)?
        {
            // Whole again (the socket gives what follows the header).
            let mut f = Vec::with_capacity(14 + n);
            f.extend_from_slice(&lacp::SLOW_PROTOCOLS_MAC);
            f.extend_from_slice(&from);
            f.extend_from_slice(&lacp::ETHERTYPE.to_be_bytes());
            f.extend_from_slice(&buf[..n]);
            if let Some((them, _)) = lacp::decode(&f)
                && them.state & bits::DISTRIBUTING == 0
            {
                return Ok(format!(
                    "its partner stopped distributing to it in {:.1} ms",
                    sent.elapsed().as_secs_f64() * 1e3
                ));
            }
        }
        Ok(format!("its partner did not say it stopped within {PARTNER_WITHIN:?}"))
    }
}

/// Whether a bond's frames were steered to one member ([`Kernel::steer`]).
enum Steered {
    /// To this member.
    To(String),
    /// Not, and why.
    Not(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port's block of /proc/net/bonding/BOND as Linux 6.1 prints it.
    const PROC: &str = "Ethernet Channel Bonding Driver: v6.1.0\n\nBonding Mode: IEEE 802.3ad Dynamic link aggregation\n\
Slave Interface: eth0\nMII Status: up\nAggregator ID: 1\ndetails actor lacp pdu:\n    system priority: 65535\n\
    system mac address: 52:54:00:12:34:56\n    port key: 9\n    port priority: 255\n    port number: 1\n    port state: 61\n\
details partner lacp pdu:\n    system priority: 32768\n    system mac address: 02:00:00:00:00:01\n    oper key: 1\n\
    port priority: 32768\n    port number: 2\n    port state: 63\n\n\
Slave Interface: eth1\nMII Status: up\ndetails actor lacp pdu:\n    system priority: 65535\n\
    system mac address: 52:54:00:12:34:56\n    port key: 9\n    port priority: 255\n    port number: 2\n    port state: 71\n\
details partner lacp pdu:\n    system priority: 65535\n    system mac address: 00:00:00:00:00:00\n    oper key: 1\n\
    port priority: 255\n    port number: 1\n    port state: 1\n";

    #[test]
    fn a_ports_lacp_details_are_read_from_its_own_block() {
        let (a, p) = lacp_details(PROC, "eth0").unwrap();
        assert_eq!(
            (a.system_priority, a.system, a.key, a.port_priority, a.port, a.state),
            (65535, [0x52, 0x54, 0, 0x12, 0x34, 0x56], 9, 255, 1, 61)
        );
        assert_eq!((p.system, p.key, p.port, p.state), ([2, 0, 0, 0, 0, 1], 1, 2, 63));
        let (a, _) = lacp_details(PROC, "eth1").unwrap();
        assert_eq!((a.port, a.state & bits::DEFAULTED), (2, bits::DEFAULTED));
        assert!(lacp_details(PROC, "eth2").is_none());
    }

    fn member(up: bool, carrier: bool, mii: bool, active: bool, us: u8, them: u8) -> LinkDetail {
        LinkDetail {
            up,
            carrier: Some(carrier),
            bond_port: Some(netadm_kernel::BondPort {
                mii_up: mii,
                active,
                actor_state: Some(us),
                partner_state: Some(them),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_member_carries_when_the_kernel_and_in_8023ad_both_ends_say_so() {
        let lacp_ = Some(BondMode::Lacp);
        let dist = bits::SYNC | bits::COLLECTING | bits::DISTRIBUTING;
        assert!(carrying(&member(true, true, true, true, dist, dist), lacp_));
        // The partner stopped distributing to it.
        assert!(!carrying(&member(true, true, true, true, dist, bits::SYNC), lacp_));
        // No partner at all: enabled is enough.
        assert!(carrying(&member(true, true, true, true, bits::DEFAULTED, 0), lacp_));
        assert!(!carrying(&member(true, false, true, true, dist, dist), lacp_));
        assert!(!carrying(&member(true, true, false, true, dist, dist), lacp_));
        // A backup carries nothing now but is ready to.
        assert!(carrying(&member(true, true, true, false, 0, 0), Some(BondMode::ActiveBackup)));
        assert!(!carrying(&member(true, true, true, false, 0, 0), Some(BondMode::BalanceXor)));
        assert!(!carrying(&member(false, true, true, true, 0, 0), Some(BondMode::BalanceXor)));
    }
}

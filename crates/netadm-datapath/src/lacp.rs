//! LACP (IEEE 802.1AX): LACPDUs and a port's actor/partner state machine.
//!
//! Pure logic: time is passed in, frames are bytes in and out. What it
//! models: the Receive machine (partner information recorded from
//! LACPDUs; `current_while` of 3 timeouts; expiry to Expired, then to
//! Defaulted), Periodic Transmission (every 1 s with a short timeout, 30 s
//! with a long one; only when either end is active), Selection (the port is
//! selected while its partner is known and aggregatable), and Mux
//! (Attached -> Collecting -> Distributing as the partner shows sync and
//! collecting). A port carries traffic only while Distributing.

use std::time::{Duration, Instant};

/// The Slow Protocols multicast address LACPDUs go to.
pub const SLOW_PROTOCOLS_MAC: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x02];
/// The Slow Protocols ethertype.
pub const ETHERTYPE: u16 = 0x8809;
/// Bytes of an LACPDU frame (without FCS).
pub const PDU_LEN: usize = 124;

/// Actor/partner state bits, as on the wire.
pub mod state {
    /// LACP_Activity: active.
    pub const ACTIVITY: u8 = 1 << 0;
    /// LACP_Timeout: short.
    pub const TIMEOUT: u8 = 1 << 1;
    /// Aggregation: aggregatable.
    pub const AGGREGATION: u8 = 1 << 2;
    /// Synchronization: in sync.
    pub const SYNC: u8 = 1 << 3;
    /// Collecting.
    pub const COLLECTING: u8 = 1 << 4;
    /// Distributing.
    pub const DISTRIBUTING: u8 = 1 << 5;
    /// Defaulted: using default partner information.
    pub const DEFAULTED: u8 = 1 << 6;
    /// Expired: the partner's information timed out.
    pub const EXPIRED: u8 = 1 << 7;
}

/// One end's information in an LACPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Info {
    /// System priority.
    pub system_priority: u16,
    /// System id (a MAC).
    pub system: [u8; 6],
    /// Aggregation key.
    pub key: u16,
    /// Port priority.
    pub port_priority: u16,
    /// Port number.
    pub port: u16,
    /// State bits ([`state`]).
    pub state: u8,
}

/// Encodes an LACPDU from `src` carrying `actor` and `partner`.
pub fn encode(src: [u8; 6], actor: &Info, partner: &Info) -> [u8; PDU_LEN] {
    let mut f = [0u8; PDU_LEN];
    f[0..6].copy_from_slice(&SLOW_PROTOCOLS_MAC);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[14] = 1; // subtype LACP
    f[15] = 1; // version
    let tlv = |f: &mut [u8], at: usize, kind: u8, i: &Info| {
        f[at] = kind;
        f[at + 1] = 20;
        f[at + 2..at + 4].copy_from_slice(&i.system_priority.to_be_bytes());
        f[at + 4..at + 10].copy_from_slice(&i.system);
        f[at + 10..at + 12].copy_from_slice(&i.key.to_be_bytes());
        f[at + 12..at + 14].copy_from_slice(&i.port_priority.to_be_bytes());
        f[at + 14..at + 16].copy_from_slice(&i.port.to_be_bytes());
        f[at + 16] = i.state;
    };
    tlv(&mut f, 16, 1, actor);
    tlv(&mut f, 36, 2, partner);
    f[56] = 3; // collector information
    f[57] = 16;
    // terminator (type 0, length 0) and padding follow as zeros
    f
}

/// Decodes an LACPDU: (actor, partner) as the sender sees them.
pub fn decode(f: &[u8]) -> Option<(Info, Info)> {
    if f.len() < 76
        || f[12..14] != ETHERTYPE.to_be_bytes()
        || f[14] != 1
        || f[16] != 1
        || f[36] != 2
    {
        return None;
    }
    let info = |at: usize| Info {
        system_priority: u16::from_be_bytes([f[at + 2], f[at + 3]]),
        system: f[at + 4..at + 10].try_into().unwrap(),
        key: u16::from_be_bytes([f[at + 10], f[at + 11]]),
        port_priority: u16::from_be_bytes([f[at + 12], f[at + 13]]),
        port: u16::from_be_bytes([f[at + 14], f[at + 15]]),
        state: f[at + 16],
    };
    Some((info(16), info(36)))
}

/// How an aggregation runs LACP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// Active (sends on its own) or passive (answers an active partner).
    pub active: bool,
    /// Short timeout: 1 s periodic, 3 s to expire; long: 30 s and 90 s.
    pub short: bool,
}

impl Mode {
    fn period(self) -> Duration {
        if self.short { Duration::from_secs(1) } else { Duration::from_secs(30) }
    }
}

/// One port's LACP state.
#[derive(Debug, Clone)]
pub struct Port {
    /// What this end says about itself.
    pub actor: Info,
    /// What it last heard from the other end (or defaults).
    pub partner: Info,
    mode: Mode,
    /// When the partner's information expires.
    current_while: Option<Instant>,
    /// When the next periodic LACPDU is due.
    next_tx: Instant,
    /// Whether something changed that the partner must hear now.
    ntt: bool,
    expired_at: Option<Instant>,
}

impl Port {
    /// A port of an aggregation identified by (`system`, `key`).
    pub fn new(system: [u8; 6], key: u16, port: u16, mode: Mode, now: Instant) -> Self {
        let mut s = state::AGGREGATION | state::DEFAULTED;
        if mode.active {
            s |= state::ACTIVITY;
        }
        if mode.short {
            s |= state::TIMEOUT;
        }
        Self {
            actor: Info {
                system_priority: 32768,
                system,
                key,
                port_priority: 32768,
                port,
                state: s,
            },
            partner: Info::default(),
            mode,
            current_while: None,
            next_tx: now,
            ntt: true,
            expired_at: None,
        }
    }

    /// Whether the port may carry traffic.
    pub fn distributing(&self) -> bool {
        self.actor.state & state::DISTRIBUTING != 0
    }

    /// The Receive machine: an LACPDU arrived.
    pub fn receive(&mut self, pdu: &[u8], now: Instant) {
        let Some((their, about_us)) = decode(pdu) else { return };
        let before = self.actor.state;
        self.partner = their;
        let partner_short = their.state & state::TIMEOUT != 0;
        self.current_while = Some(
            now + 3 * if partner_short { Duration::from_secs(1) } else { Duration::from_secs(30) },
        );
        self.expired_at = None;
        self.actor.state &= !(state::DEFAULTED | state::EXPIRED);
        // The partner has our information right: we may be in sync.
        let matched = about_us.system == self.actor.system
            && about_us.key == self.actor.key
            && about_us.port == self.actor.port;
        self.mux(matched);
        if self.actor.state != before || !matched {
            self.ntt = true;
        }
    }

    /// Mux: Attached (sync) when the partner is known, aggregatable and has
    /// our information; Collecting then; Distributing once the partner is in
    /// sync and collecting too.
    fn mux(&mut self, matched: bool) {
        let p = self.partner.state;
        let selected = p & state::AGGREGATION != 0 && matched;
        let mut s = self.actor.state & !(state::SYNC | state::COLLECTING | state::DISTRIBUTING);
        if selected {
            s |= state::SYNC | state::COLLECTING;
            if p & state::SYNC != 0 && p & state::COLLECTING != 0 {
                s |= state::DISTRIBUTING;
            }
        }
        self.actor.state = s;
    }

    /// Advances timers; returns an LACPDU to send, if one is due.
    pub fn tick(&mut self, src: [u8; 6], now: Instant) -> Option<[u8; PDU_LEN]> {
        if let Some(t) = self.current_while
            && now >= t
        {
            // Expired: one short period to hear again, then defaulted.
            self.current_while = None;
            self.expired_at = Some(now);
            self.actor.state |= state::EXPIRED;
            self.partner.state &= !(state::SYNC | state::COLLECTING | state::DISTRIBUTING);
            self.mux(false);
            self.ntt = true;
        }
        if let Some(t) = self.expired_at
            && now >= t + Duration::from_secs(3)
        {
            self.expired_at = None;
            self.actor.state = (self.actor.state | state::DEFAULTED) & !state::EXPIRED;
            self.partner = Info::default();
        }
        let partner_active = self.partner.state & state::ACTIVITY != 0;
        let periodic = (self.mode.active || partner_active) && now >= self.next_tx;
        if periodic || (self.ntt && (self.mode.active || partner_active)) {
            self.ntt = false;
            let period = if self.partner.state & state::TIMEOUT != 0 {
                Duration::from_secs(1)
            } else {
                self.mode.period()
            };
            self.next_tx = now + period;
            return Some(encode(src, &self.actor, &self.partner));
        }
        None
    }

    /// When [`Port::tick`] next has something to do.
    pub fn next_deadline(&self) -> Instant {
        let mut d = self.next_tx;
        if let Some(t) = self.current_while {
            d = d.min(t);
        }
        if let Some(t) = self.expired_at {
            d = d.min(t + Duration::from_secs(3));
        }
        d
    }

    /// The port's carrier went down: its partner information is gone.
    pub fn link_down(&mut self, now: Instant) {
        self.current_while = None;
        self.expired_at = None;
        self.partner = Info::default();
        self.actor.state = (self.actor.state | state::DEFAULTED)
            & !(state::EXPIRED | state::SYNC | state::COLLECTING | state::DISTRIBUTING);
        self.next_tx = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    /// Two ends of one link (A and B, short timeouts), active or passive,
    /// as they start at the same instant.
    fn pair(a_active: bool, b_active: bool) -> (Instant, Port, Port) {
        let t = Instant::now();
        let a = Port::new(A, 1, 1, Mode { active: a_active, short: true }, t);
        let b = Port::new(B, 1, 1, Mode { active: b_active, short: true }, t);
        (t, a, b)
    }

    fn exchange(a: &mut Port, b: &mut Port, now: Instant) {
        for _ in 0..4 {
            if let Some(f) = a.tick(A, now) {
                b.receive(&f, now);
            }
            if let Some(f) = b.tick(B, now) {
                a.receive(&f, now);
            }
        }
    }

    #[test]
    fn pdu_round_trip() {
        let a =
            Info { system_priority: 1, system: A, key: 7, port_priority: 2, port: 3, state: 0x3d };
        let p = Info { system: B, ..Info::default() };
        let f = encode(A, &a, &p);
        assert_eq!(decode(&f), Some((a, p)));
        assert_eq!(decode(&f[..60]), None);
    }

    #[test]
    fn active_and_passive_negotiate_to_distributing() {
        let (t, mut a, mut b) = pair(true, false);
        assert!(!a.distributing() && !b.distributing());
        exchange(&mut a, &mut b, t);
        assert!(a.distributing() && b.distributing(), "{:#x} {:#x}", a.actor.state, b.actor.state);
        assert_eq!(a.actor.state & state::DEFAULTED, 0);
    }

    #[test]
    fn two_passive_ends_never_talk() {
        let (t, mut a, mut b) = pair(false, false);
        exchange(&mut a, &mut b, t);
        assert!(!a.distributing() && !b.distributing());
    }

    #[test]
    fn silence_expires_then_defaults_and_talk_recovers() {
        let (t, mut a, mut b) = pair(true, true);
        exchange(&mut a, &mut b, t);
        assert!(a.distributing());
        // b goes silent: after 3 s a expires, 3 s later it is defaulted.
        let _ = a.tick(A, t + Duration::from_millis(3100));
        assert!(a.actor.state & state::EXPIRED != 0 && !a.distributing());
        let _ = a.tick(A, t + Duration::from_millis(6200));
        assert!(a.actor.state & state::DEFAULTED != 0 && a.actor.state & state::EXPIRED == 0);
        // b talks again.
        exchange(&mut a, &mut b, t + Duration::from_secs(7));
        assert!(a.distributing() && b.distributing());
    }
}

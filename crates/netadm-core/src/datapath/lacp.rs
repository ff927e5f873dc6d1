//! Runs LACP on the ports of aggregations whose mode is not `off`: one
//! thread keeps every port's state machine's timers, sends its LACPDUs
//! through the port's ring 0, and is woken by LACPDUs the ports receive.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netadm_datapath::lacp::{self, Mode};
use netadm_rings::RingEngine;

struct PortRun {
    sm: lacp::Port,
    mac: [u8; 6],
    engine: Arc<RingEngine>,
    carrier: Arc<dyn Fn() -> bool + Send + Sync>,
    distributing: Arc<AtomicBool>,
    was_up: bool,
}

#[derive(Default)]
struct State {
    ports: BTreeMap<String, PortRun>,
    /// Distributing flags by port, shared with the aggregation TX paths.
    flags: BTreeMap<String, Arc<AtomicBool>>,
    shutdown: bool,
}

/// What a port's LACP configuration is.
pub(crate) struct PortCfg {
    pub device: String,
    pub system: [u8; 6],
    pub key: u16,
    pub number: u16,
    pub mode: Mode,
    pub mac: [u8; 6],
    pub engine: Arc<RingEngine>,
    pub carrier: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// Called on the LACP thread, with no lock held, after a round in which
/// a distributing flag changed.
type OnChange = Box<dyn Fn() + Send + Sync>;

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    /// Brings the aggregations' flow placement in step with what their
    /// members' distributing flags (and carriers) say now.
    on_change: std::sync::OnceLock<OnChange>,
}

/// The LACP thread and the ports it runs.
pub(crate) struct Lacp {
    sh: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Lacp {
    pub(crate) fn start() -> Self {
        let sh = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            on_change: std::sync::OnceLock::new(),
        });
        let t = {
            let sh = sh.clone();
            std::thread::Builder::new()
                .name("netadm-lacp".into())
                .spawn(move || run(&sh))
                .expect("spawn lacp")
        };
        Self { sh, thread: Some(t) }
    }

    /// Sets what the thread calls (once) after a round in which some
    /// port's distributing flag changed, here or on a receiving port's
    /// interrupt thread.
    pub(crate) fn on_change(&self, f: OnChange) {
        let _ = self.sh.on_change.set(f);
    }

    /// The distributing flag of a port (false until LACP says otherwise).
    pub(crate) fn flag(&self, device: &str) -> Arc<AtomicBool> {
        self.sh.state.lock().unwrap().flags.entry(device.to_owned()).or_default().clone()
    }

    /// A port's actor state bits, if LACP runs on it.
    pub(crate) fn actor_state(&self, device: &str) -> Option<u8> {
        self.sh.state.lock().unwrap().ports.get(device).map(|p| p.sm.actor.state)
    }

    /// Makes the set of ports running LACP match `cfgs`. Ports whose
    /// aggregation identity or mode is unchanged keep their state.
    pub(crate) fn configure(&self, cfgs: Vec<PortCfg>) {
        let now = Instant::now();
        let mut st = self.sh.state.lock().unwrap();
        let names: Vec<String> = cfgs.iter().map(|c| c.device.clone()).collect();
        st.ports.retain(|n, _| names.contains(n));
        for c in cfgs {
            let flag = st.flags.entry(c.device.clone()).or_default().clone();
            let same = st.ports.get(&c.device).is_some_and(|p| {
                p.sm.actor.system == c.system
                    && p.sm.actor.key == c.key
                    && p.sm.actor.port == c.number
                    && (p.sm.actor.state & lacp::state::ACTIVITY != 0) == c.mode.active
                    && (p.sm.actor.state & lacp::state::TIMEOUT != 0) == c.mode.short
            });
            if !same {
                flag.store(false, Ordering::Release);
                st.ports.insert(
                    c.device.clone(),
                    PortRun {
                        sm: lacp::Port::new(c.system, c.key, c.number, c.mode, now),
                        mac: c.mac,
                        engine: c.engine,
                        carrier: c.carrier,
                        distributing: flag,
                        was_up: true,
                    },
                );
            }
        }
        for (n, f) in st.flags.iter() {
            if !st.ports.contains_key(n) {
                f.store(false, Ordering::Release);
            }
        }
        self.sh.cv.notify_all();
    }

    /// What a port's classifier calls with the LACPDUs it receives.
    pub(crate) fn receiver(&self, device: &str) -> netadm_datapath::classify::SlowHandler {
        let sh = Arc::downgrade(&self.sh);
        let device = device.to_owned();
        Arc::new(move |frame| {
            if let Some(sh) = sh.upgrade() {
                Lacp::receive_on(&sh, &device, frame);
            }
        })
    }

    /// Wakes the thread: a carrier changed.
    pub(crate) fn kick(&self) {
        self.sh.cv.notify_all();
    }

    /// A port received an LACPDU.
    fn receive_on(sh: &Shared, device: &str, frame: &[u8]) {
        let mut st = sh.state.lock().unwrap();
        if let Some(p) = st.ports.get_mut(device) {
            // Our own LACPDU back (a reflector): a looped port never
            // aggregates.
            if lacp::decode(frame).is_some_and(|(a, _)| a.system == p.sm.actor.system) {
                return;
            }
            p.sm.receive(frame, Instant::now());
            p.distributing.store(p.sm.distributing(), Ordering::Release);
            sh.cv.notify_all();
        }
    }
}

impl Drop for Lacp {
    fn drop(&mut self) {
        self.sh.state.lock().unwrap().shutdown = true;
        self.sh.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(sh: &Shared) {
    // The distributing flags as the last call of `on_change` saw them.
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    let mut st = sh.state.lock().unwrap();
    loop {
        if st.shutdown {
            return;
        }
        let now = Instant::now();
        let mut out = Vec::new();
        let mut next = now + Duration::from_secs(60);
        for p in st.ports.values_mut() {
            let up = (p.carrier)();
            if !up {
                if p.was_up {
                    p.sm.link_down(now);
                }
                p.was_up = false;
                p.distributing.store(false, Ordering::Release);
                // Until the carrier returns (set_carrier kicks us).
                continue;
            }
            p.was_up = true;
            if let Some(pdu) = p.sm.tick(p.mac, now) {
                out.push((p.engine.clone(), pdu));
            }
            p.distributing.store(p.sm.distributing(), Ordering::Release);
            next = next.min(p.sm.next_deadline());
        }
        let flags: BTreeMap<String, bool> =
            st.flags.iter().map(|(n, f)| (n.clone(), f.load(Ordering::Acquire))).collect();
        let changed = flags != seen;
        seen = flags;
        drop(st);
        for (engine, pdu) in out {
            // Ring 0 always runs on a port with members; a full ring only
            // delays the PDU to the next period.
            let _ = engine.transmit(0, &[&pdu]);
        }
        // Outside the lock. The hook only hands the move on to a thread
        // of its own: moving flows drains the datapath, which must not
        // hold up the protocol's rounds.
        if changed && let Some(f) = sh.on_change.get() {
            f();
        }
        st = sh.state.lock().unwrap();
        // A flag an interrupt thread changed meanwhile (its notification
        // came while this thread was not waiting) is looked at now.
        let moved = st.flags.iter().any(|(n, f)| seen.get(n) != Some(&f.load(Ordering::Acquire)));
        let wait = next.saturating_duration_since(Instant::now());
        if !wait.is_zero() && !st.shutdown && !moved {
            st = sh.cv.wait_timeout(st, wait).unwrap().0;
        }
    }
}

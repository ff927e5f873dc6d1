//! The datapath of a TAP device: its reader thread sends what the kernel
//! queued through the link's virtual switch, then the link's transmit
//! path; its writer hands the kernel what the link received; a reader
//! busy-polls for the answer while traffic is light.

use std::sync::Arc;

use netadm_datapath::qos::LinkQos;
use netadm_datapath::{Forward, VSwitch};
use netadm_kernel::Tap;

/// What an interface's reader thread sends through: its link's switch,
/// then the link's transmit path (none over an etherstub).
pub(crate) struct Out {
    pub(crate) switch: Arc<VSwitch>,
    pub(crate) tx: Option<Arc<dyn netadm_datapath::Tx>>,
    /// Over an etherstub: the link's `maxbw` and `priority`, which act on
    /// what it sends through the switch (a shaped `tx` carries them
    /// otherwise).
    pub(crate) local: Option<Arc<LinkQos>>,
    pub(crate) mac: [u8; 6],
    pub(crate) vid: u16,
    /// The link's protection: what it lets through goes on.
    pub(crate) guard: Arc<netadm_datapath::protect::Guard>,
}

/// The most frames one burst of a reader reads before it looks at its
/// stop and its link's protection again.
const BURST: usize = 64;

/// The nice value a reader thread runs at for each priority (low,
/// medium, high): over an etherstub nothing else is shared but the CPU,
/// so a priority is its datapath thread's share of it when the CPU is
/// busy, as illumos gives a MAC client's threads its priority.
const NICE: [i32; netadm_datapath::qos::PRIORITIES] = [10, 5, 0];

/// Runs this thread at `q`'s priority's nice value once it differs from
/// `applied` (the one it runs at). Going back up needs CAP_SYS_NICE or an
/// RLIMIT_NICE that allows it (the unit's `LimitNICE=20`); refused, it
/// says so once and stays where it is.
fn follow_priority(q: &LinkQos, applied: &mut Option<usize>) {
    let p = q.priority();
    if *applied == Some(p) {
        return;
    }
    *applied = Some(p);
    // SAFETY: setpriority(2) of this thread (who 0 is the caller, per
    // thread on Linux).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, NICE[p]) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!("priority {p}: cannot set this reader's nice to {}: {e}", NICE[p]);
    }
}

/// Waits until `q`'s `maxbw` lets `len` more bytes through, on the
/// interface's stop descriptor; whether it was stopped meanwhile.
fn admit(q: &LinkQos, len: usize, stop: std::os::fd::RawFd) -> bool {
    while !q.bucket.take(len as u64) {
        let d = q.bucket.wait().unwrap_or(std::time::Duration::from_micros(100));
        if stopped_within(stop, d) {
            return false;
        }
    }
    true
}

pub(crate) fn reader(tap: Arc<Tap>, stop: std::os::fd::RawFd, out: Out) {
    let Out { switch, tx, local, mac, vid, guard } = out;
    netadm_nic::wake::short_slices();
    let mut priority = None;
    // A virtio-net header and the largest superframe.
    let mut buf = vec![0u8; netadm_nic::offload::VNET_HDR_LEN + 65536 + 1024];
    // The frame with its 802.1Q tag, for an interface on a VLAN.
    let mut tagged = Vec::new();
    let mut busy = BusyPoll::new();
    loop {
        let mut fds = [
            libc::pollfd { fd: tap.fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: fds is a valid array of two pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 || fds[1].revents != 0 {
            return;
        }
        if fds[0].revents & libc::POLLIN == 0 {
            continue;
        }
        // Everything queued, one poll per burst; the link's protection
        // as it stands at the burst's start.
        let mut sent = false;
        let policy = guard.current();
        let mut passed = (0u64, 0u64);
        // The burst's busy-poll window, and its hold on the rings'
        // interrupts (taken before the first frame is sent).
        let mut window = None;
        let mut hold = Vec::new();
        let mut answered = false;
        let mut read = 0;
        loop {
            // A burst ends after BURST frames, whatever waits: a tenant
            // that keeps the TAP's queue full still meets a change of its
            // protection, and its interface can still be stopped.
            if read == BURST {
                break;
            }
            read += 1;
            let (off, frame) = match tap.read_frame(&mut buf) {
                Ok(Some((off, f))) if !f.is_empty() => (off, f),
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return,
            };
            if let Some(p) = &policy {
                if let Err(why) = p.check(frame) {
                    guard.dropped(why);
                    continue;
                }
                passed = (passed.0 + 1, passed.1 + frame.len() as u64);
            }
            // After protection: a frame it drops spends none of the
            // link's maxbw.
            if let Some(q) = &local {
                follow_priority(q, &mut priority);
                // A flow's limit polices (see netadm_datapath::flow), then
                // the link's holds the sender back.
                let flow = q.flow_of(frame, true);
                if let Some(f) = &flow
                    && !f.qos.bucket.take(frame.len() as u64)
                {
                    f.dropped();
                    continue;
                }
                if !admit(q, frame.len(), stop) {
                    return;
                }
                if let Some(f) = &flow {
                    f.count(frame.len(), true);
                }
            }
            if switch.forward(vid, mac, frame, off) == Forward::Delivered {
                continue;
            }
            let Some(tx) = &tx else {
                if frame[0] & 1 == 0 {
                    switch.drop_frame();
                }
                continue;
            };
            // One flow per 5-tuple keeps each flow on one ring (hashed
            // before a VLAN's tag, which would hide the 5-tuple).
            let flow = netadm_nic::emu::flow_hash(frame);
            let (off, frame) = if vid == 0 {
                (off, frame)
            } else {
                (netadm_nic::vlan::push(frame, off, vid, &mut tagged), &tagged[..])
            };
            if window.is_none() {
                let w = busy.start_burst();
                if !w.is_zero() {
                    hold = tx.busy_poll_hold();
                }
                window = Some(w);
            } else {
                // A burst of several frames is not a request waiting for
                // its answer: the interrupts carry on as usual, and the
                // burst's busy poll after it, as for any burst.
                hold.clear();
                answered = false;
            }
            // Senders are paused only while a steering flip drains (µs to
            // a few ms): wait that out rather than drop; a ring that stays
            // full drops the frame, as a NIC would, and TCP recovers.
            // A bandwidth limit (maxbw, priority) says how long to wait.
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(20);
            while !tx.send_offload(flow, frame, off) {
                // Refused: what frees the ring (TX completions, written
                // back with the interrupt) must not wait for this poller.
                hold.clear();
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match tx.retry_in() {
                    _ if left.is_zero() => break,
                    // Waits on the interface's stop (an event), at most
                    // until the limiter has room: stopping never waits.
                    Some(d) => {
                        if stopped_within(stop, d.min(left)) {
                            return;
                        }
                    }
                    // A full ring: wait for its completions.
                    None => tx.wait_room(flow, frame, left),
                }
            }
            sent = true;
            // A lone request, held for: its answer is looked for before
            // the TAP is read again (one system call less on its way).
            if !hold.is_empty() && !answered {
                answered = busy.answered_at_once(&**tx);
            }
        }
        if passed.0 > 0 {
            guard.passed(passed.0, passed.1);
        }
        if sent
            && !answered
            && let Some(tx) = &tx
        {
            busy.wait_for_answer(window.unwrap_or_default(), &tap, &**tx);
        }
        // The answer delivered (or the window over): the rings' interrupts
        // are the device's again.
        drop(hold);
    }
}

/// Writes the frames it is given to `tap`, as received, each counted by
/// the flow of `qos`'s link it belongs to, and dropped there when over
/// the flow's `maxbw`.
pub(crate) fn writer(tap: &Arc<Tap>, qos: Arc<LinkQos>) -> netadm_datapath::classify::Endpoint {
    let tap = tap.clone();
    Arc::new(move |f: &[u8], off| {
        if qos.flow_of(f, false).is_none_or(|flow| flow.receive(f.len())) {
            let _ = tap.write_frame(f, off);
        }
    })
}

/// NAPI-style busy polling by a TAP reader (as Linux's `busy_poll`):
/// having sent what the kernel queued, it keeps polling the receive side
/// of the rings it sent on for a short window, so an answer (a ping's
/// echo, a TCP ACK) is delivered to the kernel as soon as the device has
/// placed it, instead of after its interrupt thread has been woken. The
/// window adapts: twice the last answer's delay (within [`BusyPoll::MIN`]
/// and [`BusyPoll::MAX`]), halved (not below the minimum) after a window
/// that saw nothing, off once [`BusyPoll::MISSES`] windows in a row saw
/// nothing, with a probe every [`BusyPoll::PROBE`] bursts while off. It
/// ends at once when a frame from the kernel waits in the TAP, and when
/// traffic is not light (the rings' adaptive moderation is not at its
/// lowest level: interrupts batch better then).
///
/// Off only after several misses in a row: a lone frame that gets no
/// answer (an IPv6 router solicitation, an MLD report, a DAD probe, all
/// of which the kernel sends on its own for seconds after an address is
/// added) says nothing about the traffic around it. Off at the first
/// miss, each such frame left the next [`BusyPoll::PROBE`] requests to
/// wait for the interrupt thread: 66 of the first 606 pings of a
/// `netadm-bench kernel` run, 51 of its first round's 200.
///
/// A burst of one frame that will be busy-polled for is sent holding the
/// rings' interrupts masked (`Tx::busy_poll_hold`, as Linux's
/// `SO_PREFER_BUSY_POLL` owns a NAPI), from before the frame is sent to
/// the end of the window: the answer, which the device places while the
/// send is still in progress when the far side answers inside it, is
/// then this reader's to deliver, and no interrupt thread is woken for
/// it first. The hold ends early at a second frame (not a request
/// waiting for its answer) and at a refused send (the TX completions
/// that would free the ring come with the interrupt).
#[derive(Debug)]
struct BusyPoll {
    window: std::time::Duration,
    bursts: u32,
    /// Windows in a row that saw no answer.
    misses: u32,
}

impl BusyPoll {
    const MIN: std::time::Duration = std::time::Duration::from_micros(20);
    const MAX: std::time::Duration = std::time::Duration::from_micros(200);
    const PROBE: u32 = 32;
    const MISSES: u32 = 4;

    fn new() -> Self {
        Self { window: Self::MAX, bursts: 0, misses: 0 }
    }

    /// An answer came `delay` after its request went.
    fn answered(&mut self, delay: std::time::Duration) {
        self.window = (delay * 2).clamp(Self::MIN, Self::MAX);
        self.misses = 0;
    }

    /// A window went by without an answer. (A probe's miss leaves busy
    /// polling off: the misses before it are still counted.)
    fn unanswered(&mut self) {
        self.misses = self.misses.saturating_add(1);
        self.window = if self.misses >= Self::MISSES {
            std::time::Duration::ZERO
        } else {
            (self.window / 2).max(Self::MIN)
        };
    }

    /// A burst begins: how long to busy-poll after it (zero: not at all).
    fn start_burst(&mut self) -> std::time::Duration {
        self.bursts = self.bursts.wrapping_add(1);
        if self.window.is_zero() && self.bursts % Self::PROBE == 0 {
            Self::MAX
        } else {
            self.window
        }
    }

    /// One look for the answer as soon as a lone request has gone: a far
    /// side that answers within the send (a veth's peer, whose echo the
    /// kernel runs inside the device's `sendmsg`) has had it placed in
    /// its RX ring by then. Whether it was there and delivered.
    fn answered_at_once(&mut self, tx: &dyn netadm_datapath::Tx) -> bool {
        let found = tx.busy_poll().is_some_and(|n| n > 0);
        if found {
            self.answered(std::time::Duration::ZERO);
        }
        found
    }

    fn wait_for_answer(
        &mut self,
        window: std::time::Duration,
        tap: &Tap,
        tx: &dyn netadm_datapath::Tx,
    ) {
        use std::time::Instant;
        if window.is_zero() {
            return;
        }
        let start = Instant::now();
        loop {
            match tx.busy_poll() {
                None => return,
                Some(0) => {}
                Some(_) => {
                    self.answered(start.elapsed());
                    return;
                }
            }
            if start.elapsed() >= window || tap_readable(tap) {
                break;
            }
            std::thread::yield_now();
        }
        self.unanswered();
    }
}

/// Waits up to `d` for the stop descriptor `stop` to be signalled;
/// whether it was (an interrupted wait is not: the caller looks again).
fn stopped_within(stop: std::os::fd::RawFd, d: std::time::Duration) -> bool {
    let mut fd = libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 };
    let ms = d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd; a bounded timeout.
    unsafe { libc::poll(&mut fd, 1, ms) == 1 }
}

/// Whether the kernel has queued a frame on `tap` (a poll that does not
/// wait).
fn tap_readable(tap: &Tap) -> bool {
    let mut fd = libc::pollfd { fd: tap.fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; a zero timeout.
    unsafe { libc::poll(&mut fd, 1, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::BusyPoll;
    use std::time::Duration;

    /// Bursts until the next one busy-polls, and the window it gets.
    fn next_polled(b: &mut BusyPoll) -> (u32, Duration) {
        (1..=BusyPoll::PROBE)
            .find_map(|n| Some(b.start_burst()).filter(|w| !w.is_zero()).map(|w| (n, w)))
            .expect("a probe within PROBE bursts")
    }

    #[test]
    fn a_lone_unanswered_frame_between_answered_requests_keeps_busy_polling() {
        let mut b = BusyPoll::new();
        b.answered(Duration::ZERO);
        assert_eq!(b.start_burst(), BusyPoll::MIN);
        // A router solicitation: no answer.
        b.unanswered();
        assert_eq!(b.start_burst(), BusyPoll::MIN, "the next request is busy-polled");
        b.answered(Duration::from_micros(30));
        assert_eq!(b.start_burst(), Duration::from_micros(60));
        for _ in 1..BusyPoll::MISSES {
            b.unanswered();
        }
        assert!(!b.start_burst().is_zero(), "one miss fewer than MISSES leaves it on");
    }

    #[test]
    fn misses_in_a_row_turn_it_off_and_a_probe_that_misses_leaves_it_off() {
        let mut b = BusyPoll::new();
        assert_eq!(b.start_burst(), BusyPoll::MAX);
        let mut windows = vec![];
        for _ in 0..BusyPoll::MISSES {
            b.unanswered();
            windows.push(b.start_burst());
        }
        let us = |v: &[u64]| v.iter().map(|&u| Duration::from_micros(u)).collect::<Vec<_>>();
        assert_eq!(windows, us(&[100, 50, 25, 0]), "halved, then off at the fourth miss");
        // Off: only a probe polls, at the longest window.
        let (n, w) = next_polled(&mut b);
        assert!(n > 1 && w == BusyPoll::MAX, "probe after {n} bursts, window {w:?}");
        b.unanswered();
        assert!(b.start_burst().is_zero(), "a probe that saw nothing leaves it off");
        // A probe that is answered turns it back on.
        next_polled(&mut b);
        b.answered(Duration::from_micros(5));
        assert_eq!(b.start_burst(), BusyPoll::MIN);
    }
}

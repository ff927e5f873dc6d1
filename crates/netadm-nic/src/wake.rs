//! How the datapath's threads sleep, wake and are scheduled.
//!
//! A device's engine thread sleeps on a [`Parker`]: like
//! `std::thread::park`, a token that an unpark leaves and a park consumes,
//! except that the sleep is a `ppoll(2)` on an eventfd, so the engine can
//! wait on its wire's socket too (an afpacket wire is read by the engine
//! itself, with no thread in between). Waking costs an atomic swap while
//! the engine runs, and an eventfd write only while it sleeps.
//!
//! Every thread a frame passes through (engine, interrupt, TAP reader)
//! asks the scheduler for short slices ([`short_slices`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI8, Ordering};
use std::time::Duration;

const EMPTY: i8 = 0;
const NOTIFIED: i8 = 1;
const PARKED: i8 = -1;

/// A park/unpark token whose sleep also ends when a file descriptor is
/// readable.
#[derive(Debug)]
pub(crate) struct Parker {
    state: AtomicI8,
    efd: OwnedFd,
}

impl Parker {
    pub(crate) fn new() -> std::io::Result<Self> {
        // SAFETY: eventfd(2); checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(Self { state: AtomicI8::new(EMPTY), efd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Leaves the token; wakes the sleeper if there is one.
    pub(crate) fn unpark(&self) {
        if self.state.swap(NOTIFIED, Ordering::Release) == PARKED {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writing 8 bytes to our own eventfd.
            unsafe { libc::write(self.efd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
    }

    /// Whether a thread sleeps in [`Self::park`] now.
    pub(crate) fn is_parked(&self) -> bool {
        self.state.load(Ordering::Acquire) == PARKED
    }

    /// Consumes the token, or sleeps until it comes, `also` is readable,
    /// or `timeout` passes (None: no limit). May return spuriously.
    /// Returns whether `also` was found readable.
    pub(crate) fn park(&self, also: Option<RawFd>, timeout: Option<Duration>) -> bool {
        // NOTIFIED -> EMPTY: the token was there; EMPTY -> PARKED: sleep.
        if self.state.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return false;
        }
        let mut fds = [
            libc::pollfd { fd: self.efd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: also.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos().into(),
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        let n = if also.is_some() { 2 } else { 1 };
        // SAFETY: `fds` holds `n` valid pollfds and `tsp` is null or a
        // valid timespec, both outliving the call.
        let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), n, tsp, std::ptr::null()) };
        if rc > 0 && fds[0].revents != 0 {
            let mut v = [0u8; 8];
            // SAFETY: reading 8 bytes from our own non-blocking eventfd.
            unsafe { libc::read(self.efd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
        }
        // Whatever woke us, the token (if any) is consumed: the caller
        // looks at everything next. A swap, not a store: a plain store may
        // become visible after the caller's next loads (x86 lets loads pass
        // older stores), so an unpark landing in between would find its
        // token overwritten while the caller had already read the old
        // state, and the engine would sleep on work it was told about. The
        // read-modify-write orders the two and acquires what the unpark
        // published.
        self.state.swap(EMPTY, Ordering::AcqRel);
        rc > 0 && fds[1].revents != 0
    }
}

/// `struct sched_attr` (linux/sched/types.h), version 1 (56 bytes).
#[repr(C)]
#[derive(Debug, Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// The slice the datapath's threads ask for: the shortest the kernel
/// grants.
pub const SLICE: Duration = Duration::from_micros(100);

/// Asks the scheduler to give the calling thread short slices
/// ([`SLICE`]; `sched_attr.sched_runtime` under `SCHED_OTHER`, Linux
/// 6.12+): with EEVDF a thread with a shorter slice gets an earlier
/// deadline, so when it wakes it runs before a CPU-bound thread has
/// used up a long slice — what a thread that hands a frame on needs, as a
/// threaded interrupt handler does — while its share of the CPU stays
/// what its weight gives (nothing runs longer or more often; a busy
/// datapath thread is preempted sooner). Returns false where the kernel
/// refuses (kernels before 6.12 ignore the field: nothing changes then).
pub fn short_slices() -> bool {
    // SAFETY: getpriority(2) for this thread (who 0).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: SLICE.as_nanos() as u64,
        deadline: 0,
        period: 0,
        util_min: 0,
        util_max: 0,
    };
    // SAFETY: sched_setattr(2) on this thread (pid 0) reading a valid,
    // fully initialised sched_attr of the size it states.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_token_left_before_parking_is_consumed_at_once() {
        let p = Parker::new().unwrap();
        p.unpark();
        let t = Instant::now();
        p.park(None, Some(Duration::from_secs(10)));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn unpark_wakes_a_sleeper_and_a_timeout_ends_the_sleep() {
        let p = Arc::new(Parker::new().unwrap());
        let t = Instant::now();
        p.park(None, Some(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20), "timed out, not earlier");
        let q = Arc::clone(&p);
        let waker = std::thread::spawn(move || {
            // Until the sleeper sleeps: then one unpark must wake it.
            while q.state.load(Ordering::Acquire) != PARKED {
                std::thread::yield_now();
            }
            q.unpark();
        });
        let t = Instant::now();
        p.park(None, None);
        assert!(t.elapsed() < Duration::from_secs(5));
        waker.join().unwrap();
    }

    #[test]
    fn a_thread_gets_short_slices_where_the_kernel_has_them() {
        std::thread::spawn(|| {
            assert!(short_slices(), "{}", std::io::Error::last_os_error());
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            let mut v = release.split(|c: char| !c.is_ascii_digit()).map(|x| x.parse::<u32>());
            let (major, minor) = (v.next().unwrap().unwrap(), v.next().unwrap().unwrap());
            if (major, minor) < (6, 12) {
                return; // the field is ignored: nothing to read back
            }
            let mut attr = SchedAttr::default();
            let size = std::mem::size_of::<SchedAttr>() as u32;
            // SAFETY: sched_getattr(2) on this thread into a sched_attr
            // of the size given.
            let rc = unsafe {
                libc::syscall(libc::SYS_sched_getattr, 0, &mut attr as *mut SchedAttr, size, 0)
            };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
            assert_eq!(attr.runtime, SLICE.as_nanos() as u64, "{attr:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_readable_descriptor_ends_the_sleep() {
        let other = Parker::new().unwrap();
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to an eventfd we own.
        unsafe { libc::write(other.efd.as_raw_fd(), one.as_ptr().cast(), 8) };
        let p = Parker::new().unwrap();
        let t = Instant::now();
        p.park(Some(other.efd.as_raw_fd()), None);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

//! DMA memory: page-backed regions that account every byte they hold, and the
//! descriptor ring that lives in them.
//!
//! A ring is shared by exactly two parties, the driver and the (emulated)
//! device, exactly as a real descriptor ring is shared over PCIe. Ownership of
//! each slot follows from three free-running indices:
//!
//! ```text
//!   clean <= done <= head <= tail <= clean + slots
//!   [clean, done)  written back by the device: TX sent / RX filled; the
//!                  driver reclaims or reaps them
//!   [done,  head)  processed by the device, not yet written back (TX
//!                  completions wait for the queue's moderated interrupt)
//!   [head,  tail)  owned by the device: TX to send / RX buffers posted
//!   [tail,  clean + slots)  owned by the driver: free TX slots / unposted RX
//! ```
//!
//! The driver alone moves `tail` and `clean`; the device alone moves `head`
//! and `done` (its head write-back). Each index is published with release
//! ordering after the slots it hands over have been written, and read with
//! acquire ordering before those slots are read. That is the whole
//! synchronisation protocol.
//!
//! Publishing `tail` does not tell the device anything: it learns of new
//! slots only from the tail doorbell ([`crate::emu::Device::write_tail`]),
//! which latches the tail the driver had published; the device-side
//! methods that take a `limit` go no further than that latched value.

use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::offload::Offload;

/// Bytes of one emulated hardware descriptor (both classes use 16-byte ones).
pub const DESC_BYTES: u64 = 16;

/// Counts DMA bytes held by one device; shared by every region it allocates.
#[derive(Debug, Default)]
pub struct DmaAccount {
    bytes: AtomicU64,
    peak: AtomicU64,
    regions: AtomicU64,
}

impl DmaAccount {
    /// A new, empty account.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Bytes currently allocated.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Highest number of bytes ever allocated at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Regions currently allocated.
    pub fn regions(&self) -> u64 {
        self.regions.load(Ordering::Relaxed)
    }

    fn add(&self, n: u64) {
        let now = self.bytes.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
        self.regions.fetch_add(1, Ordering::Relaxed);
    }

    fn sub(&self, n: u64) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        self.regions.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Anonymous, page-aligned memory mapped for one ring (memmap2); unmapped
/// on drop.
///
/// Pages are mapped lazily by the kernel, so allocating a large ring costs
/// one `mmap`, not a `memset`: what real DMA allocation costs scales with
/// the page tables, not with the buffer bytes.
struct Region {
    /// Where the mapping starts: the device and the driver write through
    /// it from shared references, as DMA would.
    ptr: NonNull<u8>,
    _map: memmap2::MmapMut,
}

impl Region {
    fn new(len: usize) -> Result<Self, DmaError> {
        let len = len.max(1);
        let mut map = memmap2::MmapOptions::new().len(len).map_anon().map_err(|e| {
            DmaError::Map { bytes: len as u64, errno: e.raw_os_error().unwrap_or(0) }
        })?;
        let ptr =
            NonNull::new(map.as_mut_ptr()).ok_or(DmaError::Map { bytes: len as u64, errno: 0 })?;
        Ok(Self { ptr, _map: map })
    }
}

/// Why DMA memory could not be had.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DmaError {
    /// The kernel refused the mapping.
    #[error("cannot map {bytes} bytes of DMA memory (errno {errno})")]
    Map {
        /// Bytes asked for.
        bytes: u64,
        /// The OS error number.
        errno: i32,
    },
    /// The ring geometry is unusable.
    #[error(
        "ring of {slots} slots of {buf_size} bytes: slots must be a power of two >= 2 and buffers >= 64 bytes"
    )]
    Geometry {
        /// Slots asked for.
        slots: u32,
        /// Buffer size asked for.
        buf_size: u32,
    },
}

/// One descriptor: the bytes its buffer holds, whether it ends a frame
/// (a frame longer than one buffer spans several descriptors, as on the
/// hardware), and the frame's offload context (on its first descriptor).
#[derive(Debug, Clone, Copy, Default)]
struct Desc {
    len: u32,
    eop: bool,
    off: Offload,
}

/// What a walk over a ring's frames does with the one it is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Take it and go on.
    Take,
    /// Take it and stop.
    TakeAndStop,
    /// Leave it (and those after it) where it is.
    Leave,
}

/// One descriptor ring and its buffers, in DMA memory.
pub struct DmaRing {
    region: Region,
    slots: u32,
    buf_size: u32,
    /// Descriptors, one per slot.
    descs: Box<[UnsafeCell<Desc>]>,
    head: AtomicU32,
    /// The device's head write-back: what the driver may reclaim or reap.
    done: AtomicU32,
    tail: AtomicU32,
    clean: AtomicU32,
    bytes: u64,
    account: Arc<DmaAccount>,
}

// SAFETY: slot contents are only touched by the party that owns the slot
// under the index protocol described in the module docs; indices are atomic.
unsafe impl Sync for DmaRing {}
// SAFETY: as above; the region is plain memory.
unsafe impl Send for DmaRing {}

impl std::fmt::Debug for DmaRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaRing")
            .field("slots", &self.slots)
            .field("buf_size", &self.buf_size)
            .field("clean", &self.clean.load(Ordering::Relaxed))
            .field("done", &self.done.load(Ordering::Relaxed))
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish()
    }
}

impl DmaRing {
    /// Allocates a ring of `slots` buffers of `buf_size` bytes, charged to
    /// `account` until the ring is dropped.
    pub fn new(slots: u32, buf_size: u32, account: &Arc<DmaAccount>) -> Result<Self, DmaError> {
        if !slots.is_power_of_two() || slots < 2 || buf_size < 64 {
            return Err(DmaError::Geometry { slots, buf_size });
        }
        let bytes = Self::bytes_for(slots, buf_size);
        let region = Region::new(slots as usize * buf_size as usize)?;
        account.add(bytes);
        Ok(Self {
            region,
            slots,
            buf_size,
            descs: (0..slots).map(|_| UnsafeCell::new(Desc::default())).collect(),
            head: AtomicU32::new(0),
            done: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            clean: AtomicU32::new(0),
            bytes,
            account: Arc::clone(account),
        })
    }

    /// DMA bytes a ring of this geometry holds: descriptors plus buffers.
    pub fn bytes_for(slots: u32, buf_size: u32) -> u64 {
        u64::from(slots) * (DESC_BYTES + u64::from(buf_size))
    }

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Size of each buffer in bytes.
    pub fn buf_size(&self) -> u32 {
        self.buf_size
    }

    /// DMA bytes this ring holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Device index: next slot the device will process.
    pub fn head(&self) -> u32 {
        self.head.load(Ordering::Acquire)
    }

    /// Device index: end of the slots the device has written back as
    /// done (TX completion, RX filled); the driver sees no further.
    pub fn done(&self) -> u32 {
        self.done.load(Ordering::Acquire)
    }

    /// Driver index: end of the slots handed to the device.
    pub fn tail(&self) -> u32 {
        self.tail.load(Ordering::Acquire)
    }

    /// Driver index: next slot the driver will reclaim.
    pub fn clean(&self) -> u32 {
        self.clean.load(Ordering::Acquire)
    }

    /// Slots handed to the device and not yet processed by it.
    pub fn device_owned(&self) -> u32 {
        self.tail().wrapping_sub(self.head())
    }

    /// Slots the device has written back as done and the driver has not
    /// reclaimed.
    pub fn completed(&self) -> u32 {
        self.done().wrapping_sub(self.clean())
    }

    /// Slots the device has processed but not yet written back.
    pub fn unwritten(&self) -> u32 {
        self.head().wrapping_sub(self.done())
    }

    /// Slots free for the driver to fill and hand over.
    pub fn free(&self) -> u32 {
        self.slots - self.tail().wrapping_sub(self.clean())
    }

    fn slot_ptr(&self, index: u32) -> (*mut u8, *mut Desc) {
        let slot = (index & (self.slots - 1)) as usize;
        // SAFETY: slot < slots, so the offset stays inside the region.
        let buf = unsafe { self.region.ptr.as_ptr().add(slot * self.buf_size as usize) };
        (buf, self.descs[slot].get())
    }

    /// Descriptors a frame of `len` bytes takes.
    pub fn slots_for(&self, len: usize) -> u32 {
        (len.div_ceil(self.buf_size as usize)).max(1) as u32
    }

    /// Copies `frame` into the slots from `start` on, one buffer each, the
    /// offload context on the first and end-of-packet on the last.
    ///
    /// # Safety
    ///
    /// The caller owns `slots_for(frame.len())` slots from `start`.
    unsafe fn write_chain(&self, start: u32, frame: &[u8], off: Offload) -> u32 {
        let n = self.slots_for(frame.len());
        let bs = self.buf_size as usize;
        for i in 0..n {
            let part = &frame
                [(i as usize * bs).min(frame.len())..((i as usize + 1) * bs).min(frame.len())];
            let (buf, d) = self.slot_ptr(start.wrapping_add(i));
            // SAFETY: the caller owns the slot; the part fits a buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), buf, part.len());
                *d = Desc {
                    len: part.len() as u32,
                    eop: i + 1 == n,
                    off: if i == 0 { off } else { Offload::NONE },
                };
            }
        }
        n
    }

    /// Reads the frame whose chain starts at `start` and ends before
    /// `end`: in place when it is one buffer, or consecutive full buffers
    /// that do not wrap, else gathered into `scratch`. Returns the frame, its offload context and the slots it
    /// took, or None if no end-of-packet comes before `end`.
    ///
    /// # Safety
    ///
    /// The caller owns the slots in `[start, end)`.
    unsafe fn read_chain<'a>(
        &self,
        start: u32,
        end: u32,
        scratch: &'a mut Vec<u8>,
    ) -> Option<(&'a mut [u8], Offload, u32)> {
        let avail = end.wrapping_sub(start);
        // SAFETY: the caller owns the slots.
        let first = unsafe { *self.slot_ptr(start).1 };
        if first.eop {
            let (buf, _) = self.slot_ptr(start);
            let l = first.len.min(self.buf_size) as usize;
            // SAFETY: as above; `scratch`'s lifetime stands for the slot's,
            // which the caller keeps until it moves its index.
            return Some((unsafe { std::slice::from_raw_parts_mut(buf, l) }, first.off, 1));
        }
        // A chain that does not wrap past the ring's last slot, every
        // buffer but its last full, already lies in one piece of the
        // region: read in place, as a driver builds its skb from the
        // buffers' pages rather than copying them out.
        let first_slot = start & (self.slots - 1);
        let bs = self.buf_size as usize;
        let mut len = 0usize;
        for i in 0..avail.min(self.slots - first_slot) {
            // SAFETY: the caller owns the slots.
            let d = unsafe { *self.slot_ptr(start.wrapping_add(i)).1 };
            let l = d.len.min(self.buf_size) as usize;
            len += l;
            if d.eop {
                let (buf, _) = self.slot_ptr(start);
                // SAFETY: slots start..=start+i are consecutive in the
                // region (no wrap), each before the last holds a full
                // buffer, so the frame is the region's next `len` bytes;
                // their lifetime is as in the one-buffer case above.
                let frame = unsafe { std::slice::from_raw_parts_mut(buf, len) };
                return Some((frame, first.off, i + 1));
            }
            if l != bs {
                break; // a short middle buffer: gather
            }
        }
        scratch.clear();
        for i in 0..avail {
            let (buf, d) = self.slot_ptr(start.wrapping_add(i));
            // SAFETY: as above.
            let d = unsafe { *d };
            let l = d.len.min(self.buf_size) as usize;
            // SAFETY: as above.
            scratch.extend_from_slice(unsafe { std::slice::from_raw_parts(buf, l) });
            if d.eop {
                return Some((&mut scratch[..], first.off, i + 1));
            }
        }
        None
    }

    // ---- driver side -------------------------------------------------

    /// Driver: writes `frame` into the next free slot and publishes the new
    /// tail (ringing the doorbell is the caller's job). Returns false when
    /// the ring is full or the frame is longer than a buffer.
    ///
    /// # Safety
    ///
    /// At most one thread at a time may use this ring's driver side
    /// (`driver_*` methods); the ring engine serialises it with the ring's
    /// TX or RX lock.
    pub unsafe fn driver_push(&self, frame: &[u8]) -> bool {
        if frame.len() > self.buf_size as usize || self.free() == 0 {
            return false;
        }
        let tail = self.tail.load(Ordering::Relaxed);
        let (buf, len) = self.slot_ptr(tail);
        // SAFETY: slot `tail` lies in [tail, clean + slots): owned by the
        // driver, whose side is single-threaded (this fn's contract). The
        // frame fits the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), buf, frame.len());
            *len = Desc { len: frame.len() as u32, eop: true, off: Offload::NONE };
        }
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// Driver: writes `frame` with its offload context into as many free
    /// slots as it needs (a chain, end-of-packet on the last) and
    /// publishes the new tail. Returns false when the ring lacks the
    /// slots.
    ///
    /// # Safety
    ///
    /// As [`Self::driver_push`]: one driver-side thread at a time.
    pub unsafe fn driver_push_frame(&self, frame: &[u8], off: Offload) -> bool {
        if self.free() < self.slots_for(frame.len()) {
            return false;
        }
        let tail = self.tail.load(Ordering::Relaxed);
        // SAFETY: the slots lie in [tail, clean + slots): the driver's.
        let n = unsafe { self.write_chain(tail, frame, off) };
        self.tail.store(tail.wrapping_add(n), Ordering::Release);
        true
    }

    /// Driver: reclaims every slot the device has written back as done
    /// (TX completion). Returns how many frames they held.
    ///
    /// # Safety
    ///
    /// As [`Self::driver_push`]: one driver-side thread at a time.
    pub unsafe fn driver_reclaim(&self) -> u32 {
        let clean = self.clean.load(Ordering::Relaxed);
        let done = self.done();
        let mut frames = 0;
        for i in 0..done.wrapping_sub(clean) {
            // SAFETY: [clean, done) is the driver's until it moves clean.
            frames += u32::from(unsafe { (*self.slot_ptr(clean.wrapping_add(i)).1).eop });
        }
        self.clean.store(done, Ordering::Release);
        frames
    }

    /// Walks the frames (chains) in `[from, end)`, at most `budget`,
    /// gathering chains into `scratch`, asking `f` of each what to do.
    /// Returns the index after the last frame taken and how many were.
    ///
    /// # Safety
    ///
    /// The caller owns `[from, end)`, and an acquire load ordered the other
    /// party's writes to those slots before this.
    unsafe fn walk(
        &self,
        from: u32,
        end: u32,
        budget: u32,
        scratch: &mut Vec<u8>,
        mut f: impl FnMut(&mut [u8], Offload) -> Step,
    ) -> (u32, u32) {
        let (mut at, mut n) = (from, 0);
        while n < budget && at != end {
            // SAFETY: the caller's contract.
            let Some((frame, off, used)) = (unsafe { self.read_chain(at, end, scratch) }) else {
                break;
            };
            let step = f(frame, off);
            if step == Step::Leave {
                break;
            }
            at = at.wrapping_add(used);
            n += 1;
            if step == Step::TakeAndStop {
                break;
            }
        }
        (at, n)
    }

    /// Driver: visits up to `budget` frames the device has completed (RX),
    /// each with its offload context, gathering chains into `scratch`,
    /// then reclaims their slots. Returns how many frames were visited.
    ///
    /// # Safety
    ///
    /// As [`Self::driver_push`]: one driver-side thread at a time.
    pub unsafe fn driver_reap_frames(
        &self,
        budget: u32,
        scratch: &mut Vec<u8>,
        mut visit: impl FnMut(&[u8], Offload),
    ) -> u32 {
        let clean = self.clean.load(Ordering::Relaxed);
        // SAFETY: [clean, done) is the driver's; the acquire load of done
        // ordered the device's writes before these reads.
        let (clean, n) = unsafe {
            self.walk(clean, self.done(), budget, scratch, |f, off| {
                visit(f, off);
                Step::Take
            })
        };
        self.clean.store(clean, Ordering::Release);
        n
    }

    /// Driver: hands every unposted slot to the device (RX buffer posting).
    /// Returns the new tail.
    ///
    /// # Safety
    ///
    /// As [`Self::driver_push`]: one driver-side thread at a time.
    pub unsafe fn driver_post_all(&self) -> u32 {
        let tail = self.clean().wrapping_add(self.slots);
        self.tail.store(tail, Ordering::Release);
        tail
    }

    /// Driver: visits up to `budget` slots the device has completed, in
    /// order, then reclaims them. Returns how many were visited.
    ///
    /// # Safety
    ///
    /// As [`Self::driver_push`]: one driver-side thread at a time.
    pub unsafe fn driver_reap(&self, budget: u32, mut visit: impl FnMut(&[u8])) -> u32 {
        let clean = self.clean.load(Ordering::Relaxed);
        let n = self.done().wrapping_sub(clean).min(budget);
        for i in 0..n {
            let (buf, len) = self.slot_ptr(clean.wrapping_add(i));
            // SAFETY: slots in [clean, done) belong to the driver until it
            // moves `clean`; the acquire load of done ordered the device's
            // writes before these reads. The length was written by the
            // device or driver before publishing and is <= buf_size.
            let frame = unsafe {
                let l = (*len).len.min(self.buf_size) as usize;
                std::slice::from_raw_parts(buf, l)
            };
            visit(frame);
        }
        self.clean.store(clean.wrapping_add(n), Ordering::Release);
        n
    }

    // ---- device side -------------------------------------------------

    /// Device: processes up to `budget` slots handed to it, in order, by
    /// calling `f` with each slot's bytes and its length field, and
    /// advances the head past them. Returns how many were processed.
    ///
    /// For TX the device reads the frame (`f` gets the whole buffer and the
    /// length to send); for RX it writes a frame into the buffer and sets
    /// the length.
    ///
    /// # Safety
    ///
    /// At most one thread at a time may use this ring's device side: the
    /// device's engine thread.
    pub unsafe fn device_process(
        &self,
        budget: u32,
        mut f: impl FnMut(&mut [u8], &mut u32),
    ) -> u32 {
        let head = self.head.load(Ordering::Relaxed);
        let n = self.tail().wrapping_sub(head).min(budget);
        for i in 0..n {
            let (buf, len) = self.slot_ptr(head.wrapping_add(i));
            // SAFETY: slots in [head, tail) belong to the device, whose side
            // is single-threaded (this fn's contract); the acquire load of tail
            // ordered the driver's writes before these accesses.
            unsafe {
                let b = std::slice::from_raw_parts_mut(buf, self.buf_size as usize);
                f(b, &mut (*len).len);
                (*len).eop = true;
                (*len).off = Offload::NONE;
            }
        }
        self.head.store(head.wrapping_add(n), Ordering::Release);
        self.done.store(head.wrapping_add(n), Ordering::Release);
        n
    }

    /// Device (TX): takes up to `budget` frames the driver queued, each
    /// with its offload context (chains gathered into `scratch`, the
    /// device's own memory), advances the head past them and writes it
    /// back at once. `f` returns false to leave a frame (and those after
    /// it) where it is, for later. Returns how many frames were taken.
    /// For a queue whose completions wait for an interrupt, see
    /// [`Self::device_take_upto`].
    ///
    /// # Safety
    ///
    /// As [`Self::device_process`]: the device's one thread.
    pub unsafe fn device_take(
        &self,
        budget: u32,
        scratch: &mut Vec<u8>,
        mut f: impl FnMut(&mut [u8], Offload) -> bool,
    ) -> u32 {
        let head = self.head.load(Ordering::Relaxed);
        // SAFETY: [head, tail) is the device's; the acquire load of tail
        // ordered the driver's writes before these reads.
        let (head, n) = unsafe {
            self.walk(head, self.tail(), budget, scratch, |fr, o| {
                if f(fr, o) { Step::Take } else { Step::Leave }
            })
        };
        self.head.store(head, Ordering::Release);
        self.device_write_back();
        n
    }

    /// Device (TX): takes up to `budget` frames the driver queued before
    /// `limit` (the tail the doorbell announced), each with its offload
    /// context, and advances the head past them; `f` returns whether to
    /// take another. Nothing is written back: the driver sees the
    /// completions at the next [`Self::device_write_back`]. Returns how
    /// many frames were taken.
    ///
    /// # Safety
    ///
    /// As [`Self::device_process`]: the device's one thread; `limit` is a
    /// tail the driver published.
    pub unsafe fn device_take_upto(
        &self,
        limit: u32,
        budget: u32,
        scratch: &mut Vec<u8>,
        mut f: impl FnMut(&mut [u8], Offload) -> bool,
    ) -> u32 {
        let head = self.head.load(Ordering::Relaxed);
        // The acquire load orders the driver's slot writes before the
        // reads below (the caller's `limit` is at most this tail).
        let tail = self.tail();
        let end = if tail.wrapping_sub(head) < limit.wrapping_sub(head) { tail } else { limit };
        // SAFETY: [head, end) is the device's.
        let (head, n) = unsafe {
            self.walk(head, end, budget, scratch, |fr, o| {
                if f(fr, o) { Step::Take } else { Step::TakeAndStop }
            })
        };
        self.head.store(head, Ordering::Release);
        n
    }

    /// Device: writes back the head — every slot processed so far is done
    /// as far as the driver can see (TX completion).
    pub fn device_write_back(&self) {
        self.done.store(self.head.load(Ordering::Acquire), Ordering::Release);
    }

    /// Slots handed to the device before `limit` (a tail the doorbell
    /// announced) that it has not processed.
    pub fn device_owned_upto(&self, limit: u32) -> u32 {
        let head = self.head();
        self.tail().wrapping_sub(head).min(limit.wrapping_sub(head))
    }

    /// Device (RX): the posted buffers from the head on, up to `limit`
    /// and not past the ring's last slot, as one piece of the region
    /// (they are consecutive there): where the device may write a frame
    /// before [`Self::device_commit_upto`] describes it. Empty when none
    /// is posted.
    ///
    /// # Safety
    ///
    /// As [`Self::device_process`]: the device's one thread; `limit` is
    /// a tail the driver published. The bytes are the device's until it
    /// advances the head past them.
    pub unsafe fn device_posted_run(&self, limit: u32) -> (*mut u8, usize) {
        let head = self.head();
        let to_end = self.slots - (head & (self.slots - 1));
        let n = self.device_owned_upto(limit).min(to_end);
        (self.slot_ptr(head).0, n as usize * self.buf_size as usize)
    }

    /// Device (RX): describes the `len` bytes it wrote at the start of
    /// [`Self::device_posted_run`] as one frame with its offload context
    /// (a chain of full buffers, the last holding the rest) and advances
    /// the head past it, as [`Self::device_fill_upto`] does after its
    /// copy. Returns false, describing nothing, when they do not fit.
    ///
    /// # Safety
    ///
    /// As [`Self::device_posted_run`], whose bytes the frame must be.
    pub unsafe fn device_commit_upto(&self, limit: u32, len: usize, off: Offload) -> bool {
        let n = self.slots_for(len);
        let head = self.head.load(Ordering::Relaxed);
        let to_end = self.slots - (head & (self.slots - 1));
        if self.device_owned_upto(limit).min(to_end) < n {
            return false;
        }
        let bs = self.buf_size as usize;
        for i in 0..n {
            let part = (len - (i as usize * bs).min(len)).min(bs);
            // SAFETY: the slot lies in [head, limit): posted to the device.
            unsafe {
                *self.slot_ptr(head.wrapping_add(i)).1 = Desc {
                    len: part as u32,
                    eop: i + 1 == n,
                    off: if i == 0 { off } else { Offload::NONE },
                };
            }
        }
        self.head.store(head.wrapping_add(n), Ordering::Release);
        self.done.store(head.wrapping_add(n), Ordering::Release);
        true
    }

    /// Device (RX): writes `frame` with its offload context into as many
    /// posted buffers as it needs and advances the head. Returns false,
    /// writing nothing, when too few buffers are posted.
    ///
    /// # Safety
    ///
    /// As [`Self::device_process`]: the device's one thread.
    pub unsafe fn device_fill(&self, frame: &[u8], off: Offload) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.device_fill_upto(self.tail(), frame, off) }
    }

    /// Device (RX): as [`Self::device_fill`], using only buffers posted
    /// before `limit` (the tail the doorbell announced). The filled
    /// buffers are written back at once.
    ///
    /// # Safety
    ///
    /// As [`Self::device_process`]: the device's one thread; `limit` is a
    /// tail the driver published.
    pub unsafe fn device_fill_upto(&self, limit: u32, frame: &[u8], off: Offload) -> bool {
        if self.device_owned_upto(limit) < self.slots_for(frame.len()) {
            return false;
        }
        let head = self.head.load(Ordering::Relaxed);
        // SAFETY: the slots lie in [head, limit): posted to the device.
        let n = unsafe { self.write_chain(head, frame, off) };
        self.head.store(head.wrapping_add(n), Ordering::Release);
        self.done.store(head.wrapping_add(n), Ordering::Release);
        true
    }
}

impl Drop for DmaRing {
    fn drop(&mut self) {
        self.account.sub(self.bytes);
    }
}

/// Buffer size a ring needs for `mtu`: Ethernet header, one VLAN tag and FCS
/// on top of the MTU, rounded up to the 128-byte granularity the hardware
/// buffer-size fields use.
pub fn buf_size_for_mtu(mtu: u32) -> u32 {
    let frame = mtu + 14 + 4 + 4;
    frame.div_ceil(128) * 128
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides of a ring from one thread: what a single-threaded test
    /// may do.
    trait Both {
        fn push(&self, f: &[u8]) -> bool;
        fn post_all(&self) -> u32;
        fn reap(&self, budget: u32, visit: impl FnMut(&[u8])) -> u32;
        fn process(&self, budget: u32, f: impl FnMut(&mut [u8], &mut u32)) -> u32;
    }

    // SAFETY (for every call below): each test uses its rings from its own
    // single thread, so each side has one user at a time.
    impl Both for DmaRing {
        fn push(&self, f: &[u8]) -> bool {
            // SAFETY: see the impl.
            unsafe { self.driver_push(f) }
        }
        fn post_all(&self) -> u32 {
            // SAFETY: see the impl.
            unsafe { self.driver_post_all() }
        }
        fn reap(&self, budget: u32, visit: impl FnMut(&[u8])) -> u32 {
            // SAFETY: see the impl.
            unsafe { self.driver_reap(budget, visit) }
        }
        fn process(&self, budget: u32, f: impl FnMut(&mut [u8], &mut u32)) -> u32 {
            // SAFETY: see the impl.
            unsafe { self.device_process(budget, f) }
        }
    }

    #[test]
    fn accounting_follows_ring_lifetime() {
        let acct = DmaAccount::new();
        let a = DmaRing::new(512, 1536, &acct).unwrap();
        let b = DmaRing::new(512, 9088, &acct).unwrap();
        assert_eq!(acct.bytes(), a.bytes() + b.bytes());
        assert_eq!(acct.regions(), 2);
        drop(a);
        assert_eq!(acct.bytes(), b.bytes());
        drop(b);
        assert_eq!(acct.bytes(), 0);
        assert_eq!(acct.regions(), 0);
        assert_eq!(acct.peak(), DmaRing::bytes_for(512, 1536) + DmaRing::bytes_for(512, 9088));
    }

    #[test]
    fn geometry_is_checked() {
        let acct = DmaAccount::new();
        assert!(matches!(DmaRing::new(3, 2048, &acct), Err(DmaError::Geometry { .. })));
        assert!(matches!(DmaRing::new(8, 16, &acct), Err(DmaError::Geometry { .. })));
        assert_eq!(acct.bytes(), 0);
    }

    #[test]
    fn tx_frames_flow_in_order_and_ring_fills() {
        let acct = DmaAccount::new();
        let r = DmaRing::new(4, 128, &acct).unwrap();
        for i in 0..4u8 {
            assert!(r.push(&[i; 60]));
        }
        assert!(!r.push(&[9; 60]), "a full ring refuses");
        assert!(!r.push(&[0; 200]), "an oversized frame is refused");
        let mut seen = vec![];
        assert_eq!(r.process(2, |b, l| seen.push(b[..*l as usize].to_vec())), 2);
        assert_eq!(r.device_owned(), 2);
        assert_eq!(r.completed(), 2);
        assert_eq!(r.reap(8, |_| {}), 2);
        assert_eq!(r.free(), 2);
        r.process(8, |b, l| seen.push(b[..*l as usize].to_vec()));
        assert_eq!(seen.iter().map(|f| f[0]).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert!(seen.iter().all(|f| f.len() == 60));
    }

    #[test]
    fn rx_buffers_are_posted_filled_and_reaped() {
        let acct = DmaAccount::new();
        let r = DmaRing::new(8, 128, &acct).unwrap();
        r.post_all();
        assert_eq!(r.device_owned(), 8);
        let n = r.process(3, |b, l| {
            b[..5].copy_from_slice(b"hello");
            *l = 5;
        });
        assert_eq!(n, 3);
        let mut got = 0;
        r.reap(64, |f| {
            assert_eq!(f, b"hello");
            got += 1;
        });
        assert_eq!(got, 3);
        r.post_all();
        assert_eq!(r.device_owned(), 8);
    }

    #[test]
    fn frames_longer_than_a_buffer_travel_as_chains_with_their_offload() {
        use crate::offload::{GSO_TCPV4, Offload};
        let acct = DmaAccount::new();
        let tx = DmaRing::new(8, 128, &acct).unwrap();
        let off = Offload { gso_type: GSO_TCPV4, gso_size: 100, ..Offload::NONE };
        let big: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        // SAFETY: this test's one thread plays both sides of each ring.
        unsafe {
            assert!(tx.driver_push_frame(&big, off));
            assert!(tx.driver_push_frame(&[7; 60], Offload::NONE));
            assert_eq!(tx.device_owned(), 4, "3 slots + 1");
            assert!(!tx.driver_push_frame(&[0; 600], Offload::NONE), "needs 5 slots, 4 free");
            let mut got = vec![];
            let mut scratch = vec![];
            assert_eq!(tx.device_take(1, &mut scratch, |_, _| false), 0, "left where it is");
            let take = |f: &mut [u8], o| {
                got.push((f.to_vec(), o));
                true
            };
            assert_eq!(tx.device_take(8, &mut scratch, take), 2);
            assert_eq!(got[0], (big.clone(), off));
            assert_eq!(got[1], (vec![7; 60], Offload::NONE));
            assert_eq!(tx.driver_reclaim(), 2, "frames, not slots");
            assert_eq!(tx.free(), 8);

            let rx = DmaRing::new(4, 128, &acct).unwrap();
            rx.driver_post_all();
            assert!(!rx.device_fill(&[1; 600], off), "5 buffers needed, 4 posted");
            assert!(rx.device_fill(&big, off));
            assert!(!rx.device_fill(&big, off), "one buffer left");
            let mut got = vec![];
            assert_eq!(rx.driver_reap_frames(8, &mut scratch, |f, o| got.push((f.to_vec(), o))), 1);
            assert_eq!(got, vec![(big, off)]);
            assert_eq!(rx.completed(), 0);
        }
    }

    #[test]
    fn a_chain_that_does_not_wrap_is_read_in_place_and_one_that_wraps_is_gathered() {
        let acct = DmaAccount::new();
        let rx = DmaRing::new(8, 128, &acct).unwrap();
        let region = rx.region.ptr.as_ptr() as usize..rx.region.ptr.as_ptr() as usize + 8 * 128;
        let frame = |seed: u32| -> Vec<u8> { (0..300u32).map(|i| (i * 7 + seed) as u8).collect() };
        let mut scratch = vec![];
        // SAFETY: this test's one thread plays both sides of the ring.
        unsafe {
            rx.driver_post_all();
            // Slots 0-2, then 3-5: neither wraps.
            assert!(rx.device_fill(&frame(1), Offload::NONE));
            assert!(rx.device_fill(&frame(2), Offload::NONE));
            let mut got = vec![];
            rx.driver_reap_frames(8, &mut scratch, |f, _| {
                got.push((f.to_vec(), region.contains(&(f.as_ptr() as usize))))
            });
            assert_eq!(got, vec![(frame(1), true), (frame(2), true)], "read in place");
            rx.driver_post_all();
            // Slots 6, 7, 0: wraps past the region's end.
            assert!(rx.device_fill(&frame(3), Offload::NONE));
            let mut got = vec![];
            rx.driver_reap_frames(8, &mut scratch, |f, _| {
                got.push((f.to_vec(), region.contains(&(f.as_ptr() as usize))))
            });
            assert_eq!(got, vec![(frame(3), false)], "gathered into the scratch buffer");
        }
    }

    #[test]
    fn a_frame_written_into_the_posted_run_is_described_in_place_and_never_past_the_end() {
        let acct = DmaAccount::new();
        let rx = DmaRing::new(8, 128, &acct).unwrap();
        let frame: Vec<u8> = (0..300u32).map(|i| (i * 3) as u8).collect();
        let mut scratch = vec![];
        // SAFETY: this test's one thread plays both sides of the ring.
        unsafe {
            assert_eq!(rx.device_posted_run(rx.tail()).1, 0, "nothing posted");
            let limit = rx.driver_post_all();
            assert_eq!(rx.device_posted_run(limit).1, 6 * 128 + 2 * 128);
            assert_eq!(rx.device_posted_run(limit - 4).1, 4 * 128, "only up to the doorbell");
            let (at, room) = rx.device_posted_run(limit);
            std::slice::from_raw_parts_mut(at, room)[..300].copy_from_slice(&frame);
            assert!(rx.device_commit_upto(limit, 300, Offload::NONE));
            let mut got = vec![];
            rx.driver_reap_frames(8, &mut scratch, |f, _| got.push(f.to_vec()));
            assert_eq!(got, vec![frame.clone()], "three buffers, one frame");
            let limit = rx.driver_post_all();
            assert!(rx.device_fill(&[1; 256], Offload::NONE), "slots 3, 4");
            assert_eq!(
                rx.device_posted_run(limit).1,
                3 * 128,
                "slots 5-7: the run stops at the end"
            );
            assert!(!rx.device_commit_upto(limit, 400, Offload::NONE), "4 slots do not fit 3");
            assert!(rx.device_commit_upto(limit, 384, Offload::NONE));
            assert_eq!(rx.completed(), 5);
        }
    }

    #[test]
    fn the_device_goes_no_further_than_the_doorbell_and_writes_back_when_told() {
        let acct = DmaAccount::new();
        let tx = DmaRing::new(8, 128, &acct).unwrap();
        let mut scratch = vec![];
        // SAFETY: this test's one thread plays both sides of each ring.
        unsafe {
            for i in 0..4u8 {
                assert!(tx.driver_push(&[i; 60]));
            }
            // The doorbell announced two of the four.
            let limit = tx.tail().wrapping_sub(2);
            assert_eq!(tx.device_owned_upto(limit), 2);
            let mut seen = vec![];
            assert_eq!(
                tx.device_take_upto(limit, 8, &mut scratch, |f, _| {
                    seen.push(f[0]);
                    true
                }),
                2
            );
            assert_eq!(seen, [0, 1]);
            assert_eq!(tx.device_owned_upto(limit), 0);
            assert_eq!((tx.unwritten(), tx.completed()), (2, 0));
            assert_eq!(tx.driver_reclaim(), 0, "nothing written back yet");
            tx.device_write_back();
            assert_eq!(tx.driver_reclaim(), 2);
            // `f` can stop the device after a frame.
            let n = tx.device_take_upto(tx.tail(), 8, &mut scratch, |_, _| false);
            assert_eq!((n, tx.device_owned()), (1, 1));

            let rx = DmaRing::new(4, 128, &acct).unwrap();
            rx.driver_post_all();
            let announced = rx.head();
            assert!(!rx.device_fill_upto(announced, &[1; 60], Offload::NONE), "none announced");
            assert!(rx.device_fill_upto(rx.tail(), &[1; 60], Offload::NONE));
            assert_eq!(rx.completed(), 1, "RX is written back as it is filled");
        }
    }

    #[test]
    fn buffer_sizes_follow_mtu() {
        assert_eq!(buf_size_for_mtu(1500), 1536);
        assert_eq!(buf_size_for_mtu(9000), 9088);
        assert_eq!(buf_size_for_mtu(68), 128);
    }
}

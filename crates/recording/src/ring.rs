//! Shared memory between the receiver and its file-writer process: a fixed set of buffers
//! ("slots") in a memfd that both map.
//!
//! Through a pipe every byte is copied twice more than with a writer thread (into the pipe, out
//! of it): at 4.096 Gb/s into tmpfs that tipped a 2-core host from no loss (writer thread) to
//! 19 % loss (writer process, pipe). With the ring the receiver gathers frames straight into a
//! slot and pipes only a 37-byte record naming it; the child writes from the slot and hands it
//! back. Ownership is one byte per slot in the shared header: `FREE` slots belong to the
//! receiver, `HANDED` ones to the writer (store with Release after filling / after writing, load
//! with Acquire before touching the data), so neither reads a buffer the other is changing.
//!
//! The child checks everything a record says against the ring (slot in range, length within the
//! slot, the slot actually handed over): the pipe is a trust boundary like any other input.
//!
//! No crate maps a memfd between two processes with per-slot ownership; memmap2 would cover only
//! the mmap call, so this is libc directly.

// unsafe: the shared-memory ring: memfd_create, mmap, and slots shared with the writer process.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

const HEADER: usize = 4096;
const MAGIC: [u8; 8] = *b"evlbiRNG";
/// The writer's failure flag (one byte: 0 writing, 1 failed) and the reason (u16 length at
/// [`FAILED_LEN_AT`], UTF-8 from [`FAILED_MSG_AT`]), for a multi-disk recorder to drop that
/// disk at once rather than when the recording ends.
const FAILED_AT: usize = 16;
const FAILED_LEN_AT: usize = 18;
const FAILED_MSG_AT: usize = 24;
/// The writer's look at its disk ([`SharedRing::publish_space`]): the free bytes of the file
/// system and the bytes it had written in all when it looked, each a u64 (8-aligned).
const SPACE_FREE_AT: usize = 1008;
const SPACE_WRITTEN_AT: usize = 1016;
const STATE_AT: usize = 1024;
/// Slots the header page can describe.
pub const MAX_SLOTS: u32 = (HEADER - STATE_AT) as u32;
const FREE: u8 = 0;
const HANDED: u8 = 1;

/// The mapped ring (header page, then `slots` × `slot_bytes`).
pub struct SharedRing {
    base: *mut u8,
    map_len: usize,
    slots: u32,
    slot_bytes: u32,
    fd: OwnedFd,
    /// The thread allocating the ring's memory ahead of the receiver (see
    /// [`SharedRing::create`]), and its stop flag.
    populator: std::sync::Mutex<Option<(JoinHandle<()>, Arc<AtomicBool>)>>,
}

/// What the populating thread allocates at a time (its stop flag is read between).
const POPULATE_CHUNK: usize = 8 << 20;

// SAFETY: the mapping is plain shared memory; all cross-thread/process coordination goes through
// the atomic state bytes, and slot data is only touched by the side that owns the slot.
unsafe impl Send for SharedRing {}
// SAFETY: as above; `&SharedRing` methods only read the header or use atomics.
unsafe impl Sync for SharedRing {}

/// Map `len` bytes of `fd` (its pages allocated when first touched).
fn map(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of a descriptor we own; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

impl SharedRing {
    /// A new ring of `slots` buffers of `slot_bytes` (rounded up to whole pages), all free, its
    /// memory allocated from the start on by a thread of its own: the receiver first touches a
    /// slot deep in the ring exactly when the disk is behind, and page faults then land in the
    /// receive path (capture tools pre-fault their buffers for the same reason). Not before
    /// returning (MAP_POPULATE, until session 7): 256 MiB took 0.35–0.5 s here and 0.9–1.2 s with
    /// both cores busy, while a backend already sending filled the socket's buffer (the FS's
    /// 32 MB is 0.5 s at 512 Mb/s, its 64 MB 0.125 s at 4 Gb/s): every `record = on` lost the
    /// frames of that overflow (675 of 51 000 in a 3-scan FS session with both cores busy).
    pub fn create(slots: u32, slot_bytes: u32) -> io::Result<SharedRing> {
        let slots = slots.clamp(1, MAX_SLOTS);
        let slot_bytes = slot_bytes.max(1).next_multiple_of(4096);
        let map_len = HEADER + slots as usize * slot_bytes as usize;
        // SAFETY: the name is a NUL-terminated literal; the result is checked.
        let raw = unsafe { libc::memfd_create(c"evlbi-writer-ring".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = libc::off_t::try_from(map_len).map_err(|_| io::Error::other("ring too large"))?;
        // SAFETY: ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let base = map(&fd, map_len)?;
        let stop = Arc::new(AtomicBool::new(false));
        let populator = {
            let (flag, fd) = (Arc::clone(&stop), fd.as_raw_fd());
            let base = base as usize;
            std::thread::Builder::new()
                .name("ring-populate".into())
                .spawn(move || populate(base, map_len, fd, &flag))
                .ok()
                .map(|h| (h, stop))
        };
        // Without a thread (none could start) the receiver faults the pages in as it writes.
        let ring = SharedRing {
            base,
            map_len,
            slots,
            slot_bytes,
            fd,
            populator: std::sync::Mutex::new(populator),
        };
        // SAFETY: the header page is inside the mapping and nobody else has it yet.
        unsafe {
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), base, 8);
            std::ptr::copy_nonoverlapping(slots.to_le_bytes().as_ptr(), base.add(8), 4);
            std::ptr::copy_nonoverlapping(slot_bytes.to_le_bytes().as_ptr(), base.add(12), 4);
        }
        Ok(ring)
    }

    /// Wait until the ring's memory is allocated, or until `deadline`: for a receiver that sets
    /// its output up before it binds its socket (nothing queues meanwhile), so the receive path
    /// never faults a page in — allocating beside a receiver already reading held it off long
    /// enough to drop frames at 2 Gb/s (bench/record_start.sh). Past the deadline the thread
    /// goes on allocating and the receiver faults in what it reaches first: a receiver never
    /// waits for its own set-up without end (on a cold VM 8 MiB took 20–30 ms, 256 MiB up to
    /// a second). Whether the memory is all allocated.
    pub fn wait_populated(&self, deadline: std::time::Instant) -> bool {
        let Ok(mut populator) = self.populator.lock() else {
            return false;
        };
        while populator.as_ref().is_some_and(|(t, _)| !t.is_finished()) {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if let Some((thread, _)) = populator.take() {
            let _ = thread.join();
        }
        true
    }

    /// Map a ring another process created and passed as `fd`, checking its header against its
    /// size.
    pub fn open(fd: OwnedFd) -> io::Result<SharedRing> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("writer ring: {what}"));
        let size = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        let size = usize::try_from(size).map_err(|_| bad("too large"))?;
        if size < HEADER {
            return Err(bad("smaller than its header"));
        }
        let base = map(&fd, size)?;
        let mut head = [0u8; 16];
        // SAFETY: the first 16 bytes are inside the mapping (size ≥ HEADER).
        unsafe { std::ptr::copy_nonoverlapping(base, head.as_mut_ptr(), 16) };
        let ring = SharedRing {
            base,
            map_len: size,
            slots: u32::from_le_bytes([head[8], head[9], head[10], head[11]]),
            slot_bytes: u32::from_le_bytes([head[12], head[13], head[14], head[15]]),
            fd,
            populator: std::sync::Mutex::new(None),
        };
        if head[..8] != MAGIC {
            return Err(bad("bad magic"));
        }
        if ring.slots == 0
            || ring.slots > MAX_SLOTS
            || HEADER as u64 + u64::from(ring.slots) * u64::from(ring.slot_bytes) != size as u64
        {
            return Err(bad("header does not match its size"));
        }
        Ok(ring)
    }

    /// The descriptor to pass to the writer process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes as usize
    }

    fn state(&self, slot: u32) -> &AtomicU8 {
        debug_assert!(slot < self.slots);
        // SAFETY: STATE_AT + slot < HEADER ≤ map_len; AtomicU8 has the layout of u8 and the
        // byte is only ever accessed atomically.
        unsafe { &*self.base.add(STATE_AT + slot as usize).cast::<AtomicU8>() }
    }

    fn slot_ptr(&self, slot: u32) -> *mut u8 {
        // SAFETY: slot < slots, so the slot lies inside the mapping.
        unsafe { self.base.add(HEADER + slot as usize * self.slot_bytes as usize) }
    }

    /// Receiver: a free slot not in `held` (marked held), or `None` when the writer has them all.
    pub fn try_take(&self, held: &mut [bool]) -> Option<u32> {
        let slot = (0..self.slots).find(|&s| {
            !held.get(s as usize).copied().unwrap_or(true) && self.state(s).load(Ordering::Acquire) == FREE
        })?;
        held[slot as usize] = true;
        Some(slot)
    }

    /// Receiver: the bytes of a slot it holds.
    ///
    /// # Safety
    /// The caller must hold `slot` (from [`SharedRing::try_take`], not yet handed over) and keep
    /// at most one such slice per slot alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slot_mut(&self, slot: u32) -> &mut [u8] {
        // SAFETY: in bounds (slot < slots); exclusive by the caller's contract and the FREE state
        // keeping the writer away.
        unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(slot), self.slot_bytes as usize) }
    }

    /// Receiver: give a filled slot to the writer (send its record after this).
    pub fn hand_over(&self, slot: u32) {
        self.state(slot).store(HANDED, Ordering::Release);
    }

    /// Writer: `len` bytes of `slot` from byte `at`, if the slot exists, the range fits and the
    /// receiver handed it over.
    pub fn handed(&self, slot: u32, at: usize, len: usize) -> Option<&[u8]> {
        if slot >= self.slots || at.checked_add(len)? > self.slot_bytes as usize {
            return None;
        }
        if self.state(slot).load(Ordering::Acquire) != HANDED {
            return None;
        }
        // SAFETY: in bounds; the receiver does not touch a HANDED slot until it is released.
        Some(unsafe { std::slice::from_raw_parts(self.slot_ptr(slot).add(at), len) })
    }

    /// Writer: done with `slot`; the receiver may reuse it.
    pub fn release(&self, slot: u32) {
        if slot < self.slots {
            self.state(slot).store(FREE, Ordering::Release);
        }
    }
}

impl SharedRing {
    fn failed_flag(&self) -> &AtomicU8 {
        // SAFETY: FAILED_AT < HEADER ≤ map_len; accessed only atomically.
        unsafe { &*self.base.add(FAILED_AT).cast::<AtomicU8>() }
    }

    /// Writer: it has failed (its disk full, unwritable or gone) and writes no more; `why`
    /// (cut to the room in the header) is for the receiver's message. The first call wins.
    pub fn set_failed(&self, why: &str) {
        if self.failed_flag().load(Ordering::Acquire) != 0 {
            return;
        }
        let mut n = why.len().min(SPACE_FREE_AT - FAILED_MSG_AT);
        while !why.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: the message area lies in the header page; only this writer writes it, and
        // only before the flag below is set (the receiver reads it only after seeing the flag).
        unsafe {
            std::ptr::copy_nonoverlapping(why.as_ptr(), self.base.add(FAILED_MSG_AT), n);
            std::ptr::copy_nonoverlapping((n as u16).to_le_bytes().as_ptr(), self.base.add(FAILED_LEN_AT), 2);
        }
        self.failed_flag().store(1, Ordering::Release);
    }

    /// Receiver: why the writer failed, once it has.
    pub fn failed(&self) -> Option<String> {
        if self.failed_flag().load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut len = [0u8; 2];
        // SAFETY: header bytes, written before the flag was set (Acquire above pairs with the
        // writer's Release); the length is bounded to the message area.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(FAILED_LEN_AT), len.as_mut_ptr(), 2) };
        let n = usize::from(u16::from_le_bytes(len)).min(SPACE_FREE_AT - FAILED_MSG_AT);
        // SAFETY: as above.
        let msg = unsafe { std::slice::from_raw_parts(self.base.add(FAILED_MSG_AT), n) };
        Some(String::from_utf8_lossy(msg).into_owned())
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at + 8 <= STATE_AT);
        // SAFETY: 8 aligned bytes of the header page (the mapping is page-aligned), below the
        // slot states; only ever accessed atomically.
        unsafe { &*self.base.add(at).cast::<AtomicU64>() }
    }

    /// Writer: its disk had `free` bytes free when it had written `written` bytes in all. The
    /// free space first, then the count: a receiver reading the count first and the space after
    /// ([`SharedRing::space`]) never pairs a space with an older count than its own, so it never
    /// thinks the disk has more room than it had.
    pub fn publish_space(&self, free: u64, written: u64) {
        self.word(SPACE_FREE_AT).store(free, Ordering::Release);
        self.word(SPACE_WRITTEN_AT).store(written, Ordering::Release);
    }

    /// Receiver: the writer's last look at its disk, `(free, written)` (see
    /// [`SharedRing::publish_space`]); `None` before the first.
    pub fn space(&self) -> Option<(u64, u64)> {
        let written = self.word(SPACE_WRITTEN_AT).load(Ordering::Acquire);
        let free = self.word(SPACE_FREE_AT).load(Ordering::Acquire);
        (free != 0 || written != 0).then_some((free, written))
    }

    /// Slots with the writer (handed over, not yet written): its backlog.
    pub fn handed_count(&self) -> u32 {
        (0..self.slots)
            .filter(|&s| self.state(s).load(Ordering::Acquire) == HANDED)
            .count() as u32
    }
}

/// Allocate and map the `len` bytes at `base` (the ring's mapping of memfd `fd`) from the start,
/// a chunk at a time, until done or `stop`: MADV_POPULATE_WRITE (Linux 5.14) faults the pages in
/// as a write would, without writing, so it may run while the receiver fills the first slots;
/// where the kernel has no such advice, fallocate allocates the memfd's pages (the receiver's
/// first touch of each is then a minor fault). Errors end it: the receiver faults the rest in.
fn populate(base: usize, len: usize, fd: i32, stop: &AtomicBool) {
    let mut advice = true;
    let mut off = 0;
    while off < len && !stop.load(Ordering::Relaxed) {
        let n = POPULATE_CHUNK.min(len - off);
        let ok = if advice {
            // SAFETY: [base+off, base+off+n) is inside the ring's mapping, which is not unmapped
            // before this thread is joined (Drop); the advice changes no byte of it.
            let r = unsafe { libc::madvise((base + off) as *mut libc::c_void, n, libc::MADV_POPULATE_WRITE) };
            if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                advice = false;
                continue;
            }
            r == 0
        } else {
            // SAFETY: fallocate on the ring's descriptor, open until this thread is joined;
            // allocating pages already allocated changes nothing.
            unsafe { libc::fallocate(fd, 0, off as libc::off_t, n as libc::off_t) == 0 }
        };
        if !ok {
            return;
        }
        off += n;
    }
}

impl Drop for SharedRing {
    fn drop(&mut self) {
        let populator = self.populator.get_mut().map(Option::take).unwrap_or(None);
        if let Some((thread, stop)) = populator {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
        // SAFETY: unmapping exactly the mapping made in create/open.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_pass_between_the_two_sides_by_state() {
        let rx = SharedRing::create(3, 5000).unwrap();
        assert_eq!(rx.slot_bytes(), 8192, "whole pages");
        let tx = SharedRing::open(rx.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!((tx.slots(), tx.slot_bytes()), (3, 8192));
        let mut held = vec![false; 3];
        let a = rx.try_take(&mut held).unwrap();
        // SAFETY: `a` is held and this is the only slice of it.
        unsafe { rx.slot_mut(a)[..4].copy_from_slice(b"VDIF") };
        assert_eq!(tx.handed(a, 0, 4), None, "not handed over yet");
        rx.hand_over(a);
        held[a as usize] = false;
        assert_eq!(
            tx.handed(a, 0, 4),
            Some(&b"VDIF"[..]),
            "the other mapping sees the bytes"
        );
        assert_eq!(tx.handed(a, 1, 3), Some(&b"DIF"[..]), "from an offset");
        assert_eq!(tx.handed(a, 0, 8193), None, "longer than a slot");
        assert_eq!(tx.handed(a, 8190, 3), None, "past the slot's end");
        assert_eq!(tx.handed(a, usize::MAX, 2), None, "an offset that overflows");
        assert_eq!(tx.handed(7, 0, 4), None, "no such slot");
        let b = rx.try_take(&mut held).unwrap();
        let c = rx.try_take(&mut held).unwrap();
        assert!(a != b && b != c && a != c);
        assert_eq!(rx.try_take(&mut held), None, "two held, one with the writer");
        tx.release(a);
        assert_eq!(rx.try_take(&mut held), Some(a));
    }

    #[test]
    fn a_failure_and_its_reason_reach_the_other_side() {
        let rx = SharedRing::create(2, 4096).unwrap();
        let tx = SharedRing::open(rx.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(rx.failed(), None);
        let long = "é".repeat(2000);
        tx.set_failed(&long);
        tx.set_failed("a later reason is not kept");
        let got = rx.failed().unwrap();
        assert!(
            got.len() <= SPACE_FREE_AT - FAILED_MSG_AT && got.starts_with("éé"),
            "{got}"
        );
        assert_eq!(rx.space(), None, "a long reason leaves the disk's space alone");
        tx.publish_space(5 << 20, 3 << 20);
        assert_eq!(rx.space(), Some((5 << 20, 3 << 20)));
        assert!(!got.contains('\u{fffd}'), "cut on a character boundary");
        let mut held = vec![false; 2];
        let s = rx.try_take(&mut held).unwrap();
        assert_eq!(rx.handed_count(), 0);
        rx.hand_over(s);
        assert_eq!(tx.handed_count(), 1);
    }

    #[test]
    fn a_descriptor_that_is_no_ring_is_refused() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(HEADER as u64 + 4096).unwrap();
        assert!(SharedRing::open(OwnedFd::from(f)).is_err());
        let tiny = tempfile::tempfile().unwrap();
        assert!(SharedRing::open(OwnedFd::from(tiny)).is_err());
    }
}

//! A VDIF file mapped into memory for the sender: sent from its pages in the page cache.
//!
//! Reading a looped file into memory first copied all of it before the first datagram left:
//! 1 028 096 000 bytes took 1.22 s of `read()` (fresh anonymous pages are slow on a VM whose
//! hypervisor takes freed memory back) and 0.35 s more, while the receiver's idle timeout ran
//! (issue 37). Mapped, the pages the file already has in the cache are used as they are.
//!
//! A mapped file that another process truncates faults the reader of its lost pages with
//! SIGBUS, which would kill the sender. A handler of ours (installed once, for the mapped
//! ranges only) puts a zero page where the lost one was and notes it; the sender's loop looks at
//! [`truncated`] after each round and ends with a clear error. At most the frames of one round
//! read as zeros (no VDIF frame: a receiver drops them as not VDIF) before it stops. The kernel's
//! own reads (the gathered `sendmsg` of frames in place) get EFAULT instead of a signal, and
//! the loop then says the same. Hand-written: no crate offers a SIGBUS-safe file mapping.

// unsafe: mmap(2) of a file (memmap2's `Mmap::map` is unsafe: the file could change under it),
// and the SIGBUS handler (sigaction, mmap over the lost page).
#![allow(unsafe_code)]

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

use bytes::Bytes;

/// Mapped ranges the handler may repair: `[start, end)` address pairs, 0 for a free slot.
/// Fixed and lock-free, as a signal handler needs; a sender maps one file per station.
const SLOTS: usize = 64;
static RANGES: [(AtomicUsize, AtomicUsize); SLOTS] = [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];
/// Set by the handler when a page of a mapped file was lost.
static TRUNCATED: AtomicBool = AtomicBool::new(false);
/// The page size, read before any handler runs (sysconf is not async-signal-safe).
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action there was before ours: faults outside our ranges are handed to it.
static mut PREVIOUS: Option<libc::sigaction> = None;
static INSTALL: Once = Once::new();

/// Whether a page of a mapped input was lost (its file truncated) while it was being sent.
pub(crate) fn truncated() -> bool {
    TRUNCATED.load(Ordering::Relaxed)
}

/// `file` mapped read-only, as shared bytes; `None` when it cannot be mapped (an empty file,
/// a pipe, or no slot left), and the caller reads it instead.
pub(crate) fn map(file: &File) -> Option<Bytes> {
    install_handler();
    // SAFETY: a private read-only mapping of a file the operator gave us to send. Changed
    // bytes are sent as they are; lost pages (a truncation) are repaired by the handler.
    let map = unsafe { memmap2::MmapOptions::new().map(file) }.ok()?;
    if map.is_empty() {
        return None;
    }
    let (start, end) = (map.as_ptr() as usize, map.as_ptr() as usize + map.len());
    let slot = RANGES.iter().position(|(s, _)| {
        s.compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    RANGES[slot].1.store(end, Ordering::Release);
    RANGES[slot].0.store(start, Ordering::Release);
    // The sender reads it front to back, pass after pass.
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(Bytes::from_owner(Registered { map, slot }))
}

/// A mapping whose range the handler knows; forgotten before it is unmapped.
struct Registered {
    map: memmap2::Mmap,
    slot: usize,
}

impl AsRef<[u8]> for Registered {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        RANGES[self.slot].0.store(0, Ordering::Release);
    }
}

fn install_handler() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf is called before the handler exists; sigaction with a zeroed struct
        // and our handler; the previous action is stored once, before the handler can run.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &action, &mut old) == 0 {
                PREVIOUS = Some(old);
            }
        }
    });
}

/// SIGBUS: inside a mapped input, a zero page over the lost one and a note; elsewhere, the
/// action there was before (or the default: the fault is fatal as it always was).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: `info` is the kernel's for this signal; mmap(MAP_FIXED) of one anonymous page over
    // a page of our own read-only mapping is a plain system call; PREVIOUS was written before
    // the handler was installed and never again.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let ours = RANGES.iter().any(|(s, e)| {
            let s = s.load(Ordering::Acquire);
            s != 0 && s != usize::MAX && addr >= s && addr < e.load(Ordering::Acquire)
        });
        if ours {
            let page = addr & !(PAGE.load(Ordering::Relaxed) - 1);
            let p = libc::mmap(
                page as *mut libc::c_void,
                PAGE.load(Ordering::Relaxed),
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
            if p != libc::MAP_FAILED {
                TRUNCATED.store(true, Ordering::Relaxed);
                return;
            }
        }
        match *std::ptr::addr_of!(PREVIOUS) {
            Some(prev) if prev.sa_flags & libc::SA_SIGINFO != 0 && prev.sa_sigaction > 1 => {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(prev.sa_sigaction);
                f(sig, info, ctx);
            }
            _ => {
                // The default action: the fault repeats on return and ends the process.
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

//! A VDIF file mapped into memory for the sender: sent from its pages in the page cache.
//!
//! Reading a looped file into memory first copied all of it before the first datagram left:
//! 1 028 096 000 bytes took 1.22 s of `read()` (fresh anonymous pages are slow on a VM whose
//! hypervisor takes freed memory back) and 0.35 s more, while the receiver's idle timeout ran
//! (issue 37). Mapped, the pages the file already has in the cache are used as they are.

// unsafe: mmap(2) of a file (memmap2's `Mmap::map` is unsafe: the file could change under it).
#![allow(unsafe_code)]

use std::fs::File;

use bytes::Bytes;

/// `file` mapped read-only, as shared bytes; `None` when it cannot be mapped (an empty file,
/// a pipe), and the caller reads it instead.
pub(crate) fn map(file: &File) -> Option<Bytes> {
    // SAFETY: a private read-only mapping of a file the operator gave us to send. Another
    // process truncating it meanwhile would fault us (SIGBUS), as it would any reader that
    // maps (the one cost of not copying); changed bytes would be sent as they are.
    let map = unsafe { memmap2::MmapOptions::new().map(file) }.ok()?;
    if map.is_empty() {
        return None;
    }
    // The sender reads it front to back, pass after pass.
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(Bytes::from_owner(map))
}

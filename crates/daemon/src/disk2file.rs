//! `disk2file`: a byte range of a recorded scan copied to a file on its own thread, its
//! progress readable at any time (`disk2file?`), stopped by `reset = abort`.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use recording::Scan;

/// Bytes read and written at a time.
const BLOCK: usize = 4 << 20;

/// A copy running (or just finished) on its thread.
pub struct Disk2FileJob {
    /// The destination as the request named it.
    pub dest: String,
    /// First byte of the scan copied.
    pub start: u64,
    /// End of the range (exclusive).
    pub end: u64,
    /// jive5ab's open mode name (`n`, `w`, `a`).
    pub mode: &'static str,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<u64, String>>,
}

impl Disk2FileJob {
    /// Copy `[start, end)` of `scan` into `file` on a new thread.
    pub fn start(
        scan: Arc<Scan>,
        file: File,
        dest: String,
        (start, end): (u64, u64),
        mode: &'static str,
    ) -> std::io::Result<Disk2FileJob> {
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (d, s) = (done.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("disk2file".into())
            .spawn(move || copy(&scan, file, start, end, &d, &s))?;
        Ok(Disk2FileJob {
            dest,
            start,
            end,
            mode,
            done,
            stop,
            handle,
        })
    }

    /// The byte of the scan the copy has reached.
    pub fn current(&self) -> u64 {
        self.start + self.done.load(Ordering::Relaxed)
    }

    /// The copy is over (finished, failed or stopped).
    pub fn has_ended(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stop (if still copying) and wait: the bytes copied, or why it failed.
    pub fn finish(self) -> Result<u64, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| "the disk2file thread panicked".to_string())?
    }
}

fn copy(scan: &Scan, mut out: File, start: u64, end: u64, done: &AtomicU64, stop: &AtomicBool) -> Result<u64, String> {
    let mut buf = vec![0u8; BLOCK];
    let mut at = start;
    while at < end && !stop.load(Ordering::Relaxed) {
        let want = usize::try_from(end - at).unwrap_or(BLOCK).min(BLOCK);
        let n = scan
            .read_at(&mut buf[..want], at)
            .map_err(|e| format!("reading {} at byte {at}: {e}", scan.name()))?;
        if n == 0 {
            return Err(format!("{} ended at byte {at}, before {end}", scan.name()));
        }
        out.write_all(&buf[..n]).map_err(|e| format!("writing: {e}"))?;
        at += n as u64;
        done.store(at - start, Ordering::Relaxed);
    }
    out.sync_data().map_err(|e| format!("writing: {e}"))?;
    Ok(at - start)
}

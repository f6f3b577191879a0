//! `disk2file`: a byte range of a recorded scan copied to a file on its own thread, its
//! progress readable at any time (`disk2file?`), stopped by `reset = abort`.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use recording::Scan;
use thiserror::Error;

/// Why a `disk2file` copy failed.
#[derive(Debug, Error)]
pub enum Disk2FileError {
    /// Reading the scan failed.
    #[error("reading {scan} at byte {at}: {source}")]
    Read {
        /// The scan's name.
        scan: String,
        /// The byte of the scan.
        at: u64,
        /// The OS error.
        source: std::io::Error,
    },
    /// The scan is shorter than the range asked for.
    #[error("{scan} ended at byte {at}, before {end}")]
    EndedEarly {
        /// The scan's name.
        scan: String,
        /// Where it ended.
        at: u64,
        /// The end of the range.
        end: u64,
    },
    /// Writing the file failed.
    #[error("writing: {0}")]
    Write(std::io::Error),
    /// The copy's thread panicked.
    #[error("the disk2file thread panicked")]
    Panicked,
}

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
    handle: JoinHandle<Result<u64, Disk2FileError>>,
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
    pub fn finish(self) -> Result<u64, Disk2FileError> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().map_err(|_| Disk2FileError::Panicked)?
    }
}

fn copy(
    scan: &Scan,
    mut out: File,
    start: u64,
    end: u64,
    done: &AtomicU64,
    stop: &AtomicBool,
) -> Result<u64, Disk2FileError> {
    let mut buf = vec![0u8; BLOCK];
    let mut at = start;
    while at < end && !stop.load(Ordering::Relaxed) {
        let want = usize::try_from(end - at).unwrap_or(BLOCK).min(BLOCK);
        let n = scan
            .read_at(&mut buf[..want], at)
            .map_err(|source| Disk2FileError::Read {
                scan: scan.name().to_string(),
                at,
                source,
            })?;
        if n == 0 {
            return Err(Disk2FileError::EndedEarly {
                scan: scan.name().to_string(),
                at,
                end,
            });
        }
        out.write_all(&buf[..n]).map_err(Disk2FileError::Write)?;
        at += n as u64;
        done.store(at - start, Ordering::Relaxed);
    }
    out.sync_data().map_err(Disk2FileError::Write)?;
    Ok(at - start)
}

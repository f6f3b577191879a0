//! `disk2file`: a byte range of a recorded scan copied to a file on its own thread, its
//! progress readable at any time (`disk2file?`), stopped by `reset = abort`.
//!
//! The destination is opened as jive5ab's `open_file` opens it — `n` a new file (an existing
//! one is refused), `w` made or emptied, `a` made or appended to — but never onto a recording
//! ([`open_destination`]): jive5ab (and evlbi before) truncated `disk2file = <disk>/SCAN/
//! SCAN.00000000 : : : w` to 0 bytes before reading it, and naming another scan's chunk
//! overwrote that scan.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use recording::Scan;
use safedir::{Create, Dir, DirError};
use thiserror::Error;
use vsis::playback::OpenMode;

/// Why a `disk2file` destination is refused.
#[derive(Debug, Error)]
pub enum DestinationError {
    /// The name is a FlexBuff chunk (`SCAN/SCAN.NNNNNNNN`): a piece of a recording.
    #[error("{0} is a chunk of a FlexBuff recording (a copy never writes into a recording)")]
    Chunk(String),
    /// The file is one of the scan being copied (by device and inode, whatever name reached it).
    #[error("{0} is a file of the scan being copied (a copy never writes into what it reads)")]
    OfTheScan(String),
    /// The file is a Mark6 scan (it starts with the Mark6 sync word).
    #[error("{0} is a Mark6 recording, its file header says so (a copy never writes into a recording)")]
    Mark6(String),
    /// Mode `n` and the file exists.
    #[error("{0} exists already (mode n makes a new file, w replaces an existing one, a appends to it)")]
    Exists(String),
    /// It could not be opened (a link, not a regular file, several hard links, no rights).
    #[error(transparent)]
    Open(#[from] DirError),
    /// Looking at or emptying it failed.
    #[error("{path}: {source}")]
    Io {
        /// The destination.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A destination opened for a copy: the file, positioned where the copy writes, and the bytes
/// it held before (0 for a new file), for the reply.
#[derive(Debug)]
pub struct Destination {
    /// The file.
    pub file: File,
    /// Its length when opened (what `w` replaced, what `a` appends to).
    pub had: u64,
}

/// Open `name` in `dir` for a copy of `scan` in `mode`, never onto a recording: refused are a
/// FlexBuff chunk name (`SCAN/SCAN.NNNNNNNN`, the directory named as the scan), any file of
/// `scan` itself (same device and inode, so no other name, hard link or bind mount gets
/// around it), and a Mark6 scan file (its first word the Mark6 sync word). Checked before
/// anything is emptied: a refused file keeps every byte. Links are not followed and a file with
/// other hard links is refused ([`safedir`]).
pub fn open_destination(dir: &Dir, name: &str, mode: OpenMode, scan: &Scan) -> Result<Destination, DestinationError> {
    let path = dir.display(name).display().to_string();
    let scan_dir = dir.path().file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if scanfmt::vbs::parse_chunk_name(scan_dir, name).is_some() {
        return Err(DestinationError::Chunk(path));
    }
    let io = |source| DestinationError::Io {
        path: path.clone(),
        source,
    };
    let mut file = match mode {
        OpenMode::New => dir.create_file(name, Create::default()).map_err(|e| match e {
            DirError::Exists(_) => DestinationError::Exists(path.clone()),
            e => DestinationError::Open(e),
        })?,
        // Opened without emptying it: what it is decides first.
        OpenMode::Write | OpenMode::Append | OpenMode::Resume => dir.open_rw(name)?,
    };
    let meta = file.metadata().map_err(io)?;
    if scan.holds_file((meta.dev(), meta.ino())) {
        return Err(DestinationError::OfTheScan(path.clone()));
    }
    let had = meta.len();
    if had >= 4 {
        let mut word = [0u8; 4];
        file.read_exact(&mut word).map_err(io)?;
        if u32::from_le_bytes(word) == scanfmt::mk6::SYNC_WORD {
            return Err(DestinationError::Mark6(path.clone()));
        }
    }
    match mode {
        OpenMode::Write => {
            file.set_len(0).map_err(io)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
        }
        _ => {
            file.seek(SeekFrom::End(0)).map_err(io)?;
        }
    }
    Ok(Destination { file, had })
}

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

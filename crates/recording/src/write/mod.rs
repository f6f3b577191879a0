//! Where received frames go: one VDIF file per station and segment ([`FileSink`]), a scan in
//! FlexBuff vbs or Mark6 scatter-gather layout spread over many disks ([`ScanSink`]), or
//! nowhere (memory sink for throughput tests). [`Recorder`] is whichever the run asked for.
//!
//! The receive loop must never wait for the disk (a full socket buffer drops data within
//! milliseconds at 4 Gb/s), so frames are gathered into buffers of whole frames (256 KiB, 1 MiB
//! with direct I/O) and handed to a writer through a bounded queue (256 MiB in all). A write
//! error (disk full, unwritable directory) cuts the file back to whole frames, keeps the error,
//! and counts every later frame of that file as not written; receiving goes on. In a multi-disk
//! recording the failing disk leaves the set and later blocks go to the others.
//!
//! Files must hold only whole frames even when the receiver is killed with SIGKILL. A `write()`
//! is not atomic against that: the kernel copies a buffered write a page at a time and gives up
//! between pages once a fatal signal is pending (`generic_perform_write`), so a 1 MiB write of
//! whole frames can end mid-frame. No flag or syscall makes an append atomic on every file system
//! (RWF_ATOMIC needs kernel 6.11 and a block-sized unit), so with [`WriterPlacement::ChildProcess`]
//! the writes run in a child process that a kill of the receiver does not touch. The frames
//! travel in shared memory ([`crate::ring`]): the receiver gathers them into a slot and pipes a
//! small record naming it ([`serve_writer_process`]); the child writes each complete record's
//! slot, drops a record cut short by the receiver's death, and at the end of its input closes
//! its files as they are (a Mark6 block cut short gets its true length in its header).
//!
//! With `direct` the child writes with O_DIRECT, straight from the shared slots to the disk (see
//! [`DIRECT_ALIGN`] for the placement that makes this possible); a file's last partial block
//! is written through the page cache when it closes.
//!
//! Parts: `lane` is one writer and the receiver's side of it (queue, ring, buffers, waits); this
//! module gathers frames per file for VDIF files (`FileSink`); `scan` plans blocks and spreads
//! them over one lane per disk (`ScanSink`); `files` is the writer that owns the files, with
//! `scan_files` for the vbs and Mark6 layouts; `child` the child-process writer (both its sides),
//! `pipe` the records on its pipe (`Packet`/`Repr`); `direct` the O_DIRECT appends.

// unsafe: its tests write into ring slots they own (SharedRing::slot_mut).
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use stream::FrameSink;
use vdif::StationId;

use stream::results::WrittenFile;

/// Hand a buffer to the writer once it holds this much: small enough that the writer copies it
/// from the cache the receiver just filled it in. Into tmpfs at 4.096 Gb/s the writer process
/// took 5.1 µs of CPU per 8 KB frame with 1 MiB buffers, 3.9 µs with 256 KiB, and stopped
/// falling behind (bench/RESULTS.md, issue 17). Direct I/O keeps 1 MiB requests for the disk;
/// a write buffer larger than the ring's slots can hold at this size gets larger ones.
const FLUSH_BYTES: usize = 256 << 10;
/// Buffer size with direct I/O.
const FLUSH_BYTES_DIRECT: usize = 1 << 20;
/// Largest buffer (a writer record must stay below `pipe::MAX_RECORD`).
const FLUSH_BYTES_MAX: usize = 2 << 20;

/// The flush size for `write_buffer` bytes of buffers (see [`FLUSH_BYTES`]).
fn flush_bytes(write_buffer: u64, direct: bool) -> usize {
    let base = if direct { FLUSH_BYTES_DIRECT } else { FLUSH_BYTES };
    let per_slot = usize::try_from(write_buffer / u64::from(crate::ring::MAX_SLOTS)).unwrap_or(usize::MAX);
    base.max(per_slot.next_multiple_of(DIRECT_ALIGN)).min(FLUSH_BYTES_MAX)
}

/// A slot holds one flush of `flush` bytes plus one frame of the largest UDP payload, from an
/// offset within the first block.
fn slot_bytes(flush: usize) -> u32 {
    u32::try_from(flush + 65_536 + DIRECT_ALIGN).unwrap_or(u32::MAX)
}
/// Default memory queued for the writer (256 MiB: half a second of disk stall absorbed at
/// 4 Gb/s).
pub const DEFAULT_WRITE_BUFFER: u64 = 256 << 20;

mod child;
mod direct;
mod files;
mod lane;
mod pipe;
mod scan;
mod scan_files;

pub use child::{run_if_child, serve_writer_process, CHILD_ENV};
pub use direct::DIRECT_ALIGN;
pub use pipe::{RecordError, RecordPacket};
pub use scan::{unique_label, RecordingConfig, RecordingNames, ScanSink};

use lane::{Lane, Pending};

/// An error for data that breaks the writer's own rules (a bad record, a misplaced slot).
fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Where the file writes run.
#[derive(Debug, Clone, Default)]
pub enum WriterPlacement {
    /// A thread of the receiver. A SIGKILL of the receiver can leave a partial frame at the end
    /// of a file.
    #[default]
    Thread,
    /// A child process: `program` started again with [`CHILD_ENV`] set, whose `main` calls
    /// [`run_if_child`] first. Files then hold only whole frames after a SIGKILL of the receiver.
    ChildProcess {
        /// Executable, usually `std::env::current_exe()`.
        program: PathBuf,
    },
}

impl WriterPlacement {
    /// A writer process that is this executable started again (its `main` calls
    /// [`run_if_child`] first).
    pub fn this_executable() -> std::io::Result<WriterPlacement> {
        let program = std::env::current_exe()
            .map_err(|e| std::io::Error::new(e.kind(), format!("finding this executable for the file writer: {e}")))?;
        Ok(WriterPlacement::ChildProcess { program })
    }
}

/// Which file a frame goes to: the VDIF station id in the low 16 bits; with
/// [`FileSink::split_threads`] also the thread (id + 1) above them, one file per thread.
type FileKey = u32;

/// The file key of station `station`, thread `thread` (`None`: all threads in one file).
fn file_key(station: StationId, thread: Option<u16>) -> FileKey {
    u32::from(station.0) | thread.map_or(0, |t| (u32::from(t) + 1) << 16)
}

/// A file key's station and thread.
fn key_parts(key: FileKey) -> (StationId, Option<u16>) {
    (StationId(key as u16), ((key >> 16) as u16).checked_sub(1))
}

/// The VDIF thread id of a frame as vdif's header reads it (word 3, VDIF 1.1.1 §3); 0 for a
/// frame whose header does not parse (the receiver passes only frames whose headers did).
fn frame_thread(frame: &[u8]) -> u16 {
    vdif::VdifHeader::parse(frame).map_or(0, |h| h.thread_id)
}

/// What file an [`WriteOp::Open`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenFile {
    /// `<station>_<stamp>.vdif` (a `_N` added when taken), the stamp the first frame's UTC
    /// second (`20261123T120000`).
    Stamped(String),
    /// Exactly `name` (`net2file = open : /path/NAME,w`): every station's frames in it.
    Named {
        /// The file's name in the directory.
        name: String,
        /// How it is opened.
        mode: FileMode,
    },
}

/// How a named file is opened (jive5ab's `net2file` modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// `n`: new; an existing file is an error.
    New,
    /// `w`: made or emptied.
    Truncate,
    /// `a`: appended to.
    Append,
}

#[derive(Debug, PartialEq)]
enum WriteOp {
    /// Start a new file for `station`.
    Open { station: FileKey, file: OpenFile },
    /// Whole frames for the station's current file (writer thread).
    Data {
        station: FileKey,
        buf: Vec<u8>,
        frames: u64,
        filled: u64,
        frame_len: u64,
    },
    /// Whole frames in slot `slot` of the shared ring, `len` bytes from byte `at` (writer
    /// process).
    Slot {
        station: FileKey,
        slot: u32,
        at: u32,
        len: u32,
        frames: u64,
        filled: u64,
        frame_len: u64,
    },
    /// Close the station's current file.
    Close { station: FileKey },
    /// Start block `number` of recording `scan` for `station` on this disk: a vbs chunk file,
    /// or a block (header) in the Mark6 file, made on the first block. `planned` data bytes
    /// are expected; [`WriteOp::EndBlock`] may end it sooner.
    Block {
        station: FileKey,
        scan: String,
        layout: scanfmt::Layout,
        number: u32,
        planned: u64,
        frame_len: u64,
    },
    /// The station's current block on this disk is complete.
    EndBlock { station: FileKey },
}

/// What a recorder did, when it finished.
#[derive(Debug, Default)]
pub struct SinkOutcome {
    /// VDIF files written.
    pub files: Vec<WrittenFile>,
    /// Frames not written, all causes.
    pub not_written: u64,
    /// The first write error.
    pub error: Option<String>,
    /// A vbs or Mark6 recording: its disks and scans.
    pub recording: Option<scanfmt::results::RecordingReport>,
}

/// The operator's output directory (`--out`, a `--disks` disk), made when missing, opened: the
/// writers make every file below this handle.
pub(super) fn make_and_open(dir: &Path) -> std::io::Result<safedir::Dir> {
    std::fs::create_dir_all(dir)?;
    safedir::Dir::open(dir).map_err(safedir::DirError::into_io)
}

/// Where VDIF files go: a directory the operator named (`--out`: made when missing, then
/// opened), or one a caller already opened below its roots through no link (`evlbi serve`'s
/// `record_format = vdif` and `net2file`), which nothing here resolves by path again.
#[derive(Debug, Clone)]
pub enum OutputDir {
    /// A path to make (when missing) and open.
    Path(std::path::PathBuf),
    /// A directory held open.
    Opened(std::sync::Arc<safedir::Dir>),
}

impl OutputDir {
    /// The directory, opened (a duplicate of the descriptor when it was opened already).
    pub fn open(&self) -> std::io::Result<safedir::Dir> {
        match self {
            OutputDir::Path(p) => make_and_open(p),
            OutputDir::Opened(d) => d.try_clone().map_err(safedir::DirError::into_io),
        }
    }

    /// Its path, for reports.
    pub fn path(&self) -> &Path {
        match self {
            OutputDir::Path(p) => p,
            OutputDir::Opened(d) => d.path(),
        }
    }
}

/// Whichever recorder a run writes through.
pub enum Recorder {
    /// VDIF files in a directory, or the memory sink.
    Files(FileSink),
    /// A scan over many disks.
    Scan(ScanSink),
}

impl Recorder {
    /// VDIF files in `dir` (or the memory sink, `None`), or the `recording` over many disks
    /// when given; the other arguments as [`FileSink::new`] and [`ScanSink::new`] take them.
    pub fn new(
        dir: Option<&OutputDir>,
        recording: Option<&RecordingConfig>,
        chunk: Option<u64>,
        placement: &WriterPlacement,
        write_buffer: u64,
        direct: bool,
        split_threads: bool,
    ) -> std::io::Result<Recorder> {
        Ok(match recording {
            Some(r) => Recorder::Scan(ScanSink::new(r, placement, write_buffer, split_threads)?),
            None => Recorder::Files(
                FileSink::new(dir, chunk, placement, write_buffer, direct)?.split_threads(split_threads),
            ),
        })
    }

    /// Frames passed in (written or not).
    pub fn frames(&self) -> u64 {
        match self {
            Recorder::Files(s) => s.frames(),
            Recorder::Scan(s) => s.frames(),
        }
    }

    /// Wait until the writers' shared memory is allocated
    /// ([`crate::ring::SharedRing::wait_populated`]), or `deadline`; whether it is.
    pub fn wait_populated(&self, deadline: std::time::Instant) -> bool {
        match self {
            Recorder::Files(s) => s.lane.iter().all(|l| l.wait_populated(deadline)),
            Recorder::Scan(s) => s.wait_populated(deadline),
        }
    }

    /// Filled frames passed in.
    pub fn filled(&self) -> u64 {
        match self {
            Recorder::Files(s) => s.filled(),
            Recorder::Scan(s) => s.filled(),
        }
    }

    /// Frames passed in that reached no file or disk so far (a disk that failed mid-scan, a
    /// write error): loss, though the network delivered them.
    pub fn not_written(&self) -> u64 {
        match self {
            Recorder::Files(s) => s.lane.as_ref().map_or(0, Lane::not_written),
            Recorder::Scan(s) => s.not_written(),
        }
    }

    /// Time spent waiting for the writers, and how often.
    pub fn stalled(&self) -> (std::time::Duration, u64) {
        match self {
            Recorder::Files(s) => s.stalled(),
            Recorder::Scan(s) => s.stalled(),
        }
    }

    /// Most bytes one writer process had at once, handed over and not yet written: how deep
    /// into the write buffer a stall of the output reached (equal to a lane's share of it:
    /// the receiver waited). `None` for a writer thread (its queue does not say) or no output.
    pub fn backlog_peak(&self) -> Option<u64> {
        let lanes: Vec<&Lane> = match self {
            Recorder::Files(s) => s.lane.iter().collect(),
            Recorder::Scan(s) => s.lanes().collect(),
        };
        lanes.iter().filter(|l| l.has_ring()).map(|l| l.backlog_peak).max()
    }

    /// Disks that left a multi-disk recording so far (0 for files).
    pub fn disks_dropped(&mut self) -> u32 {
        match self {
            Recorder::Files(_) => 0,
            Recorder::Scan(s) => s.poll_disks(),
        }
    }

    /// Flush, close, wait for the writers.
    pub fn finish(&mut self) -> SinkOutcome {
        match self {
            Recorder::Files(s) => {
                let (files, not_written, error) = s.finish();
                SinkOutcome {
                    files,
                    not_written,
                    error,
                    recording: None,
                }
            }
            Recorder::Scan(s) => s.finish(),
        }
    }
}

impl FrameSink for Recorder {
    fn frame(&mut self, station: StationId, frame: &[u8], filled: bool) {
        match self {
            Recorder::Files(s) => s.frame(station, frame, filled),
            Recorder::Scan(s) => s.frame(station, frame, filled),
        }
    }

    fn discontinuity(&mut self, station: StationId) {
        match self {
            Recorder::Files(s) => s.discontinuity(station),
            Recorder::Scan(s) => s.discontinuity(station),
        }
    }
}

/// The stations' buffers, looked up per frame: a few stations, so a short list scanned (with the
/// last one found tried first) beats hashing the station id for every frame.
struct KeyList<T> {
    entries: Vec<(FileKey, T)>,
    last: usize,
}

impl<T> Default for KeyList<T> {
    fn default() -> Self {
        KeyList {
            entries: Vec::new(),
            last: 0,
        }
    }
}

impl<T> KeyList<T> {
    fn find(&self, key: FileKey) -> Option<usize> {
        match self.entries.get(self.last) {
            Some((s, _)) if *s == key => Some(self.last),
            _ => self.entries.iter().position(|(s, _)| *s == key),
        }
    }

    fn get(&self, key: &FileKey) -> Option<&T> {
        self.find(*key).map(|i| &self.entries[i].1)
    }

    fn get_mut(&mut self, key: &FileKey) -> Option<&mut T> {
        let i = self.find(*key)?;
        self.last = i;
        Some(&mut self.entries[i].1)
    }

    fn insert(&mut self, key: FileKey, v: T) {
        match self.find(key) {
            Some(i) => self.entries[i].1 = v,
            None => self.entries.push((key, v)),
        }
    }

    fn keys(&self) -> impl Iterator<Item = &FileKey> {
        self.entries.iter().map(|(s, _)| s)
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Writes each station's frames to `DIR/<station>_<UTC of first frame>.vdif`, starting a new
/// file at a discontinuity or when `chunk` bytes are reached.
pub struct FileSink {
    /// Every frame into this one file (net2file), not a file per station.
    named: Option<(String, FileMode)>,
    chunk: Option<u64>,
    lane: Option<Lane>,
    pending: KeyList<Pending>,
    frames: u64,
    filled: u64,
    /// One file per VDIF thread of a station (`--split thread`), not one per station.
    split_threads: bool,
}

impl FileSink {
    /// Files in `dir` (a path: created if missing), or a memory sink when `None`; the writes run where
    /// `placement` says, with about `write_buffer` bytes of buffers between this process and
    /// the writes (at least one), with direct I/O when `direct` (writer process only).
    pub fn new(
        dir: Option<&OutputDir>,
        chunk: Option<u64>,
        placement: &WriterPlacement,
        write_buffer: u64,
        direct: bool,
    ) -> std::io::Result<FileSink> {
        let lane = dir
            .map(|d| Lane::new(d.open()?, placement, write_buffer, direct))
            .transpose()?;
        Ok(FileSink {
            named: None,
            chunk,
            lane,
            pending: KeyList::default(),
            frames: 0,
            filled: 0,
            split_threads: false,
        })
    }

    /// One continuous file per VDIF thread of each station (`DIR/<station>_t<thread>_<UTC>.vdif`,
    /// as correlators that take threads apart want), instead of one per station.
    pub fn split_threads(mut self, on: bool) -> FileSink {
        self.split_threads = on;
        self
    }

    /// Every frame of every station into file `name` of the directory, opened as `mode`
    /// (`net2file = open : /path/NAME,w`): no file per station, no chunks, no direct I/O.
    pub fn into_one_file(mut self, name: &str, mode: FileMode) -> FileSink {
        self.named = Some((name.to_string(), mode));
        self.chunk = None;
        self
    }

    /// Frames passed in (written or not).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Filled frames passed in.
    pub fn filled(&self) -> u64 {
        self.filled
    }

    /// Time spent waiting for the writer (all buffers with it: the output takes less than the
    /// stream's rate, or stalled), and how many times that happened.
    pub fn stalled(&self) -> (std::time::Duration, u64) {
        self.lane
            .as_ref()
            .map_or((std::time::Duration::ZERO, 0), |l| (l.stalled, l.stalls))
    }

    fn hand_over(&mut self, key: FileKey) {
        if let (Some(lane), Some(p)) = (self.lane.as_mut(), self.pending.get_mut(&key)) {
            lane.hand_over(key, p);
        }
    }

    /// Flush and close every file; the list of files written, frames not written, first error.
    pub fn finish(&mut self) -> (Vec<WrittenFile>, u64, Option<String>) {
        let keys: Vec<FileKey> = self.pending.keys().copied().collect();
        let Some(lane) = self.lane.as_mut() else {
            return (Vec::new(), 0, None);
        };
        for key in keys {
            if let Some(p) = self.pending.get_mut(&key) {
                lane.hand_over(key, p);
            }
            lane.send(WriteOp::Close { station: key });
        }
        let files = lane.finish().files;
        let err = lane.shared.error.lock().ok().and_then(|e| e.clone());
        (files, lane.shared.not_written.load(Ordering::Relaxed), err)
    }

    /// A new file for `key`, named after `frame`'s time.
    fn start_file(&mut self, key: FileKey, frame: &[u8]) {
        self.hand_over(key);
        let file = match &self.named {
            Some((name, mode)) => OpenFile::Named {
                name: name.clone(),
                mode: *mode,
            },
            None => {
                let stamp = vdif::VdifHeader::parse(frame)
                    .map(|h| vdif::time::iso(h.ref_epoch, h.seconds, 0.0))
                    .unwrap_or_default();
                // 2026-11-23T12:00:00.000000000Z → 20261123T120000
                OpenFile::Stamped(stamp.chars().take(19).filter(|c| c.is_ascii_alphanumeric()).collect())
            }
        };
        let Some(lane) = self.lane.as_mut() else { return };
        lane.send(WriteOp::Open { station: key, file });
        // A slot held by the previous file of this key (taken, nothing in it) goes back.
        if let Some(p) = self.pending.get(&key) {
            lane.return_slot(p);
        }
        let p = lane.pending(frame.len() as u64, 0);
        self.pending.insert(key, p);
    }
}

impl FrameSink for FileSink {
    fn frame(&mut self, station: StationId, frame: &[u8], filled: bool) {
        self.frames += 1;
        self.filled += u64::from(filled);
        if self.lane.is_none() {
            return;
        }
        let thread = self.split_threads.then(|| frame_thread(frame));
        let key = if self.named.is_some() {
            0
        } else {
            file_key(station, thread)
        };
        if self.pending.get(&key).is_none_or(|p| p.rotate) {
            self.start_file(key, frame);
        }
        let chunk = self.chunk;
        let (Some(lane), Some(p)) = (self.lane.as_mut(), self.pending.get_mut(&key)) else {
            return;
        };
        let Some(full) = lane.gather(p, frame) else {
            return;
        };
        p.frames += 1;
        p.filled += u64::from(filled);
        p.bytes_in_file += frame.len() as u64;
        if chunk.is_some_and(|c| p.bytes_in_file >= c) {
            p.rotate = true;
        }
        if full {
            lane.hand_over(key, p);
        }
    }

    fn discontinuity(&mut self, station: StationId) {
        if self.named.is_some() {
            // One file holds the whole recording, gaps included.
            return;
        }
        // Every file of the station (one per thread with split_threads).
        for (key, p) in self.pending.entries.iter_mut() {
            if key_parts(*key).0 == station {
                p.rotate = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::child::{serve_in, WriterOutcome};
    use super::pipe::{decode_op, encode_op};
    use super::*;
    use crate::ring::SharedRing;
    use proptest::prelude::*;

    fn frames(n: usize, len: usize, first: u8) -> Vec<u8> {
        (0..n * len).map(|i| first.wrapping_add((i / len) as u8)).collect()
    }

    fn ops() -> Vec<WriteOp> {
        vec![
            WriteOp::Open {
                station: 7,
                file: OpenFile::Stamped("20261123T120000".into()),
            },
            WriteOp::Slot {
                station: 7,
                slot: 0,
                at: 0,
                len: 300,
                frames: 3,
                filled: 1,
                frame_len: 100,
            },
            WriteOp::Slot {
                station: 7,
                slot: 1,
                at: 0,
                len: 200,
                frames: 2,
                filled: 0,
                frame_len: 100,
            },
            WriteOp::Close { station: 7 },
        ]
    }

    /// A ring holding the frames `ops()` names, handed over as the receiver would.
    fn ring_for_ops() -> SharedRing {
        let ring = SharedRing::create(2, 4096).unwrap();
        let mut held = vec![false; 2];
        for (n, first) in [(3usize, 1u8), (2, 9)] {
            let s = ring.try_take(&mut held).unwrap();
            // SAFETY: `s` is held and this is its only slice.
            unsafe { ring.slot_mut(s)[..n * 100].copy_from_slice(&frames(n, 100, first)) };
            ring.hand_over(s);
            held[s as usize] = false;
        }
        ring
    }

    /// The writer process's input for `ops`.
    pub(crate) fn encoded(ops: &[WriteOp]) -> Vec<u8> {
        let mut out = Vec::new();
        for op in ops {
            encode_op(op, &mut out).unwrap();
        }
        out
    }

    /// `data` (`frames` frames of `frame_len` bytes) put at `at` in a free slot of `ring` and
    /// handed over, as the receiver does: the record that tells the writer of it (station 3).
    pub(crate) fn place(
        ring: &SharedRing,
        held: &mut [bool],
        at: usize,
        data: &[u8],
        frames: usize,
        frame_len: usize,
    ) -> WriteOp {
        let s = ring.try_take(held).unwrap();
        // SAFETY: `s` is held and this is its only slice.
        unsafe { ring.slot_mut(s)[at..at + data.len()].copy_from_slice(data) };
        ring.hand_over(s);
        held[s as usize] = false;
        WriteOp::Slot {
            station: 3,
            slot: s,
            at: at as u32,
            len: data.len() as u32,
            frames: frames as u64,
            filled: 0,
            frame_len: frame_len as u64,
        }
    }

    fn decode_all(mut bytes: &[u8]) -> std::io::Result<Vec<WriteOp>> {
        let mut got = Vec::new();
        while let Some(op) = decode_op(&mut bytes)? {
            got.push(op);
        }
        Ok(got)
    }

    #[test]
    fn records_round_trip() {
        let ops = ops();
        assert_eq!(decode_all(&encoded(&ops)).unwrap(), ops);
        let inline = WriteOp::Data {
            station: 1,
            buf: vec![0; 10],
            frames: 1,
            filled: 0,
            frame_len: 10,
        };
        assert!(
            encode_op(&inline, &mut Vec::new()).is_err(),
            "frames go through the ring"
        );
    }

    #[test]
    fn a_record_cut_anywhere_is_dropped_whole() {
        let ops = ops();
        let bytes = encoded(&ops);
        // Record boundaries: a cut exactly there keeps the records before it, anywhere else
        // drops the record it falls in.
        let mut ends = vec![0];
        for op in &ops {
            ends.push(ends.last().unwrap() + encoded(std::slice::from_ref(op)).len());
        }
        for cut in 0..bytes.len() {
            let got = decode_all(&bytes[..cut]).unwrap();
            let whole = ends.iter().filter(|&&e| e > 0 && e <= cut).count();
            assert_eq!(got, ops[..whole], "cut at {cut}");
        }
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let mut data = encoded(&ops()[1..2]);
        data[25] ^= 1; // the byte count no longer equals frames × frame length
        assert!(decode_all(&data).is_err());
        assert!(decode_all(&[9, 0, 0, 0, 0]).is_err(), "unknown tag");
        assert!(
            decode_all(&[2, 0, 0, 0, 0]).is_err(),
            "inline data is no longer accepted"
        );
        let mut open = encoded(&ops()[..1]);
        open[7] = b'/'; // a path separator in the file stamp
        assert!(decode_all(&open).is_err());
        // A file key naming a thread VDIF cannot have (ids are 10 bits).
        let far = encoded(&[WriteOp::Close {
            station: file_key(StationId(7), Some(2000)),
        }]);
        assert!(decode_all(&far).is_err());
        let thread = encoded(&[WriteOp::Close {
            station: file_key(StationId(7), Some(1023)),
        }]);
        assert_eq!(
            key_parts(file_key(StationId(7), Some(1023))),
            (StationId(7), Some(1023))
        );
        assert!(decode_all(&thread).is_ok());
    }

    #[test]
    fn the_writer_process_body_writes_whole_records_and_drops_a_cut_one() {
        let dir = tempfile::tempdir().unwrap();
        let ring = ring_for_ops();
        let bytes = encoded(&ops());
        let cut = bytes.len() - 3 - 10; // inside the second slot record (before Close)
        let report = serve_in(dir.path(), &ring, false, &bytes[..cut]);
        let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
        assert_eq!(outcome.files.len(), 1);
        assert_eq!(outcome.files[0].frames, 3);
        assert_eq!(outcome.files[0].filled, 1);
        assert_eq!(outcome.error, None);
        let on_disk = std::fs::read(&outcome.files[0].path).unwrap();
        assert_eq!(on_disk, frames(3, 100, 1));
        let mut held = vec![false; 2];
        assert!(ring.try_take(&mut held).is_some(), "the written slot was given back");
        assert!(
            ring.try_take(&mut held).is_none(),
            "the cut record's slot was never written"
        );
    }

    #[test]
    fn a_record_naming_a_slot_not_handed_over_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ring = SharedRing::create(2, 4096).unwrap(); // nothing handed over
        let report = serve_in(dir.path(), &ring, false, &encoded(&ops())[..]);
        let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
        assert_eq!(outcome.not_written, 5);
        assert!(outcome.error.unwrap().contains("not handed over"));
        assert_eq!(std::fs::read(&outcome.files[0].path).unwrap().len(), 0);
    }

    /// Records of `counts` frames of `frame_len` bytes placed in the ring's slots as the
    /// receiver places them (at the offset the data has within its block in the file, unless
    /// `misplace` names a record to shift), ending with a close: the ring, the records, and the
    /// bytes the file must hold.
    fn placed(counts: &[usize], frame_len: usize, misplace: Option<usize>) -> (SharedRing, Vec<u8>, Vec<u8>) {
        let ring = SharedRing::create(counts.len() as u32, slot_bytes(FLUSH_BYTES_DIRECT)).unwrap();
        let mut held = vec![false; counts.len()];
        let mut ops = vec![WriteOp::Open {
            station: 3,
            file: OpenFile::Stamped("20261123T120000".into()),
        }];
        let (mut file, mut first) = (Vec::new(), 0u8);
        for (i, &n) in counts.iter().enumerate() {
            let data = frames(n, frame_len, first);
            first = first.wrapping_add(n as u8);
            let at = file.len() % DIRECT_ALIGN + usize::from(misplace == Some(i)) * 8;
            ops.push(place(&ring, &mut held, at, &data, n, frame_len));
            file.extend_from_slice(&data);
        }
        ops.push(WriteOp::Close { station: 3 });
        (ring, encoded(&ops), file)
    }

    #[test]
    fn direct_io_writes_records_at_any_offset_byte_exact() {
        // Frame lengths that share little with the block size, records that end mid-block, one
        // smaller than the block that is still topped up, and a last partial block at the close.
        for (counts, frame_len) in [
            (&[128usize, 3, 1, 130, 7][..], 8032usize),
            (&[5, 1, 1, 900][..], 1000),
            (&[1][..], 8032),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (ring, records, file) = placed(counts, frame_len, None);
            let report = serve_in(dir.path(), &ring, true, &records[..]);
            let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
            assert_eq!(outcome.error, None, "{counts:?}");
            assert_eq!(outcome.not_written, 0);
            assert_eq!(outcome.files[0].frames, counts.iter().sum::<usize>() as u64);
            assert!(
                std::fs::read(&outcome.files[0].path).unwrap() == file,
                "{counts:?} × {frame_len}: the file differs"
            );
        }
    }

    #[test]
    fn direct_io_refuses_a_misplaced_record_and_keeps_whole_frames() {
        let dir = tempfile::tempdir().unwrap();
        let (ring, records, file) = placed(&[3, 2, 4], 1000, Some(1));
        let report = serve_in(dir.path(), &ring, true, &records[..]);
        let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
        assert!(outcome.error.unwrap().contains("placed at"));
        // The first record's 3000 bytes never filled a block: nothing reached the disk, and
        // all 9 frames are counted as not written.
        assert_eq!(outcome.files[0].frames, 0);
        assert_eq!(outcome.not_written, 9);
        let on_disk = std::fs::read(&outcome.files[0].path).unwrap();
        assert!(on_disk.len().is_multiple_of(1000) && file.starts_with(&on_disk));
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_all(&bytes);
        }
    }
}

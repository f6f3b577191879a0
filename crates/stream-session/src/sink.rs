//! Where received frames go: one VDIF file per station and segment, or nowhere (memory sink for
//! throughput tests).
//!
//! The receive loop must never wait for the disk (a full socket buffer drops data within
//! milliseconds at 4 Gb/s), so frames are gathered into 1 MiB buffers of whole frames and handed
//! to a writer thread through a bounded queue (256 MiB). Whole-frame writes mean a receiver killed
//! with SIGKILL leaves files that end on a frame boundary. A write error (disk full, unwritable
//! directory) cuts the file back to whole frames, keeps the error, and counts every later frame
//! of that station as not written; receiving goes on.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use stream::FrameSink;

use crate::report::WrittenFile;

/// Hand a buffer to the writer once it holds this much.
const FLUSH_BYTES: usize = 1 << 20;
/// Buffers queued for the writer (256 MiB: half a second at 4 Gb/s of disk stall absorbed).
const QUEUE_BUFFERS: usize = 256;

enum WriteOp {
    /// Start a new file for `station`, named after its first frame's time.
    Open { station: u16, stamp: String },
    /// Whole frames for the station's current file.
    Data {
        station: u16,
        buf: Vec<u8>,
        frames: u64,
        filled: u64,
        frame_len: u64,
    },
    /// Close the station's current file.
    Close { station: u16 },
}

struct Open {
    file: Option<File>,
    path: PathBuf,
    info: WrittenFile,
}

struct Shared {
    error: Mutex<Option<String>>,
    not_written: AtomicU64,
}

impl Shared {
    fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
    }
}

fn create(dir: &Path, station: u16, stamp: &str) -> std::io::Result<(File, PathBuf)> {
    let name = vdif::station_name(station);
    for n in 0..1000 {
        let suffix = if n == 0 { String::new() } else { format!("_{n}") };
        let path = dir.join(format!("{name}_{stamp}{suffix}.vdif"));
        match File::options().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((f, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "1000 files of the same name",
    ))
}

/// The writer thread: owns the files.
fn writer(dir: PathBuf, ops: std::sync::mpsc::Receiver<WriteOp>, shared: Arc<Shared>) -> Vec<WrittenFile> {
    let mut open: HashMap<u16, Open> = HashMap::new();
    let mut done = Vec::new();
    for op in ops {
        match op {
            WriteOp::Open { station, stamp } => {
                if let Some(o) = open.remove(&station) {
                    done.push(o.info);
                }
                let (file, path) = match create(&dir, station, &stamp) {
                    Ok((f, p)) => (Some(f), p),
                    Err(e) => {
                        shared.fail(format!("creating a file in {}: {e}", dir.display()));
                        (None, PathBuf::new())
                    }
                };
                let info = WrittenFile {
                    path: path.display().to_string(),
                    station: vdif::station_name(station),
                    bytes: 0,
                    frames: 0,
                    filled: 0,
                };
                open.insert(station, Open { file, path, info });
            }
            WriteOp::Data {
                station,
                buf,
                frames,
                filled,
                frame_len,
            } => {
                let Some(o) = open.get_mut(&station) else { continue };
                let Some(f) = o.file.as_mut() else {
                    shared.not_written.fetch_add(frames, Ordering::Relaxed);
                    continue;
                };
                match f.write_all(&buf) {
                    Ok(()) => {
                        o.info.bytes += buf.len() as u64;
                        o.info.frames += frames;
                        o.info.filled += filled;
                    }
                    Err(e) => {
                        // Cut back to whole frames; what did not make it is counted as lost.
                        let on_disk = f.metadata().map_or(o.info.bytes, |m| m.len());
                        let whole = on_disk - on_disk % frame_len.max(1);
                        let _ = f.set_len(whole);
                        let kept_now = (whole.saturating_sub(o.info.bytes)) / frame_len.max(1);
                        o.info.bytes = whole;
                        o.info.frames += kept_now;
                        shared
                            .not_written
                            .fetch_add(frames - kept_now.min(frames), Ordering::Relaxed);
                        shared.fail(format!("writing {}: {e}", o.path.display()));
                        o.file = None;
                    }
                }
            }
            WriteOp::Close { station } => {
                if let Some(o) = open.remove(&station) {
                    done.push(o.info);
                }
            }
        }
    }
    done.extend(open.into_values().map(|o| o.info));
    done.retain(|f| !f.path.is_empty());
    done
}

struct Pending {
    buf: Vec<u8>,
    frames: u64,
    filled: u64,
    frame_len: u64,
    bytes_in_file: u64,
    rotate: bool,
}

/// Writes each station's frames to `DIR/<station>_<UTC of first frame>.vdif`, starting a new
/// file at a discontinuity or when `chunk` bytes are reached.
pub struct FileSink {
    chunk: Option<u64>,
    ops: Option<SyncSender<WriteOp>>,
    thread: Option<JoinHandle<Vec<WrittenFile>>>,
    shared: Arc<Shared>,
    pending: HashMap<u16, Pending>,
    frames: u64,
    filled: u64,
}

impl FileSink {
    /// Files in `dir` (created if missing), or a memory sink when `None`.
    pub fn new(dir: Option<&Path>, chunk: Option<u64>) -> std::io::Result<FileSink> {
        let shared = Arc::new(Shared {
            error: Mutex::new(None),
            not_written: AtomicU64::new(0),
        });
        let (ops, thread) = match dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                let (tx, rx) = sync_channel(QUEUE_BUFFERS);
                let (d, sh) = (d.to_path_buf(), shared.clone());
                (Some(tx), Some(std::thread::spawn(move || writer(d, rx, sh))))
            }
            None => (None, None),
        };
        Ok(FileSink {
            chunk,
            ops,
            thread,
            shared,
            pending: HashMap::new(),
            frames: 0,
            filled: 0,
        })
    }

    /// Frames passed in (written or not).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Filled frames passed in.
    pub fn filled(&self) -> u64 {
        self.filled
    }

    fn send(&mut self, op: WriteOp) {
        if let Some(tx) = &self.ops {
            if let Err(e) = tx.send(op) {
                // The writer is gone (it cannot panic on I/O; this is defensive): count the loss.
                if let WriteOp::Data { frames, .. } = e.0 {
                    self.shared.not_written.fetch_add(frames, Ordering::Relaxed);
                }
            }
        }
    }

    fn hand_over(&mut self, station: u16) {
        let Some(p) = self.pending.get_mut(&station) else {
            return;
        };
        if p.buf.is_empty() {
            return;
        }
        let op = WriteOp::Data {
            station,
            buf: std::mem::replace(&mut p.buf, Vec::with_capacity(FLUSH_BYTES + p.frame_len as usize)),
            frames: std::mem::take(&mut p.frames),
            filled: std::mem::take(&mut p.filled),
            frame_len: p.frame_len,
        };
        self.send(op);
    }

    /// Flush and close every file; the list of files written, frames not written, first error.
    pub fn finish(&mut self) -> (Vec<WrittenFile>, u64, Option<String>) {
        let stations: Vec<u16> = self.pending.keys().copied().collect();
        for s in stations {
            self.hand_over(s);
            self.send(WriteOp::Close { station: s });
        }
        self.ops = None;
        let files = self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default();
        let err = self.shared.error.lock().ok().and_then(|e| e.clone());
        (files, self.shared.not_written.load(Ordering::Relaxed), err)
    }
}

impl FrameSink for FileSink {
    fn frame(&mut self, station: u16, frame: &[u8], filled: bool) {
        self.frames += 1;
        self.filled += u64::from(filled);
        if self.ops.is_none() {
            return;
        }
        let new_file = self.pending.get(&station).is_none_or(|p| p.rotate);
        if new_file {
            self.hand_over(station);
            let stamp = vdif::VdifHeader::parse(frame)
                .map(|h| vdif::time::iso(h.ref_epoch, h.seconds, 0.0))
                .unwrap_or_default();
            // 2026-11-23T12:00:00.000000000Z → 20261123T120000
            let stamp: String = stamp.chars().take(19).filter(|c| c.is_ascii_alphanumeric()).collect();
            self.send(WriteOp::Open { station, stamp });
            self.pending.insert(
                station,
                Pending {
                    buf: Vec::with_capacity(FLUSH_BYTES + frame.len()),
                    frames: 0,
                    filled: 0,
                    frame_len: frame.len() as u64,
                    bytes_in_file: 0,
                    rotate: false,
                },
            );
        }
        let chunk = self.chunk;
        let Some(p) = self.pending.get_mut(&station) else {
            return;
        };
        p.buf.extend_from_slice(frame);
        p.frames += 1;
        p.filled += u64::from(filled);
        p.bytes_in_file += frame.len() as u64;
        if chunk.is_some_and(|c| p.bytes_in_file >= c) {
            p.rotate = true;
        }
        if p.buf.len() >= FLUSH_BYTES {
            self.hand_over(station);
        }
    }

    fn discontinuity(&mut self, station: u16) {
        if let Some(p) = self.pending.get_mut(&station) {
            p.rotate = true;
        }
    }
}

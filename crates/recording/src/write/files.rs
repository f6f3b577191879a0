//! The writer's side: owns one open file per station, creates files named after their first
//! frame's time, appends whole frames (direct or through the page cache) and on a write error cuts
//! a file back to whole frames and counts what was not written.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use safedir::{Create, Dir, DirError};

use super::direct::{finish_direct, write_direct, Carry};
use super::scan_files::{LaneScan, ScanFiles};
use super::{bad, key_parts, FileKey, FileMode, OpenFile, WriteOp};
use crate::ring::SharedRing;
use stream::results::WrittenFile;

struct Open {
    file: Option<File>,
    path: PathBuf,
    info: WrittenFile,
    /// Frame length of the file (from its first record).
    frame_len: u64,
    /// With direct I/O: the file's last, partial block.
    carry: Option<Carry>,
}

#[derive(Default)]
pub(super) struct Shared {
    pub(super) error: Mutex<Option<String>>,
    pub(super) not_written: AtomicU64,
    /// A writer thread's frames of vbs/Mark6 blocks not written so far, kept apart until the
    /// end (then added to `not_written`): the live count of a disk that failed mid-scan (the
    /// writer process keeps its whole count in the ring instead).
    pub(super) scans_not_written: AtomicU64,
    /// A multi-disk recording's writer thread stopped on this error (the writer process says
    /// so in the ring).
    lane_failed: Mutex<Option<String>>,
    /// A writer thread's last look at its disk, as [`SharedRing::publish_space`] (the writer
    /// process puts it in the ring): free bytes, then data bytes written in all when it looked.
    space_free: AtomicU64,
    space_written: AtomicU64,
}

impl Shared {
    pub(super) fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
    }

    pub(super) fn set_lane_failed(&self, msg: &str) {
        if let Ok(mut e) = self.lane_failed.lock() {
            e.get_or_insert_with(|| msg.to_string());
        }
    }

    pub(super) fn lane_failed(&self) -> Option<String> {
        self.lane_failed.lock().ok().and_then(|e| e.clone())
    }

    /// A writer thread's look at its disk: `free` bytes free with `written` data bytes written
    /// (the order as in [`SharedRing::publish_space`]).
    pub(super) fn publish_space(&self, free: u64, written: u64) {
        self.space_free.store(free, Ordering::Release);
        self.space_written.store(written, Ordering::Release);
    }

    /// A writer thread's last look at its disk, `(free, written)`; `None` before the first.
    pub(super) fn space(&self) -> Option<(u64, u64)> {
        let written = self.space_written.load(Ordering::Acquire);
        let free = self.space_free.load(Ordering::Acquire);
        (free != 0 || written != 0).then_some((free, written))
    }
}

/// Data records between two looks at the disk's free space (fstatvfs): at 256 KiB a record,
/// every 16 MiB, besides one at each block's start.
const SPACE_EVERY: u32 = 64;

/// The writer's looks at its disk's free space, for the receiver to leave a disk that has no
/// room for another block before a write fails on it.
struct SpaceLook<'a> {
    root: &'a Dir,
    ring: Option<&'a SharedRing>,
    shared: &'a Shared,
    /// Data bytes given to this writer so far (written, or counted as not written).
    written: u64,
    since: u32,
}

impl SpaceLook<'_> {
    /// Look now (one fstatvfs) and say so; a disk that cannot say is left to its write errors.
    fn look(&mut self) {
        self.since = 0;
        let Ok(space) = self.root.space() else { return };
        // The free space first, then the count (see SharedRing::publish_space).
        match self.ring {
            Some(r) => r.publish_space(space.free, self.written),
            None => self.shared.publish_space(space.free, self.written),
        }
    }

    /// `bytes` of data went to the disk: look again every [`SPACE_EVERY`] records.
    fn wrote(&mut self, bytes: u64) {
        self.written += bytes;
        self.since += 1;
        if self.since >= SPACE_EVERY {
            self.look();
        }
    }
}

/// What a writer wrote: VDIF files, and the recordings of a vbs/Mark6 disk.
#[derive(Debug, Default)]
pub(super) struct Written {
    pub(super) files: Vec<WrittenFile>,
    pub(super) scans: Vec<LaneScan>,
}

fn create(dir: &Dir, key: FileKey, stamp: &str, direct: bool) -> std::io::Result<(File, PathBuf)> {
    let name = match key_parts(key) {
        (station, None) => station.to_string(),
        (station, Some(t)) => format!("{station}_t{t}"),
    };
    let how = Create { read: false, direct };
    for n in 0..1000 {
        let suffix = if n == 0 { String::new() } else { format!("_{n}") };
        let file = format!("{name}_{stamp}{suffix}.vdif");
        match dir.create_file(&file, how) {
            Ok(f) => return Ok((f, dir.display(&file))),
            // Taken (a file, a directory or a planted link alike): the next name.
            Err(DirError::Exists(_)) => continue,
            Err(e) => return Err(e.into_io()),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "1000 files of the same name",
    ))
}

/// Append whole frames to a station's open file; on a write error cut the file back to whole
/// frames, count what did not make it and stop writing that file.
fn append(o: &mut Open, data: &[u8], frames: u64, filled: u64, frame_len: u64, shared: &Shared) {
    let Some(f) = o.file.as_mut() else {
        shared.not_written.fetch_add(frames, Ordering::Relaxed);
        return;
    };
    if o.info.frames == 0 {
        o.frame_len = frame_len;
    }
    let written = if frame_len != o.frame_len {
        Err(bad(format!(
            "writer record: frames of {frame_len} bytes in a file of {}-byte frames",
            o.frame_len
        )))
    } else if let Some(c) = o.carry.as_mut() {
        write_direct(f, c, data)
    } else {
        f.write_all(data)
    };
    match written {
        Ok(()) => {
            o.info.bytes += data.len() as u64;
            o.info.frames += frames;
            o.info.filled += filled;
        }
        Err(e) => cut_back(o, frames, shared, e),
    }
}

/// After a write error: cut the file back to the whole frames on disk, count the rest of what
/// it was given (`more` frames beyond those already counted) as not written, and stop writing
/// the file.
fn cut_back(o: &mut Open, more: u64, shared: &Shared, e: std::io::Error) {
    let fl = o.frame_len.max(1);
    let given = o.info.frames + more;
    if let Some(f) = o.file.take() {
        let on_disk = f.metadata().map_or(o.info.bytes, |m| m.len());
        // With direct I/O the carried block never reached the disk: fewer frames than counted.
        let kept = (on_disk / fl).min(given);
        let _ = f.set_len(kept * fl);
        o.info.frames = kept;
        o.info.bytes = kept * fl;
        o.info.filled = o.info.filled.min(kept);
    }
    shared
        .not_written
        .fetch_add(given - o.info.frames.min(given), Ordering::Relaxed);
    shared.fail(format!("writing {}: {e}", o.path.display()));
}

/// Close a station's file: a direct-I/O file's last partial block goes through the page cache
/// (O_DIRECT writes whole blocks only).
fn close(mut o: Open, shared: &Shared) -> WrittenFile {
    if let (Some(f), Some(c)) = (o.file.as_mut(), o.carry.as_mut()) {
        if let Err(e) = finish_direct(f, c) {
            cut_back(&mut o, 0, shared, e);
        }
    }
    o.info
}

/// The writer (thread, or the body of the writer process with `ring`): owns the files.
pub(super) fn writer(
    root: Dir,
    ops: impl IntoIterator<Item = WriteOp>,
    shared: Arc<Shared>,
    ring: Option<&SharedRing>,
    direct: bool,
) -> Written {
    let mut open: HashMap<FileKey, Open> = HashMap::new();
    // The directory (the operator's --out or disk) was opened by the recorder; every file is
    // made below it without following links.
    let dir = root.path().to_path_buf();
    let mut scans = ScanFiles::new(root.try_clone(), direct);
    let mut done = Vec::new();
    let mut space = SpaceLook {
        root: &root,
        ring,
        shared: &shared,
        written: 0,
        since: 0,
    };
    space.look();
    for op in ops {
        match op {
            WriteOp::Open { station, file } => {
                if let Some(o) = open.remove(&station) {
                    done.push(close(o, &shared));
                }
                open.insert(station, open_file(&root, &dir, station, &file, direct, &shared));
            }
            WriteOp::Data {
                station,
                buf,
                frames,
                filled,
                frame_len,
            } => {
                data(
                    &mut open,
                    &mut scans,
                    station,
                    &buf,
                    (frames, filled, frame_len),
                    &shared,
                );
                space.wrote(buf.len() as u64);
            }
            WriteOp::Slot {
                station,
                slot,
                at,
                len,
                frames,
                filled,
                frame_len,
            } => {
                match ring.and_then(|r| r.handed(slot, at as usize, len as usize)) {
                    Some(bytes) => data(
                        &mut open,
                        &mut scans,
                        station,
                        bytes,
                        (frames, filled, frame_len),
                        &shared,
                    ),
                    None => {
                        shared.fail(format!("writer record: slot {slot} ({len} bytes) was not handed over"));
                        shared.not_written.fetch_add(frames, Ordering::Relaxed);
                    }
                }
                if let Some(r) = ring {
                    r.release(slot);
                }
                space.wrote(u64::from(len));
            }
            WriteOp::Close { station } => {
                if let Some(o) = open.remove(&station) {
                    done.push(close(o, &shared));
                }
                scans.close(station);
            }
            WriteOp::Block {
                station,
                scan,
                layout,
                number,
                planned,
                frame_len,
            } => {
                scans.block(station, &scan, layout, number, planned, frame_len);
                space.look();
            }
            WriteOp::EndBlock { station } => scans.end_block(station),
        }
        publish_trouble(&scans, &shared, ring);
    }
    done.extend(open.into_values().map(|o| close(o, &shared)));
    done.retain(|f| !f.path.is_empty());
    let (lane_scans, not_written, failed) = scans.finish();
    // What the disk has left once everything is written, for the report.
    space.look();
    shared.not_written.fetch_add(not_written, Ordering::Relaxed);
    shared.scans_not_written.store(0, Ordering::Relaxed);
    if let Some(r) = ring {
        r.set_not_written(shared.not_written.load(Ordering::Relaxed));
    }
    if let Some(why) = failed {
        if let Some(r) = ring {
            r.set_failed(&why);
        }
        shared.set_lane_failed(&why);
        shared.fail(why);
    }
    Written {
        files: done,
        scans: lane_scans,
    }
}

/// What went wrong on the disk so far, told the receiver at once: a scan file that failed (it
/// sends later blocks to other disks) and the frames that did not reach the disk (loss it
/// reports while the scan goes on).
fn publish_trouble(scans: &ScanFiles, shared: &Shared, ring: Option<&SharedRing>) {
    if let Some(why) = scans.failed() {
        match ring {
            Some(r) => r.set_failed(why),
            None => shared.set_lane_failed(why),
        }
    }
    match ring {
        Some(r) => r.set_not_written(shared.not_written.load(Ordering::Relaxed) + scans.not_written),
        None => shared.scans_not_written.store(scans.not_written, Ordering::Relaxed),
    }
}

/// Whole frames for `station`: its VDIF file, or its recording on this disk.
fn data(
    open: &mut HashMap<FileKey, Open>,
    scans: &mut ScanFiles,
    station: FileKey,
    bytes: &[u8],
    (frames, filled, frame_len): (u64, u64, u64),
    shared: &Shared,
) {
    if scans.has(station) {
        return scans.append(station, bytes, frames, filled, frame_len);
    }
    match open.get_mut(&station) {
        Some(o) => append(o, bytes, frames, filled, frame_len, shared),
        None => {
            shared.not_written.fetch_add(frames, Ordering::Relaxed);
        }
    }
}

/// A new VDIF file for `station` (a file that cannot be made is an error kept, and its frames
/// are counted as not written).
fn open_file(
    root: &Dir,
    dir: &std::path::Path,
    station: FileKey,
    file: &OpenFile,
    direct: bool,
    shared: &Shared,
) -> Open {
    let d = root;
    let made = match file {
        OpenFile::Stamped(stamp) => create(d, station, stamp, direct),
        OpenFile::Named { name, mode } => {
            // No direct I/O: an appended file does not start at a block boundary.
            let f = match mode {
                FileMode::New => d.create_file(name, Create::default()),
                FileMode::Truncate => d.open_write(name, false),
                FileMode::Append => d.open_write(name, true),
            };
            f.map(|f| (f, d.display(name))).map_err(DirError::into_io)
        }
    };
    let direct = direct && matches!(file, OpenFile::Stamped(_));
    let (file, path) = match made {
        Ok((f, p)) => (Some(f), p),
        Err(e) => {
            shared.fail(format!("creating a file in {}: {e}", dir.display()));
            (None, PathBuf::new())
        }
    };
    let info = WrittenFile {
        path: path.display().to_string(),
        station: key_parts(station).0.to_string(),
        thread: key_parts(station).1,
        bytes: 0,
        frames: 0,
        filled: 0,
    };
    Open {
        file,
        path,
        info,
        frame_len: 0,
        carry: direct.then(Carry::new),
    }
}

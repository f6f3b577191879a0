//! [`ScanSink`]: a recording in FlexBuff vbs or Mark6 scatter-gather layout over many disks, one
//! writer (lane) per disk with its own share of the write buffer.
//!
//! Each station's (or thread's) frames are cut into blocks of whole frames
//! ([`scanfmt::plan::BlockPlan`]); each block goes to the live disk with the least backlog
//! ([`scanfmt::plan::Assigner`]), so every disk works and a slow one is given less. A disk whose
//! writer fails (full, read-only, gone) says so in its ring at once; it leaves the set, the block
//! it was writing ends there, and the next block goes to another disk. What the failed disk did
//! not write is counted; the scan stays readable on the others (its block numbers show the gap).

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use scanfmt::datastream::LabelNames;
use scanfmt::mk6::{BLOCK_HEADER_V2_LEN, FILE_HEADER_LEN};
use scanfmt::name::{NameTemplate, ScanName};
use scanfmt::plan::{Assigner, BlockPlan, DEFAULT_MK6_BLOCK, DEFAULT_VBS_BLOCK};
use scanfmt::results::{DiskReport, RecordedScan, RecordingReport};
use scanfmt::{vbs, Layout};
use stream::FrameSink;
use vdif::StationId;

use super::direct::{check_direct, on_tmpfs};
use super::lane::{Lane, Pending};
use super::{file_key, frame_thread, FileKey, KeyList, SinkOutcome, WriteOp, WriterPlacement};

/// What to record and where: the library entry point for a multi-disk recording (`stream recv
/// --format vbs|mk6`, the relay's tee, a control daemon).
#[derive(Debug, Clone)]
pub struct RecordingConfig {
    /// vbs or Mark6.
    pub layout: Layout,
    /// Mount points, one writer each.
    pub disks: Vec<PathBuf>,
    /// What the recordings are called.
    pub names: RecordingNames,
    /// Data bytes per block (whole frames up to it); default 128 MiB for vbs, 8 MiB for Mark6
    /// (jive5ab's minimums).
    pub block_bytes: Option<u64>,
    /// Write with O_DIRECT on every disk whose file system takes it (writer processes only).
    pub direct: bool,
    /// The disks already opened by the caller, in the order of `disks` (a daemon opens them
    /// below the directories it may use, without following links): the writers use these
    /// handles and resolve no path. Empty: each disk is made if missing and opened by its path
    /// (the operator's own, as `stream recv --disks` gives them).
    pub opened: Vec<std::sync::Arc<safedir::Dir>>,
}

/// What the recordings of a multi-disk recording are called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordingNames {
    /// `--scan`: a scan name or a template with `{station}` / `{thread}`; each station's (or,
    /// split, each thread's) recording named by it, `<scan>_ds<station>` without fields (see
    /// [`scanfmt::name`]).
    Template(String),
    /// The Field System's scan label, as a FlexBuff names its recordings: the label itself,
    /// or per data stream `<label>_ds<stream>` (see [`scanfmt::datastream`]).
    Label(LabelNames),
}

impl RecordingNames {
    /// The scan name or label, as given.
    pub fn as_str(&self) -> &str {
        match self {
            RecordingNames::Template(t) => t,
            RecordingNames::Label(l) => l.label(),
        }
    }
}

/// How a sink names each recording, checked.
enum Naming {
    Template(NameTemplate),
    Label(LabelNames),
}

impl Naming {
    /// The recording of a frame of `station` (and `thread` when recordings depend on it);
    /// `None` when no recording takes it (a data stream matches none).
    fn recording(&self, station: StationId, thread: Option<u16>) -> Option<String> {
        match self {
            Naming::Template(t) => Some(t.expand(station, thread)),
            Naming::Label(l) => l.recording(station, thread.unwrap_or(0)),
        }
    }
}

impl RecordingConfig {
    /// The disks' paths, joined by `sep`.
    pub fn disks_joined(&self, sep: &str) -> String {
        self.disks
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(sep)
    }
}

/// Least write buffer per disk (a few blocks' worth of slots).
const MIN_LANE_BUFFER: u64 = 16 << 20;

/// One disk: its writer, or why it has none.
struct Disk {
    path: PathBuf,
    lane: Option<Lane>,
    dropped: Option<String>,
    direct: bool,
    /// Data bytes of the blocks begun on it, each counted whole from its start (a block ended
    /// short gives back the rest): what it has written or will write.
    promised: u64,
    /// Times it was passed over for a block because it had no room for one.
    passed_over_full: u64,
}

/// The block being gathered for a stream.
struct Current {
    lane: usize,
    pending: Pending,
    /// Data bytes in the block so far.
    written: u64,
    /// Data bytes it may hold: the plan's block, or less where that was all a disk had left.
    limit: u64,
}

/// One recording (a station, a thread, a data stream, or all the scan's frames).
struct Stream {
    /// The name it was to have, and the one it has (a letter appended when a disk held it).
    base: String,
    scan: String,
    /// The first frame's station and (when recordings depend on it) thread, for the report.
    station: StationId,
    thread: Option<u16>,
    plan: BlockPlan,
    next_number: u64,
    current: Option<Current>,
    /// Mark6: the size of this recording's file on each disk (0: not made yet).
    mk6_pos: Vec<u64>,
}

/// Records each station (or thread) as a scan spread over many disks.
pub struct ScanSink {
    layout: Layout,
    names: Naming,
    block_bytes: u64,
    /// Whether the recording a frame goes to depends on its thread.
    by_thread: bool,
    disks: Vec<Disk>,
    assigner: Assigner,
    /// Which recording a station's (or station's thread's) frames go to: an index into
    /// `streams`, or none (counted as not recorded).
    route: KeyList<Option<FileKey>>,
    /// The recordings, keyed by their index (what the writers know them by).
    streams: KeyList<Stream>,
    /// Frames no recording takes (no data stream matched them).
    unrouted: u64,
    frames: u64,
    filled: u64,
    /// Frames this side could not give any disk (every disk gone, the scan at its last block
    /// number, a frame of another length).
    not_written: u64,
    /// Blocks begun shorter than the plan's: no disk had room for a whole one.
    short_blocks: u64,
    direct_io: bool,
}

impl ScanSink {
    /// Wait until every disk's writer memory is allocated, or `deadline`; whether it is.
    pub(super) fn wait_populated(&self, deadline: std::time::Instant) -> bool {
        self.lanes().all(|l| l.wait_populated(deadline))
    }

    /// Start one writer per disk of `cfg` (a disk that cannot be set up leaves the set at once;
    /// none at all is an error), `write_buffer` bytes shared among them.
    pub fn new(
        cfg: &RecordingConfig,
        placement: &WriterPlacement,
        write_buffer: u64,
        split_threads: bool,
    ) -> std::io::Result<ScanSink> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        let (names, by_thread) = match &cfg.names {
            RecordingNames::Template(t) => (
                Naming::Template(NameTemplate::new(t, split_threads).map_err(|e| invalid(e.to_string()))?),
                split_threads,
            ),
            RecordingNames::Label(l) => (Naming::Label(l.clone()), l.streams().by_thread()),
        };
        if cfg.disks.is_empty() || cfg.disks.len() > 1024 {
            return Err(invalid(format!("1 to 1024 disks ({} given)", cfg.disks.len())));
        }
        let block_bytes = cfg.block_bytes.unwrap_or(match cfg.layout {
            Layout::Vbs => DEFAULT_VBS_BLOCK,
            Layout::Mk6 => DEFAULT_MK6_BLOCK,
        });
        BlockPlan::new(cfg.layout, block_bytes, 1).map_err(|e| invalid(e.to_string()))?;
        let share = (write_buffer / cfg.disks.len() as u64).max(MIN_LANE_BUFFER);
        let child = matches!(placement, WriterPlacement::ChildProcess { .. });
        let mut disks = Vec::new();
        let mut assigner = Assigner::new(cfg.disks.len());
        if !cfg.opened.is_empty() && cfg.opened.len() != cfg.disks.len() {
            return Err(invalid(format!(
                "{} disks opened for {} disks",
                cfg.opened.len(),
                cfg.disks.len()
            )));
        }
        for (i, d) in cfg.disks.iter().enumerate() {
            let opened = match cfg.opened.get(i) {
                Some(dir) => dir.try_clone().map_err(safedir::DirError::into_io),
                None => super::make_and_open(d),
            };
            // Direct I/O where the disk takes it, but not on tmpfs, where it costs more
            // ([`on_tmpfs`]).
            let direct = cfg.direct
                && child
                && opened
                    .as_ref()
                    .is_ok_and(|dir| !on_tmpfs(dir.fd()) && check_direct(dir).is_ok());
            let lane = opened.and_then(|dir| Lane::new(dir, placement, share, direct));
            let (lane, dropped) = match lane {
                Ok(l) => (Some(l), None),
                Err(e) => {
                    assigner.drop_disk(i);
                    (None, Some(format!("{}: {e}", d.display())))
                }
            };
            disks.push(Disk {
                path: d.clone(),
                lane,
                dropped,
                direct,
                promised: 0,
                passed_over_full: 0,
            });
        }
        if assigner.alive_count() == 0 {
            let why: Vec<String> = disks.iter().filter_map(|d| d.dropped.clone()).collect();
            return Err(std::io::Error::other(format!(
                "no disk can be written: {}",
                why.join("; ")
            )));
        }
        Ok(ScanSink {
            layout: cfg.layout,
            names,
            block_bytes,
            by_thread,
            route: KeyList::default(),
            unrouted: 0,
            direct_io: disks.iter().all(|d| d.direct),
            disks,
            assigner,
            streams: KeyList::default(),
            frames: 0,
            filled: 0,
            not_written: 0,
            short_blocks: 0,
        })
    }

    /// Frames passed in (written or not).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The disks' writers.
    pub(super) fn lanes(&self) -> impl Iterator<Item = &Lane> {
        self.disks.iter().filter_map(|d| d.lane.as_ref())
    }

    /// Filled frames passed in.
    pub fn filled(&self) -> u64 {
        self.filled
    }

    /// Frames passed in that reached no disk so far: those this side could give no disk and
    /// those each disk's writer could not write (a disk that failed mid-scan).
    pub fn not_written(&self) -> u64 {
        self.not_written
            + self
                .disks
                .iter()
                .filter_map(|d| d.lane.as_ref())
                .map(Lane::not_written)
                .sum::<u64>()
    }

    /// Time waited for the writers (all of one disk's buffers with it), and how often.
    pub fn stalled(&self) -> (std::time::Duration, u64) {
        self.disks
            .iter()
            .filter_map(|d| d.lane.as_ref())
            .fold((std::time::Duration::ZERO, 0), |(t, n), l| {
                (t + l.stalled, n + l.stalls)
            })
    }

    /// Take disks whose writer failed out of the set; how many are out.
    pub fn poll_disks(&mut self) -> u32 {
        for (i, d) in self.disks.iter_mut().enumerate() {
            if d.dropped.is_none() {
                if let Some(why) = d.lane.as_ref().and_then(Lane::failed) {
                    d.dropped = Some(why);
                    self.assigner.drop_disk(i);
                }
            }
        }
        self.disks.iter().filter(|d| d.dropped.is_some()).count() as u32
    }

    /// The recording a frame of `station` goes to (its key in `streams`), made on its first
    /// frame: a name no disk has yet (jive5ab's rule for a duplicate: a letter appended),
    /// blocks for its frame length. `None` when no recording takes the frame.
    fn stream(&mut self, station: StationId, frame: &[u8]) -> Option<FileKey> {
        let thread = self.by_thread.then(|| frame_thread(frame));
        let key = file_key(station, thread);
        if let Some(route) = self.route.get_mut(&key) {
            return *route;
        }
        let route = self.names.recording(station, thread).and_then(|base| {
            let existing = self
                .streams
                .keys()
                .copied()
                .find(|k| self.streams.get(k).is_some_and(|s| s.base == base));
            existing.or_else(|| {
                let plan = BlockPlan::new(self.layout, self.block_bytes, frame.len() as u64).ok()?;
                let index = FileKey::try_from(self.streams.len()).ok()?;
                self.streams.insert(
                    index,
                    Stream {
                        scan: free_name(&base, &self.disks),
                        base,
                        station,
                        thread,
                        plan,
                        next_number: 0,
                        current: None,
                        mk6_pos: vec![0; self.disks.len()],
                    },
                );
                Some(index)
            })
        });
        self.route.insert(key, route);
        route
    }

    /// End `key`'s block: what is gathered goes to its disk, then the end.
    fn end_block(&mut self, key: FileKey) {
        let Some(s) = self.streams.get_mut(&key) else { return };
        let Some(mut c) = s.current.take() else { return };
        // A block ended short: its disk was promised less.
        let unused = c.limit.saturating_sub(c.written);
        let d = &mut self.disks[c.lane];
        d.promised = d.promised.saturating_sub(unused);
        if self.layout == Layout::Mk6 {
            s.mk6_pos[c.lane] = c.pending.bytes_in_file;
        }
        if let Some(lane) = self.disks[c.lane].lane.as_mut() {
            lane.hand_over(key, &mut c.pending);
            lane.return_slot(&c.pending);
            lane.send(WriteOp::EndBlock { station: key });
        }
    }

    /// Which disks have room for a block of `block` data bytes, by their writers' last look
    /// at their free space (read from memory: choosing never waits for a disk); a disk whose
    /// writer has not looked yet counts as having room. Each disk without room is counted.
    fn room(&mut self, block: u64) -> Vec<bool> {
        self.disks
            .iter_mut()
            .map(|d| {
                let fits = d
                    .lane
                    .as_ref()
                    .and_then(Lane::space)
                    .is_none_or(|(free, written)| scanfmt::plan::has_room(free, written, d.promised, block));
                d.passed_over_full += u64::from(!fits && d.dropped.is_none());
                fits
            })
            .collect()
    }

    /// Begin `key`'s next block on the disk with the least backlog among those with room for
    /// it; `false` when there is no such disk or the scan has used every block number.
    fn start_block(&mut self, key: FileKey) -> bool {
        self.poll_disks();
        let backlog: Vec<u64> = self
            .disks
            .iter()
            .map(|d| d.lane.as_ref().map_or(u64::MAX, Lane::backlog))
            .collect();
        let (block, frame_len) = self
            .streams
            .get(&key)
            .map_or((0, 1), |s| (s.plan.block_data(), s.plan.frame_len()));
        let room = self.room(block);
        let (l, block) = match self.assigner.pick_with_room(&backlog, &room) {
            Some(l) => (l, block),
            None => match self.short_block(block, frame_len) {
                Some(x) => x,
                None => return false,
            },
        };
        self.disks[l].promised += block;
        let layout = self.layout;
        let Some(s) = self.streams.get_mut(&key) else {
            return false;
        };
        let limit = match layout {
            Layout::Vbs => vbs::MAX_CHUNKS,
            Layout::Mk6 => i32::MAX as u64,
        };
        let number = match u32::try_from(s.next_number) {
            Ok(n) if s.next_number < limit => n,
            _ => return false,
        };
        s.next_number += 1;
        let pos = match layout {
            Layout::Vbs => 0,
            Layout::Mk6 => {
                let p = &mut s.mk6_pos[l];
                if *p == 0 {
                    *p = FILE_HEADER_LEN as u64;
                }
                *p += BLOCK_HEADER_V2_LEN as u64;
                *p
            }
        };
        let Some(lane) = self.disks[l].lane.as_mut() else {
            return false;
        };
        lane.send(WriteOp::Block {
            station: key,
            scan: s.scan.clone(),
            layout,
            number,
            planned: block,
            frame_len: s.plan.frame_len(),
        });
        s.current = Some(Current {
            lane: l,
            pending: lane.pending(s.plan.frame_len(), pos),
            written: 0,
            limit: block,
        });
        self.short_blocks += u64::from(block < s.plan.block_data());
        true
    }

    /// Where no disk has room for a whole block: the disk with the most room left and a block
    /// of the whole frames that fit it (a disk set smaller than one block lost every frame
    /// before, where jive5ab filled it). `None` when not one frame fits anywhere.
    fn short_block(&mut self, block: u64, frame_len: u64) -> Option<(usize, u64)> {
        let fit: Vec<u64> = self
            .disks
            .iter()
            .map(|d| match (d.dropped.is_some(), d.lane.as_ref().and_then(Lane::space)) {
                (false, Some((free, written))) => {
                    let x = scanfmt::plan::room_for_block(free, written, d.promised, block);
                    x - x % frame_len.max(1)
                }
                _ => 0,
            })
            .collect();
        let room: Vec<bool> = fit.iter().map(|&x| x >= frame_len).collect();
        // The assigner takes the least "backlog": give it the room missing, so the most room wins.
        let missing: Vec<u64> = fit.iter().map(|&x| block.saturating_sub(x)).collect();
        let l = self.assigner.pick_with_room(&missing, &room)?;
        Some((l, fit[l]))
    }

    /// Flush, close, wait for every writer: what the recording holds.
    pub fn finish(&mut self) -> SinkOutcome {
        let keys: Vec<FileKey> = self.streams.keys().copied().collect();
        for &k in &keys {
            self.end_block(k);
        }
        let mut error = None;
        let mut not_written = self.not_written;
        let mut report = RecordingReport {
            layout: Some(self.layout),
            block_bytes: self.block_bytes,
            direct_io: self.direct_io,
            short_blocks: self.short_blocks,
            ..RecordingReport::default()
        };
        let mut per_key: Vec<(FileKey, RecordedScan)> = Vec::new();
        for d in &mut self.disks {
            let mut disk = DiskReport {
                path: d.path.display().to_string(),
                passed_over_full: d.passed_over_full,
                ..DiskReport::default()
            };
            if let Some(lane) = d.lane.as_mut() {
                for &k in &keys {
                    lane.send(WriteOp::Close { station: k });
                }
                let written = lane.finish();
                // The writer's last look, once it had written everything.
                disk.free_bytes = lane.space().map(|(free, _)| free);
                not_written += lane.shared.not_written.load(Ordering::Relaxed);
                let lane_error = lane.shared.error.lock().ok().and_then(|e| e.clone());
                if d.dropped.is_none() {
                    d.dropped = lane
                        .shared
                        .lane_failed()
                        .or(lane.failed().filter(|_| lane_error.is_some()));
                }
                error = error.or(lane_error);
                for ls in written.scans {
                    disk.blocks += ls.blocks;
                    disk.bytes += ls.bytes;
                    disk.frames += ls.frames;
                    let i = match per_key.iter().position(|(k, _)| *k == ls.key) {
                        Some(i) => i,
                        None => {
                            per_key.push((ls.key, RecordedScan::default()));
                            per_key.len() - 1
                        }
                    };
                    let r = &mut per_key[i].1;
                    r.blocks += ls.blocks;
                    r.bytes += ls.bytes;
                    r.frames += ls.frames;
                    r.filled += ls.filled;
                    r.frame_bytes = ls.frame_len;
                }
            }
            error = error.or(d.dropped.clone());
            disk.dropped = d.dropped.is_some();
            disk.error = d.dropped.clone();
            report.disks.push(disk);
        }
        for (key, mut r) in per_key {
            if let Some(s) = self.streams.get(&key) {
                r.scan = s.scan.clone();
                r.station = s.station.to_string();
                r.thread = s.thread;
            }
            report.scans.push(r);
        }
        report.scans.sort_by(|a, b| a.scan.cmp(&b.scan));
        report.disks_dropped = report.disks.iter().filter(|d| d.dropped).count() as u64;
        report.frames_not_written = not_written;
        report.frames_unmatched = self.unrouted;
        SinkOutcome {
            files: Vec::new(),
            not_written,
            error,
            recording: Some(report),
        }
    }
}

impl FrameSink for ScanSink {
    fn frame(&mut self, station: StationId, frame: &[u8], filled: bool) {
        self.frames += 1;
        self.filled += u64::from(filled);
        let len = frame.len() as u64;
        let Some(key) = self.stream(station, frame) else {
            self.unrouted += 1;
            self.not_written += 1;
            return;
        };
        let Some(s) = self.streams.get(&key) else {
            self.not_written += 1;
            return;
        };
        if s.plan.frame_len() != len {
            // A block holds frames of one length (a Mark6 file states it once).
            self.not_written += 1;
            return;
        }
        let full = s.current.as_ref().is_some_and(|c| c.written + len > c.limit);
        if full {
            self.end_block(key);
        }
        let needs_block = self.streams.get(&key).is_some_and(|s| s.current.is_none());
        if needs_block && !self.start_block(key) {
            self.not_written += 1;
            return;
        }
        let Some(c) = self.streams.get_mut(&key).and_then(|s| s.current.as_mut()) else {
            return;
        };
        let Some(lane) = self.disks[c.lane].lane.as_mut() else {
            self.not_written += 1;
            return;
        };
        // A frame the lane could not keep is counted by it as not written.
        let Some(handover) = lane.gather(&mut c.pending, frame) else {
            return;
        };
        c.pending.frames += 1;
        c.pending.filled += u64::from(filled);
        c.pending.bytes_in_file += len;
        c.written += len;
        if handover {
            lane.hand_over(key, &mut c.pending);
            // The disk failed meanwhile: end the block here, the next one goes elsewhere.
            if lane.failed().is_some() {
                self.end_block(key);
            }
        }
    }

    fn discontinuity(&mut self, _station: StationId) {
        // A scan is a recording interval, not a promise of continuity: time gaps stay inside
        // it (as in jive5ab's recordings) and show in `vdif inspect`.
    }
}

/// `base`, or `base` with a letter (then a number) appended, whichever no disk holds yet. Any
/// entry of that name counts — a directory, a file, a link planted there —, looked at without
/// following it: a recording never writes into or through something it did not make.
fn free_name(base: &str, disks: &[Disk]) -> String {
    let dirs: Vec<_> = disks.iter().filter_map(|d| safedir::Dir::open(&d.path).ok()).collect();
    let taken = |n: &str| dirs.iter().any(|d| !matches!(d.kind(n), Ok(None)));
    let letters = ('a'..='z').chain('A'..='Z').map(|c| format!("{base}{c}"));
    let numbers = (1..1000).map(|i| format!("{base}_{i}"));
    std::iter::once(base.to_string())
        .chain(letters)
        .chain(numbers)
        .filter(|n| scanfmt::name::is_valid(n))
        .find(|n| !taken(n))
        .unwrap_or_else(|| base.to_string())
}

/// The name jive5ab gives a recording labelled `label` on `disks` ([`scanfmt::name::free_label`]
/// of what they hold). Entries are looked at without following links (a link counts as taken).
/// `None` when all 52 letters are taken.
pub fn unique_label(label: &ScanName, disks: &[PathBuf]) -> Option<ScanName> {
    let names: Vec<String> = disks
        .iter()
        .filter_map(|d| safedir::Dir::open(d).and_then(|d| d.entries()).ok())
        .flatten()
        .map(|(name, _)| name)
        .collect();
    scanfmt::name::free_label(label, names.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_label_gets_the_first_free_letter_as_jive5ab_gives_it() {
        let t = tempfile::tempdir().unwrap();
        let d: Vec<PathBuf> = (0..2).map(|i| t.path().join(format!("disk{i}"))).collect();
        for x in &d {
            std::fs::create_dir(x).unwrap();
        }
        assert_eq!(
            unique_label(&ScanName::parse("ev_ef_no1").unwrap(), &d)
                .unwrap()
                .to_string(),
            "ev_ef_no1"
        );
        std::fs::create_dir(d[1].join("ev_ef_no1_dsds0")).unwrap();
        assert_eq!(
            unique_label(&ScanName::parse("ev_ef_no1").unwrap(), &d)
                .unwrap()
                .to_string(),
            "ev_ef_no1a"
        );
        std::fs::create_dir(d[0].join("ev_ef_no1a")).unwrap();
        std::os::unix::fs::symlink("/tmp", d[1].join("ev_ef_no1b")).unwrap();
        assert_eq!(
            unique_label(&ScanName::parse("ev_ef_no1").unwrap(), &d)
                .unwrap()
                .to_string(),
            "ev_ef_no1c"
        );
        // Names that only start like it are other scans.
        assert_eq!(
            unique_label(&ScanName::parse("ev_ef_no").unwrap(), &d)
                .unwrap()
                .to_string(),
            "ev_ef_no"
        );
        for c in ('c'..='z').chain('A'..='Z') {
            std::fs::create_dir(d[0].join(format!("ev_ef_no1{c}"))).unwrap();
        }
        assert_eq!(unique_label(&ScanName::parse("ev_ef_no1").unwrap(), &d), None);
    }
}

//! Result types: what a recorder wrote ([`RecordingReport`]), what a reader found
//! ([`ScanInfo`], [`ScanList`]), what `vdif gather` did ([`GatherReport`]). JSON is their
//! source of truth (`--json`, `--export-json`).

use serde::{Deserialize, Serialize};

use crate::info::FrameSpan;
use crate::Layout;

/// One disk of a recording.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskReport {
    /// Mount point (directory).
    pub path: String,
    /// Blocks (vbs chunks, Mark6 blocks) written completely or in part.
    pub blocks: u64,
    /// Data bytes written (headers excluded).
    pub bytes: u64,
    /// Frames written.
    pub frames: u64,
    /// The disk failed (a write error: full, read-only, gone) and left the set; later blocks
    /// went to the others.
    pub dropped: bool,
    /// The error that dropped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Blocks that went to another disk because this one had no room left for a whole block
    /// (its free space, less what it had yet to write, below a block and its headroom): a
    /// disk filling up is left before a write fails on it, and stays in the set.
    #[serde(default)]
    pub passed_over_full: u64,
    /// Free space of its file system at the writer's last look, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
}

/// One recording (scan) a recorder wrote: one per station, or per thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedScan {
    /// Scan (recording) name: `vbs://NAME` or `mk6://NAME` reads it back.
    pub scan: String,
    /// VDIF station.
    pub station: String,
    /// VDIF thread, when each thread has its own recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u16>,
    /// Blocks begun (numbered 0 … blocks − 1).
    pub blocks: u64,
    /// Data bytes written, on all disks.
    pub bytes: u64,
    /// Frames written.
    pub frames: u64,
    /// Of which filled invalid (lost on the way, made up by the receiver).
    pub filled: u64,
    /// Frame length, bytes.
    pub frame_bytes: u64,
}

/// What a multi-disk recording wrote (`stream recv --format vbs|mk6`, `stream relay`'s tee).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordingReport {
    /// Layout written.
    pub layout: Option<Layout>,
    /// Largest data bytes per block (whole frames fill each block up to it).
    pub block_bytes: u64,
    /// The disks, in the order given.
    pub disks: Vec<DiskReport>,
    /// The recordings, one per station (or thread).
    pub scans: Vec<RecordedScan>,
    /// Disks that failed during the recording and left the set.
    pub disks_dropped: u64,
    /// Frames not written, all causes (a failed disk's share in flight, every disk gone, no
    /// data stream taking them).
    pub frames_not_written: u64,
    /// Of those, frames that no data stream's criteria took (jive5ab drops them too).
    #[serde(default)]
    pub frames_unmatched: u64,
    /// Each disk's writer ran with direct I/O (O_DIRECT).
    pub direct_io: bool,
    /// Blocks shorter than `block_bytes` begun because no disk had room for a whole one: the
    /// disks' last space, filled rather than lost.
    #[serde(default)]
    pub short_blocks: u64,
}

/// What a reader found of one scan (`evlbi vdif scans`; what jive5ab's `scan_check?` and the
/// Mark6 `list` tell an operator).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScanInfo {
    /// Scan name.
    pub scan: String,
    /// Layout.
    pub layout: Option<Layout>,
    /// The URL that reads it: `vbs://NAME`, `mk6://NAME`.
    pub url: String,
    /// Disks holding at least one piece of it.
    pub disks: Vec<String>,
    /// Files (vbs chunk files; Mark6 files, one per disk).
    pub files: u64,
    /// Bytes of data (the continuous scan; headers excluded).
    pub bytes: u64,
    /// Pieces found (vbs chunks, Mark6 blocks).
    pub blocks: u64,
    /// Highest piece number found, if any.
    pub last_block: Option<u64>,
    /// Numbers below the highest that no disk holds: pieces lost.
    pub missing_blocks: u64,
    /// The first runs of missing numbers, `[first, end)`.
    pub missing: Vec<[u64; 2]>,
    /// Numbers found twice (later copies left out).
    pub duplicate_blocks: u64,
    /// Mark6 blocks cut short by the end of their file (whole packets kept).
    pub truncated_blocks: u64,
    /// Largest piece, bytes of data.
    pub largest_block: u64,
    /// Mark6 file header: packet (frame) size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_bytes: Option<u64>,
    /// Station, frame size and time span from the first and last frames (null when the data
    /// does not start with a VDIF frame).
    pub span: Option<FrameSpan>,
    /// What is wrong (missing blocks, unreadable files, duplicates), one sentence each.
    pub problems: Vec<String>,
}

/// `evlbi vdif scans`: the scans found on a set of disks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScanList {
    /// The disks searched.
    pub disks: Vec<String>,
    /// One entry per scan and layout, by name.
    pub scans: Vec<ScanInfo>,
}

/// `evlbi vdif gather`: a scan written out as one continuous file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatherReport {
    /// What was read.
    pub scan: ScanInfo,
    /// The file written.
    pub out: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Bytes per second.
    pub rate_bytes_per_s: f64,
}

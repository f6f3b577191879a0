//! One pass over a VDIF stream that says what it is and what is wrong with it.
//!
//! [`Inspector`] takes the scanner's events one by one (so `stats` and other passes share its
//! accounting), [`inspect`] runs it over a reader. Memory is bounded: at most
//! [`MAX_STREAMS`] station/thread streams are tracked and [`MAX_LISTED`] gaps, garbage regions
//! and problems are listed (all are counted).

pub(crate) mod checked;
pub mod mark5b;
mod span;
mod tracker;

use std::io::{self, Read};

use serde::{Deserialize, Serialize};

use crate::formats::KnownFormat;
pub use crate::formats::MARK5B_SYNC_WORD;
use crate::header::VdifHeader;
use crate::rate::{FrameRate, RateSource, SourcedRate};
use crate::scan::ScanEvent;
use crate::station::StationId;
use crate::time::leap_table_covers;
use span::{time_span, TimeSpan};
use tracker::{check_edges, Tracker};

/// At most this many individual gaps / garbage regions are listed (all are counted).
pub const MAX_LISTED: usize = 20;
/// Station/thread streams tracked; frames of further streams are counted, not tracked.
pub const MAX_STREAMS: usize = 4096;
/// A file with fewer of its bytes in valid frames than this fraction is "not VDIF".
pub const MIN_VALID_FRACTION: f64 = 0.5;

/// A run of missing frames in one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// Station id of the thread.
    pub station_id: StationId,
    /// Thread id.
    pub thread: u16,
    /// Second (since epoch) and frame number of the last frame before the gap.
    pub after: (u32, u32),
    /// Frames missing.
    pub missing: u64,
}

/// Bytes that were not frames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GarbageRegion {
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Why those bytes were rejected.
    pub reason: String,
}

/// Per-thread frame accounting (a thread of one station).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// Station as text ("Ef" or a number).
    pub station: String,
    /// Station id.
    pub station_id: StationId,
    /// Thread id.
    pub thread: u16,
    /// Frames found.
    pub frames: u64,
    /// Frames with the invalid bit set.
    pub invalid: u64,
    /// Frames missing between the first and the last (within a second from the frame numbers
    /// alone, across seconds once the frame rate is known), and before its first or after its
    /// last frame where the station's other threads have frames (`missing_at_start`,
    /// `missing_at_end`).
    pub missing: u64,
    /// Frames missing before its first frame: the station's other threads start earlier.
    #[serde(default)]
    pub missing_at_start: u64,
    /// Frames missing after its last frame: the station's other threads end later.
    #[serde(default)]
    pub missing_at_end: u64,
    /// Frames that went back in time or repeated a time already seen.
    pub out_of_order: u64,
    /// First (second, frame number).
    pub first: (u32, u32),
    /// Last (second, frame number) in file order.
    pub last: (u32, u32),
    /// Earliest (second, frame number) seen.
    pub earliest: (u32, u32),
    /// Latest (second, frame number) seen.
    pub latest: (u32, u32),
    /// Byte offset of the earliest frame.
    #[serde(default)]
    pub earliest_offset: u64,
    /// Byte offset of the latest frame.
    #[serde(default)]
    pub latest_offset: u64,
}

/// One station of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StationSummary {
    /// Station as text.
    pub station: String,
    /// Station id.
    pub station_id: StationId,
    /// Frames of this station.
    pub frames: u64,
    /// Its thread ids, sorted.
    pub threads: Vec<u16>,
}

/// Everything `evlbi vdif inspect` reports. Fields are `None` when the file cannot tell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectReport {
    /// The frames' format when not VDIF: `mark5b` ([`mark5b::inspect_mark5b`]; then the VDIF
    /// fields that do not apply are empty, and a gap's `after` second counts the time code's
    /// 1000-day cycle). Absent for VDIF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Bytes read.
    pub file_bytes: u64,
    /// Total frames found.
    pub frames: u64,
    /// Bytes in valid frames (headers included).
    pub frame_bytes_total: u64,
    /// Station id of the first frame as text ("Ef" or a number).
    pub station: Option<String>,
    /// Station id of the first frame as a number.
    pub station_id: Option<StationId>,
    /// Every station in the file, in id order (files recorded at a correlator or relay can
    /// hold several).
    pub stations: Vec<StationSummary>,
    /// Sorted thread ids (of all stations).
    pub threads: Vec<u16>,
    /// Frame bytes, header included.
    pub frame_bytes: Option<usize>,
    /// Header bytes (32, or 16 in legacy mode).
    pub header_bytes: Option<usize>,
    /// Bits per sample.
    pub bits_per_sample: Option<u8>,
    /// Channels per thread.
    pub channels: Option<u32>,
    /// Complex samples.
    pub complex: Option<bool>,
    /// Extended data version of the first frame.
    pub edv: Option<u8>,
    /// Legacy (16-byte header) mode.
    pub legacy: Option<bool>,
    /// Time samples per frame.
    pub samples_per_frame: Option<u64>,
    /// Frames per second per thread, and how it was found.
    pub frames_per_second: Option<FrameRate>,
    /// "header" (EDV 1/3 sample rate), "frame numbers" (a second boundary was seen) or "given".
    pub frame_rate_source: Option<String>,
    /// Sample rate per channel, Hz (complex samples per second for complex data).
    pub sample_rate_hz: Option<f64>,
    /// Data rate (sample bits of all threads), bits per second.
    pub data_rate_bps: Option<f64>,
    /// Reference epoch of the first frame.
    pub ref_epoch: Option<u8>,
    /// UTC time of the earliest frame (ISO 8601; leap seconds counted, see [`crate::time`]).
    pub start_utc: Option<String>,
    /// UTC of the start of the earliest frame's second: known even when the frame rate (and so
    /// the time within the second) is not.
    pub first_second_utc: Option<String>,
    /// UTC time just after the latest frame.
    pub end_utc: Option<String>,
    /// Seconds of data spanned per thread (first to last frame, inclusive).
    pub duration_s: Option<f64>,
    /// Frames with the invalid bit set.
    pub invalid_frames: u64,
    /// Frames missing, all threads: inside each thread's span, and at the start or end of a
    /// thread whose station's other threads have frames there.
    pub missing_frames: u64,
    /// Number of gaps (runs of missing frames, a thread's late start or early end included).
    pub gaps: u64,
    /// The first gaps inside threads.
    pub gap_list: Vec<Gap>,
    /// Frames out of time order.
    pub out_of_order_frames: u64,
    /// Bytes that were not frames.
    pub garbage_bytes: u64,
    /// Number of garbage regions.
    pub garbage_regions: u64,
    /// The first garbage regions.
    pub garbage: Vec<GarbageRegion>,
    /// Incomplete frame at the end: (offset, bytes present, bytes expected).
    pub truncated: Option<(u64, u64, u64)>,
    /// Per station and thread, in (station id, thread) order.
    pub per_thread: Vec<ThreadSummary>,
    /// Human-readable problems, each naming an offset where one applies (exit code 1).
    pub problems: Vec<String>,
    /// Remarks that are not faults (e.g. the frame rate cannot be known from a short file).
    pub notes: Vec<String>,
}

/// A thread whose time is further than this from the first frame is reported as inconsistent.
pub const MAX_TIME_SPREAD_S: u32 = 86_400;

/// Errors of inspection.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// Reading failed.
    #[error("read error: {0}")]
    Io(#[from] io::Error),
    /// The stream is empty.
    #[error("the file is empty (0 bytes)")]
    Empty,
    /// Too little of the stream is VDIF: fewer than [`MIN_VALID_FRACTION`] of its bytes are in
    /// frames whose headers agree.
    #[error("not VDIF ({valid_percent:.1} % of bytes in valid frames): {}{detail}", .format.as_ref().map_or(String::new(), |f| format!("{f}; ")))]
    NotVdif {
        /// Bytes read.
        bytes: u64,
        /// Percentage of them in valid frames.
        valid_percent: f64,
        /// What was found instead, naming an offset.
        detail: String,
        /// The format the bytes are, when their start shows a known one
        /// ([`crate::check::CheckedFrames`] names it).
        format: Option<KnownFormat>,
    },
}

/// Nonzero words 4–7 in EDV 0 headers, which the specification leaves zero.
#[derive(Default)]
struct Edv0Words {
    frames: u64,
    first: Option<(u64, [u32; 4])>,
    mark5b: bool,
}

/// Accounting of one pass over a stream, fed event by event.
pub struct Inspector {
    tracker: Tracker,
    first: Option<VdifHeader>,
    report_bytes: u64,
    frames: u64,
    valid_bytes: u64,
    garbage: Vec<GarbageRegion>,
    garbage_bytes: u64,
    garbage_regions: u64,
    truncated: Option<(u64, u64, u64)>,
    problems: Vec<String>,
    first_garbage_reason: Option<String>,
    edv0: Edv0Words,
}

impl Inspector {
    /// A fresh pass. `fps_hint` supplies the frame rate when the file is too short to show it.
    pub fn new(fps_hint: Option<FrameRate>) -> Self {
        let mut tracker = Tracker::default();
        SourcedRate::offer(&mut tracker.rate, RateSource::Given, fps_hint);
        Inspector {
            tracker,
            first: None,
            report_bytes: 0,
            frames: 0,
            valid_bytes: 0,
            garbage: Vec::new(),
            garbage_bytes: 0,
            garbage_regions: 0,
            truncated: None,
            problems: Vec::new(),
            first_garbage_reason: None,
            edv0: Edv0Words::default(),
        }
    }

    /// Frames seen so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Account for one frame of `len` bytes at `offset`.
    pub fn frame(&mut self, offset: u64, header: &VdifHeader, len: usize) {
        self.report_bytes = self.report_bytes.max(offset + len as u64);
        self.valid_bytes += len as u64;
        if self.first.is_none() {
            self.first = Some(*header);
            SourcedRate::offer(&mut self.tracker.rate, RateSource::Header, header.frame_rate());
        }
        if !header.legacy
            && header.edv() == 0
            && (header.extended[0] & 0x00ff_ffff != 0 || header.extended[1..] != [0; 3])
        {
            self.edv0.frames += 1;
            self.edv0.first.get_or_insert((offset, header.extended));
            self.edv0.mark5b |= header.extended.contains(&MARK5B_SYNC_WORD);
        }
        self.frames += 1;
        self.tracker.count(header, offset);
    }

    /// Account for any scanner event.
    pub fn event(&mut self, ev: &ScanEvent) {
        match ev {
            ScanEvent::Frame { header, bytes, offset } => self.frame(*offset, header, bytes.len()),
            ScanEvent::Garbage { offset, len, reason } => {
                self.report_bytes = self.report_bytes.max(offset + len);
                self.garbage_bytes += len;
                self.garbage_regions += 1;
                if self.first_garbage_reason.is_none() && *offset == 0 {
                    self.first_garbage_reason = Some(reason.clone());
                }
                if self.garbage.len() < MAX_LISTED {
                    self.problems
                        .push(format!("offset {offset}: {len} bytes of garbage skipped ({reason})"));
                    self.garbage.push(GarbageRegion {
                        offset: *offset,
                        len: *len,
                        reason: reason.clone(),
                    });
                }
            }
            ScanEvent::Truncated { offset, len, expected } => {
                self.report_bytes = self.report_bytes.max(offset + len);
                self.problems.push(format!(
                    "offset {offset}: last frame truncated ({len} of {expected} bytes)"
                ));
                self.truncated = Some((*offset, *len, *expected));
            }
        }
    }

    /// The report, or why the stream is not VDIF.
    pub fn finish(mut self) -> Result<InspectReport, InspectError> {
        if self.report_bytes == 0 {
            return Err(InspectError::Empty);
        }
        let bytes = self.report_bytes;
        let valid_percent = self.valid_bytes as f64 * 100.0 / bytes as f64;
        let Some(h0) = self.first else {
            let reason = self
                .first_garbage_reason
                .or_else(|| {
                    self.truncated
                        .map(|(_, l, e)| format!("one truncated frame ({l} of {e} bytes)"))
                })
                .unwrap_or_default();
            return Err(InspectError::NotVdif {
                bytes,
                valid_percent,
                detail: format!("no VDIF frame found in {bytes} bytes; at offset 0: {reason}"),
                format: None,
            });
        };
        if (self.valid_bytes as f64) < MIN_VALID_FRACTION * bytes as f64 {
            let first = self.garbage.first().map_or(String::new(), |g| {
                format!("; first at offset {}: {}", g.offset, g.reason)
            });
            return Err(InspectError::NotVdif {
                bytes,
                valid_percent,
                detail: format!(
                    "{} frame(s) of {} bytes amid {} bytes of garbage in {} region(s){first}",
                    self.frames,
                    h0.frame_len(),
                    self.garbage_bytes,
                    self.garbage_regions
                ),
                format: None,
            });
        }
        if self.garbage_regions > MAX_LISTED as u64 {
            self.problems.push(format!(
                "{} more garbage region(s) not listed ({} bytes of garbage in all)",
                self.garbage_regions - MAX_LISTED as u64,
                self.garbage_bytes
            ));
        }
        Ok(summarise(self, h0))
    }
}

/// Inspect a stream. `fps_hint` supplies the frame rate when the file is too short to show it.
/// A stream that is not VDIF is named as the known format it is, if any
/// ([`crate::check::CheckedFrames`]).
pub fn inspect<R: Read>(
    reader: R,
    fps_hint: Option<FrameRate>,
    mut on_frame: impl FnMut(&VdifHeader, &[u8]),
) -> Result<InspectReport, InspectError> {
    let mut frames = checked::CheckedFrames::new(reader, fps_hint);
    for ev in frames.by_ref() {
        if let ScanEvent::Frame { header, bytes, .. } = &ev? {
            on_frame(header, &bytes[header.header_len()..]);
        }
    }
    frames.finish()
}

/// Notes on the frame rate and on header words the specification leaves zero.
fn notes_of(i: &Inspector, h0: &VdifHeader) -> Vec<String> {
    let mut notes = Vec::new();
    if i.tracker.fps().is_none() {
        notes.push(
            "frame rate unknown: no thread crosses a second boundary and the header states no sample rate (pass --fps); gaps and order within the second are still checked from the frame numbers"
                .into(),
        );
    }
    if let Some((offset, w)) = i.edv0.first {
        notes.push(format!(
            "{} EDV 0 frame(s) carry nonzero words 4-7, which EDV 0 leaves zero (first at offset {offset}: {:#010x} {:#010x} {:#010x} {:#010x}){}",
            i.edv0.frames,
            w[0],
            w[1],
            w[2],
            w[3],
            if i.edv0.mark5b {
                "; 0xabaddeed is the Mark5B sync word: Mark5B frames wrapped in VDIF headers?"
            } else {
                ""
            }
        ));
    }
    if !leap_table_covers(h0.ref_epoch, h0.seconds) {
        notes.push(crate::time::LEAP_TABLE_NOTE.into());
    }
    notes
}

/// The report of a scanned stream whose first frame is `h0`.
fn summarise(mut i: Inspector, h0: VdifHeader) -> InspectReport {
    let notes = notes_of(&i, &h0);
    let tracker = std::mem::take(&mut i.tracker);
    let mut problems = std::mem::take(&mut i.problems);
    if let Some(fps) = tracker.fps() {
        if tracker.max_frame >= fps.get() {
            problems.push(format!(
                "frame number {} exceeds the frame rate {fps}",
                tracker.max_frame
            ));
        }
    }
    if tracker.untracked > 0 {
        problems.push(format!(
            "{} frame(s) of more than {MAX_STREAMS} station/thread streams were not tracked",
            tracker.untracked
        ));
    }
    let fps = tracker.fps();
    let spf = h0.samples_per_frame();
    let mut per_thread: Vec<ThreadSummary> = tracker.streams.values().map(|s| s.summary.clone()).collect();
    let edges = check_edges(&mut per_thread, &h0, fps, &mut problems);
    let gaps = tracker.gaps + edges.runs;
    let mut stations: Vec<StationSummary> = Vec::new();
    for t in &per_thread {
        match stations.last_mut() {
            Some(s) if s.station_id == t.station_id => {
                s.frames += t.frames;
                s.threads.push(t.thread);
            }
            _ => stations.push(StationSummary {
                station: t.station_id.to_string(),
                station_id: t.station_id,
                frames: t.frames,
                threads: vec![t.thread],
            }),
        }
    }
    let mut threads: Vec<u16> = per_thread.iter().map(|t| t.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    let TimeSpan {
        start_utc,
        end_utc,
        duration_s,
        first_second_utc,
    } = time_span(&h0, &per_thread, fps, &mut problems);
    let invalid: u64 = per_thread.iter().map(|t| t.invalid).sum();
    let missing: u64 = per_thread.iter().map(|t| t.missing).sum();
    let ooo: u64 = per_thread.iter().map(|t| t.out_of_order).sum();
    if missing > 0 {
        problems.push(format!(
            "{missing} frames missing in {gaps} gap(s){}",
            if fps.is_none() {
                " (within seconds; the frame rate is unknown)"
            } else {
                ""
            }
        ));
    }
    if ooo > 0 {
        problems.push(format!("{ooo} frames out of time order or repeated"));
    }
    let streams = per_thread.len() as f64;
    InspectReport {
        format: None,
        file_bytes: i.report_bytes,
        frames: i.frames,
        frame_bytes_total: i.valid_bytes,
        station: Some(h0.station_id.to_string()),
        station_id: Some(h0.station_id),
        stations,
        threads,
        frame_bytes: Some(h0.frame_len()),
        header_bytes: Some(h0.header_len()),
        bits_per_sample: Some(h0.bits_per_sample),
        channels: Some(h0.channels()),
        complex: Some(h0.complex),
        edv: Some(if h0.legacy { 0 } else { h0.edv() }),
        legacy: Some(h0.legacy),
        samples_per_frame: Some(spf),
        frames_per_second: fps,
        frame_rate_source: tracker.rate.map(|r| r.source.to_string()),
        sample_rate_hz: fps.map(|r| f64::from(r) * spf as f64),
        data_rate_bps: fps.map(|r| f64::from(r) * h0.data_len() as f64 * 8.0 * streams),
        ref_epoch: Some(h0.ref_epoch),
        start_utc,
        first_second_utc,
        end_utc,
        duration_s,
        invalid_frames: invalid,
        missing_frames: missing,
        gaps,
        gap_list: tracker.gap_list,
        out_of_order_frames: ooo,
        garbage_bytes: i.garbage_bytes,
        garbage_regions: i.garbage_regions,
        garbage: i.garbage,
        truncated: i.truncated,
        per_thread,
        problems,
        notes,
    }
}

//! One pass over a VDIF stream that says what it is and what is wrong with it.

use std::collections::BTreeMap;
use std::io::{self, Read};

use serde::{Deserialize, Serialize};

use crate::header::VdifHeader;
use crate::scan::{FrameScanner, ScanEvent};
use crate::time::iso;

/// At most this many individual gaps / garbage regions are listed (all are counted).
pub const MAX_LISTED: usize = 20;
/// Frame stamps buffered while the frame rate is still unknown (bounds memory).
const MAX_PENDING: usize = 1 << 22;

/// A run of missing frames in one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
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

/// Per-thread frame accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// Frames found.
    pub frames: u64,
    /// Frames with the invalid bit set.
    pub invalid: u64,
    /// Frames missing between the first and the last (needs the frame rate).
    pub missing: u64,
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
}

/// Everything `evlbi vdif inspect` reports. Fields are `None` when the file cannot tell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectReport {
    /// Bytes read.
    pub file_bytes: u64,
    /// Total frames found.
    pub frames: u64,
    /// Station id as text ("Ef" or a number).
    pub station: Option<String>,
    /// Station id as a number.
    pub station_id: Option<u16>,
    /// Sorted thread ids.
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
    pub frames_per_second: Option<u32>,
    /// "header" (EDV 1/3 sample rate), "frame numbers" (a second boundary was seen) or "given".
    pub frame_rate_source: Option<String>,
    /// Sample rate per channel, Hz.
    pub sample_rate_hz: Option<f64>,
    /// Data rate (sample bits of all threads), bits per second.
    pub data_rate_bps: Option<f64>,
    /// Reference epoch of the first frame.
    pub ref_epoch: Option<u8>,
    /// UTC time of the earliest frame (ISO 8601).
    pub start_utc: Option<String>,
    /// UTC time just after the latest frame.
    pub end_utc: Option<String>,
    /// Seconds of data spanned per thread (first to last frame, inclusive).
    pub duration_s: Option<f64>,
    /// Frames with the invalid bit set.
    pub invalid_frames: u64,
    /// Frames missing inside the span, all threads.
    pub missing_frames: u64,
    /// Number of gaps (runs of missing frames).
    pub gaps: u64,
    /// The first gaps.
    pub gap_list: Vec<Gap>,
    /// Frames out of time order.
    pub out_of_order_frames: u64,
    /// Bytes that were not frames.
    pub garbage_bytes: u64,
    /// The first garbage regions.
    pub garbage: Vec<GarbageRegion>,
    /// Incomplete frame at the end: (offset, bytes present, bytes expected).
    pub truncated: Option<(u64, u64, u64)>,
    /// Per thread.
    pub per_thread: BTreeMap<u16, ThreadSummary>,
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
    /// No frame at all.
    #[error("no VDIF frame found in {bytes} bytes; at offset 0: {reason}")]
    NotVdif {
        /// Bytes read.
        bytes: u64,
        /// Why the first bytes are not a VDIF header.
        reason: String,
    },
}

#[derive(Default)]
struct Tracker {
    fps: Option<u32>,
    source: Option<String>,
    max_frame: u32,
    pending: Vec<(u16, u32, u32)>,
    threads: BTreeMap<u16, (ThreadSummary, Option<u64>)>,
    gaps: u64,
    gap_list: Vec<Gap>,
}

impl Tracker {
    fn count(&mut self, h: &VdifHeader) {
        let (thread, now) = (h.thread_id, (h.seconds, h.frame_number));
        let t = &mut self.threads.entry(thread).or_default().0;
        let crossed = t.frames > 0 && now.0 > t.last.0;
        if t.frames == 0 {
            (t.first, t.earliest, t.latest) = (now, now, now);
        }
        t.frames += 1;
        t.last = now;
        t.earliest = t.earliest.min(now);
        t.latest = t.latest.max(now);
        t.invalid += u64::from(h.invalid);
        self.max_frame = self.max_frame.max(now.1);
        if self.fps.is_none() {
            // The rate is learnt when a thread crosses a second boundary: all frames of the
            // earlier second have then been seen (frames are in time order within a thread).
            if !crossed && self.pending.len() < MAX_PENDING {
                self.pending.push((thread, now.0, now.1));
                return;
            }
            self.fps = Some(self.max_frame + 1);
            self.source = Some("frame numbers".into());
            for (t, s, f) in std::mem::take(&mut self.pending) {
                self.advance(t, s, f);
            }
        }
        self.advance(thread, now.0, now.1);
    }

    /// Order and gap accounting of one frame once the frame rate is known.
    fn advance(&mut self, thread: u16, sec: u32, frame: u32) {
        let fps = u64::from(self.fps.unwrap_or(1));
        let idx = u64::from(sec) * fps + u64::from(frame);
        let (t, last) = self.threads.entry(thread).or_default();
        match *last {
            None => {}
            Some(l) if idx == l + 1 => {}
            Some(l) if idx > l + 1 => {
                let missing = idx - l - 1;
                t.missing += missing;
                self.gaps += 1;
                if self.gap_list.len() < MAX_LISTED {
                    self.gap_list.push(Gap {
                        thread,
                        after: ((l / fps) as u32, (l % fps) as u32),
                        missing,
                    });
                }
            }
            Some(_) => {
                t.out_of_order += 1;
                return;
            }
        }
        *last = Some(idx);
    }
}

/// Inspect a stream. `fps_hint` supplies the frame rate when the file is too short to show it.
pub fn inspect<R: Read>(
    reader: R,
    fps_hint: Option<u32>,
    mut on_frame: impl FnMut(&VdifHeader, &[u8]),
) -> Result<InspectReport, InspectError> {
    let mut tracker = Tracker::default();
    if let Some(f) = fps_hint {
        tracker.fps = Some(f);
        tracker.source = Some("given".into());
    }
    let mut first: Option<VdifHeader> = None;
    let mut report_bytes = 0u64;
    let mut frames = 0u64;
    let mut garbage = Vec::new();
    let mut garbage_bytes = 0u64;
    let mut truncated = None;
    let mut problems = Vec::new();
    let mut first_garbage_reason = None;
    for ev in FrameScanner::new(reader) {
        match ev? {
            ScanEvent::Frame { header, bytes, offset } => {
                report_bytes = report_bytes.max(offset + bytes.len() as u64);
                if first.is_none() {
                    first = Some(header);
                    if tracker.fps.is_none() {
                        if let Some(rate) = header.header_sample_rate_hz() {
                            let fps = rate / header.samples_per_frame().max(1) as f64;
                            if fps >= 1.0 && fps.fract() == 0.0 {
                                tracker.fps = Some(fps as u32);
                                tracker.source = Some("header".into());
                            }
                        }
                    }
                }
                frames += 1;
                tracker.count(&header);
                on_frame(&header, &bytes[header.header_len()..]);
            }
            ScanEvent::Garbage { offset, len, reason } => {
                report_bytes = report_bytes.max(offset + len);
                garbage_bytes += len;
                problems.push(format!("offset {offset}: {len} bytes of garbage skipped ({reason})"));
                if first_garbage_reason.is_none() && offset == 0 {
                    first_garbage_reason = Some(reason.clone());
                }
                if garbage.len() < MAX_LISTED {
                    garbage.push(GarbageRegion { offset, len, reason });
                }
            }
            ScanEvent::Truncated { offset, len, expected } => {
                report_bytes = report_bytes.max(offset + len);
                problems.push(format!(
                    "offset {offset}: last frame truncated ({len} of {expected} bytes)"
                ));
                truncated = Some((offset, len, expected));
            }
        }
    }
    if report_bytes == 0 {
        return Err(InspectError::Empty);
    }
    let Some(h0) = first else {
        return Err(InspectError::NotVdif {
            bytes: report_bytes,
            reason: first_garbage_reason
                .or_else(|| truncated.map(|(_, l, e)| format!("one truncated frame ({l} of {e} bytes)")))
                .unwrap_or_default(),
        });
    };
    let scanned = Scanned {
        report_bytes,
        frames,
        garbage,
        garbage_bytes,
        truncated,
        problems,
    };
    Ok(summarise(tracker, h0, scanned))
}

/// What the scan of a stream found besides the frames' order: sizes, garbage, truncation.
struct Scanned {
    report_bytes: u64,
    frames: u64,
    garbage: Vec<GarbageRegion>,
    garbage_bytes: u64,
    truncated: Option<(u64, u64, u64)>,
    problems: Vec<String>,
}

/// The report of a scanned stream whose first frame is `h0`.
fn summarise(tracker: Tracker, h0: VdifHeader, scanned: Scanned) -> InspectReport {
    let Scanned {
        report_bytes,
        frames,
        garbage,
        garbage_bytes,
        truncated,
        mut problems,
    } = scanned;
    let mut notes = Vec::new();
    if tracker.fps.is_none() && !tracker.pending.is_empty() {
        notes.push(
            "frame rate unknown: the file spans less than one second and its header states no sample rate (pass --fps)"
                .into(),
        );
    }
    if let Some(fps) = tracker.fps {
        if tracker.max_frame >= fps {
            problems.push(format!(
                "frame number {} exceeds the frame rate {fps}/s",
                tracker.max_frame
            ));
        }
    }
    let fps = tracker.fps;
    let spf = h0.samples_per_frame();
    let per_thread: BTreeMap<u16, ThreadSummary> = tracker.threads.iter().map(|(k, (t, _))| (*k, t.clone())).collect();
    let nthreads = per_thread.len() as f64;
    let (start_utc, end_utc, duration_s) = time_span(&h0, &per_thread, fps, &mut problems);
    let invalid: u64 = per_thread.values().map(|t| t.invalid).sum();
    let missing: u64 = per_thread.values().map(|t| t.missing).sum();
    let ooo: u64 = per_thread.values().map(|t| t.out_of_order).sum();
    if missing > 0 {
        problems.push(format!("{missing} frames missing in {} gap(s)", tracker.gaps));
    }
    if ooo > 0 {
        problems.push(format!("{ooo} frames out of time order or repeated"));
    }
    InspectReport {
        file_bytes: report_bytes,
        frames,
        station: Some(h0.station_name()),
        station_id: Some(h0.station_id),
        threads: per_thread.keys().copied().collect(),
        frame_bytes: Some(h0.frame_len()),
        header_bytes: Some(h0.header_len()),
        bits_per_sample: Some(h0.bits_per_sample),
        channels: Some(h0.channels()),
        complex: Some(h0.complex),
        edv: Some(if h0.legacy { 0 } else { h0.edv() }),
        legacy: Some(h0.legacy),
        samples_per_frame: Some(spf),
        frames_per_second: fps,
        frame_rate_source: tracker.source.clone().filter(|_| fps.is_some()),
        sample_rate_hz: fps.map(|r| f64::from(r) * spf as f64),
        data_rate_bps: fps.map(|r| f64::from(r) * h0.data_len() as f64 * 8.0 * nthreads),
        ref_epoch: Some(h0.ref_epoch),
        start_utc,
        end_utc,
        duration_s,
        invalid_frames: invalid,
        missing_frames: missing,
        gaps: tracker.gaps,
        gap_list: tracker.gap_list,
        out_of_order_frames: ooo,
        garbage_bytes,
        garbage,
        truncated,
        per_thread,
        problems,
        notes,
    }
}

/// First and last sample time (ISO) and duration of the threads whose clock agrees with the
/// first frame; threads far from it are reported in `problems` and left out of the span.
fn time_span(
    h0: &VdifHeader,
    per_thread: &BTreeMap<u16, ThreadSummary>,
    fps: Option<u32>,
    problems: &mut Vec<String>,
) -> (Option<String>, Option<String>, Option<f64>) {
    // Times are taken relative to the first frame in the file (as baseband does); a thread
    // whose clock is far from it is a fault of the recorder, reported, and left out of the span.
    for (id, t) in per_thread {
        if t.first.0.abs_diff(h0.seconds) > MAX_TIME_SPREAD_S {
            problems.push(format!(
                "thread {id}: time {} is {} s away from the first frame ({})",
                iso(h0.ref_epoch, t.first.0, 0.0),
                i64::from(t.first.0) - i64::from(h0.seconds),
                iso(h0.ref_epoch, h0.seconds, 0.0)
            ));
        }
    }
    let (start, end) = per_thread
        .values()
        .filter(|t| t.first.0.abs_diff(h0.seconds) <= MAX_TIME_SPREAD_S)
        .fold((None::<(u32, u32)>, None::<(u32, u32)>), |(s, e), t| {
            (
                Some(s.map_or(t.earliest, |s| s.min(t.earliest))),
                Some(e.map_or(t.latest, |e| e.max(t.latest))),
            )
        });
    let frac = |(_, f): (u32, u32)| fps.map(|r| f64::from(f) / f64::from(r));
    let start_utc = start.and_then(|s| {
        if s.1 == 0 {
            Some(iso(h0.ref_epoch, s.0, 0.0))
        } else {
            frac(s).map(|x| iso(h0.ref_epoch, s.0, x))
        }
    });
    let (end_utc, duration_s) = match (start, end, fps) {
        (Some(s), Some(e), Some(r)) => {
            let after = u64::from(e.0) * u64::from(r) + u64::from(e.1) + 1;
            let first = u64::from(s.0) * u64::from(r) + u64::from(s.1);
            let secs = (after / u64::from(r)) as u32;
            (
                Some(iso(h0.ref_epoch, secs, (after % u64::from(r)) as f64 / f64::from(r))),
                Some((after - first) as f64 / f64::from(r)),
            )
        }
        _ => (None, None),
    };
    (start_utc, end_utc, duration_s)
}

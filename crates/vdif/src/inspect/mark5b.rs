//! One pass over a Mark5B stream: what `vdif inspect` says of VDIF, where it applies. Mark5B
//! has one stream (no station id, no threads, no invalid bit) and a time code that names the day
//! modulo 1000 (its full date is the one nearest a reference the caller gives: the clock).
//! Frames are found by [`Mark5bFrames`] (sync word, header that parses); bytes between them are
//! garbage. Gaps are counted by frame number within a second and, once the frame rate is known
//! (given, or learned at the first second's turn as its highest frame number + 1), across
//! seconds. Memory: two frames and the first [`MAX_LISTED`] gaps and garbage regions.

use std::io::Read;

use super::{Gap, GarbageRegion, InspectError, InspectReport, MAX_LISTED};
use crate::formats::MARK5B_FRAME_LEN;
use crate::mark5b::{Mark5bHeader, MARK5B_DATA_LEN, MARK5B_HEADER_LEN};
use crate::mark5b_file::{Mark5bEvent, Mark5bFrames};
use crate::rate::FrameRate;
use crate::station::StationId;

/// The `format` of a Mark5B report.
pub const MARK5B_FORMAT: &str = "mark5b";

/// The running account of a pass.
#[derive(Default)]
struct Account {
    offset: u64,
    frames: u64,
    first: Option<Mark5bHeader>,
    last: Option<Mark5bHeader>,
    /// Earliest and latest by time (index at the rate, or within the first second).
    earliest: Option<Mark5bHeader>,
    latest: Option<Mark5bHeader>,
    /// Highest frame number of the first second (what the rate is learned from).
    top: u16,
    fps: Option<FrameRate>,
    learned: bool,
    missing: u64,
    gaps: u64,
    gap_list: Vec<Gap>,
    out_of_order: u64,
    garbage_bytes: u64,
    garbage: Vec<GarbageRegion>,
    garbage_regions: u64,
    problems: Vec<String>,
}

impl Account {
    /// The frame after `prev`'s place: how far on (1 = next), when it can be told.
    fn step(&mut self, prev: &Mark5bHeader, h: &Mark5bHeader) -> Option<i128> {
        if let Some(fps) = self.fps {
            return Some(i128::from(h.frame_index(fps)) - i128::from(prev.frame_index(fps)));
        }
        if h.cycle_seconds() == prev.cycle_seconds() {
            self.top = self.top.max(h.frame_number);
            return Some(i128::from(h.frame_number) - i128::from(prev.frame_number));
        }
        if h.cycle_seconds() == prev.cycle_seconds() + 1 {
            // The first second's turn: its highest frame number + 1 frames a second.
            self.fps = FrameRate::new(u32::from(self.top.max(prev.frame_number)) + 1).ok();
            self.learned = true;
            return self
                .fps
                .map(|f| i128::from(h.frame_index(f)) - i128::from(prev.frame_index(f)));
        }
        None
    }

    fn frame(&mut self, h: Mark5bHeader) {
        if let Some(prev) = self.last {
            match self.step(&prev, &h) {
                Some(1) => {}
                Some(n) if n > 1 => {
                    let missing = (n - 1) as u64;
                    self.missing += missing;
                    self.gaps += 1;
                    if self.gap_list.len() < MAX_LISTED {
                        self.gap_list.push(Gap {
                            station_id: StationId(0),
                            thread: 0,
                            after: (prev.cycle_seconds() as u32, u32::from(prev.frame_number)),
                            missing,
                        });
                    }
                }
                Some(_) => self.out_of_order += 1,
                None => self.problems.push(format!(
                    "offset {}: time jumps from second {} to {} of the time code before the frame rate is known",
                    self.offset,
                    prev.cycle_seconds(),
                    h.cycle_seconds()
                )),
            }
        } else {
            self.top = h.frame_number;
        }
        let later = |a: &Mark5bHeader, b: &Mark5bHeader| {
            (a.cycle_seconds(), a.frame_number) > (b.cycle_seconds(), b.frame_number)
        };
        if self.latest.is_none_or(|l| later(&h, &l)) {
            self.latest = Some(h);
        }
        if self.earliest.is_none_or(|e| later(&e, &h)) {
            self.earliest = Some(h);
        }
        self.first.get_or_insert(h);
        self.last = Some(h);
        self.frames += 1;
        self.offset += MARK5B_FRAME_LEN as u64;
    }

    fn garbage(&mut self, len: u64) {
        self.garbage_bytes += len;
        self.garbage_regions += 1;
        if self.garbage.len() < MAX_LISTED {
            let reason = "no Mark5B frame (sync word and header) starts here".to_string();
            self.problems.push(format!(
                "offset {}: {len} bytes of garbage skipped ({reason})",
                self.offset
            ));
            self.garbage.push(GarbageRegion {
                offset: self.offset,
                len,
                reason,
            });
        }
        self.offset += len;
    }
}

/// Inspect the Mark5B frames of `reader`: `fps_hint`, the frame rate when given; the time code's
/// day resolved nearest `reference_unix_s` (the clock, read by the caller).
pub fn inspect_mark5b<R: Read>(
    reader: R,
    fps_hint: Option<FrameRate>,
    reference_unix_s: i64,
) -> Result<InspectReport, InspectError> {
    let mut a = Account {
        fps: fps_hint,
        ..Account::default()
    };
    for ev in Mark5bFrames::new(reader) {
        match ev? {
            Mark5bEvent::Frame(f) => match Mark5bHeader::parse(&f) {
                Ok(h) => a.frame(h),
                Err(_) => a.garbage(f.len() as u64),
            },
            Mark5bEvent::Garbage(n) => a.garbage(n),
        }
    }
    Ok(report(a, reference_unix_s))
}

/// UTC of frame `h` at `fps` (its day nearest the reference), ISO 8601; `end`: just after it.
fn utc(h: &Mark5bHeader, fps: FrameRate, reference_unix_s: i64, end: bool) -> Option<String> {
    let ns = h.unix_nanos(fps, reference_unix_s)? + if end { 1_000_000_000 / u64::from(fps.get()) } else { 0 };
    let (epoch, seconds) = crate::time::to_epoch((ns / 1_000_000_000) as i64)?;
    Some(crate::time::iso(epoch, seconds, (ns % 1_000_000_000) as f64 / 1e9))
}

fn report(a: Account, reference_unix_s: i64) -> InspectReport {
    let fps = a.fps;
    let mut notes = vec![
        "Mark5B: one stream (no station id or threads); its time code names the day modulo 1000, taken here as the one nearest today".to_string(),
    ];
    if fps.is_none() && a.frames > 0 {
        notes.push("frame rate unknown: the frames do not cross a second (give --fps)".into());
    }
    let mut problems = a.problems;
    if a.frames == 0 {
        problems.push("no Mark5B frame found".into());
    }
    if a.missing > 0 {
        problems.push(format!("{} frames missing in {} gap(s)", a.missing, a.gaps));
    }
    if a.out_of_order > 0 {
        problems.push(format!("{} frames out of time order or repeated", a.out_of_order));
    }
    let span = |f: FrameRate| match (a.earliest, a.latest) {
        (Some(e), Some(l)) => Some((l.frame_index(f) - e.frame_index(f) + 1) as f64 / f64::from(f)),
        _ => None,
    };
    let first_second = a.earliest.and_then(|e| {
        let unix = e.unix_nanos(FrameRate::new(1).ok()?, reference_unix_s)? / 1_000_000_000;
        let (epoch, seconds) = crate::time::to_epoch(unix as i64)?;
        Some(crate::time::iso(epoch, seconds, 0.0))
    });
    InspectReport {
        format: Some(MARK5B_FORMAT.into()),
        file_bytes: a.offset,
        frames: a.frames,
        frame_bytes_total: a.frames * MARK5B_FRAME_LEN as u64,
        station: None,
        station_id: None,
        stations: Vec::new(),
        threads: Vec::new(),
        frame_bytes: (a.frames > 0).then_some(MARK5B_FRAME_LEN),
        header_bytes: (a.frames > 0).then_some(MARK5B_HEADER_LEN),
        bits_per_sample: None,
        channels: None,
        complex: None,
        edv: None,
        legacy: None,
        samples_per_frame: None,
        frames_per_second: fps,
        frame_rate_source: fps.map(|_| if a.learned { "frame numbers" } else { "given" }.to_string()),
        sample_rate_hz: None,
        data_rate_bps: fps.map(|f| f64::from(f) * (MARK5B_DATA_LEN * 8) as f64),
        ref_epoch: None,
        start_utc: fps.and_then(|f| utc(a.earliest.as_ref()?, f, reference_unix_s, false)),
        first_second_utc: first_second,
        end_utc: fps.and_then(|f| utc(a.latest.as_ref()?, f, reference_unix_s, true)),
        duration_s: fps.and_then(span),
        invalid_frames: 0,
        missing_frames: a.missing,
        gaps: a.gaps,
        gap_list: a.gap_list,
        out_of_order_frames: a.out_of_order,
        garbage_bytes: a.garbage_bytes,
        garbage_regions: a.garbage_regions,
        garbage: a.garbage,
        truncated: None,
        per_thread: Vec::new(),
        problems,
        notes,
    }
}

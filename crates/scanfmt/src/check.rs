//! What a recording holds, from a few samples of it — jive5ab's `scan_check?`, without reading
//! the whole scan: the data format, the threads, the first frame's time, the span to the last
//! frame, the data rate and how many bytes are missing between them.
//!
//! The reader ([`recording`'s check]) hands over samples: the first megabyte of the scan, the
//! last, and one placed where the first second boundary should fall ([`Ends::boundary_probe`]).
//! From them:
//! - frames are believed only where consecutive headers agree (a frame starts where the last
//!   one ended, same length, epoch and station);
//! - the frame rate per thread comes from the header where its extended data version states a
//!   sample rate, else from the frame number just before a second boundary (frames are
//!   numbered from 0 within each second, VDIF 1.1.1 §3), the boundary found in a sample;
//!   without a boundary the rate is unknown, as jive5ab says (`N.****s : ?`);
//! - missing bytes are what the first and last frames' times say the scan should hold, less
//!   what it holds between them: `(t_last − t_first + one frame period)` worth of frames of
//!   every thread, against `offset_last + frame − offset_first` (jive5ab's `scan_check_fn`).
//!
//! [`recording`'s check]: ../../recording/check/index.html

use std::collections::BTreeSet;

use vdif::{FrameRate, RateSource, SourcedRate, VdifHeader};

/// A piece of the scan: its offset in the scan and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// Offset of `bytes[0]` in the scan.
    pub offset: u64,
    /// The bytes.
    pub bytes: &'a [u8],
}

/// A frame found in a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Found {
    offset: u64,
    header: VdifHeader,
}

/// Whether `b` continues a stream of frames shaped like `a` (jive5ab's "simple VDIF": every
/// thread the same shape).
fn same_shape(a: &VdifHeader, b: &VdifHeader) -> bool {
    a.frame_len_units == b.frame_len_units
        && a.ref_epoch == b.ref_epoch
        && a.station_id == b.station_id
        && a.legacy == b.legacy
        && a.complex == b.complex
        && a.bits_per_sample == b.bits_per_sample
        && a.log2_channels == b.log2_channels
        && a.seconds.abs_diff(b.seconds) <= 2
}

/// The frames of `s`: from the first offset where two consecutive headers agree, frame after
/// frame while they go on agreeing (a break is searched past, byte by byte).
fn frames(s: Sample<'_>) -> Vec<Found> {
    let b = s.bytes;
    let parse = |at: usize| b.get(at..).and_then(|x| VdifHeader::parse_valid(x).ok());
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut shape: Option<VdifHeader> = None;
    while at + 32 <= b.len() {
        let Some(h) = parse(at) else {
            at += 1;
            continue;
        };
        let len = h.frame_len();
        let fits_shape = shape.is_none_or(|s| same_shape(&s, &h));
        // The next frame agrees, or this one ends the sample exactly (or is the sample's last
        // whole frame after believed ones).
        let next = parse(at + len);
        let believed = fits_shape
            && match next {
                Some(n) => same_shape(&h, &n),
                None => shape.is_some() && at + len <= b.len(),
            };
        if !believed || at + len > b.len() {
            at += 1;
            continue;
        }
        shape.get_or_insert(h);
        out.push(Found {
            offset: s.offset + at as u64,
            header: h,
        });
        at += len;
    }
    out
}

/// The first and last frames of a scan and what the samples around them show.
#[derive(Debug, Clone)]
pub struct Ends {
    first: Found,
    last: Found,
    threads: BTreeSet<u16>,
    /// Highest frame number seen of any thread (a lower bound of the frames per second).
    max_number: u32,
    /// Frames per second per thread when a boundary or the header said so.
    fps: Option<SourcedRate>,
    /// Frames from the first frame to the end of its frame period (the first frame of the
    /// next period found in the first sample), when the sample shows it: a recording that
    /// starts or stops between the threads of one period holds only part of it.
    first_period: Option<u64>,
    /// Frames from the start of the last frame's period to the last frame, when shown.
    last_period: Option<u64>,
}

/// A frame's place in time: second and number within it.
fn period(f: &Found) -> (i64, u32) {
    (f.header.unix_seconds(), f.header.frame_number)
}

/// Frames per second per thread from a sample's frames: the number before a second boundary
/// of one thread, plus one.
fn boundary_rate(found: &[Found]) -> Option<FrameRate> {
    let mut best: Option<u32> = None;
    for (i, a) in found.iter().enumerate() {
        // The next frame of the same thread.
        let Some(b) = found[i + 1..].iter().find(|b| b.header.thread_id == a.header.thread_id) else {
            continue;
        };
        if b.header.unix_seconds() == a.header.unix_seconds() + 1 && b.header.frame_number == 0 {
            best = best.max(a.header.frame_number.checked_add(1));
        }
    }
    best.and_then(|n| FrameRate::new(n).ok())
}

impl Ends {
    /// From the scan's first and last samples; `None` when either holds no believable VDIF.
    pub fn new(first: Sample<'_>, last: Sample<'_>) -> Option<Ends> {
        let head = frames(first);
        let tail = frames(last);
        let (f, l) = (*head.first()?, *tail.last()?);
        if !same_shape(&f.header, &l.header) && f.header.ref_epoch != l.header.ref_epoch {
            return None;
        }
        let all = head.iter().chain(&tail);
        let threads = all.clone().map(|x| x.header.thread_id).collect();
        let max_number = all.map(|x| x.header.frame_number).max().unwrap_or(0);
        let fps = SourcedRate::most_believable([
            (RateSource::Header, f.header.frame_rate()),
            (RateSource::FrameNumbers, boundary_rate(&head).max(boundary_rate(&tail))),
        ]);
        let frame = f.header.frame_len() as u64;
        let first_period = head
            .iter()
            .find(|x| period(x) != period(&f))
            .map(|n| (n.offset - f.offset) / frame);
        let last_period = tail
            .iter()
            .rev()
            .find(|x| period(x) != period(&l))
            .map(|p| (l.offset - p.offset) / frame);
        Some(Ends {
            first: f,
            last: l,
            threads,
            max_number,
            fps,
            first_period,
            last_period,
        })
    }

    /// Frames of all threads per second if nothing between the ends were lost.
    fn frames_between(&self) -> u64 {
        (self.last.offset - self.first.offset) / self.first.header.frame_len() as u64
    }

    /// Where in the scan the first second boundary after the first frame falls if no frame
    /// before it was lost — a sample around it shows the frame rate — and `None` when the
    /// rate is known or the scan ends within its first second.
    pub fn boundary_probe(&self) -> Option<u64> {
        let dt = self.last.header.unix_seconds() - self.first.header.unix_seconds();
        if self.fps.is_some() || dt < 1 {
            return None;
        }
        let t = self.threads.len().max(1) as u64;
        // Frames per thread per second, lossless: (frames between / threads − Δnumber) / Δt.
        let per_thread = self.frames_between() / t;
        let dn = i64::from(self.last.header.frame_number) - i64::from(self.first.header.frame_number);
        let est = (per_thread as i64 - dn) / dt;
        let left = u64::try_from(est - i64::from(self.first.header.frame_number)).ok()?;
        Some(self.first.offset + left * t * self.first.header.frame_len() as u64)
    }

    /// Whether the frame rate is known yet.
    pub fn knows_rate(&self) -> bool {
        self.fps.is_some()
    }

    /// For a search of the first second boundary when the probe missed it (frames lost before
    /// it move it): `Some(true)` when the sample's first frame is still in the first frame's
    /// second (the boundary lies after it), `Some(false)` when it is later, `None` without a
    /// believable frame in the sample.
    pub fn in_first_second(&self, s: Sample<'_>) -> Option<bool> {
        self.in_second(s, 0)
    }

    /// [`Ends::in_first_second`] for the boundary `k` seconds later (frames lost across the
    /// first boundary hide it: the next may be whole).
    pub fn in_second(&self, s: Sample<'_>, k: u64) -> Option<bool> {
        let f = frames(s);
        let x = f.first()?;
        let k = i64::try_from(k).unwrap_or(i64::MAX);
        Some(x.header.unix_seconds() <= self.first.header.unix_seconds().saturating_add(k))
    }

    /// Whole seconds from the first frame's to the last frame's: the boundaries in between.
    pub fn seconds_spanned(&self) -> u64 {
        let dt = self
            .last
            .header
            .unix_seconds()
            .saturating_sub(self.first.header.unix_seconds());
        u64::try_from(dt).unwrap_or(0)
    }

    /// Take the frame rate from elsewhere (a check of the whole scan) when the samples did not
    /// show it.
    pub fn assume_rate(&mut self, frames_per_second: FrameRate) {
        SourcedRate::offer(&mut self.fps, RateSource::FrameNumbers, Some(frames_per_second));
    }

    /// Take in more samples (a boundary probe, samples between the ends).
    pub fn add(&mut self, s: Sample<'_>) {
        let found = frames(s);
        if let Some(m) = found.iter().map(|x| x.header.frame_number).max() {
            self.max_number = self.max_number.max(m);
        }
        self.threads.extend(found.iter().map(|x| x.header.thread_id));
        SourcedRate::offer(&mut self.fps, RateSource::FrameNumbers, boundary_rate(&found));
    }

    /// What the samples say.
    pub fn check(&self) -> ScanCheck {
        let h = &self.first.header;
        let frame = h.frame_len() as u64;
        let tracks_per_thread = h.channels() * u32::from(h.bits_per_sample) * if h.complex { 2 } else { 1 };
        let threads = self.threads.len().max(1) as u32;
        // A rate that contradicts a frame number seen is no rate.
        let fps = self.fps.map(|r| r.fps).filter(|&n| n.get() > self.max_number);
        let time = |f: &Found, n: Option<FrameRate>| VexTime {
            unix: f.header.unix_seconds(),
            frame: f.header.frame_number,
            per_second: n,
        };
        let first = time(&self.first, fps);
        let last = time(&self.last, fps);
        let held = (self.last.offset + frame - self.first.offset) as i64;
        let missing_bytes = fps.map(|n| {
            // Frame periods from the first frame to the last, plus the last one itself, every
            // thread in each (jive5ab's scan_check_fn) — but of the first and last periods only
            // the threads the recording could hold: one that starts or stops between the
            // threads of a period is not missing the others (jive5ab says ± a frame there,
            // which the FS logs as 5k 602).
            let periods = (last.unix - first.unix) * i64::from(n) + i64::from(last.frame) - i64::from(first.frame) + 1;
            if periods < 2 {
                return 0;
            }
            let t = u64::from(threads);
            let lead = t - self.first_period.map_or(t, |c| c.min(t));
            let trail = t - self.last_period.map_or(t, |c| c.min(t));
            let expected = periods * i64::from(threads) - (lead + trail) as i64;
            expected * frame as i64 - held
        });
        ScanCheck {
            legacy: h.legacy,
            complex: h.complex,
            tracks: tracks_per_thread * threads,
            threads: self.threads.iter().copied().collect(),
            start: first,
            end: last,
            track_rate_bps: fps.map(|n| u64::from(n) * h.data_len() as u64 * 8 / u64::from(tracks_per_thread.max(1))),
            frames_per_second: fps,
            missing_bytes,
            frame_bytes: frame as u32,
            start_offset: self.first.offset,
            end_offset: self.last.offset,
        }
    }
}

/// A frame's time as jive5ab prints it: `2026y331d01h56m43.1234s`, or `….***s` when the
/// frame rate, and so the part of the second, is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VexTime {
    /// Whole seconds since 1970 (POSIX).
    pub unix: i64,
    /// The frame's number within its second.
    pub frame: u32,
    /// Frames per second per thread, if known.
    pub per_second: Option<FrameRate>,
}

impl VexTime {
    /// Seconds since 1970 with the fraction, when known.
    pub fn seconds(&self) -> Option<f64> {
        self.per_second
            .map(|n| self.unix as f64 + f64::from(self.frame) / f64::from(n))
    }
}

/// What `scan_check?` reports of a VDIF scan.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanCheck {
    /// Legacy (16-byte) headers.
    pub legacy: bool,
    /// Complex samples.
    pub complex: bool,
    /// jive5ab's "tracks": channels × bits × (2 if complex) per thread, times the threads seen.
    pub tracks: u32,
    /// The thread ids seen in the samples.
    pub threads: Vec<u16>,
    /// The first frame's time.
    pub start: VexTime,
    /// The last frame's time.
    pub end: VexTime,
    /// Bits per second of one track, when the frame rate is known.
    pub track_rate_bps: Option<u64>,
    /// Frames per second per thread, when known.
    pub frames_per_second: Option<FrameRate>,
    /// Bytes missing between the first and the last frame (negative: more than the times
    /// say), when the rate is known.
    pub missing_bytes: Option<i64>,
    /// Frame length, bytes.
    pub frame_bytes: u32,
    /// Offsets of the first and last frames in the scan.
    pub start_offset: u64,
    /// See above.
    pub end_offset: u64,
}

impl ScanCheck {
    /// One scan recorded as several recordings (jive5ab's data streams, one per thread or
    /// station): its tracks and threads all of theirs, from the earliest first frame to the
    /// latest last one, the rate and frame size when they all agree, the missing bytes summed.
    pub fn combine(parts: &[ScanCheck]) -> Option<ScanCheck> {
        let first = parts.first()?;
        let same = |f: &dyn Fn(&ScanCheck) -> Option<u64>| {
            let v = f(first);
            parts.iter().all(|p| f(p) == v).then_some(v).flatten()
        };
        let fps = same(&|p| p.frames_per_second.map(u64::from))
            .and_then(|n| first.frames_per_second.filter(|r| u64::from(*r) == n));
        let order = |t: &VexTime| (t.unix, t.frame);
        let start = parts.iter().map(|p| p.start).min_by_key(order)?;
        let end = parts.iter().map(|p| p.end).max_by_key(order)?;
        let mut threads: Vec<u16> = parts.iter().flat_map(|p| p.threads.iter().copied()).collect();
        threads.sort_unstable();
        threads.dedup();
        Some(ScanCheck {
            legacy: first.legacy,
            complex: first.complex,
            tracks: parts.iter().map(|p| p.tracks).sum(),
            threads,
            start: VexTime {
                per_second: fps,
                ..start
            },
            end: VexTime { per_second: fps, ..end },
            track_rate_bps: same(&|p| p.track_rate_bps),
            frames_per_second: fps,
            missing_bytes: parts.iter().map(|p| p.missing_bytes).sum(),
            frame_bytes: first.frame_bytes,
            start_offset: 0,
            end_offset: parts.iter().map(|p| p.end_offset).sum(),
        })
    }

    /// Bytes per second the scan was recorded at (every thread, headers included), when known.
    pub fn bytes_per_second(&self) -> Option<u64> {
        self.frames_per_second
            .map(|n| u64::from(n) * self.threads.len().max(1) as u64 * u64::from(self.frame_bytes))
    }

    /// Seconds from the first frame to the last, when the rate is known.
    pub fn duration_s(&self) -> Option<f64> {
        // From the integer parts: two 1.7e9-second times subtracted as floats lose 1e-7.
        let n = f64::from(self.frames_per_second?);
        let frames = f64::from(self.end.frame) - f64::from(self.start.frame);
        Some((self.end.unix - self.start.unix) as f64 + frames / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: usize = 1032;

    /// Frames of `threads` interleaved threads at `fps` per thread from second 100, `skip`
    /// frames (by index) left out.
    fn stream(threads: u16, fps: u32, seconds: u32, skip: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        for s in 0..seconds {
            for n in 0..fps {
                for t in 0..threads {
                    if !skip.contains(&i) {
                        let h = VdifHeader {
                            invalid: false,
                            legacy: false,
                            seconds: 100 + s,
                            ref_epoch: 52,
                            unassigned: 0,
                            frame_number: n,
                            version: 0,
                            log2_channels: 4,
                            frame_len_units: (FRAME / 8) as u32,
                            complex: false,
                            bits_per_sample: 2,
                            thread_id: t,
                            station_id: vdif::StationId(u16::from_be_bytes(*b"Ef")),
                            extended: [0; 4],
                        };
                        out.extend(h.to_bytes().unwrap());
                        out.resize(out.len() + FRAME - 32, 0x55);
                    }
                    i += 1;
                }
            }
        }
        out
    }

    fn check(scan: &[u8], sample: usize) -> ScanCheck {
        let len = scan.len() as u64;
        let first = Sample {
            offset: 0,
            bytes: &scan[..sample.min(scan.len())],
        };
        let at = scan.len().saturating_sub(sample);
        let last = Sample {
            offset: at as u64,
            bytes: &scan[at..],
        };
        let mut e = Ends::new(first, last).unwrap();
        if let Some(p) = e.boundary_probe() {
            let from = p.saturating_sub(sample as u64 / 2).min(len) as usize;
            let to = (from + sample).min(scan.len());
            e.add(Sample {
                offset: from as u64,
                bytes: &scan[from..to],
            });
        }
        e.check()
    }

    #[test]
    fn a_whole_scan_has_its_rate_time_and_nothing_missing() {
        let scan = stream(2, 400, 3, &[]);
        let c = check(&scan, 64 * FRAME);
        assert_eq!(c.frames_per_second.map(FrameRate::get), Some(400));
        assert_eq!(c.threads, vec![0, 1]);
        assert_eq!(c.tracks, 64, "16 channels × 2 bits × 2 threads");
        assert_eq!(c.missing_bytes, Some(0));
        // 1000 data bytes × 8 × 400 frames / 32 tracks.
        assert_eq!(c.track_rate_bps, Some(100_000));
        assert_eq!((c.start.frame, c.end.frame, c.end.unix - c.start.unix), (0, 399, 2));
        let d = c.duration_s().unwrap();
        assert!((d - (3.0 - 1.0 / 400.0)).abs() < 1e-9, "{d}");
        assert_eq!(c.bytes_per_second(), Some(400 * 2 * FRAME as u64));
    }

    #[test]
    fn lost_frames_show_as_missing_bytes_and_a_cut_start_is_resynchronised() {
        let scan = stream(2, 400, 3, &[5, 6, 7, 900]);
        let c = check(&scan, 64 * FRAME);
        assert_eq!(c.frames_per_second.map(FrameRate::get), Some(400), "{c:?}");
        assert_eq!(c.missing_bytes, Some(4 * FRAME as i64), "{c:?}");
        // A scan_set to the middle of a frame: the first whole frame is found.
        let cut = &scan[FRAME / 2..];
        let c = check(cut, 64 * FRAME);
        assert_eq!(c.start_offset, FRAME as u64 - FRAME as u64 / 2);
        // Thread 0's frame of the first period is cut off: a recording that starts between
        // the threads of a period is not missing the ones before (jive5ab counts it, one frame).
        assert_eq!(c.missing_bytes, Some(4 * FRAME as i64));
    }

    #[test]
    fn a_recording_that_stops_between_the_threads_of_a_period_misses_nothing() {
        let scan = stream(4, 400, 3, &[]);
        // Threads 0 and 1 of the last period kept, 2 and 3 not; thread 3 of the first not.
        let cut = &scan[3 * FRAME..scan.len() - 2 * FRAME];
        let c = check(cut, 64 * FRAME);
        assert_eq!(
            (c.frames_per_second.map(FrameRate::get), c.threads.len()),
            (Some(400), 4),
            "{c:?}"
        );
        assert_eq!(c.missing_bytes, Some(0), "{c:?}");
        // A frame lost inside is still counted.
        let lossy = stream(4, 400, 3, &[1000]);
        let c = check(&lossy[3 * FRAME..lossy.len() - 2 * FRAME], 64 * FRAME);
        assert_eq!(c.missing_bytes, Some(FRAME as i64), "{c:?}");
    }

    #[test]
    fn a_scan_in_two_thread_recordings_combines_to_its_threads() {
        let t0 = stream(1, 400, 3, &[7]);
        let mut t1 = stream(1, 400, 3, &[]);
        // The second recording holds thread 1.
        for f in t1.chunks_mut(FRAME) {
            let mut h = VdifHeader::parse(f).unwrap();
            h.thread_id = 1;
            h.emit(&mut f[..32]).unwrap();
        }
        let parts = [check(&t0, 64 * FRAME), check(&t1, 64 * FRAME)];
        let c = ScanCheck::combine(&parts).unwrap();
        assert_eq!((c.tracks, c.threads.clone()), (64, vec![0, 1]));
        assert_eq!(c.missing_bytes, Some(FRAME as i64));
        assert_eq!(c.frames_per_second.map(FrameRate::get), Some(400));
        assert_eq!(c.bytes_per_second(), Some(2 * 400 * FRAME as u64));
        assert_eq!(ScanCheck::combine(&[]), None);
    }

    #[test]
    fn within_one_second_the_rate_is_unknown() {
        let scan = stream(1, 400, 1, &[]);
        let c = check(&scan[..100 * FRAME], 64 * FRAME);
        assert_eq!(
            (c.frames_per_second, c.missing_bytes, c.track_rate_bps),
            (None, None, None)
        );
        assert_eq!(c.end.frame, 99);
        assert!(Ends::new(
            Sample {
                offset: 0,
                bytes: &[0u8; 5000]
            },
            Sample {
                offset: 0,
                bytes: &scan
            }
        )
        .is_none());
    }
}

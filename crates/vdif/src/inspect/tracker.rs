//! Per-thread frame accounting of an inspection: counts, gaps and order within each thread, and
//! the threads of a station that start late or end early (their first or last frames lost).

use std::collections::BTreeMap;

use super::{Gap, ThreadSummary, MAX_LISTED, MAX_STREAMS, MAX_TIME_SPREAD_S};
use crate::header::VdifHeader;
use crate::rate::{FrameRate, RateSource, SourcedRate};
use crate::station::StationId;
use crate::time::iso;

/// Frames of one station/thread as they come.
#[derive(Default)]
pub(super) struct Stream {
    pub(super) summary: ThreadSummary,
    /// Latest (second, frame) accepted in order.
    last: Option<(u32, u32)>,
}

#[derive(Default)]
pub(super) struct Tracker {
    pub(super) rate: Option<SourcedRate>,
    pub(super) max_frame: u32,
    pub(super) streams: BTreeMap<(StationId, u16), Stream>,
    pub(super) untracked: u64,
    pub(super) gaps: u64,
    pub(super) gap_list: Vec<Gap>,
}

impl Tracker {
    /// The frame rate in use, when known.
    pub(super) fn fps(&self) -> Option<FrameRate> {
        self.rate.map(|r| r.fps)
    }

    /// Count the frame `h` found at byte `offset`.
    pub(super) fn count(&mut self, h: &VdifHeader, offset: u64) {
        let key = (h.station_id, h.thread_id);
        let now = (h.seconds, h.frame_number);
        if !self.streams.contains_key(&key) && self.streams.len() >= MAX_STREAMS {
            self.untracked += 1;
            return;
        }
        self.max_frame = self.max_frame.max(now.1);
        let s = self.streams.entry(key).or_default();
        let t = &mut s.summary;
        if t.frames == 0 {
            (t.station, t.station_id, t.thread) = (h.station_id.to_string(), h.station_id, h.thread_id);
            (t.first, t.earliest, t.latest) = (now, now, now);
            (t.earliest_offset, t.latest_offset) = (offset, offset);
        }
        // The rate is learnt when a thread crosses a second boundary: all frames of the
        // earlier second have then been seen (frames are in time order within a thread).
        let crossed = t.frames > 0 && now.0 > t.last.0;
        if crossed {
            SourcedRate::offer(
                &mut self.rate,
                RateSource::FrameNumbers,
                FrameRate::new(self.max_frame + 1).ok(),
            );
        }
        t.frames += 1;
        t.last = now;
        if now < t.earliest {
            (t.earliest, t.earliest_offset) = (now, offset);
        }
        if now > t.latest {
            (t.latest, t.latest_offset) = (now, offset);
        }
        t.invalid += u64::from(h.invalid);
        // Order and gaps: frame numbers order the frames of a second and show gaps in it
        // whether or not the rate is known; the rate is needed only across a second boundary,
        // and a stream crosses one only after the rate was learnt above.
        let Some(l) = s.last else {
            s.last = Some(now);
            return;
        };
        if now <= l {
            t.out_of_order += 1;
            return;
        }
        let missing = if now.0 == l.0 {
            u64::from(now.1 - l.1 - 1)
        } else {
            let fps = self.rate.map_or(0, |r| u64::from(r.fps));
            (u64::from(now.0 - l.0) - 1) * fps + fps.saturating_sub(u64::from(l.1) + 1) + u64::from(now.1)
        };
        s.last = Some(now);
        if missing > 0 {
            t.missing += missing;
            self.gaps += 1;
            if self.gap_list.len() < MAX_LISTED {
                self.gap_list.push(Gap {
                    station_id: key.0,
                    thread: key.1,
                    after: l,
                    missing,
                });
            }
        }
    }
}

/// Frames from `a` to `b` (second, frame number), `b` not before `a`: known within a second,
/// across seconds only with the frame rate.
fn frames_between(a: (u32, u32), b: (u32, u32), fps: Option<FrameRate>) -> Option<u64> {
    if a.0 == b.0 {
        return Some(u64::from(b.1.saturating_sub(a.1)));
    }
    let r = u64::from(fps?);
    Some((u64::from(b.0) * r + u64::from(b.1)).saturating_sub(u64::from(a.0) * r + u64::from(a.1)))
}

/// Missing frames and runs of them found at the edges of threads.
#[derive(Default)]
pub(super) struct Edges {
    /// Frames missing (those that can be counted).
    pub(super) missing: u64,
    /// Thread starts and ends found short.
    pub(super) runs: u64,
}

/// Every thread's start and end checked against the other threads of its station: the threads
/// of one station sample together (VDIF 1.1.1 §2: a thread is one of a station's parallel
/// streams of the same time range), so a thread that starts after the others or ends before
/// them has lost its first or last frames. Those are counted into the thread's `missing` and
/// reported in `problems`, with the frame and offset where the thread begins or ends. Threads
/// whose clock is far from the first frame (already reported) are left out.
pub(super) fn check_edges(
    per_thread: &mut [ThreadSummary],
    h0: &VdifHeader,
    fps: Option<FrameRate>,
    problems: &mut Vec<String>,
) -> Edges {
    let mut edges = Edges::default();
    let mut listed = 0;
    let near = |t: &ThreadSummary| t.first.0.abs_diff(h0.seconds) <= MAX_TIME_SPREAD_S;
    let when = |(s, f): (u32, u32)| format!("frame {f} of {}", iso(h0.ref_epoch, s, 0.0));
    for station in per_thread.chunk_by_mut(|a, b| a.station_id == b.station_id) {
        let threads: Vec<&ThreadSummary> = station.iter().filter(|t| near(t)).collect();
        if threads.len() < 2 {
            continue;
        }
        let start = threads.iter().map(|t| t.earliest).min().unwrap_or_default();
        let end = threads.iter().map(|t| t.latest).max().unwrap_or_default();
        for t in station.iter_mut().filter(|t| near(t)) {
            for (at_start, from, to) in [(true, start, t.earliest), (false, t.latest, end)] {
                if from == to {
                    continue;
                }
                let n = frames_between(from, to, fps);
                let count = n.unwrap_or(0);
                if at_start {
                    t.missing_at_start = count;
                } else {
                    t.missing_at_end = count;
                }
                t.missing += count;
                edges.missing += count;
                edges.runs += 1;
                if listed < MAX_LISTED {
                    listed += 1;
                    let how_many = n.map_or(
                        "an unknown number of frames (the frame rate is unknown)".to_string(),
                        |n| format!("{n} frame(s)"),
                    );
                    problems.push(if at_start {
                        format!(
                            "station {} thread {} starts {how_many} after the station's other threads: its first frame is {} at offset {}; the first of the others is {}",
                            t.station, t.thread, when(t.earliest), t.earliest_offset, when(start)
                        )
                    } else {
                        format!(
                            "station {} thread {} ends {how_many} before the station's other threads: its last frame is {} at offset {}; the last of the others is {}",
                            t.station, t.thread, when(t.latest), t.latest_offset, when(end)
                        )
                    });
                }
            }
        }
    }
    if edges.runs > listed as u64 {
        problems.push(format!(
            "{} more thread start(s) or end(s) short of their station's other threads",
            edges.runs - listed as u64
        ));
    }
    edges
}

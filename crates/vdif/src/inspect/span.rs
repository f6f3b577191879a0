//! The time span of an inspected stream.

use super::{ThreadSummary, MAX_LISTED, MAX_TIME_SPREAD_S};
use crate::header::VdifHeader;
use crate::time::iso;

/// The span of the threads whose clock agrees with the first frame; threads far from it are
/// reported in `problems` and left out of the span.
pub(super) struct TimeSpan {
    /// First sample time (ISO).
    pub(super) start_utc: Option<String>,
    /// After the last sample (ISO).
    pub(super) end_utc: Option<String>,
    pub(super) duration_s: Option<f64>,
    /// The first whole second (ISO).
    pub(super) first_second_utc: Option<String>,
}

/// The [`TimeSpan`] of `per_thread`.
pub(super) fn time_span(
    h0: &VdifHeader,
    per_thread: &[ThreadSummary],
    fps: Option<crate::rate::FrameRate>,
    problems: &mut Vec<String>,
) -> TimeSpan {
    // Times are taken relative to the first frame in the file (as baseband does); a thread
    // whose clock is far from it is a fault of the recorder, reported, and left out of the span.
    for t in per_thread
        .iter()
        .filter(|t| t.first.0.abs_diff(h0.seconds) > MAX_TIME_SPREAD_S)
    {
        if problems.len() < 2 * MAX_LISTED {
            problems.push(format!(
                "station {} thread {}: time {} is {} s away from the first frame ({})",
                t.station,
                t.thread,
                iso(h0.ref_epoch, t.first.0, 0.0),
                i64::from(t.first.0) - i64::from(h0.seconds),
                iso(h0.ref_epoch, h0.seconds, 0.0)
            ));
        }
    }
    let (start, end) = per_thread
        .iter()
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
    TimeSpan {
        start_utc,
        end_utc,
        duration_s,
        first_second_utc: start.map(|s| iso(h0.ref_epoch, s.0, 0.0)),
    }
}

//! The frame rate a station's threads were given, checked against the frames' own count.
//!
//! Where only a VSI-S mode's rate is known (`evlbi serve`'s recordings and net2net), a station's
//! rate per thread is that rate split over the threads its boards sent in the first milliseconds
//! (the receiver's and the relay's learning). A board that was not
//! sending then (down, or not started yet) makes the split wrong: with one of a DBBC3's two
//! boards the other's two threads were each given the rate of four, so every second's frame
//! numbers stopped halfway through what the window expected and the recording got 4000 made-up
//! invalid frames in 2 s among its 8000 (frame numbers beyond the frame rate: no valid VDIF
//! stream has them), and the board that came later found no room for its threads; a relay
//! counted 8000 of the 12 000 frames it relayed in 3 s as lost in its input.
//!
//! A VDIF frame number counts a thread's frames within its second (VDIF 1.1.1 §3, word 1), so
//! the highest one before the seconds move on is the rate less one. At a station's first
//! second boundaries that count is compared with the rate in use; a lower count that splits the
//! station's rate evenly is taken when the frames also came at about that rate (frame numbers
//! per second of arrival): an outage that ended the second early, which leaves a low count too,
//! shows the old rate there. Judged only while the station is young: a few boundaries, then the
//! rate stands.
//!
//! A lower count is also taken only when the second's frames fill it: at least 3/4 of its frame
//! numbers (from the first seen to the highest) in every thread seen. A source sending 200 frames
//! a second numbered as a thread of 500 counts 500, and its numbers advance at 500 a second, but
//! it fills 2 in 5: alone in a station of 1000 frames a second, it lowered the rate to 500 and
//! made room for a thread of its own (issue 36). A real board sends every frame.

use std::time::{Duration, Instant};

use vdif::{FrameRate, VdifHeader};

use crate::in_step::{IN_STEP, MIN_COMMON};
use crate::thread_set::ThreadSet;

/// Second boundaries judged before the rate stands.
const MAX_BOUNDARIES: u8 = 4;
/// Least arrival time over which the frames' rate is measured.
const MIN_SPAN: Duration = Duration::from_millis(20);
/// How far the measured rate may be from the frames' count and still confirm it.
const RATE_TOLERANCE: f64 = 0.2;

/// What a frame told about the station's rate per thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing yet.
    Wait,
    /// The rate in use is right (or could not be judged in time): stop checking.
    Keep,
    /// The frames count `fps` a second per thread: the station has `threads`.
    Rate { fps: FrameRate, threads: u16 },
}

/// The check of one station (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct RateCheck {
    /// Over all threads: an integer, not a [`FrameRate`] (a station's total may exceed the
    /// 2^24 frames one thread can number).
    station_fps: u32,
    assumed: FrameRate,
    max_threads: u16,
    second: Option<u32>,
    /// The lowest frame number seen in `second` and when; the highest and when.
    first: (u32, Instant),
    top: (u32, Instant),
    /// Frames seen in `second` and their threads.
    frames: u64,
    threads: ThreadSet,
    boundaries: u8,
    /// The rate per thread was given (`--fps`), not split from the station's: a count that
    /// confirms lower is that rate, the threads as they are.
    given_threads: Option<u16>,
}

impl RateCheck {
    /// A station sending `station_fps` frames a second over all threads, given `assumed` per
    /// thread; at most `max_threads` threads.
    pub(crate) fn new(station_fps: u32, assumed: FrameRate, max_threads: u16, now: Instant) -> Self {
        RateCheck {
            station_fps,
            assumed,
            max_threads,
            second: None,
            first: (0, now),
            top: (0, now),
            frames: 0,
            threads: ThreadSet::default(),
            boundaries: 0,
            given_threads: None,
        }
    }

    /// A station of `threads` threads given `assumed` frames a second per thread (an operator's
    /// `--fps`): checked the same way, a lower count confirmed being its rate per thread (a
    /// given rate too high made every second's frame numbers stop short of it, and the frames
    /// not numbered were counted lost in the input: 24 000 in 8 s of a 1000-frame station told
    /// 4000).
    pub(crate) fn given(assumed: FrameRate, threads: u16, now: Instant) -> Self {
        let mut c = RateCheck::new(assumed.get().saturating_mul(u32::from(threads)), assumed, threads, now);
        c.given_threads = Some(threads);
        c
    }

    /// A frame of the station arrived at `at`.
    pub(crate) fn observe(&mut self, h: &VdifHeader, at: Instant) -> Verdict {
        let (s, n) = (h.seconds, h.frame_number);
        match self.second {
            Some(cur) if s == cur => {
                if n > self.top.0 {
                    self.top = (n, at);
                }
                self.frames += 1;
                self.threads.insert(h.thread_id);
                Verdict::Wait
            }
            // A frame of a second already judged (reordered over the boundary): no news.
            Some(cur) if s < cur && cur - s < 2 => Verdict::Wait,
            Some(cur) if s == cur.wrapping_add(1) => {
                let verdict = self.judge(at);
                self.boundaries += 1;
                if verdict == Verdict::Wait && self.boundaries >= MAX_BOUNDARIES {
                    return Verdict::Keep;
                }
                self.start(h, at);
                verdict
            }
            // The first frame, or a jump: count from here.
            _ => {
                self.start(h, at);
                Verdict::Wait
            }
        }
    }

    fn start(&mut self, h: &VdifHeader, at: Instant) {
        let n = h.frame_number;
        self.second = Some(h.seconds);
        self.first = (n, at);
        self.top = (n, at);
        self.frames = 1;
        self.threads = ThreadSet::default();
        self.threads.insert(h.thread_id);
    }

    /// The second just ended (the next one's first frame came at `next`): what its frame numbers
    /// and their arrival say.
    fn judge(&self, next: Instant) -> Verdict {
        let count = self.top.0.saturating_add(1);
        let assumed = self.assumed.get();
        if count == assumed {
            return Verdict::Keep;
        }
        if count > assumed {
            return Verdict::Wait;
        }
        let threads = match self.given_threads {
            Some(threads) => threads,
            None => {
                if !self.station_fps.is_multiple_of(count) {
                    return Verdict::Wait;
                }
                let Ok(threads) = u16::try_from(self.station_fps / count) else {
                    return Verdict::Wait;
                };
                if threads > self.max_threads {
                    return Verdict::Wait;
                }
                threads
            }
        };
        // The frame numbers seen, in every thread seen: a sparse source does not fill them; and
        // a few of them at least (one frame just before a boundary fills its one number).
        let threads_seen = self.threads.len() as u64;
        let numbers = u64::from(self.top.0 - self.first.0 + 1) * threads_seen;
        if self.frames * IN_STEP.1 < numbers * IN_STEP.0 || self.frames < MIN_COMMON * threads_seen {
            return Verdict::Wait;
        }
        let span = self.top.1.saturating_duration_since(self.first.1);
        let confirmed = if span >= MIN_SPAN {
            let measured = f64::from(self.top.0 - self.first.0) / span.as_secs_f64();
            let off = |rate: u32| (measured / f64::from(rate) - 1.0).abs();
            off(count) <= RATE_TOLERANCE && off(count) < off(assumed)
        } else {
            // Too little of the second to measure a rate (the station began just before its
            // end; waiting for the next boundary left a second placed at the wrong rate: 4000
            // made-up invalid frames per thread). The boundary tells: at the count's rate the
            // next second follows the last frame at once; at the rate assumed, frames after it
            // were due for the rest of the second, and an outage to its end leaves that time
            // without frames.
            let due = f64::from(assumed - count) / f64::from(assumed);
            next.saturating_duration_since(self.top.1).as_secs_f64() < due / 2.0
        };
        // 1 ≤ count < assumed ≤ 2^24: always a rate.
        match FrameRate::new(count) {
            Ok(fps) if confirmed => Verdict::Rate { fps, threads },
            _ => Verdict::Wait,
        }
    }
}

/// What to tell the operator when station `station`'s rate per thread and threads go from
/// `was` to `now` (fps, threads) from second `second` on.
pub(crate) fn corrected(station: &str, was: (FrameRate, u16), now: (FrameRate, u16), second: u32) -> String {
    format!(
        "station {station}: its frames count {} a second per thread, not the {} its station rate over the {} \
         thread(s) sent at the start gave: {} threads from second {second} on (a board not sending then is taken \
         when it comes)",
        now.0.get(),
        was.0.get(),
        was.1,
        now.1
    )
}

/// What to tell the operator when station `station`'s frames count `now` a second per thread
/// where `given` (`--fps`) was given, from second `second` on.
pub(crate) fn given_corrected(station: &str, given: FrameRate, now: FrameRate, second: u32) -> String {
    let (given, now) = (given.get(), now.get());
    format!(
        "station {station}: its frames count {now} a second per thread (their frame numbers wrap there), not the \
         {given} given (--fps): taken as {now} from second {second} on; frames it had not numbered are not loss"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(seconds: u32, frame_number: u32) -> VdifHeader {
        let l = vdif::FrameLayout::new(512e6, 2, 16, 4, 8000).unwrap();
        let mut h = l.header(0x4566);
        h.seconds = seconds;
        h.frame_number = frame_number;
        h
    }

    /// A station of 8000 frames a second given `assumed` per thread, fed frames of one thread at
    /// `fps` (counted) from frame `from` of second 100 on, `frames` of them less those `skip`
    /// drops, each arriving at its time, until the first verdict that is not `Wait` (the
    /// receiver stops checking there).
    fn run(assumed: u32, fps: u32, from: u32, frames: u32, skip: impl Fn(u32, u32) -> bool) -> Option<Verdict> {
        let t0 = Instant::now();
        let mut check = RateCheck::new(8000, rate(assumed), 1024, t0);
        let step = Duration::from_secs(1) / fps;
        for k in 0..frames {
            let i = from + k;
            let (s, n) = (100 + i / fps, i % fps);
            if skip(s, n) {
                continue;
            }
            let v = check.observe(&header(s, n), t0 + step * k);
            if v != Verdict::Wait {
                return Some(v);
            }
        }
        None
    }

    fn rate(fps: u32) -> FrameRate {
        FrameRate::new(fps).expect("a test's rate")
    }

    const ALL: fn(u32, u32) -> bool = |_, _| false;

    #[test]
    fn a_rate_split_over_too_few_threads_is_corrected_at_the_first_second_boundary() {
        // 8000 frames/s over 4 threads, 2 seen: given 4000 each, the frames count 2000.
        assert_eq!(
            run(4000, 2000, 700, 1400, ALL),
            Some(Verdict::Rate {
                fps: rate(2000),
                threads: 4
            })
        );
    }

    #[test]
    fn the_right_rate_is_kept() {
        assert_eq!(run(2000, 2000, 700, 1400, ALL), Some(Verdict::Keep));
    }

    #[test]
    fn an_outage_to_the_end_of_a_second_is_not_a_lower_rate() {
        // The right rate (4000), frames 2000-3999 of second 100 lost: the count says 2000 (which
        // splits 8000), the arrival rate says 4000. Judged again at the next boundary.
        assert_eq!(
            run(4000, 4000, 1000, 8000, |s, n| s == 100 && n >= 2000),
            Some(Verdict::Keep)
        );
    }

    #[test]
    fn a_second_too_short_to_measure_is_judged_by_its_boundary() {
        // The first frame 10 ms before the boundary (20 frames): too few to measure a rate, but
        // the next second's first frame followed the last at once: judged there (frame 21).
        assert_eq!(
            run(4000, 2000, 1980, 21, ALL),
            Some(Verdict::Rate {
                fps: rate(2000),
                threads: 4
            })
        );
        // The right rate (4000) whose frames 2000-3999 were lost, 10 ms of frames before them:
        // the next second came half a second after the last frame. Not judged there (the
        // outage); the next second is, and keeps the rate.
        assert_eq!(run(4000, 4000, 1960, 2041, |s, n| s == 100 && n >= 2000), None);
        assert_eq!(
            run(4000, 4000, 1960, 6100, |s, n| s == 100 && n >= 2000),
            Some(Verdict::Keep)
        );
    }

    #[test]
    fn a_count_that_does_not_split_the_station_rate_is_left_and_the_check_ends() {
        // 8000 over 3 threads would be no whole number: never taken; after 4 boundaries, kept.
        assert_eq!(run(4000, 2667, 100, 2667 * 5, ALL), Some(Verdict::Keep));
    }

    #[test]
    fn a_source_that_fills_a_fraction_of_its_numbers_does_not_lower_the_rate() {
        // Numbered as a thread of 4000 at its arrivals, but 2 frames in 5 sent: it counts 4000
        // (which splits 8000) and its numbers advance at 4000 a second, yet it is no thread of
        // 4000. Never lowered; after 4 boundaries the rate stands.
        assert_eq!(run(8000, 4000, 100, 4000 * 5, |_, n| n % 5 >= 2), Some(Verdict::Keep));
        // One frame just before a boundary (its one number filled) is no evidence either: the
        // next second judges.
        assert_eq!(run(8000, 4000, 3999, 2, ALL), None);
        // Three in four sent (a lossy path): still a thread of 4000.
        assert_eq!(
            run(8000, 4000, 100, 4000 * 2, |_, n| n % 4 == 1),
            Some(Verdict::Rate {
                fps: rate(4000),
                threads: 2
            })
        );
    }
}

//! Whether sources of one station's frames are its backend's boards: the evidence a station's
//! threads and rate are learned from, which a few datagrams from elsewhere cannot supply.
//!
//! Where only a VSI-S mode's rate is known (`evlbi serve`), a station's threads are counted from
//! the sources sending at its start and the mode's rate split over them. Anyone who can send a
//! datagram to the data port is such a source: a second source sending the station's frames with
//! thread id 1 at 200 datagrams a second (1.6 Mb/s), numbered as a thread of 500 frames a second,
//! split a one-thread station of 1000 frames a second into two threads of 500 and the recording
//! held none of the real thread's frames (issue 36). What identifies a board here is what its
//! frames show, since an address proves nothing (a DBBC3's boards send from their own
//! addresses):
//!
//! - The boards of one backend sample the same time at the same rate per thread: each sends the
//!   frames of the same VDIF seconds and frame numbers, one per thread. Over the VDIF times two
//!   sources both cover, a board delivers as many frames per thread as the other ([`compare`]);
//!   one with fewer than [`IN_STEP`] of them (a sparse source, or one numbered at another rate)
//!   is not a board of the station and adds no thread. Their arrivals over the same time tell
//!   too, with a wider margin (arrival times of a batch read late are one): a source numbered
//!   one frame after the other but sent at a fifth of the rate falls behind in time.
//! - A board sends every frame of its threads: per thread, its frames carry one frame number
//!   after the other within each second (VDIF 1.1.1 §3). A source whose frames skip [`IN_STEP`]
//!   or more of its own numbers ([`own_numbering`]) is not a board even with no other source to
//!   compare it with: alone at the start of a receiver (the backend starting at its next whole
//!   second), the fake of issue 36 delivered its run of 4 frames and was made the station, and
//!   its frames and the fill between them were recorded until the backend came.
//! - A lower rate per thread (more threads than counted: a board down at the start) is taken
//!   only from frames that fill the threads seen at that rate (see [`crate::rate_check`]).
//! - A source in a station that delivers less than half its threads' share of the station's
//!   rate ([`Meter`]) holds no thread against one that delivers it.
//!
//! What it costs a source that is not the backend to be taken as a board: sending every frame of
//! a thread, in step with the real ones — a board's share of the station's bandwidth.

use std::time::{Duration, Instant};

use vdif::VdifHeader;

/// Of the frames per thread the denser of two sources delivered over the VDIF times both cover,
/// a board delivers at least this share (3/4: a lossy path or a frame's jitter at the edges of
/// the common times still passes; a source sending a fraction of a thread does not).
pub(crate) const IN_STEP: (u64, u64) = (3, 4);
/// Frames per thread over the common VDIF times before two sources are judged.
pub(crate) const MIN_COMMON: u64 = 4;
/// Sources are judged by their arrivals over the same time too: a board delivers at least 2/3
/// of the other's frames per thread (wider than [`IN_STEP`]: a batch read late gives its frames
/// one arrival time).
const ARRIVAL_SHARE: (u64, u64) = (2, 3);
/// Datagrams read this close together came in one read of a socket (a receive loop stamps a
/// batch with one time; a backlog takes a few reads of 64).
const ONE_READ: Duration = Duration::from_micros(200);
/// Frames per thread of the denser source arrived before sources are judged by arrivals.
const MIN_ARRIVALS: u64 = 8;

/// A frame's VDIF time as a number that orders the frames of a station's threads the same way
/// whatever its rate per thread (the boards of a station share it): reference epoch, seconds,
/// frame number (VDIF 1.1.1 §3: 6, 30 and 24 bits).
pub(crate) fn position(h: &VdifHeader) -> u64 {
    (u64::from(h.ref_epoch & 0x3f) << 54) | (u64::from(h.seconds & 0x3fff_ffff) << 24) | u64::from(h.frame_number)
}

/// One source's frames as evidence: their VDIF positions and threads (each counted once),
/// their arrivals, and how many threads it sends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evidence {
    /// (position, thread), sorted, without repeats.
    frames: Vec<(u64, u16)>,
    /// Arrival times, sorted.
    arrivals: Vec<Instant>,
    /// (arrival, position) of each frame, sorted by arrival.
    timed: Vec<(Instant, u64)>,
    threads: u64,
}

impl Evidence {
    /// The evidence of frames (header, arrival) of a source sending `threads` threads.
    pub(crate) fn new<'h>(frames: impl Iterator<Item = (&'h VdifHeader, Instant)>, threads: usize) -> Evidence {
        let mut e = Evidence {
            threads: (threads as u64).max(1),
            ..Evidence::default()
        };
        for (h, at) in frames {
            e.frames.push((position(h), h.thread_id));
            e.arrivals.push(at);
            e.timed.push((at, position(h)));
        }
        e.timed.sort_unstable_by_key(|(at, _)| *at);
        e.frames.sort_unstable();
        e.frames.dedup();
        e.arrivals.sort_unstable();
        e
    }

    /// Frames with a position in `lo..=hi`.
    fn within(&self, lo: u64, hi: u64) -> u64 {
        let from = self.frames.partition_point(|(p, _)| *p < lo);
        let to = self.frames.partition_point(|(p, _)| *p <= hi);
        (to - from) as u64
    }

    /// Frames that arrived at `since` or later, but for those of its first read (within
    /// [`ONE_READ`] of `since`) with a position up to `caught_up` (if given): frames of times the
    /// other source had delivered, read late in one batch.
    fn arrived_since(&self, since: Instant, caught_up: Option<u64>) -> u64 {
        let from = self.timed.partition_point(|(at, _)| *at < since);
        let late_read = |(at, p): &&(Instant, u64)| caught_up.is_some_and(|q| *p <= q) && *at < since + ONE_READ;
        self.timed[from..].iter().filter(|f| !late_read(f)).count() as u64
    }

    /// The highest position of the frames that arrived before `since`.
    fn newest_before(&self, since: Instant) -> Option<u64> {
        let to = self.timed.partition_point(|(at, _)| *at < since);
        self.timed[..to].iter().map(|(_, p)| *p).max()
    }
}

/// How two sources of one station's frames compare (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Both deliver the station's frames per thread alike: boards of one backend.
    Alike,
    /// The first delivers too few of them: it is not a board.
    FirstSparse,
    /// The second delivers too few of them.
    SecondSparse,
    /// Too little evidence yet.
    Undecided,
}

/// Compare sources `a` and `b` over the VDIF times both cover (when they overlap) and over their
/// arrivals since both were heard: a source is sparse when either shows it so (a source numbered
/// one frame after the other but sent at a fifth of the rate is dense over the times both cover,
/// and falls behind in time), in step when neither does and both have been judged.
pub(crate) fn compare(a: &Evidence, b: &Evidence) -> Step {
    let (Some(a0), Some(a1), Some(b0), Some(b1)) =
        (a.frames.first(), a.frames.last(), b.frames.first(), b.frames.last())
    else {
        return Step::Undecided;
    };
    let (lo, hi) = (a0.0.max(b0.0), a1.0.min(b1.0));
    let by_time = (lo <= hi).then(|| {
        judge(
            (a.within(lo, hi), a.threads),
            (b.within(lo, hi), b.threads),
            MIN_COMMON,
            IN_STEP,
        )
    });
    // Arrivals since both were heard. The later one's first read, as far as it holds frames of
    // VDIF times the other had delivered before, does not count: a batch read late stamps a
    // board's first frames late, and they were taken for frames that arrived with the other's later ones (a
    // board read in a late batch, or the boards read before it, refused as sparse: 16-112 of
    // 16 000 frames at 512 Mb/s on a loaded host). A source sent slower than it is numbered
    // still falls behind.
    let since = a.arrivals[0].max(b.arrivals[0]);
    let (na, nb) = if a.arrivals[0] < b.arrivals[0] {
        (
            a.arrived_since(since, None),
            b.arrived_since(since, a.newest_before(since)),
        )
    } else if b.arrivals[0] < a.arrivals[0] {
        (
            a.arrived_since(since, b.newest_before(since)),
            b.arrived_since(since, None),
        )
    } else {
        (a.arrived_since(since, None), b.arrived_since(since, None))
    };
    let by_arrival = judge((na, a.threads), (nb, b.threads), MIN_ARRIVALS, ARRIVAL_SHARE);
    let says = |s: Step| by_time == Some(s) || by_arrival == s;
    match (says(Step::FirstSparse), says(Step::SecondSparse)) {
        (true, false) => Step::FirstSparse,
        (false, true) => Step::SecondSparse,
        (true, true) => Step::Undecided,
        (false, false) if by_arrival == Step::Alike && by_time != Some(Step::Undecided) => Step::Alike,
        (false, false) => Step::Undecided,
    }
}

/// Whether a source's own frames are numbered as a board's: per thread, over the steps from
/// one frame number to the next within a second (across a second the rate per thread, still to
/// be learnt, says how many numbers lie between), at least [`IN_STEP`] of the numbers it steps
/// over are frames it sent. `Alike` when they are, `FirstSparse` when not, `Undecided` over
/// fewer than [`MIN_COMMON`] such steps.
pub(crate) fn own_numbering(e: &Evidence) -> Step {
    let mut last: std::collections::HashMap<u16, u64> = std::collections::HashMap::new();
    let (mut steps, mut numbers) = (0u64, 0u64);
    for &(p, thread) in &e.frames {
        if let Some(prev) = last.insert(thread, p) {
            if prev >> 24 == p >> 24 {
                steps += 1;
                numbers += p - prev;
            }
        }
    }
    if steps < MIN_COMMON {
        Step::Undecided
    } else if steps * IN_STEP.1 < numbers * IN_STEP.0 {
        Step::FirstSparse
    } else {
        Step::Alike
    }
}

/// `na` frames of `ta` threads against `nb` of `tb`: the one with fewer than `share` of the
/// other's per thread is sparse, once one has `min` per thread.
fn judge((na, ta): (u64, u64), (nb, tb): (u64, u64), min: u64, share: (u64, u64)) -> Step {
    // Per thread, cross-multiplied: na / ta against nb / tb.
    let (pa, pb) = (na * tb, nb * ta);
    if na < min * ta && nb < min * tb {
        Step::Undecided
    } else if pb * share.1 < pa * share.0 {
        Step::SecondSparse
    } else if pa * share.1 < pb * share.0 {
        Step::FirstSparse
    } else {
        Step::Alike
    }
}

/// Least time a [`Meter`] measures over.
pub(crate) const METER_MIN: Duration = Duration::from_millis(200);
/// A [`Meter`] starts a new measurement after this long.
const METER_SPAN: Duration = Duration::from_millis(500);

/// The frames a second a source of a station delivers, measured over its recent arrivals.
#[derive(Debug, Clone)]
pub(crate) struct Meter {
    since: Instant,
    frames: u64,
    /// The rate the last whole measurement found.
    last: Option<f64>,
}

impl Meter {
    /// A meter starting at `now`.
    pub(crate) fn new(now: Instant) -> Meter {
        Meter {
            since: now,
            frames: 0,
            last: None,
        }
    }

    /// A frame arrived at `now`.
    pub(crate) fn frame(&mut self, now: Instant) {
        let spent = now.saturating_duration_since(self.since);
        if spent >= METER_SPAN {
            self.last = Some(self.frames as f64 / spent.as_secs_f64());
            (self.since, self.frames) = (now, 0);
        }
        self.frames += 1;
    }

    /// Frames a second at `now`: the measurement under way once it spans [`METER_MIN`], else the
    /// last one; `None` before either.
    pub(crate) fn per_second(&self, now: Instant) -> Option<f64> {
        let spent = now.saturating_duration_since(self.since);
        if spent >= METER_MIN {
            Some(self.frames as f64 / spent.as_secs_f64())
        } else {
            self.last
        }
    }
}

/// Arrivals spanning this long measure a source's rate (the rate check's least span too).
pub(crate) const MEASURED: Duration = Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;

    fn header(seconds: u32, frame_number: u32, thread: u16) -> VdifHeader {
        let l = vdif::FrameLayout::new(64e6, 2, 2, 1, 8000).unwrap();
        let mut h = l.header(0x4566);
        (h.seconds, h.frame_number, h.thread_id) = (seconds, frame_number, thread);
        h
    }

    /// Frames of `threads` threads at time steps `steps` (frame numbers of second 100 at
    /// `per_s` a second), each step arriving at its time.
    fn evidence(steps: impl Iterator<Item = u32>, threads: &[u16], per_s: u32, t0: Instant) -> Evidence {
        let hs: Vec<(VdifHeader, Instant)> = steps
            .flat_map(|k| {
                threads
                    .iter()
                    .map(move |&t| (header(100, k, t), t0 + Duration::from_secs(1) * k / per_s))
            })
            .collect();
        Evidence::new(hs.iter().map(|(h, at)| (h, *at)), threads.len())
    }

    #[test]
    fn boards_in_step_are_boards_whatever_their_threads_and_start() {
        let t0 = Instant::now();
        let a = evidence(300..340, &[0, 1], 1000, t0);
        // The other board started 1.5 frames later and its newest frames are not read yet.
        let b = evidence(302..330, &[2, 3], 1000, t0);
        assert_eq!(compare(&a, &b), Step::Alike);
        assert_eq!(compare(&b, &a), Step::Alike);
        // Too few common frames yet.
        let c = evidence(338..340, &[2, 3], 1000, t0);
        assert_eq!(compare(&a, &c), Step::Undecided);
    }

    #[test]
    fn a_source_sending_a_fraction_of_a_thread_is_sparse() {
        let t0 = Instant::now();
        let real = evidence(300..340, &[0], 1000, t0);
        // At the station's numbering, one frame in five.
        let fake = evidence((300..340).step_by(5), &[1], 1000, t0);
        assert_eq!(compare(&real, &fake), Step::SecondSparse);
        assert_eq!(compare(&fake, &real), Step::FirstSparse);
        // Repeating its frames does not make it denser.
        let hs: Vec<_> = (300..340u32)
            .step_by(5)
            .flat_map(|k| [header(100, k, 1); 5])
            .map(|h| (h, t0))
            .collect();
        let repeated = Evidence::new(hs.iter().map(|(h, at)| (h, *at)), 1);
        assert_eq!(compare(&real, &repeated), Step::SecondSparse);
    }

    #[test]
    fn a_source_numbered_at_another_rate_is_judged_by_its_arrivals() {
        let t0 = Instant::now();
        // 0.3 s into a second: the real thread (1000 a second) at frame 300 and on, one frame a
        // millisecond; the fake numbered as a thread of 500 (frame 150 and on), one datagram in
        // 5 ms. Their VDIF times do not overlap.
        let at = |ms: u64| t0 + Duration::from_millis(300 + ms);
        let real: Vec<_> = (0..20u32)
            .map(|i| (header(100, 300 + i, 0), at(u64::from(i))))
            .collect();
        let fake: Vec<_> = (0..4u32)
            .map(|i| (header(100, 150 + i * 5 / 2, 1), at(5 * u64::from(i))))
            .collect();
        let real = Evidence::new(real.iter().map(|(h, at)| (h, *at)), 1);
        let fake = Evidence::new(fake.iter().map(|(h, at)| (h, *at)), 1);
        assert_eq!(compare(&real, &fake), Step::SecondSparse);
        assert_eq!(compare(&fake, &real), Step::FirstSparse);
    }

    proptest::proptest! {
        /// Two boards of one backend — every frame of their threads over the same times, each
        /// starting and ending anywhere within 4 frames of the other, a few frames lost — are
        /// never judged sparse; a source sending one frame in `every` (≥ 2) of its thread, in step
        /// or not, always is once the boards have sent 20 frames of theirs.
        #[test]
        fn boards_in_step_are_alike_and_a_fraction_of_a_thread_is_sparse(
            starts in (0u32..4, 0u32..4),
            ends in (0u32..4, 0u32..4),
            lost in proptest::collection::vec(0u32..60, 0..3),
            threads in (1usize..4, 1usize..4),
            every in 2u32..10,
            offset in 0u32..500,
        ) {
            let t0 = Instant::now();
            let board = |first: u32, last: u32, ids: std::ops::Range<u16>| {
                let hs: Vec<(VdifHeader, Instant)> = (first..last)
                    .filter(|k| !lost.contains(k))
                    .flat_map(|k| {
                        ids.clone().map(move |t| (header(100, 300 + k, t), t0 + Duration::from_millis(u64::from(k))))
                    })
                    .collect();
                let n = ids.len();
                Evidence::new(hs.iter().map(|(h, at)| (h, *at)), n)
            };
            let a = board(starts.0, 60 - ends.0, 0..threads.0 as u16);
            let b = board(starts.1, 60 - ends.1, 10..10 + threads.1 as u16);
            proptest::prop_assert_eq!(compare(&a, &b), Step::Alike);
            // The fraction: its own numbering (shifted by `offset`), one frame in `every`.
            let hs: Vec<(VdifHeader, Instant)> = (0..60u32)
                .step_by(every as usize)
                .map(|k| (header(100, offset + k, 20), t0 + Duration::from_millis(u64::from(k))))
                .collect();
            let fake = Evidence::new(hs.iter().map(|(h, at)| (h, *at)), 1);
            proptest::prop_assert_eq!(compare(&a, &fake), Step::SecondSparse);
            proptest::prop_assert_eq!(compare(&fake, &a), Step::FirstSparse);
        }
    }

    #[test]
    fn a_source_skipping_its_own_frame_numbers_is_sparse_alone() {
        let t0 = Instant::now();
        assert_eq!(own_numbering(&evidence(300..303, &[0], 1000, t0)), Step::Undecided);
        assert_eq!(own_numbering(&evidence(300..340, &[0, 1], 1000, t0)), Step::Alike);
        // Across a second: its steps within each second only.
        assert_eq!(own_numbering(&evidence(990..1010, &[0], 1000, t0)), Step::Alike);
        // One lost frame in ten passes; two numbers in five (the fake) does not.
        let lossy = evidence((300..340).filter(|k| k % 10 != 0), &[0], 1000, t0);
        assert_eq!(own_numbering(&lossy), Step::Alike);
        let fake = evidence((300..340).filter(|k| k * 2 % 5 < 2), &[1], 1000, t0);
        assert_eq!(own_numbering(&fake), Step::FirstSparse);
    }

    #[test]
    fn a_meter_measures_over_its_recent_arrivals() {
        let t0 = Instant::now();
        let mut m = Meter::new(t0);
        assert_eq!(m.per_second(t0), None);
        for i in 0..1000u32 {
            m.frame(t0 + Duration::from_millis(u64::from(i)));
        }
        let r = m.per_second(t0 + Duration::from_millis(1000)).unwrap();
        assert!((900.0..1100.0).contains(&r), "{r}");
    }
}

//! How a station's threads are counted where only its rate is known (a VSI-S mode): from its
//! first frames and those of the other sources sending its frames then that are its boards,
//! in step with it ([`crate::in_step`]); a source that is not is refused and named, and adds no
//! thread (issue 36: a source sending a fifth of a thread split a one-thread station in two).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use vdif::{FrameRate, StationId};

use super::admission::{problem, At, HOLD_FRAMES};
use super::{describe, Receiver, REFUSED_KEPT};
use crate::in_step::{compare, own_numbering, Step};
use crate::results::RefusedSource;
use crate::window::ThreadMap;

/// A source of a station's frames that sent nothing for this long, while another counts its
/// threads, is not sending the station now (a phantom's few frames): not waited for.
const GONE_QUIET: Duration = Duration::from_millis(20);
/// A station's threads are counted once a thread came round and this long has passed since
/// its first frame (or its source's hold is full): a board whose first frames come later than
/// the others' — started behind them, or its port read in a late batch on a loaded host — is
/// counted with them. Over [`crate::intake::LEARN_SKEW`] (2 ms), three boards to three ports of
/// a recorder at load 10-12 lost the third in 1 run of 10 (10 002 of 16 000 frames taken: its
/// threads refused as beyond the station's until the split was corrected at a second boundary).
/// The frames are held meanwhile, not lost: the recording starts this much later.
pub(crate) const COUNT_FOR: Duration = Duration::from_millis(100);
/// Why a source not in step with a station's boards is refused.
const NOT_IN_STEP: &str =
    "not in step with the station's boards (too few of the frames per thread they send over the same \
                           VDIF time): not a board of it";

/// Why a source whose frames skip its own numbers is refused.
const NOT_NUMBERED: &str = "not in step with its own frame numbers (fewer than 3/4 of the numbers it steps over \
                            are frames it sent, where a board sends every frame of its threads): not a board of it";

impl Receiver {
    /// Whether the stream at `at` knows its threads: given, or counted once a thread came
    /// round again and [`COUNT_FOR`] has passed since its first frame (a board
    /// behind the others shows up within it), or as many frames are held as can be — its rate
    /// then split over them and the boards in step with it. `false` while counting, or while a
    /// source is still to be judged (see [`Receiver::boards_in_step`]), or (the stream dropped,
    /// counted) when the station's rate does not split evenly.
    pub(super) fn threads_counted(&mut self, at: At, now: Instant) -> bool {
        let p = self.admission.get_mut(at);
        let Some(l) = p.learning.as_ref() else {
            return true;
        };
        let full = p.held.len() >= HOLD_FRAMES;
        // A source of a station that is recorded already joins its boards (the `standing`
        // module): waiting for others would only make its frames late for the window.
        let wait = if self.stations.iter().any(|s| s.key == p.key) {
            crate::intake::LEARN_SKEW
        } else {
            COUNT_FOR
        };
        let skew_passed = now.saturating_duration_since(p.first_seen) >= wait;
        if !(full || l.cycled && skew_passed) {
            return false;
        }
        let station_fps = l.station_fps;
        // Alone or not, a source whose frames skip its own numbers is no board (issue 36: alone
        // at a receiver's start, the fake was made the station).
        match own_numbering(&p.evidence()) {
            Step::FirstSparse => {
                if !p.outsider {
                    self.refuse(at, NOT_NUMBERED);
                }
                return false;
            }
            Step::Undecided if !full => return false,
            _ => {}
        }
        let Some(boards) = self.boards_in_step(at, now, full) else {
            return false;
        };
        let ids = boards
            .iter()
            .fold(self.admission.get(at).own, |u, &b| u.union(&self.admission.get(b).own));
        let n = u16::try_from(ids.len()).unwrap_or(u16::MAX).max(1);
        // A whole rate per thread VDIF can number (the station's total may exceed 2^24).
        let Some(fps) = FrameRate::per_thread(station_fps, u32::from(n)) else {
            let name = self.admission.get(at).template.station_id.to_string();
            problem!(
                self.tally,
                "station {name}: {station_fps} frames/s (the mode's) is no whole number over its {n} threads"
            );
            self.admission.drop_stream(at, self.cfg.source_run, &mut self.tally);
            return false;
        };
        let mut seen = ThreadMap::new(n);
        for id in ids.ids() {
            seen.index(id);
        }
        for b in boards.into_iter().chain([at]) {
            let p = self.admission.get_mut(b);
            p.fps = fps;
            p.threads = n;
            p.threads_seen = seen.clone();
            p.learning = None;
            p.split_from = Some(station_fps);
        }
        true
    }

    /// The other boards of the station of the stream at `at`, which is counting its threads:
    /// the streams of that station from other sources, counting theirs too, that are in step
    /// with it and have counted theirs (formed a run and came round). The mode's rate is the
    /// station's over all of them; a stray or a phantom of a few frames cannot add a thread, nor
    /// can a source sending a fraction of a thread's frames (refused and named here). `None`
    /// while one is to be judged or counted, as long as `at` can hold its frames (`full`: it
    /// cannot): a receive loop that reads a batch late stamps it late, and a board's first frames
    /// then come in the same batch as the next of the other's (serve_cli's two boards: 1 run in
    /// 10 learned 2 threads of 4, refused the second board and misplaced the first). `None` too
    /// when `at` itself is not in step with a board of the station: it is refused.
    fn boards_in_step(&mut self, at: At, now: Instant, full: bool) -> Option<Vec<At>> {
        let p = self.admission.get(at);
        let (key, run) = (p.key, self.cfg.source_run.max(1));
        if p.stream.is_some() {
            // A native stream is one sender's: it has no other boards.
            return Some(Vec::new());
        }
        let mine = p.evidence();
        let mut boards = Vec::new();
        for b in self.admission.learning_streams(key, at) {
            let q = self.admission.get(b);
            if now.saturating_duration_since(q.last_seen) >= GONE_QUIET {
                continue;
            }
            let counted = q.learning.as_ref().is_some_and(|l| l.cycled) && q.run >= run;
            match compare(&mine, &q.evidence()) {
                Step::FirstSparse => {
                    self.refuse(at, NOT_IN_STEP);
                    return None;
                }
                Step::SecondSparse if q.run >= run => self.refuse(b, NOT_IN_STEP),
                Step::SecondSparse => {}
                Step::Alike if counted => boards.push(b),
                // Too little to judge by and no room to wait: as before the judging, a board
                // that has counted its threads counts.
                Step::Undecided if counted && full => boards.push(b),
                _ if !full => return None,
                _ => {}
            }
        }
        Some(boards)
    }

    /// The stream at `at` is refused as a board of its station, for `reason` (said once).
    pub(super) fn refuse(&mut self, at: At, reason: &str) {
        let (source, session) = self.admission.source_of(at);
        let p = self.admission.get(at);
        problem!(
            self.tally,
            "station {}: {} sends thread(s) {:?}, {reason}: refused",
            p.template.station_id.to_string(),
            describe(source, session),
            p.own.ids()
        );
        self.refuse_quietly(at, reason);
    }

    /// [`Receiver::refuse`], said already: its refused datagrams count as `foreign_source` and it
    /// is named in the station's `refused_sources` (the first [`REFUSED_KEPT`] such sources).
    pub(super) fn refuse_quietly(&mut self, at: At, reason: &str) {
        let (source, session) = self.admission.source_of(at);
        let p = self.admission.get_mut(at);
        let held = if p.outsider { 0 } else { p.held.len() as u64 };
        p.outsider = true;
        let (station_id, threads) = (p.template.station_id, p.own.ids());
        self.note_refused(station_id, source, session, threads, reason);
        // Its frames held while it was judged are refused too, counted to its name.
        let name = describe(source, session);
        if let Some((_, r)) = self
            .refused
            .iter_mut()
            .find(|(id, r)| *id == station_id && r.source == name)
        {
            r.datagrams += held;
        }
    }

    /// Name source `(source, session)` among the sources station `station_id` refused.
    pub(super) fn note_refused(
        &mut self,
        station_id: StationId,
        source: SocketAddr,
        session: u16,
        threads: Vec<u16>,
        reason: &str,
    ) {
        let name = describe(source, session);
        if let Some((_, r)) = self
            .refused
            .iter_mut()
            .find(|(id, r)| *id == station_id && r.source == name)
        {
            r.threads = threads;
            return;
        }
        if self.refused.len() < REFUSED_KEPT {
            self.refused.push((
                station_id,
                RefusedSource {
                    source: name,
                    threads,
                    datagrams: 0,
                    reason: reason.to_string(),
                },
            ));
        }
    }

    /// A datagram of the stream at `at`, refused as a board, arrived: counted to its name.
    pub(super) fn count_refused_source(&mut self, at: At) {
        let (source, session) = self.admission.source_of(at);
        let station_id = self.admission.get(at).template.station_id;
        let name = describe(source, session);
        if let Some((_, r)) = self
            .refused
            .iter_mut()
            .find(|(id, r)| *id == station_id && r.source == name)
        {
            r.datagrams += 1;
        }
    }
}

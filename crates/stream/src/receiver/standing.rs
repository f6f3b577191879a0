//! Who holds a place in a station that already has boards, when another source delivers its
//! run: the `boards` module's rules (beside a live board, the place of a quiet one, another
//! board with room), and the claim of the frames each delivers (issue 36).
//!
//! A place is held by sending: a board delivers its threads' share of the station's rate. A
//! source that got into a station while the real backend was away (down at `record = on`, or
//! not started yet) and sends a fraction of a thread — 200 frames a second where the station's
//! rate per thread is 1000 — held its threads against the real board when it came, which was
//! refused beside it or beyond the station's threads. A live board that delivers under half its
//! threads' share ([`crate::in_step::Meter`], over 200 ms at least) gives its place up to a
//! source that delivers at least 3/4 of its own; it is refused from then on and named. A board
//! that delivers its share keeps its place whatever another sends: a source cannot deliver
//! more than every frame of its threads.
//!
//! A station whose rate per thread was split from a mode's over threads a source sent that were
//! not the backend's has too low a rate: a board's frames then carry numbers past it (VDIF
//! frame numbers count a thread's frames within its second, VDIF 1.1.1 §3) and arrive faster
//! than it. A source that shows both (numbers past the rate per thread, arriving at least 5/4 of
//! it a thread) starts the station anew, its threads and rate counted again from the boards in
//! step with it.

use std::time::Instant;

use super::admission::{problem, At};
use super::boards::{joining, Joining};
use super::{describe, Receiver};
use crate::thread_set::ThreadSet;
use crate::window::FrameSink;

/// What a refused source's frames say against a station's boards.
enum Challenge {
    /// Nothing: the refusal stands.
    Holds,
    /// These live boards deliver under half their share, and it delivers its: they give way.
    Displaces(Vec<usize>),
    /// Its frames show the station's split of the mode's rate wrong: the station starts anew.
    Restarts,
}

impl Receiver {
    /// How the stream at `at`, which has delivered its run, stands to station `si`'s boards at
    /// `now`: `Ok` the `boards` module's verdict (once boards that hold no place gave way),
    /// `Err(true)` when the station was retired for it to start anew.
    pub(super) fn standing(
        &mut self,
        si: usize,
        at: At,
        now: Instant,
        sink: &mut impl FrameSink,
    ) -> Result<Joining, bool> {
        let verdict = self.verdict(si, at, now);
        if !matches!(verdict, Joining::Beside(_) | Joining::NoRoom) {
            return self.delivers_share(si, at).then_some(verdict).ok_or(false);
        }
        match self.challenge(si, at, now) {
            Challenge::Holds => Ok(verdict),
            Challenge::Restarts => {
                let st = &self.stations[si];
                let (source, session) = self.admission.source_of(at);
                problem!(
                    self.tally,
                    "station {}: {} sends frames numbered past its {} frames/s per thread at more than that rate: \
                     the mode's rate was split over threads that are not the backend's; the station starts anew",
                    st.station_id.to_string(),
                    describe(source, session),
                    st.window.config().frames_per_second
                );
                self.retire(si, sink);
                Err(true)
            }
            Challenge::Displaces(gone) => {
                let all = gone.len() == self.stations[si].members.len();
                self.displace(si, at, &gone, now, all);
                if all {
                    // None of its boards held its place: the station starts anew from this one.
                    self.retire(si, sink);
                    return Err(true);
                }
                match self.verdict(si, at, now) {
                    // Their threads are still in the window's map: the station starts anew.
                    Joining::NoRoom | Joining::Beside(_) => {
                        self.retire(si, sink);
                        Err(true)
                    }
                    v => Ok(v),
                }
            }
        }
    }

    /// Whether the stream at `at` delivers its threads' share of station `si`'s rate per thread
    /// (3/4 of it at least; of the rate its own shape gives it, if lower: a backend set up anew),
    /// as a board taking a place in it must: a source sending a fifth of a thread took the
    /// station over while its backend paused for 100 ms, and filled it with invalid frames
    /// (issue 36). Taken once its frames span 2 ms at that rate (a board's first frames, held
    /// meanwhile); refused (and named) once they span 20 ms below it; `false` until then.
    fn delivers_share(&mut self, si: usize, at: At) -> bool {
        let p = self.admission.get(at);
        let fps = self.stations[si].window.config().frames_per_second.min(p.fps);
        let share = f64::from(fps) * 0.75;
        match p.rate_per_thread() {
            Some((rate, _)) if rate >= share => true,
            Some((rate, true)) => {
                let reason = format!("delivers {rate:.0} frames/s per thread, under 3/4 of the station's {fps}");
                self.refuse(at, &reason);
                false
            }
            _ => false,
        }
    }

    /// The `boards` module's verdict on the stream at `at` for station `si`.
    fn verdict(&self, si: usize, at: At, now: Instant) -> Joining {
        let p = self.admission.get(at);
        let st = &self.stations[si];
        // Several boards feed one stream only where nothing names the sender (jive5ab's and
        // bare framing); a native stream is one sender's, its NAKs going back to it.
        let boards_allowed = st.stream.is_none() && p.stream.is_none();
        joining(&st.members, &p.own, now, self.cfg.source_quiet, boards_allowed, || {
            self.room(si, at)
        })
    }

    /// Whether station `si`'s window has room for the threads of the stream at `at` besides
    /// those it has placed and those its boards claim (a board whose frames were all refused has
    /// placed none: a board that joined on the window's count alone made three boards of a
    /// two-thread station, fuzz stream_admission).
    pub(super) fn room(&self, si: usize, at: At) -> bool {
        let st = &self.stations[si];
        let mapped: ThreadSet = st.window.thread_ids().into_iter().collect();
        let claimed = st.members.iter().fold(mapped, |u, m| u.union(&m.threads));
        claimed.union(&self.admission.get(at).own).len() <= usize::from(st.window.config().threads)
    }

    /// What the frames of the stream at `at` say against station `si`'s boards (module docs).
    fn challenge(&self, si: usize, at: At, now: Instant) -> Challenge {
        let st = &self.stations[si];
        let p = self.admission.get(at);
        let Some((rate, true)) = p.rate_per_thread() else {
            return Challenge::Holds;
        };
        let fps = st.window.config().frames_per_second;
        let beyond = p.held.iter().any(|h| h.header.frame_number >= fps.get());
        let fps = f64::from(fps);
        if st.split_from.is_some() && beyond && rate >= fps * 1.25 {
            return Challenge::Restarts;
        }
        if rate < fps * 0.75 {
            return Challenge::Holds;
        }
        let quiet = self.cfg.source_quiet;
        let gone: Vec<usize> = st
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| now.saturating_duration_since(m.last_seen) < quiet)
            .filter(|(_, m)| {
                let share = fps * m.threads.len().max(1) as f64;
                m.meter.per_second(now).is_some_and(|r| r < share / 2.0)
            })
            .map(|(i, _)| i)
            .collect();
        if gone.is_empty() {
            Challenge::Holds
        } else {
            Challenge::Displaces(gone)
        }
    }

    /// Boards `gone` of station `si` deliver under half their share where the stream at `at`
    /// delivers its: they leave the station (`all`: it is retired with them as its boards), named
    /// among the sources it refused.
    fn displace(&mut self, si: usize, at: At, gone: &[usize], now: Instant, all: bool) {
        let (source, session) = self.admission.source_of(at);
        let by = describe(source, session);
        let st = &mut self.stations[si];
        let (station_id, fps) = (st.station_id, st.window.config().frames_per_second);
        let mut left = Vec::new();
        for &i in gone.iter().rev() {
            if all {
                left.push(st.members[i].clone());
            } else {
                left.push(st.members.remove(i));
            }
        }
        for m in left {
            let rate = m.meter.per_second(now).unwrap_or(0.0) / m.threads.len().max(1) as f64;
            let reason = format!(
                "delivered {rate:.0} frames/s per thread, under half the station's {fps}: its place went to {by}"
            );
            problem!(
                self.tally,
                "station {}: {} {reason}",
                station_id.to_string(),
                describe(m.source, m.session)
            );
            self.note_refused(station_id, m.source, m.session, m.threads.ids(), &reason);
        }
    }

    /// The stream at `at` sends threads live board `i` of station `si` sends: refused.
    pub(super) fn refuse_beside(&mut self, si: usize, at: At, i: usize) {
        let st = &self.stations[si];
        let m = &st.members[i];
        let reason = format!(
            "sends stream {} while its sender {} is live",
            st.stream.map_or_else(|| st.station_id.to_string(), |s| s.to_string()),
            describe(m.source, m.session)
        );
        let (source, session) = self.admission.source_of(at);
        problem!(self.tally, "{} {reason}: refused", describe(source, session));
        self.refuse_quietly(at, &reason);
    }

    /// The stream at `at` sends threads beyond those station `si`'s window was set up for.
    pub(super) fn refuse_no_room(&mut self, si: usize, at: At) {
        let st = &self.stations[si];
        let (source, session) = self.admission.source_of(at);
        problem!(
            self.tally,
            "station {}: {} sends thread(s) {:?} beyond the {} its window was set up for (threads {:?}): \
             refused (a station's threads are counted from the boards sending at its start and checked \
             at its first second boundaries; give the threads with --threads)",
            st.station_id.to_string(),
            describe(source, session),
            self.admission.get(at).own.ids(),
            st.window.config().threads,
            st.window.thread_ids()
        );
        let reason = format!(
            "threads beyond the {} the station's window was set up for",
            st.window.config().threads
        );
        self.refuse_quietly(at, &reason);
    }
}

//! A board that comes after a relayed station's threads were counted from a mode's rate: held,
//! judged in step with the boards (or not), and the station's threads grown by its threads.
//!
//! Where only a station's rate is known (`evlbi serve`'s net2net), its threads are counted from
//! the boards sending in its first milliseconds (the `boards` module). A board that starts later
//! (a DBBC3's third board 50 ms behind, or its first datagrams read in one late batch on a loaded
//! host) sent threads beyond the count, and every frame of it was refused until the rate check
//! corrected the split at the next second boundary: 950 of 4750 frames of three boards in 2.4 s.
//!
//! Such a source is a *newcomer*: its frames are held (at most [`NEWCOMER_FRAMES`], judged by
//! [`NEWCOMER_FOR`]) with the boards' frames of the same time, and judged as the learning
//! judges a source ([`crate::in_step`]: its own numbering, and as many frames per thread as the
//! boards over the VDIF times both cover and over their arrivals). In step, the station's rate is
//! split over the boards' threads and its — when it splits evenly and no board's frame was
//! numbered past the new rate per thread (issue 36: a fake thread cannot halve a station whose
//! frames count 1000) — and its held frames go out, in time order per thread; the rate check
//! starts again at the new split. Not in step, or no even split: refused, its held frames
//! counted `foreign_source`, as a source refused at the learning is. One newcomer at a time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use vdif::{FrameRate, VdifHeader};

use super::boards::{Board, HeldFrame, NOT_IN_STEP};
use super::Relay;
use crate::in_step::{compare, own_numbering, Evidence, Meter, Step};
use crate::rate_check::RateCheck;
use crate::thread_set::ThreadSet;
use crate::window::FrameSink;

/// Frames of a newcomer held, and of the boards kept beside them, at most.
pub(super) const NEWCOMER_FRAMES: usize = 2048;
/// A newcomer still undecided, or not in step, this long after its first frame is refused.
pub(super) const NEWCOMER_FOR: Duration = Duration::from_millis(500);
/// Why a newcomer in step whose threads do not split the station's rate is refused.
const NO_SPLIT: &str =
    "in step, but the station's rate does not split over its threads and the boards' (or a board's frames \
     are numbered past that split): not a board of it";

/// A source sending threads beyond a station's count, held while it is judged.
pub(super) struct Newcomer {
    pub(super) addr: SocketAddr,
    pub(super) threads: ThreadSet,
    since: Instant,
    held: Vec<HeldFrame>,
    /// The boards' frames since it came (header, arrival).
    boards: Vec<(VdifHeader, Instant)>,
}

impl Newcomer {
    pub(super) fn new(addr: SocketAddr, now: Instant) -> Newcomer {
        Newcomer {
            addr,
            threads: ThreadSet::default(),
            since: now,
            held: Vec::new(),
            boards: Vec::new(),
        }
    }

    /// When it is judged at the latest.
    pub(super) fn deadline(&self) -> Instant {
        self.since + NEWCOMER_FOR
    }

    /// A board's frame (`h`) taken at `now`: kept as evidence (the newest).
    pub(super) fn board_frame(&mut self, h: &VdifHeader, now: Instant) {
        if self.boards.len() >= NEWCOMER_FRAMES {
            self.boards.drain(..NEWCOMER_FRAMES / 2);
        }
        self.boards.push((*h, now));
    }

    /// Its frame, held (`false`: the hold is full, not held).
    pub(super) fn hold(&mut self, frame: HeldFrame) -> bool {
        if self.held.len() >= NEWCOMER_FRAMES {
            return false;
        }
        self.threads.insert(frame.header.thread_id);
        self.held.push(frame);
        true
    }

    /// How it compares with the boards sending `board_threads` threads, and whether its frames
    /// skip its own numbers (sparse alone, whatever the boards send).
    fn step(&self, board_threads: usize) -> (Step, bool) {
        let mine = Evidence::new(self.held.iter().map(|h| (&h.header, h.at)), self.threads.len());
        let boards = Evidence::new(self.boards.iter().map(|(h, at)| (h, *at)), board_threads);
        (compare(&boards, &mine), own_numbering(&mine) == Step::FirstSparse)
    }
}

/// What becomes of a newcomer.
enum Fate {
    Wait,
    /// A board: the station grows to this many threads (or has room already).
    Board(u16),
    Refused(&'static str),
}

impl Relay {
    /// Whether a frame from `from` refused by station `si`'s boards as beyond its threads makes
    /// `from` its newcomer: the threads were counted from a rate (not given), no newcomer is
    /// held, and `from` was not refused before.
    pub(super) fn may_grow(&self, si: usize, from: SocketAddr) -> bool {
        let st = &self.stations[si];
        st.known_threads.is_none()
            && st.station_rate.is_some()
            && st.newcomer.is_none()
            && !st.boards.refused.iter().any(|r| r.source == from.to_string())
    }

    /// Hold datagram `d`'s `frame`, arrived now on `input` from station `si`'s newcomer, and judge it.
    pub(super) fn hold_newcomer_frame(
        &mut self,
        now: Instant,
        si: usize,
        input: u16,
        d: &crate::wire::DataDatagram<'_>,
        frame: bytes::Bytes,
        tee: &mut impl FrameSink,
    ) {
        let held = HeldFrame {
            at: now,
            frame,
            header: d.header,
            source: 0,
            input,
        };
        self.hold_newcomer(now, si, held, tee);
    }

    /// Hold `frame` of station `si`'s newcomer and judge it.
    pub(super) fn hold_newcomer(&mut self, now: Instant, si: usize, frame: HeldFrame, tee: &mut impl FrameSink) {
        let Some(n) = self.stations[si].newcomer.as_mut() else {
            return;
        };
        if !n.hold(frame) {
            self.stations[si].counts.overflow_dropped += 1;
        }
        self.judge_newcomer(now, si, tee);
    }

    /// Judge station `si`'s newcomer at `now` (see the module docs).
    pub(super) fn judge_newcomer(&mut self, now: Instant, si: usize, tee: &mut impl FrameSink) {
        let st = &self.stations[si];
        let Some(n) = st.newcomer.as_ref() else {
            return;
        };
        let board_threads = st
            .boards
            .list
            .iter()
            .fold(ThreadSet::default(), |u, b| u.union(&b.threads));
        let over = now.saturating_duration_since(n.since) >= NEWCOMER_FOR || n.held.len() >= NEWCOMER_FRAMES;
        let all = board_threads.union(&n.threads).len();
        let (step, skips_own) = n.step(board_threads.len());
        let fate = match step {
            _ if skips_own => Fate::Refused(NOT_IN_STEP),
            // Judged by its arrivals while one of its late batches is still to be read, a board
            // looks sparse for a moment (net_port_multi at load 10: 1000 of 4000 frames refused):
            // refused only if it still is at the end of its hold.
            Step::SecondSparse if over => Fate::Refused(NOT_IN_STEP),
            Step::SecondSparse => Fate::Wait,
            _ if st.threads.ids().len() + n.threads.len() <= usize::from(st.thread_count) => {
                Fate::Board(st.thread_count)
            }
            Step::Alike => {
                let grown = st
                    .station_rate
                    .zip(u32::try_from(all).ok())
                    .filter(|(total, k)| *k > 0 && total % k == 0 && st.max_frame_number.is_none_or(|m| m < total / k));
                grown.map_or(Fate::Refused(NO_SPLIT), |_| Fate::Board(all as u16))
            }
            _ if over => Fate::Refused(NOT_IN_STEP),
            _ => Fate::Wait,
        };
        match fate {
            Fate::Wait => {}
            Fate::Refused(why) => self.refuse_newcomer(si, why),
            Fate::Board(threads) => self.seat_newcomer(now, si, threads, tee),
        }
    }

    /// Station `si`'s newcomer is refused for `why`: named, its held frames counted.
    pub(super) fn refuse_newcomer(&mut self, si: usize, why: &str) {
        let st = &mut self.stations[si];
        let Some(n) = st.newcomer.take() else {
            return;
        };
        self.counters.foreign_source += n.held.len() as u64;
        st.boards.refuse(n.addr, &n.threads, why);
        if let Some(r) = st.boards.refused.iter_mut().find(|r| r.source == n.addr.to_string()) {
            r.datagrams = n.held.len() as u64;
        }
        let name = st.counts.station.clone();
        self.problem(|| {
            format!(
                "station {name}: {} sends thread(s) {:?}, {why}: refused (not relayed, not recorded)",
                n.addr,
                n.threads.ids()
            )
        });
    }

    /// Station `si`'s newcomer is a board; the station has `threads` threads (grown, the
    /// station's rate split over them, when more than it had): its held frames go out.
    fn seat_newcomer(&mut self, now: Instant, si: usize, threads: u16, tee: &mut impl FrameSink) {
        let st = &mut self.stations[si];
        let Some(n) = st.newcomer.take() else {
            return;
        };
        // The station's total split over its threads (none when they outnumber its frames).
        let split = st
            .station_rate
            .filter(|_| threads > st.thread_count)
            .and_then(|total| Some((total, FrameRate::new(total / u32::from(threads)).ok()?)));
        if let Some((total, fps)) = split {
            let said = format!(
                "station {}: {} sends thread(s) {:?} in step with its boards, after its threads were counted: \
                 {threads} threads of {fps} frames/s from here on (was {} of {})",
                st.counts.station,
                n.addr,
                n.threads.ids(),
                st.thread_count,
                st.fps.get()
            );
            (st.fps, st.thread_count) = (fps, threads);
            st.threads = st.threads.resized(threads);
            st.counts.frames_per_second = fps;
            // Positions counted at the old rate do not compare with the new.
            st.last_pos.fill(u64::MAX);
            st.rate_check = Some(RateCheck::new(total, fps, crate::intake::MAX_THREADS, now));
            if let Some(stream) = st.stream {
                self.sender.set_split(stream, fps, threads);
            }
            self.notices.push_back(said);
        }
        let st = &mut self.stations[si];
        st.boards.list.push(Board {
            addr: n.addr,
            threads: n.threads,
            last_seen: now,
            meter: Meter::new(now),
        });
        let held: Vec<&HeldFrame> = n.held.iter().collect();
        st.count_input(&held);
        for h in &held {
            tee.frame(st.station_id, &h.frame, false);
            st.max_frame_number = Some(
                st.max_frame_number
                    .map_or(h.header.frame_number, |m| m.max(h.header.frame_number)),
            );
            match (st.threads.index(h.header.thread_id), st.queue.as_ref()) {
                (Some(_), Some(q)) => q.borrow_mut().push(h.at, h.frame.clone()),
                (Some(_), None) => {}
                (None, _) => st.counts.unexpected_thread += 1,
            }
        }
        for h in &n.held {
            self.taken_from(h.input, n.addr, &h.header);
        }
    }
}

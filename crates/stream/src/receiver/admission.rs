//! The table of sources not accepted yet: who may wait to deliver a run, for how long, and what
//! is held for them meanwhile, bounded however many sources a flood brings.
//!
//! A *source* is an address and the sender's session; its streams (one per station it sends) are
//! judged together: a datagram to any of them keeps the source in the table, so the stations of one
//! sender socket are confirmed together. (One entry per stream, evicted by the shortest run, let
//! the two stations of one socket evict each other forever under a flood of two-frame phantoms: 0
//! of 8000 frames written.) The table holds at most `sources` sources and `streams` streams, each
//! source at most `per_source` streams (one socket cannot crowd the table with station ids: its own
//! least recent stream goes). A new source takes the place of the one heard from least recently: a
//! sender is pushed out only if `sources` new sources arrive between two of its datagrams (64
//! within the 250 µs between the datagrams of a sender of two 128 Mb/s stations in 8000-byte
//! frames: a flood of 256 000 new sources a second), and a phantom that stopped after its few
//! frames is always older than a sender that keeps speaking. (Refusing new sources while every
//! place was taken by one heard from within 2 ms — a limit per round — was tried: it admits at most
//! 32 000 new sources a second, and a steady flood beyond that took every place the moment it
//! freed, so a new sender never got in; least recent first admits it up to the rate above.)
//!
//! Frames of a source are held until it is accepted (newest kept, [`HOLD_FRAMES`] per stream,
//! [`HOLD_BYTES`] in all: past that, the frames of the source heard from least recently go
//! first); the earliest one dropped is remembered, so an accepted station's window fills from
//! there instead of starting late.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use vdif::{FrameRate, VdifHeader};

use super::boards::Member;
use super::{describe, DatagramCounters, RUN_GAP};
use crate::in_step::Evidence;
use crate::thread_set::ThreadSet;
use crate::window::ThreadMap;

/// Most frames held for one stream of a source not accepted yet: the newest are kept, so what
/// is held joins the live frames that follow it.
pub(super) const HOLD_FRAMES: usize = 256;
/// Most bytes held over all such sources: a flood of them cannot grow memory.
pub(super) const HOLD_BYTES: usize = 32 << 20;

/// Datagram counters and the first problem in words, which the receiver and its admission
/// table both update.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) counters: DatagramCounters,
    pub(super) first_problem: Option<String>,
}

/// Keep the first reason a datagram was dropped. Formatted only while none is kept: the reasons
/// repeat per datagram, and a String per refused datagram was real work at line rate.
macro_rules! problem {
    ($tally:expr, $($arg:tt)*) => {
        if $tally.first_problem.is_none() {
            $tally.first_problem = Some(format!($($arg)*));
        }
    };
}
pub(super) use problem;

/// One frame of a source not accepted yet.
pub(super) struct Held {
    pub(super) seq: Option<u64>,
    pub(super) retransmit: bool,
    pub(super) header: VdifHeader,
    pub(super) frame: Vec<u8>,
    /// When it arrived (the window judges its time by it).
    pub(super) at: Instant,
}

/// One stream of a source that has not delivered its run yet: a new station, or a would-be
/// successor of an existing station's sender.
pub(super) struct Provisional {
    pub(super) key: u32,
    pub(super) stream: Option<u16>,
    pub(super) template: VdifHeader,
    pub(super) frame_len: usize,
    pub(super) fps: FrameRate,
    pub(super) threads: u16,
    /// What the native prefix announced (0 = nothing): a change means another stream. Kept as
    /// the prefix's integers (with threads 0 its rate is the station's, which may exceed 2^24).
    pub(super) announced: (u32, u16),
    /// Its stream had a station when it first spoke: a would-be successor (its refused
    /// datagrams are `foreign_source`), not a new station (`unconfirmed`).
    pub(super) beside: bool,
    /// It delivered its run but found no free slot: it waits for one (what it cannot hold is
    /// `too_many_stations`).
    pub(super) waiting: bool,
    /// It was refused as a board of its station (not in step with the station's boards, beside
    /// one, beyond its threads): its refused datagrams are `foreign_source`, and it is named in
    /// the station's `refused_sources`.
    pub(super) outsider: bool,
    pub(super) first_seen: Instant,
    pub(super) last_seen: Instant,
    pub(super) run: u32,
    last_pos: u64,
    last_slot: u64,
    /// The thread ids of the run so far (their index makes the slot).
    pub(super) threads_seen: ThreadMap,
    /// The thread ids it sent itself (`threads_seen` also holds, once learnt, those of the other
    /// boards of its station).
    pub(super) own: ThreadSet,
    /// The thread count is still to be learnt from the stream's frames.
    pub(super) learning: Option<ThreadCount>,
    /// The station's rate (all threads) its rate per thread was split from, once learnt: the
    /// frames' own count checks the split ([`crate::rate_check`]).
    pub(super) split_from: Option<u32>,
    pub(super) held: VecDeque<Held>,
    /// The earliest frame dropped from what is held (its time step, header) since the run
    /// began: the station's window is filled from there once it is accepted.
    pub(super) dropped_first: Option<(u64, VdifHeader)>,
}

/// Counting a stream's threads from its frames (a VSI-S mode gives the station's rate, not the
/// threads it is split over; a DBBC3 sends one per board). The ids seen are the stream's `own`.
pub(super) struct ThreadCount {
    /// Frames per second over all threads (an integer: a station's total may exceed the 2^24
    /// frames one thread's [`FrameRate`] can number).
    pub(super) station_fps: u32,
    /// A thread came round again: every thread of the interleaved stream has been seen.
    pub(super) cycled: bool,
}

impl Provisional {
    /// A stream whose first datagram (header `template`, `frame_len` bytes) arrived at `now`.
    #[allow(clippy::too_many_arguments)] // the shape of a stream, named, once
    pub(super) fn new(
        now: Instant,
        key: u32,
        stream: Option<u16>,
        template: VdifHeader,
        frame_len: usize,
        (fps, threads): (FrameRate, u16),
        announced: (u32, u16),
        beside: bool,
    ) -> Self {
        Provisional {
            key,
            stream,
            template,
            frame_len,
            fps,
            threads,
            announced,
            beside,
            waiting: false,
            outsider: false,
            first_seen: now,
            last_seen: now,
            run: 0,
            last_pos: 0,
            last_slot: 0,
            threads_seen: ThreadMap::new(threads),
            own: ThreadSet::default(),
            learning: None,
            split_from: None,
            held: VecDeque::new(),
            dropped_first: None,
        }
    }

    /// Learn the thread count of a stream whose station sends `station_fps` frames a second
    /// over all its threads: until then it is taken as one thread at that rate.
    pub(super) fn learning(mut self, station_fps: u32) -> Self {
        self.learning = Some(ThreadCount {
            station_fps,
            cycled: false,
        });
        self
    }

    /// A placeable frame at sequence number `seq` (or, without one, time slot `slot`) arrived:
    /// it extends the run when it advances it, restarts it after a jump.
    pub(super) fn extend_run(&mut self, seq: Option<u64>, slot: u64) {
        let pos = seq.unwrap_or(slot);
        let span = RUN_GAP * i64::from(self.threads);
        let step = pos.wrapping_sub(self.last_pos) as i64;
        let dslot = slot.wrapping_sub(self.last_slot) as i64;
        let (advancing, near) = match seq {
            // Sequence numbers count frames; the time must move along with them.
            Some(_) => ((1..=RUN_GAP).contains(&step) && dslot.abs() <= span, step.abs() <= span),
            None => ((1..=span).contains(&step), step.abs() <= span),
        };
        if self.run == 0 || advancing {
            self.run += 1;
            self.last_pos = pos;
            self.last_slot = slot;
        } else if !near {
            // A jump: the run starts again here. What is held stays (bounded): if this source
            // is accepted, its window sorts old and new out like any of its frames. What was
            // dropped before belongs to the old place: nothing is filled from there.
            self.run = 1;
            self.last_pos = pos;
            self.last_slot = slot;
            self.dropped_first = None;
        }
        // (A frame near the run but behind it — reordered, or a repeat — is held with the run
        // unchanged: once accepted, the window keeps the first copy and compares the others.)
    }

    /// Count `n` of its datagrams as refused: beside a live sender, waiting for a slot, or
    /// never confirmed.
    pub(super) fn count_refused(&self, c: &mut DatagramCounters, n: u64) {
        if self.beside || self.outsider {
            c.foreign_source += n;
        } else if self.waiting {
            c.too_many_stations += n;
        } else {
            c.unconfirmed += n;
        }
    }

    /// Drop its oldest held frame (`step_of` gives a header's time step); its bytes.
    fn drop_oldest(&mut self, c: &mut DatagramCounters, step_of: &impl Fn(&VdifHeader) -> u64) -> usize {
        let Some(old) = self.held.pop_front() else { return 0 };
        self.count_refused(c, 1);
        self.dropped(step_of(&old.header), old.header);
        old.frame.len()
    }

    /// A frame at time step `step` (header `header`) was not kept: remember the earliest.
    fn dropped(&mut self, step: u64, header: VdifHeader) {
        if self.dropped_first.is_none_or(|(s, _)| step < s) {
            self.dropped_first = Some((step, header));
        }
    }

    fn held_bytes(&self) -> usize {
        self.held.iter().map(|h| h.frame.len()).sum()
    }

    /// What its held frames show of it as a board ([`crate::in_step`]).
    pub(super) fn evidence(&self) -> Evidence {
        Evidence::new(self.held.iter().map(|h| (&h.header, h.at)), self.own.len())
    }

    /// Frames a second per thread over its held frames' arrivals once they span 2 ms (a batch
    /// read at once spans none), and whether that is measured (they span 20 ms, or as many are
    /// held as can be) or a first look.
    pub(super) fn rate_per_thread(&self) -> Option<(f64, bool)> {
        let (first, last) = (self.held.front()?, self.held.back()?);
        let threads = self.own.len().max(1) as f64;
        let span = last.at.saturating_duration_since(first.at);
        let full = self.held.len() >= HOLD_FRAMES;
        if span < Duration::from_millis(2) {
            return full.then_some((f64::MAX, true));
        }
        let rate = (self.held.len() - 1) as f64 / span.as_secs_f64() / threads;
        Some((rate, full || span >= crate::in_step::MEASURED))
    }
}

/// A sender (address and session) with streams not accepted yet.
pub(super) struct PendingSource {
    pub(super) addr: SocketAddr,
    pub(super) session: u16,
    /// Its latest datagram to any of its streams.
    last_seen: Instant,
    pub(super) streams: Vec<Provisional>,
}

/// Where a stream is in the table: source index, stream index. Valid until the table changes.
pub(super) type At = (usize, usize);

/// How much the table holds (see the module docs).
#[derive(Debug, Clone, Copy)]
struct Limits {
    sources: usize,
    streams: usize,
    per_source: usize,
}

/// The table of sources not accepted yet.
pub(super) struct Admission {
    sources: Vec<PendingSource>,
    streams: usize,
    held_bytes: usize,
    limits: Limits,
}

impl Admission {
    /// A table for a receiver taking `max_stations` stations.
    pub(super) fn new(max_stations: usize) -> Self {
        let m = max_stations.max(1);
        Admission {
            sources: Vec::new(),
            streams: 0,
            held_bytes: 0,
            limits: Limits {
                sources: (2 * m).max(64),
                streams: (4 * m).max(256),
                per_source: m,
            },
        }
    }

    /// The stream `(key, stream)` of source `(addr, session)`, if in the table.
    pub(super) fn find(&self, addr: SocketAddr, session: u16, key: u32, stream: Option<u16>) -> Option<At> {
        let si = self
            .sources
            .iter()
            .position(|s| s.addr == addr && s.session == session)?;
        let pi = self.sources[si]
            .streams
            .iter()
            .position(|p| p.key == key && p.stream == stream)?;
        Some((si, pi))
    }

    pub(super) fn get(&self, (si, pi): At) -> &Provisional {
        &self.sources[si].streams[pi]
    }

    pub(super) fn get_mut(&mut self, (si, pi): At) -> &mut Provisional {
        &mut self.sources[si].streams[pi]
    }

    /// The source of the stream at `at`: address and session.
    pub(super) fn source_of(&self, (si, _): At) -> (SocketAddr, u16) {
        (self.sources[si].addr, self.sources[si].session)
    }

    /// A datagram of the stream at `at` arrived at `now`: it and its source are live.
    pub(super) fn touch(&mut self, (si, pi): At, now: Instant) {
        let s = &mut self.sources[si];
        s.last_seen = s.last_seen.max(now);
        let p = &mut s.streams[pi];
        p.last_seen = p.last_seen.max(now);
    }

    /// The streams of station `key` from sources other than the one of `at`, with no station
    /// yet, that are counting their threads: the other boards of a backend, if they are in step
    /// with it (see the `learning` module). Only where nothing names the sender (jive5ab's and
    /// bare framing): a native stream is one sender's.
    pub(super) fn learning_streams(&self, key: u32, at: At) -> Vec<At> {
        let mut out = Vec::new();
        for (si, s) in self.sources.iter().enumerate() {
            if si == at.0 {
                continue;
            }
            for (pi, p) in s.streams.iter().enumerate() {
                if p.key == key && !p.beside && p.stream.is_none() && p.learning.is_some() {
                    out.push((si, pi));
                }
            }
        }
        out
    }

    /// A stream of station `key` that delivered its `run` with its threads counted to the same
    /// shape `(fps, threads)` (together with the station's first board), from a source that is
    /// none of `members`, sending threads none of them sends, with room beside theirs.
    pub(super) fn counted_board(&self, key: u32, shape: (FrameRate, u16), members: &[Member], run: u32) -> Option<At> {
        let taken = members.iter().fold(ThreadSet::default(), |u, m| u.union(&m.threads));
        self.sources.iter().enumerate().find_map(|(si, s)| {
            if members.iter().any(|m| m.source == s.addr && m.session == s.session) {
                return None;
            }
            let pi = s.streams.iter().position(|p| {
                p.key == key
                    && !p.beside
                    && !p.outsider
                    && p.learning.is_none()
                    && p.run >= run
                    && (p.fps, p.threads) == shape
                    && !p.own.overlaps(&taken)
                    && taken.union(&p.own).len() <= usize::from(shape.1)
            })?;
            Some((si, pi))
        })
    }

    /// Frames held for all sources.
    pub(super) fn held_frames(&self) -> usize {
        self.sources.iter().flat_map(|s| &s.streams).map(|p| p.held.len()).sum()
    }

    /// Streams in the table (for tests of the bounds).
    pub(super) fn len(&self) -> usize {
        self.streams
    }

    /// Put stream `p` of source `(addr, session)` in the table, making room by the rules of the
    /// module docs (streams quiet for `timeout` go first); where it is.
    #[allow(clippy::too_many_arguments)] // the stream, its source, and the rules for the table
    pub(super) fn insert(
        &mut self,
        now: Instant,
        addr: SocketAddr,
        session: u16,
        p: Provisional,
        timeout: Duration,
        source_run: u32,
        tally: &mut Tally,
    ) -> At {
        let full = |a: &Admission, si: Option<usize>| {
            a.streams >= a.limits.streams || (si.is_none() && a.sources.len() >= a.limits.sources)
        };
        let mut si = self.sources.iter().position(|s| s.addr == addr && s.session == session);
        if let Some(i) = si {
            if self.sources[i].streams.len() >= self.limits.per_source {
                // One socket crowding the table with station ids: its own least recent goes
                // (whatever its age: only that socket's own streams suffer).
                let victim = self.sources[i]
                    .streams
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, q)| q.last_seen)
                    .map(|(j, _)| j);
                if let Some(j) = victim {
                    self.drop_stream((i, j), source_run, tally);
                }
                si = self.sources.iter().position(|s| s.addr == addr && s.session == session);
            }
        }
        if full(self, si) {
            self.expire(now, timeout, source_run, tally);
            si = self.sources.iter().position(|s| s.addr == addr && s.session == session);
        }
        while full(self, si) {
            let keep = (addr, session);
            let victim = self
                .sources
                .iter()
                .enumerate()
                .filter(|(_, s)| (s.addr, s.session) != keep)
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(i, _)| i);
            let Some(v) = victim else { break };
            self.drop_source(v, source_run, tally);
            si = self.sources.iter().position(|s| s.addr == addr && s.session == session);
        }
        let si = match si {
            Some(i) => i,
            None => {
                self.sources.push(PendingSource {
                    addr,
                    session,
                    last_seen: now,
                    streams: Vec::new(),
                });
                self.sources.len() - 1
            }
        };
        let s = &mut self.sources[si];
        s.last_seen = s.last_seen.max(now);
        s.streams.push(p);
        self.streams += 1;
        (si, s.streams.len() - 1)
    }

    /// Hold `h` for the stream at `at`, within the bounds: its own oldest go past
    /// [`HOLD_FRAMES`], and past [`HOLD_BYTES`] those of the source heard from least recently
    /// (`step_of` gives a header's time step).
    pub(super) fn hold(
        &mut self,
        at: At,
        h: Held,
        step_of: &impl Fn(&VdifHeader) -> u64,
        counters: &mut DatagramCounters,
    ) {
        let len = h.frame.len();
        let p = self.get_mut(at);
        let mut freed = 0;
        while p.held.len() >= HOLD_FRAMES {
            freed += p.drop_oldest(counters, step_of);
        }
        self.held_bytes -= freed;
        while self.held_bytes + len > HOLD_BYTES {
            let Some(v) = self.least_recent_holding(at) else { break };
            let freed = self.get_mut(v).drop_oldest(counters, step_of);
            self.held_bytes -= freed;
        }
        let fits = self.held_bytes + len <= HOLD_BYTES;
        if fits {
            self.held_bytes += len;
        }
        let p = self.get_mut(at);
        if fits {
            p.held.push_back(h);
        } else {
            // Nothing else holds anything and this frame alone is past the bound: not held.
            p.count_refused(counters, 1);
            p.dropped(step_of(&h.header), h.header);
        }
    }

    /// The stream holding frames whose source was heard from least recently, preferring any
    /// other source over the one of `at`, then other streams over `at`.
    fn least_recent_holding(&self, at: At) -> Option<At> {
        let others = self
            .sources
            .iter()
            .enumerate()
            .filter(|(i, s)| *i != at.0 && s.streams.iter().any(|p| !p.held.is_empty()))
            .min_by_key(|(_, s)| s.last_seen)
            .and_then(|(i, s)| s.streams.iter().position(|p| !p.held.is_empty()).map(|j| (i, j)));
        others.or_else(|| {
            let own = &self.sources[at.0].streams;
            own.iter()
                .enumerate()
                .filter(|(j, p)| *j != at.1 && !p.held.is_empty())
                .min_by_key(|(_, p)| p.last_seen)
                .map(|(j, _)| (at.0, j))
                .or(Some(at).filter(|_| !own[at.1].held.is_empty()))
        })
    }

    /// Take the stream at `at` out of the table (accepted): what it holds goes with it.
    pub(super) fn take(&mut self, (si, pi): At) -> Provisional {
        let p = self.sources[si].streams.swap_remove(pi);
        self.streams -= 1;
        self.held_bytes -= p.held_bytes();
        if self.sources[si].streams.is_empty() {
            self.sources.swap_remove(si);
        }
        p
    }

    /// Stop holding frames for the stream at `at` (its station cannot be made now): they are
    /// counted refused.
    pub(super) fn release_held(&mut self, at: At, counters: &mut DatagramCounters) -> u64 {
        let p = self.get_mut(at);
        let n = p.held.len() as u64;
        let bytes = p.held_bytes();
        p.held.clear();
        p.count_refused(counters, n);
        self.held_bytes -= bytes;
        n
    }

    /// Forget the stream at `at`, counting what it held.
    pub(super) fn drop_stream(&mut self, at: At, source_run: u32, tally: &mut Tally) {
        let (addr, session) = self.source_of(at);
        let p = self.take(at);
        p.count_refused(&mut tally.counters, p.held.len() as u64);
        tally.counters.phantoms_dropped += 1;
        if p.waiting {
            return;
        }
        problem!(
            tally,
            "{} sent frames of stream {} that never formed a run of {}: dropped as stray",
            describe(addr, session),
            p.stream
                .map_or_else(|| p.template.station_id.to_string(), |s| s.to_string()),
            source_run
        );
    }

    /// Forget source `si` and all its streams.
    fn drop_source(&mut self, si: usize, source_run: u32, tally: &mut Tally) {
        for pi in (0..self.sources[si].streams.len()).rev() {
            // The source goes with its last stream, so drop from the end while it is there.
            self.drop_stream((si, pi), source_run, tally);
        }
    }

    /// Forget streams that sent nothing for `timeout`.
    pub(super) fn expire(&mut self, now: Instant, timeout: Duration, source_run: u32, tally: &mut Tally) {
        let mut si = self.sources.len();
        while si > 0 {
            si -= 1;
            let mut pi = self.sources[si].streams.len();
            while pi > 0 {
                pi -= 1;
                let quiet = now.saturating_duration_since(self.sources[si].streams[pi].last_seen);
                if quiet >= timeout {
                    // Dropping the source's last stream drops the source: nothing left to scan.
                    let last = self.sources[si].streams.len() == 1;
                    self.drop_stream((si, pi), source_run, tally);
                    if last {
                        break;
                    }
                }
            }
        }
    }

    /// Forget everything (end of the stream), counting what was held.
    pub(super) fn clear(&mut self, source_run: u32, tally: &mut Tally) {
        while let Some(last) = self.sources.len().checked_sub(1) {
            self.drop_source(last, source_run, tally);
        }
    }
}

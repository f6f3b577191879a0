//! The receiving side of `evlbi stream`, sans IO: datagrams in (with arrival time and source),
//! frames out to a [`FrameSink`] in time order per station, NAKs out when ARQ is on.
//!
//! Stations are told apart by the native stream index, or for jive5ab and bare framing by the
//! VDIF station id. Every datagram that is not a usable frame is counted by reason and dropped.
//!
//! Who feeds a station is decided by what the datagrams say, not by who spoke first. A *source*
//! (address, plus the sender session of native framing) becomes a station, or takes an existing
//! station over, only once it has delivered [`ReceiverConfig::source_run`] in-sequence frames of
//! one format; until then its frames are held (a bounded few) and written once it is accepted,
//! so a real sender loses nothing to the wait. A source that never forms a run — a stray, a
//! replay, a burst of phantom stations — takes no station slot and is forgotten after
//! [`ReceiverConfig::provisional_timeout`], its datagrams counted as `unconfirmed`. Sources
//! waiting for their run are kept in a bounded table that a flood of new sources cannot turn
//! over faster than a live sender speaks (see the `admission` module). A station's
//! sender is replaced only after it has been quiet for [`ReceiverConfig::source_quiet`]: a
//! restarted sender (new port, new session) is followed and the change counted, a second
//! sender beside a live one is refused (`foreign_source`).
//!
//! Slots (`max_stations`): a station silent for [`ReceiverConfig::station_timeout`] gives its
//! slot up when a new station needs it. A *tentative* station — one that received for less than
//! `source_quiet` and then went quiet for `source_quiet`, as a burst of five phantom frames does —
//! gives its slot to a new station that has been sending for `source_quiet`; meanwhile the new
//! station's frames are held (and what the bound let go is filled), so phantoms that grabbed the
//! slots first cost the real stations nothing. (Before, two such phantoms held both slots of
//! `--max-stations 2` for 10 s and the real stations got nothing.)

mod admission;
mod boards;
mod config;
mod learning;
pub(crate) mod pieces;
mod standing;
mod station;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use vdif::{FrameRate, StationId, VdifHeader};

use crate::arq::{NakConfig, NakScheduler};
use crate::intake::{count_wire_error, stream_shape};
use crate::rate_check::RateCheck;
pub use crate::results::{BoardSummary, DatagramCounters, RefusedSource, SenderChange, StationSummary};
use crate::window::{same_format, FrameSink, StationWindow, WindowStats};
use crate::wire::{parse_data_as, DataDatagram, Nak};
use admission::{problem, Admission, At, Held, Provisional, Tally};
use boards::{Joining, Member};
pub use config::{ReceiverConfig, SourceFilter, SourceFilterError};
use pieces::{FramePieces, Joined};
use station::{feed, feed_held, finish_station, summarize, window_config, Station};

/// Frames of a run may skip this many sequence numbers (a few lost on the path).
const RUN_GAP: i64 = 8;
/// Sender changes listed per station (all are counted).
const CHANGE_LOG: usize = 16;
/// Retired stations whose summaries are kept (a flood of confirmed runs cannot grow memory).
const RETIRED_KEPT: usize = 1024;
/// Sources refused as boards that are named (all are counted).
const REFUSED_KEPT: usize = 16;

/// A sender in words: address, and session when it gives one.
fn describe(source: SocketAddr, session: u16) -> String {
    if session == 0 {
        source.to_string()
    } else {
        format!("{source} session {session:04x}")
    }
}

/// The receiver state machine.
pub struct Receiver {
    cfg: ReceiverConfig,
    stations: Vec<Station>,
    /// Sources not accepted yet.
    admission: Admission,
    retired: Vec<StationSummary>,
    tally: Tally,
    /// The stream (station key) of the last datagram taken as a frame.
    last_key: Option<u32>,
    /// What the operator must act on now, said once (see [`Receiver::poll_notice`]).
    notice: Option<String>,
    /// The frame rate was missing once already (its notice given).
    told_no_frame_rate: bool,
    /// Sources refused as boards, by station id (see [`RefusedSource`]).
    refused: Vec<(StationId, RefusedSource)>,
    /// Mark5B frames that come split over datagrams (jive5ab's udps), joined here first.
    pieces: Option<FramePieces>,
    /// A frame joined from its pieces, as one datagram.
    joined: Vec<u8>,
}

impl Receiver {
    /// A receiver with no stations yet.
    pub fn new(cfg: ReceiverConfig) -> Self {
        let split_mark5b =
            cfg.frame_format == vdif::FrameFormat::Mark5b && cfg.format == crate::wire::SeqFormat::Jive5ab;
        Receiver {
            admission: Admission::new(cfg.max_stations),
            cfg,
            stations: Vec::new(),
            retired: Vec::new(),
            tally: Tally::default(),
            last_key: None,
            notice: None,
            told_no_frame_rate: false,
            refused: Vec::new(),
            pieces: split_mark5b.then(FramePieces::default),
            joined: Vec::new(),
        }
    }

    /// A sentence the operator must read now (once): a stream refused for a missing `--fps`.
    /// The caller prints it when it comes; `first_problem` and the counts hold it too.
    pub fn poll_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    /// Datagram counters.
    pub fn counters(&self) -> &DatagramCounters {
        &self.tally.counters
    }

    /// The first reason a datagram was dropped, in words (for the operator).
    pub fn first_problem(&self) -> Option<&str> {
        self.tally.first_problem.as_deref()
    }

    /// Streams of sources not accepted yet in the admission table (bounded however many
    /// sources a flood brings).
    pub fn pending_streams(&self) -> usize {
        self.admission.len()
    }

    /// When the data of `datagram` were sampled: its VDIF time, ns since 1970 (frame rate from
    /// the framing, `--fps` or the header); `None` for a datagram that is not a whole frame.
    /// Against the clock at arrival (`now_unix_ns`) it is the data's age — from a backend
    /// sending in real time, the latency of the whole path. A Mark5B time code names the day
    /// only modulo 1000: it is taken as the day of the 1000-day cycle nearest `now_unix_ns`, as
    /// jive5ab and SFXC resolve it.
    pub fn data_time_unix_ns(&self, datagram: &[u8], now_unix_ns: u64) -> Option<u64> {
        let d = parse_data_as(self.cfg.format, self.cfg.frame_format, datagram).ok()?;
        match self.cfg.frame_format {
            vdif::FrameFormat::Vdif => {
                let (fps, _) = crate::intake::stream_shape(&d, self.cfg.frames_per_second, None).ok()?;
                d.header.unix_nanos(fps)
            }
            vdif::FrameFormat::Mark5b => {
                let h = vdif::Mark5bHeader::parse(d.frame).ok()?;
                let now_s = i64::try_from(now_unix_ns / 1_000_000_000).ok()?;
                h.unix_nanos(self.cfg.frames_per_second?, now_s)
            }
        }
    }

    /// Stations receiving now (each holds a slot of `max_stations`).
    pub fn station_count(&self) -> usize {
        self.stations.len()
    }

    /// Frames not counted yet: held for sources not accepted yet, or by a window as candidates
    /// for a jump. Every datagram is in exactly one of [`DatagramCounters::rejected`], a
    /// station's window counters (placed, duplicates, duplicate_mismatch, late, wrong_format,
    /// out_of_range) or here; after [`Receiver::finish`] this is 0.
    pub fn in_flight(&self) -> u64 {
        let held = self.admission.held_frames();
        let candidates: usize = self.stations.iter().map(|s| s.window.pending()).sum();
        (held + candidates) as u64
    }

    /// Sender changes over all stations so far (for live lines).
    pub fn sender_changes(&self) -> u64 {
        self.stations.iter().map(|s| s.changes).sum::<u64>()
            + self.retired.iter().map(|s| s.sender_changes).sum::<u64>()
    }

    /// The window counters summed over all stations (for live lines).
    pub fn window_totals(&self) -> WindowStats {
        let mut t = WindowStats::default();
        for st in &self.stations {
            t.add(st.window.stats());
        }
        for r in &self.retired {
            t.add(&r.window);
        }
        t
    }

    /// One datagram arrived at `now` from `from`; `truncated` when the kernel cut it.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        truncated: bool,
        sink: &mut impl FrameSink,
    ) {
        self.handle_datagram_arrived(now, now, from, datagram, truncated, sink);
    }

    /// [`Receiver::handle_datagram`] read at `now` of a datagram that arrived at `arrived` (the
    /// kernel's receive time, earlier when the reading loop was held off its core): the station's
    /// window judges the frame by when it came, so frames queued behind a gap the socket's
    /// overflow left are read as the stream they were (the gap took its own time to be sent),
    /// not as a burst ahead of it that no wall time explains.
    pub fn handle_datagram_arrived(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        datagram: &[u8],
        truncated: bool,
        sink: &mut impl FrameSink,
    ) {
        self.tally.counters.datagrams += 1;
        self.tally.counters.bytes += datagram.len() as u64;
        if let Some(pieces) = self.pieces.as_mut() {
            if !truncated {
                let mut joined = std::mem::take(&mut self.joined);
                let d = &mut self.tally.counters;
                let lost = (d.split_frames_incomplete, d.split_datagrams_unplaced);
                let outcome = pieces.offer(from, datagram, &mut joined, d);
                if (d.split_frames_incomplete, d.split_datagrams_unplaced) != lost {
                    let (incomplete, unplaced) = (d.split_frames_incomplete, d.split_datagrams_unplaced);
                    problem!(
                        self.tally,
                        "Mark5B stream in pieces from {from}: {incomplete} frame(s) never came whole, {unplaced} datagram(s) could not be placed"
                    );
                }
                for frame in joined.chunks_exact(pieces::JOINED_LEN) {
                    self.take_datagram(now, arrived, from, frame, false, sink);
                }
                self.joined = joined;
                if outcome == Joined::Taken {
                    return;
                }
            }
        }
        self.take_datagram(now, arrived, from, datagram, truncated, sink);
    }

    /// A datagram that is (or was joined into) one frame: to its station.
    fn take_datagram(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        datagram: &[u8],
        truncated: bool,
        sink: &mut impl FrameSink,
    ) {
        let Some(d) = self.screen(from, datagram, truncated) else {
            return;
        };
        // A station is its VDIF station id, whoever sends it: independent senders (relays of
        // different stations, each numbering its streams from 0) never collide, and a sender
        // that restarts with another stream index still takes its station over. The native
        // stream index is the sender's name for it (what its NAKs must carry).
        let key = u32::from(d.header.station_id.0);
        let session = d.native.map_or(0, |n| n.session);
        let stream = d.native.map(|n| n.stream);
        self.last_key = Some(key);
        let owner = self.stations.iter().enumerate().find_map(|(i, s)| {
            if s.key != key || s.stream != stream {
                return None;
            }
            let m = s
                .members
                .iter()
                .position(|m| m.source == from && m.session == session)?;
            Some((i, m))
        });
        match owner {
            Some((idx, member)) => self.feed_owner(idx, member, now, arrived.min(now), &d, sink),
            // A source not accepted yet is judged on when its datagrams came, not when they
            // were read: its rate, its boards' being in step, how long it has been counted and
            // who went quiet meanwhile (a loop held off its core for 50 ms read a genuine
            // board's second frame 50 ms after its first and refused it as 20 frames/s).
            None => self.provisional(arrived.min(now), from, key, session, &d, sink),
        }
    }

    /// The datagram parsed, or `None` when it is refused before reaching a stream (cut by the
    /// kernel, not from the `--from` source, not a data datagram of the framing): counted, and
    /// the first such problem kept.
    fn screen<'d>(&mut self, from: SocketAddr, datagram: &'d [u8], truncated: bool) -> Option<DataDatagram<'d>> {
        if truncated {
            self.tally.counters.oversized += 1;
            problem!(
                self.tally,
                "{} byte datagram from {from} larger than the receive buffer",
                datagram.len()
            );
            return None;
        }
        if self.cfg.from.is_some_and(|f| !f.admits(from)) {
            self.tally.counters.foreign_source += 1;
            problem!(self.tally, "datagram from {from}, not from the --from address");
            return None;
        }
        match parse_data_as(self.cfg.format, self.cfg.frame_format, datagram) {
            Ok(d) => Some(d),
            Err(e) => {
                count_wire_error(&mut self.tally.counters, &e);
                problem!(self.tally, "datagram from {from}: {e}");
                None
            }
        }
    }

    /// A datagram from `member`, a source feeding station `idx`: into its window.
    fn feed_owner(
        &mut self,
        idx: usize,
        member: usize,
        now: Instant,
        arrived: Instant,
        d: &DataDatagram<'_>,
        sink: &mut impl FrameSink,
    ) {
        let st = &mut self.stations[idx];
        st.last_seen = now;
        let m = &mut st.members[member];
        m.last_seen = now;
        m.threads.insert(d.header.thread_id);
        let retransmit = d.native.is_some_and(|n| n.retransmit);
        if let Some(said) = feed(
            st, &self.cfg, member, arrived, now, d.seq, retransmit, &d.header, d.frame, sink,
        ) {
            problem!(self.tally, "{said}");
        }
    }

    /// The station's rate a new stream's rate per thread is split from, its threads counted
    /// from its frames ([`crate::intake::station_rate_to_split`]): only the station's rate is
    /// known (a VSI-S mode, or a relay's announcement of one), not the thread count or the rate
    /// per thread.
    fn station_rate_to_split(&self, d: &DataDatagram<'_>) -> Option<vdif::FrameRate> {
        let c = &self.cfg;
        crate::intake::station_rate_to_split(d, c.frames_per_second, c.threads, c.station_frames_per_second)
    }

    /// Frame rate and threads of a stream's first datagram, or `None` (counted) when unknown or
    /// beyond what VDIF can express (they size a window). While its threads are counted, the
    /// station's rate over one thread.
    fn shape(&mut self, from: SocketAddr, d: &DataDatagram<'_>) -> Option<(FrameRate, u16)> {
        if let Some(total) = self.station_rate_to_split(d) {
            return stream_shape(d, Some(total), Some(1)).ok();
        }
        // Untrusted numbers size the window: kept within what VDIF can express. (Thread ids are
        // not checked against the count: a stream's threads are whatever ids it shows, up to its
        // count; see ThreadMap.)
        match stream_shape(d, self.cfg.frames_per_second, self.cfg.threads) {
            Ok(shape) => Some(shape),
            Err(e) => {
                e.count(&mut self.tally.counters);
                let what = e.describe(&d.header.station_id.to_string(), from);
                // Without a frame rate every frame is refused until the options change: say it
                // at the first (issue 29: it was said only when the receiver stopped).
                if e == crate::intake::ShapeError::NoFrameRate && !self.told_no_frame_rate {
                    self.told_no_frame_rate = true;
                    self.notice = Some(format!("{what}; every frame of it is refused until then"));
                }
                problem!(self.tally, "{}", what);
                None
            }
        }
    }

    /// Forget sources that sent nothing for `provisional_timeout` (call now and then; the
    /// receiver also does it whenever a new source appears).
    pub fn expire(&mut self, now: Instant) {
        let (timeout, run) = (self.cfg.provisional_timeout, self.cfg.source_run);
        self.admission.expire(now, timeout, run, &mut self.tally);
    }

    /// A datagram of a source that does not own its stream.
    fn provisional(
        &mut self,
        now: Instant,
        from: SocketAddr,
        key: u32,
        session: u16,
        d: &DataDatagram<'_>,
        sink: &mut impl FrameSink,
    ) {
        let Some(at) = self.pending_for(now, from, key, session, d) else {
            return;
        };
        self.admission.touch(at, now);
        if self.admission.get(at).outsider {
            self.count_refused_source(at);
        }
        let p = self.admission.get_mut(at);
        let (fps, threads) = (p.fps, p.threads);
        let thread = match p.learning.as_mut() {
            // Counting threads: every frame is the one thread at the station's rate for now.
            Some(l) => {
                l.cycled |= p.own.contains(d.header.thread_id);
                p.own.insert(d.header.thread_id);
                Some(0)
            }
            None => p.threads_seen.index(d.header.thread_id),
        };
        let (Some(thread), true) = (thread, d.header.frame_number < fps.get()) else {
            // Not placeable in this stream: a thread beyond its count, or a frame number beyond
            // its rate (the window would refuse it too).
            p.count_refused(&mut self.tally.counters, 1);
            if d.header.frame_number < fps.get() {
                let name = d.header.station_id.to_string();
                problem!(
                    self.tally,
                    "station {name}: thread {} beyond the {threads} thread(s) expected (pass --threads)",
                    d.header.thread_id
                );
            }
            return;
        };
        let slot = d.header.frame_index(fps) * u64::from(threads) + u64::from(thread);
        let p = self.admission.get_mut(at);
        p.own.insert(d.header.thread_id);
        p.extend_run(d.seq, slot);
        let held = Held {
            seq: d.seq,
            retransmit: d.native.is_some_and(|n| n.retransmit),
            header: d.header,
            frame: d.frame.to_vec(),
            at: now,
        };
        let step_of = |h: &VdifHeader| h.frame_index(fps);
        self.admission.hold(at, held, &step_of, &mut self.tally.counters);
        if self.admission.get(at).run >= self.cfg.source_run.max(1) && self.threads_counted(at, now) {
            self.accept(at, now, sink);
        }
    }

    /// Where in the admission table this datagram's stream is, put there when new (`None`,
    /// counted, when its stream's shape is unknown or implausible). Another format or announced
    /// shape from the same source is another stream: the old one is dropped and this starts
    /// over.
    fn pending_for(
        &mut self,
        now: Instant,
        from: SocketAddr,
        key: u32,
        session: u16,
        d: &DataDatagram<'_>,
    ) -> Option<At> {
        let announced = d.native.map_or((0, 0), |n| (n.frames_per_second, n.threads));
        let stream = d.native.map(|n| n.stream);
        if let Some(at) = self.admission.find(from, session, key, stream) {
            let p = self.admission.get(at);
            if same_format(&d.header, &p.template) && d.frame.len() == p.frame_len && announced == p.announced {
                return Some(at);
            }
            self.admission.drop_stream(at, self.cfg.source_run, &mut self.tally);
        }
        let shape = self.shape(from, d)?;
        let beside = self.stations.iter().any(|s| s.key == key);
        let mut p = Provisional::new(now, key, stream, d.header, d.frame.len(), shape, announced, beside);
        if self.station_rate_to_split(d).is_some() {
            p = p.learning(shape.0.get());
        }
        let (timeout, run) = (self.cfg.provisional_timeout, self.cfg.source_run);
        Some(
            self.admission
                .insert(now, from, session, p, timeout, run, &mut self.tally),
        )
    }

    /// The stream at `at` has delivered its run: make it a station, another board of its
    /// station, or the successor of a sender of it gone quiet (see the `boards` module).
    fn accept(&mut self, at: At, now: Instant, sink: &mut impl FrameSink) {
        let key = self.admission.get(at).key;
        if let Some(si) = self.stations.iter().position(|s| s.key == key) {
            if !self.join(si, at, now, sink) {
                return;
            }
        }
        if self.stations.len() >= self.cfg.max_stations && !self.free_slot(at, now, sink) {
            return;
        }
        let (source, session) = self.admission.source_of(at);
        let p = self.admission.take(at);
        let mut st = self.new_station(&p, source, session, now);
        if let Some((_, first)) = p.dropped_first {
            // Frames of it were let go while it waited: its time line starts where it did.
            st.window.begins_at(&first);
        }
        // The other boards counted with it join now, and every board's held frames go in by
        // arrival: fed one board after the other, the first's newest would write out the
        // window's oldest before the second's frames of that time came in (late, dropped).
        let mut held: Vec<(usize, Held)> = p.held.into_iter().map(|h| (0, h)).collect();
        let run = self.cfg.source_run.max(1);
        let mut first_seen = vec![p.first_seen];
        while let Some(b) = self
            .admission
            .counted_board(p.key, (p.fps, p.threads), &st.members, run)
        {
            let (source, session) = self.admission.source_of(b);
            let q = self.admission.take(b);
            st.members.push(Member::new(source, session, q.own, now));
            first_seen.push(q.first_seen);
            held.extend(q.held.into_iter().map(|h| (st.members.len() - 1, h)));
        }
        // The boards in the order they began to send (whichever was judged first).
        let mut order: Vec<usize> = (0..st.members.len()).collect();
        order.sort_by_key(|&i| first_seen[i]);
        let mut place = vec![0; order.len()];
        for (to, &from) in order.iter().enumerate() {
            place[from] = to;
        }
        let mut members: Vec<Option<Member>> = std::mem::take(&mut st.members).into_iter().map(Some).collect();
        st.members = order.iter().filter_map(|&i| members[i].take()).collect();
        for (m, _) in held.iter_mut() {
            *m = place[*m];
        }
        held.sort_by_key(|(_, h)| h.at);
        for (m, h) in held {
            if let Some(said) = feed_held(&mut st, &self.cfg, m, &h, now, sink) {
                problem!(self.tally, "{said}");
            }
        }
        self.stations.push(st);
    }

    /// Free a slot for the stream at `at`, which has delivered its run while every slot is
    /// taken: a station silent for `station_timeout` gives its up, or a tentative one gone quiet
    /// (see the module docs) once this stream has sent for `source_quiet`. Otherwise it waits,
    /// holding its newest frames, while a tentative station may still give way, and is refused
    /// (counted `too_many_stations`) when none can.
    fn free_slot(&mut self, at: At, now: Instant, sink: &mut impl FrameSink) -> bool {
        if self.retire_idle(now, sink) {
            return true;
        }
        let quiet = self.cfg.source_quiet;
        let tentative = |s: &Station| s.last_seen.saturating_duration_since(s.first_seen) < quiet;
        let p = self.admission.get(at);
        let (name, live_for) = (
            p.template.station_id.to_string(),
            now.saturating_duration_since(p.first_seen),
        );
        if live_for >= quiet {
            let gone = self
                .stations
                .iter()
                .enumerate()
                .filter(|(_, s)| tentative(s) && now.saturating_duration_since(s.last_seen) >= quiet)
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(i, _)| i);
            if let Some(i) = gone {
                let s = &self.stations[i];
                problem!(
                    self.tally,
                    "station {} from {} sent for {} ms only and went quiet: its slot went to station {name}",
                    s.station_id.to_string(),
                    describe(s.members[0].source, s.members[0].session),
                    s.last_seen.saturating_duration_since(s.first_seen).as_millis()
                );
                self.retire_tentative(i, sink);
                return true;
            }
        }
        let (source, session) = self.admission.source_of(at);
        let from = describe(source, session);
        self.admission.get_mut(at).waiting = true;
        if !self.stations.iter().any(tentative) {
            // Every slot is held by an established station: refused now, and so is each later
            // frame (a slot may free up meanwhile, so the stream stays known).
            self.admission.release_held(at, &mut self.tally.counters);
        }
        problem!(
            self.tally,
            "station {name} from {from} beyond --max-stations {}",
            self.cfg.max_stations
        );
        false
    }

    /// The stream at `at` has delivered its run for station `si`, which has sources already:
    /// it joins as another board, takes the place of a board gone quiet (or of all of them, or of
    /// one that delivers under half its share: see the `standing` module), or is refused beside a
    /// live one. `true` when the station was retired for it to start anew: every source of it
    /// went quiet and this one's threads do not fit its window (a backend set up with other
    /// threads; following it into the old window refused all its frames), or its frames showed
    /// the station's split of the mode's rate wrong.
    fn join(&mut self, si: usize, at: At, now: Instant, sink: &mut impl FrameSink) -> bool {
        let (source, session) = self.admission.source_of(at);
        let (member, succeeds) = match self.standing(si, at, now, sink) {
            Err(restarted) => return restarted,
            Ok(Joining::Beside(i)) => {
                self.refuse_beside(si, at, i);
                return false;
            }
            Ok(Joining::NoRoom) => {
                self.refuse_no_room(si, at);
                return false;
            }
            Ok(Joining::Joins) => (None, false),
            Ok(Joining::Replaces(i)) => (Some(i), false),
            Ok(Joining::Succeeds) if !self.room(si, at) => {
                self.retire(si, sink);
                return true;
            }
            Ok(Joining::Succeeds) => (Some(0), true),
        };
        let p = self.admission.take(at);
        let st = &mut self.stations[si];
        let m = match member {
            None => {
                st.members.push(Member::new(source, session, p.own, now));
                st.members.len() - 1
            }
            Some(i) => {
                let old = &st.members[i];
                let change = SenderChange {
                    from: describe(old.source, old.session),
                    to: describe(source, session),
                    restarted: old.source.ip().to_canonical() == source.ip().to_canonical(),
                };
                st.changes += 1;
                if st.change_log.len() < CHANGE_LOG {
                    st.change_log.push(change);
                }
                if succeeds {
                    // Every source of it went quiet: the station is this one's now.
                    st.members.truncate(1);
                }
                let m = &mut st.members[i];
                (m.source, m.session, m.last_seen) = (source, session, now);
                m.meter = crate::in_step::Meter::new(now);
                // What it sends now (its frames add to it): the old board's threads, kept, would
                // make a restarted backend's other boards "beside" it.
                m.threads = p.own;
                // The new sender's name for the stream (its NAKs must carry it).
                st.stream = p.stream;
                // A restart numbers its frames anew: the old numbering cannot be asked for.
                if let Some(arq) = st.arq.as_mut() {
                    arq.restart();
                }
                i
            }
        };
        st.last_seen = now;
        let said: Vec<String> = p
            .held
            .iter()
            .filter_map(|h| feed_held(st, &self.cfg, m, h, now, sink))
            .collect();
        for said in said {
            problem!(self.tally, "{said}");
        }
        false
    }

    /// A station for accepted stream `p` of `source` (`session`): its window sized for the
    /// latency (within the memory bound), NAKs when ARQ is on and the framing numbers the stream.
    fn new_station(&self, p: &Provisional, source: SocketAddr, session: u16, now: Instant) -> Station {
        let wcfg = window_config(&self.cfg, p.fps, p.threads, p.frame_len);
        let window = wcfg.window;
        let arq = (self.cfg.arq && p.stream.is_some()).then(|| {
            NakScheduler::new(NakConfig {
                stream: p.stream.unwrap_or(0),
                initial_rtt: self.cfg.latency / 3,
                reorder_grace: Duration::from_micros(500),
                max_tracked: window as usize,
            })
        });
        Station {
            key: p.key,
            members: vec![Member::new(source, session, p.own, now)],
            first_seen: p.first_seen,
            last_seen: now,
            stream: p.stream,
            station_id: p.template.station_id,
            window: StationWindow::new(wcfg, &p.template).with_format(self.cfg.frame_format),
            arq,
            retransmits: 0,
            changes: 0,
            change_log: Vec::new(),
            lost_at_end: 0,
            rate_check: p
                .split_from
                .map(|total| RateCheck::new(total, p.fps, crate::intake::MAX_THREADS, now)),
            split_from: p.split_from,
            silence: None,
            flushed: None,
        }
    }

    /// Free the slot of the station silent longest, if silent for `station_timeout`.
    fn retire_idle(&mut self, now: Instant, sink: &mut impl FrameSink) -> bool {
        let idle = self
            .stations
            .iter()
            .enumerate()
            .map(|(i, s)| (i, now.saturating_duration_since(s.last_seen)))
            .filter(|(_, d)| *d >= self.cfg.station_timeout)
            .max_by_key(|(_, d)| *d)
            .map(|(i, _)| i);
        let Some(i) = idle else { return false };
        self.retire(i, sink);
        true
    }

    /// Station `i` gives its slot up: its window is written out and its file ends (a return
    /// starts a new one).
    fn retire(&mut self, i: usize, sink: &mut impl FrameSink) {
        let mut st = self.stations.remove(i);
        finish_station(&mut st, sink);
        sink.discontinuity(st.station_id);
        let mut summary = summarize(&st);
        summary.retired = true;
        if self.retired.len() < RETIRED_KEPT {
            self.retired.push(summary);
        }
    }

    /// Tentative station `i` (a burst of phantom frames) gives its slot up: what its window
    /// still holds is not written when it wrote nothing yet (its frames are counted placed in its
    /// summary): a phantom that held a slot for a moment got a file of its 5 frames. A station
    /// that wrote already is retired as any other (its file ends).
    fn retire_tentative(&mut self, i: usize, sink: &mut impl FrameSink) {
        let w = self.stations[i].window.stats();
        if w.written_valid + w.written_filled > 0 {
            return self.retire(i, sink);
        }
        let mut st = self.stations.remove(i);
        st.window.abandon();
        let mut summary = summarize(&st);
        summary.retired = true;
        if self.retired.len() < RETIRED_KEPT {
            self.retired.push(summary);
        }
    }

    /// For a live reader ([`ReceiverConfig::fill_silence_after`]): a station quiet for twice the
    /// reorder latency has what its window holds written out; one that sent nothing for
    /// `fill_silence_after` has its stream go on at its rate, from its newest frame, as filled
    /// invalid frames (the window's [`StationWindow::advance_to`]) lagging the time since by
    /// the same `fill_silence_after`, so frames of a station that comes back on time land after
    /// them. Call often (every turn of the receive loop).
    pub fn fill_silence(&mut self, now: Instant, sink: &mut impl FrameSink) {
        let Some(after) = self.cfg.fill_silence_after else {
            return;
        };
        for st in &mut self.stations {
            let idle = now.saturating_duration_since(st.last_seen);
            let Some(highest) = st.window.highest() else {
                continue;
            };
            // A quiet moment of twice the reorder latency: what the window holds goes out now
            // (its holes filled, as they would be by the next frame), not after `after`.
            if idle >= 2 * self.cfg.latency && st.flushed != Some(st.last_seen) {
                st.window.flush(sink);
                st.flushed = Some(st.last_seen);
            }
            if idle < after {
                continue;
            }
            let from = match st.silence {
                Some((since, slot)) if since == st.last_seen => slot,
                _ => {
                    st.silence = Some((st.last_seen, highest));
                    highest
                }
            };
            let c = st.window.config();
            let slots_per_s = f64::from(c.frames_per_second) * f64::from(c.threads);
            let ahead = ((idle - after).as_secs_f64() * slots_per_s) as u64;
            st.window.advance_to(from + ahead, sink);
        }
    }

    /// NAKs to send now, with their destinations.
    pub fn poll_naks(&mut self, now: Instant) -> Vec<(SocketAddr, Nak)> {
        let mut out = Vec::new();
        for st in &mut self.stations {
            let (Some(arq), Some(base)) = (st.arq.as_mut(), st.window.base()) else {
                continue;
            };
            let c = st.window.config();
            let slots_per_s = f64::from(c.frames_per_second) * f64::from(c.threads);
            let front = st.window.highest().map_or(base, |h| (h + 1).saturating_sub(c.window));
            if let Some(nak) = arq.poll(now, base, front, slots_per_s) {
                out.push((st.members[0].source, nak));
            }
        }
        out
    }

    /// End of the stream: write out every window; sources never accepted are counted.
    pub fn finish(&mut self, sink: &mut impl FrameSink) {
        for st in &mut self.stations {
            finish_station(st, sink);
        }
        self.admission.clear(self.cfg.source_run, &mut self.tally);
    }

    /// After [`Receiver::finish`]: the host dropped `n` datagrams at the socket after the last one
    /// it delivered (its drop counter at the end less the count the last datagram carried). A
    /// gap inside the stream is seen when a later frame arrives and is written filled; these came
    /// after the last frame, so nothing reveals them and f would leave them out (an 8.4 % loss
    /// reported as f = 7.7 % when a writer stall lost a run's last frames). They are counted as
    /// the station's `lost_at_end` when one station is receiving and the last datagram was its
    /// own; with several the socket cannot say whose they were and `false` is returned.
    pub fn lost_at_end(&mut self, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        match (&mut self.stations[..], self.last_key) {
            ([st], Some(key)) if st.key == key => {
                st.lost_at_end += n;
                true
            }
            _ => false,
        }
    }

    /// Per-station results so far (stations that gave their slot up first); the sources each
    /// station refused as boards are listed with its newest summary.
    pub fn summaries(&self) -> Vec<StationSummary> {
        let mut all: Vec<StationSummary> = self
            .retired
            .iter()
            .cloned()
            .chain(self.stations.iter().map(summarize))
            .collect();
        for (id, r) in &self.refused {
            if let Some(s) = all.iter_mut().rev().find(|s| s.station_id == *id) {
                s.refused_sources.push(r.clone());
            }
        }
        all
    }
}

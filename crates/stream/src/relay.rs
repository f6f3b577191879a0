//! The relay as a state machine: a station's backend datagrams in (several inputs, several
//! senders each), the same frames out to one destination, paced, repeated on NAK.
//!
//! Sans-IO like [`crate::Sender`], which it drives for the output side: the caller reads the
//! sockets and the clock, hands every input datagram to [`Relay::handle_datagram`] (which also
//! gives each valid frame to the tee, exactly as it came) and sends what
//! [`Relay::poll_transmit`] returns.
//!
//! - **Input** is counted per sender (input, address) the way jive5ab's `udpsnor` does: datagrams,
//!   lost (from the packet serial numbers), reordered, and the reordering extent of RFC 4737 §4.2.2
//!   (over the last [`EXTENT_HISTORY`] serial numbers). Every datagram that is not a frame is
//!   counted by reason ([`DatagramCounters`]) and dropped. The report is bounded: the
//!   [`REPORTED_SENDERS`] senders that gave the most frames one by one, the rest summed
//!   ([`OtherSenders`]); a flood of new source ports (256 phantom senders printed 256 lines)
//!   costs one line. At most [`MAX_SENDERS`] are counted one by one; past that, the one heard
//!   from least recently among those that sent fewer than [`SOURCE_RUN`] datagrams or have been
//!   quiet for [`PHANTOM_AFTER`] is summed into the rest to make room, so a real sender arriving
//!   during a flood is counted from its first datagram (and kept alive with `--ack`).
//! - **Stations** are told apart by the VDIF station id; each keeps its threads continuous, and
//!   counts the frames missing in the input per thread (from the VDIF time; nothing is invented).
//!   Several senders (boards) may feed one station, each with its own threads.
//! - **A new station** is relayed once it has delivered [`SOURCE_RUN`] frames of one format (held
//!   meanwhile, nothing lost): a stray or forged datagram carrying its id takes nothing from the
//!   real stream, and a candidate without a run is forgotten after [`PHANTOM_AFTER`] (its
//!   frames counted `unconfirmed`). Its **threads** are `--threads`, or what a native prefix
//!   announces, or learned from those first frames (the ids seen until the time has advanced by
//!   [`LEARN_SKEW`], or [`LEARN_FOR`], or a full hold);
//!   the output announces that count. A thread appearing later is counted and not forwarded
//!   (the receiver could not place it), though the tee keeps it.
//! - **Pacing** (`LiveQueue`): frames sit on a smooth timeline that follows their arrivals: a
//!   frame's place is when it came, but at least one frame spacing (the data rate from the
//!   headers, or `rate_bps`, with [`PACE_HEADROOM`]) after the previous frame's place, so a burst in is smoothed out; a
//!   frame that would wait longer than `smoothing` takes a `catch_up` × rate spacing instead. A
//!   frame leaves at its place, never sooner than a catch-up spacing after the previous
//!   departure — the sender's catch-up rule: a backlog never goes at line rate. The timeline
//!   follows the input, so a backend clock that differs from ours accumulates no drift.
//! - **Memory** is bounded by `buffer_bytes`: when a station's queue is full its oldest frame is
//!   dropped and counted (`overflow_dropped`).

mod boards;
mod growth;
mod mark5b;
mod queue;
mod senders;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use histogram::DEFAULT_MAX_BUCKETS;
use vdif::{FrameRate, StationId};

use crate::in_step::Meter;
use crate::intake::{count_wire_error, stream_shape};
use crate::rate_check::{RateCheck, Verdict};
use crate::receiver::SourceFilter;
pub use crate::results::RelayedStation;
use crate::results::{DatagramCounters, SentStation};
use crate::sender::{Sender, SenderConfig, SenderError, StationSpec, Transmit};
use crate::thread_set::ThreadSet;
use crate::window::{FrameSink, ThreadMap};
use crate::wire::{parse_data, DataDatagram, SeqFormat};
use boards::{Board, Boards, HeldFrame, LearnSource, LEARN_SOURCES};
use mark5b::Mark5bRelay;
pub use mark5b::MARK5B_STREAM_NAME;
pub use queue::LiveSchedule;
use queue::{LiveQueue, LiveSource};
use senders::SenderTable;
pub use senders::{InputSender, OtherSenders, EXTENT_HISTORY, MAX_SENDERS, REPORTED_SENDERS};

/// Longest a station's thread set is learned before its frames go out.
pub const LEARN_FOR: Duration = Duration::from_millis(20);
/// The smooth timeline runs this much faster than the data rate. A queue served at exactly its
/// arrival rate has no drift to empty it: every jitter of the input would add up (a random walk)
/// until frames waited the whole `smoothing` allowance. 5 % headroom keeps the wait near the
/// input's own jitter, and a burst still leaves at nearly the data rate.
pub const PACE_HEADROOM: f64 = 1.05;
/// Frames held per station while its threads are learned; a full hold ends the learning.
const LEARN_FRAMES: usize = 1024;
pub use crate::intake::LEARN_SKEW;
/// Frames a new station must deliver before it is relayed: a stray or a forged datagram with a
/// station's id never takes the station (or its format) from the real stream.
pub const SOURCE_RUN: usize = 4;
/// A candidate that has not delivered its run is forgotten after this long.
pub const PHANTOM_AFTER: Duration = Duration::from_secs(1);
/// Longest a batch (`burst` > 1) waits to fill past its first frame's own time.
pub const BATCH_WAIT_MAX: Duration = Duration::from_micros(500);

/// Most frames per departure of a relay that sleeps between departures (`stream relay`'s
/// `--burst`, `evlbi serve`'s net2net without `ipd`). A departure costs a wake-up, and on a VM a
/// wake-up from a sleep costs 17–27 µs of CPU (a bare `nanosleep` loop, 4000 a second, measured
/// by /proc/PID/schedstat) — more than the frames it sends — so the relay's CPU per frame falls
/// with the frames per departure (issue 30, 4.096 Gb/s, 8 KB frames: 16 → 3.43–3.51 µs, 32 →
/// 2.55–2.94; jive5ab 4.7–5.3). With [`BATCH_WAIT_MAX`] a departure in the steady state carries
/// at most 0.5 ms of the stream, so the burst on the wire is 32 frames (256 KB) only from 4 Gb/s
/// up, and fewer frames below (about 8 at 1 Gb/s).
pub const DEFAULT_BURST: usize = 32;
/// What `--ack` sends back to a sender: its content does not matter (jive5ab sends text too);
/// it lets the switches on the way learn where the station is.
pub const KEEPALIVE: &[u8] = b"evlbi relay keep-alive";

/// How to relay.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// Framing of the input datagrams.
    pub input: SeqFormat,
    /// Framing of the output datagrams.
    pub output: SeqFormat,
    /// Format of the frames: VDIF, or one Mark5B stream (jive5ab udps in, joined into whole
    /// frames when cut into pieces; whole frames out, in order: the `mark5b` module).
    pub frame_format: vdif::FrameFormat,
    /// Sender session of the native prefix (not 0; differs between runs).
    pub session: u16,
    /// First sequence number out.
    pub first_seq: u64,
    /// Keep this much of each stream to answer NAKs (native output); `None`: no ARQ.
    pub arq_latency: Option<Duration>,
    /// Frames per second per thread when neither the framing nor the headers say.
    pub frames_per_second: Option<vdif::FrameRate>,
    /// VDIF threads per station; `None`: announced by a native input, else learned.
    pub threads: Option<u16>,
    /// Frames per second of a whole station, all its threads (a VSI-S mode's rate), when
    /// neither the threads nor the rate per thread are known: split over the threads learned.
    pub station_frames_per_second: Option<FrameRate>,
    /// Data rate to pace each station at (sample bits, headers excluded); `None`: from the
    /// headers (frames per second × threads × data bytes).
    pub rate_bps: Option<vdif::BitRate>,
    /// Most a backlog is sent at, as a multiple of the rate (1.0 to 16).
    pub catch_up: f64,
    /// A frame that waited this long makes its station catch up.
    pub smoothing: Duration,
    /// Most frames handed out in one transmit: frames that fell due while the caller slept
    /// leave together (one UDP GSO call), none before its time; 1 hands out one frame at a time.
    pub burst: usize,
    /// Most frame bytes queued over all stations.
    pub buffer_bytes: usize,
    /// Most stations relayed.
    pub max_stations: usize,
    /// Take datagrams only from this address or host.
    pub from: Option<SourceFilter>,
    /// Send [`KEEPALIVE`] back to a sender every this many of its datagrams.
    pub ack_every: Option<u32>,
    /// When the run started (the output schedules' time 0).
    pub start: Instant,
}

impl RelayConfig {
    /// Defaults for relaying `input` framing out as `output`, starting at `start`.
    pub fn new(input: SeqFormat, output: SeqFormat, start: Instant) -> RelayConfig {
        RelayConfig {
            input,
            output,
            frame_format: vdif::FrameFormat::Vdif,
            session: 1,
            first_seq: 0,
            arq_latency: None,
            frames_per_second: None,
            threads: None,
            station_frames_per_second: None,
            rate_bps: None,
            catch_up: 2.0,
            smoothing: Duration::from_millis(2),
            burst: 1,
            buffer_bytes: 256 << 20,
            max_stations: 16,
            from: None,
            ack_every: None,
            start,
        }
    }
}

/// Loss of the input and of the queue over all stations, for live lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayTotals {
    /// Frames taken from the input.
    pub frames_in: u64,
    /// Frames handed out for sending (first transmissions).
    pub frames_out: u64,
    /// Frames missing from the input.
    pub lost_in_input: u64,
    /// Frames dropped at a full queue.
    pub overflow_dropped: u64,
    /// Frames queued now.
    pub queued: u64,
}

/// Frames held while a station's threads are learned.
struct Learning {
    since: Instant,
    first_pos: u64,
    /// The time advance (frames of a thread) that ends it: two frames when the threads are
    /// known (only a run is awaited), [`LEARN_SKEW`] of them when they are learned.
    steps: u64,
    seen: ThreadMap,
    /// The sources sending its frames (see the `boards` module).
    sources: Vec<LearnSource>,
    held: Vec<HeldFrame>,
}

impl Learning {
    /// A learning from `now`, the first frame at time position `pos` at `fps` frames a second;
    /// `known`: the threads are known (only a run is awaited).
    fn new(now: Instant, pos: u64, fps: FrameRate, known: bool) -> Learning {
        Learning {
            since: now,
            first_pos: pos,
            steps: if known {
                2
            } else {
                (u64::from(fps) * LEARN_SKEW.as_nanos() as u64 / 1_000_000_000).max(2)
            },
            seen: ThreadMap::new(crate::intake::MAX_THREADS),
            sources: Vec::new(),
            held: Vec::new(),
        }
    }
}

/// A station's input side.
struct StationIn {
    station_id: StationId,
    fps: FrameRate,
    template: vdif::VdifHeader,
    frame_len: usize,
    /// It delivered its run and is relayed; until then a candidate, its frames held.
    confirmed: bool,
    /// Threads given by the options or a native prefix (else learned).
    known_threads: Option<u16>,
    learning: Option<Learning>,
    threads: ThreadMap,
    thread_count: u16,
    /// Last time position (frames since 1970 of one thread) per thread id; `u64::MAX`: none yet.
    last_pos: Vec<u64>,
    /// The station's rate, all threads, to split over the threads learned (see
    /// [`RelayConfig::station_frames_per_second`]).
    station_rate: Option<u32>,
    /// The rate per thread split from `station_rate`, checked against the frames' own count
    /// at the first second boundaries ([`crate::rate_check`]).
    rate_check: Option<RateCheck>,
    queue: Option<Rc<RefCell<LiveQueue>>>,
    stream: Option<u16>,
    /// Its boards, once learned, and the sources refused as boards.
    boards: Boards,
    /// Frames in a row from its boards numbered past its rate per thread, each stating a
    /// higher rate of its own (see [`Relay::take_frame`]).
    beyond_rate: usize,
    /// A source of threads beyond its count, held while it is judged (the `growth` module).
    newcomer: Option<growth::Newcomer>,
    /// The highest frame number of a frame it took (a grown split must keep it valid).
    max_frame_number: Option<u32>,
    counts: RelayedStation,
}

impl StationIn {
    /// A frame with header `h` came at `now`: check the rate per thread split from the station's
    /// ([`crate::rate_check`]); when the frames count fewer, the station has more threads than
    /// it sent at the start and each its share: count and place by that from this frame on
    /// (the pacing is the station's rate either way). What to tell the operator.
    fn check_rate(&mut self, h: &vdif::VdifHeader, now: Instant) -> Option<String> {
        match self.rate_check.as_mut()?.observe(h, now) {
            Verdict::Wait => None,
            Verdict::Keep => {
                self.rate_check = None;
                None
            }
            Verdict::Rate { fps, threads } => {
                self.rate_check = None;
                let said = match self.station_rate {
                    Some(_) => crate::rate_check::corrected(
                        &self.counts.station,
                        (self.fps, self.thread_count),
                        (fps, threads),
                        h.seconds,
                    ),
                    None => crate::rate_check::given_corrected(&self.counts.station, self.fps, fps, h.seconds),
                };
                (self.fps, self.thread_count) = (fps, threads);
                self.threads = self.threads.resized(threads);
                self.counts.frames_per_second = fps;
                // Positions counted at the old rate do not compare with the new.
                self.last_pos.fill(u64::MAX);
                Some(said)
            }
        }
    }

    /// Continuity per thread of a frame at `pos` (frames since 1970 of its thread): a jump
    /// forward is frames missing; a step back fills one of them (reordered), unless it repeats
    /// the last frame.
    fn count_continuity(&mut self, thread: u16, pos: u64) {
        let last = &mut self.last_pos[usize::from(thread)];
        if *last == u64::MAX || pos > *last {
            if *last != u64::MAX {
                self.counts.lost_in_input += pos - *last - 1;
            }
            *last = pos;
        } else if pos == *last {
            self.counts.duplicates_in += 1;
        } else {
            self.counts.reordered_in += 1;
            self.counts.lost_in_input = self.counts.lost_in_input.saturating_sub(1);
        }
    }

    /// Count the frames held while learning that its boards sent, now the rate per thread is
    /// known: taken from the input, and their continuity.
    fn count_input(&mut self, held: &[&HeldFrame]) {
        self.counts.frames_in += held.len() as u64;
        for h in held {
            self.count_continuity(h.header.thread_id, h.header.frame_index(self.fps));
        }
    }
}

/// The relay state machine; see the module docs.
pub struct Relay {
    cfg: RelayConfig,
    sender: Sender<LiveSchedule>,
    stations: Vec<StationIn>,
    /// Input senders, counted one by one (bounded).
    senders: SenderTable,
    counters: DatagramCounters,
    first_problem: Option<String>,
    /// What the operator must act on now, said once each (see [`Relay::poll_notice`]).
    notices: VecDeque<String>,
    /// What the relay corrected that the operator should know of (see [`Relay::poll_warning`]).
    warnings: VecDeque<String>,
    /// The frame rate was missing once already (its notice given).
    told_no_frame_rate: bool,
    acks: VecDeque<(u16, SocketAddr)>,
    /// Bytes queued over all stations.
    queued: Rc<Cell<usize>>,
    /// The relay of a Mark5B stream, in place of the stations (`frame_format`).
    mark5b: Option<Mark5bRelay>,
}

impl Relay {
    /// A relay with no input yet.
    pub fn new(cfg: RelayConfig) -> Relay {
        let mark5b = (cfg.frame_format == vdif::FrameFormat::Mark5b)
            .then(|| Mark5bRelay::new(cfg.output, cfg.buffer_bytes, cfg.frames_per_second));
        let sender = Sender::new(SenderConfig {
            format: cfg.output,
            session: cfg.session,
            first_seq: cfg.first_seq,
            burst: cfg.burst.max(1),
            arq_latency: cfg.arq_latency,
            inject_loss: linkemu::LossModel::None,
            seed: 0,
            start: cfg.start,
            duration: None,
        });
        Relay {
            cfg,
            sender,
            stations: Vec::new(),
            senders: SenderTable::default(),
            counters: DatagramCounters::default(),
            first_problem: None,
            notices: VecDeque::new(),
            warnings: VecDeque::new(),
            told_no_frame_rate: false,
            acks: VecDeque::new(),
            queued: Rc::new(Cell::new(0)),
            mark5b,
        }
    }

    fn problem(&mut self, what: impl FnOnce() -> String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(what());
        }
    }

    /// A datagram arrived at input `input` from `from` at `now` (`truncated`: larger than the
    /// read buffer). Each valid frame goes to `tee` as it came, and a copy is queued for the
    /// output ([`Relay::handle_shared_datagram`] queues a handle instead).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        input: u16,
        from: SocketAddr,
        datagram: &[u8],
        truncated: bool,
        tee: &mut impl FrameSink,
    ) {
        let d = Bytes::copy_from_slice(datagram);
        self.handle_shared_datagram(now, input, from, &d, truncated, tee);
    }

    /// [`Relay::handle_datagram`] of a datagram in a shared buffer (a slice of the buffer
    /// recvmmsg wrote it into): its frame is queued as a slice of that buffer, no copy, and sent
    /// from there; the buffer is free again when the last of its frames has left.
    pub fn handle_shared_datagram(
        &mut self,
        now: Instant,
        input: u16,
        from: SocketAddr,
        whole: &Bytes,
        truncated: bool,
        tee: &mut impl FrameSink,
    ) {
        let datagram: &[u8] = whole;
        self.counters.datagrams += 1;
        self.counters.bytes += datagram.len() as u64;
        if self.cfg.from.is_some_and(|f| !f.admits(from)) {
            self.counters.foreign_source += 1;
            self.problem(|| format!("datagram from {from}, not from the --from address"));
            return;
        }
        let sender = self.senders.index(now, input, from);
        if let Some(s) = sender {
            self.senders.on_datagram(s, datagram.len());
        }
        if truncated {
            self.counters.oversized += 1;
            self.problem(|| {
                format!(
                    "{} byte datagram from {from} larger than the read buffer",
                    datagram.len()
                )
            });
            return;
        }
        if let Some(m) = self.mark5b.as_mut() {
            let before = m.counts().map_or(0, |c| c.frames_in);
            let seq = m.handle(now, from, datagram, &mut self.counters);
            let taken = m.counts().map_or(0, |c| c.frames_in) - before;
            if let (Some(s), Some(seq)) = (sender, seq) {
                self.senders.on_seq(s, seq);
            }
            // Its frames count for its sender (and its keep-alives, `--ack`): one stream, thread 0.
            for _ in 0..taken {
                if let Some(s) = sender {
                    if self.senders.on_frame(s, StationId(0), 0, self.cfg.ack_every) {
                        self.acks.push_back((input, from));
                    }
                }
            }
            if let Some(p) = m.take_problem() {
                self.problem(|| p);
            }
            return;
        }
        let d = match parse_data(self.cfg.input, datagram) {
            Ok(d) => d,
            Err(e) => {
                count_wire_error(&mut self.counters, &e);
                self.problem(|| format!("datagram from {from}: {e}"));
                return;
            }
        };
        if let (Some(s), Some(seq)) = (sender, d.seq) {
            self.senders.on_seq(s, seq);
        }
        let Some(si) = self.station_for(now, from, &d) else {
            return;
        };
        let frame = whole.slice_ref(d.frame);
        if self.stations[si].learning.is_some() {
            self.hold_frame(now, si, (input, from), &d, frame, tee);
        } else if self.take_frame(now, si, (input, from), &d, frame, tee) {
            self.taken_from(input, from, &d.header);
        }
    }

    /// A frame (`h`) of sender (`input`, `from`) was taken for a station it is a board of:
    /// counted, and answered with a keep-alive when one is due (`--ack`). Nothing goes back for
    /// a refused or malformed datagram, nor while a station is learned: its source's address
    /// is whatever the datagram claims.
    fn taken_from(&mut self, input: u16, from: SocketAddr, h: &vdif::VdifHeader) {
        if let Some(s) = self.senders.find(input, from) {
            if self.senders.on_frame(s, h.station_id, h.thread_id, self.cfg.ack_every) {
                self.acks.push_back((input, from));
            }
        }
    }

    /// The station of `d`: a confirmed one of its id and format, or a candidate, made on its
    /// first frame; `None` when the frame is refused (counted).
    fn station_for(&mut self, now: Instant, from: SocketAddr, d: &DataDatagram<'_>) -> Option<usize> {
        let id = d.header.station_id;
        let fits =
            |st: &StationIn| crate::window::same_format(&d.header, &st.template) && d.frame.len() == st.frame_len;
        if let Some(i) = self.stations.iter().position(|s| s.confirmed && s.station_id == id) {
            if fits(&self.stations[i]) {
                return Some(i);
            }
            self.stations[i].counts.wrong_format += 1;
            let (name, len) = (d.header.station_id.to_string(), self.stations[i].frame_len);
            self.problem(|| {
                format!("station {name} from {from}: a frame of another format than its {len}-byte frames")
            });
            return None;
        }
        if let Some(i) = self.stations.iter().position(|s| s.station_id == id && fits(s)) {
            return Some(i);
        }
        if self.stations.iter().filter(|s| s.confirmed).count() >= self.cfg.max_stations {
            self.counters.too_many_stations += 1;
            let max = self.cfg.max_stations;
            self.problem(|| {
                format!(
                    "station {} from {from} beyond --max-stations {max}",
                    d.header.station_id
                )
            });
            return None;
        }
        // While the threads are learned from a station's rate, positions count at that rate (an
        // upper bound of one thread's); end_learning splits it.
        let fps_given = self.cfg.frames_per_second.or(self.station_rate_to_split(d));
        let (fps, threads) = match stream_shape(d, fps_given, self.cfg.threads) {
            Ok(shape) => shape,
            Err(e) => {
                e.count(&mut self.counters);
                let what = e.describe(&d.header.station_id.to_string(), from);
                // Without a frame rate every frame is refused until the options change: say it
                // at the first (issue 29: a relay of bare VDIF without --fps said it at the end).
                if e == crate::intake::ShapeError::NoFrameRate && !self.told_no_frame_rate {
                    self.told_no_frame_rate = true;
                    self.notices
                        .push_back(format!("{what}; every frame of it is refused until then"));
                }
                self.problem(|| what);
                return None;
            }
        };
        self.make_room();
        let known = self.cfg.threads.is_some() || d.native.is_some_and(|n| n.threads > 0);
        let pos = d.header.frame_index(fps);
        self.stations.push(StationIn {
            station_id: id,
            fps,
            template: d.header,
            frame_len: d.frame.len(),
            confirmed: false,
            known_threads: known.then_some(threads),
            learning: Some(Learning::new(now, pos, fps, known)),
            threads: ThreadMap::new(threads),
            thread_count: threads,
            last_pos: vec![u64::MAX; usize::from(crate::intake::MAX_THREADS)],
            station_rate: fps_given
                .filter(|_| self.cfg.frames_per_second.is_none())
                .map(vdif::FrameRate::get),
            rate_check: None,
            queue: None,
            stream: None,
            boards: Boards::default(),
            beyond_rate: 0,
            newcomer: None,
            max_frame_number: None,
            counts: RelayedStation::new(id, fps, d.frame.len()),
        });
        Some(self.stations.len() - 1)
    }

    /// Keep the candidates bounded: a flood of phantom stations forgets its oldest.
    fn make_room(&mut self) {
        let most = (2 * self.cfg.max_stations).max(16);
        while self.stations.iter().filter(|s| !s.confirmed).count() >= most {
            let Some(i) = self.stations.iter().position(|s| !s.confirmed) else {
                break;
            };
            self.drop_candidate(i);
        }
    }

    /// Forget candidate `i`: its frames never formed a run (a stray, a phantom station).
    fn drop_candidate(&mut self, i: usize) {
        let st = self.stations.remove(i);
        let held = st.learning.map_or(0, |l| l.held.len() as u64);
        self.counters.unconfirmed += held;
        self.counters.phantoms_dropped += 1;
        let name = st.counts.station;
        self.problem(|| format!("station {name}: frames that never formed a run of {SOURCE_RUN}: dropped as stray"));
    }

    /// The station's rate a new station's rate per thread is split from, over the threads
    /// learned ([`crate::intake::station_rate_to_split`]): only the station's rate is known (a
    /// VSI-S mode, or an earlier relay's announcement of one), not the threads or the rate per
    /// thread.
    fn station_rate_to_split(&self, d: &DataDatagram<'_>) -> Option<vdif::FrameRate> {
        let c = &self.cfg;
        crate::intake::station_rate_to_split(d, c.frames_per_second, c.threads, c.station_frames_per_second)
    }

    /// A frame of station `si` from sender (`input`, `from`), its threads being learned: held
    /// per source (a bounded few sources); the learning ends with a run once its threads are
    /// learned and every source judged (see the `boards` module), or after [`LEARN_FOR`], or
    /// with a full hold.
    fn hold_frame(
        &mut self,
        now: Instant,
        si: usize,
        (input, from): (u16, SocketAddr),
        d: &DataDatagram<'_>,
        frame: Bytes,
        tee: &mut impl FrameSink,
    ) {
        let st = &mut self.stations[si];
        let Some(l) = st.learning.as_mut() else {
            return;
        };
        if d.header.frame_number >= st.fps.get() {
            st.counts.wrong_format += 1;
            return;
        }
        let source = match l.sources.iter().position(|s| s.addr == from) {
            Some(i) => i,
            None if l.sources.len() < LEARN_SOURCES => {
                l.sources.push(LearnSource {
                    addr: from,
                    threads: ThreadSet::default(),
                });
                l.sources.len() - 1
            }
            None => {
                self.counters.foreign_source += 1;
                return;
            }
        };
        l.sources[source].threads.insert(d.header.thread_id);
        let _ = l.seen.index(d.header.thread_id);
        if l.held.len() < LEARN_FRAMES {
            l.held.push(HeldFrame {
                at: now,
                frame,
                header: d.header,
                source,
                input,
            });
        } else {
            st.counts.overflow_dropped += 1;
        }
        let run = l.held.len() >= SOURCE_RUN;
        let bound = now.saturating_duration_since(l.since) >= LEARN_FOR || l.held.len() >= LEARN_FRAMES;
        let learnt = d.header.frame_index(st.fps) >= l.first_pos + l.steps;
        if run && (bound || (learnt && !boards::judge(&l.sources, &l.held).undecided)) {
            self.end_learning(si, now, tee);
        }
    }

    /// Count, tee and queue one frame from `from` of station `si`, relayed: a board's (see the
    /// `boards` module), else refused. Whether it was taken.
    fn take_frame(
        &mut self,
        now: Instant,
        si: usize,
        (input, from): (u16, SocketAddr),
        d: &DataDatagram<'_>,
        frame: Bytes,
        tee: &mut impl FrameSink,
    ) -> bool {
        let thread = d.header.thread_id;
        if self.stations[si].newcomer.as_ref().is_some_and(|n| n.addr == from) {
            self.hold_newcomer_frame(now, si, input, d, frame, tee);
            return false;
        }
        let StationIn {
            boards,
            threads,
            thread_count,
            fps,
            ..
        } = &mut self.stations[si];
        let room = |t: u16| threads.ids().contains(&t) || threads.seen() < usize::from(*thread_count);
        if let Err(why) = boards.seat(from, thread, now, *fps, room) {
            if boards.none_holds(now, *fps) {
                // Every live board of it sends under half its share: the station's threads and
                // rate are learned anew, from this frame on.
                self.relearn(si, now, d);
                self.hold_frame(now, si, (input, from), d, frame, tee);
                return false;
            }
            if why == boards::BEYOND && self.may_grow(si, from) {
                // Perhaps a board that came after the threads were counted: held and judged.
                self.stations[si].newcomer = Some(growth::Newcomer::new(from, now));
                self.hold_newcomer_frame(now, si, input, d, frame, tee);
                return false;
            }
            let StationIn { boards, .. } = &mut self.stations[si];
            boards.refuse(from, &[thread].into_iter().collect(), why);
            self.counters.foreign_source += 1;
            let name = d.header.station_id.to_string();
            self.problem(|| format!("station {name}: {from} {why}: refused (not relayed, not recorded)"));
            return false;
        }
        let checking = self.stations[si].rate_check.is_some();
        if let Some(said) = self.stations[si].check_rate(&d.header, now) {
            if self.cfg.frames_per_second.is_some() {
                self.warnings.push_back(said.clone());
            }
            self.problem(|| said);
        }
        let st = &self.stations[si];
        if let (true, None, Some(stream)) = (checking, &st.rate_check, st.stream) {
            // The split is confirmed (or corrected): said as it is from here on.
            self.sender.set_split(stream, st.fps, st.thread_count);
        }
        let pos = d.header.frame_index(self.stations[si].fps);
        let stated = self.stated_rate(d);
        let st = &mut self.stations[si];
        if d.header.frame_number >= st.fps.get() {
            st.counts.wrong_format += 1;
            // A board's frames numbered past the station's rate, each stating a rate they fit:
            // the rate held came from elsewhere (issue 36: a source first on the port announcing
            // half the rate, whose place the backend took): learned anew from this frame on.
            st.beyond_rate = match stated {
                Some(r) if r > d.header.frame_number => st.beyond_rate + 1,
                _ => 0,
            };
            if st.beyond_rate >= SOURCE_RUN {
                st.beyond_rate = 0;
                self.relearn(si, now, d);
                self.hold_frame(now, si, (input, from), d, frame, tee);
                return false;
            }
            return true;
        }
        st.beyond_rate = 0;
        st.max_frame_number = Some(
            st.max_frame_number
                .map_or(d.header.frame_number, |m| m.max(d.header.frame_number)),
        );
        if let Some(n) = st.newcomer.as_mut() {
            n.board_frame(&d.header, now);
        }
        st.counts.frames_in += 1;
        st.count_continuity(thread, pos);
        tee.frame(st.station_id, d.frame, false);
        if st.threads.index(thread).is_none() {
            st.counts.unexpected_thread += 1;
            let (name, n) = (d.header.station_id.to_string(), st.thread_count);
            self.problem(|| format!("station {name}: thread {thread} beyond its {n} thread(s): recorded, not relayed"));
            return true;
        }
        if let Some(q) = st.queue.as_ref() {
            q.borrow_mut().push(now, frame);
        }
        true
    }

    /// Candidate `si` formed its run and its threads are known: confirm it (other candidates
    /// for its id are strays), open its output, tee and queue what was held.
    fn end_learning(&mut self, si: usize, now: Instant, tee: &mut impl FrameSink) {
        let id = self.stations[si].station_id;
        let Some(l) = self.stations[si].learning.take() else {
            return;
        };
        self.stations[si].confirmed = true;
        let mut i = 0;
        let mut si = si;
        while i < self.stations.len() {
            if i != si && !self.stations[i].confirmed && self.stations[i].station_id == id {
                self.drop_candidate(i);
                if i < si {
                    si -= 1;
                }
            } else {
                i += 1;
            }
        }
        let judged = boards::judge(&l.sources, &l.held);
        self.seat_boards(si, &l, &judged.boards, now);
        for h in l.held.iter().filter(|h| judged.boards.contains(&h.source)) {
            self.taken_from(h.input, l.sources[h.source].addr, &h.header);
        }
        let Relay {
            sender,
            cfg,
            queued,
            stations,
            ..
        } = self;
        let st = &mut stations[si];
        let held: Vec<&HeldFrame> = l.held.iter().filter(|h| judged.boards.contains(&h.source)).collect();
        if st.known_threads.is_none() {
            let ids = st
                .boards
                .list
                .iter()
                .fold(ThreadSet::default(), |u, b| u.union(&b.threads));
            st.thread_count = (ids.len() as u16).max(1);
            st.threads = ThreadMap::new(st.thread_count);
            if let Some(total) = st.station_rate {
                let n = u32::from(st.thread_count);
                if let Some(fps) = FrameRate::per_thread(total, n) {
                    st.fps = fps;
                    st.counts.frames_per_second = st.fps;
                    st.rate_check = Some(RateCheck::new(total, st.fps, crate::intake::MAX_THREADS, now));
                } else if self.first_problem.is_none() {
                    // Relayed all the same (the output is paced by the rate), counted per thread
                    // at the station's rate.
                    self.first_problem = Some(format!(
                        "station {}: {total} frames/s do not split over its {n} threads: set the threads",
                        st.counts.station
                    ));
                }
            }
        }
        if cfg.frames_per_second.is_some() {
            // A rate per thread given is checked against the frames' own count as a split one is.
            st.rate_check = Some(RateCheck::given(st.fps, st.thread_count, now));
        }
        st.count_input(&held);
        open_output(sender, cfg, queued, st, now);
        if let (Some(_), Some(total), Some(stream)) = (&st.rate_check, st.station_rate, st.stream) {
            // The split is a guess until the frames confirm it: the station's rate is announced.
            sender.announce_station_rate(stream, total);
        }
        let Some(q) = st.queue.clone() else {
            return;
        };
        let mut q = q.borrow_mut();
        for h in held {
            tee.frame(st.station_id, &h.frame, false);
            if st.threads.index(h.header.thread_id).is_some() {
                q.push(h.at, h.frame.clone());
            } else {
                st.counts.unexpected_thread += 1;
            }
        }
    }

    /// The rate per thread frame `d` states for itself — a native prefix announcing it with the
    /// threads, else its header's sample rate — when the options set none.
    fn stated_rate(&self, d: &DataDatagram<'_>) -> Option<u32> {
        if self.cfg.frames_per_second.is_some() {
            return None;
        }
        d.native
            .filter(|n| n.threads > 0 && n.frames_per_second > 0)
            .map(|n| n.frames_per_second)
            .or(d.header.frame_rate().map(u32::from))
    }

    /// Station `si`, whose boards all send under half their share (a source that got in while
    /// the backend was away), learns its threads and rate again from frame `d` on: the boards
    /// in step then make it, in a new output stream (the old one ends with what it has queued).
    fn relearn(&mut self, si: usize, now: Instant, d: &DataDatagram<'_>) {
        // The shape comes anew from this frame, as a new station's would: the one learned came
        // from the boards given up (issue 36: a source first on the port announcing half the
        // rate held it there, and every real frame numbered past it was refused).
        let fps_given = self.cfg.frames_per_second.or(self.station_rate_to_split(d));
        let shape = stream_shape(d, fps_given, self.cfg.threads).ok();
        let known = self.cfg.threads.is_some() || d.native.is_some_and(|n| n.threads > 0);
        let given_only = self.cfg.frames_per_second.is_none();
        self.refuse_newcomer(si, boards::UNDER_SHARE);
        let st = &mut self.stations[si];
        for b in std::mem::take(&mut st.boards.list) {
            st.boards.refuse(b.addr, &b.threads, boards::UNDER_SHARE);
        }
        if let Some((fps, threads)) = shape {
            (st.fps, st.thread_count) = (fps, threads);
            st.threads = ThreadMap::new(threads);
            st.known_threads = known.then_some(threads);
            st.station_rate = fps_given.filter(|_| given_only).map(vdif::FrameRate::get);
            st.counts.frames_per_second = fps;
            st.last_pos.fill(u64::MAX);
        }
        let known = st.known_threads.is_some();
        st.rate_check = None;
        st.learning = Some(Learning::new(now, d.header.frame_index(st.fps), st.fps, known));
        let name = st.counts.station.clone();
        self.problem(|| {
            format!("station {name}: its boards sent under half their share of its rate: its threads are learned anew")
        });
    }

    /// Station `si`'s learning `l` ended: sources `boards` are its boards; the others are
    /// refused, named, their held frames counted `foreign_source`.
    fn seat_boards(&mut self, si: usize, l: &Learning, boards: &[usize], now: Instant) {
        let st = &mut self.stations[si];
        for (i, src) in l.sources.iter().enumerate() {
            if boards.contains(&i) {
                st.boards.list.push(Board {
                    addr: src.addr,
                    threads: src.threads,
                    last_seen: now,
                    meter: Meter::new(now),
                });
                continue;
            }
            let n = l.held.iter().filter(|h| h.source == i).count() as u64;
            self.counters.foreign_source += n;
            st.boards.refuse(src.addr, &src.threads, boards::NOT_IN_STEP);
            if let Some(r) = st.boards.refused.iter_mut().find(|r| r.source == src.addr.to_string()) {
                r.datagrams = n;
            }
            let name = &st.counts.station;
            if self.first_problem.is_none() {
                self.first_problem = Some(format!(
                    "station {name}: {} sends thread(s) {:?}, {}: refused (not relayed, not recorded)",
                    src.addr,
                    src.threads.ids(),
                    boards::NOT_IN_STEP
                ));
            }
        }
    }

    /// End the learning of candidates whose time is up: confirmed with a run, forgotten
    /// without one.
    pub fn handle_timeout(&mut self, now: Instant, tee: &mut impl FrameSink) {
        for si in 0..self.stations.len() {
            self.judge_newcomer(now, si, tee);
        }
        let mut si = 0;
        while si < self.stations.len() {
            let Some(l) = self.stations[si].learning.as_ref() else {
                si += 1;
                continue;
            };
            let waited = now.saturating_duration_since(l.since);
            if waited >= LEARN_FOR && l.held.len() >= SOURCE_RUN {
                self.end_learning(si, now, tee);
                si += 1;
            } else if waited >= PHANTOM_AFTER {
                self.drop_candidate(si);
            } else {
                si += 1;
            }
        }
    }

    /// The run ends: candidates that never formed a run are strays (their frames counted
    /// `unconfirmed`), so every datagram ends up counted once.
    pub fn finish(&mut self) {
        for si in 0..self.stations.len() {
            self.refuse_newcomer(si, boards::NOT_IN_STEP);
        }
        while let Some(i) = self.stations.iter().position(|s| !s.confirmed) {
            self.drop_candidate(i);
        }
    }

    /// When something is due: the next departure, or the end of a learning.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let learn = self
            .stations
            .iter()
            .filter_map(|s| {
                let l = s.learning.as_ref()?;
                Some(
                    l.since
                        + if l.held.len() >= SOURCE_RUN {
                            LEARN_FOR
                        } else {
                            PHANTOM_AFTER
                        },
                )
            })
            .chain(
                self.stations
                    .iter()
                    .filter_map(|s| s.newcomer.as_ref().map(|n| n.deadline())),
            )
            .min();
        if let Some(m) = self.mark5b.as_ref() {
            // Its frames leave as they are made whole: due now (the run's start is past).
            return (m.queued() > 0).then_some(self.cfg.start);
        }
        match (self.sender.poll_timeout(), learn) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next datagrams to send at `now` (repeats first); `None` when nothing is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Result<Option<Transmit<'_>>, SenderError> {
        if let Some(m) = self.mark5b.as_mut() {
            return Ok(m.poll_transmit());
        }
        self.sender.poll_transmit(now)
    }

    /// The transmit returned last was handed to the socket at `now`.
    pub fn on_transmitted(&mut self, now: Instant) {
        if let Some(m) = self.mark5b.as_mut() {
            m.on_transmitted(now);
            return;
        }
        self.sender.on_transmitted(now);
    }

    /// A datagram from the destination: a NAK (native output with ARQ), or anything else to count.
    pub fn handle_return(&mut self, now: Instant, datagram: &[u8]) {
        self.sender.handle_nak(now, datagram);
    }

    /// A keep-alive due to a sender (`--ack`): the input to send it from and the address.
    pub fn poll_ack(&mut self) -> Option<(u16, SocketAddr)> {
        self.acks.pop_front()
    }

    /// Datagram counters (every datagram, by reason when refused).
    pub fn counters(&self) -> &DatagramCounters {
        &self.counters
    }

    /// A sentence the operator must read now (once each): a stream refused for a missing
    /// option. The caller prints it when it comes; the report holds it too.
    pub fn poll_notice(&mut self) -> Option<String> {
        self.notices.pop_front()
    }

    /// A sentence the operator should read now (once): something given that the frames showed
    /// wrong and the relay corrected (a `--fps` above the frames' own count). `first_problem`
    /// holds it too.
    pub fn poll_warning(&mut self) -> Option<String> {
        self.warnings.pop_front()
    }

    /// The first reason a datagram was refused, in words.
    pub fn first_problem(&self) -> Option<&str> {
        self.first_problem.as_deref()
    }

    /// Datagrams of senders beyond the ones counted one by one.
    pub fn untracked_datagrams(&self) -> u64 {
        self.senders.untracked()
    }

    /// The counters of the [`REPORTED_SENDERS`] senders that gave the most frames (then
    /// datagrams), in the order they first spoke.
    pub fn senders(&self) -> Vec<InputSender> {
        self.senders.reported()
    }

    /// The senders not in [`Relay::senders`], summed.
    pub fn other_senders(&self) -> OtherSenders {
        self.senders.others()
    }

    /// Senders seen, counted one by one or summed (not those beyond [`MAX_SENDERS`] while none
    /// could make room, whose datagrams are [`Relay::untracked_datagrams`]).
    pub fn sender_count(&self) -> u64 {
        self.senders.count()
    }

    /// Each station's counters.
    pub fn stations(&self) -> Vec<RelayedStation> {
        if let Some(m) = self.mark5b.as_ref() {
            return m.station().into_iter().collect();
        }
        self.stations
            .iter()
            .map(|s| {
                let mut c = s.counts.clone();
                c.refused_sources = s.boards.refused.clone();
                c.thread_ids = match s.learning.as_ref() {
                    Some(l) => l.seen.ids(),
                    None => s.threads.ids(),
                };
                if let Some(q) = s.queue.as_ref() {
                    let q = q.borrow();
                    c.overflow_dropped += q.overflow_dropped;
                    c.frames_out = q.frames_out;
                    c.queue_delay_ns = q.delay.summary(DEFAULT_MAX_BUCKETS);
                }
                c
            })
            .collect()
    }

    /// Totals over all stations (live lines).
    pub fn totals(&self) -> RelayTotals {
        let mut t = RelayTotals::default();
        if let Some(m) = self.mark5b.as_ref() {
            if let Some(c) = m.counts() {
                (t.frames_in, t.frames_out) = (c.frames_in, c.frames_out);
                (t.lost_in_input, t.overflow_dropped) = (c.lost_in_input, c.overflow_dropped);
            }
            t.queued = m.queued() as u64;
        }
        for s in &self.stations {
            t.frames_in += s.counts.frames_in;
            t.lost_in_input += s.counts.lost_in_input;
            t.overflow_dropped += s.counts.overflow_dropped;
            if let Some(l) = s.learning.as_ref() {
                t.queued += l.held.len() as u64;
            }
            if let Some(q) = s.queue.as_ref() {
                let q = q.borrow();
                t.frames_out += q.frames_out;
                t.overflow_dropped += q.overflow_dropped;
                t.queued += q.frames.len() as u64;
            }
        }
        t
    }

    /// How long the oldest frame waiting to go out has waited at `now`, over all stations:
    /// past `smoothing` its station is catching up (a socket loop then keeps its departures
    /// close instead of sleeping between them).
    pub fn longest_wait(&self, now: Instant) -> Duration {
        self.stations
            .iter()
            .filter_map(|s| {
                let q = s.queue.as_ref()?.borrow();
                Some(now.saturating_duration_since(q.frames.front()?.arrival))
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Whether frames wait to go out (or to be learned).
    pub fn has_queued(&self) -> bool {
        self.totals().queued > 0
    }

    /// The output streams, as a sender reports them.
    pub fn output(&self) -> Vec<SentStation> {
        self.sender.station_results()
    }

    /// Repeat counters over all streams; `None` without ARQ.
    pub fn arq_stats(&self) -> Option<crate::arq::RetransmitStats> {
        self.sender.arq_stats()
    }

    /// Datagrams from the destination that were not NAKs for a stream with ARQ.
    pub fn rejected_control(&self) -> u64 {
        self.sender.rejected_control()
    }

    /// Every datagram the destination sent back.
    pub fn returned_datagrams(&self) -> u64 {
        self.sender.returned_datagrams()
    }
}

/// The rate a station's output is paced at: the one given, else its frames' own (frames per
/// second × threads × data bits, integers; at least 1 b/s).
fn output_rate(given: Option<vdif::BitRate>, fps: FrameRate, threads: u16, data_len: usize) -> vdif::BitRate {
    given.unwrap_or_else(|| {
        let natural = fps.bit_rate(data_len as u64, u32::from(threads));
        vdif::BitRate::new(natural.max(1)).unwrap_or(vdif::BitRate::MIN)
    })
}

/// Give station `st` its output stream, paced at its rate.
fn open_output(
    sender: &mut Sender<LiveSchedule>,
    cfg: &RelayConfig,
    queued: &Rc<Cell<usize>>,
    st: &mut StationIn,
    now: Instant,
) {
    let data_len = st.frame_len.saturating_sub(st.template.header_len()).max(1);
    let rate = output_rate(cfg.rate_bps, st.fps, st.thread_count, data_len);
    let spacing = rate.time_of(data_len as u64);
    let queue = Rc::new(RefCell::new(LiveQueue::new(
        now,
        spacing,
        (cfg.catch_up, cfg.smoothing),
        Rc::clone(queued),
        cfg.buffer_bytes,
    )));
    let spec = StationSpec {
        name: format!("relayed {}", st.counts.station),
        station_id: st.station_id,
        threads: st.thread_count,
        frame_len: st.frame_len,
        data_len,
        fps: st.fps,
        rate_bps: rate,
    };
    let source = LiveSource {
        queue: Rc::clone(&queue),
        current: Bytes::new(),
    };
    let stream = sender.add_station(spec, Box::new(source), LiveSchedule(Rc::clone(&queue)));
    st.stream = Some(stream);
    st.counts.stream = (cfg.output == SeqFormat::Native).then_some(stream);
    st.queue = Some(queue);
}

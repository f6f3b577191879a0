//! Per-station reorder window: frames are placed by VDIF time, written in time order, and every
//! frame that did not arrive in time is replaced by one with the invalid bit set (VDIF 1.1.1 §3,
//! word 0 bit 31), the right second, frame number and thread, and the fill pattern as its data
//! (which readers that ignore the invalid bit skip too), so a correlator sees continuous time and
//! weights the gap out instead of losing sync. A Mark5B stream is ordered by its frames' order
//! headers and filled with Mark5B frames ([`vdif::frame_format`], [`StationWindow::with_format`]).
//!
//! Frames are numbered by *slot*: `((unix_second · fps) + frame_number) · threads + thread index`,
//! a thread's index being the order in which its id first appeared ([`ThreadMap`]).
//! A slot is written once it falls `window` slots behind the newest frame, so the window is the
//! reorder (and retransmission) latency measured in frames.
//!
//! One forged or corrupt frame must not move the window (that would flush real data as late): a
//! frame more than one window beyond the newest, or behind what was already written by more than a
//! window, is held as a *candidate*; only `confirm` mutually consistent candidates in a row, with
//! no in-range frame between them, move the stream there (a real jump: the sender restarted, or a
//! long outage). In a stream of several threads the run must also come from more than half of the
//! threads seen (or last a whole window): one board or relay queue lagging the others by more
//! than the window then loses its late frames, counted, instead of pulling the stream back and
//! forth — each swing forward used to fill the gap again (44 million filled frames in 10 s of an
//! overloaded two-board relay). Gaps up to `max_fill` frames are filled with invalid frames;
//! longer ones and jumps back in time end the continuous segment ([`FrameSink::discontinuity`]),
//! which the caller turns into a new output file.
//!
//! Frames pushed with their arrival time ([`StationWindow::push_at`]) are also judged by the
//! stream's own history (`FrontClock`): a frame that would leave more frame times unfilled
//! behind the newest than the time since the stream last advanced explains (at twice the frame
//! rate, a quarter window at once, never over half the window) is a candidate too, and a run of
//! candidates moves an anchored stream only once it has lasted [`JUMP_SPAN_FRAMES`] frame times of
//! wall time with no in-range frame between (for a run still inside the window: none of its own
//! threads; a board leading the others is then placed, the window not flushed). A burst of frames
//! forged from the sender's own address ahead of the stream (40 ms ahead in a 50 ms window flushed
//! 19 real frames as fill before) then never moves the window: the next real frame drops them,
//! and real frames arriving in order are never written as fill because of them. A real outage
//! explains its own gap (its frames come that much later), and a real jump keeps coming.

mod evidence;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use vdif::{FrameFormat, FrameRate, StationId, VdifHeader};

use evidence::{Candidates, FrontClock, MAX_HELD_CANDIDATES, MAX_HELD_CANDIDATE_BYTES};

/// Where the window writes frames, in time order.
pub trait FrameSink {
    /// One frame of `station` (VDIF station id): received (`filled == false`) or made up invalid.
    fn frame(&mut self, station: StationId, frame: &[u8], filled: bool);
    /// Time does not continue from the last frame written: start a new segment (file).
    fn discontinuity(&mut self, station: StationId);
}

/// The buffer a fill frame is made in: [`crate::feed::FILL_PATTERN`] throughout (the header is
/// written over it per frame). DiFX's multi-thread VDIF readers ignore the invalid bit but skip
/// a frame ending in the fill pattern; zeros were correlated as data ([`crate::feed`]).
fn fill_frame(frame_len: usize) -> Vec<u8> {
    let mut fill = vec![0u8; frame_len];
    crate::feed::fill_data(&mut fill, 0);
    fill
}

/// A sink that keeps everything in memory (tests, small tools).
#[derive(Debug, Default, Clone)]
pub struct VecSink {
    /// Frames written, per segment: `segments[i]` is the bytes of segment `i`.
    pub segments: Vec<Vec<u8>>,
    /// Number of filled (invalid) frames written.
    pub filled: u64,
}

impl FrameSink for VecSink {
    fn frame(&mut self, _station: StationId, frame: &[u8], filled: bool) {
        if self.segments.is_empty() {
            self.segments.push(Vec::new());
        }
        if let Some(s) = self.segments.last_mut() {
            s.extend_from_slice(frame);
        }
        self.filled += u64::from(filled);
    }
    fn discontinuity(&mut self, _station: StationId) {
        self.segments.push(Vec::new());
    }
}

/// Shape of one station's stream and the window's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowConfig {
    /// Frames per second per thread.
    pub frames_per_second: FrameRate,
    /// VDIF threads of the stream (their ids may be any; see [`ThreadMap`]).
    pub threads: u16,
    /// Reorder window in frames (all threads), ≥ 1.
    pub window: u64,
    /// Longest gap (frames) filled with invalid frames; longer gaps start a new segment.
    pub max_fill: u64,
    /// Consistent out-of-range frames needed to move the stream.
    pub confirm: u32,
}

/// What happened to one frame offered to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Stored; will be written. `reordered` when it arrived after a later frame.
    Placed {
        /// The frame's time slot.
        slot: u64,
        /// It arrived after a later frame.
        reordered: bool,
    },
    /// Its slot is already stored, with the same bytes.
    Duplicate,
    /// Its slot is already stored with other bytes (forged or corrupt): the first copy is kept.
    DuplicateMismatch,
    /// Its slot was already written (filled invalid, or the frame itself earlier).
    Late,
    /// Held as a candidate for a jump of the stream; not (yet) stored.
    Candidate,
    /// The header does not match the stream's format (length, bits, channels, station, thread id).
    WrongFormat,
}

/// A stream's VDIF thread ids and their index among its slots. A thread whose id is below the
/// stream's thread count has that id as its index (frames of one time step then come out in
/// thread order, as they always did); any other id (jive5ab's fill pattern is thread 290, a
/// board may number from anywhere) takes the lowest index still free. An index no thread has
/// taken is a thread never seen, which is never filled.
#[derive(Debug, Clone)]
pub struct ThreadMap {
    /// Index + 1 of each thread id (0: not seen); ids are 10 bits (VDIF 1.1.1 §3, word 3).
    index: Vec<u16>,
    /// The thread id at each index, if taken.
    by_index: Vec<Option<u16>>,
}

impl ThreadMap {
    /// Room for `capacity` (≥ 1) threads.
    pub fn new(capacity: u16) -> Self {
        ThreadMap {
            index: vec![0; 1024],
            by_index: vec![None; usize::from(capacity.max(1))],
        }
    }

    /// The index of thread `id`, taking one for an id not seen before; `None` when every index
    /// it could take is taken by other ids (or the id is not a VDIF thread id).
    pub fn index(&mut self, id: u16) -> Option<u16> {
        let known = *self.index.get(usize::from(id))?;
        if known > 0 {
            return Some(known - 1);
        }
        let own = usize::from(id);
        let i = if self.by_index.get(own).is_some_and(Option::is_none) {
            own
        } else {
            self.by_index.iter().position(Option::is_none)?
        };
        self.by_index[i] = Some(id);
        self.index[own] = i as u16 + 1;
        Some(i as u16)
    }

    /// The thread id at `index`, if a thread took it.
    pub fn id(&self, index: u16) -> Option<u16> {
        self.by_index.get(usize::from(index)).copied().flatten()
    }

    /// The thread ids seen, in index order.
    pub fn ids(&self) -> Vec<u16> {
        self.by_index.iter().flatten().copied().collect()
    }

    /// A map with room for `capacity` threads holding this one's ids, in index order (each at
    /// the index it has here where that fits): a stream reshaped keeps its threads.
    pub fn resized(&self, capacity: u16) -> ThreadMap {
        let mut map = ThreadMap::new(capacity);
        for id in self.ids() {
            map.index(id);
        }
        map
    }

    /// How many thread ids have been seen.
    pub fn seen(&self) -> usize {
        self.by_index.iter().flatten().count()
    }
}

/// Counters of one station's window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Frames stored (first copies, in range).
    pub placed: u64,
    /// Frames written as received.
    pub written_valid: u64,
    /// Invalid frames written in place of frames that never arrived in time.
    pub written_filled: u64,
    /// Of `written_filled`, those written at the end of the stream after the last frame of
    /// their thread that arrived (the stream, or a recording, stopped while one board was a few
    /// frames behind another): they keep the file's periods whole for readers that want them so
    /// (a `scan_check` of the file finds nothing missing), but nothing shows they were sent, so
    /// they are not counted lost.
    #[serde(default)]
    pub filled_at_end: u64,
    /// Stored frames that arrived after a later frame of their own thread (the order its sender
    /// sent in; one board behind another is not reordering).
    pub reordered: u64,
    /// Second copies of a stored frame, byte-identical to it.
    pub duplicates: u64,
    /// Second copies whose bytes differ from the stored frame (forged or corrupt); the first
    /// copy is kept and written.
    #[serde(default)]
    pub duplicate_mismatch: u64,
    /// Frames whose time was already written.
    pub late: u64,
    /// Frames whose header does not match the stream (dropped).
    pub wrong_format: u64,
    /// Out-of-range frames never confirmed by others (forged, corrupt or stray; dropped).
    pub out_of_range: u64,
    /// Times the stream jumped (confirmed) and the window moved.
    pub jumps: u64,
    /// New segments started (a jump back in time or a gap above `max_fill`).
    pub discontinuities: u64,
    /// Frames in gaps too long to fill (not written).
    pub unfilled_gap_frames: u64,
    /// Reordering extent summed over the reordered frames: how many frames of its thread the
    /// thread's latest was ahead of each when it came (jive5ab's `ooosum`, in frames; `evlbi?`'s
    /// extent is this over `reordered`).
    #[serde(default)]
    pub reorder_extent_sum: u64,
    /// Of `written_filled`, those written because time went on while nothing arrived (a live
    /// output's stream continues at the station's rate: [`StationWindow::advance_to`]); not
    /// counted lost.
    #[serde(default)]
    pub filled_silent: u64,
}

impl WindowStats {
    /// Frames known lost: filled in their place, less those filled at the end and those filled
    /// while nothing arrived at all (a live output's silence: nothing shows they were sent; an
    /// outage that long shows there, in `filled_silent`).
    pub fn filled_lost(&self) -> u64 {
        self.written_filled
            .saturating_sub(self.filled_at_end)
            .saturating_sub(self.filled_silent)
    }

    /// Fraction of the frames that are known lost (filled invalid in their place) over those and
    /// the valid ones: the data loss `f` a correlator sees.
    pub fn loss_fraction(&self) -> f64 {
        let lost = self.filled_lost();
        let total = self.written_valid + lost;
        if total == 0 {
            0.0
        } else {
            lost as f64 / total as f64
        }
    }

    /// Add `other`'s counts (totals over stations).
    pub fn add(&mut self, other: &WindowStats) {
        self.placed += other.placed;
        self.written_valid += other.written_valid;
        self.written_filled += other.written_filled;
        self.filled_at_end += other.filled_at_end;
        self.reordered += other.reordered;
        self.duplicates += other.duplicates;
        self.duplicate_mismatch += other.duplicate_mismatch;
        self.late += other.late;
        self.wrong_format += other.wrong_format;
        self.out_of_range += other.out_of_range;
        self.jumps += other.jumps;
        self.discontinuities += other.discontinuities;
        self.unfilled_gap_frames += other.unfilled_gap_frames;
        self.reorder_extent_sum += other.reorder_extent_sum;
        self.filled_silent += other.filled_silent;
    }
}

/// The format fields every frame of a stream shares.
pub(crate) fn same_format(a: &VdifHeader, b: &VdifHeader) -> bool {
    a.legacy == b.legacy
        && a.frame_len_units == b.frame_len_units
        && a.bits_per_sample == b.bits_per_sample
        && a.log2_channels == b.log2_channels
        && a.complex == b.complex
        && a.version == b.version
        && a.station_id == b.station_id
}

/// A run of candidates moves an anchored stream pushed with arrival times only after lasting
/// this many of the stream's frame times (at its nominal rate) of wall time: a live sender's
/// next frame lands in range long before, so a burst forged ahead of it never does, while a
/// stream that really moved keeps coming. Half of `MAX_HELD_CANDIDATES` (64), so a run arriving at
/// up to twice the rate is held whole meanwhile.
pub const JUMP_SPAN_FRAMES: u32 = 32;

/// [`JUMP_SPAN_FRAMES`] frame times of a stream of `fps` per thread over `threads`, whole
/// nanoseconds from integers (rounded up, so a span is never shorter than its frames), within
/// 1 ms and 1 s.
pub(crate) fn jump_span(fps: FrameRate, threads: u16) -> Duration {
    let slots_per_s = u64::from(fps) * u64::from(threads.max(1));
    let ns = (u64::from(JUMP_SPAN_FRAMES) * 1_000_000_000).div_ceil(slots_per_s);
    Duration::from_nanos(ns.clamp(1_000_000, 1_000_000_000))
}

/// One station's reorder window.
pub struct StationWindow {
    cfg: WindowConfig,
    template: VdifHeader,
    frame_len: usize,
    /// Next slot to write; `None` until the first confirmed frames.
    base: Option<u64>,
    /// Newest slot stored (≥ base − 1 once anchored).
    highest: u64,
    /// Newest slot stored of each thread (by index): a thread's own order is the order its
    /// sender sent in, so reordering is counted against it, and at the end of a stream its frames
    /// are known lost only up to it.
    thread_highest: Vec<Option<u64>>,
    ring: Vec<u8>,
    present: Vec<bool>,
    /// Out-of-range frames that may show a jump.
    candidates: Candidates,
    /// (sequence number, slot) of earlier candidates placed when a later one confirmed them.
    confirmed: Vec<(u64, u64)>,
    written_any: bool,
    fill: Vec<u8>,
    threads: ThreadMap,
    stats: WindowStats,
    /// The front's history, once anchored by frames pushed with their arrival times.
    clock: Option<FrontClock>,
    /// Where the stream began, if before its first frames here: frames lost before they could be
    /// offered (a source held back while its admission was decided) are filled from here.
    start_hint: Option<u64>,
    /// The frames' format: headers are order headers ([`vdif::frame_format`]), fills are
    /// written in it.
    format: FrameFormat,
}

impl StationWindow {
    /// A window for the stream whose first frame has header `first` (the format template).
    pub fn new(cfg: WindowConfig, first: &VdifHeader) -> Self {
        let cfg = WindowConfig {
            window: cfg.window.max(1),
            threads: cfg.threads.max(1),
            confirm: cfg.confirm.max(1),
            ..cfg
        };
        let frame_len = first.frame_len();
        let w = cfg.window as usize;
        StationWindow {
            cfg,
            template: *first,
            frame_len,
            base: None,
            highest: 0,
            thread_highest: vec![None; usize::from(cfg.threads)],
            ring: vec![0u8; w * frame_len],
            present: vec![false; w],
            candidates: Candidates::default(),
            confirmed: Vec::new(),
            written_any: false,
            fill: fill_frame(frame_len),
            threads: ThreadMap::new(cfg.threads),
            stats: WindowStats::default(),
            clock: None,
            start_hint: None,
            format: FrameFormat::Vdif,
        }
    }

    /// The window of a stream of `format` frames (VDIF unless said): its headers are the
    /// frames' order headers, its fill frames are made in that format.
    pub fn with_format(mut self, format: FrameFormat) -> Self {
        self.format = format;
        self
    }

    /// The format of the stream's frames.
    pub fn format(&self) -> FrameFormat {
        self.format
    }

    /// The stream began at the time of `header`, before the first frames to be pushed (which
    /// were lost on the way): once anchored, the window is filled from there, within
    /// `max_fill`. A header of another format, or a thread beyond the stream's count, is ignored.
    pub fn begins_at(&mut self, header: &VdifHeader) {
        if self.base.is_none()
            && same_format(header, &self.template)
            && header.frame_number < self.cfg.frames_per_second.get()
        {
            self.start_hint = self.slot_of(header);
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &WindowStats {
        &self.stats
    }

    /// The stream's configuration.
    pub fn config(&self) -> &WindowConfig {
        &self.cfg
    }

    /// Frame length, header included.
    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    /// Newest slot stored, once anchored.
    pub fn highest(&self) -> Option<u64> {
        self.base.map(|_| self.highest)
    }

    /// Next slot to be written, once anchored.
    pub fn base(&self) -> Option<u64> {
        self.base
    }

    /// The slot of a header (see the module docs), its thread taking the next free index when
    /// new; `None` for a thread beyond the stream's count.
    pub fn slot_of(&mut self, h: &VdifHeader) -> Option<u64> {
        let thread = self.threads.index(h.thread_id)?;
        let t = h.frame_index(self.cfg.frames_per_second);
        Some(t * u64::from(self.cfg.threads) + u64::from(thread))
    }

    /// The thread id of `slot`, if a thread has taken its index.
    pub fn thread_of(&self, slot: u64) -> Option<u16> {
        let index = slot % u64::from(self.cfg.threads.max(1));
        self.threads.id(u16::try_from(index).ok()?)
    }

    /// The thread ids the stream has shown, in slot order.
    pub fn thread_ids(&self) -> Vec<u16> {
        self.threads.ids()
    }

    fn in_range(&self, slot: u64) -> bool {
        match self.base {
            None => false,
            Some(base) => {
                slot + self.cfg.window >= base.min(self.highest) && slot < base.max(self.highest + 1) + self.cfg.window
            }
        }
    }

    /// Offer one frame (header already parsed and length-checked). Frames fall out of the window
    /// into `sink`.
    pub fn push(&mut self, header: &VdifHeader, frame: &[u8], sink: &mut impl FrameSink) -> Placement {
        self.push_numbered(header, frame, None, sink)
    }

    /// [`StationWindow::push`] for a frame with sequence number `seq`: when it confirms earlier
    /// candidates, those placed with it are listed with their numbers by
    /// [`StationWindow::take_confirmed`].
    pub fn push_numbered(
        &mut self,
        header: &VdifHeader,
        frame: &[u8],
        seq: Option<u64>,
        sink: &mut impl FrameSink,
    ) -> Placement {
        self.offer(None, header, frame, seq, sink)
    }

    /// [`StationWindow::push_numbered`] for a frame that arrived at `now`: the stream's history
    /// then also decides whether it may move the front (see the module docs). Times need not
    /// increase (frames held elsewhere are pushed with the times they arrived).
    pub fn push_at(
        &mut self,
        now: Instant,
        header: &VdifHeader,
        frame: &[u8],
        seq: Option<u64>,
        sink: &mut impl FrameSink,
    ) -> Placement {
        self.offer(Some(now), header, frame, seq, sink)
    }

    fn offer(
        &mut self,
        now: Option<Instant>,
        header: &VdifHeader,
        frame: &[u8],
        seq: Option<u64>,
        sink: &mut impl FrameSink,
    ) -> Placement {
        let slot = if !same_format(header, &self.template)
            || frame.len() != self.frame_len
            || header.frame_number >= self.cfg.frames_per_second.get()
        {
            None
        } else {
            self.slot_of(header)
        };
        let Some(slot) = slot else {
            self.stats.wrong_format += 1;
            return Placement::WrongFormat;
        };
        if !self.in_range(slot) {
            return self.candidate(slot, frame, seq, now, false, sink);
        }
        if !self.time_allows(slot, now) {
            return self.candidate(slot, frame, seq, now, true, sink);
        }
        // An in-range frame proves the stream is where we think: candidates it has caught up
        // with (held because they came early) are placed before it, the others forgotten.
        self.settle_candidates(slot, now, sink);
        self.place_at(slot, frame, now, sink)
    }

    /// [`StationWindow::place`], the front's history advanced when the frame moved it.
    fn place_at(&mut self, slot: u64, frame: &[u8], now: Option<Instant>, sink: &mut impl FrameSink) -> Placement {
        let skipped = if self.next_step(slot) { 0 } else { self.skipped(slot) };
        let placement = self.place(slot, frame, sink);
        if let (Some(now), Placement::Placed { reordered: false, .. }) = (now, placement) {
            let (rate, burst) = match skipped {
                0 => (0.0, 0.0), // not used: nothing skipped
                _ => (f64::from(self.cfg.frames_per_second), self.skip_burst()),
            };
            if let Some(clock) = self.clock.as_mut() {
                clock.advance(now, skipped, rate, burst);
            }
        }
        placement
    }

    /// An in-range frame at `upto` arrived: place the candidates at or before it that are in
    /// range (the stream has reached them), count the others out of range. Only frames held
    /// for their time can be such: a candidate out of range when it came still is, since
    /// nothing moved the window after it. A run held only for its time, none of it from this
    /// frame's thread, goes on: one board of a backend may lead the others by more than the
    /// time explains, and their frames do not contradict it (a forgery of a thread the stream
    /// sends is contradicted by that thread's next frame).
    fn settle_candidates(&mut self, upto: u64, now: Option<Instant>, sink: &mut impl FrameSink) {
        if self.candidates.held.is_empty() {
            self.stats.out_of_range += self.candidates.clear();
            return;
        }
        let thread = (upto % u64::from(self.cfg.threads)) as usize;
        if self.candidates.gated && !self.candidates.has_thread(thread) {
            return;
        }
        let mut held: Vec<_> = std::mem::take(&mut self.candidates.held).into();
        self.candidates.clear();
        held.sort_by_key(|(s, _, _)| *s);
        for (s, f, n) in held {
            if s > upto || !self.in_range(s) {
                self.stats.out_of_range += 1;
                continue;
            }
            if let (Placement::Placed { slot, .. }, Some(n)) = (self.place_at(s, &f, now, sink), n) {
                self.confirmed.push((n, slot));
            }
        }
    }

    /// `slot` is at most one frame time past the newest frame: it skips nothing (the common
    /// case, told without a division).
    fn next_step(&self, slot: u64) -> bool {
        slot <= self.highest + u64::from(self.cfg.threads)
    }

    /// Frame times (all threads of one time) between the newest frame and `slot` that nothing
    /// filled: what moving the front to `slot` leaves behind.
    fn skipped(&self, slot: u64) -> u64 {
        let threads = u64::from(self.cfg.threads);
        (slot / threads).saturating_sub(self.highest / threads + 1)
    }

    /// Frame times the front may skip at once however short the time: a quarter of the window,
    /// so a forged frame ahead of the stream leaves most of the reorder tolerance intact.
    fn skip_burst(&self) -> f64 {
        (self.cfg.window / u64::from(self.cfg.threads) / 4).max(2) as f64
    }

    /// Whether the stream's history lets a frame at `slot`, arriving at `now`, move the front
    /// there (always, for frames pushed without a time or not beyond the front). Never past half
    /// the window at once, whatever the time says: one frame then never moves the window past
    /// the newest frame, and the receiver's clock (when it read the datagram, which a stalled
    /// receiver reads late) cannot let a forged frame flush real ones queued behind it.
    fn time_allows(&self, slot: u64, now: Option<Instant>) -> bool {
        let (Some(now), Some(clock)) = (now, self.clock.as_ref()) else {
            return true;
        };
        if self.next_step(slot) {
            return true;
        }
        let skipped = self.skipped(slot);
        let rate = f64::from(self.cfg.frames_per_second);
        let half_window = self.cfg.window / u64::from(self.cfg.threads) / 2;
        skipped == 0 || (skipped <= half_window && skipped as f64 <= clock.allowance(now, rate, self.skip_burst()))
    }

    /// How long a run of candidates must last to move an anchored stream (see
    /// [`JUMP_SPAN_FRAMES`]): at least 1 ms, at most 1 s.
    pub fn jump_span(&self) -> Duration {
        jump_span(self.cfg.frames_per_second, self.cfg.threads)
    }

    /// Candidate frames held whole while a timed run must last [`StationWindow::jump_span`]:
    /// twice the frames the stream sends in that span (a run arriving at up to twice its rate
    /// is held whole until it may move the stream: the span's 1 ms floor is 64 frames at 64 000
    /// frames/s, and at [`MAX_HELD_CANDIDATES`] a burst read after a gap lost every frame past
    /// the 64th), at least [`MAX_HELD_CANDIDATES`], at most [`MAX_HELD_CANDIDATE_BYTES`].
    fn held_while_timed(&self) -> usize {
        let slots_per_s = f64::from(self.cfg.frames_per_second) * f64::from(self.cfg.threads);
        let span = (2.0 * self.jump_span().as_secs_f64() * slots_per_s).ceil() as usize;
        let cap = (MAX_HELD_CANDIDATE_BYTES / self.frame_len.max(1)).max(MAX_HELD_CANDIDATES);
        span.clamp(MAX_HELD_CANDIDATES, cap)
    }

    fn place(&mut self, slot: u64, frame: &[u8], sink: &mut impl FrameSink) -> Placement {
        let Some(base) = self.base else {
            return Placement::Candidate;
        };
        if slot < base {
            // Until the first frame is written the start may still move back: the first frames
            // to arrive need not be the earliest sent.
            if !self.written_any && self.highest - slot < self.cfg.window {
                self.base = Some(slot);
            } else {
                self.stats.late += 1;
                return Placement::Late;
            }
        }
        if slot >= base + self.cfg.window {
            self.write_until(slot + 1 - self.cfg.window, sink);
        }
        let idx = (slot % self.cfg.window) as usize;
        if self.present[idx] {
            // Never overwrite an accepted frame: a later copy cannot be more genuine than the
            // first, and replacing would let a forger rewrite data by repeating its time. A copy
            // that differs is counted apart, since it is evidence of forgery or corruption.
            let kept = &self.ring[idx * self.frame_len..(idx + 1) * self.frame_len];
            if kept == frame {
                self.stats.duplicates += 1;
                return Placement::Duplicate;
            }
            self.stats.duplicate_mismatch += 1;
            return Placement::DuplicateMismatch;
        }
        self.present[idx] = true;
        self.ring[idx * self.frame_len..(idx + 1) * self.frame_len].copy_from_slice(frame);
        self.stats.placed += 1;
        // Reordered as the network reorders: behind a later frame of its own thread (one board's
        // threads leading another's by a few frames is not reordering); the extent in the
        // thread's frames, as jive5ab's is in a sender's sequence numbers.
        let threads = u64::from(self.cfg.threads);
        let newest_of_thread = &mut self.thread_highest[(slot % threads) as usize];
        match *newest_of_thread {
            Some(newest) if slot < newest => {
                self.stats.reordered += 1;
                self.stats.reorder_extent_sum += (newest - slot) / threads;
            }
            _ => *newest_of_thread = Some(slot),
        }
        let reordered = slot < self.highest;
        if !reordered {
            self.highest = slot;
        }
        Placement::Placed { slot, reordered }
    }

    /// A frame the window cannot place yet (`gated`: in range, held for its time; else out of
    /// range): held as a candidate; once the run it belongs to has shown the stream is there,
    /// the stream moves there.
    fn candidate(
        &mut self,
        slot: u64,
        frame: &[u8],
        seq: Option<u64>,
        now: Option<Instant>,
        gated: bool,
        sink: &mut impl FrameSink,
    ) -> Placement {
        let consistent = self
            .candidates
            .held
            .back()
            .is_none_or(|(s, _, _)| s.abs_diff(slot) < self.cfg.window);
        if !consistent {
            self.stats.out_of_range += self.candidates.clear();
        }
        let threads = usize::from(self.cfg.threads);
        let thread = (slot % threads as u64) as usize;
        // A run that must last (timed, anchored) is held whole meanwhile, within the bound.
        let timed = now.is_some() && self.clock.is_some();
        let keep = if timed {
            self.held_while_timed()
        } else {
            (self.cfg.confirm as usize).max(threads).min(MAX_HELD_CANDIDATES)
        };
        if self.candidates.push(slot, thread, frame, seq, keep, now, gated) {
            self.stats.out_of_range += 1;
        }
        let c = &self.candidates;
        let seen = self.threads.seen().max(1);
        let lasted = !timed || c.lasted().is_some_and(|d| d >= self.jump_span());
        // A run in range from threads the stream's own frames do not contradict (see
        // `settle_candidates`) need not come from most threads: it is a board ahead.
        let in_range_run = timed && c.gated;
        let from_enough = in_range_run || 2 * c.threads > seen || c.run >= self.cfg.window;
        if !(c.run >= u64::from(self.cfg.confirm) && from_enough && lasted) {
            return Placement::Candidate;
        }
        let mut candidates: Vec<_> = std::mem::take(&mut self.candidates.held).into();
        self.candidates.clear();
        if in_range_run {
            // Still in range: placed as the stream's new front, the window not flushed (frames
            // of the other threads, behind, still fit).
            candidates.sort_by_key(|(s, _, _)| *s);
        } else {
            let anchor = candidates.iter().map(|(s, _, _)| *s).min().unwrap_or(slot);
            self.jump(anchor, sink);
        }
        if let Some(now) = now {
            // The stream is where the run says since now; its history starts again here.
            self.clock = Some(FrontClock::new(now, self.skip_burst()));
        }
        // This frame's placement is the answer (it is the newest held); the others placed are
        // reported with their numbers.
        let newest = candidates.iter().rposition(|(s, _, _)| *s == slot);
        let mut answer = Placement::Candidate;
        for (i, (s, f, n)) in candidates.iter().enumerate() {
            let p = self.place(*s, f, sink);
            if Some(i) == newest {
                answer = p;
            } else if let (Placement::Placed { slot, .. }, Some(n)) = (p, n) {
                self.confirmed.push((*n, slot));
            }
        }
        answer
    }

    /// Move the stream to `anchor`: write out the window, then fill the gap or start a new segment.
    fn jump(&mut self, anchor: u64, sink: &mut impl FrameSink) {
        let Some(_) = self.base else {
            // The first anchor: from where the stream began, when its first frames were lost
            // before they reached the window and the gap is one to fill.
            let start = self
                .start_hint
                .take()
                .filter(|&h| h < anchor && anchor - h <= self.cfg.max_fill)
                .unwrap_or(anchor);
            self.base = Some(start);
            self.highest = anchor;
            return;
        };
        self.stats.jumps += 1;
        self.flush(sink);
        // The threads' order starts again where the stream now is (it may have gone back).
        self.thread_highest.fill(None);
        let next = self.base.unwrap_or(anchor);
        if anchor >= next && anchor - next <= self.cfg.max_fill {
            self.write_until(anchor, sink);
        } else {
            if anchor > next {
                self.stats.unfilled_gap_frames += anchor - next;
            }
            self.stats.discontinuities += 1;
            sink.discontinuity(self.template.station_id);
            self.base = Some(anchor);
        }
        self.highest = anchor;
    }

    /// Write every slot below `until` (received frames as they are, the rest filled invalid).
    fn write_until(&mut self, until: u64, sink: &mut impl FrameSink) {
        self.write_slots(until, false, sink);
    }

    /// [`Self::write_until`]; at the `tail` of a stream, a slot after the last frame of its own
    /// thread is filled but not counted lost (nothing shows it was sent).
    fn write_slots(&mut self, until: u64, tail: bool, sink: &mut impl FrameSink) {
        let Some(mut s) = self.base else { return };
        self.written_any |= s < until;
        let threads = u64::from(self.cfg.threads);
        while s < until {
            let idx = (s % self.cfg.window) as usize;
            if self.present[idx] {
                self.present[idx] = false;
                sink.frame(
                    self.template.station_id,
                    &self.ring[idx * self.frame_len..(idx + 1) * self.frame_len],
                    false,
                );
                self.stats.written_valid += 1;
            } else if self.make_fill(s) {
                sink.frame(self.template.station_id, &self.fill, true);
                self.stats.written_filled += 1;
                if tail && self.thread_highest[(s % threads) as usize].is_none_or(|newest| s > newest) {
                    // After its thread's last frame: the stream (or the recording) ended first.
                    self.stats.filled_at_end += 1;
                }
            }
            s += 1;
        }
        self.base = Some(s);
    }

    /// An invalid frame for `slot` in `fill`: the stream's header with time and thread of the
    /// slot; `false` (nothing made) for the slot of a thread never seen.
    fn make_fill(&mut self, slot: u64) -> bool {
        let threads = u64::from(self.cfg.threads);
        let t = slot / threads;
        let Some(thread_id) = self.threads.id((slot % threads) as u16) else {
            return false;
        };
        let mut h = self.template;
        h.invalid = true;
        h.thread_id = thread_id;
        h.set_frame_index(t, self.cfg.frames_per_second);
        // The data array keeps the fill pattern from allocation: only the header (same length for
        // every frame of the stream) is rewritten. The template passed validation when it arrived; only time
        // fields changed, all in range.
        self.format
            .write_fill_header(&h, self.cfg.frames_per_second, &mut self.fill)
            .is_ok()
    }

    /// Write everything stored, up to the end of the newest time step (all its threads), filling
    /// what is missing. Called at the end of a stream and before a jump.
    pub fn flush(&mut self, sink: &mut impl FrameSink) {
        let Some(base) = self.base else { return };
        if self.stats.placed == 0 {
            return;
        }
        let threads = u64::from(self.cfg.threads);
        let end = (self.highest / threads + 1) * threads;
        if end > base {
            self.write_until(end, sink);
        }
    }

    /// Time goes on with nothing arriving: the stream's newest slot is taken to be `slot` (a
    /// later one than any that came), and what falls out of the window is written — filled
    /// where nothing came, counted in `filled_silent` too. For a live reader, whose stream must
    /// go on at the station's rate; frames that come later are placed (or jump the stream) from
    /// there, as if the slots up to `slot` had been lost. Nothing before the first frames.
    pub fn advance_to(&mut self, slot: u64, sink: &mut impl FrameSink) {
        let Some(base) = self.base else { return };
        if slot <= self.highest {
            return;
        }
        self.highest = slot;
        let until = (slot + 1).saturating_sub(self.cfg.window);
        if until > base {
            let before = self.stats.written_filled;
            self.write_until(until, sink);
            self.stats.filled_silent += self.stats.written_filled - before;
        }
    }

    /// (sequence number, slot) of the earlier candidates the last push placed, taken.
    pub fn take_confirmed(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.confirmed)
    }

    /// Frames held as candidates for a jump (counted once they are placed or given up).
    pub fn pending(&self) -> usize {
        self.candidates.held.len()
    }

    /// This window takes over from `earlier` (the same stream, reshaped: another rate per
    /// thread): `earlier`'s counts go on here, its threads keep their ids (and, where they fit,
    /// their indices: a board's threads stay its own), and since `earlier` wrote its frames, a
    /// frame behind where this window anchors is late, never placed before it.
    pub fn take_over_from(&mut self, earlier: &StationWindow) {
        self.stats.add(&earlier.stats);
        self.written_any |= earlier.written_any || earlier.stats.placed > 0;
        self.threads = earlier.threads.resized(self.cfg.threads);
    }

    /// Give up what the window holds unwritten (a phantom station's few frames, issue 36): its
    /// placed frames stay counted as placed, those held as candidates for a jump are counted out
    /// of range, and nothing more is written.
    pub fn abandon(&mut self) {
        self.stats.out_of_range += self.candidates.clear();
    }

    /// Write what is left, up to the last frame that arrived: the other threads' frames of the
    /// last frame period never came (the stream stopped there, or a recording was stopped
    /// between two threads' frames) and are not written as fill. A thread's frames of the
    /// earlier periods after its last that arrived (one board a few frames behind another when
    /// the recording stopped) are filled, as [`WindowStats::filled_at_end`]: not counted lost.
    /// Frames held as candidates at the end are counted as out of range.
    pub fn finish(&mut self, sink: &mut impl FrameSink) {
        if let Some(base) = self.base {
            if self.stats.placed > 0 && self.highest + 1 > base {
                self.write_slots(self.highest + 1, true, sink);
            }
        }
        self.stats.out_of_range += self.candidates.clear();
    }
}

//! A Mark5B stream through the relay. Mark5B has no station id, no thread and no frame-size
//! constraint, so none of the VDIF relay's stations, threads or learning apply: one stream,
//! from the first source that delivers a frame, goes on in order.
//!
//! - **Input**: jive5ab's udps (8-byte sequence number, then bytes; bare datagrams carry no
//!   count to place a frame by, and every Mark5B UDP sender numbers them: refused by the
//!   session's `validate`). jive5ab 3.1.0 cuts a Mark5B
//!   stream into datagrams of the MTU's size (8960 bytes under 9000), a frame straddling two or
//!   three; they are joined into whole frames first ([`FramePieces`], the receiver's joiner).
//!   Whole frames one per datagram (10 024 bytes: DiFX's and `evlbi stream send`'s udps, or
//!   10 016 bare) go on as they are. Each frame is checked (sync word, header ranges).
//! - **Order**: a frame's place is its count in the stream (the joiner's, or the datagram's
//!   sequence number); one past the next expected leaves the frames between counted lost
//!   (`lost_in_input`); one at or before the last forwarded is counted (reordered or duplicate)
//!   and dropped, so what leaves is always in order.
//! - **Output**: one whole frame per datagram, behind an 8-byte little-endian sequence number
//!   that is the frame's count in the stream (jive5ab udps framing; what DiFX's mk5 UDP reader
//!   takes, a gap in the numbers being the gap in the data), or bare. Frames leave as they are
//!   made whole: the input is paced already (jive5ab's `ipd`), and a joined datagram completes
//!   at most one frame.
//! - **Memory**: frames waiting to leave are bounded by the relay's `buffer_bytes`, the oldest
//!   dropped and counted (`overflow_dropped`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use histogram::{Hist, DEFAULT_MAX_BUCKETS};
use vdif::formats::MARK5B_FRAME_LEN;
use vdif::{FrameRate, Mark5bHeader, StationId};

use crate::receiver::pieces::{FramePieces, Joined, JOINED_LEN};
use crate::results::{DatagramCounters, RelayedStation};
use crate::sender::Transmit;
use crate::wire::SeqFormat;

/// The udps sequence number before a frame.
const SEQ_LEN: usize = 8;

/// What the report calls the one Mark5B stream (it has no station id).
pub const MARK5B_STREAM_NAME: &str = "Mark5B";

/// A frame waiting to leave: when it came, its framed datagram.
struct Waiting {
    arrival: Instant,
    datagram: Vec<u8>,
}

/// The Mark5B side of a relay; see the module docs.
pub(crate) struct Mark5bRelay {
    output: SeqFormat,
    buffer_bytes: usize,
    pieces: FramePieces,
    joined: Vec<u8>,
    /// The source relayed (the first to deliver a frame); others are refused, counted.
    source: Option<SocketAddr>,
    /// The count of the last frame forwarded.
    last: Option<u64>,
    /// A frame rate given (`--fps`), else learned from the frame numbers at a second's turn.
    fps: Option<FrameRate>,
    /// The highest frame number seen in the current second, and that second.
    numbers: Option<(u32, u16)>,
    waiting: VecDeque<Waiting>,
    waiting_bytes: usize,
    current: Option<Waiting>,
    delay: Hist,
    counts: Option<RelayedStation>,
    problem: Option<String>,
}

impl Mark5bRelay {
    /// A relay of Mark5B (jive5ab udps in) out in `output` (jive5ab or none), holding at most
    /// `buffer_bytes` of frames; `fps`: the frame rate when given.
    pub(crate) fn new(output: SeqFormat, buffer_bytes: usize, fps: Option<FrameRate>) -> Self {
        Mark5bRelay {
            output,
            buffer_bytes: buffer_bytes.max(MARK5B_FRAME_LEN + SEQ_LEN),
            pieces: FramePieces::default(),
            joined: Vec::new(),
            source: None,
            last: None,
            fps,
            numbers: None,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            current: None,
            delay: Hist::new(),
            counts: None,
            problem: None,
        }
    }

    /// The first problem since asked last (said once by the relay).
    pub(crate) fn take_problem(&mut self) -> Option<String> {
        self.problem.take()
    }

    fn said(&mut self, what: impl FnOnce() -> String) {
        if self.problem.is_none() {
            self.problem = Some(what());
        }
    }

    /// A datagram from `from` at `now` (read whole); its udps sequence number, if it has one.
    pub(crate) fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        counters: &mut DatagramCounters,
    ) -> Option<u64> {
        if self.source.is_some_and(|s| s != from) {
            counters.foreign_source += 1;
            let relayed = self.source;
            self.said(|| {
                format!(
                    "Mark5B datagram from {from}: the relay takes one Mark5B stream, from {}",
                    relayed.map_or_else(String::new, |s| s.to_string())
                )
            });
            return None;
        }
        let seq = datagram
            .get(..SEQ_LEN)
            .and_then(|b| <[u8; SEQ_LEN]>::try_from(b).ok())
            .map(u64::from_le_bytes);
        let Some(seq) = seq else {
            counters.too_short += 1;
            self.said(|| {
                format!(
                    "{} byte datagram from {from}: shorter than a sequence number",
                    datagram.len()
                )
            });
            return None;
        };
        let mut joined = std::mem::take(&mut self.joined);
        match self.pieces.offer(from, datagram, &mut joined, counters) {
            Joined::Taken => {
                for d in joined.chunks_exact(JOINED_LEN) {
                    let (head, frame) = d.split_at(SEQ_LEN);
                    let mut n = [0u8; SEQ_LEN];
                    n.copy_from_slice(head);
                    self.take_frame(now, from, u64::from_le_bytes(n), frame, counters);
                }
            }
            Joined::NotAPiece => {
                let frame = &datagram[SEQ_LEN..];
                if frame.len() == MARK5B_FRAME_LEN {
                    self.take_frame(now, from, seq, frame, counters);
                } else {
                    counters.length_mismatch += 1;
                    self.said(|| {
                        format!(
                            "{} byte datagram from {from}: neither a piece of a Mark5B stream nor a {MARK5B_FRAME_LEN}-byte frame",
                            datagram.len()
                        )
                    });
                }
            }
        }
        self.joined = joined;
        Some(seq)
    }

    /// Learn the frame rate from the frame numbers (the highest of a second, plus one, once the
    /// next second begins); the rate given or learned.
    fn learn(&mut self, h: &Mark5bHeader) {
        if self.fps.is_some() {
            return;
        }
        match self.numbers {
            Some((second, top)) if second == h.second_of_day => {
                self.numbers = Some((second, top.max(h.frame_number)));
            }
            Some((second, top)) if h.second_of_day == second + 1 && h.frame_number == 0 => {
                self.fps = FrameRate::new(u32::from(top) + 1).ok();
                if let (Some(c), Some(f)) = (self.counts.as_mut(), self.fps) {
                    c.frames_per_second = f;
                }
            }
            _ => self.numbers = Some((h.second_of_day, h.frame_number)),
        }
    }

    /// Frame `count` of the stream (`frame`, whole) from `from`: checked, placed, queued.
    fn take_frame(
        &mut self,
        now: Instant,
        from: SocketAddr,
        count: u64,
        frame: &[u8],
        counters: &mut DatagramCounters,
    ) {
        let h = match Mark5bHeader::parse(frame).and_then(|h| h.check_ranges().map(|()| h)) {
            Ok(h) => h,
            Err(e) => {
                counters.bad_header += 1;
                self.said(|| format!("Mark5B frame from {from}: {e}"));
                return;
            }
        };
        self.learn(&h);
        self.source = Some(from);
        // Reported as 1 until learned (at a second's turn) when not given.
        let Some(fps) = self.fps.or_else(|| FrameRate::new(1).ok()) else {
            return;
        };
        let c = self.counts.get_or_insert_with(|| {
            let mut c = RelayedStation::new(StationId(0), fps, MARK5B_FRAME_LEN);
            c.station = MARK5B_STREAM_NAME.into();
            c.thread_ids = vec![0];
            c
        });
        c.frames_in += 1;
        match self.last {
            Some(l) if count == l => {
                c.duplicates_in += 1;
                return;
            }
            Some(l) if count < l => {
                c.reordered_in += 1;
                return;
            }
            Some(l) => c.lost_in_input += count - l - 1,
            None => {}
        }
        self.last = Some(count);
        let mut datagram = Vec::with_capacity(SEQ_LEN + MARK5B_FRAME_LEN);
        if self.output == SeqFormat::Jive5ab {
            datagram.extend_from_slice(&count.to_le_bytes());
        }
        datagram.extend_from_slice(frame);
        self.waiting_bytes += datagram.len();
        self.waiting.push_back(Waiting { arrival: now, datagram });
        while self.waiting_bytes > self.buffer_bytes {
            let Some(w) = self.waiting.pop_front() else {
                break;
            };
            self.waiting_bytes -= w.datagram.len();
            c.overflow_dropped += 1;
        }
    }

    /// The next datagram to send, now.
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit<'_>> {
        let w = self.waiting.pop_front()?;
        self.waiting_bytes -= w.datagram.len();
        let w = self.current.insert(w);
        Some(Transmit {
            stream: 0,
            contents: &w.datagram,
            segment_size: None,
            frames: &[],
        })
    }

    /// The datagram [`Mark5bRelay::poll_transmit`] gave was sent at `now`.
    pub(crate) fn on_transmitted(&mut self, now: Instant) {
        if let Some(w) = self.current.take() {
            self.delay
                .record((now.saturating_duration_since(w.arrival).as_nanos() as u64).max(1));
            if let Some(c) = self.counts.as_mut() {
                c.frames_out += 1;
            }
        }
    }

    /// Frames waiting to leave.
    pub(crate) fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// The stream's counts so far, its queue delays left out (none before its first frame).
    pub(crate) fn counts(&self) -> Option<&RelayedStation> {
        self.counts.as_ref()
    }

    /// The stream's counts (none before its first frame).
    pub(crate) fn station(&self) -> Option<RelayedStation> {
        let mut c = self.counts.clone()?;
        c.queue_delay_ns = self.delay.summary(DEFAULT_MAX_BUCKETS);
        Some(c)
    }
}

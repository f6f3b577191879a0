//! The receiving side: places chunks through a [`Sink`], reports, answers FIN.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;

mod train;

use crate::layout::Layout;
use crate::session::{micros, parse_own, ConfigError, Reject, RejectCounters, SessionParams};
use crate::wire::{self, Data, Datagram, Fin, Kind, PayloadDigest, Report, SeqRange, MAX_NAK_RANGES};
use train::TrainMeter;

/// Where received bytes go (a file, a correlator's buffer, a checker in tests).
pub trait Sink {
    /// Writes the chunk at wire offset `offset` (chunk index · chunk size, see
    /// [`crate::layout`]). Called once per chunk, in arrival order (not file order). On error
    /// the chunk stays missing and is requested again.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()>;

    /// Like [`Sink::write_at`], with the payload digest the datagram's tag was checked against
    /// (keyed sessions; see [`crate::wire::PayloadDigest`]). Default: [`Sink::write_at`].
    fn write_chunk(&mut self, offset: u64, data: &[u8], digest: Option<&PayloadDigest>) -> std::io::Result<()> {
        let _ = digest;
        self.write_at(offset, data)
    }
}

impl<K: Sink + ?Sized> Sink for &mut K {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        (**self).write_at(offset, data)
    }

    fn write_chunk(&mut self, offset: u64, data: &[u8], digest: Option<&PayloadDigest>) -> std::io::Result<()> {
        (**self).write_chunk(offset, data, digest)
    }
}

/// Receiver settings; [`ReceiverConfig::new`] gives the defaults for a session.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ReceiverConfig {
    /// What is received: the session id, the chunk size, and the first segment's size.
    pub session: SessionParams,
    /// More segments may follow ([`Receiver::push_segment`]); a FIN for the size reached then
    /// closes the layout. Otherwise the transfer is the one segment of `session.file_size` bytes.
    pub open: bool,
    /// Report at least this often while data arrives.
    pub report_interval: Duration,
    /// …or after this many DATA datagrams, whichever comes first.
    pub report_every: u32,
    /// Chunks accepted beyond the contiguous prefix (memory bound: one bit each).
    pub window_chunks: u64,
    /// Give up (state [`ReceiverState::TimedOut`]) after this long without a valid datagram
    /// before the transfer closed: no state waits without a deadline.
    pub idle_timeout: Duration,
    /// Authenticate every datagram both ways with this key (see [`crate::DataKey`]).
    #[serde(skip)]
    pub data_key: Option<wire::DataKey>,
}

impl ReceiverConfig {
    /// Defaults for `session`: report every 10 ms or 1000 datagrams, window of 2^20 chunks.
    pub fn new(session: SessionParams) -> Self {
        Self {
            session,
            open: false,
            report_interval: Duration::from_millis(10),
            report_every: 1000,
            window_chunks: 1 << 20,
            idle_timeout: Duration::from_secs(120),
            data_key: None,
        }
    }
}

/// Where the receiver is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReceiverState {
    /// Chunks missing.
    Receiving,
    /// Every chunk written; waiting for FIN.
    Complete,
    /// FIN received and answered: the sender knows too.
    Closed,
    /// Nothing valid arrived for [`ReceiverConfig::idle_timeout`] before the transfer closed.
    TimedOut,
}

/// What the receiver did (serialisable for reports).
#[derive(Debug, Clone, Serialize)]
pub struct ReceiverStats {
    /// State at the snapshot.
    pub state: ReceiverState,
    /// File size.
    pub file_bytes: u64,
    /// Bytes written to the sink (each chunk once).
    pub bytes_written: u64,
    /// Valid DATA datagrams received.
    pub datagrams_received: u64,
    /// Their payload bytes.
    pub payload_bytes_received: u64,
    /// DATA for chunks already written.
    pub duplicate_datagrams: u64,
    /// DATA flagged as retransmission.
    pub retransmitted_datagrams_received: u64,
    /// Datagrams lost on the way: 1 − received / (highest sequence number + 1).
    pub loss_fraction: f64,
    /// REPORTs sent.
    pub reports_sent: u64,
    /// FIN-ACKs sent.
    pub fin_acks_sent: u64,
    /// Failed sink writes.
    pub sink_errors: u64,
    /// The latest sink error.
    pub last_sink_error: Option<String>,
    /// Datagrams dropped, by reason.
    pub rejected: RejectCounters,
    /// Seconds from creation to the first valid DATA.
    pub first_data_s: Option<f64>,
    /// Seconds from creation to the last chunk written.
    pub complete_s: Option<f64>,
    /// File bits / (complete − first data).
    pub goodput_bps: Option<f64>,
}

/// The receiving state machine. See the crate docs for how to drive it.
pub struct Receiver<K> {
    cfg: ReceiverConfig,
    sink: K,
    epoch: Instant,
    /// Arrival of the last valid datagram (the idle deadline counts from it).
    last_heard: Instant,
    state: ReceiverState,
    layout: Layout,
    cum_ack: u64,
    /// Bit `i` of word `w`: chunk `bits_base + 64·w + i` received. `bits_base` is a multiple of
    /// 64 and ≤ `cum_ack`.
    bits: VecDeque<u64>,
    bits_base: u64,
    recv_high: u64,
    nak_cursor: u64,
    seq_high: u64,
    /// (timestamp, arrival) of the latest DATA.
    echo: Option<(u64, Instant)>,
    owd_min: i64,
    owd_interval_min: i64,
    owd_latest: i64,
    interval_start: Option<Instant>,
    /// Arrival of the latest DATA of the interval: the interval ends there, so its bytes and
    /// its length are measured on the same (arrival) clock, not against when the loop got
    /// round to writing the report.
    interval_last: Option<Instant>,
    interval_datagrams: u32,
    interval_bytes: u64,
    report_seq: u64,
    last_report_at: Option<Instant>,
    report_due: Option<Instant>,
    since_report: u32,
    fin_ack_due: bool,
    first_data: Option<Instant>,
    complete_at: Option<Instant>,
    last_reject: Option<Reject>,
    stats: ReceiverStats,
    train: TrainMeter,
}

impl<K: Sink> Receiver<K> {
    /// A receiver created at `now`, writing into `sink`.
    pub fn new(cfg: ReceiverConfig, sink: K, now: Instant) -> Result<Self, ConfigError> {
        cfg.session.validate()?;
        if cfg.report_interval.is_zero() {
            return Err(ConfigError::NotPositive("report_interval"));
        }
        if cfg.report_every == 0 {
            return Err(ConfigError::NotPositive("report_every"));
        }
        if cfg.window_chunks == 0 {
            return Err(ConfigError::NotPositive("window_chunks"));
        }
        let layout = Layout::first(cfg.session.file_size, cfg.session.chunk_size, cfg.open);
        let complete = layout.is_closed() && layout.total_chunks() == 0;
        let state = if complete {
            ReceiverState::Complete
        } else {
            ReceiverState::Receiving
        };
        let stats = ReceiverStats {
            state,
            file_bytes: cfg.session.file_size,
            bytes_written: 0,
            datagrams_received: 0,
            payload_bytes_received: 0,
            duplicate_datagrams: 0,
            retransmitted_datagrams_received: 0,
            loss_fraction: 0.0,
            reports_sent: 0,
            fin_acks_sent: 0,
            sink_errors: 0,
            last_sink_error: None,
            rejected: RejectCounters::default(),
            first_data_s: None,
            complete_s: None,
            goodput_bps: None,
        };
        Ok(Self {
            cfg,
            sink,
            epoch: now,
            last_heard: now,
            state,
            layout,
            cum_ack: 0,
            bits: VecDeque::new(),
            bits_base: 0,
            recv_high: 0,
            nak_cursor: 0,
            seq_high: 0,
            echo: None,
            owd_min: i64::MAX,
            owd_interval_min: i64::MAX,
            owd_latest: 0,
            interval_start: None,
            interval_last: None,
            interval_datagrams: 0,
            interval_bytes: 0,
            report_seq: 0,
            last_report_at: None,
            report_due: None,
            since_report: 0,
            fin_ack_due: false,
            first_data: None,
            complete_at: complete.then_some(now),
            last_reject: None,
            stats,
            train: TrainMeter::default(),
        })
    }

    /// Current state.
    pub fn state(&self) -> ReceiverState {
        self.state
    }

    /// Append a segment of `len` bytes lying at `digest_base` of its source (see
    /// [`crate::layout`]); returns its first chunk, or `None` if the receiver is not open or its
    /// layout was closed.
    pub fn push_segment(&mut self, len: u64, digest_base: u64) -> Option<u64> {
        if !self.cfg.open {
            return None;
        }
        let first = self.layout.push(len, digest_base)?;
        self.stats.file_bytes = self.layout.total_bytes();
        Some(first)
    }

    /// The segments so far.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether `datagram` belongs to this session (its tag checks out under the session's key
    /// and it carries the session id), without handing it over: what a socket loop asks before
    /// it trusts a datagram's source address.
    pub fn owns(&self, datagram: &[u8]) -> bool {
        self.authenticate(datagram).is_ok()
    }

    /// Check a datagram's tag (keyed sessions) and session id and parse it; a DATA's payload
    /// digest comes with it. A keyed DATA is checked against the digest of its payload at the
    /// offset the layout gives its chunk, so one that does not fit the layout cannot be checked
    /// and counts as [`Reject::BadTag`] like any other datagram without a valid tag.
    fn authenticate<'a>(&self, datagram: &'a [u8]) -> Result<(Datagram<'a>, Option<PayloadDigest>), Reject> {
        let id = self.cfg.session.session_id;
        let Some(key) = &self.cfg.data_key else {
            return parse_own(datagram, id, None).map(|d| (d, None));
        };
        let is_data = wire::peek_header(datagram).is_ok_and(|h| h.kind == Kind::Data);
        if !is_data {
            return parse_own(datagram, id, Some(key)).map(|d| (d, None));
        }
        let body_len = datagram.len().checked_sub(wire::TAG_LEN).ok_or(Reject::BadTag)?;
        let (body, tag) = datagram.split_at(body_len);
        let Ok(Datagram::Data(d)) = wire::parse(body) else {
            return Err(Reject::BadTag);
        };
        let cs = u64::from(self.cfg.session.chunk_size);
        let place = (d.header.offset.is_multiple_of(cs))
            .then(|| self.layout.place(d.header.offset / cs))
            .flatten()
            .filter(|p| p.len == d.payload.len())
            .ok_or(Reject::BadTag)?;
        let header: &[u8; wire::DATA_HEADER_LEN] = body
            .get(..wire::DATA_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(Reject::BadTag)?;
        let digest = wire::payload_digest(place.digest_offset, d.payload);
        if !key.check_data(header, &digest, tag) {
            return Err(Reject::BadTag);
        }
        if d.header.session_id != id {
            return Err(Reject::WrongSession(d.header.session_id));
        }
        Ok((Datagram::Data(d), Some(digest)))
    }

    /// Whether every chunk has been written.
    pub fn is_complete(&self) -> bool {
        self.state != ReceiverState::Receiving
    }

    /// Chunks `[0, cum_ack)` are written.
    pub fn cum_ack(&self) -> u64 {
        self.cum_ack
    }

    /// Why the latest datagram was rejected, if one was.
    pub fn last_reject(&self) -> Option<&Reject> {
        self.last_reject.as_ref()
    }

    /// The sink.
    pub fn sink(&self) -> &K {
        &self.sink
    }

    /// The sink, mutably.
    pub fn sink_mut(&mut self) -> &mut K {
        &mut self.sink
    }

    /// Gives the sink back.
    pub fn into_sink(self) -> K {
        self.sink
    }

    /// Statistics so far.
    pub fn stats(&self) -> ReceiverStats {
        let mut s = self.stats.clone();
        s.state = self.state;
        if self.seq_high > 0 {
            s.loss_fraction = 1.0 - (s.datagrams_received.min(self.seq_high) as f64 / self.seq_high as f64);
        }
        let since = |t: Instant| t.saturating_duration_since(self.epoch).as_secs_f64();
        s.first_data_s = self.first_data.map(since);
        s.complete_s = self.complete_at.map(since);
        if let (Some(a), Some(b)) = (self.first_data, self.complete_at) {
            let d = b.saturating_duration_since(a).as_secs_f64();
            s.goodput_bps = (d > 0.0).then(|| self.layout.total_bytes() as f64 * 8.0 / d);
        }
        s
    }

    fn reject(&mut self, r: Reject) {
        self.stats.rejected.count(&r);
        self.last_reject = Some(r);
    }

    /// A datagram from the sender arrived at `now`. Invalid ones are counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        let (d, digest) = match self.authenticate(datagram) {
            Ok(d) => d,
            Err(r) => return self.reject(r),
        };
        if self.state == ReceiverState::TimedOut {
            return;
        }
        match d {
            Datagram::Report(_) | Datagram::FinAck(_) => self.reject(Reject::UnexpectedKind(d.kind())),
            Datagram::Data(data) => self.handle_data(now, data, digest.as_ref()),
            Datagram::Fin(f) => {
                if f.file_size != self.layout.total_bytes() {
                    return self.reject(Reject::FileSizeMismatch(f.file_size));
                }
                self.last_heard = now;
                // The sender has no more segments: the size it names is final.
                self.layout.close();
                self.check_complete(now);
                if self.is_complete() {
                    self.state = ReceiverState::Closed;
                    self.fin_ack_due = true;
                } else {
                    // A FIN before everything arrived: tell the sender what is missing.
                    self.report_due = Some(now);
                }
            }
        }
    }

    fn handle_data(&mut self, now: Instant, data: Data<'_>, digest: Option<&PayloadDigest>) {
        let cs = u64::from(self.cfg.session.chunk_size);
        let h = data.header;
        if h.offset >= self.layout.wire_offset(self.layout.total_chunks()) {
            return self.reject(Reject::OffsetBeyondEnd(h.offset));
        }
        if !h.offset.is_multiple_of(cs) {
            return self.reject(Reject::MisalignedOffset(h.offset));
        }
        let chunk = h.offset / cs;
        let expected = self.layout.chunk_len(chunk);
        if data.payload.len() != expected {
            return self.reject(Reject::BadPayloadLength {
                len: data.payload.len(),
                expected,
            });
        }
        if chunk >= self.cum_ack.saturating_add(self.cfg.window_chunks) {
            return self.reject(Reject::BeyondWindow(chunk));
        }

        self.last_heard = now;
        // Measurements.
        let now_us = micros(now.saturating_duration_since(self.epoch));
        let owd = (i128::from(now_us) - i128::from(h.timestamp_us)).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
        let owd = owd as i64;
        self.owd_min = self.owd_min.min(owd);
        self.owd_interval_min = self.owd_interval_min.min(owd);
        self.owd_latest = owd;
        self.echo = Some((h.timestamp_us, now));
        self.seq_high = self.seq_high.max(h.seq.saturating_add(1));
        self.first_data.get_or_insert(now);
        let idle = self
            .interval_start
            .is_none_or(|s| now.saturating_duration_since(s) > self.cfg.report_interval * 2);
        if self.interval_datagrams == 0 && idle {
            self.interval_start = Some(now);
        }
        self.interval_datagrams = self.interval_datagrams.saturating_add(1);
        self.interval_bytes += data.payload.len() as u64;
        self.interval_last = Some(self.interval_last.map_or(now, |l| l.max(now)));
        if h.seq < wire::TRAIN_LEN && !h.retransmit {
            let tag = if self.cfg.data_key.is_some() { wire::TAG_LEN } else { 0 };
            let len = data.payload.len() + wire::DATA_HEADER_LEN + tag;
            self.train.arrival(now, len as u64);
            if self.train.count == wire::TRAIN_LEN as u32 {
                // The whole train is in: its estimate goes out now, not at the next interval.
                self.report_due = Some(now);
            }
        }
        self.stats.datagrams_received += 1;
        self.stats.payload_bytes_received += data.payload.len() as u64;
        if h.retransmit {
            self.stats.retransmitted_datagrams_received += 1;
        }

        if self.is_received(chunk) {
            self.stats.duplicate_datagrams += 1;
        } else {
            match self.sink.write_chunk(h.offset, data.payload, digest) {
                Ok(()) => {
                    self.set_received(chunk);
                    self.stats.bytes_written += data.payload.len() as u64;
                    self.recv_high = self.recv_high.max(chunk + 1);
                    let before = self.cum_ack;
                    self.advance();
                    if self.cum_ack == self.layout.total_chunks() && self.cum_ack > before {
                        // Everything so far is here: tell the sender at once.
                        self.report_due = Some(now);
                    }
                    self.check_complete(now);
                }
                Err(e) => {
                    self.stats.sink_errors += 1;
                    self.stats.last_sink_error = Some(e.to_string());
                }
            }
        }

        self.since_report = self.since_report.saturating_add(1);
        if self.since_report >= self.cfg.report_every {
            self.report_due = Some(now);
        } else if self.report_due.is_none() {
            let due = self.last_report_at.unwrap_or(now) + self.cfg.report_interval;
            self.report_due = Some(due.max(now));
        }
    }

    /// Closed and every chunk written: complete.
    fn check_complete(&mut self, now: Instant) {
        if self.state == ReceiverState::Receiving
            && self.layout.is_closed()
            && self.cum_ack == self.layout.total_chunks()
        {
            self.state = ReceiverState::Complete;
            self.complete_at = Some(now);
            self.report_due = Some(now);
        }
    }

    fn is_received(&self, c: u64) -> bool {
        if c < self.cum_ack {
            return true;
        }
        let i = c - self.bits_base;
        self.bits
            .get((i / 64) as usize)
            .is_some_and(|w| (w >> (i % 64)) & 1 == 1)
    }

    fn set_received(&mut self, c: u64) {
        let i = c - self.bits_base;
        let w = (i / 64) as usize;
        if self.bits.len() <= w {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << (i % 64);
    }

    /// Moves `cum_ack` over received chunks and frees the words below it.
    fn advance(&mut self) {
        loop {
            let i = self.cum_ack - self.bits_base;
            let b = (i % 64) as u32;
            let Some(&word) = self.bits.get((i / 64) as usize) else {
                break;
            };
            let rest = word >> b;
            if rest == u64::MAX >> b {
                self.cum_ack += u64::from(64 - b);
            } else {
                self.cum_ack += u64::from(rest.trailing_ones());
                break;
            }
        }
        self.cum_ack = self.cum_ack.min(self.layout.total_chunks());
        while self.cum_ack - self.bits_base >= 64 && !self.bits.is_empty() {
            self.bits.pop_front();
            self.bits_base += 64;
        }
        if self.bits.is_empty() {
            self.bits_base = self.cum_ack - self.cum_ack % 64;
        }
    }

    /// First missing chunk in `[from, limit)`.
    fn next_missing(&self, from: u64, limit: u64) -> Option<u64> {
        let mut c = from.max(self.cum_ack);
        while c < limit {
            let i = c - self.bits_base;
            let b = (i % 64) as u32;
            let word = self.bits.get((i / 64) as usize).copied().unwrap_or(0);
            let holes = !word >> b;
            if holes != 0 {
                let m = c + u64::from(holes.trailing_zeros());
                return (m < limit).then_some(m);
            }
            c += u64::from(64 - b);
        }
        None
    }

    /// First received chunk in `[from, limit)`, or `limit`.
    fn next_present(&self, from: u64, limit: u64) -> u64 {
        let mut c = from;
        while c < limit {
            let i = c - self.bits_base;
            let b = (i % 64) as u32;
            let word = self.bits.get((i / 64) as usize).copied().unwrap_or(0) >> b;
            if word != 0 {
                return (c + u64::from(word.trailing_zeros())).min(limit);
            }
            c += u64::from(64 - b);
        }
        limit
    }

    /// Holes in `[from, limit)`, at most `max`.
    fn holes(&self, from: u64, limit: u64, max: usize, out: &mut Vec<SeqRange>) {
        let mut c = from;
        while out.len() < max {
            let Some(start) = self.next_missing(c, limit) else {
                break;
            };
            let end = self.next_present(start, limit).min(start + u64::from(u32::MAX));
            out.push(SeqRange {
                first: start,
                count: (end - start) as u32,
            });
            c = end;
        }
    }

    /// NAK ranges for the next report: from the rotating cursor up, then from `cum_ack` up to
    /// the cursor, at most [`MAX_NAK_RANGES`] in all.
    fn collect_naks(&mut self) -> Vec<SeqRange> {
        let (lo, hi) = (self.cum_ack, self.recv_high);
        let mut upper = Vec::new();
        if lo >= hi {
            self.nak_cursor = lo;
            return upper;
        }
        let cursor = if self.nak_cursor > lo && self.nak_cursor < hi {
            self.nak_cursor
        } else {
            lo
        };
        self.holes(cursor, hi, MAX_NAK_RANGES, &mut upper);
        if upper.len() == MAX_NAK_RANGES {
            self.nak_cursor = upper.last().map_or(lo, |r| r.end());
            return upper;
        }
        let mut lower = Vec::new();
        self.holes(lo, cursor, MAX_NAK_RANGES - upper.len(), &mut lower);
        self.nak_cursor = if lower.len() + upper.len() == MAX_NAK_RANGES {
            lower.last().map_or(lo, |r| r.end())
        } else {
            lo
        };
        lower.extend(upper);
        lower
    }

    /// When a REPORT is due, or the idle deadline, whichever is first.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.waiting() {
            return self.report_due;
        }
        let idle = self.last_heard + self.cfg.idle_timeout;
        Some(self.report_due.map_or(idle, |r| r.min(idle)))
    }

    /// Whether the receiver waits for the sender (and so has an idle deadline): before the
    /// transfer closed, unless it is open and holds everything pushed so far (then the caller
    /// decides what comes next).
    fn waiting(&self) -> bool {
        match self.state {
            ReceiverState::Closed | ReceiverState::TimedOut => false,
            _ => self.layout.is_closed() || self.cum_ack < self.layout.total_chunks(),
        }
    }

    /// The deadline from [`Receiver::poll_timeout`] passed: a due report goes out with the next
    /// [`Receiver::poll_transmit`]; past the idle deadline the receiver gives up.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.waiting() && now >= self.last_heard + self.cfg.idle_timeout {
            self.state = ReceiverState::TimedOut;
            self.report_due = None;
        }
    }

    /// Next datagram to send at `now`, if any; call until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.poll_transmit_into(now, &mut out).then_some(out)
    }

    /// Like [`Receiver::poll_transmit`], writing into `out` (cleared first).
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        out.clear();
        let written = self.poll_transmit_plain(now, out);
        if let (true, Some(k)) = (written, &self.cfg.data_key) {
            k.seal(out);
        }
        written
    }

    fn poll_transmit_plain(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        if self.state == ReceiverState::TimedOut {
            return false;
        }
        if self.fin_ack_due {
            self.fin_ack_due = false;
            self.stats.fin_acks_sent += 1;
            Fin {
                session_id: self.cfg.session.session_id,
                file_size: self.layout.total_bytes(),
            }
            .write(Kind::FinAck, out);
            return true;
        }
        if self.report_due.is_none_or(|t| t > now) {
            return false;
        }
        let report = self.build_report(now);
        report.write(out);
        true
    }

    fn build_report(&mut self, now: Instant) -> Report {
        let since = |t: Option<Instant>| t.map_or(0, |t| micros(now.saturating_duration_since(t)));
        let clamp32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let naks = self.collect_naks();
        self.report_seq += 1;
        let (echo_ts_us, echo_at) = self.echo.map_or((0, None), |(ts, at)| (ts, Some(at)));
        let owd_latest = self.owd_latest;
        let interval_end = match (self.interval_start, self.interval_last) {
            (Some(s), Some(l)) if self.interval_datagrams > 0 && l > s => l,
            _ => now,
        };
        let interval_us = self
            .interval_start
            .map_or(0, |s| micros(interval_end.saturating_duration_since(s)));
        let r = Report {
            session_id: self.cfg.session.session_id,
            report_seq: self.report_seq,
            cum_ack: self.cum_ack,
            recv_high: self.recv_high.max(self.cum_ack),
            window_end: self.cum_ack.saturating_add(self.cfg.window_chunks),
            seq_high: self.seq_high,
            rx_datagrams: self.stats.datagrams_received,
            echo_ts_us,
            echo_delay_us: clamp32(since(echo_at)),
            interval_us: clamp32(interval_us),
            interval_datagrams: self.interval_datagrams,
            interval_bytes: self.interval_bytes,
            owd_min_us: if self.owd_min == i64::MAX { 0 } else { self.owd_min },
            owd_interval_min_us: if self.interval_datagrams > 0 {
                self.owd_interval_min
            } else {
                owd_latest
            },
            owd_latest_us: owd_latest,
            train_bps: self.train.estimate(),
            naks,
        };
        self.interval_start = Some(interval_end);
        self.interval_last = None;
        self.interval_datagrams = 0;
        self.interval_bytes = 0;
        self.owd_interval_min = i64::MAX;
        self.last_report_at = Some(now);
        self.report_due = None;
        self.since_report = 0;
        self.stats.reports_sent += 1;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Null;
    impl Sink for Null {
        fn write_at(&mut self, _: u64, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn rx(chunks: u64) -> Receiver<Null> {
        let params = SessionParams {
            session_id: 1,
            file_size: chunks * 10,
            chunk_size: 10,
        };
        Receiver::new(ReceiverConfig::new(params), Null, Instant::now()).unwrap()
    }

    #[test]
    fn bitmap_advances_and_finds_holes() {
        let mut r = rx(1000);
        for c in (0..300).filter(|c| c % 7 != 3 && !(100..230).contains(c)) {
            r.set_received(c);
            r.recv_high = r.recv_high.max(c + 1);
            r.advance();
        }
        assert_eq!(r.cum_ack, 3);
        assert!(r.is_received(2) && !r.is_received(3) && r.is_received(4));
        let naks = r.collect_naks();
        let mut missing = Vec::new();
        for n in &naks {
            missing.extend(n.iter());
        }
        let expected: Vec<u64> = (0..300).filter(|c| c % 7 == 3 || (100..230).contains(c)).collect();
        assert_eq!(missing, expected);
        // Fill everything: cum_ack runs to the end.
        for c in 0..1000 {
            if !r.is_received(c) {
                r.set_received(c);
            }
        }
        r.advance();
        assert_eq!(r.cum_ack, 1000);
        assert!(r.bits.len() <= 1);
    }

    #[test]
    fn nak_lists_rotate_when_too_long() {
        let mut r = rx(10_000);
        // 300 isolated holes: every other chunk.
        for c in (1..600).step_by(2) {
            r.set_received(c);
        }
        r.recv_high = 600;
        r.advance();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..4 {
            let naks = r.collect_naks();
            assert!(naks.len() <= MAX_NAK_RANGES);
            assert!(naks.windows(2).all(|w| w[0].end() <= w[1].first));
            for n in naks {
                seen.insert(n.first);
            }
        }
        assert_eq!(seen.len(), 300, "every hole reported within 4 reports");
    }
}

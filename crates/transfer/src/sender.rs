//! The sending side: reads chunks from a [`Source`], paces DATA, repairs NAKed chunks.

mod parts;
mod tail;
mod types;

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use pacing::RatePacer;
use serde::Serialize;

use crate::cc::{CongestionController, ReportSample};
use crate::layout::Layout;
use crate::session::{micros, parse_own, ConfigError, Reject, RejectCounters, SessionParams};
use crate::wire::{self, DataHeader, Datagram, Fin, Kind, PayloadDigest, Report, DATA_HEADER_LEN};
use parts::{InflightLog, RateSampler, RttEstimator};
use tail::TailResend;
pub use types::{Failure, RateSample, SenderState, SenderStats};

/// Where the sender's bytes come from (a file, a recorder's buffer, a generator in tests).
pub trait Source {
    /// Reads up to `buf.len()` bytes of the chunk at wire offset `offset` (chunk index · chunk
    /// size, see [`crate::layout`]), from `offset` on; returns how many were read (0 = end of
    /// data). The sender calls it again for the rest after a short read. An error aborts the
    /// transfer.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize>;

    /// The chunk at wire offset `offset` left in a DATA datagram with `payload`; `digest` is the
    /// payload digest its tag covers (keyed sessions), `first` whether this was the chunk's
    /// first transmission. Chunks are first sent in order. Default: nothing.
    fn on_sent(&mut self, offset: u64, payload: &[u8], digest: Option<&PayloadDigest>, first: bool) {
        let _ = (offset, payload, digest, first);
    }
}

impl<S: Source + ?Sized> Source for &mut S {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        (**self).read_at(offset, buf)
    }

    fn on_sent(&mut self, offset: u64, payload: &[u8], digest: Option<&PayloadDigest>, first: bool) {
        (**self).on_sent(offset, payload, digest, first)
    }
}

/// Sender settings; [`SenderConfig::new`] gives the defaults for a session.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SenderConfig {
    /// What is sent: the session id, the chunk size, and the first segment's size.
    pub session: SessionParams,
    /// More segments may follow ([`Sender::push_segment`]) until [`Sender::close`]; otherwise
    /// the transfer is the one segment of `session.file_size` bytes.
    pub open: bool,
    /// Bytes each datagram occupies on the wire beyond its UDP payload, for pacing and rate
    /// estimation: 66 = IPv4 (20) + UDP (8) + Ethernet header, FCS, preamble, gap (38).
    pub wire_overhead: u32,
    /// Most chunks between the oldest unacknowledged one and the newest sent (memory bound).
    pub max_window_chunks: u64,
    /// RTT assumed before the first measurement.
    pub initial_rtt: Duration,
    /// Floor of the report timeout after which the sender stops and probes.
    pub min_report_timeout: Duration,
    /// Longest interval between probes during a silence.
    pub max_probe_interval: Duration,
    /// Give up after this long without a valid datagram from the receiver.
    pub idle_timeout: Duration,
    /// Pacing slack: up to this much sending may be bunched into one burst.
    pub pacing_granularity: Duration,
    /// Floor of the reorder window (which is otherwise ¼ of the min RTT).
    pub min_reorder_window: Duration,
    /// Period of [`SenderStats::rate_samples`].
    pub rate_sample_interval: Duration,
    /// Once every chunk has left, resend the newest ones not yet known to have arrived in the
    /// pacing slots that would otherwise go unused (tail protection, see the crate docs; default on).
    #[serde(default = "on")]
    pub tail_protection: bool,
    /// Authenticate every datagram both ways with this key (see [`crate::DataKey`]); both ends
    /// must agree. `None`: unauthenticated (simulations, trusted paths).
    #[serde(skip)]
    pub data_key: Option<wire::DataKey>,
}

fn on() -> bool {
    true
}

impl SenderConfig {
    /// Defaults for `session`.
    pub fn new(session: SessionParams) -> Self {
        Self {
            session,
            open: false,
            wire_overhead: models::wire::ETHERNET_UDP_OVERHEAD,
            max_window_chunks: 1 << 20,
            initial_rtt: Duration::from_millis(300),
            min_report_timeout: Duration::from_millis(100),
            max_probe_interval: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(120),
            pacing_granularity: Duration::from_micros(100),
            min_reorder_window: Duration::from_millis(1),
            rate_sample_interval: Duration::from_millis(100),
            tail_protection: true,
            data_key: None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct ChunkState {
    /// Sender clock (µs) of the latest transmission.
    sent_us: u64,
    /// Queued for retransmission.
    pending: bool,
}

const MAX_RATE_SAMPLES: usize = 100_000;
/// Added to the reorder window for the tail timer: two report intervals, so that while data
/// flows a fresh report always comes first.
const TAIL_TIMER_SLACK: Duration = Duration::from_millis(20);

/// The sending state machine. See the crate docs for how to drive it.
pub struct Sender<S> {
    cfg: SenderConfig,
    source: S,
    cc: Box<dyn CongestionController>,
    epoch: Instant,
    state: SenderState,
    /// The segments to send; chunk `i` is at wire offset `i · chunk_size`.
    layout: Layout,
    /// Next chunk never sent.
    next_chunk: u64,
    /// Chunks below are acknowledged.
    cum_ack: u64,
    window_end: u64,
    /// State of chunks `[cum_ack, next_chunk)`.
    chunks: VecDeque<ChunkState>,
    retx: BTreeSet<u64>,
    /// Reorder/tail timer: if no report arrives before it, chunks the last report said were
    /// missing (or were beyond what it had received) are declared lost once they had a full
    /// RTT plus the reorder window to arrive.
    tail_timer: Option<Instant>,
    last_naks: Vec<wire::SeqRange>,
    last_recv_high: u64,
    /// Tail protection: what idle pacing slots resend once every chunk has left.
    tail: TailResend,
    next_seq: u64,
    last_sent_us: u64,
    /// (timestamp, cumulative wire bytes sent up to and including that datagram).
    inflight: InflightLog,
    last_echo_us: Option<u64>,
    last_report_seq: Option<u64>,
    /// Departures at the congestion controller's pacing rate.
    pacer: RatePacer,
    last_heard: Instant,
    probe_next: Instant,
    probe_interval: Duration,
    fin_next: Instant,
    fin_interval: Duration,
    rtt: RttEstimator,
    first_send: Option<Instant>,
    acked_at: Option<Instant>,
    /// When the newest chunk first left.
    last_new_at: Option<Instant>,
    done_at: Option<Instant>,
    last_reject: Option<Reject>,
    /// The receiver's estimate from the opening train was handed to the controller.
    train_reported: bool,
    stats: SenderStats,
    rate: RateSampler,
    scratch: Vec<u8>,
}

impl<S: Source> Sender<S> {
    /// A sender that starts at `now`, reading from `source`, paced by `cc`.
    pub fn new(
        cfg: SenderConfig,
        source: S,
        cc: Box<dyn CongestionController>,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        cfg.session.validate()?;
        for (name, d) in [
            ("initial_rtt", cfg.initial_rtt),
            ("idle_timeout", cfg.idle_timeout),
            ("max_probe_interval", cfg.max_probe_interval),
            ("rate_sample_interval", cfg.rate_sample_interval),
        ] {
            if d.is_zero() {
                return Err(ConfigError::NotPositive(name));
            }
        }
        if cfg.max_window_chunks == 0 {
            return Err(ConfigError::NotPositive("max_window_chunks"));
        }
        let granularity = cfg.pacing_granularity;
        let layout = Layout::first(cfg.session.file_size, cfg.session.chunk_size, cfg.open);
        let stats = SenderStats {
            cc: cc.name(),
            cc_phase: cc.phase(),
            cc_events: cc.events(),
            state: SenderState::Sending,
            file_bytes: cfg.session.file_size,
            bytes_delivered: 0,
            datagrams_sent: 0,
            payload_bytes_sent: 0,
            wire_bytes_sent: 0,
            retransmitted_datagrams: 0,
            retransmitted_bytes: 0,
            tail_resent_datagrams: 0,
            probes_sent: 0,
            fins_sent: 0,
            report_timeouts: 0,
            reports_received: 0,
            reports_stale: 0,
            rejected: RejectCounters::default(),
            loss_seen_by_receiver: 0.0,
            rtt_min_us: None,
            srtt_us: None,
            duration_s: None,
            tail_s: None,
            completion_s: None,
            goodput_bps: None,
            rate_samples: Vec::new(),
        };
        let mut s = Self {
            rtt: RttEstimator::new(cfg.initial_rtt),
            fin_interval: cfg.initial_rtt,
            probe_interval: cfg.initial_rtt,
            cfg,
            source,
            cc,
            epoch: now,
            state: SenderState::Sending,
            layout,
            next_chunk: 0,
            cum_ack: 0,
            window_end: u64::MAX,
            chunks: VecDeque::new(),
            retx: BTreeSet::new(),
            tail_timer: None,
            last_naks: Vec::new(),
            last_recv_high: 0,
            tail: TailResend::default(),
            next_seq: 0,
            last_sent_us: 0,
            inflight: InflightLog::default(),
            last_echo_us: None,
            last_report_seq: None,
            pacer: RatePacer::new(now, granularity),
            last_heard: now,
            probe_next: now,
            fin_next: now,
            first_send: None,
            acked_at: None,
            last_new_at: None,
            done_at: None,
            last_reject: None,
            train_reported: false,
            stats,
            rate: RateSampler {
                at: now,
                acked: 0,
                rx_bytes: 0,
            },
            scratch: Vec::new(),
        };
        s.check_finished(now);
        Ok(s)
    }

    /// Append a segment of `len` bytes lying at `digest_base` of its source (see
    /// [`crate::layout`]); returns its first chunk, or `None` if the sender is not open (or
    /// closed, or already finished).
    pub fn push_segment(&mut self, len: u64, digest_base: u64) -> Option<u64> {
        if !self.cfg.open || matches!(self.state, SenderState::Done | SenderState::Failed(_)) {
            return None;
        }
        let first = self.layout.push(len, digest_base)?;
        self.stats.file_bytes = self.layout.total_bytes();
        Some(first)
    }

    /// No more segments: once everything is acknowledged the sender sends FIN.
    pub fn close(&mut self, now: Instant) {
        self.layout.close();
        self.check_finished(now);
    }

    /// The segments so far.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Closed and everything acknowledged: on to FIN.
    fn check_finished(&mut self, now: Instant) {
        if self.layout.is_closed() && self.all_acked() && self.state == SenderState::Sending {
            self.acked_at.get_or_insert(now);
            self.enter_fin_wait(now);
        }
    }

    /// Current state.
    pub fn state(&self) -> &SenderState {
        &self.state
    }

    /// Whether FIN-ACK arrived: the transfer is complete on both sides.
    pub fn is_done(&self) -> bool {
        self.state == SenderState::Done
    }

    /// Whether every chunk so far is acknowledged (FIN-ACK may still be pending; an open sender
    /// may get more segments).
    pub fn all_acked(&self) -> bool {
        self.cum_ack == self.layout.total_chunks()
    }

    /// The congestion controller.
    pub fn cc(&self) -> &dyn CongestionController {
        self.cc.as_ref()
    }

    /// The congestion controller, to tell it what the session learnt outside the data stream
    /// (e.g. [`CongestionController::on_path_rtt`]).
    pub fn cc_mut(&mut self) -> &mut dyn CongestionController {
        self.cc.as_mut()
    }

    /// Wire bytes in flight (sent after the newest datagram the receiver reported).
    pub fn inflight(&self) -> u64 {
        self.inflight.bytes
    }

    /// Why the latest datagram was rejected, if one was.
    pub fn last_reject(&self) -> Option<&Reject> {
        self.last_reject.as_ref()
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The source, mutably (a session adds files to it as they are accepted).
    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// DATA datagrams sent so far (cheap, where [`Sender::stats`] copies the rate samples).
    pub fn datagrams_sent(&self) -> u64 {
        self.stats.datagrams_sent
    }

    /// Bytes of the file acknowledged as a contiguous prefix: cheap, for progress (where
    /// [`Sender::stats`] would copy the rate samples).
    pub fn bytes_delivered(&self) -> u64 {
        self.layout.bytes_before(self.cum_ack)
    }

    /// Chunks `[0, cum_ack)` are acknowledged.
    pub fn cum_ack(&self) -> u64 {
        self.cum_ack
    }

    /// Payload bytes sent again so far (cheap, for live figures; [`Sender::stats`] has all).
    pub fn retransmitted_bytes(&self) -> u64 {
        self.stats.retransmitted_bytes
    }

    /// Smoothed round-trip time, once measured.
    pub fn smoothed_rtt(&self) -> Option<Duration> {
        self.rtt.smoothed
    }

    /// Statistics so far.
    pub fn stats(&self) -> SenderStats {
        let mut s = self.stats.clone();
        s.cc_phase = self.cc.phase();
        s.cc_events = self.cc.events();
        s.state = self.state.clone();
        s.bytes_delivered = self.bytes_delivered();
        s.rtt_min_us = self.rtt.min.map(micros);
        s.srtt_us = self.rtt.smoothed.map(micros);
        let start = self.first_send.unwrap_or(self.epoch);
        if let Some(t) = self.acked_at {
            let d = t.saturating_duration_since(start).as_secs_f64();
            s.duration_s = Some(d);
            s.goodput_bps = (d > 0.0).then(|| self.layout.total_bytes() as f64 * 8.0 / d);
            s.tail_s = self.last_new_at.map(|l| t.saturating_duration_since(l).as_secs_f64());
        }
        s.completion_s = self.done_at.map(|t| t.saturating_duration_since(start).as_secs_f64());
        s
    }

    fn now_us(&self, now: Instant) -> u64 {
        micros(now.saturating_duration_since(self.epoch))
    }

    fn srtt(&self) -> Duration {
        self.rtt.smoothed.unwrap_or(self.cfg.initial_rtt)
    }

    fn report_timeout(&self) -> Duration {
        (self.srtt() * 2 + self.rtt.var * 4).max(self.cfg.min_report_timeout)
    }

    fn reorder_window_us(&self) -> u64 {
        let w = self.rtt.min.map_or(Duration::from_millis(10), |r| r / 4);
        micros(w.max(self.cfg.min_reorder_window))
    }

    fn outstanding(&self) -> bool {
        self.cum_ack < self.next_chunk
    }

    fn enter_fin_wait(&mut self, now: Instant) {
        self.state = SenderState::FinWait;
        self.fin_next = now;
        self.fin_interval = self.srtt().max(Duration::from_millis(10)) * 2;
        self.retx.clear();
        self.tail_timer = None;
    }

    fn reject(&mut self, r: Reject) {
        self.stats.rejected.count(&r);
        self.last_reject = Some(r);
    }

    /// A datagram from the receiver arrived at `now`. Invalid ones are counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        let d = match parse_own(datagram, self.cfg.session.session_id, self.cfg.data_key.as_ref()) {
            Ok(d) => d,
            Err(r) => return self.reject(r),
        };
        match d {
            Datagram::Data(_) | Datagram::Fin(_) => self.reject(Reject::UnexpectedKind(d.kind())),
            Datagram::FinAck(f) => {
                if f.file_size != self.layout.total_bytes() {
                    return self.reject(Reject::FileSizeMismatch(f.file_size));
                }
                self.last_heard = now;
                if self.state == SenderState::FinWait {
                    self.state = SenderState::Done;
                    self.done_at = Some(now);
                }
            }
            Datagram::Report(r) => self.handle_report(now, r),
        }
    }

    fn handle_report(&mut self, now: Instant, r: Report) {
        if r.cum_ack > self.next_chunk || r.recv_high > self.next_chunk {
            return self.reject(Reject::NeverSent("chunk"));
        }
        if r.echo_ts_us > self.last_sent_us || (self.next_seq == 0 && r.rx_datagrams > 0) {
            return self.reject(Reject::NeverSent("timestamp"));
        }
        if matches!(self.state, SenderState::Done | SenderState::Failed(_)) {
            return;
        }
        if self.last_report_seq.is_some_and(|last| r.report_seq <= last) {
            self.stats.reports_stale += 1;
            return;
        }
        self.last_report_seq = Some(r.report_seq);
        self.last_heard = now;
        self.stats.reports_received += 1;
        if self.state == SenderState::Probing {
            self.state = SenderState::Sending;
            self.pacer.restart(now);
            self.probe_interval = self.srtt();
        }
        let rtt = self.take_rtt_sample(now, &r);
        if r.train_bps > 0 && !self.train_reported {
            self.train_reported = true;
            // Datagram bytes to wire bytes, at the size of a full chunk's datagram.
            let tag = if self.cfg.data_key.is_some() { wire::TAG_LEN } else { 0 };
            let dgram = (DATA_HEADER_LEN + tag) as f64 + f64::from(self.cfg.session.chunk_size);
            let wire = r.train_bps as f64 * (dgram + f64::from(self.cfg.wire_overhead)) / dgram;
            self.cc.on_capacity_estimate(now, wire);
        }
        self.apply_ack(now, &r);
        let reorder = self.reorder_window_us();
        self.mark_lost(&r, reorder);
        self.last_recv_high = r.recv_high;
        self.tail_timer = self
            .outstanding()
            .then(|| now + Duration::from_micros(reorder) + TAIL_TIMER_SLACK);
        self.inflight.on_echo(r.echo_ts_us, self.stats.wire_bytes_sent);
        let seq_high = r.seq_high.min(self.next_seq);
        if seq_high > 0 {
            self.stats.loss_seen_by_receiver = 1.0 - (r.rx_datagrams.min(seq_high) as f64 / seq_high as f64);
        }
        // What each DATA datagram the receiver counted took on the wire besides its payload.
        let tag = if self.cfg.data_key.is_some() { wire::TAG_LEN } else { 0 };
        let per_datagram = (DATA_HEADER_LEN + tag) as u64 + u64::from(self.cfg.wire_overhead);
        let sample = ReportSample {
            now,
            echo_sent_at: self.epoch + Duration::from_micros(r.echo_ts_us),
            rtt,
            echo_delay: Duration::from_micros(u64::from(r.echo_delay_us)),
            interval: Duration::from_micros(u64::from(r.interval_us)),
            interval_wire_bytes: r
                .interval_bytes
                .saturating_add(u64::from(r.interval_datagrams).saturating_mul(per_datagram)),
            seq_high,
            rx_datagrams: r.rx_datagrams,
            owd_interval_min_us: r.owd_interval_min_us,
            owd_latest_us: r.owd_latest_us,
            inflight: self.inflight.bytes,
        };
        self.cc.on_report(&sample);
        self.record_rate_sample(now, r.interval_bytes);
        self.last_naks = r.naks;

        self.check_finished(now);
    }

    /// The RTT sample of a report: only from an echo newer than any before (an older one was
    /// held longer), net of the receiver's holding time.
    fn take_rtt_sample(&mut self, now: Instant, r: &Report) -> Option<Duration> {
        if r.rx_datagrams == 0 || self.last_echo_us.is_some_and(|e| r.echo_ts_us <= e) {
            return None;
        }
        self.last_echo_us = Some(r.echo_ts_us);
        let us = self
            .now_us(now)
            .saturating_sub(r.echo_ts_us)
            .saturating_sub(u64::from(r.echo_delay_us));
        (us > 0).then(|| {
            let sample = Duration::from_micros(us);
            self.rtt.update(sample);
            sample
        })
    }

    /// Move the cumulative acknowledgement and the receiver's window.
    fn apply_ack(&mut self, now: Instant, r: &Report) {
        if r.cum_ack > self.cum_ack {
            let before = self.layout.bytes_before(self.cum_ack);
            let n = (r.cum_ack - self.cum_ack) as usize;
            self.chunks.drain(..n.min(self.chunks.len()));
            self.cum_ack = r.cum_ack;
            let after = self.layout.bytes_before(self.cum_ack);
            self.cc.on_ack(now, after.saturating_sub(before));
        }
        self.window_end = r.window_end;
    }

    /// NAKs: a chunk is lost if its latest transmission left a reorder window before the
    /// newest datagram the receiver had seen.
    fn mark_lost(&mut self, r: &Report, reorder_us: u64) {
        for range in &r.naks {
            let lo = range.first.max(self.cum_ack);
            let hi = range.end().min(self.next_chunk);
            for c in lo..hi {
                let idx = (c - self.cum_ack) as usize;
                if let Some(st) = self.chunks.get_mut(idx) {
                    if !st.pending && st.sent_us.saturating_add(reorder_us) <= r.echo_ts_us {
                        st.pending = true;
                        self.retx.insert(c);
                    }
                }
            }
        }
    }

    /// One [`RateSample`] per `rate_sample_interval` (bounded in number).
    fn record_rate_sample(&mut self, now: Instant, interval_bytes: u64) {
        self.rate.rx_bytes = self.rate.rx_bytes.saturating_add(interval_bytes);
        let dt = now.saturating_duration_since(self.rate.at);
        if dt < self.cfg.rate_sample_interval || self.stats.rate_samples.len() >= MAX_RATE_SAMPLES {
            return;
        }
        let acked = self.layout.bytes_before(self.cum_ack);
        let secs = dt.as_secs_f64();
        self.stats.rate_samples.push(RateSample {
            t_s: now.saturating_duration_since(self.epoch).as_secs_f64(),
            goodput_bps: (acked - self.rate.acked) as f64 * 8.0 / secs,
            receive_bps: self.rate.rx_bytes as f64 * 8.0 / secs,
            pacing_bps: self.cc.pacing_rate_bps(),
            inflight_bytes: self.inflight.bytes,
        });
        self.rate = RateSampler {
            at: now,
            acked,
            rx_bytes: 0,
        };
    }

    /// When [`Sender::handle_timeout`] should be called (or [`Sender::poll_transmit`] will
    /// have something), if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let idle = self.last_heard + self.cfg.idle_timeout;
        match self.state {
            SenderState::Done | SenderState::Failed(_) => None,
            SenderState::FinWait => Some(self.fin_next.min(idle)),
            SenderState::Probing => Some(self.probe_next.min(idle)),
            SenderState::Sending => {
                // Nothing outstanding (an open sender waiting for segments): nothing to hear.
                let mut t = self
                    .outstanding()
                    .then(|| idle.min(self.last_heard + self.report_timeout()));
                let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
                if self.can_send() {
                    at(self.pacer.wake_at());
                }
                if let Some(tail) = self.tail_timer {
                    at(tail);
                }
                t
            }
        }
    }

    /// Whether something could be sent now, pacing aside.
    fn can_send(&self) -> bool {
        if self.cc.inflight_cap().is_some_and(|cap| self.inflight.bytes >= cap) {
            return false;
        }
        !self.retx.is_empty() || self.new_chunk_allowed() || self.tail_may_resend()
    }

    /// Every chunk so far has left and nothing is NAKed: idle pacing slots may resend the
    /// newest chunks not yet known to have arrived (module `tail`). Needs an RTT measured.
    fn tail_may_resend(&self) -> bool {
        self.cfg.tail_protection
            && self.retx.is_empty()
            && self.next_chunk == self.layout.total_chunks()
            && self.rtt.smoothed.is_some()
            && self.tail.may_resend(self.next_chunk, self.known_below())
    }

    /// Below this chunk the receiver's last report accounted for every chunk (received, or
    /// NAKed and so repaired by the NAK).
    fn known_below(&self) -> u64 {
        self.last_recv_high.max(self.cum_ack)
    }

    fn next_tail_resend(&mut self) -> Option<u64> {
        if !self.tail_may_resend() {
            return None;
        }
        let (cum_ack, chunks) = (self.cum_ack, &self.chunks);
        self.tail.next(
            self.next_chunk,
            self.known_below(),
            self.last_sent_us,
            self.srtt(),
            |c| {
                let st = chunks.get(usize::try_from(c.checked_sub(cum_ack)?).ok()?)?;
                Some((st.sent_us, st.pending))
            },
        )
    }

    fn new_chunk_allowed(&self) -> bool {
        self.next_chunk < self.layout.total_chunks()
            && self.next_chunk < self.window_end
            && self.next_chunk - self.cum_ack < self.cfg.max_window_chunks
    }

    /// The deadline from [`Sender::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if matches!(self.state, SenderState::Done | SenderState::Failed(_)) {
            return;
        }
        let waiting = self.outstanding() || self.state != SenderState::Sending;
        if waiting && now >= self.last_heard + self.cfg.idle_timeout {
            self.state = SenderState::Failed(Failure::TimedOut);
            return;
        }
        if self.state == SenderState::Sending && self.tail_timer.is_some_and(|t| now >= t) {
            self.tail_timer = None;
            self.declare_tail_lost(now);
        }
        if self.state == SenderState::Sending && self.outstanding() && now >= self.last_heard + self.report_timeout() {
            self.state = SenderState::Probing;
            self.stats.report_timeouts += 1;
            self.probe_interval = self.srtt().max(Duration::from_millis(100));
            self.probe_next = now;
            self.cc.on_report_timeout(now);
        }
    }

    /// The tail timer fired: no report since the last one. Chunks it NAKed, or beyond its
    /// `recv_high`, that were sent at least SRTT + reorder window ago are lost.
    fn declare_tail_lost(&mut self, now: Instant) {
        let deadline = self
            .now_us(now)
            .saturating_sub(micros(self.srtt()) + self.reorder_window_us());
        let tail = wire::SeqRange {
            first: self.last_recv_high.max(self.cum_ack),
            count: u32::try_from(self.next_chunk.saturating_sub(self.last_recv_high.max(self.cum_ack)))
                .unwrap_or(u32::MAX),
        };
        let ranges: Vec<wire::SeqRange> = self.last_naks.iter().copied().chain(std::iter::once(tail)).collect();
        for range in ranges {
            let lo = range.first.max(self.cum_ack);
            let hi = range.end().min(self.next_chunk);
            for c in lo..hi {
                if let Some(st) = self.chunks.get_mut((c - self.cum_ack) as usize) {
                    if !st.pending && st.sent_us <= deadline {
                        st.pending = true;
                        self.retx.insert(c);
                    }
                }
            }
        }
    }

    /// Next datagram to send at `now`, if one is due; call until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        if self.poll_transmit_into(now, &mut out) {
            Some(out)
        } else {
            self.scratch = out;
            None
        }
    }

    /// Like [`Sender::poll_transmit`], writing into `out` (cleared first) to reuse a buffer.
    /// Returns whether a datagram was written.
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        out.clear();
        self.poll_transmit_append(now, out)
    }

    /// Like [`Sender::poll_transmit_into`], but appends the datagram (tag included) after what
    /// `out` holds: a caller batching datagrams into one buffer for UDP GSO builds them in
    /// place. Returns whether one was appended; if not, `out` is unchanged.
    pub fn poll_transmit_append(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let written = self.poll_transmit_at(now, out, start);
        if !written {
            out.truncate(start);
        }
        written
    }

    fn poll_transmit_at(&mut self, now: Instant, out: &mut Vec<u8>, start: usize) -> bool {
        match self.state {
            SenderState::Done | SenderState::Failed(_) => false,
            SenderState::FinWait => {
                if now < self.fin_next {
                    return false;
                }
                Fin {
                    session_id: self.cfg.session.session_id,
                    file_size: self.layout.total_bytes(),
                }
                .write(Kind::Fin, out);
                if let Some(k) = &self.cfg.data_key {
                    k.seal_from(out, start);
                }
                self.stats.fins_sent += 1;
                self.fin_next = now + self.fin_interval;
                self.fin_interval = (self.fin_interval * 2).min(self.cfg.max_probe_interval);
                true
            }
            SenderState::Probing => {
                if now < self.probe_next || !self.outstanding() {
                    return false;
                }
                let chunk = self.cum_ack;
                self.retx.remove(&chunk);
                if !self.send_chunk(now, chunk, true, out, start) {
                    return false;
                }
                self.stats.probes_sent += 1;
                self.probe_next = now + self.probe_interval;
                self.probe_interval = (self.probe_interval * 2).min(self.cfg.max_probe_interval);
                true
            }
            SenderState::Sending => {
                // The opening train leaves back to back (see `wire::TRAIN_LEN`).
                let train = self.next_seq < wire::TRAIN_LEN && self.retx.is_empty();
                if (!self.pacer.ready(now) && !train) || !self.can_send() {
                    return false;
                }
                let mut chunk = None;
                while let Some(c) = self.retx.pop_first() {
                    if c >= self.cum_ack && c < self.next_chunk {
                        chunk = Some((c, true));
                        break;
                    }
                }
                if chunk.is_none() && self.new_chunk_allowed() {
                    chunk = Some((self.next_chunk, false));
                }
                let tail = chunk.is_none();
                if tail {
                    chunk = self.next_tail_resend().map(|c| (c, true));
                }
                let Some((c, retransmit)) = chunk else {
                    return false;
                };
                if !self.send_chunk(now, c, retransmit, out, start) {
                    return false;
                }
                if tail {
                    self.stats.tail_resent_datagrams += 1;
                }
                let wire = (out.len() - start) as u64 + u64::from(self.cfg.wire_overhead);
                // The controller's rate as whole b/s (`as` saturates; NaN is 0, paced at the floor).
                self.pacer.on_sent(now, wire, self.cc.pacing_rate_bps() as u64);
                true
            }
        }
    }

    /// Appends DATA for `chunk` (tagged in a keyed session) to `out`, which held `start` bytes;
    /// false (and the sender failed) if the source failed.
    fn send_chunk(&mut self, now: Instant, chunk: u64, retransmit: bool, out: &mut Vec<u8>, start: usize) -> bool {
        let Some(place) = self.layout.place(chunk) else {
            return false;
        };
        let len = place.len;
        let offset = self.layout.wire_offset(chunk);
        let ts = self.now_us(now);
        DataHeader {
            session_id: self.cfg.session.session_id,
            seq: self.next_seq,
            offset,
            timestamp_us: ts,
            retransmit,
        }
        .write(out);
        let payload_at = start + DATA_HEADER_LEN;
        out.resize(payload_at + len, 0);
        let mut filled = 0;
        while filled < len {
            match self
                .source
                .read_at(offset + filled as u64, &mut out[payload_at + filled..])
            {
                Ok(0) => {
                    self.state = SenderState::Failed(Failure::ShortRead(offset + filled as u64));
                    return false;
                }
                Ok(n) => filled += n.min(len - filled),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.state = SenderState::Failed(Failure::Source(e.to_string()));
                    return false;
                }
            }
        }
        let first = chunk == self.next_chunk;
        let digest = self.cfg.data_key.as_ref().map(|k| {
            let d = wire::payload_digest(place.digest_offset, &out[payload_at..]);
            k.seal_data(out, start, &d);
            d
        });
        self.source
            .on_sent(offset, &out[payload_at..payload_at + len], digest.as_ref(), first);
        if !self.outstanding() {
            // Nothing was outstanding: the report timeout counts from now.
            self.last_heard = self.last_heard.max(now);
        }
        if first {
            self.chunks.push_back(ChunkState {
                sent_us: ts,
                pending: false,
            });
            self.next_chunk += 1;
            self.last_new_at = Some(now);
        } else if let Some(st) = self.chunks.get_mut((chunk - self.cum_ack) as usize) {
            st.sent_us = ts;
            st.pending = false;
        }
        self.next_seq += 1;
        self.last_sent_us = ts;
        let wire = (out.len() - start) as u64 + u64::from(self.cfg.wire_overhead);
        self.stats.datagrams_sent += 1;
        self.stats.payload_bytes_sent += len as u64;
        self.stats.wire_bytes_sent += wire;
        if retransmit {
            self.stats.retransmitted_datagrams += 1;
            self.stats.retransmitted_bytes += len as u64;
        }
        self.inflight.on_sent(ts, wire, self.stats.wire_bytes_sent);
        self.first_send.get_or_insert(now);
        self.cc.on_sent(now, wire, retransmit);
        true
    }
}

//! TCP tests (`evlbi probe client --tcp`), the parts that are not sockets: the preamble that ties a
//! data connection to its session, the kernel's TCP_INFO parsed into a documented struct,
//! per-stream samples kept in bounded memory, their aggregation into intervals (throughput,
//! retransmits, cwnd, RTT, pacing and delivery rate per interval) and the Mathis check of the
//! achieved rate against the measured RTT and retransmit rate (seed 003 Fig 1: a long TCP test in
//! which every loss shows as a congestion-avoidance dip).
//!
//! Every function here is pure; `probe-session` reads the sockets and the clock.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Most parallel TCP streams in one test.
pub const MAX_STREAMS: u16 = 64;

/// First bytes of every TCP data connection.
pub const PREAMBLE_MAGIC: [u8; 8] = *b"EVLBITCP";
/// Preamble layout version.
pub const PREAMBLE_VERSION: u8 = 1;
/// Preamble length: magic 8, version 1, reserved 1, stream number u16, test id u64 (big endian).
pub const PREAMBLE_LEN: usize = 20;

/// Why a data connection's preamble was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PreambleError {
    /// Fewer than [`PREAMBLE_LEN`] bytes.
    #[error("preamble of {0} bytes, expected {PREAMBLE_LEN}")]
    Short(usize),
    /// Not our magic: not an evlbi probe data connection.
    #[error("bad magic")]
    Magic,
    /// A layout version we do not speak.
    #[error("preamble version {0}")]
    Version(u8),
}

/// The preamble a client writes first on each TCP data connection: which session and which
/// stream it belongs to. The server drops connections whose test id is not the session's.
///
/// ```
/// use probe::tcp::Preamble;
/// let p = Preamble { test_id: 0x0102_0304_0506_0708, stream: 3 };
/// assert_eq!(&p.emit()[..], b"EVLBITCP\x01\x00\x00\x03\x01\x02\x03\x04\x05\x06\x07\x08");
/// assert_eq!(Preamble::parse(&p.emit()), Ok(p));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preamble {
    /// Session id from `hello`.
    pub test_id: u64,
    /// Stream number, `0..streams`.
    pub stream: u16,
}

impl Preamble {
    /// The bytes to send.
    pub fn emit(&self) -> [u8; PREAMBLE_LEN] {
        let mut b = [0u8; PREAMBLE_LEN];
        b[..8].copy_from_slice(&PREAMBLE_MAGIC);
        b[8] = PREAMBLE_VERSION;
        b[10..12].copy_from_slice(&self.stream.to_be_bytes());
        b[12..20].copy_from_slice(&self.test_id.to_be_bytes());
        b
    }

    /// Parse the first [`PREAMBLE_LEN`] bytes of a connection.
    pub fn parse(b: &[u8]) -> Result<Preamble, PreambleError> {
        let b: &[u8; PREAMBLE_LEN] = b
            .get(..PREAMBLE_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(PreambleError::Short(b.len()))?;
        if b[..8] != PREAMBLE_MAGIC {
            return Err(PreambleError::Magic);
        }
        if b[8] != PREAMBLE_VERSION {
            return Err(PreambleError::Version(b[8]));
        }
        Ok(Preamble {
            stream: u16::from_be_bytes([b[10], b[11]]),
            test_id: u64::from_be_bytes([b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19]]),
        })
    }
}

/// TCP_INFO shorter than the layout of Linux 2.6 (up to `tcpi_total_retrans`).
#[derive(Debug, Error, PartialEq, Eq)]
#[error("TCP_INFO of {0} bytes, expected at least {TCP_INFO_MIN_LEN}")]
pub struct TcpInfoTooShort(pub usize);

/// Bytes of `struct tcp_info` up to and including `tcpi_total_retrans` (every Linux since 2.6).
pub const TCP_INFO_MIN_LEN: usize = 104;
/// Bytes of `struct tcp_info` up to and including `tcpi_snd_wnd` (Linux 5.4+), the last field
/// read here; the kernel returns as much as it has and the caller's buffer holds.
pub const TCP_INFO_LEN: usize = 232;

/// One reading of the kernel's TCP_INFO for a socket (Linux `struct tcp_info`,
/// include/uapi/linux/tcp.h), field names without the `tcpi_` prefix. Fields the kernel added
/// after 2.6 are `None` when the kernel's struct is too short to hold them. Times are µs, windows
/// in segments unless the name says bytes, rates in bytes per second as the kernel gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpInfo {
    /// TCP state (1 = ESTABLISHED, 7 = CLOSE, 4 = FIN_WAIT1, …).
    pub state: u8,
    /// Congestion-avoidance state: 0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss.
    pub ca_state: u8,
    /// Consecutive retransmission timeouts of the current segment.
    pub retransmits: u8,
    /// Exponential backoff count of the RTO.
    pub backoff: u8,
    /// TCP options in use (1 timestamps, 2 SACK, 4 window scaling, 8 ECN, …).
    pub options: u8,
    /// Send window scale.
    pub snd_wscale: u8,
    /// Receive window scale.
    pub rcv_wscale: u8,
    /// The last delivery-rate sample was limited by the application, not the network.
    pub delivery_rate_app_limited: bool,
    /// Retransmission timeout, µs.
    pub rto_us: u32,
    /// Sender maximum segment size, bytes.
    pub snd_mss: u32,
    /// Receiver's estimate of the peer's MSS, bytes.
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Segments SACKed.
    pub sacked: u32,
    /// Segments currently presumed lost.
    pub lost: u32,
    /// Segments retransmitted and not yet acknowledged.
    pub retrans: u32,
    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Slow-start threshold, segments (very large: not set yet).
    pub snd_ssthresh: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Advertised MSS, bytes.
    pub advmss: u32,
    /// Reordering the sender tolerates, segments.
    pub reordering: u32,
    /// Receiver's RTT estimate, µs.
    pub rcv_rtt_us: u32,
    /// Receive-buffer space the receiver auto-tuning aims at, bytes.
    pub rcv_space: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Pacing rate, bytes/s (`u64::MAX` when not pacing). Linux 3.15+.
    pub pacing_rate: Option<u64>,
    /// Bytes acknowledged by the peer. Linux 4.1+.
    pub bytes_acked: Option<u64>,
    /// Bytes received. Linux 4.1+.
    pub bytes_received: Option<u64>,
    /// Segments sent, including retransmissions and pure ACKs. Linux 4.2+.
    pub segs_out: Option<u32>,
    /// Segments received. Linux 4.2+.
    pub segs_in: Option<u32>,
    /// Bytes written by the application and not yet sent. Linux 4.6+.
    pub notsent_bytes: Option<u32>,
    /// Minimum RTT seen, µs. Linux 4.6+.
    pub min_rtt_us: Option<u32>,
    /// Data segments sent, including retransmissions. Linux 4.6+.
    pub data_segs_out: Option<u32>,
    /// Latest delivery-rate sample, bytes/s. Linux 4.9+.
    pub delivery_rate: Option<u64>,
    /// Time with unacknowledged data in flight, µs. Linux 4.10+.
    pub busy_time_us: Option<u64>,
    /// Time limited by the receiver's window, µs. Linux 4.10+.
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by the send buffer, µs. Linux 4.10+.
    pub sndbuf_limited_us: Option<u64>,
    /// Segments delivered (acknowledged, incl. SACK). Linux 4.18+.
    pub delivered: Option<u32>,
    /// Bytes sent, including retransmissions. Linux 4.19+.
    pub bytes_sent: Option<u64>,
    /// Bytes retransmitted. Linux 4.19+.
    pub bytes_retrans: Option<u64>,
    /// Peer's advertised receive window, bytes. Linux 5.4+.
    pub snd_wnd: Option<u32>,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

impl TcpInfo {
    /// Parse what getsockopt(IPPROTO_TCP, TCP_INFO) wrote (`b` is exactly the returned length;
    /// host byte order). Offsets are those of `struct tcp_info` in include/uapi/linux/tcp.h.
    pub fn parse(b: &[u8]) -> Result<TcpInfo, TcpInfoTooShort> {
        if b.len() < TCP_INFO_MIN_LEN {
            return Err(TcpInfoTooShort(b.len()));
        }
        // The first 104 bytes are present (checked above).
        let u = |off| u32_at(b, off).unwrap_or(0);
        // C bit fields: the first declared takes the low-order bits on little-endian targets,
        // the high-order bits on big-endian ones.
        let (wscale_snd, wscale_rcv, app_limited) = if cfg!(target_endian = "little") {
            (b[6] & 0x0f, b[6] >> 4, b[7] & 1 == 1)
        } else {
            (b[6] >> 4, b[6] & 0x0f, b[7] & 0x80 != 0)
        };
        Ok(TcpInfo {
            state: b[0],
            ca_state: b[1],
            retransmits: b[2],
            backoff: b[4],
            options: b[5],
            snd_wscale: wscale_snd,
            rcv_wscale: wscale_rcv,
            delivery_rate_app_limited: app_limited,
            rto_us: u(8),
            snd_mss: u(16),
            rcv_mss: u(20),
            unacked: u(24),
            sacked: u(28),
            lost: u(32),
            retrans: u(36),
            pmtu: u(60),
            rtt_us: u(68),
            rttvar_us: u(72),
            snd_ssthresh: u(76),
            snd_cwnd: u(80),
            advmss: u(84),
            reordering: u(88),
            rcv_rtt_us: u(92),
            rcv_space: u(96),
            total_retrans: u(100),
            pacing_rate: u64_at(b, 104),
            bytes_acked: u64_at(b, 120),
            bytes_received: u64_at(b, 128),
            segs_out: u32_at(b, 136),
            segs_in: u32_at(b, 140),
            notsent_bytes: u32_at(b, 144),
            min_rtt_us: u32_at(b, 148),
            data_segs_out: u32_at(b, 156),
            delivery_rate: u64_at(b, 160),
            busy_time_us: u64_at(b, 168),
            rwnd_limited_us: u64_at(b, 176),
            sndbuf_limited_us: u64_at(b, 184),
            delivered: u32_at(b, 192),
            bytes_sent: u64_at(b, 200),
            bytes_retrans: u64_at(b, 208),
            snd_wnd: u32_at(b, 228),
        })
    }
}

/// One sample of one stream during a TCP test: what the application wrote so far and the sender
/// socket's TCP_INFO at that moment, reduced to what the figures and intervals need.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSample {
    /// Seconds since the data phase began.
    pub t_s: f64,
    /// Stream number.
    pub stream: u16,
    /// Bytes the application had written (accepted by the socket).
    pub bytes_written: u64,
    /// Bytes of the application's data the peer had acknowledged (see [`app_bytes_acked`];
    /// `None` before Linux 4.1).
    pub bytes_acked: Option<u64>,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// Slow-start threshold, segments (`None` while unset).
    pub ssthresh: Option<u32>,
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Segments retransmitted so far.
    pub total_retrans: u32,
    /// Data segments sent so far, retransmissions included (`None` before Linux 4.6).
    pub data_segs_out: Option<u32>,
    /// Congestion-avoidance state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss).
    pub ca_state: u8,
    /// Pacing rate, bit/s (`None`: not pacing, or unknown).
    pub pacing_rate_bps: Option<f64>,
    /// Latest delivery-rate sample, bit/s.
    pub delivery_rate_bps: Option<f64>,
}

/// The application's bytes the peer acknowledged on a data connection: TCP_INFO `bytes_acked`
/// counts the SYN, the [`Preamble`] and, once the connection is closed for writing, the FIN as
/// well; those are taken off, and the result never exceeds what the application wrote.
pub fn app_bytes_acked(info: &TcpInfo, bytes_written: u64) -> Option<u64> {
    info.bytes_acked
        .map(|a| a.saturating_sub(1 + PREAMBLE_LEN as u64).min(bytes_written))
}

/// ssthresh reads as this (or more) before the first loss: "infinite".
const SSTHRESH_UNSET: u32 = 0x7fff_ffff;

impl TcpSample {
    /// The sample of `stream` at `t_s`, from the socket's TCP_INFO.
    pub fn new(t_s: f64, stream: u16, bytes_written: u64, i: &TcpInfo) -> TcpSample {
        TcpSample {
            t_s,
            stream,
            bytes_written,
            bytes_acked: app_bytes_acked(i, bytes_written),
            cwnd: i.snd_cwnd,
            snd_mss: i.snd_mss,
            ssthresh: (i.snd_ssthresh < SSTHRESH_UNSET).then_some(i.snd_ssthresh),
            srtt_us: i.rtt_us,
            rttvar_us: i.rttvar_us,
            total_retrans: i.total_retrans,
            data_segs_out: i.data_segs_out,
            ca_state: i.ca_state,
            pacing_rate_bps: i.pacing_rate.filter(|&r| r != u64::MAX).map(|r| r as f64 * 8.0),
            delivery_rate_bps: i.delivery_rate.map(|r| r as f64 * 8.0),
        }
    }

    /// Bytes delivered so far: acknowledged bytes, or written bytes on kernels without them.
    pub fn delivered(&self) -> u64 {
        self.bytes_acked.unwrap_or(self.bytes_written)
    }
}

/// Keeps at most `cap` items of an unbounded sequence, evenly spread: when full, every other
/// item is dropped and from then on only every second (fourth, …) new item is kept. Memory stays
/// bounded however long a test runs, and the kept items stay evenly spaced.
#[derive(Clone, Debug)]
pub struct Thinned<T> {
    items: Vec<T>,
    cap: usize,
    keep_every: u64,
    seen: u64,
}

impl<T> Thinned<T> {
    /// Keep at most `cap` (at least 2) items.
    pub fn new(cap: usize) -> Self {
        Thinned {
            items: Vec::new(),
            cap: cap.max(2),
            keep_every: 1,
            seen: 0,
        }
    }

    /// Offer the next item.
    pub fn push(&mut self, item: T) {
        let keep = self.seen.is_multiple_of(self.keep_every);
        self.seen += 1;
        if !keep {
            return;
        }
        self.items.push(item);
        if self.items.len() >= self.cap {
            let mut i = 0;
            self.items.retain(|_| {
                i += 1;
                (i - 1) % 2 == 0
            });
            self.keep_every = self.keep_every.saturating_mul(2);
        }
    }

    /// Every how many offered items one is kept now.
    pub fn keep_every(&self) -> u64 {
        self.keep_every
    }

    /// Items offered so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The kept items.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// The kept items, by value.
    pub fn into_items(self) -> Vec<T> {
        self.items
    }
}

/// One interval of a TCP test, all streams together.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpInterval {
    /// Start, seconds since the data phase began.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Bytes delivered (acknowledged by the receiver) in the interval.
    pub bytes: u64,
    /// `bytes` as bit/s over the interval.
    pub rate_bps: f64,
    /// Bytes the application wrote in the interval.
    pub bytes_written: u64,
    /// Segments retransmitted in the interval (the congestion events of seed 003 Fig 1).
    pub retransmits: u64,
    /// Congestion windows at the end, summed over streams, bytes (cwnd × MSS).
    pub cwnd_bytes: u64,
    /// Smoothed RTT at the end, mean over streams, µs.
    pub srtt_us: f64,
    /// Pacing rates at the end, summed over the streams that pace, bit/s.
    pub pacing_rate_bps: Option<f64>,
    /// Delivery-rate samples at the end, summed over streams, bit/s.
    pub delivery_rate_bps: Option<f64>,
}

impl TcpInterval {
    /// `a` and the interval `b` right after it as one interval (rates recomputed, the end-of-
    /// interval readings of `b`).
    pub fn merge(a: &TcpInterval, b: &TcpInterval) -> TcpInterval {
        let bytes = a.bytes.saturating_add(b.bytes);
        TcpInterval {
            start_s: a.start_s,
            end_s: b.end_s,
            bytes,
            rate_bps: rate(bytes, b.end_s - a.start_s),
            bytes_written: a.bytes_written.saturating_add(b.bytes_written),
            retransmits: a.retransmits.saturating_add(b.retransmits),
            ..*b
        }
    }
}

fn rate(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// Totals of one round of samples (all streams at one moment).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Totals {
    t_s: f64,
    delivered: u64,
    written: u64,
    retrans: u64,
}

fn totals(t_s: f64, round: &[TcpSample]) -> Totals {
    round.iter().fold(
        Totals {
            t_s,
            ..Totals::default()
        },
        |acc, s| Totals {
            t_s,
            delivered: acc.delivered.saturating_add(s.delivered()),
            written: acc.written.saturating_add(s.bytes_written),
            retrans: acc.retrans.saturating_add(u64::from(s.total_retrans)),
        },
    )
}

/// Most intervals kept; beyond it adjacent pairs are merged (a 3.3-hour test at 1 s intervals
/// ends with 2 s intervals).
pub const MAX_INTERVALS: usize = 20_000;

/// Turns rounds of samples (every stream sampled at one moment, counters cumulative) into
/// intervals of a fixed length, in bounded memory.
#[derive(Clone, Debug)]
pub struct IntervalAggregator {
    every_s: f64,
    tolerance_s: f64,
    cap: usize,
    last: Totals,
    intervals: Vec<TcpInterval>,
    merged: u32,
}

impl IntervalAggregator {
    /// Intervals of `every_s` seconds from the data start (t = 0, all counters 0).
    pub fn new(every_s: f64) -> Self {
        Self::with_cap(every_s, MAX_INTERVALS)
    }

    /// As [`IntervalAggregator::new`], keeping at most `cap` (at least 2) intervals.
    pub fn with_cap(every_s: f64, cap: usize) -> Self {
        IntervalAggregator {
            every_s: if every_s > 0.0 { every_s } else { 1.0 },
            tolerance_s: 0.0,
            cap: cap.max(2),
            last: Totals::default(),
            intervals: Vec::new(),
            merged: 0,
        }
    }

    /// Close an interval up to `tolerance_s` early: with samples every P seconds taken a little
    /// late (a sleeping thread wakes after its deadline), a tolerance of P/2 keeps the intervals
    /// on the grid of `every_s` instead of one sample long.
    pub fn with_tolerance(mut self, tolerance_s: f64) -> Self {
        self.tolerance_s = tolerance_s.clamp(0.0, self.every_s / 2.0);
        self
    }

    /// A round of samples taken at `t_s`; returns the interval it completes, if any.
    pub fn on_round(&mut self, t_s: f64, round: &[TcpSample]) -> Option<TcpInterval> {
        (t_s - self.last.t_s >= self.every_s - self.tolerance_s).then(|| self.close(t_s, round))
    }

    /// The last round of the test: closes a final, shorter interval if time passed since the
    /// last one and anything happened in it (an empty sliver after the last interval is left
    /// out; the interval sums stay the test's totals either way).
    pub fn finish(&mut self, t_s: f64, round: &[TcpSample]) -> Option<TcpInterval> {
        let now = totals(t_s, round);
        let moved = now.delivered != self.last.delivered
            || now.written != self.last.written
            || now.retrans != self.last.retrans;
        (t_s > self.last.t_s && moved).then(|| self.close(t_s, round))
    }

    fn close(&mut self, t_s: f64, round: &[TcpSample]) -> TcpInterval {
        let now = totals(t_s, round);
        let bytes = now.delivered.saturating_sub(self.last.delivered);
        let n = round.len().max(1) as f64;
        let sum_opt = |f: fn(&TcpSample) -> Option<f64>| {
            let v: Vec<f64> = round.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum())
        };
        let iv = TcpInterval {
            start_s: self.last.t_s,
            end_s: t_s,
            bytes,
            rate_bps: rate(bytes, t_s - self.last.t_s),
            bytes_written: now.written.saturating_sub(self.last.written),
            retransmits: now.retrans.saturating_sub(self.last.retrans),
            cwnd_bytes: round.iter().map(|s| u64::from(s.cwnd) * u64::from(s.snd_mss)).sum(),
            srtt_us: round.iter().map(|s| f64::from(s.srtt_us)).sum::<f64>() / n,
            pacing_rate_bps: sum_opt(|s| s.pacing_rate_bps),
            delivery_rate_bps: sum_opt(|s| s.delivery_rate_bps),
        };
        self.last = now;
        self.intervals.push(iv);
        if self.intervals.len() >= self.cap {
            self.intervals = self
                .intervals
                .chunks(2)
                .map(|c| match c {
                    [a, b] => TcpInterval::merge(a, b),
                    [a] => *a,
                    _ => unreachable!("chunks(2) gives one or two"),
                })
                .collect();
            self.merged += 1;
        }
        iv
    }

    /// The intervals so far.
    pub fn intervals(&self) -> &[TcpInterval] {
        &self.intervals
    }

    /// How many times the kept intervals were halved by merging pairs.
    pub fn times_merged(&self) -> u32 {
        self.merged
    }

    /// The intervals, by value.
    pub fn into_intervals(self) -> Vec<TcpInterval> {
        self.intervals
    }
}

/// The achieved rate of a TCP test beside the Mathis bound for the RTT and retransmit rate it
/// measured: BW ≤ (MSS/RTT)·√(3/2)/√p per stream ([`models::tcp::bound_bps`]), times the
/// number of streams. p is taken as retransmitted / sent data segments, which counts spurious
/// retransmissions too (an upper bound on the loss rate, so a lower bound on the bound).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MathisCheck {
    /// Parallel streams the bound is summed over.
    pub streams: u16,
    /// Sender MSS, bytes.
    pub mss_bytes: u32,
    /// Mean smoothed RTT over the test's samples, seconds.
    pub rtt_s: f64,
    /// Segments retransmitted, all streams.
    pub retransmitted_segments: u64,
    /// Data segments sent, all streams.
    pub sent_segments: u64,
    /// retransmitted / sent.
    pub loss: f64,
    /// The Mathis bound for all streams, bit/s; `None` without a retransmission (no bound).
    pub bound_bps: Option<f64>,
    /// The rate achieved, bit/s.
    pub achieved_bps: f64,
    /// achieved / bound.
    pub achieved_over_bound: Option<f64>,
}

impl MathisCheck {
    /// The check for a test: `None` without an RTT, MSS or sent segment to base it on.
    pub fn new(
        streams: u16,
        mss_bytes: u32,
        rtt_s: f64,
        retransmitted: u64,
        sent: u64,
        achieved_bps: f64,
    ) -> Option<MathisCheck> {
        if mss_bytes == 0 || rtt_s.is_nan() || rtt_s <= 0.0 || sent == 0 || streams == 0 {
            return None;
        }
        let loss = retransmitted as f64 / sent as f64;
        let bound = (retransmitted > 0).then(|| models::tcp::bound_bps(mss_bytes, rtt_s, loss) * f64::from(streams));
        Some(MathisCheck {
            streams,
            mss_bytes,
            rtt_s,
            retransmitted_segments: retransmitted,
            sent_segments: sent,
            loss,
            bound_bps: bound,
            achieved_bps,
            achieved_over_bound: bound.map(|b| achieved_bps / b),
        })
    }

    /// The check from a test's samples (mean smoothed RTT) and each stream's last TCP_INFO.
    pub fn from_test(samples: &[TcpSample], finals: &[TcpInfo], achieved_bps: f64) -> Option<MathisCheck> {
        let rtts: Vec<f64> = samples
            .iter()
            .filter(|s| s.srtt_us > 0)
            .map(|s| f64::from(s.srtt_us))
            .collect();
        let rtt_s = rtts.iter().sum::<f64>() / rtts.len().max(1) as f64 / 1e6;
        let mss = finals.iter().map(|i| i.snd_mss).max().unwrap_or(0);
        let retrans = finals.iter().map(|i| u64::from(i.total_retrans)).sum();
        let sent = finals
            .iter()
            .map(|i| u64::from(i.data_segs_out.or(i.segs_out).unwrap_or(0)))
            .sum();
        MathisCheck::new(
            u16::try_from(finals.len()).unwrap_or(u16::MAX),
            mss,
            rtt_s,
            retrans,
            sent,
            achieved_bps,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP_INFO as Linux 6.x lays it out, with distinct values in every field read.
    fn info_bytes(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; 248];
        b[0] = 1; // ESTABLISHED
        b[1] = 3; // recovery
        b[2] = 2;
        b[4] = 1;
        b[5] = 7;
        b[6] = 0x97; // rcv_wscale 9, snd_wscale 7
        b[7] = 1;
        let put32 = |b: &mut Vec<u8>, off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        let put64 = |b: &mut Vec<u8>, off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        for (off, v) in [
            (8, 204_000),
            (16, 1448),
            (20, 536),
            (24, 10),
            (28, 2),
            (32, 3),
            (36, 1),
            (60, 1500),
            (68, 100_250),
            (72, 900),
            (76, 40),
            (80, 88),
            (84, 1448),
            (88, 3),
            (92, 0),
            (96, 14_480),
            (100, 17),
            (136, 9000),
            (140, 4000),
            (144, 65_536),
            (148, 100_000),
            (156, 8990),
            (192, 8970),
            (228, 3_000_000),
        ] {
            put32(&mut b, off, v);
        }
        for (off, v) in [
            (104, 125_000_000u64),
            (120, 12_000_000),
            (128, 1000),
            (160, 120_000_000),
            (168, 5_000_000),
            (176, 1000),
            (184, 2000),
            (200, 13_000_000),
            (208, 24_616),
        ] {
            put64(&mut b, off, v);
        }
        b.truncate(len);
        b
    }

    #[test]
    fn tcp_info_offsets_are_the_kernels() {
        let i = TcpInfo::parse(&info_bytes(TCP_INFO_LEN)).expect("parse");
        assert_eq!(
            (i.state, i.ca_state, i.retransmits, i.backoff, i.options),
            (1, 3, 2, 1, 7)
        );
        assert_eq!((i.snd_wscale, i.rcv_wscale, i.delivery_rate_app_limited), (7, 9, true));
        assert_eq!((i.rto_us, i.snd_mss, i.rcv_mss), (204_000, 1448, 536));
        assert_eq!((i.unacked, i.sacked, i.lost, i.retrans), (10, 2, 3, 1));
        assert_eq!(
            (i.pmtu, i.rtt_us, i.rttvar_us, i.snd_ssthresh, i.snd_cwnd),
            (1500, 100_250, 900, 40, 88)
        );
        assert_eq!(
            (i.advmss, i.reordering, i.rcv_space, i.total_retrans),
            (1448, 3, 14_480, 17)
        );
        assert_eq!(i.pacing_rate, Some(125_000_000));
        assert_eq!((i.bytes_acked, i.bytes_received), (Some(12_000_000), Some(1000)));
        assert_eq!(
            (i.segs_out, i.segs_in, i.notsent_bytes),
            (Some(9000), Some(4000), Some(65_536))
        );
        assert_eq!((i.min_rtt_us, i.data_segs_out), (Some(100_000), Some(8990)));
        assert_eq!(i.delivery_rate, Some(120_000_000));
        assert_eq!(
            (i.busy_time_us, i.rwnd_limited_us, i.sndbuf_limited_us),
            (Some(5_000_000), Some(1000), Some(2000))
        );
        assert_eq!(i.delivered, Some(8970));
        assert_eq!(
            (i.bytes_sent, i.bytes_retrans, i.snd_wnd),
            (Some(13_000_000), Some(24_616), Some(3_000_000))
        );
    }

    #[test]
    fn older_kernels_leave_new_fields_out_and_short_input_is_refused() {
        // Linux 4.1: up to bytes_received.
        let i = TcpInfo::parse(&info_bytes(136)).expect("parse");
        assert_eq!(i.bytes_acked, Some(12_000_000));
        assert_eq!((i.segs_out, i.delivery_rate, i.snd_wnd), (None, None, None));
        // Linux 2.6.
        let i = TcpInfo::parse(&info_bytes(104)).expect("parse");
        assert_eq!((i.total_retrans, i.pacing_rate), (17, None));
        assert_eq!(TcpInfo::parse(&info_bytes(103)), Err(TcpInfoTooShort(103)));
        assert_eq!(TcpInfo::parse(&[]), Err(TcpInfoTooShort(0)));
    }

    #[test]
    fn acknowledged_application_bytes_leave_out_syn_preamble_and_fin() {
        let i = |acked| TcpInfo {
            bytes_acked: Some(acked),
            ..TcpInfo::default()
        };
        // SYN + 20-byte preamble + 1000 bytes of data.
        assert_eq!(app_bytes_acked(&i(1021), 1000), Some(1000));
        // The FIN acknowledged too.
        assert_eq!(app_bytes_acked(&i(1022), 1000), Some(1000));
        assert_eq!(app_bytes_acked(&i(521), 1000), Some(500));
        assert_eq!(app_bytes_acked(&i(1), 0), Some(0));
        assert_eq!(app_bytes_acked(&TcpInfo::default(), 10), None);
        assert_eq!(TcpSample::new(0.0, 0, 1000, &i(1021)).delivered(), 1000);
    }

    #[test]
    fn preamble_rejects_what_is_not_ours() {
        let p = Preamble { test_id: 9, stream: 1 };
        let mut b = p.emit();
        assert_eq!(Preamble::parse(&b[..19]), Err(PreambleError::Short(19)));
        b[8] = 2;
        assert_eq!(Preamble::parse(&b), Err(PreambleError::Version(2)));
        b[0] = b'X';
        assert_eq!(Preamble::parse(&b), Err(PreambleError::Magic));
        assert_eq!(
            Preamble::parse(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Err(PreambleError::Magic)
        );
    }

    #[test]
    fn thinning_keeps_memory_bounded_and_items_evenly_spaced() {
        let mut t = Thinned::new(8);
        for i in 0..1000u64 {
            t.push(i);
        }
        assert!(t.items().len() < 8);
        let k = t.keep_every();
        assert_eq!(k, 256);
        // Kept: every k-th item from the first.
        assert!(t.items().iter().enumerate().all(|(j, &v)| v == j as u64 * k));
        assert_eq!(t.seen(), 1000);
        let mut small = Thinned::new(100);
        (0..10u64).for_each(|i| small.push(i));
        assert_eq!(small.into_items(), (0..10).collect::<Vec<_>>());
    }

    fn sample(t_s: f64, stream: u16, acked: u64, retrans: u32) -> TcpSample {
        TcpSample {
            t_s,
            stream,
            bytes_written: acked + 1000,
            bytes_acked: Some(acked),
            cwnd: 10,
            snd_mss: 1000,
            ssthresh: None,
            srtt_us: 100 + u32::from(stream) * 100,
            rttvar_us: 10,
            total_retrans: retrans,
            data_segs_out: Some(0),
            ca_state: 0,
            pacing_rate_bps: Some(1e6),
            delivery_rate_bps: None,
        }
    }

    #[test]
    fn intervals_sum_streams_and_difference_counters() {
        let mut a = IntervalAggregator::new(1.0);
        // Samples every 0.5 s; stream 0 delivers 1 MB/s, stream 1 0.5 MB/s; stream 1
        // retransmits 3 segments between 1.0 and 1.5 s.
        let round = |t: f64| {
            let r1 = if t >= 1.5 { 3 } else { 0 };
            [sample(t, 0, (t * 1e6) as u64, 0), sample(t, 1, (t * 0.5e6) as u64, r1)]
        };
        assert_eq!(a.on_round(0.5, &round(0.5)), None);
        let i1 = a.on_round(1.0, &round(1.0)).expect("first interval");
        assert_eq!(
            (i1.start_s, i1.end_s, i1.bytes, i1.retransmits),
            (0.0, 1.0, 1_500_000, 0)
        );
        assert_eq!(i1.rate_bps, 12e6);
        assert_eq!(i1.bytes_written, 1_502_000);
        assert_eq!(i1.cwnd_bytes, 20_000);
        assert_eq!(i1.srtt_us, 150.0);
        assert_eq!((i1.pacing_rate_bps, i1.delivery_rate_bps), (Some(2e6), None));
        assert_eq!(a.on_round(1.5, &round(1.5)), None);
        let i2 = a.on_round(2.0, &round(2.0)).expect("second");
        assert_eq!(
            (i2.start_s, i2.bytes, i2.retransmits, i2.bytes_written),
            (1.0, 1_500_000, 3, 1_500_000)
        );
        // A last, shorter interval at the end of the test.
        let i3 = a.finish(2.25, &round(2.25)).expect("tail");
        assert_eq!((i3.start_s, i3.end_s, i3.bytes), (2.0, 2.25, 375_000));
        assert_eq!(i3.rate_bps, 12e6);
        assert_eq!(a.finish(2.25, &round(2.25)), None);
        // Nothing moved since the last interval: no empty tail.
        assert_eq!(a.finish(2.3, &round(2.25)), None);
        assert_eq!(a.intervals().len(), 3);
    }

    #[test]
    fn tolerance_keeps_intervals_on_their_grid() {
        // Samples every 0.1 s, each a few ms late: 1 s intervals close at the sample nearest
        // each whole second, not one sample later.
        let mut a = IntervalAggregator::new(1.0).with_tolerance(0.05);
        let mut ends = Vec::new();
        for k in 1..=30u32 {
            let t = f64::from(k) * 0.1 + if k % 2 == 0 { 0.004 } else { 0.001 };
            if let Some(iv) = a.on_round(t, &[sample(t, 0, u64::from(k), 0)]) {
                ends.push((iv.end_s * 10.0).round() / 10.0);
            }
        }
        assert_eq!(ends, vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn intervals_merge_pairs_when_full() {
        let mut a = IntervalAggregator::with_cap(1.0, 4);
        for k in 1..=9u32 {
            let t = f64::from(k);
            a.on_round(t, &[sample(t, 0, u64::from(k) * 1000, k)]);
        }
        // Nine 1 s intervals, cap 4: merged twice down to spans of 2 s and 4 s.
        assert!(a.intervals().len() < 4);
        assert!(a.times_merged() >= 1);
        let iv = a.intervals();
        assert_eq!(iv[0].start_s, 0.0);
        assert_eq!(iv.last().expect("last").end_s, 9.0);
        assert_eq!(iv.iter().map(|i| i.bytes).sum::<u64>(), 9000);
        assert_eq!(iv.iter().map(|i| i.retransmits).sum::<u64>(), 9);
        for w in iv.windows(2) {
            assert_eq!(w[0].end_s, w[1].start_s);
        }
        let m = &iv[0];
        assert!((m.rate_bps - m.bytes as f64 * 8.0 / (m.end_s - m.start_s)).abs() < 1e-9);
    }

    #[test]
    fn mathis_check_uses_the_models_bound() {
        // 1448-byte MSS, 100 ms, 0.1 % retransmitted: 4.49 Mb/s per stream (evlbi model tcp).
        let m = MathisCheck::new(1, 1448, 0.1, 100, 100_000, 9e6).expect("check");
        let b = m.bound_bps.expect("bound");
        assert!((b - 4.487e6).abs() < 1e3, "{b}");
        assert_eq!(b, models::tcp::bound_bps(1448, 0.1, 1e-3));
        assert!((m.achieved_over_bound.expect("ratio") - 9e6 / b).abs() < 1e-12);
        let two = MathisCheck::new(2, 1448, 0.1, 100, 100_000, 9e6).expect("check");
        assert_eq!(two.bound_bps, Some(2.0 * b));
        // No retransmission: no bound.
        let none = MathisCheck::new(1, 1448, 0.1, 0, 100_000, 9e6).expect("check");
        assert_eq!((none.bound_bps, none.achieved_over_bound, none.loss), (None, None, 0.0));
        assert_eq!(MathisCheck::new(1, 1448, 0.0, 1, 10, 1.0), None);
        assert_eq!(MathisCheck::new(1, 0, 0.1, 1, 10, 1.0), None);
    }

    #[test]
    fn mathis_from_a_test_takes_mean_rtt_and_sums_streams() {
        let samples = [sample(0.5, 0, 0, 0), sample(0.5, 1, 0, 0)];
        let fin = |retr: u32, segs: u32| TcpInfo {
            snd_mss: 1448,
            total_retrans: retr,
            data_segs_out: Some(segs),
            ..TcpInfo::default()
        };
        let m = MathisCheck::from_test(&samples, &[fin(10, 5000), fin(10, 5000)], 1e6).expect("check");
        assert_eq!(
            (m.streams, m.mss_bytes, m.retransmitted_segments, m.sent_segments),
            (2, 1448, 20, 10_000)
        );
        assert!((m.rtt_s - 150e-6).abs() < 1e-12);
        assert_eq!(m.loss, 0.002);
    }
}

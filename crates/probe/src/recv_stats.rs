//! Receiver statistics: everything udpmon measures at the receiving end (seed 000 §4.1, seed 004
//! §3–4), computed from `(receive time, bytes)` pairs in bounded memory.
//!
//! Every datagram is first classified. Strays — from another address, too short, oversized, wrong
//! magic/version, another test id, wrong size — go to [`StrayCounters`] and never touch the data
//! counters (jive5ab's udps reader counted a 27-byte stray as data and reported a loss of 7.5e18).
//! Valid packets feed the [`SeqTracker`] (loss, duplicates, RFC 4737 reordering), the
//! inter-arrival histogram (jitter, seed 004 Figures 4–5), the relative one-way delay (seed 004
//! Figure 6) and the loss-interval fit (seed 000 §4.2, Figure 6).

use serde::{Deserialize, Serialize};

use crate::lossfit::{fit_loss_intervals, PoissonFit};
use crate::seqwin::{SeqEvent, SeqTracker};
use crate::wire::WIRE_OVERHEAD_BYTES;
use crate::wire::{Packet, Repr, WireError};
use histogram::{Bucket, Hist, HistSummary, SignedHist, DEFAULT_MAX_BUCKETS};

/// Default duplicate/reorder memory: 2^16 sequence numbers (8 KiB of bitmap).
pub const DEFAULT_WINDOW: u64 = 1 << 16;
/// Default sanity bound: a sequence number more than 2^20 above the highest seen is ignored.
pub const DEFAULT_MAX_JUMP: u64 = 1 << 20;
/// Default number of per-packet delay records kept (udpmon kept the first N as well).
pub const DEFAULT_KEEP_RECORDS: usize = 10_000;

/// Receiver parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvConfig {
    /// Only datagrams carrying this test id are data.
    pub test_id: u64,
    /// Expected datagram size; other sizes are strays. `None` accepts any valid size.
    pub size: Option<usize>,
    /// Announced packet count; sequence numbers `>= count` are out of window.
    pub count: Option<u64>,
    /// Nominal spacing, ns, used to express loss intervals in µs.
    pub spacing_ns: Option<u64>,
    /// Duplicate/reorder window, sequence numbers (power of two ≥ 64).
    pub window: u64,
    /// Largest accepted jump above the highest sequence number seen.
    pub max_jump: u64,
    /// Per-packet `(seq, send, recv)` records kept for the first N data packets.
    pub keep_records: usize,
}

impl RecvConfig {
    /// Defaults for a test id, no size/count/spacing constraints.
    pub fn new(test_id: u64) -> Self {
        RecvConfig {
            test_id,
            size: None,
            count: None,
            spacing_ns: None,
            window: DEFAULT_WINDOW,
            max_jump: DEFAULT_MAX_JUMP,
            keep_records: DEFAULT_KEEP_RECORDS,
        }
    }
}

/// Why a datagram was not data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrayKind {
    /// Source address is not the negotiated peer.
    OtherPeer,
    /// Shorter than the header.
    TooShort,
    /// Longer than a UDP payload can be.
    Oversized,
    /// Wrong magic.
    BadMagic,
    /// Unknown wire version.
    BadVersion,
    /// Another session's test id.
    WrongTestId,
    /// Valid header but not the negotiated size.
    WrongSize,
}

/// How one datagram was accounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Valid data; what it did to the sequence accounting.
    Data(SeqEvent),
    /// Not data; counted and dropped.
    Stray(StrayKind),
}

/// Per-kind counts of stray datagrams; none of them is data or loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrayCounters {
    /// From an address other than the negotiated peer.
    pub other_peer: u64,
    /// Shorter than the 32-byte header.
    pub too_short: u64,
    /// Longer than 65 507 bytes.
    pub oversized: u64,
    /// Wrong magic.
    pub bad_magic: u64,
    /// Unsupported version.
    pub bad_version: u64,
    /// Another test id.
    pub wrong_test_id: u64,
    /// Not the negotiated size.
    pub wrong_size: u64,
}

impl StrayCounters {
    /// Sum of all kinds.
    pub fn total(&self) -> u64 {
        self.other_peer
            + self.too_short
            + self.oversized
            + self.bad_magic
            + self.bad_version
            + self.wrong_test_id
            + self.wrong_size
    }

    fn bump(&mut self, k: StrayKind) {
        let c = match k {
            StrayKind::OtherPeer => &mut self.other_peer,
            StrayKind::TooShort => &mut self.too_short,
            StrayKind::Oversized => &mut self.oversized,
            StrayKind::BadMagic => &mut self.bad_magic,
            StrayKind::BadVersion => &mut self.bad_version,
            StrayKind::WrongTestId => &mut self.wrong_test_id,
            StrayKind::WrongSize => &mut self.wrong_size,
        };
        *c += 1;
    }
}

/// One per-packet record (first N data packets), for delay-versus-time plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketRecord {
    /// Sequence number.
    pub seq: u64,
    /// Sender clock at send, ns.
    pub send_ns: u64,
    /// Receiver clock at arrival, ns.
    pub recv_ns: u64,
}

/// Live counters, cheap to read during a trial (for per-second displays).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCounters {
    /// Valid data datagrams (every copy).
    pub valid: u64,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Highest sequence number accepted.
    pub highest_seq: Option<u64>,
    /// Losses already certain (fallen out of the window).
    pub lost_so_far: u64,
    /// Stray datagrams.
    pub strays: u64,
    /// User bytes of the distinct packets.
    pub unique_bytes: u64,
    /// RFC 4737 reordered packets.
    pub reordered: u64,
    /// Duplicate copies.
    pub duplicates: u64,
}

/// Accumulates receiver statistics for one trial.
#[derive(Clone, Debug)]
pub struct RecvStats {
    cfg: RecvConfig,
    strays: StrayCounters,
    seq: SeqTracker,
    valid: u64,
    valid_bytes: u64,
    duplicates: u64,
    too_late: u64,
    out_of_window: u64,
    last_flag_seen: bool,
    data_bytes: u64,
    first_data_bytes: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    inter_arrival: Hist,
    nonmonotonic: u64,
    reordered: u64,
    extent: Hist,
    late_time: Hist,
    displacement: Hist,
    owd: SignedHist,
    fit: LinFit,
    records: Vec<PacketRecord>,
}

/// Online least squares of one-way delay against arrival time: the slope is the clock-rate
/// difference between the hosts (seed 004 §3 measured it separately before relating clocks).
#[derive(Clone, Copy, Debug, Default)]
struct LinFit {
    n: f64,
    x0: Option<u64>,
    y0: Option<i64>,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

impl LinFit {
    fn add(&mut self, recv_ns: u64, owd: i64) {
        let x0 = *self.x0.get_or_insert(recv_ns);
        let y0 = *self.y0.get_or_insert(owd);
        // Centre on the first point so f64 keeps ns resolution over long trials.
        let x = recv_ns.wrapping_sub(x0) as i64 as f64 * 1e-9;
        let y = (owd as f64) - (y0 as f64);
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
    }

    /// Slope in ns per s = ppb; returned as ppm.
    fn slope_ppm(&self) -> Option<f64> {
        let den = self.n * self.sxx - self.sx * self.sx;
        (self.n >= 2.0 && den > 0.0).then(|| (self.n * self.sxy - self.sx * self.sy) / den / 1000.0)
    }
}

impl RecvStats {
    /// Empty statistics for a trial.
    pub fn new(cfg: RecvConfig) -> Self {
        RecvStats {
            seq: SeqTracker::new(cfg.window, cfg.max_jump, cfg.count),
            cfg,
            strays: StrayCounters::default(),
            valid: 0,
            valid_bytes: 0,
            duplicates: 0,
            too_late: 0,
            out_of_window: 0,
            last_flag_seen: false,
            data_bytes: 0,
            first_data_bytes: 0,
            first_ns: None,
            last_ns: None,
            inter_arrival: Hist::new(),
            nonmonotonic: 0,
            reordered: 0,
            extent: Hist::new(),
            late_time: Hist::new(),
            displacement: Hist::new(),
            owd: SignedHist::default(),
            fit: LinFit::default(),
            records: Vec::new(),
        }
    }

    /// Classify and account one datagram. `recv_ns`: receive timestamp (kernel if available);
    /// `from_expected_peer`: the source address is the negotiated one.
    pub fn on_datagram(&mut self, recv_ns: u64, bytes: &[u8], from_expected_peer: bool) -> Outcome {
        let stray = if !from_expected_peer {
            Err(StrayKind::OtherPeer)
        } else {
            match Repr::parse(&Packet::new_unchecked(bytes)) {
                Err(WireError::TooShort { .. }) => Err(StrayKind::TooShort),
                Err(WireError::Oversized { .. }) => Err(StrayKind::Oversized),
                Err(WireError::BadMagic { .. }) => Err(StrayKind::BadMagic),
                // BadEmitSize is never produced by parsing; grouped here to keep the match total.
                Err(WireError::UnsupportedVersion(_) | WireError::BadEmitSize { .. }) => Err(StrayKind::BadVersion),
                Ok(r) if r.test_id != self.cfg.test_id => Err(StrayKind::WrongTestId),
                Ok(r) if self.cfg.size.is_some_and(|s| s != r.size) => Err(StrayKind::WrongSize),
                Ok(r) => Ok(r),
            }
        };
        let r = match stray {
            Ok(r) => r,
            Err(k) => {
                self.strays.bump(k);
                return Outcome::Stray(k);
            }
        };
        self.valid += 1;
        self.valid_bytes += r.size as u64;
        let ev = self.seq.on_seq(r.seq, recv_ns);
        match ev {
            SeqEvent::Duplicate => self.duplicates += 1,
            SeqEvent::TooLate => self.too_late += 1,
            SeqEvent::OutOfWindow => self.out_of_window += 1,
            SeqEvent::InOrder => self.on_data(&r, recv_ns),
            SeqEvent::Reordered(o) => {
                self.reordered += 1;
                self.extent.record(o.extent);
                self.late_time.record(o.late_ns);
                self.displacement.record(o.displacement);
                self.on_data(&r, recv_ns);
            }
        }
        Outcome::Data(ev)
    }

    /// A first copy of a sequence number: rates, jitter, delay.
    fn on_data(&mut self, r: &Repr, recv_ns: u64) {
        self.last_flag_seen |= r.flags & crate::wire::FLAG_LAST != 0;
        self.data_bytes += r.size as u64;
        match self.last_ns {
            None => {
                self.first_ns = Some(recv_ns);
                self.first_data_bytes = r.size as u64;
            }
            Some(prev) if recv_ns >= prev => self.inter_arrival.record(recv_ns - prev),
            // Timestamps from different CPUs/queues can step back; count, don't histogram.
            Some(_) => self.nonmonotonic += 1,
        }
        self.last_ns = Some(self.last_ns.map_or(recv_ns, |p| p.max(recv_ns)));
        let owd = i128::from(recv_ns) - i128::from(r.send_ns);
        let owd = i64::try_from(owd).unwrap_or(if owd < 0 { i64::MIN } else { i64::MAX });
        self.owd.record(owd);
        self.fit.add(recv_ns, owd);
        if self.records.len() < self.cfg.keep_records {
            self.records.push(PacketRecord {
                seq: r.seq,
                send_ns: r.send_ns,
                recv_ns,
            });
        }
    }

    /// Counters so far (losses only as far as already certain).
    pub fn live(&self) -> LiveCounters {
        LiveCounters {
            valid: self.valid,
            unique: self.seq.unique(),
            highest_seq: self.seq.highest(),
            lost_so_far: self.seq.lost(),
            strays: self.strays.total(),
            unique_bytes: self.data_bytes,
            reordered: self.reordered,
            duplicates: self.duplicates,
        }
    }

    /// End of trial: `sent` from the sender's `done` message (counts losses at the tail),
    /// `now_ns` the receiver time when it arrived.
    pub fn finish(mut self, sent: Option<u64>, now_ns: u64) -> ReceiverReport {
        let highest_before = self.seq.highest();
        // A sender claiming more than it announced cannot inflate the loss past the announced
        // count; the disagreement is flagged instead.
        let over_announced = matches!((sent, self.cfg.count), (Some(s), Some(c)) if s > c);
        let sent_eff = match (sent, self.cfg.count) {
            (Some(s), Some(c)) => Some(s.min(c)),
            _ => sent,
        };
        self.seq.finish(sent_eff, now_ns.max(self.last_ns.unwrap_or(0)));
        let expected = self.seq.highest().map_or(0, |h| h + 1);
        let unique = self.seq.unique();
        let lost = self.seq.lost();
        let span = match (self.first_ns, self.last_ns) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        // Bits after the first arrival over first-to-last arrival: the first packet opens the
        // interval (udpmon-style user rate); the wire rate adds 66 bytes per packet (seed 004 §4.1).
        let rate = |extra: u64| {
            span.map(|s| {
                let bytes = (self.data_bytes - self.first_data_bytes) + unique.saturating_sub(1) * extra;
                bytes as f64 * 8e9 / s as f64
            })
        };
        let spacing = self.cfg.spacing_ns.map(|s| s as f64).or(self.inter_arrival.mean());
        let min_owd = self.owd.min();
        let rel = |v: Option<i64>| Some(u64::try_from(i128::from(v?) - i128::from(min_owd?)).unwrap_or(u64::MAX));
        ReceiverReport {
            test_id: self.cfg.test_id,
            strays: self.strays,
            valid_datagrams: self.valid,
            valid_bytes: self.valid_bytes,
            unique_packets: unique,
            unique_bytes: self.data_bytes,
            duplicates: self.duplicates,
            too_late: self.too_late,
            out_of_window: self.out_of_window,
            highest_seq_received: highest_before,
            sent_reported: sent,
            sent_mismatch: over_announced || sent.is_some_and(|c| c < highest_before.map_or(0, |h| h + 1)),
            last_flag_seen: self.last_flag_seen,
            expected_packets: expected,
            lost_packets: lost,
            loss_fraction: (expected > 0).then(|| lost as f64 / expected as f64),
            window: self.seq.window(),
            first_arrival_ns: self.first_ns,
            last_arrival_ns: self.last_ns,
            user_rate_bps: rate(0),
            wire_rate_bps: rate(WIRE_OVERHEAD_BYTES),
            inter_arrival_ns: self.inter_arrival.summary(DEFAULT_MAX_BUCKETS),
            nonmonotonic_arrivals: self.nonmonotonic,
            reordering: ReorderReport {
                reordered_packets: self.reordered,
                reordered_ratio: (unique > 0).then(|| self.reordered as f64 / unique as f64),
                extent_packets: self.extent.summary(DEFAULT_MAX_BUCKETS),
                late_time_ns: self.late_time.summary(DEFAULT_MAX_BUCKETS),
                displacement_seq: self.displacement.summary(DEFAULT_MAX_BUCKETS),
            },
            one_way_delay: DelayReport {
                count: self.owd.count(),
                min_raw_ns: min_owd,
                mean_ns: self.owd.mean().zip(min_owd).map(|(m, mn)| m - mn as f64),
                p50_ns: rel(self.owd.quantile(0.5)),
                p99_ns: rel(self.owd.quantile(0.99)),
                max_ns: rel(self.owd.max()),
                buckets: self.owd.buckets_above_min(DEFAULT_MAX_BUCKETS),
                drift_ppm: self.fit.slope_ppm(),
                records: self.records,
            },
            loss_runs: self.seq.runs.summary(DEFAULT_MAX_BUCKETS),
            loss_intervals_packets: self.seq.gaps_packets.summary(DEFAULT_MAX_BUCKETS),
            loss_intervals_ns: self.seq.gaps_ns.summary(DEFAULT_MAX_BUCKETS),
            poisson: fit_loss_intervals(&self.seq.gaps_packets, spacing),
        }
    }
}

/// RFC 4737 reordering summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReorderReport {
    /// Packets with `seq < NextExp` on arrival (RFC 4737 §3.3).
    pub reordered_packets: u64,
    /// `reordered_packets / unique_packets` (RFC 4737 §4.1 reordered ratio).
    pub reordered_ratio: Option<f64>,
    /// Reordering extent in arrival positions (RFC 4737 §4.2.1).
    pub extent_packets: HistSummary,
    /// Late-time offset against the first larger packet, ns (RFC 4737 §4.3).
    pub late_time_ns: HistSummary,
    /// How many sequence numbers behind `NextExp` the packet arrived.
    pub displacement_seq: HistSummary,
}

/// Relative one-way delay: `recv − send` between unsynchronised clocks, minimum removed
/// (seed 004 §3–4.2, Figure 6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelayReport {
    /// Packets measured.
    pub count: u64,
    /// Smallest raw `recv_ns − send_ns` (clock offset + minimum path delay), ns.
    pub min_raw_ns: Option<i64>,
    /// Mean delay above the minimum, ns.
    pub mean_ns: Option<f64>,
    /// Median delay above the minimum, ns.
    pub p50_ns: Option<u64>,
    /// 99th percentile above the minimum, ns.
    pub p99_ns: Option<u64>,
    /// Largest delay above the minimum, ns.
    pub max_ns: Option<u64>,
    /// Histogram of delay above the minimum, ns.
    pub buckets: Vec<Bucket>,
    /// Least-squares slope of delay against arrival time, ppm (clock-rate difference plus any
    /// queue build-up); `None` with fewer than two packets.
    pub drift_ppm: Option<f64>,
    /// Raw records of the first N data packets.
    pub records: Vec<PacketRecord>,
}

/// Receiver statistics of one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverReport {
    /// Test id accepted.
    pub test_id: u64,
    /// Stray datagrams by kind (never data, never loss).
    pub strays: StrayCounters,
    /// Valid data datagrams, every copy, including duplicates and out-of-window ones.
    pub valid_datagrams: u64,
    /// Bytes of those.
    pub valid_bytes: u64,
    /// Distinct sequence numbers received in the window.
    pub unique_packets: u64,
    /// Bytes of the distinct packets (the user data delivered).
    pub unique_bytes: u64,
    /// Second and later copies seen inside the window.
    pub duplicates: u64,
    /// Arrivals below the window (late or duplicate, undecidable); already counted as lost.
    pub too_late: u64,
    /// Sequence numbers absurdly far ahead (forged/corrupt); ignored.
    pub out_of_window: u64,
    /// Highest sequence number received (before extending to `sent_reported`).
    pub highest_seq_received: Option<u64>,
    /// Packet count from the sender's `done` message.
    pub sent_reported: Option<u64>,
    /// The sender reported fewer packets than we saw, or more than it announced in `hello`
    /// (then capped at the announced count): one side's counts are wrong.
    pub sent_mismatch: bool,
    /// A packet with the LAST flag arrived.
    pub last_flag_seen: bool,
    /// Packets that should have arrived: `max(highest + 1, sent)`; equals `unique + lost`.
    pub expected_packets: u64,
    /// Packets lost.
    pub lost_packets: u64,
    /// `lost / expected`.
    pub loss_fraction: Option<f64>,
    /// Duplicate/reorder window, sequence numbers.
    pub window: u64,
    /// First data arrival, receiver clock, ns.
    pub first_arrival_ns: Option<u64>,
    /// Last data arrival, receiver clock, ns.
    pub last_arrival_ns: Option<u64>,
    /// User-data rate first-to-last arrival, bit/s.
    pub user_rate_bps: Option<f64>,
    /// Wire rate (+66 bytes/packet: UDP 8, IP 20, Ethernet 14, FCS 4, preamble 8, IFG 12), bit/s.
    pub wire_rate_bps: Option<f64>,
    /// Histogram of time between successive data arrivals, ns (jitter).
    pub inter_arrival_ns: HistSummary,
    /// Arrivals timestamped before their predecessor (not in the histogram).
    pub nonmonotonic_arrivals: u64,
    /// RFC 4737 reordering.
    pub reordering: ReorderReport,
    /// Relative one-way delay.
    pub one_way_delay: DelayReport,
    /// Lengths of runs of consecutive lost packets.
    pub loss_runs: HistSummary,
    /// Interval between successive lost packets, packets.
    pub loss_intervals_packets: HistSummary,
    /// Interval between detections of successive losses, ns.
    pub loss_intervals_ns: HistSummary,
    /// Exponential fit and Poisson verdict (`None` without losses).
    pub poisson: Option<PoissonFit>,
}

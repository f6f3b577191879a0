//! Congestion control: the [`CongestionController`] trait, [`FixedRate`] and [`Adaptive`].
//!
//! The sender asks its controller for a pacing rate and an inflight cap, and tells it what
//! each REPORT measured ([`ReportSample`]). All rates are bits per second of *wire* bytes
//! (DATA length + the configured per-datagram overhead), so a controller paced at the
//! bottleneck rate fills the bottleneck exactly.
//!
//! # `Adaptive`
//!
//! Model-based, after BBR (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM
//! Queue 2016): it keeps a model of the path, the bottleneck bandwidth `BtlBw` and the
//! propagation delay `RTprop`, and paces at `gain · BtlBw`, never with more than
//! `cwnd_gain · BtlBw · RTprop` in flight.
//!
//! - **`BtlBw`**: windowed max (10 rounds) of the delivery rate the receiver reports, averaged
//!   over ≥ max(20 ms, RTprop/2) of reports (their bytes over the time they took to arrive, or
//!   to leave if they arrived in under 2/3 of that) and divided by `1 − p`, where `p` is the long-run
//!   random loss rate (lost packets used the bottleneck too; without this the estimate and the
//!   rate would shrink by the loss rate).
//! - **`RTprop`**: windowed min (10 s) of RTT samples (now − echoed timestamp − echo delay).
//! - **Rounds**: a round ends when a report echoes a timestamp sent after the round began.
//! - **Startup**: pace at `2/ln 2 · BtlBw` (at least the start rate), i.e. the rate roughly
//!   triples per round, until `BtlBw` grows by less than 25 % for 3 rounds, or loss clusters,
//!   or the one-way delay rises by more than `max(2·threshold, RTprop/4)`. The start rate is
//!   the initial rate (100 Mb/s), raised one round trip in to the rate the receiver measured
//!   from the sender's opening train ([`CongestionController::on_capacity_estimate`];
//!   packet-pair probing, Keshav SIGCOMM 1991): through 1 Gb/s and 100 ms that fills the link
//!   from the second round trip on, three round trips sooner than from 100 Mb/s. A train's
//!   dispersion through a FIFO that already carries traffic is stretched by it: it measures
//!   less than the capacity and at least the bandwidth left over (the asymptotic dispersion
//!   rate: Dovrolis, Ramanathan, Moore, IEEE/ACM ToN 2004), so starting from all of it
//!   overshoots a shared path by at most what Startup's queue exit catches in a round. The inflight cap is 1.75 BDP already in Startup (BBR uses
//!   2.885; at least 1.75 round trips at the start rate), the pipe plus three quarters of a
//!   one-BDP buffer, so the Startup overshoot into a one-BDP buffer loses nothing. Then **Drain** (pace at
//!   `BtlBw / 2.885`) until inflight is down to one BDP (plus the receiver's report delay); the
//!   overshoot's losses, still reported for two rounds after it, are not taken as congestion.
//! - **ProbeBW**: cycles of 8 phases of one `RTprop` each with gains
//!   `[1.25, 0.75, 1, 1, 1, 1, 1, 1]`: probe for more bandwidth for one round, drain the queue
//!   the probe made, cruise.
//!
//! What it reacts to, and what it ignores:
//!
//! - **Random loss is ignored**: it is repaired by retransmission and only enters the model
//!   through the `1 / (1 − p)` correction.
//! - **Clustered loss** yields: a round whose loss rate exceeds `max(3·p, p + 2 %)` (and at least
//!   8 packets) is congestion, not noise.
//! - **Queueing delay** yields: the minimum over the last `2·RTprop` (at least three report
//!   intervals) of the per-interval minimum one-way delay, minus its 10 s minimum, is the standing
//!   queue (a window of two rounds always contains an empty-queue moment when the model is right,
//!   even across a probe). Above
//!   `max(2 ms, RTprop/10)` the model is wrong.
//! - **Yield** = set `BtlBw` to 0.9 × min(`BtlBw`, recent delivery rate), drain for one round
//!   (gain 0.75), and ignore further signals for 3 rounds while the effect arrives. Delivery
//!   samples of data sent before the yield are discarded: they measure the rate just cut, and
//!   would put it straight back into the max filter. Because the
//!   cut is multiplicative and the probe gains a small flow proportionally more than a big one
//!   (its probe takes a larger share of the FIFO), competing flows converge.
//! - **Outage**: when reports stop the sender probes (see [`crate::Sender`]); the controller is
//!   told and restarts Startup from a quarter of its old estimate when reports resume.

mod windowed;

use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use windowed::Windowed;

/// What one accepted REPORT told the sender, as handed to [`CongestionController::on_report`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportSample {
    /// When the report arrived.
    pub now: Instant,
    /// Send time of the newest DATA the receiver had seen when it wrote the report.
    pub echo_sent_at: Instant,
    /// RTT measured with this report (`None` if the echo is not newer than the previous one).
    pub rtt: Option<Duration>,
    /// The receiver's hold time of the echoed datagram.
    pub echo_delay: Duration,
    /// Length of the receiver's measurement interval.
    pub interval: Duration,
    /// Wire bytes (payload + header + overhead) received in the interval.
    pub interval_wire_bytes: u64,
    /// One past the highest DATA sequence number received (≈ datagrams sent that could have
    /// arrived).
    pub seq_high: u64,
    /// DATA datagrams received in total.
    pub rx_datagrams: u64,
    /// Minimum relative one-way delay over the interval, µs.
    pub owd_interval_min_us: i64,
    /// Relative one-way delay of the latest datagram, µs.
    pub owd_latest_us: i64,
    /// Wire bytes in flight after this report (sent after the echoed timestamp).
    pub inflight: u64,
}

/// A congestion controller: decides how fast the sender sends.
pub trait CongestionController: Debug + Send {
    /// Short name, e.g. for stats.
    fn name(&self) -> &'static str;
    /// A DATA datagram of `wire_bytes` was sent at `now`.
    fn on_sent(&mut self, now: Instant, wire_bytes: u64, retransmission: bool) {
        let _ = (now, wire_bytes, retransmission);
    }
    /// The contiguous acknowledgement advanced by `newly_acked` payload bytes.
    fn on_ack(&mut self, now: Instant, newly_acked: u64) {
        let _ = (now, newly_acked);
    }
    /// An accepted REPORT.
    fn on_report(&mut self, sample: &ReportSample);
    /// The receiver measured the path's capacity from the opening train's dispersion, wire
    /// bits/s (see [`crate::wire::Report::train_bps`]). Once per session; default: ignored.
    fn on_capacity_estimate(&mut self, now: Instant, capacity_bps: f64) {
        let _ = (now, capacity_bps);
    }
    /// A round trip of this session's path measured outside the data stream (the control
    /// connection's TCP connect), which completed after the data started. Default: ignored.
    fn on_path_rtt(&mut self, now: Instant, rtt: Duration) {
        let _ = (now, rtt);
    }
    /// Reports stopped: the sender switched to probing. The next
    /// [`CongestionController::on_report`] is the first after the silence.
    fn on_report_timeout(&mut self, now: Instant) {
        let _ = now;
    }
    /// Pacing rate, bits per second of wire bytes. Must be positive.
    fn pacing_rate_bps(&self) -> f64;
    /// Most wire bytes in flight, if capped.
    fn inflight_cap(&self) -> Option<u64>;
    /// Current phase, for stats and debugging.
    fn phase(&self) -> &'static str {
        ""
    }
    /// Current bottleneck bandwidth estimate, bits per second, if the controller has one.
    fn bandwidth_estimate_bps(&self) -> Option<f64> {
        None
    }
    /// What the controller reacted to so far.
    fn events(&self) -> CcEvents {
        CcEvents::default()
    }
}

/// Counts of a controller's reactions, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CcEvents {
    /// Rate cuts to a congestion signal (queueing delay or clustered loss).
    pub yields: u64,
    /// Of those, cuts to clustered loss.
    pub yields_to_loss: u64,
    /// Delivery samples ignored because the sender itself had offered too little.
    pub sender_limited_samples: u64,
    /// Starts from a remembered rate ([`ResumeHint`]) given up in their first round: the path
    /// was slower than remembered.
    #[serde(default)]
    pub resume_retreats: u64,
}

/// Paces at a fixed rate whatever happens: for dedicated lightpaths and reserved circuits.
///
/// Loss only triggers retransmission. There is no inflight cap: the sender's own probing on
/// missing REPORTs is what stops it during an outage.
#[derive(Debug, Clone)]
pub struct FixedRate {
    rate_bps: f64,
}

impl FixedRate {
    /// Paces at `rate_bps` (bits/s of wire bytes; clamped to at least 1 kb/s).
    pub fn new(rate_bps: f64) -> Self {
        let rate_bps = if rate_bps.is_finite() { rate_bps.max(1e3) } else { 1e3 };
        Self { rate_bps }
    }
}

impl CongestionController for FixedRate {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn on_report(&mut self, _: &ReportSample) {}
    fn pacing_rate_bps(&self) -> f64 {
        self.rate_bps
    }
    fn inflight_cap(&self) -> Option<u64> {
        None
    }
    fn phase(&self) -> &'static str {
        "fixed"
    }
}

/// Parameters of [`Adaptive`]. The defaults are the values the module docs describe.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AdaptiveConfig {
    /// Rate of the first round of Startup, bits/s.
    pub initial_rate_bps: f64,
    /// Never pace below this, bits/s.
    pub min_rate_bps: f64,
    /// Never pace above this, bits/s (e.g. the local NIC rate).
    pub max_rate_bps: f64,
    /// Pacing gain in Startup (2/ln 2).
    pub startup_gain: f64,
    /// Gain of the probing phase of ProbeBW.
    pub probe_gain: f64,
    /// Gain of the draining phase of ProbeBW (and after a yield).
    pub drain_gain: f64,
    /// Inflight cap in BDPs.
    pub cwnd_gain: f64,
    /// Inflight cap in BDPs during Startup (1.75: the pipe and three quarters of a one-BDP
    /// buffer; 2, the whole buffer, overflowed it by the estimate's excess and the report delay:
    /// 0.21 % of the datagrams dropped through 1 Gb/s, 100 ms, sim test
    /// `startup_overshoot_drops_nothing_into_a_one_bdp_buffer`).
    pub startup_cwnd_gain: f64,
    /// Window of the bandwidth max filter, rounds.
    pub bw_window_rounds: u64,
    /// Window of the RTT and one-way-delay min filters.
    pub min_rtt_window: Duration,
    /// Smallest standing-queue delay that triggers a yield.
    pub queue_threshold_min: Duration,
    /// Standing-queue threshold as a fraction of `RTprop` (the larger of the two applies).
    pub queue_threshold_fraction: f64,
    /// A round's loss is clustered when above `max(3·p, p + this)`.
    pub loss_cluster_excess: f64,
    /// Fraction of the opening train's capacity estimate Startup may start from (0: ignore
    /// it). All of it (1): the train's dispersion already measures less than the capacity on a
    /// path carrying traffic (see the module docs). Half of it, the earlier default, left half
    /// the link idle for the second round trip: 0.05 s of every transfer through 1 Gb/s and
    /// 100 ms (sim test `startup_fills_the_link_from_the_second_round_trip`).
    pub train_fraction: f64,
    /// Fraction of the delivery rate kept on a yield.
    pub yield_factor: f64,
    /// What a previous session to this peer measured (or the operator said), to start from
    /// instead of [`AdaptiveConfig::initial_rate_bps`]; see [`ResumeHint`].
    pub resume: Option<ResumeHint>,
    /// Fraction of [`ResumeHint::rate_bps`] Startup starts from (careful resume,
    /// draft-ietf-tsvwg-careful-resume §4.3, jumps to half the saved window; a remembered
    /// *delivery* rate already excludes the queue a saved window holds, so more of it is safe).
    pub resume_fraction: f64,
    /// Wire bytes the sender may send beyond the jump window before the first report, because
    /// no report can come for them before it: data sent with the TCP connect, before the
    /// receiver's session exists (its pre-connect budget). Reports of all of it come one round
    /// trip later than they would otherwise, so without this the jump window would stall a
    /// resumed rate for that round trip.
    pub blind_bytes: u64,
}

/// A path's rate remembered from a previous session (careful resume,
/// draft-ietf-tsvwg-careful-resume): Startup starts at [`AdaptiveConfig::resume_fraction`] of
/// `rate_bps` from the first datagram, with at most that rate times `rtt` in flight until the
/// first report measures the path (the jump window, the first round trip's bound on what an
/// estimate too high can put into the path), and retreats to what the path delivers (Drain at
/// the measured rate) on the first sign that the path is slower: a loss burst in the first
/// round, or a queue. Once a round ends without either, the estimate is validated and Startup
/// goes on as usual.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ResumeHint {
    /// Delivery rate, wire bits/s.
    pub rate_bps: f64,
    /// Round-trip time it was measured at.
    pub rtt: Duration,
}

impl ResumeHint {
    /// The hint if it is usable: a finite positive rate, an RTT of 10 µs to 10 s, and a
    /// round trip measured now (e.g. the control connection's connect) within a factor of two
    /// below and ten above the remembered one (careful resume's path confirmation, §4.2: a
    /// different RTT means a different path, whose rate says nothing).
    pub fn confirmed(self, rtt_now: Option<Duration>) -> Option<ResumeHint> {
        let rtt_ok = (Duration::from_micros(10)..=Duration::from_secs(10)).contains(&self.rtt);
        let path_ok = rtt_now.is_none_or(|r| r * 2 >= self.rtt && r <= self.rtt * 10);
        (self.rate_bps.is_finite() && self.rate_bps >= 1e3 && rtt_ok && path_ok).then_some(self)
    }
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        Self {
            initial_rate_bps: 100e6,
            min_rate_bps: 1e6,
            max_rate_bps: 100e9,
            startup_gain: 2.0 / std::f64::consts::LN_2,
            probe_gain: 1.25,
            drain_gain: 0.75,
            cwnd_gain: 2.0,
            startup_cwnd_gain: 1.75,
            bw_window_rounds: 10,
            min_rtt_window: Duration::from_secs(10),
            queue_threshold_min: Duration::from_millis(2),
            queue_threshold_fraction: 0.1,
            loss_cluster_excess: 0.02,
            train_fraction: 1.0,
            yield_factor: 0.9,
            resume: None,
            resume_fraction: 0.9,
            blind_bytes: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Startup,
    Drain,
    ProbeBw,
}

const CYCLE_LEN: usize = 8;

/// Model-based (BBR-like) congestion control; see the module docs.
#[derive(Debug, Clone)]
pub struct Adaptive {
    cfg: AdaptiveConfig,
    phase: Phase,
    start_rate: f64,
    /// Max filter of delivery-rate samples (bits/s), keyed by round.
    bw: Windowed<u64, f64>,
    min_rtt: Windowed<Instant, Duration>,
    /// Long-window minimum of the interval-min one-way delay.
    owd_base: Windowed<Instant, i64>,
    /// Short-window (2 RTprop) minimum of the interval-min one-way delay: the standing queue.
    owd_recent: Windowed<Instant, i64>,
    owd_recent_since: Option<Instant>,
    /// Recent report intervals: (wire bytes, interval µs, send time of the newest data the
    /// receiver had seen before the interval began).
    delivery: VecDeque<(u64, u64, Instant)>,
    /// The first datagram's send time, then the echo of the latest report: when the data a
    /// report's interval delivers began to leave.
    sent_before: Option<Instant>,
    recent_rate: Option<f64>,
    report_interval_us: f64,
    /// Smoothed receiver hold time of the echoed datagram, µs.
    hold_us: f64,
    round: u64,
    round_marker: Option<Instant>,
    round_sent0: u64,
    round_recv0: u64,
    lost_acc: f64,
    sent_acc: f64,
    full_bw: f64,
    full_bw_rounds: u32,
    hold_until_round: u64,
    cycle_index: usize,
    cycle_start: Option<Instant>,
    inflight: u64,
    max_datagram: u64,
    restart_pending: bool,
    /// After a yield: delivery samples of data sent before this are stale (they measure the
    /// rate the yield just cut) and do not enter the max filter.
    samples_valid_from: Option<Instant>,
    yields: u64,
    yields_to_loss: u64,
    /// Wire bytes sent per millisecond bucket over the last second: what the sender offered,
    /// to tell a path that delivers less from a sender that sent less.
    sent_log: VecDeque<(Instant, u64)>,
    sender_limited_samples: u64,
    /// The jump window (wire bytes) while a [`ResumeHint`] is not yet validated: the inflight
    /// cap until the first report, and whether a loss burst or queue in the first round makes
    /// Startup retreat at once.
    resume_window: Option<f64>,
    /// Retreats from an unconfirmed resume hint.
    resume_retreats: u64,
}

/// Width of a [`Adaptive::sent_log`] bucket.
const SENT_BUCKET: Duration = Duration::from_millis(1);

impl Adaptive {
    /// A controller in Startup.
    pub fn new(cfg: AdaptiveConfig) -> Self {
        let mut start_rate = cfg.initial_rate_bps.clamp(cfg.min_rate_bps, cfg.max_rate_bps);
        let hint = cfg.resume.and_then(|h| h.confirmed(None));
        let fraction = cfg.resume_fraction.clamp(0.0, 1.0);
        let resume_window = hint.map(|h| {
            start_rate = start_rate.max((h.rate_bps * fraction).min(cfg.max_rate_bps));
            start_rate / 8.0 * h.rtt.as_secs_f64() + cfg.blind_bytes as f64
        });
        Self {
            cfg,
            phase: Phase::Startup,
            start_rate,
            bw: Windowed::new(true),
            min_rtt: Windowed::new(false),
            owd_base: Windowed::new(false),
            owd_recent: Windowed::new(false),
            owd_recent_since: None,
            delivery: VecDeque::new(),
            sent_before: None,
            recent_rate: None,
            report_interval_us: 10_000.0,
            hold_us: 5_000.0,
            round: 0,
            round_marker: None,
            round_sent0: 0,
            round_recv0: 0,
            lost_acc: 0.0,
            sent_acc: 0.0,
            full_bw: 0.0,
            full_bw_rounds: 0,
            hold_until_round: 0,
            cycle_index: 2,
            cycle_start: None,
            inflight: 0,
            max_datagram: 1500,
            restart_pending: false,
            samples_valid_from: None,
            yields: 0,
            yields_to_loss: 0,
            sent_log: VecDeque::new(),
            sender_limited_samples: 0,
            resume_window,
            resume_retreats: 0,
        }
    }

    /// How many times an unconfirmed [`ResumeHint`] was given up for the measured rate.
    pub fn resume_retreats(&self) -> u64 {
        self.resume_retreats
    }

    /// Careful resume's safe retreat: the first round saw a loss burst or a queue, so the
    /// remembered rate is not this path's. Drain at what the path delivered, as Startup's exit
    /// does, and forget the remembered rate.
    fn resume_retreat(&mut self) {
        self.resume_window = None;
        self.resume_retreats += 1;
        self.start_rate = self
            .cfg
            .initial_rate_bps
            .clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps);
        if let Some(recent) = self.recent_rate {
            self.bw.clear();
            self.bw.push(self.round, recent.max(self.cfg.min_rate_bps));
        }
        self.phase = Phase::Drain;
        self.hold_until_round = self.round + 2;
    }

    /// How many times it yielded to a congestion signal.
    pub fn yields(&self) -> u64 {
        self.yields
    }

    /// Delivery samples below the estimate taken while the sender offered less than 80 % of its
    /// pacing rate (CPU-starved or blocked), carried over instead of lowering the estimate.
    pub fn sender_limited_samples(&self) -> u64 {
        self.sender_limited_samples
    }

    /// Wire bits/s the sender offered in the `window` ending at `now` (`None` without enough
    /// history).
    fn offered_bps(&self, now: Instant, window: Duration) -> Option<f64> {
        let from = now.checked_sub(window)?;
        let (first, _) = *self.sent_log.front()?;
        if first > from {
            return None; // not enough history: no verdict
        }
        let bytes: u64 = self
            .sent_log
            .iter()
            .filter(|(t, _)| *t >= from && *t < now)
            .map(|(_, b)| b)
            .sum();
        Some(bytes as f64 * 8.0 / window.as_secs_f64())
    }

    /// How many of [`Adaptive::yields`] were to clustered loss (the others to queueing delay).
    pub fn yields_to_loss(&self) -> u64 {
        self.yields_to_loss
    }

    /// Long-run random loss rate estimate.
    pub fn long_run_loss(&self) -> f64 {
        if self.sent_acc > 0.0 {
            (self.lost_acc / self.sent_acc).clamp(0.0, 0.2)
        } else {
            0.0
        }
    }

    /// Windowed minimum RTT.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.get()
    }

    fn rtprop(&self) -> Duration {
        self.min_rtt.get().unwrap_or(Duration::from_millis(100))
    }

    fn queue_threshold_us(&self) -> i64 {
        let frac = self.rtprop().as_secs_f64() * self.cfg.queue_threshold_fraction;
        let t = self.cfg.queue_threshold_min.as_secs_f64().max(frac);
        (t * 1e6) as i64
    }

    fn btl_bw(&self) -> f64 {
        self.bw.get().unwrap_or(0.0)
    }

    fn bdp_bytes(&self, gain: f64) -> f64 {
        self.btl_bw() / 8.0 * (gain * self.rtprop().as_secs_f64() + 2.0 * self.report_interval_us / 1e6)
    }

    /// Inflight when the pipe is full and the queue empty: the BDP plus what the receiver's
    /// report delay adds to the inflight measure.
    fn drained_inflight(&self) -> f64 {
        self.btl_bw() / 8.0 * (self.rtprop().as_secs_f64() + self.hold_us / 1e6)
    }

    fn restart(&mut self, now: Instant) {
        self.start_rate = (self.btl_bw() * 0.25).clamp(
            self.cfg.initial_rate_bps.min(self.cfg.max_rate_bps),
            self.cfg.max_rate_bps,
        );
        self.phase = Phase::Startup;
        self.bw.clear();
        self.delivery.clear();
        self.recent_rate = None;
        self.full_bw = 0.0;
        self.full_bw_rounds = 0;
        self.round_marker = None;
        self.owd_recent.clear();
        self.owd_recent_since = None;
        self.hold_until_round = self.round + 1;
        self.cycle_start = Some(now);
    }

    fn update_delivery(&mut self, s: &ReportSample) {
        let us = u64::try_from(s.interval.as_micros()).unwrap_or(u64::MAX);
        if us == 0 {
            return;
        }
        self.report_interval_us = 0.875 * self.report_interval_us + 0.125 * (us.min(100_000) as f64);
        let sent_from = self.sent_before.unwrap_or(s.echo_sent_at);
        self.sent_before = Some(sent_from.max(s.echo_sent_at));
        self.delivery.push_back((s.interval_wire_bytes, us, sent_from));
        let window_us = (self.rtprop().as_micros() as u64 / 2).clamp(20_000, 100_000);
        let mut total_us: u64 = self.delivery.iter().map(|d| d.1).sum();
        while self.delivery.len() > 1 && total_us - self.delivery[0].1 >= window_us {
            total_us -= self.delivery[0].1;
            self.delivery.pop_front();
        }
        if total_us < window_us {
            return;
        }
        let bytes: u64 = self.delivery.iter().map(|d| d.0).sum();
        // Data arrives faster than it left only as fast as a queue drains: ProbeBW's drain
        // (gain 0.75) shows at most 1/0.75 of the send rate. Arrivals squeezed into less than
        // 2/3 of the time the data took to leave are bytes the receiver counted late (the
        // first segment penned before its session existed, stamped at the handover: issue
        // 37), so such a window is measured over its send time, as BBR's delivery rate is
        // (draft-cheng-iccrg-delivery-rate-estimation §3.3: delivered / max(send_elapsed,
        // ack_elapsed)). Over the arrival time alone 12 MiB read as several Gb/s: the estimate
        // jumped to 2.4 Gb/s and 6 % of the datagrams died in the bottleneck's queue (sim test
        // a_penned_first_segment_handed_over_in_one_burst_does_not_inflate_the_estimate). A
        // drain's honest samples keep their arrival time: they measure the bottleneck.
        let send_us = s.echo_sent_at.saturating_duration_since(self.delivery[0].2).as_micros() as u64;
        let elapsed_us = if 2 * send_us > 3 * total_us { send_us } else { total_us };
        let rate = bytes as f64 * 8.0 / (elapsed_us as f64 / 1e6);
        let rate = rate / (1.0 - self.long_run_loss());
        self.recent_rate = Some(rate);
        if self.samples_valid_from.is_some_and(|t| s.echo_sent_at < t) {
            return;
        }
        // BBR's application-limited rule, for a sender limited by its own host: when it offered
        // well under its pacing rate over the sample's window (the data left one RTT earlier),
        // a low delivery rate says nothing about the path. Keep the estimate alive instead of
        // letting the max filter forget it — a busy host otherwise ratchets the rate down.
        let bw = self.btl_bw();
        let window = Duration::from_micros(window_us);
        let sent_window_end = s.now.checked_sub(self.rtprop()).unwrap_or(s.now);
        let offered = self.offered_bps(sent_window_end, window);
        if rate < bw && offered.is_some_and(|o| o < 0.8 * self.pacing_rate_bps()) {
            self.sender_limited_samples += 1;
            self.bw.push(self.round, bw);
            return;
        }
        self.bw.push(self.round, rate.min(self.cfg.max_rate_bps));
    }

    /// Ends a round: loss accounting and Startup's plateau test. Returns whether loss clustered.
    fn end_round(&mut self, s: &ReportSample) -> bool {
        self.round += 1;
        self.round_marker = Some(s.now);
        self.bw.expire(self.round.saturating_sub(self.cfg.bw_window_rounds));
        let sent = s.seq_high.saturating_sub(self.round_sent0);
        let mut clustered = false;
        if sent >= 50 {
            let recv = s.rx_datagrams.saturating_sub(self.round_recv0).min(sent);
            let lost = sent - recv;
            let rate = lost as f64 / sent as f64;
            let p = self.long_run_loss();
            clustered = lost >= 8 && rate > (3.0 * p).max(p + self.cfg.loss_cluster_excess);
            if !clustered {
                self.lost_acc = self.lost_acc * 0.98 + lost as f64;
                self.sent_acc = self.sent_acc * 0.98 + sent as f64;
            }
            self.round_sent0 = s.seq_high;
            self.round_recv0 = s.rx_datagrams;
        }
        if self.phase == Phase::Startup {
            let bw = self.btl_bw();
            if bw >= self.full_bw * 1.25 {
                self.full_bw = bw;
                self.full_bw_rounds = 0;
            } else {
                self.full_bw_rounds += 1;
            }
        }
        clustered
    }

    /// Window of the standing-queue minimum: two round trips, but never fewer than three
    /// reports. On a short path (loopback: RTprop 30 µs, reports every 10 ms) two round trips
    /// hold a single report, and one interval in which this host's scheduler delayed every
    /// datagram would read as a standing queue.
    fn queue_window(&self) -> Duration {
        (self.rtprop() * 2).max(Duration::from_micros((3.0 * self.report_interval_us) as u64))
    }

    fn standing_queue_us(&self, now: Instant) -> Option<i64> {
        let since = self.owd_recent_since?;
        let window = self.queue_window();
        if now.saturating_duration_since(since) < window {
            return None;
        }
        Some(self.owd_recent.get()? - self.owd_base.get()?)
    }

    fn yield_to_congestion(&mut self, now: Instant) {
        let bw = self.btl_bw();
        let recent = self.recent_rate.unwrap_or(bw).min(bw);
        let target = (recent * self.cfg.yield_factor).max(self.cfg.min_rate_bps);
        self.bw.clear();
        self.bw.push(self.round, target);
        self.phase = Phase::ProbeBw;
        self.cycle_index = 1;
        self.cycle_start = Some(now);
        self.hold_until_round = self.round + 3;
        self.owd_recent.clear();
        self.owd_recent_since = None;
        self.delivery.clear();
        self.samples_valid_from = Some(now);
        self.yields += 1;
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.phase = Phase::ProbeBw;
        self.cycle_index = 2;
        self.cycle_start = Some(now);
        // The losses of Startup's overshoot into the buffer are still being reported for up to
        // two rounds (data sent before the drain): they are the overshoot, not congestion.
        self.hold_until_round = self.hold_until_round.max(self.round + 2);
    }

    fn gain(&self) -> f64 {
        match self.phase {
            Phase::Startup => self.cfg.startup_gain,
            Phase::Drain => 1.0 / self.cfg.startup_gain,
            Phase::ProbeBw => match self.cycle_index {
                0 => self.cfg.probe_gain,
                1 => self.cfg.drain_gain,
                _ => 1.0,
            },
        }
    }
}

impl Default for Adaptive {
    fn default() -> Self {
        Self::new(AdaptiveConfig::default())
    }
}

impl CongestionController for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    /// Careful resume's path confirmation (§4.2) when the data left before the connect's round
    /// trip was known: a remembered rate that round trip does not confirm is given up before
    /// any report, back to the initial rate (what the jump window let out meanwhile is the
    /// unconfirmed hint's whole cost); after a report the first round's own checks decide.
    fn on_path_rtt(&mut self, _now: Instant, rtt: Duration) {
        let confirmed = self.cfg.resume.and_then(|h| h.confirmed(Some(rtt))).is_some();
        if self.resume_window.is_some() && !confirmed && self.round == 0 && self.recent_rate.is_none() {
            self.resume_window = None;
            self.resume_retreats += 1;
            self.start_rate = self
                .cfg
                .initial_rate_bps
                .clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps);
        }
    }

    fn on_sent(&mut self, now: Instant, wire_bytes: u64, _retransmission: bool) {
        self.sent_before.get_or_insert(now);
        self.inflight += wire_bytes;
        self.max_datagram = self.max_datagram.max(wire_bytes);
        match self.sent_log.back_mut() {
            Some((t, b)) if now.saturating_duration_since(*t) < SENT_BUCKET => *b += wire_bytes,
            _ => self.sent_log.push_back((now, wire_bytes)),
        }
        while self
            .sent_log
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > Duration::from_secs(1))
        {
            self.sent_log.pop_front();
        }
    }

    fn on_report_timeout(&mut self, _now: Instant) {
        self.restart_pending = true;
    }

    fn on_capacity_estimate(&mut self, _now: Instant, capacity_bps: f64) {
        if self.phase == Phase::Startup && capacity_bps.is_finite() && capacity_bps > 0.0 {
            let from_train = (capacity_bps * self.cfg.train_fraction).min(self.cfg.max_rate_bps);
            self.start_rate = self.start_rate.max(from_train);
        }
    }

    fn on_report(&mut self, s: &ReportSample) {
        let now = s.now;
        self.inflight = s.inflight;
        if self.restart_pending {
            self.restart_pending = false;
            self.restart(now);
            self.round_sent0 = s.seq_high;
            self.round_recv0 = s.rx_datagrams;
            return;
        }
        self.hold_us = 0.875 * self.hold_us + 0.125 * (s.echo_delay.as_micros().min(100_000) as f64);
        if let Some(rtt) = s.rtt {
            self.min_rtt.push(now, rtt);
            self.min_rtt
                .expire(now.checked_sub(self.cfg.min_rtt_window).unwrap_or(now));
        }
        let oldest = now.checked_sub(self.cfg.min_rtt_window).unwrap_or(now);
        self.owd_base.push(now, s.owd_interval_min_us);
        self.owd_base.expire(oldest);
        self.owd_recent.push(now, s.owd_interval_min_us);
        self.owd_recent
            .expire(now.checked_sub(self.queue_window()).unwrap_or(now));
        self.owd_recent_since.get_or_insert(now);
        self.update_delivery(s);

        let mut clustered = false;
        match self.round_marker {
            None => {
                self.round_marker = Some(now);
                self.round_sent0 = s.seq_high;
                self.round_recv0 = s.rx_datagrams;
            }
            Some(marker) if s.echo_sent_at >= marker => clustered = self.end_round(s),
            Some(_) => {}
        }
        let may_react = self.round >= self.hold_until_round;
        let threshold = self.queue_threshold_us();

        match self.phase {
            Phase::Startup => {
                let queue = self.owd_base.get().map_or(0, |b| s.owd_interval_min_us - b);
                let startup_queue = (2 * threshold).max(self.rtprop().as_micros() as i64 / 4);
                if self.resume_window.is_some() {
                    // The first round of a resumed rate: a queue or a loss burst (more than
                    // 2 % of at least 8 datagrams, far above any random loss the rate was
                    // remembered through) says the path is slower than remembered.
                    let lost = s.seq_high.saturating_sub(s.rx_datagrams);
                    let burst = lost >= 8 && lost as f64 > 0.02 * s.seq_high as f64;
                    if burst || clustered || queue > startup_queue {
                        self.resume_retreat();
                        return;
                    }
                    if self.round >= 1 {
                        self.resume_window = None; // a round at the resumed rate: confirmed
                    }
                }
                if self.full_bw_rounds >= 3 || (may_react && (clustered || queue > startup_queue)) {
                    self.phase = Phase::Drain;
                    self.hold_until_round = self.round + 2;
                }
            }
            Phase::Drain => {
                if (self.inflight as f64) <= self.drained_inflight() {
                    self.enter_probe_bw(now);
                }
            }
            Phase::ProbeBw => {
                let queue = self.standing_queue_us(now);
                if may_react && (clustered || queue.is_some_and(|q| q > threshold)) {
                    if clustered {
                        self.yields_to_loss += 1;
                    }
                    self.yield_to_congestion(now);
                } else {
                    let start = *self.cycle_start.get_or_insert(now);
                    let phase_len = self.rtprop().max(Duration::from_millis(10));
                    let drained = self.cycle_index == 1 && (self.inflight as f64) <= self.drained_inflight();
                    if now.saturating_duration_since(start) >= phase_len || drained {
                        self.cycle_index = (self.cycle_index + 1) % CYCLE_LEN;
                        self.cycle_start = Some(now);
                    }
                }
            }
        }
    }

    fn pacing_rate_bps(&self) -> f64 {
        let bw = self.btl_bw();
        let rate = match self.phase {
            Phase::Startup => (self.gain() * bw).max(self.start_rate),
            _ => self.gain() * bw,
        };
        rate.clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps)
    }

    fn inflight_cap(&self) -> Option<u64> {
        if let Some(jump) = self.resume_window {
            // Until a report measured the path: the jump window of the resumed rate.
            if self.min_rtt.get().is_none() || self.bw.get().is_none() {
                return Some((jump as u64).max(4 * self.max_datagram));
            }
        }
        self.min_rtt.get()?;
        self.bw.get()?;
        // Also in Startup: 1.75 BDP in flight is the pipe plus three quarters of a one-BDP
        // queue, so Startup does not overflow a buffer of one BDP while the rate estimate
        // catches up.
        let gain = if self.phase == Phase::Startup {
            self.cfg.startup_cwnd_gain
        } else {
            self.cfg.cwnd_gain
        };
        let floor = 4 * self.max_datagram;
        let mut cap = self.bdp_bytes(gain);
        if self.phase == Phase::Startup {
            // The rate Startup starts from (raised by the opening train's estimate) is a rate
            // it may fill the pipe at before any delivery confirms it.
            // An unconfirmed resumed rate: one round trip of it (the jump window), no more.
            let start_gain = if self.resume_window.is_some() { 1.0 } else { gain };
            let at_start = self.start_rate / 8.0 * start_gain * self.rtprop().as_secs_f64();
            cap = cap.max(at_start);
        }
        Some((cap as u64).max(floor))
    }

    fn phase(&self) -> &'static str {
        match self.phase {
            Phase::Startup => "startup",
            Phase::Drain => "drain",
            Phase::ProbeBw => match self.cycle_index {
                0 => "probe_bw:up",
                1 => "probe_bw:down",
                _ => "probe_bw:cruise",
            },
        }
    }

    fn bandwidth_estimate_bps(&self) -> Option<f64> {
        self.bw.get()
    }

    fn events(&self) -> CcEvents {
        CcEvents {
            yields: self.yields,
            yields_to_loss: self.yields_to_loss,
            sender_limited_samples: self.sender_limited_samples,
            resume_retreats: self.resume_retreats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t0: Instant, ms: u64, rate_bps: f64, owd_us: i64, seq: u64, rx: u64) -> ReportSample {
        let now = t0 + Duration::from_millis(ms);
        ReportSample {
            now,
            echo_sent_at: now - Duration::from_millis(50),
            rtt: Some(Duration::from_millis(100)),
            echo_delay: Duration::ZERO,
            interval: Duration::from_millis(10),
            interval_wire_bytes: (rate_bps / 8.0 * 0.01) as u64,
            seq_high: seq,
            rx_datagrams: rx,
            owd_interval_min_us: owd_us,
            owd_latest_us: owd_us,
            inflight: 0,
        }
    }

    #[test]
    fn a_resumed_rate_the_connects_round_trip_does_not_confirm_is_given_up() {
        let t0 = Instant::now();
        let hint = ResumeHint {
            rate_bps: 1e9,
            rtt: Duration::from_millis(100),
        };
        let resumed = |blind_bytes| {
            Adaptive::new(AdaptiveConfig {
                resume: Some(hint),
                blind_bytes,
                ..AdaptiveConfig::default()
            })
        };
        // The jump window: 0.9 Gb/s for 100 ms, and what is sent blind before the connect.
        assert_eq!(resumed(0).inflight_cap(), Some(11_250_000));
        assert_eq!(resumed(1_000_000).inflight_cap(), Some(12_250_000));
        // The same path (100 ms, 150 ms): kept.
        for ms in [100, 150] {
            let mut cc = resumed(0);
            cc.on_path_rtt(t0, Duration::from_millis(ms));
            assert_eq!((cc.pacing_rate_bps(), cc.resume_retreats()), (0.9e9, 0), "{ms} ms");
        }
        // Another path (20 ms: less than half the remembered round trip): the initial rate.
        let mut cc = resumed(0);
        cc.on_path_rtt(t0, Duration::from_millis(20));
        assert_eq!(cc.pacing_rate_bps(), AdaptiveConfig::default().initial_rate_bps);
        assert_eq!(cc.resume_retreats(), 1);
        assert_ne!(cc.inflight_cap(), Some(11_250_000), "the jump window is gone");
    }

    #[test]
    fn windowed_filters_keep_their_windows_max_or_min() {
        let mut w: Windowed<u64, f64> = Windowed::new(true);
        w.push(0, 5.0);
        w.push(1, 3.0);
        assert_eq!(w.get(), Some(5.0));
        w.expire(1);
        assert_eq!(w.get(), Some(3.0));
        w.expire(100);
        assert_eq!(w.get(), Some(3.0), "the latest sample is kept");
        let mut m: Windowed<u64, i64> = Windowed::new(false);
        m.push(0, 5);
        m.push(1, 7);
        m.push(2, 6);
        assert_eq!(m.get(), Some(5));
        m.expire(1);
        assert_eq!(m.get(), Some(6));
    }

    #[test]
    fn random_loss_does_not_cut_the_rate() {
        let t0 = Instant::now();
        let mut cc = Adaptive::default();
        // Steady 1 Gb/s delivery, 1 % loss, flat delay for 20 s of reports.
        let mut seq = 0;
        let mut rx = 0;
        for i in 1..2000u64 {
            seq += 150;
            rx += 148 + (i % 2); // ≈ 1 % loss
            cc.on_report(&sample(t0, i * 10, 1e9, 1000, seq, rx));
        }
        assert_eq!(cc.yields(), 0);
        assert!(cc.phase().starts_with("probe_bw"), "{}", cc.phase());
        let bw = cc.bandwidth_estimate_bps().unwrap();
        assert!((bw / 1e9 - 1.0).abs() < 0.03, "{bw}");
        assert!((cc.long_run_loss() - 0.01).abs() < 0.005, "{}", cc.long_run_loss());
    }

    /// 1 Gb/s reports for 5 s, then 2 s of 0.3 Gb/s while the sender itself sent only that much
    /// (`starved`) or its full pacing rate (the path really slowed). Returns the estimate after.
    fn estimate_after_slow_reports(starved: bool) -> f64 {
        let t0 = Instant::now();
        let mut cc = Adaptive::default();
        let mut seq = 0;
        for i in 1..700u64 {
            let rate = if i > 500 { 0.3e9 } else { 1e9 };
            let sent_rate = if i > 500 && starved {
                0.3e9
            } else {
                cc.pacing_rate_bps()
            };
            // What the sender put on the wire over this 10 ms, in 1 ms pieces.
            for k in 0..10 {
                let at = t0 + Duration::from_millis((i - 1) * 10 + k);
                cc.on_sent(at, (sent_rate / 8.0 / 1000.0) as u64, false);
            }
            seq += (rate / 8.0 * 0.01 / 8000.0) as u64;
            cc.on_report(&sample(t0, i * 10, rate, 1000, seq, seq));
        }
        cc.bandwidth_estimate_bps().unwrap()
    }

    #[test]
    fn a_starved_sender_keeps_its_estimate_a_slow_path_does_not() {
        let kept = estimate_after_slow_reports(true);
        assert!(kept > 0.9e9, "starved sender lost its estimate: {kept}");
        let followed = estimate_after_slow_reports(false);
        assert!(followed < 0.5e9, "a slower path was not followed: {followed}");
    }

    #[test]
    fn standing_queue_yields() {
        let t0 = Instant::now();
        let mut cc = Adaptive::default();
        let mut seq = 0;
        for i in 1..1000u64 {
            seq += 150;
            cc.on_report(&sample(t0, i * 10, 1e9, 1000, seq, seq));
        }
        assert_eq!(cc.yields(), 0);
        for i in 1000..1100u64 {
            seq += 150;
            cc.on_report(&sample(t0, i * 10, 1e9, 1000 + 30_000, seq, seq));
            if cc.yields() > 0 {
                break;
            }
        }
        assert_eq!(cc.yields(), 1);
        // 0.9 × the delivery rate, in the draining phase.
        assert!(cc.pacing_rate_bps() < 0.7e9, "{}", cc.pacing_rate_bps());
    }

    #[test]
    fn fixed_rate_is_fixed() {
        let t0 = Instant::now();
        let mut cc = FixedRate::new(9.5e8);
        cc.on_report(&sample(t0, 10, 1e8, 1000, 100, 10));
        assert_eq!(cc.pacing_rate_bps(), 9.5e8);
        assert_eq!(cc.inflight_cap(), None);
    }
}

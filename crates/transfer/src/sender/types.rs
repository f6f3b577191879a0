//! What a sender reports: its state, why it failed, its statistics and rate samples.

use serde::Serialize;

use crate::session::RejectCounters;

/// Why a sender stopped without finishing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Failure {
    /// [`super::Source::read_at`] failed.
    Source(String),
    /// [`super::Source::read_at`] returned 0 before the end of a chunk.
    ShortRead(u64),
    /// Nothing valid from the receiver for [`super::SenderConfig::idle_timeout`].
    TimedOut,
}

/// Where the sender is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SenderState {
    /// Sending data and repairs.
    Sending,
    /// Reports stopped: only occasional probes.
    Probing,
    /// Everything acknowledged; FIN sent, waiting for FIN-ACK.
    FinWait,
    /// FIN-ACK received: both sides know the transfer is complete.
    Done,
    /// Aborted.
    Failed(Failure),
}

/// One entry of [`SenderStats::rate_samples`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct RateSample {
    /// Seconds since the sender was created.
    pub t_s: f64,
    /// Growth of the acknowledged prefix over the period, payload bits/s.
    pub goodput_bps: f64,
    /// Payload rate the receiver reported over the period, bits/s.
    pub receive_bps: f64,
    /// Pacing rate at the end of the period, wire bits/s.
    pub pacing_bps: f64,
    /// Wire bytes in flight.
    pub inflight_bytes: u64,
}

/// What the sender did (serialisable for reports).
#[derive(Debug, Clone, Serialize)]
pub struct SenderStats {
    /// Congestion controller.
    pub cc: &'static str,
    /// Its phase at the end.
    pub cc_phase: &'static str,
    /// What the controller reacted to.
    pub cc_events: crate::cc::CcEvents,
    /// State at the time of the snapshot.
    pub state: SenderState,
    /// File size.
    pub file_bytes: u64,
    /// Bytes acknowledged (contiguous prefix): delivered.
    pub bytes_delivered: u64,
    /// DATA datagrams sent (retransmissions and probes included).
    pub datagrams_sent: u64,
    /// Payload bytes sent.
    pub payload_bytes_sent: u64,
    /// Wire bytes sent (with [`super::SenderConfig::wire_overhead`]).
    pub wire_bytes_sent: u64,
    /// DATA datagrams that repeated a chunk.
    pub retransmitted_datagrams: u64,
    /// Their payload bytes.
    pub retransmitted_bytes: u64,
    /// Chunks resent by tail protection, in otherwise idle pacing slots once every chunk had
    /// left (counted in the retransmissions too).
    pub tail_resent_datagrams: u64,
    /// Probes sent during silences (counted in the retransmissions too).
    pub probes_sent: u64,
    /// FINs sent.
    pub fins_sent: u64,
    /// Times reports stopped and the sender switched to probing.
    pub report_timeouts: u64,
    /// REPORTs accepted.
    pub reports_received: u64,
    /// REPORTs older than one already seen, ignored.
    pub reports_stale: u64,
    /// Datagrams dropped, by reason.
    pub rejected: RejectCounters,
    /// Loss the receiver saw: 1 − received / sent, from its latest report.
    pub loss_seen_by_receiver: f64,
    /// Smallest RTT measured, µs.
    pub rtt_min_us: Option<u64>,
    /// Smoothed RTT, µs.
    pub srtt_us: Option<u64>,
    /// From the first DATA sent to everything acknowledged, seconds.
    pub duration_s: Option<f64>,
    /// From the newest chunk's first transmission to everything acknowledged, seconds: one
    /// round trip unless a chunk of the last one was lost and had to be repaired.
    pub tail_s: Option<f64>,
    /// From the first DATA sent to FIN-ACK, seconds.
    pub completion_s: Option<f64>,
    /// File bits / `duration_s`.
    pub goodput_bps: Option<f64>,
    /// Rates every [`super::SenderConfig::rate_sample_interval`] (at most 100 000 kept).
    pub rate_samples: Vec<RateSample>,
}

//! The sender's small measuring parts: RTT estimator, in-flight log, rate-sample interval.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Smoothed RTT and its variation (RFC 6298 §2: α = 1/8, β = 1/4) and the smallest sample.
#[derive(Debug, Clone, Copy)]
pub(super) struct RttEstimator {
    pub(super) min: Option<Duration>,
    pub(super) smoothed: Option<Duration>,
    pub(super) var: Duration,
}

impl RttEstimator {
    pub(super) fn new(initial: Duration) -> Self {
        RttEstimator {
            min: None,
            smoothed: None,
            var: initial / 2,
        }
    }

    pub(super) fn update(&mut self, sample: Duration) {
        self.min = Some(self.min.map_or(sample, |m| m.min(sample)));
        match self.smoothed {
            None => {
                self.smoothed = Some(sample);
                self.var = sample / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(sample);
                self.var = (self.var * 3 + diff) / 4;
                self.smoothed = Some((srtt * 7 + sample) / 8);
            }
        }
    }
}

/// Wire bytes in flight: those sent after the newest transmission time the receiver echoed.
#[derive(Debug, Default)]
pub(super) struct InflightLog {
    /// (send time µs, wire bytes sent up to and including it), oldest first.
    sent: VecDeque<(u64, u64)>,
    /// Wire bytes sent up to the newest echoed send time.
    at_echo: u64,
    pub(super) bytes: u64,
}

impl InflightLog {
    pub(super) fn on_sent(&mut self, ts_us: u64, wire: u64, wire_total: u64) {
        self.sent.push_back((ts_us, wire_total));
        self.bytes += wire;
    }

    pub(super) fn on_echo(&mut self, echo_ts_us: u64, wire_total: u64) {
        while let Some(&(ts, cum)) = self.sent.front() {
            if ts > echo_ts_us {
                break;
            }
            self.at_echo = cum;
            self.sent.pop_front();
        }
        self.bytes = wire_total - self.at_echo;
    }
}

/// Where the current [`super::RateSample`] interval started.
#[derive(Debug, Clone, Copy)]
pub(super) struct RateSampler {
    pub(super) at: Instant,
    pub(super) acked: u64,
    pub(super) rx_bytes: u64,
}

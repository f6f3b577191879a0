//! Counters a [`crate::Link`] keeps about what it did.

use std::time::Duration;

use histogram::Hist;
use serde::{Deserialize, Serialize, Serializer};

/// A packet count and the sum of their lengths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// Number of packets.
    pub packets: u64,
    /// Sum of their `len` in bytes.
    pub bytes: u64,
}

impl Counter {
    /// Counts one packet of `len` bytes.
    pub fn add(&mut self, len: u64) {
        self.packets += 1;
        self.bytes += len;
    }
}

/// What one link did to the packets pushed into it.
///
/// Exact accounting, for packets and for bytes alike:
///
/// `offered = delivered + dropped_loss + dropped_queue + in_flight − duplicated`
///
/// where `in_flight` is [`crate::Link::in_flight`] (scheduled copies not yet
/// polled, duplicates included). Wire loss is counted when the packet is
/// pushed, because the decision is drawn then, even though the packet still
/// occupies the bottleneck until its serialisation ends.
#[derive(Debug, Clone, Serialize)]
pub struct LinkStats {
    /// Everything passed to `push`.
    pub offered: Counter,
    /// Everything returned by `poll` (duplicates included).
    pub delivered: Counter,
    /// Lost by the wire loss model.
    pub dropped_loss: Counter,
    /// Dropped because the bottleneck queue was full (congestion loss).
    pub dropped_queue: Counter,
    /// Extra copies created by duplication.
    pub duplicated: Counter,
    /// Largest bottleneck queue occupancy seen, in bytes, counting the
    /// packet just admitted.
    pub max_queue_bytes: u64,
    /// Time packets waited in the bottleneck queue before their own
    /// serialisation started, in µs; one sample per packet admitted to the
    /// queue (a packet lost on the wire afterwards still waited).
    /// Serialised as a [`HistSummary`] with at most [`QUEUE_DELAY_BUCKETS`] buckets.
    #[serde(serialize_with = "serialize_summary")]
    pub queue_delay_us: Hist,
}

impl Default for LinkStats {
    fn default() -> Self {
        Self {
            offered: Counter::default(),
            delivered: Counter::default(),
            dropped_loss: Counter::default(),
            dropped_queue: Counter::default(),
            duplicated: Counter::default(),
            max_queue_bytes: 0,
            queue_delay_us: Hist::new(),
        }
    }
}

impl LinkStats {
    pub(crate) fn record_queue_delay(&mut self, wait: Duration) {
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.queue_delay_us.record(us);
    }

    /// Mean queue delay (0 when no packet was queued).
    pub fn queue_delay_mean(&self) -> Duration {
        Duration::from_secs_f64(self.queue_delay_us.mean().unwrap_or(0.0) / 1e6)
    }

    /// Median queue delay (µs resolution, 3 significant digits).
    pub fn queue_delay_p50(&self) -> Duration {
        Duration::from_micros(self.queue_delay_us.quantile(0.5).unwrap_or(0))
    }

    /// 99th percentile of the queue delay.
    pub fn queue_delay_p99(&self) -> Duration {
        Duration::from_micros(self.queue_delay_us.quantile(0.99).unwrap_or(0))
    }

    /// Largest queue delay recorded.
    pub fn queue_delay_max(&self) -> Duration {
        Duration::from_micros(self.queue_delay_us.max().unwrap_or(0))
    }

    /// Fraction of offered packets lost by the wire loss model.
    pub fn loss_fraction(&self) -> f64 {
        ratio(self.dropped_loss.packets, self.offered.packets)
    }

    /// Fraction of offered packets dropped by the full queue.
    pub fn queue_drop_fraction(&self) -> f64 {
        ratio(self.dropped_queue.packets, self.offered.packets)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Buckets kept when the queue-delay histogram is serialised: enough for a report's figure.
pub const QUEUE_DELAY_BUCKETS: usize = 64;

fn serialize_summary<S: Serializer>(h: &Hist, s: S) -> Result<S::Ok, S::Error> {
    h.summary(QUEUE_DELAY_BUCKETS).serialize(s)
}

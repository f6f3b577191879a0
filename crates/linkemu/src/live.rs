//! What the real-time emulator (crate `linkemu-tun`) counts per direction and per interval.
//!
//! Defined beside the model rather than in the TUN driver so that readers of its results (the
//! report) need not link the driver.

use serde::{Deserialize, Serialize};

/// A snapshot of one direction's counters (packets unless said otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCounters {
    /// Packets read from the input TUN device.
    pub received_packets: u64,
    /// Bytes (whole IP packets) read from the input TUN device.
    pub received_bytes: u64,
    /// Packets written to the output TUN device.
    pub forwarded_packets: u64,
    /// Bytes written to the output TUN device.
    pub forwarded_bytes: u64,
    /// Lost by the link's loss model.
    pub dropped_loss: u64,
    /// Dropped by the link's full bottleneck queue.
    pub dropped_queue: u64,
    /// Dropped because the emulator's own memory bound was reached.
    pub overflow: u64,
    /// Writes the output device refused.
    pub write_errors: u64,
}

impl LiveCounters {
    /// What was counted since `earlier` (a snapshot of the same direction).
    pub fn since(&self, earlier: &LiveCounters) -> LiveCounters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        LiveCounters {
            received_packets: d(self.received_packets, earlier.received_packets),
            received_bytes: d(self.received_bytes, earlier.received_bytes),
            forwarded_packets: d(self.forwarded_packets, earlier.forwarded_packets),
            forwarded_bytes: d(self.forwarded_bytes, earlier.forwarded_bytes),
            dropped_loss: d(self.dropped_loss, earlier.dropped_loss),
            dropped_queue: d(self.dropped_queue, earlier.dropped_queue),
            overflow: d(self.overflow, earlier.overflow),
            write_errors: d(self.write_errors, earlier.write_errors),
        }
    }
}

/// The counters of both directions over one interval of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// End of the interval, seconds from the start.
    pub t_s: f64,
    /// Length of the interval, seconds.
    pub dt_s: f64,
    /// A → B over the interval.
    pub a_to_b: LiveCounters,
    /// B → A over the interval.
    pub b_to_a: LiveCounters,
}

/// `linkemu`: both directions' counters, totals since the start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkemuStatus {
    /// Seconds since the start.
    pub elapsed_s: f64,
    /// Namespace A to B.
    pub a_to_b: LiveCounters,
    /// B to A.
    pub b_to_a: LiveCounters,
}

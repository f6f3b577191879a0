//! Sender-side statistics: what the sending host actually did, so that sender jitter can be told
//! apart from network jitter.
//!
//! udpmon reports only the receiver's inter-arrival histogram (seed 004 §4.1, Figures 4–5). A
//! peak at line rate there may be the network bunching packets (the Alcatel TSS of seed 004 §4.2)
//! or the sending PC missing its schedule and then catching up. Recording the departure gaps from
//! the real send timestamps, and how late each packet left against its schedule, separates the two.

use serde::{Deserialize, Serialize};

use crate::wire::WIRE_OVERHEAD_BYTES;
use histogram::{Hist, HistSummary, DEFAULT_MAX_BUCKETS};

/// Sender statistics parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendConfig {
    /// Intended departure spacing, ns.
    pub spacing_ns: u64,
    /// A packet leaving more than this after its scheduled time counts as late.
    pub late_tolerance_ns: u64,
}

impl SendConfig {
    /// Tolerance defaults to half the spacing (at least 1 µs): a packet later than that has
    /// eaten into its successor's slot.
    pub fn new(spacing_ns: u64) -> Self {
        SendConfig {
            spacing_ns,
            late_tolerance_ns: (spacing_ns / 2).max(1_000),
        }
    }
}

/// Accumulates per-departure observations with bounded memory.
#[derive(Clone, Debug)]
pub struct SendStats {
    cfg: SendConfig,
    packets: u64,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    first_bytes: u64,
    gaps: Hist,
    lateness: Hist,
    late: u64,
    early: u64,
    nonmonotonic: u64,
}

impl SendStats {
    /// Empty statistics.
    pub fn new(cfg: SendConfig) -> Self {
        SendStats {
            cfg,
            packets: 0,
            bytes: 0,
            first_ns: None,
            last_ns: None,
            first_bytes: 0,
            gaps: Hist::new(),
            lateness: Hist::new(),
            late: 0,
            early: 0,
            nonmonotonic: 0,
        }
    }

    /// One datagram handed to the kernel: `scheduled_ns` from the pacer's timeline, `actual_ns`
    /// read just before (or, with `SO_TIMESTAMPING`, reported after) the send.
    pub fn on_sent(&mut self, scheduled_ns: u64, actual_ns: u64, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
        match self.last_ns {
            None => {
                self.first_ns = Some(actual_ns);
                self.first_bytes = bytes as u64;
            }
            Some(prev) if actual_ns >= prev => self.gaps.record(actual_ns - prev),
            // A clock that steps backwards is reported, not turned into a huge gap.
            Some(_) => self.nonmonotonic += 1,
        }
        self.last_ns = Some(self.last_ns.map_or(actual_ns, |p| p.max(actual_ns)));
        if actual_ns >= scheduled_ns {
            let late_by = actual_ns - scheduled_ns;
            self.lateness.record(late_by);
            if late_by > self.cfg.late_tolerance_ns {
                self.late += 1;
            }
        } else {
            // Leaving early means the pacer's spin overshot; count it, lateness stays 0.
            self.early += 1;
            self.lateness.record(0);
        }
    }

    /// Packets recorded so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Summary for the results JSON.
    pub fn report(&self) -> SenderReport {
        let span = match (self.first_ns, self.last_ns) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        // Bits after the first packet over first-to-last: the first packet's departure opens the
        // interval, so counting it would bias short trials upwards.
        let rate = |extra: u64| {
            span.map(|s| {
                let n = self.packets.saturating_sub(1);
                ((self.bytes - self.first_bytes) + n * extra) as f64 * 8e9 / s as f64
            })
        };
        SenderReport {
            packets_sent: self.packets,
            bytes_sent: self.bytes,
            first_send_ns: self.first_ns,
            last_send_ns: self.last_ns,
            user_rate_bps: rate(0),
            wire_rate_bps: rate(WIRE_OVERHEAD_BYTES),
            spacing_ns: self.cfg.spacing_ns,
            late_tolerance_ns: self.cfg.late_tolerance_ns,
            late_packets: self.late,
            early_packets: self.early,
            nonmonotonic_clock: self.nonmonotonic,
            departure_gap_ns: self.gaps.summary(DEFAULT_MAX_BUCKETS),
            lateness_ns: self.lateness.summary(DEFAULT_MAX_BUCKETS),
        }
    }
}

/// Sender statistics of one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SenderReport {
    /// Datagrams handed to the kernel.
    pub packets_sent: u64,
    /// UDP payload bytes handed to the kernel.
    pub bytes_sent: u64,
    /// Sender clock at the first departure, ns.
    pub first_send_ns: Option<u64>,
    /// Sender clock at the last departure, ns.
    pub last_send_ns: Option<u64>,
    /// Achieved user-data rate first-to-last departure, bit/s (`None` with fewer than 2 packets).
    pub user_rate_bps: Option<f64>,
    /// Same including 66 bytes of UDP/IP/Ethernet/preamble/IFG per packet, bit/s.
    pub wire_rate_bps: Option<f64>,
    /// Intended spacing, ns.
    pub spacing_ns: u64,
    /// Lateness above which a departure counts as late, ns.
    pub late_tolerance_ns: u64,
    /// Departures later than schedule + tolerance.
    pub late_packets: u64,
    /// Departures before their scheduled time.
    pub early_packets: u64,
    /// Departures whose timestamp was below the previous one (clock stepped back).
    pub nonmonotonic_clock: u64,
    /// Histogram of gaps between successive actual departures, ns.
    pub departure_gap_ns: HistSummary,
    /// Histogram of `actual − scheduled` departure time (0 when early), ns.
    pub lateness_ns: HistSummary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_pacer() {
        let mut s = SendStats::new(SendConfig::new(16_000));
        for i in 0..1001u64 {
            s.on_sent(i * 16_000, i * 16_000, 8192);
        }
        let r = s.report();
        assert_eq!(r.packets_sent, 1001);
        assert_eq!(r.late_packets, 0);
        assert_eq!(r.departure_gap_ns.min, Some(16_000));
        assert_eq!(r.departure_gap_ns.max, Some(16_000));
        // 8192 B every 16 µs = 4096 Mb/s user rate, (8192+66)/8192 more on the wire.
        let user = r.user_rate_bps.expect("rate");
        assert!((user - 4.096e9).abs() < 1.0, "{user}");
        let wire = r.wire_rate_bps.expect("rate");
        assert!((wire - 4.096e9 * 8258.0 / 8192.0).abs() < 1.0, "{wire}");
    }

    #[test]
    fn late_burst_then_catch_up() {
        let mut s = SendStats::new(SendConfig::new(10_000));
        // Packets 0..5 on time; 5..10 stalled to 100 µs and sent back to back.
        for i in 0..10u64 {
            let sched = i * 10_000;
            let actual = if i < 5 { sched } else { 100_000 + i };
            s.on_sent(sched, actual, 1000);
        }
        let r = s.report();
        assert_eq!(r.late_packets, 5);
        assert_eq!(r.departure_gap_ns.min, Some(1));
        assert_eq!(r.lateness_ns.max, Some(50_005));
    }

    #[test]
    fn early_and_backwards_clock_are_counted() {
        let mut s = SendStats::new(SendConfig::new(1000));
        s.on_sent(1000, 900, 100);
        s.on_sent(2000, 800, 100);
        let r = s.report();
        assert_eq!((r.early_packets, r.nonmonotonic_clock), (2, 1));
        assert_eq!(r.user_rate_bps, None);
    }
}

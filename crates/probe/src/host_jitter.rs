//! The host's own timing floor: how evenly can this machine release packets at all?
//!
//! A sender's departure-gap histogram mixes two things: what the sending code does (system calls,
//! copies, the receive path run inside a loopback `sendto`) and what the host does to any thread
//! that spins on the clock — timer ticks, interrupts, and on a virtual machine the hypervisor
//! taking the vCPU away. The second is a floor no sender can go below. This module measures it
//! the way a sender runs: the same absolute-timeline pacer releases "packets" at the same spacing
//! but sends nothing, and every gap between two successive clock reads while spinning that exceeds
//! a threshold is recorded as an interruption (the method of sysjitter / hwlatdetect: a thread
//! that does nothing but read the clock sees every moment it was not running).
//!
//! Sans-IO like the rest of the crate: the caller reads the clock and feeds timestamps.

use serde::{Deserialize, Serialize};

use crate::send_stats::{SendConfig, SendStats, SenderReport};
use histogram::{Hist, HistSummary, DEFAULT_MAX_BUCKETS};

/// Clock-read gaps above this while spinning count as interruptions. Two successive reads of
/// CLOCK_MONOTONIC (vDSO) take ~20–50 ns; 1 µs is far above that and far below the gaps that
/// matter at 16 µs spacing.
pub const DEFAULT_INTERRUPTION_NS: u64 = 1_000;

/// Accumulates one host-jitter measurement.
#[derive(Clone, Debug)]
pub struct HostJitter {
    threshold_ns: u64,
    releases: SendStats,
    interruptions: Hist,
    interrupted_ns: u64,
    spin_ns: u64,
}

impl HostJitter {
    /// Releases every `spacing_ns`; interruptions above [`DEFAULT_INTERRUPTION_NS`].
    pub fn new(spacing_ns: u64) -> Self {
        HostJitter {
            threshold_ns: DEFAULT_INTERRUPTION_NS,
            releases: SendStats::new(SendConfig::new(spacing_ns)),
            interruptions: Hist::new(),
            interrupted_ns: 0,
            spin_ns: 0,
        }
    }

    /// Two successive clock reads of the spin loop, `prev_ns` then `now_ns` (a clock that steps
    /// back is ignored).
    pub fn on_spin_step(&mut self, prev_ns: u64, now_ns: u64) {
        let Some(gap) = now_ns.checked_sub(prev_ns) else {
            return;
        };
        self.spin_ns += gap;
        if gap > self.threshold_ns {
            self.interruptions.record(gap);
            self.interrupted_ns += gap;
        }
    }

    /// The pacer released a (virtual) packet due at `scheduled_ns` at `actual_ns`.
    pub fn on_release(&mut self, scheduled_ns: u64, actual_ns: u64) {
        self.releases.on_sent(scheduled_ns, actual_ns, 0);
    }

    /// The result; `elapsed_ns` is the wall time of the whole run, `involuntary_context_switches`
    /// and `pacer_slips` come from the caller (getrusage, the pacer).
    pub fn report(&self, elapsed_ns: u64, involuntary_context_switches: u64, pacer_slips: u64) -> HostJitterReport {
        let releases = self.releases.report();
        let seconds = elapsed_ns as f64 / 1e9;
        let floor = releases
            .departure_gap_ns
            .p99
            .map(|p99| p99 as f64 - releases.spacing_ns as f64);
        HostJitterReport {
            kind: HostJitterReport::KIND.to_string(),
            spacing_ns: releases.spacing_ns,
            seconds,
            interruption_threshold_ns: self.threshold_ns,
            interruptions: self.interruptions.summary(DEFAULT_MAX_BUCKETS),
            interruptions_per_second: if seconds > 0.0 {
                self.interruptions.count() as f64 / seconds
            } else {
                0.0
            },
            spin_ns: self.spin_ns,
            interrupted_share: if self.spin_ns > 0 {
                self.interrupted_ns as f64 / self.spin_ns as f64
            } else {
                0.0
            },
            involuntary_context_switches,
            pacer_slips,
            gap_p99_excess_ns: floor,
            releases,
        }
    }
}

/// `evlbi probe host-jitter`: the departure gaps of a pacer that sends nothing, and what
/// interrupted it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostJitterReport {
    /// Always `"host_jitter"`, so `evlbi report` can tell this result from the others.
    pub kind: String,
    /// Release spacing, ns.
    pub spacing_ns: u64,
    /// Wall time of the measurement, s.
    pub seconds: f64,
    /// Clock-read gaps above this while spinning counted as interruptions, ns.
    pub interruption_threshold_ns: u64,
    /// Histogram of interruptions (clock-read gaps above the threshold), ns.
    pub interruptions: HistSummary,
    /// Interruptions per second of wall time.
    pub interruptions_per_second: f64,
    /// Time spent spinning (between releases, not sleeping), ns.
    pub spin_ns: u64,
    /// Share of the spin time lost to interruptions (0..1).
    pub interrupted_share: f64,
    /// Times the scheduler took the CPU from this thread for another task (getrusage
    /// ru_nivcsw); 0 means every interruption was an interrupt or the hypervisor.
    pub involuntary_context_switches: u64,
    /// Times the pacer fell more than its catch-up bound behind and re-anchored.
    pub pacer_slips: u64,
    /// Departure-gap p99 minus the spacing, ns: the best p99 excess any sender on this host can
    /// show at this spacing (compare with a sender's own gap p99).
    pub gap_p99_excess_ns: Option<f64>,
    /// The releases as a sender would report them (bytes are 0: nothing was sent).
    pub releases: SenderReport,
}

impl HostJitterReport {
    /// Value of [`HostJitterReport::kind`].
    pub const KIND: &'static str = "host_jitter";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_host_has_no_interruptions_and_exact_gaps() {
        let mut j = HostJitter::new(16_000);
        let mut t = 0;
        for i in 0..1000u64 {
            // 400 clock reads of 40 ns between releases.
            while t < i * 16_000 {
                j.on_spin_step(t, t + 40);
                t += 40;
            }
            j.on_release(i * 16_000, t);
        }
        let r = j.report(16_000_000, 0, 0);
        assert_eq!(r.interruptions.count, 0);
        assert_eq!(r.interrupted_share, 0.0);
        assert_eq!(r.releases.packets_sent, 1000);
        assert_eq!(r.releases.departure_gap_ns.p99, Some(16_000));
        assert_eq!(r.gap_p99_excess_ns, Some(0.0));
        assert_eq!(r.kind, "host_jitter");
    }

    #[test]
    fn interruptions_are_counted_and_delay_releases() {
        let mut j = HostJitter::new(10_000);
        let mut t = 0u64;
        let mut released = Vec::new();
        for i in 0..200u64 {
            let due = i * 10_000;
            while t < due {
                // Every 20th release is preceded by a 25 µs interruption.
                let step = if i % 20 == 10 && t + 25_000 >= due && t < due {
                    25_000
                } else {
                    50
                };
                j.on_spin_step(t, t + step);
                t += step;
            }
            j.on_release(due, t);
            released.push(t);
        }
        let r = j.report(2_000_000, 3, 0);
        assert_eq!(r.interruptions.count, 10);
        assert_eq!(r.interruptions.min, Some(25_000));
        assert!((r.interrupted_share - 250_000.0 / r.spin_ns as f64).abs() < 1e-12);
        assert_eq!(r.involuntary_context_switches, 3);
        assert_eq!(r.interruptions_per_second, 5000.0); // 10 in 2 ms
                                                        // Ten late releases: each leaves a long gap before and a short one after.
        assert!(r.releases.departure_gap_ns.max.unwrap_or(0) > 10_000);
        assert!(r.releases.late_packets > 0);
    }

    #[test]
    fn backwards_clock_is_ignored() {
        let mut j = HostJitter::new(1_000);
        j.on_spin_step(5_000, 1_000);
        assert_eq!(j.report(1, 0, 0).spin_ns, 0);
    }
}

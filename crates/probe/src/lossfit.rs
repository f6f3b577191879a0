//! Is the packet loss Poisson? Exponential fit of the loss-interval distribution and a
//! Kolmogorov–Smirnov goodness-of-fit test, after seed 000 §4.2.
//!
//! Seed 000 argues that VLBI tolerates ~2 % loss only if losses are independent ("obeys normal
//! counting statistics"); then the intervals between lost packets follow a falling exponential.
//! Its Figure 6 plots the normalised cumulative distribution of intervals with a fitted
//! exponential and concludes "Poisson … for times up to around 1 msec", with an excess beyond.
//!
//! We do the same on the interval between successive lost packets, counted in packets: on a paced
//! stream independent per-packet loss (Bernoulli, probability `p`) gives a geometric interval,
//! the discrete form of the exponential, `F(k) = 1 − (1 − p)^k`. The MLE of `p` is `1 / mean`
//! (the same as the exponential's rate). Intervals are measured in packets rather than µs because
//! a lost packet has no arrival time; they convert to µs with the packet spacing.
//!
//! The test statistic `D` is the largest distance between the empirical and fitted CDFs. Because
//! the rate is estimated from the same data, the plain KS table is too lenient; we use Stephens'
//! (1974) modified statistic for the exponential with estimated mean, whose 5 % point is 1.094:
//! `D_crit = 1.094 / (√n + 0.26 + 0.5/√n) + 0.2/n`. On discrete data the test is conservative.
//! "Consistent up to X" is the longest interval below which the CDFs stay within `D_crit`.

use serde::{Deserialize, Serialize};

use histogram::Hist;

/// Fewer intervals than this and the verdict says the sample is too small.
pub const MIN_INTERVALS: u64 = 20;
/// Most CDF points kept for plotting.
pub const MAX_CDF_POINTS: usize = 512;

/// One point of the Figure 6-style plot.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    /// Interval between lost packets, packets (upper edge of a histogram bucket).
    pub interval_packets: u64,
    /// Fraction of intervals `<=` this value.
    pub empirical: f64,
    /// Fitted geometric/exponential CDF at this value.
    pub fitted: f64,
}

/// Result of the exponential fit and goodness-of-fit test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoissonFit {
    /// Number of intervals (lost packets − 1).
    pub intervals: u64,
    /// Mean interval between losses, packets.
    pub mean_interval_packets: f64,
    /// Fitted loss probability per packet (MLE, `1 / mean`).
    pub rate_per_packet: f64,
    /// Packet spacing used to convert to time, ns (nominal, else measured mean inter-arrival).
    pub spacing_ns: Option<f64>,
    /// Mean interval between losses, µs (`None` without a spacing).
    pub mean_interval_us: Option<f64>,
    /// Kolmogorov–Smirnov distance between empirical and fitted CDF.
    pub ks_statistic: f64,
    /// 5 % critical value of the statistic (Stephens, exponential with estimated mean).
    pub ks_critical_5pct: f64,
    /// `ks_statistic <= ks_critical_5pct` and enough intervals.
    pub passes_5pct: bool,
    /// Longest interval up to which the CDFs agree within the critical distance, packets.
    pub consistent_up_to_packets: Option<u64>,
    /// Same in µs.
    pub consistent_up_to_us: Option<f64>,
    /// Cumulative distributions for plotting.
    pub cdf: Vec<CdfPoint>,
    /// One-line human verdict, e.g. "consistent with Poisson up to 1200 µs (…)".
    pub verdict: String,
}

/// Fit a histogram of loss intervals (packets, values ≥ 1). `None` when it is empty.
pub fn fit_loss_intervals(intervals: &Hist, spacing_ns: Option<f64>) -> Option<PoissonFit> {
    let n = intervals.count();
    let mean = intervals.mean()?;
    if n == 0 || mean <= 0.0 {
        return None;
    }
    // Intervals are ≥ 1 by construction; clamp guards p against a degenerate histogram.
    let p = (1.0 / mean).min(1.0);
    let ln_q = (-p).ln_1p();
    let fitted = |k: u64| if p >= 1.0 { 1.0 } else { 1.0 - (k as f64 * ln_q).exp() };
    let nf = n as f64;
    let sq = nf.sqrt();
    let crit = 1.094 / (sq + 0.26 + 0.5 / sq) + 0.2 / nf;

    let mut d: f64 = 0.0;
    let mut cum = 0u64;
    let mut up_to: Option<u64> = None;
    let mut diverged = false;
    let mut cdf = Vec::new();
    for b in intervals.raw_buckets() {
        // Check just below the bucket (empirical CDF flat, fitted one has risen) and at its top.
        let below = b.lo.saturating_sub(1);
        let d_below = (cum as f64 / nf - fitted(below)).abs();
        cum += b.count;
        let emp = cum as f64 / nf;
        let f_hi = fitted(b.hi);
        let d_top = (emp - f_hi).abs();
        d = d.max(d_below).max(d_top);
        if !diverged {
            if d_below > crit {
                // Agreement last held at the previous bucket's top: keep `up_to`.
                diverged = true;
            } else if d_top > crit {
                diverged = true;
                up_to = (below > 0).then_some(below);
            } else {
                up_to = Some(b.hi);
            }
        }
        cdf.push(CdfPoint {
            interval_packets: b.hi,
            empirical: emp,
            fitted: f_hi,
        });
    }
    if cdf.len() > MAX_CDF_POINTS {
        let step = cdf.len().div_ceil(MAX_CDF_POINTS);
        let last = cdf.last().copied();
        cdf = cdf.into_iter().step_by(step).collect();
        if let (Some(l), Some(e)) = (last, cdf.last()) {
            if e.interval_packets != l.interval_packets {
                cdf.push(l);
            }
        }
    }
    let enough = n >= MIN_INTERVALS;
    let passes = enough && d <= crit;
    let to_us = |k: f64| spacing_ns.map(|s| k * s / 1000.0);
    let up_to_us = up_to.and_then(|k| to_us(k as f64));
    let stat = format!(
        "KS D={d:.3} {} {crit:.3} at 5 %, n={n}",
        if d <= crit { "<=" } else { ">" }
    );
    let horizon = |k: u64| match to_us(k as f64) {
        Some(us) => format!("{us:.0} µs"),
        None => format!("{k} packets"),
    };
    let verdict = if !enough {
        format!("too few loss intervals ({n} < {MIN_INTERVALS}) to test for Poisson statistics")
    } else if passes {
        format!(
            "consistent with Poisson up to {} ({stat})",
            horizon(intervals.max().unwrap_or(0))
        )
    } else if let Some(k) = up_to {
        format!(
            "consistent with Poisson up to {} only, excess beyond ({stat})",
            horizon(k)
        )
    } else {
        format!("not consistent with Poisson: losses are correlated/bursty ({stat})")
    };
    Some(PoissonFit {
        intervals: n,
        mean_interval_packets: mean,
        rate_per_packet: p,
        spacing_ns,
        mean_interval_us: to_us(mean),
        ks_statistic: d,
        ks_critical_5pct: crit,
        passes_5pct: passes,
        consistent_up_to_packets: up_to,
        consistent_up_to_us: up_to_us,
        cdf,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_gives_none() {
        assert!(fit_loss_intervals(&Hist::new(), None).is_none());
    }

    #[test]
    fn exact_geometric_quantiles_pass() {
        // Intervals placed at the geometric quantiles: as close to a perfect fit as data gets.
        let p: f64 = 0.01;
        let mut h = Hist::new();
        let n = 2000;
        for i in 0..n {
            let u = (i as f64 + 0.5) / n as f64;
            let k = ((1.0 - u).ln() / (1.0 - p).ln()).ceil().max(1.0) as u64;
            h.record(k);
        }
        let f = fit_loss_intervals(&h, Some(16_000.0)).expect("fit");
        assert!(f.passes_5pct, "{f:?}");
        assert!((f.rate_per_packet - p).abs() < 0.001);
        assert!(f.verdict.starts_with("consistent with Poisson up to"), "{}", f.verdict);
        assert!(f.verdict.contains("µs"));
    }

    #[test]
    fn excess_of_long_intervals_limits_the_horizon() {
        // Seed 000 Figure 6: exponential at short intervals, an excess of long ones.
        let p: f64 = 0.01;
        let mut h = Hist::new();
        for i in 0..2000 {
            let u = (i as f64 + 0.5) / 2000.0;
            h.record(((1.0 - u).ln() / (1.0 - p).ln()).ceil().max(1.0) as u64);
        }
        h.record_n(3000, 200);
        let f = fit_loss_intervals(&h, Some(12_000.0)).expect("fit");
        assert!(!f.passes_5pct);
        let k = f.consistent_up_to_packets.expect("agrees at short intervals");
        assert!(k > 1 && k < 3000, "{k}");
        assert!(f.verdict.contains(" only, excess beyond"), "{}", f.verdict);
    }

    #[test]
    fn bursty_loss_intervals_fail_the_poisson_fit() {
        let mut h = Hist::new();
        // Bursts of 10 losses (intervals of 1) every ~1000 packets.
        for _ in 0..100 {
            h.record_n(1, 9);
            h.record(1000);
        }
        let f = fit_loss_intervals(&h, None).expect("fit");
        assert!(!f.passes_5pct);
        assert_eq!(f.consistent_up_to_packets, None);
        assert!(f.verdict.starts_with("not consistent"), "{}", f.verdict);
    }

    #[test]
    fn few_intervals_are_inconclusive() {
        let mut h = Hist::new();
        h.record(5);
        h.record(7);
        let f = fit_loss_intervals(&h, None).expect("fit");
        assert!(!f.passes_5pct);
        assert!(f.verdict.starts_with("too few"));
    }
}

//! Bounded-memory histograms and their serialised form.
//!
//! Every distribution evlbi reports (inter-arrival time, departure gaps, one-way delay,
//! loss runs, loss intervals, reordering extents) is an HDR histogram: memory grows with the
//! logarithm of the largest value, not with the number of packets, which is what lets a
//! 1e9-packet trial run in a few megabytes. Three significant figures keep 16 ns resolution at the
//! 16 µs spacing of seed 004 §4.1 (the jitter histograms of its Figures 4 and 5).
//!
//! On the wire and on disk a histogram is a [`HistSummary`]: the headline numbers plus a sparse
//! list of non-empty [`Bucket`]s, which is what `evlbi report` plots.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant decimal digits kept by every histogram (relative resolution 1e-3).
const SIGFIG: u8 = 3;

/// Values above this are clamped (and counted in [`HistSummary::clamped`]). 2^50 ns is 13 days,
/// far beyond any trial, and keeps the auto-resizing histogram well inside its `i64::MAX / 2` limit.
pub const HIST_MAX: u64 = 1 << 50;

/// Default number of buckets in a serialised histogram; adjacent buckets are merged beyond it.
pub const DEFAULT_MAX_BUCKETS: usize = 512;

/// An unsigned-integer histogram with exact min/max/sum alongside the HDR buckets.
#[derive(Clone, Debug)]
pub struct Hist {
    inner: Option<Histogram<u64>>,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    clamped: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Self::new()
    }
}

impl Hist {
    /// An empty histogram.
    pub fn new() -> Self {
        // `Histogram::new(3)` only fails for sigfig > 5; falling back to "no buckets" keeps this
        // constructor infallible without an unwrap.
        Hist {
            inner: Histogram::new(SIGFIG).ok(),
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            clamped: 0,
        }
    }

    /// Record one value.
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Record `n` occurrences of `value` (used for whole runs of identical loss intervals).
    pub fn record_n(&mut self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        let v = if value > HIST_MAX {
            self.clamped += n;
            HIST_MAX
        } else {
            value
        };
        self.count += n;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v) * u128::from(n);
        if let Some(h) = self.inner.as_mut() {
            // Cannot fail: auto-resize is on and v <= HIST_MAX.
            let _ = h.record_n(v, n);
        }
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact smallest recorded value, if any.
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    /// Exact largest recorded value, if any.
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// Exact mean, if any value was recorded.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Value at quantile `q` in `[0, 1]` (HDR resolution), if any value was recorded.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let h = self.inner.as_ref()?;
        Some(h.value_at_quantile(q.clamp(0.0, 1.0)).clamp(self.min, self.max))
    }

    /// Non-empty buckets in increasing order: `(lowest, highest, count)`, bounds inclusive.
    pub fn raw_buckets(&self) -> Vec<Bucket> {
        let Some(h) = self.inner.as_ref() else {
            return Vec::new();
        };
        h.iter_recorded()
            .map(|it| {
                let hi = it.value_iterated_to();
                Bucket {
                    lo: h.lowest_equivalent(hi),
                    hi,
                    count: it.count_since_last_iteration(),
                }
            })
            .collect()
    }

    /// Add every value recorded in `other` (e.g. the departure gaps of several sending sockets
    /// of one station); exact for count, min, max and mean, bucket resolution for the rest.
    pub fn merge(&mut self, other: &Hist) {
        if other.count == 0 {
            return;
        }
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.clamped += other.clamped;
        if let (Some(h), Some(o)) = (self.inner.as_mut(), other.inner.as_ref()) {
            // Cannot fail: auto-resize is on and both hold values <= HIST_MAX.
            let _ = h.add(o);
        }
    }

    /// Serialisable summary with at most `max_buckets` buckets.
    pub fn summary(&self, max_buckets: usize) -> HistSummary {
        let stdev = self.inner.as_ref().filter(|_| self.count > 0).map(|h| h.stdev());
        HistSummary {
            count: self.count,
            min: self.min(),
            max: self.max(),
            mean: self.mean(),
            stdev,
            p1: self.quantile(0.01),
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            clamped: self.clamped,
            buckets: merge_buckets(self.raw_buckets(), max_buckets),
        }
    }
}

/// One histogram bucket: `count` values fell in `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// Lowest value of the bucket (inclusive).
    pub lo: u64,
    /// Highest value of the bucket (inclusive).
    pub hi: u64,
    /// Number of values recorded in the bucket.
    pub count: u64,
}

/// Serialised histogram: headline numbers plus non-empty buckets for plotting.
///
/// Units are those of the field holding the summary (ns for times, packets for runs/intervals).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HistSummary {
    /// Number of values recorded.
    pub count: u64,
    /// Exact smallest value (`None` when empty).
    pub min: Option<u64>,
    /// Exact largest value (`None` when empty).
    pub max: Option<u64>,
    /// Exact arithmetic mean (`None` when empty).
    pub mean: Option<f64>,
    /// Standard deviation at bucket resolution (`None` when empty).
    pub stdev: Option<f64>,
    /// 1st percentile (the short end: a sender catching up, a burst).
    #[serde(default)]
    pub p1: Option<u64>,
    /// Median, at bucket resolution (0.1 %).
    pub p50: Option<u64>,
    /// 90th percentile.
    pub p90: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
    /// 99.9th percentile.
    pub p999: Option<u64>,
    /// Values above [`HIST_MAX`] that were clamped to it.
    pub clamped: u64,
    /// Non-empty buckets in increasing order; adjacent ones merged to stay under the bucket limit.
    pub buckets: Vec<Bucket>,
}

/// Merge adjacent buckets so that at most `max` remain (never fewer than one per group).
fn merge_buckets(buckets: Vec<Bucket>, max: usize) -> Vec<Bucket> {
    let max = max.max(1);
    if buckets.len() <= max {
        return buckets;
    }
    let group = buckets.len().div_ceil(max);
    buckets
        .chunks(group)
        .filter_map(|c| {
            let first = c.first()?;
            let last = c.last()?;
            Some(Bucket {
                lo: first.lo,
                hi: last.hi,
                count: c.iter().map(|b| b.count).sum(),
            })
        })
        .collect()
}

/// A histogram of signed values (one-way delays between unsynchronised clocks can be negative).
///
/// Values are stored relative to the first one recorded, split into a non-negative and a negative
/// half, so the minimum never needs to be known in advance (seed 004 §3 removes it afterwards).
#[derive(Clone, Debug, Default)]
pub struct SignedHist {
    base: Option<i64>,
    pos: Hist,
    neg: Hist,
    sum_rel: i128,
}

impl SignedHist {
    /// Record one signed value.
    pub fn record(&mut self, v: i64) {
        let base = *self.base.get_or_insert(v);
        let d = i128::from(v) - i128::from(base);
        self.sum_rel += d;
        if d >= 0 {
            self.pos.record(u64::try_from(d).unwrap_or(u64::MAX));
        } else {
            self.neg.record(u64::try_from(-d).unwrap_or(u64::MAX));
        }
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.pos.count() + self.neg.count()
    }

    /// Exact minimum.
    pub fn min(&self) -> Option<i64> {
        let base = self.base?;
        Some(match self.neg.max() {
            Some(m) => base.saturating_sub_unsigned(m),
            None => base.saturating_add_unsigned(self.pos.min()?),
        })
    }

    /// Exact maximum.
    pub fn max(&self) -> Option<i64> {
        let base = self.base?;
        Some(match self.pos.max() {
            Some(m) => base.saturating_add_unsigned(m),
            None => base.saturating_sub_unsigned(self.neg.min()?),
        })
    }

    /// Exact mean.
    pub fn mean(&self) -> Option<f64> {
        let n = self.count();
        let base = self.base?;
        (n > 0).then(|| base as f64 + self.sum_rel as f64 / n as f64)
    }

    /// Value at quantile `q` (bucket resolution).
    pub fn quantile(&self, q: f64) -> Option<i64> {
        let base = self.base?;
        let n = self.count();
        if n == 0 {
            return None;
        }
        let nneg = self.neg.count();
        // 1-based rank of the wanted element in ascending signed order.
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        if rank <= nneg {
            // Negative half in ascending signed order is descending magnitude.
            let qm = (nneg - rank + 1) as f64 / nneg as f64;
            Some(base.saturating_sub_unsigned(self.neg.quantile(qm)?))
        } else {
            let qp = (rank - nneg) as f64 / self.pos.count() as f64;
            Some(base.saturating_add_unsigned(self.pos.quantile(qp)?))
        }
    }

    /// Buckets of `value - min`, ascending, at most `max_buckets`.
    pub fn buckets_above_min(&self, max_buckets: usize) -> Vec<Bucket> {
        let (Some(base), Some(min)) = (self.base, self.min()) else {
            return Vec::new();
        };
        let off = i128::from(base) - i128::from(min);
        let to_u = |x: i128| u64::try_from(x.max(0)).unwrap_or(u64::MAX);
        let mut out: Vec<Bucket> = self
            .neg
            .raw_buckets()
            .into_iter()
            .rev()
            .map(|b| Bucket {
                lo: to_u(off - i128::from(b.hi)),
                hi: to_u(off - i128::from(b.lo)),
                count: b.count,
            })
            .collect();
        out.extend(self.pos.raw_buckets().into_iter().map(|b| Bucket {
            lo: to_u(off + i128::from(b.lo)),
            hi: to_u(off + i128::from(b.hi)),
            count: b.count,
        }));
        merge_buckets(out, max_buckets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_hold_both_sets_of_values() {
        let (mut a, mut b) = (Hist::new(), Hist::new());
        for v in [10, 20, 30] {
            a.record(v);
        }
        b.record(1000);
        a.merge(&b);
        a.merge(&Hist::new());
        assert_eq!((a.count(), a.min(), a.max()), (4, Some(10), Some(1000)));
        assert_eq!(a.mean(), Some(265.0));
        assert_eq!(a.quantile(1.0), Some(1000));
    }

    #[test]
    fn empty_summary_has_no_numbers() {
        let s = Hist::new().summary(10);
        assert_eq!(s.count, 0);
        assert_eq!(s.min, None);
        assert_eq!(s.p99, None);
        assert!(s.buckets.is_empty());
    }

    #[test]
    fn exact_min_max_mean_and_buckets() {
        let mut h = Hist::new();
        for v in [16_000, 16_010, 16_020, 51_000] {
            h.record(v);
        }
        let s = h.summary(100);
        assert_eq!((s.min, s.max, s.count), (Some(16_000), Some(51_000), 4));
        assert_eq!(s.mean, Some(24_757.5));
        assert_eq!(s.buckets.iter().map(|b| b.count).sum::<u64>(), 4);
        assert!(s.buckets.windows(2).all(|w| w[0].hi < w[1].lo));
    }

    #[test]
    fn clamping_is_counted() {
        let mut h = Hist::new();
        h.record(u64::MAX);
        assert_eq!(h.max(), Some(HIST_MAX));
        assert_eq!(h.summary(1).clamped, 1);
    }

    #[test]
    fn merge_respects_limit_and_total() {
        let mut h = Hist::new();
        for v in 0..5000 {
            h.record(v);
        }
        let s = h.summary(7);
        assert!(s.buckets.len() <= 7);
        assert_eq!(s.buckets.iter().map(|b| b.count).sum::<u64>(), 5000);
    }

    #[test]
    fn signed_hist_handles_negative_values() {
        let mut h = SignedHist::default();
        for v in [100, -50, 20, -50, 300] {
            h.record(v);
        }
        assert_eq!(h.min(), Some(-50));
        assert_eq!(h.max(), Some(300));
        assert_eq!(h.quantile(0.0), Some(-50));
        assert_eq!(h.quantile(0.5), Some(20));
        assert_eq!(h.quantile(1.0), Some(300));
        assert_eq!(h.mean(), Some(64.0));
        let b = h.buckets_above_min(100);
        assert_eq!(b.first().map(|b| b.lo), Some(0));
        assert_eq!(b.last().map(|b| b.hi), Some(350));
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 5);
    }
}

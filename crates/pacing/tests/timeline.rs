//! The pacer's promises over arbitrary rates and wake-up times: no packet is released before its
//! deadline, the timeline does not drift, and a backlog leaves no faster than the catch-up rule.

use std::time::{Duration, Instant};

use pacing::{CatchUp, Pacer, Spacing};
use proptest::prelude::*;

proptest! {
    /// Whatever the wake-ups, `batch_due` releases only packets whose deadline passed, and on
    /// time (no slips) the n-th release is exactly `n · spacing` after the start.
    #[test]
    fn releases_never_precede_deadlines(
        bytes in 64u64..9000,
        mbps in 1u64..40_000,
        wakes in proptest::collection::vec(0u64..200_000, 1..200),
    ) {
        let t0 = Instant::now();
        let spacing = Spacing::from_rate(bytes, mbps * 1_000_000);
        let mut p = Pacer::new(t0, spacing).with_max_lag(Duration::from_secs(3600));
        let mut now = t0;
        for w in wakes {
            now += Duration::from_nanos(w);
            let n = p.batch_due(now, 64);
            for k in 0..n as u64 {
                prop_assert!(p.deadline(p.sent() + k) <= now);
            }
            if n < 64 {
                prop_assert!(p.deadline(p.sent() + n as u64) > now, "a due packet was held back");
            }
            p.on_sent_batch(now, n);
        }
        prop_assert_eq!(p.slips(), 0);
        let sent = p.sent();
        prop_assert_eq!(p.deadline(sent), t0 + spacing.offset(sent));
    }

    /// n departures at the catch-up rate take n · spacing / factor, and more departures never
    /// take less time.
    #[test]
    fn catch_up_span_is_monotonic(spacing_ns in 1u64..10_000_000, factor in 1.0f64..16.0, n in 1u64..100_000) {
        let rule = CatchUp::new(Duration::from_nanos(spacing_ns), factor);
        let span = rule.span(n).as_nanos() as f64;
        let exact = (spacing_ns * n) as f64 / factor;
        prop_assert!((span - exact).abs() <= 1.0 + exact * 1e-12, "{span} vs {exact}");
        prop_assert!(rule.span(n + 1) >= rule.span(n));
        prop_assert!(rule.spacing() <= Duration::from_nanos(spacing_ns));
    }
}

//! Property tests over random configurations and arrival sequences.

use std::time::{Duration, Instant};

use linkemu::{GilbertElliott, Link, LinkConfig, LinkStats, LossModel};
use proptest::prelude::*;

fn loss_model() -> impl Strategy<Value = LossModel> {
    prop_oneof![
        Just(LossModel::None),
        (0.0..=1.0f64).prop_map(|p| LossModel::Bernoulli { p }),
        (0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64).prop_map(|(a, b, c, d)| {
            LossModel::GilbertElliott(GilbertElliott {
                p_good_to_bad: a,
                p_bad_to_good: b,
                loss_in_good: c,
                loss_in_bad: d,
            })
        }),
    ]
}

fn config() -> impl Strategy<Value = LinkConfig> {
    (
        proptest::option::of(1_000u64..20_000_000_000),
        0u64..200_000,
        0u64..50_000,
        0u64..10_000,
        any::<bool>(),
        loss_model(),
        0.0..=0.5f64,
    )
        .prop_map(
            |(rate_bps, buffer_bytes, delay_us, jitter_us, reorder, loss, duplicate)| LinkConfig {
                rate_bps,
                buffer_bytes,
                delay: Duration::from_micros(delay_us),
                jitter: Duration::from_micros(jitter_us),
                reorder,
                loss,
                duplicate,
            },
        )
}

/// Offered = delivered + dropped_loss + dropped_queue + in_flight − duplicated,
/// for packets and for bytes.
fn check_accounting(link: &Link<(usize, Instant)>) -> Result<(), TestCaseError> {
    let s: &LinkStats = link.stats();
    prop_assert_eq!(
        s.offered.packets + s.duplicated.packets,
        s.delivered.packets + s.dropped_loss.packets + s.dropped_queue.packets + link.in_flight() as u64
    );
    prop_assert_eq!(
        s.offered.bytes + s.duplicated.bytes,
        s.delivered.bytes + s.dropped_loss.bytes + s.dropped_queue.bytes + link.in_flight_bytes()
    );
    prop_assert!(link.config().rate_bps.is_none() || s.max_queue_bytes <= link.config().buffer_bytes);
    Ok(())
}

/// Polls everything due at `now`, checking each packet against the earliest
/// time physics allows: pushed + serialisation + delay.
fn poll_all(
    link: &mut Link<(usize, Instant)>,
    now: Instant,
    lens: &[usize],
    delivered: &mut Vec<usize>,
) -> Result<(), TestCaseError> {
    loop {
        let due = link.next_release();
        match link.poll(now) {
            Some((i, pushed)) => {
                prop_assert!(
                    due.is_some_and(|d| d <= now),
                    "poll returned a packet before next_release"
                );
                let cfg = link.config();
                let tx = cfg.rate_bps.map_or(Duration::ZERO, |r| {
                    Duration::from_nanos((lens[i] as u64 * 8 * 1_000_000_000) / r)
                });
                prop_assert!(now >= pushed + cfg.delay + tx, "packet {} delivered early", i);
                delivered.push(i);
            }
            None => {
                prop_assert!(
                    !matches!(due, Some(d) if d <= now),
                    "poll returned nothing with a packet due"
                );
                return Ok(());
            }
        }
    }
}

proptest! {
    #[test]
    fn accounting_and_release_times(
        cfg in config(),
        seed in any::<u64>(),
        ops in proptest::collection::vec((0u64..3_000, 1usize..9_000, any::<bool>()), 1..200),
    ) {
        let reorder = cfg.reorder;
        let mut link = Link::new(cfg, seed).unwrap();
        let base = Instant::now();
        let mut now = base;
        let mut lens = Vec::new();
        let mut delivered = Vec::new();
        for (gap_us, len, poll_first) in ops {
            now += Duration::from_micros(gap_us);
            if poll_first {
                poll_all(&mut link, now, &lens, &mut delivered)?;
            }
            let i = lens.len();
            lens.push(len);
            link.push(now, (i, now), len);
            check_accounting(&link)?;
        }
        while let Some(r) = link.next_release() {
            poll_all(&mut link, r, &lens, &mut delivered)?;
            check_accounting(&link)?;
        }
        prop_assert_eq!(link.in_flight(), 0);
        if !reorder {
            prop_assert!(delivered.windows(2).all(|w| w[0] <= w[1]), "reordered: {:?}", delivered);
        }
    }
}

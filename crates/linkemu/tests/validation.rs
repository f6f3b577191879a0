//! Acceptance tests: the link does what its configuration says, measured
//! the way an experimenter would measure a real path.

mod common;

use std::time::{Duration, Instant};

use common::{drive, mean, paced, quantile, Arrival};
use linkemu::{Admission, GilbertElliott, Link, LinkConfig, LossModel};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MS: Duration = Duration::from_millis(1);

/// One-way delays of delivered packets whose payload is their index in
/// `paced(base, _, spacing, _)`.
fn one_way_delays(base: Instant, spacing: Duration, deliveries: &[(Instant, u64)]) -> Vec<Duration> {
    let mut d: Vec<Duration> = deliveries
        .iter()
        .map(|(at, i)| *at - (base + spacing * *i as u32))
        .collect();
    d.sort();
    d
}

fn assert_close(what: &str, got: Duration, want: Duration, tol: Duration) {
    let err = got.abs_diff(want);
    assert!(err <= tol, "{what}: got {got:?}, want {want:?} ± {tol:?}");
}

#[test]
fn delay_without_jitter_is_exact() {
    let cfg = LinkConfig {
        delay: 100 * MS,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    let base = Instant::now();
    let trace = drive(&mut link, paced(base, 10_000, MS, 1000));
    let d = one_way_delays(base, MS, &trace.deliveries);
    assert_eq!(d.len(), 10_000);
    assert_close("mean", mean(&d), 100 * MS, MS);
    assert_close("p99", quantile(&d, 0.99), 100 * MS, MS);
    assert_eq!(d[0], 100 * MS);
    assert_eq!(d[d.len() - 1], 100 * MS);
}

/// Jitter is uniform on [0, J]: mean delay + J/2, p99 delay + 0.99·J.
fn check_jitter(reorder: bool, spacing: Duration, n: u64) {
    let cfg = LinkConfig {
        delay: 100 * MS,
        jitter: 10 * MS,
        reorder,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 7).unwrap();
    let base = Instant::now();
    let trace = drive(&mut link, paced(base, n, spacing, 1000));
    let d = one_way_delays(base, spacing, &trace.deliveries);
    assert_eq!(d.len() as u64, n);
    assert_close("mean", mean(&d), 105 * MS, MS);
    assert_close("p99", quantile(&d, 0.99), Duration::from_micros(109_900), MS);
    assert!(d[0] >= 100 * MS && d[d.len() - 1] <= 110 * MS);
}

#[test]
fn delay_with_jitter_matches_uniform_distribution() {
    check_jitter(true, Duration::from_micros(500), 20_000);
}

#[test]
fn delay_with_jitter_in_order_when_packets_are_sparse() {
    // Packets 20 ms apart cannot overtake each other with 10 ms of jitter,
    // so forcing order must not distort the distribution.
    check_jitter(false, 20 * MS, 5_000);
}

/// Pushes `n` packets through a loss-only link; returns which were lost.
fn loss_pattern(loss: LossModel, n: usize, seed: u64) -> Vec<bool> {
    let cfg = LinkConfig {
        loss,
        ..LinkConfig::default()
    };
    let mut link: Link<()> = Link::new(cfg, seed).unwrap();
    let now = Instant::now();
    let lost: Vec<bool> = (0..n)
        .map(|_| {
            let a = link.push(now, (), 100);
            while link.poll(now).is_some() {}
            a == Admission::DroppedLoss
        })
        .collect();
    assert_eq!(
        link.stats().dropped_loss.packets as usize,
        lost.iter().filter(|l| **l).count()
    );
    lost
}

#[test]
fn bernoulli_loss_within_four_sigma() {
    for (p, n) in [(0.0001, 1_000_000), (0.01, 200_000), (0.1, 200_000)] {
        let lost = loss_pattern(LossModel::Bernoulli { p }, n, 11)
            .iter()
            .filter(|l| **l)
            .count();
        let expect = p * n as f64;
        // Binomial standard deviation sqrt(n·p·(1−p)).
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (lost as f64 - expect).abs() <= 4.0 * sigma,
            "p={p}: lost {lost} of {n}, expected {expect} ± {}",
            4.0 * sigma
        );
    }
}

/// Lengths of the runs of consecutive losses.
fn burst_lengths(lost: &[bool]) -> Vec<usize> {
    let mut runs = Vec::new();
    let mut cur = 0;
    for &l in lost {
        if l {
            cur += 1;
        } else if cur > 0 {
            runs.push(cur);
            cur = 0;
        }
    }
    if cur > 0 {
        runs.push(cur);
    }
    runs
}

#[test]
fn gilbert_elliott_mean_loss_and_geometric_bursts() {
    for (mean_loss, burst) in [(0.01, 4.0), (0.05, 1.5)] {
        let ge = GilbertElliott::from_mean_loss_and_burst(mean_loss, burst).unwrap();
        let n = 1_000_000;
        let lost = loss_pattern(LossModel::GilbertElliott(ge), n, 3);

        // Mean loss. Successive states are correlated, so the variance of the
        // loss fraction of a two-state Markov chain is inflated over the
        // binomial one by (1 + λ)/(1 − λ), λ = 1 − p_gb − p_bg its second
        // eigenvalue (asymptotic variance of a Markov chain sample mean).
        let k = lost.iter().filter(|l| **l).count() as f64;
        let lambda = 1.0 - ge.p_good_to_bad - ge.p_bad_to_good;
        let sigma = (n as f64 * mean_loss * (1.0 - mean_loss) * (1.0 + lambda) / (1.0 - lambda)).sqrt();
        assert!(
            (k - mean_loss * n as f64).abs() <= 4.0 * sigma,
            "loss {mean_loss}: lost {k} of {n}, σ = {sigma}"
        );

        // Bursts are geometric, P(len = k) = (1 − q)^(k−1)·q with q = 1/burst:
        // mean = 1/q, variance (1 − q)/q², and P(len = 1) = q.
        let runs = burst_lengths(&lost);
        let m = runs.len() as f64;
        let q = 1.0 / burst;
        let mean_len = runs.iter().sum::<usize>() as f64 / m;
        let sigma_mean = ((1.0 - q) / (q * q) / m).sqrt();
        assert!(
            (mean_len - burst).abs() <= 4.0 * sigma_mean,
            "mean burst {mean_len}, want {burst} ± {}",
            4.0 * sigma_mean
        );
        let ones = runs.iter().filter(|r| **r == 1).count() as f64 / m;
        let sigma_ones = (q * (1.0 - q) / m).sqrt();
        assert!(
            (ones - q).abs() <= 4.0 * sigma_ones,
            "fraction of 1-packet bursts {ones}, want {q} ± {}",
            4.0 * sigma_ones
        );
    }
}

/// Offers packets of random size (64–9000 B) at `offered_bps` for 2 s to a
/// 100 Mb/s bottleneck; checks every admission against the occupancy the
/// link reported just before it.
fn run_bottleneck(offered_bps: f64) -> (Link<u64>, Vec<(Instant, u64)>, Vec<usize>) {
    const RATE: u64 = 100_000_000;
    const BUFFER: u64 = 64_000;
    let cfg = LinkConfig {
        rate_bps: Some(RATE),
        buffer_bytes: BUFFER,
        delay: 10 * MS,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 5).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
    let base = Instant::now();
    let mut t = base;
    let mut arrivals = Vec::new();
    let mut lens = Vec::new();
    while t < base + Duration::from_secs(2) {
        let len = rng.gen_range(64..=9000usize);
        arrivals.push(Arrival {
            at: t,
            packet: lens.len() as u64,
            len,
        });
        lens.push(len);
        t += Duration::from_secs_f64(len as f64 * 8.0 / offered_bps);
    }
    let mut deliveries = Vec::new();
    for a in arrivals {
        while let Some(r) = link.next_release().filter(|r| *r <= a.at) {
            deliveries.push((r, link.poll(r).unwrap()));
        }
        let occupancy = link.queue_occupancy(a.at);
        let room = occupancy + a.len as u64 <= BUFFER;
        match link.push(a.at, a.packet, a.len) {
            Admission::DroppedQueue => assert!(!room, "dropped with {occupancy} B queued"),
            Admission::Accepted => assert!(room, "accepted with {occupancy} B queued"),
            Admission::DroppedLoss => unreachable!("no loss model configured"),
        }
        assert!(link.queue_occupancy(a.at) <= BUFFER);
    }
    while let Some(r) = link.next_release() {
        deliveries.push((r, link.poll(r).unwrap()));
    }
    (link, deliveries, lens)
}

#[test]
fn bottleneck_overload_delivers_the_configured_rate() {
    let (link, deliveries, lens) = run_bottleneck(150e6);
    let stats = link.stats();
    assert!(stats.dropped_queue.packets > 100, "{stats:?}");
    assert!(stats.max_queue_bytes <= 64_000);
    // Rate over the delivered stream: bytes after the first packet divided by
    // the time from the first delivery to the last.
    let first = deliveries.first().unwrap().0;
    let last = deliveries.last().unwrap().0;
    let bits: usize = deliveries[1..].iter().map(|(_, i)| lens[*i as usize] * 8).sum();
    let rate = bits as f64 / (last - first).as_secs_f64();
    assert!((rate / 100e6 - 1.0).abs() < 0.02, "delivered {rate} b/s");
    // A standing queue builds up: late packets wait most of the buffer.
    assert!(
        stats.queue_delay_max() > Duration::from_millis(4),
        "{:?}",
        stats.queue_delay_max()
    );
    assert!(stats.queue_delay_p99() <= Duration::from_micros(5_121));
}

#[test]
fn bottleneck_below_rate_never_drops() {
    let (link, deliveries, lens) = run_bottleneck(90e6);
    assert_eq!(link.stats().dropped_queue.packets, 0);
    assert_eq!(deliveries.len(), lens.len());
}

#[test]
fn wire_loss_happens_after_the_bottleneck() {
    // Lost packets still use the bottleneck: with half of them lost on the
    // wire, a saturated 10 Mb/s link delivers about 5 Mb/s.
    let cfg = LinkConfig {
        rate_bps: Some(10_000_000),
        buffer_bytes: 1_000_000_000,
        loss: LossModel::Bernoulli { p: 0.5 },
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 2).unwrap();
    let base = Instant::now();
    let trace = drive(&mut link, paced(base, 10_000, Duration::ZERO, 1250));
    let last = trace.deliveries.last().unwrap().0;
    // All 10 000 packets are serialised (10 s of work); about 5 000 arrive.
    assert!(last - base > Duration::from_millis(9_900));
    let bits = trace.deliveries.len() as f64 * 10_000.0;
    let rate = bits / (last - base).as_secs_f64();
    assert!((rate / 5e6 - 1.0).abs() < 0.05, "{rate}");
}

fn out_of_order(deliveries: &[(Instant, u64)]) -> usize {
    let mut max_seen = None;
    let mut late = 0;
    for (_, i) in deliveries {
        if max_seen.is_some_and(|m| *i < m) {
            late += 1;
        }
        max_seen = max_seen.max(Some(*i));
    }
    late
}

#[test]
fn jitter_reorders_only_when_allowed() {
    let base = Instant::now();
    for reorder in [true, false] {
        let cfg = LinkConfig {
            delay: 20 * MS,
            jitter: 10 * MS,
            reorder,
            ..LinkConfig::default()
        };
        let mut link = Link::new(cfg, 4).unwrap();
        let trace = drive(&mut link, paced(base, 5_000, MS, 1000));
        let late = out_of_order(&trace.deliveries);
        assert!(trace.deliveries.windows(2).all(|w| w[0].0 <= w[1].0));
        if reorder {
            assert!(late > 1000, "only {late} reordered");
        } else {
            assert_eq!(late, 0);
        }
    }
}

/// Delivery sequence (offset from the start, packet index) of a link with
/// every feature on: bottleneck with congestion drops, bursty loss, jitter
/// with reordering, duplication.
fn everything_on(seed: u64) -> Vec<(Duration, u64)> {
    let cfg = LinkConfig {
        rate_bps: Some(50_000_000),
        buffer_bytes: 30_000,
        delay: 30 * MS,
        jitter: 5 * MS,
        reorder: true,
        loss: LossModel::GilbertElliott(GilbertElliott::from_mean_loss_and_burst(0.02, 3.0).unwrap()),
        duplicate: 0.01,
    };
    let mut link = Link::new(cfg, seed).unwrap();
    // Offered 60 Mb/s into 50 Mb/s: some congestion drops as well.
    let base = Instant::now();
    let trace = drive(&mut link, paced(base, 20_000, Duration::from_micros(200), 1500));
    assert!(link.stats().dropped_queue.packets > 0);
    assert!(link.stats().dropped_loss.packets > 0);
    assert!(link.stats().duplicated.packets > 0);
    trace.deliveries.into_iter().map(|(t, i)| (t - base, i)).collect()
}

#[test]
fn same_seed_same_run_different_seed_different_run() {
    let a = everything_on(1);
    let b = everything_on(1);
    let c = everything_on(2);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn duplicates_are_counted_and_delivered_twice() {
    let cfg = LinkConfig {
        duplicate: 0.05,
        jitter: MS,
        reorder: true,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 8).unwrap();
    let n = 100_000u64;
    let trace = drive(&mut link, paced(Instant::now(), n, Duration::from_micros(10), 100));
    let dups = link.stats().duplicated.packets;
    let sigma = (n as f64 * 0.05 * 0.95).sqrt();
    assert!((dups as f64 - 5_000.0).abs() <= 4.0 * sigma, "{dups}");
    assert_eq!(trace.deliveries.len() as u64, n + dups);
    let mut seen = vec![0u8; n as usize];
    for (_, i) in &trace.deliveries {
        seen[*i as usize] += 1;
    }
    assert_eq!(seen.iter().filter(|c| **c == 2).count() as u64, dups);
    assert!(seen.iter().all(|c| *c == 1 || *c == 2));
}

#[test]
fn loss_pattern_does_not_depend_on_jitter() {
    // Separate RNG streams: turning jitter on must not change who is lost.
    let run = |jitter| {
        let cfg = LinkConfig {
            jitter,
            loss: LossModel::Bernoulli { p: 0.1 },
            ..LinkConfig::default()
        };
        let mut link = Link::new(cfg, 21).unwrap();
        drive(&mut link, paced(Instant::now(), 2_000, MS, 100)).admissions
    };
    assert_eq!(run(Duration::ZERO), run(5 * MS));
}

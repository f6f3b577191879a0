//! Scenario tests: the failure modes that motivated this crate and the statistics of seed 000 §4.2.

use probe::recv_stats::{ReceiverReport, RecvConfig, RecvStats};
use probe::results::TestParams;
use probe::wire::{Packet, Repr};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TEST_ID: u64 = 99;
const SIZE: usize = 1472;
const SPACING: u64 = 12_000;

fn pkt(seq: u64, send_ns: u64) -> Vec<u8> {
    // Patch a template rather than re-fill the padding: keeps the debug-build tests fast.
    thread_local! {
        static TEMPLATE: Vec<u8> =
            Repr { flags: 0, test_id: TEST_ID, seq: 0, send_ns: 0, size: SIZE }.to_vec().expect("valid size");
    }
    let mut b = TEMPLATE.with(Clone::clone);
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.set_seq(seq);
    p.set_send_ns(send_ns);
    b
}

/// Send `n` paced packets, dropping those for which `drop(seq)` is true; 30 µs path delay.
fn run(n: u64, cfg: RecvConfig, mut drop: impl FnMut(u64) -> bool) -> ReceiverReport {
    let mut rx = RecvStats::new(cfg);
    for seq in 0..n {
        let t = seq * SPACING;
        if !drop(seq) {
            rx.on_datagram(t + 30_000, &pkt(seq, t), true);
        }
    }
    rx.finish(Some(n), n * SPACING + 1_000_000)
}

fn cfg() -> RecvConfig {
    RecvConfig {
        size: Some(SIZE),
        spacing_ns: Some(SPACING),
        ..RecvConfig::new(TEST_ID)
    }
}

#[test]
fn forged_huge_sequence_number_does_not_blow_up_loss() {
    let mut rx = RecvStats::new(cfg());
    for seq in 0..1000u64 {
        rx.on_datagram(seq * SPACING, &pkt(seq, seq * SPACING), true);
        if seq == 500 {
            rx.on_datagram(seq * SPACING, &pkt(1 << 63, 0), true);
            rx.on_datagram(seq * SPACING, &pkt(u64::MAX, 0), true);
        }
    }
    let r = rx.finish(Some(1000), 1000 * SPACING);
    assert_eq!(r.out_of_window, 2);
    assert_eq!(r.lost_packets, 0);
    assert_eq!(r.expected_packets, 1000);
    assert_eq!(r.highest_seq_received, Some(999));

    // Also as the very first packet, and with the count known from hello.
    let hello = TestParams {
        test_id: TEST_ID,
        size: SIZE as u32,
        count: 10,
        spacing_ns: SPACING,
    };
    for c in [cfg(), RecvConfig::from_params(&hello)] {
        let mut rx = RecvStats::new(c);
        rx.on_datagram(0, &pkt(1 << 63, 0), true);
        for seq in 0..10 {
            rx.on_datagram(seq, &pkt(seq, 0), true);
        }
        let r = rx.finish(Some(10), 100);
        assert_eq!((r.out_of_window, r.lost_packets, r.unique_packets), (1, 0, 10));
    }
}

#[test]
fn jive5ab_style_27_byte_stray_is_harmless() {
    let mut rx = RecvStats::new(cfg());
    rx.on_datagram(0, &[0xffu8; 27], true);
    for seq in 0..100u64 {
        rx.on_datagram(seq * SPACING, &pkt(seq, 0), true);
    }
    let r = rx.finish(Some(100), 0);
    assert_eq!((r.strays.too_short, r.lost_packets, r.unique_packets), (1, 0, 100));
}

#[test]
fn tail_loss_is_counted_with_done() {
    let r = run(1000, cfg(), |s| s >= 990);
    assert_eq!(r.highest_seq_received, Some(989));
    assert_eq!(r.lost_packets, 10);
    assert_eq!(r.loss_runs.max, Some(10));
}

#[test]
fn rates_delay_and_jitter_of_a_clean_path() {
    let r = run(10_000, cfg(), |_| false);
    let user = r.user_rate_bps.expect("rate");
    assert!((user - SIZE as f64 * 8e9 / SPACING as f64).abs() < 1.0, "{user}");
    let wire = r.wire_rate_bps.expect("rate");
    assert!((wire - (SIZE + 66) as f64 * 8e9 / SPACING as f64).abs() < 1.0, "{wire}");
    assert_eq!(r.inter_arrival_ns.min, Some(SPACING));
    assert_eq!(r.inter_arrival_ns.max, Some(SPACING));
    assert_eq!(r.one_way_delay.min_raw_ns, Some(30_000));
    assert_eq!(r.one_way_delay.max_ns, Some(0));
    assert_eq!(r.one_way_delay.records.len(), probe::recv_stats::DEFAULT_KEEP_RECORDS);
    assert_eq!(r.one_way_delay.drift_ppm, Some(0.0));
    assert!(r.poisson.is_none());
}

#[test]
fn clock_drift_is_estimated() {
    // Receiver clock runs 10 ppm fast: delay grows by 10 ns per ms.
    let mut rx = RecvStats::new(cfg());
    for seq in 0..10_000u64 {
        let t = seq * SPACING;
        rx.on_datagram(t + t / 100_000 + 5_000, &pkt(seq, t), true);
    }
    let r = rx.finish(None, 0);
    let d = r.one_way_delay.drift_ppm.expect("drift");
    assert!((d - 10.0).abs() < 0.1, "{d}");
    assert_eq!(r.one_way_delay.max_ns, Some(1_199));
}

#[test]
fn bernoulli_loss_is_consistent_with_poisson() {
    let mut rng = StdRng::seed_from_u64(4);
    let r = run(300_000, cfg(), |_| rng.gen_bool(0.01));
    let fit = r.poisson.expect("losses present");
    assert!(fit.intervals > 2500, "{}", fit.intervals);
    assert!((fit.rate_per_packet - 0.01).abs() < 0.001, "{}", fit.rate_per_packet);
    assert!(fit.passes_5pct, "{fit:?}");
    assert!(
        fit.verdict.starts_with("consistent with Poisson up to"),
        "{}",
        fit.verdict
    );
    assert!(fit.verdict.contains("µs"), "{}", fit.verdict);
    // Mean interval ~ 100 packets × 12 µs.
    let us = fit.mean_interval_us.expect("spacing known");
    assert!((us - 1200.0).abs() < 120.0, "{us}");
}

#[test]
fn gilbert_bursts_fail_the_poisson_test() {
    // Gilbert–Elliott: rare entry to a bad state that loses every packet and lasts ~4 packets.
    let mut rng = StdRng::seed_from_u64(5);
    let mut bad = false;
    let r = run(300_000, cfg(), |_| {
        bad = if bad { !rng.gen_bool(0.25) } else { rng.gen_bool(0.003) };
        bad
    });
    let fit = r.poisson.expect("losses present");
    assert!(fit.intervals > 1000);
    assert!(!fit.passes_5pct, "{fit:?}");
    assert!(
        fit.verdict.contains("not consistent") || fit.verdict.contains("only"),
        "{}",
        fit.verdict
    );
    assert!(r.loss_runs.mean.expect("runs") > 3.0);
}

#[test]
fn long_trial_runs_in_bounded_memory_and_time() {
    // 1e6 packets with 1e-4 loss and a few reorderings through the default window: a smoke test
    // that the per-packet path is cheap; memory is fixed by the window, not the trial length.
    let mut rng = StdRng::seed_from_u64(6);
    let mut rx = RecvStats::new(RecvConfig {
        keep_records: 100,
        ..cfg()
    });
    let mut held: Option<u64> = None;
    for seq in 0..1_000_000u64 {
        if rng.gen_bool(1e-4) {
            continue;
        }
        let mut b = pkt(seq, seq * SPACING);
        if held.is_none() && rng.gen_bool(1e-4) {
            held = Some(seq);
            continue;
        }
        rx.on_datagram(seq * SPACING, &b, true);
        if let Some(h) = held.filter(|&h| seq > h + 3) {
            b[16..24].copy_from_slice(&h.to_be_bytes());
            rx.on_datagram(seq * SPACING, &b, true);
            held = None;
        }
    }
    let r = rx.finish(Some(1_000_000), 0);
    assert_eq!(r.unique_packets + r.lost_packets, 1_000_000);
    assert!(r.reordering.reordered_packets > 0);
    assert!(r.reordering.extent_packets.min.expect("extent") >= 4);
    assert_eq!(r.one_way_delay.records.len(), 100);
}

#[test]
fn done_count_above_announced_count_is_capped_and_flagged() {
    let hello = TestParams {
        test_id: TEST_ID,
        size: SIZE as u32,
        count: 100,
        spacing_ns: SPACING,
    };
    let mut rx = RecvStats::new(RecvConfig::from_params(&hello));
    for seq in 0..100 {
        rx.on_datagram(seq, &pkt(seq, 0), true);
    }
    let r = rx.finish(Some(1_000_000_000_000), 0);
    assert_eq!((r.lost_packets, r.expected_packets), (0, 100));
    assert!(r.sent_mismatch);
}

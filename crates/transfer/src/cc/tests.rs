//! Unit tests of the congestion controllers.

use super::*;

fn sample(t0: Instant, ms: u64, rate_bps: f64, owd_us: i64, seq: u64, rx: u64) -> ReportSample {
    let now = t0 + Duration::from_millis(ms);
    ReportSample {
        now,
        echo_sent_at: now - Duration::from_millis(50),
        rtt: Some(Duration::from_millis(100)),
        echo_delay: Duration::ZERO,
        interval: Duration::from_millis(10),
        interval_wire_bytes: (rate_bps / 8.0 * 0.01) as u64,
        seq_high: seq,
        rx_datagrams: rx,
        owd_interval_min_us: owd_us,
        owd_latest_us: owd_us,
        inflight: 0,
    }
}

#[test]
fn windowed_filters() {
    let mut w: Windowed<u64, f64> = Windowed::new(true);
    w.push(0, 5.0);
    w.push(1, 3.0);
    assert_eq!(w.get(), Some(5.0));
    w.expire(1);
    assert_eq!(w.get(), Some(3.0));
    w.expire(100);
    assert_eq!(w.get(), Some(3.0), "the latest sample is kept");
    let mut m: Windowed<u64, i64> = Windowed::new(false);
    m.push(0, 5);
    m.push(1, 7);
    m.push(2, 6);
    assert_eq!(m.get(), Some(5));
    m.expire(1);
    assert_eq!(m.get(), Some(6));
}

#[test]
fn random_loss_does_not_cut_the_rate() {
    let t0 = Instant::now();
    let mut cc = Adaptive::default();
    // Steady 1 Gb/s delivery, 1 % loss, flat delay for 20 s of reports.
    let mut seq = 0;
    let mut rx = 0;
    for i in 1..2000u64 {
        seq += 150;
        rx += 148 + (i % 2); // ≈ 1 % loss
        cc.on_report(&sample(t0, i * 10, 1e9, 1000, seq, rx));
    }
    assert_eq!(cc.yields(), 0);
    assert!(cc.phase().starts_with("probe_bw"), "{}", cc.phase());
    let bw = cc.bandwidth_estimate_bps().unwrap();
    assert!((bw / 1e9 - 1.0).abs() < 0.03, "{bw}");
    assert!((cc.long_run_loss() - 0.01).abs() < 0.005, "{}", cc.long_run_loss());
}

/// 1 Gb/s reports for 5 s, then 2 s of 0.3 Gb/s while the sender itself sent only that much
/// (`starved`) or its full pacing rate (the path really slowed). Returns the estimate after.
fn estimate_after_slow_reports(starved: bool) -> f64 {
    let t0 = Instant::now();
    let mut cc = Adaptive::default();
    let mut seq = 0;
    for i in 1..700u64 {
        let rate = if i > 500 { 0.3e9 } else { 1e9 };
        let sent_rate = if i > 500 && starved {
            0.3e9
        } else {
            cc.pacing_rate_bps()
        };
        // What the sender put on the wire over this 10 ms, in 1 ms pieces.
        for k in 0..10 {
            let at = t0 + Duration::from_millis((i - 1) * 10 + k);
            cc.on_sent(at, (sent_rate / 8.0 / 1000.0) as u64, false);
        }
        seq += (rate / 8.0 * 0.01 / 8000.0) as u64;
        cc.on_report(&sample(t0, i * 10, rate, 1000, seq, seq));
    }
    cc.bandwidth_estimate_bps().unwrap()
}

#[test]
fn a_starved_sender_keeps_its_estimate_a_slow_path_does_not() {
    let kept = estimate_after_slow_reports(true);
    assert!(kept > 0.9e9, "starved sender lost its estimate: {kept}");
    let followed = estimate_after_slow_reports(false);
    assert!(followed < 0.5e9, "a slower path was not followed: {followed}");
}

#[test]
fn standing_queue_yields() {
    let t0 = Instant::now();
    let mut cc = Adaptive::default();
    let mut seq = 0;
    for i in 1..1000u64 {
        seq += 150;
        cc.on_report(&sample(t0, i * 10, 1e9, 1000, seq, seq));
    }
    assert_eq!(cc.yields(), 0);
    for i in 1000..1100u64 {
        seq += 150;
        cc.on_report(&sample(t0, i * 10, 1e9, 1000 + 30_000, seq, seq));
        if cc.yields() > 0 {
            break;
        }
    }
    assert_eq!(cc.yields(), 1);
    // 0.9 × the delivery rate, in the draining phase.
    assert!(cc.pacing_rate_bps() < 0.7e9, "{}", cc.pacing_rate_bps());
}

#[test]
fn fixed_rate_is_fixed() {
    let t0 = Instant::now();
    let mut cc = FixedRate::new(9.5e8);
    cc.on_report(&sample(t0, 10, 1e8, 1000, 100, 10));
    assert_eq!(cc.pacing_rate_bps(), 9.5e8);
    assert_eq!(cc.inflight_cap(), None);
}

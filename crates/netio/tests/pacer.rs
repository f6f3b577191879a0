//! The pacer's arithmetic and catch-up logic with synthetic clocks (deterministic), and one
//! real-time smoke test that asserts only what cannot flake.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use netio::pacer::{wait_next, wait_until, DEFAULT_SPIN};
use netio::{bind_udp, connect_udp, BufferRequest};
use pacing::{Pacer, Spacing};

const US: Duration = Duration::from_micros(1);

#[test]
fn deadlines_are_exact_rationals() {
    let s = Spacing::from_rate(8000, 4_096_000_000);
    assert_eq!(s.deadline_ns(1), 15_625);
    assert_eq!(Spacing::from_rate(8192, 4_096_000_000).deadline_ns(1), 16_000);
    let t0 = Instant::now();
    let p = Pacer::new(t0, s);
    assert_eq!(p.deadline(1) - t0, Duration::from_nanos(15_625));
    // 10⁶ packets end exactly 15.625 s after the start: no drift.
    assert_eq!(p.deadline(1_000_000) - t0, Duration::from_nanos(15_625_000_000));
    // A sender that always leaves exactly on time never slips and stays on the exact timeline.
    let mut p = Pacer::new(t0, s);
    for n in 0..1_000_000u64 {
        let due = p.poll(t0).unwrap_or(t0);
        assert_eq!(due, t0 + Duration::from_nanos(n * 15_625));
        assert!(!p.on_sent(due).slipped);
    }
    assert_eq!(p.next_deadline(), t0 + Duration::from_nanos(15_625_000_000));
    assert_eq!(p.slips(), 0);
}

/// Simulate a sender on a synthetic clock: it waits for `poll`, stalls before some packets, and
/// records each departure.
fn simulate(spacing_ns: u64, packets: u64, stalls: &[(u64, Duration)]) -> (Pacer, Vec<Instant>) {
    let t0 = Instant::now();
    let mut p = Pacer::new(t0, Spacing::from_nanos(spacing_ns));
    let mut now = t0;
    let mut departures = Vec::new();
    for n in 0..packets {
        if let Some(due) = p.poll(now) {
            now = due;
        }
        if let Some((_, d)) = stalls.iter().find(|(at, _)| *at == n) {
            now += *d;
        }
        p.on_sent(now);
        departures.push(now);
    }
    (p, departures)
}

#[test]
fn small_lateness_is_sent_at_once() {
    // 10 µs spacing, a 300 µs stall before packet 100: below the 1 ms bound, so packet 100 goes
    // 300 µs late and the 30 packets due meanwhile follow immediately; the timeline is kept.
    let (p, dep) = simulate(10_000, 1000, &[(100, 300 * US)]);
    assert_eq!(p.slips(), 0);
    assert_eq!(dep[100] - dep[99], 310 * US);
    assert!(dep[101..=130].iter().all(|&t| t == dep[100]), "caught up at once");
    // Back on the original timeline afterwards.
    assert_eq!(dep[131] - dep[0], 1310 * US);
    assert_eq!(dep[999] - dep[0], 9990 * US);
}

#[test]
fn large_lateness_slips_once_without_burst() {
    // A 5 ms stall before packet 500 (bound: 1 ms): one slip, then the spacing is kept — no
    // burst of the ~500 packets the original timeline would have had due.
    let (p, dep) = simulate(10_000, 1000, &[(500, Duration::from_millis(5))]);
    assert_eq!(p.slips(), 1);
    assert_eq!(p.slipped_total(), Duration::from_millis(5));
    for w in dep[500..].windows(2) {
        assert_eq!(w[1] - w[0], 10 * US, "no back-to-back packets after a slip");
    }
    assert_eq!(dep[999] - dep[500], 499 * 10 * US);
}

#[test]
fn batch_due_never_bursts_past_the_bound() {
    let t0 = Instant::now();
    let p = Pacer::new(t0, Spacing::from_nanos(10_000));
    // 0.5 ms in: packets 0..=50 are due.
    assert_eq!(p.batch_due(t0 + 500 * US, 1024), 51);
    // 50 ms in: far past the bound, only the packet that re-anchors is due.
    assert_eq!(p.batch_due(t0 + Duration::from_millis(50), 1024), 1);
    let custom = Pacer::new(t0, Spacing::from_nanos(10_000)).with_max_lag(Duration::from_millis(100));
    assert_eq!(custom.batch_due(t0 + Duration::from_millis(50), 1024), 1024);
}

#[test]
fn real_time_smoke() {
    let (rx, _) = bind_udp(
        "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        BufferRequest::new(4 << 20, 0),
    )
    .unwrap();
    let (tx, _) = connect_udp(
        "127.0.0.1:0".parse().unwrap(),
        rx.local_addr().unwrap(),
        BufferRequest::default(),
    )
    .unwrap();
    let spacing = 20 * US;
    let t0 = Instant::now();
    let mut p = Pacer::new(t0, Spacing::from_nanos(20_000));
    let mut sent = 0u64;
    let mut worst = Duration::ZERO;
    for n in 0..2000u64 {
        let late = wait_next(&mut p, DEFAULT_SPIN);
        worst = worst.max(late.late);
        if tx.send(&n.to_le_bytes()).is_ok() {
            sent += 1;
        }
    }
    // The 2000th packet's slot ends one spacing after it starts.
    wait_until(p.next_deadline());
    let elapsed = t0.elapsed();
    eprintln!(
        "2000 packets at 20 µs: {elapsed:?}, {} slips ({:?} given up), worst lateness {worst:?}",
        p.slips(),
        p.slipped_total()
    );
    assert_eq!(sent, 2000);
    assert_eq!(p.sent(), 2000);
    // Deadlines only move later at slips, so this lower bound cannot flake.
    assert!(elapsed >= spacing * 2000);
}

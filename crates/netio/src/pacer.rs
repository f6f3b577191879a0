//! Absolute-timeline pacing. Packet `n` is due at `start + n·spacing`, never "previous + spacing",
//! so sleep overshoot does not accumulate (jive5ab's relative whole-µs delays drift). The spacing
//! is an exact rational in nanoseconds: 8000-byte frames at 4.096 Gb/s are due every 15 625 ns
//! and 10⁹ packets later the schedule is still exact.

use std::time::{Duration, Instant};

/// Sleep no closer than this to a deadline and spin the rest (Linux timer slack is ~50 µs).
const SPIN: Duration = Duration::from_micros(100);

/// Time between packets, exactly: `num / den` nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spacing {
    num: u128,
    den: u128,
}

impl Spacing {
    /// No pacing: every packet is due at once.
    pub const ZERO: Spacing = Spacing { num: 0, den: 1 };

    /// Spacing of `bytes_per_packet` at `bits_per_second` (bytes·8·10⁹ / bps ns). A rate of 0
    /// means unpaced.
    pub fn from_rate(bytes_per_packet: u64, bits_per_second: u64) -> Spacing {
        if bits_per_second == 0 {
            return Spacing::ZERO;
        }
        Spacing {
            num: u128::from(bytes_per_packet) * 8 * 1_000_000_000,
            den: u128::from(bits_per_second),
        }
    }

    /// A whole number of nanoseconds.
    pub fn from_nanos(ns: u64) -> Spacing {
        Spacing {
            num: u128::from(ns),
            den: 1,
        }
    }

    /// Offset of packet `n` from the start, in nanoseconds (rounded down).
    pub fn offset_ns(&self, n: u64) -> u128 {
        u128::from(n) * self.num / self.den
    }

    /// The spacing in (fractional) nanoseconds.
    pub fn as_nanos_f64(&self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Whether packets are paced at all.
    pub fn is_zero(&self) -> bool {
        self.num == 0
    }
}

/// Schedules packets on an absolute timeline.
#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    spacing: Spacing,
    /// Index of the next packet on the current timeline.
    n: u64,
    /// Packets sent in total, over all re-anchorings.
    sent: u64,
    max_lag: Duration,
    slips: u64,
    slipped: Duration,
}

impl Pacer {
    /// Packet 0 is due at `start`. Falling more than `max(1 ms, 64 spacings)` behind re-anchors
    /// the timeline instead of sending a catch-up burst.
    pub fn new(start: Instant, spacing: Spacing) -> Pacer {
        let lag = Duration::from_nanos((spacing.as_nanos_f64() * 64.0) as u64).max(Duration::from_millis(1));
        Pacer {
            start,
            spacing,
            n: 0,
            sent: 0,
            max_lag: lag,
            slips: 0,
            slipped: Duration::ZERO,
        }
    }

    /// Change the largest lag caught up by sending at once.
    pub fn with_max_lag(mut self, max_lag: Duration) -> Pacer {
        self.max_lag = max_lag;
        self
    }

    /// Due time of the `k`-th packet from now on the current timeline (`k = 0`: the next).
    pub fn deadline_after(&self, k: u64) -> Instant {
        let ns = self.spacing.offset_ns(self.n + k);
        self.start + Duration::from_nanos(ns.min(u128::from(u64::MAX)) as u64)
    }

    /// Due time of the next packet.
    pub fn next_deadline(&self) -> Instant {
        self.deadline_after(0)
    }

    /// How many packets (up to `max`) are due at `now`: a sender may hand them to one system call.
    pub fn due(&self, now: Instant, max: u64) -> u64 {
        let mut k = 0;
        while k < max && self.deadline_after(k) <= now {
            k += 1;
        }
        k
    }

    /// The next packet left at `now`. Returns how late it was. If it was more than the lag bound
    /// late, the timeline restarts at `now` (counted as a slip) so the next packets are not sent
    /// back to back to catch up.
    pub fn on_sent(&mut self, now: Instant) -> Duration {
        let due = self.next_deadline();
        let late = now.saturating_duration_since(due);
        self.sent += 1;
        if late > self.max_lag {
            self.slips += 1;
            self.slipped += late;
            self.start = now;
            self.n = 1;
        } else {
            self.n += 1;
        }
        late
    }

    /// Sleep then spin until the next packet is due.
    pub fn wait(&self) {
        wait_until(self.next_deadline());
    }

    /// Packets sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Times the timeline was re-anchored because the sender fell behind.
    pub fn slips(&self) -> u64 {
        self.slips
    }

    /// Total lateness given up at slips.
    pub fn slipped(&self) -> Duration {
        self.slipped
    }
}

/// Wait until `deadline`: sleep to shortly before it, then spin. Returns at once if it passed.
pub fn wait_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_rational_spacing() {
        let s = Spacing::from_rate(8000, 4_096_000_000);
        assert_eq!(s.offset_ns(1), 15_625);
        assert_eq!(Spacing::from_rate(8192, 4_096_000_000).offset_ns(1), 16_000);
        // 10⁶ frames: exactly 15.625 s, no drift.
        assert_eq!(s.offset_ns(1_000_000), 15_625_000_000);
        // 1472 B at 1 Gb/s is 11 776 ns exactly; a non-integral one stays exact over many packets.
        let odd = Spacing::from_rate(1000, 3_000_000_000); // 2666.67 ns
        assert_eq!(odd.offset_ns(3), 8000);
        assert_eq!(odd.offset_ns(3_000_000_000), 8_000_000_000_000);
    }

    #[test]
    fn small_lateness_is_caught_up_large_lateness_slips() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, Spacing::from_nanos(10_000));
        assert_eq!(p.on_sent(t0), Duration::ZERO);
        // 50 µs late for packet 1 (due at 10 µs): below the 1 ms bound → packets 2..6 are already due.
        let late = p.on_sent(t0 + Duration::from_micros(60));
        assert_eq!(late, Duration::from_micros(50));
        assert_eq!(p.due(t0 + Duration::from_micros(60), 100), 5);
        assert_eq!(p.slips(), 0);
        // 5 ms late: re-anchor, next packet one spacing after now, nothing due at once.
        let now = t0 + Duration::from_millis(5);
        p.on_sent(now);
        assert_eq!(p.slips(), 1);
        assert_eq!(p.next_deadline(), now + Duration::from_micros(10));
        assert_eq!(p.due(now, 100), 0);
    }

    #[test]
    fn real_time_smoke() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, Spacing::from_nanos(20_000));
        for _ in 0..2000 {
            p.wait();
            p.on_sent(Instant::now());
        }
        assert_eq!(p.sent(), 2000);
        // A lower bound cannot flake: 2000 packets at 20 µs take at least 39.98 ms.
        assert!(t0.elapsed() >= Duration::from_micros(20 * 1999));
    }
}

//! The receiver's measurement of the session's opening train (see [`crate::wire::TRAIN_LEN`]).

use std::time::Instant;

use crate::wire;

/// Arrivals of the session's opening train (DATA sequence numbers below [`TRAIN_LEN`], sent back
/// to back): their dispersion at the bottleneck estimates its capacity.
#[derive(Debug, Default)]
pub(super) struct TrainMeter {
    first: Option<(Instant, u64)>,
    last: Option<Instant>,
    pub(super) count: u32,
    bytes: u64,
    /// The estimate reported (fixed once reported, so stragglers cannot change it), bit/s.
    reported: u64,
}

/// A dispersion above this is coalesced arrivals (GRO, interrupt moderation), not a rate.
const MAX_TRAIN_BPS: f64 = 400e9;

impl TrainMeter {
    pub(super) fn arrival(&mut self, now: Instant, datagram_bytes: u64) {
        if self.reported > 0 {
            return;
        }
        self.count += 1;
        self.bytes += datagram_bytes;
        match self.first {
            Some((t, _)) if t <= now => self.last = Some(self.last.map_or(now, |l| l.max(now))),
            // Reordered: an earlier arrival time (the kernel stamp) becomes the first.
            _ => {
                if let Some((t, _)) = self.first {
                    self.last = Some(self.last.map_or(t, |l| l.max(t)));
                }
                self.first = Some((now, datagram_bytes));
            }
        }
    }

    /// The estimate for a report: bytes after the first arrival over the spread of arrivals,
    /// once at least half the train is in.
    pub(super) fn estimate(&mut self) -> u64 {
        if self.reported == 0 && u64::from(self.count) * 2 >= wire::TRAIN_LEN {
            if let (Some((t0, b0)), Some(t1)) = (self.first, self.last) {
                let dt = t1.saturating_duration_since(t0).as_secs_f64();
                let bps = (self.bytes - b0) as f64 * 8.0 / dt;
                if dt > 0.0 && bps.is_finite() && bps < MAX_TRAIN_BPS {
                    self.reported = bps as u64;
                }
            }
        }
        self.reported
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_opening_train_gives_its_dispersion_rate_once() {
        let t0 = Instant::now();
        // 16 datagrams of 8248 bytes 66 µs apart (1 Gb/s), the first two swapped.
        let mut m = TrainMeter::default();
        assert_eq!(m.estimate(), 0);
        let at = |k: u64| t0 + Duration::from_micros(66 * k);
        m.arrival(at(1), 8248);
        m.arrival(at(0), 8248);
        for k in 2..7 {
            m.arrival(at(k), 8248);
        }
        assert_eq!(m.estimate(), 0, "fewer than half the train");
        m.arrival(at(7), 8248);
        let bps = m.estimate() as f64;
        assert!((bps / 1e9 - 8248.0 * 8.0 / 66_000.0).abs() < 0.01, "{bps}");
        m.arrival(at(100), 8248);
        assert_eq!(m.estimate() as f64, bps, "fixed once reported");
        // Coalesced arrivals (one stamp for all) say nothing.
        let mut c = TrainMeter::default();
        for _ in 0..16 {
            c.arrival(t0, 8248);
        }
        assert_eq!(c.estimate(), 0);
    }
}

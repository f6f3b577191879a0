//! The sans-IO link: packets in with `push(now)`, out with `poll(now)`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::config::{ConfigError, LinkConfig, LossModel};
use crate::loss::LossProcess;
use crate::stats::LinkStats;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// What happened to a packet passed to [`Link::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Admission {
    /// Scheduled for delivery (possibly twice, if duplicated).
    Accepted,
    /// Queued at the bottleneck, then lost on the wire by the loss model.
    DroppedLoss,
    /// Dropped at the tail of the full bottleneck queue.
    DroppedQueue,
}

/// A packet scheduled for release, ordered by (release time, arrival order)
/// so that packets released at the same instant keep FIFO order.
struct Scheduled<P> {
    release: Instant,
    seq: u64,
    len: u64,
    packet: P,
}

impl<P> PartialEq for Scheduled<P> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<P> Eq for Scheduled<P> {}
impl<P> PartialOrd for Scheduled<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> Ord for Scheduled<P> {
    // Reversed so that `BinaryHeap` (a max-heap) pops the earliest release.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.release, other.seq).cmp(&(self.release, self.seq))
    }
}

/// Independent random streams, one per random process, so that changing
/// e.g. the jitter does not change which packets the loss model drops: two
/// runs differing in one setting see the same loss pattern.
struct Rngs {
    loss: LossProcess,
    jitter: Xoshiro256PlusPlus,
    duplicate: Xoshiro256PlusPlus,
}

impl Rngs {
    fn new(seed: u64, loss: LossModel) -> Self {
        let loss_rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        // `jump()` advances by 2^128 draws: the streams cannot overlap.
        let mut jitter = loss_rng.clone();
        jitter.jump();
        let mut duplicate = jitter.clone();
        duplicate.jump();
        Self {
            loss: LossProcess::with_rng(loss, loss_rng),
            jitter,
            duplicate,
        }
    }
}

/// One direction of a path, generic over the packet payload `P`.
///
/// Sans-IO: it never reads a clock. Every call takes `now`, which must not
/// go backwards between `push` calls (an earlier `now` is treated as the
/// latest one seen). Deterministic given the seed and the call sequence.
pub struct Link<P> {
    config: LinkConfig,
    rng: Rngs,
    /// When the bottleneck finishes serialising everything admitted so far,
    /// plus a sub-nanosecond remainder `busy_frac / rate` ns kept so that
    /// rounding never accumulates (exact rate over any number of packets).
    busy_until: Option<Instant>,
    busy_frac: u64,
    last_push: Option<Instant>,
    /// Latest release scheduled, for in-order release when `!reorder`.
    last_release: Option<Instant>,
    next_seq: u64,
    scheduled: BinaryHeap<Scheduled<P>>,
    in_flight_bytes: u64,
    stats: LinkStats,
}

impl<P> Link<P> {
    /// A link with the given configuration and RNG seed.
    pub fn new(config: LinkConfig, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let rng = Rngs::new(seed, config.loss);
        Ok(Self {
            config,
            rng,
            busy_until: None,
            busy_frac: 0,
            last_push: None,
            last_release: None,
            next_seq: 0,
            scheduled: BinaryHeap::new(),
            in_flight_bytes: 0,
            stats: LinkStats::default(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Copies scheduled but not yet polled (duplicates included).
    pub fn in_flight(&self) -> usize {
        self.scheduled.len()
    }

    /// Bytes of the copies counted by [`Link::in_flight`].
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    /// Bytes still waiting to be serialised at the bottleneck at `now`,
    /// counting the untransmitted part of the packet on the wire (a fluid
    /// backlog: `(busy_until − now) · rate / 8`, rounded up).
    pub fn queue_occupancy(&self, now: Instant) -> u64 {
        let (Some(rate), Some(busy)) = (self.config.rate_bps, self.busy_until) else {
            return 0;
        };
        if busy <= now {
            return 0;
        }
        let ns = (busy - now).as_nanos();
        // Bits left = (ns · rate + frac) / 1e9, see `busy_frac`.
        let bits_x1e9 = ns * u128::from(rate) + u128::from(self.busy_frac);
        let bytes = bits_x1e9.div_ceil(8 * NANOS_PER_SEC);
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    /// Earliest release among scheduled packets: when the driver should
    /// next call [`Link::poll`].
    pub fn next_release(&self) -> Option<Instant> {
        self.scheduled.peek().map(|s| s.release)
    }

    /// Next packet whose release time is `<= now`, in release order.
    pub fn poll(&mut self, now: Instant) -> Option<P> {
        if self.scheduled.peek()?.release > now {
            return None;
        }
        let s = self.scheduled.pop()?;
        self.in_flight_bytes -= s.len;
        self.stats.delivered.add(s.len);
        Some(s.packet)
    }

    /// Offers a packet of `len` bytes (the size the bottleneck serialises,
    /// e.g. including headers) to the link at `now`.
    ///
    /// Duplication needs a second copy of the payload, hence `P: Clone`
    /// (cheap for `Vec<u8>` at these rates, free for `Rc`/`Arc`/indices).
    pub fn push(&mut self, now: Instant, packet: P, len: usize) -> Admission
    where
        P: Clone,
    {
        let now = match self.last_push {
            Some(last) if last > now => last,
            _ => now,
        };
        self.last_push = Some(now);
        let len = len as u64;
        self.stats.offered.add(len);

        // 1. Bottleneck.
        let Some(departure) = self.admit(now, len) else {
            self.stats.dropped_queue.add(len);
            return Admission::DroppedQueue;
        };

        // 2. Wire loss.
        if self.rng.loss.lose() {
            self.stats.dropped_loss.add(len);
            return Admission::DroppedLoss;
        }

        // 3. Duplication, then 4. propagation for each copy.
        let duplicate = self.config.duplicate > 0.0 && self.rng.duplicate.gen::<f64>() < self.config.duplicate;
        if duplicate {
            self.stats.duplicated.add(len);
            self.schedule(departure, packet.clone(), len);
        }
        self.schedule(departure, packet, len);
        Admission::Accepted
    }

    /// Drop-tail admission at the bottleneck. Returns the time the packet's
    /// last bit leaves the bottleneck, or `None` if the queue is full.
    fn admit(&mut self, now: Instant, len: u64) -> Option<Instant> {
        let Some(rate) = self.config.rate_bps else {
            self.stats.record_queue_delay(Duration::ZERO);
            return Some(now);
        };
        let occupancy = self.queue_occupancy(now);
        let after = occupancy.saturating_add(len);
        if after > self.config.buffer_bytes {
            return None;
        }
        // Serialisation starts when the previous packet has left:
        // start = max(now, previous departure); departure = start + len·8/rate.
        let (start, frac) = match self.busy_until {
            Some(busy) if busy > now => (busy, self.busy_frac),
            _ => (now, 0),
        };
        // Work in units of 1/rate ns so the division is exact over time:
        // len·8·1e9 / rate ns, carrying the remainder to the next packet.
        let numer = u128::from(len) * 8 * NANOS_PER_SEC + u128::from(frac);
        let rate = u128::from(rate);
        let tx_ns = u64::try_from(numer / rate).ok()?;
        // A backlog beyond what `Instant` can represent behaves as a full queue.
        let departure = start.checked_add(Duration::from_nanos(tx_ns))?;
        self.busy_until = Some(departure);
        // The remainder is < rate, which fits u64.
        self.busy_frac = (numer % rate) as u64;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(after);
        self.stats.record_queue_delay(start - now);
        Some(departure)
    }

    fn schedule(&mut self, departure: Instant, packet: P, len: u64) {
        let jitter = if self.config.jitter.is_zero() {
            Duration::ZERO
        } else {
            // Uniform on [0, jitter] at ns resolution. Jitter ≤ MAX_DELAY, so
            // the nanosecond count fits u64.
            let max = u64::try_from(self.config.jitter.as_nanos()).unwrap_or(u64::MAX);
            Duration::from_nanos(self.rng.jitter.gen_range(0..=max))
        };
        // delay + jitter ≤ 2·MAX_DELAY; if `Instant` cannot hold it the clock
        // is near its end of range anyway: release at the departure time.
        let mut release = departure.checked_add(self.config.delay + jitter).unwrap_or(departure);
        if !self.config.reorder {
            if let Some(last) = self.last_release {
                release = release.max(last);
            }
        }
        self.last_release = Some(self.last_release.map_or(release, |l| l.max(release)));
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight_bytes += len;
        self.scheduled.push(Scheduled {
            release,
            seq,
            len,
            packet,
        });
    }
}

/// Both directions of a path: `a → b` and `b → a`, each with its own
/// configuration and seed.
pub struct Duplex<P> {
    /// Link carrying packets from endpoint A to endpoint B.
    pub a_to_b: Link<P>,
    /// Link carrying packets from endpoint B to endpoint A.
    pub b_to_a: Link<P>,
}

impl<P> Duplex<P> {
    /// Two links with independent configurations and seeds.
    pub fn new(a_to_b: Link<P>, b_to_a: Link<P>) -> Self {
        Self { a_to_b, b_to_a }
    }

    /// Same configuration both ways; the reverse direction's seed is derived
    /// from `seed` so the two loss processes are not identical.
    pub fn symmetric(config: LinkConfig, seed: u64) -> Result<Self, ConfigError> {
        Ok(Self {
            a_to_b: Link::new(config.clone(), seed)?,
            b_to_a: Link::new(config, reverse_seed(seed))?,
        })
    }

    /// Different configurations per direction, seeds derived from `seed`.
    pub fn asymmetric(a_to_b: LinkConfig, b_to_a: LinkConfig, seed: u64) -> Result<Self, ConfigError> {
        Ok(Self {
            a_to_b: Link::new(a_to_b, seed)?,
            b_to_a: Link::new(b_to_a, reverse_seed(seed))?,
        })
    }

    /// Earliest release on either direction.
    pub fn next_release(&self) -> Option<Instant> {
        match (self.a_to_b.next_release(), self.b_to_a.next_release()) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }
}

/// A fixed odd constant (2^64 / golden ratio) mixed in: any seed maps to a
/// different seed, and `seed_from_u64` then scrambles it with SplitMix64.
fn reverse_seed(seed: u64) -> u64 {
    seed ^ 0x9E37_79B9_7F4A_7C15
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(base: Instant, us: u64) -> Instant {
        base + Duration::from_micros(us)
    }

    #[test]
    fn serialisation_spacing_is_exact() {
        // 1 Gb/s, 1500 B => 12 µs per packet; a burst of 3 leaves at 12, 24, 36 µs.
        let cfg = LinkConfig {
            rate_bps: Some(1_000_000_000),
            buffer_bytes: 10_000,
            ..LinkConfig::default()
        };
        let mut link: Link<u32> = Link::new(cfg, 1).unwrap();
        let base = Instant::now();
        for i in 0..3 {
            assert_eq!(link.push(base, i, 1500), Admission::Accepted);
        }
        assert_eq!(link.queue_occupancy(base), 4500);
        assert_eq!(link.queue_occupancy(t(base, 6)), 3750);
        assert_eq!(link.stats().max_queue_bytes, 4500);
        assert_eq!(link.next_release(), Some(t(base, 12)));
        assert_eq!(link.poll(t(base, 11)), None);
        assert_eq!(link.poll(t(base, 12)), Some(0));
        assert_eq!(link.next_release(), Some(t(base, 24)));
        assert_eq!(link.poll(t(base, 100)), Some(1));
        assert_eq!(link.poll(t(base, 100)), Some(2));
        assert_eq!(link.poll(t(base, 100)), None);
        assert_eq!(link.stats().queue_delay_max(), Duration::from_micros(24));
    }

    #[test]
    fn fractional_serialisation_does_not_drift() {
        // 3 bytes at 7 b/s = 24/7 s each: 7 packets take exactly 24 s.
        let cfg = LinkConfig {
            rate_bps: Some(7),
            buffer_bytes: 1000,
            ..LinkConfig::default()
        };
        let mut link: Link<()> = Link::new(cfg, 1).unwrap();
        let base = Instant::now();
        for _ in 0..7 {
            link.push(base, (), 3);
        }
        assert_eq!(link.queue_occupancy(base + Duration::from_secs(24)), 0);
        assert_eq!(link.queue_occupancy(base + Duration::from_secs(23)), 1);
        let mut last = base;
        while let Some(r) = link.next_release() {
            last = r;
            link.poll(r);
        }
        assert_eq!(last, base + Duration::from_secs(24));
    }

    #[test]
    fn oversized_packet_is_a_queue_drop() {
        let cfg = LinkConfig {
            rate_bps: Some(1_000_000),
            buffer_bytes: 100,
            ..LinkConfig::default()
        };
        let mut link: Link<()> = Link::new(cfg, 1).unwrap();
        assert_eq!(link.push(Instant::now(), (), 101), Admission::DroppedQueue);
        assert_eq!(link.stats().dropped_queue.bytes, 101);
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let cfg = LinkConfig {
            delay: Duration::from_millis(1),
            ..LinkConfig::default()
        };
        let mut link: Link<u8> = Link::new(cfg, 1).unwrap();
        let base = Instant::now();
        link.push(t(base, 100), 0, 10);
        link.push(base, 1, 10);
        assert_eq!(link.poll(t(base, 1099)), None);
        assert_eq!(link.poll(t(base, 1100)), Some(0));
        assert_eq!(link.poll(t(base, 1100)), Some(1));
    }

    #[test]
    fn stats_serialise_to_json() {
        let mut link: Link<()> = Link::new(LinkConfig::default(), 1).unwrap();
        link.push(Instant::now(), (), 100);
        let v = serde_json::to_value(link.stats()).unwrap();
        assert_eq!(v["offered"]["bytes"], 100);
        assert_eq!(v["queue_delay_us"]["count"], 1);
    }
}

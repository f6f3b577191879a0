//! Absolute-timeline pacing. Packet `n` is due at `anchor + (n − anchor_n)·spacing`, never
//! "previous + spacing", so sleep overshoot does not accumulate (jive5ab's relative whole-µs delays
//! drift). The spacing is an exact rational in nanoseconds: 8000-byte frames at 4.096 Gb/s are due
//! every 15 625 ns and 10⁹ packets later the schedule is still exact.
//!
//! Falling far behind (a descheduled sender, a full send buffer) does not end in a burst of
//! back-to-back packets that would overrun a shallow router queue: past a bound the timeline is
//! re-anchored at "now" and the slip is counted, so a report can say the sender, not the network,
//! lost time.
//!
//! Sans-IO: every method takes `now` as an argument and nothing here reads a clock or sleeps, so
//! the same schedule runs over real sockets (netio's `wait_next` adds the sleep-then-spin) and in
//! virtual time (linkemu's `sim`). [`CatchUp`] is the one rule by which a backlog leaves, shared by
//! the pacer and the relay's live queue: never faster than `factor` × the rate. [`RatePacer`] paces
//! the bulk transfer at whatever rate its congestion controller says now.

use std::time::{Duration, Instant};

/// Default lower bound on the lateness caught up by sending at once (the other bound is 64
/// spacings, whichever is larger).
pub const DEFAULT_MIN_MAX_LAG: Duration = Duration::from_millis(1);

/// Default number of spacings of lateness caught up by sending at once.
pub const DEFAULT_MAX_LAG_PACKETS: u64 = 64;

/// Time between packets, exactly `num / den` nanoseconds (kept reduced), so that
/// `deadline_ns(n) = n·num/den` has no accumulated rounding error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spacing {
    num: u128,
    den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Spacing {
    /// No pacing: every packet is due at once.
    pub const ZERO: Spacing = Spacing { num: 0, den: 1 };

    /// Spacing of `bytes_per_packet`-byte packets at `bits_per_second`: bytes·8·10⁹ / bps ns,
    /// exactly. A rate of 0 means unpaced ([`Spacing::ZERO`]).
    pub fn from_rate(bytes_per_packet: u64, bits_per_second: u64) -> Spacing {
        if bits_per_second == 0 || bytes_per_packet == 0 {
            return Spacing::ZERO;
        }
        Spacing::ratio(
            u128::from(bytes_per_packet) * 8 * 1_000_000_000,
            u128::from(bits_per_second),
        )
    }

    /// A whole number of nanoseconds between packets (0 = unpaced).
    pub fn from_nanos(ns: u64) -> Spacing {
        Spacing::ratio(u128::from(ns), 1)
    }

    fn ratio(num: u128, den: u128) -> Spacing {
        if num == 0 {
            return Spacing::ZERO;
        }
        let g = gcd(num, den);
        Spacing {
            num: num / g,
            den: den / g,
        }
    }

    /// Offset of packet `n` from the timeline's anchor: `⌊n·num/den⌋` ns. Saturates at
    /// `u128::MAX` only for absurd inputs (more than ~10²⁹ ns).
    pub fn deadline_ns(&self, n: u64) -> u128 {
        u128::from(n).checked_mul(self.num).map_or(u128::MAX, |p| p / self.den)
    }

    /// [`Spacing::deadline_ns`] as a `Duration` (saturating at `Duration::MAX`-ish u64 ns).
    pub fn offset(&self, n: u64) -> Duration {
        Duration::from_nanos(u64::try_from(self.deadline_ns(n)).unwrap_or(u64::MAX))
    }

    /// The spacing in (fractional) nanoseconds, for display.
    pub fn as_nanos_f64(&self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Whether packets are unpaced.
    pub fn is_zero(&self) -> bool {
        self.num == 0
    }

    /// Index of the last packet due within `elapsed_ns` of the anchor: the largest `j` with
    /// `⌊j·num/den⌋ ≤ elapsed_ns`, i.e. `j·num < (elapsed_ns+1)·den`. `None` when unpaced
    /// (every packet is due).
    fn last_due(&self, elapsed_ns: u128) -> Option<u128> {
        if self.num == 0 {
            return None;
        }
        let lim = (elapsed_ns + 1).saturating_mul(self.den);
        Some((lim - 1) / self.num)
    }
}

/// How late a packet was released relative to its deadline, for the caller's histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lateness {
    /// `now − deadline`, zero if on time.
    pub late: Duration,
    /// The lateness exceeded the bound: the timeline was re-anchored at this packet.
    pub slipped: bool,
}

/// Schedules packets on an absolute monotonic timeline. Packets are numbered from 0 over the
/// whole run; after a slip the timeline is re-anchored so that the slipping packet is due at the
/// moment it left.
#[derive(Debug, Clone)]
pub struct Pacer {
    spacing: Spacing,
    /// Instant at which packet `anchor_n` is due.
    anchor: Instant,
    anchor_n: u64,
    /// Index of the next packet (= packets released so far).
    next: u64,
    max_lag: Duration,
    slips: u64,
    slipped_total: Duration,
    /// Behind the timeline, releases come at most this many times faster than the spacing
    /// (`None`: whatever is due leaves at once).
    catch_up: Option<CatchUp>,
    /// When the last packet (or batch) left.
    last_release: Option<Instant>,
    /// Packets are fixed to the clock (a backend's frames carry their time): beyond the bound
    /// they are skipped, never sent late, and the timeline is never re-anchored.
    fixed_to_clock: bool,
    /// Packets skipped because their time had passed by more than the bound.
    skipped: u64,
}

impl Pacer {
    /// Packet 0 is due at `start`, packet `n` at `start + n·spacing`. Falling more than
    /// [`Pacer::default_max_lag`] behind re-anchors the timeline instead of bursting.
    pub fn new(start: Instant, spacing: Spacing) -> Pacer {
        Pacer {
            spacing,
            anchor: start,
            anchor_n: 0,
            next: 0,
            max_lag: Pacer::default_max_lag(spacing),
            slips: 0,
            slipped_total: Duration::ZERO,
            catch_up: None,
            last_release: None,
            fixed_to_clock: false,
            skipped: 0,
        }
    }

    /// Packets are fixed to the clock, as a backend's: VDIF frames carry the time they were
    /// sampled, so a sender that falls more than the bound behind must not send them late (the
    /// stream's time would lag the clock by every hold, and a recorder asked for "the next 4 s"
    /// would wait for data that come late). [`Pacer::overdue`] says how many to skip
    /// ([`Pacer::skip`]); the timeline is never re-anchored.
    pub fn fixed_to_clock(mut self) -> Pacer {
        self.fixed_to_clock = true;
        self
    }

    /// The default catch-up bound: 1 ms or 64 spacings, whichever is larger.
    pub fn default_max_lag(spacing: Spacing) -> Duration {
        spacing.offset(DEFAULT_MAX_LAG_PACKETS).max(DEFAULT_MIN_MAX_LAG)
    }

    /// Set the largest lateness that is caught up by sending at once; later than this re-anchors.
    pub fn with_max_lag(mut self, max_lag: Duration) -> Pacer {
        self.max_lag = max_lag;
        self
    }

    /// Behind the timeline (within the catch-up bound), release at most `factor` times faster
    /// than the spacing instead of back to back: a real-time stream makes up a hold without a
    /// line-rate burst into the path's queues. See [`Pacer::release_deadline`].
    pub fn with_catch_up(mut self, factor: f64) -> Pacer {
        self.catch_up = Some(CatchUp::new(self.spacing.offset(1), factor));
        self
    }

    /// The spacing.
    pub fn spacing(&self) -> Spacing {
        self.spacing
    }

    /// The catch-up bound in force.
    pub fn max_lag(&self) -> Duration {
        self.max_lag
    }

    /// Due time of packet `n` on the current timeline. Packets before the last re-anchoring are
    /// extrapolated backwards from the anchor.
    pub fn deadline(&self, n: u64) -> Instant {
        if n >= self.anchor_n {
            self.anchor + self.spacing.offset(n - self.anchor_n)
        } else {
            let back = self.spacing.offset(self.anchor_n - n);
            self.anchor.checked_sub(back).unwrap_or(self.anchor)
        }
    }

    /// Due time of the next packet.
    pub fn next_deadline(&self) -> Instant {
        self.deadline(self.next)
    }

    /// When the next `n` packets may leave together (one GSO call): at the deadline of the last
    /// of them, so that none leaves early, and — with [`Pacer::with_catch_up`] — no sooner than
    /// their span divided by the catch-up factor after the previous release.
    pub fn release_deadline(&self, n: u64) -> Instant {
        let n = n.max(1);
        let last = self.deadline(self.next + n - 1);
        match (self.last_release, self.catch_up) {
            (Some(prev), Some(rule)) => last.max(rule.earliest(prev, n)),
            _ => last,
        }
    }

    /// Pure scheduling step: `None` if the next packet may leave at `now` (on time or late),
    /// `Some(deadline)` if the caller must wait until then. Does not advance; call
    /// [`Pacer::on_sent`] once the packet left.
    pub fn poll(&self, now: Instant) -> Option<Instant> {
        if self.spacing.is_zero() {
            return None;
        }
        let due = self.next_deadline();
        (now < due).then_some(due)
    }

    /// The next packet left at `now`: advance, and return how late it was. If later than the
    /// bound, re-anchor the timeline at `now` (this packet counts as due `now`), count a slip and
    /// add the lateness to [`Pacer::slipped_total`], so that the following packets keep their
    /// spacing instead of leaving back to back.
    pub fn on_sent(&mut self, now: Instant) -> Lateness {
        if self.spacing.is_zero() {
            self.next += 1;
            return Lateness::default();
        }
        self.last_release = Some(now);
        let late = now.saturating_duration_since(self.next_deadline());
        let slipped = late > self.max_lag && !self.fixed_to_clock;
        if slipped {
            self.slips += 1;
            self.slipped_total += late;
            self.anchor = now;
            self.anchor_n = self.next;
        }
        self.next += 1;
        Lateness { late, slipped }
    }

    /// `count` packets left together at `now` (one sendmmsg): as [`Pacer::on_sent`] for the first,
    /// whose lateness is returned, then advance past the rest.
    pub fn on_sent_batch(&mut self, now: Instant, count: usize) -> Lateness {
        if count == 0 {
            return Lateness::default();
        }
        let l = self.on_sent(now);
        self.next += count as u64 - 1;
        l
    }

    /// How many packets (at most `max`) are due at `now`, for senders that hand several due
    /// packets to one sendmmsg. If the next packet is later than the bound only it is due (it will
    /// re-anchor the timeline), so a batch never becomes a catch-up burst beyond the bound.
    pub fn batch_due(&self, now: Instant, max: usize) -> usize {
        if max == 0 {
            return 0;
        }
        if self.spacing.is_zero() {
            return max;
        }
        let due = self.next_deadline();
        if now < due {
            return 0;
        }
        if now - due > self.max_lag {
            return 1;
        }
        // `now ≥ anchor` here because the next deadline is at or after the anchor.
        let elapsed = now.saturating_duration_since(self.anchor).as_nanos();
        let Some(last) = self.spacing.last_due(elapsed) else {
            return max;
        };
        let next_rel = u128::from(self.next - self.anchor_n);
        let count = (last + 1).saturating_sub(next_rel);
        usize::try_from(count).unwrap_or(usize::MAX).min(max)
    }

    /// Packets of a timeline [`Pacer::fixed_to_clock`] whose time passed by more than the bound
    /// at `now`: the caller skips them ([`Pacer::skip`]) instead of sending them late. Always 0
    /// for a timeline that re-anchors instead.
    pub fn overdue(&self, now: Instant) -> u64 {
        if !self.fixed_to_clock || self.spacing.is_zero() {
            return 0;
        }
        let Some(cutoff) = now.checked_sub(self.max_lag) else {
            return 0;
        };
        if cutoff <= self.next_deadline() {
            return 0;
        }
        // Packets due strictly before the cutoff: the last due at or before `cutoff − 1 ns`.
        let elapsed = cutoff
            .saturating_duration_since(self.anchor)
            .as_nanos()
            .saturating_sub(1);
        let Some(last) = self.spacing.last_due(elapsed) else {
            return 0;
        };
        let next_rel = u128::from(self.next - self.anchor_n);
        u64::try_from((last + 1).saturating_sub(next_rel)).unwrap_or(u64::MAX)
    }

    /// `n` packets were skipped (their time had passed): the timeline moves past them.
    pub fn skip(&mut self, n: u64) {
        self.next = self.next.saturating_add(n);
        self.skipped = self.skipped.saturating_add(n);
    }

    /// Packets skipped on a timeline fixed to the clock.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Packets released so far (skipped ones included).
    pub fn sent(&self) -> u64 {
        self.next
    }

    /// Times the timeline was re-anchored because the sender fell more than the bound behind.
    pub fn slips(&self) -> u64 {
        self.slips
    }

    /// Total lateness given up at slips (time the stream lost against its schedule).
    pub fn slipped_total(&self) -> Duration {
        self.slipped_total
    }
}

/// How a backlog leaves: at most `factor` times faster than the stream's spacing, so a stream
/// that was held up makes up the time without a line-rate burst into a shallow router queue
/// (the relay and the sender share this rule; jive5ab sends a backlog back to back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CatchUp {
    spacing: Duration,
    factor: f64,
}

impl CatchUp {
    /// Departures at most `factor` (≥ 1) times faster than one per `spacing`.
    pub fn new(spacing: Duration, factor: f64) -> CatchUp {
        CatchUp {
            spacing,
            factor: factor.max(1.0),
        }
    }

    /// The shortest time between two departures.
    pub fn spacing(&self) -> Duration {
        self.spacing.div_f64(self.factor)
    }

    /// When `n` (at least 1) more packets may have left after a departure at `prev`.
    pub fn earliest(&self, prev: Instant, n: u64) -> Instant {
        prev + self.span(n)
    }

    /// The time `n` (at least 1) departures take at the catch-up rate (multiplied before it is
    /// divided, so a long batch carries no per-packet rounding).
    pub fn span(&self, n: u64) -> Duration {
        let n = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        self.spacing.saturating_mul(n).div_f64(self.factor)
    }
}

/// Departures at a rate that changes as a congestion controller learns the path (the bulk
/// transfer's sender): each packet moves the next departure on by its wire bytes at the rate in
/// force, so a rate change applies from the next packet. A sender that was idle or late keeps at
/// most `granularity` of credit, so it never catches up with a burst longer than that (the
/// token bucket of quinn-proto's pacer, with the bucket one granularity deep).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatePacer {
    next: Instant,
    granularity: Duration,
}

impl RatePacer {
    /// The first packet may leave at `now`; at most `granularity` of credit is ever kept.
    pub fn new(now: Instant, granularity: Duration) -> RatePacer {
        RatePacer { next: now, granularity }
    }

    /// Start over at `now` (the end of a probing phase): no credit, no debt.
    pub fn restart(&mut self, now: Instant) {
        self.next = now;
    }

    /// When the next packet may leave.
    pub fn next_departure(&self) -> Instant {
        self.next
    }

    /// Whether a packet may leave at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        self.next <= now
    }

    /// When a sender sleeping in `granularity` steps should wake for the next packet: halfway
    /// through the granularity past it, so the wake-up is late by less than the credit it keeps.
    pub fn wake_at(&self) -> Instant {
        self.next + self.granularity / 2
    }

    /// A packet of `wire_bytes` left at `now` while the rate was `bits_per_second` (at least
    /// [`MIN_RATE_BPS`] taken): the next departure moves on by the packet's time at that rate,
    /// in whole nanoseconds from integers (rounded down, as [`Spacing`] does; no float to drift).
    pub fn on_sent(&mut self, now: Instant, wire_bytes: u64, bits_per_second: u64) {
        let base = self.next.max(now.checked_sub(self.granularity).unwrap_or(now));
        self.next = base + packet_time(wire_bytes, bits_per_second);
    }
}

/// The lowest rate a [`RatePacer`] paces at, b/s: below it a packet would wait for seconds.
pub const MIN_RATE_BPS: u64 = 1000;

/// The time `wire_bytes` take at `bits_per_second` (at least [`MIN_RATE_BPS`]), whole ns rounded
/// down, saturating at `u64::MAX` ns.
fn packet_time(wire_bytes: u64, bits_per_second: u64) -> Duration {
    let ns = u128::from(wire_bytes) * 8 * 1_000_000_000 / u128::from(bits_per_second.max(MIN_RATE_BPS));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn exact_rational_spacing() {
        let s = Spacing::from_rate(8000, 4_096_000_000);
        assert_eq!(s.deadline_ns(1), 15_625);
        assert_eq!(Spacing::from_rate(8192, 4_096_000_000).deadline_ns(1), 16_000);
        // 10⁶ frames: exactly 15.625 s, no drift.
        assert_eq!(s.deadline_ns(1_000_000), 15_625_000_000);
        // A non-integral spacing stays exact over many packets.
        let odd = Spacing::from_rate(1000, 3_000_000_000); // 2666.67 ns
        assert_eq!(odd.deadline_ns(1), 2666);
        assert_eq!(odd.deadline_ns(3), 8000);
        assert_eq!(odd.deadline_ns(3_000_000_000), 8_000_000_000_000);
        assert_eq!(Spacing::from_nanos(20_000).deadline_ns(7), 140_000);
        assert!(Spacing::from_rate(8000, 0).is_zero());
        assert_eq!(
            Spacing::from_rate(1, 1).deadline_ns(u64::MAX),
            u128::from(u64::MAX) * 8_000_000_000
        );
    }

    #[test]
    fn pacer_deadlines_do_not_drift() {
        let t0 = Instant::now();
        let p = Pacer::new(t0, Spacing::from_rate(8000, 4_096_000_000));
        assert_eq!(p.deadline(0), t0);
        assert_eq!(p.deadline(1) - t0, Duration::from_nanos(15_625));
        assert_eq!(p.deadline(1_000_000) - t0, Duration::from_millis(15_625));
        assert_eq!(p.max_lag(), Duration::from_millis(1)); // 64 · 15.625 µs = 1 ms exactly
        let slow = Pacer::new(t0, Spacing::from_nanos(100_000));
        assert_eq!(slow.max_lag(), Duration::from_micros(6400));
    }

    #[test]
    fn poll_and_batch_due_follow_the_timeline() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, Spacing::from_nanos(10_000));
        assert_eq!(p.poll(t0), None);
        assert_eq!(p.batch_due(t0, 100), 1);
        assert_eq!(p.batch_due(t0 + 25 * US, 100), 3); // packets 0, 1, 2
        assert_eq!(p.batch_due(t0 + 25 * US, 2), 2);
        assert_eq!(p.batch_due(t0, 0), 0);
        assert!(!p.on_sent(t0).slipped);
        assert_eq!(p.poll(t0 + 5 * US), Some(t0 + 10 * US));
        assert_eq!(p.batch_due(t0 + 5 * US, 100), 0);
        assert_eq!(p.on_sent_batch(t0 + 30 * US, 3).late, 20 * US); // packets 1..=3
        assert_eq!(p.sent(), 4);
        assert_eq!(p.poll(t0 + 30 * US), Some(t0 + 40 * US));
    }

    #[test]
    fn non_integral_batch_due_matches_deadlines() {
        let t0 = Instant::now();
        let p = Pacer::new(t0, Spacing::from_rate(1000, 3_000_000_000)).with_max_lag(Duration::from_secs(1));
        for ns in [0u64, 1, 2665, 2666, 2667, 5333, 5334, 8000, 100_000] {
            let now = t0 + Duration::from_nanos(ns);
            let by_loop = (0..1000u64).take_while(|&k| p.deadline(k) <= now).count();
            assert_eq!(p.batch_due(now, 1000), by_loop, "at {ns} ns");
        }
    }

    #[test]
    fn a_timeline_fixed_to_the_clock_skips_what_is_overdue_and_never_reanchors() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // One packet per ms, 2 ms bound.
        let mut p = Pacer::new(t0, Spacing::from_nanos(1_000_000))
            .with_max_lag(ms(2))
            .fixed_to_clock();
        assert_eq!(p.overdue(t0 + ms(2)), 0);
        p.on_sent(t0);
        // Held up until 10.5 ms: packets 1..=8 (due before 8.5 ms) are beyond the bound.
        let now = t0 + ms(10) + 500 * US;
        assert_eq!(p.overdue(now), 8);
        p.skip(8);
        assert_eq!((p.skipped(), p.sent(), p.overdue(now)), (8, 9, 0));
        // Packet 9 leaves 1.5 ms late: within the bound, on the same timeline.
        assert_eq!(p.next_deadline(), t0 + ms(9));
        let l = p.on_sent(now);
        assert_eq!((l.late, l.slipped), (ms(1) + 500 * US, false));
        // Exactly at the bound a packet is still sent; later it is skipped.
        assert_eq!(p.overdue(t0 + ms(12)), 0);
        assert_eq!(p.overdue(t0 + ms(12) + US), 1);
        // Later than any bound on_sent still keeps the timeline (the caller should have skipped).
        assert!(!p.on_sent(t0 + ms(50)).slipped);
        assert_eq!((p.slips(), p.next_deadline()), (0, t0 + ms(11)));
        // A re-anchoring timeline never reports anything overdue.
        let r = Pacer::new(t0, Spacing::from_nanos(1_000_000)).with_max_lag(ms(2));
        assert_eq!(r.overdue(t0 + ms(100)), 0);
    }

    #[test]
    fn small_lateness_is_caught_up_large_lateness_slips() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, Spacing::from_nanos(10_000));
        assert_eq!(p.on_sent(t0).late, Duration::ZERO);
        // 50 µs late for packet 1 (due at 10 µs): below the 1 ms bound → sent at once, and
        // packets 2..=6 are already due too.
        let now = t0 + 60 * US;
        assert_eq!(p.poll(now), None);
        let l = p.on_sent(now);
        assert_eq!(
            l,
            Lateness {
                late: 50 * US,
                slipped: false
            }
        );
        assert_eq!(p.batch_due(now, 100), 5);
        assert_eq!(p.slips(), 0);
        // 5 ms late: only this one packet is due, it re-anchors, nothing else is due at once.
        let now = t0 + Duration::from_millis(5);
        assert_eq!(p.batch_due(now, 100), 1);
        let l = p.on_sent(now);
        assert!(l.slipped);
        assert_eq!(l.late, Duration::from_millis(5) - 20 * US);
        assert_eq!(p.slips(), 1);
        assert_eq!(p.slipped_total(), l.late);
        assert_eq!(p.next_deadline(), now + 10 * US);
        assert_eq!(p.batch_due(now, 100), 0);
        assert_eq!(p.poll(now), Some(now + 10 * US));
        // Deadlines keep the global numbering: packet 2 was the slipping one, due at `now`.
        assert_eq!(p.deadline(2), now);
        assert_eq!(p.deadline(1), now - 10 * US);
    }

    #[test]
    fn bursts_leave_at_their_last_deadline_and_catch_up_at_the_factor() {
        let t0 = Instant::now();
        let plain = Pacer::new(t0, Spacing::from_nanos(10_000));
        let mut p = Pacer::new(t0, Spacing::from_nanos(10_000)).with_catch_up(2.0);
        assert_eq!(
            plain.release_deadline(4),
            t0 + 30 * US,
            "a burst of 4 waits for its last"
        );
        assert_eq!(
            p.release_deadline(4),
            t0 + 30 * US,
            "nothing released yet: no catch-up limit"
        );
        assert_eq!(p.release_deadline(0), t0, "an empty burst is one packet");
        // Packets 0..4 leave 470 µs late (within the 1 ms bound): the next burst of 4 is long due
        // (its last at 70 µs) but leaves 4 × 10 µs / 2 after the previous release.
        p.on_sent_batch(t0 + 500 * US, 4);
        assert_eq!(p.slips(), 0);
        assert_eq!(p.release_deadline(4), t0 + 520 * US);
        assert_eq!(p.release_deadline(1), t0 + 505 * US);
        // On time again, the timeline rules: a burst whose last is due later waits for it.
        p.on_sent_batch(t0 + 520 * US, 48);
        assert_eq!(p.release_deadline(4), t0 + 550 * US);
    }

    #[test]
    fn a_packet_s_time_is_whole_nanoseconds_from_integers() {
        // 1 byte at 3 kb/s is 8/3 ms: 2 666 666 ns, rounded down (not a float's nearest).
        assert_eq!(packet_time(1, 3_000), Duration::from_nanos(2_666_666));
        // Below the floor the floor paces; 0 b/s (a controller that knows nothing yet) too.
        assert_eq!(packet_time(125, 0), Duration::from_secs(1));
        assert_eq!(packet_time(125, 999), Duration::from_secs(1));
        // 9000-byte jumbo frames at 100 Gb/s: 720 ns exactly.
        assert_eq!(packet_time(9000, 100_000_000_000), Duration::from_nanos(720));
        // Past what a Duration of u64 ns holds: saturated, no panic.
        assert_eq!(packet_time(u64::MAX, 1000), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn a_rate_pacer_keeps_one_granularity_of_credit() {
        let t0 = Instant::now();
        let mut p = RatePacer::new(t0, 100 * US);
        assert!(p.ready(t0));
        // 1250 bytes at 1 Gb/s: 10 µs each.
        p.on_sent(t0, 1250, 1_000_000_000);
        assert_eq!(p.next_departure(), t0 + 10 * US);
        assert!(!p.ready(t0 + 9 * US));
        // The rate halves: the next packet moves the departure on by 20 µs.
        p.on_sent(t0 + 10 * US, 1250, 500_000_000);
        assert_eq!(p.next_departure(), t0 + 30 * US);
        // Idle for a millisecond: only 100 µs of credit is kept (10 packets back to back).
        let later = t0 + Duration::from_millis(1);
        p.on_sent(later, 1250, 1_000_000_000);
        assert_eq!(p.next_departure(), later - 90 * US);
        assert_eq!(p.wake_at(), later - 40 * US);
        p.restart(later);
        assert_eq!(p.next_departure(), later);
    }

    #[test]
    fn unpaced_never_waits_or_slips() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, Spacing::ZERO);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(p.poll(later), None);
        assert_eq!(p.batch_due(later, 64), 64);
        assert_eq!(p.on_sent(later), Lateness::default());
        assert_eq!(p.slips(), 0);
        assert_eq!(p.sent(), 1);
    }
}

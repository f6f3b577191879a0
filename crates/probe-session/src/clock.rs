//! The clocks a probe session reads: this process's monotonic timeline and the wall clock of the
//! kernel's receive stamps.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds on this process's monotonic clock.
pub fn now_ns() -> u64 {
    instant_ns(Instant::now())
}

/// An instant on the [`now_ns`] timeline (0 for instants before the timeline began).
pub fn instant_ns(t: Instant) -> u64 {
    let start = *START.get_or_init(Instant::now);
    u64::try_from(t.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME): the clock of the kernel's SO_TIMESTAMPNS
/// receive stamps, so the receiver uses it when a datagram comes without one.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

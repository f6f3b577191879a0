//! Absolute-timeline pacing: packet n leaves at start + n·spacing, never "now + spacing", so
//! sleep overshoot does not accumulate (jive5ab's relative µs delays drift). Sleep until shortly
//! before the deadline (Linux timer slack is ~50 µs), then spin.

use std::time::{Duration, Instant};

/// Sleep no closer than this to a deadline; spin the rest.
const SPIN: Duration = Duration::from_micros(100);

/// Wait until `deadline`; returns immediately if it has passed.
pub(crate) fn wait_until(deadline: Instant) {
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

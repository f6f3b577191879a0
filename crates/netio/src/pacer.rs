//! The waiting half of pacing: the schedule itself is pure and lives in the core crate `pacing`
//! ([`pacing::Pacer`]); here the thread sleeps until its deadline and spins the last stretch.

// unsafe: prctl(PR_SET_TIMERSLACK): std cannot set the timer slack.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use pacing::{Lateness, Pacer};

/// Default: sleep until this close to a deadline, spin the rest. Linux timer slack is ~50 µs
/// (prctl(2) PR_SET_TIMERSLACK), so a sleep may overshoot by that much; 100 µs leaves margin.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(100);

/// Wait until the pacer's next packet is due (sleep to `spin` before the deadline, then spin),
/// mark it released and return its lateness. Send the packet right after this returns.
pub fn wait_next(pacer: &mut Pacer, spin: Duration) -> Lateness {
    if let Some(due) = pacer.poll(Instant::now()) {
        wait_until_spin(due, spin);
    }
    pacer.on_sent(Instant::now())
}

/// Ask the kernel to wake this thread's sleeps without timer slack (PR_SET_TIMERSLACK 1 ns;
/// the default 50 µs lets a sleep end that much late), so that a short spin window after the
/// sleep still meets the deadline. On a 2-core VM: wake-up overshoot p50 8 µs, p90 10 µs, p99
/// 46 µs with it; p50 59 µs without. Returns whether the kernel accepted it.
pub fn fine_timer_slack() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long by value and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) == 0 }
}

/// Wait until `deadline`: sleep to [`DEFAULT_SPIN`] before it, then spin. Returns at once if it
/// passed.
pub fn wait_until(deadline: Instant) {
    wait_until_spin(deadline, DEFAULT_SPIN);
}

/// Wait until `deadline`, sleeping until `spin` before it and spinning the rest.
pub fn wait_until_spin(deadline: Instant, spin: Duration) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > spin {
            std::thread::sleep(left - spin);
        } else {
            std::hint::spin_loop();
        }
    }
}

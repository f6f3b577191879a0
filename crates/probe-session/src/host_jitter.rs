//! `evlbi probe host-jitter`: run the sender's pacer with nothing to send and record how evenly
//! this host releases it ([`probe::host_jitter`] holds the statistics and the reasoning).

// unsafe: getrusage(RUSAGE_THREAD): a thread's CPU time; std cannot ask.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use netio::pacer::DEFAULT_SPIN;
use pacing::{Pacer, Spacing};
use probe::host_jitter::{HostJitter, HostJitterReport};

/// Longest measurement accepted (the spin takes a whole core).
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// Spin-pace releases every `spacing` for `duration` on the calling thread. Sleeps like a sender
/// would when the next release is more than the pacer's spin window away; interruptions are
/// only looked for while spinning. `progress` is called about ten times a second with the share
/// done (0..1).
pub fn measure(spacing: Spacing, duration: Duration, mut progress: impl FnMut(f64)) -> HostJitterReport {
    let duration = duration.min(MAX_DURATION);
    let spacing_ns = spacing.as_nanos_f64().round() as u64;
    let mut acc = HostJitter::new(spacing_ns);
    let t0 = Instant::now();
    let ns = |t: Instant| u64::try_from(t.saturating_duration_since(t0).as_nanos()).unwrap_or(u64::MAX);
    // A short lead so that release 0 is not already late when the loop starts.
    let start = t0 + Duration::from_millis(1);
    let end = start + duration;
    let mut pacer = Pacer::new(start, spacing);
    let nivcsw_before = involuntary_context_switches();
    let mut next_progress = start;
    loop {
        let due = pacer.next_deadline();
        if due >= end {
            break;
        }
        let now = Instant::now();
        if now >= next_progress {
            progress(now.saturating_duration_since(start).as_secs_f64() / duration.as_secs_f64().max(1e-9));
            next_progress = now + Duration::from_millis(100);
        }
        if due > now + DEFAULT_SPIN {
            std::thread::sleep(due - now - DEFAULT_SPIN);
        }
        let mut prev = Instant::now();
        let released = loop {
            if prev >= due {
                break prev;
            }
            std::hint::spin_loop();
            let t = Instant::now();
            acc.on_spin_step(ns(prev), ns(t));
            prev = t;
        };
        acc.on_release(ns(due), ns(released));
        pacer.on_sent(released);
    }
    let nivcsw = involuntary_context_switches().saturating_sub(nivcsw_before);
    progress(1.0);
    acc.report(ns(Instant::now()).saturating_sub(ns(start)), nivcsw, pacer.slips())
}

/// This thread's involuntary context switches so far (getrusage(RUSAGE_THREAD) ru_nivcsw).
fn involuntary_context_switches() -> u64 {
    // SAFETY: getrusage writes one rusage struct into memory we own; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a live rusage; RUSAGE_THREAD is supported since Linux 2.6.26.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc == 0 {
        u64::try_from(ru.ru_nivcsw).unwrap_or(0)
    } else {
        0
    }
}

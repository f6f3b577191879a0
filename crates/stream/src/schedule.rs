//! When a station's frames may leave: the [`Schedule`] the [`crate::Sender`] asks, and the one
//! schedule every sender of frames in a known rhythm uses, [`PacedSchedule`] — the exact
//! absolute timeline of [`pacing::Pacer`], per frame (a file) or per time step (a backend's board
//! sends one frame of each of its threads at once). The relay's live queue is the other
//! [`Schedule`] (frames leave as they came, smoothed, and a backlog at the [`pacing::CatchUp`]
//! rate). Sans-IO: the caller reads the clock and sleeps.

use std::time::{Duration, Instant};

use pacing::Pacer;

/// A station's departure schedule: when its next frames may leave, and what happened when they
/// did: [`PacedSchedule`] for a file or a backend, the relay's live queue for frames as they come.
pub trait Schedule {
    /// Due time of the next frame.
    fn next_deadline(&self) -> Instant;
    /// When the next `n` frames may leave together.
    fn release_deadline(&self, n: u64) -> Instant;
    /// `count` frames left together at `now`; returns how late the first was.
    fn on_sent_batch(&mut self, now: Instant, count: usize) -> Duration;
    /// Times the schedule gave up time (re-anchored) because the sender fell too far behind.
    fn slips(&self) -> u64 {
        0
    }
    /// Time given up at those slips.
    fn slipped_total(&self) -> Duration {
        Duration::ZERO
    }
    /// Frames whose time passed at `now` by more than the catch-up bound, on a schedule fixed
    /// to the clock (a backend's): the sender skips them instead of sending them late.
    fn overdue(&self, _now: Instant) -> u64 {
        0
    }
    /// `n` frames were skipped ([`Schedule::overdue`]): the schedule moves past them.
    fn on_skipped(&mut self, _n: u64) {}
    /// Frames that are due together (one per thread of a time step when a backend's board
    /// sends a step's frames at once; 1 when every frame has its own slot). The achieved rate
    /// counts the data from the first departure to the last: the last release's frames are
    /// not inside that span.
    fn frames_per_release(&self) -> u64 {
        1
    }
    /// Whether a batch holds only frames already due at the time it is framed (a live queue:
    /// frames that fell due while the caller slept leave together in one GSO call, the next
    /// keep their own times); otherwise `burst` frames leave together at the first one's time.
    fn batches_only_due(&self) -> bool {
        false
    }
}

/// A station's departures on the absolute timeline of a [`Pacer`]. With `per_step` 1 every
/// frame has its own slot; with `per_step` m the pacer counts time steps (one frame of each of
/// the m threads a board carries) and the m frames of a step are all due at its start, so they
/// leave back to back as a backend's do.
pub struct PacedSchedule {
    pacer: Pacer,
    per_step: u64,
    /// Frames of the current step already sent.
    in_step: u64,
}

impl PacedSchedule {
    /// Every frame in its own slot of `pacer`'s timeline.
    pub fn frames(pacer: Pacer) -> PacedSchedule {
        PacedSchedule {
            pacer,
            per_step: 1,
            in_step: 0,
        }
    }

    /// `pacer` counts time steps of `per_step` frames each, all due at the step's start.
    pub fn steps(pacer: Pacer, per_step: u64) -> PacedSchedule {
        PacedSchedule {
            pacer,
            per_step: per_step.max(1),
            in_step: 0,
        }
    }
}

impl Schedule for PacedSchedule {
    fn next_deadline(&self) -> Instant {
        self.pacer.next_deadline()
    }

    fn release_deadline(&self, n: u64) -> Instant {
        if self.per_step == 1 {
            return self.pacer.release_deadline(n);
        }
        // The step holding the last of the n frames; the rest of a step already begun is due at
        // once (the catch-up bound applies between steps, not within one).
        let steps_ahead = (self.in_step + n.max(1) - 1) / self.per_step;
        if self.in_step > 0 && steps_ahead == 0 {
            self.pacer.next_deadline()
        } else {
            self.pacer.release_deadline(steps_ahead + 1)
        }
    }

    fn on_sent_batch(&mut self, now: Instant, count: usize) -> Duration {
        if self.per_step == 1 {
            return self.pacer.on_sent_batch(now, count).late;
        }
        let late = now.saturating_duration_since(self.pacer.next_deadline());
        let mut left = count as u64;
        while left > 0 {
            let take = (self.per_step - self.in_step).min(left);
            self.in_step += take;
            left -= take;
            if self.in_step == self.per_step {
                // The step is complete: the pacer moves on to the next one.
                self.pacer.on_sent(now);
                self.in_step = 0;
            }
        }
        late
    }

    fn overdue(&self, now: Instant) -> u64 {
        // Whole steps are overdue (the pacer counts steps); the rest of a begun step goes too.
        match self.pacer.overdue(now) {
            0 => 0,
            steps => steps.saturating_mul(self.per_step).saturating_sub(self.in_step),
        }
    }

    fn on_skipped(&mut self, n: u64) {
        let frames = self.in_step + n;
        self.pacer.skip(frames / self.per_step);
        self.in_step = frames % self.per_step;
    }

    fn slips(&self) -> u64 {
        self.pacer.slips()
    }

    fn slipped_total(&self) -> Duration {
        self.pacer.slipped_total()
    }

    fn frames_per_release(&self) -> u64 {
        self.per_step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacing::Spacing;

    #[test]
    fn the_frames_of_a_time_step_are_due_together() {
        // 2 frames per step, one step per millisecond.
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut p = PacedSchedule::steps(Pacer::new(t0, Spacing::from_nanos(1_000_000)), 2);
        assert_eq!(p.release_deadline(1), t0);
        assert_eq!(
            p.on_sent_batch(t0 + Duration::from_micros(10), 1),
            Duration::from_micros(10)
        );
        // The step's second frame is due at once, the next step a millisecond on.
        assert_eq!(p.release_deadline(1), t0);
        p.on_sent_batch(t0 + Duration::from_micros(20), 1);
        assert_eq!(p.next_deadline(), t0 + ms(1));
        // Three frames from a step's start reach into the following step.
        assert_eq!(p.release_deadline(3), t0 + ms(2));
        p.on_sent_batch(t0 + ms(2), 3);
        assert_eq!((p.in_step, p.next_deadline()), (1, t0 + ms(2)));
        // Fixed to the clock (1 ms bound), held up until step 5 is 1.5 ms old: steps 3 (its
        // second frame: one was sent), 4 and 5... are overdue by whole steps, frames counted.
        let mut c = PacedSchedule::steps(
            Pacer::new(t0, Spacing::from_nanos(1_000_000))
                .with_max_lag(ms(1))
                .fixed_to_clock(),
            2,
        );
        c.on_sent_batch(t0, 2);
        c.on_sent_batch(t0 + ms(1), 2);
        c.on_sent_batch(t0 + ms(2), 2);
        c.on_sent_batch(t0 + ms(3), 1);
        let now = t0 + ms(6) + Duration::from_micros(500);
        // Steps 3, 4 and 5 are due before 5.5 ms: 3 steps less the frame of step 3 sent.
        assert_eq!(c.overdue(now), 5);
        c.on_skipped(5);
        assert_eq!((c.in_step, c.next_deadline(), c.overdue(now)), (0, t0 + ms(6), 0));
        // One frame per step is the plain per-frame pacer.
        let mut f = PacedSchedule::frames(Pacer::new(t0, Spacing::from_nanos(1_000_000)));
        f.on_sent_batch(t0, 1);
        assert_eq!(f.release_deadline(1), t0 + ms(1));
    }
}

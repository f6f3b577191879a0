//! What may move a stream's front: the run of candidates that shows a jump, and the clock that
//! says how far the stream's own history lets the front move (see the window's docs).

use std::time::{Duration, Instant};

/// A run of mutually consistent frames the window could not place (out of range, or ahead of
/// what the stream's time explains), the evidence for a jump. Only the newest
/// frames' bytes are kept (bounded memory however long the run); the run's length and the
/// threads it came from are counted over all of it.
#[derive(Default)]
pub(super) struct Candidates {
    /// The newest frames of the run: slot, bytes, and the caller's sequence number.
    pub(super) held: std::collections::VecDeque<(u64, Vec<u8>, Option<u64>)>,
    /// Frames in the run, held or not.
    pub(super) run: u64,
    /// Which thread indices the run came from, and how many.
    pub(super) from_thread: Vec<bool>,
    pub(super) threads: usize,
    /// When the run's first and latest frames arrived (frames pushed with a time).
    pub(super) first_at: Option<Instant>,
    pub(super) last_at: Option<Instant>,
    /// Every frame of the run was in range, held only because the stream's time did not
    /// explain it yet (see [`super::StationWindow::push_at`]).
    pub(super) gated: bool,
}

impl Candidates {
    /// Forget the run; the number of frames dropped with it.
    pub(super) fn clear(&mut self) -> u64 {
        let n = self.held.len() as u64;
        self.held.clear();
        self.run = 0;
        self.from_thread.iter_mut().for_each(|t| *t = false);
        self.threads = 0;
        self.first_at = None;
        self.last_at = None;
        n
    }

    /// Whether thread index `thread` sent frames of the run.
    pub(super) fn has_thread(&self, thread: usize) -> bool {
        self.from_thread.get(thread).copied().unwrap_or(false)
    }

    /// How long (wall time) the run has lasted, when its frames came with their arrival times.
    pub(super) fn lasted(&self) -> Option<Duration> {
        Some(self.last_at?.saturating_duration_since(self.first_at?))
    }

    /// Add a frame of thread index `thread`, keeping at most `keep` frames' bytes; whether the
    /// oldest held one was let go.
    #[allow(clippy::too_many_arguments)] // one frame and how to hold it
    pub(super) fn push(
        &mut self,
        slot: u64,
        thread: usize,
        frame: &[u8],
        seq: Option<u64>,
        keep: usize,
        at: Option<Instant>,
        gated: bool,
    ) -> bool {
        self.gated = gated && (self.run == 0 || self.gated);
        if let Some(at) = at {
            self.first_at.get_or_insert(at);
            self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
        }
        if self.from_thread.len() <= thread {
            self.from_thread.resize(thread + 1, false);
        }
        if !std::mem::replace(&mut self.from_thread[thread], true) {
            self.threads += 1;
        }
        self.run += 1;
        self.held.push_back((slot, frame.to_vec(), seq));
        self.held.len() > keep.max(1) && self.held.pop_front().is_some()
    }
}

/// Most candidate frames whose bytes are held (the newest of a run); older ones of a long run
/// are counted out of range. Bounds the memory a flood of consistent forged frames can take.
pub(super) const MAX_HELD_CANDIDATES: usize = 64;
/// Most bytes of candidate frames held while a timed run must last (see
/// `StationWindow::held_while_timed`): 4 MiB (512 frames of 8 KB).
pub(super) const MAX_HELD_CANDIDATE_BYTES: usize = 4 << 20;
/// The front may leave frame times unfilled behind it at this many times the frame rate of the
/// time since it last advanced (a gap of lost frames takes that long to have been sent; twice,
/// for jitter and a sender catching up).
const SKIP_RATE_FACTOR: f64 = 2.0;

/// How far the stream's front may move given its history (frames pushed with their arrival
/// time): a budget of frame times it may skip, refilled at [`SKIP_RATE_FACTOR`] × the frame rate
/// and capped at `burst` plus what the time since the front last advanced explains. A burst of
/// forged frames ahead of the stream can so skip at most about `burst` frame times in all.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrontClock {
    /// When the front last advanced.
    advanced_at: Instant,
    /// Frame times it may skip, as of `budget_at`.
    budget: f64,
    budget_at: Instant,
}

impl FrontClock {
    pub(super) fn new(now: Instant, burst: f64) -> Self {
        FrontClock {
            advanced_at: now,
            budget: burst,
            budget_at: now,
        }
    }

    /// Frame times the front may skip at `now` (`rate`: frame times per second).
    pub(super) fn allowance(&self, now: Instant, rate: f64, burst: f64) -> f64 {
        let since = |t: Instant| now.saturating_duration_since(t).as_secs_f64() * rate * SKIP_RATE_FACTOR;
        (self.budget + since(self.budget_at)).min(burst + since(self.advanced_at))
    }

    /// The front advanced at `now`, leaving `skipped` frame times unfilled behind it. (An
    /// advance that skips nothing only moves `advanced_at`: carrying the budget forward then
    /// gives the same allowance later, since the second bound of the minimum is then the
    /// tighter of the two — one store per in-order frame.)
    pub(super) fn advance(&mut self, now: Instant, skipped: u64, rate: f64, burst: f64) {
        if skipped > 0 {
            self.budget = (self.allowance(now, rate, burst) - skipped as f64).max(0.0);
            self.budget_at = now;
        }
        self.advanced_at = self.advanced_at.max(now);
    }
}

//! A station's frames between the relay's input and its output: the queue and its departure
//! rule (the relay's module docs, "Pacing" and "Memory"), as the [`FrameSource`] and
//! [`Schedule`] halves the output's [`crate::Sender`] drives.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use histogram::Hist;
use pacing::CatchUp;

use super::{BATCH_WAIT_MAX, PACE_HEADROOM};
use crate::sender::{Frame, FrameSource, Schedule};

/// A frame waiting to go out: where it lies (a slice of the buffer it was received into, shared,
/// never copied) and when it came.
pub(super) struct Queued {
    pub(super) arrival: Instant,
    pub(super) bytes: Bytes,
}

/// One station's frames between input and output, and its departure rule (see the module docs).
/// Shared by the station's [`FrameSource`] and [`Schedule`] halves, which the [`Sender`] owns.
pub(super) struct LiveQueue {
    pub(super) created: Instant,
    pub(super) frames: VecDeque<Queued>,
    /// Bytes queued over all stations (shared), and its bound.
    pub(super) queued: Rc<Cell<usize>>,
    pub(super) limit: usize,
    /// The data rate's spacing over [`PACE_HEADROOM`], and the catch-up spacing: worked out
    /// once, not per frame (two float divisions per frame and per look at a batch were 2.5 % of
    /// the relay's CPU).
    paced: Duration,
    fast: Duration,
    /// How a backlog leaves (the sender's rule: never at line rate).
    pub(super) catch_up: CatchUp,
    pub(super) smoothing: Duration,
    /// When the previous frame left.
    pub(super) last_release: Option<Instant>,
    /// The previous frame's place on the smooth timeline.
    pub(super) last_timeline: Option<Instant>,
    /// Arrivals of the frames handed to the sender and not yet stamped as sent (one batch).
    pub(super) pending_arrivals: Vec<Instant>,
    pub(super) delay: Hist,
    pub(super) overflow_dropped: u64,
    pub(super) frames_out: u64,
}

impl LiveQueue {
    pub(super) fn new(
        created: Instant,
        spacing: Duration,
        (catch_up, smoothing): (f64, Duration),
        queued: Rc<Cell<usize>>,
        limit: usize,
    ) -> LiveQueue {
        let catch_up = CatchUp::new(spacing, catch_up.clamp(1.0, 16.0));
        LiveQueue {
            created,
            frames: VecDeque::new(),
            queued,
            limit,
            paced: spacing.div_f64(PACE_HEADROOM),
            fast: catch_up.spacing(),
            catch_up,
            smoothing,
            last_release: None,
            last_timeline: None,
            pending_arrivals: Vec::new(),
            delay: Hist::new(),
            overflow_dropped: 0,
            frames_out: 0,
        }
    }

    /// Queue `frame` (a handle, not a copy); when the budget is spent this station's oldest
    /// frame goes (the most stale data), or the new one if it has none.
    pub(super) fn push(&mut self, arrival: Instant, frame: Bytes) {
        while self.queued.get() + frame.len() > self.limit {
            let Some(old) = self.frames.pop_front() else {
                self.overflow_dropped += 1;
                return;
            };
            self.queued.set(self.queued.get() - old.bytes.len());
            self.overflow_dropped += 1;
        }
        self.queued.set(self.queued.get() + frame.len());
        self.frames.push_back(Queued { arrival, bytes: frame });
    }

    /// Take the head frame for the batch being framed: its place on the timeline is settled
    /// and its arrival waits to be stamped as sent.
    pub(super) fn pop(&mut self) -> Option<Bytes> {
        let a = self.frames.front()?.arrival;
        self.last_timeline = Some(self.timeline_of(a));
        let next = self.frames.pop_front()?;
        self.queued.set(self.queued.get() - next.bytes.len());
        self.pending_arrivals.push(next.arrival);
        Some(next.bytes)
    }

    /// When the head frame may leave.
    pub(super) fn due(&self) -> Option<Instant> {
        Some(self.release_of(self.frames.front()?.arrival))
    }

    /// When the first `n` queued frames (fewer if fewer wait) may all leave together: the last
    /// one's place on the timeline, and `n` catch-up spacings after the previous departure —
    /// but no later than [`BATCH_WAIT_MAX`] (or `n − 1` spacings) after the head frame's own
    /// time, so a batch that will not fill does not hold its first frame back for long.
    /// A relay that sleeps until then wakes once per batch, not once per frame (64 000 times a
    /// second at 4 Gb/s, one frame per GSO call), and in a backlog sends a full batch per
    /// wake-up, so the catch-up rate is reached even when a wake-up costs several spacings.
    pub(super) fn batch_due(&self, n: u64) -> Option<Instant> {
        let head = self.due()?;
        let k = usize::try_from(n.max(1)).unwrap_or(usize::MAX).min(self.frames.len());
        if k <= 1 {
            return Some(head);
        }
        let mut place = self.last_timeline;
        for q in self.frames.iter().take(k) {
            place = Some(self.timeline_after(place, q.arrival));
        }
        let last = place.unwrap_or(head);
        let batch = match self.last_release {
            Some(prev) => last.max(self.catch_up.earliest(prev, k as u64)),
            None => last,
        };
        let extra = u32::try_from(k - 1).unwrap_or(u32::MAX);
        let longest = self.paced.saturating_mul(extra).min(BATCH_WAIT_MAX);
        Some(batch.min(head + longest).max(head))
    }

    /// Where a frame that came at `a` sits on the smooth timeline: when it came, but one
    /// spacing after the previous frame's place — a catch-up spacing once it would wait longer
    /// than `smoothing`. The timeline follows arrivals, not departures, so a departure that was
    /// late (a wake-up on a busy host) is made up, not carried into every later frame.
    pub(super) fn timeline_of(&self, a: Instant) -> Instant {
        self.timeline_after(self.last_timeline, a)
    }

    /// [`LiveQueue::timeline_of`] after a previous place `prev`.
    pub(super) fn timeline_after(&self, prev: Option<Instant>, a: Instant) -> Instant {
        let Some(prev) = prev else {
            return a;
        };
        let normal = prev + self.paced;
        let fast = prev + self.fast;
        a.max(normal.min(fast.max(a + self.smoothing)))
    }

    /// When a frame that came at `a` may leave: its place on the timeline, and never sooner
    /// than a catch-up spacing after the previous departure (no backlog at line rate). Frames
    /// already taken into the batch being framed count as departures: a batch of n frames
    /// leaving together needs n catch-up spacings since the last, so frames that leave in one
    /// GSO call are never ahead of the one-by-one schedule.
    pub(super) fn release_of(&self, a: Instant) -> Instant {
        let t = self.timeline_of(a);
        match self.last_release {
            Some(prev) => t.max(self.catch_up.earliest(prev, self.pending_arrivals.len() as u64 + 1)),
            None => t,
        }
    }
}

/// The [`FrameSource`] half of a station's queue: it shares its frames (the sender sends them
/// from the buffers they were received into); `current` is the frame lent by
/// [`FrameSource::next_frame`] (it lives here, outside the shared cell, so the sender can borrow
/// it).
pub(super) struct LiveSource {
    pub(super) queue: Rc<RefCell<LiveQueue>>,
    pub(super) current: Bytes,
}

impl FrameSource for LiveSource {
    fn next_frame(&mut self) -> Option<Frame<'_>> {
        self.current = self.queue.borrow_mut().pop()?;
        Some(Frame {
            bytes: &self.current,
            add_seconds: 0,
        })
    }

    fn paused(&self) -> bool {
        self.queue.borrow().frames.is_empty()
    }

    fn shares_frames(&self) -> bool {
        true
    }

    fn next_shared_frame(&mut self) -> Option<Bytes> {
        self.queue.borrow_mut().pop()
    }
}

/// The [`Schedule`] half of a station's queue.
pub struct LiveSchedule(pub(super) Rc<RefCell<LiveQueue>>);

impl Schedule for LiveSchedule {
    fn next_deadline(&self) -> Instant {
        let q = self.0.borrow();
        // Asked only while frames wait (the sender skips a paused source).
        q.due().unwrap_or(q.created)
    }

    fn release_deadline(&self, n: u64) -> Instant {
        let q = self.0.borrow();
        q.batch_due(n).unwrap_or(q.created)
    }

    fn on_sent_batch(&mut self, now: Instant, count: usize) -> Duration {
        let mut q = self.0.borrow_mut();
        let late = q
            .last_timeline
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        // The catch-up rule counts from when the batch was allowed to leave, not from when the
        // send returned (a GSO call on loopback takes several spacings, and counting it would
        // hold a backlog below the catch-up rate): n frames leave n catch-up spacings after the
        // previous ones. A late batch takes at most one batch of credit, so a held-up loop
        // never releases its backlog at line rate.
        let batch = q.catch_up.span(count as u64);
        let floor = now.checked_sub(batch).unwrap_or(now);
        q.last_release = Some(q.last_release.map_or(now, |p| (p + batch).clamp(floor, now)));
        q.frames_out += count as u64;
        let LiveQueue {
            pending_arrivals,
            delay,
            ..
        } = &mut *q;
        for a in pending_arrivals.drain(..) {
            delay.record((now.saturating_duration_since(a).as_nanos() as u64).max(1));
        }
        late
    }

    fn batches_only_due(&self) -> bool {
        true
    }
}

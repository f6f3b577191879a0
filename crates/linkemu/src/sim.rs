//! Virtual-time harness: two sans-IO endpoints joined by a [`Duplex`] link.
//!
//! The clock only moves when [`Sim::step`] jumps it to the next event (an
//! endpoint timeout or a link release), so ten seconds of a 10 Gb/s path
//! run in a fraction of a second of CPU and every run is reproducible.

use std::time::{Duration, Instant};

use thiserror::Error;

use crate::link::Duplex;
use crate::stats::LinkStats;

/// A sans-IO protocol endpoint driven by [`Sim`] (or by a real socket loop).
pub trait Endpoint {
    /// A datagram from the peer arrived at `now`.
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8]);
    /// Next datagram to send at `now`; called until it returns `None`.
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>>;
    /// When [`Endpoint::handle_timeout`] should next be called, if ever.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The deadline from [`Endpoint::poll_timeout`] has passed.
    fn handle_timeout(&mut self, now: Instant);
    /// Bytes `datagram` occupies at the bottleneck.
    ///
    /// Defaults to its length. Override to add framing overhead (UDP + IPv4 +
    /// Ethernet on the wire is 66 bytes per datagram) or to let a short test
    /// datagram stand for a large frame, which keeps multi-Gb/s simulations
    /// cheap because payload bytes need not be allocated.
    fn wire_len(&self, datagram: &[u8]) -> usize {
        datagram.len()
    }
}

/// Why [`Sim::run_until`] stopped without its condition becoming true.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SimError {
    /// The virtual-time budget ran out.
    #[error("condition not met within {0:?} of virtual time")]
    Deadline(Duration),
    /// The step budget ran out (an endpoint that keeps asking for a timeout
    /// in the past makes no progress in time).
    #[error("condition not met within {0} steps")]
    StepLimit(u64),
    /// No endpoint timeout and no packet in flight: nothing can change any more.
    #[error("simulation went idle at {0:?} of virtual time without meeting the condition")]
    Idle(Duration),
}

/// Default for [`Sim::set_step_limit`].
pub const DEFAULT_STEP_LIMIT: u64 = 50_000_000;

/// Two endpoints, a duplex link and a virtual clock.
pub struct Sim<A, B> {
    a: A,
    b: B,
    link: Duplex<Vec<u8>>,
    start: Instant,
    now: Instant,
    steps: u64,
    step_limit: u64,
}

impl<A: Endpoint, B: Endpoint> Sim<A, B> {
    /// Joins `a` and `b` by `link` (`a_to_b` carries what `a` sends); the
    /// virtual clock starts at `start`.
    pub fn new(a: A, b: B, link: Duplex<Vec<u8>>, start: Instant) -> Self {
        Self {
            a,
            b,
            link,
            start,
            now: start,
            steps: 0,
            step_limit: DEFAULT_STEP_LIMIT,
        }
    }

    /// Caps the number of steps one [`Sim::run_until`] / [`Sim::run_for`] may take.
    pub fn set_step_limit(&mut self, limit: u64) {
        self.step_limit = limit;
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Virtual time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Steps taken since the start.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Endpoint A.
    pub fn a(&self) -> &A {
        &self.a
    }

    /// Endpoint A, mutably (e.g. to start a transfer mid-run).
    pub fn a_mut(&mut self) -> &mut A {
        &mut self.a
    }

    /// Endpoint B.
    pub fn b(&self) -> &B {
        &self.b
    }

    /// Endpoint B, mutably.
    pub fn b_mut(&mut self) -> &mut B {
        &mut self.b
    }

    /// Statistics of the A → B direction.
    pub fn stats_a_to_b(&self) -> &LinkStats {
        self.link.a_to_b.stats()
    }

    /// Statistics of the B → A direction.
    pub fn stats_b_to_a(&self) -> &LinkStats {
        self.link.b_to_a.stats()
    }

    /// Both links, e.g. to inspect what is in flight.
    pub fn link(&self) -> &Duplex<Vec<u8>> {
        &self.link
    }

    /// Both links, mutably.
    pub fn link_mut(&mut self) -> &mut Duplex<Vec<u8>> {
        &mut self.link
    }

    /// Earliest pending event (endpoint timeout or link release), after
    /// sending whatever the endpoints have ready now.
    pub fn next_event(&mut self) -> Option<Instant> {
        self.flush();
        [self.a.poll_timeout(), self.b.poll_timeout(), self.link.next_release()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Advances the clock to the next event (never backwards: an overdue
    /// timeout fires at the current time), delivers every packet due,
    /// fires every due timeout and sends what the endpoints produce.
    /// Returns `false` when there is nothing left to do.
    pub fn step(&mut self) -> bool {
        let Some(next) = self.next_event() else {
            return false;
        };
        self.advance(next);
        true
    }

    fn advance(&mut self, to: Instant) {
        self.now = self.now.max(to);
        let now = self.now;
        // Deliveries first, so a timeout at the same instant sees the packet
        // (as a real endpoint reading its socket before its timer would).
        while let Some(d) = self.link.a_to_b.poll(now) {
            self.b.handle_datagram(now, &d);
        }
        while let Some(d) = self.link.b_to_a.poll(now) {
            self.a.handle_datagram(now, &d);
        }
        if self.a.poll_timeout().is_some_and(|t| t <= now) {
            self.a.handle_timeout(now);
        }
        if self.b.poll_timeout().is_some_and(|t| t <= now) {
            self.b.handle_timeout(now);
        }
        self.flush();
        self.steps += 1;
    }

    /// Pushes every datagram the endpoints have ready into the links.
    fn flush(&mut self) {
        let now = self.now;
        while let Some(d) = self.a.poll_transmit(now) {
            let len = self.a.wire_len(&d);
            self.link.a_to_b.push(now, d, len);
        }
        while let Some(d) = self.b.poll_transmit(now) {
            let len = self.b.wire_len(&d);
            self.link.b_to_a.push(now, d, len);
        }
    }

    /// Steps until `done(self)` holds, at most `max_virtual` of virtual time
    /// and the step limit. The clock never passes `now + max_virtual`.
    pub fn run_until<F>(&mut self, mut done: F, max_virtual: Duration) -> Result<(), SimError>
    where
        F: FnMut(&Self) -> bool,
    {
        let deadline = self.now + max_virtual;
        let first_step = self.steps;
        loop {
            if done(self) {
                return Ok(());
            }
            if self.steps - first_step >= self.step_limit {
                return Err(SimError::StepLimit(self.step_limit));
            }
            match self.next_event() {
                None => return Err(SimError::Idle(self.elapsed())),
                Some(t) if t > deadline => {
                    self.now = self.now.max(deadline);
                    return Err(SimError::Deadline(max_virtual));
                }
                Some(t) => self.advance(t),
            }
        }
    }

    /// Processes every event up to `now + duration`, then sets the clock
    /// there. Going idle early is not an error.
    pub fn run_for(&mut self, duration: Duration) -> Result<(), SimError> {
        let deadline = self.now + duration;
        match self.run_until(|_| false, duration) {
            Err(SimError::Deadline(_)) | Err(SimError::Idle(_)) => {
                self.now = self.now.max(deadline);
                Ok(())
            }
            other => other,
        }
    }
}

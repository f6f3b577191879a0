//! Where a receiver's frames go: a recording (VDIF files, a vbs/Mark6 scan, or the memory sink)
//! or live outputs to correlators' readers.

use std::time::{Duration, Instant};

use recording::write::{Recorder, SinkOutcome};
use stream::results::LiveOutputStatus;
use stream::FrameSink;

use crate::live::LiveSink;

/// Where the receiver's frames go: a recording (VDIF files, a vbs/Mark6 scan, or the memory
/// sink) or live outputs to correlators' readers.
#[allow(clippy::large_enum_variant)] // one per receiver, never moved on the data path
pub(crate) enum Sink {
    /// A recording.
    Rec(Recorder),
    /// Live outputs.
    Live(LiveSink),
}

impl FrameSink for Sink {
    fn frame(&mut self, station: vdif::StationId, frame: &[u8], filled: bool) {
        match self {
            Sink::Rec(r) => r.frame(station, frame, filled),
            Sink::Live(l) => l.frame(station, frame, filled),
        }
    }

    fn discontinuity(&mut self, station: vdif::StationId) {
        match self {
            Sink::Rec(r) => r.discontinuity(station),
            Sink::Live(l) => l.discontinuity(station),
        }
    }
}

impl Sink {
    pub(super) fn frames(&self) -> u64 {
        match self {
            Sink::Rec(r) => r.frames(),
            Sink::Live(l) => l.counts().0,
        }
    }

    pub(super) fn filled(&self) -> u64 {
        match self {
            Sink::Rec(r) => r.filled(),
            Sink::Live(l) => l.counts().1,
        }
    }

    /// Time waited for the writers (a live output never waits).
    pub(super) fn stalled(&self) -> (Duration, u64) {
        match self {
            Sink::Rec(r) => r.stalled(),
            Sink::Live(_) => (Duration::ZERO, 0),
        }
    }

    /// How deep into the write buffer a stall reached (`None` for live outputs: they never wait).
    pub(super) fn backlog_peak(&self) -> Option<u64> {
        match self {
            Sink::Rec(r) => r.backlog_peak(),
            Sink::Live(_) => None,
        }
    }

    pub(super) fn disks_dropped(&mut self) -> u32 {
        match self {
            Sink::Rec(r) => r.disks_dropped(),
            Sink::Live(_) => 0,
        }
    }

    /// Frames taken that reached no disk so far (a live output drops for other reasons, counted
    /// in its own status).
    pub(super) fn not_written(&self) -> u64 {
        match self {
            Sink::Rec(r) => r.not_written(),
            Sink::Live(_) => 0,
        }
    }

    /// Wait (until `deadline` at most) for the recording's writers' memory; whether it is.
    pub(super) fn wait_populated(&self, deadline: Instant) -> bool {
        match self {
            Sink::Rec(r) => r.wait_populated(deadline),
            Sink::Live(_) => true,
        }
    }

    pub(super) fn live_status(&self) -> Vec<LiveOutputStatus> {
        match self {
            Sink::Rec(_) => Vec::new(),
            Sink::Live(l) => l.status(),
        }
    }

    /// Close the recording (waiting for its writers) or stop the live outputs (a reader still
    /// reading gets what is queued within `drain`).
    pub(super) fn finish(&mut self, drain: Duration) -> (SinkOutcome, Vec<LiveOutputStatus>) {
        match self {
            Sink::Rec(r) => (r.finish(), Vec::new()),
            Sink::Live(l) => (SinkOutcome::default(), l.finish(drain)),
        }
    }
}

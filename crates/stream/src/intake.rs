//! What every receiving side (the receiver, the relay) does with a datagram before it knows
//! whose it is: count why it is not a frame, and work out the shape of a new stream.

use crate::results::DatagramCounters;
use crate::wire::{DataDatagram, WireError};
use vdif::{FrameRate, RateSource, SourcedRate};

/// Frame numbers have 24 bits (VDIF 1.1.1 §3, word 1).
pub(crate) const MAX_FPS: u32 = vdif::rate::MAX_FRAMES_PER_SECOND;
/// Thread ids have 10 bits (word 3).
pub(crate) const MAX_THREADS: u16 = 1024;
/// The boards of one backend start (and their frames arrive) within this of each other: a
/// station's threads are learned over at least this much of its time (the relay) or of its
/// arrivals (the receiver), so a board a little behind the others (its start, its switch) is not
/// taken for a thread that does not exist. Learning over two frames lost a board whose first
/// frame came 0.5 ms after the other's at 4000 frames/s (tests/pipeline_sim.rs, 1.5 ms of LAN
/// jitter: 2 of 4 threads learned, half the station lost); the receiver's count until the first
/// repeat lost a board 1.5 ms behind (tests/receiver.rs).
pub const LEARN_SKEW: std::time::Duration = std::time::Duration::from_millis(2);

/// Count a datagram the framing refused under its reason.
pub(crate) fn count_wire_error(c: &mut DatagramCounters, e: &WireError) {
    match e {
        WireError::TooShort(_) => c.too_short += 1,
        WireError::BadMagic(_) => c.bad_magic += 1,
        WireError::BadVersion(_) => c.bad_version += 1,
        WireError::BadHeader(_) | WireError::BadFrame(_) => c.bad_header += 1,
        WireError::LengthMismatch { .. } => c.length_mismatch += 1,
    }
}

/// Why a stream's shape could not be worked out from its first datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShapeError {
    /// Neither the framing, the options nor the header give the frame rate.
    NoFrameRate,
    /// A frame rate or thread count VDIF cannot have (it would size buffers): the numbers as
    /// they came (an announced rate past 2^24 is no [`FrameRate`]).
    Implausible { fps: u32, threads: u16 },
}

impl ShapeError {
    /// The operator's sentence for a stream of station `station` from `from`.
    pub(crate) fn describe(self, station: &str, from: std::net::SocketAddr) -> String {
        match self {
            ShapeError::NoFrameRate => {
                format!("station {station}: frame rate unknown (no native framing, no sample rate in the header): pass --fps")
            }
            ShapeError::Implausible { fps, threads } => {
                format!("datagram from {from} announces {fps} frames/s over {threads} thread(s): not a VDIF stream")
            }
        }
    }

    /// Count it under its reason.
    pub(crate) fn count(self, c: &mut DatagramCounters) {
        match self {
            ShapeError::NoFrameRate => c.no_frame_rate += 1,
            ShapeError::Implausible { .. } => c.implausible_stream += 1,
        }
    }
}

/// The station's rate (frames a second over all threads) a new stream's rate per thread is split
/// from, its threads counted from its frames, or `None` when its shape is known otherwise. Split
/// where neither the options (`fps`, `threads`) nor the header say the rate per thread and
/// either a native prefix announces the station's rate without threads (a relay that split a
/// VSI-S mode's rate itself and has not confirmed the split yet) or, for bare frames, only the
/// station's rate is known (`station_fps`, a mode's).
pub(crate) fn station_rate_to_split(
    d: &DataDatagram<'_>,
    fps: Option<FrameRate>,
    threads: Option<u16>,
    station_fps: Option<FrameRate>,
) -> Option<FrameRate> {
    if threads.is_some() || fps.is_some() {
        return None;
    }
    match d.native {
        // Past 2^24 it is no rate: stream_shape refuses the announcement with its number.
        Some(n) if n.threads == 0 => FrameRate::new(n.frames_per_second).ok(),
        Some(_) => None,
        None if d.header.frame_rate().is_none() => station_fps,
        None => None,
    }
}

/// Frames per second per thread and threads of the stream `d` starts: what a native prefix
/// announces, else the options (`fps`, `threads`), else the header's sample rate (threads 1): the
/// order of [`RateSource`].
/// Untrusted numbers size windows and queues, so they are kept within what VDIF can express.
pub(crate) fn stream_shape(
    d: &DataDatagram<'_>,
    fps: Option<FrameRate>,
    threads: Option<u16>,
) -> Result<(FrameRate, u16), ShapeError> {
    let threads = d.native.map(|n| n.threads).filter(|t| *t > 0).or(threads).unwrap_or(1);
    // An announced rate past 2^24 is no frame rate: refused with its number, not ignored.
    let announced = d.native.map(|n| n.frames_per_second).filter(|n| *n > 0);
    if let Some(fps) = announced.filter(|n| *n > MAX_FPS) {
        return Err(ShapeError::Implausible { fps, threads });
    }
    let fps = SourcedRate::most_believable([
        (RateSource::Announced, announced.and_then(|n| FrameRate::new(n).ok())),
        (RateSource::Given, fps),
        (RateSource::Header, d.header.frame_rate()),
    ])
    .map(|r| r.fps)
    .ok_or(ShapeError::NoFrameRate)?;
    if threads > MAX_THREADS {
        return Err(ShapeError::Implausible {
            fps: fps.get(),
            threads,
        });
    }
    Ok((fps, threads))
}

//! Live outputs: a station's frames, in time order, written to a connected stream socket that a
//! correlator reads (SFXC's `mk5://` reader, as jive5ab's `net2sfxc` serves it: [`sfxc`]; any
//! other reader of a byte stream of frames plugs in as a [`Connector`]).
//!
//! The receiver never waits for a reader: a full socket buffer at 4 Gb/s drops data within
//! milliseconds, and a correlator may read slower than a station sends, stop, or go away. So
//! [`LiveOutput::frame`] only appends to a chunk, and [`LiveOutput::flush`] (once per receive
//! batch) sends it to the reader's socket itself without waiting while nothing is queued (the
//! writer thread not woken, the frames still in cache), then hands what the socket did not take
//! to the output's writer thread through a queue bounded in bytes; when the
//! queue is full the chunk's frames are dropped and counted (`dropped_slow_reader`), and the
//! reader's stream resumes at the next time step (the first frame of a VDIF time, thread order
//! whole). A filled (invalid) frame is queued as its header alone and written with the fill
//! pattern after it (as the window fills it, [`stream::feed`]), so seconds of silence cost a reader's bandwidth but no
//! memory. The writer thread writes the chunks with `writev`, each call bounded by a write
//! timeout so a reader that stops reading never holds the thread past a stop.
//!
//! What a reader gets: frames from the first time step after it connected (frames that came while
//! no reader was connected are not kept: the stream is live), never a frame whose time is before
//! one already sent ([`LiveOutputStatus::behind`]), and when it goes away the frames queued for
//! it are let go; the next reader starts afresh.

mod conn;
pub mod difx;
mod output;
pub mod sfxc;
mod writer;

use std::time::Duration;

use stream::results::LiveOutputStatus;
use stream::FrameSink;

pub use conn::{Connector, LiveConn};
use output::add;
pub use output::{LiveCounts, LiveOutput};
pub use writer::StartRule;

/// Memory queued for a reader by default (per output): 0.25 s at 4 Gb/s, 2 s at 512 Mb/s.
pub const DEFAULT_LIVE_BUFFER: u64 = 128 << 20;
/// A live reader's reorder window by default: frames are out this long after they are due (the
/// added latency a correlator sees; jive5ab's net2sfxc reorders nothing beyond its read-ahead).
pub const LIVE_LATENCY: Duration = Duration::from_millis(2);

/// A live output a receiver is asked for; its socket is made when the receiver binds.
#[derive(Debug, Clone)]
pub enum LiveTarget {
    /// SFXC's `mk5://` reader ([`sfxc`]), for `station` (a VDIF station id) or the first to come.
    Sfxc {
        /// Where it connects.
        addr: sfxc::SfxcAddr,
        /// The station it carries.
        station: Option<vdif::StationId>,
    },
    /// DiFX's mpifxcorr NETWORK datastream ([`difx`]): this side connects to its port,
    /// retrying, and says so after `connect_wait`.
    Difx {
        /// The datastream's port.
        to: std::net::SocketAddr,
        /// The station it carries.
        station: Option<vdif::StationId>,
        /// How long to wait for the job's port before saying so.
        connect_wait: Duration,
    },
}

/// Why a live output could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The SFXC socket.
    #[error(transparent)]
    Sfxc(#[from] sfxc::SfxcError),
    /// The writer thread.
    #[error("cannot start the live writer thread: {0}")]
    Thread(std::io::Error),
}

impl LiveTarget {
    /// Its socket made and its writer started, `buffer` bytes queued at most.
    pub fn start(&self, buffer: u64) -> Result<LiveOutput, LiveError> {
        match self {
            LiveTarget::Sfxc { addr, station } => {
                let l = sfxc::SfxcListener::bind(addr.clone())?;
                LiveOutput::start(Box::new(l), *station, buffer, StartRule::default()).map_err(LiveError::Thread)
            }
            LiveTarget::Difx {
                to,
                station,
                connect_wait,
            } => {
                let (c, _watch) = difx::DifxConnector::new(*to, *connect_wait);
                // DiFX must not start on an invalid frame.
                LiveOutput::start(Box::new(c), *station, buffer, StartRule { valid_only: true })
                    .map_err(LiveError::Thread)
            }
        }
    }
}

/// A receiver's live outputs.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// The outputs.
    pub targets: Vec<LiveTarget>,
    /// Bytes queued per output at most ([`DEFAULT_LIVE_BUFFER`]).
    pub buffer: u64,
    /// At the end, how long a reader still reading gets to take what is queued.
    pub drain: Duration,
    /// A station sending nothing for this long has its stream go on with filled invalid frames
    /// at its rate, so the reader is never left waiting ([`stream::ReceiverConfig`]'s
    /// `fill_silence_after`).
    pub fill_silence_after: Duration,
}

impl LiveConfig {
    /// `targets` with the default buffer, a 1 s drain and filling after 1 s of silence.
    pub fn new(targets: Vec<LiveTarget>) -> LiveConfig {
        LiveConfig {
            targets,
            buffer: DEFAULT_LIVE_BUFFER,
            drain: Duration::from_secs(1),
            fill_silence_after: Duration::from_secs(1),
        }
    }

    /// Every output started.
    pub fn start(&self) -> Result<LiveSink, LiveError> {
        let outputs = self
            .targets
            .iter()
            .map(|t| t.start(self.buffer))
            .collect::<Result<_, _>>()?;
        Ok(LiveSink::new(outputs))
    }
}

/// The receiver's sink for live outputs: each station's frames to the output that carries it.
pub struct LiveSink {
    outputs: Vec<LiveOutput>,
    frames: u64,
    filled: u64,
    /// Frames of stations no output carries.
    unrouted: u64,
}

impl LiveSink {
    /// Frames to `outputs` (each carries its named station, or the first unnamed takes the first
    /// station to come).
    pub fn new(outputs: Vec<LiveOutput>) -> LiveSink {
        LiveSink {
            outputs,
            frames: 0,
            filled: 0,
            unrouted: 0,
        }
    }

    /// Frames handed in, filled ones, and those no output carries.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.frames, self.filled, self.unrouted)
    }

    /// Hand every output's gathered frames to its writer (once per receive batch).
    pub fn flush(&mut self) {
        self.outputs.iter_mut().for_each(LiveOutput::flush);
    }

    /// Its outputs carry frames of `format` (VDIF unless said): how each reads a frame's time
    /// and header.
    pub fn with_frame_format(mut self, format: vdif::FrameFormat) -> LiveSink {
        self.outputs.iter_mut().for_each(|o| o.set_frame_format(format));
        self
    }

    /// Every output's counts now.
    pub fn status(&self) -> Vec<LiveOutputStatus> {
        self.outputs.iter().map(LiveOutput::status).collect()
    }

    /// Stop every output (see [`LiveOutput::finish`]); their final counts.
    pub fn finish(&mut self, drain: Duration) -> Vec<LiveOutputStatus> {
        self.outputs.drain(..).map(|o| o.finish(drain)).collect()
    }
}

impl FrameSink for LiveSink {
    fn frame(&mut self, station: vdif::StationId, frame: &[u8], filled: bool) {
        self.frames += 1;
        self.filled += u64::from(filled);
        let at = match self.outputs.iter().position(|o| o.station() == Some(station)) {
            Some(i) => Some(i),
            None => self
                .outputs
                .iter_mut()
                .position(|o| o.station().is_none() && o.takes(station)),
        };
        match at {
            Some(i) => self.outputs[i].frame(frame, filled),
            None => self.unrouted += 1,
        }
    }

    // Time going back is caught frame by frame (`behind`); a gap forward is a reader's to see.
    fn discontinuity(&mut self, _station: vdif::StationId) {}
}

//! Why a stream session could not run: the binary maps [`StreamSessionError::Config`] and
//! [`StreamSessionError::Input`] to a usage error (exit 2), everything else to a failure (exit 1).

use thiserror::Error;

/// Why a stream session (send, receive, relay) could not run.
#[derive(Debug, Error)]
pub enum StreamSessionError {
    /// Socket setup or I/O.
    #[error(transparent)]
    Net(#[from] netio::NetioError),
    /// A file or socket operation failed.
    #[error(transparent)]
    Io(#[from] netio::IoError),
    /// The configuration cannot run as given.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An input cannot be streamed as asked.
    #[error("{input}: {problem}")]
    Input {
        /// The input's name (a path, or what names data in memory).
        input: String,
        /// What is wrong with it.
        problem: InputProblem,
    },
    /// A live output could not start (its socket, its thread).
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
    /// The sender's schedule cannot go on (a looped file ran past the VDIF time field).
    #[error(transparent)]
    Schedule(#[from] stream::SenderError),
    /// An input file sent from its mapped pages was truncated by another process meanwhile.
    #[error(
        "an input file was truncated while it was being sent: the sender stopped (what was lost of it read as \
         zeros; at most the frames of one send round left as such, not VDIF to a receiver)"
    )]
    InputTruncated,
}

impl StreamSessionError {
    /// An input's problem, named.
    pub fn input(input: impl Into<String>, problem: InputProblem) -> StreamSessionError {
        StreamSessionError::Input {
            input: input.into(),
            problem,
        }
    }

    /// Whether what was asked cannot work (a usage error), rather than something failing while
    /// it ran.
    pub fn is_usage(&self) -> bool {
        matches!(self, StreamSessionError::Config(_) | StreamSessionError::Input { .. })
    }
}

/// A configuration that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// A receiver takes 1 to 64 listen addresses.
    #[error("1 to 64 listen addresses")]
    ListenCount,
    /// A relay needs an address to listen on.
    #[error("no --listen address")]
    NoListen,
    /// NAKs name native sequence numbers.
    #[error("--arq-latency needs --seq-format native (NAKs name native sequence numbers)")]
    ArqNeedsNative,
    /// Nothing to send.
    #[error("no input files")]
    NoInputs,
    /// More inputs than station indexes.
    #[error("too many stations ({count}; at most 65535)")]
    TooManyStations {
        /// Inputs given.
        count: usize,
    },
    /// No sender.
    #[error("--senders must be at least 1")]
    NoSenders,
    /// Per-board destinations that do not match the boards.
    #[error("{destinations} destinations for --senders {senders}: give one --to for all boards or one per board")]
    BoardDestinations {
        /// Destinations given.
        destinations: usize,
        /// Boards.
        senders: usize,
    },
    /// Several boards number their own datagrams: native framing has one stream per station.
    #[error(
        "--senders K > 1 simulates a backend's boards: use --seq-format jive5ab (each board numbers its own \
         datagrams) or none (bare VDIF); native framing numbers one stream per station from one socket"
    )]
    BoardsNeedBoardFraming,
}

/// What is wrong with one input.
#[derive(Debug, Error)]
pub enum InputProblem {
    /// The file cannot be opened or read.
    #[error("{0}")]
    Read(std::io::Error),
    /// A reader thread could not open or read the file while sending.
    #[error("{op} {source}")]
    ReadWhileSending {
        /// "open" or "read".
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The inspection of its frames failed.
    #[error(transparent)]
    Inspect(#[from] vdif::inspect::InspectError),
    /// Not one VDIF frame.
    #[error("no VDIF frames found")]
    NoFrames,
    /// Threads must be numbered 0..n.
    #[error("thread ids {ids:?} are not 0..{threads}; the receiver places frames by thread id")]
    ThreadIds {
        /// The thread ids found.
        ids: Vec<u16>,
        /// How many there are.
        threads: u16,
    },
    /// Its frame rate cannot be known from the file: see the message.
    #[error(
        "frame rate unknown: its frames are numbers {lowest}..{highest} of one second ({second}), \
         with no second boundary to count a second's frames by, and its headers (EDV {edv}) state no sample \
         rate, so it is only known to be at least {at_least} frames/s per thread; pass --fps N (frames per second \
         per thread: the data rate ÷ {bits_per_frame} bits) or --rate (the data rate, e.g. 128M)"
    )]
    FrameRateUnknown {
        /// Lowest frame number.
        lowest: u32,
        /// Highest frame number.
        highest: u32,
        /// The second, UTC, or "?".
        second: String,
        /// The EDV, or "?".
        edv: String,
        /// highest + 1.
        at_least: u64,
        /// Bits of data per frame over the threads.
        bits_per_frame: f64,
    },
    /// Looping needs whole seconds.
    #[error("--loop needs a file of whole seconds ({per_thread} frames per thread at {fps} frames/s)")]
    LoopNeedsWholeSeconds {
        /// Frames per thread in the file.
        per_thread: u64,
        /// Frames per second per thread.
        fps: u32,
    },
    /// Data in memory must be frames back to back.
    #[error("frames in memory are not contiguous VDIF")]
    NotContiguous,
    /// Each board sends at least one thread.
    #[error(
        "{threads} VDIF thread(s) cannot be split over --senders {senders}: each board sends at least one thread \
         (use at most {threads} senders, or more threads)"
    )]
    ThreadsForSenders {
        /// Threads in the input.
        threads: u16,
        /// Boards asked for.
        senders: usize,
    },
    /// Several boards send from memory.
    #[error("--senders K > 1 sends from memory and the file is too large to hold (or not contiguous VDIF)")]
    BoardsNeedMemory,
}

//! Why a stream session could not run: the binary maps what [`StreamSessionError::is_usage`]
//! (a configuration, an input that cannot be streamed as asked) to a usage error (exit 2),
//! everything else (an input that cannot be read among it) to a failure (exit 1).

use thiserror::Error;

use crate::setting::{Namer, Setting};

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
    /// it ran (an input that cannot be opened or read is the latter).
    pub fn is_usage(&self) -> bool {
        match self {
            StreamSessionError::Config(_) => true,
            StreamSessionError::Input { problem, .. } => {
                !matches!(problem, InputProblem::Read(_) | InputProblem::ReadWhileSending { .. })
            }
            _ => false,
        }
    }
}

/// A configuration that cannot run: each names the settings it is about ([`Setting`]), so a
/// front door can say it in its own words ([`ConfigError::describe`]); its `Display` uses the
/// settings' field names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A receiver or relay listens on 1 to 64 addresses.
    ListenCount {
        /// Addresses given.
        count: usize,
    },
    /// Two listen addresses take the same port (the same address, or one of them every local
    /// address): the second socket would not bind, or the two would split one sender's datagrams.
    ListenTwice {
        /// The second of the two, as written.
        spec: String,
        /// Its place in the list (from 0), for a door that writes the list its own way.
        index: usize,
    },
    /// NAKs name native sequence numbers: asking for or answering them (`setting`:
    /// [`Setting::Arq`] or [`Setting::ArqLatency`]) needs native framing.
    ArqNeedsNative {
        /// The ARQ setting given.
        setting: Setting,
    },
    /// Nothing to send.
    NoInputs,
    /// More inputs than station indexes.
    TooManyStations {
        /// Inputs given.
        count: usize,
    },
    /// A value outside what the setting takes.
    OutOfRange {
        /// The setting.
        setting: Setting,
        /// The value given, as text.
        value: String,
        /// What it takes.
        range: &'static str,
    },
    /// Per-board destinations that do not match the boards.
    BoardDestinations {
        /// Destinations given.
        destinations: usize,
        /// Boards.
        senders: usize,
    },
    /// Several boards number their own datagrams: native framing has one stream per station.
    BoardsNeedBoardFraming {
        /// Boards.
        senders: usize,
    },
    /// A recording over many disks is written in blocks: it takes no directory, file chunks or
    /// direct-I/O switch of its own (`files`: the one given).
    RecordingAndFiles {
        /// The files' setting given beside the recording.
        files: Setting,
    },
    /// One file per thread needs somewhere to write them (`output`: [`Setting::Out`] or
    /// [`Setting::Tee`], or a recording).
    SplitNeedsOutput {
        /// The directory setting that was not given.
        output: Setting,
    },
    /// A live output is no recording: it takes no directory, file, disks, chunks, direct-I/O
    /// switch or per-thread files (`files`: the one given).
    LiveAndRecording {
        /// The recording's setting given beside the live output.
        files: Setting,
    },
    /// A TCP destination (a DiFX datastream) carries bare frames back to back and TCP repeats
    /// what is lost: it takes no datagram framing and no ARQ (`setting`: the one given).
    TcpCarriesBareFrames {
        /// The datagram setting given beside the TCP destination.
        setting: Setting,
    },
    /// Mark5B frames go to a live output only (SFXC's reader, DiFX's feed): a recording and
    /// files take VDIF (`output`: the one given, [`Setting::Out`] when none is).
    Mark5bNeedsLive {
        /// The VDIF-only output asked for.
        output: Setting,
    },
    /// A relay of Mark5B takes one stream in jive5ab's udps framing (the sequence numbers
    /// order the frames; Mark5B has no station id to tell streams apart) and sends it on as
    /// udps or bare datagrams (`setting`: the one that cannot be).
    Mark5bRelayed {
        /// The setting Mark5B cannot go with.
        setting: Setting,
    },
}

impl ConfigError {
    /// The message, each setting named by `name` (a front door's flag or keyword for it).
    pub fn describe(&self, name: Namer<'_>) -> String {
        use Setting as S;
        match self {
            ConfigError::ListenCount { count } => format!("{}: 1 to 64 addresses ({count} given)", name(S::Listen)),
            ConfigError::ListenTwice { spec, .. } => {
                format!("{} {spec} given twice (each port once)", name(S::Listen))
            }
            ConfigError::ArqNeedsNative { setting } => format!(
                "{} needs {} native (NAKs name native sequence numbers)",
                name(*setting),
                name(S::Format)
            ),
            ConfigError::NoInputs => format!("no {} to send", name(S::Inputs)),
            ConfigError::TooManyStations { count } => {
                format!("too many {} ({count}; at most 65535 stations)", name(S::Inputs))
            }
            ConfigError::OutOfRange { setting, value, range } => {
                format!("{} {value}: out of range ({range})", name(*setting))
            }
            ConfigError::BoardDestinations { destinations, senders } => format!(
                "{destinations} destinations ({}) for {} {senders}: give one destination for all boards or one per board",
                name(S::To),
                name(S::Senders)
            ),
            ConfigError::BoardsNeedBoardFraming { senders } => format!(
                "{} {senders} simulates a backend's boards: set {} jive5ab (each board numbers its own datagrams, \
                 like jive5ab's udps) or none (bare VDIF frames); native framing numbers one stream per station from \
                 one socket",
                name(S::Senders),
                name(S::Format)
            ),
            ConfigError::RecordingAndFiles { files } => format!(
                "{} records a scan over disks in blocks of its own: leave out {}",
                name(S::Recording),
                name(*files)
            ),
            ConfigError::SplitNeedsOutput { output } => format!(
                "{} needs an output: {} or {}",
                name(S::SplitThreads),
                name(*output),
                name(S::Recording)
            ),
            ConfigError::LiveAndRecording { files } => {
                format!("{} is a live output: leave out {}", name(S::Live), name(*files))
            }
            ConfigError::TcpCarriesBareFrames { setting } => format!(
                "a tcp: {} carries bare frames back to back and TCP repeats what is lost: leave out {}",
                name(S::To),
                name(*setting)
            ),
            ConfigError::Mark5bNeedsLive { .. } => format!(
                "{} mark5b needs {} (recordings take VDIF, not Mark5B)",
                name(S::Frames),
                name(S::Live)
            ),
            ConfigError::Mark5bRelayed { setting } => format!(
                "{} mark5b relays one Mark5B stream as jive5ab udps in, udps or bare datagrams out: {} {}",
                name(S::Frames),
                name(*setting),
                mark5b_relay_why(*setting)
            ),
        }
    }

    /// The settings it is about, the one to change first.
    pub fn settings(&self) -> Vec<Setting> {
        use Setting as S;
        match self {
            ConfigError::ListenCount { .. } | ConfigError::ListenTwice { .. } => vec![S::Listen],
            ConfigError::ArqNeedsNative { setting } => vec![*setting, S::Format],
            ConfigError::NoInputs | ConfigError::TooManyStations { .. } => vec![S::Inputs],
            ConfigError::OutOfRange { setting, .. } => vec![*setting],
            ConfigError::BoardDestinations { .. } => vec![S::To, S::Senders],
            ConfigError::BoardsNeedBoardFraming { .. } => vec![S::Senders, S::Format],
            ConfigError::RecordingAndFiles { files } => vec![*files, S::Recording],
            ConfigError::SplitNeedsOutput { output } => vec![S::SplitThreads, *output, S::Recording],
            ConfigError::LiveAndRecording { files } => vec![*files, S::Live],
            ConfigError::TcpCarriesBareFrames { setting } => vec![*setting, S::To],
            ConfigError::Mark5bNeedsLive { output: S::Live } => vec![S::Frames, S::Live],
            ConfigError::Mark5bNeedsLive { output } => vec![S::Frames, *output, S::Live],
            ConfigError::Mark5bRelayed { setting } => vec![*setting, S::Frames],
        }
    }
}

/// Why a relay of Mark5B cannot take `setting` as given.
fn mark5b_relay_why(setting: Setting) -> &'static str {
    match setting {
        Setting::InputFormat => "must be jive5ab (bare datagrams carry no count to order the frames by)",
        Setting::Format => "must be jive5ab or none (native framing and its ARQ carry VDIF)",
        Setting::Listen => "must name one input (Mark5B has no station id to tell streams apart)",
        Setting::To => "cannot be tcp: (send a DiFX datastream Mark5B over UDP)",
        _ => "is for VDIF (recordings take VDIF, not Mark5B)",
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(&Setting::name))
    }
}

impl std::error::Error for ConfigError {}

/// What is wrong with one input: its `Display` names settings by their fields, a front door
/// says them in its words with [`InputProblem::describe`].
#[derive(Debug)]
pub enum InputProblem {
    /// The file cannot be opened or read.
    Read(std::io::Error),
    /// A reader thread could not open or read the file while sending.
    ReadWhileSending {
        /// "open" or "read".
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The inspection of its frames failed.
    Inspect(vdif::inspect::InspectError),
    /// Not one VDIF frame.
    NoFrames,
    /// Threads must be numbered 0..n.
    ThreadIds {
        /// The thread ids found.
        ids: Vec<u16>,
        /// How many there are.
        threads: u16,
    },
    /// Its frame rate cannot be known from the file: see the message.
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
        bits_per_frame: u64,
    },
    /// Looping needs whole seconds.
    LoopNeedsWholeSeconds {
        /// Frames per thread in the file.
        per_thread: u64,
        /// Frames per second per thread.
        fps: vdif::FrameRate,
    },
    /// Data in memory must be frames back to back.
    NotContiguous,
    /// Each board sends at least one thread.
    ThreadsForSenders {
        /// Threads in the input.
        threads: u16,
        /// Boards asked for.
        senders: usize,
    },
    /// Several boards send from memory.
    BoardsNeedMemory,
    /// Mark5B data that are not contiguous whole frames, or too large to hold in memory.
    Mark5b(String),
}

impl From<vdif::inspect::InspectError> for InputProblem {
    fn from(e: vdif::inspect::InspectError) -> InputProblem {
        InputProblem::Inspect(e)
    }
}

impl InputProblem {
    /// The message, each setting named by `name` (a front door's flag or keyword for it).
    pub fn describe(&self, name: Namer<'_>) -> String {
        use Setting as S;
        match self {
            InputProblem::Read(e) => e.to_string(),
            InputProblem::ReadWhileSending { op, source } => format!("{op} {source}"),
            InputProblem::Inspect(e) => e.to_string(),
            InputProblem::NoFrames => "no VDIF frames found".into(),
            InputProblem::Mark5b(why) => format!("Mark5B: {why}"),
            InputProblem::ThreadIds { ids, threads } => {
                format!("thread ids {ids:?} are not 0..{threads}; the receiver places frames by thread id")
            }
            InputProblem::FrameRateUnknown {
                lowest,
                highest,
                second,
                edv,
                at_least,
                bits_per_frame,
            } => format!(
                "frame rate unknown: its frames are numbers {lowest}..{highest} of one second ({second}), with no \
                 second boundary to count a second's frames by, and its headers (EDV {edv}) state no sample rate, so \
                 it is only known to be at least {at_least} frames/s per thread; pass {} N (frames per second per \
                 thread: the data rate ÷ {bits_per_frame} bits) or {} (the data rate, e.g. 128M)",
                name(S::Fps),
                name(S::Rate)
            ),
            InputProblem::LoopNeedsWholeSeconds { per_thread, fps } => format!(
                "{} needs a file of whole seconds ({per_thread} frames per thread at {fps})",
                name(S::Loop)
            ),
            InputProblem::NotContiguous => "frames in memory are not contiguous VDIF".into(),
            InputProblem::ThreadsForSenders { threads, senders } => format!(
                "{threads} VDIF thread(s) cannot be split over {} {senders}: each board sends at least one thread \
                 (use at most {threads} senders, or more threads)",
                name(S::Senders)
            ),
            InputProblem::BoardsNeedMemory => format!(
                "{} K > 1 sends from memory and the file is too large to hold (or not contiguous VDIF)",
                name(S::Senders)
            ),
        }
    }
}

impl std::fmt::Display for InputProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(&Setting::name))
    }
}

impl std::error::Error for InputProblem {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputProblem::ReadWhileSending { source, .. } => Some(source),
            InputProblem::Inspect(e) => Some(e),
            _ => None,
        }
    }
}

/// `value` of `setting` within `range` (`says`, in words), else [`ConfigError::OutOfRange`].
pub(crate) fn in_range<T: PartialOrd + std::fmt::Display>(
    setting: Setting,
    value: T,
    range: std::ops::RangeInclusive<T>,
    says: &'static str,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(ConfigError::OutOfRange {
        setting,
        value: value.to_string(),
        range: says,
    })
}

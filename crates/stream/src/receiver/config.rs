//! How a receiver is set up: the framing, the rates and threads it is told, its bounds, and which
//! sources `--from` admits.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use crate::wire::SeqFormat;

/// Which sources `--from` admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFilter {
    /// Exactly this address and port.
    Addr(SocketAddr),
    /// Any port of this host (a sender that restarts gets a new port).
    Host(IpAddr),
}

impl SourceFilter {
    /// Whether a datagram from `from` may be taken. IPv4-mapped IPv6 addresses (a dual-stack
    /// socket's view of an IPv4 sender) compare equal to the IPv4 address.
    pub fn admits(&self, from: SocketAddr) -> bool {
        let ip = from.ip().to_canonical();
        match self {
            SourceFilter::Addr(a) => a.ip().to_canonical() == ip && a.port() == from.port(),
            SourceFilter::Host(h) => h.to_canonical() == ip,
        }
    }
}

/// A `--from` that is no IP address (with or without a port).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?}: expected an IP address, with or without :PORT")]
pub struct SourceFilterError {
    /// The text given.
    pub input: String,
}

impl FromStr for SourceFilter {
    type Err = SourceFilterError;

    /// `ADDRESS:PORT`, `[V6]:PORT`, or an address alone (`10.0.0.1`, `::1`, `[::1]`).
    fn from_str(s: &str) -> Result<Self, SourceFilterError> {
        let s = s.trim();
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Ok(SourceFilter::Addr(a));
        }
        let bare = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
        bare.parse::<IpAddr>()
            .map(SourceFilter::Host)
            .map_err(|_| SourceFilterError { input: s.to_string() })
    }
}

impl fmt::Display for SourceFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceFilter::Addr(a) => write!(f, "{a}"),
            SourceFilter::Host(h) => write!(f, "{h} (any port)"),
        }
    }
}

/// How to receive.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverConfig {
    /// Framing the sender uses.
    pub format: SeqFormat,
    /// Format of the frames (VDIF unless a mode says Mark5B): how they are parsed and ordered,
    /// and how fills are made ([`vdif::frame_format`]).
    pub frame_format: vdif::FrameFormat,
    /// Frames per second per thread, when the framing and headers do not say (jive5ab, none).
    pub frames_per_second: Option<vdif::FrameRate>,
    /// VDIF threads per station, when the framing does not say; default 1 (or counted, see
    /// `station_frames_per_second`).
    pub threads: Option<u16>,
    /// Frames per second of a station over all its threads (a VSI-S mode's rate), when neither
    /// `frames_per_second` nor `threads` is given: a stream's threads are counted from its
    /// first frames (until a thread comes round again) and the rate split over them.
    pub station_frames_per_second: Option<vdif::FrameRate>,
    /// Reorder latency: a frame is written this long (in stream time) after it is due.
    pub latency: Duration,
    /// Longest gap filled with invalid frames; longer gaps start a new segment.
    pub max_fill: Duration,
    /// Most stations accepted; datagrams of further ones are counted and dropped.
    pub max_stations: usize,
    /// Accept data only from this address or host (others are counted as foreign).
    pub from: Option<SourceFilter>,
    /// Ask for missing frames (native framing only).
    pub arq: bool,
    /// Consistent frames needed to accept a jump of a stream's time.
    pub confirm: u32,
    /// In-sequence frames of one format a source must deliver before it becomes a station or
    /// takes one over: a stray, replayed or phantom datagram never does.
    pub source_run: u32,
    /// A station's sender is replaced by another source only after it has been quiet this long:
    /// a restarted sender is followed, a second one beside a live sender is not. About the
    /// sender's own catch-up bound, so a sender held up briefly keeps its stream.
    pub source_quiet: Duration,
    /// A source that has not formed a run is forgotten after this long without datagrams.
    pub provisional_timeout: Duration,
    /// A station silent this long gives its slot up when a new station needs one.
    pub station_timeout: Duration,
    /// For a live reader: a station that sent nothing for this long has its stream go on at its
    /// rate as filled invalid frames ([`crate::Receiver::fill_silence`]); `None` waits for frames.
    pub fill_silence_after: Option<Duration>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            format: SeqFormat::Native,
            frame_format: vdif::FrameFormat::Vdif,
            frames_per_second: None,
            threads: None,
            station_frames_per_second: None,
            latency: Duration::from_millis(50),
            max_fill: Duration::from_secs(2),
            max_stations: 16,
            from: None,
            arq: false,
            confirm: 4,
            source_run: 4,
            source_quiet: Duration::from_millis(100),
            provisional_timeout: Duration::from_secs(1),
            station_timeout: Duration::from_secs(10),
            fill_silence_after: None,
        }
    }
}

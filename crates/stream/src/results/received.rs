//! What a receiver reports: datagrams refused by reason, and per station its window's counters,
//! its sources (boards) and its loss.

use serde::{Deserialize, Serialize};
use vdif::StationId;

use crate::arq::NakStats;
use crate::window::WindowStats;

/// Datagrams that never reached a station's window, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatagramCounters {
    /// Datagrams seen.
    pub datagrams: u64,
    /// Bytes seen.
    pub bytes: u64,
    /// Too short for a frame.
    pub too_short: u64,
    /// Larger than the receive buffer (truncated by the kernel).
    pub oversized: u64,
    /// Wrong magic (native framing).
    pub bad_magic: u64,
    /// Unsupported native version.
    pub bad_version: u64,
    /// VDIF header rejected.
    pub bad_header: u64,
    /// Header length differs from the bytes carried.
    pub length_mismatch: u64,
    /// Not from `--from`, or for a station whose sender is another, live source (a second
    /// sender, a replay) and not accepted as its successor.
    pub foreign_source: u64,
    /// A station beyond `max_stations`.
    pub too_many_stations: u64,
    /// Frame rate unknown (jive5ab/bare framing without `--fps` and no rate in the header).
    pub no_frame_rate: u64,
    /// Kept for reading older results: stations are keyed by their VDIF station id since
    /// issue 17, so a stream carrying another station's frames is that station's candidate
    /// (a second sender), and this stays 0.
    pub wrong_station: u64,
    /// A first datagram announcing a frame rate or thread count VDIF cannot have (frame numbers
    /// have 24 bits, thread ids 10): it would size the window.
    pub implausible_stream: u64,
    /// From a source that never delivered a run of in-sequence frames (a stray, a replay, a
    /// phantom station): held, then dropped when the source was forgotten.
    #[serde(default)]
    pub unconfirmed: u64,
    /// Sources forgotten without becoming a station (phantom stations, strays). Not datagrams:
    /// their datagrams are in `unconfirmed` or `foreign_source`.
    #[serde(default)]
    pub phantoms_dropped: u64,
    /// Mark5B frames made whole from datagrams that each carried part of the stream (jive5ab
    /// cuts a Mark5B stream into datagrams of the MTU's size, not frames).
    #[serde(default)]
    pub split_frames_joined: u64,
    /// Such frames some byte of which never came (let go; the window fills them as lost).
    #[serde(default)]
    pub split_frames_incomplete: u64,
    /// Datagrams of such a stream whose bytes went nowhere: before any sync word told where
    /// its frames start, or the same datagram twice.
    #[serde(default)]
    pub split_datagrams_unplaced: u64,
}

impl DatagramCounters {
    /// Datagrams dropped for any reason.
    pub fn rejected(&self) -> u64 {
        self.too_short
            + self.oversized
            + self.bad_magic
            + self.bad_version
            + self.bad_header
            + self.length_mismatch
            + self.foreign_source
            + self.too_many_stations
            + self.no_frame_rate
            + self.wrong_station
            + self.implausible_stream
            + self.unconfirmed
            + self.split_datagrams_unplaced
    }
}

/// Another source took a station over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderChange {
    /// The previous sender (address, and session when native).
    pub from: String,
    /// The new one.
    pub to: String,
    /// Same host: the sender restarted (new port or session) rather than another host sending.
    pub restarted: bool,
}

/// A source of a station's frames that was refused as a board of it (issue 36): a second
/// sender beside a live board, a source of threads beyond the station's, one not in step with
/// its boards (too few of the frames per thread they send), or a board that delivered under half
/// its threads' share of the station's rate and gave its place up to one that delivered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedSource {
    /// Its address (and session, native framing).
    pub source: String,
    /// The VDIF thread ids it sent.
    pub threads: Vec<u16>,
    /// Its datagrams for the station from then on (refused; those held for it are refused when
    /// let go), counted in `foreign_source`.
    pub datagrams: u64,
    /// Why it was refused, in words (the first reason).
    pub reason: String,
}

/// Per-station results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationSummary {
    /// Two-letter station code or number.
    pub station: String,
    /// VDIF station id.
    pub station_id: StationId,
    /// Native stream index, if native framing.
    pub stream: Option<u16>,
    /// Where its datagrams came from (the current sender).
    pub source: String,
    /// The current sender's session (native framing; 0 = the sender gives none).
    #[serde(default)]
    pub session: Option<u16>,
    /// Frames per second per thread used for placement.
    pub frames_per_second: vdif::FrameRate,
    /// VDIF threads.
    pub threads: u16,
    /// Frame length, header included.
    pub frame_len: usize,
    /// Window counters.
    pub window: WindowStats,
    /// First and last sequence number seen (native, jive5ab).
    pub seq_first: Option<u64>,
    /// Last (highest) sequence number seen.
    pub seq_last: Option<u64>,
    /// Retransmitted datagrams received.
    pub retransmits_received: u64,
    /// ARQ counters, if on.
    pub arq: Option<NakStats>,
    /// Frames lost after the last one received, which no later frame revealed: the host's count
    /// of datagrams it dropped at the socket after the last one it delivered
    /// ([`crate::receiver::Receiver::lost_at_end`]). Not written (their times are not known), counted in f.
    #[serde(default)]
    pub lost_at_end: u64,
    /// Data loss f: frames known lost (filled invalid in their place, plus those lost at the
    /// end) over those and the valid frames written.
    pub loss_fraction: f64,
    /// S/N factor √(1 − f) for this station's data.
    pub snr_factor: f64,
    /// The sources feeding it (the boards of a multi-board backend, each its own threads and
    /// sequence numbers; one for a single sender), in the order they joined.
    #[serde(default)]
    pub boards: Vec<BoardSummary>,
    /// Times another source took the station over (a sender restarted or was replaced).
    #[serde(default)]
    pub sender_changes: u64,
    /// The first of those changes, oldest first.
    #[serde(default)]
    pub sender_change_log: Vec<SenderChange>,
    /// The station gave its slot up after `station_timeout` of silence; a later return of its
    /// stream is listed again.
    #[serde(default)]
    pub retired: bool,
    /// Sources refused as its boards (the first 16 over all stations), in the order they were
    /// refused; listed with the station's newest summary.
    #[serde(default)]
    pub refused_sources: Vec<RefusedSource>,
}

impl StationSummary {
    /// Frames lost: written invalid in their place (not those filled after their thread's
    /// last frame at the end), and lost after the last one received.
    pub fn frames_lost(&self) -> u64 {
        self.window.filled_lost() + self.lost_at_end
    }
}

/// One source feeding a station (a board of a multi-board backend), in the results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardSummary {
    /// Its address.
    pub source: String,
    /// Its session (native framing).
    #[serde(default)]
    pub session: Option<u16>,
    /// The VDIF thread ids it sent.
    pub threads: Vec<u16>,
    /// Its datagrams taken into the station's window (placed, duplicate or late).
    pub frames: u64,
    /// Its own first and last sequence number placed (each board numbers its own).
    pub seq_first: Option<u64>,
    /// Its last (highest).
    pub seq_last: Option<u64>,
}

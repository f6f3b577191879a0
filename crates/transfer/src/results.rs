//! Results of `evlbi send` and `evlbi recv`, defined once; JSON is the source of truth.

use serde::{Deserialize, Serialize};

/// Version of the report layout (2: one data stream per session, `data`; per file the bytes of
/// each round, the verdict's tail and sync).
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// The session's one data stream (every accepted block of every file) as the sender saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataReport {
    /// Bytes the stream had to move (blocks the receiver lacked, and blocks fetched again).
    pub bytes: u64,
    /// DATA datagrams sent, retransmissions included.
    pub datagrams_sent: u64,
    /// Payload bytes sent, retransmissions included.
    pub payload_bytes_sent: u64,
    /// Payload bytes sent again after a NAK or a timeout.
    pub retransmitted_bytes: u64,
    /// Loss fraction the receiver reported (datagrams).
    pub loss_seen: f64,
    /// Smallest RTT measured, µs.
    pub rtt_min_us: Option<u64>,
    /// Smoothed RTT at the end, µs.
    pub srtt_us: Option<u64>,
    /// From the first datagram to the last acknowledgement, s.
    pub duration_s: f64,
    /// `bytes` over `duration_s`, bit/s: the rate while data flowed.
    pub goodput_bps: Option<f64>,
    /// Congestion controller and its final phase.
    pub cc: String,
    /// What the controller reacted to (rate cuts, ignored sender-limited samples).
    pub cc_events: crate::CcEvents,
    /// Datagrams from the receiver the sender dropped as malformed or not of this session.
    pub rejected: u64,
    /// Whether the datagrams left in UDP GSO batches.
    pub gso: bool,
    /// System calls that sent the datagrams.
    pub send_syscalls: u64,
    /// Rate over time, every 100 ms: goodput, receive rate, pacing rate, inflight.
    pub rate_samples: Vec<crate::RateSample>,
    /// The controller's bottleneck bandwidth estimate at the end, wire bit/s: what the next
    /// session to this receiver starts from (`evlbi send` remembers it).
    #[serde(default)]
    pub bandwidth_estimate_bps: Option<f64>,
}

/// One round of one file: the bytes it had to move (the first round: the blocks the receiver
/// lacked; later ones: blocks that failed verification).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileRound {
    /// Bytes.
    pub bytes: u64,
}

/// One file as the sender saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSendReport {
    /// Local source path.
    pub source: String,
    /// Destination path below the receiver's root.
    pub path: String,
    /// File size.
    pub size: u64,
    /// Bytes the receiver already held from an interrupted attempt and that were not sent again.
    pub resumed_bytes: u64,
    /// Rounds (1, more when blocks failed verification).
    pub rounds: Vec<FileRound>,
    /// BLAKE3 of the file, hex, as both sides computed it (what `b3sum` prints).
    pub blake3: Option<String>,
    /// The receiver verified every block and the whole file and gave the file its final name.
    pub verified: bool,
    /// The receiver fsync'd the file before its verdict.
    pub synced: bool,
    /// What that fsync took at the receiver, s.
    pub sync_s: Option<f64>,
    /// Why not, if not.
    pub error: Option<String>,
    /// Wall time for this file, offer to verdict, s.
    pub elapsed_s: f64,
    /// From the file's last DATA datagram (first or repeated) to its verdict, s.
    pub tail_s: Option<f64>,
}

/// Everything `evlbi send` did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SendReport {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// evlbi version.
    pub tool_version: String,
    /// Receiver control address.
    pub server: String,
    /// Congestion control asked for ("fixed" or "adaptive") and its rate (fixed) or cap, bit/s.
    pub cc: String,
    /// Rate or cap, bit/s.
    pub rate_bps: f64,
    /// Files, in the order offered.
    pub files: Vec<FileSendReport>,
    /// The data stream.
    pub data: Option<DataReport>,
    /// From the start to the first data datagram, s: the TCP connect (protocol 5 sends its first
    /// data with its first control flight; protocol 4 waited two more round trips for `welcome`).
    pub handshake_s: f64,
    /// Directories created (empty ones included).
    pub directories: Vec<String>,
    /// Sum of file sizes.
    pub total_bytes: u64,
    /// Bytes moved over the network this run (not counting resumed bytes or retransmissions).
    pub transferred_bytes: u64,
    /// Wall time of the whole session, s.
    pub elapsed_s: f64,
    /// `transferred_bytes` over the time data flowed, bit/s.
    pub goodput_bps: Option<f64>,
    /// Payload bytes retransmitted.
    pub retransmitted_bytes: u64,
    /// Bytes read from the source files: every DATA payload (retransmissions included), plus
    /// blocks the receiver held (read once to hash them), plus partial BLAKE3 leaves read back
    /// (rare: odd chunk sizes under heavy reordering). Equal to the payload bytes sent when
    /// nothing was held: each byte is read once and hashed as it is sent.
    pub source_bytes_read: u64,
    /// Sender process CPU over the session, % of one core.
    #[serde(default)]
    pub cpu: Option<hostcounters::ProcessCpuShare>,
    /// Results before the one host schema said only the sum, as `cpu_percent`: read, never
    /// written (see [`SendReport::cpu_total_pct`]).
    #[serde(default, rename = "cpu_percent", skip_serializing)]
    pub cpu_percent_of_old_results: Option<f64>,
    /// Every file verified.
    pub ok: bool,
    /// The adaptive controller's start from a remembered or given rate, if it had one.
    #[serde(default)]
    pub start: Option<StartReport>,
}

/// A rate the adaptive controller was offered to start from ([`crate::ResumeHint`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StartReport {
    /// "remembered" (from an earlier session to this receiver) or "--start-rate".
    pub from: String,
    /// The rate, wire bit/s.
    pub rate_bps: f64,
    /// The RTT it was measured at, s.
    pub rtt_s: f64,
    /// The round trip this session's TCP connect took, s.
    pub connect_rtt_s: f64,
    /// Whether it was used: the connect's round trip within half to ten times `rtt_s` (else the
    /// path changed and the controller started from its default rate).
    pub used: bool,
}

impl SendReport {
    /// Sender process CPU, user + system, % of one core: from `cpu`, or from an older result's
    /// `cpu_percent`.
    pub fn cpu_total_pct(&self) -> Option<f64> {
        self.cpu.map(|c| c.total_pct()).or(self.cpu_percent_of_old_results)
    }
}

/// One file as the receiver saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileRecvReport {
    /// Path below the root.
    pub path: String,
    /// File size.
    pub size: u64,
    /// Bytes kept from an earlier attempt.
    pub resumed_bytes: u64,
    /// Rounds run.
    pub rounds: u32,
    /// Blocks that failed verification (and were fetched again).
    pub bad_blocks: u64,
    /// BLAKE3 of the file, hex, when verified.
    pub blake3: Option<String>,
    /// Verified and renamed to its final name.
    pub verified: bool,
    /// Bytes read back from the `.part` only to hash them: blocks held from an earlier attempt
    /// (re-verified), and partial BLAKE3 leaves past the bound; 0 for a fresh file, each byte
    /// hashed as it is written.
    pub bytes_read_back: u64,
    /// Fsync'd before the verdict (the sender asked for it).
    pub synced: bool,
    /// What that fsync took, s.
    pub sync_s: Option<f64>,
    /// Why not, if not.
    pub error: Option<String>,
    /// Offer to verdict, s.
    pub elapsed_s: f64,
}

/// The session's data stream as the receiver saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamRecvReport {
    /// DATA datagrams received, duplicates included.
    pub datagrams_received: u64,
    /// Duplicates.
    pub duplicate_datagrams: u64,
    /// Datagrams dropped by the protocol (malformed, other session, out of range, bad tag).
    pub rejected: u64,
    /// Datagrams dropped before the protocol (other host/port, oversized).
    pub foreign: ForeignCounters,
    /// Loss the receiver saw (datagrams).
    pub loss_fraction: f64,
    /// Payload bytes written.
    pub bytes_written: u64,
    /// DATA datagrams that reached the receiver before the session existed and were taken from
    /// its pen of early datagrams (protocol 5's first flight).
    #[serde(default)]
    pub early_datagrams: u64,
    /// Datagrams the receiver's pen dropped so far, all sessions (full, expired or unparsable):
    /// early datagrams no authenticated session took.
    #[serde(default)]
    pub early_dropped: u64,
    /// Chunks of the first segment received and dropped unwritten: blocks the receiver already
    /// held (`have`) or of a first offer it refused.
    #[serde(default)]
    pub first_segment_dropped: u64,
}

/// Datagrams the receiving loop refused before the protocol saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignCounters {
    /// From an IP address other than the control connection's peer.
    pub other_host: u64,
    /// From the right host but another port than the one the session locked to.
    pub other_port: u64,
    /// Larger than any datagram of the protocol (truncated by the kernel).
    pub oversized: u64,
}

// The live counts of a running `evlbi recv` / `evlbi send`, handed out once per interval
// (`--metrics`); the view (`metrics`) only renders them.

/// `evlbi recv`: sessions and files so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferRecvStatus {
    /// Sessions that passed the handshake.
    pub sessions: u64,
    /// Sessions that ended with an error.
    pub sessions_failed: u64,
    /// Connections refused before a session (wrong key, port scans).
    pub refused: u64,
    /// Files received and verified.
    pub files_verified: u64,
    /// Files that failed.
    pub files_failed: u64,
    /// Bytes of the verified files (resumed bytes included).
    pub bytes: u64,
    /// Bytes received in this process's sessions (resumed bytes excluded).
    pub bytes_received: u64,
    /// DATA datagrams received.
    pub datagrams: u64,
    /// Of those, repeats of a chunk already held (the sender's retransmissions that were not
    /// needed).
    pub duplicate_datagrams: u64,
    /// Datagrams refused (bad MAC, wrong session, foreign, oversized).
    pub rejected_datagrams: u64,
    /// Rounds over all files (a round after the first repairs what the first missed).
    pub rounds: u64,
    /// The last file finished.
    pub last_file: Option<String>,
    /// Its goodput, b/s.
    pub last_rate_bps: Option<f64>,
}

/// `evlbi send`: the transfer so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferSendStatus {
    /// The file being sent.
    pub file: String,
    /// Bytes of all files delivered or held by the receiver.
    pub done_bytes: u64,
    /// Bytes of all files.
    pub total_bytes: u64,
    /// Payload bytes sent again.
    pub retransmitted_bytes: u64,
    /// Pacing rate now, b/s.
    pub rate_bps: f64,
    /// Smoothed round-trip time, seconds.
    pub srtt_s: Option<f64>,
}

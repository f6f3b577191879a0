//! The counts of the long-running commands that are not streams (the streams' are
//! `stream::results::{RecvStatus, RelayStatus, SendStatus}`), kept by the command from the
//! events its loop reports.

use serde::{Deserialize, Serialize};

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

/// `probe server`: trials so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeServerStatus {
    /// Trials started (UDP and TCP).
    pub trials: u64,
    /// Trials that failed.
    pub failed: u64,
    /// Probe packets received (unique) over the UDP trials.
    pub packets: u64,
    /// Probe packets lost over the UDP trials.
    pub lost: u64,
    /// Bytes received over the TCP tests.
    pub tcp_bytes: u64,
    /// The last UDP trial's loss fraction.
    pub last_loss_fraction: Option<f64>,
    /// The last trial's user rate, b/s.
    pub last_rate_bps: Option<f64>,
}

/// `linkemu`: both directions' counters, totals since the start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkemuStatus {
    /// Seconds since the start.
    pub elapsed_s: f64,
    /// Namespace A to B.
    pub a_to_b: linkemu::LiveCounters,
    /// B to A.
    pub b_to_a: linkemu::LiveCounters,
}

/// `evlbi serve` itself: what it is doing and who talks to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServeStatus {
    /// The transfer running (`record`, `net2file`, `net2net`), or `no_transfer`.
    pub transfer: String,
    /// Its scan or file name, destination for `net2net`.
    pub target: Option<String>,
    /// Scans recorded since the start.
    pub scans: u64,
    /// VSI-S statements answered.
    pub statements: u64,
    /// Of those, with a return code other than 0 and 1.
    pub refused: u64,
    /// Control lines longer than the limit (dropped).
    pub overlong_lines: u64,
    /// Control connections accepted.
    pub connections: u64,
    /// Control connections closed at once because the peer is not allowed.
    #[serde(default)]
    pub connections_refused: u64,
}

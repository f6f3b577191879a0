//! What a recorder serving VSI-S (`evlbi serve`) counts about itself: the transfer it runs and
//! the statements and connections of its control port. The daemon keeps it; the metrics view
//! renders it.

use serde::{Deserialize, Serialize};

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
    /// Statements whose handling failed inside the daemon (a bug: a panic), answered with
    /// return code 4; the daemon goes on.
    #[serde(default)]
    pub internal_errors: u64,
    /// The set disks (`set_disks`), each with its file system's space.
    #[serde(default)]
    pub disks: Vec<DiskSpace>,
    /// Seconds until the set disks are full at `fill_rate_bps`, each file system counted
    /// once; null without a mode.
    #[serde(default)]
    pub time_left_s: Option<f64>,
    /// The rate the set fills at, bits a second: a running recording's measured rate (bytes
    /// written over its time) after its first second, else the mode's rate with the frames'
    /// headers; null without a mode.
    #[serde(default)]
    pub fill_rate_bps: Option<f64>,
    /// Whether `fill_rate_bps` was measured from a running recording (false: the mode's).
    #[serde(default)]
    pub fill_rate_measured: bool,
    /// The runtimes besides the default one (`runtime = NAME`), each with its transfer; the
    /// fields above are the default runtime's.
    #[serde(default)]
    pub runtimes: Vec<RuntimeStatus>,
}

/// One runtime besides the default and what it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStatus {
    /// Its name.
    pub name: String,
    /// The transfer it runs (`net2sfxc`, `record`, …), or `no_transfer`.
    pub transfer: String,
    /// Its scan, file or socket, destination for `net2net`.
    pub target: Option<String>,
}

/// One disk of the set and its space, as its file system reports it (statvfs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSpace {
    /// Its directory.
    pub path: String,
    /// Bytes free to an unprivileged writer.
    pub free_bytes: u64,
    /// Size of its file system, bytes.
    pub total_bytes: u64,
}

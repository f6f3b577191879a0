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
}

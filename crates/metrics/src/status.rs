//! The counts of one running command, as the core crate that counts them hands them over: a
//! leaf that the hub, the series and the history all read.

use serde::Serialize;
use stream::results::{RecvStatus, RelayStatus, SendStatus};

/// The counts of one running command.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", content = "status", rename_all = "snake_case")]
pub enum Status {
    /// `stream recv` (and the daemon's `record`, `net2file`).
    StreamRecv(RecvStatus),
    /// `stream relay` (and the daemon's `net2net`).
    StreamRelay(RelayStatus),
    /// `stream send`.
    StreamSend(SendStatus),
    /// `evlbi recv`.
    TransferRecv(transfer::results::TransferRecvStatus),
    /// `evlbi send`.
    TransferSend(transfer::results::TransferSendStatus),
    /// `probe server`.
    ProbeServer(probe::results::ProbeServerStatus),
    /// `linkemu`.
    Linkemu(linkemu::LinkemuStatus),
    /// `evlbi serve` itself.
    Serve(vsis::status::ServeStatus),
}

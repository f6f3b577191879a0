//! What ends a probe session.

use thiserror::Error;

use ctlchan::ChannelError;

/// Why a probe session (client or server end) failed.
#[derive(Debug, Error)]
pub enum ProbeSessionError {
    /// A socket operation failed.
    #[error(transparent)]
    Io(#[from] netio::IoError),
    /// Socket setup (bind, connect, buffer sizing) failed.
    #[error(transparent)]
    Socket(#[from] netio::NetioError),
    /// The peer sent a malformed, oversized or invalid control message, or (with a key) a line
    /// whose MAC does not check: changed, dropped, replayed or reordered on the way.
    #[error("control channel: {0}")]
    Control(#[from] ChannelError),
    /// Authentication failed or was refused.
    #[error("authentication: {0}")]
    Auth(#[from] ctlchan::handshake::HandshakeError),
    /// The peer said no.
    #[error("peer refused: {0}")]
    Refused(String),
    /// The peer sent a message out of turn.
    #[error("unexpected control message: {0}")]
    Unexpected(&'static str),
    /// The peer went quiet or closed the connection.
    #[error("control connection closed or timed out while waiting for {0}")]
    Closed(&'static str),
    /// The kernel has no congestion control of this name (or may not set it).
    #[error("congestion control {name:?} unavailable ({why}); this kernel offers: {available}")]
    UnknownCongestionControl {
        /// The name asked for.
        name: String,
        /// What setting it said.
        why: String,
        /// The kernel's list (/proc/sys/net/ipv4/tcp_available_congestion_control).
        available: String,
    },
    /// The competing CPU load could not be started.
    #[error("{0}")]
    CpuLoad(String),
}

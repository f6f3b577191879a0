//! What ends a transfer session, and why a key handshake failed.

use ctlchan::handshake::HandshakeError;
use ctlchan::ChannelError;
use thiserror::Error;

use crate::control::Msg;

/// Why a transfer session (either end) failed.
#[derive(Debug, Error)]
pub enum TransferSessionError {
    /// The control channel failed (closed, malformed, oversized, timed out).
    #[error(transparent)]
    Control(#[from] ChannelError),
    /// The key handshake failed.
    #[error("authentication failed: {0}")]
    Auth(#[from] AuthError),
    /// The peer reported a fatal error.
    #[error("peer: {0}")]
    Peer(String),
    /// The peer broke the protocol.
    #[error("peer: {0}")]
    Protocol(#[from] ProtocolViolation),
    /// The peer sent a message out of turn.
    #[error("unexpected `{got}` while waiting for {want}")]
    Unexpected {
        /// What came.
        got: &'static str,
        /// What was expected.
        want: &'static str,
    },
    /// The accept loop did not admit the authenticated connection (busy, or closed meanwhile).
    #[error(transparent)]
    NotAdmitted(#[from] ctlchan::serve::NotAdmitted),
    /// A local file or socket operation failed.
    #[error(transparent)]
    Io(#[from] netio::IoError),
    /// A local argument is unusable.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The transfer was interrupted.
    #[error("interrupted")]
    Interrupted,
}

impl From<HandshakeError> for TransferSessionError {
    fn from(e: HandshakeError) -> Self {
        TransferSessionError::Auth(AuthError::Handshake(e))
    }
}

/// Why the key handshake failed, as a sender or a receiver sees it.
#[derive(Debug, Error)]
pub enum AuthError {
    /// The handshake itself ([`ctlchan::handshake`]).
    #[error(transparent)]
    Handshake(HandshakeError),
    /// The receiver refused the sender's first flight ([`crate::first_flight`]).
    #[error(transparent)]
    FirstFlight(#[from] crate::first_flight::FirstFlightError),
    /// The receiver's first authenticated line did not check: it refused our first flight (and
    /// said why in the clear, in its log) or derived another session key.
    #[error(
        "the receiver refused our first flight: a wrong key, our clock more than {} s from its, \
         or it needs a key we do not have (its log says which)",
        crate::first_flight::CLOCK_WINDOW.as_secs()
    )]
    ReceiverRefused,
    /// The receiver hung up right after our key proof.
    #[error("the receiver ended the connection after our key proof (a wrong key?): {0}")]
    EndedAfterProof(#[source] ChannelError),
}

/// How a peer broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolViolation {
    /// The data stream failed (the peer stopped answering or sent what the state machine
    /// refuses).
    #[error("the data stream failed: {0}")]
    DataStream(String),
    /// Nothing came from the sender for this long.
    #[error("nothing from the sender for {0:?}")]
    Silent(std::time::Duration),
    /// No valid datagram for this long while blocks were missing.
    #[error("no valid datagram from the sender for {0:?}")]
    NoData(std::time::Duration),
    /// Hashes for blocks past a file's end.
    #[error("hashes beyond the last block of file {0}")]
    HashesBeyondEnd(u64),
    /// Two hashes for one block.
    #[error("two hashes for one block of file {0}")]
    TwoHashes(u64),
    /// One file accepted twice.
    #[error("file {0} accepted twice")]
    AcceptedTwice(u64),
    /// One id offered twice.
    #[error("file {0} offered twice")]
    OfferedTwice(u64),
    /// An answer for a file that was never offered or accepted.
    #[error("{what} for file {id}, which was not {state}")]
    UnknownFile {
        /// What came.
        what: &'static str,
        /// The file id.
        id: u64,
        /// What the file should have been.
        state: &'static str,
    },
}

/// A local argument the session cannot use.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum UsageError {
    /// The chunk size is outside what the protocol carries.
    #[error("chunk size {0} outside {min}..={max}", min = crate::control::CHUNK_RANGE.start(), max = crate::control::CHUNK_RANGE.end())]
    ChunkSize(u32),
    /// A path to send has no file name.
    #[error("{0}: no file name to send it under")]
    NoFileName(std::path::PathBuf),
    /// The receiver's root is not a directory.
    #[error("--root {0} is not a directory")]
    RootNotADirectory(std::path::PathBuf),
    /// The transfer core refused the configuration.
    #[error(transparent)]
    Config(#[from] transfer::ConfigError),
}

/// The error for a message that came out of turn: the peer's own words when it is an `error`.
pub(crate) fn unexpected(got: &Msg, want: &'static str) -> TransferSessionError {
    match got {
        Msg::Error { message } => TransferSessionError::Peer(message.clone()),
        other => TransferSessionError::Unexpected {
            got: other.name(),
            want,
        },
    }
}

/// Why a receiver does not take a file: the text of its `refused` line and of the file's report.
/// The text is the whole story (no separate source), as it goes to the sender.
#[derive(Debug, Error)]
pub enum Refusal {
    /// The session holds as many files or blocks as it may.
    #[error("{path}: too many files or blocks in flight in this session; offer fewer at once")]
    TooMuchInFlight {
        /// The offered path.
        path: String,
    },
    /// Another session is receiving the same path.
    #[error("{path} is being received by another session")]
    Busy {
        /// The offered path.
        path: String,
    },
    /// The path is not one the receiver writes (absolute, `..`, too deep, reserved, …).
    #[error("{0}")]
    Path(crate::paths::PathError),
    /// Something is at the path and replacing it was not allowed.
    #[error("{path} exists below the receiver's root (start the receiver with --overwrite to replace files)")]
    Exists {
        /// The offered path.
        path: String,
    },
    /// Something other than a regular file is at the path.
    #[error("{path} exists and is not a regular file")]
    NotAFile {
        /// The offered path.
        path: String,
    },
    /// Looking at the path's directory failed.
    #[error("{0}")]
    Dir(safedir::DirError),
    /// The `.part` file or its resume record could not be opened or set up.
    #[error("{part}: {why}")]
    Part {
        /// The `.part` file.
        part: std::path::PathBuf,
        /// Why.
        why: PartError,
    },
}

/// Why a `.part` file could not be opened, sized or recorded.
#[derive(Debug, Error)]
pub enum PartError {
    /// Opening it below the root (a link, a file with other hard links, …).
    #[error("{0}")]
    Dir(safedir::DirError),
    /// Reading its size, sizing it, writing its record, or reading back the blocks it holds.
    #[error("{0}")]
    Io(std::io::Error),
}

/// Why a verified file could not be made durable or given its name.
#[derive(Debug, Error)]
pub enum CommitError {
    /// The fsync failed.
    #[error("syncing {path}: {why}")]
    Sync {
        /// The `.part` file.
        path: std::path::PathBuf,
        /// Why.
        why: std::io::Error,
    },
    /// The rename into place failed (or, without --overwrite, a file appeared there meanwhile).
    #[error("renaming to {path}: {why}")]
    Rename {
        /// The final name.
        path: std::path::PathBuf,
        /// Why.
        why: std::io::Error,
    },
}

//! What both ends of a transfer agree on before it starts, what they refuse, and the first
//! check either applies to a datagram.

use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::wire::{self, DataKey, WireError};

/// What both ends agree on before the transfer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SessionParams {
    /// Carried in every datagram; datagrams of other sessions are dropped.
    pub session_id: u64,
    /// Bytes to transfer.
    pub file_size: u64,
    /// Payload bytes per DATA datagram (the last chunk may be shorter). 8192 suits jumbo
    /// frames; 1416 fits a 1500-byte MTU in an authenticated session (1500 − 20 IP − 8 UDP − 40 header − 16 tag).
    pub chunk_size: u32,
}

impl SessionParams {
    /// Number of chunks (0 for an empty file).
    pub fn total_chunks(&self) -> u64 {
        self.file_size.div_ceil(u64::from(self.chunk_size.max(1)))
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.chunk_size == 0 || self.chunk_size as usize > wire::MAX_PAYLOAD {
            return Err(ConfigError::ChunkSize(self.chunk_size));
        }
        Ok(())
    }
}

/// A configuration value is out of range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// Chunk size 0 or larger than a UDP datagram can carry.
    #[error("chunk size {0} must be in 1..={max}", max = wire::MAX_PAYLOAD)]
    ChunkSize(u32),
    /// A duration or count that must be positive is zero.
    #[error("{0} must be positive")]
    NotPositive(&'static str),
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Reject {
    /// It does not parse.
    #[error("malformed: {0}")]
    Malformed(#[from] WireError),
    /// Another session's datagram.
    #[error("session id {0:#x} is not ours")]
    WrongSession(u64),
    /// A kind this side never receives (e.g. DATA at the sender).
    #[error("unexpected {0:?}")]
    UnexpectedKind(wire::Kind),
    /// DATA at or past the end of the file.
    #[error("offset {0} is beyond the end of the file")]
    OffsetBeyondEnd(u64),
    /// DATA whose offset is not on the chunk grid.
    #[error("offset {0} is not a multiple of the chunk size")]
    MisalignedOffset(u64),
    /// DATA whose payload length is not the chunk's length.
    #[error("payload of {len} bytes where the chunk has {expected}")]
    BadPayloadLength {
        /// Received.
        len: usize,
        /// Expected.
        expected: usize,
    },
    /// DATA past the receive window.
    #[error("chunk {0} is beyond the receive window")]
    BeyondWindow(u64),
    /// A REPORT acknowledging or NAKing chunks, sequence numbers or timestamps never sent.
    #[error("report refers to data never sent: {0}")]
    NeverSent(&'static str),
    /// FIN or FIN-ACK for another file size.
    #[error("file size {0} does not match the session")]
    FileSizeMismatch(u64),
    /// A keyed session's datagram without a valid tag (forged, corrupted or of another key).
    #[error("authentication tag missing or wrong")]
    BadTag,
}

/// Check the tag (keyed sessions), parse the datagram and check it belongs to `session_id`:
/// what both sides do first.
pub(crate) fn parse_own<'a>(
    datagram: &'a [u8],
    session_id: u64,
    key: Option<&DataKey>,
) -> Result<wire::Datagram<'a>, Reject> {
    let datagram = match key {
        Some(k) => k.open(datagram).ok_or(Reject::BadTag)?,
        None => datagram,
    };
    let d = wire::parse(datagram)?;
    match d.session_id() {
        s if s == session_id => Ok(d),
        other => Err(Reject::WrongSession(other)),
    }
}

/// Count of dropped datagrams per [`Reject`] reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RejectCounters {
    /// [`Reject::Malformed`].
    pub malformed: u64,
    /// [`Reject::WrongSession`].
    pub wrong_session: u64,
    /// [`Reject::UnexpectedKind`].
    pub unexpected_kind: u64,
    /// [`Reject::OffsetBeyondEnd`], [`Reject::MisalignedOffset`], [`Reject::BadPayloadLength`].
    pub bad_offset: u64,
    /// [`Reject::BeyondWindow`].
    pub beyond_window: u64,
    /// [`Reject::NeverSent`].
    pub never_sent: u64,
    /// [`Reject::FileSizeMismatch`].
    pub file_size_mismatch: u64,
    /// [`Reject::BadTag`].
    pub bad_tag: u64,
}

impl RejectCounters {
    /// Total dropped.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.wrong_session
            + self.unexpected_kind
            + self.bad_offset
            + self.beyond_window
            + self.never_sent
            + self.file_size_mismatch
            + self.bad_tag
    }

    pub(crate) fn count(&mut self, r: &Reject) {
        let c = match r {
            Reject::Malformed(_) => &mut self.malformed,
            Reject::WrongSession(_) => &mut self.wrong_session,
            Reject::UnexpectedKind(_) => &mut self.unexpected_kind,
            Reject::OffsetBeyondEnd(_) | Reject::MisalignedOffset(_) | Reject::BadPayloadLength { .. } => {
                &mut self.bad_offset
            }
            Reject::BeyondWindow(_) => &mut self.beyond_window,
            Reject::NeverSent(_) => &mut self.never_sent,
            Reject::FileSizeMismatch(_) => &mut self.file_size_mismatch,
            Reject::BadTag => &mut self.bad_tag,
        };
        *c += 1;
    }
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

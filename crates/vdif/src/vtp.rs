//! VTP / udps datagram framing: an 8-byte sequence number followed by one VDIF frame.
//!
//! This is the "udps" transport of jive5ab (and the VDIF Transport Protocol, VTP, draft): the
//! sequence number is written in the sender's host byte order, which on every deployed jive5ab
//! host (x86) is little-endian, and it starts at a random value. We always use little-endian so
//! that `--seq-format jive5ab` is byte-compatible with those hosts.

use crate::error::VtpError;
use crate::header::{VdifHeader, LEGACY_HEADER_LEN};

/// Length of the sequence-number prefix.
pub const SEQ_LEN: usize = 8;

/// Write `seq` (little-endian) and `frame` into one datagram buffer.
pub fn encode(seq: u64, frame: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(SEQ_LEN + frame.len());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(frame);
}

/// A parsed udps datagram: sequence number, header and the whole frame (header + data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VtpDatagram<'a> {
    /// Sequence number from the 8-byte prefix.
    pub seq: u64,
    /// Parsed header of the frame.
    pub header: VdifHeader,
    /// The frame bytes, header included.
    pub frame: &'a [u8],
}

/// Parse and validate a udps datagram. The header must be valid and its length field must equal
/// the bytes carried, so a truncated or padded datagram is never taken for a frame.
pub fn decode(datagram: &[u8]) -> Result<VtpDatagram<'_>, VtpError> {
    if datagram.len() < SEQ_LEN + LEGACY_HEADER_LEN {
        return Err(VtpError::TooShort(datagram.len()));
    }
    let (seq_bytes, frame) = datagram.split_at(SEQ_LEN);
    let mut seq = [0u8; SEQ_LEN];
    seq.copy_from_slice(seq_bytes);
    let header = VdifHeader::parse_valid(frame)?;
    if header.frame_len() != frame.len() {
        return Err(VtpError::LengthMismatch {
            header: header.frame_len(),
            carried: frame.len(),
        });
    }
    Ok(VtpDatagram {
        seq: u64::from_le_bytes(seq),
        header,
        frame,
    })
}

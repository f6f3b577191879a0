//! Datagram formats of `evlbi stream`.
//!
//! Every data datagram carries exactly one VDIF frame (VDIF 1.1.1 §3), or one Mark5B frame in a
//! stream whose mode says Mark5B ([`parse_data_as`]). Three framings:
//!
//! | format    | prefix before the frame                                               |
//! |-----------|-----------------------------------------------------------------------|
//! | `native`  | 24 bytes, big-endian, described below                                  |
//! | `jive5ab` | 8-byte little-endian sequence number (jive5ab "udps" / VTP, see [`vdif::vtp`]) |
//! | `none`    | nothing: the datagram is the frame                                     |
//!
//! Native data prefix (24 bytes):
//!
//! | offset | size | field                                                          |
//! |--------|------|----------------------------------------------------------------|
//! | 0      | 4    | magic `eVDS`                                                   |
//! | 4      | 1    | version (1)                                                    |
//! | 5      | 1    | flags: bit 0 = retransmission                                  |
//! | 6      | 2    | stream index at the sender (one per station)                   |
//! | 8      | 8    | sequence number, per stream, +1 per frame                      |
//! | 16     | 4    | frames/s per thread (threads 0: of the station; 0 = unknown)   |
//! | 20     | 2    | number of VDIF threads in the stream (0 = unknown)             |
//! | 22     | 2    | sender session: random per sender run, never 0 (0 = not given) |
//!
//! The frame rate and thread count let a receiver place frames in time without being told them
//! on its command line, which jive5ab-framed and bare streams need (`--fps`, `--threads`). A rate
//! with threads 0 is the station's over all its threads, the split not known (a relay given only
//! a VSI-S mode's rate, until the frames confirm its split): the receiver counts the threads and
//! checks the split as it does for a mode's rate ([`crate::rate_check`]).
//!
//! The session was a reserved 0 in the first senders, and receivers never looked at it, so both
//! directions stay compatible. It tells a restarted sender (new session, often a new source
//! port) from a stray or replayed datagram of the old one; it is an identity, not a secret: a
//! receiver still accepts a new session only after a run of consistent frames.
//!
//! Native NAK (receiver → sender, only with `--arq-latency`), 12 + 12·n bytes:
//!
//! | offset | size | field                                       |
//! |--------|------|---------------------------------------------|
//! | 0      | 4    | magic `eVDN`                                |
//! | 4      | 1    | version (1)                                 |
//! | 5      | 1    | reserved, 0                                 |
//! | 6      | 2    | stream index                                |
//! | 8      | 2    | n, number of ranges (1..=[`MAX_NAK_RANGES`])  |
//! | 10     | 2    | reserved, 0                                 |
//! | 12     | 12·n | ranges: first sequence number (8), count (4)|

use thiserror::Error;
use vdif::{VdifHeader, LEGACY_HEADER_LEN};

/// Magic of a native data datagram.
pub const DATA_MAGIC: [u8; 4] = *b"eVDS";
/// Magic of a NAK datagram.
pub const NAK_MAGIC: [u8; 4] = *b"eVDN";
/// Version written and accepted.
pub const VERSION: u8 = 1;
/// Length of the native data prefix.
pub const NATIVE_PREFIX_LEN: usize = 24;
/// Most ranges one NAK carries; keeps a NAK below 1 KB so it never fragments.
pub const MAX_NAK_RANGES: usize = 64;
/// Most frames one NAK range may ask for: a forged NAK cannot make a sender loop for long.
pub const MAX_NAK_RANGE_LEN: u32 = 1 << 16;
const FLAG_RETRANSMIT: u8 = 1;

/// How frames are framed in datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeqFormat {
    /// evlbi's own 24-byte prefix (sequence number, stream, frame rate, threads).
    Native,
    /// jive5ab udps: 8-byte little-endian sequence number.
    Jive5ab,
    /// Bare VDIF frames, no sequence number.
    None,
}

impl SeqFormat {
    /// Bytes before the frame.
    pub fn prefix_len(self) -> usize {
        match self {
            SeqFormat::Native => NATIVE_PREFIX_LEN,
            SeqFormat::Jive5ab => vdif::vtp::SEQ_LEN,
            SeqFormat::None => 0,
        }
    }
}

/// The native prefix, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativePrefix {
    /// This datagram repeats a frame in answer to a NAK.
    pub retransmit: bool,
    /// Stream index at the sender.
    pub stream: u16,
    /// Sequence number within the stream.
    pub seq: u64,
    /// Frames per second per thread, 0 if the sender does not know; with `threads` 0, the
    /// station's over all threads.
    pub frames_per_second: u32,
    /// VDIF threads in the stream, 0 if the sender does not know.
    pub threads: u16,
    /// Sender session (random per sender run), 0 if not given.
    pub session: u16,
}

impl NativePrefix {
    /// Write the prefix into the first [`NATIVE_PREFIX_LEN`] bytes of `out`.
    pub fn emit(&self, out: &mut [u8; NATIVE_PREFIX_LEN]) {
        out[0..4].copy_from_slice(&DATA_MAGIC);
        out[4] = VERSION;
        out[5] = if self.retransmit { FLAG_RETRANSMIT } else { 0 };
        out[6..8].copy_from_slice(&self.stream.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..20].copy_from_slice(&self.frames_per_second.to_be_bytes());
        out[20..22].copy_from_slice(&self.threads.to_be_bytes());
        out[22..24].copy_from_slice(&self.session.to_be_bytes());
    }
}

/// One data datagram, parsed and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataDatagram<'a> {
    /// Native prefix, if the framing has one.
    pub native: Option<NativePrefix>,
    /// Sequence number (native or jive5ab framing).
    pub seq: Option<u64>,
    /// The frame's header.
    pub header: VdifHeader,
    /// The frame, header included.
    pub frame: &'a [u8],
}

/// Why a datagram was not taken as a frame. Each reason is counted separately.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Shorter than prefix plus the smallest VDIF header.
    #[error("datagram of {0} bytes is too short to hold a VDIF frame")]
    TooShort(usize),
    /// Native framing expected, magic differs.
    #[error("native framing expected but the magic is {0:02x?}")]
    BadMagic([u8; 4]),
    /// Native framing of a version we do not speak.
    #[error("native framing version {0} is not supported (this build speaks {VERSION})")]
    BadVersion(u8),
    /// The VDIF header is not a header (field ranges, sample sizes).
    #[error("VDIF header rejected: {0}")]
    BadHeader(vdif::HeaderError),
    /// A frame of a stream of another format (Mark5B) that is not one of its format.
    #[error("frame rejected: {0}")]
    BadFrame(vdif::FrameError),
    /// The header's frame length differs from the bytes carried.
    #[error("VDIF header says {header} bytes but the datagram carries {carried}")]
    LengthMismatch {
        /// Frame length the header states.
        header: usize,
        /// Frame bytes the datagram carries.
        carried: usize,
    },
}

/// Parse a data datagram in `format`. The frame length stated by the header must equal the bytes
/// carried, so a truncated or padded datagram is never written as a frame.
pub fn parse_data(format: SeqFormat, datagram: &[u8]) -> Result<DataDatagram<'_>, WireError> {
    parse_data_as(format, vdif::FrameFormat::Vdif, datagram)
}

/// [`parse_data`] of a stream of `frames` frames: the datagram's header is the frame's order
/// header ([`vdif::frame_format`]; a VDIF frame's own), the frame as it came.
pub fn parse_data_as(
    format: SeqFormat,
    frames: vdif::FrameFormat,
    datagram: &[u8],
) -> Result<DataDatagram<'_>, WireError> {
    let prefix = format.prefix_len();
    if datagram.len() < prefix + LEGACY_HEADER_LEN {
        return Err(WireError::TooShort(datagram.len()));
    }
    let (head, frame) = datagram.split_at(prefix);
    let native = match format {
        SeqFormat::Native => {
            let magic = [head[0], head[1], head[2], head[3]];
            if magic != DATA_MAGIC {
                return Err(WireError::BadMagic(magic));
            }
            if head[4] != VERSION {
                return Err(WireError::BadVersion(head[4]));
            }
            Some(NativePrefix {
                retransmit: head[5] & FLAG_RETRANSMIT != 0,
                stream: u16::from_be_bytes([head[6], head[7]]),
                seq: u64::from_be_bytes(head[8..16].try_into().unwrap_or_default()),
                frames_per_second: u32::from_be_bytes(head[16..20].try_into().unwrap_or_default()),
                threads: u16::from_be_bytes([head[20], head[21]]),
                session: u16::from_be_bytes([head[22], head[23]]),
            })
        }
        _ => None,
    };
    let seq = match format {
        SeqFormat::Native => native.map(|n| n.seq),
        SeqFormat::Jive5ab => Some(u64::from_le_bytes(head.try_into().unwrap_or_default())),
        SeqFormat::None => None,
    };
    let header = match frames.order_header(frame) {
        Ok(h) => h,
        Err(vdif::FrameError::Vdif(e)) => return Err(WireError::BadHeader(e)),
        Err(e) => return Err(WireError::BadFrame(e)),
    };
    if header.frame_len() != frame.len() {
        return Err(WireError::LengthMismatch {
            header: header.frame_len(),
            carried: frame.len(),
        });
    }
    Ok(DataDatagram {
        native,
        seq,
        header,
        frame,
    })
}

/// Build a data datagram: prefix for `format` (with `native` fields when native) then `frame`.
pub fn encode_data(format: SeqFormat, native: &NativePrefix, frame: &[u8], out: &mut Vec<u8>) {
    out.clear();
    match format {
        SeqFormat::Native => {
            let mut p = [0u8; NATIVE_PREFIX_LEN];
            native.emit(&mut p);
            out.extend_from_slice(&p);
        }
        SeqFormat::Jive5ab => out.extend_from_slice(&native.seq.to_le_bytes()),
        SeqFormat::None => {}
    }
    out.extend_from_slice(frame);
}

pub use seqrange::SeqRange;

/// A NAK: the receiver asks the sender to repeat these frames of one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nak {
    /// Stream index.
    pub stream: u16,
    /// Missing ranges, 1..=[`MAX_NAK_RANGES`].
    pub ranges: Vec<SeqRange>,
}

/// Why a datagram on the sender's socket is not a NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NakError {
    /// Too short for the fixed part, or not the length its range count implies.
    #[error("NAK of {len} bytes does not match its range count {ranges}")]
    Length {
        /// Bytes received.
        len: usize,
        /// Ranges the NAK says it holds.
        ranges: usize,
    },
    /// Not a NAK at all.
    #[error("not a NAK (magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// Unsupported version.
    #[error("NAK version {0} is not supported")]
    BadVersion(u8),
    /// Zero ranges, too many ranges, or a range of 0 or more than [`MAX_NAK_RANGE_LEN`] frames.
    #[error("NAK asks for an implausible range set")]
    Implausible,
}

impl Nak {
    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        12 + 12 * self.ranges.len()
    }

    /// Encode into `out` (cleared first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&NAK_MAGIC);
        out.push(VERSION);
        out.push(0);
        out.extend_from_slice(&self.stream.to_be_bytes());
        out.extend_from_slice(&(self.ranges.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for r in &self.ranges {
            out.extend_from_slice(&r.first.to_be_bytes());
            out.extend_from_slice(&r.count.to_be_bytes());
        }
    }

    /// Parse and validate.
    pub fn parse(bytes: &[u8]) -> Result<Nak, NakError> {
        if bytes.len() < 12 {
            return Err(NakError::Length {
                len: bytes.len(),
                ranges: 0,
            });
        }
        let magic = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if magic != NAK_MAGIC {
            return Err(NakError::BadMagic(magic));
        }
        if bytes[4] != VERSION {
            return Err(NakError::BadVersion(bytes[4]));
        }
        let stream = u16::from_be_bytes([bytes[6], bytes[7]]);
        let n = usize::from(u16::from_be_bytes([bytes[8], bytes[9]]));
        if bytes.len() != 12 + 12 * n {
            return Err(NakError::Length {
                len: bytes.len(),
                ranges: n,
            });
        }
        if n == 0 || n > MAX_NAK_RANGES {
            return Err(NakError::Implausible);
        }
        let mut ranges = Vec::with_capacity(n);
        for chunk in bytes[12..].chunks_exact(12) {
            let first = u64::from_be_bytes(chunk[0..8].try_into().unwrap_or_default());
            let count = u32::from_be_bytes(chunk[8..12].try_into().unwrap_or_default());
            if count == 0 || count > MAX_NAK_RANGE_LEN || first.checked_add(u64::from(count)).is_none() {
                return Err(NakError::Implausible);
            }
            ranges.push(SeqRange { first, count });
        }
        Ok(Nak { stream, ranges })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> Vec<u8> {
        let l = vdif::FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap();
        let mut h = l.header(0x4566);
        h.seconds = 1000;
        h.frame_number = 7;
        let mut f = vec![0u8; l.frame_len];
        h.emit(&mut f[..32]).unwrap();
        f
    }

    #[test]
    fn native_round_trip() {
        let f = frame();
        let p = NativePrefix {
            retransmit: true,
            stream: 3,
            seq: 0x0102_0304_0506_0708,
            frames_per_second: 8000,
            threads: 2,
            session: 0xbeef,
        };
        let mut d = Vec::new();
        encode_data(SeqFormat::Native, &p, &f, &mut d);
        assert_eq!(&d[..4], b"eVDS");
        // Big-endian sequence number at offset 8 and session at 22 (the table in the module docs).
        assert_eq!(&d[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&d[22..24], &[0xbe, 0xef]);
        let got = parse_data(SeqFormat::Native, &d).unwrap();
        assert_eq!(got.native, Some(p));
        assert_eq!(got.seq, Some(p.seq));
        assert_eq!(got.header.frame_number, 7);
        assert_eq!(got.frame, &f[..]);
    }

    #[test]
    fn jive5ab_udps_bytes_parse_and_emit_as_documented() {
        // udps: sequence 0x1122334455667788 little-endian, then the frame byte-for-byte.
        let f = frame();
        let mut d = vec![0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11];
        d.extend_from_slice(&f);
        let got = parse_data(SeqFormat::Jive5ab, &d).unwrap();
        assert_eq!(got.seq, Some(0x1122_3344_5566_7788));
        assert_eq!(got.frame, &f[..]);
        let mut out = Vec::new();
        let p = NativePrefix {
            retransmit: false,
            stream: 0,
            seq: 0x1122_3344_5566_7788,
            frames_per_second: 0,
            threads: 0,
            session: 7,
        };
        encode_data(SeqFormat::Jive5ab, &p, &f, &mut out);
        assert_eq!(out, d);
    }

    #[test]
    fn rejects_each_reason() {
        let f = frame();
        assert_eq!(parse_data(SeqFormat::None, &f[..10]), Err(WireError::TooShort(10)));
        let mut bad = vec![0u8; 24];
        bad.extend_from_slice(&f);
        assert!(matches!(
            parse_data(SeqFormat::Native, &bad),
            Err(WireError::BadMagic(_))
        ));
        bad[..4].copy_from_slice(b"eVDS");
        bad[4] = 9;
        assert_eq!(parse_data(SeqFormat::Native, &bad), Err(WireError::BadVersion(9)));
        assert!(matches!(
            parse_data(SeqFormat::None, &f[..f.len() - 8]),
            Err(WireError::LengthMismatch { .. })
        ));
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 8]);
        assert!(matches!(
            parse_data(SeqFormat::None, &padded),
            Err(WireError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn nak_round_trip_and_limits() {
        let nak = Nak {
            stream: 1,
            ranges: vec![SeqRange { first: 10, count: 3 }, SeqRange { first: 99, count: 1 }],
        };
        let mut b = Vec::new();
        nak.encode(&mut b);
        assert_eq!(b.len(), nak.encoded_len());
        assert_eq!(Nak::parse(&b), Ok(nak));
        let mut huge = b.clone();
        huge[20..24].copy_from_slice(&(MAX_NAK_RANGE_LEN + 1).to_be_bytes());
        assert_eq!(Nak::parse(&huge), Err(NakError::Implausible));
        assert!(matches!(Nak::parse(&b[..b.len() - 1]), Err(NakError::Length { .. })));
    }

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            for f in [SeqFormat::Native, SeqFormat::Jive5ab, SeqFormat::None] {
                let _ = parse_data(f, &bytes);
            }
            let _ = Nak::parse(&bytes);
        }
    }
}

//! Datagram formats: encoding and bounded, validating parsers.
//!
//! See the crate documentation for the tables. Everything is big-endian. Parsers check the exact
//! length of every message, reject reserved flag bits, and check the internal consistency of a
//! REPORT (ordered, non-empty, in-range NAK ranges); checks that need session state (the
//! session id, the file size, what was sent) are done by [`crate::Sender`] and
//! [`crate::Receiver`]. No parser panics on any input.

use thiserror::Error;

/// First four bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"eVTR";
/// Protocol version written and accepted.
pub const VERSION: u8 = 2;
/// Length of the header common to all datagrams (magic, version, kind, session id, flags).
pub const COMMON_HEADER_LEN: usize = 16;
/// Length of a DATA header; the payload follows.
pub const DATA_HEADER_LEN: usize = 40;
/// Length of a REPORT without its NAK ranges.
pub const REPORT_FIXED_LEN: usize = 128;
/// Length of one NAK range in a REPORT (first chunk u64, count u32).
pub const NAK_RANGE_LEN: usize = 12;
/// Most NAK ranges one REPORT carries: keeps a REPORT at 1280 bytes, below any path MTU.
pub const MAX_NAK_RANGES: usize = 96;
/// Length of FIN and FIN-ACK.
pub const FIN_LEN: usize = 24;
/// Length of the authentication tag that ends every datagram of a keyed session.
pub const TAG_LEN: usize = 16;
/// Largest DATA payload: a UDP datagram over IPv4 carries at most 65 507 bytes, and a keyed
/// session appends its tag.
pub const MAX_PAYLOAD: usize = 65_507 - DATA_HEADER_LEN - TAG_LEN;

/// DATA flag: this datagram repeats a chunk sent before.
pub const FLAG_RETRANSMIT: u16 = 1;
/// DATA datagrams of a session's opening train: sequence numbers below this are sent back to
/// back (see [`Report::train_bps`]).
pub const TRAIN_LEN: u64 = 16;

/// Message kind (byte 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[repr(u8)]
pub enum Kind {
    /// Sender → receiver: one chunk of the file.
    Data = 1,
    /// Receiver → sender: acknowledgements, NAKs and path measurements.
    Report = 2,
    /// Sender → receiver: everything is acknowledged, the transfer is over.
    Fin = 3,
    /// Receiver → sender: FIN received.
    FinAck = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Data),
            2 => Some(Self::Report),
            3 => Some(Self::Fin),
            4 => Some(Self::FinAck),
            _ => None,
        }
    }
}

/// Why a datagram could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Shorter than the header of its kind.
    #[error("datagram of {len} bytes is shorter than the {need}-byte header")]
    TooShort {
        /// Length received.
        len: usize,
        /// Minimum length.
        need: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// A version other than [`VERSION`].
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// Unknown kind byte.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// A flag bit that is reserved for this kind is set.
    #[error("reserved flag bits {flags:#06x} set in a {kind:?}")]
    ReservedFlags {
        /// Message kind.
        kind: Kind,
        /// The flags field.
        flags: u16,
    },
    /// The length does not match the kind (or the NAK count of a REPORT).
    #[error("{kind:?} of {len} bytes, expected {expected}")]
    BadLength {
        /// Message kind.
        kind: Kind,
        /// Length received.
        len: usize,
        /// Length the header implies.
        expected: usize,
    },
    /// A DATA datagram without payload.
    #[error("DATA without payload")]
    EmptyPayload,
    /// A DATA payload above [`MAX_PAYLOAD`].
    #[error("DATA payload of {0} bytes exceeds the maximum")]
    PayloadTooLarge(usize),
    /// More than [`MAX_NAK_RANGES`] NAK ranges.
    #[error("{0} NAK ranges, at most {MAX_NAK_RANGES} allowed")]
    TooManyNakRanges(usize),
    /// The acknowledgement fields contradict each other
    /// (`cum_ack ≤ recv_high ≤ window_end` does not hold).
    #[error("inconsistent acknowledgement: cum_ack {cum_ack}, recv_high {recv_high}, window_end {window_end}")]
    InconsistentAck {
        /// Contiguous prefix acknowledged.
        cum_ack: u64,
        /// One past the highest chunk received.
        recv_high: u64,
        /// End of the receive window.
        window_end: u64,
    },
    /// A NAK range that is empty, unordered, overlapping, or outside `[cum_ack, recv_high)`.
    #[error("invalid NAK range {start}+{len}")]
    InvalidNakRange {
        /// First chunk of the range.
        start: u64,
        /// Number of chunks.
        len: u32,
    },
}

/// The common header of any datagram, for demultiplexing before a full parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonHeader {
    /// Message kind.
    pub kind: Kind,
    /// Flags (meaning depends on the kind).
    pub flags: u16,
    /// Session id.
    pub session_id: u64,
}

/// Reads the common header (magic, version, kind, session id, flags) only.
pub fn peek_header(datagram: &[u8]) -> Result<CommonHeader, WireError> {
    let mut r = Reader::new(datagram);
    let magic = r.array::<4>().ok_or(WireError::TooShort {
        len: datagram.len(),
        need: COMMON_HEADER_LEN,
    })?;
    if magic != MAGIC {
        return Err(WireError::BadMagic(magic));
    }
    if datagram.len() < COMMON_HEADER_LEN {
        return Err(WireError::TooShort {
            len: datagram.len(),
            need: COMMON_HEADER_LEN,
        });
    }
    let version = r.u8().unwrap_or(0);
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let kind_byte = r.u8().unwrap_or(0);
    let kind = Kind::from_u8(kind_byte).ok_or(WireError::UnknownKind(kind_byte))?;
    let session_id = r.u64().unwrap_or(0);
    let flags = r.u16().unwrap_or(0);
    Ok(CommonHeader {
        kind,
        flags,
        session_id,
    })
}

/// Session id of a datagram, if its common header is valid (for demultiplexing).
pub fn peek_session(datagram: &[u8]) -> Option<u64> {
    peek_header(datagram).ok().map(|h| h.session_id)
}

/// Header of a DATA datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Session id.
    pub session_id: u64,
    /// Transmission sequence number: +1 for every DATA datagram sent, retransmissions included.
    pub seq: u64,
    /// File offset of the payload (a multiple of the chunk size).
    pub offset: u64,
    /// Sender clock at transmission, µs since the sender's epoch.
    pub timestamp_us: u64,
    /// Whether the chunk was sent before.
    pub retransmit: bool,
}

impl DataHeader {
    /// Appends the 40-byte header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        write_common(
            out,
            Kind::Data,
            if self.retransmit { FLAG_RETRANSMIT } else { 0 },
            self.session_id,
        );
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.timestamp_us.to_be_bytes());
    }
}

/// A parsed DATA datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'a> {
    /// Header fields.
    pub header: DataHeader,
    /// The chunk's bytes.
    pub payload: &'a [u8],
}

mod auth;

pub use auth::{is_subtree, payload_digest, DataKey, PayloadDigest, BLAKE3_CHUNK_LEN};
pub use seqrange::SeqRange;

/// A REPORT: the receiver's state and measurements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// Session id.
    pub session_id: u64,
    /// +1 per REPORT sent; older reports arriving late are ignored.
    pub report_seq: u64,
    /// Chunks `[0, cum_ack)` are all received.
    pub cum_ack: u64,
    /// One past the highest chunk received (0 if none).
    pub recv_high: u64,
    /// The sender may send chunks below this (receive window).
    pub window_end: u64,
    /// One past the highest DATA sequence number received (0 if none).
    pub seq_high: u64,
    /// DATA datagrams received in total (duplicates included).
    pub rx_datagrams: u64,
    /// Highest sender timestamp received (µs, sender clock), for RTT.
    pub echo_ts_us: u64,
    /// Time from the arrival of the datagram carrying `echo_ts_us` to this report, µs.
    pub echo_delay_us: u32,
    /// Length of the measurement interval (since the previous report), µs.
    pub interval_us: u32,
    /// DATA datagrams received in the interval.
    pub interval_datagrams: u32,
    /// Payload bytes received in the interval (receive rate = bytes / interval).
    pub interval_bytes: u64,
    /// Smallest one-way delay seen in the session, µs (receiver clock − sender timestamp:
    /// relative, the clock offset is unknown).
    pub owd_min_us: i64,
    /// Smallest relative one-way delay in the interval, µs.
    pub owd_interval_min_us: i64,
    /// Relative one-way delay of the latest datagram, µs.
    pub owd_latest_us: i64,
    /// Dispersion rate of the session's opening train (the first [`TRAIN_LEN`] DATA
    /// datagrams, which the sender sends back to back): datagram bytes after the first over
    /// the time from the first arrival to the last, bit/s; 0 until measured. The bottleneck
    /// spaces a back-to-back train by its serialisation time, so this estimates the path's
    /// capacity one round trip into the session (packet-pair probing, Keshav, SIGCOMM 1991).
    pub train_bps: u64,
    /// Missing chunks in `[cum_ack, recv_high)`: ordered, non-overlapping, not necessarily all
    /// of them (at most [`MAX_NAK_RANGES`]; the receiver rotates through longer lists).
    pub naks: Vec<SeqRange>,
}

impl Report {
    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        REPORT_FIXED_LEN + NAK_RANGE_LEN * self.naks.len()
    }

    /// Appends the encoded report to `out`. At most [`MAX_NAK_RANGES`] ranges are written.
    pub fn write(&self, out: &mut Vec<u8>) {
        let naks = &self.naks[..self.naks.len().min(MAX_NAK_RANGES)];
        write_common(out, Kind::Report, 0, self.session_id);
        for v in [
            self.report_seq,
            self.cum_ack,
            self.recv_high,
            self.window_end,
            self.seq_high,
            self.rx_datagrams,
            self.echo_ts_us,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.echo_delay_us.to_be_bytes());
        out.extend_from_slice(&self.interval_us.to_be_bytes());
        out.extend_from_slice(&self.interval_datagrams.to_be_bytes());
        out.extend_from_slice(&self.interval_bytes.to_be_bytes());
        for v in [self.owd_min_us, self.owd_interval_min_us, self.owd_latest_us] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.train_bps.to_be_bytes());
        // Bounded by MAX_NAK_RANGES above, fits u16.
        out.extend_from_slice(&(naks.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for r in naks {
            out.extend_from_slice(&r.first.to_be_bytes());
            out.extend_from_slice(&r.count.to_be_bytes());
        }
    }
}

/// FIN (sender → receiver) or FIN-ACK (receiver → sender).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fin {
    /// Session id.
    pub session_id: u64,
    /// File size the sender (FIN) or receiver (FIN-ACK) completed.
    pub file_size: u64,
}

impl Fin {
    /// Appends the encoded message (`kind` is [`Kind::Fin`] or [`Kind::FinAck`]).
    pub fn write(&self, kind: Kind, out: &mut Vec<u8>) {
        write_common(out, kind, 0, self.session_id);
        out.extend_from_slice(&self.file_size.to_be_bytes());
    }
}

/// Any parsed datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// DATA.
    Data(Data<'a>),
    /// REPORT.
    Report(Report),
    /// FIN.
    Fin(Fin),
    /// FIN-ACK.
    FinAck(Fin),
}

impl Datagram<'_> {
    /// Session the datagram belongs to.
    pub fn session_id(&self) -> u64 {
        match self {
            Self::Data(x) => x.header.session_id,
            Self::Report(r) => r.session_id,
            Self::Fin(f) | Self::FinAck(f) => f.session_id,
        }
    }

    /// Kind of the message.
    pub fn kind(&self) -> Kind {
        match self {
            Self::Data(_) => Kind::Data,
            Self::Report(_) => Kind::Report,
            Self::Fin(_) => Kind::Fin,
            Self::FinAck(_) => Kind::FinAck,
        }
    }
}

/// Parses and validates one datagram.
pub fn parse(datagram: &[u8]) -> Result<Datagram<'_>, WireError> {
    let h = peek_header(datagram)?;
    let len = datagram.len();
    let body = &datagram[COMMON_HEADER_LEN..];
    let mut r = Reader::new(body);
    let reserved = |kind: Kind, allowed: u16| {
        if h.flags & !allowed != 0 {
            Err(WireError::ReservedFlags { kind, flags: h.flags })
        } else {
            Ok(())
        }
    };
    match h.kind {
        Kind::Data => {
            reserved(Kind::Data, FLAG_RETRANSMIT)?;
            if len < DATA_HEADER_LEN {
                return Err(WireError::TooShort {
                    len,
                    need: DATA_HEADER_LEN,
                });
            }
            let (seq, offset, timestamp_us) = (r.u64(), r.u64(), r.u64());
            let payload = &datagram[DATA_HEADER_LEN..];
            if payload.is_empty() {
                return Err(WireError::EmptyPayload);
            }
            if payload.len() > MAX_PAYLOAD {
                return Err(WireError::PayloadTooLarge(payload.len()));
            }
            Ok(Datagram::Data(Data {
                header: DataHeader {
                    session_id: h.session_id,
                    seq: seq.unwrap_or(0),
                    offset: offset.unwrap_or(0),
                    timestamp_us: timestamp_us.unwrap_or(0),
                    retransmit: h.flags & FLAG_RETRANSMIT != 0,
                },
                payload,
            }))
        }
        Kind::Report => {
            reserved(Kind::Report, 0)?;
            if len < REPORT_FIXED_LEN {
                return Err(WireError::TooShort {
                    len,
                    need: REPORT_FIXED_LEN,
                });
            }
            parse_report(h.session_id, &mut r, len)
        }
        Kind::Fin | Kind::FinAck => {
            reserved(h.kind, 0)?;
            if len != FIN_LEN {
                return Err(WireError::BadLength {
                    kind: h.kind,
                    len,
                    expected: FIN_LEN,
                });
            }
            let fin = Fin {
                session_id: h.session_id,
                file_size: r.u64().unwrap_or(0),
            };
            Ok(if h.kind == Kind::Fin {
                Datagram::Fin(fin)
            } else {
                Datagram::FinAck(fin)
            })
        }
    }
}

fn parse_report<'a>(session_id: u64, r: &mut Reader<'_>, len: usize) -> Result<Datagram<'a>, WireError> {
    // The caller checked len >= REPORT_FIXED_LEN, so none of these reads fail; the
    // `unwrap_or` defaults are never used.
    let mut rep = Report {
        session_id,
        report_seq: r.u64().unwrap_or(0),
        cum_ack: r.u64().unwrap_or(0),
        recv_high: r.u64().unwrap_or(0),
        window_end: r.u64().unwrap_or(0),
        seq_high: r.u64().unwrap_or(0),
        rx_datagrams: r.u64().unwrap_or(0),
        echo_ts_us: r.u64().unwrap_or(0),
        echo_delay_us: r.u32().unwrap_or(0),
        interval_us: r.u32().unwrap_or(0),
        interval_datagrams: r.u32().unwrap_or(0),
        interval_bytes: r.u64().unwrap_or(0),
        owd_min_us: r.i64().unwrap_or(0),
        owd_interval_min_us: r.i64().unwrap_or(0),
        owd_latest_us: r.i64().unwrap_or(0),
        train_bps: r.u64().unwrap_or(0),
        naks: Vec::new(),
    };
    let n = usize::from(r.u16().unwrap_or(0));
    let reserved = r.u16().unwrap_or(0);
    if reserved != 0 {
        return Err(WireError::ReservedFlags {
            kind: Kind::Report,
            flags: reserved,
        });
    }
    if n > MAX_NAK_RANGES {
        return Err(WireError::TooManyNakRanges(n));
    }
    let expected = REPORT_FIXED_LEN + NAK_RANGE_LEN * n;
    if len != expected {
        return Err(WireError::BadLength {
            kind: Kind::Report,
            len,
            expected,
        });
    }
    if !(rep.cum_ack <= rep.recv_high && rep.recv_high <= rep.window_end) {
        return Err(WireError::InconsistentAck {
            cum_ack: rep.cum_ack,
            recv_high: rep.recv_high,
            window_end: rep.window_end,
        });
    }
    let mut floor = rep.cum_ack;
    rep.naks.reserve_exact(n);
    for _ in 0..n {
        let start = r.u64().unwrap_or(0);
        let count = r.u32().unwrap_or(0);
        let range = SeqRange { first: start, count };
        let end = start.checked_add(u64::from(count));
        match end {
            Some(end) if count > 0 && start >= floor && end <= rep.recv_high => floor = end,
            _ => return Err(WireError::InvalidNakRange { start, len: count }),
        }
        rep.naks.push(range);
    }
    Ok(Datagram::Report(rep))
}

fn write_common(out: &mut Vec<u8>, kind: Kind, flags: u16, session_id: u64) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&session_id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
}

/// Bounds-checked big-endian reader: every read returns `None` past the end.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let bytes: [u8; N] = self.buf.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(bytes)
    }

    fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_be_bytes)
    }

    fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            session_id: 7,
            report_seq: 3,
            cum_ack: 10,
            recv_high: 50,
            window_end: 1000,
            seq_high: 60,
            rx_datagrams: 55,
            echo_ts_us: 123_456,
            echo_delay_us: 17,
            interval_us: 10_000,
            interval_datagrams: 40,
            interval_bytes: 40 * 8192,
            owd_min_us: -5,
            owd_interval_min_us: 3,
            owd_latest_us: 9,
            train_bps: 987_654_321,
            naks: vec![SeqRange { first: 10, count: 2 }, SeqRange { first: 20, count: 5 }],
        }
    }

    #[test]
    fn report_round_trips() {
        let rep = report();
        let mut buf = Vec::new();
        rep.write(&mut buf);
        assert_eq!(buf.len(), rep.encoded_len());
        assert_eq!(buf.len(), REPORT_FIXED_LEN + 24);
        assert_eq!(parse(&buf), Ok(Datagram::Report(rep)));
    }

    /// The DATA header and FIN byte for byte (crate docs, "Wire format").
    #[test]
    fn data_header_and_fin_bytes_are_pinned() {
        let mut d = Vec::new();
        DataHeader {
            session_id: 0x0102_0304_0506_0708,
            seq: 9,
            offset: 3 * 8192,
            timestamp_us: 0x1122_3344,
            retransmit: true,
        }
        .write(&mut d);
        #[rustfmt::skip]
        let want: [u8; DATA_HEADER_LEN] = [
            b'e', b'V', b'T', b'R', 2, 1,             // magic, version 2, DATA
            1, 2, 3, 4, 5, 6, 7, 8,                   // session id
            0, 1,                                     // flags: retransmission
            0, 0, 0, 0, 0, 0, 0, 9,                   // sequence number
            0, 0, 0, 0, 0, 0, 0x60, 0,                // wire offset 24576
            0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44,       // timestamp µs
        ];
        assert_eq!(d, want);
        let mut f = Vec::new();
        Fin {
            session_id: 1,
            file_size: 0x0100,
        }
        .write(Kind::FinAck, &mut f);
        assert_eq!(
            f,
            [b'e', b'V', b'T', b'R', 2, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]
        );
    }

    /// A REPORT's fixed part and one NAK range, byte for byte (crate docs, "Wire format").
    #[test]
    fn report_bytes_are_pinned() {
        let r = Report {
            session_id: 1,
            report_seq: 2,
            cum_ack: 3,
            recv_high: 9,
            window_end: 10,
            seq_high: 11,
            rx_datagrams: 12,
            echo_ts_us: 13,
            echo_delay_us: 14,
            interval_us: 15,
            interval_datagrams: 16,
            interval_bytes: 17,
            owd_min_us: -1,
            owd_interval_min_us: 19,
            owd_latest_us: 20,
            train_bps: 0x0102_0304,
            naks: vec![SeqRange { first: 4, count: 2 }],
        };
        let mut b = Vec::new();
        r.write(&mut b);
        let be = |v: u64| v.to_be_bytes().to_vec();
        let mut want: Vec<u8> = vec![b'e', b'V', b'T', b'R', 2, 2];
        want.extend(be(1));
        want.extend([0, 0]);
        for v in [2u64, 3, 9, 10, 11, 12, 13] {
            want.extend(be(v));
        }
        want.extend(14u32.to_be_bytes());
        want.extend(15u32.to_be_bytes());
        want.extend(16u32.to_be_bytes());
        want.extend(be(17));
        want.extend([0xff; 8]); // -1
        want.extend(be(19));
        want.extend(be(20));
        assert_eq!(want.len(), 116);
        want.extend([0, 0, 0, 0, 1, 2, 3, 4]); // train_bps at 116
        want.extend([0, 1, 0, 0]); // one range, reserved
        want.extend(be(4));
        want.extend(2u32.to_be_bytes());
        assert_eq!(b, want);
        assert_eq!(b.len(), REPORT_FIXED_LEN + NAK_RANGE_LEN);
    }

    #[test]
    fn data_round_trips() {
        let h = DataHeader {
            session_id: 1,
            seq: 2,
            offset: 8192,
            timestamp_us: 4,
            retransmit: true,
        };
        let mut buf = Vec::new();
        h.write(&mut buf);
        assert_eq!(buf.len(), DATA_HEADER_LEN);
        buf.extend_from_slice(b"hello");
        let Ok(Datagram::Data(d)) = parse(&buf) else {
            panic!("not data")
        };
        assert_eq!(d.header, h);
        assert_eq!(d.payload, b"hello");
    }

    #[test]
    fn fin_round_trips() {
        let f = Fin {
            session_id: 9,
            file_size: 77,
        };
        for kind in [Kind::Fin, Kind::FinAck] {
            let mut buf = Vec::new();
            f.write(kind, &mut buf);
            let d = parse(&buf).unwrap();
            assert_eq!(d.kind(), kind);
        }
    }

    #[test]
    fn rejects_each_malformation() {
        let mut good = Vec::new();
        report().write(&mut good);

        assert!(matches!(parse(&good[..3]), Err(WireError::TooShort { .. })));
        assert!(matches!(parse(&good[..10]), Err(WireError::TooShort { .. })));
        assert!(matches!(parse(&good[..100]), Err(WireError::TooShort { .. })));
        let mut b = good.clone();
        b[0] = b'X';
        assert!(matches!(parse(&b), Err(WireError::BadMagic(_))));
        let mut b = good.clone();
        b[4] = 1; // version 1 tagged DATA over the whole datagram: refused, not misread
        assert_eq!(parse(&b), Err(WireError::UnsupportedVersion(1)));
        let mut b = good.clone();
        b[5] = 9;
        assert_eq!(parse(&b), Err(WireError::UnknownKind(9)));
        let mut b = good.clone();
        b[15] = 1;
        assert!(matches!(parse(&b), Err(WireError::ReservedFlags { .. })));
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(parse(&b), Err(WireError::BadLength { .. })));

        let mut r = report();
        r.naks = vec![SeqRange { first: 20, count: 5 }, SeqRange { first: 10, count: 2 }];
        let mut b = Vec::new();
        r.write(&mut b);
        assert!(matches!(parse(&b), Err(WireError::InvalidNakRange { .. })));

        let mut r = report();
        r.naks = vec![SeqRange { first: 45, count: 10 }];
        let mut b = Vec::new();
        r.write(&mut b);
        assert!(matches!(parse(&b), Err(WireError::InvalidNakRange { .. })));

        let mut r = report();
        r.naks = vec![SeqRange { first: 12, count: 0 }];
        let mut b = Vec::new();
        r.write(&mut b);
        assert!(matches!(parse(&b), Err(WireError::InvalidNakRange { .. })));

        let mut r = report();
        r.cum_ack = 60;
        r.naks.clear();
        let mut b = Vec::new();
        r.write(&mut b);
        assert!(matches!(parse(&b), Err(WireError::InconsistentAck { .. })));

        // Too many ranges: patch the count field.
        let mut b = good.clone();
        b[124..126].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(parse(&b), Err(WireError::TooManyNakRanges(200)));

        let mut d = Vec::new();
        DataHeader {
            session_id: 1,
            seq: 0,
            offset: 0,
            timestamp_us: 0,
            retransmit: false,
        }
        .write(&mut d);
        assert_eq!(parse(&d), Err(WireError::EmptyPayload));
        d.resize(DATA_HEADER_LEN + MAX_PAYLOAD + 1, 0);
        assert!(matches!(parse(&d), Err(WireError::PayloadTooLarge(_))));
        d[15] = 2;
        assert!(matches!(parse(&d), Err(WireError::ReservedFlags { .. })));

        let mut f = Vec::new();
        Fin {
            session_id: 1,
            file_size: 1,
        }
        .write(Kind::Fin, &mut f);
        f.pop();
        assert!(matches!(parse(&f), Err(WireError::BadLength { .. })));
    }
}

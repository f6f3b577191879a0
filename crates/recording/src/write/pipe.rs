//! The records on the pipe from a receiver to its writer process, smoltcp-style: a
//! [`RecordPacket`] gives typed access to the fields of a record in a byte buffer, checked to
//! hold the whole record its tag and length fields announce; [`WriteOp`] is its parsed and
//! validated meaning (the `Repr`), which [`WriteOp::emit`] writes back.
//!
//! Both ends are this crate, but the child still bounds and checks every field: the pipe is a
//! trust boundary like any other input, and a bad record stops the writer with an error rather
//! than writing garbage into a recording. Layout (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0 | tag: 1 open, 7 open named, 3 close, 4 slot, 5 block, 6 end block (2, frames inline, is gone with the ring) |
//! | 1–4 | file key u32: VDIF station id, thread + 1 above it (0: all threads) |
//! | open: 5–6, 7… | stamp length u16, stamp (ASCII letters and digits, ≤ [`MAX_STAMP`]): `<station>_<stamp>.vdif` |
//! | open named (tag 7): 5, 6–7, 8… | mode u8 (1 new, 2 truncate, 3 append), name length u16, name (one path component of printable ASCII, ≤ 255) |
//! | slot: 5, 13, 21, 25, 29, 33 | frames u64, filled u64, frame length u32, byte count u32, slot u32, offset u32 (byte count = frames × frame length; the bytes are in that slot of the shared ring from the offset) |
//! | block: 5, 6, 10, 18, 22, 24… | layout u8 (1 vbs, 2 Mark6), block number u32, planned bytes u64, frame length u32, name length u16, scan name |
//! | close, end block | nothing more |
//!
//! A record is at most 263 bytes, far below `PIPE_BUF` (4096):
//! one `write` of it is atomic on a pipe, so a killed receiver leaves a whole record or none,
//! and the writer drops a record cut short at the end of its input.

use std::io::{self, Read};

use thiserror::Error;

use super::{FileMode, OpenFile, WriteOp};

const TAG_OPEN: u8 = 1;
const TAG_CLOSE: u8 = 3;
const TAG_SLOT: u8 = 4;
const TAG_BLOCK: u8 = 5;
const TAG_END_BLOCK: u8 = 6;
const TAG_OPEN_NAMED: u8 = 7;
/// Longest file name (NAME_MAX).
const MAX_FILE_NAME: usize = 255;
/// Tag and file key.
const PREFIX: usize = 5;
const SLOT_LEN: usize = PREFIX + 32;
const BLOCK_FIXED: usize = PREFIX + 19;
/// Largest block: a vbs chunk of 64 GiB (jive5ab's are 128–256 MiB).
pub(super) const MAX_BLOCK: u64 = 64 << 30;
/// Longest file stamp.
pub(super) const MAX_STAMP: usize = 64;
/// Largest data record: the largest flush size (2 MiB) plus one frame of at most 64 KiB, with room.
pub(super) const MAX_RECORD: u32 = 4 << 20;
/// Longest record on the pipe.
const MAX_RECORD_HEAD: usize = PREFIX + 3 + MAX_FILE_NAME;

/// Why a record is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The buffer ends before the record does.
    #[error("writer record: {have} of {need} bytes")]
    Truncated {
        /// Bytes there.
        have: usize,
        /// Bytes the record needs (at least).
        need: usize,
    },
    /// An unknown tag.
    #[error("writer record: unknown tag {0}")]
    Tag(u8),
    /// A field out of its bounds.
    #[error("writer record: {0}")]
    Field(String),
}

/// A record in a byte buffer.
#[derive(Debug, Clone, Copy)]
pub struct RecordPacket<T: AsRef<[u8]>> {
    buf: T,
}

/// The length of the record starting `buf` when `buf` says enough to know it.
fn record_len(buf: &[u8]) -> Result<usize, RecordError> {
    let short = |need| RecordError::Truncated { have: buf.len(), need };
    let tag = *buf.first().ok_or(short(PREFIX))?;
    let u16_at = |at: usize| {
        buf.get(at..at + 2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
            .ok_or(short(at + 2))
    };
    match tag {
        TAG_OPEN => Ok(PREFIX + 2 + u16_at(PREFIX)?),
        TAG_OPEN_NAMED => Ok(PREFIX + 3 + u16_at(PREFIX + 1)?),
        TAG_CLOSE | TAG_END_BLOCK => Ok(PREFIX),
        TAG_SLOT => Ok(SLOT_LEN),
        TAG_BLOCK => Ok(BLOCK_FIXED + u16_at(BLOCK_FIXED - 2)?),
        t => Err(RecordError::Tag(t)),
    }
}

impl<T: AsRef<[u8]>> RecordPacket<T> {
    /// The record at the start of `buf`, once `buf` holds all of it (it may hold more).
    pub fn new_checked(buf: T) -> Result<RecordPacket<T>, RecordError> {
        let need = record_len(buf.as_ref())?;
        let have = buf.as_ref().len();
        if have < need || have < PREFIX {
            return Err(RecordError::Truncated {
                have,
                need: need.max(PREFIX),
            });
        }
        Ok(RecordPacket { buf })
    }

    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(&self.buf.as_ref()[at..at + N]);
        b
    }

    /// The record's tag.
    pub fn tag(&self) -> u8 {
        self.buf.as_ref()[0]
    }

    /// The file key.
    pub fn key(&self) -> u32 {
        u32::from_le_bytes(self.bytes(1))
    }

    /// The record's length in the buffer.
    pub fn record_len(&self) -> usize {
        // new_checked made sure of it.
        record_len(self.buf.as_ref()).unwrap_or(PREFIX)
    }

    fn u8_at(&self, at: usize) -> u8 {
        self.buf.as_ref()[at]
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes(at))
    }

    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes(at))
    }

    /// The variable part (stamp or scan name) of an open or block record.
    fn tail(&self) -> &[u8] {
        let start = match self.tag() {
            TAG_OPEN => PREFIX + 2,
            TAG_OPEN_NAMED => PREFIX + 3,
            TAG_BLOCK => BLOCK_FIXED,
            _ => return &[],
        };
        &self.buf.as_ref()[start..self.record_len()]
    }
}

fn field(msg: String) -> RecordError {
    RecordError::Field(msg)
}

impl WriteOp {
    /// Parse and check a record.
    pub(super) fn parse<T: AsRef<[u8]>>(p: &RecordPacket<T>) -> Result<WriteOp, RecordError> {
        let station = p.key();
        // Thread ids have 10 bits (VDIF 1.1.1 §3): a key beyond them is no file of ours.
        if station >> 16 > 1024 {
            return Err(field(format!("file key {station:#x}")));
        }
        match p.tag() {
            TAG_OPEN => {
                let stamp = p.tail();
                if stamp.len() > MAX_STAMP || !stamp.iter().all(u8::is_ascii_alphanumeric) {
                    return Err(field(format!(
                        "file stamp {:?}",
                        String::from_utf8_lossy(&stamp[..stamp.len().min(MAX_STAMP)])
                    )));
                }
                let stamp = String::from_utf8_lossy(stamp).into_owned();
                Ok(WriteOp::Open {
                    station,
                    file: OpenFile::Stamped(stamp),
                })
            }
            TAG_OPEN_NAMED => {
                let mode = match p.u8_at(PREFIX) {
                    1 => FileMode::New,
                    2 => FileMode::Truncate,
                    3 => FileMode::Append,
                    m => return Err(field(format!("file mode {m}"))),
                };
                let name = p.tail();
                // One path component: the pipe never names a file outside the writer's directory.
                let ok = !name.is_empty()
                    && name.len() <= MAX_FILE_NAME
                    && name != b"."
                    && name != b".."
                    && name.iter().all(|b| b.is_ascii_graphic() && *b != b'/');
                if !ok {
                    return Err(field(format!("file name {:?}", String::from_utf8_lossy(name))));
                }
                Ok(WriteOp::Open {
                    station,
                    file: OpenFile::Named {
                        name: String::from_utf8_lossy(name).into_owned(),
                        mode,
                    },
                })
            }
            TAG_SLOT => {
                let (frames, filled) = (p.u64_at(5), p.u64_at(13));
                let (frame_len, len, slot, at) = (p.u32_at(21), p.u32_at(25), p.u32_at(29), p.u32_at(33));
                if len > MAX_RECORD
                    || frame_len == 0
                    || filled > frames
                    || u64::from(frame_len).checked_mul(frames) != Some(u64::from(len))
                {
                    return Err(field(format!("{len} bytes for {frames} frames of {frame_len} bytes")));
                }
                Ok(WriteOp::Slot {
                    station,
                    slot,
                    at,
                    len,
                    frames,
                    filled,
                    frame_len: u64::from(frame_len),
                })
            }
            TAG_CLOSE => Ok(WriteOp::Close { station }),
            TAG_BLOCK => {
                let layout = match p.u8_at(5) {
                    1 => scanfmt::Layout::Vbs,
                    2 => scanfmt::Layout::Mk6,
                    l => return Err(field(format!("layout {l}"))),
                };
                let (number, planned, frame_len) = (p.u32_at(6), p.u64_at(10), p.u32_at(18));
                let name = p.tail();
                if name.len() > scanfmt::name::MAX_NAME || planned == 0 || planned > MAX_BLOCK || frame_len == 0 {
                    return Err(field(format!(
                        "block of {planned} bytes, frames of {frame_len}, name of {}",
                        name.len()
                    )));
                }
                let scan = std::str::from_utf8(name)
                    .ok()
                    .filter(|n| scanfmt::name::is_valid(n))
                    .ok_or_else(|| field("not a scan name".into()))?;
                Ok(WriteOp::Block {
                    station,
                    scan: scan.to_string(),
                    layout,
                    number,
                    planned,
                    frame_len: u64::from(frame_len),
                })
            }
            TAG_END_BLOCK => Ok(WriteOp::EndBlock { station }),
            t => Err(RecordError::Tag(t)),
        }
    }

    /// Append the record to `out` (frame bytes never go through the pipe: a `Data` op is an
    /// error here).
    pub(super) fn emit(&self, out: &mut Vec<u8>) -> Result<(), RecordError> {
        let key = |out: &mut Vec<u8>, tag: u8, station: &u32| {
            out.push(tag);
            out.extend_from_slice(&station.to_le_bytes());
        };
        match self {
            WriteOp::Open {
                station,
                file: OpenFile::Stamped(stamp),
            } => {
                let stamp = &stamp.as_bytes()[..stamp.len().min(MAX_STAMP)];
                key(out, TAG_OPEN, station);
                out.extend_from_slice(&(stamp.len() as u16).to_le_bytes());
                out.extend_from_slice(stamp);
            }
            WriteOp::Open {
                station,
                file: OpenFile::Named { name, mode },
            } => {
                let name = &name.as_bytes()[..name.len().min(MAX_FILE_NAME)];
                key(out, TAG_OPEN_NAMED, station);
                out.push(match mode {
                    FileMode::New => 1,
                    FileMode::Truncate => 2,
                    FileMode::Append => 3,
                });
                out.extend_from_slice(&(name.len() as u16).to_le_bytes());
                out.extend_from_slice(name);
            }
            WriteOp::Slot {
                station,
                slot,
                at,
                len,
                frames,
                filled,
                frame_len,
            } => {
                let frame_len = u32::try_from(*frame_len).map_err(|_| field(format!("frame length {frame_len}")))?;
                key(out, TAG_SLOT, station);
                for v in [frames, filled] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                for v in [frame_len, *len, *slot, *at] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            WriteOp::Block {
                station,
                scan,
                layout,
                number,
                planned,
                frame_len,
            } => {
                let frame_len = u32::try_from(*frame_len).map_err(|_| field(format!("frame length {frame_len}")))?;
                let name = &scan.as_bytes()[..scan.len().min(scanfmt::name::MAX_NAME)];
                key(out, TAG_BLOCK, station);
                out.push(match layout {
                    scanfmt::Layout::Vbs => 1,
                    scanfmt::Layout::Mk6 => 2,
                });
                out.extend_from_slice(&number.to_le_bytes());
                out.extend_from_slice(&planned.to_le_bytes());
                out.extend_from_slice(&frame_len.to_le_bytes());
                out.extend_from_slice(&(name.len() as u16).to_le_bytes());
                out.extend_from_slice(name);
            }
            WriteOp::EndBlock { station } => key(out, TAG_END_BLOCK, station),
            WriteOp::Close { station } => key(out, TAG_CLOSE, station),
            WriteOp::Data { .. } => return Err(field("frame data goes through the ring, not the pipe".into())),
        }
        Ok(())
    }
}

/// Write one record to the pipe in one `write` (atomic: see the module docs).
#[cfg(test)]
pub(super) fn encode_op(op: &WriteOp, out: &mut impl io::Write) -> io::Result<()> {
    let mut rec = Vec::with_capacity(64);
    op.emit(&mut rec).map_err(io::Error::other)?;
    out.write_all(&rec)
}

/// The next record from the pipe; `Ok(None)` at end of input — also when the input ends inside
/// a record, which is what a receiver killed mid-write leaves.
pub(super) fn decode_op(input: &mut impl Read) -> io::Result<Option<WriteOp>> {
    let bad = |e: RecordError| io::Error::new(io::ErrorKind::InvalidData, e);
    let mut buf = [0u8; MAX_RECORD_HEAD];
    let mut have = 0;
    loop {
        match RecordPacket::new_checked(&buf[..have]) {
            Ok(p) => return WriteOp::parse(&p).map(Some).map_err(bad),
            Err(RecordError::Truncated { need, .. }) if need <= buf.len() => {
                // Read exactly what the record still lacks (never into the next one).
                match input.read_exact(&mut buf[have..need]) {
                    Ok(()) => have = need,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            Err(RecordError::Truncated { need, .. }) => {
                return Err(bad(field(format!("a record of {need} bytes"))));
            }
            Err(e) => return Err(bad(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_documented_bytes() {
        let mut out = Vec::new();
        WriteOp::Slot {
            station: 0x0001_4566,
            slot: 2,
            at: 16,
            len: 300,
            frames: 3,
            filled: 1,
            frame_len: 100,
        }
        .emit(&mut out)
        .unwrap();
        #[rustfmt::skip]
        let want = [
            4, 0x66, 0x45, 1, 0,
            3, 0, 0, 0, 0, 0, 0, 0,
            1, 0, 0, 0, 0, 0, 0, 0,
            100, 0, 0, 0,
            44, 1, 0, 0,
            2, 0, 0, 0,
            16, 0, 0, 0,
        ];
        assert_eq!(out, want);
        out.clear();
        WriteOp::Block {
            station: 7,
            scan: "ab".into(),
            layout: scanfmt::Layout::Mk6,
            number: 5,
            planned: 1 << 20,
            frame_len: 8032,
        }
        .emit(&mut out)
        .unwrap();
        #[rustfmt::skip]
        let want = [
            5, 7, 0, 0, 0,
            2,
            5, 0, 0, 0,
            0, 0, 0x10, 0, 0, 0, 0, 0,
            0x60, 0x1f, 0, 0,
            2, 0,
            b'a', b'b',
        ];
        assert_eq!(out, want);
        let p = RecordPacket::new_checked(&out[..]).unwrap();
        assert_eq!((p.tag(), p.key(), p.record_len()), (5, 7, 26));
        assert!(matches!(
            RecordPacket::new_checked(&out[..25]),
            Err(RecordError::Truncated { have: 25, need: 26 })
        ));
        assert_eq!(RecordPacket::new_checked(&[9u8][..]).unwrap_err(), RecordError::Tag(9));
        out.clear();
        let named = WriteOp::Open {
            station: 0,
            file: OpenFile::Named {
                name: "scan.vdif".into(),
                mode: FileMode::Append,
            },
        };
        named.emit(&mut out).unwrap();
        assert_eq!(&out[..8], &[7, 0, 0, 0, 0, 3, 9, 0]);
        assert_eq!(decode_op(&mut &out[..]).unwrap(), Some(named));
        for bad in [&b".."[..], b"a/b", b"", b"a b"] {
            let mut rec = vec![7, 0, 0, 0, 0, 1, bad.len() as u8, 0];
            rec.extend_from_slice(bad);
            assert!(decode_op(&mut &rec[..]).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let mut input = &bytes[..];
            for _ in 0..300 {
                match decode_op(&mut input) {
                    Ok(Some(op)) => {
                        // What parses emits back to the same bytes.
                        let mut again = Vec::new();
                        op.emit(&mut again).unwrap();
                        let back = decode_op(&mut &again[..]).unwrap();
                        proptest::prop_assert_eq!(back, Some(op));
                    }
                    _ => break,
                }
            }
        }
    }
}

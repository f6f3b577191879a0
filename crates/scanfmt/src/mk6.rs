//! Mark6 scatter-gather files: one per disk per scan, `<disk>/<scan>`, each a file header and
//! then blocks, each block a header and data; block numbers count across the whole file set, so
//! each file has gaps and the reader interleaves the files by number.
//!
//! # Layout
//!
//! From Haystack's d-plane 1.12 (`file_header_tag`, `wb_header_tag`), as jive5ab (`mk6info.h`,
//! `mk6_file_header`, `mk6_wb_header_v2`) and DiFX `mark6sg` (`mark6_sg_format.h`) copy it. All
//! fields are 32-bit little-endian (the machines' byte order; the structs are written raw).
//!
//! File header, 20 bytes, at offset 0:
//!
//! | offset | size | field           | meaning                                                  |
//! |-------:|-----:|-----------------|----------------------------------------------------------|
//! | 0      | 4    | `sync_word` u32 | [`SYNC_WORD`] `0xfeed6666`                               |
//! | 4      | 4    | `version` i32   | 2 (1 in old files; see the block header)                 |
//! | 8      | 4    | `block_size` i32| length of a block including its header, bytes            |
//! | 12     | 4    | `packet_format` i32 | 0 VDIF, 1 Mark5B, 2 unknown                          |
//! | 16     | 4    | `packet_size` i32 | length of a packet (frame), bytes                      |
//!
//! Block header, version 2, 8 bytes, before each block's data:
//!
//! | offset | size | field          | meaning                                                   |
//! |-------:|-----:|----------------|-----------------------------------------------------------|
//! | 0      | 4    | `blocknum` i32 | block number, from 0, counting across all files of the scan |
//! | 4      | 4    | `wb_size` i32  | length of this block including the header: `block_size`, or shorter (the last) |
//!
//! Version 1 block headers hold `blocknum` only (4 bytes); every block is then `block_size`
//! long (mark6sg reads them so; jive5ab reads version 2 only).
//!
//! A file that ends inside a block (a recorder that died) is read as mark6sg does: the block's
//! data is cut to the whole packets present, and nothing after it is read.

use thiserror::Error;

/// `sync_word` of every Mark6 scatter-gather file (`MARK6_SG_SYNC_WORD`).
pub const SYNC_WORD: u32 = 0xfeed_6666;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 20;
/// Length of a version-2 block header.
pub const BLOCK_HEADER_V2_LEN: usize = 8;
/// Length of a version-1 block header.
pub const BLOCK_HEADER_V1_LEN: usize = 4;
/// `packet_format` of VDIF data.
pub const PACKET_FORMAT_VDIF: i32 = 0;
/// `packet_format` of Mark5B data.
pub const PACKET_FORMAT_MK5B: i32 = 1;

mod field {
    use core::ops::Range;
    pub const SYNC: Range<usize> = 0..4;
    pub const VERSION: Range<usize> = 4..8;
    pub const BLOCK_SIZE: Range<usize> = 8..12;
    pub const PACKET_FORMAT: Range<usize> = 12..16;
    pub const PACKET_SIZE: Range<usize> = 16..20;
    pub const BLOCKNUM: Range<usize> = 0..4;
    pub const WB_SIZE: Range<usize> = 4..8;
}

/// Why bytes are not a Mark6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Mk6Error {
    /// Fewer bytes than the header.
    #[error("{have} bytes, shorter than the {need}-byte Mark6 header")]
    TooShort {
        /// Bytes given.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The first word is not [`SYNC_WORD`]: not a Mark6 scatter-gather file.
    #[error("sync word {0:#010x} is not 0xfeed6666: not a Mark6 scatter-gather file")]
    BadSync(u32),
    /// A version other than 1 or 2.
    #[error("Mark6 file version {0} (1 and 2 are read)")]
    BadVersion(i32),
    /// A block size no larger than its header, or negative.
    #[error("Mark6 block size {0} bytes")]
    BadBlockSize(i32),
    /// A packet size of zero or less.
    #[error("Mark6 packet size {0} bytes")]
    BadPacketSize(i32),
    /// A negative block number.
    #[error("Mark6 block number {0}")]
    BadBlockNumber(i32),
    /// A block length (`wb_size`) no larger than its header.
    #[error("Mark6 block length {0} bytes")]
    BadBlockLen(i32),
    /// A header to emit does not fit a 32-bit signed field.
    #[error("{0} does not fit a Mark6 header field")]
    TooLarge(u64),
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    u32::from_le_bytes(a)
}

fn le_i32(b: &[u8]) -> i32 {
    le_u32(b) as i32
}

/// Zero-copy view of a file header; accessors assume [`FILE_HEADER_LEN`] bytes (use
/// [`FilePacket::new_checked`] on file data).
#[derive(Debug, Clone, Copy)]
pub struct FilePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FilePacket<T> {
    /// Wrap without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        FilePacket { buffer }
    }

    /// Wrap after checking the length (the field values are checked by [`FileHeader::parse`]).
    pub fn new_checked(buffer: T) -> Result<Self, Mk6Error> {
        let have = buffer.as_ref().len();
        if have < FILE_HEADER_LEN {
            return Err(Mk6Error::TooShort {
                have,
                need: FILE_HEADER_LEN,
            });
        }
        Ok(FilePacket { buffer })
    }

    /// `sync_word`.
    pub fn sync_word(&self) -> u32 {
        le_u32(&self.buffer.as_ref()[field::SYNC])
    }
    /// `version`.
    pub fn version(&self) -> i32 {
        le_i32(&self.buffer.as_ref()[field::VERSION])
    }
    /// `block_size` (including the block header).
    pub fn block_size(&self) -> i32 {
        le_i32(&self.buffer.as_ref()[field::BLOCK_SIZE])
    }
    /// `packet_format`.
    pub fn packet_format(&self) -> i32 {
        le_i32(&self.buffer.as_ref()[field::PACKET_FORMAT])
    }
    /// `packet_size`.
    pub fn packet_size(&self) -> i32 {
        le_i32(&self.buffer.as_ref()[field::PACKET_SIZE])
    }
}

/// Block header versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Block number only; every block `block_size` long.
    V1,
    /// Block number and the block's own length.
    V2,
}

impl Version {
    /// Length of a block header of this version.
    pub fn block_header_len(self) -> usize {
        match self {
            Version::V1 => BLOCK_HEADER_V1_LEN,
            Version::V2 => BLOCK_HEADER_V2_LEN,
        }
    }
}

/// A parsed, validated file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Block header version.
    pub version: Version,
    /// Length of a (full) block including its header.
    pub block_size: u32,
    /// `packet_format` (0 VDIF; other values are carried, not interpreted).
    pub packet_format: i32,
    /// Packet (frame) length.
    pub packet_size: u32,
}

impl FileHeader {
    /// Parse and check the first bytes of a file.
    pub fn parse(bytes: &[u8]) -> Result<FileHeader, Mk6Error> {
        let p = FilePacket::new_checked(bytes)?;
        if p.sync_word() != SYNC_WORD {
            return Err(Mk6Error::BadSync(p.sync_word()));
        }
        let version = match p.version() {
            1 => Version::V1,
            2 => Version::V2,
            v => return Err(Mk6Error::BadVersion(v)),
        };
        let bs = p.block_size();
        if bs <= version.block_header_len() as i32 {
            return Err(Mk6Error::BadBlockSize(bs));
        }
        let ps = p.packet_size();
        if ps <= 0 {
            return Err(Mk6Error::BadPacketSize(ps));
        }
        Ok(FileHeader {
            version,
            block_size: bs as u32,
            packet_format: p.packet_format(),
            packet_size: ps as u32,
        })
    }

    /// A version-2 header for VDIF frames of `packet_size` bytes in blocks of `block_data`
    /// bytes of data (the header's `block_size` adds the block header, as jive5ab writes it).
    pub fn vdif(block_data: u64, packet_size: u64) -> Result<FileHeader, Mk6Error> {
        let block_size = block_data + BLOCK_HEADER_V2_LEN as u64;
        Ok(FileHeader {
            version: Version::V2,
            block_size: fits(block_size)?,
            packet_format: PACKET_FORMAT_VDIF,
            packet_size: fits(packet_size)?,
        })
    }

    /// The 20 bytes of this header.
    pub fn emit(&self) -> [u8; FILE_HEADER_LEN] {
        let mut b = [0u8; FILE_HEADER_LEN];
        let version: i32 = match self.version {
            Version::V1 => 1,
            Version::V2 => 2,
        };
        b[field::SYNC].copy_from_slice(&SYNC_WORD.to_le_bytes());
        b[field::VERSION].copy_from_slice(&version.to_le_bytes());
        b[field::BLOCK_SIZE].copy_from_slice(&self.block_size.to_le_bytes());
        b[field::PACKET_FORMAT].copy_from_slice(&self.packet_format.to_le_bytes());
        b[field::PACKET_SIZE].copy_from_slice(&self.packet_size.to_le_bytes());
        b
    }
}

/// `v` if it fits a positive i32 field.
fn fits(v: u64) -> Result<u32, Mk6Error> {
    u32::try_from(v)
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or(Mk6Error::TooLarge(v))
}

/// Zero-copy view of a block header (either version).
#[derive(Debug, Clone, Copy)]
pub struct BlockPacket<T: AsRef<[u8]>> {
    buffer: T,
    version: Version,
}

impl<T: AsRef<[u8]>> BlockPacket<T> {
    /// Wrap after checking the length for `version`.
    pub fn new_checked(buffer: T, version: Version) -> Result<Self, Mk6Error> {
        let have = buffer.as_ref().len();
        let need = version.block_header_len();
        if have < need {
            return Err(Mk6Error::TooShort { have, need });
        }
        Ok(BlockPacket { buffer, version })
    }
    /// `blocknum`.
    pub fn blocknum(&self) -> i32 {
        le_i32(&self.buffer.as_ref()[field::BLOCKNUM])
    }
    /// `wb_size` (version 2 only).
    pub fn wb_size(&self) -> Option<i32> {
        (self.version == Version::V2).then(|| le_i32(&self.buffer.as_ref()[field::WB_SIZE]))
    }
}

/// A parsed block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Block number across the scan's files.
    pub number: u32,
    /// Bytes of data after the header (`wb_size` less the header; version 1: `block_size`
    /// less the header).
    pub data_len: u32,
}

impl BlockHeader {
    /// Parse a block header of a file with header `file`.
    pub fn parse(bytes: &[u8], file: &FileHeader) -> Result<BlockHeader, Mk6Error> {
        let p = BlockPacket::new_checked(bytes, file.version)?;
        let hl = file.version.block_header_len() as i32;
        let n = p.blocknum();
        if n < 0 {
            return Err(Mk6Error::BadBlockNumber(n));
        }
        let total = p.wb_size().unwrap_or(file.block_size as i32);
        if total <= hl {
            return Err(Mk6Error::BadBlockLen(total));
        }
        Ok(BlockHeader {
            number: n as u32,
            data_len: (total - hl) as u32,
        })
    }

    /// The 8 bytes of a version-2 header for block `number` holding `data_len` bytes of data.
    pub fn emit_v2(number: u64, data_len: u64) -> Result<[u8; BLOCK_HEADER_V2_LEN], Mk6Error> {
        let mut b = [0u8; BLOCK_HEADER_V2_LEN];
        b[field::BLOCKNUM].copy_from_slice(&fits(number)?.to_le_bytes());
        let wb = fits(data_len + BLOCK_HEADER_V2_LEN as u64)?;
        b[field::WB_SIZE].copy_from_slice(&wb.to_le_bytes());
        Ok(b)
    }
}

/// One block found in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// Block number.
    pub number: u32,
    /// Offset of its data in the file.
    pub data_offset: u64,
    /// Bytes of data (cut to whole packets when the file ends inside the block).
    pub data_len: u64,
    /// The file ended inside this block.
    pub truncated: bool,
}

/// Walks one file's blocks without reading it: says where the next block header is, takes its
/// bytes, and returns the block (sans-IO; the shell does the reads).
#[derive(Debug, Clone)]
pub struct FileWalker {
    header: FileHeader,
    file_len: u64,
    pos: u64,
}

impl FileWalker {
    /// Start from the file's first [`FILE_HEADER_LEN`] bytes and its length.
    pub fn new(first: &[u8], file_len: u64) -> Result<FileWalker, Mk6Error> {
        Ok(FileWalker {
            header: FileHeader::parse(first)?,
            file_len,
            pos: FILE_HEADER_LEN as u64,
        })
    }

    /// The file header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// Where the next block header is and how long it is; `None` at the end of the file (a few
    /// bytes too few for a header are left unread, as mark6sg leaves them).
    pub fn next_header(&self) -> Option<(u64, usize)> {
        let len = self.header.version.block_header_len();
        (self.pos.checked_add(len as u64)? <= self.file_len).then_some((self.pos, len))
    }

    /// The block whose header is `bytes` (read at [`FileWalker::next_header`]). After an error
    /// or a block cut short by the end of the file the walk is over.
    pub fn block(&mut self, bytes: &[u8]) -> Result<BlockEntry, Mk6Error> {
        let h = match BlockHeader::parse(bytes, &self.header) {
            Ok(h) => h,
            Err(e) => {
                self.pos = self.file_len;
                return Err(e);
            }
        };
        let data_offset = self.pos + self.header.version.block_header_len() as u64;
        let left = self.file_len.saturating_sub(data_offset);
        let mut entry = BlockEntry {
            number: h.number,
            data_offset,
            data_len: u64::from(h.data_len),
            truncated: false,
        };
        if entry.data_len > left {
            let p = u64::from(self.header.packet_size);
            entry.data_len = left / p * p;
            entry.truncated = true;
            self.pos = self.file_len;
        } else {
            self.pos = data_offset + entry.data_len;
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A file header as jive5ab writes it for 8 MiB blocks of 8032-byte VDIF frames (1044
    /// frames + the 8-byte block header), spelled out byte by byte.
    const FILE_V2: [u8; 20] = [
        0x66, 0x66, 0xed, 0xfe, // sync word 0xfeed6666, little-endian
        0x02, 0x00, 0x00, 0x00, // version 2
        0x88, 0xf3, 0x7f, 0x00, // block size 8_385_416 = 1044 × 8032 + 8
        0x00, 0x00, 0x00, 0x00, // packet format 0 = VDIF
        0x60, 0x1f, 0x00, 0x00, // packet size 8032
    ];
    /// Block 5 holding 3 frames of 8032 bytes.
    const BLOCK_V2: [u8; 8] = [0x05, 0x00, 0x00, 0x00, 0x28, 0x5e, 0x00, 0x00];

    #[test]
    fn the_file_header_is_pinned_byte_for_byte() {
        let h = FileHeader::vdif(1044 * 8032, 8032).unwrap();
        assert_eq!(h.emit(), FILE_V2);
        let p = FilePacket::new_checked(&FILE_V2[..]).unwrap();
        assert_eq!(p.sync_word(), 0xfeed6666);
        assert_eq!(
            (p.version(), p.block_size(), p.packet_format(), p.packet_size()),
            (2, 8_385_416, 0, 8032)
        );
        assert_eq!(FileHeader::parse(&FILE_V2).unwrap(), h);
        assert_eq!(h.block_size, 8_385_416);
    }

    #[test]
    fn the_block_header_is_pinned_byte_for_byte() {
        assert_eq!(BlockHeader::emit_v2(5, 3 * 8032).unwrap(), BLOCK_V2);
        let file = FileHeader::parse(&FILE_V2).unwrap();
        assert_eq!(
            BlockHeader::parse(&BLOCK_V2, &file).unwrap(),
            BlockHeader {
                number: 5,
                data_len: 3 * 8032
            }
        );
        let p = BlockPacket::new_checked(&BLOCK_V2[..], Version::V2).unwrap();
        assert_eq!((p.blocknum(), p.wb_size()), (5, Some(24_104)));
    }

    #[test]
    fn version_1_blocks_have_a_number_only_and_the_file_block_size() {
        let mut f = FILE_V2;
        f[4] = 1;
        let file = FileHeader::parse(&f).unwrap();
        assert_eq!(file.version, Version::V1);
        let b = BlockHeader::parse(&[7, 0, 0, 0], &file).unwrap();
        assert_eq!(
            b,
            BlockHeader {
                number: 7,
                data_len: 8_385_416 - 4
            }
        );
        assert_eq!(
            BlockPacket::new_checked(&[7u8, 0, 0, 0][..], Version::V1)
                .unwrap()
                .wb_size(),
            None
        );
    }

    #[test]
    fn bad_headers_are_refused_with_the_reason() {
        assert_eq!(
            FileHeader::parse(&FILE_V2[..19]),
            Err(Mk6Error::TooShort { have: 19, need: 20 })
        );
        let mut f = FILE_V2;
        f[0] = 0x67;
        assert_eq!(FileHeader::parse(&f), Err(Mk6Error::BadSync(0xfeed6667)));
        let mut f = FILE_V2;
        f[4] = 3;
        assert_eq!(FileHeader::parse(&f), Err(Mk6Error::BadVersion(3)));
        let mut f = FILE_V2;
        f[8..12].copy_from_slice(&8i32.to_le_bytes());
        assert_eq!(FileHeader::parse(&f), Err(Mk6Error::BadBlockSize(8)));
        let mut f = FILE_V2;
        f[16..20].copy_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(FileHeader::parse(&f), Err(Mk6Error::BadPacketSize(-1)));
        let file = FileHeader::parse(&FILE_V2).unwrap();
        assert_eq!(
            BlockHeader::parse(&[0xff, 0xff, 0xff, 0xff, 16, 0, 0, 0], &file),
            Err(Mk6Error::BadBlockNumber(-1))
        );
        assert_eq!(
            BlockHeader::parse(&[1, 0, 0, 0, 8, 0, 0, 0], &file),
            Err(Mk6Error::BadBlockLen(8))
        );
        assert_eq!(BlockHeader::emit_v2(1 << 31, 0), Err(Mk6Error::TooLarge(1 << 31)));
        assert!(
            FileHeader::vdif(i32::MAX as u64, 8032).is_err(),
            "block size with header overflows"
        );
    }

    /// A file of `blocks` (number, data length) with data bytes `number as u8`, cut to `cut`
    /// bytes.
    fn file(blocks: &[(u32, u64)], cut: Option<usize>) -> Vec<u8> {
        let mut v = FileHeader::vdif(4000, 1000).unwrap().emit().to_vec();
        for &(n, len) in blocks {
            v.extend_from_slice(&BlockHeader::emit_v2(u64::from(n), len).unwrap());
            v.extend(std::iter::repeat_n(n as u8, len as usize));
        }
        v.truncate(cut.unwrap_or(v.len()));
        v
    }

    fn walk(bytes: &[u8]) -> (Vec<BlockEntry>, Option<Mk6Error>) {
        let mut w = FileWalker::new(bytes, bytes.len() as u64).unwrap();
        let mut out = Vec::new();
        while let Some((at, len)) = w.next_header() {
            match w.block(&bytes[at as usize..at as usize + len]) {
                Ok(b) => out.push(b),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    #[test]
    fn a_file_is_walked_block_by_block_and_a_cut_block_keeps_whole_packets() {
        let bytes = file(&[(0, 4000), (3, 4000), (6, 2000)], None);
        let (blocks, err) = walk(&bytes);
        assert_eq!(err, None);
        assert_eq!(
            blocks
                .iter()
                .map(|b| (b.number, b.data_offset, b.data_len))
                .collect::<Vec<_>>(),
            vec![(0, 28, 4000), (3, 4036, 4000), (6, 8044, 2000)]
        );
        let (blocks, _) = walk(&file(&[(0, 4000), (3, 4000)], Some(28 + 4000 + 8 + 2500)));
        assert_eq!(blocks[1].data_len, 2000, "2.5 packets present: 2 kept");
        assert!(blocks[1].truncated);
        let (blocks, _) = walk(&file(&[(0, 4000)], Some(28 + 4000 + 5)));
        assert_eq!(blocks.len(), 1, "5 bytes are no block header");
        let mut bad = file(&[(0, 4000), (1, 4000)], None);
        bad[4028..4032].copy_from_slice(&(-5i32).to_le_bytes());
        let (blocks, err) = walk(&bad);
        assert_eq!((blocks.len(), err), (1, Some(Mk6Error::BadBlockNumber(-5))));
    }

    proptest! {
        #[test]
        fn headers_round_trip(n in 0u64..=i32::MAX as u64, len in 1u64..(i32::MAX as u64 - 8)) {
            let file = FileHeader::vdif(len, 1).unwrap();
            prop_assert_eq!(FileHeader::parse(&file.emit()).unwrap(), file);
            let b = BlockHeader::emit_v2(n, len).unwrap();
            prop_assert_eq!(BlockHeader::parse(&b, &file).unwrap(), BlockHeader { number: n as u32, data_len: len as u32 });
        }

        #[test]
        fn any_file_is_walked_without_panic_and_stays_inside_it(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            v1 in any::<bool>(),
        ) {
            let mut bytes = bytes;
            if bytes.len() >= 20 {
                bytes[..20].copy_from_slice(&FileHeader::vdif(40, 8).unwrap().emit());
                bytes[4] = if v1 { 1 } else { 2 };
            }
            if let Ok(mut w) = FileWalker::new(&bytes, bytes.len() as u64) {
                let mut steps = 0;
                while let Some((at, len)) = w.next_header() {
                    steps += 1;
                    prop_assert!(steps < 300);
                    if let Ok(b) = w.block(&bytes[at as usize..at as usize + len]) {
                        prop_assert!(b.data_offset + b.data_len <= bytes.len() as u64);
                    }
                }
            }
        }
    }
}

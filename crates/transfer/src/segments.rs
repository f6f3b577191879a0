//! Which file and block each chunk of a session's stream belongs to (no IO: a table the
//! session keeps beside the protocol's layout).
//!
//! A session moves every accepted block as one segment of one open transfer stream
//! ([`crate::layout`]); both ends append the same segments in the same order (the order of
//! the receiver's `accept` and `resend` messages). This table mirrors the protocol's layout with
//! what the session needs: the file slot, the block, and its offset in the file. A segment's
//! digest base is its offset in the file, so payload digests are the file tree's chaining values.

/// One block of one file in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Stream chunk of the segment's first byte.
    pub first_chunk: u64,
    /// The file (the session's id for it).
    pub file: u64,
    /// Block index in the file.
    pub block: u64,
    /// Offset of the block in the file.
    pub file_offset: u64,
    /// Bytes.
    pub len: u64,
}

/// The segments of a stream, in order.
#[derive(Debug, Clone)]
pub struct SegmentTable {
    chunk_size: u64,
    segs: Vec<Segment>,
    next_chunk: u64,
}

impl SegmentTable {
    /// An empty table for chunks of `chunk_size` bytes.
    pub fn new(chunk_size: u32) -> SegmentTable {
        SegmentTable {
            chunk_size: u64::from(chunk_size.max(1)),
            segs: Vec::new(),
            next_chunk: 0,
        }
    }

    /// Append block `block` of `file` (`len` bytes at `file_offset`); returns its first chunk.
    /// The caller pushes the same segment (`len`, digest base `file_offset`) to the protocol.
    pub fn push(&mut self, file: u64, block: u64, file_offset: u64, len: u64) -> u64 {
        let first = self.next_chunk;
        if len > 0 {
            self.segs.push(Segment {
                first_chunk: first,
                file,
                block,
                file_offset,
                len,
            });
            self.next_chunk += len.div_ceil(self.chunk_size);
        }
        first
    }

    /// The segment holding wire offset `offset` and the offset of that byte in its file.
    pub fn locate(&self, offset: u64) -> Option<(&Segment, u64)> {
        let chunk = offset / self.chunk_size;
        let i = self.segs.partition_point(|s| s.first_chunk <= chunk).checked_sub(1)?;
        let s = self.segs.get(i)?;
        let within = (chunk - s.first_chunk) * self.chunk_size + offset % self.chunk_size;
        (within < s.len).then_some((s, s.file_offset + within))
    }

    /// Chunks so far.
    pub fn chunks(&self) -> u64 {
        self.next_chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_map_to_files_and_blocks() {
        let mut t = SegmentTable::new(1000);
        assert_eq!(t.push(7, 0, 0, 2500), 0);
        assert_eq!(t.push(7, 3, 3 << 20, 1000), 3);
        assert_eq!(t.push(8, 0, 0, 0), 4, "an empty block takes no chunk");
        assert_eq!(t.push(9, 1, 4096, 10), 4);
        let (s, at) = t.locate(2000).unwrap();
        assert_eq!((s.file, s.block, at), (7, 0, 2000));
        assert!(
            t.locate(2500).is_none(),
            "past the segment's bytes, inside its last chunk"
        );
        let (s, at) = t.locate(3000 + 999).unwrap();
        assert_eq!((s.file, s.block, at), (7, 3, (3 << 20) + 999));
        let (s, at) = t.locate(4005).unwrap();
        assert_eq!((s.file, at), (9, 4101));
        assert!(t.locate(5000).is_none());
        assert_eq!(t.chunks(), 5);
    }

    #[test]
    fn the_table_agrees_with_the_protocol_layout() {
        let mut t = SegmentTable::new(8192);
        let mut l = crate::Layout::new(8192);
        for (i, len) in [100_000u64, 65_536, 0, 1, 8192, 8193].iter().enumerate() {
            let off = (i as u64) << 20;
            assert_eq!(Some(t.push(i as u64, 0, off, *len)), l.push(*len, off));
        }
        for c in 0..l.total_chunks() {
            let p = l.place(c).unwrap();
            let (s, at) = t.locate(c * 8192).unwrap();
            assert_eq!(at, p.digest_offset);
            assert_eq!(((s.len - (at - s.file_offset)).min(8192)) as usize, p.len);
        }
    }
}

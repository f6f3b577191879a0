//! Which bytes the chunks of a transfer carry: a sequence of segments, each starting on a chunk
//! boundary, that may grow while the transfer runs.
//!
//! A single file is one segment. `evlbi send` moves many files, and of each only the blocks the
//! receiver lacks, through one stream: every block it asks for becomes a segment, appended when
//! the receiver accepts it (both ends append in the same order: the order of the control
//! messages). A segment starts on a chunk boundary, so its last chunk may be short, and a chunk
//! never holds bytes of two segments. Chunk `i` travels at wire offset `i · chunk_size` whatever
//! its length.
//!
//! Each segment also says at which offset its bytes lie in the file they came from (its *digest
//! base*): the payload digest of a chunk ([`crate::wire::payload_digest`]) is computed at that
//! offset, so that in a keyed session the digest both ends compute for the datagram's tag is the
//! chaining value the file's BLAKE3 tree needs anyway.
//!
//! Consecutive segments whose predecessor ends on a chunk boundary and continues it in the
//! source file merge into one run, so a long file sent whole is one run however many blocks it
//! has; memory grows only with the number of files (and of non-contiguous blocks).

/// One run of merged segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// Index of the run's first chunk.
    first_chunk: u64,
    /// Bytes of the stream before the run.
    bytes_before: u64,
    /// Bytes in the run.
    bytes: u64,
    /// Offset in the source of the run's first byte (for payload digests).
    digest_base: u64,
}

/// Where a chunk lies: its length and the offsets of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPlace {
    /// Payload bytes (at most the chunk size; less for a segment's last chunk).
    pub len: usize,
    /// Bytes of the stream before this chunk.
    pub stream_offset: u64,
    /// Offset of the chunk's first byte in its source, for the payload digest.
    pub digest_offset: u64,
}

/// The segments of a transfer. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    chunk_size: u64,
    runs: Vec<Run>,
    total_chunks: u64,
    total_bytes: u64,
    closed: bool,
}

impl Layout {
    /// An empty, open layout of chunks of `chunk_size` bytes (at least 1).
    pub fn new(chunk_size: u32) -> Layout {
        Layout {
            chunk_size: u64::from(chunk_size.max(1)),
            runs: Vec::new(),
            total_chunks: 0,
            total_bytes: 0,
            closed: false,
        }
    }

    /// A layout whose first segment is `size` bytes at digest base 0: one file, closed unless
    /// more may follow (`open`).
    pub fn first(size: u64, chunk_size: u32, open: bool) -> Layout {
        let mut l = Layout::new(chunk_size);
        l.push(size, 0);
        if !open {
            l.close();
        }
        l
    }

    /// Append a segment of `len` bytes whose first byte lies at `digest_base` in its source;
    /// returns the index of its first chunk (a segment of 0 bytes has no chunks). Ignored (and
    /// `None`) once the layout is closed.
    pub fn push(&mut self, len: u64, digest_base: u64) -> Option<u64> {
        if self.closed {
            return None;
        }
        let first = self.total_chunks;
        if len == 0 {
            return Some(first);
        }
        let cs = self.chunk_size;
        match self.runs.last_mut() {
            Some(r) if r.bytes.is_multiple_of(cs) && r.digest_base.checked_add(r.bytes) == Some(digest_base) => {
                r.bytes += len;
            }
            _ => self.runs.push(Run {
                first_chunk: first,
                bytes_before: self.total_bytes,
                bytes: len,
                digest_base,
            }),
        }
        self.total_chunks += len.div_ceil(cs);
        self.total_bytes += len;
        Some(first)
    }

    /// No segment will be added any more.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether [`Layout::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Chunk size, bytes.
    pub fn chunk_size(&self) -> u32 {
        // Built from a u32.
        self.chunk_size as u32
    }

    /// Chunks so far.
    pub fn total_chunks(&self) -> u64 {
        self.total_chunks
    }

    /// Bytes so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Number of runs (merged segments): what the layout costs in memory.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Wire offset of chunk `chunk`: `chunk · chunk_size`.
    pub fn wire_offset(&self, chunk: u64) -> u64 {
        chunk.saturating_mul(self.chunk_size)
    }

    /// Where chunk `chunk` lies; `None` past the end.
    pub fn place(&self, chunk: u64) -> Option<ChunkPlace> {
        if chunk >= self.total_chunks {
            return None;
        }
        let i = self.runs.partition_point(|r| r.first_chunk <= chunk).checked_sub(1)?;
        let r = self.runs.get(i)?;
        let within = (chunk - r.first_chunk) * self.chunk_size;
        Some(ChunkPlace {
            len: (r.bytes - within).min(self.chunk_size) as usize,
            stream_offset: r.bytes_before + within,
            digest_offset: r.digest_base + within,
        })
    }

    /// Payload length of chunk `chunk` (0 past the end).
    pub fn chunk_len(&self, chunk: u64) -> usize {
        self.place(chunk).map_or(0, |p| p.len)
    }

    /// Bytes in chunks `[0, chunk)`.
    pub fn bytes_before(&self, chunk: u64) -> u64 {
        if chunk >= self.total_chunks {
            return self.total_bytes;
        }
        self.place(chunk).map_or(self.total_bytes, |p| p.stream_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn segments_start_on_chunk_boundaries() {
        let mut l = Layout::new(1000);
        assert_eq!(l.push(2500, 0), Some(0));
        assert_eq!(l.push(0, 7), Some(3), "an empty segment has no chunks");
        assert_eq!(l.push(1000, 1 << 20), Some(3));
        assert_eq!(l.total_chunks(), 4);
        assert_eq!(l.total_bytes(), 3500);
        assert_eq!(
            l.place(2),
            Some(ChunkPlace {
                len: 500,
                stream_offset: 2000,
                digest_offset: 2000
            })
        );
        assert_eq!(
            l.place(3),
            Some(ChunkPlace {
                len: 1000,
                stream_offset: 2500,
                digest_offset: 1 << 20
            })
        );
        assert_eq!(l.place(4), None);
        assert_eq!(l.wire_offset(3), 3000);
        assert_eq!(l.bytes_before(3), 2500);
        assert_eq!(l.bytes_before(99), 3500);
        l.close();
        assert_eq!(l.push(5, 0), None);
        assert_eq!(l.total_bytes(), 3500);
    }

    #[test]
    fn contiguous_aligned_segments_merge() {
        let mut l = Layout::new(1024);
        for b in 0..100u64 {
            l.push(4096, b * 4096);
        }
        assert_eq!(l.runs(), 1);
        l.push(4096, 1 << 30); // another file
        l.push(100, (1 << 30) + 4096); // continues it, but the next starts a new chunk
        l.push(4096, (1 << 30) + 4196);
        assert_eq!(l.runs(), 3);
        assert_eq!(l.chunk_len(404), 100);
        assert_eq!(l.place(405).unwrap().digest_offset, (1 << 30) + 4196);
    }

    proptest! {
        /// Against a naive expansion: every chunk's length and offsets.
        #[test]
        fn places_match_a_naive_expansion(
            cs in 1u32..5000,
            segs in proptest::collection::vec((0u64..20_000, 0u64..3, 0u64..1_000_000), 0..30),
        ) {
            let mut l = Layout::new(cs);
            let mut naive = Vec::new(); // (len, stream offset, digest offset) per chunk
            let mut stream = 0u64;
            let mut prev_end: Option<u64> = None;
            for (len, how, base) in segs {
                // Sometimes continue the previous segment in its source (merging), sometimes not.
                let base = match (how, prev_end) {
                    (0, Some(e)) => e,
                    _ => base,
                };
                l.push(len, base);
                let mut off = 0;
                while off < len {
                    let n = (len - off).min(u64::from(cs));
                    naive.push((n as usize, stream + off, base + off));
                    off += n;
                }
                stream += len;
                prev_end = Some(base + len);
            }
            prop_assert_eq!(l.total_chunks(), naive.len() as u64);
            prop_assert_eq!(l.total_bytes(), stream);
            for (i, &(len, so, d)) in naive.iter().enumerate() {
                let p = l.place(i as u64).unwrap();
                prop_assert_eq!((p.len, p.stream_offset, p.digest_offset), (len, so, d), "chunk {}", i);
                prop_assert_eq!(l.bytes_before(i as u64), so);
            }
            prop_assert!(l.place(naive.len() as u64).is_none());
        }
    }
}

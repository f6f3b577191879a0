//! The transfer protocol's [`Source`] and [`Sink`] over real files: the session's stream of
//! blocks ([`SegmentTable`]) mapped onto the files they belong to, hashed as they are sent or
//! written ([`BlockTree`]) — each byte is read once on the sender and written once on the
//! receiver, and hashed on the way. [`ReadAt`] is what a sender reads: a file, or anything read
//! at offsets (a recorded scan).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Instant;

/// Positional reads, shared by threads (the stream's sender and a hasher of held blocks read at
/// once).
pub trait ReadAt: Send + Sync {
    /// Read at `offset` (a short read is normal; 0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Fill `buf` from `offset`, or fail with `UnexpectedEof`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

use transfer::blocks::Geometry;
use transfer::blocktree::{BlockTree, Cv};
use transfer::segments::SegmentTable;
use transfer::{PayloadDigest, Sink, Source};

/// A block whose hash is now known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHashed {
    /// File id.
    pub file: u64,
    /// Block index.
    pub block: u64,
    /// Its hash ([`transfer::blocktree`]).
    pub hash: Cv,
}

/// Finish a tree whose every byte was fed: read back deferred leaves from `file` (counted in
/// `read_back`) and take the hash.
fn finish_tree(tree: &mut BlockTree, file: &dyn ReadAt, size: u64, read_back: &mut u64) -> io::Result<Option<Cv>> {
    let deferred: Vec<u64> = tree.deferred().to_vec();
    let mut buf = [0u8; 1024];
    for k in deferred {
        let start = k * 1024;
        let n = (size.saturating_sub(start)).min(1024) as usize;
        file.read_exact_at(&mut buf[..n], start)?;
        *read_back += n as u64;
        tree.feed_leaf(k, &buf[..n]);
    }
    Ok(tree.result())
}

/// One file the sender is sending.
struct TxFile {
    file: Arc<dyn ReadAt>,
    g: Geometry,
    /// Blocks being hashed as their chunks are first sent.
    trees: HashMap<u64, BlockTree>,
    /// Blocks whose hash is known (later rounds of them are not hashed again: the hash is of
    /// what was sent first).
    hashed: std::collections::HashSet<u64>,
    last_sent: Option<Instant>,
    sent_bytes: u64,
    /// Last stream chunk of the file's segments so far: its handle is kept until the stream's
    /// acknowledgement passes it, because a retransmission may still read it.
    last_chunk: u64,
    done: bool,
}

/// What the sender did with one file's data.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TxFileStats {
    /// Payload bytes sent for the first time (not counting retransmissions).
    pub sent_bytes: u64,
    /// When its last DATA (first or repeated) left.
    pub last_sent: Option<Instant>,
}

/// The sender's [`Source`]: reads each chunk from its file and hashes what it sends first.
pub struct FileSource {
    table: SegmentTable,
    files: HashMap<u64, TxFile>,
    hashed: Vec<BlockHashed>,
    /// Set by the sending loop before it polls: the time stamped on transmissions.
    pub now: Instant,
    /// A read-back for hashing that failed (the session fails on it).
    pub error: Option<io::Error>,
    /// Bytes read from the files for DATA (first transmissions and repeats).
    pub bytes_read: u64,
    /// Bytes read again only to hash them (partial BLAKE3 leaves past the bound).
    pub read_back: u64,
}

impl FileSource {
    /// A source for a stream of chunks of `chunk_size` bytes.
    pub fn new(chunk_size: u32) -> FileSource {
        FileSource {
            table: SegmentTable::new(chunk_size),
            files: HashMap::new(),
            hashed: Vec::new(),
            now: Instant::now(),
            error: None,
            bytes_read: 0,
            read_back: 0,
        }
    }

    /// Add file `id` (opened) of geometry `g`.
    pub fn add_file(&mut self, id: u64, file: Arc<dyn ReadAt>, g: Geometry) {
        self.files.insert(
            id,
            TxFile {
                file,
                g,
                trees: HashMap::new(),
                hashed: Default::default(),
                last_sent: None,
                sent_bytes: 0,
                last_chunk: 0,
                done: false,
            },
        );
    }

    /// The reader of file `id`.
    pub fn file(&self, id: u64) -> Option<&Arc<dyn ReadAt>> {
        self.files.get(&id).map(|f| &f.file)
    }

    /// Append block `block` of file `id` to the stream; returns the segment to push to the
    /// protocol (`len`, digest base), or `None` for an unknown file.
    pub fn push_block(&mut self, id: u64, block: u64) -> Option<(u64, u64)> {
        let f = self.files.get_mut(&id)?;
        let (len, off) = (f.g.block_len(block), block.saturating_mul(f.g.block_size));
        self.table.push(id, block, off, len);
        f.last_chunk = self.table.chunks();
        Some((len, off))
    }

    /// Block hashes finished since the last call.
    pub fn take_hashed(&mut self) -> Vec<BlockHashed> {
        std::mem::take(&mut self.hashed)
    }

    /// File `id` has its verdict: report its figures; its handle is dropped once the stream's
    /// acknowledgement passes its data ([`FileSource::retire`]).
    pub fn finish_file(&mut self, id: u64) -> TxFileStats {
        match self.files.get_mut(&id) {
            Some(f) => {
                f.done = true;
                f.trees.clear();
                TxFileStats {
                    sent_bytes: f.sent_bytes,
                    last_sent: f.last_sent,
                }
            }
            None => TxFileStats::default(),
        }
    }

    /// Figures of file `id` so far.
    pub fn stats(&self, id: u64) -> TxFileStats {
        self.files.get(&id).map_or_else(TxFileStats::default, |f| TxFileStats {
            sent_bytes: f.sent_bytes,
            last_sent: f.last_sent,
        })
    }

    /// Drop the handles of finished files whose every chunk is below `cum_ack`.
    pub fn retire(&mut self, cum_ack: u64) {
        self.files.retain(|_, f| !(f.done && f.last_chunk <= cum_ack));
    }

    /// Files held open.
    pub fn open_files(&self) -> usize {
        self.files.len()
    }
}

impl Source for FileSource {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let Some((seg, at)) = self.table.locate(offset) else {
            return Ok(0);
        };
        let end = seg.file_offset + seg.len;
        let n = ((end - at) as usize).min(buf.len());
        let r = match self.files.get(&seg.file) {
            Some(f) => f.file.read_at(&mut buf[..n], at),
            None => Err(io::Error::other(format!("file {} of the stream is closed", seg.file))),
        };
        if let Ok(n) = r {
            self.bytes_read += n as u64;
        }
        r
    }

    fn on_sent(&mut self, offset: u64, payload: &[u8], digest: Option<&PayloadDigest>, first: bool) {
        let Some((seg, at)) = self.table.locate(offset) else {
            return;
        };
        let (id, block) = (seg.file, seg.block);
        let Some(f) = self.files.get_mut(&id) else {
            return;
        };
        f.last_sent = Some(self.now);
        if !first {
            return;
        }
        f.sent_bytes += payload.len() as u64;
        if f.done || f.hashed.contains(&block) {
            return;
        }
        let g = f.g;
        let tree = f.trees.entry(block).or_insert_with(|| BlockTree::new(g, block));
        tree.feed(at, payload, digest);
        if tree.all_fed() {
            let mut tree = f.trees.remove(&block).unwrap_or_else(|| BlockTree::new(g, block));
            match finish_tree(&mut tree, &*f.file, g.size, &mut self.read_back) {
                Ok(Some(hash)) => {
                    f.hashed.insert(block);
                    self.hashed.push(BlockHashed { file: id, block, hash });
                }
                Ok(None) => self.error = Some(io::Error::other(format!("block {block} of file {id} did not hash"))),
                Err(e) => self.error = Some(e),
            }
        }
    }
}

/// The file id of skipped blocks ([`PartSink::push_skipped`]); offers may not use it
/// ([`crate::control`]).
const SKIPPED: u64 = u64::MAX;

/// One file the receiver is writing (its `.part`).
struct RxFile {
    part: File,
    g: Geometry,
    trees: HashMap<u64, BlockTree>,
    /// Bytes still expected per block in the stream.
    left: HashMap<u64, u64>,
    /// Bytes read back from the `.part` only to hash them.
    read_back: u64,
}

/// The receiver's [`Sink`]: writes each chunk into its file's `.part` at its offset and hashes
/// it; reports blocks as they complete.
pub struct PartSink {
    table: SegmentTable,
    files: HashMap<u64, RxFile>,
    completed: Vec<BlockHashed>,
    /// Chunks of files no longer received (refused or failed meanwhile): dropped.
    pub orphan_chunks: u64,
    /// Chunks of blocks pushed with [`PartSink::push_skipped`]: received and dropped unwritten.
    pub skipped_chunks: u64,
    /// Most recent write error, for the session to judge (disk full ends the session).
    pub last_error: Option<io::Error>,
}

impl PartSink {
    /// A sink for a stream of chunks of `chunk_size` bytes.
    pub fn new(chunk_size: u32) -> PartSink {
        PartSink {
            table: SegmentTable::new(chunk_size),
            files: HashMap::new(),
            completed: Vec::new(),
            orphan_chunks: 0,
            skipped_chunks: 0,
            last_error: None,
        }
    }

    /// Add file `id` writing into `part` (its own descriptor of the `.part`).
    pub fn add_file(&mut self, id: u64, part: File, g: Geometry) {
        self.files.insert(
            id,
            RxFile {
                part,
                g,
                trees: HashMap::new(),
                left: HashMap::new(),
                read_back: 0,
            },
        );
    }

    /// Bytes of file `id` read back from its `.part` only to hash them (partial BLAKE3 leaves
    /// past the bound); 0 when every byte was hashed as it was written.
    pub fn read_back(&self, id: u64) -> u64 {
        self.files.get(&id).map_or(0, |f| f.read_back)
    }

    /// Stop writing file `id` (verified, refused or failed): later chunks of it are dropped.
    pub fn remove_file(&mut self, id: u64) {
        self.files.remove(&id);
    }

    /// Append block `block` of file `id` to the stream (a fresh start for that block: a block
    /// sent again after failing verification is hashed anew); returns the segment to push to the
    /// protocol (`len`, digest base).
    pub fn push_block(&mut self, id: u64, block: u64) -> Option<(u64, u64)> {
        let f = self.files.get_mut(&id)?;
        let (len, off) = (f.g.block_len(block), block.saturating_mul(f.g.block_size));
        f.trees.insert(block, BlockTree::new(f.g, block));
        f.left.insert(block, len);
        self.table.push(id, block, off, len);
        Some((len, off))
    }

    /// Append block `block` of a file of geometry `g` to the stream as a block to receive and
    /// drop unwritten (a block of the first segment the receiver holds already, or of a refused
    /// first offer); returns the segment to push to the protocol.
    pub fn push_skipped(&mut self, g: Geometry, block: u64) -> (u64, u64) {
        let (len, off) = (g.block_len(block), block.saturating_mul(g.block_size));
        self.table.push(SKIPPED, block, off, len);
        (len, off)
    }

    /// Blocks completely written (with their hash) since the last call.
    pub fn take_completed(&mut self) -> Vec<BlockHashed> {
        std::mem::take(&mut self.completed)
    }
}

impl Sink for PartSink {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_chunk(offset, data, None)
    }

    fn write_chunk(&mut self, offset: u64, data: &[u8], digest: Option<&PayloadDigest>) -> io::Result<()> {
        let Some((seg, at)) = self.table.locate(offset) else {
            return Err(io::Error::other("chunk outside the stream"));
        };
        let (id, block) = (seg.file, seg.block);
        if id == SKIPPED {
            self.skipped_chunks += 1;
            return Ok(());
        }
        let Some(f) = self.files.get_mut(&id) else {
            // The file is gone (refused, failed): the chunk is received, and dropped.
            self.orphan_chunks += 1;
            return Ok(());
        };
        if let Err(e) = f.part.write_all_at(data, at) {
            let copy = io::Error::new(e.kind(), e.to_string());
            self.last_error = Some(e);
            return Err(copy);
        }
        if let Some(t) = f.trees.get_mut(&block) {
            t.feed(at, data, digest);
        }
        // The protocol hands each chunk to the sink once, so counting down is exact.
        let left = f.left.entry(block).or_insert(0);
        *left = left.saturating_sub(data.len() as u64);
        if *left == 0 {
            f.left.remove(&block);
            if let Some(mut t) = f.trees.remove(&block) {
                match finish_tree(&mut t, &f.part, f.g.size, &mut f.read_back) {
                    Ok(Some(hash)) => self.completed.push(BlockHashed { file: id, block, hash }),
                    Ok(None) => self.last_error = Some(io::Error::other(format!("block {block} did not hash"))),
                    Err(e) => self.last_error = Some(e),
                }
            }
        }
        Ok(())
    }
}

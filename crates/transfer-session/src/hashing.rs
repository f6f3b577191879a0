//! BLAKE3 of each block and of the whole file, in one sequential pass.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::blocks::Geometry;
use crate::fileio::ReadAt;

/// Hashes of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    /// BLAKE3 of each block.
    pub blocks: Vec<[u8; 32]>,
    /// BLAKE3 of the whole file.
    pub file: [u8; 32],
}

const READ: usize = 1 << 20;

fn hash_block(
    file: &dyn ReadAt,
    g: Geometry,
    b: u64,
    buf: &mut [u8],
    whole: &mut blake3::Hasher,
) -> io::Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    let start = b * g.block_size;
    let end = start + g.block_len(b);
    let mut off = start;
    while off < end {
        let n = ((end - off) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], off)?;
        h.update(&buf[..n]);
        whole.update(&buf[..n]);
        off += n as u64;
    }
    Ok(*h.finalize().as_bytes())
}

/// Read `file` once from the start, hashing each block and the whole. `should_stop` is polled
/// between reads so an aborted transfer does not wait for a long file to be hashed.
pub fn digest(file: &dyn ReadAt, g: Geometry, should_stop: &dyn Fn() -> bool) -> io::Result<Option<FileDigest>> {
    let mut whole = blake3::Hasher::new();
    let mut blocks = Vec::with_capacity(g.blocks() as usize);
    let mut buf = vec![0u8; READ];
    for b in 0..g.blocks() {
        if should_stop() {
            return Ok(None);
        }
        blocks.push(hash_block(file, g, b, &mut buf, &mut whole)?);
    }
    Ok(Some(FileDigest {
        blocks,
        file: *whole.finalize().as_bytes(),
    }))
}

/// Hashes the receiver's copy while it arrives: blocks are hashed in file order as soon as they
/// are complete, on a thread of its own, so verification after the last datagram only has to
/// finish the tail instead of reading the whole file again.
pub struct IncrementalDigest {
    tx: Option<mpsc::Sender<u64>>,
    abandoned: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<FileDigest>>>,
}

impl IncrementalDigest {
    /// Start hashing `file`; `complete` are the blocks already on disk.
    pub fn start(file: File, g: Geometry, complete: impl IntoIterator<Item = u64>) -> IncrementalDigest {
        let (tx, rx) = mpsc::channel::<u64>();
        for b in complete {
            let _ = tx.send(b);
        }
        let abandoned = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&abandoned);
        let thread = std::thread::spawn(move || {
            crate::lower_priority();
            let mut ready = BTreeSet::new();
            let mut whole = blake3::Hasher::new();
            let mut blocks = Vec::with_capacity(g.blocks() as usize);
            let mut buf = vec![0u8; READ];
            let mut next = 0u64;
            // Until the channel closes, hash what is contiguous; then everything left (the
            // caller closes it only when every block is on disk).
            for b in rx.iter() {
                ready.insert(b);
                while ready.remove(&next) {
                    blocks.push(hash_block(&file, g, next, &mut buf, &mut whole)?);
                    next += 1;
                }
            }
            for b in next..g.blocks() {
                if stop.load(Ordering::Relaxed) {
                    return Err(io::Error::other("abandoned"));
                }
                blocks.push(hash_block(&file, g, b, &mut buf, &mut whole)?);
            }
            Ok(FileDigest {
                blocks,
                file: *whole.finalize().as_bytes(),
            })
        });
        IncrementalDigest {
            tx: Some(tx),
            abandoned,
            thread: Some(thread),
        }
    }

    /// Block `b` is now completely on disk.
    pub fn completed(&self, b: u64) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(b);
        }
    }

    /// Every block is on disk: finish hashing and return the digest.
    pub fn finish(mut self) -> io::Result<FileDigest> {
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(io::Error::other("hashing thread failed")),
        }
    }
}

impl Drop for IncrementalDigest {
    fn drop(&mut self) {
        // Abandoned (session failed): stop the thread and reap it so nothing outlives the session.
        self.abandoned.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the receiver found checking its copy against the sender's block hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Blocks whose hash differs.
    pub bad: Vec<u64>,
    /// BLAKE3 of the whole copy (meaningful when `bad` is empty).
    pub file: [u8; 32],
}

/// Hash the receiver's copy in one pass and compare each block with `expected`.
pub fn verify(file: &File, g: Geometry, expected: &[[u8; 32]]) -> io::Result<Verification> {
    let d = digest(file, g, &|| false)?.ok_or_else(|| io::Error::other("hashing stopped"))?;
    Ok(compare(d, g, expected))
}

/// Compare a digest of the copy with the sender's block hashes.
pub fn compare(d: FileDigest, g: Geometry, expected: &[[u8; 32]]) -> Verification {
    let bad = (0..g.blocks())
        .filter(|&b| expected.get(b as usize) != Some(&d.blocks[b as usize]))
        .collect();
    Verification { bad, file: d.file }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn blocks_and_whole_match_blake3_and_corruption_is_located() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&data).unwrap();
        let g = Geometry {
            size: data.len() as u64,
            block_size: 1 << 20,
        };
        let d = digest(&f, g, &|| false).unwrap().unwrap();
        assert_eq!(d.file, *blake3::hash(&data).as_bytes());
        assert_eq!(d.blocks.len(), 3);
        assert_eq!(d.blocks[2], *blake3::hash(&data[2 << 20..]).as_bytes());
        assert!(verify(&f, g, &d.blocks).unwrap().bad.is_empty());
        f.write_all_at(b"x", (1 << 20) + 5).unwrap();
        assert_eq!(verify(&f, g, &d.blocks).unwrap().bad, vec![1]);
        assert!(digest(&f, g, &|| true).unwrap().is_none());
    }

    #[test]
    fn incremental_digest_equals_one_pass_whatever_the_completion_order() {
        let data: Vec<u8> = (0..5_500_000u32).map(|i| (i ^ (i >> 9)) as u8).collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&data).unwrap();
        let g = Geometry {
            size: data.len() as u64,
            block_size: 1 << 20,
        };
        let one_pass = digest(&f, g, &|| false).unwrap().unwrap();
        let inc = IncrementalDigest::start(f.try_clone().unwrap(), g, [1]);
        for b in [3, 0, 5, 2] {
            inc.completed(b);
        }
        // Block 4 never reported: finish hashes what is left.
        assert_eq!(inc.finish().unwrap(), one_pass);
    }
}

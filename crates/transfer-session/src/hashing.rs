//! The hashing that reads files or runs on threads of its own, around the pure BLAKE3 block
//! trees of [`transfer::blocktree`]: blocks one side already holds, read back and hashed in one
//! pass on a low-priority thread, and whole files checked outside a session.

use std::io;
use std::sync::Arc;

use transfer::blocks::Geometry;
use transfer::blocktree::{root_of_blocks, Cv, OnePass};

use crate::fileio::ReadAt;

/// Read buffer for hashing from a file.
const READ: usize = 1 << 20;

/// Hash of block `b` of `file`, read from the file in one pass (blocks the other side already
/// holds, which are not sent).
pub fn hash_block_from(file: &dyn ReadAt, g: Geometry, b: u64, buf: &mut Vec<u8>) -> io::Result<Cv> {
    let start = b.saturating_mul(g.block_size);
    let end = start + g.block_len(b);
    buf.resize(READ, 0);
    let mut h = OnePass::new(g, b);
    let mut off = start;
    while off < end {
        let n = ((end - off) as usize).min(READ);
        file.read_exact_at(&mut buf[..n], off)?;
        h.update(&buf[..n]);
        off += n as u64;
    }
    Ok(h.finish())
}

/// Hashes of blocks read from a file on a thread of their own: `(block, hash)`.
pub type HeldHashes = std::thread::JoinHandle<io::Result<Vec<(u64, Cv)>>>;

/// Hash `blocks` of `file` (geometry `g`) on a low-priority thread: the blocks one side holds
/// from an earlier attempt, which are not sent and so not hashed on the way.
pub fn spawn_block_hashing(file: Arc<dyn ReadAt>, g: Geometry, blocks: Vec<u64>) -> HeldHashes {
    std::thread::spawn(move || {
        lower_priority();
        let mut buf = Vec::new();
        blocks
            .into_iter()
            .map(|b| hash_block_from(&*file, g, b, &mut buf).map(|h| (b, h)))
            .collect()
    })
}

/// The hashes of a finished [`HeldHashes`] job.
pub fn join_block_hashing(job: HeldHashes) -> io::Result<Vec<(u64, Cv)>> {
    job.join().map_err(|_| io::Error::other("hashing thread panicked"))?
}

/// The per-block hashes and the BLAKE3 of a whole file read in one pass (for tests and for
/// checking a copy outside a session).
pub fn digest_file(file: &dyn ReadAt, g: Geometry) -> io::Result<(Vec<Cv>, Cv)> {
    let mut buf = Vec::new();
    let blocks = (0..g.blocks())
        .map(|b| hash_block_from(file, g, b, &mut buf))
        .collect::<io::Result<Vec<_>>>()?;
    let root = root_of_blocks(&blocks);
    Ok((blocks, root))
}

/// Run the calling thread at nice 19: hashing may trail the data and must not take the core
/// the socket loops need (on one host, sender and receiver share two cores). Its results are
/// needed only when a round ends.
#[allow(unsafe_code)] // setpriority(2) of one thread: std has no thread priorities.
pub(crate) fn lower_priority() {
    // SAFETY: gettid has no preconditions; setpriority with PRIO_PROCESS and our own thread id
    // changes only this thread's nice value (Linux treats the id as a thread id).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_read_back_hashes_as_its_bytes_do() {
        for len in [0usize, 1, 1025, 65_536, 300_001] {
            let d: Vec<u8> = (0..len as u32).map(|i| (i.wrapping_mul(7) ^ (i >> 7)) as u8).collect();
            let mut f = tempfile::tempfile().expect("tempfile");
            f.write_all(&d).expect("write");
            let g = Geometry {
                size: len as u64,
                block_size: 65_536,
            };
            let from_file = digest_file(&f, g).expect("digest");
            assert_eq!(from_file, transfer::blocktree::digest_bytes(&d, g), "len {len}");
            assert_eq!(from_file.1, *blake3::hash(&d).as_bytes(), "len {len}: b3sum's hash");
        }
    }
}

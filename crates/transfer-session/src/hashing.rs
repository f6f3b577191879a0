//! BLAKE3 of each block and of the whole file, in one sequential pass.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::blocks::Geometry;

/// Hashes of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    /// BLAKE3 of each block.
    pub blocks: Vec<[u8; 32]>,
    /// BLAKE3 of the whole file.
    pub file: [u8; 32],
}

const READ: usize = 1 << 20;

/// Read `file` once from the start, hashing each block and the whole. `should_stop` is polled
/// between reads so an aborted transfer does not wait for a long file to be hashed.
pub fn digest(file: &File, g: Geometry, should_stop: &dyn Fn() -> bool) -> io::Result<Option<FileDigest>> {
    let mut whole = blake3::Hasher::new();
    let mut blocks = Vec::with_capacity(g.blocks() as usize);
    let mut buf = vec![0u8; READ];
    for b in 0..g.blocks() {
        let mut h = blake3::Hasher::new();
        let start = b * g.block_size;
        let end = start + g.block_len(b);
        let mut off = start;
        while off < end {
            if should_stop() {
                return Ok(None);
            }
            let n = ((end - off) as usize).min(READ);
            file.read_exact_at(&mut buf[..n], off)?;
            h.update(&buf[..n]);
            whole.update(&buf[..n]);
            off += n as u64;
        }
        blocks.push(*h.finalize().as_bytes());
    }
    Ok(Some(FileDigest {
        blocks,
        file: *whole.finalize().as_bytes(),
    }))
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
    let bad = (0..g.blocks())
        .filter(|&b| expected.get(b as usize) != Some(&d.blocks[b as usize]))
        .collect();
    Ok(Verification { bad, file: d.file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
}

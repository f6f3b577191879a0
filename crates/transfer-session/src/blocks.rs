//! Blocks: the unit of verification and resume.
//!
//! A file is cut into blocks of `block_size` bytes (a multiple of the chunk size; the last block
//! may be shorter). Each block has a BLAKE3 hash. A round of the transfer protocol moves a
//! *selection* of blocks as if they were one contiguous file: virtual offset `v` lies in the
//! `v / block_size`-th selected block. Because blocks are whole multiples of chunks and only the
//! file's last block is short (and it sorts last), every chunk of the virtual file lies inside
//! one real block, so the protocol needs no change to skip what the receiver already has.

use std::io;

use crate::paths::Dir;

use serde::{Deserialize, Serialize};

/// Block geometry of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// File size, bytes.
    pub size: u64,
    /// Block size, bytes.
    pub block_size: u64,
}

impl Geometry {
    /// Number of blocks.
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(self.block_size)
    }

    /// Bytes in block `b`.
    pub fn block_len(&self, b: u64) -> u64 {
        let start = b.saturating_mul(self.block_size);
        self.size.saturating_sub(start).min(self.block_size)
    }

    /// Bytes in all of `blocks`.
    pub fn len_of(&self, blocks: impl IntoIterator<Item = u64>) -> u64 {
        blocks.into_iter().map(|b| self.block_len(b)).sum()
    }
}

/// Sorted block ranges `[first, end)` ⇄ sorted block indices.
pub fn to_ranges(blocks: impl IntoIterator<Item = u64>) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::new();
    for b in blocks {
        match out.last_mut() {
            Some(r) if r[1] == b => r[1] += 1,
            _ => out.push([b, b + 1]),
        }
    }
    out
}

/// Expand ranges (already validated: ordered, non-overlapping, bounded).
pub fn from_ranges(r: &[[u64; 2]]) -> impl Iterator<Item = u64> + '_ {
    r.iter().flat_map(|&[a, b]| a..b)
}

/// The blocks moved in one round, as one virtual file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    geometry: Geometry,
    blocks: Vec<u64>,
}

impl Selection {
    /// Blocks `blocks` (sorted, each < `geometry.blocks()`) of a file.
    pub fn new(geometry: Geometry, mut blocks: Vec<u64>) -> Self {
        blocks.sort_unstable();
        blocks.dedup();
        blocks.retain(|&b| b < geometry.blocks());
        Selection { geometry, blocks }
    }

    /// Every block not in `have`.
    pub fn missing(geometry: Geometry, have: &[[u64; 2]]) -> Self {
        let mut held = from_ranges(have).peekable();
        let mut blocks = Vec::new();
        for b in 0..geometry.blocks() {
            while held.next_if(|&h| h < b).is_some() {}
            if held.peek() != Some(&b) {
                blocks.push(b);
            }
        }
        Selection { geometry, blocks }
    }

    /// The selected block indices.
    pub fn blocks(&self) -> &[u64] {
        &self.blocks
    }

    /// Size of the virtual file.
    pub fn virtual_size(&self) -> u64 {
        self.geometry.len_of(self.blocks.iter().copied())
    }

    /// Which selected block a virtual offset is in (index into [`Selection::blocks`]) and the
    /// real file offset it maps to; `None` past the end.
    pub fn locate(&self, virtual_offset: u64) -> Option<(usize, u64)> {
        let i = usize::try_from(virtual_offset / self.geometry.block_size).ok()?;
        let b = *self.blocks.get(i)?;
        let within = virtual_offset % self.geometry.block_size;
        (within < self.geometry.block_len(b)).then(|| (i, b * self.geometry.block_size + within))
    }
}

/// What the receiver keeps beside `NAME.part` (as `NAME.part.evlbi`) so an interrupted file can
/// resume: which version of which file it is and which blocks are on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeState {
    /// Layout version of this record.
    pub version: u32,
    /// File size.
    pub size: u64,
    /// Source modification time (ns) the blocks came from.
    pub mtime_ns: u64,
    /// Chunk size of the offer.
    pub chunk_size: u32,
    /// Block size of the offer.
    pub block_size: u64,
    /// Block ranges completely written to the `.part` file.
    pub have: Vec<[u64; 2]>,
}

/// [`ResumeState::version`] written by this build.
pub const RESUME_STATE_VERSION: u32 = 1;

/// Largest resume record read (a hostile or corrupt one must not exhaust memory).
const MAX_STATE_BYTES: u64 = 16 << 20;

impl ResumeState {
    /// Read record `name` in `dir`; `None` if absent, unreadable, a link or not ours (the
    /// transfer then starts over).
    pub fn load(dir: &Dir, name: &str) -> Option<ResumeState> {
        let s: ResumeState = serde_json::from_slice(&dir.read_small(name, MAX_STATE_BYTES)?).ok()?;
        (s.version == RESUME_STATE_VERSION).then_some(s)
    }

    /// Write record `name` in `dir` atomically (see [`Dir::write_atomic`]: never through a link
    /// planted there), so a crash leaves the old or the new record, never half of one. Nothing
    /// is fsync'd: this runs on the receiving thread every second,
    /// and a sync of gigabytes of dirty `.part` data there stalls the socket loop for hundreds
    /// of milliseconds (the sender then probes and repeats data). After a power loss the record
    /// may list a block that never reached the disk; that costs a re-fetch, not a bad file,
    /// because every block is verified against the sender's hash before the file is accepted.
    pub fn save(&self, dir: &Dir, name: &str) -> io::Result<()> {
        let bytes = serde_json::to_vec(self).map_err(io::Error::other)?;
        dir.write_atomic(name, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const G: Geometry = Geometry {
        size: 10 * 4096 + 100,
        block_size: 4096,
    };

    #[test]
    fn ranges_roundtrip() {
        let r = to_ranges([0, 1, 2, 5, 7, 8]);
        assert_eq!(r, vec![[0, 3], [5, 6], [7, 9]]);
        assert_eq!(from_ranges(&r).collect::<Vec<_>>(), vec![0, 1, 2, 5, 7, 8]);
    }

    #[test]
    fn missing_blocks_map_to_real_offsets() {
        let s = Selection::missing(G, &[[0, 3], [5, 10]]);
        assert_eq!(s.blocks(), &[3, 4, 10]);
        assert_eq!(s.virtual_size(), 2 * 4096 + 100);
        assert_eq!(s.locate(0), Some((0, 3 * 4096)));
        assert_eq!(s.locate(4096 + 5), Some((1, 4 * 4096 + 5)));
        assert_eq!(s.locate(2 * 4096 + 99), Some((2, 10 * 4096 + 99)));
        assert_eq!(s.locate(2 * 4096 + 100), None);
        assert_eq!(Selection::missing(G, &[]).virtual_size(), G.size);
        assert_eq!(Selection::missing(G, &[[0, 11]]).virtual_size(), 0);
    }

    proptest::proptest! {
        #[test]
        fn selection_covers_exactly_the_missing_bytes(held in proptest::collection::btree_set(0u64..11, 0..11)) {
            let s = Selection::missing(G, &to_ranges(held.iter().copied()));
            let mut real: Vec<u64> = (0..s.virtual_size()).step_by(97).filter_map(|v| s.locate(v).map(|x| x.1)).collect();
            real.dedup();
            for r in &real {
                proptest::prop_assert!(!held.contains(&(r / 4096)));
            }
            let expect: u64 = (0..11).filter(|b| !held.contains(b)).map(|b| G.block_len(b)).sum();
            proptest::prop_assert_eq!(s.virtual_size(), expect);
        }
    }

    #[test]
    fn state_survives_a_roundtrip_and_rejects_garbage() {
        let d = tempfile::tempdir().unwrap();
        let root = crate::paths::Root::open(d.path()).unwrap();
        let (dir, name) = root.parent_of("x").unwrap();
        let name = format!("{name}.part.evlbi");
        let p = d.path().join(&name);
        let s = ResumeState {
            version: RESUME_STATE_VERSION,
            size: 5,
            mtime_ns: 7,
            chunk_size: 512,
            block_size: 1024,
            have: vec![[0, 1]],
        };
        s.save(&dir, &name).unwrap();
        assert_eq!(ResumeState::load(&dir, &name), Some(s));
        fs::write(&p, b"{not json").unwrap();
        assert_eq!(ResumeState::load(&dir, &name), None);
    }
}

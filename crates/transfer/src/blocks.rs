//! Blocks: the unit of verification and resume of a file sent through an open transfer.
//!
//! A file is cut into blocks of `block_size` bytes, a power of two (the last block may be
//! shorter): each block is one subtree of the file's BLAKE3 tree, and its hash is that
//! subtree's chaining value ([`crate::blocktree`]). A session moves every block the receiver
//! lacks as one segment of its data stream ([`crate::segments`]). No IO here: the session
//! reads and writes the resume record ([`ResumeState`]) where it keeps its files.

use serde::{Deserialize, Serialize};

/// Smallest verification block (a power of two, like every block size).
pub const MIN_BLOCK: u64 = 1 << 12;
/// Largest verification block.
pub const MAX_BLOCK: u64 = 1 << 30;
/// Most blocks per file (bounds the receiver's memory for hashes: 32 MiB).
pub const MAX_BLOCKS: u64 = 1 << 20;
/// Largest file, bytes (1 PiB).
pub const MAX_FILE_SIZE: u64 = 1 << 50;

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
    /// Unused (the chunk size of protocol 2's offers; 0 from protocol 3 on, where a resume
    /// depends only on blocks).
    pub chunk_size: u32,
    /// Block size of the offer.
    pub block_size: u64,
    /// Block ranges completely written to the `.part` file.
    pub have: Vec<[u64; 2]>,
}

/// [`ResumeState::version`] written by this build.
pub const RESUME_STATE_VERSION: u32 = 1;

impl ResumeState {
    /// Whether a record read back is one to resume from: this build's version and
    /// [`ResumeState::is_plausible`].
    pub fn is_current(&self) -> bool {
        self.version == RESUME_STATE_VERSION && self.is_plausible()
    }

    /// Whether this receiver could have written the record: a block size it accepts, and
    /// ranges ordered, disjoint, non-empty and within the file's blocks (a record claiming
    /// blocks 0 to 2⁶⁴ − 1 would otherwise be walked block by block).
    pub fn is_plausible(&self) -> bool {
        let geometry_ok = self.block_size.is_power_of_two()
            && (MIN_BLOCK..=MAX_BLOCK).contains(&self.block_size)
            && self.size <= MAX_FILE_SIZE;
        if !geometry_ok {
            return false;
        }
        let blocks = self.size.div_ceil(self.block_size).min(MAX_BLOCKS);
        let mut prev_end = 0;
        self.have.iter().all(|&[a, b]| {
            let ok = a < b && b <= blocks && a >= prev_end;
            prev_end = b;
            ok
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_numbers_round_trip_through_ranges() {
        let r = to_ranges([0, 1, 2, 5, 7, 8]);
        assert_eq!(r, vec![[0, 3], [5, 6], [7, 9]]);
        assert_eq!(from_ranges(&r).collect::<Vec<_>>(), vec![0, 1, 2, 5, 7, 8]);
    }

    #[test]
    fn geometry_counts_the_short_last_block() {
        let g = Geometry {
            size: (3 << 12) + 5,
            block_size: 1 << 12,
        };
        assert_eq!(g.blocks(), 4);
        assert_eq!(g.block_len(3), 5);
        assert_eq!(g.block_len(4), 0);
        assert_eq!(g.len_of(0..4), g.size);
    }

    #[test]
    fn only_records_this_receiver_could_have_written_are_plausible() {
        let s = |block_size: u64, have: Vec<[u64; 2]>| ResumeState {
            version: RESUME_STATE_VERSION,
            size: 3 << 20,
            mtime_ns: 1,
            chunk_size: 0,
            block_size,
            have,
        };
        assert!(s(1 << 20, vec![]).is_plausible());
        assert!(s(1 << 20, vec![[0, 1], [2, 3]]).is_plausible());
        for have in [
            vec![[0, u64::MAX]],
            vec![[2, 1]],
            vec![[1, 1]],
            vec![[0, 2], [1, 3]],
            vec![[2, 3], [0, 1]],
            vec![[0, 4]],
        ] {
            assert!(!s(1 << 20, have.clone()).is_plausible(), "{have:?}");
        }
        assert!(!s(3 << 19, vec![]).is_plausible(), "not a power of two");
        assert!(!s(1, vec![]).is_plausible(), "below the smallest block");
        assert!(s(1 << 20, vec![]).is_current());
        let old = ResumeState {
            version: RESUME_STATE_VERSION + 1,
            ..s(1 << 20, vec![])
        };
        assert!(!old.is_current(), "another build's record");
    }
}

//! Blocks: the unit of verification and resume.
//!
//! A file is cut into blocks of `block_size` bytes, a power of two (the last block may be
//! shorter): each block is one subtree of the file's BLAKE3 tree, and its hash is that
//! subtree's chaining value ([`crate::hashing`]). The session moves every block the receiver
//! lacks as one segment of its data stream ([`crate::segments`]).

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

/// Largest resume record read (a hostile or corrupt one must not exhaust memory).
const MAX_STATE_BYTES: u64 = 16 << 20;

impl ResumeState {
    /// Read record `name` in `dir`; `None` if absent, unreadable, a link or not ours (the
    /// transfer then starts over).
    pub fn load(dir: &Dir, name: &str) -> Option<ResumeState> {
        let s: ResumeState = serde_json::from_slice(&dir.read_small(name, MAX_STATE_BYTES)?).ok()?;
        (s.version == RESUME_STATE_VERSION && s.is_plausible()).then_some(s)
    }

    /// Whether this receiver could have written the record: a block size it accepts, and
    /// ranges ordered, disjoint, non-empty and within the file's blocks (a record claiming
    /// blocks 0 to 2⁶⁴ − 1 would otherwise be walked block by block).
    pub fn is_plausible(&self) -> bool {
        use crate::control::{MAX_BLOCK, MAX_BLOCKS, MAX_FILE_SIZE, MIN_BLOCK};
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

    #[test]
    fn ranges_roundtrip() {
        let r = to_ranges([0, 1, 2, 5, 7, 8]);
        assert_eq!(r, vec![[0, 3], [5, 6], [7, 9]]);
        assert_eq!(from_ranges(&r).collect::<Vec<_>>(), vec![0, 1, 2, 5, 7, 8]);
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
            block_size: 4096,
            have: vec![[0, 1]],
        };
        s.save(&dir, &name).unwrap();
        assert_eq!(ResumeState::load(&dir, &name), Some(s));
        fs::write(&p, b"{not json").unwrap();
        assert_eq!(ResumeState::load(&dir, &name), None);
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
    }
}

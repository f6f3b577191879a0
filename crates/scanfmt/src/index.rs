//! Reassembly of a scan from its pieces (vbs chunks, Mark6 blocks) found on many disks: the
//! order, where each byte of the continuous scan lives, and which pieces are missing.
//!
//! Both layouts number their pieces from 0 with no gaps when every disk wrote; a number that is
//! absent is a piece lost (a disk that failed, was removed, or filled). A number seen twice is
//! a recorder error: the first one found (lowest file index) is kept and the duplicate reported.

use std::ops::Range;

/// One piece of a scan: piece `number`, `len` bytes at `offset` in file `file` (an index into
/// the caller's list of files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Chunk or block number.
    pub number: u64,
    /// Index of the file holding it.
    pub file: usize,
    /// Offset of its data in that file.
    pub offset: u64,
    /// Bytes of data.
    pub len: u64,
}

/// Most missing ranges listed (all are counted).
pub const MAX_LISTED_GAPS: usize = 64;

/// A scan's pieces in order, with the continuous scan's byte offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanIndex {
    pieces: Vec<Piece>,
    /// End offset of each piece in the continuous scan.
    ends: Vec<u64>,
    duplicates: Vec<u64>,
    missing: Vec<Range<u64>>,
    missing_count: u64,
}

impl ScanIndex {
    /// Put `pieces` in order (by number; among equal numbers the lowest file index is kept).
    pub fn build(mut pieces: Vec<Piece>) -> ScanIndex {
        pieces.sort_by_key(|p| (p.number, p.file, p.offset));
        let mut kept: Vec<Piece> = Vec::with_capacity(pieces.len());
        let mut duplicates = Vec::new();
        for p in pieces {
            if kept.last().is_some_and(|k| k.number == p.number) {
                duplicates.push(p.number);
            } else {
                kept.push(p);
            }
        }
        let (mut missing, mut missing_count, mut expect) = (Vec::new(), 0u64, 0u64);
        for p in &kept {
            if p.number > expect {
                missing_count += p.number - expect;
                if missing.len() < MAX_LISTED_GAPS {
                    missing.push(expect..p.number);
                }
            }
            expect = p.number + 1;
        }
        let mut end = 0u64;
        let ends = kept
            .iter()
            .map(|p| {
                end = end.saturating_add(p.len);
                end
            })
            .collect();
        ScanIndex {
            pieces: kept,
            ends,
            duplicates,
            missing,
            missing_count,
        }
    }

    /// The pieces in order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Bytes of the continuous scan.
    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// No data at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Numbers below the highest one found that no file holds, counted.
    pub fn missing_count(&self) -> u64 {
        self.missing_count
    }

    /// The first [`MAX_LISTED_GAPS`] runs of missing numbers.
    pub fn missing(&self) -> &[Range<u64>] {
        &self.missing
    }

    /// Numbers found more than once (the later copies were left out).
    pub fn duplicates(&self) -> &[u64] {
        &self.duplicates
    }

    /// Offset in the continuous scan where piece `i` starts.
    pub fn start_of(&self, i: usize) -> u64 {
        if i == 0 {
            0
        } else {
            self.ends.get(i - 1).copied().unwrap_or_else(|| self.len())
        }
    }

    /// The piece holding byte `offset` of the continuous scan, and the offset within it; `None`
    /// at or past the end.
    pub fn locate(&self, offset: u64) -> Option<(usize, u64)> {
        // The first piece ending after `offset` (empty pieces end where they start: skipped).
        let i = self.ends.partition_point(|&e| e <= offset);
        (i < self.pieces.len()).then(|| (i, offset - self.start_of(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn piece(number: u64, file: usize, len: u64) -> Piece {
        Piece {
            number,
            file,
            offset: 0,
            len,
        }
    }

    #[test]
    fn pieces_from_several_files_are_interleaved_by_number() {
        // Round robin over three disks, block 4 never written, block 2 found twice.
        let idx = ScanIndex::build(vec![
            piece(3, 0, 10),
            piece(0, 0, 10),
            piece(1, 1, 10),
            piece(5, 2, 7),
            piece(2, 2, 10),
            piece(2, 1, 10),
        ]);
        let order: Vec<(u64, usize)> = idx.pieces().iter().map(|p| (p.number, p.file)).collect();
        assert_eq!(order, vec![(0, 0), (1, 1), (2, 1), (3, 0), (5, 2)]);
        assert_eq!(idx.len(), 47);
        assert_eq!(idx.missing(), std::slice::from_ref(&(4..5)));
        assert_eq!(idx.missing_count(), 1);
        assert_eq!(idx.duplicates(), &[2]);
        assert_eq!(idx.locate(0), Some((0, 0)));
        assert_eq!(idx.locate(9), Some((0, 9)));
        assert_eq!(idx.locate(10), Some((1, 0)));
        assert_eq!(idx.locate(46), Some((4, 6)));
        assert_eq!(idx.locate(47), None);
    }

    #[test]
    fn a_lost_first_piece_and_empty_pieces() {
        let idx = ScanIndex::build(vec![piece(2, 0, 5), piece(3, 0, 0), piece(4, 1, 5)]);
        assert_eq!(idx.missing(), std::slice::from_ref(&(0..2)));
        assert_eq!(idx.locate(5), Some((2, 0)), "the empty piece 3 holds no byte");
        assert!(ScanIndex::build(Vec::new()).is_empty());
    }

    proptest! {
        #[test]
        fn locate_agrees_with_a_concatenation(
            lens in proptest::collection::vec(0u64..20, 1..20),
            drop in proptest::collection::btree_set(0usize..20, 0..5),
        ) {
            let pieces: Vec<Piece> = lens
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(i, &l)| piece(i as u64, i % 3, l))
                .collect();
            // The reference: every byte labelled (piece number, offset inside).
            let mut bytes = Vec::new();
            for p in &pieces {
                for o in 0..p.len {
                    bytes.push((p.number, o));
                }
            }
            let idx = ScanIndex::build(pieces.clone());
            prop_assert_eq!(idx.len(), bytes.len() as u64);
            for (off, &(n, o)) in bytes.iter().enumerate() {
                let (i, within) = idx.locate(off as u64).unwrap();
                prop_assert_eq!((idx.pieces()[i].number, within), (n, o));
            }
            let kept: std::collections::BTreeSet<u64> = pieces.iter().map(|p| p.number).collect();
            let top = kept.iter().next_back().copied().unwrap_or(0);
            let absent = (0..top).filter(|n| !kept.contains(n)).count() as u64;
            prop_assert_eq!(idx.missing_count(), absent);
        }
    }
}

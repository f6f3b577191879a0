//! BLAKE3 of each block and of the whole file, computed from the bytes as they are sent or
//! written, in any order, without reading anything twice. No IO: the session feeds the bytes
//! (and reads back what it is asked to).
//!
//! BLAKE3 hashes 1 KiB chunks into chaining values and merges them pairwise up a binary tree
//! (BLAKE3 paper §2.1). A block is `2^k` bytes at an offset that is a multiple of its size, so
//! it is one subtree of the file's tree (the last block, shorter, is the subtree along the right
//! edge), and:
//!
//! - a block's hash is that subtree's chaining value — or, when the file is a single block, the
//!   file's BLAKE3 hash itself — so both ends agree on it without hashing blocks apart from the
//!   file;
//! - the file's hash is the standard BLAKE3 of the file (what `b3sum` prints), merged from the
//!   block hashes ([`root_of_blocks`]).
//!
//! [`BlockTree`] builds a block's value from pieces that arrive in any order: whole subtrees
//! (a DATA payload whose [`crate::PayloadDigest`] is a chaining value is merged without
//! hashing its bytes again), runs of whole 1 KiB chunks (hashed as aligned subtrees), and partial
//! chunks (kept until their other parts arrive; past a bound, the caller reads them back). The
//! `blake3::hazmat` functions used here panic on a misshapen tree; every offset and length
//! passed to them is derived from the block geometry and checked first.

use std::collections::HashMap;

use blake3::hazmat::{merge_subtrees_non_root, merge_subtrees_root, HasherExt, Mode};

use crate::blocks::Geometry;
use crate::PayloadDigest;

/// BLAKE3 chaining values and hashes.
pub type Cv = [u8; 32];

/// Bytes of a BLAKE3 chunk (the tree's leaf).
const LEAF: u64 = 1024;

/// Partial leaves kept per block before the rest of them are read back from the file instead.
const MAX_PARTIAL_LEAVES: usize = 16_384;

/// A leaf whose bytes arrive in several pieces.
struct Partial {
    buf: Box<[u8; LEAF as usize]>,
    filled: u64,
}

/// One block's hash, built from pieces in any order. See the module docs.
pub struct BlockTree {
    /// First leaf of the block (file offset / 1024).
    start_leaf: u64,
    /// One past the last leaf.
    end_leaf: u64,
    /// File offset of the block's end.
    end: u64,
    /// The block is the whole file: its top is the file's root, finalized as such.
    root: bool,
    /// Complete subtrees not merged yet, by (level, index): leaves `[index << level, (index + 1) << level)`.
    nodes: HashMap<(u32, u64), Cv>,
    partial: HashMap<u64, Partial>,
    /// Leaves given up on (too many partial leaves): read back from the file at the end.
    deferred: Vec<u64>,
    fed: u64,
    len: u64,
    result: Option<Cv>,
}

impl BlockTree {
    /// The tree of block `b` of a file of geometry `g`.
    pub fn new(g: Geometry, b: u64) -> BlockTree {
        let start = b.saturating_mul(g.block_size);
        let len = g.block_len(b);
        let end = start + len;
        BlockTree {
            start_leaf: start / LEAF,
            end_leaf: end.div_ceil(LEAF),
            end,
            root: g.blocks() == 1,
            nodes: HashMap::new(),
            partial: HashMap::new(),
            deferred: Vec::new(),
            fed: 0,
            len,
            result: None,
        }
    }

    /// The block's hash once every byte was fed (and deferred leaves read back).
    pub fn result(&self) -> Option<Cv> {
        self.result
    }

    /// Whether every byte of the block was fed.
    pub fn all_fed(&self) -> bool {
        self.fed >= self.len
    }

    /// Leaves that must be read back from the file and handed to [`BlockTree::feed_leaf`]
    /// (only after [`BlockTree::all_fed`], and only if partial leaves overflowed).
    pub fn deferred(&self) -> &[u64] {
        &self.deferred
    }

    /// Bytes of leaf `k`.
    fn leaf_len(&self, k: u64) -> u64 {
        (self.end - k * LEAF).min(LEAF)
    }

    /// Feed `data` lying at file `offset` (inside the block; each byte once). `digest` is the
    /// payload digest that came with it, if any: a chaining value of exactly this piece is
    /// merged as it is.
    pub fn feed(&mut self, offset: u64, data: &[u8], digest: Option<&PayloadDigest>) {
        let n = data.len() as u64;
        let start = self.start_leaf * LEAF;
        if n == 0 || offset < start || offset + n > self.end {
            return;
        }
        self.fed += n;
        let whole_block = offset == start && offset + n == self.end;
        if let Some(d) = digest.filter(|d| d.subtree_at == Some(offset) && !(self.root && whole_block)) {
            if crate::wire::is_subtree(offset, n) {
                self.insert((n / LEAF).trailing_zeros(), offset / (n / LEAF * LEAF), d.bytes);
                return;
            }
        }
        let mut off = offset;
        let mut rest = data;
        // Head: the end of a leaf that started before this piece.
        if !off.is_multiple_of(LEAF) {
            let k = off / LEAF;
            let take = ((k + 1) * LEAF - off).min(rest.len() as u64) as usize;
            self.add_partial(k, off - k * LEAF, &rest[..take]);
            off += take as u64;
            rest = &rest[take..];
        }
        // Whole leaves (the file's short last leaf counts as whole when it ends the piece).
        let whole_end = if off + rest.len() as u64 == self.end {
            self.end
        } else {
            (off + rest.len() as u64) / LEAF * LEAF
        };
        if whole_end > off {
            let m = (whole_end - off) as usize;
            self.hash_run(off, &rest[..m]);
            off += m as u64;
            rest = &rest[m..];
        }
        // Tail: the start of a leaf that ends after this piece.
        if !rest.is_empty() {
            self.add_partial(off / LEAF, 0, rest);
        }
    }

    /// A deferred leaf `k` read back from the file (exactly its bytes).
    pub fn feed_leaf(&mut self, k: u64, data: &[u8]) {
        if data.len() as u64 == self.leaf_len(k) && self.deferred.contains(&k) {
            self.deferred.retain(|&x| x != k);
            self.hash_run(k * LEAF, data);
        }
    }

    fn add_partial(&mut self, k: u64, at: u64, bytes: &[u8]) {
        if self.deferred.contains(&k) {
            return;
        }
        if !self.partial.contains_key(&k) && self.partial.len() >= MAX_PARTIAL_LEAVES {
            self.deferred.push(k);
            return;
        }
        let p = self.partial.entry(k).or_insert_with(|| Partial {
            buf: Box::new([0; LEAF as usize]),
            filled: 0,
        });
        let at = at as usize;
        let Some(dst) = p.buf.get_mut(at..at + bytes.len()) else {
            return;
        };
        dst.copy_from_slice(bytes);
        p.filled += bytes.len() as u64;
        if p.filled >= self.leaf_len(k) {
            if let Some(p) = self.partial.remove(&k) {
                let len = self.leaf_len(k) as usize;
                self.hash_run(k * LEAF, &p.buf[..len]);
            }
        }
    }

    /// Hash whole leaves starting at leaf-aligned `offset` as maximal aligned subtrees.
    fn hash_run(&mut self, offset: u64, data: &[u8]) {
        let mut k = offset / LEAF;
        let mut rest = data;
        while !rest.is_empty() {
            let leaves_left = (rest.len() as u64).div_ceil(LEAF);
            // The largest power of two that divides k (relative to the tree) and fits.
            let align = if k == 0 { u64::MAX } else { 1u64 << k.trailing_zeros() };
            let mut size = 1u64 << (63 - leaves_left.leading_zeros());
            size = size.min(align);
            let bytes = (size * LEAF).min(rest.len() as u64) as usize;
            let (piece, tail) = rest.split_at(bytes);
            let level = size.trailing_zeros();
            if self.root && k == self.start_leaf && k + size >= self.end_leaf {
                // The whole file in one piece: its root hash.
                self.result = Some(*blake3::hash(piece).as_bytes());
            } else {
                let cv = blake3::Hasher::new()
                    .set_input_offset(k * LEAF)
                    .update(piece)
                    .finalize_non_root();
                self.insert(level, k >> level, cv);
            }
            k += size;
            rest = tail;
        }
    }

    /// Whether node (level, index) covers every leaf of the block.
    fn covers_block(&self, level: u32, index: u64) -> bool {
        let first = index.checked_shl(level).unwrap_or(u64::MAX);
        let end = (index + 1).checked_shl(level).unwrap_or(u64::MAX);
        first <= self.start_leaf && end >= self.end_leaf
    }

    /// Add a complete subtree and merge it up as far as its siblings allow.
    fn insert(&mut self, mut level: u32, mut index: u64, mut cv: Cv) {
        loop {
            if self.covers_block(level, index) {
                self.result = Some(cv);
                self.nodes.clear();
                return;
            }
            let sibling = index ^ 1;
            let sibling_first = sibling.checked_shl(level).unwrap_or(u64::MAX);
            if index.is_multiple_of(2) && sibling_first >= self.end_leaf {
                // Nothing to the right: BLAKE3's left-heavy tree has no node here.
                level += 1;
                index >>= 1;
                continue;
            }
            let Some(other) = self.nodes.remove(&(level, sibling)) else {
                self.nodes.insert((level, index), cv);
                return;
            };
            let (l, r) = if index.is_multiple_of(2) {
                (cv, other)
            } else {
                (other, cv)
            };
            level += 1;
            index >>= 1;
            cv = if self.root && self.covers_block(level, index) {
                *merge_subtrees_root(&l, &r, Mode::Hash).as_bytes()
            } else {
                merge_subtrees_non_root(&l, &r, Mode::Hash)
            };
        }
    }
}

/// The file's BLAKE3 from its block hashes (one per block, in order; see the module docs).
pub fn root_of_blocks(cvs: &[Cv]) -> Cv {
    match cvs {
        [] => *blake3::hash(b"").as_bytes(),
        [one] => *one,
        _ => merge_range(cvs, true),
    }
}

fn merge_range(cvs: &[Cv], top: bool) -> Cv {
    if cvs.len() == 1 {
        return cvs[0];
    }
    // BLAKE3's left subtree holds the largest power of two of blocks below the count.
    let left = 1usize << (usize::BITS - 1 - (cvs.len() - 1).leading_zeros());
    let (l, r) = (merge_range(&cvs[..left], false), merge_range(&cvs[left..], false));
    if top {
        *merge_subtrees_root(&l, &r, Mode::Hash).as_bytes()
    } else {
        merge_subtrees_non_root(&l, &r, Mode::Hash)
    }
}

/// One block hashed in one pass from its bytes in order (a block the other side already holds
/// is read back and hashed this way rather than sent): the same value [`BlockTree`] builds.
pub struct OnePass {
    hasher: blake3::Hasher,
    /// The block is the whole file: its hash is the file's root hash.
    root: bool,
}

impl OnePass {
    /// Hashing block `b` of a file of geometry `g`: feed its bytes from its start with
    /// [`OnePass::update`].
    pub fn new(g: Geometry, b: u64) -> OnePass {
        let root = g.blocks() <= 1;
        let mut hasher = blake3::Hasher::new();
        if !root {
            hasher.set_input_offset(b.saturating_mul(g.block_size));
        }
        OnePass { hasher, root }
    }

    /// The next bytes of the block.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    /// The block's hash.
    pub fn finish(self) -> Cv {
        if self.root {
            *self.hasher.finalize().as_bytes()
        } else {
            self.hasher.finalize_non_root()
        }
    }
}

/// The per-block hashes and the BLAKE3 of a whole file held in memory.
pub fn digest_bytes(bytes: &[u8], g: Geometry) -> (Vec<Cv>, Cv) {
    let blocks: Vec<Cv> = (0..g.blocks())
        .map(|b| {
            let start = b.saturating_mul(g.block_size);
            let end = start + g.block_len(b);
            let mut h = OnePass::new(g, b);
            h.update(bytes.get(start as usize..end as usize).unwrap_or_default());
            h.finish()
        })
        .collect();
    let root = root_of_blocks(&blocks);
    (blocks, root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(seed | 1) ^ (i >> 7)) as u8)
            .collect()
    }

    /// Feed `bytes` cut at `cuts` (sorted offsets), in `order`, with digests where the piece is
    /// a subtree; returns (block hashes, root).
    fn tree_hash(bytes: &[u8], block: u64, cuts: &[u64], order: &[usize], digests: bool) -> (Vec<Cv>, Cv) {
        let g = Geometry {
            size: bytes.len() as u64,
            block_size: block,
        };
        let mut pieces = Vec::new();
        for b in 0..g.blocks() {
            let (s, e) = (b * block, b * block + g.block_len(b));
            let mut at = s;
            for &c in cuts.iter().filter(|&&c| c > s && c < e) {
                pieces.push((b, at, c));
                at = c;
            }
            pieces.push((b, at, e));
        }
        let mut trees: Vec<BlockTree> = (0..g.blocks()).map(|b| BlockTree::new(g, b)).collect();
        // `order` holds sort keys: any permutation of the pieces.
        let mut idx: Vec<usize> = (0..pieces.len()).collect();
        if !order.is_empty() {
            idx.sort_by_key(|&i| (order[i % order.len()], i));
        }
        for i in idx {
            let (b, s, e) = pieces[i];
            let piece = &bytes[s as usize..e as usize];
            let d = digests.then(|| crate::wire::payload_digest(s, piece));
            trees[b as usize].feed(s, piece, d.as_ref());
        }
        let mut blocks = Vec::new();
        for (b, t) in trees.iter_mut().enumerate() {
            let deferred: Vec<u64> = t.deferred().to_vec();
            for k in deferred {
                let e = ((k + 1) * LEAF).min(bytes.len() as u64);
                t.feed_leaf(k, &bytes[(k * LEAF) as usize..e as usize]);
            }
            assert!(t.all_fed(), "block {b} not fully fed");
            blocks.push(t.result().unwrap_or_else(|| panic!("block {b} has no hash")));
        }
        let root = root_of_blocks(&blocks);
        (blocks, root)
    }

    #[test]
    fn whole_files_match_b3sum_and_one_pass_hashes() {
        for len in [
            0usize, 1, 1023, 1024, 1025, 8192, 65_536, 65_537, 200_000, 262_144, 300_001,
        ] {
            let d = data(len, 7);
            let g = Geometry {
                size: len as u64,
                block_size: 65_536,
            };
            let (blocks, root) = digest_bytes(&d, g);
            assert_eq!(root, *blake3::hash(&d).as_bytes(), "len {len}");
            if len > 0 {
                let cuts: Vec<u64> = (1..len as u64).step_by(8192).collect();
                let (b2, r2) = tree_hash(&d, 65_536, &cuts, &[], true);
                assert_eq!((b2, r2), (blocks.clone(), root), "len {len}");
            }
            if g.blocks() == 1 {
                assert_eq!(blocks, vec![root], "a single block's hash is the file's");
            }
        }
    }

    #[test]
    fn too_many_partial_leaves_are_read_back() {
        // 1416-byte pieces of a 64 MiB-block file, every other one first: more partial leaves
        // than kept, so some are read back; the result is the same.
        let d = data(40_000_000, 3);
        let cuts: Vec<u64> = (1416..d.len() as u64).step_by(1416).collect();
        // Sort keys: even pieces first, then odd ones.
        let n = cuts.len() + 1;
        let order: Vec<usize> = (0..n).map(|i| (i % 2) * n + i).collect();
        let (_, root) = tree_hash(&d, 1 << 26, &cuts, &order, false);
        assert_eq!(root, *blake3::hash(&d).as_bytes());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any cut of the file into pieces, fed in any order, with or without digests, gives
        /// the BLAKE3 of the file and the same block hashes as reading it in one pass.
        #[test]
        fn any_order_any_cut_gives_blake3(
            len in 1usize..300_000,
            block_log in 12u32..17,
            seed in any::<u32>(),
            cut_every in prop_oneof![Just(8192u64), Just(1416), Just(1024), 100u64..20_000],
            shuffle in proptest::collection::vec(any::<usize>(), 0..400),
            digests in any::<bool>(),
        ) {
            let d = data(len, seed);
            let block = 1u64 << block_log;
            let cuts: Vec<u64> = (cut_every..len as u64).step_by(cut_every as usize).collect();
            let (blocks, root) = tree_hash(&d, block, &cuts, &shuffle, digests);
            prop_assert_eq!(root, *blake3::hash(&d).as_bytes());
            let g = Geometry { size: len as u64, block_size: block };
            prop_assert_eq!(digest_bytes(&d, g), (blocks, root));
        }
    }
}

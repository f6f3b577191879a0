//! The writer's plan: how a stream of frames is cut into blocks, and which disk takes each.
//!
//! A block holds whole frames (a reader can start at any block; a file cut by a crash still
//! ends on a frame) and, for Mark6, fits the 32-bit size field. Disks are chosen per block: the
//! live disk with the least data still waiting to be written, ties going round robin from the
//! last one chosen — so every disk works, equal disks take turns (the layout jive5ab's
//! round-robin writers produce), and a slow disk is given less. A disk that fails leaves the
//! set for good; the scan goes on on the others.

use thiserror::Error;

use crate::mk6::BLOCK_HEADER_V2_LEN;
use crate::Layout;

/// Why a block size cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PlanError {
    /// Frames of zero bytes.
    #[error("frames of 0 bytes")]
    NoFrame,
    /// A Mark6 block larger than its 32-bit size field.
    #[error("Mark6 blocks hold at most 2 GiB ({0} bytes asked)")]
    TooLarge(u64),
}

/// Default block size of FlexBuff vbs chunks: jive5ab's minimum (mk6info.cc,
/// `mk_default_block_size_map`).
pub const DEFAULT_VBS_BLOCK: u64 = 128 << 20;
/// Default block size of Mark6 blocks: jive5ab's minimum (d-plane writes 10 MB).
pub const DEFAULT_MK6_BLOCK: u64 = 8 << 20;

/// Block sizes for one stream: whole frames, at most the size asked (at least one frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlan {
    frame_len: u64,
    data: u64,
}

impl BlockPlan {
    /// Blocks of at most `block_bytes` of data (whole frames of `frame_len`) in `layout`.
    pub fn new(layout: Layout, block_bytes: u64, frame_len: u64) -> Result<BlockPlan, PlanError> {
        if frame_len == 0 {
            return Err(PlanError::NoFrame);
        }
        let data = (block_bytes / frame_len).max(1) * frame_len;
        if layout == Layout::Mk6 && data + BLOCK_HEADER_V2_LEN as u64 > i32::MAX as u64 {
            return Err(PlanError::TooLarge(block_bytes));
        }
        Ok(BlockPlan { frame_len, data })
    }

    /// Data bytes of a full block.
    pub fn block_data(&self) -> u64 {
        self.data
    }

    /// Frames in a full block.
    pub fn frames_per_block(&self) -> u64 {
        self.data / self.frame_len
    }

    /// Frame length the plan was made for.
    pub fn frame_len(&self) -> u64 {
        self.frame_len
    }
}

/// Chooses the disk of each new block among the live ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigner {
    alive: Vec<bool>,
    next: usize,
}

impl Assigner {
    /// `disks` disks, all live.
    pub fn new(disks: usize) -> Assigner {
        Assigner {
            alive: vec![true; disks],
            next: 0,
        }
    }

    /// Take disk `i` out of the set; `true` if it was live.
    pub fn drop_disk(&mut self, i: usize) -> bool {
        self.alive.get_mut(i).is_some_and(|a| std::mem::replace(a, false))
    }

    /// Whether disk `i` is live.
    pub fn is_alive(&self, i: usize) -> bool {
        self.alive.get(i).copied().unwrap_or(false)
    }

    /// Live disks.
    pub fn alive_count(&self) -> usize {
        self.alive.iter().filter(|a| **a).count()
    }

    /// The disk for the next block given each disk's `backlog` (bytes waiting to be written;
    /// a missing entry counts as none): the live disk with the least, ties round robin.
    /// `None` when no disk is live.
    pub fn pick(&mut self, backlog: &[u64]) -> Option<usize> {
        self.pick_with_room(backlog, &[])
    }

    /// [`Assigner::pick`] among the live disks that have room for the block (`room[i]`; a
    /// missing entry counts as room): a disk too full for it is passed over without a pause
    /// and without a write error (jive5ab issue 30: recorders lost 5–25 % of 623 scans while
    /// they looked for a free disk), and is chosen again once it has room. `None` when no
    /// live disk has room.
    pub fn pick_with_room(&mut self, backlog: &[u64], room: &[bool]) -> Option<usize> {
        let n = self.alive.len();
        let chosen = (0..n)
            .map(|k| (self.next + k) % n)
            .filter(|&i| self.alive[i] && room.get(i).copied().unwrap_or(true))
            .min_by_key(|&i| backlog.get(i).copied().unwrap_or(0))?;
        self.next = (chosen + 1) % n;
        Some(chosen)
    }
}

/// Whether a disk whose writer last saw `free` bytes free after writing `written` bytes in all
/// has room for a block of `block` bytes, when `promised` bytes in all have been or will be
/// given to it (blocks begun, whole): what it has yet to write comes off its free space first,
/// and [`headroom`] stays free for the file system's own blocks and the files' headers.
pub fn has_room(free: u64, written: u64, promised: u64, block: u64) -> bool {
    let to_come = promised.saturating_sub(written);
    free.saturating_sub(to_come) >= block.saturating_add(headroom(block))
}

/// The data bytes of a block that still fit a disk [`has_room`] says is too full for a whole
/// one: what is left after the blocks it was promised and the headroom of a block that size, at
/// most `block`. The recorder writes a short block there rather than drop the frames while a
/// disk has space (a disk set smaller than one default block lost the whole scan).
pub fn room_for_block(free: u64, written: u64, promised: u64, block: u64) -> u64 {
    let to_come = promised.saturating_sub(written);
    let left = free.saturating_sub(to_come).saturating_sub(headroom(0));
    // x + x / 64 <= left, the headroom's share of the block itself.
    (left / 65 * 64).min(block)
}

/// Space kept free on a disk beyond a block's data: 1/64 of the block (the file system's
/// indirect blocks, a chunk file's last partial page) and 256 KiB (directories, Mark6
/// headers).
pub fn headroom(block: u64) -> u64 {
    block / 64 + (256 << 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_short_block_takes_what_a_full_one_leaves_of_a_disk() {
        let block = 128 << 20;
        // 134 MB free: no room for 128 MiB and its headroom, 131 MB for a short block.
        let free = 134_217_728;
        assert!(!has_room(free, 0, 0, block));
        let short = room_for_block(free, 0, 0, block);
        assert!(short > 130_000_000 && short < block, "{short}");
        assert!(has_room(free, 0, 0, short), "the short block has its headroom");
        // Promised but unwritten bytes come off first; nothing left is nothing.
        assert_eq!(room_for_block(free, 0, free, block), 0);
        assert_eq!(room_for_block(1 << 40, 0, 0, block), block);
    }

    #[test]
    fn blocks_hold_whole_frames() {
        let p = BlockPlan::new(Layout::Vbs, 1 << 20, 8032).unwrap();
        assert_eq!(p.block_data(), 130 * 8032);
        assert_eq!(p.frames_per_block(), 130);
        assert_eq!(
            BlockPlan::new(Layout::Vbs, 100, 8032).unwrap().block_data(),
            8032,
            "at least one frame"
        );
        assert_eq!(BlockPlan::new(Layout::Vbs, 1, 0), Err(PlanError::NoFrame));
        assert!(BlockPlan::new(Layout::Mk6, 4 << 30, 8032).is_err());
        assert!(
            BlockPlan::new(Layout::Vbs, 4 << 30, 8032).is_ok(),
            "vbs chunks have no size field"
        );
    }

    #[test]
    fn equal_disks_take_turns_and_a_busy_one_is_passed_over() {
        let mut a = Assigner::new(4);
        let picks: Vec<usize> = (0..8).map(|_| a.pick(&[0; 4]).unwrap()).collect();
        assert_eq!(picks, vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(a.pick(&[5, 0, 9, 9]), Some(1), "the least backlog");
        assert_eq!(a.pick(&[0, 0, 0, 0]), Some(2), "then on from there");
    }

    #[test]
    fn a_dropped_disk_is_never_chosen_again() {
        let mut a = Assigner::new(3);
        assert!(a.drop_disk(1));
        assert!(!a.drop_disk(1), "already out");
        assert!(!a.drop_disk(7), "no such disk");
        let picks: Vec<usize> = (0..4).map(|_| a.pick(&[]).unwrap()).collect();
        assert_eq!(picks, vec![0, 2, 0, 2]);
        a.drop_disk(0);
        a.drop_disk(2);
        assert_eq!(a.alive_count(), 0);
        assert_eq!(a.pick(&[]), None);
    }

    #[test]
    fn a_disk_without_room_is_passed_over_until_it_has_room() {
        let mut a = Assigner::new(3);
        assert_eq!(a.pick_with_room(&[0; 3], &[false, true, true]), Some(1));
        assert_eq!(a.pick_with_room(&[0; 3], &[false, true, true]), Some(2));
        assert_eq!(a.pick_with_room(&[0; 3], &[false, true, true]), Some(1));
        assert_eq!(a.pick_with_room(&[0; 3], &[false, false, false]), None);
        assert_eq!(a.alive_count(), 3, "full is not failed: the disk stays in the set");
        assert_eq!(a.pick_with_room(&[0; 3], &[true, false, false]), Some(0));
    }

    #[test]
    fn room_counts_what_a_disk_has_yet_to_write() {
        let mb = 1u64 << 20;
        // 10 MiB free, 4 MiB promised of which 1 written: 7 MiB left for blocks.
        assert!(has_room(10 * mb, mb, 4 * mb, 6 * mb));
        assert!(!has_room(10 * mb, mb, 4 * mb, 7 * mb), "no headroom left");
        assert!(!has_room(0, 0, 0, 1), "a full disk");
        assert!(has_room(u64::MAX, 0, 0, 128 * mb));
        assert!(!has_room(mb, 0, u64::MAX, 1), "no overflow");
    }

    proptest! {
        #[test]
        fn every_live_disk_works(n in 1usize..9, dropped in proptest::collection::btree_set(0usize..9, 0..8)) {
            let mut a = Assigner::new(n);
            for d in &dropped {
                a.drop_disk(*d);
            }
            let live = a.alive_count();
            let mut count = vec![0u32; n];
            for _ in 0..live * 5 {
                count[a.pick(&[]).unwrap()] += 1;
            }
            for (i, c) in count.iter().enumerate() {
                prop_assert_eq!(*c, if a.is_alive(i) { 5 } else { 0 });
            }
        }
    }
}

//! A run of consecutive sequence numbers — what a NAK names as missing — shared by the stream
//! protocol (frames) and the transfer protocol (chunks), whose wire formats each encode it.
//!
//! ```
//! use seqrange::SeqRange;
//! let r = SeqRange { first: 10, count: 3 };
//! assert_eq!(r.end(), 13);
//! assert!(r.contains(12) && !r.contains(13));
//! assert_eq!(r.iter().collect::<Vec<_>>(), vec![10, 11, 12]);
//! ```

use serde::{Deserialize, Serialize};

/// `count` consecutive sequence numbers from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqRange {
    /// First sequence number of the run.
    pub first: u64,
    /// How many (a NAK never carries 0).
    pub count: u32,
}

impl SeqRange {
    /// One past the last number of the run (saturating at `u64::MAX`).
    pub fn end(&self) -> u64 {
        self.first.saturating_add(u64::from(self.count))
    }

    /// Whether `seq` is in the run.
    pub fn contains(&self, seq: u64) -> bool {
        (self.first..self.end()).contains(&seq)
    }

    /// The numbers of the run, in order.
    pub fn iter(&self) -> std::ops::Range<u64> {
        self.first..self.end()
    }
}

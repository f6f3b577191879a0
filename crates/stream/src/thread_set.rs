//! A set of VDIF thread ids: what a board sends, what a rate check counts over. A leaf the
//! receiver, the relay and the rate check all use.

/// A set of VDIF thread ids (10 bits: VDIF 1.1.1 §3, word 3), as a bitmap: one `insert` per
/// frame on the data path costs a shift and an or.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ThreadSet([u64; 16]);

impl ThreadSet {
    /// Add thread `id` (ids past 10 bits are not VDIF thread ids and are ignored).
    pub(crate) fn insert(&mut self, id: u16) {
        let id = usize::from(id);
        if let Some(w) = self.0.get_mut(id / 64) {
            *w |= 1 << (id % 64);
        }
    }

    /// Whether thread `id` is in the set.
    pub(crate) fn contains(&self, id: u16) -> bool {
        let id = usize::from(id);
        self.0.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Whether the two sets share a thread.
    pub(crate) fn overlaps(&self, other: &ThreadSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }

    /// Both sets.
    pub(crate) fn union(&self, other: &ThreadSet) -> ThreadSet {
        let mut u = *self;
        for (a, b) in u.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        u
    }

    /// How many threads.
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The ids, ascending.
    pub(crate) fn ids(&self) -> Vec<u16> {
        (0..1024u16).filter(|&id| self.contains(id)).collect()
    }
}

impl FromIterator<u16> for ThreadSet {
    fn from_iter<I: IntoIterator<Item = u16>>(ids: I) -> Self {
        let mut s = ThreadSet::default();
        for id in ids {
            s.insert(id);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_sets_hold_every_vdif_thread_id_and_ignore_others() {
        let s: ThreadSet = [0u16, 63, 64, 1023, 1024, u16::MAX].into_iter().collect();
        assert_eq!(s.ids(), vec![0, 63, 64, 1023]);
        assert_eq!(s.len(), 4);
        let t: ThreadSet = [64u16].into_iter().collect();
        assert!(s.overlaps(&t));
        let u: ThreadSet = [1u16, 2].into_iter().collect();
        assert!(!s.overlaps(&u));
        assert_eq!(s.union(&u).len(), 6);
    }
}

//! A windowed minimum or maximum (the bandwidth, RTT and one-way-delay filters).

use std::collections::VecDeque;

/// Windowed extremum over a monotonic deque: exact, O(1) amortised. The latest sample is never
/// expired, so a model survives a silence.
#[derive(Debug, Clone, Default)]
pub(super) struct Windowed<K, V> {
    samples: VecDeque<(K, V)>,
    max: bool,
}

impl<K: Copy + PartialOrd, V: Copy + PartialOrd> Windowed<K, V> {
    pub(super) fn new(max: bool) -> Self {
        Self {
            samples: VecDeque::new(),
            max,
        }
    }

    pub(super) fn push(&mut self, key: K, value: V) {
        while let Some(&(_, v)) = self.samples.back() {
            let dominated = if self.max { v <= value } else { v >= value };
            if !dominated {
                break;
            }
            self.samples.pop_back();
        }
        self.samples.push_back((key, value));
    }

    /// Drops samples with key < `oldest`, keeping at least one.
    pub(super) fn expire(&mut self, oldest: K) {
        while self.samples.len() > 1 && self.samples.front().is_some_and(|&(k, _)| k < oldest) {
            self.samples.pop_front();
        }
    }

    pub(super) fn get(&self) -> Option<V> {
        self.samples.front().map(|&(_, v)| v)
    }

    pub(super) fn clear(&mut self) {
        self.samples.clear();
    }
}

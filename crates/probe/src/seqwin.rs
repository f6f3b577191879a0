//! Sequence-number accounting in bounded memory: duplicates, RFC 4737 reordering, loss runs and
//! loss intervals, for trials of 1e9 packets and more.
//!
//! State is a ring bitmap of the last `W` sequence numbers below the highest one seen, plus the
//! list of "new highest" arrivals still inside that window. A sequence number is *finalised* when
//! it falls out of the bottom of the window (or at [`SeqTracker::finish`]): only then is it known
//! to be lost, so loss runs and intervals are computed in sequence order, exactly once per number.
//!
//! RFC 4737 §3.3: a packet is reordered when its sequence number is below `NextExp`, the highest
//! seen plus one. §4.2.1: its reordering extent is `i − j`, where `i` is its arrival position and
//! `j` the position of the earliest-arriving packet with a larger sequence number. That earliest
//! packet was necessarily a new highest when it arrived (everything before it was smaller), so `j` is
//! found by binary search in the monotone list of new-highest arrivals: no per-packet history.

use std::collections::VecDeque;

use histogram::Hist;

/// Reordering metrics of one reordered packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reorder {
    /// RFC 4737 §4.2.1 reordering extent, in arrival positions.
    pub extent: u64,
    /// RFC 4737 §4.3 late-time offset: arrival time minus that of packet `j`, ns.
    pub late_ns: u64,
    /// `NextExp − seq`: how many sequence numbers behind the stream it arrived.
    pub displacement: u64,
}

/// What one valid sequence number did to the accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqEvent {
    /// First copy, in order (`seq >= NextExp`).
    InOrder,
    /// First copy, but `seq < NextExp` (RFC 4737 reordered).
    Reordered(Reorder),
    /// Already received (still inside the window).
    Duplicate,
    /// Below the window: too old to tell a late packet from a duplicate; already counted lost.
    TooLate,
    /// Absurdly far ahead (beyond the announced count or `max_jump` past the highest); ignored so
    /// that one forged or corrupt packet cannot inflate the loss count.
    OutOfWindow,
}

#[derive(Clone, Copy, Debug)]
struct Head {
    seq: u64,
    pos: u64,
    recv_ns: u64,
}

/// Bounded-memory sequence tracker.
#[derive(Clone, Debug)]
pub struct SeqTracker {
    bits: Vec<u64>,
    mask: u64,
    max_jump: u64,
    limit: Option<u64>,
    highest: Option<u64>,
    unique: u64,
    pos: u64,
    heads: VecDeque<Head>,
    finalized_upto: u64,
    lost: u64,
    last_lost: Option<(u64, u64)>,
    run_len: u64,
    /// Lengths of runs of consecutive lost sequence numbers.
    pub runs: Hist,
    /// Sequence distance between successive lost packets.
    pub gaps_packets: Hist,
    /// Time between the detections of successive lost packets, ns.
    pub gaps_ns: Hist,
}

impl SeqTracker {
    /// `window`: bits of duplicate/reorder memory (rounded up to a power of two, at least 64);
    /// `max_jump`: largest accepted step above the highest seen; `limit`: announced packet count.
    pub fn new(window: u64, max_jump: u64, limit: Option<u64>) -> Self {
        let w = window.clamp(64, 1 << 32).next_power_of_two();
        SeqTracker {
            bits: vec![0; (w / 64) as usize],
            mask: w - 1,
            max_jump,
            limit,
            highest: None,
            unique: 0,
            pos: 0,
            heads: VecDeque::new(),
            finalized_upto: 0,
            lost: 0,
            last_lost: None,
            run_len: 0,
            runs: Hist::new(),
            gaps_packets: Hist::new(),
            gaps_ns: Hist::new(),
        }
    }

    /// Window size in sequence numbers.
    pub fn window(&self) -> u64 {
        self.mask + 1
    }

    /// Highest sequence number accepted (or reached by [`SeqTracker::finish`]).
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Distinct sequence numbers received inside the window.
    pub fn unique(&self) -> u64 {
        self.unique
    }

    /// Sequence numbers finalised as lost so far (all of them after `finish`).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    fn bottom(&self) -> u64 {
        self.highest.map_or(0, |h| (h + 1).saturating_sub(self.window()))
    }

    fn slot(&self, seq: u64) -> (usize, u64) {
        let i = seq & self.mask;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Account for one valid sequence number arriving at `recv_ns`.
    pub fn on_seq(&mut self, seq: u64, recv_ns: u64) -> SeqEvent {
        if self.limit.is_some_and(|c| seq >= c) {
            return SeqEvent::OutOfWindow;
        }
        match self.highest {
            // Without an announced count the first packet must be near 0 (sequences start at 0);
            // with one, the count already bounds it and a late-started receiver still works.
            None if self.limit.is_none() && seq > self.max_jump => SeqEvent::OutOfWindow,
            None => {
                self.advance(seq, recv_ns, true);
                SeqEvent::InOrder
            }
            Some(h) if seq > h => {
                if seq - h > self.max_jump {
                    return SeqEvent::OutOfWindow;
                }
                self.advance(seq, recv_ns, true);
                SeqEvent::InOrder
            }
            Some(h) => {
                if seq < self.bottom() {
                    return SeqEvent::TooLate;
                }
                let (w, b) = self.slot(seq);
                if self.bits[w] & b != 0 {
                    return SeqEvent::Duplicate;
                }
                self.bits[w] |= b;
                self.unique += 1;
                self.pos += 1;
                let k = self.heads.partition_point(|x| x.seq <= seq);
                let (extent, late_ns) = match self.heads.get(k) {
                    Some(j) => (self.pos - j.pos, recv_ns.saturating_sub(j.recv_ns)),
                    // Unreachable while heads cover the window; report no extent rather than panic.
                    None => (0, 0),
                };
                SeqEvent::Reordered(Reorder {
                    extent,
                    late_ns,
                    displacement: h + 1 - seq,
                })
            }
        }
    }

    /// Move the highest sequence number to `new_h`, finalising what leaves the window.
    /// `mark`: `new_h` itself arrived (false when [`SeqTracker::finish`] extends to the count).
    fn advance(&mut self, new_h: u64, recv_ns: u64, mark: bool) {
        if mark {
            self.pos += 1;
            self.unique += 1;
            self.heads.push_back(Head {
                seq: new_h,
                pos: self.pos,
                recv_ns,
            });
        }
        let old_top = self.highest.map_or(0, |h| h + 1);
        let new_bottom = (new_h + 1).saturating_sub(self.window());
        self.finalize_range(self.finalized_upto, new_bottom.min(old_top), recv_ns);
        // Numbers between the old highest and the new bottom were never seen: one missing block.
        let start = self.finalized_upto.max(old_top);
        if new_bottom > start {
            self.lost_block(start, new_bottom - start, recv_ns);
        }
        self.finalized_upto = self.finalized_upto.max(new_bottom);
        while self.heads.front().is_some_and(|x| x.seq < self.finalized_upto) {
            self.heads.pop_front();
        }
        self.highest = Some(new_h);
        if mark {
            let (w, b) = self.slot(new_h);
            self.bits[w] |= b;
        }
    }

    /// Finalise `[a, b)`, all inside the bitmap: clear their bits, record the missing ones.
    fn finalize_range(&mut self, a: u64, b: u64, fallback_ns: u64) {
        let mut s = a;
        while s < b {
            let (w, bit) = self.slot(s);
            if s.is_multiple_of(64) && b - s >= 64 {
                // Whole word at once; the common no-loss case is one compare.
                let word = std::mem::take(&mut self.bits[w]);
                let mut missing = !word;
                while missing != 0 {
                    let q = s + u64::from(missing.trailing_zeros());
                    let t = self.detect_ns(q, fallback_ns);
                    self.lost_block(q, 1, t);
                    missing &= missing - 1;
                }
                s += 64;
            } else {
                if self.bits[w] & bit == 0 {
                    let t = self.detect_ns(s, fallback_ns);
                    self.lost_block(s, 1, t);
                }
                self.bits[w] &= !bit;
                s += 1;
            }
        }
    }

    /// When the loss of `q` became visible: arrival of the first packet numbered above it.
    fn detect_ns(&self, q: u64, fallback_ns: u64) -> u64 {
        let k = self.heads.partition_point(|x| x.seq <= q);
        self.heads.get(k).map_or(fallback_ns, |h| h.recv_ns)
    }

    /// Record `len` consecutive lost numbers starting at `start`, detected at `t`.
    fn lost_block(&mut self, start: u64, len: u64, t: u64) {
        if len == 0 {
            return;
        }
        match self.last_lost {
            Some((lq, lt)) => {
                self.gaps_packets.record(start - lq);
                self.gaps_ns.record(t.saturating_sub(lt));
                if start == lq + 1 {
                    self.run_len += 1;
                } else {
                    self.runs.record(self.run_len);
                    self.run_len = 1;
                }
            }
            None => self.run_len = 1,
        }
        // The rest of the block: consecutive numbers, interval 1 packet, detected together.
        self.gaps_packets.record_n(1, len - 1);
        self.gaps_ns.record_n(0, len - 1);
        self.run_len += len - 1;
        self.lost += len;
        self.last_lost = Some((start + len - 1, t));
    }

    /// End of trial. `sent`: number of packets the sender reports sending (from `done`), so that
    /// losses after the last arrival are counted; `now_ns`: time used for their detection.
    /// After this, `unique + lost == highest + 1`.
    pub fn finish(&mut self, sent: Option<u64>, now_ns: u64) {
        let top = self.highest.map_or(0, |h| h + 1);
        if let Some(c) = sent.filter(|&c| c > top) {
            self.advance(c - 1, now_ns, false);
        }
        if let Some(h) = self.highest {
            self.finalize_range(self.finalized_upto, h + 1, now_ns);
            self.finalized_upto = h + 1;
        }
        if self.run_len > 0 {
            self.runs.record(self.run_len);
            self.run_len = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut SeqTracker, seqs: &[u64]) -> Vec<SeqEvent> {
        seqs.iter()
            .enumerate()
            .map(|(i, &s)| t.on_seq(s, i as u64 * 10))
            .collect()
    }

    #[test]
    fn rfc4737_example_extent() {
        // Arrival order 1,2,3,5,6,4 (RFC 4737 §4.2 style): packet 4 is reordered with extent 2
        // (arrival position 6 minus position 4 of packet 5, the first larger one to arrive).
        let mut t = SeqTracker::new(64, 1 << 20, None);
        let ev = feed(&mut t, &[1, 2, 3, 5, 6, 4]);
        assert_eq!(
            ev[5],
            SeqEvent::Reordered(Reorder {
                extent: 2,
                late_ns: 20,
                displacement: 3
            })
        );
        t.finish(None, 100);
        assert_eq!((t.unique(), t.lost()), (6, 1)); // seq 0 never came
    }

    #[test]
    fn duplicates_too_late_and_jumps() {
        let mut t = SeqTracker::new(64, 1000, None);
        assert_eq!(t.window(), 64);
        let ev = feed(&mut t, &[0, 0, 200, 5, 2000, 201]);
        assert_eq!(
            ev,
            vec![
                SeqEvent::InOrder,
                SeqEvent::Duplicate,
                SeqEvent::InOrder,
                SeqEvent::TooLate,
                SeqEvent::OutOfWindow,
                SeqEvent::InOrder
            ]
        );
        t.finish(Some(205), 1000);
        assert_eq!(t.highest(), Some(204));
        assert_eq!(t.unique() + t.lost(), 205);
        // Runs: 1..=199 then 202..=204.
        assert_eq!(t.runs.count(), 2);
        assert_eq!(t.runs.max(), Some(199));
    }

    #[test]
    fn loss_intervals_in_time_use_detection_times() {
        // 1 is detected lost when 2 arrives (t = 10); 3 and 4 when 5 arrives (t = 20).
        let mut t = SeqTracker::new(64, 1 << 20, None);
        feed(&mut t, &[0, 2, 5]);
        t.finish(Some(6), 99);
        assert_eq!(t.lost(), 3);
        let g = t.gaps_ns.summary(16);
        assert_eq!((g.count, g.min, g.max), (2, Some(0), Some(10)));
        let r = t.runs.summary(16);
        assert_eq!((r.count, r.min, r.max), (2, Some(1), Some(2)));
    }

    #[test]
    fn tail_loss_counted_at_finish() {
        let mut t = SeqTracker::new(1 << 16, 1 << 20, Some(1_000_000));
        feed(&mut t, &[0, 1, 2]);
        t.finish(Some(1_000_000), 5);
        assert_eq!(t.lost(), 999_997);
        assert_eq!(t.runs.count(), 1);
    }
}

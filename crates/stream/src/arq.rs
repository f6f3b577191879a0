//! Deadline-bounded retransmission for real-time VDIF.
//!
//! Unlike a reliable transfer, a frame is only worth repeating while it can still reach the
//! receiver before the receiver's window writes its time slot (then it is filled invalid for
//! good). The receiver therefore asks only for frames whose slot is more than one round trip
//! ahead of its write position, re-asks after 1.5 RTT, and gives up at the deadline; the sender
//! keeps only the last latency window of frames and spends at most a set share of the data rate
//! on repeats, so ARQ can never starve the live stream.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::wire::{Nak, SeqRange, MAX_NAK_RANGES};

/// Shortest time between two requests for the same frame.
const MIN_RETRY: Duration = Duration::from_millis(5);
/// Most times a sender sends one frame again (see [`RetransmitBuffer`]).
pub const MAX_REPEATS: u8 = 2;

/// Receiver-side ARQ settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NakConfig {
    /// Stream index the NAKs are for.
    pub stream: u16,
    /// Round-trip guess until the first measurement.
    pub initial_rtt: Duration,
    /// Wait this long after a gap is seen before asking (reordering settles first).
    pub reorder_grace: Duration,
    /// Most missing frames tracked (the window size is a natural bound).
    pub max_tracked: usize,
}

/// Receiver-side ARQ counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NakStats {
    /// Frames seen missing (sequence gaps).
    pub missing_seen: u64,
    /// Frames asked for at least once.
    pub requested: u64,
    /// Requests sent, counting repeats.
    pub requests: u64,
    /// NAK datagrams sent.
    pub nak_datagrams: u64,
    /// NAK bytes sent.
    pub nak_bytes: u64,
    /// Missing frames that arrived after being asked for.
    pub recovered: u64,
    /// Missing frames that arrived late on their own, before or without a request.
    pub arrived_unasked: u64,
    /// Missing frames whose slot was written before they came (filled invalid).
    pub expired: u64,
    /// Smoothed round trip from request to repaired frame, seconds.
    pub srtt_s: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
struct Missing {
    slot: u64,
    seen: Instant,
    last_request: Option<Instant>,
    tries: u32,
}

/// Tracks sequence gaps of one stream and decides what to ask for, when.
#[derive(Debug, Clone)]
pub struct NakScheduler {
    cfg: NakConfig,
    next_seq: Option<u64>,
    /// slot − seq of the newest in-order frame: frames are sent one per slot, in order.
    slot_offset: i128,
    missing: BTreeMap<u64, Missing>,
    srtt: Option<Duration>,
    stats: NakStats,
}

impl NakScheduler {
    /// A scheduler with nothing missing yet.
    pub fn new(cfg: NakConfig) -> Self {
        NakScheduler {
            cfg,
            next_seq: None,
            slot_offset: 0,
            missing: BTreeMap::new(),
            srtt: None,
            stats: NakStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> NakStats {
        NakStats {
            srtt_s: self.srtt.map(|d| d.as_secs_f64()),
            ..self.stats
        }
    }

    /// Frames currently missing and still tracked.
    pub fn outstanding(&self) -> usize {
        self.missing.len()
    }

    fn rtt(&self) -> Duration {
        self.srtt.unwrap_or(self.cfg.initial_rtt)
    }

    /// A frame with sequence number `seq` for time slot `slot` was stored by the window.
    pub fn on_frame(&mut self, now: Instant, seq: u64, slot: u64) {
        let Some(next) = self.next_seq else {
            self.next_seq = Some(seq.wrapping_add(1));
            self.slot_offset = i128::from(slot) - i128::from(seq);
            return;
        };
        if seq >= next {
            // Only the newest `max_tracked` of a long gap can still be repaired in time.
            let from = next.max(seq.saturating_sub(self.cfg.max_tracked as u64));
            self.stats.missing_seen += seq - next;
            for s in from..seq {
                let slot = i128::from(s) + self.slot_offset;
                self.missing.insert(
                    s,
                    Missing {
                        slot: slot.max(0) as u64,
                        seen: now,
                        last_request: None,
                        tries: 0,
                    },
                );
            }
            while self.missing.len() > self.cfg.max_tracked {
                if let Some((&s, _)) = self.missing.iter().next() {
                    self.missing.remove(&s);
                    self.stats.expired += 1;
                }
            }
            self.next_seq = Some(seq + 1);
            self.slot_offset = i128::from(slot) - i128::from(seq);
        } else if let Some(m) = self.missing.remove(&seq) {
            match m.last_request {
                Some(asked) => {
                    self.stats.recovered += 1;
                    // Karn: only unambiguous samples (one request) measure the round trip.
                    if m.tries == 1 {
                        let sample = now.saturating_duration_since(asked);
                        self.srtt = Some(match self.srtt {
                            None => sample,
                            Some(s) => (s * 7 + sample) / 8,
                        });
                    }
                }
                None => self.stats.arrived_unasked += 1,
            }
        }
    }

    /// The window has written every slot below `base`: what is still missing there is lost for
    /// good (counted as expired).
    pub fn expire_before(&mut self, base: u64) {
        let before = self.missing.len();
        self.missing.retain(|_, m| m.slot >= base);
        self.stats.expired += (before - self.missing.len()) as u64;
    }

    /// Another sender took the stream over (a restart numbers its frames anew): the old
    /// numbering means nothing now, and what it still missed can no longer be asked for (counted
    /// as expired). Counters and the round-trip estimate are kept.
    pub fn restart(&mut self) {
        self.stats.expired += self.missing.len() as u64;
        self.missing.clear();
        self.next_seq = None;
    }

    /// The window has written every slot below `base`, and at the current arrival rate writes
    /// slot `front` now (`newest − window + 1`, which is below `base` while the window fills);
    /// `slots_per_second` converts the round trip to slots. Returns the NAK to send now, if any.
    pub fn poll(&mut self, now: Instant, base: u64, front: u64, slots_per_second: f64) -> Option<Nak> {
        let rtt = self.rtt();
        let margin = (rtt.as_secs_f64() * slots_per_second).ceil() as u64;
        self.expire_before(base);
        // Never re-ask sooner than the sender can answer: it serves NAKs every millisecond, and
        // on a LAN the measured round trip is far below that.
        let retry = (rtt * 3 / 2).max(MIN_RETRY);
        let mut ranges: Vec<SeqRange> = Vec::new();
        for (&seq, m) in self.missing.iter_mut() {
            if ranges.len() == MAX_NAK_RANGES && ranges.last().is_none_or(|r| r.first + u64::from(r.count) != seq) {
                break;
            }
            let due = match m.last_request {
                None => now.saturating_duration_since(m.seen) >= self.cfg.reorder_grace,
                Some(t) => now.saturating_duration_since(t) >= retry,
            };
            // A repeat that cannot arrive before the slot is written is wasted bandwidth.
            if !due || m.slot < front + margin {
                continue;
            }
            if m.tries == 0 {
                self.stats.requested += 1;
            }
            m.tries += 1;
            m.last_request = Some(now);
            self.stats.requests += 1;
            match ranges.last_mut() {
                Some(r) if r.first + u64::from(r.count) == seq && r.count < crate::wire::MAX_NAK_RANGE_LEN => {
                    r.count += 1
                }
                _ => ranges.push(SeqRange { first: seq, count: 1 }),
            }
        }
        if ranges.is_empty() {
            return None;
        }
        let nak = Nak {
            stream: self.cfg.stream,
            ranges,
        };
        self.stats.nak_datagrams += 1;
        self.stats.nak_bytes += nak.encoded_len() as u64;
        Some(nak)
    }
}

/// Sender-side ARQ counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetransmitStats {
    /// Valid NAKs received.
    pub naks: u64,
    /// Frames asked for.
    pub asked: u64,
    /// Frames sent again.
    pub resent: u64,
    /// Bytes sent again (datagram bytes).
    pub resent_bytes: u64,
    /// Asked-for frames no longer kept (older than the latency window) or never sent.
    pub unavailable: u64,
    /// Asked-for frames dropped because the repeat budget was spent.
    pub over_budget: u64,
    /// Asked-for frames not sent again because they were sent again [`MAX_REPEATS`] times already.
    #[serde(default)]
    pub repeated_already: u64,
}

impl RetransmitStats {
    /// Add `other`'s counts (totals over stations).
    pub fn add(&mut self, other: &RetransmitStats) {
        self.naks += other.naks;
        self.asked += other.asked;
        self.resent += other.resent;
        self.resent_bytes += other.resent_bytes;
        self.unavailable += other.unavailable;
        self.over_budget += other.over_budget;
        self.repeated_already += other.repeated_already;
    }
}

/// The sender's copy of the last latency window of datagrams, and the queue of repeats.
///
/// NAKs are not authenticated: anyone who can send from the receiver's address can ask for
/// anything. So a NAK costs the sender time in proportion to its ranges and to the repeats the
/// budget can pay for, never to the frames it names (a 780-byte NAK may name 4.2 million), a
/// frame asked for twice is queued once, and a frame is sent again [`MAX_REPEATS`] times at most:
/// a NAK costs at most the frames it asks for that were sent and not repeated that often yet.
/// (Forged NAKs repeated 1000 times a second had the same frames sent again and again, each
/// within the budget.) Twice, not once: a real receiver asks again when the repeat was lost
/// too (sent once at most, 98.96 % of the frames lost at 1 % loss were recovered, not 99 %).
#[derive(Debug)]
pub struct RetransmitBuffer {
    /// Datagrams by sequence number, oldest first; `first_seq` is the sequence of `kept[0]`,
    /// each with the times it was sent again.
    kept: VecDeque<(Vec<u8>, u8)>,
    first_seq: u64,
    capacity: usize,
    /// Repeats to send, oldest frame first, each once.
    queue: BTreeSet<u64>,
    /// Repeat budget in datagrams, refilled by `share` per new datagram, capped at `burst`.
    budget: f64,
    share: f64,
    burst: f64,
    stats: RetransmitStats,
}

impl RetransmitBuffer {
    /// Keep the last `capacity` datagrams; repeats may use up to `share` (e.g. 0.1) of the
    /// datagrams sent.
    pub fn new(capacity: usize, share: f64) -> Self {
        RetransmitBuffer {
            kept: VecDeque::with_capacity(capacity.min(1 << 20)),
            first_seq: 0,
            capacity: capacity.max(1),
            queue: BTreeSet::new(),
            budget: 0.0,
            share: share.max(0.0),
            burst: 256.0,
            stats: RetransmitStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &RetransmitStats {
        &self.stats
    }

    /// Datagram `seq` (the original, retransmit flag clear) was just sent.
    pub fn on_sent(&mut self, seq: u64, datagram: &[u8]) {
        if self.kept.is_empty() || seq != self.first_seq + self.kept.len() as u64 {
            self.kept.clear();
            self.first_seq = seq;
        }
        if self.kept.len() == self.capacity {
            if let Some((mut old, _)) = self.kept.pop_front() {
                old.clear();
                old.extend_from_slice(datagram);
                self.kept.push_back((old, 0));
            }
            self.first_seq += 1;
        } else {
            self.kept.push_back((datagram.to_vec(), 0));
        }
        self.budget = (self.budget + self.share).min(self.burst);
    }

    /// Queue what a NAK asks for, as far as the budget can pay: frames no longer kept are
    /// counted as unavailable, those beyond the budget as over budget, both without visiting
    /// them one by one.
    pub fn on_nak(&mut self, nak: &Nak) {
        self.stats.naks += 1;
        let end = self.first_seq + self.kept.len() as u64;
        // Frames visited for this NAK: new ones are bounded by the budget, those already queued
        // by the queue (itself within the budget), so twice the burst is never reached by a
        // real receiver's NAK.
        let mut steps_left = 2 * self.burst as u64;
        for r in &nak.ranges {
            let count = u64::from(r.count);
            self.stats.asked += count;
            let from = r.first.max(self.first_seq);
            let to = r.first.saturating_add(count).min(end);
            self.stats.unavailable += count - to.saturating_sub(from);
            let mut seq = from;
            while seq < to {
                // Whole repeats the budget pays for now (`next_repeat` drops the rest anyway).
                if self.queue.len() as f64 + 1.0 > self.budget.floor() || steps_left == 0 {
                    self.stats.over_budget += to - seq;
                    break;
                }
                steps_left -= 1;
                if self.kept[(seq - self.first_seq) as usize].1 >= MAX_REPEATS {
                    self.stats.repeated_already += 1;
                } else {
                    self.queue.insert(seq);
                }
                seq += 1;
            }
        }
    }

    /// Repeats waiting.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Next repeat to send, with the retransmit flag to be set by the caller's framing; `None`
    /// when nothing is queued or the budget is spent.
    pub fn next_repeat(&mut self) -> Option<&[u8]> {
        while let Some(seq) = self.queue.pop_first() {
            if seq < self.first_seq || seq >= self.first_seq + self.kept.len() as u64 {
                self.stats.unavailable += 1;
                continue;
            }
            if self.budget < 1.0 {
                self.stats.over_budget += 1 + self.queue.len() as u64;
                self.queue.clear();
                return None;
            }
            self.budget -= 1.0;
            let (d, repeated) = &mut self.kept[(seq - self.first_seq) as usize];
            *repeated = repeated.saturating_add(1);
            self.stats.resent += 1;
            self.stats.resent_bytes += d.len() as u64;
            return Some(d);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> NakConfig {
        NakConfig {
            stream: 0,
            initial_rtt: Duration::from_millis(10),
            reorder_grace: Duration::from_millis(1),
            max_tracked: 1000,
        }
    }

    #[test]
    fn asks_once_then_retries_then_expires() {
        let t0 = Instant::now();
        let mut n = NakScheduler::new(cfg());
        n.on_frame(t0, 100, 1000);
        n.on_frame(t0, 103, 1003); // 101, 102 missing
        assert!(n.poll(t0, 900, 900, 1000.0).is_none(), "reorder grace first");
        let nak = n.poll(t0 + Duration::from_millis(2), 900, 900, 1000.0).unwrap();
        assert_eq!(nak.ranges, vec![SeqRange { first: 101, count: 2 }]);
        assert!(
            n.poll(t0 + Duration::from_millis(5), 900, 900, 1000.0).is_none(),
            "not before 1.5 RTT"
        );
        n.on_frame(t0 + Duration::from_millis(12), 101, 1001);
        assert_eq!(n.stats().recovered, 1);
        assert!((n.stats().srtt_s.unwrap() - 0.010).abs() < 1e-9);
        let again = n.poll(t0 + Duration::from_millis(20), 900, 900, 1000.0).unwrap();
        assert_eq!(again.ranges, vec![SeqRange { first: 102, count: 1 }]);
        // The window wrote slot 1002: give up.
        assert!(n.poll(t0 + Duration::from_millis(60), 1003, 1003, 1000.0).is_none());
        assert_eq!(n.stats().expired, 1);
        assert_eq!(n.outstanding(), 0);
    }

    #[test]
    fn does_not_ask_what_cannot_arrive_in_time() {
        let t0 = Instant::now();
        let mut n = NakScheduler::new(cfg());
        n.on_frame(t0, 0, 0);
        n.on_frame(t0, 2, 2);
        // 10 ms RTT at 1000 slots/s = 10 slots of margin; writing slot 0 now → slot 1 is too close.
        assert!(n.poll(t0 + Duration::from_millis(2), 0, 0, 1000.0).is_none());
        assert!(n.poll(t0 + Duration::from_millis(2), 0, 0, 10.0).is_some());
    }

    #[test]
    fn buffer_resends_within_window_and_budget() {
        let mut b = RetransmitBuffer::new(4, 1.0);
        for seq in 10..16u64 {
            b.on_sent(seq, &[seq as u8]);
        }
        // Kept: 12..16.
        b.on_nak(&Nak {
            stream: 0,
            ranges: vec![SeqRange { first: 11, count: 3 }],
        });
        assert_eq!(b.stats().unavailable, 1);
        assert_eq!(b.next_repeat(), Some(&[12u8][..]));
        assert_eq!(b.next_repeat(), Some(&[13u8][..]));
        assert_eq!(b.next_repeat(), None);
        assert_eq!(b.stats().resent, 2);
        let mut tight = RetransmitBuffer::new(100, 0.01);
        for seq in 0..100u64 {
            tight.on_sent(seq, &[0]);
        }
        tight.on_nak(&Nak {
            stream: 0,
            ranges: vec![SeqRange { first: 0, count: 10 }],
        });
        assert!(tight.next_repeat().is_some());
        assert!(tight.next_repeat().is_none());
        assert_eq!(tight.stats().over_budget, 9);
    }

    #[test]
    fn a_frame_is_sent_again_twice_at_most_however_often_it_is_asked_for() {
        let mut b = RetransmitBuffer::new(100, 1.0);
        for seq in 0..100u64 {
            b.on_sent(seq, &[seq as u8]);
        }
        let nak = Nak {
            stream: 0,
            ranges: vec![SeqRange { first: 40, count: 3 }],
        };
        let mut resent = Vec::new();
        for _ in 0..10 {
            b.on_nak(&nak);
            while let Some(d) = b.next_repeat() {
                resent.push(d[0]);
            }
        }
        resent.sort_unstable();
        assert_eq!(resent, vec![40, 40, 41, 41, 42, 42]);
        assert_eq!(b.stats().repeated_already, 8 * 3);
    }

    #[test]
    fn a_nak_naming_millions_of_frames_queues_only_what_the_budget_pays() {
        // 300 ms of 32 000 frames/s kept; 10 000 sent: a budget of 256 (the burst).
        let mut b = RetransmitBuffer::new(9600, 0.1);
        for seq in 0..10_000u64 {
            b.on_sent(seq, &[seq as u8]);
        }
        let widest = Nak {
            stream: 0,
            ranges: (0..MAX_NAK_RANGES as u64)
                .map(|i| SeqRange {
                    first: i * u64::from(crate::wire::MAX_NAK_RANGE_LEN),
                    count: crate::wire::MAX_NAK_RANGE_LEN,
                })
                .collect(),
        };
        for _ in 0..1000 {
            b.on_nak(&widest);
        }
        let asked = 1000 * 64 * u64::from(crate::wire::MAX_NAK_RANGE_LEN);
        let st = *b.stats();
        assert_eq!(st.asked, asked);
        assert_eq!(b.pending(), 256, "each frame queued once, as many as the budget pays");
        assert_eq!(st.unavailable + st.over_budget + 256, asked, "{st:?}");
        let mut sent = 0;
        while b.next_repeat().is_some() {
            sent += 1;
        }
        assert_eq!(sent, 256);
    }
}

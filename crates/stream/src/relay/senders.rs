//! The relay's input senders (input, address), counted one by one the way jive5ab's `udpsnor`
//! does — within bounds, so a flood of new source ports costs a line of the report, not one
//! per phantom (see the relay's docs).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use vdif::StationId;

use super::{PHANTOM_AFTER, SOURCE_RUN};

/// Serial numbers kept per sender for the reordering extent.
pub const EXTENT_HISTORY: usize = 64;
/// Most senders counted one by one; datagrams of further ones go to `untracked_datagrams`.
pub const MAX_SENDERS: usize = 256;
/// Senders reported one by one (those that gave the most frames); the rest are summed.
pub const REPORTED_SENDERS: usize = 16;

pub use crate::results::{InputSender, OtherSenders};

/// A sender of input datagrams (input, address).
struct SenderIn {
    input: u16,
    addr: SocketAddr,
    last_seen: Instant,
    stats: InputSender,
    /// The last serial numbers, newest last (for the reordering extent).
    recent: VecDeque<u64>,
    /// Highest serial number seen + 1 (the next expected).
    expect: Option<u64>,
    /// Datagrams with a serial number (for the loss count).
    numbered: u64,
    until_ack: u32,
    stations: Vec<StationId>,
    threads: Vec<u16>,
}

impl SenderIn {
    /// Count serial number `seq` (jive5ab's `udpsnor` way: loss from the lowest and highest
    /// seen, a datagram below the next expected is reordered).
    fn on_seq(&mut self, seq: u64) {
        self.numbered += 1;
        let s = &mut self.stats;
        s.seq_first = Some(s.seq_first.map_or(seq, |f| f.min(seq)));
        s.seq_last = Some(s.seq_last.map_or(seq, |l| l.max(seq)));
        match self.expect {
            Some(e) if seq < e => {
                s.reordered += 1;
                let extent = self.recent.iter().filter(|r| **r > seq).count() as u64;
                s.reorder_extent_max = s.reorder_extent_max.max(extent);
            }
            _ => self.expect = Some(seq.wrapping_add(1)),
        }
        if let (Some(f), Some(l)) = (s.seq_first, s.seq_last) {
            s.lost = (l - f + 1).saturating_sub(self.numbered);
        }
        if self.recent.len() == EXTENT_HISTORY {
            self.recent.pop_front();
        }
        self.recent.push_back(seq);
    }

    /// Note that it sent `station`, thread `thread` (bounded: ids are 10 bits).
    fn saw(&mut self, station: StationId, thread: u16) {
        if !self.stations.contains(&station) && self.stations.len() < 64 {
            self.stations.push(station);
        }
        if let Err(at) = self.threads.binary_search(&thread) {
            self.threads.insert(at, thread);
        }
    }
}

/// The senders seen: at most [`MAX_SENDERS`] one by one, the rest summed.
#[derive(Default)]
pub(super) struct SenderTable {
    senders: Vec<SenderIn>,
    /// Senders no longer counted one by one (quiet or strays, their place taken), summed.
    folded: OtherSenders,
    /// Datagrams of senders beyond [`MAX_SENDERS`] while none could make room.
    untracked: u64,
}

impl SenderTable {
    /// The counters of sender (`input`, `from`), made on its first datagram at `now`; beyond
    /// [`MAX_SENDERS`] in the place of a stray (fewer than [`SOURCE_RUN`] datagrams) or of a
    /// sender quiet for [`PHANTOM_AFTER`], the one heard from least recently (its counts summed
    /// into the rest), else `None`.
    pub(super) fn index(&mut self, now: Instant, input: u16, from: SocketAddr) -> Option<usize> {
        if let Some(i) = self.senders.iter().position(|s| s.input == input && s.addr == from) {
            self.senders[i].last_seen = now;
            return Some(i);
        }
        if self.senders.len() >= MAX_SENDERS {
            let quiet = self
                .senders
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s.stats.datagrams < SOURCE_RUN as u64 || now.saturating_duration_since(s.last_seen) >= PHANTOM_AFTER
                })
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(i, _)| i);
            let Some(q) = quiet else {
                self.untracked += 1;
                return None;
            };
            let gone = self.senders.remove(q);
            self.folded.add(&gone.stats);
        }
        self.senders.push(SenderIn {
            input,
            addr: from,
            last_seen: now,
            stats: InputSender {
                input,
                source: from.to_string(),
                ..InputSender::default()
            },
            recent: VecDeque::with_capacity(EXTENT_HISTORY),
            expect: None,
            numbered: 0,
            until_ack: 1,
            stations: Vec::new(),
            threads: Vec::new(),
        });
        Some(self.senders.len() - 1)
    }

    /// Sender (`input`, `from`), if counted one by one.
    pub(super) fn find(&self, input: u16, from: SocketAddr) -> Option<usize> {
        self.senders.iter().position(|s| s.input == input && s.addr == from)
    }

    /// A datagram of `len` bytes from sender `i`.
    pub(super) fn on_datagram(&mut self, i: usize, len: usize) {
        let s = &mut self.senders[i];
        s.stats.datagrams += 1;
        s.stats.bytes += len as u64;
    }

    /// Sender `i`'s datagram carried serial number `seq`.
    pub(super) fn on_seq(&mut self, i: usize, seq: u64) {
        self.senders[i].on_seq(seq);
    }

    /// Sender `i`'s datagram was a frame of `station`, thread `thread`, taken; whether a
    /// keep-alive is due to it (`--ack` every `ack_every` of its frames taken: a sender whose
    /// datagrams are all refused — garbage, a spoofed source — gets none).
    pub(super) fn on_frame(&mut self, i: usize, station: StationId, thread: u16, ack_every: Option<u32>) -> bool {
        let s = &mut self.senders[i];
        s.stats.frames += 1;
        s.saw(station, thread);
        let Some(every) = ack_every.filter(|n| *n > 0) else {
            return false;
        };
        s.until_ack = s.until_ack.saturating_sub(1);
        if s.until_ack > 0 {
            return false;
        }
        s.until_ack = every;
        s.stats.acks_sent += 1;
        true
    }

    /// Datagrams of senders not counted one by one while none could make room.
    pub(super) fn untracked(&self) -> u64 {
        self.untracked
    }

    /// The counters of the [`REPORTED_SENDERS`] senders that gave the most frames (then
    /// datagrams), in the order they first spoke.
    pub(super) fn reported(&self) -> Vec<InputSender> {
        let top = self.top();
        self.senders
            .iter()
            .enumerate()
            .filter(|(i, _)| top.contains(i))
            .map(|(_, s)| InputSender {
                stations: s.stations.iter().map(|id| id.to_string()).collect(),
                threads: s.threads.clone(),
                ..s.stats.clone()
            })
            .collect()
    }

    /// The senders not in [`SenderTable::reported`], summed.
    pub(super) fn others(&self) -> OtherSenders {
        let top = self.top();
        let mut rest = self.folded;
        for (_, s) in self.senders.iter().enumerate().filter(|(i, _)| !top.contains(i)) {
            rest.add(&s.stats);
        }
        rest
    }

    /// Senders seen, counted one by one or summed.
    pub(super) fn count(&self) -> u64 {
        self.senders.len() as u64 + self.folded.senders
    }

    /// Indices of the senders reported one by one.
    fn top(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.senders.len()).collect();
        order.sort_by_key(|&i| {
            let s = &self.senders[i].stats;
            std::cmp::Reverse((s.frames, s.datagrams))
        });
        order.truncate(REPORTED_SENDERS);
        order
    }
}

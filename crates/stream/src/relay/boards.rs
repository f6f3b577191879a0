//! The sources feeding a relayed station: its backend's boards, learned with its threads and
//! followed after, and the sources refused as boards (issue 36).
//!
//! While a station's threads are learned, its frames are held per source; when the learning
//! ends, the source that sent the most is a board, and so is every other source in step with it
//! ([`crate::in_step`]: as many frames per thread over the same VDIF times and arrivals); a
//! source that is not adds no thread, and its held frames are neither relayed nor recorded
//! (`foreign_source`). (A source sending a fifth of a thread, numbered as a thread of half the
//! station's rate, was learned as a second thread of a one-thread station: the rate was split
//! in two and every real frame numbered past the half was dropped as another format.) The
//! learning goes on while a source is still to be judged, up to [`super::LEARN_FOR`].
//!
//! Afterwards a frame is a board's when its source is one; from another source it is refused
//! while a board sending its thread is live, takes the place of that board gone quiet for
//! [`BOARD_QUIET`] (a restarted backend), and joins as another board when its thread is new and
//! the station's threads have room for it (a board that came late); otherwise it is refused.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use vdif::{FrameRate, VdifHeader};

use crate::in_step::{compare, Evidence, Meter, Step};
use crate::results::RefusedSource;
use crate::thread_set::ThreadSet;

/// Sources a learning station holds frames of; frames of further sources are refused.
pub(super) const LEARN_SOURCES: usize = 16;
/// Boards of one station.
pub(super) const MAX_BOARDS: usize = 32;
/// Sources refused as boards that are named (all are counted).
const REFUSED_KEPT: usize = 16;
/// Why a source not in step with a station's boards is refused.
pub(super) const NOT_IN_STEP: &str =
    "not in step with the station's boards (too few of the frames per thread they send over the same time): not a board of it";
/// Why a source sending a thread no board sends, with no room for it, is refused.
pub(super) const BEYOND: &str = "sends a thread beyond the station's";
/// Why a board that sent under half its share lost its place.
pub(super) const UNDER_SHARE: &str =
    "sent under half its share of the station's rate: its place went to the boards in step";
/// A board quiet this long may be replaced by a source sending its threads (the receiver's
/// `source_quiet`).
pub(super) const BOARD_QUIET: Duration = Duration::from_millis(100);

/// A frame held while its station's threads are learned.
pub(super) struct HeldFrame {
    pub(super) at: Instant,
    pub(super) frame: Bytes,
    pub(super) header: VdifHeader,
    /// Index of its source in the learning's sources.
    pub(super) source: usize,
    /// The input it came to.
    pub(super) input: u16,
}

/// A source sending a learning station's frames: its address and threads.
pub(super) struct LearnSource {
    pub(super) addr: SocketAddr,
    pub(super) threads: ThreadSet,
}

/// How the sources of a learning station stand (see the module docs).
pub(super) struct Judged {
    /// Indices of the sources that are its boards.
    pub(super) boards: Vec<usize>,
    /// Some source is still to be judged.
    pub(super) undecided: bool,
}

/// Judge the sources of a learning station by their held frames.
pub(super) fn judge(sources: &[LearnSource], held: &[HeldFrame]) -> Judged {
    if sources.len() < 2 {
        return Judged {
            boards: (0..sources.len()).collect(),
            undecided: false,
        };
    }
    let evidence: Vec<Evidence> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mine = held.iter().filter(|h| h.source == i).map(|h| (&h.header, h.at));
            Evidence::new(mine, s.threads.len())
        })
        .collect();
    let sent = |i: usize| held.iter().filter(|h| h.source == i).count() * 1024 / sources[i].threads.len().max(1);
    let reference = (0..sources.len()).max_by_key(|&i| sent(i)).unwrap_or(0);
    let mut judged = Judged {
        boards: vec![reference],
        undecided: false,
    };
    for (i, e) in evidence.iter().enumerate() {
        if i == reference {
            continue;
        }
        match compare(&evidence[reference], e) {
            Step::Alike | Step::FirstSparse => judged.boards.push(i),
            Step::Undecided => {
                judged.undecided = true;
                judged.boards.push(i);
            }
            Step::SecondSparse => {}
        }
    }
    judged.boards.sort_unstable();
    judged
}

/// A board of a relayed station.
#[derive(Debug, Clone)]
pub(super) struct Board {
    pub(super) addr: SocketAddr,
    pub(super) threads: ThreadSet,
    pub(super) last_seen: Instant,
    /// Its frames a second, lately.
    pub(super) meter: Meter,
}

/// The boards of a relayed station and the sources it refused.
#[derive(Debug, Clone, Default)]
pub(super) struct Boards {
    pub(super) list: Vec<Board>,
    pub(super) refused: Vec<RefusedSource>,
}

impl Boards {
    /// A frame of thread `thread` from `from` arrived at `now`: `Ok` when it is a board's (its
    /// source one, or one now: a restart, a board that came late while `room(thread)`, or one
    /// sending the thread of a board that delivers under half its share of `fps` frames a second
    /// per thread, which gives its place up), else why it is refused.
    pub(super) fn seat(
        &mut self,
        from: SocketAddr,
        thread: u16,
        now: Instant,
        fps: FrameRate,
        room: impl FnOnce(u16) -> bool,
    ) -> Result<(), &'static str> {
        if let Some(b) = self.list.iter_mut().find(|b| b.addr == from) {
            b.threads.insert(thread);
            b.last_seen = now;
            b.meter.frame(now);
            return Ok(());
        }
        let live = |b: &Board| now.saturating_duration_since(b.last_seen) < BOARD_QUIET;
        let sparse = |b: &Board| {
            let share = f64::from(fps) * b.threads.len().max(1) as f64;
            b.meter.per_second(now).is_some_and(|r| r < share / 2.0)
        };
        match self.list.iter().position(|b| b.threads.contains(thread)) {
            Some(i) if live(&self.list[i]) && !sparse(&self.list[i]) => {
                Err("sends a thread a live board of the station sends")
            }
            Some(i) => {
                // That board restarted (a new port), or held its place by a fraction of its
                // frames: this source takes its place.
                let b = &mut self.list[i];
                if live(b) {
                    let (gone, threads) = (b.addr, b.threads);
                    self.refuse(gone, &threads, UNDER_SHARE);
                }
                let b = &mut self.list[i];
                (b.addr, b.last_seen, b.meter) = (from, now, Meter::new(now));
                b.threads = [thread].into_iter().collect();
                Ok(())
            }
            None if self.list.len() < MAX_BOARDS && room(thread) => {
                self.list.push(Board {
                    addr: from,
                    threads: [thread].into_iter().collect(),
                    last_seen: now,
                    meter: Meter::new(now),
                });
                Ok(())
            }
            None => Err(BEYOND),
        }
    }

    /// Whether no live board holds its place at `now` (every one sends under half its share of
    /// `fps` frames a second per thread, measured), and some board is live.
    pub(super) fn none_holds(&self, now: Instant, fps: FrameRate) -> bool {
        let live: Vec<&Board> = self
            .list
            .iter()
            .filter(|b| now.saturating_duration_since(b.last_seen) < BOARD_QUIET)
            .collect();
        !live.is_empty()
            && live.iter().all(|b| {
                let share = f64::from(fps) * b.threads.len().max(1) as f64;
                b.meter.per_second(now).is_some_and(|r| r < share / 2.0)
            })
    }

    /// Name `from` (sending `threads`) among the sources refused, for `reason`.
    pub(super) fn refuse(&mut self, from: SocketAddr, threads: &ThreadSet, reason: &str) {
        let name = from.to_string();
        if let Some(r) = self.refused.iter_mut().find(|r| r.source == name) {
            r.datagrams += 1;
            return;
        }
        if self.refused.len() < REFUSED_KEPT {
            self.refused.push(RefusedSource {
                source: name,
                threads: threads.ids(),
                datagrams: 1,
                reason: reason.to_string(),
            });
        }
    }
}

//! The boards of a station: the sources that feed one station's window, each with its own
//! threads.
//!
//! A DBBC3 (or an R2DBE pair, or any backend with several boards) sends one station from several
//! addresses or ports into one recorder port, each board its own VDIF threads and its own
//! sequence numbers (jive5ab's `udps` framing numbers per board). jive5ab records every datagram
//! on the port; the receiver takes each board as a *member* of its station: a source whose
//! threads are disjoint from those of every board the station has joins it, and its frames go
//! into the same window (one time order over all threads, one loss count). A source sending
//! threads a live board already sends is a second sender beside it and refused, as before; one
//! sending the threads of a board gone quiet is that board restarted and takes its place. (Taking
//! one source per station recorded 8000 of a two-board station's 16 000 frames and reported a
//! third of the station lost.)

use std::net::SocketAddr;
use std::time::Instant;

use crate::in_step::Meter;
use crate::results::BoardSummary;
use crate::thread_set::ThreadSet;

/// One source feeding a station: a board of its backend, or the one sender of a station.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) source: SocketAddr,
    /// The sender's session (native framing; 0 otherwise).
    pub(crate) session: u16,
    /// The threads it has sent.
    pub(crate) threads: ThreadSet,
    pub(crate) last_seen: Instant,
    /// Datagrams of it taken into the station's window.
    pub(crate) frames: u64,
    /// Its frames a second, lately (a board delivers its threads' share of the station's).
    pub(crate) meter: Meter,
    /// Its own sequence numbers (each board numbers its own), lowest and highest placed.
    pub(crate) seq_first: Option<u64>,
    pub(crate) seq_last: Option<u64>,
}

impl Member {
    pub(crate) fn new(source: SocketAddr, session: u16, threads: ThreadSet, now: Instant) -> Self {
        Member {
            source,
            session,
            threads,
            last_seen: now,
            frames: 0,
            meter: Meter::new(now),
            seq_first: None,
            seq_last: None,
        }
    }

    /// Frame `seq` of this board was placed.
    pub(crate) fn numbered(&mut self, seq: u64) {
        self.seq_first = Some(self.seq_first.map_or(seq, |f| f.min(seq)));
        self.seq_last = Some(self.seq_last.map_or(seq, |l| l.max(seq)));
    }

    pub(crate) fn summary(&self, native: bool) -> BoardSummary {
        BoardSummary {
            source: self.source.to_string(),
            session: native.then_some(self.session),
            threads: self.threads.ids(),
            frames: self.frames,
            seq_first: self.seq_first,
            seq_last: self.seq_last,
        }
    }
}

/// What a source that delivered its run is to a station that already has boards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joining {
    /// It sends threads that live board `0` sends: a second sender beside it, refused.
    Beside(usize),
    /// Every board is quiet: it is the station's sender now (a restart).
    Succeeds,
    /// It sends the threads of board `0`, gone quiet: that board restarted.
    Replaces(usize),
    /// Threads no board sends, with room in the window: another board.
    Joins,
    /// Threads no board sends, and the window has no room for them (or the framing has one
    /// sender per stream).
    NoRoom,
}

/// How a source sending `threads` relates to a station's `members` at `now` (a board quiet for
/// `quiet` is gone); `boards_allowed` says whether the framing lets several sources feed one
/// stream, `room` whether the window can take those threads besides its own (asked last: it
/// costs a look at the window).
pub(crate) fn joining(
    members: &[Member],
    threads: &ThreadSet,
    now: Instant,
    quiet: std::time::Duration,
    boards_allowed: bool,
    room: impl FnOnce() -> bool,
) -> Joining {
    let live = |m: &Member| now.saturating_duration_since(m.last_seen) < quiet;
    if let Some(i) = members.iter().position(|m| live(m) && m.threads.overlaps(threads)) {
        return Joining::Beside(i);
    }
    if !members.iter().any(live) {
        return Joining::Succeeds;
    }
    if let Some(i) = members.iter().position(|m| m.threads.overlaps(threads)) {
        return Joining::Replaces(i);
    }
    if boards_allowed && room() {
        Joining::Joins
    } else {
        match members.iter().position(live) {
            // One sender per stream (native framing): a second one beside the live one.
            Some(i) if !boards_allowed => Joining::Beside(i),
            _ => Joining::NoRoom,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_source_is_beside_a_live_board_replaces_a_quiet_one_or_joins_with_other_threads() {
        let t0 = Instant::now();
        let q = Duration::from_millis(100);
        let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let set = |ids: &[u16]| ids.iter().copied().collect::<ThreadSet>();
        let a = Member::new(addr(1), 0, set(&[0, 1]), t0);
        let mut b = Member::new(addr(2), 0, set(&[2, 3]), t0);
        let at = t0 + Duration::from_millis(50);
        let boards = [a.clone(), b.clone()];
        assert_eq!(joining(&boards, &set(&[1]), at, q, true, || true), Joining::Beside(0));
        assert_eq!(joining(&boards, &set(&[4, 5]), at, q, true, || true), Joining::Joins);
        assert_eq!(joining(&boards, &set(&[4, 5]), at, q, true, || false), Joining::NoRoom);
        assert_eq!(
            joining(&boards, &set(&[4, 5]), at, q, false, || true),
            Joining::Beside(0)
        );
        // Board b quiet since t0, board a live: b's threads from elsewhere are b restarted.
        let mut a_live = a.clone();
        a_live.last_seen = t0 + Duration::from_millis(150);
        let later = t0 + Duration::from_millis(200);
        assert_eq!(
            joining(&[a_live.clone(), b.clone()], &set(&[3]), later, q, true, || true),
            Joining::Replaces(1)
        );
        // Every board quiet: whatever it sends, it succeeds them.
        assert_eq!(
            joining(&[a, b.clone()], &set(&[7]), later, q, true, || false),
            Joining::Succeeds
        );
        b.last_seen = later;
        assert_eq!(
            joining(&[a_live, b], &set(&[3]), later, q, true, || true),
            Joining::Beside(1)
        );
    }
}

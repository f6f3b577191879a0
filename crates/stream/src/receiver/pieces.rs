//! Mark5B frames that do not come one per datagram. jive5ab sends a Mark5B stream as bytes:
//! without a frame-size constraint (VDIF has one, Mark5B none unless compressed: jive5ab
//! src/constraints.cc) it cuts the stream into datagrams of `(MTU − headers) & ~7` bytes,
//! 8960 under a 9000-byte MTU, each behind its own udps sequence number, one per datagram
//! (seen from jive5ab 3.1.0's `fill2net` in MARK5B modes: a 10 016-byte frame straddles two or
//! three datagrams). This puts the frames together again before anything else looks at them,
//! sans IO: a datagram's bytes are the stream's from `sequence number × its length`; frames
//! start at one offset modulo 10 016 (their *phase*, learned from a sync word seen in a
//! datagram, checked again on every frame made whole). A frame some byte of which never came
//! is let go and counted: the station's window then fills it as any lost frame. Memory is
//! bounded: a few frames in the making per source, a few sources (the oldest let go, counted).

use std::collections::VecDeque;
use std::net::SocketAddr;

use vdif::formats::{MARK5B_FRAME_LEN, MARK5B_SYNC_WORD};

use crate::results::DatagramCounters;

/// Frames being put together at once per source: datagrams reordered by the path within about
/// this many frames still join.
const FRAMES_IN_MAKING: usize = 8;
/// Sources joined at once (a flood of forged sources costs at most this many × the above).
const SOURCES: usize = 16;
/// Smallest datagram taken as a piece of the stream (jive5ab's under a 576-byte MTU is 536;
/// smaller would need more than 64 datagrams a frame, past the mask of what came).
const SMALLEST_PIECE: usize = 320;
/// The udps sequence number before each datagram's bytes (jive5ab's udps, little-endian).
const SEQ_LEN: usize = 8;
/// A frame joined: its udps datagram, sequence number and frame.
pub(crate) const JOINED_LEN: usize = SEQ_LEN + MARK5B_FRAME_LEN;
const FRAME: u128 = MARK5B_FRAME_LEN as u128;

/// What became of a datagram offered as a piece.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Joined {
    /// Whole frames one per datagram (or a size that is no piece of a stream): the caller goes
    /// on with the datagram as it is.
    NotAPiece,
    /// Its bytes were taken; the frames it completed (none or more) are in `out`, each as one
    /// udps datagram of a whole frame, numbered by the frame's count in the stream.
    Taken,
}

/// One frame being put together.
struct Partial {
    /// Its count in the stream (from the phase).
    frame: u128,
    /// Bytes of it that came.
    have: usize,
    /// Which of the datagrams it spans came (bit: sequence number less its first one's).
    came: u64,
    bytes: Box<[u8]>,
}

struct Source {
    from: SocketAddr,
    piece_len: usize,
    /// Stream offset modulo the frame size where frames start.
    phase: Option<u128>,
    partials: VecDeque<Partial>,
    last_seen: u64,
}

/// Joins the frames of Mark5B streams in jive5ab's udps framing.
#[derive(Default)]
pub(crate) struct FramePieces {
    sources: Vec<Source>,
    clock: u64,
}

/// A datagram's piece length when it carries part of a stream rather than one whole frame.
fn piece_len(datagram: &[u8]) -> Option<usize> {
    let len = datagram.len().checked_sub(SEQ_LEN)?;
    (len >= SMALLEST_PIECE && len != MARK5B_FRAME_LEN).then_some(len)
}

/// Where in `bytes` the Mark5B sync word is, if it is.
fn sync_at(bytes: &[u8]) -> Option<usize> {
    let sync = MARK5B_SYNC_WORD.to_le_bytes();
    bytes.windows(4).position(|w| w == sync)
}

impl FramePieces {
    /// Offer `datagram` from `from`; the frames it completed are appended to `out` (cleared
    /// first), each [`JOINED_LEN`] bytes; what it cost is counted in `counts`' `split_*`.
    pub(crate) fn offer(
        &mut self,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut Vec<u8>,
        counts: &mut DatagramCounters,
    ) -> Joined {
        out.clear();
        let Some(len) = piece_len(datagram) else {
            return Joined::NotAPiece;
        };
        let (head, piece) = datagram.split_at(SEQ_LEN);
        let mut seq = [0u8; SEQ_LEN];
        seq.copy_from_slice(head);
        self.clock += 1;
        let at = self.source(from, len, counts);
        let s = &mut self.sources[at];
        // A shorter datagram is the stream's last (what was left of the file or scan).
        let cut = s.piece_len as u128;
        let start = u128::from(u64::from_le_bytes(seq)) * cut;
        s.last_seen = self.clock;
        let phase = match s.phase {
            Some(p) => p,
            None => match sync_at(piece) {
                Some(x) => *s.phase.insert((start + x as u128) % FRAME),
                None => {
                    counts.split_datagrams_unplaced += 1;
                    return Joined::Taken;
                }
            },
        };
        let end = start + len as u128;
        // Frames this datagram's bytes fall in: from the one holding its first byte (or the
        // stream's first frame) to the one holding its last.
        let Some(last) = (end - 1).checked_sub(phase).map(|b| b / FRAME) else {
            // All before the stream's first frame.
            return Joined::Taken;
        };
        let first = (start.max(phase) - phase) / FRAME;
        for frame in first..=last {
            let (f0, f1) = (phase + frame * FRAME, phase + (frame + 1) * FRAME);
            let (a, b) = (start.max(f0), end.min(f1));
            if a >= b {
                continue;
            }
            let Some(p) = Self::partial(s, counts, frame) else {
                continue;
            };
            // Bit of this datagram among those the frame spans (at most 64: SMALLEST_PIECE).
            let bit = 1u64 << ((start / cut) - f0 / cut).min(63);
            if p.came & bit != 0 {
                counts.split_datagrams_unplaced += 1;
                return Joined::Taken;
            }
            p.came |= bit;
            let (into, from) = ((a - f0) as usize, (a - start) as usize);
            let n = (b - a) as usize;
            p.bytes[into..into + n].copy_from_slice(&piece[from..from + n]);
            p.have += n;
            if p.have < MARK5B_FRAME_LEN {
                continue;
            }
            let Some(pos) = s.partials.iter().position(|q| q.frame == frame) else {
                continue;
            };
            let Some(done) = s.partials.remove(pos) else {
                continue;
            };
            if sync_at(&done.bytes[..4]) != Some(0) {
                // Not where a frame starts: the sender began its numbering anew, or the phase
                // was learned from data that looked like a sync word.
                counts.split_frames_incomplete += 1 + s.partials.len() as u64;
                s.partials.clear();
                s.phase = None;
                return Joined::Taken;
            }
            counts.split_frames_joined += 1;
            // Frame counts fit 64 bits for any stream a u64 sequence number can number.
            out.extend_from_slice(&(frame as u64).to_le_bytes());
            out.extend_from_slice(&done.bytes);
        }
        Joined::Taken
    }

    /// Frame `frame` of `s` in the making: found, or begun (the oldest let go when there are
    /// too many).
    fn partial<'s>(s: &'s mut Source, counts: &mut DatagramCounters, frame: u128) -> Option<&'s mut Partial> {
        let at = match s.partials.iter().position(|p| p.frame == frame) {
            Some(at) => at,
            None => {
                if s.partials.len() == FRAMES_IN_MAKING && s.partials.pop_front().is_some() {
                    counts.split_frames_incomplete += 1;
                }
                s.partials.push_back(Partial {
                    frame,
                    have: 0,
                    came: 0,
                    bytes: vec![0u8; MARK5B_FRAME_LEN].into_boxed_slice(),
                });
                s.partials.len() - 1
            }
        };
        s.partials.get_mut(at)
    }

    /// Where the state of `from`'s datagrams of `len` bytes is (a new one, the least recently
    /// heard let go when the table is full; a source that sends longer datagrams than before
    /// starts over, a shorter one is its stream's last).
    fn source(&mut self, from: SocketAddr, len: usize, counts: &mut DatagramCounters) -> usize {
        match self.sources.iter().position(|s| s.from == from) {
            Some(at) if self.sources[at].piece_len >= len => at,
            found => {
                let fresh = Source {
                    from,
                    piece_len: len,
                    phase: None,
                    partials: VecDeque::new(),
                    last_seen: self.clock,
                };
                let full = self.sources.len() == SOURCES;
                let oldest = (0..self.sources.len()).min_by_key(|&i| self.sources[i].last_seen);
                match found.or(if full { oldest } else { None }) {
                    Some(i) => {
                        let old = std::mem::replace(&mut self.sources[i], fresh);
                        counts.split_frames_incomplete += old.partials.len() as u64;
                        i
                    }
                    None => {
                        self.sources.push(fresh);
                        self.sources.len() - 1
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WHOLE: usize = JOINED_LEN;

    /// The joiner and its counts, as the receiver holds them.
    #[derive(Default)]
    struct Joiner {
        pieces: FramePieces,
        counts: DatagramCounters,
    }

    impl Joiner {
        fn offer(&mut self, from: SocketAddr, datagram: &[u8], out: &mut Vec<u8>) -> Joined {
            self.pieces.offer(from, datagram, out, &mut self.counts)
        }
    }

    fn from(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Frame `i`: the sync word, then bytes no other frame has.
    fn frame(i: u64) -> Vec<u8> {
        let mut f: Vec<u8> = (0..MARK5B_FRAME_LEN).map(|b| (b as u64 * 7 + i * 131) as u8).collect();
        f[..4].copy_from_slice(&MARK5B_SYNC_WORD.to_le_bytes());
        f
    }

    /// Frames `frames` as jive5ab sends the stream: `lead` bytes of a frame before them (the
    /// stream picked up mid-frame), cut into datagrams of `len` bytes numbered from `first`.
    fn stream(frames: std::ops::Range<u64>, lead: usize, len: usize, first: u64) -> Vec<Vec<u8>> {
        let mut bytes = vec![0x5au8; lead];
        for i in frames {
            bytes.extend(frame(i));
        }
        bytes
            .chunks(len)
            .enumerate()
            .map(|(k, c)| {
                let mut d = (first + k as u64).to_le_bytes().to_vec();
                d.extend_from_slice(c);
                d
            })
            .filter(|d| d.len() >= SEQ_LEN + SMALLEST_PIECE)
            .collect()
    }

    /// Stream bytes the datagrams carry.
    fn carried(ds: &[Vec<u8>]) -> usize {
        ds.iter().map(|d| d.len() - SEQ_LEN).sum()
    }

    /// The frames the datagrams `ds` from `src` completed, in order.
    fn offer_all(j: &mut Joiner, src: SocketAddr, ds: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut got = Vec::new();
        for d in ds {
            assert_eq!(j.offer(src, d, &mut out), Joined::Taken);
            assert_eq!(out.len() % WHOLE, 0);
            got.extend(out.chunks(WHOLE).map(<[u8]>::to_vec));
        }
        got
    }

    /// Which of frames 0..100 each joined frame is.
    fn which(got: &[Vec<u8>]) -> Vec<u64> {
        got.iter()
            .map(|g| (0..100).find(|&i| g[SEQ_LEN..] == frame(i)[..]).expect("a frame sent"))
            .collect()
    }

    #[test]
    fn jive5ab_s_8960_byte_cuts_and_other_sizes_join_into_the_frames_sent() {
        // 8960: MTU 9000; 1464: MTU 1500; 5008: half frames; 63960: several frames a datagram.
        for (len, lead) in [
            (8960usize, 0usize),
            (8960, 3000),
            (1464, 17),
            (5008, 0),
            (63_960, 10_000),
        ] {
            let mut j = Joiner::default();
            let ds = stream(0..30, lead, len, 1_260_856_734);
            let got = offer_all(&mut j, from(1), &ds);
            let n = ((carried(&ds) - lead) / MARK5B_FRAME_LEN) as u64;
            assert_eq!(which(&got), (0..n).collect::<Vec<_>>(), "{len} bytes, {lead} before");
            let seq = |g: &[u8]| u64::from_le_bytes(g[..SEQ_LEN].try_into().unwrap());
            assert!(
                got.windows(2).all(|w| seq(&w[1]) == seq(&w[0]) + 1),
                "one number a frame"
            );
            assert_eq!(j.counts.split_frames_joined, n);
            assert_eq!(j.counts.split_datagrams_unplaced, u64::from(lead > 0 && len < lead + 4));
        }
    }

    #[test]
    fn a_lost_datagram_costs_the_frames_it_carried_bytes_of_and_reordering_costs_nothing() {
        let mut j = Joiner::default();
        let mut ds = stream(0..40, 0, 8960, 99);
        let n = (carried(&ds) / MARK5B_FRAME_LEN) as u64; // whole frames in the datagrams cut
                                                          // Datagram 10 carries bytes 89 600..98 560: frames 8 (89 600 − 80 128 in) and 9.
        ds.remove(10);
        ds.swap(20, 21);
        ds.swap(25, 27);
        let got = offer_all(&mut j, from(1), &ds);
        let mut frames = which(&got);
        frames.sort_unstable();
        let want: Vec<u64> = (0..n).filter(|f| *f != 8 && *f != 9).collect();
        assert_eq!(frames, want);
    }

    #[test]
    fn bytes_before_any_sync_word_and_a_repeated_datagram_are_unplaced() {
        let mut j = Joiner::default();
        let mut ds = vec![{
            let mut d = 5u64.to_le_bytes().to_vec();
            d.resize(SEQ_LEN + 8960, 0x77);
            d
        }];
        let s = stream(0..10, 0, 8960, 6);
        let n = (carried(&s) / MARK5B_FRAME_LEN) as u64;
        ds.extend(s.iter().cloned());
        ds.insert(3, s[1].clone());
        let got = offer_all(&mut j, from(1), &ds);
        assert_eq!(which(&got), (0..n).collect::<Vec<_>>());
        assert_eq!(j.counts.split_datagrams_unplaced, 2);
    }

    #[test]
    fn a_sender_that_restarts_its_numbering_is_followed_after_a_frame() {
        let mut j = Joiner::default();
        let mut ds = stream(0..10, 0, 8960, 0);
        ds.truncate(5); // frames 0..3 whole, frame 4 cut by the restart
        ds.extend(stream(20..40, 0, 8960, 777));
        let got = offer_all(&mut j, from(1), &ds);
        let frames = which(&got);
        assert_eq!(&frames[..4], &[0, 1, 2, 3]);
        // The new numbering's first frame shows the old phase wrong; from the next sync word on
        // the new stream's frames join.
        assert!(frames[4..].iter().all(|&f| f >= 20), "{frames:?}");
        assert!(frames.len() >= 4 + 12, "{frames:?}");
        assert!(j.counts.split_frames_incomplete >= 1);
    }

    #[test]
    fn whole_frames_and_tiny_datagrams_are_not_pieces() {
        let mut j = Joiner::default();
        let mut out = Vec::new();
        let mut whole = 9u64.to_le_bytes().to_vec();
        whole.extend_from_slice(&frame(0));
        assert_eq!(j.offer(from(1), &whole, &mut out), Joined::NotAPiece);
        for len in [0usize, 7, 8 + 100, 8 + SMALLEST_PIECE - 1] {
            assert_eq!(j.offer(from(1), &vec![0u8; len], &mut out), Joined::NotAPiece, "{len}");
        }
        assert_eq!(j.counts, DatagramCounters::default());
    }

    #[test]
    fn many_sources_cost_a_bounded_table_and_streams_are_joined_apart() {
        let mut j = Joiner::default();
        let mut out = Vec::new();
        for port in 0..1000u16 {
            j.offer(from(port), &stream(0..2, 0, 8960, 0)[0], &mut out);
        }
        assert_eq!(j.pieces.sources.len(), SOURCES);
        assert!(j.pieces.sources.iter().all(|s| s.partials.len() <= FRAMES_IN_MAKING));
        // Two stations interleaved, numbered alike: each joins its own.
        let mut j = Joiner::default();
        let (a, b) = (stream(0..5, 0, 8960, 0), stream(50..55, 0, 8960, 0));
        let mut got = Vec::new();
        for (x, y) in a.iter().zip(&b) {
            for (port, d) in [(1, x), (2, y)] {
                j.offer(from(port), d, &mut out);
                got.extend(out.chunks(WHOLE).map(<[u8]>::to_vec));
            }
        }
        let frames: Vec<u64> = got
            .iter()
            .map(|g| (0..100).find(|&i| g[SEQ_LEN..] == frame(i)[..]).unwrap())
            .collect();
        assert_eq!(frames.iter().filter(|f| **f < 50).count(), 5);
        assert_eq!(frames.iter().filter(|f| **f >= 50).count(), 5);
    }

    proptest! {
        #[test]
        fn any_datagrams_never_panic_and_stay_bounded(
            ds in proptest::collection::vec(
                (0u16..40, proptest::num::u64::ANY, 0usize..9000, 0usize..5), 0..200)
        ) {
            let mut j = Joiner::default();
            let mut out = Vec::new();
            let sizes = [8960usize, 1464, 5008, 320, 20_000];
            for (port, seq, sync, size) in ds {
                let mut d = seq.to_le_bytes().to_vec();
                d.resize(SEQ_LEN + sizes[size], 0x5a);
                let at = SEQ_LEN + sync.min(sizes[size] - 4);
                d[at..at + 4].copy_from_slice(&MARK5B_SYNC_WORD.to_le_bytes());
                j.offer(from(port), &d, &mut out);
                prop_assert_eq!(out.len() % WHOLE, 0);
            }
            prop_assert!(j.pieces.sources.len() <= SOURCES);
            prop_assert!(j.pieces.sources.iter().all(|s| s.partials.len() <= FRAMES_IN_MAKING));
        }
    }
}

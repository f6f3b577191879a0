//! Frames from memory: a file or a generated station, looped, or a board's share of its threads.

use std::sync::Arc;

use bytes::Bytes;

use super::{Frame, FrameSource};

/// Contiguous frames in memory, optionally looped: each pass after the first adds the file's
/// length in seconds to the frames' time. The memory may be shared by several sources, each
/// taking only some VDIF threads ([`MemorySource::only_threads`]): the boards of a backend that
/// each send their share of a station's threads.
#[derive(Debug, Clone)]
pub struct MemorySource {
    /// The frames: owned, shared, or a mapped file ([`Bytes`] over any of them).
    data: Bytes,
    frame_len: usize,
    pos: usize,
    /// Whole seconds the data span, 0 when not looping.
    loop_seconds: u32,
    add_seconds: u32,
    loops: u64,
    /// `keep[thread id]`: the frames handed out; `None` hands out every frame.
    keep: Option<Vec<bool>>,
}

impl MemorySource {
    /// Frames of `frame_len` bytes back to back in `data`; restarted at the end when
    /// `loop_seconds` (the seconds the data span) is not 0.
    pub fn new(data: Vec<u8>, frame_len: usize, loop_seconds: u32) -> MemorySource {
        MemorySource::from_bytes(Bytes::from(data), frame_len, loop_seconds)
    }

    /// [`MemorySource::new`] over memory other sources may read too.
    pub fn shared(data: Arc<Vec<u8>>, frame_len: usize, loop_seconds: u32) -> MemorySource {
        MemorySource::from_bytes(Bytes::from_owner(SharedVec(data)), frame_len, loop_seconds)
    }

    /// [`MemorySource::new`] over bytes held any way (a file mapped into memory: its pages are
    /// read as they are sent, never copied).
    pub fn from_bytes(data: Bytes, frame_len: usize, loop_seconds: u32) -> MemorySource {
        MemorySource {
            data,
            frame_len,
            pos: 0,
            loop_seconds,
            add_seconds: 0,
            loops: 0,
            keep: None,
        }
    }

    /// Every frame `seconds` later than the data say (a backend simulator starting in real time:
    /// the first pass's frames move to the next whole second ahead of the clock).
    pub fn later_by(mut self, seconds: u32) -> MemorySource {
        self.add_seconds = seconds;
        self
    }

    /// Hand out only the frames of these VDIF thread ids, in their order in memory (a frame
    /// whose header does not parse counts as thread 0).
    pub fn only_threads(mut self, threads: &[u16]) -> MemorySource {
        let mut keep = vec![false; threads.iter().map(|t| usize::from(*t) + 1).max().unwrap_or(0)];
        for t in threads {
            keep[usize::from(*t)] = true;
        }
        self.keep = Some(keep);
        self
    }

    /// Whether the frame at `at` is one this source hands out.
    fn kept(&self, at: usize) -> bool {
        let Some(keep) = &self.keep else {
            return true;
        };
        let thread = self
            .data
            .get(at..)
            .and_then(|f| vdif::VdifHeader::parse(f).ok())
            .map_or(0, |h| h.thread_id);
        keep.get(usize::from(thread)).copied().unwrap_or(false)
    }
}

/// A shared vector as the owner of [`Bytes`].
struct SharedVec(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedVec {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl FrameSource for MemorySource {
    fn next_frame(&mut self) -> Option<Frame<'_>> {
        // One pass without a kept frame ends the source (a loop would never find one).
        let mut restarts = 0;
        loop {
            if self.pos >= self.data.len() {
                if self.loop_seconds == 0 || self.data.is_empty() || restarts > 0 {
                    return None;
                }
                restarts += 1;
                self.pos = 0;
                self.loops += 1;
                self.add_seconds = self.add_seconds.saturating_add(self.loop_seconds);
            }
            let at = self.pos;
            self.pos += self.frame_len.max(1);
            if self.kept(at) {
                let bytes = self.data.get(at..self.pos)?;
                return Some(Frame {
                    bytes,
                    add_seconds: self.add_seconds,
                });
            }
        }
    }

    fn loops(&self) -> u64 {
        self.loops
    }
}

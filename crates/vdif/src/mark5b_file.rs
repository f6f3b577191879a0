//! Mark5B files as a sender reads them: a survey of contiguous frames (how many, their frame
//! rate, the first header) and a reader of whole frames from any `Read` that skips what is no
//! frame, resynchronising on the sync word.

use std::io::Read;

use thiserror::Error;

use crate::formats::{MARK5B_FRAME_LEN, MARK5B_SYNC_WORD};
use crate::mark5b::{Mark5bError, Mark5bHeader, MARK5B_MAX_FRAMES_PER_SECOND};
use crate::rate::FrameRate;

/// Whether `data` begins with a Mark5B sync word (the test a sender tells Mark5B from VDIF by:
/// a VDIF header's first word holds the seconds, never 0xABADDEED with a valid second).
pub fn starts_mark5b(data: &[u8]) -> bool {
    data.get(..4)
        .is_some_and(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) == MARK5B_SYNC_WORD)
}

/// What [`survey`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark5bSurvey {
    /// Frames.
    pub frames: u64,
    /// The first frame's header.
    pub first: Mark5bHeader,
    /// The lowest and the highest frame number.
    pub frame_numbers: (u16, u16),
    /// Frames per second: the highest frame number + 1, when the frames cross a second (else
    /// unknown: the numbers count up to an unseen total).
    pub frames_per_second: Option<FrameRate>,
}

/// Why bytes are not contiguous Mark5B frames.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Mark5bSurveyError {
    /// Not a whole number of frames.
    #[error("{0} bytes are no whole number of 10016-byte Mark5B frames")]
    NotWhole(u64),
    /// A frame's header does not parse.
    #[error("Mark5B frame {index} (offset {offset}): {source}")]
    Header {
        /// Frame index.
        index: u64,
        /// Its byte offset.
        offset: u64,
        /// Why.
        source: Mark5bError,
    },
    /// Frame numbers beyond what the 15-bit field counts in a second.
    #[error("Mark5B frame numbers up to {0}: more than {MARK5B_MAX_FRAMES_PER_SECOND} frames a second")]
    TooManyFrames(u32),
}

/// Survey `data`, which must be contiguous whole Mark5B frames with headers that parse.
pub fn survey(data: &[u8]) -> Result<Mark5bSurvey, Mark5bSurveyError> {
    if data.is_empty() || !data.len().is_multiple_of(MARK5B_FRAME_LEN) {
        return Err(Mark5bSurveyError::NotWhole(data.len() as u64));
    }
    let mut first = None;
    let (mut lo, mut hi) = (u16::MAX, 0u16);
    let mut seconds = None;
    let mut crossed = false;
    for (i, f) in data.chunks_exact(MARK5B_FRAME_LEN).enumerate() {
        let h = Mark5bHeader::parse(f).map_err(|source| Mark5bSurveyError::Header {
            index: i as u64,
            offset: (i * MARK5B_FRAME_LEN) as u64,
            source,
        })?;
        first.get_or_insert(h);
        lo = lo.min(h.frame_number);
        hi = hi.max(h.frame_number);
        let s = h.cycle_seconds();
        crossed |= seconds.is_some_and(|p| p != s);
        seconds = Some(s);
    }
    let total = u32::from(hi) + 1;
    let frames_per_second = if crossed {
        Some(FrameRate::new(total).map_err(|_| Mark5bSurveyError::TooManyFrames(total))?)
    } else {
        None
    };
    Ok(Mark5bSurvey {
        frames: (data.len() / MARK5B_FRAME_LEN) as u64,
        // Not empty: at least one frame was parsed.
        first: first.ok_or(Mark5bSurveyError::NotWhole(0))?,
        frame_numbers: (lo, hi),
        frames_per_second,
    })
}

/// What [`Mark5bFrames`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark5bEvent {
    /// A whole frame whose header parses.
    Frame(Vec<u8>),
    /// Bytes skipped: no frame starts there (up to the next sync word, or the end).
    Garbage(u64),
}

/// Whole Mark5B frames of a byte stream, in order; bytes that are no frame are skipped up to
/// the next sync word and said ([`Mark5bEvent::Garbage`]). Memory: two frames.
pub struct Mark5bFrames<R> {
    inner: R,
    buf: Vec<u8>,
    eof: bool,
}

impl<R: Read> Mark5bFrames<R> {
    /// Frames of `inner`.
    pub fn new(inner: R) -> Self {
        Mark5bFrames {
            inner,
            buf: Vec::with_capacity(2 * MARK5B_FRAME_LEN),
            eof: false,
        }
    }

    /// Fill the buffer up to one frame, unless the stream ends.
    fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 4096];
        while !self.eof && self.buf.len() < MARK5B_FRAME_LEN {
            let want = (MARK5B_FRAME_LEN - self.buf.len()).min(chunk.len());
            match self.inner.read(&mut chunk[..want]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl<R: Read> Iterator for Mark5bFrames<R> {
    type Item = std::io::Result<Mark5bEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.fill() {
            return Some(Err(e));
        }
        if self.buf.is_empty() {
            return None;
        }
        if self.buf.len() == MARK5B_FRAME_LEN && Mark5bHeader::parse(&self.buf).is_ok() {
            let frame = std::mem::replace(&mut self.buf, Vec::with_capacity(2 * MARK5B_FRAME_LEN));
            return Some(Ok(Mark5bEvent::Frame(frame)));
        }
        // No frame here: skip to the next sync word after the first byte (or all of it).
        let sync = MARK5B_SYNC_WORD.to_le_bytes();
        let skip = memchr::memmem::find(&self.buf[1..], &sync).map_or(self.buf.len(), |p| p + 1);
        // A cut sync word at the end stays for the next read.
        let keep_tail = if skip == self.buf.len() && !self.eof {
            3.min(skip - 1)
        } else {
            0
        };
        let skip = skip - keep_tail;
        self.buf.drain(..skip);
        Some(Ok(Mark5bEvent::Garbage(skip as u64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(sec: u32, n: u16) -> Vec<u8> {
        let fps = FrameRate::new(800).unwrap();
        let mut f = vec![0x5a; MARK5B_FRAME_LEN];
        Mark5bHeader::at(367, sec, n, fps).unwrap().emit(&mut f).unwrap();
        f
    }

    #[test]
    fn survey_counts_frames_and_learns_the_rate_across_a_second() {
        let data: Vec<u8> = (0..1200u32)
            .flat_map(|i| frame(10 + i / 800, (i % 800) as u16))
            .collect();
        let s = survey(&data).unwrap();
        assert_eq!(s.frames, 1200);
        assert_eq!(s.frames_per_second.map(FrameRate::get), Some(800));
        assert_eq!((s.first.second_of_day, s.frame_numbers), (10, (0, 799)));
        // Within one second the rate is not known.
        assert_eq!(survey(&data[..10 * MARK5B_FRAME_LEN]).unwrap().frames_per_second, None);
        assert_eq!(survey(&data[..100]), Err(Mark5bSurveyError::NotWhole(100)));
        let mut bad = data.clone();
        bad[3 * MARK5B_FRAME_LEN] = 0;
        assert!(matches!(survey(&bad), Err(Mark5bSurveyError::Header { index: 3, .. })));
    }

    #[test]
    fn frames_are_read_whole_and_garbage_between_them_is_skipped() {
        let mut data = frame(1, 0);
        data.extend_from_slice(&[7u8; 123]);
        data.extend(frame(1, 1));
        data.extend_from_slice(&frame(1, 2)[..5000]);
        let ev: Vec<_> = Mark5bFrames::new(&data[..]).map(Result::unwrap).collect();
        assert_eq!(ev[0], Mark5bEvent::Frame(frame(1, 0)));
        assert_eq!(ev[1], Mark5bEvent::Garbage(123));
        assert_eq!(ev[2], Mark5bEvent::Frame(frame(1, 1)));
        let tail: u64 = ev[3..]
            .iter()
            .map(|e| match e {
                Mark5bEvent::Garbage(n) => *n,
                Mark5bEvent::Frame(_) => panic!("a cut frame"),
            })
            .sum();
        assert_eq!(tail, 5000);
    }
}

//! The checked frame iterator ([`crate::check`] is its public home; it lives inside `inspect`
//! because it is built on the [`Inspector`], and `inspect` reads through it).

use std::io::{self, Read};

use super::{InspectError, InspectReport, Inspector};
use crate::formats::{identify, IDENTIFY_BYTES};
use crate::scan::{FrameScanner, ScanEvent};

/// A reader that keeps a copy of the first [`IDENTIFY_BYTES`] it hands out.
struct Prefix<R> {
    inner: R,
    kept: Vec<u8>,
    /// The inner reader has ended.
    ended: bool,
    /// Bytes handed out in all.
    total: u64,
}

impl<R: Read> Read for Prefix<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.kept.len() < IDENTIFY_BYTES {
            let take = n.min(IDENTIFY_BYTES - self.kept.len());
            self.kept.extend_from_slice(&buf[..take]);
        }
        self.total += n as u64;
        self.ended |= n == 0 && !buf.is_empty();
        Ok(n)
    }
}

/// Scanner events of a stream, each accounted for by an [`Inspector`]; [`CheckedFrames::finish`]
/// says whether the bytes read were VDIF, and what they are if not.
pub struct CheckedFrames<R: Read> {
    scanner: FrameScanner<Prefix<R>>,
    inspector: Inspector,
}

impl<R: Read> CheckedFrames<R> {
    /// Check `reader` from its current position. `fps_hint` supplies the frame rate when the
    /// stream is too short to show it.
    pub fn new(reader: R, fps_hint: Option<crate::rate::FrameRate>) -> Self {
        CheckedFrames {
            scanner: FrameScanner::new(Prefix {
                inner: reader,
                kept: Vec::new(),
                ended: false,
                total: 0,
            }),
            inspector: Inspector::new(fps_hint),
        }
    }

    /// The accounting so far.
    pub fn inspector(&self) -> &Inspector {
        &self.inspector
    }

    /// The report of the events returned so far, or why those bytes are not VDIF.
    pub fn finish(self) -> Result<InspectReport, InspectError> {
        let prefix = self.scanner.get_ref();
        let whole = prefix.ended && prefix.total == prefix.kept.len() as u64;
        match self.inspector.finish() {
            Err(InspectError::NotVdif {
                bytes,
                valid_percent,
                detail,
                format: None,
            }) => Err(InspectError::NotVdif {
                bytes,
                valid_percent,
                detail,
                format: identify(&prefix.kept, whole),
            }),
            other => other,
        }
    }
}

impl<R: Read> Iterator for CheckedFrames<R> {
    type Item = io::Result<ScanEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        let ev = self.scanner.next()?;
        if let Ok(e) = &ev {
            self.inspector.event(e);
        }
        Some(ev)
    }
}

/// Check the first `max_bytes` of `reader` (what `dump` does before it prints a frame: the whole
/// stream would be too long to read first).
pub fn check_start<R: Read>(reader: R, max_bytes: u64) -> Result<InspectReport, InspectError> {
    let mut frames = CheckedFrames::new(reader.take(max_bytes), None);
    for ev in frames.by_ref() {
        ev?;
    }
    frames.finish()
}

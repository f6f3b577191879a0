//! Frame scanner: walks a byte stream of VDIF frames, tolerating and reporting garbage.
//!
//! Real recordings contain junk: a truncated frame from a crashed recorder, a block of zeros,
//! a stray header with a broken length. Random or structured non-VDIF bytes (an executable, a
//! FITS file, a Mark4 recording) pass a single header check far too often for one header to be
//! believed, and joined copies of one file repeat whatever header-like bytes it holds at exactly
//! the spacing a bogus length field claims. So a header is believed only when it starts a
//! *run*: [`CONFIRM_FRAMES`] frames back to back, each starting exactly where the one before
//! ends, whose headers agree: the same *template* (the fields every frame of one recording
//! shares: layout, epoch; not station, thread or time), seconds within [`CONFIRM_MAX_STEP_S`]
//! of each other, and never the same station, thread, second and frame number twice in a row
//! (a copy, not a successor). A shorter run is believed only when it is the whole stream (a
//! file of one or two frames, the last possibly cut short).
//!
//! The rule holds everywhere, not only for the first frame: once locked, the scanner takes the
//! frame right after a believed one when its header fits the template, but after garbage it
//! believes the next header only when it starts such a run again. The bytes passed over are
//! reported as [`ScanEvent::Garbage`], so callers can say exactly where and how much.
//!
//! Memory is bounded whatever the input: the search moves through garbage with a window of at
//! most a few frames ([`MAX_SCAN_FRAME_LEN`] caps the frame length believed), and runs of zero
//! bytes (a length field of zero is never a frame) are skipped at memory speed.

use std::io::{self, Read};

use crate::header::{VdifHeader, HEADER_LEN, LEGACY_HEADER_LEN};

/// Something found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEvent {
    /// A complete frame.
    Frame {
        /// Byte offset of the frame in the stream.
        offset: u64,
        /// Its header.
        header: VdifHeader,
        /// The whole frame, header included.
        bytes: Vec<u8>,
    },
    /// Bytes that are not part of any frame.
    Garbage {
        /// Byte offset where the garbage starts.
        offset: u64,
        /// Number of bytes skipped.
        len: u64,
        /// Why the bytes at `offset` were not a frame.
        reason: String,
    },
    /// A frame cut short by the end of the stream.
    Truncated {
        /// Byte offset of the incomplete frame.
        offset: u64,
        /// Bytes present.
        len: u64,
        /// Bytes the header promised.
        expected: u64,
    },
}

pub use crate::sizes::MAX_SCAN_FRAME_LEN;
/// Frames back to back (the first included) whose headers must agree before the scanner
/// believes a header found after garbage or at the start of the stream.
pub const CONFIRM_FRAMES: usize = 3;
/// Seconds by which consecutive headers of a confirming run may differ.
pub const CONFIRM_MAX_STEP_S: u32 = 2;

/// Fields shared by all frames of one recording (stations, threads and times vary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Template {
    legacy: bool,
    ref_epoch: u8,
    version: u8,
    log2_channels: u8,
    frame_len_units: u32,
    complex: bool,
    bits_per_sample: u8,
}

impl Template {
    fn of(h: &VdifHeader) -> Self {
        Template {
            legacy: h.legacy,
            ref_epoch: h.ref_epoch,
            version: h.version,
            log2_channels: h.log2_channels,
            frame_len_units: h.frame_len_units,
            complex: h.complex,
            bits_per_sample: h.bits_per_sample,
        }
    }

    /// Word 2 of every header of this template (version, channels, length).
    fn word2(&self) -> u32 {
        (u32::from(self.version) << 29) | (u32::from(self.log2_channels) << 24) | self.frame_len_units
    }
}

/// What follows a frame of a candidate run.
enum Next {
    /// The header of the next frame, starting where this one ends.
    Follows(VdifHeader),
    /// The stream ends where the frame ends, or inside it (a last frame cut short).
    End,
    /// Something that does not continue the run.
    Nothing,
}

/// Whether `next`, found right after `prev`, is a successor of it: seconds close, and not a
/// copy of the same frame time of the same thread (joined copies of a file repeat every header).
fn succeeds(prev: &VdifHeader, next: &VdifHeader) -> bool {
    let key = |h: &VdifHeader| (h.station_id, h.thread_id, h.seconds, h.frame_number);
    next.seconds.abs_diff(prev.seconds) <= CONFIRM_MAX_STEP_S && key(next) != key(prev)
}

/// Iterator of [`ScanEvent`]s over any reader.
pub struct FrameScanner<R: Read> {
    reader: R,
    buf: Vec<u8>,
    /// Index in `buf` of the next unread byte.
    pos: usize,
    /// End of the valid bytes in `buf` (the rest is spare room).
    end: usize,
    /// Stream offset of `buf[0]`.
    buf_offset: u64,
    eof: bool,
    template: Option<Template>,
    /// The header at `pos` needs no run to be believed: it follows a frame directly, or the
    /// search through garbage has just confirmed it.
    vouched: bool,
    done: bool,
}

const READ_CHUNK: usize = 1 << 20;
const MIN_READ: usize = 1 << 16;

/// Index of the first nonzero byte: 64 bytes at a time as aligned words, which the compiler
/// turns into a few vector ORs (the scan over a zero-filled region runs at memory speed).
fn first_nonzero(b: &[u8]) -> Option<usize> {
    let (head, words, _) = bytemuck::pod_align_to::<u8, u64>(b);
    if let Some(i) = head.iter().position(|&x| x != 0) {
        return Some(i);
    }
    let mut at = head.len();
    for block in words.chunks(8) {
        if block.iter().fold(0, |a, &w| a | w) != 0 {
            break;
        }
        at += block.len() * 8;
    }
    b[at..].iter().position(|&x| x != 0).map(|i| at + i)
}

impl<R: Read> FrameScanner<R> {
    /// Scan `reader` from its current position (reported offsets start at 0).
    pub fn new(reader: R) -> Self {
        FrameScanner {
            reader,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            buf_offset: 0,
            eof: false,
            template: None,
            vouched: false,
            done: false,
        }
    }

    /// The reader being scanned (the scanner reads ahead of the events it has returned).
    pub fn get_ref(&self) -> &R {
        &self.reader
    }

    /// Make `n` bytes available at `pos` unless the stream ends first. Returns bytes available.
    fn fill(&mut self, n: usize) -> io::Result<usize> {
        while self.end - self.pos < n && !self.eof {
            // Room for what is needed, at least 64 KiB (few syscalls) and at most one chunk more
            // per read. Read bytes are dropped before the buffer grows, so it never holds more
            // than `n` plus one chunk; space already zeroed is reused, so a reader that returns
            // a few bytes per call costs no extra zeroing.
            let want = (n - (self.end - self.pos)).clamp(MIN_READ, READ_CHUNK);
            if self.buf.len() - self.end < want && self.pos > 0 {
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.buf_offset += self.pos as u64;
                self.pos = 0;
            }
            if self.buf.len() - self.end < want {
                self.buf.resize(self.end + want, 0);
            }
            let got = loop {
                match self.reader.read(&mut self.buf[self.end..]) {
                    Ok(k) => break k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            self.end += got;
            if got == 0 {
                self.eof = true;
            }
        }
        Ok(self.end - self.pos)
    }

    fn offset_of(&self, idx: usize) -> u64 {
        self.buf_offset + idx as u64
    }

    /// Header at `pos + rel` if one parses, is self-consistent, is not longer than
    /// [`MAX_SCAN_FRAME_LEN`] and fits the template.
    fn compatible(&self, rel: usize, template: Option<&Template>) -> Option<VdifHeader> {
        let bytes = self.buf.get(self.pos + rel..self.end)?;
        if bytes.len() < LEGACY_HEADER_LEN {
            return None;
        }
        if let Some(t) = template {
            // Cheap pre-check on word 2 (version, channels, length) before a full parse.
            let w2 = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            if w2 != t.word2() {
                return None;
            }
        }
        let h = VdifHeader::parse_valid(bytes).ok()?;
        if h.frame_len() > MAX_SCAN_FRAME_LEN {
            return None;
        }
        match template {
            Some(t) => (Template::of(&h) == *t).then_some(h),
            None => Some(h),
        }
    }

    /// The first position at or after `rel` and before `limit` whose length field could be that
    /// of a frame (of the template, once there is one). Needs `limit + 11` buffered bytes.
    fn next_possible(&self, mut rel: usize, limit: usize) -> usize {
        let b = &self.buf[self.pos..self.end];
        let want = self.template.map(|t| t.word2());
        let max_units = (MAX_SCAN_FRAME_LEN / 8) as u32;
        while rel < limit {
            if b[rel + 8] | b[rel + 9] | b[rel + 10] == 0 {
                // A zero length is never a frame: jump to where the next nonzero byte would
                // sit in a length field.
                match first_nonzero(&b[rel + 8..limit + 10]) {
                    None => return limit,
                    Some(j) => {
                        rel = (rel + 8 + j).saturating_sub(10).max(rel + 1);
                        continue;
                    }
                }
            }
            let units = u32::from_le_bytes([b[rel + 8], b[rel + 9], b[rel + 10], 0]);
            let possible = match want {
                Some(w2) => u32::from_le_bytes([b[rel + 8], b[rel + 9], b[rel + 10], b[rel + 11]]) == w2,
                None => (3..=max_units).contains(&units),
            };
            if possible {
                return rel;
            }
            rel += 1;
        }
        limit
    }

    /// What follows the frame `h` at `rel` in a candidate run of template `t`. The candidate
    /// itself (`first`) must be complete: random bytes often claim a long frame.
    fn next_of(&mut self, rel: usize, h: &VdifHeader, t: &Template, first: bool) -> io::Result<Next> {
        let len = h.frame_len();
        let have = self.fill(rel + len + HEADER_LEN)?;
        if have < rel + len {
            return Ok(if first { Next::Nothing } else { Next::End });
        }
        if have == rel + len {
            return Ok(Next::End);
        }
        Ok(match self.compatible(rel + len, Some(t)) {
            Some(n) if succeeds(h, &n) => Next::Follows(n),
            _ => Next::Nothing,
        })
    }

    /// Whether a candidate header at `rel` starts a run: [`CONFIRM_FRAMES`] frames back to
    /// back whose headers agree, or fewer that are the whole stream (a file of one or two
    /// frames). A short run after other bytes is not enough: the last of joined copies of a
    /// file ends exactly where the stream does.
    fn confirmed(&mut self, rel: usize, h: &VdifHeader) -> io::Result<bool> {
        let t = Template::of(h);
        let (mut at, mut cur) = (rel, *h);
        for seen in 1..CONFIRM_FRAMES {
            match self.next_of(at, &cur, &t, seen == 1)? {
                Next::Follows(n) => (at, cur) = (at + cur.frame_len(), n),
                Next::End => return Ok(self.offset_of(self.pos + rel) == 0),
                Next::Nothing => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Is there a frame start to believe at `pos + rel`? Right after a believed frame a header
    /// that fits the template is enough; anywhere else it must start a run.
    fn acceptable(&mut self, rel: usize, vouched: bool) -> io::Result<Option<VdifHeader>> {
        let template = self.template;
        match self.compatible(rel, template.as_ref()) {
            Some(h) if vouched && template.is_some() => Ok(Some(h)),
            Some(h) => Ok(self.confirmed(rel, &h)?.then_some(h)),
            None => Ok(None),
        }
    }

    fn why_not(&self) -> String {
        let bytes = self.buf.get(self.pos..self.end).unwrap_or(&[]);
        match VdifHeader::parse_valid(bytes) {
            Err(e) => format!("not a VDIF header: {e}"),
            Ok(h) if h.frame_len() > MAX_SCAN_FRAME_LEN => format!(
                "header claims {}-byte frames, more than the {} bytes evlbi believes",
                h.frame_len(),
                MAX_SCAN_FRAME_LEN
            ),
            Ok(h) if self.template.is_some() && self.compatible(0, self.template.as_ref()).is_none() => format!(
                "header does not match the stream ({} B frames, {} bit x {} ch{})",
                h.frame_len(),
                h.bits_per_sample,
                h.channels(),
                if h.complex { " complex" } else { "" }
            ),
            Ok(_) => {
                format!("header not confirmed: no run of {CONFIRM_FRAMES} frames back to back whose headers agree")
            }
        }
    }

    fn next_event(&mut self) -> io::Result<Option<ScanEvent>> {
        if self.done {
            return Ok(None);
        }
        // Ask for a full 32-byte header even though legacy ones need 16: a short read here
        // would make a good header look truncated.
        let have = self.fill(HEADER_LEN)?;
        if have == 0 {
            self.done = true;
            return Ok(None);
        }
        let vouched = std::mem::take(&mut self.vouched);
        if let Some(h) = self.acceptable(0, vouched)? {
            return self.take_frame(h).map(Some);
        }
        // Search forward for the next acceptable header, dropping what is passed over so that
        // memory stays bounded however long the garbage is.
        let reason = self.why_not();
        let start = self.offset_of(self.pos);
        self.pos += 1;
        loop {
            // A chunk per pass, so that long garbage costs few reads and passes.
            let avail = self.fill(READ_CHUNK)?;
            if avail < LEGACY_HEADER_LEN {
                // No header fits before the end: everything left is garbage.
                self.pos += avail;
                self.done = true;
                let len = self.offset_of(self.pos) - start;
                return Ok(Some(ScanEvent::Garbage {
                    offset: start,
                    len,
                    reason,
                }));
            }
            // Positions examined in this pass: all with a full header buffered (at the end of
            // the stream, with at least a legacy header).
            let limit = avail + 1 - if self.eof { LEGACY_HEADER_LEN } else { HEADER_LEN };
            let mut rel = 0;
            loop {
                rel = self.next_possible(rel, limit);
                if rel >= limit {
                    break;
                }
                if self.acceptable(rel, false)?.is_some() {
                    self.pos += rel;
                    self.vouched = true;
                    let len = self.offset_of(self.pos) - start;
                    return Ok(Some(ScanEvent::Garbage {
                        offset: start,
                        len,
                        reason,
                    }));
                }
                rel += 1;
            }
            self.pos += limit;
        }
    }

    fn take_frame(&mut self, h: VdifHeader) -> io::Result<ScanEvent> {
        let len = h.frame_len();
        let offset = self.offset_of(self.pos);
        let have = self.fill(len)?;
        if have < len {
            self.pos += have;
            self.done = true;
            return Ok(ScanEvent::Truncated {
                offset,
                len: have as u64,
                expected: len as u64,
            });
        }
        let bytes = self.buf[self.pos..self.pos + len].to_vec();
        self.pos += len;
        self.template = Some(Template::of(&h));
        self.vouched = true;
        Ok(ScanEvent::Frame {
            offset,
            header: h,
            bytes,
        })
    }
}

impl<R: Read> Iterator for FrameScanner<R> {
    type Item = io::Result<ScanEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_event() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The word-wise search agrees with a byte-by-byte one at every alignment.
        #[test]
        fn first_nonzero_matches_a_plain_search(len in 0usize..600, at in proptest::option::of(0usize..600), skip in 0usize..8) {
            let mut b = vec![0u8; len + skip];
            if let Some(a) = at.filter(|a| *a < len) {
                b[skip + a] = 0x40;
            }
            let s = &b[skip..];
            prop_assert_eq!(first_nonzero(s), s.iter().position(|&x| x != 0));
        }
    }
}

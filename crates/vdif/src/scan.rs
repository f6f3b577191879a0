//! Frame scanner: walks a byte stream of VDIF frames, tolerating and reporting garbage.
//!
//! Real recordings contain junk: a truncated frame from a crashed recorder, a block of zeros,
//! a stray header with a broken length. The scanner locks onto a *template* (the fields every
//! frame of one recording shares: layout, epoch; not station, thread or time) only after
//! [`CONFIRM_FRAMES`] headers agree, each one frame after the other (junk of up to
//! [`MAX_JUNK_BETWEEN`] bytes allowed between them) with seconds within
//! [`CONFIRM_MAX_STEP_S`] of each other; a file shorter than that is believed when its frames
//! end exactly where the file does. Random or structured non-VDIF bytes (an executable, a FITS
//! file) pass a single header check far too often for one header to be believed.
//!
//! Once locked it expects frames back to back. When the bytes at the expected position are not
//! a compatible header it searches forward for the next one and reports the bytes skipped as
//! [`ScanEvent::Garbage`], so callers can say exactly where and how much.
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

/// Largest frame (header included) the scanner believes. VDIF allows 134 MB, but frames in the
/// field are a few kB (8032, 5032, Mark5B-in-VDIF 10016; a jumbo datagram holds 9000), and
/// every byte of a claimed length is buffered before a header is believed: the cap is what
/// bounds memory on garbage.
pub const MAX_SCAN_FRAME_LEN: usize = 4 << 20;
/// Headers (the first included) that must agree before the scanner believes a layout.
pub const CONFIRM_FRAMES: usize = 3;
/// Junk allowed between the frames of a confirming run (a damaged frame between good ones).
pub const MAX_JUNK_BETWEEN: usize = 64 << 10;
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

/// What follows a complete frame of a candidate run.
enum Next {
    /// A compatible header at this position (relative to `pos`).
    At(usize, VdifHeader),
    /// The stream ends at the frame's end (or fewer bytes than a header remain).
    End,
    /// Only junk until the end of the stream.
    JunkToEnd,
    /// Nothing that continues the run.
    Nothing,
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
    /// Frames whose header is not consistent on its own are never reported as frames.
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
            done: false,
        }
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

    /// What follows the frame `h` at `rel` (a link of a confirming run). The candidate itself
    /// (`first`) must be complete: random bytes often claim a long frame; a later frame of the
    /// run cut by the end of the stream is a truncated last frame.
    fn next_of(&mut self, rel: usize, h: &VdifHeader, t: &Template, first: bool) -> io::Result<Next> {
        let len = h.frame_len();
        let have = self.fill(rel + len + MAX_JUNK_BETWEEN + HEADER_LEN)?;
        if have < rel + len {
            return Ok(if first { Next::Nothing } else { Next::End });
        }
        if have < rel + len + HEADER_LEN {
            return Ok(Next::End);
        }
        let near = |n: &VdifHeader| n.seconds.abs_diff(h.seconds) <= CONFIRM_MAX_STEP_S;
        if let Some(n) = self.compatible(rel + len, Some(t)).filter(near) {
            return Ok(Next::At(rel + len, n));
        }
        // Junk after the frame: the next header with the template's word 2, found fast.
        let last = (rel + len + MAX_JUNK_BETWEEN).min(have - HEADER_LEN);
        let needle = t.word2().to_le_bytes();
        let mut from = rel + len + 1;
        while from <= last {
            let hay = &self.buf[self.pos + from + 8..self.pos + last + 12];
            let Some(i) = memchr::memmem::find(hay, &needle) else {
                break;
            };
            let p = from + i;
            if let Some(n) = self.compatible(p, Some(t)).filter(near) {
                // A compatible header inside the frame would make it a truncated one.
                let inside = (rel + 1..rel + len).any(|q| self.compatible(q, Some(t)).is_some());
                return Ok(if inside { Next::Nothing } else { Next::At(p, n) });
            }
            from = p + 1;
        }
        Ok(if self.eof && last == have - HEADER_LEN {
            Next::JunkToEnd
        } else {
            Next::Nothing
        })
    }

    /// Whether a candidate first header at `rel` is confirmed by the stream after it: a run of
    /// [`CONFIRM_FRAMES`] agreeing headers, or fewer ending where the stream ends.
    fn confirmed(&mut self, rel: usize, h: &VdifHeader) -> io::Result<bool> {
        let t = Template::of(h);
        let (mut at, mut cur) = (rel, *h);
        for seen in 1..CONFIRM_FRAMES {
            match self.next_of(at, &cur, &t, seen == 1)? {
                Next::At(p, n) => (at, cur) = (p, n),
                Next::End => return Ok(true),
                Next::JunkToEnd => return Ok(seen >= 2),
                Next::Nothing => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Is there an acceptable frame start at `pos + rel`?
    fn acceptable(&mut self, rel: usize) -> io::Result<Option<VdifHeader>> {
        let template = self.template;
        match self.compatible(rel, template.as_ref()) {
            Some(h) if template.is_some() => Ok(Some(h)),
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
            Ok(h) => match &self.template {
                Some(_) => format!(
                    "header does not match the stream ({} B frames, {} bit x {} ch{})",
                    h.frame_len(),
                    h.bits_per_sample,
                    h.channels(),
                    if h.complex { " complex" } else { "" }
                ),
                None => format!("header not confirmed by {} consecutive frames", CONFIRM_FRAMES),
            },
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
        if let Some(h) = self.acceptable(0)? {
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
                if self.acceptable(rel)?.is_some() {
                    self.pos += rel;
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

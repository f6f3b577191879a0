//! Frame scanner: walks a byte stream of VDIF frames, tolerating and reporting garbage.
//!
//! Real recordings contain junk: a truncated frame from a crashed recorder, a block of zeros,
//! a stray header with a broken length. The scanner locks onto a *template* (the fields every
//! frame of one stream shares) only after two consecutive headers agree, then expects frames
//! back to back. When the bytes at the expected position are not a compatible header it
//! searches forward byte by byte for the next compatible one and reports the bytes skipped as
//! [`ScanEvent::Garbage`], so callers can say exactly where and how much.

use std::io::{self, Read};

use crate::header::{VdifHeader, HEADER_LEN, LEGACY_HEADER_LEN, MAX_FRAME_LEN};

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

/// Fields shared by all frames of one stream (thread ids and times vary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Template {
    legacy: bool,
    ref_epoch: u8,
    version: u8,
    log2_channels: u8,
    frame_len_units: u32,
    complex: bool,
    bits_per_sample: u8,
    station_id: u16,
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
            station_id: h.station_id,
        }
    }
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
            if self.pos > 0 && self.pos >= self.end / 2 {
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.buf_offset += self.pos as u64;
                self.pos = 0;
            }
            // Room for what is needed, at least 64 KiB (few syscalls) and at most one chunk more
            // per read: a header claiming a huge length must not make us allocate hundreds of
            // megabytes that the stream may never supply. Space already zeroed is reused, so a
            // reader that returns a few bytes per call costs no extra zeroing.
            let want = (n - (self.end - self.pos)).clamp(MIN_READ, READ_CHUNK);
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

    /// Header at `buf[idx..]` if one parses, is self-consistent and fits the template.
    fn compatible(&self, idx: usize, template: Option<&Template>) -> Option<VdifHeader> {
        let bytes = self.buf.get(idx..self.end)?;
        if bytes.len() < LEGACY_HEADER_LEN {
            return None;
        }
        if let Some(t) = template {
            // Cheap pre-check on word 2 (version, channels, length) before a full parse.
            let w2 = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            let want = (u32::from(t.version) << 29) | (u32::from(t.log2_channels) << 24) | t.frame_len_units;
            if w2 != want {
                return None;
            }
        }
        let h = VdifHeader::parse_valid(bytes).ok()?;
        if h.frame_len() > MAX_FRAME_LEN {
            return None;
        }
        match template {
            Some(t) => (Template::of(&h) == *t).then_some(h),
            None => Some(h),
        }
    }

    /// Whether a candidate first header at `idx` is confirmed by the stream around it:
    /// - the next compatible header sits exactly one frame later, or the stream ends there;
    /// - or the next compatible header comes later than that (junk after a complete frame).
    ///
    /// A compatible header *inside* the candidate means the candidate is a truncated frame,
    /// and a candidate running past the end is rejected: random bytes often claim a huge length.
    fn confirmed(&mut self, idx: usize, h: &VdifHeader) -> io::Result<bool> {
        let len = h.frame_len();
        let hdr = h.header_len();
        let rel = idx - self.pos;
        let have = self.fill(rel + 2 * len + hdr)?;
        if have < rel + len {
            return Ok(false);
        }
        if have < rel + len + hdr {
            return Ok(true);
        }
        let t = Template::of(h);
        // fill() may have compacted the buffer, so index from `pos` again.
        let base = self.pos + rel;
        if self.compatible(base + len, Some(&t)).is_some() {
            return Ok(true);
        }
        let last = (rel + 2 * len).min(have.saturating_sub(hdr));
        for p in rel + 1..=last {
            if self.compatible(self.pos + p, Some(&t)).is_some() {
                return Ok(p > rel + len);
            }
        }
        Ok(false)
    }

    /// Is there an acceptable frame start at `idx`?
    fn acceptable(&mut self, idx: usize) -> io::Result<Option<VdifHeader>> {
        let template = self.template;
        match self.compatible(idx, template.as_ref()) {
            Some(h) if template.is_some() => Ok(Some(h)),
            Some(h) => Ok(self.confirmed(idx, &h)?.then_some(h)),
            None => Ok(None),
        }
    }

    fn why_not(&self, idx: usize) -> String {
        let bytes = self.buf.get(idx..self.end).unwrap_or(&[]);
        match VdifHeader::parse_valid(bytes) {
            Err(e) => format!("not a VDIF header: {e}"),
            Ok(h) => match &self.template {
                Some(_) => format!(
                    "header does not match the stream (station {}, {} B frames, {} bit x {} ch)",
                    h.station_name(),
                    h.frame_len(),
                    h.bits_per_sample,
                    h.channels()
                ),
                None => "header not confirmed by a following frame".to_string(),
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
        let start = self.pos;
        if let Some(h) = self.acceptable(start)? {
            return self.take_frame(start, h).map(Some);
        }
        // Search forward for the next acceptable header.
        let reason = self.why_not(start);
        let mut rel = 1;
        loop {
            let avail = self.fill(rel + HEADER_LEN)?;
            // fill() may have compacted the buffer: recompute indexes relative to pos.
            let start_off = self.offset_of(self.pos);
            if avail < rel + LEGACY_HEADER_LEN {
                // No header fits before the end: everything left is garbage.
                let len = avail as u64;
                self.pos += avail;
                self.done = true;
                return Ok(Some(ScanEvent::Garbage {
                    offset: start_off,
                    len,
                    reason,
                }));
            }
            if self.acceptable(self.pos + rel)?.is_some() {
                self.pos += rel;
                return Ok(Some(ScanEvent::Garbage {
                    offset: start_off,
                    len: rel as u64,
                    reason,
                }));
            }
            rel += 1;
        }
    }

    fn take_frame(&mut self, idx: usize, h: VdifHeader) -> io::Result<ScanEvent> {
        let len = h.frame_len();
        let offset = self.offset_of(idx);
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

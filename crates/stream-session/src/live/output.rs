//! The receiver's side of a live output ([`LiveOutput`]): frames in time order gathered into
//! chunks and handed to its writer thread through a queue bounded in bytes (see the module
//! docs of [`super`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stream::results::LiveOutputStatus;

use super::writer::{writer, StartRule};
use super::Connector;

/// A chunk is handed over once it holds this much, batch or not.
const CHUNK_BYTES: usize = 512 << 10;

/// The counts one output shares between the receiver and its writer thread.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// See [`LiveOutputStatus`].
    pub clients: AtomicU64,
    /// See [`LiveOutputStatus`].
    pub clients_refused: AtomicU64,
    /// See [`LiveOutputStatus`].
    pub bad_requests: AtomicU64,
    pub(super) frames_sent: AtomicU64,
    pub(super) filled_sent: AtomicU64,
    pub(super) bytes_sent: AtomicU64,
    pub(super) skipped_at_start: AtomicU64,
}

pub(super) fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// A frame's place in a chunk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    /// Offset of its stored bytes in the chunk.
    pub(super) start: u32,
    /// Bytes stored (the header alone for a filled frame).
    pub(super) stored: u32,
    /// Its length on the wire (the fill pattern after the stored bytes).
    pub(super) len: u32,
    pub(super) filled: bool,
    /// First frame of its VDIF time.
    pub(super) step: bool,
}

/// Frames handed over together.
#[derive(Debug, Default)]
pub(super) struct Chunk {
    pub(super) data: Vec<u8>,
    pub(super) marks: Vec<Mark>,
    /// Frames before it were dropped: the reader resumes at a time step.
    pub(super) resync: bool,
}

impl Chunk {
    pub(super) fn clear(&mut self) {
        self.data.clear();
        self.marks.clear();
        self.resync = false;
    }
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) chunks: VecDeque<Chunk>,
    pub(super) bytes: u64,
    pub(super) peak: u64,
    /// Emptied chunks, for reuse.
    pub(super) free: Vec<Chunk>,
    pub(super) writer_waiting: bool,
    pub(super) last_disconnect: Option<String>,
}

pub(super) struct Shared {
    pub(super) q: Mutex<Queue>,
    pub(super) cv: Condvar,
    pub(super) counts: LiveCounts,
    pub(super) connected: AtomicBool,
    pub(super) stop: AtomicBool,
    /// When a stop asked the writer to let the queue go (a reader not reading by then).
    pub(super) drain_until: Mutex<Option<Instant>>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The receiver's side of one live output; its writer thread runs until [`LiveOutput::finish`].
pub struct LiveOutput {
    shared: Arc<Shared>,
    endpoint: String,
    capacity: u64,
    chunk: Chunk,
    /// The station it carries: named, or the first to come.
    station: Option<u16>,
    /// VDIF time (epoch, second, frame) of the last frame taken.
    last_time: Option<(u32, u32, u32)>,
    /// A chunk was dropped: the next one handed over resumes at a time step.
    resync: bool,
    /// The frames' format (their time and header length are read in it).
    format: vdif::FrameFormat,
    frames_in: u64,
    dropped_no_reader: u64,
    dropped_slow: u64,
    behind: u64,
    writer: Option<JoinHandle<()>>,
}

impl LiveOutput {
    /// An output serving `connector`'s readers with up to `capacity` bytes queued, for `station`
    /// (a VDIF station id) or, `None`, the first station whose frames come.
    pub fn start(
        mut connector: Box<dyn Connector>,
        station: Option<u16>,
        capacity: u64,
        rule: StartRule,
    ) -> std::io::Result<LiveOutput> {
        let shared = Arc::new(Shared {
            q: Mutex::default(),
            cv: Condvar::new(),
            counts: LiveCounts::default(),
            connected: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            drain_until: Mutex::new(None),
        });
        let endpoint = connector.endpoint();
        let s = shared.clone();
        let writer = std::thread::Builder::new()
            .name("live-writer".into())
            .spawn(move || writer(&s, connector.as_mut(), rule))?;
        Ok(LiveOutput {
            shared,
            endpoint,
            capacity: capacity.max(CHUNK_BYTES as u64 * 2),
            chunk: Chunk::default(),
            station,
            last_time: None,
            resync: false,
            format: vdif::FrameFormat::Vdif,
            frames_in: 0,
            dropped_no_reader: 0,
            dropped_slow: 0,
            behind: 0,
            writer: Some(writer),
        })
    }

    /// It carries frames of `format` (VDIF until said).
    pub fn set_frame_format(&mut self, format: vdif::FrameFormat) {
        self.format = format;
    }

    /// The station it carries, once known.
    pub fn station(&self) -> Option<u16> {
        self.station
    }

    /// Whether it takes frames of `station` (claiming it when it carries the first to come).
    pub fn takes(&mut self, station: u16) -> bool {
        match self.station {
            Some(s) => s == station,
            None => {
                self.station = Some(station);
                true
            }
        }
    }

    /// One frame, in time order (from the receiver's window): queued for the reader, or counted.
    pub fn frame(&mut self, frame: &[u8], filled: bool) {
        self.frames_in += 1;
        let Some(time) = frame_time(self.format, frame) else {
            self.behind += 1;
            return;
        };
        if self.last_time.is_some_and(|last| time < last) {
            // The stream went back in time (a sender restarted earlier): never sent.
            self.behind += 1;
            return;
        }
        let step = self.last_time != Some(time);
        self.last_time = Some(time);
        if !self.shared.connected.load(Ordering::Relaxed) {
            self.dropped_no_reader += 1;
            return;
        }
        // A filled frame is the stream's header with the fill pattern: its header alone is queued.
        let stored = if filled {
            self.format_header_len(frame).min(frame.len())
        } else {
            frame.len()
        };
        let start = self.chunk.data.len();
        self.chunk.data.extend_from_slice(&frame[..stored]);
        self.chunk.marks.push(Mark {
            start: start as u32,
            stored: stored as u32,
            len: frame.len() as u32,
            filled,
            step,
        });
        if self.chunk.data.len() >= CHUNK_BYTES {
            self.flush();
        }
    }

    /// The header bytes of `frame` in the output's format.
    fn format_header_len(&self, frame: &[u8]) -> usize {
        match self.format {
            vdif::FrameFormat::Vdif => header_len(frame),
            other => other.header_len(),
        }
    }

    /// Hand what was gathered to the writer (after every receive batch): or, the queue full,
    /// drop it (counted) and resume the reader's stream at a time step.
    pub fn flush(&mut self) {
        if self.chunk.marks.is_empty() {
            return;
        }
        let mut q = self.shared.lock();
        let bytes = self.chunk.data.len() as u64;
        if q.bytes + bytes > self.capacity {
            drop(q);
            self.dropped_slow += self.chunk.marks.len() as u64;
            self.chunk.clear();
            self.resync = true;
            return;
        }
        let fresh = q.free.pop().unwrap_or_default();
        let mut chunk = std::mem::replace(&mut self.chunk, fresh);
        chunk.resync = std::mem::take(&mut self.resync);
        q.chunks.push_back(chunk);
        q.bytes += bytes;
        q.peak = q.peak.max(q.bytes);
        if q.writer_waiting {
            self.shared.cv.notify_one();
        }
    }

    /// Its counts now.
    pub fn status(&self) -> LiveOutputStatus {
        let c = &self.shared.counts;
        let q = self.shared.lock();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LiveOutputStatus {
            endpoint: self.endpoint.clone(),
            station: self.station.map(|s| vdif::StationId(s).to_string()),
            connected: self.shared.connected.load(Ordering::Relaxed),
            clients: get(&c.clients),
            clients_refused: get(&c.clients_refused),
            bad_requests: get(&c.bad_requests),
            frames_in: self.frames_in,
            frames_sent: get(&c.frames_sent),
            filled_sent: get(&c.filled_sent),
            bytes_sent: get(&c.bytes_sent),
            dropped_no_reader: self.dropped_no_reader,
            dropped_slow_reader: self.dropped_slow,
            skipped_at_start: get(&c.skipped_at_start),
            behind: self.behind,
            queued_bytes: q.bytes,
            queued_peak_bytes: q.peak,
            last_disconnect: q.last_disconnect.clone(),
        }
    }

    /// Stop: what is queued goes to a reader still reading for up to `drain`, then the
    /// connection closes. The final counts.
    pub fn finish(mut self, drain: Duration) -> LiveOutputStatus {
        self.flush();
        *self.shared.drain_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + drain);
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.cv.notify_all();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        self.status()
    }
}

impl Drop for LiveOutput {
    fn drop(&mut self) {
        if let Some(w) = self.writer.take() {
            self.shared.stop.store(true, Ordering::Relaxed);
            self.shared.cv.notify_all();
            let _ = w.join();
        }
    }
}

/// (epoch, second, frame number) of a VDIF frame (VDIF 1.1.1 §3: word 0 bits 0-29, word 1 bits
/// 0-23 and 24-29), compared as a time.
fn vdif_time(frame: &[u8]) -> Option<(u32, u32, u32)> {
    let word = |i: usize| {
        frame
            .get(i * 4..i * 4 + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (w0, w1) = (word(0)?, word(1)?);
    Some(((w1 >> 24) & 0x3f, w0 & 0x3fff_ffff, w1 & 0x00ff_ffff))
}

/// A frame's time in `format`, compared as a time: VDIF's (epoch, second, frame number); a
/// Mark5B frame's (0, second of its time code's 1000-day cycle, frame number).
fn frame_time(format: vdif::FrameFormat, frame: &[u8]) -> Option<(u32, u32, u32)> {
    match format {
        vdif::FrameFormat::Vdif => vdif_time(frame),
        vdif::FrameFormat::Mark5b => {
            let h = vdif::Mark5bHeader::parse(frame).ok()?;
            Some((0, u32::try_from(h.cycle_seconds()).ok()?, u32::from(h.frame_number)))
        }
    }
}

/// 16 bytes for a legacy header (word 0 bit 30), else 32.
fn header_len(frame: &[u8]) -> usize {
    match frame.get(3) {
        Some(b) if b & 0x40 != 0 => 16,
        _ => 32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_header_lengths_from_the_frame() {
        let words = |w0: u32, w1: u32| {
            let mut f = vec![0u8; 32];
            f[..4].copy_from_slice(&w0.to_le_bytes());
            f[4..8].copy_from_slice(&w1.to_le_bytes());
            f
        };
        let f = words(1000, (50 << 24) | 7);
        assert_eq!(vdif_time(&f), Some((50, 1000, 7)));
        assert_eq!(header_len(&f), 32);
        // Invalid and legacy bits are not time.
        let f = words((3 << 30) | 1000, (50 << 24) | 7);
        assert_eq!(vdif_time(&f), Some((50, 1000, 7)));
        assert_eq!(header_len(&f), 16);
        assert_eq!(vdif_time(&f[..7]), None);
    }
}

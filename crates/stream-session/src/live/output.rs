//! The receiver's side of a live output ([`LiveOutput`]): frames in time order gathered into
//! chunks and handed to its writer thread through a queue bounded in bytes (see the module
//! docs of [`super`]).

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stream::results::LiveOutputStatus;

use super::writer::{writer, StartRule};
use super::{Connector, LiveConn};

/// A chunk is handed over once it holds this much, batch or not.
const CHUNK_BYTES: usize = 512 << 10;
/// Room a chunk is made with: a chunk that grew by doubling copied its frames again at each
/// step (half the receiver's page faults at 4 Gb/s were `realloc`'s, perf, issue 35).
const CHUNK_ROOM: usize = CHUNK_BYTES + (16 << 10);

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
    /// Sends straight from the receiver that the socket took only part of (the rest queued).
    pub(super) direct_partial: AtomicU64,
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
    /// Bytes of its first frame already written (sent straight from the receiver, in part).
    pub(super) skip: u32,
}

impl Chunk {
    fn with_room() -> Chunk {
        Chunk {
            data: Vec::with_capacity(CHUNK_ROOM),
            ..Chunk::default()
        }
    }

    pub(super) fn clear(&mut self) {
        self.data.clear();
        self.marks.clear();
        self.resync = false;
        self.skip = 0;
    }
}

/// `m`'s bytes on the wire: its stored bytes, then (filled) the fill pattern from `fill`.
pub(super) fn frame_slices<'a>(out: &mut Vec<IoSlice<'a>>, data: &'a [u8], m: &Mark, fill: &'a [u8]) {
    let (start, stored) = (m.start as usize, m.stored as usize);
    out.push(IoSlice::new(&data[start..start + stored]));
    let mut pad = (m.len - m.stored) as usize;
    while pad > 0 {
        let n = pad.min(fill.len());
        out.push(IoSlice::new(&fill[..n]));
        pad -= n;
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
    /// The reader's connection, for sends straight from the receiver while nothing is queued.
    pub(super) direct: Option<LiveConn>,
    /// The writer holds a chunk it is writing (the receiver must not write meanwhile).
    pub(super) writing: bool,
    /// The reader's stream (re)starts at the next time step: only the writer starts it.
    pub(super) at_start: bool,
}

pub(super) struct Shared {
    pub(super) q: Mutex<Queue>,
    pub(super) cv: Condvar,
    pub(super) counts: LiveCounts,
    pub(super) connected: AtomicBool,
    pub(super) stop: AtomicBool,
    /// When a stop asked the writer to let the queue go (a reader not reading by then).
    pub(super) drain_until: Mutex<Option<Instant>>,
    /// What follows a filled frame's header: the fill pattern, as the window fills (DiFX's
    /// INTERLACEDVDIF readers skip it; zeros they correlated as samples).
    pub(super) fill: Vec<u8>,
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
    station: Option<vdif::StationId>,
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
        station: Option<vdif::StationId>,
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
            fill: {
                let mut fill = vec![0u8; 65_536];
                stream::feed::fill_data(&mut fill, 0);
                fill
            },
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
            chunk: Chunk::with_room(),
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
    pub fn station(&self) -> Option<vdif::StationId> {
        self.station
    }

    /// Whether it takes frames of `station` (claiming it when it carries the first to come).
    pub fn takes(&mut self, station: vdif::StationId) -> bool {
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
    /// drop it (counted) and resume the reader's stream at a time step. With nothing queued
    /// or being written, the socket takes what it can straight from here first (no wake of
    /// the writer, the frames still in this core's cache) and only the rest is queued.
    pub fn flush(&mut self) {
        if self.chunk.marks.is_empty() {
            return;
        }
        let mut q = self.shared.lock();
        // The lock held, the writer can neither start a chunk nor a new reader meanwhile.
        if !self.resync && q.chunks.is_empty() && !q.writing && !q.at_start {
            if let Some(conn) = q.direct.as_ref() {
                if send_direct(&self.shared, conn, &mut self.chunk) {
                    self.chunk.clear();
                    return;
                }
            }
        }
        let bytes = self.chunk.data.len() as u64;
        if q.bytes + bytes > self.capacity {
            drop(q);
            self.dropped_slow += self.chunk.marks.len() as u64;
            self.chunk.clear();
            self.resync = true;
            return;
        }
        let fresh = q.free.pop().unwrap_or_else(Chunk::with_room);
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
            station: self.station.map(|s| s.to_string()),
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

/// What of `chunk` the reader's socket takes now, counted as sent; the frames it took wholly
/// are let go, and a frame it took in part is `chunk.skip` into the rest. Whether it took all.
/// A socket that takes nothing (full, or the reader gone) leaves it all for the writer, which
/// waits for the reader or finds it gone.
fn send_direct(shared: &Shared, conn: &LiveConn, chunk: &mut Chunk) -> bool {
    let mut slices = Vec::with_capacity(chunk.marks.len() * 2);
    for m in &chunk.marks {
        frame_slices(&mut slices, &chunk.data, m, &shared.fill);
    }
    let Ok(mut left) = conn.send_now(&slices) else {
        return false;
    };
    let (mut whole, mut filled, mut bytes) = (0usize, 0u64, 0u64);
    for m in &chunk.marks {
        let len = m.len as usize;
        if left < len {
            break;
        }
        left -= len;
        whole += 1;
        filled += u64::from(m.filled);
        bytes += u64::from(m.len);
    }
    let c = &shared.counts;
    add(&c.frames_sent, whole as u64);
    add(&c.filled_sent, filled);
    add(&c.bytes_sent, bytes);
    chunk.marks.drain(..whole);
    chunk.skip = left as u32;
    if left > 0 {
        add(&c.direct_partial, 1);
    }
    chunk.marks.is_empty()
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
    use std::io::{Read, Write};

    const FRAME: usize = 8032;

    /// Frame `i` (a time step of its own): VDIF header, then data no other frame has.
    fn frame(i: u32) -> Vec<u8> {
        let mut f: Vec<u8> = (0..FRAME)
            .map(|k| (k as u32 ^ i.wrapping_mul(2_654_435_761)) as u8)
            .collect();
        f[..4].copy_from_slice(&(1000 + i / 100_000).to_le_bytes());
        f[4..8].copy_from_slice(&((50u32 << 24) | (i % 100_000)).to_le_bytes());
        f[8..12].copy_from_slice(&((FRAME / 8) as u32).to_le_bytes());
        f[12..16].copy_from_slice(&0u32.to_le_bytes());
        f
    }

    /// A reader that takes less than a frame per read and pauses now and then, so the
    /// receiver's sends straight to the socket are taken in part and the rest goes through the
    /// writer: the reader still gets every byte, in order (filled frames with the fill pattern).
    #[test]
    fn a_reader_taking_part_of_a_frame_per_read_gets_every_byte_in_order() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::sync::Arc::new(safedir::Dir::open(t.path()).unwrap());
        let l = super::super::sfxc::SfxcListener::bind(super::super::sfxc::SfxcAddr::Unix {
            dir,
            name: "part".into(),
        })
        .unwrap();
        let mut out = LiveOutput::start(Box::new(l), None, 256 << 20, StartRule::default()).unwrap();
        let mut r = std::os::unix::net::UnixStream::connect(t.path().join("part")).unwrap();
        let mut req = [0u8; 24];
        req[..5].copy_from_slice(b"EF001");
        r.write_all(&req).unwrap();
        r.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let t0 = Instant::now();
        while !out.shared.connected.load(Ordering::Relaxed) {
            assert!(t0.elapsed() < Duration::from_secs(20), "never connected");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Phase 1, no thread: the test reads only when the writer is stuck on a full socket.
        // A batch sent straight from the receiver into a socket with some room (taken whole
        // skbs at a time) is then taken in part on any kernel and buffer size, and the rest
        // goes to the writer with its first frame part-written. Batches of 13, 16 and 17
        // frames so the socket's room never keeps lining up with a batch's end.
        let mut expected = Vec::new();
        let mut fill = vec![0u8; FRAME];
        stream::feed::fill_data(&mut fill, 0);
        let mut i = 0u32;
        let mut got = Vec::new();
        let mut buf = [0u8; 1000];
        let feed = |out: &mut LiveOutput, expected: &mut Vec<u8>, i: &mut u32, n: u32| {
            for _ in 0..n {
                let f = frame(*i);
                // Every 7th filled: its header alone is queued, the fill pattern written after it.
                let filled = *i % 7 == 3;
                out.frame(&f, filled);
                expected.extend_from_slice(if filled { &f[..32] } else { &f[..] });
                if filled {
                    expected.extend_from_slice(&fill[32..]);
                }
                *i += 1;
            }
            out.flush();
        };
        let idle = |out: &LiveOutput| {
            let q = out.shared.lock();
            q.chunks.is_empty() && !q.writing && !q.at_start && q.direct.is_some()
        };
        let mut batch = 0usize;
        while i < 8000 && out.shared.counts.direct_partial.load(Ordering::Relaxed) == 0 {
            feed(&mut out, &mut expected, &mut i, [13, 16, 17][batch % 3]);
            batch += 1;
            // Until the writer is idle again (nothing queued, the stream started): while it
            // is stuck on the full socket, read some.
            let t0 = Instant::now();
            while !idle(&out) {
                assert!(t0.elapsed() < Duration::from_secs(30), "the writer never went idle");
                if out.shared.counts.direct_partial.load(Ordering::Relaxed) > 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
                r.set_nonblocking(true).unwrap();
                for _ in 0..40 {
                    match r.read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                r.set_nonblocking(false).unwrap();
            }
        }
        let partial = out.shared.counts.direct_partial.load(Ordering::Relaxed);
        assert!(
            partial > 0,
            "no send straight from the receiver was taken in part ({i} frames)"
        );
        // Phase 2: a reader taking less than a frame per read and pausing now and then, while
        // the receiver goes on (both paths, in whatever order the scheduling gives).
        let reader = std::thread::spawn(move || {
            let mut reads = 0u32;
            loop {
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                reads += 1;
                if reads.is_multiple_of(64) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        while i < 1600 {
            feed(&mut out, &mut expected, &mut i, 16);
        }
        let s = out.finish(Duration::from_secs(20));
        let got = reader.join().unwrap();
        assert_eq!(
            (s.frames_in, s.frames_sent, s.dropped_slow_reader),
            (u64::from(i), u64::from(i), 0)
        );
        assert_eq!(s.bytes_sent, expected.len() as u64);
        assert_eq!(got.len(), expected.len());
        let first_bad = got.iter().zip(&expected).position(|(a, b)| a != b);
        assert_eq!(first_bad, None, "bytes differ from the frames sent");
    }

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

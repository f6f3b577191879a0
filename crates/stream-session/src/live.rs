//! Live outputs: a station's frames, in time order, written to a connected stream socket that a
//! correlator reads (SFXC's `mk5://` reader, as jive5ab's `net2sfxc` serves it: [`sfxc`]; any
//! other reader of a byte stream of frames plugs in as a [`Connector`]).
//!
//! The receiver never waits for a reader: a full socket buffer at 4 Gb/s drops data within
//! milliseconds, and a correlator may read slower than a station sends, stop, or go away. So
//! [`LiveOutput::frame`] only appends to a chunk, and [`LiveOutput::flush`] (once per receive
//! batch) hands the chunk to the output's writer thread through a queue bounded in bytes; when the
//! queue is full the chunk's frames are dropped and counted (`dropped_slow_reader`), and the
//! reader's stream resumes at the next time step (the first frame of a VDIF time, thread order
//! whole). A filled (invalid) frame is queued as its header alone and written with the fill
//! pattern after it (as the window fills it, [`stream::feed`]), so seconds of silence cost a reader's bandwidth but no
//! memory. The writer thread writes the chunks with `writev`, each call bounded by a write
//! timeout so a reader that stops reading never holds the thread past a stop.
//!
//! What a reader gets: frames from the first time step after it connected (frames that came while
//! no reader was connected are not kept: the stream is live), never a frame whose time is before
//! one already sent ([`LiveOutputStatus::behind`]), and when it goes away the frames queued for
//! it are let go; the next reader starts afresh.

pub mod difx;
pub mod sfxc;

use std::collections::VecDeque;
use std::io::{IoSlice, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stream::results::LiveOutputStatus;
use stream::FrameSink;

/// Memory queued for a reader by default (per output): 0.25 s at 4 Gb/s, 2 s at 512 Mb/s.
pub const DEFAULT_LIVE_BUFFER: u64 = 128 << 20;
/// A live reader's reorder window by default: frames are out this long after they are due (the
/// added latency a correlator sees; jive5ab's net2sfxc reorders nothing beyond its read-ahead).
pub const LIVE_LATENCY: Duration = Duration::from_millis(2);
/// A chunk is handed over once it holds this much, batch or not.
const CHUNK_BYTES: usize = 512 << 10;
/// Longest single write to a reader before the writer looks at its stop flag again.
const WRITE_TIMEOUT: Duration = Duration::from_millis(200);
/// How long the writer waits for a chunk before it looks at the stop flag and for other readers.
const POLL: Duration = Duration::from_millis(100);

/// A connected stream socket a reader takes the frames from.
#[derive(Debug)]
pub enum LiveConn {
    /// A unix-domain socket (SFXC's default `mk5:///tmp/mk5read/...`).
    Unix(UnixStream),
    /// TCP.
    Tcp(TcpStream),
}

/// Socket send buffer asked for a reader's connection: 8 MiB (16 ms at 4 Gb/s) lets a reader
/// take big reads and the writer sleep between chunks, where the default (~200 KiB) wakes both
/// every 0.4 ms at 4 Gb/s.
const READER_SNDBUF: usize = 8 << 20;

impl LiveConn {
    /// Ask for a larger send buffer (what the kernel grants is enough either way).
    fn size_buffer(&self) {
        let req = netio::BufferRequest {
            rcv: 0,
            snd: READER_SNDBUF,
        };
        let _ = match self {
            LiveConn::Unix(s) => netio::size_buffers(s, req),
            LiveConn::Tcp(s) => netio::size_buffers(s, req),
        };
    }

    fn set_write_timeout(&self, d: Duration) -> std::io::Result<()> {
        match self {
            LiveConn::Unix(s) => s.set_write_timeout(Some(d)),
            LiveConn::Tcp(s) => s.set_write_timeout(Some(d)),
        }
    }
}

impl Write for LiveConn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            LiveConn::Unix(s) => s.write(buf),
            LiveConn::Tcp(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            LiveConn::Unix(s) => s.write_vectored(bufs),
            LiveConn::Tcp(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where readers come from: a socket readers connect to ([`sfxc::SfxcListener`]), or a
/// reader's port this side connects to.
pub trait Connector: Send {
    /// Where readers connect, for reports: `unix:/path`, `tcp:ADDRESS:PORT`.
    fn endpoint(&self) -> String;
    /// The next reader, ready for frames; `None` once `stop` is set (looked at at least every
    /// 100 ms). Connections that fail the protocol are counted in `counts` and closed.
    fn next_reader(&mut self, stop: &AtomicBool, counts: &LiveCounts) -> Option<LiveConn>;
    /// Called at least every 100 ms while a reader is connected: turn others away.
    fn while_connected(&mut self, _counts: &LiveCounts) {}
}

/// Where a reader's first frame may be: always the first frame of a time step (every thread of
/// it follows in order); with `valid_only`, also one that is not filled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartRule {
    /// The first frame must be a received one, not a filled invalid one.
    pub valid_only: bool,
}

/// The counts one output shares between the receiver and its writer thread.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// See [`LiveOutputStatus`].
    pub clients: AtomicU64,
    /// See [`LiveOutputStatus`].
    pub clients_refused: AtomicU64,
    /// See [`LiveOutputStatus`].
    pub bad_requests: AtomicU64,
    frames_sent: AtomicU64,
    filled_sent: AtomicU64,
    bytes_sent: AtomicU64,
    skipped_at_start: AtomicU64,
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// A frame's place in a chunk.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Offset of its stored bytes in the chunk.
    start: u32,
    /// Bytes stored (the header alone for a filled frame).
    stored: u32,
    /// Its length on the wire (the fill pattern after the stored bytes).
    len: u32,
    filled: bool,
    /// First frame of its VDIF time.
    step: bool,
}

/// Frames handed over together.
#[derive(Debug, Default)]
struct Chunk {
    data: Vec<u8>,
    marks: Vec<Mark>,
    /// Frames before it were dropped: the reader resumes at a time step.
    resync: bool,
}

impl Chunk {
    fn clear(&mut self) {
        self.data.clear();
        self.marks.clear();
        self.resync = false;
    }
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Chunk>,
    bytes: u64,
    peak: u64,
    /// Emptied chunks, for reuse.
    free: Vec<Chunk>,
    writer_waiting: bool,
    last_disconnect: Option<String>,
}

struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
    counts: LiveCounts,
    connected: AtomicBool,
    stop: AtomicBool,
    /// When a stop asked the writer to let the queue go (a reader not reading by then).
    drain_until: Mutex<Option<Instant>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
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
            frames_in: 0,
            dropped_no_reader: 0,
            dropped_slow: 0,
            behind: 0,
            writer: Some(writer),
        })
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
        let Some(time) = vdif_time(frame) else {
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
            header_len(frame).min(frame.len())
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
            station: self.station.map(vdif::station_name),
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

/// 16 bytes for a legacy header (word 0 bit 30), else 32.
fn header_len(frame: &[u8]) -> usize {
    match frame.get(3) {
        Some(b) if b & 0x40 != 0 => 16,
        _ => 32,
    }
}

/// Why a reader's connection ended.
#[derive(Debug, thiserror::Error)]
enum ReaderEnd {
    #[error("the reader closed the connection")]
    Closed,
    #[error("the output stopped")]
    Stopped,
    #[error("the output stopped while the reader was not reading")]
    NotReading,
    #[error("the reader went away: {0}")]
    Gone(std::io::Error),
}

/// The writer thread: a reader at a time, until stopped.
fn writer(shared: &Shared, connector: &mut dyn Connector, rule: StartRule) {
    // What follows a filled frame's header: the fill pattern, as the window fills (DiFX's
    // INTERLACEDVDIF readers skip it; zeros they correlated as samples).
    let mut fill = vec![0u8; 65_536];
    stream::feed::fill_data(&mut fill, 0);
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(mut conn) = connector.next_reader(&shared.stop, &shared.counts) else {
            break;
        };
        if conn.set_write_timeout(WRITE_TIMEOUT).is_err() {
            continue;
        }
        conn.size_buffer();
        add(&shared.counts.clients, 1);
        shared.connected.store(true, Ordering::Relaxed);
        let why = serve_reader(shared, &mut conn, connector, rule, &fill);
        shared.connected.store(false, Ordering::Relaxed);
        let mut q = shared.lock();
        let left: u64 = q.chunks.iter().map(|c| c.marks.len() as u64).sum();
        add(&shared.counts.skipped_at_start, left);
        let chunks: Vec<Chunk> = q.chunks.drain(..).collect();
        for mut c in chunks {
            c.clear();
            q.free.push(c);
        }
        q.bytes = 0;
        q.last_disconnect = Some(why.to_string());
    }
}

/// Write chunks to one reader until it goes away or the output stops; why it ended.
fn serve_reader(
    shared: &Shared,
    conn: &mut LiveConn,
    connector: &mut dyn Connector,
    rule: StartRule,
    zeros: &[u8],
) -> ReaderEnd {
    let mut at_start = true;
    let mut looked = Instant::now();
    loop {
        // Other readers are turned away while this one reads, data flowing or not.
        if looked.elapsed() >= POLL {
            connector.while_connected(&shared.counts);
            looked = Instant::now();
        }
        let chunk = {
            let mut q = shared.lock();
            loop {
                if let Some(c) = q.chunks.pop_front() {
                    q.bytes -= c.data.len() as u64;
                    break Some(c);
                }
                if shared.stop.load(Ordering::Relaxed) {
                    break None;
                }
                q.writer_waiting = true;
                let (g, _) = shared.cv.wait_timeout(q, POLL).unwrap_or_else(|p| p.into_inner());
                q = g;
                q.writer_waiting = false;
                if q.chunks.is_empty() {
                    break None;
                }
            }
        };
        let Some(mut chunk) = chunk else {
            if shared.stop.load(Ordering::Relaxed) {
                return ReaderEnd::Stopped;
            }
            continue;
        };
        let r = write_chunk(shared, conn, &chunk, &mut at_start, rule, zeros);
        chunk.clear();
        shared.lock().free.push(chunk);
        if let Err(why) = r {
            return why;
        }
    }
}

/// One chunk to the reader, from a time step when it starts or resumes.
fn write_chunk(
    shared: &Shared,
    conn: &mut LiveConn,
    chunk: &Chunk,
    at_start: &mut bool,
    rule: StartRule,
    zeros: &[u8],
) -> Result<(), ReaderEnd> {
    *at_start |= chunk.resync;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(chunk.marks.len() * 2);
    let (mut frames, mut filled, mut bytes, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    for m in &chunk.marks {
        if *at_start {
            if !m.step || (rule.valid_only && m.filled) {
                skipped += 1;
                continue;
            }
            *at_start = false;
        }
        let (start, stored) = (m.start as usize, m.stored as usize);
        slices.push(IoSlice::new(&chunk.data[start..start + stored]));
        let mut pad = (m.len - m.stored) as usize;
        while pad > 0 {
            let n = pad.min(zeros.len());
            slices.push(IoSlice::new(&zeros[..n]));
            pad -= n;
        }
        frames += 1;
        filled += u64::from(m.filled);
        bytes += u64::from(m.len);
    }
    add(&shared.counts.skipped_at_start, skipped);
    if let Err(why) = write_all(shared, conn, &mut slices) {
        // Not (wholly) delivered: counted with those let go when a reader goes away.
        add(&shared.counts.skipped_at_start, frames);
        return Err(why);
    }
    let c = &shared.counts;
    add(&c.frames_sent, frames);
    add(&c.filled_sent, filled);
    add(&c.bytes_sent, bytes);
    Ok(())
}

/// Write every slice; a write that times out is retried until the output stops and its drain
/// time has passed.
fn write_all(shared: &Shared, conn: &mut LiveConn, mut slices: &mut [IoSlice<'_>]) -> Result<(), ReaderEnd> {
    while !slices.is_empty() {
        match conn.write_vectored(slices) {
            Ok(0) => return Err(ReaderEnd::Closed),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                let until = *shared.drain_until.lock().unwrap_or_else(|p| p.into_inner());
                if until.is_some_and(|u| Instant::now() >= u) {
                    return Err(ReaderEnd::NotReading);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReaderEnd::Gone(e)),
        }
    }
    Ok(())
}

/// A live output a receiver is asked for; its socket is made when the receiver binds.
#[derive(Debug, Clone)]
pub enum LiveTarget {
    /// SFXC's `mk5://` reader ([`sfxc`]), for `station` (a VDIF station id) or the first to come.
    Sfxc {
        /// Where it connects.
        addr: sfxc::SfxcAddr,
        /// The station it carries.
        station: Option<u16>,
    },
    /// DiFX's mpifxcorr NETWORK datastream ([`difx`]): this side connects to its port,
    /// retrying, and says so after `connect_wait`.
    Difx {
        /// The datastream's port.
        to: std::net::SocketAddr,
        /// The station it carries.
        station: Option<u16>,
        /// How long to wait for the job's port before saying so.
        connect_wait: Duration,
    },
}

/// Why a live output could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The SFXC socket.
    #[error(transparent)]
    Sfxc(#[from] sfxc::SfxcError),
    /// The writer thread.
    #[error("cannot start the live writer thread: {0}")]
    Thread(std::io::Error),
}

impl LiveTarget {
    /// Its socket made and its writer started, `buffer` bytes queued at most.
    pub fn start(&self, buffer: u64) -> Result<LiveOutput, LiveError> {
        match self {
            LiveTarget::Sfxc { addr, station } => {
                let l = sfxc::SfxcListener::bind(addr.clone())?;
                LiveOutput::start(Box::new(l), *station, buffer, StartRule::default()).map_err(LiveError::Thread)
            }
            LiveTarget::Difx {
                to,
                station,
                connect_wait,
            } => {
                let (c, _watch) = difx::DifxConnector::new(*to, *connect_wait);
                // DiFX must not start on an invalid frame.
                LiveOutput::start(Box::new(c), *station, buffer, StartRule { valid_only: true })
                    .map_err(LiveError::Thread)
            }
        }
    }
}

/// A receiver's live outputs.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// The outputs.
    pub targets: Vec<LiveTarget>,
    /// Bytes queued per output at most ([`DEFAULT_LIVE_BUFFER`]).
    pub buffer: u64,
    /// At the end, how long a reader still reading gets to take what is queued.
    pub drain: Duration,
    /// A station sending nothing for this long has its stream go on with filled invalid frames
    /// at its rate, so the reader is never left waiting ([`stream::ReceiverConfig`]'s
    /// `fill_silence_after`).
    pub fill_silence_after: Duration,
}

impl LiveConfig {
    /// `targets` with the default buffer, a 1 s drain and filling after 1 s of silence.
    pub fn new(targets: Vec<LiveTarget>) -> LiveConfig {
        LiveConfig {
            targets,
            buffer: DEFAULT_LIVE_BUFFER,
            drain: Duration::from_secs(1),
            fill_silence_after: Duration::from_secs(1),
        }
    }

    /// Every output started.
    pub fn start(&self) -> Result<LiveSink, LiveError> {
        let outputs = self
            .targets
            .iter()
            .map(|t| t.start(self.buffer))
            .collect::<Result<_, _>>()?;
        Ok(LiveSink::new(outputs))
    }
}

/// The receiver's sink for live outputs: each station's frames to the output that carries it.
pub struct LiveSink {
    outputs: Vec<LiveOutput>,
    frames: u64,
    filled: u64,
    /// Frames of stations no output carries.
    unrouted: u64,
}

impl LiveSink {
    /// Frames to `outputs` (each carries its named station, or the first unnamed takes the first
    /// station to come).
    pub fn new(outputs: Vec<LiveOutput>) -> LiveSink {
        LiveSink {
            outputs,
            frames: 0,
            filled: 0,
            unrouted: 0,
        }
    }

    /// Frames handed in, filled ones, and those no output carries.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.frames, self.filled, self.unrouted)
    }

    /// Hand every output's gathered frames to its writer (once per receive batch).
    pub fn flush(&mut self) {
        self.outputs.iter_mut().for_each(LiveOutput::flush);
    }

    /// Every output's counts now.
    pub fn status(&self) -> Vec<LiveOutputStatus> {
        self.outputs.iter().map(LiveOutput::status).collect()
    }

    /// Stop every output (see [`LiveOutput::finish`]); their final counts.
    pub fn finish(&mut self, drain: Duration) -> Vec<LiveOutputStatus> {
        self.outputs.drain(..).map(|o| o.finish(drain)).collect()
    }
}

impl FrameSink for LiveSink {
    fn frame(&mut self, station: vdif::StationId, frame: &[u8], filled: bool) {
        self.frames += 1;
        self.filled += u64::from(filled);
        let at = match self.outputs.iter().position(|o| o.station() == Some(station.0)) {
            Some(i) => Some(i),
            None => self
                .outputs
                .iter_mut()
                .position(|o| o.station().is_none() && o.takes(station.0)),
        };
        match at {
            Some(i) => self.outputs[i].frame(frame, filled),
            None => self.unrouted += 1,
        }
    }

    // Time going back is caught frame by frame (`behind`); a gap forward is a reader's to see.
    fn discontinuity(&mut self, _station: vdif::StationId) {}
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

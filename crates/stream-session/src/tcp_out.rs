//! A TCP client carrying a station's frames to a correlator that is the server: DiFX
//! mpifxcorr's NETWORK datastream binds its port when the job starts and accepts one connection
//! (mpifxcorr/src/datastream.cpp `openstream`), then reads the bytes as the station's recording
//! (`Mk5DataStream` for VDIF, `VDIFNetworkDataStream` for INTERLACEDVDIF).
//!
//! The data path never waits for the correlator: frames are handed to a writer thread through a
//! bounded queue ([`TcpOut::push`]); a full queue (a reader slower than the station) or no
//! connection yet drops whole frames, counted, so the byte stream stays frame-aligned. A file,
//! which can wait, is sent with [`TcpOut::push_wait`]. The writer connects, retrying every
//! [`TcpOutConfig::retry_every`] (a job starts after the data flows), says so once it has waited
//! [`TcpOutConfig::give_up_after`], and starts each connection where [`CorrelatorFeed`] says:
//! on a valid frame of a time step no thread started before, every invalid frame with the fill
//! pattern as its data. A connection the correlator closes (its job ended) is counted and a new
//! one is waited for.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stream::feed::CorrelatorFeed;
use stream::results::TcpOutReport;

pub use crate::error::TcpOutError;
use crate::{InputProblem, StreamSessionError};

/// Longest one connection attempt waits (a host that drops SYNs).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a blocked write or an empty queue looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// How the writer behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOutMode {
    /// Live data: frames that cannot be written now (no connection, full queue) are dropped
    /// and counted; connecting goes on after `give_up_after` (said once).
    Live,
    /// A file: [`TcpOut::push_wait`] waits for the connection and for the queue; after
    /// `give_up_after` without a connection the output fails.
    Wait,
}

/// Where and how to connect.
#[derive(Debug, Clone, Copy)]
pub struct TcpOutConfig {
    /// The correlator's datastream port.
    pub to: SocketAddr,
    /// Live or file.
    pub mode: TcpOutMode,
    /// How long to wait for a listener before saying so (live) or failing (a file).
    pub give_up_after: Duration,
    /// Pause between connection attempts.
    pub retry_every: Duration,
    /// Frames queued between the data path and the writer.
    pub queue_frames: usize,
}

impl TcpOutConfig {
    /// Defaults: 30 s to wait, a try every 0.5 s, 4096 frames queued (32 MiB of 8 KiB frames,
    /// 66 ms at 4 Gb/s: a reader's hiccup, not a reader slower than the station).
    pub fn new(to: SocketAddr, mode: TcpOutMode) -> TcpOutConfig {
        TcpOutConfig {
            to,
            mode,
            give_up_after: Duration::from_secs(30),
            retry_every: Duration::from_millis(500),
            queue_frames: 4096,
        }
    }
}

struct Shared {
    report: Mutex<TcpOutReport>,
    stop: AtomicBool,
    /// Said once: the output has waited `give_up_after` for a listener.
    overdue: AtomicBool,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut TcpOutReport)) {
        if let Ok(mut r) = self.report.lock() {
            f(&mut r);
        }
    }
}

/// The output; see the module docs.
pub struct TcpOut {
    cfg: TcpOutConfig,
    tx: Option<SyncSender<Vec<u8>>>,
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
    dropped_queue_full: u64,
    said_overdue: bool,
}

impl TcpOut {
    /// Start the writer (it connects in the background).
    pub fn start(cfg: TcpOutConfig) -> TcpOut {
        let (tx, rx) = sync_channel(cfg.queue_frames.max(1));
        let shared = Arc::new(Shared {
            report: Mutex::new(TcpOutReport {
                to: cfg.to.to_string(),
                ..TcpOutReport::default()
            }),
            stop: AtomicBool::new(false),
            overdue: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("tcp-out".into())
            .spawn(move || Writer::new(cfg, s).run(&rx))
            .ok();
        TcpOut {
            cfg,
            tx: Some(tx),
            shared,
            writer,
            dropped_queue_full: 0,
            said_overdue: false,
        }
    }

    /// Hand a live frame over without waiting: dropped (counted) when the queue is full.
    pub fn push(&mut self, frame: &[u8]) {
        let Some(tx) = self.tx.as_ref() else { return };
        match tx.try_send(frame.to_vec()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.dropped_queue_full += 1,
            Err(TrySendError::Disconnected(_)) => self.dropped_queue_full += 1,
        }
    }

    /// Hand a frame of a file over, waiting for room (and for the connection).
    pub fn push_wait(&mut self, frame: &[u8]) -> Result<(), TcpOutError> {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(frame.to_vec()).is_ok());
        if sent {
            return Ok(());
        }
        Err(self.failure())
    }

    /// Once, when the output has waited `give_up_after` for a listener: the sentence to say.
    pub fn poll_overdue(&mut self) -> Option<String> {
        if self.said_overdue || !self.shared.overdue.load(Ordering::Relaxed) {
            return None;
        }
        self.said_overdue = true;
        let r = self.report();
        Some(format!(
            "no correlator has accepted a TCP connection on {} for {:.0} s ({}); still trying every {:.1} s, frames until then are not delivered",
            self.cfg.to,
            self.cfg.give_up_after.as_secs_f64(),
            r.last_error.as_deref().unwrap_or("no answer"),
            self.cfg.retry_every.as_secs_f64()
        ))
    }

    /// The counts so far.
    pub fn report(&self) -> TcpOutReport {
        let mut r = self.shared.report.lock().map(|r| r.clone()).unwrap_or_default();
        r.dropped_queue_full += self.dropped_queue_full;
        r
    }

    /// Let the queue drain for `linger` at most, then close; the final counts.
    pub fn finish(mut self, linger: Duration) -> TcpOutReport {
        self.close(linger);
        self.report()
    }

    /// [`TcpOut::finish`] for a file: an error when not every frame was written.
    pub fn finish_wait(mut self, linger: Duration) -> Result<TcpOutReport, TcpOutError> {
        self.close(linger);
        let r = self.report();
        if r.connections == 0 || r.disconnects > 0 {
            return Err(self.failure());
        }
        Ok(r)
    }

    fn close(&mut self, linger: Duration) {
        drop(self.tx.take());
        let until = Instant::now() + linger;
        while self.writer.as_ref().is_some_and(|w| !w.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }

    fn failure(&self) -> TcpOutError {
        let r = self.report();
        let last = r.last_error.unwrap_or_else(|| "closed".into());
        if r.connections == 0 {
            TcpOutError::NoListener {
                to: self.cfg.to,
                waited_s: self.cfg.give_up_after.as_secs_f64(),
                last,
            }
        } else {
            TcpOutError::Lost {
                to: self.cfg.to,
                frames: r.frames_sent,
                last,
            }
        }
    }
}

impl Drop for TcpOut {
    fn drop(&mut self) {
        self.close(Duration::ZERO);
    }
}

/// The writer thread's state.
struct Writer {
    cfg: TcpOutConfig,
    shared: Arc<Shared>,
    feed: CorrelatorFeed,
    started: Instant,
}

impl Writer {
    fn new(cfg: TcpOutConfig, shared: Arc<Shared>) -> Writer {
        Writer {
            cfg,
            shared,
            feed: CorrelatorFeed::new(),
            started: Instant::now(),
        }
    }

    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    fn run(mut self, rx: &Receiver<Vec<u8>>) {
        while let Some(mut sock) = self.connect(rx) {
            self.feed.restart();
            let since = self.started.elapsed().as_secs_f64();
            self.shared.update(|r| {
                r.connections += 1;
                r.connected = true;
                r.first_connected_s.get_or_insert(since);
            });
            let ended = self.write_all_frames(&mut sock, rx);
            self.shared.update(|r| r.connected = false);
            if ended {
                break;
            }
        }
        let counts = self.feed.counts();
        self.shared.update(|r| r.feed = counts);
    }

    /// Connect, retrying; frames meanwhile are seen (so the start is a new step) and dropped
    /// (live) or wait in the queue (a file). `None`: stopped, the queue closed while
    /// unconnected, or a file's wait ran out.
    fn connect(&mut self, rx: &Receiver<Vec<u8>>) -> Option<TcpStream> {
        let waiting_since = Instant::now();
        loop {
            if self.stopped() {
                return None;
            }
            match TcpStream::connect_timeout(&self.cfg.to, CONNECT_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_write_timeout(Some(POLL));
                    return Some(s);
                }
                Err(e) => self.shared.update(|r| r.last_error = Some(e.to_string())),
            }
            if waiting_since.elapsed() >= self.cfg.give_up_after {
                self.shared.overdue.store(true, Ordering::Relaxed);
                if self.cfg.mode == TcpOutMode::Wait {
                    self.shared.update(|r| r.gave_up = true);
                    return None;
                }
            }
            let retry_at = Instant::now() + self.cfg.retry_every;
            while Instant::now() < retry_at {
                if self.cfg.mode == TcpOutMode::Wait {
                    std::thread::sleep(POLL.min(self.cfg.retry_every));
                    if self.stopped() {
                        return None;
                    }
                    continue;
                }
                match rx.recv_timeout(retry_at.saturating_duration_since(Instant::now())) {
                    Ok(f) => {
                        self.feed.seen(&f);
                        self.shared.update(|r| r.dropped_unconnected += 1);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return None,
                }
            }
        }
    }

    /// Write frames until the queue closes (`true`) or the connection fails (`false`).
    fn write_all_frames(&mut self, sock: &mut TcpStream, rx: &Receiver<Vec<u8>>) -> bool {
        loop {
            let f = match rx.recv_timeout(POLL) {
                Ok(f) => f,
                Err(RecvTimeoutError::Timeout) if self.stopped() => return true,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return true,
            };
            let Some(out) = self.feed.frame(&f) else { continue };
            match write_frame(sock, &out, &self.shared.stop) {
                Ok(()) => self.shared.update(|r| {
                    r.frames_sent += 1;
                    r.bytes_sent += out.len() as u64;
                }),
                Err(e) => {
                    // The frame was not (wholly) written; what was sent of it is lost with the
                    // connection. The correlator's job ended, or it failed.
                    self.shared.update(|r| {
                        r.disconnects += 1;
                        r.last_error = Some(e.to_string());
                    });
                    // A file goes to one job: what is left of it is not sent to the next.
                    return self.stopped() || self.cfg.mode == TcpOutMode::Wait;
                }
            }
        }
    }
}

/// Write a whole frame (a partial write is continued, never abandoned: the stream must stay
/// frame-aligned), looking at `stop` between tries.
fn write_frame(sock: &mut TcpStream, frame: &[u8], stop: &AtomicBool) -> std::io::Result<()> {
    let mut at = 0;
    while at < frame.len() {
        match sock.write(&frame[at..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) {
                    return Err(e);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Send a VDIF file to a correlator's TCP datastream: every frame once, in the file's order,
/// as fast as the correlator reads (TCP's flow control paces it: a file is not live), after
/// waiting for the job's port to open (`cfg.give_up_after`). Garbage between frames is skipped
/// (counted). `stop` ends it early.
pub fn send_file(
    path: &std::path::Path,
    cfg: TcpOutConfig,
    stop: &AtomicBool,
) -> Result<stream::results::TcpSendReport, StreamSessionError> {
    use vdif::{FrameScanner, ScanEvent};
    let file = std::fs::File::open(path)
        .map_err(|e| StreamSessionError::input(path.display().to_string(), InputProblem::Read(e)))?;
    let mut out = TcpOut::start(TcpOutConfig {
        mode: TcpOutMode::Wait,
        ..cfg
    });
    let (mut frames_read, mut garbage_bytes) = (0u64, 0u64);
    for ev in FrameScanner::new(std::io::BufReader::with_capacity(1 << 20, file)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match ev {
            Ok(ScanEvent::Frame { bytes, .. }) => {
                frames_read += 1;
                out.push_wait(&bytes).map_err(StreamSessionError::TcpOut)?;
            }
            Ok(ScanEvent::Garbage { len, .. }) | Ok(ScanEvent::Truncated { len, .. }) => garbage_bytes += len,
            Err(e) => {
                return Err(StreamSessionError::input(
                    path.display().to_string(),
                    InputProblem::ReadWhileSending { op: "read", source: e },
                ))
            }
        }
    }
    // Everything queued is written before the connection closes (the reader's pace).
    let report = out
        .finish_wait(Duration::from_secs(3600))
        .map_err(StreamSessionError::TcpOut)?;
    Ok(stream::results::TcpSendReport {
        file: path.display().to_string(),
        frames_read,
        garbage_bytes,
        interrupted: stop.load(Ordering::Relaxed),
        out: report,
    })
}

//! DiFX's live input: an mpifxcorr NETWORK datastream is the server. When its job starts it
//! binds the datastream's port and accepts one TCP connection (mpifxcorr/src/datastream.cpp
//! `openstream`), then reads the bytes as the station's recording (`Mk5DataStream` for VDIF,
//! `VDIFNetworkDataStream` for INTERLACEDVDIF) until its job ends and it closes the connection.
//! A job starts after the data flow, so this side connects, retrying every
//! [`RETRY_EVERY`], and says so ([`DifxWatch::poll_overdue`]) once it has waited its
//! `give_up_after` (a live output goes on trying; a file gives up, [`send_file`]).
//!
//! Live data go through [`super::LiveOutput`] with [`DifxConnector`] (a reader at a time, frames
//! in time order, never holding the data path up) and its start rule `valid_only`: a
//! connection starts on a received frame at the first frame of a time step. An invalid frame
//! goes as its header with the fill pattern as data ([`stream::feed`]): DiFX's INTERLACEDVDIF
//! readers ignore the invalid bit and correlated zeros as samples.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stream::feed::CorrelatorFeed;
use stream::results::DifxFileReport;
use thiserror::Error;

use super::{Connector, LiveConn, LiveCounts};

/// Longest one connection attempt waits (a host that drops SYNs).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between connection attempts.
pub const RETRY_EVERY: Duration = Duration::from_millis(500);
/// How long a write to the correlator may block before the stop flag is looked at.
const WRITE_TIMEOUT: Duration = Duration::from_millis(200);
/// How long to wait for the job's port by default.
pub const DEFAULT_CONNECT_WAIT: Duration = Duration::from_secs(30);

/// What the connector says to whoever started it.
#[derive(Debug, Default)]
struct Said {
    /// The last connection attempt's error while none was connected.
    last_error: Option<String>,
    /// It has waited `give_up_after` for the port (cleared by a connection).
    overdue: bool,
    /// The overdue notice was taken.
    told: bool,
}

/// The connector's news: the last connection error, the notice that it waited too long.
#[derive(Debug, Clone, Default)]
pub struct DifxWatch {
    said: Arc<Mutex<Said>>,
    to: Option<SocketAddr>,
    give_up_after: Duration,
}

impl DifxWatch {
    fn with<T>(&self, f: impl FnOnce(&mut Said) -> T) -> T {
        f(&mut self.said.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The last connection attempt's error while no job had the port open, if any.
    pub fn last_error(&self) -> Option<String> {
        self.with(|s| s.last_error.clone())
    }

    /// Once per wait that lasted `give_up_after`: the sentence for the operator.
    pub fn poll_overdue(&self) -> Option<String> {
        let to = self.to?;
        let wait = self.give_up_after.as_secs_f64();
        self.with(|s| {
            if !s.overdue || s.told {
                return None;
            }
            s.told = true;
            Some(format!(
                "no DiFX job has accepted a TCP connection on {to} for {wait:.0} s ({}); trying every {:.1} s, its frames meanwhile are not delivered",
                s.last_error.as_deref().unwrap_or("no answer"),
                RETRY_EVERY.as_secs_f64()
            ))
        })
    }
}

/// Connects to an mpifxcorr datastream's port, retrying; see the module docs.
#[derive(Debug)]
pub struct DifxConnector {
    to: SocketAddr,
    give_up_after: Duration,
    watch: DifxWatch,
}

impl DifxConnector {
    /// A connector to `to` that says it is overdue after `give_up_after`; and its watch.
    pub fn new(to: SocketAddr, give_up_after: Duration) -> (DifxConnector, DifxWatch) {
        let watch = DifxWatch {
            said: Arc::default(),
            to: Some(to),
            give_up_after,
        };
        let c = DifxConnector {
            to,
            give_up_after,
            watch: watch.clone(),
        };
        (c, watch)
    }

    /// Connect, retrying until `stop`, or (`deadline`) until `give_up_after` has passed.
    fn connect(&mut self, stop: &AtomicBool, deadline: bool) -> Option<TcpStream> {
        let since = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            match TcpStream::connect_timeout(&self.to, CONNECT_TIMEOUT) {
                Ok(s) => {
                    self.watch.with(|w| *w = Said::default());
                    return Some(s);
                }
                Err(e) => self.watch.with(|w| w.last_error = Some(e.to_string())),
            }
            if since.elapsed() >= self.give_up_after {
                self.watch.with(|w| w.overdue = true);
                if deadline {
                    return None;
                }
            }
            let next = Instant::now() + RETRY_EVERY;
            while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Connector for DifxConnector {
    fn endpoint(&self) -> String {
        format!("tcp:{}", self.to)
    }

    fn next_reader(&mut self, stop: &AtomicBool, _counts: &LiveCounts) -> Option<LiveConn> {
        self.connect(stop, false).map(LiveConn::Tcp)
    }
}

/// Why a file could not be sent to a DiFX datastream.
#[derive(Debug, Error)]
pub enum DifxError {
    /// The file.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// No job opened the port in time.
    #[error("no DiFX job accepted a TCP connection on {to} within {waited_s:.1} s (last attempt: {last})")]
    NoListener {
        /// The port.
        to: SocketAddr,
        /// Seconds waited.
        waited_s: f64,
        /// The last attempt's error.
        last: String,
    },
    /// The job closed the connection before the file's end (it ended, or failed).
    #[error("{path}: the connection to {to} ended after {frames} frame(s): {source}")]
    Lost {
        /// The file.
        path: PathBuf,
        /// The port.
        to: SocketAddr,
        /// Frames written before.
        frames: u64,
        /// The error.
        source: std::io::Error,
    },
}

/// Send a VDIF or Mark5B file (told by its first bytes: a Mark5B sync word) to a DiFX
/// datastream's port: after waiting up to `give_up_after` for the job to open it, every frame
/// once, in the file's order, as fast as mpifxcorr reads (TCP's flow control paces it: a file
/// is not live), from its first valid frame of a time step ([`CorrelatorFeed`]), invalid frames
/// with the fill pattern as data. Bytes between frames that are not frames are skipped and
/// counted. `stop` ends it early.
pub fn send_file(
    path: &Path,
    to: SocketAddr,
    give_up_after: Duration,
    stop: &AtomicBool,
) -> Result<DifxFileReport, DifxError> {
    use vdif::mark5b_file::{Mark5bEvent, Mark5bFrames};
    use vdif::{FrameFormat, FrameScanner, ScanEvent};
    let read_err = |source| DifxError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut head = [0u8; 4];
    let mark5b = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(read_err)?;
        f.read_exact(&mut head).is_ok() && vdif::mark5b_file::starts_mark5b(&head)
    };
    let file = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).map_err(read_err)?);
    // One stream of frames, whichever the format: a frame, or bytes skipped.
    let events: Box<dyn Iterator<Item = std::io::Result<Result<Vec<u8>, u64>>>> = if mark5b {
        Box::new(Mark5bFrames::new(file).map(|ev| {
            ev.map(|e| match e {
                Mark5bEvent::Frame(bytes) => Ok(bytes),
                Mark5bEvent::Garbage(len) => Err(len),
            })
        }))
    } else {
        Box::new(FrameScanner::new(file).map(|ev| {
            ev.map(|e| match e {
                ScanEvent::Frame { bytes, .. } => Ok(bytes),
                ScanEvent::Garbage { len, .. } | ScanEvent::Truncated { len, .. } => Err(len),
            })
        }))
    };
    let started = Instant::now();
    let (mut connector, watch) = DifxConnector::new(to, give_up_after);
    let mut sock = connector.connect(stop, true).ok_or_else(|| DifxError::NoListener {
        to,
        waited_s: started.elapsed().as_secs_f64(),
        last: watch.last_error().unwrap_or_else(|| "stopped".into()),
    })?;
    let _ = sock.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut r = DifxFileReport {
        file: path.display().to_string(),
        to: to.to_string(),
        connected_after_s: started.elapsed().as_secs_f64(),
        ..DifxFileReport::default()
    };
    let mut feed = CorrelatorFeed::of_format(if mark5b { FrameFormat::Mark5b } else { FrameFormat::Vdif });
    for ev in events {
        if stop.load(Ordering::Relaxed) {
            r.interrupted = true;
            break;
        }
        match ev.map_err(read_err)? {
            Ok(bytes) => {
                r.frames_read += 1;
                let Some(out) = feed.frame(&bytes) else { continue };
                write_frame(&mut sock, &out, stop).map_err(|source| DifxError::Lost {
                    path: path.to_path_buf(),
                    to,
                    frames: r.frames_sent,
                    source,
                })?;
                r.frames_sent += 1;
                r.bytes_sent += out.len() as u64;
            }
            Err(len) => r.garbage_bytes += len,
        }
    }
    r.feed = feed.counts();
    Ok(r)
}

/// Write a whole frame; a write that times out is retried (a partial frame would leave the
/// stream out of step) until `stop`.
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

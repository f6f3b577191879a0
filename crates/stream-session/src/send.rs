//! The sender over a real socket: VDIF files (one station each) read into memory or on reader
//! threads, handed to the sans-IO [`stream::Sender`] (framing, sequence numbers, loop time,
//! repeats, counters) whose frames leave on an exact absolute timeline per station
//! ([`pacing::Pacer`]); NAKs read from the socket between frames are fed back to it.

use std::fs::File;
use std::io::{BufReader, IoSlice, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;

use linkemu::LossModel;
use netio::counters::{clock_ticks_per_second, read_process_cpu};
use netio::pacer::wait_until_spin;
use netio::{bind_udp, BufferRequest};
use pacing::{Pacer, Spacing};
use stream::results::{SendStatus, SentBoard};
use stream::sender::{
    combined_results, Frame, FrameSource, MemorySource, Sender, SenderConfig, SenderError, StationSpec, Transmit,
};
use stream::{PacedSchedule, SeqFormat};
use vdif::{FrameScanner, ScanEvent};

use crate::report::SendReport;
use crate::{ConfigError, InputProblem, Observer, StreamSessionError};
use netio::io_err;

/// Frames per batch handed from a reader thread to the sender.
const BATCH_FRAMES: usize = 64;
/// Batches queued per reader (64 × 64 frames of 8 KB = 32 MB).
const QUEUE_BATCHES: usize = 64;
/// Files up to this size are read into memory and sent from there.
const MEMORY_SOURCE_MAX: u64 = 2 << 30;

/// How to run a sender.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Destination.
    pub to: SocketAddr,
    /// With `senders` K > 1: board k sends to `board_to[k]` (a backend's boards each configured
    /// with their own destination port); empty: every board sends to `to`.
    pub board_to: Vec<SocketAddr>,
    /// Inputs, one station each.
    pub inputs: Vec<Input>,
    /// Frames per second per thread, when the file does not show it (shorter than 1 s, no rate in
    /// the header) and `rate_bps` is not given.
    pub fps: Option<u32>,
    /// Data rate per station (sample bits, headers excluded); default: from the files.
    pub rate_bps: Option<f64>,
    /// Framing.
    pub format: SeqFormat,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Restart each file at its end, advancing VDIF time (the file must hold whole seconds).
    pub loop_files: bool,
    /// Keep this much of each stream to answer NAKs (native framing only).
    pub arq_latency: Option<Duration>,
    /// Drop this fraction of datagrams at random before sending (a lossy link in the host, for
    /// tests and demos without namespaces).
    pub inject_loss: f64,
    /// Seed of the injected loss.
    pub seed: u64,
    /// Send socket buffer to ask for.
    pub sndbuf: usize,
    /// Frames per system call (UDP GSO), released together every `burst` spacings: fewer
    /// system calls for rates beyond one core's per-datagram budget, at the cost of bursts.
    pub burst: usize,
    /// How close to a departure the sender stops sleeping and spins
    /// ([`netio::pacer::DEFAULT_SPIN`]); below the default the thread's timer slack is set to
    /// 1 ns so its sleeps end on time.
    pub spin: Duration,
    /// How far behind its timeline the sender may fall and still catch up; later than this the
    /// time is given up (the timeline re-anchored, a slip counted). [`DEFAULT_MAX_LAG`].
    pub max_lag: Duration,
    /// While behind, release frames at up to this multiple of the rate (≥ 1; [`DEFAULT_CATCH_UP`]).
    pub catch_up: f64,
    /// Sending sockets, each its own local port (the boards of a backend): 1 sends everything
    /// from one socket; K > 1 splits every station's threads into K contiguous blocks, one per
    /// socket, each paced at its share of the rate with the frames of one time step leaving
    /// together. K > 1 needs inputs held in memory, bare or jive5ab framing, and at most as many
    /// senders as each station has threads.
    pub senders: usize,
    /// Frames leave at their own VDIF time, moved by whole seconds to just ahead of the clock
    /// (a backend simulator: `--generate` with `--start now`); else the timeline starts now.
    pub realtime: bool,
    /// Frames more than `max_lag` late are skipped (counted), never sent late: the timeline is
    /// fixed to the clock, as a backend's; else the timeline is re-anchored and every frame sent.
    pub skip_late: bool,
}

/// Default catch-up bound of the stream sender. A station's data arrive at a fixed rate: time a
/// sender gives up is data it will never send. A VM or a busy host deschedules a sender for
/// milliseconds now and then (this VM: 10–30 ms gaps beside disk writes), and the probe's 1 ms
/// bound then cost 15 % of the rate at 4.096 Gb/s; 100 ms is covered by the receiver's
/// buffers and well inside an ARQ latency.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(100);

/// Default catch-up speed: twice the rate, so a backlog is cleared in as long as it took to
/// build, without line-rate bursts that would overrun a router queue.
pub const DEFAULT_CATCH_UP: f64 = 2.0;

/// Opens a stream of VDIF from its start (once per pass over it): a recorded scan, or
/// anything else that reads like a file.
#[derive(Clone)]
pub struct Opener(Arc<dyn Fn() -> std::io::Result<Box<dyn Read + Send>> + Send + Sync>);

impl Opener {
    /// An opener calling `f`.
    pub fn new(f: impl Fn() -> std::io::Result<Box<dyn Read + Send>> + Send + Sync + 'static) -> Opener {
        Opener(Arc::new(f))
    }

    fn open(&self) -> std::io::Result<Box<dyn Read + Send>> {
        (self.0)()
    }

    fn file(path: PathBuf) -> Opener {
        Opener::new(move || File::open(&path).map(|f| Box::new(f) as Box<dyn Read + Send>))
    }
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

/// One station's VDIF: a file, frames already in memory (e.g. just generated), or a stream
/// read from an opener (a recorded vbs/Mark6 scan).
#[derive(Debug, Clone)]
pub enum Input {
    /// A VDIF file (read into memory when it fits, else streamed by a reader thread).
    File(PathBuf),
    /// A stream of `len` bytes (read into memory when it fits, else by a reader thread that
    /// opens it anew for each pass).
    Reader {
        /// Shown as the source in reports (e.g. `vbs://SCAN`).
        name: String,
        /// Bytes.
        len: u64,
        /// Opens it from the start.
        open: Opener,
    },
    /// Contiguous frames in memory, with a name for the report.
    Memory {
        /// Shown as the source in reports.
        name: String,
        /// The frames.
        data: Vec<u8>,
    },
}

impl Input {
    fn name(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Memory { name, .. } | Input::Reader { name, .. } => name.clone(),
        }
    }
}

/// What the pre-pass learned about one input.
struct Source {
    /// Shown as the source in reports.
    name: String,
    /// The input, when it is streamed by a reader thread.
    path: Option<Opener>,
    /// The whole input as contiguous frames, when it is sent from memory (a file: mapped).
    memory: Option<Bytes>,
    station_id: u16,
    threads: u16,
    frame_len: usize,
    data_len: usize,
    fps: u32,
    rate_bps: f64,
    loop_seconds: u32,
}

/// Inspect one input (one pass over its bytes). A file that fits in memory is read once and
/// inspected there, so it is sent from memory: no reader thread competing for one of two cores,
/// no per-frame allocation, no second read.
fn examine(cfg: &SendConfig, input: Input) -> Result<Source, StreamSessionError> {
    let name = input.name();
    let (path, data, rep) = match input {
        Input::File(path) => examine_file(cfg, &name, path)?,
        Input::Reader { len, open, .. } => examine_stream(cfg, &name, open, len)?,
        Input::Memory { data, .. } => {
            let rep = vdif::inspect::inspect(&data[..], cfg.fps, |_, _| {});
            (None, Some(Bytes::from(data)), rep)
        }
    };
    let rep = rep.map_err(|e| StreamSessionError::input(&name, e.into()))?;
    let (Some(station_id), Some(frame_len), Some(header_len)) = (rep.station_id, rep.frame_bytes, rep.header_bytes)
    else {
        return Err(StreamSessionError::input(name, InputProblem::NoFrames));
    };
    let threads = rep.threads.len() as u16;
    if rep.threads.iter().enumerate().any(|(i, t)| usize::from(*t) != i) {
        let ids = rep.threads.clone();
        return Err(StreamSessionError::input(
            name,
            InputProblem::ThreadIds { ids, threads },
        ));
    }
    let data_len = frame_len - header_len;
    // The file's rate (--fps, the header, its seconds), else the one --rate gives (vdif's rule).
    let from_rate = |r: f64| {
        let bits = vdif::rate::whole_bits_per_second(r).ok()?;
        vdif::FrameRate::from_bit_rate(bits, data_len as u64, u32::from(threads)).ok()
    };
    let fps = match (rep.frames_per_second, cfg.rate_bps.and_then(from_rate)) {
        (Some(f), _) => f,
        (None, Some(r)) => r.get(),
        _ => {
            let bits_per_frame = data_len as f64 * 8.0 * f64::from(threads.max(1));
            return Err(StreamSessionError::input(
                name,
                unknown_frame_rate(&rep, bits_per_frame),
            ));
        }
    };
    let rate_bps = cfg
        .rate_bps
        .unwrap_or(f64::from(fps) * data_len as f64 * 8.0 * f64::from(threads));
    let per_thread = rep.frames / u64::from(threads.max(1));
    let loop_seconds = if cfg.loop_files {
        if per_thread == 0 || per_thread % u64::from(fps) != 0 {
            return Err(StreamSessionError::input(
                name,
                InputProblem::LoopNeedsWholeSeconds { per_thread, fps },
            ));
        }
        (per_thread / u64::from(fps)) as u32
    } else {
        0
    };
    // Sent from memory only when every byte is a frame of the stream's length (the scanner
    // counted anything else as garbage); otherwise the reader thread skips what is not.
    let memory = data.filter(|d| rep.frames.checked_mul(frame_len as u64) == Some(d.len() as u64));
    if memory.is_none() && path.is_none() {
        return Err(StreamSessionError::input(name, InputProblem::NotContiguous));
    }
    Ok(Source {
        name,
        path,
        memory,
        station_id,
        threads,
        frame_len,
        data_len,
        fps,
        rate_bps,
        loop_seconds,
    })
}

/// Why the frame rate of a file cannot be known, and what to pass: its frames all lie in one
/// second (the frame numbers count up to an unknown total) and its headers state no sample
/// rate (only EDV 1 and 3 do, VDIF 1.1.1 §3 and the VLBA EDV 3 note). A file that crosses a
/// second shows its rate in the frame numbers and never comes here.
fn unknown_frame_rate(rep: &vdif::inspect::InspectReport, bits_per_frame: f64) -> InputProblem {
    let lowest = rep.per_thread.iter().map(|t| t.earliest.1).min().unwrap_or(0);
    let highest = rep.per_thread.iter().map(|t| t.latest.1).max().unwrap_or(0);
    InputProblem::FrameRateUnknown {
        lowest,
        highest,
        second: rep.first_second_utc.clone().unwrap_or_else(|| "?".into()),
        edv: rep.edv.map_or("?".into(), |e| e.to_string()),
        at_least: u64::from(highest) + 1,
        bits_per_frame,
    }
}

/// What examining a stream gives: the opener (for a reader thread), the data when it fits in
/// memory, and the inspection.
type Examined = (
    Option<Opener>,
    Option<Bytes>,
    Result<vdif::inspect::InspectReport, vdif::inspect::InspectError>,
);

/// Inspect a stream of `len` bytes: read into memory when it fits, else inspected as it is
/// read (then a reader thread sends it).
fn examine_stream(cfg: &SendConfig, name: &str, open: Opener, len: u64) -> Result<Examined, StreamSessionError> {
    let read_err = |e: std::io::Error| StreamSessionError::input(name, InputProblem::Read(e));
    let mut r = open.open().map_err(read_err)?;
    if len <= MEMORY_SOURCE_MAX {
        let mut data = Vec::with_capacity(len as usize);
        r.read_to_end(&mut data).map_err(read_err)?;
        let rep = vdif::inspect::inspect(&data[..], cfg.fps, |_, _| {});
        return Ok((Some(open), Some(Bytes::from(data)), rep));
    }
    let rep = vdif::inspect::inspect(BufReader::with_capacity(1 << 20, r), cfg.fps, |_, _| {});
    Ok((Some(open), None, rep))
}

/// Inspect a file: mapped into memory when it fits ([`crate::mapped`]), so it is sent from its
/// pages in the page cache and nothing is copied before the first datagram; read as a stream
/// when it does not fit or cannot be mapped.
fn examine_file(cfg: &SendConfig, name: &str, path: PathBuf) -> Result<Examined, StreamSessionError> {
    let read_err = |e: std::io::Error| StreamSessionError::input(name, InputProblem::Read(e));
    let file = File::open(&path).map_err(read_err)?;
    let len = file.metadata().map_err(read_err)?.len();
    if len <= MEMORY_SOURCE_MAX {
        if let Some(data) = crate::mapped::map(&file) {
            let rep = vdif::inspect::inspect(&data[..], cfg.fps, |_, _| {});
            return Ok((Some(Opener::file(path)), Some(data), rep));
        }
    }
    examine_stream(cfg, name, Opener::file(path), len)
}

#[derive(Default)]
struct ReaderStats {
    loops: u64,
    garbage_bytes: u64,
    /// What failed ("open" or "read") and why.
    error: Option<(&'static str, std::io::Error)>,
}

/// A batch of whole frames from a reader thread, with the pass over the file it came from (a
/// batch never spans two passes).
struct Batch {
    pass: u32,
    frames: Vec<u8>,
}

/// Read whole frames in batches; at the end restart when looping (the sender advances the time
/// of later passes).
fn reader(path: Opener, frame_len: usize, looping: bool, tx: SyncSender<Batch>) -> ReaderStats {
    let mut st = ReaderStats::default();
    let mut pass = 0u32;
    loop {
        let f = match path.open() {
            Ok(f) => f,
            Err(e) => {
                st.error = Some(("open", e));
                return st;
            }
        };
        let mut batch = Vec::with_capacity(BATCH_FRAMES * frame_len);
        for ev in FrameScanner::new(BufReader::with_capacity(1 << 20, f)) {
            match ev {
                Ok(ScanEvent::Frame { bytes, .. }) => {
                    if bytes.len() != frame_len {
                        st.garbage_bytes += bytes.len() as u64;
                        continue;
                    }
                    batch.extend_from_slice(&bytes);
                    if batch.len() >= BATCH_FRAMES * frame_len {
                        let frames = std::mem::take(&mut batch);
                        if tx.send(Batch { pass, frames }).is_err() {
                            return st;
                        }
                        batch.reserve(BATCH_FRAMES * frame_len);
                    }
                }
                Ok(ScanEvent::Garbage { len, .. }) | Ok(ScanEvent::Truncated { len, .. }) => st.garbage_bytes += len,
                Err(e) => {
                    st.error = Some(("read", e));
                    return st;
                }
            }
        }
        if !batch.is_empty() && tx.send(Batch { pass, frames: batch }).is_err() {
            return st;
        }
        if !looping {
            return st;
        }
        pass = pass.saturating_add(1);
        st.loops += 1;
    }
}

/// Frames from a reader thread; waits (counting an underrun) when the reader is behind.
struct ReaderSource {
    rx: Receiver<Batch>,
    batch: Batch,
    pos: usize,
    frame_len: usize,
    loop_seconds: u32,
    underruns: u64,
}

impl FrameSource for ReaderSource {
    fn next_frame(&mut self) -> Option<Frame<'_>> {
        if self.pos >= self.batch.frames.len() {
            self.batch = match self.rx.try_recv() {
                Ok(b) => b,
                Err(TryRecvError::Empty) => {
                    self.underruns += 1;
                    self.rx.recv().ok()?
                }
                Err(TryRecvError::Disconnected) => return None,
            };
            self.pos = 0;
        }
        let at = self.pos;
        self.pos += self.frame_len;
        Some(Frame {
            bytes: self.batch.frames.get(at..self.pos)?,
            add_seconds: self.batch.pass.saturating_mul(self.loop_seconds),
        })
    }

    fn underruns(&self) -> u64 {
        self.underruns
    }
}

/// Retry a send while the socket buffer is full; a refused datagram (ICMP from a receiver not
/// (yet) listening) is gone, like any other loss on the path.
fn send_retrying(
    to: SocketAddr,
    would_block: &mut u64,
    mut send: impl FnMut() -> std::io::Result<()>,
) -> Result<(), StreamSessionError> {
    loop {
        match send() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                *would_block += 1;
                std::hint::spin_loop();
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(io_err(format!("send to {to}"))(e).into()),
        }
    }
}

/// Most datagrams of one gathered transmit (`--burst` is at most 64).
const MAX_GATHERED: usize = 64;

/// The sending socket and its counters.
pub(crate) struct Wire {
    sock: std::net::UdpSocket,
    to: SocketAddr,
    ctl: Vec<u8>,
    would_block: u64,
}

impl Wire {
    /// A non-blocking socket connected to `to` with a `sndbuf` send buffer.
    pub(crate) fn open(to: SocketAddr, sndbuf: usize) -> Result<Wire, StreamSessionError> {
        let (sock, _mtu) = open_socket(to, sndbuf)?;
        Ok(Wire {
            sock,
            to,
            ctl: vec![0u8; 2048],
            would_block: 0,
        })
    }

    /// Times a send found the socket buffer full (and was retried).
    pub(crate) fn would_block(&self) -> u64 {
        self.would_block
    }

    /// Hand the datagrams waiting on the socket (NAKs, keep-alives) to `f`, at most
    /// [`RETURNS_PER_CALL`]: a flood of them (forged from the receiver's address) must not
    /// keep the loop from sending; the rest wait in the socket buffer or are dropped there.
    pub(crate) fn read_returns(&mut self, mut f: impl FnMut(&[u8])) {
        for _ in 0..RETURNS_PER_CALL {
            let Ok((n, _from)) = self.sock.recv_from(&mut self.ctl) else {
                return;
            };
            f(self.ctl.get(..n).unwrap_or_default());
        }
    }

    /// Hand a transmit to the kernel: one datagram with send(2), or equal-sized datagrams with
    /// one UDP GSO call where the kernel has it (UDP_SEGMENT, Linux ≥ 4.18), else one sendmmsg.
    pub(crate) fn send(&mut self, t: &Transmit<'_>) -> Result<(), StreamSessionError> {
        let (sock, to) = (&self.sock, self.to);
        if !t.frames.is_empty() {
            // Gathered: each datagram's prefix and its frame where it lies (a relay's receive
            // buffer), two iovecs per datagram in one UDP GSO sendmsg — no copy in user space.
            let mut parts = [IoSlice::new(&[]); 2 * MAX_GATHERED];
            let mut all = t.parts().peekable();
            while all.peek().is_some() {
                let mut n = 0;
                for (prefix, frame) in all.by_ref().take(MAX_GATHERED) {
                    parts[n] = IoSlice::new(prefix);
                    parts[n + 1] = IoSlice::new(frame);
                    n += 2;
                }
                let seg = t
                    .segment_size
                    .unwrap_or_else(|| parts.iter().take(2).map(|p| p.len()).sum());
                send_retrying(to, &mut self.would_block, || {
                    netio::gso::send_gso_parts(sock, &parts[..n], 2, seg).map(drop)
                })?;
            }
            return Ok(());
        }
        match t.segment_size {
            None => send_retrying(to, &mut self.would_block, || sock.send_to(t.contents, to).map(drop)),
            Some(seg) => send_retrying(to, &mut self.would_block, || {
                netio::gso::send_gso(sock, t.contents, seg).map(drop)
            }),
        }
    }

    /// Read every datagram waiting on the socket into the sender (NAKs), then send the repeats
    /// they ask for.
    fn serve_naks(&mut self, sender: &mut Sender<PacedSchedule>, now: Instant) -> Result<(), StreamSessionError> {
        self.read_returns(|d| sender.handle_nak(now, d));
        while let Some(t) = sender.poll_transmit(now).map_err(loop_error)? {
            self.send(&t)?;
            sender.on_transmitted(Instant::now());
        }
        Ok(())
    }
}

fn loop_error(e: SenderError) -> StreamSessionError {
    StreamSessionError::Schedule(e)
}

/// Datagrams read back from the destination per call (calls come every millisecond): a
/// receiver sends one NAK per station per millisecond at most, a jive5ab a keep-alive every N
/// datagrams.
const RETURNS_PER_CALL: usize = 256;

/// A sender session for the native prefix: differs between runs (even two started in the same
/// nanosecond, by the process id), never 0 (which means "not given"). It tells a receiver that a
/// sender restarted; it is not a secret, so nothing stronger than a mix of clock and pid.
pub(crate) fn new_session() -> u16 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // splitmix64 finaliser: every input bit reaches the 16 bits kept.
    let mut z = t ^ (u64::from(std::process::id()) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    match (z ^ (z >> 16) ^ (z >> 32) ^ (z >> 48)) as u16 {
        0 => 1,
        s => s,
    }
}

/// jive5ab starts its udps sequence at a random value; so do we in that framing (48 bits of the
/// wall clock), native and bare framing at 0.
pub(crate) fn first_seq(format: SeqFormat) -> u64 {
    if format != SeqFormat::Jive5ab {
        return 0;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        & 0x0000_ffff_ffff_ffff
}

/// Check the request and inspect every input.
fn validate(cfg: &mut SendConfig) -> Result<Vec<Source>, StreamSessionError> {
    if cfg.inputs.is_empty() {
        return Err(ConfigError::NoInputs.into());
    }
    if cfg.inputs.len() > usize::from(u16::MAX) {
        return Err(ConfigError::TooManyStations {
            count: cfg.inputs.len(),
        }
        .into());
    }
    if cfg.arq_latency.is_some() && cfg.format != SeqFormat::Native {
        return Err(ConfigError::ArqNeedsNative.into());
    }
    if cfg.senders == 0 {
        return Err(ConfigError::NoSenders.into());
    }
    if !cfg.board_to.is_empty() && cfg.board_to.len() != cfg.senders {
        return Err(ConfigError::BoardDestinations {
            destinations: cfg.board_to.len(),
            senders: cfg.senders,
        }
        .into());
    }
    if cfg.senders > 1 && cfg.format == SeqFormat::Native {
        return Err(ConfigError::BoardsNeedBoardFraming.into());
    }
    let inputs = std::mem::take(&mut cfg.inputs);
    let sources: Vec<Source> = inputs.into_iter().map(|p| examine(cfg, p)).collect::<Result<_, _>>()?;
    if cfg.senders > 1 {
        for s in &sources {
            if usize::from(s.threads) < cfg.senders {
                let (threads, senders) = (s.threads, cfg.senders);
                return Err(StreamSessionError::input(
                    &s.name,
                    InputProblem::ThreadsForSenders { threads, senders },
                ));
            }
            if s.memory.is_none() {
                return Err(StreamSessionError::input(&s.name, InputProblem::BoardsNeedMemory));
            }
        }
    }
    Ok(sources)
}

/// The VDIF thread ids board `board` of `senders` carries of a station with `threads` threads:
/// contiguous blocks whose sizes differ by at most one (4 threads over 2 boards: 0-1 and 2-3).
pub fn board_threads(threads: u16, senders: usize, board: usize) -> Vec<u16> {
    let (t, k) = (usize::from(threads), senders.max(1));
    let (lo, hi) = (board * t / k, (board + 1) * t / k);
    (lo..hi.min(t)).filter_map(|x| u16::try_from(x).ok()).collect()
}

/// The sending socket (non-blocking, connected to the destination) and its path MTU.
fn open_socket(to: SocketAddr, sndbuf: usize) -> Result<(std::net::UdpSocket, Option<usize>), StreamSessionError> {
    let bind = if to.is_ipv4() {
        SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
    };
    let (sock, _grant) = bind_udp(
        bind,
        BufferRequest {
            rcv: 1 << 20,
            snd: sndbuf,
        },
    )?;
    sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
    // One destination: connected, so GSO can be used and ICMP errors are reported.
    sock.connect(to).map_err(io_err(format!("connect to {to}")))?;
    let path_mtu = netio::socket::path_mtu(&sock);
    Ok((sock, path_mtu))
}

/// What the operator should know before the run: a timer slack the kernel refused, datagrams
/// larger than the path MTU.
fn setup_warnings(cfg: &SendConfig, largest_frame: Option<usize>, path_mtu: Option<usize>) -> Vec<String> {
    let mut warnings = Vec::new();
    if cfg.spin < netio::pacer::DEFAULT_SPIN && !netio::pacer::fine_timer_slack() {
        warnings.push(format!(
            "spin window {:?}: the kernel refused a 1 ns timer slack, sleeps may end up to ~50 us late",
            cfg.spin
        ));
    }
    let ip_udp = if cfg.to.is_ipv4() { 28 } else { 48 };
    if let (Some(mtu), Some(largest)) = (path_mtu, largest_frame) {
        let datagram = largest + cfg.format.prefix_len();
        if datagram + ip_udp > mtu {
            warnings.push(format!(
                "{datagram}-byte datagrams exceed the path MTU {mtu} to {}: every frame is fragmented, and under \
                 loss fragment reassembly collapses (one lost fragment loses the frame and holds reassembly memory); \
                 use jumbo frames on the path or frames of at most {} bytes",
                cfg.to,
                mtu - ip_udp - cfg.format.prefix_len()
            ));
        }
    }
    warnings
}

/// The state machine's configuration of one sender (one socket).
fn sender_config(cfg: &SendConfig, start: Instant, seed: u64) -> SenderConfig {
    SenderConfig {
        format: cfg.format,
        session: new_session(),
        first_seq: first_seq(cfg.format),
        burst: cfg.burst,
        arq_latency: cfg.arq_latency,
        inject_loss: if cfg.inject_loss > 0.0 {
            LossModel::Bernoulli { p: cfg.inject_loss }
        } else {
            LossModel::None
        },
        seed,
        start,
        duration: cfg.duration,
    }
}

/// One sending socket and the state machine of what leaves it: the one sender, or one board of
/// a simulated backend carrying its share of every station's threads.
struct Board {
    sender: Sender<PacedSchedule>,
    wire: Wire,
    local: SocketAddr,
    /// Thread ids it carries (of the station with the most threads).
    threads: Vec<u16>,
}

impl Board {
    fn new(to: SocketAddr, sender: Sender<PacedSchedule>, sock: std::net::UdpSocket, threads: Vec<u16>) -> Board {
        let local = sock
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        Board {
            sender,
            wire: Wire {
                sock,
                to,
                ctl: vec![0u8; 2048],
                would_block: 0,
            },
            local,
            threads,
        }
    }

    fn result(&self) -> SentBoard {
        let t = self.sender.totals();
        SentBoard {
            local_addr: self.local.to_string(),
            local_port: self.local.port(),
            to: self.wire.to.to_string(),
            threads: self.threads.clone(),
            frames_sent: t.frames,
            bytes_sent: t.bytes,
            achieved_rate_bps: t.achieved_rate_bps,
            slips: t.slips,
        }
    }
}

/// `cfg.senders` boards (K > 1), each its own socket sending its block of every station's
/// threads from the shared memory, paced per time step at its share of the station's rate.
fn build_boards(
    cfg: &SendConfig,
    sources: Vec<Source>,
    (start, later): (Instant, u32),
) -> Result<(Vec<Board>, Option<usize>), StreamSessionError> {
    let shared: Vec<(Source, Bytes)> = sources
        .into_iter()
        .map(|mut s| {
            let data = s.memory.take().unwrap_or_default();
            (s, data)
        })
        .collect();
    let most_threads = shared.iter().map(|(s, _)| s.threads).max().unwrap_or(1);
    let mut boards = Vec::new();
    let mut path_mtu = None;
    for b in 0..cfg.senders {
        // Each board its own loss draws, so boards do not lose the same time steps.
        let mut sender = Sender::new(sender_config(cfg, start, cfg.seed.wrapping_add(b as u64)));
        for (src, data) in &shared {
            let share = board_threads(src.threads, cfg.senders, b);
            let m = share.len() as u64;
            // One time step of the whole station (a frame of every thread) at its rate.
            let step = Spacing::from_rate(
                (src.data_len as u64) * u64::from(src.threads),
                src.rate_bps.round() as u64,
            );
            let pacer = paced(cfg, Pacer::new(start, step));
            let source = MemorySource::from_bytes(data.clone(), src.frame_len, src.loop_seconds)
                .only_threads(&share)
                .later_by(later);
            let spec = StationSpec {
                name: src.name.clone(),
                station_id: src.station_id,
                threads: src.threads,
                frame_len: src.frame_len,
                data_len: src.data_len,
                fps: src.fps,
                rate_bps: src.rate_bps * m as f64 / f64::from(src.threads.max(1)),
            };
            sender.add_station(spec, Box::new(source), PacedSchedule::steps(pacer, m));
        }
        let to = cfg.board_to.get(b).copied().unwrap_or(cfg.to);
        let (sock, mtu) = open_socket(to, cfg.sndbuf)?;
        path_mtu = path_mtu.or(mtu);
        boards.push(Board::new(
            to,
            sender,
            sock,
            board_threads(most_threads, cfg.senders, b),
        ));
    }
    Ok((boards, path_mtu))
}

/// `pacer` with the run's catch-up bound and speed; fixed to the clock when late frames are
/// skipped (a backend's frames carry their time: what falls beyond the bound is not sent late).
fn paced(cfg: &SendConfig, pacer: Pacer) -> Pacer {
    let pacer = pacer.with_max_lag(cfg.max_lag).with_catch_up(cfg.catch_up);
    if cfg.skip_late {
        pacer.fixed_to_clock()
    } else {
        pacer
    }
}

/// The sender state machine with one station per source, its timeline starting at `start`;
/// streamed sources get a reader thread each (their handles, in station order).
fn build_sender(
    cfg: &SendConfig,
    sources: Vec<Source>,
    (start, later): (Instant, u32),
) -> (Sender<PacedSchedule>, Vec<Option<JoinHandle<ReaderStats>>>) {
    let mut sender = Sender::new(sender_config(cfg, start, cfg.seed));
    let mut readers = Vec::new();
    for src in sources {
        let spacing = Spacing::from_rate(src.data_len as u64, src.rate_bps.round() as u64);
        let pacer = paced(cfg, Pacer::new(start, spacing));
        let (source, reader): (Box<dyn FrameSource>, _) = match (src.memory, src.path.clone()) {
            (Some(data), _) => (
                Box::new(MemorySource::from_bytes(data, src.frame_len, src.loop_seconds).later_by(later)),
                None,
            ),
            (None, path) => {
                let (tx, rx) = sync_channel(QUEUE_BATCHES);
                let reader = path.map(|path| {
                    let (fl, looping) = (src.frame_len, src.loop_seconds > 0);
                    std::thread::spawn(move || reader(path, fl, looping, tx))
                });
                let source = ReaderSource {
                    rx,
                    batch: Batch {
                        pass: 0,
                        frames: Vec::new(),
                    },
                    pos: 0,
                    frame_len: src.frame_len,
                    loop_seconds: src.loop_seconds,
                    underruns: 0,
                };
                (Box::new(source), reader)
            }
        };
        let spec = StationSpec {
            name: src.name,
            station_id: src.station_id,
            threads: src.threads,
            frame_len: src.frame_len,
            data_len: src.data_len,
            fps: src.fps,
            rate_bps: src.rate_bps,
        };
        sender.add_station(spec, source, PacedSchedule::frames(pacer));
        readers.push(reader);
    }
    (sender, readers)
}

/// The socket loop: wait for the next departure of any board, send what each board's sender
/// hands out, answer NAKs at most every millisecond. Returns whether `stop` ended it.
fn drive(
    cfg: &SendConfig,
    boards: &mut [Board],
    stop: &AtomicBool,
    mut observer: Option<Observer<SendStatus>>,
) -> Result<bool, StreamSessionError> {
    let start = boards.first().map_or_else(Instant::now, |b| b.sender.config().start);
    let mut next_ctl = start;
    let mut next_status = start + Duration::from_secs(1);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let Some(due) = boards.iter().filter_map(|b| b.sender.poll_timeout()).min() else {
            return Ok(false);
        };
        wait_until_spin(due, cfg.spin);
        // The boards take turns, each sending what is due at the turn's start, until a round
        // sends nothing: a backend's boards send at once. (Each board sent all it had, the clock
        // read again after each send, before the next one's turn: held up at the start, board 1
        // sent nothing until board 0 had caught up, and a recorder counting threads from the
        // mode's rate learned board 0's alone.)
        let mut sent = true;
        while sent {
            sent = false;
            let round = Instant::now();
            for b in boards.iter_mut() {
                while let Some(t) = b.sender.poll_transmit(round).map_err(loop_error)? {
                    // A truncated mapped input: the kernel's read of its lost pages fails
                    // (EFAULT), ours read zeros (crate::mapped): stop with the reason.
                    b.wire.send(&t).map_err(|e| {
                        if crate::mapped::truncated() {
                            StreamSessionError::InputTruncated
                        } else {
                            e
                        }
                    })?;
                    // Departure gaps and lateness are those of the send call's return, as they
                    // were before the sender became a state machine (a GSO burst takes a while).
                    b.sender.on_transmitted(Instant::now());
                    sent = true;
                }
            }
        }
        if crate::mapped::truncated() {
            return Err(StreamSessionError::InputTruncated);
        }
        let now = Instant::now();
        // Read the socket with or without ARQ: a jive5ab sends a keep-alive back every N
        // datagrams, which would otherwise fill the receive buffer (and read as rcvbuf_errors).
        if now >= next_ctl {
            next_ctl = now + Duration::from_millis(1);
            for b in boards.iter_mut() {
                b.wire.serve_naks(&mut b.sender, now)?;
            }
        }
        if let Some(observe) = observer.as_mut().filter(|_| now >= next_status) {
            next_status += Duration::from_secs(1);
            observe(send_status(boards, now.saturating_duration_since(start)));
        }
    }
}

/// The counts so far of every board's sender, for an observer.
fn send_status(boards: &[Board], elapsed: Duration) -> SendStatus {
    let mut arq: Option<stream::arq::RetransmitStats> = None;
    for q in boards.iter().filter_map(|b| b.sender.arq_stats()) {
        arq.get_or_insert_with(Default::default).add(&q);
    }
    SendStatus {
        elapsed_s: elapsed.as_secs_f64(),
        stations: match boards {
            [one] => one.sender.station_results(),
            many => combined_results(&many.iter().map(|b| &b.sender).collect::<Vec<_>>()).unwrap_or_default(),
        },
        senders: boards.iter().map(Board::result).collect(),
        arq,
    }
}

/// The sockets and their senders: one socket with every station (and reader threads for
/// streamed files), or `cfg.senders` boards; with the path MTU the kernel knows.
type Built = (Vec<Board>, Vec<Option<JoinHandle<ReaderStats>>>, Option<usize>);

fn build(cfg: &SendConfig, sources: Vec<Source>) -> Result<Built, StreamSessionError> {
    if cfg.senders > 1 {
        let (start, later) = timeline_start(cfg, &sources);
        let (boards, path_mtu) = build_boards(cfg, sources, (start, later))?;
        return Ok((boards, Vec::new(), path_mtu));
    }
    let (sock, path_mtu) = open_socket(cfg.to, cfg.sndbuf)?;
    let threads = (0..sources.iter().map(|s| s.threads).max().unwrap_or(1)).collect();
    let (start, later) = timeline_start(cfg, &sources);
    let (sender, readers) = build_sender(cfg, sources, (start, later));
    Ok((vec![Board::new(cfg.to, sender, sock, threads)], readers, path_mtu))
}

/// When the timeline starts, and how many whole seconds later than the data say the frames
/// are sent. The inputs are loaded: normally the timeline starts now. With `cfg.realtime` (a
/// backend simulator) it starts when the clock reaches the first frame's VDIF time moved to the
/// next whole second ahead of now, so every frame leaves at its own VDIF time, as from a
/// backend, and a receiver's data age is the path's latency.
fn timeline_start(cfg: &SendConfig, sources: &[Source]) -> (Instant, u32) {
    let soon = Instant::now() + Duration::from_millis(20);
    let first = sources
        .iter()
        .filter_map(|s| s.memory.as_deref())
        .find_map(|m| vdif::VdifHeader::parse(m).ok());
    let (true, Some(h)) = (cfg.realtime, first) else {
        return (soon, 0);
    };
    let (now_wall, now) = (std::time::SystemTime::now(), Instant::now());
    let Ok(wall) = now_wall.duration_since(std::time::UNIX_EPOCH) else {
        return (soon, 0);
    };
    // Frame 0 of a second: generated data start on a second.
    let t0 = h.unix_seconds();
    let ahead = wall + Duration::from_millis(20);
    let later = (ahead.as_secs() as i64 + i64::from(ahead.subsec_nanos() > 0) - t0).clamp(0, i64::from(u32::MAX / 2));
    let due = Duration::from_secs((t0 + later) as u64);
    (now + due.saturating_sub(wall), later as u32)
}

/// Send until the files end (no `--loop`), the duration passes or `stop` is set.
pub fn run_sender(cfg: SendConfig, stop: &AtomicBool) -> Result<SendReport, StreamSessionError> {
    run_sender_observed(cfg, stop, None)
}

/// [`run_sender`], handing `observer` the counts so far once a second.
pub fn run_sender_observed(
    mut cfg: SendConfig,
    stop: &AtomicBool,
    observer: Option<Observer<SendStatus>>,
) -> Result<SendReport, StreamSessionError> {
    let sources = validate(&mut cfg)?;
    let largest_frame = sources.iter().map(|s| s.frame_len).max();
    let (mut boards, readers, path_mtu) = build(&cfg, sources)?;
    let warnings = setup_warnings(&cfg, largest_frame, path_mtu);
    let udp0 = netio::read_udp_counters().unwrap_or_default();
    let cpu0 = read_process_cpu().unwrap_or_default();
    let wall0 = Instant::now();
    let interrupted = drive(&cfg, &mut boards, stop, observer)?;
    // The last frames may still be asked for: keep answering for one latency window.
    if let (Some(latency), false) = (cfg.arq_latency, interrupted) {
        let until = Instant::now() + latency;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            for b in boards.iter_mut() {
                b.wire.serve_naks(&mut b.sender, Instant::now())?;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let wall = wall0.elapsed().as_secs_f64();
    let mut stations = match boards.as_slice() {
        [one] => one.sender.station_results(),
        many => combined_results(&many.iter().map(|b| &b.sender).collect::<Vec<_>>()).unwrap_or_default(),
    };
    let senders: Vec<SentBoard> = boards.iter().map(Board::result).collect();
    let mut arq: Option<stream::arq::RetransmitStats> = None;
    for q in boards.iter().filter_map(|b| b.sender.arq_stats()) {
        arq.get_or_insert_with(Default::default).add(&q);
    }
    let sum = |f: fn(&Board) -> u64| boards.iter().map(f).sum::<u64>();
    let (rejected_control, returned_datagrams, send_would_block) = (
        sum(|b| b.sender.rejected_control()),
        sum(|b| b.sender.returned_datagrams()),
        sum(|b| b.wire.would_block),
    );
    let duration_s = boards.iter().map(|b| b.sender.duration_s()).fold(0.0, f64::max);
    // Dropping the senders drops the readers' channels: a reader blocked on a full queue ends.
    drop(boards);
    for (st, reader) in stations.iter_mut().zip(readers) {
        let rs = reader.and_then(|h| h.join().ok()).unwrap_or_default();
        if let Some((op, source)) = rs.error {
            return Err(StreamSessionError::input(
                &st.file,
                InputProblem::ReadWhileSending { op, source },
            ));
        }
        st.loops += rs.loops;
        st.garbage_bytes += rs.garbage_bytes;
    }
    Ok(SendReport {
        to: cfg.to.to_string(),
        format: cfg.format,
        duration_s,
        stations,
        senders,
        path_mtu,
        warnings,
        arq,
        rejected_control,
        returned_datagrams,
        send_would_block,
        cpu: read_process_cpu().unwrap_or_default().share_since(
            &cpu0,
            Duration::from_secs_f64(wall),
            clock_ticks_per_second(),
        ),
        udp: netio::read_udp_counters().unwrap_or_default().delta(&udp0),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_split_in_contiguous_blocks_differing_by_at_most_one() {
        let blocks = |t, k| (0..k).map(|b| board_threads(t, k, b)).collect::<Vec<_>>();
        assert_eq!(blocks(4, 2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(blocks(4, 3), vec![vec![0], vec![1], vec![2, 3]]);
        assert_eq!(blocks(1, 1), vec![vec![0]]);
        for t in 1..=16u16 {
            for k in 1..=usize::from(t) {
                let all: Vec<u16> = blocks(t, k).concat();
                assert_eq!(all, (0..t).collect::<Vec<_>>(), "{t} threads over {k}");
                let sizes: Vec<usize> = blocks(t, k).iter().map(Vec::len).collect();
                let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                assert!(lo.zip(hi).is_some_and(|(l, h)| h - l <= 1 && *l >= 1), "{sizes:?}");
            }
        }
    }
}

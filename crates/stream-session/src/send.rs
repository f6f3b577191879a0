//! The sender: VDIF files (one station each) read on reader threads, one frame per datagram on
//! an exact absolute timeline per station, NAKs answered from a repeat buffer between frames.

use std::fs::File;
use std::io::BufReader;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use linkemu::{LossModel, LossProcess};
use netio::counters::{ProcessCpu, UdpCounters};
use netio::pacer::wait_until_spin;
use netio::{bind_udp, BufferRequest, Pacer, Spacing};
use stream::arq::RetransmitBuffer;
use stream::wire::{encode_data, Nak, NativePrefix};
use stream::SeqFormat;
use vdif::{FrameScanner, ScanEvent};

use crate::report::{self, IntervalStats, SendReport, SentStation};
use crate::{io_err, SessionError};

/// Frames per batch handed from a reader thread to the sender.
const BATCH_FRAMES: usize = 64;
/// Batches queued per reader (64 × 64 frames of 8 KB = 32 MB).
const QUEUE_BATCHES: usize = 64;
/// Files up to this size are read into memory and sent from there.
const MEMORY_SOURCE_MAX: u64 = 2 << 30;
/// Most of the repeat budget: at most this share of the data rate is spent on repeats.
const REPEAT_SHARE: f64 = 0.1;

/// How to run a sender.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Destination.
    pub to: SocketAddr,
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

/// One station's VDIF: a file, or frames already in memory (e.g. just generated).
#[derive(Debug, Clone)]
pub enum Input {
    /// A VDIF file (read into memory when it fits, else streamed by a reader thread).
    File(PathBuf),
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
            Input::Memory { name, .. } => name.clone(),
        }
    }
}

/// What the pre-pass learned about one input.
struct Source {
    /// Shown as the source in reports.
    name: String,
    /// The file, when it is streamed by a reader thread.
    path: Option<PathBuf>,
    /// The whole input as contiguous frames, when it is sent from memory.
    memory: Option<Vec<u8>>,
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
fn examine(cfg: &SendConfig, input: Input) -> Result<Source, SessionError> {
    let name = input.name();
    let (path, data, rep) = match input {
        Input::File(path) => {
            let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= MEMORY_SOURCE_MAX);
            let data = if small {
                Some(std::fs::read(&path).map_err(io_err(format!("read {}", path.display())))?)
            } else {
                None
            };
            let rep = match &data {
                Some(d) => vdif::inspect::inspect(&d[..], cfg.fps, |_, _| {}),
                None => {
                    let f = File::open(&path).map_err(io_err(format!("open {}", path.display())))?;
                    vdif::inspect::inspect(BufReader::with_capacity(1 << 20, f), cfg.fps, |_, _| {})
                }
            };
            (Some(path), data, rep)
        }
        Input::Memory { data, .. } => {
            let rep = vdif::inspect::inspect(&data[..], cfg.fps, |_, _| {});
            (None, Some(data), rep)
        }
    };
    let rep = rep.map_err(|e| SessionError::Input(format!("{name}: {e}")))?;
    let (Some(station_id), Some(frame_len), Some(header_len)) = (rep.station_id, rep.frame_bytes, rep.header_bytes)
    else {
        return Err(SessionError::Input(format!("{name}: no VDIF frames found")));
    };
    let threads = rep.threads.len() as u16;
    if rep.threads.iter().enumerate().any(|(i, t)| usize::from(*t) != i) {
        return Err(SessionError::Input(format!(
            "{name}: thread ids {:?} are not 0..{threads}; the receiver places frames by thread id",
            rep.threads
        )));
    }
    let data_len = frame_len - header_len;
    let bits_per_frame = data_len as f64 * 8.0 * f64::from(threads);
    let fps = match (rep.frames_per_second, cfg.rate_bps) {
        (Some(f), _) => f,
        (None, Some(r)) if (r / bits_per_frame).fract() == 0.0 && r >= bits_per_frame => (r / bits_per_frame) as u32,
        _ => {
            return Err(SessionError::Input(format!(
                "{name}: frame rate unknown (the file spans under one second and its header states no sample rate); pass --fps or --rate"
            )))
        }
    };
    let rate_bps = cfg.rate_bps.unwrap_or(f64::from(fps) * bits_per_frame);
    let per_thread = rep.frames / u64::from(threads.max(1));
    let loop_seconds = if cfg.loop_files {
        if per_thread == 0 || per_thread % u64::from(fps) != 0 {
            return Err(SessionError::Input(format!(
                "{name}: --loop needs a file of whole seconds ({per_thread} frames per thread at {fps} frames/s)"
            )));
        }
        (per_thread / u64::from(fps)) as u32
    } else {
        0
    };
    // Sent from memory only when every byte is a frame of the stream's length (the scanner
    // counted anything else as garbage); otherwise the reader thread skips what is not.
    let memory = data.filter(|d| rep.frames.checked_mul(frame_len as u64) == Some(d.len() as u64));
    if memory.is_none() && path.is_none() {
        return Err(SessionError::Input(format!(
            "{name}: frames in memory are not contiguous VDIF"
        )));
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

#[derive(Default)]
struct ReaderStats {
    loops: u64,
    garbage_bytes: u64,
    error: Option<String>,
}

/// Read whole frames in batches; at the end restart (advancing time) when looping.
fn reader(path: PathBuf, frame_len: usize, loop_seconds: u32, tx: std::sync::mpsc::SyncSender<Vec<u8>>) -> ReaderStats {
    let mut st = ReaderStats::default();
    let mut pass = 0u32;
    loop {
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                st.error = Some(format!("open {}: {e}", path.display()));
                return st;
            }
        };
        let mut batch = Vec::with_capacity(BATCH_FRAMES * frame_len);
        for ev in FrameScanner::new(BufReader::with_capacity(1 << 20, f)) {
            match ev {
                Ok(ScanEvent::Frame {
                    mut header, mut bytes, ..
                }) => {
                    if bytes.len() != frame_len {
                        st.garbage_bytes += bytes.len() as u64;
                        continue;
                    }
                    if pass > 0 {
                        header.seconds += pass * loop_seconds;
                        let hl = header.header_len();
                        if header.emit(&mut bytes[..hl]).is_err() {
                            st.error = Some("VDIF time overflows its 30-bit seconds field while looping".into());
                            return st;
                        }
                    }
                    batch.extend_from_slice(&bytes);
                    if batch.len() >= BATCH_FRAMES * frame_len {
                        if tx.send(std::mem::take(&mut batch)).is_err() {
                            return st;
                        }
                        batch.reserve(BATCH_FRAMES * frame_len);
                    }
                }
                Ok(ScanEvent::Garbage { len, .. }) | Ok(ScanEvent::Truncated { len, .. }) => st.garbage_bytes += len,
                Err(e) => {
                    st.error = Some(format!("read {}: {e}", path.display()));
                    return st;
                }
            }
        }
        if !batch.is_empty() && tx.send(batch).is_err() {
            return st;
        }
        if loop_seconds == 0 {
            return st;
        }
        pass += 1;
        st.loops += 1;
    }
}

struct StationTx {
    src: Source,
    rx: Receiver<Vec<u8>>,
    reader: Option<JoinHandle<ReaderStats>>,
    batch: Vec<u8>,
    pos: usize,
    pacer: Pacer,
    seq: u64,
    gaps: Histogram<u64>,
    lateness: Histogram<u64>,
    last_send: Option<Instant>,
    first_send: Option<Instant>,
    frames: u64,
    bytes: u64,
    injected: u64,
    underruns: u64,
    repeats: Option<RetransmitBuffer>,
    done: bool,
    /// The whole file is in `batch` (no reader thread); looping restamps on the way out.
    in_memory: bool,
    /// Seconds to add to each header's time on the way out (memory mode, later passes).
    add_seconds: u32,
    loops: u64,
}

impl StationTx {
    /// The next frame, refilling from the reader; `None` at the end of the source.
    fn next_frame(&mut self) -> Option<(usize, usize)> {
        if self.pos >= self.batch.len() && self.in_memory {
            if self.src.loop_seconds == 0 || self.batch.is_empty() {
                return None;
            }
            self.pos = 0;
            self.loops += 1;
            self.add_seconds += self.src.loop_seconds;
        }
        if self.pos >= self.batch.len() {
            let b = match self.rx.try_recv() {
                Ok(b) => b,
                Err(TryRecvError::Empty) => {
                    self.underruns += 1;
                    self.rx.recv().ok()?
                }
                Err(TryRecvError::Disconnected) => return None,
            };
            self.batch = b;
            self.pos = 0;
        }
        let at = self.pos;
        self.pos += self.src.frame_len;
        (self.pos <= self.batch.len()).then_some((at, self.src.frame_len))
    }
}

/// 1 ns .. 60 s at 3 significant digits.
fn ns_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("constant histogram bounds are valid")
}

fn send_all(sock: &std::net::UdpSocket, d: &[u8], to: SocketAddr, would_block: &mut u64) -> Result<(), SessionError> {
    loop {
        match sock.send_to(d, to) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                *would_block += 1;
                std::hint::spin_loop();
            }
            // Loopback/ICMP feedback from a receiver not (yet) listening: the datagram is gone,
            // like any other loss on the path.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => {
                return Err(SessionError::Io {
                    what: format!("send to {to}"),
                    source: e,
                })
            }
        }
    }
}

/// The sending socket, the injected loss in front of it, and its counters.
struct Wire {
    sock: std::net::UdpSocket,
    to: SocketAddr,
    loss: LossProcess,
    ctl: Vec<u8>,
    would_block: u64,
    rejected_control: u64,
}

impl Wire {
    /// Send one datagram unless the injected loss takes it; `false` when it was dropped.
    fn send(&mut self, d: &[u8]) -> Result<bool, SessionError> {
        if self.loss.lose() {
            return Ok(false);
        }
        send_all(&self.sock, d, self.to, &mut self.would_block)?;
        Ok(true)
    }

    /// Equal-sized datagrams back to back in `buf`: one UDP GSO call where the kernel has it
    /// (UDP_SEGMENT, Linux ≥ 4.18), else one sendmmsg.
    fn send_segments(&mut self, buf: &[u8], seg_len: usize) -> Result<(), SessionError> {
        loop {
            match netio::gso::send_gso(&self.sock, buf, seg_len) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.would_block += 1;
                    std::hint::spin_loop();
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
                Err(e) => {
                    return Err(SessionError::Io {
                        what: format!("send to {}", self.to),
                        source: e,
                    })
                }
            }
        }
    }

    /// Read every NAK waiting on the socket and send what they ask for, within each repeat budget.
    fn serve_naks(&mut self, stations: &mut [StationTx]) -> Result<(), SessionError> {
        while let Ok((n, _from)) = self.sock.recv_from(&mut self.ctl) {
            match Nak::parse(&self.ctl[..n]) {
                Ok(nak) => match stations
                    .get_mut(usize::from(nak.stream))
                    .and_then(|s| s.repeats.as_mut())
                {
                    Some(r) => r.on_nak(&nak),
                    None => self.rejected_control += 1,
                },
                Err(_) => self.rejected_control += 1,
            }
        }
        for st in stations.iter_mut() {
            let Some(r) = st.repeats.as_mut() else { continue };
            while let Some(rep) = r.next_repeat() {
                let mut rep = rep.to_vec();
                if let Some(flags) = rep.get_mut(5) {
                    *flags |= 1;
                }
                self.send(&rep)?;
            }
        }
        Ok(())
    }
}

/// A sender session for the native prefix: differs between runs (even two started in the same
/// nanosecond, by the process id), never 0 (which means "not given"). It tells a receiver that a
/// sender restarted; it is not a secret, so nothing stronger than a mix of clock and pid.
fn new_session() -> u16 {
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

/// Send until the files end (no `--loop`), the duration passes or `stop` is set.
pub fn run_sender(mut cfg: SendConfig, stop: &AtomicBool) -> Result<SendReport, SessionError> {
    if cfg.inputs.is_empty() {
        return Err(SessionError::Input("no input files".into()));
    }
    if cfg.inputs.len() > usize::from(u16::MAX) {
        return Err(SessionError::Input("too many stations".into()));
    }
    if cfg.arq_latency.is_some() && cfg.format != SeqFormat::Native {
        return Err(SessionError::Input(
            "--arq-latency needs --seq-format native (NAKs name native sequence numbers)".into(),
        ));
    }
    let inputs = std::mem::take(&mut cfg.inputs);
    let sources = inputs
        .into_iter()
        .map(|p| examine(&cfg, p))
        .collect::<Result<Vec<_>, _>>()?;
    let bind: SocketAddr = if cfg.to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
        .parse()
        .map_err(|_| SessionError::Input("bind address".into()))?;
    let (sock, _grant) = bind_udp(
        bind,
        BufferRequest {
            rcv: 1 << 20,
            snd: cfg.sndbuf,
        },
    )?;
    sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
    // One destination: connected, so GSO can be used and ICMP errors are reported.
    sock.connect(cfg.to).map_err(io_err(format!("connect to {}", cfg.to)))?;
    let path_mtu = netio::socket::path_mtu(&sock);
    let mut warnings = Vec::new();
    if cfg.spin < netio::pacer::DEFAULT_SPIN && !netio::pacer::fine_timer_slack() {
        warnings.push(format!(
            "spin window {:?}: the kernel refused a 1 ns timer slack, sleeps may end up to ~50 us late",
            cfg.spin
        ));
    }
    let ip_udp = if cfg.to.is_ipv4() { 28 } else { 48 };
    if let (Some(mtu), Some(largest)) = (path_mtu, sources.iter().map(|s| s.frame_len).max()) {
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

    // The inputs are loaded: the timeline starts now.
    let start = Instant::now() + Duration::from_millis(20);
    let jive_start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        & 0x0000_ffff_ffff_ffff;
    let session = new_session();
    let mut stations: Vec<StationTx> = sources
        .into_iter()
        .map(|mut src| {
            let whole = src.memory.take();
            let (tx, rx) = sync_channel(QUEUE_BATCHES);
            let in_memory = whole.is_some();
            let reader = match (&whole, src.path.clone()) {
                (None, Some(path)) => {
                    let (fl, ls) = (src.frame_len, src.loop_seconds);
                    Some(std::thread::spawn(move || reader(path, fl, ls, tx)))
                }
                _ => None,
            };
            let spacing = Spacing::from_rate(src.data_len as u64, src.rate_bps.round() as u64);
            let frames_per_s = src.rate_bps / (src.data_len as f64 * 8.0);
            let repeats = cfg
                .arq_latency
                .map(|l| RetransmitBuffer::new((l.as_secs_f64() * frames_per_s).ceil() as usize + 1, REPEAT_SHARE));
            StationTx {
                src,
                rx,
                reader,
                batch: whole.unwrap_or_default(),
                pos: 0,
                pacer: Pacer::new(start, spacing)
                    .with_max_lag(cfg.max_lag)
                    .with_catch_up(cfg.catch_up),
                // jive5ab starts its udps sequence at a random value; so do we in that framing.
                seq: if cfg.format == SeqFormat::Jive5ab {
                    jive_start
                } else {
                    0
                },
                gaps: ns_histogram(),
                lateness: ns_histogram(),
                last_send: None,
                first_send: None,
                frames: 0,
                bytes: 0,
                injected: 0,
                underruns: 0,
                repeats,
                done: false,
                in_memory,
                add_seconds: 0,
                loops: 0,
            }
        })
        .collect();
    let mut wire = Wire {
        sock,
        to: cfg.to,
        loss: LossProcess::new(
            if cfg.inject_loss > 0.0 {
                LossModel::Bernoulli { p: cfg.inject_loss }
            } else {
                LossModel::None
            },
            cfg.seed,
        ),
        ctl: vec![0u8; 2048],
        would_block: 0,
        rejected_control: 0,
    };
    let udp0 = UdpCounters::read().unwrap_or_default();
    let cpu0 = ProcessCpu::read().unwrap_or_default();
    let wall0 = Instant::now();
    let mut d = Vec::with_capacity(65_536);
    let mut gso_buf = Vec::with_capacity(65_536 * 2);
    let mut next_ctl = start;
    let mut interrupted = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let Some(i) = (0..stations.len())
            .filter(|i| !stations[*i].done)
            .min_by_key(|i| stations[*i].pacer.next_deadline())
        else {
            break;
        };
        // With --burst k the k-th frame's deadline releases k frames at once (one GSO call);
        // behind the timeline, at up to --catch-up times the rate.
        let burst = cfg.burst.max(1) as u64;
        let deadline = stations[i].pacer.release_deadline(burst);
        if cfg
            .duration
            .is_some_and(|dur| stations[i].pacer.next_deadline() >= start + dur)
        {
            break;
        }
        wait_until_spin(deadline, cfg.spin);
        let st = &mut stations[i];
        gso_buf.clear();
        let mut seg_len = 0;
        let mut taken = 0u64;
        while taken < burst {
            let Some((at, len)) = st.next_frame() else {
                st.done = true;
                break;
            };
            taken += 1;
            let p = NativePrefix {
                retransmit: false,
                stream: i as u16,
                seq: st.seq,
                frames_per_second: st.src.fps,
                threads: st.src.threads,
                session,
            };
            encode_data(cfg.format, &p, &st.batch[at..at + len], &mut d);
            if st.add_seconds > 0 {
                let pre = cfg.format.prefix_len();
                if let Ok(mut h) = vdif::VdifHeader::parse(&d[pre..]) {
                    h.seconds += st.add_seconds;
                    let hl = h.header_len();
                    if h.emit(&mut d[pre..pre + hl]).is_err() {
                        return Err(SessionError::Input(
                            "VDIF time overflows its 30-bit seconds field while looping".into(),
                        ));
                    }
                }
            }
            if burst == 1 {
                if !wire.send(&d)? {
                    st.injected += 1;
                }
            } else if wire.loss.lose() {
                st.injected += 1;
            } else {
                gso_buf.extend_from_slice(&d);
                seg_len = d.len();
            }
            st.frames += 1;
            st.bytes += d.len() as u64;
            if let Some(r) = st.repeats.as_mut() {
                r.on_sent(st.seq, &d);
            }
            st.seq = st.seq.wrapping_add(1);
        }
        if !gso_buf.is_empty() {
            wire.send_segments(&gso_buf, seg_len)?;
        }
        if taken == 0 {
            continue;
        }
        let now = Instant::now();
        let late = st.pacer.on_sent_batch(now, taken as usize);
        let _ = st.lateness.record((late.late.as_nanos() as u64).max(1));
        if let Some(prev) = st.last_send {
            let _ = st.gaps.record(((now - prev).as_nanos() as u64).max(1));
        }
        st.last_send = Some(now);
        st.first_send.get_or_insert(now);
        if cfg.arq_latency.is_some() && now >= next_ctl {
            next_ctl = now + Duration::from_millis(1);
            wire.serve_naks(&mut stations)?;
        }
    }
    // The last frames may still be asked for: keep answering for one latency window.
    if let (Some(latency), false) = (cfg.arq_latency, interrupted) {
        let until = Instant::now() + latency;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            wire.serve_naks(&mut stations)?;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let wall = wall0.elapsed().as_secs_f64();
    let mut out = Vec::new();
    let mut arq: Option<stream::arq::RetransmitStats> = None;
    let first = stations.iter().filter_map(|s| s.first_send).min();
    let last = stations.iter().filter_map(|s| s.last_send).max();
    for (i, mut st) in stations.into_iter().enumerate() {
        // Unblock and collect the reader.
        let rx = std::mem::replace(&mut st.rx, sync_channel(1).1);
        drop(rx);
        let rs = st.reader.take().and_then(|h| h.join().ok()).unwrap_or_default();
        if let Some(e) = rs.error {
            return Err(SessionError::Input(e));
        }
        if let Some(r) = st.repeats.as_ref() {
            let s = *r.stats();
            let a = arq.get_or_insert_with(Default::default);
            a.naks += s.naks;
            a.asked += s.asked;
            a.resent += s.resent;
            a.resent_bytes += s.resent_bytes;
            a.unavailable += s.unavailable;
            a.over_budget += s.over_budget;
        }
        let span = match (st.first_send, st.last_send) {
            (Some(f), Some(l)) if l > f => (l - f).as_secs_f64(),
            _ => 0.0,
        };
        let data_bits = (st.frames.saturating_sub(1)) as f64 * st.src.data_len as f64 * 8.0;
        out.push(SentStation {
            file: st.src.name.clone(),
            station: vdif::station_name(st.src.station_id),
            stream: i as u16,
            frames_per_second: st.src.fps,
            threads: st.src.threads,
            frame_len: st.src.frame_len,
            rate_bps: st.src.rate_bps,
            spacing_us: st.src.data_len as f64 * 8.0 / st.src.rate_bps * 1e6,
            frames_sent: st.frames,
            bytes_sent: st.bytes,
            injected_drops: st.injected,
            achieved_rate_bps: if span > 0.0 { data_bits / span } else { 0.0 },
            loops: rs.loops + st.loops,
            source_underruns: st.underruns,
            garbage_bytes: rs.garbage_bytes,
            departure_gap: IntervalStats::from_ns(&st.gaps),
            lateness: IntervalStats::from_ns(&st.lateness),
            slips: st.pacer.slips(),
            slipped_s: st.pacer.slipped_total().as_secs_f64(),
        });
    }
    Ok(SendReport {
        to: cfg.to.to_string(),
        format: cfg.format,
        duration_s: match (first, last) {
            (Some(f), Some(l)) => (l - f).as_secs_f64(),
            _ => 0.0,
        },
        stations: out,
        path_mtu,
        warnings,
        arq,
        rejected_control: wire.rejected_control,
        send_would_block: wire.would_block,
        cpu: report::cpu(
            ProcessCpu::read()
                .unwrap_or_default()
                .share_since(&cpu0, Duration::from_secs_f64(wall)),
        ),
        udp: report::udp(UdpCounters::read().unwrap_or_default().delta(&udp0)),
        interrupted,
    })
}

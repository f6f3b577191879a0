//! `evlbi stream relay` over real sockets: a reader thread per input socket (recvmmsg batches),
//! the sans-IO [`stream::relay::Relay`] on the calling thread, the tee through [`Recorder`](recording::write::Recorder).
//!
//! Reader threads receive (recvmmsg) straight into buffers of a pool per input and hand each
//! filled buffer, shared, to the relay thread over a bounded channel: the relay queues its frames
//! as slices of that buffer and sends them from there (one GSO sendmsg gathering prefix and
//! frame per datagram), so a frame is never copied in user space; the buffer goes back to its
//! reader's pool when its last frame has left. When the relay thread falls behind, the channel
//! fills (or the pool runs dry), the reader waits, the socket buffer fills and the kernel's drops
//! are counted at that socket — loss is reported where it happened, never hidden in a queue.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver as ChanRx, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use netio::counters::{clock_ticks_per_second, read_process_cpu, socket_drops, ProcessCpu};
use netio::{io_err, BufferRequest};
use stream::relay::{Relay, RelayConfig, KEEPALIVE};
use stream::results::{RelayReport, TeeReport};
use stream::SeqFormat;

use crate::send::{first_seq, new_session, Wire};
use crate::{ConfigError, Observer, StreamSessionError};
use recording::write::{OutputDir, Recorder, RecordingConfig, WriterPlacement};
use stream::results::RelayStatus;

/// Batches in flight per input between its reader and the relay thread.
const QUEUE_BATCHES: usize = 32;
/// Datagrams per recvmmsg call.
const BATCH: usize = 64;
/// Largest datagram read whole (larger ones are counted as oversized).
const MAX_DATAGRAM: usize = 65_536;
/// After a batch less than half full, a reader sleeps this long so the next recvmmsg finds a
/// batch queued (as `stream recv` does): one frame per datagram at 64000/s otherwise costs a
/// wake-up, a poll and a channel message per datagram. The socket buffer holds the nap many
/// times over (16 frames of 8 KB at 4 Gb/s).
const NAP: Duration = Duration::from_micros(250);
/// Receive buffer (as the kernel reports it) below which a reader does not nap.
const NAP_MIN_RCVBUF: usize = 2 << 20;
/// Longest the relay thread spends sending before it takes the input again, so a backlog
/// leaving at the catch-up rate never keeps the readers' batches waiting.
const SEND_SLICE: Duration = Duration::from_micros(500);

/// How to run a relay.
#[derive(Debug, Clone)]
pub struct RelayRunConfig {
    /// Addresses (or multicast groups) to listen on, one reader thread each.
    pub listen: Vec<netio::ListenSpec>,
    /// Where the frames go.
    pub to: SocketAddr,
    /// The relay's settings (`start` is set when the run starts).
    pub relay: RelayConfig,
    /// Receive socket buffer per input.
    pub rcvbuf: usize,
    /// Send socket buffer.
    pub sndbuf: usize,
    /// Record what came in here (files per station, as `stream recv --out` writes them).
    pub tee: Option<PathBuf>,
    /// Or record it as a vbs/Mark6 scan over many disks.
    pub tee_recording: Option<RecordingConfig>,
    /// Start a new tee file after this many bytes.
    pub chunk: Option<u64>,
    /// One tee file per VDIF thread of each station, not one per station.
    pub split_threads: bool,
    /// Where the tee's file writes run.
    pub writer: WriterPlacement,
    /// Memory between the relay and the tee's writer, bytes.
    pub write_buffer: u64,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when no datagram came for this long (counted from the start until the first).
    pub idle_timeout: Option<Duration>,
    /// Live line cadence.
    pub interval: Duration,
}

/// One live line: the interval's figures and totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RelayLiveLine {
    /// Seconds since the first datagram.
    pub elapsed_s: f64,
    /// Input datagram bytes per second over the interval, bits.
    pub in_rate_bps: f64,
    /// Frames taken in the interval.
    pub frames_in: u64,
    /// Frames sent in the interval (first transmissions).
    pub frames_out: u64,
    /// Frames missing from the input in the interval.
    pub lost_in_input: u64,
    /// Frames dropped at a full buffer in the interval.
    pub overflow_dropped: u64,
    /// Datagrams refused in the interval.
    pub rejected: u64,
    /// Datagrams the kernel dropped at the input sockets in the interval.
    pub kernel_drops: u64,
    /// Frames waiting now.
    pub queued: u64,
    /// Senders seen.
    pub senders: u64,
}

/// One batch of datagrams from an input: `buf` is the buffer recvmmsg wrote them into (shared:
/// the relay keeps slices of it), `items` where each lies (sender, offset, length, truncated).
struct InBatch {
    input: u16,
    at: Instant,
    buf: Bytes,
    items: Vec<(SocketAddr, usize, usize, bool)>,
}

/// A receive buffer lent to the relay: back to its reader's pool when the last frame in it has
/// left (or was dropped), so the steady state allocates nothing.
struct Pooled {
    buf: Vec<u8>,
    home: mpsc::Sender<Vec<u8>>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // The reader may have ended: the buffer is then simply freed.
        let _ = self.home.send(std::mem::take(&mut self.buf));
    }
}

/// An input socket and its reader thread.
struct Input {
    sock: UdpSocket,
    reader: Option<JoinHandle<Result<(), ReaderError>>>,
}

/// Bound sockets, before relaying: lets a caller print the ports (`--listen 127.0.0.1:0`).
pub struct BoundRelay {
    cfg: RelayRunConfig,
    inputs: Vec<UdpSocket>,
    grants: Vec<netio::BufferGrant>,
    wire: Wire,
    tee: Recorder,
    observer: Option<Observer<RelayStatus>>,
    notice: Option<Observer<String>>,
}

impl BoundRelay {
    /// Bind every input (buffers sized first, so nothing that comes is refused) and the
    /// output, then set the tee up.
    pub fn bind(cfg: RelayRunConfig) -> Result<BoundRelay, StreamSessionError> {
        if cfg.listen.is_empty() {
            return Err(ConfigError::NoListen.into());
        }
        if cfg.relay.arq_latency.is_some() && cfg.relay.output != SeqFormat::Native {
            return Err(ConfigError::ArqNeedsNative.into());
        }
        let mut inputs = Vec::new();
        let mut grants = Vec::new();
        for spec in &cfg.listen {
            let (sock, grant) = netio::bind_listen(
                spec,
                BufferRequest {
                    rcv: cfg.rcvbuf,
                    snd: 0,
                },
            )?;
            let _ = netio::enable_rx_drop_counter(&sock);
            inputs.push(sock);
            grants.push(grant);
        }
        let wire = Wire::open(cfg.to, cfg.sndbuf)?;
        let tee = Recorder::new(
            cfg.tee.clone().map(OutputDir::Path).as_ref(),
            cfg.tee_recording.as_ref(),
            cfg.chunk,
            &cfg.writer,
            cfg.write_buffer,
            false,
            cfg.split_threads,
        )
        .map_err(io_err("set up the tee's recording and its writer"))?;
        Ok(BoundRelay {
            cfg,
            inputs,
            grants,
            wire,
            tee,
            observer: None,
            notice: None,
        })
    }

    /// Hand `observer` the counts so far at every live interval.
    pub fn observe(mut self, observer: Observer<RelayStatus>) -> BoundRelay {
        self.observer = Some(observer);
        self
    }

    /// Hand `notice` each sentence the operator must read when it happens (a stream refused for
    /// a missing `--fps`), once each.
    pub fn on_notice(mut self, notice: Observer<String>) -> BoundRelay {
        self.notice = Some(notice);
        self
    }

    /// The input addresses actually bound.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inputs.iter().filter_map(|s| s.local_addr().ok()).collect()
    }

    /// What the kernel granted for each input's receive buffer.
    pub fn grants(&self) -> &[netio::BufferGrant] {
        &self.grants
    }

    /// Relay until stopped (`stop`, duration, idle timeout); `live` gets one line per interval.
    pub fn run(
        self,
        stop: &AtomicBool,
        mut live: impl FnMut(&RelayLiveLine),
    ) -> Result<RelayReport, StreamSessionError> {
        let BoundRelay {
            cfg,
            inputs,
            grants,
            mut wire,
            mut tee,
            mut observer,
            mut notice,
        } = self;
        let base = Baseline::now();
        let started = base.started;
        // Sleeps that end on time: departures are due every few microseconds.
        let _ = netio::pacer::fine_timer_slack();
        // Spin for departures only when every frame must leave at its own time.
        let spin = if cfg.relay.burst <= 1 { SPIN } else { Duration::ZERO };
        let mut rcfg = cfg.relay.clone();
        rcfg.start = started;
        rcfg.session = new_session();
        rcfg.first_seq = first_seq(rcfg.output);
        let mut relay = Relay::new(rcfg);
        let readers = Readers::start(&inputs, &grants, cfg.relay.buffer_bytes)?;
        let mut t = Marks {
            first: None,
            last_in: started,
            next_ctl: started,
            next_live: started + cfg.interval,
        };
        let mut tally = Tally::default();
        let stopped_by = loop {
            if stop.load(Ordering::Relaxed) {
                break "signal";
            }
            let now = Instant::now();
            if let Some(why) = t.end(&cfg, started, now) {
                break why;
            }
            // Wait for input or the next departure (a whole batch, see `--burst`), whichever
            // is first (1 ms at most).
            let due = relay.poll_timeout().unwrap_or(now + Duration::from_millis(1));
            let first = match next_batch(&readers.rx, due.min(now + Duration::from_millis(1)), spin) {
                Ok(b) => b,
                Err(()) => break "input readers ended",
            };
            readers.hand_over(first, &mut relay, &mut t, &mut tally, &mut tee);
            while let Some(n) = relay.poll_notice() {
                if let Some(say) = notice.as_mut() {
                    say(n);
                }
            }
            let now = Instant::now();
            relay.handle_timeout(now, &mut tee);
            send_due(&mut relay, &mut wire, spin)?;
            readers.send_keepalives(&mut relay);
            if now >= t.next_ctl {
                t.next_ctl = now + Duration::from_millis(1);
                wire.read_returns(|d| relay.handle_return(now, d));
            }
            if now >= t.next_live {
                let drops = input_drops(&readers.inputs);
                let line = tally.line(now, t.first, cfg.interval, &relay, drops);
                if let Some(observe) = observer.as_mut() {
                    observe(relay_status(&line, &relay, drops));
                }
                live(&line);
                t.next_live += cfg.interval;
            }
        };
        // The readers stop reading; what they handed over is not taken any more.
        readers.halt.store(true, Ordering::Relaxed);
        let answer_for = cfg.relay.arq_latency.filter(|_| stopped_by != "signal");
        drain(&mut relay, &mut wire, &mut tee, spin, stop, answer_for)?;
        let (readers, reader_error) = readers.finish(&mut relay);
        let end = RelayEnd {
            base,
            marks: t,
            readers,
            grants,
            reader_error,
            stopped_by,
        };
        Ok(end.report(&cfg, &relay, &wire, tee.finish()))
    }
}

/// The counts so far, for an observer.
fn relay_status(line: &RelayLiveLine, relay: &Relay, drops: u64) -> RelayStatus {
    RelayStatus {
        elapsed_s: line.elapsed_s,
        in_rate_bps: line.in_rate_bps,
        datagrams: *relay.counters(),
        senders: relay.senders(),
        other_senders: relay.other_senders(),
        stations: relay.stations(),
        output: relay.output(),
        arq: relay.arq_stats(),
        kernel_drops: drops,
        queued: line.queued,
    }
}

/// After the loop: what is queued still goes out (paced, for a second at most) — stopped or not:
/// those frames were taken from the station and tee'd, and `net2net = off` or a Ctrl-C at a
/// scan's end must not drop them (jive5ab's net2net loses its buffer at a stop) — and with
/// `answer_for` the last frames' NAKs are answered for that long (one latency window), unless
/// stopped.
fn drain(
    relay: &mut Relay,
    wire: &mut Wire,
    tee: &mut Recorder,
    spin: Duration,
    stop: &AtomicBool,
    answer_for: Option<Duration>,
) -> Result<(), StreamSessionError> {
    let until = Instant::now() + Duration::from_secs(1);
    while relay.has_queued() && Instant::now() < until {
        let now = Instant::now();
        relay.handle_timeout(now + stream::relay::LEARN_FOR, tee);
        send_due(relay, wire, spin)?;
        std::thread::sleep(Duration::from_micros(50));
    }
    if let Some(latency) = answer_for {
        let until = Instant::now() + latency;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            wire.read_returns(|d| relay.handle_return(now, d));
            send_due(relay, wire, spin)?;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
}

/// The clock and the host's counters when the run started.
struct Baseline {
    started: Instant,
    cpu0: ProcessCpu,
    udp0: netio::UdpCounters,
}

impl Baseline {
    fn now() -> Baseline {
        Baseline {
            started: Instant::now(),
            cpu0: read_process_cpu().unwrap_or_default(),
            udp0: netio::read_udp_counters().unwrap_or_default(),
        }
    }
}

/// The input reader threads and the channel between them and the relay thread.
struct Readers {
    inputs: Vec<Input>,
    rx: ChanRx<InBatch>,
    halt: Arc<AtomicBool>,
}

impl Readers {
    /// A reader thread per input socket (one that may nap when its buffer holds a nap's worth).
    fn start(
        inputs: &[UdpSocket],
        grants: &[netio::BufferGrant],
        buffer_bytes: usize,
    ) -> Result<Readers, StreamSessionError> {
        let halt = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel::<InBatch>(QUEUE_BATCHES * inputs.len());
        let mut readers = Vec::new();
        for (i, sock) in inputs.iter().enumerate() {
            let s = sock.try_clone().map_err(io_err("clone an input socket"))?;
            let (tx, halt) = (tx.clone(), Arc::clone(&halt));
            let may_nap = grants.get(i).is_some_and(|g| g.granted_rcv >= NAP_MIN_RCVBUF);
            let pool = pool_buffers(buffer_bytes);
            let reader = std::thread::Builder::new()
                .name(format!("relay-in-{i}"))
                .spawn(move || read_input(i as u16, &s, &tx, &halt, may_nap, pool))
                .map_err(io_err("start an input reader thread"))?;
            readers.push(Input {
                sock: sock.try_clone().map_err(io_err("clone an input socket"))?,
                reader: Some(reader),
            });
        }
        Ok(Readers {
            inputs: readers,
            rx,
            halt,
        })
    }

    /// Give the relay `first` and everything else the readers handed over (at most the
    /// channel's capacity): a reader never waits on a full channel while the relay's own queue
    /// has room. Each datagram is handed over as a slice of its batch's buffer.
    fn hand_over(
        &self,
        first: Option<InBatch>,
        relay: &mut Relay,
        t: &mut Marks,
        tally: &mut Tally,
        tee: &mut Recorder,
    ) {
        let batches = first.into_iter().chain(std::iter::from_fn(|| self.rx.try_recv().ok()));
        for b in batches.take(QUEUE_BATCHES * self.inputs.len()) {
            t.first.get_or_insert(b.at);
            t.last_in = b.at;
            for &(from, at, len, truncated) in &b.items {
                // The spans come from the receive call on this very buffer; a span past its
                // end (never) hands over nothing rather than panicking in `slice`.
                let d = if at + len <= b.buf.len() {
                    b.buf.slice(at..at + len)
                } else {
                    Bytes::new()
                };
                tally.bytes += len as u64;
                relay.handle_shared_datagram(b.at, b.input, from, &d, truncated, tee);
            }
        }
    }

    /// The keep-alives due (`--ack`), each from the input its sender sent to.
    fn send_keepalives(&self, relay: &mut Relay) {
        while let Some((input, to)) = relay.poll_ack() {
            if let Some(s) = self.inputs.get(usize::from(input)) {
                // A keep-alive that cannot be sent is only a missed courtesy.
                let _ = s.sock.send_to(KEEPALIVE, to);
            }
        }
    }

    /// Stop the readers (halted already, or now) and end the relay's input; the inputs (for
    /// their counts) and the first reader error.
    fn finish(self, relay: &mut Relay) -> (Vec<Input>, Option<ReaderError>) {
        let Readers {
            mut inputs, rx, halt, ..
        } = self;
        halt.store(true, Ordering::Relaxed);
        // A reader waiting on the full channel ends now.
        drop(rx);
        relay.finish();
        let mut reader_error = None;
        for r in &mut inputs {
            if let Some(Err(e)) = r.reader.take().and_then(|h| h.join().ok()) {
                reader_error.get_or_insert(e);
            }
        }
        (inputs, reader_error)
    }
}

/// What the run ends with, for its report.
struct RelayEnd {
    base: Baseline,
    marks: Marks,
    readers: Vec<Input>,
    grants: Vec<netio::BufferGrant>,
    reader_error: Option<ReaderError>,
    stopped_by: &'static str,
}

impl RelayEnd {
    fn report(
        self,
        cfg: &RelayRunConfig,
        relay: &Relay,
        wire: &Wire,
        out: recording::write::SinkOutcome,
    ) -> RelayReport {
        let RelayEnd {
            base,
            marks: t,
            readers,
            grants,
            reader_error,
            stopped_by,
        } = self;
        let socket_drops = input_drops(&readers);
        let tee_dir = tee_dir(cfg);
        let tees = tee_dir.is_some();
        let wall = base.started.elapsed();
        let cpu1 = read_process_cpu().unwrap_or_default();
        let duration_s = t.first.map_or(0.0, |f| (t.last_in - f).as_secs_f64());
        RelayReport {
            listen: readers
                .iter()
                .map(|r| r.sock.local_addr().map(|a| a.to_string()).unwrap_or_default())
                .collect(),
            to: cfg.to.to_string(),
            input_format: cfg.relay.input,
            output_format: cfg.relay.output,
            duration_s,
            datagrams: *relay.counters(),
            first_problem: relay
                .first_problem()
                .map(str::to_string)
                .or(reader_error.map(|e| e.to_string())),
            untracked_datagrams: relay.untracked_datagrams(),
            senders: relay.senders(),
            other_senders: relay.other_senders(),
            stations: relay.stations(),
            output: relay.output(),
            arq: relay.arq_stats(),
            returned_datagrams: relay.returned_datagrams(),
            rejected_control: relay.rejected_control(),
            tee: tee_dir.map(|dir| TeeReport {
                dir,
                files: out.files,
                recording: out.recording,
                frames_not_written: out.not_written,
                write_error: out.error,
            }),
            socket_drops,
            rcvbuf: grants,
            send_would_block: wire.would_block(),
            udp: netio::read_udp_counters().unwrap_or_default().delta(&base.udp0),
            cpu: cpu1.share_since(&base.cpu0, wall, clock_ticks_per_second()),
            writer_cpu: (tees && matches!(cfg.writer, WriterPlacement::ChildProcess { .. }))
                .then(|| cpu1.children_share_since(&base.cpu0, wall, clock_ticks_per_second())),
            stopped_by: stopped_by.to_string(),
        }
    }
}

/// Where the tee records: its directory, or its disks.
fn tee_dir(cfg: &RelayRunConfig) -> Option<String> {
    match (&cfg.tee, &cfg.tee_recording) {
        (Some(d), _) => Some(d.display().to_string()),
        (None, Some(r)) => Some(r.disks_joined(",")),
        (None, None) => None,
    }
}

/// How close to a departure the loop stops sleeping and spins (a sleep on a busy host ends tens
/// of microseconds late, and a late departure at every frame would add up to a backlog).
const SPIN: Duration = Duration::from_micros(100);

/// The next input batch, waiting until `until` at most (sleeping, then spinning for the last
/// `spin`); `Err` when every reader has ended.
fn next_batch(rx: &ChanRx<InBatch>, until: Instant, spin: Duration) -> Result<Option<InBatch>, ()> {
    let now = Instant::now();
    if until > now + spin {
        match rx.recv_timeout(until - now - spin) {
            Ok(b) => return Ok(Some(b)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(()),
        }
    }
    loop {
        match rx.try_recv() {
            Ok(b) => return Ok(Some(b)),
            Err(mpsc::TryRecvError::Disconnected) => return Err(()),
            Err(mpsc::TryRecvError::Empty) if Instant::now() >= until => return Ok(None),
            Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
}

/// Send everything due now (the clock read again after each send, so a backlog drains in one
/// pass at the catch-up spacing rather than one frame per loop), for [`SEND_SLICE`] at most;
/// frames due within `spin` are waited for here, spinning.
fn send_due(relay: &mut Relay, wire: &mut Wire, spin: Duration) -> Result<(), StreamSessionError> {
    let began = Instant::now();
    for _ in 0..4096 {
        let now = Instant::now();
        if now - began > SEND_SLICE {
            break;
        }
        let Some(tx) = relay.poll_transmit(now).map_err(StreamSessionError::Schedule)? else {
            break;
        };
        wire.send(&tx)?;
        // Stamped with the time it was framed for: the relay's pacing counts from when a batch
        // was due, not from when the send call returned.
        relay.on_transmitted(now);
        // The next frame is due within the spin window: wait for it here.
        if let Some(next) = relay.poll_timeout() {
            if next > Instant::now() + spin {
                break;
            }
            while Instant::now() < next {
                std::hint::spin_loop();
            }
        }
    }
    Ok(())
}

/// Kernel drops at every input socket since it was made.
fn input_drops(inputs: &[Input]) -> u64 {
    inputs.iter().map(|i| socket_drops(&i.sock).unwrap_or(0)).sum()
}

/// Why an input's reader thread stopped: its socket failed.
#[derive(Debug, thiserror::Error)]
#[error("input {input}: receive: {source}")]
pub struct ReaderError {
    /// The input's index (the order of `--listen`).
    pub input: u16,
    /// The socket's error.
    pub source: std::io::Error,
}

/// Receive buffers a reader may have lent out at once: enough for the relay's whole queue
/// (`buffer_bytes` of frames; a frame pins a whole buffer of [`BATCH`] slots until it leaves,
/// and frames are at least [`MIN_FRAME_FOR_POOL`] bytes in the streams this sizes for) and the
/// channel. Past that the reader waits and the kernel's drops at the socket show it.
fn pool_buffers(buffer_bytes: usize) -> usize {
    (buffer_bytes / (BATCH * MIN_FRAME_FOR_POOL)).clamp(2 * QUEUE_BATCHES, 4096)
}

/// Frame length the pool is sized for (see [`pool_buffers`]): smaller frames fill the relay's
/// queue with fewer buffers than it allows bytes.
const MIN_FRAME_FOR_POOL: usize = 4096;

/// The reader thread of input `input`: recvmmsg batches straight into buffers of its pool (at
/// most `pool` of them lent at once), each handed to the relay thread whole and shared; buffers
/// come back when the relay has sent (or dropped) their frames. Ends when halted or when the
/// relay thread is gone.
fn read_input(
    input: u16,
    sock: &UdpSocket,
    tx: &SyncSender<InBatch>,
    halt: &AtomicBool,
    may_nap: bool,
    pool: usize,
) -> Result<(), ReaderError> {
    let mut batch = netio::batch::RecvBatch::new(BATCH, MAX_DATAGRAM);
    let (home, returned) = mpsc::channel::<Vec<u8>>();
    // The batch's own buffer is the first of the pool.
    let mut lent = 1usize;
    let mut nap = false;
    while !halt.load(Ordering::Relaxed) {
        let mut got = Ok(0);
        if nap {
            std::thread::sleep(NAP);
            got = batch.recv_batch(sock, Some(Duration::ZERO));
        }
        if matches!(got, Ok(0)) {
            got = batch.recv_batch(sock, Some(Duration::from_millis(5)));
        }
        nap = false;
        match got {
            Ok(0) => continue,
            Ok(n) => nap = may_nap && n < BATCH / 2,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(source) => return Err(ReaderError { input, source }),
        }
        let at = Instant::now();
        let items = (0..batch.len())
            .filter_map(|i| {
                let d = batch.get(i)?;
                let (offset, len) = batch.span(i)?;
                Some((d.from, offset, len, d.truncated))
            })
            .collect();
        let Some(fresh) = next_buffer(&returned, &mut lent, pool, batch.buffer_len(), halt) else {
            break;
        };
        let filled = batch.swap_buffer(fresh);
        let out = InBatch {
            input,
            at,
            buf: Bytes::from_owner(Pooled {
                buf: filled,
                home: home.clone(),
            }),
            items,
        };
        if tx.send(out).is_err() {
            break;
        }
    }
    Ok(())
}

/// A buffer to receive into next: one the relay gave back, a new one while fewer than `pool`
/// are lent, else the first to come back (waiting, in 5 ms steps, until halted: `None`).
fn next_buffer(
    returned: &ChanRx<Vec<u8>>,
    lent: &mut usize,
    pool: usize,
    len: usize,
    halt: &AtomicBool,
) -> Option<Vec<u8>> {
    if let Ok(b) = returned.try_recv() {
        return Some(b);
    }
    if *lent < pool {
        *lent += 1;
        // Zeroed by the allocator (pages mapped on first touch), not written here.
        return Some(vec![0; len]);
    }
    while !halt.load(Ordering::Relaxed) {
        if let Ok(b) = returned.recv_timeout(Duration::from_millis(5)) {
            return Some(b);
        }
    }
    None
}

/// The relay loop's clock marks.
struct Marks {
    first: Option<Instant>,
    last_in: Instant,
    next_ctl: Instant,
    next_live: Instant,
}

impl Marks {
    /// Why the run ends now, if it does: its duration is up, or nothing came for the idle
    /// timeout — counted from the start until the first datagram (`last_in` starts there), so
    /// a relay that never hears its backend stops too (issue 29: it waited forever).
    fn end(&self, cfg: &RelayRunConfig, started: Instant, now: Instant) -> Option<&'static str> {
        if cfg.duration.is_some_and(|d| now - started >= d) {
            return Some("duration");
        }
        let idle = now.saturating_duration_since(self.last_in);
        cfg.idle_timeout.is_some_and(|d| idle >= d).then_some("idle timeout")
    }
}

/// Totals at the last live line.
#[derive(Default)]
struct Tally {
    bytes: u64,
    totals: stream::relay::RelayTotals,
    rejected: u64,
    drops: u64,
}

impl Tally {
    fn line(
        &mut self,
        now: Instant,
        first: Option<Instant>,
        interval: Duration,
        relay: &Relay,
        drops: u64,
    ) -> RelayLiveLine {
        let t = relay.totals();
        let rejected = relay.counters().rejected();
        let line = RelayLiveLine {
            elapsed_s: first.map_or(0.0, |f| now.saturating_duration_since(f).as_secs_f64()),
            in_rate_bps: self.bytes as f64 * 8.0 / interval.as_secs_f64(),
            frames_in: t.frames_in - self.totals.frames_in,
            frames_out: t.frames_out - self.totals.frames_out,
            lost_in_input: t.lost_in_input.saturating_sub(self.totals.lost_in_input),
            overflow_dropped: t.overflow_dropped - self.totals.overflow_dropped,
            rejected: rejected - self.rejected,
            kernel_drops: drops.saturating_sub(self.drops),
            queued: t.queued,
            senders: relay.sender_count(),
        };
        *self = Tally {
            bytes: 0,
            totals: t,
            rejected,
            drops,
        };
        line
    }
}

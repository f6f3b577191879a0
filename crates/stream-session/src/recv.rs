//! The receiver loop: socket → [`stream::Receiver`] → [`Recorder`] (VDIF files, or a vbs/Mark6
//! scan over many disks), NAKs back, live lines out.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use netio::counters::{clock_ticks_per_second, read_process_cpu, socket_drops, ProcessCpu, UdpCounters};
use netio::BufferRequest;
use stream::{Receiver, ReceiverConfig};

use crate::live::{LiveConfig, LiveSink};
use crate::report::RecvReport;
use crate::{ConfigError, Observer, StreamSessionError};
use netio::io_err;
use recording::write::{OutputDir, Recorder, RecordingConfig, SinkOutcome, WriterPlacement};
use stream::results::{LiveOutputStatus, RecvStatus};
use stream::FrameSink;

/// How to run a receiver.
#[derive(Debug, Clone)]
pub struct RecvConfig {
    /// Addresses (or multicast groups) to listen on; several are read by one thread in turn.
    pub listen: Vec<netio::ListenSpec>,
    /// Output directory; `None` discards frames after accounting (memory sink).
    pub out_dir: Option<OutputDir>,
    /// Every frame into this one file of `out_dir`, opened so (`net2file`), not a file per
    /// station.
    pub out_file: Option<(String, recording::write::FileMode)>,
    /// A vbs or Mark6 recording over many disks instead of files in `out_dir`.
    pub recording: Option<RecordingConfig>,
    /// Start a new file after this many bytes.
    pub chunk: Option<u64>,
    /// Receive socket buffer to ask for.
    pub rcvbuf: usize,
    /// The sans-IO receiver's settings.
    pub receiver: ReceiverConfig,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when no datagram came for this long (counted from the start until the first).
    pub idle_timeout: Option<Duration>,
    /// Live line cadence.
    pub interval: Duration,
    /// Where the file writes run (a child process keeps files whole-framed across a SIGKILL).
    pub writer: WriterPlacement,
    /// Memory between the receiver and the file writer, bytes ([`recording::write::DEFAULT_WRITE_BUFFER`]).
    pub write_buffer: u64,
    /// Write the files with direct I/O (O_DIRECT, past the page cache; writer process only).
    pub direct_io: bool,
    /// One file per VDIF thread of each station, not one per station.
    pub split_threads: bool,
    /// Set up the output (its writer processes) before the socket is bound, not after: for a
    /// recording started into a stream already flowing (`evlbi serve`'s `record = on`), which
    /// then begins when it can be written. Bound first (`stream recv`), the frames of a sender
    /// started at once queue in the socket meanwhile — or, into a flowing stream, overflow it:
    /// four disks' writer processes took long enough on a host with both cores busy to drop
    /// 54–980 frames at the start of a scan, which the recording then showed as lost.
    pub output_before_bind: bool,
    /// Live outputs to a correlator's reader instead of a recording (`out_dir`, `recording` and
    /// `out_file` are then unset).
    pub live: Option<LiveConfig>,
}

/// One live line: counts over the last interval and totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveLine {
    /// Seconds since the first datagram.
    pub elapsed_s: f64,
    /// Datagram bytes per second over the interval, bits.
    pub rate_bps: f64,
    /// Frames written in the interval.
    pub frames: u64,
    /// Filled (invalid) frames written in the interval.
    pub filled: u64,
    /// Datagrams rejected in the interval.
    pub rejected: u64,
    /// Datagrams the kernel dropped at our socket (its buffer full) in the interval.
    pub kernel_drops: u64,
    /// Frames that arrived after a later frame of their thread, in the interval (placed all the
    /// same).
    pub reordered: u64,
    /// Frames that came after their time was written, in the interval (dropped).
    pub late: u64,
    /// Second copies, in the interval (dropped).
    pub duplicates: u64,
    /// Second copies whose bytes differed from the kept first copy, in the interval (dropped).
    pub duplicate_mismatch: u64,
    /// Times another source took a station over (a sender restarted), in the interval.
    pub sender_changes: u64,
    /// Stations seen.
    pub stations: usize,
    /// Time the receiver waited for the file writer in the interval (its buffer was full).
    pub writer_stall: Duration,
    /// Disks that have left a multi-disk recording (a write error), in all.
    pub disks_dropped: u32,
}

/// Bound socket, before receiving: lets a caller print the port (e.g. `--listen 127.0.0.1:0`).
pub struct BoundReceiver {
    cfg: RecvConfig,
    socks: Vec<std::net::UdpSocket>,
    grants: Vec<netio::BufferGrant>,
    sink: Sink,
    /// Each datagram carries the socket's drop count (SO_RXQ_OVFL).
    drop_count: bool,
    observer: Option<Observer<RecvStatus>>,
    notice: Option<Observer<String>>,
}

impl BoundReceiver {
    /// Bind the socket, then set up the output (directory, writer processes) — in that order
    /// unless [`RecvConfig::output_before_bind`]: a sender started at once would meanwhile hit a
    /// closed port (every datagram lost, silently). Bound first, the kernel queues them in the
    /// receive buffer (sized before the bind) and counts any overflow as this socket's drops.
    /// Return only when ready to receive, so the caller's "listening" line means ready.
    pub fn bind(cfg: RecvConfig) -> Result<BoundReceiver, StreamSessionError> {
        if cfg.listen.is_empty() || cfg.listen.len() > 64 {
            return Err(ConfigError::ListenCount.into());
        }
        let early = if cfg.output_before_bind {
            let sink = Self::output(&cfg)?;
            // Nothing queues yet: the receive path will never fault its buffers in — unless
            // allocating takes longer than the idle timeout (2 s without one), which the
            // receiver never waits for its own set-up.
            let limit = cfg.idle_timeout.unwrap_or(Duration::from_secs(2));
            sink.wait_populated(Instant::now() + limit);
            Some(sink)
        } else {
            None
        };
        let (mut socks, mut grants) = (Vec::new(), Vec::new());
        let mut drop_count = true;
        for spec in &cfg.listen {
            let (sock, grant) = netio::bind_listen(
                spec,
                BufferRequest {
                    rcv: cfg.rcvbuf,
                    snd: 0,
                },
            )?;
            // Before any datagram is queued: the count rides on datagrams queued after a drop.
            // Without it (old kernels) /proc/net/udp still gives the count.
            drop_count &= netio::enable_rx_drop_counter(&sock).is_ok();
            // Several sockets are read in turn: none may block the others.
            if cfg.listen.len() > 1 {
                sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
            }
            socks.push(sock);
            grants.push(grant);
        }
        let sink = match early {
            Some(sink) => sink,
            None => Self::output(&cfg)?,
        };
        Ok(BoundReceiver {
            cfg,
            socks,
            grants,
            sink,
            drop_count,
            observer: None,
            notice: None,
        })
    }

    /// The output `cfg` asks for, its writers started.
    fn output(cfg: &RecvConfig) -> Result<Sink, StreamSessionError> {
        if let Some(live) = &cfg.live {
            return Ok(Sink::Live(live.start()?));
        }
        let sink = Recorder::new(
            cfg.out_dir.as_ref(),
            cfg.recording.as_ref(),
            cfg.chunk,
            &cfg.writer,
            cfg.write_buffer,
            cfg.direct_io,
            cfg.split_threads,
        )
        .map_err(io_err("set up the output directory (or disks) and its writers"))?;
        Ok(Sink::Rec(match (sink, &cfg.out_file) {
            (Recorder::Files(f), Some((name, mode))) => Recorder::Files(f.into_one_file(name, *mode)),
            (s, _) => s,
        }))
    }

    /// Hand `observer` the counts so far at every live interval.
    pub fn observe(mut self, observer: Observer<RecvStatus>) -> BoundReceiver {
        self.observer = Some(observer);
        self
    }

    /// Hand `notice` each sentence the operator must read when it happens (a stream refused for
    /// a missing `--fps`), once each.
    pub fn on_notice(mut self, notice: Observer<String>) -> BoundReceiver {
        self.notice = Some(notice);
        self
    }

    /// The addresses actually bound, in `--listen` order.
    pub fn local_addrs(&self) -> Result<Vec<SocketAddr>, StreamSessionError> {
        let addrs: Result<Vec<_>, _> = self.socks.iter().map(|s| s.local_addr()).collect();
        Ok(addrs.map_err(io_err("read local address"))?)
    }

    /// What the kernel granted for each receive buffer (with warnings when capped).
    pub fn grants(&self) -> &[netio::BufferGrant] {
        &self.grants
    }

    /// Receive until stopped (`stop`, duration, idle timeout); `live` gets one line per interval.
    pub fn run(self, stop: &AtomicBool, mut live: impl FnMut(&LiveLine)) -> Result<RecvReport, StreamSessionError> {
        let BoundReceiver {
            cfg,
            socks,
            grants,
            mut sink,
            drop_count,
            mut observer,
            mut notice,
        } = self;
        let mut rx = Receiver::new(cfg.receiver.clone());
        let udp0 = netio::read_udp_counters().unwrap_or_default();
        let cpu0 = read_process_cpu().unwrap_or_default();
        let started = Instant::now();
        let mut batch = netio::batch::RecvBatch::new(BATCH, 65_536);
        // UDP GRO: a sender using GSO (--burst) is received as one buffer per burst, split here.
        for sock in &socks {
            let _ = batch.enable_gro(sock);
        }
        let mut t = Timers {
            first: None,
            last_rx: started,
            ready_since: started,
            next_nak: started,
            next_live: started + cfg.interval,
            next_expire: started,
            nap: false,
            // One socket only: with several, a nap for one would hold the others up.
            may_nap: socks.len() == 1 && grants.iter().all(|g| g.granted_rcv >= NAP_MIN_RCVBUF),
            calls: 0,
        };
        let mut naks = NakOut::default();
        let mut tally = LiveTally::default();
        let stopped_by = loop {
            if stop.load(Ordering::Relaxed) {
                break "signal";
            }
            let now = Instant::now();
            if cfg.duration.is_some_and(|d| now - started >= d) {
                break "duration";
            }
            let received = receive_any(&socks, &mut batch, &mut rx, &mut sink, &mut t, &mut tally)?;
            if let Sink::Live(live) = &mut sink {
                // A station gone quiet goes on as filled frames at its rate; what the batch
                // gave goes to the readers now.
                rx.fill_silence(Instant::now(), live);
                live.flush();
            }
            if let (Some(n), Some(say)) = (rx.poll_notice(), notice.as_mut()) {
                say(n);
            }
            let idle = cfg
                .idle_timeout
                .is_some_and(|limit| now.saturating_duration_since(t.ready_since) >= limit);
            // Counted from the start until something arrives (`ready_since` starts there): a
            // receiver that never hears a sender stops too (issue 29: it waited forever). Never
            // while datagrams are queued for it (a loop held off its core sees them late, not
            // never).
            if !received && idle && !queued(&socks) {
                break "idle timeout";
            }
            let now = Instant::now();
            if cfg.receiver.arq && now >= t.next_nak {
                naks.send(&socks, &tally.routes, &mut rx, now);
                t.next_nak = now + Duration::from_millis(1);
            }
            if now >= t.next_expire {
                // Sources that never formed a run are forgotten (and counted) on time.
                rx.expire(now);
                t.next_expire = now + Duration::from_millis(100);
            }
            if now >= t.next_live {
                let dropped = drops(&socks, &batch);
                let line = tally.line(now, t.first, cfg.interval, &rx, &mut sink, dropped);
                if let Some(observe) = observer.as_mut() {
                    observe(status(&line, &rx, &sink, dropped, naks.sent));
                }
                live(&line);
                t.next_live += cfg.interval;
            }
        };
        // Drops after the last datagram: the socket's count as the loop ends (a sender still
        // sending after a duration or signal stop adds none later) less the one the last datagram
        // carried. Only with the per-datagram count (without it every drop would look late) and
        // one socket (the count a datagram carries is its own socket's).
        let dropped_after_last = match (drop_count, socks.as_slice()) {
            (true, [sock]) => socket_drops(sock).map_or(0, |d| d.saturating_sub(batch.drops_seen())),
            _ => 0,
        };
        rx.finish(&mut sink);
        rx.lost_at_end(dropped_after_last);
        let end = RunEnd {
            dropped_after_last,
            started,
            first: t.first,
            last_rx: t.last_rx,
            udp0,
            cpu0,
            naks_sent: naks.sent,
            receive_calls: t.calls,
            stopped_by: stopped_by.to_string(),
            data_age: std::mem::take(&mut tally.data_age),
            queue_peak: tally.queue_peak,
        };
        Ok(end.report(&cfg, (&socks, grants, &batch), &rx, sink))
    }
}

/// The counts so far, for an observer.
fn status(line: &LiveLine, rx: &Receiver, sink: &Sink, dropped: u64, naks_sent: u64) -> RecvStatus {
    let (stall, stalls) = sink.stalled();
    RecvStatus {
        elapsed_s: line.elapsed_s,
        rate_bps: line.rate_bps,
        datagrams: *rx.counters(),
        stations: rx.summaries(),
        frames_written: sink.frames(),
        frames_filled: sink.filled(),
        kernel_drops: dropped,
        writer_stall_s: stall.as_secs_f64(),
        writer_stalls: stalls,
        naks_sent,
        disks_dropped: line.disks_dropped.into(),
        live: sink.live_status(),
    }
}

/// Whether any of the sockets has datagrams queued.
fn queued(socks: &[std::net::UdpSocket]) -> bool {
    socks
        .iter()
        .any(|s| netio::counters::socket_queued_bytes(s).is_some_and(|b| b > 0))
}

/// Our socket's drops alone (host-wide RcvbufErrors count every process's): /proc/net/udp is
/// exact at any moment, the SO_RXQ_OVFL cmsg covers hosts without it.
fn drops(socks: &[std::net::UdpSocket], batch: &netio::batch::RecvBatch) -> u64 {
    let at_sockets: u64 = socks.iter().map(|s| socket_drops(s).unwrap_or(0)).sum();
    at_sockets.max(batch.drops_seen())
}

/// The receive loop's clock marks.
struct Timers {
    /// Arrival of the first batch.
    first: Option<Instant>,
    /// Arrival of the last batch (for the duration).
    last_rx: Instant,
    /// When the loop was last ready to receive again after handling a batch: idleness is "no
    /// datagram for T while we were listening", never the time a full writer queue held the
    /// loop up (the socket buffer fills meanwhile).
    ready_since: Instant,
    next_nak: Instant,
    next_live: Instant,
    next_expire: Instant,
    /// The last batch was small: pause before the next call ([`NAP`]).
    nap: bool,
    /// The receive buffer granted holds a nap's worth with room to spare.
    may_nap: bool,
    /// Receive calls that returned datagrams.
    calls: u64,
}

/// Datagrams asked for per recvmmsg.
const BATCH: usize = 128;
/// Pause after a batch that came back less than half full, so the next call finds a batch's
/// worth queued: a stream of one frame per datagram otherwise wakes the loop for each datagram
/// (two system calls and a context switch per frame, most of the receiver's CPU at 4 Gb/s).
/// 64000 frames/s queue 64 in this time; the socket buffer holds it many times over. 1 ms
/// rather than 0.5: each nap is a sleep and a wake (on this 2-vCPU VM, 19 % of the receiver's
/// CPU went to switching at 2000 naps/s, bench/RESULTS.md issue 30).
const NAP: Duration = Duration::from_millis(1);
/// Nap only with at least this much receive buffer granted (a nap at 8 Gb/s queues 1 MB).
const NAP_MIN_RCVBUF: usize = 4 << 20;

/// recvmmsg: up to [`BATCH`] datagrams per system call, each handed to the receiver. Whether any
/// came within 1 ms.
fn receive_batch(
    sock: &std::net::UdpSocket,
    wait: Duration,
    batch: &mut netio::batch::RecvBatch,
    rx: &mut Receiver,
    sink: &mut Sink,
    t: &mut Timers,
    tally: &mut LiveTally,
) -> Result<bool, StreamSessionError> {
    let mut got = Ok(0);
    if t.nap {
        std::thread::sleep(NAP);
        got = batch.recv_batch(sock, Some(Duration::ZERO));
    }
    if matches!(got, Ok(0)) {
        got = batch.recv_batch(sock, Some(wait));
    }
    t.nap = false;
    match got {
        Ok(0) => Ok(false),
        Ok(n) => {
            t.nap = t.may_nap && n < BATCH / 2;
            t.calls += 1;
            let now = Instant::now();
            t.first.get_or_insert(now);
            t.last_rx = now;
            // The data's age, sampled once per batch (one clock read, one header parse).
            if let Some(t) = batch.iter().next().and_then(|d| rx.data_time_unix_ns(d.data)) {
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |w| w.as_nanos() as u64);
                // Older than its own time (another host's clock ahead of ours) is recorded as 1 ns.
                tally.data_age.record(wall.saturating_sub(t).max(1));
            }
            let stalls = sink.stalled().1;
            for d in batch.iter() {
                tally.bytes += d.data.len() as u64;
                rx.handle_datagram(now, d.from, d.data, d.truncated, sink);
            }
            // A full batch (the loop is behind) or a wait for the writer: how much the socket
            // holds now is how deep the stall reached into its buffer.
            if n == BATCH || sink.stalled().1 != stalls {
                if let Some(q) = netio::counters::socket_queued_bytes(sock) {
                    tally.queue_peak = Some(tally.queue_peak.unwrap_or(0).max(q));
                }
            }
            t.ready_since = Instant::now();
            Ok(true)
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(io_err("receive")(e).into()),
    }
}

/// One batch from whichever socket has datagrams: the one socket waits up to 1 ms itself;
/// several are waited for together (ppoll), then read in turn. Each datagram's source is noted
/// with the socket it came to, so the NAKs for it leave from that port (a sender's connected
/// socket takes datagrams from the port it sends to only).
fn receive_any(
    socks: &[std::net::UdpSocket],
    batch: &mut netio::batch::RecvBatch,
    rx: &mut Receiver,
    sink: &mut Sink,
    t: &mut Timers,
    tally: &mut LiveTally,
) -> Result<bool, StreamSessionError> {
    if let [one] = socks {
        return receive_batch(one, Duration::from_millis(1), batch, rx, sink, t, tally);
    }
    let all: Vec<&std::net::UdpSocket> = socks.iter().collect();
    let ready = netio::wait_any_readable(&all, Duration::from_millis(1)).map_err(io_err("wait for datagrams"))?;
    let mut any = false;
    for (i, sock) in socks.iter().enumerate().filter(|(i, _)| ready & (1 << i) != 0) {
        if receive_batch(sock, Duration::ZERO, batch, rx, sink, t, tally)? {
            any = true;
            if let Some(d) = batch.iter().next() {
                tally.route(d.from, i);
            }
        }
    }
    Ok(any)
}

/// NAKs on their way back to the senders.
#[derive(Default)]
struct NakOut {
    buf: Vec<u8>,
    sent: u64,
}

impl NakOut {
    /// Send the NAKs the receiver has at `now` (a failed send is a lost NAK, asked again later).
    fn send(&mut self, socks: &[std::net::UdpSocket], routes: &[(SocketAddr, usize)], rx: &mut Receiver, now: Instant) {
        for (to, nak) in rx.poll_naks(now) {
            nak.encode(&mut self.buf);
            let i = routes.iter().find(|(a, _)| *a == to).map_or(0, |r| r.1);
            let Some(sock) = socks.get(i) else {
                continue;
            };
            if sock.send_to(&self.buf, to).is_ok() {
                self.sent += 1;
            }
        }
    }
}

/// Totals at the last live line, so the next shows the interval's differences.
#[derive(Default)]
struct LiveTally {
    /// Datagram bytes since the last line.
    bytes: u64,
    frames: u64,
    filled: u64,
    rejected: u64,
    /// Counted from the socket's creation: drops while the output was set up are this stream's
    /// too.
    drops: u64,
    changes: u64,
    win: stream::WindowStats,
    stall: Duration,
    /// Arrival time less VDIF time of the first datagram of each batch, ns (the whole run).
    data_age: histogram::Hist,
    /// Which socket each sender's datagrams came to (several `--listen`), for its NAKs.
    routes: Vec<(SocketAddr, usize)>,
    /// The most bytes seen queued in a receive socket (the whole run).
    queue_peak: Option<u64>,
}

impl LiveTally {
    /// Note that `from` sends to socket `i` (bounded: the oldest of 1024 senders is forgotten).
    fn route(&mut self, from: SocketAddr, i: usize) {
        match self.routes.iter_mut().find(|(a, _)| *a == from) {
            Some(r) => r.1 = i,
            None => {
                if self.routes.len() >= 1024 {
                    self.routes.remove(0);
                }
                self.routes.push((from, i));
            }
        }
    }

    /// The line for the interval ending `now`; the totals become the next line's base.
    fn line(
        &mut self,
        now: Instant,
        first: Option<Instant>,
        interval: Duration,
        rx: &Receiver,
        sink: &mut Sink,
        dropped: u64,
    ) -> LiveLine {
        let changes = rx.sender_changes();
        let rejected = rx.counters().rejected();
        let win = rx.window_totals();
        let (stall, _) = sink.stalled();
        let line = LiveLine {
            elapsed_s: first.map_or(0.0, |f| (now - f).as_secs_f64()),
            rate_bps: self.bytes as f64 * 8.0 / interval.as_secs_f64(),
            frames: sink.frames() - self.frames,
            filled: sink.filled() - self.filled,
            rejected: rejected - self.rejected,
            kernel_drops: dropped.saturating_sub(self.drops),
            stations: rx.station_count(),
            reordered: win.reordered - self.win.reordered,
            late: win.late - self.win.late,
            duplicates: win.duplicates - self.win.duplicates,
            duplicate_mismatch: win.duplicate_mismatch - self.win.duplicate_mismatch,
            sender_changes: changes - self.changes,
            writer_stall: stall.saturating_sub(self.stall),
            disks_dropped: sink.disks_dropped(),
        };
        *self = LiveTally {
            bytes: 0,
            frames: sink.frames(),
            filled: sink.filled(),
            rejected,
            drops: dropped,
            changes,
            win,
            stall,
            data_age: std::mem::take(&mut self.data_age),
            routes: std::mem::take(&mut self.routes),
            queue_peak: self.queue_peak,
        };
        line
    }
}

/// What the loop leaves for the report.
struct RunEnd {
    started: Instant,
    first: Option<Instant>,
    last_rx: Instant,
    udp0: UdpCounters,
    cpu0: ProcessCpu,
    naks_sent: u64,
    stopped_by: String,
    data_age: histogram::Hist,
    dropped_after_last: u64,
    receive_calls: u64,
    queue_peak: Option<u64>,
}

impl RunEnd {
    /// Close the output (waiting for the writer) and build the report.
    fn report(
        self,
        cfg: &RecvConfig,
        (socks, grants, batch): (
            &[std::net::UdpSocket],
            Vec<netio::BufferGrant>,
            &netio::batch::RecvBatch,
        ),
        rx: &Receiver,
        mut sink: Sink,
    ) -> RecvReport {
        let (writer_stall, writer_stalls) = sink.stalled();
        let write_buffer_peak = sink.backlog_peak();
        let (out, live) = sink.finish(cfg.live.as_ref().map_or(Duration::ZERO, |l| l.drain));
        let out_direct = out.recording.as_ref().is_some_and(|r| r.direct_io);
        let wall = self.started.elapsed().as_secs_f64();
        // After finish(): the writer process has been waited for, so its CPU is in ours.
        let cpu1 = read_process_cpu().unwrap_or_default();
        let duration_s = self.first.map_or(0.0, |f| (self.last_rx - f).as_secs_f64());
        let c = *rx.counters();
        let cpu0 = self.cpu0;
        let socket_drops = drops(socks, batch);
        let out_dir = output_name(cfg);
        let records = out_dir.is_some();
        RecvReport {
            listen: socks
                .iter()
                .map(|s| s.local_addr().map(|a| a.to_string()).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", "),
            format: cfg.receiver.format,
            out_dir,
            duration_s,
            datagrams: c,
            first_problem: rx.first_problem().map(str::to_string),
            stations: rx.summaries(),
            files: out.files,
            recording: out.recording,
            frames_not_written: out.not_written,
            write_error: out.error,
            received_rate_bps: if duration_s > 0.0 {
                c.bytes as f64 * 8.0 / duration_s
            } else {
                0.0
            },
            rcvbuf: grants.into_iter().next().unwrap_or_default(),
            udp: netio::read_udp_counters().unwrap_or_default().delta(&self.udp0),
            socket_drops,
            dropped_after_last: self.dropped_after_last,
            gro_most_coalesced: u32::try_from(batch.most_coalesced()).unwrap_or(u32::MAX),
            receive_calls: self.receive_calls,
            cpu: cpu1.share_since(&cpu0, Duration::from_secs_f64(wall), clock_ticks_per_second()),
            writer_cpu: (matches!(cfg.writer, WriterPlacement::ChildProcess { .. }) && records)
                .then(|| cpu1.children_share_since(&cpu0, Duration::from_secs_f64(wall), clock_ticks_per_second())),
            naks_sent: self.naks_sent,
            writer_stall_s: writer_stall.as_secs_f64(),
            writer_stalls,
            write_buffer: records.then_some(cfg.write_buffer),
            write_buffer_peak: write_buffer_peak.filter(|_| records),
            socket_queue_peak: self.queue_peak,
            direct_io: match &cfg.recording {
                Some(_) => out_direct,
                None => cfg.out_dir.is_some() && cfg.direct_io,
            },
            stopped_by: self.stopped_by,
            data_age_ns: (self.data_age.count() > 0).then(|| self.data_age.summary(histogram::DEFAULT_MAX_BUCKETS)),
            live,
        }
    }
}

/// Where the receiver's frames go: a recording (VDIF files, a vbs/Mark6 scan, or the memory
/// sink) or live outputs to correlators' readers.
#[allow(clippy::large_enum_variant)] // one per receiver, never moved on the data path
pub(crate) enum Sink {
    /// A recording.
    Rec(Recorder),
    /// Live outputs.
    Live(LiveSink),
}

impl FrameSink for Sink {
    fn frame(&mut self, station: u16, frame: &[u8], filled: bool) {
        match self {
            Sink::Rec(r) => r.frame(station, frame, filled),
            Sink::Live(l) => l.frame(station, frame, filled),
        }
    }

    fn discontinuity(&mut self, station: u16) {
        match self {
            Sink::Rec(r) => r.discontinuity(station),
            Sink::Live(l) => l.discontinuity(station),
        }
    }
}

impl Sink {
    fn frames(&self) -> u64 {
        match self {
            Sink::Rec(r) => r.frames(),
            Sink::Live(l) => l.counts().0,
        }
    }

    fn filled(&self) -> u64 {
        match self {
            Sink::Rec(r) => r.filled(),
            Sink::Live(l) => l.counts().1,
        }
    }

    /// Time waited for the writers (a live output never waits).
    fn stalled(&self) -> (Duration, u64) {
        match self {
            Sink::Rec(r) => r.stalled(),
            Sink::Live(_) => (Duration::ZERO, 0),
        }
    }

    /// How deep into the write buffer a stall reached (`None` for live outputs: they never wait).
    fn backlog_peak(&self) -> Option<u64> {
        match self {
            Sink::Rec(r) => r.backlog_peak(),
            Sink::Live(_) => None,
        }
    }

    fn disks_dropped(&mut self) -> u32 {
        match self {
            Sink::Rec(r) => r.disks_dropped(),
            Sink::Live(_) => 0,
        }
    }

    /// Wait for the recording's writer memory until `deadline`; whether it is there (a live
    /// output has nothing to wait for).
    fn wait_populated(&self, deadline: Instant) -> bool {
        match self {
            Sink::Rec(r) => r.wait_populated(deadline),
            Sink::Live(_) => true,
        }
    }

    fn live_status(&self) -> Vec<LiveOutputStatus> {
        match self {
            Sink::Rec(_) => Vec::new(),
            Sink::Live(l) => l.status(),
        }
    }

    /// Close the recording (waiting for its writers) or stop the live outputs (a reader still
    /// reading gets what is queued within `drain`).
    fn finish(&mut self, drain: Duration) -> (SinkOutcome, Vec<LiveOutputStatus>) {
        match self {
            Sink::Rec(r) => (r.finish(), Vec::new()),
            Sink::Live(l) => (SinkOutcome::default(), l.finish(drain)),
        }
    }
}

/// Where the receiver records: its directory, or its disks; `None` for the memory sink.
fn output_name(cfg: &RecvConfig) -> Option<String> {
    match (&cfg.recording, &cfg.out_dir) {
        (Some(r), _) => Some(r.disks_joined(",")),
        (None, Some(d)) => Some(d.path().display().to_string()),
        (None, None) => None,
    }
}

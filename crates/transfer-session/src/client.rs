//! The sending side (`evlbi send`): plan the files, authenticate, offer them ahead of the data,
//! stream every accepted block through one open transfer, send each block's hash as it is sent,
//! and collect the receiver's verdicts.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ctlchan::{Channel, ChannelError, Role};
use netio::{clock_ticks_per_second, connect_udp, io_err, read_process_cpu, BufferRequest};
use transfer::results::StartReport;
use transfer::results::{DataReport, SendReport, REPORT_SCHEMA_VERSION};
use transfer::{Adaptive, AdaptiveConfig, CongestionController, FixedRate, ResumeHint, SenderConfig, SessionParams};

use crate::control::{
    data_key, first_segment_bytes, pre_connect_budget, pre_connect_wire_bytes, Msg, MAX_BLOCK, MAX_LINE, MIN_BLOCK,
};
use crate::error::{unexpected, AuthError, ProtocolViolation, TransferSessionError, UsageError};
use crate::fileio::FileSource;
use crate::first_flight::{client_hello, wall_ms};
use crate::plan::{plan_items, SendItem};
use crate::send_items::Items;

/// Congestion control for the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CcChoice {
    /// Exactly this wire rate, bit/s (dedicated lightpaths).
    Fixed(f64),
    /// Model-based, never above this wire rate, bit/s.
    Adaptive(f64),
}

impl CcChoice {
    /// `blind_bytes`: what the sender sends before the connect completes (see
    /// [`AdaptiveConfig::blind_bytes`]).
    fn build(&self, resume: Option<ResumeHint>, blind_bytes: u64) -> Box<dyn CongestionController> {
        match *self {
            CcChoice::Fixed(r) => Box::new(FixedRate::new(r)),
            CcChoice::Adaptive(max) => Box::new(Adaptive::new(AdaptiveConfig {
                max_rate_bps: max,
                initial_rate_bps: AdaptiveConfig::default().initial_rate_bps.min(max),
                resume,
                blind_bytes,
                ..AdaptiveConfig::default()
            })),
        }
    }

    fn describe(&self) -> (&'static str, f64) {
        match *self {
            CcChoice::Fixed(r) => ("fixed", r),
            CcChoice::Adaptive(r) => ("adaptive", r),
        }
    }
}

/// How to send.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Receiver control address.
    pub server: SocketAddr,
    /// Directory below the receiver's root the items land in ("" for the root).
    pub dest: String,
    /// Pre-shared key.
    pub key: Option<Vec<u8>>,
    /// Congestion control.
    pub cc: CcChoice,
    /// Payload bytes per datagram.
    pub chunk_size: u32,
    /// Verification/resume block size (rounded up to a power of two).
    pub block_size: u64,
    /// Ask the receiver to fsync each file before its verdict.
    pub sync: bool,
    /// A rate to start the adaptive controller from (careful resume): remembered from an
    /// earlier session to this receiver, or given by the operator.
    pub start: Option<StartHint>,
}

/// Where the adaptive controller may start: see [`transfer::ResumeHint`].
#[derive(Debug, Clone, PartialEq)]
pub struct StartHint {
    /// Wire rate, bit/s.
    pub rate_bps: f64,
    /// The RTT it was measured at; `None` (an operator's rate): the one this connect measures.
    pub rtt: Option<Duration>,
    /// Where it came from, for the report ("remembered", "--start-rate").
    pub from: String,
}

impl StartHint {
    /// The hint before the connect measured the path (its remembered RTT sets the jump
    /// window); `None` without an RTT or with an unusable one.
    fn unconfirmed(&self) -> Option<ResumeHint> {
        let rtt = self.rtt?;
        ResumeHint {
            rate_bps: self.rate_bps,
            rtt,
        }
        .confirmed(None)
    }

    /// The hint checked against the round trip the TCP connect took (careful resume's path
    /// confirmation), and what the report says of it.
    fn confirm(&self, connect_rtt: Duration) -> (Option<ResumeHint>, StartReport) {
        let hint = ResumeHint {
            rate_bps: self.rate_bps,
            rtt: self.rtt.unwrap_or(connect_rtt),
        };
        let ok = hint.confirmed(Some(connect_rtt));
        let report = StartReport {
            from: self.from.clone(),
            rate_bps: self.rate_bps,
            rtt_s: hint.rtt.as_secs_f64(),
            connect_rtt_s: connect_rtt.as_secs_f64(),
            used: ok.is_some(),
        };
        (ok, report)
    }
}

/// Progress, for a bar.
#[derive(Debug, Clone, Default)]
pub struct SendProgress {
    /// Destination path of the file being sent.
    pub file: String,
    /// Bytes of all files that are done or held by the receiver.
    pub done_bytes: u64,
    /// Bytes of all files.
    pub total_bytes: u64,
    /// Current pacing rate, bit/s.
    pub rate_bps: f64,
    /// Payload bytes sent again so far.
    pub retransmitted_bytes: u64,
    /// Smoothed round-trip time of the data stream, once measured.
    pub srtt: Option<Duration>,
}

/// Before `welcome`, a failed control channel means the receiver refused our first flight: its
/// refusal is in the clear, which our authenticated channel reads as a bad MAC.
fn before_welcome(e: TransferSessionError) -> TransferSessionError {
    match e {
        TransferSessionError::Control(ChannelError::BadMac) => AuthError::ReceiverRefused.into(),
        TransferSessionError::Control(c) => AuthError::EndedAfterProof(c).into(),
        e => e,
    }
}

/// The receiver's `welcome` must echo our session id (its port is the one it listens on; behind
/// a TCP-only proxy it is not the one we send to, and the data then never arrives).
fn check_welcome(m: Msg, session_id: u64) -> Result<(), TransferSessionError> {
    match m {
        Msg::Welcome { session_id: s, .. } if s == session_id => Ok(()),
        m => Err(unexpected(&m, "welcome for our session")),
    }
}

/// Send `items` (files and directories) to the receiver in `cfg`. Per-file failures (a refused
/// path, a verification that never succeeds) are recorded in the report and the session goes on;
/// a failed control channel, data stream or authentication ends it with `Err`.
pub fn send(
    cfg: &SendConfig,
    items: &[PathBuf],
    progress: &mut dyn FnMut(&SendProgress),
    stop: &AtomicBool,
) -> Result<SendReport, TransferSessionError> {
    let items: Vec<SendItem> = items.iter().cloned().map(SendItem::Path).collect();
    send_items(cfg, &items, progress, stop)
}

/// [`send`] for files, files under other names and streams (recorded scans landing as one
/// continuous file).
pub fn send_items(
    cfg: &SendConfig,
    items: &[SendItem],
    progress: &mut dyn FnMut(&SendProgress),
    stop: &AtomicBool,
) -> Result<SendReport, TransferSessionError> {
    if !crate::control::CHUNK_RANGE.contains(&cfg.chunk_size) {
        return Err(UsageError::ChunkSize(cfg.chunk_size).into());
    }
    let block_size = block_size(cfg.block_size);
    let plan = plan_items(items, &cfg.dest)?;
    // A session holds a few descriptors per file in flight (up to 128 files a session, 16
    // sessions), more than the usual soft limit of 1024.
    netio::raise_fd_limit();
    let started = Instant::now();
    let cpu0 = read_process_cpu().ok();
    // Data with the connect (protocol 6): the TCP connect runs on its own thread while the first
    // segment leaves on UDP; hello, session and the offers follow once it completed.
    let connecting = connect_in_background(cfg.server);
    let to = cfg.server;
    let local: SocketAddr = match to.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let (sock, _) = connect_udp(local, to, BufferRequest::new(4 << 20, 4 << 20))
        .map_err(|e| io_err(format!("UDP to {to}"))(std::io::Error::other(e)))?;
    sock.set_nonblocking(true).map_err(io_err("UDP socket"))?;
    let udp_port = sock.local_addr().map_err(io_err("UDP socket"))?.port();
    let session_id: u64 = rand::random();
    let (hello, sk) = client_hello(cfg.key.as_deref(), rand::random(), wall_ms(), session_id, udp_port);
    // A start rate given without its round trip (--start-rate) needs the connect's before any
    // datagram: its jump window is that rate for that long.
    let hint = match cfg.cc {
        CcChoice::Adaptive(_) => cfg.start.as_ref(),
        CcChoice::Fixed(_) => None,
    };
    let mut connected = match hint {
        Some(h) if h.rtt.is_none() => Some(wait_connect(&connecting, cfg.server, stop)?),
        _ => None,
    };
    let resume = hint.and_then(|h| match &connected {
        Some((_, rtt)) => h.confirm(*rtt).0,
        None => h.unconfirmed(),
    });
    let first_segment = first_segment_bytes(resume);
    let mut sender = data_sender(cfg, resume, &sk, session_id)?;
    let mut items = Items::new(plan, block_size, cfg.sync, first_segment);
    let mut lines = Vec::new();
    items.offer_more(&mut lines, &mut sender)?;
    let mut tx = crate::udp::Transmit::new(netio::gso_supported(&sock));
    let mut first_data = None;
    let (stream, connect_rtt) = match connected.take() {
        Some(c) => c,
        None => {
            let pre = PreConnect {
                connecting: &connecting,
                server: cfg.server,
                sock: &sock,
                budget: pre_connect_budget(cfg.chunk_size),
                stop,
            };
            pre.send(&mut tx, &mut sender, &mut first_data)?
        }
    };
    // SYN to SYN-ACK: one round trip of the path. A remembered rate it does not confirm is
    // given up (careful resume's path confirmation, after the fact: the jump window and the
    // pre-connect budget bounded what it let out).
    sender.cc_mut().on_path_rtt(Instant::now(), connect_rtt);
    let start = hint.map(|h| h.confirm(connect_rtt).1);
    let mut ch = Channel::<Msg>::new(stream, MAX_LINE);
    ch.send(&hello)?;
    ch.authenticate(sk, Role::Client);
    (|| {
        ch.send(&Msg::Session {
            chunk_size: cfg.chunk_size,
            first_segment,
        })?;
        lines.drain(..).try_for_each(|m| ch.send(&m))
    })()
    .map_err(|e| before_welcome(e.into()))?;

    let (cc_name, rate) = cfg.cc.describe();
    let mut report = SendReport {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        server: cfg.server.to_string(),
        cc: cc_name.to_string(),
        rate_bps: rate,
        total_bytes: items.total_bytes(),
        start,
        ..SendReport::default()
    };
    let link = Link {
        sock: &sock,
        to,
        session_id,
    };
    let (data, read, first_data) = run_stream(
        &mut ch,
        &link,
        (&mut sender, &mut tx, first_data),
        &mut items,
        progress,
        stop,
    )?;
    report.handshake_s = first_data.map_or(0.0, |t| t.saturating_duration_since(started).as_secs_f64());
    report.source_bytes_read = read + items.held_bytes();
    ch.send(&Msg::Bye)?;
    let (files, dirs) = items.into_reports();
    report.files = files;
    report.directories = dirs;
    report.transferred_bytes = data.bytes;
    report.retransmitted_bytes = data.retransmitted_bytes;
    report.goodput_bps = data.goodput_bps;
    report.data = Some(data);
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.cpu = cpu0.and_then(|c0| {
        read_process_cpu()
            .ok()
            .map(|c1| c1.share_since(&c0, started.elapsed(), clock_ticks_per_second()))
    });
    report.ok = report.files.iter().all(|f| f.error.is_none());
    Ok(report)
}

/// `--block` as the protocol wants it: a power of two in range.
fn block_size(asked: u64) -> u64 {
    asked
        .clamp(MIN_BLOCK, MAX_BLOCK)
        .checked_next_power_of_two()
        .unwrap_or(MAX_BLOCK)
        .min(MAX_BLOCK)
}

/// See where it is set in [`run_stream`].
const PACING_GRANULARITY: Duration = Duration::from_millis(1);
/// Longest sleep between looks at the control channel and the progress callback.
const TICK: Duration = Duration::from_millis(20);
/// Below this, waiting in ppoll costs more than it saves: poll without blocking instead.
const SPIN: Duration = Duration::from_micros(50);

/// The sans-IO sender of the session's one open stream, keyed under the session's data key.
fn data_sender(
    cfg: &SendConfig,
    resume: Option<ResumeHint>,
    sk: &[u8; 32],
    session_id: u64,
) -> Result<transfer::Sender<FileSource>, TransferSessionError> {
    let mut scfg = SenderConfig::new(SessionParams {
        session_id,
        file_size: 0,
        chunk_size: cfg.chunk_size,
    });
    scfg.open = true;
    scfg.data_key = Some(data_key(sk, session_id));
    // A real thread wakes tens of µs late on a busy host; the pacer forgives lateness up to
    // this much (and sends that much at once), so a sleep that overshoots does not lower the
    // rate. 1 ms is what Linux TCP hands its NIC at once at high rates (TSO autosizing).
    scfg.pacing_granularity = PACING_GRANULARITY;
    let source = FileSource::new(cfg.chunk_size);
    // The data sent before the connect completes is reported on one round trip late (the
    // receiver's session does not exist yet): blind, beyond a resumed rate's jump window.
    let cc = cfg.cc.build(resume, pre_connect_wire_bytes(cfg.chunk_size));
    Ok(transfer::Sender::new(scfg, source, cc, Instant::now()).map_err(UsageError::from)?)
}

/// The data socket and what the receiver's `welcome` must confirm.
struct Link<'a> {
    sock: &'a std::net::UdpSocket,
    to: SocketAddr,
    session_id: u64,
}

/// The data stream: one open transfer for every block of every file, run until every item has
/// its verdict. Returns its report, the bytes read from the sources for it and when its first
/// datagram left.
fn run_stream(
    ch: &mut Channel<Msg>,
    link: &Link<'_>,
    (sender, tx, mut first_data): (
        &mut transfer::Sender<FileSource>,
        &mut crate::udp::Transmit,
        Option<Instant>,
    ),
    items: &mut Items,
    progress: &mut dyn FnMut(&SendProgress),
    stop: &AtomicBool,
) -> Result<(DataReport, u64, Option<Instant>), TransferSessionError> {
    let (sock, to) = (link.sock, link.to);
    let mut rb = netio::RecvBatch::new(64, 2048);
    let mut prog = SendProgress {
        total_bytes: items.total_bytes(),
        ..SendProgress::default()
    };
    let mut next_tick = Instant::now();
    let mut tcp_ready = true;
    let mut welcomed = false;
    let mut last_ack = (0u64, Instant::now());
    loop {
        if tcp_ready {
            while let Some(m) = ch.try_recv().map_err(|e| {
                let e = TransferSessionError::from(e);
                if welcomed {
                    e
                } else {
                    before_welcome(e)
                }
            })? {
                if welcomed {
                    items.handle(m, sender)?;
                } else {
                    check_welcome(m, link.session_id)?;
                    welcomed = true;
                }
            }
        }
        items.send_hashes(ch, sender)?;
        offer_more(items, ch, sender)?;
        let now = Instant::now();
        if sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        sender.source_mut().now = now;
        tx.pump(sock, sender).map_err(io_err(format!("sending to {to}")))?;
        if let Some(e) = sender.source_mut().error.take() {
            return Err(io_err("reading a source file")(e).into());
        }
        if let transfer::SenderState::Failed(f) = sender.state() {
            return Err(ProtocolViolation::DataStream(format!("{f:?}")).into());
        }
        if first_data.is_none() && sender.datagrams_sent() > 0 {
            first_data = Some(now);
        }
        if sender.bytes_delivered() > last_ack.0 {
            last_ack = (sender.bytes_delivered(), now);
        }
        let cum_ack = sender.cum_ack();
        sender.source_mut().retire(cum_ack);
        if now >= next_tick {
            prog.done_bytes = (items.held_bytes() + sender.bytes_delivered()).min(prog.total_bytes);
            prog.rate_bps = sender.cc().pacing_rate_bps();
            prog.retransmitted_bytes = sender.retransmitted_bytes();
            prog.srtt = sender.smoothed_rtt();
            prog.file = items.current().to_string();
            progress(&prog);
            if stop.load(Ordering::Relaxed) {
                return Err(TransferSessionError::Interrupted);
            }
            next_tick = now + TICK;
        }
        if items.all_final() {
            break;
        }
        let wake = sender.poll_timeout().unwrap_or(next_tick).min(next_tick);
        let wait = wake.saturating_duration_since(Instant::now());
        let wait = if wait < SPIN { Duration::ZERO } else { wait };
        let ready = wait_two(sock, ch, wait)?;
        tcp_ready = ready & 2 != 0;
        if ready & 1 != 0 {
            crate::udp::pump_reports(sock, &mut rb, sender).map_err(io_err(format!("receiving from {to}")))?;
        }
    }
    let read = sender.source().bytes_read + sender.source().read_back;
    Ok((
        data_report(sender, tx.stats(), first_data, last_ack.1),
        read,
        first_data,
    ))
}

/// Offer the next items on the control channel while the window has room.
fn offer_more(
    items: &mut Items,
    ch: &mut Channel<Msg>,
    sender: &mut transfer::Sender<FileSource>,
) -> Result<(), TransferSessionError> {
    let mut lines = Vec::new();
    items.offer_more(&mut lines, sender)?;
    lines.iter().try_for_each(|m| ch.send(m))?;
    Ok(())
}

/// The TCP connect to `server`, on its own thread (bounded by its 10 s timeout): the stream,
/// and the round trip it took (SYN to SYN-ACK).
type Connecting = mpsc::Receiver<std::io::Result<(TcpStream, Duration)>>;

fn connect_in_background(server: SocketAddr) -> Connecting {
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let r = TcpStream::connect_timeout(&server, CONNECT_TIMEOUT).map(|s| (s, t0.elapsed()));
        let _ = tx.send(r);
    });
    rx
}

/// How long the TCP connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn connect_result(
    r: Result<std::io::Result<(TcpStream, Duration)>, mpsc::RecvTimeoutError>,
    server: SocketAddr,
) -> Result<Option<(TcpStream, Duration)>, TransferSessionError> {
    let what = format!("connecting to {server}");
    match r {
        Ok(Ok(c)) => Ok(Some(c)),
        Ok(Err(e)) => Err(io_err(what)(e).into()),
        Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(io_err(what)(std::io::Error::other("the connect thread ended")).into())
        }
    }
}

/// Wait for the connect, sending nothing meanwhile.
fn wait_connect(
    connecting: &Connecting,
    server: SocketAddr,
    stop: &AtomicBool,
) -> Result<(TcpStream, Duration), TransferSessionError> {
    let deadline = Instant::now() + CONNECT_TIMEOUT + TICK;
    while Instant::now() < deadline {
        if stop.load(Ordering::Relaxed) {
            return Err(TransferSessionError::Interrupted);
        }
        if let Some(c) = connect_result(connecting.recv_timeout(TICK), server)? {
            return Ok(c);
        }
    }
    Err(io_err(format!("connecting to {server}"))(std::io::ErrorKind::TimedOut.into()).into())
}

/// The data that leaves before the connect completes (see [`pre_connect_budget`]; the pacer
/// may overshoot it by one burst of [`PACING_GRANULARITY`], inside the pen's last ¼).
struct PreConnect<'a> {
    connecting: &'a Connecting,
    server: SocketAddr,
    sock: &'a std::net::UdpSocket,
    budget: u64,
    stop: &'a AtomicBool,
}

impl PreConnect<'_> {
    /// Send the first segment, paced, within the budget, until the connect completes.
    fn send(
        &self,
        tx: &mut crate::udp::Transmit,
        sender: &mut transfer::Sender<FileSource>,
        first_data: &mut Option<Instant>,
    ) -> Result<(TcpStream, Duration), TransferSessionError> {
        let deadline = Instant::now() + CONNECT_TIMEOUT + TICK;
        loop {
            let now = Instant::now();
            if now >= deadline {
                let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
                return Err(io_err(format!("connecting to {}", self.server))(e).into());
            }
            if self.stop.load(Ordering::Relaxed) {
                return Err(TransferSessionError::Interrupted);
            }
            if sender.datagrams_sent() < self.budget {
                if sender.poll_timeout().is_some_and(|t| t <= now) {
                    sender.handle_timeout(now);
                }
                sender.source_mut().now = now;
                tx.pump(self.sock, sender)
                    .map_err(io_err(format!("sending to {}", self.server)))?;
                if let Some(e) = sender.source_mut().error.take() {
                    return Err(io_err("reading a source file")(e).into());
                }
                if sender.datagrams_sent() > 0 {
                    first_data.get_or_insert(now);
                }
            }
            let wake = match sender.poll_timeout() {
                Some(t) if sender.datagrams_sent() < self.budget => t.min(now + TICK),
                _ => now + TICK,
            };
            let wait = wake.saturating_duration_since(Instant::now());
            let r = if wait < SPIN {
                self.connecting.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => mpsc::RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => mpsc::RecvTimeoutError::Disconnected,
                })
            } else {
                self.connecting.recv_timeout(wait)
            };
            if let Some(c) = connect_result(r, self.server)? {
                return Ok(c);
            }
        }
    }
}

/// Wait until the data socket (bit 0) or the control connection (bit 1) is readable.
fn wait_two(sock: &std::net::UdpSocket, ch: &Channel<Msg>, wait: Duration) -> Result<u64, TransferSessionError> {
    use std::os::fd::AsFd;
    netio::wait_fds_readable(&[sock.as_fd(), ch.stream().as_fd()], wait)
        .map_err(|e| io_err("waiting for the network")(e).into())
}

fn data_report<S: transfer::Source>(
    sender: &transfer::Sender<S>,
    tx: crate::udp::TransmitStats,
    first: Option<Instant>,
    last_ack: Instant,
) -> DataReport {
    let st = sender.stats();
    let bytes = sender.layout().total_bytes();
    let duration_s = first.map_or(0.0, |f| last_ack.saturating_duration_since(f).as_secs_f64());
    DataReport {
        bytes,
        datagrams_sent: st.datagrams_sent,
        payload_bytes_sent: st.payload_bytes_sent,
        retransmitted_bytes: st.retransmitted_bytes,
        loss_seen: st.loss_seen_by_receiver,
        rtt_min_us: st.rtt_min_us,
        srtt_us: st.srtt_us,
        duration_s,
        goodput_bps: (duration_s > 0.0).then(|| bytes as f64 * 8.0 / duration_s),
        cc: format!("{} ({})", st.cc, st.cc_phase),
        cc_events: st.cc_events,
        rejected: st.rejected.total(),
        gso: tx.gso,
        send_syscalls: tx.syscalls,
        rate_samples: st.rate_samples,
        bandwidth_estimate_bps: sender.cc().bandwidth_estimate_bps(),
    }
}

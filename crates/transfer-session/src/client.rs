//! The sending side (`evlbi send`): plan the files, authenticate, offer them ahead of the data,
//! stream every accepted block through one open transfer, send each block's hash as it is sent,
//! and collect the receiver's verdicts.

use std::fs::{self, File};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use ctlchan::mac::{hex_encode, prove};
use ctlchan::{Channel, ChannelError, Role};
use netio::{clock_ticks_per_second, connect_udp, io_err, read_process_cpu, BufferRequest};
use transfer::results::{DataReport, SendReport, REPORT_SCHEMA_VERSION};
use transfer::{Adaptive, AdaptiveConfig, CongestionController, FixedRate, SenderConfig, SessionParams};

use crate::control::{data_key, session_key, Msg, CLIENT_LABEL, MAX_BLOCK, MAX_LINE, MIN_BLOCK, PROTOCOL_VERSION};
use crate::fileio::{FileSource, ReadAt};
use crate::send_items::Items;
use crate::{unexpected, SessionError, CONTROL_TIMEOUT};

/// Congestion control for the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CcChoice {
    /// Exactly this wire rate, bit/s (dedicated lightpaths).
    Fixed(f64),
    /// Model-based, never above this wire rate, bit/s.
    Adaptive(f64),
}

impl CcChoice {
    fn build(&self) -> Box<dyn CongestionController> {
        match *self {
            CcChoice::Fixed(r) => Box::new(FixedRate::new(r)),
            CcChoice::Adaptive(max) => Box::new(Adaptive::new(AdaptiveConfig {
                max_rate_bps: max,
                initial_rate_bps: AdaptiveConfig::default().initial_rate_bps.min(max),
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

/// What `send_items` sends.
#[derive(Clone)]
pub enum SendItem {
    /// A file or directory, under its own name in the destination.
    Path(PathBuf),
    /// A file under `dest`, a path relative to the destination (`a/b/name`; its directories
    /// are made).
    FileAs {
        /// The file.
        path: PathBuf,
        /// Where it lands.
        dest: String,
    },
    /// `size` bytes read from `source` (a recorded scan), landing as the file `dest`.
    Stream {
        /// Where it lands, relative to the destination.
        dest: String,
        /// Bytes.
        size: u64,
        /// Modification time to offer (ns since 1970).
        mtime_ns: u64,
        /// Shown as the source in the report.
        name: String,
        /// What is read.
        source: Arc<dyn ReadAt>,
    },
}

/// Where a file's bytes come from.
#[derive(Clone)]
pub(crate) enum Source {
    Path(PathBuf),
    Stream(String, Arc<dyn ReadAt>),
}

impl Source {
    /// Open it for reading, and its size now (`None` for a stream: the size it was planned
    /// with holds).
    pub(crate) fn open(&self) -> Result<(Arc<dyn ReadAt>, Option<u64>), String> {
        match self {
            Source::Path(p) => {
                let f = File::open(p).map_err(|e| format!("opening {}: {e}", p.display()))?;
                let size = f.metadata().map_err(|e| format!("reading {}: {e}", p.display()))?.len();
                Ok((Arc::new(f), Some(size)))
            }
            Source::Stream(_, r) => Ok((r.clone(), None)),
        }
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Stream(n, _) => n.clone(),
        }
    }
}

/// One thing to send: a file or a directory to create.
#[derive(Clone)]
pub(crate) enum Item {
    Dir(String),
    File {
        source: Source,
        dest: String,
        size: u64,
        mtime_ns: u64,
    },
}

fn join(dest: &str, name: &str) -> String {
    if dest.is_empty() {
        name.to_string()
    } else {
        format!("{}/{name}", dest.trim_end_matches('/'))
    }
}

fn file_item(source: &Path, dest: String) -> Result<Item, SessionError> {
    let m = fs::metadata(source).map_err(io_err(format!("reading {}", source.display())))?;
    let mtime_ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(Item::File {
        source: Source::Path(source.to_path_buf()),
        dest,
        size: m.len(),
        mtime_ns,
    })
}

fn walk(dir: &Path, dest: &str, out: &mut Vec<Item>) -> Result<(), SessionError> {
    out.push(Item::Dir(dest.to_string()));
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(io_err(format!("listing {}", dir.display())))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e
            .file_type()
            .map_err(io_err(format!("reading {}", e.path().display())))?;
        // Symlinked directories are not followed (loops); symlinked files are sent as files.
        if ft.is_dir() {
            walk(&e.path(), &join(dest, &name), out)?;
        } else if fs::metadata(e.path()).is_ok_and(|m| m.is_file()) {
            out.push(file_item(&e.path(), join(dest, &name))?);
        }
    }
    Ok(())
}

/// The directories above `rel` (`a/b/c` → `a`, `a/b`) not yet in `out`, then nothing else.
fn parents(dest: &str, rel: &str, out: &mut Vec<Item>) {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for i in 1..parts.len() {
        let d = join(dest, &parts[..i].join("/"));
        if !out.iter().any(|it| matches!(it, Item::Dir(x) if *x == d)) {
            out.push(Item::Dir(d));
        }
    }
}

fn plan_items(items: &[SendItem], dest: &str) -> Result<Vec<Item>, SessionError> {
    let mut out = Vec::new();
    for it in items {
        match it {
            SendItem::Path(p) => out.extend(plan(std::slice::from_ref(p), dest)?),
            SendItem::FileAs { path, dest: rel } => {
                parents(dest, rel, &mut out);
                out.push(file_item(path, join(dest, rel))?);
            }
            SendItem::Stream {
                dest: rel,
                size,
                mtime_ns,
                name,
                source,
            } => {
                parents(dest, rel, &mut out);
                out.push(Item::File {
                    source: Source::Stream(name.clone(), source.clone()),
                    dest: join(dest, rel),
                    size: *size,
                    mtime_ns: *mtime_ns,
                });
            }
        }
    }
    Ok(out)
}

fn plan(items: &[PathBuf], dest: &str) -> Result<Vec<Item>, SessionError> {
    let mut out = Vec::new();
    for p in items {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| SessionError::Usage(format!("{}: no file name to send it under", p.display())))?;
        let m = fs::metadata(p).map_err(io_err(format!("reading {}", p.display())))?;
        if m.is_dir() {
            walk(p, &join(dest, &name), &mut out)?;
        } else {
            out.push(file_item(p, join(dest, &name))?);
        }
    }
    Ok(out)
}

/// Prove the key (when we have one) or hand over a fresh session key (without), and from then
/// on authenticate every line; returns the session key. The receiver's first authenticated line
/// (`welcome`) is its proof: only a holder of the pre-shared key derives the same session key.
fn handshake(ch: &mut Channel<Msg>, key: Option<&[u8]>) -> Result<[u8; 32], SessionError> {
    let cn = crate::nonce();
    ch.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
        client_nonce: cn.clone(),
    })?;
    let (sn, key_required) = match ch.recv(CONTROL_TIMEOUT)? {
        Msg::Challenge {
            server_nonce,
            key_required,
        } => (server_nonce, key_required),
        m => return Err(unexpected(&m, "challenge")),
    };
    let sk = match (key, key_required) {
        (None, true) => {
            return Err(SessionError::Auth(
                "the receiver requires a pre-shared key (--key-file)".into(),
            ))
        }
        (Some(_), false) => {
            return Err(SessionError::Auth(
                "the receiver has no key but this sender does".into(),
            ))
        }
        (Some(k), true) => {
            let auth = |e: ctlchan::mac::MacError| SessionError::Auth(e.to_string());
            let proof = prove(k, &[CLIENT_LABEL, sn.as_bytes(), cn.as_bytes()]).map_err(auth)?;
            ch.send(&Msg::Auth {
                proof: Some(proof),
                session_key: None,
            })?;
            session_key(k, &cn, &sn).map_err(auth)?
        }
        (None, false) => {
            let mut sk = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut sk);
            ch.send(&Msg::Auth {
                proof: None,
                session_key: Some(hex_encode(&sk)),
            })?;
            sk
        }
    };
    ch.authenticate(sk, Role::Client);
    Ok(sk)
}

/// Wait for the receiver's `welcome`: the data port and the session id.
fn welcome(ch: &mut Channel<Msg>) -> Result<(u16, u64), SessionError> {
    match ch.recv(CONTROL_TIMEOUT) {
        Ok(Msg::Welcome { udp_port, session_id }) => Ok((udp_port, session_id)),
        Ok(m) => Err(unexpected(&m, "welcome")),
        // The receiver refused our proof and said so in the clear, or holds another key.
        Err(ChannelError::BadMac) => Err(SessionError::Auth(
            "the receiver refused the key proof (or holds another key)".into(),
        )),
        Err(e) => Err(e.into()),
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
) -> Result<SendReport, SessionError> {
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
) -> Result<SendReport, SessionError> {
    if !crate::control::CHUNK_RANGE.contains(&cfg.chunk_size) {
        return Err(SessionError::Usage(format!(
            "chunk size {} outside {:?}",
            cfg.chunk_size,
            crate::control::CHUNK_RANGE
        )));
    }
    let block_size = block_size(cfg.block_size);
    let plan = plan_items(items, &cfg.dest)?;
    // A session holds a few descriptors per file in flight (up to 128 files a session, 16
    // sessions), more than the usual soft limit of 1024.
    netio::raise_fd_limit();
    let started = Instant::now();
    let cpu0 = read_process_cpu().ok();
    let stream = TcpStream::connect_timeout(&cfg.server, Duration::from_secs(10))
        .map_err(io_err(format!("connecting to {}", cfg.server)))?;
    let mut ch = Channel::<Msg>::new(stream, MAX_LINE);
    let sk = handshake(&mut ch, cfg.key.as_deref())?;
    let mut items = Items::new(plan, block_size, cfg.sync);
    // The session and the first offers go out before the welcome: the receiver answers them
    // right after it. If the receiver refused our proof it has hung up meanwhile.
    let (udp_port, session_id) = (|| {
        ch.send(&Msg::Session {
            chunk_size: cfg.chunk_size,
        })?;
        items.offer_more(&mut ch)?;
        welcome(&mut ch)
    })()
    .map_err(|e| match e {
        SessionError::Control(c) => SessionError::Auth(format!(
            "the receiver ended the connection after our key proof (a wrong key?): {c}"
        )),
        e => e,
    })?;
    let handshake_s = started.elapsed().as_secs_f64();

    let (cc_name, rate) = cfg.cc.describe();
    let mut report = SendReport {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        server: cfg.server.to_string(),
        cc: cc_name.to_string(),
        rate_bps: rate,
        handshake_s,
        total_bytes: items.total_bytes(),
        ..SendReport::default()
    };
    let (data, read) = run_stream(&mut ch, cfg, &sk, udp_port, session_id, &mut items, progress, stop)?;
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

/// The data stream: one open transfer for every block of every file, run until every item has
/// its verdict. Returns its report and the bytes read from the sources for it.
#[allow(clippy::too_many_arguments)]
fn run_stream(
    ch: &mut Channel<Msg>,
    cfg: &SendConfig,
    sk: &[u8; 32],
    udp_port: u16,
    session_id: u64,
    items: &mut Items,
    progress: &mut dyn FnMut(&SendProgress),
    stop: &AtomicBool,
) -> Result<(DataReport, u64), SessionError> {
    let to = SocketAddr::new(cfg.server.ip(), udp_port);
    let local: SocketAddr = match to.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let (sock, _) = connect_udp(local, to, BufferRequest::new(4 << 20, 4 << 20))
        .map_err(|e| io_err(format!("UDP to {to}"))(std::io::Error::other(e)))?;
    sock.set_nonblocking(true).map_err(io_err("UDP socket"))?;
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
    let mut sender = transfer::Sender::new(scfg, source, cfg.cc.build(), Instant::now())
        .map_err(|e| SessionError::Usage(e.to_string()))?;
    let mut tx = crate::udp::Transmit::new(netio::gso_supported(&sock));
    let mut rb = netio::RecvBatch::new(64, 2048);
    let mut prog = SendProgress {
        total_bytes: items.total_bytes(),
        ..SendProgress::default()
    };
    let mut next_tick = Instant::now();
    let mut tcp_ready = true;
    let mut first_data: Option<Instant> = None;
    let mut last_ack = (0u64, Instant::now());
    loop {
        if tcp_ready {
            while let Some(m) = ch.try_recv()? {
                items.handle(m, &mut sender)?;
            }
        }
        items.send_hashes(ch, &mut sender)?;
        items.offer_more(ch)?;
        let now = Instant::now();
        if sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        sender.source_mut().now = now;
        tx.pump(&sock, &mut sender)
            .map_err(io_err(format!("sending to {to}")))?;
        if let Some(e) = sender.source_mut().error.take() {
            return Err(io_err("reading a source file")(e).into());
        }
        if let transfer::SenderState::Failed(f) = sender.state() {
            return Err(SessionError::Peer(format!("the data stream failed: {f:?}")));
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
                return Err(SessionError::Interrupted);
            }
            next_tick = now + TICK;
        }
        if items.all_final() {
            break;
        }
        let wake = sender.poll_timeout().unwrap_or(next_tick).min(next_tick);
        let wait = wake.saturating_duration_since(Instant::now());
        let wait = if wait < SPIN { Duration::ZERO } else { wait };
        let ready = wait_two(&sock, ch, wait)?;
        tcp_ready = ready & 2 != 0;
        if ready & 1 != 0 {
            crate::udp::pump_reports(&sock, &mut rb, &mut sender).map_err(io_err(format!("receiving from {to}")))?;
        }
    }
    let read = sender.source().bytes_read + sender.source().read_back;
    Ok((data_report(&sender, tx.stats(), first_data, last_ack.1), read))
}

/// Wait until the data socket (bit 0) or the control connection (bit 1) is readable.
fn wait_two(sock: &std::net::UdpSocket, ch: &Channel<Msg>, wait: Duration) -> Result<u64, SessionError> {
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
    }
}

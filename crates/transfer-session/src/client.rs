//! The sending side (`evlbi send`): plan the files, authenticate, move each file in rounds,
//! send its hashes, and wait for the receiver's verdict.

use std::fs::{self, File};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use ctlchan::mac::{hex_encode, prove, verify};
use ctlchan::{Channel, Role};
use netio::{connect_udp, BufferRequest, ProcessCpu};
use transfer::{Adaptive, AdaptiveConfig, CongestionController, FixedRate, SenderConfig, SenderState, SessionParams};

use crate::blocks::{Geometry, Selection};
use crate::control::{
    data_key, session_key, Msg, Offer, CLIENT_LABEL, HASHES_PER_MESSAGE, MAX_LINE, PROTOCOL_VERSION, SERVER_LABEL,
};
use crate::fileio::{FileSource, ReadAt};
use crate::hashing::{digest, FileDigest};
use crate::udp::{drive_sender, Tick};
use crate::{nonce, unexpected, SessionError, CONTROL_TIMEOUT};
use netio::io_err;
use transfer::results::{FileSendReport, RoundReport, SendReport, REPORT_SCHEMA_VERSION};

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
    /// Verification/resume block size (rounded up to a multiple of the chunk size).
    pub block_size: u64,
}

/// Progress, for a bar.
#[derive(Debug, Clone, Default)]
pub struct SendProgress {
    /// Destination path of the current file.
    pub file: String,
    /// Bytes of all files that are done or held by the receiver.
    pub done_bytes: u64,
    /// Bytes of all files.
    pub total_bytes: u64,
    /// Current pacing rate, bit/s.
    pub rate_bps: f64,
    /// Payload bytes sent again, all files so far.
    pub retransmitted_bytes: u64,
    /// Smoothed round-trip time of the current round, once measured.
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
enum Source {
    Path(PathBuf),
    Stream(String, Arc<dyn ReadAt>),
}

/// An opened [`Source`].
enum Opened {
    File(File),
    Stream(Arc<dyn ReadAt>),
}

impl Opened {
    fn reader(&self) -> &dyn ReadAt {
        match self {
            Opened::File(f) => f,
            Opened::Stream(r) => &**r,
        }
    }
}

impl Source {
    fn open(&self) -> Result<Opened, SessionError> {
        Ok(match self {
            Source::Path(p) => Opened::File(File::open(p).map_err(io_err(format!("opening {}", p.display())))?),
            Source::Stream(_, r) => Opened::Stream(r.clone()),
        })
    }

    fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Stream(n, _) => n.clone(),
        }
    }
}

/// One thing to send: a file or a directory to create.
#[derive(Clone)]
enum Item {
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

/// Prove the key (when we have one), check the receiver's proof, agree on the session key and
/// from then on authenticate every line; returns the session key.
fn handshake(ch: &mut Channel<Msg>, key: Option<&[u8]>) -> Result<[u8; 32], SessionError> {
    let cn = nonce();
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
    if key_required && key.is_none() {
        return Err(SessionError::Auth(
            "the receiver requires a pre-shared key (--key-file)".into(),
        ));
    }
    let proof = key
        .map(|k| prove(k, &[CLIENT_LABEL, sn.as_bytes(), cn.as_bytes()]))
        .transpose()
        .map_err(|e| SessionError::Auth(e.to_string()))?;
    ch.send(&Msg::Auth { proof })?;
    let sk = match ch.recv(CONTROL_TIMEOUT)? {
        Msg::Welcome {
            proof,
            session_key: sent,
        } => match (key, proof, sent) {
            (None, _, Some(hex)) => ctlchan::mac::hex32(&hex)
                .ok_or_else(|| SessionError::Auth("the receiver's session key is malformed".into()))?,
            (None, _, None) => return Err(SessionError::Auth("the receiver sent no session key".into())),
            (Some(k), Some(p), _) => {
                verify(k, &[SERVER_LABEL, cn.as_bytes(), sn.as_bytes()], &p)
                    .map_err(|_| SessionError::Auth("the receiver's key proof does not match".into()))?;
                session_key(k, &cn, &sn).map_err(|e| SessionError::Auth(e.to_string()))?
            }
            (Some(_), None, _) => {
                return Err(SessionError::Auth(
                    "the receiver has no key but this sender does".into(),
                ))
            }
        },
        m => return Err(unexpected(&m, "welcome")),
    };
    ch.authenticate(sk, Role::Client);
    Ok(sk)
}

/// Send `items` (files and directories) to the receiver in `cfg`. Per-file failures (a refused
/// path, a verification that never succeeds) are recorded in the report and the session goes on;
/// a failed control channel or authentication ends it with `Err`.
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
    let block_size = cfg.block_size.max(1).div_ceil(u64::from(cfg.chunk_size)) * u64::from(cfg.chunk_size);
    let plan = plan_items(items, &cfg.dest)?;
    let started = Instant::now();
    let cpu0 = ProcessCpu::read().ok();
    let stream = TcpStream::connect_timeout(&cfg.server, Duration::from_secs(10))
        .map_err(io_err(format!("connecting to {}", cfg.server)))?;
    let mut ch = Channel::<Msg>::new(stream, MAX_LINE);
    let sk = handshake(&mut ch, cfg.key.as_deref())?;

    let (cc_name, rate) = cfg.cc.describe();
    let mut report = SendReport {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        server: cfg.server.to_string(),
        cc: cc_name.to_string(),
        rate_bps: rate,
        ..SendReport::default()
    };
    report.total_bytes = plan
        .iter()
        .map(|i| if let Item::File { size, .. } = i { *size } else { 0 })
        .sum();
    let mut prog = SendProgress {
        total_bytes: report.total_bytes,
        ..SendProgress::default()
    };
    let mut round_time = 0.0;
    for item in &plan {
        if stop.load(Ordering::Relaxed) {
            return Err(SessionError::Interrupted);
        }
        match item {
            Item::Dir(d) if d.is_empty() => {}
            Item::Dir(d) => {
                ch.send(&Msg::Mkdir { path: d.clone() })?;
                match ch.recv(CONTROL_TIMEOUT)? {
                    Msg::Done { .. } => report.directories.push(d.clone()),
                    Msg::Refused { message } => {
                        report.files.push(FileSendReport {
                            path: d.clone(),
                            error: Some(message),
                            ..FileSendReport::default()
                        });
                    }
                    m => return Err(unexpected(&m, "done")),
                }
            }
            Item::File {
                source,
                dest,
                size,
                mtime_ns,
            } => {
                let offer = Offer {
                    path: dest.clone(),
                    size: *size,
                    mtime_ns: *mtime_ns,
                    chunk_size: cfg.chunk_size,
                    block_size,
                };
                let f = send_file(&mut ch, cfg, &sk, source, offer, &mut prog, progress, stop)?;
                round_time += f.rounds.iter().map(|r| r.duration_s).sum::<f64>();
                report.transferred_bytes += f.rounds.iter().map(|r| r.bytes).sum::<u64>();
                report.retransmitted_bytes += f.rounds.iter().map(|r| r.retransmitted_bytes).sum::<u64>();
                report.files.push(f);
            }
        }
    }
    ch.send(&Msg::Bye)?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.goodput_bps = (round_time > 0.0).then(|| report.transferred_bytes as f64 * 8.0 / round_time);
    report.cpu_percent = cpu0.and_then(|c0| ProcessCpu::read().ok().map(|c1| c1.cpu_percent(&c0, started.elapsed())));
    report.ok = report.files.iter().all(|f| f.error.is_none());
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn send_file(
    ch: &mut Channel<Msg>,
    cfg: &SendConfig,
    sk: &[u8; 32],
    source: &Source,
    offer: Offer,
    prog: &mut SendProgress,
    progress: &mut dyn FnMut(&SendProgress),
    stop: &AtomicBool,
) -> Result<FileSendReport, SessionError> {
    let started = Instant::now();
    let mut rep = FileSendReport {
        source: source.name(),
        path: offer.path.clone(),
        size: offer.size,
        ..FileSendReport::default()
    };
    prog.file = offer.path.clone();
    let opened = source.open()?;
    let file = opened.reader();
    let g = Geometry {
        size: offer.size,
        block_size: offer.block_size,
    };
    let chunk_size = offer.chunk_size;
    let offered_path = offer.path.clone();
    ch.send(&Msg::Offer(offer))?;
    let mut accept = match ch.recv(CONTROL_TIMEOUT)? {
        Msg::Refused { message } => {
            rep.error = Some(message);
            return Ok(rep);
        }
        m @ Msg::Accept { .. } => m,
        m => return Err(unexpected(&m, "accept")),
    };
    let base_done = prog.done_bytes;
    let hashing_stopped = AtomicBool::new(false);
    std::thread::scope(|s| -> Result<FileSendReport, SessionError> {
        // Hash the whole file while the first round sends it: the receiver needs every block's
        // hash, including those it already holds, to re-verify them.
        let mut hasher = Some(s.spawn(|| {
            crate::lower_priority();
            digest(file, g, &|| hashing_stopped.load(Ordering::Relaxed))
        }));
        let mut file_digest: Option<FileDigest> = None;
        // Blocks the receiver held from an earlier attempt; they count as resumed once verified.
        let mut held_before = std::collections::BTreeSet::new();
        let result = (|| loop {
            let Msg::Accept {
                udp_port,
                session_id,
                have,
            } = &accept
            else {
                return Err(unexpected(&accept, "accept"));
            };
            let selection = Selection::missing(g, have);
            let held = g.size - selection.virtual_size();
            if rep.rounds.is_empty() {
                held_before = crate::blocks::from_ranges(have).collect();
            }
            prog.done_bytes = base_done + held;
            let (port, id) = (*udp_port, *session_id);
            let key = data_key(sk, id);
            let round = run_round(
                ch, cfg, file, selection, port, id, key, chunk_size, prog, progress, stop,
            )?;
            rep.rounds.push(round);
            if let Some(h) = hasher.take() {
                let d = h
                    .join()
                    .map_err(|_| SessionError::Usage("hashing thread panicked".into()))?
                    .map_err(io_err(format!("reading {}", source.name())))?
                    .ok_or(SessionError::Interrupted)?;
                file_digest = Some(d);
            }
            let d = file_digest.as_ref().ok_or(SessionError::Interrupted)?;
            if rep.rounds.len() == 1 {
                for (i, page) in d.blocks.chunks(HASHES_PER_MESSAGE).enumerate() {
                    ch.send(&Msg::Hashes {
                        first_block: (i * HASHES_PER_MESSAGE) as u64,
                        hashes: page.iter().map(|h| hex_encode(h)).collect(),
                    })?;
                }
            }
            // Also the end-of-round marker: the receiver stops serving the round's socket.
            ch.send(&Msg::FileHash {
                blake3: hex_encode(&d.file),
            })?;
            // Verification reads the whole copy: allow for a slow disk (100 MB/s).
            let verify_time = CONTROL_TIMEOUT + Duration::from_secs(g.size / 100_000_000);
            match ch.recv(verify_time)? {
                Msg::Verified { path, blake3 } => {
                    rep.verified = blake3 == hex_encode(&d.file) && path == offered_path;
                    if path != offered_path {
                        rep.error = Some(format!(
                            "the receiver verified {path:?}, not the offered {offered_path:?}"
                        ));
                    } else if !rep.verified {
                        rep.error = Some(format!("receiver's BLAKE3 {blake3} differs from ours"));
                    }
                    rep.resumed_bytes = g.len_of(held_before.iter().copied());
                    rep.blake3 = Some(blake3);
                    prog.done_bytes = base_done + g.size;
                    return Ok(());
                }
                Msg::Resend { blocks } => {
                    for b in crate::blocks::from_ranges(&blocks) {
                        held_before.remove(&b);
                    }
                    accept = ch.recv(CONTROL_TIMEOUT)?
                }
                Msg::Refused { message } => {
                    rep.error = Some(message);
                    return Ok(());
                }
                m => return Err(unexpected(&m, "verified")),
            }
        })();
        hashing_stopped.store(true, Ordering::Relaxed);
        result?;
        rep.elapsed_s = started.elapsed().as_secs_f64();
        Ok(rep.clone())
    })
}

#[allow(clippy::too_many_arguments)]
fn run_round(
    ch: &mut Channel<Msg>,
    cfg: &SendConfig,
    file: &dyn ReadAt,
    selection: Selection,
    udp_port: u16,
    session_id: u64,
    key: transfer::DataKey,
    chunk_size: u32,
    prog: &mut SendProgress,
    progress: &mut dyn FnMut(&SendProgress),
    stop: &AtomicBool,
) -> Result<RoundReport, SessionError> {
    let bytes = selection.virtual_size();
    let to = SocketAddr::new(cfg.server.ip(), udp_port);
    let local: SocketAddr = match to.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let (sock, _) = connect_udp(local, to, BufferRequest::new(4 << 20, 4 << 20))
        .map_err(|e| io_err(format!("UDP to {to}"))(std::io::Error::other(e)))?;
    let params = SessionParams {
        session_id,
        file_size: bytes,
        chunk_size,
    };
    let mut scfg = SenderConfig::new(params);
    scfg.data_key = Some(key);
    let mut sender = transfer::Sender::new(scfg, FileSource::new(file, selection), cfg.cc.build(), Instant::now())
        .map_err(|e| SessionError::Usage(e.to_string()))?;
    let (base, retx_base) = (prog.done_bytes, prog.retransmitted_bytes);
    let mut peer_failure: Option<SessionError> = None;
    let outcome = drive_sender(&sock, &mut sender, &mut |s| {
        prog.done_bytes = base + s.bytes_delivered();
        prog.rate_bps = s.cc().pacing_rate_bps();
        prog.retransmitted_bytes = retx_base + s.retransmitted_bytes();
        prog.srtt = s.smoothed_rtt();
        progress(prog);
        // The receiver only speaks during a round to give up (disk full, …): listen for it.
        match ch.try_recv() {
            Ok(None) => {}
            Ok(Some(m)) => peer_failure = Some(unexpected(&m, "the end of the round")),
            Err(e) => peer_failure = Some(e.into()),
        }
        if stop.load(Ordering::Relaxed) || peer_failure.is_some() {
            Tick::Abort
        } else {
            Tick::Continue
        }
    })
    .map_err(io_err(format!("sending to {to}")))?;
    if let Some(e) = peer_failure {
        return Err(e);
    }
    if outcome == Tick::Abort {
        return Err(SessionError::Interrupted);
    }
    let st = sender.stats();
    if let SenderState::Failed(f) = &st.state {
        return Err(SessionError::Peer(format!("transfer round failed: {f:?}")));
    }
    Ok(RoundReport {
        bytes,
        datagrams_sent: st.datagrams_sent,
        payload_bytes_sent: st.payload_bytes_sent,
        retransmitted_bytes: st.retransmitted_bytes,
        loss_seen: st.loss_seen_by_receiver,
        rtt_min_us: st.rtt_min_us,
        srtt_us: st.srtt_us,
        duration_s: st.duration_s.unwrap_or(0.0),
        goodput_bps: st.goodput_bps,
        cc: format!("{} ({})", st.cc, st.cc_phase),
        cc_events: st.cc_events,
        rejected: st.rejected.total(),
        rate_samples: st.rate_samples,
    })
}

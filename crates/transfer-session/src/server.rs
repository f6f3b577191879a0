//! The receiving side (`evlbi recv`): authenticate the sender, place each file safely below the
//! root, receive its missing blocks, verify, and rename only what matches.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use ctlchan::mac::{hex_decode, hex_encode, prove, verify};
use ctlchan::Channel;
use netio::{bind_udp, BufferRequest};
use transfer::{Receiver, ReceiverConfig, SessionParams};

use crate::blocks::{from_ranges, to_ranges, Geometry, ResumeState, Selection, RESUME_STATE_VERSION};
use crate::control::{clip, Msg, Offer, CLIENT_LABEL, MAX_LINE, SERVER_LABEL};
use crate::fileio::PartSink;
use crate::hashing::{compare, verify as verify_copy, IncrementalDigest};
use crate::paths::{file_under, make_dir_under, refuse_non_file, with_suffix};
use crate::report::FileRecvReport;
use crate::udp::{drive_receiver, ForeignCounters, Tick};
use crate::{io_err, nonce, unexpected, SessionError, CONTROL_TIMEOUT};

/// How long the receiver waits between files or for a round's end marker.
const IDLE: Duration = Duration::from_secs(600);
/// How often the resume record is rewritten while data arrives.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Receiver settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// TCP control address.
    pub listen: SocketAddr,
    /// Files land only below this directory.
    pub root: PathBuf,
    /// Pre-shared key; senders must prove it.
    pub key: Option<Vec<u8>>,
    /// Rounds per file before giving up on blocks that keep failing verification.
    pub max_rounds: u32,
    /// Socket receive buffer to ask for, bytes.
    pub rcvbuf: usize,
}

impl ServerConfig {
    /// Defaults: no key, 3 rounds, 32 MiB receive buffer.
    pub fn new(listen: SocketAddr, root: PathBuf) -> Self {
        ServerConfig {
            listen,
            root,
            key: None,
            max_rounds: 3,
            rcvbuf: 32 << 20,
        }
    }
}

/// What the server reports as it works.
#[derive(Debug, Clone)]
pub enum ServerEvent {
    /// A sender connected.
    Connected(SocketAddr),
    /// A file finished (verified or not).
    File(FileRecvReport),
    /// A directory was created.
    Directory(String),
    /// A round of a file started: data expected on this UDP port.
    Round {
        /// File path below the root.
        path: String,
        /// Round number, from 1.
        round: u32,
        /// UDP port.
        udp_port: u16,
        /// Bytes this round moves.
        bytes: u64,
    },
    /// The session ended; `Some` why if it failed.
    Ended(SocketAddr, Option<String>),
}

/// A bound receiver.
pub struct Server {
    listener: TcpListener,
    cfg: ServerConfig,
}

impl Server {
    /// Bind the control port and check the root.
    pub fn bind(cfg: ServerConfig) -> Result<Server, SessionError> {
        if !cfg.root.is_dir() {
            return Err(SessionError::Usage(format!(
                "--root {} is not a directory",
                cfg.root.display()
            )));
        }
        let listener = TcpListener::bind(cfg.listen).map_err(io_err(format!("binding TCP {}", cfg.listen)))?;
        Ok(Server { listener, cfg })
    }

    /// The bound control address.
    pub fn local_addr(&self) -> Result<SocketAddr, SessionError> {
        self.listener.local_addr().map_err(io_err("local address"))
    }

    /// Serve senders one at a time until `stop` (or after one session with `once`).
    pub fn serve(&self, stop: &AtomicBool, once: bool, on: &mut dyn FnMut(ServerEvent)) -> Result<(), SessionError> {
        self.listener.set_nonblocking(true).map_err(io_err("listener"))?;
        while !stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    stream.set_nonblocking(false).map_err(io_err("control socket"))?;
                    on(ServerEvent::Connected(peer));
                    let r = self.session(stream, peer, stop, on);
                    on(ServerEvent::Ended(peer, r.err().map(|e| e.to_string())));
                    if once {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("accepting a connection")(e)),
            }
        }
        Ok(())
    }

    fn session(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        stop: &AtomicBool,
        on: &mut dyn FnMut(ServerEvent),
    ) -> Result<(), SessionError> {
        let local_ip = stream.local_addr().map_err(io_err("control socket"))?.ip();
        let mut ch = Channel::<Msg>::new(stream, MAX_LINE);
        if let Err(e) = self.handshake(&mut ch) {
            return Err(fatal(&mut ch, e));
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(SessionError::Interrupted);
            }
            match ch.recv(IDLE)? {
                Msg::Bye => return Ok(()),
                Msg::Mkdir { path } => match make_dir_under(&self.cfg.root, &path) {
                    Ok(_) => {
                        ch.send(&Msg::Done { path: path.clone() })?;
                        on(ServerEvent::Directory(path));
                    }
                    Err(e) => ch.send(&Msg::Refused {
                        message: clip(&e.to_string()),
                    })?,
                },
                Msg::Offer(o) => {
                    let rep = self.receive_file(&mut ch, local_ip, peer, o, stop, on)?;
                    on(ServerEvent::File(rep));
                }
                m => {
                    let e = unexpected(&m, "offer, mkdir or bye");
                    return Err(fatal(&mut ch, e));
                }
            }
        }
    }

    fn handshake(&self, ch: &mut Channel<Msg>) -> Result<(), SessionError> {
        let cn = match ch.recv(CONTROL_TIMEOUT)? {
            Msg::Hello { client_nonce, .. } => client_nonce,
            m => return Err(unexpected(&m, "hello")),
        };
        let sn = nonce();
        let key = self.cfg.key.as_deref();
        ch.send(&Msg::Challenge {
            server_nonce: sn.clone(),
            key_required: key.is_some(),
        })?;
        let proof = match ch.recv(CONTROL_TIMEOUT)? {
            Msg::Auth { proof } => proof,
            m => return Err(unexpected(&m, "auth")),
        };
        if let Some(k) = key {
            let p = proof.ok_or_else(|| SessionError::Auth("the sender has no key".into()))?;
            verify(k, &[CLIENT_LABEL, sn.as_bytes(), cn.as_bytes()], &p)
                .map_err(|_| SessionError::Auth("the sender's key proof does not match".into()))?;
        }
        let proof = key
            .map(|k| prove(k, &[SERVER_LABEL, cn.as_bytes(), sn.as_bytes()]))
            .transpose()
            .map_err(|e| SessionError::Auth(e.to_string()))?;
        ch.send(&Msg::Welcome { proof })?;
        Ok(())
    }

    fn receive_file(
        &self,
        ch: &mut Channel<Msg>,
        local_ip: std::net::IpAddr,
        peer: SocketAddr,
        o: Offer,
        stop: &AtomicBool,
        on: &mut dyn FnMut(ServerEvent),
    ) -> Result<FileRecvReport, SessionError> {
        let started = Instant::now();
        let mut rep = FileRecvReport {
            path: o.path.clone(),
            size: o.size,
            ..FileRecvReport::default()
        };
        let target = match file_under(&self.cfg.root, &o.path) {
            Ok(t) => t,
            Err(e) => {
                let msg = clip(&e.to_string());
                ch.send(&Msg::Refused { message: msg.clone() })?;
                rep.error = Some(msg);
                return Ok(rep);
            }
        };
        let part_path = with_suffix(&target, ".part");
        let state_path = with_suffix(&target, ".part.evlbi");
        let opened = refuse_non_file(&part_path)
            .and_then(|_| refuse_non_file(&state_path))
            .map_err(|e| e.to_string())
            .and_then(|_| open_part(&part_path, &state_path, &o).map_err(|e| e.to_string()));
        let (part, mut state) = match opened {
            Ok(x) => x,
            Err(e) => {
                let msg = clip(&format!("{}: {e}", part_path.display()));
                ch.send(&Msg::Refused { message: msg.clone() })?;
                rep.error = Some(msg);
                return Ok(rep);
            }
        };
        let g = Geometry {
            size: o.size,
            block_size: o.block_size,
        };
        let mut have: BTreeSet<u64> = from_ranges(&state.have).filter(|&b| b < g.blocks()).collect();
        rep.resumed_bytes = have.iter().map(|&b| g.block_len(b)).sum();
        let mut expected: Vec<[u8; 32]> = Vec::new();
        // The first round hashes blocks as they complete; later rounds (rare: a block failed
        // verification) hash the whole copy again.
        let mut incremental = Some(IncrementalDigest::start(
            part.try_clone()
                .map_err(io_err(format!("reading {}", part_path.display())))?,
            g,
            have.iter().copied(),
        ));
        let mut file_hash: Option<[u8; 32]> = None;
        for round in 1..=self.cfg.max_rounds {
            rep.rounds = round;
            let selection = Selection::missing(g, &to_ranges(have.iter().copied()));
            let (sock, _grant) = bind_udp(SocketAddr::new(local_ip, 0), BufferRequest::new(self.cfg.rcvbuf, 0))
                .map_err(|e| SessionError::Io {
                    what: "binding UDP".into(),
                    source: std::io::Error::other(e),
                })?;
            // Kernel receive stamps for the one-way delay; on before the sender hears the port,
            // because the first socket on a host to ask turns stamping on through deferred work.
            netio::enable_rx_timestamps(&sock).map_err(io_err("SO_TIMESTAMPNS"))?;
            let port = sock.local_addr().map_err(io_err("UDP socket"))?.port();
            let session_id: u64 = rand::random();
            ch.send(&Msg::Accept {
                udp_port: port,
                session_id,
                have: to_ranges(have.iter().copied()),
            })?;
            on(ServerEvent::Round {
                path: o.path.clone(),
                round,
                udp_port: port,
                bytes: selection.virtual_size(),
            });
            let params = SessionParams {
                session_id,
                file_size: selection.virtual_size(),
                chunk_size: o.chunk_size,
            };
            let sink = PartSink::new(&part, selection, o.chunk_size, o.block_size);
            let mut receiver = Receiver::new(ReceiverConfig::new(params), sink, Instant::now())
                .map_err(|e| SessionError::Usage(e.to_string()))?;
            let mut failure: Option<SessionError> = None;
            let mut round_over = false;
            let mut last_save = Instant::now();
            let mut foreign = ForeignCounters::default();
            drive_receiver(&sock, &mut receiver, peer.ip(), session_id, &mut foreign, &mut |r| {
                let done = r.sink_mut().take_completed();
                let fresh = !done.is_empty();
                if let Some(inc) = &incremental {
                    done.iter().for_each(|&b| inc.completed(b));
                }
                have.extend(done);
                if let Some(e) = r.sink_mut().last_error.take() {
                    // Disk full or a failing disk: stop, keep what is on disk resumable.
                    failure = Some(SessionError::Io {
                        what: format!("writing {}", part_path.display()),
                        source: e,
                    });
                }
                if fresh && last_save.elapsed() >= SAVE_EVERY {
                    state.have = to_ranges(have.iter().copied());
                    let _ = state.save(&state_path);
                    last_save = Instant::now();
                }
                match ch.try_recv() {
                    Ok(None) => {}
                    Ok(Some(Msg::Hashes { first_block, hashes })) => {
                        if first_block != expected.len() as u64 || expected.len() + hashes.len() > g.blocks() as usize {
                            failure = Some(SessionError::Peer("block hashes out of order or too many".into()));
                        }
                        expected.extend(hashes.iter().filter_map(|h| <[u8; 32]>::try_from(hex_decode(h)?).ok()));
                    }
                    Ok(Some(Msg::FileHash { blake3 })) => {
                        file_hash = hex_decode(&blake3).and_then(|v| <[u8; 32]>::try_from(v).ok());
                        round_over = true;
                    }
                    Ok(Some(m)) => failure = Some(unexpected(&m, "hashes or file_hash")),
                    Err(e) => failure = Some(e.into()),
                }
                if round_over || failure.is_some() || stop.load(Ordering::Relaxed) {
                    Tick::Abort
                } else {
                    Tick::Continue
                }
            })
            .map_err(io_err("receiving UDP"))?;
            have.extend(receiver.sink_mut().take_completed());
            let st = receiver.stats();
            rep.datagrams_received += st.datagrams_received;
            rep.duplicate_datagrams += st.duplicate_datagrams;
            rep.rejected += st.rejected.total();
            rep.foreign.other_host += foreign.other_host;
            rep.foreign.other_port += foreign.other_port;
            rep.foreign.oversized += foreign.oversized;
            state.have = to_ranges(have.iter().copied());
            let saved = state.save(&state_path);
            if let Some(e) = failure {
                // Tell the sender even if saving the record failed too (disk full): the previous
                // record then stays, listing fewer blocks — still correct.
                return Err(fatal(ch, e));
            }
            saved.map_err(io_err(format!("writing {}", state_path.display())))?;
            if !round_over {
                return Err(SessionError::Interrupted);
            }
            if !receiver.is_complete() {
                let e = SessionError::Peer("the sender ended the round before every block arrived".into());
                return Err(fatal(ch, e));
            }
            if expected.len() as u64 != g.blocks() {
                let e = SessionError::Peer(format!("{} block hashes for {} blocks", expected.len(), g.blocks()));
                return Err(fatal(ch, e));
            }
            let v = match incremental.take() {
                Some(inc) => inc.finish().map(|d| compare(d, g, &expected)),
                None => verify_copy(&part, g, &expected),
            }
            .map_err(io_err(format!("reading {}", part_path.display())))?;
            if v.bad.is_empty() && Some(v.file) == file_hash {
                // Durable before the sender hears "verified" (it may delete its copy then).
                part.sync_all()
                    .map_err(io_err(format!("syncing {}", part_path.display())))?;
                refuse_non_file(&target).map_err(|e| SessionError::Usage(e.to_string()))?;
                fs::rename(&part_path, &target).map_err(io_err(format!("renaming to {}", target.display())))?;
                let _ = fs::remove_file(&state_path);
                set_mtime(&part, o.mtime_ns);
                rep.verified = true;
                rep.blake3 = Some(hex_encode(&v.file));
                rep.elapsed_s = started.elapsed().as_secs_f64();
                ch.send(&Msg::Verified {
                    blake3: hex_encode(&v.file),
                })?;
                return Ok(rep);
            }
            rep.bad_blocks += v.bad.len() as u64;
            for b in &v.bad {
                have.remove(b);
            }
            state.have = to_ranges(have.iter().copied());
            state
                .save(&state_path)
                .map_err(io_err(format!("writing {}", state_path.display())))?;
            if round == self.cfg.max_rounds {
                break;
            }
            ch.send(&Msg::Resend {
                blocks: to_ranges(v.bad.iter().copied()),
            })?;
        }
        let msg = format!(
            "{}: blocks still fail verification after {} rounds; the source may be changing",
            o.path, self.cfg.max_rounds
        );
        ch.send(&Msg::Refused { message: clip(&msg) })?;
        rep.error = Some(msg);
        rep.elapsed_s = started.elapsed().as_secs_f64();
        Ok(rep)
    }
}

/// Tell the sender why the session ends (best effort: the connection may be gone) and hand the
/// error back for the caller to return.
fn fatal(ch: &mut Channel<Msg>, e: SessionError) -> SessionError {
    let _ = ch.send(&Msg::Error {
        message: clip(&e.to_string()),
    });
    e
}

/// Open (or create) the `.part` file and its resume record. An existing record is used only when
/// it describes the same source file (size, mtime, block size) and the `.part` has that size.
fn open_part(part_path: &Path, state_path: &Path, o: &Offer) -> std::io::Result<(File, ResumeState)> {
    let part = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(part_path)?;
    let len = part.metadata()?.len();
    let resumable = ResumeState::load(state_path)
        .filter(|s| s.size == o.size && s.mtime_ns == o.mtime_ns && s.block_size == o.block_size && len == o.size);
    let state = match resumable {
        Some(s) => s,
        None => {
            // Start over: drop stale content, keep a sparse file of the final size.
            part.set_len(0)?;
            part.set_len(o.size)?;
            ResumeState {
                version: RESUME_STATE_VERSION,
                size: o.size,
                mtime_ns: o.mtime_ns,
                chunk_size: o.chunk_size,
                block_size: o.block_size,
                have: Vec::new(),
            }
        }
    };
    state.save(state_path)?;
    Ok((part, state))
}

/// Give the received file the source's modification time (as `cp -p`, `rsync -t`); best effort.
fn set_mtime(f: &File, mtime_ns: u64) {
    let _ = f.set_modified(UNIX_EPOCH + Duration::from_nanos(mtime_ns));
}

//! The receiving side (`evlbi recv`): authenticate the sender, place each file safely below the
//! root, receive its missing blocks, verify, and rename only what matches.

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, UNIX_EPOCH};

use ctlchan::mac::{hex32, hex_encode, prove, verify};
use ctlchan::serve::{Limits, ServeStats, Ticket};
use ctlchan::{Channel, Role};
use netio::{bind_udp, BufferRequest};
use transfer::{Receiver, ReceiverConfig, ReceiverState, SessionParams};

use crate::blocks::{from_ranges, to_ranges, Geometry, ResumeState, Selection, RESUME_STATE_VERSION};
use crate::control::{clip, data_key, session_key, Msg, Offer, CLIENT_LABEL, MAX_LINE, SERVER_LABEL};
use crate::fileio::PartSink;
use crate::hashing::{compare, verify as verify_copy, IncrementalDigest};
use crate::paths::{Dir, Root};
use crate::udp::{drive_receiver, Tick};
use crate::{nonce, unexpected, SessionError};
use netio::{error_chain, io_err};
use transfer::results::FileRecvReport;
use transfer::results::ForeignCounters;

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
    /// Replace files that already exist below the root (otherwise such an offer is refused).
    pub overwrite: bool,
    /// Connections at once, the handshake deadline, sessions at once.
    pub limits: Limits,
    /// A round ends in failure after this long without a valid datagram from the sender.
    pub data_idle_timeout: Duration,
}

impl ServerConfig {
    /// Defaults: no key, 3 rounds, 32 MiB receive buffer, no overwriting, [`Limits::default`]
    /// (10 s to authenticate, 64 connections in their handshake, 16 sessions), 60 s of silence
    /// ends a round.
    pub fn new(listen: SocketAddr, root: PathBuf) -> Self {
        ServerConfig {
            listen,
            root,
            key: None,
            max_rounds: 3,
            rcvbuf: 32 << 20,
            overwrite: false,
            limits: Limits::default(),
            data_idle_timeout: Duration::from_secs(60),
        }
    }
}

/// What the server reports as it works.
#[derive(Debug, Clone)]
pub enum ServerEvent {
    /// A sender connected and authenticated.
    Connected(SocketAddr),
    /// A connection ended before it authenticated (bad or no key, silence past the handshake
    /// deadline, a protocol error, or the server was busy).
    Rejected(SocketAddr, String),
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
    root: Root,
    /// Paths being received right now: a second session offering one is refused.
    busy: Mutex<HashSet<String>>,
}

/// Holds a path in [`Server::busy`] while its file is received.
struct Claim<'a> {
    busy: &'a Mutex<HashSet<String>>,
    path: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.path);
    }
}

impl Server {
    /// Bind the control port and open the root.
    pub fn bind(cfg: ServerConfig) -> Result<Server, SessionError> {
        let root = Root::open(&cfg.root)
            .map_err(|_| SessionError::Usage(format!("--root {} is not a directory", cfg.root.display())))?;
        let listener = TcpListener::bind(cfg.listen).map_err(io_err(format!("binding TCP {}", cfg.listen)))?;
        Ok(Server {
            listener,
            cfg,
            root,
            busy: Mutex::new(HashSet::new()),
        })
    }

    /// The bound control address.
    pub fn local_addr(&self) -> Result<SocketAddr, SessionError> {
        Ok(self.listener.local_addr().map_err(io_err("local address"))?)
    }

    /// Serve senders, each connection on its own thread ([`ctlchan::serve`]), until `stop` —
    /// or, with `once`, until one authenticated session has ended (a connection that never
    /// authenticates does not count).
    pub fn serve(
        &self,
        stop: &AtomicBool,
        once: bool,
        on: &mut dyn FnMut(ServerEvent),
    ) -> Result<ServeStats, SessionError> {
        let handler =
            |stream: TcpStream, peer: SocketAddr, ticket: &Ticket<'_>, tx: &std::sync::mpsc::Sender<ServerEvent>| {
                let emit = |e: ServerEvent| {
                    let _ = tx.send(e);
                };
                self.connection(stream, peer, ticket, stop, &emit);
            };
        ctlchan::serve::serve(&self.listener, stop, &self.cfg.limits, once.then_some(1), &handler, on)
            .map_err(|e| io_err("accepting connections")(e).into())
    }

    fn connection(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        ticket: &Ticket<'_>,
        stop: &AtomicBool,
        on: &dyn Fn(ServerEvent),
    ) {
        let local_ip = match stream.local_addr() {
            Ok(a) => a.ip(),
            Err(e) => return on(ServerEvent::Rejected(peer, e.to_string())),
        };
        let mut ch = Channel::<Msg>::new(stream, MAX_LINE);
        let key = match self.handshake(&mut ch, ticket) {
            Ok(k) => k,
            Err(e) => return on(ServerEvent::Rejected(peer, error_chain(&fatal(&mut ch, e)))),
        };
        if let Err(e) = ticket.authenticated() {
            let e = SessionError::Peer(e.to_string());
            return on(ServerEvent::Rejected(peer, error_chain(&fatal(&mut ch, e))));
        }
        on(ServerEvent::Connected(peer));
        let r = self
            .session(&mut ch, &key, local_ip, peer, stop, on)
            .map_err(|e| match e {
                // A line that failed to parse or authenticate: say why before hanging up (the
                // other errors were told to the sender where they happened).
                SessionError::Control(_) => fatal(&mut ch, e),
                e => e,
            });
        on(ServerEvent::Ended(peer, r.err().map(|e| error_chain(&e))));
    }

    fn session(
        &self,
        ch: &mut Channel<Msg>,
        key: &[u8; 32],
        local_ip: std::net::IpAddr,
        peer: SocketAddr,
        stop: &AtomicBool,
        on: &dyn Fn(ServerEvent),
    ) -> Result<(), SessionError> {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(SessionError::Interrupted);
            }
            match ch.recv(IDLE)? {
                Msg::Bye => return Ok(()),
                Msg::Mkdir { path } => match self.root.make_dirs(&path) {
                    Ok(_) => {
                        ch.send(&Msg::Done { path: path.clone() })?;
                        on(ServerEvent::Directory(path));
                    }
                    Err(e) => ch.send(&Msg::Refused {
                        message: clip(&e.to_string()),
                    })?,
                },
                Msg::Offer(o) => {
                    let rep = self.receive_file(ch, key, local_ip, peer, o, stop, on)?;
                    on(ServerEvent::File(rep));
                }
                m => {
                    let e = unexpected(&m, "offer, mkdir or bye");
                    return Err(fatal(ch, e));
                }
            }
        }
    }

    /// Challenge, check the sender's proof, prove ourselves, agree on the session key, and from
    /// then on authenticate every line. All within the connection's handshake deadline.
    fn handshake(&self, ch: &mut Channel<Msg>, ticket: &Ticket<'_>) -> Result<[u8; 32], SessionError> {
        let cn = match ch.recv(ticket.remaining())? {
            Msg::Hello { client_nonce, .. } => client_nonce,
            m => return Err(unexpected(&m, "hello")),
        };
        let sn = nonce();
        let key = self.cfg.key.as_deref();
        ch.send(&Msg::Challenge {
            server_nonce: sn.clone(),
            key_required: key.is_some(),
        })?;
        let proof = match ch.recv(ticket.remaining())? {
            Msg::Auth { proof } => proof,
            m => return Err(unexpected(&m, "auth")),
        };
        let (proof, sent, sk) = match key {
            // No pre-shared key: a random session key, sent in the clear (see control.rs for
            // what that does and does not protect).
            None => {
                let mut sk = [0u8; 32];
                rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut sk);
                (None, Some(hex_encode(&sk)), sk)
            }
            Some(k) => {
                let p = proof.ok_or_else(|| SessionError::Auth("the sender has no key".into()))?;
                verify(k, &[CLIENT_LABEL, sn.as_bytes(), cn.as_bytes()], &p)
                    .map_err(|_| SessionError::Auth("the sender's key proof does not match".into()))?;
                let auth = |e: ctlchan::mac::MacError| SessionError::Auth(e.to_string());
                let ours = prove(k, &[SERVER_LABEL, cn.as_bytes(), sn.as_bytes()]).map_err(auth)?;
                (Some(ours), None, session_key(k, &cn, &sn).map_err(auth)?)
            }
        };
        ch.send(&Msg::Welcome {
            proof,
            session_key: sent,
        })?;
        ch.authenticate(sk, Role::Server);
        Ok(sk)
    }

    /// Mark `path` as being received; `None` if another session is receiving it.
    fn claim(&self, path: &str) -> Option<Claim<'_>> {
        let mut b = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        b.insert(path.to_string()).then(|| Claim {
            busy: &self.busy,
            path: path.to_string(),
        })
    }

    /// Where file `o.path` goes: its directory (created as needed) and name, checked against
    /// what is there; `Err` with the reason to refuse it.
    fn place(&self, o: &Offer) -> Result<(Dir, String), String> {
        let (dir, name) = self.root.parent_of(&o.path).map_err(|e| e.to_string())?;
        match dir.kind(name).map_err(|e| e.to_string())? {
            None => {}
            Some(_) if !self.cfg.overwrite => {
                return Err(format!(
                    "{} exists below the receiver's root (start the receiver with --overwrite to replace files)",
                    o.path
                ))
            }
            Some(rustix::fs::FileType::RegularFile) => {}
            Some(_) => return Err(format!("{} exists and is not a regular file", o.path)),
        }
        Ok((dir, name.to_string()))
    }

    /// Receive one offered file: rounds of UDP data until every block verifies against the
    /// sender's hashes (then the copy is synced and renamed into place), the rounds run out, or
    /// something fails. A refusal is a report with `error` set; `Err` ends the session.
    #[allow(clippy::too_many_arguments)]
    fn receive_file(
        &self,
        ch: &mut Channel<Msg>,
        key: &[u8; 32],
        local_ip: std::net::IpAddr,
        peer: SocketAddr,
        o: Offer,
        stop: &AtomicBool,
        on: &dyn Fn(ServerEvent),
    ) -> Result<FileRecvReport, SessionError> {
        let started = Instant::now();
        let mut rep = FileRecvReport {
            path: o.path.clone(),
            size: o.size,
            ..FileRecvReport::default()
        };
        let opened = match self.claim(&o.path) {
            None => Err(format!("{} is being received by another session", o.path)),
            Some(claim) => self
                .place(&o)
                .and_then(|(dir, name)| Reception::open(dir, name, &o))
                .map(|r| (claim, r)),
        };
        let (_claim, mut rx) = match opened {
            Ok(x) => x,
            Err(msg) => {
                let msg = clip(&msg);
                ch.send(&Msg::Refused { message: msg.clone() })?;
                rep.error = Some(msg);
                return Ok(rep);
            }
        };
        for round in 1..=self.cfg.max_rounds {
            rep.rounds = round;
            let net = NetSide {
                key,
                local_ip,
                peer,
                stop,
                on,
            };
            self.receive_round(ch, &net, &o, round, &mut rx, &mut rep)?;
            let v = rx.verify(ch)?;
            if v.bad.is_empty() && Some(v.file) == rx.file_hash {
                rx.commit(&o, self.cfg.overwrite)?;
                rep.verified = true;
                rep.blake3 = Some(hex_encode(&v.file));
                rep.elapsed_s = started.elapsed().as_secs_f64();
                rep.resumed_bytes = rx.g.len_of(rx.held_before.iter().copied());
                ch.send(&Msg::Verified {
                    path: o.path.clone(),
                    blake3: hex_encode(&v.file),
                })?;
                return Ok(rep);
            }
            rep.bad_blocks += v.bad.len() as u64;
            rx.forget(&v.bad)?;
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

    /// One round: a fresh UDP port and session id, the blocks still missing sent as one virtual
    /// file, until the sender's `file_hash` ends the round (block hashes arrive meanwhile).
    fn receive_round(
        &self,
        ch: &mut Channel<Msg>,
        net: &NetSide<'_>,
        o: &Offer,
        round: u32,
        rx: &mut Reception,
        rep: &mut FileRecvReport,
    ) -> Result<(), SessionError> {
        let selection = Selection::missing(rx.g, &to_ranges(rx.have.iter().copied()));
        let (sock, _grant) = bind_udp(SocketAddr::new(net.local_ip, 0), BufferRequest::new(self.cfg.rcvbuf, 0))
            .map_err(|e| io_err("binding UDP")(std::io::Error::other(e)))?;
        // Kernel receive stamps for the one-way delay; on before the sender hears the port,
        // because the first socket on a host to ask turns stamping on through deferred work.
        netio::enable_rx_timestamps(&sock).map_err(io_err("SO_TIMESTAMPNS"))?;
        let port = sock.local_addr().map_err(io_err("UDP socket"))?.port();
        let session_id: u64 = rand::random();
        ch.send(&Msg::Accept {
            udp_port: port,
            session_id,
            have: to_ranges(rx.have.iter().copied()),
        })?;
        (net.on)(ServerEvent::Round {
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
        // The sink writes through its own descriptor of the copy, so the loop below may update
        // the reception's bookkeeping while the receiver holds the sink.
        let part = rx
            .part
            .try_clone()
            .map_err(io_err(format!("writing {}", rx.part_path.display())))?;
        let sink = PartSink::new(&part, selection, o.chunk_size, o.block_size);
        let mut rcfg = ReceiverConfig::new(params);
        rcfg.data_key = Some(data_key(net.key, session_id));
        rcfg.idle_timeout = self.cfg.data_idle_timeout;
        let mut receiver = Receiver::new(rcfg, sink, Instant::now()).map_err(|e| SessionError::Usage(e.to_string()))?;
        let mut failure: Option<SessionError> = None;
        let mut round_over = false;
        let mut last_save = Instant::now();
        let mut foreign = ForeignCounters::default();
        drive_receiver(&sock, &mut receiver, net.peer.ip(), &mut foreign, &mut |r| {
            let done = r.sink_mut().take_completed();
            let fresh = !done.is_empty();
            if let Some(inc) = &rx.incremental {
                done.iter().for_each(|&b| inc.completed(b));
            }
            rx.have.extend(done);
            if let Some(e) = r.sink_mut().last_error.take() {
                // Disk full or a failing disk: stop, keep what is on disk resumable.
                failure = Some(io_err(format!("writing {}", rx.part_path.display()))(e).into());
            }
            if fresh && last_save.elapsed() >= SAVE_EVERY {
                let _ = rx.save();
                last_save = Instant::now();
            }
            if r.state() == ReceiverState::TimedOut {
                failure = Some(SessionError::Peer(format!(
                    "no valid datagram from the sender for {:?}",
                    self.cfg.data_idle_timeout
                )));
            }
            match ch.try_recv() {
                Ok(None) => {}
                Ok(Some(Msg::Hashes { first_block, hashes })) => {
                    if first_block != rx.expected.len() as u64
                        || rx.expected.len() + hashes.len() > rx.g.blocks() as usize
                    {
                        failure = Some(SessionError::Peer("block hashes out of order or too many".into()));
                    }
                    rx.expected.extend(hashes.iter().filter_map(|h| hex32(h)));
                }
                Ok(Some(Msg::FileHash { blake3 })) => {
                    rx.file_hash = hex32(&blake3);
                    round_over = true;
                }
                Ok(Some(m)) => failure = Some(unexpected(&m, "hashes or file_hash")),
                Err(e) => failure = Some(e.into()),
            }
            if round_over || failure.is_some() || net.stop.load(Ordering::Relaxed) {
                Tick::Abort
            } else {
                Tick::Continue
            }
        })
        .map_err(io_err("receiving UDP"))?;
        rx.have.extend(receiver.sink_mut().take_completed());
        let st = receiver.stats();
        rep.datagrams_received += st.datagrams_received;
        rep.duplicate_datagrams += st.duplicate_datagrams;
        rep.rejected += st.rejected.total();
        rep.foreign.other_host += foreign.other_host;
        rep.foreign.other_port += foreign.other_port;
        rep.foreign.oversized += foreign.oversized;
        let saved = rx.save();
        if let Some(e) = failure {
            // Tell the sender even if saving the record failed too (disk full): the previous
            // record then stays, listing fewer blocks — still correct.
            return Err(fatal(ch, e));
        }
        saved?;
        if !round_over {
            return Err(SessionError::Interrupted);
        }
        if !receiver.is_complete() {
            let e = SessionError::Peer("the sender ended the round before every block arrived".into());
            return Err(fatal(ch, e));
        }
        Ok(())
    }
}

/// What a round needs of the connection it serves.
struct NetSide<'a> {
    key: &'a [u8; 32],
    local_ip: std::net::IpAddr,
    peer: SocketAddr,
    stop: &'a AtomicBool,
    on: &'a dyn Fn(ServerEvent),
}

/// One offered file being received: where its copy grows (`NAME.part` beside `NAME.part.evlbi`,
/// the resume record, in a directory held open below the root), which blocks it holds, and what
/// the sender promised them to hash to.
struct Reception {
    dir: Dir,
    name: String,
    part_name: String,
    state_name: String,
    part_path: PathBuf,
    part: File,
    state: ResumeState,
    g: Geometry,
    have: BTreeSet<u64>,
    /// Blocks held from an earlier attempt: they count as resumed once they verify.
    held_before: BTreeSet<u64>,
    expected: Vec<[u8; 32]>,
    /// The first round hashes blocks as they complete; later rounds (rare: a block failed
    /// verification) hash the whole copy again.
    incremental: Option<IncrementalDigest>,
    file_hash: Option<[u8; 32]>,
}

impl Reception {
    /// Open (or resume) the copy of `o` as `name` in `dir`; `Err` is the refusal to send.
    fn open(dir: Dir, name: String, o: &Offer) -> Result<Reception, String> {
        let part_name = format!("{name}.part");
        let state_name = format!("{name}.part.evlbi");
        let part_path = dir.display(&part_name);
        let (part, state) =
            open_part(&dir, &part_name, &state_name, o).map_err(|e| format!("{}: {e}", part_path.display()))?;
        let g = Geometry {
            size: o.size,
            block_size: o.block_size,
        };
        let have: BTreeSet<u64> = from_ranges(&state.have).filter(|&b| b < g.blocks()).collect();
        let reader = part
            .try_clone()
            .map_err(|e| format!("reading {}: {e}", part_path.display()))?;
        let incremental = Some(IncrementalDigest::start(reader, g, have.iter().copied()));
        Ok(Reception {
            held_before: have.clone(),
            dir,
            name,
            part_name,
            state_name,
            part_path,
            part,
            state,
            g,
            have,
            expected: Vec::new(),
            incremental,
            file_hash: None,
        })
    }

    /// Write the resume record: the blocks held now.
    fn save(&mut self) -> Result<(), SessionError> {
        self.state.have = to_ranges(self.have.iter().copied());
        let what = format!("writing {}", self.dir.display(&self.state_name).display());
        Ok(self.state.save(&self.dir, &self.state_name).map_err(io_err(what))?)
    }

    /// Hash the copy (or finish the incremental hash) and compare with the sender's hashes.
    fn verify(&mut self, ch: &mut Channel<Msg>) -> Result<crate::hashing::Verification, SessionError> {
        if self.expected.len() as u64 != self.g.blocks() {
            let e = SessionError::Peer(format!(
                "{} block hashes for {} blocks",
                self.expected.len(),
                self.g.blocks()
            ));
            return Err(fatal(ch, e));
        }
        match self.incremental.take() {
            Some(inc) => inc.finish().map(|d| compare(d, self.g, &self.expected)),
            None => verify_copy(&self.part, self.g, &self.expected),
        }
        .map_err(|e| io_err(format!("reading {}", self.part_path.display()))(e).into())
    }

    /// The copy verified: make it durable and give it its name.
    fn commit(&self, o: &Offer, overwrite: bool) -> Result<(), SessionError> {
        // Durable before the sender hears "verified" (it may delete its copy then).
        self.part
            .sync_all()
            .map_err(io_err(format!("syncing {}", self.part_path.display())))?;
        // renameat in the held directory: replaces the entry, never writes through it;
        // without --overwrite a file that appeared meanwhile is not replaced either.
        self.dir
            .rename(&self.part_name, &self.name, overwrite)
            .map_err(io_err(format!(
                "renaming to {}",
                self.dir.display(&self.name).display()
            )))?;
        let _ = self.dir.remove(&self.state_name);
        set_mtime(&self.part, o.mtime_ns);
        Ok(())
    }

    /// Blocks that failed verification are not held any more: they go again next round.
    fn forget(&mut self, bad: &[u64]) -> Result<(), SessionError> {
        for b in bad {
            self.have.remove(b);
            self.held_before.remove(b);
        }
        self.save()
    }
}

/// Tell the sender why the session ends (best effort: the connection may be gone) and hand the
/// error back for the caller to return.
fn fatal(ch: &mut Channel<Msg>, e: SessionError) -> SessionError {
    let _ = ch.send(&Msg::Error {
        message: clip(&error_chain(&e)),
    });
    e
}

/// Open (or create) the `.part` file and its resume record in `dir` (never through a link, never
/// a file with other links). An existing record is used only when it describes the same source
/// file (size, mtime, block size) and the `.part` has that size.
fn open_part(dir: &Dir, part_name: &str, state_name: &str, o: &Offer) -> Result<(File, ResumeState), String> {
    let part = dir.open_rw(part_name).map_err(|e| e.to_string())?;
    let len = part.metadata().map_err(|e| e.to_string())?.len();
    let resumable = ResumeState::load(dir, state_name)
        .filter(|s| s.size == o.size && s.mtime_ns == o.mtime_ns && s.block_size == o.block_size && len == o.size);
    let state = match resumable {
        Some(s) => s,
        None => {
            // Start over: drop stale content, keep a sparse file of the final size.
            part.set_len(0).map_err(|e| e.to_string())?;
            part.set_len(o.size).map_err(|e| e.to_string())?;
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
    state.save(dir, state_name).map_err(|e| e.to_string())?;
    Ok((part, state))
}

/// Give the received file the source's modification time (as `cp -p`, `rsync -t`); best effort.
fn set_mtime(f: &File, mtime_ns: u64) {
    let _ = f.set_modified(UNIX_EPOCH + Duration::from_nanos(mtime_ns));
}

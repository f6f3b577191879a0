//! The receiving side (`evlbi recv`): authenticate the sender, then serve its session — files
//! placed safely below the root, one data stream for all of them, verdicts as files complete
//! ([`crate::recv_session`]).

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ctlchan::handshake::{Fresh, HandshakeError, ServerHandshake, ServerStep};
use ctlchan::serve::{Limits, ServeStats, Ticket};
use ctlchan::{Channel, Role};
use transfer::results::{FileRecvReport, StreamRecvReport};

use crate::control::{clip, Msg, DIALECT, MAX_LINE};
use crate::error::{TransferSessionError, UsageError};
use crate::paths::Root;
use netio::{error_chain, io_err};

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
    /// The data stream fails after this long without a valid datagram while blocks are missing.
    pub data_idle_timeout: Duration,
}

impl ServerConfig {
    /// Defaults: no key, 3 rounds, 32 MiB receive buffer, no overwriting, [`Limits::default`]
    /// (10 s to authenticate, 64 connections in their handshake, 16 sessions), 60 s of silence
    /// ends a stream.
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
    /// The session's data stream listens on this UDP port.
    DataPort(SocketAddr, u16),
    /// A file finished (verified or not).
    File(FileRecvReport),
    /// A directory was created.
    Directory(String),
    /// The session's data stream, at its end.
    Stream(SocketAddr, StreamRecvReport),
    /// The session ended; `Some` why if it failed.
    Ended(SocketAddr, Option<String>),
}

/// A bound receiver.
pub struct Server {
    listener: TcpListener,
    pub(crate) cfg: ServerConfig,
    pub(crate) root: Root,
    /// Paths being received right now: a second session offering one is refused.
    busy: Mutex<HashSet<String>>,
}

/// Holds a path in [`Server::busy`] while its file is received.
pub(crate) struct Claim<'a> {
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
    pub fn bind(cfg: ServerConfig) -> Result<Server, TransferSessionError> {
        // A session holds a few descriptors per file in flight (up to 128 files a session, 16
        // sessions), more than the usual soft limit of 1024.
        netio::raise_fd_limit();
        let root = Root::open(&cfg.root).map_err(|_| UsageError::RootNotADirectory(cfg.root.clone()))?;
        let listener = TcpListener::bind(cfg.listen).map_err(io_err(format!("binding TCP {}", cfg.listen)))?;
        Ok(Server {
            listener,
            cfg,
            root,
            busy: Mutex::new(HashSet::new()),
        })
    }

    /// The bound control address.
    pub fn local_addr(&self) -> Result<SocketAddr, TransferSessionError> {
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
    ) -> Result<ServeStats, TransferSessionError> {
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
            let e = TransferSessionError::NotAdmitted(e);
            return on(ServerEvent::Rejected(peer, error_chain(&fatal(&mut ch, e))));
        }
        on(ServerEvent::Connected(peer));
        let net = crate::recv_session::Net {
            key: &key,
            local_ip,
            peer,
            stop,
            on,
        };
        let r = crate::recv_session::run(self, &mut ch, &net).map_err(|e| match e {
            // A line that failed to parse or authenticate: say why before hanging up (the
            // other errors were told to the sender where they happened).
            TransferSessionError::Control(_) => fatal(&mut ch, e),
            e => e,
        });
        on(ServerEvent::Ended(peer, r.err().map(|e| error_chain(&e))));
    }

    /// The key handshake ([`ctlchan::handshake`] in the transfer's [`DIALECT`]) within the
    /// connection's handshake deadline: challenge, check the sender's proof (or take its session
    /// key when there is no pre-shared key), and from then on authenticate every line. The first
    /// authenticated line, `welcome`, is our proof.
    fn handshake(&self, ch: &mut Channel<Msg>, ticket: &Ticket<'_>) -> Result<[u8; 32], TransferSessionError> {
        let mut hs = ServerHandshake::new(DIALECT, self.cfg.key.clone(), Fresh::draw(), ticket.deadline());
        // Each round either moves the handshake on or fails it for good, and waits until the
        // deadline.
        loop {
            let msg = ch.recv(hs.remaining(Instant::now()))?;
            match hs.handle(msg, Instant::now())? {
                ServerStep::Send(m) => ch.send(&m)?,
                ServerStep::Accepted {
                    session_key: Some(sk), ..
                } => {
                    ch.authenticate(sk, Role::Server);
                    return Ok(sk);
                }
                // This dialect always ends with a session key (derived, or the sender's).
                ServerStep::Accepted { session_key: None, .. } => {
                    return Err(HandshakeError::PeerNotAuthenticated.into())
                }
            }
        }
    }

    /// Mark `path` as being received; `None` if another session is receiving it.
    pub(crate) fn claim(&self, path: &str) -> Option<Claim<'_>> {
        let mut b = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        b.insert(path.to_string()).then(|| Claim {
            busy: &self.busy,
            path: path.to_string(),
        })
    }
}

/// Tell the sender why the session ends (best effort: the connection may be gone) and hand the
/// error back for the caller to return.
pub(crate) fn fatal(ch: &mut Channel<Msg>, e: TransferSessionError) -> TransferSessionError {
    let _ = ch.send(&Msg::Error {
        message: clip(&error_chain(&e)),
    });
    e
}

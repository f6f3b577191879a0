//! What a receiver's sessions share: its settings, the events it reports, and the paths being
//! received right now (a second session offering one is refused).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use ctlchan::serve::Limits;
use transfer::results::{FileRecvReport, StreamRecvReport};

use crate::paths::Root;

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
    /// The session's data stream listens on this UDP port (the control port's number).
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

/// The settings, the root and the paths in progress, shared by a receiver's sessions.
pub(crate) struct Receiving {
    pub(crate) cfg: ServerConfig,
    pub(crate) root: Root,
    /// The UDP socket on the control port's number: datagrams that come before their session.
    pub(crate) data_listener: std::net::UdpSocket,
    /// What came on it, for the sessions to take ([`crate::early`]).
    pub(crate) pen: Mutex<crate::early::EarlyPen>,
    /// First flights seen ([`crate::first_flight`]).
    pub(crate) guard: Mutex<crate::first_flight::ReplayGuard>,
    /// Paths being received right now: a second session offering one is refused.
    busy: Mutex<HashSet<String>>,
}

impl Receiving {
    pub(crate) fn new(cfg: ServerConfig, root: Root, data_listener: std::net::UdpSocket) -> Self {
        Receiving {
            cfg,
            root,
            data_listener,
            pen: Mutex::new(crate::early::EarlyPen::default()),
            guard: Mutex::new(crate::first_flight::ReplayGuard::default()),
            busy: Mutex::new(HashSet::new()),
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

/// Holds a path in [`Receiving::busy`] while its file is received.
pub(crate) struct Claim<'a> {
    busy: &'a Mutex<HashSet<String>>,
    path: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.path);
    }
}

//! SFXC's live input: a correlator input node opens `mk5://[host[:port]]/[sockpath]/VSN:offset`
//! (SFXC's `data_reader_mk5.cc`), connects to a unix socket (or TCP), writes a 24-byte request
//! (VSN in 9 bytes, 7 bytes of padding, the offset as a little-endian u64) and reads raw frames
//! until EOF. jive5ab serves it with `net2sfxc = open : SOCK` (its `sfxcwriter`: one reader, the
//! request read and ignored). [`SfxcListener`] serves the same: the request is read (within
//! [`REQUEST_TIMEOUT`], else the connection is closed and counted) and, a live stream having no
//! offset, otherwise ignored; one reader at a time — a second one while a reader is connected is
//! closed at once and counted (jive5ab closes its listening socket after the first: a second
//! reader, or the first reconnecting, is refused); a reader that went away may connect again.
//!
//! The socket is made in a directory the operator allowed, opened by descriptor (the caller's
//! [`safedir::Dir`]): nothing on the way is followed through a link. A socket left at the name by
//! an earlier run (nobody listening) is replaced; anything else there — a live socket, a file, a
//! link — is refused and left as it is (jive5ab unlinks whatever is at the path).

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use super::{add, Connector, LiveConn, LiveCounts};

/// SFXC's request: VSN (9 bytes), padding (7), offset (LE u64).
pub const REQUEST_LEN: usize = 24;
/// Time a connection has to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the listener looks for a reader (and at the stop flag) while none is connected.
const ACCEPT_POLL: Duration = Duration::from_millis(20);

/// Where SFXC connects.
#[derive(Debug, Clone)]
pub enum SfxcAddr {
    /// A unix socket `name` in `dir` (opened below the allowed directories).
    Unix {
        /// The directory, opened by descriptor.
        dir: Arc<safedir::Dir>,
        /// The socket's name in it.
        name: String,
    },
    /// A TCP port (`mk5://host:port/...`).
    Tcp(SocketAddr),
}

impl SfxcAddr {
    /// A unix socket at `path`, an operator's (its directory is opened once, following a link
    /// the operator's path may hold; the socket is made in it by descriptor).
    pub fn unix_path(path: &std::path::Path) -> Result<SfxcAddr, SfxcError> {
        let shown = path.display().to_string();
        let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(d), Some(n)) if !d.as_os_str().is_empty() => (d, n),
            (_, Some(n)) => (std::path::Path::new("."), n),
            _ => return Err(SfxcError::NotASocket(shown)),
        };
        let dir = safedir::Dir::open(dir).map_err(|e| SfxcError::Io {
            what: "open the directory of",
            endpoint: shown,
            source: e.into_io(),
        })?;
        Ok(SfxcAddr::Unix {
            dir: Arc::new(dir),
            name: name.to_string(),
        })
    }

    /// `unix:/path` or `tcp:ADDRESS:PORT`.
    pub fn endpoint(&self) -> String {
        match self {
            SfxcAddr::Unix { dir, name } => format!("unix:{}", dir.display(name).display()),
            SfxcAddr::Tcp(a) => format!("tcp:{a}"),
        }
    }
}

/// Why the socket cannot be served.
#[derive(Debug, Error)]
pub enum SfxcError {
    /// A reader is listening there already (another evlbi or jive5ab).
    #[error("{0}: a socket in use (something listens there)")]
    InUse(String),
    /// Something that is not a socket is at the name: never removed.
    #[error("{0}: exists and is not a socket (a file, directory or link is never replaced)")]
    NotASocket(String),
    /// The socket could not be made or bound.
    #[error("{what} {endpoint}: {source}")]
    Io {
        /// What failed.
        what: &'static str,
        /// Where.
        endpoint: String,
        /// The OS error.
        source: std::io::Error,
    },
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// A listening socket SFXC's `mk5://` reader connects to (see the module docs).
pub struct SfxcListener {
    addr: SfxcAddr,
    listener: Listener,
}

impl SfxcListener {
    /// Listen at `addr`.
    pub fn bind(addr: SfxcAddr) -> Result<SfxcListener, SfxcError> {
        let endpoint = addr.endpoint();
        let io = |what: &'static str| {
            let endpoint = endpoint.clone();
            move |source| SfxcError::Io { what, endpoint, source }
        };
        let listener = match &addr {
            SfxcAddr::Unix { dir, name } => {
                let shown = dir.display(name).display().to_string();
                match dir.kind(name).map_err(|e| io("look at")(e.into_io()))? {
                    None => {}
                    Some(safedir::EntryKind::Socket) => match dir.connect_unix(name) {
                        Ok(_) => return Err(SfxcError::InUse(shown)),
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                            dir.remove(name).map_err(io("remove the stale socket"))?;
                        }
                        Err(e) => return Err(io("look at")(e)),
                    },
                    Some(_) => return Err(SfxcError::NotASocket(shown)),
                }
                let l = dir.bind_unix(name).map_err(io("bind"))?;
                l.set_nonblocking(true).map_err(io("set non-blocking"))?;
                Listener::Unix(l)
            }
            SfxcAddr::Tcp(a) => {
                let l = TcpListener::bind(a).map_err(io("bind"))?;
                l.set_nonblocking(true).map_err(io("set non-blocking"))?;
                Listener::Tcp(l)
            }
        };
        Ok(SfxcListener { addr, listener })
    }

    /// The TCP address bound (port 0 picks one), if TCP.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match &self.listener {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(_) => None,
        }
    }

    /// A connection waiting, if any (non-blocking).
    fn accept(&self) -> std::io::Result<Option<LiveConn>> {
        let r = match &self.listener {
            Listener::Unix(l) => l.accept().map(|(s, _)| LiveConn::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| LiveConn::Tcp(s)),
        };
        match r {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Read SFXC's request (blocking, bounded by [`REQUEST_TIMEOUT`]).
fn read_request(conn: &mut LiveConn) -> std::io::Result<[u8; REQUEST_LEN]> {
    let mut req = [0u8; REQUEST_LEN];
    match conn {
        LiveConn::Unix(s) => {
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
            s.read_exact(&mut req)?;
        }
        LiveConn::Tcp(s) => {
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
            s.read_exact(&mut req)?;
        }
    }
    Ok(req)
}

impl Connector for SfxcListener {
    fn endpoint(&self) -> String {
        self.addr.endpoint()
    }

    fn next_reader(&mut self, stop: &AtomicBool, counts: &LiveCounts) -> Option<LiveConn> {
        while !stop.load(Ordering::Relaxed) {
            match self.accept() {
                Ok(Some(mut c)) => match read_request(&mut c) {
                    Ok(_) => return Some(c),
                    Err(_) => add(&counts.bad_requests, 1),
                },
                Ok(None) => std::thread::sleep(ACCEPT_POLL),
                // A connection that failed before it was accepted (reset): the next one.
                Err(_) => std::thread::sleep(ACCEPT_POLL),
            }
        }
        None
    }

    fn while_connected(&mut self, counts: &LiveCounts) {
        // One reader at a time: others are closed at once (they read EOF).
        while let Ok(Some(c)) = self.accept() {
            add(&counts.clients_refused, 1);
            drop(c);
        }
    }
}

impl Drop for SfxcListener {
    fn drop(&mut self) {
        // Our socket only: a name that is no longer a socket was replaced by someone else.
        if let SfxcAddr::Unix { dir, name } = &self.addr {
            if matches!(dir.kind(name), Ok(Some(safedir::EntryKind::Socket))) {
                let _ = dir.remove(name);
            }
        }
    }
}

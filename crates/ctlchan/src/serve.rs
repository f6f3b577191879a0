//! Serving control connections concurrently.
//!
//! A server that handles one connection at a time is stopped by one peer that connects and says
//! nothing. [`serve`] keeps every connection that has not sent a byte yet as a descriptor only
//! (no thread; the loop watches them with epoll), starts a handler thread when its first byte
//! arrives, and gives every connection a deadline from its accept to authenticate
//! ([`Limits::handshake_timeout`]). Silent connections are capped by [`Limits::max_idle`] (and
//! by the descriptor limit), those that spoke but have not authenticated by
//! [`Limits::max_pending`]; at either cap the oldest connection of the peer holding the most is
//! closed for a new one ([`crate::admission`] says why), so a flood of idle connections never
//! closes a client that speaks within its first seconds, and never one of another peer.
//! Authenticated sessions are capped separately ([`Limits::max_active`]); one over that cap is
//! told the server is busy. Only sessions that authenticated and then ended count towards
//! `max_sessions` (`--once`): a connect-and-close spends nothing.

use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::admission::{ByPeer, PeerKey};

/// What a server lets connections do before and after they authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections that spoke but have not authenticated yet (each has a thread), at most; the
    /// oldest of the peer holding the most is closed for a new one.
    pub max_pending: usize,
    /// Time a connection has from its accept to authenticate.
    pub handshake_timeout: Duration,
    /// Authenticated sessions running at once; one more is refused as busy.
    pub max_active: usize,
    /// Connections that have not sent a byte yet, at most (also at most an eighth of the
    /// descriptor limit); the oldest of the peer holding the most is closed for a new one.
    pub max_idle: usize,
}

impl Default for Limits {
    /// 64 pending connections, 10 s to authenticate, 16 sessions at once, 4096 idle.
    fn default() -> Self {
        Limits {
            max_pending: 64,
            handshake_timeout: Duration::from_secs(10),
            max_active: 16,
            max_idle: DEFAULT_MAX_IDLE,
        }
    }
}

/// Idle connections a server holds by default: a client thinking 100 ms survives a flood of 40 000
/// connections a second from its own address (any flood from another).
pub const DEFAULT_MAX_IDLE: usize = 4096;

/// The share of the descriptor limit one server's idle connections may take: `evlbi serve` runs
/// four accept loops (VSI-S, metrics, probe, transfer) in one process beside its recording, and
/// a flood of all four at once must leave half the descriptors free.
const IDLE_SHARE_OF_FD_LIMIT: u64 = 8;

/// What the accept loop saw, for the server's summary. Once the loop has returned, every
/// accepted connection is in exactly one of `sessions`, `unauthenticated`, `evicted`,
/// `timed_out` and `busy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServeStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Authenticated sessions that ended.
    pub sessions: u64,
    /// Connections that ended without authenticating (closed, failed or refused handshake, or
    /// a peer the server does not talk to, closed at accept).
    pub unauthenticated: u64,
    /// Waiting connections closed to make room for a newer one.
    pub evicted: u64,
    /// Waiting connections closed at their handshake deadline.
    pub timed_out: u64,
    /// Authenticated connections refused because `max_active` sessions were running.
    pub busy: u64,
    /// Connections whose handler panicked (a bug; each is also counted in one of the above).
    #[serde(default)]
    pub panicked: u64,
}

/// Why [`Ticket::authenticated`] did not admit a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NotAdmitted {
    /// `max_active` sessions are running: tell the peer to try later.
    #[error("the server is busy: {0} sessions are running, try again later")]
    Busy(usize),
    /// The connection was closed meanwhile (its deadline passed or it was evicted).
    #[error("the handshake took too long")]
    Closed,
}

/// A connection that spoke, on its handler's thread, not yet authenticated: a clone of its
/// socket to close it at its deadline or for a newer one.
struct Pending {
    stream: TcpStream,
    deadline: Instant,
}

/// A connection that has not sent a byte yet, held by the accept loop alone.
struct Idle {
    stream: TcpStream,
    peer: SocketAddr,
    deadline: Instant,
}

#[derive(Default)]
struct State {
    pending: ByPeer<Pending>,
    active: usize,
    live: usize,
    stats: ServeStats,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A handler that panicked while holding the lock leaves plain counters behind: still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One connection's standing with the accept loop, handed to its handler.
pub struct Ticket<'a> {
    state: &'a Mutex<State>,
    id: u64,
    deadline: Instant,
    max_active: usize,
    admitted: std::cell::Cell<bool>,
}

impl Ticket<'_> {
    /// When the handshake must have finished (what a [`crate::handshake`] machine is given).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left for the handshake (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The peer proved itself: from now on this connection is a session, no longer pending,
    /// and no deadline of the accept loop applies to it. When `max_active` sessions run, wait
    /// for one to end until the handshake deadline (a client starting its next trial right
    /// after the last one ended must not find the server busy), then give up with
    /// [`NotAdmitted::Busy`].
    pub fn authenticated(&self) -> Result<(), NotAdmitted> {
        loop {
            {
                let mut st = lock(self.state);
                if !st.pending.contains(self.id) {
                    return Err(NotAdmitted::Closed);
                }
                if st.active < self.max_active {
                    st.pending.remove(self.id);
                    st.active += 1;
                    self.admitted.set(true);
                    return Ok(());
                }
                if Instant::now() + Duration::from_millis(20) >= self.deadline {
                    st.pending.remove(self.id);
                    st.stats.busy += 1;
                    return Err(NotAdmitted::Busy(st.active));
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A connection handler: runs on its own thread with the connection, the peer's address, its
/// [`Ticket`] and a channel for events the caller's `on` receives on the accept loop's thread.
/// It is started once the peer has sent something (or closed): every protocol served here has
/// the client speak first.
pub type Handler<'h, E> = dyn Fn(TcpStream, SocketAddr, &Ticket<'_>, &mpsc::Sender<E>) + Sync + 'h;

/// The epoll token of the listener; idle connections use their ids.
const LISTENER: u64 = u64::MAX;
/// Connections accepted per wake-up at most, so idle connections that spoke are not kept
/// waiting behind a long accept queue.
const ACCEPT_BATCH: usize = 64;

/// Linux's errno values for "too many open files" (system-wide, per process).
const ENFILE: i32 = 23;
const EMFILE: i32 = 24;

/// The accept loop's own view: the listener, its epoll set and the idle connections.
struct Acceptor<'l> {
    listener: &'l TcpListener,
    ready: netio::ReadySet,
    idle: ByPeer<Idle>,
    max_idle: usize,
    timeout: Duration,
    next_id: u64,
}

/// Which peers a server talks to, asked on the accept loop's thread as each connection is
/// accepted: one refused is closed at once, before it costs a place.
pub type Admit<'a> = dyn Fn(SocketAddr) -> bool + 'a;

/// Accept connections on `listener` and run `handler` for each on its own thread until `stop`
/// is set or `max_sessions` authenticated sessions have ended. Events the handlers send reach
/// `on` on this thread. On the way out, waiting connections are closed and running sessions
/// are waited for (they should watch `stop` themselves). Accept errors (out of descriptors, a
/// connection reset before accept) are waited out, never fatal. Raises the soft descriptor
/// limit to the hard one.
pub fn serve<E: Send>(
    listener: &TcpListener,
    stop: &AtomicBool,
    limits: &Limits,
    max_sessions: Option<u64>,
    handler: &Handler<'_, E>,
    on: &mut dyn FnMut(E),
) -> std::io::Result<ServeStats> {
    serve_admitting(listener, stop, limits, max_sessions, &|_| true, handler, on)
}

/// [`serve`] for the peers `admit` accepts; any other is closed at accept (counted as
/// unauthenticated), so a flood from a peer the server does not talk to costs no place.
pub fn serve_admitting<E: Send>(
    listener: &TcpListener,
    stop: &AtomicBool,
    limits: &Limits,
    max_sessions: Option<u64>,
    admit: &Admit<'_>,
    handler: &Handler<'_, E>,
    on: &mut dyn FnMut(E),
) -> std::io::Result<ServeStats> {
    listener.set_nonblocking(true)?;
    let fd_limit = netio::raise_fd_limit();
    let budget = usize::try_from(fd_limit / IDLE_SHARE_OF_FD_LIMIT).unwrap_or(usize::MAX);
    let ready = netio::ReadySet::new(256)?;
    ready.add(listener.as_fd(), LISTENER)?;
    let mut acceptor = Acceptor {
        listener,
        ready,
        idle: ByPeer::default(),
        max_idle: limits.max_idle.min(budget).max(1),
        timeout: limits.handshake_timeout,
        next_id: 0,
    };
    let state = Mutex::new(State::default());
    let (tx, rx) = mpsc::channel::<E>();
    let mut tokens = Vec::new();
    std::thread::scope(|scope| {
        let start = |stream: TcpStream, peer: SocketAddr, id: u64, deadline: Instant| {
            let Some(ticket) = track_pending(&state, &stream, peer, id, deadline, limits) else {
                return;
            };
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name("ctlchan-conn".into())
                .spawn_scoped(scope, move || {
                    // A handler that panics (a bug) costs its connection only: its place is
                    // given back and counted, so `stop` still ends the loop (uncaught, the
                    // place stayed taken and the loop waited for it forever, deaf to SIGTERM)
                    // and the scope does not re-raise the panic in the server's thread.
                    let run = std::panic::AssertUnwindSafe(|| handler(stream, peer, &ticket, &tx));
                    let panicked = std::panic::catch_unwind(run).is_err();
                    if panicked {
                        lock(ticket.state).stats.panicked += 1;
                    }
                    finish(&ticket);
                });
            if spawned.is_err() {
                // No thread to be had: the connection is closed (its socket went with the
                // closure) and counted as never authenticated.
                let mut st = lock(&state);
                st.live -= 1;
                if let Some(p) = st.pending.remove(id) {
                    let _ = p.stream.shutdown(Shutdown::Both);
                    st.stats.unauthenticated += 1;
                }
            }
        };
        loop {
            while let Ok(e) = rx.try_recv() {
                on(e);
            }
            let finished = max_sessions.is_some_and(|m| lock(&state).stats.sessions >= m);
            if stop.load(Ordering::Relaxed) || finished {
                break;
            }
            let now = Instant::now();
            close_expired(&state, now);
            acceptor.close_expired(&state, now);
            // Wake for a connection or a first byte at once (a handshake must not wait for a
            // poll period: on a long path every millisecond of the session's start counts), and
            // for events, `stop` and deadlines at least every 20 ms.
            if acceptor.ready.wait(Duration::from_millis(20), &mut tokens).is_err() {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            for &token in &tokens {
                if token == LISTENER {
                    acceptor.accept_some(&state, admit);
                } else if let Some((stream, peer, deadline)) = acceptor.spoke(token, &state) {
                    start(stream, peer, token, deadline);
                }
            }
        }
        {
            // Connections still waiting never became sessions.
            let mut st = lock(&state);
            let closed = acceptor.idle.len() + st.pending.len();
            for (_, c) in acceptor.idle.drain() {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
            for (_, p) in st.pending.drain() {
                let _ = p.stream.shutdown(Shutdown::Both);
            }
            st.stats.unauthenticated += closed as u64;
        }
        while lock(&state).live > 0 {
            if let Ok(e) = rx.recv_timeout(Duration::from_millis(20)) {
                on(e);
            }
        }
    });
    while let Ok(e) = rx.try_recv() {
        on(e);
    }
    let stats = lock(&state).stats;
    Ok(stats)
}

impl Acceptor<'_> {
    /// Accept what the listener has (up to a batch) and hold each connection as idle, closing
    /// the heaviest peer's oldest idle connection at the cap.
    fn accept_some(&mut self, state: &Mutex<State>, admit: &Admit<'_>) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, peer)) if !admit(peer) => {
                    let _ = stream.shutdown(Shutdown::Both);
                    let mut st = lock(state);
                    st.stats.accepted += 1;
                    st.stats.unauthenticated += 1;
                }
                Ok((stream, peer)) => self.hold(stream, peer, state),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE, ENFILE: give a descriptor back (the heaviest peer's oldest idle
                    // connection) so the next accept can succeed; ECONNABORTED and the like:
                    // the next accept may succeed anyway.
                    if matches!(e.raw_os_error(), Some(ENFILE | EMFILE)) && self.evict_one(state) {
                        continue;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    return;
                }
            }
        }
    }

    fn hold(&mut self, stream: TcpStream, peer: SocketAddr, state: &Mutex<State>) {
        lock(state).stats.accepted += 1;
        let id = self.next_id;
        self.next_id += 1;
        // Non-blocking while idle, to peek at the first byte without waiting.
        if stream.set_nonblocking(true).is_err() || self.ready.add(stream.as_fd(), id).is_err() {
            lock(state).stats.unauthenticated += 1;
            return;
        }
        while self.idle.len() >= self.max_idle && self.evict_one(state) {}
        let deadline = Instant::now() + self.timeout;
        self.idle
            .insert(id, PeerKey::of(peer.ip()), Idle { stream, peer, deadline });
    }

    /// Close the heaviest peer's oldest idle connection; whether there was one.
    fn evict_one(&mut self, state: &Mutex<State>) -> bool {
        let Some((_, c)) = self.idle.evict() else {
            return false;
        };
        let _ = self.ready.remove(c.stream.as_fd());
        let _ = c.stream.shutdown(Shutdown::Both);
        lock(state).stats.evicted += 1;
        true
    }

    /// Idle connection `id` became readable: if it sent a byte, hand it over (blocking again)
    /// for a handler; if it closed or failed, close it; if it did not (a spurious wake-up),
    /// keep it.
    fn spoke(&mut self, id: u64, state: &Mutex<State>) -> Option<(TcpStream, SocketAddr, Instant)> {
        let c = self.idle.remove(id)?;
        match c.stream.peek(&mut [0u8; 1]) {
            Ok(n) if n > 0 => {
                let _ = self.ready.remove(c.stream.as_fd());
                if c.stream.set_nonblocking(false).is_ok() {
                    return Some((c.stream, c.peer, c.deadline));
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                self.idle.insert(id, PeerKey::of(c.peer.ip()), c);
                return None;
            }
            _ => {}
        }
        let _ = self.ready.remove(c.stream.as_fd());
        let _ = c.stream.shutdown(Shutdown::Both);
        lock(state).stats.unauthenticated += 1;
        None
    }

    /// Close idle connections whose handshake deadline passed (the oldest expire first: every
    /// connection gets the same time from its accept).
    fn close_expired(&mut self, state: &Mutex<State>, now: Instant) {
        let mut expired = 0;
        while let Some((id, c)) = self.idle.oldest() {
            if c.deadline > now {
                break;
            }
            if let Some(c) = self.idle.remove(id) {
                let _ = self.ready.remove(c.stream.as_fd());
                let _ = c.stream.shutdown(Shutdown::Both);
                expired += 1;
            }
        }
        if expired > 0 {
            lock(state).stats.timed_out += expired;
        }
    }
}

/// Register a connection that spoke as pending (closing the heaviest peer's oldest pending one
/// at the cap); `None` if it cannot be tracked (no descriptor for the clone), in which case it
/// is dropped and counted as never authenticated.
fn track_pending<'a>(
    state: &'a Mutex<State>,
    stream: &TcpStream,
    peer: SocketAddr,
    id: u64,
    deadline: Instant,
    limits: &Limits,
) -> Option<Ticket<'a>> {
    let clone = stream.try_clone();
    let mut st = lock(state);
    let Ok(clone) = clone else {
        st.stats.unauthenticated += 1;
        return None;
    };
    while st.pending.len() >= limits.max_pending.max(1) {
        let Some((_, oldest)) = st.pending.evict() else {
            break;
        };
        let _ = oldest.stream.shutdown(Shutdown::Both);
        st.stats.evicted += 1;
    }
    st.pending.insert(
        id,
        PeerKey::of(peer.ip()),
        Pending {
            stream: clone,
            deadline,
        },
    );
    st.live += 1;
    Some(Ticket {
        state,
        id,
        deadline,
        max_active: limits.max_active.max(1),
        admitted: std::cell::Cell::new(false),
    })
}

/// A handler returned: its connection is a finished session or one that never authenticated.
fn finish(ticket: &Ticket<'_>) {
    let mut st = lock(ticket.state);
    st.live -= 1;
    if ticket.admitted.get() {
        st.active -= 1;
        st.stats.sessions += 1;
    } else if st.pending.remove(ticket.id).is_some() {
        st.stats.unauthenticated += 1;
    }
}

/// Close pending connections whose handshake deadline passed (their handlers' reads then end).
fn close_expired(state: &Mutex<State>, now: Instant) {
    let mut st = lock(state);
    while let Some((id, p)) = st.pending.oldest() {
        if p.deadline > now {
            break;
        }
        if let Some(p) = st.pending.remove(id) {
            let _ = p.stream.shutdown(Shutdown::Both);
            st.stats.timed_out += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A handler that wants the line "key\n" within its deadline, answers "ok\n" and then
    /// echoes one more line; reports the outcome as an event.
    fn echo_handler(stream: TcpStream, _peer: SocketAddr, t: &Ticket<'_>, tx: &mpsc::Sender<String>) {
        let mut s = stream;
        let mut buf = [0u8; 4];
        let _ = s.set_read_timeout(Some(t.remaining().max(Duration::from_millis(1))));
        if s.read_exact(&mut buf).is_err() || &buf != b"key\n" {
            let _ = tx.send("unauthenticated".into());
            return;
        }
        match t.authenticated() {
            Ok(()) => {
                let _ = s.write_all(b"ok\n");
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut line = [0u8; 3];
                let _ = s.read_exact(&mut line);
                let _ = tx.send("session".into());
            }
            Err(e) => {
                let _ = s.write_all(format!("{e}\n").as_bytes());
                let _ = tx.send("busy".into());
            }
        }
    }

    fn start(limits: Limits, max: Option<u64>) -> (SocketAddr, std::thread::JoinHandle<(ServeStats, Vec<String>)>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            let mut events = Vec::new();
            let stats = serve(&l, &stop, &limits, max, &echo_handler, &mut |e| events.push(e)).unwrap();
            (stats, events)
        });
        (addr, h)
    }

    fn session(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"key\n").unwrap();
        let mut reply = [0u8; 3];
        s.read_exact(&mut reply).unwrap();
        s.write_all(b"end").unwrap();
        String::from_utf8_lossy(&reply).into_owned()
    }

    #[test]
    fn idle_connections_neither_block_nor_spend_a_once_server() {
        let limits = Limits {
            max_pending: 8,
            handshake_timeout: Duration::from_secs(3),
            max_active: 4,
            max_idle: 8,
        };
        let (addr, h) = start(limits, Some(1));
        // 20 idle connections and 5 connect-and-close ones first.
        let idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for _ in 0..5 {
            drop(TcpStream::connect(addr).unwrap());
        }
        std::thread::sleep(Duration::from_millis(200));
        // Served at all means served within its own 3 s handshake deadline: a server that made
        // it wait for the idle connections' deadlines would have closed it first.
        assert_eq!(session(addr), "ok\n");
        let (stats, events) = h.join().unwrap();
        drop(idle);
        assert_eq!(stats.sessions, 1);
        assert!(stats.evicted >= 12, "{stats:?}");
        assert!(stats.accepted >= 26, "{stats:?}");
        assert_eq!(events.iter().filter(|e| *e == "session").count(), 1, "{events:?}");
    }

    #[test]
    fn silent_connections_are_closed_at_their_deadline() {
        let limits = Limits {
            max_pending: 8,
            handshake_timeout: Duration::from_millis(300),
            max_active: 4,
            ..Limits::default()
        };
        let (addr, h) = start(limits, Some(1));
        let mut silent = TcpStream::connect(addr).unwrap();
        silent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        // Closed by the server: EOF (or a reset), not our own 5 s read timeout.
        let r = silent.read(&mut b);
        let closed = match &r {
            Ok(0) => true,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            Ok(_) => false,
        };
        assert!(closed, "{r:?}");
        assert_eq!(session(addr), "ok\n");
        let (stats, _) = h.join().unwrap();
        assert!(stats.timed_out + stats.unauthenticated >= 1, "{stats:?}");
    }

    #[test]
    fn sessions_over_the_active_cap_are_told_busy() {
        let limits = Limits {
            max_pending: 8,
            handshake_timeout: Duration::from_millis(500),
            max_active: 1,
            ..Limits::default()
        };
        let (addr, h) = start(limits, Some(1));
        // First session authenticates and holds (does not send its last line yet).
        let mut first = TcpStream::connect(addr).unwrap();
        first.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        first.write_all(b"key\n").unwrap();
        let mut r = [0u8; 3];
        first.read_exact(&mut r).unwrap();
        let mut second = TcpStream::connect(addr).unwrap();
        second.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        second.write_all(b"key\n").unwrap();
        let mut reply = String::new();
        let _ = second.read_to_string(&mut reply);
        assert!(reply.contains("busy"), "{reply:?}");
        first.write_all(b"end").unwrap();
        let (stats, _) = h.join().unwrap();
        assert_eq!((stats.sessions, stats.busy), (1, 1), "{stats:?}");
    }

    #[test]
    fn a_session_arriving_as_the_last_one_ends_waits_for_its_slot() {
        let limits = Limits {
            max_pending: 8,
            handshake_timeout: Duration::from_secs(3),
            max_active: 1,
            ..Limits::default()
        };
        let (addr, h) = start(limits, Some(2));
        let mut first = TcpStream::connect(addr).unwrap();
        first.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        first.write_all(b"key\n").unwrap();
        let mut r = [0u8; 3];
        first.read_exact(&mut r).unwrap();
        let second = std::thread::spawn(move || session(addr));
        std::thread::sleep(Duration::from_millis(200));
        first.write_all(b"end").unwrap();
        assert_eq!(second.join().unwrap(), "ok\n");
        let (stats, _) = h.join().unwrap();
        assert_eq!((stats.sessions, stats.busy), (2, 0), "{stats:?}");
    }

    /// A handler that panics (say, on a request that hits a bug) closes its connection only:
    /// the loop stops when told to, counts the panic, and serves a real session after it.
    /// Before, the panicked handler's place stayed taken and the loop waited for it forever on
    /// its way out: `evlbi serve` ignored SIGTERM after one statement panicked.
    #[test]
    fn a_panicking_handler_costs_its_connection_only_and_the_loop_still_stops() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (done_tx, done) = mpsc::channel();
        let stop2 = stop.clone();
        std::thread::spawn(move || {
            let handler = |s: TcpStream, p: SocketAddr, t: &Ticket<'_>, tx: &mpsc::Sender<String>| {
                let mut first = [0u8; 4];
                let _ = s.peek(&mut first);
                if &first == b"boom" {
                    panic!("a handler bug, on purpose");
                }
                echo_handler(s, p, t, tx);
            };
            let r = serve(&l, &stop2, &Limits::default(), None, &handler, &mut |_| {});
            let _ = done_tx.send(r.map_err(|e| e.to_string()));
        });
        let mut boom = TcpStream::connect(addr).unwrap();
        boom.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        boom.write_all(b"boom\n").unwrap();
        let mut b = [0u8; 1];
        assert!(
            matches!(boom.read(&mut b), Ok(0) | Err(_)),
            "the panicked connection is closed"
        );
        assert_eq!(session(addr), "ok\n");
        stop.store(true, Ordering::Relaxed);
        let stats = done
            .recv_timeout(Duration::from_secs(20))
            .expect("the loop did not stop after a handler panicked")
            .unwrap();
        assert_eq!((stats.panicked, stats.sessions), (1, 1), "{stats:?}");
        assert_eq!(stats.accepted, stats.sessions + stats.unauthenticated, "{stats:?}");
    }

    /// What a hostile or clumsy peer does with its connection.
    #[derive(Debug, Clone, Copy)]
    enum Peer {
        Idle,
        Close,
        Garbage,
        HalfKey,
        WrongKey,
    }

    fn peer_strategy() -> impl proptest::strategy::Strategy<Value = Peer> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Peer::Idle),
            Just(Peer::Close),
            Just(Peer::Garbage),
            Just(Peer::HalfKey),
            Just(Peer::WrongKey)
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

        /// Whatever mix of up to 40 bad connections comes first, a real session gets through
        /// within its handshake deadline, `--once` is spent only by it, and every accepted
        /// connection is accounted for exactly once.
        #[test]
        fn any_mix_of_bad_connections_lets_a_real_session_through(
            peers in proptest::collection::vec(peer_strategy(), 0..40),
            max_pending in 1usize..12,
        ) {
            let limits = Limits {
                max_pending,
                handshake_timeout: Duration::from_secs(4),
                max_active: 2,
                max_idle: max_pending,
            };
            let (addr, h) = start(limits, Some(1));
            let mut held = Vec::new();
            for p in &peers {
                let Ok(mut s) = TcpStream::connect(addr) else { continue };
                match p {
                    Peer::Idle => held.push(s),
                    Peer::Close => drop(s),
                    Peer::Garbage => {
                        let _ = s.write_all(&[0xff; 300]);
                        held.push(s);
                    }
                    Peer::HalfKey => {
                        let _ = s.write_all(b"ke");
                        held.push(s);
                    }
                    Peer::WrongKey => {
                        let _ = s.write_all(b"nope");
                    }
                }
            }
            // Served at all means served within its own handshake deadline.
            proptest::prop_assert_eq!(session(addr), "ok\n");
            let (stats, events) = h.join().unwrap();
            drop(held);
            proptest::prop_assert_eq!(stats.sessions, 1);
            proptest::prop_assert_eq!(events.iter().filter(|e| *e == "session").count(), 1);
            proptest::prop_assert_eq!(
                stats.accepted,
                stats.sessions + stats.unauthenticated + stats.evicted + stats.timed_out + stats.busy,
                "{:?}", stats
            );
        }
    }
}

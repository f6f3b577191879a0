//! `evlbi probe` over real sockets: the thin I/O loop around the sans-IO [`probe`] crate.
//!
//! Session: the client opens TCP to the server and sends `hello` (size, count, spacing, test
//! id); with a pre-shared key both sides prove it (HMAC challenge–response, [`auth`]) and every
//! later control line carries a MAC under a session key ([`ctlchan::Channel::authenticate`]).
//! The server binds a UDP socket and answers `ready` with its port; the client sends `count`
//! datagrams paced on an absolute timeline, then `done` with its sender statistics; the server
//! drains, finishes its receiver statistics and answers `results` ([`control`] has the
//! messages, [`ctlchan`] frames them). Every control line is
//! size-bounded and validated; datagrams from anyone but the client's address, or with the wrong
//! magic, test id or size, are counted as strays and never as data or loss.
//!
//! Sockets, pacing and counters come from `netio`: the client paces on an exact absolute timeline
//! ([`pacing::Pacer`]) and stamps each datagram with its monotonic clock; the server receives in
//! batches (recvmmsg) and times arrivals with the kernel's receive stamp (SO_TIMESTAMPNS,
//! CLOCK_REALTIME), so inter-arrival jitter excludes the wait in the socket buffer. One-way delay
//! is reported relative to its minimum, so the offset between the two clocks cancels (a clock
//! step during a trial shows as a delay step). Host CPU, UDP and interface counters are read on
//! both ends ([`host`]); the server's travel back in `results`.
//!
//! A TCP test ([`run_tcp_client`], `hello` with `tcp` set) uses the same control handshake, then
//! `streams` TCP data connections: the client writes memory to memory for the test's duration and
//! samples every stream's TCP_INFO ([`tcpsock`]); the server counts bytes per stream. A competing
//! CPU-bound task at a given nice level can run on the sending host meanwhile ([`burn`]).

#![warn(missing_docs)]

pub mod auth;
pub mod burn;
mod client;
pub mod control;
pub mod host;
pub mod host_jitter;
mod server;
mod tcp_client;
mod tcp_server;
pub mod tcpsock;

use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use client::{run_client, run_client_live, ClientConfig};
pub use server::{Server, ServerConfig, ServerEvent};
pub use tcp_client::{run_tcp_client, TcpClientConfig, MAX_SAMPLES, RESULTS_WAIT};

pub use control::MAX_LINE;

use ctlchan::{Channel, ChannelError, ChannelReader, ChannelWriter, Role};
use thiserror::Error;

use crate::control::ControlMsg;

/// Session failures.
#[derive(Debug, Error)]
pub enum SessionError {
    /// A socket operation failed.
    #[error(transparent)]
    Io(#[from] netio::IoError),
    /// Socket setup (bind, connect, buffer sizing) failed.
    #[error(transparent)]
    Socket(#[from] netio::NetioError),
    /// The peer sent a malformed, oversized or invalid control message, or (with a key) a line
    /// whose MAC does not check: changed, dropped, replayed or reordered on the way.
    #[error("control channel: {0}")]
    Control(#[from] ChannelError),
    /// Authentication failed or was refused.
    #[error("authentication: {0}")]
    Auth(#[from] auth::AuthError),
    /// The peer said no.
    #[error("peer refused: {0}")]
    Refused(String),
    /// The peer sent a message out of turn.
    #[error("unexpected control message: {0}")]
    Unexpected(&'static str),
    /// The peer went quiet or closed the connection.
    #[error("control connection closed or timed out while waiting for {0}")]
    Closed(&'static str),
    /// The kernel has no congestion control of this name (or may not set it).
    #[error("congestion control {name:?} unavailable ({why}); this kernel offers: {available}")]
    UnknownCongestionControl {
        /// The name asked for.
        name: String,
        /// What setting it said.
        why: String,
        /// The kernel's list (/proc/sys/net/ipv4/tcp_available_congestion_control).
        available: String,
    },
    /// The competing CPU load could not be started.
    #[error("{0}")]
    CpuLoad(String),
}

static START: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds on this process's monotonic clock.
pub fn now_ns() -> u64 {
    instant_ns(Instant::now())
}

/// An instant on the [`now_ns`] timeline (0 for instants before the timeline began).
pub fn instant_ns(t: Instant) -> u64 {
    let start = *START.get_or_init(Instant::now);
    u64::try_from(t.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME): the clock of the kernel's SO_TIMESTAMPNS
/// receive stamps, so the receiver uses it when a datagram comes without one.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A line-framed, size-bounded control connection ([`ctlchan::Channel`] of [`ControlMsg`]),
/// with the session's error mapping: a peer that closes or goes quiet is
/// [`SessionError::Closed`] naming what we waited for.
pub(crate) struct Control(Channel<ControlMsg>);

impl Control {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Control(Channel::new(stream, MAX_LINE))
    }

    pub(crate) fn send(&mut self, msg: &ControlMsg) -> Result<(), SessionError> {
        self.0.send(msg).map_err(send_error)
    }

    /// Next message, waiting at most `timeout`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &'static str) -> Result<ControlMsg, SessionError> {
        self.0.recv(timeout).map_err(|e| recv_error(e, what))
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        self.0.stream()
    }

    /// After the handshake: with a session key every later line both ways carries a MAC.
    pub(crate) fn authenticate(&mut self, session_key: Option<[u8; 32]>, role: Role) {
        if let Some(k) = session_key {
            self.0.authenticate(k, role);
        }
    }

    /// A reading and a writing half, for a thread each.
    pub(crate) fn split(self) -> Result<(ControlReader, ControlWriter), SessionError> {
        let (r, w) = self.0.split().map_err(netio::io_err("clone the control connection"))?;
        Ok((ControlReader(r), ControlWriter(w)))
    }
}

/// The reading half of a split [`Control`].
pub(crate) struct ControlReader(ChannelReader<ControlMsg>);

impl ControlReader {
    /// Next message, waiting at most `timeout`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &'static str) -> Result<ControlMsg, SessionError> {
        self.0.recv(timeout).map_err(|e| recv_error(e, what))
    }
}

/// The writing half of a split [`Control`].
pub(crate) struct ControlWriter(ChannelWriter<ControlMsg>);

impl ControlWriter {
    pub(crate) fn send(&mut self, msg: &ControlMsg) -> Result<(), SessionError> {
        self.0.send(msg).map_err(send_error)
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        self.0.stream()
    }
}

fn send_error(e: ChannelError) -> SessionError {
    match e {
        ChannelError::Io(source) => netio::io_err("write control")(source).into(),
        e => SessionError::Control(e),
    }
}

fn recv_error(e: ChannelError, what: &'static str) -> SessionError {
    match e {
        ChannelError::Closed | ChannelError::Timeout(_) | ChannelError::Truncated(_) => SessionError::Closed(what),
        ChannelError::Io(source) => netio::io_err("read control")(source).into(),
        e => SessionError::Control(e),
    }
}

/// A random nonce from the OS generator.
pub(crate) fn nonce() -> [u8; ctlchan::mac::NONCE_LEN] {
    use rand::RngCore;
    let mut n = [0u8; ctlchan::mac::NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

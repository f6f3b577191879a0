//! `evlbi probe` over real sockets: the thin I/O loop around the sans-IO [`probe`] crate.
//!
//! Session: the client opens TCP to the server and sends `hello` (size, count, spacing, test
//! id); with a pre-shared key both sides prove it (HMAC challenge–response, [`probe::auth`]).
//! The server binds a UDP socket and answers `ready` with its port; the client sends `count`
//! datagrams paced on an absolute timeline, then `done` with its sender statistics; the server
//! drains, finishes its receiver statistics and answers `results`. Every control line is
//! size-bounded and validated; datagrams from anyone but the client's address, or with the wrong
//! magic, test id or size, are counted as strays and never as data or loss.
//!
//! Timestamps are this process's monotonic clock in ns (one-way delay is reported relative to
//! its minimum, so the two hosts' clock offset cancels). The socket layer is plain `std` +
//! `socket2` for now; batched syscalls and kernel receive timestamps come with `netio`.

mod client;
mod server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use client::{run_client, ClientConfig};
pub use server::{Server, ServerConfig, ServerEvent};

use probe::control::{ControlError, ControlMsg, LineDecoder};
use thiserror::Error;

/// Longest control line accepted (results carry histograms, so not tiny).
pub const MAX_LINE: usize = 1 << 20;

/// Session failures.
#[derive(Debug, Error)]
pub enum SessionError {
    /// A socket operation failed.
    #[error("{what}")]
    Io { what: &'static str, source: std::io::Error },
    /// The peer sent a malformed, oversized or invalid control message.
    #[error("control channel: {0}")]
    Control(#[from] ControlError),
    /// Authentication failed or was refused.
    #[error("authentication: {0}")]
    Auth(#[from] probe::auth::AuthError),
    /// The peer said no.
    #[error("peer refused: {0}")]
    Refused(String),
    /// The peer sent a message out of turn.
    #[error("unexpected control message: {0}")]
    Unexpected(&'static str),
    /// The peer went quiet or closed the connection.
    #[error("control connection closed or timed out while waiting for {0}")]
    Closed(&'static str),
}

pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> SessionError {
    move |source| SessionError::Io { what, source }
}

/// Nanoseconds on this process's monotonic clock.
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A line-framed, size-bounded control connection.
pub(crate) struct Control {
    stream: TcpStream,
    decoder: LineDecoder,
}

impl Control {
    pub(crate) fn new(stream: TcpStream) -> Result<Self, SessionError> {
        stream.set_nodelay(true).map_err(io("set TCP_NODELAY"))?;
        Ok(Control {
            stream,
            decoder: LineDecoder::new(MAX_LINE),
        })
    }

    pub(crate) fn send(&mut self, msg: &ControlMsg) -> Result<(), SessionError> {
        let line = msg.to_line(MAX_LINE)?;
        self.stream.write_all(&line).map_err(io("write control"))
    }

    /// Next message, waiting at most `timeout`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &'static str) -> Result<ControlMsg, SessionError> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(m) = self.decoder.poll()? {
                m.validate()?;
                return Ok(m);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SessionError::Closed(what));
            }
            self.stream
                .set_read_timeout(Some(left.min(Duration::from_millis(200))))
                .map_err(io("set timeout"))?;
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(SessionError::Closed(what)),
                Ok(n) => self.decoder.push(&buf[..n])?,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    return Err(SessionError::Io {
                        what: "read control",
                        source: e,
                    })
                }
            }
        }
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

/// A random nonce from the OS generator.
pub(crate) fn nonce() -> [u8; probe::auth::NONCE_LEN] {
    use rand::RngCore;
    let mut n = [0u8; probe::auth::NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

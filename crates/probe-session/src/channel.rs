//! The probe's control connection: ctlchan's channel of [`ControlMsg`] with the session's error
//! mapping.

use std::net::TcpStream;
use std::time::Duration;

use ctlchan::{Channel, ChannelError, ChannelReader, ChannelWriter, Role};

use crate::control::{ControlMsg, MAX_LINE};
use crate::error::ProbeSessionError;

/// A line-framed, size-bounded control connection ([`ctlchan::Channel`] of [`ControlMsg`]),
/// with the session's error mapping: a peer that closes or goes quiet is
/// [`ProbeSessionError::Closed`] naming what we waited for.
pub(crate) struct Control(Channel<ControlMsg>);

impl Control {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Control(Channel::new(stream, MAX_LINE))
    }

    pub(crate) fn send(&mut self, msg: &ControlMsg) -> Result<(), ProbeSessionError> {
        self.0.send(msg).map_err(send_error)
    }

    /// Next message, waiting at most `timeout`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &'static str) -> Result<ControlMsg, ProbeSessionError> {
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
    pub(crate) fn split(self) -> Result<(ControlReader, ControlWriter), ProbeSessionError> {
        let (r, w) = self.0.split().map_err(netio::io_err("clone the control connection"))?;
        Ok((ControlReader(r), ControlWriter(w)))
    }
}

/// The reading half of a split [`Control`].
pub(crate) struct ControlReader(ChannelReader<ControlMsg>);

impl ControlReader {
    /// Next message, waiting at most `timeout`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &'static str) -> Result<ControlMsg, ProbeSessionError> {
        self.0.recv(timeout).map_err(|e| recv_error(e, what))
    }
}

/// The writing half of a split [`Control`].
pub(crate) struct ControlWriter(ChannelWriter<ControlMsg>);

impl ControlWriter {
    pub(crate) fn send(&mut self, msg: &ControlMsg) -> Result<(), ProbeSessionError> {
        self.0.send(msg).map_err(send_error)
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        self.0.stream()
    }
}

fn send_error(e: ChannelError) -> ProbeSessionError {
    match e {
        ChannelError::Io(source) => netio::io_err("write control")(source).into(),
        e => ProbeSessionError::Control(e),
    }
}

fn recv_error(e: ChannelError, what: &'static str) -> ProbeSessionError {
    match e {
        ChannelError::Closed | ChannelError::Timeout(_) | ChannelError::Truncated(_) => ProbeSessionError::Closed(what),
        ChannelError::Io(source) => netio::io_err("read control")(source).into(),
        e => ProbeSessionError::Control(e),
    }
}

//! A client the probe server accepted: the `ready` that proves the key back and switches the
//! channel to authenticated lines, the notice sent before hanging up, and what the server
//! reports as it works (UDP trials and TCP tests alike).

use std::net::SocketAddr;

use ctlchan::handshake::ServerHandshake;
use ctlchan::Role;
use netio::BufferGrant;
use probe::recv_stats::ReceiverReport;
use probe::tcp_results::TcpReceiverReport;

use crate::auth::ready_parts;
use crate::channel::Control;
use crate::control::{ControlMsg, ErrorMsg, Hello, Ready};
use crate::error::ProbeSessionError;

/// What happened, for logging and tests.
#[derive(Debug)]
pub enum ServerEvent {
    /// A client passed the handshake; data goes to `udp_port`.
    Ready {
        /// Client control address.
        peer: SocketAddr,
        /// Parameters it asked for.
        hello: Box<Hello>,
        /// Data port.
        udp_port: u16,
        /// The receive buffer asked for and granted, with a warning when the kernel capped it
        /// (`None` for a TCP test, whose buffers the kernel auto-tunes).
        grant: Option<BufferGrant>,
    },
    /// A session completed; its receiver statistics.
    Finished {
        /// Client control address.
        peer: SocketAddr,
        /// The report sent back.
        report: Box<ReceiverReport>,
    },
    /// A TCP test ended (completely, or partially: see [`TcpReceiverReport::partial`]).
    TcpFinished {
        /// Client control address.
        peer: SocketAddr,
        /// What the receiver saw (also sent to the client when it is still there).
        report: Box<TcpReceiverReport>,
    },
    /// A session failed.
    Failed {
        /// Client control address, if known.
        peer: Option<SocketAddr>,
        /// Why.
        error: String,
    },
}

/// Send `ready` and, with a key, switch the channel to per-line MACs under the session key: the
/// client does the same on reading `ready`, so every later line both ways is authenticated.
pub(crate) fn send_ready(control: &mut Control, client: &Authenticated, port: u16) -> Result<(), ProbeSessionError> {
    let server_proof = client.hs.accept_proof(&ready_parts(port))?;
    control.send(&ControlMsg::Ready(Ready {
        udp_port: port,
        server_proof,
    }))?;
    control.authenticate(client.session_key, Role::Server);
    Ok(())
}

/// A client that passed the handshake: what `ready` needs to prove the key back.
pub(crate) struct Authenticated {
    pub(crate) hs: ServerHandshake<ControlMsg>,
    pub(crate) session_key: Option<[u8; 32]>,
}

/// For a control line that failed (a MAC that does not check, a malformed or unexpected
/// message): the `error` that tells the client why before we hang up, so it reports that rather
/// than a closed connection.
pub(crate) fn notice(e: &ProbeSessionError) -> Option<ControlMsg> {
    matches!(e, ProbeSessionError::Control(_) | ProbeSessionError::Unexpected(_)).then(|| {
        ControlMsg::Error(ErrorMsg {
            message: crate::control::clip(&netio::error_chain(e)),
        })
    })
}

//! The receiving side (`evlbi recv`): authenticate the sender, then serve its session — files
//! placed safely below the root, one data stream for all of them, verdicts as files complete
//! ([`crate::recv_session`]).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use ctlchan::handshake::{Fresh, HandshakeError, ServerHandshake, ServerStep};
use ctlchan::serve::{ServeStats, Ticket};
use ctlchan::{Channel, Role};
use netio::{error_chain, io_err};

use crate::control::{Msg, DIALECT, MAX_LINE};
use crate::error::{TransferSessionError, UsageError};
use crate::paths::Root;
use crate::receiving::{Receiving, ServerConfig, ServerEvent};
use crate::recv_session::fatal;

/// A bound receiver.
pub struct Server {
    listener: TcpListener,
    shared: Receiving,
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
            shared: Receiving::new(cfg, root),
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
        ctlchan::serve::serve(
            &self.listener,
            stop,
            &self.shared.cfg.limits,
            once.then_some(1),
            &handler,
            on,
        )
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
        let r = crate::recv_session::run(&self.shared, &mut ch, &net).map_err(|e| match e {
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
        let mut hs = ServerHandshake::new(DIALECT, self.shared.cfg.key.clone(), Fresh::draw(), ticket.deadline());
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
}

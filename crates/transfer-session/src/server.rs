//! The receiving side (`evlbi recv`): authenticate the sender, then serve its session — files
//! placed safely below the root, one data stream for all of them, verdicts as files complete
//! ([`crate::recv_session`]).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use ctlchan::serve::{ServeStats, Ticket};
use ctlchan::{Channel, Role};
use netio::{error_chain, io_err};

use crate::control::{Msg, MAX_LINE};
use crate::early::PenStats;
use crate::error::{AuthError, TransferSessionError, UsageError};
use crate::first_flight::{wall_ms, Accepted, GuardStats};
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
        let (listener, udp) = bind_both(cfg.listen, cfg.rcvbuf)?;
        Ok(Server {
            listener,
            shared: Receiving::new(cfg, root, udp),
        })
    }

    /// First flights so far, by outcome (accepted, bad key, stale, replayed).
    pub fn first_flights(&self) -> GuardStats {
        self.shared
            .guard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stats
            .clone()
    }

    /// Datagrams that came before their session, by outcome.
    pub fn early_datagrams(&self) -> PenStats {
        self.shared.pen.lock().unwrap_or_else(|p| p.into_inner()).stats.clone()
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
        let (flight, session) = match self.first_flight(&mut ch, ticket) {
            Ok(a) => a,
            Err(e) => return on(ServerEvent::Rejected(peer, error_chain(&fatal(&mut ch, e)))),
        };
        if let Err(e) = ticket.authenticated() {
            let e = TransferSessionError::NotAdmitted(e);
            return on(ServerEvent::Rejected(peer, error_chain(&fatal(&mut ch, e))));
        }
        on(ServerEvent::Connected(peer));
        let net = crate::recv_session::Net {
            key: &flight.session_key,
            session_id: flight.session_id,
            chunk_size: session.0,
            first_segment: session.1,
            data_from: SocketAddr::new(peer.ip(), flight.udp_port),
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

    /// The sender's first flight ([`crate::first_flight`]) within the connection's handshake
    /// deadline: its `hello` checked against our key, clock and the nonces seen; from then on
    /// every line is authenticated, and its `session` comes within the same deadline (a sender
    /// that says hello and then nothing does not hold a session). Our first authenticated line,
    /// `welcome`, is our proof.
    fn first_flight(
        &self,
        ch: &mut Channel<Msg>,
        ticket: &Ticket<'_>,
    ) -> Result<(Accepted, (u32, u64)), TransferSessionError> {
        let left = || ticket.deadline().saturating_duration_since(Instant::now());
        let hello = ch.recv(left())?;
        let accepted = self
            .shared
            .guard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(self.shared.cfg.key.as_deref(), &hello, wall_ms())
            .map_err(AuthError::from)?;
        ch.authenticate(accepted.session_key, Role::Server);
        match ch.recv(left())? {
            Msg::Session {
                chunk_size,
                first_segment,
            } => Ok((accepted, (chunk_size, first_segment))),
            m => Err(crate::error::unexpected(&m, "session")),
        }
    }
}

/// The control listener and the UDP socket on the same port number (SO_REUSEPORT, so each
/// session binds its own connected socket there too). With port 0 the TCP port is the kernel's
/// choice; a few tries find one whose UDP twin is free.
fn bind_both(listen: SocketAddr, rcvbuf: usize) -> Result<(TcpListener, std::net::UdpSocket), TransferSessionError> {
    let mut last = None;
    for _ in 0..16 {
        let listener = TcpListener::bind(listen).map_err(io_err(format!("binding TCP {listen}")))?;
        let at = listener.local_addr().map_err(io_err("local address"))?;
        match crate::udp::bind_shared(at, None, rcvbuf) {
            Ok(u) => {
                // Receive stamps on what comes before its session: the opening train's
                // dispersion is measured from them.
                netio::enable_rx_timestamps(&u).map_err(io_err("SO_TIMESTAMPNS"))?;
                return Ok((listener, u));
            }
            Err(e) if listen.port() == 0 => last = Some(e),
            Err(e) => return Err(io_err(format!("binding UDP {at}"))(e).into()),
        }
    }
    let e = last.unwrap_or_else(|| std::io::Error::other("no port"));
    Err(io_err(format!("binding UDP beside TCP {listen}"))(e).into())
}

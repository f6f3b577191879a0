//! The probe server: accepts one session at a time, forever or for a given number of sessions.
//! A failed session (bad key, malformed control, client gone) is reported and the server goes
//! on serving.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use probe::auth::{ServerHandshake, ServerStep};
use probe::control::{ControlMsg, ErrorMsg, Hello, Results};
use probe::recv_stats::{ReceiverReport, RecvConfig, RecvStats};
use socket2::{Domain, Protocol, Socket, Type};

use crate::{io, nonce, now_ns, Control, SessionError};

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// TCP control address to listen on.
    pub listen: SocketAddr,
    /// Pre-shared key; clients must prove it when set.
    pub key: Option<Vec<u8>>,
    /// UDP receive buffer to ask the kernel for, bytes.
    pub rcvbuf: usize,
    /// Longest wait for the client's next handshake message.
    pub handshake_timeout: Duration,
    /// After `done`, wait until no datagram arrived for this long (bounded by 10x) before finishing.
    pub drain: Duration,
}

impl ServerConfig {
    /// Defaults for `listen`: no key, 64 MiB receive buffer, 10 s handshake, 200 ms drain.
    pub fn new(listen: SocketAddr) -> Self {
        ServerConfig {
            listen,
            key: None,
            rcvbuf: 64 << 20,
            handshake_timeout: Duration::from_secs(10),
            drain: Duration::from_millis(200),
        }
    }
}

/// What happened, for logging and tests.
#[derive(Debug)]
pub enum ServerEvent {
    /// A client passed the handshake; data goes to `udp_port`.
    Ready {
        /// Client control address.
        peer: SocketAddr,
        /// Parameters it asked for.
        hello: Hello,
        /// Data port.
        udp_port: u16,
        /// Receive buffer the kernel granted (bytes) and whether that is less than asked.
        rcvbuf_granted: usize,
    },
    /// A session completed; its receiver statistics.
    Finished {
        /// Client control address.
        peer: SocketAddr,
        /// The report sent back.
        report: Box<ReceiverReport>,
    },
    /// A session failed.
    Failed {
        /// Client control address, if known.
        peer: Option<SocketAddr>,
        /// Why.
        error: String,
    },
}

/// A bound probe server.
pub struct Server {
    listener: TcpListener,
    config: ServerConfig,
}

impl Server {
    /// Bind the control port.
    pub fn bind(config: ServerConfig) -> Result<Self, SessionError> {
        let listener = TcpListener::bind(config.listen).map_err(io("bind control port"))?;
        listener.set_nonblocking(true).map_err(io("set non-blocking"))?;
        Ok(Server { listener, config })
    }

    /// The control address actually bound (port 0 picks one).
    pub fn local_addr(&self) -> Result<SocketAddr, SessionError> {
        self.listener.local_addr().map_err(io("local address"))
    }

    /// Serve sessions one after another until `stop` is set or `max_sessions` have run.
    pub fn serve(
        &self,
        stop: &AtomicBool,
        max_sessions: Option<u64>,
        mut on_event: impl FnMut(ServerEvent),
    ) -> Result<(), SessionError> {
        let mut sessions = 0u64;
        while !stop.load(Ordering::Relaxed) && max_sessions.is_none_or(|m| sessions < m) {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    sessions += 1;
                    if let Err(e) = self.session(stream, peer, stop, &mut on_event) {
                        on_event(ServerEvent::Failed {
                            peer: Some(peer),
                            error: e.to_string(),
                        });
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => on_event(ServerEvent::Failed {
                    peer: None,
                    error: format!("accept: {e}"),
                }),
            }
        }
        Ok(())
    }

    fn session(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        stop: &AtomicBool,
        on_event: &mut impl FnMut(ServerEvent),
    ) -> Result<(), SessionError> {
        stream.set_nonblocking(false).map_err(io("set blocking"))?;
        let mut control = Control::new(stream)?;
        let mut hs = ServerHandshake::new(self.config.key.clone(), nonce());
        let hello = loop {
            let msg = control.recv(self.config.handshake_timeout, "hello/auth")?;
            match hs.handle(msg) {
                Ok(ServerStep::Send(m)) => control.send(&m)?,
                Ok(ServerStep::Accepted(h)) => break h,
                Err(e) => {
                    // Tell the client why before hanging up; ignore a failure to do so.
                    let _ = control.send(&ControlMsg::Error(ErrorMsg { message: e.to_string() }));
                    return Err(e.into());
                }
            }
        };
        let local_ip = control.stream().local_addr().map_err(io("local address"))?.ip();
        let (udp, granted) = bind_udp(local_ip, self.config.rcvbuf)?;
        let udp_port = udp.local_addr().map_err(io("UDP local address"))?.port();
        control.send(&hs.ready(udp_port)?)?;
        on_event(ServerEvent::Ready {
            peer,
            hello: hello.clone(),
            udp_port,
            rcvbuf_granted: granted,
        });

        let done_flag = AtomicBool::new(false);
        let last_rx = AtomicU64::new(0);
        let mut stats = RecvStats::new(RecvConfig::from_hello(&hello));
        let expected_ip = peer.ip();
        // Time the client needs to send everything, plus margin: the wait for `done` is bounded.
        let send_time =
            Duration::from_nanos(hello.count.saturating_mul(hello.spacing_ns)).min(Duration::from_secs(7 * 24 * 3600));
        let (outcome, stats) = std::thread::scope(|s| {
            let rx = s.spawn(|| {
                let mut buf = vec![0u8; 65_536];
                while !done_flag.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                    match udp.recv_from(&mut buf) {
                        Ok((n, from)) => {
                            let t = now_ns();
                            last_rx.store(t, Ordering::Relaxed);
                            stats.on_datagram(t, &buf[..n], from.ip() == expected_ip);
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock
                                    | std::io::ErrorKind::TimedOut
                                    | std::io::ErrorKind::Interrupted
                            ) => {}
                        // ICMP errors reported on the socket (e.g. a port unreachable) are not data.
                        Err(_) => {}
                    }
                }
                // Whatever already sits in the socket buffer arrived before we stopped: count it.
                // (A thread starved of CPU under load can be far behind when `done` comes.)
                if udp.set_nonblocking(true).is_ok() {
                    for _ in 0..1_000_000 {
                        let Ok((n, from)) = udp.recv_from(&mut buf) else { break };
                        let t = now_ns();
                        stats.on_datagram(t, &buf[..n], from.ip() == expected_ip);
                    }
                }
                stats
            });
            let outcome = control
                .recv(send_time + Duration::from_secs(60), "done")
                .and_then(|m| match m {
                    ControlMsg::Done(d) => Ok(d.sent),
                    ControlMsg::Error(e) => Err(SessionError::Refused(e.message)),
                    other => Err(SessionError::Unexpected(other.name())),
                });
            // Drain: stop once no datagram arrived for `drain`, or after 10 drains in all.
            let start = Instant::now();
            while start.elapsed() < self.config.drain * 10 {
                let quiet = now_ns().saturating_sub(last_rx.load(Ordering::Relaxed));
                if Duration::from_nanos(quiet) >= self.config.drain {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            done_flag.store(true, Ordering::Relaxed);
            let stats = rx
                .join()
                .unwrap_or_else(|_| RecvStats::new(RecvConfig::from_hello(&hello)));
            (outcome, stats)
        });
        let sent = outcome?;
        let report = stats.finish(Some(sent), now_ns());
        control.send(&ControlMsg::Results(Box::new(Results {
            receiver: report.clone(),
        })))?;
        on_event(ServerEvent::Finished {
            peer,
            report: Box::new(report),
        });
        Ok(())
    }
}

/// A UDP socket on `ip`, ephemeral port, with the receive buffer asked for; returns the
/// buffer the kernel granted (Linux reports twice the usable size; we report it as read back).
fn bind_udp(ip: IpAddr, rcvbuf: usize) -> Result<(UdpSocket, usize), SessionError> {
    let sock = Socket::new(
        Domain::for_address(SocketAddr::new(ip, 0)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .map_err(io("UDP socket"))?;
    // Best effort: the kernel caps this at net.core.rmem_max; what it granted is reported.
    let _ = sock.set_recv_buffer_size(rcvbuf);
    let granted = sock.recv_buffer_size().map_err(io("read SO_RCVBUF"))?;
    sock.bind(&SocketAddr::new(ip, 0).into()).map_err(io("bind UDP"))?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(io("UDP timeout"))?;
    Ok((sock.into(), granted))
}

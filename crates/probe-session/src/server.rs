//! The probe server: runs one measurement at a time (two would measure each other), forever or
//! for a given number of sessions, while handshakes are served concurrently
//! ([`ctlchan::serve`]): an idle connection cannot block a client, a client that arrives during
//! a measurement is told the server is busy, and only authenticated sessions count towards
//! `max_sessions`. A failed session (bad key, malformed control, client gone) is reported and
//! the server goes on serving. What a hello may ask for is bounded by the server
//! ([`ServerConfig::max_rcvbuf`], [`ServerConfig::max_duration`]).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use netio::batch::{enable_rx_timestamps, RecvBatch};
use netio::{bind_udp, BufferGrant, BufferRequest};
use probe::auth::{ServerHandshake, ServerStep};
use std::io::Write;

use probe::control::{ControlMsg, ErrorMsg, Hello, Interim, Results};
use probe::recv_stats::{ReceiverReport, RecvConfig, RecvStats};
use probe::results::ReceiverSocket;
use probe::tcp_results::TcpReceiverReport;

use crate::host::{interface_of, socket_drops, HostSnapshot};
use crate::{io, nonce, now_ns, realtime_ns, Control, SessionError, MAX_LINE};

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
    /// Largest receive buffer a client may ask for, bytes.
    pub max_rcvbuf: u64,
    /// Longest test a client may ask for (a UDP test's count × spacing, at least 1 µs per
    /// datagram; a TCP test's duration).
    pub max_duration: Duration,
    /// Connections in their handshake at once (the oldest is closed for a new one).
    pub max_pending: usize,
}

impl ServerConfig {
    /// Defaults for `listen`: no key, 64 MiB receive buffer, 10 s handshake, 200 ms drain; a
    /// client may ask for at most 256 MiB of buffer and 1 hour; 64 handshakes at once.
    pub fn new(listen: SocketAddr) -> Self {
        ServerConfig {
            listen,
            key: None,
            rcvbuf: 64 << 20,
            handshake_timeout: Duration::from_secs(10),
            drain: Duration::from_millis(200),
            max_rcvbuf: 256 << 20,
            max_duration: Duration::from_secs(3600),
            max_pending: 64,
        }
    }

    /// `Err` naming what a hello asks for beyond this server's limits.
    fn check_limits(&self, h: &Hello) -> Result<(), String> {
        if let Some(b) = h.rcvbuf {
            if b > self.max_rcvbuf {
                return Err(format!(
                    "a receive buffer of {b} B is above this server's limit of {} B (--max-rcvbuf)",
                    self.max_rcvbuf
                ));
            }
        }
        let asked = match &h.tcp {
            Some(t) => Duration::from_millis(t.duration_ms),
            None => Duration::from_nanos(h.count.saturating_mul(h.spacing_ns.max(1000))),
        };
        if asked > self.max_duration {
            return Err(format!(
                "a test of {:.0} s is longer than this server's limit of {:.0} s (--max-duration)",
                asked.as_secs_f64(),
                self.max_duration.as_secs_f64()
            ));
        }
        Ok(())
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

    /// Serve until `stop` is set or `max_sessions` authenticated sessions have ended.
    pub fn serve(
        &self,
        stop: &AtomicBool,
        max_sessions: Option<u64>,
        mut on_event: impl FnMut(ServerEvent),
    ) -> Result<ctlchan::serve::ServeStats, SessionError> {
        let limits = ctlchan::serve::Limits {
            max_pending: self.config.max_pending,
            handshake_timeout: self.config.handshake_timeout,
            max_active: 1,
        };
        let handler = |stream: TcpStream,
                       peer: SocketAddr,
                       ticket: &ctlchan::serve::Ticket<'_>,
                       tx: &std::sync::mpsc::Sender<ServerEvent>| {
            let mut emit = |e: ServerEvent| {
                let _ = tx.send(e);
            };
            if let Err(e) = self.session(stream, peer, ticket, stop, &mut emit) {
                emit(ServerEvent::Failed {
                    peer: Some(peer),
                    error: e.to_string(),
                });
            }
        };
        ctlchan::serve::serve(&self.listener, stop, &limits, max_sessions, &handler, &mut on_event)
            .map_err(io("accept connections"))
    }

    fn session(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        ticket: &ctlchan::serve::Ticket<'_>,
        stop: &AtomicBool,
        on_event: &mut impl FnMut(ServerEvent),
    ) -> Result<(), SessionError> {
        stream.set_nonblocking(false).map_err(io("set blocking"))?;
        let mut control = Control::new(stream)?;
        let mut hs = ServerHandshake::new(self.config.key.clone(), nonce());
        let hello = loop {
            let msg = control.recv(ticket.remaining(), "hello/auth")?;
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
        // Authenticated: now (and only now) it may take the measurement slot, within limits.
        // Limits first: a refused hello must not count as a session.
        let admitted = self
            .config
            .check_limits(&hello)
            .and_then(|()| ticket.authenticated().map_err(|e| e.to_string()));
        if let Err(message) = admitted {
            let _ = control.send(&ControlMsg::Error(ErrorMsg {
                message: message.clone(),
            }));
            return Err(SessionError::Refused(message));
        }
        let local_ip = control.stream().local_addr().map_err(io("local address"))?.ip();
        if let Some(tcp) = hello.tcp.clone() {
            return crate::tcp_server::session(
                control,
                &hs,
                &hello,
                &tcp,
                peer,
                crate::tcp_server::Limits {
                    handshake_timeout: self.config.handshake_timeout,
                },
                stop,
                on_event,
            );
        }
        let rcvbuf = hello
            .rcvbuf
            .map_or(self.config.rcvbuf, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let (udp, grant) = bind_udp(SocketAddr::new(local_ip, 0), BufferRequest { rcv: rcvbuf, snd: 0 })?;
        let granted_rcv = grant.granted_rcv as u64;
        let mut notes = vec![grant_note("receiver", grant.requested_rcv, grant.granted_rcv)];
        notes.extend(grant.warnings.iter().map(|w| format!("receiver: {w}")));
        // Before `ready`: the first socket on a host to ask for timestamps turns stamping on
        // through deferred kernel work (netio::batch::enable_rx_timestamps), which must be done
        // before the first datagram arrives.
        let stamped = match enable_rx_timestamps(&udp) {
            Ok(()) => true,
            Err(e) => {
                notes.push(format!(
                    "receiver: kernel receive timestamps unavailable ({e}); user-space arrival times used"
                ));
                false
            }
        };
        let udp_port = udp.local_addr().map_err(io("UDP local address"))?.port();
        let host0 = HostSnapshot::take(interface_of(local_ip).as_deref());
        control.send(&hs.ready(udp_port)?)?;
        on_event(ServerEvent::Ready {
            peer,
            hello: Box::new(hello.clone()),
            udp_port,
            grant: Some(grant),
        });

        // Interim reports go out from the receiving thread through a second handle to the control
        // socket; the main thread writes nothing until that thread has ended. A client that asks
        // for reports and never reads them would fill the TCP buffer and block that thread for
        // good: a write stalled for 10 s fails instead (and ends the reports, not the trial).
        let mut interim = match hello.interval_ms {
            Some(ms) => {
                let w = control
                    .stream()
                    .try_clone()
                    .map_err(io("clone the control connection"))?;
                w.set_write_timeout(Some(Duration::from_secs(10)))
                    .map_err(io("set the control write timeout"))?;
                Some((w, Duration::from_millis(ms)))
            }
            None => None,
        };
        let ready_at = Instant::now();
        let done_flag = AtomicBool::new(false);
        let last_rx = AtomicU64::new(now_ns());
        let mut stats = RecvStats::new(RecvConfig::from_hello(&hello));
        let expected_ip = peer.ip();
        // Time the client needs to send everything, plus margin: the wait for `done` is bounded.
        let send_time =
            Duration::from_nanos(hello.count.saturating_mul(hello.spacing_ns)).min(self.config.max_duration);
        let (outcome, (stats, unstamped)) = std::thread::scope(|s| {
            let rx = s.spawn(|| {
                let mut batch = RecvBatch::new(64, 65_536);
                let mut unstamped = 0u64;
                let mut account = |batch: &RecvBatch, stats: &mut RecvStats| {
                    let fallback = realtime_ns();
                    for d in batch.iter() {
                        // Kernel receive time (SO_TIMESTAMPNS, CLOCK_REALTIME) when present: it
                        // excludes the wait in the socket buffer. The fallback reads the same clock.
                        let t = d.kernel_time.unwrap_or_else(|| {
                            unstamped += 1;
                            fallback
                        });
                        stats.on_datagram(t, d.data, d.from.ip() == expected_ip);
                    }
                };
                let mut next_interim = interim.as_ref().map(|(_, every)| ready_at + *every);
                while !done_flag.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                    // recvmmsg: up to 64 datagrams per system call; 20 ms bounds the wait so the
                    // done flag is seen.
                    match batch.recv_batch(&udp, Some(Duration::from_millis(20))) {
                        Ok(0) => {}
                        Ok(_) => {
                            last_rx.store(now_ns(), Ordering::Relaxed);
                            account(&batch, &mut stats);
                        }
                        // ICMP errors reported on the socket (e.g. a port unreachable) are not data.
                        Err(_) => {}
                    }
                    if let (Some((w, every)), Some(next)) = (interim.as_mut(), next_interim.as_mut()) {
                        if Instant::now() >= *next {
                            // A client that stopped reading ends the reports, not the trial.
                            if send_interim(w, &stats, ready_at).is_err() {
                                next_interim = None;
                            } else {
                                *next += *every;
                            }
                        }
                    }
                }
                // Whatever already sits in the socket buffer arrived before we stopped: count it.
                // (A thread starved of CPU under load can be far behind when `done` comes.)
                for _ in 0..100_000 {
                    match batch.recv_batch(&udp, Some(Duration::ZERO)) {
                        Ok(n) if n > 0 => account(&batch, &mut stats),
                        _ => break,
                    }
                }
                (stats, unstamped)
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
            let out = rx
                .join()
                .unwrap_or_else(|_| (RecvStats::new(RecvConfig::from_hello(&hello)), 0));
            (outcome, out)
        });
        let sent = outcome?;
        let report = stats.finish(Some(sent), realtime_ns());
        if stamped && unstamped > 0 {
            notes.push(format!(
                "receiver: {unstamped} datagrams came without a kernel timestamp; user-space arrival time used for them"
            ));
        }
        let host = host0.delta();
        let socket = ReceiverSocket {
            rcvbuf_requested: rcvbuf as u64,
            rcvbuf_granted: granted_rcv,
            drops: socket_drops(&udp),
        };
        control.send(&ControlMsg::Results(Box::new(Results {
            receiver: report.clone(),
            host: Some(host),
            notes,
            socket: Some(socket),
        })))?;
        on_event(ServerEvent::Finished {
            peer,
            report: Box::new(report),
        });
        Ok(())
    }
}

/// Send the receiver's counters so far as an `interim` line.
fn send_interim(w: &mut TcpStream, stats: &RecvStats, since: Instant) -> Result<(), SessionError> {
    let l = stats.live();
    let msg = ControlMsg::Interim(Interim {
        elapsed_ms: u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
        unique: l.unique,
        unique_bytes: l.unique_bytes,
        highest_seq: l.highest_seq,
        missing: l.highest_seq.map_or(0, |h| (h + 1).saturating_sub(l.unique)),
        reordered: l.reordered,
        duplicates: l.duplicates,
        strays: l.strays,
    });
    w.write_all(&msg.to_line(MAX_LINE)?).map_err(io("write interim"))
}

/// One line on a buffer request and what the kernel granted (Linux reports twice the usable size,
/// socket(7)).
pub(crate) fn grant_note(side: &str, requested: usize, granted: usize) -> String {
    let dir = if side == "receiver" { "receive" } else { "send" };
    format!(
        "{side}: UDP {dir} buffer {requested} B requested, kernel reports {granted} B ({} B usable)",
        granted / 2
    )
}

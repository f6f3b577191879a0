//! The probe server: runs one measurement at a time (two would measure each other), forever or
//! for a given number of sessions, while handshakes are served concurrently
//! ([`ctlchan::serve`]): an idle connection cannot block a client, a client that arrives during
//! a measurement is told the server is busy, and only authenticated sessions count towards
//! `max_sessions`. A failed session (bad key, malformed control, client gone) is reported and
//! the server goes on serving. What a hello may ask for is bounded by the server
//! ([`ServerConfig::max_rcvbuf`], [`ServerConfig::max_duration`]).

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use netio::batch::{enable_rx_timestamps, RecvBatch};
use netio::{bind_udp, BufferGrant, BufferRequest};
use probe::recv_stats::RecvStats;
use probe::results::ReceiverSocket;

use ctlchan::handshake::{Fresh, ServerHandshake, ServerStep};

use crate::accepted::{notice, send_ready, Authenticated, ServerEvent};
use crate::auth::DIALECT;
use crate::channel::{Control, ControlReader, ControlWriter};
use crate::clock::{now_ns, realtime_ns};
use crate::control::{ControlMsg, ErrorMsg, Hello, Interim, Results};
use crate::error::ProbeSessionError;
use crate::host::{interface_of, socket_drops, HostSnapshot};
use netio::io_err;

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
    fn check_limits(&self, h: &Hello) -> Result<(), BeyondLimit> {
        if let Some(b) = h.rcvbuf {
            if b > self.max_rcvbuf {
                return Err(BeyondLimit::Rcvbuf {
                    asked: b,
                    limit: self.max_rcvbuf,
                });
            }
        }
        let asked = match &h.tcp {
            Some(t) => Duration::from_millis(t.duration_ms),
            None => Duration::from_nanos(h.count.saturating_mul(h.spacing_ns.max(1000))),
        };
        if asked > self.max_duration {
            return Err(BeyondLimit::Duration {
                asked,
                limit: self.max_duration,
            });
        }
        Ok(())
    }
}

/// What a hello asks for beyond the server's limits (the server tells the client so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BeyondLimit {
    /// A receive buffer above `--max-rcvbuf`.
    #[error("a receive buffer of {asked} B is above this server's limit of {limit} B (--max-rcvbuf)")]
    Rcvbuf {
        /// Bytes asked for.
        asked: u64,
        /// The server's limit.
        limit: u64,
    },
    /// A test longer than `--max-duration`.
    #[error(
        "a test of {:.0} s is longer than this server's limit of {:.0} s (--max-duration)",
        asked.as_secs_f64(),
        limit.as_secs_f64()
    )]
    Duration {
        /// How long the test would take.
        asked: Duration,
        /// The server's limit.
        limit: Duration,
    },
}

/// A bound probe server.
pub struct Server {
    listener: TcpListener,
    config: ServerConfig,
}

impl Server {
    /// Bind the control port.
    pub fn bind(config: ServerConfig) -> Result<Self, ProbeSessionError> {
        let listener = TcpListener::bind(config.listen).map_err(io_err("bind control port"))?;
        listener.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
        Ok(Server { listener, config })
    }

    /// The control address actually bound (port 0 picks one).
    pub fn local_addr(&self) -> Result<SocketAddr, ProbeSessionError> {
        Ok(self.listener.local_addr().map_err(io_err("local address"))?)
    }

    /// Serve until `stop` is set or `max_sessions` authenticated sessions have ended.
    pub fn serve(
        &self,
        stop: &AtomicBool,
        max_sessions: Option<u64>,
        mut on_event: impl FnMut(ServerEvent),
    ) -> Result<ctlchan::serve::ServeStats, ProbeSessionError> {
        let limits = ctlchan::serve::Limits {
            max_pending: self.config.max_pending,
            handshake_timeout: self.config.handshake_timeout,
            max_active: 1,
            ..Default::default()
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
            .map_err(|e| io_err("accept connections")(e).into())
    }

    /// One connection: the handshake, admission, then a UDP trial or a TCP test.
    fn session(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        ticket: &ctlchan::serve::Ticket<'_>,
        stop: &AtomicBool,
        on_event: &mut impl FnMut(ServerEvent),
    ) -> Result<(), ProbeSessionError> {
        stream.set_nonblocking(false).map_err(io_err("set blocking"))?;
        let mut control = Control::new(stream);
        let (hs, hello) = self.handshake(&mut control, ticket)?;
        self.admit(&mut control, &hello, ticket)?;
        match hello.tcp.clone() {
            Some(tcp) => crate::tcp_server::session(
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
            ),
            None => self.udp_trial(control, &hs, hello, peer, stop, on_event),
        }
    }

    /// `hello`, and with a key the challenge–response, within the connection's deadline.
    fn handshake(
        &self,
        control: &mut Control,
        ticket: &ctlchan::serve::Ticket<'_>,
    ) -> Result<(Authenticated, Hello), ProbeSessionError> {
        let mut hs = ServerHandshake::new(DIALECT, self.config.key.clone(), Fresh::draw(), ticket.deadline());
        loop {
            let msg = control.recv(hs.remaining(Instant::now()), "hello/auth")?;
            match hs.handle(msg, Instant::now()) {
                Ok(ServerStep::Send(m)) => control.send(&m)?,
                Ok(ServerStep::Accepted {
                    hello: ControlMsg::Hello(h),
                    session_key,
                }) => return Ok((Authenticated { hs, session_key }, h)),
                // The handshake accepts only on a hello.
                Ok(ServerStep::Accepted { hello, .. }) => return Err(ProbeSessionError::Unexpected(hello.name())),
                Err(e) => {
                    // Tell the client why before hanging up; ignore a failure to do so.
                    let _ = control.send(&ControlMsg::Error(ErrorMsg { message: e.to_string() }));
                    return Err(e.into());
                }
            }
        }
    }

    /// Authenticated: now (and only now) it may take the measurement slot, within limits.
    /// Limits first: a refused hello must not count as a session.
    fn admit(
        &self,
        control: &mut Control,
        hello: &Hello,
        ticket: &ctlchan::serve::Ticket<'_>,
    ) -> Result<(), ProbeSessionError> {
        let refusal = match self.config.check_limits(hello) {
            Err(beyond) => Some(beyond.to_string()),
            Ok(()) => ticket.authenticated().err().map(|busy| busy.to_string()),
        };
        if let Some(message) = refusal {
            let _ = control.send(&ControlMsg::Error(ErrorMsg {
                message: message.clone(),
            }));
            return Err(ProbeSessionError::Refused(message));
        }
        Ok(())
    }

    /// The receiving socket of a UDP trial, set up before `ready`.
    fn open_udp(&self, local_ip: IpAddr, hello: &Hello) -> Result<UdpReceiver, ProbeSessionError> {
        let rcvbuf = hello
            .rcvbuf
            .map_or(self.config.rcvbuf, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let (udp, grant) = bind_udp(SocketAddr::new(local_ip, 0), BufferRequest { rcv: rcvbuf, snd: 0 })?;
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
        Ok(UdpReceiver {
            udp,
            grant,
            rcvbuf,
            notes,
            stamped,
        })
    }

    /// A UDP trial: socket, `ready`, receive until `done` and the drain, `results`.
    fn udp_trial(
        &self,
        control: Control,
        hs: &Authenticated,
        hello: Hello,
        peer: SocketAddr,
        stop: &AtomicBool,
        on_event: &mut impl FnMut(ServerEvent),
    ) -> Result<(), ProbeSessionError> {
        let mut control = control;
        let local_ip = control.stream().local_addr().map_err(io_err("local address"))?.ip();
        let UdpReceiver {
            udp,
            grant,
            rcvbuf,
            mut notes,
            stamped,
        } = self.open_udp(local_ip, &hello)?;
        let granted_rcv = grant.granted_rcv as u64;
        let udp_port = udp.local_addr().map_err(io_err("UDP local address"))?.port();
        let host0 = HostSnapshot::take(interface_of(local_ip).as_deref());
        send_ready(&mut control, hs, udp_port)?;
        on_event(ServerEvent::Ready {
            peer,
            hello: Box::new(hello.clone()),
            udp_port,
            grant: Some(grant),
        });
        let (mut reader, mut writer) = control.split()?;
        let (outcome, stats, unstamped) = self.receive(&udp, &hello, peer, &mut reader, &mut writer, stop)?;
        let sent = match outcome {
            Ok(sent) => sent,
            Err(e) => {
                if let Some(m) = notice(&e) {
                    let _ = writer.send(&m);
                }
                return Err(e);
            }
        };
        let report = stats.finish(Some(sent), realtime_ns());
        if stamped && unstamped > 0 {
            notes.push(format!(
                "receiver: {unstamped} datagrams came without a kernel timestamp; user-space arrival time used for them"
            ));
        }
        let socket = ReceiverSocket {
            rcvbuf_requested: rcvbuf as u64,
            rcvbuf_granted: granted_rcv,
            drops: socket_drops(&udp),
        };
        writer.send(&ControlMsg::Results(Box::new(Results {
            receiver: report.clone(),
            host: Some(host0.delta()),
            notes,
            socket: Some(socket),
        })))?;
        on_event(ServerEvent::Finished {
            peer,
            report: Box::new(report),
        });
        Ok(())
    }

    /// Count datagrams on a thread of their own (sending `interim` lines when asked for) while
    /// this one waits for `done`; then drain. Returns the client's count of datagrams sent (or
    /// why there is none), the statistics and how many datagrams came without a kernel stamp.
    fn receive(
        &self,
        udp: &UdpSocket,
        hello: &Hello,
        peer: SocketAddr,
        reader: &mut ControlReader,
        writer: &mut ControlWriter,
        stop: &AtomicBool,
    ) -> Result<(Result<u64, ProbeSessionError>, RecvStats, u64), ProbeSessionError> {
        // Interim reports go out from the receiving thread through the writing half of the
        // control connection; this thread writes nothing until that one has ended. A client
        // that asks for reports and never reads them would fill the TCP buffer and block that
        // thread for good: a write stalled for 10 s fails instead (and ends the reports, not
        // the trial).
        let interim = match hello.interval_ms {
            Some(ms) => {
                writer
                    .stream()
                    .set_write_timeout(Some(Duration::from_secs(10)))
                    .map_err(io_err("set the control write timeout"))?;
                Some((writer, Duration::from_millis(ms)))
            }
            None => None,
        };
        let rx = Receiving {
            udp,
            expected_ip: peer.ip(),
            ready_at: Instant::now(),
            done: AtomicBool::new(false),
            stop,
            last_rx: AtomicU64::new(now_ns()),
        };
        // Time the client needs to send everything, plus margin: the wait for `done` is bounded.
        let send_time =
            Duration::from_nanos(hello.count.saturating_mul(hello.spacing_ns)).min(self.config.max_duration);
        let (outcome, (stats, unstamped)) = std::thread::scope(|s| {
            let counting = s.spawn(|| rx.run(RecvStats::new(hello.recv_config()), interim));
            let outcome = reader
                .recv(send_time + Duration::from_secs(60), "done")
                .and_then(|m| match m {
                    ControlMsg::Done(d) => Ok(d.sent),
                    ControlMsg::Error(e) => Err(ProbeSessionError::Refused(e.message)),
                    other => Err(ProbeSessionError::Unexpected(other.name())),
                });
            rx.drain(self.config.drain);
            let out = counting
                .join()
                .unwrap_or_else(|_| (RecvStats::new(hello.recv_config()), 0));
            (outcome, out)
        });
        Ok((outcome, stats, unstamped))
    }
}

/// The receiving socket of a UDP trial and what setting it up found.
struct UdpReceiver {
    udp: UdpSocket,
    grant: BufferGrant,
    rcvbuf: usize,
    notes: Vec<String>,
    stamped: bool,
}

/// What the counting thread shares with the one waiting for `done`.
struct Receiving<'a> {
    udp: &'a UdpSocket,
    expected_ip: IpAddr,
    ready_at: Instant,
    /// Set once `done` came (or the control connection failed) and the drain is over.
    done: AtomicBool,
    stop: &'a AtomicBool,
    /// When the last datagram arrived, [`now_ns`].
    last_rx: AtomicU64,
}

impl Receiving<'_> {
    /// Count datagrams until [`Receiving::done`], then what is already in the socket buffer.
    fn run(&self, mut stats: RecvStats, mut interim: Option<(&mut ControlWriter, Duration)>) -> (RecvStats, u64) {
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
                stats.on_datagram(t, d.data, d.from.ip() == self.expected_ip);
            }
        };
        let mut next_interim = interim.as_ref().map(|(_, every)| self.ready_at + *every);
        while !self.done.load(Ordering::Relaxed) && !self.stop.load(Ordering::Relaxed) {
            // recvmmsg: up to 64 datagrams per system call; 20 ms bounds the wait so the
            // done flag is seen.
            match batch.recv_batch(self.udp, Some(Duration::from_millis(20))) {
                Ok(0) => {}
                Ok(_) => {
                    self.last_rx.store(now_ns(), Ordering::Relaxed);
                    account(&batch, &mut stats);
                }
                // ICMP errors reported on the socket (e.g. a port unreachable) are not data.
                Err(_) => {}
            }
            if let (Some((w, every)), Some(next)) = (interim.as_mut(), next_interim.as_mut()) {
                if Instant::now() >= *next {
                    // A client that stopped reading ends the reports, not the trial.
                    if send_interim(w, &stats, self.ready_at).is_err() {
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
            match batch.recv_batch(self.udp, Some(Duration::ZERO)) {
                Ok(n) if n > 0 => account(&batch, &mut stats),
                _ => break,
            }
        }
        (stats, unstamped)
    }

    /// Stop once no datagram arrived for `drain`, or after 10 drains in all; then tell the
    /// counting thread.
    fn drain(&self, drain: Duration) {
        let start = Instant::now();
        while start.elapsed() < drain * 10 {
            let quiet = now_ns().saturating_sub(self.last_rx.load(Ordering::Relaxed));
            if Duration::from_nanos(quiet) >= drain {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Send the receiver's counters so far as an `interim` line.
fn send_interim(w: &mut ControlWriter, stats: &RecvStats, since: Instant) -> Result<(), ProbeSessionError> {
    let l = stats.live();
    w.send(&ControlMsg::Interim(Interim {
        elapsed_ms: u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
        unique: l.unique,
        unique_bytes: l.unique_bytes,
        highest_seq: l.highest_seq,
        missing: l.highest_seq.map_or(0, |h| (h + 1).saturating_sub(l.unique)),
        reordered: l.reordered,
        duplicates: l.duplicates,
        strays: l.strays,
    }))
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

//! The probe client: handshake, paced UDP stream, results.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ctlchan::Role;
use netio::{connect_udp, BufferRequest};
use pacing::{Pacer, Spacing};

use crate::auth::{ClientHandshake, ClientStep};
use crate::control::{ControlMsg, Done, Hello, Interim, Results, MAX_INTERVAL_MS, MIN_INTERVAL_MS, PROTOCOL_VERSION};
use probe::results::{HostCounters, ProbeResult};
use probe::send_stats::{SendConfig, SendStats};
use probe::wire::{Packet, Repr, FLAG_LAST};

use crate::host::{interface_of, HostSnapshot};
use crate::server::grant_note;
use crate::{instant_ns, nonce, now_ns, Control, SessionError};
use netio::io_err;

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Server control address.
    pub server: SocketAddr,
    /// Datagram size (UDP payload), bytes.
    pub size: u32,
    /// Datagrams to send.
    pub count: u64,
    /// Spacing between departures, ns (0 = as fast as possible).
    pub spacing_ns: u64,
    /// Pre-shared key.
    pub key: Option<Vec<u8>>,
    /// Test id (random when `None`).
    pub test_id: Option<u64>,
    /// UDP send buffer to ask for, bytes.
    pub sndbuf: usize,
    /// Ask the server for interim counters this often while data flows (at least 100 ms).
    pub interval: Option<Duration>,
    /// The receive buffer the server should ask its kernel for, bytes (`None`: its default).
    pub rcvbuf: Option<u64>,
    /// Datagrams per system call (UDP GSO where the kernel has it), released together at the
    /// deadline of the last of them; 1 = one `send` per datagram on its own deadline.
    pub burst: u32,
}

/// Largest `burst` (one GSO call carries at most 64 segments).
pub const MAX_BURST: u32 = 64;

/// Run one trial. `on_established` gets the server's data address (tests use it to inject
/// strays); `progress` is called with the number of datagrams sent so far.
pub fn run_client(
    config: &ClientConfig,
    on_established: impl FnOnce(SocketAddr),
    progress: impl FnMut(u64),
) -> Result<ProbeResult, SessionError> {
    run_client_live(config, on_established, progress, |_| {})
}

/// [`run_client`], and `on_interim` gets each interim report the server sends while data flows
/// (every [`ClientConfig::interval`]; called from a control-reading thread).
pub fn run_client_live(
    config: &ClientConfig,
    on_established: impl FnOnce(SocketAddr),
    mut progress: impl FnMut(u64),
    mut on_interim: impl FnMut(&Interim) + Send,
) -> Result<ProbeResult, SessionError> {
    let Connected {
        control,
        hello,
        port: udp_port,
        local_ip,
    } = connect_and_authenticate(config.server, config.key.clone(), config.test_id, |test_id| Hello {
        version: PROTOCOL_VERSION,
        test_id,
        size: config.size,
        count: config.count,
        spacing_ns: config.spacing_ns,
        client_nonce: None,
        interval_ms: config.interval.map(|d| {
            u64::try_from(d.as_millis())
                .unwrap_or(MAX_INTERVAL_MS)
                .clamp(MIN_INTERVAL_MS, MAX_INTERVAL_MS)
        }),
        rcvbuf: config.rcvbuf,
        tcp: None,
    })?;
    let test_id = hello.test_id;
    let dest = SocketAddr::new(config.server.ip(), udp_port);
    let (udp, grant) = connect_udp(
        SocketAddr::new(local_ip, 0),
        dest,
        BufferRequest {
            rcv: 0,
            snd: config.sndbuf,
        },
    )?;
    let mut notes = vec![grant_note("sender", grant.requested_snd, grant.granted_snd)];
    notes.extend(grant.warnings.iter().map(|w| format!("sender: {w}")));
    on_established(dest);

    let mut stats = SendStats::new(SendConfig::new(config.spacing_ns));
    // The control connection is read on its own thread (interim reports arrive while the pacer
    // owns this one); `done` goes out through the writing half.
    let (mut reader, mut writer) = control.split()?;
    let send_time = Duration::from_nanos(config.count.saturating_mul(config.spacing_ns));
    let wait = send_time.min(Duration::from_secs(7 * 24 * 3600)) + Duration::from_secs(60);
    let (sent, results) = std::thread::scope(|s| {
        let reader = s.spawn(move || -> Result<Box<Results>, SessionError> {
            loop {
                match reader.recv(wait, "results")? {
                    ControlMsg::Interim(i) => on_interim(&i),
                    ControlMsg::Results(r) => return Ok(r),
                    ControlMsg::Error(e) => return Err(SessionError::Refused(e.message)),
                    _ => return Err(SessionError::Unexpected("a message other than interim or results")),
                }
            }
        });
        let sent = send_all(config, test_id, local_ip, &udp, &mut stats, &mut progress);
        let done = ControlMsg::Done(Box::new(Done {
            sent: stats.packets(),
            sender: Some(stats.report()),
        }));
        let wrote = writer.send(&done);
        let results = reader
            .join()
            .unwrap_or(Err(SessionError::Unexpected("control reader panicked")));
        (wrote.map(|()| sent), results)
    });
    // A server that refused or failed explains more than our failed write of `done` would.
    let (sender_host, pacer, send_errors) = match sent {
        Ok(v) => v,
        Err(e) => return Err(results.err().unwrap_or(e)),
    };
    let results = results?;
    let sender = stats.report();
    let Results {
        receiver,
        host: receiver_host,
        notes: receiver_notes,
        socket,
    } = *results;
    let mut result = ProbeResult::new(hello.params(), Some(sender), Some(receiver));
    result.host = HostCounters {
        sender: Some(sender_host),
        receiver: receiver_host,
    };
    if pacer.slips() > 0 {
        notes.push(format!(
            "sender: fell more than {:.0} us behind schedule {} times; the timeline was re-anchored each time, \
             {:.3} ms given up in all",
            pacer.max_lag().as_secs_f64() * 1e6,
            pacer.slips(),
            pacer.slipped_total().as_secs_f64() * 1e3
        ));
    }
    if config.burst > 1 {
        notes.push(format!(
            "sender: --burst {}: datagrams left {} per system call (UDP GSO), together at the deadline of the last",
            config.burst, config.burst
        ));
    }
    if send_errors > 0 {
        notes.push(format!(
            "sender: {send_errors} datagrams could not be sent (socket buffer full or ICMP error)"
        ));
    }
    notes.extend(receiver_notes);
    result.notes = notes;
    result.receiver_socket = socket;
    Ok(result)
}

/// What the paced send loop leaves behind: the sender's host counters, the pacer (for its slips)
/// and the datagrams the kernel refused.
type SendOutcome = (hostcounters::HostDelta, Pacer, u64);

/// Send `count` datagrams on the pacer's timeline, recording each departure.
fn send_all(
    config: &ClientConfig,
    test_id: u64,
    local_ip: std::net::IpAddr,
    udp: &std::net::UdpSocket,
    stats: &mut SendStats,
    progress: &mut impl FnMut(u64),
) -> SendOutcome {
    let size = config.size as usize;
    let burst = config.burst.clamp(1, MAX_BURST) as usize;
    let mut buf = vec![0u8; size * burst];
    // The size was validated in hello, so emitting the headers cannot fail; a failure would only
    // leave a header zero and the receiver would count strays.
    for seg in buf.chunks_exact_mut(size) {
        let _ = Repr {
            flags: 0,
            test_id,
            seq: 0,
            send_ns: 0,
            size,
        }
        .emit(&mut Packet::new_unchecked(seg));
    }
    let host0 = HostSnapshot::take(interface_of(local_ip).as_deref());
    let start = Instant::now() + Duration::from_millis(1);
    // Packet n is due at start + n·spacing on an absolute timeline (no drift); falling more than
    // the pacer's bound behind re-anchors instead of bursting, and is reported in the notes.
    let mut pacer = Pacer::new(start, Spacing::from_nanos(config.spacing_ns));
    let mut send_errors = 0u64;
    let every = (config.count / 200).max(1);
    let mut seq = 0u64;
    let mut scheduled = Vec::with_capacity(burst);
    while seq < config.count {
        let n = (config.count - seq).min(burst as u64);
        // A burst leaves at the deadline of its last datagram, so none leaves early.
        scheduled.clear();
        scheduled.extend((0..n).map(|i| instant_ns(pacer.deadline(pacer.sent() + i))));
        netio::pacer::wait_until(pacer.release_deadline(n));
        let now = Instant::now();
        pacer.on_sent_batch(now, n as usize);
        let t = now_ns();
        for (i, seg) in buf.chunks_exact_mut(size).take(n as usize).enumerate() {
            // Only the header changes between datagrams; the padding was written once.
            let mut p = Packet::new_unchecked(seg);
            let q = seq + i as u64;
            p.set_seq(q);
            p.set_send_ns(t);
            p.set_flags(if q + 1 == config.count { FLAG_LAST } else { 0 });
        }
        let bytes = &buf[..size * n as usize];
        let went = if n == 1 {
            udp.send(bytes).map(|_| 1)
        } else {
            netio::send_gso(udp, bytes, size).map(|g| g.datagrams)
        };
        match went {
            Ok(k) => {
                for &sched in scheduled.iter().take(k) {
                    stats.on_sent(sched, t, size);
                }
                send_errors += n - (k as u64).min(n);
            }
            // A full socket buffer or an ICMP error from an earlier datagram: not sent, counted.
            Err(_) => send_errors += n,
        }
        if seq / every != (seq + n) / every {
            progress(seq + n);
        }
        seq += n;
    }
    let host = host0.delta();
    progress(config.count);
    (host, pacer, send_errors)
}

/// The control connection after a successful handshake.
pub(crate) struct Connected {
    pub control: Control,
    /// The hello the server accepted.
    pub hello: Hello,
    /// The data port the server gave.
    pub port: u16,
    /// Our address on the control connection (the data sockets bind to it).
    pub local_ip: std::net::IpAddr,
}

/// Connect the control channel to `server`, pick a random test id unless one is given, send the
/// hello `make_hello(test_id)` and run the (optionally keyed) handshake to `ready`.
pub(crate) fn connect_and_authenticate(
    server: SocketAddr,
    key: Option<Vec<u8>>,
    test_id: Option<u64>,
    make_hello: impl FnOnce(u64) -> Hello,
) -> Result<Connected, SessionError> {
    let stream =
        TcpStream::connect_timeout(&server, Duration::from_secs(5)).map_err(io_err("connect to the probe server"))?;
    let local_ip = stream.local_addr().map_err(io_err("local address"))?.ip();
    let mut control = Control::new(stream);
    let test_id = test_id.unwrap_or_else(|| {
        let n = nonce();
        u64::from_le_bytes([n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]])
    });
    let hello = make_hello(test_id);
    let mut hs = ClientHandshake::new(hello.clone(), key, nonce());
    control.send(&hs.hello())?;
    let port = loop {
        let msg = control.recv(Duration::from_secs(10), "ready")?;
        if let ControlMsg::Error(e) = &msg {
            return Err(SessionError::Refused(e.message.clone()));
        }
        match hs.handle(msg)? {
            ClientStep::Send(m) => control.send(&m)?,
            ClientStep::Established { udp_port, session_key } => {
                // The server switched right after `ready`; so do we, before anything else.
                control.authenticate(session_key, Role::Client);
                break udp_port;
            }
        }
    };
    Ok(Connected {
        control,
        hello,
        port,
        local_ip,
    })
}

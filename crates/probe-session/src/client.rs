//! The probe client: handshake, paced UDP stream, results.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use probe::auth::{ClientHandshake, ClientStep};
use probe::control::{ControlMsg, Done, Hello, PROTOCOL_VERSION};
use probe::results::{ProbeResult, TestParams};
use probe::send_stats::{SendConfig, SendStats};
use probe::wire::{Packet, Repr, FLAG_LAST};
use socket2::{Domain, Protocol, Socket, Type};

use crate::{io, nonce, now_ns, Control, SessionError};
use netio::pacer::wait_until;

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
}

/// Run one trial. `on_established` gets the server's data address (tests use it to inject
/// strays); `progress` is called with the number of datagrams sent so far.
pub fn run_client(
    config: &ClientConfig,
    on_established: impl FnOnce(SocketAddr),
    mut progress: impl FnMut(u64),
) -> Result<ProbeResult, SessionError> {
    let stream = TcpStream::connect_timeout(&config.server, Duration::from_secs(5))
        .map_err(io("connect to the probe server"))?;
    let local_ip = stream.local_addr().map_err(io("local address"))?.ip();
    let mut control = Control::new(stream)?;
    let test_id = config.test_id.unwrap_or_else(|| {
        let n = nonce();
        u64::from_le_bytes([n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]])
    });
    let hello = Hello {
        version: PROTOCOL_VERSION,
        test_id,
        size: config.size,
        count: config.count,
        spacing_ns: config.spacing_ns,
        client_nonce: None,
    };
    let mut hs = ClientHandshake::new(hello.clone(), config.key.clone(), nonce());
    control.send(&hs.hello())?;
    let udp_port = loop {
        let msg = control.recv(Duration::from_secs(10), "ready")?;
        if let ControlMsg::Error(e) = &msg {
            return Err(SessionError::Refused(e.message.clone()));
        }
        match hs.handle(msg)? {
            ClientStep::Send(m) => control.send(&m)?,
            ClientStep::Established { udp_port } => break udp_port,
        }
    };
    let dest = SocketAddr::new(config.server.ip(), udp_port);
    let sock = Socket::new(Domain::for_address(dest), Type::DGRAM, Some(Protocol::UDP)).map_err(io("UDP socket"))?;
    // Best effort: the kernel caps this at net.core.wmem_max.
    let _ = sock.set_send_buffer_size(config.sndbuf);
    sock.bind(&SocketAddr::new(local_ip, 0).into())
        .map_err(io("bind UDP"))?;
    sock.connect(&dest.into()).map_err(io("connect UDP"))?;
    let udp: UdpSocket = sock.into();
    on_established(dest);

    let size = config.size as usize;
    let mut buf = vec![0u8; size];
    Repr {
        flags: 0,
        test_id,
        seq: 0,
        send_ns: 0,
        size,
    }
    .emit(&mut Packet::new_unchecked(&mut buf[..]))
    .map_err(|e| SessionError::Refused(e.to_string()))?;
    let mut stats = SendStats::new(SendConfig::new(config.spacing_ns));
    let start = Instant::now() + Duration::from_millis(1);
    let start_ns = now_ns() + 1_000_000;
    let mut send_errors = 0u64;
    let every = (config.count / 200).max(1);
    for seq in 0..config.count {
        let offset = seq.saturating_mul(config.spacing_ns);
        wait_until(start + Duration::from_nanos(offset));
        let t = now_ns();
        {
            // Only the header changes between datagrams; the padding was written once.
            let mut p = Packet::new_unchecked(&mut buf[..]);
            p.set_seq(seq);
            p.set_send_ns(t);
            p.set_flags(if seq + 1 == config.count { FLAG_LAST } else { 0 });
        }
        match udp.send(&buf) {
            Ok(n) => stats.on_sent(start_ns + offset, t, n),
            // A full socket buffer or an ICMP error from an earlier datagram: not sent, counted.
            Err(_) => send_errors += 1,
        }
        if seq % every == 0 {
            progress(seq);
        }
    }
    progress(config.count);
    let sender = stats.report();
    control.send(&ControlMsg::Done(Box::new(Done {
        sent: stats.packets(),
        sender: Some(sender.clone()),
    })))?;
    let receiver = match control.recv(Duration::from_secs(30), "results")? {
        ControlMsg::Results(r) => r.receiver,
        ControlMsg::Error(e) => return Err(SessionError::Refused(e.message)),
        _ => return Err(SessionError::Unexpected("a message other than results")),
    };
    let mut result = ProbeResult::new(TestParams::from(&hello), Some(sender), Some(receiver));
    if send_errors > 0 {
        result.notes.push(format!(
            "{send_errors} datagrams could not be sent (socket buffer full or ICMP error)"
        ));
    }
    Ok(result)
}

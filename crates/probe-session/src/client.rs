//! The probe client: handshake, paced UDP stream, results.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use netio::{connect_udp, BufferRequest, Pacer, Spacing};
use probe::auth::{ClientHandshake, ClientStep};
use probe::control::{ControlMsg, Done, Hello, Results, PROTOCOL_VERSION};
use probe::results::{HostCounters, ProbeResult, TestParams};
use probe::send_stats::{SendConfig, SendStats};
use probe::wire::{Packet, Repr, FLAG_LAST};

use crate::host::{interface_of, HostSnapshot};
use crate::server::grant_note;
use crate::{instant_ns, io, nonce, now_ns, Control, SessionError};

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
    let host0 = HostSnapshot::take(interface_of(local_ip).as_deref());
    let start = Instant::now() + Duration::from_millis(1);
    // Packet n is due at start + n·spacing on an absolute timeline (no drift); falling more than
    // the pacer's bound behind re-anchors instead of bursting, and is reported below.
    let mut pacer = Pacer::new(start, Spacing::from_nanos(config.spacing_ns));
    let mut send_errors = 0u64;
    let every = (config.count / 200).max(1);
    for seq in 0..config.count {
        let scheduled = instant_ns(pacer.next_deadline());
        pacer.wait_next();
        let t = now_ns();
        {
            // Only the header changes between datagrams; the padding was written once.
            let mut p = Packet::new_unchecked(&mut buf[..]);
            p.set_seq(seq);
            p.set_send_ns(t);
            p.set_flags(if seq + 1 == config.count { FLAG_LAST } else { 0 });
        }
        match udp.send(&buf) {
            Ok(n) => stats.on_sent(scheduled, t, n),
            // A full socket buffer or an ICMP error from an earlier datagram: not sent, counted.
            Err(_) => send_errors += 1,
        }
        if seq % every == 0 {
            progress(seq);
        }
    }
    let sender_host = host0.delta();
    progress(config.count);
    let sender = stats.report();
    control.send(&ControlMsg::Done(Box::new(Done {
        sent: stats.packets(),
        sender: Some(sender.clone()),
    })))?;
    let results = match control.recv(Duration::from_secs(30), "results")? {
        ControlMsg::Results(r) => r,
        ControlMsg::Error(e) => return Err(SessionError::Refused(e.message)),
        _ => return Err(SessionError::Unexpected("a message other than results")),
    };
    let Results {
        receiver,
        host: receiver_host,
        notes: receiver_notes,
    } = *results;
    let mut result = ProbeResult::new(TestParams::from(&hello), Some(sender), Some(receiver));
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
    if send_errors > 0 {
        notes.push(format!(
            "sender: {send_errors} datagrams could not be sent (socket buffer full or ICMP error)"
        ));
    }
    notes.extend(receiver_notes);
    result.notes = notes;
    Ok(result)
}

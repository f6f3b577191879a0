//! The server side of a TCP test: a data listener on an ephemeral port, one connection per
//! stream from the client's address whose preamble names the session, a reader thread per stream
//! counting bytes, `tcp_done`, the drain to every stream's end, `tcp_results`.
//!
//! A client that vanishes (control connection closed, streams reset) ends the test early: the
//! receiver report says `partial` and why, keeps the bytes counted, and is handed to the caller
//! as a [`ServerEvent::TcpFinished`]; the server then goes on serving.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use probe::tcp::{Preamble, PREAMBLE_LEN};
use probe::tcp_results::{TcpReceiverReport, TcpStreamRx};

use crate::accepted::{notice, send_ready, Authenticated, ServerEvent};
use crate::channel::Control;
use crate::clock::now_ns;
use crate::control::{clip, ControlMsg, ErrorMsg, Hello, TcpDone, TcpHello, TcpResults};
use crate::error::ProbeSessionError;
use crate::host::{interface_of, HostSnapshot};
use netio::io_err;

/// Most refused connections to the data port before the session gives up.
const MAX_STRAY_CONNECTIONS: u64 = 1000;
/// After `tcp_done`, the longest wait for every stream to end (the sender's socket buffers drain).
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// Bytes per read: iperf3's 128 KiB, so the two compare like for like.
const READ_SIZE: usize = 128 * 1024;

/// Server limits that apply to a TCP test.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Longest wait for the data connections (and each one's preamble).
    pub handshake_timeout: Duration,
}

/// Accept one connection per stream from `peer`'s address carrying the session's preamble.
fn accept_streams(
    listener: &TcpListener,
    peer: SocketAddr,
    test_id: u64,
    streams: u16,
    limits: Limits,
    stop: &AtomicBool,
) -> Result<(Vec<TcpStream>, u64), ProbeSessionError> {
    let mut conns: Vec<Option<TcpStream>> = (0..streams).map(|_| None).collect();
    let mut strays = 0u64;
    let deadline = Instant::now() + limits.handshake_timeout;
    while conns.iter().any(Option::is_none) {
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            let got = conns.iter().filter(|c| c.is_some()).count();
            return Err(ProbeSessionError::Refused(format!(
                "{got} of {streams} data connections arrived within {:.1} s",
                limits.handshake_timeout.as_secs_f64()
            )));
        }
        if strays >= MAX_STRAY_CONNECTIONS {
            return Err(ProbeSessionError::Refused(format!(
                "{strays} stray connections to the data port"
            )));
        }
        let (mut s, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err("accept a data connection")(e).into()),
        };
        if from.ip() != peer.ip() {
            strays += 1;
            continue;
        }
        let mut pre = [0u8; PREAMBLE_LEN];
        let ok = s.set_nonblocking(false).is_ok()
            && s.set_read_timeout(Some(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(10)),
            ))
            .is_ok()
            && s.read_exact(&mut pre).is_ok();
        match Preamble::parse(&pre) {
            Ok(p) if ok && p.test_id == test_id && p.stream < streams && conns[usize::from(p.stream)].is_none() => {
                conns[usize::from(p.stream)] = Some(s);
            }
            _ => strays += 1,
        }
    }
    Ok((conns.into_iter().flatten().collect(), strays))
}

/// What one reader saw.
struct Counted {
    bytes: AtomicU64,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
}

/// Read a stream to its end (or until told to stop); returns what ended it other than an
/// orderly close.
fn read_stream(mut s: &TcpStream, c: &Counted, stop: &AtomicBool, give_up: &AtomicU64) -> Option<String> {
    if let Err(e) = s.set_read_timeout(Some(Duration::from_millis(200))) {
        return Some(format!("set the read timeout: {e}"));
    }
    let mut buf = vec![0u8; READ_SIZE];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => {
                let t = now_ns();
                if c.bytes.fetch_add(n as u64, Ordering::Relaxed) == 0 {
                    c.first_ns.store(t, Ordering::Relaxed);
                }
                c.last_ns.store(t, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return Some("stopped before the stream ended".into());
                }
                if now_ns() >= give_up.load(Ordering::Relaxed) {
                    return Some(format!(
                        "the stream did not end within {} s of the client's tcp_done",
                        DRAIN_LIMIT.as_secs()
                    ));
                }
            }
            Err(e) => return Some(e.to_string()),
        }
    }
}

/// Run the TCP test of an accepted `hello` on `control`: data port, `ready`, the streams,
/// counting until `tcp_done` and the drain, `tcp_results`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn session(
    mut control: Control,
    hs: &Authenticated,
    hello: &Hello,
    tcp: &TcpHello,
    peer: SocketAddr,
    limits: Limits,
    stop: &AtomicBool,
    on_event: &mut impl FnMut(ServerEvent),
) -> Result<(), ProbeSessionError> {
    let local_ip = control.stream().local_addr().map_err(io_err("local address"))?.ip();
    let listener = TcpListener::bind(SocketAddr::new(local_ip, 0)).map_err(io_err("bind the TCP data port"))?;
    listener.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
    let port = listener.local_addr().map_err(io_err("data port address"))?.port();
    let host0 = HostSnapshot::take(interface_of(local_ip).as_deref());
    send_ready(&mut control, hs, port)?;
    on_event(ServerEvent::Ready {
        peer,
        hello: Box::new(hello.clone()),
        udp_port: port,
        grant: None,
    });
    let (conns, strays) = match accept_streams(&listener, peer, hello.test_id, tcp.streams, limits, stop) {
        Ok(c) => c,
        Err(e) => {
            let _ = control.send(&ControlMsg::Error(ErrorMsg {
                message: clip(&netio::error_chain(&e)),
            }));
            return Err(e);
        }
    };
    drop(listener);
    let counted: Vec<Counted> = conns
        .iter()
        .map(|_| Counted {
            bytes: AtomicU64::new(0),
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(0),
        })
        .collect();
    let duration = Duration::from_millis(tcp.duration_ms);
    let (outcome, ends) = count_until_done(&mut control, &conns, &counted, duration);
    let host = host0.delta();
    let mut problems: Vec<String> = ends
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| format!("stream {i}: {e}")))
        .collect();
    let control_alive = match &outcome {
        Ok(_) => true,
        Err(ProbeSessionError::Refused(m)) => {
            problems.insert(0, format!("the client gave up: {m}"));
            true
        }
        Err(e) => {
            if let Some(m) = notice(e) {
                let _ = control.send(&m);
            }
            problems.insert(
                0,
                format!("the client went away before tcp_done ({})", netio::error_chain(e)),
            );
            false
        }
    };
    let report = receiver_report(&counted, &ends, strays, &problems);
    let sent = if control_alive {
        control.send(&ControlMsg::TcpResults(Box::new(TcpResults {
            receiver: report.clone(),
            host: Some(host),
            notes: Vec::new(),
        })))
    } else {
        Ok(())
    };
    on_event(ServerEvent::TcpFinished {
        peer,
        report: Box::new(report),
    });
    sent
}

/// A reader thread per stream counts bytes while this one waits for `tcp_done`; then the
/// streams drain (bounded by [`DRAIN_LIMIT`]), or stop at once when the client failed. Returns
/// the client's `tcp_done` (or why there is none) and what ended each stream.
fn count_until_done(
    control: &mut Control,
    conns: &[TcpStream],
    counted: &[Counted],
    duration: Duration,
) -> (Result<TcpDone, ProbeSessionError>, Vec<Option<String>>) {
    let stop_readers = AtomicBool::new(false);
    let give_up = AtomicU64::new(u64::MAX);
    std::thread::scope(|s| {
        let readers: Vec<_> = conns
            .iter()
            .zip(counted)
            .map(|(c, n)| {
                let (stop_readers, give_up) = (&stop_readers, &give_up);
                s.spawn(move || read_stream(c, n, stop_readers, give_up))
            })
            .collect();
        let outcome = control
            .recv(duration + Duration::from_secs(60), "tcp_done")
            .and_then(|m| match m {
                ControlMsg::TcpDone(d) => Ok(d),
                ControlMsg::Error(e) => Err(ProbeSessionError::Refused(e.message)),
                other => Err(ProbeSessionError::Unexpected(other.name())),
            });
        match &outcome {
            Ok(_) => {
                let limit = u64::try_from(DRAIN_LIMIT.as_nanos()).unwrap_or(u64::MAX);
                give_up.store(now_ns().saturating_add(limit), Ordering::Relaxed);
            }
            Err(_) => stop_readers.store(true, Ordering::Relaxed),
        }
        let ends: Vec<Option<String>> = readers
            .into_iter()
            .map(|r| r.join().unwrap_or_else(|_| Some("reader thread panicked".into())))
            .collect();
        (outcome, ends)
    })
}

/// The receiver's report from the per-stream counts; `partial` when anything went wrong.
fn receiver_report(
    counted: &[Counted],
    ends: &[Option<String>],
    strays: u64,
    problems: &[String],
) -> TcpReceiverReport {
    let first = counted
        .iter()
        .map(|c| c.first_ns.load(Ordering::Relaxed))
        .min()
        .unwrap_or(u64::MAX);
    let last = counted
        .iter()
        .map(|c| c.last_ns.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    let bytes: u64 = counted.iter().map(|c| c.bytes.load(Ordering::Relaxed)).sum();
    let duration_s = if last > first { (last - first) as f64 / 1e9 } else { 0.0 };
    TcpReceiverReport {
        streams: counted
            .iter()
            .zip(ends)
            .enumerate()
            .map(|(i, (c, e))| TcpStreamRx {
                stream: u16::try_from(i).unwrap_or(u16::MAX),
                bytes: c.bytes.load(Ordering::Relaxed),
                error: e.as_deref().map(clip),
            })
            .collect(),
        bytes,
        duration_s,
        rate_bps: (duration_s > 0.0).then(|| bytes as f64 * 8.0 / duration_s),
        stray_connections: strays,
        partial: !problems.is_empty(),
        error: (!problems.is_empty()).then(|| clip(&problems.join("; "))),
    }
}

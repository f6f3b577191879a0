//! The HTTP side: `GET /metrics` (OpenMetrics text), `GET /status.json`, `GET /` (the live
//! page, one self-contained file that polls `/status.json` every second).
//!
//! Connections are accepted by the project's accept loop ([`ctlchan::serve`]): each on its
//! own thread, at most [`MAX_PENDING`] still sending their request (the oldest of them is closed
//! for a new one, so idle connections never lock a scraper out), [`REQUEST_TIMEOUT`] to send
//! it, at most [`MAX_HEAD`] bytes of it, one request per connection (`Connection: close`).
//! The request head is parsed with `httparse`. No crate server fits these bounds: tiny_http
//! 0.12 reads header lines without a limit and sets no timeout on accepted connections.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ctlchan::serve::{Limits, Ticket};
use prometheus_client::registry::Registry;
use serde::Serialize;

use crate::history;
use crate::hub::Hub;
use crate::status::Status;

/// Largest request head read, bytes.
pub const MAX_HEAD: usize = 8192;
/// Time a connection has to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections that have not sent a complete request yet, at most.
pub const MAX_PENDING: usize = 64;
/// Responses being written at once, at most.
pub const MAX_ACTIVE: usize = 16;
/// Time to write a response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The live page: one file, no external resources.
const PAGE: &str = include_str!("page.html");

/// What the server counted, exported as metrics of its own in `/status.json`.
#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    bad_requests: AtomicU64,
}

/// A running metrics server; stops when dropped.
pub struct MetricsServer {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listen on `addr` and serve `hub`; a sampler thread adds a history point every second.
    pub fn start(addr: SocketAddr, hub: Arc<Hub>) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let local = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let sampler = {
            let (hub, stop) = (hub.clone(), stop.clone());
            std::thread::Builder::new()
                .name("metrics-history".into())
                .spawn(move || {
                    let mut next = started;
                    while !stop.load(Ordering::Relaxed) {
                        if Instant::now() >= next {
                            hub.sample_history(started.elapsed().as_secs_f64());
                            next += Duration::from_secs(1);
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                })?
        };
        let server = {
            let stop = stop.clone();
            std::thread::Builder::new().name("metrics-http".into()).spawn(move || {
                let site = Site {
                    registry: crate::collector::registry(hub.clone()),
                    hub,
                    counts: Counts::default(),
                    started,
                };
                let limits = Limits {
                    max_pending: MAX_PENDING,
                    handshake_timeout: REQUEST_TIMEOUT,
                    max_active: MAX_ACTIVE,
                    ..Limits::default()
                };
                let handler = |s: TcpStream, _: SocketAddr, t: &Ticket<'_>, _: &std::sync::mpsc::Sender<()>| {
                    site.connection(s, t);
                };
                // Accept errors are waited out inside; an error here is the listener itself.
                let _ = ctlchan::serve::serve(&listener, &stop, &limits, None, &handler, &mut |_| {});
            })?
        };
        Ok(MetricsServer {
            local,
            stop,
            threads: vec![sampler, server],
        })
    }

    /// The address bound (port 0 picks one).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What the handlers share.
struct Site {
    hub: Arc<Hub>,
    registry: Registry,
    counts: Counts,
    started: Instant,
}

/// `/status.json`.
#[derive(Serialize)]
struct StatusJson<'a> {
    program: &'a str,
    version: &'a str,
    uptime_s: f64,
    sources: Vec<SourceJson<'a>>,
    history: Vec<history::Series>,
    http_requests: u64,
    http_bad_requests: u64,
}

#[derive(Serialize)]
struct SourceJson<'a> {
    name: &'a str,
    #[serde(flatten)]
    status: &'a Status,
}

impl Site {
    /// One connection: read a bounded request head in time, answer it, close.
    fn connection(&self, mut s: TcpStream, ticket: &Ticket<'_>) {
        let head = match read_head(&mut s, ticket) {
            Ok(h) => h,
            Err(Some(status)) => {
                self.counts.bad_requests.fetch_add(1, Ordering::Relaxed);
                let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
                let _ = respond(&mut s, status, "text/plain", status.as_bytes(), false);
                linger(&mut s);
                return;
            }
            Err(None) => return,
        };
        if ticket.authenticated().is_err() {
            // Too many responses in flight, or the connection was closed meanwhile.
            return;
        }
        let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
        self.counts.requests.fetch_add(1, Ordering::Relaxed);
        let (status, kind, body) = self.route(&head);
        let _ = respond(&mut s, status, kind, &body, head.method == "HEAD");
        let _ = s.shutdown(Shutdown::Both);
    }

    fn route(&self, head: &Head) -> (&'static str, &'static str, Vec<u8>) {
        if head.method != "GET" && head.method != "HEAD" {
            return ("405 Method Not Allowed", "text/plain", b"GET only\n".to_vec());
        }
        let path = head.path.split('?').next().unwrap_or("");
        match path {
            "/metrics" => {
                let mut text = String::new();
                match prometheus_client::encoding::text::encode(&mut text, &self.registry) {
                    Ok(()) => (
                        "200 OK",
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        text.into_bytes(),
                    ),
                    Err(_) => ("500 Internal Server Error", "text/plain", b"encoding failed\n".to_vec()),
                }
            }
            "/status.json" => {
                let (program, version) = self.hub.program();
                let snapshot = self.hub.snapshot();
                let doc = StatusJson {
                    program,
                    version,
                    uptime_s: self.started.elapsed().as_secs_f64(),
                    sources: snapshot
                        .iter()
                        .map(|(name, status)| SourceJson { name, status })
                        .collect(),
                    history: self.hub.history(),
                    http_requests: self.counts.requests.load(Ordering::Relaxed),
                    http_bad_requests: self.counts.bad_requests.load(Ordering::Relaxed),
                };
                let body = serde_json::to_vec(&doc).unwrap_or_default();
                ("200 OK", "application/json", body)
            }
            "/" | "/index.html" => ("200 OK", "text/html; charset=utf-8", PAGE.as_bytes().to_vec()),
            _ => (
                "404 Not Found",
                "text/plain",
                b"not found: /metrics, /status.json, /\n".to_vec(),
            ),
        }
    }
}

/// The parts of a request line used here.
struct Head {
    method: String,
    path: String,
}

/// Read until the end of the request head; `Err(Some(status))` to answer with an error,
/// `Err(None)` to close silently (timeout, closed, evicted).
fn read_head(s: &mut TcpStream, ticket: &Ticket<'_>) -> Result<Head, Option<&'static str>> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut have = 0;
    loop {
        let left = ticket.remaining();
        if left.is_zero() {
            return Err(None);
        }
        s.set_read_timeout(Some(left)).map_err(|_| None)?;
        let n = match s.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return Err(None),
            Ok(n) => n,
        };
        have += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..have]) {
            Ok(httparse::Status::Complete(_)) => {
                return Ok(Head {
                    method: req.method.unwrap_or("").to_string(),
                    path: req.path.unwrap_or("").to_string(),
                })
            }
            Ok(httparse::Status::Partial) if have < MAX_HEAD => {}
            Ok(httparse::Status::Partial) => return Err(Some("431 Request Header Fields Too Large")),
            Err(httparse::Error::TooManyHeaders) => return Err(Some("431 Request Header Fields Too Large")),
            Err(_) => return Err(Some("400 Bad Request")),
        }
    }
}

/// Close after an error answer without resetting the connection: a close with unread request
/// bytes sends a TCP reset, which can destroy the answer before the client reads it. So the
/// rest is read and dropped first — at most [`LINGER_BYTES`], for at most [`LINGER`].
fn linger(s: &mut TcpStream) {
    let _ = s.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
    let mut buf = [0u8; 16384];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Most request bytes read and dropped after an error answer.
const LINGER_BYTES: usize = 2 << 20;
/// Longest time spent doing so.
const LINGER: Duration = Duration::from_secs(1);

fn respond(s: &mut TcpStream, status: &str, kind: &str, body: &[u8], head_only: bool) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    s.write_all(&out)
}

//! The metrics server over real TCP on 127.0.0.1: the three documents, bad requests answered
//! with their status, and idle or oversized connections that never keep a scraper out.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use metrics::{Hub, MetricsServer, Status};
use stream::results::RecvStatus;

fn get(addr: SocketAddr, request: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

fn server() -> (MetricsServer, metrics::Publisher) {
    let hub = Hub::new("stream recv", "9.9.9");
    let p = hub.source("stream_recv").unwrap();
    p.publish(Status::StreamRecv(RecvStatus {
        frames_written: 4242,
        rate_bps: 1e6,
        ..RecvStatus::default()
    }));
    (MetricsServer::start("127.0.0.1:0".parse().unwrap(), hub).unwrap(), p)
}

#[test]
fn the_three_documents_are_served() {
    let (srv, p) = server();
    let a = srv.local_addr();
    let (status, body) = get(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        body.contains("evlbi_stream_frames_written_total{source=\"stream_recv\"} 4242\n"),
        "{body}"
    );
    assert!(body.contains("evlbi_build_info{program=\"stream recv\",version=\"9.9.9\"} 1"));
    let (status, body) = get(a, b"GET /status.json HTTP/1.0\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["sources"][0]["kind"], "stream_recv");
    assert_eq!(doc["sources"][0]["status"]["frames_written"], 4242);
    let (status, body) = get(a, b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.starts_with("<!DOCTYPE html>") && body.contains("status.json"));
    // Nothing is fetched from elsewhere: one self-contained file.
    assert!(!body.contains("http://") && !body.contains("https://") && !body.contains("src=\""));
    // The counts change, the page sees the new ones.
    p.publish(Status::StreamRecv(RecvStatus {
        frames_written: 5000,
        ..RecvStatus::default()
    }));
    let (_, body) = get(a, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(body.contains("evlbi_stream_frames_written_total{source=\"stream_recv\"} 5000\n"));
}

#[test]
fn bad_requests_get_their_status() {
    let (srv, _p) = server();
    let a = srv.local_addr();
    assert_eq!(get(a, b"GET /nope HTTP/1.1\r\n\r\n").0, "HTTP/1.1 404 Not Found");
    assert_eq!(
        get(a, b"POST /metrics HTTP/1.1\r\n\r\n").0,
        "HTTP/1.1 405 Method Not Allowed"
    );
    assert_eq!(get(a, b"\x00\x01\x02 garbage\r\n\r\n").0, "HTTP/1.1 400 Bad Request");
    let mut big = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 1 << 20));
    // The server answers after MAX_HEAD bytes and closes; the rest of the megabyte is refused.
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(&big);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.1 431"),
        "{:?}",
        &out[..out.len().min(80)]
    );
}

#[test]
fn idle_connections_never_keep_a_scraper_out() {
    let (srv, _p) = server();
    let a = srv.local_addr();
    // Far more idle connections than the server keeps pending, some with half a request.
    let mut idle: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(a).unwrap()).collect();
    for s in idle.iter_mut().step_by(3) {
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
    }
    for _ in 0..20 {
        let (status, body) = get(a, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.contains("evlbi_stream_frames_written_total"));
    }
    // Served while the idle ones were open: the oldest pending were closed to make room.
    drop(idle);
}

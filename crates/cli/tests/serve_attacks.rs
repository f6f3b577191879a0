//! Attacks on `evlbi serve` over real sockets: floods of idle connections on its control and
//! metrics ports, every VSI-S keyword while a scan records, peers outside `--vsi-allow`, and
//! megabyte lines.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use common::vsi::Serve;
use testkit::flood::Flood;

/// Connect, think for `think`, send `request`; the first line of the answer, or why none came.
fn speak_after(addr: SocketAddr, think: Duration, request: &[u8]) -> Result<String, String> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    std::thread::sleep(think);
    (&s).write_all(request).map_err(|e| format!("write: {e}"))?;
    let mut line = String::new();
    match BufReader::new(&s).read_line(&mut line) {
        Ok(n) if n > 0 => Ok(line),
        Ok(_) => Err("closed without an answer".into()),
        Err(e) => Err(format!("read: {e}")),
    }
}

/// 20 clients one after another, each speaking 100 ms after its connect, while 3000 idle
/// connections a second arrive from the same address; the answers' first lines.
fn served_under_flood(target: SocketAddr, request: &[u8]) -> (Vec<Result<String, String>>, String) {
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    let flood = Flood::start(target, lo, 3000, Duration::from_secs(3), Duration::from_secs(30));
    // Let the idle places fill first.
    std::thread::sleep(Duration::from_millis(500));
    let outcomes = (0..20)
        .map(|_| speak_after(target, Duration::from_millis(100), request))
        .collect();
    let report = flood.finish();
    (outcomes, format!("flood {report:?} ({:.0}/s)", report.rate()))
}

/// The done-criterion of issue 28's control-port item: a client speaking 100 ms after
/// connecting is served under a 3000 conn/s flood (before: 64 waiting places, the oldest closed
/// first; 1600 conn/s closed every client speaking after 50 ms, 0 of 20 served).
#[test]
fn the_control_port_serves_a_client_thinking_100_ms_under_3000_idle_connections_a_second() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let (outcomes, flood) = served_under_flood(serve.vsi, b"version?;\n");
    let served = outcomes
        .iter()
        .filter(|o| o.as_ref().is_ok_and(|l| l.starts_with("!version? 0 : evlbi")))
        .count();
    let log = serve.stop();
    eprintln!("control port: served {served} of 20; {flood}; {log:?}");
    assert_eq!(served, 20, "{outcomes:?}\n{flood}\n{log:?}");
    // The flood did fill the idle places: connections were closed for newer ones.
    let closed: u64 = log
        .iter()
        .find_map(|l| l.split("control connection(s), ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary in {log:?}"));
    assert!(closed > 1000, "{closed} closed while idle: {log:?}");
}

/// The same flood on the metrics port: every scrape 100 ms after its connect is answered.
#[test]
fn the_metrics_port_serves_a_scraper_thinking_100_ms_under_3000_idle_connections_a_second() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let (outcomes, flood) = served_under_flood(serve.metrics, b"GET /metrics HTTP/1.0\r\n\r\n");
    let served = outcomes
        .iter()
        .filter(|o| o.as_ref().is_ok_and(|l| l.starts_with("HTTP/1.1 200 OK")))
        .count();
    eprintln!("metrics port: served {served} of 20; {flood}");
    assert_eq!(served, 20, "{outcomes:?}\n{flood}");
}

//! A man in the middle of the control connection (a TCP proxy on 127.0.0.1 that forwards both
//! ways line by line and alters, drops or replays one line after the handshake). With a
//! pre-shared key every line after `ready` carries a MAC under the session key, so the trial
//! fails with a MAC error instead of reporting the proxy's numbers; without a key the same proxy
//! gets through (that is what a key is for), which shows the proxy really does its work.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

mod common;

use probe_session::{run_client, run_client_live, run_tcp_client, ServerEvent, TcpClientConfig};

const KEY: &[u8] = b"sixteen-byte-key-for-tests";

/// What the proxy does to one line (without its newline): `None` leaves it alone, `Some(v)`
/// sends the lines in `v` instead (none: dropped; two: replayed).
type Tamper = fn(&str) -> Option<Vec<String>>;

/// A proxy to `target` that applies `to_server` to the client's lines and `to_client` to the
/// server's; the counter says how many lines it tampered with.
fn proxy(target: SocketAddr, to_server: Tamper, to_client: Tamper) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let tampered = Arc::new(AtomicUsize::new(0));
    let count = tampered.clone();
    thread::spawn(move || {
        let Ok((client, _)) = l.accept() else { return };
        let Ok(server) = TcpStream::connect(target) else { return };
        let pipe = |from: TcpStream, mut to: TcpStream, tamper: Tamper, count: Arc<AtomicUsize>| {
            thread::spawn(move || {
                let mut r = BufReader::new(from);
                let mut line = String::new();
                while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                    let body = line.trim_end_matches('\n');
                    let out = match tamper(body) {
                        None => line.clone(),
                        Some(v) => {
                            count.fetch_add(1, Ordering::Relaxed);
                            v.iter().map(|l| format!("{l}\n")).collect()
                        }
                    };
                    if to.write_all(out.as_bytes()).is_err() {
                        break;
                    }
                    line.clear();
                }
                let _ = to.shutdown(std::net::Shutdown::Write);
            })
        };
        let up = pipe(
            client.try_clone().unwrap(),
            server.try_clone().unwrap(),
            to_server,
            count.clone(),
        );
        let down = pipe(server, client, to_client, count);
        let _ = (up.join(), down.join());
    });
    (addr, tampered)
}

fn untouched(_: &str) -> Option<Vec<String>> {
    None
}

/// The `results` line with one more lost packet than the receiver counted (the MAC, if any,
/// left as it was).
fn inflate_loss(l: &str) -> Option<Vec<String>> {
    (l.starts_with("{\"type\":\"results\"") && l.contains("\"lost_packets\":0,"))
        .then(|| vec![l.replacen("\"lost_packets\":0,", "\"lost_packets\":7,", 1)])
}

/// A server on an ephemeral port serving one session; its events as text.
fn server(key: Option<&[u8]>) -> (SocketAddr, mpsc::Receiver<String>, thread::JoinHandle<()>) {
    common::serve(key, 1, Duration::from_secs(5), |e| match e {
        ServerEvent::Ready { .. } => "ready".to_string(),
        ServerEvent::Finished { report, .. } => format!("finished {}", report.lost_packets),
        ServerEvent::TcpFinished { report, .. } => format!("tcp {}", report.bytes),
        ServerEvent::Failed { error, .. } => format!("failed {error}"),
    })
}

use common::client;

fn assert_mac_error(e: &(dyn std::error::Error + 'static)) {
    let text = netio::error_chain(e);
    assert!(text.contains("failed authentication"), "{text}");
}

#[test]
fn an_altered_results_line_fails_the_keyed_trial_instead_of_reporting_the_proxys_numbers() {
    // Without a key the proxy's number gets through: the attack is real.
    let (addr, _events, h) = server(None);
    let (via, tampered) = proxy(addr, untouched, inflate_loss);
    let r = run_client(&client(via, 1000, None), |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    assert_eq!(tampered.load(Ordering::Relaxed), 1);
    assert_eq!(
        r.receiver.unwrap().lost_packets,
        7,
        "the unkeyed trial reports what the proxy wrote"
    );

    // With a key the altered line fails its MAC.
    let (addr, events, h) = server(Some(KEY));
    let (via, tampered) = proxy(addr, untouched, inflate_loss);
    let err = run_client(&client(via, 1000, Some(KEY)), |_| {}, |_| {}).unwrap_err();
    h.join().unwrap();
    assert_eq!(
        tampered.load(Ordering::Relaxed),
        1,
        "the proxy did alter the results line"
    );
    assert_mac_error(&err);
    // The server itself finished cleanly: nothing was lost, whatever the proxy said.
    let ev: Vec<String> = events.try_iter().collect();
    assert_eq!(ev, vec!["ready".to_string(), "finished 0".to_string()]);
}

#[test]
fn a_dropped_or_replayed_interim_line_fails_the_keyed_trial() {
    fn drop_first(l: &str) -> Option<Vec<String>> {
        static DONE: AtomicBool = AtomicBool::new(false);
        (l.starts_with("{\"type\":\"interim\"") && !DONE.swap(true, Ordering::Relaxed)).then(Vec::new)
    }
    fn replay_first(l: &str) -> Option<Vec<String>> {
        static DONE: AtomicBool = AtomicBool::new(false);
        (l.starts_with("{\"type\":\"interim\"") && !DONE.swap(true, Ordering::Relaxed))
            .then(|| vec![l.to_string(), l.to_string()])
    }
    for tamper in [drop_first as Tamper, replay_first] {
        let (addr, _events, h) = server(Some(KEY));
        let (via, tampered) = proxy(addr, untouched, tamper);
        // 12 000 × 50 µs = 0.6 s of data: interim lines every 150 ms.
        let mut cfg = client(via, 12_000, Some(KEY));
        cfg.spacing_ns = 50_000;
        cfg.interval = Some(Duration::from_millis(150));
        let seen = AtomicUsize::new(0);
        let err = run_client_live(
            &cfg,
            |_| {},
            |_| {},
            |_| {
                seen.fetch_add(1, Ordering::Relaxed);
            },
        )
        .unwrap_err();
        h.join().unwrap();
        assert_eq!(tampered.load(Ordering::Relaxed), 1);
        assert_mac_error(&err);
        // The replayed copy never reached the caller (the original did); a dropped one leaves
        // nothing behind it.
        assert!(seen.load(Ordering::Relaxed) <= 1, "{}", seen.load(Ordering::Relaxed));
    }
}

#[test]
fn an_altered_done_line_is_refused_by_the_keyed_server_and_the_client_hears_why() {
    fn fewer_sent(l: &str) -> Option<Vec<String>> {
        l.starts_with("{\"type\":\"done\",\"sent\":1000,")
            .then(|| vec![l.replacen("\"sent\":1000,", "\"sent\":2000,", 1)])
    }
    let (addr, events, h) = server(Some(KEY));
    let (via, tampered) = proxy(addr, fewer_sent, untouched);
    let err = run_client(&client(via, 1000, Some(KEY)), |_| {}, |_| {}).unwrap_err();
    h.join().unwrap();
    assert_eq!(tampered.load(Ordering::Relaxed), 1);
    assert_mac_error(&err);
    let ev: Vec<String> = events.try_iter().collect();
    assert!(
        ev.iter()
            .any(|e| e.starts_with("failed") && e.contains("failed authentication")),
        "{ev:?}"
    );
    assert!(!ev.iter().any(|e| e.starts_with("finished")), "{ev:?}");
}

#[test]
fn an_altered_tcp_results_line_leaves_a_partial_keyed_result_without_the_proxys_numbers() {
    fn more_bytes(l: &str) -> Option<Vec<String>> {
        l.starts_with("{\"type\":\"tcp_results\"")
            .then(|| vec![l.replacen("\"bytes\":", "\"bytes\":1", 1)])
    }
    let (addr, _events, h) = server(Some(KEY));
    let (via, tampered) = proxy(addr, untouched, more_bytes);
    let mut cfg = TcpClientConfig::new(via);
    cfg.key = Some(KEY.to_vec());
    cfg.duration = Duration::from_millis(300);
    cfg.interval = Duration::from_millis(100);
    cfg.sample_every = Duration::from_millis(50);
    let r = run_tcp_client(&cfg, |_| {}).unwrap();
    h.join().unwrap();
    assert_eq!(tampered.load(Ordering::Relaxed), 1);
    assert!(r.partial);
    assert!(r.receiver.is_none() && r.received_bytes.is_none(), "{:?}", r.receiver);
    let e = r.error.unwrap_or_default();
    assert!(e.contains("failed authentication"), "{e}");
}

//! evlbi probe sessions over real sockets on 127.0.0.1: a clean trial, forged and stray
//! datagrams injected mid-trial, a wrong key, and garbage on the control port.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

mod common;

use probe::wire::Repr;
use probe_session::{run_client, ServerEvent};

/// A server on an ephemeral port serving `sessions` sessions in a thread; events come back on
/// the channel.
fn server(key: Option<&[u8]>, sessions: u64) -> (SocketAddr, mpsc::Receiver<String>, thread::JoinHandle<()>) {
    common::serve(key, sessions, Duration::from_secs(3), |e| match e {
        ServerEvent::Ready { .. } => "ready".to_string(),
        ServerEvent::Finished { report, .. } => format!("finished {}", report.unique_packets),
        ServerEvent::TcpFinished { report, .. } => format!("tcp {}", report.bytes),
        ServerEvent::Failed { error, .. } => format!("failed {error}"),
    })
}

use common::client;

#[test]
fn clean_trial_counts_every_datagram() {
    let (addr, events, h) = server(None, 1);
    let r = run_client(&client(addr, 5000, None), |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    let rx = r.receiver.as_ref().unwrap();
    let tx = r.sender.as_ref().unwrap();
    assert_eq!(tx.packets_sent, 5000);
    // 5000 x 1.5 kB fit in the receive buffer, so even a stalled receiver thread loses nothing.
    assert_eq!(rx.unique_packets, 5000);
    assert_eq!(rx.lost_packets, 0);
    assert_eq!(rx.duplicates, 0);
    assert_eq!(rx.strays.total(), 0);
    assert_eq!(rx.expected_packets, 5000);
    assert!(rx.last_flag_seen);
    assert!(rx.user_rate_bps.unwrap() > 0.0);
    assert_eq!(r.params.size, 1472);
    let ev: Vec<String> = events.try_iter().collect();
    assert_eq!(ev, vec!["ready".to_string(), "finished 5000".to_string()]);
    // The whole result serialises (it is what --json prints).
    assert!(serde_json::to_string(&r).unwrap().contains("\"lost_packets\":0"));
}

fn datagram(test_id: u64, seq: u64, size: usize) -> Vec<u8> {
    Repr {
        flags: 0,
        test_id,
        seq,
        send_ns: 1,
        size,
    }
    .to_vec()
    .unwrap()
}

#[test]
fn forged_and_stray_datagrams_are_counted_apart() {
    let (addr, _events, h) = server(None, 1);
    let (dest_tx, dest_rx) = mpsc::channel::<SocketAddr>();
    let injector = thread::spawn(move || {
        let dest = dest_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut bad_magic = datagram(42, 3, 1472);
        bad_magic[0] = b'X';
        s.send_to(&bad_magic, dest).unwrap();
        s.send_to(&datagram(43, 4, 1472), dest).unwrap(); // another test's id
        s.send_to(b"a 27-byte stray datagram!!!", dest).unwrap(); // jive5ab died on this
        s.send_to(&datagram(42, 5, 1000), dest).unwrap(); // wrong size
        s.send_to(&datagram(42, 1 << 63, 1472), dest).unwrap(); // absurd sequence number
                                                                // Right test, right size, wrong sender address.
        let other = UdpSocket::bind("127.0.0.2:0").unwrap();
        other.send_to(&datagram(42, 6, 1472), dest).unwrap();
    });
    let r = run_client(&client(addr, 3000, None), move |d| dest_tx.send(d).unwrap(), |_| {}).unwrap();
    injector.join().unwrap();
    h.join().unwrap();
    let rx = r.receiver.unwrap();
    assert_eq!(rx.strays.bad_magic, 1);
    assert_eq!(rx.strays.wrong_test_id, 1);
    assert_eq!(rx.strays.too_short, 1);
    assert_eq!(rx.strays.wrong_size, 1);
    assert_eq!(rx.strays.other_peer, 1);
    assert_eq!(rx.out_of_window, 1);
    // None of it touched the data: every real datagram counted once, no loss invented.
    assert_eq!(rx.unique_packets, 3000);
    assert_eq!(rx.lost_packets, 0);
    assert_eq!(rx.expected_packets, 3000);
}

#[test]
fn wrong_key_is_refused_and_the_server_goes_on() {
    // Refused connections do not count as sessions: one good session ends the server.
    let (addr, events, h) = server(Some(b"correct horse"), 1);
    let err = run_client(&client(addr, 10, Some(b"wrong key")), |_| {}, |_| {}).unwrap_err();
    assert!(
        err.to_string().contains("auth") || err.to_string().contains("refused"),
        "{err}"
    );
    let err = run_client(&client(addr, 10, None), |_| {}, |_| {}).unwrap_err();
    assert!(!err.to_string().is_empty());
    let ok = run_client(&client(addr, 100, Some(b"correct horse")), |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    assert_eq!(ok.receiver.unwrap().unique_packets, 100);
    // Each connection's events come from its own thread: the server promises them, not their
    // order (a refused client's "failed" may follow the next client's "ready").
    let ev: Vec<String> = events.try_iter().collect();
    assert_eq!(ev.iter().filter(|e| e.starts_with("failed")).count(), 2, "{ev:?}");
    assert_eq!(ev.iter().filter(|e| *e == "finished 100").count(), 1, "{ev:?}");
}

#[test]
fn garbage_on_the_control_port_is_bounded_and_harmless() {
    let (addr, events, h) = server(None, 1);
    // Two megabytes without a newline: refused at the line bound, not buffered forever.
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(&vec![b'x'; 2 << 20]);
    drop(s);
    // A well-formed line that is not a valid message.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"{\"type\":\"hello\",\"version\":2,\"test_id\":1,\"size\":3,\"count\":1,\"spacing_ns\":0,\"client_nonce\":null}\n").unwrap();
    drop(s);
    let ok = run_client(&client(addr, 50, None), |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    assert_eq!(ok.receiver.unwrap().unique_packets, 50);
    // Connections are served concurrently, so the failures may be reported in any order.
    let ev: Vec<String> = events.try_iter().collect();
    assert!(
        ev.iter().any(|e| e.starts_with("failed") && e.contains("longer than")),
        "{ev:?}"
    );
    assert_eq!(ev.iter().filter(|e| e.starts_with("failed")).count(), 2, "{ev:?}");
}

#[test]
fn idle_connections_neither_block_a_client_nor_spend_a_session() {
    let (addr, events, h) = server(None, 1);
    let idle: Vec<TcpStream> = (0..130).filter_map(|_| TcpStream::connect(addr).ok()).collect();
    assert!(idle.len() >= 100);
    for _ in 0..5 {
        drop(TcpStream::connect(addr).unwrap());
    }
    let t0 = std::time::Instant::now();
    let ok = run_client(&client(addr, 200, None), |_| {}, |_| {}).unwrap();
    // One connection at a time made this client wait for the 3 s handshake deadline of each
    // idle connection in front of it: 130 × 3 s. A bound far from that, and far above what a
    // busy host adds to a 200-packet trial.
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    h.join().unwrap();
    assert_eq!(ok.receiver.unwrap().unique_packets, 200);
    assert!(events.try_iter().any(|e| e == "finished 200"));
    drop(idle);
}

#[test]
fn a_hello_asking_beyond_the_servers_limits_is_refused_before_anything_is_granted() {
    let (addr, events, h) = server(None, 1);
    // 1 GiB of receive buffer (the protocol allows it; this server does not).
    let mut c = client(addr, 10, None);
    c.rcvbuf = Some(1 << 30);
    let err = run_client(&c, |_| {}, |_| {}).unwrap_err();
    assert!(err.to_string().contains("--max-rcvbuf"), "{err}");
    // A week: 6e11 datagrams at 1 ms.
    let mut c = client(addr, 600_000_000_000, None);
    c.spacing_ns = 1_000_000;
    let err = run_client(&c, |_| {}, |_| {}).unwrap_err();
    assert!(err.to_string().contains("--max-duration"), "{err}");
    // Neither was a session: the server still serves one.
    assert!(!h.is_finished());
    run_client(&client(addr, 20, None), |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    let ev: Vec<String> = events.try_iter().collect();
    assert_eq!(ev.iter().filter(|e| *e == "ready").count(), 1, "{ev:?}");
}

#[test]
fn host_counters_of_both_ends_are_present_and_plausible() {
    let (addr, _events, h) = server(None, 1);
    let r = run_client(&client(addr, 2000, None), |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    let rx = r.receiver.as_ref().unwrap();
    assert_eq!(rx.unique_packets, 2000);
    let recv = r
        .host
        .receiver
        .as_ref()
        .expect("receiver counters travel back in results");
    let send = r.host.sender.as_ref().expect("sender counters");
    // Host-wide: every datagram the server counted went through the kernel's InDatagrams (other
    // UDP traffic on the host can only add to it).
    let udp = recv.udp.as_ref().expect("udp counters");
    assert!(
        udp.in_datagrams >= rx.valid_datagrams,
        "{udp:?} vs {}",
        rx.valid_datagrams
    );
    assert!(send.udp.as_ref().expect("udp").out_datagrams >= 2000);
    for end in [recv, send] {
        assert!(end.wall_s > 0.0);
        let cpu = end.cpu.as_ref().expect("host cpu");
        if cpu.ticks > 0 {
            assert!((cpu.total_pct() - 100.0).abs() < 0.01, "{cpu:?}");
        }
        assert!(cpu.idle_pct >= 0.0 && cpu.user_pct >= 0.0 && cpu.system_pct >= 0.0);
        let p = end.process.as_ref().expect("process cpu");
        assert!(p.user_pct >= 0.0 && p.system_pct >= 0.0);
        // Both ends are on 127.0.0.1: the loopback interface, which carried at least the data.
        let lo = end.interface.as_ref().expect("interface counters");
        assert_eq!(lo.name, "lo");
        assert!(lo.rx_packets >= 2000, "{lo:?}");
    }
    // The buffer grants are reported.
    assert!(
        r.notes.iter().any(|n| n.starts_with("receiver: UDP receive buffer")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().any(|n| n.starts_with("sender: UDP send buffer")),
        "{:?}",
        r.notes
    );
}

#[test]
fn interim_reports_arrive_every_interval_while_data_flows() {
    let (addr, _events, h) = server(None, 1);
    // 12 000 × 50 µs = 0.6 s of data: at least two 150 ms intervals whatever the load.
    let mut cfg = client(addr, 12_000, None);
    cfg.spacing_ns = 50_000;
    cfg.interval = Some(Duration::from_millis(150));
    let seen = std::sync::Mutex::new(Vec::new());
    let r = probe_session::run_client_live(&cfg, |_| {}, |_| {}, |i| seen.lock().unwrap().push(*i)).unwrap();
    h.join().unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() >= 2, "{seen:?}");
    // Cumulative and consistent: counts never go down, never exceed what was finally received.
    for w in seen.windows(2) {
        assert!(
            w[1].elapsed_ms > w[0].elapsed_ms && w[1].unique >= w[0].unique,
            "{seen:?}"
        );
    }
    let last = seen.last().unwrap();
    let rx = r.receiver.unwrap();
    assert!(last.unique <= rx.unique_packets);
    assert_eq!(last.unique_bytes, last.unique * 1472);
    assert_eq!(last.missing, last.highest_seq.map_or(0, |h| h + 1) - last.unique);
    assert_eq!(rx.unique_packets, 12_000);
}

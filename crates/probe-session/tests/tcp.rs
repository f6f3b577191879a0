//! TCP tests over real sockets on 127.0.0.1: a clean multi-stream test whose every byte is
//! accounted for, stray data connections, a server that stops mid-test, a client that vanishes
//! mid-test, a receive-buffer request honoured, and the competing CPU task's life cycle.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

mod common;

use probe::tcp::Preamble;
use probe::tcp_results::TcpReceiverReport;
use probe_session::burn::{Burner, CpuLoadSpec};
use probe_session::{run_client, run_tcp_client, ClientConfig, ServerEvent, TcpClientConfig};

enum Ev {
    Ready(u16),
    Tcp(Box<TcpReceiverReport>),
    Udp,
    Failed(String),
}

/// A server on an ephemeral port serving `sessions` sessions in a thread.
fn server(sessions: u64) -> (SocketAddr, mpsc::Receiver<Ev>, thread::JoinHandle<()>) {
    keyed_server(sessions, None)
}

fn keyed_server(sessions: u64, key: Option<&[u8]>) -> (SocketAddr, mpsc::Receiver<Ev>, thread::JoinHandle<()>) {
    common::serve(key, sessions, Duration::from_secs(5), |e| match e {
        ServerEvent::Ready { udp_port, .. } => Ev::Ready(udp_port),
        ServerEvent::TcpFinished { report, .. } => Ev::Tcp(report),
        ServerEvent::Finished { .. } => Ev::Udp,
        ServerEvent::Failed { error, .. } => Ev::Failed(error),
    })
}

fn tcp_config(server: SocketAddr) -> TcpClientConfig {
    let mut c = TcpClientConfig::new(server);
    c.streams = 2;
    c.duration = Duration::from_millis(600);
    c.interval = Duration::from_millis(200);
    c.sample_every = Duration::from_millis(50);
    c.cc = Some("reno".into());
    c
}

#[test]
fn every_byte_of_every_stream_is_accounted_for() {
    let (addr, events, h) = server(1);
    let mut intervals_seen = 0;
    let config = tcp_config(addr);
    let r = run_tcp_client(&config, |_| intervals_seen += 1).unwrap();
    h.join().unwrap();
    assert!(!r.partial, "{:?}", r.error);
    // The writers stop at their own deadline, `duration` after the start on the same monotonic
    // clock (a loaded host makes them stop later, never earlier), and the drain to the last ACK
    // comes after: write phase ≥ duration, and within the data phase.
    assert!(
        r.write_s >= config.duration.as_secs_f64() && r.write_s <= r.elapsed_s,
        "{} {}",
        r.write_s,
        r.elapsed_s
    );
    assert_eq!(r.cc.as_deref(), Some("reno"));
    assert_eq!(r.params.streams, 2);
    assert!(r.bytes_written > 0);
    // Every byte written arrived, stream by stream, and was acknowledged.
    assert_eq!(r.received_bytes, Some(r.bytes_written));
    assert_eq!(r.bytes_acked, r.bytes_written);
    assert_eq!(r.streams.len(), 2);
    for s in &r.streams {
        assert!(s.bytes_written > 0);
        assert_eq!(s.bytes_received, Some(s.bytes_written), "stream {}", s.stream);
        let info = s.last_tcp_info.expect("TCP_INFO read");
        // The kernel counts the SYN, the 20-byte preamble and the FIN as acknowledged bytes.
        assert_eq!(info.bytes_acked, Some(s.bytes_written + 22));
        assert!(info.snd_mss > 0 && info.rtt_us > 0);
    }
    // The intervals cover the test and add up to what was delivered.
    assert!(r.intervals.len() >= 3, "{:?}", r.intervals);
    assert_eq!(intervals_seen, r.intervals.len());
    assert_eq!(r.intervals.iter().map(|i| i.bytes).sum::<u64>(), r.bytes_acked);
    assert_eq!(r.intervals[0].start_s, 0.0);
    for w in r.intervals.windows(2) {
        assert_eq!(w[0].end_s, w[1].start_s);
    }
    // TCP_INFO samples of both streams over time.
    assert!(r.samples.iter().any(|s| s.stream == 0) && r.samples.iter().any(|s| s.stream == 1));
    assert!(r.samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
    assert!(r.samples.iter().all(|s| s.cwnd > 0));
    let m = r.mathis.expect("Mathis check");
    assert_eq!(m.streams, 2);
    assert!(m.rtt_s > 0.0 && m.sent_segments > 0);
    assert_eq!(m.retransmitted_segments, r.retransmits);
    assert_eq!(m.bound_bps.is_some(), r.retransmits > 0);
    let rx = r.receiver.as_ref().expect("receiver report");
    assert_eq!(rx.stray_connections, 0);
    assert!(!rx.partial);
    assert!(r.received_rate_bps.expect("rate") > 0.0);
    assert!(r.host.sender.as_ref().and_then(|h| h.cpu).is_some());
    assert!(r.host.receiver.as_ref().and_then(|h| h.cpu).is_some());
    let ev: Vec<Ev> = events.try_iter().collect();
    assert!(matches!(ev.first(), Some(Ev::Ready(p)) if *p > 0));
    match ev.get(1) {
        Some(Ev::Tcp(rep)) => assert_eq!(rep.bytes, r.bytes_written),
        _ => panic!("no TcpFinished event"),
    }
    // The result serialises (it is what --json prints) and reads back.
    let json = serde_json::to_string(&r).unwrap();
    let back: probe::tcp_results::TcpTestResult = serde_json::from_str(&json).unwrap();
    assert_eq!(back.bytes_written, r.bytes_written);
}

/// Read one control line.
fn line(r: &mut BufReader<TcpStream>) -> String {
    let mut s = String::new();
    r.read_line(&mut s).unwrap();
    s
}

fn hello_line(test_id: u64, streams: u16, duration_ms: u64) -> String {
    format!(
        "{{\"type\":\"hello\",\"version\":2,\"test_id\":{test_id},\"size\":32,\"count\":1,\"spacing_ns\":0,\
         \"client_nonce\":null,\"tcp\":{{\"streams\":{streams},\"duration_ms\":{duration_ms},\"write_size\":131072}}}}\n"
    )
}

fn ready_port(l: &str) -> u16 {
    let v: serde_json::Value = serde_json::from_str(l).unwrap();
    assert_eq!(v["type"], "ready", "{l}");
    v["udp_port"].as_u64().unwrap() as u16
}

#[test]
fn stray_data_connections_are_counted_and_never_counted_as_data() {
    let (addr, _events, h) = server(1);
    let mut control = TcpStream::connect(addr).unwrap();
    control.write_all(hello_line(77, 1, 1000).as_bytes()).unwrap();
    let mut reader = BufReader::new(control.try_clone().unwrap());
    let data = SocketAddr::new(addr.ip(), ready_port(&line(&mut reader)));
    // Four strays first: not our protocol, another session, a stream out of range, a short
    // preamble. They are accepted in order, before the real stream.
    let mut strays = Vec::new();
    for bytes in [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        Preamble { test_id: 78, stream: 0 }.emit().to_vec(),
        Preamble { test_id: 77, stream: 5 }.emit().to_vec(),
        b"EVLBI".to_vec(),
    ] {
        let mut s = TcpStream::connect(data).unwrap();
        // The server may already have hung up: failures to write are not the point here.
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        strays.push(s);
    }
    let mut real = TcpStream::connect(data).unwrap();
    real.write_all(&Preamble { test_id: 77, stream: 0 }.emit()).unwrap();
    real.write_all(&vec![9u8; 1_000_000]).unwrap();
    real.shutdown(std::net::Shutdown::Write).unwrap();
    control
        .write_all(b"{\"type\":\"tcp_done\",\"bytes_written\":[1000000]}\n")
        .unwrap();
    let res: serde_json::Value = serde_json::from_str(&line(&mut reader)).unwrap();
    h.join().unwrap();
    assert_eq!(res["type"], "tcp_results", "{res}");
    assert_eq!(res["receiver"]["bytes"], 1_000_000);
    assert_eq!(res["receiver"]["streams"][0]["bytes"], 1_000_000);
    assert_eq!(res["receiver"]["stray_connections"], 4);
    assert_eq!(res["receiver"]["partial"], false);
    drop(strays);
}

#[test]
fn a_server_that_stops_mid_test_leaves_a_flagged_partial_result() {
    // A stand-in server: the handshake, one data connection read for 400 ms, then everything
    // closed with data unread (the client's writes are reset).
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = ctl.local_addr().unwrap();
    let fake = thread::spawn(move || {
        let (c, _) = ctl.accept().unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        let hello = line(&mut r);
        assert!(hello.contains("\"tcp\""), "{hello}");
        let data = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = c;
        w.write_all(
            format!(
                "{{\"type\":\"ready\",\"udp_port\":{},\"server_proof\":null}}\n",
                data.local_addr().unwrap().port()
            )
            .as_bytes(),
        )
        .unwrap();
        let (mut d, _) = data.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0u64;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(400) {
            got += d.read(&mut buf).unwrap() as u64;
        }
        got
    });
    let mut cfg = tcp_config(addr);
    cfg.streams = 1;
    cfg.duration = Duration::from_secs(20);
    cfg.interval = Duration::from_millis(100);
    let t0 = Instant::now();
    let r = run_tcp_client(&cfg, |_| {}).unwrap();
    let read_by_server = fake.join().unwrap();
    assert!(r.partial);
    let err = r.error.as_deref().unwrap();
    // Whichever the client saw first: its stream reset, or the control connection closed.
    assert!(
        err.contains("of 20.00 s") && (err.contains("stream 0") || err.contains("server went away")),
        "{err}"
    );
    assert!(r.receiver.is_none() && r.received_bytes.is_none());
    // What was measured before the end is kept.
    assert!(
        r.bytes_written >= read_by_server,
        "{} < {read_by_server}",
        r.bytes_written
    );
    assert!(!r.intervals.is_empty() && !r.samples.is_empty());
    // It ended early, long before the 20 s asked for.
    assert!(t0.elapsed() < Duration::from_secs(15));
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"partial\":true"));
}

#[test]
fn a_client_that_vanishes_leaves_a_partial_report_and_the_server_goes_on() {
    let (addr, events, h) = server(2);
    {
        let mut control = TcpStream::connect(addr).unwrap();
        control.write_all(hello_line(5, 1, 60_000).as_bytes()).unwrap();
        let mut reader = BufReader::new(control.try_clone().unwrap());
        let data = SocketAddr::new(addr.ip(), ready_port(&line(&mut reader)));
        let mut d = TcpStream::connect(data).unwrap();
        d.write_all(&Preamble { test_id: 5, stream: 0 }.emit()).unwrap();
        d.write_all(&vec![1u8; 3_000_000]).unwrap();
        // Gone: no tcp_done, every socket closed.
    }
    let report = loop {
        match events.recv_timeout(Duration::from_secs(30)).expect("an event") {
            Ev::Tcp(r) => break r,
            Ev::Ready(_) => {}
            Ev::Udp => panic!("UDP event"),
            Ev::Failed(e) => panic!("failed: {e}"),
        }
    };
    assert!(report.partial);
    assert_eq!(report.bytes, 3_000_000);
    assert!(
        report.error.as_deref().unwrap().contains("went away"),
        "{:?}",
        report.error
    );
    // The next session is served normally.
    let r = run_tcp_client(&tcp_config(addr), |_| {}).unwrap();
    h.join().unwrap();
    assert!(!r.partial, "{:?}", r.error);
    assert_eq!(r.received_bytes, Some(r.bytes_written));
}

#[test]
fn a_keyed_server_runs_tcp_tests_for_the_key_holder_only() {
    // The refused client is no session: one good one ends the server.
    let (addr, events, h) = keyed_server(1, Some(b"s3cret"));
    let mut bad = tcp_config(addr);
    bad.key = Some(b"guess".to_vec());
    assert!(matches!(
        run_tcp_client(&bad, |_| {}),
        Err(probe_session::ProbeSessionError::Refused(_) | probe_session::ProbeSessionError::Auth(_))
    ));
    let mut good = tcp_config(addr);
    good.key = Some(b"s3cret".to_vec());
    let r = run_tcp_client(&good, |_| {}).unwrap();
    h.join().unwrap();
    assert!(!r.partial, "{:?}", r.error);
    assert_eq!(r.received_bytes, Some(r.bytes_written));
    // The refused client's failure and the key holder's test are reported by two connection
    // threads: the server promises both events, not their order.
    let ev: Vec<Ev> = events.try_iter().collect();
    let failures: Vec<&String> = ev
        .iter()
        .filter_map(|e| match e {
            Ev::Failed(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(
        matches!(failures[..], [e] if e.contains("auth")),
        "one failure, the refused key's: {failures:?}"
    );
    assert_eq!(ev.iter().filter(|e| matches!(e, Ev::Tcp(_))).count(), 1);
}

#[test]
fn the_receive_buffer_asked_for_is_used_and_reported() {
    let (addr, _events, h) = server(1);
    let cfg = ClientConfig {
        server: addr,
        size: 1472,
        count: 2000,
        spacing_ns: 20_000,
        key: None,
        test_id: None,
        sndbuf: 4 << 20,
        interval: None,
        rcvbuf: Some(100_000),
        burst: 1,
    };
    let r = run_client(&cfg, |_| {}, |_| {}).unwrap();
    h.join().unwrap();
    let s = r.receiver_socket.expect("socket report");
    assert_eq!(s.rcvbuf_requested, 100_000);
    // Linux doubles what it grants (socket(7)).
    assert_eq!(s.rcvbuf_granted, 200_000);
    let rx = r.receiver.unwrap();
    // The socket's drops are lost packets (nothing else loses packets on loopback but the
    // socket; a drop can only be a datagram the application never saw).
    assert!(s.drops.expect("drops read") <= rx.lost_packets);
    assert_eq!(rx.unique_packets + rx.lost_packets, 2000);
}

fn proc_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn the_competing_task_runs_at_its_nice_level_and_is_gone_after() {
    // A stand-in for `evlbi probe burn-cpu`: a shell loop (the appended arguments become $0…).
    let spec = CpuLoadSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "while :; do :; done".into()],
        nice: 7,
        threads: 1,
        max_run: Duration::from_secs(30),
    };
    let mut b = Burner::start(&spec).unwrap();
    let pid = b.pid().unwrap();
    assert!(proc_alive(pid));
    b.mark();
    thread::sleep(Duration::from_millis(200));
    let rep = b.stop();
    assert_eq!(rep.nice, 7);
    assert_eq!(rep.nice_observed, Some(7));
    let pct = rep.task_cpu_pct.expect("measured");
    assert!((0.0..=100.0).contains(&pct));
    assert_eq!(rep.available_cpu_pct, Some(100.0 - pct));
    assert!(!proc_alive(pid), "the task {pid} outlived stop()");
    // Dropped without stop (an error path): killed and reaped too.
    let b = Burner::start(&spec).unwrap();
    let pid = b.pid().unwrap();
    drop(b);
    assert!(!proc_alive(pid), "the task {pid} outlived drop");
    // Out of range.
    assert!(Burner::start(&CpuLoadSpec {
        nice: 20,
        ..spec.clone()
    })
    .is_err());
    assert!(Burner::start(&CpuLoadSpec { nice: -21, ..spec }).is_err());
}

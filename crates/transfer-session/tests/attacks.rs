//! Attacks on `evlbi recv`, each reproducing what an attacker on the host did: paths that
//! leave the root, strays and forged datagrams on the data port, planted links, a rewriting
//! proxy, silent senders, absurd offers.

mod common;

use std::fs;
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use transfer_session::control::{Msg, Offer};
use transfer_session::{CcChoice, Server, ServerConfig, ServerEvent};

/// The tests' pre-shared key.
const KEY: &[u8] = b"sixteen-byte-key-for-tests-0123";

/// A receiver holding [`KEY`] on a free port, writing below `root`, not serving yet; its address.
fn keyed_server(root: &std::path::Path) -> (std::sync::Arc<Server>, std::net::SocketAddr) {
    let mut scfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), root.to_path_buf());
    scfg.key = Some(KEY.to_vec());
    let server = std::sync::Arc::new(Server::bind(scfg).unwrap());
    let addr = server.local_addr().unwrap();
    (server, addr)
}

/// `server` serving on a thread until the flag is set, its events sent to the receiver.
#[allow(clippy::type_complexity)]
fn serve_with_events(
    server: &std::sync::Arc<Server>,
) -> (
    std::sync::Arc<AtomicBool>,
    mpsc::Receiver<ServerEvent>,
    std::thread::JoinHandle<Result<transfer_session::ServeStats, transfer_session::TransferSessionError>>,
) {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, events) = mpsc::channel();
    let (srv, st) = (server.clone(), stop.clone());
    let t = std::thread::spawn(move || {
        srv.serve(&st, false, &mut |e| {
            let _ = tx.send(e);
        })
    });
    (stop, events, t)
}

#[test]
fn paths_that_leave_the_root_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("victim")).unwrap();
    let srv = serve_once(root.path(), None);
    let mut ch = raw_session(srv.addr);
    for (id, path) in [
        "../up.bin",
        "/etc/evlbi-test",
        "a/../../up.bin",
        "escape/x.bin",
        "victim",
        "a//b",
        "./x",
    ]
    .into_iter()
    .enumerate()
    {
        let id = 2 * id as u64;
        let offer = Offer {
            id,
            path: path.into(),
            size: 5,
            mtime_ns: 0,
            block_size: 8192,
            sync: true,
        };
        ch.send(&Msg::Offer(offer)).unwrap();
        match ch.recv(Duration::from_secs(10)).unwrap() {
            Msg::Refused { id: i, message } => assert!(i == id && !message.is_empty()),
            other => panic!("{path}: {other:?}"),
        }
        ch.send(&Msg::Mkdir {
            id: id + 1,
            path: path.into(),
        })
        .unwrap();
        assert!(
            matches!(ch.recv(Duration::from_secs(10)).unwrap(), Msg::Refused { id: i, .. } if i == id + 1),
            "mkdir {path}"
        );
    }
    // The session survives refusals.
    ch.send(&Msg::Bye).unwrap();
    let events = srv.finish();
    assert_eq!(files(&events).iter().filter(|f| f.error.is_some()).count(), 7);
    assert!(
        fs::read_dir(outside.path()).unwrap().next().is_none(),
        "wrote outside the root"
    );
    assert!(!root.path().parent().unwrap().join("up.bin").exists());
    assert_eq!(
        walk(root.path()).len(),
        2,
        "only the two planted links: {:?}",
        walk(root.path())
    );
}

#[test]
fn strays_on_the_data_port_are_counted_and_never_written() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(4_000_000, 3);
    fs::write(src.path().join("f.bin"), &data).unwrap();
    let srv = serve_once(root.path(), None);
    // Spray the round's port from another socket on the same host while the transfer runs:
    // garbage, a DATA-looking datagram of another session, and one the size of nothing.
    let (port_tx, port_rx) = mpsc::channel::<u16>();
    let events = srv.events;
    let (fwd_tx, fwd_rx) = mpsc::channel();
    let relay = std::thread::spawn(move || {
        for e in events.iter() {
            if let ServerEvent::DataPort(_, udp_port) = &e {
                let _ = port_tx.send(*udp_port);
            }
            let _ = fwd_tx.send(e);
        }
    });
    let sprayer = std::thread::spawn(move || {
        let Ok(port) = port_rx.recv_timeout(Duration::from_secs(20)) else {
            return 0;
        };
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut forged = vec![0u8; 40 + 8192];
        forged[..4].copy_from_slice(b"eVTR");
        forged[4] = 1;
        forged[5] = 1;
        let mut sent = 0;
        for i in 0..300u32 {
            let d: &[u8] = match i % 3 {
                0 => b"garbage",
                1 => &forged,
                _ => &[0u8; 70_000][..65_000],
            };
            if s.send_to(d, ("127.0.0.1", port)).is_ok() {
                sent += 1;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        sent
    });
    let mut cfg = config(srv.addr, "");
    cfg.cc = CcChoice::Fixed(200e6);
    let report = run_send(&cfg, &[src.path().join("f.bin")]).unwrap();
    let sprayed = sprayer.join().unwrap();
    srv.thread.join().unwrap().unwrap();
    relay.join().unwrap();
    let events: Vec<ServerEvent> = fwd_rx.try_iter().collect();
    assert!(report.ok);
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    assert!(sprayed > 0, "the sprayer never saw the port");
    let f = stream(&events);
    // Protocol 5: the session's socket is connected to the sender's data address, so the kernel
    // keeps every stray off it (they land on the receiver's shared socket, where a session being
    // set up pens and drops them: early_datagrams_of_unknown_sessions_are_bounded_and_dropped).
    let foreign = f.foreign.other_host + f.foreign.other_port + f.foreign.oversized;
    assert_eq!(foreign, 0, "a stray reached the session's socket: {f:?}");
}

#[test]
fn early_datagrams_of_unknown_sessions_are_bounded_and_dropped() {
    use transfer_session::early::{PEN_BYTES, PEN_DATAGRAMS};
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(12 << 20, 31);
    fs::write(src.path().join("f.bin"), &data).unwrap();
    let key = KEY.to_vec();
    let (server, addr) = keyed_server(root.path());
    // Before any session: twice the pen's count of DATA-looking datagrams of made-up sessions
    // (unauthenticated: no session has their key) at the control port's number, plus garbage.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut forged = vec![0u8; 40 + 1024];
    forged[..4].copy_from_slice(b"eVTR");
    forged[4] = transfer::wire::VERSION;
    forged[5] = 1;
    let mut sent = 0u64;
    for i in 0..2 * PEN_DATAGRAMS as u64 {
        forged[6..14].copy_from_slice(&i.to_be_bytes());
        let d: &[u8] = if i % 64 == 0 { b"garbage" } else { &forged };
        if s.send_to(d, addr).is_ok() {
            sent += 1;
        }
    }
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (srv, st) = (server.clone(), stop.clone());
    let t = std::thread::spawn(move || srv.serve(&st, true, &mut |_| {}));
    let mut cfg = config(addr, "");
    cfg.key = Some(key);
    let report = run_send(&cfg, &[src.path().join("f.bin")]).unwrap();
    t.join().unwrap().unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    let pen = server.early_datagrams();
    // Whatever the kernel kept of them was penned, and none went anywhere but dropped.
    let dropped = pen.dropped_full + pen.expired + pen.unparsed;
    assert!(
        pen.penned + pen.unparsed > 0 && pen.penned + pen.unparsed <= sent + 1000,
        "{pen:?}"
    );
    assert!(dropped > 0, "nothing was dropped: {pen:?}");
    assert!(
        pen.penned - pen.dropped_full - pen.expired - pen.taken <= PEN_DATAGRAMS as u64,
        "{pen:?} {PEN_BYTES}"
    );
    assert_eq!(server.first_flights().accepted, 1);
}

#[test]
fn planted_links_below_the_root_receive_nothing() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let data = pattern(300_000, 11);
    fs::write(src.path().join("p3.bin"), &data).unwrap();
    fs::write(src.path().join("p4.bin"), &data).unwrap();
    // The resume record's temporary name points outside; NAME.part is a hard link to a file
    // outside the root.
    std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("p3.bin.part.evlbi.tmp")).unwrap();
    fs::write(outside.path().join("precious"), b"keep me").unwrap();
    fs::hard_link(outside.path().join("precious"), root.path().join("p4.bin.part")).unwrap();
    let srv = serve_once(root.path(), None);
    let report = run_send(
        &config(srv.addr, ""),
        &[src.path().join("p3.bin"), src.path().join("p4.bin")],
    )
    .unwrap();
    srv.finish();
    assert!(
        !outside.path().join("victim").exists(),
        "the resume record went through the link"
    );
    assert_eq!(fs::read(outside.path().join("precious")).unwrap(), b"keep me");
    // p3 arrives (the planted link was removed, not followed); p4 is refused.
    assert_eq!(fs::read(root.path().join("p3.bin")).unwrap(), data);
    let p4 = report.files.iter().find(|f| f.path == "p4.bin").unwrap();
    assert!(p4.error.as_deref().is_some_and(|e| e.contains("hard links")), "{p4:?}");
    assert!(!report.ok);
}

#[test]
fn a_forged_data_datagram_from_the_senders_own_port_moves_nothing_before_or_after_the_hello() {
    let root = tempfile::tempdir().unwrap();
    let data = pattern(16 << 20, 12);
    let srv = serve_once(root.path(), None);
    // What the attacker sent: the session id, 13 MB ahead (and, before the hello, at the first
    // segment's start), random payload — untagged, then tagged under a key of its own. All come
    // from the port the real data will use; those before the hello wait in the receiver's pen
    // and reach the session with the real first flight's.
    let session_id = 0x5e55;
    let forged = |tag: Option<&transfer::DataKey>, offset: u64| {
        let mut d = Vec::new();
        transfer::wire::DataHeader {
            session_id,
            seq: 0,
            offset,
            timestamp_us: 0,
            retransmit: false,
        }
        .write(&mut d);
        d.extend_from_slice(&pattern(8192, 99));
        if let Some(k) = tag {
            let digest = transfer::wire::payload_digest(offset, &d[transfer::wire::DATA_HEADER_LEN..]);
            k.seal_data(&mut d, 0, &digest);
        }
        d
    };
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(srv.addr).unwrap();
    let before_hello = 16;
    for i in 0..before_hello {
        let tag = (i % 2 == 1).then_some(transfer::DataKey([9; 32]));
        sock.send(&forged(tag.as_ref(), i / 2 * 8192)).unwrap();
    }
    let Raw {
        mut ch,
        key: sk,
        udp_port: _,
        session_id: welcomed,
        data: sock,
    } = raw_session_from(srv.addr, sock, session_id);
    assert_eq!(welcomed, session_id);
    raw_offer(&mut ch, 0, "f.bin", data.len() as u64);
    sock.send(&forged(None, 13 << 20)).unwrap();
    sock.send(&forged(Some(&transfer::DataKey([9; 32])), 13 << 20)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // The real stream, keyed as the real sender keys it.
    let src = tempfile::NamedTempFile::new().unwrap();
    fs::write(src.path(), &data).unwrap();
    let file = fs::File::open(src.path()).unwrap();
    let g = transfer::blocks::Geometry {
        size: data.len() as u64,
        block_size: 1 << 20,
    };
    let mut scfg = transfer::SenderConfig::new(transfer::SessionParams {
        session_id,
        file_size: 0,
        chunk_size: 8192,
    });
    scfg.open = true;
    scfg.data_key = Some(transfer_session::control::data_key(&sk, session_id));
    let mut source = transfer_session::fileio::FileSource::new(8192);
    source.add_file(0, std::sync::Arc::new(file.try_clone().unwrap()), g);
    let mut sender = transfer::Sender::new(
        scfg,
        source,
        Box::new(transfer::FixedRate::new(2e9)),
        std::time::Instant::now(),
    )
    .unwrap();
    for b in 0..g.blocks() {
        let (len, off) = sender.source_mut().push_block(0, b).unwrap();
        sender.push_segment(len, off);
    }
    sock.set_nonblocking(true).unwrap();
    let mut tx = transfer_session::udp::Transmit::new(false);
    let mut rb = netio::RecvBatch::new(16, 2048);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while sender.bytes_delivered() < data.len() as u64 && std::time::Instant::now() < deadline {
        if sender.poll_timeout().is_some_and(|t| t <= std::time::Instant::now()) {
            sender.handle_timeout(std::time::Instant::now());
        }
        tx.pump(&sock, &mut sender).unwrap();
        transfer_session::udp::pump_reports(&sock, &mut rb, &mut sender).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(sender.bytes_delivered(), data.len() as u64, "{:?}", sender.state());
    let (blocks, file_hash) = transfer_session::hashing::digest_file(&file, g).unwrap();
    ch.send(&Msg::Hashes {
        id: 0,
        first_block: 0,
        hashes: blocks.iter().map(|h| ctlchan::mac::hex_encode(h)).collect(),
    })
    .unwrap();
    ch.send(&Msg::FileHash {
        id: 0,
        blake3: ctlchan::mac::hex_encode(&file_hash),
    })
    .unwrap();
    match ch.recv(Duration::from_secs(30)).unwrap() {
        Msg::Verified { path, blake3, .. } => {
            assert_eq!(path, "f.bin");
            assert_eq!(blake3, blake3::hash(&data).to_hex().as_str());
        }
        m => panic!("{m:?}"),
    }
    ch.send(&Msg::Bye).unwrap();
    let events = srv.finish();
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    let f = stream(&events);
    assert_eq!(
        f.early_datagrams, before_hello,
        "the session took the forged flight: {f:?}"
    );
    assert!(
        f.rejected >= 2 + before_hello,
        "the forged datagrams were not counted: {f:?}"
    );
    assert_eq!(f.foreign.other_port, 0, "a forged datagram locked the port: {f:?}");
}

#[test]
fn a_round_without_data_ends_at_its_deadline() {
    let root = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), root.path().to_path_buf());
    cfg.data_idle_timeout = Duration::from_secs(2);
    let srv = serve_with(cfg, true);
    let mut ch = raw_session(srv.addr);
    raw_offer(&mut ch, 0, "f.bin", 1 << 20);
    let t0 = std::time::Instant::now();
    match ch.recv(Duration::from_secs(20)) {
        Ok(Msg::Error { message }) => assert!(message.contains("no valid datagram"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    srv.thread.join().unwrap().unwrap();
}

#[test]
fn a_proxy_that_rewrites_the_offered_path_breaks_the_session_and_writes_nothing() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(500_000, 31);
    fs::write(src.path().join("p.bin"), &data).unwrap();
    let key = KEY.to_vec();
    let srv = serve_once(root.path(), Some(&key));
    let proxy = rewriting_proxy(srv.addr, "\"path\":\"p.bin\"", "\"path\":\"evil/owned.bin\"");
    let mut cfg = config(proxy, "");
    cfg.key = Some(key);
    let r = run_send(&cfg, &[src.path().join("p.bin")]);
    // The sender must not say "verified" for a file the receiver wrote elsewhere.
    if let Ok(rep) = &r {
        assert!(!rep.ok && rep.files.iter().all(|f| !f.verified), "{rep:?}");
    }
    if let Err(e) = &r {
        assert!(e.to_string().contains("authentication"), "{e}");
    }
    let _ = srv.thread.join();
    assert!(!root.path().join("evil").exists(), "the rewritten path was written");
    assert!(!root.path().join("p.bin").exists());
}

#[test]
fn names_with_newlines_and_absurd_depths_create_nothing() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    fs::write(src.path().join("evil\nline.bin"), b"x").unwrap();
    let srv = serve_once(root.path(), None);
    let rep = run_send(&config(srv.addr, ""), &[src.path().join("evil\nline.bin")]).unwrap();
    assert!(!rep.ok && rep.files[0].error.is_some(), "{rep:?}");
    srv.finish();
    let srv = serve_once(root.path(), None);
    let mut ch = raw_session(srv.addr);
    let deep = "a/".repeat(2047) + "a";
    ch.send(&Msg::Offer(Offer {
        id: 0,
        path: deep.clone(),
        size: 5,
        mtime_ns: 0,
        block_size: 8192,
        sync: true,
    }))
    .unwrap();
    assert!(matches!(ch.recv(Duration::from_secs(10)).unwrap(), Msg::Refused { .. }));
    ch.send(&Msg::Mkdir { id: 1, path: deep }).unwrap();
    assert!(matches!(ch.recv(Duration::from_secs(10)).unwrap(), Msg::Refused { .. }));
    ch.send(&Msg::Bye).unwrap();
    srv.finish();
    assert_eq!(walk(root.path()), Vec::<String>::new(), "directories were created");
}

#[test]
fn offers_of_absurd_sizes_are_refused_not_allocated() {
    let root = tempfile::tempdir().unwrap();
    let srv = serve_once(root.path(), None);
    let mut ch = raw_session(srv.addr);
    // 4 GiB files of 4 KiB blocks: 2^20 blocks each. Four fit the session's bound on blocks in
    // flight (2^22), the fifth is refused — and the session goes on.
    for id in 0..5u64 {
        ch.send(&Msg::Offer(Offer {
            id,
            path: format!("big{id}.bin"),
            size: 4 << 30,
            mtime_ns: 1,
            block_size: 4096,
            sync: false,
        }))
        .unwrap();
        match ch.recv(Duration::from_secs(30)).unwrap() {
            Msg::Accept { id: i, .. } if id < 4 => assert_eq!(i, id),
            Msg::Refused { id: i, message } if id == 4 => {
                assert_eq!(i, 4);
                assert!(message.contains("in flight"), "{message}");
            }
            m => panic!("offer {id}: {m:?}"),
        }
    }
    ch.send(&Msg::Bye).unwrap();
    let events = srv.finish();
    assert!(
        !root.path().join("big4.bin.part").exists(),
        "the refused offer created its .part"
    );
    let refused = files(&events).into_iter().filter(|f| f.error.is_some()).count();
    assert_eq!(refused, 5, "4 unfinished at bye, 1 refused");
}

/// The bytes of a keyed first flight (hello, session, one offer) as a sender puts them on the
/// wire, from `udp_port` (the flight's data port).
fn keyed_flight(key: &[u8], time_ms: u64, udp_port: u16) -> Vec<u8> {
    keyed_flight_of(key, [0x5a; 16], time_ms, udp_port, "replayed.bin").0
}

/// [`keyed_flight`] with its nonce and path, and its session key (session id 77).
fn keyed_flight_of(key: &[u8], nonce: [u8; 16], time_ms: u64, udp_port: u16, path: &str) -> (Vec<u8>, [u8; 32]) {
    use ctlchan::{LineDecoder, Role};
    let (hello, sk) = transfer_session::first_flight::client_hello(Some(key), nonce, time_ms, 77, udp_port);
    let mut enc = LineDecoder::<Msg>::new(transfer_session::control::MAX_LINE);
    let mut bytes = enc.encode(&hello).unwrap();
    enc.authenticate(sk, Role::Client);
    bytes.extend(
        enc.encode(&Msg::Session {
            chunk_size: 8192,
            first_segment: transfer_session::control::FIRST_SEGMENT_BYTES,
        })
        .unwrap(),
    );
    let offer = Offer {
        id: 0,
        path: path.into(),
        size: 1 << 20,
        mtime_ns: 1,
        block_size: 1 << 20,
        sync: false,
    };
    bytes.extend(enc.encode(&Msg::Offer(offer)).unwrap());
    (bytes, sk)
}

/// Send `flight` on a fresh connection to `addr` and read what comes back until it closes.
fn play(addr: std::net::SocketAddr, flight: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(flight).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The accepted flight gets welcome and accept and then waits for more: stop at the accept.
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&got).contains("\"accept\"") {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn a_replayed_or_stale_first_flight_is_refused_and_counted() {
    let root = tempfile::tempdir().unwrap();
    let key = KEY.to_vec();
    let (server, addr) = keyed_server(root.path());
    let (stop, events, t) = serve_with_events(&server);
    let data = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = data.local_addr().unwrap().port();
    let now = transfer_session::first_flight::wall_ms();
    let flight = keyed_flight(&key, now, port);
    // The real sender's flight: welcomed and its offer accepted.
    let first = play(addr, &flight);
    assert!(first.contains("\"welcome\"") && first.contains("\"accept\""), "{first}");
    // The same bytes again, seconds later: refused before anything is opened.
    let again = play(addr, &flight);
    assert!(again.contains("replayed first flight"), "{again}");
    // A flight with a valid proof stamped a minute ago (a replay older than the nonce cache).
    let stale = play(addr, &keyed_flight(&key, now - 60_000, port));
    assert!(stale.contains("outside ±30 s"), "{stale}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().unwrap().unwrap();
    let g = server.first_flights();
    assert_eq!((g.accepted, g.replayed, g.stale, g.bad_key), (1, 1, 1, 0), "{g:?}");
    let rejected: Vec<String> = events
        .try_iter()
        .filter_map(|e| match e {
            ServerEvent::Rejected(_, why) => Some(why),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    // Only the accepted flight's offer opened anything (its .part; it never got data).
    let names: Vec<String> = fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("replayed.bin.part"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// [`play`], and after the accept send `then` from `sock` (the flight's data port) and wait for
/// the receiver's first REPORT there: the session has read its data socket, after everything
/// its pen held (it feeds those first).
fn play_until_report(addr: std::net::SocketAddr, flight: &[u8], sock: &UdpSocket, then: &[Vec<u8>]) -> String {
    use std::io::{Read, Write};
    sock.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 65_536];
    while sock.recv(&mut buf).is_ok() {}
    sock.set_nonblocking(false).unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(flight).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&got).contains("\"accept\"") {
            break;
        }
    }
    for d in then {
        sock.send(d).unwrap();
    }
    sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let n = sock.recv(&mut buf).expect("a report within 30 s");
    assert_eq!(
        transfer::wire::peek_header(&buf[..n]).unwrap().kind,
        transfer::wire::Kind::Report
    );
    String::from_utf8_lossy(&got).into_owned()
}

/// Wait for the receiver's report of a session's data stream (it ends when its connection does).
fn next_stream(events: &mpsc::Receiver<ServerEvent>) -> transfer::results::StreamRecvReport {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while let Ok(e) = events.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        if let ServerEvent::Stream(_, s) = e {
            return s;
        }
    }
    panic!("no stream report within 30 s");
}

/// Data with the connect, replayed: an attacker who recorded a sender's whole first flight (its
/// datagrams, sent before the TCP connect completed, and its control lines) plays it back. The
/// control lines are refused (the nonce was used), the datagrams wait in the pen; a later real
/// session with the same session id from the same port takes them and refuses every one (their
/// tags are under the recorded session's data key): nothing is written.
#[test]
fn a_replayed_zero_rtt_flight_writes_nothing_even_into_a_session_with_its_id() {
    let root = tempfile::tempdir().unwrap();
    let key = KEY.to_vec();
    let (server, addr) = keyed_server(root.path());
    let (stop, events, t) = serve_with_events(&server);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(addr).unwrap();
    let port = sock.local_addr().unwrap().port();
    let now = transfer_session::first_flight::wall_ms();
    let payload = pattern(1 << 20, 41);
    let (flight, sk) = keyed_flight_of(&key, [0x11; 16], now, port, "recorded.bin");
    let datagrams = keyed_datagrams(&sk, 77, &payload);
    let send_all = || {
        for d in &datagrams {
            sock.send(d).unwrap();
        }
    };
    // The real sender: its data first (with the connect), then its control lines; its session
    // reports on the data once it took it from the pen.
    send_all();
    let first = play_until_report(addr, &flight, &sock, &[]);
    assert!(first.contains("\"accept\""), "{first}");
    let real = next_stream(&events);
    assert_eq!(real.early_datagrams, datagrams.len() as u64, "{real:?}");
    assert_eq!((real.rejected, real.bytes_written), (0, 1 << 20), "{real:?}");
    let part = |name: &str| fs::read(root.path().join(format!("{name}.part"))).ok();
    let recorded = part("recorded.bin").expect("the real session's .part");
    // The replay: the same datagrams, then the same control lines. Refused, nothing taken.
    send_all();
    let again = play(addr, &flight);
    assert!(again.contains("replayed first flight"), "{again}");
    // A fresh, real session with the same session id from the same port: it takes the
    // replayed datagrams from the pen and refuses each (their tags are under the recorded
    // session's data key). Its own first chunk, sent after its accept, is written; a report
    // on it says the session has read everything before it.
    let (fresh, fresh_sk) = keyed_flight_of(&key, [0x22; 16], now, port, "fresh.bin");
    let fresh_payload = pattern(1 << 20, 42);
    let own = keyed_datagrams(&fresh_sk, 77, &fresh_payload);
    let third = play_until_report(addr, &fresh, &sock, &own[..1]);
    assert!(third.contains("\"accept\""), "{third}");
    let taken = next_stream(&events);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().unwrap().unwrap();
    assert_eq!(taken.early_datagrams, datagrams.len() as u64, "{taken:?}");
    assert_eq!(
        taken.rejected,
        datagrams.len() as u64,
        "every replayed datagram refused: {taken:?}"
    );
    assert_eq!(
        taken.bytes_written, 8192,
        "only the fresh session's own chunk: {taken:?}"
    );
    assert_eq!(
        part("recorded.bin"),
        Some(recorded),
        "the replay changed the recorded file"
    );
    let fresh_part = part("fresh.bin").expect("the fresh session's .part");
    assert_eq!(&fresh_part[..8192], &fresh_payload[..8192]);
    assert!(
        fresh_part[8192..].iter().all(|&b| b == 0),
        "replayed bytes in the fresh session's file"
    );
    let g = server.first_flights();
    assert_eq!((g.accepted, g.replayed), (2, 1), "{g:?}");
}

/// A sender that sent its first segment with the connect and then never said hello (it died,
/// or it was an attacker with no key): its datagrams, correctly tagged for a session that never
/// existed, stay in the pen until [`transfer_session::early::PEN_AGE`], are counted as expired
/// and are written nowhere; the next real session is not disturbed.
#[test]
fn a_zero_rtt_flight_whose_hello_never_comes_expires_from_the_pen_unwritten() {
    use transfer_session::early::PEN_AGE;
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(2 << 20, 17);
    fs::write(src.path().join("f.bin"), &data).unwrap();
    let key = KEY.to_vec();
    let (server, addr) = keyed_server(root.path());
    let orphan = UdpSocket::bind("127.0.0.1:0").unwrap();
    orphan.connect(addr).unwrap();
    let port = orphan.local_addr().unwrap().port();
    let (_, sk) = keyed_flight_of(
        &key,
        [0x33; 16],
        transfer_session::first_flight::wall_ms(),
        port,
        "orphan.bin",
    );
    let datagrams = keyed_datagrams(&sk, 77, &pattern(1 << 20, 3));
    for d in &datagrams {
        orphan.send(d).unwrap();
    }
    std::thread::sleep(PEN_AGE + Duration::from_millis(500));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (srv, st) = (server.clone(), stop.clone());
    let t = std::thread::spawn(move || srv.serve(&st, true, &mut |_| {}));
    let mut cfg = config(addr, "");
    cfg.key = Some(key);
    let report = run_send(&cfg, &[src.path().join("f.bin")]).unwrap();
    t.join().unwrap().unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    assert_eq!(walk(root.path()), vec!["f.bin".to_string()], "only the real file");
    let pen = server.early_datagrams();
    assert_eq!(pen.expired, datagrams.len() as u64, "{pen:?}");
    assert_eq!(server.first_flights().accepted, 1);
}

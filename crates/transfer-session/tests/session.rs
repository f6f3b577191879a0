//! `evlbi send`/`recv` sessions over real sockets on 127.0.0.1: files byte-exact, keys,
//! paths that try to leave the root, strays on the data port, a corrupted block fetched again.

use std::fs;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use ctlchan::serve::ServeStats;
use ctlchan::{Channel, Role};
use testkit::SmallDisk;
use transfer::results::{FileRecvReport, SendReport};
use transfer_session::control::{Msg, Offer, MAX_LINE, PROTOCOL_VERSION};
use transfer_session::{send, CcChoice, SendConfig, Server, ServerConfig, ServerEvent, SessionError};

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

struct Running {
    addr: SocketAddr,
    events: mpsc::Receiver<ServerEvent>,
    thread: JoinHandle<Result<ServeStats, SessionError>>,
}

/// A receiver serving one session in a thread; its events arrive on a channel.
fn serve_once(root: &Path, key: Option<&[u8]>) -> Running {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), root.to_path_buf());
    cfg.key = key.map(<[u8]>::to_vec);
    serve_with(cfg, true)
}

impl Running {
    fn finish(self) -> Vec<ServerEvent> {
        self.thread.join().unwrap().unwrap();
        self.events.try_iter().collect()
    }
}

/// The session's data stream as the receiver reported it.
fn stream(events: &[ServerEvent]) -> transfer::results::StreamRecvReport {
    events
        .iter()
        .find_map(|e| match e {
            ServerEvent::Stream(_, s) => Some(s.clone()),
            _ => None,
        })
        .expect("a stream event")
}

fn files(events: &[ServerEvent]) -> Vec<FileRecvReport> {
    events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::File(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

fn config(addr: SocketAddr, dest: &str) -> SendConfig {
    SendConfig {
        server: addr,
        dest: dest.into(),
        key: None,
        cc: CcChoice::Fixed(2e9),
        chunk_size: 8192,
        block_size: 1 << 20,
        sync: true,
    }
}

fn run_send(cfg: &SendConfig, items: &[PathBuf]) -> Result<SendReport, SessionError> {
    send(cfg, items, &mut |_| {}, &AtomicBool::new(false))
}

#[test]
fn files_and_directories_arrive_byte_exact_and_verified() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let big = pattern(3_000_017, 1);
    fs::write(src.path().join("scan.vdif"), &big).unwrap();
    fs::create_dir_all(src.path().join("exp/empty_dir")).unwrap();
    fs::write(src.path().join("exp/zero.bin"), b"").unwrap();
    fs::write(src.path().join("exp/one.bin"), b"x").unwrap();
    let srv = serve_once(root.path(), None);
    let items = [src.path().join("scan.vdif"), src.path().join("exp")];
    let report = run_send(&config(srv.addr, "in/today"), &items).unwrap();
    let events = srv.finish();

    assert!(report.ok, "{report:?}");
    assert_eq!(report.files.len(), 3);
    assert_eq!(report.total_bytes, 3_000_018);
    assert_eq!(fs::read(root.path().join("in/today/scan.vdif")).unwrap(), big);
    assert_eq!(fs::read(root.path().join("in/today/exp/zero.bin")).unwrap(), b"");
    assert_eq!(fs::read(root.path().join("in/today/exp/one.bin")).unwrap(), b"x");
    assert!(root.path().join("in/today/exp/empty_dir").is_dir());
    let scan = &report.files[0];
    assert_eq!(scan.blake3.as_deref(), Some(blake3::hash(&big).to_hex().as_str()));
    assert!(scan.verified && scan.resumed_bytes == 0 && scan.rounds.len() == 1);
    let recv = files(&events);
    assert_eq!(recv.len(), 3);
    assert!(recv.iter().all(|f| f.verified && f.error.is_none()));
    // Hashed as sent and as written: the sender read each byte once (repeats aside), the
    // receiver read nothing back.
    let data = report.data.as_ref().unwrap();
    assert_eq!(report.source_bytes_read, data.payload_bytes_sent, "{report:?}");
    assert!(recv.iter().all(|f| f.bytes_read_back == 0), "{recv:?}");
    // One session, one data stream for every file.
    let ports = events.iter().filter(|e| matches!(e, ServerEvent::DataPort(..))).count();
    assert_eq!(ports, 1);
    // Nothing but the files: no .part, no resume records left behind.
    let mut left: Vec<String> = walk(root.path());
    left.sort();
    assert_eq!(
        left,
        [
            "in",
            "in/today",
            "in/today/exp",
            "in/today/exp/empty_dir",
            "in/today/exp/one.bin",
            "in/today/exp/zero.bin",
            "in/today/scan.vdif"
        ]
    );
}

fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

#[test]
fn wrong_or_missing_key_is_refused_and_nothing_is_written() {
    let src = tempfile::tempdir().unwrap();
    fs::write(src.path().join("f"), pattern(10_000, 2)).unwrap();
    for sender_key in [Some(&b"not the key"[..]), None] {
        let root = tempfile::tempdir().unwrap();
        let srv = serve_once(root.path(), Some(b"correct horse"));
        let mut cfg = config(srv.addr, "");
        cfg.key = sender_key.map(<[u8]>::to_vec);
        let err = run_send(&cfg, &[src.path().join("f")]).unwrap_err();
        assert!(matches!(err, SessionError::Peer(_) | SessionError::Auth(_)), "{err}");
        // The server records the refused connection, and it does not spend --once.
        let rejected = srv.events.iter().find_map(|e| match e {
            ServerEvent::Rejected(_, why) => Some(why),
            _ => None,
        });
        // A sender without a key hangs up on the challenge; one with the wrong key is refused.
        assert!(
            rejected
                .as_deref()
                .is_some_and(|w| sender_key.is_none() || w.contains("key proof")),
            "{rejected:?}"
        );
        assert!(
            fs::read_dir(root.path()).unwrap().next().is_none(),
            "something was written"
        );
        assert!(!srv.thread.is_finished(), "a refused connection ended a --once server");
        cfg.key = Some(b"correct horse".to_vec());
        assert!(run_send(&cfg, &[src.path().join("f")]).unwrap().ok);
        srv.thread.join().unwrap().unwrap();
    }
    // The right key works, and the receiver proves it too.
    let root = tempfile::tempdir().unwrap();
    let srv = serve_once(root.path(), Some(b"correct horse"));
    let mut cfg = config(srv.addr, "");
    cfg.key = Some(b"correct horse".to_vec());
    assert!(run_send(&cfg, &[src.path().join("f")]).unwrap().ok);
    srv.finish();
    // A sender with a key refuses a receiver that cannot prove it — before it authenticates,
    // so the receiver counts no session and is stopped by hand.
    let server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        root.path().to_path_buf(),
    ))
    .unwrap();
    cfg.server = server.local_addr().unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let t = std::thread::spawn(move || server.serve(&st, true, &mut |_| {}));
    let err = run_send(&cfg, &[src.path().join("f")]).unwrap_err();
    assert!(matches!(err, SessionError::Auth(_)), "{err}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stats = t.join().unwrap().unwrap();
    assert_eq!(stats.sessions, 0, "{stats:?}");
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
    let foreign = f.foreign.other_host + f.foreign.other_port + f.foreign.oversized + f.rejected;
    assert!(foreign > 0, "no stray was counted: {f:?}");
    assert!(
        foreign <= sprayed,
        "more strays counted ({foreign}) than sent ({sprayed})"
    );
}

#[test]
fn a_corrupted_block_of_an_interrupted_file_is_fetched_again() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(5 << 20, 4);
    fs::write(src.path().join("f.bin"), &data).unwrap();
    let mtime_ns = fs::metadata(src.path().join("f.bin"))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    // What an interrupted earlier attempt leaves: blocks 0..3 on disk, one byte of block 1 rotten.
    let mut part = data.clone();
    part[4 << 20..].fill(0);
    part[(1 << 20) + 77] ^= 0x40;
    fs::write(root.path().join("f.bin.part"), &part).unwrap();
    let state = transfer_session::blocks::ResumeState {
        version: transfer_session::blocks::RESUME_STATE_VERSION,
        size: data.len() as u64,
        mtime_ns,
        chunk_size: 8192,
        block_size: 1 << 20,
        have: vec![[0, 4]],
    };
    fs::write(
        root.path().join("f.bin.part.evlbi"),
        serde_json::to_vec(&state).unwrap(),
    )
    .unwrap();

    let srv = serve_once(root.path(), None);
    let report = run_send(&config(srv.addr, ""), &[src.path().join("f.bin")]).unwrap();
    let recv = files(&srv.finish());
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    let f = &report.files[0];
    assert_eq!(f.blake3.as_deref(), Some(blake3::hash(&data).to_hex().as_str()));
    // Four blocks were held, one of them rotten: three were really resumed.
    assert_eq!(
        f.resumed_bytes,
        3 << 20,
        "resumed counts only held blocks that verified"
    );
    assert_eq!(recv[0].resumed_bytes, 3 << 20);
    // The four held blocks were read once on each side to hash them, nothing else twice.
    assert_eq!(recv[0].bytes_read_back, 4 << 20);
    let data = report.data.as_ref().unwrap();
    assert_eq!(report.source_bytes_read, data.payload_bytes_sent + (4 << 20));
    assert_eq!(f.rounds.len(), 2);
    assert_eq!(f.rounds[0].bytes, 1 << 20, "round 1 moves only block 4");
    assert_eq!(f.rounds[1].bytes, 1 << 20, "round 2 moves only the rotten block");
    assert_eq!(recv[0].bad_blocks, 1);
    assert!(!root.path().join("f.bin.part.evlbi").exists());
}

#[test]
fn disk_full_is_a_clear_error_and_leaves_a_resumable_part() {
    let disk = match SmallDisk::mount(3 << 20) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: cannot mount a small tmpfs (needs root): {why}");
            return;
        }
    };
    let src = tempfile::tempdir().unwrap();
    let data = pattern(8 << 20, 5);
    fs::write(src.path().join("big.bin"), &data).unwrap();
    let srv = serve_once(disk.path(), None);
    let mut cfg = config(srv.addr, "");
    cfg.cc = CcChoice::Fixed(500e6);
    let err = run_send(&cfg, &[src.path().join("big.bin")]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("No space left on device"), "{msg}");
    let server = srv.thread.join().unwrap();
    assert!(server.is_ok());
    let ended: Vec<String> = srv
        .events
        .try_iter()
        .filter_map(|e| if let ServerEvent::Ended(_, e) = e { e } else { None })
        .collect();
    assert!(ended.iter().any(|e| e.contains("No space left")), "{ended:?}");
    assert!(!disk.path().join("big.bin").exists());
    // What was written is recorded for a resume once there is space.
    let root = transfer_session::paths::Root::open(disk.path()).unwrap();
    let (dir, _) = root.parent_of("big.bin").unwrap();
    let rec = transfer_session::blocks::ResumeState::load(&dir, "big.bin.part.evlbi");
    let rec = rec.expect("resume record kept");
    assert_eq!(rec.size, data.len() as u64);
    let part = fs::read(disk.path().join("big.bin.part")).unwrap();
    for b in transfer_session::blocks::from_ranges(&rec.have) {
        let r = (b as usize) << 20..((b as usize + 1) << 20).min(data.len());
        assert!(part[r.clone()] == data[r], "block {b} recorded as held but differs");
    }
}

// ---- Attacks (issue: hardening). Each reproduces what an attacker on the host did. ----

fn serve_with(cfg: ServerConfig, once: bool) -> Running {
    let server = Server::bind(cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let (tx, events) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let stop = AtomicBool::new(false);
        server.serve(&stop, once, &mut |e| {
            let _ = tx.send(e);
        })
    });
    Running { addr, events, thread }
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

/// Plays the sender by hand on a raw control session: offer, accept (the data of a raw session
/// comes from a socket the test owns, so a forged datagram can come from exactly the sender's
/// address).
fn raw_offer(ch: &mut Channel<Msg>, id: u64, path: &str, size: u64) {
    ch.send(&Msg::Offer(Offer {
        id,
        path: path.into(),
        size,
        mtime_ns: 1,
        block_size: 1 << 20,
        sync: true,
    }))
    .unwrap();
    match ch.recv(Duration::from_secs(10)).unwrap() {
        Msg::Accept { id: i, have } => assert!(i == id && have.is_empty()),
        m => panic!("{m:?}"),
    }
}

/// A raw session: the handshake without a key, the session's chunk size, the welcome.
struct Raw {
    ch: Channel<Msg>,
    key: [u8; 32],
    udp_port: u16,
    session_id: u64,
}

fn raw_session_key(addr: SocketAddr) -> Raw {
    let mut ch = Channel::<Msg>::new(std::net::TcpStream::connect(addr).unwrap(), MAX_LINE);
    ch.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
        client_nonce: "00".repeat(16),
    })
    .unwrap();
    assert!(matches!(
        ch.recv(Duration::from_secs(10)).unwrap(),
        Msg::Challenge { .. }
    ));
    let key = [0x42u8; 32];
    ch.send(&Msg::Auth {
        proof: None,
        session_key: Some(ctlchan::mac::hex_encode(&key)),
    })
    .unwrap();
    ch.authenticate(key, Role::Client);
    ch.send(&Msg::Session { chunk_size: 8192 }).unwrap();
    let Msg::Welcome { udp_port, session_id } = ch.recv(Duration::from_secs(10)).unwrap() else {
        panic!("no welcome");
    };
    Raw {
        ch,
        key,
        udp_port,
        session_id,
    }
}

/// A hand-written sender that says what it likes: only the handshake is shared.
fn raw_session(addr: SocketAddr) -> Channel<Msg> {
    raw_session_key(addr).ch
}

#[test]
fn a_forged_data_datagram_from_the_senders_own_port_moves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let data = pattern(16 << 20, 12);
    let srv = serve_once(root.path(), None);
    let Raw {
        mut ch,
        key: sk,
        udp_port: port,
        session_id,
    } = raw_session_key(srv.addr);
    raw_offer(&mut ch, 0, "f.bin", data.len() as u64);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(("127.0.0.1", port)).unwrap();
    // What the attacker sent: the session id, 13 MB ahead, random payload — untagged, then
    // tagged under a key of its own. Both come from the port the real data will use.
    let forged = |tag: Option<&transfer::DataKey>| {
        let mut d = Vec::new();
        transfer::wire::DataHeader {
            session_id,
            seq: 0,
            offset: 13 << 20,
            timestamp_us: 0,
            retransmit: false,
        }
        .write(&mut d);
        d.extend_from_slice(&pattern(8192, 99));
        if let Some(k) = tag {
            let digest = transfer::wire::payload_digest(13 << 20, &d[transfer::wire::DATA_HEADER_LEN..]);
            k.seal_data(&mut d, 0, &digest);
        }
        d
    };
    sock.send(&forged(None)).unwrap();
    sock.send(&forged(Some(&transfer::DataKey([9; 32])))).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // The real stream, keyed as the real sender keys it.
    let src = tempfile::NamedTempFile::new().unwrap();
    fs::write(src.path(), &data).unwrap();
    let file = fs::File::open(src.path()).unwrap();
    let g = transfer_session::blocks::Geometry {
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
    source.add_file(0, file.try_clone().unwrap(), g);
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
    assert!(f.rejected >= 2, "the forged datagrams were not counted: {f:?}");
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
fn idle_and_closed_connections_neither_delay_a_sender_nor_spend_once() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(2_000_000, 13);
    fs::write(src.path().join("f.bin"), &data).unwrap();
    let srv = serve_once(root.path(), None);
    // 130 idle connections and a few that connect and close at once.
    let idle: Vec<_> = (0..130)
        .filter_map(|_| std::net::TcpStream::connect(srv.addr).ok())
        .collect();
    assert!(idle.len() >= 100);
    for _ in 0..5 {
        drop(std::net::TcpStream::connect(srv.addr).unwrap());
    }
    // One that says hello and then nothing.
    let mut half = Channel::<Msg>::new(std::net::TcpStream::connect(srv.addr).unwrap(), MAX_LINE);
    half.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
        client_nonce: "11".repeat(16),
    })
    .unwrap();
    let t0 = std::time::Instant::now();
    let report = run_send(&config(srv.addr, ""), &[src.path().join("f.bin")]).unwrap();
    let took = t0.elapsed();
    assert!(report.ok, "{report:?}");
    // The old server served one connection at a time and the sender timed out after 60 s.
    assert!(took < Duration::from_secs(30), "the sender waited {took:?}");
    // --once ends after that one authenticated session, not after the first connection.
    srv.thread.join().unwrap().unwrap();
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    drop(idle);
}

#[test]
fn two_senders_at_once_both_arrive() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let a = pattern(3_000_000, 21);
    let b = pattern(3_000_000, 22);
    fs::write(src.path().join("a.bin"), &a).unwrap();
    fs::write(src.path().join("b.bin"), &b).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        root.path().to_path_buf(),
    ))
    .unwrap();
    let addr = server.local_addr().unwrap();
    let st = stop.clone();
    let t = std::thread::spawn(move || server.serve(&st, false, &mut |_| {}));
    let mut cfg = config(addr, "");
    cfg.cc = CcChoice::Fixed(300e6);
    let (ca, cb) = (cfg.clone(), cfg);
    let (pa, pb) = (src.path().join("a.bin"), src.path().join("b.bin"));
    let ha = std::thread::spawn(move || run_send(&ca, &[pa]));
    let hb = std::thread::spawn(move || run_send(&cb, &[pb]));
    let (ra, rb) = (ha.join().unwrap().unwrap(), hb.join().unwrap().unwrap());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stats = t.join().unwrap().unwrap();
    assert!(ra.ok && rb.ok);
    assert_eq!(stats.sessions, 2);
    assert_eq!(fs::read(root.path().join("a.bin")).unwrap(), a);
    assert_eq!(fs::read(root.path().join("b.bin")).unwrap(), b);
}

/// A TCP proxy that forwards both ways and rewrites `from` to `to` in what the sender says.
fn rewriting_proxy(target: SocketAddr, from: &'static str, to: &'static str) -> SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((client, _)) = l.accept() else { return };
        let Ok(server) = std::net::TcpStream::connect(target) else {
            return;
        };
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Both);
        });
        let (mut client, mut server) = (client, server);
        let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = client.read(&mut buf) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buf[..n]).replace(from, to);
            if server.write_all(text.as_bytes()).is_err() {
                break;
            }
        }
        let _ = server.shutdown(std::net::Shutdown::Both);
        let _ = back.join();
    });
    addr
}

#[test]
fn a_proxy_that_rewrites_the_offered_path_breaks_the_session_and_writes_nothing() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(500_000, 31);
    fs::write(src.path().join("p.bin"), &data).unwrap();
    let key = b"sixteen-byte-key-for-tests-0123".to_vec();
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
fn existing_files_are_kept_unless_the_receiver_may_overwrite() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(200_000, 41);
    fs::write(src.path().join("f.bin"), &data).unwrap();
    fs::write(root.path().join("f.bin"), b"older").unwrap();
    let srv = serve_once(root.path(), None);
    let rep = run_send(&config(srv.addr, ""), &[src.path().join("f.bin")]).unwrap();
    srv.finish();
    assert!(!rep.ok);
    assert!(
        rep.files[0].error.as_deref().unwrap().contains("--overwrite"),
        "{rep:?}"
    );
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), b"older");
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), root.path().to_path_buf());
    cfg.overwrite = true;
    let srv = serve_with(cfg, true);
    let rep = run_send(&config(srv.addr, ""), &[src.path().join("f.bin")]).unwrap();
    srv.finish();
    assert!(rep.ok);
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
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
fn many_small_files_share_one_stream_and_sync_is_the_senders_choice() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    // 300 files of 0..40 kB (not multiples of the chunk or of 1 KiB), more than the offer
    // window, in two directories.
    let mut want = Vec::new();
    for i in 0..300u64 {
        let dir = src.path().join(format!("d{}", i % 2));
        fs::create_dir_all(&dir).unwrap();
        let data = pattern((i as usize * 137) % 40_000, 100 + i);
        fs::write(dir.join(format!("f{i:03}.bin")), &data).unwrap();
        want.push((format!("batch/d{}/f{i:03}.bin", i % 2), data));
    }
    for sync in [false, true] {
        let root_now = root.path().join(if sync { "synced" } else { "cached" });
        fs::create_dir_all(&root_now).unwrap();
        let srv = serve_once(&root_now, None);
        let mut cfg = config(srv.addr, "");
        cfg.sync = sync;
        cfg.cc = CcChoice::Adaptive(2e9);
        let batch = src.path().join("batch");
        fs::create_dir_all(&batch).unwrap();
        for d in ["d0", "d1"] {
            if !batch.join(d).exists() {
                fs::rename(src.path().join(d), batch.join(d)).unwrap();
            }
        }
        let report = run_send(&cfg, &[batch]).unwrap();
        let events = srv.finish();
        assert!(report.ok, "{report:?}");
        assert_eq!(report.files.len(), 300);
        for (path, data) in &want {
            assert_eq!(&fs::read(root_now.join(path)).unwrap(), data, "{path}");
        }
        for f in &report.files {
            assert!(f.verified, "{f:?}");
            assert_eq!(f.synced, sync, "{f:?}");
            assert_eq!(f.sync_s.is_some(), sync, "{f:?}");
            let size = want.iter().find(|(p, _)| *p == f.path).unwrap().1.len() as u64;
            assert_eq!(
                f.blake3.as_deref(),
                Some(
                    blake3::hash(&want.iter().find(|(p, _)| *p == f.path).unwrap().1)
                        .to_hex()
                        .as_str()
                )
            );
            assert_eq!(f.size, size);
        }
        // One stream for all of them; every file's bytes read once.
        let ports = events.iter().filter(|e| matches!(e, ServerEvent::DataPort(..))).count();
        assert_eq!(ports, 1);
        let data = report.data.as_ref().unwrap();
        assert_eq!(report.source_bytes_read, data.payload_bytes_sent);
        assert_eq!(files(&events).iter().filter(|f| f.verified).count(), 300);
    }
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

//! `evlbi send`/`recv` sessions over real sockets on 127.0.0.1: files byte-exact, keys,
//! paths that try to leave the root, strays on the data port, a corrupted block fetched again.

use std::fs;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use ctlchan::Channel;
use testkit::SmallDisk;
use transfer_session::control::{Msg, Offer, MAX_LINE, PROTOCOL_VERSION};
use transfer_session::report::{FileRecvReport, SendReport};
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
    thread: JoinHandle<Result<(), SessionError>>,
}

/// A receiver serving one session in a thread; its events arrive on a channel.
fn serve_once(root: &Path, key: Option<&[u8]>) -> Running {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), root.to_path_buf());
    cfg.key = key.map(<[u8]>::to_vec);
    let server = Server::bind(cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let (tx, events) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let stop = AtomicBool::new(false);
        server.serve(&stop, true, &mut |e| {
            let _ = tx.send(e);
        })
    });
    Running { addr, events, thread }
}

impl Running {
    fn finish(self) -> Vec<ServerEvent> {
        self.thread.join().unwrap().unwrap();
        self.events.try_iter().collect()
    }
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
        let server_result = srv.thread.join().unwrap();
        assert!(server_result.is_ok());
        let ended: Vec<_> = srv
            .events
            .try_iter()
            .filter_map(|e| if let ServerEvent::Ended(_, e) = e { e } else { None })
            .collect();
        assert_eq!(ended.len(), 1, "the server records the failed session");
        assert!(
            fs::read_dir(root.path()).unwrap().next().is_none(),
            "something was written"
        );
    }
    // The right key works, and the receiver proves it too.
    let root = tempfile::tempdir().unwrap();
    let srv = serve_once(root.path(), Some(b"correct horse"));
    let mut cfg = config(srv.addr, "");
    cfg.key = Some(b"correct horse".to_vec());
    assert!(run_send(&cfg, &[src.path().join("f")]).unwrap().ok);
    srv.finish();
    // A sender with a key refuses a receiver that cannot prove it.
    let srv = serve_once(root.path(), None);
    cfg.server = srv.addr;
    let err = run_send(&cfg, &[src.path().join("f")]).unwrap_err();
    assert!(matches!(err, SessionError::Auth(_)), "{err}");
    let _ = srv.thread.join();
}

/// A hand-written sender that says what it likes: only the handshake is shared.
fn raw_session(addr: SocketAddr) -> Channel<Msg> {
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
    ch.send(&Msg::Auth { proof: None }).unwrap();
    assert!(matches!(ch.recv(Duration::from_secs(10)).unwrap(), Msg::Welcome { .. }));
    ch
}

#[test]
fn paths_that_leave_the_root_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("victim")).unwrap();
    let srv = serve_once(root.path(), None);
    let mut ch = raw_session(srv.addr);
    for path in [
        "../up.bin",
        "/etc/evlbi-test",
        "a/../../up.bin",
        "escape/x.bin",
        "victim",
        "a//b",
        "./x",
    ] {
        let offer = Offer {
            path: path.into(),
            size: 5,
            mtime_ns: 0,
            chunk_size: 8192,
            block_size: 8192,
        };
        ch.send(&Msg::Offer(offer)).unwrap();
        match ch.recv(Duration::from_secs(10)).unwrap() {
            Msg::Refused { message } => assert!(!message.is_empty()),
            other => panic!("{path}: {other:?}"),
        }
        ch.send(&Msg::Mkdir { path: path.into() }).unwrap();
        assert!(
            matches!(ch.recv(Duration::from_secs(10)).unwrap(), Msg::Refused { .. }),
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
            if let ServerEvent::Round { udp_port, .. } = &e {
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
    let recv = files(&fwd_rx.try_iter().collect::<Vec<_>>());
    assert!(report.ok);
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    assert!(sprayed > 0, "the sprayer never saw the port");
    let f = &recv[0];
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
    assert_eq!(f.resumed_bytes, 4 << 20, "held blocks are not sent again");
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
    let rec = transfer_session::blocks::ResumeState::load(&disk.path().join("big.bin.part.evlbi"));
    let rec = rec.expect("resume record kept");
    assert_eq!(rec.size, data.len() as u64);
    let part = fs::read(disk.path().join("big.bin.part")).unwrap();
    for b in transfer_session::blocks::from_ranges(&rec.have) {
        let r = (b as usize) << 20..((b as usize + 1) << 20).min(data.len());
        assert!(part[r.clone()] == data[r], "block {b} recorded as held but differs");
    }
}

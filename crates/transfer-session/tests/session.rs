//! `evlbi send`/`recv` sessions over real sockets on 127.0.0.1: files byte-exact, keys, a
//! corrupted block fetched again, a full disk, many files in one stream, sync or not.

mod common;

use std::fs;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::*;
use ctlchan::Channel;
use testkit::SmallDisk;
use transfer_session::control::{Msg, MAX_LINE};
use transfer_session::resume::ResumeFile;
use transfer_session::{CcChoice, Server, ServerConfig, ServerEvent, TransferSessionError};

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
        assert!(
            matches!(err, TransferSessionError::Peer(_) | TransferSessionError::Auth(_)),
            "{err}"
        );
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
    assert!(matches!(err, TransferSessionError::Auth(_)), "{err}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stats = t.join().unwrap().unwrap();
    assert_eq!(stats.sessions, 0, "{stats:?}");
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
    let state = transfer::blocks::ResumeState {
        version: transfer::blocks::RESUME_STATE_VERSION,
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
    let events = srv.finish();
    let recv = files(&events);
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    // Protocol 5: the whole file is the first segment, sent before the accept said what the
    // receiver holds; the four held blocks' 512 chunks arrived and were dropped, not written.
    assert_eq!(stream(&events).first_segment_dropped, 512, "{:?}", stream(&events));
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
    let rec = transfer::blocks::ResumeState::load(&dir, "big.bin.part.evlbi");
    let rec = rec.expect("resume record kept");
    assert_eq!(rec.size, data.len() as u64);
    let part = fs::read(disk.path().join("big.bin.part")).unwrap();
    for b in transfer::blocks::from_ranges(&rec.have) {
        let r = (b as usize) << 20..((b as usize + 1) << 20).min(data.len());
        assert!(part[r.clone()] == data[r], "block {b} recorded as held but differs");
    }
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
    let (hello, _) = transfer_session::first_flight::client_hello(None, [0x11; 16], 0, 1, 1);
    half.send(&hello).unwrap();
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

//! Resuming onto files an attacker (or a crash, or a careless hand) changed, and a receiver
//! that lies to the sender: the file that arrives is the file that was sent, or the sender says
//! it is not; nothing wedges.

mod common;

use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use common::{config, files, pattern, run_send, serve_once};
use ctlchan::{Channel, Role};
use transfer::blocks::{ResumeState, RESUME_STATE_VERSION};
use transfer::results::SendReport;
use transfer_session::control::{Msg, MAX_LINE};
use transfer_session::TransferSessionError;

fn mtime_ns(p: &Path) -> u64 {
    fs::metadata(p)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Send `src` to `addr` on a thread; its result within 60 s, or a panic saying the session
/// never ended (a wedged peer).
fn send_bounded(addr: SocketAddr, src: &Path) -> Result<SendReport, TransferSessionError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let src = src.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(run_send(&config(addr, ""), &[src]));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the session did not end within 60 s")
}

/// A `.part` of the right size and a resume record for it, as a tamperer leaves them.
fn plant(root: &Path, name: &str, part: &[u8], size: u64, mtime_ns: u64, have: Vec<[u64; 2]>) {
    fs::write(root.join(format!("{name}.part")), part).unwrap();
    let state = ResumeState {
        version: RESUME_STATE_VERSION,
        size,
        mtime_ns,
        chunk_size: 0,
        block_size: 1 << 20,
        have,
    };
    fs::write(
        root.join(format!("{name}.part.evlbi")),
        serde_json::to_vec(&state).unwrap(),
    )
    .unwrap();
}

/// A record claiming blocks 0 to 2⁶⁴−1 (the receiver walked them one by one and wedged):
/// ignored as not ours, the file starts over and arrives whole.
#[test]
fn a_resume_record_claiming_every_block_there_could_be_starts_the_file_over() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(3 << 20, 11);
    let f = src.path().join("f.bin");
    fs::write(&f, &data).unwrap();
    plant(
        root.path(),
        "f.bin",
        &data,
        data.len() as u64,
        mtime_ns(&f),
        vec![[0, u64::MAX]],
    );
    let srv = serve_once(root.path(), None);
    let report = send_bounded(srv.addr, &f).unwrap();
    let recv = files(&srv.finish());
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    assert_eq!(
        recv[0].resumed_bytes, 0,
        "nothing resumed from a record that is not ours"
    );
}

/// Records whose ranges are reversed, overlapping, or past the file's last block: not ours
/// either (a record this receiver wrote has none of these), so the file starts over.
#[test]
fn resume_records_with_impossible_ranges_start_the_file_over() {
    for have in [vec![[2, 1]], vec![[0, 2], [1, 3]], vec![[0, 1], [5, 9]], vec![[3, 3]]] {
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let data = pattern(3 << 20, 12);
        let f = src.path().join("f.bin");
        fs::write(&f, &data).unwrap();
        plant(
            root.path(),
            "f.bin",
            &data,
            data.len() as u64,
            mtime_ns(&f),
            have.clone(),
        );
        let srv = serve_once(root.path(), None);
        let report = send_bounded(srv.addr, &f).unwrap();
        let recv = files(&srv.finish());
        assert!(report.ok, "{have:?}: {report:?}");
        assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data, "{have:?}");
        assert_eq!(recv[0].resumed_bytes, 0, "{have:?}");
    }
}

/// A `.part` whose every held block was overwritten (zeros in one, garbage in the others): each
/// fails its hash, is fetched again, and the file arrives whole.
#[test]
fn a_part_whose_held_blocks_were_all_overwritten_is_fetched_again() {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(4 << 20, 13);
    let f = src.path().join("f.bin");
    fs::write(&f, &data).unwrap();
    let mut part = pattern(4 << 20, 99);
    part[..1 << 20].fill(0);
    plant(
        root.path(),
        "f.bin",
        &part,
        data.len() as u64,
        mtime_ns(&f),
        vec![[0, 4]],
    );
    let srv = serve_once(root.path(), None);
    let report = send_bounded(srv.addr, &f).unwrap();
    let recv = files(&srv.finish());
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data);
    assert_eq!(recv[0].bad_blocks, 4);
    assert_eq!(recv[0].resumed_bytes, 0);
    assert_eq!(report.files[0].resumed_bytes, 0);
}

/// A `.part` grown or cut after the record was written: not the file the record describes, so
/// the file starts over.
#[test]
fn a_part_of_the_wrong_length_starts_the_file_over() {
    for len in [(3 << 20) - 1, (3 << 20) + 4096] {
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let data = pattern(3 << 20, 14);
        let f = src.path().join("f.bin");
        fs::write(&f, &data).unwrap();
        let mut part = data.clone();
        part.resize(len, 0xee);
        plant(
            root.path(),
            "f.bin",
            &part,
            data.len() as u64,
            mtime_ns(&f),
            vec![[0, 3]],
        );
        let srv = serve_once(root.path(), None);
        let report = send_bounded(srv.addr, &f).unwrap();
        let recv = files(&srv.finish());
        assert!(report.ok, "{len}: {report:?}");
        assert_eq!(fs::read(root.path().join("f.bin")).unwrap(), data, "{len}");
        assert_eq!(recv[0].resumed_bytes, 0, "{len}");
    }
}

/// How the lying receiver below answers a file.
#[derive(Clone, Copy, Debug)]
enum Lie {
    /// Claims to hold every block, then verifies with a hash that is not the file's.
    WrongHash,
    /// Claims to hold every block and verifies at once, before the sender sent its hash.
    VerifiedBeforeTheHash,
    /// Verifies a path other than the one offered.
    OtherPath,
    /// Issue 36: claims to hold every block, then answers the file's hash the sender sent
    /// (before, the sender reported the file verified with none of its bytes sent); gives up
    /// after 5 s without one.
    EchoesTheHash,
    /// Claims to hold every block, sends made-up hashes of them as its proof, then answers the
    /// file's hash the sender sent.
    ForgedProof,
}

/// A receiver that speaks the protocol (no key) and lies as told about the one file offered;
/// what it was sent after the offer (message names, in order) comes on the channel.
fn lying_receiver(lie: Lie) -> (SocketAddr, std::sync::mpsc::Receiver<&'static str>) {
    let (saw, seen) = std::sync::mpsc::channel();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // The data port is the control port's number (protocol 5).
    let udp = std::net::UdpSocket::bind(addr).unwrap();
    std::thread::spawn(move || {
        let Ok((s, _)) = l.accept() else { return };
        let mut ch = Channel::<Msg>::new(s, MAX_LINE);
        let t = Duration::from_secs(20);
        let Ok(Msg::Hello {
            session_key: Some(k),
            session_id,
            ..
        }) = ch.recv(t)
        else {
            return;
        };
        let Some(key) = ctlchan::mac::hex32(&k) else { return };
        ch.authenticate(key, Role::Server);
        let _ = ch.recv(t); // session
        let _ = ch.send(&Msg::Welcome {
            udp_port: udp.local_addr().unwrap().port(),
            session_id,
        });
        let mut offered = None;
        let t = match lie {
            Lie::EchoesTheHash => Duration::from_secs(5),
            _ => t,
        };
        while let Ok(m) = ch.recv(t) {
            if offered.is_some() {
                let _ = saw.send(m.name());
            }
            match m {
                Msg::Offer(o) => {
                    let blocks = o.size.div_ceil(o.block_size);
                    let _ = ch.send(&Msg::Accept {
                        id: o.id,
                        have: vec![[0, blocks]],
                    });
                    if let Lie::ForgedProof = lie {
                        let _ = ch.send(&Msg::Held {
                            id: o.id,
                            first_block: 0,
                            hashes: vec!["00".repeat(32); blocks as usize],
                        });
                    }
                    if let Lie::VerifiedBeforeTheHash = lie {
                        let _ = ch.send(&Msg::Verified {
                            id: o.id,
                            path: o.path.clone(),
                            blake3: "ab".repeat(32),
                            synced: true,
                            sync_us: 0,
                        });
                    }
                    offered = Some(o);
                }
                Msg::FileHash { id, blake3 } => {
                    let Some(o) = offered.as_ref() else { return };
                    let (path, blake3) = match lie {
                        Lie::WrongHash => (o.path.clone(), "cd".repeat(32)),
                        Lie::OtherPath => ("elsewhere.bin".to_string(), blake3),
                        Lie::EchoesTheHash | Lie::ForgedProof => (o.path.clone(), blake3),
                        Lie::VerifiedBeforeTheHash => continue,
                    };
                    let _ = ch.send(&Msg::Verified {
                        id,
                        path,
                        blake3,
                        synced: true,
                        sync_us: 0,
                    });
                }
                Msg::Bye => return,
                _ => {}
            }
        }
    });
    (addr, seen)
}

/// Whatever the receiver claims, the sender reports a file verified only if the receiver's
/// hash is the sender's own, for the path offered; otherwise the file is an error and the
/// session is not ok.
#[test]
fn a_receiver_that_lies_about_the_hash_is_not_believed() {
    let src = tempfile::tempdir().unwrap();
    let data = pattern(2 << 20, 15);
    let f = src.path().join("f.bin");
    fs::write(&f, &data).unwrap();
    for lie in [Lie::WrongHash, Lie::VerifiedBeforeTheHash, Lie::OtherPath] {
        let report = send_bounded(lying_receiver(lie).0, &f);
        let report = match report {
            Ok(r) => r,
            // Refusing the session outright is an honest answer too.
            Err(e) => {
                eprintln!("{lie:?}: the session failed: {e}");
                continue;
            }
        };
        eprintln!("{lie:?}: ok {}, {:?}", report.ok, report.files[0].error);
        assert!(!report.ok, "{lie:?}: {report:?}");
        assert!(!report.files[0].verified, "{lie:?}");
        assert!(report.files[0].error.is_some(), "{lie:?}");
    }
}

/// Issue 36, item 6: a receiver that says it holds every block of a 2 MiB file and answers the
/// file's BLAKE3 it is sent had the sender report the file verified, 2 MiB resumed, none of it
/// ever sent. The receiver proves the blocks it claims (its hashes of them) before it is sent
/// ours: one that cannot never learns the file's hash from the sender, and one whose proof is
/// made up has the file reported not verified — its blocks never sent again, so not delivered.
#[test]
fn a_receiver_that_claims_blocks_it_does_not_hold_is_not_believed() {
    let src = tempfile::tempdir().unwrap();
    let data = pattern(2 << 20, 16);
    let f = src.path().join("f.bin");
    fs::write(&f, &data).unwrap();
    for lie in [Lie::EchoesTheHash, Lie::ForgedProof] {
        let (addr, seen) = lying_receiver(lie);
        let report = send_bounded(addr, &f);
        let seen: Vec<&str> = seen.try_iter().collect();
        eprintln!("{lie:?}: the receiver was sent {seen:?}; {report:?}");
        if let Lie::EchoesTheHash = lie {
            // No proof, no hash of the held blocks: nothing to echo.
            assert!(
                !seen.iter().any(|m| *m == "hashes" || *m == "file_hash"),
                "{lie:?}: the sender sent its hashes of blocks never proved: {seen:?}"
            );
        }
        if let Ok(r) = report {
            assert!(!r.ok, "{lie:?}: {r:?}");
            assert!(!r.files[0].verified, "{lie:?}: {r:?}");
            let why = r.files[0].error.as_deref().unwrap_or_default();
            if let Lie::ForgedProof = lie {
                assert!(why.contains("did not prove"), "{lie:?}: {why}");
                assert_eq!(r.files[0].resumed_bytes, 0, "{lie:?}: nothing proved held");
            }
        }
    }
}

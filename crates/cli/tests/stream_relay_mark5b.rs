//! `evlbi stream relay --frames mark5b` end to end over loopback: a Mark5B station's stream as
//! jive5ab 3.1.0 sends it (`file2net` in udps under a 9000-byte MTU: 8960-byte datagrams, a
//! frame straddling two) → the relay → a UDP socket of the test standing for DiFX's Mark5B
//! reader (whole frames, 8-byte sequence number first). What arrives is checked against the
//! file byte by byte; a datagram missing upstream is a gap in the numbers, counted; a second
//! source is refused, counted.

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Child;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{bin, spawn_with_port, Proc};
use serde_json::Value;

const FRAME: usize = 10_016;
/// jive5ab's udps datagram under a 9000-byte MTU: `(9000 − 28 − 8) & ~7` bytes of the stream.
const PIECE: usize = 8960;

/// `seconds` of a Mark5B station (32 Mb/s: 400 frames/s) made by `vdif gen --format mark5b`.
fn mark5b_file(dir: &Path, seconds: u32) -> (std::path::PathBuf, Vec<u8>) {
    let out = bin()
        .args(["vdif", "gen", "--format", "mark5b", "--stations", "Ef", "--rate", "32M"])
        .args(["--channels", "2", "-q", "--seconds", &seconds.to_string(), "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = dir.join("Ef.m5b");
    let data = std::fs::read(&path).unwrap();
    assert_eq!(data.len() % FRAME, 0);
    (path, data)
}

/// A relay of Mark5B from jive5ab udps to `to` (udps out), its report in `json`.
fn start_relay(to: u16, json: &Path) -> (Proc, u16, Receiver<String>) {
    let (child, port, lines): (Child, u16, Receiver<String>) = spawn_with_port(
        bin()
            .args([
                "stream",
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--seq-format-in",
                "jive5ab",
            ])
            .args(["--frames", "mark5b", "--to", &format!("127.0.0.1:{to}")])
            .args(["--seq-format", "jive5ab", "--idle-timeout", "3s", "--export-json"])
            .arg(json),
    );
    (Proc(child), port, lines)
}

/// Every datagram that reaches `sock` until none came for 5 s after the first (30 s at most).
/// Its buffer holds 1.6 s of the tests' streams: this thread may wait for a core meanwhile (a
/// default 208 KiB buffer held 20 frames and dropped one in a suite run).
fn read_all(sock: UdpSocket) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    let _ = netio::socket::size_buffers(&sock, netio::socket::BufferRequest::new(32 << 20, 0));
    std::thread::spawn(move || {
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        let (t0, mut last) = (Instant::now(), Instant::now());
        while t0.elapsed() < Duration::from_secs(60) {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    got.push(buf[..n].to_vec());
                    last = Instant::now();
                }
                Err(_) if !got.is_empty() && last.elapsed() > Duration::from_secs(5) => break,
                Err(_) => {}
            }
        }
        got
    })
}

/// The relay's end (idle timeout, bounded) and its report.
fn relay_report(mut relay: Proc, json: &Path) -> Value {
    let t0 = Instant::now();
    while relay.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(60), "the relay did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

/// Each datagram is a frame of `data` behind its count in the stream (counted from where the
/// sender's numbers began: jive5ab starts anywhere): the frames of `want`, in order, numbered
/// apart as they are apart in the file, each byte-exact.
fn assert_frames(got: &[Vec<u8>], data: &[u8], want: &[u64]) {
    let counts: Vec<u64> = got
        .iter()
        .map(|d| {
            assert_eq!(d.len(), 8 + FRAME, "a datagram of {} bytes", d.len());
            u64::from_le_bytes(d[..8].try_into().unwrap())
        })
        .collect();
    assert_eq!(counts.len(), want.len(), "frames out");
    let first = counts[0].wrapping_sub(want[0]);
    let off: Vec<usize> = (0..counts.len())
        .filter(|&i| counts[i].wrapping_sub(first) != want[i])
        .take(5)
        .collect();
    assert!(
        off.is_empty(),
        "sequence numbers out of their place at datagrams {off:?}"
    );
    for (d, k) in got.iter().zip(want) {
        let k = *k as usize;
        assert!(
            d[8..] == data[k * FRAME..(k + 1) * FRAME],
            "frame {k} differs from the file's"
        );
    }
}

/// The frames of `data` that the pieces in `sent` (their numbers) cover whole.
fn whole_frames(data: &[u8], sent: &dyn Fn(usize) -> bool) -> Vec<u64> {
    let pieces = data.len() / PIECE;
    (0..data.len() / FRAME)
        .filter(|k| {
            let (a, b) = (k * FRAME, (k + 1) * FRAME);
            (a / PIECE..=(b - 1) / PIECE).all(|p| p < pieces && sent(p))
        })
        .map(|k| k as u64)
        .collect()
}

/// jive5ab's `file2net` of a .m5b in udps under a 9000-byte MTU: every frame the 8960-byte
/// datagrams carry whole arrives whole, in order, byte-exact, numbered by its place; the
/// file's tail short of a datagram never leaves jive5ab (its last frame).
#[test]
fn jive5ab_udps_mark5b_is_relayed_as_whole_frames_byte_exact() {
    let Some(j5) = common::jive5ab_path() else {
        eprintln!(
            "SKIPPED: jive5ab_udps_mark5b_is_relayed: no jive5ab (scripts/setup.sh builds it from ../shared/peers)"
        );
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let (file, data) = mark5b_file(t.path(), 2);
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().port();
    let reader = read_all(sink);
    let json = t.path().join("relay.json");
    let (relay, port, _lines) = start_relay(to, &json);
    let j = common::Jive5ab::start(&j5);
    j.file2net_udps(&file, port, 1000);
    let r = relay_report(relay, &json);
    let got = reader.join().unwrap();
    // 800 frames are 894 whole datagrams and 6400 bytes jive5ab keeps: 799 frames whole.
    let want = whole_frames(&data, &|_| true);
    assert_eq!(want.len(), 799);
    assert_frames(&got, &data, &want);
    let st = &r["stations"][0];
    assert_eq!(st["station"], "Mark5B", "{r}");
    assert_eq!(st["frames_out"], 799, "{r}");
    assert_eq!(st["lost_in_input"], 0, "{r}");
    assert_eq!(st["frames_per_second"], 400, "learned from the frame numbers: {r}");
    assert_eq!(r["datagrams"]["datagrams"], (data.len() / PIECE) as u64, "{r}");
    assert_eq!(r["datagrams"]["split_frames_joined"], 799, "{r}");
    // jive5ab's sender: its datagrams in order, the frames they made counted for it.
    let sender = &r["senders"][0];
    assert_eq!(
        (sender["lost"].as_u64(), sender["frames"].as_u64()),
        (Some(0), Some(799)),
        "{r}"
    );
}

/// The same stream cut as jive5ab cuts it, sent by the test with one datagram left out and a
/// second source sending datagrams of its own: the frames that datagram held part of are a gap
/// in the numbers out, counted lost; the second source is refused, counted; every other frame
/// arrives byte-exact in order.
#[test]
fn a_mark5b_relay_counts_a_gap_and_refuses_a_second_source() {
    let t = tempfile::tempdir().unwrap();
    let (_, data) = mark5b_file(t.path(), 1);
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().port();
    let reader = read_all(sink);
    let json = t.path().join("relay.json");
    let (relay, port, _lines) = start_relay(to, &json);
    let station = UdpSocket::bind("127.0.0.1:0").unwrap();
    let intruder = UdpSocket::bind("127.0.0.1:0").unwrap();
    let missing = 100;
    let pieces = data.len() / PIECE;
    for (p, piece) in data.chunks_exact(PIECE).enumerate() {
        if p != missing {
            let mut d = (p as u64).to_le_bytes().to_vec();
            d.extend_from_slice(piece);
            station.send_to(&d, ("127.0.0.1", port)).unwrap();
        }
        if p % 50 == 10 {
            // The same stream's bytes from another address: not the station relayed.
            let mut d = (p as u64 + 1).to_le_bytes().to_vec();
            d.extend_from_slice(&data[(p + 1) * PIECE..(p + 2) * PIECE]);
            intruder.send_to(&d, ("127.0.0.1", port)).unwrap();
        }
        // 8960 bytes every 0.5 ms: 143 Mb/s, well within a loopback relay.
        std::thread::sleep(Duration::from_micros(500));
    }
    let r = relay_report(relay, &json);
    let got = reader.join().unwrap();
    let want = whole_frames(&data, &|p| p != missing);
    // The missing 8960 bytes are parts of two frames.
    assert_eq!(want.len(), data.len() / FRAME - 1 - 2);
    assert_frames(&got, &data, &want);
    let st = &r["stations"][0];
    assert_eq!(st["frames_out"], want.len() as u64, "{r}");
    assert_eq!(st["lost_in_input"], 2, "{r}");
    let intruded = (0..pieces).filter(|p| p % 50 == 10).count() as u64;
    assert_eq!(r["datagrams"]["foreign_source"], intruded, "{r}");
    assert_eq!(r["datagrams"]["datagrams"], pieces as u64 - 1 + intruded, "{r}");
}

/// What a Mark5B relay cannot do is refused before it starts, naming the flag.
#[test]
fn a_mark5b_relay_refuses_bare_input_and_a_tee() {
    for (args, says) in [
        (&["--seq-format-in", "none"][..], "--seq-format-in must be jive5ab"),
        (
            &[
                "--seq-format-in",
                "jive5ab",
                "--seq-format",
                "jive5ab",
                "--tee",
                "/nonexistent",
            ],
            "--tee is for VDIF",
        ),
        (
            &["--seq-format-in", "jive5ab", "--seq-format", "native"],
            "--seq-format must be jive5ab or none",
        ),
    ] {
        let out = bin()
            .args([
                "stream",
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--frames",
                "mark5b",
                "--to",
                "127.0.0.1:9",
            ])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

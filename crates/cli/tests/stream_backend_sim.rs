//! `evlbi stream send --generate --senders K` as a digital backend (DBBC3/FiLa10G, RDBE,
//! R2DBE): K sockets, each its own port and its own block of VDIF threads, over real loopback
//! sockets. `stream recv` takes one source per station, so K > 1 is checked with a plain UDP
//! socket that keeps every datagram with its source; K = 1 goes end to end through `stream recv`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{assert_usage_error, bin};
use serde_json::Value;
use vdif::VdifHeader;

/// Every test starts its stream at the same second, so `vdif gen` can reproduce it.
const START: &str = "2026-11-23T12:00:00Z";

/// Datagrams received on a plain socket, by source port, in arrival order.
type Capture = BTreeMap<u16, Vec<Vec<u8>>>;

/// Run `stream send --generate` at a plain socket on 127.0.0.1 with `args`, keeping every
/// datagram with its source port until 1.5 s after the sender ended (bounded): its JSON report
/// and what arrived.
fn send_to_plain_socket(args: &[&str]) -> (Value, Capture) {
    // A receive buffer for the whole stream: the test reads as fast as it can, but shares two
    // cores with the sender (and other builds).
    let (raw, _) = netio::bind_udp(
        "127.0.0.1:0".parse().expect("address"),
        netio::BufferRequest::new(64 << 20, 0),
    )
    .expect("bind the capture socket");
    raw.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let port = raw.local_addr().expect("local address").port();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let mut got = Capture::new();
            let mut ended: Option<Instant> = None;
            let hard = Instant::now() + Duration::from_secs(30);
            // Until the sender ended and the socket was quiet for 1.5 s, at most 30 s.
            while Instant::now() < hard && ended.is_none_or(|t| t.elapsed() < Duration::from_millis(1500)) {
                if ended.is_none() && done.load(std::sync::atomic::Ordering::Relaxed) {
                    ended = Some(Instant::now());
                }
                if let Ok((n, from)) = raw.recv_from(&mut buf) {
                    let from: SocketAddr = from;
                    got.entry(from.port()).or_default().push(buf[..n].to_vec());
                    if ended.is_some() {
                        ended = Some(Instant::now());
                    }
                }
            }
            got
        })
    };
    let to = format!("127.0.0.1:{port}");
    let out = bin()
        .args(["stream", "send", "--to", &to, "--json", "--generate", "--start", START])
        .args(args)
        .output()
        .expect("run stream send");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let got = reader.join().expect("capture thread");
    assert!(
        out.status.success(),
        "send failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    (report, got)
}

/// What a backend run must look like on the wire.
struct Expect {
    /// Prefix bytes before each frame (8 for jive5ab's udps, 0 for bare frames).
    prefix: usize,
    /// VDIF frame length, header included.
    frame_len: usize,
    threads: u16,
    senders: usize,
    /// Frames per second per thread.
    fps: u64,
    seconds: u64,
}

/// Check one sender's datagrams against its report: count, sizes, bytes, its udps sequence,
/// only its own threads. Returns the thread ids it carried.
fn check_sender(e: &Expect, s: &Value, datagrams: &[Vec<u8>], port: u16) -> BTreeSet<u16> {
    assert_eq!(
        s["frames_sent"].as_u64(),
        Some(datagrams.len() as u64),
        "sender {port}: frames"
    );
    let bytes: usize = datagrams.iter().map(Vec::len).sum();
    assert_eq!(s["bytes_sent"].as_u64(), Some(bytes as u64), "sender {port}: bytes");
    let reported: BTreeSet<u16> = s["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| t.as_u64().expect("thread id") as u16)
        .collect();
    let mut seen = BTreeSet::new();
    let mut last_seq: Option<u64> = None;
    for (i, d) in datagrams.iter().enumerate() {
        assert_eq!(d.len(), e.prefix + e.frame_len, "sender {port}: datagram {i} size");
        if e.prefix == 8 {
            let seq = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
            if let Some(l) = last_seq {
                assert_eq!(
                    seq,
                    l.wrapping_add(1),
                    "sender {port}: udps sequence broken at datagram {i}"
                );
            }
            last_seq = Some(seq);
        }
        let h = VdifHeader::parse(&d[e.prefix..]).expect("a VDIF header after the prefix");
        assert!(
            reported.contains(&h.thread_id),
            "sender {port} sent thread {} outside its share {reported:?}",
            h.thread_id
        );
        seen.insert(h.thread_id);
    }
    assert_eq!(seen, reported, "sender {port} carried every thread of its share");
    seen
}

/// Check a whole capture: every sender as [`check_sender`], shares disjoint and covering all
/// threads, every thread's frames continuous in time and complete.
fn check_backend(e: &Expect, report: &Value, got: &Capture) {
    let senders = report["senders"].as_array().expect("senders in the report");
    assert_eq!(senders.len(), e.senders, "{report}");
    let ports: BTreeSet<u16> = senders
        .iter()
        .map(|s| s["local_port"].as_u64().expect("port") as u16)
        .collect();
    assert_eq!(ports.len(), e.senders, "each sender its own port");
    assert_eq!(
        got.keys().copied().collect::<BTreeSet<u16>>(),
        ports,
        "datagrams came from the senders' ports"
    );
    let mut all = BTreeSet::new();
    let mut total_bytes = 0u64;
    for s in senders {
        let port = s["local_port"].as_u64().expect("port") as u16;
        let datagrams = &got[&port];
        let share = check_sender(e, s, datagrams, port);
        assert!(all.is_disjoint(&share), "threads {share:?} sent by two senders");
        all.extend(share);
        total_bytes += datagrams.iter().map(|d| d.len() as u64).sum::<u64>();
    }
    assert_eq!(all, (0..e.threads).collect::<BTreeSet<u16>>(), "every thread sent");
    assert_eq!(report["stations"][0]["bytes_sent"].as_u64(), Some(total_bytes));
    // Per thread: frame k of the run follows frame k − 1, with none missing.
    let mut next: BTreeMap<u16, u64> = BTreeMap::new();
    let mut first_second = None;
    for datagrams in got.values() {
        for d in datagrams {
            let h = VdifHeader::parse(&d[e.prefix..]).expect("VDIF header");
            let s0 = *first_second.get_or_insert(h.seconds);
            let k = u64::from(h.seconds - s0) * e.fps + u64::from(h.frame_number);
            let n = next.entry(h.thread_id).or_insert(0);
            assert_eq!(
                k, *n,
                "thread {}: frame {k} arrived where frame {n} was due",
                h.thread_id
            );
            *n += 1;
        }
    }
    for (t, n) in &next {
        assert_eq!(*n, e.fps * e.seconds, "thread {t}: every frame of the run");
    }
}

#[test]
fn two_boards_of_four_threads_in_jive5ab_framing_number_their_own_datagrams() {
    // EVN-like: 8000-byte data arrays (8032-byte frames), 256 Mb/s over 4 threads = 1000 fps.
    let (report, got) = send_to_plain_socket(&[
        "--stations",
        "Ef",
        "--threads",
        "4",
        "--rate",
        "256M",
        "--seconds",
        "1",
        "--senders",
        "2",
        "--seq-format",
        "jive5ab",
    ]);
    let e = Expect {
        prefix: 8,
        frame_len: 8032,
        threads: 4,
        senders: 2,
        fps: 1000,
        seconds: 1,
    };
    check_backend(&e, &report, &got);
    let s = &report["senders"];
    assert_eq!(s[0]["threads"], serde_json::json!([0, 1]), "contiguous blocks: {s}");
    assert_eq!(s[1]["threads"], serde_json::json!([2, 3]), "contiguous blocks: {s}");
    assert_eq!(report["stations"][0]["frames_sent"], 4000);
    assert_eq!(
        report["stations"][0]["rate_bps"], 256e6,
        "the boards' shares add up to the station's rate"
    );
}

#[test]
fn two_boards_of_four_threads_send_bare_frames() {
    let (report, got) = send_to_plain_socket(&[
        "--stations",
        "Ef",
        "--threads",
        "4",
        "--rate",
        "128M",
        "--seconds",
        "2",
        "--senders",
        "2",
        "--seq-format",
        "none",
    ]);
    let e = Expect {
        prefix: 0,
        frame_len: 8032,
        threads: 4,
        senders: 2,
        fps: 500,
        seconds: 2,
    };
    check_backend(&e, &report, &got);
}

#[test]
fn sixteen_threads_over_four_boards_with_evn_and_eht_frames() {
    // EVN: 8032-byte frames, 16 threads × 250 fps = 256 Mb/s.
    let (report, got) = send_to_plain_socket(&[
        "--stations",
        "Ef",
        "--threads",
        "16",
        "--channels",
        "16",
        "--rate",
        "256M",
        "--seconds",
        "1",
        "--senders",
        "4",
        "--seq-format",
        "jive5ab",
    ]);
    let evn = Expect {
        prefix: 8,
        frame_len: 8032,
        threads: 16,
        senders: 4,
        fps: 250,
        seconds: 1,
    };
    check_backend(&evn, &report, &got);
    // EHT/R2DBE: 8192-byte data arrays, 8224-byte frames, 8232-byte datagrams with the PSN;
    // 16 threads × 125 fps × 65536 bits = 131.072 Mb/s, bare and numbered.
    for (format, prefix) in [("jive5ab", 8), ("none", 0)] {
        let (report, got) = send_to_plain_socket(&[
            "--stations",
            "Aa",
            "--threads",
            "16",
            "--channels",
            "16",
            "--frame",
            "8192",
            "--rate",
            "131072000",
            "--seconds",
            "1",
            "--senders",
            "4",
            "--seq-format",
            format,
        ]);
        let eht = Expect {
            prefix,
            frame_len: 8224,
            threads: 16,
            senders: 4,
            fps: 125,
            seconds: 1,
        };
        check_backend(&eht, &report, &got);
    }
}

#[test]
fn three_boards_share_four_threads_in_blocks_differing_by_one() {
    let (report, got) = send_to_plain_socket(&[
        "--stations",
        "Ef",
        "--threads",
        "4",
        "--rate",
        "256M",
        "--seconds",
        "1",
        "--senders",
        "3",
        "--seq-format",
        "jive5ab",
    ]);
    let e = Expect {
        prefix: 8,
        frame_len: 8032,
        threads: 4,
        senders: 3,
        fps: 1000,
        seconds: 1,
    };
    check_backend(&e, &report, &got);
    let shares: Vec<Value> = report["senders"]
        .as_array()
        .expect("senders")
        .iter()
        .map(|s| s["threads"].clone())
        .collect();
    assert_eq!(
        shares,
        vec![
            serde_json::json!([0]),
            serde_json::json!([1]),
            serde_json::json!([2, 3])
        ]
    );
}

/// The one file the receiver wrote for `station` in `dir`.
fn output_of(dir: &Path, station: &str) -> Vec<u8> {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("output directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{station}_")))
        })
        .collect();
    assert_eq!(found.len(), 1, "one file for {station}: {found:?}");
    std::fs::read(&found[0]).expect("read the recording")
}

#[test]
fn one_board_goes_end_to_end_through_stream_recv() {
    // K = 1 is what `stream recv` takes (one source per station): 4 threads in jive5ab framing
    // with 8032-byte frames, and bare R2DBE-size frames (8224 bytes), each written exactly as
    // `vdif gen` makes the same station.
    let cases: [(&str, &[&str], &str); 2] = [
        ("jive5ab", &["--rate", "256M"], "1000"),
        ("none", &["--rate", "262144000", "--frame", "8192"], "1000"),
    ];
    for (format, layout, fps) in cases {
        let dir = tempfile::tempdir().expect("temp dir");
        let station = [
            &["--stations", "Ef", "--threads", "4", "--seconds", "1", "--start", START][..],
            layout,
        ]
        .concat();
        let gen = bin()
            .args(["vdif", "gen", "-q", "--out"])
            .arg(dir.path().join("in"))
            .args(&station)
            .output()
            .expect("run vdif gen");
        assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
        let rx_dir = dir.path().join("rx");
        let summary = dir.path().join("r.json");
        let rx = common::StreamRecv::start(&[
            "--out",
            rx_dir.to_str().expect("utf-8 path"),
            "--export-json",
            summary.to_str().expect("utf-8 path"),
            "--seq-format",
            format,
            "--threads",
            "4",
            "--fps",
            fps,
        ]);
        let to = format!("127.0.0.1:{}", rx.port);
        let out = bin()
            .args([
                "stream",
                "send",
                "--to",
                &to,
                "--json",
                "--generate",
                "--senders",
                "1",
                "--seq-format",
                format,
            ])
            .args(&station)
            .output()
            .expect("run stream send");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
        assert_eq!(report["senders"].as_array().map(Vec::len), Some(1), "{report}");
        assert_eq!(report["senders"][0]["threads"], serde_json::json!([0, 1, 2, 3]));
        assert_eq!(report["senders"][0]["frames_sent"], 4000);
        let (status, log) = rx.wait();
        assert!(status.success(), "{format}: {log}");
        let r: Value = serde_json::from_slice(&std::fs::read(&summary).expect("summary")).expect("summary JSON");
        assert_eq!(r["stations"][0]["window"]["written_filled"], 0, "{format}: {r}");
        let want = std::fs::read(dir.path().join("in/Ef.vdif")).expect("generated file");
        assert!(
            output_of(&rx_dir, "Ef") == want,
            "{format}: the recording differs from vdif gen's"
        );
    }
}

#[test]
fn senders_that_cannot_work_are_usage_errors_that_say_why() {
    let base = [
        "stream",
        "send",
        "--to",
        "127.0.0.1:9",
        "--generate",
        "--stations",
        "Ef",
    ];
    let o = assert_usage_error(&[&base[..], &["--threads", "4", "--senders", "2"]].concat());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--seq-format jive5ab"),
        "native framing is refused with the way out: {e}"
    );
    let o = assert_usage_error(&[&base[..], &["--threads", "4", "--senders", "5", "--seq-format", "none"]].concat());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("4 VDIF thread(s) cannot be split over --senders 5: each board sends at least one thread"),
        "{e}"
    );
    assert_usage_error(&[&base[..], &["--senders", "0", "--seq-format", "none"]].concat());
}

#[test]
fn send_reports_without_senders_still_parse() {
    // Results written before --senders have no "senders": they read as an empty list.
    let (mut report, _) = send_to_plain_socket(&["--stations", "Ef", "--rate", "64M", "--seconds", "1"]);
    let parsed: stream::results::SendReport = serde_json::from_value(report.clone()).expect("parses");
    assert_eq!(parsed.senders.len(), 1);
    report.as_object_mut().expect("an object").remove("senders");
    let old: stream::results::SendReport = serde_json::from_value(report).expect("old JSON parses");
    assert!(old.senders.is_empty());
}

/// `--generate` with `--start now` is a real-time backend: no frame leaves before its own VDIF
/// time, the first leaves within about a second of the start, and the receiver reports the
/// data's age at arrival.
#[test]
fn a_generated_backend_sends_each_frame_at_its_own_vdif_time() {
    let dir = tempfile::tempdir().unwrap();
    let rx_dir = dir.path().join("rx");
    let summary = dir.path().join("recv.json");
    let rx = common::StreamRecv::start(&[
        "--out",
        rx_dir.to_str().unwrap(),
        "--export-json",
        summary.to_str().unwrap(),
    ]);
    let unix = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let before = unix();
    let out = bin()
        .args([
            "stream",
            "send",
            "--generate",
            "--stations",
            "Ef",
            "--rate",
            "64M",
            "--seconds",
            "1",
        ])
        .args(["--to", &format!("127.0.0.1:{}", rx.port)])
        .output()
        .unwrap();
    let after = unix();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid = rx.child.id();
    let (status, log) = rx.wait();
    assert!(status.success(), "{log} (pid {pid})");
    let file = output_of(&rx_dir, "Ef");
    let h = VdifHeader::parse(&file).unwrap();
    let first = h.unix_seconds() as f64;
    // The data were moved to the next whole second ahead of the clock (without that their time
    // is the generation's start, before `before`) …
    assert!(
        first > before && first <= before + 2.0,
        "first frame {first}, start {before}"
    );
    // … and 1 s of data (1000 frames/s) cannot have left before its last frame's time.
    assert!(after >= first + 0.999, "sent by {after}, data until {}", first + 1.0);
    let r: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let age = &r["data_age_ns"];
    assert!(age["count"].as_u64().unwrap() > 0, "{age}");
    // Never older than the run (a frame sent late by the whole second would be).
    assert!(age["max"].as_u64().unwrap() < 1_000_000_000, "{}", age["max"]);
}

/// Board k sends to the k-th `--to` (a DBBC3's boards each have their own destination port):
/// each port gets exactly its board's threads, numbered by its own udps sequence; a count of
/// destinations that fits neither one nor every board is a usage error.
#[test]
fn each_board_sends_to_its_own_destination_port() {
    let bind = || {
        let (s, _) = netio::bind_udp(
            "127.0.0.1:0".parse().expect("address"),
            netio::BufferRequest::new(16 << 20, 0),
        )
        .expect("bind a capture socket");
        s.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        s
    };
    let socks = [bind(), bind()];
    let to: Vec<String> = socks
        .iter()
        .map(|s| s.local_addr().expect("local address").to_string())
        .collect();
    let out = bin()
        .args([
            "stream",
            "send",
            "--to",
            &to[0],
            "--to",
            &to[1],
            "--json",
            "--generate",
            "--start",
            START,
        ])
        .args(["--stations", "Ef", "--threads", "4", "--rate", "256M", "--seconds", "1"])
        .args(["--senders", "2", "--seq-format", "jive5ab"])
        .output()
        .expect("run stream send");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    for (k, sock) in socks.iter().enumerate() {
        let mut threads = BTreeSet::new();
        let mut seqs = Vec::new();
        let mut buf = vec![0u8; 65536];
        // Everything was sent before `output()` returned: read until the socket is quiet (bounded).
        for _ in 0..10_000 {
            let Ok(n) = sock.recv(&mut buf) else { break };
            assert_eq!(n, 8 + 8032, "udps datagram of one 8032-byte frame");
            seqs.push(u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")));
            threads.insert(VdifHeader::parse(&buf[8..40]).expect("VDIF header").thread_id);
        }
        let want: BTreeSet<u16> = if k == 0 { [0, 1].into() } else { [2, 3].into() };
        assert_eq!(threads, want, "port {} got board {k}'s threads", to[k]);
        assert_eq!(seqs.len(), 2000, "1 s of 2 threads at 1000 frames/s");
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
            "one sequence per board"
        );
        assert_eq!(report["senders"][k]["to"], to[k].as_str());
    }
    let o = assert_usage_error(&[
        "stream",
        "send",
        "--to",
        &to[0],
        "--to",
        &to[1],
        "--to",
        &to[1],
        "--generate",
        "--stations",
        "Ef",
        "--threads",
        "4",
        "--senders",
        "2",
        "--seq-format",
        "none",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("one destination for all boards or one per board"), "{e}");
}

/// A backend's frames carry the time they were sampled: a simulator held up (SIGSTOP for
/// 1.5 s, as a descheduled host) with `--late-frames skip` skips the frames whose time passed
/// by more than --max-lag and never sends a frame late; `send` (the default, every frame sent)
/// re-anchors its timeline and sends every later frame 1.5 s behind its VDIF time, which a
/// recorder asked for "the next 4 s" then waits for.
#[test]
fn a_held_up_backend_skips_the_frames_whose_time_passed_and_sends_none_late() {
    let dir = tempfile::tempdir().unwrap();
    let rx_dir = dir.path().join("rx");
    let summary = dir.path().join("recv.json");
    let rx = common::StreamRecv::start(&[
        "--out",
        rx_dir.to_str().unwrap(),
        "--export-json",
        summary.to_str().unwrap(),
    ]);
    // 4 s of 64 Mb/s: 8000-byte frames, 1000 a second.
    let sender = bin()
        .args([
            "stream",
            "send",
            "--generate",
            "--stations",
            "Ef",
            "--rate",
            "64M",
            "--seconds",
            "4",
        ])
        .args([
            "--max-lag",
            "100ms",
            "--late-frames",
            "skip",
            "--json",
            "--to",
            &format!("127.0.0.1:{}", rx.port),
        ])
        // Files, not pipes: the JSON report is larger than a pipe holds before the test reads it.
        .stdout(std::fs::File::create(dir.path().join("send.json")).unwrap())
        .stderr(std::fs::File::create(dir.path().join("send.log")).unwrap())
        .spawn()
        .unwrap();
    let sender = common::Proc(sender);
    // Hold it up once its frames arrive (the timeline has started).
    let t0 = Instant::now();
    let arrived = || {
        std::fs::read_dir(&rx_dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.metadata().ok())
            .any(|m| m.len() > 0)
    };
    while !arrived() {
        assert!(t0.elapsed() < Duration::from_secs(20), "nothing arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let held = common::Stopped::new(sender.0.id());
    std::thread::sleep(Duration::from_millis(1500));
    drop(held);
    let mut sender = sender;
    let t1 = Instant::now();
    while sender.0.try_wait().unwrap().is_none() {
        assert!(t1.elapsed() < Duration::from_secs(30), "the sender did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stdout = std::fs::read_to_string(dir.path().join("send.json")).unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("send.log")).unwrap();
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    let st = &report["stations"][0];
    let (sent, skipped) = (
        st["frames_sent"].as_u64().unwrap(),
        st["skipped_late"].as_u64().unwrap(),
    );
    // Every frame of the 4 s is sent or skipped, none twice; the hold of 1.5 s less the
    // 100 ms that may be caught up is skipped (the hold may end up to a scheduler's delay late).
    assert_eq!(sent + skipped, 4000, "{st}");
    assert!((1300..=2500).contains(&skipped), "skipped {skipped}: {st}");
    assert_eq!(st["slips"].as_u64(), Some(0), "{st}");
    assert!(
        stderr.contains(&format!("skipped {skipped} frames whose VDIF time had passed")),
        "{stderr}"
    );
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    let r: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let age = &r["data_age_ns"];
    // No frame is 1.5 s older than its time at the receiver (each left within 100 ms of it; the
    // rest of the bound is the loaded host's delay between departure and the receiver's clock).
    assert!(age["max"].as_u64().unwrap() < 1_000_000_000, "{age}");
}

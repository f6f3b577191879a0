//! What a new user of `evlbi stream` hit first (issue 29 item 5), each as separate processes on
//! 127.0.0.1: a relay or recorder of bare VDIF without `--fps` says so at the first frame, `--generate
//! --duration` sends that long, `stream send -q`, `--idle-timeout` with nothing ever arriving,
//! and a file of half a second.

// unsafe: kill(2) (SIGTERM) of the relay the test started: std signals only SIGKILL.
#![allow(unsafe_code)]

mod common;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{bin, spawn_with_port, Proc, StreamRecv};
use serde_json::Value;

/// 128 Mb/s of 8000-byte frames (`vdif gen`'s default frame): 2000 frames/s.
const FRAME: usize = 8032;

/// Station Ef, 2 s at 128 Mb/s (4000 frames, EDV 0: no rate in the header) in `dir/in`.
fn two_seconds(dir: &Path) -> PathBuf {
    common::gen_two_stations(dir, &["--rate", "128M"]).0
}

/// `frames` frames of `file` from frame `first` on, written to `dir/name`.
fn cut(file: &Path, first: usize, frames: usize, dir: &Path, name: &str) -> PathBuf {
    let data = std::fs::read(file).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, &data[first * FRAME..(first + frames) * FRAME]).unwrap();
    path
}

/// Wait (bounded) for `child` to exit; its exit status.
fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The stderr lines still to come from a process that has exited (bounded).
fn rest_of(log: &std::sync::mpsc::Receiver<String>) -> Vec<String> {
    let mut lines = Vec::new();
    while let Ok(l) = log.recv_timeout(Duration::from_secs(2)) {
        lines.push(l);
    }
    lines
}

fn send(to: u16, args: &[&str]) -> Output {
    bin()
        .args(["stream", "send", "--to", &format!("127.0.0.1:{to}")])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn bare_vdif_without_fps_is_said_at_the_first_frame_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let ef = two_seconds(dir.path());
    // No --duration, no --idle-timeout: only a signal ends them, so the line can only come while
    // they run. Before issue 29 it came in the closing summary alone.
    for cmd in [
        &[
            "stream",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "127.0.0.1:9",
            "-q",
        ][..],
        &[
            "stream",
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--seq-format",
            "none",
            "-q",
        ],
    ] {
        let (child, port, log) = spawn_with_port(bin().args(cmd));
        let mut p = Proc(child);
        let sender = send(port, &["--seq-format", "none", "-q", ef.to_str().unwrap()]);
        assert!(sender.status.success(), "{}", String::from_utf8_lossy(&sender.stderr));
        let t0 = Instant::now();
        let said = loop {
            match log.recv_timeout(Duration::from_millis(200)) {
                Ok(l) if l.contains("--fps") => break l,
                Ok(_) => {}
                Err(_) => assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{cmd:?}: no word of --fps while running"
                ),
            }
        };
        assert!(p.0.try_wait().unwrap().is_none(), "{cmd:?}: said while running");
        assert!(said.starts_with("error: station Ef: frame rate unknown"), "{said}");
        // SIGTERM: it stops and reports; the line is not repeated for the 3999 frames after.
        // SAFETY: kill(2) on the PID of a child we started and have not reaped.
        unsafe { libc::kill(p.0.id() as libc::pid_t, libc::SIGTERM) };
        let status = wait_exit(&mut p.0, Duration::from_secs(10)).expect("stopped on SIGTERM");
        let rest = rest_of(&log);
        assert_eq!(status.code(), Some(1), "{cmd:?}: every datagram refused: {rest:?}");
        assert_eq!(
            rest.iter().filter(|l| l.starts_with("error: station")).count(),
            0,
            "{rest:?}"
        );
        assert!(
            rest.iter()
                .any(|l| l.starts_with("rejected datagrams: 4000 (station Ef: frame rate unknown")),
            "{cmd:?}: {rest:?}"
        );
    }
}

#[test]
fn generate_with_a_duration_sends_that_long() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("r.json");
    let rx = StreamRecv::start(&["--export-json", summary.to_str().unwrap()]);
    // 64 Mb/s of 8000-byte frames: 1000 frames/s; one second generated, four asked for.
    let out = send(
        rx.port,
        &[
            "--generate",
            "--stations",
            "Ef",
            "--rate",
            "64M",
            "--start",
            "2026-11-23T12:00:00Z",
            "--duration",
            "4s",
            "--json",
            "-q",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sent: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sent["stations"][0]["frames_sent"], 4000, "4 s × 1000 frames/s");
    assert_eq!(sent["stations"][0]["loops"], 3, "the generated second sent 4 times");
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    let r: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let w = &r["stations"][0]["window"];
    assert_eq!(w["written_valid"], 4000, "{log}");
    assert_eq!(w["written_filled"], 0, "{log}");
}

#[test]
fn stream_send_has_quiet_like_recv_and_relay() {
    let dir = tempfile::tempdir().unwrap();
    let ef = two_seconds(dir.path());
    // A socket that takes the datagrams (the kernel drops what does not fit; nobody reads).
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    let stderr = |extra: &[&str]| {
        let out = send(port, &[&[ef.to_str().unwrap()][..], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stderr).unwrap()
    };
    // 2 s of data: live lines once a second, then the closing summary.
    let loud = stderr(&[]);
    assert!(loud.lines().any(|l| l.contains("frames sent")), "{loud}");
    for quiet in ["-q", "--quiet"] {
        let q = stderr(&[quiet]);
        assert!(!q.lines().any(|l| l.contains("frames sent")), "{quiet}: {q}");
        assert!(
            q.contains("Ef (") && q.contains("4000 frames in"),
            "{quiet}: the summary stays: {q}"
        );
    }
}

#[test]
fn idle_timeout_fires_when_nothing_ever_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("r.json");
    for cmd in [
        &["stream", "recv", "--listen", "127.0.0.1:0"][..],
        &["stream", "relay", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"],
    ] {
        let mut c = bin();
        c.args(cmd)
            .args([
                "--idle-timeout",
                "1s",
                "--first-datagram-timeout",
                "1s",
                "--export-json",
            ])
            .arg(&summary);
        let (child, _, log) = spawn_with_port(&mut c);
        let mut p = Proc(child);
        // Before issue 29 it never stopped: waited for here at most 10 s, then killed on drop.
        let status = wait_exit(&mut p.0, Duration::from_secs(10)).unwrap_or_else(|| panic!("{cmd:?} never stopped"));
        let rest = rest_of(&log);
        // Nothing recorded or relayed is a failure a script must see (exit 1, said why).
        assert_eq!(status.code(), Some(1), "{cmd:?}: {rest:?}");
        assert!(
            rest.iter()
                .any(|l| l == "no datagram arrived within the first-datagram timeout"),
            "{rest:?}"
        );
        assert!(
            rest.iter()
                .any(|l| l.starts_with("evlbi: no datagram arrived on 127.0.0.1:")
                    && l.contains("is the sender pointed at this address and port")),
            "{rest:?}"
        );
        let r: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert_eq!(r["stopped_by"], "idle timeout", "{cmd:?}");
        assert_eq!(r["datagrams"]["datagrams"], 0, "{cmd:?}");
    }
}

/// Issue 37: a receiver (and a relay) started before its sender waits for the first datagram
/// past its idle timeout (by default the longer of it and 60 s): here the sender starts 3 s
/// after a 1 s idle timeout, everything it sends arrives, and only then does the idle timeout
/// stop the run, a success.
#[test]
fn the_idle_timeout_counts_from_the_first_datagram_not_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("r.json");
    for cmd in [
        &[
            "stream",
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--seq-format",
            "jive5ab",
            "--fps",
            "1000",
        ][..],
        &[
            "stream",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--seq-format-in",
            "jive5ab",
            "--fps",
            "1000",
            "--to",
            "127.0.0.1:9",
        ],
    ] {
        let mut c = bin();
        c.args(cmd)
            .args(["--idle-timeout", "1s", "--export-json"])
            .arg(&summary);
        let (child, port, log) = spawn_with_port(&mut c);
        let mut p = Proc(child);
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            p.0.try_wait().unwrap().is_none(),
            "{cmd:?} stopped before its sender started: {:?}",
            rest_of(&log)
        );
        let sent = send(
            port,
            &[
                "--generate",
                "--stations",
                "Ef",
                "--rate",
                "64M",
                "--seconds",
                "1",
                "--seq-format",
                "jive5ab",
                "-q",
            ],
        );
        assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
        let status = wait_exit(&mut p.0, Duration::from_secs(30)).unwrap_or_else(|| panic!("{cmd:?} never stopped"));
        let rest = rest_of(&log);
        assert_eq!(status.code(), Some(0), "{cmd:?}: {rest:?}");
        let r: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert_eq!(r["stopped_by"], "idle timeout", "{cmd:?}");
        let got = r["datagrams"]["datagrams"].as_u64().unwrap();
        // 1 s of 64 Mb/s in 8000-byte frames on loopback.
        assert!(got > 0, "{cmd:?}: {rest:?}");
        if cmd[1] == "recv" {
            assert_eq!(got, 1000, "{cmd:?}: every frame sent arrived: {rest:?}");
        }
    }
}

#[test]
fn a_half_second_file_is_sent_at_the_rate_it_allows() {
    let dir = tempfile::tempdir().unwrap();
    let ef = two_seconds(dir.path());
    let sent = |file: &Path, extra: &[&str]| {
        let summary = dir.path().join("r.json");
        let rx = StreamRecv::start(&["--export-json", summary.to_str().unwrap()]);
        let out = send(
            rx.port,
            &[&[file.to_str().unwrap(), "--json", "-q"][..], extra].concat(),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let (status, log) = rx.wait();
        assert!(status.success(), "{log}");
        let r: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert_eq!(r["stations"][0]["window"]["written_valid"], 1000, "{log}");
        let s: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            s["stations"][0]["frames_per_second"].clone(),
            s["stations"][0]["frames_sent"].clone(),
        )
    };
    // 12:00:00.75 to 12:00:01.25: the frame numbers wrap at 2000, and show it.
    let across = cut(&ef, 1500, 1000, dir.path(), "across.vdif");
    assert_eq!(sent(&across, &[]), (2000.into(), 1000.into()));
    // 12:00:00.00 to 12:00:00.50 in EDV 3 headers: the sample rate is in them (4 MHz of
    // bandwidth, real: 8 MS/s ÷ 4000 samples per frame = 2000 frames/s).
    let mut edv3 = std::fs::read(&ef).unwrap()[..1000 * FRAME].to_vec();
    for f in edv3.chunks_mut(FRAME) {
        f[16..20].copy_from_slice(&((3u32 << 24) | (1 << 23) | 4).to_le_bytes());
    }
    std::fs::write(dir.path().join("edv3.vdif"), &edv3).unwrap();
    assert_eq!(sent(&dir.path().join("edv3.vdif"), &[]), (2000.into(), 1000.into()));
    // The same half second in EDV 0: frames 0..999 of one second could be 1000 or 2000 or any
    // more per second. Refused with why and what to pass; sent with it.
    let within = cut(&ef, 0, 1000, dir.path(), "within.vdif");
    let out = bin()
        .args(["stream", "send", "--to", "127.0.0.1:9"])
        .arg(&within)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "frame rate unknown",
        "numbers 0..999 of one second (2026-11-23T12:00:00",
        "headers (EDV 0) state no sample rate",
        "at least 1000 frames/s per thread",
        "--fps N",
        "÷ 64000 bits",
        "--rate",
    ] {
        assert!(err.contains(want), "{want:?} in {err}");
    }
    assert_eq!(sent(&within, &["--fps", "2000"]), (2000.into(), 1000.into()));
}

//! `evlbi stream recv` against the defects a security review found, each reproduced with real
//! datagrams over 127.0.0.1 and judged by what was written to disk and reported:
//!
//! 1. a stray datagram sent first, or a restarted sender, must not lock the real sender out;
//!    `--from` takes a host without a port;
//! 2. phantom stations must not fill `--max-stations`;
//! 3. a forged duplicate must never replace the frame kept, and is counted apart;
//! 4. kernel drops are this socket's, not the host's;
//! 5. a sender started at once, before the receiver is ready, loses nothing.
//!
//! Datagrams are built by hand here (the native prefix is a documented wire format) so the test
//! speaks the wire, not the crate's encoder.

// unsafe: kill(2) of the processes the tests started and stat(2) of a socket: std has neither.
#![allow(unsafe_code)]

mod common;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, Proc};
use serde_json::Value;

/// 128 Mb/s in 8000-byte frames: 2000 frames/s per station, 8032 bytes a frame.
const FPS: u32 = 2000;
const FRAME: usize = 8032;

/// Two stations (Ef, Wb) of 2 s each (4000 frames) in `dir/in`.
fn generate(dir: &Path) -> (PathBuf, PathBuf) {
    common::gen_two_stations(dir, &["--rate", "128M"])
}

/// A native data datagram (crates/stream/src/wire.rs): magic, version 1, flags 0, stream,
/// sequence number, frames/s, threads 1, sender session, then the frame.
fn native(stream: u16, session: u16, seq: u64, frame: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(24 + frame.len());
    d.extend_from_slice(b"eVDS");
    d.extend_from_slice(&[1, 0]);
    d.extend_from_slice(&stream.to_be_bytes());
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&FPS.to_be_bytes());
    d.extend_from_slice(&1u16.to_be_bytes());
    d.extend_from_slice(&session.to_be_bytes());
    d.extend_from_slice(frame);
    d
}

type Recv = common::StreamRecv;

fn send(port: u16, files: &[&Path], extra: &[&str]) -> Output {
    let out = bin()
        .args(["stream", "send", "--to", &format!("127.0.0.1:{port}")])
        .args(files)
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "send: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The files the receiver wrote for `station`, oldest name first.
fn outputs_of(dir: &Path, station: &str) -> Vec<Vec<u8>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    found.retain(|p| {
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("{station}_"))
    });
    found.sort();
    found.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// The one file written for `station` is byte-identical to `expect`.
fn assert_written(dir: &Path, station: &str, expect: &[u8], log: &str) {
    let out = outputs_of(dir, station);
    assert_eq!(out.len(), 1, "one file for {station}: {log}");
    assert_eq!(out[0].len(), expect.len(), "{station}: bytes written: {log}");
    assert!(out[0] == expect, "{station}: output differs from what was sent");
}

/// A scratch directory with the two stations, the output directory and the summary path.
struct Setup {
    dir: tempfile::TempDir,
    ef: PathBuf,
    wb: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let (ef, wb) = generate(dir.path());
        Setup { dir, ef, wb }
    }
    fn rx_dir(&self) -> PathBuf {
        self.dir.path().join("rx")
    }
    fn summary(&self) -> PathBuf {
        self.dir.path().join("r.json")
    }
    /// `--out rx --export-json r.json` and `extra`.
    fn receiver(&self, extra: &[&str]) -> Recv {
        let (rx, sum) = (self.rx_dir(), self.summary());
        let mut args = vec!["--out", rx.to_str().unwrap(), "--export-json", sum.to_str().unwrap()];
        args.extend_from_slice(extra);
        Recv::start(&args)
    }
}

#[test]
fn a_stray_datagram_sent_first_does_not_lock_the_sender_out() {
    let t = Setup::new();
    let rx = t.receiver(&[]);
    let ef = std::fs::read(&t.ef).unwrap();
    // One well-formed native datagram for stream 0, from a port that is not the sender's.
    let stray = UdpSocket::bind("127.0.0.1:0").unwrap();
    stray
        .send_to(&native(0, 0, 1, &ef[FRAME..2 * FRAME]), ("127.0.0.1", rx.port))
        .unwrap();
    send(rx.port, &[&t.ef], &[]);
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    assert_written(&t.rx_dir(), "Ef", &ef, &log);
    let r = json(&t.summary());
    assert_eq!(r["stations"][0]["window"]["written_valid"], 4000, "{log}");
    assert_eq!(r["datagrams"]["unconfirmed"], 1, "{}", r["datagrams"]);
    assert_eq!(r["datagrams"]["phantoms_dropped"], 1, "{}", r["datagrams"]);
    assert_eq!(r["datagrams"]["foreign_source"], 0, "{}", r["datagrams"]);
}

#[test]
fn a_restarted_sender_is_followed_and_the_change_reported() {
    let t = Setup::new();
    let ef = std::fs::read(&t.ef).unwrap();
    // The station's two seconds as two runs of `stream send`: a sender that stopped and was
    // started again (new process: new source port, new session) continuing the time.
    let half = ef.len() / 2;
    let (first, second) = (t.dir.path().join("first.vdif"), t.dir.path().join("second.vdif"));
    std::fs::write(&first, &ef[..half]).unwrap();
    std::fs::write(&second, &ef[half..]).unwrap();
    let rx = t.receiver(&[]);
    let fps = FPS.to_string();
    send(rx.port, &[&first], &["--fps", &fps]);
    send(rx.port, &[&second], &["--fps", &fps]);
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    assert_written(&t.rx_dir(), "Ef", &ef, &log);
    let r = json(&t.summary());
    let st = &r["stations"][0];
    assert_eq!(st["sender_changes"], 1, "{st}");
    assert_eq!(st["sender_change_log"][0]["restarted"], true, "{st}");
    assert_eq!(st["window"]["written_filled"], 0, "{st}");
    assert_eq!(r["datagrams"]["foreign_source"], 0, "{}", r["datagrams"]);
    assert!(log.contains("Ef: sender restarted from 127.0.0.1:"), "{log}");
}

#[test]
fn from_takes_a_host_without_a_port() {
    let t = Setup::new();
    let ef = std::fs::read(&t.ef).unwrap();
    // IP only: any port of that host, which a sender picks afresh each run.
    let rx = t.receiver(&["--from", "127.0.0.1"]);
    send(rx.port, &[&t.ef], &[]);
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    assert_written(&t.rx_dir(), "Ef", &ef, &log);
    // Another host, or another port of this one, gets nothing in.
    for (i, from) in ["127.0.0.2", "127.0.0.1:1"].into_iter().enumerate() {
        let rx_dir = t.dir.path().join(format!("rx{i}"));
        let sum = t.dir.path().join(format!("r{i}.json"));
        let rx = Recv::start(&[
            "--from",
            from,
            "--out",
            rx_dir.to_str().unwrap(),
            "--export-json",
            sum.to_str().unwrap(),
        ]);
        send(rx.port, &[&t.ef], &[]);
        let (status, log) = rx.wait();
        assert!(status.success(), "{log}");
        assert!(outputs_of(&rx_dir, "Ef").is_empty(), "--from {from}: {log}");
        assert_eq!(json(&sum)["datagrams"]["foreign_source"], 4000, "--from {from}");
    }
    // Not an address at all: a usage error naming the option.
    let o = common::assert_usage_error(&["stream", "recv", "--listen", "0", "--from", "corr.example"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--from"));
}

#[test]
fn phantom_stations_sent_first_do_not_lock_real_stations_out() {
    let t = Setup::new();
    let rx = t.receiver(&[]);
    let ef = std::fs::read(&t.ef).unwrap();
    let wb = std::fs::read(&t.wb).unwrap();
    // 16 datagrams naming streams 100..115: as many as --max-stations allows by default.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for stream in 100..116u16 {
        s.send_to(&native(stream, 0, 0, &ef[..FRAME]), ("127.0.0.1", rx.port))
            .unwrap();
    }
    send(rx.port, &[&t.ef, &t.wb], &[]);
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    assert_written(&t.rx_dir(), "Ef", &ef, &log);
    assert_written(&t.rx_dir(), "Wb", &wb, &log);
    let r = json(&t.summary());
    let d = &r["datagrams"];
    assert_eq!(r["stations"].as_array().unwrap().len(), 2, "{log}");
    assert_eq!(d["too_many_stations"], 0, "{d}");
    assert_eq!(d["phantoms_dropped"], 16, "{d}");
    assert_eq!(d["unconfirmed"], 16, "{d}");
}

/// A 64-bit xorshift: the forger's "random" data, reproducible.
fn noise(state: &mut u64, out: &mut [u8]) {
    for b in out {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *b = *state as u8;
    }
}

#[test]
fn forged_duplicates_never_replace_the_frames_written() {
    let t = Setup::new();
    let rx = Recv::start(&[
        "--out",
        t.rx_dir().to_str().unwrap(),
        "--export-json",
        t.summary().to_str().unwrap(),
    ]);
    let ef = std::fs::read(&t.ef).unwrap();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", rx.port);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut forged = 0u64;
    for (i, f) in ef.chunks(FRAME).enumerate() {
        s.send_to(&native(0, 7, i as u64, f), to).unwrap();
        // Every 5th frame again, same sequence number and header, random data: from the sender's
        // own address and session, right after the real one.
        if i % 5 == 2 {
            let mut fake = f.to_vec();
            noise(&mut state, &mut fake[32..]);
            s.send_to(&native(0, 7, i as u64, &fake), to).unwrap();
            forged += 1;
        }
        if i % 100 == 99 {
            // Well within the socket buffer; keeps the test from hogging a core.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    assert_written(&t.rx_dir(), "Ef", &ef, &log);
    let r = json(&t.summary());
    let w = &r["stations"][0]["window"];
    assert_eq!(forged, 800);
    assert_eq!(w["duplicate_mismatch"], forged, "{w}");
    assert_eq!(w["duplicates"], 0, "{w}");
    assert!(log.contains("800 duplicate(s) differing"), "{log}");
}

/// Datagrams the kernel dropped at `sock` (/proc/net/udp by the socket's inode).
fn drops_of(sock: &UdpSocket) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: fstat(2) into a zeroed stat for a descriptor this test owns.
    let inode = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(libc::fstat(sock.as_raw_fd(), &mut st), 0);
        st.st_ino
    };
    netio::counters::UdpSocketEntry::read(inode).unwrap().unwrap().drops
}

#[test]
fn kernel_drops_are_this_socket_s_own() {
    let t = Setup::new();
    // A small receive buffer (the kernel doubles it: ~16 frames fit) and a receiver that does
    // not read for a while (stopped).
    let rx = t.receiver(&["--rcvbuf", "64K"]);
    let ef = std::fs::read(&t.ef).unwrap();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", rx.port);
    // Another socket of this host that overflows meanwhile: host-wide RcvbufErrors grow with it.
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other_to = other.local_addr().unwrap();
    netio::size_buffers(&other, netio::BufferRequest::new(16 << 10, 0)).unwrap();
    let pid = rx.child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child, which is running (it printed its address).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let mut sent = 0u64;
    for (i, f) in ef.chunks(FRAME).enumerate().take(300) {
        s.send_to(&native(0, 3, i as u64, f), to).unwrap();
        s.send_to(&ef[..FRAME], other_to).unwrap();
        sent += 1;
    }
    // SAFETY: as above; the child is stopped, not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    // The rest of the stream once it reads again.
    for (i, f) in ef.chunks(FRAME).enumerate().skip(300).take(200) {
        s.send_to(&native(0, 3, i as u64, f), to).unwrap();
        sent += 1;
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let (status, log) = rx.wait();
    assert!(status.success(), "{log}");
    let r = json(&t.summary());
    let got = r["datagrams"]["datagrams"].as_u64().unwrap();
    let ours = r["socket_drops"].as_u64().unwrap();
    let theirs = drops_of(&other);
    println!(
        "sent {sent}, received {got}, our socket dropped {ours}, the other socket {theirs}, host RcvbufErrors {}",
        r["udp"]["rcvbuf_errors"]
    );
    assert!(ours > 200, "the stopped receiver's buffer overflowed: {ours}");
    assert_eq!(
        ours,
        sent - got,
        "every datagram not received was dropped at our socket"
    );
    assert!(theirs > 200, "the other socket overflowed too: {theirs}");
    // The host-wide counter (what was reported before) holds both; ours only our own.
    assert!(
        r["udp"]["rcvbuf_errors"].as_u64().unwrap() >= ours + theirs,
        "{}",
        r["udp"]
    );
    assert!(
        log.contains(&format!("kernel dropped {ours} datagrams at this socket")),
        "{log}"
    );
}

#[test]
fn a_sender_started_at_once_loses_nothing() {
    let t = Setup::new();
    let ef = std::fs::read(&t.ef).unwrap();
    let wb = std::fs::read(&t.wb).unwrap();
    // The README's order: receiver in the background, sender right after, no waiting for the
    // "listening" line. A fixed port, so the sender need not wait for it either.
    let port = {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let (rx_dir, sum) = (t.rx_dir(), t.summary());
    let receiver = Proc(
        bin()
            .args(["stream", "recv", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--idle-timeout", "3s", "-q", "--out"])
            .arg(&rx_dir)
            .arg("--export-json")
            .arg(&sum)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let sender = send(port, &[&t.ef, &t.wb], &[]);
    let mut receiver = receiver;
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = receiver.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "receiver did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut log = String::new();
    if let Some(mut e) = receiver.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut log);
    }
    log += &String::from_utf8_lossy(&sender.stderr);
    assert!(status.success(), "{log}");
    assert_written(&rx_dir, "Ef", &ef, &log);
    assert_written(&rx_dir, "Wb", &wb, &log);
    let r = json(&sum);
    assert_eq!(r["socket_drops"], 0, "{log}");
}

/// A looped input file that another process truncates while `stream send` sends it from its
/// mapped pages: the sender stops with a clear error and exit code 1, not killed by SIGBUS, and
/// what it sent after the truncation is at most a few rounds of frames.
#[test]
fn an_input_truncated_while_sent_stops_the_sender_with_a_reason() {
    use std::os::unix::process::ExitStatusExt;
    let t = tempfile::tempdir().unwrap();
    let (ef, _) = generate(t.path());
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let port = sink.local_addr().unwrap().port();
    let mut sender = Proc(
        bin()
            .args([
                "stream",
                "send",
                "--loop",
                "--duration",
                "60s",
                "--to",
                &format!("127.0.0.1:{port}"),
            ])
            .arg(&ef)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Truncate once the sender is sending (its first datagram arrived).
    let mut buf = vec![0u8; 65536];
    let t0 = Instant::now();
    while sink.recv(&mut buf).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the sender sent nothing");
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&ef)
        .unwrap()
        .set_len(100_000)
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        while sink.recv(&mut buf).is_ok() {}
        if let Some(s) = sender.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the sender went on after its input was truncated"
        );
    };
    let mut log = String::new();
    if let Some(mut e) = sender.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut log);
    }
    assert_eq!(status.signal(), None, "the sender was killed by a signal: {log}");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("truncated while it was being sent"), "{log}");
}

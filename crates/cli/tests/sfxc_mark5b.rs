//! Mark5B through a correlator input host, proved with SFXC's own Mark5B reader:
//! `sfxc-mk5-harness --format mark5b` (scripts/build-sfxc.sh: SFXC's `data_reader_mk5.cc` and
//! `mark5b_reader.cc` with our main) opens `mk5:///path/sock/VSN:0` as an input node does. A
//! station's Mark5B frames go over UDP in jive5ab's udps framing (8-byte sequence number, then
//! the frame) into `evlbi serve` set up as the Field System sets a Mark5B station
//! (`mode = mark5b : <mask> : <decimation>`), and out of `net2sfxc`. Without the harness the
//! test prints "SKIPPED: ..." (scripts/test.sh says so too).

mod common;

use std::io::Read;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::vsi::{Serve, Vsi};
use common::{bin, free_udp_port, Proc};
use vdif::{FrameRate, Mark5bHeader};

/// 32 bit streams at 32 MHz decimated by 32: 32 Mb/s, 400 frames/s.
const MODE: &str = "mark5b : 0xffffffff : 32";
const FPS: u32 = 400;
const FRAME: usize = 10_016;

/// `n` frames of a station from the start of the current second (today's MJD, as SFXC's reader
/// takes its reference day), data distinct per frame; and that MJD.
fn station(n: u32) -> (Vec<Vec<u8>>, i64) {
    let fps = FrameRate::new(FPS).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mjd = now / 86_400 + 40_587;
    let start = Mark5bHeader::at((mjd % 1000) as u16, (now % 86_400) as u32, 0, fps).unwrap();
    let frames = (0..n)
        .map(|k| {
            let h = Mark5bHeader {
                user: 0x0ef0,
                ..start
                    .with_frame_index(start.frame_index(fps) + u64::from(k), fps)
                    .unwrap()
            };
            let mut f: Vec<u8> = (0..FRAME).map(|i| (k as usize * 131 + i * 7) as u8).collect();
            h.emit(&mut f).unwrap();
            f
        })
        .collect();
    (frames, mjd)
}

/// The frames in udps datagrams to `port` at the station's rate, those in `gap` not sent.
fn send_udps(frames: &[Vec<u8>], port: u16, gap: std::ops::Range<usize>) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t0 = Instant::now();
    for (k, f) in frames.iter().enumerate() {
        let due = t0 + Duration::from_micros(1_000_000 / u64::from(FPS) * k as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if gap.contains(&k) {
            continue;
        }
        let mut d = (k as u64).to_le_bytes().to_vec();
        d.extend_from_slice(f);
        s.send_to(&d, ("127.0.0.1", port)).unwrap();
    }
}

/// SFXC's Mark5B reader on `sock` while `file` is sent to `port` (the frames of `gap` not):
/// it must get every frame sent byte-exact in its place and each of the gap as a fill at its
/// time (valid header, user bits 0, data the fill pattern) that it counts invalid.
fn sfxc_reads_the_station(
    h: &Path,
    sock: &Path,
    port: u16,
    station: &(Vec<Vec<u8>>, i64),
    gap: std::ops::Range<usize>,
) {
    let send = || send_udps(&station.0, port, gap.clone());
    sfxc_reads_what_is_sent(h, sock, station, gap.clone(), send);
}

/// [`sfxc_reads_the_station`] with the station's frames sent by `send`.
fn sfxc_reads_what_is_sent(
    h: &Path,
    sock: &Path,
    (file, mjd): &(Vec<Vec<u8>>, i64),
    gap: std::ops::Range<usize>,
    send: impl FnOnce(),
) {
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let raw = sock.with_extension("raw");
    let n = file.len();
    let mut reader = Proc(
        Command::new(h)
            .arg(format!("mk5://{}/EF001:0", sock.display()))
            .args(["--format", "mark5b", "--tracks", "32", "--sample-rate", "1000000"])
            .args([
                "--mjd",
                &mjd.to_string(),
                "--frames",
                &n.to_string(),
                "--seconds",
                "60",
                "--raw",
            ])
            .arg(&raw)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    send();
    let t0 = Instant::now();
    while reader.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(90), "the reader did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    reader.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let last = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_default();
    let r: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{out:?}: {e}"));
    println!("SFXC's reader: {r}");
    assert_eq!(r["stopped_by"], "frames", "the reader was not fed to the end: {r}");
    let line = &r["threads"][0];
    assert_eq!(
        (line["gaps"].as_u64(), line["backwards"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    let got = std::fs::read(&raw).unwrap();
    let first = got
        .windows(16)
        .position(|w| w == &file[0][..16])
        .expect("the first frame read");
    let got: Vec<&[u8]> = got[first..].chunks_exact(FRAME).collect();
    assert!(got.len() >= n, "{} frames from the first: {r}", got.len());
    for (k, g) in got.iter().take(n).enumerate() {
        if !gap.contains(&k) {
            let what = Mark5bHeader::parse(g).map(|h| (h.second_of_day, h.frame_number, h.user));
            assert!(
                *g == file[k].as_slice(),
                "frame {k} differs from the station's: {what:?}"
            );
            continue;
        }
        let want = Mark5bHeader::parse(&file[k]).unwrap();
        assert_eq!(Mark5bHeader::parse(g), Ok(Mark5bHeader { user: 0, ..want }), "fill {k}");
        assert!(
            g[16..].chunks(4).all(|w| w == 0x1122_3344u32.to_le_bytes()),
            "fill {k} holds data"
        );
    }
    assert_eq!(r["invalid"].as_u64(), Some(gap.len() as u64), "{r}");
}

/// `evlbi serve` in `root` set up as an input host for a Mark5B station: its control, the UDP
/// port it listens on and its net2sfxc socket.
fn input_host(root: &Path) -> (Serve, Vsi, u16, std::path::PathBuf) {
    let s = Serve::start(root, "127.0.0.1:0", &[]);
    let mut v = Vsi::connect(s.vsi);
    let port = free_udp_port();
    let sock = root.join("mk5read");
    for cmd in [
        format!("mode = {MODE} ;"),
        "net_protocol = udps ;".into(),
        format!("net_port = {port} ;"),
        format!("net2sfxc = open : {} ;", sock.display()),
    ] {
        v.ok(&cmd);
    }
    (s, v, port, sock)
}

#[test]
fn sfxc_mark5b_reader_gets_every_frame_of_serve_net2sfxc_in_place_and_a_gap_as_fill() {
    let Some(h) = common::sfxc::harness_or_skip() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let gap = 600..605;
    let (s, mut v, port, sock) = input_host(t.path());
    assert_eq!(v.ok("mode? ;"), ["mark5b", "0xffffffff", "32", "1"]);
    sfxc_reads_the_station(&h, &sock, port, &station(1200), gap.clone());
    let (received, _) = common::vsi::settled(&mut v);
    assert_eq!(received, 1200 - gap.len() as u64);
    v.ok("net2sfxc = close ;");
    s.stop();
}

/// A Mark5B station as jive5ab 3.1.0 sends it: its stream cut into datagrams of the MTU's size
/// (8960 bytes under 9000), not frames, each with its udps sequence number — a frame straddles
/// two or three datagrams. `evlbi serve` puts the frames together again: SFXC's reader gets every
/// frame byte-exact in its place.
#[test]
fn a_mark5b_stream_jive5ab_cut_into_8960_byte_datagrams_reaches_sfxc_whole() {
    let Some(h) = common::sfxc::harness_or_skip() else {
        return;
    };
    let Some(j5) = common::jive5ab_path() else {
        eprintln!("SKIPPED: a_mark5b_stream_jive5ab_cut: no jive5ab (scripts/setup.sh builds it from ../shared/peers)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    // jive5ab sends whole datagrams only (a file's tail shorter than one is not sent): 840
    // frames are 939 datagrams of 8960 bytes exactly.
    let station = station(840);
    let file = t.path().join("ef.m5b");
    std::fs::write(&file, station.0.concat()).unwrap();
    let (s, mut v, port, sock) = input_host(t.path());
    let j = common::Jive5ab::start(&j5);
    // The station's 32 Mb/s in 8960-byte datagrams: one every 2.24 ms.
    let send = || j.file2net_udps(&file, port, 2200);
    sfxc_reads_what_is_sent(&h, &sock, &station, 0..0, send);
    let (received, _) = common::vsi::settled(&mut v);
    assert_eq!(received, 840);
    v.ok("net2sfxc = close ;");
    s.stop();
}

#[test]
fn sfxc_mark5b_reader_gets_every_frame_of_stream_recv_out_sfxc() {
    let Some(h) = common::sfxc::harness_or_skip() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let sock = t.path().join("mk5read");
    let mut recv = Proc(
        bin()
            .args(["stream", "recv", "--listen", &format!("127.0.0.1:{port}")])
            .args([
                "--seq-format",
                "jive5ab",
                "--frames",
                "mark5b",
                "--fps",
                &FPS.to_string(),
            ])
            .arg("--out")
            .arg(format!("sfxc:{}", sock.display()))
            .args(["--json", "-q", "--idle-timeout", "3s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut so = recv.0.stdout.take().unwrap();
    let report = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = so.read_to_string(&mut out);
        out
    });
    sfxc_reads_the_station(&h, &sock, port, &station(800), 100..103);
    let t0 = Instant::now();
    while recv.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(60), "stream recv did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r: serde_json::Value = serde_json::from_str(&report.join().unwrap()).unwrap();
    // The data's age: the time code's day resolved against the clock (frames made for now and
    // sent in real time are seconds old at most, not a 1000-day cycle off).
    let age = &r["data_age_ns"];
    assert!(age["count"].as_u64().unwrap_or(0) > 0, "{age}");
    assert!(age["p50"].as_f64().unwrap_or(f64::MAX) < 30e9, "{age}");
    drop(recv);
    // Where Mark5B cannot go: a recording (DiFX's feed takes it: difx_cli's
    // recv_live_output_feeds_a_mark5b_tcp_datastream).
    let out = t.path().to_str().unwrap();
    let o = bin()
        .args(["stream", "recv", "--listen", "127.0.0.1:0", "--seq-format", "jive5ab"])
        .args(["--frames", "mark5b", "--fps", "400", "--out", out])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("--frames mark5b needs --out sfxc:|difx: (recordings take VDIF, not Mark5B)"),
        "{o:?}"
    );
}

#[test]
fn serve_refuses_what_it_cannot_do_with_mark5b_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let s = Serve::start(t.path(), "127.0.0.1:0", &[]);
    let mut v = Vsi::connect(s.vsi);
    v.ok("mode = mark5b : 0xffffffff : 1 ;");
    // jive5ab's `mode?` of this form: the mode, bit-stream mask, decimation, track rate (MHz).
    assert_eq!(v.ok("mode? ;"), ["mark5b", "0xffffffff", "1", "32"]);
    v.ok("mode = MARK5B-512-16-2 ;");
    // Of the magic mode: the mode, its format, tracks, track bit rate, payload.
    assert_eq!(
        v.ok("mode? ;"),
        ["MARK5B-512-16-2", "Mark5B", "32", "16000000.000", "10000"]
    );
    v.ok("net_protocol = udps ;");
    for (cmd, what) in [
        ("record = on : scan1 ;", "record"),
        ("net2net = connect : 127.0.0.1 : 9 ;", "net2net"),
        ("fill2net = connect : 127.0.0.1 : 9 ;", "fill2net"),
    ] {
        let r = v.ask(cmd);
        assert_eq!(r.code, vsis::ReturnCode::Conflict, "{cmd} -> {r}");
        let why = r.fields.join(" : ");
        assert!(
            why.contains(what) && why.contains("Mark5B") && why.contains("net2sfxc"),
            "{cmd} -> {r}"
        );
    }
    // Mark5B has no threads; a mode Mark5B cannot carry is refused (8) as jive5ab's are.
    for bad in ["mode = mark5b : 0x7 : 1 ;", "mode = MARK5B-4096-16-2 ;"] {
        assert_eq!(v.ask(bad).code, vsis::ReturnCode::BadParameter, "{bad}");
    }
    s.stop();
}

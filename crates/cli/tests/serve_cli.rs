//! `evlbi serve` driven over VSI-S as the Field System drives a recorder: configure, record a
//! scan from the backend simulator (`stream send --generate --seq-format jive5ab`), ask
//! `evlbi?` while the data flow, stop, query; relay with `net2net`; and garbage, megabyte lines
//! and hundreds of idle connections on both ports while a scan records.

// unsafe: getrlimit(2): the descriptor limit the test works within; std cannot ask.
#![allow(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::vsi::{evlbi, frames_of, recording, sent, settled, Vsi};
use common::{backend_sim, backend_sim_to, bin, free_udp_port, http_get, Proc};
use vsis::ReturnCode;

/// `evlbi serve` on free ports with recordings below `root`; its VSI-S and metrics addresses.
struct Serve {
    _proc: Proc,
    vsi: SocketAddr,
    metrics: SocketAddr,
    log: std::sync::mpsc::Receiver<String>,
}

impl Serve {
    fn start(root: &Path) -> Serve {
        Serve::start_with(root, &[]).0
    }

    /// Started with `extra` options; also the lines it printed until both addresses were known.
    fn start_with(root: &Path, extra: &[&str]) -> (Serve, Vec<String>) {
        let mut child = bin()
            .args([
                "serve",
                "--vsi",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
                "--interval",
                "200ms",
            ])
            .arg("--root")
            .arg(root)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, log) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let proc = Proc(child);
        let (mut vsi, mut metrics) = (None, None);
        let mut lines = Vec::new();
        while vsi.is_none() || metrics.is_none() {
            let line = log
                .recv_timeout(Duration::from_secs(10))
                .expect("evlbi serve did not print its addresses");
            lines.push(line.clone());
            let addr_after = |tag: &str| {
                line.split(tag)
                    .nth(1)
                    .and_then(|r| r.split([' ', '/']).next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
            };
            metrics = metrics.or(addr_after("metrics: http://"));
            vsi = vsi.or(addr_after("VSI-S on "));
        }
        (
            Serve {
                _proc: proc,
                vsi: vsi.unwrap(),
                metrics: metrics.unwrap(),
                log,
            },
            lines,
        )
    }

    /// The address printed after `tag` in a line of its log (read on, bounded, if needed).
    fn address_after(&self, seen: &mut Vec<String>, tag: &str) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(a) = seen
                .iter()
                .find_map(|l| l.split(tag).nth(1))
                .and_then(|r| r.split(' ').next())
            {
                return a.to_string();
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no '{tag}' in {seen:?}");
            if let Ok(l) = self.log.recv_timeout(Duration::from_millis(200)) {
                seen.push(l);
            }
        }
    }
}

/// Valid and invalid (filled) frames of a VDIF file of 8032-byte frames.
fn frames_in(file: &Path) -> (u64, u64) {
    frames_of(&std::fs::read(file).unwrap())
}

/// The Field System's session for one e-VLBI scan, and the checks that the recording and the
/// `evlbi?` counts are what was sent and lost.
#[test]
fn the_field_system_records_a_scan() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path());
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    // Configure, as the FS's procedures do before a scan.
    assert_eq!(fs.ok("version? ;")[0], "evlbi");
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    assert_eq!(
        fs.ok("mode? ;"),
        ["VDIF_8000-512-16-2", "VDIF", "32", "16000000.000", "8000"]
    );
    fs.ok("net_protocol = udps : 32M : 256M : 4 ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("mtu = 9000 ;");
    assert_eq!(fs.ok("record? ;"), ["off"]);
    // Start the scan, then the backend (its loss is 1 %, seeded).
    fs.ok("record = on : r41066_ef_no0001 ;");
    let rec = fs.ok("record? ;");
    assert_eq!(&rec[..3], ["on", "1", "r41066_ef_no0001"]);
    assert_eq!(fs.ask(&format!("net_port = {} ;", port + 1)).code, ReturnCode::Conflict);
    assert_eq!(fs.ask("record = on : another ;").code, ReturnCode::Conflict);
    // A DBBC3-like stream: the mode's 16 channels in 4 threads (the recorder counts them).
    let sender = backend_sim(
        port,
        "3s",
        &[
            "--threads",
            "4",
            "--channels",
            "16",
            "--inject-loss",
            "1%",
            "--loss-seed",
            "7",
        ],
    );
    // evlbi? while the data flow.
    let t0 = Instant::now();
    let mid = loop {
        let e = evlbi(&mut fs);
        if e.0 > 1000 {
            break e;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no data counted by evlbi? in 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let status = fs.ok("status? ;");
    assert_eq!(
        u32::from_str_radix(status[0].trim_start_matches("0x"), 16).unwrap() & 0x59,
        0x59,
        "{status:?}"
    );
    let r = fs.ask("tstat? ;");
    assert!(matches!(r.code, ReturnCode::Done | ReturnCode::Initiated), "{r}");
    // CR LF in, CR LF out (telnet), several statements on a line answered together.
    let two = fs.raw("record? ; net2file? ;\r\n");
    assert!(two.ends_with(";\r\n") && two.matches('!').count() == 2, "{two:?}");
    let (frames_sent, injected) = sent(sender);
    let (total, loss) = settled(&mut fs);
    assert!(mid.0 < total, "evlbi? mid-scan {mid:?}, end {total}");
    // Stop and query.
    fs.ok("record = off ;");
    assert_eq!(fs.ok("record? ;"), ["off"]);
    let (total_after, loss_after) = evlbi(&mut fs);
    // What was sent, was counted: every frame not dropped on purpose arrived.
    assert_eq!(total_after, frames_sent - injected, "evlbi? total");
    assert_eq!(total, total_after);
    // The recording: the frames received, and the lost ones filled invalid at their place.
    let (valid, filled) = frames_of(&recording(root.path(), "r41066_ef_no0001"));
    assert_eq!(valid, total_after);
    assert_eq!(filled, loss_after, "evlbi? loss is the recording's filled frames");
    assert!(loss <= loss_after);
    // Drops before the first or after the last frame received leave no gap to fill.
    assert_eq!(frames_sent - (valid + filled), injected - filled);
    assert!(
        filled > 0 && injected - filled <= 5,
        "{injected} dropped, {filled} filled"
    );
    // checkfb: the recording as the FS sees it — its 32 tracks (4 threads × 4 channels × 2
    // bits), 16 Mb/s each, nothing missing (lost frames filled; a recording that stops between
    // the threads of a period misses none of it).
    fs.ok("scan_set = r41066_ef_no0001 ;");
    let check = fs.ok("scan_check? ;");
    assert_eq!(
        (
            check[1].as_str(),
            check[2].as_str(),
            check[3].as_str(),
            check[6].as_str(),
            check[7].as_str()
        ),
        ("r41066_ef_no0001", "VDIF", "32", "16Mbps", "0"),
        "{check:?}"
    );
    eprintln!(
        "scan: {frames_sent} frames sent, {injected} dropped on purpose; evlbi? total {total_after} loss {loss_after}; \
         recording {valid} valid + {filled} filled; scan_check? {check:?}"
    );
    drop(serve.log);
}

/// `evlbi serve` below `root` recording scan `scan` from a DBBC3-like backend: mode
/// `VDIF_8000-512-16-2`, udps framing (8032-byte frames and an 8-byte sequence number: mtu
/// 9000), a 256 MB socket buffer. The daemon, the FS's session, and the data port.
fn recording_udps(root: &Path, scan: &str) -> (Serve, Vsi, u16) {
    let serve = Serve::start(root);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps : 32M : 256M : 4 ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("mtu = 9000 ;");
    fs.ok(&format!("record = on : {scan} ;"));
    (serve, fs, port)
}

/// A socket nobody reads and its address: where a board whose output goes nowhere sends.
fn nowhere() -> (std::net::UdpSocket, String) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = format!("127.0.0.1:{}", sock.local_addr().unwrap().port());
    (sock, addr)
}

/// A DBBC3 sends one station from each of its boards' own address and port into the
/// recorder's one port, each board its own threads and its own `udps` sequence numbers (jive5ab
/// records every datagram on the port). Before, the recorder took the first board and refused the
/// second "beside" it: `evlbi?` said 8000 of the 16 000 frames sent, with 4000 lost (33 %), and
/// the recording held one board. Now every board joins the station's one recording.
#[test]
fn the_boards_of_a_backend_sending_from_their_own_ports_are_all_recorded() {
    let root = tempfile::tempdir().unwrap();
    let (serve, mut fs, port) = recording_udps(root.path(), "r41066_ef_no0002");
    // Two boards, threads 0-1 and 2-3, each from its own socket.
    let sender = backend_sim(port, "2s", &["--threads", "4", "--channels", "16", "--senders", "2"]);
    let (frames_sent, injected) = sent(sender);
    assert_eq!(injected, 0);
    let (total, loss) = settled(&mut fs);
    // Each board has its own series on the metrics page, with its half of the frames.
    let (_, page) = http_get(serve.metrics, "/metrics");
    let boards: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("evlbi_stream_board_frames_total{"))
        .collect();
    assert_eq!(boards.len(), 2, "{page}");
    for b in &boards {
        assert!(
            b.contains("station=\"Ef\"") && b.ends_with(&format!(" {}", frames_sent / 2)),
            "{b}"
        );
    }
    fs.ok("record = off ;");
    assert_eq!(
        (total, loss),
        (frames_sent, 0),
        "evlbi? total and loss of {frames_sent} sent"
    );
    let (valid, filled) = frames_of(&recording(root.path(), "r41066_ef_no0002"));
    assert_eq!((valid, filled), (frames_sent, 0), "the recording holds both boards");
    fs.ok("scan_set = r41066_ef_no0002 ;");
    let check = fs.ok("scan_check? ;");
    assert_eq!(
        (
            check[2].as_str(),
            check[3].as_str(),
            check[6].as_str(),
            check[7].as_str()
        ),
        ("VDIF", "32", "16Mbps", "0"),
        "{check:?}"
    );
    eprintln!("two boards: {frames_sent} frames sent; evlbi? {total} loss {loss}; recording {valid} + {filled}");
    drop(serve.log);
}

/// A backend's board down when the recording starts: the threads are counted from the boards
/// present (2 of 4) and the mode's rate split over them, twice each thread's; at the first
/// second boundary the frames' own count (2000 a second per thread) corrects it to 4 threads.
/// Before, the split stood: board 0's 2 s recording got 4000 made-up invalid frames among its
/// 8000. Board 1 stands in for a board whose output goes nowhere: its datagrams go to a socket
/// nobody reads.
#[test]
fn a_board_down_when_the_recording_starts_leaves_the_other_recorded_right() {
    let root = tempfile::tempdir().unwrap();
    let (serve, mut fs, port) = recording_udps(root.path(), "r41066_ef_no0003");
    let (_nowhere, elsewhere) = nowhere();
    let sender = backend_sim(
        port,
        "2s",
        &[
            "--threads",
            "4",
            "--channels",
            "16",
            "--senders",
            "2",
            "--to",
            &elsewhere,
        ],
    );
    let (frames_sent, injected) = sent(sender);
    assert_eq!(injected, 0);
    let board0 = frames_sent / 2;
    let (total, _) = settled(&mut fs);
    fs.ok("record = off ;");
    assert_eq!(total, board0, "evlbi? total: board 0's {board0} of {frames_sent} sent");
    let (valid, filled) = frames_of(&recording(root.path(), "r41066_ef_no0003"));
    eprintln!(
        "board 1 down: {frames_sent} frames sent, {board0} by board 0; evlbi? {total}; recording {valid} + {filled}"
    );
    assert_eq!(valid, board0, "the recording holds board 0's frames");
    // Board 1's threads never came: no frame of them is made up (a thread never seen has no id
    // to put in an invalid frame).
    assert_eq!(filled, 0, "filled frames");
    drop(serve.log);
}

/// A board that comes up a second into the recording is recorded from then on beside the
/// other: the rate check at the first second boundary gave the window room for its threads.
/// Before, the threads were counted from the board present at the start and the late one was
/// refused ("every board must be sending when the recording starts"): its 6000 frames were
/// lost, where jive5ab records whatever reaches its port.
#[test]
fn a_board_that_comes_up_late_is_recorded_from_then_on() {
    let root = tempfile::tempdir().unwrap();
    let (serve, mut fs, port) = recording_udps(root.path(), "r41066_ef_no0004");
    let (_nowhere, elsewhere) = nowhere();
    let here = format!("127.0.0.1:{port}");
    let board = ["--threads", "4", "--channels", "16", "--senders", "2"];
    // Board 0 here for 3 s; board 1 (another backend process on the same clock: `--start now`)
    // here from 1 s for 1.5 s.
    let early = backend_sim(port, "3s", &[&board[..], &["--to", &elsewhere]].concat());
    std::thread::sleep(Duration::from_secs(1));
    let late = common::stream_send_json(backend_sim_to(&[&elsewhere, &here], "1500ms", &board));
    let early = common::stream_send_json(early);
    let board_frames = |r: &serde_json::Value, k: usize| r["senders"][k]["frames_sent"].as_u64().unwrap();
    let (b0, b1) = (board_frames(&early, 0), board_frames(&late, 1));
    assert!(b1 > 0, "{late}");
    let (total, _) = settled(&mut fs);
    fs.ok("record = off ;");
    let (valid, filled) = frames_of(&recording(root.path(), "r41066_ef_no0004"));
    eprintln!("late board: board 0 sent {b0}, board 1 {b1}; evlbi? {total}; recording {valid} + {filled}");
    assert_eq!(total, b0 + b1, "evlbi? total");
    assert_eq!(valid, b0 + b1, "the recording holds both boards' frames");
    drop(serve.log);
}

/// `net2net`: what the backend sends to the daemon's data port goes on to a correlator's
/// `stream recv`, paced, every frame — a DBBC3-like stream of 4 threads the FS never names
/// (`threads` unset: the relay learns them and splits the mode's rate; before, it took one
/// thread at the mode's whole rate and counted 24000 of 16000 frames lost).
#[test]
fn net2net_relays_to_the_correlator() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path());
    // The correlator knows the rate per thread: 512 Mb/s of 8000-byte frames in 4 threads.
    let corr = common::StreamRecv::start(&["--seq-format", "jive5ab", "--fps", "2000", "--threads", "4"]);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps ;");
    fs.ok(&format!("net_port = {port} ;"));
    // 8032-byte frames and an 8-byte sequence number do not fit jive5ab's default MTU.
    let r = fs.ask(&format!("net2net = connect : 127.0.0.1 : {} ;", corr.port));
    assert_eq!(r.code, ReturnCode::Conflict, "{r}");
    fs.ok("mtu = 9000 ;");
    fs.ok(&format!("net2net = connect : 127.0.0.1 : {} ;", corr.port));
    assert_eq!(fs.ok("net2net? ;")[0], "connected");
    fs.ok("net2net = on ;");
    let sender = backend_sim(port, "2s", &["--threads", "4", "--channels", "16"]);
    let (frames_sent, _) = sent(sender);
    let (total, loss) = settled(&mut fs);
    assert_eq!(fs.ok("net2net? ;")[0], "active");
    fs.ok("net2net = off ;");
    assert_eq!(fs.ok("net2net? ;"), ["inactive"]);
    assert_eq!((total, loss), (frames_sent, 0));
    let (status, log) = corr.wait();
    assert!(status.success(), "{log}");
    let want = format!("Ef: {frames_sent} frames written (0 filled invalid");
    assert!(
        log.contains(&want),
        "the correlator did not get every frame ({want}):\n{log}"
    );
    let _ = serve;
}

/// jive5ab's `ack = N ;` (a keep-alive back to each sender every N datagrams, so switches on the
/// way learn the recorder's address; `stream relay --ack N`): the backend reads one keep-alive
/// on its 1st, 51st, … datagram relayed by `net2net`. Before, evlbi answered `ack` with 7 (no
/// such keyword), which the FS logs as an error and which drops the rest of a batch.
#[test]
fn ack_sets_net2nets_keep_alives_as_jive5ab_does() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path());
    let corr = common::StreamRecv::start(&["--seq-format", "jive5ab", "--fps", "8000"]);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    assert_eq!(
        fs.ok("ack? ;"),
        ["0"],
        "none until set (jive5ab's ack = 0: its default)"
    );
    fs.ok("ack = 50 ;");
    assert_eq!(fs.ok("ack? ;"), ["50"]);
    let r = fs.ask("ack = fifty ;");
    assert_eq!(r.code, ReturnCode::BadParameter, "{r}");
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("mtu = 9000 ;");
    fs.ok(&format!("net2net = connect : 127.0.0.1 : {} ;", corr.port));
    fs.ok("net2net = on ;");
    let backend = common::stream_send_json(backend_sim(port, "2s", &[]));
    let frames = backend["stations"][0]["frames_sent"].as_u64().unwrap();
    let (total, loss) = settled(&mut fs);
    fs.ok("net2net = off ;");
    let (status, log) = corr.wait();
    assert!(status.success(), "{log}");
    assert_eq!((total, loss), (frames, 0), "evlbi? total and loss");
    assert_eq!(
        backend["returned_datagrams"].as_u64(),
        Some(frames.div_ceil(50)),
        "one keep-alive per 50 datagrams relayed: {backend}"
    );
    let _ = serve;
}

/// `net2net` of a backend whose board 1 is down when the relay starts: board 0's frames reach
/// the correlator (which knows the true rate per thread) every one, none made up, and `evlbi?`
/// counts no loss. The relay split the mode's rate over the 2 threads it saw, twice each
/// thread's; it paces by the station's rate, so nothing was lost, but it counted 8000 of the
/// 12 000 frames it relayed as lost in its input (each second's frame numbers stopped halfway)
/// until the rate check the recorder has (`a_board_down_when_the_recording_starts_…`) came to
/// it too.
#[test]
fn net2net_of_a_backend_with_a_board_down_relays_the_other_right() {
    net2net_with_board_1_down("udps", &["--seq-format", "jive5ab", "--fps", "2000", "--threads", "4"]);
}

/// The same backend, relayed in evlbi's native framing: the relay's split of the mode's rate was
/// guessed from the one board sending, and its datagrams announced that guess (8000 frames/s over
/// 2 threads) to the receiver, which placed each second's 4000 frames per thread at that rate: a
/// second of made-up invalid frames at every second boundary. The relay now announces the
/// station's rate without threads until its frames have confirmed the split, and the receiver
/// counts and checks them as a recorder given a mode does.
#[test]
fn net2net_in_native_framing_of_a_backend_with_a_board_down_reaches_the_receiver_right() {
    net2net_with_board_1_down("native", &[]);
}

/// A DBBC3-like backend of 4 threads on 2 boards, board 1 down (its datagrams go nowhere),
/// relayed by `net2net` in `protocol` (the backend's own framing is udps) to a `stream recv`
/// started with `recv_args`: `evlbi?` counts board 0's frames, none lost, and the receiver
/// writes exactly those, none filled.
fn net2net_with_board_1_down(protocol: &str, recv_args: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path());
    let corr = common::StreamRecv::start(recv_args);
    let port = free_udp_port();
    let (_nowhere, elsewhere) = nowhere();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok(&format!("net_protocol = {protocol} ;"));
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("mtu = 9000 ;");
    fs.ok(&format!("net2net = connect : 127.0.0.1 : {} : udps ;", corr.port));
    fs.ok("net2net = on ;");
    let sender = backend_sim(
        port,
        "3s",
        &[
            "--threads",
            "4",
            "--channels",
            "16",
            "--senders",
            "2",
            "--to",
            &elsewhere,
        ],
    );
    let (frames_sent, _) = sent(sender);
    let board0 = frames_sent / 2;
    let (total, loss) = settled(&mut fs);
    fs.ok("net2net = off ;");
    let (status, log) = corr.wait();
    assert!(status.success(), "{log}");
    eprintln!(
        "{protocol} net2net, board 1 down: {frames_sent} sent, {board0} by board 0; evlbi? {total} loss {loss}\n{log}"
    );
    assert_eq!((total, loss), (board0, 0), "evlbi? total and loss");
    let want = format!("Ef: {board0} frames written (0 filled invalid");
    assert!(
        log.contains(&want),
        "the receiver did not get board 0's frames right ({want}):\n{log}"
    );
    let _ = serve;
}

/// Raise this process's descriptor limit to the hard limit (children inherit it): the test
/// holds a thousand connections.
fn more_descriptors() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// While a scan records: garbage, megabyte lines and 500 idle connections on the control port,
/// 500 idle connections and a megabyte header on the metrics port. The FS's session, a client
/// connecting afterwards and a scraper are all served, and the scan loses nothing.
#[test]
fn bad_input_and_idle_connections_cost_the_scan_nothing() {
    more_descriptors();
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path());
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps : 64M ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("record = on : flood ;");
    let sender = backend_sim(port, "6s", &[]);
    // Garbage: binary bytes, statements that are none, unknown keywords, a megabyte line.
    let mut g = Vsi::connect(serve.vsi);
    // No LF in it: one line of 20 000 bytes.
    let garbage: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .map(|b| if b == b'\n' { b'x' } else { b })
        .collect();
    g.w.write_all(&garbage).unwrap();
    g.w.write_all(b"\nbar;=3;foo?;version=1;\n").unwrap();
    // Its statements make it a session before the flood of idle connections below, which
    // evicts the oldest connections that have not yet sent one (on a loaded host the daemon may
    // not have read this far by the time the flood arrives).
    let mut replies = Vec::new();
    let t0 = Instant::now();
    // (The 20 000 bytes get a "line longer than" reply first.)
    while replies.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no reply to the statements");
        let mut line = String::new();
        let n = g.r.read_line(&mut line).unwrap();
        assert!(n > 0, "the daemon closed the garbage client");
        if line.contains("!foo?") {
            assert!(
                line.contains("!foo? 7") && line.contains("!version = 2") && line.contains("!syntax = 7"),
                "{line}"
            );
            replies.push(line);
        }
    }
    let mut mb = vec![b'x'; 1 << 20];
    mb.push(b'\n');
    g.w.write_all(&mb).unwrap();
    g.w.write_all(&mb).unwrap();
    // 500 idle connections on each port, some with half a request.
    let mut idle = Vec::new();
    for i in 0..500 {
        let mut v = TcpStream::connect(serve.vsi).unwrap();
        let mut m = TcpStream::connect(serve.metrics).unwrap();
        if i % 5 == 0 {
            let _ = v.write_all(b"evlbi");
            let _ = m.write_all(b"GET /metrics HTTP/1.1\r\n");
        }
        idle.push((v, m));
    }
    // A megabyte request head on the metrics port.
    let mut big = TcpStream::connect(serve.metrics).unwrap();
    let _ = big.write_all(b"GET / HTTP/1.1\r\nX: ");
    let _ = big.write_all(&mb);
    // The FS's session goes on; a new client and a scraper get in.
    let (total_during, _) = evlbi(&mut fs);
    let mut late = Vsi::connect(serve.vsi);
    assert_eq!(late.ok("record? ;")[0], "on");
    // The station's series appears once its first frames were counted: the scraper asks again
    // until then (the backend may not have sent any yet).
    let t0 = Instant::now();
    loop {
        let (code, body) = http_get(serve.metrics, "/metrics");
        assert_eq!(code, "HTTP/1.1 200 OK");
        if body.contains("evlbi_stream_frames_total{source=\"record\",station=\"Ef\"}") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no station Ef: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The garbage client got its answers: one reply per megabyte line; and it is still served.
    let mut overlong = Vec::new();
    let t0 = Instant::now();
    while overlong.len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no replies to the long lines: {overlong:?}"
        );
        let mut line = String::new();
        let n = g.r.read_line(&mut line).unwrap();
        assert!(n > 0, "the daemon closed the garbage client: {overlong:?}");
        if line.contains("line longer than") {
            overlong.push(line);
        }
    }
    assert_eq!(g.ok("mtu? ;"), ["1500"]);
    let (frames_sent, injected) = sent(sender);
    assert_eq!(injected, 0);
    let (total, loss) = settled(&mut fs);
    fs.ok("record = off ;");
    drop(idle);
    let (valid, filled) = frames_of(&recording(root.path(), "flood"));
    let (_, m) = http_get(serve.metrics, "/metrics");
    let drops = m
        .lines()
        .find(|l| l.starts_with("evlbi_stream_kernel_drops_total{source=\"record\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .map(|v| v.to_string());
    eprintln!(
        "flood: {frames_sent} frames sent; evlbi? total {total} (during the flood {total_during}) loss {loss}; \
         recording {valid} valid + {filled} filled; kernel drops {drops:?}"
    );
    assert_eq!((total, loss), (frames_sent, 0), "the scan lost frames during the flood");
    assert_eq!((valid, filled), (frames_sent, 0));
    assert_eq!(drops.as_deref(), Some("0"));
    let overlong = m
        .lines()
        .find(|l| l.starts_with("evlbi_serve_overlong_lines_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(overlong >= Some(2), "{overlong:?}");
}

/// `fill2net`: the daemon sends synthetic VDIF of the mode to a correlator (a link test before
/// the observation); every frame arrives, none is filled.
#[test]
fn fill2net_sends_the_mode_to_a_correlator() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path());
    let corr = common::StreamRecv::start(&["--seq-format", "jive5ab", "--fps", "8000"]);
    let mut fs = Vsi::connect(serve.vsi);
    assert_eq!(
        fs.ask("fill2net = connect : 127.0.0.1 ;").code,
        ReturnCode::Conflict,
        "no mode yet"
    );
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps ;");
    fs.ok(&format!("fill2net = connect : 127.0.0.1 : {} : Ef ;", corr.port));
    assert_eq!(fs.ok("fill2net? ;")[0], "connected");
    assert_eq!(fs.ask("record = on : s ;").code, ReturnCode::Conflict);
    fs.ok("fill2net = on ;");
    // Sending at the mode's rate (8000 frames/s) for a while.
    let t0 = Instant::now();
    loop {
        let f = fs.ok("fill2net? ;");
        if f[0] == "active" && f[2].parse::<u64>().unwrap() > 8032 * 8000 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "fill2net sent too little: {f:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    fs.ok("fill2net = off ;");
    assert_eq!(fs.ok("fill2net? ;"), ["inactive"]);
    let (status, log) = corr.wait();
    assert!(status.success(), "{log}");
    let line = log
        .lines()
        .find(|l| l.starts_with("Ef: "))
        .unwrap_or_else(|| panic!("{log}"));
    let frames: u64 = line[4..].split(' ').next().unwrap().parse().unwrap();
    assert!(frames > 8000 && line.contains("(0 filled invalid"), "{line}");
    let _ = serve;
}

/// The probe server and the file receiver run beside the recorder, counted in its metrics.
#[test]
fn the_daemon_also_serves_path_probes_and_file_transfers() {
    let root = tempfile::tempdir().unwrap();
    let (serve, mut lines) = Serve::start_with(
        root.path(),
        &["--probe-server", "127.0.0.1:0", "--recv-listen", "127.0.0.1:0"],
    );
    let probe = serve.address_after(&mut lines, "probe server on ");
    let recv = serve.address_after(&mut lines, "file receiver on ");
    let o = bin()
        .args([
            "probe",
            "client",
            &probe,
            "--size",
            "1472",
            "--spacing",
            "20us",
            "--count",
            "2000",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = r["receiver"]["unique_packets"].as_u64().unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("schedule.vex");
    std::fs::write(&file, b"$EXPER = r41066;\n".repeat(1000)).unwrap();
    let o = bin()
        .arg("send")
        .arg(&file)
        .arg(format!("{recv}/incoming"))
        .args(["--cc", "fixed", "--rate", "100M", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(root.path().join("incoming/schedule.vex")).unwrap(),
        std::fs::read(&file).unwrap()
    );
    let value = |series: &str| {
        let (_, m) = http_get(serve.metrics, "/metrics");
        m.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let t0 = Instant::now();
    while value("evlbi_transfer_files_total{source=\"transfer_recv\",outcome=\"verified\"}") != Some(1) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the file receiver's count did not show"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(value("evlbi_probe_packets_total{source=\"probe_server\"}"), Some(got));
}

/// The FS records FlexBuff and Mark6 scans through the daemon: `set_disks`, `record = mk6 :
/// 0|1`, `record = on : SCAN`; the scan is spread over every disk and reads back whole.
#[test]
fn the_field_system_records_vbs_and_mark6_scans_over_the_disks() {
    let root = tempfile::tempdir().unwrap();
    for d in ["d0", "d1", "d2"] {
        std::fs::create_dir(root.path().join(d)).unwrap();
    }
    let serve = Serve::start(root.path());
    for (mk6, layout) in [(0, "vbs"), (1, "mk6")] {
        let port = free_udp_port();
        let mut fs = Vsi::connect(serve.vsi);
        fs.ok("mode = VDIF_8000-512-16-2 ;");
        // 16 MB blocks (net_protocol's work block, as jive5ab cuts its chunks).
        fs.ok("net_protocol = udps : 32M : 16M ;");
        fs.ok(&format!("net_port = {port} ;"));
        fs.ok("set_disks = d0 : d1 : d2 ;");
        fs.ok(&format!("record = mk6 : {mk6} ;"));
        let scan = format!("r1_ef_no000{mk6}");
        fs.ok(&format!("record = on : {scan} ;"));
        let (frames_sent, _) = sent(backend_sim(port, "2s", &[]));
        let (total, loss) = settled(&mut fs);
        assert_eq!((total, loss), (frames_sent, 0), "{layout}");
        fs.ok("record = off ;");
        let glob = format!("{}/d*", root.path().display());
        // Named by the Field System's label, as a FlexBuff names it.
        let url = format!("{layout}://{scan}");
        let out = root.path().join(format!("{layout}.vdif"));
        let g = bin()
            .args(["vdif", "gather", "--json", "--disks", &glob, &url, "-o"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(g.status.success(), "{layout}: {}", String::from_utf8_lossy(&g.stderr));
        let r: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
        assert_eq!(
            r["scan"]["disks"].as_array().unwrap().len(),
            3,
            "{layout}: every disk holds blocks: {r}"
        );
        assert_eq!(frames_in(&out), (frames_sent, 0), "{layout}");
    }
}

/// A scan name is checked once, by `scanfmt::name::ScanName`, wherever it enters: over VSI-S
/// (`record = on : a.b ;`) and on the command line (`--scan a.b`) the same names are refused
/// with the same words, before anything is recorded. (Issue 29: vsis once allowed `.` and 64
/// bytes where scanfmt forbade `.` and allowed 128, so `record=on:a.b` parsed, then failed.)
#[test]
fn a_scan_name_is_refused_by_one_rule_over_vsis_and_the_command_line() {
    let root = tempfile::tempdir().unwrap();
    let disks = root.path().join("d0");
    std::fs::create_dir(&disks).unwrap();
    let serve = Serve::start(root.path());
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok(&format!("net_port = {} ;", free_udp_port()));
    let longest = "n".repeat(scanfmt::name::MAX_LABEL);
    let too_long = "n".repeat(scanfmt::name::MAX_LABEL + 1);
    for bad in ["a.b", "..", "x+y.z", too_long.as_str()] {
        let words = scanfmt::name::ScanName::parse(bad).unwrap_err().to_string();
        let reply = fs.raw(&format!("record = on : {bad} ;\n"));
        assert!(reply.starts_with("!record = 8 "), "{bad}: {reply}");
        // A reply field cannot hold VSI-S's separators: ':' is sent as '.', ';' as ','.
        let sent = words.replace(':', ".").replace(';', ",");
        assert!(reply.contains(&sent), "{bad}: {reply} does not say {sent}");
        assert_eq!(fs.ok("record? ;"), ["off"], "{bad}: nothing recorded");
        let cli = assert_usage_error_of(&[
            "stream",
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--format",
            "vbs",
            "--disks",
            disks.to_str().unwrap(),
            "--scan",
            bad,
        ]);
        assert!(cli.contains(&words), "{bad}: {cli} does not say {words}");
    }
    // The longest label is accepted and recording starts (before, 128 bytes parsed over VSI-S
    // and were then refused with code 6 when the recording was named).
    fs.ok(&format!("set_disks = {} ;", disks.display()));
    fs.ok(&format!("record = on : {longest} ;"));
    assert_eq!(fs.ok("record? ;")[..3], ["on", "1", longest.as_str()]);
    fs.ok("record = off ;");
    // That label taken on the disk (a recording of it there): the next recording of it gets
    // jive5ab's letter and starts, the reply naming it. Before, the lettered name was checked
    // again as a new label, one byte over MAX_LABEL, and refused ("scan name … use 1 to 92").
    std::fs::create_dir_all(disks.join(&longest)).unwrap();
    let lettered = format!("{longest}a");
    assert_eq!(fs.ok(&format!("record = on : {longest} ;")), [lettered.as_str()]);
    assert_eq!(fs.ok("record? ;")[0], "on");
    assert_eq!(fs.ok("record? ;")[2], lettered);
    fs.ok("record = off ;");
}

/// Run the binary with `args`: it must exit 2 (usage); its stderr.
fn assert_usage_error_of(args: &[&str]) -> String {
    let o = bin().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    err
}

/// `record_format = vdif` and `net2file` write VDIF files into directories the daemon made and
/// opened below its roots through no link, handed down to the writer as descriptors (the writer
/// resolves no path): every frame sent arrives, in `<disk>/<label>/` and in the one named file.
#[test]
fn record_format_vdif_and_net2file_write_every_frame_into_the_opened_directory() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("d0")).unwrap();
    let serve = Serve::start(root.path());
    let mut fs = Vsi::connect(serve.vsi);
    let port = free_udp_port();
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("set_disks = d0 ;");
    fs.ok("record_format = vdif ;");
    fs.ok("record = on : ef_vdif ;");
    let (frames_sent, _) = sent(backend_sim(port, "1s", &[]));
    assert_eq!(settled(&mut fs), (frames_sent, 0));
    fs.ok("record = off ;");
    let dir = root.path().join("d0").join("ef_vdif");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "vdif"), "{files:?}");
    assert_eq!(frames_of(&std::fs::read(&files[0]).unwrap()), (frames_sent, 0));

    fs.ok("net2file = open : n2f.vdif,w ;");
    let (frames_sent, _) = sent(backend_sim(port, "1s", &[]));
    assert_eq!(settled(&mut fs), (frames_sent, 0));
    fs.ok("net2file = close ;");
    let one = std::fs::read(root.path().join("d0").join("n2f.vdif")).unwrap();
    assert_eq!(frames_of(&one), (frames_sent, 0));
}

//! A source that is not the station's backend sends frames of the station (issue 36, item 1):
//! while the real backend streams one thread (udps, 1000 frames/s), a second source sends the
//! same station's frames with thread id 1 at 200 datagrams/s, numbered as a 500 frames/s thread.
//! A station's threads and rate are learned from its frames where only a mode's rate is known
//! (`evlbi serve`'s recordings and net2net); the intruder's thread was counted as a board's, the
//! station split into 2 threads at half rate, and the recording held 0 valid frames of the real
//! thread. Over real sockets: the real frames are recorded (relayed) whole, none of the
//! intruder's, and the intruder is counted and named.

mod common;

use std::net::UdpSocket;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::vsi::{recording, settled, Serve, Vsi};
use common::{bin, free_udp_port, http_get, stream_send_json, Proc};

/// 64 Mb/s in 8000-byte frames, one thread: 1000 frames a second.
const MODE: &str = "VDIF_8000-64-2-2";
const FRAME: usize = 8032;

/// The real backend: one thread of station Ef at 64 Mb/s for `seconds`, udps, to `to`.
fn backend(to: &str, seconds: &str) -> Proc {
    let child = bin()
        .args(["stream", "send", "--generate", "--stations", "Ef", "--rate", "64M"])
        .args(["--channels", "2", "--threads", "1", "--frame", "8000"])
        .args(["--seq-format", "jive5ab", "--loop", "--json", "--max-lag", "1h"])
        .args(["--duration", seconds, "--to", to])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc(child)
}

/// What an intruder sends: frames of station Ef in the backend's format, thread `thread`,
/// `per_second` datagrams a second numbered as a thread of `numbered_fps` frames a second at the
/// wall clock's time, in udps framing (its own sequence numbers, in order).
#[derive(Clone, Copy)]
struct Intruder {
    thread: u16,
    per_second: u32,
    numbered_fps: u32,
    /// In evlbi's native framing announcing `numbered_fps` and one thread (else udps).
    native: bool,
}

/// Send as `who` from `sock` to `to` until `stop` (at most 30 s), counting into `sent`.
fn intrude(who: Intruder, sock: UdpSocket, to: String, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) {
    let layout = vdif::FrameLayout::new(64e6, 2, 2, 1, 8000).unwrap();
    let mut h = layout.header(vdif::StationId::parse("Ef").unwrap());
    h.thread_id = who.thread;
    let now_unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    h.ref_epoch = vdif::time::to_epoch(now_unix).unwrap().0;
    let mut frame = vec![0x55u8; FRAME];
    let mut datagram = Vec::with_capacity(8 + FRAME);
    let step = Duration::from_secs(1) / who.per_second;
    let t0 = Instant::now();
    let mut seq = 0x1234_5678u64;
    let mut k = 0u32;
    while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(30) {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let index = wall.as_nanos() * u128::from(who.numbered_fps) / 1_000_000_000;
        h.set_frame_index(index as u64, vdif::FrameRate::new(who.numbered_fps).unwrap());
        h.emit(&mut frame[..32]).unwrap();
        if who.native {
            let p = stream::wire::NativePrefix {
                retransmit: false,
                stream: 0,
                seq,
                frames_per_second: who.numbered_fps,
                threads: 1,
                session: 0,
            };
            stream::wire::encode_data(stream::SeqFormat::Native, &p, &frame, &mut datagram);
        } else {
            datagram.clear();
            datagram.extend_from_slice(&seq.to_le_bytes());
            datagram.extend_from_slice(&frame);
        }
        let _ = sock.send_to(&datagram, &to);
        sent.fetch_add(1, Ordering::Relaxed);
        seq += 1;
        k += 1;
        let next = t0 + step * k;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

/// An intruder running on its own thread; stopped (and joined) by [`Running::stop`].
struct Running {
    /// Where it sends from.
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(who: Intruder, to: &str) -> Running {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (s, n, to) = (stop.clone(), sent.clone(), to.to_string());
        let thread = Some(std::thread::spawn(move || intrude(who, sock, to, s, n)));
        Running {
            addr,
            stop,
            sent,
            thread,
        }
    }

    /// Stop it; the datagrams it sent.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The intruder: thread 1, 200 datagrams a second (1.6 Mb/s) numbered as a thread of 500.
const FAKE_BOARD: Intruder = Intruder {
    thread: 1,
    per_second: 200,
    numbered_fps: 500,
    native: false,
};

/// The frames of VDIF data of 8032-byte frames: (thread id, frame index at 1000 frames/s,
/// invalid) of each.
fn frames(data: &[u8]) -> Vec<(u16, u64, bool)> {
    assert_eq!(data.len() % FRAME, 0, "not whole frames");
    data.chunks(FRAME)
        .map(|f| {
            let h = vdif::VdifHeader::parse(f).unwrap();
            (
                h.thread_id,
                h.frame_index(vdif::FrameRate::new(1000).unwrap()),
                h.invalid,
            )
        })
        .collect()
}

/// Every frame of a recording is the real thread's (0), valid, one after the other in time,
/// `at_least` of them; how many.
fn assert_the_real_thread_whole(data: &[u8], at_least: u64, what: &str) -> u64 {
    let f = frames(data);
    let foreign = f.iter().filter(|(t, _, _)| *t != 0).count();
    let invalid = f.iter().filter(|(_, _, inv)| *inv).count();
    let gaps = f.windows(2).filter(|w| w[1].1 != w[0].1 + 1).count();
    assert_eq!(
        (foreign, invalid, gaps),
        (0, 0, 0),
        "{what}: frames of another thread, invalid frames, breaks in time (of {} frames)",
        f.len()
    );
    assert!(
        f.len() as u64 >= at_least,
        "{what}: {} frames, at least {at_least} expected",
        f.len()
    );
    f.len() as u64
}

/// Issue 36, item 1, as reported: the FS says `record = on` 0.5 s after both sources started.
/// Before: the station was split into 2 threads at half rate, 0 valid frames of the real thread
/// in the recording, `evlbi?` said 49 % loss.
#[test]
fn a_fake_board_takes_no_part_in_a_serve_recording() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let port = free_udp_port();
    let to = format!("127.0.0.1:{port}");
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok(&format!("mode = {MODE} ;"));
    fs.ok("net_protocol = udps : 32M : 256M : 4 ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("mtu = 9000 ;");
    let real = backend(&to, "3s");
    let fake = Running::start(FAKE_BOARD, &to);
    let fake_addr = fake.addr;
    std::thread::sleep(Duration::from_millis(500));
    fs.ok("record = on : r36_ef_fake ;");
    let sent = stream_send_json(real);
    let frames_sent = sent["stations"][0]["frames_sent"].as_u64().unwrap();
    let forged = fake.stop();
    let (total, loss) = settled(&mut fs);
    let discarded: u64 = fs.ok("evlbi = %d ;")[0].parse().unwrap();
    let (_, page) = http_get(serve.metrics, "/metrics");
    fs.ok("record = off ;");
    let data = recording(root.path(), "r36_ef_fake");
    eprintln!(
        "real {frames_sent} frames, fake {forged} from {fake_addr}; evlbi? {total} loss {loss} discarded {discarded}; \
         recording {} frames",
        data.len() / FRAME
    );
    // The recording began about 0.5 s into the backend's 3 s: most of its frames, every one
    // after the first, none of the fake's.
    let n = assert_the_real_thread_whole(&data, frames_sent / 2, "recording");
    assert_eq!((total, loss), (n, 0), "evlbi? total and loss");
    // The fake is counted and named: its datagrams since it was refused on the metrics page (by
    // its address), and among `evlbi?`'s discarded packets.
    let series = format!(
        "evlbi_stream_refused_source_datagrams_total{{source=\"record\",station=\"Ef\",sender=\"{fake_addr}\"}} "
    );
    let named: u64 = page
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in\n{page}"))
        .trim()
        .parse()
        .unwrap();
    // (Those held for it when the recording stopped are refused then: counted, not yet
    // discarded here.)
    assert!(
        named > 0 && named <= forged,
        "{named} of the fake's {forged} datagrams named"
    );
    assert!(discarded > 0, "evlbi? discarded {discarded}, the fake's named {named}");
    drop(serve);
}

/// The same fake board against `net2net` (the relay learns the station's threads from the
/// mode's rate) to a correlator's `stream recv` in evlbi's native framing (which learns them from
/// the relay's announcement): before, the relay split the station in two and dropped every
/// real frame numbered past 499 as another format. Now the correlator gets every frame of the
/// backend's, none filled, none of the fake's, in the station's last stream; the relay counts the
/// fake's datagrams discarded. (Where the fake came first — the backend takes a moment to
/// start — it was the station until then, all there was on the port: relayed, in a stream of
/// its own that the backend's then succeeds.)
#[test]
fn a_fake_board_takes_no_part_in_net2net() {
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let json = root.path().join("corr.json");
    let corr = common::StreamRecv::start(&["--export-json", json.to_str().unwrap()]);
    let port = free_udp_port();
    let to = format!("127.0.0.1:{port}");
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok(&format!("mode = {MODE} ;"));
    // Out in native framing; the backend's (the input's) is udps.
    fs.ok("net_protocol = native : 32M : 256M : 4 ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok("mtu = 9000 ;");
    fs.ok(&format!("net2net = connect : 127.0.0.1 : {} : udps ;", corr.port));
    let real = backend(&to, "3s");
    let fake = Running::start(FAKE_BOARD, &to);
    std::thread::sleep(Duration::from_millis(500));
    fs.ok("net2net = on ;");
    let sent = stream_send_json(real);
    let frames_sent = sent["stations"][0]["frames_sent"].as_u64().unwrap();
    let forged = fake.stop();
    let (total, loss) = settled(&mut fs);
    let discarded: u64 = fs.ok("evlbi = %d ;")[0].parse().unwrap();
    fs.ok("net2net = off ;");
    let (status, log) = corr.wait();
    assert!(status.success(), "{log}");
    eprintln!("fake {forged}; evlbi? {total} loss {loss} discarded {discarded}\n{log}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let stations = report["stations"].as_array().unwrap();
    let st = stations.last().unwrap();
    assert!(
        stations[..stations.len() - 1].iter().all(|s| s["retired"] == true),
        "{report}"
    );
    assert_eq!(
        (st["threads"].as_u64(), st["frames_per_second"].as_u64()),
        (Some(1), Some(1000)),
        "{report}"
    );
    let w = &st["window"];
    let (valid, filled) = (
        w["written_valid"].as_u64().unwrap(),
        w["written_filled"].as_u64().unwrap(),
    );
    // The backend's frames from (at the latest) 0.5 s on, none made up.
    assert!(
        valid >= frames_sent / 2 && valid <= frames_sent,
        "{valid} of {frames_sent}: {report}"
    );
    assert_eq!(filled, 0, "{report}");
    assert!(discarded > 0, "the fake's datagrams are counted discarded");
    drop(serve);
}

/// What the test's correlator saw of a relay's output: per datagram, its output stream, the
/// rate per thread it announced, and whether its frame is the intruder's (its data all 0x55).
fn watch(sock: UdpSocket, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(u16, u32, bool)>> {
    std::thread::spawn(move || {
        sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = vec![0u8; 9000];
        let mut seen = Vec::new();
        let t0 = Instant::now();
        while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(40) {
            let Ok(n) = sock.recv(&mut buf) else { continue };
            let Ok(d) = stream::wire::parse_data(stream::SeqFormat::Native, &buf[..n]) else {
                continue;
            };
            let Some(p) = d.native else { continue };
            let fake = d.frame[32..].iter().all(|b| *b == 0x55);
            seen.push((p.stream, p.frames_per_second, fake));
        }
        seen
    })
}

/// Issue 36, item 6, a rate-lowering attack through `stream relay` (native framing in, from an
/// evlbi sender, no rate given: each datagram announces its stream's): a source there 0.1 s
/// before the backend announces half its rate per thread (thread 0, 200 datagrams a second
/// numbered as 500 frames/s). It made the station's rate: when the backend took its place, every
/// real frame numbered past 499 was refused as another format, half the station lost for as long
/// as it ran. Now the backend's frames numbered past that rate, announcing their own, have the
/// station learned anew: the relay's last output stream is the backend's, at its rate, none of
/// the fake's, and the fake is named.
#[test]
fn a_source_first_announcing_half_the_rate_does_not_halve_a_relayed_station() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&sink).set_recv_buffer_size(8 << 20).unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(sink, stop.clone());
    let mut child = bin()
        .args([
            "stream",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--seq-format-in",
            "native",
        ])
        .args(["--to", &to, "--seq-format", "native", "--idle-timeout", "2s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (relay_port, _log) = common::port_from_stderr(&mut child, "127.0.0.1").expect("the relay's port");
    let relay = Proc(child);
    let relay_at = format!("127.0.0.1:{relay_port}");
    let fake = Running::start(
        Intruder {
            thread: 0,
            per_second: 200,
            numbered_fps: 500,
            native: true,
        },
        &relay_at,
    );
    let fake_addr = fake.addr;
    std::thread::sleep(Duration::from_millis(100));
    let real = bin()
        .args(["stream", "send", "--generate", "--stations", "Ef", "--rate", "64M"])
        .args(["--channels", "2", "--threads", "1", "--frame", "8000"])
        .args(["--seq-format", "native", "--loop", "--json", "--max-lag", "1h"])
        .args(["--duration", "3s", "--to", &relay_at])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sent = stream_send_json(Proc(real));
    let frames_sent = sent["stations"][0]["frames_sent"].as_u64().unwrap();
    let forged = fake.stop();
    let r = stream_send_json(relay);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    let st = r["stations"].as_array().unwrap().last().unwrap().clone();
    let last_stream = seen.last().map(|d| d.0).expect("the relay sent nothing");
    let last: Vec<&(u16, u32, bool)> = seen.iter().filter(|d| d.0 == last_stream).collect();
    let real_in_last = last.iter().filter(|d| !d.2).count() as u64;
    eprintln!(
        "real {frames_sent}, fake {forged} from {fake_addr}; relay: {} frames/s, wrong format {}, out {}; \
         correlator: {} datagrams, last stream {last_stream}: {real_in_last} real of {}",
        st["frames_per_second"],
        st["wrong_format"],
        st["frames_out"],
        seen.len(),
        last.len()
    );
    assert_eq!(st["frames_per_second"], 1000, "{st}");
    assert!(
        last.iter().all(|d| d.1 == 1000 && !d.2),
        "the last stream: the backend's frames at its rate only"
    );
    // The backend's frames from (at the latest) 1 s on; on a busy host its start may lag.
    assert!(
        real_in_last >= frames_sent / 2 && real_in_last <= frames_sent,
        "{real_in_last} of {frames_sent}"
    );
    let refused = st["refused_sources"].as_array().unwrap();
    assert!(
        refused.iter().any(|s| s["source"] == fake_addr.to_string()),
        "the fake is named: {refused:?}"
    );
}

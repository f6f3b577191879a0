//! The relay's input is read by a thread of its own (issue 37): while the relay's thread is held
//! up (here: its live-line callback takes two seconds, as a write to a stalled stderr would, or
//! a host that does not schedule it), the frames that come are read from the socket and handed
//! over, not dropped by the kernel at a socket buffer of a few dozen frames; every one leaves
//! when the relay's thread goes on; with a hand-over too small for them, what does not fit is
//! counted, and every frame sent is accounted for. Real sockets on 127.0.0.1.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netio::{BufferRequest, ListenSpec};
use stream::SeqFormat;
use stream_session::relay::{BoundRelay, RelayRunConfig};

/// VDIF data bytes per frame (and the frame: a 32-byte header before them).
const DATA: usize = 8000;
/// Frames per second of the one thread the frames' headers name (64 Mb/s).
const FPS: u32 = 1000;
/// Frames the backend sends while the relay's thread is held up.
const FRAMES: u32 = 400;
/// How long the relay's thread is held up: longer than the sending takes.
const HOLD: Duration = Duration::from_secs(2);

/// VDIF frame `n` of second 1000 of station "Ef", thread 0 (VDIF 1.1.1 §3: words 0–3).
fn frame(n: u32) -> Vec<u8> {
    let mut f = vec![0x55u8; 32 + DATA];
    f[..4].copy_from_slice(&1000u32.to_le_bytes());
    f[4..8].copy_from_slice(&((50u32 << 24) | n).to_le_bytes());
    // Length in 8-byte units; one channel (log2 0); version 0.
    f[8..12].copy_from_slice(&(((32 + DATA) / 8) as u32).to_le_bytes());
    // Station "Ef", thread 0, 2 bits per sample, real.
    f[12..16].copy_from_slice(&((1u32 << 26) | u32::from(u16::from_be_bytes(*b"Ef"))).to_le_bytes());
    f
}

/// The correlator's side: every frame number that arrives, until `stop`.
fn collector(stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<BTreeSet<u32>>) {
    let spec = ListenSpec::Unicast("127.0.0.1:0".parse().unwrap());
    // A large buffer: the backlog leaves at up to twice the rate, and this test is about the
    // relay's input.
    let (sock, _) = netio::bind_listen(&spec, BufferRequest { rcv: 32 << 20, snd: 0 }).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = sock.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut got = BTreeSet::new();
        let mut buf = vec![0u8; 65_536];
        let t0 = Instant::now();
        while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
            if let Ok(n) = sock.recv(&mut buf) {
                if n == 32 + DATA {
                    got.insert(u32::from_le_bytes([buf[4], buf[5], buf[6], 0]));
                }
            }
        }
        got
    });
    (addr, t)
}

/// Relay (queue and hand-over of `buffer_bytes`) while its thread is held up for [`HOLD`] and
/// [`FRAMES`] frames come; the report and the frame numbers that reached the output.
fn relay_held_up(buffer_bytes: usize) -> (stream::results::RelayReport, BTreeSet<u32>, String) {
    relay_held_up_observed(buffer_bytes, None)
}

/// [`relay_held_up`], its live counts handed to `publisher` (a metrics hub's source) at every
/// interval, as `stream relay --metrics` and `evlbi serve`'s `net2net` hand them.
fn relay_held_up_observed(
    buffer_bytes: usize,
    publisher: Option<metrics::Publisher>,
) -> (stream::results::RelayReport, BTreeSet<u32>, String) {
    let out_stop = Arc::new(AtomicBool::new(false));
    let (out, collected) = collector(Arc::clone(&out_stop));
    let spec = ListenSpec::Unicast("127.0.0.1:0".parse().unwrap());
    let mut cfg = RelayRunConfig::new(vec![spec], out, SeqFormat::None, SeqFormat::None);
    // A socket buffer of a few dozen frames: what the kernel keeps while nobody reads.
    cfg.rcvbuf = 256 << 10;
    cfg.interval = Duration::from_millis(50);
    cfg.relay.frames_per_second = Some(vdif::FrameRate::new(FPS).unwrap());
    cfg.relay.threads = Some(1);
    cfg.relay.buffer_bytes = buffer_bytes;
    let mut bound = BoundRelay::bind(cfg).unwrap();
    if let Some(p) = publisher {
        bound = bound.observe(Box::new(move |s| {
            p.publish(metrics::Status::StreamRelay(s));
        }));
    }
    let to = bound.local_addrs()[0];
    let granted = bound.grants()[0].clone();
    let stop = Arc::new(AtomicBool::new(false));
    // 0: not yet held; 1: held now; 2: released.
    let held = Arc::new(AtomicU64::new(0));
    let relay = {
        let (stop, held) = (Arc::clone(&stop), Arc::clone(&held));
        std::thread::spawn(move || {
            bound.run(&stop, |_line| {
                if held.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                    std::thread::sleep(HOLD);
                    held.store(2, Ordering::SeqCst);
                }
            })
        })
    };
    let t0 = Instant::now();
    while held.load(Ordering::SeqCst) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "the relay never called back");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The backend: FRAMES frames, one every 2.5 ms (1 s), all while the relay's thread is held.
    let backend = UdpSocket::bind("127.0.0.1:0").unwrap();
    let began = Instant::now();
    for n in 0..FRAMES {
        let due = began + Duration::from_micros(2500) * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        backend.send_to(&frame(n), to).unwrap();
    }
    let sent_while_held = held.load(Ordering::SeqCst) == 1;
    // Every frame leaves once the thread goes on (bounded wait), then the relay stops.
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(20) && !relay.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        if held.load(Ordering::SeqCst) == 2 && t1.elapsed() > HOLD + Duration::from_secs(1) {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let report = relay.join().unwrap().unwrap();
    out_stop.store(true, Ordering::SeqCst);
    let got = collected.join().unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let said = format!("granted {granted:?}; sent while held: {sent_while_held}; report {json}");
    (report, got, said)
}

#[test]
fn a_relay_thread_held_up_for_two_seconds_loses_nothing_at_its_input_socket() {
    let (report, got, said) = relay_held_up(256 << 20);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(report.socket_drops, 0, "the kernel dropped frames at the input: {said}");
    assert_eq!(json["handover_dropped"].as_u64().unwrap_or(0), 0, "{said}");
    assert_eq!(report.datagrams.datagrams, u64::from(FRAMES), "{said}");
    let missing: Vec<u32> = (0..FRAMES).filter(|n| !got.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "{} frames never arrived: {missing:?}; {said}",
        missing.len()
    );
}

/// A hand-over of 512 KB (`--buffer 512K`: 65 frames) while 400 come: the receive thread drops
/// what does not fit and counts it; every frame sent is taken by the relay or counted dropped
/// (at the hand-over, or by the kernel), and every one taken arrives.
#[test]
fn what_does_not_fit_the_hand_over_is_counted_and_every_frame_is_accounted_for() {
    let (report, got, said) = relay_held_up(512 << 10);
    let handover = serde_json::to_value(&report).unwrap()["handover_dropped"]
        .as_u64()
        .unwrap_or(0);
    assert!(handover > 0, "a 512 KB hand-over took 3.2 MB: {said}");
    let taken = report.datagrams.datagrams;
    assert_eq!(taken + handover + report.socket_drops, u64::from(FRAMES), "{said}");
    let overflow: u64 = report.stations.iter().map(|s| s.overflow_dropped).sum();
    assert_eq!(got.len() as u64 + overflow, taken, "{said}");
}

/// One GET of `path` from the metrics server at `addr`: the body (bounded in time and size).
fn scrape(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut body = String::new();
    c.take(4 << 20).read_to_string(&mut body).unwrap();
    body.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The hand-over's drops reach the live view: `/metrics` has `evlbi_relay_handover_dropped`
/// and `/status.json` the relay's `handover_dropped`, both equal to what the report counts
/// after a forced overflow (a 512 KB hand-over while 3.2 MB come).
#[test]
fn hand_over_drops_are_scraped_from_metrics_and_status_json() {
    let hub = metrics::Hub::new("evlbi", "test");
    let server = metrics::MetricsServer::start("127.0.0.1:0".parse().unwrap(), hub.clone()).unwrap();
    let (report, _, said) = relay_held_up_observed(512 << 10, Some(hub.source("relay").unwrap()));
    assert!(report.handover_dropped > 0, "the hand-over overflowed: {said}");
    let text = scrape(server.local_addr(), "/metrics");
    let line = text
        .lines()
        .find(|l| l.starts_with("evlbi_relay_handover_dropped_total"))
        .unwrap_or_else(|| panic!("no evlbi_relay_handover_dropped in /metrics: {text}"));
    let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(value as u64, report.handover_dropped, "{line}; {said}");
    let json: serde_json::Value = serde_json::from_str(&scrape(server.local_addr(), "/status.json")).unwrap();
    let found = json.to_string();
    assert!(
        found.contains(&format!("\"handover_dropped\":{}", report.handover_dropped)),
        "status.json: {found}"
    );
}

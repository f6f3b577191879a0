//! Attacks on a stream sender's return path over real sockets: forged NAKs and keep-alives
//! from the receiver's address (what an attacker who can spoof it sends). A sender must neither
//! be made to spend more than its repeat budget on them, nor be slowed down by them.

mod common;

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{bin, stream_send_json, Proc};
use stream::wire::{Nak, SeqRange, MAX_NAK_RANGES, MAX_NAK_RANGE_LEN};

/// What the test's receiver saw of the stream.
#[derive(Debug, Default)]
struct Seen {
    originals: HashSet<u64>,
    repeats: u64,
    /// Times each frame came again.
    repeats_of: std::collections::HashMap<u64, u32>,
    newest: u64,
    sender: Option<SocketAddr>,
}

/// Receive the sender's datagrams on `sock` until `stop`, noting originals and repeats.
fn receive(sock: UdpSocket, seen: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = vec![0u8; 9000];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Ok(d) = stream::wire::parse_data(stream::SeqFormat::Native, &buf[..n]) else {
            continue;
        };
        let Some(p) = d.native else { continue };
        let mut s = seen.lock().unwrap();
        s.sender = Some(from);
        s.newest = s.newest.max(p.seq);
        if p.retransmit {
            s.repeats += 1;
            *s.repeats_of.entry(p.seq).or_default() += 1;
        } else {
            s.originals.insert(p.seq);
        }
    }
}

/// `stream send` of one generated station at 1000 frames/s for 3 s with ARQ (300 ms), to a
/// receiver the test plays; `attack` runs meanwhile with the receiver's socket and what it saw.
/// The sender's JSON and what the receiver saw.
fn send_under(attack: impl FnOnce(&UdpSocket, &Mutex<Seen>)) -> (serde_json::Value, Seen) {
    run_under(|port| (sender(&format!("127.0.0.1:{port}")), None), attack)
}

/// `stream send` of one generated station at 1000 frames/s for 3 s to `to`, native framing,
/// answering NAKs for 300 ms; its JSON on a pipe.
fn sender(to: &str) -> Proc {
    sender_for(to, "3s")
}

/// [`sender`], sending for `duration`.
fn sender_for(to: &str, duration: &str) -> Proc {
    let child = bin()
        .args(["stream", "send", "--generate", "--stations", "Ef", "--rate", "64M"])
        .args(["--frame", "8000", "--seq-format", "native", "--arq-latency", "300ms"])
        // A busy test host may hold the sender up; the attack must not be what does.
        .args([
            "--loop",
            "--duration",
            duration,
            "--max-lag",
            "1s",
            "--json",
            "--to",
            to,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc(child)
}

/// Start the pipeline `start(port)` towards the test's receiver on `port` (the process whose
/// JSON is wanted, and one that feeds it, if any), and run `attack` once the first frame
/// arrived; that JSON and what the receiver saw.
fn run_under(
    start: impl FnOnce(u16) -> (Proc, Option<Proc>),
    attack: impl FnOnce(&UdpSocket, &Mutex<Seen>),
) -> (serde_json::Value, Seen) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&rx).set_recv_buffer_size(8 << 20).unwrap();
    let port = rx.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (sock, seen, stop) = (rx.try_clone().unwrap(), seen.clone(), stop.clone());
        std::thread::spawn(move || receive(sock, seen, stop))
    };
    let (watched, feeder) = start(port);
    // Wait (bounded) for the first frame: the sender's address.
    let t0 = Instant::now();
    while seen.lock().unwrap().sender.is_none() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no frame from the sender");
        std::thread::sleep(Duration::from_millis(5));
    }
    attack(&rx, &seen);
    if let Some(f) = feeder {
        stream_send_json(f);
    }
    let json = stream_send_json(watched);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (json, seen)
}

/// Send `nak` to the sender every millisecond for `how_long` (or until it is gone).
fn forge_for(sock: &UdpSocket, seen: &Mutex<Seen>, how_long: Duration, mut nak: impl FnMut(u64) -> Vec<u8>) -> u64 {
    let to = seen.lock().unwrap().sender.unwrap();
    let t0 = Instant::now();
    let mut sent = 0;
    while t0.elapsed() < how_long {
        let newest = seen.lock().unwrap().newest;
        if sock.send_to(&nak(newest), to).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    sent
}

/// A NAK of 64 ranges of 65 536 frames each, the first covering the sender's whole retransmit
/// window below `newest`: the most a 780-byte datagram can ask for (4.2 million frames).
fn widest_nak(newest: u64) -> Vec<u8> {
    let ranges = (0..MAX_NAK_RANGES as u64)
        .map(|i| SeqRange {
            first: newest.saturating_sub(1000) + i * u64::from(MAX_NAK_RANGE_LEN),
            count: MAX_NAK_RANGE_LEN,
        })
        .collect();
    let mut out = Vec::new();
    Nak { stream: 0, ranges }.encode(&mut out);
    out
}

/// Forged NAKs, each asking for 4.2 million frames, 1000 a second for 2 s: the sender sends
/// every original on time and spends at most its repeat budget (10 % of the frames plus a burst
/// of 256) on repeats.
#[test]
fn forged_naks_cost_at_most_the_repeat_budget_and_never_the_stream() {
    let mut forged = 0;
    let (s, seen) = send_under(|sock, seen| {
        forged = forge_for(sock, seen, Duration::from_secs(2), widest_nak);
    });
    let st = &s["stations"][0];
    let arq = &s["arq"];
    let frames_sent = st["frames_sent"].as_u64().unwrap();
    let resent = arq["resent"].as_u64().unwrap();
    eprintln!(
        "forged {forged} NAKs: sender sent {frames_sent} frames, {} slips, resent {resent} \
         (asked {}, over budget {}, no longer kept {}); receiver saw {} originals, {} repeats",
        st["slips"],
        arq["asked"],
        arq["over_budget"],
        arq["unavailable"],
        seen.originals.len(),
        seen.repeats
    );
    assert!(forged > 200, "the attack ran: {forged} NAKs");
    assert!(arq["naks"].as_u64().unwrap() > 100, "the sender read them: {arq}");
    // The stream is not silenced: 3 s at 1000 frames/s, all sent, none given up.
    assert_eq!(frames_sent, 3000, "{st}");
    assert_eq!(st["slips"], 0, "{st}");
    assert_eq!(seen.originals.len(), 3000);
    // Amplification is bounded by the budget.
    assert!(resent <= 3000 / 10 + 256, "{arq}");
    assert_eq!(seen.repeats, resent);
}

/// Issue 36: one forged NAK (780 bytes) had the sender repeat 620 KB, and the same NAK sent
/// again had the same frames sent again, each time the budget refilled. A NAK costs at most what
/// it asks for that was sent and not repeated twice yet (a real receiver asks again once when a
/// repeat was lost too), so 1000 forged NAKs a second — for the whole window, then for one
/// frame — cost each frame two repeats at most (one frame came 30 times); and NAKs from any
/// address but the receiver's are never read.
#[test]
fn forged_naks_repeat_a_frame_twice_at_most_and_from_elsewhere_nothing() {
    let mut forged = 0;
    let (s, seen) = send_under(|sock, seen| {
        // From another address: the sender's socket is connected to the receiver (the kernel
        // may answer these with port unreachable: their sends can fail, and are tried on).
        let elsewhere = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = seen.lock().unwrap().sender.unwrap();
        for _ in 0..300 {
            let newest = seen.lock().unwrap().newest;
            let _ = elsewhere.send_to(&widest_nak(newest), to);
            std::thread::sleep(Duration::from_millis(1));
        }
        forged = forge_for(sock, seen, Duration::from_secs(1), widest_nak);
        // Then one frame asked for again and again while the sender keeps it (300 ms).
        let target = seen.lock().unwrap().newest + 50;
        forged += forge_for(sock, seen, Duration::from_millis(600), |_| {
            let mut out = Vec::new();
            let ranges = vec![SeqRange {
                first: target,
                count: 1,
            }];
            Nak { stream: 0, ranges }.encode(&mut out);
            out
        });
    });
    let arq = &s["arq"];
    let resent = arq["resent"].as_u64().unwrap();
    let most = seen.repeats_of.values().copied().max().unwrap_or(0);
    eprintln!(
        "forged {forged} NAKs: resent {resent} (asked {}, repeated already {}), most repeats of one frame {most}",
        arq["asked"], arq["repeated_already"]
    );
    assert!(forged > 200, "the attack ran: {forged} NAKs");
    assert!(resent > 0, "the NAKs from the receiver's address were read: {arq}");
    assert!(most <= 2, "a frame came again {most} times");
    assert_eq!(seen.repeats, resent);
    assert!(resent <= 3000 / 10 + 256, "{arq}");
    // Every datagram read back came from the receiver's address: those it forged.
    assert!(s["returned_datagrams"].as_u64().unwrap() <= forged, "{s}");
}

/// Forged keep-alives (a jive5ab's text) from the receiver's address, 200 000 a second for 2 s
/// (a jive5ab sends one every N datagrams: this is 200 per frame): read and counted, and the
/// stream goes on, every frame on its timeline.
#[test]
fn a_flood_of_forged_keep_alives_is_counted_and_never_slows_the_stream() {
    let mut forged = 0u64;
    let (s, seen) = send_under(|sock, seen| {
        let to = seen.lock().unwrap().sender.unwrap();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) {
            // 200 per millisecond, caught up if the thread was held up (bounded by the 2 s).
            let due = (t0.elapsed().as_micros() / 5) as u64;
            while forged < due {
                let _ = sock.send_to(b"keep-alive from a jive5ab", to);
                forged += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let st = &s["stations"][0];
    let returned = s["returned_datagrams"].as_u64().unwrap_or(0);
    eprintln!(
        "forged {forged} keep-alives: sender sent {} frames, {} slips, read back {returned}; receiver saw {} originals",
        st["frames_sent"],
        st["slips"],
        seen.originals.len()
    );
    assert!(forged > 100_000, "the attack ran: {forged}");
    assert_eq!(st["frames_sent"], 3000, "{st}");
    assert_eq!(st["slips"], 0, "{st}");
    assert_eq!(seen.originals.len(), 3000);
    assert!(returned > 0 && returned <= forged, "{returned} of {forged} read: {s}");
}

/// The same forged NAKs towards a relay's output (backend → relay → the test as correlator):
/// the relay forwards every frame and spends at most its repeat budget (it answers NAKs with
/// the sender's retransmit buffer).
#[test]
fn forged_naks_towards_a_relay_cost_at_most_the_repeat_budget() {
    let mut forged = 0;
    let (r, seen) = run_under(
        |port| {
            let mut child = bin()
                .args([
                    "stream",
                    "relay",
                    "--listen",
                    "127.0.0.1:0",
                    "--seq-format-in",
                    "native",
                ])
                .args(["--to", &format!("127.0.0.1:{port}"), "--seq-format", "native"])
                .args(["--arq-latency", "300ms", "--idle-timeout", "3s", "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let (relay_port, _log) = common::port_from_stderr(&mut child, "127.0.0.1").expect("the relay's port");
            let relay = Proc(child);
            (relay, Some(sender(&format!("127.0.0.1:{relay_port}"))))
        },
        |sock, seen| forged = forge_for(sock, seen, Duration::from_secs(2), widest_nak),
    );
    let out = r["output"][0]["frames_sent"].as_u64().unwrap();
    let arq = &r["arq"];
    let resent = arq["resent"].as_u64().unwrap();
    eprintln!(
        "forged {forged} NAKs at the relay: relayed {out} frames, resent {resent} (naks {}, over budget {}); \
         receiver saw {} originals, {} repeats",
        arq["naks"],
        arq["over_budget"],
        seen.originals.len(),
        seen.repeats
    );
    assert!(forged > 200, "the attack ran: {forged} NAKs");
    assert!(arq["naks"].as_u64().unwrap() > 100, "the relay read them: {arq}");
    assert_eq!(out, 3000, "{r}");
    assert_eq!(seen.originals.len(), 3000);
    assert!(resent <= 3000 / 10 + 256, "{arq}");
    // Issue 36: and no frame more than twice, however often it is asked for.
    let most = seen.repeats_of.values().copied().max().unwrap_or(0);
    assert!(most <= 2, "a frame came again {most} times");
}

/// Issue 36: `stream relay --ack 1` answered every datagram it refused — even a 1-byte one —
/// with a 22-byte keep-alive to its source, which anyone can forge: 1.72× the bytes on the wire,
/// sent to whoever the source claims to be. Only a sender whose frames it takes is answered.
#[test]
fn a_relay_with_ack_answers_only_senders_whose_frames_it_takes() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut child = bin()
        .args(["stream", "relay", "--listen", "127.0.0.1:0", "--seq-format-in", "none"])
        .args([
            "--fps",
            "1000",
            "--ack",
            "1",
            "--seq-format",
            "none",
            "--idle-timeout",
            "2s",
        ])
        .args(["--to", &sink.local_addr().unwrap().to_string(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (port, _log) = common::port_from_stderr(&mut child, "127.0.0.1").expect("the relay's port");
    let relay = Proc(child);
    let to = format!("127.0.0.1:{port}");
    let garbage = UdpSocket::bind("127.0.0.1:0").unwrap();
    let backend = UdpSocket::bind("127.0.0.1:0").unwrap();
    for s in [&garbage, &backend] {
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    }
    let layout = vdif::FrameLayout::new(64e6, 2, 2, 1, 8000).unwrap();
    let mut h = layout.header(vdif::StationId::parse("Ef").unwrap());
    let mut frame = vec![0u8; layout.frame_len];
    let (mut junk, mut back_to_garbage, mut back_to_backend) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; 64];
    for k in 0..400u32 {
        h.seconds = 1000 + k / 1000;
        h.frame_number = k % 1000;
        h.emit(&mut frame[..32]).unwrap();
        backend.send_to(&frame, &to).unwrap();
        for _ in 0..5 {
            garbage.send_to(&[0x42], &to).unwrap();
            junk += 1;
        }
        // A frame's header cut from its data: the length it says is not the datagram's.
        garbage.send_to(&frame[..40], &to).unwrap();
        junk += 1;
        while garbage.recv_from(&mut buf).is_ok() {
            back_to_garbage += 1;
        }
        if k % 20 == 0 {
            while backend.recv_from(&mut buf).is_ok() {
                back_to_backend += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    while garbage.recv_from(&mut buf).is_ok() {
        back_to_garbage += 1;
    }
    while backend.recv_from(&mut buf).is_ok() {
        back_to_backend += 1;
    }
    let r = stream_send_json(relay);
    eprintln!(
        "{junk} refused datagrams: {back_to_garbage} keep-alives back; backend: {back_to_backend} back; {}",
        r["datagrams"]
    );
    assert_eq!(
        back_to_garbage, 0,
        "keep-alives to a source whose every datagram was refused"
    );
    assert!(back_to_backend > 100, "the backend is answered: {back_to_backend}");
}

/// Issue 36: a source that delivered its run but was refused (a station beyond
/// `--max-stations`, waiting for a slot all along) and forgotten at the end was summed up as a
/// source that "never sent a run of in-sequence frames … (0 datagrams)": it had sent
/// thousands. The summary says what it was.
#[test]
fn the_summary_says_a_refused_source_sent_its_datagrams() {
    let recv = common::StreamRecv::start(&["--max-stations", "1"]);
    let to = format!("127.0.0.1:{}", recv.port);
    let station = |name: &str| {
        let child = bin()
            .args(["stream", "send", "--generate", "--stations", name, "--rate", "64M"])
            .args([
                "--frame",
                "8000",
                "--loop",
                "--duration",
                "2s",
                "--max-lag",
                "1s",
                "--json",
            ])
            .args(["--to", &to])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Proc(child)
    };
    let ef = station("Ef");
    std::thread::sleep(Duration::from_millis(300));
    let wb = station("Wb");
    stream_send_json(ef);
    stream_send_json(wb);
    let (status, log) = recv.wait();
    assert!(status.success(), "{log}");
    let line = log
        .lines()
        .find(|l| l.contains("forgotten without becoming a station"))
        .unwrap_or_else(|| panic!("no line on the forgotten source:\n{log}"));
    let beyond: u64 = line
        .split(" refused as a station's second sender or not its board, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    eprintln!("{line}");
    assert!(beyond > 1000, "the second station's datagrams: {line}");
    assert!(!log.contains("never sent a run"), "{log}");
}

//! The real-time emulator with real packets between two network namespaces.
//!
//! Needs root and /dev/net/tun; each test prints why and passes when they are
//! missing. Namespaces are named `lkt<pid>-<n><a|b>`, so parallel runs never
//! collide, and a Drop guard deletes whatever a test created even when an
//! assertion fails. No external process is started: sockets are opened
//! inside a namespace from a thread that entered it.

// unsafe: geteuid(2): namespaces need root; std cannot ask.
#![allow(unsafe_code)]
#![cfg(target_os = "linux")]

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use linkemu::{LinkConfig, LossModel};
use linkemu_tun::{self as realtime, Emulator, Mode, RealtimeConfig, RealtimeError, RunState};

fn skip_reason() -> Option<&'static str> {
    // SAFETY: geteuid has no inputs and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (namespaces and TUN need CAP_NET_ADMIN/CAP_SYS_ADMIN)");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("iproute2 `ip` is not installed");
    }
    None
}

macro_rules! require_root_and_tun {
    () => {
        if let Some(reason) = skip_reason() {
            eprintln!("skipped: {reason}");
            return;
        }
    };
}

/// Namespaces and state directory of one test, removed on drop.
struct Scratch {
    ns_a: String,
    ns_b: String,
    state_dir: PathBuf,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Scratch {
    fn new() -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        Self {
            ns_a: format!("lkt{pid}-{n}a"),
            ns_b: format!("lkt{pid}-{n}b"),
            state_dir: std::env::temp_dir().join(format!("lkt{pid}-{n}-state")),
        }
    }

    fn config(&self, link: LinkConfig) -> RealtimeConfig {
        RealtimeConfig {
            a_to_b: link.clone(),
            b_to_a: link,
            state_dir: Some(self.state_dir.clone()),
            ..RealtimeConfig::new(&self.ns_a, &self.ns_b)
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Only our own, uniquely named namespaces.
        for ns in [&self.ns_a, &self.ns_b] {
            if realtime::netns_exists(ns) {
                let _ = Command::new("ip").args(["netns", "delete", ns]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

const A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

/// A UDP socket bound inside namespace `ns`.
fn udp_in(ns: &str, ip: Ipv4Addr, port: u16) -> UdpSocket {
    let sock = realtime::in_netns(ns, move || UdpSocket::bind(SocketAddr::from((ip, port))))
        .expect("bind a UDP socket inside the namespace");
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("set timeout");
    sock
}

fn ip_ok(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Echoes every datagram back until `stop`; returns the thread.
fn echo_server(sock: UdpSocket, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = vec![0u8; 9000];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(&buf[..n], from);
            }
        }
    })
}

#[test]
fn rtt_is_twice_the_one_way_delay() {
    require_root_and_tun!();
    let s = Scratch::new();
    let link = LinkConfig {
        delay: Duration::from_millis(50),
        ..LinkConfig::default()
    };
    let emu = Emulator::start(s.config(link)).expect("start");
    let stop = Arc::new(AtomicBool::new(false));
    let server = echo_server(udp_in(&s.ns_b, B, 7001), stop.clone());
    let client = udp_in(&s.ns_a, A, 0);
    client
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut rtts = Vec::new();
    for i in 0u32..10 {
        let t0 = Instant::now();
        client.send_to(&i.to_be_bytes(), (B, 7001)).expect("send");
        let mut buf = [0u8; 16];
        // Replies to earlier (late) probes are skipped by their number.
        while let Ok((n, _)) = client.recv_from(&mut buf) {
            if n == 4 && buf[..4] == i.to_be_bytes() {
                rtts.push(t0.elapsed());
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let stats = emu.shutdown().expect("shutdown");
    assert!(rtts.len() >= 9, "only {} of 10 echoes came back", rtts.len());
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    eprintln!("RTTs: {rtts:?}");
    assert!(
        rtts[0] >= Duration::from_millis(100),
        "an echo came back early: {:?}",
        rtts[0]
    );
    // The delay the emulator adds is exact; what a busy host adds on top (a late wake-up of
    // the emulator's or the echo's thread) is not the emulator's to promise, and shows in the
    // median (102-114 ms with both cores busy). The least disturbed echo shows the delay.
    // 2 × 50 ms, not 1 × or 3 ×: within 10 ms (on an idle host the fastest echo is within
    // 0.1 ms of 100 ms; with both cores busy it was up to 2.1 ms late).
    assert!(
        rtts[0] < Duration::from_millis(110),
        "fastest RTT {:?} (median {median:?}) is not 100 ms",
        rtts[0]
    );
    assert!(stats.a_to_b.forwarded.packets >= 10);
    assert_eq!(stats.mode, Mode::Model);
}

#[test]
fn bernoulli_loss_delivers_the_expected_fraction() {
    require_root_and_tun!();
    let s = Scratch::new();
    let mut cfg = s.config(LinkConfig::default());
    cfg.a_to_b.loss = LossModel::Bernoulli { p: 0.1 };
    cfg.seed = 7;
    let emu = Emulator::start(cfg).expect("start");
    let rx = udp_in(&s.ns_b, B, 7002);
    // Room for every datagram while a busy host holds the receiving thread up: a drop there is
    // not the model's (with the default buffer, 6 to 350 of 2000 were lost with both cores busy).
    netio::size_buffers(&rx, netio::BufferRequest { rcv: 8 << 20, snd: 0 }).expect("receive buffer");
    let tx = udp_in(&s.ns_a, A, 0);
    const N: u32 = 2000;
    let sent_all = Arc::new(AtomicBool::new(false));
    let done = sent_all.clone();
    let receiver = thread::spawn(move || {
        let mut seen = vec![false; N as usize];
        let mut buf = [0u8; 256];
        let mut quiet_since = Instant::now();
        let give_up = Instant::now() + Duration::from_secs(60);
        // Stops once everything was sent and nothing came for 1 s (the link has no delay; a
        // busy host may hold the emulator up for a while, which must not count as loss).
        while !(done.load(Ordering::Relaxed) && quiet_since.elapsed() >= Duration::from_secs(1))
            && Instant::now() < give_up
        {
            if let Ok((n, _)) = rx.recv_from(&mut buf) {
                quiet_since = Instant::now();
                if n >= 4 {
                    let i = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                    if let Some(slot) = seen.get_mut(i) {
                        *slot = true;
                    }
                }
            }
        }
        seen.iter().filter(|&&x| x).count() as u64
    });
    let mut payload = [0u8; 100];
    for i in 0..N {
        payload[..4].copy_from_slice(&i.to_be_bytes());
        tx.send_to(&payload, (B, 7002)).expect("send");
        if i % 50 == 49 {
            // Gentle pacing: the point is the loss model, not buffer overflow.
            thread::sleep(Duration::from_millis(1));
        }
    }
    sent_all.store(true, Ordering::Relaxed);
    let delivered = receiver.join().expect("receiver");
    let stats = emu.shutdown().expect("shutdown");
    let frac = delivered as f64 / f64::from(N);
    // Binomial(2000, 0.9): σ = 0.0067; ±4.5σ is a 1-in-10^5 false alarm.
    let ab = &stats.a_to_b;
    let model = ab.model.as_ref().expect("model stats");
    eprintln!(
        "delivered {delivered}/{N} = {frac:.4}; the model forwarded {}, dropped {} (loss) {} (queue)",
        ab.forwarded.packets, model.dropped_loss.packets, model.dropped_queue.packets
    );
    // Every datagram the model forwarded arrived: the only loss is the model's.
    assert_eq!(ab.forwarded.packets, delivered, "forwarded but not received");
    assert!((frac - 0.9).abs() < 0.03, "delivered fraction {frac}");
    // Every datagram we sent went through the model; nothing else did (IPv6 is off).
    assert_eq!(ab.received.packets, u64::from(N));
    assert_eq!(model.dropped_loss.packets + ab.forwarded.packets, u64::from(N));
    assert_eq!(model.dropped_queue.packets, 0);
    // No drop happened outside the model, and the counter is readable.
    assert_eq!(ab.input_tx_dropped, Some(0));
}

#[test]
fn bottleneck_rate_is_enforced() {
    require_root_and_tun!();
    let s = Scratch::new();
    let rate = 20_000_000u64;
    let link = LinkConfig {
        rate_bps: Some(rate),
        buffer_bytes: 60_000,
        ..LinkConfig::default()
    };
    let emu = Emulator::start(s.config(link)).expect("start");
    let rx = udp_in(&s.ns_b, B, 7003);
    let tx = udp_in(&s.ns_a, A, 0);
    const PAYLOAD: usize = 1400;
    const IP_BYTES: u64 = PAYLOAD as u64 + 28; // + UDP 8 + IPv4 20: what the link serialises
    let receiver = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (mut first, mut last, mut bytes) = (None, Instant::now(), 0u64);
        let mut quiet_since = Instant::now();
        while quiet_since.elapsed() < Duration::from_millis(400) {
            if let Ok((n, _)) = rx.recv_from(&mut buf) {
                let now = Instant::now();
                quiet_since = now;
                if n != PAYLOAD {
                    continue;
                }
                // Bytes after the first arrival over the time since it.
                if first.is_none() {
                    first = Some(now);
                } else {
                    bytes += IP_BYTES;
                }
                last = now;
            }
        }
        first.map(|f| bytes as f64 * 8.0 / (last - f).as_secs_f64())
    });
    // Offer 1.5× the bottleneck for 2 s, paced in 1 ms slices.
    let offered = 1.5 * rate as f64;
    let start = Instant::now();
    let mut sent = 0u64;
    let payload = [0u8; PAYLOAD];
    while start.elapsed() < Duration::from_secs(2) {
        let due = (offered * start.elapsed().as_secs_f64() / 8.0 / IP_BYTES as f64) as u64;
        while sent < due {
            tx.send_to(&payload, (B, 7003)).expect("send");
            sent += 1;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let measured = receiver.join().expect("receiver").expect("nothing arrived");
    let stats = emu.shutdown().expect("shutdown");
    eprintln!("measured {:.3} Mb/s through a 20 Mb/s bottleneck", measured / 1e6);
    let model = stats.a_to_b.model.expect("model stats");
    assert!(
        model.dropped_queue.packets > 0,
        "the queue never overflowed: offered load too low"
    );
    let err = (measured - rate as f64).abs() / rate as f64;
    assert!(err < 0.05, "measured {measured:.0} b/s, {:.1} % off", err * 100.0);
}

#[test]
fn teardown_removes_only_what_it_created() {
    require_root_and_tun!();
    let s = Scratch::new();
    // B exists beforehand, with a TUN device of its own: both must survive.
    assert!(ip_ok(&["netns", "add", &s.ns_b]));
    assert!(ip_ok(&["-n", &s.ns_b, "tuntap", "add", "dev", "keepme", "mode", "tun"]));
    // A device already named like ours is never taken over (IFF_TUN_EXCL),
    // and the failed start leaves nothing behind.
    assert!(ip_ok(&[
        "-n", &s.ns_b, "tuntap", "add", "dev", "lkemu-b", "mode", "tun"
    ]));
    let clash = Emulator::start(s.config(LinkConfig::default()));
    assert!(matches!(clash, Err(RealtimeError::Io { .. })), "{:?}", clash.err());
    assert!(!realtime::netns_exists(&s.ns_a), "failed start left its namespace");
    assert!(
        ip_ok(&["-n", &s.ns_b, "link", "show", "lkemu-b"]),
        "someone else's device removed"
    );
    assert!(ip_ok(&[
        "-n", &s.ns_b, "tuntap", "del", "dev", "lkemu-b", "mode", "tun"
    ]));
    let emu = Emulator::start(s.config(LinkConfig::default())).expect("start");
    let path = realtime::state_path(&s.state_dir, &s.ns_a, &s.ns_b);
    let state = realtime::read_state(&path).expect("state file while running");
    assert_eq!(state.created_netns, vec![s.ns_a.clone()]);
    assert!(state.ready);
    assert_eq!(state.pid, std::process::id());
    assert!(ip_ok(&["-n", &s.ns_a, "link", "show", "lkemu-a"]));
    assert!(ip_ok(&["-n", &s.ns_b, "link", "show", "lkemu-b"]));
    // A second emulator for the same pair is refused.
    let again = Emulator::start(s.config(LinkConfig::default()));
    assert!(
        matches!(again, Err(RealtimeError::AlreadyRunning { .. })),
        "{:?}",
        again.err()
    );
    let stats = emu.shutdown().expect("shutdown");
    assert!(stats.a.created && !stats.b.created);
    assert!(!realtime::netns_exists(&s.ns_a), "created namespace left behind");
    assert!(realtime::netns_exists(&s.ns_b), "pre-existing namespace deleted");
    assert!(
        !ip_ok(&["-n", &s.ns_b, "link", "show", "lkemu-b"]),
        "TUN device left behind"
    );
    assert!(
        ip_ok(&["-n", &s.ns_b, "link", "show", "keepme"]),
        "someone else's device removed"
    );
    assert!(!path.exists(), "state file left behind");

    // Dropping without shutdown cleans up too (the path taken on panic).
    let emu = Emulator::start(s.config(LinkConfig::default())).expect("restart");
    drop(emu);
    assert!(!realtime::netns_exists(&s.ns_a));
    assert!(!ip_ok(&["-n", &s.ns_b, "link", "show", "lkemu-b"]));
}

#[test]
fn down_cleans_up_after_a_dead_emulator() {
    require_root_and_tun!();
    let s = Scratch::new();
    // A state file as left by an emulator killed with SIGKILL: its pid is
    // gone (a child that has exited) and its namespace is still there.
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    let _ = child.wait();
    assert!(ip_ok(&["netns", "add", &s.ns_a]));
    let state = RunState {
        pid,
        start_time: 1,
        ns_a: s.ns_a.clone(),
        ns_b: s.ns_b.clone(),
        dev_a: "lkemu-a".into(),
        dev_b: "lkemu-b".into(),
        addr_a: A,
        addr_b: B,
        created_netns: vec![s.ns_a.clone(), s.ns_b.clone()],
        ready: true,
    };
    let path = realtime::state_path(&s.state_dir, &s.ns_a, &s.ns_b);
    std::fs::create_dir_all(&s.state_dir).expect("mkdir");
    std::fs::write(&path, serde_json::to_vec(&state).expect("json")).expect("write state");
    // A new run refuses to start over the stale record.
    let refused = Emulator::start(s.config(LinkConfig::default()));
    assert!(
        matches!(refused, Err(RealtimeError::StaleState(_))),
        "{:?}",
        refused.err()
    );
    let report = realtime::down(&path, Duration::from_secs(2)).expect("down");
    assert_eq!(report.stopped_pid, None);
    assert_eq!(report.deleted_netns, vec![s.ns_a.clone()]);
    assert!(!realtime::netns_exists(&s.ns_a));
    assert!(!path.exists());
}

#[test]
fn bare_mode_forwards_without_the_model() {
    require_root_and_tun!();
    let s = Scratch::new();
    let cfg = RealtimeConfig {
        mode: Mode::Bare,
        mtu: 9000,
        ..s.config(LinkConfig::default())
    };
    let emu = Emulator::start(cfg).expect("start");
    let stop = Arc::new(AtomicBool::new(false));
    let server = echo_server(udp_in(&s.ns_b, B, 7004), stop.clone());
    let client = udp_in(&s.ns_a, A, 0);
    // 8000 bytes fit one 9000-byte MTU packet: no fragmentation.
    let big = vec![0x5a; 8000];
    client.send_to(&big, (B, 7004)).expect("send");
    let mut buf = vec![0u8; 9000];
    let got = client.recv_from(&mut buf).map(|(n, _)| n);
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let stats = emu.shutdown().expect("shutdown");
    assert_eq!(got.ok(), Some(8000));
    assert!(stats.a_to_b.model.is_none());
    assert_eq!(stats.a_to_b.forwarded.packets, 1);
    assert_eq!(stats.a_to_b.forwarded.bytes, 8028);
}

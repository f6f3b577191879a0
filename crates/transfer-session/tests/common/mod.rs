//! Helpers of the session tests: a receiver in a thread, a sender's default configuration, a
//! hand-played sender on a raw control session, a rewriting proxy.

#![allow(dead_code)]

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use ctlchan::serve::ServeStats;
use ctlchan::{Channel, Role};
use transfer::results::{FileRecvReport, SendReport};
use transfer_session::control::{Msg, Offer, MAX_LINE};
use transfer_session::{send, CcChoice, SendConfig, Server, ServerConfig, ServerEvent, TransferSessionError};

pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub struct Running {
    pub addr: SocketAddr,
    pub events: mpsc::Receiver<ServerEvent>,
    pub thread: JoinHandle<Result<ServeStats, TransferSessionError>>,
}

/// A receiver serving one session in a thread; its events arrive on a channel.
pub fn serve_once(root: &Path, key: Option<&[u8]>) -> Running {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), root.to_path_buf());
    cfg.key = key.map(<[u8]>::to_vec);
    serve_with(cfg, true)
}

impl Running {
    pub fn finish(self) -> Vec<ServerEvent> {
        self.thread.join().unwrap().unwrap();
        self.events.try_iter().collect()
    }
}

/// The session's data stream as the receiver reported it.
pub fn stream(events: &[ServerEvent]) -> transfer::results::StreamRecvReport {
    events
        .iter()
        .find_map(|e| match e {
            ServerEvent::Stream(_, s) => Some(s.clone()),
            _ => None,
        })
        .expect("a stream event")
}

pub fn files(events: &[ServerEvent]) -> Vec<FileRecvReport> {
    events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::File(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

pub fn config(addr: SocketAddr, dest: &str) -> SendConfig {
    SendConfig {
        server: addr,
        dest: dest.into(),
        key: None,
        cc: CcChoice::Fixed(2e9),
        chunk_size: 8192,
        block_size: 1 << 20,
        sync: true,
        start: None,
    }
}

pub fn run_send(cfg: &SendConfig, items: &[PathBuf]) -> Result<SendReport, TransferSessionError> {
    send(cfg, items, &mut |_| {}, &AtomicBool::new(false))
}

pub fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

pub fn serve_with(cfg: ServerConfig, once: bool) -> Running {
    let server = Server::bind(cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let (tx, events) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let stop = AtomicBool::new(false);
        server.serve(&stop, once, &mut |e| {
            let _ = tx.send(e);
        })
    });
    Running { addr, events, thread }
}

/// Plays the sender by hand on a raw control session: offer, accept (the data of a raw session
/// comes from a socket the test owns, so a forged datagram can come from exactly the sender's
/// address).
pub fn raw_offer(ch: &mut Channel<Msg>, id: u64, path: &str, size: u64) {
    ch.send(&Msg::Offer(Offer {
        id,
        path: path.into(),
        size,
        mtime_ns: 1,
        block_size: 1 << 20,
        sync: true,
    }))
    .unwrap();
    match ch.recv(Duration::from_secs(10)).unwrap() {
        Msg::Accept { id: i, have } => assert!(i == id && have.is_empty()),
        m => panic!("{m:?}"),
    }
}

/// A raw session: the handshake without a key, the session's chunk size, the welcome.
pub struct Raw {
    pub ch: Channel<Msg>,
    pub key: [u8; 32],
    pub udp_port: u16,
    pub session_id: u64,
    /// Bound to the port the first flight named, connected to the receiver's data port.
    pub data: std::net::UdpSocket,
}

pub fn raw_session_key(addr: SocketAddr) -> Raw {
    // The socket our data comes from (the first flight names its port).
    let data = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    data.connect(addr).unwrap();
    raw_session_from(addr, data, 0x5e55)
}

/// [`raw_session_key`] with its data from `data` (connected to `addr`) and session id `session`.
pub fn raw_session_from(addr: SocketAddr, data: std::net::UdpSocket, session: u64) -> Raw {
    let mut ch = Channel::<Msg>::new(std::net::TcpStream::connect(addr).unwrap(), MAX_LINE);
    let udp_port = data.local_addr().unwrap().port();
    let (hello, key) = transfer_session::first_flight::client_hello(
        None,
        rand_nonce(),
        transfer_session::first_flight::wall_ms(),
        session,
        udp_port,
    );
    ch.send(&hello).unwrap();
    ch.authenticate(key, Role::Client);
    ch.send(&Msg::Session {
        chunk_size: 8192,
        first_segment: transfer_session::control::FIRST_SEGMENT_BYTES,
    })
    .unwrap();
    let Msg::Welcome { udp_port, session_id } = ch.recv(Duration::from_secs(10)).unwrap() else {
        panic!("no welcome");
    };
    Raw {
        ch,
        key,
        udp_port,
        session_id,
        data,
    }
}

/// The DATA datagrams of `payload` (stream offsets 0..) in 8192-byte chunks, keyed as a sender
/// of session `session_id` under session key `sk` keys them.
pub fn keyed_datagrams(sk: &[u8; 32], session_id: u64, payload: &[u8]) -> Vec<Vec<u8>> {
    struct Mem(Vec<u8>);
    impl transfer::Source for Mem {
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            let at = (offset as usize).min(self.0.len());
            let n = buf.len().min(self.0.len() - at);
            buf[..n].copy_from_slice(&self.0[at..at + n]);
            Ok(n)
        }
    }
    let mut cfg = transfer::SenderConfig::new(transfer::SessionParams {
        session_id,
        file_size: 0,
        chunk_size: 8192,
    });
    cfg.open = true;
    cfg.data_key = Some(transfer_session::control::data_key(sk, session_id));
    let t0 = std::time::Instant::now();
    let cc = Box::new(transfer::FixedRate::new(1e9));
    let mut s = transfer::Sender::new(cfg, Mem(payload.to_vec()), cc, t0).unwrap();
    s.push_segment(payload.len() as u64, 0);
    let want = payload.len().div_ceil(8192);
    let mut out = Vec::new();
    // Virtual time, 1 ms a step: 1 Gb/s sends 15 chunks a step.
    for step in 0..100_000u32 {
        let now = t0 + Duration::from_millis(u64::from(step));
        while let Some(d) = s.poll_transmit(now) {
            if transfer::wire::peek_header(&d).is_ok_and(|h| h.kind == transfer::wire::Kind::Data) {
                out.push(d);
            }
        }
        if out.len() >= want {
            break;
        }
    }
    assert_eq!(out.len(), want, "the sender gave every chunk");
    out
}

fn rand_nonce() -> [u8; 16] {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (t ^ u128::from(std::process::id())).to_le_bytes()
}

/// A hand-written sender that says what it likes: only the handshake is shared.
pub fn raw_session(addr: SocketAddr) -> Channel<Msg> {
    raw_session_key(addr).ch
}

/// A TCP proxy that forwards both ways and rewrites `from` to `to` in what the sender says.
pub fn rewriting_proxy(target: SocketAddr, from: &'static str, to: &'static str) -> SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((client, _)) = l.accept() else { return };
        let Ok(server) = std::net::TcpStream::connect(target) else {
            return;
        };
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Both);
        });
        let (mut client, mut server) = (client, server);
        let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = client.read(&mut buf) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buf[..n]).replace(from, to);
            if server.write_all(text.as_bytes()).is_err() {
                break;
            }
        }
        let _ = server.shutdown(std::net::Shutdown::Both);
        let _ = back.join();
    });
    addr
}

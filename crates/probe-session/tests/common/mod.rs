//! What the probe-session tests share: a server on an ephemeral port of 127.0.0.1 serving a
//! bounded number of sessions in a thread, and a small client configuration.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use probe_session::{ClientConfig, Server, ServerConfig, ServerEvent};

/// A server serving `sessions` sessions (handshake deadline `handshake`), each event turned into
/// a `T` by `describe` and sent back on the channel.
#[allow(dead_code)] // each test file uses its own part of this module
pub fn serve<T: Send + 'static>(
    key: Option<&[u8]>,
    sessions: u64,
    handshake: Duration,
    describe: fn(ServerEvent) -> T,
) -> (SocketAddr, mpsc::Receiver<T>, thread::JoinHandle<()>) {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.key = key.map(<[u8]>::to_vec);
    cfg.handshake_timeout = handshake;
    let server = Server::bind(cfg).unwrap();
    let addr = server.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let stop = AtomicBool::new(false);
        server
            .serve(&stop, Some(sessions), |e| {
                let _ = tx.send(describe(e));
            })
            .unwrap();
    });
    (addr, rx, h)
}

/// A UDP trial of `count` 1472-byte datagrams 20 µs apart, test id 42.
#[allow(dead_code)]
pub fn client(server: SocketAddr, count: u64, key: Option<&[u8]>) -> ClientConfig {
    ClientConfig {
        server,
        size: 1472,
        count,
        spacing_ns: 20_000,
        key: key.map(<[u8]>::to_vec),
        test_id: Some(42),
        sndbuf: 4 << 20,
        interval: None,
        rcvbuf: None,
        burst: 1,
    }
}

//! Data with the connect (protocol 6) through real sockets: the sender's first segment leaves
//! on UDP while its TCP connect is still under way, no more of it than the receiver's pen keeps
//! for a session it does not know yet.

mod common;

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use socket2::{Domain, Socket, Type};
use transfer::wire::{self, Kind};
use transfer_session::control::pre_connect_budget;

/// A TCP listener whose accept queue is full (backlog 0 and one connection queued): the kernel
/// drops a new SYN until there is room, so a connect to it is still under way a second later
/// (the SYN's first retry). Returns it, the queued connection and the UDP socket bound to the
/// same port number (where the receiver's data arrives).
fn full_listener() -> (Socket, TcpStream, UdpSocket) {
    for _ in 0..16 {
        let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
        l.listen(0).unwrap();
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        let filler = TcpStream::connect(addr).unwrap();
        let udp = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        let _ = udp.set_recv_buffer_size(32 << 20);
        if udp.bind(&addr.into()).is_ok() {
            return (l, filler, udp.into());
        }
    }
    panic!("no port free for both TCP and UDP");
}

#[test]
fn the_first_segment_leaves_before_the_connect_completes_within_the_pen_budget() {
    let src = tempfile::tempdir().unwrap();
    // Larger than the first segment.
    std::fs::write(src.path().join("f.bin"), pattern(24 << 20, 5)).unwrap();
    let (listener, _filler, udp) = full_listener();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let mut cfg = config(addr, "");
    cfg.key = Some(b"sixteen-byte-key-for-tests-0123".to_vec());
    // Small chunks: the budget (3072 datagrams, 3 MiB) is less than the first segment (8 MiB).
    cfg.chunk_size = 1024;
    cfg.cc = transfer_session::CcChoice::Fixed(1e9);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let file = src.path().join("f.bin");
    let t = std::thread::spawn(move || transfer_session::send(&cfg, &[file], &mut |_| {}, &st));
    // Half a second of what arrives on UDP while the connect waits for room (its SYN's first
    // retry comes after 1 s).
    udp.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = vec![0u8; 65_536];
    let (mut data, mut sessions) = (0u64, std::collections::BTreeSet::new());
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        if let Ok(n) = udp.recv(&mut buf) {
            if let Ok(h) = wire::peek_header(&buf[..n]) {
                data += u64::from(h.kind == Kind::Data);
                sessions.insert(h.session_id);
            }
        }
    }
    // The connect is still under way: only the queued connection is there to accept.
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_ok(), "the queued connection");
    let second = listener.accept();
    assert!(
        second.is_err(),
        "the sender's connect completed: the test proves nothing"
    );
    stop.store(true, Ordering::Relaxed);
    drop(listener);
    let r = t.join().unwrap();
    assert!(r.is_err(), "a session without a receiver cannot succeed: {r:?}");
    assert!(data > 0, "no datagram left before the connect completed");
    assert_eq!(sessions.len(), 1, "one session's datagrams: {sessions:?}");
    // The pacer may overshoot the budget by one burst (1 ms at 1 Gb/s: 109 datagrams); the
    // first segment alone is 8192.
    let budget = pre_connect_budget(1024);
    assert!(
        data <= budget + 256,
        "{data} datagrams before the connect, budget {budget}"
    );
}

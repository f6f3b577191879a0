//! UDP GSO send and GRO receive over loopback, when the kernel supports them (skipped with the
//! reason printed otherwise).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use netio::{bind_udp, connect_udp, gso_supported, send_gso, BufferRequest, RecvBatch, SendBatch};

const SEG: usize = 1400;
const TOTAL: usize = 64 << 10;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect()
}

fn pair() -> (UdpSocket, UdpSocket) {
    let (rx, _) = bind_udp(localhost(), BufferRequest::new(8 << 20, 0)).unwrap();
    let (tx, _) = connect_udp(localhost(), rx.local_addr().unwrap(), BufferRequest::default()).unwrap();
    (rx, tx)
}

/// Receive until `want` datagrams arrived (bounded in time); returns (datagrams, messages).
fn receive(rx: &UdpSocket, rb: &mut RecvBatch, want: usize) -> (Vec<Vec<u8>>, usize) {
    let mut got = Vec::new();
    let mut messages = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < want && Instant::now() < deadline {
        rb.recv_batch(rx, Some(Duration::from_millis(500))).unwrap();
        messages += rb.messages();
        for d in rb.iter() {
            assert!(!d.truncated, "datagram {} truncated", got.len());
            got.push(d.data.to_vec());
        }
    }
    (got, messages)
}

fn assert_segments(got: &[Vec<u8>], buf: &[u8]) {
    let want: Vec<&[u8]> = buf.chunks(SEG).collect();
    assert_eq!(got.len(), want.len(), "datagram count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.as_slice(), *w, "datagram {i} differs");
    }
}

#[test]
fn gso_send_arrives_as_separate_datagrams() {
    let (rx, tx) = pair();
    if !gso_supported(&tx) {
        eprintln!("SKIP: UDP_SEGMENT (GSO) not supported by this kernel");
        return;
    }
    let buf = pattern(TOTAL);
    let sent = send_gso(&tx, &buf, SEG).unwrap();
    assert_eq!(sent.datagrams, TOTAL.div_ceil(SEG)); // 47: 46 × 1400 + 1136
    eprintln!("GSO send: {sent:?}");
    let mut rb = RecvBatch::new(64, 1500);
    let (got, messages) = receive(&rx, &mut rb, sent.datagrams);
    assert_eq!(messages, got.len(), "without GRO every datagram is its own message");
    assert_segments(&got, &buf);
}

#[test]
fn gso_rejects_bad_segment_sizes() {
    let (_rx, tx) = pair();
    assert!(send_gso(&tx, b"x", 0).is_err());
    assert!(send_gso(&tx, b"x", 70_000).is_err());
}

#[test]
fn gro_receive_splits_coalesced_buffers() {
    let (rx, tx) = pair();
    let mut rb = RecvBatch::new(16, 1500);
    if !rb.enable_gro(&rx).unwrap() {
        eprintln!("SKIP: UDP_GRO not supported by this kernel");
        return;
    }
    if !gso_supported(&tx) {
        eprintln!("SKIP: GRO test needs GSO to make coalesced buffers on loopback");
        return;
    }
    // On loopback a GSO super-packet reaches a GRO-enabled socket as one buffer with a UDP_GRO
    // cmsg giving the segment size; RecvBatch must split it back.
    let buf = pattern(TOTAL);
    let sent = send_gso(&tx, &buf, SEG).unwrap();
    let (got, messages) = receive(&rx, &mut rb, sent.datagrams);
    assert_segments(&got, &buf);
    eprintln!(
        "GRO: {} datagrams arrived in {messages} messages (gso used: {})",
        got.len(),
        sent.gso
    );
    if sent.gso {
        assert!(
            messages < got.len(),
            "expected coalesced buffers, got {messages} messages"
        );
    }
}

#[test]
fn gro_socket_still_receives_plain_datagrams_and_flags_oversized() {
    let (rx, tx) = pair();
    let mut rb = RecvBatch::new(16, 1000);
    if !rb.enable_gro(&rx).unwrap() {
        eprintln!("SKIP: UDP_GRO not supported by this kernel");
        return;
    }
    let a = pattern(300);
    let b = pattern(1200); // longer than max_datagram = 1000
    let c = pattern(17);
    assert_eq!(SendBatch::new().send_batch(&tx, &[&a, &b, &c]).unwrap(), 3);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 3 && Instant::now() < deadline {
        rb.recv_batch(&rx, Some(Duration::from_millis(500))).unwrap();
        got.extend(rb.iter().map(|d| (d.data.to_vec(), d.truncated)));
    }
    assert_eq!(got, vec![(a, false), (b[..1000].to_vec(), true), (c, false)]);
}

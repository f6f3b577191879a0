//! recvmmsg/sendmmsg batches over loopback: every datagram intact, in order, from the right
//! address, with kernel timestamps; truncation flagged; timeouts return; the socket's own drop
//! count (SO_RXQ_OVFL) matches /proc/net/udp.

// unsafe: sched_getcpu(3): which core a reader ran on; std cannot ask.
#![allow(unsafe_code)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use netio::{bind_udp, connect_udp, enable_rx_timestamps, BufferRequest, RecvBatch, SendBatch};

const N: u64 = 10_000;
/// Datagrams the sender may be ahead of the receiver: keeps the receive buffer far from full, so
/// nothing is dropped however the two threads are scheduled.
const WINDOW: u64 = 256;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Datagram `seq`: 16..=2000 bytes, the sequence number first, then a pattern that depends on
/// both the sequence number and the position.
fn payload(seq: u64) -> Vec<u8> {
    let len = 16 + (seq as usize * 7919) % 1985;
    let mut v: Vec<u8> = (0..len)
        .map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect();
    v[..8].copy_from_slice(&seq.to_le_bytes());
    v
}

/// Loopback delivers through the per-CPU backlog of the sending CPU; a sender migrating between
/// CPUs could in principle let a later batch overtake an earlier one. Pinning the sender thread
/// to one CPU makes "in order" a property of the code under test, not of the scheduler.
fn pin_to_current_cpu() {
    // SAFETY: sched_getcpu has no preconditions; cpu_set_t is plain data, zero is empty, and
    // sched_setaffinity(0, …) affects only the calling thread.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// The first socket on a host to ask for timestamps switches stamping on through deferred kernel
/// work; until it has run, datagrams are stamped when read, not when queued (a fresh CI machine
/// saw stamps decrease within one batch). Wait until a datagram sent before a recv carries a stamp
/// older than the recv call: from then on every datagram is stamped as it is queued.
fn wait_for_enqueue_stamping(tx: &UdpSocket, rx: &UdpSocket) {
    let mut rb = RecvBatch::new(4, 64);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        tx.send(b"warm-up").unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let before_recv = now_ns();
        rb.recv_batch(rx, Some(Duration::from_millis(200))).unwrap();
        let stamps: Vec<u64> = rb.iter().filter_map(|d| d.kernel_time).collect();
        if !stamps.is_empty() && stamps.iter().all(|&ts| ts < before_recv) {
            return;
        }
    }
    panic!("the kernel never stamped datagrams on arrival within 10 s");
}

#[test]
fn ten_thousand_datagrams_arrive_intact_in_order_with_timestamps() {
    let (rx, grant) = bind_udp(localhost(), BufferRequest::new(16 << 20, 0)).unwrap();
    eprintln!("receive buffer: {grant:?}");
    enable_rx_timestamps(&rx).unwrap();
    let rx_addr = rx.local_addr().unwrap();
    let (tx, _) = connect_udp(localhost(), rx_addr, BufferRequest::new(0, 4 << 20)).unwrap();
    wait_for_enqueue_stamping(&tx, &rx);
    let tx_addr = tx.local_addr().unwrap();

    let received = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&received);
    let sender = std::thread::spawn(move || -> (u64, u64) {
        pin_to_current_cpu();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut batch = SendBatch::new();
        let mut seq = 0u64;
        while seq < N && Instant::now() < deadline {
            if seq.saturating_sub(seen.load(Ordering::Acquire)) > WINDOW {
                std::thread::yield_now();
                continue;
            }
            let n = (N - seq).min(32);
            let bufs: Vec<Vec<u8>> = (seq..seq + n).map(payload).collect();
            let refs: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
            let mut off = 0;
            // Partial sends: resend the rest (bounded by the deadline).
            while off < refs.len() && Instant::now() < deadline {
                off += batch.send_batch(&tx, &refs[off..]).unwrap();
            }
            seq += off as u64;
        }
        (seq, batch.syscalls())
    });

    let mut rb = RecvBatch::new(64, 2048);
    let mut next = 0u64;
    let mut multi = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while next < N && Instant::now() < deadline {
        let n = rb.recv_batch(&rx, Some(Duration::from_millis(200))).unwrap();
        if n > 1 {
            multi += 1;
        }
        let now = now_ns();
        let mut prev_ts = 0u64;
        for d in rb.iter() {
            assert!(!d.truncated);
            assert_eq!(d.from, tx_addr);
            let seq = u64::from_le_bytes(d.data[..8].try_into().unwrap());
            assert_eq!(seq, next, "out of order or lost");
            assert_eq!(d.data, payload(seq).as_slice(), "payload {seq} corrupted");
            let ts = d.kernel_time.expect("SO_TIMESTAMPNS timestamp missing");
            assert!(ts >= prev_ts, "timestamps decrease within a batch");
            assert!(ts.abs_diff(now) < 10_000_000_000, "timestamp {ts} far from now {now}");
            prev_ts = ts;
            next += 1;
        }
        received.store(next, Ordering::Release);
    }
    let (sent, syscalls) = sender.join().unwrap();
    assert_eq!(sent, N);
    assert_eq!(next, N, "received {next} of {N}");
    eprintln!("{N} datagrams in {syscalls} sendmmsg calls; {multi} receive batches held more than one");
}

#[test]
fn oversized_datagram_is_flagged_truncated() {
    let (rx, _) = bind_udp(localhost(), BufferRequest::default()).unwrap();
    let (tx, _) = connect_udp(localhost(), rx.local_addr().unwrap(), BufferRequest::default()).unwrap();
    let big: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
    tx.send(&big).unwrap();
    tx.send(&big[..500]).unwrap();
    let mut rb = RecvBatch::new(4, 1000);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 2 && Instant::now() < deadline {
        rb.recv_batch(&rx, Some(Duration::from_millis(500))).unwrap();
        got.extend(rb.iter().map(|d| (d.data.to_vec(), d.truncated)));
    }
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], (big[..1000].to_vec(), true));
    assert_eq!(got[1], (big[..500].to_vec(), false));
}

#[test]
fn timeout_returns_zero_and_no_timestamps_when_off() {
    let (rx, _) = bind_udp(localhost(), BufferRequest::default()).unwrap();
    let mut rb = RecvBatch::new(8, 1500);
    assert_eq!(rb.recv_batch(&rx, Some(Duration::from_millis(20))).unwrap(), 0);
    assert!(rb.is_empty());
    assert!(rb.get(0).is_none());
    let tx = UdpSocket::bind(localhost()).unwrap();
    tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
    assert_eq!(rb.recv_batch(&rx, Some(Duration::from_secs(10))).unwrap(), 1);
    let d = rb.datagram(0);
    assert_eq!(d.data, b"hello");
    assert_eq!(d.kernel_time, None);
    assert_eq!(d.from, tx.local_addr().unwrap());
}

#[test]
fn send_batch_to_reaches_each_destination() {
    let (a, _) = bind_udp(localhost(), BufferRequest::default()).unwrap();
    let (b, _) = bind_udp(localhost(), BufferRequest::default()).unwrap();
    let tx = UdpSocket::bind(localhost()).unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let msgs: [(&[u8], SocketAddr); 4] = [(b"a0", aa), (b"b0", ba), (b"a1", aa), (b"b1", ba)];
    assert_eq!(SendBatch::new().send_batch_to(&tx, &msgs).unwrap(), 4);
    for (sock, want) in [(&a, [b"a0", b"a1"]), (&b, [b"b0", b"b1"])] {
        let mut rb = RecvBatch::new(8, 100);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < 2 && Instant::now() < deadline {
            rb.recv_batch(sock, Some(Duration::from_millis(500))).unwrap();
            got.extend(rb.iter().map(|d| d.data.to_vec()));
        }
        assert_eq!(got, want.map(|w| w.to_vec()));
    }
}

#[test]
fn the_socket_s_own_drops_ride_on_the_next_datagram() {
    // A small receive buffer nobody reads while 200 datagrams of 4 KB arrive: most are dropped
    // at this socket. The count (SO_RXQ_OVFL) comes with the first datagram queued after the
    // drops, and equals the socket's `drops` in /proc/net/udp.
    let (rx, _) = bind_udp(localhost(), BufferRequest::new(16 << 10, 0)).unwrap();
    netio::enable_rx_drop_counter(&rx).unwrap();
    let tx = UdpSocket::bind(localhost()).unwrap();
    let to = rx.local_addr().unwrap();
    let d = vec![7u8; 4096];
    for _ in 0..200 {
        tx.send_to(&d, to).unwrap();
    }
    let mut rb = RecvBatch::new(64, 8192);
    let mut got = 0u64;
    while rb.recv_batch(&rx, Some(Duration::from_millis(100))).unwrap() > 0 {
        got += rb.len() as u64;
    }
    assert!(got < 100, "the buffer held only a few: {got}");
    assert_eq!(rb.drops_seen(), 0, "queued before any drop: no count yet");
    tx.send_to(b"after", to).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rb.recv_batch(&rx, Some(Duration::from_millis(100))).unwrap() == 0 {
        assert!(Instant::now() < deadline, "the last datagram did not arrive");
    }
    assert_eq!(rb.datagram(0).data, b"after");
    assert_eq!(rb.drops_seen(), 200 - got);
    assert_eq!(netio::counters::socket_drops(&rx), Some(200 - got));
}

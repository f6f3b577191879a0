//! Buffer sizing reads back what the kernel granted and warns when it was capped.

// unsafe: a raw syscall the test checks against; std has none.
#![allow(unsafe_code)]

use std::net::SocketAddr;

use netio::{bind_udp, connect_udp, size_buffers, BufferGrant, BufferRequest};
use socket2::SockRef;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn modest_request_is_met() {
    let (sock, g) = bind_udp(localhost(), BufferRequest::new(256 << 10, 256 << 10)).unwrap();
    assert_eq!((g.requested_rcv, g.requested_snd), (256 << 10, 256 << 10));
    assert!(g.granted_rcv >= 256 << 10, "{g:?}");
    assert!(g.granted_snd >= 256 << 10, "{g:?}");
    assert!(g.usable_rcv() >= 256 << 10, "{g:?}");
    assert!(g.warnings.is_empty(), "{g:?}");
    assert!(sock.local_addr().unwrap().port() > 0);
}

#[test]
fn huge_request_is_read_back_and_warned_if_capped() {
    let (sock, g) = bind_udp(localhost(), BufferRequest::new(64 << 20, 64 << 20)).unwrap();
    eprintln!("{g:#?}");
    assert_eq!(g.requested_rcv, 64 << 20);
    // The figures are the kernel's, read back after setting.
    let s = SockRef::from(&sock);
    assert_eq!(g.granted_rcv, s.recv_buffer_size().unwrap());
    assert_eq!(g.granted_snd, s.send_buffer_size().unwrap());
    for (granted, forced, knob) in [
        (g.granted_rcv, g.forced_rcv, "net.core.rmem_max"),
        (g.granted_snd, g.forced_snd, "net.core.wmem_max"),
    ] {
        if granted >= 2 * (64 << 20) {
            // Met: as root via SO_*BUFFORCE, or because the sysctl allows it.
            assert!(!g.warnings.iter().any(|w| w.contains(knob)), "{g:?}");
        } else {
            assert!(!forced);
            assert!(
                g.warnings.iter().any(|w| w.contains(knob) && w.contains("sysctl -w")),
                "{g:?}"
            );
        }
    }
}

#[test]
fn connect_udp_connects_and_sizes() {
    let (rx, _) = bind_udp(localhost(), BufferRequest::default()).unwrap();
    let (tx, g) = connect_udp(localhost(), rx.local_addr().unwrap(), BufferRequest::new(0, 1 << 20)).unwrap();
    assert_eq!(tx.peer_addr().unwrap(), rx.local_addr().unwrap());
    assert_eq!(g.requested_rcv, 0);
    assert!(g.granted_rcv > 0);
    assert!(g.granted_snd >= 1 << 20);
    tx.send(b"x").unwrap();
    let mut buf = [0u8; 4];
    rx.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    assert_eq!(rx.recv(&mut buf).unwrap(), 1);
}

#[test]
fn existing_sockets_can_be_sized_and_grants_serialize() {
    let s = std::net::UdpSocket::bind(localhost()).unwrap();
    let g = size_buffers(&s, BufferRequest::new(300_000, 0)).unwrap();
    assert!(g.granted_rcv >= 300_000);
    fn serde_roundtrip<T: serde::Serialize + for<'de> serde::Deserialize<'de>>(_: &T) {}
    serde_roundtrip::<BufferGrant>(&g);
}

/// Drop every effective capability of the calling thread, keeping the permitted set
/// (capabilities are per thread, capget(2)/capset(2)). Returns whether it worked.
fn drop_effective_caps_of_this_thread() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut h = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: v3 header and two data words, as capget(2)/capset(2) require; pid 0 is this thread.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) != 0 {
            return false;
        }
        for x in &mut d {
            x.effective = 0;
        }
        libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) == 0
    }
}

#[test]
fn capped_request_without_privilege_warns() {
    // Run in a thread without CAP_NET_ADMIN so SO_RCVBUFFORCE is refused even when the tests run
    // as root; the rest of the test process keeps its capabilities.
    let g = std::thread::spawn(|| {
        if !drop_effective_caps_of_this_thread() {
            return None;
        }
        Some(bind_udp(localhost(), BufferRequest::new(64 << 20, 0)).unwrap().1)
    })
    .join()
    .unwrap();
    let Some(g) = g else {
        eprintln!("SKIP: cannot drop capabilities of a thread here");
        return;
    };
    eprintln!("{g:#?}");
    match g.rmem_max {
        Some(max) if max < 64 << 20 => {
            assert_eq!(g.granted_rcv, 2 * max, "capped at rmem_max, reported doubled");
            assert!(!g.forced_rcv);
            assert_eq!(g.warnings.len(), 1, "{g:?}");
            let w = &g.warnings[0];
            assert!(w.starts_with(&format!(
                "receive buffer {} requested, kernel granted {} (net.core.rmem_max={max}",
                64 << 20,
                2 * max
            )));
            assert!(w.contains("sysctl -w net.core.rmem_max=67108864"), "{w}");
        }
        _ => eprintln!("SKIP: rmem_max is unknown or already ≥ 64 MiB, nothing is capped"),
    }
}

#[test]
fn path_mtu_of_a_connected_loopback_socket() {
    let (sock, _) = netio::socket::bind_udp("127.0.0.1:0".parse().unwrap(), netio::BufferRequest::default()).unwrap();
    assert_eq!(netio::socket::path_mtu(&sock), None, "not connected yet");
    sock.connect("127.0.0.1:9").unwrap();
    let lo = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap();
    // An IP packet is at most 65 535 bytes, whatever the device MTU (lo: 65 536).
    let lo: usize = lo.trim().parse().unwrap();
    assert_eq!(netio::socket::path_mtu(&sock), Some(lo.min(65_535)));
}

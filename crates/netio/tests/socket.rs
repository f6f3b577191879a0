//! Buffer sizing reads back what the kernel granted.

use netio::socket::{bind_udp, BufferRequest};

#[test]
fn modest_request_is_met() {
    let (sock, g) = bind_udp(
        "127.0.0.1:0".parse().unwrap(),
        BufferRequest {
            recv: 256 << 10,
            send: 256 << 10,
        },
    )
    .unwrap();
    assert!(g.granted_recv >= 256 << 10, "{g:?}");
    assert!(g.granted_send >= 256 << 10, "{g:?}");
    assert!(g.warnings.is_empty(), "{g:?}");
    assert!(sock.local_addr().unwrap().port() > 0);
}

#[test]
fn huge_request_is_reported_as_granted_or_warned() {
    let (_sock, g) = bind_udp(
        "127.0.0.1:0".parse().unwrap(),
        BufferRequest {
            recv: 64 << 20,
            send: 0,
        },
    )
    .unwrap();
    assert_eq!(g.requested_recv, 64 << 20);
    // Either the kernel granted it (root: SO_RCVBUFFORCE) or we say it did not.
    assert!(
        g.granted_recv >= 64 << 20 || g.warnings.iter().any(|w| w.contains("rmem_max")),
        "{g:?}"
    );
}

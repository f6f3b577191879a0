//! `bind_listen` on a multicast group over a real link: two network namespaces joined by a veth
//! pair, a plain socket in one sending to 239.1.2.3, sockets bound with `bind_listen` in the
//! other receiving it. Needs root and iproute2's `ip netns`; skipped (passing, saying why)
//! without them. The namespaces are deleted by a guard, whatever the test does.

// unsafe: geteuid(2) and setns(2): a namespace of its own for multicast; std has neither.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use netio::{bind_listen, BufferRequest, ListenSpec};

const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 89, 0, 1);
const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 89, 0, 2);
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

/// Why namespaces cannot be made here, or `None`.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (creating network namespaces needs CAP_SYS_ADMIN)".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`ip netns` fails: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("iproute2 `ip` is not available: {e}")),
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr).trim()
    );
}

/// Two namespaces A and B joined by a veth pair (A 10.89.0.1/24 on `mca`, B 10.89.0.2/24 on
/// `mcb`), with multicast routed over it on both sides; deleted on drop.
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn new() -> Pair {
        let pid = std::process::id();
        // The guard exists before the first namespace does, so a failed step still cleans up.
        let pair = Pair {
            a: format!("evlbi-mc-{pid}-a"),
            b: format!("evlbi-mc-{pid}-b"),
        };
        let (a, b) = (pair.a.as_str(), pair.b.as_str());
        ip(&["netns", "add", a]);
        ip(&["netns", "add", b]);
        // The veth pair is made inside A with its peer in B: no names in the host's namespace.
        ip(&[
            "-n", a, "link", "add", "mca", "type", "veth", "peer", "name", "mcb", "netns", b,
        ]);
        for (ns, dev, addr) in [(a, "mca", A_ADDR), (b, "mcb", B_ADDR)] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "route", "add", "224.0.0.0/4", "dev", dev]);
        }
        pair
    }

    /// Run `f` on a thread inside namespace `ns`: the sockets it makes live there.
    fn inside<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{ns}");
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("open the namespace");
            // SAFETY: setns(2) on an open namespace descriptor; it moves only this thread.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in the namespace")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            // A namespace never made fails to delete: nothing to undo then.
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
        }
    }
}

/// What each receiver got, by payload kind ("mc", "uni", "other").
type Got = Vec<BTreeMap<String, u64>>;

fn read_all(receivers: &[UdpSocket], got: &mut Got) {
    let mut buf = [0u8; 256];
    for (r, g) in receivers.iter().zip(got.iter_mut()) {
        // Non-blocking: bounded by what is queued.
        while let Ok(n) = r.recv(&mut buf) {
            let text = String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).to_string();
            let kind = text.split('-').next().unwrap_or("").to_string();
            *g.entry(kind).or_insert(0) += 1;
        }
    }
}

#[test]
fn a_group_sent_from_one_namespace_arrives_at_every_listener_in_the_other() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let pair = Pair::new();
    // Three receivers share the group and port (SO_REUSEADDR): joined by the interface's
    // address, by its name, and by route (no %).
    let receivers: Vec<UdpSocket> = Pair::inside(&pair.b, || {
        let first: ListenSpec = format!("{GROUP}@0%{B_ADDR}").parse().expect("spec");
        let (r1, _) = bind_listen(&first, BufferRequest::new(1 << 20, 0)).expect("bind and join by address");
        let port = r1.local_addr().expect("local address").port();
        let mut all = vec![r1];
        for spec in [format!("{GROUP}@{port}%mcb"), format!("{GROUP}@{port}")] {
            let spec: ListenSpec = spec.parse().expect("spec");
            let (r, _) = bind_listen(&spec, BufferRequest::default()).unwrap_or_else(|e| panic!("{spec}: {e}"));
            all.push(r);
        }
        all
    });
    let port = receivers[0].local_addr().expect("local address").port();
    for r in &receivers {
        assert_eq!(r.local_addr().expect("local address"), SocketAddr::from((GROUP, port)));
        r.set_nonblocking(true).expect("non-blocking");
    }
    let sender = Pair::inside(&pair.a, || {
        let s = UdpSocket::bind((A_ADDR, 0)).expect("bind the sender");
        s.set_multicast_ttl_v4(1).expect("TTL");
        socket2::SockRef::from(&s)
            .set_multicast_if_v4(&A_ADDR)
            .expect("IP_MULTICAST_IF");
        s
    });
    // Send rounds until every receiver has 20 group datagrams (the veth may take a moment to
    // carry), at most 500 rounds or 10 s. Each round also sends to the same port unicast and to
    // another group, which no receiver may get.
    let mut got: Got = vec![BTreeMap::new(); receivers.len()];
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0..500 {
        sender
            .send_to(format!("mc-{i}").as_bytes(), (GROUP, port))
            .expect("send to the group");
        sender
            .send_to(format!("uni-{i}").as_bytes(), (B_ADDR, port))
            .expect("send unicast");
        let other = Ipv4Addr::new(239, 1, 2, 4);
        sender
            .send_to(format!("other-{i}").as_bytes(), (other, port))
            .expect("send to another group");
        std::thread::sleep(Duration::from_millis(10));
        read_all(&receivers, &mut got);
        if got.iter().all(|g| g.get("mc").copied().unwrap_or(0) >= 20) || Instant::now() > deadline {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    read_all(&receivers, &mut got);
    for (i, g) in got.iter().enumerate() {
        assert!(g.get("mc").copied().unwrap_or(0) >= 20, "receiver {i} got {g:?}");
        assert_eq!(
            g.get("uni"),
            None,
            "receiver {i}, bound to the group, got unicast: {g:?}"
        );
        assert_eq!(g.get("other"), None, "receiver {i} got another group: {g:?}");
    }
    // Every receiver saw the same datagrams: the group is shared, not load-balanced.
    let counts: Vec<u64> = got.iter().map(|g| g.get("mc").copied().unwrap_or(0)).collect();
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
    drop(receivers);
    drop(pair);
}

#[test]
fn an_unknown_interface_is_an_error_naming_it() {
    let spec: ListenSpec = "239.1.2.3@0%nosuchif0".parse().expect("spec");
    let e = bind_listen(&spec, BufferRequest::default()).expect_err("no such interface");
    assert!(e.to_string().contains("find interface nosuchif0"), "{e}");
}

#[test]
fn a_unicast_spec_binds_like_bind_udp() {
    let spec: ListenSpec = "127.0.0.1:0".parse().expect("spec");
    let (r, grant) = bind_listen(&spec, BufferRequest::new(1 << 20, 0)).expect("bind");
    assert!(grant.granted_rcv > 0);
    let to = r.local_addr().expect("local address");
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind the sender");
    s.send_to(b"hello", to).expect("send");
    r.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut buf = [0u8; 16];
    let n = r.recv(&mut buf).expect("the datagram arrives");
    assert_eq!(buf.get(..n), Some(&b"hello"[..]));
}

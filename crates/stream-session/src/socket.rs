//! The sockets of a stream session and the ids its datagrams carry: the sending socket
//! ([`Wire`]: connected, non-blocking, UDP GSO, what comes back read in bounded turns) of the
//! sender and the relay, the input sockets of the receiver and the relay ([`bind_inputs`]), and
//! the native prefix's session id and the first sequence number of a framing.

use std::io::IoSlice;
use std::net::{SocketAddr, UdpSocket};

use netio::{bind_udp, io_err, BufferRequest};
use stream::sender::Transmit;
use stream::SeqFormat;

use crate::{ConfigError, StreamSessionError};

/// Send socket buffer a sender or relay asks for: 8 MiB holds 16 ms at 4 Gb/s, room for a GSO
/// burst and the repeats of a NAK beside the paced stream.
pub const DEFAULT_SNDBUF: usize = 8 << 20;

/// Receive socket buffer a receiver or relay asks for per input: 64 MiB holds 0.13 s at 4 Gb/s
/// while the loop is held up (a writer stall, a descheduled thread).
pub const DEFAULT_RCVBUF: usize = 64 << 20;

/// Most datagrams of one gathered transmit (`burst` is at most 64).
const MAX_GATHERED: usize = 64;

/// Datagrams read back from the destination per call (calls come every millisecond): a
/// receiver sends one NAK per station per millisecond at most, a jive5ab a keep-alive every N
/// datagrams.
const RETURNS_PER_CALL: usize = 256;

/// The sending socket and its counters.
pub(crate) struct Wire {
    sock: UdpSocket,
    to: SocketAddr,
    local: SocketAddr,
    path_mtu: Option<usize>,
    ctl: Vec<u8>,
    would_block: u64,
}

impl Wire {
    /// A non-blocking socket bound to a free port, connected to `to` (so GSO can be used and
    /// ICMP errors are reported) with a `sndbuf` send buffer.
    pub(crate) fn open(to: SocketAddr, sndbuf: usize) -> Result<Wire, StreamSessionError> {
        let bind = if to.is_ipv4() {
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        };
        let (sock, _grant) = bind_udp(
            bind,
            BufferRequest {
                rcv: 1 << 20,
                snd: sndbuf,
            },
        )?;
        sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
        sock.connect(to).map_err(io_err(format!("connect to {to}")))?;
        let path_mtu = netio::socket::path_mtu(&sock);
        let local = sock
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        Ok(Wire {
            sock,
            to,
            local,
            path_mtu,
            ctl: vec![0u8; 2048],
            would_block: 0,
        })
    }

    /// Where it sends.
    pub(crate) fn to(&self) -> SocketAddr {
        self.to
    }

    /// The local address it was bound to.
    pub(crate) fn local(&self) -> SocketAddr {
        self.local
    }

    /// The path MTU the kernel knew when it was connected.
    pub(crate) fn path_mtu(&self) -> Option<usize> {
        self.path_mtu
    }

    /// Times a send found the socket buffer full (and was retried).
    pub(crate) fn would_block(&self) -> u64 {
        self.would_block
    }

    /// Hand the datagrams waiting on the socket (NAKs, keep-alives) to `f`, at most
    /// [`RETURNS_PER_CALL`]: a flood of them (forged from the receiver's address) must not
    /// keep the loop from sending; the rest wait in the socket buffer or are dropped there.
    pub(crate) fn read_returns(&mut self, mut f: impl FnMut(&[u8])) {
        for _ in 0..RETURNS_PER_CALL {
            let Ok((n, _from)) = self.sock.recv_from(&mut self.ctl) else {
                return;
            };
            f(self.ctl.get(..n).unwrap_or_default());
        }
    }

    /// Hand a transmit to the kernel: one datagram with send(2), or equal-sized datagrams with
    /// one UDP GSO call where the kernel has it (UDP_SEGMENT, Linux ≥ 4.18), else one sendmmsg.
    pub(crate) fn send(&mut self, t: &Transmit<'_>) -> Result<(), StreamSessionError> {
        let (sock, to) = (&self.sock, self.to);
        if !t.frames.is_empty() {
            // Gathered: each datagram's prefix and its frame where it lies (a relay's receive
            // buffer), two iovecs per datagram in one UDP GSO sendmsg — no copy in user space.
            let mut parts = [IoSlice::new(&[]); 2 * MAX_GATHERED];
            let mut all = t.parts().peekable();
            while all.peek().is_some() {
                let mut n = 0;
                for (prefix, frame) in all.by_ref().take(MAX_GATHERED) {
                    parts[n] = IoSlice::new(prefix);
                    parts[n + 1] = IoSlice::new(frame);
                    n += 2;
                }
                let seg = t
                    .segment_size
                    .unwrap_or_else(|| parts.iter().take(2).map(|p| p.len()).sum());
                send_retrying(to, &mut self.would_block, || {
                    netio::gso::send_gso_parts(sock, &parts[..n], 2, seg).map(drop)
                })?;
            }
            return Ok(());
        }
        match t.segment_size {
            None => send_retrying(to, &mut self.would_block, || sock.send_to(t.contents, to).map(drop)),
            Some(seg) => send_retrying(to, &mut self.would_block, || {
                netio::gso::send_gso(sock, t.contents, seg).map(drop)
            }),
        }
    }
}

/// Retry a send while the socket buffer is full; a refused datagram (ICMP from a receiver not
/// (yet) listening) is gone, like any other loss on the path.
fn send_retrying(
    to: SocketAddr,
    would_block: &mut u64,
    mut send: impl FnMut() -> std::io::Result<()>,
) -> Result<(), StreamSessionError> {
    loop {
        match send() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                *would_block += 1;
                std::hint::spin_loop();
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(io_err(format!("send to {to}"))(e).into()),
        }
    }
}

/// Most addresses a receiver or relay listens on (one thread reads them all in turn).
pub const MAX_LISTEN: usize = 64;

/// A receiver or relay listens on 1 to [`MAX_LISTEN`] addresses, each port once: two sockets on
/// one port either fail to bind (unicast) or, for a group joined twice (SO_REUSEADDR), both get
/// every datagram and each frame would be taken twice. Port 0 (a free port picked at bind) may
/// repeat. The one rule both `validate()`s and the daemon's `net_port` apply.
pub fn check_listen(listen: &[netio::ListenSpec]) -> Result<(), ConfigError> {
    if listen.is_empty() || listen.len() > MAX_LISTEN {
        return Err(ConfigError::ListenCount { count: listen.len() });
    }
    for (i, b) in listen.iter().enumerate() {
        if listen[..i].iter().any(|a| same_port(a, b)) {
            return Err(ConfigError::ListenTwice {
                spec: b.to_string(),
                index: i,
            });
        }
    }
    Ok(())
}

/// Whether two listen specs take the same (non-zero) port: the same address or group, or
/// unicast where either is every local address of the family.
fn same_port(a: &netio::ListenSpec, b: &netio::ListenSpec) -> bool {
    use netio::ListenSpec as L;
    if a.port() == 0 || a.port() != b.port() {
        return false;
    }
    match (a, b) {
        (L::Unicast(x), L::Unicast(y)) => {
            x.ip() == y.ip() || (x.is_ipv4() == y.is_ipv4() && (x.ip().is_unspecified() || y.ip().is_unspecified()))
        }
        (L::Multicast { group: g, .. }, L::Multicast { group: h, .. }) => g == h,
        _ => false,
    }
}

/// The input sockets of a receiver or relay, one per listen spec, each with its receive buffer
/// sized before the bind (nothing that comes is refused for want of room) and the kernel's
/// per-datagram drop count switched on before any datagram queues (the count rides on
/// datagrams queued after a drop); what the kernel granted for each; and whether every socket
/// carries that count (old kernels do not: /proc/net/udp still gives it).
pub(crate) fn bind_inputs(
    listen: &[netio::ListenSpec],
    rcvbuf: usize,
) -> Result<(Vec<UdpSocket>, Vec<netio::BufferGrant>, bool), StreamSessionError> {
    let (mut socks, mut grants) = (Vec::new(), Vec::new());
    let mut drop_count = true;
    for spec in listen {
        let (sock, grant) = netio::bind_listen(spec, BufferRequest { rcv: rcvbuf, snd: 0 })?;
        drop_count &= netio::enable_rx_drop_counter(&sock).is_ok();
        socks.push(sock);
        grants.push(grant);
    }
    Ok((socks, grants, drop_count))
}

/// A sender session for the native prefix: differs between runs (even two started in the same
/// nanosecond, by the process id), never 0 (which means "not given"). It tells a receiver that a
/// sender restarted; it is not a secret, so nothing stronger than a mix of clock and pid.
pub(crate) fn new_session() -> u16 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // splitmix64 finaliser: every input bit reaches the 16 bits kept.
    let mut z = t ^ (u64::from(std::process::id()) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    match (z ^ (z >> 16) ^ (z >> 32) ^ (z >> 48)) as u16 {
        0 => 1,
        s => s,
    }
}

/// jive5ab starts its udps sequence at a random value; so do we in that framing (48 bits of the
/// wall clock), native and bare framing at 0.
pub(crate) fn first_seq(format: SeqFormat) -> u64 {
    if format != SeqFormat::Jive5ab {
        return 0;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        & 0x0000_ffff_ffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_or_relay_listens_on_1_to_64_addresses() {
        let one: netio::ListenSpec = "127.0.0.1:0".parse().unwrap();
        assert_eq!(check_listen(&[]), Err(ConfigError::ListenCount { count: 0 }));
        assert_eq!(check_listen(&vec![one.clone(); 64]), Ok(()));
        assert_eq!(
            check_listen(&vec![one; 65]),
            Err(ConfigError::ListenCount { count: 65 })
        );
    }

    #[test]
    fn each_port_is_listened_on_once() {
        let specs = |l: &[&str]| l.iter().map(|s| s.parse().unwrap()).collect::<Vec<netio::ListenSpec>>();
        let twice = |l: &[&str]| check_listen(&specs(l));
        assert_eq!(twice(&["127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.2:5000"]), Ok(()));
        assert_eq!(twice(&["127.0.0.1:0", "127.0.0.1:0"]), Ok(()));
        assert_eq!(twice(&["239.1.2.3@5000", "239.1.2.4@5000"]), Ok(()));
        for (l, second) in [
            (&["127.0.0.1:5000", "127.0.0.1:5000"][..], "127.0.0.1:5000"),
            (&["0.0.0.0:5000", "127.0.0.1:5001", "127.0.0.1:5000"], "127.0.0.1:5000"),
            (&["127.0.0.1:5000", "5000"], "0.0.0.0:5000"),
            (&["[::1]:5000", "[::]:5000"], "[::]:5000"),
            (&["239.1.2.3@5000", "239.1.2.3@5000%lo"], "239.1.2.3@5000%lo"),
        ] {
            assert_eq!(
                twice(l),
                Err(ConfigError::ListenTwice {
                    spec: second.into(),
                    index: l.len() - 1
                }),
                "{l:?}"
            );
        }
    }
}

//! UDP sockets with sized buffers. At 4 Gb/s a 208 KiB default receive buffer holds 0.4 ms of
//! data: one scheduling hiccup and the kernel drops (Udp RcvbufErrors). We ask for what the rate
//! needs, force it past `net.core.rmem_max`/`wmem_max` when privileged (SO_RCVBUFFORCE /
//! SO_SNDBUFFORCE, socket(7), need CAP_NET_ADMIN), and report what the kernel actually granted so
//! a cap is never silent.
//!
//! Linux doubles the value given to SO_RCVBUF/SO_SNDBUF to leave room for its own bookkeeping
//! (struct sk_buff overhead) and getsockopt(2) reports the doubled value (socket(7)): a request of
//! N bytes that was met reads back as 2·N, and roughly N bytes of payload fit. A request capped at
//! `rmem_max` reads back as 2·rmem_max.

pub use hostcounters::BufferGrant;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use thiserror::Error;

use crate::sys;

/// Socket setup errors, saying what was being done.
#[derive(Debug, Error)]
pub enum NetioError {
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing, e.g. "bind UDP 0.0.0.0:46227".
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetioError {
    let what = what.into();
    move |source| NetioError::Io { what, source }
}

/// Buffer sizes to ask for, in bytes of payload (0 = leave the kernel default). Size the receive
/// buffer for the longest stall to ride out: rate/8 · stall, e.g. 4.096 Gb/s · 50 ms ≈ 25.6 MB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferRequest {
    /// SO_RCVBUF request.
    pub rcv: usize,
    /// SO_SNDBUF request.
    pub snd: usize,
}

impl BufferRequest {
    /// Ask for `rcv` bytes of receive and `snd` bytes of send buffer.
    pub fn new(rcv: usize, snd: usize) -> BufferRequest {
        BufferRequest { rcv, snd }
    }
}

/// What the kernel reports for a request of `req` that was met in full: it clamps the value to
/// INT_MAX/2 and doubles it (net/core/sock.c, sk_setsockopt SO_RCVBUF).
fn full_grant(req: usize) -> usize {
    req.min(i32::MAX as usize / 2) * 2
}

/// The warning for a buffer the kernel capped. `dir` is "receive" or "send", `knob` "rmem_max"
/// or "wmem_max"; `force_note` says why SO_*BUFFORCE did not help, if it was tried.
fn capped_warning(dir: &str, knob: &str, req: usize, got: usize, max: Option<usize>, force_note: &str) -> String {
    let max = max.map_or_else(|| "?".to_string(), |m| m.to_string());
    format!(
        "{dir} buffer {req} requested, kernel granted {got} (net.core.{knob}={max}; Linux reports twice the \
         usable size, so {} bytes fit){force_note}; raise it with sysctl -w net.core.{knob}={req}",
        got / 2
    )
}

fn read_sysctl(path: &str) -> Option<usize> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Outcome of sizing one buffer.
struct Sized {
    granted: usize,
    forced: bool,
    force_note: &'static str,
}

/// Set one buffer to `req` bytes; if the kernel capped it, try the FORCE variant (socket(7):
/// SO_RCVBUFFORCE / SO_SNDBUFFORCE ignore rmem_max/wmem_max but need CAP_NET_ADMIN).
fn size_one(sock: &SockRef<'_>, req: usize, rcv: bool) -> Result<Sized, NetioError> {
    let (name, force, force_name) = if rcv {
        ("SO_RCVBUF", libc::SO_RCVBUFFORCE, "SO_RCVBUFFORCE")
    } else {
        ("SO_SNDBUF", libc::SO_SNDBUFFORCE, "SO_SNDBUFFORCE")
    };
    let read = |s: &SockRef<'_>| {
        if rcv {
            s.recv_buffer_size()
        } else {
            s.send_buffer_size()
        }
        .map_err(io(format!("read {name}")))
    };
    if req == 0 {
        return Ok(Sized {
            granted: read(sock)?,
            forced: false,
            force_note: "",
        });
    }
    if rcv {
        sock.set_recv_buffer_size(req)
    } else {
        sock.set_send_buffer_size(req)
    }
    .map_err(io(format!("set {name} to {req}")))?;
    let granted = read(sock)?;
    if granted >= full_grant(req) {
        return Ok(Sized {
            granted,
            forced: false,
            force_note: "",
        });
    }
    let value = libc::c_int::try_from(req).unwrap_or(libc::c_int::MAX);
    match sys::set_int(sock.as_raw_fd(), libc::SOL_SOCKET, force, value) {
        Ok(()) => {
            let granted = read(sock)?;
            Ok(Sized {
                granted,
                forced: granted >= full_grant(req),
                force_note: "",
            })
        }
        Err(e) if sys::is_errno(&e, libc::EPERM) => Ok(Sized {
            granted,
            forced: false,
            force_note: if rcv {
                " (SO_RCVBUFFORCE refused: needs root/CAP_NET_ADMIN)"
            } else {
                " (SO_SNDBUFFORCE refused: needs root/CAP_NET_ADMIN)"
            },
        }),
        Err(e) => Err(NetioError::Io {
            what: format!("set {force_name} to {req}"),
            source: e,
        }),
    }
}

/// Size the buffers of an existing socket (any UDP socket, e.g. one made by std) and report what
/// the kernel granted.
pub fn size_buffers<S: AsFd>(sock: &S, buffers: BufferRequest) -> Result<BufferGrant, NetioError> {
    let sock = SockRef::from(sock);
    let rmem_max = read_sysctl("/proc/sys/net/core/rmem_max");
    let wmem_max = read_sysctl("/proc/sys/net/core/wmem_max");
    let r = size_one(&sock, buffers.rcv, true)?;
    let s = size_one(&sock, buffers.snd, false)?;
    let mut warnings = Vec::new();
    if buffers.rcv > 0 && r.granted < full_grant(buffers.rcv) {
        warnings.push(capped_warning(
            "receive",
            "rmem_max",
            buffers.rcv,
            r.granted,
            rmem_max,
            r.force_note,
        ));
    }
    if buffers.snd > 0 && s.granted < full_grant(buffers.snd) {
        warnings.push(capped_warning(
            "send",
            "wmem_max",
            buffers.snd,
            s.granted,
            wmem_max,
            s.force_note,
        ));
    }
    Ok(BufferGrant {
        requested_rcv: buffers.rcv,
        granted_rcv: r.granted,
        requested_snd: buffers.snd,
        granted_snd: s.granted,
        rmem_max,
        wmem_max,
        forced_rcv: r.forced,
        forced_snd: s.forced,
        warnings,
    })
}

fn new_udp(local: SocketAddr, buffers: BufferRequest) -> Result<(Socket, BufferGrant), NetioError> {
    let sock =
        Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP)).map_err(io("create UDP socket"))?;
    // Buffers before bind: a receive buffer must be large before the first burst arrives.
    let grant = size_buffers(&sock, buffers)?;
    sock.bind(&local.into()).map_err(io(format!("bind UDP {local}")))?;
    Ok((sock, grant))
}

/// A UDP socket bound to `addr` (port 0: any free port) with the requested buffers, and what the
/// kernel granted.
pub fn bind_udp(addr: SocketAddr, buffers: BufferRequest) -> Result<(UdpSocket, BufferGrant), NetioError> {
    let (sock, grant) = new_udp(addr, buffers)?;
    Ok((sock.into(), grant))
}

/// A UDP socket bound to `local` and connected to `remote` (so plain `send`, sendmmsg(2) without
/// addresses and UDP GSO work, and datagrams from other sources are filtered by the kernel), with
/// the requested buffers.
pub fn connect_udp(
    local: SocketAddr,
    remote: SocketAddr,
    buffers: BufferRequest,
) -> Result<(UdpSocket, BufferGrant), NetioError> {
    let (sock, grant) = new_udp(local, buffers)?;
    sock.connect(&remote.into())
        .map_err(io(format!("connect UDP {local} to {remote}")))?;
    Ok((sock.into(), grant))
}

/// The path MTU the kernel knows for a connected socket's route (IP_MTU / IPV6_MTU, ip(7)):
/// a datagram larger than this minus 28 (IPv4 + UDP headers) is fragmented, and under loss
/// fragment reassembly collapses (every lost fragment wastes the whole datagram and holds
/// reassembly memory). `None` if the socket is not connected or the kernel does not say.
pub fn path_mtu(sock: &UdpSocket) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let v4 = sock.peer_addr().ok()?.is_ipv4();
    let r = if v4 {
        crate::sys::get_int(fd, libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        crate::sys::get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    r.ok().and_then(|m| usize::try_from(m).ok()).filter(|m| *m > 0)
}

/// Wait up to `timeout` until one of `socks` (at most 64) has a datagram (or an error) queued:
/// a bit per such socket, 0 when none did in time. For a receiver with several ports in one
/// thread.
pub fn wait_any_readable(socks: &[&UdpSocket], timeout: std::time::Duration) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let fds: Vec<_> = socks.iter().map(|s| s.as_raw_fd()).collect();
    crate::sys::wait_any_readable(&fds, timeout)
}

/// Like [`wait_any_readable`] for any descriptors (at most 64): a UDP data socket beside a TCP
/// control connection, in a loop that serves both.
pub fn wait_fds_readable(fds: &[std::os::fd::BorrowedFd<'_>], timeout: std::time::Duration) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
    crate::sys::wait_any_readable(&raw, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_names_the_sysctl_and_the_figures() {
        let w = capped_warning("receive", "rmem_max", 4_194_304, 425_984, Some(212_992), "");
        assert!(w.starts_with("receive buffer 4194304 requested, kernel granted 425984 (net.core.rmem_max=212992"));
        assert!(w.ends_with("raise it with sysctl -w net.core.rmem_max=4194304"), "{w}");
        assert!(w.contains("212992 bytes fit"));
        let w = capped_warning("send", "wmem_max", 10, 4, None, " (x)");
        assert!(w.contains("net.core.wmem_max=?") && w.contains("(x)"));
    }

    #[test]
    fn full_grant_is_doubled_and_clamped() {
        assert_eq!(full_grant(256 << 10), 512 << 10);
        assert_eq!(full_grant(usize::MAX), (i32::MAX as usize / 2) * 2);
    }
}

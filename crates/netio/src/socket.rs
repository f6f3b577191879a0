//! UDP sockets with sized buffers. At 4 Gb/s a 200 KB default receive buffer holds 0.4 ms of data:
//! one scheduling hiccup and the kernel drops (RcvbufErrors). We ask for what the rate needs,
//! force it past `net.core.rmem_max` when root (SO_RCVBUFFORCE, socket(7)), and report what the
//! kernel actually granted so a cap is never silent.

use std::net::{SocketAddr, UdpSocket};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};
use thiserror::Error;

/// Socket errors, with what was being done.
#[derive(Debug, Error)]
pub enum NetioError {
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetioError {
    let what = what.into();
    move |source| NetioError::Io { what, source }
}

/// Buffer sizes to ask for, bytes (0 = leave the kernel default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferRequest {
    /// SO_RCVBUF.
    pub recv: usize,
    /// SO_SNDBUF.
    pub send: usize,
}

/// What the kernel granted. Linux reports (and allocates) twice the requested size to account for
/// its bookkeeping (socket(7)), so `granted ≥ requested` means the request was met.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BufferGrant {
    /// Receive buffer asked for.
    pub requested_recv: usize,
    /// Receive buffer reported by the kernel.
    pub granted_recv: usize,
    /// Send buffer asked for.
    pub requested_send: usize,
    /// Send buffer reported by the kernel.
    pub granted_send: usize,
    /// net.core.rmem_max, if readable.
    pub rmem_max: Option<usize>,
    /// net.core.wmem_max, if readable.
    pub wmem_max: Option<usize>,
    /// One line per buffer that was capped, with the sysctl that lifts the cap.
    pub warnings: Vec<String>,
}

fn sysctl(path: &str) -> Option<usize> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Bind a UDP socket to `addr` with the requested buffers.
pub fn bind_udp(addr: SocketAddr, buffers: BufferRequest) -> Result<(UdpSocket, BufferGrant), NetioError> {
    let sock =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(io("create UDP socket"))?;
    let mut grant = BufferGrant {
        requested_recv: buffers.recv,
        requested_send: buffers.send,
        rmem_max: sysctl("/proc/sys/net/core/rmem_max"),
        wmem_max: sysctl("/proc/sys/net/core/wmem_max"),
        ..BufferGrant::default()
    };
    if buffers.recv > 0 {
        set_buffer(&sock, buffers.recv, true);
    }
    if buffers.send > 0 {
        set_buffer(&sock, buffers.send, false);
    }
    grant.granted_recv = sock.recv_buffer_size().map_err(io("read SO_RCVBUF"))?;
    grant.granted_send = sock.send_buffer_size().map_err(io("read SO_SNDBUF"))?;
    for (what, req, got, max, knob) in [
        ("receive", buffers.recv, grant.granted_recv, grant.rmem_max, "rmem_max"),
        ("send", buffers.send, grant.granted_send, grant.wmem_max, "wmem_max"),
    ] {
        if req > 0 && got < req {
            grant.warnings.push(format!(
                "{what} buffer {req} bytes requested, kernel granted {got} (net.core.{knob}={}); \
                 raise it with: sysctl -w net.core.{knob}={}",
                max.map_or("?".to_string(), |m| m.to_string()),
                req
            ));
        }
    }
    sock.bind(&addr.into()).map_err(io(format!("bind UDP {addr}")))?;
    Ok((sock.into(), grant))
}

/// Set a buffer; past the sysctl cap try the FORCE variant (needs CAP_NET_ADMIN).
fn set_buffer(sock: &Socket, size: usize, recv: bool) {
    let _ = if recv {
        sock.set_recv_buffer_size(size)
    } else {
        sock.set_send_buffer_size(size)
    };
    let got = if recv {
        sock.recv_buffer_size()
    } else {
        sock.send_buffer_size()
    };
    if got.is_ok_and(|g| g >= size) {
        return;
    }
    let opt = if recv {
        libc::SO_RCVBUFFORCE
    } else {
        libc::SO_SNDBUFFORCE
    };
    let val = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: a plain setsockopt on a valid fd with a c_int argument of the right length.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(sock),
            libc::SOL_SOCKET,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

//! UDP GSO send (UDP_SEGMENT, udp(7), Linux ≥ 4.18): hand the kernel one large buffer and a
//! segment size, and it cuts the datagrams (in the NIC if it can). For unpaced bulk transfer this
//! replaces dozens of per-datagram traversals of the stack with one; it is not for paced sending,
//! because the segments of one call leave back to back.
//!
//! The segment size travels as a per-call SOL_UDP/UDP_SEGMENT cmsg (not the socket option), so
//! other sends on the socket stay unaffected. std and socket2 do not expose this, hence the libc
//! FFI here.

// unsafe: sendmsg(2) with a UDP_SEGMENT control message: std has no sendmsg.
#![allow(unsafe_code)]

use std::io::{self, IoSlice};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use crate::batch::SendBatch;
use crate::sys;

/// Most segments per GSO call (UDP_MAX_SEGMENTS in include/linux/udp.h: 64 before Linux 6.9's
/// raise to 128; we keep the portable value).
pub const GSO_MAX_SEGMENTS: usize = 64;

/// Largest UDP payload of one GSO call: the whole super-packet must fit an IPv4 datagram
/// (65535 − 20 IP − 8 UDP). Also safe for IPv6.
pub const GSO_MAX_PAYLOAD: usize = 65_507;

/// Whether the kernel knows UDP_SEGMENT (getsockopt succeeds, Linux ≥ 4.18). A device without
/// checksum offload can still refuse a GSO send (EIO); [`send_gso`] falls back then.
pub fn gso_supported(sock: &UdpSocket) -> bool {
    sys::get_int(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
}

/// What [`send_gso`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GsoSent {
    /// Datagrams (segments) sent.
    pub datagrams: usize,
    /// System calls made.
    pub syscalls: usize,
    /// Whether GSO was used; `false` when the kernel refused it and sendmmsg(2) was used instead.
    pub gso: bool,
}

/// Send `buf` on a connected socket as datagrams of `segment_size` bytes (the last may be
/// shorter), with UDP GSO where the kernel allows and one sendmmsg(2) batch per chunk otherwise.
/// Buffers longer than one GSO call allows ([`GSO_MAX_SEGMENTS`], [`GSO_MAX_PAYLOAD`]) are sent
/// in several calls. If a later call fails after some went, returns the count so far (as
/// [`SendBatch::send_batch`]); a failure before anything went is an `Err`.
pub fn send_gso(sock: &UdpSocket, buf: &[u8], segment_size: usize) -> io::Result<GsoSent> {
    if segment_size == 0 || segment_size > GSO_MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("GSO segment size {segment_size} outside 1..={GSO_MAX_PAYLOAD}"),
        ));
    }
    let per_call = (GSO_MAX_PAYLOAD / segment_size).min(GSO_MAX_SEGMENTS) * segment_size;
    let seg16 = u16::try_from(segment_size).unwrap_or(u16::MAX);
    let mut out = GsoSent {
        gso: true,
        ..GsoSent::default()
    };
    let mut fallback = SendBatch::new();
    for chunk in buf.chunks(per_call) {
        let segs = chunk.len().div_ceil(segment_size);
        let res = if out.gso {
            out.syscalls += 1;
            match send_one_gso(sock, &[IoSlice::new(chunk)], seg16) {
                Ok(()) => Ok(segs),
                // EIO: device cannot checksum-offload; EINVAL/ENOPROTOOPT/EOPNOTSUPP: kernel or
                // path refuses GSO. Fall back for this and the remaining chunks.
                Err(e)
                    if [libc::EIO, libc::EINVAL, libc::ENOPROTOOPT, libc::EOPNOTSUPP]
                        .iter()
                        .any(|&c| sys::is_errno(&e, c)) =>
                {
                    out.gso = false;
                    send_plain(&mut fallback, sock, chunk, segment_size, &mut out.syscalls)
                }
                Err(e) => Err(e),
            }
        } else {
            send_plain(&mut fallback, sock, chunk, segment_size, &mut out.syscalls)
        };
        if tally(&mut out, res, segs)? {
            break;
        }
    }
    Ok(out)
}

/// Send datagrams of `segment_size` bytes gathered from `parts` (a framing prefix and a frame,
/// then the next datagram's) on a connected socket, with UDP GSO in one sendmsg(2) per
/// [`GSO_MAX_SEGMENTS`] datagrams — the kernel reads the frames where they are, no copy into
/// one buffer. `parts` must add up to whole datagrams of `segment_size` bytes (the last may be
/// shorter) and each datagram's parts must not straddle two calls: pass `per_datagram` parts per
/// datagram. Where the kernel refuses GSO the datagrams are joined and sent by sendmmsg(2)
/// (one copy, as [`send_gso`] would have needed). Partial sends as for [`send_gso`].
pub fn send_gso_parts(
    sock: &UdpSocket,
    parts: &[IoSlice<'_>],
    per_datagram: usize,
    segment_size: usize,
) -> io::Result<GsoSent> {
    if segment_size == 0 || segment_size > GSO_MAX_PAYLOAD || per_datagram == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("GSO segment size {segment_size} outside 1..={GSO_MAX_PAYLOAD}"),
        ));
    }
    let per_call = (GSO_MAX_PAYLOAD / segment_size).clamp(1, GSO_MAX_SEGMENTS) * per_datagram;
    let seg16 = u16::try_from(segment_size).unwrap_or(u16::MAX);
    let mut out = GsoSent {
        gso: true,
        ..GsoSent::default()
    };
    for chunk in parts.chunks(per_call) {
        let segs = chunk.len().div_ceil(per_datagram);
        out.syscalls += 1;
        let res = match send_one_gso(sock, chunk, seg16) {
            Ok(()) => Ok(segs),
            Err(e)
                if [libc::EIO, libc::EINVAL, libc::ENOPROTOOPT, libc::EOPNOTSUPP]
                    .iter()
                    .any(|&c| sys::is_errno(&e, c)) =>
            {
                out.gso = false;
                let joined: Vec<u8> = chunk.iter().flat_map(|p| p.iter().copied()).collect();
                let mut fallback = SendBatch::new();
                send_plain(&mut fallback, sock, &joined, segment_size, &mut out.syscalls)
            }
            Err(e) => Err(e),
        };
        if tally(&mut out, res, segs)? {
            break;
        }
    }
    Ok(out)
}

/// Count one send call's datagrams in `out`; `Ok(true)` when the batch ends here: the call
/// sent fewer than its `segs`, or failed after earlier datagrams left (the error is reported
/// on the caller's next call).
fn tally(out: &mut GsoSent, res: io::Result<usize>, segs: usize) -> io::Result<bool> {
    match res {
        Ok(n) => {
            out.datagrams += n;
            Ok(n < segs)
        }
        Err(_) if out.datagrams > 0 => Ok(true),
        Err(e) => Err(e),
    }
}

fn send_plain(
    batch: &mut SendBatch,
    sock: &UdpSocket,
    chunk: &[u8],
    segment_size: usize,
    syscalls: &mut usize,
) -> io::Result<usize> {
    let before = batch.syscalls();
    let dgrams: Vec<&[u8]> = chunk.chunks(segment_size).collect();
    let r = batch.send_batch(sock, &dgrams);
    *syscalls += (batch.syscalls() - before) as usize;
    r
}

/// One sendmsg(2) of `chunk` (gathered from its parts) with a UDP_SEGMENT cmsg of `seg` bytes.
fn send_one_gso(sock: &UdpSocket, chunk: &[IoSlice<'_>], seg: u16) -> io::Result<()> {
    // Control buffer for one cmsg carrying a u16, 8-byte aligned as cmsghdr requires.
    let mut ctrl = [0u64; 4];
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as libc::c_uint) } as usize;
    debug_assert!(space <= std::mem::size_of_val(&ctrl));
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix (std's documented guarantee); the kernel only
    // reads through it.
    msg.msg_iov = chunk.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = chunk.len() as _;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds CMSG_SPACE(2) bytes, so the first header and its 2-byte
    // payload fit.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() {
            return Err(io::Error::other("no room for the UDP_SEGMENT cmsg"));
        }
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as libc::c_uint) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
    }
    loop {
        // SAFETY: `msg` points at the live iovecs (the caller's buffers, only read by the kernel)
        // and the control buffer filled above.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

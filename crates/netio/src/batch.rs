//! Batched datagram I/O: many datagrams per system call with recvmmsg(2) and sendmmsg(2), kernel
//! receive timestamps (SO_TIMESTAMPNS, socket(7)), the socket's own drop counter (SO_RXQ_OVFL)
//! and, opt-in, UDP GRO receive (UDP_GRO, udp(7), Linux ≥ 5.0) with the coalesced buffers split
//! back into datagrams.
//!
//! At 4 Gb/s of 8 KB frames a receiver handles 62 500 datagrams/s; one syscall per datagram costs
//! a core. std and socket2 offer neither the *mmsg calls nor control-message parsing, so this
//! module is a hand-written libc FFI layer: buffers, iovecs and `mmsghdr`s are laid out here and
//! the kernel's answers (lengths, `msg_flags`, cmsgs) are checked before use.

// unsafe: recvmmsg/sendmmsg and their control messages: std has no batched socket calls.
#![allow(unsafe_code)]

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::SockAddr;

use crate::sys;

/// Largest number of messages one recvmmsg/sendmmsg handles (the kernel clamps `vlen` to
/// UIO_MAXIOV).
pub const MAX_BATCH: usize = libc::UIO_MAXIOV as usize;

/// Receive buffer per message once GRO is on: the kernel coalesces at most 64 KiB (net/ipv4/
/// udp_offload.c, udp_gro_receive_segment).
pub const GRO_BUFFER: usize = 65_536;

/// Control-message space per message, in u64 words (8-byte aligned as cmsghdr requires): room for
/// SCM_TIMESTAMPNS (CMSG_SPACE(16) = 32), UDP_GRO (CMSG_SPACE(4) = 24) and SO_RXQ_OVFL
/// (CMSG_SPACE(4) = 24) with spare.
const CTRL_WORDS: usize = 16;

/// Ask the kernel to attach a CLOCK_REALTIME receive timestamp with nanosecond resolution to each
/// datagram (SO_TIMESTAMPNS, socket(7); read from the SCM_TIMESTAMPNS cmsg by [`RecvBatch`]).
/// The stamp is taken when the packet enters the IP stack, so it excludes the time the datagram
/// waited in the socket buffer for the application.
///
/// Caveat: when this is the first socket on the host asking for timestamps, the kernel turns
/// stamping on through deferred work (net/core/dev.c, net_enable_timestamp). Datagrams queued
/// before that runs are stamped when they are read instead, so for the first milliseconds a
/// later datagram can carry an earlier stamp. Enable timestamps before traffic starts.
pub fn enable_rx_timestamps(sock: &UdpSocket) -> io::Result<()> {
    sys::set_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Ask the kernel to attach this socket's drop count to received datagrams (SO_RXQ_OVFL,
/// socket(7)): the datagrams it dropped *at this socket* because the receive buffer was full,
/// counted from the socket's creation — unlike /proc/net/snmp's RcvbufErrors, which sums every
/// socket of the host. [`RecvBatch::drops_seen`] reads it back. The count rides on the next
/// datagram queued after a drop, so drops after the last datagram show only in
/// /proc/net/udp ([`crate::counters::socket_drops`]).
pub fn enable_rx_drop_counter(sock: &UdpSocket) -> io::Result<()> {
    sys::set_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
}

/// One received datagram, borrowed from a [`RecvBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    /// Payload (at most the batch's `max_datagram` bytes).
    pub data: &'a [u8],
    /// Sender address (0.0.0.0:0 if the kernel returned none, which UDP does not do).
    pub from: SocketAddr,
    /// Kernel receive time, ns since the Unix epoch (CLOCK_REALTIME), if SO_TIMESTAMPNS is on.
    pub kernel_time: Option<u64>,
    /// The datagram was larger than the buffer and cut (MSG_TRUNC): count it as oversized.
    pub truncated: bool,
}

/// What the kernel said about one received message (before GRO splitting).
#[derive(Debug, Clone, Copy, Default)]
struct Msg {
    from: Option<SocketAddr>,
    kernel_time: Option<u64>,
}

/// One datagram after splitting: a slice of a message's buffer.
#[derive(Debug, Clone, Copy)]
struct Dgram {
    msg: usize,
    offset: usize,
    len: usize,
    truncated: bool,
}

/// Buffers for receiving up to `count` datagrams per recvmmsg(2) call, and the results of the
/// last call.
#[derive(Debug)]
pub struct RecvBatch {
    count: usize,
    max_datagram: usize,
    /// Bytes per message buffer: `max_datagram`, or [`GRO_BUFFER`] with GRO on.
    slot: usize,
    bufs: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<u64>,
    msgs: Vec<Msg>,
    dgrams: Vec<Dgram>,
    gro: bool,
    most_coalesced: usize,
    /// Last SO_RXQ_OVFL value (the kernel's 32-bit counter) and the total it adds up to.
    drops_raw: Option<u32>,
    drops: u64,
}

impl RecvBatch {
    /// Room for `count` datagrams (clamped to 1..=[`MAX_BATCH`]) of up to `max_datagram` bytes;
    /// longer ones are cut and flagged [`Received::truncated`].
    pub fn new(count: usize, max_datagram: usize) -> RecvBatch {
        let count = count.clamp(1, MAX_BATCH);
        let max_datagram = max_datagram.max(1);
        // SAFETY: sockaddr_storage is plain integers; all-zero is a valid (AF_UNSPEC) value.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        RecvBatch {
            count,
            max_datagram,
            slot: max_datagram,
            bufs: vec![0; count * max_datagram],
            addrs: vec![zero_addr; count],
            ctrl: vec![0; count * CTRL_WORDS],
            msgs: Vec::with_capacity(count),
            dgrams: Vec::with_capacity(count),
            gro: false,
            most_coalesced: 0,
            drops_raw: None,
            drops: 0,
        }
    }

    /// Turn on UDP GRO for `sock` (udp(7) UDP_GRO, Linux ≥ 5.0): the kernel may hand several
    /// same-sized datagrams of one flow over as one buffer plus a cmsg with the segment size,
    /// which this batch splits back, so callers see datagrams either way. Each message buffer
    /// grows to [`GRO_BUFFER`]. Returns `Ok(false)` (and changes nothing) if the kernel lacks
    /// UDP_GRO.
    pub fn enable_gro(&mut self, sock: &UdpSocket) -> io::Result<bool> {
        match sys::set_int(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1) {
            Ok(()) => {}
            Err(e) if sys::is_errno(&e, libc::ENOPROTOOPT) => return Ok(false),
            Err(e) => return Err(e),
        }
        self.gro = true;
        if self.slot < GRO_BUFFER {
            self.slot = GRO_BUFFER;
            self.bufs = vec![0; self.count * self.slot];
        }
        // A coalesced buffer yields up to 64 datagrams.
        self.dgrams.reserve(self.count * 64);
        Ok(true)
    }

    /// Whether GRO splitting is on.
    pub fn gro_enabled(&self) -> bool {
        self.gro
    }

    /// Most datagrams the kernel handed over as one buffer so far (1 without coalescing, 0
    /// before anything arrived). The kernel's drop counters count such buffers, not datagrams.
    pub fn most_coalesced(&self) -> usize {
        self.most_coalesced
    }

    /// Datagrams the kernel dropped at this socket since it was created, as the newest
    /// SO_RXQ_OVFL cmsg said ([`enable_rx_drop_counter`]); 0 until a datagram queued after a
    /// drop is received. With GRO the kernel counts dropped buffers, which may hold several
    /// datagrams.
    pub fn drops_seen(&self) -> u64 {
        self.drops
    }

    fn note_drops(&mut self, raw: u32) {
        // The kernel's counter is 32 bits and only grows (wrapping): add what it moved on by.
        let before = self.drops_raw.unwrap_or(0);
        let step = raw.wrapping_sub(before);
        if step < 1 << 31 {
            self.drops += u64::from(step);
            self.drops_raw = Some(raw);
        }
    }

    /// Receive what is queued, up to `count` messages, in one recvmmsg(2) with MSG_WAITFORONE:
    /// block (per the socket's own blocking mode) until at least one arrives, then take what is
    /// there without waiting. With `timeout`, wait at most that long for the first (ppoll(2); the
    /// recvmmsg timeout argument is only checked after each datagram, see its BUGS section).
    /// Returns the number of datagrams now available through [`RecvBatch::datagram`] (more than
    /// the messages received when GRO coalesced some); `Ok(0)` means nothing arrived in time or a
    /// signal interrupted the wait. A zero `timeout` takes what is queued in one call. Without
    /// `timeout`, a non-blocking socket or one whose
    /// SO_RCVTIMEO expired gives `Err` of kind `WouldBlock`.
    pub fn recv_batch(&mut self, sock: &UdpSocket, timeout: Option<Duration>) -> io::Result<usize> {
        self.msgs.clear();
        self.dgrams.clear();
        let fd = sock.as_raw_fd();
        let mut flags = libc::MSG_WAITFORONE;
        if timeout == Some(Duration::ZERO) {
            // Take what is queued without a ppoll first: one system call, not two.
            flags |= libc::MSG_DONTWAIT;
        } else if let Some(t) = timeout {
            if !sys::wait_readable(fd, t)? {
                return Ok(0);
            }
            // Readable now; never block past the timeout if another reader took it.
            flags |= libc::MSG_DONTWAIT;
        }
        let slot = self.slot;
        let mut iovs: Vec<libc::iovec> = self
            .bufs
            .chunks_exact_mut(slot)
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(self.count);
        for ((iov, addr), ctrl) in iovs
            .iter_mut()
            .zip(self.addrs.iter_mut())
            .zip(self.ctrl.chunks_exact_mut(CTRL_WORDS))
        {
            // SAFETY: mmsghdr is plain data; all-zero is a valid empty header.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = (addr as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = ctrl.as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = std::mem::size_of_val(ctrl) as _;
            hdrs.push(h);
        }
        // SAFETY: every header points into buffers owned by `self` (or `iovs`) that outlive the
        // call, with their true lengths; `hdrs.len()` ≤ UIO_MAXIOV.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                hdrs.len() as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::Interrupted => Ok(0),
                io::ErrorKind::WouldBlock if timeout.is_some() => Ok(0),
                _ => Err(e),
            };
        }
        let n = (r as usize).min(hdrs.len());
        for (i, h) in hdrs.iter().take(n).enumerate() {
            let len = (h.msg_len as usize).min(slot);
            let namelen = h.msg_hdr.msg_namelen;
            let from = if namelen > 0 && namelen as usize <= std::mem::size_of::<libc::sockaddr_storage>() {
                // SAFETY: the kernel wrote `namelen` bytes of a socket address into the storage.
                unsafe { SockAddr::new(self.addrs[i], namelen) }.as_socket()
            } else {
                None
            };
            // SAFETY: `h.msg_hdr` is the header the kernel just filled; its control pointer and
            // (updated) length describe our buffer.
            let cm = unsafe { parse_cmsgs(&h.msg_hdr) };
            let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            if let Some(d) = cm.drops {
                self.note_drops(d);
            }
            self.msgs.push(Msg {
                from,
                kernel_time: cm.kernel_time,
            });
            match cm.gro_segment.filter(|&g| g > 0 && self.gro) {
                Some(seg) => {
                    let segs = gro_segments(len, seg);
                    let last = segs.len().saturating_sub(1);
                    self.most_coalesced = self.most_coalesced.max(segs.len());
                    for (k, (offset, seg_len)) in segs.enumerate() {
                        self.dgrams.push(Dgram {
                            msg: i,
                            offset,
                            len: seg_len,
                            truncated: (truncated && k == last) || seg_len > self.max_datagram,
                        });
                    }
                }
                None => {
                    self.most_coalesced = self.most_coalesced.max(1);
                    self.dgrams.push(Dgram {
                        msg: i,
                        offset: 0,
                        len,
                        truncated: truncated || len > self.max_datagram,
                    })
                }
            }
        }
        Ok(self.dgrams.len())
    }

    /// Datagrams from the last [`RecvBatch::recv_batch`].
    pub fn len(&self) -> usize {
        self.dgrams.len()
    }

    /// Whether the last call received nothing.
    pub fn is_empty(&self) -> bool {
        self.dgrams.is_empty()
    }

    /// Messages (system-level receives) in the last call; fewer than [`RecvBatch::len`] when GRO
    /// coalesced datagrams.
    pub fn messages(&self) -> usize {
        self.msgs.len()
    }

    /// Datagram `i` of the last call, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Received<'_>> {
        let d = self.dgrams.get(i)?;
        let m = self.msgs.get(d.msg)?;
        let start = d.msg * self.slot + d.offset;
        let len = d.len.min(self.max_datagram);
        Some(Received {
            data: self.bufs.get(start..start + len)?,
            from: m.from.unwrap_or(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))),
            kernel_time: m.kernel_time,
            truncated: d.truncated,
        })
    }

    /// Datagram `i` of the last call.
    ///
    /// # Panics
    /// If `i ≥ self.len()`, like slice indexing.
    pub fn datagram(&self, i: usize) -> Received<'_> {
        match self.get(i) {
            Some(r) => r,
            None => panic!("datagram {i} out of range: the last batch holds {}", self.len()),
        }
    }

    /// The datagrams of the last call, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = Received<'_>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Where datagram `i` of the last call lies in the receive buffer: `(offset, length)`, to
    /// index the buffer [`RecvBatch::swap_buffer`] hands out.
    pub fn span(&self, i: usize) -> Option<(usize, usize)> {
        let d = self.dgrams.get(i)?;
        Some((d.msg * self.slot + d.offset, d.len.min(self.max_datagram)))
    }

    /// Bytes of the receive buffer ([`RecvBatch::swap_buffer`] sizes a fresh one to it).
    pub fn buffer_len(&self) -> usize {
        self.bufs.len()
    }

    /// Hand the buffer the last call filled to the caller and receive into `fresh` from now on
    /// (resized to [`RecvBatch::buffer_len`]): the datagrams stay where the kernel wrote them,
    /// at their [`RecvBatch::span`]s, with no copy (a relay queues them there). Read the spans,
    /// addresses and flags first: the batch is empty afterwards.
    pub fn swap_buffer(&mut self, mut fresh: Vec<u8>) -> Vec<u8> {
        fresh.resize(self.bufs.len(), 0);
        self.msgs.clear();
        self.dgrams.clear();
        std::mem::replace(&mut self.bufs, fresh)
    }
}

/// Control messages we understand.
#[derive(Debug, Default)]
struct Cmsgs {
    kernel_time: Option<u64>,
    gro_segment: Option<usize>,
    drops: Option<u32>,
}

/// Walk the control messages of a received `msghdr` (cmsg(3)).
///
/// # Safety
/// `hdr` must be a header the kernel filled in a recvmsg/recvmmsg call, whose `msg_control`
/// buffer is still alive and 8-byte aligned and whose `msg_controllen` the kernel set.
// `msg_controllen`/`cmsg_len` are size_t on glibc but socklen_t on musl: keep the casts.
#[allow(clippy::unnecessary_cast)]
unsafe fn parse_cmsgs(hdr: &libc::msghdr) -> Cmsgs {
    let mut out = Cmsgs::default();
    if hdr.msg_control.is_null() || (hdr.msg_controllen as usize) < std::mem::size_of::<libc::cmsghdr>() {
        return out;
    }
    // SAFETY (whole loop): CMSG_FIRSTHDR/CMSG_NXTHDR stay within msg_controllen and return null at
    // the end; each payload read checks cmsg_len first and uses read_unaligned.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(hdr) };
    while !c.is_null() {
        let cm = unsafe { &*c };
        let data = unsafe { libc::CMSG_DATA(c) };
        let payload = (cm.cmsg_len as usize).saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
        if cm.cmsg_level == libc::SOL_SOCKET
            && cm.cmsg_type == libc::SCM_TIMESTAMPNS
            && payload >= std::mem::size_of::<libc::timespec>()
        {
            let ts: libc::timespec = unsafe { std::ptr::read_unaligned(data.cast()) };
            out.kernel_time = timespec_ns(&ts);
        } else if cm.cmsg_level == libc::SOL_UDP && cm.cmsg_type == libc::UDP_GRO && payload >= 2 {
            // udp(7): the UDP_GRO cmsg carries the segment size as an int (older kernels: u16).
            let seg = if payload >= std::mem::size_of::<libc::c_int>() {
                let v: libc::c_int = unsafe { std::ptr::read_unaligned(data.cast()) };
                usize::try_from(v).ok()
            } else {
                let v: u16 = unsafe { std::ptr::read_unaligned(data.cast()) };
                Some(usize::from(v))
            };
            out.gro_segment = seg;
        } else if cm.cmsg_level == libc::SOL_SOCKET
            && cm.cmsg_type == libc::SO_RXQ_OVFL
            && payload >= std::mem::size_of::<u32>()
        {
            // socket(7): a u32, the socket's drop count when this datagram was queued.
            out.drops = Some(unsafe { std::ptr::read_unaligned(data.cast::<u32>()) });
        }
        c = unsafe { libc::CMSG_NXTHDR(hdr, c) };
    }
    out
}

fn timespec_ns(ts: &libc::timespec) -> Option<u64> {
    let s = u64::try_from(ts.tv_sec).ok()?;
    let ns = u64::try_from(ts.tv_nsec).ok()?;
    s.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Split a coalesced GRO buffer of `len` bytes with segment size `seg` into `(offset, len)`
/// datagrams: all `seg` bytes long except possibly the last (udp(7), UDP_GRO).
pub fn gro_segments(len: usize, seg: usize) -> impl ExactSizeIterator<Item = (usize, usize)> {
    let seg = seg.max(1);
    let n = len.div_ceil(seg);
    (0..n).map(move |k| {
        let off = k * seg;
        (off, seg.min(len - off))
    })
}

/// Batched sends with sendmmsg(2): one system call for up to 64 datagrams. Keeps counts so a
/// report can give datagrams per call.
#[derive(Debug, Default, Clone)]
pub struct SendBatch {
    syscalls: u64,
    datagrams: u64,
}

/// Datagrams per sendmmsg(2) call; the headers live on the stack.
const SEND_CHUNK: usize = 64;

impl SendBatch {
    /// A sender with zeroed counters.
    pub fn new() -> SendBatch {
        SendBatch::default()
    }

    /// Send `datagrams` on a connected socket. Returns how many went: all of them, or fewer if a
    /// call failed after some were sent (e.g. EAGAIN on a non-blocking socket with a full send
    /// buffer) — the caller resends the rest and sees the error then. An error before any
    /// datagram went is returned as `Err`.
    pub fn send_batch(&mut self, sock: &UdpSocket, datagrams: &[&[u8]]) -> io::Result<usize> {
        self.send_inner(sock, datagrams.len(), |i| (datagrams[i], None))
    }

    /// Send each datagram to its own destination (unconnected socket); partial sends as for
    /// [`SendBatch::send_batch`].
    pub fn send_batch_to(&mut self, sock: &UdpSocket, datagrams: &[(&[u8], SocketAddr)]) -> io::Result<usize> {
        let addrs: Vec<SockAddr> = datagrams.iter().map(|(_, a)| SockAddr::from(*a)).collect();
        self.send_inner(sock, datagrams.len(), |i| (datagrams[i].0, Some(&addrs[i])))
    }

    fn send_inner<'a>(
        &mut self,
        sock: &UdpSocket,
        total: usize,
        item: impl Fn(usize) -> (&'a [u8], Option<&'a SockAddr>),
    ) -> io::Result<usize> {
        let fd = sock.as_raw_fd();
        let mut sent = 0;
        while sent < total {
            let n = (total - sent).min(SEND_CHUNK);
            // SAFETY: iovec and mmsghdr are plain data; all-zero values are valid empty ones.
            let mut iovs: [libc::iovec; SEND_CHUNK] = unsafe { std::mem::zeroed() };
            let mut hdrs: [libc::mmsghdr; SEND_CHUNK] = unsafe { std::mem::zeroed() };
            for k in 0..n {
                let (data, addr) = item(sent + k);
                iovs[k] = libc::iovec {
                    iov_base: data.as_ptr() as *mut libc::c_void,
                    iov_len: data.len(),
                };
                let h = &mut hdrs[k].msg_hdr;
                h.msg_iov = &mut iovs[k];
                h.msg_iovlen = 1;
                if let Some(a) = addr {
                    h.msg_name = a.as_ptr() as *mut libc::c_void;
                    h.msg_namelen = a.len();
                }
            }
            // SAFETY: the first `n` headers point at live caller buffers (only read by the kernel)
            // and live addresses, with their true lengths.
            let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
            self.syscalls += 1;
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return if sent > 0 { Ok(sent) } else { Err(e) };
            }
            let r = r as usize;
            self.datagrams += r as u64;
            sent += r;
            if r < n {
                // The kernel stopped at an error it will report on the next call; let the caller
                // see the count first.
                break;
            }
        }
        Ok(sent)
    }

    /// sendmmsg(2) calls made.
    pub fn syscalls(&self) -> u64 {
        self.syscalls
    }

    /// Datagrams sent.
    pub fn datagrams(&self) -> u64 {
        self.datagrams
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gro_split_covers_the_buffer() {
        let v: Vec<_> = gro_segments(65_536, 1400).collect();
        assert_eq!(v.len(), 47);
        assert_eq!(v[0], (0, 1400));
        assert_eq!(v[46], (46 * 1400, 65_536 - 46 * 1400));
        assert_eq!(
            gro_segments(2800, 1400).collect::<Vec<_>>(),
            vec![(0, 1400), (1400, 1400)]
        );
        assert_eq!(gro_segments(0, 1400).len(), 0);
        assert_eq!(gro_segments(5, 0).len(), 5);
    }

    #[test]
    fn drop_counter_adds_up_across_the_32_bit_wrap() {
        let mut b = RecvBatch::new(1, 16);
        b.note_drops(5);
        b.note_drops(5);
        b.note_drops(9);
        assert_eq!(b.drops_seen(), 9);
        b.note_drops(7); // an older value (never from one queue): ignored
        assert_eq!(b.drops_seen(), 9);
        b.note_drops(1 << 31);
        b.note_drops(u32::MAX);
        b.note_drops(3); // wrapped: 4 more after u32::MAX
        assert_eq!(b.drops_seen(), u64::from(u32::MAX) + 4);
    }

    #[test]
    fn timespec_conversion_rejects_negative() {
        let ts = libc::timespec { tv_sec: 2, tv_nsec: 5 };
        assert_eq!(timespec_ns(&ts), Some(2_000_000_005));
        let ts = libc::timespec { tv_sec: -1, tv_nsec: 0 };
        assert_eq!(timespec_ns(&ts), None);
    }
}

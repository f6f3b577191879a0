//! The socket side of the sans-IO [`transfer::Sender`] and [`transfer::Receiver`]: batched
//! sends with UDP GSO, batched receives with recvmmsg and UDP GRO, and the receiving side's
//! address checks. The session loops ([`crate::client`], [`crate::server`]) call these between
//! their looks at the control channel.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use netio::gso::{GSO_MAX_PAYLOAD, GSO_MAX_SEGMENTS};
use netio::RecvBatch;
use transfer::results::ForeignCounters;
use transfer::{Receiver, Sender, Sink, Source};

/// How long a send may wait for room in the socket buffer before the loop gives up on it.
const SEND_PATIENCE: Duration = Duration::from_secs(1);

fn would_block_or_refused(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused)
}

/// Send one datagram, waiting briefly while the socket buffer is full.
pub fn send_blocking(sock: &UdpSocket, to: Option<SocketAddr>, d: &[u8]) -> io::Result<()> {
    let deadline = Instant::now() + SEND_PATIENCE;
    loop {
        let r = match to {
            Some(a) => sock.send_to(d, a),
            None => sock.send(d),
        };
        match r {
            Ok(_) => return Ok(()),
            // Socket buffer full: a lost datagram would be repaired, but waiting is cheaper.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(20))
            }
            // The peer's port is not open (yet, or any more): ICMP unreachable. The protocol
            // probes and times out on its own; nothing to do here.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A UDP socket on `at` that shares the port (SO_REUSEPORT): the receiver's socket on its
/// control port's number (`peer` `None`), or a session's, connected to `peer` — Linux (≥ 5.7)
/// then hands that socket every datagram of its 4-tuple and the shared one the rest.
pub fn bind_shared(at: SocketAddr, peer: Option<SocketAddr>, rcvbuf: usize) -> io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_port(true)?;
    // Buffers before bind: a receive buffer must be large before the first burst arrives.
    netio::size_buffers(&sock, netio::BufferRequest::new(rcvbuf, 4 << 20)).map_err(io::Error::other)?;
    sock.bind(&at.into())?;
    if let Some(p) = peer {
        sock.connect(&p.into())?;
    }
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

/// What [`Transmit`] did, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransmitStats {
    /// Datagrams handed to the kernel.
    pub datagrams: u64,
    /// System calls that sent them.
    pub syscalls: u64,
    /// Whether UDP GSO is in use (it is dropped for good when the kernel or device refuses it).
    pub gso: bool,
}

/// The sender's datagrams batched into one buffer and handed to the kernel with UDP GSO: up to
/// [`GSO_MAX_SEGMENTS`] equal-size datagrams (the last may be shorter) per system call, built in
/// place by [`Sender::poll_transmit_append`] — no copy between the protocol and the kernel.
pub struct Transmit {
    buf: Vec<u8>,
    seg: usize,
    count: usize,
    stats: TransmitStats,
}

impl Transmit {
    /// A batcher; `gso` false sends each datagram with its own call.
    pub fn new(gso: bool) -> Transmit {
        Transmit {
            buf: Vec::with_capacity(GSO_MAX_PAYLOAD + 65_536),
            seg: 0,
            count: 0,
            stats: TransmitStats {
                gso,
                ..TransmitStats::default()
            },
        }
    }

    /// Figures so far.
    pub fn stats(&self) -> TransmitStats {
        self.stats
    }

    /// Send everything the sender has due now on the connected `sock`.
    pub fn pump<S: Source>(&mut self, sock: &UdpSocket, sender: &mut Sender<S>) -> io::Result<()> {
        loop {
            let start = self.buf.len();
            // A fresh clock per datagram: its send timestamp is the one-way-delay reference.
            if !sender.poll_transmit_append(Instant::now(), &mut self.buf) {
                break;
            }
            let len = self.buf.len() - start;
            if self.count == 0 {
                self.seg = len;
                self.count = 1;
            } else if len == self.seg {
                self.count += 1;
            } else if len < self.seg {
                // A shorter datagram may end a GSO batch.
                self.count += 1;
                self.flush(sock)?;
                continue;
            } else {
                // Longer than the batch's segments: it starts the next batch.
                let next = self.buf.split_off(start);
                self.flush(sock)?;
                self.buf = next;
                self.seg = len;
                self.count = 1;
            }
            let full = self.count >= GSO_MAX_SEGMENTS || self.buf.len() + self.seg > GSO_MAX_PAYLOAD;
            if !self.stats.gso || full {
                self.flush(sock)?;
            }
        }
        self.flush(sock)
    }

    fn flush(&mut self, sock: &UdpSocket) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let r = if self.count == 1 {
            self.stats.syscalls += 1;
            send_blocking(sock, None, &self.buf)
        } else {
            self.send_batch(sock)
        };
        self.stats.datagrams += self.count as u64;
        self.buf.clear();
        self.count = 0;
        r
    }

    fn send_batch(&mut self, sock: &UdpSocket) -> io::Result<()> {
        let deadline = Instant::now() + SEND_PATIENCE;
        let mut sent = 0usize;
        while sent < self.count {
            let from = (sent * self.seg).min(self.buf.len());
            match netio::send_gso(sock, &self.buf[from..], self.seg) {
                Ok(r) => {
                    self.stats.syscalls += r.syscalls as u64;
                    self.stats.gso &= r.gso;
                    sent += r.datagrams;
                    if r.datagrams == 0 && Instant::now() >= deadline {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(20))
                }
                Err(e) if would_block_or_refused(&e) || e.kind() == io::ErrorKind::Interrupted => {
                    if Instant::now() >= deadline {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The receiving side of a data socket: batched reads (GRO when the kernel has it), kernel
/// receive stamps, and who may speak. Datagrams count only from `peer` (the control
/// connection's address); the first one the receiver owns ([`Receiver::owns`]: a valid tag and
/// the session id) locks the port, and reports go there — a forged datagram sent first cannot
/// take the session's port.
pub struct Intake {
    rb: RecvBatch,
    gate: Gate,
    /// Datagrams refused before the protocol saw them.
    pub foreign: ForeignCounters,
}

impl Intake {
    /// An intake on `sock` (SO_TIMESTAMPNS on, GRO when available) accepting data from `peer`.
    pub fn new(sock: &UdpSocket, peer: IpAddr) -> io::Result<Intake> {
        let mut rb = RecvBatch::new(
            64,
            transfer::wire::MAX_PAYLOAD + transfer::wire::DATA_HEADER_LEN + transfer::wire::TAG_LEN,
        );
        rb.enable_gro(sock)?;
        Ok(Intake {
            rb,
            gate: Gate {
                peer,
                locked: None,
                last_fed: None,
            },
            foreign: ForeignCounters::default(),
        })
    }

    /// Where the session's sender speaks from, once known.
    pub fn locked(&self) -> Option<SocketAddr> {
        self.gate.locked
    }

    /// Read what is queued (without waiting) and hand the session's datagrams to `receiver`;
    /// returns how many were read.
    pub fn pump<K: Sink>(&mut self, sock: &UdpSocket, receiver: &mut Receiver<K>) -> io::Result<usize> {
        let n = match self.rb.recv_batch(sock, Some(Duration::ZERO)) {
            Ok(n) => n,
            Err(e) if would_block_or_refused(&e) => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(0);
        }
        let now = Instant::now();
        let wall_ns = wall_clock_ns();
        for d in self.rb.iter() {
            if d.truncated {
                self.foreign.oversized += 1;
                continue;
            }
            let previous = self
                .gate
                .last_fed
                .unwrap_or_else(|| now.checked_sub(LIVE_STAMP_AGE).unwrap_or(now));
            let arrived = arrival(now, wall_ns, d.kernel_time, previous, LIVE_STAMP_AGE);
            self.gate.feed(&mut self.foreign, arrived, d.from, d.data, receiver);
        }
        Ok(n)
    }

    /// Hand datagrams that came before the session ([`crate::early`]) from `from` to `receiver`
    /// with their arrival times, under the same checks as those read from the socket.
    pub fn feed_early<K: Sink>(
        &mut self,
        from: SocketAddr,
        datagrams: &[(Instant, Vec<u8>)],
        receiver: &mut Receiver<K>,
    ) {
        for (at, d) in datagrams {
            self.gate.feed(&mut self.foreign, *at, from, d, receiver);
        }
    }
}

/// Who may speak on a session's data socket. See [`Intake`].
struct Gate {
    peer: IpAddr,
    locked: Option<SocketAddr>,
    /// The arrival time of the latest datagram fed: later ones are never earlier. None before
    /// the first, so the penned datagrams keep the times they arrived at before the intake
    /// existed (clamped to its creation, the whole first segment read as one instant's: the
    /// sender's estimate jumped to 2–3 Gb/s, issue 37).
    last_fed: Option<Instant>,
}

impl Gate {
    fn feed<K: Sink>(
        &mut self,
        foreign: &mut ForeignCounters,
        arrived: Instant,
        from: SocketAddr,
        data: &[u8],
        receiver: &mut Receiver<K>,
    ) {
        if from.ip() != self.peer {
            foreign.other_host += 1;
            return;
        }
        match self.locked {
            Some(a) if a != from => {
                foreign.other_port += 1;
                return;
            }
            Some(_) => {}
            None if receiver.owns(data) => self.locked = Some(from),
            // Not ours: the protocol counts it by reason, but it locks nothing.
            None => {}
        }
        let arrived = self.last_fed.map_or(arrived, |l| arrived.max(l));
        self.last_fed = Some(arrived);
        receiver.handle_datagram(arrived, data);
    }
}

/// Read what is queued on the sender's socket (without waiting) and hand it to `sender`.
pub fn pump_reports<S: Source>(sock: &UdpSocket, rb: &mut RecvBatch, sender: &mut Sender<S>) -> io::Result<usize> {
    let n = match rb.recv_batch(sock, Some(Duration::ZERO)) {
        Ok(n) => n,
        Err(e) if would_block_or_refused(&e) => 0,
        Err(e) => return Err(e),
    };
    let now = Instant::now();
    for d in rb.iter() {
        sender.handle_datagram(now, d.data);
    }
    Ok(n)
}

/// How old a kernel receive stamp on a session's own socket may be and still be believed.
pub(crate) const LIVE_STAMP_AGE: Duration = Duration::from_secs(1);

pub(crate) fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// When a datagram really arrived, on the monotonic clock: the kernel's receive stamp
/// (SO_TIMESTAMPNS, wall clock) carried over to `Instant`. The one-way delay the receiver reports
/// then measures the path, not how long this thread took to be scheduled — on a busy host the
/// difference is milliseconds, which the adaptive controller would read as a queue and yield to.
/// Never earlier than the previous datagram's time (a wall-clock step cannot reorder them), never
/// later than `now`, and `now` itself when there is no stamp or it is implausible (older than
/// `max_age`: a live socket is drained within milliseconds, so [`LIVE_STAMP_AGE`]; the early pen
/// keeps datagrams up to its own age bound, and a stall of the host between arrival and drain
/// must not flatten their spacing onto one instant).
pub(crate) fn arrival(
    now: Instant,
    wall_now_ns: u64,
    kernel_ns: Option<u64>,
    previous: Instant,
    max_age: Duration,
) -> Instant {
    let waited = match kernel_ns {
        Some(k) if k <= wall_now_ns && u128::from(wall_now_ns - k) < max_age.as_nanos() => {
            Duration::from_nanos(wall_now_ns - k)
        }
        _ => Duration::ZERO,
    };
    now.checked_sub(waited).unwrap_or(now).max(previous).min(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Zeros;
    impl Source for Zeros {
        fn read_at(&mut self, _: u64, buf: &mut [u8]) -> io::Result<usize> {
            buf.fill(0);
            Ok(buf.len())
        }
    }

    struct Discard;
    impl Sink for Discard {
        fn write_at(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
            Ok(())
        }
    }

    /// Issue 37: datagrams penned before the session existed, 1 ms apart, reach the session's
    /// receiver with those arrival times, not all at the intake's creation (which made one
    /// report interval of microseconds carry the whole first segment).
    #[test]
    fn penned_datagrams_reach_the_session_with_their_arrival_times() {
        let params = transfer::SessionParams {
            session_id: 7,
            file_size: 0,
            chunk_size: 1000,
        };
        let t0 = Instant::now().checked_sub(Duration::from_millis(500)).unwrap();
        let mut scfg = transfer::SenderConfig::new(params);
        scfg.open = true;
        let mut sender = Sender::new(scfg, Zeros, Box::new(transfer::FixedRate::new(1e9)), t0).unwrap();
        sender.push_segment(200_000, 0);
        let mut rcfg = transfer::ReceiverConfig::new(params);
        rcfg.open = true;
        let mut receiver = Receiver::new(rcfg, Discard, t0).unwrap();
        receiver.push_segment(200_000, 0);
        let early: Vec<(Instant, Vec<u8>)> = (0..100u64)
            .map(|i| {
                let at = t0 + Duration::from_millis(i);
                (at, sender.poll_transmit(at).expect("a data datagram"))
            })
            .collect();
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut intake = Intake::new(&sock, "127.0.0.1".parse().unwrap()).unwrap();
        intake.feed_early("127.0.0.1:5000".parse().unwrap(), &early, &mut receiver);
        assert_eq!(receiver.stats().datagrams_received, 100);
        let mut out = Vec::new();
        assert!(receiver.poll_transmit_into(Instant::now(), &mut out));
        let Ok(transfer::wire::Datagram::Report(r)) = transfer::wire::parse(&out) else {
            panic!("not a report");
        };
        assert_eq!(r.interval_datagrams, 100);
        assert_eq!(r.interval_us, 99_000, "the first to the last penned arrival");
    }

    #[test]
    fn arrival_uses_the_kernel_stamp_within_bounds() {
        let now = Instant::now();
        let prev = now - Duration::from_millis(10);
        let wall = 1_000_000_000_000;
        assert_eq!(
            arrival(now, wall, Some(wall - 3_000_000), prev, LIVE_STAMP_AGE),
            now - Duration::from_millis(3)
        );
        // Older than the previous datagram: clamped to it.
        assert_eq!(arrival(now, wall, Some(wall - 50_000_000), prev, LIVE_STAMP_AGE), prev);
        // In the future, missing or absurdly old: now.
        assert_eq!(arrival(now, wall, Some(wall + 5), prev, LIVE_STAMP_AGE), now);
        assert_eq!(arrival(now, wall, None, prev, LIVE_STAMP_AGE), now);
        assert_eq!(
            arrival(now, wall, Some(wall - 2_000_000_000), prev, LIVE_STAMP_AGE),
            now
        );
        // The same stamp within a longer bound (the early pen's) is believed.
        let long = Duration::from_secs(10);
        assert_eq!(
            arrival(now, wall, Some(wall - 2_000_000_000), now - long, long),
            now - Duration::from_secs(2)
        );
    }
}

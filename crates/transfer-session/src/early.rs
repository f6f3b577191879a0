//! Datagrams that arrive before their session exists (protocol 6: the sender's data leaves with
//! its TCP connect, and reaches the receiver a round trip before its first control flight; the
//! sender puts at most ¾ of this pen's bounds on the path before that,
//! [`crate::control::PRE_CONNECT_BYTES`]).
//!
//! The receiver listens on UDP at its control port from the moment it binds. A session, once its
//! first flight checked, binds its own socket on that port connected to the sender's data
//! address (the kernel then hands it every later datagram of that 4-tuple, SO_REUSEPORT, Linux
//! ≥ 5.7) and takes what reached the shared socket before from this pen. Nothing here is
//! trusted: the pen only keeps raw datagrams, bounded in count, bytes and age, the oldest dropped
//! first and every drop counted; the session's protocol checks each one's tag under the data key
//! (which only the authenticated session has) before any byte of it is believed or written.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Most datagrams penned at once.
pub const PEN_DATAGRAMS: usize = 4096;
/// Most bytes penned at once.
pub const PEN_BYTES: usize = 16 << 20;
/// A penned datagram no session took within this long is dropped.
pub const PEN_AGE: Duration = Duration::from_secs(10);

/// What happened to datagrams that came before their session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PenStats {
    /// Read from the shared socket.
    pub penned: u64,
    /// Handed to their session.
    pub taken: u64,
    /// Dropped: the pen was full (the oldest go first).
    pub dropped_full: u64,
    /// Dropped: no session took them within [`PEN_AGE`].
    pub expired: u64,
    /// Dropped: too short to name a session.
    pub unparsed: u64,
}

struct Penned {
    at: Instant,
    from: SocketAddr,
    session: u64,
    data: Vec<u8>,
}

/// The bounded pen. See the module docs.
#[derive(Default)]
pub struct EarlyPen {
    queue: VecDeque<Penned>,
    bytes: usize,
    /// Outcomes so far.
    pub stats: PenStats,
}

impl EarlyPen {
    /// Keep `data` from `from` (arrived at `now`: its kernel receive time, which the opening
    /// train's dispersion is measured from) for its session, within the bounds.
    pub fn push(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.expire(now);
        let Some(session) = transfer::wire::peek_session(data) else {
            self.stats.unparsed += 1;
            return;
        };
        while !self.queue.is_empty() && (self.queue.len() >= PEN_DATAGRAMS || self.bytes + data.len() > PEN_BYTES) {
            self.drop_front();
            self.stats.dropped_full += 1;
        }
        self.stats.penned += 1;
        self.bytes += data.len();
        self.queue.push_back(Penned {
            at: now,
            from,
            session,
            data: data.to_vec(),
        });
    }

    /// The datagrams of `session` from `from`, in arrival order with their arrival times, out
    /// of the pen.
    pub fn take(&mut self, now: Instant, session: u64, from: SocketAddr) -> Vec<(Instant, Vec<u8>)> {
        self.expire(now);
        let mut out = Vec::new();
        let mut rest = VecDeque::with_capacity(self.queue.len());
        for p in self.queue.drain(..) {
            if p.session == session && p.from == from {
                self.bytes -= p.data.len();
                out.push((p.at, p.data));
            } else {
                rest.push_back(p);
            }
        }
        self.queue = rest;
        self.stats.taken += out.len() as u64;
        out
    }

    /// Datagrams and bytes penned now.
    pub fn held(&self) -> (usize, usize) {
        (self.queue.len(), self.bytes)
    }

    fn expire(&mut self, now: Instant) {
        while self
            .queue
            .front()
            .is_some_and(|p| now.saturating_duration_since(p.at) > PEN_AGE)
        {
            self.drop_front();
            self.stats.expired += 1;
        }
    }

    fn drop_front(&mut self) {
        if let Some(p) = self.queue.pop_front() {
            self.bytes -= p.data.len();
        }
    }

    /// Move everything queued on the shared socket (without waiting) into the pen, each with its
    /// kernel receive time (SO_TIMESTAMPNS on the shared socket); at most [`PEN_DATAGRAMS`]
    /// datagrams a call, so a flood cannot hold a session's set-up.
    pub fn drain(&mut self, sock: &UdpSocket) {
        let max = transfer::wire::MAX_PAYLOAD + transfer::wire::DATA_HEADER_LEN + transfer::wire::TAG_LEN;
        let mut rb = netio::RecvBatch::new(64, max);
        let penned_before = self.stats.penned;
        for _ in 0..PEN_DATAGRAMS / 64 {
            match rb.recv_batch(sock, Some(Duration::ZERO)) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
            let (now, wall_ns) = (Instant::now(), crate::udp::wall_clock_ns());
            for d in rb.iter() {
                if d.truncated {
                    self.stats.unparsed += 1;
                    continue;
                }
                // Queued in the kernel for longer than the pen keeps anything (no session
                // started meanwhile to drain it): expired, not fresh.
                if d.kernel_time
                    .is_some_and(|k| wall_ns.saturating_sub(k) > PEN_AGE.as_nanos() as u64)
                {
                    self.stats.expired += 1;
                    continue;
                }
                let at = crate::udp::arrival(
                    now,
                    wall_ns,
                    d.kernel_time,
                    now.checked_sub(PEN_AGE).unwrap_or(now),
                    PEN_AGE,
                );
                self.push(at, d.from, d.data);
            }
        }
        // In queue order, each no later than the next: a stamp too new (the kernel stamps the
        // datagrams that came while it was still turning stamping on when they are read, and a
        // wall-clock step) is pulled back to the next one's, never the others forward to it —
        // clamping forward let one such stamp flatten a whole train onto one instant.
        let new = usize::try_from(self.stats.penned - penned_before).map_or(0, |n| n.min(self.queue.len()));
        let mut next: Option<Instant> = None;
        for p in self.queue.iter_mut().rev().take(new) {
            if let Some(n) = next {
                p.at = p.at.min(n);
            }
            next = Some(p.at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(session: u64, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len.max(16)];
        d[..4].copy_from_slice(b"eVTR");
        d[4] = transfer::wire::VERSION;
        d[5] = 1;
        d[6..14].copy_from_slice(&session.to_be_bytes());
        d
    }

    #[test]
    fn penned_datagrams_keep_their_kernel_arrival_spacing() {
        let shared = crate::udp::bind_shared("127.0.0.1:0".parse().unwrap(), None, 4 << 20).unwrap();
        netio::enable_rx_timestamps(&shared).unwrap();
        let to = shared.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let from = tx.local_addr().unwrap();
        // The kernel turns receive stamping on in deferred work: until it has, a datagram is
        // stamped when read. Wait (bounded) until one sent 30 ms before its read says so.
        let mut warm = EarlyPen::default();
        let stamped = (0..200).any(|_| {
            tx.send_to(&datagram(8, 100), to).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            warm.drain(&shared);
            let got = warm.take(Instant::now(), 8, from);
            got.iter().all(|(at, _)| at.elapsed() >= Duration::from_millis(20)) && !got.is_empty()
        });
        assert!(stamped, "the kernel never stamped a datagram on arrival within 6 s");
        // 150 datagrams over at least 150 ms (sleeps only lengthen it), then a wait.
        let t0 = Instant::now();
        for _ in 0..150 {
            tx.send_to(&datagram(9, 1000), to).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let sent_over = t0.elapsed();
        // A host stalled for over a second between arrival and drain (CI once: the first stamp
        // then read as implausible and every later one collapsed onto it, 0 ns apart).
        std::thread::sleep(Duration::from_millis(1200));
        let mut pen = EarlyPen::default();
        pen.drain(&shared);
        let got = pen.take(Instant::now(), 9, from);
        assert_eq!(got.len(), 150);
        let spread = got[149].0.duration_since(got[0].0);
        // The kernel's stamps, not the drain's clock: as spread as the sending (less a little
        // of the first send's and the last receive's jitter).
        assert!(
            spread + Duration::from_millis(20) >= sent_over.min(Duration::from_millis(900)),
            "stamps {spread:?} apart, sent over {sent_over:?}"
        );
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn a_flood_for_unknown_sessions_is_bounded_and_the_newest_survive() {
        let t0 = Instant::now();
        let (a, b): (SocketAddr, SocketAddr) = ("127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap());
        let mut pen = EarlyPen::default();
        for i in 0..3 * PEN_DATAGRAMS as u64 {
            pen.push(t0, b, &datagram(i, 9000));
            let (n, bytes) = pen.held();
            assert!(n <= PEN_DATAGRAMS && bytes <= PEN_BYTES);
        }
        pen.push(t0, a, &datagram(5, 9000));
        pen.push(t0, a, &[1, 2, 3]);
        assert_eq!(
            pen.take(t0, 5, a).len(),
            1,
            "the session's datagram, penned last, is there"
        );
        assert_eq!(
            pen.take(t0, 5, b).len(),
            0,
            "another source's datagrams with its id are not"
        );
        assert!(pen.stats.dropped_full >= 2 * PEN_DATAGRAMS as u64);
        assert_eq!(pen.stats.unparsed, 1);
        // What no session took is dropped after PEN_AGE.
        let held = pen.held().0 as u64;
        assert!(pen.take(t0 + PEN_AGE + Duration::from_millis(1), 1, a).is_empty());
        assert_eq!((pen.held(), pen.stats.expired), ((0, 0), held));
    }
}

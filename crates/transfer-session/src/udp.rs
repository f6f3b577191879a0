//! The thin socket loops around the sans-IO [`transfer::Sender`] and [`transfer::Receiver`].

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use netio::RecvBatch;
use transfer::results::ForeignCounters;
use transfer::{Receiver, Sender, Sink, Source};

/// Longest sleep between looks at the control channel and the progress callback.
const TICK: Duration = Duration::from_millis(20);
/// Below this, waiting in ppoll costs more than it saves: poll without blocking instead.
const SPIN: Duration = Duration::from_micros(50);

/// What the caller's hook tells the loop after each tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Go on.
    Continue,
    /// Stop now (the control channel failed or the user interrupted).
    Abort,
}

fn send_blocking(sock: &UdpSocket, to: Option<SocketAddr>, d: &[u8]) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(1);
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

/// Run `sender` over the connected socket `sock` until it is done or failed, or `tick` says
/// abort. `tick` is called at least every 20 ms.
pub fn drive_sender<S: Source>(
    sock: &UdpSocket,
    sender: &mut Sender<S>,
    tick: &mut dyn FnMut(&Sender<S>) -> Tick,
) -> io::Result<Tick> {
    sock.set_nonblocking(true)?;
    let mut rb = RecvBatch::new(32, 2048);
    let mut out = Vec::with_capacity(65_536);
    let mut next_tick = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_tick {
            if tick(sender) == Tick::Abort {
                return Ok(Tick::Abort);
            }
            next_tick = now + TICK;
        }
        if sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        // A fresh clock per datagram: its send timestamp is the one-way-delay reference, and a
        // burst takes time to hand to the kernel.
        while sender.poll_transmit_into(Instant::now(), &mut out) {
            send_blocking(sock, None, &out)?;
        }
        if sender.is_done() {
            return Ok(Tick::Continue);
        }
        let wake = sender.poll_timeout().unwrap_or(next_tick).min(next_tick);
        let wait = wake.saturating_duration_since(Instant::now());
        let wait = if wait < SPIN { Duration::ZERO } else { wait };
        match rb.recv_batch(sock, Some(wait)) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused) => {}
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        for d in rb.iter() {
            sender.handle_datagram(now, d.data);
        }
    }
}

/// Run `receiver` on `sock` until `tick` says stop (the control channel carried the sender's
/// verdict, or failed). Each datagram is handed over with its kernel arrival time when the
/// socket has SO_TIMESTAMPNS on (see [`arrival`]). Datagrams count only from `peer` (the control connection's address);
/// the first one the receiver owns ([`Receiver::owns`]: its session id, and a valid tag in a
/// keyed session) locks the port, and reports go there — a forged datagram sent first cannot
/// take the session's port.
pub fn drive_receiver<K: Sink>(
    sock: &UdpSocket,
    receiver: &mut Receiver<K>,
    peer: IpAddr,
    foreign: &mut ForeignCounters,
    tick: &mut dyn FnMut(&mut Receiver<K>) -> Tick,
) -> io::Result<Tick> {
    let mut rb = RecvBatch::new(
        64,
        transfer::wire::MAX_PAYLOAD + transfer::wire::DATA_HEADER_LEN + transfer::wire::TAG_LEN,
    );
    let mut out = Vec::with_capacity(2048);
    let mut locked: Option<SocketAddr> = None;
    let mut next_tick = Instant::now();
    let mut last_fed = next_tick;
    loop {
        let now = Instant::now();
        if now >= next_tick {
            if tick(receiver) == Tick::Abort {
                return Ok(Tick::Abort);
            }
            next_tick = now + TICK;
        }
        if receiver.poll_timeout().is_some_and(|t| t <= now) {
            receiver.handle_timeout(now);
        }
        if let Some(to) = locked {
            while receiver.poll_transmit_into(now, &mut out) {
                send_blocking(sock, Some(to), &out)?;
            }
        }
        let wake = receiver.poll_timeout().unwrap_or(next_tick).min(next_tick);
        let wait = wake.saturating_duration_since(Instant::now());
        match rb.recv_batch(sock, Some(wait)) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused) => {}
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        let wall_ns = wall_clock_ns();
        for d in rb.iter() {
            if d.from.ip() != peer {
                foreign.other_host += 1;
                continue;
            }
            if d.truncated {
                foreign.oversized += 1;
                continue;
            }
            match locked {
                Some(a) if a != d.from => {
                    foreign.other_port += 1;
                    continue;
                }
                Some(_) => {}
                None if receiver.owns(d.data) => locked = Some(d.from),
                // Not ours: the protocol counts it by reason, but it locks nothing.
                None => {}
            }
            let arrived = arrival(now, wall_ns, d.kernel_time, last_fed);
            last_fed = arrived;
            receiver.handle_datagram(arrived, d.data);
        }
    }
}

fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// When a datagram really arrived, on the monotonic clock: the kernel's receive stamp
/// (SO_TIMESTAMPNS, wall clock) carried over to `Instant`. The one-way delay the receiver reports
/// then measures the path, not how long this thread took to be scheduled — on a busy host the
/// difference is milliseconds, which the adaptive controller would read as a queue and yield to.
/// Never earlier than the previous datagram's time (a wall-clock step cannot reorder them), never
/// later than `now`, and `now` itself when there is no stamp or it is implausible (over 1 s old).
fn arrival(now: Instant, wall_now_ns: u64, kernel_ns: Option<u64>, previous: Instant) -> Instant {
    let waited = match kernel_ns {
        Some(k) if k <= wall_now_ns && wall_now_ns - k < 1_000_000_000 => Duration::from_nanos(wall_now_ns - k),
        _ => Duration::ZERO,
    };
    now.checked_sub(waited).unwrap_or(now).max(previous).min(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_uses_the_kernel_stamp_within_bounds() {
        let now = Instant::now();
        let prev = now - Duration::from_millis(10);
        let wall = 1_000_000_000_000;
        assert_eq!(
            arrival(now, wall, Some(wall - 3_000_000), prev),
            now - Duration::from_millis(3)
        );
        // Older than the previous datagram: clamped to it.
        assert_eq!(arrival(now, wall, Some(wall - 50_000_000), prev), prev);
        // In the future, missing or absurdly old: now.
        assert_eq!(arrival(now, wall, Some(wall + 5), prev), now);
        assert_eq!(arrival(now, wall, None, prev), now);
        assert_eq!(arrival(now, wall, Some(wall - 2_000_000_000), prev), now);
    }
}

//! The virtual-time harness with small test endpoints.

use std::time::{Duration, Instant};

use linkemu::sim::{Endpoint, Sim, SimError};
use linkemu::{Duplex, Link, LinkConfig, LossModel};

/// Sends numbered datagrams on its own absolute timeline: datagram `i` at
/// `start + i·interval`, for `count` datagrams. Each datagram is 16 bytes
/// (sequence number, declared size) standing for a `frame_len`-byte frame,
/// so the bottleneck sees full-size frames without the cost of copying them.
struct PacedSender {
    start: Instant,
    interval: Duration,
    frame_len: u64,
    count: u64,
    next: u64,
    due: bool,
}

impl PacedSender {
    fn new(start: Instant, rate_bps: f64, frame_len: u64, count: u64) -> Self {
        Self {
            start,
            interval: Duration::from_secs_f64(frame_len as f64 * 8.0 / rate_bps),
            frame_len,
            count,
            next: 0,
            due: false,
        }
    }

    fn send_time(&self, i: u64) -> Instant {
        // Absolute timeline (no accumulated rounding): start + i·interval.
        self.start + self.interval * u32::try_from(i).expect("test counts fit u32")
    }
}

impl Endpoint for PacedSender {
    fn handle_datagram(&mut self, _: Instant, _: &[u8]) {}

    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next >= self.count || self.send_time(self.next) > now {
            return None;
        }
        let mut d = Vec::with_capacity(16);
        d.extend_from_slice(&self.next.to_le_bytes());
        d.extend_from_slice(&self.frame_len.to_le_bytes());
        self.next += 1;
        self.due = false;
        Some(d)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (self.next < self.count && !self.due).then(|| self.send_time(self.next))
    }

    fn handle_timeout(&mut self, _: Instant) {
        self.due = true;
    }

    fn wire_len(&self, datagram: &[u8]) -> usize {
        datagram
            .get(8..16)
            .and_then(|b| b.try_into().ok())
            .map_or(datagram.len(), |b| u64::from_le_bytes(b) as usize)
    }
}

/// Counts datagrams, sequence gaps and arrival times.
#[derive(Default)]
struct Receiver {
    arrivals: Vec<(Instant, u64)>,
    bytes: u64,
}

impl Endpoint for Receiver {
    fn handle_datagram(&mut self, now: Instant, d: &[u8]) {
        let seq = u64::from_le_bytes(d[..8].try_into().unwrap());
        self.bytes += u64::from_le_bytes(d[8..16].try_into().unwrap());
        self.arrivals.push((now, seq));
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<Vec<u8>> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

fn link(cfg: LinkConfig, seed: u64) -> Duplex<Vec<u8>> {
    Duplex::new(
        Link::new(cfg, seed).unwrap(),
        Link::new(LinkConfig::default(), seed + 1).unwrap(),
    )
}

#[test]
fn ten_gigabit_for_ten_virtual_seconds() {
    // 9.9 Gb/s of 64 kB frames (GSO-sized) into a 10 Gb/s bottleneck with
    // 20 ms one-way delay and 1e-4 random loss.
    let start = Instant::now();
    let frame = 64_000u64;
    let count = (9.9e9 * 10.0 / (frame as f64 * 8.0)) as u64;
    let cfg = LinkConfig {
        rate_bps: Some(10_000_000_000),
        buffer_bytes: 25_000_000,
        delay: Duration::from_millis(20),
        loss: LossModel::Bernoulli { p: 1e-4 },
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(
        PacedSender::new(start, 9.9e9, frame, count),
        Receiver::default(),
        link(cfg, 1),
        start,
    );
    let cpu = std::time::Instant::now();
    sim.run_until(
        |s| s.a().next == count && s.link().a_to_b.in_flight() == 0,
        Duration::from_secs(11),
    )
    .unwrap();
    let took = cpu.elapsed();
    let virt = sim.elapsed();
    eprintln!(
        "simulated {virt:?} at 9.9 Gb/s ({count} frames, {} steps) in {took:?}: {:.0} virtual s per CPU s",
        sim.steps(),
        virt.as_secs_f64() / took.as_secs_f64()
    );

    let rx = sim.b();
    let stats = sim.stats_a_to_b();
    assert_eq!(stats.offered.packets, count);
    assert_eq!(stats.dropped_queue.packets, 0);
    assert_eq!(rx.arrivals.len() as u64, count - stats.dropped_loss.packets);
    // First frame: 51.2 µs of serialisation + 20 ms.
    assert_eq!(
        rx.arrivals[0].0 - start,
        Duration::from_micros(20_051) + Duration::from_nanos(200)
    );
    let (t0, _) = rx.arrivals[0];
    let (t1, _) = *rx.arrivals.last().unwrap();
    let rate = (rx.bytes - frame) as f64 * 8.0 / (t1 - t0).as_secs_f64();
    assert!((rate / 9.9e9 - 1.0).abs() < 0.001, "received {rate} b/s");
    assert!(rx.arrivals.windows(2).all(|w| w[0].1 < w[1].1));
}

/// Answers every datagram with the same bytes.
#[derive(Default)]
struct Echo {
    pending: Vec<Vec<u8>>,
}

impl Endpoint for Echo {
    fn handle_datagram(&mut self, _: Instant, d: &[u8]) {
        self.pending.push(d.to_vec());
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<Vec<u8>> {
        self.pending.pop()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

/// Sends one ping every 100 ms and records round-trip times.
struct Pinger {
    next: Instant,
    sent: Vec<Instant>,
    rtts: Vec<Duration>,
    pings: usize,
    due: bool,
}

impl Endpoint for Pinger {
    fn handle_datagram(&mut self, now: Instant, d: &[u8]) {
        let i = d[0] as usize;
        self.rtts.push(now - self.sent[i]);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if !self.due {
            return None;
        }
        self.due = false;
        self.next += Duration::from_millis(100);
        self.sent.push(now);
        Some(vec![(self.sent.len() - 1) as u8; 1250])
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.sent.len() < self.pings && !self.due).then_some(self.next)
    }
    fn handle_timeout(&mut self, _: Instant) {
        self.due = true;
    }
}

#[test]
fn ping_round_trip_is_both_delays_plus_serialisation() {
    let start = Instant::now();
    let forward = LinkConfig {
        rate_bps: Some(10_000_000), // 1250 B = 1 ms
        delay: Duration::from_millis(30),
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: Duration::from_millis(50),
        ..LinkConfig::default()
    };
    let duplex = Duplex::asymmetric(forward, back, 9).unwrap();
    let pinger = Pinger {
        next: start,
        sent: Vec::new(),
        rtts: Vec::new(),
        pings: 10,
        due: false,
    };
    let mut sim = Sim::new(pinger, Echo::default(), duplex, start);
    sim.run_until(|s| s.a().rtts.len() == 10, Duration::from_secs(5))
        .unwrap();
    assert!(
        sim.a().rtts.iter().all(|r| *r == Duration::from_millis(81)),
        "{:?}",
        sim.a().rtts
    );
    assert_eq!(sim.stats_a_to_b().delivered.packets, 10);
    assert_eq!(sim.stats_b_to_a().delivered.packets, 10);
    // Nothing left: stepping reports idleness.
    assert!(!sim.step());
    assert_eq!(
        sim.run_until(|_| false, Duration::from_secs(1)),
        Err(SimError::Idle(sim.elapsed()))
    );
}

#[test]
fn run_until_is_bounded_in_virtual_time() {
    let start = Instant::now();
    let sender = PacedSender::new(start, 1e6, 1000, 1_000_000);
    let mut sim = Sim::new(sender, Receiver::default(), link(LinkConfig::default(), 3), start);
    let err = sim.run_until(|_| false, Duration::from_secs(1));
    assert_eq!(err, Err(SimError::Deadline(Duration::from_secs(1))));
    assert_eq!(sim.elapsed(), Duration::from_secs(1));
    // 1 Mb/s of 1000-byte frames is one every 8 ms: frames 0..=125 by t = 1 s.
    assert_eq!(sim.b().arrivals.len(), 126);
    sim.run_for(Duration::from_secs(1)).unwrap();
    assert_eq!(sim.elapsed(), Duration::from_secs(2));
    assert_eq!(sim.b().arrivals.len(), 251);
}

/// Asks for a timeout in the past forever: makes no progress in time.
struct Stuck(Instant);

impl Endpoint for Stuck {
    fn handle_datagram(&mut self, _: Instant, _: &[u8]) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Vec<u8>> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.0)
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

#[test]
fn run_until_is_bounded_in_steps() {
    let start = Instant::now();
    let mut sim = Sim::new(Stuck(start), Receiver::default(), link(LinkConfig::default(), 3), start);
    sim.set_step_limit(1000);
    assert_eq!(
        sim.run_until(|_| false, Duration::from_secs(1)),
        Err(SimError::StepLimit(1000))
    );
    assert_eq!(sim.elapsed(), Duration::ZERO);
}

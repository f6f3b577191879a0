//! The whole live chain in virtual time, deterministically (quinn's `Pair` style): a backend's two
//! boards send bare VDIF over a jittery, slightly lossy station LAN to the relay; the relay learns
//! the station's threads, splits the mode's rate over them, tees what came in to the station's
//! recording and paces the stream out with native framing over a long lossy WAN with a shallow
//! bottleneck queue to the correlator's receiver, which asks for what the WAN lost (ARQ) and
//! writes one continuous stream. The same sans-IO state machines the socket loops drive.
//!
//! What must hold end to end: every frame that reached the relay reaches the correlator with the
//! bytes the backend sent (the WAN's loss repaired within the latency); every frame the LAN lost
//! is written as a filled frame at its place, and counted once by the relay as lost in its input;
//! the tee holds exactly what came in; the relay's smoothing and catch-up rule never overflow the
//! WAN's bottleneck queue although the boards send their time steps in bursts.

use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::SimReceiver;
use linkemu::sim::{Endpoint, Sim};
use linkemu::{Duplex, Link, LinkConfig, LossModel};
use pacing::{Pacer, Spacing};
use stream::relay::{Relay, RelayConfig};
use stream::sender::{MemorySource, Sender, SenderConfig, StationSpec};
use stream::wire::SeqFormat;
use stream::{FrameSink, PacedSchedule, Receiver, ReceiverConfig};
use vdif::{FrameLayout, VdifHeader};

const STATION: u16 = 0x4566; // "Ef"
const THREADS: u16 = 4;
const FPS: u32 = 4000; // per thread
const PAYLOAD: usize = 2000;
const SECONDS: u32 = 3;
const FIRST_SECOND: u32 = 700_000_000;

fn layout() -> FrameLayout {
    let rate = f64::from(FPS) * f64::from(THREADS) * PAYLOAD as f64 * 8.0;
    let l = FrameLayout::new(rate, 2, 8, u32::from(THREADS), PAYLOAD).expect("layout");
    assert_eq!(l.frames_per_second.get(), FPS);
    l
}

/// What a frame's payload holds: its thread and frame number, so any frame the chain delivers
/// can be checked against what the backend sent (looped passes repeat the payloads; the sender
/// moves their time on).
fn stamp(thread: u16, frame_number: u32) -> [u8; 8] {
    ((u64::from(thread) << 32) | u64::from(frame_number)).to_le_bytes()
}

/// One second of the station's frames, the threads of a time step together as a DBBC3 sends.
fn one_second() -> Vec<u8> {
    let l = layout();
    let mut out = Vec::with_capacity(l.frame_len * (FPS * u32::from(THREADS)) as usize);
    for k in 0..FPS {
        for thread in 0..THREADS {
            let mut h = l.header(STATION);
            h.seconds = FIRST_SECOND;
            h.frame_number = k;
            h.thread_id = thread;
            let mut frame = vec![0u8; l.frame_len];
            h.emit(&mut frame[..32]).expect("header fits");
            let s = stamp(thread, k);
            for chunk in frame[32..].chunks_mut(8) {
                chunk.copy_from_slice(&s[..chunk.len()]);
            }
            out.extend_from_slice(&frame);
        }
    }
    out
}

/// Where a frame sits in the run: (thread, frame index from the first second).
fn position(h: &VdifHeader) -> (u16, u64) {
    let second = u64::from(h.seconds - FIRST_SECOND);
    (h.thread_id, second * u64::from(FPS) + u64::from(h.frame_number))
}

/// A sink that keeps no frame, only what it saw: positions of valid frames, whether each one's
/// payload is what the backend sent, the filled count and the segments.
#[derive(Default)]
struct CheckingSink {
    valid: BTreeSet<(u16, u64)>,
    filled: BTreeSet<(u16, u64)>,
    corrupt: u64,
    segments: u64,
    bytes: u64,
}

impl FrameSink for CheckingSink {
    fn frame(&mut self, _station: vdif::StationId, frame: &[u8], filled: bool) {
        self.segments = self.segments.max(1);
        self.bytes += frame.len() as u64;
        let Ok(h) = VdifHeader::parse(frame) else {
            self.corrupt += 1;
            return;
        };
        let at = position(&h);
        if filled {
            self.filled.insert(at);
            return;
        }
        let s = stamp(h.thread_id, h.frame_number);
        let intact = frame[32..].chunks(8).all(|c| c == &s[..c.len()]);
        if !intact || h.invalid || !self.valid.insert(at) {
            self.corrupt += 1;
        }
    }
    fn discontinuity(&mut self, _station: vdif::StationId) {
        self.segments += 1;
    }
}

fn board_addr(board: u16) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 10], 46_000 + board))
}

/// The station: two boards → LAN → relay. Its transmits are the relay's output onto the WAN; what
/// comes back over the WAN (NAKs) goes to the relay.
struct Station {
    boards: Vec<Sender<PacedSchedule>>,
    lan: Link<(u16, Vec<u8>)>,
    relay: Relay,
    tee: CheckingSink,
    /// Positions of the frames the relay was handed.
    reached_relay: BTreeSet<(u16, u64)>,
    out: VecDeque<Vec<u8>>,
}

impl Station {
    fn send_due_board_frames(&mut self, now: Instant) {
        for (b, board) in self.boards.iter_mut().enumerate() {
            for _ in 0..10_000 {
                let Some(t) = board.poll_transmit(now).expect("no loop overflow") else {
                    break;
                };
                for d in t.datagrams() {
                    let _ = self.lan.push(now, (b as u16, d.to_vec()), d.len());
                }
                board.on_transmitted(now);
            }
        }
    }

    fn deliver_lan(&mut self, now: Instant) {
        while let Some((b, d)) = self.lan.poll(now) {
            if let Ok(h) = VdifHeader::parse(&d) {
                self.reached_relay.insert(position(&h));
            }
            self.relay
                .handle_datagram(now, 0, board_addr(b), &d, false, &mut self.tee);
        }
    }
}

impl Endpoint for Station {
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        self.relay.handle_return(now, datagram);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.out.is_empty() {
            if let Some(t) = self.relay.poll_transmit(now).expect("relay transmits") {
                self.out.extend(t.datagrams().map(std::borrow::Cow::into_owned));
                self.relay.on_transmitted(now);
            }
        }
        self.out.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let boards = self.boards.iter().filter_map(Sender::poll_timeout);
        boards
            .chain(self.lan.next_release())
            .chain(self.relay.poll_timeout())
            .min()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.send_due_board_frames(now);
        self.deliver_lan(now);
        self.relay.handle_timeout(now, &mut self.tee);
    }
}

/// The correlator's receiver.
type Correlator = SimReceiver<CheckingSink>;

/// A DBBC3-like backend: two boards of two threads each, each board sending a time step's
/// frames back to back on the absolute timeline of a step, looping one second of data.
fn boards(t0: Instant) -> Vec<Sender<PacedSchedule>> {
    let l = layout();
    let data = Arc::new(one_second());
    let rate = f64::from(FPS) * f64::from(THREADS) * PAYLOAD as f64 * 8.0;
    (0..2u16)
        .map(|b| {
            let mut board = Sender::new(SenderConfig {
                format: SeqFormat::None,
                session: 1,
                first_seq: 0,
                burst: 1,
                arq_latency: None,
                inject_loss: LossModel::None,
                seed: 0,
                start: t0,
                duration: Some(Duration::from_secs(u64::from(SECONDS))),
            });
            let share = [2 * b, 2 * b + 1];
            let step = Spacing::from_rate((PAYLOAD * usize::from(THREADS)) as u64, rate as u64);
            let source = MemorySource::shared(data.clone(), l.frame_len, 1).only_threads(&share);
            board.add_station(
                StationSpec {
                    name: format!("board {b}"),
                    station_id: vdif::StationId(STATION),
                    threads: THREADS,
                    frame_len: l.frame_len,
                    data_len: PAYLOAD,
                    fps: vdif::FrameRate::new(FPS).unwrap(),
                    rate_bps: vdif::BitRate::new(rate as u64 / 2).unwrap(),
                },
                Box::new(source),
                PacedSchedule::steps(Pacer::new(t0, step), 2),
            );
            board
        })
        .collect()
}

struct Outcome {
    sim: Sim<Station, Correlator>,
    lan_lost: u64,
}

fn run(seed: u64) -> Outcome {
    let t0 = Instant::now();
    let lan = Link::new(
        LinkConfig {
            delay: Duration::from_micros(100),
            jitter: Duration::from_micros(1500),
            reorder: true,
            loss: LossModel::Bernoulli { p: 0.002 },
            ..LinkConfig::default()
        },
        seed,
    )
    .expect("LAN");
    let mut relay_cfg = RelayConfig::new(SeqFormat::None, SeqFormat::Native, t0);
    // The VSI-S mode's rate of the whole station: the relay learns the 4 threads and splits it.
    relay_cfg.station_frames_per_second = vdif::FrameRate::new(FPS * u32::from(THREADS)).ok();
    relay_cfg.arq_latency = Some(Duration::from_millis(400));
    let latency = Duration::from_millis(300);
    let receiver = Receiver::new(ReceiverConfig {
        format: SeqFormat::Native,
        latency,
        arq: true,
        ..ReceiverConfig::default()
    });
    // 50 ms each way, 0.5 % loss both ways, a 1 Gb/s bottleneck whose queue holds 40 frames.
    let wan = LinkConfig {
        rate_bps: Some(1_000_000_000),
        buffer_bytes: 40 * layout().frame_len as u64,
        delay: Duration::from_millis(50),
        loss: LossModel::Bernoulli { p: 0.005 },
        ..LinkConfig::default()
    };
    let station = Station {
        boards: boards(t0),
        lan,
        relay: Relay::new(relay_cfg),
        tee: CheckingSink::default(),
        reached_relay: BTreeSet::new(),
        out: VecDeque::new(),
    };
    let correlator = SimReceiver::new(receiver, CheckingSink::default(), t0);
    let link = Duplex::symmetric(wan, seed + 1).expect("WAN");
    let mut sim = Sim::new(station, correlator, link, t0);
    sim.run_for(Duration::from_secs(u64::from(SECONDS)) + Duration::from_secs(2))
        .expect("simulation runs");
    assert!(sim.a().boards.iter().all(Sender::is_done), "the boards sent everything");
    sim.a_mut().relay.finish();
    let c = sim.b_mut();
    c.receiver.finish(&mut c.sink);
    let lan_lost = sim.a().lan.stats().dropped_loss.packets;
    Outcome { sim, lan_lost }
}

#[test]
fn backend_relay_wan_receiver_delivers_every_frame_that_reached_the_relay() {
    let o = run(5);
    let total = u64::from(SECONDS * FPS) * u64::from(THREADS);
    let station = o.sim.a();
    let c = o.sim.b();
    let all: BTreeSet<(u16, u64)> = (0..THREADS)
        .flat_map(|t| (0..u64::from(SECONDS * FPS)).map(move |k| (t, k)))
        .collect();
    let never_reached: BTreeSet<_> = all.difference(&station.reached_relay).copied().collect();
    let wan = o.sim.stats_a_to_b();
    let arq = station.relay.arq_stats().expect("ARQ on the relay's output");
    let s = &c.receiver.summaries()[0];
    println!(
        "{total} frames; LAN lost {}; WAN lost {} (queue drops {}), NAKs {} → resent {}; receiver: valid {} filled {} recovered {:?}",
        o.lan_lost,
        wan.dropped_loss.packets,
        wan.dropped_queue.packets,
        arq.naks,
        arq.resent,
        s.window.written_valid,
        s.window.written_filled,
        s.arq.map(|a| a.recovered)
    );
    assert!(o.lan_lost > 30, "the LAN lost frames ({})", o.lan_lost);
    assert!(
        wan.dropped_loss.packets > 100,
        "the WAN lost frames ({})",
        wan.dropped_loss.packets
    );
    assert_eq!(never_reached.len() as u64, o.lan_lost);

    // The relay: 4 threads learned, the mode's rate split over them, each board counted.
    let r = &station.relay.stations()[0];
    assert_eq!(
        (r.thread_ids.clone(), r.frames_per_second.get()),
        (vec![0, 1, 2, 3], FPS)
    );
    assert_eq!(r.frames_in, total - o.lan_lost);
    let senders = station.relay.senders();
    assert_eq!(senders.len(), 2);
    assert_eq!(senders.iter().map(|s| s.frames).sum::<u64>(), total - o.lan_lost);
    let mut shares: Vec<Vec<u16>> = senders.iter().map(|s| s.threads.clone()).collect();
    shares.sort();
    assert_eq!(shares, vec![vec![0, 1], vec![2, 3]], "each board's threads, per sender");
    // Lost in its input: the LAN's losses it could see (a later frame of the thread came).
    let last_seen = |t: u16| station.reached_relay.range((t, 0)..(t + 1, 0)).next_back().map(|p| p.1);
    let visible = never_reached
        .iter()
        .filter(|(t, k)| last_seen(*t).is_some_and(|l| *k < l))
        .count() as u64;
    assert_eq!(r.lost_in_input, visible);
    assert_eq!(r.overflow_dropped, 0);
    // The tee: exactly what came in, intact.
    assert_eq!(station.tee.valid, station.reached_relay);
    assert_eq!((station.tee.corrupt, station.tee.filled.len()), (0, 0));

    // The WAN's shallow queue never overflowed: boards' bursts and LAN jitter were smoothed.
    assert_eq!(wan.dropped_queue.packets, 0, "the relay burst into the bottleneck");

    // The correlator: one continuous stream, every frame at its place, intact.
    assert_eq!((c.sink.segments, c.sink.corrupt), (1, 0));
    assert_eq!(s.window.written_valid + s.window.written_filled, total);
    assert_eq!(&c.sink.valid | &c.sink.filled, all);
    // Every frame that never reached the relay is filled; ARQ repaired what the WAN lost.
    assert!(never_reached.is_subset(&c.sink.filled));
    let unrepaired = c.sink.filled.len() as u64 - o.lan_lost;
    assert!(
        unrepaired * 100 <= wan.dropped_loss.packets,
        "ARQ left {unrepaired} of the WAN's {} losses",
        wan.dropped_loss.packets
    );
}

#[test]
fn the_pipeline_is_deterministic_for_a_seed() {
    let a = run(9);
    let b = run(9);
    let key = |o: &Outcome| {
        (
            o.lan_lost,
            o.sim.stats_a_to_b().dropped_loss.packets,
            o.sim.b().sink.filled.clone(),
            o.sim.a().relay.stations()[0].queue_delay_ns.clone(),
        )
    };
    assert_eq!(key(&a), key(&b));
}

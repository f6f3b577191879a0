//! The sender state machine against the receiver over a simulated lossy path, in virtual time
//! and deterministically (seeded link and injected loss): native framing, 2000 frames/s of 1056
//! bytes, 20 ms RTT, 1 % random loss in both directions. With ARQ every lost frame is repaired
//! within the receiver's latency; without it the loss shows as filled frames. A looped source
//! arrives as one continuous stream (the sender advances the VDIF time of later passes), and GSO
//! bursts arrive as single frames.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod common;

use common::SimReceiver;
use linkemu::sim::{Endpoint, Sim};
use linkemu::{Duplex, LinkConfig, LossModel};
use pacing::{Pacer, Spacing};
use stream::sender::{MemorySource, Sender, SenderConfig, StationSpec};
use stream::wire::SeqFormat;
use stream::PacedSchedule;
use stream::{Receiver, ReceiverConfig, VecSink};
use vdif::{FrameLayout, VdifHeader};

/// 16.384 Mb/s in 1024-byte payloads: 2000 frames per second, one thread.
const FPS: u32 = 2000;
const RATE_BPS: f64 = 16.384e6;
const STATION: u16 = 0x4566;

fn layout() -> FrameLayout {
    let l = FrameLayout::new(RATE_BPS, 2, 1, 1, 1024).expect("layout");
    assert_eq!(l.frames_per_second.get(), FPS);
    l
}

/// `seconds` of contiguous frames starting at VDIF second 700 000 000, each payload stamped with
/// its index.
fn frames(seconds: u32) -> Vec<u8> {
    let l = layout();
    let mut out = Vec::new();
    for n in 0..u64::from(seconds * FPS) {
        let mut frame = vec![0u8; l.frame_len];
        let mut h = l.header(STATION);
        h.seconds = 700_000_000 + (n / u64::from(FPS)) as u32;
        h.frame_number = (n % u64::from(FPS)) as u32;
        h.emit(&mut frame[..32]).expect("header fits");
        frame[32..40].copy_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&frame);
    }
    out
}

/// The sender as a simulation endpoint: a transmit's datagrams go out one by one.
struct Tx {
    sender: Sender<PacedSchedule>,
    queue: VecDeque<Vec<u8>>,
    transmits: u64,
}

impl Endpoint for Tx {
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        self.sender.handle_nak(now, datagram);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.queue.is_empty() {
            if let Some(t) = self.sender.poll_transmit(now).expect("no loop overflow") {
                self.transmits += 1;
                self.queue.extend(t.datagrams().map(std::borrow::Cow::into_owned));
            }
        }
        self.queue.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.sender.poll_timeout()
    }
    fn handle_timeout(&mut self, _now: Instant) {}
}

type Rx = SimReceiver<VecSink>;

struct Run {
    arq: bool,
    loss: f64,
    inject_loss: f64,
    burst: usize,
    /// Seconds of frames in the source.
    seconds: u32,
    /// Loop the source this long (0: send it once).
    loop_for: Duration,
    seed: u64,
}

struct Outcome {
    sim: Sim<Tx, Rx>,
    lost_on_wire: u64,
}

fn run(r: Run) -> Outcome {
    let l = layout();
    let t0 = Instant::now();
    let latency = Duration::from_millis(200);
    let mut sender = Sender::new(SenderConfig {
        format: SeqFormat::Native,
        session: 7,
        first_seq: 0,
        burst: r.burst,
        arq_latency: r.arq.then_some(latency),
        inject_loss: LossModel::Bernoulli { p: r.inject_loss },
        seed: r.seed,
        start: t0,
        duration: (!r.loop_for.is_zero()).then_some(r.loop_for),
    });
    let looping = !r.loop_for.is_zero();
    sender.add_station(
        StationSpec {
            name: "memory".into(),
            station_id: vdif::StationId(STATION),
            threads: 1,
            frame_len: l.frame_len,
            data_len: 1024,
            fps: vdif::FrameRate::new(FPS).unwrap(),
            rate_bps: vdif::BitRate::new(RATE_BPS as u64).unwrap(),
        },
        Box::new(MemorySource::new(
            frames(r.seconds),
            l.frame_len,
            if looping { r.seconds } else { 0 },
        )),
        PacedSchedule::frames(Pacer::new(t0, Spacing::from_nanos(1_000_000_000 / u64::from(FPS)))),
    );
    let receiver = Receiver::new(ReceiverConfig {
        format: SeqFormat::Native,
        latency,
        arq: r.arq,
        ..ReceiverConfig::default()
    });
    let path = LinkConfig {
        delay: Duration::from_millis(10),
        loss: LossModel::Bernoulli { p: r.loss },
        ..LinkConfig::default()
    };
    let link = Duplex::symmetric(path, r.seed).expect("link");
    let mut sim = Sim::new(
        Tx {
            sender,
            queue: VecDeque::new(),
            transmits: 0,
        },
        SimReceiver::new(receiver, VecSink::default(), t0),
        link,
        t0,
    );
    let sending = if looping {
        r.loop_for
    } else {
        Duration::from_secs(u64::from(r.seconds))
    };
    sim.run_for(sending + Duration::from_secs(1)).expect("simulation runs");
    assert!(sim.a().sender.is_done(), "every frame left");
    let rx = sim.b_mut();
    rx.receiver.finish(&mut rx.sink);
    let lost_on_wire = sim.stats_a_to_b().dropped_loss.packets;
    Outcome { sim, lost_on_wire }
}

fn valid_frames(sink: &VecSink) -> u64 {
    sink.segments
        .iter()
        .flat_map(|s| s.chunks(layout().frame_len))
        .filter(|f| VdifHeader::parse(f).is_ok_and(|h| !h.invalid))
        .count() as u64
}

#[test]
fn arq_repairs_every_lost_frame_within_the_latency() {
    let o = run(Run {
        arq: true,
        loss: 0.01,
        inject_loss: 0.0,
        burst: 1,
        seconds: 10,
        loop_for: Duration::ZERO,
        seed: 11,
    });
    let rx = &o.sim.b();
    let s = &rx.receiver.summaries()[0];
    let sent = &o.sim.a().sender.station_results()[0];
    let arq = o.sim.a().sender.arq_stats().expect("ARQ on");
    println!(
        "lost on the wire {}, NAKs {}, resent {}, receiver {:?}",
        o.lost_on_wire, arq.naks, arq.resent, s.arq
    );
    assert_eq!(sent.frames_sent, 20_000);
    assert!(o.lost_on_wire > 150, "the path lost frames ({})", o.lost_on_wire);
    assert!(arq.resent >= o.lost_on_wire / 2, "repeats sent ({})", arq.resent);
    assert_eq!(rx.sink.segments.len(), 1, "one continuous segment");
    assert_eq!(s.window.written_valid, 20_000, "every frame written valid");
    assert_eq!(s.window.written_filled, 0, "nothing filled");
    assert_eq!(valid_frames(&rx.sink), 20_000);
}

#[test]
fn without_arq_the_loss_shows() {
    let o = run(Run {
        arq: false,
        loss: 0.01,
        inject_loss: 0.0,
        burst: 1,
        seconds: 10,
        loop_for: Duration::ZERO,
        seed: 11,
    });
    let rx = &o.sim.b();
    let s = &rx.receiver.summaries()[0];
    assert!(o.sim.a().sender.arq_stats().is_none());
    assert!(o.lost_on_wire > 150);
    assert_eq!(
        s.window.written_valid + s.window.written_filled,
        20_000,
        "continuous output"
    );
    assert_eq!(
        s.window.written_filled, o.lost_on_wire,
        "every lost frame filled, nothing else"
    );
    assert_eq!(rx.sink.filled, o.lost_on_wire);
}

#[test]
fn a_looped_source_arrives_as_one_stream_with_advancing_time() {
    // One second of frames looped for three: the sender advances the time of passes 2 and 3.
    let o = run(Run {
        arq: false,
        loss: 0.0,
        inject_loss: 0.0,
        burst: 1,
        seconds: 1,
        loop_for: Duration::from_secs(3),
        seed: 3,
    });
    let rx = &o.sim.b();
    let sent = &o.sim.a().sender.station_results()[0];
    assert_eq!(sent.frames_sent, 3 * u64::from(FPS));
    assert_eq!(sent.loops, 2);
    assert_eq!(rx.sink.segments.len(), 1);
    assert_eq!(rx.sink.filled, 0);
    let frame_len = layout().frame_len;
    let times: Vec<(u32, u32)> = rx.sink.segments[0]
        .chunks(frame_len)
        .map(|f| {
            VdifHeader::parse(f)
                .map(|h| (h.seconds, h.frame_number))
                .expect("header")
        })
        .collect();
    assert_eq!(times.len(), 3 * FPS as usize);
    for (n, t) in times.iter().enumerate() {
        let n = n as u32;
        assert_eq!(*t, (700_000_000 + n / FPS, n % FPS), "frame {n}");
    }
}

#[test]
fn bursts_and_injected_loss_are_counted_and_arrive_as_frames() {
    let o = run(Run {
        arq: false,
        loss: 0.0,
        inject_loss: 0.02,
        burst: 4,
        seconds: 2,
        loop_for: Duration::ZERO,
        seed: 5,
    });
    let rx = &o.sim.b();
    let tx = o.sim.a();
    let sent = &tx.sender.station_results()[0];
    let s = &rx.receiver.summaries()[0];
    assert_eq!(sent.frames_sent, 4000);
    assert!(sent.injected_drops > 40, "injected drops {}", sent.injected_drops);
    assert!(
        tx.transmits <= 1000,
        "frames left in bursts of 4 ({} transmits)",
        tx.transmits
    );
    assert_eq!(o.lost_on_wire, 0);
    assert_eq!(
        s.window.written_filled, sent.injected_drops,
        "the injected loss shows, nothing else"
    );
    assert_eq!(s.window.written_valid + s.window.written_filled, 4000);
    assert_eq!(sent.departure_gap_ns.count, 999, "one gap per burst after the first");
}

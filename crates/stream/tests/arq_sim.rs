//! Deadline-bounded ARQ over a simulated long lossy path, in virtual time and deterministically:
//! 64 000 frames/s (the frame rate of 4.096 Gb/s in 8000-byte frames), 100 ms RTT, 1 % random
//! loss in both directions, 300 ms latency. The target: ≥ 99 % of lost frames recovered
//! at ≤ 3 % extra bandwidth.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use linkemu::{Link, LinkConfig, LossModel};
use stream::arq::RetransmitBuffer;
use stream::wire::{encode_data, Nak, NativePrefix, SeqFormat};
use stream::{Receiver, ReceiverConfig, VecSink};
use vdif::FrameLayout;

struct Outcome {
    lost_on_wire: u64,
    recovered: u64,
    filled: u64,
    written: u64,
    extra_bandwidth: f64,
}

fn run(arq: bool, loss: f64, seconds: u64, seed: u64) -> Outcome {
    let l = FrameLayout::new(524.288e6, 2, 8, 1, 1024).unwrap();
    assert_eq!(l.frames_per_second.get(), 64_000);
    let path = |seed| {
        Link::new(
            LinkConfig {
                delay: Duration::from_millis(50),
                loss: LossModel::Bernoulli { p: loss },
                ..LinkConfig::default()
            },
            seed,
        )
        .unwrap()
    };
    let (mut fwd, mut back) = (path(seed), path(seed + 1));
    let t0 = Instant::now();
    let spacing = Duration::from_nanos(1_000_000_000 / 64_000);
    let latency = Duration::from_millis(300);
    let mut rx = Receiver::new(ReceiverConfig {
        format: SeqFormat::Native,
        latency,
        arq,
        ..ReceiverConfig::default()
    });
    let mut buf = RetransmitBuffer::new((0.3 * 64_000.0) as usize, 0.1);
    let from: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut sink = VecSink::default();
    let total = seconds * 64_000;
    let mut frame = vec![0u8; l.frame_len];
    let mut d = Vec::new();
    let mut sent_bytes = 0u64;
    let mut next_poll = t0;
    let mut n = 0u64;
    let mut lost_on_wire = 0u64;
    let end = t0 + spacing * total as u32 + Duration::from_secs(1);
    let mut now = t0;
    while now < end {
        let next_send = (n < total).then(|| t0 + spacing * n as u32);
        let next = [next_send, fwd.next_release(), back.next_release(), Some(next_poll)]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        now = next;
        if next_send == Some(now) {
            let mut h = l.header(0x4566);
            h.seconds = 700_000_000 + (n / 64_000) as u32;
            h.frame_number = (n % 64_000) as u32;
            h.emit(&mut frame[..32]).unwrap();
            frame[32..40].copy_from_slice(&n.to_le_bytes());
            let p = NativePrefix {
                retransmit: false,
                stream: 0,
                seq: 1_000 + n,
                frames_per_second: 64_000,
                threads: 1,
                session: 1,
            };
            encode_data(SeqFormat::Native, &p, &frame, &mut d);
            buf.on_sent(p.seq, &d);
            sent_bytes += d.len() as u64;
            if fwd.push(now, d.clone(), d.len()) != linkemu::Admission::Accepted {
                lost_on_wire += 1;
            }
            n += 1;
        }
        while let Some(p) = fwd.poll(now) {
            rx.handle_datagram(now, from, &p, false, &mut sink);
        }
        while let Some(p) = back.poll(now) {
            if let Ok(nak) = Nak::parse(&p) {
                buf.on_nak(&nak);
            }
            // Repeats go out as soon as asked for, within the budget.
            while let Some(r) = buf.next_repeat() {
                let mut r = r.to_vec();
                r[5] |= 1;
                let len = r.len();
                let _ = fwd.push(now, r, len);
            }
        }
        if now >= next_poll {
            for (_, nak) in rx.poll_naks(now) {
                let mut b = Vec::new();
                nak.encode(&mut b);
                let len = b.len();
                let _ = back.push(now, b, len);
            }
            next_poll = now + Duration::from_millis(1);
        }
    }
    rx.finish(&mut sink);
    let s = &rx.summaries()[0];
    let arq_stats = s.arq.unwrap_or_default();
    Outcome {
        lost_on_wire,
        recovered: arq_stats.recovered,
        filled: s.window.written_filled,
        written: s.window.written_valid + s.window.written_filled,
        extra_bandwidth: buf.stats().resent_bytes as f64 / sent_bytes as f64,
    }
}

#[test]
fn arq_recovers_99_percent_at_1_percent_loss_100ms_rtt() {
    let o = run(true, 0.01, 10, 7);
    let recovered = o.recovered as f64 / o.lost_on_wire as f64;
    println!(
        "ARQ 1 % loss, 100 ms RTT, 300 ms latency: lost on wire {}, recovered {} ({:.3} %), still filled {}, extra bandwidth {:.3} %",
        o.lost_on_wire,
        o.recovered,
        100.0 * recovered,
        o.filled,
        100.0 * o.extra_bandwidth
    );
    assert_eq!(o.written, 640_000, "continuous output");
    assert!(o.lost_on_wire > 5000, "the link lost frames ({})", o.lost_on_wire);
    assert!(recovered >= 0.99, "recovered {recovered}");
    assert!(o.extra_bandwidth <= 0.03, "extra bandwidth {}", o.extra_bandwidth);
    assert!(o.filled <= o.lost_on_wire - o.recovered);
}

#[test]
fn without_arq_the_loss_shows_as_filled_frames() {
    let o = run(false, 0.01, 2, 9);
    assert_eq!(o.written, 128_000);
    assert_eq!(o.recovered, 0);
    assert_eq!(
        o.filled, o.lost_on_wire,
        "every lost frame written invalid, nothing else"
    );
}

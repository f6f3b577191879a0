//! Per-frame CPU of the live data path's state machines, without sockets: the framing (encode a
//! native datagram, parse it), the receiver (parse, admit, place in the reorder window, write to
//! a sink that keeps nothing) in order and with 1 % of frames lost, and the relay (bare VDIF in,
//! queued, paced out with native framing: `handle_datagram`, `poll_transmit`, `on_transmitted`).
//! 8032-byte frames of 4 threads at 64 000 frames/s (4.096 Gb/s), the clock advanced by each
//! frame's spacing. What issue 30 asks to see move in the PR that moves it.
//!
//! Run: `cargo bench -p stream --bench data_path` (criterion's throughput is in frames).

// criterion_group! defines an undocumented fn.
#![allow(missing_docs)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use stream::relay::{Relay, RelayConfig};
use stream::wire::{encode_data, parse_data, NativePrefix, SeqFormat};
use stream::{FrameSink, Receiver, ReceiverConfig};
use vdif::FrameLayout;

const THREADS: u16 = 4;
const FPS: u32 = 16_000; // per thread: 64 000 frames/s in all
const BATCH: usize = 4096;

/// Counts what it is handed and keeps nothing (a disk writer's cost is not the window's).
#[derive(Default)]
struct NullSink {
    frames: u64,
}

impl FrameSink for NullSink {
    fn frame(&mut self, _station: vdif::StationId, frame: &[u8], _filled: bool) {
        // The frame itself is kept from being optimised away, not copied.
        black_box(frame);
        self.frames += 1;
    }
    fn discontinuity(&mut self, _station: vdif::StationId) {}
}

/// `BATCH` consecutive frames of a 4-thread station, from time step `from`.
fn frames(from: u32) -> Vec<Vec<u8>> {
    let l = FrameLayout::new(4.096e9, 2, 8, u32::from(THREADS), 8000).expect("layout");
    (0..BATCH as u32)
        .map(|i| {
            let k = from + i / u32::from(THREADS);
            let mut h = l.header(0x4566);
            h.seconds = 1_000 + k / FPS;
            h.frame_number = k % FPS;
            h.thread_id = (i % u32::from(THREADS)) as u16;
            let mut f = vec![(i % 251) as u8; l.frame_len];
            h.emit(&mut f[..32]).expect("header fits");
            f
        })
        .collect()
}

fn native(frames: &[Vec<u8>], first_seq: u64) -> Vec<Vec<u8>> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let p = NativePrefix {
                retransmit: false,
                stream: 0,
                seq: first_seq + i as u64,
                frames_per_second: FPS,
                threads: THREADS,
                session: 3,
            };
            let mut d = Vec::new();
            encode_data(SeqFormat::Native, &p, f, &mut d);
            d
        })
        .collect()
}

fn spacing() -> Duration {
    Duration::from_nanos(1_000_000_000 / (u64::from(FPS) * u64::from(THREADS)))
}

fn framing(c: &mut Criterion) {
    let fs = frames(0);
    let ds = native(&fs, 0);
    let mut g = c.benchmark_group("framing");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("encode native", |b| {
        let mut out = Vec::with_capacity(8100);
        b.iter(|| {
            for (i, f) in fs.iter().enumerate() {
                let p = NativePrefix {
                    retransmit: false,
                    stream: 0,
                    seq: i as u64,
                    frames_per_second: FPS,
                    threads: THREADS,
                    session: 3,
                };
                encode_data(SeqFormat::Native, &p, black_box(f), &mut out);
            }
            black_box(out.len())
        });
    });
    g.bench_function("parse native", |b| {
        b.iter(|| {
            ds.iter()
                .filter_map(|d| parse_data(SeqFormat::Native, black_box(d)).ok())
                .map(|p| u64::from(p.header.frame_number))
                .sum::<u64>()
        });
    });
    g.finish();
}

/// A receiver fed `BATCH` native datagrams per iteration, the stream's time running on across
/// iterations; `lose_every`: drop every n-th datagram (0: none).
fn receiver_case(c: &mut Criterion, name: &str, lose_every: usize) {
    let from: SocketAddr = "192.0.2.1:5000".parse().expect("address");
    let t0 = Instant::now();
    let mut g = c.benchmark_group("receiver");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(name, |b| {
        let mut rx = Receiver::new(ReceiverConfig {
            format: SeqFormat::Native,
            latency: Duration::from_millis(20),
            ..ReceiverConfig::default()
        });
        let mut sink = NullSink::default();
        let mut step = 0u32;
        let mut now = t0;
        b.iter_batched(
            || {
                let fs = frames(step);
                let seq = u64::from(step) * u64::from(THREADS);
                step += (BATCH / usize::from(THREADS)) as u32;
                native(&fs, seq)
            },
            |ds| {
                for (i, d) in ds.iter().enumerate() {
                    now += spacing();
                    if lose_every > 0 && i % lose_every == 0 {
                        continue;
                    }
                    rx.handle_datagram(now, from, d, false, &mut sink);
                }
                rx.expire(now);
                black_box(sink.frames)
            },
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

fn receiver(c: &mut Criterion) {
    receiver_case(c, "in order", 0);
    receiver_case(c, "1 % lost", 100);
}

fn relay(c: &mut Criterion) {
    let from: SocketAddr = "192.0.2.10:46000".parse().expect("address");
    let t0 = Instant::now();
    let mut g = c.benchmark_group("relay");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("bare in, native out", |b| {
        let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::Native, t0);
        cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
        cfg.threads = Some(THREADS);
        cfg.burst = 16;
        let mut r = Relay::new(cfg);
        let mut tee = NullSink::default();
        let mut step = 0u32;
        let mut now = t0;
        let mut sent = 0u64;
        b.iter_batched(
            || {
                let fs = frames(step);
                step += (BATCH / usize::from(THREADS)) as u32;
                fs
            },
            |fs| {
                for f in &fs {
                    now += spacing();
                    r.handle_datagram(now, 0, from, f, false, &mut tee);
                    while let Ok(Some(t)) = r.poll_transmit(now) {
                        sent += t.datagram_count() as u64;
                        r.on_transmitted(now);
                    }
                }
                black_box(sent)
            },
            BatchSize::LargeInput,
        );
    });
    // What the socket loop runs (issue 30): datagrams as slices of one receive buffer, queued
    // and sent as handles, the frames never copied.
    g.bench_function("bare in, native out, shared buffers", |b| {
        let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::Native, t0);
        cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
        cfg.threads = Some(THREADS);
        cfg.burst = 16;
        let mut r = Relay::new(cfg);
        let mut tee = NullSink::default();
        let mut step = 0u32;
        let mut now = t0;
        let mut sent = 0u64;
        b.iter_batched(
            || {
                let fs = frames(step);
                step += (BATCH / usize::from(THREADS)) as u32;
                let len = fs.first().map_or(0, Vec::len);
                (bytes::Bytes::from(fs.concat()), len)
            },
            |(buf, len)| {
                for k in 0..buf.len() / len.max(1) {
                    now += spacing();
                    let d = buf.slice(k * len..(k + 1) * len);
                    r.handle_shared_datagram(now, 0, from, &d, false, &mut tee);
                    while let Ok(Some(t)) = r.poll_transmit(now) {
                        sent += t.datagram_count() as u64;
                        r.on_transmitted(now);
                    }
                }
                black_box(sent)
            },
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

criterion_group!(data_path, framing, receiver, relay);
criterion_main!(data_path);

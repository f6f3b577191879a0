//! Per-frame cost of a header's time and position (`unix_seconds`, `frame_index`), the
//! arithmetic the receiver, reorder window and relay run for every frame, against what they ran
//! before (a `[i64; 64]` epoch table held in each struct, indexed inline). Reported per frame:
//! each iteration handles a batch of 1024 headers of mixed epochs, seconds and frame numbers.
//!
//! `cargo bench -p vdif --bench frame_time`

// criterion_group! defines an undocumented fn.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use vdif::VdifHeader;

const BATCH: usize = 1024;
const FPS: u32 = 32_000;

fn rate() -> vdif::FrameRate {
    vdif::FrameRate::new(FPS).expect("32 000 frames/s is a rate")
}

fn headers() -> Vec<VdifHeader> {
    let h = vdif::FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap().header(1);
    (0..BATCH as u32)
        .map(|i| VdifHeader {
            ref_epoch: 40 + (i % 14) as u8,
            seconds: 1_000 + i * 7,
            frame_number: (i * 31) % FPS,
            ..h
        })
        .collect()
}

/// The code this replaced, as it stood in stream's receiver.rs/window.rs/relay.rs.
struct OldPerStructTable {
    epoch_unix: [i64; 64],
}

impl OldPerStructTable {
    fn new() -> Self {
        let mut epoch_unix = [0i64; 64];
        for (e, u) in epoch_unix.iter_mut().enumerate() {
            *u = vdif::time::epoch_unix(e as u8);
        }
        OldPerStructTable { epoch_unix }
    }

    fn position(&self, h: &VdifHeader, fps: u32) -> u64 {
        let unix = self.epoch_unix[usize::from(h.ref_epoch & 63)] + i64::from(h.seconds);
        (unix.max(0) as u64) * u64::from(fps) + u64::from(h.frame_number)
    }
}

fn frame_time(c: &mut Criterion) {
    let hs = headers();
    let old = OldPerStructTable::new();
    // Same answers, or the comparison means nothing.
    assert!(hs.iter().all(|h| h.frame_index(rate()) == old.position(h, FPS)));
    let mut g = c.benchmark_group("frame_time");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("frame_index (vdif, static EPOCH_UNIX)", |b| {
        b.iter(|| {
            black_box(&hs)
                .iter()
                .fold(0u64, |a, h| a.wrapping_add(h.frame_index(black_box(rate()))))
        })
    });
    g.bench_function("position (before: per-struct [i64; 64])", |b| {
        b.iter(|| {
            let t = black_box(&old);
            black_box(&hs)
                .iter()
                .fold(0u64, |a, h| a.wrapping_add(t.position(h, black_box(FPS))))
        })
    });
    g.bench_function("unix_seconds", |b| {
        b.iter(|| {
            black_box(&hs)
                .iter()
                .fold(0i64, |a, h| a.wrapping_add(h.unix_seconds()))
        })
    });
    g.finish();
}

criterion_group!(benches, frame_time);
criterion_main!(benches);

//! The signal generator: headers, determinism, sampler statistics and the correlation that
//! makes fringes (the property the correlator of a later issue relies on).

use vdif::codec::{decode, deinterleave};
use vdif::gen::{expected_header, GenConfig, Generator, StationSpec};
use vdif::stats::{StateCounter, Verdict};
use vdif::{FrameLayout, FrameScanner, ScanEvent, VdifHeader};

fn config(snr: f64, delay_samples: f64, channels: u32, threads: u32, bits: u8) -> GenConfig {
    // 8 Mb/s per channel: 4 MS/s of 2-bit data, 1000-byte frames.
    let layout = FrameLayout::new(
        8e6 * f64::from(channels) / f64::from(bits) * 2.0 / 2.0,
        bits,
        channels,
        threads,
        1000,
    )
    .unwrap();
    let sr = layout.sample_rate_hz;
    GenConfig {
        layout,
        stations: vec![
            StationSpec {
                name: "Ef".into(),
                id: vdif::StationId::parse("Ef").unwrap(),
                delay_s: 0.0,
            },
            StationSpec {
                name: "Wb".into(),
                id: vdif::StationId::parse("Wb").unwrap(),
                delay_s: delay_samples / sr,
            },
        ],
        seconds: 1,
        ref_epoch: 52,
        start_seconds: 500,
        snr,
        tone_hz: None,
        tone_amplitude: 0.0,
        seed: 11,
    }
}

fn run(c: &GenConfig) -> Vec<Vec<u8>> {
    let g = Generator::new(c.clone());
    (0..c.stations.len())
        .map(|s| {
            let mut v = Vec::new();
            g.write_station(s, &mut v, |_| {}).unwrap();
            v
        })
        .collect()
}

fn frames(bytes: &[u8]) -> Vec<(VdifHeader, Vec<u8>)> {
    FrameScanner::new(bytes)
        .map(|e| match e.unwrap() {
            ScanEvent::Frame { header, bytes, .. } => (header, bytes[32..].to_vec()),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

/// Channel `ch` of thread 0 of a station, decoded.
fn channel(bytes: &[u8], ch: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for (h, data) in frames(bytes) {
        if h.thread_id == 0 {
            let v = decode(&data, h.bits_per_sample).unwrap();
            out.extend_from_slice(&deinterleave(&v, h.channels() as usize)[ch]);
        }
    }
    out
}

fn corr(a: &[f32], b: &[f32], lag: usize) -> f64 {
    let n = a.len().min(b.len()) - lag;
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for i in 0..n {
        let (x, y) = (f64::from(a[i]), f64::from(b[i + lag]));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    ab / (aa * bb).sqrt()
}

#[test]
fn headers_follow_the_layout() {
    let c = config(0.0, 0.0, 4, 2, 2);
    let out = run(&c);
    let fr = frames(&out[1]);
    let fps = u64::from(c.layout.frames_per_second);
    assert_eq!(fr.len() as u64, fps * 2);
    for (i, (h, _)) in fr.iter().enumerate() {
        assert_eq!(*h, expected_header(&c, 1, (i % 2) as u32, i as u64 / 2));
    }
    assert_eq!(fr[0].0.station_id.to_string(), "Wb");
    assert_eq!(fr[0].0.channels(), 2);
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let c = config(0.01, 3.0, 2, 1, 2);
    assert_eq!(run(&c), run(&c));
    let mut d = c.clone();
    d.seed += 1;
    assert_ne!(run(&c)[0], run(&d)[0]);
}

#[test]
fn state_counts_are_gaussian() {
    for bits in [1u8, 2] {
        let c = config(0.3, 0.0, 4, 1, bits);
        let out = run(&c);
        let mut counter = StateCounter::new(bits, 4);
        for (h, d) in frames(&out[0]) {
            counter.add(&h, &d);
        }
        let s = counter.finish();
        assert_eq!(s.channels.len(), 4);
        assert_eq!(s.verdict, Verdict::Good, "{s:?}");
        for ch in &s.channels {
            for (f, e) in ch.fractions.iter().zip(&ch.expected) {
                assert!(
                    (f - e).abs() < 0.005,
                    "bits {bits}: {:?} vs {:?}",
                    ch.fractions,
                    ch.expected
                );
            }
        }
    }
}

#[test]
fn baselines_correlate_at_the_delay_only() {
    let rho = 0.05;
    let lag = 7usize;
    let c = config(rho, lag as f64, 2, 1, 2);
    let out = run(&c);
    let (a, b) = (channel(&out[0], 1), channel(&out[1], 1));
    let n = a.len() as f64;
    let sigma = 1.0 / n.sqrt();
    let peak = corr(&a, &b, lag);
    // 2-bit quantisation keeps ~0.88 of the correlation coefficient (Van Vleck / Thompson,
    // Moran & Swenson §8.3); allow for it and for 5 sigma of noise.
    assert!(
        peak > 0.80 * rho && peak < 0.95 * rho + 5.0 * sigma,
        "peak {peak} at lag {lag}, rho {rho}"
    );
    for off in [0usize, 3, 6, 8, 50] {
        let r = corr(&a, &b, off);
        assert!(r.abs() < 5.0 * sigma, "lag {off}: {r} (sigma {sigma})");
    }
    // Different channels carry different sky signals.
    let b0 = channel(&out[1], 0);
    assert!(corr(&a, &b0, lag).abs() < 5.0 * sigma);
}

/// Coherent sum of `x` against a complex exponential at `f` (cycles per sample).
fn tone_sum(x: &[f32], f: f64, start: usize) -> (f64, f64) {
    let (mut re, mut im) = (0.0, 0.0);
    for (i, v) in x.iter().enumerate() {
        let ph = 2.0 * std::f64::consts::PI * f * (start + i) as f64;
        re += f64::from(*v) * ph.cos();
        im -= f64::from(*v) * ph.sin();
    }
    (re, im)
}

#[test]
fn tone_is_a_coherent_line_across_frames() {
    // 1.2 MHz is a whole number of cycles per frame (the cached path); 1.234567 MHz is not.
    for tone in [1.2e6, 1.234_567e6] {
        let mut c = config(0.0, 0.0, 2, 1, 2);
        c.tone_hz = Some(tone);
        c.tone_amplitude = 0.2;
        let out = run(&c);
        let x = channel(&out[0], 1);
        let f = tone / c.layout.sample_rate_hz;
        let half = x.len() / 2;
        let (r1, i1) = tone_sum(&x[..half], f, 0);
        let (r2, i2) = tone_sum(&x[half..], f, half);
        let (ro, io) = tone_sum(&x[..half], f + 0.01, 0);
        let on = (r1 * r1 + i1 * i1).sqrt();
        let off = (ro * ro + io * io).sqrt();
        assert!(on > 30.0 * off, "tone {tone}: on {on}, off {off}");
        // Same phase in both halves: the tone is continuous across frame boundaries.
        let dphi = (i1.atan2(r1) - i2.atan2(r2)).rem_euclid(2.0 * std::f64::consts::PI);
        let dphi = dphi.min(2.0 * std::f64::consts::PI - dphi);
        assert!(dphi < 0.05, "tone {tone}: phase jumps by {dphi} rad");
    }
}

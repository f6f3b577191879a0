//! The correlator finds the generator's delay, and its S/N follows √(valid fraction) when
//! frames are flagged invalid — the seed's S/N ∝ √(1−f) claim, checked on real VDIF bytes.

use fxcorr::{correlate, CorrelateConfig};
use vdif::gen::{GenConfig, Generator, StationSpec};
use vdif::FrameLayout;

fn stations(rho: f64, delay_samples: f64, seconds: u32) -> (Vec<u8>, Vec<u8>, f64) {
    stations_of(
        FrameLayout::new(16e6, 2, 2, 1, 8000).unwrap(),
        rho,
        delay_samples,
        seconds,
    ) // 4 MS/s per channel
}

fn stations_of(layout: FrameLayout, rho: f64, delay_samples: f64, seconds: u32) -> (Vec<u8>, Vec<u8>, f64) {
    let sr = layout.sample_rate_hz;
    let config = GenConfig {
        layout,
        stations: vec![
            StationSpec {
                name: "Ef".into(),
                id: vdif::StationId(1),
                delay_s: 0.0,
            },
            StationSpec {
                name: "Wb".into(),
                id: vdif::StationId(2),
                delay_s: delay_samples / sr,
            },
        ],
        seconds,
        ref_epoch: 52,
        start_seconds: 100,
        snr: rho,
        tone_hz: None,
        tone_amplitude: 0.0,
        seed: 99,
    };
    let g = Generator::new(config);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    g.write_station(0, &mut a, |_| {}).unwrap();
    g.write_station(1, &mut b, |_| {}).unwrap();
    (a, b, sr)
}

fn cfg() -> CorrelateConfig {
    CorrelateConfig {
        thread: 0,
        channel: 1,
        fft_len: 256,
        max_frames: 0,
        min_snr: fxcorr::DEFAULT_MIN_SNR,
        station_a: None,
        station_b: None,
    }
}

#[test]
fn finds_the_delay_both_ways() {
    for d in [23.0, -41.0, 0.0] {
        let (a, b, sr) = stations(0.02, d, 2);
        let f = correlate(&a[..], &b[..], cfg(), Some(sr)).unwrap();
        assert_eq!(f.delay_samples, d as i64, "{f:?}");
        assert_eq!(f.frames_paired, f.frames_used);
        // rho 0.02 x 2-bit efficiency 0.88 over 8e6 samples: S/N ~ 50.
        assert!(f.snr > 25.0, "{f:?}");
        assert!((f.amplitude - 0.88 * 0.02).abs() < 0.004, "{f:?}");
        assert!((f.delay_s.unwrap() - d / sr).abs() < 1e-12);
    }
}

#[test]
fn no_common_signal_no_fringe() {
    let (a, b, sr) = stations(0.0, 10.0, 1);
    let f = correlate(&a[..], &b[..], cfg(), Some(sr)).unwrap();
    assert!(f.snr < 6.0, "{f:?}");
    // The highest noise peak is reported as a modulus and flagged as no fringe.
    assert!(!f.detected, "{f:?}");
    assert!(f.amplitude > 0.0, "{f:?}");
}

/// Complex samples: I + iQ correlated as complex numbers, the delay in complex samples.
/// Treating I and Q as consecutive real samples finds twice the delay and twice the samples.
#[test]
fn complex_data_give_the_delay_in_complex_samples() {
    // 2-bit complex, 2 channels: one byte per time sample, 4 MS/s complex per channel.
    let layout = FrameLayout::with_complex(32e6, 2, 2, 1, 8000, true).unwrap();
    assert_eq!((layout.samples_per_frame, layout.sample_rate_hz), (8000, 4e6));
    for d in [5.0, -17.0] {
        let (a, b, sr) = stations_of(layout, 0.02, d, 1);
        let f = correlate(&a[..], &b[..], cfg(), Some(sr)).unwrap();
        assert!(f.complex && f.detected, "{f:?}");
        assert_eq!(f.delay_samples, d as i64, "{f:?}");
        assert_eq!(f.samples, 500 * (8000 / 256 * 256), "{f:?}");
        assert!((f.delay_s.unwrap() - d / 4e6).abs() < 1e-12);
        // rho 0.02 x 2-bit efficiency 0.88; 4e6 complex samples give S/N ~ 0.0176 x 2000 = 35.
        assert!((f.amplitude - 0.88 * 0.02).abs() < 0.004, "{f:?}");
        assert!(f.snr > 20.0, "{f:?}");
    }
    // A real station and a complex one cannot be paired.
    let (real, _, _) = stations(0.02, 0.0, 1);
    let (cplx, _, _) = stations_of(layout, 0.02, 0.0, 1);
    assert!(matches!(
        correlate(&real[..], &cplx[..], cfg(), None),
        Err(fxcorr::CorrelateError::Mismatch(m)) if m.contains("complex")
    ));
}

#[test]
fn snr_follows_sqrt_of_the_valid_fraction() {
    let (a, b, sr) = stations(0.02, 12.0, 4);
    let full = correlate(&a[..], &b[..], cfg(), Some(sr)).unwrap();
    for f_lost in [0.2, 0.5, 0.8] {
        // Flag every frame whose index hashes below f_lost as invalid at station B, as a
        // receiver does for lost frames.
        let mut bad = b.clone();
        let mut flagged = 0;
        for (i, frame) in bad.chunks_exact_mut(8032).enumerate() {
            let h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
            if (h as f64) < f_lost * (1u64 << 24) as f64 {
                frame[3] |= 0x80; // word 0 bit 31: invalid
                flagged += 1;
            }
        }
        let fr = correlate(&a[..], &bad[..], cfg(), Some(sr)).unwrap();
        let valid = 1.0 - flagged as f64 / (b.len() / 8032) as f64;
        assert!((fr.valid_fraction - valid).abs() < 1e-12);
        assert_eq!(fr.delay_samples, 12);
        let ratio = fr.snr / full.snr;
        // S/N estimates carry ~1/S/N relative noise each (S/N ~ 100 here): allow 6 %.
        assert!(
            (ratio - valid.sqrt()).abs() < 0.06 * valid.sqrt() + 0.02,
            "lost {f_lost}: ratio {ratio}, sqrt(valid) {}",
            valid.sqrt()
        );
    }
}

#[test]
fn mismatched_or_disjoint_streams_are_errors() {
    let (a, _, _) = stations(0.02, 0.0, 1);
    let other = {
        let layout = FrameLayout::new(16e6, 2, 4, 1, 8000).unwrap();
        let config = GenConfig {
            layout,
            stations: vec![StationSpec {
                name: "Jb".into(),
                id: vdif::StationId(3),
                delay_s: 0.0,
            }],
            seconds: 1,
            ref_epoch: 52,
            start_seconds: 100,
            snr: 0.0,
            tone_hz: None,
            tone_amplitude: 0.0,
            seed: 1,
        };
        let mut v = Vec::new();
        Generator::new(config).write_station(0, &mut v, |_| {}).unwrap();
        v
    };
    assert!(matches!(
        correlate(&a[..], &other[..], cfg(), None),
        Err(fxcorr::CorrelateError::Mismatch(_))
    ));
    let late = {
        let (_, b, _) = stations(0.02, 0.0, 1);
        let mut b = b;
        for frame in b.chunks_exact_mut(8032) {
            frame[0] = frame[0].wrapping_add(50); // seconds + 50: no overlap
        }
        b
    };
    assert!(matches!(
        correlate(&a[..], &late[..], cfg(), None),
        Err(fxcorr::CorrelateError::NoOverlap(m)) if m.contains("A spans") && m.contains(", B ")
    ));
    assert!(matches!(
        correlate(&a[..], &a[..], CorrelateConfig { fft_len: 100, ..cfg() }, None),
        Err(fxcorr::CorrelateError::Parameter(_))
    ));
}

/// Frames of A and B interleaved into one stream (a correlator's or relay's capture).
fn interleaved(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.chunks_exact(8032)
        .zip(b.chunks_exact(8032))
        .flat_map(|(x, y)| [x, y].concat())
        .collect()
}

/// What cannot be correlated is named for what it is (issue 28): a thread that does not exist
/// (with the threads there are), a stream that is not VDIF (with its format), a stream of
/// several stations without a choice; with a choice, the station asked for is correlated.
#[test]
fn the_true_reason_is_named() {
    let (a, b, sr) = stations(0.02, 23.0, 1);
    match correlate(&a[..], &b[..], CorrelateConfig { thread: 5, ..cfg() }, Some(sr)) {
        Err(e @ fxcorr::CorrelateError::NoThread { .. }) => {
            assert_eq!(e.to_string(), "station A has no thread 5: its threads are 0")
        }
        other => panic!("{other:?}"),
    }
    // Mark5B frames: sync word 0xABADDEED, then 10 000 bytes (here a counter).
    let mut m5b = Vec::new();
    for k in 0..20u32 {
        m5b.extend_from_slice(&0xABAD_DEEDu32.to_le_bytes());
        m5b.extend_from_slice(&k.to_le_bytes());
        m5b.extend_from_slice(&[0x12; 8]);
        m5b.extend((0..10_000u32).map(|i| (i * 7 + k) as u8));
    }
    match correlate(&a[..], &m5b[..], cfg(), Some(sr)) {
        Err(e @ fxcorr::CorrelateError::NotVdif { station: 'B', .. }) => {
            assert!(e.to_string().contains("Mark5B data"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // One file of two stations, correlated with itself: a choice is needed, and with one the
    // delay between the two stations is found.
    let both = interleaved(&a, &b);
    match correlate(&both[..], &both[..], cfg(), Some(sr)) {
        Err(e @ fxcorr::CorrelateError::SeveralStations { station: 'A', .. }) => assert_eq!(
            e.to_string(),
            "station A holds frames of several stations (1, then 2 at offset 8032): choose one (--station-a)"
        ),
        other => panic!("{other:?}"),
    }
    let pick = CorrelateConfig {
        station_a: Some(vdif::StationId(1)),
        station_b: Some(vdif::StationId(2)),
        ..cfg()
    };
    let f = correlate(&both[..], &both[..], pick, Some(sr)).unwrap();
    assert_eq!(
        (f.station_a.as_str(), f.station_b.as_str(), f.delay_samples),
        ("1", "2", 23)
    );
    assert!(f.detected, "{f:?}");
    match correlate(
        &both[..],
        &b[..],
        CorrelateConfig {
            station_a: Some(vdif::StationId(7)),
            ..cfg()
        },
        Some(sr),
    ) {
        Err(e @ fxcorr::CorrelateError::NoStation { .. }) => {
            assert_eq!(
                e.to_string(),
                "station A has no frames of station 7: the file holds 1, 2"
            )
        }
        other => panic!("{other:?}"),
    }
}

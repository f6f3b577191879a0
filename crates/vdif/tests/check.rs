//! The check every VDIF reader applies ([`vdif::CheckedFrames`]): real generated VDIF of any
//! layout always passes it, clean; bytes that are not VDIF never do; a thread that lost its
//! first or last frame is counted against its station's other threads (issue 28).

use proptest::prelude::*;
use vdif::gen::{GenConfig, Generator, StationSpec};
use vdif::inspect::{InspectError, InspectReport};
use vdif::{CheckedFrames, FrameLayout};

fn generate(layout: FrameLayout, seconds: u32, complex_seed: u64) -> Vec<u8> {
    let config = GenConfig {
        layout,
        stations: vec![StationSpec {
            name: "Ef".into(),
            id: vdif::StationId::parse("Ef").unwrap(),
            delay_s: 0.0,
        }],
        seconds,
        ref_epoch: 52,
        start_seconds: 5000,
        snr: 0.0,
        tone_hz: None,
        tone_amplitude: 0.0,
        seed: complex_seed,
    };
    let mut out = Vec::new();
    Generator::new(config).write_station(0, &mut out, |_| {}).unwrap();
    out
}

fn check(bytes: &[u8]) -> Result<InspectReport, InspectError> {
    let mut frames = CheckedFrames::new(bytes, None);
    for ev in frames.by_ref() {
        ev.unwrap();
    }
    frames.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Any layout the generator makes (1/2 bits, real or complex, 1-4 threads, 1-8 channels
    /// per thread, any multiple of 8 bytes) is VDIF, every byte in frames, no problem.
    #[test]
    fn generated_vdif_always_passes(bits in 1u8..=2, complex in any::<bool>(), log2_threads in 0u32..3, log2_cpt in 0u32..4, words in 16usize..300, fps in 2u32..40, seconds in 1u32..3) {
        let threads = 1u32 << log2_threads;
        let channels = threads << log2_cpt;
        let data_len = words * 8;
        let rate = f64::from(fps) * data_len as f64 * 8.0 * f64::from(threads);
        let Ok(layout) = FrameLayout::with_complex(rate, bits, channels, threads, data_len, complex) else {
            return Ok(()); // samples that do not fill whole words
        };
        let bytes = generate(layout, seconds, u64::from(fps));
        let r = check(&bytes).unwrap();
        prop_assert_eq!(r.frames, u64::from(fps * threads * seconds));
        prop_assert_eq!(r.garbage_bytes, 0);
        prop_assert_eq!(r.missing_frames, 0);
        if seconds > 1 {
            prop_assert!(r.problems.is_empty(), "{:?}", r.problems);
        }
    }

    /// Random bytes are never VDIF.
    #[test]
    fn random_bytes_are_never_vdif(bytes in proptest::collection::vec(any::<u8>(), 1..20_000)) {
        let verdict = check(&bytes);
        prop_assert!(matches!(verdict, Err(InspectError::NotVdif { .. })), "{:?}", verdict.map(|r| r.frames));
    }
}

/// 4 threads of 10 frames/s: thread 2 without its first frame, then without its last.
#[test]
fn a_thread_short_of_the_others_is_counted() {
    let layout = FrameLayout::new(4.0 * 10.0 * 1000.0 * 8.0, 2, 4, 4, 1000).unwrap();
    let bytes = generate(layout, 2, 1);
    let frames: Vec<&[u8]> = bytes.chunks_exact(1032).collect();
    assert_eq!(frames.len(), 80);
    let no_first: Vec<u8> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .flat_map(|(_, f)| f.to_vec())
        .collect();
    let no_last: Vec<u8> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 78)
        .flat_map(|(_, f)| f.to_vec())
        .collect();
    let r = check(&no_first).unwrap();
    let t2 = &r.per_thread[2];
    assert_eq!((t2.missing_at_start, t2.missing_at_end, t2.missing), (1, 0, 1));
    assert_eq!((t2.earliest, t2.earliest_offset), ((5000, 1), 5 * 1032));
    assert_eq!((r.missing_frames, r.gaps), (1, 1));
    assert!(
        r.problems[0].starts_with("station Ef thread 2 starts 1 frame(s) after"),
        "{:?}",
        r.problems
    );
    let r = check(&no_last).unwrap();
    let t2 = &r.per_thread[2];
    assert_eq!((t2.missing_at_start, t2.missing_at_end), (0, 1));
    assert_eq!((t2.latest, t2.latest_offset), ((5001, 8), 74 * 1032));
    // Threads of different stations are not compared: Ef and a Wb that starts a second later.
    let mut wb = generate(layout, 2, 2);
    for f in wb.chunks_exact_mut(1032) {
        let mut h = vdif::VdifHeader::parse_valid(f).unwrap();
        (h.station_id, h.seconds) = (vdif::StationId::parse("Wb").unwrap(), h.seconds + 1);
        h.emit(f).unwrap();
    }
    let r = check(&[bytes.clone(), wb].concat()).unwrap();
    assert_eq!((r.missing_frames, r.stations.len()), (0, 2), "{:?}", r.problems);
}

/// The format of bytes that are not VDIF is named in the error.
#[test]
fn the_error_names_the_format() {
    let mut m5b = Vec::new();
    for k in 0..4u32 {
        m5b.extend_from_slice(&vdif::formats::MARK5B_SYNC_WORD.to_le_bytes());
        m5b.extend_from_slice(&k.to_le_bytes());
        m5b.extend(std::iter::repeat_n(0x5a, 10_008));
    }
    let e = check(&m5b).unwrap_err();
    assert!(
        matches!(
            &e,
            InspectError::NotVdif {
                format: Some(vdif::formats::KnownFormat::Mark5b { .. }),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("not VDIF (0.0 % of bytes in valid frames): Mark5B data (the Mark5B sync word 0xABADDEED at offset 0 and 10016; 10016-byte frames); no VDIF frame found"), "{e}");
}

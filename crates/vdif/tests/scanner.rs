//! The frame scanner over clean, corrupted, truncated and random streams.

use proptest::prelude::*;
use vdif::gen::{GenConfig, Generator, StationSpec};
use vdif::scan::CONFIRM_FRAMES;
use vdif::{FrameLayout, FrameScanner, ScanEvent};

/// `seconds` of a small 2-station-compatible stream: 8 Mb/s, 2 threads, 1000-byte frames.
fn stream(seconds: u32) -> (Vec<u8>, usize) {
    let layout = FrameLayout::new(8e6, 2, 2, 2, 1000).unwrap();
    let config = GenConfig {
        layout,
        stations: vec![StationSpec {
            name: "Ef".into(),
            id: vdif::StationId::parse("Ef").unwrap(),
            delay_s: 0.0,
        }],
        seconds,
        ref_epoch: 52,
        start_seconds: 1000,
        snr: 0.0,
        tone_hz: None,
        tone_amplitude: 0.0,
        seed: 3,
    };
    let mut out = Vec::new();
    Generator::new(config).write_station(0, &mut out, |_| {}).unwrap();
    (out, layout.frame_len)
}

fn events(bytes: &[u8]) -> Vec<ScanEvent> {
    FrameScanner::new(bytes).collect::<Result<Vec<_>, _>>().unwrap()
}

/// (offset, length) of every garbage region.
fn garbage(ev: &[ScanEvent]) -> Vec<(u64, u64)> {
    ev.iter()
        .filter_map(|e| {
            if let ScanEvent::Garbage { offset, len, .. } = e {
                Some((*offset, *len))
            } else {
                None
            }
        })
        .collect()
}

fn frames(ev: &[ScanEvent]) -> usize {
    ev.iter().filter(|e| matches!(e, ScanEvent::Frame { .. })).count()
}

#[test]
fn a_clean_stream_is_frames_only() {
    let (s, flen) = stream(1);
    let ev = events(&s);
    assert_eq!(frames(&ev), s.len() / flen);
    assert_eq!(ev.len(), s.len() / flen);
}

#[test]
fn empty_stream_has_no_events() {
    assert!(events(&[]).is_empty());
}

#[test]
fn garbage_between_frames_is_located() {
    let (s, flen) = stream(1);
    let mut bad = s[..10 * flen].to_vec();
    bad.extend((0..777u32).map(|i| (i * 37 % 251) as u8));
    bad.extend_from_slice(&s[10 * flen..]);
    let ev = events(&bad);
    assert_eq!(frames(&ev), s.len() / flen);
    let g = garbage(&ev);
    assert_eq!(g, vec![((10 * flen) as u64, 777)]);
}

#[test]
fn leading_garbage_and_corrupted_header() {
    let (s, flen) = stream(1);
    let mut bad = vec![0xffu8; 13];
    bad.extend_from_slice(&s);
    // Zero the header of frame 5: its whole frame becomes garbage.
    let at = 13 + 5 * flen;
    bad[at..at + 32].fill(0);
    let ev = events(&bad);
    assert_eq!(frames(&ev), s.len() / flen - 1);
    let g = garbage(&ev);
    assert_eq!(g, vec![(0, 13), (at as u64, flen as u64)]);
}

#[test]
fn a_truncated_tail_is_reported_with_its_length() {
    let (s, flen) = stream(1);
    let cut = &s[..3 * flen + 500];
    let ev = events(cut);
    assert_eq!(frames(&ev), 3);
    assert_eq!(
        ev.last(),
        Some(&ScanEvent::Truncated {
            offset: (3 * flen) as u64,
            len: 500,
            expected: flen as u64
        })
    );
}

#[test]
fn random_bytes_are_all_garbage() {
    let mut x = 0x1234_5678_9abc_def0u64;
    let bytes: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let ev = events(&bytes);
    assert_eq!(frames(&ev), 0);
    let skipped: u64 = ev
        .iter()
        .map(|e| {
            if let ScanEvent::Garbage { len, .. } = e {
                *len
            } else {
                0
            }
        })
        .sum();
    assert_eq!(skipped, bytes.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Garbage of any content and length inserted between runs of at least [`CONFIRM_FRAMES`]
    /// frames never costs a frame, and every byte is accounted for exactly once. The frames
    /// left after the last garbage (or cut short by the stream's end before it) may be fewer:
    /// 1 or 2 of them next to garbage are garbage too,
    /// end of stream or not (the scanner's rule: a shorter run is believed only when it is the
    /// whole stream; `short_runs_between_garbage_are_not_believed`). The generator produced such
    /// tails (seed ff4f037d: 39 frames, then junk, then the 40th alone) and the test expected
    /// them counted.
    #[test]
    fn garbage_never_costs_frames_of_a_run(steps in proptest::collection::vec((CONFIRM_FRAMES..12, proptest::collection::vec(any::<u8>(), 1..300)), 0..5), lead in proptest::collection::vec(any::<u8>(), 0..300)) {
        let (s, flen) = stream(1);
        let s = &s[..40 * flen];
        let mut bad = lead.clone();
        let mut at = 0;
        let mut believed = 0;
        for (run, junk) in &steps {
            let to = (at + run).min(40);
            bad.extend_from_slice(&s[at * flen..to * flen]);
            bad.extend_from_slice(junk);
            // A run cut short by the stream's end, before garbage, is garbage.
            believed += if to - at >= CONFIRM_FRAMES { to - at } else { 0 };
            at = to;
        }
        bad.extend_from_slice(&s[at * flen..]);
        let ev = events(&bad);
        let tail = 40 - at;
        believed += if tail >= CONFIRM_FRAMES || steps.is_empty() { tail } else { 0 };
        prop_assert_eq!(frames(&ev), believed);
        prop_assert!(believed >= 40 - 2 * (CONFIRM_FRAMES - 1), "at most the ends' short runs");
        let total: u64 = ev.iter().map(|e| match e {
            ScanEvent::Frame { bytes, .. } => bytes.len() as u64,
            ScanEvent::Garbage { len, .. } => *len,
            ScanEvent::Truncated { len, .. } => *len,
        }).sum();
        prop_assert_eq!(total, bad.len() as u64);
    }

    /// One or two intact frames between garbage, with more garbage after them, start no run:
    /// they are garbage too (frame N+1 must start where frame N ends, three times over).
    #[test]
    fn short_runs_between_garbage_are_not_believed(run in 1usize..CONFIRM_FRAMES, junk in proptest::collection::vec(1u8..=255, 40..300)) {
        let (s, flen) = stream(1);
        let mut bad = s[..10 * flen].to_vec();
        bad.extend_from_slice(&junk);
        bad.extend_from_slice(&s[10 * flen..(10 + run) * flen]);
        bad.extend_from_slice(&junk);
        bad.extend_from_slice(&s[(10 + run) * flen..20 * flen]);
        let ev = events(&bad);
        prop_assert_eq!(frames(&ev), 20 - run);
        prop_assert_eq!(garbage(&ev), vec![((10 * flen) as u64, (2 * junk.len() + run * flen) as u64)]);
    }

    /// Joined copies of bytes that are not VDIF are never believed, even when the bytes hold a
    /// header whose length field claims exactly the copy's length (every copy then repeats it
    /// where the "next frame" should start), whatever the rest of the bytes.
    #[test]
    fn joined_copies_are_never_vdif(blob in proptest::collection::vec(any::<u8>(), 64..3000), at in 0usize..32, copies in 2usize..6, plant in any::<bool>()) {
        let mut blob = blob;
        let len8 = blob.len() / 8 * 8;
        blob.truncate(len8);
        if plant {
            let mut h = vdif::VdifHeader::parse_valid(&stream(1).0).unwrap();
            h.frame_len_units = (len8 / 8) as u32;
            h.log2_channels = 0;
            h.bits_per_sample = 8;
            let at = at.min(len8 - 32) / 8 * 8;
            h.emit(&mut blob[at..at + 32]).unwrap();
        }
        let joined = blob.repeat(copies);
        prop_assert_eq!(frames(&events(&joined)), 0);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = events(&bytes);
        let _ = vdif::inspect::inspect(&bytes[..], None, |_, _| {});
    }
}

/// A reader that hands out at most 7 bytes per call, like a slow pipe or socket.
struct Trickle<'a>(&'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(7).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn short_reads_change_nothing() {
    let (s, flen) = stream(1);
    let mut bad = vec![0xffu8; 5];
    bad.extend_from_slice(&s[..300 * flen]);
    bad.extend_from_slice(b"junk");
    bad.extend_from_slice(&s[300 * flen..303 * flen + 100]);
    let whole = events(&bad);
    let trickled: Vec<ScanEvent> = FrameScanner::new(Trickle(&bad)).collect::<Result<_, _>>().unwrap();
    assert_eq!(whole, trickled);
    assert_eq!(frames(&whole), 303);
}

/// Long runs of zeros (a recorder's preallocated or wiped blocks) between frames at any offset:
/// every frame is found and the zeros are one garbage region each, of the exact length.
#[test]
fn zero_runs_between_frames() {
    let (s, flen) = stream(1);
    let mut bad = Vec::new();
    let mut want = Vec::new();
    // (zeros inserted before frame, how many)
    let runs = [(0usize, 3_000_001usize), (5, 17), (9, 1 << 20), (12, 65_543)];
    let mut from = 0;
    for (before, zeros) in runs {
        bad.extend_from_slice(&s[from * flen..before * flen]);
        want.push((bad.len() as u64, zeros as u64));
        bad.resize(bad.len() + zeros, 0);
        from = before;
    }
    bad.extend_from_slice(&s[from * flen..]);
    let ev = events(&bad);
    assert_eq!(frames(&ev), s.len() / flen);
    assert_eq!(garbage(&ev), want);
}

/// One header is not enough: one or two frames followed by junk, or a run of headers whose
/// seconds jump, are not believed; three agreeing frames back to back are, and so is a file of
/// one or two whole frames (the run ends where the stream does).
#[test]
fn a_layout_needs_agreeing_headers() {
    let (s, flen) = stream(1);
    let junk: Vec<u8> = (0..5 * flen as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut two_then_junk = s[..2 * flen].to_vec();
    two_then_junk.extend_from_slice(&junk);
    let ev = events(&two_then_junk);
    assert_eq!(frames(&ev), 0, "two frames, then junk to the end: no run of three");
    let mut one_then_junk = s[..flen].to_vec();
    one_then_junk.extend_from_slice(&junk);
    assert_eq!(frames(&events(&one_then_junk)), 0);
    assert_eq!(frames(&events(&s[..flen])), 1);
    assert_eq!(frames(&events(&s[..2 * flen])), 2);
    // One whole frame and the start of the next: a frame and a truncated one.
    let ev = events(&s[..flen + 500]);
    assert_eq!(frames(&ev), 1);
    assert!(
        matches!(ev.last(), Some(ScanEvent::Truncated { len: 500, .. })),
        "{ev:?}"
    );
    // Three frames whose seconds jump by a day each: not one recording.
    let mut jumpy = s[..3 * flen].to_vec();
    for (k, f) in jumpy.chunks_exact_mut(flen).enumerate() {
        let mut h = vdif::VdifHeader::parse_valid(f).unwrap();
        h.seconds += 86_400 * k as u32;
        h.emit(f).unwrap();
    }
    jumpy.extend_from_slice(&junk);
    assert_eq!(frames(&events(&jumpy)), 0);
    assert_eq!(frames(&events(&s[..3 * flen])), 3);
}

//! The reorder window against a known frame sequence: what comes out must be exactly what went
//! in, in time order, with every missing frame replaced by an invalid one at the right time.

use stream::window::{FrameSink, Placement, StationWindow, VecSink, WindowConfig};
use vdif::{FrameLayout, VdifHeader};

const FPS: u32 = 62_500;

fn layout(threads: u32) -> FrameLayout {
    FrameLayout::new(512e6 * f64::from(threads), 2, 8 * threads, threads, 1024).unwrap()
}

/// Frame `k` (time step k / threads, thread k % threads) with recognisable data.
fn frame(l: &FrameLayout, k: u64, start: u32) -> (VdifHeader, Vec<u8>) {
    let threads = u64::from(l.threads);
    let t = k / threads;
    let mut h = l.header(0x4566);
    h.ref_epoch = 52;
    h.seconds = start + (t / u64::from(l.frames_per_second)) as u32;
    h.frame_number = (t % u64::from(l.frames_per_second)) as u32;
    h.thread_id = (k % threads) as u16;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    for (i, b) in f[32..].iter_mut().enumerate() {
        *b = (k as usize).wrapping_mul(31).wrapping_add(i) as u8 | 1;
    }
    (h, f)
}

fn cfg(l: &FrameLayout, window: u64) -> WindowConfig {
    WindowConfig {
        frames_per_second: l.frames_per_second,
        threads: l.threads as u16,
        window,
        max_fill: u64::from(FPS) * 2,
        confirm: 4,
    }
}

fn run(l: &FrameLayout, window: u64, order: &[u64]) -> (VecSink, StationWindow) {
    let (h0, _) = frame(l, order[0], 1000);
    let mut w = StationWindow::new(cfg(l, window), &h0);
    let mut sink = VecSink::default();
    for &k in order {
        let (h, f) = frame(l, k, 1000);
        w.push(&h, &f, &mut sink);
    }
    w.finish(&mut sink);
    (sink, w)
}

fn frames_of(bytes: &[u8], len: usize) -> Vec<(VdifHeader, &[u8])> {
    assert_eq!(bytes.len() % len, 0, "only whole frames");
    bytes
        .chunks_exact(len)
        .map(|c| (VdifHeader::parse_valid(c).unwrap(), c))
        .collect()
}

#[test]
fn in_order_stream_comes_out_unchanged() {
    let l = layout(1);
    let order: Vec<u64> = (0..5000).collect();
    let (sink, w) = run(&l, 64, &order);
    let mut expect = Vec::new();
    for k in 0..5000 {
        expect.extend_from_slice(&frame(&l, k, 1000).1);
    }
    assert_eq!(sink.segments.len(), 1);
    assert!(sink.segments[0] == expect, "output differs from input");
    assert_eq!(w.stats().written_valid, 5000);
    assert_eq!(w.stats().written_filled, 0);
}

#[test]
fn lost_frames_are_filled_invalid_at_the_right_time() {
    for threads in [1u32, 4] {
        let l = layout(threads);
        let lost = |k: u64| k % 97 == 5 || (2000..2100).contains(&k);
        let order: Vec<u64> = (0..8000).filter(|k| !lost(*k)).collect();
        let (sink, w) = run(&l, 256, &order);
        let out = frames_of(&sink.segments[0], l.frame_len);
        assert_eq!(out.len(), 8000, "continuous time: one frame per slot");
        let mut filled = 0;
        for (k, (h, bytes)) in out.iter().enumerate() {
            let (eh, ef) = frame(&l, k as u64, 1000);
            assert_eq!(
                (h.seconds, h.frame_number, h.thread_id),
                (eh.seconds, eh.frame_number, eh.thread_id)
            );
            if lost(k as u64) {
                assert!(h.invalid, "frame {k} should be marked invalid");
                filled += 1;
            } else {
                assert_eq!(*bytes, &ef[..], "frame {k} altered");
            }
        }
        assert_eq!(w.stats().written_filled, filled);
        assert!((w.stats().loss_fraction() - filled as f64 / 8000.0).abs() < 1e-12);
    }
}

#[test]
fn reordering_within_the_window_is_repaired_and_counted() {
    let l = layout(2);
    let mut order: Vec<u64> = (0..4000).collect();
    for c in order.chunks_mut(16) {
        c.reverse();
    }
    let (sink, w) = run(&l, 64, &order);
    let mut expect = Vec::new();
    for k in 0..4000 {
        expect.extend_from_slice(&frame(&l, k, 1000).1);
    }
    assert!(sink.segments[0] == expect);
    // Each block of 16 slots (8 frames of each of the 2 threads) comes newest first: in each
    // thread, its other 7 are 1, 2, … 7 of the thread's frames behind its newest.
    assert_eq!(w.stats().reordered, 4000 - 2 * 4000 / 16);
    assert_eq!(w.stats().reorder_extent_sum, 250 * 2 * (1..8).sum::<u64>());
    assert_eq!(w.stats().written_filled, 0);
}

#[test]
fn duplicates_and_late_frames_are_dropped() {
    let l = layout(1);
    let mut order: Vec<u64> = (0..1000).collect();
    order.insert(500, 450); // already written (window 32, base 468): late
    order.insert(700, 690); // still in the window: duplicate
    let (sink, w) = run(&l, 32, &order);
    assert_eq!(sink.segments[0].len(), 1000 * l.frame_len);
    assert_eq!(w.stats().late, 1);
    assert_eq!(w.stats().duplicates, 1);
}

#[test]
fn a_differing_duplicate_never_replaces_the_kept_frame() {
    let l = layout(1);
    let (h0, _) = frame(&l, 0, 1000);
    let mut w = StationWindow::new(cfg(&l, 64), &h0);
    let mut sink = VecSink::default();
    let mut expect = Vec::new();
    for k in 0..1000u64 {
        let (h, f) = frame(&l, k, 1000);
        w.push(&h, &f, &mut sink);
        expect.extend_from_slice(&f);
        if k >= 10 && k % 3 == 0 {
            // An earlier frame's time (still in the window) with other data, then an exact copy.
            let (h, f) = frame(&l, k - 5, 1000);
            let mut forged = f.clone();
            forged[40] ^= 0xff;
            assert_eq!(w.push(&h, &forged, &mut sink), Placement::DuplicateMismatch);
            assert_eq!(w.push(&h, &f, &mut sink), Placement::Duplicate);
        }
    }
    w.finish(&mut sink);
    assert!(sink.segments[0] == expect, "the first copies were written");
    assert_eq!((w.stats().duplicate_mismatch, w.stats().duplicates), (330, 330));
}

#[test]
fn one_forged_frame_far_in_time_does_not_move_the_stream() {
    let l = layout(1);
    let (h0, _) = frame(&l, 0, 1000);
    let mut w = StationWindow::new(cfg(&l, 64), &h0);
    let mut sink = VecSink::default();
    for k in 0..3000u64 {
        let (h, f) = frame(&l, k, 1000);
        w.push(&h, &f, &mut sink);
        if k % 1000 == 500 {
            // A frame one hour ahead, and one a year back: forged or corrupt.
            for (ahead, secs) in [(true, 3600u32), (false, 31_000_000)] {
                let (mut fh, mut ff) = frame(&l, k, 1000);
                fh.seconds = if ahead {
                    fh.seconds + secs
                } else {
                    fh.seconds.saturating_sub(secs)
                };
                fh.emit(&mut ff[..32]).unwrap();
                assert_eq!(w.push(&fh, &ff, &mut sink), Placement::Candidate);
            }
        }
    }
    w.finish(&mut sink);
    assert_eq!(sink.segments.len(), 1);
    assert_eq!(sink.segments[0].len(), 3000 * l.frame_len);
    assert_eq!(sink.filled, 0);
    assert_eq!(w.stats().out_of_range, 6);
    assert_eq!(w.stats().jumps, 0);
}

#[test]
fn a_real_jump_fills_short_gaps_and_splits_long_ones() {
    let l = layout(1);
    // 0.5 s outage (31250 frames < max_fill of 2 s): filled.
    let mut order: Vec<u64> = (0..1000).collect();
    order.extend(1000 + 31_250..1000 + 31_250 + 1000);
    let (sink, w) = run(&l, 64, &order);
    assert_eq!(sink.segments.len(), 1);
    assert_eq!(sink.segments[0].len() as u64, (2000 + 31_250) * l.frame_len as u64);
    assert_eq!(w.stats().jumps, 1);
    assert_eq!(w.stats().written_filled, 31_250);
    // Restart 10 s later: a new segment, nothing filled.
    let mut order: Vec<u64> = (0..1000).collect();
    order.extend(10 * 62_500..10 * 62_500 + 1000);
    let (sink, w) = run(&l, 64, &order);
    assert_eq!(sink.segments.len(), 2);
    assert_eq!(sink.segments[0].len(), 1000 * l.frame_len);
    assert_eq!(sink.segments[1].len(), 1000 * l.frame_len);
    let first = VdifHeader::parse_valid(&sink.segments[1]).unwrap();
    assert_eq!(first.seconds, 1010);
    assert_eq!(w.stats().discontinuities, 1);
    assert_eq!(sink.filled, 0);
}

/// Two boards, one thread each, the second's frames 3 windows late (a lagging board or relay
/// queue), arriving in alternating bursts of 8 as a relay drains its input queues. The stream
/// must stay on the first board's time: thread 1's late frames are dropped and counted, never
/// pull the window back, and nothing is written twice or filled in bulk. (Before, each swing
/// back and forth was a jump, and each forward one filled the gap again.)
#[test]
fn a_thread_lagging_beyond_the_window_does_not_swing_the_stream() {
    let l = layout(2);
    let window = 64;
    let lag = 3 * window; // in slots of the stream (2 per time step)
    let steps = 20_000u64;
    let mut order = Vec::new();
    let mut t = lag / 2; // thread 0 starts ahead by `lag` slots
    while t + 8 <= steps {
        order.extend((t..t + 8).map(|u| 2 * u)); // thread 0, time u
        order.extend((t - lag / 2..t - lag / 2 + 8).map(|u| 2 * u + 1)); // thread 1, lag behind
        t += 8;
    }
    let (sink, w) = run(&l, window, &order);
    let st = w.stats();
    assert_eq!(st.jumps, 0, "{st:?}");
    assert_eq!(st.discontinuities, 0, "{st:?}");
    assert_eq!(sink.segments.len(), 1);
    // Every frame of thread 0 is written valid; thread 1's late frames are counted, not written.
    let thread0 = order.iter().filter(|k| *k % 2 == 0).count() as u64;
    assert!(st.written_valid >= thread0, "{st:?}");
    assert_eq!(st.placed + st.out_of_range + st.late, order.len() as u64, "{st:?}");
    // Time is written once: the output spans the stream's time steps, no more.
    let frames = sink.segments[0].len() / l.frame_len;
    assert!(
        frames as u64 <= 2 * (steps + 1),
        "{frames} frames written for {steps} steps"
    );
    let out = frames_of(&sink.segments[0], l.frame_len);
    let mut last = None;
    for (h, _) in out.iter().filter(|(h, _)| h.thread_id == 0) {
        let t = (h.seconds, h.frame_number);
        assert!(last.is_none_or(|l| l < t), "thread 0's time went back at {t:?}");
        last = Some(t);
    }
}

/// A real jump of a multi-thread stream (all threads restart 0.2 s later) still moves it; and
/// when one thread stops for good and the other jumps, the jump is taken once a whole window of
/// the survivor's frames has shown it.
#[test]
fn jumps_of_multi_thread_streams_are_still_taken() {
    let l = layout(2);
    let mut order: Vec<u64> = (0..2000).collect();
    order.extend(2000 + 2 * 12_500..2000 + 2 * 12_500 + 2000);
    let (sink, w) = run(&l, 64, &order);
    assert_eq!(w.stats().jumps, 1);
    assert_eq!(w.stats().written_valid, 4000);
    assert_eq!(w.stats().written_filled, 2 * 12_500);
    assert_eq!(sink.segments.len(), 1);
    // Thread 1 ends at slot 2000; thread 0 alone resumes 0.2 s later.
    let mut order: Vec<u64> = (0..2000).collect();
    order.extend((2000 + 2 * 12_500..2000 + 2 * 12_500 + 4000).step_by(2));
    let (_, w) = run(&l, 64, &order);
    assert_eq!(w.stats().jumps, 1);
    assert_eq!(
        w.stats().written_valid + w.stats().out_of_range,
        4000,
        "{:?}",
        w.stats()
    );
    assert!(w.stats().out_of_range <= 64, "{:?}", w.stats());
}

#[test]
fn wrong_format_frames_never_reach_the_output() {
    let l = layout(1);
    let other = FrameLayout::new(256e6, 2, 4, 1, 1024).unwrap();
    let (h0, _) = frame(&l, 0, 1000);
    let mut w = StationWindow::new(cfg(&l, 64), &h0);
    let mut sink = VecSink::default();
    for k in 0..500u64 {
        let (h, f) = frame(&l, k, 1000);
        w.push(&h, &f, &mut sink);
        let (h2, f2) = frame(&other, k, 1000);
        assert_eq!(w.push(&h2, &f2, &mut sink), Placement::WrongFormat);
    }
    w.finish(&mut sink);
    assert_eq!(sink.segments[0].len(), 500 * l.frame_len);
    assert_eq!(w.stats().wrong_format, 500);
}

/// A sink that counts calls only.
struct Count(u64);
impl FrameSink for Count {
    fn frame(&mut self, _: vdif::StationId, _: &[u8], _: bool) {
        self.0 += 1;
    }
    fn discontinuity(&mut self, _: vdif::StationId) {}
}

#[test]
fn memory_stays_bounded_over_a_long_stream() {
    let l = layout(1);
    let (h0, _) = frame(&l, 0, 1000);
    let mut w = StationWindow::new(cfg(&l, 128), &h0);
    let mut sink = Count(0);
    for k in 0..200_000u64 {
        let (h, f) = frame(&l, k, 1000);
        w.push(&h, &f, &mut sink);
    }
    w.finish(&mut sink);
    assert_eq!(sink.0, 200_000);
}

#[test]
fn a_thread_never_seen_is_never_filled() {
    // Regression (issue 17): a stream configured for 4 threads of which only 0 and 1 ever come
    // had invalid frames invented for threads 2 and 3 at every time step.
    let l = layout(4);
    let order: Vec<u64> = (0..4000u64).filter(|k| k % 4 < 2 && *k != 401).collect();
    let (sink, w) = run(&l, 64, &order);
    let out = frames_of(&sink.segments.concat(), l.frame_len)
        .into_iter()
        .map(|(h, _)| (h.thread_id, h.invalid))
        .collect::<Vec<_>>();
    assert_eq!(out.len(), 2000, "threads 0 and 1 only");
    assert!(out.iter().all(|(t, _)| *t < 2));
    // The one frame lost of a thread that exists is filled, on its thread.
    assert_eq!(out.iter().filter(|(_, invalid)| *invalid).count(), 1);
    assert_eq!(w.stats().written_filled, 1);
    assert_eq!(w.thread_ids(), vec![0, 1]);
}

/// Frames pushed at the times a live sender sends them: frame k at k / FPS after `t0`.
fn at(t0: std::time::Instant, k: u64) -> std::time::Instant {
    t0 + std::time::Duration::from_nanos(k * 1_000_000_000 / u64::from(FPS))
}

/// Issue 28 item 4 in the window: 40 frames forged from the sender's own address 48 frame times
/// ahead of the stream (within the 64-frame window), in one burst. Pushed without times they
/// move the front and real frames arriving in order after them are written as fill; with their
/// arrival times they are held as candidates, dropped by the next real frame, and the output is
/// exactly the real stream.
#[test]
fn frames_forged_ahead_of_a_live_stream_never_flush_real_frames() {
    let l = layout(1);
    let forged = |k: u64| {
        let (h, mut f) = frame(&l, k, 1000);
        f[40] ^= 0xff;
        (h, f)
    };
    for timed in [false, true] {
        let (h0, _) = frame(&l, 0, 1000);
        let mut w = StationWindow::new(cfg(&l, 64), &h0);
        let mut sink = VecSink::default();
        let t0 = std::time::Instant::now();
        for k in 0..3000u64 {
            let (h, f) = frame(&l, k, 1000);
            let now = at(t0, k);
            let push = |w: &mut StationWindow, h: &VdifHeader, f: &[u8], sink: &mut VecSink| {
                if timed {
                    w.push_at(now, h, f, None, sink)
                } else {
                    w.push(h, f, sink)
                }
            };
            push(&mut w, &h, &f, &mut sink);
            if k == 500 {
                for j in k + 48..k + 88 {
                    let (fh, ff) = forged(j);
                    let p = push(&mut w, &fh, &ff, &mut sink);
                    if timed {
                        assert_eq!(p, Placement::Candidate, "forged frame {j}");
                    }
                }
            }
        }
        w.finish(&mut sink);
        let st = *w.stats();
        if !timed {
            // What happened before: the front moved, 23 real frames were filled and came late.
            assert!(st.written_filled > 0 && st.late > 0, "{st:?}");
            continue;
        }
        let expect: Vec<u8> = (0..3000).flat_map(|k| frame(&l, k, 1000).1).collect();
        assert!(sink.segments.concat() == expect, "exactly the real stream: {st:?}");
        assert_eq!((st.written_filled, st.late, st.out_of_range, st.jumps), (0, 0, 40, 0));
    }
}

/// A forger creeping ahead — each frame as far beyond the newest as the front may skip at once —
/// moves the front a quarter window in all, however many frames it sends at once: the real
/// frames behind it are never late and never filled.
#[test]
fn forged_frames_creeping_ahead_move_the_front_a_quarter_window_at_most() {
    let l = layout(1);
    let (h0, _) = frame(&l, 0, 1000);
    let mut w = StationWindow::new(cfg(&l, 64), &h0);
    let mut sink = VecSink::default();
    let t0 = std::time::Instant::now();
    for k in 0..2000u64 {
        let (h, f) = frame(&l, k, 1000);
        w.push_at(at(t0, k), &h, &f, None, &mut sink);
        if k % 200 == 100 {
            // 30 frames, each 17 frame times beyond the previous one (the burst allowance is 16).
            for i in 1..=30u64 {
                let (fh, mut ff) = frame(&l, k + 17 * i, 1000);
                ff[40] ^= 0xff;
                w.push_at(at(t0, k), &fh, &ff, None, &mut sink);
            }
        }
    }
    w.finish(&mut sink);
    let st = *w.stats();
    assert_eq!((st.late, st.written_filled, st.jumps), (0, 0, 0), "{st:?}");
    // At most the first forged frame of each burst got in (as the first copy of its time).
    assert!(st.duplicate_mismatch <= 10, "{st:?}");
    assert_eq!(st.written_valid, 2000);
}

/// A real outage explains its own gap: the stream resumes 30 frame times later, as much later
/// in time, and is placed at once (the gap filled), with no jump; one longer than half the
/// window (40 frame times) is taken as a jump once the stream has kept coming, nothing lost.
#[test]
fn a_real_outage_moves_the_stream() {
    let l = layout(1);
    for (gap, jumps) in [(30u64, 0u64), (40, 1)] {
        let (h0, _) = frame(&l, 0, 1000);
        let mut w = StationWindow::new(cfg(&l, 64), &h0);
        let mut sink = VecSink::default();
        let t0 = std::time::Instant::now();
        let order: Vec<u64> = (0..1000).chain(1000 + gap..2000).collect();
        for &k in &order {
            let (h, f) = frame(&l, k, 1000);
            let p = w.push_at(at(t0, k), &h, &f, None, &mut sink);
            if k >= 4 && jumps == 0 {
                assert!(matches!(p, Placement::Placed { .. }), "frame {k}: {p:?}");
            }
        }
        w.finish(&mut sink);
        let st = *w.stats();
        assert_eq!(
            (st.written_valid, st.written_filled, st.jumps, st.out_of_range),
            (2000 - gap, gap, jumps, 0),
            "gap {gap}: {st:?}"
        );
        assert_eq!(sink.segments.len(), 1);
    }
}

/// A gap with no time to explain it (a stalled receiver read the frames before and after it in
/// one batch): the stream is taken there once it has kept coming for the jump span, and nothing
/// real is lost meanwhile.
#[test]
fn a_gap_without_time_is_taken_once_the_stream_keeps_coming() {
    let l = layout(1);
    let (h0, _) = frame(&l, 0, 1000);
    let mut w = StationWindow::new(cfg(&l, 64), &h0);
    let mut sink = VecSink::default();
    let t0 = std::time::Instant::now();
    for k in (0..1000).chain(1040..3000u64) {
        let (h, f) = frame(&l, k, 1000);
        // Frames 1040.. arrive 40 frame times early (with the ones before the gap).
        let now = at(t0, if k >= 1040 { k - 40 } else { k });
        w.push_at(now, &h, &f, None, &mut sink);
    }
    w.finish(&mut sink);
    let st = *w.stats();
    assert_eq!(st.jumps, 1, "{st:?}");
    assert!(w.jump_span() >= std::time::Duration::from_millis(1));
    assert_eq!(
        (st.written_valid, st.written_filled, st.out_of_range),
        (2960, 40, 0),
        "{st:?}"
    );
    assert_eq!(sink.segments.len(), 1);
}

/// A burst of consistent frames forged far ahead (10 s) from the sender's own address: pushed
/// without times, 4 of them moved the stream; with times, the run has not lasted when the next
/// real frame drops it.
#[test]
fn a_burst_forged_far_ahead_never_jumps_a_live_stream() {
    let l = layout(1);
    for timed in [false, true] {
        let (h0, _) = frame(&l, 0, 1000);
        let mut w = StationWindow::new(cfg(&l, 64), &h0);
        let mut sink = VecSink::default();
        let t0 = std::time::Instant::now();
        for k in 0..2000u64 {
            let (h, f) = frame(&l, k, 1000);
            let now = at(t0, k);
            if timed {
                w.push_at(now, &h, &f, None, &mut sink);
            } else {
                w.push(&h, &f, &mut sink);
            }
            if k == 700 {
                for j in 0..10 {
                    let (fh, ff) = frame(&l, k + 10 * u64::from(FPS) + j, 1000);
                    if timed {
                        w.push_at(now, &fh, &ff, None, &mut sink);
                    } else {
                        w.push(&fh, &ff, &mut sink);
                    }
                }
            }
        }
        w.finish(&mut sink);
        let st = *w.stats();
        if timed {
            assert_eq!((st.jumps, st.out_of_range, st.written_valid), (0, 10, 2000), "{st:?}");
            assert_eq!(sink.segments.len(), 1);
        } else {
            assert!(st.jumps >= 1, "{st:?}");
        }
    }
}

/// Two boards (one thread each), the stream anchored by the second; the first joins 40 frame
/// times ahead of it — more than half the window, less than the whole, more than time explains.
/// The lead is a board's, not a forgery: the second board's frames do not contradict it (they
/// are another thread), so once the first board's run has lasted it is placed, nothing flushed,
/// and both boards are written whole.
#[test]
fn a_board_leading_the_others_by_most_of_the_window_is_taken() {
    let l = layout(2);
    let window = 128; // slots: 64 frame times of 2 threads
    let (h0, _) = frame(&l, 1, 1000);
    let mut w = StationWindow::new(cfg(&l, window), &h0);
    let mut sink = VecSink::default();
    let t0 = std::time::Instant::now();
    let lead = 40u64; // frame times
    let steps = 3000u64;
    let mut pushed = 0u64;
    for t in 0..steps {
        let now = at(t0, t);
        // Board 2 (thread 1) at time t; board 1 (thread 0) from t = 200 on, `lead` ahead.
        let (h, f) = frame(&l, 2 * t + 1, 1000);
        w.push_at(now, &h, &f, None, &mut sink);
        pushed += 1;
        if (200..steps - lead).contains(&t) {
            let (h, f) = frame(&l, 2 * (t + lead), 1000);
            w.push_at(now, &h, &f, None, &mut sink);
            pushed += 1;
        }
    }
    w.finish(&mut sink);
    let st = *w.stats();
    assert_eq!(
        (st.jumps, st.late, st.out_of_range, st.discontinuities),
        (0, 0, 0, 0),
        "{st:?}"
    );
    assert_eq!(st.written_valid, pushed, "{st:?}");
    // Thread 0 before it started is filled; nothing of either board is lost.
    assert_eq!(sink.segments.len(), 1);
}

/// A stream of two threads stopped between the two frames of one period (a recording stopped
/// by `record = off`, the thread-1 frame never received): the end is the last frame that came,
/// not a fill frame for the one that never did (it showed as `evlbi? loss : 1` per scan).
#[test]
fn the_end_of_a_stream_is_its_last_frame_not_a_filled_period() {
    let l = vdif::FrameLayout::new(64e6, 2, 4, 2, 8000).unwrap();
    let cfg = stream::window::WindowConfig {
        frames_per_second: l.frames_per_second,
        threads: 2,
        window: 64,
        max_fill: 1000,
        confirm: 4,
    };
    let template = l.header(0x4566);
    let mut w = stream::window::StationWindow::new(cfg, &template);
    let mut sink = stream::VecSink::default();
    // 10 periods of both threads, then thread 0 of the 11th.
    for k in 0..21u32 {
        let mut h = template;
        h.seconds = 1000;
        h.frame_number = k / 2;
        h.thread_id = (k % 2) as u16;
        let mut f = vec![0u8; l.frame_len];
        h.emit(&mut f[..32]).unwrap();
        w.push(&h, &f, &mut sink);
    }
    w.finish(&mut sink);
    let s = w.stats();
    assert_eq!((s.written_valid, s.written_filled), (21, 0), "{s:?}");
}

/// Two boards, one a few frames behind the other the whole time (each its own sender, both in
/// order): the recording is stopped while thread 1 leads thread 0 by 3 frames. Thread 0's
/// frame lost in the middle is lost (a later one of its own came); its 2 frames after its last
/// but before thread 1's last are filled to keep the file's periods whole, and not counted
/// lost (nothing shows they were sent: `evlbi? loss : 1` in a Field System session on a busy
/// host). And the boards' skew is not reordering: each thread came in its own order.
#[test]
fn a_recording_stopped_while_one_board_lags_counts_only_what_its_own_frames_show_lost() {
    let l = layout(2);
    let lag = 3u64;
    let periods = 200u64;
    let last_thread0 = periods - lag; // thread 0 sent up to here, then the recording stopped
    let thread0 = (0..=last_thread0).filter(|&t| t != 100).map(|t| 2 * t); // period 100 lost
    let thread1 = (0..periods).map(|t| 2 * t + 1);
    let mut order: Vec<u64> = thread0.chain(thread1).collect();
    // Thread 1 of period t arrives with thread 0 of period t - lag.
    order.sort_by_key(|&k| if k % 2 == 1 { k / 2 } else { k / 2 + lag });
    let (sink, w) = run(&l, 64, &order);
    let s = w.stats();
    assert_eq!((s.written_filled, s.filled_at_end, s.filled_lost()), (3, 2, 1), "{s:?}");
    assert_eq!(s.written_valid, order.len() as u64, "{s:?}");
    assert!(
        (s.loss_fraction() - 1.0 / (order.len() as f64 + 1.0)).abs() < 1e-12,
        "{s:?}"
    );
    assert_eq!((s.reordered, s.reorder_extent_sum), (0, 0), "{s:?}");
    // Written in time order, every period whole: thread 0's last two filled invalid.
    let frames = frames_of(&sink.segments[0], l.frame_len);
    assert_eq!(frames.len() as u64, 2 * periods);
    let tail: Vec<(u32, u16, bool)> = frames[frames.len() - 6..]
        .iter()
        .map(|(h, _)| (h.frame_number, h.thread_id, h.invalid))
        .collect();
    let p = |t: u64| t as u32;
    assert_eq!(
        tail,
        vec![
            (p(periods - 3), 0, false),
            (p(periods - 3), 1, false),
            (p(periods - 2), 0, true),
            (p(periods - 2), 1, false),
            (p(periods - 1), 0, true),
            (p(periods - 1), 1, false)
        ]
    );
}

/// How long a run of candidates must last to move the stream: 32 frame times of all threads,
/// whole nanoseconds from integers (rounded up), within 1 ms and 1 s, at the edges of VDIF's
/// rates.
#[test]
fn a_jump_span_is_32_frame_times_in_whole_nanoseconds_within_1_ms_and_1_s() {
    let l = layout(1);
    let (template, _) = frame(&l, 0, 1000);
    let span = |fps: u32, threads: u16| {
        let c = WindowConfig {
            frames_per_second: vdif::FrameRate::new(fps).unwrap(),
            threads,
            ..cfg(&l, 64)
        };
        StationWindow::new(c, &template).jump_span()
    };
    assert_eq!(span(1000, 1), std::time::Duration::from_millis(32));
    // 30 000 frames/s: 32/30 000 s is 1 066 666.67 ns, taken as 1 066 667.
    assert_eq!(span(30_000, 1), std::time::Duration::from_nanos(1_066_667));
    // 8 threads of 5000: 40 000 slots a second, 800 µs, held to the 1 ms floor.
    assert_eq!(span(5000, 8), std::time::Duration::from_millis(1));
    // 1 frame a second, 1 thread: 32 s, held to 1 s; the 2^24 ceiling: to 1 ms.
    assert_eq!(span(1, 1), std::time::Duration::from_secs(1));
    assert_eq!(span(1 << 24, 1024), std::time::Duration::from_millis(1));
}

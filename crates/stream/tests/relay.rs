//! The relay state machine in virtual time: boards' datagrams in, the same frames out — every
//! frame, per thread in order, paced, counted per sender; strays counted and dropped.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use stream::relay::{Relay, RelayConfig};
use stream::wire::{encode_data, parse_data, Nak, NativePrefix, SeqFormat, SeqRange};
use stream::VecSink;
use vdif::FrameLayout;

const FPS: u32 = 8000;

/// Frame `k` (time step) of thread `thread` of station Ef, 8032 bytes, data recognisable.
fn frame(thread: u16, k: u32) -> Vec<u8> {
    let l = FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap();
    let mut h = l.header(0x4566);
    h.seconds = 1000 + k / FPS;
    h.frame_number = k % FPS;
    h.thread_id = thread;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    for (i, b) in f[32..].iter_mut().enumerate() {
        *b = (k as usize)
            .wrapping_mul(131)
            .wrapping_add(i * 7 + usize::from(thread) * 3) as u8;
    }
    f
}

fn udps(seq: u64, f: &[u8]) -> Vec<u8> {
    let p = NativePrefix {
        retransmit: false,
        stream: 0,
        seq,
        frames_per_second: 0,
        threads: 0,
        session: 0,
    };
    let mut d = Vec::new();
    encode_data(SeqFormat::Jive5ab, &p, f, &mut d);
    d
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn relay(input: SeqFormat, output: SeqFormat, t0: Instant) -> Relay {
    let mut cfg = RelayConfig::new(input, output, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    Relay::new(cfg)
}

/// Everything due at `now`, with its send time.
fn drain(r: &mut Relay, now: Instant, out: &mut Vec<(Instant, Vec<u8>)>) {
    while let Some(t) = r.poll_transmit(now).unwrap() {
        for d in t.datagrams() {
            out.push((now, d.to_vec()));
        }
        r.on_transmitted(now);
    }
}

/// Run the relay's own deadlines up to `until` (what the socket loop does between datagrams).
fn run_until(r: &mut Relay, tee: &mut VecSink, until: Instant, out: &mut Vec<(Instant, Vec<u8>)>) {
    for _ in 0..1_000_000 {
        match r.poll_timeout() {
            Some(t) if t <= until => {
                r.handle_timeout(t, tee);
                drain(r, t, out);
            }
            _ => break,
        }
    }
    r.handle_timeout(until, tee);
    drain(r, until, out);
}

#[test]
fn four_threads_from_two_boards_leave_whole_in_order_and_are_counted_per_sender() {
    let t0 = Instant::now();
    let mut r = relay(SeqFormat::None, SeqFormat::Native, t0);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    let mut sent_in = Vec::new();
    let step = Duration::from_nanos(1_000_000_000 / u64::from(FPS));
    for k in 0..400u32 {
        let now = t0 + step * k;
        // Board A (port 1) sends threads 0 and 1, board B (port 2) threads 2 and 3.
        for thread in 0..4u16 {
            let f = frame(thread, k);
            let port = if thread < 2 { 1 } else { 2 };
            r.handle_datagram(now, 0, addr(port), &f, false, &mut tee);
            sent_in.extend_from_slice(&f);
        }
        run_until(&mut r, &mut tee, now, &mut out);
    }
    run_until(&mut r, &mut tee, t0 + step * 600, &mut out);
    // The tee is exactly what came in, in order.
    assert_eq!(tee.segments.concat(), sent_in);
    assert_eq!(tee.filled, 0);
    // Out: every frame once, native framing announcing 4 threads, each thread in time order.
    assert_eq!(out.len(), 1600);
    let mut next = [0u32; 4];
    for (i, (_, d)) in out.iter().enumerate() {
        let p = parse_data(SeqFormat::Native, d).unwrap();
        let n = p.native.unwrap();
        assert_eq!((n.seq, n.threads, n.frames_per_second, n.stream), (i as u64, 4, FPS, 0));
        let t = usize::from(p.header.thread_id);
        assert_eq!(p.frame, frame(p.header.thread_id, next[t]).as_slice());
        next[t] += 1;
    }
    assert_eq!(next, [400; 4]);
    let senders = r.senders();
    assert_eq!(senders.len(), 2);
    assert_eq!((senders[0].frames, senders[0].threads.clone()), (800, vec![0, 1]));
    assert_eq!((senders[1].frames, senders[1].threads.clone()), (800, vec![2, 3]));
    let st = &r.stations()[0];
    assert_eq!(st.thread_ids, vec![0, 1, 2, 3]);
    assert_eq!((st.frames_in, st.frames_out, st.lost_in_input), (1600, 1600, 0));
    assert_eq!(r.counters().rejected(), 0);
}

#[test]
fn udps_serial_numbers_give_loss_reordering_and_extent_per_sender() {
    let t0 = Instant::now();
    let mut r = relay(SeqFormat::Jive5ab, SeqFormat::Jive5ab, t0);
    let mut tee = VecSink::default();
    // 0..100 with 10 and 11 lost, 50 arriving after 53.
    let mut order: Vec<u32> = (0..100).filter(|k| *k != 10 && *k != 11 && *k != 50).collect();
    let at = order.iter().position(|k| *k == 53).unwrap();
    order.insert(at + 1, 50);
    for (i, k) in order.iter().enumerate() {
        let now = t0 + Duration::from_micros(125 * i as u64);
        r.handle_datagram(
            now,
            0,
            addr(7),
            &udps(1_000_000 + u64::from(*k), &frame(0, *k)),
            false,
            &mut tee,
        );
    }
    let s = &r.senders()[0];
    assert_eq!((s.datagrams, s.lost, s.reordered, s.reorder_extent_max), (98, 2, 1, 3));
    assert_eq!((s.seq_first, s.seq_last), (Some(1_000_000), Some(1_000_099)));
    let st = &r.stations()[0];
    // By VDIF time: 10 and 11 missing; 50 was missing until it came.
    assert_eq!((st.lost_in_input, st.reordered_in, st.frames_in), (2, 1, 98));
}

#[test]
fn a_burst_in_is_paced_out_and_a_backlog_leaves_at_no_more_than_the_catch_up_rate() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::None, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.threads = Some(1);
    cfg.smoothing = Duration::from_millis(2);
    cfg.catch_up = 2.0;
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    for k in 0..200 {
        r.handle_datagram(t0, 0, addr(1), &frame(0, k), false, &mut tee);
    }
    let mut out = Vec::new();
    run_until(&mut r, &mut tee, t0 + Duration::from_millis(100), &mut out);
    assert_eq!(out.len(), 200);
    let spacing = Duration::from_micros(125);
    let gaps: Vec<Duration> = out.windows(2).map(|w| w[1].0 - w[0].0).collect();
    // Never faster than the catch-up rate (2 × the data rate).
    assert!(gaps.iter().all(|g| *g >= spacing / 2), "{gaps:?}");
    // Paced at the data rate (with 5 % headroom) while the frames had waited less than the
    // smoothing allowance …
    let paced = spacing.div_f64(stream::relay::PACE_HEADROOM);
    assert!(
        gaps[..14]
            .iter()
            .all(|g| *g >= paced && *g < spacing + Duration::from_micros(5)),
        "{:?}",
        &gaps[..14]
    );
    // … then the backlog is caught up at about twice the rate, not at line rate.
    let last = out.last().unwrap().0 - t0;
    assert!(
        last > Duration::from_millis(12) && last < Duration::from_millis(16),
        "{last:?}"
    );
    let st = &r.stations()[0];
    assert_eq!(st.frames_out, 200);
    assert!(st.queue_delay_ns.max >= Some(10_000_000), "{:?}", st.queue_delay_ns);
}

#[test]
fn a_full_buffer_drops_the_oldest_frames_and_counts_them() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::None, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.threads = Some(1);
    cfg.buffer_bytes = 10 * 8032;
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    for k in 0..30 {
        r.handle_datagram(t0, 0, addr(1), &frame(0, k), false, &mut tee);
    }
    let mut out = Vec::new();
    for i in 0..2_000u32 {
        drain(&mut r, t0 + Duration::from_micros(10) * i, &mut out);
    }
    // Nothing left while the 30 came (the first 4 are held until they form a run): the newest
    // 10 remain.
    let ks: Vec<u32> = out
        .iter()
        .map(|(_, d)| parse_data(SeqFormat::None, d).unwrap().header.frame_number)
        .collect();
    assert_eq!(ks, (20..30).collect::<Vec<_>>());
    assert_eq!(r.stations()[0].overflow_dropped, 20);
    assert_eq!(tee.segments.concat().len(), 30 * 8032);
}

#[test]
fn naks_are_answered_from_the_repeat_buffer() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::Native, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.threads = Some(1);
    cfg.arq_latency = Some(Duration::from_millis(300));
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    // 30 frames: repeats may take a tenth of the datagrams sent (3 here).
    for k in 0..30 {
        let now = t0 + Duration::from_micros(125) * k;
        r.handle_datagram(now, 0, addr(1), &frame(0, k), false, &mut tee);
        run_until(&mut r, &mut tee, now, &mut out);
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_millis(4), &mut out);
    assert_eq!(out.len(), 30);
    let mut nak = Vec::new();
    Nak {
        stream: 0,
        ranges: vec![SeqRange { first: 3, count: 2 }],
    }
    .encode(&mut nak);
    let now = t0 + Duration::from_millis(6);
    r.handle_return(now, &nak);
    r.handle_return(now, b"a keep-alive from a jive5ab");
    let mut repeats = Vec::new();
    drain(&mut r, now, &mut repeats);
    let got: Vec<(u64, bool)> = repeats
        .iter()
        .map(|(_, d)| {
            let n = parse_data(SeqFormat::Native, d).unwrap().native.unwrap();
            (n.seq, n.retransmit)
        })
        .collect();
    assert_eq!(got, vec![(3, true), (4, true)]);
    assert_eq!((r.returned_datagrams(), r.rejected_control()), (2, 1));
    assert_eq!(r.arq_stats().unwrap().resent, 2);
}

/// Only the station's rate is known (a VSI-S mode; the Field System never sets threads): the
/// relay learns the threads and splits the rate, so a 4-thread stream crossing second
/// boundaries is counted whole per thread. Before, each thread was counted at the station's
/// rate and every second boundary looked like 3 × FPS/4 frames lost per thread.
#[test]
fn a_station_rate_is_split_over_the_threads_learned() {
    let t0 = Instant::now();
    for (threads, station_fps) in [(4u16, FPS), (2, FPS), (1, FPS)] {
        let per_thread = station_fps / u32::from(threads);
        let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
        cfg.station_frames_per_second = vdif::FrameRate::new(station_fps).ok();
        let mut r = Relay::new(cfg);
        let mut tee = VecSink::default();
        let mut out = Vec::new();
        let step = Duration::from_nanos(1_000_000_000 / u64::from(station_fps));
        let mut seq = 0u64;
        // 2.5 s of the stream: two second boundaries.
        let periods = per_thread * 5 / 2;
        for k in 0..periods {
            for thread in 0..threads {
                let mut f = frame(thread, 0);
                let mut h = vdif::VdifHeader::parse(&f).unwrap();
                h.seconds = 1000 + k / per_thread;
                h.frame_number = k % per_thread;
                h.emit(&mut f[..32]).unwrap();
                let now = t0 + step * (k * u32::from(threads) + u32::from(thread));
                r.handle_datagram(now, 0, addr(1), &udps(seq, &f), false, &mut tee);
                seq += 1;
            }
            if k % 64 == 0 {
                run_until(&mut r, &mut tee, t0 + step * (k * u32::from(threads)), &mut out);
            }
        }
        run_until(&mut r, &mut tee, t0 + Duration::from_secs(4), &mut out);
        let st = &r.stations()[0];
        let n = u64::from(periods) * u64::from(threads);
        assert_eq!(st.thread_ids.len(), usize::from(threads), "{threads} threads");
        assert_eq!(
            (
                st.frames_per_second.get(),
                st.frames_in,
                st.frames_out,
                st.lost_in_input,
                st.wrong_format
            ),
            (per_thread, n, n, 0, 0),
            "{threads} threads of {per_thread} frames/s"
        );
        assert_eq!(out.len() as u64, n);
        // Until the frames confirm the split (at a second boundary) the output announces the
        // station's rate without threads (the receiver counts and checks them); then the split.
        let announced = |d: &[u8]| {
            let p = parse_data(SeqFormat::Native, d).unwrap().native.unwrap();
            (p.threads, p.frames_per_second)
        };
        assert_eq!(announced(&out[0].1), (0, station_fps));
        assert_eq!(announced(&out[out.len() - 1].1), (threads, per_thread));
        assert!(r.first_problem().is_none(), "{:?}", r.first_problem());
    }
    // A rate that does not split over the threads seen is said.
    let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
    cfg.station_frames_per_second = vdif::FrameRate::new(1000).ok();
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    for k in 0..30u32 {
        for thread in 0..3u16 {
            let now = t0 + Duration::from_millis(u64::from(k * 3 + u32::from(thread)));
            r.handle_datagram(
                now,
                0,
                addr(1),
                &udps(u64::from(k * 3 + u32::from(thread)), &frame(thread, k)),
                false,
                &mut tee,
            );
        }
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_secs(1), &mut out);
    assert!(
        r.first_problem()
            .is_some_and(|p| p.contains("1000 frames/s do not split over its 3 threads")),
        "{:?}",
        r.first_problem()
    );
}

#[test]
fn a_thread_after_the_learning_is_recorded_but_not_relayed() {
    let t0 = Instant::now();
    let mut r = relay(SeqFormat::None, SeqFormat::Native, t0);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    // Thread 7 first comes 3.75 ms in, past the 2 ms over which a station's threads are learned.
    for k in 0..40u32 {
        let now = t0 + Duration::from_micros(125) * k;
        for thread in [4u16, 9] {
            r.handle_datagram(now, 0, addr(1), &frame(thread, k), false, &mut tee);
        }
        if k >= 30 {
            r.handle_datagram(now, 0, addr(1), &frame(7, k), false, &mut tee);
        }
        run_until(&mut r, &mut tee, now, &mut out);
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_millis(10), &mut out);
    let st = &r.stations()[0];
    assert_eq!(st.thread_ids, vec![4, 9]);
    assert_eq!((st.unexpected_thread, st.frames_in, st.frames_out), (10, 90, 80));
    assert_eq!(tee.segments.concat().len(), 90 * 8032);
    assert!(out
        .iter()
        .all(|(_, d)| parse_data(SeqFormat::Native, d).unwrap().header.thread_id != 7));
    assert!(r.first_problem().unwrap().contains("thread 7"));
}

#[test]
fn a_board_starting_behind_the_other_within_the_skew_is_learned() {
    // Board A (threads 0, 1) starts 1.5 ms (12 frames at 8000/s) after board B (threads 2, 3):
    // learning over two frames took B's threads for the station's and dropped A's.
    let t0 = Instant::now();
    let mut r = relay(SeqFormat::None, SeqFormat::Native, t0);
    assert!(stream::relay::LEARN_SKEW >= Duration::from_micros(1500));
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    for k in 0..40u32 {
        let now = t0 + Duration::from_micros(125) * k;
        for thread in [2u16, 3] {
            r.handle_datagram(now, 0, addr(2), &frame(thread, k), false, &mut tee);
        }
        if k >= 12 {
            for thread in [0u16, 1] {
                r.handle_datagram(now, 0, addr(1), &frame(thread, k), false, &mut tee);
            }
        }
        run_until(&mut r, &mut tee, now, &mut out);
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_millis(10), &mut out);
    let st = &r.stations()[0];
    assert_eq!(st.thread_ids, vec![0, 1, 2, 3]);
    assert_eq!((st.unexpected_thread, st.frames_in, st.frames_out), (0, 136, 136));
    // Every frame out once, announcing 4 threads, each thread in time order from its first.
    let mut next = [0u32, 0, 0, 0];
    for (_, d) in &out {
        let p = parse_data(SeqFormat::Native, d).unwrap();
        assert_eq!(p.native.unwrap().threads, 4);
        let t = usize::from(p.header.thread_id);
        let k = p.header.frame_number;
        assert!(k >= next[t], "thread {t} went back to {k}");
        next[t] = k + 1;
    }
    assert_eq!(next, [40; 4]);
}

#[test]
fn keep_alives_go_back_every_nth_datagram_of_each_sender() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::None, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.ack_every = Some(10);
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    for k in 0..25 {
        r.handle_datagram(t0, 0, addr(1), &frame(0, k), false, &mut tee);
        r.handle_datagram(t0, 1, addr(2), &frame(1, k), false, &mut tee);
    }
    let mut acks = Vec::new();
    while let Some(a) = r.poll_ack() {
        acks.push(a);
    }
    // The first datagram of each sender, then every 10th: 1, 11, 21.
    assert_eq!(acks.iter().filter(|a| **a == (0, addr(1))).count(), 3);
    assert_eq!(acks.iter().filter(|a| **a == (1, addr(2))).count(), 3);
}

#[test]
fn strays_short_oversized_and_foreign_datagrams_are_counted_and_the_stream_goes_on() {
    let t0 = Instant::now();
    let mut r = relay(SeqFormat::Jive5ab, SeqFormat::None, t0);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    for k in 0..100u32 {
        let now = t0 + Duration::from_micros(125) * k;
        r.handle_datagram(now, 0, addr(1), &udps(u64::from(k), &frame(0, k)), false, &mut tee);
        match k % 5 {
            0 => r.handle_datagram(now, 0, addr(9), b"hello", false, &mut tee),
            1 => r.handle_datagram(now, 0, addr(9), &[0xffu8; 9000], false, &mut tee),
            2 => r.handle_datagram(now, 0, addr(9), &[0u8; 65_000], true, &mut tee),
            _ => {}
        }
        run_until(&mut r, &mut tee, now, &mut out);
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_millis(40), &mut out);
    assert_eq!(out.len(), 100);
    let c = r.counters();
    assert_eq!((c.too_short, c.oversized), (20, 20));
    assert_eq!(c.bad_header + c.length_mismatch, 20);
    assert_eq!(c.rejected(), 60);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any datagrams, in any framing, never panic the relay, and a real stream after them is
    /// relayed whole.
    #[test]
    fn any_datagrams_leave_a_real_stream_whole(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..9000), 0..40),
        truncated in any::<bool>(),
    ) {
        let t0 = Instant::now();
        let mut r = relay(SeqFormat::Jive5ab, SeqFormat::Native, t0);
        let mut tee = VecSink::default();
        for g in &garbage {
            r.handle_datagram(t0, 0, addr(9), g, truncated, &mut tee);
        }
        let mut out = Vec::new();
        for k in 0..50u32 {
            let now = t0 + Duration::from_micros(125) * (k + 1);
            r.handle_datagram(now, 1, addr(1), &udps(u64::from(k), &frame(0, k)), false, &mut tee);
            run_until(&mut r, &mut tee, now, &mut out);
        }
        run_until(&mut r, &mut tee, t0 + Duration::from_millis(40), &mut out);
        let real: Vec<u32> = out
            .iter()
            .filter_map(|(_, d)| parse_data(SeqFormat::Native, d).ok())
            .filter(|p| p.header.station_id.0 == 0x4566 && p.frame == frame(p.header.thread_id, p.header.frame_number).as_slice())
            .map(|p| p.header.frame_number)
            .collect();
        prop_assert_eq!(real, (0..50).collect::<Vec<_>>());
    }
}

#[test]
fn a_late_departure_is_made_up_not_carried_into_every_later_frame() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::None, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.threads = Some(1);
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    let step = Duration::from_micros(125);
    for k in 0..400u32 {
        let now = t0 + step * k;
        r.handle_datagram(now, 0, addr(1), &frame(0, k), false, &mut tee);
        // The loop is held up for 1 ms around frame 100 (a busy host): nothing leaves then.
        if !(100..108).contains(&k) {
            run_until(&mut r, &mut tee, now, &mut out);
        }
    }
    assert_eq!(out.len(), 400);
    // The backlog went at the catch-up rate, and the last frames leave as they come.
    let tail = &out[300..];
    for (i, (at, _)) in tail.iter().enumerate() {
        assert_eq!(*at, t0 + step * (300 + i as u32), "frame {}", 300 + i);
    }
}

/// A relay with `burst` 8 (and 32, the default) driven as the socket loop drives it — input handed over in reader
/// batches every 250 µs, the loop sleeping until the next input or `poll_timeout` and waking
/// 60 µs late — sends the frames that fell due together (one GSO transmit, at most the burst): through
/// a burst in, the smoothing, the catch-up, a loop held up for 20 ms and steady input, no
/// window of time sees more frames than the catch-up rate allows plus two batches, frames leave
/// in batches (far fewer transmits than frames), and once the backlog is gone each frame leaves
/// within the batch wait of its one-by-one time.
#[test]
fn frames_that_fell_due_leave_together_within_the_catch_up_rate() {
    let t0 = Instant::now();
    let step = Duration::from_micros(125);
    let catch_up_spacing = step / 2;
    let late = Duration::from_micros(60);
    let held = (t0 + Duration::from_millis(30), t0 + Duration::from_millis(50));
    // Input: 150 frames at once, then one per spacing, handed over every 250 µs.
    let reader = Duration::from_micros(250);
    let arrivals: Vec<Instant> = (0..800u32)
        .map(|k| {
            if k < 150 {
                return t0;
            }
            let t = (step * k).as_nanos() as u64;
            let r = reader.as_nanos() as u64;
            t0 + Duration::from_nanos(t.div_ceil(r) * r)
        })
        .collect();
    let run = |burst: usize| {
        let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::None, t0);
        cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
        cfg.threads = Some(1);
        cfg.burst = burst;
        let mut r = Relay::new(cfg);
        let mut tee = VecSink::default();
        let mut out: Vec<(Instant, Vec<u8>)> = Vec::new();
        let mut batches = Vec::new();
        let mut k = 0;
        let end = t0 + Duration::from_millis(160);
        let mut now = t0;
        for _ in 0..1_000_000 {
            if now > end {
                break;
            }
            while k < arrivals.len() && arrivals[k] <= now {
                r.handle_datagram(arrivals[k], 0, addr(1), &frame(0, k as u32), false, &mut tee);
                k += 1;
            }
            let next_in = arrivals.get(k).copied().unwrap_or(end);
            if now >= held.0 && now < held.1 {
                // The loop is held up: input queues (stamped when it came), nothing leaves.
                now = next_in.min(held.1).max(now + Duration::from_nanos(1));
                continue;
            }
            if burst == 1 {
                // The one-by-one reference: every deadline met exactly.
                let until = next_in.min(end).min(if now < held.0 { held.0 } else { end });
                run_until(&mut r, &mut tee, until, &mut out);
                now = until.max(now + Duration::from_nanos(1));
                continue;
            }
            r.handle_timeout(now, &mut tee);
            while let Some(t) = r.poll_transmit(now).unwrap() {
                let n = t.datagrams().count();
                assert_eq!(t.segment_size.is_some(), n > 1, "GSO only for several datagrams");
                batches.push(n);
                for d in t.datagrams() {
                    out.push((now, d.to_vec()));
                }
                r.on_transmitted(now);
            }
            let wake = r.poll_timeout().unwrap_or(end).min(next_in);
            now = wake.max(now) + late;
        }
        (out, batches)
    };
    let strict = run(1).0;
    assert_eq!(strict.len(), 800);
    // 8, and the default of `stream relay` and `evlbi serve`'s net2net.
    for burst in [8, stream::relay::DEFAULT_BURST] {
        let (coarse, batches) = run(burst);
        assert_eq!(coarse.len(), 800);
        assert!(
            batches.iter().all(|&n| (1..=burst).contains(&n)),
            "{burst}: {batches:?}"
        );
        assert!(
            batches.len() * 2 < coarse.len(),
            "{} transmits for {} frames: frames were not grouped",
            batches.len(),
            coarse.len()
        );
        for (i, ((_, ds), (_, dc))) in strict.iter().zip(&coarse).enumerate() {
            assert_eq!(ds, dc, "frame {i} in order and whole");
        }
        // Any window: at most its length at the catch-up rate, plus two batches (one of credit
        // for a late wake-up).
        for i in 0..coarse.len() {
            for j in i + 1..coarse.len().min(i + 400) {
                let span = coarse[j].0 - coarse[i].0;
                let allowed = (span.as_nanos() / catch_up_spacing.as_nanos()) as usize + 2 * burst;
                assert!(
                    j - i < allowed,
                    "burst {burst}: frames {i}..={j} within {span:?}: faster than the catch-up rate"
                );
            }
        }
        // Once the backlog is gone, a frame leaves within the batch wait (and a late wake-up)
        // of its one-by-one time.
        let bound = stream::relay::BATCH_WAIT_MAX + late + step;
        for (i, ((ts, _), (tc, _))) in strict.iter().zip(&coarse).enumerate().skip(700) {
            assert!(
                *tc < *ts + bound && *ts < *tc + bound,
                "burst {burst}, frame {i}: {:?} from its one-by-one time",
                tc.saturating_duration_since(*ts).max(ts.saturating_duration_since(*tc))
            );
        }
    }
}

/// The default burst (32) is a cap, not a size: in the steady state a departure carries at most
/// [`stream::relay::BATCH_WAIT_MAX`] of the stream, so a slow stream is not sent in 32-frame
/// bursts. 8000 frames a second handed over 16 at a time every 2 ms (a reader that is slow to
/// wake): 5 frames per departure (0.5 ms of the stream), not the 16 that came together.
#[test]
fn a_departure_carries_at_most_the_batch_wait_of_a_slow_stream() {
    let t0 = Instant::now();
    let step = Duration::from_micros(125);
    let mut cfg = RelayConfig::new(SeqFormat::None, SeqFormat::None, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.threads = Some(1);
    cfg.burst = stream::relay::DEFAULT_BURST;
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let reader = Duration::from_millis(2);
    let mut batches = Vec::new();
    let mut sent = 0;
    let mut now = t0;
    let mut k = 0u32;
    for _ in 0..100_000 {
        if k >= 800 && !r.has_queued() {
            break;
        }
        // Hand over every frame whose time has come by the last reader wake-up.
        let handed = (now - t0).as_nanos() / reader.as_nanos() * reader.as_nanos();
        while k < 800 && (step * k).as_nanos() <= handed {
            r.handle_datagram(now, 0, addr(1), &frame(0, k), false, &mut tee);
            k += 1;
        }
        r.handle_timeout(now, &mut tee);
        while let Some(t) = r.poll_transmit(now).unwrap() {
            let n = t.datagrams().count();
            batches.push(n);
            sent += n;
            r.on_transmitted(now);
        }
        let next_reader = t0 + reader * (u32::try_from(handed / reader.as_nanos()).unwrap() + 1);
        now = r
            .poll_timeout()
            .unwrap_or(next_reader)
            .min(next_reader)
            .max(now + Duration::from_nanos(1));
    }
    assert_eq!(sent, 800, "every frame sent");
    let most = (stream::relay::BATCH_WAIT_MAX.as_nanos() / step.as_nanos()) as usize + 1;
    let steady = &batches[batches.len() / 2..];
    assert!(
        steady.iter().all(|&n| n <= most),
        "batches over {most} frames: {steady:?}"
    );
    assert!(steady.iter().any(|&n| n > 1), "frames were not grouped: {steady:?}");
}

#[test]
fn a_stream_without_a_frame_rate_is_refused_and_said_once_at_its_first_frame() {
    // Bare VDIF, EDV 0 headers (no sample rate) and no --fps: nothing can be placed. Issue 29:
    // the operator heard of it only when the relay stopped.
    let t0 = Instant::now();
    let mut r = Relay::new(RelayConfig::new(SeqFormat::None, SeqFormat::Native, t0));
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    assert_eq!(r.poll_notice(), None);
    r.handle_datagram(t0, 0, addr(5000), &frame(0, 0), false, &mut tee);
    let said = r.poll_notice().expect("said at the first frame");
    assert!(said.contains("station Ef: frame rate unknown"), "{said}");
    assert!(said.contains("pass --fps"), "{said}");
    assert_eq!(r.poll_notice(), None);
    for k in 1..100 {
        let at = t0 + Duration::from_micros(125 * u64::from(k));
        r.handle_datagram(at, 0, addr(5000), &frame(0, k), false, &mut tee);
        assert_eq!(r.poll_notice(), None, "once, not at frame {k}");
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_secs(2), &mut out);
    assert_eq!(r.counters().no_frame_rate, 100);
    assert!(out.is_empty(), "nothing relayed");
    assert!(tee.segments.iter().all(|s| s.is_empty()), "nothing recorded");
    assert!(r.first_problem().is_some_and(|p| p.contains("pass --fps")));
}

/// Issue 30: the relay queues a frame as a slice of the buffer it was received into and hands
/// it to the socket from there (the gathered form: prefix in `contents`, frame in `frames`),
/// never copied; the buffer is the caller's alone again once the frame has left.
#[test]
fn frames_leave_from_the_buffer_they_came_in_and_free_it_when_sent() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Jive5ab, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.threads = Some(1);
    cfg.burst = 4;
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    // Eight datagrams received into one buffer back to back, as recvmmsg fills a batch.
    let dgrams: Vec<Vec<u8>> = (0..8u32).map(|k| udps(u64::from(k), &frame(0, k))).collect();
    let len = dgrams[0].len();
    let buffer = bytes::Bytes::from(dgrams.concat());
    let spacing = Duration::from_secs(1) / FPS;
    for k in 0..8 {
        let d = buffer.slice(k * len..(k + 1) * len);
        r.handle_shared_datagram(t0 + spacing * k as u32, 0, addr(7), &d, false, &mut tee);
    }
    let mut sent = 0;
    let mut now = t0;
    for _ in 0..1000 {
        now += spacing;
        r.handle_timeout(now, &mut tee);
        while let Some(t) = r.poll_transmit(now).unwrap() {
            assert!(!t.frames.is_empty(), "the relay's frames go out gathered, not copied");
            assert_eq!(t.contents.len(), 8 * t.frames.len(), "one 8-byte udps prefix per frame");
            for (i, f) in t.frames.iter().enumerate() {
                // The frame is the very memory of datagram k of the buffer, past its prefix.
                let k = sent + i;
                assert_eq!(f.as_ptr(), buffer[k * len + 8..].as_ptr(), "frame {k} copied");
                assert_eq!(&f[..], &frame(0, k as u32)[..]);
            }
            let joined: Vec<Vec<u8>> = t.datagrams().map(std::borrow::Cow::into_owned).collect();
            for (i, d) in joined.iter().enumerate() {
                let p = parse_data(SeqFormat::Jive5ab, d).unwrap();
                assert_eq!(p.frame, &frame(0, (sent + i) as u32)[..]);
            }
            sent += t.frames.len();
            r.on_transmitted(now);
        }
        if sent == 8 {
            break;
        }
    }
    assert_eq!(sent, 8);
    let teed: usize = tee.segments.iter().map(Vec::len).sum();
    assert_eq!(teed, 8 * (len - 8), "the tee read every frame");
    // Every slice the relay held is gone: this handle is the buffer's last, so a socket
    // layer's pool gets it back.
    assert!(buffer.is_unique(), "the relay still holds the buffer after sending");
}

/// Station Ef's frame of time step `k` of thread `thread`, `per` steps a second.
fn frame_at(thread: u16, k: u32, per: u32) -> Vec<u8> {
    let mut f = frame(thread, 0);
    let mut h = vdif::VdifHeader::parse(&f).unwrap();
    h.seconds = 1000 + k / per;
    h.frame_number = k % per;
    h.emit(&mut f[..32]).unwrap();
    f[40] = k as u8;
    f
}

/// Issue 36, item 1, through a relay that knows only the mode's rate (`evlbi serve`'s
/// net2net): the backend's one thread at 1000 frames a second from one address, and a fake
/// board from another sending thread 1 at 200 datagrams a second, numbered as a thread of 500,
/// from the start. Learned as a second thread, it split the station into 2 × 500 and every
/// real frame numbered past 499 was dropped as another format. Not in step with the backend, it
/// is refused: every real frame is relayed and teed, none of the fake's, which is counted and
/// named.
#[test]
fn a_fake_board_sending_a_fraction_of_a_thread_is_not_relayed_or_recorded() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
    cfg.station_frames_per_second = vdif::FrameRate::new(1000).ok();
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    let (real, fake) = (addr(1), addr(9));
    let mut forged = 0u64;
    for k in 0..3000u32 {
        let now = t0 + Duration::from_millis(u64::from(k));
        r.handle_datagram(
            now,
            0,
            real,
            &udps(u64::from(k), &frame_at(0, k, 1000)),
            false,
            &mut tee,
        );
        if k % 5 == 0 {
            let now = now + Duration::from_micros(300);
            let f = frame_at(1, k / 2, 500);
            r.handle_datagram(now, 0, fake, &udps(u64::from(k / 5), &f), false, &mut tee);
            forged += 1;
        }
        if k % 16 == 0 {
            run_until(&mut r, &mut tee, now, &mut out);
        }
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_secs(4), &mut out);
    let st = &r.stations()[0];
    assert_eq!(st.thread_ids, vec![0], "{:?}", r.first_problem());
    assert_eq!(
        (
            st.frames_per_second.get(),
            st.frames_in,
            st.frames_out,
            st.wrong_format,
            st.lost_in_input
        ),
        (1000, 3000, 3000, 0, 0)
    );
    let threads = |frames: &[u8]| {
        frames
            .chunks(8032)
            .filter(|f| f[14] & 0x3 != 0 || f[15] & 0x3 != 0)
            .count()
    };
    assert_eq!(
        tee.segments.concat().len(),
        3000 * 8032,
        "the tee holds the real frames only"
    );
    assert_eq!(threads(&tee.segments.concat()), 0, "no frame of thread 1 teed");
    assert!(out
        .iter()
        .all(|(_, d)| parse_data(SeqFormat::Native, d).unwrap().header.thread_id == 0));
    assert_eq!(r.counters().foreign_source, forged);
    assert_eq!(st.refused_sources.len(), 1, "{:?}", st.refused_sources);
    assert_eq!(st.refused_sources[0].source, fake.to_string());
    assert_eq!(st.refused_sources[0].threads, vec![1]);
    // Its keep-alives: none for what was refused (it was held, and answered, while learning).
    let acks = std::iter::from_fn(|| r.poll_ack()).filter(|(_, a)| *a == fake).count();
    assert_eq!(acks, 0, "no keep-alive to the fake without --ack");
}

/// `--ack`: keep-alives go to senders whose frames are taken, never in answer to refused
/// datagrams — 1-byte garbage from a spoofable source got a 22-byte keep-alive each (1.72× the
/// bytes on the wire back to whoever the source claims to be).
#[test]
fn keep_alives_answer_only_frames_taken() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::None, t0);
    cfg.frames_per_second = vdif::FrameRate::new(FPS).ok();
    cfg.ack_every = Some(1);
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let (real, spoofed) = (addr(1), addr(7));
    for k in 0..100u32 {
        let now = t0 + Duration::from_micros(125) * k;
        r.handle_datagram(now, 0, real, &udps(u64::from(k), &frame(0, k)), false, &mut tee);
        r.handle_datagram(now, 0, spoofed, &[0x42], false, &mut tee);
        let mut bad = udps(u64::from(k), &frame(0, k));
        bad[8 + 3] ^= 0x40; // the legacy bit: the header says 16 bytes, the datagram carries 8032
        r.handle_datagram(now, 0, spoofed, &bad, false, &mut tee);
    }
    let acks: Vec<_> = std::iter::from_fn(|| r.poll_ack()).collect();
    assert_eq!(acks.iter().filter(|(_, a)| *a == real).count(), 100);
    assert_eq!(
        acks.iter().filter(|(_, a)| *a == spoofed).count(),
        0,
        "{:?}",
        r.counters()
    );
    // The 1-byte ones refused as too short; the others are frames of another (legacy) format:
    // a candidate that never formed a run, then the station's wrong format.
    r.finish();
    let wrong = r.stations()[0].wrong_format;
    assert_eq!((r.counters().too_short, r.counters().unconfirmed + wrong), (100, 100));
}

/// The fake board there before the backend (it starts 0.5 s later): the fake is the station
/// then, but when the backend's frames come and every board of the station sends under half its
/// share, the station's threads are learned anew: from then on every real frame is relayed and
/// teed, in a new output stream, and none of the fake's.
#[test]
fn a_fake_board_there_before_the_backend_gives_its_place_up_in_the_relay() {
    let t0 = Instant::now();
    let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
    cfg.station_frames_per_second = vdif::FrameRate::new(1000).ok();
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    let (real, fake) = (addr(1), addr(9));
    for k in 0..3000u32 {
        let now = t0 + Duration::from_millis(u64::from(k));
        if k >= 500 {
            r.handle_datagram(
                now,
                0,
                real,
                &udps(u64::from(k), &frame_at(0, k, 1000)),
                false,
                &mut tee,
            );
        }
        if k % 5 == 0 {
            let now = now + Duration::from_micros(300);
            r.handle_datagram(
                now,
                0,
                fake,
                &udps(u64::from(k / 5), &frame_at(1, k / 2, 500)),
                false,
                &mut tee,
            );
        }
        if k % 16 == 0 {
            run_until(&mut r, &mut tee, now, &mut out);
        }
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_secs(4), &mut out);
    let st = &r.stations()[0];
    assert_eq!(st.thread_ids, vec![0], "{:?}", r.first_problem());
    assert_eq!(st.frames_per_second.get(), 1000);
    // Every real frame, from its first, out in order after the fake's; none of the fake's after.
    let frames: Vec<(u16, u32)> = out
        .iter()
        .map(|(_, d)| {
            let h = parse_data(SeqFormat::Native, d).unwrap().header;
            (h.thread_id, (h.seconds - 1000) * 1000 + h.frame_number)
        })
        .collect();
    let first_real = frames.iter().position(|f| f.0 == 0).expect("real frames out");
    let tail = &frames[first_real..];
    assert!(tail.iter().all(|f| f.0 == 0), "a fake frame after the first real one");
    assert_eq!(
        tail.iter().map(|f| f.1).collect::<Vec<_>>(),
        (500..3000).collect::<Vec<_>>()
    );
    assert!(
        st.refused_sources.iter().any(|s| s.source == fake.to_string()),
        "{:?}",
        st.refused_sources
    );
}

/// Native framing in: `datagram` of frame `k` of thread 0 at `per` frames a second, announcing
/// `per` and one thread.
fn native_at(seq: u64, k: u32, per: u32) -> Vec<u8> {
    let p = NativePrefix {
        retransmit: false,
        stream: 0,
        seq,
        frames_per_second: per,
        threads: 1,
        session: 0,
    };
    let mut d = Vec::new();
    encode_data(SeqFormat::Native, &p, &frame_at(0, k, per), &mut d);
    d
}

/// Issue 36, item 6, a rate-lowering attack through the relay (native framing in, no rate
/// given): a source there 8 datagrams before the backend announces half its rate per thread and
/// goes on sending 200 datagrams a second. It made the station's rate: when the backend took its
/// place, every real frame numbered past 499 was refused as another format (1500 of 3000). Now a
/// board's frames numbered past the station's rate, each announcing a rate they fit, have it
/// learned anew: the backend's rate, every real frame from then on relayed, none of the fake's.
#[test]
fn a_source_first_announcing_half_the_rate_does_not_halve_the_station() {
    let t0 = Instant::now();
    let cfg = RelayConfig::new(SeqFormat::Native, SeqFormat::Native, t0);
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    let (real, fake) = (addr(1), addr(9));
    let faked = |seq: u64, k: u32| {
        let mut d = native_at(seq, k, 500);
        d[24 + 32..].fill(0x55);
        d
    };
    for k in 0..8u32 {
        let now = t0 + Duration::from_micros(100 * u64::from(k));
        r.handle_datagram(now, 0, fake, &faked(u64::from(k), k), false, &mut tee);
    }
    for k in 0..3000u32 {
        let now = t0 + Duration::from_millis(1 + u64::from(k));
        r.handle_datagram(now, 0, real, &native_at(u64::from(k), k, 1000), false, &mut tee);
        if k % 5 == 0 {
            r.handle_datagram(now, 0, fake, &faked(100 + u64::from(k), k / 2), false, &mut tee);
        }
        if k % 16 == 0 {
            run_until(&mut r, &mut tee, now, &mut out);
        }
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_secs(5), &mut out);
    let st = &r.stations()[0];
    assert_eq!(
        (st.frames_per_second.get(), st.thread_ids.clone()),
        (1000, vec![0]),
        "{st:?}"
    );
    // In the output stream it ends with: the backend's frames, in order, to its last.
    let base = parse_data(SeqFormat::Native, &native_at(0, 0, 1000))
        .unwrap()
        .header
        .frame_index(vdif::FrameRate::new(1000).unwrap());
    let last: Vec<(bool, u32, u64)> = out
        .iter()
        .map(|(_, d)| parse_data(SeqFormat::Native, d).unwrap())
        .filter(|p| p.native.unwrap().stream == st.stream.unwrap())
        .map(|p| {
            let fake = p.frame[40..].iter().all(|b| *b == 0x55);
            (
                fake,
                p.native.unwrap().frames_per_second,
                p.header.frame_index(vdif::FrameRate::new(1000).unwrap()) - base,
            )
        })
        .collect();
    assert!(
        last.iter().all(|f| !f.0 && f.1 == 1000),
        "a fake frame, or the half rate, in the last stream"
    );
    let ks: Vec<u64> = last.iter().map(|f| f.2).collect();
    assert!(
        ks.windows(2).all(|w| w[1] == w[0] + 1),
        "the backend's frames in order, none missing"
    );
    assert_eq!(ks.last(), Some(&2999));
    assert!(
        ks.len() >= 2400,
        "{} of the backend's 3000 frames in its stream",
        ks.len()
    );
    assert!(
        st.refused_sources.iter().any(|s| s.source == fake.to_string()),
        "{st:?}"
    );
}

#[test]
fn a_given_frame_rate_above_the_frames_own_count_is_corrected_and_said_not_counted_as_loss() {
    // A station of 1000 frames a second per thread, relayed with --fps 4000: its frame numbers
    // wrap at 1000, and at 4000 every second would have "lost" 3000 frames per thread.
    let t0 = Instant::now();
    let (actual, given, threads) = (1000u32, 4000u32, 2u16);
    let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
    cfg.frames_per_second = vdif::FrameRate::new(given).ok();
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let mut out = Vec::new();
    let step = Duration::from_nanos(1_000_000_000 / u64::from(actual * u32::from(threads)));
    let mut seq = 0u64;
    // 3.3 s from a third into a second: three second boundaries.
    let (from, periods) = (333u32, actual * 33 / 10);
    for k in from..from + periods {
        for thread in 0..threads {
            let mut f = frame(thread, 0);
            let mut h = vdif::VdifHeader::parse(&f).unwrap();
            h.seconds = 1000 + k / actual;
            h.frame_number = k % actual;
            h.emit(&mut f[..32]).unwrap();
            let now = t0 + step * ((k - from) * u32::from(threads) + u32::from(thread));
            r.handle_datagram(now, 0, addr(1), &udps(seq, &f), false, &mut tee);
            seq += 1;
        }
        if k % 64 == 0 {
            run_until(
                &mut r,
                &mut tee,
                t0 + step * ((k - from) * u32::from(threads)),
                &mut out,
            );
        }
    }
    run_until(&mut r, &mut tee, t0 + Duration::from_secs(5), &mut out);
    let st = &r.stations()[0];
    let n = u64::from(periods) * u64::from(threads);
    assert_eq!(
        (
            st.frames_per_second.get(),
            st.frames_in,
            st.frames_out,
            st.lost_in_input,
            st.wrong_format
        ),
        (actual, n, n, 0, 0),
        "{st:?}"
    );
    assert_eq!(out.len() as u64, n);
    // Said once, as it happened, and kept as the first problem.
    let w = r.poll_warning().expect("a warning");
    assert!(
        w.contains("count 1000 a second per thread") && w.contains("not the 4000 given (--fps)"),
        "{w}"
    );
    assert_eq!(r.poll_warning(), None);
    assert_eq!(r.first_problem(), Some(w.as_str()));
    // The output announces the rate the frames count.
    let p = parse_data(SeqFormat::Native, &out[out.len() - 1].1)
        .unwrap()
        .native
        .unwrap();
    assert_eq!((p.threads, p.frames_per_second), (threads, actual));
}

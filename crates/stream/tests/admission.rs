//! Station admission against floods (issue 28, items 2–4), in virtual time: the receiver is fed
//! the attack's datagrams with the times they would arrive, and judged by what it writes.
//!
//! The real stream throughout: two stations (Ef, Wb) from one sender socket, native framing,
//! 2000 frames/s each (one datagram every 250 µs, alternating), 2 s: 4000 frames per station.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stream::wire::{encode_data, NativePrefix, SeqFormat};
use stream::{Receiver, ReceiverConfig, VecSink};
use vdif::FrameLayout;

const FPS: u32 = 2000;
const FRAMES: u32 = 4000;
const EF: u16 = 0x4566;
const WB: u16 = 0x5762;
const SENDER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9);

/// Frame `k` of `station` at 2000 frames/s (1056 bytes), its data recognisable per frame.
fn frame_of(station: u16, k: u32, fps: u32) -> Vec<u8> {
    let l = FrameLayout::new(f64::from(fps) * 8192.0, 2, 1, 1, 1024).unwrap();
    assert_eq!(l.frames_per_second.get(), fps);
    let mut h = l.header(station);
    h.seconds = 1000 + k / fps;
    h.frame_number = k % fps;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    for (i, b) in f[32..].iter_mut().enumerate() {
        *b = (k as usize)
            .wrapping_mul(131)
            .wrapping_add(i * 7)
            .wrapping_add(usize::from(station)) as u8;
    }
    f
}

fn native(stream: u16, session: u16, seq: u64, fps: u32, f: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    let p = NativePrefix {
        retransmit: false,
        stream,
        seq,
        frames_per_second: fps,
        threads: 1,
        session,
    };
    encode_data(SeqFormat::Native, &p, f, &mut d);
    d
}

/// A phantom: its own port and station, in-sequence tiny frames (32-byte header, 8 bytes of data).
fn phantom(n: u64, frames: usize) -> (SocketAddr, Vec<Vec<u8>>) {
    let from = SocketAddr::from(([127, 0, 0, 1], 10_000 + (n % 50_000) as u16));
    let l = FrameLayout::new(f64::from(FPS) * 64.0, 2, 1, 1, 8).unwrap();
    let mut h = l.header(0x2000 + (n % 0x2000) as u16);
    h.seconds = 1000;
    let frames = (0..frames as u32)
        .map(|k| {
            h.frame_number = k;
            let mut f = vec![0u8; l.frame_len];
            h.emit(&mut f[..32]).unwrap();
            native(n as u16, 1 + n as u16, u64::from(k), FPS, &f)
        })
        .collect();
    (from, frames)
}

/// The real stream's datagram `i` (Ef and Wb alternate) and when it arrives after `t0`.
fn real(i: u32, t0: Instant) -> (Instant, Vec<u8>) {
    let (k, stream, station) = (i / 2, (i % 2) as u16, if i.is_multiple_of(2) { EF } else { WB });
    let at = t0 + Duration::from_micros(250 * u64::from(i));
    (at, native(stream, 7, u64::from(k), FPS, &frame_of(station, k, FPS)))
}

/// Valid and filled frames written for `station`, and whether it was retired.
fn written(rx: &Receiver, station: u16) -> (u64, u64) {
    rx.summaries()
        .iter()
        .filter(|s| s.station_id.0 == station)
        .fold((0, 0), |(v, f), s| {
            (v + s.window.written_valid, f + s.window.written_filled)
        })
}

/// Every datagram is counted exactly once (see the receiver tests).
fn assert_accounted(rx: &Receiver) {
    let c = rx.counters();
    let w = rx.window_totals();
    let in_windows = w.placed + w.duplicates + w.duplicate_mismatch + w.late + w.wrong_format + w.out_of_range;
    assert_eq!(c.datagrams, c.rejected() + in_windows + rx.in_flight(), "{c:?} {w:?}");
}

/// The real stream (from 100 ms) with a phantom source sent at each of `flood`'s times, in
/// order (phantom n sends its `frames` datagrams back to back): the real stations' (valid,
/// filled) frames.
fn stream_under(cfg: ReceiverConfig, flood: &[Duration], frames: usize) -> (Receiver, [(u64, u64); 2]) {
    let mut rx = Receiver::new(cfg);
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let start = t0 + Duration::from_millis(100);
    let (mut n, mut i) = (0usize, 0u32);
    let mut next_expire = t0;
    // The two sequences merged by time, made as they are sent (the fast flood is 1.5 million
    // datagrams).
    loop {
        let phantom_at = flood.get(n).map(|d| t0 + *d);
        let real_at = (i < 2 * FRAMES).then(|| real(i, start).0);
        let (t, datagrams) = match (phantom_at, real_at) {
            (Some(p), r) if r.is_none_or(|r| p <= r) => {
                n += 1;
                let (from, ds) = phantom(n as u64 - 1, frames);
                (p, ds.into_iter().map(|d| (from, d)).collect::<Vec<_>>())
            }
            (_, Some(r)) => {
                i += 1;
                (r, vec![(SENDER, real(i - 1, start).1)])
            }
            _ => break,
        };
        if t >= next_expire {
            // As the socket loop does, every 100 ms.
            rx.expire(t);
            next_expire = t + Duration::from_millis(100);
        }
        for (from, d) in datagrams {
            rx.handle_datagram(t, from, &d, false, &mut sink);
        }
    }
    rx.finish(&mut sink);
    assert_accounted(&rx);
    let w = [written(&rx, EF), written(&rx, WB)];
    (rx, w)
}

/// Issue 28 item 2: 70 new ports every 0.5 s, 2 in-sequence frames each, from before the stream
/// to its end. Main wrote 0 of the 8000 frames (the two stations of one socket evicted each
/// other from the table of sources being checked); now nothing is lost.
#[test]
fn a_flood_of_two_frame_phantoms_costs_two_stations_of_one_socket_nothing() {
    let flood: Vec<Duration> = (0..5 * 70u64)
        .map(|n| Duration::from_millis(500 * (n / 70)) + Duration::from_micros(100 * (n % 70)))
        .collect();
    let (rx, w) = stream_under(ReceiverConfig::default(), &flood, 2);
    assert_eq!(w, [(4000, 0), (4000, 0)], "{:?}", rx.counters());
    assert_eq!(rx.counters().unconfirmed, 700);
}

/// A flood far beyond the issue's: a new phantom source every 5 µs (200 000 a second, 3 frames
/// each) from before the stream to its end. A source is pushed out of the table only when 64
/// newer ones arrive between two of its datagrams, so the real sender (one every 250 µs) gets in
/// and stays.
#[test]
fn a_flood_of_200_000_new_sources_a_second_costs_the_stream_nothing() {
    let flood: Vec<Duration> = (0..500_000u64).map(|n| Duration::from_micros(5 * n)).collect();
    let (rx, w) = stream_under(ReceiverConfig::default(), &flood, 3);
    let c = rx.counters();
    println!("200 000 new sources/s: {w:?}, {c:?}");
    assert_eq!(w, [(4000, 0), (4000, 0)], "{c:?}");
    assert_eq!(c.unconfirmed, 1_500_000);
}

/// Issue 28 item 3: 300 phantom sources × 3 frames just before the real sender, `--max-stations
/// 2`. Main lost the real stations' first 0.87 s; now nothing.
#[test]
fn three_hundred_phantoms_before_the_sender_cost_it_nothing() {
    let cfg = ReceiverConfig {
        max_stations: 2,
        ..ReceiverConfig::default()
    };
    let flood: Vec<Duration> = (0..300u64).map(|n| Duration::from_micros(90_000 + 20 * n)).collect();
    let (rx, w) = stream_under(cfg, &flood, 3);
    assert_eq!(w, [(4000, 0), (4000, 0)], "{:?}", rx.counters());
    assert_eq!(rx.counters().too_many_stations, 0);
}

/// Issue 28 item 3, × 5 frames: two phantoms become stations and take both slots of
/// `--max-stations 2` (main: for 10 s, the real stations got nothing). A station that received
/// for less than 100 ms and went quiet gives its slot to one that has been sending for 100 ms,
/// its frames unwritten; the real stations' frames are held meanwhile and lose nothing.
#[test]
fn phantom_stations_give_their_slots_to_live_stations() {
    let cfg = ReceiverConfig {
        max_stations: 2,
        ..ReceiverConfig::default()
    };
    let flood: Vec<Duration> = (0..300u64).map(|n| Duration::from_micros(90_000 + 20 * n)).collect();
    let (rx, w) = stream_under(cfg, &flood, 5);
    assert_eq!(w, [(4000, 0), (4000, 0)], "{:?}", rx.counters());
    let s = rx.summaries();
    let phantoms: Vec<_> = s
        .iter()
        .filter(|s| s.station_id.0 != EF && s.station_id.0 != WB)
        .collect();
    assert_eq!(phantoms.len(), 2, "two phantoms held the slots: {s:?}");
    // Their 5 frames each were taken, and (issue 36) not written: a phantom that held a slot
    // for a moment got a file of its 5 frames.
    assert!(phantoms
        .iter()
        .all(|p| p.retired && p.window.placed == 5 && p.window.written_valid + p.window.written_filled == 0));
}

/// At a rate the hold cannot cover (16 000 frames/s: 256 frames are 16 ms) a station waiting
/// 100 ms for a slot loses frames — and they are filled, its time line starting where its
/// stream did, not cut.
#[test]
fn frames_a_waiting_station_could_not_hold_are_filled() {
    let fps = 16_000;
    let mut rx = Receiver::new(ReceiverConfig {
        max_stations: 1,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // A phantom station of 5 frames takes the slot, then is quiet.
    for k in 0..5u32 {
        let d = native(3, 3, u64::from(k), fps, &frame_of(0x3333, k, fps));
        rx.handle_datagram(t0, SocketAddr::from(([127, 0, 0, 1], 7777)), &d, false, &mut sink);
    }
    assert_eq!(rx.station_count(), 1);
    // The real station from 10 ms later: 4000 frames in 250 ms.
    for k in 0..4000u32 {
        let at = t0 + Duration::from_millis(10) + Duration::from_micros(62 * u64::from(k) + u64::from(k) / 2);
        let d = native(0, 7, u64::from(k), fps, &frame_of(EF, k, fps));
        rx.handle_datagram(at, SENDER, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    assert_accounted(&rx);
    let s = rx.summaries().into_iter().find(|s| s.station_id.0 == EF).unwrap();
    let w = s.window;
    assert_eq!(
        w.written_valid + w.written_filled,
        4000,
        "one time line from frame 0: {w:?}"
    );
    assert!(w.written_filled > 1000 && w.written_valid >= 256 + 2000, "{w:?}");
    assert_eq!(w.discontinuities, 0);
    assert_eq!(rx.counters().too_many_stations, w.written_filled, "{:?}", rx.counters());
}

/// A station that has been receiving for longer than 100 ms keeps its slot when it pauses: a
/// newcomer waits for `station_timeout` as before (issue 17), refused meanwhile.
#[test]
fn an_established_station_keeps_its_slot_through_a_pause() {
    let mut rx = Receiver::new(ReceiverConfig {
        max_stations: 1,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for k in 0..400u32 {
        let d = native(0, 7, u64::from(k), FPS, &frame_of(EF, k, FPS));
        rx.handle_datagram(
            t0 + Duration::from_micros(500 * u64::from(k)),
            SENDER,
            &d,
            false,
            &mut sink,
        );
    }
    // Wb from another sender 1 s later, for 500 ms.
    let other = SocketAddr::from(([127, 0, 0, 2], 9));
    for k in 0..1000u32 {
        let at = t0 + Duration::from_secs(1) + Duration::from_micros(500 * u64::from(k));
        rx.handle_datagram(
            at,
            other,
            &native(0, 8, u64::from(k), FPS, &frame_of(WB, k, FPS)),
            false,
            &mut sink,
        );
    }
    rx.finish(&mut sink);
    assert_accounted(&rx);
    assert_eq!(rx.station_count(), 1);
    assert_eq!(rx.counters().too_many_stations, 1000);
    assert_eq!(written(&rx, EF), (400, 0));
}

/// A phantom flood from one socket spraying station ids holds at most `max_stations` places of
/// that socket in the table, and the table stays bounded whatever the flood.
#[test]
fn the_table_of_sources_stays_bounded() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for n in 0..1000u32 {
        let at = t0 + Duration::from_micros(u64::from(n) * 50);
        let d = native(n as u16, 5, 0, FPS, &frame_of(0x1000 + n as u16, 0, FPS));
        rx.handle_datagram(at, SENDER, &d, false, &mut sink);
        assert!(
            rx.pending_streams() <= 16,
            "one socket, {} streams",
            rx.pending_streams()
        );
    }
    assert_eq!(rx.counters().phantoms_dropped, 1000 - 16);
    for n in 0..5000u32 {
        let at = t0 + Duration::from_millis(50) + Duration::from_micros(u64::from(n) * 50);
        let (from, ds) = phantom(u64::from(n), 1);
        rx.handle_datagram(at, from, &ds[0], false, &mut sink);
        // 64 sources, one of them (until it is the least recent) the socket of 16.
        assert!(rx.pending_streams() <= 16 + 63, "{}", rx.pending_streams());
    }
    rx.finish(&mut sink);
    assert_accounted(&rx);
    assert_eq!(rx.in_flight(), 0);
}

//! The receiver state machine against hostile datagrams: every one is counted by reason, none
//! panics, none sizes an allocation, none rewrites a frame already accepted, and who feeds a
//! station is decided by runs of consistent frames, not by who spoke first.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use stream::wire::{encode_data, NativePrefix, SeqFormat};
use stream::{FrameSink, Receiver, ReceiverConfig, SourceFilter, VecSink};
use vdif::FrameLayout;

/// Frame `k` of station `station` (8000 frames/s, 8032 bytes), its data recognisable per frame.
fn frame_of(station: u16, k: u32) -> Vec<u8> {
    let l = FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap();
    let mut h = l.header(station);
    h.seconds = 1000 + k / 8000;
    h.frame_number = k % 8000;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    for (i, b) in f[32..].iter_mut().enumerate() {
        *b = (k as usize).wrapping_mul(131).wrapping_add(i * 7) as u8;
    }
    f
}

fn frame(k: u32) -> Vec<u8> {
    frame_of(0x4566, k)
}

/// `f` in native framing: stream 0, session 1.
fn native(seq: u64, fps: u32, threads: u16, f: &[u8]) -> Vec<u8> {
    native_on(0, 1, seq, fps, threads, f)
}

fn native_on(stream: u16, session: u16, seq: u64, fps: u32, threads: u16, f: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    let p = NativePrefix {
        retransmit: false,
        stream,
        seq,
        frames_per_second: fps,
        threads,
        session,
    };
    encode_data(SeqFormat::Native, &p, f, &mut d);
    d
}

/// The same frame's header with other data: what a forger repeating a frame's time sends.
fn forged(k: u32, salt: u8) -> Vec<u8> {
    let mut f = frame(k);
    for (i, b) in f[32..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(29) ^ salt ^ 0x5a;
    }
    f
}

const FROM: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn real(range: std::ops::Range<u32>) -> Vec<u8> {
    range.flat_map(frame).collect()
}

fn written(sink: &VecSink) -> Vec<u8> {
    sink.segments.concat()
}

/// Every datagram is counted exactly once: rejected by reason, in a window's counters, or still
/// in flight (held for an unaccepted source, or as a window candidate).
fn assert_accounted(rx: &Receiver) {
    let c = rx.counters();
    let w = rx.window_totals();
    let in_windows = w.placed + w.duplicates + w.duplicate_mismatch + w.late + w.wrong_format + w.out_of_range;
    assert_eq!(
        c.datagrams,
        c.rejected() + in_windows + rx.in_flight(),
        "{c:?} {w:?} in flight {}",
        rx.in_flight()
    );
}

#[test]
fn a_forged_frame_rate_cannot_size_the_window() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for (fps, threads) in [(u32::MAX, 1u16), (8000, u16::MAX), (1 << 25, 1)] {
        rx.handle_datagram(t0, FROM, &native(0, fps, threads, &frame(0)), false, &mut sink);
    }
    assert_eq!(rx.counters().implausible_stream, 3);
    assert_eq!(rx.station_count(), 0);
    // A sane stream afterwards is received normally.
    for k in 0..100 {
        rx.handle_datagram(t0, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
    }
    rx.finish(&mut sink);
    assert_eq!(rx.summaries()[0].window.written_valid, 100);
    assert_accounted(&rx);
}

#[test]
fn each_rejection_reason_is_counted() {
    let mut rx = Receiver::new(ReceiverConfig {
        max_stations: 1,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // The station, by a run of in-sequence frames.
    for k in 0..4u32 {
        rx.handle_datagram(t0, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
    }
    assert_eq!(rx.station_count(), 1);
    let good = native(4, 8000, 1, &frame(4));
    rx.handle_datagram(t0, FROM, &good[..20], false, &mut sink); // too short
    rx.handle_datagram(t0, FROM, &good, true, &mut sink); // truncated by the kernel
    let mut bad = good.clone();
    bad[0] = b'X';
    rx.handle_datagram(t0, FROM, &bad, false, &mut sink); // magic
    let mut bad = good.clone();
    bad[4] = 7;
    rx.handle_datagram(t0, FROM, &bad, false, &mut sink); // version
    rx.handle_datagram(t0, FROM, &good[..good.len() - 8], false, &mut sink); // length mismatch
    rx.handle_datagram(t0, addr("127.0.0.2:9"), &good, false, &mut sink); // another source, live sender
                                                                          // A second station, max 1: its run is refused whole.
    for k in 0..4u32 {
        let d = native_on(1, 1, u64::from(k), 8000, 1, &frame_of(7, k));
        rx.handle_datagram(t0, FROM, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let c = rx.counters();
    assert_eq!(
        (
            c.too_short,
            c.oversized,
            c.bad_magic,
            c.bad_version,
            c.length_mismatch,
            c.foreign_source,
            c.too_many_stations,
            c.unconfirmed
        ),
        (1, 1, 1, 1, 1, 1, 4, 0)
    );
    assert_eq!(c.rejected(), 10);
    assert_accounted(&rx);
}

#[test]
fn a_stray_datagram_before_the_sender_does_not_lock_it_out() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // The reviewer's case: one well-formed datagram for stream 0 from elsewhere, first.
    rx.handle_datagram(
        t0,
        addr("127.0.0.1:7777"),
        &native(1, 8000, 1, &frame(1)),
        false,
        &mut sink,
    );
    for k in 0..200u32 {
        let t = t0 + Duration::from_micros(125 * u64::from(k + 1));
        rx.handle_datagram(t, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
    }
    rx.finish(&mut sink);
    assert!(written(&sink) == real(0..200), "every real frame written, nothing else");
    let c = rx.counters();
    assert_eq!((c.unconfirmed, c.foreign_source, c.phantoms_dropped), (1, 0, 1));
    let s = &rx.summaries()[0];
    assert_eq!(s.source, FROM.to_string());
    assert_eq!(s.window.written_valid, 200);
    assert_accounted(&rx);
}

#[test]
fn the_first_sequence_number_is_the_first_frames() {
    // Regression (issue 17): seq_first read the first number + 3: the frames a new stream's
    // window holds as candidates were placed without their numbers.
    for (format, fps) in [
        (SeqFormat::Native, None),
        (SeqFormat::Jive5ab, vdif::FrameRate::new(8000).ok()),
    ] {
        let mut rx = Receiver::new(ReceiverConfig {
            format,
            frames_per_second: fps,
            ..ReceiverConfig::default()
        });
        let mut sink = VecSink::default();
        let t0 = Instant::now();
        for k in 0..100u32 {
            let t = t0 + Duration::from_micros(125 * u64::from(k + 1));
            let d = match format {
                SeqFormat::Native => native(5000 + u64::from(k), 8000, 1, &frame(k)),
                _ => [(5000 + u64::from(k)).to_le_bytes().to_vec(), frame(k)].concat(),
            };
            rx.handle_datagram(t, FROM, &d, false, &mut sink);
        }
        rx.finish(&mut sink);
        let s = &rx.summaries()[0];
        assert_eq!(s.window.written_valid, 100, "{format:?}");
        assert_eq!((s.seq_first, s.seq_last), (Some(5000), Some(5099)), "{format:?}");
        assert_accounted(&rx);
    }
}

/// Frame `k` of a one-thread stream whose thread id is `thread`.
fn frame_on_thread(thread: u16, k: u32) -> Vec<u8> {
    let mut f = frame(k);
    let mut h = vdif::VdifHeader::parse(&f).unwrap();
    h.thread_id = thread;
    h.emit(&mut f[..32]).unwrap();
    f
}

#[test]
fn a_stream_on_a_nonzero_thread_id_is_received_and_filled_on_its_thread() {
    // Regression (issue 17): jive5ab's fill pattern is thread 290; in jive5ab framing every
    // datagram was rejected ("not a VDIF stream") unless --threads 291, which then wrote 290
    // invalid frames per real one. Threads are their ids, whatever they are.
    let mut rx = Receiver::new(ReceiverConfig {
        format: SeqFormat::Jive5ab,
        frames_per_second: vdif::FrameRate::new(8000).ok(),
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for k in (0..400u32).filter(|k| *k != 200) {
        let t = t0 + Duration::from_micros(125 * u64::from(k + 1));
        let d = [u64::from(k).to_le_bytes().to_vec(), frame_on_thread(290, k)].concat();
        rx.handle_datagram(t, FROM, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let c = rx.counters();
    assert_eq!(c.rejected(), 0, "{c:?}");
    let s = &rx.summaries()[0];
    assert_eq!((s.window.written_valid, s.window.written_filled), (399, 1));
    let out = written(&sink);
    assert_eq!(
        out.len(),
        400 * 8032,
        "one frame per time step, no other thread invented"
    );
    for (k, f) in out.chunks(8032).enumerate() {
        let h = vdif::VdifHeader::parse(f).unwrap();
        assert_eq!(
            (h.thread_id, h.frame_number, h.invalid),
            (290, k as u32, k == 200),
            "frame {k}"
        );
    }
    assert_accounted(&rx);
}

#[test]
fn a_restarted_sender_is_followed_and_counted() {
    // New port and session (a new process), or the same port with a new session.
    for (second, session) in [(addr("127.0.0.1:10"), 2u16), (FROM, 2)] {
        let mut rx = Receiver::new(ReceiverConfig::default());
        let mut sink = VecSink::default();
        let t0 = Instant::now();
        let step = Duration::from_micros(125);
        let mut t = t0;
        for k in 0..100u32 {
            t += step;
            rx.handle_datagram(t, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
        }
        // The first sender is gone; the restarted one continues the time, numbering anew.
        t += Duration::from_millis(300);
        for k in 100..300u32 {
            t += step;
            let d = native_on(0, session, u64::from(k - 100), 8000, 1, &frame(k));
            rx.handle_datagram(t, second, &d, false, &mut sink);
        }
        rx.finish(&mut sink);
        assert!(written(&sink) == real(0..300), "continuous output across the restart");
        let s = &rx.summaries()[0];
        assert_eq!(s.sender_changes, 1);
        assert!(s.sender_change_log[0].restarted);
        assert_eq!(s.sender_change_log[0].to, format!("{second} session 0002"));
        assert_eq!(s.session, Some(2));
        assert_eq!(s.window.written_filled, 0);
        assert_eq!(rx.counters().rejected(), 0);
        assert_accounted(&rx);
    }
}

/// Two independent senders (two relays, say) each number their one station stream 0: two
/// stations, each with its own NAK address and stream; and a sender restarting with another
/// stream index for the same station still takes it over.
#[test]
fn stations_are_their_vdif_ids_whatever_stream_index_their_senders_give() {
    let mut rx = Receiver::new(ReceiverConfig {
        arq: true,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let step = Duration::from_micros(125);
    let (a, b) = (addr("10.0.0.1:5000"), addr("10.0.0.2:5000"));
    for k in 0..100u32 {
        let t = t0 + step * k;
        rx.handle_datagram(
            t,
            a,
            &native_on(0, 1, u64::from(k), 8000, 1, &frame_of(0x4566, k)),
            false,
            &mut sink,
        );
        rx.handle_datagram(
            t,
            b,
            &native_on(0, 7, u64::from(k), 8000, 1, &frame_of(0x5762, k)),
            false,
            &mut sink,
        );
    }
    // Ef's sender restarts and now calls it stream 3.
    let t1 = t0 + step * 100 + Duration::from_millis(300);
    for k in 100..200u32 {
        let d = native_on(3, 2, u64::from(k - 100), 8000, 1, &frame_of(0x4566, k));
        rx.handle_datagram(t1 + step * (k - 100), a, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let s = rx.summaries();
    assert_eq!(s.len(), 2, "{s:?}");
    let ef = s.iter().find(|s| s.station == "Ef").unwrap();
    let wb = s.iter().find(|s| s.station == "Wb").unwrap();
    assert_eq!(
        (ef.stream, ef.sender_changes, ef.window.written_valid),
        (Some(3), 1, 200)
    );
    assert_eq!(
        (wb.stream, wb.source.as_str(), wb.window.written_valid),
        (Some(0), "10.0.0.2:5000", 100)
    );
    assert_eq!(rx.counters().rejected(), 0);
    assert_accounted(&rx);
}

#[test]
fn a_second_sender_beside_a_live_one_is_refused() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let other = addr("127.0.0.3:9");
    for k in 0..400u32 {
        let t = t0 + Duration::from_micros(125 * u64::from(k));
        rx.handle_datagram(t, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
        // A consistent run of forged frames a little ahead in time, from elsewhere.
        if k >= 10 {
            let d = native_on(0, 9, u64::from(k + 5), 8000, 1, &forged(k + 5, 3));
            rx.handle_datagram(t, other, &d, false, &mut sink);
        }
    }
    rx.finish(&mut sink);
    assert!(written(&sink) == real(0..400), "the forged run never took the stream");
    let c = rx.counters();
    assert_eq!(c.foreign_source, 390);
    assert_eq!(rx.summaries()[0].sender_changes, 0);
    assert_accounted(&rx);
}

#[test]
fn phantom_stations_do_not_fill_max_stations_and_expire() {
    let mut rx = Receiver::new(ReceiverConfig {
        max_stations: 2,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // 16 datagrams naming streams 100..115 before the real stations.
    for s in 100..116u16 {
        let d = native_on(s, 1, 0, 8000, 1, &frame_of(s, 0));
        rx.handle_datagram(t0, addr("127.0.0.1:6666"), &d, false, &mut sink);
    }
    assert_eq!(rx.station_count(), 0, "phantoms take no slot");
    for k in 0..100u32 {
        let t = t0 + Duration::from_micros(125 * u64::from(k + 1));
        for (stream, station) in [(0u16, 0x4566u16), (1, 0x5762)] {
            let d = native_on(stream, 1, u64::from(k), 8000, 1, &frame_of(station, k));
            rx.handle_datagram(t, FROM, &d, false, &mut sink);
        }
    }
    assert_eq!(rx.station_count(), 2);
    assert_eq!(rx.counters().too_many_stations, 0);
    // The phantoms are forgotten once quiet for the timeout.
    rx.expire(t0 + Duration::from_millis(1100));
    assert_eq!(rx.counters().phantoms_dropped, 16);
    assert_eq!(rx.counters().unconfirmed, 16);
    assert_eq!(rx.in_flight(), 0);
    rx.finish(&mut sink);
    for s in rx.summaries() {
        assert_eq!(
            (s.window.written_valid, s.window.written_filled),
            (100, 0),
            "{}",
            s.station
        );
    }
    assert_accounted(&rx);
}

#[test]
fn a_flood_of_phantoms_does_not_evict_a_real_station_forming() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let mut n = 0u64;
    for k in 0..100u32 {
        // 20 phantoms (new stream, new port each) between two real frames: 2000 in all, far
        // beyond the table of sources being checked.
        for _ in 0..20 {
            n += 1;
            let from = SocketAddr::from(([127, 0, 0, 1], 10_000 + (n % 50_000) as u16));
            let d = native_on(100 + (n % 1000) as u16, 1, n, 8000, 1, &frame_of(0x1111, k));
            rx.handle_datagram(t0 + Duration::from_micros(n), from, &d, false, &mut sink);
        }
        rx.handle_datagram(
            t0 + Duration::from_micros(n),
            FROM,
            &native(u64::from(k), 8000, 1, &frame(k)),
            false,
            &mut sink,
        );
        assert_accounted(&rx);
    }
    rx.finish(&mut sink);
    assert_eq!(rx.station_count(), 1);
    assert!(written(&sink) == real(0..100));
    assert_eq!(rx.counters().unconfirmed, 2000);
    assert_accounted(&rx);
}

/// A sink that records the station of each frame and the discontinuities.
#[derive(Default)]
struct Rec {
    frames: Vec<(u16, Vec<u8>, bool)>,
    breaks: Vec<u16>,
}

impl FrameSink for Rec {
    fn frame(&mut self, station: vdif::StationId, frame: &[u8], filled: bool) {
        self.frames.push((station.0, frame.to_vec(), filled));
    }
    fn discontinuity(&mut self, station: vdif::StationId) {
        self.breaks.push(station.0);
    }
}

#[test]
fn an_idle_station_gives_its_slot_up() {
    let mut rx = Receiver::new(ReceiverConfig {
        max_stations: 1,
        ..ReceiverConfig::default()
    });
    let mut sink = Rec::default();
    let t0 = Instant::now();
    // 50 frames over 150 ms: a station that has been receiving for longer than `source_quiet`
    // (100 ms) holds its slot until `station_timeout`; a shorter one that went quiet would give
    // it to a live newcomer sooner (see the tentative-station tests).
    let run = |rx: &mut Receiver, sink: &mut Rec, t: Instant, stream: u16, station: u16| {
        for k in 0..50u32 {
            let d = native_on(stream, 1, u64::from(k), 8000, 1, &frame_of(station, k));
            rx.handle_datagram(t + Duration::from_millis(3 * u64::from(k)), FROM, &d, false, sink);
        }
    };
    run(&mut rx, &mut sink, t0, 0, 0x4566);
    // A second station while the first is recent: refused.
    run(&mut rx, &mut sink, t0 + Duration::from_secs(1), 1, 0x5762);
    assert_eq!(rx.counters().too_many_stations, 50);
    // After the station timeout of silence, the slot goes to the new station.
    run(&mut rx, &mut sink, t0 + Duration::from_secs(12), 1, 0x5762);
    rx.finish(&mut sink);
    let s = rx.summaries();
    assert_eq!(s.len(), 2);
    assert!(s[0].retired && s[0].station_id.0 == 0x4566 && s[0].window.written_valid == 50);
    assert!(!s[1].retired && s[1].station_id.0 == 0x5762 && s[1].window.written_valid == 50);
    assert_eq!(sink.breaks, vec![0x4566], "the retired station's file ends");
    assert_accounted(&rx);
}

#[test]
fn forged_duplicates_never_replace_the_kept_frame() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let (mut forgeries, mut copies) = (0u64, 0u64);
    for k in 0..300u32 {
        let t = t0 + Duration::from_micros(125 * u64::from(k));
        rx.handle_datagram(t, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
        if k % 10 == 1 {
            // Same sequence number and header, other data, from the sender's own address (the
            // first while the sender's opening run is still held).
            let d = native(u64::from(k), 8000, 1, &forged(k, k as u8));
            rx.handle_datagram(t, FROM, &d, false, &mut sink);
            forgeries += 1;
        }
        if k % 7 == 5 {
            rx.handle_datagram(t, FROM, &native(u64::from(k), 8000, 1, &frame(k)), false, &mut sink);
            copies += 1;
        }
    }
    rx.finish(&mut sink);
    assert!(written(&sink) == real(0..300), "the first copies were written");
    let w = rx.summaries()[0].window;
    assert_eq!((w.duplicate_mismatch, w.duplicates), (forgeries, copies));
    assert_accounted(&rx);
}

#[test]
fn from_admits_a_host_on_any_port_or_one_address() {
    assert_eq!(
        "127.0.0.1".parse::<SourceFilter>(),
        Ok(SourceFilter::Host(std::net::IpAddr::from([127, 0, 0, 1])))
    );
    assert_eq!("127.0.0.1:9".parse::<SourceFilter>(), Ok(SourceFilter::Addr(FROM)));
    assert!(matches!("[::1]".parse::<SourceFilter>(), Ok(SourceFilter::Host(_))));
    assert!(matches!("::1".parse::<SourceFilter>(), Ok(SourceFilter::Host(_))));
    assert!(matches!("[::1]:9".parse::<SourceFilter>(), Ok(SourceFilter::Addr(_))));
    assert!("corr:9".parse::<SourceFilter>().is_err());
    let host: SourceFilter = "127.0.0.1".parse().unwrap();
    assert!(host.admits(addr("127.0.0.1:40000")));
    assert!(
        host.admits(addr("[::ffff:127.0.0.1]:5")),
        "a dual-stack socket's view of IPv4"
    );
    assert!(!host.admits(addr("127.0.0.2:9")));

    let mut rx = Receiver::new(ReceiverConfig {
        from: Some(host),
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for k in 0..50u32 {
        let d = native(u64::from(k), 8000, 1, &frame(k));
        rx.handle_datagram(t0, addr("127.0.0.1:40000"), &d, false, &mut sink);
        rx.handle_datagram(t0, addr("127.0.0.2:40000"), &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    assert!(written(&sink) == real(0..50));
    assert_eq!(rx.counters().foreign_source, 50);
    assert_accounted(&rx);
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic(ds in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..40),
                                        fps in any::<u32>(), threads in any::<u16>()) {
        let t0 = Instant::now();
        for format in [SeqFormat::Native, SeqFormat::Jive5ab, SeqFormat::None] {
            let mut rx = Receiver::new(ReceiverConfig { format, frames_per_second: vdif::FrameRate::new(fps.max(1)).ok(), threads: Some(threads.max(1)), arq: true, ..ReceiverConfig::default() });
            let mut sink = VecSink::default();
            for (i, d) in ds.iter().enumerate() {
                rx.handle_datagram(t0 + Duration::from_millis(i as u64), FROM, d, false, &mut sink);
                let _ = rx.poll_naks(t0 + Duration::from_millis(i as u64));
            }
            // Headers with a frame: a valid prefix followed by junk is still dropped.
            let mut d = native(1, fps, threads, &frame(1));
            d.truncate(24 + 40);
            rx.handle_datagram(t0, FROM, &d, false, &mut sink);
            rx.finish(&mut sink);
            prop_assert_eq!(sink.segments.iter().map(Vec::len).sum::<usize>(), 0);
            assert_accounted(&rx);
        }
    }
}

/// Small frames for the mixed-traffic property: 1000 frames/s, 1056 bytes.
fn small_frame(k: u32, data: Option<u8>) -> Vec<u8> {
    let l = FrameLayout::new(8.192e6, 2, 1, 1, 1024).unwrap();
    let mut h = l.header(0x4566);
    h.seconds = 5000 + k / 1000;
    h.frame_number = k % 1000;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    for (i, b) in f[32..].iter_mut().enumerate() {
        *b = match data {
            None => (k as usize).wrapping_mul(131).wrapping_add(i * 7) as u8,
            Some(salt) => (i as u8).wrapping_mul(29) ^ salt ^ 0xa5,
        };
    }
    f
}

/// One step of the mixed traffic.
#[derive(Debug, Clone)]
enum Op {
    /// The next real frame, from the current sender.
    Next,
    /// An exact copy of a frame sent `back` frames ago, from the current sender.
    Dup(u8),
    /// That frame's header and sequence number with other data, from the current sender.
    Forge(u8, u8),
    /// A stray from fake source `src`: random bytes, a forged frame of a random stream, or a
    /// replay of a real frame.
    Stray(u8, u8, u64),
    /// A consistent run of forged frames ahead of the stream, from a fake source, while the
    /// sender owns the stream and is live.
    ForgedRun(u8, u8),
    /// The sender (owning the stream) restarts: silent for 200 ms, then a new port and session
    /// continue the time.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Next),
        1 => any::<u8>().prop_map(|b| Op::Dup(b % 32)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(b, s)| Op::Forge(b % 32, s)),
        2 => (any::<u8>(), any::<u8>(), any::<u64>()).prop_map(|(s, k, x)| Op::Stray(s % 4, k % 3, x)),
        1 => (1u8..30, any::<u8>()).prop_map(|(n, s)| Op::ForgedRun(n, s)),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Real frames mixed with forged copies, exact copies, strays from several fake sources,
    /// forged runs beside the live sender and sender restarts: no panic, every datagram counted
    /// exactly once at every step, and what is written is exactly the real frames in order —
    /// an accepted frame never changes and no forged byte is ever written.
    #[test]
    fn mixed_hostile_traffic_never_changes_accepted_frames(ops in proptest::collection::vec(op(), 0..400)) {
        let cfg = ReceiverConfig { latency: Duration::from_millis(200), ..ReceiverConfig::default() };
        let mut rx = Receiver::new(cfg);
        let mut sink = VecSink::default();
        let t0 = Instant::now();
        let mut t = t0;
        // 100 µs a step: 400 steps stay within the 100 ms a live sender must be quiet for.
        let step = Duration::from_micros(100);
        let mut sender = (FROM, 1u16, 0u64); // address, session, sequence offset
        let mut sent = 0u32; // real frames sent
        let mut restarts = 0u16;
        let mut sent_by: Vec<(SocketAddr, u16)> = Vec::new();
        // Senders seen owning the stream: each after the first is a change the receiver counts.
        let mut owners: Vec<(SocketAddr, u16)> = Vec::new();
        let owner_now = |rx: &Receiver| {
            rx.summaries().iter().find(|s| s.stream == Some(0)).and_then(|s| Some((s.source.parse::<SocketAddr>().ok()?, s.session?)))
        };
        let fake = |i: u8| SocketAddr::from(([127, 0, 0, 2], 20_000 + u16::from(i)));
        for o in &ops {
            t += step;
            let mut out: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
            let (src, session, off) = sender;
            // A consistent run from elsewhere while nobody owns the stream would rightly become
            // the station: the hostile runs come only once the real sender owns it.
            let owner = owner_now(&rx);
            if let Some(o) = owner.filter(|o| owners.last() != Some(o)) {
                owners.push(o);
            }
            let owns = owner == Some((src, session));
            let real_dgram = |k: u32, data: Option<u8>| {
                native_on(0, session, off + u64::from(k), 1000, 1, &small_frame(k, data))
            };
            match *o {
                Op::Next => {
                    out.push((src, real_dgram(sent, None)));
                    sent_by.push((src, session));
                    sent += 1;
                }
                Op::Dup(back) if u32::from(back) < sent => {
                    out.push((src, real_dgram(sent - 1 - u32::from(back), None)));
                }
                Op::Forge(back, salt) if u32::from(back) < sent => {
                    out.push((src, real_dgram(sent - 1 - u32::from(back), Some(salt))));
                }
                Op::Stray(s, kind, x) => {
                    let d = match kind {
                        0 => (0..(x % 200) as usize).map(|i| (x >> (i % 56)) as u8).collect(),
                        1 => native_on((x % 9) as u16, (x >> 8) as u16, x, 1000, 1, &small_frame((x % 5000) as u32, Some(x as u8))),
                        // Replays only once the real station exists (a replayed run of real
                        // frames before it would be a legitimate sender).
                        _ if owns => real_dgram((x % u64::from(sent.max(1))) as u32, None),
                        _ => Vec::new(),
                    };
                    out.push((fake(s), d));
                }
                Op::ForgedRun(n, salt) if owns => {
                    for i in 0..u32::from(n) {
                        let k = sent + i;
                        let d = native_on(0, 77, 9_000 + u64::from(k), 1000, 1, &small_frame(k, Some(salt)));
                        out.push((fake(9), d));
                    }
                }
                Op::Restart if owns => {
                    restarts += 1;
                    t += Duration::from_millis(200);
                    sender = (SocketAddr::from(([127, 0, 0, 1], 30_000 + restarts)), 100 + restarts, 1_000_000 * u64::from(restarts));
                }
                _ => {}
            }
            for (from, d) in out {
                rx.handle_datagram(t, from, &d, false, &mut sink);
                assert_accounted(&rx);
            }
        }
        if let Some(o) = owner_now(&rx).filter(|o| owners.last() != Some(o)) {
            owners.push(o);
        }
        rx.finish(&mut sink);
        assert_accounted(&rx);
        prop_assert_eq!(rx.in_flight(), 0);
        // A sender's frames are all written or none: what it sent before it was accepted was
        // held, not lost; one never accepted (a restart that sent too little) wrote nothing.
        let station = rx.summaries().iter().any(|s| s.stream == Some(0));
        let expect: Vec<u8> = (0..sent)
            .filter(|&k| owners.contains(&sent_by[k as usize]))
            .flat_map(|k| small_frame(k, None))
            .collect();
        prop_assert!(written(&sink) == expect, "written {} bytes, expected {}", written(&sink).len(), expect.len());
        prop_assert_eq!(sink.filled, 0);
        if station {
            let s = &rx.summaries()[0];
            prop_assert_eq!(s.sender_changes, owners.len() as u64 - 1);
            prop_assert!(owners.len() <= usize::from(restarts) + 1);
            let forged = ops.iter().filter(|o| matches!(o, Op::Forge(..))).count() as u64;
            prop_assert!(s.window.duplicate_mismatch <= forged);
        }
    }
}

/// `f` in jive5ab framing with sequence number `seq`.
fn jive5ab(seq: u64, f: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    let p = NativePrefix {
        retransmit: false,
        stream: 0,
        seq,
        frames_per_second: 0,
        threads: 0,
        session: 0,
    };
    encode_data(SeqFormat::Jive5ab, &p, f, &mut d);
    d
}

#[test]
fn loss_at_the_end_of_a_stream_is_in_f_with_exact_counts() {
    // 1000 frames sent; lost inside the stream: 3, 250, and near the end 990 and 994 (still in
    // the reorder window when the stream ends); lost after the last frame received: 997, 998,
    // 999 (the socket's drop counter says 3 after the last datagram). 995 arrives after 996.
    let mut rx = Receiver::new(ReceiverConfig {
        format: SeqFormat::Jive5ab,
        frames_per_second: vdif::FrameRate::new(8000).ok(),
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let inside = [3u32, 250, 990, 994];
    let tail = [997u32, 998, 999];
    let mut order: Vec<u32> = (0..1000).filter(|k| !inside.contains(k) && !tail.contains(k)).collect();
    let at = order.iter().position(|&k| k == 995).unwrap();
    order.swap(at, at + 1);
    for k in order {
        rx.handle_datagram(t0, FROM, &jive5ab(u64::from(k) + 7, &frame(k)), false, &mut sink);
    }
    rx.finish(&mut sink);
    assert!(
        rx.lost_at_end(tail.len() as u64),
        "one station, the last datagram its own"
    );
    let s = &rx.summaries()[0];
    assert_eq!(s.window.written_valid, 1000 - 7);
    assert_eq!(
        s.window.written_filled,
        inside.len() as u64,
        "gaps inside, near the end too"
    );
    assert_eq!(sink.filled, inside.len() as u64);
    assert_eq!(s.lost_at_end, tail.len() as u64);
    assert_eq!((s.seq_first, s.seq_last), (Some(7), Some(996 + 7)));
    assert_eq!(s.loss_fraction, 7.0 / 1000.0, "f: every frame lost of the 1000 sent");
    assert!((s.snr_factor - (1.0f64 - 7.0 / 1000.0).sqrt()).abs() < 1e-12);
    assert_accounted(&rx);
}

#[test]
fn loss_at_the_end_is_not_guessed_between_stations() {
    let mut rx = Receiver::new(ReceiverConfig::default());
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for k in 0..100u32 {
        for st in [0u16, 1] {
            let f = frame_of(0x4566 + st, k);
            rx.handle_datagram(t0, FROM, &native_on(st, 1, u64::from(k), 8000, 1, &f), false, &mut sink);
        }
    }
    rx.finish(&mut sink);
    assert!(!rx.lost_at_end(5), "two stations: whose were they?");
    assert!(rx.lost_at_end(0));
    for s in rx.summaries() {
        assert_eq!((s.lost_at_end, s.loss_fraction), (0, 0.0));
    }
}

/// What `evlbi serve` knows of a stream: jive5ab framing and the mode's rate over the whole
/// station (`fps` frames a second), not its threads.
fn station_rate_known(fps: u32) -> ReceiverConfig {
    ReceiverConfig {
        format: SeqFormat::Jive5ab,
        station_frames_per_second: vdif::FrameRate::new(fps).ok(),
        ..ReceiverConfig::default()
    }
}

/// Frame `k` of thread `t` of a station sending `threads` threads at 8000 frames/s over all
/// of them (a VSI-S mode's rate), the threads interleaved frame period by frame period.
fn interleaved(threads: u16, i: u32) -> Vec<u8> {
    let per = 8000 / u32::from(threads);
    let (k, t) = (i / u32::from(threads), (i % u32::from(threads)) as u16 * 3 + 1);
    let mut f = station_frame(k, per, t);
    f[32] = i as u8;
    f
}

/// Station 0x4566's frame of time step `k` of thread `thread`, `per` steps a second.
fn station_frame(k: u32, per: u32, thread: u16) -> Vec<u8> {
    let mut f = frame_of(0x4566, 0);
    let mut h = vdif::VdifHeader::parse(&f).unwrap();
    h.seconds = 1000 + k / per;
    h.frame_number = k % per;
    h.thread_id = thread;
    h.emit(&mut f[..32]).unwrap();
    f
}

/// Issue 27: the Field System gives the station's rate (`mode = VDIF_8000-512-8-2`), never the
/// threads; a DBBC3 sends one per board. The receiver counts them from the stream's first
/// frames (until a thread comes round) and splits the rate over them: every frame of every
/// thread is placed, none filled. (With one thread assumed, half the frames were "beyond the 1
/// thread expected" and the other half written with a fill frame between each two.)
#[test]
fn the_threads_of_a_stream_are_counted_from_its_frames_when_only_the_stations_rate_is_known() {
    for threads in [1u16, 2, 4, 16] {
        let mut rx = Receiver::new(station_rate_known(8000));
        let mut sink = VecSink::default();
        let t0 = Instant::now();
        let n = 8000u32;
        for i in 0..n {
            let t = t0 + Duration::from_micros(125 * u64::from(i + 1));
            let d = [u64::from(i).to_le_bytes().to_vec(), interleaved(threads, i)].concat();
            rx.handle_datagram(t, FROM, &d, false, &mut sink);
        }
        rx.finish(&mut sink);
        let c = rx.counters();
        assert_eq!(c.rejected(), 0, "{threads} threads: {c:?}");
        let s = &rx.summaries()[0];
        assert_eq!(
            (s.window.written_valid, s.window.written_filled),
            (u64::from(n), 0),
            "{threads} threads"
        );
        assert_eq!(s.threads, threads, "{threads} threads counted");
        assert_eq!(s.frames_per_second.get(), 8000 / u32::from(threads));
        assert_accounted(&rx);
    }
    // A rate that does not split over the threads seen is refused with the reason.
    let mut rx = Receiver::new(station_rate_known(8001));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // 125 ms of it: the threads are counted over the first 100 ms (a late board's first frames).
    for i in 0..1000u32 {
        let d = [u64::from(i).to_le_bytes().to_vec(), interleaved(2, i)].concat();
        rx.handle_datagram(
            t0 + Duration::from_micros(125 * u64::from(i)),
            FROM,
            &d,
            false,
            &mut sink,
        );
    }
    assert!(rx.summaries().is_empty());
    assert!(
        rx.first_problem()
            .is_some_and(|p| p.contains("no whole number over its 2 threads")),
        "{:?}",
        rx.first_problem()
    );
}

/// Two boards of one station through one relay (one source, one udps sequence): board 1's
/// threads 2 and 3 come 1.5 ms after board 0's threads 0 and 1 of the same time. Counting the
/// threads until the first repeat learned 2 (board 0's came round before board 1's first frame)
/// and refused half the station as "beyond the 2 threads expected"; they are counted over
/// `LEARN_SKEW` of arrivals now.
#[test]
fn the_threads_of_a_board_behind_the_other_are_counted() {
    let mut rx = Receiver::new(station_rate_known(8000));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // 2000 steps a second (500 µs), 4 threads, 2 s.
    let mut arrivals: Vec<(Duration, Vec<u8>)> = Vec::new();
    for k in 0..4000u32 {
        for t in 0..4u16 {
            let f = station_frame(k, 2000, t);
            let behind = if t >= 2 { 1500 } else { 0 };
            arrivals.push((Duration::from_micros(500 * u64::from(k) + behind + u64::from(t)), f));
        }
    }
    arrivals.sort_by_key(|(at, _)| *at);
    for (seq, (at, f)) in arrivals.iter().enumerate() {
        rx.handle_datagram(t0 + *at, FROM, &jive5ab(seq as u64, f), false, &mut sink);
    }
    rx.finish(&mut sink);
    let s = &rx.summaries()[0];
    assert_eq!(s.threads, 4, "threads counted: {:?}", rx.first_problem());
    assert_eq!(s.frames_per_second.get(), 2000);
    assert_eq!((s.window.written_valid, s.window.written_filled), (16_000, 0));
    assert_eq!(rx.counters().rejected(), 0, "{:?}", rx.counters());
    assert_accounted(&rx);
}

#[test]
fn a_stream_without_a_frame_rate_is_refused_and_said_once_at_its_first_frame() {
    // Bare VDIF, EDV 0 headers (no sample rate) and no --fps: nothing can be placed. Issue 29:
    // the operator heard of it only when the receiver stopped.
    let t0 = Instant::now();
    let mut rx = Receiver::new(ReceiverConfig {
        format: SeqFormat::None,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    assert_eq!(rx.poll_notice(), None);
    rx.handle_datagram(t0, FROM, &frame(0), false, &mut sink);
    let said = rx.poll_notice().expect("said at the first frame");
    assert!(said.contains("station Ef: frame rate unknown"), "{said}");
    assert!(said.contains("pass --fps"), "{said}");
    for k in 1..100 {
        let at = t0 + Duration::from_micros(125 * u64::from(k));
        rx.handle_datagram(at, FROM, &frame(k), false, &mut sink);
        assert_eq!(rx.poll_notice(), None, "once, not at frame {k}");
    }
    rx.finish(&mut sink);
    assert_eq!(rx.counters().no_frame_rate, 100);
    assert!(written(&sink).is_empty(), "nothing written");
    assert_accounted(&rx);
}

/// The arrivals of a two-board station: board 0 sends threads 0 and 1 from `a`, board 1 threads
/// 2 and 3 from `b`, each with its own jive5ab sequence numbers (from `seq0`), `steps` time steps
/// of 500 µs (2000 a second per thread, 8000 over the station), board 1 `behind_us` behind.
fn two_boards(a: SocketAddr, b: SocketAddr, steps: u32, behind_us: u64) -> Vec<(Duration, SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    let mut seq = [100u64, 900_000];
    for k in 0..steps {
        for t in 0..4u16 {
            let board = usize::from(t / 2);
            let at = Duration::from_micros(500 * u64::from(k) + u64::from(t) + if board == 1 { behind_us } else { 0 });
            let f = station_frame(k, 2000, t);
            out.push((at, [a, b][board], jive5ab(seq[board], &f)));
            seq[board] += 1;
        }
    }
    out.sort_by_key(|(at, _, _)| *at);
    out
}

/// Drop-in blocker (session 4): a DBBC3's boards send one station from their own addresses to
/// one recorder port, each board its threads and its own sequence numbers. The receiver took one
/// source per station and refused the second board "beside" the first: 8000 of 16 000 frames
/// recorded, and a third of the station reported lost. Each board now joins the station: every
/// frame of both is placed, in one window, none filled; each board's own numbers are listed.
#[test]
fn the_boards_of_a_station_sending_from_their_own_addresses_all_feed_its_window() {
    let (a, b) = (addr("10.0.0.1:5001"), addr("10.0.0.2:5002"));
    for (learned, behind_us) in [(true, 0), (true, 300), (false, 0), (false, 40_000)] {
        let cfg = if learned {
            // What `evlbi serve` knows: the mode's rate for the whole station, no threads.
            station_rate_known(8000)
        } else {
            ReceiverConfig {
                format: SeqFormat::Jive5ab,
                frames_per_second: vdif::FrameRate::new(2000).ok(),
                threads: Some(4),
                ..ReceiverConfig::default()
            }
        };
        let mut rx = Receiver::new(cfg);
        let mut sink = VecSink::default();
        let t0 = Instant::now();
        for (at, from, d) in two_boards(a, b, 4000, behind_us) {
            rx.handle_datagram(t0 + at, from, &d, false, &mut sink);
        }
        rx.finish(&mut sink);
        let case = format!("learned {learned}, board 1 {behind_us} µs behind");
        assert_eq!(
            rx.counters().rejected(),
            0,
            "{case}: {:?} {:?}",
            rx.counters(),
            rx.first_problem()
        );
        let all = rx.summaries();
        assert_eq!(all.len(), 1, "{case}: one station");
        let s = &all[0];
        assert_eq!((s.threads, s.frames_per_second.get()), (4, 2000), "{case}");
        assert_eq!((s.window.written_valid, s.window.written_filled), (16_000, 0), "{case}");
        assert_eq!(s.loss_fraction, 0.0, "{case}");
        assert_eq!(s.sender_changes, 0, "{case}");
        let boards: Vec<_> = s
            .boards
            .iter()
            .map(|b| (b.source.clone(), b.threads.clone(), b.frames))
            .collect();
        assert_eq!(
            boards,
            vec![(a.to_string(), vec![0, 1], 8000), (b.to_string(), vec![2, 3], 8000)],
            "{case}"
        );
        assert_eq!(
            (s.boards[0].seq_first, s.boards[0].seq_last),
            (Some(100), Some(100 + 7999)),
            "{case}"
        );
        assert_eq!(
            (s.boards[1].seq_first, s.boards[1].seq_last),
            (Some(900_000), Some(900_000 + 7999)),
            "{case}"
        );
        // One time order over both boards: step by step, thread by thread.
        let order: Vec<(u32, u16)> = sink
            .segments
            .concat()
            .chunks(8032)
            .map(|f| {
                let h = vdif::VdifHeader::parse(f).unwrap();
                ((h.seconds - 1000) * 2000 + h.frame_number, h.thread_id)
            })
            .collect();
        let want: Vec<(u32, u16)> = (0..4000u32).flat_map(|k| (0..4u16).map(move |t| (k, t))).collect();
        assert!(order == want, "{case}: frames out of time order");
        assert_accounted(&rx);
    }
}

/// A second source sending the threads a live board sends is beside it, whatever other boards
/// the station has: refused, the real frames kept. One sending threads beyond the window's is
/// refused with the reason; a board gone quiet is followed by its restart.
#[test]
fn a_source_beside_a_live_board_or_beyond_the_window_is_refused_and_a_restarted_board_followed() {
    let (a, b, evil) = (addr("10.0.0.1:5001"), addr("10.0.0.2:5002"), addr("10.9.9.9:6666"));
    let mut rx = Receiver::new(ReceiverConfig {
        format: SeqFormat::Jive5ab,
        frames_per_second: vdif::FrameRate::new(2000).ok(),
        threads: Some(4),
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let arrivals = two_boards(a, b, 2000, 0);
    let mut forged_thread_1 = 0u64;
    let mut beyond = 0u64;
    for (i, (at, from, d)) in arrivals.iter().enumerate() {
        rx.handle_datagram(t0 + *at, *from, d, false, &mut sink);
        let k = (i / 4) as u32;
        if k >= 10 && i % 4 == 0 {
            // A consistent run of another station-0x4566 thread 1, one step ahead, from elsewhere.
            let mut f = station_frame(k + 1, 2000, 1);
            f[40] ^= 0xff;
            rx.handle_datagram(t0 + *at, evil, &jive5ab(u64::from(k), &f), false, &mut sink);
            forged_thread_1 += 1;
            // And a run of a fifth thread from a third address (the window has 4).
            let f = station_frame(k, 2000, 7);
            rx.handle_datagram(
                t0 + *at,
                addr("10.9.9.8:7"),
                &jive5ab(u64::from(k), &f),
                false,
                &mut sink,
            );
            beyond += 1;
        }
    }
    let s = &rx.summaries()[0];
    assert_eq!(s.boards.len(), 2, "{:?}", s.boards);
    assert_eq!(s.window.duplicate_mismatch, 0, "no forged frame reached the window");
    let c = rx.counters();
    // Both are sources beside the station's: refused (the newest few still held, in flight).
    assert_eq!(c.foreign_source + rx.in_flight(), forged_thread_1 + beyond, "{c:?}");
    assert_eq!(c.unconfirmed, 0);
    // Board 1 restarts from another port after 200 ms of silence: it takes its own place.
    let b2 = addr("10.0.0.2:5003");
    let mut seq = 0u64;
    let mut last = Duration::ZERO;
    for (at, from, d) in two_boards(a, b, 4000, 0).into_iter().skip(2000 * 4) {
        let quiet = Duration::from_millis(200);
        if from == b {
            if at < Duration::from_millis(1000) + quiet {
                continue;
            }
            let f = &d[8..];
            rx.handle_datagram(t0 + at, b2, &jive5ab(seq, f), false, &mut sink);
            seq += 1;
        } else {
            rx.handle_datagram(t0 + at, from, &d, false, &mut sink);
        }
        last = at;
    }
    assert!(last > Duration::from_millis(1900));
    rx.finish(&mut sink);
    let s = &rx.summaries()[0];
    assert_eq!(s.sender_changes, 1, "{:?}", s.sender_change_log);
    assert_eq!(s.sender_change_log[0].from, b.to_string());
    assert_eq!(s.sender_change_log[0].to, b2.to_string());
    assert!(s.sender_change_log[0].restarted);
    let boards: Vec<_> = s.boards.iter().map(|x| (x.source.clone(), x.threads.clone())).collect();
    assert_eq!(boards, vec![(a.to_string(), vec![0, 1]), (b2.to_string(), vec![2, 3])]);
    // Board 1's 200 ms of silence (400 steps of its 2 threads) are filled; nothing else.
    assert_eq!(s.window.written_filled, 800, "{:?}", s.window);
    assert_eq!(s.window.written_valid, 16_000 - 800);
    assert!(
        rx.first_problem()
            .is_some_and(|p| p.contains("while its sender 10.0.0.1:5001 is live")),
        "{:?}",
        rx.first_problem()
    );
    assert_accounted(&rx);
}

/// A phantom of a few frames with the station's id and another thread, sent as a backend starts,
/// cannot add a thread to the count: the mode's rate would be split over one thread too many and
/// every real frame misplaced.
#[test]
fn a_phantom_board_at_the_start_does_not_change_the_threads_counted() {
    let (a, b) = (addr("10.0.0.1:5001"), addr("10.0.0.2:5002"));
    let mut rx = Receiver::new(station_rate_known(8000));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let phantom = addr("10.6.6.6:6");
    for (i, (at, from, d)) in two_boards(a, b, 1000, 0).into_iter().enumerate() {
        if i < 3 {
            let f = station_frame(i as u32, 2000, 9);
            rx.handle_datagram(t0 + at, phantom, &jive5ab(i as u64, &f), false, &mut sink);
        }
        rx.handle_datagram(t0 + at, from, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let s = &rx.summaries()[0];
    assert_eq!(
        (s.threads, s.frames_per_second.get()),
        (4, 2000),
        "{:?}",
        rx.first_problem()
    );
    assert_eq!((s.window.written_valid, s.window.written_filled), (4000, 0));
    assert_eq!(rx.counters().unconfirmed, 3);
    assert_accounted(&rx);
}

/// A whole backend restarts (every board quiet for 200 ms, then back from new ports), board 1
/// first: it succeeds the station's first board, and board 0 then joins beside it. (Had board 1
/// kept the threads of the board it succeeded, board 0 would have been refused "beside" it.)
#[test]
fn a_restarted_backend_whose_boards_return_in_any_order_is_followed() {
    let (a, b, a2, b2) = (
        addr("10.0.0.1:5001"),
        addr("10.0.0.2:5002"),
        addr("10.0.0.1:6001"),
        addr("10.0.0.2:6002"),
    );
    let mut rx = Receiver::new(station_rate_known(8000));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let mut arrivals: Vec<(Duration, SocketAddr, Vec<u8>)> = Vec::new();
    for (at, from, d) in two_boards(a, b, 4000, 0) {
        let quiet = Duration::from_millis(1000)..Duration::from_millis(1200);
        if quiet.contains(&at) {
            continue;
        }
        if at < quiet.start {
            arrivals.push((at, from, d));
        } else if from == a {
            // After the restart board 0 comes 2 ms after board 1.
            arrivals.push((at + Duration::from_millis(2), a2, d));
        } else {
            arrivals.push((at, b2, d));
        }
    }
    arrivals.sort_by_key(|(at, _, _)| *at);
    for (at, from, d) in arrivals {
        rx.handle_datagram(t0 + at, from, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let s = &rx.summaries()[0];
    let boards: Vec<_> = s.boards.iter().map(|x| (x.source.clone(), x.threads.clone())).collect();
    assert_eq!(
        boards,
        vec![(b2.to_string(), vec![2, 3]), (a2.to_string(), vec![0, 1])],
        "{:?}",
        rx.first_problem()
    );
    assert_eq!(s.sender_changes, 1);
    assert_eq!(rx.counters().foreign_source, 0, "{:?}", rx.first_problem());
    // The 200 ms of silence (400 steps of 4 threads) filled; every frame sent written.
    assert_eq!((s.window.written_valid, s.window.written_filled), (16_000 - 1600, 1600));
    assert_accounted(&rx);
}

/// A backend set up anew with other threads (every board quiet, then a source whose threads do
/// not fit the station's window): the station starts over with the new threads. (Followed into
/// the old window, every frame of it was refused there.)
#[test]
fn a_backend_back_with_other_threads_starts_its_station_anew() {
    let (a, b) = (addr("10.0.0.1:5001"), addr("10.0.0.1:5002"));
    let mut rx = Receiver::new(station_rate_known(8000));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // One thread at 8000 frames/s for 0.5 s; quiet 0.2 s; then threads 5 and 6 at 4000 each.
    for k in 0..4000u32 {
        let at = Duration::from_micros(125 * u64::from(k));
        rx.handle_datagram(
            t0 + at,
            a,
            &jive5ab(u64::from(k), &station_frame(k, 8000, 0)),
            false,
            &mut sink,
        );
    }
    let mut seq = 0u64;
    for k in 2800..4800u32 {
        for t in [5u16, 6] {
            let at = Duration::from_micros(250 * u64::from(k) + u64::from(t));
            rx.handle_datagram(t0 + at, b, &jive5ab(seq, &station_frame(k, 4000, t)), false, &mut sink);
            seq += 1;
        }
    }
    rx.finish(&mut sink);
    let all = rx.summaries();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all[0].retired);
    assert_eq!((all[0].threads, all[0].window.written_valid), (1, 4000));
    assert_eq!((all[1].threads, all[1].frames_per_second.get()), (2, 4000));
    assert_eq!((all[1].window.written_valid, all[1].window.written_filled), (4000, 0));
    assert_eq!(rx.counters().rejected(), 0, "{:?}", rx.first_problem());
    assert_accounted(&rx);
}

/// A receive loop that reads late stamps a whole batch with one time: the first frames of board
/// 0 alone, then 3 ms later a batch that opens with board 1's first frames and goes on with both.
/// Board 0 came round its threads and had waited 2 ms before board 1 had; counted alone, it set
/// the station up for 2 threads at twice their rate (board 1 refused, board 0's frames filled
/// at each second). A board seen but not yet counted is waited for.
#[test]
fn a_board_first_seen_in_a_late_batch_is_counted_with_the_other() {
    let (a, b) = (addr("10.0.0.1:5001"), addr("10.0.0.2:5002"));
    let mut rx = Receiver::new(station_rate_known(8000));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let late = Duration::from_millis(3);
    for (i, (at, from, d)) in two_boards(a, b, 4000, 0).into_iter().enumerate() {
        // Board 0's two frames of step 0 first; the next 40 arrivals read in one late batch.
        let stamp = match i {
            0 | 1 => at,
            2..42 => late,
            _ => at.max(late),
        };
        rx.handle_datagram(t0 + stamp, from, &d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let s = &rx.summaries()[0];
    assert_eq!(
        (s.threads, s.frames_per_second.get()),
        (4, 2000),
        "{:?}",
        rx.first_problem()
    );
    assert_eq!((s.window.written_valid, s.window.written_filled), (16_000, 0));
    assert_eq!(s.boards.len(), 2);
    assert_eq!(rx.counters().rejected(), 0, "{:?}", rx.counters());
    assert_accounted(&rx);
}

/// Issue 36, item 1: the arrivals of a one-thread station (thread 0, 1000 frames a second, from
/// `real`) from `real_from` ms to 3 s, and of a fake board (thread `fake_thread` from `fake`)
/// sending 200 datagrams a second from 0 to 3 s, numbered as a thread of `numbered` frames a
/// second at its arrival time (or, `consecutive`, one number after the other). Each source its
/// own jive5ab sequence numbers.
fn real_and_fake(
    (real, real_from): (SocketAddr, u32),
    (fake, fake_thread, numbered, consecutive): (SocketAddr, u16, u32, bool),
) -> Vec<(Duration, SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    for k in real_from..3000u32 {
        let f = station_frame(k, 1000, 0);
        out.push((Duration::from_millis(u64::from(k)), real, jive5ab(u64::from(k), &f)));
    }
    for i in 0..600u32 {
        let ms = 5 * i;
        let n = if consecutive { i } else { ms * numbered / 1000 };
        let mut f = station_frame(n, numbered, fake_thread);
        f[40] ^= 0xa5;
        out.push((
            Duration::from_micros(u64::from(ms) * 1000 + 300),
            fake,
            jive5ab(7_000_000 + u64::from(i), &f),
        ));
    }
    out.sort_by_key(|(at, _, _)| *at);
    out
}

/// Feed `arrivals` to a receiver told the mode's rate (1000 frames a second) as `evlbi serve` is;
/// the receiver and what it wrote.
fn receive_mode_1000(arrivals: &[(Duration, SocketAddr, Vec<u8>)]) -> (Receiver, VecSink) {
    let mut rx = Receiver::new(station_rate_known(1000));
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for (at, from, d) in arrivals {
        rx.handle_datagram(t0 + *at, *from, d, false, &mut sink);
    }
    rx.finish(&mut sink);
    (rx, sink)
}

/// (thread, time step at 1000 a second from second 1000, invalid) of each frame written.
fn written_frames(sink: &VecSink) -> Vec<(u16, u64, bool)> {
    written(sink)
        .chunks(8032)
        .map(|f| {
            let h = vdif::VdifHeader::parse(f).unwrap();
            let k = u64::from(h.seconds - 1000) * 1000 + u64::from(h.frame_number);
            (h.thread_id, k, h.invalid)
        })
        .collect()
}

/// A fake board sending a fifth of a thread while the backend's one thread streams: counted as a
/// board, it split the station into 2 threads of 500 frames a second (the recording held none
/// of the real thread's frames). Not in step with the real board, it adds no thread: every real
/// frame is written, valid, in order; the fake is refused, counted and named.
#[test]
fn a_fake_board_sending_a_fraction_of_a_thread_does_not_split_the_station() {
    let (real, fake) = (addr("10.0.0.1:5001"), addr("10.66.6.6:6666"));
    for (numbered, consecutive) in [(500u32, false), (1000, false), (200, true)] {
        let arrivals = real_and_fake((real, 0), (fake, 1, numbered, consecutive));
        let (rx, sink) = receive_mode_1000(&arrivals);
        let case = format!("fake numbered at {numbered}, consecutive {consecutive}");
        let all = rx.summaries();
        assert_eq!(all.len(), 1, "{case}: {all:?}");
        let s = &all[0];
        assert_eq!(
            (s.threads, s.frames_per_second.get()),
            (1, 1000),
            "{case}: {:?}",
            rx.first_problem()
        );
        assert_eq!((s.window.written_valid, s.window.written_filled), (3000, 0), "{case}");
        let w = written_frames(&sink);
        assert!(w.iter().all(|(t, _, inv)| *t == 0 && !inv), "{case}");
        assert!(w.windows(2).all(|p| p[1].1 == p[0].1 + 1), "{case}: out of order");
        assert_eq!(s.boards.len(), 1, "{case}");
        assert_eq!(s.refused_sources.len(), 1, "{case}: {:?}", s.refused_sources);
        let r = &s.refused_sources[0];
        assert_eq!(
            (r.source.as_str(), r.threads.as_slice()),
            (fake.to_string().as_str(), &[1u16][..])
        );
        // Refused as not in step when it was judged with the real board, or (it had not formed
        // its run then) as a thread beyond the station's.
        assert!(
            r.reason.contains("not in step") || r.reason.contains("beyond the 1"),
            "{case}: {}",
            r.reason
        );
        // Every datagram of the fake is refused (those held when it was judged included).
        let c = rx.counters();
        assert_eq!(c.foreign_source + c.unconfirmed, 600, "{case}: {c:?}");
        assert!(r.datagrams >= 590, "{case}: {r:?}");
        assert_accounted(&rx);
    }
}

/// The fake board there first (the backend starts 0.5 s after the recording): it is the station
/// then, but sparse, it cannot lower the station's rate, and when the backend comes it gives its
/// place up; the station starts anew from the backend's first frame, every real frame written.
/// Sending thread 0, it held the real board off as a second sender "beside" it; sending thread
/// 1, as a thread beyond the station's; numbered one frame after the other at 200 a second, it
/// lowered the station's rate to 200 (a board of five up, as far as its frames tell) and the
/// backend's frames were numbered past it.
#[test]
fn a_fake_board_there_before_the_backend_gives_its_place_up_when_the_backend_comes() {
    let (real, fake) = (addr("10.0.0.1:5001"), addr("10.66.6.6:6666"));
    for (thread, numbered, consecutive) in [(0u16, 1000u32, false), (1, 500, false), (1, 200, true)] {
        let arrivals = real_and_fake((real, 500), (fake, thread, numbered, consecutive));
        let (rx, sink) = receive_mode_1000(&arrivals);
        let case = format!("fake thread {thread} numbered at {numbered}, consecutive {consecutive}");
        let all = rx.summaries();
        let s = all.last().unwrap();
        assert_eq!((s.threads, s.frames_per_second.get()), (1, 1000), "{case}: {all:?}");
        assert_eq!(s.boards.len(), 1, "{case}");
        assert_eq!(s.boards[0].source, real.to_string(), "{case}");
        // The station starts anew from the backend's first frames (a new segment: in a scan, the
        // frames of the fake's station until then come first): every real frame from 0.5 s on,
        // valid, in order, nothing else.
        let last = VecSink {
            segments: vec![sink.segments.last().cloned().unwrap_or_default()],
            filled: 0,
        };
        let w = written_frames(&last);
        assert_eq!(w.first().map(|f| f.1), Some(500), "{case}: {:?}", rx.first_problem());
        assert_eq!(w.len(), 2500, "{case}: {:?}", rx.first_problem());
        assert!(w.iter().all(|(t, _, inv)| *t == 0 && !inv), "{case}");
        assert!(w.windows(2).all(|p| p[1].1 == p[0].1 + 1), "{case}: out of order");
        assert!(
            s.refused_sources.iter().any(|r| r.source == fake.to_string()),
            "{case}: {:?}",
            s.refused_sources
        );
        assert_accounted(&rx);
    }
}

/// Issue 36, item 1, as `evlbi serve` met it (board_intruders' serve test failed 1 run in 4):
/// the receiver starts at `record = on` while the fake board sends and the backend does not yet
/// (its generator starts at the next whole second). Alone, the fake delivered its run of 4
/// frames and was made the station (one thread at the mode's rate, filled between its frames),
/// recorded until the backend came and it gave its place up. A source whose frames skip the
/// numbers of its own threads is not a board even alone: nothing of it is written, whenever the
/// backend starts.
#[test]
fn a_fake_board_alone_at_the_start_is_never_the_station() {
    let (real, fake) = (addr("10.0.0.1:5001"), addr("10.66.6.6:6666"));
    for (numbered, real_from) in [(500u32, 30u32), (500, 120), (500, 350), (1000, 60), (1000, 500)] {
        let arrivals = real_and_fake((real, real_from), (fake, 1, numbered, false));
        let (rx, sink) = receive_mode_1000(&arrivals);
        let case = format!("fake numbered at {numbered}, backend from {real_from} ms");
        // Every segment: the backend's frames from its first, valid, in order, nothing else.
        let w = written_frames(&sink);
        assert_eq!(
            w.first().map(|f| f.1),
            Some(u64::from(real_from)),
            "{case}: {:?}",
            rx.first_problem()
        );
        assert_eq!(w.len() as u32, 3000 - real_from, "{case}: {:?}", rx.first_problem());
        assert!(w.iter().all(|(t, _, inv)| *t == 0 && !inv), "{case}");
        assert!(w.windows(2).all(|p| p[1].1 == p[0].1 + 1), "{case}: out of order");
        let all = rx.summaries();
        assert_eq!(all.len(), 1, "{case}: {all:?}");
        let s = &all[0];
        assert_eq!((s.threads, s.frames_per_second.get()), (1, 1000), "{case}");
        assert_eq!(s.boards.len(), 1, "{case}");
        assert!(
            s.refused_sources.iter().any(|r| r.source == fake.to_string()),
            "{case}: {:?}",
            s.refused_sources
        );
        assert_accounted(&rx);
    }
}

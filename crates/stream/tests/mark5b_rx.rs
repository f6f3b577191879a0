//! The receiver with a stream of Mark5B frames (jive5ab's udps framing: an 8-byte sequence
//! number, then the frame): frames come out byte for byte in time order, a gap is filled with
//! frames as jive5ab's faker makes them (a valid Mark5B header at the missing frame's time,
//! data the fill pattern), and what is not Mark5B is counted and dropped.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stream::wire::SeqFormat;
use stream::{Receiver, ReceiverConfig, VecSink};
use vdif::{FrameFormat, FrameRate, Mark5bHeader};

const FPS: u32 = 400; // 32 Mb/s
const FRAME: usize = 10_016;

fn from() -> SocketAddr {
    "127.0.0.1:4000".parse().unwrap()
}

/// Frame `k` of a stream starting at second 86 390 of day 373 (it crosses midnight), its data
/// recognisable per frame, user bits 0xabcd.
fn frame(k: u32) -> Vec<u8> {
    let fps = FrameRate::new(FPS).unwrap();
    let start = Mark5bHeader::at(373, 86_390, 0, fps).unwrap();
    let h = Mark5bHeader {
        user: 0xabcd,
        ..start
            .with_frame_index(start.frame_index(fps) + u64::from(k), fps)
            .unwrap()
    };
    let mut f = vec![0u8; FRAME];
    for (i, b) in f.iter_mut().enumerate() {
        *b = (k as usize).wrapping_mul(131).wrapping_add(i * 7) as u8;
    }
    h.emit(&mut f).unwrap();
    f
}

fn udps(seq: u64, f: &[u8]) -> Vec<u8> {
    let mut d = seq.to_le_bytes().to_vec();
    d.extend_from_slice(f);
    d
}

fn receiver() -> Receiver {
    Receiver::new(ReceiverConfig {
        format: SeqFormat::Jive5ab,
        frame_format: FrameFormat::Mark5b,
        frames_per_second: FrameRate::new(FPS).ok(),
        threads: Some(1),
        ..ReceiverConfig::default()
    })
}

#[test]
fn mark5b_frames_pass_whole_and_a_gap_is_filled_as_jive5ab_fills() {
    let mut rx = receiver();
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    // 8 000 frames = 20 s, crossing midnight (day 373 → 374) at frame 4000; frames 5000..5007 lost.
    let lost = 5000..5007u32;
    for k in (0..8000u32).filter(|k| !lost.contains(k)) {
        // After the gap the sender is on time again, its lost frames took no time (their
        // slots are filled, not taken for a forged jump).
        let t = t0 + Duration::from_micros(2500 * u64::from(if k >= 5007 { k - 7 } else { k }));
        rx.handle_datagram(t, from(), &udps(u64::from(k), &frame(k)), false, &mut sink);
    }
    rx.finish(&mut sink);
    assert_eq!(sink.segments.len(), 1, "one continuous segment");
    let out = &sink.segments[0];
    assert_eq!(out.len(), 8000 * FRAME);
    for (k, got) in out.chunks(FRAME).enumerate() {
        let k = k as u32;
        if !lost.contains(&k) {
            assert!(got == frame(k).as_slice(), "frame {k} byte-exact in its place");
            continue;
        }
        let h = Mark5bHeader::parse(got).expect("a fill has a Mark5B header");
        let want = Mark5bHeader::parse(&frame(k)).unwrap();
        assert_eq!(
            h,
            Mark5bHeader { user: 0, ..want },
            "fill {k}: the missing frame's time"
        );
        assert!(h.crc_ok());
        assert!(got[16..].chunks(4).all(|w| w == 0x1122_3344u32.to_le_bytes()));
    }
    let s = &rx.summaries()[0].window;
    assert_eq!((s.written_valid, s.written_filled), (7993, 7));
}

#[test]
fn what_is_not_mark5b_is_counted_and_dropped() {
    let mut rx = receiver();
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    for k in 0..10u32 {
        rx.handle_datagram(t0, from(), &udps(u64::from(k), &frame(k)), false, &mut sink);
    }
    let good = frame(10);
    let mut no_sync = good.clone();
    no_sync[3] = 0;
    rx.handle_datagram(t0, from(), &udps(10, &no_sync), false, &mut sink);
    rx.handle_datagram(t0, from(), &udps(10, &good[..8000]), false, &mut sink);
    let mut long = good.clone();
    long.extend_from_slice(&[0; 8]);
    rx.handle_datagram(t0, from(), &udps(10, &long), false, &mut sink);
    let mut not_bcd = good.clone();
    not_bcd[8] = 0xff;
    rx.handle_datagram(t0, from(), &udps(10, &not_bcd), false, &mut sink);
    rx.handle_datagram(t0, from(), &udps(10, &good), false, &mut sink);
    rx.finish(&mut sink);
    // The short and the long datagram are not frames: in jive5ab's udps a Mark5B stream may
    // come cut into datagrams of any size, so they go to the joiner: the short one's frame is
    // never whole (counted when the long one starts the source over), the long one holds frame
    // 10 whole (joined; the whole datagram of it after is the same frame, not written twice).
    let c = rx.counters();
    assert_eq!(c.bad_header, 2);
    assert_eq!((c.split_frames_joined, c.split_frames_incomplete), (1, 1));
    assert_eq!(sink.segments.concat(), (0..11).flat_map(frame).collect::<Vec<u8>>());
}

#[test]
fn a_mark5b_frame_s_time_resolves_its_day_against_the_clock_for_the_data_age() {
    let rx = receiver();
    const NS: u64 = 1_000_000_000;
    // Frame 0: MJD ≡ 373 (mod 1000), second 86 390; frame 4000 is 10 s on, the next day.
    let day_unix_s = |mjd: u64| (mjd - 40_587) * 86_400;
    let want = (day_unix_s(61_373) + 86_390) * NS;
    for clock_days_later in [0u64, 1, 400] {
        let now = want + clock_days_later * 86_400 * NS;
        assert_eq!(
            rx.data_time_unix_ns(&udps(0, &frame(0)), now),
            Some(want),
            "{clock_days_later}"
        );
        assert_eq!(rx.data_time_unix_ns(&udps(1, &frame(4000)), now), Some(want + 10 * NS));
        assert_eq!(rx.data_time_unix_ns(&udps(2, &frame(1)), now), Some(want + NS / 400));
    }
    // 600 days on, the nearest day ≡ 373 is the next cycle's.
    let later = want + 600 * 86_400 * NS;
    assert_eq!(
        rx.data_time_unix_ns(&udps(0, &frame(0)), later),
        Some(want + 1000 * 86_400 * NS)
    );
    // What is no whole Mark5B frame has no time.
    assert_eq!(rx.data_time_unix_ns(&udps(0, &frame(0)[..5008]), want), None);
    let mut no_sync = frame(0);
    no_sync[0] ^= 1;
    assert_eq!(rx.data_time_unix_ns(&udps(0, &no_sync), want), None);
}

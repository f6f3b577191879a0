//! The receiver state machine against hostile datagrams: every one is counted by reason, none
//! panics, none sizes an allocation.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use stream::wire::{encode_data, NativePrefix, SeqFormat};
use stream::{Receiver, ReceiverConfig, VecSink};
use vdif::FrameLayout;

fn frame(k: u32) -> Vec<u8> {
    let l = FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap();
    let mut h = l.header(0x4566);
    h.seconds = 1000 + k / 8000;
    h.frame_number = k % 8000;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    f
}

fn native(seq: u64, fps: u32, threads: u16, f: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    let p = NativePrefix {
        retransmit: false,
        stream: 0,
        seq,
        frames_per_second: fps,
        threads,
    };
    encode_data(SeqFormat::Native, &p, f, &mut d);
    d
}

const FROM: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9);

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
}

#[test]
fn each_rejection_reason_is_counted() {
    let mut rx = Receiver::new(ReceiverConfig {
        max_stations: 1,
        ..ReceiverConfig::default()
    });
    let mut sink = VecSink::default();
    let t0 = Instant::now();
    let good = native(0, 8000, 1, &frame(0));
    rx.handle_datagram(t0, FROM, &good, false, &mut sink);
    rx.handle_datagram(t0, FROM, &good[..20], false, &mut sink); // too short
    rx.handle_datagram(t0, FROM, &good, true, &mut sink); // truncated by the kernel
    let mut bad = good.clone();
    bad[0] = b'X';
    rx.handle_datagram(t0, FROM, &bad, false, &mut sink); // magic
    let mut bad = good.clone();
    bad[4] = 7;
    rx.handle_datagram(t0, FROM, &bad, false, &mut sink); // version
    rx.handle_datagram(t0, FROM, &good[..good.len() - 8], false, &mut sink); // length mismatch
    let other: SocketAddr = "127.0.0.2:9".parse().unwrap();
    rx.handle_datagram(t0, other, &good, false, &mut sink); // another source
    let mut second = good.clone();
    second[6..8].copy_from_slice(&1u16.to_be_bytes());
    rx.handle_datagram(t0, FROM, &second, false, &mut sink); // a second station, max 1
    let c = rx.counters();
    assert_eq!(
        (
            c.too_short,
            c.oversized,
            c.bad_magic,
            c.bad_version,
            c.length_mismatch,
            c.foreign_source,
            c.too_many_stations
        ),
        (1, 1, 1, 1, 1, 1, 1)
    );
    assert_eq!(c.rejected(), 7);
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic(ds in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..40),
                                        fps in any::<u32>(), threads in any::<u16>()) {
        let t0 = Instant::now();
        for format in [SeqFormat::Native, SeqFormat::Jive5ab, SeqFormat::None] {
            let mut rx = Receiver::new(ReceiverConfig { format, frames_per_second: Some(fps.max(1)), threads: Some(threads.max(1)), arq: true, ..ReceiverConfig::default() });
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
        }
    }
}

//! `evlbi stream recv`'s station admission driven by arbitrary (source, station, sequence, time)
//! sequences: every datagram is a well-formed native frame, so the input steers who sends what
//! and when (phantoms, floods of new sources, second senders, restarts, jumps, replays) rather
//! than the parser. After every datagram: no panic, every datagram counted exactly once (refused
//! by reason, in a window's counters, or held), the admission table and what it holds within
//! their bounds, never more stations than `max_stations`; at the end nothing held, and every
//! frame written is a whole frame of a station that was reported.
//!
//! With configuration bit 0x20 the framing is jive5ab's and each address is a board sending
//! thread `address % 4` of the stations (bit 0x40: the threads counted from the frames, only the
//! station's rate given): boards join stations, replace and succeed one another; at the end every
//! station's boards send disjoint threads, no more boards than threads.
//!
//! Input: 2 bytes of configuration, then 6-byte records — source (8 addresses, 4 sessions each),
//! station (8), time step in µs (2 bytes), frame step (signed), flags (retransmit, other data,
//! expire, NAKs, a jump of 10 s).
#![no_main]
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use stream::wire::{encode_data, NativePrefix, SeqFormat};
use stream::{FrameSink, Receiver, ReceiverConfig};
use vdif::FrameLayout;

/// Frames written, per station id, and filled ones.
#[derive(Default)]
struct Count {
    frames: std::collections::HashMap<u16, u64>,
    filled: u64,
    frame_len: usize,
}

impl FrameSink for Count {
    fn frame(&mut self, station: vdif::StationId, frame: &[u8], filled: bool) {
        assert_eq!(frame.len(), self.frame_len, "a whole frame");
        *self.frames.entry(station.0).or_default() += 1;
        self.filled += u64::from(filled);
    }
    fn discontinuity(&mut self, _: vdif::StationId) {}
}

fn accounted(rx: &Receiver) {
    let c = rx.counters();
    let w = rx.window_totals();
    let in_windows = w.placed + w.duplicates + w.duplicate_mismatch + w.late + w.wrong_format + w.out_of_range;
    assert_eq!(c.datagrams, c.rejected() + in_windows + rx.in_flight(), "{c:?} {w:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some((cfg_bytes, mut rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let max_stations = 1 + usize::from(cfg_bytes[0] % 4);
    let boards = cfg_bytes[0] & 0x20 != 0;
    let learned = cfg_bytes[0] & 0x40 != 0;
    let fps = 1000u32;
    let mut cfg = ReceiverConfig {
        max_stations,
        source_run: 1 + u32::from(cfg_bytes[0] >> 2) % 6,
        arq: cfg_bytes[1] & 1 != 0,
        latency: Duration::from_millis(10 + u64::from(cfg_bytes[1] >> 1)),
        ..ReceiverConfig::default()
    };
    if boards {
        cfg.format = SeqFormat::Jive5ab;
        if learned {
            cfg.station_frames_per_second = vdif::FrameRate::new(4 * fps).ok();
        } else {
            (cfg.frames_per_second, cfg.threads) = (vdif::FrameRate::new(fps).ok(), Some(4));
        }
    }
    let layout = FrameLayout::new(f64::from(fps) * 512.0, 2, 1, 1, 64).unwrap();
    let mut rx = Receiver::new(cfg);
    let mut sink = Count {
        frame_len: layout.frame_len,
        ..Count::default()
    };
    let t0 = Instant::now();
    let mut now = t0;
    // Frame position per station (shared by every source: a forged or replayed copy of the
    // stream, or another stream of the same station).
    let mut pos = [0i64; 8];
    let mut frame = vec![0u8; layout.frame_len];
    let mut d = Vec::new();
    while let Some((r, tail)) = rest.split_first_chunk::<6>() {
        rest = tail;
        let (source, station) = (r[0] & 7, usize::from(r[1] & 7));
        let session = 1 + u16::from(r[0] >> 3 & 3);
        now += Duration::from_micros(u64::from(u16::from_be_bytes([r[2], r[3]])));
        let flags = r[5];
        let jump = if flags & 16 != 0 { 10 * i64::from(fps) } else { 0 };
        pos[station] = (pos[station] + i64::from(r[4] as i8) + jump).clamp(0, 1 << 30);
        let k = pos[station] as u64;
        let mut h = layout.header(0x4000 + station as u16);
        if boards {
            h.thread_id = u16::from(source % 4);
        }
        h.seconds = 1000 + (k / u64::from(fps)) as u32;
        h.frame_number = (k % u64::from(fps)) as u32;
        h.emit(&mut frame[..32]).unwrap();
        let salt = if flags & 2 != 0 { 0x5a } else { 0 };
        for (i, b) in frame[32..].iter_mut().enumerate() {
            *b = (k as u8).wrapping_add(i as u8) ^ salt;
        }
        let prefix = NativePrefix {
            retransmit: flags & 1 != 0,
            stream: station as u16,
            seq: k + 1000 * u64::from(session),
            frames_per_second: fps,
            threads: 1,
            session,
        };
        d.clear();
        let format = if boards { SeqFormat::Jive5ab } else { SeqFormat::Native };
        encode_data(format, &prefix, &frame, &mut d);
        let from = SocketAddr::from(([127, 0, 0, 1 + source], 9000 + u16::from(source)));
        rx.handle_datagram(now, from, &d, false, &mut sink);
        if flags & 4 != 0 {
            rx.expire(now);
        }
        if flags & 8 != 0 {
            let _ = rx.poll_naks(now);
        }
        accounted(&rx);
        assert!(rx.station_count() <= max_stations);
        assert!(rx.pending_streams() <= 256.max(4 * max_stations));
        // Held: at most 256 frames a stream waiting, 64 candidates a station.
        assert!(rx.in_flight() as usize <= 256 * rx.pending_streams() + 64 * rx.station_count());
    }
    rx.finish(&mut sink);
    accounted(&rx);
    assert_eq!(rx.in_flight(), 0);
    let summaries = rx.summaries();
    if summaries.iter().filter(|s| s.retired).count() >= 1024 {
        // Retired stations past the kept ones are no longer reported one by one.
        return;
    }
    for (station, n) in &sink.frames {
        let reported: u64 = summaries
            .iter()
            .filter(|s| s.station_id.0 == *station)
            .map(|s| s.window.written_valid + s.window.written_filled)
            .sum();
        assert_eq!(*n, reported, "station {station:#x}: frames written and reported");
    }
    let filled: u64 = summaries.iter().map(|s| s.window.written_filled).sum();
    assert_eq!(sink.filled, filled);
    // The sources refused as boards are named within their bound (issue 36), each once.
    let refused: Vec<(u16, &str)> = summaries
        .iter()
        .flat_map(|s| s.refused_sources.iter().map(move |r| (s.station_id.0, r.source.as_str())))
        .collect();
    assert!(refused.len() <= 16, "{refused:?}");
    for s in &summaries {
        assert!(!s.boards.is_empty(), "a station has a source");
        assert!(s.boards.len() <= usize::from(s.threads), "{:?}", s.boards);
        let mut threads: Vec<u16> = s.boards.iter().flat_map(|b| b.threads.clone()).collect();
        let n = threads.len();
        threads.sort_unstable();
        threads.dedup();
        assert_eq!(threads.len(), n, "boards of one station send disjoint threads: {:?}", s.boards);
    }
});

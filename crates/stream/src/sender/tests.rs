//! The sender state machine in virtual time.

use super::*;
use crate::wire::{parse_data, SeqRange};
use std::sync::Arc;

/// One frame every millisecond from `start`.
struct Ms {
    start: Instant,
    next: u64,
}

impl Schedule for Ms {
    fn next_deadline(&self) -> Instant {
        self.start + Duration::from_millis(self.next)
    }
    fn release_deadline(&self, n: u64) -> Instant {
        self.start + Duration::from_millis(self.next + n.max(1) - 1)
    }
    fn on_sent_batch(&mut self, now: Instant, count: usize) -> Duration {
        let late = now.saturating_duration_since(self.next_deadline());
        self.next += count as u64;
        late
    }
}

const FRAME_LEN: usize = 32 + 64;

/// `n` frames of 64 data bytes, 1000 frames/s, second 100 onwards.
fn frames(n: u32) -> Vec<u8> {
    let l = vdif::FrameLayout::new(512_000.0, 2, 1, 1, 64).expect("layout");
    assert_eq!(l.frames_per_second.get(), 1000);
    let mut out = vec![0u8; FRAME_LEN * n as usize];
    for (i, f) in out.chunks_mut(FRAME_LEN).enumerate() {
        let mut h = l.header(1);
        h.seconds = 100 + i as u32 / 1000;
        h.frame_number = i as u32 % 1000;
        h.emit(&mut f[..32]).expect("header fits");
    }
    out
}

fn sender(format: SeqFormat, arq: bool, t0: Instant, n: u32, duration: Option<Duration>) -> Sender<Ms> {
    let mut s = Sender::new(SenderConfig {
        format,
        session: 9,
        first_seq: 40,
        burst: 1,
        arq_latency: arq.then_some(Duration::from_millis(100)),
        inject_loss: LossModel::None,
        seed: 1,
        start: t0,
        duration,
    });
    let spec = StationSpec {
        name: "mem".into(),
        station_id: vdif::StationId(1),
        threads: 1,
        frame_len: FRAME_LEN,
        data_len: 64,
        fps: vdif::FrameRate::new(1000).unwrap(),
        rate_bps: vdif::BitRate::new(512_000).unwrap(),
    };
    let src = MemorySource::new(frames(n), FRAME_LEN, 0);
    s.add_station(spec, Box::new(src), Ms { start: t0, next: 0 });
    s
}

/// Every datagram due by `now`.
fn drain(s: &mut Sender<Ms>, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(t) = s.poll_transmit(now).expect("no overflow") {
        out.extend(t.datagrams().map(std::borrow::Cow::into_owned));
    }
    out
}

#[test]
fn frames_leave_on_schedule_numbered_in_each_framing() {
    let t0 = Instant::now();
    for format in [SeqFormat::Native, SeqFormat::Jive5ab, SeqFormat::None] {
        let mut s = sender(format, false, t0, 5, None);
        assert_eq!(s.poll_timeout(), Some(t0));
        let d = drain(&mut s, t0 + Duration::from_micros(2500));
        assert_eq!(d.len(), 3, "frames 0, 1, 2 are due");
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_millis(3)));
        for (i, d) in d.iter().enumerate() {
            assert_eq!(d.len(), format.prefix_len() + FRAME_LEN);
            let p = parse_data(format, d).expect("parses");
            let want = (format != SeqFormat::None).then_some(40 + i as u64);
            assert_eq!(p.seq, want, "{format:?}");
            assert_eq!(p.header.frame_number, i as u32);
            if let Some(n) = p.native {
                assert_eq!((n.session, n.frames_per_second, n.retransmit), (9, 1000, false));
            }
        }
        let rest = drain(&mut s, t0 + Duration::from_secs(1));
        assert_eq!(rest.len(), 2);
        assert!(s.is_done());
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.station_results()[0].frames_sent, 5);
    }
}

#[test]
fn a_batch_departs_when_the_caller_says_it_was_sent() {
    let t0 = Instant::now();
    let mut s = sender(SeqFormat::Native, false, t0, 3, None);
    let ms = Duration::from_millis;
    // Frame 0 released at 0 ms, its send returns 0.4 ms later; frame 1 at 1 ms, returns at 1.1 ms.
    assert!(s.poll_transmit(t0).expect("ok").is_some());
    s.on_transmitted(t0 + Duration::from_micros(400));
    assert!(s.poll_transmit(t0 + ms(1)).expect("ok").is_some());
    s.on_transmitted(t0 + Duration::from_micros(1100));
    // Without on_transmitted, the next poll stamps frame 2 with its own time.
    assert!(s.poll_transmit(t0 + ms(2)).expect("ok").is_some());
    assert!(s.poll_transmit(t0 + ms(5)).expect("ok").is_none());
    let st = &s.station_results()[0];
    let (g, l) = (&st.departure_gap_ns, &st.lateness_ns);
    // Gaps 0.7 ms (0.4 → 1.1) and 3.9 ms (1.1 → 5); lateness 0.4, 0.1 and 3 ms (HDR, 0.1 %).
    assert_eq!(g.count, 2);
    let near = |v: Option<u64>, want_us: u64| v.is_some_and(|v| v.abs_diff(want_us * 1000) <= want_us);
    assert!(near(g.min, 700) && near(g.max, 3900), "{g:?}");
    assert_eq!(l.count, 3);
    assert!(near(l.min, 100) && near(l.max, 3000), "{l:?}");
}

#[test]
fn several_stations_in_jive5ab_framing_share_the_ports_sequence() {
    // Regression (issue 17): each station had its own udps numbers, so a jive5ab on the one
    // destination port saw every number twice and reported a loss of 2^64 − 16000.
    let t0 = Instant::now();
    for (format, shared) in [(SeqFormat::Jive5ab, true), (SeqFormat::Native, false)] {
        let mut s = sender(format, false, t0, 4, None);
        let spec = s.stations[0].spec.clone();
        let src = MemorySource::new(frames(4), FRAME_LEN, 0);
        s.add_station(spec, Box::new(src), Ms { start: t0, next: 0 });
        let seqs: Vec<u64> = drain(&mut s, t0 + Duration::from_secs(1))
            .iter()
            .map(|d| parse_data(format, d).expect("parses").seq.expect("numbered"))
            .collect();
        assert_eq!(seqs.len(), 8);
        if shared {
            assert_eq!(seqs, (40..48).collect::<Vec<u64>>(), "one sequence per port");
        } else {
            let mut sorted = seqs.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![40, 40, 41, 41, 42, 42, 43, 43], "one sequence per stream");
        }
    }
}

#[test]
fn the_duration_ends_the_run() {
    let t0 = Instant::now();
    let mut s = sender(SeqFormat::Native, false, t0, 100, Some(Duration::from_millis(10)));
    assert_eq!(drain(&mut s, t0 + Duration::from_secs(1)).len(), 10);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn naks_are_answered_with_flagged_repeats_and_garbage_is_counted() {
    let t0 = Instant::now();
    // 20 frames earn two repeats of budget (a tenth of the rate).
    let mut s = sender(SeqFormat::Native, true, t0, 20, None);
    let sent = drain(&mut s, t0 + Duration::from_millis(19));
    assert_eq!(sent.len(), 20);
    let mut nak = Vec::new();
    Nak {
        stream: 0,
        ranges: vec![SeqRange { first: 42, count: 1 }],
    }
    .encode(&mut nak);
    s.handle_nak(t0, &nak);
    s.handle_nak(t0, b"not a nak");
    let mut other = Vec::new();
    Nak {
        stream: 3,
        ranges: vec![SeqRange { first: 42, count: 1 }],
    }
    .encode(&mut other);
    s.handle_nak(t0, &other);
    assert_eq!(s.rejected_control(), 2);
    let repeats = drain(&mut s, t0 + Duration::from_millis(19));
    assert_eq!(repeats.len(), 1);
    let p = parse_data(SeqFormat::Native, &repeats[0]).expect("parses");
    assert_eq!(p.seq, Some(42));
    assert!(p.native.is_some_and(|n| n.retransmit));
    assert_eq!(repeats[0][6..], sent[2][6..], "the same datagram, flagged");
    let arq = s.arq_stats().expect("ARQ on");
    assert_eq!((arq.naks, arq.resent), (1, 1));
}

#[test]
fn shared_memory_hands_each_board_only_its_threads_looping_in_time() {
    // 3 time steps of 2 threads: thread ids 0, 1, 0, 1, 0, 1.
    let mut data = frames(6);
    for (i, f) in data.chunks_mut(FRAME_LEN).enumerate() {
        let mut h = vdif::VdifHeader::parse(f).expect("header");
        h.thread_id = (i % 2) as u16;
        h.frame_number = (i / 2) as u32;
        h.emit(&mut f[..32]).expect("fits");
    }
    let data = Arc::new(data);
    let taken = |threads: &[u16], n: usize| {
        let mut src = MemorySource::shared(data.clone(), FRAME_LEN, 1).only_threads(threads);
        (0..n)
            .filter_map(|_| {
                let f = src.next_frame()?;
                let h = vdif::VdifHeader::parse(f.bytes).ok()?;
                Some((h.thread_id, h.frame_number, f.add_seconds))
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        taken(&[1], 4),
        vec![(1, 0, 0), (1, 1, 0), (1, 2, 0), (1, 0, 1)],
        "thread 1 only, the second pass a second later"
    );
    assert_eq!(taken(&[0, 1], 2), vec![(0, 0, 0), (1, 0, 0)]);
    assert!(taken(&[7], 3).is_empty(), "a thread never in the data ends the source");
}

#[test]
fn loop_time_overflow_is_an_error() {
    let mut f = frames(1);
    assert_eq!(advance_time(&mut f, 1 << 30), Err(SenderError::LoopTimeOverflow));
    advance_time(&mut f, 5).expect("fits");
    assert_eq!(vdif::VdifHeader::parse(&f).map(|h| h.seconds).ok(), Some(105));
}

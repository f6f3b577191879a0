//! A station's boards starting late or read in late batches, in virtual time: a backend's three
//! boards (threads 0, 1 and 2-3, 500 frames a second each, 2000 the station), the third
//! starting 50 ms or 1 s behind the others, or its first datagrams arriving in one batch read
//! late (a loaded host's socket loop). A genuine board sends every frame of its threads in step
//! with the others: the relay takes every one of its frames, whether the threads are given or
//! learned from the mode's rate (`evlbi serve`'s net2net), and refuses none.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stream::relay::{Relay, RelayConfig};
use stream::wire::{encode_data, NativePrefix, SeqFormat};
use stream::VecSink;
use vdif::FrameLayout;

/// Frames a second per thread.
const PER: u32 = 500;
/// Time steps sent (2.4 s: two second boundaries).
const STEPS: u32 = 1200;

/// Station Ef's frame of time step `k` of thread `thread`.
fn frame(thread: u16, k: u32) -> Vec<u8> {
    let l = FrameLayout::new(32e6, 2, 4, 1, 8000).unwrap();
    let mut h = l.header(0x4566);
    h.seconds = 1000 + k / PER;
    h.frame_number = k % PER;
    h.thread_id = thread;
    let mut f = vec![0u8; l.frame_len];
    h.emit(&mut f[..32]).unwrap();
    f[40] = k as u8;
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

/// How the third board's frames reach the relay.
#[derive(Debug, Clone, Copy)]
enum Third {
    /// It starts `.0` time steps after the others, each frame read at its time.
    Late(u32),
    /// It sends from the start, but its first `.0` steps are read in one batch after the
    /// others' frames of the step the batch is read at.
    Batch(u32),
}

/// The boards' datagrams (arrival, source, datagram) in the order the socket loop reads them.
fn datagrams(t0: Instant, third: Third) -> Vec<(Instant, SocketAddr, Vec<u8>)> {
    let step = Duration::from_secs(1) / PER;
    let boards: [(u16, &[u16]); 3] = [(1, &[0]), (2, &[1]), (3, &[2, 3])];
    let mut seqs = [0u64; 3];
    let mut out = Vec::new();
    let mut batch = Vec::new();
    for k in 0..STEPS {
        let now = t0 + step * k;
        for (b, (port, threads)) in boards.iter().enumerate() {
            let mut d: Vec<(Instant, SocketAddr, Vec<u8>)> = threads
                .iter()
                .map(|&t| {
                    seqs[b] += 1;
                    (now, addr(*port), udps(seqs[b], &frame(t, k)))
                })
                .collect();
            match (b, third) {
                (2, Third::Late(n)) if k < n => continue,
                (2, Third::Batch(n)) if k < n => batch.append(&mut d),
                (2, Third::Batch(n)) if k == n => {
                    batch.append(&mut d);
                    out.extend(batch.drain(..).map(|(_, from, d)| (now, from, d)));
                }
                _ => out.append(&mut d),
            }
        }
    }
    out
}

/// Relay the boards' datagrams; the station's counts.
fn relay(cfg: RelayConfig, t0: Instant, third: Third) -> (Relay, u64) {
    let mut r = Relay::new(cfg);
    let mut tee = VecSink::default();
    let ds = datagrams(t0, third);
    for (i, (now, from, d)) in ds.iter().enumerate() {
        r.handle_datagram(*now, 0, *from, d, false, &mut tee);
        if i % 16 == 0 {
            while let Some(t) = r.poll_timeout().filter(|t| t <= now) {
                r.handle_timeout(t, &mut tee);
                while r.poll_transmit(t).unwrap().is_some() {
                    r.on_transmitted(t);
                }
            }
        }
    }
    let end = t0 + Duration::from_secs(6);
    for _ in 0..1_000_000 {
        match r.poll_timeout() {
            Some(t) if t <= end => {
                r.handle_timeout(t, &mut tee);
                while r.poll_transmit(t).unwrap().is_some() {
                    r.on_transmitted(t);
                }
            }
            _ => break,
        }
    }
    r.finish();
    (r, ds.len() as u64)
}

fn configs(t0: Instant) -> [(&'static str, RelayConfig); 2] {
    let mut given = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
    (given.frames_per_second, given.threads) = (vdif::FrameRate::new(PER).ok(), Some(4));
    let mut learned = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
    learned.station_frames_per_second = vdif::FrameRate::new(4 * PER).ok();
    [("threads given", given), ("threads learned", learned)]
}

/// What went wrong for a board read as `third` under `cfg` (`what`), if anything.
fn loss(cfg: RelayConfig, t0: Instant, third: Third, what: &str) -> Option<String> {
    let (r, sent) = relay(cfg, t0, third);
    let st = &r.stations()[0];
    let c = r.counters();
    let got = (
        st.refused_sources.len(),
        c.foreign_source,
        st.thread_ids.clone(),
        st.frames_in,
        st.frames_out,
        st.unexpected_thread,
        st.wrong_format,
    );
    let want = (0, 0, vec![0, 1, 2, 3], sent, sent, 0, 0);
    (got != want).then(|| {
        format!(
            "{third:?}, {what}: (refused sources, foreign, threads, in, out, unexpected thread, wrong format) \
             {got:?}, want {want:?}: {:?} {:?}",
            st.refused_sources,
            r.first_problem()
        )
    })
}

#[test]
fn a_board_starting_late_or_read_in_a_late_batch_loses_no_frame_in_the_relay_threads_given() {
    let t0 = Instant::now();
    // 50 ms and 1 s late (25 and 500 steps); a first batch of 10 and 40 ms.
    let failed: Vec<String> = [Third::Late(25), Third::Late(500), Third::Batch(5), Third::Batch(20)]
        .into_iter()
        .filter_map(|third| loss(configs(t0)[0].1.clone(), t0, third, configs(t0)[0].0))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_board_starting_late_or_read_in_a_late_batch_loses_no_frame_in_the_relay_threads_learned() {
    let t0 = Instant::now();
    let failed: Vec<String> = [Third::Late(25), Third::Late(500), Third::Batch(5), Third::Batch(20)]
        .into_iter()
        .filter_map(|third| loss(configs(t0)[1].1.clone(), t0, third, configs(t0)[1].0))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
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

/// A fake's frame at the real thread's time step.
type FakeFrame = dyn Fn(u32) -> Vec<u8>;

/// Issue 36's fake board coming after the station's threads were counted from its rate (1000
/// frames a second, one thread): thread 1 at 200 datagrams a second numbered as a thread of 500,
/// or numbered one frame after the other in step but sent at a fifth of the rate. Held as a
/// possible late board, it is judged not in step and refused: the station keeps its one thread
/// of 1000, every real frame relayed, every forged one counted and named.
#[test]
fn a_fake_board_coming_after_the_threads_were_counted_does_not_grow_the_station() {
    let t0 = Instant::now();
    let numbered_at_500 = |k: u32| frame_at(1, k / 2, 500);
    let consecutive_slow = |k: u32| frame_at(1, 100 + (k - 100) / 5, 1000);
    let fakes: [(&str, &FakeFrame); 2] = [
        ("numbered at 500", &numbered_at_500),
        ("consecutive at a fifth of the rate", &consecutive_slow),
    ];
    for (what, fake_frame) in fakes {
        let mut cfg = RelayConfig::new(SeqFormat::Jive5ab, SeqFormat::Native, t0);
        cfg.station_frames_per_second = vdif::FrameRate::new(1000).ok();
        let mut r = Relay::new(cfg);
        let mut tee = VecSink::default();
        let (mut forged, mut seq) = (0u64, 0u64);
        for k in 0..3000u32 {
            let now = t0 + Duration::from_millis(u64::from(k));
            let real = udps(u64::from(k), &frame_at(0, k, 1000));
            r.handle_datagram(now, 0, addr(1), &real, false, &mut tee);
            if k >= 100 && k % 5 == 0 {
                let now = now + Duration::from_micros(300);
                seq += 1;
                r.handle_datagram(now, 0, addr(9), &udps(seq, &fake_frame(k)), false, &mut tee);
                forged += 1;
            }
            if k % 16 == 0 {
                while let Some(t) = r.poll_timeout().filter(|t| *t <= now) {
                    r.handle_timeout(t, &mut tee);
                    while r.poll_transmit(t).unwrap().is_some() {
                        r.on_transmitted(t);
                    }
                }
            }
        }
        r.finish();
        let st = &r.stations()[0];
        assert_eq!(st.thread_ids, vec![0], "{what}: {:?}", r.first_problem());
        assert_eq!(
            (st.frames_per_second.get(), st.frames_in, st.wrong_format),
            (1000, 3000, 0),
            "{what}"
        );
        assert_eq!(r.counters().foreign_source, forged, "{what}");
        assert_eq!(st.refused_sources.len(), 1, "{what}: {:?}", st.refused_sources);
        assert_eq!(st.refused_sources[0].source, addr(9).to_string(), "{what}");
        let why = &st.refused_sources[0].reason;
        assert!(why.contains("not in step"), "{what}: judged, not refused unseen: {why}");
        let teed = tee.segments.concat().len();
        assert_eq!(teed, 3000 * 8032, "{what}: the tee holds the real frames only");
    }
}

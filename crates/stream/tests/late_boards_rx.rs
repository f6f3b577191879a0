//! A station's boards starting late or read in late batches at a receiver (`evlbi serve`'s
//! recorder, `stream recv`), in virtual time: a backend's three boards (threads 0, 1 and 2-3,
//! 500 frames a second each, 2000 the station), the third starting 50 ms or 1 s behind the
//! others, or its first datagrams arriving in one batch read late, or the whole host stalled
//! right after the third board's first frames (every socket read late, the kernel's receive
//! stamps telling when each datagram came). Every frame of a genuine board is written, none
//! refused, whether the threads are given or counted from the mode's rate.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stream::wire::{encode_data, NativePrefix, SeqFormat};
use stream::{Receiver, ReceiverConfig, VecSink};
use vdif::FrameLayout;

const PER: u32 = 500;
const STEPS: u32 = 1200;

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

/// How the third board's frames reach the receiver.
#[derive(Debug, Clone, Copy)]
enum Third {
    /// It starts `.0` time steps after the others.
    Late(u32),
    /// Its first `.0` steps are read in one batch, after the others' frames of that step.
    Batch(u32),
    /// It starts `.0` steps late; right after its first step is read the receiving loop is held
    /// off its core for `.1` steps, then reads what every board sent meanwhile at once, each
    /// datagram with its kernel receive time.
    LateThenStall(u32, u32),
}

/// The boards' datagrams (read, arrived, source, datagram) in the order they are read.
fn datagrams(t0: Instant, third: Third) -> Vec<(Instant, Instant, SocketAddr, Vec<u8>)> {
    let step = Duration::from_secs(1) / PER;
    let boards: [(u16, &[u16]); 3] = [(1, &[0]), (2, &[1]), (3, &[2, 3])];
    let mut seqs = [0u64; 3];
    let (mut out, mut batch) = (Vec::new(), Vec::new());
    for k in 0..STEPS {
        let now = t0 + step * k;
        let read = match third {
            Third::LateThenStall(late, stall) if k > late && k <= late + stall => t0 + step * (late + stall),
            _ => now,
        };
        for (b, (port, threads)) in boards.iter().enumerate() {
            let mut d: Vec<(Instant, Instant, SocketAddr, Vec<u8>)> = threads
                .iter()
                .map(|&t| {
                    seqs[b] += 1;
                    (read, now, addr(*port), udps(seqs[b], &frame(t, k)))
                })
                .collect();
            match (b, third) {
                (2, Third::Late(n) | Third::LateThenStall(n, _)) if k < n => continue,
                (2, Third::Batch(n)) if k < n => batch.append(&mut d),
                // Read late without receive stamps: arrived when read.
                (2, Third::Batch(n)) if k == n => {
                    batch.append(&mut d);
                    out.extend(batch.drain(..).map(|(_, _, from, d)| (now, now, from, d)));
                }
                _ => out.append(&mut d),
            }
        }
    }
    out
}

/// What went wrong for a third board read as `third` under `cfg`, if anything.
fn loss(cfg: ReceiverConfig, third: Third, what: &str) -> Option<String> {
    let t0 = Instant::now();
    let mut rx = Receiver::new(cfg);
    let mut sink = VecSink::default();
    let ds = datagrams(t0, third);
    for (read, arrived, from, d) in &ds {
        rx.handle_datagram_arrived(*read, *arrived, *from, d, false, &mut sink);
    }
    rx.finish(&mut sink);
    let all = rx.summaries();
    let valid: u64 = all.iter().map(|s| s.window.written_valid).sum();
    let filled: u64 = all.iter().map(|s| s.window.written_filled).sum();
    let refused: Vec<_> = all.iter().flat_map(|s| s.refused_sources.clone()).collect();
    let c = rx.counters();
    let last = all.last().map(|s| (s.threads, s.frames_per_second.get()));
    let got = (valid, filled, refused.len(), c.foreign_source, last);
    // A board starting late never sent its threads' frames before: those are filled in place
    // (up to the window's max_fill), not lost.
    let never_sent = match third {
        Third::Late(_) | Third::LateThenStall(..) => filled,
        Third::Batch(_) => 0,
    };
    let want = (ds.len() as u64, never_sent, 0, 0, Some((4, PER)));
    (got != want).then(|| {
        format!(
            "{third:?}, {what}: (written valid, filled, refused sources, foreign, (threads, fps)) {got:?}, {:?} {:?} \
             want {want:?}: {refused:?} {:?}",
            all.iter().map(|s| s.window).collect::<Vec<_>>(),
            rx.counters(),
            rx.first_problem()
        )
    })
}

fn cases(cfg: impl Fn() -> ReceiverConfig, what: &str) -> Vec<String> {
    // 50 ms and 1 s late (25 and 500 steps); a first batch of 10 and 40 ms; 50 ms late, then
    // the host stalls for 50 ms and 200 ms (a board refused as "delivers 16 frames/s per
    // thread" at load 15 before its held frames were judged by their kernel arrival times).
    [
        Third::Late(25),
        Third::Late(500),
        Third::Batch(5),
        Third::Batch(20),
        Third::LateThenStall(25, 25),
        Third::LateThenStall(25, 100),
    ]
    .into_iter()
    .filter_map(|third| loss(cfg(), third, what))
    .collect()
}

#[test]
fn a_board_starting_late_or_read_in_a_late_batch_loses_no_frame_at_a_receiver_threads_given() {
    let cfg = || ReceiverConfig {
        format: SeqFormat::Jive5ab,
        frames_per_second: vdif::FrameRate::new(PER).ok(),
        threads: Some(4),
        ..ReceiverConfig::default()
    };
    let failed = cases(cfg, "threads given");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_board_starting_late_or_read_in_a_late_batch_loses_no_frame_at_a_receiver_threads_counted() {
    let cfg = || ReceiverConfig {
        format: SeqFormat::Jive5ab,
        station_frames_per_second: vdif::FrameRate::new(4 * PER).ok(),
        ..ReceiverConfig::default()
    };
    let failed = cases(cfg, "threads counted from the mode's rate");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

//! Property tests: no input panics the parsers or the statistics, the accounting invariants hold,
//! and the bounded-memory accounting agrees with a naive `BTreeSet` reference model.

use std::collections::{BTreeMap, BTreeSet};

use probe::recv_stats::{Outcome, ReceiverReport, RecvConfig, RecvStats};
use probe::seqwin::SeqEvent;
use probe::wire::{Repr, HEADER_LEN};
use proptest::prelude::*;

const TEST_ID: u64 = 0xfeed;

fn pkt(seq: u64, send_ns: u64) -> Vec<u8> {
    Repr {
        flags: 0,
        test_id: TEST_ID,
        seq,
        send_ns,
        size: HEADER_LEN,
    }
    .to_vec()
    .expect("valid size")
}

/// The naive model: a set of received numbers and a list of unique arrivals in order.
#[derive(Debug, Default)]
struct Model {
    seen: BTreeSet<u64>,
    arrivals: Vec<u64>,
    duplicates: u64,
    reordered: u64,
    extents: Vec<u64>,
}

impl Model {
    fn feed(&mut self, s: u64) {
        if !self.seen.insert(s) {
            self.duplicates += 1;
            return;
        }
        let next_exp = self.arrivals.iter().max().map_or(0, |h| h + 1);
        self.arrivals.push(s);
        if s < next_exp {
            // RFC 4737 §4.2.1: i − j with j the first arrival carrying a larger number (1-based).
            let i = self.arrivals.len() as u64;
            let j = self.arrivals.iter().position(|&x| x > s).map_or(0, |p| p as u64 + 1);
            self.reordered += 1;
            self.extents.push(i - j);
        }
    }

    /// (lost, runs, intervals) over `0..expected`.
    fn losses(&self, expected: u64) -> (u64, Vec<u64>, Vec<u64>) {
        let missing: Vec<u64> = (0..expected).filter(|s| !self.seen.contains(s)).collect();
        let mut runs = Vec::new();
        let mut intervals = Vec::new();
        for w in missing.windows(2) {
            intervals.push(w[1] - w[0]);
        }
        let mut run = 0;
        for (i, &m) in missing.iter().enumerate() {
            if i > 0 && m == missing[i - 1] + 1 {
                run += 1;
            } else {
                if run > 0 {
                    runs.push(run);
                }
                run = 1;
            }
        }
        if run > 0 {
            runs.push(run);
        }
        (missing.len() as u64, runs, intervals)
    }
}

/// A stream of `n` numbers with drops, local reordering (swaps at distance < 8) and duplicates.
fn stream() -> impl Strategy<Value = (u64, Vec<u64>)> {
    (1u64..400)
        .prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec(any::<bool>(), n as usize),
                prop::collection::vec((any::<prop::sample::Index>(), 1usize..8), 0..40),
                prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..20),
            )
        })
        .prop_map(|(n, drops, swaps, dups)| {
            let mut v: Vec<u64> = (0..n).filter(|&s| !drops[s as usize] || s % 3 == 0).collect();
            if v.is_empty() {
                return (n, v);
            }
            for (i, d) in swaps {
                let a = i.index(v.len());
                let b = (a + d).min(v.len() - 1);
                v.swap(a, b);
            }
            for (from, to) in dups {
                let x = v[from.index(v.len())];
                let at = to.index(v.len() + 1);
                v.insert(at, x);
            }
            (n, v)
        })
}

fn sum(h: &histogram::HistSummary) -> u64 {
    h.buckets.iter().map(|b| b.count * b.lo).sum()
}

fn max_or0(v: &[u64]) -> Option<u64> {
    v.iter().max().copied()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        // The control-message half of this property lives with the messages, in
        // probe-session/tests/control.rs.
        let _ = Repr::parse_bytes(&bytes);
    }

    #[test]
    fn stats_never_panic(
        dgrams in prop::collection::vec(
            (any::<u64>(), prop::collection::vec(any::<u8>(), 0..64), any::<bool>(), any::<u64>(), any::<u64>()),
            0..64),
        sent in prop::option::of(any::<u64>()),
        now in any::<u64>(),
    ) {
        let mut rx = RecvStats::new(RecvConfig { window: 64, max_jump: 1000, ..RecvConfig::new(TEST_ID) });
        for (t, junk, peer, seq, send) in dgrams {
            // Alternate junk with well-formed packets carrying arbitrary numbers.
            rx.on_datagram(t, &junk, peer);
            rx.on_datagram(t, &pkt(seq, send), peer);
        }
        let r = rx.finish(sent, now);
        prop_assert_eq!(r.unique_packets + r.lost_packets, r.expected_packets);
    }

    #[test]
    fn matches_reference_model((n, seqs) in stream(), tail in 0u64..50) {
        let mut rx = RecvStats::new(RecvConfig { window: 512, ..RecvConfig::new(TEST_ID) });
        let mut model = Model::default();
        for (i, &s) in seqs.iter().enumerate() {
            let out = rx.on_datagram(i as u64 * 1000, &pkt(s, i as u64 * 1000), true);
            prop_assert!(matches!(out, Outcome::Data(_)));
            model.feed(s);
        }
        // The sender may have sent more than we saw (tail loss).
        let sent = n + tail;
        let r = rx.finish(Some(sent), seqs.len() as u64 * 1000);
        let expected = sent.max(model.seen.iter().max().map_or(0, |h| h + 1));
        let (lost, runs, intervals) = model.losses(expected);
        prop_assert_eq!(r.expected_packets, expected);
        prop_assert_eq!(r.unique_packets, model.seen.len() as u64);
        prop_assert_eq!(r.lost_packets, lost);
        prop_assert_eq!(r.duplicates, model.duplicates);
        prop_assert_eq!(r.too_late, 0);
        prop_assert_eq!(r.reordering.reordered_packets, model.reordered);
        prop_assert_eq!(r.reordering.extent_packets.count, model.extents.len() as u64);
        prop_assert_eq!(r.reordering.extent_packets.max, max_or0(&model.extents));
        prop_assert_eq!(sum(&r.reordering.extent_packets), model.extents.iter().sum::<u64>());
        prop_assert_eq!(r.loss_runs.count, runs.len() as u64);
        prop_assert_eq!(sum(&r.loss_runs), lost);
        prop_assert_eq!(r.loss_runs.max, max_or0(&runs));
        prop_assert_eq!(r.loss_intervals_packets.count, intervals.len() as u64);
        prop_assert_eq!(sum(&r.loss_intervals_packets), intervals.iter().sum::<u64>());
        // Exact bucket-level agreement of the interval histogram (values < 2048 are exact).
        let mut want: BTreeMap<u64, u64> = BTreeMap::new();
        for &x in &intervals { *want.entry(x).or_default() += 1; }
        let got: BTreeMap<u64, u64> = r.loss_intervals_packets.buckets.iter().map(|b| (b.lo, b.count)).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    // `sent` stays below 2048 so every loss run is below 2048, where the histogram's buckets are
    // exact and `sum` can be compared to the count (a run of 2101 sums as 2100: seen in CI).
    fn small_window_keeps_invariants(seqs in prop::collection::vec(0u64..2000, 0..600), sent in 0u64..2048) {
        let mut rx = RecvStats::new(RecvConfig { window: 64, ..RecvConfig::new(TEST_ID) });
        let mut counted = 0u64;
        for (i, &s) in seqs.iter().enumerate() {
            if let Outcome::Data(ev) = rx.on_datagram(i as u64, &pkt(s, 0), true) {
                counted += 1;
                prop_assert!(ev != SeqEvent::OutOfWindow);
            }
        }
        let r = rx.finish(Some(sent), 0);
        prop_assert_eq!(counted, seqs.len() as u64);
        prop_assert_eq!(r.valid_datagrams, r.unique_packets + r.duplicates + r.too_late + r.out_of_window);
        prop_assert_eq!(r.unique_packets + r.lost_packets, r.expected_packets);
        prop_assert_eq!(sum(&r.loss_runs), r.lost_packets);
        prop_assert_eq!(r.loss_intervals_packets.count, r.lost_packets.saturating_sub(1));
    }

    #[test]
    fn strays_never_change_data_counters(
        (_n, seqs) in stream(),
        strays in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, prop::collection::vec(any::<u8>(), 0..80)), 0..30),
    ) {
        let cfg = RecvConfig { size: Some(HEADER_LEN), ..RecvConfig::new(TEST_ID) };
        let mut clean = RecvStats::new(cfg.clone());
        let mut dirty = RecvStats::new(cfg);
        let mut inject: BTreeMap<usize, Vec<(u8, Vec<u8>)>> = BTreeMap::new();
        for (at, kind, bytes) in strays {
            inject.entry(at.index(seqs.len() + 1)).or_default().push((kind, bytes));
        }
        for i in 0..=seqs.len() {
            let t = i as u64 * 1000;
            for (kind, bytes) in inject.get(&i).into_iter().flatten() {
                let (b, peer) = match kind {
                    0 => (pkt(i as u64, t), false),                       // right packet, wrong address
                    1 => { let mut b = bytes.clone(); b.truncate(HEADER_LEN - 1); (b, true) } // short
                    2 => { let mut b = pkt(0, t); b[0] ^= 0xff; (b, true) }                 // bad magic
                    _ => { let mut b = pkt(i as u64, t); b[15] ^= 1; (b, true) }             // other test id
                };
                prop_assert!(matches!(dirty.on_datagram(t, &b, peer), Outcome::Stray(_)));
            }
            if let Some(&s) = seqs.get(i) {
                clean.on_datagram(t, &pkt(s, t), true);
                dirty.on_datagram(t, &pkt(s, t), true);
            }
        }
        let a: ReceiverReport = clean.finish(None, 0);
        let mut b: ReceiverReport = dirty.finish(None, 0);
        b.strays = Default::default();
        prop_assert_eq!(a, b);
    }
}

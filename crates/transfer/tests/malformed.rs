//! Malformed and forged datagrams are counted by reason and dropped; nothing panics.

mod common;

use std::time::{Duration, Instant};

use common::{CheckSink, GenSource};
use proptest::prelude::*;
use transfer::wire::{self, DataHeader, Fin, Kind, Report, SeqRange, WireError};
use transfer::{
    DataKey, FixedRate, Receiver, ReceiverConfig, ReceiverState, Reject, Sender, SenderConfig, SenderState,
    SessionParams, Source,
};

const SESSION: u64 = 0xE71B;

/// A datagram and a check of the reason it must be rejected for.
type Case = (Vec<u8>, fn(&Reject) -> bool);

fn params() -> SessionParams {
    SessionParams {
        session_id: SESSION,
        file_size: 100_000,
        chunk_size: 1000,
    }
}

fn receiver(now: Instant) -> Receiver<CheckSink> {
    Receiver::new(ReceiverConfig::new(params()), CheckSink::new(1, 100_000), now).unwrap()
}

fn sender(now: Instant) -> Sender<GenSource> {
    Sender::new(
        SenderConfig::new(params()),
        GenSource { seed: 1, size: 100_000 },
        Box::new(FixedRate::new(1e9)),
        now,
    )
    .unwrap()
}

fn data(session: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut d = Vec::new();
    DataHeader {
        session_id: session,
        seq: 0,
        offset,
        timestamp_us: 0,
        retransmit: false,
    }
    .write(&mut d);
    let start = d.len();
    d.resize(start + len, 0);
    common::fill(1, offset, &mut d[start..]);
    d
}

fn report(cum_ack: u64, recv_high: u64, naks: Vec<SeqRange>) -> Report {
    Report {
        session_id: SESSION,
        report_seq: 1,
        cum_ack,
        recv_high,
        window_end: recv_high + 1000,
        seq_high: 1,
        rx_datagrams: 1,
        naks,
        ..Report::default()
    }
}

fn encode(r: &Report) -> Vec<u8> {
    let mut b = Vec::new();
    r.write(&mut b);
    b
}

/// A sender that has sent its first 10 chunks.
fn busy_sender(now: Instant) -> Sender<GenSource> {
    let mut s = sender(now);
    let mut t = now;
    let mut n = 0;
    while n < 10 {
        if s.poll_transmit(t).is_some() {
            n += 1;
        } else {
            t += Duration::from_micros(10);
        }
    }
    s
}

#[test]
fn receiver_rejects_each_reason() {
    let now = Instant::now();
    let mut r = receiver(now);
    let cases: Vec<Case> = vec![
        (b"XXXX".to_vec(), |e| {
            matches!(e, Reject::Malformed(WireError::BadMagic(_)))
        }),
        (data(SESSION, 0, 1000)[..20].to_vec(), |e| {
            matches!(e, Reject::Malformed(WireError::TooShort { .. }))
        }),
        (data(SESSION + 1, 0, 1000), |e| matches!(e, Reject::WrongSession(_))),
        (data(SESSION, 100_000, 1000), |e| {
            matches!(e, Reject::OffsetBeyondEnd(100_000))
        }),
        (data(SESSION, u64::MAX - 5, 1000), |e| {
            matches!(e, Reject::OffsetBeyondEnd(_))
        }),
        (data(SESSION, 500, 1000), |e| matches!(e, Reject::MisalignedOffset(500))),
        (data(SESSION, 0, 999), |e| {
            matches!(e, Reject::BadPayloadLength { len: 999, .. })
        }),
        (encode(&report(0, 0, vec![])), |e| {
            matches!(e, Reject::UnexpectedKind(Kind::Report))
        }),
        (
            {
                let mut b = Vec::new();
                Fin {
                    session_id: SESSION,
                    file_size: 5,
                }
                .write(Kind::Fin, &mut b);
                b
            },
            |e| matches!(e, Reject::FileSizeMismatch(5)),
        ),
    ];
    for (i, (d, check)) in cases.iter().enumerate() {
        let before = r.stats().rejected.total();
        r.handle_datagram(now, d);
        assert_eq!(r.stats().rejected.total(), before + 1, "case {i}");
        assert!(check(r.last_reject().unwrap()), "case {i}: {:?}", r.last_reject());
    }
    // Window: a receiver with a 4-chunk window.
    let mut cfg = ReceiverConfig::new(params());
    cfg.window_chunks = 4;
    let mut small = Receiver::new(cfg, CheckSink::new(1, 100_000), now).unwrap();
    small.handle_datagram(now, &data(SESSION, 4000, 1000));
    assert!(matches!(small.last_reject(), Some(Reject::BeyondWindow(4))));
    // Nothing reached the sinks, and a valid datagram is still accepted.
    assert_eq!(r.sink().writes, 0);
    r.handle_datagram(now, &data(SESSION, 0, 1000));
    assert_eq!(r.sink().writes, 1);
    assert_eq!(r.stats().rejected.total(), cases.len() as u64);
}

#[test]
fn sender_rejects_each_reason() {
    let now = Instant::now();
    let t = now + Duration::from_millis(1);
    let mut s = busy_sender(now);
    let wrong_session = {
        let mut r = report(1, 2, vec![]);
        r.session_id = 1;
        encode(&r)
    };
    let cases: Vec<Case> = vec![
        (vec![], |e| matches!(e, Reject::Malformed(WireError::TooShort { .. }))),
        (
            encode(&report(0, 5, vec![SeqRange { first: 3, count: 1 }]))[..130].to_vec(),
            |e| matches!(e, Reject::Malformed(WireError::BadLength { .. })),
        ),
        (wrong_session, |e| matches!(e, Reject::WrongSession(1))),
        (data(SESSION, 0, 1000), |e| {
            matches!(e, Reject::UnexpectedKind(Kind::Data))
        }),
        // Acknowledges chunks never sent.
        (encode(&report(50, 50, vec![])), |e| matches!(e, Reject::NeverSent(_))),
        // NAKs chunks never sent.
        (
            encode(&report(
                0,
                1_000_000,
                vec![SeqRange {
                    first: 0,
                    count: 999_999,
                }],
            )),
            |e| matches!(e, Reject::NeverSent(_)),
        ),
        // An absurd NAK range (beyond recv_high): caught by the parser.
        (
            encode(&report(
                0,
                5,
                vec![SeqRange {
                    first: 3,
                    count: u32::MAX,
                }],
            )),
            |e| matches!(e, Reject::Malformed(WireError::InvalidNakRange { .. })),
        ),
        // Echoes a timestamp from the future.
        (
            encode(&Report {
                echo_ts_us: u64::MAX,
                ..report(0, 5, vec![])
            }),
            |e| matches!(e, Reject::NeverSent(_)),
        ),
        (
            {
                let mut b = Vec::new();
                Fin {
                    session_id: SESSION,
                    file_size: 1,
                }
                .write(Kind::FinAck, &mut b);
                b
            },
            |e| matches!(e, Reject::FileSizeMismatch(1)),
        ),
    ];
    for (i, (d, check)) in cases.iter().enumerate() {
        let before = s.stats().rejected.total();
        s.handle_datagram(t, d);
        assert_eq!(s.stats().rejected.total(), before + 1, "case {i}");
        assert!(check(s.last_reject().unwrap()), "case {i}: {:?}", s.last_reject());
    }
    assert_eq!(s.stats().reports_received, 0);
    assert_eq!(*s.state(), SenderState::Sending);
    // A valid report is still accepted.
    s.handle_datagram(t, &encode(&report(3, 5, vec![SeqRange { first: 3, count: 1 }])));
    assert_eq!(s.stats().reports_received, 1);
    assert_eq!(s.stats().bytes_delivered, 3000);
}

#[test]
fn failing_source_fails_the_sender() {
    struct Broken;
    impl Source for Broken {
        fn read_at(&mut self, _: u64, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk gone"))
        }
    }
    let now = Instant::now();
    let mut s = Sender::new(SenderConfig::new(params()), Broken, Box::new(FixedRate::new(1e9)), now).unwrap();
    assert!(s.poll_transmit(now).is_none());
    assert!(matches!(s.state(), SenderState::Failed(_)));
    assert_eq!(s.poll_timeout(), None);
}

/// A datagram with a valid header of a random kind and random fields.
fn structured() -> impl Strategy<Value = Vec<u8>> {
    (
        1u8..=4,
        prop_oneof![Just(SESSION), any::<u64>()],
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..1400),
        proptest::collection::vec((0u64..200, 0u32..50), 0..8),
    )
        .prop_map(|(kind, session, flags, body, ranges)| {
            let mut d = Vec::new();
            d.extend_from_slice(&wire::MAGIC);
            d.push(wire::VERSION);
            d.push(kind);
            d.extend_from_slice(&session.to_be_bytes());
            d.extend_from_slice(&(flags & 1).to_be_bytes());
            if kind == 2 && body.len() >= 104 {
                // A report-sized body with a plausible NAK count and ranges.
                d.extend_from_slice(&body[..100]);
                d.extend_from_slice(&(ranges.len() as u16).to_be_bytes());
                d.extend_from_slice(&[0, 0]);
                for (s, l) in ranges {
                    d.extend_from_slice(&s.to_be_bytes());
                    d.extend_from_slice(&l.to_be_bytes());
                }
            } else {
                d.extend_from_slice(&body);
            }
            d
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(datagrams in proptest::collection::vec(
        prop_oneof![proptest::collection::vec(any::<u8>(), 0..2000), structured()], 1..20)) {
        let now = Instant::now();
        let mut r = receiver(now);
        let mut s = busy_sender(now);
        let mut t = now;
        for d in &datagrams {
            t += Duration::from_millis(3);
            r.handle_datagram(t, d);
            s.handle_datagram(t, d);
            let _ = wire::parse(d);
            // The machines keep working afterwards.
            while r.poll_transmit(t).is_some() {}
            for _ in 0..100 {
                if s.poll_transmit(t).is_none() {
                    break;
                }
            }
            s.handle_timeout(t);
        }
        // Every datagram was either accepted or counted.
        let rs = r.stats();
        prop_assert!(rs.rejected.total() + rs.datagrams_received + rs.fin_acks_sent <= datagrams.len() as u64 * 2);
        // (Forged DATA with the right session id, offset and length is accepted: the session
        // id is not authentication. It can never write outside the file.)
        prop_assert_eq!(r.sink().out_of_range, 0);
    }
}

fn keyed_pair(now: Instant, key: [u8; 32]) -> (Sender<GenSource>, Receiver<CheckSink>) {
    let mut sc = SenderConfig::new(params());
    sc.data_key = Some(DataKey(key));
    let mut rc = ReceiverConfig::new(params());
    rc.data_key = Some(DataKey(key));
    let s = Sender::new(
        sc,
        GenSource { seed: 1, size: 100_000 },
        Box::new(FixedRate::new(1e9)),
        now,
    )
    .unwrap();
    let r = Receiver::new(rc, CheckSink::new(1, 100_000), now).unwrap();
    (s, r)
}

/// Run both machines over a perfect link (delivery after 1 ms) until the sender is done.
fn run_to_end(s: &mut Sender<GenSource>, r: &mut Receiver<CheckSink>, mut t: Instant) -> Instant {
    for _ in 0..100_000 {
        if s.is_done() {
            break;
        }
        while let Some(d) = s.poll_transmit(t) {
            r.handle_datagram(t + Duration::from_millis(1), &d);
        }
        while let Some(d) = r.poll_transmit(t) {
            s.handle_datagram(t + Duration::from_millis(1), &d);
        }
        t += Duration::from_micros(500);
        if s.poll_timeout().is_some_and(|x| x <= t) {
            s.handle_timeout(t);
        }
        if r.poll_timeout().is_some_and(|x| x <= t) {
            r.handle_timeout(t);
        }
    }
    t
}

#[test]
fn keyed_sessions_complete_and_forged_datagrams_move_no_state() {
    let now = Instant::now();
    let (mut s, mut r) = keyed_pair(now, [3; 32]);
    // An attacker who knows the session id (it is on the wire) forges DATA far ahead, a FIN
    // and a REPORT acknowledging everything — untagged, and tagged under another key.
    let other = DataKey([4; 32]);
    let mut forged = vec![data(SESSION, 90_000, 1000), {
        let mut d = Vec::new();
        Fin {
            session_id: SESSION,
            file_size: 100_000,
        }
        .write(Kind::Fin, &mut d);
        d
    }];
    let mut tagged = data(SESSION, 50_000, 1000);
    let digest = wire::payload_digest(50_000, &tagged[wire::DATA_HEADER_LEN..]);
    other.seal_data(&mut tagged, 0, &digest);
    forged.push(tagged);
    for d in &forged {
        r.handle_datagram(now, d);
    }
    let ack_all = encode(&report(100, 100, vec![]));
    s.handle_datagram(now, &ack_all);
    assert_eq!(r.stats().rejected.bad_tag, 3);
    assert_eq!(r.stats().datagrams_received, 0);
    assert_eq!(s.stats().rejected.bad_tag, 1);
    assert_eq!(s.bytes_delivered(), 0);
    run_to_end(&mut s, &mut r, now);
    assert!(s.is_done(), "{:?}", s.state());
    assert!(r.is_complete());
    r.sink().assert_exact();
    // Every datagram on the wire carried the tag: an unkeyed parse sees its last 16 bytes as
    // part of the message and refuses the lengths.
    let (mut s2, _) = keyed_pair(now, [3; 32]);
    let d = s2.poll_transmit(now).unwrap();
    assert_eq!(d.len(), wire::DATA_HEADER_LEN + 1000 + wire::TAG_LEN);
    let (body, tag) = d.split_at(d.len() - wire::TAG_LEN);
    let header: &[u8; wire::DATA_HEADER_LEN] = body[..wire::DATA_HEADER_LEN].try_into().unwrap();
    let digest = wire::payload_digest(0, &body[wire::DATA_HEADER_LEN..]);
    assert!(DataKey([3; 32]).check_data(header, &digest, tag));
    assert!(!DataKey([5; 32]).check_data(header, &digest, tag));
    // The tag covers the payload through its digest: the same header with other bytes fails.
    let other_payload = wire::payload_digest(0, &[0u8; 1000]);
    assert!(!DataKey([3; 32]).check_data(header, &other_payload, tag));
    // A DATA datagram's tag is not the generic one over its bytes.
    assert!(DataKey([3; 32]).open(&d).is_none());
}

#[test]
fn a_receiver_that_hears_nothing_gives_up_at_its_idle_deadline() {
    let now = Instant::now();
    let mut rc = ReceiverConfig::new(params());
    rc.idle_timeout = Duration::from_secs(30);
    let mut r = Receiver::new(rc, CheckSink::new(1, 100_000), now).unwrap();
    let deadline = r.poll_timeout().expect("an idle receiver still has a deadline");
    assert_eq!(deadline, now + Duration::from_secs(30));
    r.handle_timeout(now + Duration::from_secs(29));
    assert_eq!(r.state(), ReceiverState::Receiving);
    // A valid datagram moves the deadline.
    r.handle_datagram(now + Duration::from_secs(20), &data(SESSION, 0, 1000));
    while r.poll_transmit(now + Duration::from_secs(21)).is_some() {}
    r.handle_timeout(now + Duration::from_secs(49));
    assert_eq!(r.state(), ReceiverState::Receiving);
    assert_eq!(r.poll_timeout(), Some(now + Duration::from_secs(50)));
    r.handle_timeout(now + Duration::from_secs(50));
    assert_eq!(r.state(), ReceiverState::TimedOut);
    assert!(r.poll_transmit(now + Duration::from_secs(51)).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Genuine datagrams of a keyed session, changed by one bit, cut or extended, are all
    /// refused by their tag and move neither machine (the attacker copied them off the wire).
    #[test]
    fn altered_genuine_datagrams_move_nothing(
        pick in 0usize..40,
        edit in 0u8..3,
        pos in any::<usize>(),
        bit in 0u8..8,
        extra in proptest::collection::vec(any::<u8>(), 1..32),
    ) {
        let now = Instant::now();
        let (mut s, mut r) = keyed_pair(now, [6; 32]);
        // Collect real datagrams both ways from a short exchange.
        let mut seen = Vec::new();
        let mut t = now;
        for _ in 0..10 {
            t += Duration::from_micros(200);
            while let Some(d) = s.poll_transmit(t) {
                r.handle_datagram(t, &d);
                seen.push(d);
            }
            while let Some(d) = r.poll_transmit(t) {
                s.handle_datagram(t, &d);
                seen.push(d);
            }
        }
        prop_assume!(!seen.is_empty());
        let mut d = seen[pick % seen.len()].clone();
        match edit {
            0 => {
                let i = pos % d.len();
                d[i] ^= 1 << bit;
            }
            1 => d.truncate(pos % d.len()),
            _ => d.extend_from_slice(&extra),
        }
        let (r0, s0) = (r.stats(), s.stats());
        r.handle_datagram(t, &d);
        s.handle_datagram(t, &d);
        let (r1, s1) = (r.stats(), s.stats());
        prop_assert_eq!(r1.datagrams_received, r0.datagrams_received);
        prop_assert_eq!(r1.bytes_written, r0.bytes_written);
        prop_assert_eq!(s1.reports_received, s0.reports_received);
        prop_assert_eq!(r1.rejected.total() + s1.rejected.total(), r0.rejected.total() + s0.rejected.total() + 2);
    }
}

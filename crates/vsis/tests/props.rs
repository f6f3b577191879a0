//! Properties of the VSI-S layer: framing is bounded and independent of how the bytes were
//! read, statements and replies round-trip, no input makes the parsers panic, and every reply
//! this crate writes parses back.

use proptest::prelude::*;
use vsis::command::Request;
use vsis::evlbi::{format, EvlbiStats, UnixTime, DEFAULT_FORMAT};
use vsis::framing::{Event, Framer, MAX_LINE};
use vsis::reply::{ReplyRepr, ReturnCode};
use vsis::statement::{split_request, StatementRepr};

fn events(chunks: &[&[u8]]) -> Vec<Event> {
    let mut f = Framer::new();
    let mut out = Vec::new();
    for c in chunks {
        f.push(c);
        assert!(f.pending() <= MAX_LINE);
        out.extend(std::iter::from_fn(|| f.poll()));
    }
    out
}

/// A request line of printable bytes without `;` (so no early answer before its LF).
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0x20u8..0x7f, 0..300).prop_map(|mut v| {
        v.retain(|b| *b != b';');
        v.push(b'\n');
        v
    })
}

proptest! {
    #[test]
    fn framing_does_not_depend_on_read_boundaries(lines in prop::collection::vec(line(), 1..20), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8)) {
        let data: Vec<u8> = lines.concat();
        let whole = events(&[&data]);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(data.len() + 1)).collect();
        at.sort_unstable();
        let mut pieces = Vec::new();
        let mut last = 0;
        for a in at {
            pieces.push(&data[last..a]);
            last = a;
        }
        pieces.push(&data[last..]);
        prop_assert_eq!(events(&pieces), whole);
    }

    #[test]
    fn framing_of_any_bytes_is_bounded(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..6000), 0..6)) {
        let refs: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
        let all: Vec<u8> = chunks.concat();
        let ev = events(&refs);
        // At most one event per LF, per semicolon-ended read and per MAX_LINE bytes.
        let bound = all.iter().filter(|b| **b == b'\n').count() + chunks.len() + all.len() / MAX_LINE + 1;
        prop_assert!(ev.len() <= bound);
        for e in ev {
            if let Event::Request { text, .. } = e {
                prop_assert!(text.len() <= MAX_LINE);
            }
        }
    }

    #[test]
    fn statements_round_trip(keyword in "[a-z0-9_]{1,32}", query in any::<bool>(), fields in prop::collection::vec("[A-Za-z0-9_.+@/%-]{1,20}", 0..10)) {
        let r = StatementRepr { keyword, query, fields };
        let mut out = Vec::new();
        r.emit(&mut out);
        prop_assert_eq!(split_request(&out), vec![Ok(r)]);
    }

    #[test]
    fn replies_round_trip(keyword in "[ -~]{0,40}", query in any::<bool>(), code in 0u8..10, fields in prop::collection::vec("\\PC{0,40}", 0..8)) {
        let code = ReturnCode::from_number(code).unwrap();
        let r = ReplyRepr::for_keyword(&keyword, query, code, &fields);
        let text = r.to_string();
        prop_assert!(!text.contains('\n') && !text.contains('\r'));
        prop_assert_eq!(ReplyRepr::parse(text.as_bytes()), Ok(r.clone()));
        // Two on a line, as several statements are answered.
        let both = format!("{text}{text}\n");
        prop_assert_eq!(ReplyRepr::parse_all(both.as_bytes()), Ok(vec![r.clone(), r]));
    }

    #[test]
    fn any_statement_gets_a_typed_request_or_a_reply_code(line in prop::collection::vec(any::<u8>(), 0..400)) {
        for s in split_request(&line).into_iter().flatten() {
            match Request::parse(&s) {
                Ok(_) => {}
                Err(e) => {
                    prop_assert!(matches!(e.code, ReturnCode::NotApplicable | ReturnCode::Conflict | ReturnCode::NoSuchKeyword | ReturnCode::BadParameter));
                    let reply = ReplyRepr::new(&s, e.code, [e.message]);
                    prop_assert_eq!(ReplyRepr::parse(reply.to_string().as_bytes()).map(|r| r.code), Ok(e.code));
                }
            }
        }
    }

    #[test]
    fn evlbi_formats_any_counts(pkt_in in any::<u64>(), pkt_lost in any::<u64>(), pkt_ooo in any::<u64>(), ooosum in any::<u64>(), fmt in "[ -~]{0,80}", secs in -10_000_000_000i64..10_000_000_000, micros in 0u32..1_000_000) {
        let s = EvlbiStats { pkt_in, pkt_lost, pkt_ooo, ooosum, ..EvlbiStats::default() };
        let now = UnixTime { secs, micros };
        let _ = format(&s, &fmt, now);
        let text = format(&s, DEFAULT_FORMAT, now);
        let fields: Vec<&str> = text.split(" : ").collect();
        prop_assert_eq!(fields[1], pkt_in.to_string());
        prop_assert!(fields[3].starts_with(&pkt_lost.to_string()));
    }

    #[test]
    fn modes_never_panic(s in "[ -~]{0,40}", payload in 1u32..70_000, rate in 1u64..100_000, ch in 0u32..70_000, bits in 0u32..40) {
        let _ = vsis::mode::Mode::parse(&s);
        let text = format!("VDIF_{payload}-{rate}-{ch}-{bits}");
        if let Ok(Some(m)) = vsis::mode::Mode::parse(&text) {
            prop_assert_eq!(m.query_fields()[0].clone(), text);
            for t in 1..=8u16 {
                if let Ok(fps) = m.frame_rate(t).map(u32::from) {
                    prop_assert_eq!(u64::from(fps) * u64::from(payload) * 8 * u64::from(t), rate * 1_000_000);
                }
            }
        }
    }

    /// A mode made from a frame rate gives that rate back (vdif's rule, through jive5ab's
    /// `<Mb/s>`), and over a thread count that does not divide it, no rate at all.
    #[test]
    fn mode_rates_round_trip(k in 1u64..=64, units in 1u64..=1000, threads in 1u16..=16) {
        // 15625 frames/s × 8-byte multiples × 8 bits is a whole number of Mb/s.
        let (fps, payload) = (k * 15_625, units * 8);
        let mbps = fps * payload * 8 * u64::from(threads) / 1_000_000;
        // A mode's rate is at most 1 000 000 Mb/s (refused above: Mode::parse's rule); the
        // generator reaches 1 024 000 (64 × 15625 frames/s × 8000 bytes × 16 threads).
        prop_assume!(mbps <= 1_000_000);
        let m = vsis::mode::Mode::parse(&format!("VDIF_{payload}-{mbps}-16-2")).unwrap().unwrap();
        prop_assert_eq!(m.frame_rate(threads).map(u64::from), Ok(fps));
        let bits = mbps * 1_000_000;
        for t in 1..=16u16 {
            let divides = bits % (payload * 8 * u64::from(t)) == 0 && bits / (payload * 8 * u64::from(t)) >= 1;
            prop_assert_eq!(m.frame_rate(t).is_ok(), divides);
        }
    }
}

//! The probe control messages on their own (moved here from the `probe` core with the
//! messages): no input panics the line decoder, and results survive the trip through it.

use ctlchan::LineDecoder;
use probe::recv_stats::{ReceiverReport, RecvConfig, RecvStats};
use probe::results::{ProbeResult, TestParams};
use probe::send_stats::{SendConfig, SendStats};
use probe::wire::Repr;
use probe_session::control::{ControlMsg, Results, MAX_LINE};
use proptest::prelude::*;

const TEST_ID: u64 = 99;
const SIZE: usize = 1472;
const SPACING: u64 = 12_000;

/// Send `n` paced packets, dropping those for which `drop(seq)` is true; 30 µs path delay.
fn run(n: u64, mut drop: impl FnMut(u64) -> bool) -> ReceiverReport {
    let mut rx = RecvStats::new(RecvConfig {
        size: Some(SIZE),
        spacing_ns: Some(SPACING),
        ..RecvConfig::new(TEST_ID)
    });
    for seq in 0..n {
        let t = seq * SPACING;
        if !drop(seq) {
            let p = Repr {
                flags: 0,
                test_id: TEST_ID,
                seq,
                send_ns: t,
                size: SIZE,
            };
            rx.on_datagram(t + 30_000, &p.to_vec().expect("valid size"), true);
        }
    }
    rx.finish(Some(n), n * SPACING + 1_000_000)
}

#[test]
fn sender_and_receiver_results_roundtrip_over_the_control_channel() {
    let mut tx = SendStats::new(SendConfig::new(SPACING));
    for seq in 0..100 {
        tx.on_sent(seq * SPACING, seq * SPACING + 100, SIZE);
    }
    let rx = run(100, |s| s == 50);
    let msg = ControlMsg::Results(Box::new(Results {
        receiver: rx.clone(),
        host: None,
        notes: Vec::new(),
        socket: None,
    }));
    let mut d = LineDecoder::<ControlMsg>::new(MAX_LINE);
    d.push(&ctlchan::encode_line(&msg, MAX_LINE).expect("encode"))
        .expect("push");
    assert_eq!(d.poll().expect("decode"), Some(msg));
    let params = TestParams {
        test_id: TEST_ID,
        size: SIZE as u32,
        count: 100,
        spacing_ns: SPACING,
    };
    let result = ProbeResult::new(params, Some(tx.report()), Some(rx));
    let json = serde_json::to_string_pretty(&result).expect("json");
    let back: ProbeResult = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, result);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = ctlchan::decode_line::<ControlMsg>(&bytes);
        let mut d = LineDecoder::<ControlMsg>::new(64);
        let _ = d.push(&bytes);
        while let Ok(Some(_)) = d.poll() {}
    }

    #[test]
    fn authenticated_decoder_never_panics(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..8),
    ) {
        let mut d = LineDecoder::<ControlMsg>::new(256);
        d.authenticate([3; 32], ctlchan::Role::Client);
        for c in &chunks {
            if d.push(c).is_err() { break; }
            while let Ok(Some(_)) = d.poll() {}
        }
    }
}

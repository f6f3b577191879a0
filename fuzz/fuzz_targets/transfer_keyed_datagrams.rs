//! An authenticated, open (multi-segment) transfer mid-flight receiving arbitrary datagrams at
//! both ends — an attacker who knows the session id (it is on the wire) and may have copied
//! genuine datagrams to mutate. DATA tags cover the payload's digest at its segment's offset in
//! its source, so segments at different digest bases are part of the setup. Nothing without a
//! valid tag may move either machine: the receiver writes nothing more and counts nothing as
//! data, the sender sees no report. Never a panic.
#![no_main]
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use transfer::{DataKey, FixedRate, Receiver, ReceiverConfig, Sender, SenderConfig, SessionParams};

#[path = "common/mem.rs"]
mod mem;
use mem::Mem;

/// Three segments (len, digest base): a whole-KiB one at an aligned base, an odd one, a short
/// one far into its source.
const SEGMENTS: [(u64, u64); 3] = [(40_960, 0), (33_333, 1 << 20), (1_000, 7 << 30)];

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let session = SessionParams {
        session_id: 7,
        file_size: 0,
        chunk_size: 4096,
    };
    let key = DataKey([0x5a; 32]);
    let mut sc = SenderConfig::new(session);
    sc.open = true;
    sc.data_key = Some(key.clone());
    let mut rc = ReceiverConfig::new(session);
    rc.open = true;
    rc.data_key = Some(key);
    // The stream's wire offsets: 3 segments of 10, 9 and 1 chunks of 4096 bytes.
    let size = 20 * 4096;
    let mut tx = Sender::new(sc, Mem(vec![1; size]), Box::new(FixedRate::new(1e9)), t0).expect("valid config");
    let mut rx = Receiver::new(rc, Mem(vec![0; size]), t0).expect("valid config");
    for (len, base) in SEGMENTS {
        tx.push_segment(len, base);
        rx.push_segment(len, base);
    }
    let mut now = mem::warm_up(&mut tx, &mut rx, t0);
    let (rx0, tx0) = (rx.stats(), tx.stats());
    for d in mem::datagrams(data) {
        now += Duration::from_micros(37);
        tx.handle_datagram(now, d);
        rx.handle_datagram(now, d);
    }
    let (rx1, tx1) = (rx.stats(), tx.stats());
    assert_eq!(
        rx1.datagrams_received, rx0.datagrams_received,
        "a forged datagram was taken as data"
    );
    assert_eq!(rx1.bytes_written, rx0.bytes_written);
    assert_eq!(tx1.reports_received, tx0.reports_received, "a forged report was taken");
});

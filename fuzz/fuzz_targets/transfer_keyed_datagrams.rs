//! An authenticated transfer mid-flight receiving arbitrary datagrams at both ends — an attacker
//! who knows the session id (it is on the wire) and may have copied genuine datagrams to mutate.
//! Nothing without a valid tag may move either machine: the receiver writes nothing more and
//! counts nothing as data, the sender sees no report. Never a panic.
#![no_main]
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use transfer::{DataKey, FixedRate, Receiver, ReceiverConfig, Sender, SenderConfig, SessionParams};

#[path = "common/mem.rs"]
mod mem;
use mem::Mem;

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let session = SessionParams {
        session_id: 7,
        file_size: 100_000,
        chunk_size: 1000,
    };
    let key = DataKey([0x5a; 32]);
    let mut sc = SenderConfig::new(session);
    sc.data_key = Some(key.clone());
    let mut rc = ReceiverConfig::new(session);
    rc.data_key = Some(key);
    let mut tx = Sender::new(sc, Mem(vec![1; 100_000]), Box::new(FixedRate::new(1e9)), t0).expect("valid config");
    let mut rx = Receiver::new(rc, Mem(vec![0; 100_000]), t0).expect("valid config");
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

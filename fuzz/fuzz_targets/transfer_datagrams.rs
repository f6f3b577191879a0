//! The bulk-transfer protocol receiving arbitrary datagrams at both ends: the input is split
//! into datagrams (2-byte length prefixes), fed to a sender (as REPORT/FIN-ACK) and a receiver
//! (as DATA/FIN) mid-transfer, with time advancing. Never a panic, never a write outside the
//! file, counters always consistent.
#![no_main]
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use transfer::{FixedRate, Receiver, ReceiverConfig, Sender, SenderConfig, SessionParams};

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
    let mut tx = Sender::new(
        SenderConfig::new(session),
        Mem(vec![1; 100_000]),
        Box::new(FixedRate::new(1e9)),
        t0,
    )
    .expect("valid config");
    let mut rx = Receiver::new(ReceiverConfig::new(session), Mem(vec![0; 100_000]), t0).expect("valid config");
    let mut now = mem::warm_up(&mut tx, &mut rx, t0);
    for d in mem::datagrams(data) {
        now += Duration::from_micros(37);
        tx.handle_datagram(now, d);
        rx.handle_datagram(now, d);
        tx.handle_timeout(now);
        let _ = tx.poll_transmit(now);
        let _ = rx.poll_transmit(now);
    }
    let s = rx.stats();
    assert!(s.bytes_written <= 100_000);
    let _ = tx.stats();
});

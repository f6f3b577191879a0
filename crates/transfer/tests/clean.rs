//! Small transfers over a clean (lossless) path complete byte-exact, including a file whose
//! size is not a multiple of the chunk size, with both controllers.

mod common;

use std::time::{Duration, Instant};

use common::{CheckSink, GenSource, Path, Rx, Tx, FRAMING};
use linkemu::sim::Sim;
use transfer::{
    Adaptive, CongestionController, FixedRate, Receiver, ReceiverConfig, ReceiverState, Sender, SenderConfig,
    SessionParams,
};

fn transfer(name: &str, file_size: u64, chunk_size: u32, cc: Box<dyn CongestionController>) {
    let params = SessionParams {
        session_id: 0x5eed,
        file_size,
        chunk_size,
    };
    let seed = 77;
    let start = Instant::now();
    let mut cfg = SenderConfig::new(params);
    cfg.wire_overhead = FRAMING as u32;
    let tx = Tx {
        s: Sender::new(cfg, GenSource { seed, size: file_size }, cc, start).unwrap(),
        data_overhead: FRAMING,
        session: params.session_id,
    };
    let rx = Rx {
        r: Receiver::new(ReceiverConfig::new(params), CheckSink::new(seed, file_size), start).unwrap(),
    };
    // 100 Mb/s, 20 ms RTT, no loss.
    let path = Path::new(100_000_000, Duration::from_millis(20));
    let mut sim = Sim::new(tx, rx, path.duplex(5), start);
    sim.run_until(
        |s| s.a().s.is_done() && s.b().r.state() == ReceiverState::Closed,
        Duration::from_secs(30),
    )
    .unwrap();
    sim.b().r.sink().assert_exact();
    let st = sim.a().s.stats();
    println!(
        "[clean {name}] {file_size} B in chunks of {chunk_size}: done at {:?}, {} DATA ({} retransmitted, {} of them \
         by the tail, {} queue drops), {} reports, RTT min {:?} µs",
        sim.elapsed(),
        st.datagrams_sent,
        st.retransmitted_datagrams,
        st.tail_resent_datagrams,
        sim.stats_a_to_b().dropped_queue.packets,
        st.reports_received,
        st.rtt_min_us,
    );
    // No random loss: every retransmission a NAK asked for repairs a queue drop (Adaptive's
    // Startup may overshoot a 1-BDP buffer), none is spurious; the only duplicates are the
    // deliberate resends of tail protection (counted apart).
    let link = sim.stats_a_to_b();
    assert_eq!(link.dropped_loss.packets, 0);
    assert_eq!(
        st.retransmitted_datagrams - st.tail_resent_datagrams,
        link.dropped_queue.packets,
        "retransmissions other than the tail's = queue drops"
    );
    assert!(
        sim.b().r.stats().duplicate_datagrams <= st.tail_resent_datagrams,
        "no spurious retransmission: {} duplicates, {} resent by the tail",
        sim.b().r.stats().duplicate_datagrams,
        st.tail_resent_datagrams
    );
    assert_eq!(st.datagrams_sent, params.total_chunks() + st.retransmitted_datagrams);
    assert_eq!(st.bytes_delivered, file_size);
}

#[test]
fn small_transfer_fixed_rate_is_exact() {
    transfer("fixed", 1_000_003, 8192, Box::new(FixedRate::new(50e6)));
}

#[test]
fn small_transfer_adaptive_is_exact() {
    transfer("adaptive", 3_333_333, 8192, Box::new(Adaptive::default()));
}

#[test]
fn single_short_chunk_is_exact() {
    transfer("one byte", 1, 8192, Box::new(Adaptive::default()));
}

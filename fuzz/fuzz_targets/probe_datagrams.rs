//! Probe receiver statistics over arbitrary datagrams: the input is split into datagrams by a
//! length byte; parse never panics and the loss accounting invariant holds at the end. Each
//! piece is also fed to the TCP test's parsers (data-connection preamble, TCP_INFO bytes).
#![no_main]
use libfuzzer_sys::fuzz_target;
use probe::recv_stats::{RecvConfig, RecvStats};

fuzz_target!(|data: &[u8]| {
    let mut stats = RecvStats::new(RecvConfig::new(7));
    let mut rest = data;
    let mut t = 0u64;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (dgram, next) = tail.split_at(n);
        let _ = probe::wire::Repr::parse_bytes(dgram);
        let _ = probe::tcp::Preamble::parse(dgram);
        if let Ok(info) = probe::tcp::TcpInfo::parse(dgram) {
            let _ = probe::tcp::TcpSample::new(t as f64, 0, u64::from(len), &info).delivered();
        }
        t += 1000;
        stats.on_datagram(t, dgram, len % 7 != 0);
        rest = next;
    }
    let report = stats.finish(None, t + 1);
    let _ = serde_json::to_string(&report);
});

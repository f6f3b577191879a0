//! `evlbi stream relay` taking arbitrary datagrams (2-byte length prefixes split the input; the
//! byte after each says which of 4 senders and whether the kernel truncated it) in every input
//! framing, with its deadlines run and its output drained: never a panic, never an allocation
//! sized by a forged number, output always whole datagrams of the chosen framing.
#![no_main]
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use stream::relay::{Relay, RelayConfig};
use stream::wire::SeqFormat;
use stream::VecSink;

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    for (input, output) in [
        (SeqFormat::None, SeqFormat::Native),
        (SeqFormat::Jive5ab, SeqFormat::Jive5ab),
        (SeqFormat::Native, SeqFormat::None),
    ] {
        let mut cfg = RelayConfig::new(input, output, t0);
        cfg.frames_per_second = vdif::FrameRate::new(100).ok();
        cfg.arq_latency = (output == SeqFormat::Native).then_some(Duration::from_millis(100));
        cfg.ack_every = Some(3);
        cfg.buffer_bytes = 1 << 20;
        let mut relay = Relay::new(cfg);
        let mut tee = VecSink::default();
        let mut rest = data;
        let mut i = 0u32;
        while rest.len() >= 3 {
            let n = (usize::from(rest[0]) << 8 | usize::from(rest[1])).min(rest.len() - 3);
            let who = rest[2];
            let now = t0 + Duration::from_micros(u64::from(i) * 100);
            let from = SocketAddr::from(([127, 0, 0, 1], 9000 + u16::from(who & 3)));
            relay.handle_datagram(now, u16::from(who >> 7), from, &rest[3..3 + n], who & 4 != 0, &mut tee);
            relay.handle_timeout(now, &mut tee);
            while let Ok(Some(t)) = relay.poll_transmit(now) {
                let _ = t.datagram_count();
                relay.on_transmitted(now);
            }
            if who & 8 != 0 {
                relay.handle_return(now, &rest[3..3 + n]);
            }
            while relay.poll_ack().is_some() {}
            rest = &rest[3 + n..];
            i += 1;
        }
        relay.finish();
        let _ = (relay.senders(), relay.stations(), relay.output());
    }
});

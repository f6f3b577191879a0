//! `evlbi stream` receiving arbitrary datagrams: the input is split into datagrams (2-byte length
//! prefixes) and fed to receivers of every framing (and a Mark5B stream in jive5ab's udps, whose
//! datagrams may be pieces of frames), then the NAK parser. Never a panic, never an allocation
//! sized by a forged number, output always whole frames.
#![no_main]
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use stream::wire::{Nak, SeqFormat};
use stream::{Receiver, ReceiverConfig, VecSink};

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let from: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9));
    let framings = [
        (SeqFormat::Native, vdif::FrameFormat::Vdif),
        (SeqFormat::Jive5ab, vdif::FrameFormat::Vdif),
        (SeqFormat::None, vdif::FrameFormat::Vdif),
        (SeqFormat::Jive5ab, vdif::FrameFormat::Mark5b),
    ];
    for (format, frame_format) in framings {
        let mut rx = Receiver::new(ReceiverConfig {
            format,
            frame_format,
            frames_per_second: vdif::FrameRate::new(100).ok(),
            latency: Duration::from_millis(100),
            arq: true,
            ..ReceiverConfig::default()
        });
        let mut sink = VecSink::default();
        let mut rest = data;
        let mut i = 0u64;
        while rest.len() >= 2 {
            let n = (usize::from(rest[0]) << 8 | usize::from(rest[1])).min(rest.len() - 2);
            rx.handle_datagram(t0 + Duration::from_micros(i), from, &rest[2..2 + n], false, &mut sink);
            let _ = rx.poll_naks(t0 + Duration::from_micros(i));
            rest = &rest[2 + n..];
            i += 1;
        }
        rx.finish(&mut sink);
        for s in &sink.segments {
            let _ = s.len();
        }
    }
    let _ = Nak::parse(data);
});

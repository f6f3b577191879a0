//! Transfer control lines: arbitrary bytes in arbitrary pieces give validated messages or typed
//! errors, never a panic; every accepted message re-encodes within the bound.
#![no_main]
use ctlchan::{encode_line, LineDecoder};
use libfuzzer_sys::fuzz_target;
use transfer_session::control::{Msg, MAX_LINE};

fuzz_target!(|data: &[u8]| {
    let _ = ctlchan::decode_line::<Msg>(data);
    let mut dec = LineDecoder::<Msg>::new(4096);
    for piece in data.chunks(17) {
        if dec.push(piece).is_err() {
            return;
        }
        while let Ok(Some(msg)) = dec.poll() {
            encode_line(&msg, MAX_LINE).expect("an accepted message must encode");
        }
    }
    let _ = dec.finish();
});

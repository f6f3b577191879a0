//! Control-channel line decoding: arbitrary bytes in arbitrary chunks give messages or typed
//! errors, never a panic, and never a line longer than the bound.
#![no_main]
use libfuzzer_sys::fuzz_target;
use probe::control::{ControlMsg, LineDecoder};

fuzz_target!(|data: &[u8]| {
    let _ = ControlMsg::from_line(data);
    let mut dec = LineDecoder::new(512);
    for chunk in data.chunks(13) {
        if dec.push(chunk).is_err() {
            return;
        }
        while let Ok(Some(msg)) = dec.poll() {
            let _ = msg.validate();
        }
    }
    let _ = dec.finish();
});

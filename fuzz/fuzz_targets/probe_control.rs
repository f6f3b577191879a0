//! Control-channel line decoding of the probe messages: arbitrary bytes in arbitrary chunks give
//! messages or typed errors, never a panic, and never a line longer than the bound; the same
//! through a channel authenticated with a session key (every line then needs a valid MAC).
#![no_main]
use ctlchan::{LineDecoder, Role};
use libfuzzer_sys::fuzz_target;
use probe_session::control::ControlMsg;

fn feed(mut dec: LineDecoder<ControlMsg>, data: &[u8]) {
    for chunk in data.chunks(13) {
        if dec.push(chunk).is_err() {
            return;
        }
        while let Ok(Some(msg)) = dec.poll() {
            let _ = msg.check();
        }
    }
    let _ = dec.finish();
}

fuzz_target!(|data: &[u8]| {
    let _ = ctlchan::decode_line::<ControlMsg>(data);
    feed(LineDecoder::new(512), data);
    let mut keyed = LineDecoder::new(512);
    keyed.authenticate([7; 32], Role::Server);
    feed(keyed, data);
});

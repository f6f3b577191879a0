//! An authenticated control channel fed arbitrary bytes (a proxy or an attacker on the path):
//! without the session key no line is ever accepted, and nothing panics.
#![no_main]
use ctlchan::{LineDecoder, Role};
use libfuzzer_sys::fuzz_target;
use transfer_session::control::{Msg, MAX_LINE};

fuzz_target!(|data: &[u8]| {
    let mut dec = LineDecoder::<Msg>::new(MAX_LINE);
    dec.authenticate([0x33; 32], Role::Server);
    for piece in data.chunks(29) {
        if dec.push(piece).is_err() {
            return;
        }
        match dec.poll() {
            Ok(Some(m)) => panic!("accepted a line without the key: {m:?}"),
            Ok(None) => {}
            Err(_) => return,
        }
    }
});

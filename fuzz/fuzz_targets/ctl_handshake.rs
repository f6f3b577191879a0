//! The one key handshake (ctlchan::handshake) fed arbitrary lines in the probe's dialect, at both
//! ends, keyed and not, and the transfer's first flight (its own hello proof) likewise: every line gets a typed
//! outcome, nothing panics, and without the key no server ever accepts a keyed client.
#![no_main]
use std::time::{Duration, Instant};

use ctlchan::handshake::{ClientHandshake, Fresh, HandshakeMessage, ServerHandshake, ServerStep};
use ctlchan::Message;
use libfuzzer_sys::fuzz_target;

fn drive<M: Message + HandshakeMessage + Clone>(data: &[u8], dialect: ctlchan::handshake::Dialect, hello: M) {
    let now = Instant::now();
    let deadline = now + Duration::from_secs(10);
    let fresh = Fresh {
        nonce: [7; 16],
        session_key: [9; 32],
    };
    let key = || Some(b"fuzzing key".to_vec());
    let (mut client, _) = ClientHandshake::start(dialect, hello, key(), fresh, deadline);
    let mut server = ServerHandshake::<M>::new(dialect, key(), fresh, deadline);
    for line in data.split(|&b| b == b'\n').take(16) {
        let Ok(m) = ctlchan::decode_line::<M>(line) else { continue };
        let _ = client.handle(m.clone(), now);
        // The fuzzer does not hold the key: it cannot prove it (2^-256 per try).
        if let Ok(ServerStep::Accepted { .. }) = server.handle(m, now) {
            panic!("a keyed server accepted lines from someone without the key");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    use probe_session::control::{ControlMsg, Hello, PROTOCOL_VERSION};
    let hello = Hello {
        version: PROTOCOL_VERSION,
        test_id: 1,
        size: 1000,
        count: 10,
        spacing_ns: 0,
        client_nonce: None,
        interval_ms: None,
        rcvbuf: None,
        tcp: None,
    };
    drive(data, probe_session::auth::DIALECT, ControlMsg::Hello(hello));
    // The transfer's first flight (protocol 5) is no ctlchan handshake: its hello carries the
    // sender's proof. Any line as a hello: a keyed receiver never accepts it without the key,
    // and the same bytes never pass twice (the replay guard).
    if let Some(line) = data.split(|&b| b == b'\n').next() {
        if let Ok(m) = ctlchan::decode_line::<transfer_session::control::Msg>(line) {
            let mut guard = transfer_session::first_flight::ReplayGuard::default();
            let now_ms = transfer_session::first_flight::wall_ms();
            if guard.check(Some(b"fuzzing key"), &m, now_ms).is_ok() {
                panic!("a keyed receiver accepted a first flight from someone without the key");
            }
            let _ = guard.check(None, &m, now_ms);
            if guard.check(None, &m, now_ms).is_ok() {
                panic!("a first flight passed twice");
            }
        }
    }
});

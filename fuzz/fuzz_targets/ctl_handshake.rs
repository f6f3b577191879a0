//! The one key handshake (ctlchan::handshake) fed arbitrary lines, in both dialects that speak
//! it (the probe's and the transfer's), at both ends, keyed and not: every line gets a typed
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
    let hello = transfer_session::control::Msg::Hello {
        version: transfer_session::control::PROTOCOL_VERSION,
        client_nonce: String::new(),
    };
    drive(data, transfer_session::control::DIALECT, hello);
});

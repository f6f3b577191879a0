//! The probe's dialect of the one key handshake ([`ctlchan::handshake`]): optional mutual
//! HMAC-SHA256 challenge–response on a pre-shared key, over [`ControlMsg`]s.
//!
//! ```text
//! client                                  server
//!   hello{params, client_nonce}   ──▶
//!                                 ◀──   challenge{server_nonce}
//!   auth{mac = H(k, "client", sn, cn, params)} ──▶   verify (constant time)
//!                                 ◀──   ready{udp_port, proof = H(k, "server", cn, sn, port, test_id)}
//!   verify proof
//!   both: session key = H(k, "session", cn, sn); every later line carries a MAC under it
//! ```
//!
//! The client MAC covers the trial parameters, so a man in the middle cannot turn a polite test
//! into a flood; the server proof covers the data port, so the client does not blast a port
//! chosen by someone who does not hold the key. Fresh nonces on both sides defeat replay. After
//! `ready` both ends switch the channel to per-line MACs under the session key
//! ([`ctlchan::Channel::authenticate`]), so the `interim`, `done`, `results`, `tcp_done`,
//! `tcp_results` and `error` lines can be neither altered, dropped, replayed nor reordered.
//! Without a key there is no challenge: the server answers `hello` with `ready`.

use ctlchan::handshake::{Binding, Dialect, HandshakeMessage, Line, NonceInput, ServerProof, WithoutKey};

use crate::control::{Auth, Challenge, ControlMsg, Hello};

/// The probe's labels and choices (nonces as bytes; open without a key; `ready` proves the key).
pub const DIALECT: Dialect = Dialect {
    client_label: b"evlbi-probe-v2 client",
    server_label: b"evlbi-probe-v2 server",
    session_label: b"evlbi-probe-v2 session key",
    nonces: NonceInput::Bytes,
    without_key: WithoutKey::Open,
    server_proof: ServerProof::InAccept,
};

/// Fixed binary encoding of the parameters the client MAC vouches for: every field of `hello`
/// that changes what the server does. The optional interim cadence (a man in the middle could
/// otherwise make the server chatter every 100 ms), receive buffer and TCP parameters follow,
/// each behind a tag byte, only when present.
fn hello_binding(h: &Hello) -> Vec<u8> {
    let mut v = Vec::with_capacity(72);
    v.push(h.version);
    v.extend_from_slice(&h.test_id.to_be_bytes());
    v.extend_from_slice(&h.size.to_be_bytes());
    v.extend_from_slice(&h.count.to_be_bytes());
    v.extend_from_slice(&h.spacing_ns.to_be_bytes());
    if let Some(ms) = h.interval_ms {
        v.push(b'i');
        v.extend_from_slice(&ms.to_be_bytes());
    }
    if let Some(b) = h.rcvbuf {
        v.push(b'r');
        v.extend_from_slice(&b.to_be_bytes());
    }
    if let Some(t) = &h.tcp {
        v.push(b't');
        v.extend_from_slice(&t.streams.to_be_bytes());
        v.extend_from_slice(&t.duration_ms.to_be_bytes());
        v.extend_from_slice(&t.write_size.to_be_bytes());
        let cc = t.cc.as_deref().unwrap_or("");
        // Validated names are at most 15 bytes, so the length fits one byte.
        v.push(u8::try_from(cc.len()).unwrap_or(u8::MAX));
        v.extend_from_slice(cc.as_bytes());
    }
    v
}

/// The parts of `ready` its proof covers: the data port (the hello adds the test id).
pub fn ready_parts(udp_port: u16) -> Vec<Vec<u8>> {
    vec![udp_port.to_be_bytes().to_vec()]
}

impl HandshakeMessage for ControlMsg {
    fn line(&self) -> Line<'_> {
        match self {
            ControlMsg::Hello(h) => Line::Hello {
                client_nonce: h.client_nonce.as_deref(),
                binding: Binding {
                    client_proof: vec![hello_binding(h)],
                    server_proof: vec![h.test_id.to_be_bytes().to_vec()],
                },
            },
            ControlMsg::Challenge(c) => Line::Challenge {
                server_nonce: &c.server_nonce,
                key_required: None,
            },
            ControlMsg::Auth(a) => Line::Auth {
                proof: Some(&a.mac),
                session_key: None,
            },
            ControlMsg::Ready(r) => Line::Accept {
                proof: r.server_proof.as_deref(),
                parts: ready_parts(r.udp_port),
            },
            ControlMsg::Error(e) => Line::Refusal(&e.message),
            other => Line::Other(other.name()),
        }
    }

    fn with_client_nonce(self, client_nonce: Option<String>) -> Self {
        match self {
            ControlMsg::Hello(h) => ControlMsg::Hello(Hello { client_nonce, ..h }),
            other => other,
        }
    }

    fn challenge(server_nonce: String, _key_required: bool) -> Self {
        // The probe's challenge says nothing more: a challenge means a key is required.
        ControlMsg::Challenge(Challenge { server_nonce })
    }

    fn auth(proof: Option<String>, _session_key: Option<String>) -> Self {
        // The probe's dialect sends `auth` only with a key, so only with a proof.
        ControlMsg::Auth(Auth {
            mac: proof.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{TcpHello, PROTOCOL_VERSION};
    use ctlchan::handshake::{ClientHandshake, ClientStep, Fresh, HandshakeError, ServerHandshake, ServerStep};
    use ctlchan::mac::{derive, hex_encode, prove, NONCE_LEN};
    use std::time::{Duration, Instant};

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            test_id: 42,
            size: 1472,
            count: 1000,
            spacing_ns: 12_000,
            client_nonce: None,
            interval_ms: None,
            rcvbuf: None,
            tcp: None,
        }
    }

    fn fresh(b: u8) -> Fresh {
        Fresh {
            nonce: [b; NONCE_LEN],
            session_key: [0; 32],
        }
    }

    /// Client and server over `hello`, the server's challenge answered; the server's verdict on
    /// the auth, after `tamper` changed the hello on its way.
    fn keyed_auth(h: Hello, tamper: impl Fn(&mut Hello)) -> Result<(), HandshakeError> {
        let (now, key) = (Instant::now(), b"secret".to_vec());
        let deadline = now + Duration::from_secs(5);
        let (mut c, first) =
            ClientHandshake::start(DIALECT, ControlMsg::Hello(h), Some(key.clone()), fresh(1), deadline);
        let mut s = ServerHandshake::<ControlMsg>::new(DIALECT, Some(key), fresh(2), deadline);
        let ControlMsg::Hello(mut sent) = first else {
            unreachable!()
        };
        tamper(&mut sent);
        let ServerStep::Send(ch) = s.handle(ControlMsg::Hello(sent), now)? else {
            unreachable!("no challenge")
        };
        let ClientStep::Send(auth) = c.handle(ch, now)? else {
            unreachable!("no auth")
        };
        s.handle(auth, now).map(|_| ())
    }

    #[test]
    fn the_keyed_wire_is_the_probe_v2_handshake() {
        // The bytes every released probe speaks: MACs over the nonces' bytes, the hello's
        // binding, then the port and test id.
        let (now, k) = (Instant::now(), b"secret".to_vec());
        let deadline = now + Duration::from_secs(5);
        let (mut c, first) =
            ClientHandshake::start(DIALECT, ControlMsg::Hello(hello()), Some(k.clone()), fresh(1), deadline);
        let mut s = ServerHandshake::<ControlMsg>::new(DIALECT, Some(k.clone()), fresh(2), deadline);
        let h = Hello {
            client_nonce: Some(hex_encode(&[1; NONCE_LEN])),
            ..hello()
        };
        assert_eq!(first, ControlMsg::Hello(h.clone()));
        let ServerStep::Send(ch) = s.handle(first, now).expect("challenge") else {
            unreachable!()
        };
        let ClientStep::Send(ControlMsg::Auth(a)) = c.handle(ch, now).expect("auth") else {
            unreachable!()
        };
        let (cn, sn) = ([1; NONCE_LEN], [2; NONCE_LEN]);
        let want = prove(&k, &[b"evlbi-probe-v2 client", &sn, &cn, &hello_binding(&h)]).expect("mac");
        assert_eq!(a.mac, want);
        let ServerStep::Accepted { session_key, .. } = s.handle(ControlMsg::Auth(a), now).expect("accepted") else {
            unreachable!()
        };
        let want = derive(&k, &[b"evlbi-probe-v2 session key", &cn, &sn]).expect("key");
        assert_eq!(session_key, Some(want));
        let proof = s.accept_proof(&ready_parts(5001)).expect("proof");
        let parts: [&[u8]; 5] = [
            b"evlbi-probe-v2 server",
            &cn,
            &sn,
            &5001u16.to_be_bytes(),
            &42u64.to_be_bytes(),
        ];
        assert_eq!(proof, Some(prove(&k, &parts).expect("mac")));
        let ready = ControlMsg::Ready(crate::control::Ready {
            udp_port: 5001,
            server_proof: proof,
        });
        assert!(matches!(
            c.handle(ready, now),
            Ok(ClientStep::Accepted { session_key: Some(key), .. }) if key == want
        ));
    }

    #[test]
    fn tampered_parameters_fail() {
        // A man in the middle inflates the trial, or asks for interim lines the client did not.
        assert_eq!(keyed_auth(hello(), |_| {}), Ok(()));
        assert_eq!(
            keyed_auth(hello(), |h| h.count = 1_000_000_000),
            Err(HandshakeError::BadMac)
        );
        assert_eq!(
            keyed_auth(hello(), |h| h.interval_ms = Some(100)),
            Err(HandshakeError::BadMac)
        );
    }

    #[test]
    fn tcp_parameters_and_rcvbuf_are_bound_by_the_mac() {
        // A UDP hello without the optional fields binds as it did before they existed.
        assert_eq!(hello_binding(&hello()).len(), 29);
        let tcp = Hello {
            tcp: Some(TcpHello {
                streams: 2,
                duration_ms: 1000,
                write_size: 131_072,
                cc: Some("bbr".into()),
            }),
            ..hello()
        };
        assert_eq!(keyed_auth(tcp.clone(), |_| {}), Ok(()));
        for tamper in [
            (|h: &mut Hello| h.tcp.as_mut().expect("tcp").streams = 64) as fn(&mut Hello),
            |h| h.tcp.as_mut().expect("tcp").duration_ms = 3_600_000,
            |h| h.tcp.as_mut().expect("tcp").cc = Some("reno".into()),
            |h| h.tcp = None,
        ] {
            assert_eq!(keyed_auth(tcp.clone(), tamper), Err(HandshakeError::BadMac));
        }
        let rcv = Hello {
            rcvbuf: Some(65_536),
            ..hello()
        };
        assert_ne!(hello_binding(&rcv), hello_binding(&hello()));
    }
}

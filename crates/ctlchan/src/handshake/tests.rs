//! Both dialects end to end, every failure path of either end, the bytes of the proofs pinned,
//! and arbitrary lines fed to both ends.

use super::*;
use crate::{decode_line, InvalidField, LineDecoder, Message, Role};
use serde::{Deserialize, Serialize};

/// A protocol's messages, shaped like the probe's and the transfer's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum T {
    Hello {
        client_nonce: Option<String>,
        count: u64,
    },
    Challenge {
        server_nonce: String,
        key_required: Option<bool>,
    },
    Auth {
        proof: Option<String>,
        session_key: Option<String>,
    },
    Ready {
        port: u16,
        proof: Option<String>,
    },
    Data {
        n: u64,
    },
    Error {
        message: String,
    },
}

impl Message for T {
    fn validate(&self) -> Result<(), InvalidField> {
        Ok(())
    }
}

impl HandshakeMessage for T {
    fn line(&self) -> Line<'_> {
        match self {
            T::Hello { client_nonce, count } => Line::Hello {
                client_nonce: client_nonce.as_deref(),
                binding: Binding {
                    client_proof: vec![count.to_be_bytes().to_vec()],
                    server_proof: vec![count.to_le_bytes().to_vec()],
                },
            },
            T::Challenge {
                server_nonce,
                key_required,
            } => Line::Challenge {
                server_nonce,
                key_required: *key_required,
            },
            T::Auth { proof, session_key } => Line::Auth {
                proof: proof.as_deref(),
                session_key: session_key.as_deref(),
            },
            T::Ready { port, proof } => Line::Accept {
                proof: proof.as_deref(),
                parts: vec![port.to_be_bytes().to_vec()],
            },
            T::Data { .. } => Line::Other("data"),
            T::Error { message } => Line::Refusal(message),
        }
    }

    fn with_client_nonce(self, client_nonce: Option<String>) -> Self {
        match self {
            T::Hello { count, .. } => T::Hello { client_nonce, count },
            other => other,
        }
    }

    fn challenge(server_nonce: String, key_required: bool) -> Self {
        T::Challenge {
            server_nonce,
            key_required: Some(key_required),
        }
    }

    fn auth(proof: Option<String>, session_key: Option<String>) -> Self {
        T::Auth { proof, session_key }
    }
}

/// The probe's choices: raw nonces, open without a key, an explicit server proof.
const EXPLICIT: Dialect = Dialect {
    client_label: b"test client",
    server_label: b"test server",
    session_label: b"test session",
    nonces: NonceInput::Bytes,
    without_key: WithoutKey::Open,
    server_proof: ServerProof::InAccept,
};

/// The transfer's: hex nonces, a clear session key without a key, the first MAC'd line proves.
const IMPLICIT: Dialect = Dialect {
    nonces: NonceInput::Hex,
    without_key: WithoutKey::ClearSessionKey,
    server_proof: ServerProof::FirstAuthenticatedLine,
    ..EXPLICIT
};

const CN: [u8; NONCE_LEN] = [1; NONCE_LEN];
const SN: [u8; NONCE_LEN] = [2; NONCE_LEN];

fn fresh(nonce: [u8; NONCE_LEN]) -> Fresh {
    Fresh {
        nonce,
        session_key: [9; 32],
    }
}

fn hello() -> T {
    T::Hello {
        client_nonce: None,
        count: 1000,
    }
}

fn t0() -> Instant {
    // Any instant will do: the machines only compare what they are given.
    Instant::now()
}

fn later(t: Instant) -> Instant {
    t + Duration::from_secs(1)
}

fn ends(d: Dialect, ckey: Option<&[u8]>, skey: Option<&[u8]>) -> (ClientHandshake, T, ServerHandshake<T>, Instant) {
    let now = t0();
    let deadline = now + Duration::from_secs(10);
    let (c, h) = ClientHandshake::start(d, hello(), ckey.map(<[u8]>::to_vec), fresh(CN), deadline);
    let s = ServerHandshake::new(d, skey.map(<[u8]>::to_vec), fresh(SN), deadline);
    (c, h, s, now)
}

/// The session keys the client and the server derived.
type Keys = (Option<[u8; 32]>, Option<[u8; 32]>);

/// Both ends to completion: the session keys each derived, or the first error of either.
fn run(d: Dialect, ckey: Option<&[u8]>, skey: Option<&[u8]>) -> Result<Keys, HandshakeError> {
    let (mut c, mut to_server, mut s, now) = ends(d, ckey, skey);
    for _ in 0..4 {
        match s.handle(to_server, now)? {
            ServerStep::Send(m) => match c.handle(m, now)? {
                ClientStep::Send(m) => to_server = m,
                ClientStep::SendThenAuthenticate { line, session_key } => {
                    let ServerStep::Accepted { session_key: sk, .. } = s.handle(line, now)? else {
                        panic!("the server did not accept after auth");
                    };
                    return Ok((Some(session_key), sk));
                }
                ClientStep::Accepted { .. } => panic!("accepted before the server sent its accept"),
            },
            ServerStep::Accepted { hello, session_key } => {
                assert!(matches!(hello, T::Hello { count: 1000, .. }));
                let proof = s.accept_proof(&[5001u16.to_be_bytes().to_vec()])?;
                let ready = T::Ready { port: 5001, proof };
                let ClientStep::Accepted {
                    accept,
                    session_key: ck,
                } = c.handle(ready, now)?
                else {
                    panic!("client did not accept ready");
                };
                assert!(matches!(accept, T::Ready { port: 5001, .. }));
                return Ok((ck, session_key));
            }
        }
    }
    panic!("no outcome in four rounds");
}

/// The server's first line under its key, read by the client under its own: the implicit proof.
fn first_line_passes(client_key: [u8; 32], server_key: [u8; 32]) -> bool {
    let mut server = LineDecoder::<T>::new(256);
    server.authenticate(server_key, Role::Server);
    let mut client = LineDecoder::<T>::new(256);
    client.authenticate(client_key, Role::Client);
    let line = server.encode(&T::Data { n: 1 }).expect("encode");
    client.push(&line).expect("push");
    matches!(client.poll(), Ok(Some(T::Data { n: 1 })))
}

#[test]
fn matching_keys_agree_on_the_session_key_in_both_dialects() {
    for d in [EXPLICIT, IMPLICIT] {
        let (ck, sk) = run(d, Some(b"secret"), Some(b"secret")).expect("handshake");
        assert_eq!(ck, sk, "{d:?}");
        let k = ck.expect("a keyed session has a session key");
        assert!(first_line_passes(k, k));
        // Never the pre-shared key itself, and not the same in the two dialects.
        assert_ne!(&k[..6], b"secret");
    }
    let (a, _) = run(EXPLICIT, Some(b"secret"), Some(b"secret")).expect("explicit");
    let (b, _) = run(IMPLICIT, Some(b"secret"), Some(b"secret")).expect("implicit");
    assert_ne!(a, b);
}

#[test]
fn without_keys_the_open_dialect_has_no_session_key_and_the_clear_one_sends_the_clients() {
    assert_eq!(run(EXPLICIT, None, None), Ok((None, None)));
    assert_eq!(run(IMPLICIT, None, None), Ok((Some([9; 32]), Some([9; 32]))));
    // The open dialect's hello carries no nonce without a key; the other always does.
    let (_, h, _, _) = ends(EXPLICIT, None, None);
    assert!(matches!(h, T::Hello { client_nonce: None, .. }));
    let (_, h, _, _) = ends(IMPLICIT, None, None);
    assert_eq!(
        h,
        T::Hello {
            client_nonce: Some(hex_encode(&CN)),
            count: 1000
        }
    );
}

#[test]
fn the_proofs_and_keys_on_the_wire_are_pinned() {
    // What probe and transfer sessions sent before the one handshake: the same MAC parts.
    let k = b"secret";
    let (mut c, h, mut s, now) = ends(EXPLICIT, Some(k), Some(k));
    let ServerStep::Send(ch) = s.handle(h, now).expect("challenge") else {
        panic!("no challenge")
    };
    let ClientStep::Send(T::Auth { proof: Some(p), .. }) = c.handle(ch, now).expect("auth") else {
        panic!("no auth")
    };
    let count = 1000u64;
    let want = prove(k, &[b"test client", &SN, &CN, &count.to_be_bytes()]).expect("mac");
    assert_eq!(p, want);
    let ServerStep::Accepted { session_key, .. } = s.handle(T::auth(Some(p), None), now).expect("accepted") else {
        panic!("not accepted")
    };
    assert_eq!(session_key, Some(derive(k, &[b"test session", &CN, &SN]).expect("key")));
    let port = [0x13, 0x89];
    let proof = s.accept_proof(&[port.to_vec()]).expect("proof");
    let want = prove(k, &[b"test server", &CN, &SN, &port, &count.to_le_bytes()]).expect("mac");
    assert_eq!(proof, Some(want));

    let (mut c, h, mut s, now) = ends(IMPLICIT, Some(k), Some(k));
    let ServerStep::Send(ch) = s.handle(h, now).expect("challenge") else {
        panic!("no challenge")
    };
    let ClientStep::SendThenAuthenticate { line, session_key } = c.handle(ch, now).expect("auth") else {
        panic!("no auth")
    };
    let (cn, sn) = (hex_encode(&CN), hex_encode(&SN));
    let want = prove(k, &[b"test client", sn.as_bytes(), cn.as_bytes(), &count.to_be_bytes()]).expect("mac");
    assert_eq!(line, T::auth(Some(want), None));
    let want = derive(k, &[b"test session", cn.as_bytes(), sn.as_bytes()]).expect("key");
    assert_eq!(session_key, want);
}

#[test]
fn a_wrong_key_fails_at_the_end_that_checks_it() {
    // The server checks the client's proof.
    assert_eq!(
        run(EXPLICIT, Some(b"secret"), Some(b"other")),
        Err(HandshakeError::BadMac)
    );
    assert_eq!(
        run(IMPLICIT, Some(b"secret"), Some(b"other")),
        Err(HandshakeError::BadMac)
    );
    // An empty key is a mistake, refused where it is used.
    assert_eq!(run(EXPLICIT, Some(b""), Some(b"k")), Err(HandshakeError::EmptyKey));
    assert_eq!(run(IMPLICIT, Some(b"k"), Some(b"")), Err(HandshakeError::EmptyKey));
}

#[test]
fn a_key_on_one_end_only_fails() {
    // A keyed server refuses a client without a nonce (open dialect) or without a proof.
    assert_eq!(
        run(EXPLICIT, None, Some(b"k")),
        Err(HandshakeError::PeerNotAuthenticated)
    );
    assert_eq!(run(IMPLICIT, None, Some(b"k")), Err(HandshakeError::KeyRequired));
    // A keyed client refuses a server that cannot prove the key.
    assert_eq!(
        run(EXPLICIT, Some(b"k"), None),
        Err(HandshakeError::PeerNotAuthenticated)
    );
    assert_eq!(run(IMPLICIT, Some(b"k"), None), Err(HandshakeError::PeerHasNoKey));
}

/// A keyed server after the hello, and the challenge it sent.
fn challenged(d: Dialect) -> (ServerHandshake<T>, T, Instant) {
    let (_, h, mut s, now) = ends(d, Some(b"k"), Some(b"k"));
    let ServerStep::Send(ch) = s.handle(h, now).expect("challenge") else {
        panic!("no challenge")
    };
    (s, ch, now)
}

#[test]
fn every_server_failure_path() {
    let now = t0();
    let server = |d, key: Option<&[u8]>| ServerHandshake::<T>::new(d, key.map(<[u8]>::to_vec), fresh(SN), later(now));
    // No proof, or no session key without a key.
    let (mut s, _, now) = challenged(IMPLICIT);
    assert_eq!(
        s.handle(T::auth(None, Some("00".repeat(32))), now),
        Err(HandshakeError::PeerNotAuthenticated)
    );
    let mut s = server(IMPLICIT, None);
    assert!(matches!(
        s.handle(hello().with_client_nonce(Some("00".repeat(16))), now),
        Ok(ServerStep::Send(_))
    ));
    assert_eq!(s.handle(T::auth(None, None), now), Err(HandshakeError::NoSessionKey));
    let mut s = server(IMPLICIT, None);
    let _ = s.handle(hello().with_client_nonce(Some("00".repeat(16))), now);
    assert_eq!(
        s.handle(T::auth(None, Some("zz".into())), now),
        Err(HandshakeError::NoSessionKey)
    );
    // A nonce that is not 16 bytes of hex.
    for bad in ["zz".repeat(16), "00".repeat(15), String::new()] {
        let mut s = server(EXPLICIT, Some(b"k"));
        assert_eq!(
            s.handle(hello().with_client_nonce(Some(bad)), now),
            Err(HandshakeError::BadMac)
        );
    }
    // A proof that is not hex, or of another connection (a replay: other server nonce).
    let (mut s, _, now) = challenged(EXPLICIT);
    assert_eq!(
        s.handle(T::auth(Some("xyz".into()), None), now),
        Err(HandshakeError::BadMac)
    );
    let replayed = prove(b"k", &[b"test client", &[3; NONCE_LEN], &CN, &1000u64.to_be_bytes()]).expect("mac");
    let (mut s, _, now) = challenged(EXPLICIT);
    assert_eq!(
        s.handle(T::auth(Some(replayed), None), now),
        Err(HandshakeError::BadMac)
    );
    // Out of order, a refusal, and whatever comes after a failure.
    let mut s = server(EXPLICIT, Some(b"k"));
    let got = s.handle(T::auth(None, None), now);
    assert_eq!(
        got,
        Err(HandshakeError::Unexpected {
            state: "awaiting hello",
            got: "auth"
        })
    );
    assert_eq!(
        s.handle(hello(), now),
        Err(HandshakeError::Unexpected {
            state: "failed",
            got: "hello"
        })
    );
    let (mut s, _, now) = challenged(EXPLICIT);
    assert_eq!(
        s.handle(T::Data { n: 1 }, now),
        Err(HandshakeError::Unexpected {
            state: "awaiting auth",
            got: "data"
        })
    );
    let mut s = server(EXPLICIT, None);
    let refusal = T::Error { message: "no".into() };
    assert_eq!(s.handle(refusal, now), Err(HandshakeError::Rejected("no".into())));
    // Past the deadline, even a good line fails.
    let mut s = server(EXPLICIT, None);
    assert_eq!(s.handle(hello(), later(later(now))), Err(HandshakeError::Timeout));
    assert_eq!(s.remaining(later(later(now))), Duration::ZERO);
    // No accept proof before acceptance; after an open acceptance, none at all.
    let s = server(EXPLICIT, Some(b"k"));
    assert!(matches!(
        s.accept_proof(&[]),
        Err(HandshakeError::Unexpected {
            state: "awaiting hello",
            ..
        })
    ));
    let mut s = server(EXPLICIT, None);
    assert!(matches!(
        s.handle(hello(), now),
        Ok(ServerStep::Accepted { session_key: None, .. })
    ));
    assert_eq!(s.accept_proof(&[]), Ok(None));
    // Accepted: a second hello is out of turn.
    assert_eq!(
        s.handle(hello(), now),
        Err(HandshakeError::Unexpected {
            state: "accepted",
            got: "hello"
        })
    );
}

#[test]
fn tampered_hello_parameters_fail_the_clients_proof() {
    // A man in the middle inflates the count in the hello; the client proved its own.
    for d in [EXPLICIT, IMPLICIT] {
        let (mut c, h, mut s, now) = ends(d, Some(b"k"), Some(b"k"));
        let T::Hello { client_nonce, .. } = h else { panic!() };
        let tampered = T::Hello {
            client_nonce,
            count: 1_000_000_000,
        };
        let ServerStep::Send(ch) = s.handle(tampered, now).expect("challenge") else {
            panic!()
        };
        let auth = match c.handle(ch, now).expect("auth") {
            ClientStep::Send(a) | ClientStep::SendThenAuthenticate { line: a, .. } => a,
            ClientStep::Accepted { .. } => panic!(),
        };
        assert_eq!(s.handle(auth, now), Err(HandshakeError::BadMac), "{d:?}");
        assert!(s.accept_proof(&[]).is_err(), "the server stays failed");
    }
}

#[test]
fn every_client_failure_path() {
    let now = t0();
    let client =
        |d, key: Option<&[u8]>| ClientHandshake::start(d, hello(), key.map(<[u8]>::to_vec), fresh(CN), later(now)).0;
    let ch = |key_required| T::Challenge {
        server_nonce: hex_encode(&SN),
        key_required,
    };
    // Challenged without a key: the open dialect cannot answer; the clear one only when the
    // server says it needs no key.
    assert_eq!(
        client(EXPLICIT, None).handle(ch(None), now),
        Err(HandshakeError::KeyRequired)
    );
    assert_eq!(
        client(IMPLICIT, None).handle(ch(Some(true)), now),
        Err(HandshakeError::KeyRequired)
    );
    assert_eq!(
        client(IMPLICIT, None).handle(ch(None), now),
        Err(HandshakeError::KeyRequired)
    );
    assert_eq!(
        client(IMPLICIT, Some(b"k")).handle(ch(Some(false)), now),
        Err(HandshakeError::PeerHasNoKey)
    );
    // A bad server nonce, a second challenge.
    let bad = T::Challenge {
        server_nonce: "0".into(),
        key_required: None,
    };
    assert_eq!(
        client(EXPLICIT, Some(b"k")).handle(bad, now),
        Err(HandshakeError::BadMac)
    );
    let mut c = client(EXPLICIT, Some(b"k"));
    assert!(matches!(c.handle(ch(None), now), Ok(ClientStep::Send(T::Auth { .. }))));
    assert_eq!(
        c.handle(ch(None), now),
        Err(HandshakeError::Unexpected {
            state: "handshaking",
            got: "challenge"
        })
    );
    // A keyed client and a ready that skipped the challenge, or comes without a proof.
    let ready = |proof| T::Ready { port: 1, proof };
    let mut c = client(EXPLICIT, Some(b"k"));
    assert_eq!(
        c.handle(ready(Some("00".repeat(32))), now),
        Err(HandshakeError::PeerNotAuthenticated)
    );
    let mut c = client(EXPLICIT, Some(b"k"));
    let _ = c.handle(ch(None), now);
    assert_eq!(c.handle(ready(None), now), Err(HandshakeError::PeerNotAuthenticated));
    // The client's own proof reflected back as the server's, and a proof of another port.
    let mut c = client(EXPLICIT, Some(b"k"));
    let Ok(ClientStep::Send(T::Auth { proof: own, .. })) = c.handle(ch(None), now) else {
        panic!()
    };
    assert_eq!(c.handle(ready(own), now), Err(HandshakeError::BadMac));
    let port2 = prove(
        b"k",
        &[b"test server", &CN, &SN, &2u16.to_be_bytes(), &1000u64.to_le_bytes()],
    )
    .expect("mac");
    let mut c = client(EXPLICIT, Some(b"k"));
    let _ = c.handle(ch(None), now);
    assert_eq!(c.handle(ready(Some(port2.clone())), now), Err(HandshakeError::BadMac));
    // The same proof for the port it names is good: the failure above is the port's.
    let mut c = client(EXPLICIT, Some(b"k"));
    let _ = c.handle(ch(None), now);
    assert!(matches!(
        c.handle(
            T::Ready {
                port: 2,
                proof: Some(port2)
            },
            now
        ),
        Ok(ClientStep::Accepted { .. })
    ));
    // Established: nothing more is a handshake line.
    assert_eq!(
        c.handle(ready(None), now),
        Err(HandshakeError::Unexpected {
            state: "established",
            got: "accept"
        })
    );
    // A dialect whose server proves the key with its first line has no accept line.
    assert_eq!(
        client(IMPLICIT, None).handle(ready(None), now),
        Err(HandshakeError::Unexpected {
            state: "handshaking",
            got: "accept"
        })
    );
    // A refusal, a stray line, a failed handshake, the deadline.
    let mut c = client(EXPLICIT, None);
    assert_eq!(
        c.handle(T::Error { message: "busy".into() }, now),
        Err(HandshakeError::Rejected("busy".into()))
    );
    assert_eq!(
        c.handle(ready(None), now),
        Err(HandshakeError::Unexpected {
            state: "failed",
            got: "accept"
        })
    );
    assert_eq!(
        client(EXPLICIT, None).handle(T::Data { n: 0 }, now),
        Err(HandshakeError::Unexpected {
            state: "handshaking",
            got: "data"
        })
    );
    assert_eq!(
        client(EXPLICIT, None).handle(ready(None), later(later(now))),
        Err(HandshakeError::Timeout)
    );
    assert_eq!(client(EXPLICIT, None).remaining(now), Duration::from_secs(1));
}

#[test]
fn a_wrong_key_in_the_implicit_dialect_fails_the_first_authenticated_line() {
    // The client switches right after auth; a server holding another key (reached only if it
    // skipped checking the proof, as a man in the middle would) cannot MAC its first line.
    let k1 = Dialect::session_key(&IMPLICIT, b"k", b"a", b"b").expect("key");
    let k2 = Dialect::session_key(&IMPLICIT, b"other", b"a", b"b").expect("key");
    assert!(!first_line_passes(k1, k2));
    assert!(first_line_passes(k1, k1));
}

fn arb_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        Just(hex_encode(&CN)),
        Just(hex_encode(&SN)),
        Just("00".repeat(32)),
        "[0-9a-fA-Fz]{0,70}",
    ]
}

fn arb_msg() -> impl proptest::strategy::Strategy<Value = T> {
    use proptest::prelude::*;
    let opt = || proptest::option::of(arb_text());
    prop_oneof![
        (opt(), any::<u64>()).prop_map(|(client_nonce, count)| T::Hello { client_nonce, count }),
        (arb_text(), proptest::option::of(any::<bool>())).prop_map(|(server_nonce, key_required)| T::Challenge {
            server_nonce,
            key_required
        }),
        (opt(), opt()).prop_map(|(proof, session_key)| T::Auth { proof, session_key }),
        (any::<u16>(), opt()).prop_map(|(port, proof)| T::Ready { port, proof }),
        any::<u64>().prop_map(|n| T::Data { n }),
        arb_text().prop_map(|message| T::Error { message }),
    ]
}

proptest::proptest! {
    /// Whatever a peer sends, in whatever order, both ends give a typed outcome and never
    /// panic; once failed they stay failed.
    #[test]
    fn arbitrary_messages_always_give_a_typed_outcome(
        msgs in proptest::collection::vec(arb_msg(), 0..8),
        keyed in proptest::prelude::any::<(bool, bool)>(),
        explicit in proptest::prelude::any::<bool>(),
    ) {
        let d = if explicit { EXPLICIT } else { IMPLICIT };
        let key = |k: bool| k.then(|| b"k".to_vec());
        let now = t0();
        let (mut c, _) = ClientHandshake::start(d, hello(), key(keyed.0), fresh(CN), later(now));
        let mut s = ServerHandshake::<T>::new(d, key(keyed.1), fresh(SN), later(now));
        let (mut c_failed, mut s_failed) = (false, false);
        for m in msgs {
            let c_out = c.handle(m.clone(), now);
            proptest::prop_assert!(!(c_failed && c_out.is_ok()));
            c_failed |= c_out.is_err();
            let s_out = s.handle(m, now);
            proptest::prop_assert!(!(s_failed && s_out.is_ok()));
            s_failed |= s_out.is_err();
        }
    }

    /// Arbitrary bytes as a received line: the decoder refuses most, and whatever it passes
    /// the handshake answers with a typed outcome.
    #[test]
    fn arbitrary_lines_never_panic(lines in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..120), 0..6)) {
        let now = t0();
        let (mut c, _) = ClientHandshake::start(EXPLICIT, hello(), Some(b"k".to_vec()), fresh(CN), later(now));
        let mut s = ServerHandshake::<T>::new(IMPLICIT, None, fresh(SN), later(now));
        for l in lines {
            if let Ok(m) = decode_line::<T>(&l) {
                let _ = c.handle(m.clone(), now);
                let _ = s.handle(m, now);
            }
        }
    }
}

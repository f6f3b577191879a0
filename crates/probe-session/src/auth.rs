//! Optional mutual HMAC-SHA256 challenge–response on the control channel (pre-shared key), as
//! two state machines over [`ControlMsg`]s; the MACs are [`ctlchan::mac`]'s.
//!
//! No I/O and no randomness inside: the caller supplies nonces (from a CSPRNG) and moves
//! messages between the state machines and the socket.
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

use ctlchan::mac::{derive, hex_decode, hex_encode, prove, verify, MacError, NONCE_LEN};
use thiserror::Error;

use crate::control::{Auth, Challenge, ControlMsg, Hello, Invalid, Ready};

const CLIENT_LABEL: &[u8] = b"evlbi-probe-v2 client";
const SERVER_LABEL: &[u8] = b"evlbi-probe-v2 server";
const SESSION_LABEL: &[u8] = b"evlbi-probe-v2 session key";

/// Why a handshake failed.
#[derive(Debug, Error)]
pub enum AuthError {
    /// The peer sent a message that does not fit the handshake state.
    #[error("unexpected `{got}` control message while {state}")]
    Unexpected {
        /// What we were waiting for.
        state: &'static str,
        /// Message type received.
        got: &'static str,
    },
    /// The message is invalid (range or format).
    #[error(transparent)]
    Control(#[from] Invalid),
    /// A key is configured here but the peer did not take part in authentication.
    #[error("peer did not authenticate but a pre-shared key is required")]
    PeerNotAuthenticated,
    /// The peer asked for authentication and we have no key.
    #[error("peer requires authentication; configure the pre-shared key")]
    KeyRequired,
    /// MAC or proof mismatch: wrong key or tampering.
    #[error("authentication failed (wrong key or tampered message)")]
    BadMac,
    /// The pre-shared key is empty.
    #[error("pre-shared key must not be empty")]
    EmptyKey,
    /// The peer sent an `error` message.
    #[error("peer refused: {0}")]
    Rejected(String),
}

impl From<MacError> for AuthError {
    fn from(e: MacError) -> Self {
        match e {
            MacError::EmptyKey => AuthError::EmptyKey,
            MacError::BadMac => AuthError::BadMac,
        }
    }
}

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

fn client_proof(key: &[u8], sn: &[u8], cn: &[u8], h: &Hello) -> Result<String, AuthError> {
    Ok(prove(key, &[CLIENT_LABEL, sn, cn, &hello_binding(h)])?)
}

/// Constant-time check of the client's MAC (see [`ctlchan::mac::verify`]).
fn check_client_proof(key: &[u8], sn: &[u8], cn: &[u8], h: &Hello, mac: &str) -> Result<(), AuthError> {
    Ok(verify(key, &[CLIENT_LABEL, sn, cn, &hello_binding(h)], mac)?)
}

fn server_parts<'a>(cn: &'a [u8], sn: &'a [u8], port: &'a [u8; 2], test_id: &'a [u8; 8]) -> [&'a [u8]; 5] {
    [SERVER_LABEL, cn, sn, port, test_id]
}

/// The key both ends derive from the pre-shared key and the two nonces once the handshake has
/// passed: fresh per connection, never on the wire; every later control line carries a MAC
/// under it.
fn session_key(key: &[u8], cn: &[u8], sn: &[u8]) -> Result<[u8; 32], AuthError> {
    Ok(derive(key, &[SESSION_LABEL, cn, sn])?)
}

/// What the server should do after [`ServerHandshake::handle`].
#[derive(Clone, Debug, PartialEq)]
pub enum ServerStep {
    /// Send this message and wait for the next one.
    Send(ControlMsg),
    /// Authenticated (or no key configured): open the UDP socket, then send
    /// [`ServerHandshake::ready`].
    Accepted(Hello),
}

#[derive(Clone, Debug)]
enum ServerState {
    AwaitHello,
    AwaitAuth(Hello),
    Accepted(Hello),
    Failed,
}

/// Server side of the handshake.
#[derive(Debug)]
pub struct ServerHandshake {
    key: Option<Vec<u8>>,
    nonce: [u8; NONCE_LEN],
    state: ServerState,
}

impl ServerHandshake {
    /// `key`: pre-shared key, `None` to accept anyone; `nonce`: fresh random bytes.
    pub fn new(key: Option<Vec<u8>>, nonce: [u8; NONCE_LEN]) -> Self {
        ServerHandshake {
            key,
            nonce,
            state: ServerState::AwaitHello,
        }
    }

    /// Feed one received message.
    pub fn handle(&mut self, msg: ControlMsg) -> Result<ServerStep, AuthError> {
        let r = self.step(msg);
        if r.is_err() {
            self.state = ServerState::Failed;
        }
        r
    }

    fn step(&mut self, msg: ControlMsg) -> Result<ServerStep, AuthError> {
        msg.check()?;
        match (&self.state, msg) {
            (ServerState::AwaitHello, ControlMsg::Hello(h)) => match &self.key {
                None => {
                    self.state = ServerState::Accepted(h.clone());
                    Ok(ServerStep::Accepted(h))
                }
                Some(_) if h.client_nonce.is_none() => Err(AuthError::PeerNotAuthenticated),
                Some(_) => {
                    self.state = ServerState::AwaitAuth(h);
                    Ok(ServerStep::Send(ControlMsg::Challenge(Challenge {
                        server_nonce: hex_encode(&self.nonce),
                    })))
                }
            },
            (ServerState::AwaitAuth(h), ControlMsg::Auth(a)) => {
                let key = self.key.as_deref().ok_or(AuthError::KeyRequired)?;
                let cn = h
                    .client_nonce
                    .as_deref()
                    .and_then(hex_decode)
                    .ok_or(AuthError::BadMac)?;
                check_client_proof(key, &self.nonce, &cn, h, &a.mac)?;
                let h = h.clone();
                self.state = ServerState::Accepted(h.clone());
                Ok(ServerStep::Accepted(h))
            }
            (_, ControlMsg::Error(e)) => Err(AuthError::Rejected(e.message)),
            (s, m) => Err(AuthError::Unexpected {
                state: server_state_name(s),
                got: m.name(),
            }),
        }
    }

    /// The `ready` message for the accepted trial, with the server proof when a key is set.
    pub fn ready(&self, udp_port: u16) -> Result<ControlMsg, AuthError> {
        let ServerState::Accepted(h) = &self.state else {
            return Err(AuthError::Unexpected {
                state: server_state_name(&self.state),
                got: "ready",
            });
        };
        let server_proof = match (&self.key, h.client_nonce.as_deref().and_then(hex_decode)) {
            (Some(k), Some(cn)) => {
                let (port, id) = (udp_port.to_be_bytes(), h.test_id.to_be_bytes());
                Some(prove(k, &server_parts(&cn, &self.nonce, &port, &id))?)
            }
            _ => None,
        };
        Ok(ControlMsg::Ready(Ready { udp_port, server_proof }))
    }

    /// With a key, once the trial is accepted: the session key under which every line after
    /// `ready` is authenticated (both ends derive the same). `None` without a key.
    pub fn session_key(&self) -> Result<Option<[u8; 32]>, AuthError> {
        let ServerState::Accepted(h) = &self.state else {
            return Err(AuthError::Unexpected {
                state: server_state_name(&self.state),
                got: "ready",
            });
        };
        match (&self.key, h.client_nonce.as_deref().and_then(hex_decode)) {
            (Some(k), Some(cn)) => Ok(Some(session_key(k, &cn, &self.nonce)?)),
            (Some(_), None) => Err(AuthError::PeerNotAuthenticated),
            (None, _) => Ok(None),
        }
    }
}

fn server_state_name(s: &ServerState) -> &'static str {
    match s {
        ServerState::AwaitHello => "awaiting hello",
        ServerState::AwaitAuth(_) => "awaiting auth",
        ServerState::Accepted(_) => "accepted",
        ServerState::Failed => "failed",
    }
}

/// What the client should do after [`ClientHandshake::handle`].
#[derive(Clone, Debug, PartialEq)]
pub enum ClientStep {
    /// Send this message and wait for the next one.
    Send(ControlMsg),
    /// The server accepted and (if keyed) proved the key: stream UDP to this port.
    Established {
        /// Server's UDP port.
        udp_port: u16,
        /// With a key: the session key under which every later control line is authenticated
        /// ([`ctlchan::Channel::authenticate`]).
        session_key: Option<[u8; 32]>,
    },
}

/// Client side of the handshake.
#[derive(Debug)]
pub struct ClientHandshake {
    key: Option<Vec<u8>>,
    hello: Hello,
    nonce: [u8; NONCE_LEN],
    server_nonce: Option<Vec<u8>>,
    failed: bool,
}

impl ClientHandshake {
    /// `hello`'s `client_nonce` is overwritten with `nonce` when a key is configured.
    pub fn new(mut hello: Hello, key: Option<Vec<u8>>, nonce: [u8; NONCE_LEN]) -> Self {
        hello.client_nonce = key.as_ref().map(|_| hex_encode(&nonce));
        ClientHandshake {
            key,
            hello,
            nonce,
            server_nonce: None,
            failed: false,
        }
    }

    /// The opening message.
    pub fn hello(&self) -> ControlMsg {
        ControlMsg::Hello(self.hello.clone())
    }

    /// Feed one received message.
    pub fn handle(&mut self, msg: ControlMsg) -> Result<ClientStep, AuthError> {
        if self.failed {
            return Err(AuthError::Unexpected {
                state: "failed",
                got: msg.name(),
            });
        }
        let r = self.step(msg);
        self.failed = r.is_err();
        r
    }

    fn step(&mut self, msg: ControlMsg) -> Result<ClientStep, AuthError> {
        msg.check()?;
        match msg {
            ControlMsg::Challenge(c) if self.server_nonce.is_none() => {
                let key = self.key.as_deref().ok_or(AuthError::KeyRequired)?;
                let sn = hex_decode(&c.server_nonce).ok_or(AuthError::BadMac)?;
                let mac = client_proof(key, &sn, &self.nonce, &self.hello)?;
                self.server_nonce = Some(sn);
                Ok(ClientStep::Send(ControlMsg::Auth(Auth { mac })))
            }
            ControlMsg::Ready(r) => {
                let session_key = match self.key.as_deref() {
                    Some(key) => {
                        // With a key, refuse a server that skipped the challenge or the proof.
                        let sn = self.server_nonce.as_deref().ok_or(AuthError::PeerNotAuthenticated)?;
                        let proof = r.server_proof.as_deref().ok_or(AuthError::PeerNotAuthenticated)?;
                        let (port, id) = (r.udp_port.to_be_bytes(), self.hello.test_id.to_be_bytes());
                        verify(key, &server_parts(&self.nonce, sn, &port, &id), proof)?;
                        Some(session_key(key, &self.nonce, sn)?)
                    }
                    None => None,
                };
                Ok(ClientStep::Established {
                    udp_port: r.udp_port,
                    session_key,
                })
            }
            ControlMsg::Error(e) => Err(AuthError::Rejected(e.message)),
            m => Err(AuthError::Unexpected {
                state: "handshaking",
                got: m.name(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: crate::control::PROTOCOL_VERSION,
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

    fn run(ckey: Option<&[u8]>, skey: Option<&[u8]>) -> Result<u16, AuthError> {
        let mut c = ClientHandshake::new(hello(), ckey.map(<[u8]>::to_vec), [1; NONCE_LEN]);
        let mut s = ServerHandshake::new(skey.map(<[u8]>::to_vec), [2; NONCE_LEN]);
        let mut to_server = c.hello();
        loop {
            match s.handle(to_server)? {
                ServerStep::Send(m) => match c.handle(m)? {
                    ClientStep::Send(m) => to_server = m,
                    ClientStep::Established { .. } => unreachable!("established before ready"),
                },
                ServerStep::Accepted(h) => {
                    assert_eq!(h.test_id, 42);
                    return match c.handle(s.ready(5001)?)? {
                        ClientStep::Established { udp_port, session_key } => {
                            // Both ends switch to the same per-line key, or both stay open.
                            assert_eq!(session_key, s.session_key()?);
                            assert_eq!(session_key.is_some(), ckey.is_some());
                            Ok(udp_port)
                        }
                        ClientStep::Send(_) => unreachable!("client sends after ready"),
                    };
                }
            }
        }
    }

    #[test]
    fn session_keys_are_fresh_per_connection_and_never_the_psk() {
        let a = session_key(b"secret", &[1; NONCE_LEN], &[2; NONCE_LEN]).expect("key");
        assert_eq!(
            a,
            session_key(b"secret", &[1; NONCE_LEN], &[2; NONCE_LEN]).expect("key")
        );
        assert_ne!(
            a,
            session_key(b"secret", &[1; NONCE_LEN], &[3; NONCE_LEN]).expect("key")
        );
        assert_ne!(
            a,
            session_key(b"secret", &[2; NONCE_LEN], &[1; NONCE_LEN]).expect("key")
        );
        assert_ne!(a, session_key(b"other", &[1; NONCE_LEN], &[2; NONCE_LEN]).expect("key"));
        assert!(matches!(
            session_key(b"", &[1; NONCE_LEN], &[2; NONCE_LEN]),
            Err(AuthError::EmptyKey)
        ));
    }

    #[test]
    fn matching_keys_and_no_keys_succeed() {
        assert_eq!(run(Some(b"secret"), Some(b"secret")).ok(), Some(5001));
        assert_eq!(run(None, None).ok(), Some(5001));
    }

    #[test]
    fn wrong_or_missing_keys_fail() {
        assert!(matches!(run(Some(b"secret"), Some(b"other")), Err(AuthError::BadMac)));
        assert!(matches!(
            run(None, Some(b"secret")),
            Err(AuthError::PeerNotAuthenticated)
        ));
        // Client insists on a keyed server: an open server gives no proof.
        assert!(matches!(
            run(Some(b"secret"), None),
            Err(AuthError::PeerNotAuthenticated)
        ));
    }

    #[test]
    fn tampered_parameters_fail() {
        // A man in the middle inflates the trial, or asks for interim lines the client did not.
        let tamper: [fn(&mut Hello); 2] = [|h| h.count = 1_000_000_000, |h| h.interval_ms = Some(100)];
        for t in tamper {
            let key = b"secret".to_vec();
            let mut c = ClientHandshake::new(hello(), Some(key.clone()), [1; NONCE_LEN]);
            let mut s = ServerHandshake::new(Some(key), [2; NONCE_LEN]);
            let ControlMsg::Hello(mut h) = c.hello() else {
                unreachable!()
            };
            t(&mut h);
            let ServerStep::Send(ch) = s.handle(ControlMsg::Hello(h)).expect("challenge") else {
                unreachable!()
            };
            let ClientStep::Send(auth) = c.handle(ch).expect("auth") else {
                unreachable!()
            };
            assert!(matches!(s.handle(auth), Err(AuthError::BadMac)));
            // The server stays failed.
            assert!(s.ready(1).is_err());
        }
    }

    #[test]
    fn tcp_parameters_and_rcvbuf_are_bound_by_the_mac() {
        // A UDP hello without the optional fields binds as it did before they existed.
        assert_eq!(hello_binding(&hello()).len(), 29);
        let tcp = Hello {
            tcp: Some(crate::control::TcpHello {
                streams: 2,
                duration_ms: 1000,
                write_size: 131_072,
                cc: Some("bbr".into()),
            }),
            ..hello()
        };
        let key = b"secret".to_vec();
        for tamper in [
            (|h: &mut Hello| h.tcp.as_mut().expect("tcp").streams = 64) as fn(&mut Hello),
            |h| h.tcp.as_mut().expect("tcp").duration_ms = 3_600_000,
            |h| h.tcp.as_mut().expect("tcp").cc = Some("reno".into()),
            |h| h.tcp = None,
        ] {
            let mut c = ClientHandshake::new(tcp.clone(), Some(key.clone()), [1; NONCE_LEN]);
            let mut s = ServerHandshake::new(Some(key.clone()), [2; NONCE_LEN]);
            let ControlMsg::Hello(mut h) = c.hello() else {
                unreachable!()
            };
            tamper(&mut h);
            let ServerStep::Send(ch) = s.handle(ControlMsg::Hello(h)).expect("challenge") else {
                unreachable!()
            };
            let ClientStep::Send(auth) = c.handle(ch).expect("auth") else {
                unreachable!()
            };
            assert!(matches!(s.handle(auth), Err(AuthError::BadMac)));
        }
        let rcv = Hello {
            rcvbuf: Some(65_536),
            ..hello()
        };
        assert_ne!(hello_binding(&rcv), hello_binding(&hello()));
    }

    #[test]
    fn out_of_order_messages_fail() {
        let mut s = ServerHandshake::new(None, [0; NONCE_LEN]);
        let r = s.handle(ControlMsg::Auth(Auth {
            mac: "00".repeat(crate::control::MAC_LEN),
        }));
        assert!(matches!(r, Err(AuthError::Unexpected { got: "auth", .. })));
        let mut c = ClientHandshake::new(hello(), None, [0; NONCE_LEN]);
        let r = c.handle(ControlMsg::Hello(hello()));
        assert!(matches!(r, Err(AuthError::Unexpected { got: "hello", .. })));
    }
}

//! The one key handshake of evlbi's control channels: a mutual HMAC-SHA256 challenge–response
//! on an optional pre-shared key, as two sans-IO state machines ([`ClientHandshake`],
//! [`ServerHandshake`]) over a protocol's own control messages.
//!
//! ```text
//! client                                    server
//!   hello{client_nonce, bound params}  ──▶
//!                                      ◀──  challenge{server_nonce, key_required}
//!   auth{proof = H(k, client label, sn, cn, bound params)
//!        | without a key and WithoutKey::ClearSessionKey: the session key}  ──▶   verify
//!   server proof, one of (ServerProof):
//!     InAccept:               ◀── accept{proof = H(k, server label, cn, sn, accept's parts, hello's)}
//!     FirstAuthenticatedLine: the server's first line MAC'd under the session key
//!   both: session key = H(k, session label, cn, sn); every later line carries a MAC under it
//!   ([`crate::Channel::authenticate`])
//! ```
//!
//! The client proof names the client's role and covers the server's nonce first, the server
//! proof the other way round, so neither can be reflected; fresh nonces on both sides defeat
//! replay; the bound parameters stop a man in the middle from changing what the server is asked
//! to do. The MACs are [`crate::mac`]'s.
//!
//! No socket, no clock and no randomness inside: the caller hands over each received message
//! with the time it arrived, and supplies the nonce (and the random session key of an unkeyed
//! session) from a CSPRNG ([`Fresh::draw`]) and the deadline. A protocol says how its messages
//! carry the handshake ([`HandshakeMessage`]) and which variant of it its wire format fixed
//! ([`Dialect`]); probe sessions and transfer sessions both speak it.

use std::time::{Duration, Instant};

use thiserror::Error;

use crate::mac::{derive, hex32, hex_decode, hex_encode, prove, verify, MacError, NONCE_LEN};

/// The choices a protocol's wire format fixed: its labels and how it uses the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialect {
    /// Bound into the client's proof.
    pub client_label: &'static [u8],
    /// Bound into the server's proof ([`ServerProof::InAccept`]).
    pub server_label: &'static [u8],
    /// Bound into the derived session key.
    pub session_label: &'static [u8],
    /// How the nonces enter the MACs.
    pub nonces: NonceInput,
    /// What happens when the server has no pre-shared key.
    pub without_key: WithoutKey,
    /// How the server proves the key.
    pub server_proof: ServerProof,
}

/// How a nonce enters a MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceInput {
    /// Its 16 bytes.
    Bytes,
    /// Its 32 hex digits as sent.
    Hex,
}

/// A session without a pre-shared key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithoutKey {
    /// No challenge and no session key: the server accepts the hello and no line is
    /// authenticated.
    Open,
    /// The challenge still runs, and the client draws the session key and sends it in `auth`
    /// in the clear: that keeps out whoever cannot read the control connection (blind
    /// injection), not whoever can.
    ClearSessionKey,
}

/// How the server proves that it holds the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerProof {
    /// An explicit MAC in the line that accepts the client ([`Line::Accept`]).
    InAccept,
    /// Its first line MAC'd under the session key, which only a key holder derives; the client
    /// switches to authenticated lines right after `auth`.
    FirstAuthenticatedLine,
}

/// What a received control message is to the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// The client's opening line.
    Hello {
        /// Hex nonce, when the client sent one.
        client_nonce: Option<&'a str>,
        /// What the proofs cover besides the nonces.
        binding: Binding,
    },
    /// The server's challenge.
    Challenge {
        /// Hex nonce.
        server_nonce: &'a str,
        /// Whether the server says it has a key (`None`: the protocol does not say).
        key_required: Option<bool>,
    },
    /// The client's answer.
    Auth {
        /// Hex MAC, when the client has a key.
        proof: Option<&'a str>,
        /// Hex session key in the clear ([`WithoutKey::ClearSessionKey`]).
        session_key: Option<&'a str>,
    },
    /// The server accepts ([`ServerProof::InAccept`]).
    Accept {
        /// Hex MAC, when the server has a key.
        proof: Option<&'a str>,
        /// The accept line's own parameters its proof covers (before the hello's
        /// [`Binding::server_proof`]).
        parts: Vec<Vec<u8>>,
    },
    /// The peer refuses, saying why.
    Refusal(&'a str),
    /// Anything else, by its type name.
    Other(&'static str),
}

/// The parameters of a hello that the key proofs cover, each a length-prefixed MAC part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// Covered by the client's proof (after the nonces).
    pub client_proof: Vec<Vec<u8>>,
    /// Covered by the server's proof (after the accept line's own parts).
    pub server_proof: Vec<Vec<u8>>,
}

/// How a protocol's control messages carry the handshake.
pub trait HandshakeMessage: Sized {
    /// What this message is to the handshake.
    fn line(&self) -> Line<'_>;
    /// The client's opening message with its hex nonce set (`None`: sent without one).
    fn with_client_nonce(self, client_nonce: Option<String>) -> Self;
    /// The server's challenge.
    fn challenge(server_nonce: String, key_required: bool) -> Self;
    /// The client's answer: a hex proof, or a hex session key in the clear.
    fn auth(proof: Option<String>, session_key: Option<String>) -> Self;
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// The peer sent a message that does not fit the handshake's state.
    #[error("unexpected `{got}` control message while {state}")]
    Unexpected {
        /// What we were doing.
        state: &'static str,
        /// The message's type.
        got: &'static str,
    },
    /// A key is configured here but the peer did not take part in authentication.
    #[error("the peer did not authenticate but a pre-shared key is required")]
    PeerNotAuthenticated,
    /// The peer requires a key and none is configured here.
    #[error("the peer requires a pre-shared key; configure it (--key-file)")]
    KeyRequired,
    /// The server says it has no key while this client has one: it could not prove it.
    #[error("the peer has no pre-shared key but this side has one")]
    PeerHasNoKey,
    /// Without a key, the client's `auth` carried no session key.
    #[error("the peer sent no session key")]
    NoSessionKey,
    /// A key proof does not match: a wrong key or a tampered message.
    #[error("the key proof does not match (wrong pre-shared key or a tampered message)")]
    BadMac,
    /// The pre-shared key is empty.
    #[error("the pre-shared key must not be empty")]
    EmptyKey,
    /// The peer refused with an error message.
    #[error("peer refused: {0}")]
    Rejected(String),
    /// The handshake did not finish by its deadline.
    #[error("no handshake within the deadline")]
    Timeout,
}

impl From<MacError> for HandshakeError {
    fn from(e: MacError) -> Self {
        match e {
            MacError::EmptyKey => HandshakeError::EmptyKey,
            MacError::BadMac => HandshakeError::BadMac,
        }
    }
}

/// The random inputs of one handshake, from a CSPRNG.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fresh {
    /// This side's nonce.
    pub nonce: [u8; NONCE_LEN],
    /// The session key a client without a pre-shared key draws
    /// ([`WithoutKey::ClearSessionKey`]); unused otherwise.
    pub session_key: [u8; 32],
}

impl std::fmt::Debug for Fresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a key.
        f.debug_struct("Fresh")
            .field("nonce", &self.nonce)
            .finish_non_exhaustive()
    }
}

impl Fresh {
    /// From the operating system's generator (getrandom).
    pub fn draw() -> Self {
        use rand::RngCore;
        let mut f = Fresh {
            nonce: [0; NONCE_LEN],
            session_key: [0; 32],
        };
        rand::rngs::OsRng.fill_bytes(&mut f.nonce);
        rand::rngs::OsRng.fill_bytes(&mut f.session_key);
        f
    }
}

impl Dialect {
    /// A received hex nonce as it enters the MACs; `None` if it is not 16 bytes of hex.
    fn nonce_input(&self, hex: &str) -> Option<Vec<u8>> {
        let bytes = hex_decode(hex).filter(|b| b.len() == NONCE_LEN)?;
        Some(match self.nonces {
            NonceInput::Bytes => bytes,
            NonceInput::Hex => hex.as_bytes().to_vec(),
        })
    }

    /// Our own nonce as it enters the MACs.
    fn own_nonce(&self, nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
        match self.nonces {
            NonceInput::Bytes => nonce.to_vec(),
            NonceInput::Hex => hex_encode(nonce).into_bytes(),
        }
    }

    fn client_parts<'a>(&self, sn: &'a [u8], cn: &'a [u8], binding: &'a Binding) -> Vec<&'a [u8]> {
        let mut p = vec![self.client_label, sn, cn];
        p.extend(binding.client_proof.iter().map(Vec::as_slice));
        p
    }

    fn server_parts<'a>(
        &self,
        cn: &'a [u8],
        sn: &'a [u8],
        accept: &'a [Vec<u8>],
        binding: &'a Binding,
    ) -> Vec<&'a [u8]> {
        let mut p = vec![self.server_label, cn, sn];
        p.extend(accept.iter().map(Vec::as_slice));
        p.extend(binding.server_proof.iter().map(Vec::as_slice));
        p
    }

    /// The key both ends derive from the pre-shared key and the two nonces: fresh per
    /// connection, never on the wire.
    pub fn session_key(&self, psk: &[u8], cn: &[u8], sn: &[u8]) -> Result<[u8; 32], HandshakeError> {
        Ok(derive(psk, &[self.session_label, cn, sn])?)
    }
}

/// The deadline of a handshake.
#[derive(Debug, Clone, Copy)]
struct Clock {
    deadline: Instant,
}

impl Clock {
    fn check(&self, now: Instant) -> Result<(), HandshakeError> {
        if now >= self.deadline {
            return Err(HandshakeError::Timeout);
        }
        Ok(())
    }

    fn remaining(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }
}

/// What the server does after [`ServerHandshake::handle`].
#[derive(Debug, PartialEq)]
pub enum ServerStep<M> {
    /// Send this message and wait for the next one.
    Send(M),
    /// The client is authenticated (or no key is configured and the dialect lets anyone in).
    /// With [`ServerProof::InAccept`] send the accepting line next, with
    /// [`ServerHandshake::accept_proof`]; then authenticate the channel under `session_key`
    /// when there is one.
    Accepted {
        /// The client's opening message.
        hello: M,
        /// The key of every later line, `None` for an open session.
        session_key: Option<[u8; 32]>,
    },
}

/// Where the server is.
#[derive(Debug)]
enum ServerState<M> {
    AwaitHello,
    AwaitAuth { hello: M, cn: Vec<u8>, binding: Binding },
    Accepted { cn: Option<Vec<u8>>, binding: Binding },
    Failed,
}

/// The server's end of the handshake.
#[derive(Debug)]
pub struct ServerHandshake<M> {
    dialect: Dialect,
    key: Option<Vec<u8>>,
    nonce: [u8; NONCE_LEN],
    clock: Clock,
    state: ServerState<M>,
}

impl<M: HandshakeMessage> ServerHandshake<M> {
    /// `key`: the pre-shared key, `None` to accept anyone (as the dialect allows); `fresh`: this
    /// handshake's random nonce; `deadline`: when an unfinished handshake fails.
    pub fn new(dialect: Dialect, key: Option<Vec<u8>>, fresh: Fresh, deadline: Instant) -> Self {
        ServerHandshake {
            dialect,
            key,
            nonce: fresh.nonce,
            clock: Clock { deadline },
            state: ServerState::AwaitHello,
        }
    }

    /// How long the next message may take to arrive.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.clock.remaining(now)
    }

    /// Feed one received message, received at `now`. Any error leaves the handshake failed.
    pub fn handle(&mut self, msg: M, now: Instant) -> Result<ServerStep<M>, HandshakeError> {
        let state = std::mem::replace(&mut self.state, ServerState::Failed);
        let r = self.clock.check(now).and_then(|()| self.step(state, msg));
        r.map(|(next, step)| {
            self.state = next;
            step
        })
    }

    fn step(&self, state: ServerState<M>, msg: M) -> Result<(ServerState<M>, ServerStep<M>), HandshakeError> {
        let line = msg.line();
        match (state, line) {
            (ServerState::AwaitHello, Line::Hello { client_nonce, binding }) => {
                let cn = client_nonce.map(|n| self.dialect.nonce_input(n).ok_or(HandshakeError::BadMac));
                match (&self.key, cn) {
                    (None, cn) if self.dialect.without_key == WithoutKey::Open => {
                        let cn = cn.and_then(Result::ok);
                        Ok((ServerState::Accepted { cn, binding }, accepted(msg, None)))
                    }
                    (_, None) => Err(HandshakeError::PeerNotAuthenticated),
                    (_, Some(cn)) => {
                        let cn = cn?;
                        let challenge = M::challenge(hex_encode(&self.nonce), self.key.is_some());
                        let next = ServerState::AwaitAuth {
                            hello: msg,
                            cn,
                            binding,
                        };
                        Ok((next, ServerStep::Send(challenge)))
                    }
                }
            }
            (ServerState::AwaitAuth { hello, cn, binding }, Line::Auth { proof, session_key }) => {
                let sk = match &self.key {
                    Some(k) => {
                        let proof = proof.ok_or(HandshakeError::PeerNotAuthenticated)?;
                        let sn = self.dialect.own_nonce(&self.nonce);
                        verify(k, &self.dialect.client_parts(&sn, &cn, &binding), proof)?;
                        self.dialect.session_key(k, &cn, &sn)?
                    }
                    None => session_key.and_then(hex32).ok_or(HandshakeError::NoSessionKey)?,
                };
                let next = ServerState::Accepted { cn: Some(cn), binding };
                Ok((next, accepted(hello, Some(sk))))
            }
            (_, Line::Refusal(why)) => Err(HandshakeError::Rejected(why.to_string())),
            (s, line) => Err(HandshakeError::Unexpected {
                state: s.name(),
                got: line.name(),
            }),
        }
    }

    /// The proof for the accepting line ([`ServerProof::InAccept`]), over its own `parts`:
    /// `None` without a key. An error before the client is accepted.
    pub fn accept_proof(&self, parts: &[Vec<u8>]) -> Result<Option<String>, HandshakeError> {
        let ServerState::Accepted { cn, binding } = &self.state else {
            return Err(HandshakeError::Unexpected {
                state: self.state.name(),
                got: "accept",
            });
        };
        match (&self.key, cn) {
            (Some(k), Some(cn)) => {
                let sn = self.dialect.own_nonce(&self.nonce);
                Ok(Some(prove(k, &self.dialect.server_parts(cn, &sn, parts, binding))?))
            }
            (Some(_), None) => Err(HandshakeError::PeerNotAuthenticated),
            (None, _) => Ok(None),
        }
    }
}

fn accepted<M>(hello: M, session_key: Option<[u8; 32]>) -> ServerStep<M> {
    ServerStep::Accepted { hello, session_key }
}

impl<M> ServerState<M> {
    fn name(&self) -> &'static str {
        match self {
            ServerState::AwaitHello => "awaiting hello",
            ServerState::AwaitAuth { .. } => "awaiting auth",
            ServerState::Accepted { .. } => "accepted",
            ServerState::Failed => "failed",
        }
    }
}

impl Line<'_> {
    fn name(&self) -> &'static str {
        match self {
            Line::Hello { .. } => "hello",
            Line::Challenge { .. } => "challenge",
            Line::Auth { .. } => "auth",
            Line::Accept { .. } => "accept",
            Line::Refusal(_) => "error",
            Line::Other(name) => name,
        }
    }
}

/// What the client does after [`ClientHandshake::handle`].
#[derive(Debug, PartialEq)]
pub enum ClientStep<M> {
    /// Send this message and wait for the next one.
    Send(M),
    /// Send this last unauthenticated line, then authenticate every line under `session_key`
    /// ([`ServerProof::FirstAuthenticatedLine`]: the server's first line proves its key).
    SendThenAuthenticate {
        /// The `auth` line.
        line: M,
        /// The key of every later line.
        session_key: [u8; 32],
    },
    /// The server accepted with this line, its key proved when there is one
    /// ([`ServerProof::InAccept`]); authenticate every later line under `session_key` if any.
    Accepted {
        /// The server's accepting line.
        accept: M,
        /// The key of every later line, `None` for an open session.
        session_key: Option<[u8; 32]>,
    },
}

/// The client's end of the handshake.
#[derive(Debug)]
pub struct ClientHandshake {
    dialect: Dialect,
    key: Option<Vec<u8>>,
    fresh: Fresh,
    binding: Binding,
    clock: Clock,
    /// The server's nonce as it enters the MACs, once challenged.
    server_nonce: Option<Vec<u8>>,
    failed: bool,
    done: bool,
}

impl ClientHandshake {
    /// Start: returns the handshake and `hello` with its nonce, the first line to send. `key`:
    /// the pre-shared key, `None` for none; `fresh`: this handshake's random inputs;
    /// `deadline`: when an unfinished handshake fails.
    pub fn start<M: HandshakeMessage>(
        dialect: Dialect,
        hello: M,
        key: Option<Vec<u8>>,
        fresh: Fresh,
        deadline: Instant,
    ) -> (Self, M) {
        // An open dialect sends no nonce without a key, so the server knows not to challenge.
        let send_nonce = key.is_some() || dialect.without_key == WithoutKey::ClearSessionKey;
        let hello = hello.with_client_nonce(send_nonce.then(|| hex_encode(&fresh.nonce)));
        let binding = match hello.line() {
            Line::Hello { binding, .. } => binding,
            _ => Binding::default(),
        };
        let hs = ClientHandshake {
            dialect,
            key,
            fresh,
            binding,
            clock: Clock { deadline },
            server_nonce: None,
            failed: false,
            done: false,
        };
        (hs, hello)
    }

    /// How long the next message may take to arrive.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.clock.remaining(now)
    }

    /// Feed one received message, received at `now`. Any error leaves the handshake failed.
    pub fn handle<M: HandshakeMessage>(&mut self, msg: M, now: Instant) -> Result<ClientStep<M>, HandshakeError> {
        let state = if self.failed {
            Some("failed")
        } else if self.done {
            Some("established")
        } else {
            None
        };
        if let Some(state) = state {
            return Err(HandshakeError::Unexpected {
                state,
                got: msg.line().name(),
            });
        }
        let r = self.clock.check(now).and_then(|()| self.step(msg));
        self.failed = r.is_err();
        self.done = matches!(
            r,
            Ok(ClientStep::SendThenAuthenticate { .. } | ClientStep::Accepted { .. })
        );
        r
    }

    fn step<M: HandshakeMessage>(&mut self, msg: M) -> Result<ClientStep<M>, HandshakeError> {
        let cn = self.dialect.own_nonce(&self.fresh.nonce);
        match msg.line() {
            Line::Challenge {
                server_nonce,
                key_required,
            } if self.server_nonce.is_none() => {
                let sn = self.dialect.nonce_input(server_nonce).ok_or(HandshakeError::BadMac)?;
                let Some(key) = self.key.as_deref() else {
                    return self.challenged_without_key(key_required);
                };
                if key_required == Some(false) {
                    return Err(HandshakeError::PeerHasNoKey);
                }
                let proof = prove(key, &self.dialect.client_parts(&sn, &cn, &self.binding))?;
                let line = M::auth(Some(proof), None);
                match self.dialect.server_proof {
                    ServerProof::InAccept => {
                        self.server_nonce = Some(sn);
                        Ok(ClientStep::Send(line))
                    }
                    ServerProof::FirstAuthenticatedLine => Ok(ClientStep::SendThenAuthenticate {
                        line,
                        session_key: self.dialect.session_key(key, &cn, &sn)?,
                    }),
                }
            }
            Line::Accept { proof, parts } if self.dialect.server_proof == ServerProof::InAccept => {
                let session_key = match self.key.as_deref() {
                    Some(key) => {
                        // With a key, refuse a server that skipped the challenge or the proof.
                        let sn = self
                            .server_nonce
                            .as_deref()
                            .ok_or(HandshakeError::PeerNotAuthenticated)?;
                        let proof = proof.ok_or(HandshakeError::PeerNotAuthenticated)?;
                        verify(key, &self.dialect.server_parts(&cn, sn, &parts, &self.binding), proof)?;
                        Some(self.dialect.session_key(key, &cn, sn)?)
                    }
                    None => None,
                };
                Ok(ClientStep::Accepted {
                    accept: msg,
                    session_key,
                })
            }
            Line::Refusal(why) => Err(HandshakeError::Rejected(why.to_string())),
            line => Err(HandshakeError::Unexpected {
                state: "handshaking",
                got: line.name(),
            }),
        }
    }

    /// Challenged with no key here: an open dialect cannot go on; one with a clear session key
    /// sends ours unless the server says it wants a key.
    fn challenged_without_key<M: HandshakeMessage>(
        &mut self,
        key_required: Option<bool>,
    ) -> Result<ClientStep<M>, HandshakeError> {
        if self.dialect.without_key == WithoutKey::Open || key_required != Some(false) {
            return Err(HandshakeError::KeyRequired);
        }
        let session_key = self.fresh.session_key;
        Ok(ClientStep::SendThenAuthenticate {
            line: M::auth(None, Some(hex_encode(&session_key))),
            session_key,
        })
    }
}

#[cfg(test)]
mod tests;

//! The sender's first flight (protocol 6): everything the receiver needs to start a session in
//! one line, so that its data may leave with the TCP connect and be taken once this line proves
//! it (sans-IO: the clock comes in as an argument).
//!
//! `hello` carries a random client nonce, the sender's wall clock (ms since the Unix epoch), the
//! session id the sender proposes and the UDP port its data comes from, and either a key proof
//! (HMAC-SHA256 under the pre-shared key over a label and all of these) or, without a key, the
//! session key in the clear. The session key of a keyed session is derived from the pre-shared
//! key and the same fields; every later line both ways carries an HMAC under it, and the
//! receiver's first line (`welcome`) proves the key back.
//!
//! Why the sender may choose the session id and why the data port is known before `welcome`:
//! the data key ([`crate::control::data_key`]) is derived from the session key, which depends on
//! the sender's fresh nonce, so two sessions never share a data key whatever their ids; the
//! receiver's data port is its control port number (UDP and TCP ports are separate spaces), where
//! it listens from the moment it binds ([`crate::early`]).
//!
//! A keyed first flight cannot be replayed: the receiver accepts it only within
//! [`CLOCK_WINDOW`] of its own clock and only once — it keeps every accepted nonce until its
//! timestamp leaves the window ([`ReplayGuard`]); a flight outside the window is refused whatever
//! its nonce. A refused flight writes nothing: the receiver opens no file and feeds no datagram
//! to the protocol before the proof checks. (Without a pre-shared key there is nothing to
//! protect: anyone may start a session.)

use std::collections::HashMap;
use std::time::Duration;

use ctlchan::mac::{derive, hex32, hex_encode, prove, verify, NONCE_LEN};
use serde::Serialize;
use thiserror::Error;

use crate::control::{Msg, PROTOCOL_VERSION};

/// How far the sender's clock may be from the receiver's; also how long a nonce is remembered
/// (a flight older than this is refused anyway).
pub const CLOCK_WINDOW: Duration = Duration::from_secs(30);
/// Most nonces remembered: first flights accepted within one [`CLOCK_WINDOW`] beyond this are
/// refused (only flights with a valid proof count, so only key holders can fill it).
pub const MAX_REMEMBERED: usize = 65_536;

const CLIENT_LABEL: &[u8] = b"evlbi-transfer-v6 sender";
const SESSION_LABEL: &[u8] = b"evlbi-transfer-v6 session key";

/// What both ends take from an accepted first flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// Key of the control channel's MACs and of the data key.
    pub session_key: [u8; 32],
    /// The data stream's session id.
    pub session_id: u64,
    /// The UDP port the sender's data comes from.
    pub udp_port: u16,
}

/// Why a first flight was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FirstFlightError {
    /// Not a `hello`.
    #[error("the first line must be hello, not {0}")]
    NotHello(&'static str),
    /// The receiver has a key and the sender proved none.
    #[error("this receiver requires a pre-shared key (--key)")]
    KeyRequired,
    /// The sender proves a key this receiver does not have.
    #[error("the sender proves a pre-shared key; this receiver has none")]
    NoKeyHere,
    /// Neither a proof nor a session key.
    #[error("hello carries neither a key proof nor a session key")]
    NoKeyMaterial,
    /// The proof does not check.
    #[error("the key proof does not check (a wrong key?)")]
    BadProof,
    /// The timestamp is outside the window.
    #[error("the first flight is stamped {skew_s:+.1} s from this receiver's clock, outside ±{window_s} s (clocks apart, or a replay)")]
    Stale {
        /// Sender's stamp minus our clock, s.
        skew_s: f64,
        /// [`CLOCK_WINDOW`], s.
        window_s: u64,
    },
    /// The nonce was accepted before.
    #[error("a replayed first flight (its nonce was already used)")]
    Replayed,
    /// The nonce store is full.
    #[error("too many sessions started within {0} s")]
    Busy(u64),
}

/// Counts of first flights, by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GuardStats {
    /// Accepted.
    pub accepted: u64,
    /// Refused: the proof did not check, or key material was missing or unexpected.
    pub bad_key: u64,
    /// Refused: outside the clock window.
    pub stale: u64,
    /// Refused: a nonce seen before.
    pub replayed: u64,
    /// Refused: the nonce store was full.
    pub busy: u64,
}

/// The sender's side: the `hello` and the session key (`nonce` random, `time_ms` the wall clock).
pub fn client_hello(
    key: Option<&[u8]>,
    nonce: [u8; NONCE_LEN],
    time_ms: u64,
    session_id: u64,
    udp_port: u16,
) -> (Msg, [u8; 32]) {
    let client_nonce = hex_encode(&nonce);
    let (proof, session_key, sk) = match key {
        Some(k) => {
            let parts = fields(&client_nonce, time_ms, session_id, udp_port);
            let proof = prove(k, &with_label(CLIENT_LABEL, &parts)).unwrap_or_default();
            let sk = derive(k, &with_label(SESSION_LABEL, &parts)).unwrap_or([0; 32]);
            (Some(proof), None, sk)
        }
        None => {
            let sk: [u8; 32] = rand::random();
            (None, Some(hex_encode(&sk)), sk)
        }
    };
    let hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        client_nonce,
        time_ms,
        session_id,
        udp_port,
        proof,
        session_key,
    };
    (hello, sk)
}

fn fields(nonce: &str, time_ms: u64, session_id: u64, udp_port: u16) -> [Vec<u8>; 4] {
    [
        nonce.as_bytes().to_vec(),
        time_ms.to_be_bytes().to_vec(),
        session_id.to_be_bytes().to_vec(),
        udp_port.to_be_bytes().to_vec(),
    ]
}

fn with_label<'a>(label: &'a [u8], parts: &'a [Vec<u8>; 4]) -> [&'a [u8]; 5] {
    [label, &parts[0], &parts[1], &parts[2], &parts[3]]
}

/// The receiver's side: checks first flights against its key and the nonces it has seen.
#[derive(Debug, Default)]
pub struct ReplayGuard {
    /// Accepted nonces and the time (ms) after which they may be forgotten.
    seen: HashMap<String, u64>,
    /// Outcomes so far.
    pub stats: GuardStats,
}

impl ReplayGuard {
    /// Check `hello` at wall-clock `now_ms` against `key` (the receiver's pre-shared key, if any).
    pub fn check(&mut self, key: Option<&[u8]>, hello: &Msg, now_ms: u64) -> Result<Accepted, FirstFlightError> {
        let r = self.check_inner(key, hello, now_ms);
        let c = match &r {
            Ok(_) => &mut self.stats.accepted,
            Err(FirstFlightError::Stale { .. }) => &mut self.stats.stale,
            Err(FirstFlightError::Replayed) => &mut self.stats.replayed,
            Err(FirstFlightError::Busy(_)) => &mut self.stats.busy,
            Err(_) => &mut self.stats.bad_key,
        };
        *c += 1;
        r
    }

    fn check_inner(&mut self, key: Option<&[u8]>, hello: &Msg, now_ms: u64) -> Result<Accepted, FirstFlightError> {
        let Msg::Hello {
            client_nonce,
            time_ms,
            session_id,
            udp_port,
            proof,
            session_key,
            ..
        } = hello
        else {
            return Err(FirstFlightError::NotHello(hello.name()));
        };
        let accepted = |session_key| Accepted {
            session_key,
            session_id: *session_id,
            udp_port: *udp_port,
        };
        let (k, proof) = match (key, proof, session_key) {
            (None, None, Some(sk)) => return hex32(sk).map(accepted).ok_or(FirstFlightError::NoKeyMaterial),
            (None, Some(_), _) => return Err(FirstFlightError::NoKeyHere),
            (None, None, None) => return Err(FirstFlightError::NoKeyMaterial),
            (Some(_), None, _) => return Err(FirstFlightError::KeyRequired),
            (Some(k), Some(p), _) => (k, p),
        };
        let parts = fields(client_nonce, *time_ms, *session_id, *udp_port);
        // The proof first: an unauthenticated line learns nothing about the clock or the nonces.
        verify(k, &with_label(CLIENT_LABEL, &parts), proof).map_err(|_| FirstFlightError::BadProof)?;
        let window = CLOCK_WINDOW.as_millis() as u64;
        self.seen.retain(|_, &mut until| until > now_ms);
        if time_ms.abs_diff(now_ms) > window {
            return Err(FirstFlightError::Stale {
                skew_s: (*time_ms as f64 - now_ms as f64) / 1e3,
                window_s: CLOCK_WINDOW.as_secs(),
            });
        }
        if self.seen.contains_key(client_nonce) {
            return Err(FirstFlightError::Replayed);
        }
        if self.seen.len() >= MAX_REMEMBERED {
            return Err(FirstFlightError::Busy(CLOCK_WINDOW.as_secs()));
        }
        // Past this the stamp is outside the window: the flight is refused without the nonce.
        self.seen.insert(client_nonce.clone(), time_ms.saturating_add(window));
        let sk = derive(k, &with_label(SESSION_LABEL, &parts)).map_err(|_| FirstFlightError::BadProof)?;
        Ok(accepted(sk))
    }

    /// Nonces remembered now.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

/// The wall clock, ms since the Unix epoch (0 if it is before it).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"sixteen-byte-key-for-tests-0123";
    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn a_keyed_flight_is_accepted_once_and_both_ends_hold_the_same_key() {
        let (hello, sk) = client_hello(Some(KEY), [7; 16], NOW, 99, 4000);
        let mut g = ReplayGuard::default();
        let a = g.check(Some(KEY), &hello, NOW + 1500).unwrap();
        assert_eq!((a.session_key, a.session_id, a.udp_port), (sk, 99, 4000));
        // The same flight again, within the window: refused and counted.
        assert_eq!(g.check(Some(KEY), &hello, NOW + 2000), Err(FirstFlightError::Replayed));
        // After the window the nonce is forgotten but the stamp is too old.
        assert!(matches!(
            g.check(Some(KEY), &hello, NOW + 31_000),
            Err(FirstFlightError::Stale { .. })
        ));
        assert_eq!(g.remembered(), 0);
        assert_eq!((g.stats.accepted, g.stats.replayed, g.stats.stale), (1, 1, 1));
    }

    #[test]
    fn wrong_key_altered_fields_and_missing_keys_are_refused() {
        let mut g = ReplayGuard::default();
        let (hello, _) = client_hello(Some(b"another key"), [1; 16], NOW, 1, 1);
        assert_eq!(g.check(Some(KEY), &hello, NOW), Err(FirstFlightError::BadProof));
        let (
            Msg::Hello {
                client_nonce, proof, ..
            },
            _,
        ) = client_hello(Some(KEY), [2; 16], NOW, 1, 1)
        else {
            unreachable!()
        };
        // The proof of session 1 does not carry session 2 (nor another port or stamp).
        let altered = Msg::Hello {
            version: PROTOCOL_VERSION,
            client_nonce,
            time_ms: NOW,
            session_id: 2,
            udp_port: 1,
            proof,
            session_key: None,
        };
        assert_eq!(g.check(Some(KEY), &altered, NOW), Err(FirstFlightError::BadProof));
        let (clear, _) = client_hello(None, [3; 16], NOW, 1, 1);
        assert_eq!(g.check(Some(KEY), &clear, NOW), Err(FirstFlightError::KeyRequired));
        let (keyed, _) = client_hello(Some(KEY), [4; 16], NOW, 1, 1);
        assert_eq!(g.check(None, &keyed, NOW), Err(FirstFlightError::NoKeyHere));
        assert_eq!(g.stats.bad_key, 4);
        assert_eq!(g.remembered(), 0, "refused flights leave no nonce");
    }
}

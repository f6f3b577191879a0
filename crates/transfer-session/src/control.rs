//! Control messages of a transfer session (JSON lines over TCP, [`ctlchan`]).
//!
//! ```text
//! sender (evlbi send)                         receiver (evlbi recv)
//!   hello{client_nonce}                 ──▶
//!                                       ◀──   challenge{server_nonce, key_required}
//!   auth{proof}                         ──▶   (proof checked when the receiver has a key)
//!                                       ◀──   welcome{proof, session_key (only without a key)}
//!   ── from here on every line carries an HMAC under the session key (ctlchan::Channel::authenticate) ──
//!   per directory: mkdir{path}          ──▶   ◀── done{path}
//!   per file: offer{path, size, …}      ──▶
//!                                       ◀──   accept{udp_port, session_id, have} | refused{…}
//!   … DATA/REPORT/FIN on UDP for the blocks not in `have` …
//!   hashes{first_block, [BLAKE3 per block]}… file_hash{BLAKE3 of the file}  ──▶
//!                                       ◀──   verified{path, blake3} | resend{blocks} (then a new accept)
//!   bye                                 ──▶
//! ```
//!
//! Both proofs are HMAC-SHA256 over a role label and both nonces ([`ctlchan::mac`]); the
//! receiver's proof convinces the sender it is not uploading to an impostor.
//!
//! What is authenticated: with a pre-shared key, both ends derive a session key from it and both
//! nonces ([`session_key`]); every control line after `welcome` carries an HMAC under it (a proxy
//! that rewrites an offered path, a verdict or a hash breaks the channel), the verdict names the
//! path it is for, and every UDP datagram of a round carries a BLAKE3 tag under a key derived
//! from it and the round's session id ([`data_key`]), so a forged or altered datagram is dropped
//! before it moves any state. Without a pre-shared key the receiver draws a random session key
//! and sends it in `welcome`: that keeps out anyone who cannot read the control connection
//! (blind injection of DATA or REPORTs), but someone on the path can read the key — only a
//! pre-shared key authenticates the peer. Nothing is encrypted.

use ctlchan::mac::NONCE_LEN;
use serde::{Deserialize, Serialize};

/// Version of this protocol.
pub const PROTOCOL_VERSION: u8 = 2;
/// Longest control line accepted.
pub const MAX_LINE: usize = 2 << 20;
/// Longest path in an offer, bytes.
pub const MAX_PATH: usize = 4096;
/// Largest file, bytes (1 PiB).
pub const MAX_FILE_SIZE: u64 = 1 << 50;
/// Smallest and largest chunk (one DATA datagram's payload).
pub const CHUNK_RANGE: std::ops::RangeInclusive<u32> = 512..=transfer::wire::MAX_PAYLOAD as u32;
/// Largest verification block.
pub const MAX_BLOCK: u64 = 1 << 30;
/// Most blocks per file (bounds the receiver's memory for hashes: 32 MiB).
pub const MAX_BLOCKS: u64 = 1 << 20;
/// Most block hashes per `hashes` message (about 1.1 MB of JSON).
pub const HASHES_PER_MESSAGE: usize = 16_384;
/// Most block ranges in `accept` or `resend`.
pub const MAX_RANGES: usize = 65_536;
/// Longest free-text message.
pub const MAX_TEXT: usize = 1024;

/// What the sender offers for one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offer {
    /// Destination path relative to the receiver's root, `/`-separated.
    pub path: String,
    /// File size, bytes.
    pub size: u64,
    /// Source modification time, ns since the Unix epoch: with the size, what tells a resumable
    /// `.part` of the same file from one of an older version.
    pub mtime_ns: u64,
    /// Payload bytes per DATA datagram.
    pub chunk_size: u32,
    /// Bytes per verification/resume block (a multiple of the chunk size).
    pub block_size: u64,
}

impl Offer {
    /// Blocks in the file.
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(self.block_size.max(1))
    }
}

/// Control message, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Msg {
    /// Sender → receiver, first.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u8,
        /// 16 random bytes, hex.
        client_nonce: String,
    },
    /// Receiver → sender.
    Challenge {
        /// 16 random bytes, hex.
        server_nonce: String,
        /// The receiver has a pre-shared key and will refuse a sender without one.
        key_required: bool,
    },
    /// Sender → receiver: proof of the key (absent without a key).
    Auth {
        /// HMAC, hex.
        proof: Option<String>,
    },
    /// Receiver → sender: accepted; proof of the key when it has one.
    Welcome {
        /// HMAC, hex.
        proof: Option<String>,
        /// Without a pre-shared key: the session key (32 bytes, hex) drawn by the receiver.
        /// With one it is derived on both sides and never sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_key: Option<String>,
    },
    /// Sender → receiver: create this directory (for empty directories).
    Mkdir {
        /// Relative path.
        path: String,
    },
    /// Receiver → sender: the directory exists.
    Done {
        /// Relative path.
        path: String,
    },
    /// Sender → receiver: a file to transfer.
    Offer(Offer),
    /// Receiver → sender: send the blocks not in `have` to this UDP port with this session id.
    Accept {
        /// UDP port for the data.
        udp_port: u16,
        /// Session id for this round's datagrams.
        session_id: u64,
        /// Block ranges `[first, end)` the receiver already holds from an earlier attempt.
        have: Vec<[u64; 2]>,
    },
    /// Receiver → sender: this file will not be received (the session goes on).
    Refused {
        /// Why.
        message: String,
    },
    /// Sender → receiver: BLAKE3 of blocks `first_block..first_block + hashes.len()`.
    Hashes {
        /// Index of the first block.
        first_block: u64,
        /// Hex BLAKE3 per block.
        hashes: Vec<String>,
    },
    /// Sender → receiver: BLAKE3 of the whole file; all block hashes have been sent.
    FileHash {
        /// Hex BLAKE3.
        blake3: String,
    },
    /// Receiver → sender: every block and the whole file match; the file has its final name.
    Verified {
        /// The path below the root the file now has (the sender checks it is the one offered).
        path: String,
        /// Hex BLAKE3 the receiver computed.
        blake3: String,
    },
    /// Receiver → sender: these blocks did not match; a new `accept` follows for them.
    Resend {
        /// Block ranges `[first, end)`.
        blocks: Vec<[u64; 2]>,
    },
    /// Sender → receiver: no more files.
    Bye,
    /// Either way: fatal, the connection closes.
    Error {
        /// Why.
        message: String,
    },
}

fn hex_len(field: &str, s: &str, bytes: usize) -> Result<(), String> {
    match ctlchan::mac::hex_decode(s) {
        Some(v) if v.len() == bytes => Ok(()),
        _ => Err(format!("{field} must be {} hex digits", 2 * bytes)),
    }
}

fn text(field: &str, s: &str, max: usize) -> Result<(), String> {
    if s.len() > max {
        return Err(format!("{field} longer than {max} bytes"));
    }
    Ok(())
}

fn ranges(field: &str, r: &[[u64; 2]], limit: u64) -> Result<(), String> {
    if r.len() > MAX_RANGES {
        return Err(format!("{field}: more than {MAX_RANGES} ranges"));
    }
    let mut prev_end = 0;
    for (i, &[a, b]) in r.iter().enumerate() {
        if a >= b || b > limit || (i > 0 && a < prev_end) {
            return Err(format!("{field}: range [{a}, {b}) empty, unordered or beyond {limit}"));
        }
        prev_end = b;
    }
    Ok(())
}

impl ctlchan::Message for Msg {
    fn validate(&self) -> Result<(), String> {
        match self {
            Msg::Hello { version, client_nonce } => {
                if *version != PROTOCOL_VERSION {
                    return Err(format!(
                        "protocol version {version}, this side speaks {PROTOCOL_VERSION}"
                    ));
                }
                hex_len("client_nonce", client_nonce, NONCE_LEN)
            }
            Msg::Challenge { server_nonce, .. } => hex_len("server_nonce", server_nonce, NONCE_LEN),
            Msg::Auth { proof } => match proof {
                Some(p) => hex_len("proof", p, 32),
                None => Ok(()),
            },
            Msg::Welcome { proof, session_key } => {
                if let Some(p) = proof {
                    hex_len("proof", p, 32)?;
                }
                match session_key {
                    Some(k) => hex_len("session_key", k, 32),
                    None => Ok(()),
                }
            }
            Msg::Mkdir { path } | Msg::Done { path } => text("path", path, MAX_PATH),
            Msg::Offer(o) => {
                text("path", &o.path, MAX_PATH)?;
                if o.size > MAX_FILE_SIZE {
                    return Err(format!("size {} above {MAX_FILE_SIZE}", o.size));
                }
                if !CHUNK_RANGE.contains(&o.chunk_size) {
                    return Err(format!("chunk_size {} outside {CHUNK_RANGE:?}", o.chunk_size));
                }
                if o.block_size == 0 || o.block_size > MAX_BLOCK || o.block_size % u64::from(o.chunk_size) != 0 {
                    return Err(format!(
                        "block_size {} must be a multiple of the chunk size {} and at most {MAX_BLOCK}",
                        o.block_size, o.chunk_size
                    ));
                }
                if o.blocks() > MAX_BLOCKS {
                    return Err(format!(
                        "{} blocks, at most {MAX_BLOCKS}: use a larger block size",
                        o.blocks()
                    ));
                }
                Ok(())
            }
            Msg::Accept { have, .. } => ranges("have", have, MAX_BLOCKS),
            Msg::Resend { blocks } => ranges("blocks", blocks, MAX_BLOCKS),
            Msg::Hashes { first_block, hashes } => {
                if hashes.len() > HASHES_PER_MESSAGE || first_block.saturating_add(hashes.len() as u64) > MAX_BLOCKS {
                    return Err(format!(
                        "hashes: at most {HASHES_PER_MESSAGE} per message, below block {MAX_BLOCKS}"
                    ));
                }
                hashes.iter().try_for_each(|h| hex_len("hash", h, 32))
            }
            Msg::FileHash { blake3 } => hex_len("blake3", blake3, 32),
            Msg::Verified { path, blake3 } => {
                text("path", path, MAX_PATH)?;
                hex_len("blake3", blake3, 32)
            }
            Msg::Refused { message } | Msg::Error { message } => text("message", message, MAX_TEXT),
            Msg::Bye => Ok(()),
        }
    }
}

/// Cut `text` to at most [`MAX_TEXT`] bytes on a character boundary (error texts can be long).
pub fn clip(text: &str) -> String {
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Role labels bound into the key proofs.
pub(crate) const CLIENT_LABEL: &[u8] = b"evlbi-transfer-v1 sender";
pub(crate) const SERVER_LABEL: &[u8] = b"evlbi-transfer-v1 receiver";
const SESSION_LABEL: &[u8] = b"evlbi-transfer-v2 session key";
const DATA_LABEL: &[u8] = b"evlbi-transfer-v2 datagram key";

/// The session key both ends derive from a pre-shared key and the two nonces of the handshake:
/// fresh per connection, never on the wire.
pub fn session_key(psk: &[u8], client_nonce: &str, server_nonce: &str) -> Result<[u8; 32], ctlchan::mac::MacError> {
    ctlchan::mac::derive(psk, &[SESSION_LABEL, client_nonce.as_bytes(), server_nonce.as_bytes()])
}

/// The datagram key of one round: from the session key and the round's session id, so each
/// round's datagrams are useless in any other.
pub fn data_key(session_key: &[u8; 32], session_id: u64) -> transfer::DataKey {
    // HMAC with a 32-byte key cannot fail; the fallback is never taken.
    transfer::DataKey(
        ctlchan::mac::derive(session_key, &[DATA_LABEL, &session_id.to_be_bytes()]).unwrap_or(*session_key),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctlchan::{decode_line, encode_line};

    fn offer() -> Offer {
        Offer {
            path: "scan/ef.vdif".into(),
            size: 10_000_000,
            mtime_ns: 1,
            chunk_size: 8192,
            block_size: 8192 * 128,
        }
    }

    #[test]
    fn offer_json_is_pinned_and_roundtrips() {
        let line = encode_line(&Msg::Offer(offer()), MAX_LINE).unwrap();
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"type\":\"offer\",\"path\":\"scan/ef.vdif\",\"size\":10000000,\"mtime_ns\":1,\"chunk_size\":8192,\"block_size\":1048576}\n"
        );
        let back: Msg = decode_line(&line[..line.len() - 1]).unwrap();
        assert_eq!(back, Msg::Offer(offer()));
    }

    #[test]
    fn out_of_range_offers_refused() {
        for bad in [
            Offer {
                size: MAX_FILE_SIZE + 1,
                ..offer()
            },
            Offer {
                chunk_size: 100,
                ..offer()
            },
            Offer {
                block_size: 8191,
                ..offer()
            },
            Offer {
                block_size: 0,
                ..offer()
            },
            Offer {
                size: MAX_FILE_SIZE,
                block_size: 8192,
                ..offer()
            },
            Offer {
                path: "a".repeat(MAX_PATH + 1),
                ..offer()
            },
        ] {
            assert!(ctlchan::Message::validate(&Msg::Offer(bad.clone())).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ranges_hashes_and_nonces_checked() {
        let v = |m: Msg| ctlchan::Message::validate(&m);
        assert!(v(Msg::Accept {
            udp_port: 1,
            session_id: 1,
            have: vec![[0, 2], [3, 4]]
        })
        .is_ok());
        assert!(v(Msg::Accept {
            udp_port: 1,
            session_id: 1,
            have: vec![[2, 2]]
        })
        .is_err());
        assert!(v(Msg::Accept {
            udp_port: 1,
            session_id: 1,
            have: vec![[0, 3], [2, 4]]
        })
        .is_err());
        assert!(v(Msg::Resend {
            blocks: vec![[0, MAX_BLOCKS + 1]]
        })
        .is_err());
        assert!(v(Msg::Hashes {
            first_block: 0,
            hashes: vec!["00".repeat(32)]
        })
        .is_ok());
        assert!(v(Msg::Hashes {
            first_block: 0,
            hashes: vec!["00".repeat(31)]
        })
        .is_err());
        assert!(v(Msg::Hashes {
            first_block: MAX_BLOCKS,
            hashes: vec!["00".repeat(32)]
        })
        .is_err());
        assert!(v(Msg::Hello {
            version: 1,
            client_nonce: "zz".repeat(16)
        })
        .is_err());
        assert!(v(Msg::Hello {
            version: 9,
            client_nonce: "00".repeat(16)
        })
        .is_err());
        assert_eq!(clip(&"é".repeat(MAX_TEXT)).len(), MAX_TEXT);
    }
}

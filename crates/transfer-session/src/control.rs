//! Control messages of a transfer session (JSON lines over TCP, [`ctlchan`]).
//!
//! ```text
//! sender (evlbi send)                         receiver (evlbi recv)
//!   ── TCP connect (1 RTT) ──
//!   hello{client_nonce, time_ms, session_id, udp_port, proof | session_key}   ──▶
//!   ── from here on every line carries an HMAC under the session key (ctlchan::Channel::authenticate) ──
//!   session{chunk_size}                 ──▶
//!   mkdir{id, path} …  offer{id, …} …   ──▶   (pipelined: up to a window ahead, no round trip each)
//!   … DATA on UDP to the control port number: the first segment of the first offer (below) …
//!                                       ◀──   welcome{udp_port, session_id}   (its MAC proves the key)
//!                                       ◀──   done{id} | accept{id, have} | refused{id, …}  (in order)
//!   … one stream of DATA/REPORT on UDP: every accepted block not in `have`, in accept order …
//!                                       ◀──   held{id, first_block, [hash per block]} … (the blocks of `have`, read back)
//!   hashes{id, first_block, [hash per block]} … file_hash{id, blake3}   ──▶  (as blocks are sent;
//!                                              those of held blocks only once the receiver's `held` are all in)
//!                                       ◀──   verified{id, path, blake3, synced} | resend{id, blocks} | refused{id, …}
//!   bye                                 ──▶
//! ```
//!
//! The first flight ([`crate::first_flight`]): `hello` carries the sender's authentication (a
//! proof under the pre-shared key over its nonce, clock, session id and data port; replays
//! refused by a clock window and a nonce cache), so the sender sends `session`, its first offers
//! and its first data without waiting for an answer. Protocol 6 sends the data with the TCP
//! connect (0-RTT): the first segment leaves on UDP the moment the connect starts, at most
//! [`PRE_CONNECT_BYTES`] / [`PRE_CONNECT_DATAGRAMS`] of it before the connect completes (what
//! the receiver's pen keeps for a session it does not know yet), and `hello`, `session` and the
//! offers follow on TCP once it has. The data goes to the receiver's control port number on UDP
//! (the receiver listens there from the start, [`crate::early`]); the session id is the
//! sender's. Data that comes before its `hello` moves nothing: it is penned raw and only the
//! session the `hello` authenticates checks it, under a data key derived from that `hello`'s
//! fresh nonce ([`data_key`]), so a replayed or forged first flight is never written.
//!
//! The first segment: before any answer, the stream carries the first [`early_blocks`] blocks of
//! the session's first `offer`, `session.first_segment` bytes of it (the sender's choice within
//! [`FIRST_SEGMENT_RANGE`]: what it expects to send in the two round trips before the `accept`
//! reaches it; the sender pushes them at once, paced at the start rate; the
//! Startup probe runs meanwhile). The receiver pushes the same segment when it reads that offer,
//! before it answers it, and writes of it only the blocks it accepts and lacks: the blocks of
//! `have` and every block of a refused offer are received and dropped (counted), never written —
//! resume still wins. `accept` then appends the remaining missing blocks. The sender keeps the
//! hashes of the first segment's blocks until the `accept`, and drops those of held blocks (the
//! receiver proves those first, as below).
//!
//! Each `accept` (and `resend`) appends the blocks it names as segments of the session's one
//! open transfer stream ([`transfer::segments`]), on both ends in the order of these messages: the
//! data of many files flows back to back with one congestion controller, and the block hashes
//! the sender computes as it sends reach the receiver about with the data, so a file's verdict
//! follows its last byte by about one round trip.
//!
//! A receiver proves what it says it holds: its hashes of the blocks in `have` (`held`) come
//! before the sender's of them, and a held block whose hash is not the sender's counts only once
//! it was sent again (`resend`). A receiver that claimed blocks it lacks learns their hashes (and
//! so the file's) only after it gave its own, and cannot have the file verified without them
//! being sent.
//!
//! What is authenticated: with a pre-shared key, both ends derive a session key from it and the
//! first flight's fields; every control line after `hello` carries an HMAC under it (a proxy
//! that rewrites an offered path, a verdict or a hash breaks the channel), the verdict names the
//! path it is for, and every UDP datagram carries a BLAKE3 tag under a key derived from it and
//! the session id ([`data_key`]), so a forged or altered datagram is dropped before it moves any
//! state. Without a pre-shared key the sender draws a random session key and sends it in `hello`:
//! that keeps out anyone who cannot read the control connection (blind injection of DATA or
//! REPORTs), but someone on the path can read the key — only a pre-shared key authenticates the
//! peer. Nothing is encrypted. A receiver refusing a first flight says why in the clear (the
//! sender, already authenticating, reads it as a refusal of its proof) and in its own log.

use ctlchan::mac::NONCE_LEN;
use ctlchan::InvalidField;

use serde::{Deserialize, Serialize};
pub use transfer::blocks::{MAX_BLOCK, MAX_BLOCKS, MAX_FILE_SIZE, MIN_BLOCK};

/// Wait this long for a control message before giving up on the peer.
pub const CONTROL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// Version of this protocol.
pub const PROTOCOL_VERSION: u8 = 6;
/// Longest control line accepted.
pub const MAX_LINE: usize = 2 << 20;
/// Longest path in an offer, bytes.
pub const MAX_PATH: usize = 4096;
/// Smallest and largest chunk (one DATA datagram's payload).
pub const CHUNK_RANGE: std::ops::RangeInclusive<u32> = 512..=transfer::wire::MAX_PAYLOAD as u32;
/// Most block hashes per `hashes` message (about 1.1 MB of JSON).
pub const HASHES_PER_MESSAGE: usize = 16_384;
/// Most block ranges in `accept` or `resend`.
pub const MAX_RANGES: usize = 65_536;
/// Longest free-text message.
pub const MAX_TEXT: usize = 1024;
/// Bytes of the first segment (the first offer's blocks sent before its `accept`) without a
/// remembered rate: more than a start rate of 100 Mb/s sends in two 200 ms round trips, about
/// what Startup sends at 1 Gb/s in the second of two 100 ms ones.
pub const FIRST_SEGMENT_BYTES: u64 = 8 << 20;
/// What a first segment may be (`session.first_segment`): at most 64 MiB, the receiver's cost of
/// a first segment it turns out to hold (received and dropped).
pub const FIRST_SEGMENT_RANGE: std::ops::RangeInclusive<u64> = (1 << 20)..=(64 << 20);
/// Most payload bytes a sender puts on UDP before its TCP connect completed: ¾ of the
/// receiver's pen ([`crate::early::PEN_BYTES`]) for datagrams that come before their `hello`.
pub const PRE_CONNECT_BYTES: u64 = 12 << 20;
/// Most datagrams a sender puts on UDP before its TCP connect completed: ¾ of
/// [`crate::early::PEN_DATAGRAMS`].
pub const PRE_CONNECT_DATAGRAMS: u64 = 3072;

/// Datagrams of `chunk_size` payload bytes a sender may put on UDP before its connect
/// completed: what the receiver's pen keeps for a session it does not know yet.
pub fn pre_connect_budget(chunk_size: u32) -> u64 {
    PRE_CONNECT_DATAGRAMS.min(PRE_CONNECT_BYTES / u64::from(chunk_size.max(1)))
}

/// Wire bytes of [`pre_connect_budget`]'s datagrams (with their header, tag and 66 bytes of
/// UDP/IPv4/Ethernet framing): what the controller may send blind, beyond a resumed rate's jump
/// window ([`transfer::AdaptiveConfig::blind_bytes`]).
pub fn pre_connect_wire_bytes(chunk_size: u32) -> u64 {
    let per = u64::from(chunk_size) + (transfer::wire::DATA_HEADER_LEN + transfer::wire::TAG_LEN + 66) as u64;
    pre_connect_budget(chunk_size) * per
}

/// The sender's first segment: what its start rate sends in the two round trips before an
/// `accept` can reach it (the connect's, then the first flight's), with a margin of ¼; without
/// a remembered rate [`FIRST_SEGMENT_BYTES`]. Within [`FIRST_SEGMENT_RANGE`].
pub fn first_segment_bytes(resume: Option<transfer::ResumeHint>) -> u64 {
    resume.map_or(FIRST_SEGMENT_BYTES, |h| {
        let bytes = 2.5 * h.rate_bps / 8.0 * h.rtt.as_secs_f64();
        (bytes as u64).clamp(FIRST_SEGMENT_BYTES, *FIRST_SEGMENT_RANGE.end())
    })
}

/// Blocks of `o` in the session's first segment of `first_segment` bytes when `o` is the
/// session's first offer: whole blocks covering it (at least one), at most the file's.
pub fn early_blocks(o: &Offer, first_segment: u64) -> u64 {
    first_segment.div_ceil(o.block_size.max(1)).max(1).min(o.blocks())
}

/// What the sender offers for one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offer {
    /// The sender's id for this file in the session (each item of a session has its own).
    pub id: u64,
    /// Destination path relative to the receiver's root, `/`-separated.
    pub path: String,
    /// File size, bytes.
    pub size: u64,
    /// Source modification time, ns since the Unix epoch: with the size, what tells a resumable
    /// `.part` of the same file from one of an older version.
    pub mtime_ns: u64,
    /// Bytes per verification/resume block: a power of two ([`MIN_BLOCK`]..=[`MAX_BLOCK`]), so
    /// that each block is one subtree of the file's BLAKE3 tree ([`transfer::blocktree`]).
    pub block_size: u64,
    /// Make the file durable (fsync) before saying `verified` (the sender may delete its copy
    /// then); without it the verdict only means the verified bytes are in the receiver's page
    /// cache.
    pub sync: bool,
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
    /// Sender → receiver, first: the whole first flight's authentication
    /// ([`crate::first_flight`]).
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u8,
        /// 16 random bytes, hex.
        client_nonce: String,
        /// The sender's wall clock, ms since the Unix epoch.
        #[serde(default)]
        time_ms: u64,
        /// Session id of the data stream (the sender's choice).
        #[serde(default)]
        session_id: u64,
        /// UDP port the sender's data comes from.
        #[serde(default)]
        udp_port: u16,
        /// HMAC under the pre-shared key, hex.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proof: Option<String>,
        /// Without a pre-shared key: the session key (32 bytes, hex).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_key: Option<String>,
    },
    /// Sender → receiver, first authenticated line: the session's parameters.
    Session {
        /// Payload bytes per DATA datagram.
        chunk_size: u32,
        /// Bytes of the first segment ([`early_blocks`]), within [`FIRST_SEGMENT_RANGE`].
        first_segment: u64,
    },
    /// Receiver → sender, its first authenticated line (the proof of its key): the session's
    /// data socket and id, as the sender's first flight set them.
    Welcome {
        /// UDP port for the data (the control port's number).
        udp_port: u16,
        /// Session id of the data stream.
        session_id: u64,
    },
    /// Sender → receiver: create this directory (for empty directories).
    Mkdir {
        /// Item id.
        id: u64,
        /// Relative path.
        path: String,
    },
    /// Receiver → sender: the directory exists.
    Done {
        /// Item id.
        id: u64,
    },
    /// Sender → receiver: a file to transfer.
    Offer(Offer),
    /// Receiver → sender: send the blocks of file `id` not in `have`; they follow in the stream
    /// in order, after everything accepted before.
    Accept {
        /// File id.
        id: u64,
        /// Block ranges `[first, end)` the receiver already holds from an earlier attempt.
        have: Vec<[u64; 2]>,
    },
    /// Receiver → sender: its hashes of blocks `first_block..first_block + hashes.len()` of file
    /// `id`, all in the `accept`'s `have`, read back from its copy: the proof that it holds them,
    /// sent before the sender's hashes of those blocks (see the module docs).
    Held {
        /// File id.
        id: u64,
        /// Index of the first block.
        first_block: u64,
        /// Hex hash per block ([`transfer::blocktree`]).
        hashes: Vec<String>,
    },
    /// Receiver → sender: this item will not be received (refused, or failed for good); the
    /// session goes on.
    Refused {
        /// Item id.
        id: u64,
        /// Why.
        message: String,
    },
    /// Sender → receiver: hashes of blocks `first_block..first_block + hashes.len()` of file `id`.
    Hashes {
        /// File id.
        id: u64,
        /// Index of the first block.
        first_block: u64,
        /// Hex hash per block ([`transfer::blocktree`]).
        hashes: Vec<String>,
    },
    /// Sender → receiver: BLAKE3 of the whole file; all its block hashes have been sent.
    FileHash {
        /// File id.
        id: u64,
        /// Hex BLAKE3.
        blake3: String,
    },
    /// Receiver → sender: every block and the whole file match; the file has its final name.
    Verified {
        /// File id.
        id: u64,
        /// The path below the root the file now has (the sender checks it is the one offered).
        path: String,
        /// Hex BLAKE3 the receiver computed.
        blake3: String,
        /// The file was fsync'd before this verdict.
        synced: bool,
        /// How long that took, µs (0 without sync).
        sync_us: u64,
    },
    /// Receiver → sender: these blocks did not match; they follow in the stream again.
    Resend {
        /// File id.
        id: u64,
        /// Block ranges `[first, end)`.
        blocks: Vec<[u64; 2]>,
    },
    /// Sender → receiver: no more items; the session ends.
    Bye,
    /// Either way: fatal, the connection closes.
    Error {
        /// Why.
        message: String,
    },
}

fn hex_len(field: &'static str, s: &str, bytes: usize) -> Result<(), InvalidField> {
    match ctlchan::mac::hex_decode(s) {
        Some(v) if v.len() == bytes => Ok(()),
        _ => Err(InvalidField::new(field, format!("must be {} hex digits", 2 * bytes))),
    }
}

fn text(field: &'static str, s: &str, max: usize) -> Result<(), InvalidField> {
    if s.len() > max {
        return Err(InvalidField::new(field, format!("longer than {max} bytes")));
    }
    Ok(())
}

fn ranges(field: &'static str, r: &[[u64; 2]], limit: u64) -> Result<(), InvalidField> {
    if r.len() > MAX_RANGES {
        return Err(InvalidField::new(field, format!("more than {MAX_RANGES} ranges")));
    }
    let mut prev_end = 0;
    for (i, &[a, b]) in r.iter().enumerate() {
        if a >= b || b > limit || (i > 0 && a < prev_end) {
            return Err(InvalidField::new(
                field,
                format!("range [{a}, {b}) empty, unordered or beyond {limit}"),
            ));
        }
        prev_end = b;
    }
    Ok(())
}

impl ctlchan::Message for Msg {
    fn validate(&self) -> Result<(), InvalidField> {
        match self {
            Msg::Hello {
                version,
                client_nonce,
                udp_port,
                proof,
                session_key,
                ..
            } => {
                if *version != PROTOCOL_VERSION {
                    return Err(InvalidField::new(
                        "version",
                        format!(
                            "protocol version {version}, this side speaks {PROTOCOL_VERSION} \
                             (data with the connect): use the same evlbi release on both ends"
                        ),
                    ));
                }
                if *udp_port == 0 {
                    return Err(InvalidField::new("udp_port", "must name the data's source port"));
                }
                if let Some(p) = proof {
                    hex_len("proof", p, 32)?;
                }
                if let Some(k) = session_key {
                    hex_len("session_key", k, 32)?;
                }
                hex_len("client_nonce", client_nonce, NONCE_LEN)
            }
            Msg::Session {
                chunk_size,
                first_segment,
            } => {
                if !CHUNK_RANGE.contains(chunk_size) {
                    return Err(InvalidField::new(
                        "chunk_size",
                        format!("{chunk_size} outside {CHUNK_RANGE:?}"),
                    ));
                }
                if !FIRST_SEGMENT_RANGE.contains(first_segment) {
                    return Err(InvalidField::new(
                        "first_segment",
                        format!("{first_segment} outside {FIRST_SEGMENT_RANGE:?}"),
                    ));
                }
                Ok(())
            }
            Msg::Welcome { .. } | Msg::Done { .. } | Msg::Bye => Ok(()),
            Msg::Mkdir { path, .. } => text("path", path, MAX_PATH),
            Msg::Offer(o) => validate_offer(o),
            Msg::Accept { have, .. } => ranges("have", have, MAX_BLOCKS),
            Msg::Resend { blocks, .. } => ranges("blocks", blocks, MAX_BLOCKS),
            Msg::Hashes {
                first_block, hashes, ..
            }
            | Msg::Held {
                first_block, hashes, ..
            } => {
                if hashes.len() > HASHES_PER_MESSAGE || first_block.saturating_add(hashes.len() as u64) > MAX_BLOCKS {
                    return Err(InvalidField::new(
                        "hashes",
                        format!("at most {HASHES_PER_MESSAGE} per message, below block {MAX_BLOCKS}"),
                    ));
                }
                hashes.iter().try_for_each(|h| hex_len("hash", h, 32))
            }
            Msg::FileHash { blake3, .. } => hex_len("blake3", blake3, 32),
            Msg::Verified { path, blake3, .. } => {
                text("path", path, MAX_PATH)?;
                hex_len("blake3", blake3, 32)
            }
            Msg::Refused { message, .. } | Msg::Error { message } => text("message", message, MAX_TEXT),
        }
    }
}

fn validate_offer(o: &Offer) -> Result<(), InvalidField> {
    if o.id == u64::MAX {
        // The receiver's stream marks blocks it drops with this id (crate::fileio::PartSink).
        return Err(InvalidField::new("id", "must be below 2^64 - 1"));
    }
    text("path", &o.path, MAX_PATH)?;
    if o.size > MAX_FILE_SIZE {
        return Err(InvalidField::new("size", format!("{} above {MAX_FILE_SIZE}", o.size)));
    }
    if !o.block_size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(&o.block_size) {
        return Err(InvalidField::new(
            "block_size",
            format!("{} must be a power of two in {MIN_BLOCK}..={MAX_BLOCK}", o.block_size),
        ));
    }
    if o.blocks() > MAX_BLOCKS {
        return Err(InvalidField::new(
            "block_size",
            format!("{} blocks, at most {MAX_BLOCKS}: use a larger block size", o.blocks()),
        ));
    }
    Ok(())
}

/// Cut `text` to at most [`MAX_TEXT`] bytes on a character boundary (error texts can be long).
pub fn clip(text: &str) -> String {
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

const DATA_LABEL: &[u8] = b"evlbi-transfer-v2 datagram key";

impl Msg {
    /// The message's `type` tag, for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::Session { .. } => "session",
            Msg::Welcome { .. } => "welcome",
            Msg::Mkdir { .. } => "mkdir",
            Msg::Done { .. } => "done",
            Msg::Offer(_) => "offer",
            Msg::Accept { .. } => "accept",
            Msg::Refused { .. } => "refused",
            Msg::Hashes { .. } => "hashes",
            Msg::Held { .. } => "held",
            Msg::FileHash { .. } => "file_hash",
            Msg::Verified { .. } => "verified",
            Msg::Resend { .. } => "resend",
            Msg::Bye => "bye",
            Msg::Error { .. } => "error",
        }
    }
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
            id: 3,
            path: "scan/ef.vdif".into(),
            size: 10_000_000,
            mtime_ns: 1,
            block_size: 1 << 20,
            sync: true,
        }
    }

    #[test]
    fn offer_json_is_pinned_and_roundtrips() {
        let line = encode_line(&Msg::Offer(offer()), MAX_LINE).unwrap();
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"type\":\"offer\",\"id\":3,\"path\":\"scan/ef.vdif\",\"size\":10000000,\"mtime_ns\":1,\"block_size\":1048576,\"sync\":true}\n"
        );
        let back: Msg = decode_line(&line[..line.len() - 1]).unwrap();
        assert_eq!(back, Msg::Offer(offer()));
        // Unknown fields (an older or newer peer) are refused, not ignored.
        let old = "{\"type\":\"offer\",\"id\":3,\"path\":\"a\",\"size\":1,\"mtime_ns\":1,\"chunk_size\":8192,\"block_size\":4096,\"sync\":true}";
        assert!(decode_line::<Msg>(old.as_bytes()).is_err());
    }

    #[test]
    fn out_of_range_offers_refused() {
        for bad in [
            Offer {
                size: MAX_FILE_SIZE + 1,
                ..offer()
            },
            Offer {
                block_size: 3 << 20,
                ..offer()
            },
            Offer {
                block_size: 0,
                ..offer()
            },
            Offer {
                block_size: 2048,
                ..offer()
            },
            Offer {
                block_size: 2 << 30,
                ..offer()
            },
            Offer {
                size: MAX_FILE_SIZE,
                block_size: 4096,
                ..offer()
            },
            Offer {
                path: "a".repeat(MAX_PATH + 1),
                ..offer()
            },
        ] {
            assert!(ctlchan::Message::validate(&Msg::Offer(bad.clone())).is_err(), "{bad:?}");
        }
        let session = |chunk_size, first_segment| {
            ctlchan::Message::validate(&Msg::Session {
                chunk_size,
                first_segment,
            })
        };
        assert!(session(100, FIRST_SEGMENT_BYTES).is_err());
        assert!(session(8192, FIRST_SEGMENT_BYTES).is_ok());
        assert!(session(8192, 0).is_err());
        assert!(
            session(8192, (64 << 20) + 1).is_err(),
            "a first segment the receiver would not bound"
        );
    }

    #[test]
    fn ranges_hashes_and_nonces_checked() {
        let v = |m: Msg| ctlchan::Message::validate(&m);
        assert!(v(Msg::Accept {
            id: 1,
            have: vec![[0, 2], [3, 4]]
        })
        .is_ok());
        assert!(v(Msg::Accept {
            id: 1,
            have: vec![[2, 2]]
        })
        .is_err());
        assert!(v(Msg::Accept {
            id: 1,
            have: vec![[0, 3], [2, 4]]
        })
        .is_err());
        assert!(v(Msg::Resend {
            id: 1,
            blocks: vec![[0, MAX_BLOCKS + 1]]
        })
        .is_err());
        assert!(v(Msg::Hashes {
            id: 1,
            first_block: 0,
            hashes: vec!["00".repeat(32)]
        })
        .is_ok());
        assert!(v(Msg::Hashes {
            id: 1,
            first_block: 0,
            hashes: vec!["00".repeat(31)]
        })
        .is_err());
        assert!(v(Msg::Hashes {
            id: 1,
            first_block: MAX_BLOCKS,
            hashes: vec!["00".repeat(32)]
        })
        .is_err());
        let hello = |version, client_nonce: &str, udp_port, session_key: &str| Msg::Hello {
            version,
            client_nonce: client_nonce.into(),
            time_ms: 1,
            session_id: 1,
            udp_port,
            proof: None,
            session_key: Some(session_key.into()),
        };
        assert!(v(hello(PROTOCOL_VERSION, &"00".repeat(16), 1, &"00".repeat(32))).is_ok());
        assert!(v(hello(PROTOCOL_VERSION, &"zz".repeat(16), 1, &"00".repeat(32))).is_err());
        assert!(v(hello(PROTOCOL_VERSION, &"00".repeat(16), 0, &"00".repeat(32))).is_err());
        assert!(v(hello(PROTOCOL_VERSION, &"00".repeat(16), 1, &"00".repeat(31))).is_err());
        // Protocol 4's hello (no first-flight fields) is refused by its version, not a field.
        let why =
            decode_line::<Msg>(br#"{"type":"hello","version":4,"client_nonce":"00000000000000000000000000000000"}"#)
                .unwrap_err()
                .to_string();
        assert!(why.contains("protocol version 4, this side speaks 6"), "{why}");
        // Protocol 5's (its data only after the connect; a `session` without its first
        // segment's size): refused by its version, with what to do.
        let v5 = format!(
            r#"{{"type":"hello","version":5,"client_nonce":"{}","time_ms":1,"session_id":2,"udp_port":3,"proof":"{}"}}"#,
            "00".repeat(16),
            "00".repeat(32)
        );
        let why = decode_line::<Msg>(v5.as_bytes()).unwrap_err().to_string();
        assert!(
            why.contains("protocol version 5, this side speaks 6") && why.contains("same evlbi release"),
            "{why}"
        );
        assert_eq!(clip(&"é".repeat(MAX_TEXT)).len(), MAX_TEXT);
    }
}

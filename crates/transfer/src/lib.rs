//! Sans-IO reliable bulk file transfer over UDP for long, fat, lossy paths.
//!
//! Recorded e-VLBI data (10 GB to TBs) has to cross 1–10 Gb/s paths with 20–200 ms RTT and
//! random loss, where a loss-based TCP collapses (Mathis: rate ≈ MSS / (RTT·√p)). This crate
//! moves a file with a NAK-based ARQ driven by periodic receiver REPORTs, and paces it with a
//! pluggable [`CongestionController`]: [`FixedRate`] for dedicated lightpaths, [`Adaptive`]
//! (BBR-like, model-based) for shared paths. Random loss is repaired, not taken as congestion.
//!
//! # Sans-IO
//!
//! [`Sender`] and [`Receiver`] are state machines in the style of quinn-proto. They never read
//! a clock, open a socket, start a thread or touch a file. The caller drives them:
//!
//! ```text
//! loop {
//!     for every datagram read from the socket:  machine.handle_datagram(now, &bytes)
//!     if machine.poll_timeout() <= now:         machine.handle_timeout(now)
//!     while let Some(d) = machine.poll_transmit(now) { socket.send(&d) }
//!     sleep until min(machine.poll_timeout(), socket readable)
//! }
//! ```
//!
//! `poll_transmit` paces: it returns `None` when the next datagram is not due yet, and
//! `poll_timeout` then says when it will be. The same four methods are what
//! `linkemu::sim::Endpoint` asks for, so the tests run both machines in virtual time.
//!
//! File I/O goes through two small traits the caller implements:
//!
//! - [`Source`]: the sender asks it for the bytes of a chunk (`read_at(offset, buf)`) when the
//!   chunk is about to be sent (and again for a retransmission), so nothing is buffered.
//! - [`Sink`]: the receiver hands it each chunk the first time it arrives
//!   (`write_at(offset, data)`); chunks arrive out of order, each exactly once. A failed write
//!   leaves the chunk missing, so it is NAKed and arrives again.
//!
//! Both sides are built from the same [`SessionParams`] (session id, file size, chunk size),
//! agreed out of band (e.g. on the control connection that started the transfer).
//!
//! A transfer need not be one file: an *open* session (`SenderConfig::open`,
//! `ReceiverConfig::open`) is a [`Layout`] of segments that both sides append while it runs
//! (`push_segment`, in the same order on both sides), which is how `evlbi send` moves many
//! files, and of each only the blocks the receiver lacks, through one stream with one congestion
//! controller: no handshake, no slow start and no tail per file.
//!
//! # Protocol
//!
//! The stream is cut into chunks of `chunk_size` bytes; a segment starts on a chunk boundary,
//! so its last chunk may be shorter ([`layout`]). Chunk `i` travels in one DATA datagram at
//! wire offset `i · chunk_size`. The receiver sends a
//! REPORT every `report_interval` (10 ms) or every `report_every` DATA datagrams, whichever
//! comes first, while data arrives. It acknowledges the contiguous prefix (`cum_ack`), NAKs
//! holes above it and reports what it measured: receive rate over the interval, one-way
//! delays relative to the sender's timestamps, and an echo of the newest sender timestamp.
//!
//! The sender
//! - sends its first [`wire::TRAIN_LEN`] DATA datagrams back to back, unpaced: the receiver
//!   times their arrival and reports the rate the bottleneck spaced them at (`train_bps`), which
//!   lets the congestion controller start near the path's capacity one round trip in instead
//!   of doubling up to it from its initial rate for several;
//! - retransmits a NAKed chunk only if its last transmission was sent at least a reorder window
//!   (¼ min RTT) before the newest datagram the receiver had seen when it wrote the report (the
//!   echoed timestamp, as in RACK): reordering is not loss, and a chunk already retransmitted
//!   and still in flight is not sent again;
//! - sends retransmissions before new data, paced at the controller's rate, and never has more
//!   than the controller's inflight cap in flight (bytes sent after the echoed timestamp);
//! - once every chunk so far has left and nothing is NAKed, resends the newest chunks sent in
//!   the last half SRTT that the receiver has not yet accounted for, newest first, each once, in
//!   the pacing slots that would otherwise go unused (tail protection, after RACK-TLP's tail
//!   loss probe, RFC 8985 §7): a loss in the last round trip then costs at most half a round
//!   trip more instead of a whole one (`SenderConfig::tail_protection`);
//! - when REPORTs stop for `max(2·SRTT + 4·RTTVAR, 100 ms)` stops sending and probes (one
//!   retransmission of the first unacknowledged chunk, interval doubling up to 1 s) until a
//!   REPORT arrives again, so an outage costs a few datagrams, and gives up after
//!   `idle_timeout` (120 s) of silence;
//! - when the layout is closed and every chunk acknowledged, sends FIN (repeated with backoff)
//!   until FIN-ACK. FIN names the stream's size; an open receiver takes it as the close.
//!
//! A zero-length file is just the FIN / FIN-ACK exchange.
//!
//! # Wire format
//!
//! Big-endian. Every datagram starts with the common header:
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | magic `eVTR`                                                  |
//! | 4      | 1    | version (2: DATA tags over the payload digest, segmented streams) |
//! | 5      | 1    | kind: 1 DATA, 2 REPORT, 3 FIN, 4 FIN-ACK                      |
//! | 6      | 8    | session id                                                    |
//! | 14     | 2    | flags: DATA bit 0 = retransmission; all other bits reserved, 0 |
//!
//! DATA (40 + payload bytes; payload `chunk_size`, default 8192, or less for the last chunk):
//!
//! | offset | size | field                                                           |
//! |--------|------|-----------------------------------------------------------------|
//! | 16     | 8    | transmission sequence number (+1 per DATA sent, retransmissions included) |
//! | 24     | 8    | wire offset (chunk number · chunk size)                          |
//! | 32     | 8    | send timestamp, µs since the sender's epoch                      |
//! | 40     | n    | payload                                                          |
//!
//! REPORT (128 + 12·n bytes, n ≤ 96, so at most 1280 bytes):
//!
//! | offset | size | field                                                           |
//! |--------|------|-----------------------------------------------------------------|
//! | 16     | 8    | report sequence number (+1 per report; older ones are ignored)  |
//! | 24     | 8    | `cum_ack`: chunks `[0, cum_ack)` received                        |
//! | 32     | 8    | `recv_high`: one past the highest chunk received                 |
//! | 40     | 8    | `window_end`: sender may send chunks below this                  |
//! | 48     | 8    | `seq_high`: one past the highest sequence number received        |
//! | 56     | 8    | DATA datagrams received in total                                 |
//! | 64     | 8    | echo: highest sender timestamp received, µs                      |
//! | 72     | 4    | echo delay: µs from that datagram's arrival to this report       |
//! | 76     | 4    | interval length, µs (since the previous report)                  |
//! | 80     | 4    | DATA datagrams received in the interval                          |
//! | 84     | 8    | payload bytes received in the interval                           |
//! | 92     | 8    | min relative one-way delay in the session, µs (i64)              |
//! | 100    | 8    | min relative one-way delay in the interval, µs (i64)             |
//! | 108    | 8    | relative one-way delay of the latest datagram, µs (i64)          |
//! | 116    | 8    | opening train's dispersion rate, bit/s of datagram bytes (0: none) |
//! | 124    | 2    | n, number of NAK ranges                                          |
//! | 126    | 2    | reserved, 0                                                      |
//! | 128    | 12·n | NAK ranges: first missing chunk (8), count (4)                   |
//!
//! NAK ranges are ordered, non-overlapping, non-empty and inside `[cum_ack, recv_high)`; with
//! more holes than fit, successive reports rotate through them. Relative one-way delay is
//! receiver clock − sender timestamp (the offset between the clocks cancels in differences).
//!
//! FIN and FIN-ACK (24 bytes):
//!
//! | offset | size | field     |
//! |--------|------|-----------|
//! | 16     | 8    | stream size (bytes of all segments) |
//!
//! In a keyed session ([`SenderConfig::data_key`], [`ReceiverConfig::data_key`]; `evlbi send`/`recv`
//! always key their sessions) every datagram of either kind is followed by a 16-byte tag, the
//! first half of a BLAKE3 keyed hash ([`DataKey`]): of everything before it for REPORT, FIN and
//! FIN-ACK; of the 40-byte header and the 32-byte [`PayloadDigest`] of the payload for DATA (the
//! digest is the BLAKE3 chaining value the file's hash is built from, so the payload is hashed
//! once for both). A datagram whose tag is missing or wrong is dropped ([`Reject::BadTag`])
//! before any of its fields is believed.
//!
//! Parsing ([`wire::parse`]) checks lengths exactly, reserved bits, and REPORT consistency;
//! the machines then check the session id, offsets against the file size and chunk grid,
//! acknowledgements against what was sent. Rejected datagrams are counted by reason
//! ([`RejectCounters`]) and dropped; nothing panics on any input.
//!
//! # Congestion control
//!
//! See [`cc`]. Rates are in bits per second of *wire* bytes: each DATA datagram counts as its
//! length plus [`SenderConfig::wire_overhead`] (IP/UDP/Ethernet framing, `models::wire::ETHERNET_UDP_OVERHEAD` by default).

pub mod blocks;
pub mod blocktree;
pub mod cc;
pub mod layout;
pub mod receiver;
pub mod results;
pub mod segments;
pub mod sender;
mod session;
pub mod wire;

pub use cc::{Adaptive, AdaptiveConfig, CcEvents, CongestionController, FixedRate, ReportSample, ResumeHint};
pub use layout::Layout;
pub use receiver::{Receiver, ReceiverConfig, ReceiverState, ReceiverStats, Sink};
pub use sender::{RateSample, Sender, SenderConfig, SenderState, SenderStats, Source};
pub use session::{ConfigError, Reject, RejectCounters, SessionParams};
pub use wire::{DataKey, PayloadDigest, WireError};

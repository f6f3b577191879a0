//! Sans-IO core of `evlbi probe`, a successor to udpmon (seed 000 §4.1, seed 004 §3–4): a paced
//! UDP stream of fixed-size datagrams whose receiver measures throughput (user and wire rate),
//! loss, duplicates, RFC 4737 reordering, inter-arrival jitter, relative one-way delay, loss runs
//! and the distribution of intervals between losses with an exponential (Poisson) fit.
//!
//! Nothing here opens a socket or reads a clock: every function takes timestamps (u64 ns) and
//! bytes, so the whole measurement is deterministic and testable (see the quinn-proto and
//! smoltcp notes in the workspace STYLE.md). The socket layer (`netio`) supplies kernel
//! timestamps and moves the bytes; the control messages and their authentication live with the
//! sessions (`probe-session`, over `ctlchan`). No sockets, no clocks, no `unsafe`.
//!
//! | module | what |
//! |---|---|
//! | [`wire`] | probe datagram layout, [`wire::Packet`] accessors, [`wire::Repr`] parse/emit |
//! //! | [`send_stats`] | departure gaps, lateness against schedule, achieved send rate |
//! | [`recv_stats`] | stray classification and all receiver statistics, bounded memory |
//! | [`lossfit`] | exponential fit of loss intervals, Kolmogorov–Smirnov test, verdict |
//! | [`host_jitter`] | the host's timing floor: a pacer that sends nothing, and what interrupted it |
//! | [`results`] | [`results::ProbeResult`] and [`results::SweepResult`] |
//! | [`tcp`] | TCP tests: data-connection preamble, TCP_INFO parsing, samples, intervals, Mathis check |
//! | [`tcp_results`] | TCP test, CPU-load sweep and receive-buffer sweep results |
//!
//! # Example
//!
//! ```
//! use probe::recv_stats::{RecvConfig, RecvStats};
//! use probe::send_stats::{SendConfig, SendStats};
//! use probe::wire::Repr;
//!
//! let (test_id, size, spacing_ns) = (7, 1472, 12_000);
//! let mut tx = SendStats::new(SendConfig::new(spacing_ns));
//! let mut rx = RecvStats::new(RecvConfig { size: Some(size), ..RecvConfig::new(test_id) });
//! for seq in 0..1000u64 {
//!     let t = seq * spacing_ns;
//!     let bytes = Repr { flags: 0, test_id, seq, send_ns: t, size }.to_vec().unwrap();
//!     tx.on_sent(t, t, bytes.len());
//!     if seq % 100 != 42 {
//!         // 10 losses; the network adds 50 µs of delay.
//!         rx.on_datagram(t + 50_000, &bytes, true);
//!     }
//! }
//! rx.on_datagram(0, b"a 27-byte stray datagram!!", true); // counted, harmless
//! let report = rx.finish(Some(tx.packets()), 20_000_000);
//! assert_eq!(report.lost_packets, 10);
//! assert_eq!(report.unique_packets + report.lost_packets, report.expected_packets);
//! assert_eq!(report.strays.too_short, 1);
//! assert_eq!(report.one_way_delay.min_raw_ns, Some(50_000));
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod host_jitter;
pub mod lossfit;
pub mod recv_stats;
pub mod results;
pub mod send_stats;
pub mod seqwin;
pub mod tcp;
pub mod tcp_results;
pub mod wire;

pub use wire::WIRE_OVERHEAD_BYTES;

pub use recv_stats::{ReceiverReport, RecvConfig, RecvStats};
pub use results::{ProbeResult, SweepResult};
pub use send_stats::{SendConfig, SendStats, SenderReport};

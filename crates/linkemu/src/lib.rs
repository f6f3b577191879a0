//! WAN link model for e-VLBI tests and emulation.
//!
//! A [`Link`] is one direction of a network path. It is *sans-IO*: it never
//! reads a clock, opens a socket or starts a thread. The caller passes `now`
//! to every method, so the same model runs in real time (a TUN forwarder) and
//! in virtual time (the [`sim`] harness), and a run is a pure function of the
//! configuration, the seed and the sequence of calls.
//!
//! # Model
//!
//! A packet pushed at time `t` with length `len` goes through:
//!
//! 1. **Bottleneck** — a drop-tail FIFO of `buffer_bytes` served at `rate_bps`.
//!    Its occupancy at `t` is the fluid backlog still to be serialised. The
//!    packet is dropped if `occupancy + len > buffer_bytes` (congestion loss);
//!    otherwise it leaves at `d = max(t, d_prev) + len·8 / rate` (exact: the
//!    sub-nanosecond remainder is carried, so the long-run rate is exact).
//! 2. **Wire loss** — `None`, `Bernoulli`, or Gilbert–Elliott bursts, drawn
//!    after the bottleneck: a lost packet still used bottleneck capacity.
//! 3. **Duplication** — with probability `duplicate` a second copy is sent.
//! 4. **Propagation** — released at `d + delay + U[0, jitter]`; with
//!    `reorder = false` release times are made non-decreasing.
//!
//! [`LinkStats`] counts it all with exact accounting (see its docs) plus a
//! queue-delay histogram. Each random process (loss, jitter, duplication)
//! has its own RNG stream, so e.g. changing the jitter leaves the loss
//! pattern unchanged.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use linkemu::{Admission, Link, LinkConfig, LossModel};
//!
//! let config = LinkConfig {
//!     rate_bps: Some(1_000_000_000),      // 1 Gb/s bottleneck
//!     buffer_bytes: 1_250_000,            // 10 ms of buffer
//!     delay: Duration::from_millis(50),   // one way
//!     loss: LossModel::Bernoulli { p: 0.0 },
//!     ..LinkConfig::default()
//! };
//! let mut link: Link<u64> = Link::new(config, 42).unwrap();
//! let t0 = Instant::now(); // any base; only differences matter
//! assert_eq!(link.push(t0, 7, 1500), Admission::Accepted);
//! // 1500 B take 12 µs at 1 Gb/s, then 50 ms on the wire.
//! let due = link.next_release().unwrap();
//! assert_eq!(due - t0, Duration::from_micros(50_012));
//! assert_eq!(link.poll(due - Duration::from_nanos(1)), None);
//! assert_eq!(link.poll(due), Some(7));
//! assert_eq!(link.stats().delivered.packets, 1);
//! ```
//!
//! For whole protocol runs, see [`sim::Sim`]: two [`sim::Endpoint`]s joined
//! by a [`Duplex`] link under a virtual clock.
//!
//! Crate `linkemu-tun` runs the same model in real time between two
//! network namespaces, forwarding real IP packets through TUN devices
//! (`evlbi linkemu`); what it counts ([`LiveCounters`], [`IntervalSample`])
//! is defined here so result readers need not link it.

mod config;
mod link;
mod live;
mod loss;
pub mod sim;
mod stats;

pub use config::{ConfigError, GilbertElliott, LinkConfig, LossModel, MAX_DELAY};
pub use link::{Admission, Duplex, Link};
pub use live::{IntervalSample, LinkemuStatus, LiveCounters};
pub use loss::LossProcess;
pub use stats::{Counter, LinkStats, QUEUE_DELAY_BUCKETS};

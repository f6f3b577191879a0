//! `evlbi probe` over real sockets: the thin I/O loop around the sans-IO [`probe`] crate.
//!
//! Session: the client opens TCP to the server and sends `hello` (size, count, spacing, test
//! id); with a pre-shared key both sides prove it (HMAC challenge–response, [`auth`]) and every
//! later control line carries a MAC under a session key ([`ctlchan::Channel::authenticate`]).
//! The server binds a UDP socket and answers `ready` with its port; the client sends `count`
//! datagrams paced on an absolute timeline, then `done` with its sender statistics; the server
//! drains, finishes its receiver statistics and answers `results` ([`control`] has the
//! messages, [`ctlchan`] frames them). Every control line is
//! size-bounded and validated; datagrams from anyone but the client's address, or with the wrong
//! magic, test id or size, are counted as strays and never as data or loss.
//!
//! Sockets, pacing and counters come from `netio`: the client paces on an exact absolute timeline
//! ([`pacing::Pacer`]) and stamps each datagram with its monotonic clock; the server receives in
//! batches (recvmmsg) and times arrivals with the kernel's receive stamp (SO_TIMESTAMPNS,
//! CLOCK_REALTIME), so inter-arrival jitter excludes the wait in the socket buffer. One-way delay
//! is reported relative to its minimum, so the offset between the two clocks cancels (a clock
//! step during a trial shows as a delay step). Host CPU, UDP and interface counters are read on
//! both ends ([`host`]); the server's travel back in `results`.
//!
//! A TCP test ([`run_tcp_client`], `hello` with `tcp` set) uses the same control handshake, then
//! `streams` TCP data connections: the client writes memory to memory for the test's duration and
//! samples every stream's TCP_INFO ([`tcpsock`]); the server counts bytes per stream. A competing
//! CPU-bound task at a given nice level can run on the sending host meanwhile ([`burn`]).

mod accepted;
pub mod auth;
pub mod burn;
mod channel;
mod client;
mod clock;
pub mod control;
mod error;
pub mod host;
pub mod host_jitter;
mod server;
mod tcp_client;
mod tcp_server;
pub mod tcpsock;

pub use accepted::ServerEvent;
pub use client::{run_client, run_client_live, ClientConfig};
pub use clock::{instant_ns, now_ns, realtime_ns};
pub use error::ProbeSessionError;
pub use server::{Server, ServerConfig};
pub use tcp_client::{run_tcp_client, TcpClientConfig, MAX_SAMPLES, RESULTS_WAIT};

pub use control::MAX_LINE;

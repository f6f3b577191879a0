//! Sans-IO core of `evlbi stream`: real-time VDIF over UDP from a station to a correlator.
//!
//! - [`wire`]: datagram framings (native, jive5ab udps, bare) and the NAK message.
//! - [`window`]: per-station reorder window writing continuous VDIF, lost frames filled invalid.
//! - [`receiver`]: demultiplexes datagrams to stations, counts every rejected datagram by reason.
//! - [`arq`]: deadline-bounded retransmission (receiver's NAK scheduling, sender's repeat buffer).
//! - [`feed`]: what a correlator's live datastream is sent (the start, invalid frames as fill).
//! - [`sender`]: the sender state machine (framing, sequence numbers, loop time rewriting, repeats,
//!   departure statistics) behind `poll_transmit`/`handle_nak`/`poll_timeout`.
//! - [`relay`]: backend datagrams in (several inputs and senders), the same frames out, paced,
//!   repeated on NAK, a tee of what came in.
//! - [`results`]: the result structs of a send and a receive run (JSON is the source of truth).
//!
//! Nothing here touches a socket, a file or the clock: callers pass `now` and bytes in and get
//! frames (through a [`window::FrameSink`]) and NAKs out, so the same code runs over real sockets
//! and in deterministic tests.

pub mod arq;
pub mod feed;
mod in_step;
mod intake;
mod rate_check;
pub mod receiver;
pub mod relay;
pub mod results;
pub mod schedule;
pub mod sender;
mod thread_set;
pub mod window;
pub mod wire;

pub use receiver::{DatagramCounters, Receiver, ReceiverConfig, SenderChange, SourceFilter, StationSummary};
pub use schedule::PacedSchedule;
pub use sender::{
    Frame, FrameSource, MemorySource, Schedule, Sender, SenderConfig, SenderError, StationSpec, Transmit,
};
pub use window::{FrameSink, StationWindow, ThreadMap, VecSink, WindowConfig, WindowStats};
pub use wire::{SeqFormat, WireError};

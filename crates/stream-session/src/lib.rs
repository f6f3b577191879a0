//! `evlbi stream` over real sockets: the thin loops around the sans-IO [`stream`] crate.
//!
//! - [`send`]: reads VDIF files (one station each) into memory or on reader threads and drives
//!   [`stream::Sender`] (framing, repeats, counters) over a socket, one frame per datagram on an
//!   exact absolute timeline ([`pacing::Pacer`]), feeding it the NAKs that come back.
//! - [`recv`]: receives datagrams, feeds [`stream::Receiver`], writes each station's continuous
//!   VDIF (or a vbs/Mark6 scan over many disks) through [`recording::write::Recorder`], sends NAKs, reports
//!   live and at the end.
//! - [`relay`]: input sockets read on their own threads, [`stream::relay::Relay`] between them
//!   and the output socket, the tee through [`recording::write::Recorder`].
//! - [`live`]: a station's frames, in time order, to a correlator reading a stream socket
//!   (SFXC's `mk5://` reader, as jive5ab's `net2sfxc` serves it), never holding the receiver up.
//! - [`report`]: the result structs (defined in [`stream::results`]; JSON is the source of truth).

#![warn(missing_docs)]

pub mod live;
pub mod recv;
pub mod relay;
pub mod report;
pub mod send;

mod mapped;

pub mod error;

pub use error::{ConfigError, InputProblem, StreamSessionError};

/// Takes a running loop's counts once per live interval (`--metrics`, `evlbi serve`). It runs
/// on the data path's thread: it must only hand the value over (a channel, a swap), never wait.
pub type Observer<T> = Box<dyn FnMut(T) + Send>;

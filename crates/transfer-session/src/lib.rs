//! `evlbi send` / `evlbi recv` over real sockets: the thin I/O around the sans-IO [`transfer`]
//! protocol.
//!
//! A session is one TCP control connection (JSON lines, [`control`]) authenticated with a
//! pre-shared key when the receiver has one, carrying any number of files and directories, and
//! one UDP data stream: an open transfer ([`transfer::layout`]) into which every file's blocks
//! that the receiver lacks are appended as the receiver accepts the file ([`transfer::segments`]). Offers
//! run a window ahead of the data, so files follow each other without a round trip, a slow
//! start or a tail each. Each block is hashed as it is sent and as it is written, in whatever
//! order it arrives ([`transfer::blocktree`], [`hashing`]: BLAKE3 of every block and of the whole file, no second pass
//! over either copy); the sender's hashes travel on the control connection beside the data, and
//! the receiver renames `NAME.part` to `NAME` (after an fsync, when asked) the moment the last
//! block and the hashes match — or fetches failed blocks again through the same stream. The
//! receiver writes only below its root ([`paths`]) and keeps `NAME.part.evlbi` beside the data
//! so that the same command after a kill -9 of either side continues where it stopped.

pub mod control;
pub mod early;
pub mod fileio;
pub mod first_flight;
pub mod hashing;
pub mod paths;
pub mod resume;
pub mod udp;

mod client;
mod error;
mod plan;
mod receiving;
mod recv_files;
mod recv_session;
mod send_items;
mod server;

pub use client::{send, send_items, CcChoice, SendConfig, SendProgress, StartHint};
pub use control::CONTROL_TIMEOUT;
pub use ctlchan::serve::{Limits, ServeStats};
pub use error::{AuthError, ProtocolViolation, TransferSessionError, UsageError};
pub use fileio::ReadAt;
pub use plan::SendItem;
pub use receiving::{ServerConfig, ServerEvent};
pub use server::Server;

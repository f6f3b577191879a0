//! `evlbi send` / `evlbi recv` over real sockets: the thin I/O around the sans-IO [`transfer`]
//! protocol.
//!
//! A session is one TCP control connection (JSON lines, [`control`]) authenticated with a
//! pre-shared key when the receiver has one, carrying any number of files and directories, and
//! one UDP data stream: an open transfer ([`transfer::layout`]) into which every file's blocks
//! that the receiver lacks are appended as the receiver accepts the file ([`segments`]). Offers
//! run a window ahead of the data, so files follow each other without a round trip, a slow
//! start or a tail each. Each block is hashed as it is sent and as it is written, in whatever
//! order it arrives ([`hashing`]: BLAKE3 of every block and of the whole file, no second pass
//! over either copy); the sender's hashes travel on the control connection beside the data, and
//! the receiver renames `NAME.part` to `NAME` (after an fsync, when asked) the moment the last
//! block and the hashes match — or fetches failed blocks again through the same stream. The
//! receiver writes only below its root ([`paths`]) and keeps `NAME.part.evlbi` beside the data
//! so that the same command after a kill -9 of either side continues where it stopped.

pub mod blocks;
pub mod control;
pub mod fileio;
pub mod hashing;
pub mod paths;
pub mod segments;
pub mod udp;

mod client;
mod error;
mod recv_files;
mod recv_session;
mod send_items;
mod server;

use std::time::Duration;

pub use client::{send, send_items, CcChoice, SendConfig, SendItem, SendProgress};
pub use ctlchan::serve::{Limits, ServeStats};
pub use error::{AuthError, ProtocolViolation, TransferSessionError, UsageError};
pub use fileio::ReadAt;
pub use server::{Server, ServerConfig, ServerEvent};

/// Wait this long for a control message before giving up on the peer.
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(60);

/// Run the calling thread at nice 19: hashing may trail the data and must not take the core
/// the socket loops need (on one host, sender and receiver share two cores). Its results are
/// needed only when a round ends.
#[allow(unsafe_code)] // setpriority(2) of one thread: std has no thread priorities.
pub(crate) fn lower_priority() {
    // SAFETY: gettid has no preconditions; setpriority with PRIO_PROCESS and our own thread id
    // changes only this thread's nice value (Linux treats the id as a thread id).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

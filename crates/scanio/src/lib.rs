//! Reading multi-disk recordings back: a FlexBuff vbs or Mark6 scatter-gather scan found on a
//! set of disks, served as the one continuous stream it was recorded from.
//!
//! - [`disks`]: mount points from globs (`/mnt/disk*`, `/mnt/disks/*/*`).
//! - [`Scan::open`]: finds the scan's pieces on every disk (vbs chunk files, Mark6 block
//!   headers), orders them ([`scanfmt::index`]) and counts what is missing.
//! - [`ScanReader`]: `std::io::Read` + `Seek` and positional reads over the scan, for
//!   `vdif inspect`, `stream send`, `evlbi send` alike.
//! - [`list_scans`]: every scan on the disks, with size, time span and missing blocks.
//!
//! The scan name comes from the operator or from a directory listing; either way it is checked
//! ([`scanfmt::name`]) and every file below a disk is opened relative to the disk's directory
//! without following symlinks, so a link planted on a disk cannot make evlbi read elsewhere.
//! The layouts themselves are in [`scanfmt`]; this crate does the reads.

#![warn(missing_docs)]

pub mod disks;
mod fsat;
mod list;
mod reader;
mod scan;

pub use list::list_scans;
pub use reader::ScanReader;
pub use scan::{disk_label, Scan, ScanFile};
pub use scanfmt::Layout;

use std::path::PathBuf;

use thiserror::Error;

/// Why a scan cannot be read.
#[derive(Debug, Error)]
pub enum ScanError {
    /// The name is not a scan name (see [`scanfmt::name`]).
    #[error(transparent)]
    Name(#[from] scanfmt::name::NameError),
    /// No disk matched the patterns given.
    #[error("no disk (directory) matches {0}")]
    NoDisks(String),
    /// A pattern is not a glob.
    #[error("disk pattern {pattern:?}: {message}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// No piece of the scan on any disk.
    #[error("{layout}://{scan}: not found on {disks} disk(s){hint}")]
    NotFound {
        /// Layout looked for.
        layout: scanfmt::Layout,
        /// Scan name.
        scan: String,
        /// Disks searched.
        disks: usize,
        /// What was found instead (data streams of that name), as a sentence.
        hint: String,
    },
    /// The scan's files are there but none of its pieces can be read (a malformed Mark6 file,
    /// an unreadable scan directory).
    #[error("{layout}://{scan}: no piece of it can be read: {}", .problems.join("; "))]
    Unreadable {
        /// Layout looked for.
        layout: scanfmt::Layout,
        /// Scan name.
        scan: String,
        /// Why, one sentence per file or directory.
        problems: Vec<String>,
    },
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

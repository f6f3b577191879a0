//! Why a scan cannot be read: the error of the reading side and of the disk patterns, in a
//! module of its own so that both import it and the crate root only re-exports it.

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

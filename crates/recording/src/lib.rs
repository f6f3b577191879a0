//! VLBI recordings on disk, written and read back in the layouts correlators use.
//!
//! - [`write`]: where received frames go — continuous VDIF files per station (or thread), or a
//!   scan in FlexBuff vbs or Mark6 scatter-gather layout spread over many disks, one writer per
//!   disk, in a writer process that a SIGKILL of the receiver does not touch ([`write::child`]),
//!   the frames handed over in shared memory ([`ring`]).
//! - [`read`]: a vbs or Mark6 scan found on a set of disks ([`Scan::open`]) served as the one
//!   continuous stream it was recorded from ([`ScanReader`]: `Read` + `Seek` + positional
//!   reads), and every scan on a set of disks ([`list_scans`]).
//! - [`disks`]: mount points from the operator's patterns (`/mnt/disk*`).
//!
//! The layouts' bytes (chunk names, Mark6 headers, block planning, reassembly order, results)
//! are sans-IO in [`scanfmt`], as the transfer protocol is in `transfer` and its sockets in
//! `transfer-session`; this crate does the file IO. Every name below a disk — a scan directory,
//! a chunk, a Mark6 file, a VDIF file — is created and opened relative to the disk's directory
//! descriptor without following symbolic links ([`safedir`]), so a link planted on a disk can
//! neither receive a recording nor feed a read.

#![warn(missing_docs)]

pub mod disks;
mod error;
pub mod read;
pub mod ring;
pub mod write;

pub use error::ScanError;
pub use read::{disk_label, list_scans, Scan, ScanFile, ScanReader};
pub use scanfmt::Layout;

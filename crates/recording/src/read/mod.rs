//! Reading multi-disk recordings back: a FlexBuff vbs or Mark6 scatter-gather scan found on a
//! set of disks, served as the one continuous stream it was recorded from.
//!
//! - [`Scan::open`]: finds the scan's pieces on every disk (vbs chunk files, Mark6 block
//!   headers), orders them ([`scanfmt::index`]) and counts what is missing.
//! - [`ScanReader`]: `std::io::Read` + `Seek` and positional reads over the scan, for
//!   `vdif inspect`, `stream send`, `evlbi send` alike.
//! - [`list_scans`]: every scan on the disks, with size, time span and missing blocks.
//!
//! The scan name comes from the operator or from a directory listing; either way it is checked
//! ([`scanfmt::name`]) and every file below a disk is opened relative to the disk's directory
//! without following symlinks.

pub mod check;
mod list;
mod reader;
mod scan;

pub use list::{list_scans, MAX_SCANS};
pub use reader::ScanReader;
pub use scan::{disk_label, Scan, ScanFile};

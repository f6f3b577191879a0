//! The layouts stations and correlators record VLBI data in across many disks, without IO.
//!
//! One disk does not take 4–16 Gb/s, so a recorder cuts the stream into blocks and scatters
//! them over many mount points; a reader finds the pieces and puts them back in order. Two
//! layouts are in use, and both are read by every correlator tool:
//!
//! - **FlexBuff vbs** (jive5ab `record`/`net2vbs`, read back by `vbs2net`, `scan_check?` and the
//!   vbs_fs FUSE mount): a scan is a set of header-less chunk files,
//!   `<disk>/<scan>/<scan>.<8-digit chunk number>`, spread over the mount points; the data is
//!   the chunks concatenated in number order ([`vbs`]).
//! - **Mark6 scatter-gather** (Haystack d-plane, DiFX `mark6sg`, jive5ab `mk6://`): one file per
//!   disk per scan, `<disk>/<scan>`, a 20-byte file header, then blocks each with a block
//!   header carrying a block number that counts across the whole file set ([`mk6`]).
//!
//! This crate holds what does not touch a disk: names ([`name`]), the headers as smoltcp-style
//! `Packet`/`Repr` with byte-array tests ([`mk6`]), the writer's block planning and disk choice
//! ([`plan`]), the reader's reassembly order and gap detection ([`index`]), what a scan's first
//! and last frames say ([`info`]), and the result types ([`results`]). The IO lives in the
//! shells: `recording` writes and reads them.

pub mod check;
pub mod datastream;
pub mod index;
pub mod info;
pub mod mk6;
pub mod name;
pub mod plan;
pub mod results;
pub mod vbs;

use serde::{Deserialize, Serialize};

/// A recording layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// FlexBuff vbs: header-less chunk files `<disk>/<scan>/<scan>.%08u`.
    Vbs,
    /// Mark6 scatter-gather: one file `<disk>/<scan>` per disk, block headers inside.
    Mk6,
}

impl Layout {
    /// The name used in URLs (`vbs://SCAN`), flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Vbs => "vbs",
            Layout::Mk6 => "mk6",
        }
    }

    /// The layout named `s` (`vbs`, `mk6`).
    pub fn parse(s: &str) -> Option<Layout> {
        match s {
            "vbs" => Some(Layout::Vbs),
            "mk6" => Some(Layout::Mk6),
            _ => None,
        }
    }

    /// Where a machine of this kind mounts its disks, as a glob: FlexBuff `/mnt/disk*`, Mark6
    /// `/mnt/disks/*/*` (module, disk).
    pub fn default_disks(self) -> &'static str {
        match self {
            Layout::Vbs => "/mnt/disk*",
            Layout::Mk6 => "/mnt/disks/*/*",
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A recorded scan named by URL: `vbs://SCAN` or `mk6://SCAN`; `None` for anything else (a
/// plain file path).
pub fn parse_scan_url(s: &str) -> Option<(Layout, &str)> {
    let (scheme, rest) = s.split_once("://")?;
    Some((Layout::parse(scheme)?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_layout_and_a_scan() {
        assert_eq!(
            parse_scan_url("vbs://ev123_no0001"),
            Some((Layout::Vbs, "ev123_no0001"))
        );
        assert_eq!(parse_scan_url("mk6://x"), Some((Layout::Mk6, "x")));
        assert_eq!(parse_scan_url("data/Ef.vdif"), None);
        assert_eq!(parse_scan_url("ftp://x"), None);
        assert_eq!(Layout::parse(Layout::Mk6.as_str()), Some(Layout::Mk6));
        assert_eq!(serde_json_layout(Layout::Vbs), "\"vbs\"");
    }

    fn serde_json_layout(l: Layout) -> String {
        serde_json::to_string(&l).unwrap()
    }
}

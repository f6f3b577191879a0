//! Every scan on a set of disks (what `scan_dir?`/`scan_check?` on a FlexBuff and `list` on a
//! Mark6 show): vbs scans are directories holding chunks of their own name, Mark6 scans are
//! files starting with the sync word (listed as malformed, with why, when nothing of them can
//! be read).

use std::collections::BTreeSet;
use std::io::Read;
use std::path::PathBuf;

use scanfmt::mk6::SYNC_WORD;
use scanfmt::results::{ScanInfo, ScanList};
use scanfmt::{name, Layout};

use safedir::{Dir, EntryKind};

use super::Scan;
use crate::error::ScanError;

/// Most scans listed (a disk set with more is described by its first ones, by name).
pub const MAX_SCANS: usize = 100_000;

/// The scans of `layouts` on `disks`, by name, each described by [`Scan::info`].
pub fn list_scans(layouts: &[Layout], disks: &[PathBuf]) -> ScanList {
    let mut names: BTreeSet<(String, Layout)> = BTreeSet::new();
    for disk in disks {
        let Ok(dir) = Dir::open(disk) else { continue };
        let Ok(entries) = dir.entries() else { continue };
        for (n, kind) in entries {
            if names.len() >= MAX_SCANS || !name::is_valid(&n) {
                continue;
            }
            for &layout in layouts {
                let is = match (layout, kind) {
                    (Layout::Vbs, EntryKind::Dir) => true,
                    (Layout::Mk6, EntryKind::File) => starts_with_sync(&dir, &n),
                    _ => false,
                };
                if is {
                    names.insert((n.clone(), layout));
                }
            }
        }
    }
    let scans = names
        .into_iter()
        .filter_map(|(n, layout)| match Scan::open(layout, &n, disks) {
            Ok(s) => Some(s.info()),
            // A file that starts like a Mark6 file but cannot be read as one (or a scan
            // directory that cannot be read) is listed with why, not left out.
            Err(ScanError::Unreadable { problems, .. }) => Some(ScanInfo {
                url: format!("{layout}://{n}"),
                scan: n,
                layout: Some(layout),
                problems: problems.iter().map(|p| format!("malformed, not read: {p}")).collect(),
                ..ScanInfo::default()
            }),
            // A directory without chunks of its own name is no vbs scan: NotFound, left out.
            Err(_) => None,
        })
        .collect();
    ScanList {
        disks: disks.iter().map(|d| d.display().to_string()).collect(),
        scans,
    }
}

fn starts_with_sync(dir: &Dir, file: &str) -> bool {
    let mut b = [0u8; 4];
    dir.open_file(file)
        .map_err(safedir::DirError::into_io)
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok_and(|()| u32::from_le_bytes(b) == SYNC_WORD)
}

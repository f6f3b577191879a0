//! The set disks' space: free and total per disk (what `rtime?`, `/status.json` and the metrics
//! say), the set's free space with each file system counted once, and the time it lasts at the
//! mode's rate.

use std::path::PathBuf;

use vsis::mode::Mode;
use vsis::status::DiskSpace;

/// The set disks' space.
#[derive(Debug, Default)]
pub(crate) struct SetSpace {
    /// Each disk that answered, in the set's order.
    pub(crate) disks: Vec<DiskSpace>,
    /// Free bytes of the set, each file system once (four directories on one disk are one
    /// disk's space, not four).
    pub(crate) free: u64,
    /// Size of the set, each file system once.
    pub(crate) total: u64,
}

/// Look at each disk of `disks` (statvfs below a descriptor; a disk that cannot be opened is
/// left out).
pub(crate) fn look(disks: &[PathBuf]) -> SetSpace {
    let mut seen = Vec::new();
    let mut set = SetSpace::default();
    for d in disks {
        let Ok(dir) = safedir::Dir::open(d) else { continue };
        let (Ok((dev, _)), Ok(space)) = (dir.identity(), dir.space()) else {
            continue;
        };
        set.disks.push(DiskSpace {
            path: d.display().to_string(),
            free_bytes: space.free,
            total_bytes: space.total,
        });
        if !seen.contains(&dev) {
            seen.push(dev);
            set.free += space.free;
            set.total += space.total;
        }
    }
    set
}

/// The rate a recording in mode `m` fills disks at: its data rate with the frames' headers.
pub(crate) fn recorded_rate_bps(m: &Mode) -> f64 {
    m.rate_bps() * f64::from(m.frame_len()) / f64::from(m.payload.max(1))
}

/// Seconds until the set is full at mode `m`'s rate.
pub(crate) fn time_left_s(set: &SetSpace, m: &Mode) -> f64 {
    set.free as f64 * 8.0 / recorded_rate_bps(m).max(1.0)
}

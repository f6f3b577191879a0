//! The set disks' space: free and total per disk (what `rtime?`, `/status.json` and the metrics
//! say), the set's free space with each file system counted once, and the time it lasts at the
//! rate the set fills at: the recording's measured rate while one runs, the mode's otherwise.

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

/// One disk's free space as `rtime?` and `status?` end with it: `PATH=GB`.
pub(crate) fn free_field(d: &DiskSpace) -> String {
    format!("{}={}GB", d.path, vsis::evlbi::cpp_double(d.free_bytes as f64 / 1e9))
}

/// The rate a recording in mode `m` fills disks at: its data rate with the frames' headers.
pub(crate) fn recorded_rate_bps(m: &Mode) -> f64 {
    m.rate_bps() * f64::from(m.frame_len()) / f64::from(m.payload.max(1))
}

/// A recording's progress: seconds since it started and bytes written to the set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    pub(crate) elapsed_s: f64,
    pub(crate) written: u64,
}

/// The rate the set fills at, and whether it was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FillRate {
    /// Bits a second onto the disks.
    pub(crate) bps: f64,
    /// From what a running recording wrote (else the mode's rate, headers included).
    pub(crate) measured: bool,
}

/// A recording must have run this long before its own rate is trusted over the mode's: the
/// first interval's counts may cover a few frames only.
const MEASURE_AFTER_S: f64 = 1.0;

/// The rate the set fills at: a recording that has run at least a second and written
/// something fills it at what it wrote over that time (a mode says 4 Gb/s where the station
/// sends fewer threads, and a sender may fall short); idle, in its first second, or having
/// written nothing yet, at mode `m`'s rate; `None` without either.
pub(crate) fn fill_rate(m: Option<&Mode>, recording: Option<Progress>) -> Option<FillRate> {
    if let Some(p) = recording.filter(|p| p.elapsed_s >= MEASURE_AFTER_S && p.written > 0) {
        return Some(FillRate {
            bps: p.written as f64 * 8.0 / p.elapsed_s,
            measured: true,
        });
    }
    m.map(|m| FillRate {
        bps: recorded_rate_bps(m),
        measured: false,
    })
}

/// Seconds until the set is full at `rate`.
pub(crate) fn time_left_s(set: &SetSpace, rate: FillRate) -> f64 {
    set.free as f64 * 8.0 / rate.bps.max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_past_its_first_second_fills_at_what_it_wrote() {
        let m = Mode::parse("VDIF_8000-2048-16-2").unwrap().unwrap();
        let mode = recorded_rate_bps(&m);
        let at = |elapsed_s, written| fill_rate(Some(&m), Some(Progress { elapsed_s, written }));
        assert_eq!(fill_rate(None, None), None);
        assert_eq!(fill_rate(Some(&m), None).unwrap().bps, mode);
        assert!(!at(0.5, 1_000_000).unwrap().measured, "too soon");
        assert!(!at(3.0, 0).unwrap().measured, "nothing written yet");
        let r = at(2.0, 16_000_000).unwrap();
        assert!(r.measured);
        assert_eq!(r.bps, 64e6);
        let set = SetSpace {
            free: 8_000_000,
            ..SetSpace::default()
        };
        assert_eq!(time_left_s(&set, r), 1.0);
    }
}

//! `scan_check?` on a recorded scan: samples read where [`scanfmt::check`] needs them — the
//! first and last `sample` bytes of the range, and one around the first second boundary — so
//! a check of a 20 GB scan reads three megabytes.

use std::io;

use scanfmt::check::{Ends, Sample, ScanCheck};

use super::Scan;

/// Second boundaries searched for the frame rate when frames lost across the first hide it.
const MAX_BOUNDARIES: u64 = 8;

/// Most bytes one sample reads (jive5ab: "maximum value for bytes to read is 2 GB"; a recorder
/// answering the Field System must not read that much in one request).
pub const MAX_SAMPLE: u64 = 64 << 20;

/// Check `[start, end)` of `scan` with samples of `sample` bytes (jive5ab reads 1 000 000 by
/// default); `Ok(None)` when the samples hold no VDIF.
pub fn check_range(scan: &Scan, start: u64, end: u64, sample: u64) -> io::Result<Option<ScanCheck>> {
    check_range_at_rate(scan, start, end, sample, None)
}

/// [`check_range`], taking `frames_per_second` (per thread, from a check of the whole scan)
/// when the range is too short to show it. An empty or reversed range (a start at or past the
/// end, or past the scan) holds no VDIF: `Ok(None)`.
pub fn check_range_at_rate(
    scan: &Scan,
    start: u64,
    end: u64,
    sample: u64,
    frames_per_second: Option<vdif::FrameRate>,
) -> io::Result<Option<ScanCheck>> {
    let end = end.min(scan.len());
    if start >= end {
        // Every clamp below needs start ≤ end − sample (a start past the end panicked the
        // daemon's connection thread on `data_check?`).
        return Ok(None);
    }
    let sample = sample.clamp(64, MAX_SAMPLE).min(end.saturating_sub(start));
    let read = |at: u64| -> io::Result<Vec<u8>> {
        let at = at.clamp(start, end.saturating_sub(sample));
        let mut buf = vec![0u8; sample as usize];
        let mut got = 0;
        while got < buf.len() {
            match scan.read_at(&mut buf[got..], at + got as u64)? {
                0 => break,
                n => got += n,
            }
        }
        buf.truncate(got);
        Ok(buf)
    };
    let head = read(start)?;
    let tail_at = end.saturating_sub(sample).max(start);
    let tail = read(tail_at)?;
    let Some(mut ends) = Ends::new(
        Sample {
            offset: start,
            bytes: &head,
        },
        Sample {
            offset: tail_at,
            bytes: &tail,
        },
    ) else {
        return Ok(None);
    };
    if let Some(n) = frames_per_second {
        ends.assume_rate(n);
    }
    if let Some(p) = ends.boundary_probe() {
        let at = p.saturating_sub(sample / 2).clamp(start, end.saturating_sub(sample));
        let probe = read(at)?;
        ends.add(Sample {
            offset: at,
            bytes: &probe,
        });
        // Frames lost before the boundary (a recorder that drops datagrams writes no gap) move
        // it from where the probe looked: search for it, halving the range, a sample a step
        // (about 25 steps over 20 GB). Frames lost across it (a backend held up for 100 ms)
        // hide it: then the next boundaries, up to MAX_BOUNDARIES of them.
        for k in 0..ends.seconds_spanned().min(MAX_BOUNDARIES) {
            let (mut lo, mut hi) = (start, end);
            for _ in 0..64 {
                if ends.knows_rate() || hi.saturating_sub(lo) <= sample / 2 {
                    break;
                }
                let mid = lo + (hi - lo) / 2;
                let at = mid.saturating_sub(sample / 2).clamp(start, end.saturating_sub(sample));
                let bytes = read(at)?;
                let s = Sample {
                    offset: at,
                    bytes: &bytes,
                };
                ends.add(s);
                match ends.in_second(s, k) {
                    Some(true) => lo = mid,
                    Some(false) => hi = mid,
                    None => break,
                }
            }
            if ends.knows_rate() {
                break;
            }
        }
    }
    Ok(Some(ends.check()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: usize = 1032;
    const FPS: u32 = 4000;

    /// One thread at FPS for `seconds`, the frames of second 0 numbered `lost` left out (as a
    /// recorder that drops datagrams writes them: no gap).
    fn recording(seconds: u32, lost: std::ops::Range<u32>) -> Vec<u8> {
        recording_losing(seconds, lost)
    }

    /// One thread at FPS for `seconds`, the frames whose index from the start is in `lost`
    /// left out.
    fn recording_losing(seconds: u32, lost: std::ops::Range<u32>) -> Vec<u8> {
        // 32 Mb/s, 2 bits, 8 channels, 1 thread, 1000-byte payloads: FPS frames a second.
        let layout = vdif::FrameLayout::new(32e6, 2, 8, 1, FRAME - 32).unwrap();
        let mut out = Vec::new();
        for s in 0..seconds {
            for n in (0..FPS).filter(|n| !lost.contains(&(s * FPS + n))) {
                let mut h = layout.header(u16::from_be_bytes(*b"Ef"));
                h.ref_epoch = 52;
                h.seconds = 100 + s;
                h.frame_number = n;
                out.extend(h.to_bytes().unwrap());
                out.resize(out.len() + FRAME - 32, 0x33);
            }
        }
        out
    }

    fn check(data: &[u8]) -> ScanCheck {
        let t = tempfile::tempdir().unwrap();
        let disk = t.path().join("disk0");
        std::fs::create_dir_all(disk.join("sc")).unwrap();
        std::fs::write(disk.join("sc").join("sc.00000000"), data).unwrap();
        let scan = Scan::open(scanfmt::Layout::Vbs, "sc", &[disk]).unwrap();
        check_range(&scan, 0, scan.len(), 64 * FRAME as u64).unwrap().unwrap()
    }

    /// Ranges that hold nothing — empty, reversed, past the scan's end — check as no VDIF, never
    /// a panic (`scan_set = SCAN : +40000000` on a 32 MB scan, then `data_check?`, panicked the
    /// daemon's connection thread in `clamp`).
    #[test]
    fn empty_reversed_and_past_the_end_ranges_hold_nothing() {
        let t = tempfile::tempdir().unwrap();
        let disk = t.path().join("disk0");
        std::fs::create_dir_all(disk.join("sc")).unwrap();
        std::fs::write(disk.join("sc").join("sc.00000000"), recording(1, 0..0)).unwrap();
        let scan = Scan::open(scanfmt::Layout::Vbs, "sc", &[disk]).unwrap();
        let len = scan.len();
        for (start, end) in [(len + 100, len), (len, len), (500, 400), (len + 1, u64::MAX), (0, 0)] {
            for fps in [None, vdif::FrameRate::new(FPS).ok()] {
                let c = check_range_at_rate(&scan, start, end, 1_000_000, fps).unwrap();
                assert!(c.is_none(), "{start}-{end}: {c:?}");
            }
        }
        assert!(check_range(&scan, 0, len, 64 * FRAME as u64).unwrap().is_some());
    }

    /// A third of the first second lost (jive5ab's recording on a busy host): the probe at the
    /// lossless place misses the boundary by 1333 frames and the search finds it. Before, the
    /// rate was unknown (`….***s : ?`) where jive5ab's guess knew it.
    #[test]
    fn the_rate_is_found_when_frames_lost_before_the_boundary_moved_it() {
        let c = check(&recording(3, 100..1433));
        assert_eq!(c.frames_per_second, vdif::FrameRate::new(FPS).ok(), "{c:?}");
        assert_eq!(c.missing_bytes, Some(1333 * FRAME as i64), "{c:?}");
        let whole = check(&recording(3, 0..0));
        assert_eq!(
            (whole.frames_per_second, whole.missing_bytes),
            (vdif::FrameRate::new(FPS).ok(), Some(0))
        );
    }

    /// 100 ms lost across the first second boundary (a backend simulator held up on a loaded
    /// host skips that much): the first boundary shows no rate, the next does. Before, the rate
    /// was unknown (`?`) and the Field System logged it.
    #[test]
    fn the_rate_is_found_at_a_later_boundary_when_frames_lost_across_the_first_hide_it() {
        let c = check(&recording_losing(4, FPS - 200..FPS + 200));
        assert_eq!(c.frames_per_second, vdif::FrameRate::new(FPS).ok(), "{c:?}");
        assert_eq!(c.missing_bytes, Some(400 * FRAME as i64), "{c:?}");
        // Across the first two boundaries: the third.
        let c = check(&recording_losing(4, FPS - 200..2 * FPS + 200));
        assert_eq!(c.frames_per_second, vdif::FrameRate::new(FPS).ok(), "{c:?}");
    }
}

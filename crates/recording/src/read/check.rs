//! `scan_check?` on a recorded scan: samples read where [`scanfmt::check`] needs them — the
//! first and last `sample` bytes of the range, and one around the first second boundary — so
//! a check of a 20 GB scan reads three megabytes.

use std::io;

use scanfmt::check::{Ends, Sample, ScanCheck};

use crate::Scan;

/// Most bytes one sample reads (jive5ab: "maximum value for bytes to read is 2 GB"; a recorder
/// answering the Field System must not read that much in one request).
pub const MAX_SAMPLE: u64 = 64 << 20;

/// Check `[start, end)` of `scan` with samples of `sample` bytes (jive5ab reads 1 000 000 by
/// default); `Ok(None)` when the samples hold no VDIF.
pub fn check_range(scan: &Scan, start: u64, end: u64, sample: u64) -> io::Result<Option<ScanCheck>> {
    check_range_at_rate(scan, start, end, sample, None)
}

/// [`check_range`], taking `frames_per_second` (per thread, from a check of the whole scan)
/// when the range is too short to show it.
pub fn check_range_at_rate(
    scan: &Scan,
    start: u64,
    end: u64,
    sample: u64,
    frames_per_second: Option<u32>,
) -> io::Result<Option<ScanCheck>> {
    let end = end.min(scan.len());
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
    }
    Ok(Some(ends.check()))
}

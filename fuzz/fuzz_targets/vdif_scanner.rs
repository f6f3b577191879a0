//! Frame scanner, the VDIF check and format naming over arbitrary streams: every byte is
//! accounted for once, nothing panics, every frame believed belongs to a run of frames back to
//! back (three at least, or the whole stream: issue 28), and the inspection report never claims
//! more frames than were scanned.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vdif::scan::CONFIRM_FRAMES;
use vdif::{CheckedFrames, FrameScanner, ScanEvent};

fuzz_target!(|data: &[u8]| {
    let mut total = 0u64;
    let mut frames = 0u64;
    // Runs of frames back to back (a truncated frame right after one ends a run as its last):
    // (offset of the first, frames, end).
    let mut runs: Vec<(u64, usize, u64)> = Vec::new();
    let mut run_open = false;
    for ev in FrameScanner::new(data) {
        match ev.expect("reading a slice cannot fail") {
            ScanEvent::Frame { offset, bytes, .. } => {
                frames += 1;
                total += bytes.len() as u64;
                let end = offset + bytes.len() as u64;
                match runs.last_mut() {
                    Some(r) if run_open && r.2 == offset => (r.1, r.2) = (r.1 + 1, end),
                    _ => runs.push((offset, 1, end)),
                }
                run_open = true;
            }
            ScanEvent::Truncated { offset, len, .. } => {
                total += len;
                match runs.last_mut() {
                    Some(r) if run_open && r.2 == offset => (r.1, r.2) = (r.1 + 1, offset + len),
                    _ => runs.push((offset, 1, offset + len)),
                }
                run_open = false;
            }
            ScanEvent::Garbage { len, .. } => {
                total += len;
                run_open = false;
            }
        }
    }
    assert_eq!(total, data.len() as u64);
    for &(start, n, end) in &runs {
        assert!(
            n >= CONFIRM_FRAMES || (start == 0 && end == data.len() as u64),
            "a run of {n} frame(s) at {start}..{end} of {} bytes",
            data.len()
        );
    }
    if let Ok(r) = vdif::inspect::inspect(data, None, |_, _| {}) {
        assert_eq!(r.frames, frames);
    }
    let mut checked = CheckedFrames::new(data, None);
    let seen = checked.by_ref().filter(|e| matches!(e, Ok(ScanEvent::Frame { .. }))).count() as u64;
    assert_eq!(seen, frames);
    let _ = checked.finish();
    let _ = vdif::formats::identify(data, true);
});

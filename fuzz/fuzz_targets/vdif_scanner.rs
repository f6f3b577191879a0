//! Frame scanner and file inspection over arbitrary streams: every byte is accounted for once,
//! nothing panics, and the inspection report never claims more frames than were scanned.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vdif::{FrameScanner, ScanEvent};

fuzz_target!(|data: &[u8]| {
    let mut total = 0u64;
    let mut frames = 0u64;
    for ev in FrameScanner::new(data) {
        match ev.expect("reading a slice cannot fail") {
            ScanEvent::Frame { bytes, .. } => {
                frames += 1;
                total += bytes.len() as u64
            }
            ScanEvent::Garbage { len, .. } | ScanEvent::Truncated { len, .. } => total += len,
        }
    }
    assert_eq!(total, data.len() as u64);
    if let Ok(r) = vdif::inspect::inspect(data, None, |_, _| {}) {
        assert_eq!(r.frames, frames);
    }
});

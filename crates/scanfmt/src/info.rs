//! What a scan's first and last frames tell an operator (jive5ab's `scan_check?`): station,
//! frame size, start and stop time — read from two VDIF headers, not from the whole scan.

use serde::{Deserialize, Serialize};
use vdif::VdifHeader;

/// The time span of a scan from its first and last frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameSpan {
    /// Station of the first frame.
    pub station: String,
    /// Thread of the first frame.
    pub first_thread: u16,
    /// Frame length of the first frame, bytes.
    pub frame_bytes: u64,
    /// The first frame's second, UTC.
    pub start_utc: String,
    /// The first frame's number within its second.
    pub start_frame: u32,
    /// The last frame's second, UTC.
    pub stop_utc: String,
    /// The last frame's number within its second.
    pub stop_frame: u32,
    /// Seconds from the first frame's second to the last frame's (whole seconds; the frame
    /// numbers give the rest).
    pub seconds: i64,
}

impl FrameSpan {
    /// From the first frame's bytes and the bytes of the frame at the scan's last whole-frame
    /// offset (the caller reads [`FrameSpan::last_frame_offset`]); `None` when the first bytes
    /// are no VDIF header.
    pub fn from_frames(first: &[u8], last: Option<&[u8]>) -> Option<FrameSpan> {
        let h = VdifHeader::parse_valid(first).ok()?;
        let l = last
            .and_then(|b| VdifHeader::parse_valid(b).ok())
            .filter(|l| l.ref_epoch == h.ref_epoch || l.seconds >= h.seconds)
            .unwrap_or(h);
        Some(FrameSpan {
            station: h.station_id.to_string(),
            first_thread: h.thread_id,
            frame_bytes: h.frame_len() as u64,
            start_utc: second(h.ref_epoch, h.seconds),
            start_frame: h.frame_number,
            stop_utc: second(l.ref_epoch, l.seconds),
            stop_frame: l.frame_number,
            seconds: l.unix_seconds() - h.unix_seconds(),
        })
    }

    /// Where the last whole frame of a scan of `len` bytes of `frame_len`-byte frames starts.
    pub fn last_frame_offset(len: u64, frame_len: u64) -> Option<u64> {
        let frames = len.checked_div(frame_len)?;
        frames.checked_sub(1).map(|f| f * frame_len)
    }
}

/// `2026-11-23T12:00:00Z`.
fn second(epoch: u8, seconds: u32) -> String {
    let iso = vdif::time::iso(epoch, seconds, 0.0);
    match iso.split_once('.') {
        Some((s, _)) => format!("{s}Z"),
        None => iso,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seconds: u32, number: u32) -> Vec<u8> {
        let h = VdifHeader {
            invalid: false,
            legacy: false,
            seconds,
            ref_epoch: 53,
            unassigned: 0,
            frame_number: number,
            version: 0,
            log2_channels: 3,
            frame_len_units: 1004,
            complex: false,
            bits_per_sample: 2,
            thread_id: 1,
            station_id: vdif::StationId(u16::from_be_bytes(*b"Ef")),
            extended: [0; 4],
        };
        let mut v = h.to_bytes().unwrap();
        v.resize(8032, 0);
        v
    }

    #[test]
    fn the_span_comes_from_the_first_and_last_headers() {
        let s = FrameSpan::from_frames(&frame(100, 0), Some(&frame(102, 1999))).unwrap();
        assert_eq!(s.station, "Ef");
        assert_eq!(s.frame_bytes, 8032);
        assert_eq!(s.start_utc, "2026-07-01T00:01:40Z");
        assert_eq!(
            (s.stop_utc.as_str(), s.stop_frame, s.seconds),
            ("2026-07-01T00:01:42Z", 1999, 2)
        );
        assert_eq!(FrameSpan::from_frames(&[0u8; 10], None), None);
        let one = FrameSpan::from_frames(&frame(5, 3), Some(b"garbage")).unwrap();
        assert_eq!((one.start_frame, one.stop_frame, one.seconds), (3, 3, 0));
        assert_eq!(FrameSpan::last_frame_offset(3 * 8032 + 5, 8032), Some(2 * 8032));
        assert_eq!(FrameSpan::last_frame_offset(10, 8032), None);
        assert_eq!(FrameSpan::last_frame_offset(10, 0), None);
    }
}

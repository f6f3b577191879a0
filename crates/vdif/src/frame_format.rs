//! The frame formats a live stream carries, and what the live path needs of each: the frame's
//! place in time order, and the header of a frame made up in a missing one's place.
//!
//! The live path (the receiver's time-ordering window, the relay, their intake) orders frames
//! by a [`VdifHeader`]: second, frame number, thread, and the format fields every frame of a
//! stream shares. A Mark5B frame is ordered by its *order header*
//! ([`FrameFormat::order_header`]): a legacy (16-byte) VDIF header of the same length
//! (10 016 bytes), thread 0 (Mark5B is one stream), station 0, whose second is the frame's
//! second of the time code's 1000-day cycle ([`Mark5bHeader::cycle_seconds`]) and whose frame
//! number is the frame's. The frames themselves are carried as they came, byte for byte; only a
//! frame made up for a missing one is written from the order header
//! ([`FrameFormat::write_fill_header`]): for Mark5B, as jive5ab's net2sfxc "faker" writes one,
//! a valid header at the missing frame's time (user bits 0) over data of the fill pattern,
//! which SFXC's Mark5B reader marks invalid.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::HeaderError;
use crate::formats::MARK5B_FRAME_LEN;
use crate::header::{VdifHeader, LEGACY_HEADER_LEN};
use crate::mark5b::{Mark5bError, Mark5bHeader, MARK5B_HEADER_LEN};
use crate::rate::FrameRate;

/// The format of a stream's frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameFormat {
    /// VDIF 1.1.1 frames.
    #[default]
    Vdif,
    /// Mark5B frames (10 016 bytes).
    Mark5b,
}

impl std::fmt::Display for FrameFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FrameFormat::Vdif => "VDIF",
            FrameFormat::Mark5b => "Mark5B",
        })
    }
}

/// A frame that is not one of its stream's format.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// A VDIF header that does not parse or hold together.
    #[error(transparent)]
    Vdif(#[from] HeaderError),
    /// A Mark5B header that does not parse.
    #[error(transparent)]
    Mark5b(#[from] Mark5bError),
    /// A Mark5B frame of another length.
    #[error("{0} bytes is no Mark5B frame (10016: a 16-byte header and 10000 bytes of data)")]
    Mark5bLength(usize),
}

impl FrameFormat {
    /// The header `frame` is ordered by in the live path (see the module docs): a VDIF frame's
    /// own header (parsed and validated), a Mark5B frame's order header.
    pub fn order_header(self, frame: &[u8]) -> Result<VdifHeader, FrameError> {
        match self {
            FrameFormat::Vdif => Ok(VdifHeader::parse_valid(frame)?),
            FrameFormat::Mark5b => {
                let h = Mark5bHeader::parse(frame)?;
                if frame.len() != MARK5B_FRAME_LEN {
                    return Err(FrameError::Mark5bLength(frame.len()));
                }
                Ok(mark5b_order_header(&h))
            }
        }
    }

    /// Write over the header bytes of `frame` (a fill frame of the stream, its data the fill
    /// pattern) the header of a made-up frame at the time and thread of `order` (an order
    /// header of the stream, the invalid bit set), at `fps` frames per second. VDIF: `order`
    /// itself. Mark5B: a valid Mark5B header at that time (VDIF has the invalid bit; Mark5B
    /// readers tell a made-up frame by its data).
    pub fn write_fill_header(self, order: &VdifHeader, fps: FrameRate, frame: &mut [u8]) -> Result<(), FrameError> {
        match self {
            FrameFormat::Vdif => {
                let need = order.header_len();
                let have = frame.len();
                let head = frame.get_mut(..need).ok_or(HeaderError::TooShort { have, need })?;
                Ok(order.emit(head)?)
            }
            FrameFormat::Mark5b => {
                let h = Mark5bHeader::at_cycle_seconds(u64::from(order.seconds), u64::from(order.frame_number), fps)?;
                Ok(h.emit(frame)?)
            }
        }
    }

    /// Bytes of a header of this format (VDIF: the longer, non-legacy one).
    pub fn header_len(self) -> usize {
        match self {
            FrameFormat::Vdif => crate::header::HEADER_LEN,
            FrameFormat::Mark5b => MARK5B_HEADER_LEN,
        }
    }
}

/// The order header of a Mark5B frame (see the module docs).
fn mark5b_order_header(h: &Mark5bHeader) -> VdifHeader {
    VdifHeader {
        invalid: false,
        legacy: true,
        // At most 1000 × 86 400 + 99 999 < 2^30.
        seconds: h.cycle_seconds() as u32,
        ref_epoch: 0,
        unassigned: 0,
        frame_number: u32::from(h.frame_number),
        version: 0,
        log2_channels: 0,
        frame_len_units: (MARK5B_FRAME_LEN / 8) as u32,
        complex: false,
        bits_per_sample: 1,
        thread_id: 0,
        station_id: crate::station::StationId(0),
        extended: [0; 4],
    }
}

const _: () = assert!(MARK5B_HEADER_LEN == LEGACY_HEADER_LEN && MARK5B_FRAME_LEN.is_multiple_of(8));

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(h: &Mark5bHeader) -> Vec<u8> {
        let mut f = vec![0x5au8; MARK5B_FRAME_LEN];
        h.emit(&mut f).unwrap();
        f
    }

    #[test]
    fn mark5b_frames_order_by_their_time_code() {
        let fps = FrameRate::new(400).unwrap();
        let a = Mark5bHeader::at(373, 86_399, 399, fps).unwrap();
        let b = Mark5bHeader::at(374, 0, 0, fps).unwrap();
        let (oa, ob) = (
            FrameFormat::Mark5b.order_header(&frame(&a)).unwrap(),
            FrameFormat::Mark5b.order_header(&frame(&b)).unwrap(),
        );
        assert_eq!(ob.frame_index(fps), oa.frame_index(fps) + 1);
        assert_eq!((oa.frame_len(), oa.thread_id, oa.legacy), (10_016, 0, true));
        assert!(oa.validate().is_ok());
        // A fill at b's time is b's header (user bits 0), CRC and all.
        let mut fill = vec![0u8; MARK5B_FRAME_LEN];
        let mut order = ob;
        order.invalid = true;
        FrameFormat::Mark5b.write_fill_header(&order, fps, &mut fill).unwrap();
        assert_eq!(Mark5bHeader::parse(&fill), Ok(b));
        // Not Mark5B: short, long, no sync word.
        let f = frame(&a);
        assert_eq!(
            FrameFormat::Mark5b.order_header(&f[..10_000]),
            Err(FrameError::Mark5bLength(10_000))
        );
        assert!(FrameFormat::Mark5b.order_header(&[0u8; 10_016]).is_err());
    }
}

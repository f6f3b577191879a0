//! VDIF data-frame header: parse, validate and emit.
//!
//! Layout per the VDIF specification, release 1.1.1 (June 2014), §3 and Table 1. All words are
//! 32-bit little-endian; bit 31 is the most significant bit.
//!
//! | word | bits  | field                                                        |
//! |------|-------|--------------------------------------------------------------|
//! | 0    | 31    | invalid data                                                 |
//! | 0    | 30    | legacy mode (header is 16 bytes, words 0–3 only)             |
//! | 0    | 29–0  | seconds since reference epoch                                |
//! | 1    | 31–30 | unassigned (should be 0)                                     |
//! | 1    | 29–24 | reference epoch (half-years since 2000-01-01)                |
//! | 1    | 23–0  | data-frame number within the second                          |
//! | 2    | 31–29 | VDIF version                                                 |
//! | 2    | 28–24 | log2(number of channels)                                     |
//! | 2    | 23–0  | data-frame length in units of 8 bytes, header included       |
//! | 3    | 31    | data type (0 real, 1 complex)                                |
//! | 3    | 30–26 | bits per sample − 1                                          |
//! | 3    | 25–16 | thread id                                                    |
//! | 3    | 15–0  | station id                                                   |
//! | 4    | 31–24 | extended data version (EDV)                                  |
//! | 4–7  |       | extended user data, kept here as raw words                   |

use serde::{Deserialize, Serialize};

use crate::error::HeaderError;
use crate::rate::FrameRate;
use crate::station::StationId;

pub use crate::sizes::{HEADER_LEN, LEGACY_HEADER_LEN};
/// Largest frame the 24-bit length field can describe (2^24 − 1 units of 8 bytes).
pub const MAX_FRAME_LEN: usize = ((1 << 24) - 1) * 8;

/// A decoded VDIF header. Field widths are those of the specification; `emit` masks nothing, so
/// [`VdifHeader::check_ranges`] must pass before a header built by hand is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VdifHeader {
    /// Word 0 bit 31: the data in this frame are invalid (e.g. a lost frame filled in).
    pub invalid: bool,
    /// Word 0 bit 30: legacy mode, 16-byte header.
    pub legacy: bool,
    /// Seconds since the reference epoch (30 bits).
    pub seconds: u32,
    /// Reference epoch: number of half-years since 2000-01-01 00:00 UTC (6 bits).
    pub ref_epoch: u8,
    /// Word 1 bits 31–30, unassigned and "should be 0"; kept so that emit reproduces any input.
    pub unassigned: u8,
    /// Data-frame number within the second, starting at 0 (24 bits).
    pub frame_number: u32,
    /// VDIF version number (3 bits).
    pub version: u8,
    /// log2 of the number of channels in this thread (5 bits).
    pub log2_channels: u8,
    /// Frame length including the header, in units of 8 bytes (24 bits).
    pub frame_len_units: u32,
    /// Complex (true) or real (false) samples.
    pub complex: bool,
    /// Bits per sample, 1..=32 (stored on the wire minus one).
    pub bits_per_sample: u8,
    /// Thread id (10 bits).
    pub thread_id: u16,
    /// Station id: two ASCII characters (first in the high byte) or a number.
    pub station_id: StationId,
    /// Words 4–7 as read (EDV in the top byte of word 4). Zero in legacy mode.
    pub extended: [u32; 4],
}

impl VdifHeader {
    /// Header length on the wire for this header's mode.
    pub fn header_len(&self) -> usize {
        if self.legacy {
            LEGACY_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Frame length in bytes, header included.
    pub fn frame_len(&self) -> usize {
        self.frame_len_units as usize * 8
    }

    /// Length of the data array in bytes (0 if the length field is smaller than the header).
    pub fn data_len(&self) -> usize {
        self.frame_len().saturating_sub(self.header_len())
    }

    /// Number of channels in this thread.
    pub fn channels(&self) -> u32 {
        1u32 << self.log2_channels.min(31)
    }

    /// Extended data version (top byte of word 4).
    pub fn edv(&self) -> u8 {
        (self.extended[0] >> 24) as u8
    }

    /// Values (a real sample, or the I or Q half of a complex one) in one time sample of all
    /// channels.
    pub fn values_per_time_sample(&self) -> u64 {
        u64::from(self.channels()) * if self.complex { 2 } else { 1 }
    }

    /// Values packed into each 32-bit word of the data array (see [`values_per_word`]).
    pub fn values_per_word(&self) -> u64 {
        values_per_word(self.bits_per_sample, self.complex) as u64
    }

    /// Time samples per frame: whole values per 32-bit word, words per frame, over the values of
    /// one time sample, rounded down (VDIF 1.1.1 §9: a value never spans two words). For
    /// 1/2/4/8/16/32 bits this is data bits / bits per time sample; for odd widths the top bits
    /// of each word are unused (5-bit complex: 3 samples per word, 468 in a 624-byte array, not
    /// 499; 468 too in a 5000-byte array of 8 channels, not 500).
    pub fn samples_per_frame(&self) -> u64 {
        (self.data_len() as u64 / 4 * self.values_per_word())
            .checked_div(self.values_per_time_sample())
            .unwrap_or(0)
    }

    /// Sample rate stated in the header by EDV 1 (NICT) and EDV 3 (VLBA) extensions, in Hz
    /// (see [`FrameRate::from_header`] for how the bits are read). Other EDVs carry no rate.
    pub fn header_sample_rate_hz(&self) -> Option<f64> {
        header_samples_per_second(self).map(|r| r as f64)
    }

    /// Frames per second per thread where the header's bits say it (EDV 1 and 3; see
    /// [`FrameRate::from_header`]).
    pub fn frame_rate(&self) -> Option<FrameRate> {
        FrameRate::from_header(self)
    }

    /// Seconds since 1970 of the frame's second, POSIX-style: the epoch's start plus the
    /// seconds field (what jive5ab and DiFX compute; see [`crate::time`] for leap seconds).
    #[inline]
    pub fn unix_seconds(&self) -> i64 {
        crate::time::epoch_unix(self.ref_epoch) + i64::from(self.seconds)
    }

    /// The frame's position in its thread's sequence: frames since 1970 at `frames_per_second`
    /// (`unix_seconds × fps + frame_number`; a time before 1970 counts as 1970).
    #[inline]
    pub fn frame_index(&self, frames_per_second: FrameRate) -> u64 {
        (self.unix_seconds().max(0) as u64) * u64::from(frames_per_second) + u64::from(self.frame_number)
    }

    /// Set the time fields to frame position `index` at `frames_per_second` (the inverse of
    /// [`VdifHeader::frame_index`]), keeping the reference epoch; seconds before the epoch or
    /// past the 30-bit field are clamped to it.
    pub fn set_frame_index(&mut self, index: u64, frames_per_second: FrameRate) {
        let fps = u64::from(frames_per_second);
        self.frame_number = (index % fps) as u32;
        let unix = i64::try_from(index / fps).unwrap_or(i64::MAX);
        self.seconds = (unix - crate::time::epoch_unix(self.ref_epoch)).clamp(0, (1 << 30) - 1) as u32;
    }

    /// When the frame's data were sampled, ns since 1970 (its second and its number's share of
    /// it at `frames_per_second`); `None` before 1970.
    pub fn unix_nanos(&self, frames_per_second: FrameRate) -> Option<u64> {
        let sub = u64::from(self.frame_number) * 1_000_000_000 / u64::from(frames_per_second);
        u64::try_from(self.unix_seconds())
            .ok()?
            .checked_mul(1_000_000_000)?
            .checked_add(sub)
    }

    /// Parse a header from the start of `bytes` (at least 16 bytes; 32 unless legacy).
    ///
    /// Only the structure is checked here; see [`VdifHeader::validate`] for consistency rules.
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderError> {
        if bytes.len() < LEGACY_HEADER_LEN {
            return Err(HeaderError::TooShort {
                have: bytes.len(),
                need: LEGACY_HEADER_LEN,
            });
        }
        let word = |i: usize| u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]);
        let (w0, w1, w2, w3) = (word(0), word(1), word(2), word(3));
        let legacy = w0 & (1 << 30) != 0;
        let mut extended = [0u32; 4];
        if !legacy {
            if bytes.len() < HEADER_LEN {
                return Err(HeaderError::TooShort {
                    have: bytes.len(),
                    need: HEADER_LEN,
                });
            }
            for (i, e) in extended.iter_mut().enumerate() {
                *e = word(4 + i);
            }
        }
        Ok(VdifHeader {
            invalid: w0 & (1 << 31) != 0,
            legacy,
            seconds: w0 & 0x3fff_ffff,
            ref_epoch: ((w1 >> 24) & 0x3f) as u8,
            unassigned: (w1 >> 30) as u8,
            frame_number: w1 & 0x00ff_ffff,
            version: (w2 >> 29) as u8,
            log2_channels: ((w2 >> 24) & 0x1f) as u8,
            frame_len_units: w2 & 0x00ff_ffff,
            complex: w3 & (1 << 31) != 0,
            bits_per_sample: (((w3 >> 26) & 0x1f) + 1) as u8,
            thread_id: ((w3 >> 16) & 0x3ff) as u16,
            station_id: StationId((w3 & 0xffff) as u16),
            extended,
        })
    }

    /// Parse and then [`validate`](Self::validate).
    pub fn parse_valid(bytes: &[u8]) -> Result<Self, HeaderError> {
        let h = Self::parse(bytes)?;
        h.validate()?;
        Ok(h)
    }

    /// Check that every field fits its width, so `emit` writes what the struct says.
    pub fn check_ranges(&self) -> Result<(), HeaderError> {
        let checks: [(&'static str, u64, u64); 9] = [
            ("seconds", u64::from(self.seconds), (1 << 30) - 1),
            ("ref_epoch", u64::from(self.ref_epoch), 63),
            ("unassigned", u64::from(self.unassigned), 3),
            ("frame_number", u64::from(self.frame_number), (1 << 24) - 1),
            ("version", u64::from(self.version), 7),
            ("log2_channels", u64::from(self.log2_channels), 31),
            ("frame_len_units", u64::from(self.frame_len_units), (1 << 24) - 1),
            ("thread_id", u64::from(self.thread_id), 1023),
            (
                "bits_per_sample - 1",
                u64::from(self.bits_per_sample.wrapping_sub(1)),
                31,
            ),
        ];
        for (field, value, max) in checks {
            if value > max {
                return Err(HeaderError::FieldOutOfRange { field, value, max });
            }
        }
        Ok(())
    }

    /// Consistency rules a frame must satisfy to be decodable (VDIF 1.1.1 §3 notes and §9):
    /// the frame is longer than its header, and for widths of 1, 2, 4, 8, 16 or 32 bits the
    /// data array holds a whole number of complete time samples. Other widths leave bits
    /// unused in every word anyway; their frames hold the whole samples that fit, the rest of
    /// the array unused, as baseband counts them (CHIME's 5-bit complex x 8 channel frames of
    /// 5000 bytes hold 468 samples).
    pub fn validate(&self) -> Result<(), HeaderError> {
        self.check_ranges()?;
        let frame_len = self.frame_len();
        if frame_len <= self.header_len() {
            return Err(HeaderError::FrameShorterThanHeader {
                frame_len,
                header_len: self.header_len(),
            });
        }
        let values = self.data_len() as u64 / 4 * self.values_per_word();
        if self.bits_per_sample.is_power_of_two() && !values.is_multiple_of(self.values_per_time_sample()) {
            return Err(HeaderError::IncompleteSamples {
                data_len: self.data_len(),
                bits_per_sample: self.bits_per_sample,
                channels: self.channels(),
                complex: self.complex,
            });
        }
        Ok(())
    }

    /// Write the header into `out` (16 or 32 bytes depending on `legacy`).
    pub fn emit(&self, out: &mut [u8]) -> Result<(), HeaderError> {
        self.check_ranges()?;
        let need = self.header_len();
        if out.len() < need {
            return Err(HeaderError::TooShort { have: out.len(), need });
        }
        let w0 = (u32::from(self.invalid) << 31) | (u32::from(self.legacy) << 30) | self.seconds;
        let w1 = (u32::from(self.unassigned) << 30) | (u32::from(self.ref_epoch) << 24) | self.frame_number;
        let w2 = (u32::from(self.version) << 29) | (u32::from(self.log2_channels) << 24) | self.frame_len_units;
        let w3 = (u32::from(self.complex) << 31)
            | (u32::from(self.bits_per_sample - 1) << 26)
            | (u32::from(self.thread_id) << 16)
            | u32::from(self.station_id.0);
        let mut words = vec![w0, w1, w2, w3];
        if !self.legacy {
            words.extend_from_slice(&self.extended);
        }
        for (i, w) in words.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }

    /// Header as a byte vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>, HeaderError> {
        let mut v = vec![0u8; self.header_len()];
        self.emit(&mut v)?;
        Ok(v)
    }
}

/// Values (real samples, or I and Q halves of complex ones) packed into one 32-bit word of a
/// data array. VDIF 1.1.1 §9 packs whole values into each word from the least significant bit
/// and leaves the top bits unused when the width does not divide 32; a complex sample keeps I
/// and Q in the same word (as baseband and mark5access read it), unless one half alone needs
/// more than 16 bits, when I and Q each take a word.
pub fn values_per_word(bits: u8, complex: bool) -> usize {
    let bits = usize::from(bits.clamp(1, 32));
    if complex {
        match 32 / (2 * bits) {
            0 => 1,
            pairs => 2 * pairs,
        }
    } else {
        32 / bits
    }
}

// The header's reading of a rate lives here, beside the bits it reads, so that `rate` (the type
// and its other sources) does not import the header: one direction between the two modules.
impl FrameRate {
    /// What the header's bits say: the sample rate of EDV 1 and EDV 3 (word 4: bit 23 the unit,
    /// 0 kHz or 1 MHz, bits 22–0 the value; the complex sample rate, half the real rate — the
    /// reading of the VLBA EDV 3 document that baseband and DiFX share) over the samples a frame
    /// holds, when that is a whole number of frames. Other EDVs carry no rate.
    pub fn from_header(h: &VdifHeader) -> Option<Self> {
        let samples_per_second = header_samples_per_second(h)?;
        let per_frame = h.samples_per_frame();
        if per_frame == 0 || !samples_per_second.is_multiple_of(per_frame) {
            return None;
        }
        let fps = u32::try_from(samples_per_second / per_frame).ok()?;
        FrameRate::new(fps).ok()
    }
}

/// Samples per second per channel stated by EDV 1 or EDV 3 (real samples; complex ones count
/// once), as a whole number.
pub(crate) fn header_samples_per_second(h: &VdifHeader) -> Option<u64> {
    if h.legacy || !matches!(h.edv(), 1 | 3) {
        return None;
    }
    let w = h.extended[0];
    let value = u64::from(w & 0x7f_ffff);
    let unit = if w & 0x80_0000 != 0 { 1_000_000 } else { 1_000 };
    let rate = value * unit * if h.complex { 1 } else { 2 };
    (rate > 0).then_some(rate)
}

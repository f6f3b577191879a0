//! Mark5B data-frame header: parse, build, and the frame's time.
//!
//! Mark 5B System User's Manual (Haystack), "Mark 5B data format": a frame is a 16-byte header
//! and 2 500 32-bit words of data (10 016 bytes). The header is four little-endian words:
//!
//! | word | bits  | field                                                              |
//! |------|-------|--------------------------------------------------------------------|
//! | 0    | 31–0  | sync word 0xABADDEED                                               |
//! | 1    | 31–16 | user-specified                                                     |
//! | 1    | 15    | TVG data                                                           |
//! | 1    | 14–0  | frame number within the second, from 0                            |
//! | 2    | 31–20 | VLBA time code: MJD mod 1000, 3 BCD digits (`JJJ`)                 |
//! | 2    | 19–0  | VLBA time code: second of the day, 5 BCD digits (`SSSSS`)          |
//! | 3    | 31–16 | VLBA time code: fraction of the second, 4 BCD digits (`.SSSS`)     |
//! | 3    | 15–0  | CRC-16 of the time code (VLBA's: polynomial 0x8005 over the 48 bits of word 2 and word 3's top half, each most significant byte first) |
//!
//! Mark5B has no invalid bit: a frame to skip is one whose data are the fill pattern
//! 0x11223344 (jive5ab fills so; SFXC's readers mark data holding it invalid).
//!
//! The frame number has 15 bits and the bit rate is the data bits of the frames of one second,
//! so a stream sends `rate / 80 000` frames per second ([`Mark5bHeader::frame_rate`]).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::formats::{MARK5B_FRAME_LEN, MARK5B_SYNC_WORD};
use crate::rate::{FrameRate, RateError};

/// Bytes of a Mark5B header.
pub const MARK5B_HEADER_LEN: usize = 16;
/// Bytes of a Mark5B frame's data (2 500 32-bit words).
pub const MARK5B_DATA_LEN: usize = MARK5B_FRAME_LEN - MARK5B_HEADER_LEN;
/// Frame numbers have 15 bits: at most 32 768 frames a second (2.62 Gb/s).
pub const MARK5B_MAX_FRAMES_PER_SECOND: u32 = 1 << 15;
/// Seconds the time code counts before it repeats: 1000 days (MJD mod 1000).
pub const MARK5B_TIME_CODE_SECONDS: u64 = 1000 * 86_400;

/// A Mark5B header that cannot be parsed or built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Mark5bError {
    /// Fewer bytes than a header.
    #[error("Mark5B header needs 16 bytes, only {0} available")]
    TooShort(usize),
    /// Word 0 is not the sync word.
    #[error("word 0 is {0:#010x}, not the Mark5B sync word 0xabaddeed")]
    NoSync(u32),
    /// A nibble of the time code that is no decimal digit.
    #[error("Mark5B time code word {word} = {value:#010x} is not BCD")]
    NotBcd {
        /// Header word (2 or 3).
        word: u8,
        /// Its value.
        value: u32,
    },
    /// A field beyond its width or range (building a header).
    #[error("Mark5B {field} = {value} exceeds its maximum {max}")]
    FieldOutOfRange {
        /// The field.
        field: &'static str,
        /// The value asked for.
        value: u64,
        /// The largest it holds.
        max: u64,
    },
}

/// A decoded Mark5B header (the fields as they are in the frame; nothing judged but the sync
/// word and the BCD digits, which the types hold only when decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark5bHeader {
    /// Word 1 bits 31–16, the user's.
    pub user: u16,
    /// Word 1 bit 15: test-vector data.
    pub tvg: bool,
    /// Frame number within the second (15 bits).
    pub frame_number: u16,
    /// MJD mod 1000 (0..=999).
    pub mjd_mod_1000: u16,
    /// Second of the day (5 BCD digits, 0..=99 999; a day has 86 400).
    pub second_of_day: u32,
    /// Fraction of the second in units of 0.1 ms (4 BCD digits, 0..=9999).
    pub fraction: u16,
    /// The CRC as written (0 where a backend leaves it out).
    pub crc: u16,
}

/// Decimal `digits` of `bcd` (least significant nibble last), or `None` for a nibble above 9.
fn from_bcd(bcd: u32, digits: u32) -> Option<u32> {
    (0..digits).rev().try_fold(0u32, |acc, i| {
        let d = (bcd >> (4 * i)) & 0xf;
        (d <= 9).then_some(acc * 10 + d)
    })
}

/// `value` as `digits` BCD nibbles (value below 10^digits).
fn to_bcd(mut value: u32, digits: u32) -> u32 {
    (0..digits).fold(0, |acc, i| {
        let d = value % 10;
        value /= 10;
        acc | (d << (4 * i))
    })
}

/// VLBA's CRC-16 (polynomial x^16 + x^15 + x^2 + 1, 0x8005; register from 0; bits most
/// significant first, nothing reflected or inverted: CRC-16/UMTS, check value 0xFEE8) of `data`.
pub fn crc16_vlba(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (0..8).fold(crc ^ (u16::from(b) << 8), |c, _| {
            if c & 0x8000 != 0 {
                (c << 1) ^ 0x8005
            } else {
                c << 1
            }
        })
    })
}

impl Mark5bHeader {
    /// Parse the header at the start of `bytes`: the sync word and the time code's digits are
    /// checked, nothing else (a CRC that disagrees is for [`Mark5bHeader::crc_ok`] to say).
    pub fn parse(bytes: &[u8]) -> Result<Self, Mark5bError> {
        let Some(head) = bytes.get(..MARK5B_HEADER_LEN) else {
            return Err(Mark5bError::TooShort(bytes.len()));
        };
        let word = |i: usize| u32::from_le_bytes([head[4 * i], head[4 * i + 1], head[4 * i + 2], head[4 * i + 3]]);
        let (w0, w1, w2, w3) = (word(0), word(1), word(2), word(3));
        if w0 != MARK5B_SYNC_WORD {
            return Err(Mark5bError::NoSync(w0));
        }
        let bcd2 = |v, n| from_bcd(v, n).ok_or(Mark5bError::NotBcd { word: 2, value: w2 });
        let mjd_mod_1000 = bcd2(w2 >> 20, 3)? as u16;
        let second_of_day = bcd2(w2 & 0xf_ffff, 5)?;
        let fraction = from_bcd(w3 >> 16, 4).ok_or(Mark5bError::NotBcd { word: 3, value: w3 })? as u16;
        Ok(Mark5bHeader {
            user: (w1 >> 16) as u16,
            tvg: w1 & 0x8000 != 0,
            frame_number: (w1 & 0x7fff) as u16,
            mjd_mod_1000,
            second_of_day,
            fraction,
            crc: (w3 & 0xffff) as u16,
        })
    }

    /// The header of frame `frame_number` of second `second_of_day` of day `mjd_mod_1000` at
    /// `fps` frames per second: the fraction of the second its number gives (truncated to 0.1 ms,
    /// as jive5ab writes it) and the CRC of that time code.
    pub fn at(mjd_mod_1000: u16, second_of_day: u32, frame_number: u16, fps: FrameRate) -> Result<Self, Mark5bError> {
        let fraction = u64::from(frame_number) * 10_000 / u64::from(fps.get());
        let mut h = Mark5bHeader {
            user: 0,
            tvg: false,
            frame_number,
            mjd_mod_1000,
            second_of_day,
            fraction: u16::try_from(fraction).unwrap_or(u16::MAX),
            crc: 0,
        };
        h.check_ranges()?;
        h.crc = h.computed_crc();
        Ok(h)
    }

    /// Every field within its range, so [`Mark5bHeader::emit`] writes what the struct says.
    pub fn check_ranges(&self) -> Result<(), Mark5bError> {
        let checks: [(&'static str, u64, u64); 4] = [
            ("frame number", u64::from(self.frame_number), 0x7fff),
            ("MJD mod 1000", u64::from(self.mjd_mod_1000), 999),
            ("second of day", u64::from(self.second_of_day), 99_999),
            ("fraction", u64::from(self.fraction), 9_999),
        ];
        for (field, value, max) in checks {
            if value > max {
                return Err(Mark5bError::FieldOutOfRange { field, value, max });
            }
        }
        Ok(())
    }

    /// The four words, as the frame holds them.
    fn words(&self) -> [u32; 4] {
        let w1 = (u32::from(self.user) << 16) | (u32::from(self.tvg) << 15) | u32::from(self.frame_number & 0x7fff);
        let w2 = (to_bcd(u32::from(self.mjd_mod_1000), 3) << 20) | to_bcd(self.second_of_day, 5);
        let w3 = (to_bcd(u32::from(self.fraction), 4) << 16) | u32::from(self.crc);
        [MARK5B_SYNC_WORD, w1, w2, w3]
    }

    /// The CRC the time code calls for.
    pub fn computed_crc(&self) -> u16 {
        let [_, _, w2, w3] = self.words();
        let mut code = [0u8; 6];
        code[..4].copy_from_slice(&w2.to_be_bytes());
        code[4..].copy_from_slice(&((w3 >> 16) as u16).to_be_bytes());
        crc16_vlba(&code)
    }

    /// The CRC written agrees with the time code (SFXC also takes a CRC of 0 as none written).
    pub fn crc_ok(&self) -> bool {
        self.crc == self.computed_crc()
    }

    /// Write the 16 header bytes into `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<(), Mark5bError> {
        self.check_ranges()?;
        let have = out.len();
        let head = out.get_mut(..MARK5B_HEADER_LEN).ok_or(Mark5bError::TooShort(have))?;
        for (chunk, w) in head.chunks_exact_mut(4).zip(self.words()) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }

    /// The header's bytes.
    pub fn to_bytes(&self) -> Result<[u8; MARK5B_HEADER_LEN], Mark5bError> {
        let mut b = [0u8; MARK5B_HEADER_LEN];
        self.emit(&mut b)?;
        Ok(b)
    }

    /// Frames per second of a stream of `bits_per_second` data bits (all bit streams): one
    /// frame carries 80 000 (refused unless whole, and within the 15-bit frame number).
    pub fn frame_rate(bits_per_second: u64) -> Result<FrameRate, RateError> {
        let fps = FrameRate::from_bit_rate(bits_per_second, MARK5B_DATA_LEN as u64, 1)?;
        if fps.get() > MARK5B_MAX_FRAMES_PER_SECOND {
            return Err(RateError::TooMany(u64::from(fps.get())));
        }
        Ok(fps)
    }

    /// Seconds since the start of the time code's 1000-day cycle (a day whose MJD is a multiple
    /// of 1000).
    pub fn cycle_seconds(&self) -> u64 {
        u64::from(self.mjd_mod_1000) * 86_400 + u64::from(self.second_of_day)
    }

    /// The header of frame `frame_number` of second `seconds` of the time code's cycle (as
    /// [`Mark5bHeader::cycle_seconds`] counts, modulo the cycle) at `fps`, user bits 0: the
    /// inverse of `cycle_seconds`.
    pub fn at_cycle_seconds(seconds: u64, frame_number: u64, fps: FrameRate) -> Result<Self, Mark5bError> {
        let seconds = seconds % MARK5B_TIME_CODE_SECONDS;
        let frame_number = u16::try_from(frame_number).map_err(|_| Mark5bError::FieldOutOfRange {
            field: "frame number",
            value: frame_number,
            max: 0x7fff,
        })?;
        // Both fit: seconds / 86 400 < 1000, seconds % 86 400 < 86 400.
        Mark5bHeader::at((seconds / 86_400) as u16, (seconds % 86_400) as u32, frame_number, fps)
    }

    /// The frame's place in time order at `fps`: frames since the cycle began
    /// (`cycle_seconds × fps + frame number`). Wraps every 1000 days, as the time code does.
    pub fn frame_index(&self, fps: FrameRate) -> u64 {
        self.cycle_seconds() * u64::from(fps.get()) + u64::from(self.frame_number)
    }

    /// The header of frame `index` (as [`Mark5bHeader::frame_index`] counts, modulo the cycle)
    /// at `fps`, the user bits and TVG flag kept from `self`.
    pub fn with_frame_index(&self, index: u64, fps: FrameRate) -> Result<Self, Mark5bError> {
        let rate = u64::from(fps.get());
        let h = Mark5bHeader::at_cycle_seconds(index / rate, index % rate, fps)?;
        Ok(Mark5bHeader {
            user: self.user,
            tvg: self.tvg,
            ..h
        })
    }

    /// When the frame's data were sampled, ns since 1970, at `fps`: the time code's day taken
    /// as the one of the 1000-day cycle nearest `reference_unix_s` (the clock when it came, as
    /// jive5ab and SFXC resolve it). `None` before 1970.
    pub fn unix_nanos(&self, fps: FrameRate, reference_unix_s: i64) -> Option<u64> {
        const MJD_UNIX_EPOCH: i64 = 40_587;
        let ref_mjd = reference_unix_s.div_euclid(86_400) + MJD_UNIX_EPOCH;
        let day = i64::from(self.mjd_mod_1000);
        // The MJD ≡ day (mod 1000) nearest the reference's.
        let mut mjd = ref_mjd - ref_mjd.rem_euclid(1000) + day;
        if mjd - ref_mjd > 500 {
            mjd -= 1000;
        } else if ref_mjd - mjd > 500 {
            mjd += 1000;
        }
        let unix_s = (mjd - MJD_UNIX_EPOCH) * 86_400 + i64::from(self.second_of_day);
        let sub = u64::from(self.frame_number) * 1_000_000_000 / u64::from(fps.get());
        u64::try_from(unix_s).ok()?.checked_mul(1_000_000_000)?.checked_add(sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fps(n: u32) -> FrameRate {
        FrameRate::new(n).unwrap()
    }

    /// A header written out by hand from the manual's table: MJD 60 123 (day 123), second
    /// 45 678, frame 1234 of 12 800 (1024 Mb/s): fraction .0964 s, user bits 0xbeef.
    #[test]
    fn documented_bytes_parse() {
        let bytes = [
            0xed, 0xde, 0xad, 0xab, // word 0: sync 0xABADDEED
            0xd2, 0x04, 0xef, 0xbe, // word 1: frame 1234 (0x04d2), TVG 0, user 0xbeef
            0x78, 0x56, 0x34, 0x12, // word 2: 0x12345678 = JJJ 123, SSSSS 45678
            0x00, 0x00, 0x64, 0x09, // word 3: fraction 0964, CRC 0
        ];
        let h = Mark5bHeader::parse(&bytes).unwrap();
        assert_eq!(
            h,
            Mark5bHeader {
                user: 0xbeef,
                tvg: false,
                frame_number: 1234,
                mjd_mod_1000: 123,
                second_of_day: 45_678,
                fraction: 964,
                crc: 0,
            }
        );
        assert_eq!(h.to_bytes().unwrap(), bytes);
        // The CRC of the time code, as jive5ab's crc16_vlba gives it for the same 48 bits.
        assert_eq!(h.computed_crc(), crc16_vlba(&[0x12, 0x34, 0x56, 0x78, 0x09, 0x64]));
        assert!(!h.crc_ok());
        let built = Mark5bHeader::at(123, 45_678, 1234, fps(12_800)).unwrap();
        assert_eq!((built.fraction, built.crc_ok()), (964, true));
        assert_eq!(h.frame_index(fps(12_800)), (123 * 86_400 + 45_678) * 12_800 + 1234);
    }

    #[test]
    fn crc_is_vlbas() {
        // CRC-16/UMTS's check value (the catalogue's "123456789").
        assert_eq!(crc16_vlba(b"123456789"), 0xfee8);
        // A header with its CRC appended leaves a zero remainder, as SFXC checks it.
        let h = Mark5bHeader::at(7, 86_399, 0, fps(400)).unwrap();
        let b = h.to_bytes().unwrap();
        let msg = [b[11], b[10], b[9], b[8], b[15], b[14], b[13], b[12]];
        assert_eq!(crc16_vlba(&msg), 0);
    }

    #[test]
    fn bad_headers_are_refused_with_their_numbers() {
        assert_eq!(Mark5bHeader::parse(&[0; 15]), Err(Mark5bError::TooShort(15)));
        let mut b = Mark5bHeader::at(1, 2, 3, fps(400)).unwrap().to_bytes().unwrap();
        b[0] = 0xee;
        assert_eq!(Mark5bHeader::parse(&b), Err(Mark5bError::NoSync(0xabad_deee)));
        b[0] = 0xed;
        b[8] = 0x0a; // second's last digit 0xa
        assert!(matches!(
            Mark5bHeader::parse(&b),
            Err(Mark5bError::NotBcd { word: 2, .. })
        ));
        assert!(Mark5bHeader::at(1000, 0, 0, fps(400)).is_err());
        assert!(Mark5bHeader::at(0, 0, 0x8000, fps(40_000)).is_err());
    }

    #[test]
    fn frame_rate_is_bits_over_80000() {
        assert_eq!(Mark5bHeader::frame_rate(1_024_000_000).map(FrameRate::get), Ok(12_800));
        assert_eq!(Mark5bHeader::frame_rate(32_000_000).map(FrameRate::get), Ok(400));
        assert!(Mark5bHeader::frame_rate(1_000_000).is_err()); // 12.5 frames/s
        assert!(Mark5bHeader::frame_rate(4_096_000_000).is_err()); // 51 200 > 2^15
    }

    #[test]
    fn unix_time_resolves_the_day_near_the_reference() {
        // 2026-11-29 is MJD 61 373 (unix day 20 786); day 373 of the cycle.
        let h = Mark5bHeader::at(373, 3600, 200, fps(400)).unwrap();
        let now = 20_786 * 86_400 + 7200;
        assert_eq!(
            h.unix_nanos(fps(400), now),
            Some((20_786 * 86_400 + 3600) * 1_000_000_000 + 500_000_000)
        );
        // Day 999 seen on day 373's cycle is 374 days back, not 626 ahead.
        let old = Mark5bHeader::at(999, 0, 0, fps(400)).unwrap();
        assert_eq!(
            old.unix_nanos(fps(400), now),
            Some((20_786 - 374) * 86_400 * 1_000_000_000)
        );
    }

    proptest! {
        /// Any header built parses back to itself; any 16 bytes parse or are refused, and what
        /// parses emits the same bytes.
        #[test]
        fn any_header_built_parses_back_to_itself_with_its_crc_and_frame_index(day in 0u16..1000, sod in 0u32..86_400, n in 0u32..32_768, rate in 1u32..=32_768, user: u16, tvg: bool) {
            let f = fps(rate);
            let h = Mark5bHeader { user, tvg, ..Mark5bHeader::at(day, sod, (n % rate) as u16, f).unwrap() };
            let b = h.to_bytes().unwrap();
            prop_assert_eq!(Mark5bHeader::parse(&b), Ok(h));
            prop_assert!(h.crc_ok());
            let again = h.with_frame_index(h.frame_index(f), f).unwrap();
            prop_assert_eq!(again, h);
            let next = h.with_frame_index(h.frame_index(f) + 1, f).unwrap();
            prop_assert_eq!(next.frame_index(f), (h.frame_index(f) + 1) % (MARK5B_TIME_CODE_SECONDS * u64::from(rate)));
        }

        #[test]
        fn any_bytes_parse_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(h) = Mark5bHeader::parse(&bytes) {
                prop_assert_eq!(&h.to_bytes().unwrap()[..], &bytes[..MARK5B_HEADER_LEN]);
            }
        }
    }
}

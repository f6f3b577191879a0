//! The data mode of `mode = VDIF_8000-2048-16-2 ;`.
//!
//! jive5ab's "magic mode" (`src/headersearch.cc`, `pVDIF`, after Walter Brisken's
//! `<format>-<rate>-<channels>-<bits>`): `VDIF[L][C]_<payload>-<rate Mb/s>[/<period s>]-<channels>-<bits>[/<decimation>]`,
//! case-insensitive: VDIF frames with `<payload>` data bytes (32-byte headers; 16 for `VDIFL`,
//! legacy), `<rate>` Mb/s of samples in all (per `<period>` seconds), `<channels>` × `<bits>`
//! tracks (twice for `C`, complex). `none` clears the mode. The mode says the frame rate a
//! receiver of bare or jive5ab-framed VDIF needs (the headers do not carry it).
//!
//! `mode?` answers `VDIF_8000-2048-16-2 : VDIF : 32 : 64000000.000 : 8000` (mode, format,
//! tracks, bit rate per track, payload), as jive5ab does.
//!
//! Mark5B (Mark 5B System User's Manual; 10 016-byte frames, `rate / 80 000` frames a second)
//! in jive5ab's two forms: the magic mode `MARK5B-<Mb/s>-<channels>-<bits>`, and the Field
//! System's `mode = mark5b : <bit-stream mask> [: <decimation>]` (or `ext : …`, jive5ab's
//! `mk5bdom_mode_fn` on a Mark5C or FlexBuff), whose bit streams (the mask's set bits, a power of
//! 2, at most 32) run at jive5ab's default clock of 32 MHz over the decimation (a power of 2,
//! down to 1 MHz: jive5ab's limit).

use thiserror::Error;
use vdif::{FrameFormat, FrameRate, Mark5bHeader, RateError};

/// jive5ab's clock of a Mark5B mode with no `clock_set` (runtime.cc: 32 MHz), MHz.
pub const MARK5B_CLOCK_MHZ: u64 = 32;

/// Why a mode is not usable here.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModeError {
    /// Not a mode jive5ab knows either.
    #[error("mode '{0}' is not a valid mode (VDIF_<payload>-<Mb/s>-<channels>-<bits>, MARK5B-<Mb/s>-<channels>-<bits>, mark5b:<mask>[:<decimation>], or none)")]
    Invalid(String),
    /// A mode of another format (VLBA, Mark4) or VDIF without its payload size.
    #[error("mode '{0}' is not streamed by evlbi: give VDIF_<payload>-<Mb/s>-<channels>-<bits> or a Mark5B mode")]
    Unsupported(String),
    /// Numbers out of range (payload not a multiple of 8 bytes, 0 channels, …).
    #[error("mode '{0}': {1}")]
    OutOfRange(String, &'static str),
}

/// A VDIF data mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    /// As given.
    pub text: String,
    /// Legacy (16-byte) headers.
    pub legacy: bool,
    /// Complex samples.
    pub complex: bool,
    /// Data bytes per frame.
    pub payload: u32,
    /// Sample rate in Mb/s, over `period_s` seconds.
    pub rate_mbps: u64,
    /// Seconds the rate is counted over (1 unless given).
    pub period_s: u64,
    /// Baseband channels.
    pub channels: u32,
    /// Bits per sample.
    pub bits: u32,
    /// The frames' format: VDIF, or Mark5B (payload 10 000, a 16-byte header; channels are its
    /// bit streams of one bit in the `mark5b : <mask>` form).
    pub format: FrameFormat,
    /// The `mark5b : <mask> : <decimation>` form's fields, when given so (`mode?` answers in
    /// that form then).
    pub mask_form: Option<MaskForm>,
}

/// A Mark5B mode given as `mark5b : <mask> [: <decimation>]` (or `ext : …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskForm {
    /// The mode's name as given (`mark5b`, `ext`).
    pub name: String,
    /// The bit-stream mask as given (`0xffffffff`).
    pub mask: String,
    /// The decimation (1 when not given).
    pub decimation: u64,
}

impl Mode {
    /// Parse a mode; `Ok(None)` for `none`.
    pub fn parse(text: &str) -> Result<Option<Mode>, ModeError> {
        let invalid = || ModeError::Invalid(text.to_string());
        let lower = text.to_ascii_lowercase();
        if lower == "none" {
            return Ok(None);
        }
        if let Some(rest) = lower.strip_prefix("mark5b-") {
            return Self::mark5b_magic(text, rest).map(Some);
        }
        let Some((head, rest)) = lower.split_once('_') else {
            let other = [
                "vlba", "mkiv", "vdif-", "vdifl-", "vdifc-", "vdiflc-", "ext", "tvg", "mark4",
            ];
            return Err(if other.iter().any(|p| lower.starts_with(p)) {
                ModeError::Unsupported(text.to_string())
            } else {
                invalid()
            });
        };
        let (legacy, complex) = match head {
            "vdif" => (false, false),
            "vdifl" => (true, false),
            "vdifc" => (false, true),
            "vdiflc" | "vdifcl" => (true, true),
            "vlba1" | "vlba2" | "vlba4" | "mkiv1" | "mkiv2" | "mkiv4" => {
                return Err(ModeError::Unsupported(text.to_string()))
            }
            _ => return Err(invalid()),
        };
        let parts: Vec<&str> = rest.split('-').collect();
        let [payload, rate, channels, bits] = parts[..] else {
            return Err(invalid());
        };
        let (rate, period) = rate.split_once('/').unwrap_or((rate, "1"));
        // A decimation after the bits is accepted and ignored, as jive5ab does.
        let bits = bits.split_once('/').map_or(bits, |(b, _)| b);
        let num = |s: &str| {
            if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
                Err(invalid())
            } else {
                s.parse::<u64>().map_err(|_| invalid())
            }
        };
        let range = |why| ModeError::OutOfRange(text.to_string(), why);
        let mode = Mode {
            text: text.to_string(),
            legacy,
            complex,
            payload: u32::try_from(num(payload)?).map_err(|_| invalid())?,
            rate_mbps: num(rate)?,
            period_s: num(period)?,
            channels: u32::try_from(num(channels)?).map_err(|_| invalid())?,
            bits: u32::try_from(num(bits)?).map_err(|_| invalid())?,
            format: FrameFormat::Vdif,
            mask_form: None,
        };
        if mode.payload == 0 || !mode.payload.is_multiple_of(8) || mode.payload > 65_536 - 32 {
            return Err(range("the payload must be a multiple of 8 bytes, 8 to 65504"));
        }
        if mode.rate_mbps == 0 || mode.period_s == 0 || mode.rate_mbps > 1_000_000 {
            return Err(range(
                "the rate must be 1 to 1000000 Mb/s over a period of at least 1 s",
            ));
        }
        if mode.channels == 0 || !mode.channels.is_power_of_two() || mode.channels > 1 << 16 {
            return Err(range("channels must be a power of 2"));
        }
        if !(1..=32).contains(&mode.bits) {
            return Err(range("bits per sample must be 1 to 32"));
        }
        Ok(Some(mode))
    }

    /// The fields of `mode = …` (`mode = mark5b : 0xffffffff : 1` has three): the magic forms
    /// take one ([`Mode::parse`]), `mark5b` and `ext` a bit-stream mask and a decimation.
    pub fn parse_fields(fields: &[&str]) -> Result<Option<Mode>, ModeError> {
        let first = fields.first().copied().unwrap_or("");
        match first.to_ascii_lowercase().as_str() {
            "mark5b" | "ext" => Self::mark5b_mask(fields).map(Some),
            _ if fields.len() > 1 && fields[1..].iter().any(|f| !f.is_empty()) => {
                Err(ModeError::Invalid(fields.join(" : ")))
            }
            _ => Self::parse(first),
        }
    }

    /// `MARK5B-<Mb/s>-<channels>-<bits>` (`rest`: after `mark5b-`).
    fn mark5b_magic(text: &str, rest: &str) -> Result<Mode, ModeError> {
        let invalid = || ModeError::Invalid(text.to_string());
        let num = |s: &str| {
            if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
                Err(invalid())
            } else {
                s.parse::<u32>().map_err(|_| invalid())
            }
        };
        let [rate, channels, bits] = rest.split('-').collect::<Vec<_>>()[..] else {
            return Err(invalid());
        };
        let mode = Mode {
            text: text.to_string(),
            legacy: false,
            complex: false,
            payload: vdif::mark5b::MARK5B_DATA_LEN as u32,
            rate_mbps: u64::from(num(rate)?),
            period_s: 1,
            channels: num(channels)?,
            bits: num(bits)?,
            format: FrameFormat::Mark5b,
            mask_form: None,
        };
        mode.check_mark5b()
    }

    /// `mark5b : <mask> [: <decimation>]` (or `ext`).
    fn mark5b_mask(fields: &[&str]) -> Result<Mode, ModeError> {
        let text = fields.join(":");
        let range = |why| ModeError::OutOfRange(text.clone(), why);
        let number = |s: &str| match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse::<u64>().ok(),
        };
        let mask = number(fields.get(1).copied().unwrap_or("")).ok_or_else(|| ModeError::Invalid(text.clone()))?;
        let decimation = match fields.get(2).copied().unwrap_or("") {
            "" => 1,
            d => number(d).ok_or_else(|| ModeError::Invalid(text.clone()))?,
        };
        if fields.len() > 3 {
            return Err(ModeError::Invalid(text));
        }
        let tracks = mask.count_ones();
        if mask > u64::from(u32::MAX) || !tracks.is_power_of_two() {
            return Err(range(
                "the bit-stream mask must select a power of 2 of the 32 bit streams",
            ));
        }
        if !decimation.is_power_of_two() || decimation > MARK5B_CLOCK_MHZ {
            return Err(range(
                "the decimation must be a power of 2 up to 32 (1 MHz per bit stream)",
            ));
        }
        let mode = Mode {
            legacy: false,
            complex: false,
            payload: vdif::mark5b::MARK5B_DATA_LEN as u32,
            rate_mbps: u64::from(tracks) * MARK5B_CLOCK_MHZ / decimation,
            period_s: 1,
            channels: tracks,
            bits: 1,
            format: FrameFormat::Mark5b,
            mask_form: Some(MaskForm {
                name: fields.first().copied().unwrap_or("").to_string(),
                mask: fields.get(1).copied().unwrap_or("").to_string(),
                decimation,
            }),
            text,
        };
        mode.check_mark5b()
    }

    /// A Mark5B mode whose rate gives whole frames a second (`rate / 80 000`) that the 15-bit
    /// frame number counts.
    fn check_mark5b(self) -> Result<Mode, ModeError> {
        let range = |why| ModeError::OutOfRange(self.text.clone(), why);
        if self.channels == 0 || !self.channels.is_power_of_two() || !(1..=32).contains(&self.tracks()) {
            return Err(range(
                "Mark5B carries 1 to 32 bit streams, channels × bits a power of 2",
            ));
        }
        if self.rate_mbps == 0 || Mark5bHeader::frame_rate(self.rate_mbps * 1_000_000).is_err() {
            return Err(range(
                "a Mark5B rate must be a whole number of 80000-bit frames a second, at most 32768 (2621 Mb/s)",
            ));
        }
        Ok(self)
    }

    /// Tracks: channels × bits (× 2 complex).
    pub fn tracks(&self) -> u32 {
        self.channels * self.bits * if self.complex { 2 } else { 1 }
    }

    /// Data rate, bits per second.
    pub fn rate_bps(&self) -> f64 {
        self.rate_mbps as f64 * 1e6 / self.period_s as f64
    }

    /// Frame length, header included.
    pub fn frame_len(&self) -> u32 {
        self.payload
            + match (self.format, self.legacy) {
                (FrameFormat::Mark5b, _) | (_, true) => 16,
                _ => 32,
            }
    }

    /// Frames per second per thread when the data are spread over `threads` VDIF threads:
    /// `<rate>` Mb per `<period>` s over the payloads of all threads, by vdif's one rule for a
    /// rate from bits (refused unless a whole number: VDIF frame numbers count whole frames).
    /// Mark5B is one stream: its rate is `rate / 80 000` for one thread, none for more.
    pub fn frame_rate(&self, threads: u16) -> Result<FrameRate, RateError> {
        if self.format == FrameFormat::Mark5b && threads > 1 {
            return Err(RateError::Mark5bOneStream {
                threads: u32::from(threads),
            });
        }
        FrameRate::from_bits_per_period(
            self.rate_mbps * 1_000_000,
            self.period_s,
            u64::from(self.payload),
            u32::from(threads.max(1)),
        )
    }

    /// The fields of `mode?` after the code (jive5ab's `mk5bdom_mode_fn` "magic mode" reply;
    /// for `mark5b : <mask> : <decimation>`, its reply of that form: the mode, mask,
    /// decimation and track bit rate in MHz).
    pub fn query_fields(&self) -> Vec<String> {
        if let Some(f) = &self.mask_form {
            return vec![
                f.name.clone(),
                f.mask.clone(),
                f.decimation.to_string(),
                format!("{}", self.rate_mbps / u64::from(self.tracks().max(1))),
            ];
        }
        let format = match (self.format, self.legacy, self.complex) {
            (FrameFormat::Mark5b, ..) => "Mark5B",
            (_, false, false) => "VDIF",
            (_, true, false) => "VDIF (legacy)",
            (_, false, true) => "VDIF (complex)",
            (_, true, true) => "VDIF (legacy, complex)",
        };
        vec![
            self.text.clone(),
            format.to_string(),
            self.tracks().to_string(),
            format!("{:.3}", self.rate_bps() / f64::from(self.tracks())),
            self.payload.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdif_modes_parse_as_jive5ab_reports_them() {
        let m = Mode::parse("VDIF_8000-2048-16-2").unwrap().unwrap();
        // jive5ab 3.1.0: `!mode? 0 : VDIF_8000-2048-16-2 : VDIF : 32 : 64000000.000 : 8000 ;`
        assert_eq!(
            m.query_fields(),
            vec!["VDIF_8000-2048-16-2", "VDIF", "32", "64000000.000", "8000"]
        );
        assert_eq!(m.frame_len(), 8032);
        assert_eq!(m.frame_rate(1).map(FrameRate::get), Ok(32_000));
        assert_eq!(m.frame_rate(4).map(FrameRate::get), Ok(8_000));
        assert!(matches!(m.frame_rate(3), Err(RateError::Fractional { .. })));
        // Mark5B is one stream: more threads are refused as such, not as a fractional rate
        // (512 Mb/s over 2 threads of 10000-byte frames would be a whole 3200 frames/s each).
        let m5b = Mode::parse("MARK5B-512-16-2").unwrap().unwrap();
        assert_eq!(m5b.frame_rate(1).map(FrameRate::get), Ok(6400));
        let two = m5b.frame_rate(2).unwrap_err();
        assert_eq!(two, RateError::Mark5bOneStream { threads: 2 });
        assert_eq!(two.to_string(), "Mark5B is one stream of frames, not 2 threads");
        let l = Mode::parse("vdifl_1024-512/2-8-2/4").unwrap().unwrap();
        assert!(l.legacy && !l.complex);
        assert_eq!((l.frame_len(), l.rate_bps()), (1040, 256e6));
        assert_eq!(Mode::parse("none"), Ok(None));
    }

    #[test]
    fn mark5b_modes_parse_in_jive5abs_forms() {
        let m = Mode::parse("Mark5B-512-16-2").unwrap().unwrap();
        assert_eq!(m.format, FrameFormat::Mark5b);
        assert_eq!((m.frame_len(), m.tracks()), (10_016, 32));
        assert_eq!(m.frame_rate(1).map(FrameRate::get), Ok(6_400));
        assert!(m.frame_rate(2).is_err(), "Mark5B has no threads");
        assert_eq!(
            m.query_fields(),
            vec!["Mark5B-512-16-2", "Mark5B", "32", "16000000.000", "10000"]
        );
        // What the Field System sends: 32 bit streams at 32 MHz, 1024 Mb/s.
        let fs = Mode::parse_fields(&["mark5b", "0xffffffff", "1"]).unwrap().unwrap();
        assert_eq!(
            (fs.rate_mbps, fs.tracks(), fs.frame_rate(1).map(FrameRate::get)),
            (1024, 32, Ok(12_800))
        );
        let ext = Mode::parse_fields(&["ext", "0x0000ffff", "2"]).unwrap().unwrap();
        assert_eq!((ext.rate_mbps, ext.text.as_str()), (256, "ext:0x0000ffff:2"));
        assert_eq!(ext.query_fields(), ["ext", "0x0000ffff", "2", "16"]);
        // The form is the parser's: the mask form answers in it (decimation 1 when not given),
        // the magic form in its own.
        let no_decimation = Mode::parse_fields(&["mark5b", "0xf"]).unwrap().unwrap();
        assert_eq!(no_decimation.query_fields(), ["mark5b", "0xf", "1", "32"]);
        assert_eq!(m.mask_form, None);
        assert_eq!(
            Mode::parse_fields(&["mark5b", "0xf"]).map(|m| m.map(|m| m.rate_mbps)),
            Ok(Some(128))
        );
        for bad in [
            &["mark5b", "0x7", "1"][..],      // 3 bit streams
            &["mark5b", "0xffffffff", "3"],   // decimation not a power of 2
            &["mark5b", "0xffffffff", "64"],  // below 1 MHz
            &["mark5b", "0x1ffffffff", "1"],  // 33 bit streams
            &["mark5b", "zz"],                // no mask
            &["mark5b", "0xff", "1", "9"],    // a field too many
            &["VDIF_8000-2048-16-2", "junk"], // the magic mode takes one field
        ] {
            assert!(Mode::parse_fields(bad).is_err(), "{bad:?}");
        }
        // 1000 Mb/s is 12 500 frames/s; 1 Mb/s is 12.5; 4096 Mb/s is 51 200 > 2^15.
        assert!(Mode::parse("MARK5B-1000-16-2").is_ok());
        assert!(matches!(Mode::parse("MARK5B-1-1-1"), Err(ModeError::OutOfRange(..))));
        assert!(matches!(
            Mode::parse("MARK5B-4096-16-2"),
            Err(ModeError::OutOfRange(..))
        ));
        assert!(matches!(Mode::parse("MARK5B-512-16"), Err(ModeError::Invalid(_))));
    }

    #[test]
    fn other_modes_are_refused_with_a_reason() {
        assert!(matches!(Mode::parse("VDIF-2048-16-2"), Err(ModeError::Unsupported(_))));
        assert!(matches!(Mode::parse("garbage"), Err(ModeError::Invalid(_))));
        assert!(matches!(
            Mode::parse("VDIF_8001-2048-16-2"),
            Err(ModeError::OutOfRange(..))
        ));
        assert!(matches!(
            Mode::parse("VDIF_8000-2048-3-2"),
            Err(ModeError::OutOfRange(..))
        ));
        assert!(matches!(
            Mode::parse("VDIF_8000-0-16-2"),
            Err(ModeError::OutOfRange(..))
        ));
        assert!(matches!(
            Mode::parse("VDIF_8000-99999999999-16-2"),
            Err(ModeError::Invalid(_))
        ));
        assert!(matches!(Mode::parse("VDIF_8000-2048-16"), Err(ModeError::Invalid(_))));
    }
}

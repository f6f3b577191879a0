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

use thiserror::Error;
use vdif::{FrameRate, RateError};

/// Why a mode is not usable here.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModeError {
    /// Not a mode jive5ab knows either.
    #[error("mode '{0}' is not a valid mode (VDIF_<payload>-<Mb/s>-<channels>-<bits>, or none)")]
    Invalid(String),
    /// A mode of another format (Mark5B, VLBA, Mark4) or VDIF without its payload size.
    #[error("mode '{0}' is not streamed by evlbi: give VDIF_<payload>-<Mb/s>-<channels>-<bits>")]
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
}

impl Mode {
    /// Parse a mode; `Ok(None)` for `none`.
    pub fn parse(text: &str) -> Result<Option<Mode>, ModeError> {
        let invalid = || ModeError::Invalid(text.to_string());
        let lower = text.to_ascii_lowercase();
        if lower == "none" {
            return Ok(None);
        }
        let Some((head, rest)) = lower.split_once('_') else {
            let other = [
                "mark5b-", "vlba", "mkiv", "vdif-", "vdifl-", "vdifc-", "vdiflc-", "ext", "tvg", "mark4",
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
        self.payload + if self.legacy { 16 } else { 32 }
    }

    /// Frames per second per thread when the data are spread over `threads` VDIF threads:
    /// `<rate>` Mb per `<period>` s over the payloads of all threads, by vdif's one rule for a
    /// rate from bits (refused unless a whole number: VDIF frame numbers count whole frames).
    pub fn frame_rate(&self, threads: u16) -> Result<FrameRate, RateError> {
        FrameRate::from_bits_per_period(
            self.rate_mbps * 1_000_000,
            self.period_s,
            u64::from(self.payload),
            u32::from(threads.max(1)),
        )
    }

    /// The fields of `mode?` after the code (jive5ab's `mk5bdom_mode_fn` "magic mode" reply).
    pub fn query_fields(&self) -> Vec<String> {
        let format = match (self.legacy, self.complex) {
            (false, false) => "VDIF",
            (true, false) => "VDIF (legacy)",
            (false, true) => "VDIF (complex)",
            (true, true) => "VDIF (legacy, complex)",
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
        let l = Mode::parse("vdifl_1024-512/2-8-2/4").unwrap().unwrap();
        assert!(l.legacy && !l.complex);
        assert_eq!((l.frame_len(), l.rate_bps()), (1040, 256e6));
        assert_eq!(Mode::parse("none"), Ok(None));
    }

    #[test]
    fn other_modes_are_refused_with_a_reason() {
        assert!(matches!(Mode::parse("Mark5B-512-16-2"), Err(ModeError::Unsupported(_))));
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

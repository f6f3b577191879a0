//! A data rate in whole bits per second: the one type for "512M", "4.096G", "512000000"
//! (issue 38 item 4). Parsed as decimal digits and an SI prefix into an integer, never through
//! a float, so "4.096G" is exactly 4 096 000 000 b/s and a rate that is not a whole number of
//! bits per second is refused with its text, not rounded.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a text is not a bit rate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BitRateError {
    /// No digits, or something other than digits, one '.', a prefix and a unit.
    #[error("{0:?} is not a bit rate (forms: 512000000, 512M, 4.096G, 64kbps, 1Gb/s)")]
    Syntax(String),
    /// A prefix that is not k, M, G or T.
    #[error("{text:?}: unknown prefix {prefix:?} (k, M, G, T)")]
    Prefix {
        /// The whole text.
        text: String,
        /// The prefix found.
        prefix: String,
    },
    /// Zero bits per second.
    #[error("{0:?} is 0 b/s: a rate must be positive")]
    Zero(String),
    /// More decimals than the prefix has digits: not whole bits per second.
    #[error("{0:?} is not a whole number of bits per second")]
    Fractional(String),
    /// Past 2^64 − 1 b/s.
    #[error("{0:?} exceeds {max} b/s", max = u64::MAX)]
    Overflow(String),
}

/// Bits per second, > 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct BitRate(u64);

impl BitRate {
    /// The lowest rate: 1 b/s.
    pub const MIN: BitRate = BitRate(1);

    /// A rate of `bps` bits per second; 0 is refused.
    pub fn new(bps: u64) -> Option<BitRate> {
        (bps > 0).then_some(BitRate(bps))
    }

    /// Bits per second.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Parse digits with at most one '.', an optional SI prefix (k, M, G, T: powers of 1000)
    /// and an optional unit (b/s, bps, bit/s).
    pub fn parse(text: &str) -> Result<BitRate, BitRateError> {
        let syntax = || BitRateError::Syntax(text.to_string());
        let s = text.trim();
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (number, unit) = s.split_at(end);
        let prefix = ["b/s", "bit/s", "bps"]
            .iter()
            .find_map(|u| unit.strip_suffix(u))
            .unwrap_or(unit);
        let exp: u32 = match prefix {
            "" => 0,
            "k" | "K" => 3,
            "M" => 6,
            "G" => 9,
            "T" => 12,
            p => {
                return Err(BitRateError::Prefix {
                    text: text.to_string(),
                    prefix: p.to_string(),
                })
            }
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && frac.is_empty() || frac.contains('.') {
            return Err(syntax());
        }
        let frac = frac.trim_end_matches('0');
        let frac_len = u32::try_from(frac.len()).map_err(|_| syntax())?;
        if frac_len > exp {
            return Err(BitRateError::Fractional(text.to_string()));
        }
        let overflow = || BitRateError::Overflow(text.to_string());
        // The digits as an integer, then scaled by what the decimals leave of the prefix.
        let digits = format!("{whole}{frac}");
        let digits = digits.trim_start_matches('0');
        let n: u64 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| overflow())?
        };
        let bps = 10u64
            .checked_pow(exp - frac_len)
            .and_then(|m| n.checked_mul(m))
            .ok_or_else(overflow)?;
        BitRate::new(bps).ok_or_else(|| BitRateError::Zero(text.to_string()))
    }

    /// The time `bytes` bytes take at this rate, in whole nanoseconds (rounded down; saturating
    /// at `u64::MAX` ns): the spacing of packets, from integers only.
    pub fn time_of(self, bytes: u64) -> Duration {
        let ns = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(self.0);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

impl TryFrom<u64> for BitRate {
    type Error = BitRateError;
    fn try_from(bps: u64) -> Result<BitRate, BitRateError> {
        BitRate::new(bps).ok_or_else(|| BitRateError::Zero(bps.to_string()))
    }
}

impl From<BitRate> for u64 {
    fn from(r: BitRate) -> u64 {
        r.0
    }
}

impl std::str::FromStr for BitRate {
    type Err = BitRateError;
    fn from_str(s: &str) -> Result<BitRate, BitRateError> {
        BitRate::parse(s)
    }
}

/// The largest prefix that shows the rate exactly: "512 Mb/s", "4.096 Gb/s", "1 b/s".
impl std::fmt::Display for BitRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (div, prefix) = [
            (1_000_000_000_000, "T"),
            (1_000_000_000, "G"),
            (1_000_000, "M"),
            (1_000, "k"),
        ]
        .into_iter()
        .find(|(d, _)| self.0 >= *d)
        .unwrap_or((1, ""));
        let (whole, rest) = (self.0 / div, self.0 % div);
        if rest == 0 {
            return write!(f, "{whole} {prefix}b/s");
        }
        let width = div.ilog10() as usize;
        let frac = format!("{rest:0width$}");
        write!(f, "{whole}.{} {prefix}b/s", frac.trim_end_matches('0'))
    }
}

/// Serde of a [`BitRate`] field in a result JSON has always carried as a float
/// (`"rate_bps": 512000000.0`): written as that float, so the JSON stays as it was, and read from
/// a float or an integer (whole b/s, rounded; 0, negative or not finite refused).
pub mod as_f64 {
    use super::BitRate;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    /// The rate as a float.
    pub fn serialize<S: Serializer>(r: &BitRate, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(r.0 as f64)
    }

    /// A positive, finite number of b/s, rounded to whole.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BitRate, D::Error> {
        let v = f64::deserialize(d)?;
        // 2^64 as f64: every value below it rounds into a u64.
        let whole = v.round();
        if !(1.0..18_446_744_073_709_551_616.0).contains(&whole) {
            return Err(D::Error::custom(format!("{v} b/s: a rate is 1 to 2^64 - 1 b/s")));
        }
        Ok(BitRate(whole as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Report {
        #[serde(with = "as_f64")]
        rate_bps: BitRate,
    }

    #[test]
    fn a_results_float_rate_is_written_as_a_float_and_read_from_either_form() {
        let r = Report {
            rate_bps: BitRate(512_000_000),
        };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"rate_bps":512000000.0}"#);
        for text in [
            r#"{"rate_bps":512000000.0}"#,
            r#"{"rate_bps":512000000}"#,
            r#"{"rate_bps":5.12e8}"#,
        ] {
            assert_eq!(serde_json::from_str::<Report>(text).unwrap(), r, "{text}");
        }
        for bad in [
            r#"{"rate_bps":0}"#,
            r#"{"rate_bps":-8}"#,
            r#"{"rate_bps":2e19}"#,
            r#"{"rate_bps":"8"}"#,
        ] {
            assert!(serde_json::from_str::<Report>(bad).is_err(), "{bad}");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn the_forms_parse_to_whole_bits() {
        for (text, bps) in [
            ("4096M", 4_096_000_000),
            ("4.096G", 4_096_000_000),
            ("512000000", 512_000_000),
            ("512M", 512_000_000),
            ("512Mb/s", 512_000_000),
            ("64kbps", 64_000),
            ("1Gbit/s", 1_000_000_000),
            ("2.5T", 2_500_000_000_000),
            ("0.5k", 500),
            (".5k", 500),
            ("1.000M", 1_000_000),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(BitRate::parse(text).map(BitRate::get), Ok(bps), "{text}");
        }
    }

    #[test]
    fn zero_fractions_overflow_and_junk_are_refused_with_the_text() {
        assert_eq!(BitRate::parse("0"), Err(BitRateError::Zero("0".into())));
        assert_eq!(BitRate::parse("0.000M"), Err(BitRateError::Zero("0.000M".into())));
        assert_eq!(BitRate::parse("1.5"), Err(BitRateError::Fractional("1.5".into())));
        assert_eq!(
            BitRate::parse("1.0001k"),
            Err(BitRateError::Fractional("1.0001k".into()))
        );
        assert_eq!(
            BitRate::parse("18446744073709551616"),
            Err(BitRateError::Overflow("18446744073709551616".into()))
        );
        assert_eq!(
            BitRate::parse("20000000T"),
            Err(BitRateError::Overflow("20000000T".into()))
        );
        assert!(matches!(BitRate::parse("5X"), Err(BitRateError::Prefix { .. })));
        for junk in ["", ".", "M", "1.2.3M", "-5M", "1e9", " "] {
            assert!(BitRate::parse(junk).is_err(), "{junk:?}");
        }
        assert!(BitRate::parse("1.5").unwrap_err().to_string().contains("\"1.5\""));
        assert_eq!(BitRate::new(0), None);
        assert!(serde_json::from_str::<BitRate>("0").is_err());
        assert_eq!(serde_json::to_string(&BitRate(512_000_000)).unwrap(), "512000000");
    }

    #[test]
    fn display_shows_the_exact_rate() {
        for (bps, text) in [
            (512_000_000, "512 Mb/s"),
            (4_096_000_000, "4.096 Gb/s"),
            (1, "1 b/s"),
            (1_500, "1.5 kb/s"),
            (1_000_000_000_001, "1.000000000001 Tb/s"),
        ] {
            assert_eq!(BitRate(bps).to_string(), text);
        }
    }

    #[test]
    fn spacing_is_integer_nanoseconds() {
        // An 8032-byte frame at 512 Mb/s: 125.5 µs exactly.
        assert_eq!(BitRate(512_000_000).time_of(8032), Duration::from_nanos(125_500));
        // 1 byte at 3 b/s: 2.666… s, rounded down to the nanosecond.
        assert_eq!(BitRate(3).time_of(1), Duration::from_nanos(2_666_666_666));
        assert_eq!(BitRate(1).time_of(u64::MAX), Duration::from_nanos(u64::MAX));
    }

    proptest! {
        /// What Display shows parses back to the same rate (without its space).
        #[test]
        fn display_round_trips(bps in 1u64..=u64::MAX) {
            let shown = BitRate(bps).to_string().replace(' ', "");
            prop_assert_eq!(BitRate::parse(&shown), Ok(BitRate(bps)));
        }
    }
}

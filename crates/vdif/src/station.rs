//! The station id of word 3 (bits 15–0), and the one way evlbi writes it.
//!
//! VDIF 1.1.1 (Table 1, word 3) carries either a globally assigned two-character station code,
//! first character in the high byte ("Ef", "Wb", "O8"), or a user-assigned number. evlbi shows
//! an id as its code when its first byte is an ASCII letter and its second a letter or digit —
//! the codes a radio astronomer reads in schedules and logs — and as the decimal number
//! otherwise (a "code" of two digits, say 0x3830 "80", would read back as the number 80). Reports and the names of
//! evlbi's own recordings use that one rule ([`std::fmt::Display`]), so a report saying station
//! `1` matches a file `1_….vdif` or a recording `scan_ds1`. The one exception is jive5ab's
//! `{station}` field of data-stream names (`datastream = add : {station} : *`), whose recording
//! names the Field System and jive5ab's tools look for: there [`StationId::jive5ab_field`]
//! writes what jive5ab writes (four hex digits for a number).

use serde::{Deserialize, Serialize};

use crate::error::HeaderError;

/// A VDIF station id (word 3, bits 15–0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StationId(pub u16);

impl StationId {
    /// The two-character code, when the first byte is an ASCII letter and the second a letter
    /// or digit.
    pub fn code(self) -> Option<[char; 2]> {
        let [hi, lo] = self.0.to_be_bytes();
        (hi.is_ascii_alphabetic() && lo.is_ascii_alphanumeric()).then_some([hi as char, lo as char])
    }

    /// A station given as its code (a letter, then a letter or digit: "Ef", "O8") or a number
    /// ("65532").
    pub fn parse(s: &str) -> Result<StationId, HeaderError> {
        if let Ok(n) = s.parse::<u16>() {
            return Ok(StationId(n));
        }
        match s.as_bytes() {
            &[hi, lo] if hi.is_ascii_alphabetic() && lo.is_ascii_alphanumeric() => {
                Ok(StationId(u16::from_be_bytes([hi, lo])))
            }
            _ => Err(HeaderError::BadStation(s.to_string())),
        }
    }

    /// jive5ab's `{station}` replacement (`replace_fields`): the code, else the id as four hex
    /// digits. Only for data-stream names, which jive5ab compatibility fixes.
    pub fn jive5ab_field(self) -> String {
        match self.code() {
            Some([a, b]) => format!("{a}{b}"),
            None => format!("{:04x}", self.0),
        }
    }
}

/// Every 16-bit number is a station id (a user-assigned number, or a code's two bytes).
impl From<u16> for StationId {
    fn from(id: u16) -> StationId {
        StationId(id)
    }
}

impl std::fmt::Display for StationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code() {
            Some([a, b]) => write!(f, "{a}{b}"),
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::str::FromStr for StationId {
    type Err = HeaderError;
    fn from_str(s: &str) -> Result<StationId, HeaderError> {
        StationId::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn codes_read_as_codes_and_numbers_as_numbers() {
        let ef = StationId(u16::from_be_bytes(*b"Ef"));
        assert_eq!((ef.to_string(), ef.jive5ab_field()), ("Ef".into(), "Ef".into()));
        assert_eq!(StationId(u16::from_be_bytes(*b"O8")).to_string(), "O8");
        assert_eq!(
            (StationId(1).to_string(), StationId(1).jive5ab_field()),
            ("1".into(), "0001".into())
        );
        // Punctuation is no code: "E/" would put a '/' in a file name.
        let slash = StationId(u16::from_be_bytes(*b"E/"));
        assert_eq!(
            (slash.to_string(), slash.jive5ab_field()),
            ("17711".into(), "452f".into())
        );
        assert_eq!(StationId(0xdead).jive5ab_field(), "dead");
        assert_eq!(StationId::parse("Ef"), Ok(ef));
        assert_eq!(StationId::parse("65532"), Ok(StationId(65532)));
        for bad in ["E/", "E", "Eff", "", "65536", "é"] {
            assert!(StationId::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        /// What is shown parses back to the same id, and is safe in a file name.
        #[test]
        fn display_round_trips(id: u16) {
            let s = StationId(id).to_string();
            prop_assert_eq!(StationId::parse(&s), Ok(StationId(id)));
            prop_assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
        }
    }
}

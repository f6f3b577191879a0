//! jive5ab's data streams: which VDIF frames a recording of several streams puts together, and
//! what each such recording is called.
//!
//! The Field System defines them before a session (`drudg`'s thread procedure:
//! `datastream = clear`, `datastream = add : ds{thread} : *`, `datastream = reset`). A data
//! stream has a name — a pattern in which `{thread}` and `{station}` stand for the VDIF thread
//! id (decimal) and station (two characters, or four hex digits when they are not letters or
//! digits) — and match criteria; a frame belongs to the first stream, in name order, one of
//! whose criteria it meets, and is recorded as `<label>_ds<name>` (jive5ab's chunk makers,
//! `threadfns/multisend.cc`). A frame that meets none is not recorded. With no stream defined a
//! recording is the label itself.
//!
//! A criterion is `[{host|*}[@{port|*}]/][{station|0xID|*}.]{*|threads}` with threads a comma
//! list of ids and ranges (`0,2,4-7`), as jive5ab's `compile_criteria` (mk6info.cc) takes it.
//! evlbi's recorder does not see the sender of a frame at this point, so a host or port other
//! than `*` is refused with that reason rather than ignored.

use std::collections::BTreeMap;

use thiserror::Error;

/// Most data streams (jive5ab has no limit; each holds a recording open).
pub const MAX_STREAMS: usize = 64;
/// Most criteria in one stream.
pub const MAX_CRITERIA: usize = 32;
/// Highest VDIF thread id (10 bits, VDIF 1.1.1 §3).
const MAX_THREAD: u16 = 1023;

/// Why a data stream definition is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DataStreamError {
    /// `add` of a name that is there already.
    #[error("The data stream '{0}' already has a definition")]
    Exists(String),
    /// `remove` of a name that is not there.
    #[error("The data stream '{0}' was not defined so cannot remove it")]
    Unknown(String),
    /// A name that could not name a recording.
    #[error("data stream name '{0}': 1 to 32 letters, digits, '+' or '-' besides {{thread}} and {{station}} (no '_' or '.': jive5ab finds streams by _ds<name>)")]
    BadName(String),
    /// A criterion that is not in jive5ab's grammar.
    #[error("The vdif criterion '{0}' does not match the specification ([host[@port]/][station.]threads)")]
    BadCriterion(String),
    /// A criterion on the sender's address.
    #[error("The vdif criterion '{0}' matches on the sender's address, which evlbi's recorder does not (use station and thread)")]
    SenderCriterion(String),
    /// No criteria given.
    #[error("Missing data stream match specification(s)")]
    NoCriteria,
    /// Too many streams or criteria.
    #[error("at most {MAX_STREAMS} data streams of {MAX_CRITERIA} criteria each")]
    TooMany,
}

/// Which station ids a criterion takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StationMatch {
    Any,
    /// A numeric id (`0x1234`).
    Id(u16),
    /// One character: the first of the two-character code.
    First(u8),
    /// The two-character code.
    Code(u16),
}

/// One match criterion.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Criterion {
    station: StationMatch,
    /// Inclusive thread id ranges; empty: every thread.
    threads: Vec<(u16, u16)>,
}

impl Criterion {
    fn parse(text: &str) -> Result<Criterion, DataStreamError> {
        let bad = || DataStreamError::BadCriterion(text.to_string());
        let rest = match text.split_once('/') {
            Some((origin, rest)) => {
                let (host, port) = origin.split_once('@').unwrap_or((origin, ""));
                if !matches!(host, "" | "*") || !matches!(port, "" | "*") {
                    // Still check the grammar: a malformed one is a malformed one.
                    let port_ok = port.is_empty() || port == "*" || port.bytes().all(|b| b.is_ascii_digit());
                    let host_ok = !host.contains(['@', '/', '*']) || host == "*";
                    if !port_ok || !host_ok {
                        return Err(bad());
                    }
                    return Err(DataStreamError::SenderCriterion(text.to_string()));
                }
                rest
            }
            None => text,
        };
        let (station, threads) = match rest.rsplit_once('.') {
            Some((s, t)) => (Some(s), t),
            None => (None, rest),
        };
        let station = match station {
            None | Some("*") => StationMatch::Any,
            Some(s) if s.len() > 2 && s.starts_with("0x") && s.len() <= 6 => {
                StationMatch::Id(u16::from_str_radix(&s[2..], 16).map_err(|_| bad())?)
            }
            Some(s) if s.len() == 1 && s.as_bytes()[0].is_ascii_alphabetic() => StationMatch::First(s.as_bytes()[0]),
            Some(s) if s.len() == 2 && s.bytes().all(|b| b.is_ascii_alphabetic()) => {
                StationMatch::Code(u16::from_be_bytes([s.as_bytes()[0], s.as_bytes()[1]]))
            }
            Some(_) => return Err(bad()),
        };
        let threads = if threads == "*" {
            Vec::new()
        } else {
            let mut ranges = Vec::new();
            for part in threads.split(',') {
                let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                let id = |s: &str| {
                    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(bad());
                    }
                    s.parse::<u16>().ok().filter(|t| *t <= MAX_THREAD).ok_or_else(bad)
                };
                let (lo, hi) = (id(lo)?, id(hi)?);
                ranges.push((lo.min(hi), lo.max(hi)));
            }
            ranges
        };
        Ok(Criterion { station, threads })
    }

    fn matches(&self, station: vdif::StationId, thread: u16) -> bool {
        let station = station.0;
        let station_ok = match self.station {
            StationMatch::Any => true,
            StationMatch::Id(id) | StationMatch::Code(id) => station == id,
            StationMatch::First(c) => station.to_be_bytes()[0] == c,
        };
        station_ok && (self.threads.is_empty() || self.threads.iter().any(|&(lo, hi)| (lo..=hi).contains(&thread)))
    }
}

/// One data stream: its name pattern, its criteria as given (for `datastream?`) and compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DataStream {
    text: Vec<String>,
    criteria: Vec<Criterion>,
}

/// The data streams defined, by name (jive5ab keeps them in a sorted map: the first match is
/// the first by name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataStreams {
    streams: BTreeMap<String, DataStream>,
}

/// Whether `name` (a pattern) makes recording names jive5ab can find: fields replaced by the
/// longest they expand to, letters, digits, `+`, `-` only.
fn name_ok(name: &str) -> bool {
    let probe = name.replace("{thread}", "1023").replace("{station}", "ffff");
    (1..=crate::name::MAX_STREAM_NAME).contains(&probe.len())
        && probe
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-')
}

impl DataStreams {
    /// No stream defined.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// How many are defined.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.streams.keys().map(String::as_str)
    }

    /// The criteria of stream `name` as they were given.
    pub fn criteria(&self, name: &str) -> Option<&[String]> {
        self.streams.get(name).map(|s| s.text.as_slice())
    }

    /// `datastream = add : NAME : criterion [: criterion …]` (empty criteria are skipped).
    pub fn add(&mut self, name: &str, criteria: &[String]) -> Result<(), DataStreamError> {
        if self.streams.contains_key(name) {
            return Err(DataStreamError::Exists(name.to_string()));
        }
        if !name_ok(name) {
            return Err(DataStreamError::BadName(name.to_string()));
        }
        let text: Vec<String> = criteria.iter().filter(|c| !c.is_empty()).cloned().collect();
        if text.is_empty() {
            return Err(DataStreamError::NoCriteria);
        }
        if text.len() > MAX_CRITERIA || self.streams.len() >= MAX_STREAMS {
            return Err(DataStreamError::TooMany);
        }
        let criteria = text.iter().map(|c| Criterion::parse(c)).collect::<Result<_, _>>()?;
        self.streams.insert(name.to_string(), DataStream { text, criteria });
        Ok(())
    }

    /// `datastream = remove : NAME`.
    pub fn remove(&mut self, name: &str) -> Result<(), DataStreamError> {
        self.streams
            .remove(name)
            .map(drop)
            .ok_or_else(|| DataStreamError::Unknown(name.to_string()))
    }

    /// `datastream = clear`.
    pub fn clear(&mut self) {
        self.streams.clear();
    }

    /// The stream name a frame of `station`, `thread` belongs to (fields replaced); `None`
    /// when it meets no stream's criteria.
    pub fn stream_of(&self, station: vdif::StationId, thread: u16) -> Option<String> {
        let (name, _) = self
            .streams
            .iter()
            .find(|(_, s)| s.criteria.iter().any(|c| c.matches(station, thread)))?;
        Some(
            name.replace("{thread}", &thread.to_string())
                .replace("{station}", &station.jive5ab_field()),
        )
    }

    /// Whether the names depend on the thread (one recording per thread, or threads split
    /// between streams): the recorder then keys frames by thread too.
    pub fn by_thread(&self) -> bool {
        self.streams
            .iter()
            .any(|(n, s)| n.contains("{thread}") || s.criteria.iter().any(|c| !c.threads.is_empty()))
            || self.streams.len() > 1
    }
}

/// How a recorder names what it records of a scan labelled `label`: jive5ab's FlexBuff rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelNames {
    label: String,
    streams: DataStreams,
}

impl LabelNames {
    /// Recordings of `label` under `streams` (a [`crate::name::ScanName`] leaves room for
    /// "_ds" and the longest stream name: checked where it entered, not here).
    pub fn new(label: &crate::name::ScanName, streams: DataStreams) -> LabelNames {
        LabelNames {
            label: label.to_string(),
            streams,
        }
    }

    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The data streams.
    pub fn streams(&self) -> &DataStreams {
        &self.streams
    }

    /// The recording a frame of `station`, `thread` goes to: the label itself without data
    /// streams, else `label_ds<stream>`; `None` when it meets no stream.
    pub fn recording(&self, station: vdif::StationId, thread: u16) -> Option<String> {
        if self.streams.is_empty() {
            return Some(self.label.clone());
        }
        self.streams
            .stream_of(station, thread)
            .map(|s| format!("{}_ds{s}", self.label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::is_valid;
    use proptest::prelude::*;

    const EF: u16 = u16::from_be_bytes(*b"Ef");
    const WB: u16 = u16::from_be_bytes(*b"Wb");

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_field_systems_thread_streams_name_one_recording_per_thread() {
        let mut ds = DataStreams::default();
        ds.add("ds{thread}", &v(&["*"])).unwrap();
        let names = LabelNames::new(&crate::name::ScanName::parse("r41066_ef_no0001").unwrap(), ds);
        assert_eq!(
            names.recording(vdif::StationId(EF), 0).unwrap(),
            "r41066_ef_no0001_dsds0"
        );
        assert_eq!(
            names.recording(vdif::StationId(EF), 17).unwrap(),
            "r41066_ef_no0001_dsds17"
        );
        assert!(names.streams().by_thread());
        let plain = LabelNames::new(
            &crate::name::ScanName::parse("r41066_ef_no0001").unwrap(),
            DataStreams::default(),
        );
        assert_eq!(plain.recording(vdif::StationId(WB), 3).unwrap(), "r41066_ef_no0001");
    }

    #[test]
    fn criteria_select_stations_and_threads_in_name_order() {
        let mut ds = DataStreams::default();
        ds.add("odd", &v(&["1,3,5-7"])).unwrap();
        ds.add("even", &v(&["*.0,2,4"])).unwrap();
        ds.add("wb", &v(&["Wb.*"])).unwrap();
        ds.add("id", &v(&["*/0x0101.8"])).unwrap();
        ds.add("st{station}", &v(&["", "E.9"])).unwrap();
        assert_eq!(ds.stream_of(vdif::StationId(EF), 0).as_deref(), Some("even"));
        assert_eq!(ds.stream_of(vdif::StationId(EF), 6).as_deref(), Some("odd"));
        // Both "even" and "wb" take Wb thread 2: the first by name wins.
        assert_eq!(ds.stream_of(vdif::StationId(WB), 2).as_deref(), Some("even"));
        assert_eq!(ds.stream_of(vdif::StationId(WB), 8).as_deref(), Some("wb"));
        assert_eq!(ds.stream_of(vdif::StationId(0x0101), 8).as_deref(), Some("id"));
        assert_eq!(ds.stream_of(vdif::StationId(EF), 9).as_deref(), Some("stEf"));
        assert_eq!(ds.stream_of(vdif::StationId(EF), 8), None, "no stream takes it");
        assert_eq!(ds.criteria("st{station}").unwrap(), ["E.9"]);
        assert_eq!(
            ds.names().collect::<Vec<_>>(),
            ["even", "id", "odd", "st{station}", "wb"]
        );
        assert_eq!(ds.add("odd", &v(&["*"])), Err(DataStreamError::Exists("odd".into())));
        ds.remove("odd").unwrap();
        assert_eq!(ds.remove("odd"), Err(DataStreamError::Unknown("odd".into())));
        ds.clear();
        assert!(ds.is_empty());
    }

    #[test]
    fn bad_definitions_are_refused_with_the_reason() {
        let mut ds = DataStreams::default();
        for (name, c, want) in [
            ("a_b", "*", "BadName"),
            ("a.b", "*", "BadName"),
            ("", "*", "BadName"),
            ("x", "", "NoCriteria"),
            ("x", "1-2000", "BadCriterion"),
            ("x", "Eff.1", "BadCriterion"),
            ("x", "1,,2", "BadCriterion"),
            ("x", "0xfffff.1", "BadCriterion"),
            ("x", "10.0.0.1@4000/*", "SenderCriterion"),
            ("x", "host/1", "SenderCriterion"),
        ] {
            let e = ds.add(name, &v(&[c])).unwrap_err();
            assert!(format!("{e:?}").starts_with(want), "{name} {c}: {e:?}");
        }
        assert!(ds.add("ok", &v(&["*@*/*.*"])).is_ok());
    }

    proptest! {
        #[test]
        fn any_criterion_text_is_parsed_or_refused_never_panics(c in "[ -~]{0,24}", st in any::<u16>(), th in 0u16..1024) {
            let mut ds = DataStreams::default();
            if ds.add("s{thread}", &[c]).is_ok() {
                let st = vdif::StationId(st);
                if let Some(n) = ds.stream_of(st, th) {
                    let names = LabelNames::new(&crate::name::ScanName::parse("lbl").unwrap(), ds.clone());
                    prop_assert!(is_valid(&names.recording(st, th).unwrap()));
                    prop_assert_eq!(n, format!("s{th}"));
                }
            }
        }
    }
}

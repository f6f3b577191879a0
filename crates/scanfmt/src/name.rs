//! Scan names: what a name may hold, and how a recorder of several stations (or threads) names
//! each one's recording.
//!
//! A scan name becomes a directory and file name on every disk (`<disk>/<scan>/<scan>.%08u`,
//! `<disk>/<scan>`), so it is checked before any path is made from it: ASCII letters, digits,
//! `_`, `+` and `-`, at most [`MAX_NAME`] bytes. No `.` — jive5ab finds vbs chunks with
//! `^.+/[^/.]+\.([0-9]{8})$` (libvbs.cc), so a dot in the name would hide the chunks — and no
//! `/`, so a name can never leave its disk.
//!
//! Several stations arriving at one recorder each get their own recording, named the way
//! jive5ab names the recordings of its data streams (`datastream = add : {station} : *`, the
//! suffix `_ds<name>` recognised by jive5ab's `scan_check`, `vbs2net` and vbs_fs, mountpoint.cc):
//!
//! | `--scan`                | station Ef, one recording per station | per thread (thread 3)    |
//! |-------------------------|---------------------------------------|--------------------------|
//! | `ev123_no0001`          | `ev123_no0001_dsEf`                   | `ev123_no0001_dsEf-3`    |
//! | `ev123_{station}_no0001`| `ev123_Ef_no0001`                     | (needs `{thread}`)       |
//! | `ev123_{station}_no0001_t{thread}` | (no `{thread}` without a split) | `ev123_Ef_no0001_t3` |
//!
//! `{station}` and `{thread}` stand for the station as evlbi shows it everywhere
//! ([`vdif::StationId`]: the two-character code, else the number, so station 1 records as
//! `ev123_no0001_ds1`, as its report names it) and the thread id. (The FS's data streams,
//! [`crate::datastream`], write jive5ab's `{station}`: their names are jive5ab's.)

use thiserror::Error;

/// Longest scan name, bytes (jive5ab's scan labels are at most 50; room for suffixes).
pub const MAX_NAME: usize = 128;

/// Longest data-stream name (`datastream = add : <name> : …`), bytes.
pub const MAX_STREAM_NAME: usize = 32;

/// Longest label a new scan may be given (`record = on : <label>`, `--scan <label>`): room left
/// in [`MAX_NAME`] for what a recorder appends — a letter when the label is taken (jive5ab's
/// rule) and `_ds` with the longest data-stream name — so a label accepted where it enters is
/// never refused later, when the recording is named.
pub const MAX_LABEL: usize = MAX_NAME - 1 - "_ds".len() - MAX_STREAM_NAME;

/// Why a scan name or name template is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// Empty, too long, or a character outside `A-Za-z0-9_+-`.
    #[error("scan name {0:?}: use 1 to {MAX_NAME} ASCII letters, digits, '_', '+' or '-' (no '.', no '/')")]
    BadName(String),
    /// A new scan's label: empty, longer than [`MAX_LABEL`], or a character outside `A-Za-z0-9_+-`.
    #[error("scan name {0:?}: use 1 to {MAX_LABEL} ASCII letters, digits, '_', '+' or '-' (no '.', no '/')")]
    BadLabel(String),
    /// `{thread}` in a template that records all threads of a station together.
    #[error("scan name {0:?}: {{thread}} needs one recording per thread (--split thread)")]
    ThreadWithoutSplit(String),
    /// One recording per thread, but a template with `{station}` and no `{thread}`: two
    /// threads would share a name.
    #[error("scan name {0:?}: with one recording per thread the name needs {{thread}} too")]
    SplitWithoutThread(String),
}

/// Whether `s` is usable as a scan name (see the module docs).
pub fn is_valid(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'+' || b == b'-')
}

/// The label of a new scan, checked once where it enters (`record = on : <label>` over VSI-S,
/// `--scan` on the command line, the FS's data streams): 1 to [`MAX_LABEL`] of `A-Za-z0-9_+-`,
/// so it and every name a recorder makes of it can name a directory and a file on every disk.
/// Carried as this type from there on (the recorder's letter for a taken label, the data
/// streams' suffixes), never checked again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScanName(String);

impl ScanName {
    /// `s` as the label of a new scan: the one rule and the one message wherever it enters.
    pub fn parse(s: &str) -> Result<ScanName, NameError> {
        if is_valid(s) && s.len() <= MAX_LABEL {
            Ok(ScanName(s.to_string()))
        } else {
            Err(NameError::BadLabel(s.to_string()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The label with jive5ab's letter for a taken label appended (`ev_no1` → `ev_no1a`): one
    /// ASCII letter, within what [`MAX_LABEL`] keeps room for; `None` for anything else, or a
    /// label that already has its letter.
    pub fn with_letter(&self, letter: char) -> Option<ScanName> {
        (letter.is_ascii_alphabetic() && self.0.len() <= MAX_LABEL).then(|| ScanName(format!("{}{letter}", self.0)))
    }
}

impl std::fmt::Display for ScanName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name of a recording already on a disk, or part of one, as `scan_set` is given it: the
/// rule every recording name meets ([`is_valid`]: up to [`MAX_NAME`], longer than a
/// [`ScanName`] label may be, since a recorder appends a letter and `_ds<stream>` to a label).
/// Checked once where it enters, so no path is ever made of anything else. Not a label: a new
/// scan is named by a [`ScanName`] only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordingName(String);

impl RecordingName {
    /// `s` as a recording's name (or part of one).
    pub fn parse(s: &str) -> Result<RecordingName, NameError> {
        check(s).map(|s| RecordingName(s.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RecordingName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `s` if it is a valid scan name.
pub fn check(s: &str) -> Result<&str, NameError> {
    if is_valid(s) {
        Ok(s)
    } else {
        Err(NameError::BadName(s.to_string()))
    }
}

/// How a recorder names each station's (or thread's) recording: `--scan` with optional
/// `{station}` and `{thread}` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameTemplate {
    template: String,
    per_thread: bool,
    fields: bool,
}

impl NameTemplate {
    /// Check `template` for recordings per station (`per_thread` false) or per VDIF thread.
    pub fn new(template: &str, per_thread: bool) -> Result<NameTemplate, NameError> {
        let has_station = template.contains("{station}");
        let has_thread = template.contains("{thread}");
        if !has_station && !has_thread {
            // A plain label: the one rule of a new scan's label, whatever is appended to it.
            ScanName::parse(template)?;
        }
        // Validate with the fields replaced by the longest text they can expand to.
        let probe = template.replace("{station}", "65535").replace("{thread}", "1023");
        let longest = if has_station || has_thread {
            probe.len()
        } else {
            probe.len() + "_ds65535-1023".len()
        };
        if !is_valid(&probe) || longest > MAX_NAME {
            return Err(NameError::BadName(template.to_string()));
        }
        if has_thread && !per_thread {
            return Err(NameError::ThreadWithoutSplit(template.to_string()));
        }
        if has_station && per_thread && !has_thread {
            return Err(NameError::SplitWithoutThread(template.to_string()));
        }
        Ok(NameTemplate {
            template: template.to_string(),
            per_thread,
            fields: has_station || has_thread,
        })
    }

    /// The template as given.
    pub fn as_str(&self) -> &str {
        &self.template
    }

    /// The recording name of `station` (and `thread`, when recording per thread).
    pub fn expand(&self, station: vdif::StationId, thread: Option<u16>) -> String {
        let st = station.to_string();
        let thread = thread.filter(|_| self.per_thread);
        if self.fields {
            let th = thread.map_or(String::new(), |t| t.to_string());
            self.template.replace("{station}", &st).replace("{thread}", &th)
        } else {
            match thread {
                Some(t) => format!("{}_ds{st}-{t}", self.template),
                None => format!("{}_ds{st}", self.template),
            }
        }
    }
}

/// The names a recording labelled `label` may take, in jive5ab's order (`mk_scan_name`,
/// net2vbs.cc): the label itself, then the label with one letter appended, `a`…`z` then
/// `A`…`Z` — 53 in all.
pub fn label_candidates(label: &ScanName) -> impl Iterator<Item = ScanName> + '_ {
    std::iter::once(label.clone()).chain(LETTERS.iter().filter_map(move |c| label.with_letter(*c)))
}

/// The letters a taken label is given, in jive5ab's order.
const LETTERS: [char; 52] = {
    let mut l = ['a'; 52];
    let mut i = 0;
    while i < 26 {
        l[i] = (b'a' + i as u8) as char;
        l[26 + i] = (b'A' + i as u8) as char;
        i += 1;
    }
    l
};

/// The name jive5ab gives a new recording labelled `label` when `entries` are the names found
/// on its disks (`mk_scan_name`, net2vbs.cc): `label` when none is `label`, `label<x>` (one
/// letter) or either with a data-stream suffix (`_ds<stream>`); else `label` with the first
/// letter none of them uses. `None` when all 52 are taken (jive5ab refuses then too).
pub fn free_label<'a>(label: &ScanName, entries: impl IntoIterator<Item = &'a str>) -> Option<ScanName> {
    let mut taken_base = false;
    let mut letters = std::collections::BTreeSet::new();
    for name in entries {
        let Some(rest) = name.strip_prefix(label.as_str()) else {
            continue;
        };
        let (letter, rest) = match rest.chars().next() {
            Some(c) if c.is_ascii_alphabetic() => (Some(c), &rest[1..]),
            _ => (None, rest),
        };
        let stream_ok = rest.is_empty()
            || rest
                .strip_prefix("_ds")
                .is_some_and(|s| !s.is_empty() && !s.contains(['_', '.']));
        if stream_ok {
            taken_base = true;
            letters.extend(letter);
        }
    }
    if !taken_base {
        return Some(label.clone());
    }
    LETTERS
        .iter()
        .find(|c| !letters.contains(c))
        .and_then(|c| label.with_letter(*c))
}

/// Whether `candidate` is one of the data-stream recordings of `base`: `base_ds<label>` with a
/// label free of `_` and `.` (jive5ab's `(_ds[^_\.]+)`).
pub fn is_data_stream_of(base: &str, candidate: &str) -> bool {
    candidate
        .strip_prefix(base)
        .and_then(|rest| rest.strip_prefix("_ds"))
        .is_some_and(|label| !label.is_empty() && !label.contains(['_', '.']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EF: u16 = u16::from_be_bytes(*b"Ef");

    #[test]
    fn a_taken_label_gets_the_first_letter_no_recording_of_it_uses() {
        let label = |s: &str| ScanName::parse(s).unwrap();
        let free = |l: &str, entries: &[&str]| free_label(&label(l), entries.iter().copied()).map(|n| n.to_string());
        assert_eq!(free("ev_ef_no1", &[]).as_deref(), Some("ev_ef_no1"));
        // A data stream's recording of the label takes the label; `b` is free after `a`.
        let taken = ["ev_ef_no1_dsds0", "ev_ef_no1a", "other"];
        assert_eq!(free("ev_ef_no1", &taken).as_deref(), Some("ev_ef_no1b"));
        // Names that only start like it are other scans (`ev_ef_no1` for `ev_ef_no`).
        assert_eq!(free("ev_ef_no", &taken).as_deref(), Some("ev_ef_no"));
        let all: Vec<String> = label_candidates(&label("x")).map(|n| n.to_string()).collect();
        assert_eq!(all.len(), 53);
        assert_eq!((all[0].as_str(), all[1].as_str(), all[27].as_str()), ("x", "xa", "xA"));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(free("x", &refs), None, "all 52 letters taken");
    }

    #[test]
    fn a_taken_label_of_the_longest_length_still_gets_its_letter_and_stream_names() {
        // The longest label a scan may be given, taken: its lettered name is a label too (was
        // checked again as a new label and refused, one byte over MAX_LABEL), and every data
        // stream's name of it fits MAX_NAME.
        let long = ScanName::parse(&"l".repeat(MAX_LABEL)).unwrap();
        let taken = [long.to_string()];
        let next = free_label(&long, taken.iter().map(String::as_str)).unwrap();
        assert_eq!(next.as_str().len(), MAX_LABEL + 1);
        assert!(next.as_str().ends_with('a'));
        let streams = format!("{next}_ds{}", "s".repeat(MAX_STREAM_NAME));
        assert!(is_valid(&streams), "{} bytes", streams.len());
        // A letter goes on a label once; only ASCII letters.
        assert_eq!(next.with_letter('b'), None);
        assert_eq!(long.with_letter('1'), None);
    }

    #[test]
    fn names_are_checked() {
        for ok in ["ev123_ef_no0001", "a", "x+y-z", &"n".repeat(MAX_NAME)] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in ["", "a.b", "a/b", "..", "a b", "é", &"n".repeat(MAX_NAME + 1)] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_new_scans_label_leaves_room_for_what_recorders_append() {
        let longest = "n".repeat(MAX_LABEL);
        assert_eq!(ScanName::parse(&longest).map(|n| n.as_str().len()), Ok(92));
        // The longest label, a letter for a taken name, and the longest data stream still name.
        assert!(is_valid(&format!("{longest}x_ds{}", "s".repeat(MAX_STREAM_NAME))));
        let too_long = "n".repeat(MAX_LABEL + 1);
        for bad in ["a.b", "", "a/b", too_long.as_str()] {
            assert_eq!(ScanName::parse(bad), Err(NameError::BadLabel(bad.into())));
            // The command line's --scan refuses it with the same words.
            assert_eq!(NameTemplate::new(bad, false), Err(NameError::BadLabel(bad.into())));
        }
    }

    #[test]
    fn stations_are_named_as_reports_name_them() {
        // Report and disk agree: station 1 is "1" in both (was `_ds0001` on disk).
        let numbered = NameTemplate::new("ev123_no0001", false).unwrap();
        assert_eq!(numbered.expand(vdif::StationId(0x0001), None), "ev123_no0001_ds1");
        assert_eq!(vdif::StationId(0x0001).to_string(), "1");
        assert_eq!(
            numbered.expand(vdif::StationId(u16::from_be_bytes(*b"E/")), None),
            "ev123_no0001_ds17711"
        );
        assert_eq!(numbered.expand(vdif::StationId(EF), None), "ev123_no0001_dsEf");
    }

    #[test]
    fn templates_expand_per_station_and_thread() {
        let plain = NameTemplate::new("ev123_no0001", false).unwrap();
        assert_eq!(plain.expand(vdif::StationId(EF), None), "ev123_no0001_dsEf");
        let threads = NameTemplate::new("ev123_no0001", true).unwrap();
        assert_eq!(threads.expand(vdif::StationId(EF), Some(3)), "ev123_no0001_dsEf-3");
        let field = NameTemplate::new("ev123_{station}_no0001", false).unwrap();
        assert_eq!(field.expand(vdif::StationId(EF), None), "ev123_Ef_no0001");
        let both = NameTemplate::new("ev123_{station}_no0001_t{thread}", true).unwrap();
        assert_eq!(both.expand(vdif::StationId(0x0001), Some(12)), "ev123_1_no0001_t12");
        assert_eq!(
            NameTemplate::new("x_{thread}", false),
            Err(NameError::ThreadWithoutSplit("x_{thread}".into()))
        );
        assert_eq!(
            NameTemplate::new("x_{station}", true),
            Err(NameError::SplitWithoutThread("x_{station}".into()))
        );
        assert!(NameTemplate::new("x.{station}", false).is_err());
        assert!(NameTemplate::new("{station}/../x", false).is_err());
        assert!(
            NameTemplate::new(&"n".repeat(MAX_NAME - 5), false).is_err(),
            "no room for the suffix"
        );
    }

    #[test]
    fn data_streams_are_recognised_by_their_suffix() {
        assert!(is_data_stream_of("scan", "scan_dsEf"));
        assert!(is_data_stream_of("scan", "scan_dsEf-3"));
        assert!(!is_data_stream_of("scan", "scan_ds"));
        assert!(!is_data_stream_of("scan", "scan_dsEf_x"));
        assert!(!is_data_stream_of("scan", "scan2_dsEf"));
        assert!(!is_data_stream_of("scan", "scan"));
    }

    proptest! {
        #[test]
        fn every_expansion_is_a_valid_name(
            base in "[a-z0-9_+-]{1,40}",
            station in any::<u16>(),
            thread in 0u16..1024,
            per_thread in any::<bool>(),
        ) {
            let t = NameTemplate::new(&base, per_thread).unwrap();
            let name = t.expand(vdif::StationId(station), Some(thread));
            prop_assert!(is_valid(&name), "{}", name);
            prop_assert!(is_data_stream_of(&base, &name));
        }
    }
}

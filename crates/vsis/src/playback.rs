//! Commands on recorded scans, in jive5ab's FlexBuff dialect (`doc/…/jive5ab-commands.rst`,
//! `src/mk5command/scan_set_vbs.cc`, `scan_check_vbs.cc`, `disk2file_vbs.cc`): choosing a scan
//! and a byte range of it (`scan_set`), checking what it holds (`scan_check?`, `data_check?`)
//! and copying the range to a file (`disk2file`). What the Field System sends: `scan_set = :
//! -1000000 ;` (the last megabyte of the last scan, before `data_check?`), `scan_set = LABEL :
//! : ;`, `scan_check?`, `disk2file = DEST : : : w ;`.
//!
//! | argument | forms |
//! |---|---|
//! | scan (`scan_set` 1) | empty: the last scan recorded (the one before it while recording); `inc`, `dec`; a number 1…N of this session's scans; `next` (the next match of the last search); otherwise a search string (case-insensitive, in this session's scans) or a recording name |
//! | start (`scan_set` 2) | `s` start, `c` centre, `e` 1 000 000 bytes before the end, `s+` byte 65 536; `+N`/`-N` bytes from the start/end; a VEX time `[YYYYy][DDDd][HHh][MMm][SS[.f]s]` (absolute: the next such time in the data; with `+`/`-`: a duration from the start/end) |
//! | end (`scan_set` 3) | the same but `s`/`c`/`e`/`s+` |
//! | `disk2file` | file : start byte : end byte (`+N`: N bytes from start) : open mode `n` (new, the default) `w` (truncate) `a` (append) `resume` |

use crate::error::CommandError;
use crate::reply::ReturnCode;
use scanfmt::name::RecordingName;

/// A VEX-style time or duration: the fields given, in order; at least one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VexTime {
    /// `YYYYy`.
    pub year: Option<i32>,
    /// `DDDd`, day of year from 1.
    pub day: Option<u32>,
    /// `HHh`.
    pub hour: Option<u32>,
    /// `MMm`.
    pub minute: Option<u32>,
    /// `SS[.f]s`.
    pub second: Option<f64>,
}

impl VexTime {
    /// Parse `2026y331d01h56m43.5s`, `12h30m`, `30s`, `1.5s`…: fields in this order, each a
    /// number and its letter, none repeated, at least one, each within its range — day 1–366,
    /// hour ≤ 23, minute ≤ 59, second < 60 — as jive5ab's `parse_vex_time` checks them (it then
    /// refuses `99h99m99s` with 8; taken as a duration, `25h` is refused alike).
    pub fn parse(s: &str) -> Option<VexTime> {
        let mut t = VexTime {
            year: None,
            day: None,
            hour: None,
            minute: None,
            second: None,
        };
        let mut rest = s;
        let mut order = 0usize;
        while !rest.is_empty() {
            let end = rest.find(|c: char| c.is_ascii_alphabetic())?;
            let (num, unit) = (&rest[..end], rest.as_bytes()[end]);
            let at = b"ydhms".iter().position(|&u| u == unit)?;
            if at < order || num.is_empty() || num.len() > 16 {
                return None;
            }
            order = at + 1;
            let int = || num.parse::<u32>().ok();
            match unit {
                b'y' => t.year = Some(i32::try_from(int()?).ok()?),
                b'd' => t.day = Some(int().filter(|d| (1..=366).contains(d))?),
                b'h' => t.hour = Some(int().filter(|h| *h <= 23)?),
                b'm' => t.minute = Some(int().filter(|m| *m <= 59)?),
                _ => {
                    let v: f64 = num.parse().ok()?;
                    if !v.is_finite()
                        || !(0.0..60.0).contains(&v)
                        || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                    {
                        return None;
                    }
                    t.second = Some(v);
                }
            }
            rest = &rest[end + 1..];
        }
        (order > 0).then_some(t)
    }

    /// The fields given, as seconds of a duration (the year is ignored, as jive5ab does; a day
    /// field counts whole days).
    pub fn as_duration(&self) -> f64 {
        f64::from(self.day.unwrap_or(0)) * 86_400.0
            + f64::from(self.hour.unwrap_or(0)) * 3600.0
            + f64::from(self.minute.unwrap_or(0)) * 60.0
            + self.second.unwrap_or(0.0)
    }

    /// How many fields were given.
    pub fn fields(&self) -> usize {
        [
            self.year.is_some(),
            self.day.is_some(),
            self.hour.is_some(),
            self.minute.is_some(),
            self.second.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
    }
}

/// Which scan `scan_set` chooses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanSelect {
    /// Empty: the last scan recorded (before the one recording now).
    Last,
    /// `inc`: the next one in this session's list.
    Next,
    /// `dec`: the previous one.
    Previous,
    /// 1…N: this session's scan by number.
    Number(u64),
    /// `next`: the next match of the last search.
    SearchAgain,
    /// A search string or a recording name: what a recording name may hold, checked here (a
    /// name that could never name a recording, `a.b` or `../x`, is refused as the statement's
    /// parameter error, 8).
    Name(RecordingName),
}

/// A start or end of the byte range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pointer {
    /// Not given: the start or the end of the scan.
    Default,
    /// `s`.
    Start,
    /// `c`: the middle.
    Centre,
    /// `e`: 1 000 000 bytes before the end.
    NearEnd,
    /// `s+`: byte 65 536.
    JustAfterStart,
    /// `+N` bytes: from the start (for the end pointer: from the new start).
    PlusBytes(i64),
    /// `-N` bytes: from the end.
    MinusBytes(i64),
    /// `+TIME`: a duration after the start.
    PlusTime(VexTime),
    /// `-TIME`: a duration before the end.
    MinusTime(VexTime),
    /// `TIME`: that time in the data.
    At(VexTime),
}

impl Pointer {
    fn parse(s: &str, start: bool) -> Result<Pointer, CommandError> {
        let p = match s {
            "" => Pointer::Default,
            "s" if start => Pointer::Start,
            "c" if start => Pointer::Centre,
            "e" if start => Pointer::NearEnd,
            "s+" if start => Pointer::JustAfterStart,
            _ => {
                let (sign, rest) = match s.as_bytes()[0] {
                    b'+' => (1, &s[1..]),
                    b'-' => (-1, &s[1..]),
                    _ => (0, s),
                };
                if let Some(t) = VexTime::parse(rest) {
                    match sign {
                        1 => Pointer::PlusTime(t),
                        -1 => Pointer::MinusTime(t),
                        _ => Pointer::At(t),
                    }
                } else if sign == 0 {
                    return Err(CommandError::param(
                        "only relative byte numbers allowed in this command",
                    ));
                } else {
                    let n = parse_int(rest).filter(|n| *n >= 0).ok_or_else(|| {
                        CommandError::param(format!(" failed to parse byte offset or time code from '{s}'"))
                    })?;
                    if sign > 0 {
                        Pointer::PlusBytes(n)
                    } else {
                        Pointer::MinusBytes(n)
                    }
                }
            }
        };
        Ok(p)
    }
}

/// An integer as `strtoll(…, 0)` reads it: decimal, or hex after `0x`.
fn parse_int(s: &str) -> Option<i64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => i64::from_str_radix(h, 16).ok(),
        _ if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        _ => None,
    }
}

/// `scan_set`.
#[derive(Debug, Clone, PartialEq)]
pub enum ScanSet {
    /// `scan_set? ;`
    Query,
    /// `scan_set = ;` — the last scan, whole.
    LastWhole,
    /// `scan_set = scan : start : end ;`
    Set {
        /// Which scan.
        scan: ScanSelect,
        /// Start of the range.
        start: Pointer,
        /// End of the range.
        end: Pointer,
    },
}

/// `scan_set`'s statement.
pub(crate) fn scan_set(query: bool, f: &[String]) -> Result<ScanSet, CommandError> {
    if query {
        return Ok(ScanSet::Query);
    }
    if f.is_empty() {
        return Ok(ScanSet::LastWhole);
    }
    let arg = |i: usize| f.get(i).map(String::as_str).unwrap_or("");
    let scan = match arg(0) {
        "" => ScanSelect::Last,
        "inc" => ScanSelect::Next,
        "dec" => ScanSelect::Previous,
        "next" => ScanSelect::SearchAgain,
        s => match s.parse::<u64>() {
            Ok(n) if n >= 1 && !s.starts_with('+') => ScanSelect::Number(n),
            _ => ScanSelect::Name(RecordingName::parse(s).map_err(|e| CommandError::param(e.to_string()))?),
        },
    };
    Ok(ScanSet::Set {
        scan,
        start: Pointer::parse(arg(1), true)?,
        end: Pointer::parse(arg(2), false)?,
    })
}

/// How `disk2file` opens its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `n`: a new file (an existing one is an error).
    New,
    /// `w`: created or truncated.
    Write,
    /// `a`: appended to.
    Append,
    /// `resume`: appended to, starting where the file's length says the last copy stopped.
    Resume,
}

impl OpenMode {
    /// Its name in replies.
    pub fn name(self) -> &'static str {
        match self {
            OpenMode::New => "n",
            OpenMode::Write => "w",
            OpenMode::Append | OpenMode::Resume => "a",
        }
    }
}

/// The end of a `disk2file` range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disk2FileEnd {
    /// Not given: the scan_set end.
    Default,
    /// An absolute byte.
    At(u64),
    /// `+N`: N bytes after the start.
    After(u64),
}

/// `disk2file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk2File {
    /// `disk2file? ;`
    Query,
    /// `disk2file = file : start : end : mode ;`
    Start {
        /// Where to (empty: `<scan>.m5a` in the recorder's default directory).
        file: String,
        /// First byte (default: the scan_set start).
        start: Option<u64>,
        /// End.
        end: Disk2FileEnd,
        /// Open mode.
        mode: OpenMode,
    },
}

pub(crate) fn disk2file(query: bool, f: &[String]) -> Result<Disk2File, CommandError> {
    if query {
        return Ok(Disk2File::Query);
    }
    let arg = |i: usize| f.get(i).map(String::as_str).unwrap_or("");
    let start = match arg(1) {
        "" => None,
        s if s.starts_with(['+', '-']) => {
            return Err(CommandError::param("relative byteoffsets not allowed here"));
        }
        s => Some(
            parse_int(s)
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| CommandError::param("Failed to parse 'start' value"))?,
        ),
    };
    let end = match arg(2) {
        "" => Disk2FileEnd::Default,
        s => {
            let (plus, digits) = s.strip_prefix('+').map_or((false, s), |d| (true, d));
            let v = parse_int(digits)
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| CommandError::param("Failed to parse 'end' value"))?;
            if plus {
                Disk2FileEnd::After(v)
            } else {
                Disk2FileEnd::At(v)
            }
        }
    };
    let mode = match arg(3) {
        "" | "n" => OpenMode::New,
        "w" => OpenMode::Write,
        "a" => OpenMode::Append,
        "resume" => OpenMode::Resume,
        _ => return Err(CommandError::param("open mode must be n, w or a")),
    };
    if f.len() > 4 && !arg(4).is_empty() {
        // jive5ab's bytes-to-cache: evlbi copies through the page cache and says so.
        parse_int(arg(4))
            .filter(|v| *v > 0)
            .ok_or_else(|| CommandError::param("bytes to cache must be > 0"))?;
    }
    Ok(Disk2File::Start {
        file: arg(0).to_string(),
        start,
        end,
        mode,
    })
}

/// `scan_check? [strict] [: bytes]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanCheckArgs {
    /// Strict header checks (jive5ab's default 1).
    pub strict: bool,
    /// Bytes per sample (default 1 000 000, a multiple of 8).
    pub bytes: u64,
}

pub(crate) fn scan_check(query: bool, f: &[String]) -> Result<ScanCheckArgs, CommandError> {
    if !query {
        return Err(CommandError::new(ReturnCode::NotApplicable, "only available as query"));
    }
    let arg = |i: usize| f.get(i).map(String::as_str).unwrap_or("");
    let strict = match arg(0) {
        "" | "1" => true,
        "0" => false,
        _ => return Err(CommandError::param("strict argument has to be 0 or 1")),
    };
    let bytes = match arg(1) {
        "" => 1_000_000,
        s => {
            let (digits, unit) = match s.strip_suffix('k') {
                Some(d) => (d, 1024),
                None => s.strip_suffix('M').map_or((s, 1), |d| (d, 1 << 20)),
            };
            let v = parse_int(digits)
                .and_then(|v| u64::try_from(v).ok())
                .and_then(|v| v.checked_mul(unit))
                .ok_or_else(|| CommandError::param(format!("invalid number of bytes to read '{s}'")))?;
            if v > 2 << 30 {
                return Err(CommandError::param("maximum value for bytes to read is 2 GB"));
            }
            v
        }
    } & !7;
    if bytes == 0 {
        return Err(CommandError::param("need to read more than 0 bytes to detect anything"));
    }
    Ok(ScanCheckArgs { strict, bytes })
}

/// A time as jive5ab's `tm2vex` prints it: `2026y331d01h56m43.1234s`, `2026y331d01h56m43.***s`
/// when the part of the second is unknown.
pub fn vex_time(unix: i64, fraction: Option<f64>) -> String {
    use chrono::{Datelike, Timelike};
    let Some(t) = chrono::DateTime::from_timestamp(unix, 0) else {
        return format!("{unix}s");
    };
    let head = format!("{:04}y{:03}d{:02}h{:02}m", t.year(), t.ordinal(), t.hour(), t.minute());
    match fraction {
        // %07.4f of seconds + fraction.
        Some(f) => format!("{head}{:07.4}s", f64::from(t.second()) + f),
        None => format!("{head}{:02}.***s", t.second()),
    }
}

/// `scan_check?`'s fields after the return code and the scan's number and name, as jive5ab's
/// `vsi_format` writes them for VDIF: format, tracks (all threads), start time, duration,
/// track bit rate, missing bytes, frame size; `?` and `N.****s` where the rate is unknown.
pub fn scan_check_fields(c: &scanfmt::check::ScanCheck) -> Vec<String> {
    let format = match (c.legacy, c.complex) {
        (false, false) => "VDIF",
        (true, false) => "VDIF (legacy)",
        (false, true) => "VDIF (complex)",
        (true, true) => "VDIF (legacy, complex)",
    };
    let rate = c.frames_per_second.map(|n| f64::from(c.start.frame) / f64::from(n));
    let mut f = vec![format.to_string(), c.tracks.to_string(), vex_time(c.start.unix, rate)];
    match (c.duration_s(), c.track_rate_bps) {
        (Some(d), Some(r)) => {
            f.push(format!("{}s", crate::evlbi::cpp_double(d)));
            f.push(format!("{}Mbps", crate::evlbi::cpp_double(r as f64 / 1e6)));
        }
        _ => {
            f.push(format!("{}.****s", c.end.unix - c.start.unix));
            f.push("?".into());
        }
    }
    f.push(c.missing_bytes.map_or("?".into(), |m| m.to_string()));
    f.push(c.frame_bytes.to_string());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn times_print_as_tm2vex_does() {
        // 2026-11-27T01:56:43Z is day 331.
        assert_eq!(vex_time(1_795_744_603, Some(0.5)), "2026y331d01h56m43.5000s");
        assert_eq!(vex_time(1_795_744_603, None), "2026y331d01h56m43.***s");
        assert_eq!(vex_time(1_795_744_563, Some(0.0)), "2026y331d01h56m03.0000s");
    }

    #[test]
    fn vex_times_parse_in_order() {
        let t = VexTime::parse("2026y331d01h56m43.5s").unwrap();
        assert_eq!(
            (t.year, t.day, t.hour, t.minute, t.second),
            (Some(2026), Some(331), Some(1), Some(56), Some(43.5))
        );
        assert_eq!(t.fields(), 5);
        assert_eq!(VexTime::parse("12h30m").unwrap().as_duration(), 45_000.0);
        assert_eq!(VexTime::parse("1.5s").unwrap().as_duration(), 1.5);
        for bad in [
            "",
            "12",
            "30s12h",
            "1h1h",
            "12x",
            "h",
            "-1s",
            "1e3s",
            "400d",
            "nans",
            "99h99m99s",
            "24h",
            "60m",
            "60s",
            "59.9999999999999999s",
        ] {
            assert_eq!(VexTime::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_field_systems_scan_set_forms_parse() {
        assert_eq!(
            scan_set(false, &s(&["", "-1000000"])).unwrap(),
            ScanSet::Set {
                scan: ScanSelect::Last,
                start: Pointer::MinusBytes(1_000_000),
                end: Pointer::Default
            }
        );
        assert_eq!(
            scan_set(false, &s(&["r41066_ef_no0001", "", ""])).unwrap(),
            ScanSet::Set {
                scan: ScanSelect::Name(RecordingName::parse("r41066_ef_no0001").unwrap()),
                start: Pointer::Default,
                end: Pointer::Default
            }
        );
        assert_eq!(scan_set(false, &[]).unwrap(), ScanSet::LastWhole);
        assert_eq!(scan_set(true, &[]).unwrap(), ScanSet::Query);
        assert!(matches!(
            scan_set(false, &s(&["3", "c", "+10s"])).unwrap(),
            ScanSet::Set {
                scan: ScanSelect::Number(3),
                start: Pointer::Centre,
                end: Pointer::PlusTime(_)
            }
        ));
        assert!(matches!(
            scan_set(false, &s(&["inc", "12h00m30s", "+0x100"])).unwrap(),
            ScanSet::Set {
                scan: ScanSelect::Next,
                start: Pointer::At(_),
                end: Pointer::PlusBytes(256)
            }
        ));
        assert_eq!(
            scan_set(false, &s(&["x", "1000"])).unwrap_err().code,
            ReturnCode::BadParameter
        );
        assert_eq!(
            scan_set(false, &s(&["x", "", "e"])).unwrap_err().code,
            ReturnCode::BadParameter
        );
        assert_eq!(
            scan_set(false, &s(&["x", "+junk"])).unwrap_err().code,
            ReturnCode::BadParameter
        );
    }

    #[test]
    fn a_scan_set_name_no_recording_can_have_is_a_parameter_error_and_the_longest_recording_name_is_not() {
        for bad in ["a.b", "../x", "x/y", "é", &"n".repeat(scanfmt::name::MAX_NAME + 1)] {
            let e = scan_set(false, &s(&[bad])).unwrap_err();
            assert_eq!(e.code, ReturnCode::BadParameter, "{bad}");
        }
        let longest = "n".repeat(scanfmt::name::MAX_NAME);
        assert_eq!(
            scan_set(false, &s(&[&longest])).unwrap(),
            ScanSet::Set {
                scan: ScanSelect::Name(RecordingName::parse(&longest).unwrap()),
                start: Pointer::Default,
                end: Pointer::Default
            }
        );
    }

    #[test]
    fn disk2file_and_scan_check_arguments() {
        assert_eq!(
            disk2file(false, &s(&["/data/x.vdif", "", "", "w"])).unwrap(),
            Disk2File::Start {
                file: "/data/x.vdif".into(),
                start: None,
                end: Disk2FileEnd::Default,
                mode: OpenMode::Write
            }
        );
        assert_eq!(
            disk2file(false, &s(&["f", "100", "+0x10"])).unwrap(),
            Disk2File::Start {
                file: "f".into(),
                start: Some(100),
                end: Disk2FileEnd::After(16),
                mode: OpenMode::New
            }
        );
        assert!(disk2file(false, &s(&["f", "-1"])).is_err());
        assert!(disk2file(false, &s(&["f", "", "", "x"])).is_err());
        assert_eq!(
            scan_check(true, &[]).unwrap(),
            ScanCheckArgs {
                strict: true,
                bytes: 1_000_000
            }
        );
        assert_eq!(
            scan_check(true, &s(&["0", "4M"])).unwrap(),
            ScanCheckArgs {
                strict: false,
                bytes: 4 << 20
            }
        );
        assert_eq!(scan_check(true, &s(&["", "1001"])).unwrap().bytes, 1000);
        assert_eq!(scan_check(false, &[]).unwrap_err().code, ReturnCode::NotApplicable);
        assert!(scan_check(true, &s(&["", "3G"])).is_err());
        assert!(scan_check(true, &s(&["", "7"])).is_err());
    }
}

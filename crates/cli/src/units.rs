//! The quantities users type and read, in one place: parsing of rates ("512M", "4.096G"),
//! durations ("1.5us", "300ms"), frequencies ("1.2MHz"), sizes ("2MB", "64KiB"), probabilities
//! ("0.1%") and multiples ("2x"), and their human formatting (`si_fmt`, `rate_fmt`, `bytes_fmt`,
//! `us_fmt`). SI prefixes are decimal, as in networking and VLBI ("4096M" = 4.096e9 b/s); sizes
//! also take binary ones (KiB, MiB, GiB). Every parser refuses NaN, infinities and values out of
//! range, so no option can make later arithmetic panic. Library crates take numbers, never these
//! strings.

use std::borrow::Cow;
use std::time::Duration;

/// The forms of a rate, said by every rate error.
pub const RATE_FORMS: &str = "a bit rate: 512M, 4.096G, 4096Mbps, 512Mb/s, 1e9 (k, M, G, T are decimal)";
/// The forms of a duration, said by every duration error.
pub const DURATION_FORMS: &str = "a duration: 250ns, 16us, 1.5ms, 2s, 10min, 1h (a bare number is seconds)";
/// The forms of a size, said by every size error.
pub const SIZE_FORMS: &str =
    "a size in bytes: 9000, 2kB, 1.5MB, 3GB, 64KiB, 1GiB (k, M, G, T decimal; Ki, Mi, Gi binary; B optional)";
/// The forms of a frequency, said by every frequency error.
pub const FREQUENCY_FORMS: &str = "a frequency: 800kHz, 1.2MHz, 1GHz, 100 (a bare number is Hz)";

/// `s`'s error `why`, followed by the accepted `forms`.
fn bad(s: &str, why: impl std::fmt::Display, forms: &str) -> String {
    format!("{s:?}: {why}; expected {forms}")
}

/// Split "1.5us" into (1.5, "us"); the error says `forms`.
fn split_number<'a>(s: &'a str, forms: &str) -> Result<(f64, &'a str), String> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(i, c)| {
            !(c.is_ascii_digit()
                || *c == '.'
                || ((*c == 'e' || *c == 'E') && s[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-'))
                || ((*c == '-' || *c == '+') && (*i == 0 || s[..*i].ends_with(['e', 'E']))))
        })
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let v: f64 = num.parse().map_err(|_| bad(s, "expected a number first", forms))?;
    if !v.is_finite() {
        return Err(bad(s, "not a finite number", forms));
    }
    Ok((v, unit.trim()))
}

fn si(prefix: &str) -> Option<f64> {
    Some(match prefix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return None,
    })
}

/// Slowest rate any option takes, b/s.
pub const MIN_RATE_BPS: f64 = 1.0;
/// Fastest rate any option takes, b/s (1 Pb/s).
pub const MAX_RATE_BPS: f64 = 1e15;

/// A bit rate in bits per second: "512M", "4.096G", "4096Mbps", "1e9", "512Mb/s".
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s, RATE_FORMS)?;
    let prefix = unit
        .trim_end_matches("bps")
        .trim_end_matches("b/s")
        .trim_end_matches("bit/s");
    let m = si(prefix).ok_or_else(|| bad(s, format_args!("unknown rate unit {unit:?}"), RATE_FORMS))?;
    let r = v * m;
    if r <= 0.0 {
        return Err(bad(s, "rate must be positive", RATE_FORMS));
    }
    // A pacer divides by the rate and multiplies by it: keep both results finite.
    if !(MIN_RATE_BPS..=MAX_RATE_BPS).contains(&r) {
        return Err(bad(
            s,
            format_args!("out of range ({MIN_RATE_BPS} b/s to {MAX_RATE_BPS:e} b/s)"),
            RATE_FORMS,
        ));
    }
    Ok(r)
}

/// A data rate as whole bits per second ([`vdif::BitRate`]: 4096M, 2.048G, 512000000), within
/// what [`parse_rate`] allows.
pub fn parse_bit_rate(s: &str) -> Result<vdif::BitRate, String> {
    // The forms and the range first, said as every rate option says them.
    let r = parse_rate(s)?;
    match vdif::BitRate::parse(s) {
        Ok(b) => Ok(b),
        // The exponent form ("1e9") that BitRate's decimal parser does not read: whole bits only.
        Err(_) if r.fract() == 0.0 && r <= u64::MAX as f64 => {
            vdif::BitRate::new(r as u64).ok_or_else(|| bad(s, "rate must be positive", RATE_FORMS))
        }
        Err(e) => Err(bad(s, e, RATE_FORMS)),
    }
}

/// Longest duration any option takes, in seconds (about 32 years): far beyond any run, yet small
/// enough that no `Duration` or `Instant` arithmetic on it can overflow.
pub const MAX_DURATION_S: f64 = 1e9;

/// Signed seconds with a time unit: "1.5us", "16µs", "300ms", "2s", "10m", "1h", "250ns", "-1.5us";
/// a bare number is seconds. Finite and at most [`MAX_DURATION_S`] either way. For offsets that
/// may be negative (a sky delay); options that are durations take [`parse_duration`].
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s, DURATION_FORMS)?;
    let m = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad(s, format_args!("unknown time unit {unit:?}"), DURATION_FORMS)),
    };
    let secs = v * m;
    // An infinity from the multiplication fails the range check too.
    if !secs.is_finite() || secs.abs() > MAX_DURATION_S {
        return Err(bad(
            s,
            format_args!("out of range (at most {MAX_DURATION_S:e} s)"),
            DURATION_FORMS,
        ));
    }
    Ok(secs)
}

/// A duration option (clap value parser): "300ms", "2s", "10m", "1h"; ≥ 0, at most
/// [`MAX_DURATION_S`]. The one way durations enter evlbi, so that no value typed can make
/// `Duration` arithmetic panic.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    duration(s, false)
}

/// [`parse_duration`] for options where 0 makes no sense (a cadence, a timeout, an RTT).
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    duration(s, true)
}

fn duration(s: &str, positive: bool) -> Result<Duration, String> {
    let secs = parse_seconds(s)?;
    if secs < 0.0 {
        return Err(bad(s, "must not be negative", DURATION_FORMS));
    }
    let d = Duration::try_from_secs_f64(secs).map_err(|e| bad(s, e, DURATION_FORMS))?;
    if positive && d.is_zero() {
        return Err(bad(s, "must be greater than 0", DURATION_FORMS));
    }
    Ok(d)
}

/// [`parse_duration`] within `lo..=hi` (the bounds said in the error as `lo_text`..`hi_text`).
pub fn parse_duration_within(s: &str, lo: Duration, hi: Duration, bounds: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if !(lo..=hi).contains(&d) {
        return Err(format!("{s}: must be between {bounds}"));
    }
    Ok(d)
}

/// A factor ("2", "1.5x"), any finite number: what range a setting takes is its rule, said by
/// the library that has it (a stream session's `validate()`).
pub fn parse_factor(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('x').parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s:?}: a multiple, e.g. 2")),
    }
}

/// The unit of a value: what follows its number ("40us" → "us"); `None` for a bare number.
pub fn unit_of(s: &str) -> Option<&str> {
    let u = s.trim().trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    (!u.is_empty()).then_some(u)
}

/// `s` with `unit` appended when it is a bare number: in a range "10..40us" the start takes
/// the end's unit.
pub fn with_default_unit<'a>(s: &'a str, unit: Option<&str>) -> Cow<'a, str> {
    let t = s.trim();
    let bare = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.');
    match (bare, unit) {
        (true, Some(u)) => Cow::Owned(format!("{t}{u}")),
        _ => Cow::Borrowed(s),
    }
}

/// A frequency in Hz: "1.2MHz", "800kHz", "1.2e6".
pub fn parse_frequency(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s, FREQUENCY_FORMS)?;
    let prefix = unit.trim_end_matches("Hz").trim_end_matches("hz");
    let m = si(prefix).ok_or_else(|| bad(s, format_args!("unknown frequency unit {unit:?}"), FREQUENCY_FORMS))?;
    let f = v * m;
    if !f.is_finite() {
        return Err(bad(s, "out of range", FREQUENCY_FORMS));
    }
    Ok(f)
}

/// Largest size any option takes, bytes (1 PB).
pub const MAX_SIZE_BYTES: f64 = 1e15;

/// A size in bytes: "2MB", "1.5M", "64KiB", "9000", "1e9". k/M/G/T are decimal, Ki/Mi/Gi binary;
/// at least 1 byte, at most [`MAX_SIZE_BYTES`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s, SIZE_FORMS)?;
    let unit = unit.strip_suffix('B').unwrap_or(unit);
    let m = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1048576.0,
        "Gi" => 1073741824.0,
        _ => return Err(bad(s, format_args!("unknown size unit {unit:?}"), SIZE_FORMS)),
    };
    let bytes = (v * m).round();
    if !(1.0..=MAX_SIZE_BYTES).contains(&bytes) {
        return Err(bad(
            s,
            format_args!("size out of range (1 B to {MAX_SIZE_BYTES:e} B)"),
            SIZE_FORMS,
        ));
    }
    Ok(bytes as u64)
}

/// A probability: "0.1%" (percent) or "0.001" (fraction).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("{s:?}: expected e.g. 0.1% or 0.001"))?;
    let p = v * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!(
            "{s:?}: must be between 0% and 100% (a bare number is a fraction: 0.01 = 1%)"
        ));
    }
    Ok(p)
}

/// Points of a swept parameter when a range has no step: both ends and three between.
pub const DEFAULT_RANGE_POINTS: u64 = 5;

/// Parses one value; the second argument is the unit to assume when the value has none.
type ParseOne = dyn Fn(&str, Option<&str>) -> Result<u64, String>;

/// A list (`1472,8192`) or a range `A..B[:STEP]` (`64..8972:1024`, `0..40us:10us`) of values,
/// ends included; a range without a step gives [`DEFAULT_RANGE_POINTS`] evenly spaced points.
/// `parse` reads one value, given the unit of the range's end for a value without one.
pub fn parse_values(v: &str, parse: &ParseOne) -> Result<Vec<u64>, String> {
    let out = if let Some((a, rest)) = v.split_once("..") {
        let (b, step) = match rest.split_once(':') {
            Some((b, st)) => (b, Some(st)),
            None => (rest, None),
        };
        let unit = unit_of(b);
        let (lo, hi) = (parse(a, unit)?, parse(b, unit)?);
        if hi < lo {
            return Err(format!("{v:?}: range end below its start"));
        }
        match step.map(|s| parse(s, unit)).transpose()? {
            Some(0) => return Err(format!("{v:?}: step 0")),
            Some(st) => {
                let n = (hi - lo) / st + 1;
                if n > 10_000 {
                    return Err(format!("{v:?}: {n} points, more than 10000"));
                }
                let mut pts: Vec<u64> = (0..n).map(|k| lo + k * st).collect();
                if pts.last() != Some(&hi) {
                    pts.push(hi);
                }
                pts
            }
            None if lo == hi => vec![lo],
            None => {
                let k = DEFAULT_RANGE_POINTS - 1;
                let mut pts: Vec<u64> = (0..=k)
                    .map(|i| lo + ((hi - lo) as f64 * i as f64 / k as f64).round() as u64)
                    .collect();
                pts.dedup();
                pts
            }
        }
    } else {
        v.split(',').map(|x| parse(x, None)).collect::<Result<Vec<_>, _>>()?
    };
    if out.is_empty() {
        return Err(format!("{v:?}: no values"));
    }
    Ok(out)
}

/// Human-readable SI value, three decimals unless whole: 1.29e9 → "1.290 G", 512e6 → "512 M"; append
/// the unit ("b/s", "B", "S/s") or use [`rate_fmt`] / [`bytes_fmt`]. The one formatter of
/// quantities in evlbi's text output.
pub fn si_fmt(v: f64) -> String {
    let (d, p) = if v.abs() >= 1e12 {
        (1e12, "T")
    } else if v.abs() >= 1e9 {
        (1e9, "G")
    } else if v.abs() >= 1e6 {
        (1e6, "M")
    } else if v.abs() >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.3} {p}", v / d).replace(".000 ", " ")
}

/// A bit rate: 4.096e9 → "4.096 Gb/s".
pub fn rate_fmt(bps: f64) -> String {
    si_fmt(bps) + "b/s"
}

/// A byte count: 2e6 → "2 MB".
pub fn bytes_fmt(bytes: f64) -> String {
    si_fmt(bytes) + "B"
}

/// Nanoseconds as microseconds with two decimals ("16.00"), "-" when absent.
pub fn us_fmt(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e3))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--rate` takes every form the help names, as whole bits; what is refused says the forms.
    #[test]
    fn bit_rates_take_every_form_the_help_names_as_whole_bits() {
        let bps = |s: &str| parse_bit_rate(s).map(vdif::BitRate::get);
        assert_eq!(bps("4.096G"), Ok(4_096_000_000));
        assert_eq!(bps("4096Mbps"), Ok(4_096_000_000));
        assert_eq!(bps("512Mb/s"), Ok(512_000_000));
        assert_eq!(bps("1e9"), Ok(1_000_000_000));
        for (bad, says) in [
            ("fast", "expected a number first"),
            ("1.0000005k", "whole number of bits"),
            ("0", "positive"),
            ("2e15", "out of range"),
        ] {
            let e = bps(bad).expect_err(bad);
            assert!(e.contains(says) && e.contains("512M, 4.096G"), "{bad}: {e}");
        }
    }

    #[test]
    fn rates_seconds_and_durations_parse_with_their_units() {
        assert_eq!(parse_rate("512M").unwrap(), 512e6);
        assert_eq!(parse_rate("4.096G").unwrap(), 4.096e9);
        assert_eq!(parse_rate("4096Mbps").unwrap(), 4.096e9);
        assert_eq!(parse_rate("1e9").unwrap(), 1e9);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-5M").is_err());
        assert!((parse_seconds("1.5us").unwrap() - 1.5e-6).abs() < 1e-18);
        assert_eq!(parse_duration("1.5us").unwrap(), Duration::from_nanos(1500));
        assert_eq!(parse_duration("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("3 fortnights").is_err());
        assert_eq!(parse_frequency("1.2MHz").unwrap(), 1.2e6);
        assert_eq!(parse_seconds("-1.5e-6").unwrap(), -1.5e-6);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_fraction("0.1%").unwrap(), 0.001);
        assert_eq!(parse_fraction("0.02").unwrap(), 0.02);
        assert!(parse_fraction("120%").is_err());
    }

    #[test]
    fn durations_are_finite_non_negative_and_bounded() {
        for bad in [
            "-1s", "-0.5ms", "1e30s", "1e300h", "1e9min", "2e9", "nan", "inf", "-inf", "NaN s", "",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
            assert!(parse_positive_duration(bad).is_err(), "{bad:?}");
        }
        assert!(parse_seconds("1e30s").is_err());
        assert!(parse_seconds("-1e30s").is_err());
        assert_eq!(parse_duration("1e9").unwrap(), Duration::from_secs(1_000_000_000));
        for zero in ["0", "0s", "-0", "0.1ns"] {
            assert!(parse_duration(zero).is_ok(), "{zero:?}");
            assert!(parse_positive_duration(zero).is_err(), "{zero:?}");
        }
        assert_eq!(parse_positive_duration("1ns").unwrap(), Duration::from_nanos(1));
    }

    #[test]
    fn rates_frequencies_sizes_and_fractions_refuse_what_would_break_arithmetic() {
        for bad in ["1e300G", "1e16", "0.5", "-1M", "nan", "inf"] {
            assert!(parse_rate(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_rate("1").unwrap(), 1.0);
        assert!(parse_frequency("1e306GHz").is_err());
        for bad in ["-1", "nan", "inf", "1e30", "99999999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        for bad in ["nan", "inf", "-inf", "NaN%", "-1"] {
            assert!(parse_fraction(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_form_good_and_bad() {
        // Rates: SI prefixes, optional bps / b/s / bit/s, exponents; bare is b/s.
        for (s, v) in [
            ("512M", 512e6),
            ("512 Mb/s", 512e6),
            ("1.5kbit/s", 1500.0),
            ("4.096Gbps", 4.096e9),
            ("1T", 1e12),
            ("1e15", 1e15),
            ("2.5e3k", 2.5e6),
        ] {
            assert_eq!(parse_rate(s), Ok(v), "{s}");
        }
        for bad in [
            "", "M", "Gb/s", "1Q", "1 MB", "0", "-1", "-1G", "1e400", "2e15", "1PB", "1..2G",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad:?}");
        }
        // Durations: ns us µs ms s min m h; bare is seconds.
        for (s, ns) in [
            ("250ns", 250),
            ("16µs", 16_000),
            ("1.5ms", 1_500_000),
            ("2s", 2_000_000_000),
            ("1min", 60_000_000_000),
            ("1h", 3_600_000_000_000),
            ("0.5", 500_000_000),
            ("1e-3s", 1_000_000),
        ] {
            assert_eq!(parse_duration(s), Ok(Duration::from_nanos(ns)), "{s}");
        }
        for bad in ["ms", "1d", "1 fortnight", "-1ns", "1e400", "1e10", "10 s s", "1_000ms"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_seconds("-2ms"), Ok(-2e-3));
        // Ranged durations.
        let within =
            |s| parse_duration_within(s, Duration::from_millis(100), Duration::from_secs(3600), "100ms and 1h");
        assert_eq!(within("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(within("100ms"), Ok(Duration::from_millis(100)));
        for bad in ["99ms", "1.01h", "-1s", "x"] {
            assert!(within(bad).is_err(), "{bad:?}");
        }
        // Sizes: decimal and binary prefixes, optional B.
        for (s, v) in [
            ("9000", 9000),
            ("2kB", 2000),
            ("2K", 2000),
            ("1.5M", 1_500_000),
            ("3GB", 3_000_000_000),
            ("1TB", 1_000_000_000_000),
            ("64KiB", 65_536),
            ("2 MiB", 2 << 20),
            ("1GiB", 1 << 30),
            ("1e9", 1_000_000_000),
            ("0.6", 1),
        ] {
            assert_eq!(parse_size(s), Ok(v), "{s}");
        }
        for bad in [
            "",
            "B",
            "MB",
            "0",
            "0.4",
            "-1K",
            "2 parsecs",
            "1PB",
            "1e16",
            "1e400",
            "2MiBB",
            "1b",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        // Fractions: percent or a bare fraction in 0..=1.
        for (s, v) in [
            ("0", 0.0),
            ("0%", 0.0),
            ("1e-4", 1e-4),
            ("100%", 1.0),
            ("1", 1.0),
            (" 2.5 % ", 0.025),
        ] {
            assert_eq!(parse_fraction(s), Ok(v), "{s}");
        }
        for bad in ["", "%", "5", "101%", "-0.1%", "1e400", "x%", "1%%"] {
            assert!(parse_fraction(bad).is_err(), "{bad:?}");
        }
        // Frequencies.
        for (s, v) in [
            ("800kHz", 8e5),
            ("1.2MHz", 1.2e6),
            ("1GHz", 1e9),
            ("100", 100.0),
            ("5hz", 5.0),
        ] {
            assert_eq!(parse_frequency(s), Ok(v), "{s}");
        }
        for bad in ["", "MHz", "1 parsec", "1e400Hz"] {
            assert!(parse_frequency(bad).is_err(), "{bad:?}");
        }
        // Multiples.
        assert_eq!(parse_factor("2"), Ok(2.0));
        assert_eq!(parse_factor("1.5x"), Ok(1.5));
        // Its range is the setting's rule (a session's validate()), not the parser's.
        assert_eq!(parse_factor("17"), Ok(17.0));
        for bad in ["x", "", "nan", "inf", "2 times"] {
            assert!(parse_factor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_error_says_the_accepted_forms() {
        let refused = |r: Result<(), String>| r.expect_err("refused");
        for (e, forms) in [
            (refused(parse_rate("fast").map(drop)), RATE_FORMS),
            (refused(parse_rate("5 furlongs").map(drop)), RATE_FORMS),
            (refused(parse_rate("0").map(drop)), RATE_FORMS),
            (refused(parse_rate("1e20").map(drop)), RATE_FORMS),
            (refused(parse_duration("soon").map(drop)), DURATION_FORMS),
            (refused(parse_duration("3 fortnights").map(drop)), DURATION_FORMS),
            (refused(parse_duration("-1s").map(drop)), DURATION_FORMS),
            (refused(parse_positive_duration("0").map(drop)), DURATION_FORMS),
            (refused(parse_size("lots").map(drop)), SIZE_FORMS),
            (refused(parse_size("2 parsecs").map(drop)), SIZE_FORMS),
            (refused(parse_size("0").map(drop)), SIZE_FORMS),
            (refused(parse_frequency("loud").map(drop)), FREQUENCY_FORMS),
            (refused(parse_frequency("1 parsec").map(drop)), FREQUENCY_FORMS),
        ] {
            assert!(e.ends_with(&format!("expected {forms}")), "{e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn no_string_makes_a_parser_panic(s in ".{0,24}") {
            let _ = (parse_rate(&s), parse_duration(&s), parse_seconds(&s), parse_size(&s));
            let _ = (parse_frequency(&s), parse_fraction(&s), parse_factor(&s));
        }

        #[test]
        fn strings_of_number_characters_parse_in_range_or_err(s in "[0-9.eE+-]{0,6}[ kKMGTiBbpsnumh/%]{0,5}") {
            if let Ok(r) = parse_rate(&s) {
                proptest::prop_assert!((MIN_RATE_BPS..=MAX_RATE_BPS).contains(&r));
            }
            if let Ok(d) = parse_duration(&s) {
                proptest::prop_assert!(d.as_secs_f64() <= MAX_DURATION_S);
            }
            if let Ok(b) = parse_size(&s) {
                proptest::prop_assert!(b >= 1 && b as f64 <= MAX_SIZE_BYTES);
            }
        }

        #[test]
        fn sizes_round_trip_in_every_unit(n in 1u64..500_000, unit in 0usize..8) {
            let (suffix, scale) = [("", 1), ("B", 1), ("kB", 1000), ("K", 1000), ("MB", 1_000_000),
                ("KiB", 1024), ("MiB", 1 << 20), ("GiB", 1 << 30)][unit];
            proptest::prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n * scale));
        }

        #[test]
        fn rates_round_trip_through_their_format(mantissa in 1u64..1000, exp in 0i32..13) {
            let bps = mantissa as f64 * 10f64.powi(exp);
            let back = parse_rate(&rate_fmt(bps)).expect("a formatted rate parses");
            proptest::prop_assert!((back - bps).abs() <= bps * 1e-3, "{} -> {}", bps, back);
        }

        #[test]
        fn durations_round_trip_in_every_unit(n in 0u64..100_000, unit in 0usize..6) {
            let (suffix, ns) = [("ns", 1u64), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
                ("min", 60_000_000_000), ("h", 3_600_000_000_000)][unit];
            let want = Duration::from_nanos(n * ns);
            let got = parse_duration(&format!("{n}{suffix}")).expect("parses");
            // Through f64 seconds: within a nanosecond per 2^52 of the value.
            let slack = Duration::from_nanos(1 + ((n * ns) >> 50));
            proptest::prop_assert!(got.abs_diff(want) <= slack, "{:?} vs {:?}", got, want);
        }

        #[test]
        fn ranges_hold_their_ends_in_order(lo in 0u64..10_000, len in 0u64..10_000, step in 1u64..5_000) {
            let hi = lo + len;
            let v = parse_values(&format!("{lo}..{hi}:{step}"), &|s, _| s.parse::<u64>().map_err(|e| e.to_string()))
                .expect("a range parses");
            proptest::prop_assert_eq!(v.first(), Some(&lo));
            proptest::prop_assert_eq!(v.last(), Some(&hi));
            proptest::prop_assert!(v.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn default_units_for_ranges() {
        assert_eq!(unit_of("40us"), Some("us"));
        assert_eq!(unit_of("512K"), Some("K"));
        assert_eq!(unit_of("40"), None);
        assert_eq!(with_default_unit("10", Some("us")), "10us");
        assert_eq!(with_default_unit("10ms", Some("us")), "10ms");
        assert_eq!(with_default_unit("10", None), "10");
        assert_eq!(with_default_unit("", Some("us")), "");
    }

    #[test]
    fn values_print_with_si_prefixes_and_units() {
        assert_eq!(si_fmt(0.0), "0 ");
        assert_eq!(si_fmt(999.0), "999 ");
        assert_eq!(si_fmt(1500.0), "1.500 k");
        assert_eq!(si_fmt(512e6), "512 M");
        assert_eq!(si_fmt(1.29e9), "1.290 G");
        assert_eq!(si_fmt(2e12), "2 T");
        assert_eq!(si_fmt(-4e6), "-4 M");
        assert_eq!(rate_fmt(4.096e9), "4.096 Gb/s");
        assert_eq!(bytes_fmt(2e6), "2 MB");
        assert_eq!(us_fmt(Some(16_000)), "16.00");
        assert_eq!(us_fmt(None), "-");
        // What is formatted parses back.
        for v in [1e3, 512e6, 4.096e9, 1e12] {
            assert_eq!(parse_rate(&rate_fmt(v)), Ok(v));
            assert_eq!(parse_size(&bytes_fmt(v)), Ok(v as u64));
        }
    }
}

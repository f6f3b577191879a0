//! Parsing of the quantities users type: rates ("512M", "4.096G"), durations ("1.5us", "300ms"),
//! frequencies ("1.2MHz"), sizes ("2MB") and probabilities ("0.1%"). SI prefixes are decimal, as in networking
//! and VLBI ("4096M" = 4.096e9 b/s).

/// Split "1.5us" into (1.5, "us").
fn split_number(s: &str) -> Result<(f64, &str), String> {
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
    let v: f64 = num.parse().map_err(|_| format!("{s:?}: expected a number first"))?;
    if !v.is_finite() {
        return Err(format!("{s:?} is not a finite number"));
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

/// A bit rate in bits per second: "512M", "4.096G", "4096Mbps", "1e9", "512Mb/s".
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s)?;
    let prefix = unit
        .trim_end_matches("bps")
        .trim_end_matches("b/s")
        .trim_end_matches("bit/s");
    let m = si(prefix).ok_or_else(|| format!("{s:?}: unknown rate unit {unit:?} (use e.g. 512M, 4.096G, 1e9)"))?;
    let r = v * m;
    if r <= 0.0 {
        return Err(format!("{s:?}: rate must be positive"));
    }
    Ok(r)
}

/// A duration in seconds: "1.5us", "16µs", "300ms", "2s", "10m", "1h", "250ns"; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s)?;
    let m = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{s:?}: unknown time unit {unit:?} (use ns, us, ms, s, min, h)")),
    };
    Ok(v * m)
}

/// A frequency in Hz: "1.2MHz", "800kHz", "1.2e6".
pub fn parse_frequency(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s)?;
    let prefix = unit.trim_end_matches("Hz").trim_end_matches("hz");
    let m = si(prefix).ok_or_else(|| format!("{s:?}: unknown frequency unit {unit:?} (use Hz, kHz, MHz, GHz)"))?;
    Ok(v * m)
}

/// A size in bytes: "2MB", "1.5M", "64KiB", "9000". k/M/G are decimal, Ki/Mi/Gi binary.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number of bytes, e.g. 2MB"))?;
    let unit = unit.trim();
    let unit = unit.strip_suffix('B').unwrap_or(unit);
    let m = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1048576.0,
        "Gi" => 1073741824.0,
        _ => return Err(format!("{s:?}: unknown size unit (use B, kB, MB, GB, KiB, MiB, GiB)")),
    };
    let bytes = (v * m).round();
    if !(1.0..=1e15).contains(&bytes) {
        return Err(format!("{s:?}: size out of range"));
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

/// Human-readable SI value: 1.29e9 → "1.29 G".
pub fn si_fmt(v: f64) -> String {
    let (d, p) = if v.abs() >= 1e9 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(parse_rate("512M").unwrap(), 512e6);
        assert_eq!(parse_rate("4.096G").unwrap(), 4.096e9);
        assert_eq!(parse_rate("4096Mbps").unwrap(), 4.096e9);
        assert_eq!(parse_rate("1e9").unwrap(), 1e9);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-5M").is_err());
        assert!((parse_duration("1.5us").unwrap() - 1.5e-6).abs() < 1e-18);
        assert_eq!(parse_duration("300ms").unwrap(), 0.3);
        assert_eq!(parse_duration("2").unwrap(), 2.0);
        assert!(parse_duration("3 fortnights").is_err());
        assert_eq!(parse_frequency("1.2MHz").unwrap(), 1.2e6);
        assert_eq!(parse_duration("-1.5e-6").unwrap(), -1.5e-6);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_fraction("0.1%").unwrap(), 0.001);
        assert_eq!(parse_fraction("0.02").unwrap(), 0.02);
        assert!(parse_fraction("120%").is_err());
    }
}

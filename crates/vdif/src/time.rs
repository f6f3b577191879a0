//! VDIF time: reference epochs are half-years since 2000-01-01 00:00 UTC (VDIF 1.1.1 §3, note 2).

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};

/// Unix time (seconds) at the start of reference epoch `epoch`.
pub fn epoch_unix(epoch: u8) -> i64 {
    let year = 2000 + i32::from(epoch / 2);
    let month = if epoch.is_multiple_of(2) { 1 } else { 7 };
    // Jan 1 and Jul 1 of years 2000..2031 are always valid dates.
    NaiveDate::from_ymd_opt(year, month, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp())
        .unwrap_or(0)
}

/// The latest reference epoch at or before `unix` seconds, and seconds since it.
pub fn to_epoch(unix: i64) -> Option<(u8, u32)> {
    let t = Utc.timestamp_opt(unix, 0).single()?;
    let half = (t.year() - 2000) * 2 + if t.month() >= 7 { 1 } else { 0 };
    let epoch = u8::try_from(half).ok().filter(|e| *e < 64)?;
    let secs = u32::try_from(unix - epoch_unix(epoch)).ok()?;
    Some((epoch, secs))
}

/// ISO 8601 UTC string for a VDIF time (epoch, seconds, fraction of a second).
pub fn iso(epoch: u8, seconds: u32, fraction: f64) -> String {
    let unix = epoch_unix(epoch) + i64::from(seconds);
    let nanos = (fraction.clamp(0.0, 0.999_999_999) * 1e9).round() as u32;
    match DateTime::<Utc>::from_timestamp(unix, nanos.min(999_999_999)) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
        None => format!("epoch {epoch} + {seconds} s"),
    }
}

/// Parse an ISO-8601 / RFC 3339 UTC time ("2026-11-23T12:00:00Z") or `now`, to whole Unix seconds.
pub fn parse_start(s: &str) -> Result<i64, String> {
    if s == "now" {
        return Ok(Utc::now().timestamp());
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp())
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").map(|t| t.and_utc().timestamp()))
        .map_err(|e| format!("{s:?} is not a UTC time like 2026-11-23T12:00:00Z ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs() {
        assert_eq!(epoch_unix(0), 946_684_800);
        assert_eq!(iso(1, 0, 0.0), "2000-07-01T00:00:00.000000000Z");
        // baseband's sample.vdif: epoch 28, 2014-06-16T05:56:07.
        let (e, s) = to_epoch(parse_start("2014-06-16T05:56:07Z").unwrap()).unwrap();
        assert_eq!(e, 28);
        assert_eq!(iso(e, s, 0.0), "2014-06-16T05:56:07.000000000Z");
        assert_eq!(to_epoch(parse_start("2026-07-01T00:00:00Z").unwrap()), Some((53, 0)));
    }
}

//! VDIF time: reference epochs are half-years since 2000-01-01 00:00 UTC (VDIF 1.1.1 §3, note 2),
//! and word 0 counts the seconds elapsed since the epoch.
//!
//! Leap seconds: the field is a count of seconds since an instant defined in UTC, so a leap
//! second inserted after the epoch is one of the seconds counted: a frame stamped 184 days ×
//! 86 400 s after epoch 33 (2016-07-01) is 2016-12-31T23:59:60, the leap second, not
//! 2017-01-01T00:00:00. This is how baseband reads the field (astropy adds the seconds in TAI),
//! and how SARAO's katgpucbf and CHIME's kotekan (issue 498) write it. Recorders that use the
//! latest epoch (jive5ab and DiFX compute with POSIX time) never see a difference: leap seconds
//! fall on the last second of June or December, just before a new epoch begins. Files whose
//! epoch lies before a leap second (e.g. epoch 0 used in 2017: five leap seconds) come out
//! that many seconds earlier than POSIX arithmetic would say.
//!
//! The table is hand-written (five entries since 2000) because the crates that carry one
//! (hifitime) bring a whole time-scale library we do not otherwise need.

use chrono::{DateTime, Datelike, TimeZone, Utc};

/// Leap seconds since 2000: the POSIX time of the midnight (UTC) that followed each inserted
/// second 23:59:60. From the IERS list (tzdata `leap-seconds.list`, TAI−UTC 32 s → 37 s).
const LEAP_SECONDS: [i64; 5] = [
    1_136_073_600, // 2006-01-01 (after 2005-12-31T23:59:60)
    1_230_768_000, // 2009-01-01
    1_341_100_800, // 2012-07-01
    1_435_708_800, // 2015-07-01
    1_483_228_800, // 2017-01-01
];

/// The table is known to be complete until this POSIX time (2026-06-28, the expiry of the
/// tzdata list it was taken from; IERS Bulletin C announces each leap second six months ahead).
pub const LEAP_TABLE_EXPIRES: i64 = 1_782_604_800;

/// What inspection notes when a frame's epoch and time straddle [`LEAP_TABLE_EXPIRES`].
pub const LEAP_TABLE_NOTE: &str =
    "times after 2026-06-28 counted from an older epoch assume no leap second after 2017-01-01 (evlbi's leap-second table ends there)";

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`, <https://howardhinnant.github.io/date_algorithms.html>), written by hand
/// because it must be `const`: the epoch table is built at compile time.
const fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Unix time (seconds) at the start of each of the 64 reference epochs: 1 January or 1 July of
/// 2000 + epoch / 2, midnight UTC. Built once, at compile time, for the per-frame paths.
pub static EPOCH_UNIX: [i64; 64] = {
    let mut table = [0i64; 64];
    let mut epoch = 0;
    while epoch < 64 {
        let month = if epoch % 2 == 0 { 1 } else { 7 };
        table[epoch] = days_from_civil(2000 + (epoch / 2) as i64, month, 1) * 86_400;
        epoch += 1;
    }
    table
};

/// Unix time (seconds) at the start of reference epoch `epoch` (its low 6 bits, the field's width).
#[inline]
pub fn epoch_unix(epoch: u8) -> i64 {
    EPOCH_UNIX[usize::from(epoch & 63)]
}

/// UTC of a frame stamped `seconds` after epoch `epoch`, leap seconds counted: the POSIX time,
/// and whether the second is itself a leap second (then the POSIX time is that of 23:59:59,
/// the second it extends).
pub fn frame_utc(epoch: u8, seconds: u32) -> (i64, bool) {
    let start = epoch_unix(epoch);
    // Seconds on a scale without leaps (like TAI), counted from the epoch's start.
    let mut linear = i64::from(seconds);
    let mut unix = start;
    for &t in LEAP_SECONDS.iter().filter(|&&t| t > start) {
        let before = t - unix; // ordinary seconds until the leap second
        if linear < before {
            break;
        }
        if linear == before {
            return (t - 1, true);
        }
        linear -= before + 1;
        unix = t;
    }
    (unix + linear, false)
}

/// Whether the leap-second table is known to cover the span from the epoch's start to the
/// frame's time.
pub fn leap_table_covers(epoch: u8, seconds: u32) -> bool {
    let start = epoch_unix(epoch);
    start >= LEAP_TABLE_EXPIRES || frame_utc(epoch, seconds).0 < LEAP_TABLE_EXPIRES
}

/// The latest reference epoch at or before `unix` seconds, and seconds since it. No leap second
/// can fall inside the latest epoch before its last second (they come just before an epoch
/// begins), so POSIX arithmetic is exact here.
pub fn to_epoch(unix: i64) -> Option<(u8, u32)> {
    let t = Utc.timestamp_opt(unix, 0).single()?;
    let half = (t.year() - 2000) * 2 + if t.month() >= 7 { 1 } else { 0 };
    let epoch = u8::try_from(half).ok().filter(|e| *e < 64)?;
    let start = epoch_unix(epoch);
    let secs = u32::try_from(unix - start).ok()?;
    Some((epoch, secs))
}

/// ISO 8601 UTC string for a VDIF time (epoch, seconds, fraction of a second); a leap second
/// reads 23:59:60.
pub fn iso(epoch: u8, seconds: u32, fraction: f64) -> String {
    let (unix, leap) = frame_utc(epoch, seconds);
    let nanos = (fraction.clamp(0.0, 0.999_999_999) * 1e9).round() as u32;
    // chrono marks a leap second as nanoseconds 1e9.. of the second before it.
    let nanos = nanos.min(999_999_999) + if leap { 1_000_000_000 } else { 0 };
    match DateTime::<Utc>::from_timestamp(unix, nanos) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
        None => format!("epoch {epoch} + {seconds} s"),
    }
}

/// Parse an ISO-8601 / RFC 3339 UTC time ("2026-11-23T12:00:00Z") or `now`, to whole Unix
/// seconds; `now_unix` is what `now` means (the caller reads the clock: this crate does no IO).
pub fn parse_start(s: &str, now_unix: i64) -> Result<i64, StartTimeError> {
    if s == "now" {
        return Ok(now_unix);
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp())
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").map(|t| t.and_utc().timestamp()))
        .map_err(|source| StartTimeError {
            input: s.to_string(),
            source,
        })
}

/// A start time that is neither `now` nor a UTC time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a UTC time like 2026-11-23T12:00:00Z ({source})")]
pub struct StartTimeError {
    /// The text given.
    pub input: String,
    /// chrono's reason.
    pub source: chrono::ParseError,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn the_epoch_table_is_chronos_calendar() {
        for epoch in 0..64u8 {
            let (year, month) = (2000 + i32::from(epoch / 2), if epoch % 2 == 0 { 1 } else { 7 });
            let t = NaiveDate::from_ymd_opt(year, month, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap();
            assert_eq!(epoch_unix(epoch), t.and_utc().timestamp(), "epoch {epoch}");
        }
        // Only the field's 6 bits count.
        assert_eq!(epoch_unix(64 + 53), epoch_unix(53));
        assert_eq!(parse_start("now", 1_234), Ok(1_234));
    }

    #[test]
    fn vdif_epochs_are_utc_half_years_from_2000() {
        assert_eq!(epoch_unix(0), 946_684_800);
        assert_eq!(iso(1, 0, 0.0), "2000-07-01T00:00:00.000000000Z");
        // baseband's sample.vdif: epoch 28, 2014-06-16T05:56:07.
        let (e, s) = to_epoch(parse_start("2014-06-16T05:56:07Z", 0).unwrap()).unwrap();
        assert_eq!(e, 28);
        assert_eq!(iso(e, s, 0.0), "2014-06-16T05:56:07.000000000Z");
        assert_eq!(to_epoch(parse_start("2026-07-01T00:00:00Z", 0).unwrap()), Some((53, 0)));
    }

    #[test]
    fn leap_seconds_are_counted() {
        // Epoch 33 = 2016-07-01; 184 days later comes the leap second, then 2017.
        let day184 = 184 * 86_400;
        assert_eq!(iso(33, day184 - 1, 0.0), "2016-12-31T23:59:59.000000000Z");
        assert_eq!(iso(33, day184, 0.5), "2016-12-31T23:59:60.500000000Z");
        assert_eq!(iso(33, day184 + 1, 0.0), "2017-01-01T00:00:00.000000000Z");
        // Epoch 0 in 2017: five leap seconds lie between, so the count is 5 s larger.
        let t = parse_start("2017-03-01T00:00:00Z", 0).unwrap();
        let (e, s) = to_epoch(t).unwrap();
        assert_eq!(e, 34);
        assert_eq!(
            iso(0, (t - epoch_unix(0)) as u32 + 5, 0.0),
            "2017-03-01T00:00:00.000000000Z"
        );
        assert_eq!(iso(e, s, 0.0), "2017-03-01T00:00:00.000000000Z");
        assert_eq!(to_epoch(parse_start("2017-01-01T00:00:00Z", 0).unwrap()), Some((34, 0)));
        // From epoch 33, 2017-01-01 is one second further than POSIX arithmetic says.
        let (unix, leap) = frame_utc(33, day184 + 1);
        assert_eq!((unix, leap), (1_483_228_800, false));
        assert!(leap_table_covers(52, 0) && !leap_table_covers(50, 600 * 86_400));
    }
}

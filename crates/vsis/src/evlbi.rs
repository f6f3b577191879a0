//! jive5ab's e-VLBI statistics (`evlbi?`) and their format string.
//!
//! jive5ab (`src/runtime.cc`, `fmt_evlbistats`; `src/mk5command/evlbi.cc`) answers `evlbi?` with
//! the default format [`DEFAULT_FORMAT`], and `evlbi = f1 : f2 : … ;` with the fields joined by
//! ` : ` as the format. Each `%x` is replaced:
//!
//! | spec | value |
//! |---|---|
//! | `%t` | packets received |
//! | `%l` / `%L` | packets lost (sequence numbers missing) / as `%5.2f%%` of received + lost |
//! | `%o` / `%O` | packets out of order / percentage |
//! | `%d` / `%D` | packets discarded / percentage |
//! | `%r` / `%R` | reordering extent summed / its mean per out-of-order packet, then `seqnr/pkt` |
//! | `%G` | mean gap between reorderings, then `seqnr/gap` |
//! | `%c` / `%C` | discontinuities / mean size, then `seqnr/discontinuity` |
//! | `%u` | UNIX time `%.3f` |
//! | `%U` | UTC `YYYY-MM-DD HHhMMmSS.sss` then `s` |
//! | other | copied with its `%` |
//!
//! Means print as C++ `ostream << double` does (`%g`, six significant digits), so `0` and not
//! `0.000000`: `extent : 0seqnr/pkt`. Scripts parse these replies field by field; the output here
//! is byte-identical to jive5ab's for the same counts (tests pin captured replies).

use serde::{Deserialize, Serialize};

/// `evlbi?`'s format when none is given.
pub const DEFAULT_FORMAT: &str = "total : %t : loss : %l (%L) : out-of-order : %o (%O) : extent : %R";

/// The counters behind `evlbi?` (jive5ab's `evlbi_stats_type`), summed over streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvlbiStats {
    /// Packets (frames) received.
    pub pkt_in: u64,
    /// Packets lost: expected from the sequence (or time) but never received.
    pub pkt_lost: u64,
    /// Packets received after a later one.
    pub pkt_ooo: u64,
    /// Packets received and discarded (too late, duplicate, damaged).
    pub pkt_disc: u64,
    /// Reordering extent summed over the out-of-order packets.
    pub ooosum: u64,
    /// Gaps between reorderings summed.
    pub gap_sum: u64,
    /// Discontinuities (jumps of the sequence).
    pub discont: u64,
    /// Their sizes summed.
    pub discont_sz: u64,
}

impl EvlbiStats {
    /// Add `other`'s counts (several streams).
    pub fn add(&mut self, o: &EvlbiStats) {
        self.pkt_in += o.pkt_in;
        self.pkt_lost += o.pkt_lost;
        self.pkt_ooo += o.pkt_ooo;
        self.pkt_disc += o.pkt_disc;
        self.ooosum += o.ooosum;
        self.gap_sum += o.gap_sum;
        self.discont += o.discont;
        self.discont_sz += o.discont_sz;
    }
}

/// A wall-clock time for `%u` and `%U`: seconds and microseconds since the UNIX epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnixTime {
    /// Whole seconds.
    pub secs: i64,
    /// Microseconds, 0 to 999 999.
    pub micros: u32,
}

/// `stats` in `fmt` (see the module table); `now` for `%u`/`%U`.
pub fn format(stats: &EvlbiStats, fmt: &str, now: UnixTime) -> String {
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let total = stats.pkt_in as f64 + stats.pkt_lost as f64;
    let pct = |n: u64| {
        // Over what was taken and lost: a recording that kept nothing of 8000 frames lost
        // 100 %, not 0 (pkt_in 0 was read as "nothing happened").
        let v = if total == 0.0 { 0.0 } else { n as f64 / total * 100.0 };
        format!("{v:5.2}%")
    };
    let mut out = String::with_capacity(fmt.len() + 32);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else { break };
        match spec {
            't' => out += &stats.pkt_in.to_string(),
            'l' => out += &stats.pkt_lost.to_string(),
            'L' => out += &pct(stats.pkt_lost),
            'o' => out += &stats.pkt_ooo.to_string(),
            'O' => out += &pct(stats.pkt_ooo),
            'd' => out += &stats.pkt_disc.to_string(),
            'D' => out += &pct(stats.pkt_disc),
            'r' => out += &stats.ooosum.to_string(),
            'R' => out += &(cpp_double(ratio(stats.ooosum, stats.pkt_ooo)) + "seqnr/pkt"),
            'G' => out += &(cpp_double(ratio(stats.gap_sum, stats.pkt_ooo)) + "seqnr/gap"),
            'c' => out += &stats.discont.to_string(),
            'C' => out += &(cpp_double(ratio(stats.discont_sz, stats.discont)) + "seqnr/discontinuity"),
            'u' => out += &format!("{:.3}", now.secs as f64 + f64::from(now.micros) / 1e6),
            'U' => out += &utc_text(now),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    out
}

/// A double as C++ `ostream <<` prints it by default: `%g` with six significant digits
/// (trailing zeros dropped, exponent form below 1e-4 and from 1e6).
pub fn cpp_double(v: f64) -> String {
    const P: i32 = 6;
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v.is_infinite() {
            if v > 0.0 { "inf" } else { "-inf" }.into()
        } else {
            "0".into()
        };
    }
    let e = format!("{:.*e}", (P - 1) as usize, v);
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if !(-4..P).contains(&x) {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), x.abs())
    } else {
        strip_zeros(&format!("{:.*}", (P - 1 - x) as usize, v)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `%U`: `2026-11-25 13h05m21.809s` (jive5ab: strftime `%Y-%m-%d %Hh%Mm%S`, then the part of
/// `%.3fs` of the microseconds from its decimal point).
fn utc_text(now: UnixTime) -> String {
    let days = now.secs.div_euclid(86_400);
    let sod = now.secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let frac = format!("{:.3}s", f64::from(now.micros) / 1e6);
    let frac = frac.find('.').map_or("", |i| &frac[i..]);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}h{:02}m{:02}{frac}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Proleptic Gregorian date of a day count from 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-25 13:05:30.508 UTC, when the captures below were taken.
    const NOW: UnixTime = UnixTime {
        secs: 1_795_611_930,
        micros: 508_000,
    };

    #[test]
    fn default_format_matches_jive5ab_byte_for_byte() {
        // jive5ab 3.1.0, net2file of `evlbi stream send --seq-format jive5ab --inject-loss 1%`:
        // `!evlbi? 0 : total : 23753 : loss : 247 ( 1.03%) : out-of-order : 0 ( 0.00%) : extent : 0seqnr/pkt ;`
        let s = EvlbiStats {
            pkt_in: 23_753,
            pkt_lost: 247,
            ..EvlbiStats::default()
        };
        assert_eq!(
            format(&s, DEFAULT_FORMAT, NOW),
            "total : 23753 : loss : 247 ( 1.03%) : out-of-order : 0 ( 0.00%) : extent : 0seqnr/pkt"
        );
        assert_eq!(
            format(&EvlbiStats::default(), DEFAULT_FORMAT, NOW),
            "total : 0 : loss : 0 ( 0.00%) : out-of-order : 0 ( 0.00%) : extent : 0seqnr/pkt"
        );
        // Nothing kept of what came is all of it lost.
        let none_kept = EvlbiStats {
            pkt_lost: 8000,
            ..EvlbiStats::default()
        };
        assert_eq!(
            format(&none_kept, DEFAULT_FORMAT, NOW),
            "total : 0 : loss : 8000 (100.00%) : out-of-order : 0 ( 0.00%) : extent : 0seqnr/pkt"
        );
    }

    #[test]
    fn every_spec_matches_jive5ab() {
        // `evlbi=%t:%l:%L:%o:%O:%d:%D:%r:%R:%G:%c:%C:%u:%U:%x;` to the same jive5ab:
        let s = EvlbiStats {
            pkt_in: 23_753,
            pkt_lost: 247,
            ..EvlbiStats::default()
        };
        let fmt = "%t : %l : %L : %o : %O : %d : %D : %r : %R : %G : %c : %C : %u : %U : %x";
        assert_eq!(
            format(&s, fmt, NOW),
            "23753 : 247 :  1.03% : 0 :  0.00% : 0 :  0.00% : 0 : 0seqnr/pkt : 0seqnr/gap : 0 : \
             0seqnr/discontinuity : 1795611930.508 : 2026-11-25 13h05m30.508s : %x"
        );
        let r = EvlbiStats {
            pkt_in: 1000,
            pkt_ooo: 3,
            ooosum: 10,
            ..EvlbiStats::default()
        };
        assert_eq!(format(&r, "%R %O", NOW), "3.33333seqnr/pkt  0.30%");
    }

    #[test]
    fn doubles_print_as_cpp_streams_do() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (2.5, "2.5"),
            (1.0 / 3.0, "0.333333"),
            (123_456.0, "123456"),
            (1_234_567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.000_012_34, "1.234e-05"),
            (999_999.5, "1e+06"),
            (100.0, "100"),
        ];
        for (v, want) in cases {
            assert_eq!(cpp_double(v), want, "{v}");
        }
    }

    #[test]
    fn dates_are_gregorian() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(
            utc_text(UnixTime {
                secs: 1_795_611_921,
                micros: 809_000
            }),
            "2026-11-25 13h05m21.809s"
        );
    }
}

//! What `probe client` and its `--trials`, `--sweep` and TCP modes print while and after they
//! run: the live line from the server's interim counters, and a host's counters in one line.

use hostcounters::HostDelta;
use probe_session::control::Interim;

use crate::units::si_fmt;

/// Turns the server's cumulative interim counters into one stderr line per interval (above the
/// progress bar, if any).
pub fn live_printer(bar: indicatif::ProgressBar) -> impl FnMut(&Interim) + Send {
    let mut prev: Option<Interim> = None;
    move |i: &Interim| {
        let (bytes0, ms0) = prev.map_or((0, 0), |p| (p.unique_bytes, p.elapsed_ms));
        let dt = i.elapsed_ms.saturating_sub(ms0) as f64 / 1e3;
        let rate = if dt > 0.0 {
            i.unique_bytes.saturating_sub(bytes0) as f64 * 8.0 / dt
        } else {
            0.0
        };
        let seen = i.highest_seq.map_or(0, |h| h + 1);
        let frac = if seen > 0 { i.missing as f64 / seen as f64 } else { 0.0 };
        bar.suspend(|| {
            status!(
                "[{:>7.2} s] {}b/s, received {}, missing {} ({frac:.2e}), reordered {}, duplicates {}",
                i.elapsed_ms as f64 / 1e3,
                si_fmt(rate),
                i.unique,
                i.missing,
                i.reordered,
                i.duplicates
            )
        });
        prev = Some(*i);
    }
}

/// "host CPU busy 63% (user 20 sys 43 idle 37), process 98% of a core, UDP in 100000 InErrors 0 …".
pub fn host_line(label: &str, h: &HostDelta) -> String {
    let mut s = format!("{label:<10} host");
    if let Some(c) = &h.cpu {
        s += &format!(" CPU {}", c.summary());
    }
    if let Some(p) = &h.process {
        s += &format!(", process {:.0}% of a core", p.total_pct());
    }
    if let Some(u) = &h.udp {
        s += &format!(
            "; UDP in {} out {} InErrors {} RcvbufErrors {} SndbufErrors {}",
            u.in_datagrams, u.out_datagrams, u.in_errors, u.rcvbuf_errors, u.sndbuf_errors
        );
    }
    if let Some(i) = &h.interface {
        s += &format!("; {} rx_drop {} tx_drop {}", i.name, i.rx_drop, i.tx_drop);
    }
    s
}

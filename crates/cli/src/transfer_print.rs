//! What `evlbi send` prints after it ran: the transfer's text summary (its JSON is the
//! `SendReport` itself).

use transfer::results::SendReport;

use crate::units::si_fmt;

pub fn print_summary(r: &SendReport) {
    for f in &r.files {
        match (&f.error, f.verified) {
            (None, true) => println!(
                "{}  {} B  verified {}  {} round(s), {} B resumed, {}, {:.2} s, last data to verdict {}",
                f.path,
                f.size,
                f.blake3.as_deref().map_or("", |h| &h[..16]),
                f.rounds.len(),
                f.resumed_bytes,
                f.sync_s
                    .map_or("not fsync'd".into(), |s| format!("fsync {:.1} ms", s * 1e3)),
                f.elapsed_s,
                f.tail_s.map_or("-".into(), |t| format!("{:.1} ms", t * 1e3)),
            ),
            (e, _) => println!("{}  FAILED: {}", f.path, e.as_deref().unwrap_or("not verified")),
        }
    }
    let d = r.data.clone().unwrap_or_default();
    println!(
        "{} file(s), {} B moved in {:.2} s (handshake {:.3} s): {}b/s while data flowed, {} B retransmitted, \
         loss seen {:.2e}, min RTT {}, CPU {}",
        r.files.len(),
        r.transferred_bytes,
        r.elapsed_s,
        r.handshake_s,
        r.goodput_bps.map_or("- ".into(), si_fmt),
        r.retransmitted_bytes,
        d.loss_seen,
        d.rtt_min_us
            .map_or("-".into(), |us| format!("{:.3} ms", us as f64 / 1e3)),
        r.cpu_total_pct().map_or("-".into(), |c| format!("{c:.0} %")),
    );
    if let Some(st) = &r.start {
        println!(
            "started at {}b/s ({}, measured at RTT {:.1} ms; this connect {:.1} ms){}",
            si_fmt(st.rate_bps),
            st.from,
            st.rtt_s * 1e3,
            st.connect_rtt_s * 1e3,
            if st.used {
                ""
            } else {
                ": not used, the path's RTT changed"
            }
        );
    }
}

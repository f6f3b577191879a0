//! What `probe client` and its `--trials`, `--sweep` and TCP modes print while and after they
//! run: the live line from the server's interim counters, a host's counters in one line, the
//! UDP result, `probe host-jitter`'s, a TCP test's (its interval lines too) and a receive-buffer
//! sweep's.

use hostcounters::HostDelta;
use probe::results::ProbeResult;
use probe::tcp::TcpInterval;
use probe::tcp_results::{RcvbufSweepResult, TcpTestResult};
use probe_session::control::Interim;

use crate::units::{bytes_fmt, rate_fmt, si_fmt, us_fmt};

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

pub fn print_host_jitter(r: &probe::host_jitter::HostJitterReport) {
    let g = &r.releases.departure_gap_ns;
    println!(
        "host jitter: {} releases every {:.3} us over {:.2} s, nothing sent",
        r.releases.packets_sent,
        r.spacing_ns as f64 / 1e3,
        r.seconds
    );
    println!(
        "  departure gap us: p50 {} p90 {} p99 {} p99.9 {} max {}",
        us_fmt(g.p50),
        us_fmt(g.p90),
        us_fmt(g.p99),
        us_fmt(g.p999),
        us_fmt(g.max)
    );
    if let Some(x) = r.gap_p99_excess_ns {
        println!(
            "  gap p99 excess: {:+.2} us — no sender on this host does better at this spacing",
            x / 1e3
        );
    }
    println!(
        "  interruptions > {:.0} us while spinning: {} ({:.0}/s), longest {} us, {:.2} % of the spin time",
        r.interruption_threshold_ns as f64 / 1e3,
        r.interruptions.count,
        r.interruptions_per_second,
        us_fmt(r.interruptions.max),
        r.interrupted_share * 100.0
    );
    println!(
        "  involuntary context switches: {}; pacer slips (> catch-up bound): {}",
        r.involuntary_context_switches, r.pacer_slips
    );
}

pub fn print_result(r: &ProbeResult) {
    let p = &r.params;
    println!(
        "probe: {} x {} B, spacing {:.3} us, offered {}b/s user, {}b/s wire",
        p.count,
        p.size,
        p.spacing_ns as f64 / 1e3,
        si_fmt(r.offered_user_rate_bps.unwrap_or(0.0)),
        si_fmt(r.offered_wire_rate_bps.unwrap_or(0.0))
    );
    if let Some(s) = &r.sender {
        println!(
            "sent       {} datagrams, {}b/s user; departure gap p50 {} us p99 {} us; {} late",
            s.packets_sent,
            si_fmt(s.user_rate_bps.unwrap_or(0.0)),
            us_fmt(s.departure_gap_ns.p50),
            us_fmt(s.departure_gap_ns.p99),
            s.late_packets
        );
    }
    if let Some(x) = &r.receiver {
        println!(
            "received   {} of {} ({} lost, loss {:.3e}), {} duplicates, {} reordered, {} strays",
            x.unique_packets,
            x.expected_packets,
            x.lost_packets,
            x.loss_fraction.unwrap_or(0.0),
            x.duplicates,
            x.reordering.reordered_packets,
            x.strays.total()
        );
        println!(
            "rate       {}b/s user, {}b/s wire",
            si_fmt(x.user_rate_bps.unwrap_or(0.0)),
            si_fmt(x.wire_rate_bps.unwrap_or(0.0))
        );
        println!(
            "arrivals   inter-arrival p50 {} us p99 {} us",
            us_fmt(x.inter_arrival_ns.p50),
            us_fmt(x.inter_arrival_ns.p99)
        );
        let d = &x.one_way_delay;
        println!(
            "delay      one-way above minimum: p50 {} us p99 {} us max {} us",
            us_fmt(d.p50_ns),
            us_fmt(d.p99_ns),
            us_fmt(d.max_ns)
        );
        if let Some(f) = &x.poisson {
            println!("loss stats {}", f.verdict);
        }
    }
    for (label, h) in [("sender", &r.host.sender), ("receiver", &r.host.receiver)] {
        if let Some(h) = h {
            println!("{}", host_line(label, h));
        }
    }
    for n in &r.notes {
        println!("note       {n}");
    }
}

/// One live line per interval (iperf3 style).
pub fn interval_line(iv: &TcpInterval) -> String {
    let opt = |v: Option<f64>| v.map_or("-".into(), rate_fmt);
    format!(
        "[{:>7.2}-{:>7.2} s] {:>12}  retrans {:>5}  cwnd {:>10}  srtt {:>8.3} ms  pacing {:>12}  delivery {:>12}",
        iv.start_s,
        iv.end_s,
        rate_fmt(iv.rate_bps),
        iv.retransmits,
        bytes_fmt(iv.cwnd_bytes as f64),
        iv.srtt_us / 1e3,
        opt(iv.pacing_rate_bps),
        opt(iv.delivery_rate_bps),
    )
}

pub fn print_tcp(r: &TcpTestResult) {
    println!(
        "sent       {} written, {} acknowledged in {:.2} s: {}b/s; {} segments retransmitted",
        bytes_fmt(r.bytes_written as f64),
        bytes_fmt(r.bytes_acked as f64),
        r.elapsed_s,
        si_fmt(r.sender_rate_bps.unwrap_or(0.0)),
        r.retransmits
    );
    match &r.receiver {
        Some(x) => println!(
            "received   {} in {:.2} s: {}b/s{}",
            bytes_fmt(x.bytes as f64),
            x.duration_s,
            si_fmt(x.rate_bps.unwrap_or(0.0)),
            if x.stray_connections > 0 {
                format!(" ({} stray connections refused)", x.stray_connections)
            } else {
                String::new()
            }
        ),
        None => println!("received   (no report from the server)"),
    }
    let rtts: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.srtt_us > 0)
        .map(|s| f64::from(s.srtt_us))
        .collect();
    if let (Some(min), Some(max)) = (
        rtts.iter().copied().reduce(f64::min),
        rtts.iter().copied().reduce(f64::max),
    ) {
        println!(
            "rtt        srtt {:.3} .. {:.3} ms over {} samples while writing, congestion control {}",
            min / 1e3,
            max / 1e3,
            rtts.len(),
            r.cc.as_deref().unwrap_or("?")
        );
    }
    if let Some(m) = &r.mathis {
        match (m.bound_bps, m.achieved_over_bound) {
            (Some(b), Some(x)) => println!(
                "mathis     bound {}b/s for MSS {} B, RTT {:.3} ms, p = {:.2e} ({} of {} segments retransmitted, {} stream(s)): achieved {}b/s = {x:.2} x bound",
                si_fmt(b),
                m.mss_bytes,
                m.rtt_s * 1e3,
                m.loss,
                m.retransmitted_segments,
                m.sent_segments,
                m.streams,
                si_fmt(m.achieved_bps)
            ),
            _ => println!(
                "mathis     no retransmission in {} segments: no loss-based bound (MSS {} B, RTT {:.3} ms)",
                m.sent_segments,
                m.mss_bytes,
                m.rtt_s * 1e3
            ),
        }
    }
    if let Some(c) = &r.cpu_load {
        println!(
            "cpu load   nice {} (kernel says {}), {} thread(s) on {} CPUs: took {} of all CPU, {} left",
            c.nice,
            c.nice_observed.map_or("?".into(), |n| n.to_string()),
            c.threads,
            c.cpus,
            c.task_cpu_pct.map_or("?".into(), |p| format!("{p:.0}%")),
            c.available_cpu_pct.map_or("?".into(), |p| format!("{p:.0}%")),
        );
    }
    for (label, h) in [("sender", &r.host.sender), ("receiver", &r.host.receiver)] {
        if let Some(h) = h {
            println!("{}", host_line(label, h));
        }
    }
    for n in &r.notes {
        println!("note       {n}");
    }
    if let Some(e) = &r.error {
        println!("PARTIAL    {e}");
    }
}

pub fn print_rcvbuf(s: &RcvbufSweepResult) {
    let offered = ProbeResult::new(
        probe::results::TestParams {
            test_id: 0,
            size: s.size,
            count: s.count,
            spacing_ns: s.spacing_ns,
        },
        None,
        None,
    )
    .offered_user_rate_bps;
    println!(
        "receive-buffer sweep: {} x {} B at {} user rate",
        s.count,
        s.size,
        offered.map_or("full speed".into(), rate_fmt)
    );
    println!(
        "{:>12} {:>12} {:>9} {:>10} {:>13} {:>13} {:>14}",
        "rcvbuf B", "granted B", "lost", "loss", "socket drops", "RcvbufErrors", "lost elsewhere"
    );
    let o = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
    for p in &s.points {
        println!(
            "{:>12} {:>12} {:>9} {:>10} {:>13} {:>13} {:>14}",
            p.rcvbuf_requested,
            o(p.rcvbuf_granted),
            o(p.lost_packets),
            p.loss_fraction.map_or("-".into(), |f| format!("{f:.3e}")),
            o(p.socket_drops),
            o(p.rcvbuf_errors),
            o(p.lost_elsewhere),
        );
    }
    if let Some(e) = &s.error {
        println!("PARTIAL  {e}");
    }
}

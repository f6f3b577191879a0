//! Figures of the TCP and host experiments as [`ChartSpec`]s: TCP throughput over time with the
//! intervals that retransmitted marked and the Mathis bound drawn (seed 003 Fig 1), congestion
//! window and RTT over time from TCP_INFO, throughput against the nice level of a competing task
//! and against the CPU it leaves (seed 001 Fig 2–3, right panels), and UDP loss against the
//! receive buffer (seed 003 Fig 2c).

use probe::tcp_results::{CpuLoadSweepResult, RcvbufSweepResult, TcpTestResult};

use crate::chart::{ChartSpec, SeriesData};

/// A rate unit that keeps the axis numbers short: (divisor, name).
fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 2e9 {
        (1e9, "Gbit/s")
    } else {
        (1e6, "Mbit/s")
    }
}

/// Most streams drawn one line each; beyond, the figure says how many were left out.
const MAX_STREAM_LINES: u16 = 8;

/// Throughput per interval over time, the intervals with retransmissions marked on it, and the
/// Mathis bound for the measured RTT and retransmit rate when it is within sight of the data
/// (TCP_INFO's delivery-rate samples are in the JSON: single-ACK samples, too noisy to draw).
pub fn tcp_throughput(r: &TcpTestResult) -> Option<ChartSpec> {
    if r.intervals.is_empty() {
        return None;
    }
    let max = r.intervals.iter().map(|i| i.rate_bps).fold(0.0f64, f64::max);
    let (div, unit) = rate_unit(max);
    let mid = |i: &probe::tcp::TcpInterval| (i.start_s + i.end_s) / 2.0;
    let mut spec = ChartSpec::new(
        format!(
            "TCP throughput over time, {} stream(s), {}",
            r.params.streams,
            r.cc.as_deref().unwrap_or("?")
        ),
        "time since the start of the test (s)",
        format!("throughput ({unit})"),
    );
    spec.push(
        "acknowledged per interval",
        SeriesData::Line(r.intervals.iter().map(|i| (mid(i), i.rate_bps / div)).collect()),
    );
    let hits: Vec<&probe::tcp::TcpInterval> = r.intervals.iter().filter(|i| i.retransmits > 0).collect();
    let segs: u64 = hits.iter().map(|i| i.retransmits).sum();
    spec.push(
        format!("retransmitted ({segs} segments in {} intervals)", hits.len()),
        SeriesData::Markers(hits.iter().map(|i| (mid(i), i.rate_bps / div)).collect()),
    );
    let mut note = format!(
        "{:.3} {unit} over {:.1} s; {} segments retransmitted",
        r.achieved_rate_bps().unwrap_or(0.0) / div,
        r.elapsed_s,
        r.retransmits
    );
    if let Some(m) = &r.mathis {
        match m.bound_bps {
            Some(b) => {
                note.push_str(&format!(
                    "; Mathis bound {:.3} {unit} (RTT {:.2} ms, p = {:.1e}), achieved {:.2} x bound",
                    b / div,
                    m.rtt_s * 1e3,
                    m.loss,
                    m.achieved_over_bound.unwrap_or(0.0)
                ));
                if b <= 3.0 * max {
                    let (t0, t1) = (r.intervals[0].start_s, r.intervals[r.intervals.len() - 1].end_s);
                    spec.push("Mathis bound", SeriesData::Line(vec![(t0, b / div), (t1, b / div)]));
                }
            }
            None => note.push_str("; no retransmission, no Mathis bound"),
        }
    }
    if r.partial {
        note.push_str("; PARTIAL: the test ended early");
    }
    spec.note = Some(note);
    Some(spec)
}

/// One line per stream of a sample field over time.
fn per_stream(
    r: &TcpTestResult,
    title: &str,
    y_label: &str,
    f: impl Fn(&probe::tcp::TcpSample) -> f64,
) -> Option<ChartSpec> {
    if r.samples.is_empty() {
        return None;
    }
    let mut spec = ChartSpec::new(title, "time since the start of the test (s)", y_label);
    let streams = r.params.streams.min(MAX_STREAM_LINES);
    for st in 0..streams {
        spec.push(
            if r.params.streams > 1 {
                format!("stream {st}")
            } else {
                String::new()
            },
            SeriesData::Line(
                r.write_phase_samples()
                    .filter(|s| s.stream == st)
                    .map(|s| (s.t_s, f(s)))
                    .collect(),
            ),
        );
    }
    let mut note = format!(
        "TCP_INFO every {:.3} s while the streams were writing",
        r.sample_period_s
    );
    if r.params.streams > MAX_STREAM_LINES {
        note.push_str(&format!(
            "; streams {MAX_STREAM_LINES}..{} not drawn",
            r.params.streams - 1
        ));
    }
    spec.note = Some(note);
    (!spec.series.is_empty()).then_some(spec)
}

/// Congestion window (bytes) over time, per stream.
pub fn tcp_cwnd(r: &TcpTestResult) -> Option<ChartSpec> {
    per_stream(r, "Congestion window over time", "cwnd (MB)", |s| {
        f64::from(s.cwnd) * f64::from(s.snd_mss) / 1e6
    })
}

/// Smoothed RTT over time, per stream.
pub fn tcp_rtt(r: &TcpTestResult) -> Option<ChartSpec> {
    per_stream(r, "Smoothed round-trip time over time", "srtt (ms)", |s| {
        f64::from(s.srtt_us) / 1e3
    })
}

/// Throughput against the nice level of the competing task, the rate without it as a line
/// (seed 001 Fig 2 top right).
pub fn cpu_rate_vs_nice(s: &CpuLoadSweepResult) -> Option<ChartSpec> {
    let pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| Some((f64::from(p.nice?), p.rate_bps?)))
        .collect();
    if pts.is_empty() {
        return None;
    }
    let max = s.points.iter().filter_map(|p| p.rate_bps).fold(0.0f64, f64::max);
    let (div, unit) = rate_unit(max);
    let mut spec = ChartSpec::new(
        "TCP throughput against the nice level of a competing CPU-bound task",
        "nice level of the competing task (19 = lowest priority)",
        format!("throughput ({unit})"),
    );
    let (lo, hi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &(x, _)| (a.min(x), b.max(x)));
    spec.push(
        "with the task",
        SeriesData::Line(pts.iter().map(|&(x, y)| (x, y / div)).collect()),
    );
    if let Some(base) = s.points.iter().find(|p| p.nice.is_none()).and_then(|p| p.rate_bps) {
        spec.push("without it", SeriesData::Line(vec![(lo, base / div), (hi, base / div)]));
    }
    if s.partial {
        spec.note = Some(format!(
            "PARTIAL: {}",
            s.error.as_deref().unwrap_or("the sweep ended early")
        ));
    }
    Some(spec)
}

/// CPU left by the competing task and the sending host's idle time against its nice level
/// (seed 001 Fig 2 middle right).
pub fn cpu_available_vs_nice(s: &CpuLoadSweepResult) -> Option<ChartSpec> {
    let mut spec = ChartSpec::new(
        "CPU left by the competing task",
        "nice level of the competing task (19 = lowest priority)",
        "% of all CPUs",
    );
    let line = |f: &dyn Fn(&probe::tcp_results::CpuLoadPoint) -> Option<f64>| {
        s.points
            .iter()
            .filter_map(|p| Some((f64::from(p.nice?), f(p)?)))
            .collect::<Vec<_>>()
    };
    spec.push(
        "available (100 − the task's share)",
        SeriesData::Line(line(&|p| p.available_cpu_pct)),
    );
    spec.push("sending host idle", SeriesData::Line(line(&|p| p.sender_idle_pct)));
    (!spec.series.is_empty()).then_some(spec)
}

/// Throughput against the CPU left (seed 001 Fig 2 bottom right), the baseline at 100 %.
pub fn cpu_rate_vs_available(s: &CpuLoadSweepResult) -> Option<ChartSpec> {
    let mut pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| Some((p.available_cpu_pct?, p.rate_bps?)))
        .collect();
    if pts.is_empty() {
        return None;
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (div, unit) = rate_unit(pts.iter().map(|p| p.1).fold(0.0, f64::max));
    let mut spec = ChartSpec::new(
        "TCP throughput against the CPU available",
        "CPU left by the competing task (% of all CPUs)",
        format!("throughput ({unit})"),
    );
    spec.push("", SeriesData::Line(pts.iter().map(|&(x, y)| (x, y / div)).collect()));
    Some(spec)
}

/// Packets lost against the receive buffer asked for (seed 003 Fig 2c), with the datagrams the
/// kernel dropped at the socket and the host's RcvbufErrors beside the application's count.
pub fn rcvbuf_loss(s: &RcvbufSweepResult) -> Option<ChartSpec> {
    if s.points.is_empty() {
        return None;
    }
    let mut spec = ChartSpec::new(
        format!("UDP loss against the receive buffer, {} x {} B", s.count, s.size),
        "receive buffer asked for, SO_RCVBUF (kB)",
        "packets",
    );
    let x = |p: &probe::tcp_results::RcvbufPoint| p.rcvbuf_requested as f64 / 1e3;
    let line = |f: &dyn Fn(&probe::tcp_results::RcvbufPoint) -> Option<u64>| {
        s.points
            .iter()
            .filter_map(|p| Some((x(p), f(p)? as f64)))
            .collect::<Vec<_>>()
    };
    let lost = line(&|p| p.lost_packets);
    let all: Vec<f64> = lost.iter().map(|p| p.1).collect();
    let pos: Vec<f64> = all.iter().copied().filter(|&v| v > 0.0).collect();
    let (lo, hi) = pos.iter().fold((f64::MAX, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    spec.y_log = !pos.is_empty() && hi >= lo * 100.0;
    spec.push("lost (the application's count)", SeriesData::Line(lost));
    spec.push(
        "dropped at the socket (/proc/net/udp)",
        SeriesData::Line(line(&|p| p.socket_drops)),
    );
    spec.push(
        "host RcvbufErrors (/proc/net/snmp)",
        SeriesData::Markers(line(&|p| p.rcvbuf_errors)),
    );
    let mut note = match s.spacing_ns {
        0 => "sent as fast as possible".to_string(),
        g => format!("offered {:.1} Mbit/s of payload", f64::from(s.size) * 8e3 / g as f64),
    };
    if s.points
        .iter()
        .all(|p| p.socket_drops.is_some() && p.socket_drops == p.lost_packets)
    {
        note.push_str("; every lost packet was dropped at the socket (the lines coincide)");
    }
    if spec.y_log && all.len() > pos.len() {
        note.push_str(&format!(
            "; {} points without loss not shown on the log axis",
            all.len() - pos.len()
        ));
    }
    if s.partial {
        note.push_str(&format!(
            "; PARTIAL: {}",
            s.error.as_deref().unwrap_or("the sweep ended early")
        ));
    }
    spec.note = Some(note);
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe::tcp::{MathisCheck, TcpInterval};
    use probe::tcp_results::{CpuLoadPoint, CpuLoadReport, TcpTestParams};

    fn tcp() -> TcpTestResult {
        let mut r = TcpTestResult::new(TcpTestParams {
            test_id: 1,
            streams: 1,
            duration_s: 3.0,
            interval_s: 1.0,
            write_size: 131_072,
            cc_requested: Some("cubic".into()),
        });
        r.intervals = (0..3)
            .map(|k| TcpInterval {
                start_s: f64::from(k),
                end_s: f64::from(k + 1),
                bytes: 100_000_000,
                rate_bps: 8e8,
                bytes_written: 100_000_000,
                retransmits: u64::from(k == 1) * 4,
                cwnd_bytes: 1_000_000,
                srtt_us: 100.0,
                pacing_rate_bps: None,
                delivery_rate_bps: Some(7.9e8),
            })
            .collect();
        r.received_rate_bps = Some(8e8);
        r.retransmits = 4;
        r.mathis = MathisCheck::new(1, 1448, 0.1, 4, 1_000_000, 8e8);
        r
    }

    #[test]
    fn throughput_figure_marks_the_retransmitting_intervals_and_draws_the_bound() {
        let spec = tcp_throughput(&tcp()).expect("figure");
        assert_eq!(spec.y_label, "throughput (Mbit/s)");
        let labels: Vec<&str> = spec.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "acknowledged per interval",
                "retransmitted (4 segments in 1 intervals)",
                "Mathis bound"
            ]
        );
        assert_eq!(spec.series[1].data, SeriesData::Markers(vec![(1.5, 800.0)]));
        assert!(spec.note.as_deref().expect("note").contains("Mathis bound"));
        // A bound far above the data is said, not drawn.
        let mut far = tcp();
        far.mathis = MathisCheck::new(1, 1448, 1e-4, 1, 1_000_000_000, 8e8);
        let spec = tcp_throughput(&far).expect("figure");
        assert!(spec.series.iter().all(|s| s.label != "Mathis bound"));
    }

    #[test]
    fn cpu_sweep_figures_put_nice_and_available_cpu_on_x() {
        let point = |nice: Option<i32>, rate: f64, avail: f64| {
            let mut r = tcp();
            r.received_rate_bps = Some(rate);
            r.cpu_load = nice.map(|n| CpuLoadReport {
                nice: n,
                nice_observed: Some(n),
                threads: 1,
                cpus: 2,
                task_cpu_pct: Some(100.0 - avail),
                available_cpu_pct: Some(avail),
            });
            CpuLoadPoint::of(r)
        };
        let mut s = CpuLoadSweepResult::new(vec![19, 10]);
        s.points = vec![
            point(None, 9.5e8, 100.0),
            point(Some(19), 9e8, 80.0),
            point(Some(10), 6.75e8, 60.0),
        ];
        let f = cpu_rate_vs_nice(&s).expect("figure");
        assert_eq!(f.series[0].data, SeriesData::Line(vec![(19.0, 900.0), (10.0, 675.0)]));
        assert_eq!(f.series[1].data, SeriesData::Line(vec![(10.0, 950.0), (19.0, 950.0)]));
        let f = cpu_rate_vs_available(&s).expect("figure");
        assert_eq!(
            f.series[0].data,
            SeriesData::Line(vec![(60.0, 675.0), (80.0, 900.0), (100.0, 950.0)])
        );
        let f = cpu_available_vs_nice(&s).expect("figure");
        assert_eq!(f.series[0].data, SeriesData::Line(vec![(19.0, 80.0), (10.0, 60.0)]));
    }
}

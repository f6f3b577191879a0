//! Figures as [`ChartSpec`]s built from the result structs, following the seed papers: udpmon's
//! received rate and loss against spacing per packet size (seed 000 Figures 3–4, seed 004
//! Figure 3), inter-arrival histograms of several trials stacked (seed 004 Figure 7), one-way
//! delay against time and the distribution of intervals between losses with an exponential fit
//! (seed 004 Figure 6).

use histogram::{Bucket, HistSummary};
use probe::results::{ProbeResult, SweepResult};
use stream::results::{RecvReport, SendReport};

use crate::chart::{ChartSpec, SeriesData};

/// Bins of a histogram plot.
const BINS: u64 = 80;

/// The HDR buckets (ns, 0.1 % wide) summed into [`BINS`] equal bins over `0..=cut_ns`, as bars
/// in µs; heights are counts, or fractions of all values when `fraction`. Equal bins keep the
/// bar areas comparable; the HDR buckets are too narrow to see on a linear axis.
fn rebin(h: &HistSummary, cut_ns: u64, fraction: bool) -> Vec<(f64, f64, f64)> {
    let w = cut_ns.div_ceil(BINS).max(1);
    let mut counts = vec![0u64; BINS as usize];
    for b in h.buckets.iter().filter(|b: &&Bucket| b.lo <= cut_ns) {
        let mid = b.lo + (b.hi - b.lo) / 2;
        counts[((mid / w).min(BINS - 1)) as usize] += b.count;
    }
    let total = h.count.max(1) as f64;
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let y = if fraction { c as f64 / total } else { c as f64 };
            ((i as u64 * w) as f64 / 1e3, ((i as u64 + 1) * w) as f64 / 1e3, y)
        })
        .collect()
}

/// Where a histogram's axis ends: at three times the 99th percentile, so a few long gaps
/// (scheduler wake-ups) do not squeeze the body of the distribution into one pixel; returns the
/// cut and how many values lie beyond it.
fn hist_cut(h: &HistSummary) -> (u64, u64) {
    let max = h.max.unwrap_or(0);
    let cut = h.p99.map_or(max, |p| p.saturating_mul(3)).min(max).max(1);
    let beyond = h.buckets.iter().filter(|b| b.lo > cut).map(|b| b.count).sum();
    (cut, beyond)
}

fn stats_note(h: &HistSummary, beyond: u64, cut_ns: u64) -> String {
    let us = |v: Option<u64>| v.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e3));
    let mut s = format!(
        "n = {}, mean {} µs, p50 {} µs, p99 {} µs, max {} µs",
        h.count,
        h.mean.map_or("-".into(), |m| format!("{:.2}", m / 1e3)),
        us(h.p50),
        us(h.p99),
        us(h.max)
    );
    if beyond > 0 {
        s.push_str(&format!(
            "; {beyond} values above {:.1} µs not shown",
            cut_ns as f64 / 1e3
        ));
    }
    s
}

fn hist_figure(title: &str, x_label: &str, h: &HistSummary) -> ChartSpec {
    let (cut, beyond) = hist_cut(h);
    let mut spec = ChartSpec::new(title, x_label, "packets");
    let bars = rebin(h, cut, false);
    // Counts span decades when the tail matters (seed 004 Figure 7 uses log counts): log y.
    let counts = bars.iter().map(|b| b.2).filter(|&c| c > 0.0);
    let (lo, hi) = counts.fold((f64::MAX, 0.0f64), |(a, b), c| (a.min(c), b.max(c)));
    spec.y_log = hi >= lo * 100.0;
    spec.push("", SeriesData::Bars(bars));
    spec.note = Some(stats_note(h, beyond, cut));
    spec
}

/// Inter-arrival time (jitter) histogram of one trial.
pub fn inter_arrival(r: &ProbeResult) -> Option<ChartSpec> {
    let rx = r.receiver.as_ref()?;
    (rx.inter_arrival_ns.count > 0).then(|| {
        hist_figure(
            &format!(
                "Inter-arrival times, {} B every {} µs",
                r.params.size,
                r.params.spacing_ns as f64 / 1e3
            ),
            "time between arrivals (µs)",
            &rx.inter_arrival_ns,
        )
    })
}

/// Sender departure-gap histogram of one trial.
pub fn departure_gaps(r: &ProbeResult) -> Option<ChartSpec> {
    let tx = r.sender.as_ref()?;
    (tx.departure_gap_ns.count > 0).then(|| {
        hist_figure(
            &format!(
                "Departure gaps at the sender, {} B every {} µs",
                r.params.size,
                r.params.spacing_ns as f64 / 1e3
            ),
            "time between departures (µs)",
            &tx.departure_gap_ns,
        )
    })
}

/// `evlbi probe host-jitter`: the gaps of the pacer that sent nothing, and the interruptions.
pub fn host_jitter_gaps(r: &probe::host_jitter::HostJitterReport) -> Option<ChartSpec> {
    let g = &r.releases.departure_gap_ns;
    (g.count > 0).then(|| {
        hist_figure(
            &format!(
                "Host timing floor: gaps of a pacer sending nothing, every {} µs",
                r.spacing_ns as f64 / 1e3
            ),
            "time between releases (µs)",
            g,
        )
    })
}

/// `evlbi probe host-jitter`: how long the spinning thread was kept from running.
pub fn host_jitter_interruptions(r: &probe::host_jitter::HostJitterReport) -> Option<ChartSpec> {
    let g = &r.interruptions;
    (g.count > 0).then(|| {
        hist_figure(
            &format!(
                "Interruptions of the spinning thread (> {} µs): {:.0} per second",
                r.interruption_threshold_ns as f64 / 1e3,
                r.interruptions_per_second
            ),
            "interruption (µs)",
            g,
        )
    })
}

/// One-way delay (above the minimum) against arrival time from the per-packet records; without
/// records, the delay histogram.
pub fn one_way_delay(r: &ProbeResult) -> Option<ChartSpec> {
    let d = &r.receiver.as_ref()?.one_way_delay;
    let drift = d.drift_ppm.map_or(String::new(), |p| format!(", slope {p:.2} ppm"));
    if let Some(first) = d.records.first() {
        let raw = |rec: &probe::recv_stats::PacketRecord| rec.recv_ns as i128 - rec.send_ns as i128;
        let min = d.records.iter().map(raw).min().unwrap_or(0);
        let pts = d
            .records
            .iter()
            .map(|rec| {
                let t_ms = rec.recv_ns.saturating_sub(first.recv_ns) as f64 / 1e6;
                (t_ms, (raw(rec) - min) as f64 / 1e3)
            })
            .collect();
        let mut spec = ChartSpec::new(
            "Relative one-way delay (minimum removed)",
            "arrival time since first packet (ms)",
            "delay above minimum (µs)",
        );
        spec.push("", SeriesData::Points(pts));
        spec.note = Some(format!(
            "first {} of {} packets; p50 {} µs, p99 {} µs{drift}",
            d.records.len(),
            d.count,
            d.p50_ns.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e3)),
            d.p99_ns.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e3)),
        ));
        return Some(spec);
    }
    (!d.buckets.is_empty()).then(|| {
        let mut spec = ChartSpec::new(
            "Relative one-way delay (minimum removed)",
            "delay above minimum (µs)",
            "packets",
        );
        spec.push(
            "",
            SeriesData::Bars(
                d.buckets
                    .iter()
                    .map(|b| (b.lo as f64 / 1e3, (b.hi + 1) as f64 / 1e3, b.count as f64))
                    .collect(),
            ),
        );
        spec.note = Some(format!(
            "{} packets, no per-packet records in the result{drift}",
            d.count
        ));
        spec
    })
}

/// Cumulative distribution of intervals between losses with the fitted exponential and the
/// verdict (seed 004 Figure 6).
pub fn loss_intervals(r: &ProbeResult) -> Option<ChartSpec> {
    let fit = r.receiver.as_ref()?.poisson.as_ref()?;
    let mut spec = ChartSpec::new(
        "Intervals between lost packets: empirical and fitted exponential CDF",
        "interval between losses (packets)",
        "fraction of intervals ≤ x",
    );
    let x = |p: &probe::lossfit::CdfPoint| p.interval_packets as f64;
    spec.push(
        format!("measured ({} intervals)", fit.intervals),
        SeriesData::Line(fit.cdf.iter().map(|p| (x(p), p.empirical)).collect()),
    );
    spec.push(
        format!("exponential, mean {:.1} packets", fit.mean_interval_packets),
        SeriesData::Line(fit.cdf.iter().map(|p| (x(p), p.fitted)).collect()),
    );
    spec.x_log = fit.cdf.iter().map(|p| p.interval_packets).max().unwrap_or(0) > 100;
    spec.note = Some(fit.verdict.clone());
    Some(spec)
}

/// Inter-arrival histograms of several trials overlaid as outlines, as fractions of each trial's
/// packets so trials of different lengths compare (seed 004 Figure 7 stacks them).
pub fn inter_arrival_overlay(trials: &[(String, &ProbeResult)]) -> Option<ChartSpec> {
    let hists: Vec<(&String, &HistSummary)> = trials
        .iter()
        .filter_map(|(name, r)| Some((name, &r.receiver.as_ref()?.inter_arrival_ns)))
        .filter(|(_, h)| h.count > 0)
        .collect();
    if hists.len() < 2 {
        return None;
    }
    let cut = hists.iter().map(|(_, h)| hist_cut(h).0).max().unwrap_or(0);
    let mut spec = ChartSpec::new(
        "Inter-arrival times of several trials",
        "time between arrivals (µs)",
        "fraction of packets",
    );
    for (name, h) in hists {
        spec.push(name.clone(), SeriesData::Steps(rebin(h, cut, true)));
    }
    spec.y_log = true;
    Some(spec)
}

/// Received user-data rate against spacing, one curve per packet size.
pub fn sweep_rate(s: &SweepResult) -> Option<ChartSpec> {
    let mut spec = ChartSpec::new(
        "Received user-data rate against packet spacing",
        "spacing between packets (µs)",
        "received user rate (Mbit/s)",
    );
    for &size in &s.sizes {
        let pts = s
            .points
            .iter()
            .filter(|p| p.size == size)
            .filter_map(|p| {
                Some((
                    p.spacing_ns as f64 / 1e3,
                    p.result.receiver.as_ref()?.user_rate_bps? / 1e6,
                ))
            })
            .collect();
        spec.push(format!("{size} B"), SeriesData::Line(pts));
    }
    (!spec.series.is_empty()).then_some(spec)
}

/// Loss fraction against spacing, one curve per size; log y when losses span decades (zero-loss
/// points cannot be drawn there and are said to be left out).
pub fn sweep_loss(s: &SweepResult) -> Option<ChartSpec> {
    let mut spec = ChartSpec::new(
        "Packet loss against packet spacing",
        "spacing between packets (µs)",
        "loss fraction",
    );
    let all: Vec<f64> = s
        .points
        .iter()
        .filter_map(|p| p.result.receiver.as_ref()?.loss_fraction)
        .collect();
    let pos: Vec<f64> = all.iter().copied().filter(|&f| f > 0.0).collect();
    let (lo, hi) = pos.iter().fold((f64::MAX, 0.0f64), |(a, b), &f| (a.min(f), b.max(f)));
    spec.y_log = !pos.is_empty() && hi >= lo * 100.0;
    for &size in &s.sizes {
        let pts = s
            .points
            .iter()
            .filter(|p| p.size == size)
            .filter_map(|p| Some((p.spacing_ns as f64 / 1e3, p.result.receiver.as_ref()?.loss_fraction?)))
            .collect();
        spec.push(format!("{size} B"), SeriesData::Line(pts));
    }
    let zeros = all.len() - pos.len();
    if spec.y_log && zeros > 0 {
        spec.note = Some(format!("{zeros} points without loss are not shown on the log axis"));
    }
    (!spec.series.is_empty()).then_some(spec)
}

/// Per-station S/N factor √(1 − f) at the receiver, with the loss fraction f.
pub fn stream_snr(r: &RecvReport) -> Option<ChartSpec> {
    if r.stations.is_empty() {
        return None;
    }
    let mut spec = ChartSpec::new("S/N factor per station: √(1 − f)", "station", "factor (dimensionless)");
    spec.categories = r.stations.iter().map(|s| s.station.clone()).collect();
    let bars = |f: &dyn Fn(&stream::StationSummary) -> f64| {
        r.stations
            .iter()
            .enumerate()
            .map(|(i, s)| (i as f64 - 0.35, i as f64 + 0.35, f(s)))
            .collect()
    };
    spec.push("S/N factor", SeriesData::Bars(bars(&|s| s.snr_factor)));
    spec.push("loss fraction f", SeriesData::Bars(bars(&|s| s.loss_fraction)));
    spec.note = Some(
        r.stations
            .iter()
            .map(|s| format!("{}: f = {:.4}, factor {:.4}", s.station, s.loss_fraction, s.snr_factor))
            .collect::<Vec<_>>()
            .join("; "),
    );
    Some(spec)
}

/// Frames written per station, valid and filled (lost, written as invalid fill).
pub fn stream_frames(r: &RecvReport) -> Option<ChartSpec> {
    if r.stations.is_empty() {
        return None;
    }
    let mut spec = ChartSpec::new("Frames written per station", "station", "frames");
    spec.categories = r.stations.iter().map(|s| s.station.clone()).collect();
    let bars = |f: &dyn Fn(&stream::StationSummary) -> u64| {
        r.stations
            .iter()
            .enumerate()
            .map(|(i, s)| (i as f64 - 0.35, i as f64 + 0.35, f(s) as f64))
            .collect()
    };
    spec.push("valid", SeriesData::Bars(bars(&|s| s.window.written_valid)));
    spec.push("filled (lost)", SeriesData::Bars(bars(&|s| s.window.filled_lost())));
    spec.y_log = r.stations.iter().any(|s| s.window.filled_lost() > 0);
    let rejected = r.datagrams.rejected();
    spec.note = Some(format!(
        "{} datagrams received, {rejected} rejected{}",
        r.datagrams.datagrams,
        r.first_problem
            .as_ref()
            .map_or(String::new(), |p| format!(" (first: {p})"))
    ));
    Some(spec)
}

/// Paced and achieved data rate per station at the sender.
pub fn stream_send_rates(s: &SendReport) -> Option<ChartSpec> {
    if s.stations.is_empty() {
        return None;
    }
    let mut spec = ChartSpec::new(
        "Sender: paced and achieved rate per station",
        "station",
        "rate (Mbit/s)",
    );
    spec.categories = s.stations.iter().map(|s| s.station.clone()).collect();
    let bars = |f: &dyn Fn(&stream::results::SentStation) -> f64| {
        s.stations
            .iter()
            .enumerate()
            .map(|(i, st)| (i as f64 - 0.35, i as f64 + 0.35, f(st) / 1e6))
            .collect()
    };
    spec.push("paced", SeriesData::Bars(bars(&|st| st.rate_bps.get() as f64)));
    spec.push("achieved", SeriesData::Bars(bars(&|st| st.achieved_rate_bps)));
    Some(spec)
}

/// Transfer rate over time (every 100 ms of the session's data stream): goodput (the
/// acknowledged prefix growing) and the pacing rate the congestion controller chose, seconds
/// from the stream's start.
pub fn transfer_rates(r: &transfer::results::SendReport) -> Option<ChartSpec> {
    let d = r.data.as_ref().filter(|d| d.rate_samples.len() >= 2)?;
    let mut spec = ChartSpec::new("Transfer rate over time", "time (s)", "rate (Mbit/s)");
    let pts = |v: &dyn Fn(&transfer::RateSample) -> f64| -> Vec<(f64, f64)> {
        d.rate_samples.iter().map(|s| (s.t_s, v(s) / 1e6)).collect()
    };
    spec.push("goodput", SeriesData::Line(pts(&|s| s.goodput_bps)));
    spec.push("pacing", SeriesData::Line(pts(&|s| s.pacing_bps)));
    spec.note = Some(format!(
        "{} file(s), {} B moved, {} B retransmitted; cc {}",
        r.files.len(),
        r.transferred_bytes,
        r.retransmitted_bytes,
        d.cc
    ));
    Some(spec)
}

/// `evlbi linkemu`: forwarded rate per second in each direction.
pub fn linkemu_rates(r: &crate::inputs::LinkemuRun) -> Option<ChartSpec> {
    if r.intervals.len() < 2 {
        return None;
    }
    let mut spec = ChartSpec::new("Emulated path: forwarded rate", "time (s)", "rate (Mbit/s)");
    let mbps = |bytes: u64, dt: f64| bytes as f64 * 8.0 / dt.max(1e-9) / 1e6;
    spec.push(
        "A → B",
        SeriesData::Line(
            r.intervals
                .iter()
                .map(|i| (i.t_s, mbps(i.a_to_b.forwarded_bytes, i.dt_s)))
                .collect(),
        ),
    );
    spec.push(
        "B → A",
        SeriesData::Line(
            r.intervals
                .iter()
                .map(|i| (i.t_s, mbps(i.b_to_a.forwarded_bytes, i.dt_s)))
                .collect(),
        ),
    );
    Some(spec)
}

/// `evlbi linkemu`: packets dropped per second, by cause, where any were.
pub fn linkemu_drops(r: &crate::inputs::LinkemuRun) -> Option<ChartSpec> {
    if r.intervals.len() < 2 {
        return None;
    }
    let mut spec = ChartSpec::new("Emulated path: drops per second", "time (s)", "packets/s");
    type Pick = fn(&linkemu::LiveCounters) -> u64;
    let causes: [(&str, Pick); 3] = [
        ("lost (model)", |c| c.dropped_loss),
        ("queue drops", |c| c.dropped_queue),
        ("overflow + write errors", |c| c.overflow + c.write_errors),
    ];
    for (dir, side) in [("A → B", true), ("B → A", false)] {
        for (cause, pick) in causes {
            let pts: Vec<(f64, f64)> = r
                .intervals
                .iter()
                .map(|i| {
                    let c = if side { &i.a_to_b } else { &i.b_to_a };
                    (i.t_s, pick(c) as f64 / i.dt_s.max(1e-9))
                })
                .collect();
            if pts.iter().any(|p| p.1 > 0.0) {
                spec.push(format!("{dir} {cause}"), SeriesData::Line(pts));
            }
        }
    }
    if spec.series.is_empty() {
        return None;
    }
    Some(spec)
}

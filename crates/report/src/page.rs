//! The report: a documented serde struct built from parsed results ([`build`]), with its figures
//! written beside it. The HTML page ([`crate::html`]) and `evlbi report --json` are views of it.

use std::path::{Path, PathBuf};

use probe::results::{ProbeResult, SweepResult};
use probe::tcp_results::{CpuLoadSweepResult, RcvbufSweepResult, TcpTestResult};
use serde::{Deserialize, Serialize};
use stream::results::{RecvReport, SendReport};

use crate::inputs::{Correlation, Input, Kind, LinkemuRun};
use crate::{specs, tcpspecs, write_figure, ChartSpec, PlotError};

/// Version of the report layout; bumped on incompatible changes.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// One headline number.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// What it is, e.g. "loss fraction".
    pub name: String,
    /// The number in `unit` (`None` when not measured, or when only `text` applies).
    pub value: Option<f64>,
    /// Unit of `value`, e.g. "Mbit/s" (empty for plain numbers).
    pub unit: String,
    /// Text in place of a number (a verdict, a reason).
    pub text: Option<String>,
}

impl Metric {
    fn num(name: &str, value: Option<f64>, unit: &str) -> Self {
        Metric {
            name: name.into(),
            value: value.filter(|v| v.is_finite()),
            unit: unit.into(),
            text: None,
        }
    }

    fn text(name: &str, text: impl Into<String>) -> Self {
        Metric {
            name: name.into(),
            value: None,
            unit: String::new(),
            text: Some(text.into()),
        }
    }

    /// As shown in the page: text, or the value with 4 significant digits and its unit.
    pub fn display(&self) -> String {
        match (&self.text, self.value) {
            (Some(t), _) => t.clone(),
            (None, Some(v)) => format!("{} {}", crate::chart::tick(v), self.unit)
                .trim_end()
                .to_string(),
            (None, None) => "–".into(),
        }
    }
}

/// A table of text cells (per station, per sweep point).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Caption.
    pub caption: String,
    /// Column headings with units.
    pub columns: Vec<String>,
    /// Rows, one cell per column.
    pub rows: Vec<Vec<String>>,
}

/// A figure of the report, paths relative to the HTML page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureRef {
    /// Unique id (the file stem).
    pub id: String,
    /// Caption.
    pub title: String,
    /// PNG path relative to the page (absent when no font was available).
    pub png: Option<String>,
    /// SVG path relative to the page.
    pub svg: String,
    /// Number of data series drawn.
    pub series: usize,
}

/// What the report says about one input file (or about all probe trials together).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// Input file, as given on the command line (empty for the comparison of trials).
    pub source: String,
    /// Kind of the input (`None` for the comparison of trials).
    pub kind: Option<Kind>,
    /// Heading.
    pub heading: String,
    /// Headline numbers.
    pub metrics: Vec<Metric>,
    /// Tables.
    pub tables: Vec<Table>,
    /// Figures.
    pub figures: Vec<FigureRef>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// evlbi version that wrote it.
    pub tool_version: String,
    /// Page title.
    pub title: String,
    /// Directory of the figure files, relative to the page.
    pub figures_dir: String,
    /// One section per input, then a comparison when there are several probe trials.
    pub sections: Vec<Section>,
    /// Things the reader should know (e.g. PNG not written for lack of a font).
    pub warnings: Vec<String>,
}

impl Report {
    /// All figures of all sections.
    pub fn figures(&self) -> impl Iterator<Item = &FigureRef> {
        self.sections.iter().flat_map(|s| s.figures.iter())
    }
}

const MBIT: f64 = 1e6;

fn mbit(v: Option<f64>) -> Option<f64> {
    v.map(|b| b / MBIT)
}

fn us(ns: Option<u64>) -> Option<f64> {
    ns.map(|n| n as f64 / 1e3)
}

fn probe_metrics(r: &ProbeResult) -> Vec<Metric> {
    let mut m = vec![
        Metric::num("packet size", Some(f64::from(r.params.size)), "B"),
        Metric::num("spacing", Some(r.params.spacing_ns as f64 / 1e3), "µs"),
        Metric::num("packets asked", Some(r.params.count as f64), ""),
        Metric::num("offered user rate", mbit(r.offered_user_rate_bps), "Mbit/s"),
    ];
    if let Some(tx) = &r.sender {
        m.push(Metric::num("sent", Some(tx.packets_sent as f64), "packets"));
        m.push(Metric::num("sender user rate", mbit(tx.user_rate_bps), "Mbit/s"));
        m.push(Metric::num("late departures", Some(tx.late_packets as f64), "packets"));
    }
    if let Some(rx) = &r.receiver {
        m.extend([
            Metric::num("received (unique)", Some(rx.unique_packets as f64), "packets"),
            Metric::num("lost", Some(rx.lost_packets as f64), "packets"),
            Metric::num("loss fraction", rx.loss_fraction, ""),
            Metric::num("received user rate", mbit(rx.user_rate_bps), "Mbit/s"),
            Metric::num("received wire rate", mbit(rx.wire_rate_bps), "Mbit/s"),
            Metric::num("inter-arrival mean", rx.inter_arrival_ns.mean.map(|v| v / 1e3), "µs"),
            Metric::num("inter-arrival p99", us(rx.inter_arrival_ns.p99), "µs"),
            Metric::num("one-way delay p50 above min", us(rx.one_way_delay.p50_ns), "µs"),
            Metric::num("one-way delay p99 above min", us(rx.one_way_delay.p99_ns), "µs"),
            Metric::num("clock drift", rx.one_way_delay.drift_ppm, "ppm"),
            Metric::num("reordered", Some(rx.reordering.reordered_packets as f64), "packets"),
            Metric::num("duplicates", Some(rx.duplicates as f64), "packets"),
            Metric::num("stray datagrams", Some(rx.strays.total() as f64), ""),
        ]);
        if let Some(fit) = &rx.poisson {
            m.push(Metric::text("loss intervals", fit.verdict.clone()));
        }
    }
    m.extend(r.notes.iter().map(|n| Metric::text("note", n.clone())));
    m
}

fn sweep_table(s: &SweepResult) -> Table {
    let f = |v: Option<f64>, scale: f64| v.map_or("–".into(), |v| crate::chart::tick(v / scale));
    Table {
        caption: "Sweep points".into(),
        columns: [
            "size (B)",
            "spacing (µs)",
            "offered (Mbit/s)",
            "received (Mbit/s)",
            "loss fraction",
        ]
        .map(String::from)
        .to_vec(),
        rows: s
            .points
            .iter()
            .map(|p| {
                let rx = p.result.receiver.as_ref();
                vec![
                    p.size.to_string(),
                    crate::chart::tick(p.spacing_ns as f64 / 1e3),
                    f(p.result.offered_user_rate_bps, MBIT),
                    f(rx.and_then(|r| r.user_rate_bps), MBIT),
                    f(rx.and_then(|r| r.loss_fraction), 1.0),
                ]
            })
            .collect(),
    }
}

fn tcp_parts(r: &TcpTestResult) -> (Vec<Metric>, Vec<Table>) {
    let mut m = vec![
        Metric::num("streams", Some(f64::from(r.params.streams)), ""),
        Metric::text("congestion control", r.cc.clone().unwrap_or_else(|| "?".into())),
        Metric::num("duration asked", Some(r.params.duration_s), "s"),
        Metric::num("bytes written", Some(r.bytes_written as f64), "B"),
        Metric::num("received rate", mbit(r.received_rate_bps), "Mbit/s"),
        Metric::num("sender rate (acknowledged)", mbit(r.sender_rate_bps), "Mbit/s"),
        Metric::num("retransmitted", Some(r.retransmits as f64), "segments"),
    ];
    if let Some(x) = &r.mathis {
        m.push(Metric::num("mean smoothed RTT", Some(x.rtt_s * 1e3), "ms"));
        m.push(Metric::num("retransmit rate p", Some(x.loss), ""));
        m.push(Metric::num("Mathis bound", mbit(x.bound_bps), "Mbit/s"));
        m.push(Metric::num("achieved / Mathis bound", x.achieved_over_bound, ""));
    }
    if let Some(c) = &r.cpu_load {
        m.push(Metric::num("competing task nice level", Some(f64::from(c.nice)), ""));
        m.push(Metric::num("CPU left by the task", c.available_cpu_pct, "%"));
    }
    for (label, h) in [("sender", &r.host.sender), ("receiver", &r.host.receiver)] {
        if let Some(c) = h.as_ref().and_then(|h| h.cpu) {
            m.push(Metric::text(&format!("{label} host CPU"), c.summary()));
        }
    }
    if let Some(e) = &r.error {
        m.push(Metric::text("PARTIAL", e.clone()));
    }
    m.extend(r.notes.iter().map(|n| Metric::text("note", n.clone())));
    let streams = Table {
        caption: "Streams".into(),
        columns: [
            "stream",
            "written (B)",
            "received (B)",
            "retransmitted (segments)",
            "last cwnd (segments)",
            "last srtt (ms)",
            "error",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .streams
            .iter()
            .map(|s| {
                let i = s.last_tcp_info.as_ref();
                vec![
                    s.stream.to_string(),
                    s.bytes_written.to_string(),
                    s.bytes_received.map_or("–".into(), |b| b.to_string()),
                    i.map_or("–".into(), |i| i.total_retrans.to_string()),
                    i.map_or("–".into(), |i| i.snd_cwnd.to_string()),
                    i.map_or("–".into(), |i| format!("{:.3}", f64::from(i.rtt_us) / 1e3)),
                    s.error.clone().unwrap_or_default(),
                ]
            })
            .collect(),
    };
    (m, vec![streams])
}

fn cpu_sweep_parts(s: &CpuLoadSweepResult) -> (Vec<Metric>, Vec<Table>) {
    let mut m = vec![
        Metric::text("nice levels", format!("{:?}", s.nice_levels)),
        Metric::num("points run", Some(s.points.len() as f64), ""),
    ];
    if let Some(e) = &s.error {
        m.push(Metric::text("PARTIAL", e.clone()));
    }
    let f = |v: Option<f64>, scale: f64| v.map_or("–".into(), |v| crate::chart::tick(v / scale));
    let t = Table {
        caption: "Points".into(),
        columns: [
            "nice",
            "throughput (Mbit/s)",
            "CPU left (%)",
            "sender idle (%)",
            "retransmitted",
        ]
        .map(String::from)
        .to_vec(),
        rows: s
            .points
            .iter()
            .map(|p| {
                vec![
                    p.nice.map_or("no load".into(), |n| n.to_string()),
                    f(p.rate_bps, MBIT),
                    f(p.available_cpu_pct, 1.0),
                    f(p.sender_idle_pct, 1.0),
                    p.result.retransmits.to_string(),
                ]
            })
            .collect(),
    };
    (m, vec![t])
}

fn host_jitter_metrics(r: &probe::host_jitter::HostJitterReport) -> Vec<Metric> {
    let us = |v: Option<u64>| v.map(|v| v as f64 / 1e3);
    let g = &r.releases.departure_gap_ns;
    vec![
        Metric::num("spacing", Some(r.spacing_ns as f64 / 1e3), "µs"),
        Metric::num("duration", Some(r.seconds), "s"),
        Metric::num("releases", Some(r.releases.packets_sent as f64), ""),
        Metric::num("gap p50", us(g.p50), "µs"),
        Metric::num("gap p99", us(g.p99), "µs"),
        Metric::num(
            "gap p99 minus spacing (the floor)",
            r.gap_p99_excess_ns.map(|x| x / 1e3),
            "µs",
        ),
        Metric::num("gap max", us(g.max), "µs"),
        Metric::num("interruptions per second", Some(r.interruptions_per_second), ""),
        Metric::num("longest interruption", us(r.interruptions.max), "µs"),
        Metric::num("share of spin time interrupted", Some(r.interrupted_share * 100.0), "%"),
        Metric::num(
            "involuntary context switches",
            Some(r.involuntary_context_switches as f64),
            "",
        ),
        Metric::num("pacer slips", Some(r.pacer_slips as f64), ""),
    ]
}

fn rcvbuf_parts(s: &RcvbufSweepResult) -> (Vec<Metric>, Vec<Table>) {
    let mut m = vec![
        Metric::num("packet size", Some(f64::from(s.size)), "B"),
        Metric::num("spacing", Some(s.spacing_ns as f64 / 1e3), "µs"),
        Metric::num("packets per point", Some(s.count as f64), ""),
    ];
    if let Some(e) = &s.error {
        m.push(Metric::text("PARTIAL", e.clone()));
    }
    let o = |v: Option<u64>| v.map_or("–".into(), |v| v.to_string());
    let t = Table {
        caption: "Points".into(),
        columns: [
            "SO_RCVBUF asked (B)",
            "kernel reports (B)",
            "lost",
            "loss fraction",
            "dropped at the socket",
            "host RcvbufErrors",
            "lost elsewhere",
        ]
        .map(String::from)
        .to_vec(),
        rows: s
            .points
            .iter()
            .map(|p| {
                vec![
                    p.rcvbuf_requested.to_string(),
                    o(p.rcvbuf_granted),
                    o(p.lost_packets),
                    p.loss_fraction.map_or("–".into(), |f| format!("{f:.3e}")),
                    o(p.socket_drops),
                    o(p.rcvbuf_errors),
                    o(p.lost_elsewhere),
                ]
            })
            .collect(),
    };
    (m, vec![t])
}

fn recv_parts(r: &RecvReport) -> (Vec<Metric>, Vec<Table>) {
    let m = vec![
        Metric::num("duration", Some(r.duration_s), "s"),
        Metric::num("received rate", Some(r.received_rate_bps / MBIT), "Mbit/s"),
        Metric::num("datagrams", Some(r.datagrams.datagrams as f64), ""),
        Metric::num("rejected datagrams", Some(r.datagrams.rejected() as f64), ""),
        Metric::num("kernel drops (this socket)", Some(r.socket_drops as f64), ""),
        Metric::num("host-wide RcvbufErrors", Some(r.udp.rcvbuf_errors as f64), ""),
        Metric::num("receive buffer granted", Some(r.rcvbuf.granted_rcv as f64 / 1e6), "MB"),
        Metric::num("CPU (user + system)", Some(r.cpu.total_pct()), "% of a core"),
        Metric::num("NAKs sent", Some(r.naks_sent as f64), ""),
        Metric::num("waited for the file writer", Some(r.writer_stall_s), "s"),
        Metric::text("stopped by", r.stopped_by.clone()),
    ];
    let stations = Table {
        caption: "Received stations".into(),
        columns: [
            "station",
            "frames valid",
            "frames filled",
            "reordered",
            "late",
            "loss fraction f",
            "S/N factor √(1−f)",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .stations
            .iter()
            .map(|s| {
                vec![
                    s.station.clone(),
                    s.window.written_valid.to_string(),
                    s.window.written_filled.to_string(),
                    s.window.reordered.to_string(),
                    s.window.late.to_string(),
                    format!("{:.5}", s.loss_fraction),
                    format!("{:.5}", s.snr_factor),
                ]
            })
            .collect(),
    };
    (m, vec![stations])
}

/// One line for a direction's path model, e.g. "1 Gbit/s, 12.5 MB queue, 50 ms, loss 0.1 %".
fn link_model_text(c: &linkemu::LinkConfig) -> String {
    let mut parts = vec![match c.rate_bps {
        Some(r) => format!("{:.0} Mbit/s, {} B queue", r as f64 / MBIT, c.buffer_bytes),
        None => "no bottleneck".to_string(),
    }];
    parts.push(format!("delay {:.3} ms", c.delay.as_secs_f64() * 1e3));
    if !c.jitter.is_zero() {
        parts.push(format!("jitter {:.3} ms", c.jitter.as_secs_f64() * 1e3));
    }
    parts.push(match c.loss {
        linkemu::LossModel::None => "no random loss".to_string(),
        linkemu::LossModel::Bernoulli { p } => format!("Bernoulli loss {:.4} %", p * 100.0),
        linkemu::LossModel::GilbertElliott(g) => format!(
            "Gilbert–Elliott loss (G→B {:.2e}, B→G {:.2e}, loss in B {})",
            g.p_good_to_bad, g.p_bad_to_good, g.loss_in_bad
        ),
    });
    if c.duplicate > 0.0 {
        parts.push(format!("duplicates {:.4} %", c.duplicate * 100.0));
    }
    parts.join(", ")
}

fn linkemu_parts(r: &LinkemuRun) -> (Vec<Metric>, Vec<Table>) {
    let m = vec![
        Metric::text("mode", r.mode.clone()),
        Metric::num("run length", Some(r.elapsed_s), "s"),
        Metric::num("MTU", Some(f64::from(r.mtu)), "B"),
        Metric::text("A → B model", link_model_text(&r.a_to_b_config)),
        Metric::text("B → A model", link_model_text(&r.b_to_a_config)),
        Metric::text("seed", r.seed.to_string()),
    ];
    let opt = |v: Option<u64>| v.map_or("—".to_string(), |x| x.to_string());
    let rows = [("A → B", &r.a_to_b), ("B → A", &r.b_to_a)]
        .iter()
        .map(|(name, d)| {
            let model = d.model.as_ref();
            let rate = d.forwarded.bytes as f64 * 8.0 / r.elapsed_s.max(1e-9) / MBIT;
            vec![
                name.to_string(),
                d.received.packets.to_string(),
                d.forwarded.packets.to_string(),
                format!("{rate:.1}"),
                opt(model.map(|x| x.dropped_loss.packets)),
                opt(model.map(|x| x.dropped_queue.packets)),
                opt(model.map(|x| x.duplicated.packets)),
                d.overflow.packets.to_string(),
                opt(d.input_tx_dropped),
                opt(model.map(|x| x.max_queue_bytes)),
                model.map_or("—".to_string(), |x| {
                    let q = &x.queue_delay_us;
                    format!("{} / {} / {}", opt(q.p50), opt(q.p99), opt(q.max))
                }),
            ]
        })
        .collect();
    let t = Table {
        caption: "What the emulator did to each direction (packets)".into(),
        columns: [
            "direction",
            "received",
            "forwarded",
            "mean Mbit/s",
            "lost (model)",
            "queue drops",
            "duplicated",
            "overflow",
            "kernel drops (CPU)",
            "max queue (B)",
            "queue wait p50 / p99 / max (µs)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };
    (m, vec![t])
}

fn transfer_parts(r: &transfer::results::SendReport) -> (Vec<Metric>, Vec<Table>) {
    let m = vec![
        Metric::text("receiver", r.server.clone()),
        Metric::text(
            "congestion control",
            format!("{} ({:.1} Mbit/s)", r.cc, r.rate_bps / MBIT),
        ),
        Metric::num("bytes moved", Some(r.transferred_bytes as f64), "B"),
        Metric::num("goodput while data flowed", r.goodput_bps.map(|g| g / MBIT), "Mbit/s"),
        Metric::num(
            "loss seen",
            r.data.as_ref().map(|d| d.loss_seen * 100.0),
            "% of datagrams",
        ),
        Metric::num(
            "min RTT",
            r.data.as_ref().and_then(|d| d.rtt_min_us).map(|us| us as f64 / 1e3),
            "ms",
        ),
        Metric::num("wall time, to the last verdict", Some(r.elapsed_s), "s"),
        Metric::num("retransmitted", Some(r.retransmitted_bytes as f64), "B"),
        Metric::num("CPU (user + system)", r.cpu_total_pct(), "% of a core"),
        Metric::text("all files verified", if r.ok { "yes" } else { "NO" }),
    ];
    let files = Table {
        caption: "Files".into(),
        columns: [
            "path",
            "size (B)",
            "resumed (B)",
            "rounds",
            "offer to verdict (s)",
            "last data to verdict (ms)",
            "fsync (ms)",
            "BLAKE3",
            "verdict",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .files
            .iter()
            .map(|f| {
                vec![
                    f.path.clone(),
                    f.size.to_string(),
                    f.resumed_bytes.to_string(),
                    f.rounds.len().to_string(),
                    format!("{:.3}", f.elapsed_s),
                    f.tail_s.map_or("-".into(), |t| format!("{:.1}", t * 1e3)),
                    f.sync_s.map_or("-".into(), |t| format!("{:.1}", t * 1e3)),
                    f.blake3.as_deref().map_or("-".into(), |h| h[..16].to_string()),
                    match (&f.error, f.verified) {
                        (None, true) => "verified".into(),
                        (e, _) => format!("FAILED: {}", e.as_deref().unwrap_or("not verified")),
                    },
                ]
            })
            .collect(),
    };
    (m, vec![files])
}

fn send_parts(s: &SendReport) -> (Vec<Metric>, Vec<Table>) {
    let mut m = vec![
        Metric::text("destination", s.to.clone()),
        Metric::num("duration", Some(s.duration_s), "s"),
        Metric::num("CPU (user + system)", Some(s.cpu.total_pct()), "% of a core"),
        Metric::num("socket buffer full (retried)", Some(s.send_would_block as f64), "sends"),
        Metric::num("path MTU", s.path_mtu.map(|v| v as f64), "B"),
    ];
    if let Some(a) = &s.arq {
        m.push(Metric::num("retransmitted", Some(a.resent as f64), "datagrams"));
    }
    m.extend(s.warnings.iter().map(|w| Metric::text("warning", w.clone())));
    let stations = Table {
        caption: "Sent stations".into(),
        columns: [
            "station",
            "paced (Mbit/s)",
            "achieved (Mbit/s)",
            "frames sent",
            "injected drops",
            "gap mean (µs)",
            "gap p99 (µs)",
            "lateness p99 (µs)",
            "slips",
        ]
        .map(String::from)
        .to_vec(),
        rows: s
            .stations
            .iter()
            .map(|st| {
                vec![
                    st.station.clone(),
                    format!("{:.1}", st.rate_bps.get() as f64 / MBIT),
                    format!("{:.1}", st.achieved_rate_bps / MBIT),
                    st.frames_sent.to_string(),
                    st.injected_drops.to_string(),
                    two_decimals(st.departure_gap_ns.mean.map(|ns| ns / 1e3)),
                    two_decimals(us(st.departure_gap_ns.p99)),
                    two_decimals(us(st.lateness_ns.p99)),
                    st.slips.to_string(),
                ]
            })
            .collect(),
    };
    (m, vec![stations])
}

fn correlation_metrics(c: &Correlation, recv: Option<&RecvReport>) -> Vec<Metric> {
    let mut m = vec![
        Metric::num("fringe S/N, files as sent", c.sent_snr, ""),
        Metric::num("fringe S/N, files as received", c.received_snr, ""),
    ];
    if let (Some(a), Some(b)) = (c.sent_snr, c.received_snr) {
        m.push(Metric::num("S/N ratio received / sent", Some(b / a), ""));
    }
    // Expected ratio for a baseline: √((1 − f1)(1 − f2)), the product of the station factors.
    if let Some(r) = recv.filter(|r| r.stations.len() == 2) {
        let e = r.stations.iter().map(|s| s.snr_factor).product::<f64>();
        m.push(Metric::num("expected ratio √((1−f1)(1−f2))", Some(e), ""));
    }
    m.push(Metric::num(
        "delay found (received)",
        c.received_delay_s.map(|d| d * 1e6),
        "µs",
    ));
    m
}

/// Writes figures into a directory and remembers their paths relative to the page.
struct FigureWriter<'a> {
    dir: &'a Path,
    rel: &'a str,
}

impl FigureWriter<'_> {
    fn put(&self, out: &mut Vec<FigureRef>, spec: Option<ChartSpec>, id: String) -> Result<(), PlotError> {
        let Some(spec) = spec else { return Ok(()) };
        let f = write_figure(&spec, self.dir, &id)?;
        let rel = |p: &PathBuf| {
            format!(
                "{}/{}",
                self.rel,
                p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
            )
        };
        out.push(FigureRef {
            id,
            title: f.title,
            png: f.png.as_ref().map(rel),
            svg: rel(&f.svg),
            series: f.series,
        });
        Ok(())
    }
}

/// The metrics, tables and figures of input `n` into its section `s`; a demo result adds its
/// stream send and receive as sections of their own in `extra`.
fn fill_section(
    w: &FigureWriter<'_>,
    n: usize,
    source: &str,
    input: &Input,
    s: &mut Section,
    extra: &mut Vec<Section>,
) -> Result<(), PlotError> {
    let figs = &mut s.figures;
    match input {
        Input::Probe(r) => {
            s.metrics = probe_metrics(r);
            w.put(figs, specs::inter_arrival(r), format!("{n}-inter-arrival"))?;
            w.put(figs, specs::departure_gaps(r), format!("{n}-departure-gaps"))?;
            w.put(figs, specs::one_way_delay(r), format!("{n}-one-way-delay"))?;
            w.put(figs, specs::loss_intervals(r), format!("{n}-loss-intervals"))?;
        }
        Input::Sweep(sw) => {
            s.metrics = vec![
                Metric::text("sizes", format!("{:?} B", sw.sizes)),
                Metric::num("points", Some(sw.points.len() as f64), ""),
            ];
            s.tables.push(sweep_table(sw));
            w.put(figs, specs::sweep_rate(sw), format!("{n}-sweep-rate"))?;
            w.put(figs, specs::sweep_loss(sw), format!("{n}-sweep-loss"))?;
        }
        Input::StreamSend(r) => {
            (s.metrics, s.tables) = send_parts(r);
            w.put(figs, specs::stream_send_rates(r), format!("{n}-send-rates"))?;
        }
        Input::StreamRecv(r) => {
            (s.metrics, s.tables) = recv_parts(r);
            w.put(figs, specs::stream_snr(r), format!("{n}-snr-factor"))?;
            w.put(figs, specs::stream_frames(r), format!("{n}-frames"))?;
        }
        Input::Linkemu(r) => {
            (s.metrics, s.tables) = linkemu_parts(r);
            w.put(figs, specs::linkemu_rates(r), format!("{n}-linkemu-rates"))?;
            w.put(figs, specs::linkemu_drops(r), format!("{n}-linkemu-drops"))?;
        }
        Input::Tcp(r) => {
            (s.metrics, s.tables) = tcp_parts(r);
            w.put(figs, tcpspecs::tcp_throughput(r), format!("{n}-tcp-throughput"))?;
            w.put(figs, tcpspecs::tcp_cwnd(r), format!("{n}-tcp-cwnd"))?;
            w.put(figs, tcpspecs::tcp_rtt(r), format!("{n}-tcp-rtt"))?;
        }
        Input::CpuLoadSweep(sw) => {
            (s.metrics, s.tables) = cpu_sweep_parts(sw);
            w.put(figs, tcpspecs::cpu_rate_vs_nice(sw), format!("{n}-cpu-rate-vs-nice"))?;
            w.put(
                figs,
                tcpspecs::cpu_available_vs_nice(sw),
                format!("{n}-cpu-available-vs-nice"),
            )?;
            w.put(
                figs,
                tcpspecs::cpu_rate_vs_available(sw),
                format!("{n}-cpu-rate-vs-available"),
            )?;
        }
        Input::HostJitter(r) => {
            s.metrics = host_jitter_metrics(r);
            w.put(figs, specs::host_jitter_gaps(r), format!("{n}-host-jitter-gaps"))?;
            w.put(
                figs,
                specs::host_jitter_interruptions(r),
                format!("{n}-host-jitter-interruptions"),
            )?;
        }
        Input::RcvbufSweep(sw) => {
            (s.metrics, s.tables) = rcvbuf_parts(sw);
            w.put(figs, tcpspecs::rcvbuf_loss(sw), format!("{n}-rcvbuf-loss"))?;
        }
        Input::TransferSend(r) => {
            (s.metrics, s.tables) = transfer_parts(r);
            w.put(figs, specs::transfer_rates(r), format!("{n}-transfer-rate"))?;
        }
        Input::Demo(d) => {
            // One section per step of the demo, so equal names (duration, CPU) stay apart.
            s.heading = format!("demo: correlation — {source}");
            if let Some(c) = &d.correlate {
                s.metrics = correlation_metrics(c, d.recv.as_ref());
            }
            if let Some(p) = &d.path {
                s.metrics.insert(0, Metric::text("stream path", p.clone()));
            }
            if let Some(r) = &d.send {
                let mut t = Section {
                    heading: "demo: stream send".into(),
                    kind: Some(Kind::StreamSend),
                    ..s.clone()
                };
                (t.metrics, t.tables) = send_parts(r);
                w.put(&mut t.figures, specs::stream_send_rates(r), format!("{n}-send-rates"))?;
                extra.push(t);
            }
            if let Some(r) = &d.recv {
                let mut t = Section {
                    heading: "demo: stream recv".into(),
                    kind: Some(Kind::StreamRecv),
                    ..s.clone()
                };
                (t.metrics, t.tables) = recv_parts(r);
                w.put(&mut t.figures, specs::stream_snr(r), format!("{n}-snr-factor"))?;
                w.put(&mut t.figures, specs::stream_frames(r), format!("{n}-frames"))?;
                extra.push(t);
            }
        }
    }
    Ok(())
}

/// Build the report for `inputs` (file name as given, parsed result) whose page will be `html`:
/// figures go to `<html stem>_files/` beside it.
pub fn build(inputs: &[(String, Input)], html: &Path) -> Result<Report, PlotError> {
    let stem = html
        .file_stem()
        .map_or("report".into(), |s| s.to_string_lossy().into_owned());
    let rel = format!("{stem}_files");
    let dir = html.parent().unwrap_or(Path::new(".")).join(&rel);
    let w = FigureWriter { dir: &dir, rel: &rel };
    let mut sections = Vec::new();
    let mut trials: Vec<(String, &ProbeResult)> = Vec::new();
    for (i, (source, input)) in inputs.iter().enumerate() {
        let n = i + 1;
        let mut s = Section {
            source: source.clone(),
            kind: Some(input.kind()),
            heading: format!("{} — {source}", input.kind().describe()),
            metrics: Vec::new(),
            tables: Vec::new(),
            figures: Vec::new(),
        };
        let mut extra = Vec::new();
        fill_section(&w, n, source, input, &mut s, &mut extra)?;
        if let Input::Probe(r) = input {
            trials.push((
                format!("{n}: {} B / {} µs", r.params.size, r.params.spacing_ns as f64 / 1e3),
                r,
            ));
        }
        sections.push(s);
        sections.append(&mut extra);
    }
    if trials.len() >= 2 {
        let mut s = Section {
            source: String::new(),
            kind: None,
            heading: "Probe trials compared".into(),
            metrics: Vec::new(),
            tables: Vec::new(),
            figures: Vec::new(),
        };
        w.put(
            &mut s.figures,
            specs::inter_arrival_overlay(&trials),
            "compare-inter-arrival".into(),
        )?;
        sections.push(s);
    }
    // Numbered in page order: an input of several sections (the demo's) takes several numbers.
    for (i, s) in sections.iter_mut().enumerate() {
        s.heading = format!("{}. {}", i + 1, s.heading);
    }
    let mut warnings = Vec::new();
    if !crate::font_loaded() {
        warnings.push(format!(
            "no font loaded (install fonts-dejavu-core: {}): figures written as SVG only",
            crate::DEFAULT_FONT
        ));
    }
    Ok(Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        title: "evlbi report".into(),
        figures_dir: rel,
        sections,
        warnings,
    })
}

/// A table cell with two decimals ("—" when not measured).
fn two_decimals(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2}"))
}

//! Figures drawn from results built by the probe's own statistics over synthetic trials: files
//! written, valid PNG and SVG, the right series; the page built from them references them.

use std::path::Path;

use probe::results::{ProbeResult, SweepResult, TestParams};
use probe::wire::Repr;
use probe::{RecvConfig, RecvStats, SendConfig, SendStats};
use report::chart::{self, SeriesData};
use report::inputs::Input;
use report::{page, specs};

/// A trial of `count` packets of `size` bytes every `spacing_ns`, arrivals jittered by a fixed
/// pattern, losing the packets for which `lost(seq)` holds.
fn trial(size: u32, spacing_ns: u64, count: u64, lost: impl Fn(u64) -> bool) -> ProbeResult {
    let params = TestParams {
        test_id: 9,
        size,
        count,
        spacing_ns,
    };
    let mut cfg = RecvConfig::new(9);
    cfg.size = Some(size as usize);
    cfg.count = Some(count);
    cfg.spacing_ns = Some(spacing_ns);
    let mut rx = RecvStats::new(cfg);
    let mut tx = SendStats::new(SendConfig::new(spacing_ns));
    let mut now = 0;
    for seq in 0..count {
        let due = 1_000_000 + seq * spacing_ns;
        let sent = due + (seq * 7919) % 900;
        tx.on_sent(due, sent, size as usize);
        let repr = Repr {
            flags: 0,
            test_id: 9,
            seq,
            send_ns: sent,
            size: size as usize,
        };
        now = sent + 50_000 + (seq * 104_729) % 3_000;
        if !lost(seq) {
            rx.on_datagram(now, &repr.to_vec().expect("datagram"), true);
        }
    }
    ProbeResult::new(params, Some(tx.report()), Some(rx.finish(Some(count), now + 1_000)))
}

/// Every 13th packet and a burst of five lost.
fn lossy(seq: u64) -> bool {
    seq % 13 == 5 || (400..405).contains(&seq)
}

fn font() -> bool {
    report::load_font(Path::new(report::DEFAULT_FONT), |p| std::fs::read(p)).is_ok()
}

fn check_files(f: &report::Figure, png_expected: bool) {
    let svg = std::fs::read_to_string(&f.svg).expect("svg written");
    assert!(
        svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{}",
        f.svg.display()
    );
    assert!(
        svg.contains(&f.title.replace('&', "&amp;")[..10]),
        "title text in the SVG"
    );
    match &f.png {
        Some(p) => {
            let b = std::fs::read(p).expect("png written");
            assert!(b.len() > 1000 && b.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", p.display());
        }
        None => assert!(!png_expected, "PNG missing with a font loaded"),
    }
}

#[test]
fn trial_figures_have_their_series_and_files() {
    let has_font = font();
    let r = trial(1000, 10_000, 3000, lossy);
    let rx = r.receiver.as_ref().expect("receiver");
    assert_eq!(rx.lost_packets, (0..3000).filter(|&s| lossy(s)).count() as u64);
    let dir = tempfile::tempdir().expect("tmp");
    let cases = [
        ("ia", specs::inter_arrival(&r), 1),
        ("gaps", specs::departure_gaps(&r), 1),
        ("owd", specs::one_way_delay(&r), 1),
        ("loss", specs::loss_intervals(&r), 2),
    ];
    for (id, spec, series) in cases {
        let spec = spec.unwrap_or_else(|| panic!("{id}: no figure"));
        assert_eq!(spec.series.len(), series, "{id}");
        assert!(!spec.x_label.is_empty() && spec.x_label.contains('('), "{id}: x unit");
        let f = report::write_figure(&spec, dir.path(), id).expect("drawn");
        assert_eq!(f.series, series);
        check_files(&f, has_font);
    }
    let loss = specs::loss_intervals(&r).expect("fit");
    assert_eq!(loss.note.as_deref(), rx.poisson.as_ref().map(|p| p.verdict.as_str()));
    // One point per delay record.
    let owd = specs::one_way_delay(&r).expect("delay");
    assert_eq!(owd.series[0].data.len(), rx.one_way_delay.records.len());
}

#[test]
fn a_trial_without_loss_has_no_loss_figure() {
    let r = trial(200, 5_000, 500, |_| false);
    assert!(specs::loss_intervals(&r).is_none());
    assert!(specs::inter_arrival(&r).is_some());
}

#[test]
fn sweep_has_one_curve_per_size() {
    let has_font = font();
    let mut s = SweepResult::new(vec![1000, 4000], vec![5_000, 10_000, 20_000]);
    for (size, spacing) in s.grid().collect::<Vec<_>>() {
        // Fewer losses at wider spacing, none at the widest.
        let every = if spacing == 5_000 { 4 } else { 500 };
        s.push(trial(size, spacing, 1000, |q| spacing < 20_000 && q % every == 1));
    }
    let dir = tempfile::tempdir().expect("tmp");
    for (id, spec) in [("rate", specs::sweep_rate(&s)), ("loss", specs::sweep_loss(&s))] {
        let spec = spec.expect("figure");
        assert_eq!(spec.series.len(), 2, "{id}: one curve per size");
        assert_eq!(spec.series[0].label, "1000 B");
        assert!(
            spec.series.iter().all(|c| c.data.len() == 3),
            "{id}: one point per spacing"
        );
        check_files(&report::write_figure(&spec, dir.path(), id).expect("drawn"), has_font);
    }
    let rate = specs::sweep_rate(&s).expect("rate");
    if let SeriesData::Line(pts) = &rate.series[1].data {
        let expect = s.points[3]
            .result
            .receiver
            .as_ref()
            .and_then(|r| r.user_rate_bps)
            .expect("rate")
            / 1e6;
        assert_eq!(pts[0], (5.0, expect));
    } else {
        panic!("rate curve is a line");
    }
    let loss = specs::sweep_loss(&s).expect("loss");
    assert!(loss.y_log, "losses span decades");
    assert!(loss.note.expect("note").contains("2 points without loss"));
}

#[test]
fn several_trials_overlay_and_svg_needs_no_font() {
    let a = trial(1000, 10_000, 2000, |_| false);
    let b = trial(1000, 20_000, 2000, lossy);
    let spec = specs::inter_arrival_overlay(&[("a".into(), &a), ("b".into(), &b)]).expect("overlay");
    assert_eq!(spec.series.len(), 2);
    assert!(
        specs::inter_arrival_overlay(&[("a".into(), &a)]).is_none(),
        "one trial: no comparison"
    );
    // The SVG-only path estimates text sizes itself, with or without a font loaded.
    let dir = tempfile::tempdir().expect("tmp");
    let w = chart::write(&spec, dir.path(), "overlay", false).expect("svg");
    assert!(w.png.is_none());
    let svg = std::fs::read_to_string(&w.svg).expect("svg");
    let texts: Vec<&str> = svg.lines().map(str::trim).collect();
    assert!(texts.contains(&"a") && texts.contains(&"b"), "legend entries");
}

#[test]
fn page_references_every_figure() {
    let has_font = font();
    let dir = tempfile::tempdir().expect("tmp");
    let inputs = vec![
        (
            "a.json".to_string(),
            Input::Probe(Box::new(trial(1000, 10_000, 2000, lossy))),
        ),
        (
            "b.json".to_string(),
            Input::Probe(Box::new(trial(1000, 20_000, 2000, |_| false))),
        ),
    ];
    let html = dir.path().join("rep.html");
    let report = page::build(&inputs, &html).expect("report");
    assert_eq!(report.sections.len(), 3, "two trials and their comparison");
    assert_eq!(report.figures_dir, "rep_files");
    let text = report::html::render(&report, dir.path()).expect("page");
    let figs: Vec<_> = report.figures().collect();
    assert_eq!(figs.len(), 4 + 3 + 1);
    for f in figs {
        assert!(text.contains(&format!("href=\"{}\"", f.svg)));
        assert!(dir.path().join(&f.svg).exists());
        match &f.png {
            Some(p) => assert!(text.contains(&format!("src=\"{p}\"")) && dir.path().join(p).exists()),
            None => assert!(!has_font),
        }
    }
    assert!(text.contains("figuresOk") && text.contains("figuresTotal"));
    let json = serde_json::to_string(&report).expect("json");
    let back: page::Report = serde_json::from_str(&json).expect("round trip");
    assert!(back.figures().eq(report.figures()));
}

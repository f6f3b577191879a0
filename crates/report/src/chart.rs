//! One generic chart: a [`ChartSpec`] (title, axes with units, series) drawn by plotters on a PNG
//! bitmap and an SVG. Every figure of this crate is built as a spec first, so tests can check
//! the data (series, points) without decoding images, and both formats show the same thing.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

use crate::error::PlotError;

/// Pixel size of every figure.
pub const WIDTH: u32 = 900;
/// Pixel height of every figure.
pub const HEIGHT: u32 = 520;

/// How a series is drawn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SeriesData {
    /// A line through `(x, y)` points, with markers.
    Line(Vec<(f64, f64)>),
    /// Markers only (many points, e.g. per-packet delays).
    Points(Vec<(f64, f64)>),
    /// Large markers at a few points to be seen (events, e.g. intervals with retransmissions).
    Markers(Vec<(f64, f64)>),
    /// Bars `(x_lo, x_hi, height)` from the axis floor (histograms, categories).
    Bars(Vec<(f64, f64, f64)>),
    /// A histogram outline `(x_lo, x_hi, height)`: steps, so several can be overlaid.
    Steps(Vec<(f64, f64, f64)>),
}

impl SeriesData {
    /// Number of data points or bars.
    pub fn len(&self) -> usize {
        match self {
            SeriesData::Line(p) | SeriesData::Points(p) | SeriesData::Markers(p) => p.len(),
            SeriesData::Bars(b) | SeriesData::Steps(b) => b.len(),
        }
    }

    /// No points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(x, y)` extremes as `(x_min, x_max, y_min, y_max)`, ignoring non-finite values.
    fn bounds(&self) -> Option<(f64, f64, f64, f64)> {
        let pts: Vec<(f64, f64)> = match self {
            SeriesData::Line(p) | SeriesData::Points(p) | SeriesData::Markers(p) => p.clone(),
            SeriesData::Bars(b) | SeriesData::Steps(b) => b.iter().flat_map(|&(a, c, h)| [(a, h), (c, h)]).collect(),
        };
        let mut it = pts.into_iter().filter(|(x, y)| x.is_finite() && y.is_finite());
        let (x, y) = it.next()?;
        Some(it.fold((x, x, y, y), |(a, b, c, d), (x, y)| {
            (a.min(x), b.max(x), c.min(y), d.max(y))
        }))
    }
}

/// One labelled series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend text (empty: no legend entry).
    pub label: String,
    /// The data.
    pub data: SeriesData,
}

/// Everything needed to draw one figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChartSpec {
    /// Caption above the plot.
    pub title: String,
    /// X axis description with unit, e.g. "spacing (µs)".
    pub x_label: String,
    /// Y axis description with unit.
    pub y_label: String,
    /// X axis logarithmic (data must be > 0; other points are dropped).
    pub x_log: bool,
    /// Y axis logarithmic (data must be > 0; other points are dropped).
    pub y_log: bool,
    /// Category names for x = 0, 1, 2, … (bar charts); replaces numeric x labels.
    pub categories: Vec<String>,
    /// The series, drawn in order.
    pub series: Vec<Series>,
    /// A line of text under the plot (a verdict, what was left out).
    pub note: Option<String>,
}

impl ChartSpec {
    /// An empty spec with a title and axis descriptions.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        ChartSpec {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log: false,
            categories: Vec::new(),
            series: Vec::new(),
            note: None,
        }
    }

    /// Add a series; empty ones are skipped (nothing to draw, nothing in the legend).
    pub fn push(&mut self, label: impl Into<String>, data: SeriesData) {
        if !data.is_empty() {
            self.series.push(Series {
                label: label.into(),
                data,
            });
        }
    }
}

/// Colours of successive series: distinguishable, and dark enough on white.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// Axis transform: log axes are drawn as linear axes of log10(value), labelled with the value.
fn tx(v: f64, log: bool) -> Option<f64> {
    match (log, v.is_finite()) {
        (_, false) => None,
        (true, _) if v <= 0.0 => None,
        (true, _) => Some(v.log10()),
        (false, _) => Some(v),
    }
}

/// A tick label: few significant digits, exponent form only for very large or small values.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A tick label on a log axis at exponent `e`: the value to two significant digits.
fn tick_log(e: f64) -> String {
    let v = 10f64.powf(e);
    let digits = (1 - e.floor() as i32).max(0) as usize;
    if !(1e-3..1e6).contains(&v) {
        format!("{v:.1e}").replace(".0e", "e")
    } else {
        let s = format!("{:.*}", digits, v);
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            &s
        };
        s.to_string()
    }
}

/// The spec's data transformed to the drawing axes, with the drawing ranges.
struct Prepared {
    series: Vec<Series>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    y_floor: f64,
}

fn prepare(spec: &ChartSpec) -> Result<Prepared, PlotError> {
    let (xl, yl) = (spec.x_log, spec.y_log);
    let pt = |&(x, y): &(f64, f64)| Some((tx(x, xl)?, tx(y, yl)?));
    let bar = |&(a, b, h): &(f64, f64, f64)| Some((tx(a, xl)?, tx(b, xl)?, tx(h, yl)?));
    let series: Vec<Series> = spec
        .series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            data: match &s.data {
                SeriesData::Line(p) => SeriesData::Line(p.iter().filter_map(pt).collect()),
                SeriesData::Points(p) => SeriesData::Points(p.iter().filter_map(pt).collect()),
                SeriesData::Markers(p) => SeriesData::Markers(p.iter().filter_map(pt).collect()),
                SeriesData::Bars(b) => SeriesData::Bars(b.iter().filter_map(bar).collect()),
                SeriesData::Steps(b) => SeriesData::Steps(b.iter().filter_map(bar).collect()),
            },
        })
        .filter(|s| !s.data.is_empty())
        .collect();
    let (x0, x1, mut y0, mut y1) = series
        .iter()
        .filter_map(|s| s.data.bounds())
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1), a.2.min(b.2), a.3.max(b.3)))
        .ok_or_else(|| PlotError::NoData(spec.title.clone()))?;
    let has_bars = series
        .iter()
        .any(|s| matches!(s.data, SeriesData::Bars(_) | SeriesData::Steps(_)));
    // Linear axes of counts and rates start at zero so heights compare; log axes one decade down.
    if !yl && y0 > 0.0 {
        y0 = 0.0;
    }
    if yl && has_bars {
        y0 = y0.floor() - 0.5;
    }
    let y_floor = if yl { y0 } else { 0.0f64.max(y0) };
    let pad = |lo: f64, hi: f64| {
        let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
        (lo - span * 0.03, hi + span * 0.05)
    };
    let (mut x0, mut x1) = pad(x0, x1);
    if !spec.categories.is_empty() {
        (x0, x1) = (-0.6, spec.categories.len() as f64 - 0.4);
    }
    // Room above for the legend; below only on log axes of lines, whose floor is no zero line.
    let below = if yl && !has_bars { 0.05 } else { 0.0 };
    (y0, y1) = if y1 > y0 {
        (y0 - (y1 - y0) * below, y1 + (y1 - y0) * 0.08)
    } else {
        pad(y0, y1)
    };
    Ok(Prepared {
        series,
        x: x0..x1,
        y: y0..y1,
        y_floor,
    })
}

fn derr<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Draw `spec` on a drawing area of any backend.
fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &ChartSpec) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let p = prepare(spec)?;
    root.fill(&WHITE).map_err(derr)?;
    let (plot_area, note_area) = match &spec.note {
        Some(_) => {
            let (a, b) = root.split_vertically(HEIGHT - 34);
            (a, Some(b))
        }
        None => (root.clone(), None),
    };
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(&spec.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(p.x.clone(), p.y.clone())
        .map_err(derr)?;
    let (xl, yl) = (spec.x_log, spec.y_log);
    let cats = &spec.categories;
    let x_fmt = |v: &f64| {
        if !cats.is_empty() {
            let i = v.round();
            return if (v - i).abs() < 1e-6 && i >= 0.0 {
                cats.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            };
        }
        if xl {
            tick_log(*v)
        } else {
            tick(*v)
        }
    };
    let y_fmt = |v: &f64| if yl { tick_log(*v) } else { tick(*v) };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(spec.x_label.as_str())
        .y_desc(spec.y_label.as_str())
        .axis_desc_style(("sans-serif", 17))
        .label_style(("sans-serif", 15))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(WHITE.mix(0.0));
    if !cats.is_empty() {
        // One label per category: with the range -0.6..n-0.4, n+1 ticks land on the integers.
        mesh.x_labels(cats.len() + 1).disable_x_mesh();
    }
    mesh.draw().map_err(derr)?;

    let n_bar_series = p
        .series
        .iter()
        .filter(|s| matches!(s.data, SeriesData::Bars(_)))
        .count();
    let mut bar_index = 0usize;
    for (i, s) in p.series.iter().enumerate() {
        let c = colour(i);
        match &s.data {
            SeriesData::Line(pts) => {
                // Markers only where they can be told apart.
                if pts.len() <= 60 {
                    chart
                        .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
                        .map_err(derr)?;
                }
                chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            }
            SeriesData::Points(pts) => chart.draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 1, c.filled()))),
            SeriesData::Markers(pts) => {
                chart.draw_series(pts.iter().map(|&(x, y)| TriangleMarker::new((x, y), 7, c.filled())))
            }
            SeriesData::Bars(bars) => {
                // Several bar series side by side within each category slot.
                let (k, n) = (bar_index as f64, n_bar_series.max(1) as f64);
                bar_index += 1;
                let floor = p.y_floor;
                chart.draw_series(bars.iter().map(move |&(a, b, h)| {
                    let w = (b - a) / n;
                    Rectangle::new([(a + k * w, floor), (a + (k + 1.0) * w, h)], c.mix(0.75).filled())
                }))
            }
            SeriesData::Steps(bars) => {
                // One outline: down to the floor only where bins are missing (zero on a log axis).
                let mut path = Vec::with_capacity(bars.len() * 2 + 4);
                let mut prev: Option<f64> = None;
                for &(a, b, h) in bars {
                    if prev != Some(a) {
                        path.extend(prev.map(|pb| (pb, p.y_floor)));
                        path.push((a, p.y_floor));
                    }
                    path.extend([(a, h), (b, h)]);
                    prev = Some(b);
                }
                path.extend(prev.map(|pb| (pb, p.y_floor)));
                chart.draw_series(LineSeries::new(path, c.stroke_width(2)))
            }
        }
        .map_err(derr)?;
    }
    legend(&plot_area, &p.series)?;
    if let (Some(area), Some(note)) = (note_area, &spec.note) {
        area.draw_text(note, &("sans-serif", 15).into_font().color(&BLACK), (16, 6))
            .map_err(derr)?;
    }
    root.present().map_err(derr)
}

/// The legend in the upper right corner of `area`, drawn from elements rather than plotters'
/// series labels, whose sizing needs a loaded font (the SVG-only mode has none); text width is
/// estimated at 0.6 em per character, DejaVu Sans' average.
fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, series: &[Series]) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    const FONT_PX: u32 = 15;
    const ROW: i32 = 21;
    let entries: Vec<(usize, &str)> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.label.is_empty())
        .map(|(i, s)| (i, s.label.as_str()))
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    let chars = entries.iter().map(|(_, l)| l.chars().count()).max().unwrap_or(0) as i32;
    let w = 44 + chars * (FONT_PX as i32 * 6 / 10);
    let h = 10 + ROW * entries.len() as i32;
    let right = area.dim_in_pixel().0 as i32 - 22;
    let (x0, y0) = (right - w, 50);
    area.draw(&Rectangle::new([(x0, y0), (right, y0 + h)], WHITE.mix(0.9).filled()))
        .map_err(derr)?;
    area.draw(&Rectangle::new([(x0, y0), (right, y0 + h)], BLACK.stroke_width(1)))
        .map_err(derr)?;
    for (row, (i, label)) in entries.into_iter().enumerate() {
        let y = y0 + 5 + ROW * row as i32 + ROW / 2;
        area.draw(&PathElement::new(
            vec![(x0 + 8, y), (x0 + 32, y)],
            colour(i).stroke_width(3),
        ))
        .map_err(derr)?;
        let style = ("sans-serif", FONT_PX)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(label.to_string(), (x0 + 38, y), style))
            .map_err(derr)?;
    }
    Ok(())
}

/// Files written for one figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Written {
    /// The PNG, if a font was available to render its text.
    pub png: Option<PathBuf>,
    /// The SVG.
    pub svg: PathBuf,
}

/// Write `spec` as `<dir>/<stem>.svg` and, when `png`, `<dir>/<stem>.png`.
pub fn write(spec: &ChartSpec, dir: &Path, stem: &str, png: bool) -> Result<Written, PlotError> {
    let svg = dir.join(format!("{stem}.svg"));
    if png {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, spec)?;
    } else {
        let root = crate::svgtext::FontlessSvg(SVGBackend::new(&svg, (WIDTH, HEIGHT))).into_drawing_area();
        draw(&root, spec)?;
    }
    let png = if png {
        let path = dir.join(format!("{stem}.png"));
        {
            let root = BitMapBackend::new(&path, (WIDTH, HEIGHT)).into_drawing_area();
            draw(&root, spec)?;
        }
        Some(path)
    } else {
        None
    };
    Ok(Written { png, svg })
}

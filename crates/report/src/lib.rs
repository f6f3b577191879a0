//! Figures of evlbi results, drawn with plotters as PNG and SVG.
//!
//! Each figure is first a [`chart::ChartSpec`] built from a result struct ([`specs`]), then drawn
//! by one generic renderer ([`chart::write`]). PNG text needs a TrueType font, loaded at run time
//! (Debian `fonts-dejavu-core`, see [`load_font`]); without one only SVG is written, whose text
//! the viewer renders. [`page`] turns a set of results into a documented report struct and an
//! HTML page that is a view of it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub mod chart;
mod error;
pub mod export;
pub mod html;
pub mod inputs;
pub mod page;
pub mod specs;
mod svgtext;
pub mod tcpspecs;

pub use chart::{ChartSpec, Series, SeriesData};
pub use error::{FontError, PlotError};

/// Where Debian's `fonts-dejavu-core` puts the font used for PNG text.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

static FONT: OnceLock<Result<PathBuf, FontError>> = OnceLock::new();

/// Load the TrueType font at `path` for PNG text, once per process (plotters keeps fonts in a
/// global registry). Later calls return the first call's outcome.
pub fn load_font(path: &Path) -> Result<(), PlotError> {
    let outcome = FONT.get_or_init(|| {
        let bytes = std::fs::read(path).map_err(|e| FontError::Read(std::sync::Arc::new(e)))?;
        // plotters needs 'static font data; one font per process is a bounded, intended leak.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
            .map_err(|_| FontError::NotAFont)?;
        Ok(path.to_path_buf())
    });
    match outcome {
        Ok(_) => Ok(()),
        Err(e) => Err(PlotError::Font(path.to_path_buf(), e.clone())),
    }
}

/// A font was loaded: PNG figures can be drawn.
pub fn font_loaded() -> bool {
    matches!(FONT.get(), Some(Ok(_)))
}

/// One figure written to disk.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    /// File stem, unique within the report, e.g. `trial1-inter-arrival`.
    pub id: String,
    /// Caption.
    pub title: String,
    /// The PNG (absent without a font).
    pub png: Option<PathBuf>,
    /// The SVG.
    pub svg: PathBuf,
    /// Number of series drawn.
    pub series: usize,
}

/// Draw `spec` into `dir` as `<id>.svg` and, when a font is loaded, `<id>.png`.
pub fn write_figure(spec: &ChartSpec, dir: &Path, id: &str) -> Result<Figure, PlotError> {
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Io {
        what: "cannot create",
        path: dir.to_path_buf(),
        source,
    })?;
    let w = chart::write(spec, dir, id, font_loaded())?;
    Ok(Figure {
        id: id.to_string(),
        title: spec.title.clone(),
        png: w.png,
        svg: w.svg,
        series: spec.series.len(),
    })
}
